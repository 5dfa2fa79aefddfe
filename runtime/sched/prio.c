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
 * the lender; a give-back never takes a count below zero. A lock's holder
 * that ends is taken off the lock first (invariant "holders" below): no
 * loan goes to, or comes back from, a coroutine that has ended.
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
#include "sched/sched.h"
#include "sched/deadline.h"

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
 * but not yet armed its wait cannot be claimed: goro__park_commit (park.c)
 * compares that class with g's after arming. The loans' changes below,
 * the claim's load, the arming and goro__park_commit's load are all seq_cst, so
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

/* ---- a lock's holder, lent the classes of its waiters ----
 *
 * Invariant (holders): a holder record names a coroutine (h->g) only
 * while that coroutine lives. From goro__holder_set to goro__holder_clear
 * the record is on g's list of the locks it holds (g->holds), and g's end
 * (goro__holds_end) takes every record off before g's record and stack
 * can be freed, each under its lock's own lock, keeping the lock held by
 * "an ended coroutine". So whoever holds a lock's own lock may use h->g:
 * lend to it, give back to it, wake it - never a coroutine that has ended,
 * whose record lived on a stack that may be unmapped or serve another.
 *
 * Each change of a list holds the lock's own lock (an object lock) and
 * then g->holds_lock (the same rank, always taken second). The end finds
 * the locks through the list, so it would take them the other way round:
 * it only tries the lock's own lock (goro__trylock), and lets go of
 * holds_lock and tries again when that fails, so the two orders never wait
 * for each other. The list is singly linked, newest first: an unlock in
 * the usual nested order finds its record at the head. */

static int holder_want(const struct goro_holder *h)
{
    return h->waiting[1] ? GORO_PRIO_HIGH : h->waiting[0] ? GORO_PRIO_NORMAL : GORO_PRIO_LOW;
}

/* Lends the holder the highest class among the waiters, giving back what
 * it was lent before. h->lent is the class actually lent plus one (0:
 * none - a zeroed lock lends nothing, nor does a waiter not above the
 * holder's own class, nor a lock a thread or an ended coroutine holds). */
static void holder_relend(struct goro_holder *h)
{
    if (!h->g)
        return;
    GORO_ASSERT(h->by == GORO_HELD_BY_CORO);
    int want = holder_want(h), lent = h->lent - 1;
    if (want == lent)
        return;
    goro__prio_unlend(h->g, lent);
    h->lent = (int8_t)(goro__prio_lend(h->g, want) ? want + 1 : 0);
}

static goro_lock_t *holder_lock(struct goro_holder *h)
{
    return (goro_lock_t *)((char *)h - h->lk_off);
}

void goro__holder_set(struct goro_holder *h, goro_lock_t *lk, struct goro *g)
{
    GORO_ASSERT(!h->held && (char *)h > (char *)lk && (char *)h - (char *)lk <= 255);
    h->held = true;
    h->lk_off = (uint8_t)((char *)h - (char *)lk);
    h->lent = 0;
    if (g->flags & GORO_F_EXTERNAL) {
        h->g = NULL;
        h->thread = (uintptr_t)g;
        h->by = GORO_HELD_BY_THREAD;
        if (goro__dl_in_use())
            goro__dl_holder_moved(h, NULL);
        return;
    }
    /* g is the caller, or a waiter being handed the lock: alive either way. */
    h->g = g;
    h->by = GORO_HELD_BY_CORO;
    goro__lock(&g->holds_lock);
    h->next = g->holds;
    g->holds = h;
    goro__unlock(&g->holds_lock);
    holder_relend(h);
    if (goro__dl_in_use())          /* the deadlines its waiters lend (deadline.c) */
        goro__dl_holder_moved(h, g);
}

/* Under g->holds_lock: h off g's list. */
static void holds_unlink(struct goro *g, struct goro_holder *h)
{
    struct goro_holder **p = &g->holds;
    while (*p != h) {
        GORO_ASSERT(*p);            /* invariant (holders): h is on g's list */
        p = &(*p)->next;
    }
    *p = h->next;
}

void goro__holder_clear(struct goro_holder *h)
{
    struct goro *g = h->g;
    if (g) {
        goro__prio_unlend(g, h->lent - 1);
        goro__lock(&g->holds_lock);
        holds_unlink(g, h);
        goro__unlock(&g->holds_lock);
        if (goro__dl_in_use())
            goro__dl_holder_moved(h, NULL);
    }
    h->g = NULL;
    h->ended_id = 0;
    h->lent = 0;
    h->held = false;
    h->by = GORO_HELD_BY_NONE;
}

bool goro__holder_is(const struct goro_holder *h, const struct goro *g)
{
    if (!h->held)
        return false;
    if (h->by == GORO_HELD_BY_THREAD)
        return h->thread == (uintptr_t)g;
    return h->by == GORO_HELD_BY_CORO && h->g == g;
}

void goro__holder_waiter(struct goro_holder *h, int prio, int delta)
{
    if (prio < GORO_PRIO_NORMAL)
        return;
    h->waiting[prio > GORO_PRIO_NORMAL] = (uint16_t)(h->waiting[prio > GORO_PRIO_NORMAL] + delta);
    holder_relend(h);
}

/* g ends: every lock it holds stays held, by "an ended coroutine" - which
 * names nobody to lend to - until somebody unlocks it (any coroutine or
 * thread may). The waiters' loans go back now, while g still runs. */
void goro__holds_end(struct goro *g)
{
    for (int step = 0;; step++) {
        goro__lock(&g->holds_lock);
        struct goro_holder *h = g->holds;
        if (!h) {
            goro__unlock(&g->holds_lock);
            return;
        }
        /* h is on the list: nobody has unlocked it yet, so its lock is
         * still there to try. */
        goro_lock_t *lk = holder_lock(h);
        if (!goro__trylock(lk)) {
            goro__unlock(&g->holds_lock);
            spin_or_yield(step, 64);    /* its holder may be waiting for holds_lock */
            continue;
        }
        GORO_ASSERT(h->g == g && h->held);
        goro__prio_unlend(g, h->lent - 1);
        g->holds = h->next;
        h->g = NULL;
        h->ended_id = g->id;
        h->by = GORO_HELD_BY_ENDED;
        h->lent = 0;
        goro__unlock(&g->holds_lock);
        if (goro__dl_in_use())      /* loans: none may name g past its end */
            goro__dl_holder_moved(h, NULL);
        goro__unlock(lk);
        step = -1;
    }
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
