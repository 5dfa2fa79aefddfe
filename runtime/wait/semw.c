/*
 * Weighted semaphore (goro_wsem_t): acquire and release n units at once,
 * all or nothing, first come first served - Go's semaphore.Weighted.
 *
 * Invariants, under the semaphore's lock:
 *   1. 0 <= cur <= size: cur counts the units held, by callers that got
 *      them from the fast path or were handed them by a release.
 *   2. FIFO without barging: the fast path takes units only when nobody
 *      waits, and a release hands units to the waiters from the head only,
 *      stopping at the first one they do not cover. A large request at the
 *      head therefore holds back smaller ones behind it: that is what keeps
 *      it from starving (units freed bit by bit would otherwise always go
 *      to the small ones).
 *   3. A waiter is handed its units only by the claim that wakes it (the
 *      pop claims its wait first), so a waiter that gave up - its deadline,
 *      a cancel - is never handed anything. When it leaves, the one behind
 *      it may now be the head and fit: whoever removes a waiter that stood
 *      in front runs the hand-over again.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "internal.h"
#include "wait/waitq.h"

struct wsem_impl {
    goro_lock_t lk;
    long size;
    long cur;                      /* invariant 1 */
    struct goro_waitq q;           /* struct wsem_waiter, FIFO */
};

_Static_assert(sizeof(struct wsem_impl) <= sizeof(goro_wsem_t), "wsem layout");
_Static_assert(offsetof(struct wsem_impl, size) == sizeof(uintptr_t), "GORO_WSEM_INIT");

struct wsem_waiter {
    struct goro_waiter w;
    long n;
};

int goro_wsem_init(goro_wsem_t *sem, long size)
{
    if (!sem || size < 0)
        return -EINVAL;
    *sem = (goro_wsem_t){ { 0 } };
    ((struct wsem_impl *)sem)->size = size;
    return 0;
}

/* Under the lock: hands units to the waiters at the head while they fit
 * (invariant 2), chaining their coroutines on *wake. */
static void hand_over(struct wsem_impl *s, struct goro **wake)
{
    struct goro_waiter *w;
    while ((w = s->q.head)) {
        struct wsem_waiter *ww = (struct wsem_waiter *)w;
        if (s->size - s->cur < ww->n)
            break;
        goro__waitq_remove(&s->q, w);
        if (!goro__claim(w->g, GORO_WAKE_DONE))
            continue;               /* gave up: it will find itself off the queue */
        s->cur += ww->n;
        GORO_ASSERT(s->cur <= s->size);
        w->g->next = *wake;
        *wake = w->g;
    }
}

static int wsem_acquire(goro_wsem_t *sem, long n, bool wait, int64_t deadline)
{
    if (!sem || n < 0)
        return -EINVAL;
    struct wsem_impl *s = (struct wsem_impl *)sem;
    if (n > s->size)
        return -EINVAL;             /* could never be satisfied */
    goro__lock(&s->lk);
    if (s->size - s->cur >= n && !s->q.head) {
        s->cur += n;
        goro__unlock(&s->lk);
        return 0;
    }
    if (!wait) {
        goro__unlock(&s->lk);
        return -EAGAIN;
    }
    struct wsem_waiter ww = { .w = { .g = goro__waiter_self() }, .n = n };
    int err = goro__waitq_wait(&s->q, &ww.w, &s->lk, GORO_W_SEM, sem, deadline, false);
    if (err == 0)
        return 0;                   /* a release handed us n units */
    /* Gave up, off the queue now: those behind may fit (invariant 3). */
    struct goro *wake = NULL;
    goro__lock(&s->lk);
    hand_over(s, &wake);
    goro__unlock(&s->lk);
    goro__ready_list(wake);
    return err;
}

int goro_wsem_acquire(goro_wsem_t *sem, long n)
{
    return wsem_acquire(sem, n, true, GORO_FOREVER);
}

int goro_wsem_acquire_until(goro_wsem_t *sem, long n, int64_t deadline)
{
    return wsem_acquire(sem, n, true, deadline);
}

int goro_wsem_try_acquire(goro_wsem_t *sem, long n)
{
    return wsem_acquire(sem, n, false, GORO_FOREVER);
}

int goro_wsem_release(goro_wsem_t *sem, long n)
{
    if (!sem || n < 0)
        return -EINVAL;
    struct wsem_impl *s = (struct wsem_impl *)sem;
    struct goro *wake = NULL;
    goro__lock(&s->lk);
    if (n > s->cur) {
        goro__unlock(&s->lk);
        return -EINVAL;             /* more than is held: nothing changes */
    }
    s->cur -= n;
    hand_over(s, &wake);
    goro__unlock(&s->lk);
    goro__ready_list(wake);
    return 0;
}

long goro_wsem_held(goro_wsem_t *sem)
{
    if (!sem)
        return -EINVAL;
    struct wsem_impl *s = (struct wsem_impl *)sem;
    goro__lock(&s->lk);
    long cur = s->cur;
    goro__unlock(&s->lk);
    return cur;
}

int goro_wsem_waiting(goro_wsem_t *sem)
{
    if (!sem)
        return -EINVAL;
    struct wsem_impl *s = (struct wsem_impl *)sem;
    int n = 0;
    goro__lock(&s->lk);
    for (struct goro_waiter *w = s->q.head; w; w = w->next)
        n++;
    goro__unlock(&s->lk);
    return n;
}

int goro_wsem_destroy(goro_wsem_t *sem)
{
    if (!sem)
        return -EINVAL;
    struct wsem_impl *s = (struct wsem_impl *)sem;
    goro__lock(&s->lk);
    int r = s->q.head ? -EBUSY : 0;
    goro__unlock(&s->lk);
    return r;
}
