/*
 * Channels and select, with Go's semantics.
 *
 * A channel is a lock, a ring buffer of cap elements and two waiter
 * queues. Invariants (under ch->lock; chan_check_locked asserts them):
 *   - count <= cap, and the ring is consistent: the next value to
 *     receive is at recvx, the next free slot at sendx = recvx + count
 *     (mod cap); both 0 when unbuffered;
 *   - if count > 0 then recvq is empty (a receiver would have taken it);
 *   - if count < cap then sendq is empty (a sender would have buffered);
 *   - unbuffered (cap == 0): at most one of recvq, sendq is non-empty -
 *     except while one select waits both to send and to receive on it
 *     (as in Go): then both queues start with that select's waiters.
 * These hold for waiters whose wait has ended too (a deadline, a cancel):
 * such a waiter stays queued until it removes itself, but the values and
 * waiters that would contradict it pop the queue first, which drops it.
 * A partner that finds a waiter completes the exchange itself, copying
 * straight to or from the waiter's stack, marks it successful and makes it
 * runnable: the woken side never has to retry. Close wakes everybody with
 * success = false.
 *
 * select locks all its channels in address order, then its descriptors'
 * records in descriptor order (the lock order: see "select" below; the
 * descriptor cases are io/'s, io/select_fd.c), polls
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
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched/sched.h"
#include "io/poller.h"
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

/* Under ch->lock: the invariants at the top. Free in release builds. */
static inline void chan_check_locked(struct goro_chan *ch)
{
#ifdef GORO_DEBUG
    GORO_ASSERT(goro__lock_mine(&ch->lock));
    /* chan: never more buffered than it holds */
    GORO_ASSERT(ch->count <= ch->cap);
    /* chan: the ring's ends agree with its count */
    GORO_ASSERT(ch->cap ? ch->recvx < ch->cap && (ch->recvx + ch->count) % ch->cap == ch->sendx
                        : ch->recvx == 0 && ch->sendx == 0);
    /* chan: a buffered value never waits beside a parked receiver */
    GORO_ASSERT(ch->count == 0 || !ch->recvq.head);
    /* chan: a sender parks only beside a full buffer */
    GORO_ASSERT(ch->count == ch->cap || !ch->sendq.head);
    /* chan: unbuffered, senders and receivers never wait for each other,
     * but for one select on both sides */
    GORO_ASSERT(ch->cap || !ch->recvq.head || !ch->sendq.head ||
                ch->recvq.head->g == ch->sendq.head->g);
#else
    (void)ch;
#endif
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
        GORO_ASSERT(ch->count == 0);  /* chan: a receiver waits only on an empty buffer */
        copy_elem(ch, w->elem, elem);
        w->success = true;
        *wake = w->g;
        chan_check_locked(ch);
        return 0;
    }
    if (ch->count < ch->cap) {
        copy_elem(ch, slot(ch, ch->sendx), elem);
        ch->sendx = (ch->sendx + 1) % ch->cap;
        ch->count++;
        chan_check_locked(ch);
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
        /* chan: a sender waits only beside a full buffer, whose head it
         * may take the place of */
        GORO_ASSERT(ch->count == ch->cap);
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
        chan_check_locked(ch);
        return 1;
    }
    if (ch->count > 0) {
        copy_elem(ch, elem, slot(ch, ch->recvx));
        zero_elem(ch, slot(ch, ch->recvx));
        ch->recvx = (ch->recvx + 1) % ch->cap;
        ch->count--;
        chan_check_locked(ch);
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
    chan_check_locked(ch);
    /* chan: a sender parks only beside a full buffer, a receiver only
     * beside an empty one (try_*_locked said -EAGAIN) */
    GORO_ASSERT(send ? ch->count == ch->cap : ch->count == 0);
    GORO_ASSERT(!ch->closed);       /* chan: nobody waits on a closed channel */
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
    /* chan: a closed channel has nobody waiting on it */
    GORO_ASSERT(!ch->recvq.head && !ch->sendq.head);
    chan_check_locked(ch);
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
 * descriptor cases (GORO_FD_READ, GORO_FD_WRITE). The descriptor cases
 * are io/'s (io/select_fd.c), reached through goro__select_fds
 * (io/poller.h): their records, their lock order, their readiness. Here
 * each case is a queue to wait on and the object whose lock guards it.
 *
 * Lock order. A select holds the locks of everything it waits on while it
 * looks at the cases and while it queues, so it takes them in one global
 * order: every channel lock in address order, then every descriptor
 * record lock in descriptor order. Nothing else holds two of these locks:
 * channel calls take one channel's lock; the poller's callbacks, the I/O
 * calls and goro_close take one record's lock and never a channel's.
 * (libevent's base lock is taken inside a record's lock when a descriptor
 * is registered, never the other way round; a select registers its
 * descriptors before it takes any lock.) So no cycle can form.
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
    struct goro_select_fds *fds;   /* NULL: no descriptor case */
    const void *skip;              /* not this one: a partner completed it */
};

