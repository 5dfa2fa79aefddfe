/*
 * Channels and select, with Go's semantics.
 *
 * A channel is a lock, a ring buffer of cap elements and two waiter
 * queues. Invariants (under ch->lock):
 *   - if count > 0 then recvq is empty (a receiver would have taken it);
 *   - if count < cap then sendq is empty (a sender would have buffered);
 *   - unbuffered (cap == 0): at most one of recvq, sendq is non-empty.
 * A partner that finds a waiter completes the exchange itself, copying
 * straight to or from the waiter's stack, marks it successful and makes it
 * runnable: the woken side never has to retry. Close wakes everybody with
 * success = false.
 *
 * select locks all its channels in address order (no deadlock between two
 * selects), polls the cases in a random order (fairness), and otherwise
 * enqueues one waiter per case; the first partner to claim the select's
 * wait wins, the others skip those waiters (waitq.h). The winner also
 * removes the select's other waiters from its own channel, so the woken
 * select re-locks only the other channels: the partner's channel may be
 * freed by the time the select runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "waitq.h"

#define ELEM_MAX ((size_t)1 << 16)    /* copy by value: keep elements small */
#define CAP_MAX ((size_t)1 << 28)

struct goro_chan {
    goro_lock_t lock;
    bool closed;
    size_t elem_size, cap;
    size_t count, sendx, recvx;
    struct goro_waitq recvq, sendq;
    unsigned char *buf;
};

int goro_chan_new(goro_chan_t **out, size_t elem_size, size_t cap)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (elem_size > ELEM_MAX || cap > CAP_MAX)
        return -EINVAL;
    struct goro_chan *ch = calloc(1, sizeof *ch + elem_size * cap);
    if (!ch)
        return -ENOMEM;
    ch->elem_size = elem_size;
    ch->cap = cap;
    ch->buf = (unsigned char *)(ch + 1);
    *out = ch;
    return 0;
}

int goro_chan_free(goro_chan_t *ch)
{
    if (!ch)
        return -EINVAL;
    goro__lock(&ch->lock);
    bool busy = ch->recvq.head || ch->sendq.head;
    goro__unlock(&ch->lock);
    if (busy)
        return -EBUSY;
    free(ch);
    return 0;
}

static void copy_elem(const struct goro_chan *ch, void *dst, const void *src)
{
    if (ch->elem_size && dst)
        memcpy(dst, src, ch->elem_size);
}

static void zero_elem(const struct goro_chan *ch, void *dst)
{
    if (ch->elem_size && dst)
        memset(dst, 0, ch->elem_size);
}

static unsigned char *slot(struct goro_chan *ch, size_t i)
{
    return ch->buf + i * ch->elem_size;
}

/* The non-waiting part of a send, under ch->lock. Returns 0 if done (and
 * *wake is a receiver to make runnable, or NULL), -EPIPE if closed, -EAGAIN
 * if the sender would have to wait. */
static int try_send_locked(struct goro_chan *ch, const void *elem, struct goro **wake)
{
    *wake = NULL;
    if (ch->closed)
        return -EPIPE;
    struct goro_waiter *w = goro__waitq_pop(&ch->recvq);
    if (w) {
        copy_elem(ch, w->elem, elem);
        w->success = true;
        *wake = w->g;
        return 0;
    }
    if (ch->count < ch->cap) {
        copy_elem(ch, slot(ch, ch->sendx), elem);
        ch->sendx = (ch->sendx + 1) % ch->cap;
        ch->count++;
        return 0;
    }
    return -EAGAIN;
}

/* The non-waiting part of a receive. Returns 1 (got a value), 0 (closed
 * and drained; elem zeroed) or -EAGAIN. */
