/*
 * sysmon: the monitor thread. It owns no P and runs no coroutine. Every
 * 20 us at first - backing off to 10 ms while nothing needs it, asleep
 * once every P is idle after 50 quiet rounds - it looks at each P:
 *   - a P whose slice (schedtick) has not changed for slice_ns runs one
 *     coroutine too long: ask for a preemption (preempt.c), again every
 *     PREEMPT_RETRY while it lasts;
 *   - coroutines waiting in the global queue for GQ_WAIT: make every P
 *     look there at its next switch;
 *   - a thread with pinned coroutines waiting a slice for a P: make every
 *     busy P give itself at its next switch (check_waitp);
 *   - HIGH coroutines queued while Ps run lower classes: cut as many of
 *     those slices short (check_classes); the same for reserved ones, and
 *     a reserved coroutine's slice once its budget is spent
 *     (goro__dl_watch, deadline.c; it pokes sysmon awake for that);
 *   - a busy P whose event base nobody polled for POLL_STARVED: poll it
 *     here, so that its I/O is not held up by a long runner (what it
 *     finds runs at the next slice: lateness <= slice + 2 ms); and a busy
 *     P with a timer overdue by TIMERS_STARVED whose owner has been in one
 *     slice and not looked at its timers for as long (it does at every
 *     switch): run its due timers here;
 *   - coroutines pinned to a thread that lost its P UNPIN_SLICES ago and
 *     is still away: to the global queue (handoff.c, goro__unpin_stuck);
 *     and such a thread that runs its coroutine on, outside the runtime:
 *     signalled to stop it (goro__stop_lost);
 *   - pooled stacks idle for a second or two: back to the kernel (stack.c);
 *     sysmon does not sleep deeply while the pool holds any;
 *   - a slice that has lasted the stall threshold: report it (stall.c);
 *     sysmon does not sleep deeply before it has seen such a stall end.
 * A stuck P is looked at again after PREEMPT_RETRY, doubling while it
 * stays stuck up to a slice: its thread's state comes from /proc, and one
 * read per P per millisecond cost a fifth of a core.
 * A slice is seen to start only when sysmon looks (reading the clock at
 * every switch would cost more than the switch), so while Ps are busy it
 * looks at least every slice/4, and once more REQUEST_FOLLOW after each
 * preemption request (the next slice begins then). Its sleep never goes
 * past the end of a busy P's slice as seen (sm_when + slice): the request
 * goes out at the end plus sysmon's wake-up, so a long runner is asked to
 * stop after slice + (0.1 ms after a preemption, at most slice/4 after
 * any other switch) + the wake-up. Before, the end too was seen only at
 * a round, up to slice/4 late: median 12.8 ms at a 10 ms slice and
 * 1.64 ms at 1 ms (tests/test_preempt.c, slices_end_within_the_documented_bound);
 * now 10.14 and 1.14 ms. Only sysmon writes the sm_* fields of a P.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "sched/sched.h"
#include "sched/deadline.h"
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"
#include "io/poller.h"
#include "coro/coro.h"
#include "debug/debug.h"

#define DELAY_MIN (20 * GORO_USEC)
#define DELAY_MAX (10 * GORO_MSEC)
#define PREEMPT_RETRY GORO_MSEC
#define REQUEST_FOLLOW (100 * GORO_USEC)   /* a look after a preemption request */
#define POLL_STARVED (2 * GORO_MSEC)
#define TIMERS_STARVED GORO_MSEC
#define UNPIN_SLICES 2
#define QUIET_ROUNDS 50                /* rounds without action before backing off */

static pthread_t thread;
static bool thread_running;
static _Atomic int quit;
static _Atomic uint32_t sleep_word;    /* futex: bumped to wake sysmon */
static _Atomic int deep;               /* asleep until a P is busy */
static int64_t slice;
static struct goro_m sysmon_m;         /* its M (no P): what goro__m() returns on sysmon */

static _Atomic int64_t wake_at;        /* when its sleep ends (INT64_MAX: deep) */
static _Atomic int64_t poke_at = INT64_MAX;    /* the earliest poke not yet planned for */

/* sched_attr as sched_setattr(2) takes it (glibc 2.36 has no wrapper). */
struct sm_sched_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

#define SM_SLICE_NS 100000          /* the shortest the kernel grants */

