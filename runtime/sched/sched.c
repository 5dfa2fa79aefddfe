/*
 * The scheduler: M worker threads run coroutines from P run queues. This
 * file is its loop: what an M does on g0 - the search for work (the
 * local pick, timers, the poller, stealing) and its sleep - and the
 * invariants below, which the other files of sched/ keep:
 *   switch.c   leaving and resuming a coroutine (2, 3), yield, preemption
 *   park.c     waiting and waking: park, the claim protocol, ready (1, 2, 5)
 *   runq.c     the run queues, class lists, pinned coroutines, stealing (1, 4, 9)
 *   deadline.c the deadline class: reservations, EDF lists, budgets (1, 9)
 *   idle.c     idle Ms and Ps, spinners (5, 6, 7, 11)
 *   active.c   how many Ps may be busy at once (11)
 *   handoff.c  a P's owner and the hand-off sysmon drives (8)
 *   vclock.c   the virtual clock (10)
 *   outside.c  threads the runtime does not own
 *   worker.c   starting and stopping the workers
 * This file keeps 4 and 9 (the pick's order) and 5, 6, 7, 11 (an M's side
 * of going idle: the recheck, when it spins, taking its P back).
 *
 * Vocabulary (after Go): a P is the right to run coroutines and owns a local
 * run queue; an M is a worker thread; g0 is an M's own thread stack, where
 * it looks for work and sleeps. Today every M owns one P for life; the P/M
 * split exists so that a P can be handed to another thread when its M is
 * stuck in a blocking call.
 *
 * Invariants, and why they hold:
 *
 * 1. A coroutine is in at most one place: the running slot of one M, one
 *    run queue slot / runnext / the global queue, or one waiter list - or,
 *    throttled, its reservation's timer (deadline.c). It is
 *    put into a queue only by goro__ready() (PARKED -> RUNNABLE), by spawn
 *    (FREE -> RUNNABLE) or by the YIELD post-switch action.
 *
 * 2. A context is never resumed before it is fully saved. A coroutine that
 *    leaves never publishes itself: the context it switches to does, in
 *    post_switch(), after goro__ctx_switch has stored the leaver's sp. For
 *    PARK the leaver still holds the lock that guards its waiter record;
 *    post_switch releases it, so a waker (who needs that lock to find the
 *    waiter) can only call goro__ready() after the save.
 *
 * 3. Nothing here keeps "the current M" across a switch: a coroutine may
 *    come back on another thread. After every switch it is re-read through
 *    goro__m(), which the compiler may not cache, and errno is restored.
 *
 * 4. Run queues: only the owning P pushes to its ring (store-release of
 *    tail); anyone takes by CAS on head, after reading the slot. runnext is
 *    taken first and inherits the time slice (schedtick is not bumped), so a
 *    pair of coroutines waking each other shares one slice; once every 61
 *    slices the global queue is looked at first so that it cannot starve.
 *    Until the monitor thread preempts long slices, a pair may inherit at
 *    most RUNNEXT_STREAK turns in a row before the ring goes first once.
 *
 * 5. No lost wake-ups. A producer makes work visible (run queue or global
 *    queue), then - with a full barrier in between - reads nmspinning and
 *    npidle and wakes an idle M if nobody spins (spinner_start). Producers are
 *    spawn, wake-ups, and an M that moves extras from the global queue onto
 *    its own ring. An M that gives up puts its P on the idle list, stops
 *    spinning if it was, then - full barrier - looks again at every run
 *    queue and the global queue before it sleeps. One of the two always
 *    sees the other: either the producer sees the idle P and no spinner
 *    (and wakes one), or a spinner that will look, or the idle M sees the
 *    work - unless as many Ps are busy as may be (11): then neither side
 *    acts, and a busy P runs the work.
 *
 * 6. At most one M is woken at a time (nmspinning 0 -> 1 by CAS), an M may
 *    start spinning only while 2 * nmspinning < busy Ps, and a spinner that
 *    finds work wakes the next one: parallelism ramps up without a herd.
 *
 * 7. An idle M sleeps on its note with its P on the idle list; whoever takes
 *    that P off the list (spinner_start, or the M itself when it finds work during
 *    its recheck) is the one who makes it run, so a P is never run twice.
 *
 * 8. Hand-off. An M may use its P only while p->owner is that M. Runtime
 *    code that uses the P from a coroutine runs between goro__rt_enter and
 *    goro__rt_leave, which count m->in_rt (g0 is always inside). sysmon takes
 *    the P of an M stuck outside the runtime (a blocking system call, code
 *    that cannot be preempted) in three steps: owner m -> RETAKING by CAS,
 *    membarrier(), and only if in_rt is still 0 does it give the P to
 *    another M. The membarrier is the full barrier the M side does not pay
 *    for on every entry: either sysmon sees in_rt > 0 and gives the P back,
 *    or the M's goro__rt_enter sees owner != m. An M that finds its P gone moves
 *    its coroutine to the global queue and becomes a spare - but only in
 *    yield and exit. Elsewhere the caller may hold what ties it to this
 *    thread (go()'s captured arguments, an object lock): it then does
 *    without a P (global queue, global stack pool) or parks through g0.
 *    The number of Ps, hence of threads running coroutines, never changes.
 *
 * 9. Classes. A runnable NORMAL coroutine goes where it always did (ring,
 *    runnext, global queue); a HIGH or LOW one goes to its class's list on
 *    the P that readied it, or the global one (goro__queue_ready). A pick takes
 *    HIGH before the ring and LOW after it, and an idle M steals HIGH first,
 *    LOW last. Starvation is bounded by the slice count, as for the global
 *    queue: on slice 2 of every 61 the ring goes before HIGH, on slice 3
 *    LOW goes first. The class is read when g is queued: a coroutine lent a
 *    higher class keeps its place in the ring, but LOW lists are looked at
 *    again when a LOW coroutine is lent one (low_rescan), so that a holder
 *    whose waiter is more urgent than everything else is not left behind
 *    the very work the waiter outranks. The lists count as run queues for
 *    invariant 5: the recheck before sleeping reads their counts too,
 *    always; a pick reads them only once goro__sched.classes_used is set
 *    (before the first coroutine of another class exists), so a program
 *    of NORMAL coroutines pays one load of a line the pick reads anyway.
 *    The deadline class (deadline.c) is one more list of each P and of
 *    the scheduler, ordered by deadline, that a pick takes before every
 *    class and a thief steals first; it counts for invariant 5 likewise.
 *
 * 10. The virtual clock (deterministic testing: goro_config_t.clock). One
 *    P, no preemption, and goro_now() stands still while coroutines run.
 *    The P's owner, finding nothing to run (goro__note_sleep), moves the clock
 *    to the next deadline - its timers' or a waiting outside thread's -
 *    and runs what is due; unless a coroutine waits on a descriptor (a
 *    read, a write, a select with a descriptor case) or an
 *    offloaded call (real_waits): then the clock follows the real one
 *    while the owner sleeps (goro__clock_slept), so that no deadline passes
 *    before the world had its real time to answer. The seed decides, at
 *    each pick, which runnable coroutine goes next (goro__seeded_turn): with
 *    nothing else choosing (one thread, no preemption, a clock that moves
 *    only here) the same seed gives the same order. Threads outside the
 *    runtime are not ordered by it: a test runs its body in a coroutine.
 *
 * 11. How many Ps may be busy (active.c): goro__sched.active, 1..nprocs,
 *    nprocs unless sysmon found the workers crowded on too few CPUs (only
 *    with GORO_ADAPT=1).
 *    While nprocs - npidle >= active (goro__active_full), a producer wakes
 *    no idle M and an M going idle does not take its P back for work
 *    queued elsewhere; an idle M sleeps on its futex, not in the
 *    descriptors' base, while another P is busy. No work is stranded: it
 *    was made visible on a busy P's queue or the global queue, a busy P
 *    looks at every queue (its own, the global one every 61 slices or
 *    when sysmon flags it, the others' by stealing) before it goes idle,
 *    and the last P to go idle finds fewer busy than may be, rechecks
 *    and sleeps in the base. A busy P that keeps one coroutine STUCK
 *    (1 ms) with work queued behind it gets an idle M all the same
 *    (sysmon.c, check_stuck): the queue waits a slice at most, not for a
 *    coroutine that never switches. Programs that use classes, or a
 *    count of nprocs, see none of this (goro__active_full is false).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"
#include "sched/sched.h"
#include "io/poller.h"
#include "coro/coro.h"
#include "base/sanitizer.h"
#include "debug/debug.h"                /* goro__stall_leaving */
#include "coro/cxx_eh.h"                 /* C++: exception state per coroutine */
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"
#include "sched/deadline.h"