static int try_recv_locked(struct goro_chan *ch, void *elem, struct goro **wake)
{
    *wake = NULL;
    struct goro_waiter *w = goro__waitq_pop(&ch->sendq);
    if (w) {
        if (ch->cap == 0) {
            copy_elem(ch, elem, w->elem);
        } else {
            /* Buffer full: take its head, the sender's value joins the tail. */
            copy_elem(ch, elem, slot(ch, ch->recvx));
            copy_elem(ch, slot(ch, ch->recvx), w->elem);
            ch->recvx = (ch->recvx + 1) % ch->cap;
            ch->sendx = ch->recvx;
        }
        w->success = true;
        *wake = w->g;
        return 1;
    }
    if (ch->count > 0) {
        copy_elem(ch, elem, slot(ch, ch->recvx));
        zero_elem(ch, slot(ch, ch->recvx));
        ch->recvx = (ch->recvx + 1) % ch->cap;
        ch->count--;
        return 1;
    }
    if (ch->closed) {
        zero_elem(ch, elem);
        return 0;
    }
    return -EAGAIN;
}

/* Parks the caller's waiter w on q (ch->lock held; released once parked)
 * until a partner completes it or the wait ends otherwise. Returns 0 if a
 * partner took w (w->success tells whether it was a close), else -errno,
 * with w off the queue. */
static int chan_wait(struct goro_chan *ch, struct goro_waitq *q, struct goro_waiter *w,
                     enum goro_wait why, int64_t deadline)
{
    int err = goro__wait_check(deadline);
    if (err) {
        goro__unlock(&ch->lock);
        return goro__wait_refused(err);
    }
    goro__waitq_push(q, w);
    struct goro_park how = { .why = why, .obj = ch, .unlock = goro__unlock_cb,
                             .arg = &ch->lock, .deadline = deadline };
    int outcome = goro__park(&how);
    if (outcome == GORO_WAKE_DONE)
        return 0;
    goro__lock(&ch->lock);
    goro__waitq_remove(q, w);
    goro__unlock(&ch->lock);
    return goro__wake_error(outcome);
}

static int chan_send(struct goro_chan *ch, const void *elem, bool block, int64_t deadline)
{
    if (!ch || (!elem && ch->elem_size))
        return -EINVAL;
    struct goro *wake;
    goro__lock(&ch->lock);
    int r = try_send_locked(ch, elem, &wake);
    if (r != -EAGAIN || !block) {
        goro__unlock(&ch->lock);
        if (wake)
            goro__ready(wake);
        goro__preempt_check();
        return r;
    }
    struct goro_waiter w = { .g = goro__waiter_self(), .elem = (void *)elem };
    int err = chan_wait(ch, &ch->sendq, &w, GORO_W_CHAN_SEND, deadline);
    if (err)
        return err;
    return w.success ? 0 : -EPIPE;
}

static int chan_recv(struct goro_chan *ch, void *elem, bool block, int64_t deadline)
{
    if (!ch)
        return -EINVAL;
    struct goro *wake;
    goro__lock(&ch->lock);
    int r = try_recv_locked(ch, elem, &wake);
    if (r != -EAGAIN || !block) {
        goro__unlock(&ch->lock);
        if (wake)
            goro__ready(wake);
        goro__preempt_check();
        return r;
    }
    struct goro_waiter w = { .g = goro__waiter_self(), .elem = elem };
    int err = chan_wait(ch, &ch->recvq, &w, GORO_W_CHAN_RECV, deadline);
    if (err)
        return err;
    /* A closing channel zeroed elem already. */
    return w.success ? 1 : 0;
}

int goro_chan_send(goro_chan_t *ch, const void *elem)
{
    return chan_send(ch, elem, true, GORO_FOREVER);
}

int goro_chan_send_until(goro_chan_t *ch, const void *elem, int64_t deadline)
{
    return chan_send(ch, elem, true, deadline);
}

int goro_chan_try_send(goro_chan_t *ch, const void *elem)
{
    return chan_send(ch, elem, false, GORO_FOREVER);
}

