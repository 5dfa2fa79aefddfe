/*
 * Waiting and waking: goro__park (every wait in wait/, io/ and coro/
 * sleeps here), the claim protocol that ends a wait exactly once (enum
 * goro_wake), and goro__ready, which makes a claimed or new coroutine
 * runnable.
 *
 * Keeps invariants 1 (a coroutine is queued only by ready, spawn or a
 * yield: here the first two), 2 (a parked coroutine's waiter record is let
 * go only once it is saved: goro__park_commit, run by post_switch) and 5 (the
 * producer's side: work made visible, then the look for an idle M), and
 * 10's real waits. See the prose at the top of sched.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>

#include "internal.h"
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"

/* ---- making coroutines runnable ---- */

/* Inside the runtime (p: the entry's P, NULL without one): g runs next on
 * p, or goes to the global queue. */
static void ready_on(struct goro_p *p, struct goro *g)
{
    /* invariant 1: PARKED -> RUNNABLE by a wake-up, FREE -> RUNNABLE by a
     * spawn; nothing else makes a coroutine runnable here */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_PARKED ||
                atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_FREE);
    atomic_store_explicit(&g->state, GORO_S_RUNNABLE, memory_order_relaxed);
    goro__queue_ready(p, g, true, NULL);
    goro__spinner_start_if_idle(p);
}

/* For the trace: the coroutine running on m, 0 for none. */
static uint64_t running_id(struct goro_m *m)
{
    return m && m->curg ? m->curg->id : 0;
}

void goro__ready(struct goro *g)
{
    if (g->flags & GORO_F_EXTERNAL) {
        atomic_store_explicit(&g->ext_word, 1, memory_order_release);
        goro__futex_wake(&g->ext_word, 1);
        return;
    }
    struct goro_m *m = goro__m();
    GORO_TRACE(GORO_TEV_READY, g->id, running_id(m), 0, 0, 0);
    struct goro_p *p = m ? goro__rt_enter(m, false) : NULL;
    ready_on(p, g);
    if (m)
        goro__rt_leave(m);
}

/* Makes a list of claimed coroutines (linked through next) runnable: on
 * a worker into its queue, from elsewhere into the global queue in
 * batches, with one wake-up check for all. */
void goro__ready_list(struct goro *list)
{
    struct goro_m *m = goro__m();
    struct goro_p *p = m ? goro__rt_enter(m, false) : NULL;
    struct gq_batch global;
    goro__gq_batch_init(&global);
    while (list) {
        struct goro *g = list;
        list = g->next;
        if (g->flags & GORO_F_EXTERNAL) {
            goro__ready(g);
            continue;
        }
        GORO_TRACE(GORO_TEV_READY, g->id, running_id(m), 0, 0, 0);
        /* invariant 1: a claimed wait's coroutine, parked */
        GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_PARKED);
        atomic_store_explicit(&g->state, GORO_S_RUNNABLE, memory_order_relaxed);
        goro__queue_ready(p, g, false, &global);
    }
    goro__gq_batch_flush(&global);
    goro__spinner_start_if_idle(p);
    if (m)
        goro__rt_leave(goro__m());
}

void goro__schedule_new(struct goro *g, struct goro_m *m, struct goro_p *p)
{
    if (p)
        goro__bump(&p->spawned);
    else
        atomic_fetch_add(&goro__sched.spawned_ext, 1);
    if (goro__trace_on()) {
        goro__trace_emit(GORO_TEV_SPAWN, g->id, running_id(m), 0, 0, 0);
        goro__trace_name(g);
    }
    ready_on(p, g);                 /* a new coroutine is never a thread's */
    if (p) {
        goro__rt_leave(m);
        goro__preempt_check_on(m);
    }
}

/* ---- waiting and waking (the claim protocol: see enum goro_wake) ---- */

/* The outcomes that may claim a wait, by how it is armed (bit 1 << outcome). */
#define OUTCOME(o) (1u << GORO_WAKE_##o)
static const uint16_t claimable[GORO_WAKE_RECLASS + 1] = {
    [GORO_WAKE_ARMED] = OUTCOME(DONE) | OUTCOME(TIMEDOUT) | OUTCOME(CANCELED),
    [GORO_WAKE_ARMED_LENDS] = OUTCOME(DONE) | OUTCOME(TIMEDOUT) | OUTCOME(CANCELED) |
                              OUTCOME(RECLASS),
    [GORO_WAKE_ARMED_FIRM] = OUTCOME(DONE),
    [GORO_WAKE_ARMED_FIRM_LENDS] = OUTCOME(DONE) | OUTCOME(RECLASS),
};

/* A wait armed as w lends its waiter's class: RECLASS may end it. */
static bool armed_lends(uint32_t w)
{
    return (claimable[w] >> GORO_WAKE_RECLASS) & 1;
}
#undef OUTCOME

