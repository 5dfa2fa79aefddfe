/* Priority classes: a coroutine's own class, and the classes its waiters
 * lend it while they wait (docs/structured.md, "Priorities"). The run
 * queues honour them (sched.c, invariant 9); wait/ and coro/ lend along
 * their wait edges - a mutex or rwlock writer to its holder, a join to the
 * joinee, a group's wait to its members.
 *
 * A loan is a count, so that loans from many waiters add up and each is
 * given back alone: g->loans holds how many NORMAL (low half) and HIGH
 * (high half) loans g has. Its class is the highest of its own and any
 * class it has a loan of. Counts only change by +1 and -1, atomically, by
 * the lender; a give-back never takes a count below zero (a holder that
 * ended while it held a lock is not given back to, see goro__holder).
 *
 * Chains. A coroutine whose class changes while it waits for a lock is
 * itself lending along that wait (ARMED_LENDS): it is woken with RECLASS,
 * lends its new class in place of the old under the lock's own lock and
 * waits on (wait/sync.c) - so a loan travels down a chain of locks one
 * holder at a time, each step under one lock only, never two. It ends
 * where a holder is not waiting for a lock, or its class does not change
 * (classes only go up along the chain, and there are three: a cycle of
 * waiters, a deadlock, stops within two rounds). A join (coro/coro.c) and
 * a group's wait (wait/group.c, firm: ARMED_FIRM_LENDS) lend along their
 * edge the same way: the joinee gets the new class in place of the old,
 * a group's tree the new one if higher. */
#include <errno.h>

#include "internal.h"

static uint32_t loan_unit(int prio)
{
    return prio > GORO_PRIO_NORMAL ? GORO_LOAN_HIGH : GORO_LOAN_NORMAL;
}

void goro__prio_classes_used(void)
{
    if (!atomic_load_explicit(&goro__sched.classes_used, memory_order_relaxed))
        atomic_store(&goro__sched.classes_used, true);
}

/* g's class changed from was: if it waits for a lock, it is woken to lend
 * the new one on (see the top). A g that has chosen the class it lends
 * but not yet armed its wait cannot be claimed: park_commit (sched.c)
 * compares that class with g's after arming. The loans' changes below,
 * the claim's load, the arming and park_commit's load are all seq_cst, so
 * one of the two sides sees the other. */
static void pass_on(struct goro *g, int was)
{
    if (goro__prio_of(g) != was && goro__claim(g, GORO_WAKE_RECLASS))
        goro__ready(g);
}

bool goro__prio_lend(struct goro *g, int prio)
{
    /* A class not above g's own changes nothing: no loan (and the common
     * case, NORMAL waiting for NORMAL, stays off the classes' path). */
    if (!g || prio <= goro__prio_own(g) || !goro__sched.prio_inherit)
        return false;
    goro__prio_classes_used();
    int was = goro__prio_of(g);
    atomic_fetch_add(&g->loans, loan_unit(prio));
    /* A LOW coroutine waiting in a LOW list moves up (invariant 9). */
    if (goro__prio_own(g) < GORO_PRIO_NORMAL)
        atomic_fetch_add_explicit(&goro__sched.low_rescan, 1, memory_order_relaxed);
    pass_on(g, was);
    return true;
}

void goro__prio_unlend(struct goro *g, int prio)
{
    if (!g || prio < GORO_PRIO_NORMAL)
        return;
    uint32_t unit = loan_unit(prio), mask = unit == GORO_LOAN_HIGH ? 0xffff0000u : 0xffffu;
    int was = goro__prio_of(g);
    uint32_t old = atomic_load_explicit(&g->loans, memory_order_relaxed);
    while ((old & mask) &&
           !atomic_compare_exchange_weak(&g->loans, &old, old - unit))
        ;
    pass_on(g, was);
}

/* ---- a lock's holder, lent the classes of its waiters ---- */

static int holder_want(const struct goro_holder *h)
{
    return h->waiting[1] ? GORO_PRIO_HIGH : h->waiting[0] ? GORO_PRIO_NORMAL : GORO_PRIO_LOW;
}

/* Lends the holder the highest class among the waiters, giving back what
 * it was lent before. h->lent is the class actually lent plus one (0:
 * none - a zeroed lock lends nothing, nor does a waiter not above the
 * holder's own class). A holder whose id changed has ended (its record
 * may be another coroutine's now): nothing goes to it or back to it. */
static bool holder_alive(const struct goro_holder *h)
{
    return h->g && h->g->id == h->id;
}

static void holder_relend(struct goro_holder *h)
{
    int want = h->g ? holder_want(h) : GORO_PRIO_LOW;
    int lent = h->lent - 1;
    if (want == lent || !holder_alive(h))
        return;
    goro__prio_unlend(h->g, lent);
    h->lent = (int8_t)(goro__prio_lend(h->g, want) ? want + 1 : 0);
}

void goro__holder_set(struct goro_holder *h, struct goro *g)
{
    h->held = true;
    h->g = g->flags & GORO_F_EXTERNAL ? NULL : g;     /* g is the caller's own */
    h->id = g->id;
    h->lent = 0;
    holder_relend(h);
}

void goro__holder_clear(struct goro_holder *h)
{
    if (holder_alive(h))
        goro__prio_unlend(h->g, h->lent - 1);
    h->g = NULL;
    h->id = 0;
    h->lent = 0;
    h->held = false;
}

void goro__holder_waiter(struct goro_holder *h, int prio, int delta)
{
    if (prio < GORO_PRIO_NORMAL)
        return;
    h->waiting[prio > GORO_PRIO_NORMAL] = (uint16_t)(h->waiting[prio > GORO_PRIO_NORMAL] + delta);
    holder_relend(h);
}

/* ---- the API ---- */

static int class_of(int priority)
{
    return priority - GORO_PRIORITY_NORMAL;
}

int goro__prio_check(int priority, int *prio)
{
    if (priority < GORO_PRIORITY_INHERIT || priority > GORO_PRIORITY_HIGH)
        return -EINVAL;
    if (priority != GORO_PRIORITY_INHERIT)
        *prio = class_of(priority);
    return 0;
}

int goro_priority_set(int priority)
{
    struct goro *self = goro__current();
    if (priority < GORO_PRIORITY_LOW || priority > GORO_PRIORITY_HIGH)
        return -EINVAL;
    if (!self)
        return -EPERM;
    if (priority != GORO_PRIORITY_NORMAL)
        goro__prio_classes_used();
    __atomic_store_n(&self->prio, (int8_t)class_of(priority), __ATOMIC_RELAXED);
    return 0;
}

/* h's class as the API numbers it - with its loans (lent) or its own -
 * the caller's for NULL, NORMAL on a thread; -EINVAL for a freed handle. */
static int priority_of(const goro_t *h, bool lent)
{
    if (h && atomic_load_explicit(&((struct goro *)h)->state, memory_order_relaxed) == GORO_S_FREE)
        return -EINVAL;
    const struct goro *g = h ? h : goro__current();
    int prio = !g ? GORO_PRIO_NORMAL : lent ? goro__prio_of(g) : goro__prio_own(g);
    return prio + GORO_PRIORITY_NORMAL;
}

int goro_priority_get(const goro_t *h)
{
    return priority_of(h, true);
}

int goro_priority_base(const goro_t *h)
{
    return priority_of(h, false);
}
