/*
 * Coroutine-aware mutex, rwlock, condition variable, semaphore, wait group
 * and once. Each is a small struct the caller owns (the public types are
 * opaque arrays of the right size; the layouts below must fit in them).
 * All state is guarded by the object's internal lock; waiters queue FIFO
 * on their own stacks and park with that lock released only after they
 * are saved (goro__park), so a wake-up can never be lost.
 *
 * Ownership passes directly to the first waiter on release (mutex, rwlock,
 * semaphore): the woken coroutine already holds what it waited for, so it
 * never has to retry and no one can barge in front of a waiter for ever.
 *
 * Invariants, under each object's lock (asserted where they are kept):
 *   - mutex: a waiter waits only on a held mutex (a release with waiters
 *     hands it over; it is never left free with somebody waiting);
 *   - rwlock: never a writer beside readers; readers never negative;
 *   - semaphore: units never sit beside a waiter (a release with a waiter
 *     hands its unit over), and the count is never negative;
 *   - wait group: never negative, and at zero nobody waits;
 *   - once: NEW -> its runner -> DONE, each step once; a waiter goes on
 *     only once it is DONE.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "internal.h"
#include "sched/sched.h"
#include "coro/coro.h"
#include "wait/waitq.h"

/* Held while holder.held; its waiters lend their class to the holder
 * (sched/prio.c), when the holder is a coroutine. */
struct mutex_impl {
    goro_lock_t lk;
    struct goro_holder holder;
    struct goro_waitq q;
};

/* A writer holds it while holder.held, and is lent its waiters' class;
 * readers are only counted, so they are lent nothing. */
struct rwlock_impl {
    goro_lock_t lk;
    int32_t readers;               /* active readers */
    struct goro_holder holder;     /* the writer holding it */
    struct goro_waitq q;           /* kind 1 = writer */
};

struct cond_impl {
    goro_lock_t lk;
    struct goro_waitq q;
};

struct sem_impl {
    goro_lock_t lk;
    long count;
    struct goro_waitq q;
};

struct wg_impl {
    goro_lock_t lk;
    long count;
    struct goro_waitq q;
};

/* A once's state: not run, done, or while fn runs, who runs it (so that a
 * call from inside fn is told apart from a caller that must wait). */
#define ONCE_NEW ((uintptr_t)0)
#define ONCE_DONE ((uintptr_t)1)

struct once_impl {
    goro_lock_t lk;
    _Atomic uintptr_t state;       /* ONCE_NEW, ONCE_DONE or the runner */
    struct goro_waitq q;
};

_Static_assert(sizeof(struct mutex_impl) <= sizeof(goro_mutex_t), "mutex layout");
_Static_assert(sizeof(struct rwlock_impl) <= sizeof(goro_rwlock_t), "rwlock layout");
_Static_assert(sizeof(struct cond_impl) <= sizeof(goro_cond_t), "cond layout");
_Static_assert(sizeof(struct sem_impl) <= sizeof(goro_sem_t), "sem layout");
_Static_assert(sizeof(struct wg_impl) <= sizeof(goro_waitgroup_t), "waitgroup layout");
_Static_assert(sizeof(struct once_impl) <= sizeof(goro_once_t), "once layout");
/* The debug build's test of lock misuse takes a mutex's lock through the
 * public object (tests/test_errors.c). */
_Static_assert(offsetof(struct mutex_impl, lk) == 0, "mutex lock first");

/* Parks the caller on q (whose owner's lock lk is held; released once
 * parked) until a partner hands it what it waits for, its deadline passes
 * or it is cancelled. Returns 0 (handed over) or -errno, with the waiter
 * off the queue and nothing handed over (a partner's pop claims the wait
 * first, so it cannot hand over to a waiter that gave up). */
static int wait_on(struct goro_waitq *q, goro_lock_t *lk, enum goro_wait why,
                   const void *obj, int kind, int64_t deadline, bool firm)
{
    struct goro_waiter w = { .g = goro__waiter_self(), .kind = kind };
    return goro__waitq_wait(q, &w, lk, why, obj, deadline, firm);
}

/* wait_lending's answer when the lock must be tried again (lk held). */
#define LEND_RETRY 1

