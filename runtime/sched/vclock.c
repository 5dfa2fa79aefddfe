/*
 * The virtual clock (goro_config_t.clock, for deterministic tests): the
 * clock moves only when the one P's owner finds nothing to run, to the
 * next deadline, or along the real one while a wait on the world is under
 * way; and the seed chooses which runnable coroutine goes next.
 *
 * Keeps invariant 10. See the prose at the top of sched.c.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "sched/inner.h"
#include "sched/runq.h"


/* The virtual clock (invariant 10; one P, so its owner takes and puts
 * without a CAS): the seed moves runnext behind the ring, or not, and
 * swaps the ring's head with one of its coroutines - which runnable one
 * goes next is the seed's choice. */
GORO_NOINLINE void goro__seeded_turn(struct goro_p *p)
{
    GORO_ASSERT(goro__sched.nprocs == 1);   /* invariant 10: no thief to race */
    struct goro *next = atomic_load_explicit(&p->runnext, memory_order_relaxed);
    uint32_t h = atomic_load_explicit(&p->runq_head, memory_order_relaxed);
    uint32_t n = atomic_load_explicit(&p->runq_tail, memory_order_relaxed) - h;
    if (n + (next != NULL) < 2)
        return;                     /* no choice: the seed is not drawn on */
    uint32_t r = goro__xorshift32(&goro__sched.seed);
    if (next && (r & 1)) {
        atomic_store_explicit(&p->runnext, NULL, memory_order_relaxed);
        goro__runq_put(p, next, false);   /* a full ring spills half: read it again */
        h = atomic_load_explicit(&p->runq_head, memory_order_relaxed);
        n = atomic_load_explicit(&p->runq_tail, memory_order_relaxed) - h;
    }
    if (n < 2)
        return;
    _Atomic(struct goro *) *a = &p->runq[h % GORO_RUNQ_SIZE];
    _Atomic(struct goro *) *b = &p->runq[(h + (r >> 1) % n) % GORO_RUNQ_SIZE];
    struct goro *x = atomic_load_explicit(a, memory_order_relaxed);
    atomic_store_explicit(a, atomic_load_explicit(b, memory_order_relaxed), memory_order_relaxed);
    atomic_store_explicit(b, x, memory_order_relaxed);
}

/* p's owner has nothing to run: the clock jumps to the next deadline.
 * True if a timer of p is due now (the caller runs it). */
bool goro__clock_jump(struct goro_p *p)
{
    /* invariant 10: one P, whose owner alone moves the clock */
    GORO_ASSERT(goro__sched.nprocs == 1 && p == goro__m()->p &&
                atomic_load_explicit(&goro__sched.virtual_clock, memory_order_relaxed));
    if (atomic_load_explicit(&goro__sched.real_waits, memory_order_acquire) > 0)
        return false;               /* the world may answer: real time passes */
    int64_t next = goro__timers_first(p);
    int64_t outside = goro__outside_first_deadline();
    if (outside < next)
        next = outside;
    if (next == INT64_MAX)
        return false;
    goro__clock_advance(next);
    goro__outside_time_out(next);
    return goro__timers_due(p);
}

/* After a real sleep from real_from: with a wait on the world under way,
 * the clock moves as far as the real one did; else it may jump. True if a
 * timer of p is due now. */
bool goro__clock_slept(struct goro_p *p, int64_t real_from)
{
    if (atomic_load_explicit(&goro__sched.real_waits, memory_order_acquire) == 0)
        return goro__clock_jump(p);
    int64_t now = goro__now() + (goro__real_now() - real_from);
    goro__clock_advance(now);
    goro__outside_time_out(now);
    return goro__timers_due(p);
}