/* Asks the kernel for a short time slice for this thread (the monitor's):
 * since Linux 6.12 a normal thread's sched_runtime is its slice, and a
 * thread with a short one that wakes takes the CPU from one with a long
 * one at once instead of waiting for that one's slice to end. The monitor
 * wakes for a few microseconds at a time and must act then: measured on
 * the 2-CPU development machine (kernel 6.18, bench/deadline, perf sched
 * timehist), it waited more than 0.5 ms for its CPU 163 times in 2 s
 * beside a busy worker, up to 2.3 ms; with the short slice 12 times.
 * Older kernels ignore the field or refuse the call; either way nothing
 * else changes (the policy and nice value read first are given back). */
static void ask_short_slice(void)
{
    struct sm_sched_attr a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) != 0 || a.policy != SCHED_OTHER)
        return;
    a.size = sizeof a;
    a.flags = 0;
    a.runtime = SM_SLICE_NS;
    (void)syscall(SYS_sched_setattr, 0, &a, 0);
}

static void sysmon_wait(uint32_t seen, int64_t ns)
{
    goro__futex_wait_ns(&sleep_word, seen, ns);
}

/* Something is due at `when` (a reserved coroutine's budget ends, one
 * throttled may run again: sched/deadline.c) before sysmon would look:
 * it wakes now and plans its sleep again.
 * No poke is lost: it goes into poke_at before wake_at is read, and
 * sysmon publishes wake_at before it takes poke_at (all seq_cst), so
 * either sysmon's plan sees the poke or the poke sees the plan and wakes
 * it. Before, a poke made while sysmon was awake compared with its last
 * sleep's end, already past, and was dropped: the budget's end then
 * waited for the next round, up to slice/4 (an overrun of 1.8 ms against
 * a 1 ms budget, deadline:real_clock_budget_enforced). */
void goro__sysmon_poke_by(int64_t when)
{
    int64_t p = atomic_load(&poke_at);
    while (when < p && !atomic_compare_exchange_weak(&poke_at, &p, when))
        ;
    if (when < atomic_load(&wake_at)) {
        atomic_store(&wake_at, when);
        atomic_fetch_add(&sleep_word, 1);
        goro__futex_wake(&sleep_word, 1);
    }
}

/* sysmon: publishes the end of the sleep it is about to take (wait ns),
 * brought forward to the earliest poke; the wait to take. */
static int64_t plan_sleep(int64_t wait)
{
    int64_t until = goro__now() + wait;
    atomic_store(&wake_at, until);
    int64_t poked = atomic_exchange(&poke_at, INT64_MAX);
    if (poked >= until)
        return wait;
    atomic_store(&wake_at, poked);
    int64_t left = poked - goro__now();
    return left > 0 ? left : 0;
}

void goro__sysmon_kick(void)
{
    if (atomic_load(&deep) && atomic_exchange(&deep, 0)) {
        atomic_fetch_add(&sleep_word, 1);
        goro__futex_wake(&sleep_word, 1);
    }
}

static bool p_busy(struct goro_p *p)
{
    return atomic_load_explicit(&p->running, memory_order_relaxed) != 0;
}

/* A P whose slice has lasted slice_ns: preempt its coroutine, or - if its
 * M is blocked in the kernel, or has resisted preemption for 3 slices -
 * hand the P to another M (sched.c, invariant 8). True for a hand-off,
 * the one thing that keeps sysmon's pace up (the P's new M may need
 * watching at once). Requests are paced by sm_retry instead: the repeats
 * of a stuck slice, so that a thread that stays blocked costs sysmon a
 * look per slice, not a spin; and the first, since 50 rounds at 20 us
 * after each of them cost the coroutines being preempted a sixth of two
 * CPUs (bench/preempt, 2 workers: time with preemption over time without
 * 1.19, now 1.02). Go's sysmon, too, counts only retakes. */
/* *wake: lowered to when p's slice (or the next request for it) is due,
 * or to a look soon after a request (REQUEST_FOLLOW), while p is busy. */