static void select_lock(const struct select_locks *l)
{
    for (int i = 0; i < l->nchans; i++)
        if (l->chans[i] != l->skip)
            goro__lock(&l->chans[i]->lock);
    if (l->fds)
        goro__select_fds(l->fds, GORO_SELECT_FDS_LOCK, 0, l->skip);
}

static void select_unlock(void *arg)
{
    const struct select_locks *l = arg;
    if (l->fds)
        goro__select_fds(l->fds, GORO_SELECT_FDS_UNLOCK, 0, l->skip);
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

/* 0, or -EINVAL; *nfd: how many descriptor cases there are. */
static int select_check(const goro_case_t *cases, int n, int flags, int *nfd)
{
    *nfd = 0;
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
        *nfd += is_fd_case(c);
    }
    return 0;
}

/* The select's working memory: on the stack for up to
 * SELECT_STACK_CASES cases, else one allocation. */
struct select_work {
    int *order;                    /* the cases in a random order */
    struct goro_waiter *waiters;   /* one per case */
    struct goro_chan **chans;      /* for select_locks */
    struct goro_select_fds fds;    /* the descriptor cases (io/), if any */
    struct select_locks locks;
    void *heap;
};

struct select_stack {
    int order[SELECT_STACK_CASES];
    struct goro_waiter waiters[SELECT_STACK_CASES];
    struct goro_chan *chans[SELECT_STACK_CASES];
    struct goro_pollfd *pds[SELECT_STACK_CASES];
    struct goro_fd_case fc[SELECT_STACK_CASES];
    struct pollfd level[SELECT_STACK_CASES];
};

/* The bytes of a select's work on the heap, for n cases (more than fit
 * on its stack). */
static size_t select_heap_bytes(size_t m)
{
    struct select_work *w;
    return m * (sizeof *w->waiters + sizeof *w->chans + sizeof *w->fds.pds +
                sizeof *w->fds.fc + sizeof *w->fds.level + sizeof *w->order);
}

