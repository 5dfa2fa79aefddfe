/*
 * The deadline class (goro/deadline.h, docs/deadline.md): reservations
 * (runtime, deadline, period) admitted against a bound, run earliest
 * deadline first before every priority class, charged for the CPU they
 * use and throttled once their budget is spent - the constant bandwidth
 * server of Linux's SCHED_DEADLINE.
 *
 * What it adds to the invariants at the top of sched.c:
 *
 * 1. A throttled coroutine is RUNNABLE and in no queue: its reservation's
 *    replenishment timer alone holds it, and puts it on the global EDF
 *    list when it fires (after which the timer is done with it).
 *    One preempted by a signal is pinned to its M like any other
 *    (preempt.c says why), on the M's own list of reserved ones
 *    (m->dl_pinned), where its pick skips it while it is throttled; its
 *    timer then only wakes that P's owner when the period starts.
 *
 * 9. Each P, and the scheduler, has an EDF list beside its class lists,
 *    under the same lock, in order of g->dl_key (the absolute deadline it
 *    was queued with; equal keys in arrival order). A pick takes the
 *    earliest head of all of them - its P's, the global one, another P's
 *    - before any class (no 61-slice turn for the others: admission
 *    bounds what reserved coroutines take, and throttling enforces it);
 *    an idle M steals the earliest head of any P's list first. So queued
 *    reserved coroutines run by global EDF; only those pinned to their M
 *    (below) wait for that M. The lists count as run queues for
 *    invariant 5 (goro__pq_any, goro__global_work).
 *
 * A reservation's fields (struct goro_dlres) are written by whoever has
 * its coroutine, which is in one place at a time (invariant 1): the
 * coroutine while it runs (charging at each switch, goro_dl_next), the
 * one who queues it (the wake-up rule, throttling), the replenishment
 * timer while it is throttled. Others read only its counters and its
 * deadline (atomics) under the loans' lock, which also keeps the record
 * alive while they do (loans.lock is taken to detach it before it is
 * freed).
 *
 * What sysmon does for the class - enforcement, the cuts for queued
 * reserved coroutines, the releases - is dl_watch.c's; the record both
 * share is sched/dl_res.h. The worker thread's own timer that enforces a
 * budget when sysmon cannot run in time is dl_timer.c's.
 *
 * Inheritance (loans): a reserved coroutine waiting for a goro lock lends
 * its deadline to the lock's holder: the holder is queued on the EDF
 * lists with the earliest deadline lent to it (g->dl_lent), and not
 * throttled meanwhile. A loan names the lock's holder record, and the
 * holder it lends to; every change of a lock's holder (prio.c) moves the
 * loans made through it, under the lock's own lock, so a loan names a
 * coroutine only while it holds that lock (invariant "loans", asserted in
 * loan_check) - never one that has ended.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"
#include "sched/deadline.h"
#include "sched/dl_res.h"

#define BW_SHIFT 20                 /* bandwidth: a fraction of one worker, << BW_SHIFT */

static struct {
    goro_lock_t lock;               /* the loans, and records being detached */
    struct goro_dlres *loans;
    _Atomic int nloans;
} loans = { .lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF) };

static _Atomic uint64_t admitted;   /* << BW_SHIFT, of every live reservation */
static _Atomic int bound_pct;       /* 0: not read from the environment yet */

/* ---- admission ---- */

static int bound_now(void)
{
    int b = atomic_load(&bound_pct);
    if (b)
        return b;
    long v;
    int want = goro__env_long("GORO_DL_BOUND", 1, 100, "(percent)", &v) ? (int)v : 95;
    atomic_compare_exchange_strong(&bound_pct, &b, want);
    return atomic_load(&bound_pct);
}

static uint64_t capacity(int pct)
{
    int n = goro__sched.nprocs > 0 ? goro__sched.nprocs : 1;
    return ((uint64_t)n << BW_SHIFT) * (uint64_t)pct / 100;
}

/* The admitted total goes from its value, less give_back, plus add - if
 * that stays within the bound. */
static int admit(uint64_t add, uint64_t give_back)
{
    uint64_t cur = atomic_load(&admitted);
    do {
        if (cur - give_back + add > capacity(bound_now()))
            return -EBUSY;
    } while (!atomic_compare_exchange_weak(&admitted, &cur, cur - give_back + add));
    return 0;
}

