/* The run queues: each P's lock-free ring with its runnext slot (Go's
 * runqput / runqget / runqgrab; invariant 4 in sched.c) and the global
 * queue under goro__sched.lock. Static functions for sched.c alone, which
 * includes this once: the scheduler's hot path inlines them. */
#ifndef GORO_SCHED_RUNQ_H
#define GORO_SCHED_RUNQ_H

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ---- local run queue (Go's runqput/runqget/runqgrab, see invariant 4) ---- */

#define RUNNEXT_STREAK 61

static void globrunq_put_batch(struct goro *const *gs, int n);

/* Free slots in p's ring (its owner's view: only the owner adds). */
static int runq_room(struct goro_p *p)
{
    uint32_t h = atomic_load_explicit(&p->runq_head, memory_order_acquire);
    uint32_t t = atomic_load_explicit(&p->runq_tail, memory_order_relaxed);
    return (int)(GORO_RUNQ_SIZE - (t - h));
}

static bool pq_any(struct goro_p *p);

/* Nothing runnable queued on p, of any class. */
static bool runq_empty(struct goro_p *p)
{
    if (goro__classes_in_use() && pq_any(p))
        return false;
    /* Read head, tail, runnext, then head again, so that a coroutine moving
     * from runnext to the ring is not missed by this snapshot. */
    for (;;) {
        uint32_t h = atomic_load_explicit(&p->runq_head, memory_order_acquire);
        uint32_t t = atomic_load_explicit(&p->runq_tail, memory_order_acquire);
        struct goro *next = atomic_load_explicit(&p->runnext, memory_order_acquire);
        if (atomic_load_explicit(&p->runq_tail, memory_order_acquire) == t)
            return h == t && next == NULL;
    }
}

/* Ring full: move half of it and g to the global queue in one batch. */
static bool runq_put_slow(struct goro_p *p, struct goro *g, uint32_t h, uint32_t t)
{
    enum { N = GORO_RUNQ_SIZE / 2 };
    struct goro *batch[N + 1];
    uint32_t n = (t - h) / 2;
    for (uint32_t i = 0; i < n; i++)
        batch[i] = atomic_load_explicit(&p->runq[(h + i) % GORO_RUNQ_SIZE],
                                        memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&p->runq_head, &h, h + n,
            memory_order_release, memory_order_relaxed))
        return false;               /* thieves took some: the ring has room */
    batch[n] = g;
    globrunq_put_batch(batch, (int)n + 1);
    return true;
}

/* Owner only. next: put g in runnext and demote its previous occupant. */
static void runq_put(struct goro_p *p, struct goro *g, bool next)
{
    GORO_ASSERT(p_owner_settled(p) == goro__m());   /* a retake under way backs off */
    if (next) {
        struct goro *old;
        if (goro__sched.nprocs == 1) {        /* no thieves: see runq_get */
            old = atomic_load_explicit(&p->runnext, memory_order_relaxed);
            atomic_store_explicit(&p->runnext, g, memory_order_relaxed);
        } else {
            old = atomic_exchange_explicit(&p->runnext, g, memory_order_acq_rel);
        }
        if (!(g = old))
            return;
    }
    for (;;) {
        uint32_t h = atomic_load_explicit(&p->runq_head, memory_order_acquire);
        uint32_t t = atomic_load_explicit(&p->runq_tail, memory_order_relaxed);
        if (t - h < GORO_RUNQ_SIZE) {
            atomic_store_explicit(&p->runq[t % GORO_RUNQ_SIZE], g, memory_order_relaxed);
            atomic_store_explicit(&p->runq_tail, t + 1, memory_order_release);
            return;
        }
        if (runq_put_slow(p, g, h, t))
            return;
    }
}

/* Owner only. *inherit is set when g came from runnext. With a single P
 * nobody steals, so the owner may take without a CAS. */
