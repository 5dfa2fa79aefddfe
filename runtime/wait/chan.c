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
 * select locks all its channels in address order, then its descriptors'
 * records in descriptor order (the lock order: see "select" below), polls
 * the cases in a random order (fairness), and otherwise enqueues one
 * waiter per case; the first partner to claim the select's wait wins, the
 * others skip those waiters (waitq.h). The winner also removes the
 * select's other waiters from its own object, so the woken select
 * re-locks only the others: the partner's channel may be freed by the
 * time the select runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched/sched.h"
#include "io/netpoll.h"
#include "wait/waitq.h"

#define ELEM_MAX ((size_t)1 << 16)    /* copy by value: keep elements small */
#define CAP_MAX ((size_t)1 << 28)

#define SELECT_CASES_MAX 65536

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
    return goro__waitq_wait(q, w, &ch->lock, why, ch, deadline, false);
}

/* A send (elem is read) or a receive (elem is written): at once if a
 * partner or the buffer allows, else - if block - waits until deadline. */
static int chan_op(struct goro_chan *ch, void *elem, bool send, bool block, int64_t deadline)
{
    if (!ch || (send && !elem && ch->elem_size))
        return -EINVAL;
    struct goro *wake;
    goro__lock(&ch->lock);
    int r = send ? try_send_locked(ch, elem, &wake) : try_recv_locked(ch, elem, &wake);
    if (r != -EAGAIN || !block) {
        goro__unlock(&ch->lock);
        if (wake)
            goro__ready(wake);
        goro__preempt_check();
        return r;
    }
    struct goro_waiter w = { .g = goro__waiter_self(), .elem = elem };
    int err = chan_wait(ch, send ? &ch->sendq : &ch->recvq, &w,
                        send ? GORO_W_CHAN_SEND : GORO_W_CHAN_RECV, deadline);
    if (err)
        return err;
    /* Not a success: closed (a closing channel zeroed a receiver's elem). */
    return send ? (w.success ? 0 : -EPIPE) : (w.success ? 1 : 0);
}

static int chan_send(struct goro_chan *ch, const void *elem, bool block, int64_t deadline)
{
    return chan_op(ch, (void *)elem, true, block, deadline);
}