/* wait_on for a lock with a holder (lk held; released once parked): the
 * waiter lends its class to the holder while it waits. On 0 the releaser
 * has taken it off the holder's count (hand_over); on giving up it takes
 * itself off.
 *
 * Woken with RECLASS (its own class changed: sched/prio.c, chains), it
 * lends the new class in place of the old and parks again, in its place.
 * A release that came while it was awake skipped it (its wait could not
 * be claimed): then it returns LEND_RETRY with lk held, lending nothing,
 * and the caller tries the lock again as a newcomer. */
static int wait_lending(struct goro_waitq *q, goro_lock_t *lk, struct goro_holder *h,
                        enum goro_wait why, const void *obj, int kind, int64_t deadline,
                        bool firm)
{
    int err = firm ? 0 : goro__wait_check(deadline);
    if (err) {
        goro__unlock(lk);
        return goro__wait_refused(err);
    }
    struct goro *self = goro__waiter_self();
    struct goro_waiter w = { .g = self, .kind = kind, .prio = (int8_t)goro__prio_of(self) };
    goro__holder_waiter(h, w.prio, +1);
    goro__waitq_push(q, &w);
    goro__dl_lend(h, h->g, self);   /* a reserved waiter lends its deadline */
    struct goro_park how = { .why = why, .obj = obj, .unlock = goro__unlock_cb, .arg = lk,
                             .deadline = deadline, .firm = firm, .lends = true };
    for (;;) {
        how.lent = w.prio;
        int outcome = goro__park(&how);
        if (outcome == GORO_WAKE_DONE) {
            goro__dl_unlend(self);
            return 0;
        }
        goro__lock(lk);
        if (outcome == GORO_WAKE_RECLASS && w.queued) {
            /* The new class first, then the old one off: a rise is one
             * change of the holder's loan, not a fall and a rise. */
            int8_t was = w.prio;
            w.prio = (int8_t)goro__prio_of(self);
            goro__holder_waiter(h, w.prio, +1);
            goro__holder_waiter(h, was, -1);
            continue;
        }
        goro__holder_waiter(h, w.prio, -1);
        goro__dl_unlend(self);
        if (outcome == GORO_WAKE_RECLASS)
            return LEND_RETRY;      /* skipped by a release: not queued */
        goro__waitq_remove(q, &w);
        goro__unlock(lk);
        return goro__wake_error(outcome);
    }
}

/* Under the lock lk: w, taken off the queue, is handed what it waited
 * for (holds: it holds h from here). */
static void hand_over(goro_lock_t *lk, struct goro_holder *h, struct goro_waiter *w, bool holds)
{
    goro__holder_waiter(h, w->prio, -1);
    if (holds)
        goro__holder_set(h, lk, w->g);
}

/* Unlinks every waiter of q into a list through g->next, to wake after
 * the lock is dropped. */
static struct goro *take_all(struct goro_waitq *q)
{
    return goro__waitq_take_all(q, true, 0, NULL);
}

/* Makes a list from take_all or grant_locked runnable. An empty list
 * wakes nobody, so it skips the scheduler's wake-up check altogether: the
 * common case (nobody waited), and after goro_shutdown the scheduler has
 * no workers to check. */
static void ready_all(struct goro *list)
{
    if (list)
        goro__ready_list(list);
}

/* ---- mutex ---- */

int goro_mutex_init(goro_mutex_t *mu)
{
    if (!mu)
        return -EINVAL;
    *mu = (goro_mutex_t)GORO_MUTEX_INIT;
    return 0;
}

static int mutex_lock(goro_mutex_t *mu, int64_t deadline, bool firm)
{
    if (!mu)
        return -EINVAL;
    struct mutex_impl *m = (struct mutex_impl *)mu;
    goro__lock(&m->lk);
    for (;;) {
        if (!m->holder.held) {
            goro__holder_set(&m->holder, &m->lk, goro__waiter_self());
            goro__unlock(&m->lk);
            return 0;
        }
        GORO_ASSERT(m->holder.held);  /* mutex: a waiter waits only on a held mutex */
        /* 0: handed over by unlock, we own it. */
        int err = wait_lending(&m->q, &m->lk, &m->holder, GORO_W_MUTEX, mu, 0, deadline, firm);
        if (err != LEND_RETRY)
            return err;
    }
}