GORO_HIDDEN struct goro_sched goro__sched = {
    .lock = GORO_LOCK_INIT_RANK(GORO_RANK_SCHED),
    .classq.lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF),
    .prio_inherit = true,
};

__thread struct goro_m *goro__tls_m __attribute__((tls_model("initial-exec")));

/* The M running this code. Not inlinable and not pure (the empty asm), so a
 * caller re-reads it after every switch instead of reusing a stale value. */
GORO_NOINLINE struct goro_m *goro__m(void)
{
    struct goro_m *m = goro__tls_m;
    __asm__ volatile("" : "+r"(m));
    return m;
}

GORO_NOINLINE struct goro *goro__current(void)
{
    struct goro_m *m = goro__m();
    return m ? m->curg : NULL;
}

/* The LOW lists this P can take from, looked at again (invariant 9). */
static void low_rescan(struct goro_p *p)
{
    p->low_seen = atomic_load_explicit(&goro__sched.low_rescan, memory_order_relaxed);
    goro__pq_rescan(p, p);
    goro__pq_rescan(p, NULL);
}

/* Picks the next coroutine from local work and the global queue, as a
 * coroutine leaving and g0 both do first (stealing is g0's job). */

struct goro *goro__pick_local(struct goro_m *m, bool *inherit)
{
    struct goro_p *p = m->p;
    struct goro *g;
    *inherit = false;
    uint32_t t = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    /* The global queue every 61 slices (Go's rule), or when sysmon saw it
     * wait a while: slices can be long, and 61 of them too long. */
    bool want = atomic_load_explicit(&p->want_global, memory_order_relaxed);
    if ((t % 61 == 0 || want) && (g = goro__globrunq_get(p, 1))) {
        if (want)
            atomic_store_explicit(&p->want_global, 0, memory_order_relaxed);
        return g;
    }
    /* Preempted coroutines (they may only run here) wait behind the queue,
     * which they would otherwise starve, but get a turn every 61 slices. */
    if (t % 61 == 1 && goro__pinned_any(m))
        return goro__pinned_pop(m);
    /* The classes (invariant 9): HIGH first but on slice 2, LOW last but
     * on slice 3; and LOW coroutines lent a class since they were queued
     * leave the LOW lists first. */
    bool classes = goro__classes_in_use();
    if (classes) {
        if (atomic_load_explicit(&goro__sched.low_rescan, memory_order_relaxed) != p->low_seen)
            low_rescan(p);
        /* Reserved coroutines before every class, earliest deadline first
         * (deadline.c): admission and budgets bound what they take. */
        if (unlikely(goro__dl_in_use()) && (g = goro__dl_get(m, p)))
            return g;
        if ((t % 61 == 3 && (g = goro__pq_get(p, GORO_PQ_LOW))) ||
            (t % 61 != 2 && (g = goro__pq_get(p, GORO_PQ_HIGH))))
            return g;
    }
    if (unlikely(atomic_load_explicit(&goro__sched.virtual_clock, memory_order_relaxed)))
        goro__seeded_turn(p);
    if ((g = goro__timed_pop(p)) || (g = goro__runq_get(p, inherit)) ||
        (g = goro__globrunq_get(p, 0)) ||
        (classes && ((g = goro__pq_get(p, GORO_PQ_HIGH)) || (g = goro__pq_get(p, GORO_PQ_LOW)))))
        return g;
    return goro__pinned_pop(m);
}