static struct goro *runq_get(struct goro_p *p, bool *inherit)
{
    bool alone = goro__sched.nprocs == 1;
    struct goro *next = atomic_load_explicit(&p->runnext, memory_order_relaxed);
    /* A pair waking each other through runnext would keep one slice for
     * ever and starve everything else: after RUNNEXT_STREAK inherited turns
     * a new slice starts (so the global queue gets its every-61 look) and
     * the ring, if it has anything, goes first (invariant 4). */
    bool fresh = false;
    if (next && ++p->runnext_streak > RUNNEXT_STREAK) {
        p->runnext_streak = 0;
        fresh = true;
        if (atomic_load_explicit(&p->runq_head, memory_order_relaxed) !=
            atomic_load_explicit(&p->runq_tail, memory_order_relaxed))
            next = NULL;
    }
    if (next) {
        if (alone) {
            atomic_store_explicit(&p->runnext, NULL, memory_order_relaxed);
            *inherit = !fresh;
            return next;
        }
        if (atomic_compare_exchange_strong_explicit(&p->runnext, &next, NULL,
                memory_order_acq_rel, memory_order_relaxed)) {
            *inherit = !fresh;
            return next;
        }
    }
    *inherit = false;
    for (;;) {
        uint32_t h = atomic_load_explicit(&p->runq_head, memory_order_acquire);
        uint32_t t = atomic_load_explicit(&p->runq_tail, memory_order_relaxed);
        if (t == h)
            return NULL;
        struct goro *g = atomic_load_explicit(&p->runq[h % GORO_RUNQ_SIZE],
                                              memory_order_relaxed);
        if (alone) {
            atomic_store_explicit(&p->runq_head, h + 1, memory_order_relaxed);
            return g;
        }
        if (atomic_compare_exchange_weak_explicit(&p->runq_head, &h, h + 1,
                memory_order_release, memory_order_relaxed))
            return g;
    }
}

/* Takes half of victim's queue into p's ring starting at slot `at` (beyond
 * p's tail, private to p). With steal_next, takes victim's runnext when its
 * ring is empty - after a short pause if victim is running, because a
 * coroutine in runnext is usually about to run there with its data hot. */
static uint32_t runq_grab(struct goro_p *victim, struct goro_p *p, uint32_t at,
                          bool steal_next)
{
    for (;;) {
        uint32_t h = atomic_load_explicit(&victim->runq_head, memory_order_acquire);
        uint32_t t = atomic_load_explicit(&victim->runq_tail, memory_order_acquire);
        uint32_t n = t - h;
        n -= n / 2;
        if (n == 0) {
            if (!steal_next)
                return 0;
            struct goro *next = atomic_load_explicit(&victim->runnext, memory_order_acquire);
            if (!next)
                return 0;
            if (atomic_load_explicit(&victim->running, memory_order_relaxed)) {
                struct timespec ts = { 0, 3000 };
                nanosleep(&ts, NULL);
            }
            if (!atomic_compare_exchange_strong_explicit(&victim->runnext, &next, NULL,
                    memory_order_acq_rel, memory_order_relaxed))
                continue;
            atomic_store_explicit(&p->runq[at % GORO_RUNQ_SIZE], next, memory_order_relaxed);
            return 1;
        }
        if (n > GORO_RUNQ_SIZE / 2)
            continue;               /* h and t read inconsistently */
        for (uint32_t i = 0; i < n; i++) {
            struct goro *g = atomic_load_explicit(
                &victim->runq[(h + i) % GORO_RUNQ_SIZE], memory_order_relaxed);
            atomic_store_explicit(&p->runq[(at + i) % GORO_RUNQ_SIZE], g,
                                  memory_order_relaxed);
        }
        if (atomic_compare_exchange_strong_explicit(&victim->runq_head, &h, h + n,
                memory_order_acq_rel, memory_order_relaxed))
            return n;
    }
}

static struct goro *runq_steal(struct goro_p *p, struct goro_p *victim, bool steal_next)
{
    uint32_t t = atomic_load_explicit(&p->runq_tail, memory_order_relaxed);
    uint32_t n = runq_grab(victim, p, t, steal_next);
    if (n == 0)
        return NULL;
    n--;
    struct goro *g = atomic_load_explicit(&p->runq[(t + n) % GORO_RUNQ_SIZE],
                                          memory_order_relaxed);
    if (n)
        atomic_store_explicit(&p->runq_tail, t + n, memory_order_release);
    return g;
}

/* ---- global queue (under goro__sched.lock) ----
 * A growable ring of pointers rather than a list linked through the
 * coroutines: moving a batch then copies pointers instead of touching one
 * stack page per coroutine (each costs a cache and a TLB miss). */