bool goro__claim(struct goro *g, uint32_t outcome)
{
    /* seq_cst: a claimer that stored what the parker checks after arming
     * (cancelled, loans) and finds the wait not yet armed must be seen by
     * that check (goro__park_commit). */
    uint32_t w = atomic_load(&g->wake);
    /* the claim protocol: a claim moves an ARMED state to one outcome */
    GORO_ASSERT(outcome >= GORO_WAKE_DONE && outcome <= GORO_WAKE_RECLASS &&
                w <= GORO_WAKE_RECLASS);
    while ((claimable[w] >> outcome) & 1) {
        if (atomic_compare_exchange_weak_explicit(&g->wake, &w, outcome,
                memory_order_acq_rel, memory_order_acquire))
            return true;
    }
    return false;
}

bool goro__claim_ready(struct goro *g)
{
    if (!goro__claim(g, GORO_WAKE_DONE))
        return false;
    goro__ready(g);
    return true;
}

/* ---- the deadline in force (goro_deadline_push, a group's deadline) ----
 *
 * Every wait a coroutine makes ends by the nearer of the deadline it is
 * given and its g->in_force, without its caller passing it: so a library
 * called under a deadline honours it. Firm waits (offload, once, a
 * group's wait for its members) honour neither. A wait that g->in_force
 * ends returns -ETIMEDOUT, as does a cancel that comes once g->in_force
 * has passed: a group's deadline cancels its members, and they see why. */

int64_t goro__deadline_nearer(int64_t deadline, int64_t dl)
{
    if (!dl)
        return deadline;
    return deadline < 0 || dl < deadline ? dl : deadline;
}

/* g's deadline in force has passed. */
static bool dl_passed(const struct goro *g)
{
    return g->in_force && goro__now() >= g->in_force;
}

int goro__wait_check(int64_t deadline)
{
    if (goro__forked())
        return goro__forked_error();
    struct goro *self = goro__current();
    if (self) {
        if (atomic_load_explicit(&self->cancelled, memory_order_relaxed))
            return dl_passed(self) ? -ETIMEDOUT : -ECANCELED;
        deadline = goro__deadline_nearer(deadline, self->in_force);
    }
    if (deadline >= 0 && goro__now() >= deadline)
        return -ETIMEDOUT;
    return 0;
}

int goro__wait_refused(int err)
{
    goro__preempt_check();
    return err;
}

int goro__wake_error(int outcome)
{
    switch (outcome) {
    case GORO_WAKE_DONE: return 0;
    case GORO_WAKE_TIMEDOUT: return -ETIMEDOUT;
    case GORO_WAKE_CANCELED: return -ECANCELED;
    default: return -EINVAL;
    }
}

/* Post-switch half of goro__park, on the M the coroutine parked on, once
 * it is saved: arm the wait, then let wakers in (invariant 2). The armed
 * store and the cancelled load are both seq_cst, as are goro_cancel's
 * store and its claim: one of the two sides sees the other.
 *
 * The deadline timer is started before the wait becomes claimable: once
 * it is, a lock-free claim (goro_cancel, the timer itself) may resume the
 * coroutine on another M, which stops the timer and leaves the frame the
 * timer lives in. A timer that fires before the wait is armed moves
 * `wake` from IDLE to TIMEDOUT (sched/timer.c, invariant 4), so arming is
 * a CAS from IDLE, and its failure means: timed out already. */
#ifdef GORO_DEBUG
void (*goro__debug_park_arming)(struct goro *g);
void (*goro__debug_park_armed)(struct goro *g);
#endif

void goro__park_commit(struct goro_m *m, struct goro *g)
{
    bool ready_now = false;
    /* Invariant: from the arming store on, a claim (the timer, goro_cancel,
     * the commit's partner) may resume g on another M, which may withdraw
     * from what it waits on, or run g to its end and free its slab. So g
     * waits in goro__park while `committing` is set, and every access to g
     * below comes before the release store that clears it; after that store
     * g is touched only if this M claimed it (ready_now). */
    atomic_store_explicit(&g->committing, 1, memory_order_relaxed);
    /* the claim protocol: the wait is armed with one of the ARMED states */
    GORO_ASSERT(m->post_armed >= GORO_WAKE_ARMED && m->post_armed <= GORO_WAKE_ARMED_FIRM_LENDS);
#ifdef GORO_DEBUG
    if (goro__debug_park_arming)
        goro__debug_park_arming(g);
#endif
    if (m->post_timer) {
        goro__timer_start(m->post_timer, m->p, m->post_deadline);
        uint32_t idle = GORO_WAKE_IDLE;
        if (!atomic_compare_exchange_strong(&g->wake, &idle, m->post_armed))
            ready_now = true;       /* TIMEDOUT: the timer was first */
    } else {
        /* the claim protocol: nothing claims an IDLE wait but its own
         * timer, and this one has none */
        GORO_ASSERT(atomic_load_explicit(&g->wake, memory_order_relaxed) == GORO_WAKE_IDLE);
        atomic_store(&g->wake, m->post_armed);
    }
#ifdef GORO_DEBUG
    if (goro__debug_park_armed)
        goro__debug_park_armed(g);
#endif
    if (goro__wake_open(m->post_armed) && atomic_load(&g->cancelled) &&
        goro__claim(g, GORO_WAKE_CANCELED))
        ready_now = true;
    /* A loan given to or taken from g after it chose the class it lends
     * found no wait to claim (sched/prio.c, pass_on): seen here instead.
     * The arming store and this load of the loans are seq_cst, as are a
     * loan's change and the claim's load: one side sees the other. */
    if (armed_lends(m->post_armed) &&
        goro__prio_with(g, atomic_load(&g->loans)) != m->post_lent &&
        goro__claim(g, GORO_WAKE_RECLASS))
        ready_now = true;
    if (m->post_unlock)
        m->post_unlock(m->post_arg);
    else if (m->post_commit && !m->post_commit(m->post_arg, g) &&
             goro__claim(g, GORO_WAKE_DONE))
        ready_now = true;            /* the wait was over before it began */
    atomic_store_explicit(&g->committing, 0, memory_order_release);
    if (ready_now)
        goro__ready(g);
}

