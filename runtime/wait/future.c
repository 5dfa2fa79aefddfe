/*
 * Futures (docs/structured.md): a value of a size fixed at creation, or an
 * error object, set once and read by any number of waiters.
 *
 * Invariants, under the future's lock:
 *   1. state moves PENDING -> VALUE or PENDING -> FAILED once; value and
 *      err do not change after that.
 *   2. Nobody is queued on a set future: the set takes every waiter, and a
 *      caller that finds it set reads it at once.
 *   3. A waiter is handed its outcome in its own record (the value copied
 *      to its destination, its own copy of the error) by the set, while the
 *      set holds its claim and before it is woken: a woken waiter never
 *      reads the future, so the owner may free it as soon as every get has
 *      returned.
 *   4. The done channel, once made, is closed by the set under the lock;
 *      goro_future_free takes the lock first, so a select woken by that
 *      close that frees the future waits for the set to let go of it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "wait/future.h"
#include "wait/waitq.h"

enum { PENDING, VALUE, FAILED };

struct goro_future {
    goro_lock_t lk;
    int state;                     /* invariant 1 */
    int refs;                      /* the owner's, and a producer's (flight.c) */
    size_t size;
    goro_err_t *err;               /* FAILED: owned */
    goro_chan_t *done;             /* made on first request; invariant 4 */
    struct goro_waitq q;           /* struct fut_waiter */
    unsigned char value[];         /* VALUE: size bytes */
};

struct fut_waiter {
    struct goro_waiter w;
    void *out;                     /* where the value goes, or NULL */
    goro_err_t **err;              /* where a copy of the error goes, or NULL */
    int code;                      /* 0, or -code of the error */
};

int goro_future_new(goro_future_t **out, size_t size)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (size > ((size_t)1 << 30))
        return -EINVAL;
    struct goro_future *f = calloc(1, sizeof *f + size);
    if (!f)
        return -ENOMEM;
    f->size = size;
    f->refs = 1;
    *out = f;
    return 0;
}

/* Under the lock, f set: hands the outcome to the caller's destinations
 * (invariant 3); -code of the error or 0. */
static int deliver(const struct goro_future *f, void *out, goro_err_t **err)
{
    if (f->state == FAILED) {
        if (err)
            *err = goro_err_copy(f->err);
        return -goro_err_code(f->err);
    }
    if (out && f->size)
        memcpy(out, f->value, f->size);
    return 0;
}

/* Sets f (lk held, PENDING): wakes every waiter with its outcome and
 * closes the done channel. */
static void complete(struct goro_future *f)
{
    struct goro *wake = NULL;
    struct goro_waiter *w;
    while ((w = goro__waitq_pop(&f->q))) {
        struct fut_waiter *fw = (struct fut_waiter *)w;
        fw->code = deliver(f, fw->out, fw->err);
        w->g->next = wake;
        wake = w->g;
    }
    GORO_ASSERT(!f->q.head);       /* invariant 2 */
    if (f->done)
        goro_chan_close(f->done);  /* invariant 4 */
    goro__unlock(&f->lk);
    if (wake && !wake->next)
        goro__ready(wake);          /* the common case: one getter, as a channel's */
    else
        goro__ready_list(wake);
}

int goro_future_set(goro_future_t *f, const void *value)
{
    if (!f || (!value && f->size))
        return -EINVAL;
    goro__lock(&f->lk);
    if (f->state != PENDING) {
        goro__unlock(&f->lk);
        return -EALREADY;
    }
    if (f->size)
        memcpy(f->value, value, f->size);
    f->state = VALUE;
    complete(f);
    return 0;
}

int goro_future_fail(goro_future_t *f, goro_err_t *err)
{
    if (!f || !err) {
        goro_err_free(err);
        return -EINVAL;
    }
    goro__lock(&f->lk);
    if (f->state != PENDING) {
        goro__unlock(&f->lk);
        goro_err_free(err);
        return -EALREADY;
    }
    f->err = err;
    f->state = FAILED;
    complete(f);
    return 0;
}

