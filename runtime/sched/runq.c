/*
 * The run queues: each P's lock-free ring with its runnext slot (Go's
 * runqput / runqget / runqgrab), the global queue under goro__sched.lock,
 * the HIGH and LOW lists, the coroutines pinned to an M, a P's timed
 * queue, and stealing from other Ps. The hot half is inline in runq.h.
 *
 * Keeps invariants 1 (one queue at a time: a coroutine is put only once
 * made RUNNABLE), 4 (only the owner pushes; anyone takes by CAS) and 9
 * (the class lists). See the prose at the top of sched.c.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"

/* ---- local run queue (Go's runqput/runqget/runqgrab, see invariant 4) ---- */

/* Nothing runnable queued on p, of any class. */
bool goro__runq_empty(struct goro_p *p)
{
    if (goro__classes_in_use() && goro__pq_any(p))
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
    goro__globrunq_put_batch(batch, (int)n + 1);
    return true;
}

/* Owner only. next: put g in runnext and demote its previous occupant. */
void goro__runq_put(struct goro_p *p, struct goro *g, bool next)
{
    /* invariant 4: only the owning P pushes (a retake under way backs off) */
    GORO_ASSERT(goro__p_owner_settled(p) == goro__m());
    /* invariant 1: only a RUNNABLE coroutine is queued, by whoever made it so */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_RUNNABLE);
    if (next) {
        struct goro *old;
        if (goro__sched.nprocs == 1) {        /* no thieves: see goro__runq_get */
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
        /* invariant 4: takers only move head up to tail, so the ring the
         * owner sees never holds more than it has room for */
        GORO_ASSERT(t - h <= GORO_RUNQ_SIZE);
        if (t - h < GORO_RUNQ_SIZE) {
            atomic_store_explicit(&p->runq[t % GORO_RUNQ_SIZE], g, memory_order_relaxed);
            atomic_store_explicit(&p->runq_tail, t + 1, memory_order_release);
            return;
        }
        if (runq_put_slow(p, g, h, t))
            return;
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

void goro__globrunq_put_batch(struct goro *const *gs, int n)
{
#ifdef GORO_DEBUG
    for (int i = 0; i < n; i++)     /* invariant 1: queued once made RUNNABLE */
        GORO_ASSERT(atomic_load_explicit(&gs[i]->state, memory_order_relaxed) ==
                    GORO_S_RUNNABLE);
#endif
    goro__lock(&goro__sched.lock);
    gq_grow_locked(n);
    uint32_t size = (uint32_t)atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        goro__sched.gq[(goro__sched.gq_first + size + (uint32_t)i) % goro__sched.gq_cap] = gs[i];
    atomic_store_explicit(&goro__sched.gq_size, (int)size + n, memory_order_relaxed);
    goro__unlock(&goro__sched.lock);
}

void goro__gq_batch_flush(struct gq_batch *b)
{
    if (b->n)
        goro__globrunq_put_batch(b->g, b->n);
    b->n = 0;
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
        goro__runq_put(p, goro__sched.gq[slot], false);
    }
    goro__sched.gq_first = (goro__sched.gq_first + (uint32_t)n) % goro__sched.gq_cap;
    atomic_store_explicit(&goro__sched.gq_size, size - n, memory_order_relaxed);
    return g;
}

/* Takes from the global queue. Extras land on p's ring, where idle Ms may
 * steal them: that is new work, so the producer's check follows (inv. 5). */
struct goro *goro__globrunq_get(struct goro_p *p, int max)
{
    if (atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed) == 0)
        return NULL;
    goro__lock(&goro__sched.lock);
    uint32_t tail = atomic_load_explicit(&p->runq_tail, memory_order_relaxed);
    struct goro *g = globrunq_get_locked(p, max);
    bool extras = atomic_load_explicit(&p->runq_tail, memory_order_relaxed) != tail;
    goro__unlock(&goro__sched.lock);
    if (extras)
        goro__spinner_start_if_idle(p);
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

/* Under cq's lock: list i grows or shrinks by one (only under the lock,
 * so no read-modify-write). */
static void pq_count_add(struct goro_classq *cq, int i, int d)
{
    atomic_store_explicit(&cq->n[i], goro__pq_count(cq, i) + d, memory_order_release);
}

/* Queues g, of class prio (not NORMAL), on p's list of that class, or the
 * global one without a P. Out of line: the wake-up paths that inline
 * goro__queue_ready stay as small as they were for NORMAL coroutines. */
void goro__pq_put(struct goro_p *p, struct goro *g, int prio)
{
    /* invariant 9: NORMAL goes to the ring; and a pick reads the lists only
     * once classes_used is set, so it must be set before anything is here */
    GORO_ASSERT(prio != GORO_PRIO_NORMAL && goro__classes_in_use());
    /* invariant 1 */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_RUNNABLE);
    if (prio == GORO_PRIO_DL) {
        goro__dl_put(p, g);
        return;
    }
    struct goro_classq *cq = classq_of(p);
    int i = pq_index(prio);
    goro__lock(&cq->lock);
    goro__chain_append(&cq->head[i], &cq->tail[i], g);
    pq_count_add(cq, i, 1);
    goro__unlock(&cq->lock);
}

/* Takes the first of list i: p's (anyone may, p being a victim), or the
 * global one (p NULL). */
struct goro *goro__pq_take(struct goro_p *p, int i)
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

/* Work on the global queues, of any class. */
bool goro__global_work(void)
{
    return atomic_load_explicit(&goro__sched.gq_size, memory_order_relaxed) > 0 ||
           (GORO_CLASSES && (goro__pq_count(&goro__sched.classq, GORO_PQ_HIGH) > 0 ||
                             goro__pq_count(&goro__sched.classq, GORO_PQ_LOW) > 0 ||
                             goro__pq_count(&goro__sched.classq, GORO_PQ_DL) > 0));
}