static void gq_grow_locked(int need)
{
    int size = atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed);
    if ((uint32_t)(size + need) <= goro__sched.gq_cap)
        return;
    uint32_t cap = goro__sched.gq_cap ? goro__sched.gq_cap : 1024;
    while (cap < (uint32_t)(size + need))
        cap *= 2;
    struct goro **a = malloc(cap * sizeof *a);
    if (!a) {
        /* Dropping runnable coroutines is not an option. */
        static const char msg[] = "goro: out of memory growing the run queue\n";
        if (write(2, msg, sizeof msg - 1) < 0) { }
        abort();
    }
    for (int i = 0; i < size; i++)
        a[i] = goro__sched.gq[(goro__sched.gq_first + (uint32_t)i) % goro__sched.gq_cap];
    free(goro__sched.gq);
    goro__sched.gq = a;
    goro__sched.gq_cap = cap;
    goro__sched.gq_first = 0;
}

static void globrunq_put_batch(struct goro *const *gs, int n)
{
    goro__lock(&goro__sched.lock);
    gq_grow_locked(n);
    uint32_t size = (uint32_t)atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        goro__sched.gq[(goro__sched.gq_first + size + (uint32_t)i) % goro__sched.gq_cap] = gs[i];
    atomic_store_explicit(&goro__sched.gq_size, (int)size + n, memory_order_relaxed);
    goro__unlock(&goro__sched.lock);
}

/* Coroutines bound for the global queue, gathered so that the lock is taken
 * once per GQ_BATCH of them rather than once each. */
enum { GQ_BATCH = 64 };
struct gq_batch {
    struct goro *g[GQ_BATCH];
    int n;
};

/* Empty. Not `= { .n = 0 }`, which clears the whole array too (512
 * bytes, `rep stos`, on every drain of a poll). */
static inline void gq_batch_init(struct gq_batch *b)
{
    b->n = 0;
}

static void gq_batch_flush(struct gq_batch *b)
{
    if (b->n)
        globrunq_put_batch(b->g, b->n);
    b->n = 0;
}

static void gq_batch_add(struct gq_batch *b, struct goro *g)
{
    b->g[b->n++] = g;
    if (b->n == GQ_BATCH)
        gq_batch_flush(b);
}

/* Under goro__sched.lock. Takes a fair share (at most max if max > 0): returns one,
 * puts the rest on p's ring. */
static struct goro *globrunq_get_locked(struct goro_p *p, int max)
{
    int size = atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed);
    if (size == 0)
        return NULL;
    int n = size / goro__sched.nprocs + 1;
    if (n > size)
        n = size;
    if (max > 0 && n > max)
        n = max;
    if (n > (int)GORO_RUNQ_SIZE / 2)
        n = GORO_RUNQ_SIZE / 2;
    struct goro *g = goro__sched.gq[goro__sched.gq_first];
    for (int i = 1; i < n; i++) {
        uint32_t slot = (goro__sched.gq_first + (uint32_t)i) % goro__sched.gq_cap;
        runq_put(p, goro__sched.gq[slot], false);
    }
    goro__sched.gq_first = (goro__sched.gq_first + (uint32_t)n) % goro__sched.gq_cap;
    atomic_store_explicit(&goro__sched.gq_size, size - n, memory_order_relaxed);
    return g;
}

static void spinner_start_if_idle(struct goro_p *held);

/* Takes from the global queue. Extras land on p's ring, where idle Ms may
 * steal them: that is new work, so the producer's check follows (inv. 5). */
static struct goro *globrunq_get(struct goro_p *p, int max)
{
    if (atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed) == 0)
        return NULL;
    goro__lock(&goro__sched.lock);
    uint32_t tail = atomic_load_explicit(&p->runq_tail, memory_order_relaxed);
    struct goro *g = globrunq_get_locked(p, max);
    bool extras = atomic_load_explicit(&p->runq_tail, memory_order_relaxed) != tail;
    goro__unlock(&goro__sched.lock);
    if (extras)
        spinner_start_if_idle(p);
    return g;
}

/* ---- the HIGH and LOW queues (invariant 9) ----
 * Short lists under a lock, a P's or the global one's: most programs
 * never use them, and every pick first reads their counts without it. */

