/*
 * Timers, kept by the scheduler: every deadline, sleep and ticker.
 *
 * Each P has a 4-ary min-heap of timers (struct goro_timers). A timer is
 * memory its owner already has - a parked coroutine's frame, a ticker -
 * so starting one allocates nothing but, rarely, a bigger heap array. The
 * heap's lock guards the array, every `when` and `idx` in it; `first` is
 * the earliest deadline, readable without the lock, and INT64_MAX when
 * the heap is empty.
 *
 * Who runs them (sched.c): the P's owner on every pass of its scheduling
 * loop, and on the way from one coroutine to the next when one is due;
 * an M about to sleep sleeps in its poll only until its P's first
 * deadline (the poller's alarm); idle Ms run due timers of busy Ps, and
 * sysmon those of a P whose owner is stuck. Everyone runs them the same
 * way, under the P's lock: goro__timers_run.
 *
 * Invariants:
 * 1. A WAKE timer claims its coroutine's wait under the heap's lock, and
 *    its idx becomes GORO_TIMER_OFF only after that claim (release). So a
 *    coroutine that finds its timer OFF (acquire) knows nobody will touch
 *    the timer again, and one that finds it in the heap takes the lock to
 *    remove it; either way, once goro__timer_stop returns, the frame may
 *    go and the next wait cannot be claimed by a stale timer.
 * 2. A FUNC timer fires without the lock (it may take channel locks and
 *    wake coroutines), marked running meanwhile; goro__timer_stop waits
 *    until it is done. Only the runner puts it back, at the time fire
 *    returned, unless it was stopped meanwhile.
 * 3. A timer that becomes the earliest of a P other than the caller's
 *    breaks that P's poll: its M may be asleep until a later deadline
 *    (the poller reads `first` under its poll_lock, so the break cannot
 *    fall between that read and its sleep unseen). That holds for a FUNC
 *    timer put back after it fired as for one started: while it fired it
 *    was in no heap, and the owner may have gone to sleep meanwhile
 *    without an alarm for it.
 * 4. A WAKE timer is started before its wait is armed (park.c,
 *    goro__park_commit): a frame must not be claimable before its timer exists.
 *    A timer that fires in between finds `wake` IDLE - a coroutine resets
 *    it to IDLE only after it has stopped its timer, so IDLE here means
 *    "being parked" - and moves it to TIMEDOUT (one CAS loop takes ARMED
 *    or IDLE, whichever it finds: claim_timed_out); the park's own CAS from
 *    IDLE to ARMED then fails, and the park makes the coroutine runnable.
 *    No timeout is lost, none is taken twice, and no clock is read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "sched/sched.h"
#include "io/poller.h"
#include "debug/debug.h"
#include "sched/idle.h"

/* ---- the heap (under its lock) ---- */

#define ARITY 4
#define HEAP_MIN 64

static void slot_set(struct goro_timers *ts, uint32_t i, struct goro_timer_slot s)
{
    ts->heap[i] = s;
    atomic_store_explicit(&s.t->idx, (int32_t)i, memory_order_relaxed);
}

#ifdef GORO_DEBUG
/* The heap's order at slot i: its parent is due no later, its children no
 * earlier. A sift ends with it true where it stopped. */
static bool heap_ordered_at(const struct goro_timers *ts, uint32_t i)
{
    int64_t when = ts->heap[i].when;
    if (i > 0 && ts->heap[(i - 1) / ARITY].when > when)
        return false;
    for (uint32_t k = i * ARITY + 1; k <= i * ARITY + ARITY && k < ts->n; k++)
        if (ts->heap[k].when < when)
            return false;
    return true;
}
#endif

static void sift_up(struct goro_timers *ts, uint32_t i)
{
    struct goro_timer_slot s = ts->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / ARITY;
        if (ts->heap[parent].when <= s.when)
            break;
        slot_set(ts, i, ts->heap[parent]);
        i = parent;
    }
    slot_set(ts, i, s);
    GORO_ASSERT(heap_ordered_at(ts, i));    /* the heap's order */
}