int goro_chan_recv(goro_chan_t *ch, void *elem)
{
    return chan_recv(ch, elem, true, GORO_FOREVER);
}

int goro_chan_recv_until(goro_chan_t *ch, void *elem, int64_t deadline)
{
    return chan_recv(ch, elem, true, deadline);
}

int goro_chan_try_recv(goro_chan_t *ch, void *elem)
{
    return chan_recv(ch, elem, false, GORO_FOREVER);
}

int goro_chan_close(goro_chan_t *ch)
{
    if (!ch)
        return -EINVAL;
    goro__lock(&ch->lock);
    if (ch->closed) {
        goro__unlock(&ch->lock);
        return -EPIPE;
    }
    ch->closed = true;
    /* Collect everybody, then wake them after unlocking. */
    struct goro *wake = NULL;
    struct goro_waiter *w;
    while ((w = goro__waitq_pop(&ch->recvq))) {
        zero_elem(ch, w->elem);
        w->success = false;
        w->g->next = wake;
        wake = w->g;
    }
    while ((w = goro__waitq_pop(&ch->sendq))) {
        w->success = false;
        w->g->next = wake;
        wake = w->g;
    }
    goro__unlock(&ch->lock);
    goro__ready_list(wake);
    return 0;
}

long goro_chan_len(goro_chan_t *ch)
{
    if (!ch)
        return -EINVAL;
    goro__lock(&ch->lock);
    long n = (long)ch->count;
    goro__unlock(&ch->lock);
    return n;
}

long goro_chan_cap(goro_chan_t *ch)
{
    return ch ? (long)ch->cap : -EINVAL;
}

/* ---- select ---- */

#define SELECT_STACK_CASES 16

/* The channels a select locks. Never written once the select parks: the
 * M it parked on may still be reading them (select_unlock, after the wait
 * became claimable) when the select resumes elsewhere. */
struct select_locks {
    struct goro_chan **chans;      /* distinct, in address order */
    int n;
    struct goro_chan *skip;        /* not this one: a partner completed it */
};

static void select_lock(struct select_locks *l)
{
    for (int i = 0; i < l->n; i++)
        if (l->chans[i] != l->skip)
            goro__lock(&l->chans[i]->lock);
}

static void select_unlock(void *arg)
{
    struct select_locks *l = arg;
    for (int i = l->n - 1; i >= 0; i--)
        if (l->chans[i] != l->skip)
            goro__unlock(&l->chans[i]->lock);
}

static int cmp_chan(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(struct goro_chan *const *)a;
    uintptr_t y = (uintptr_t)*(struct goro_chan *const *)b;
    return x < y ? -1 : x > y;
}

static uint32_t select_rand(void)
{
    static __thread uint32_t state;
    if (!state)
        state = (uint32_t)(uintptr_t)&state | 1u;
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
}

