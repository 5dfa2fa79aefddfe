/*
 * The scheduler: M worker threads run coroutines from P run queues.
 *
 * Vocabulary (after Go): a P is the right to run coroutines and owns a local
 * run queue; an M is a worker thread; g0 is an M's own thread stack, where
 * it looks for work and sleeps. Today every M owns one P for life; the P/M
 * split exists so that a P can be handed to another thread when its M is
 * stuck in a blocking call.
 *
 * Invariants, and why they hold:
 *
 * 1. A coroutine is in at most one place: the running slot of one M, one
 *    run queue slot / runnext / the global queue, or one waiter list. It is
 *    put into a queue only by goro__ready() (PARKED -> RUNNABLE), by spawn
 *    (FREE -> RUNNABLE) or by the YIELD post-switch action.
 *
 * 2. A context is never resumed before it is fully saved. A coroutine that
 *    leaves never publishes itself: the context it switches to does, in
 *    post_switch(), after goro__ctx_switch has stored the leaver's sp. For
 *    PARK the leaver still holds the lock that guards its waiter record;
 *    post_switch releases it, so a waker (who needs that lock to find the
 *    waiter) can only call goro__ready() after the save.
 *
 * 3. Nothing here keeps "the current M" across a switch: a coroutine may
 *    come back on another thread. After every switch it is re-read through
 *    goro__m(), which the compiler may not cache, and errno is restored.
 *
 * 4. Run queues: only the owning P pushes to its ring (store-release of
 *    tail); anyone takes by CAS on head, after reading the slot. runnext is
 *    taken first and inherits the time slice (schedtick is not bumped), so a
 *    pair of coroutines waking each other shares one slice; once every 61
 *    slices the global queue is looked at first so that it cannot starve.
 *    Until the monitor thread preempts long slices, a pair may inherit at
 *    most RUNNEXT_STREAK turns in a row before the ring goes first once.
 *
 * 5. No lost wake-ups. A producer makes work visible (run queue or global
 *    queue), then - with a full barrier in between - reads nmspinning and
 *    npidle and wakes an idle M if nobody spins (spinner_start). Producers are
 *    spawn, wake-ups, and an M that moves extras from the global queue onto
 *    its own ring. An M that gives up puts its P on the idle list, stops
 *    spinning if it was, then - full barrier - looks again at every run
 *    queue and the global queue before it sleeps. One of the two always
 *    sees the other: either the producer sees the idle P and no spinner
 *    (and wakes one), or a spinner that will look, or the idle M sees the
 *    work.
 *
 * 6. At most one M is woken at a time (nmspinning 0 -> 1 by CAS), an M may
 *    start spinning only while 2 * nmspinning < busy Ps, and a spinner that
 *    finds work wakes the next one: parallelism ramps up without a herd.
 *
 * 7. An idle M sleeps on its note with its P on the idle list; whoever takes
 *    that P off the list (spinner_start, or the M itself when it finds work during
 *    its recheck) is the one who makes it run, so a P is never run twice.
 *
 * 8. Hand-off. An M may use its P only while p->owner is that M. Runtime
 *    code that uses the P from a coroutine runs between rt_enter and
 *    rt_leave, which count m->in_rt (g0 is always inside). sysmon takes
 *    the P of an M stuck outside the runtime (a blocking system call, code
 *    that cannot be preempted) in three steps: owner m -> RETAKING by CAS,
 *    membarrier(), and only if in_rt is still 0 does it give the P to
 *    another M. The membarrier is the full barrier the M side does not pay
 *    for on every entry: either sysmon sees in_rt > 0 and gives the P back,
 *    or the M's rt_enter sees owner != m. An M that finds its P gone moves
 *    its coroutine to the global queue and becomes a spare - but only in
 *    yield and exit. Elsewhere the caller may hold what ties it to this
 *    thread (go()'s captured arguments, an object lock): it then does
 *    without a P (global queue, global stack pool) or parks through g0.
 *    The number of Ps, hence of threads running coroutines, never changes.
 *
 * 9. Classes. A runnable NORMAL coroutine goes where it always did (ring,
 *    runnext, global queue); a HIGH or LOW one goes to its class's list on
 *    the P that readied it, or the global one (queue_ready). A pick takes
 *    HIGH before the ring and LOW after it, and an idle M steals HIGH first,
 *    LOW last. Starvation is bounded by the slice count, as for the global
 *    queue: on slice 2 of every 61 the ring goes before HIGH, on slice 3
 *    LOW goes first. The class is read when g is queued: a coroutine lent a
 *    higher class keeps its place in the ring, but LOW lists are looked at
 *    again when a LOW coroutine is lent one (low_rescan), so that a holder
 *    whose waiter is more urgent than everything else is not left behind
 *    the very work the waiter outranks. The lists count as run queues for
 *    invariant 5: the recheck before sleeping reads their counts too,
 *    always; a pick reads them only once goro__sched.classes_used is set
 *    (before the first coroutine of another class exists), so a program
 *    of NORMAL coroutines pays one load of a line the pick reads anyway.
 *
 * 10. The virtual clock (deterministic testing: goro_config_t.clock). One
 *    P, no preemption, and goro_now() stands still while coroutines run.
 *    The P's owner, finding nothing to run (note_sleep), moves the clock
 *    to the next deadline - its timers' or a waiting outside thread's -
 *    and runs what is due; unless a coroutine waits on a descriptor (a
 *    read, a write, a select with a descriptor case) or an
 *    offloaded call (real_waits): then the clock follows the real one
 *    while the owner sleeps (clock_slept), so that no deadline passes
 *    before the world had its real time to answer. The seed decides, at
 *    each pick, which runnable coroutine goes next (seeded_turn): with
 *    nothing else choosing (one thread, no preemption, a clock that moves
 *    only here) the same seed gives the same order. Threads outside the
 *    runtime are not ordered by it: a test runs its body in a coroutine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"
#include "sched/sched.h"
#include "io/poller.h"
#include "coro/coro.h"
#include "base/sanitizer.h"
#include "debug/debug.h"                /* goro__stall_leaving */
#include "coro/cxx_eh.h"                 /* C++: exception state per coroutine */

GORO_HIDDEN struct goro_sched goro__sched = {
    .lock = GORO_LOCK_INIT_RANK(GORO_RANK_SCHED),
    .classq.lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF),
    .prio_inherit = true,
};

__thread struct goro_m *goro__tls_m __attribute__((tls_model("initial-exec")));

/* The M running this code. Not inlinable and not pure (the empty asm), so a
 * caller re-reads it after every switch instead of reusing a stale value. */
GORO_NOINLINE struct goro_m *goro__m(void)
{
    struct goro_m *m = goro__tls_m;
    __asm__ volatile("" : "+r"(m));
    return m;
}

GORO_NOINLINE struct goro *goro__current(void)
{
    struct goro_m *m = goro__m();
    return m ? m->curg : NULL;
}


/* A full barrier (invariant 5). TSan does not model fences (gcc rejects
 * them under -fsanitize=thread), so there a seq_cst read-modify-write
 * stands in. */
#ifdef GORO_TSAN
static _Atomic int barrier_word;
static void full_barrier(void) { atomic_fetch_add(&barrier_word, 0); }
#else
static void full_barrier(void) { atomic_thread_fence(memory_order_seq_cst); }
#endif

static uint32_t fastrand(struct goro_p *p)
{
    return goro__xorshift32(&p->rand);
}

/* ---- P ownership (invariant 8) ---- */

static void migrate(struct goro_m *m, struct goro *self);

/* p's owner once a retake under way is decided: sysmon, seeing the asker
 * inside the runtime, gives the P back, or hands it to another M. */
static struct goro_m *p_owner_settled(struct goro_p *p)
{
    struct goro_m *owner;
    while ((owner = atomic_load_explicit(&p->owner, memory_order_acquire)) == GORO_P_RETAKING)
        cpu_relax();
    return owner;
}

