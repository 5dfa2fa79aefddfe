/* The run queues (runq.c; invariants 1, 4 and 9 in sched.c): each P's
 * ring and runnext, the global queue, the HIGH and LOW lists, the
 * coroutines pinned to an M and a P's timed queue. Declarations, and
 * inline the few that every pick or wake-up runs (the ring's take, the
 * counts a pick reads, the placement of a runnable coroutine). */
#ifndef GORO_SCHED_RUNQ_H
#define GORO_SCHED_RUNQ_H

#include "internal.h"
#include "sched/sched.h"
#include "sched/deadline.h"

#define RUNNEXT_STREAK 61

/* Free slots in p's ring (its owner's view: only the owner adds). */
static inline int goro__runq_room(struct goro_p *p)
{
    uint32_t h = atomic_load_explicit(&p->runq_head, memory_order_acquire);
    uint32_t t = atomic_load_explicit(&p->runq_tail, memory_order_relaxed);
    return (int)(GORO_RUNQ_SIZE - (t - h));
}

/* Nothing runnable queued on p, of any class. */
GORO_HIDDEN bool goro__runq_empty(struct goro_p *p);
/* Owner only. next: put g in runnext and demote its previous occupant. */
GORO_HIDDEN void goro__runq_put(struct goro_p *p, struct goro *g, bool next);

/* The coroutine at the ring's index h runs after the one being taken:
 * start loading its record now. With tens of thousands of coroutines
 * alive each record is on a page of its own, cold in the TLB and the
 * cache, and the switch into it stalls on its first store (g->m) unless
 * the slice before it has hidden the load. A hint only: a thief may take
 * it meanwhile, and a prefetch of a stale pointer does not fault. */
static inline void runq_prefetch(struct goro_p *p, uint32_t h, uint32_t t)
{
    if (h != t)
        __builtin_prefetch(atomic_load_explicit(&p->runq[h % GORO_RUNQ_SIZE],
                                                memory_order_relaxed), 1, 3);
}

/* Owner only. *inherit is set when g came from runnext. With a single P
 * nobody steals, so the owner may take without a CAS. */
static inline struct goro *goro__runq_get(struct goro_p *p, bool *inherit)
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
            runq_prefetch(p, h + 1, t);
            return g;
        }
        if (atomic_compare_exchange_weak_explicit(&p->runq_head, &h, h + 1,
                memory_order_release, memory_order_relaxed)) {
            runq_prefetch(p, h + 1, t);
            return g;
        }
    }
}

/* An idle M's theft for p (on g0): another P's HIGH list first, then
 * half of another P's ring (its runnext on the last pass), LOW lists last
 * (invariant 9). One to run, the rest on p's ring; NULL: nothing. */
GORO_HIDDEN struct goro *goro__steal_work(struct goro_p *p);
GORO_HIDDEN void goro__steal_order_init(int n);
GORO_HIDDEN bool goro__any_runq_nonempty(void);

/* ---- the global queue (under goro__sched.lock) ---- */

GORO_HIDDEN void goro__globrunq_put_batch(struct goro *const *gs, int n);
/* Takes from the global queue (at most max, if max > 0): one to run, the
 * rest on p's ring, followed by the producer's check (invariant 5). */
GORO_HIDDEN struct goro *goro__globrunq_get(struct goro_p *p, int max);
/* Work on the global queues, of any class. */
GORO_HIDDEN bool goro__global_work(void);

/* Coroutines bound for the global queue, gathered so that the lock is taken
 * once per GQ_BATCH of them rather than once each. */
enum { GQ_BATCH = 64 };
struct gq_batch {
    struct goro *g[GQ_BATCH];
    int n;
};

/* Empty. Not `= { .n = 0 }`, which clears the whole array too (512
 * bytes, `rep stos`, on every drain of a poll). */
static inline void goro__gq_batch_init(struct gq_batch *b)
{
    b->n = 0;
}

GORO_HIDDEN void goro__gq_batch_flush(struct gq_batch *b);

static inline void goro__gq_batch_add(struct gq_batch *b, struct goro *g)
{
    b->g[b->n++] = g;
    if (b->n == GQ_BATCH)
        goro__gq_batch_flush(b);
}