static int check(const goro_dl_t *dl)
{
    if (!dl || dl->runtime < GORO_DL_MIN || dl->runtime > dl->deadline ||
        dl->deadline > dl->period || dl->period > GORO_DL_MAX)
        return -EINVAL;
    return 0;
}

/* Rounded down, as Linux's to_ratio, but never 0: a reservation is never free. */
static uint64_t bw_of(const goro_dl_t *dl)
{
    uint64_t bw = ((uint64_t)dl->runtime << BW_SHIFT) / (uint64_t)dl->period;
    return bw ? bw : 1;
}

int goro_dl_bound_set(int percent)
{
    if (percent < 1 || percent > 100)
        return -EINVAL;
    bound_now();                    /* the environment's is replaced, not read later */
    if (atomic_load(&admitted) > capacity(percent))
        return -EBUSY;
    atomic_store(&bound_pct, percent);
    return 0;
}

int goro_dl_bound(void)
{
    return bound_now();
}

int64_t goro_dl_admitted(void)
{
    return (int64_t)((atomic_load(&admitted) * 1000000 + (1u << (BW_SHIFT - 1))) >> BW_SHIFT);
}

/* ---- periods and budgets (the constant bandwidth server) ---- */

/* A new period from now. An overrun is a debt the new budget pays first:
 * Linux forgives it on a late wake-up, but its overruns are a tick long;
 * here a coroutine that cannot be preempted may overrun by much more,
 * and the bound on what it takes must still hold. */
static void new_period(struct goro_dlres *r, int64_t now)
{
    int64_t left = ld(&r->budget);
    st(&r->abs, now + r->dl.deadline);
    st(&r->budget, r->dl.runtime + (left < 0 ? left : 0));
    bump(&r->periods);
    GORO_TRACE(GORO_TEV_DL_PERIOD, r->g->id, (uint64_t)(ld(&r->abs) - now), (uint32_t)(r->dl.deadline / 1000), 0, 0);
}

/* The budget left cannot be used up before the deadline at the
 * reservation's density (runtime / deadline): waking now with it would
 * take more than the reservation (Linux's dl_entity_overflow). */
static bool overflows(const struct goro_dlres *r, int64_t now, int64_t abs, int64_t left)
{
    return (__int128)left * r->dl.deadline > (__int128)r->dl.runtime * (abs - now);
}

/* It wakes (Linux's update_dl_entity): a deadline passed, or a budget it
 * could not use in time at its rate, starts a new period. With a deadline
 * shorter than the period and still ahead, the budget is cut to what the
 * rate allows until then instead (the revised wake-up rule): a new period
 * would let it run twice in one. */
static void wake_rule(struct goro_dlres *r, int64_t now)
{
    int64_t abs = ld(&r->abs), left = ld(&r->budget);
    if (abs > now && !overflows(r, now, abs, left))
        return;
    if (abs > now && r->dl.deadline < r->dl.period) {
        st(&r->budget, (int64_t)((__int128)r->dl.runtime * (abs - now) / r->dl.deadline));
        return;
    }
    new_period(r, now);
}

/* A spent budget refilled (Linux's replenish_dl_entity): a period's
 * runtime for each period its debt needs, the deadline as many periods
 * on; one left behind now starts afresh. */
static void replenish(struct goro_dlres *r, int64_t now)
{
    int64_t left = ld(&r->budget);
    if (left <= 0) {
        int64_t k = -left / r->dl.runtime + 1;
        st(&r->budget, left + k * r->dl.runtime);
        st(&r->abs, ld(&r->abs) + k * r->dl.period);
        atomic_fetch_add_explicit(&r->periods, (uint64_t)k, memory_order_relaxed);
    }
    if (ld(&r->abs) - r->dl.deadline + r->dl.period <= now)
        new_period(r, now);
    GORO_TRACE(GORO_TEV_DL_PERIOD, r->g->id, (uint64_t)(ld(&r->abs) - now), (uint32_t)(r->dl.deadline / 1000), 0, 0);
}

/* Its replenishment timer (invariant 1 above): the throttled coroutine
 * gets its budget and goes to the global EDF list; an idle M is woken
 * for it (invariant 5). The record is not touched once it is queued: a
 * release waits for this fire to end (goro__timer_stop) before freeing. */
