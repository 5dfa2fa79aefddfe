/*
 * Ms that sleep and wake (each M's note), the list of idle Ps, and the
 * spinners that look for work.
 *
 * Keeps invariants 5 (the producer's check: goro__spinner_start_if_idle), 6 (one
 * M woken at a time; a spinner that finds work wakes the next) and 7 (an
 * idle P is run by whoever takes it off the list). See the prose at the
 * top of sched.c.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"

#ifdef GORO_TSAN
GORO_HIDDEN _Atomic int goro__barrier_word;
#endif

/* ---- sleeping and waking Ms ---- */

/* An M's note: EMPTY, NOTIFIED, or SLEEPING (in its P's event base). A
 * sleeper spins a little first: work often comes back within microseconds,
 * and a waker that finds it still spinning needs no system call, nor does
 * it. Asleep, the M waits in its event base, so that I/O of the coroutines
 * that parked here wakes it too, until its P's first timer at the latest;
 * a waker ends that wait through libevent's cross-thread notification. */
#define NOTE_SPINS 100
#define TIMER_SPIN (50 * GORO_USEC)

/* Returns true when woken through the note, false when events made
 * coroutines runnable (in m->slept) or a timer of m's P is due (the
 * poll slept until then); the note then still reads SLEEPING. */
bool goro__note_sleep(struct goro_m *m)
{
    bool virt = atomic_load_explicit(&goro__sched.virtual_clock, memory_order_relaxed);
    if (virt && goro__clock_jump(m->p))
        return false;               /* a timer is due now */
    for (int i = 0; i < NOTE_SPINS; i++) {
        if (atomic_load_explicit(&m->note, memory_order_relaxed) == NOTE_NOTIFIED)
            break;
        cpu_relax();
    }
    /* A timer due within TIMER_SPIN: waiting for it awake costs less than
     * the alarm's wake-up, which is tens of microseconds late. */
    int64_t first = goro__timers_first(m->p);
    if (!virt && first != INT64_MAX && first - goro__now() < TIMER_SPIN) {
        while (atomic_load_explicit(&m->note, memory_order_relaxed) != NOTE_NOTIFIED) {
            if (goro__now() >= first)
                return false;       /* slept is empty: the timer is due */
            cpu_relax();
        }
    }
    for (;;) {
        uint32_t n = NOTE_EMPTY;
        if (atomic_compare_exchange_strong_explicit(&m->note, &n, NOTE_SLEEPING,
                memory_order_acquire, memory_order_acquire) || n == NOTE_SLEEPING) {
            int64_t slept_from = virt ? goro__real_now() : 0;
            if (goro__netpoll(m->p, &m->note, goro__runq_room(m->p), &m->slept) > 0)
                return false;
            /* A callback of the poll (the signals' doorbell, say) may have
             * readied a coroutine the ordinary way, onto this P's own
             * queue: with one P, nobody else would ever run it
             * (invariant 5: the producer's check skips the wake-up when
             * the only P is its own). */
            if (!goro__runq_empty(m->p))
                return false;
            if (virt && goro__clock_slept(m->p, slept_from))
                return false;       /* the clock moved: a timer is due */
            if (goro__timers_due(m->p))
                return false;       /* the alarm: m->slept is empty */
            continue;
        }
        /* NOTIFIED (read with acquire above): consume it. A second notice
         * meanwhile is only ever `stopping`, which the caller checks. */
        atomic_store_explicit(&m->note, NOTE_EMPTY, memory_order_relaxed);
        return true;
    }
}

void goro__m_notify(struct goro_m *m)
{
    if (atomic_exchange_explicit(&m->note, NOTE_NOTIFIED, memory_order_release) == NOTE_SLEEPING &&
        m->p)
        goro__netpoll_break(m->p);
}

/* A waker took our P off the idle list while events woke us: its notice
 * is a few instructions away. Wait for it, so the note is consistent. */
void goro__note_absorb(struct goro_m *m)
{
    for (int step = 0; atomic_load_explicit(&m->note, memory_order_acquire) != NOTE_NOTIFIED;
         step++)
        spin_or_yield(step, 1001);
    atomic_store_explicit(&m->note, NOTE_EMPTY, memory_order_relaxed);
}