int goro_select_until(goro_case_t *cases, int n, int flags, int64_t deadline)
{
    if (!cases || n < 0 || n > 65536 || (flags & ~GORO_SELECT_NOWAIT))
        return -EINVAL;
    for (int i = 0; i < n; i++) {
        const goro_case_t *c = &cases[i];
        if (c->ch && c->op != GORO_SEND && c->op != GORO_RECV)
            return -EINVAL;
        if (c->ch && c->op == GORO_SEND && !c->elem && c->ch->elem_size)
            return -EINVAL;         /* nothing to send */
    }

    struct goro_chan *chans_buf[SELECT_STACK_CASES];
    int order_buf[SELECT_STACK_CASES];
    struct goro_waiter waiters_buf[SELECT_STACK_CASES];
    struct goro_chan **chans = chans_buf;
    int *order = order_buf;
    struct goro_waiter *waiters = waiters_buf;
    if (n > SELECT_STACK_CASES) {
        chans = malloc((size_t)n * sizeof *chans);
        order = malloc((size_t)n * sizeof *order);
        waiters = malloc((size_t)n * sizeof *waiters);
        if (!chans || !order || !waiters) {
            free(chans);
            free(order);
            free(waiters);
            return -ENOMEM;
        }
    }

    /* Random poll order (Fisher-Yates) and distinct channels sorted. */
    int nch = 0;
    for (int i = 0; i < n; i++) {
        int j = (int)(select_rand() % (uint32_t)(i + 1));
        order[i] = order[j];
        order[j] = i;
        if (cases[i].ch)
            chans[nch++] = cases[i].ch;
    }
    qsort(chans, (size_t)nch, sizeof *chans, cmp_chan);
    int distinct = 0;
    for (int i = 0; i < nch; i++)
        if (!distinct || chans[distinct - 1] != chans[i])
            chans[distinct++] = chans[i];
    struct select_locks locks = { chans, distinct, NULL };

    int result;
    if (distinct == 0) {
        result = (flags & GORO_SELECT_NOWAIT) ? -EAGAIN : -EDEADLK;
        goto out;
    }

    select_lock(&locks);
    for (int k = 0; k < n; k++) {
        goro_case_t *c = &cases[order[k]];
        if (!c->ch)
            continue;
        struct goro *wake;
        int r = c->op == GORO_SEND ? try_send_locked(c->ch, c->elem, &wake)
                                   : try_recv_locked(c->ch, c->elem, &wake);
        if (r == -EAGAIN)
            continue;
        select_unlock(&locks);
        if (wake)
            goro__ready(wake);
        c->result = r;
        result = order[k];
        goto out;
    }
    if (flags & GORO_SELECT_NOWAIT) {
        select_unlock(&locks);
        result = -EAGAIN;
        goto out;
    }

    result = goro__wait_check(deadline);
    if (result) {
        select_unlock(&locks);
        result = goro__wait_refused(result);
        goto out;
    }

    /* Nothing ready: wait on every case at once. The first partner to
     * claim the wait (waitq.h) completes its case; the rest are dropped. */
    struct goro *self = goro__waiter_self();
    for (int i = 0; i < n; i++) {
        goro_case_t *c = &cases[i];
        waiters[i] = (struct goro_waiter){ .g = self, .elem = c->elem, .case_index = i,
                                           .group = waiters, .ngroup = n, .obj = c->ch };
        if (c->ch)
            goro__waitq_push(c->op == GORO_SEND ? &c->ch->sendq : &c->ch->recvq, &waiters[i]);
    }
    struct goro_park how = { .why = GORO_W_SELECT, .obj = cases, .unlock = select_unlock,
                             .arg = &locks, .deadline = deadline };
    int outcome = goro__park(&how);
    int fired = self->wake_index;

    /* Leave the other queues. A partner that completed a case took our
     * waiters off its channel already, and that channel is not ours to
     * touch any more. */
    struct goro_chan *done = outcome == GORO_WAKE_DONE ? cases[fired].ch : NULL;
    struct select_locks rest = { chans, distinct, done };
    select_lock(&rest);
    for (int i = 0; i < n; i++) {
        goro_case_t *c = &cases[i];
        if (c->ch && c->ch != done)
            goro__waitq_remove(c->op == GORO_SEND ? &c->ch->sendq : &c->ch->recvq, &waiters[i]);
    }
    select_unlock(&rest);
    if (outcome != GORO_WAKE_DONE) {
        result = goro__wake_error(outcome);
        goto out;
    }
    result = fired;
    {
        goro_case_t *c = &cases[result];
        bool ok = waiters[result].success;
        c->result = c->op == GORO_SEND ? (ok ? 0 : -EPIPE) : (ok ? 1 : 0);
    }
out:
    if (n > SELECT_STACK_CASES) {
        free(chans);
        free(order);
        free(waiters);
    }
    return result;
}

int goro_select(goro_case_t *cases, int n, int flags)
{
    return goro_select_until(cases, n, flags, GORO_FOREVER);
}