static int64_t replenish_fire(struct goro_timer *t, int64_t now)
{
    struct goro_dlres *r = (struct goro_dlres *)((char *)t - offsetof(struct goro_dlres, timer));
    struct goro *g = r->g;
    goro__dl_release_drop(r);
    replenish(r, now);
    goro__pq_put(NULL, g, GORO_PRIO_DL);
    goro__spinner_start_if_idle(NULL);
    goro__sysmon_poke_by(now);      /* every P busy: one is cut for it */
    return -1;
}

/* A pinned one's timer: its P's owner, asleep, wakes to pick it. */
static int64_t pinned_fire(struct goro_timer *t, int64_t now)
{
    (void)t;
    (void)now;
    return -1;
}

/* Its budget is spent: held until its next period starts (true), by a
 * timer on p that fire ends - or, that start being past, refilled at
 * once (false). */
static bool throttle(struct goro_p *p, struct goro_dlres *r, int64_t now,
                     int64_t (*fire)(struct goro_timer *, int64_t))
{
    int64_t at = ld(&r->abs) - r->dl.deadline + r->dl.period;
    if (at <= now) {
        replenish(r, now);
        return false;
    }
    bump(&r->throttles);
    GORO_TRACE(GORO_TEV_DL_THROTTLE, r->g->id, (uint64_t)(at - now), 0, 0, 0);
    goro__timer_stop(&r->timer);    /* a pinned one's, not fired yet */
    r->timer.kind = GORO_TIMER_FUNC;
    r->timer.fire = fire;
    if (fire == pinned_fire)
        r->held_until = at;         /* sysmon cuts its P then (dl_pinned_at) */
    else
        goro__dl_release_add(r, at);
    goro__timer_start(&r->timer, p, at);
    return true;
}

/* ---- the EDF lists (invariant 9 above) ---- */

static struct goro_classq *dlq_of(struct goro_p *p)
{
    return p ? &p->classq : &goro__sched.classq;
}

/* Under cq's lock: the count and the head's key follow the list. */
static void dlq_changed(struct goro_classq *cq, int d)
{
    struct goro *h = cq->head[GORO_PQ_DL];
    atomic_store_explicit(&cq->n[GORO_PQ_DL],
                          atomic_load_explicit(&cq->n[GORO_PQ_DL], memory_order_relaxed) + d,
                          memory_order_release);
    st(&cq->dl_first, h ? h->dl_key : 0);
}

static void dlq_insert(struct goro_classq *cq, struct goro *g)
{
    goro__lock(&cq->lock);
    struct goro **at = &cq->head[GORO_PQ_DL];
    while (*at && (*at)->dl_key <= g->dl_key)
        at = &(*at)->next;
    g->next = *at;
    *at = g;
    dlq_changed(cq, 1);
    goro__unlock(&cq->lock);
}

static struct goro *dlq_take(struct goro_classq *cq)
{
    if (!ld(&cq->dl_first))
        return NULL;
    goro__lock(&cq->lock);
    struct goro *g = cq->head[GORO_PQ_DL];
    if (g) {
        cq->head[GORO_PQ_DL] = g->next;
        dlq_changed(cq, -1);
    }
    goro__unlock(&cq->lock);
    return g;
}

void goro__dl_put(struct goro_p *p, struct goro *g)
{
    struct goro_dlres *r = res_of(g);
    int64_t lent = ld(&g->dl_lent), key = lent;
    if (r) {
        int64_t now = goro__now();
        if (r->parked) {
            r->parked = false;
            wake_rule(r, now);
        }
        /* A holder lent a deadline is not throttled: it holds what an
         * earlier deadline waits for (Linux boosts it the same way). */
        if (ld(&r->budget) <= 0 && !lent && throttle(p, r, now, replenish_fire))
            return;
        int64_t abs = ld(&r->abs);
        if (!key || abs < key)
            key = abs;
    }
    /* Its loan ended after it was found to have one: last of the list,
     * once; it is queued by its class from its next switch. */
    key = key ? key : INT64_MAX;
    g->dl_key = key;
    dlq_insert(dlq_of(p), g);       /* g may run, and be queued again, from here on */
    if (goro__dl_must_cut(key))
        goro__sysmon_poke_by(goro__now());
}

/* The deadline g runs by: its own, or an earlier one lent to it. */
static int64_t key_of(struct goro *g, struct goro_dlres *r)
{
    int64_t lent = ld(&g->dl_lent), abs = ld(&r->abs);
    return lent && lent < abs ? lent : abs;
}