static struct goro_p *rt_enter(struct goro_m *m, bool may_move)
{
    int level = atomic_load_explicit(&m->in_rt, memory_order_relaxed);
    atomic_store_explicit(&m->in_rt, level + 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (level > 0) {
        /* Nested: the P is ours unless the outer entry found it gone
         * (then it went on without one, and so must this). */
        struct goro_p *p = m->p;
        return p && p_owner_settled(p) == m ? p : NULL;
    }
    struct goro_p *p = m->p;
    if (likely(p && atomic_load_explicit(&p->owner, memory_order_acquire) == m))
        return p;
    /* sysmon, retaking, sees in_rt > 0 and backs off */
    if (p && p_owner_settled(p) == m)
        return p;
    /* Lost for good: forget it, so that nothing here (spinner_start_if_idle, the
     * preemption check, the poller) goes on believing this M holds it.
     * Only m writes m->p while m runs a coroutine. */
    m->p = NULL;
    if (!may_move || !m->curg)
        return NULL;                /* still inside: the caller leaves */
    migrate(m, m->curg);            /* resumes on an M with a P, inside */
    return goro__m()->p;
}

static void rt_leave(struct goro_m *m)
{
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(&m->in_rt, atomic_load_explicit(&m->in_rt, memory_order_relaxed) - 1,
                          memory_order_release);
}

struct goro_p *goro__p_enter_on(struct goro_m *m)
{
    if (!m)
        return NULL;
    struct goro_p *p = rt_enter(m, false);
    if (!p)
        rt_leave(m);                /* no P (lost, or sysmon): the caller goes global */
    return p;
}

struct goro_p *goro__p_enter(void)
{
    return goro__p_enter_on(goro__m());
}

void goro__p_leave(void)
{
    struct goro_m *m = goro__m();
    if (m && atomic_load_explicit(&m->in_rt, memory_order_relaxed) > 0)
        rt_leave(m);
}

#include "sched/runq.h"               /* the run queues */

static bool timers_due(struct goro_p *p);
static bool clock_jump(struct goro_p *p);
static bool clock_slept(struct goro_p *p, int64_t real_from);

#include "sched/idle.h"               /* Ms that sleep and wake, idle Ps, spinners */

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

static void steal_order_init(int n)
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
        if (victim != p && (g = pq_take(victim, i)))
            return stolen(g, victim);
    }
    return NULL;
}