int goro__park(const struct goro_park *how)
{
    if (goro__forked())
        return goro__forked_park(how);  /* the child has no scheduler (fork.c) */
    struct goro_m *m = goro__m();
    struct goro *self = m ? m->curg : NULL;
    if (!self)
        return goro__park_external(how);
    /* The caller holds the lock of what it waits on: it must not move to
     * the global queue holding it (a thread waiting for that lock could be
     * the one that would run it). If the P is gone, park anyway, through
     * g0, which then finds itself without a P. */
    /* park entry: a running coroutine, out of any wait (the last one reset
     * wake to IDLE once its timer was gone; invariant 1: it is on no queue) */
    GORO_ASSERT(atomic_load_explicit(&self->state, memory_order_relaxed) == GORO_S_RUNNING &&
                atomic_load_explicit(&self->wake, memory_order_relaxed) == GORO_WAKE_IDLE &&
                !atomic_load_explicit(&self->committing, memory_order_relaxed));
    bool own = goro__rt_enter(m, false) != NULL;
    /* The deadline timer lives in this frame, which stays put while parked.
     * A firm wait has none: only its partner may end it. Others end by the
     * nearer of theirs and the one in force. */
    int64_t deadline = how->firm ? GORO_FOREVER
                                 : goro__deadline_nearer(how->deadline, self->in_force);
    bool timed = deadline >= 0;
    struct goro_timer timer;
    if (timed) {
        timer.kind = GORO_TIMER_WAKE;
        timer.g = self;
        atomic_init(&timer.idx, GORO_TIMER_OFF);
    }
    self->wait = (uint8_t)how->why;
    self->wait_obj = how->obj;
    self->wait_timed = timed;
    /* The virtual clock does not jump over a wait on the world (inv. 10). */
    bool real = unlikely(atomic_load_explicit(&goro__sched.virtual_clock, memory_order_relaxed)) &&
                how->real;
    if (real)
        atomic_fetch_add(&goro__sched.real_waits, 1);
    atomic_store_explicit(&self->state, GORO_S_PARKED, memory_order_relaxed);
    m->post_unlock = how->unlock;
    m->post_commit = how->commit;
    m->post_arg = how->arg;
    m->post_armed = how->firm ? (how->lends ? GORO_WAKE_ARMED_FIRM_LENDS : GORO_WAKE_ARMED_FIRM)
                              : (how->lends ? GORO_WAKE_ARMED_LENDS : GORO_WAKE_ARMED);
    m->post_lent = how->lent;
    m->post_timer = timed ? &timer : NULL;
    m->post_deadline = deadline;
    if (own)
        goro__switch_out(m, self, GORO_POST_PARK);
    else
        goro__switch_to_g0(m, self, GORO_POST_PARK);
    goro__rt_leave(goro__m());
    /* Claimed and resumed while the M we parked on still commits: the
     * commit's outcome is ours to see (goro__park_commit). A few instructions,
     * unless that thread lost its CPU. */
    for (int step = 0; atomic_load_explicit(&self->committing, memory_order_acquire); step++)
        spin_or_yield(step, 64);
    /* The timer must be gone before this frame is, and before the next
     * wait is armed (a stale timer would claim it). */
    if (timed)
        goro__timer_stop(&timer);
    if (real)
        atomic_fetch_sub(&goro__sched.real_waits, 1);
    self->wait = GORO_W_NONE;
    self->wait_obj = NULL;
    int outcome = (int)atomic_load_explicit(&self->wake, memory_order_acquire);
    GORO_ASSERT(outcome >= GORO_WAKE_DONE);   /* the claim protocol: resumed by a claim */
    atomic_store_explicit(&self->wake, GORO_WAKE_IDLE, memory_order_relaxed);
    if (outcome == GORO_WAKE_CANCELED && dl_passed(self))
        outcome = GORO_WAKE_TIMEDOUT;   /* cancelled by the deadline in force */
    return outcome;
}