/* m's pinned reserved coroutines (m's own): a throttled one whose period
 * has begun is refilled; *at: the link of the earliest that may run
 * (NULL: none), *key its deadline; returns when the first of them may
 * run (now if one may; 0: none is pinned). */
static int64_t pinned_scan(struct goro_m *m, struct goro ***at, int64_t *key)
{
    int64_t now = goro__now(), next = 0;
    *at = NULL;
    for (struct goro **l = &m->dl_pinned; *l; l = &(*l)->next) {
        struct goro *g = *l;
        struct goro_dlres *r = res_of(g);
        if (r->held_until && now >= r->held_until) {
            r->held_until = 0;
            replenish(r, now);
        }
        if (r->held_until && !ld(&g->dl_lent)) {
            if (!next || r->held_until < next)
                next = r->held_until;
            continue;
        }
        int64_t k = key_of(g, r);
        if (!*at || k < *key) {
            *at = l;
            *key = k;
        }
    }
    return *at ? now : next;
}

/* Another P whose EDF list's head is due before `before` (0: any) - the
 * earliest such - and that head's deadline in *key; NULL if none is. */
static struct goro_p *earlier_elsewhere(struct goro_p *p, int64_t before, int64_t *key)
{
    struct goro_p *best = NULL;
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *v = &goro__sched.procs[i];
        int64_t k = v != p ? ld(&v->classq.dl_first) : 0;
        if (k && (!before || k < before) && (!best || k < *key)) {
            best = v;
            *key = k;
        }
    }
    return best;
}

/* The head of another P's EDF list, taken (NULL: it was taken first). */
static struct goro *take_from(struct goro_p *v)
{
    struct goro *g = dlq_take(&v->classq);
    if (g)
        GORO_TRACE(GORO_TEV_STEAL, g->id, 0, (uint32_t)v->id, 0, 0);
    return g;
}

struct goro *goro__dl_get(struct goro_m *m, struct goro_p *p)
{
    struct goro_classq *mine = &p->classq, *all = &goro__sched.classq;
    int64_t a = ld(&mine->dl_first), b = ld(&all->dl_first);
    /* The earliest of the lists it may take from (invariant 9): its own,
     * the global one, and another P's, whose owner may be running a
     * reserved coroutine with an earlier deadline still - or be where a
     * lower class runs on, its slice not cut yet. */
    struct goro_classq *first = a && (!b || a <= b) ? mine : all;
    int64_t head = first == mine ? a : b, c = 0;
    struct goro_p *other = earlier_elsewhere(p, head, &c);
    if (other)
        head = c;
    if (unlikely(m->dl_pinned)) {
        struct goro **at;
        int64_t k = 0;
        pinned_scan(m, &at, &k);
        if (at && (!head || k <= head)) {
            struct goro *g = *at;
            *at = g->next;
            st(&p->dl_pinned_at, pinned_scan(m, &at, &k));
            return g;
        }
        st(&p->dl_pinned_at, at ? goro__now() : pinned_scan(m, &at, &k));
    }
    if (!head)
        return NULL;
    struct goro *g = other ? take_from(other) : NULL;
    if (g)
        return g;
    g = dlq_take(first);
    return g ? g : dlq_take(first == mine ? all : mine);
}

void goro__dl_pin(struct goro_m *m, struct goro *g)
{
    /* invariant 1, and only m's own thread pins */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_RUNNABLE &&
                m == goro__m());
    struct goro_dlres *r = res_of(g);
    int64_t now = goro__now();
    if (ld(&r->budget) <= 0 && !ld(&g->dl_lent))
        throttle(m->p, r, now, pinned_fire);
    g->next = m->dl_pinned;
    m->dl_pinned = g;
    int64_t may = r->held_until ? r->held_until : now, was = ld(&m->p->dl_pinned_at);
    if (!was || may < was)
        st(&m->p->dl_pinned_at, may);
    goro__sysmon_poke_by(may);      /* behind a lower class then: cut it */
}

void goro__dl_unpin_all(struct goro_m *m)
{
    /* only m's own thread touches its list */
    GORO_ASSERT(m == goro__m());
    while (m->dl_pinned) {
        struct goro *g = m->dl_pinned;
        m->dl_pinned = g->next;
        struct goro_dlres *r = res_of(g);
        if (r->held_until) {        /* throttled: it runs, and is stopped again */
            goro__timer_stop(&r->timer);
            r->held_until = 0;
        }
        goro__pinned_push(m, g);
    }
}