static int chan_recv(struct goro_chan *ch, void *elem, bool block, int64_t deadline)
{
    return chan_op(ch, elem, false, block, deadline);
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
    struct goro *wake = goro__waitq_take_all(&ch->recvq, false, ch->elem_size, NULL);
    wake = goro__waitq_take_all(&ch->sendq, false, 0, wake);
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

size_t goro__chan_elem_size(const goro_chan_t *ch)
{
    return ch->elem_size;           /* fixed at goro_chan_new */
}

/* ---- select ----
 *
 * A select's cases are channel cases (GORO_SEND, GORO_RECV) and
 * descriptor cases (GORO_FD_READ, GORO_FD_WRITE). A descriptor case waits
 * like goro_wait_fd: its waiter goes on the descriptor record's queue of
 * readers or writers (netpoll.h), where an edge, a passed turn or
 * goro_close claims it through the same group as the channel waiters.
 *
 * Lock order. A select holds the locks of everything it waits on while it
 * looks at the cases and while it queues, so it takes them in one global
 * order: every channel lock in address order, then every descriptor
 * record lock in descriptor order. Nothing else holds two of these locks:
 * channel calls take one channel's lock; the poller's callbacks, the I/O
 * calls, goro_close and goro__fd_pass, goro__fd_edge_again take one record's lock and never a
 * channel's. (libevent's base lock is taken inside a record's lock when a
 * descriptor is registered, never the other way round; a select registers
 * its descriptors before it takes any lock.) So no cycle can form.
 */

#define SELECT_STACK_CASES 16

/* The objects a select locks. Never written once the select parks: the
 * M it parked on may still be reading them (select_unlock, after the wait
 * became claimable) when the select resumes elsewhere. That M releases
 * the locks in the reverse of the order the select takes them, so the
 * first lock the resumed select needs is the last one released: the
 * select cannot go on, and free what these point to, before that M is
 * done with them. */
struct select_locks {
    struct goro_chan **chans;      /* distinct, in address order */
    int nchans;
    struct goro_pollfd **pds;      /* distinct, in descriptor order */
    int npds;
    const void *skip;              /* not this one: a partner completed it */
};

static void select_lock(struct select_locks *l)
{
    for (int i = 0; i < l->nchans; i++)
        if (l->chans[i] != l->skip)
            goro__lock(&l->chans[i]->lock);
    for (int i = 0; i < l->npds; i++)
        if (l->pds[i] != l->skip)
            goro__lock(&l->pds[i]->lock);
}

static void select_unlock(void *arg)
{
    struct select_locks *l = arg;
    for (int i = l->npds - 1; i >= 0; i--)
        if (l->pds[i] != l->skip)
            goro__unlock(&l->pds[i]->lock);
    for (int i = l->nchans - 1; i >= 0; i--)
        if (l->chans[i] != l->skip)
            goro__unlock(&l->chans[i]->lock);
}

static int cmp_chan(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(struct goro_chan *const *)a;
    uintptr_t y = (uintptr_t)*(struct goro_chan *const *)b;
    return x < y ? -1 : x > y;
}

static int cmp_pd(const void *a, const void *b)
{
    int x = (*(struct goro_pollfd *const *)a)->fd;
    int y = (*(struct goro_pollfd *const *)b)->fd;
    return x < y ? -1 : x > y;
}

/* Sorts a[0..n) and drops repeats; returns how many are left. */
static int sort_distinct(void **a, int n, int (*cmp)(const void *, const void *))
{
    qsort(a, (size_t)n, sizeof *a, cmp);
    int distinct = 0;
    for (int i = 0; i < n; i++)
        if (!distinct || a[distinct - 1] != a[i])
            a[distinct++] = a[i];
    return distinct;
}

static uint32_t select_rand(void)
{
    static __thread uint32_t state;
    if (!state)
        state = (uint32_t)(uintptr_t)&state | 1u;   /* per thread, never 0 */
    return goro__xorshift32(&state);
}

static bool is_fd_case(const goro_case_t *c)
{
    return c->op == GORO_FD_READ || c->op == GORO_FD_WRITE;
}

static int fd_case_events(const goro_case_t *c)
{
    return c->op == GORO_FD_READ ? GORO_READABLE : GORO_WRITABLE;
}

static int select_check(const goro_case_t *cases, int n, int flags)
{
    if (!cases || n < 0 || n > SELECT_CASES_MAX || (flags & ~GORO_SELECT_NOWAIT))
        return -EINVAL;
    for (int i = 0; i < n; i++) {
        const goro_case_t *c = &cases[i];
        if (is_fd_case(c) && (c->ch || !c->elem))
            return -EINVAL;         /* a descriptor case names a descriptor only */
        if (c->ch && c->op != GORO_SEND && c->op != GORO_RECV)
            return -EINVAL;
        if (c->ch && c->op == GORO_SEND && !c->elem && c->ch->elem_size)
            return -EINVAL;         /* nothing to send */
    }
    return 0;
}

/* A descriptor case, as found before any lock is taken. */
struct select_fd {
    int fd;                        /* *elem, read once; < 0: never ready */
    int err;                       /* the case's result at once (-EBADF...) */
    struct goro_pollfd *pd;        /* NULL: no record (switched off, or err) */
    uint32_t gen;
};

/* The select's working memory: on the stack for up to
 * SELECT_STACK_CASES cases, else one allocation. */
struct select_work {
    int *order;                    /* the cases in a random order */
    struct goro_waiter *waiters;   /* one per case */
    struct goro_chan **chans;      /* for select_locks */
    struct goro_pollfd **pds;
    struct select_fd *fds;         /* per case; descriptor cases only */
    struct pollfd *level;          /* per case: poll(2) of descriptor cases */
    struct select_locks locks;
    void *heap;
};

struct select_stack {
    int order[SELECT_STACK_CASES];
    struct goro_waiter waiters[SELECT_STACK_CASES];
    struct goro_chan *chans[SELECT_STACK_CASES];
    struct goro_pollfd *pds[SELECT_STACK_CASES];
    struct select_fd fds[SELECT_STACK_CASES];
    struct pollfd level[SELECT_STACK_CASES];
};

/* The bytes of a select's work on the heap, for n cases (more than fit
 * on its stack). */
static size_t select_heap_bytes(size_t m)
{
    struct select_work *w;
    return m * (sizeof *w->waiters + sizeof *w->chans + sizeof *w->pds + sizeof *w->fds +
                sizeof *w->level + sizeof *w->order);
}

static int select_work_init(struct select_work *w, int n, struct select_stack *st)
{
    w->heap = NULL;
    if (n <= SELECT_STACK_CASES) {
        *w = (struct select_work){ st->order, st->waiters, st->chans, st->pds, st->fds,
                                   st->level, { 0 }, NULL };
        return 0;
    }
    size_t m = (size_t)n;
    char *p = malloc(select_heap_bytes(m));
    if (!p)
        return -ENOMEM;
    /* largest alignment first */
    w->heap = p;
    w->waiters = (struct goro_waiter *)p;
    w->chans = (struct goro_chan **)(w->waiters + m);
    w->pds = (struct goro_pollfd **)(w->chans + m);
    w->fds = (struct select_fd *)(w->pds + m);
    w->level = (struct pollfd *)(w->fds + m);
    w->order = (int *)(w->level + m);
    return 0;
}

/* A descriptor case's record, registered with a poller so that edges
 * come; or the error that is its result at once. */
static struct select_fd fd_case_prepare(const goro_case_t *c)
{
    struct select_fd f = { *(const int *)c->elem, 0, NULL, 0 };
    if (f.fd < 0)
        return f;                   /* switched off */
    f.err = goro__fd_begin(f.fd, &f.pd, &f.gen);
    if (!f.err)
        f.err = goro__fd_arm(f.pd, f.gen);
    if (f.err)
        f.pd = NULL;
    return f;
}

/* Under the select's locks: the level now, without waiting, of every
 * descriptor case. The level, not the poller's edges, says whether a case
 * is ready: an edge may be delivered after a read has taken what it
 * announced, and data left over by an earlier read brings no edge at all.
 * Polled under the locks, because an edge after this poll needs the
 * record's lock to be delivered: it finds the select's waiter queued. */
static void select_poll_levels(const goro_case_t *cases, int n, struct select_work *w)
{
    bool any = false;
    for (int i = 0; i < n; i++) {
        bool live = is_fd_case(&cases[i]) && w->fds[i].pd;
        w->level[i] = (struct pollfd){ .fd = live ? w->fds[i].fd : -1,
                                       .events = cases[i].op == GORO_FD_READ ? POLLIN : POLLOUT };
        any |= live;
    }
    if (!any)
        return;
    int r;
    while ((r = poll(w->level, (nfds_t)n, 0)) < 0 && errno == EINTR)
        ;
    if (r < 0)                      /* no memory for it: wait for the edges */
        for (int i = 0; i < n; i++)
            w->level[i].revents = 0;
}

/* Picks the random order and the objects to lock; prepares the
 * descriptor cases. Returns how many cases can ever be ready. */
static int select_prepare(const goro_case_t *cases, int n, struct select_work *w)
{
    int nch = 0, npd = 0, live = 0;
    for (int i = 0; i < n; i++) {
        int j = (int)(select_rand() % (uint32_t)(i + 1));   /* Fisher-Yates */
        w->order[i] = w->order[j];
        w->order[j] = i;
        const goro_case_t *c = &cases[i];
        if (is_fd_case(c)) {
            w->fds[i] = fd_case_prepare(c);
            if (w->fds[i].pd)
                w->pds[npd++] = w->fds[i].pd;
            live += w->fds[i].fd >= 0;
        } else if (c->ch) {
            w->chans[nch++] = c->ch;
            live++;
        }
    }
    w->locks = (struct select_locks){
        w->chans, sort_distinct((void **)w->chans, nch, cmp_chan),
        w->pds, sort_distinct((void **)w->pds, npd, cmp_pd), NULL };
    return live;
}

/* What a poll(2) entry says of a descriptor case: its readiness bit,
 * -EBADF, or 0 (not ready). */
static int fd_case_level(const goro_case_t *c, const struct pollfd *level)
{
    if (level->revents & POLLNVAL)
        return -EBADF;              /* closed behind goro's back */
    short seen = c->op == GORO_FD_READ ? POLLIN | POLLHUP | POLLERR : POLLOUT | POLLHUP | POLLERR;
    return (level->revents & seen) ? fd_case_events(c) : 0;
}

/* Under the select's locks: the result of descriptor case i if it is
 * ready (the readiness bit, or a negative errno), else 0. */
static int fd_case_ready_locked(const goro_case_t *c, const struct select_fd *f,
                                const struct pollfd *level)
{
    if (!f->pd)
        return f->err;              /* 0 for a switched-off case */
    int r = goro__fd_check_locked(f->pd, f->gen, fd_case_events(c));
    return r ? r : fd_case_level(c, level);
}

/* A case woken by an edge: is the descriptor still ready? (The edge may
 * be stale.) Its result, or 0 to wait again. */
static int fd_case_level_now(const goro_case_t *c, const struct select_fd *f)
{
    struct pollfd level = { .fd = f->fd, .events = c->op == GORO_FD_READ ? POLLIN : POLLOUT };
    int r;
    while ((r = poll(&level, 1, 0)) < 0 && errno == EINTR)
        ;
    return r < 0 ? fd_case_events(c) : fd_case_level(c, &level);   /* no memory: trust it */
}

/* Under the select's locks: performs the first ready case in the random
 * order and returns its index (*wake: a partner to make runnable), or -1. */
static int select_try_locked(goro_case_t *cases, int n, struct select_work *w,
                             struct goro **wake)
{
    *wake = NULL;
    for (int k = 0; k < n; k++) {
        int i = w->order[k];
        goro_case_t *c = &cases[i];
        int r;
        if (is_fd_case(c))
            r = fd_case_ready_locked(c, &w->fds[i], &w->level[i]);
        else if (c->ch)
            r = c->op == GORO_SEND ? try_send_locked(c->ch, c->elem, wake)
                                   : try_recv_locked(c->ch, c->elem, wake);
        else
            continue;
        if (is_fd_case(c) ? r == 0 : r == -EAGAIN)
            continue;
        c->result = r;
        return i;
    }
    return -1;
}

/* The queue case i waits on, or NULL for a case that is never ready. */
static struct goro_waitq *case_queue(const goro_case_t *c, const struct select_fd *f)
{
    if (is_fd_case(c))
        return !f->pd ? NULL : c->op == GORO_FD_READ ? &f->pd->rq : &f->pd->wq;
    if (!c->ch)
        return NULL;
    return c->op == GORO_SEND ? &c->ch->sendq : &c->ch->recvq;
}

static const void *case_object(const goro_case_t *c, const struct select_fd *f)
{
    return is_fd_case(c) ? (const void *)f->pd : (const void *)c->ch;
}

/* The result of case i, completed by a partner while the select waited. */
static int select_case_result(const goro_case_t *c, const struct goro_waiter *w)
{
    if (is_fd_case(c))
        return w->success ? fd_case_events(c) : -EBADF;    /* or goro_close */
    if (c->op == GORO_SEND)
        return w->success ? 0 : -EPIPE;
    return w->success ? 1 : 0;
}

/* select_wait's answer when an edge woke it for a descriptor that is
 * not ready any more: the select starts again. */
#define SELECT_AGAIN INT_MIN

/* Nothing ready, locks held: waits on every case at once. The first
 * partner to claim the wait (waitq.h) completes its case; the rest are
 * dropped. Returns the index of the case that fired, -errno, or
 * SELECT_AGAIN. */
static int select_wait(goro_case_t *cases, int n, struct select_work *w, int64_t deadline)
{
    struct goro *self = goro__waiter_self();
    bool on_fd = false;           /* a descriptor case: a wait on the world */
    for (int i = 0; i < n; i++) {
        struct goro_waitq *q = case_queue(&cases[i], &w->fds[i]);
        on_fd |= q && is_fd_case(&cases[i]);
        w->waiters[i] = (struct goro_waiter){ .g = self,
                                              .elem = is_fd_case(&cases[i]) ? NULL
                                                                            : cases[i].elem,
                                              .tag = i, .group = w->waiters,
                                              .ngroup = n,
                                              .obj = q ? case_object(&cases[i], &w->fds[i])
                                                       : NULL };
        if (q)
            goro__waitq_push(q, &w->waiters[i]);
    }
    struct goro_park how = { .why = GORO_W_SELECT, .obj = w->waiters, .unlock = select_unlock,
                             .arg = &w->locks, .deadline = deadline, .real = on_fd };
    int outcome = goro__park(&how);
    int fired = self->wake_tag;

    /* Leave the other queues. A partner that completed a case took our
     * waiters off its object already, and that object is not ours to
     * touch any more (a channel may be freed by now). */
    const void *done = outcome == GORO_WAKE_DONE ? w->waiters[fired].obj : NULL;
    struct select_locks rest = w->locks;
    rest.skip = done;
    select_lock(&rest);
    for (int i = 0; i < n; i++) {
        struct goro_waitq *q = case_queue(&cases[i], &w->fds[i]);
        if (q && w->waiters[i].obj != done)
            goro__waitq_remove(q, &w->waiters[i]);
    }
    select_unlock(&rest);
    if (outcome != GORO_WAKE_DONE)
        return goro__wake_error(outcome);
    goro_case_t *c = &cases[fired];
    int r = select_case_result(c, &w->waiters[fired]);
    if (is_fd_case(c) && r > 0) {
        r = fd_case_level_now(c, &w->fds[fired]);
        if (r == 0)
            return SELECT_AGAIN;
        /* The select reads or writes nothing itself, and nobody knows how
         * much its caller will take: the edge it used goes on, to the next
         * waiter (or into the record's flag, for an I/O call on its way to
         * wait). */
        if (r > 0)
            goro__fd_edge_again(w->fds[fired].pd, w->fds[fired].gen, r);
    }
    c->result = r;
    return fired;
}

int goro_select_until(goro_case_t *cases, int n, int flags, int64_t deadline)
{
    int result = select_check(cases, n, flags);
    if (result)
        return result;
    struct select_stack st;
    struct select_work w;
    if (select_work_init(&w, n, &st))
        return -ENOMEM;
    do {
        if (select_prepare(cases, n, &w) == 0) {
            result = (flags & GORO_SELECT_NOWAIT) ? -EAGAIN : -EDEADLK;
            goto out;
        }
        select_lock(&w.locks);
        select_poll_levels(cases, n, &w);
        struct goro *wake;
        result = select_try_locked(cases, n, &w, &wake);
        if (result >= 0 || (flags & GORO_SELECT_NOWAIT)) {
            select_unlock(&w.locks);
            if (wake)
                goro__ready(wake);
            goro__preempt_check();
            if (result < 0)
                result = -EAGAIN;
            goto out;
        }
        result = goro__wait_check(deadline);
        if (result) {
            select_unlock(&w.locks);
            result = goro__wait_refused(result);
            goto out;
        }
        result = select_wait(cases, n, &w, deadline);
    } while (result == SELECT_AGAIN);
out:
    free(w.heap);
    return result;
}

int goro_select(goro_case_t *cases, int n, int flags)
{
    return goro_select_until(cases, n, flags, GORO_FOREVER);
}

/* A parked select's object is its first waiter record (select_wait); the
 * group lists them all, each with its object and queue. */
int goro__select_chans(const void *obj, goro_copy_fn *copy, const void **chans, int max,
                       size_t *heap_bytes)
{
    struct goro_waiter first;
    *heap_bytes = 0;
    if (!copy(&first, obj, sizeof first) || first.ngroup < 1 || first.ngroup > SELECT_CASES_MAX)
        return 0;
    /* Its waiters begin its work, on the heap for a large select
     * (select_work_init), which names every channel: not a reference. */
    if (first.ngroup > SELECT_STACK_CASES)
        *heap_bytes = select_heap_bytes((size_t)first.ngroup);
    int n = 0;
    for (int i = 0; i < first.ngroup; i++) {
        struct goro_waiter w;
        if (!copy(&w, &first.group[i], sizeof w) || !w.obj)
            continue;               /* a case on nothing (a NULL channel) */
        /* A channel's queue lies inside it; anything else is a descriptor. */
        const struct goro_chan *c = w.obj;
        if (w.q != &c->recvq && w.q != &c->sendq)
            return -1;
        if (n < max)
            chans[n] = c;
        n++;
    }
    return n;
}