int goro_mutex_lock(goro_mutex_t *mu) { return mutex_lock(mu, GORO_FOREVER, false); }

int goro_mutex_lock_until(goro_mutex_t *mu, int64_t deadline)
{
    return mutex_lock(mu, deadline, false);
}

int goro_mutex_trylock(goro_mutex_t *mu)
{
    if (!mu)
        return -EINVAL;
    struct mutex_impl *m = (struct mutex_impl *)mu;
    goro__lock(&m->lk);
    int r = m->holder.held ? -EBUSY : 0;
    if (!r)
        goro__holder_set(&m->holder, &m->lk, goro__waiter_self());
    goro__unlock(&m->lk);
    return r;
}

int goro_mutex_unlock(goro_mutex_t *mu)
{
    if (!mu)
        return -EINVAL;
    struct mutex_impl *m = (struct mutex_impl *)mu;
    goro__lock(&m->lk);
    if (!m->holder.held) {
        goro__unlock(&m->lk);
        return -EPERM;
    }
    goro__holder_clear(&m->holder);
    struct goro_waiter *w = goro__waitq_pop(&m->q);
    if (w)
        hand_over(&m->lk, &m->holder, w, true);     /* it stays locked, now by w */
    /* mutex: a waiter waits only on a held mutex */
    GORO_ASSERT(m->holder.held || !m->q.head);
    goro__unlock(&m->lk);
    if (w)
        goro__ready(w->g);          /* claimed by the pop */
    return 0;
}

int goro_mutex_destroy(goro_mutex_t *mu)
{
    if (!mu)
        return -EINVAL;
    struct mutex_impl *m = (struct mutex_impl *)mu;
    goro__lock(&m->lk);
    int r = m->holder.held ? -EBUSY : 0;
    goro__unlock(&m->lk);
    return r;
}

/* ---- rwlock ---- */

int goro_rwlock_init(goro_rwlock_t *rw)
{
    if (!rw)
        return -EINVAL;
    *rw = (goro_rwlock_t)GORO_RWLOCK_INIT;
    return 0;
}

/* Under r->lk: grants in FIFO order - one writer, or a run of readers -
 * and returns the coroutines to wake. A waiter whose wait cannot be
 * claimed (it is giving up) is skipped. */
static struct goro *grant_locked(struct rwlock_impl *r)
{
    struct goro *wake = NULL;
    while (r->q.head && !r->holder.held) {
        struct goro_waiter *w = r->q.head;
        if (w->kind && r->readers)
            break;
        goro__waitq_remove(&r->q, w);
        if (!goro__claim(w->g, GORO_WAKE_DONE))
            continue;
        if (!w->kind)
            r->readers++;
        hand_over(&r->lk, &r->holder, w, w->kind);     /* a writer holds it from here */
        w->g->next = wake;
        wake = w->g;
    }
    /* rwlock: never a writer beside readers */
    GORO_ASSERT(r->readers >= 0 && !(r->holder.held && r->readers));
    return wake;
}

static int rw_lock(goro_rwlock_t *rw, bool writer, bool wait, int64_t deadline)
{
    if (!rw)
        return -EINVAL;
    struct rwlock_impl *r = (struct rwlock_impl *)rw;
    goro__lock(&r->lk);
    int err;
    do {
        /* Queued waiters go first: a waiting writer holds back new readers. */
        bool free_now = writer ? (!r->holder.held && r->readers == 0 && !r->q.head)
                               : (!r->holder.held && !r->q.head);
        if (free_now) {
            if (writer)
                goro__holder_set(&r->holder, &r->lk, goro__waiter_self());
            else
                r->readers++;
            /* rwlock: never a writer beside readers */
            GORO_ASSERT(!(r->holder.held && r->readers));
            goro__unlock(&r->lk);
            return 0;
        }
        if (!wait) {
            goro__unlock(&r->lk);
            return -EBUSY;
        }
        /* 0: granted by unlock. */
        err = wait_lending(&r->q, &r->lk, &r->holder, GORO_W_RWLOCK, rw, writer, deadline,
                           false);
    } while (err == LEND_RETRY);
    if (err) {
        /* A writer that gave up no longer holds back the readers behind it. */
        goro__lock(&r->lk);
        struct goro *wake = grant_locked(r);
        goro__unlock(&r->lk);
        ready_all(wake);
    }
    return err;
}