struct goro *goro__dl_steal(struct goro_p *p)
{
    for (int tries = 0; tries < 4; tries++) {
        int64_t key = 0;
        struct goro_p *best = earlier_elsewhere(p, 0, &key);
        if (!best)
            return NULL;
        struct goro *g = take_from(best);
        if (g)
            return g;
    }
    return NULL;
}

void goro__dl_timed(struct goro_p *p, struct goro_polled *list)
{
    struct goro **at = &list->head, *prev = NULL;
    while (*at) {
        struct goro *g = *at;
        if (goro__queue_class(g) != GORO_PRIO_DL) {
            prev = g;
            at = &g->next;
            continue;
        }
        *at = g->next;
        if (list->tail == g)
            list->tail = prev;
        list->n--;
        goro__pq_put(p, g, GORO_PRIO_DL);
    }
}

/* ---- charging ---- */

/* The clock a slice is charged by: the CPU time of the thread running it,
 * as Linux charges a task's runtime - not the wall time, which counts
 * what others took from that CPU meanwhile (the hypervisor's steal, an
 * interrupt, another thread; on a shared 2-CPU machine steals of 2-7 ms
 * were measured, and charged, each throttled a job that had not used its
 * budget). The virtual clock when tests run on it. A read is a system
 * call (no vDSO for thread CPU clocks: 0.6 us on the development
 * machine), made twice per slice of a reserved coroutine only. */
static int64_t charge_clock(void)
{
    if (goro__clock_virtual())
        return goro__now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * GORO_SEC + ts.tv_nsec;
}

void goro__dl_begin(struct goro_p *p, struct goro *g)
{
    struct goro_dlres *r = res_of(g);
    int64_t left = ld(&r->budget);
    if (left < 0)
        left = 0;
    if (p)
        st(&p->dl_running, key_of(g, r));
    /* Lent a deadline, it is not throttled (goro__dl_put): nothing to end. */
    bool timed = p && !ld(&g->dl_lent);
    /* Its thread's timer first: arming one due soon makes the kernel
     * reprogram the CPU's timer, about 3 us in a VM (arm and disarm:
     * 6.6 us), which the budget is not charged for. Charged, the jobs of
     * bench/deadline that use 90% of their budget overran more often:
     * 777-2,229 late jobs in 6 s against 266-1,043 without the timer. */
    if (timed)
        goro__dl_backstop_arm(goro__m(), goro__now() + left);
    int64_t now = goro__now();
    r->from = charge_clock();
    if (timed) {
        int64_t until = now + left;
        st(&p->dl_until, until);
        goro__sysmon_poke_by(until);    /* the monitor stops it then (or the timer) */
    } else if (p) {
        st(&p->dl_until, 0);
    }
}

void goro__dl_charge(struct goro_p *p, struct goro *g, int what)
{
    struct goro_dlres *r = res_of(g);
    int64_t now = charge_clock();
    int64_t left = ld(&r->budget) - (now - r->from);
    st(&r->budget, left);
    if (left < 0)
        raise_to(&r->worst_over, -left);
    r->from = now;
    r->parked = what == GORO_POST_PARK;
    if (p) {
        st(&p->dl_until, 0);
        st(&p->dl_running, 0);
    }
    goro__dl_backstop_disarm(goro__m());
}

/* The running coroutine's reservation changed (set, or a new period by
 * goro_dl_next): what it ran so far is charged, and its slice goes on
 * under the new budget. */
static void recharge(struct goro *self, struct goro_dlres *r, int64_t now, bool fresh)
{
    struct goro_m *m = goro__m();
    struct goro_p *p = goro__rt_enter(m, false);
    if (r->from)
        goro__dl_charge(p, self, GORO_POST_NONE);
    if (fresh)
        new_period(r, now);
    goro__dl_begin(p, self);
    goro__rt_leave(goro__m());
}

/* ---- loans (inheritance through goro locks) ---- */

/* Under loans.lock: g's lent deadline, the earliest of its lenders'. */
static void loan_sum(struct goro *g)
{
    if (!g)
        return;
    int64_t best = 0;
    for (struct goro_dlres *r = loans.loans; r; r = r->loan_next)
        if (r->loan_to == g && (!best || ld(&r->abs) < best))
            best = ld(&r->abs);
    st(&g->dl_lent, best);
}