/* ---- the HIGH and LOW queues (invariant 9) ---- */

static inline int goro__pq_count(struct goro_classq *cq, int i)
{
    return atomic_load_explicit(&cq->n[i], memory_order_relaxed);
}

/* Queues g, of class prio (not NORMAL), on p's list of that class, or the
 * global one without a P (GORO_PRIO_DL: goro__dl_put). Out of line: the wake-up paths that inline
 * goro__queue_ready stay as small as they were for NORMAL coroutines. */
GORO_HIDDEN __attribute__((noinline, cold)) void goro__pq_put(struct goro_p *p, struct goro *g,
                                                              int prio);
/* Takes the first of list i: p's (anyone may, p being a victim), or the
 * global one (p NULL). */
GORO_HIDDEN struct goro *goro__pq_take(struct goro_p *p, int i);
/* Moves the coroutines of a LOW list - p's, or the global one (from) -
 * that have been lent a class since they were queued: HIGH ones to p's
 * HIGH list, NORMAL ones to p's ring. p is the owner. */
GORO_HIDDEN void goro__pq_rescan(struct goro_p *p, struct goro_p *from);

/* p's own list i, then the global one; the counts are read first, so an
 * empty class costs two loads. */
static inline struct goro *goro__pq_get(struct goro_p *p, int i)
{
    struct goro *g = NULL;
    if (goro__pq_count(&p->classq, i))
        g = goro__pq_take(p, i);
    if (!g && goro__pq_count(&goro__sched.classq, i))
        g = goro__pq_take(NULL, i);
    return g;
}

static inline bool goro__pq_any(struct goro_p *p)
{
    return atomic_load_explicit(&p->classq.n[GORO_PQ_HIGH], memory_order_acquire) |
           atomic_load_explicit(&p->classq.n[GORO_PQ_LOW], memory_order_acquire) |
           atomic_load_explicit(&p->classq.n[GORO_PQ_DL], memory_order_acquire);
}

/* ---- making a coroutine runnable ---- */

/* g is runnable: onto p's run queue (runnext with next) or, without a P,
 * the global queue (through *global, flushed by the caller, if not NULL) -
 * or, for a class other than NORMAL, that class's list (invariant 9). */
static inline __attribute__((always_inline)) void goro__queue_ready(struct goro_p *p,
                                                                    struct goro *g, bool next,
                                                                    struct gq_batch *global)
{
    /* Until a class other than NORMAL is used, g's is NORMAL: the flag,
     * in the line a pick reads anyway, spares reading g's. */
    int prio = goro__classes_in_use() ? goro__queue_class(g) : GORO_PRIO_NORMAL;
    if (prio != GORO_PRIO_NORMAL)
        goro__pq_put(p, g, prio);
    else if (p)
        goro__runq_put(p, g, next);
    else if (global)
        goro__gq_batch_add(global, g);
    else
        goro__globrunq_put_batch(&g, 1);
}

/* ---- coroutines pinned to their M (preempted there) ----
 * m's own thread adds and takes them; sysmon may take them all once m has
 * been without its P for a while (goro__unpin_stuck): hence the lock. */

static inline bool goro__pinned_any(struct goro_m *m)
{
    return atomic_load_explicit(&m->npinned, memory_order_relaxed) != 0;
}

GORO_HIDDEN void goro__pinned_push(struct goro_m *m, struct goro *g);
GORO_HIDDEN struct goro *goro__pinned_pop(struct goro_m *m);
GORO_HIDDEN struct goro *goro__pinned_take_all(struct goro_m *m);

/* Coroutines p's own timers woke, in deadline order: they run before the
 * ring (a timer's lateness is what it is for), after the global queue's
 * and the pinned coroutines' turns. Owner only. */
static inline struct goro *goro__timed_pop(struct goro_p *p)
{
    struct goro *g = p->timed.head;
    if (g) {
        if (!(p->timed.head = g->next))
            p->timed.tail = NULL;
        p->timed.n--;
    }
    return g;
}

GORO_HIDDEN void goro__timed_append(struct goro_p *p, struct goro_polled *list);

#endif