int goro_rwlock_rdlock(goro_rwlock_t *rw) { return rw_lock(rw, false, true, GORO_FOREVER); }
int goro_rwlock_wrlock(goro_rwlock_t *rw) { return rw_lock(rw, true, true, GORO_FOREVER); }
int goro_rwlock_tryrdlock(goro_rwlock_t *rw) { return rw_lock(rw, false, false, GORO_FOREVER); }
int goro_rwlock_trywrlock(goro_rwlock_t *rw) { return rw_lock(rw, true, false, GORO_FOREVER); }

int goro_rwlock_rdlock_until(goro_rwlock_t *rw, int64_t deadline)
{
    return rw_lock(rw, false, true, deadline);
}

int goro_rwlock_wrlock_until(goro_rwlock_t *rw, int64_t deadline)
{
    return rw_lock(rw, true, true, deadline);
}

/* Which side an unlock releases: the write side (anybody may, as in Go:
 * a hand-over, or a writer that ended), one read, or the caller's own. */
enum rw_side { RW_READ, RW_WRITE, RW_MINE };

static int rw_unlock(goro_rwlock_t *rw, enum rw_side side)
{
    if (!rw)
        return -EINVAL;
    struct rwlock_impl *r = (struct rwlock_impl *)rw;
    goro__lock(&r->lk);
    /* A writer excludes readers: a caller that is not the writer can only
     * release a read (and there is none while it is written). */
    if (side == RW_MINE)
        side = goro__holder_is(&r->holder, goro__waiter_self()) ? RW_WRITE : RW_READ;
    if (side == RW_WRITE ? !r->holder.held : r->readers == 0) {
        goro__unlock(&r->lk);
        return -EPERM;
    }
    if (side == RW_WRITE)
        goro__holder_clear(&r->holder);
    else
        r->readers--;
    struct goro *wake = grant_locked(r);
    goro__unlock(&r->lk);
    ready_all(wake);
    return 0;
}

int goro_rwlock_runlock(goro_rwlock_t *rw) { return rw_unlock(rw, RW_READ); }
int goro_rwlock_wunlock(goro_rwlock_t *rw) { return rw_unlock(rw, RW_WRITE); }
int goro_rwlock_unlock(goro_rwlock_t *rw) { return rw_unlock(rw, RW_MINE); }

int goro_rwlock_destroy(goro_rwlock_t *rw)
{
    if (!rw)
        return -EINVAL;
    struct rwlock_impl *r = (struct rwlock_impl *)rw;
    goro__lock(&r->lk);
    int res = (r->holder.held || r->readers || r->q.head) ? -EBUSY : 0;
    goro__unlock(&r->lk);
    return res;
}

/* ---- condition variable ---- */

int goro_cond_init(goro_cond_t *cv)
{
    if (!cv)
        return -EINVAL;
    *cv = (goro_cond_t)GORO_COND_INIT;
    return 0;
}

int goro_cond_wait_until(goro_cond_t *cv, goro_mutex_t *mu, int64_t deadline)
{
    if (!cv || !mu)
        return -EINVAL;
    struct cond_impl *c = (struct cond_impl *)cv;
    goro__lock(&c->lk);
    /* Queued before mu is released, and c->lk is held until we are parked:
     * a signal sent after our unlock of mu finds us. */
    int err = goro_mutex_unlock(mu);
    if (err) {
        goro__unlock(&c->lk);
        return err;
    }
    /* cond: the waiter holds the cond's lock from before mu's release
     * until it is queued and parked: no signal falls in between */
    GORO_ASSERT(goro__lock_mine(&c->lk));
    err = wait_on(&c->q, &c->lk, GORO_W_COND, cv, 0, deadline, false);
    /* mu is taken back whatever happened, even when cancelled: the caller's
     * unlock path expects to hold it (as with pthread_cond_timedwait). */
    int lock_err = mutex_lock(mu, GORO_FOREVER, true);
    return err ? err : lock_err;
}