void goro__dl_lend(const void *h, struct goro *holder, struct goro *self)
{
    struct goro_dlres *r = res_of(self);
    if (!goro__dl_in_use() || !r)
        return;
    /* loans: a waiter lends through one lock at a time */
    GORO_ASSERT(!r->loan_h);
    goro__lock(&loans.lock);
    r->loan_h = h;
    r->loan_to = holder != self ? holder : NULL;
    r->loan_next = loans.loans;
    loans.loans = r;
    atomic_fetch_add_explicit(&loans.nloans, 1, memory_order_relaxed);
    loan_sum(r->loan_to);
    goro__unlock(&loans.lock);
}

void goro__dl_unlend(struct goro *self)
{
    struct goro_dlres *r = res_of(self);
    if (!r || !r->loan_h)
        return;
    goro__lock(&loans.lock);
    struct goro_dlres **at = &loans.loans;
    while (*at != r) {
        GORO_ASSERT(*at);           /* loans: a lender is on the list */
        at = &(*at)->loan_next;
    }
    *at = r->loan_next;
    atomic_fetch_sub_explicit(&loans.nloans, 1, memory_order_relaxed);
    struct goro *to = r->loan_to;
    r->loan_h = NULL;
    r->loan_to = NULL;
    loan_sum(to);
    goro__unlock(&loans.lock);
}

void goro__dl_holder_moved(const void *h, struct goro *to)
{
    if (!atomic_load_explicit(&loans.nloans, memory_order_relaxed))
        return;
    goro__lock(&loans.lock);
    for (struct goro_dlres *r = loans.loans; r; r = r->loan_next) {
        if (r->loan_h != h)
            continue;
        struct goro *was = r->loan_to;
        r->loan_to = to != r->g ? to : NULL;
        loan_sum(was);
    }
    loan_sum(to);
    goro__unlock(&loans.lock);
}

/* ---- a reservation's life ---- */

static struct goro_dlres *res_new(struct goro *g, const goro_dl_t *dl)
{
    struct goro_dlres *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->dl = *dl;
    r->bw = bw_of(dl);
    r->g = g;
    atomic_store_explicit(&r->timer.idx, GORO_TIMER_OFF, memory_order_relaxed);
    return r;
}

static void dl_used(void)
{
    goro__prio_classes_used();
    if (!atomic_load_explicit(&goro__sched.dl_used, memory_order_relaxed))
        atomic_store(&goro__sched.dl_used, true);
}

/* g's reservation goes: detached under loans.lock (a reader of its
 * counters holds it), its timer stopped (a fire under way ends first),
 * its share given back. g is running, or has never run. */
static void res_drop(struct goro *g)
{
    struct goro_dlres *r = res_of(g);
    if (!r)
        return;
    /* loans: only a waiter lends, and it is not waiting now */
    GORO_ASSERT(!r->loan_h);
    goro__lock(&loans.lock);
    atomic_store_explicit(&g->dl, NULL, memory_order_relaxed);
    goro__unlock(&loans.lock);
    goro__timer_stop(&r->timer);
    goro__dl_release_drop(r);                /* sysmon reads the list under its lock */
    atomic_fetch_sub(&admitted, r->bw);
    free(r);
}

int goro__dl_spawn(struct goro *g, const goro_dl_t *dl)
{
    int err = check(dl);
    if (err || (err = admit(bw_of(dl), 0)))
        return err;
    struct goro_dlres *r = res_new(g, dl);
    if (!r) {
        atomic_fetch_sub(&admitted, bw_of(dl));
        return -ENOMEM;
    }
    dl_used();
    new_period(r, goro__now());
    atomic_store_explicit(&g->dl, r, memory_order_relaxed);
    return 0;
}

void goro__dl_end(struct goro *g)
{
    if (!res_of(g))
        return;
    if (g == goro__current()) {     /* its slice is no longer watched */
        struct goro_m *m = goro__m();
        struct goro_p *p = goro__rt_enter(m, false);
        if (p)
            st(&p->dl_until, 0);
        /* nor timed: its final switch charges nothing, so disarms nothing */
        goro__dl_backstop_disarm(m);
        goro__rt_leave(goro__m());
    }
    res_drop(g);
}