struct goro_p *goro__current_p(void)
{
    struct goro_m *m = goro__m();
    return m ? m->p : NULL;
}

/* The one drain of a poll's result (or another P's timers'). Queues it on
 * p in the order found (timers by deadline) and behind what was already
 * queued; returns one to run now only when nothing was. What does not fit the
 * ring goes to the global queue in order - not goro__runq_put's overflow, which
 * would move the oldest there and let the newest overtake them. With p
 * NULL (sysmon has none) all of it goes there. Several: new work for idle
 * Ms (invariant 5). */
static struct goro *inject_polled(struct goro_p *p, struct goro_polled *list)
{
    struct goro *g = list->head;
    int n = list->n;
    *list = (struct goro_polled){ NULL, NULL, 0 };
    if (!g)
        return NULL;
    struct goro *first = NULL;
    if (p && goro__runq_empty(p)) {
        first = g;
        g = g->next;
    }
    struct gq_batch spilled;
    goro__gq_batch_init(&spilled);
    bool spill = !p;                /* the ring filled: the rest go global */
    for (struct goro *next; g; g = next) {
        next = g->next;             /* before g is published: it may run at once */
        int prio = goro__queue_class(g);
        if (prio != GORO_PRIO_NORMAL) {
            goro__pq_put(p, g, prio);
            continue;
        }
        spill = spill || goro__runq_room(p) == 0;
        if (!spill) {
            goro__runq_put(p, g, false);
            continue;
        }
        goro__gq_batch_add(&spilled, g);
    }
    goro__gq_batch_flush(&spilled);
    if (n > 1 || !p)
        goro__spinner_start_if_idle(p);
    return first;
}