int goro_cond_wait(goro_cond_t *cv, goro_mutex_t *mu)
{
    return goro_cond_wait_until(cv, mu, GORO_FOREVER);
}

int goro_cond_signal(goro_cond_t *cv)
{
    if (!cv)
        return -EINVAL;
    struct cond_impl *c = (struct cond_impl *)cv;
    goro__lock(&c->lk);
    struct goro_waiter *w = goro__waitq_pop(&c->q);
    goro__unlock(&c->lk);
    if (w)
        goro__ready(w->g);          /* claimed by the pop */
    return 0;
}

int goro_cond_broadcast(goro_cond_t *cv)
{
    if (!cv)
        return -EINVAL;
    struct cond_impl *c = (struct cond_impl *)cv;
    goro__lock(&c->lk);
    struct goro *list = take_all(&c->q);
    goro__unlock(&c->lk);
    ready_all(list);
    return 0;
}

int goro_cond_destroy(goro_cond_t *cv)
{
    if (!cv)
        return -EINVAL;
    struct cond_impl *c = (struct cond_impl *)cv;
    goro__lock(&c->lk);
    int r = c->q.head ? -EBUSY : 0;
    goro__unlock(&c->lk);
    return r;
}

/* ---- semaphore ---- */

int goro_sem_init(goro_sem_t *sem, long count)
{
    if (!sem || count < 0)
        return -EINVAL;
    *sem = (goro_sem_t){ { 0 } };
    ((struct sem_impl *)sem)->count = count;
    return 0;
}

static int sem_acquire(goro_sem_t *sem, bool wait, int64_t deadline)
{
    if (!sem)
        return -EINVAL;
    struct sem_impl *s = (struct sem_impl *)sem;
    goro__lock(&s->lk);
    if (s->count > 0) {
        s->count--;
        goro__unlock(&s->lk);
        return 0;
    }
    if (!wait) {
        goro__unlock(&s->lk);
        return -EAGAIN;
    }
    /* sem: units never sit beside a waiter */
    GORO_ASSERT(s->count == 0);
    /* 0: release handed us its unit. */
    return wait_on(&s->q, &s->lk, GORO_W_SEM, sem, 0, deadline, false);
}

int goro_sem_acquire(goro_sem_t *sem) { return sem_acquire(sem, true, GORO_FOREVER); }
int goro_sem_try_acquire(goro_sem_t *sem) { return sem_acquire(sem, false, GORO_FOREVER); }

int goro_sem_acquire_until(goro_sem_t *sem, int64_t deadline)
{
    return sem_acquire(sem, true, deadline);
}

int goro_sem_release(goro_sem_t *sem)
{
    if (!sem)
        return -EINVAL;
    struct sem_impl *s = (struct sem_impl *)sem;
    goro__lock(&s->lk);
    struct goro_waiter *w = goro__waitq_pop(&s->q);
    if (!w)
        s->count++;
    /* sem: units never sit beside a waiter; never negative */
    GORO_ASSERT(s->count >= 0 && (s->count == 0 || !s->q.head));
    goro__unlock(&s->lk);
    if (w)
        goro__ready(w->g);          /* claimed by the pop */
    return 0;
}

int goro_sem_destroy(goro_sem_t *sem)
{
    if (!sem)
        return -EINVAL;
    struct sem_impl *s = (struct sem_impl *)sem;
    goro__lock(&s->lk);
    int r = s->q.head ? -EBUSY : 0;
    goro__unlock(&s->lk);
    return r;
}

/* ---- wait group ---- */

int goro_waitgroup_init(goro_waitgroup_t *wg)
{
    if (!wg)
        return -EINVAL;
    *wg = (goro_waitgroup_t)GORO_WAITGROUP_INIT;
    return 0;
}

int goro_waitgroup_add(goro_waitgroup_t *wg, long n)
{
    if (!wg)
        return -EINVAL;
    struct wg_impl *w = (struct wg_impl *)wg;
    goro__lock(&w->lk);
    if (w->count + n < 0) {
        goro__unlock(&w->lk);
        return -EINVAL;
    }
    w->count += n;
    struct goro *list = w->count == 0 ? take_all(&w->q) : NULL;
    /* waitgroup: never negative, and at zero nobody waits */
    GORO_ASSERT(w->count >= 0 && (w->count > 0 || !w->q.head));
    goro__unlock(&w->lk);
    ready_all(list);
    return 0;
}