static struct goro *steal_work(struct goro_p *p)
{
    enum { TRIES = 4 };
    int n = goro__sched.nprocs;
    bool classes = goro__classes_in_use();
    struct goro *hi = classes ? steal_class(p, GORO_PQ_HIGH) : NULL;
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

static bool any_runq_nonempty(void)
{
    for (int i = 0; i < goro__sched.nprocs; i++)
        if (!runq_empty(&goro__sched.procs[i]))
            return true;
    return false;
}

/* ---- coroutines pinned to their M (preempted there) ----
 * m's own thread adds and takes them; sysmon may take them all once m has
 * been without its P for a while (goro__unpin_stuck): hence the lock. */

static bool pinned_any(struct goro_m *m)
{
    return atomic_load_explicit(&m->npinned, memory_order_relaxed) != 0;
}

static void pinned_push(struct goro_m *m, struct goro *g)
{
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

static struct goro *pinned_pop(struct goro_m *m)
{
    if (!pinned_any(m))
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

static struct goro *pinned_take_all(struct goro_m *m)
{
    goro__lock(&m->pin_lock);
    struct goro *list = m->pinned;
    m->pinned = m->pinned_tail = NULL;
    atomic_store_explicit(&m->npinned, 0, memory_order_relaxed);
    goro__unlock(&m->pin_lock);
    return list;
}

/* Coroutines p's own timers woke, in deadline order: they run before the
 * ring (a timer's lateness is what it is for), after the global queue's
 * and the pinned coroutines' turns. Owner only. */
static struct goro *timed_pop(struct goro_p *p)
{
    struct goro *g = p->timed.head;
    if (g) {
        if (!(p->timed.head = g->next))
            p->timed.tail = NULL;
        p->timed.n--;
    }
    return g;
}

static void timed_append(struct goro_p *p, struct goro_polled *list)
{
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

/* The LOW lists this P can take from, looked at again (invariant 9). */
static void low_rescan(struct goro_p *p)
{
    p->low_seen = atomic_load_explicit(&goro__sched.low_rescan, memory_order_relaxed);
    pq_rescan(p, p);
    pq_rescan(p, NULL);
}

/* The virtual clock (invariant 10; one P, so its owner takes and puts
 * without a CAS): the seed moves runnext behind the ring, or not, and
 * swaps the ring's head with one of its coroutines - which runnable one
 * goes next is the seed's choice. */
static GORO_NOINLINE void seeded_turn(struct goro_p *p)
{
    struct goro *next = atomic_load_explicit(&p->runnext, memory_order_relaxed);
    uint32_t h = atomic_load_explicit(&p->runq_head, memory_order_relaxed);
    uint32_t n = atomic_load_explicit(&p->runq_tail, memory_order_relaxed) - h;
    if (n + (next != NULL) < 2)
        return;                     /* no choice: the seed is not drawn on */
    uint32_t r = goro__xorshift32(&goro__sched.seed);
    if (next && (r & 1)) {
        atomic_store_explicit(&p->runnext, NULL, memory_order_relaxed);
        runq_put(p, next, false);   /* a full ring spills half: read it again */
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

/* Picks the next coroutine from local work and the global queue, as a
 * coroutine leaving and g0 both do first (stealing is g0's job). */

static struct goro *pick_local(struct goro_m *m, bool *inherit)
{
    struct goro_p *p = m->p;
    struct goro *g;
    *inherit = false;
    uint32_t t = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    /* The global queue every 61 slices (Go's rule), or when sysmon saw it
     * wait a while: slices can be long, and 61 of them too long. */
    bool want = atomic_load_explicit(&p->want_global, memory_order_relaxed);
    if ((t % 61 == 0 || want) && (g = globrunq_get(p, 1))) {
        if (want)
            atomic_store_explicit(&p->want_global, 0, memory_order_relaxed);
        return g;
    }
    /* Preempted coroutines (they may only run here) wait behind the queue,
     * which they would otherwise starve, but get a turn every 61 slices. */
    if (t % 61 == 1 && pinned_any(m))
        return pinned_pop(m);
    /* The classes (invariant 9): HIGH first but on slice 2, LOW last but
     * on slice 3; and LOW coroutines lent a class since they were queued
     * leave the LOW lists first. */
    bool classes = goro__classes_in_use();
    if (classes) {
        if (atomic_load_explicit(&goro__sched.low_rescan, memory_order_relaxed) != p->low_seen)
            low_rescan(p);
        if ((t % 61 == 3 && (g = pq_get(p, GORO_PQ_LOW))) ||
            (t % 61 != 2 && (g = pq_get(p, GORO_PQ_HIGH))))
            return g;
    }
    if (unlikely(atomic_load_explicit(&goro__sched.virtual_clock, memory_order_relaxed)))
        seeded_turn(p);
    if ((g = timed_pop(p)) || (g = runq_get(p, inherit)) || (g = globrunq_get(p, 0)) ||
        (classes && ((g = pq_get(p, GORO_PQ_HIGH)) || (g = pq_get(p, GORO_PQ_LOW)))))
        return g;
    return pinned_pop(m);
}

/* ---- the poller in the scheduling loop ---- */

/* How many slices a busy P runs between looks at its event base. */
#define POLL_INTERVAL 61

struct goro_p *goro__current_p(void)
{
    struct goro_m *m = goro__m();
    return m ? m->p : NULL;
}

/* The one drain of a poll's result (or another P's timers'). Queues it on
 * p in the order found (timers by deadline) and behind what was already
 * queued; returns one to run now only when nothing was. What does not fit the
 * ring goes to the global queue in order - not runq_put's overflow, which
 * would move the oldest there and let the newest overtake them. With p
 * NULL (sysmon has none) all of it goes there. Several: new work for idle
 * Ms (invariant 5). */
static struct goro *inject_polled(struct goro_p *p, struct goro_polled *list)
{
    struct goro *g = list->head;
    int n = list->n;
    *list = (struct goro_polled){ NULL, NULL, 0 };
    if (!g)
        return NULL;
    struct goro *first = NULL;
    if (p && runq_empty(p)) {
        first = g;
        g = g->next;
    }
    struct gq_batch spilled;
    gq_batch_init(&spilled);
    bool spill = !p;                /* the ring filled: the rest go global */
    for (struct goro *next; g; g = next) {
        next = g->next;             /* before g is published: it may run at once */
        int prio = goro__prio_of(g);
        if (prio != GORO_PRIO_NORMAL) {
            pq_put(p, g, prio);
            continue;
        }
        spill = spill || runq_room(p) == 0;
        if (!spill) {
            runq_put(p, g, false);
            continue;
        }
        gq_batch_add(&spilled, g);
    }
    gq_batch_flush(&spilled);
    if (n > 1 || !p)
        spinner_start_if_idle(p);
    return first;
}

static bool io_in_use(void)
{
    return atomic_load_explicit(&goro__io_used, memory_order_relaxed) != 0;
}

static bool poll_due(struct goro_p *p)
{
    return io_in_use() &&
           atomic_load_explicit(&p->schedtick, memory_order_relaxed) - p->poll_tick >= POLL_INTERVAL;
}

/* The owner's non-blocking look at its own base. */
static struct goro *poll_own(struct goro_m *m)
{
    struct goro_p *p = m->p;
    p->poll_tick = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    struct goro_polled got;
    if (!io_in_use() || goro__netpoll(p, NULL, runq_room(p), &got) == 0)
        return NULL;
    return inject_polled(p, &got);
}

/* An idle M polls the bases of busy Ps whose owners are not looking:
 * their I/O would otherwise wait for the owner's next look. */
static struct goro *poll_others(struct goro_m *m)
{
    if (!io_in_use())
        return NULL;
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *q = &goro__sched.procs[i];
        struct goro_polled got;
        if (q != m->p && goro__netpoll(q, NULL, runq_room(m->p), &got) > 0)
            return inject_polled(m->p, &got);
    }
    return NULL;
}

/* ---- timers in the scheduling loop (sched/timer.c) ---- */

/* One of p's timers is due at *now. Reads the clock only when p has
 * timers. The owner asking notes when it looked: sysmon runs the timers
 * of an owner that has not looked for a while (it is in a long slice). */
static bool timers_due_at(struct goro_p *p, bool owner, int64_t *now)
{
    int64_t first = goro__timers_first(p);
    if (first == INT64_MAX)
        return false;
    *now = goro__now();
    if (owner)
        atomic_store_explicit(&p->timers_seen, *now, memory_order_relaxed);
    return *now >= first;
}

/* Asked by p's owner. */
static bool timers_due(struct goro_p *p)
{
    int64_t now;
    return timers_due_at(p, true, &now);
}

/* Runs the due timers of `of`: m's own P's, whose coroutines then run
 * before its ring (timed_pop), or those of a busy P whose owner has not
 * got to them, which m's P queues as a poll's (and runs the first). */
static struct goro *run_timers(struct goro_m *m, struct goro_p *of)
{
    int64_t now;
    struct goro_polled woke = { NULL, NULL, 0 };
    if (!timers_due_at(of, of == m->p, &now) || goro__timers_run(of, now, &woke) == 0)
        return NULL;
    if (of == m->p) {
        timed_append(of, &woke);
        return timed_pop(of);
    }
    return inject_polled(m->p, &woke);
}

/* An idle M runs the due timers of other Ps (Go's timer stealing): their
 * owners may be in a long slice. */
static struct goro *run_others_timers(struct goro_m *m)
{
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *q = &goro__sched.procs[i];
        struct goro *g;
        if (q != m->p && (g = run_timers(m, q)))
            return g;
    }
    return NULL;
}

/* ---- an M without a P waits to be handed one ---- */

/* Under goro__sched.lock: p goes to M `to` (which sleeps on its handed word). */
static void give_p_locked(struct goro_p *p, struct goro_m *to)
{
    p->m = to;
    to->p = p;
    atomic_store_explicit(&to->lost_p_at, 0, memory_order_relaxed);
    atomic_store_explicit(&p->owner, to, memory_order_release);
}

static void m_notify_handed(struct goro_m *to)
{
    atomic_store_explicit(&to->handed, 1, memory_order_release);
    goro__futex_wake(&to->handed, 1);
}

/* m has no P (it lost it, or gave it to a waiter): sleep as a spare until
 * one is handed over - first in line if coroutines pinned to m wait.
 * Returns true with a P in m->p, false when the runtime stops. */
static bool m_wait_for_p(struct goro_m *m)
{
    goro__lock(&goro__sched.lock);
    bool pinned = pinned_any(m);
    struct goro_m **list = pinned ? &goro__sched.waitp : &goro__sched.spares;
    atomic_store_explicit(&m->handed, 0, memory_order_relaxed);
    m->next_free = *list;
    *list = m;
    if (pinned)
        atomic_fetch_add_explicit(&goro__sched.nwaitp, 1, memory_order_relaxed);
    /* Waiting for a P while one sleeps idle: wake its M as a spinner (as
     * spinner_start does); with nothing to run it hands the P to us when it gives
     * it up (find_runnable). Busy Ps reach that point on their own. */
    struct goro_p *idle = pinned ? pidle_get() : NULL;
    struct goro_m *idle_m = idle ? idle->m : NULL;
    goro__unlock(&goro__sched.lock);
    if (idle_m) {
        atomic_fetch_add(&goro__sched.nmspinning, 1);
        goro__sysmon_kick();
        m_notify(idle_m);
    }
    while (!atomic_load_explicit(&m->handed, memory_order_acquire)) {
        if (atomic_load(&goro__sched.stopping))
            return false;
        goro__futex_wait(&m->handed, 0);
    }
    return m->p != NULL && !atomic_load(&goro__sched.stopping);
}

/* ---- the scheduling loop's search for work ---- */

/* Returns the next coroutine for m, sleeping while there is none; NULL
 * when the runtime stops. *inherit: it came from runnext. */
static struct goro *find_runnable(struct goro_m *m, bool *inherit)
{
    struct goro_p *p = m->p;
    struct goro *g;
top:
    *inherit = false;
    if (atomic_load(&goro__sched.stopping))
        return NULL;
    /* Lost while a coroutine parked P-less (goro__park). g0 counts as
     * inside the runtime: a retake under way sees that and backs off. */
    if (m->p && p_owner_settled(m->p) != m)
        m->p = NULL;
    if (!m->p) {
        if (!m_wait_for_p(m))
            return NULL;
        p = m->p;
    }
    /* A slice cut short by preemption: what waits on timers, I/O and the
     * global queue goes first - the long runner had its turn. */
    bool cut = goro__preempt_requested(p);
    if (cut && atomic_load_explicit(&goro__sched.nwaitp, memory_order_relaxed) > 0) {
        /* An M whose preempted coroutines can run nowhere else waits for
         * a P, and busy Ps never fall idle to hand theirs over: at the end
         * of a cut slice, give this one (they take turns, slice by slice). */
        goro__lock(&goro__sched.lock);
        struct goro_m *w = waitp_take_locked();
        if (w)
            give_p_locked(p, w);
        goro__unlock(&goro__sched.lock);
        if (w) {
            m_notify_handed(w);
            m->p = NULL;
            spinning_drop(m);
            goto top;
        }
    }
    if ((g = run_timers(m, p)))
        return g;
    if ((cut || poll_due(p)) && (g = poll_own(m)))
        return g;
    if (cut && (g = globrunq_get(p, 1)))
        return g;
    if ((g = pick_local(m, inherit)))
        return g;
    if ((g = poll_own(m)))
        return g;

    int busy = goro__sched.nprocs - atomic_load(&goro__sched.npidle);
    if (m->spinning || 2 * atomic_load(&goro__sched.nmspinning) < busy) {
        if (!m->spinning) {
            m->spinning = true;
            atomic_fetch_add(&goro__sched.nmspinning, 1);
        }
        if ((g = steal_work(p)) || (g = poll_others(m)) || (g = run_others_timers(m)))
            return g;
    }

    /* Nothing: give up P (goes idle), then recheck (invariant 5). */
    goro__lock(&goro__sched.lock);
    if (global_work()) {
        goro__unlock(&goro__sched.lock);
        goto top;                   /* globrunq_get does the producer's part */
    }
    /* An M with pinned coroutines needs a P more than we do. */
    struct goro_m *w = waitp_take_locked();
    if (w) {
        give_p_locked(p, w);
        goro__unlock(&goro__sched.lock);
        m_notify_handed(w);
        m->p = NULL;
        spinning_drop(m);
        goto top;
    }
    pidle_put(p);
    atomic_store_explicit(&p->running, 0, memory_order_relaxed);
    goro__unlock(&goro__sched.lock);

    /* Every M going idle rechecks, spinning or not: work another M moved
     * onto its own ring (say, extras from the global queue) while this one
     * was on its way here is then seen by one of the two sides. */
    {
        spinning_drop(m);
        full_barrier();
        if (any_runq_nonempty() || global_work()) {
            bool still_idle = pidle_take_back(p);
            if (still_idle) {
                atomic_store_explicit(&p->running, 1, memory_order_relaxed);
                m->spinning = true;
                atomic_fetch_add(&goro__sched.nmspinning, 1);
                goto top;
            }
            /* a waker took p and is waking us: fall through to the note */
        }
    }
    /* Idle: a good moment to give surplus stacks back to the kernel. */
    while (goro__slab_trim_idle() &&
           atomic_load_explicit(&m->note, memory_order_relaxed) != NOTE_NOTIFIED)
        ;
    GORO_TRACE(GORO_TEV_IDLE, 0, 0, 0, 0, 0);
    bool woken = note_sleep(m);
    GORO_TRACE(GORO_TEV_BUSY, 0, 0, 0, 0, 0);
    if (!woken) {                   /* until a waker hands p back (inv. 7) */
        /* Events made work while p was idle: take p back - unless a waker
         * took it first, which then counted us as a spinner. */
        bool mine = pidle_take_back(p);
        if (mine)
            atomic_store_explicit(&m->note, NOTE_EMPTY, memory_order_relaxed);
        else
            note_absorb(m);
        m->spinning = !mine;
        atomic_store_explicit(&p->running, 1, memory_order_relaxed);
        if ((g = inject_polled(p, &m->slept)))
            return g;
        goto top;
    }
    /* Only spinner_start wakes an M while running (stopping aside), and it counted
     * us in nmspinning: m->spinning is written by m alone, never by the
     * waker, so it cannot be lost in a race with the recheck above. */
    m->spinning = !atomic_load(&goro__sched.stopping);
    atomic_store_explicit(&p->running, 1, memory_order_relaxed);
    goto top;
}

/* ---- switching ---- */

static void park_commit(struct goro_m *m, struct goro *g);
static inline __attribute__((always_inline)) void queue_ready(struct goro_p *p, struct goro *g,
                                                              bool next, struct gq_batch *global);

/* Run by the context that was switched to: finishes what the leaver asked
 * for, now that the leaver's registers are saved (invariant 2). */
static void post_switch(struct goro_m *m)
{
    struct goro *prev = m->post_g;
    enum goro_post what = m->post;
    m->post = GORO_POST_NONE;
    m->post_g = NULL;
#ifdef GORO_DEBUG
    /* prev's registers are on its stack now: whatever comes next may
     * resume it. */
    if (prev)
        atomic_store_explicit(&prev->saved, 1, memory_order_release);
#endif
    switch (what) {
    case GORO_POST_NONE:
        break;
    case GORO_POST_YIELD:
        atomic_store_explicit(&prev->state, GORO_S_RUNNABLE, memory_order_relaxed);
        queue_ready(m->p, prev, false, NULL);
        break;
    case GORO_POST_PARK:
        park_commit(m, prev);
        break;
    case GORO_POST_EXIT:
        goro__release(prev);
        break;
    case GORO_POST_EXIT_JOINED:
        goro__coroutine_ended();    /* the joiner frees the slab */
        break;
    case GORO_POST_MIGRATE:
        atomic_store_explicit(&prev->state, GORO_S_RUNNABLE, memory_order_relaxed);
        globrunq_put_batch(&prev, 1);
        spinner_start_if_idle(NULL);         /* m gave its P up (migrate) */
        break;
    case GORO_POST_PREEMPT:
        atomic_store_explicit(&prev->state, GORO_S_RUNNABLE, memory_order_relaxed);
        pinned_push(m, prev);
        break;
    }
}


/* A new time slice on p. Only p's owner writes schedtick (others, later
 * sysmon, only read it), so no atomic read-modify-write is needed. */
static void tick(struct goro_p *p)
{
    uint32_t t = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    atomic_store_explicit(&p->schedtick, t + 1, memory_order_relaxed);
}

/* The class of the slice p starts, for sysmon's preemption of lower
 * classes: out of line, so that start_slice stays small enough to inline
 * where no class is used. */
static GORO_NOINLINE void note_running_class(struct goro_p *p, struct goro *g)
{
    atomic_store_explicit(&p->running_prio, (int8_t)goro__prio_of(g), memory_order_relaxed);
}

static inline __attribute__((always_inline)) void start_slice(struct goro_m *m, struct goro *g,
                                                              bool inherit)
{
    /* Only a coroutine made runnable - or a parked joiner whose wait the
     * exiting coroutine claimed, and hands its slice to - and whose
     * leaving switch has saved its registers is resumed (ARMED and the
     * queues come after the save: post_switch). */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_RUNNABLE ||
                (atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_PARKED &&
                 atomic_load_explicit(&g->wake, memory_order_relaxed) == GORO_WAKE_DONE));
#ifdef GORO_DEBUG
    GORO_ASSERT(atomic_exchange_explicit(&g->saved, 0, memory_order_acq_rel) == 1);
#endif
    /* (sysmon may be trying a retake, which it abandons: m is inside) */
    GORO_ASSERT(p_owner_settled(m->p) == m);
    m->curg = g;
    g->m = m;
    atomic_store_explicit(&g->state, GORO_S_RUNNING, memory_order_relaxed);
    if (goro__classes_in_use())
        note_running_class(m->p, g);
    if (!inherit)
        tick(m->p);
}

/* The trace's events for a switch from self (leaving with what) to next
 * (NULL: to g0). */
static GORO_NOINLINE __attribute__((cold)) void trace_switch(struct goro *self,
                                                             enum goro_post what,
                                                             struct goro *next)
{
    goro__trace_emit(GORO_TEV_STOP, self->id,
                     what == GORO_POST_PARK ? goro__trace_addr(self->wait_obj) : 0, 0, what,
                     self->wait);
    if (next)
        goro__trace_emit(GORO_TEV_RUN, next->id, 0, 0, 0, 0);
}

/* Leaves the running coroutine `self` (on m) with action `what`, switching
 * to next (already taken from a queue, inherit as pick_local set it) or,
 * when NULL, to g0. Returns when self is resumed - possibly on another M. */
static void switch_to(struct goro_m *m, struct goro *self, enum goro_post what,
                      struct goro *next, bool inherit)
{
    struct goro *to = next ? next : &m->g0;
    uintptr_t sp_now = (uintptr_t)__builtin_frame_address(0);
    if (sp_now < self->min_sp)
        self->min_sp = sp_now;
    m->post = what;
    m->post_g = self;
    goro__stall_leaving(m);         /* before start_slice moves schedtick */
    if (goro__trace_on())           /* one look for both events */
        trace_switch(self, what, next);
    if (next)
        start_slice(m, next, inherit);
    else
        m->curg = NULL;
    self->m = NULL;
    /* errno is per thread and the coroutine may come back on another one:
     * save it here, restore it into the thread it resumes on. Each M keeps
     * its thread's errno address (fixed for the thread's life), and the M
     * is looked up again after the switch. */
    self->saved_errno = *m->errno_ptr;
    goro__cxx_eh_save(self);        /* C++: and the exceptions it handles */
    goro__san_leave(self, to, what >= GORO_POST_EXIT);
    /* Resumed: everything about "here" is new - the M we now run on is the
     * one the resumer passed (it knows which M it runs on). */
    struct goro_m *now = goro__ctx_switch(&self->sp, to->sp, m);
    goro__san_arrive(self);
    post_switch(now);
    *now->errno_ptr = self->saved_errno;
    goro__cxx_eh_restore(self);     /* C++: into the thread it resumes on */
}

/* As switch_to, with the next local coroutine if there is one. */
static void switch_out(struct goro_m *m, struct goro *self, enum goro_post what)
{
    bool inherit = false;
    /* A poll or a timer is due: g0 does it (libevent's loop and timer
     * callbacks do not belong on a coroutine's stack), then picks. */
    bool via_g0 = poll_due(m->p) || goro__preempt_requested(m->p) || timers_due(m->p);
    struct goro *next = via_g0 ? NULL : pick_local(m, &inherit);
    switch_to(m, self, what, next, inherit);
}

/* Entry of every new coroutine context, reached from goro__ctx_entry. */
GORO_HIDDEN void goro__coro_start(struct goro *g)
{
    goro__san_arrive(g);
    goro__cxx_eh_restore(g);        /* C++: a new coroutine handles no exception */
    struct goro_m *m = goro__m();
    post_switch(m);
    rt_leave(m);                    /* to the coroutine's own code */
}

/* g0 side: run g until it switches back here. */
static void execute(struct goro_m *m, struct goro *g, bool inherit)
{
    GORO_TRACE(GORO_TEV_RUN, g->id, 0, 0, 0, 0);
    start_slice(m, g, inherit);
    goro__san_leave(&m->g0, g, 0);
    goro__ctx_switch(&m->g0.sp, g->sp, m);
    goro__san_arrive(&m->g0);
    goro__cxx_eh_restore(&m->g0);   /* C++: no stale copy of g's exceptions */
    post_switch(m);                 /* g0 never migrates */
}

/* ---- threads the runtime does not own ---- */

/* Such a thread gets a stand-in coroutine record the first time it waits,
 * so waiter lists hold one kind of thing; goro__park blocks the thread on
 * the record's futex word instead of switching. */
static __thread struct goro external;

struct goro *goro__external_self(void)
{
    external.flags = GORO_F_EXTERNAL;
    return &external;
}

/* ---- making coroutines runnable ---- */

/* g is runnable: onto p's run queue (runnext with next) or, without a P,
 * the global queue (through *global, flushed by the caller, if not NULL) -
 * or, for a class other than NORMAL, that class's list (invariant 9). */
static inline __attribute__((always_inline)) void queue_ready(struct goro_p *p, struct goro *g,
                                                              bool next, struct gq_batch *global)
{
    /* Until a class other than NORMAL is used, g's is NORMAL: the flag,
     * in the line a pick reads anyway, spares reading g's. */
    int prio = goro__classes_in_use() ? goro__prio_of(g) : GORO_PRIO_NORMAL;
    if (prio != GORO_PRIO_NORMAL)
        pq_put(p, g, prio);
    else if (p)
        runq_put(p, g, next);
    else if (global)
        gq_batch_add(global, g);
    else
        globrunq_put_batch(&g, 1);
}

/* Inside the runtime (p: the entry's P, NULL without one): g runs next on
 * p, or goes to the global queue. */
static void ready_on(struct goro_p *p, struct goro *g)
{
    atomic_store_explicit(&g->state, GORO_S_RUNNABLE, memory_order_relaxed);
    queue_ready(p, g, true, NULL);
    spinner_start_if_idle(p);
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
    struct goro_p *p = m ? rt_enter(m, false) : NULL;
    ready_on(p, g);
    if (m)
        rt_leave(m);
}

/* Makes a list of claimed coroutines (linked through next) runnable: on
 * a worker into its queue, from elsewhere into the global queue in
 * batches, with one wake-up check for all. */
void goro__ready_list(struct goro *list)
{
    struct goro_m *m = goro__m();
    struct goro_p *p = m ? rt_enter(m, false) : NULL;
    struct gq_batch global;
    gq_batch_init(&global);
    while (list) {
        struct goro *g = list;
        list = g->next;
        if (g->flags & GORO_F_EXTERNAL) {
            goro__ready(g);
            continue;
        }
        GORO_TRACE(GORO_TEV_READY, g->id, running_id(m), 0, 0, 0);
        atomic_store_explicit(&g->state, GORO_S_RUNNABLE, memory_order_relaxed);
        queue_ready(p, g, false, &global);
    }
    gq_batch_flush(&global);
    spinner_start_if_idle(p);
    if (m)
        rt_leave(goro__m());
}

static void preempt_check_on(struct goro_m *m);

/* Owner-only counter: a plain load and store, no read-modify-write. */
static void bump(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_release);
}

void goro__schedule_new(struct goro *g, struct goro_m *m, struct goro_p *p)
{
    if (p)
        bump(&p->spawned);
    else
        atomic_fetch_add(&goro__sched.spawned_ext, 1);
    if (goro__trace_on()) {
        goro__trace_emit(GORO_TEV_SPAWN, g->id, running_id(m), 0, 0, 0);
        goro__trace_name(g);
    }
    ready_on(p, g);                 /* a new coroutine is never a thread's */
    if (p) {
        rt_leave(m);
        preempt_check_on(m);
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
     * that check (park_commit). */
    uint32_t w = atomic_load(&g->wake);
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

int goro__wait_check(int64_t deadline)
{
    if (goro__forked())
        return goro__forked_error();
    struct goro *self = goro__current();
    if (self && atomic_load_explicit(&self->cancelled, memory_order_relaxed))
        return -ECANCELED;
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

static void park_commit(struct goro_m *m, struct goro *g)
{
    bool ready_now = false;
    /* Invariant: from the arming store on, a claim (the timer, goro_cancel,
     * the commit's partner) may resume g on another M, which may withdraw
     * from what it waits on, or run g to its end and free its slab. So g
     * waits in goro__park while `committing` is set, and every access to g
     * below comes before the release store that clears it; after that store
     * g is touched only if this M claimed it (ready_now). */
    atomic_store_explicit(&g->committing, 1, memory_order_relaxed);
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

/* ---- threads that wait from outside the runtime ---- */

/* Every thread the runtime does not own, while it waits in a goro call
 * (or in goro_shutdown), is on this list: the deadlock check (debug/
 * deadlock.c) must know that it is blocked, and the reports say on what.
 * Each begin or end of such a wait bumps outside_moves, and wakes sysmon
 * if it sleeps: a thread that begins to wait may be the last one. */
struct outside_wait {
    struct goro *g;                /* its stand-in record; NULL: goro_shutdown */
    pid_t tid;
    int64_t deadline;              /* negative: none (GORO_FOREVER) */
    struct outside_wait *prev, *next;
};
static __thread struct outside_wait outside_self;
static struct outside_wait *outside_list;
static goro_lock_t outside_lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF);

static void outside_begin(struct goro *g, int64_t deadline)
{
    struct outside_wait *w = &outside_self;
    if (!w->tid)
        w->tid = (pid_t)syscall(SYS_gettid);
    w->g = g;
    w->deadline = deadline;
    goro__lock(&outside_lock);
    w->prev = NULL;
    w->next = outside_list;
    if (outside_list)
        outside_list->prev = w;
    outside_list = w;
    goro__unlock(&outside_lock);
    atomic_fetch_add(&goro__sched.outside_moves, 1);
    goro__sysmon_kick();
}

static void outside_end(void)
{
    struct outside_wait *w = &outside_self;
    goro__lock(&outside_lock);
    if (w->prev)
        w->prev->next = w->next;
    else
        outside_list = w->next;
    if (w->next)
        w->next->prev = w->prev;
    goro__unlock(&outside_lock);
    atomic_fetch_add(&goro__sched.outside_moves, 1);
}

/* ---- the virtual clock (invariant 10) ---- */

/* The earliest deadline of a thread outside waiting in a goro call. */
static int64_t outside_first_deadline(void)
{
    int64_t first = INT64_MAX;
    goro__lock(&outside_lock);
    for (struct outside_wait *w = outside_list; w; w = w->next)
        if (w->g && w->deadline >= 0 && w->deadline < first)
            first = w->deadline;
    goro__unlock(&outside_lock);
    return first;
}

/* Ends the waits of threads outside whose deadline the clock has passed,
 * as a timer ends a coroutine's. */
static void outside_time_out(int64_t now)
{
    goro__lock(&outside_lock);
    for (struct outside_wait *w = outside_list; w; w = w->next)
        if (w->g && w->deadline >= 0 && w->deadline <= now &&
            goro__claim(w->g, GORO_WAKE_TIMEDOUT))
            goro__ready(w->g);      /* a thread: its futex word */
    goro__unlock(&outside_lock);
}

/* p's owner has nothing to run: the clock jumps to the next deadline.
 * True if a timer of p is due now (the caller runs it). */
static bool clock_jump(struct goro_p *p)
{
    if (atomic_load_explicit(&goro__sched.real_waits, memory_order_acquire) > 0)
        return false;               /* the world may answer: real time passes */
    int64_t next = goro__timers_first(p);
    int64_t outside = outside_first_deadline();
    if (outside < next)
        next = outside;
    if (next == INT64_MAX)
        return false;
    goro__clock_advance(next);
    outside_time_out(next);
    return timers_due(p);
}

/* After a real sleep from real_from: with a wait on the world under way,
 * the clock moves as far as the real one did; else it may jump. True if a
 * timer of p is due now. */
static bool clock_slept(struct goro_p *p, int64_t real_from)
{
    if (atomic_load_explicit(&goro__sched.real_waits, memory_order_acquire) == 0)
        return clock_jump(p);
    int64_t now = goro__now() + (goro__real_now() - real_from);
    goro__clock_advance(now);
    outside_time_out(now);
    return timers_due(p);
}

void goro__outside_waits(void (*fn)(struct goro *g, pid_t tid, bool timed, void *arg),
                         void *arg)
{
    goro__lock(&outside_lock);
    for (struct outside_wait *w = outside_list; w; w = w->next)
        fn(w->g, w->tid, w->deadline >= 0, arg);
    goro__unlock(&outside_lock);
}

uint64_t goro__sched_activity(void)
{
    uint64_t sum = atomic_load(&goro__sched.outside_moves) + atomic_load(&goro__sched.spawned_ext);
    for (int i = 0; i < goro__sched.nprocs; i++)
        sum += atomic_load_explicit(&goro__sched.procs[i].schedtick, memory_order_acquire);
    return sum;
}

/* A thread the runtime does not own waits on its own futex word. */
static int park_external(const struct goro_park *how)
{
    struct goro *ext = goro__external_self();
    ext->wait = (uint8_t)how->why;
    ext->wait_obj = how->obj;
    ext->wait_timed = how->deadline >= 0;
    outside_begin(ext, how->deadline);
    atomic_store(&ext->wake, how->firm ? GORO_WAKE_ARMED_FIRM : GORO_WAKE_ARMED);
    if (how->unlock)
        how->unlock(how->arg);
    if (how->commit && !how->commit(how->arg, ext) && goro__claim(ext, GORO_WAKE_DONE))
        atomic_store_explicit(&ext->ext_word, 1, memory_order_relaxed);
    for (;;) {
        if (atomic_exchange_explicit(&ext->ext_word, 0, memory_order_acquire))
            break;
        if (how->deadline < 0) {
            goro__futex_wait(&ext->ext_word, 0);
            continue;
        }
        int64_t left = how->deadline - goro__now();
        if (left <= 0 && goro__claim(ext, GORO_WAKE_TIMEDOUT))
            break;                  /* nobody will wake us: done */
        if (left > GORO_MSEC && goro__clock_virtual())
            left = GORO_MSEC;       /* the clock may jump: look again (invariant 10) */
        if (left > 0) {
            goro__futex_wait_ns(&ext->ext_word, 0, left);
        } else {
            goro__futex_wait(&ext->ext_word, 0);  /* a claim won: its wake comes */
        }
    }
    outside_end();
    int outcome = (int)atomic_load(&ext->wake);
    atomic_store(&ext->wake, GORO_WAKE_IDLE);
    ext->wait = GORO_W_NONE;
    ext->wait_obj = NULL;
    return outcome;
}

int goro__park(const struct goro_park *how)
{
    if (goro__forked())
        return goro__forked_park(how);  /* the child has no scheduler (fork.c) */
    struct goro_m *m = goro__m();
    struct goro *self = m ? m->curg : NULL;
    if (!self)
        return park_external(how);
    /* The caller holds the lock of what it waits on: it must not move to
     * the global queue holding it (a thread waiting for that lock could be
     * the one that would run it). If the P is gone, park anyway, through
     * g0, which then finds itself without a P. */
    bool own = rt_enter(m, false) != NULL;
    /* The deadline timer lives in this frame, which stays put while parked.
     * A firm wait has none: only its partner may end it. */
    bool timed = how->deadline >= 0 && !how->firm;
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
    m->post_deadline = how->deadline;
    if (own)
        switch_out(m, self, GORO_POST_PARK);
    else
        switch_to(m, self, GORO_POST_PARK, NULL, false);
    rt_leave(goro__m());
    /* Claimed and resumed while the M we parked on still commits: the
     * commit's outcome is ours to see (park_commit). A few instructions,
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
    atomic_store_explicit(&self->wake, GORO_WAKE_IDLE, memory_order_relaxed);
    return outcome;
}

void goro_yield(void)
{
    if (goro__forked())
        return;                     /* the run queues are the parent's (fork.c) */
    struct goro_m *m = goro__m();
    struct goro *self = m ? m->curg : NULL;
    if (!self)
        return;
    rt_enter(m, true);
    m = goro__m();
    bool inherit = false;
    /* via g0, which polls and runs timers, when due or when this slice
     * was cut short */
    bool poll = poll_due(m->p) || goro__preempt_requested(m->p) || timers_due(m->p);
    struct goro *next = poll ? NULL : pick_local(m, &inherit);
    if (!next && !poll) {
        goro__stall_leaving(m);     /* its slice ends all the same */
        tick(m->p);                 /* nobody to yield to */
    }
    else
        switch_to(m, self, GORO_POST_YIELD, next, false);
    rt_leave(goro__m());
}

/* ---- preemption (see runtime/sched/preempt.c and runtime/sched/sysmon.c) ---- */

bool goro__preempt_requested(struct goro_p *p)
{
    return atomic_load_explicit(&p->preempt_req, memory_order_relaxed) ==
           atomic_load_explicit(&p->schedtick, memory_order_relaxed) + 1;
}

/* The cooperative half: goro calls that do not switch anyway look here,
 * on their way out (with no lock held). A coroutine whose thread lost its
 * P meanwhile (handed off while it blocked, or refused preemption) moves
 * on here too: goro_yield takes it to a thread with a P, so a thread that
 * was replaced never goes on running coroutines beside its replacement. */
static void preempt_check_on(struct goro_m *m)
{
    struct goro *self = m ? m->curg : NULL;
    if (!self || atomic_load_explicit(&self->nopreempt, memory_order_relaxed) != 0)
        return;
    struct goro_p *p = m->p;
    if (!p || atomic_load_explicit(&p->owner, memory_order_relaxed) != m ||
        goro__preempt_requested(p))
        goro_yield();
}

GORO_NOINLINE void goro__preempt_check(void)
{
    preempt_check_on(goro__m());
}

/* Called by goro__preempt_resume on the interrupted coroutine's stack:
 * yield, to come back on this M (post_switch: PREEMPT) - or, if this M
 * loses its P and stays away, on another (goro__unpin_stuck). */
void goro__preempt_park(void *uc)
{
    struct goro_m *m = goro__m();
    struct goro *self = m->curg;
    if (!rt_enter(m, false)) {
        rt_leave(m);
        return;                     /* P handed off: go on; the next goro call moves */
    }
    /* Through g0, which looks at timers, I/O and the global queue first
     * (find_runnable): the slice was cut short. */
    switch_to(m, self, GORO_POST_PREEMPT, NULL, false);
    struct goro_m *now = goro__m();  /* usually m; another M once unpinned */
    if (now != m) {
        /* rt_sigreturn also restores the signal stack the frame names:
         * that of m's thread, which must not become this thread's too. */
        stack_t *ss = &((ucontext_t *)uc)->uc_stack;
        ss->ss_sp = now->altstack;
        ss->ss_size = now->altstack_size;
        if (!now->altstack)
            ss->ss_flags = SS_DISABLE;
    }
    rt_leave(now);
}

/* ---- the hand-off: sysmon gives a P away from a blocked M ---- */

/* m lost its P: self goes to the global queue by way of m's g0, which
 * then finds itself without a P (find_runnable) and becomes a spare. */
static void migrate(struct goro_m *m, struct goro *self)
{
    m->p = NULL;
    switch_to(m, self, GORO_POST_MIGRATE, NULL, false);
}

#define MAX_EXTRA_MS 256           /* spare threads beyond the Ps */

static void *m_main(void *arg);

/* The first len - 1 bytes of /proc/self/task/<tid>/<name>, as a string;
 * the length, or -1. Read afresh each time (only for a thread that looks
 * stuck), keeping no descriptor. */
ssize_t goro__task_file(pid_t tid, const char *name, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return n;
}

ssize_t goro__m_task_file(struct goro_m *m, const char *name, char *buf, size_t len)
{
    pid_t tid = __atomic_load_n(&m->tid, __ATOMIC_ACQUIRE);
    return tid > 0 ? goro__task_file(tid, name, buf, len) : -1;   /* -1: not started yet */
}

/* The scheduling state of m's thread: R, S, D ... ('?' if unknown). */
char goro__m_thread_state(struct goro_m *m)
{
    char buf[256];
    if (goro__m_task_file(m, "stat", buf, sizeof buf) < 0)
        return '?';
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

/* sysmon: HIGH coroutines wait while p runs one of a lower class: cut
 * p's slice short (invariant 9) - again every `retry` while the slice
 * lasts (the coroutine may be where it cannot be preempted: it then
 * yields at its next goro call). Not while p's thread is in the kernel: a
 * blocking call would fail with EINTR (the slice rule hands such a P over
 * instead). True if asked. */
bool goro__preempt_for_class(struct goro_p *p, int64_t now, int64_t retry)
{
    uint32_t t = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    if (!atomic_load_explicit(&p->running, memory_order_relaxed) ||
        atomic_load_explicit(&p->running_prio, memory_order_relaxed) >= GORO_PRIO_HIGH ||
        (p->sm_class_tick == t + 1 && now - p->sm_class_when < retry))
        return false;
    p->sm_class_when = now;
    goro__lock(&goro__sched.lock);
    struct goro_m *m = p->idle ? NULL : p->m;
    goro__unlock(&goro__sched.lock);
    if (!m)
        return false;
    p->sm_class_tick = t + 1;
    char st = goro__m_thread_state(m);
    if (st == 'S' || st == 'D')
        return false;
    atomic_store_explicit(&p->preempt_req, t + 1, memory_order_relaxed);
    if (goro__preempt_async())
        goro__preempt_signal(m);
    return true;
}

/* sysmon, now and then: the stack caches of idle Ps go to the global
 * pool, whose ageing returns the slabs an idle program no longer uses. A
 * P on the idle list is nobody's: its M (or a waker) takes it off under
 * sched.lock before touching its cache again, so the lock makes the cache
 * ours meanwhile. A P that runs keeps its cache: its owner alone may
 * touch it, and a busy P reuses it. */
void goro__spill_idle_caches(void)
{
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *p = &goro__sched.procs[i];
        goro__lock(&goro__sched.lock);  /* once a second: no need to peek first */
        if (p->idle)
            goro__slab_cache_spill(p);
        goro__unlock(&goro__sched.lock);
    }
}

/* sysmon: is p's M stuck where the P could be given away - in the
 * kernel (a blocking call: state S or D), or running for `long_run`? */
bool goro__handoff_wanted(struct goro_p *p, bool long_run, bool *blocked,
                          struct goro_m **mp)
{
    *blocked = false;
    goro__lock(&goro__sched.lock);
    struct goro_m *m = p->idle ? NULL : p->m;
    goro__unlock(&goro__sched.lock);
    *mp = m;
    if (!m || !goro__sched.handoff_ok || atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0)
        return false;
    char st = goro__m_thread_state(m);
    *blocked = st == 'S' || st == 'D';
    /* Coroutines pinned to m do not keep the P there: they cannot run
     * before m comes back either way, and the rest of the P's work can
     * (goro__unpin_stuck frees the pinned ones if m stays away). Timers
     * pending on p are not: once one is overdue, sysmon runs it (sysmon.c,
     * check_timers) and its sleeper waits in the global queue, which is.
     * Counting every pending timer handed workers over far too often with
     * many sleepers (bench/timers heap, 10^5 timers: p99 lateness 189-226
     * ms against 1.1-4.6 ms). */
    bool work = !runq_empty(p) || global_work() || io_in_use() ||
                pinned_any(m);
    return work && (*blocked || long_run);
}

/* sysmon: gives p to another M (a waiting or spare one, or a new thread)
 * if m, its M as goro__handoff_wanted found it, still owns it and is
 * outside the runtime (invariant 8; an idle M is on g0, hence inside). */
bool goro__handoff(struct goro_p *p, struct goro_m *m)
{
    struct goro_m *expect = m;
    if (!atomic_compare_exchange_strong(&p->owner, &expect, GORO_P_RETAKING))
        return false;
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    if (atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0) {
        atomic_store_explicit(&p->owner, m, memory_order_release);
        return false;
    }
    goro__lock(&goro__sched.lock);
    struct goro_m *to = waitp_take_locked();
    if (!to && (to = goro__sched.spares))
        goro__sched.spares = to->next_free;
    bool fresh = !to;
    if (fresh && atomic_load(&goro__sched.nms) < goro__sched.ms_cap)
        to = &goro__sched.ms[atomic_load(&goro__sched.nms)];
    if (!to) {
        atomic_store_explicit(&p->owner, m, memory_order_release);
        goro__unlock(&goro__sched.lock);
        return false;
    }
    if (fresh) {
        int id = atomic_load(&goro__sched.nms);
        memset(to, 0, sizeof *to);
        goro__lock_rank(&to->pin_lock, GORO_RANK_LEAF);
        to->id = id;
        give_p_locked(p, to);       /* before the thread reads it */
        int err = goro__thread_create(&to->thread, GORO_THREAD_STACK, m_main, to);
        if (err) {
            to->p = NULL;
            p->m = m;
            atomic_store_explicit(&p->owner, m, memory_order_release);
            goro__unlock(&goro__sched.lock);
            static _Atomic int once;
            goro__warn_once(&once, "cannot start a thread to take over a blocked worker's "
                            "queue (%s): its coroutines wait until it returns; raise "
                            "RLIMIT_NPROC (ulimit -u) or the thread limit", strerror(err));
            return false;
        }
        atomic_store(&goro__sched.nms, id + 1);
        goro__registry_set_ms(goro__sched.ms, id + 1);
    } else {
        give_p_locked(p, to);
    }
    atomic_store_explicit(&m->lost_p_at, goro__now(), memory_order_relaxed);
    goro__unlock(&goro__sched.lock);
    GORO_TRACE(GORO_TEV_HANDOFF, (uint64_t)m->id, (uint64_t)to->id, (uint32_t)p->id, 0, 0);
    if (!fresh)
        m_notify_handed(to);
    return true;
}

/* sysmon: a preempted coroutine is pinned to its thread because compiled
 * code may hold the address of a thread-local (errno's, say) across the
 * point where it was interrupted. But if that thread lost its P and stays
 * outside the runtime - blocked in the kernel, or in code that refuses
 * preemption - the pinned coroutine could wait for ever, and it may hold
 * what the thread is waiting for (a lock in foreign code). After `after`
 * it moves to the global queue and may resume on any worker
 * (docs/preemption.md states the rule for thread-local addresses). */
bool goro__unpin_stuck(int64_t now, int64_t after, bool *pending)
{
    *pending = false;
    struct gq_batch global;
    gq_batch_init(&global);
    bool moved = false;
    int nms = atomic_load(&goro__sched.nms);
    for (int i = 0; i < nms; i++) {
        struct goro_m *m = &goro__sched.ms[i];
        int64_t lost = atomic_load_explicit(&m->lost_p_at, memory_order_relaxed);
        if (!lost || !pinned_any(m))
            continue;
        *pending = true;
        if (now - lost < after || atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0)
            continue;
        for (struct goro *g = pinned_take_all(m), *next; g; g = next) {
            next = g->next;
            gq_batch_add(&global, g);
            moved = true;
        }
    }
    if (!moved)
        return false;
    gq_batch_flush(&global);
    spinner_start_if_idle(NULL);
    return true;
}

/* ---- for sysmon ---- */

void goro__sysmon_attach(struct goro_m *m)
{
    goro__tls_m = m;
}

/* sysmon polled a base (it has no P): what it found goes global. */
void goro__inject_global(struct goro_polled *list)
{
    inject_polled(NULL, list);
}

/* ---- a coroutine's end ---- */

void goro__exit_current(long result)
{
    struct goro_m *m = goro__m();
    rt_enter(m, true);              /* never left: this context ends */
    m = goro__m();
    struct goro *self = m->curg;
    self->result = result;
    /* A joiner already parked on us can be woken by nothing but this exit.
     * When nothing else is queued here (else it would just go to g0), claim
     * that wake-up and switch straight to the joiner, which continues our
     * slice. It frees our slab once it runs, after this stack is left. With
     * work queued the joiner waits its turn in runnext, as any woken one.
     * WAKING keeps a joiner whose deadline fired from leaving meanwhile. */
    uintptr_t w = atomic_load_explicit(&self->exit_word, memory_order_acquire);
    struct goro *joiner = (struct goro *)w;
    if (w > GORO_EXIT_WAKING && !(joiner->flags & GORO_F_EXTERNAL) && runq_empty(m->p) &&
        !global_work() &&
        atomic_compare_exchange_strong_explicit(&self->exit_word, &w, GORO_EXIT_WAKING,
            memory_order_acq_rel, memory_order_relaxed)) {
        if (goro__claim(joiner, GORO_WAKE_DONE)) {
            GORO_TRACE(GORO_TEV_READY, joiner->id, self->id, 0, 0, 0);
            atomic_store_explicit(&self->state, GORO_S_DEAD, memory_order_relaxed);
            atomic_store_explicit(&self->exit_word, GORO_EXIT_DEAD, memory_order_release);
            switch_to(m, self, GORO_POST_EXIT_JOINED, joiner, true);
        }
        /* The joiner gave up (deadline, cancel): let it withdraw. */
        atomic_store_explicit(&self->exit_word, w, memory_order_release);
    }
    switch_out(m, self, GORO_POST_EXIT);
    __builtin_unreachable();
}

void goro__coroutine_ended(void)
{
    bump(&goro__m()->p->exited);
    if (atomic_load_explicit(&goro__sched.draining, memory_order_relaxed)) {
        atomic_fetch_add(&goro__sched.live_futex, 1);
        goro__futex_wake(&goro__sched.live_futex, 1);
    }
}

/* ---- worker threads; start and stop ---- */

static void *m_main(void *arg)
{
    struct goro_m *m = arg;
    goro__tls_m = m;
    m->errno_ptr = &errno;
    __atomic_store_n(&m->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);  /* sysmon reads it */
    char name[16];                  /* for top -H, gdb's info threads, core files */
    snprintf(name, sizeof name, "goro-m%d", m->id);
    pthread_setname_np(pthread_self(), name);
    m->g0.flags = GORO_F_G0;
    atomic_store_explicit(&m->in_rt, 1, memory_order_relaxed);   /* g0 is runtime */
    goro__san_thread_init(&m->g0);
    goro__fault_thread_init(m);
    if (m->p)
        atomic_store_explicit(&m->p->running, 1, memory_order_relaxed);
    for (;;) {
        bool inherit;
        struct goro *g = find_runnable(m, &inherit);
        if (!g)
            break;
        if (m->spinning)
            stop_spinning(m);
        execute(m, g, inherit);
    }
    goro__fault_thread_fini(m);
    goro__tls_m = NULL;
    return NULL;
}

/* Frees the tables goro__sched_start made, the event bases of the Ps
 * (netpoll_fini leaves a P without one alone) and their timer heaps. */
static void sched_tables_free(void)
{
    goro__registry_set_ms(NULL, 0);
    for (int i = 0; goro__sched.procs && i < goro__sched.nprocs; i++) {
        goro__netpoll_fini(&goro__sched.procs[i]);
        goro__timers_fini(&goro__sched.procs[i].timers);
    }
    free(goro__sched.procs);
    free(goro__sched.ms);
    goro__sched.procs = NULL;
    goro__sched.ms = NULL;
    goro__sched.nprocs = 0;
}

int goro__sched_start(int nprocs)
{
    goro__sched.nprocs = nprocs;
    goro__sched.procs = calloc((size_t)nprocs, sizeof *goro__sched.procs);
    goro__sched.ms_cap = nprocs + MAX_EXTRA_MS;
    goro__sched.ms = calloc((size_t)goro__sched.ms_cap, sizeof *goro__sched.ms);
    goro__sched.spares = goro__sched.waitp = NULL;
    /* The hand-off needs the asymmetric barrier (invariant 8). */
    goro__sched.handoff_ok =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (!goro__sched.procs || !goro__sched.ms) {
        sched_tables_free();
        return -ENOMEM;
    }
    atomic_store(&goro__sched.stopping, 0);
    atomic_store(&goro__sched.npidle, 0);
    atomic_store(&goro__sched.nmspinning, 0);
    goro__sched.pidle = NULL;
    for (int i = 0; i < nprocs; i++) {
        goro__sched.procs[i].id = i;
        goro__sched.procs[i].m = &goro__sched.ms[i];
        goro__sched.procs[i].rand = 0x9e3779b9u * (uint32_t)(i + 1);
        goro__sched.procs[i].alarm_fd = -1;
        goro__timers_init(&goro__sched.procs[i].timers);
        goro__sched.ms[i].id = i;
        goro__lock_rank(&goro__sched.ms[i].pin_lock, GORO_RANK_LEAF);
        goro__lock_rank(&goro__sched.procs[i].classq.lock, GORO_RANK_LEAF);
        goro__sched.ms[i].p = &goro__sched.procs[i];
        atomic_store(&goro__sched.procs[i].owner, &goro__sched.ms[i]);
    }
    steal_order_init(nprocs);
    goro__sched.prio_inherit = goro__env_flag("GORO_PRIORITY_INHERIT", true);
    int started = 0, err = 0;
    for (int i = 0; i < nprocs && !err; i++)
        err = goro__netpoll_init(&goro__sched.procs[i]);
    if (err) {
        sched_tables_free();
        return err;
    }
    atomic_store(&goro__sched.nms, nprocs);
    goro__registry_set_ms(goro__sched.ms, nprocs);
    for (; started < nprocs; started++) {
        err = goro__thread_create(&goro__sched.ms[started].thread, GORO_THREAD_STACK, m_main,
                                  &goro__sched.ms[started]);
        if (err)
            break;
    }
    if (!err)
        err = -goro__sysmon_start(goro__sched.slice_ns);
    if (err) {
        atomic_store(&goro__sched.stopping, 1);
        for (int i = 0; i < started; i++) {
            m_notify(&goro__sched.ms[i]);
            pthread_join(goro__sched.ms[i].thread, NULL);
        }
        sched_tables_free();
        return -err;
    }
    return 0;
}

/* Coroutines alive, from per-P counters. Exits are read before spawns:
 * every exit counted then has its spawn counted too (the spawn happened
 * before the exit, which happened before it was read), and a coroutine
 * alive throughout keeps the difference above zero - so 0 means none is
 * left, even with counters read one by one while coroutines still run.
 * (Threads without a P cannot spawn during goro_shutdown: the gate.) */
static uint64_t live_count(void)
{
    uint64_t exited = 0, spawned = 0;
    for (int i = 0; i < goro__sched.nprocs; i++)
        exited += atomic_load_explicit(&goro__sched.procs[i].exited, memory_order_acquire);
    for (int i = 0; i < goro__sched.nprocs; i++)
        spawned += atomic_load_explicit(&goro__sched.procs[i].spawned, memory_order_acquire);
    spawned += atomic_load_explicit(&goro__sched.spawned_ext, memory_order_acquire);
    return spawned - exited;
}

/* ---- the spawn gate: threads the runtime does not own vs shutdown ----
 * A spawn from such a thread counts itself in ext_spawning, then reads
 * closing; shutdown sets closing, then waits for ext_spawning to drain.
 * Both sides are seq_cst: either the spawner sees closing and refuses, or
 * shutdown waits for it and then counts its coroutine as alive. */

int goro__spawn_gate_enter(void)
{
    atomic_fetch_add(&goro__sched.ext_spawning, 1);
    if (!atomic_load(&goro__sched.closing))
        return 0;
    atomic_fetch_sub(&goro__sched.ext_spawning, 1);
    return -ESHUTDOWN;
}

void goro__spawn_gate_leave(void)
{
    atomic_fetch_sub(&goro__sched.ext_spawning, 1);
}

static void spawn_gate_close(void)
{
    atomic_store(&goro__sched.closing, 1);
    while (atomic_load(&goro__sched.ext_spawning) != 0)
        sched_yield();
}

/* Once the runtime reads as not started (a spawn then starts a new one),
 * or when the shutdown gave up. */
void goro__spawn_gate_open(void)
{
    atomic_store(&goro__sched.closing, 0);
}

/* Waits until every coroutine has ended: 0, or -ETIMEDOUT at deadline
 * (GORO_FOREVER: none), with the gate open again. A wait without a
 * deadline says once, after SHUTDOWN_NOTICE, which coroutines it waits for. */
#define SHUTDOWN_NOTICE (10 * GORO_SEC)

int goro__sched_drain(int64_t deadline)
{
    spawn_gate_close();
    atomic_store(&goro__sched.draining, 1);
    outside_begin(NULL, deadline);
    int64_t notice = goro__now() + SHUTDOWN_NOTICE;
    int err = 0;
    for (;;) {
        uint32_t seen = atomic_load(&goro__sched.live_futex);
        uint64_t live = live_count();
        if (live == 0)
            break;
        int64_t now = goro__now();
        if (deadline >= 0 && now >= deadline) {
            err = -ETIMEDOUT;
            break;
        }
        if (deadline < 0 && notice && now >= notice) {
            notice = 0;
            fprintf(stderr, "goro: goro_shutdown has waited %d s for %llu coroutine%s to "
                    "end (goro_shutdown_until gives up at a deadline); these are "
                    "alive:\n", (int)(SHUTDOWN_NOTICE / GORO_SEC), (unsigned long long)live,
                    live == 1 ? "" : "s");
            goro__dump_out(&(struct goro_out){ .file = stderr, .fd = -1 }, NULL, GORO_DUMP_LEAKS);
        }
        /* An exit racing the draining flag may not wake us: poll too. */
        goro__futex_wait_ns(&goro__sched.live_futex, seen, 10 * GORO_MSEC);
    }
    outside_end();
    atomic_store(&goro__sched.draining, 0);
    if (err)
        goro__spawn_gate_open();
    return err;
}

/* After a drain: stops the Ms and frees what the scheduler holds. */
void goro__sched_stop(void)
{
    atomic_store(&goro__sched.spawned_ext, 0);
    goro__sysmon_stop();
    atomic_store(&goro__sched.stopping, 1);
    int nms = atomic_load(&goro__sched.nms);
    for (int i = 0; i < nms; i++) {
        m_notify(&goro__sched.ms[i]);
        m_notify_handed(&goro__sched.ms[i]);        /* spares sleep on this one */
    }
    for (int i = 0; i < nms; i++)
        pthread_join(goro__sched.ms[i].thread, NULL);
    atomic_store(&goro__sched.nms, 0);
    goro__sched.spares = goro__sched.waitp = NULL;
    atomic_store(&goro__sched.nwaitp, 0);
    goro__sched.pidle = NULL;                 /* the Ps are freed below: nobody to wake */
    atomic_store(&goro__sched.npidle, 0);
    goro__netpoll_forget_all();
    atomic_store(&goro__io_used, 0);
    /* Return the Ps' stack caches to the global pool before freeing them. */
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro *g = goro__sched.procs[i].free_slabs;
        goro__sched.procs[i].free_slabs = NULL;
        atomic_store_explicit(&goro__sched.procs[i].nfree, 0, memory_order_relaxed);
        while (g) {
            struct goro *n = g->pool_next;
            goro__slab_put(g);      /* no P: goes to the global pool */
            g = n;
        }
    }
    sched_tables_free();
    free(goro__sched.gq);
    goro__sched.gq = NULL;
    goro__sched.gq_cap = goro__sched.gq_first = 0;
    atomic_store(&goro__sched.gq_size, 0);
}

uint64_t goro__next_id(struct goro_p *p)
{
    if (p) {
        if (p->id_next == p->id_end) {
            p->id_next = atomic_fetch_add(&goro__sched.id_next, 16) + 1;
            p->id_end = p->id_next + 16;
        }
        return p->id_next++;
    }
    return atomic_fetch_add(&goro__sched.id_next, 1) + 1;
}

int goro_workers(void)
{
    return atomic_load(&goro__sched.started) ? goro__sched.nprocs : 0;
}