int goro_dl_set(const goro_dl_t *dl)
{
    int err = check(dl);
    if (err)
        return err;
    struct goro *self = goro__current();
    if (!self)
        return -EPERM;
    struct goro_dlres *r = res_of(self);
    if ((err = admit(bw_of(dl), r ? r->bw : 0)))
        return err;
    if (!r) {
        if (!(r = res_new(self, dl))) {
            atomic_fetch_sub(&admitted, bw_of(dl));
            return -ENOMEM;
        }
        dl_used();
        atomic_store_explicit(&self->dl, r, memory_order_relaxed);
    } else {
        goro__lock(&loans.lock);    /* goro_dl_stats reads it under the lock */
        r->dl = *dl;
        r->bw = bw_of(dl);
        goro__unlock(&loans.lock);
    }
    recharge(self, r, goro__now(), true);
    return 0;
}

int goro_dl_release(void)
{
    struct goro *self = goro__current();
    if (!self)
        return -EPERM;
    if (!res_of(self))
        return -ENOENT;
    goro__dl_end(self);
    return 0;
}

int goro_dl_next(void)
{
    struct goro *self = goro__current();
    if (!self)
        return -EPERM;
    struct goro_dlres *r = res_of(self);
    if (!r)
        return -ENOENT;
    int64_t now = goro__now(), abs = ld(&r->abs);
    if (now > abs) {
        bump(&r->misses);
        raise_to(&r->worst_late, now - abs);
        GORO_TRACE(GORO_TEV_DL_MISS, self->id, (uint64_t)(now - abs), 0, 0, 0);
    }
    int64_t next = abs - r->dl.deadline + r->dl.period;
    if (next > now) {
        /* Parked until then: waking past its deadline, it starts the new
         * period by the wake-up rule (goro__dl_put). sysmon sees that its
         * timer fires on time (dl_watch.c). */
        goro__dl_release_add(r, next);
        int rc = goro_sleep_until(next);
        goro__dl_release_drop(r);
        return rc;
    }
    recharge(self, r, now, true);
    return 0;
}

bool goro__dl_describe(const struct goro *g, char *buf, size_t len)
{
    /* loans.lock, if free now, outside the lock order: goro_dump calls
     * with the registry's leaf lock held (and maybe from a signal
     * handler). A try never waits, so it cannot close a cycle of waits -
     * what the order check is there to prevent; unranked, it is not
     * recorded as held. */
    if (!goro__dl_in_use() || !goro__trylock_unranked(&loans.lock))
        return false;
    struct goro_dlres *r = res_of(g);
    int64_t lent = ld(&((struct goro *)g)->dl_lent), now = goro__now();
    int n = 0;
    if (r)
        n = snprintf(buf, len, "deadline class: %lld/%lld/%lld us, budget %lld us, deadline in "
                     "%lld us; %llu periods, %llu misses (worst %lld us late), %llu throttles",
                     (long long)r->dl.runtime / 1000, (long long)r->dl.deadline / 1000,
                     (long long)r->dl.period / 1000, (long long)ld(&r->budget) / 1000,
                     (long long)(ld(&r->abs) - now) / 1000,
                     (unsigned long long)atomic_load(&r->periods),
                     (unsigned long long)atomic_load(&r->misses),
                     (long long)ld(&r->worst_late) / 1000,
                     (unsigned long long)atomic_load(&r->throttles));
    if (lent && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, "%slent a deadline %lld us away", n ? "; " : "",
                 (long long)(lent - now) / 1000);
    goro__unlock_unranked(&loans.lock);
    return r || lent;
}

int goro_dl_stats(const goro_t *h, goro_dl_stats_t *out)
{
    if (!out)
        return -EINVAL;
    const struct goro *g = h ? h : goro__current();
    *out = (goro_dl_stats_t){ 0 };
    if (!g)
        return 0;
    if (atomic_load_explicit(&((struct goro *)g)->state, memory_order_relaxed) == GORO_S_FREE)
        return -EINVAL;
    goro__lock(&loans.lock);
    struct goro_dlres *r = res_of(g);
    if (r) {
        out->dl = r->dl;
        out->periods = atomic_load_explicit(&r->periods, memory_order_relaxed);
        out->misses = atomic_load_explicit(&r->misses, memory_order_relaxed);
        out->throttles = atomic_load_explicit(&r->throttles, memory_order_relaxed);
        out->worst_lateness = ld(&r->worst_late);
        out->worst_overrun = ld(&r->worst_over);
        out->budget = ld(&r->budget);
        out->abs_deadline = ld(&r->abs);
    }
    out->lent_deadline = ld(&((struct goro *)g)->dl_lent);
    goro__unlock(&loans.lock);
    return 0;
}