static void sift_down(struct goro_timers *ts, uint32_t i)
{
    struct goro_timer_slot s = ts->heap[i];
    for (;;) {
        uint32_t c = i * ARITY + 1, best = i;
        int64_t least = s.when;
        for (uint32_t k = c; k < c + ARITY && k < ts->n; k++)
            if (ts->heap[k].when < least) {
                least = ts->heap[k].when;
                best = k;
            }
        if (best == i)
            break;
        slot_set(ts, i, ts->heap[best]);
        i = best;
    }
    slot_set(ts, i, s);
    GORO_ASSERT(heap_ordered_at(ts, i));    /* the heap's order */
}

/* Takes slot i out; the last slot fills the hole. */
static void heap_remove(struct goro_timers *ts, uint32_t i)
{
    uint32_t last = --ts->n;
    if (i != last) {
        ts->heap[i] = ts->heap[last];
        if (i > 0 && ts->heap[i].when < ts->heap[(i - 1) / ARITY].when)
            sift_up(ts, i);
        else
            sift_down(ts, i);
    }
}

static bool heap_grow(struct goro_timers *ts)
{
    uint32_t cap = ts->cap ? ts->cap * 2 : HEAP_MIN;
    struct goro_timer_slot *h = realloc(ts->heap, cap * sizeof *h);
    if (!h)
        return false;
    ts->heap = h;
    ts->cap = cap;
    return true;
}

static void spill_remove(struct goro_timers *ts, struct goro_timer *t)
{
    struct goro_timer **pp = &ts->spill;
    while (*pp != t)
        pp = &(*pp)->spill_next;
    *pp = t->spill_next;
}

/* Publishes the earliest deadline; the spill list is scanned (it exists
 * only while memory ran out). */
static void first_update(struct goro_timers *ts)
{
    int64_t first = ts->n ? ts->heap[0].when : INT64_MAX;
    for (struct goro_timer *t = ts->spill; t; t = t->spill_next)
        if (t->when < first)
            first = t->when;
    atomic_store_explicit(&ts->first, first, memory_order_release);
}

/* Under the lock: t joins the heap (or, without memory, the spill list). */
static void insert_locked(struct goro_timers *ts, struct goro_timer *t)
{
    if (ts->n == ts->cap && !heap_grow(ts)) {
        t->spill_next = ts->spill;
        ts->spill = t;
        atomic_store_explicit(&t->idx, GORO_TIMER_SPILLED, memory_order_relaxed);
        return;
    }
    ts->heap[ts->n] = (struct goro_timer_slot){ t->when, t };
    sift_up(ts, ts->n++);
}

/* Under the lock: t leaves whichever it is on. */
static void remove_locked(struct goro_timers *ts, struct goro_timer *t)
{
    int32_t idx = atomic_load_explicit(&t->idx, memory_order_relaxed);
    if (idx >= 0)
        heap_remove(ts, (uint32_t)idx);
    else if (idx == GORO_TIMER_SPILLED)
        spill_remove(ts, t);
}

/* ---- starting and stopping ---- */

void goro__timers_init(struct goro_timers *ts)
{
    *ts = (struct goro_timers){ .first = INT64_MAX };
    goro__lock_rank(&ts->lock, GORO_RANK_TIMERS);
}

void goro__timers_fini(struct goro_timers *ts)
{
    /* Timers still here belong to tickers that outlive the runtime: they
     * no longer have a heap (goro__timer_stop then has nothing to do). */
    goro__lock(&ts->lock);
    for (uint32_t i = 0; i < ts->n; i++) {
        ts->heap[i].t->p = NULL;
        atomic_store_explicit(&ts->heap[i].t->idx, GORO_TIMER_OFF, memory_order_relaxed);
    }
    for (struct goro_timer *t = ts->spill; t; t = t->spill_next) {
        t->p = NULL;
        atomic_store_explicit(&t->idx, GORO_TIMER_OFF, memory_order_relaxed);
    }
    free(ts->heap);
    ts->heap = NULL;
    ts->n = ts->cap = 0;
    ts->spill = NULL;
    atomic_store_explicit(&ts->first, INT64_MAX, memory_order_relaxed);
    goro__unlock(&ts->lock);
}

/* Invariant 3: a timer that became p's earliest, made so by a thread that
 * does not hold p, wakes p's poll (its M may sleep until a later time). */
static void wake_owner_if_earliest(struct goro_p *p, bool earliest)
{
    if (earliest && goro__current_p() != p)
        goro__p_kick(p);
}