static bool check_slice(struct goro_p *p, int64_t now, int64_t *wake)
{
    uint32_t t = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    if (t != p->sm_tick) {
        p->sm_tick = t;
        p->sm_when = p->sm_since = now;
        p->sm_retry = PREEMPT_RETRY;
        p->sm_declines = atomic_load_explicit(&p->preempt_declines, memory_order_relaxed);
        if (slice > 0 && p_busy(p) && now + slice < *wake)
            *wake = now + slice;
        return false;
    }
    if (slice <= 0 || !p_busy(p))
        return false;
    if (now - p->sm_when < slice) {
        if (p->sm_when + slice < *wake)
            *wake = p->sm_when + slice;
        return false;
    }
    p->sm_when = now - slice + p->sm_retry;
    /* The slice the request ends begins a few microseconds from now:
     * looked for then, its start is known to within REQUEST_FOLLOW,
     * rather than to within a round. */
    if (now + REQUEST_FOLLOW < *wake)
        *wake = now + REQUEST_FOLLOW;
    if ((p->sm_retry *= 2) > slice)
        p->sm_retry = slice;
    bool blocked;
    struct goro_m *m;
    /* Not preemptible: the handler declined 3 requests over 3 slices (a
     * thread kept off the CPU, or sysmon itself, does not count). */
    uint32_t declines = atomic_load_explicit(&p->preempt_declines, memory_order_relaxed);
    bool long_run = declines - p->sm_declines >= 3 && now - p->sm_since >= 3 * slice;
    bool wanted = goro__handoff_wanted(p, long_run, &blocked, &m);
    if (blocked && m)
        GORO_TRACE(GORO_TEV_BLOCKED, 0, (uint64_t)m->id, (uint32_t)p->id, 0, 0);
    if (wanted && goro__handoff(p, m)) {
        p->sm_declines = declines;
        goro__stall_handoff(p, m);
        return true;
    }
    /* A thread blocked in a system call is not signalled: the call would
     * fail with EINTR (sleep() and friends are never restarted). */
    atomic_store_explicit(&p->preempt_req, t + 1, memory_order_relaxed);
    GORO_TRACE(GORO_TEV_PREEMPT, 0, m ? (uint64_t)m->id : 0, (uint32_t)p->id, 0, 0);
    if (goro__preempt_async() && !blocked && m)
        goro__preempt_signal(m);
    return false;
}

static bool all_idle(void)
{
    return atomic_load(&goro__sched.npidle) == goro__sched.nprocs;
}

/* The descriptors' base (io/poller.h), when nobody looked at it for
 * POLL_STARVED while a P is busy: no M sleeps in it then, and busy ones
 * may be in long slices. The other Ps' bases hold no descriptors. */
static void check_poll(struct goro_p *p, int64_t now)
{
    if (p != GORO_NETPOLL_FDS_P)
        return;
    uint32_t n = atomic_load_explicit(&p->npolls, memory_order_relaxed);
    if (n != p->sm_npolls) {
        p->sm_npolls = n;
        p->sm_poll_when = now;
        return;
    }
    if (!atomic_load_explicit(&goro__io_used, memory_order_relaxed) || all_idle() ||
        now - p->sm_poll_when < POLL_STARVED)
        return;
    p->sm_poll_when = now;
    struct goro_polled got;
    if (goro__netpoll(p, NULL, NULL, GORO_RUNQ_SIZE, &got) > 0)
        goro__inject_global(&got);
}

static void check_timers(struct goro_p *p, int64_t now)
{
    /* Only when the owner is inside one slice (check_slice saw schedtick
     * unchanged) and has not looked for a while: an owner that switches
     * and is merely behind runs them itself, in deadline order. */
    int64_t first = goro__timers_first(p);
    if (first == INT64_MAX || now - first < TIMERS_STARVED || !p_busy(p) ||
        now - p->sm_since < TIMERS_STARVED ||
        now - atomic_load_explicit(&p->timers_seen, memory_order_relaxed) < TIMERS_STARVED)
        return;
    struct goro_polled woke = { NULL, NULL, 0 };
    if (goro__timers_run(p, now, &woke) > 0)
        goro__inject_global(&woke);
}

/* Coroutines that wait in the global queue while every P is busy get a
 * P's attention within GQ_WAIT (goro__pick_local reads want_global). */
#define GQ_WAIT GORO_MSEC

/* Whether something has been waiting (waiting now, since *since) for
 * `wait`: then the wait starts over, so that the answer is yes once per
 * `wait` while it lasts. */
static bool waited(bool waiting, int64_t *since, int64_t now, int64_t wait)
{
    if (!waiting) {
        *since = 0;
        return false;
    }
    if (!*since) {
        *since = now;
        return false;
    }
    if (now - *since < wait)
        return false;
    *since = now;
    return true;
}

static void check_global(int64_t now)
{
    if (!waited(atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed) != 0,
                &goro__sched.gq_waiting_since, now, GQ_WAIT))
        return;
    for (int i = 0; i < goro__sched.nprocs; i++)
        atomic_store_explicit(&goro__sched.procs[i].want_global, 1, memory_order_relaxed);
}