/* Under goro__sched.lock. */
struct goro_p *goro__pidle_get(void)
{
    struct goro_p *p = goro__sched.pidle;
    GORO_ASSERT(!p || p->idle);     /* invariant 7: the list holds idle Ps only */
    if (p) {
        goro__sched.pidle = p->idle_next;
        p->idle = false;
        atomic_fetch_sub(&goro__sched.npidle, 1);
    }
    return p;
}

void goro__pidle_put(struct goro_p *p)
{
    GORO_ASSERT(!p->idle);          /* invariant 7: a P is on the list once */
    p->idle = true;
    p->idle_next = goro__sched.pidle;
    goro__sched.pidle = p;
    atomic_fetch_add(&goro__sched.npidle, 1);
}

/* p's own M takes p off the idle list again, unless a waker took it first
 * (and is waking the M: invariant 7). True if it was still there. */
bool goro__pidle_take_back(struct goro_p *p)
{
    goro__lock(&goro__sched.lock);
    bool still_idle = p->idle;
    if (still_idle) {
        struct goro_p **pp = &goro__sched.pidle;
        while (*pp != p)
            pp = &(*pp)->idle_next;
        *pp = p->idle_next;
        p->idle = false;
        atomic_fetch_sub(&goro__sched.npidle, 1);
    }
    goro__unlock(&goro__sched.lock);
    if (still_idle)
        goro__sysmon_kick();        /* a P is busy again: watch it */
    return still_idle;
}

/* Wakes one idle M as a spinner, unless somebody already spins (inv. 6). */
static void spinner_start(void)
{
    int zero = 0;
    if (!atomic_compare_exchange_strong(&goro__sched.nmspinning, &zero, 1))
        return;
    goro__lock(&goro__sched.lock);
    struct goro_p *p = goro__pidle_get();
    struct goro_m *pm = p ? p->m : NULL;
    goro__unlock(&goro__sched.lock);
    if (!p) {
        atomic_fetch_sub(&goro__sched.nmspinning, 1);
        return;
    }
    goro__sysmon_kick();            /* a P is busy again: watch it */
    goro__m_notify(pm);                  /* it wakes as the spinner we counted */
}

/* Producer side of invariant 5: call after making work visible. held: the
 * P the caller holds inside the runtime (goro__rt_enter or g0), else NULL - an
 * M's p field alone proves nothing: sysmon may have handed that P on. */
void goro__spinner_start_if_idle(struct goro_p *held)
{
    /* invariant 5: held is the caller's own (the shortcut below skips the
     * wake-up only because the producer runs on the one P) */
    GORO_ASSERT(!held || goro__p_owner_settled(held) == goro__m());
    if (goro__sched.nprocs == 1 && held)
        return;                     /* the only P is ours, and we are awake */
    goro__full_barrier();
    if (atomic_load(&goro__sched.npidle) != 0 && atomic_load(&goro__sched.nmspinning) == 0)
        spinner_start();
}

void goro__stop_spinning(struct goro_m *m)
{
    m->spinning = false;
    int was = atomic_fetch_sub(&goro__sched.nmspinning, 1);
    GORO_ASSERT(was > 0);           /* invariant 6: every spinner was counted */
    if (was == 1 && atomic_load(&goro__sched.npidle) > 0)
        spinner_start();                    /* chain: the next spinner takes over */
}

/* m stops counting as a spinner without handing the role on: it is about
 * to sleep, or has just given its P away. */
void goro__spinning_drop(struct goro_m *m)
{
    if (m->spinning) {
        m->spinning = false;
        int was = atomic_fetch_sub(&goro__sched.nmspinning, 1);
        GORO_ASSERT(was > 0);       /* invariant 6: every spinner was counted */
        (void)was;
    }
}

/* Under goro__sched.lock: the first M waiting for a P for its pinned coroutines,
 * taken off the list, or NULL. */
struct goro_m *goro__waitp_take_locked(void)
{
    struct goro_m *w = goro__sched.waitp;
    if (w) {
        goro__sched.waitp = w->next_free;
        atomic_fetch_sub_explicit(&goro__sched.nwaitp, 1, memory_order_relaxed);
    }
    return w;
}