static int select_work_init(struct select_work *w, const goro_case_t *cases, int n,
                            struct select_stack *st)
{
    w->heap = NULL;
    w->fds = (struct goro_select_fds){ .cases = cases, .n = n };
    if (n <= SELECT_STACK_CASES) {
        w->order = st->order;
        w->waiters = st->waiters;
        w->chans = st->chans;
        w->fds.pds = st->pds;
        w->fds.fc = st->fc;
        w->fds.level = st->level;
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
    w->fds.pds = (struct goro_pollfd **)(w->chans + m);
    w->fds.fc = (struct goro_fd_case *)(w->fds.pds + m);
    w->fds.level = (struct pollfd *)(w->fds.fc + m);
    w->order = (int *)(w->fds.level + m);
    return 0;
}

/* Picks the random order and the objects to lock; prepares the
 * descriptor cases (nfd of them). Returns how many cases can ever be
 * ready. */
static int select_prepare(const goro_case_t *cases, int n, int nfd, struct select_work *w)
{
    int nch = 0, live = 0;
    for (int i = 0; i < n; i++) {
        int j = (int)(select_rand() % (uint32_t)(i + 1));   /* Fisher-Yates */
        w->order[i] = w->order[j];
        w->order[j] = i;
        if (cases[i].ch && !is_fd_case(&cases[i])) {
            w->chans[nch++] = cases[i].ch;
            live++;
        }
    }
    if (nfd)
        live += goro__select_fds(&w->fds, GORO_SELECT_FDS_PREPARE, 0, NULL);
    w->locks = (struct select_locks){
        w->chans, sort_distinct((void **)w->chans, nch, cmp_chan),
        nfd && w->fds.npds ? &w->fds : NULL, NULL };
    return live;
}

/* Under the select's locks: performs the first ready case in the random
 * order and returns its index (*wake: a partner to make runnable), or -1.
 * The descriptor cases' results were looked at (LOOK) in this hold. */
static int select_try_locked(goro_case_t *cases, int n, struct select_work *w,
                             struct goro **wake)
{
    *wake = NULL;
    for (int k = 0; k < n; k++) {
        int i = w->order[k];
        goro_case_t *c = &cases[i];
        int r;
        if (is_fd_case(c))
            r = w->fds.fc[i].ready;
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
static struct goro_waitq *case_queue(const goro_case_t *c, const struct goro_fd_case *f)
{
    if (is_fd_case(c))
        return f->pd ? f->q : NULL;
    if (!c->ch)
        return NULL;
    return c->op == GORO_SEND ? &c->ch->sendq : &c->ch->recvq;
}

static const void *case_object(const goro_case_t *c, const struct goro_fd_case *f)
{
    return is_fd_case(c) ? (const void *)f->pd : (const void *)c->ch;
}

/* The result of case i, completed by a partner while the select waited. */
static int select_case_result(const goro_case_t *c, const struct goro_waiter *w)
{
    if (is_fd_case(c))
        return w->success ? (c->op == GORO_FD_READ ? GORO_READABLE : GORO_WRITABLE)
                          : -EBADF;  /* or goro_close */
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
    const struct goro_fd_case *fc = w->fds.fc;
    for (int i = 0; i < n; i++) {
        struct goro_waitq *q = case_queue(&cases[i], &fc[i]);
        on_fd |= q && is_fd_case(&cases[i]);
        w->waiters[i] = (struct goro_waiter){ .g = self,
                                              .elem = is_fd_case(&cases[i]) ? NULL
                                                                            : cases[i].elem,
                                              .tag = i, .group = w->waiters,
                                              .ngroup = n,
                                              .obj = q ? case_object(&cases[i], &fc[i])
                                                       : NULL };
        if (q)
            goro__waitq_push(q, &w->waiters[i]);
    }
    /* The channels' invariants hold with the select's waiters queued (the
     * one exception: an unbuffered channel it sends and receives on). */
    for (int i = 0; i < n; i++)
        if (!is_fd_case(&cases[i]) && cases[i].ch)
            chan_check_locked(cases[i].ch);
    struct goro_park how = { .why = GORO_W_SELECT, .obj = w->waiters, .unlock = select_unlock,
                             .arg = &w->locks, .deadline = deadline, .real = on_fd };
    int outcome = goro__park(&how);
    int fired = self->wake_tag;
    /* select: the first claim completes it - one case, whose waiter its
     * partner took off the queue (waitq.h) */
    GORO_ASSERT(outcome != GORO_WAKE_DONE ||
                (fired >= 0 && fired < n && !w->waiters[fired].queued &&
                 w->waiters[fired].obj));

    /* Leave the other queues. A partner that completed a case took our
     * waiters off its object already, and that object is not ours to
     * touch any more (a channel may be freed by now). */
    const void *done = outcome == GORO_WAKE_DONE ? w->waiters[fired].obj : NULL;
    struct select_locks rest = w->locks;
    rest.skip = done;
    select_lock(&rest);
    for (int i = 0; i < n; i++) {
        struct goro_waitq *q = case_queue(&cases[i], &fc[i]);
        if (q && w->waiters[i].obj != done)
            goro__waitq_remove(q, &w->waiters[i]);
        /* select: none of its waiters outlives its wait on a queue (those
         * on the partner's object went with the claim: drop_group) */
        GORO_ASSERT(!w->waiters[i].queued);
    }
    select_unlock(&rest);
    if (outcome != GORO_WAKE_DONE)
        return goro__wake_error(outcome);
    goro_case_t *c = &cases[fired];
    int r = select_case_result(c, &w->waiters[fired]);
    /* An edge may be stale, or the descriptor's life over by now: io/
     * looks again (and passes the edge on if it is still ready). */
    if (is_fd_case(c) && r > 0 &&
        (r = goro__select_fds(&w->fds, GORO_SELECT_FDS_WOKEN, fired, NULL)) == 0)
        return SELECT_AGAIN;
    c->result = r;
    return fired;
}

int goro_select_until(goro_case_t *cases, int n, int flags, int64_t deadline)
{
    int nfd;
    int result = select_check(cases, n, flags, &nfd);
    if (result)
        return result;
    struct select_stack st;
    struct select_work w;
    if (select_work_init(&w, cases, n, &st))
        return -ENOMEM;
    do {
        if (select_prepare(cases, n, nfd, &w) == 0) {
            result = (flags & GORO_SELECT_NOWAIT) ? -EAGAIN : -EDEADLK;
            goto out;
        }
        select_lock(&w.locks);
        if (nfd)
            goro__select_fds(&w.fds, GORO_SELECT_FDS_LOOK, 0, NULL);
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