void goro__timer_start(struct goro_timer *t, struct goro_p *p, int64_t when)
{
    /* Started where no P is held (an M that lost its P, a thread of the
     * program's): any heap serves, whoever runs it delivers. */
    if (!p)
        p = &goro__sched.procs[0];
    struct goro_timers *ts = &p->timers;
    t->p = p;
    t->when = when;
    t->running = t->stopped = false;
    goro__lock(&ts->lock);
    int64_t before = atomic_load_explicit(&ts->first, memory_order_relaxed);
    insert_locked(ts, t);
    bool earlier = when < before;
    if (earlier)
        first_update(ts);
    goro__unlock(&ts->lock);
    wake_owner_if_earliest(p, earlier);
}

void goro__timer_stop(struct goro_timer *t)
{
    /* Fired already (invariant 1): no lock needed. */
    if (t->kind == GORO_TIMER_WAKE &&
        atomic_load_explicit(&t->idx, memory_order_acquire) == GORO_TIMER_OFF)
        return;
    struct goro_p *p = t->p;
    if (!p)
        return;
    struct goro_timers *ts = &p->timers;
    goro__lock(&ts->lock);
    t->stopped = true;
    int64_t was_first = atomic_load_explicit(&ts->first, memory_order_relaxed);
    remove_locked(ts, t);
    atomic_store_explicit(&t->idx, GORO_TIMER_OFF, memory_order_relaxed);
    if (t->when == was_first)
        first_update(ts);
    /* Invariant 2: a fire under way ends before t may go. */
    while (t->running) {
        goro__unlock(&ts->lock);
        sched_yield();
        goro__lock(&ts->lock);
    }
    goro__unlock(&ts->lock);
}

/* ---- running them ---- */

int64_t goro__timers_first(struct goro_p *p)
{
    return atomic_load_explicit(&p->timers.first, memory_order_acquire);
}

/* Under the lock: the due timer at the top leaves the heap. */
static struct goro_timer *pop_due_locked(struct goro_timers *ts, int64_t now)
{
    if (ts->n && ts->heap[0].when <= now) {
        struct goro_timer *t = ts->heap[0].t;
        heap_remove(ts, 0);
        return t;
    }
    for (struct goro_timer *t = ts->spill; t; t = t->spill_next)
        if (t->when <= now) {
            spill_remove(ts, t);
            return t;
        }
    return NULL;
}

/* Under the lock: a FUNC timer has fired; back in the heap if it wants
 * (true if it went back). */
static bool func_done_locked(struct goro_timers *ts, struct goro_timer *t, int64_t next)
{
    t->running = false;
    if (t->stopped || next < 0)
        return false;
    t->when = next;
    insert_locked(ts, t);
    return true;
}

enum claim { CLAIM_NONE, CLAIM_ARMED, CLAIM_IDLE };

/* A WAKE timer's claim (invariant 4): ARMED or IDLE (being parked) ->
 * TIMEDOUT in one CAS loop - two separate tries would lose the timeout
 * when the park arms the wait in between. CLAIM_ARMED: the timer makes g
 * runnable; CLAIM_IDLE: the park does; CLAIM_NONE: a waker was first. */
static enum claim claim_timed_out(struct goro *g)
{
    uint32_t w = atomic_load_explicit(&g->wake, memory_order_acquire);
    while (goro__wake_open(w) || w == GORO_WAKE_IDLE) {
        if (atomic_compare_exchange_weak_explicit(&g->wake, &w, GORO_WAKE_TIMEDOUT,
                memory_order_acq_rel, memory_order_acquire))
            return w == GORO_WAKE_IDLE ? CLAIM_IDLE : CLAIM_ARMED;
    }
    return CLAIM_NONE;
}

