/*
 * Barrier (goro_barrier_t): n callers meet, then all go on; reusable
 * round after round (pthread_barrier_t, with a deadline and cancellation).
 *
 * Invariants, under the barrier's lock:
 *   1. 0 <= count < n between calls: count is the callers inside the
 *      current round. The n-th arrival trips it: the round's number moves
 *      on, count goes back to 0 and every waiter is woken with success -
 *      in the same critical section, so no caller of the next round is
 *      ever woken by this one.
 *   2. A waiter that gives up (deadline, cancel) before the trip leaves
 *      the round: count goes down by one, and the round still needs n
 *      callers inside it at once. One whose giving up races the trip - the
 *      round moved on while it was leaving - was counted in: it passed
 *      (returns 0), as the others saw it pass.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "internal.h"
#include "wait/waitq.h"

struct barrier_impl {
    goro_lock_t lk;
    long n;
    long count;                    /* invariant 1 */
    unsigned long round;
    struct goro_waitq q;
};

_Static_assert(sizeof(struct barrier_impl) <= sizeof(goro_barrier_t), "barrier layout");

int goro_barrier_init(goro_barrier_t *b, long n)
{
    if (!b || n <= 0)
        return -EINVAL;
    struct barrier_impl *x = (struct barrier_impl *)b;
    *x = (struct barrier_impl){ .n = n };
    return 0;
}

int goro_barrier_wait_until(goro_barrier_t *b, int64_t deadline)
{
    struct barrier_impl *x = (struct barrier_impl *)b;
    if (!b || x->n <= 0)
        return -EINVAL;
    goro__lock(&x->lk);
    if (++x->count == x->n) {
        x->count = 0;
        x->round++;
        struct goro *wake = goro__waitq_take_all(&x->q, true, 0, NULL);
        goro__unlock(&x->lk);
        goro__ready_list(wake);
        return GORO_BARRIER_SERIAL;
    }
    unsigned long mine = x->round;
    struct goro_waiter w = { .g = goro__waiter_self() };
    int r = goro__waitq_wait(&x->q, &w, &x->lk, GORO_W_BARRIER, b, deadline, false);
    if (r == 0)
        return 0;                   /* tripped */
    goro__lock(&x->lk);
    if (x->round == mine) {
        /* barrier: a leaver was counted in this round (2) */
        GORO_ASSERT(x->count > 0);
        x->count--;
    } else {
        r = 0;                      /* the round tripped as it left: it passed (2) */
    }
    goro__unlock(&x->lk);
    return r;
}

int goro_barrier_wait(goro_barrier_t *b)
{
    return goro_barrier_wait_until(b, GORO_FOREVER);
}

int goro_barrier_destroy(goro_barrier_t *b)
{
    struct barrier_impl *x = (struct barrier_impl *)b;
    if (!b)
        return -EINVAL;
    goro__lock(&x->lk);
    bool busy = x->count > 0 || x->q.head;
    goro__unlock(&x->lk);
    if (busy)
        return -EBUSY;
    x->n = 0;
    return 0;
}
