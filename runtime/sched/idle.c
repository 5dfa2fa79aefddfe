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

/* An M's note: EMPTY, NOTIFIED, SLEEPING (in an event base) or FUTEX
 * (on the note's futex). A sleeper spins a little first: work often comes
 * back within microseconds, and a waker that finds it still spinning needs
 * no system call, nor does it. Asleep, the M waits until its P's first
 * timer at the latest, where the readiness of descriptors wakes it too:
 * in the base that holds every descriptor (io/poller.h), if no other M
 * sleeps there - a waker ends that wait through libevent's cross-thread
 * notification - else on its note's futex, while the other watches the
 * descriptors for all. So a burst of readiness wakes one thread, not one
 * per base; that thread queues what it found and wakes another only as
 * any producer does (invariant 5). With one worker, or before any
 * descriptor is used, an M sleeps in its own P's base. */
#define NOTE_SPINS 100
#define TIMER_SPIN (50 * GORO_USEC)

/* Where m sleeps: the descriptors' base, once descriptors are in use and
 * another P could be asleep in it too; else its own P's. */
static struct goro_p *sleep_base(struct goro_m *m)
{
    if (goro__sched.nprocs > 1 && atomic_load_explicit(&goro__io_used, memory_order_relaxed))
        return GORO_NETPOLL_FDS_P;
    return m->p;
}

/* Another M sleeps in the descriptors' base: m sleeps on its note's futex
 * until notified (1), kicked (-1: the caller looks again, at the base
 * too) or its P's first timer is due (0; the note reads FUTEX). */
static int futex_sleep(struct goro_m *m)
{
    uint32_t n = NOTE_SLEEPING;
    if (!atomic_compare_exchange_strong(&m->note, &n, NOTE_FUTEX)) {
        GORO_ASSERT(n == NOTE_NOTIFIED);    /* only a waker moves it off SLEEPING */
        atomic_store_explicit(&m->note, NOTE_EMPTY, memory_order_relaxed);
        return 1;
    }
    for (;;) {
        /* The note reads FUTEX before the timers are read: a timer started
         * after this look finds FUTEX, and its kick ends the wait. */
        goro__full_barrier();
        int64_t first = goro__timers_first(m->p), now = goro__now();
        if (first <= now)
            return 0;
        goro__futex_wait_ns(&m->note, NOTE_FUTEX, first == INT64_MAX ? -1 : first - now);
        n = atomic_load_explicit(&m->note, memory_order_acquire);
        if (n == NOTE_NOTIFIED) {
            atomic_store_explicit(&m->note, NOTE_EMPTY, memory_order_relaxed);
            return 1;
        }
        if (n == NOTE_EMPTY)
            return -1;
    }
}

/* Fewer Ps may be busy than exist (invariant 11, active.c) and one is:
 * it looks at the descriptors between its coroutines, as a lone worker
 * does, and an idle M sleeps on its futex instead of in the base, where
 * the kernel would wake it for every burst of readiness. The last P to
 * go idle finds none busy and sleeps in the base. */
static bool busy_one_polls(void)
{
    return atomic_load_explicit(&goro__sched.active, memory_order_relaxed) < goro__sched.nprocs &&
           !goro__classes_in_use() &&
           atomic_load(&goro__sched.npidle) < goro__sched.nprocs;
}

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
    atomic_store_explicit(&m->sleeps, atomic_load_explicit(&m->sleeps, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    /* Before the note reads SLEEPING: a waker that sees SLEEPING reads
     * where (m_notify, goro__p_kick). */
    struct goro_p *base = sleep_base(m);
    atomic_store(&m->sleep_base, base);
    atomic_store(&m->p->sleeping_m, m);
    for (;;) {
        uint32_t n = NOTE_EMPTY;
        if (atomic_compare_exchange_strong_explicit(&m->note, &n, NOTE_SLEEPING,
                memory_order_acq_rel, memory_order_acquire) || n == NOTE_SLEEPING) {
            if (base == GORO_NETPOLL_FDS_P && busy_one_polls()) {
                int woken = futex_sleep(m);
                if (woken >= 0)
                    return woken;
                continue;
            }
            int64_t slept_from = virt ? goro__real_now() : 0;
            int got = goro__netpoll(base, m->p, &m->note, goro__runq_room(m->p), &m->slept);
            if (got == GORO_NETPOLL_TAKEN) {
                int woken = futex_sleep(m);
                if (woken >= 0)
                    return woken;
                continue;
            }
            if (got > 0)
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
    uint32_t was = atomic_exchange_explicit(&m->note, NOTE_NOTIFIED, memory_order_acq_rel);
    struct goro_p *base = atomic_load_explicit(&m->sleep_base, memory_order_relaxed);
    if (was == NOTE_SLEEPING && base)
        goro__netpoll_break(base);
    else if (was == NOTE_FUTEX)
        goro__futex_wake(&m->note, 1);
}

/* p's first timer moved earlier, by a thread that does not hold p: the
 * sleep of p's M, which ends by the timer it read, ends now and looks
 * again. A break of p's own base stays for its next sleep there. */
void goro__p_kick(struct goro_p *p)
{
    goro__netpoll_break(p);
    goro__full_barrier();           /* the timer, before the note is read */
    struct goro_m *m = atomic_load(&p->sleeping_m);
    if (!m)
        return;
    uint32_t n = atomic_load(&m->note);
    struct goro_p *base = atomic_load(&m->sleep_base);
    if (n == NOTE_SLEEPING && base && base != p)
        goro__netpoll_break(base);
    else if (n == NOTE_FUTEX && atomic_compare_exchange_strong(&m->note, &n, NOTE_EMPTY))
        goro__futex_wake(&m->note, 1);
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

/* Wakes one idle M as a spinner, unless somebody already spins (inv. 6)
 * or, unless forced, as many Ps are busy as may be (inv. 11). */
static void spinner_start_as(bool force)
{
    if (!force && goro__active_full())
        return;                     /* invariant 11: the busy Ps run it */
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

static void spinner_start(void)
{
    spinner_start_as(false);
}

/* sysmon: a busy P has kept one coroutine past STUCK with work queued
 * behind it (invariant 11's exception): an idle M, whatever the count. */
void goro__spinner_start_stuck(void)
{
    goro__full_barrier();
    if (atomic_load(&goro__sched.npidle) != 0 && atomic_load(&goro__sched.nmspinning) == 0)
        spinner_start_as(true);
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