/* An M whose preempted coroutines may run nowhere else waits for a P
 * (handoff.c, goro__m_wait_for_p). A P gives itself at the end of a cut
 * slice, or when it falls idle (sched.c, find_runnable); coroutines that
 * switch all the time do neither, and kept such an M waiting as long as
 * they ran (tests/test_handoff.c,
 * pinned_to_a_thread_waiting_beside_yielders_runs). After a slice of
 * waiting, every busy P's next switch goes through g0, which gives it. */
static int64_t waitp_since;

static void check_waitp(int64_t now)
{
    if (!waited(atomic_load_explicit(&goro__sched.nwaitp, memory_order_relaxed) > 0,
                &waitp_since, now, slice))
        return;
    for (int i = 0; i < goro__sched.nprocs; i++)
        if (p_busy(&goro__sched.procs[i]))
            atomic_store_explicit(&goro__sched.procs[i].want_give, 1, memory_order_relaxed);
}

/* HIGH coroutines waiting in any queue while Ps run lower classes: as
 * many of those Ps as there are such waiters are cut short (sched.c,
 * invariant 9), so that a HIGH one waits a sysmon round, not a slice. */
static void check_classes(int64_t now)
{
    int waiting = atomic_load_explicit(&goro__sched.classq.n[GORO_PQ_HIGH],
                                       memory_order_relaxed);
    for (int i = 0; i < goro__sched.nprocs; i++)
        waiting += atomic_load_explicit(&goro__sched.procs[i].classq.n[GORO_PQ_HIGH],
                                        memory_order_relaxed);
    for (int i = 0; i < goro__sched.nprocs && waiting > 0; i++)
        if (goro__preempt_for_class(&goro__sched.procs[i], now, PREEMPT_RETRY, GORO_PRIO_HIGH, NULL))
            waiting--;
}

/* Invariant 11's exception: while fewer Ps may be busy than exist, a
 * busy P whose coroutine has run STUCK without a switch, with work queued
 * behind it, gets an idle M to take that work - the busy ones run what
 * waits only as they switch, and a coroutine that spins on a flag (or any
 * long one where preemption is off: GORO_PREEMPT=0, TSan, valgrind) would
 * hold it for its whole run. check_slice has just read schedtick. */
#define STUCK GORO_MSEC

static void check_stuck(int64_t now)
{
    if (atomic_load_explicit(&goro__sched.active, memory_order_relaxed) >= goro__sched.nprocs)
        return;
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *p = &goro__sched.procs[i];
        if (p_busy(p) && now - p->sm_when >= STUCK &&
            atomic_load_explicit(&p->schedtick, memory_order_relaxed) == p->sm_tick &&
            !goro__runq_empty(p)) {
            goro__spinner_start_stuck();
            return;
        }
    }
}