/* Moves the coroutines of a LOW list - p's, or the global one (from) -
 * that have been lent a class since they were queued: HIGH ones to p's
 * HIGH list, NORMAL ones to p's ring. p is the owner. */
void goro__pq_rescan(struct goro_p *p, struct goro_p *from)
{
    struct goro_classq *cq = classq_of(from);
    enum { L = GORO_PQ_LOW };
    if (!goro__pq_count(cq, L))
        return;
    struct goro *lent = NULL;
    goro__lock(&cq->lock);
    struct goro **at = &cq->head[L], *prev = NULL;
    while (*at) {
        struct goro *g = *at;
        if (goro__queue_class(g) == GORO_PRIO_LOW) {
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
        if (goro__queue_class(g) > GORO_PRIO_NORMAL)
            goro__pq_put(p, g, goro__queue_class(g));
        else
            goro__runq_put(p, g, false);
    }
}


static uint32_t fastrand(struct goro_p *p)
{
    return goro__xorshift32(&p->rand);
}

/* ---- stealing (on g0) ---- */

/* Strides coprime with nprocs: start + k*stride (mod n) visits every P. */
static int coprimes[64];
static int ncoprimes;

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void goro__steal_order_init(int n)
{
    ncoprimes = 0;
    for (int i = 1; i <= n && ncoprimes < 64; i++)
        if (gcd(i, n) == 1)
            coprimes[ncoprimes++] = i;
}

/* g, taken from victim's queue (for the trace). */
static struct goro *stolen(struct goro *g, struct goro_p *victim)
{
    GORO_TRACE(GORO_TEV_STEAL, g->id, 0, (uint32_t)victim->id, 0, 0);
    return g;
}

/* Another P's HIGH or LOW list (invariant 9). */
static struct goro *steal_class(struct goro_p *p, int i)
{
    for (int v = 0; v < goro__sched.nprocs; v++) {
        struct goro_p *victim = &goro__sched.procs[v];
        struct goro *g;
        if (victim != p && (g = goro__pq_take(victim, i)))
            return stolen(g, victim);
    }
    return NULL;
}

struct goro *goro__steal_work(struct goro_p *p)
{
    enum { TRIES = 4 };
    int n = goro__sched.nprocs;
    bool classes = goro__classes_in_use();
    struct goro *hi = goro__dl_in_use() ? goro__dl_steal(p) : NULL;
    if (!hi && classes)
        hi = steal_class(p, GORO_PQ_HIGH);
    if (hi)
        return hi;
    for (int pass = 0; pass < TRIES; pass++) {
        bool steal_next = pass == TRIES - 1;
        uint32_t r = fastrand(p);
        int v = (int)(r % (uint32_t)n);
        int stride = coprimes[(r >> 8) % (uint32_t)ncoprimes];
        for (int i = 0; i < n; i++, v = (v + stride) % n) {
            struct goro_p *victim = &goro__sched.procs[v];
            if (victim == p)
                continue;
            struct goro *g = runq_steal(p, victim, steal_next);
            if (g)
                return stolen(g, victim);
        }
    }
    return classes ? steal_class(p, GORO_PQ_LOW) : NULL;
}

bool goro__any_runq_nonempty(void)
{
    for (int i = 0; i < goro__sched.nprocs; i++)
        if (!goro__runq_empty(&goro__sched.procs[i]))
            return true;
    return false;
}

/* ---- coroutines pinned to their M (preempted there) ----
 * m's own thread adds and takes them; sysmon may take them all once m has
 * been without its P for a while (goro__unpin_stuck): hence the lock. */

void goro__pinned_push(struct goro_m *m, struct goro *g)
{
    /* invariant 1, and only m's own thread adds */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_RUNNABLE &&
                m == goro__m());
    g->next = NULL;
    goro__lock(&m->pin_lock);
    if (m->pinned_tail)
        m->pinned_tail->next = g;
    else
        m->pinned = g;
    m->pinned_tail = g;
    atomic_fetch_add_explicit(&m->npinned, 1, memory_order_relaxed);
    goro__unlock(&m->pin_lock);
}

struct goro *goro__pinned_pop(struct goro_m *m)
{
    if (!goro__pinned_any(m))
        return NULL;
    goro__lock(&m->pin_lock);
    struct goro *g = m->pinned;
    if (g) {
        if (!(m->pinned = g->next))
            m->pinned_tail = NULL;
        atomic_fetch_sub_explicit(&m->npinned, 1, memory_order_relaxed);
    }
    goro__unlock(&m->pin_lock);
    return g;
}

struct goro *goro__pinned_take_all(struct goro_m *m)
{
    goro__lock(&m->pin_lock);
    struct goro *list = m->pinned;
    m->pinned = m->pinned_tail = NULL;
    atomic_store_explicit(&m->npinned, 0, memory_order_relaxed);
    goro__unlock(&m->pin_lock);
    return list;
}

/* ---- a P's timed queue ---- */

void goro__timed_append(struct goro_p *p, struct goro_polled *list)
{
    if (goro__dl_in_use())
        goro__dl_timed(p, list);    /* reserved ones go by their deadline */
    if (!list->head)
        return;
    if (p->timed.tail)
        p->timed.tail->next = list->head;
    else
        p->timed.head = list->head;
    p->timed.tail = list->tail;
    p->timed.n += list->n;
    *list = (struct goro_polled){ NULL, NULL, 0 };
}