int goro_waitgroup_done(goro_waitgroup_t *wg)
{
    return goro_waitgroup_add(wg, -1);
}

int goro_waitgroup_wait(goro_waitgroup_t *wg)
{
    return goro_waitgroup_wait_until(wg, GORO_FOREVER);
}

int goro_waitgroup_wait_until(goro_waitgroup_t *wg, int64_t deadline)
{
    if (!wg)
        return -EINVAL;
    struct wg_impl *w = (struct wg_impl *)wg;
    goro__lock(&w->lk);
    if (w->count == 0) {
        goro__unlock(&w->lk);
        return 0;
    }
    GORO_ASSERT(w->count > 0);      /* waitgroup: a waiter waits only for a count above 0 */
    return wait_on(&w->q, &w->lk, GORO_W_WAITGROUP, wg, 0, deadline, false);
}

int goro_waitgroup_destroy(goro_waitgroup_t *wg)
{
    if (!wg)
        return -EINVAL;
    struct wg_impl *w = (struct wg_impl *)wg;
    goro__lock(&w->lk);
    int r = w->q.head ? -EBUSY : 0;
    goro__unlock(&w->lk);
    return r;
}

/* ---- once ----
 *
 * fn may not return: its coroutine may end inside it (goro_exit,
 * goro_exit_err, at any depth) or a C++ exception may pass through it.
 * The once is done all the same (as Go's Once after a panic) and its
 * waiters go on: a record in the runner's frame (struct once_run) finishes
 * it whichever way fn is left - the return, the coroutine's end (coro.h:
 * life_end runs it) or an unwind (its cleanup handler: this file is built
 * with -fexceptions). So the state never keeps naming a runner that has
 * gone, and a later caller whose record is the same never takes itself
 * for fn's (-EDEADLK). */

struct once_run {
    struct goro_unwind u;
    struct once_impl *o;           /* NULL once finished */
    struct goro *g;                /* the coroutine it is pushed on; NULL: a thread */
};

/* Done: every waiter goes on, and later callers return at once. */
static void once_finish(struct once_run *run)
{
    struct once_impl *o = run->o;
    if (!o)
        return;
    run->o = NULL;
    goro__lock(&o->lk);
    /* once: only its runner finishes it, and only once (runner -> DONE) */
    GORO_ASSERT(atomic_load_explicit(&o->state, memory_order_relaxed) != ONCE_NEW &&
                atomic_load_explicit(&o->state, memory_order_relaxed) != ONCE_DONE);
    atomic_store_explicit(&o->state, ONCE_DONE, memory_order_release);
    struct goro *list = take_all(&o->q);
    goro__unlock(&o->lk);
    ready_all(list);
}

/* The coroutine ended inside fn: its end popped the record. */
static void once_ended(struct goro_unwind *u)
{
    once_finish((struct once_run *)u);
}

/* fn returned, or an unwind leaves run's frame. */
static void once_left(struct once_run *run)
{
    if (run->o && run->g)
        goro__unwind_pop(run->g, &run->u);
    once_finish(run);
}

/* fn and its argument: goro_once's fn(), or goro_once_value's. */
struct once_call {
    void (*fn)(void);
    goro_once_value_t *ov;
    long (*vfn)(void *arg);
    void *arg;
};

static void once_run(struct once_impl *o, const struct once_call *c)
{
    struct once_run run __attribute__((cleanup(once_left))) = {
        .u.fn = once_ended, .o = o, .g = goro__current(),
    };
    if (run.g)
        goro__unwind_push(run.g, &run.u);
    if (c->fn) {
        c->fn();
    } else {
        /* Written before once_finish's release of DONE, read after its
         * acquire: every caller that returns sees the value. */
        c->ov->value = c->vfn(c->arg);
        c->ov->returned = 1;
    }
}