int goro_future_get_until(goro_future_t *f, void *value, goro_err_t **err, int64_t deadline)
{
    if (err)
        *err = NULL;
    if (!f)
        return -EINVAL;
    goro__lock(&f->lk);
    if (f->state != PENDING) {
        int code = deliver(f, value, err);
        goro__unlock(&f->lk);
        return code;
    }
    struct fut_waiter fw = { .w = { .g = goro__waiter_self() }, .out = value, .err = err };
    int r = goro__waitq_wait(&f->q, &fw.w, &f->lk, GORO_W_FUTURE, f, deadline, false);
    return r ? r : fw.code;         /* r: gave up, nothing handed over */
}

int goro_future_get(goro_future_t *f, void *value, goro_err_t **err)
{
    return goro_future_get_until(f, value, err, GORO_FOREVER);
}

int goro_future_ready(goro_future_t *f)
{
    if (!f)
        return -EINVAL;
    goro__lock(&f->lk);
    int r = f->state != PENDING;
    goro__unlock(&f->lk);
    return r;
}

goro_chan_t *goro_future_done(goro_future_t *f)
{
    if (!f)
        return NULL;
    goro__lock(&f->lk);
    if (!f->done && goro_chan_new(&f->done, 0, 0) == 0 && f->state != PENDING)
        goro_chan_close(f->done);
    goro_chan_t *ch = f->done;
    goro__unlock(&f->lk);
    return ch;
}

void goro__future_hold(struct goro_future *f)
{
    goro__lock(&f->lk);
    f->refs++;
    goro__unlock(&f->lk);
}

/* Drops a reference: the last one frees f. */
static int unref(struct goro_future *f, bool owner)
{
    goro__lock(&f->lk);            /* invariant 4: after a set that is closing done */
    if (owner && f->q.head) {
        goro__unlock(&f->lk);
        return -EBUSY;
    }
    bool last = --f->refs == 0;
    goro__unlock(&f->lk);
    if (!last)
        return 0;
    if (f->done)
        goro_chan_free(f->done);
    goro_err_free(f->err);
    free(f);
    return 0;
}

void goro__future_drop(struct goro_future *f)
{
    unref(f, false);
}

int goro_future_free(goro_future_t *f)
{
    return f ? unref(f, true) : 0;
}

/* ---- combinators ---- */

int goro_future_all_until(goro_future_t *const *fs, int n, int64_t deadline)
{
    if (n < 0 || (n && !fs))
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (!fs[i])
            return -EINVAL;
    /* Wait for each in turn (the deadline is one for all), then report the
     * first failure in the order given. */
    for (int i = 0; i < n; i++) {
        goro_chan_t *done = goro_future_done(fs[i]);
        if (!done)
            return -ENOMEM;
        int r = goro_chan_recv_until(done, NULL, deadline);
        if (r != -EPIPE && r < 0)
            return r;               /* the wait: -ETIMEDOUT, -ECANCELED */
    }
    for (int i = 0; i < n; i++) {
        goro__lock(&fs[i]->lk);
        int code = fs[i]->state == FAILED ? -goro_err_code(fs[i]->err) : 0;
        goro__unlock(&fs[i]->lk);
        if (code)
            return code;
    }
    return 0;
}

int goro_future_any_until(goro_future_t *const *fs, int n, int64_t deadline)
{
    if (n <= 0 || !fs)
        return -EINVAL;
    goro_case_t stack[16];
    goro_case_t *cases = n <= 16 ? stack : calloc((size_t)n, sizeof *cases);
    if (!cases)
        return -ENOMEM;
    int r = 0;
    for (int i = 0; i < n && r == 0; i++) {
        if (!fs[i])
            r = -EINVAL;
        else if (!(cases[i] = (goro_case_t){ .ch = goro_future_done(fs[i]), .op = GORO_RECV }).ch)
            r = -ENOMEM;
    }
    if (r == 0)
        r = goro_select_until(cases, n, 0, deadline);
    if (cases != stack)
        free(cases);
    return r;
}