/* A non-blocking look at the base that holds every descriptor (P 0's:
 * io/poller.h), by any M with a P: its own look every POLL_INTERVAL slices
 * and when it runs dry, and an idle M's while it spins. Another M's look
 * under way, or one asleep in the base, makes it a no-op. */
static struct goro *poll_fds(struct goro_m *m)
{
    struct goro_p *p = m->p;
    p->poll_tick = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    struct goro_polled got;
    if (!goro__io_in_use() ||
        goro__netpoll(GORO_NETPOLL_FDS_P, p, NULL, goro__runq_room(p), &got) <= 0)
        return NULL;
    return inject_polled(p, &got);
}

/* ---- timers in the scheduling loop (sched/timer.c) ---- */

/* Runs the due timers of `of`: m's own P's, whose coroutines then run
 * before its ring (goro__timed_pop), or those of a busy P whose owner has not
 * got to them, which m's P queues as a poll's (and runs the first). */
static struct goro *run_timers(struct goro_m *m, struct goro_p *of)
{
    int64_t now;
    struct goro_polled woke = { NULL, NULL, 0 };
    if (!goro__timers_due_at(of, of == m->p, &now) || goro__timers_run(of, now, &woke) == 0)
        return NULL;
    if (of == m->p) {
        goro__timed_append(of, &woke);
        return goro__timed_pop(of);
    }
    return inject_polled(m->p, &woke);
}

/* An idle M runs the due timers of other Ps (Go's timer stealing): their
 * owners may be in a long slice. */
static struct goro *run_others_timers(struct goro_m *m)
{
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *q = &goro__sched.procs[i];
        struct goro *g;
        if (q != m->p && (g = run_timers(m, q)))
            return g;
    }
    return NULL;
}


/* ---- the scheduling loop's search for work ---- */

/* A spinner's waits for another M's look at the descriptors, per search,
 * and how long one may last. */
#define LOOK_WAITS 4
#define LOOK_WAIT (20 * GORO_USEC)

/* Waits while another M looks at p's base without sleeping in it, at most
 * LOOK_WAIT: true if a look was under way. */
static bool wait_for_look(struct goro_p *p)
{
    if (!goro__netpoll_looking(p))
        return false;
    int64_t until = goro__now() + LOOK_WAIT;
    for (int i = 0; goro__netpoll_looking(p); i++)
        if (i % 64 == 63 && goro__now() > until)
            break;
        else
            cpu_relax();
    return true;
}