static int once_do(goro_once_t *once, const struct once_call *c)
{
    struct once_impl *o = (struct once_impl *)once;
    if (atomic_load_explicit(&o->state, memory_order_acquire) == ONCE_DONE)
        return 0;
    /* The running coroutine, or the thread's stand-in: it stays the same
     * while fn runs, even when a coroutine moves to another worker. */
    struct goro *self = goro__waiter_self();
    goro__lock(&o->lk);
    uintptr_t st = atomic_load_explicit(&o->state, memory_order_relaxed);
    if (st == ONCE_DONE) {
        goro__unlock(&o->lk);
        return 0;
    }
    if (st == (uintptr_t)self) {
        /* fn calls goro_once on its own once: waiting would be for ever. */
        goro__unlock(&o->lk);
        return -EDEADLK;
    }
    if (st != ONCE_NEW) {
        /* Firm: returning before fn has run would break the promise. The
         * runner's end, however it comes, wakes us (once_run). */
        int err = wait_on(&o->q, &o->lk, GORO_W_ONCE, once, 0, GORO_FOREVER, true);
        /* once: a waiter goes on only once it is DONE (a firm wait) */
        GORO_ASSERT(err || atomic_load_explicit(&o->state, memory_order_acquire) == ONCE_DONE);
        return err;
    }
    GORO_ASSERT(self != NULL);      /* once: NEW -> its runner, a record never NEW or DONE */
    atomic_store_explicit(&o->state, (uintptr_t)self, memory_order_relaxed);
    goro__unlock(&o->lk);
    once_run(o, c);
    return 0;
}

int goro_once(goro_once_t *once, void (*fn)(void))
{
    if (!once || !fn)
        return -EINVAL;
    return once_do(once, &(struct once_call){ .fn = fn });
}

int goro_once_value(goro_once_value_t *ov, long (*fn)(void *arg), void *arg, long *value)
{
    if (value)
        *value = 0;
    if (!ov || !fn)
        return -EINVAL;
    int err = once_do(&ov->once, &(struct once_call){ .ov = ov, .vfn = fn, .arg = arg });
    if (err)
        return err;
    if (!ov->returned)
        return -EOWNERDEAD;         /* fn ended its coroutine: done, with no value */
    if (value)
        *value = ov->value;
    return 0;
}

/* ---- for the wait graph (waitq.h) ---- */

/* A snapshot (copied without the lock): h->g, while set, is a coroutine
 * that lived when the copy was taken; its id is read through copy too. */
static enum goro_held held_by(const struct goro_holder *h, goro_copy_fn *copy, struct goro **g,
                              uint64_t *id)
{
    if (!h->held)
        return GORO_HELD_NONE;
    switch (h->by) {
    case GORO_HELD_BY_CORO:
        *g = h->g;
        if (!h->g || !copy(id, &h->g->id, sizeof *id))
            *id = 0;
        return GORO_HELD_CORO;
    case GORO_HELD_BY_ENDED:
        *id = h->ended_id;
        return GORO_HELD_ENDED;
    default:
        return GORO_HELD_THREAD;
    }
}

enum goro_held goro__wait_holder(int why, const void *obj, goro_copy_fn *copy,
                                 struct goro **g, uint64_t *id)
{
    *g = NULL;
    *id = 0;
    switch (why) {
    case GORO_W_MUTEX: {
        struct mutex_impl m;
        return copy(&m, obj, sizeof m) ? held_by(&m.holder, copy, g, id) : GORO_HELD_NONE;
    }
    case GORO_W_RWLOCK: {
        struct rwlock_impl r;     /* readers are counted, not known: nobody */
        return copy(&r, obj, sizeof r) ? held_by(&r.holder, copy, g, id) : GORO_HELD_NONE;
    }
    case GORO_W_ONCE: {
        struct once_impl o;
        if (!copy(&o, obj, sizeof o))
            return GORO_HELD_NONE;
        uintptr_t st = atomic_load_explicit(&o.state, memory_order_relaxed);
        if (st == ONCE_NEW || st == ONCE_DONE)
            return GORO_HELD_NONE;
        *g = (struct goro *)st;     /* a coroutine, or a thread's stand-in */
        return GORO_HELD_CORO;
    }
    case GORO_W_FLIGHT:
        return goro__flight_holder(obj, copy, g);
    default:
        return GORO_HELD_NONE;
    }
}