int goro__timers_run(struct goro_p *p, int64_t now, struct goro_polled *out)
{
    struct goro_timers *ts = &p->timers;
    if (atomic_load_explicit(&ts->first, memory_order_acquire) > now)
        return 0;
    int n = 0;
    int64_t put_back = INT64_MAX;   /* earliest FUNC timer back in the heap */
    goro__lock(&ts->lock);
    struct goro_timer *t;
    while ((t = pop_due_locked(ts, now))) {
        if (t->kind == GORO_TIMER_FUNC) {
            t->running = true;
            atomic_store_explicit(&t->idx, GORO_TIMER_OFF, memory_order_relaxed);
            goro__unlock(&ts->lock);
            GORO_TRACE(GORO_TEV_TIMER, 0, 0, 0, 0, 0);
            int64_t next = t->fire(t, now);     /* invariant 2 */
            goro__lock(&ts->lock);
            if (func_done_locked(ts, t, next) && next < put_back)
                put_back = next;
            continue;
        }
        struct goro *g = t->g;
        enum claim how = claim_timed_out(g);
        /* The timer ended the wait, whoever makes g runnable: traced
         * while the timer is still on (g's frame, which holds it, stays) */
        if (how != CLAIM_NONE)
            GORO_TRACE(GORO_TEV_TIMER, g->id, 0, 0, 0, 0);
        atomic_store_explicit(&t->idx, GORO_TIMER_OFF, memory_order_release);  /* inv. 1 */
        if (how != CLAIM_ARMED)
            continue;               /* its waker, or its park, makes it runnable */
        /* Threads the runtime does not own time their waits on their
         * futex (outside.c, goro__park_external): a timer is a coroutine's. */
        GORO_ASSERT(!(g->flags & GORO_F_EXTERNAL));
        atomic_store_explicit(&g->state, GORO_S_RUNNABLE, memory_order_relaxed);
        g->next = NULL;             /* in deadline order */
        if (out->tail)
            out->tail->next = g;
        else
            out->head = g;
        out->tail = g;
        out->n++;
        n++;
    }
    first_update(ts);
    bool earliest = put_back != INT64_MAX &&
                    put_back <= atomic_load_explicit(&ts->first, memory_order_relaxed);
    goro__unlock(&ts->lock);
    wake_owner_if_earliest(p, earliest);
    return n;
}

/* ---- the clock and sleeping ---- */

int64_t goro_now(void)
{
    return goro__now();
}

/* A sleep until deadline; `yields`: park even if that deadline passed
 * before the coroutine could (a positive goro_sleep). */
static int sleep_until(int64_t deadline, bool yields)
{
    struct goro *self = goro__current();
    if (!self && goro__clock_virtual()) {
        /* A thread on the virtual clock: its deadline is the clock's
         * (sched.c, invariant 10), which ends the wait. */
        struct goro_park how = { .why = GORO_W_SLEEP, .deadline = deadline };
        goro__park(&how);
        return 0;
    }
    if (!self) {
        /* A thread of its own: sleep it, restarting after signals. */
        if (deadline < 0)
            deadline = INT64_MAX;
        struct timespec ts = { (time_t)(deadline / GORO_SEC), (long)(deadline % GORO_SEC) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        return 0;
    }
    if (deadline < 0)
        deadline = GORO_FOREVER;
    /* The deadline in force comes first: the sleep is cut short by it,
     * and says so (-ETIMEDOUT); its own end is a success. */
    bool cut = goro__deadline_nearer(deadline, self->in_force) != deadline;
    /* Read before the check, so that a cancel landing during it is the
     * check's (-ECANCELED) or the park's, never a wrong -ETIMEDOUT. */
    bool cancelled = atomic_load_explicit(&self->cancelled, memory_order_relaxed);
    int err = goro__wait_check(deadline);
    bool own_end = err == -ETIMEDOUT && !cut;
    /* A sleep of ns > 0 gives the worker up even when its own end came
     * before it could park (the thread lost its CPU for that long, or ns
     * is a few nanoseconds): its caller counts on the others running, as
     * Go's time.Sleep does. Its timer then fires at once. */
    if (err && !(yields && own_end && !cancelled))
        return goro__wait_refused(own_end ? 0 : err);
    struct goro_park how = { .why = GORO_W_SLEEP, .deadline = deadline };
    int outcome = goro__park(&how);
    /* sleep: no waker holds a sleeper (it is on no queue), so only its
     * deadline or a cancel ends the wait */
    GORO_ASSERT(outcome == GORO_WAKE_TIMEDOUT || outcome == GORO_WAKE_CANCELED);
    if (outcome == GORO_WAKE_CANCELED)
        return -ECANCELED;
    return cut ? -ETIMEDOUT : 0;
}

int goro_sleep_until(int64_t deadline)
{
    return sleep_until(deadline, false);
}

int goro_sleep(int64_t ns)
{
    if (ns < 0)
        ns = 0;
    return sleep_until(goro__now() + ns, ns > 0);
}