/* Returns the next coroutine for m, sleeping while there is none; NULL
 * when the runtime stops. *inherit: it came from runnext. */
static struct goro *find_runnable(struct goro_m *m, bool *inherit)
{
    struct goro_p *p = m->p;
    struct goro *g;
    int looking_waits = 0;
top:
    *inherit = false;
    if (atomic_load(&goro__sched.stopping))
        return NULL;
    /* Lost while a coroutine parked P-less (goro__park). g0 counts as
     * inside the runtime: a retake under way sees that and backs off. */
    if (m->p && goro__p_owner_settled(m->p) != m)
        m->p = NULL;
    if (!m->p) {
        if (!goro__m_wait_for_p(m))
            return NULL;
        p = m->p;
    }
    /* A slice cut short by preemption: what waits on timers, I/O and the
     * global queue goes first - the long runner had its turn. */
    bool cut = goro__preempt_requested(p);
    /* sysmon asks when such an M has waited a slice: coroutines that
     * switch all the time never have a slice cut (sysmon.c, check_waitp) */
    bool asked = goro__give_wanted(p);
    if (asked)
        atomic_store_explicit(&p->want_give, 0, memory_order_relaxed);
    bool give = cut || asked;
    if (give && atomic_load_explicit(&goro__sched.nwaitp, memory_order_relaxed) > 0) {
        /* An M whose preempted coroutines can run nowhere else waits for
         * a P, and busy Ps never fall idle to hand theirs over: at the end
         * of a cut slice, give this one (they take turns, slice by slice). */
        goro__lock(&goro__sched.lock);
        struct goro_m *w = goro__waitp_take_locked();
        if (w) {
            /* The cut is spent here: still seen by w, it made w give the
             * P straight back when this M waits with pinned coroutines
             * too (the waiters' list is last in, first out), and the two
             * passed it to and fro without running anything. */
            atomic_store_explicit(&p->preempt_req,
                                  atomic_load_explicit(&p->schedtick, memory_order_relaxed),
                                  memory_order_relaxed);
            goro__give_p_locked(p, w);
        }
        goro__unlock(&goro__sched.lock);
        if (w) {
            goro__m_notify_handed(w);
            m->p = NULL;
            goro__spinning_drop(m);
            goto top;
        }
    }
    if ((g = run_timers(m, p)))
        return g;
    if ((cut || goro__poll_due(p)) && (g = poll_fds(m)))
        return g;
    if (cut && (g = goro__globrunq_get(p, 1)))
        return g;
    if ((g = goro__pick_local(m, inherit)))
        return g;
    if ((g = poll_fds(m)))
        return g;

    int busy = goro__sched.nprocs - atomic_load(&goro__sched.npidle);
    if (m->spinning || 2 * atomic_load(&goro__sched.nmspinning) < busy) {
        if (!m->spinning) {
            m->spinning = true;
            atomic_fetch_add(&goro__sched.nmspinning, 1);
        }
        /* No second look at the descriptors: poll_fds just did. */
        if ((g = goro__steal_work(p)) || (g = run_others_timers(m)))
            return g;
        /* Another M's look at the descriptors is under way (our own
         * poll_fds found the base taken): what it finds goes on its ring
         * in a few microseconds, and a spinner steals it there without
         * the sleep and wake-up that going idle would cost both threads.
         * Bounded: one look's time, then the search starts over. */
        if (goro__io_in_use() && looking_waits++ < LOOK_WAITS &&
            wait_for_look(GORO_NETPOLL_FDS_P))
            goto top;
    }

    /* Nothing: give up P (goes idle), then recheck (invariant 5). */
    goro__lock(&goro__sched.lock);
    if (goro__global_work()) {
        goro__unlock(&goro__sched.lock);
        goto top;                   /* goro__globrunq_get does the producer's part */
    }
    /* An M with pinned coroutines needs a P more than we do. */
    struct goro_m *w = goro__waitp_take_locked();
    if (w) {
        goro__give_p_locked(p, w);
        goro__unlock(&goro__sched.lock);
        goro__m_notify_handed(w);
        m->p = NULL;
        goro__spinning_drop(m);
        goto top;
    }
    goro__pidle_put(p);
    atomic_store_explicit(&p->running, 0, memory_order_relaxed);
    goro__unlock(&goro__sched.lock);