static void *sysmon_main(void *arg)
{
    (void)arg;
    goro__sysmon_attach(&sysmon_m);
    pthread_setname_np(pthread_self(), "goro-sysmon");
    int64_t delay = DELAY_MIN;
    int64_t delay_max = slice > 0 && slice / 4 < DELAY_MAX ? slice / 4 : DELAY_MAX;
    if (delay_max < DELAY_MIN)
        delay_max = DELAY_MIN;
    int idle_rounds = 0;
    bool pinned_waiting = false;    /* on a thread that lost its P: keep watch */
    int64_t caches_due = 0;
    int64_t wait = delay;           /* the round's delay, or less: a slice's end */
    /* its futex timeouts are its deadlines: no slack on them */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    ask_short_slice();              /* and its wake-ups their CPU at once */
    while (!atomic_load(&quit)) {
        uint32_t seen = atomic_load(&sleep_word);
        if (idle_rounds > QUIET_ROUNDS && all_idle() && !pinned_waiting &&
            !goro__slab_trim_pending() && !goro__stall_pending()) {
            /* Deep sleep. deep and npidle are both seq_cst, and a P leaving
             * the idle list decrements npidle before it kicks us. The
             * deadlock check may want a look again after a while. */
            uint64_t moves = atomic_load(&goro__sched.outside_moves);
            int64_t until = goro__deadlock_pending(goro__real_now());
            atomic_store(&deep, 1);
            atomic_store(&wake_at, INT64_MAX);
            /* A thread that began to wait after the check kicked us, or
             * sees deep unset: then its move is seen here (seq_cst both). */
            if (all_idle() && !atomic_load(&quit) &&
                atomic_load(&goro__sched.outside_moves) == moves)
                sysmon_wait(seen, until);
            atomic_store(&deep, 0);
            /* A P is busy again: nothing needs us yet, so the back-off
             * goes on where it was (a long runner is still cut within
             * its slice plus its lateness, check_slice). Starting over at 20 us cost a futex wake and
             * dozens of rounds each time the workers idled for a moment,
             * a thousand times a second under a ping-pong load. Still
             * idle (the deadlock check's time, or a thread began to wait
             * from outside): straight back here. */
            if (!all_idle())
                idle_rounds = 0;
            continue;
        }
        sysmon_wait(seen, plan_sleep(wait));
        int64_t now = goro__now();
        int64_t wake = INT64_MAX;   /* the earliest slice end (check_slice) */
        /* Only preemption and hand-off keep the pace up (Go counts only
         * retakes). Polling a starved base, running starved timers and
         * flagging the global queue are each paced by their own window
         * (POLL_STARVED, TIMERS_STARVED, GQ_WAIT): counted as action,
         * they kept sysmon at 20 us rounds - 3,700 wake-ups a second, 5%
         * of echod's CPU at 1000 connections - while a worker merely got
         * descheduled for a few milliseconds now and then. */
        bool acted = false;
        /* The virtual clock (sched.c, invariant 10): the one P's owner
         * alone decides what runs and when; the monitor only watches for
         * deadlocks and trims stacks. */
        bool virt = atomic_load_explicit(&goro__sched.virtual_clock, memory_order_relaxed);
        for (int i = 0; i < goro__sched.nprocs && !virt; i++) {
            acted |= check_slice(&goro__sched.procs[i], now, &wake);
            check_poll(&goro__sched.procs[i], now);
            check_timers(&goro__sched.procs[i], now);
            goro__stall_check(&goro__sched.procs[i], now);
        }
        if (!virt) {
            goro__stall_check_threads(now);
            check_global(now);
        }
        if (slice > 0) {            /* never on the virtual clock (slice off) */
            check_classes(now);
            check_waitp(now);
            goro__dl_watch(now, &wake);     /* budgets spent, reservations waiting */
            acted |= goro__unpin_stuck(now, UNPIN_SLICES * slice, &pinned_waiting);
            pinned_waiting |= goro__stop_lost(now, PREEMPT_RETRY);
        }
        if (now >= caches_due) {            /* idle Ps' stack caches to the pool */
            goro__spill_idle_caches();
            caches_due = now + GORO_SEC;
        }
        goro__slab_trim_tick(now);          /* not "acted": keeps the back-off */
        if (!virt && !all_idle()) {
            goro__active_tick(now);         /* how many Ps may be busy (active.c) */
            check_stuck(now);
        }
        /* Go's back-off: 20 us while there is work for us, doubling after
         * 50 quiet rounds, up to 10 ms - or slice/4, see above. */
        idle_rounds = acted ? 0 : idle_rounds + 1;
        if (idle_rounds == 0)
            delay = DELAY_MIN;
        else if (idle_rounds > QUIET_ROUNDS && (delay *= 2) > delay_max)
            delay = delay_max;
        /* Never past a slice's end: the request goes out then, not up to
         * a round later (the back-off paces everything else). */
        wait = delay;
        if (wake != INT64_MAX) {
            int64_t until = wake - goro__now();
            if (until < wait)
                wait = until > GORO_USEC ? until : GORO_USEC;
        }
    }
    return NULL;
}

int goro__sysmon_start(int64_t slice_ns)
{
    slice = slice_ns;
    atomic_store(&quit, 0);
    atomic_store(&deep, 0);
    int64_t now = goro__now();
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *p = &goro__sched.procs[i];
        p->sm_when = p->sm_poll_when = p->sm_since = now;
        p->sm_retry = PREEMPT_RETRY;
        p->sm_declines = atomic_load(&p->preempt_declines);
        p->sm_tick = atomic_load(&p->schedtick);
        p->sm_stall.phase = 0;
    }
    int err = goro__preempt_install();
    if (err)
        return err;
    err = goro__thread_create(&thread, GORO_THREAD_STACK, sysmon_main, NULL);
    if (err)
        return -err;
    thread_running = true;
    return 0;
}

void goro__sysmon_stop(void)
{
    if (!thread_running)
        return;
    atomic_store(&quit, 1);
    atomic_fetch_add(&sleep_word, 1);
    goro__futex_wake(&sleep_word, 1);
    pthread_join(thread, NULL);
    thread_running = false;
    goro__stall_flush();            /* stalls it left out of stderr: said now */
}