/* A queue's index for class prio: HIGH or LOW (NORMAL uses the ring). */
static int pq_index(int prio)
{
    return prio > GORO_PRIO_NORMAL ? GORO_PQ_HIGH : GORO_PQ_LOW;
}

/* p's lists, or the global ones (p NULL). */
static struct goro_classq *classq_of(struct goro_p *p)
{
    return p ? &p->classq : &goro__sched.classq;
}

static int pq_count(struct goro_classq *cq, int i)
{
    return atomic_load_explicit(&cq->n[i], memory_order_relaxed);
}

/* Under cq's lock: list i grows or shrinks by one (only under the lock,
 * so no read-modify-write). */
static void pq_count_add(struct goro_classq *cq, int i, int d)
{
    atomic_store_explicit(&cq->n[i], pq_count(cq, i) + d, memory_order_release);
}

/* Queues g, of class prio (not NORMAL), on p's list of that class, or the
 * global one without a P. Out of line: the wake-up paths that inline
 * queue_ready stay as small as they were for NORMAL coroutines. */
static __attribute__((noinline, cold)) void pq_put(struct goro_p *p, struct goro *g, int prio)
{
    struct goro_classq *cq = classq_of(p);
    int i = pq_index(prio);
    goro__lock(&cq->lock);
    goro__chain_append(&cq->head[i], &cq->tail[i], g);
    pq_count_add(cq, i, 1);
    goro__unlock(&cq->lock);
}

/* Takes the first of list i: p's (anyone may, p being a victim), or the
 * global one (p NULL). */
static struct goro *pq_take(struct goro_p *p, int i)
{
    struct goro_classq *cq = classq_of(p);
    if (atomic_load_explicit(&cq->n[i], memory_order_acquire) == 0)
        return NULL;
    goro__lock(&cq->lock);
    struct goro *g = cq->head[i];
    if (g) {
        if (!(cq->head[i] = g->next))
            cq->tail[i] = NULL;
        pq_count_add(cq, i, -1);
    }
    goro__unlock(&cq->lock);
    return g;
}

/* p's own list i, then the global one; the counts are read first, so an
 * empty class costs two loads. */
static inline struct goro *pq_get(struct goro_p *p, int i)
{
    struct goro *g = NULL;
    if (pq_count(&p->classq, i))
        g = pq_take(p, i);
    if (!g && pq_count(&goro__sched.classq, i))
        g = pq_take(NULL, i);
    return g;
}

static bool pq_any(struct goro_p *p)
{
    return atomic_load_explicit(&p->classq.n[GORO_PQ_HIGH], memory_order_acquire) |
           atomic_load_explicit(&p->classq.n[GORO_PQ_LOW], memory_order_acquire);
}

/* Work on the global queues, of any class. */
static bool global_work(void)
{
    return atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed) > 0 ||
           (GORO_CLASSES && (pq_count(&goro__sched.classq, GORO_PQ_HIGH) > 0 ||
                             pq_count(&goro__sched.classq, GORO_PQ_LOW) > 0));
}

/* Moves the coroutines of a LOW list - p's, or the global one (from) -
 * that have been lent a class since they were queued: HIGH ones to p's
 * HIGH list, NORMAL ones to p's ring. p is the owner. */
static void pq_rescan(struct goro_p *p, struct goro_p *from)
{
    struct goro_classq *cq = classq_of(from);
    enum { L = GORO_PQ_LOW };
    if (!pq_count(cq, L))
        return;
    struct goro *lent = NULL;
    goro__lock(&cq->lock);
    struct goro **at = &cq->head[L], *prev = NULL;
    while (*at) {
        struct goro *g = *at;
        if (goro__prio_of(g) == GORO_PRIO_LOW) {
            prev = g;
            at = &g->next;
            continue;
        }
        *at = g->next;
        if (cq->tail[L] == g)
            cq->tail[L] = prev;
        pq_count_add(cq, L, -1);
        g->next = lent;
        lent = g;
    }
    goro__unlock(&cq->lock);
    while (lent) {
        struct goro *g = lent;
        lent = g->next;
        if (goro__prio_of(g) > GORO_PRIO_NORMAL)
            pq_put(p, g, GORO_PRIO_HIGH);
        else
            runq_put(p, g, false);
    }
}

#endif