    /* Every M going idle rechecks, spinning or not: work another M moved
     * onto its own ring (say, extras from the global queue) while this one
     * was on its way here is then seen by one of the two sides. */
    {
        goro__spinning_drop(m);
        goro__full_barrier();
        /* invariant 11: with as many Ps busy as may be, they run it (the
         * last to go idle finds none busy and looks) */
        if (!goro__active_full() && (goro__any_runq_nonempty() || goro__global_work())) {
            bool still_idle = goro__pidle_take_back(p);
            if (still_idle) {
                atomic_store_explicit(&p->running, 1, memory_order_relaxed);
                m->spinning = true;
                atomic_fetch_add(&goro__sched.nmspinning, 1);
                goto top;
            }
            /* a waker took p and is waking us: fall through to the note */
        }
    }
    /* Idle: a good moment to give surplus stacks back to the kernel. */
    while (goro__slab_trim_idle() &&
           atomic_load_explicit(&m->note, memory_order_relaxed) != NOTE_NOTIFIED)
        ;
    /* invariant 5: a sleeper is no spinner, so a producer that finds no
     * spinner wakes one */
    GORO_ASSERT(!m->spinning);
    GORO_TRACE(GORO_TEV_IDLE, 0, 0, 0, 0, 0);
    bool woken = goro__note_sleep(m);
    GORO_TRACE(GORO_TEV_BUSY, 0, 0, 0, 0, 0);
    if (!woken) {                   /* until a waker hands p back (inv. 7) */
        /* Events made work while p was idle: take p back - unless a waker
         * took it first, which then counted us as a spinner. */
        bool mine = goro__pidle_take_back(p);
        if (mine)
            atomic_store_explicit(&m->note, NOTE_EMPTY, memory_order_relaxed);
        else
            goro__note_absorb(m);
        m->spinning = !mine;
        atomic_store_explicit(&p->running, 1, memory_order_relaxed);
        if ((g = inject_polled(p, &m->slept)))
            return g;
        goto top;
    }
    /* Only spinner_start wakes an M while running (stopping aside), and it counted
     * us in nmspinning: m->spinning is written by m alone, never by the
     * waker, so it cannot be lost in a race with the recheck above. */
    m->spinning = !atomic_load(&goro__sched.stopping);
    /* invariant 7: the waker took p off the idle list for us */
    GORO_ASSERT(!p->idle || !m->spinning);
    atomic_store_explicit(&p->running, 1, memory_order_relaxed);
    goto top;
}

/* ---- the loop ---- */

void *goro__m_main(void *arg)
{
    struct goro_m *m = arg;
    goro__tls_m = m;
    m->errno_ptr = &errno;
    __atomic_store_n(&m->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);  /* sysmon reads it */
    char name[16];                  /* for top -H, gdb's info threads, core files */
    snprintf(name, sizeof name, "goro-m%d", m->id);
    pthread_setname_np(pthread_self(), name);
    m->g0.flags = GORO_F_G0;
    atomic_store_explicit(&m->in_rt, 1, memory_order_relaxed);   /* g0 is runtime */
    goro__san_thread_init(&m->g0);
    goro__fault_thread_init(m);
    if (m->p)
        atomic_store_explicit(&m->p->running, 1, memory_order_relaxed);
    for (;;) {
        bool inherit;
        struct goro *g = find_runnable(m, &inherit);
        if (!g)
            break;
        if (m->spinning)
            goro__stop_spinning(m);
        goro__execute(m, g, inherit);
    }
    goro__dl_backstop_fini(m);
    goro__fault_thread_fini(m);
    goro__tls_m = NULL;
    return NULL;
}

/* ---- for sysmon ---- */

void goro__sysmon_attach(struct goro_m *m)
{
    goro__tls_m = m;
}

/* sysmon polled a base (it has no P): what it found goes global. */
void goro__inject_global(struct goro_polled *list)
{
    inject_polled(NULL, list);
}
