/*
 * A select's descriptor cases (GORO_FD_READ, GORO_FD_WRITE): the part of
 * goro_select that knows descriptor records. wait/chan.c runs the select
 * and reaches this file through one call, goro__select_fds (poller.h),
 * step by step; it sees a case's queue and object, never a record.
 *
 * A descriptor case waits like goro_wait_fd: its waiter goes on the
 * record's queue of readers or writers (netpoll.h), where an edge, a
 * passed turn or goro_close claims it through the same group as the
 * select's channel waiters.
 *
 * Readiness is the level, not the poller's edges: an edge may be
 * delivered after a read has taken what it announced, and data left over
 * by an earlier read brings no edge at all. The select polls the levels
 * under the records' locks, in the hold in which it queues its waiters:
 * an edge after that poll needs a record's lock to be delivered, and
 * finds the waiter queued. An edge that woke the select is checked again
 * the same way: under the record's lock and at its generation, so the
 * level read is the old file's even if goro_close ends the descriptor's
 * life meanwhile (close(2) runs under that lock, after the generation has
 * moved on): the case then says -EBADF, never the readiness of a file
 * that got the number since.
 *
 * Invariants: a live case (pd set) has a record of the generation it
 * began with, registered with a poller or never waiting (UNPOLLABLE), by
 * the time the select takes the locks; the records are locked in
 * descriptor order, after the select's channels (chan.c, "Lock order"),
 * and released in the reverse.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "internal.h"
#include "io/netpoll.h"
#include "io/poller.h"

static bool is_fd_case(const goro_case_t *c)
{
    return c->op == GORO_FD_READ || c->op == GORO_FD_WRITE;
}

static int case_events(const goro_case_t *c)
{
    return c->op == GORO_FD_READ ? GORO_READABLE : GORO_WRITABLE;
}

static short case_poll_events(const goro_case_t *c)
{
    return c->op == GORO_FD_READ ? POLLIN : POLLOUT;
}

/* A case's record, registered with a poller so that edges come; or the
 * error that is its result at once. */
static struct goro_fd_case case_prepare(const goro_case_t *c)
{
    struct goro_fd_case f = { .fd = *(const int *)c->elem };
    if (f.fd < 0)
        return f;                   /* switched off */
    f.err = goro__fd_begin(f.fd, &f.pd, &f.gen);
    if (!f.err)
        f.err = goro__fd_arm(f.pd, f.gen);
    if (f.err)
        f.pd = NULL;
    else
        f.q = c->op == GORO_FD_READ ? &f.pd->rq : &f.pd->wq;
    return f;
}

static int cmp_pd(const void *a, const void *b)
{
    int x = (*(struct goro_pollfd *const *)a)->fd;
    int y = (*(struct goro_pollfd *const *)b)->fd;
    return x < y ? -1 : x > y;
}

/* Before any lock: every descriptor case's record, and the distinct
 * records in descriptor order (the lock order). Returns how many cases
 * can ever be ready. */
static int prepare(struct goro_select_fds *s)
{
    int live = 0, n = 0;
    for (int i = 0; i < s->n; i++) {
        if (!is_fd_case(&s->cases[i]))
            continue;
        s->fc[i] = case_prepare(&s->cases[i]);
        if (s->fc[i].pd)
            s->pds[n++] = s->fc[i].pd;
        live += s->fc[i].fd >= 0;
    }
    qsort(s->pds, (size_t)n, sizeof *s->pds, cmp_pd);
    int distinct = 0;
    for (int i = 0; i < n; i++)
        if (!distinct || s->pds[distinct - 1] != s->pds[i])
            s->pds[distinct++] = s->pds[i];
    s->npds = distinct;
    return live;
}

static void lock_all(const struct goro_select_fds *s, const void *skip)
{
    for (int i = 0; i < s->npds; i++) {
        /* fd: the lock order (descriptor order) */
        GORO_ASSERT(i == 0 || s->pds[i - 1]->fd < s->pds[i]->fd);
        if (s->pds[i] != skip)
            goro__lock(&s->pds[i]->lock);
    }
}

static void unlock_all(const struct goro_select_fds *s, const void *skip)
{
    for (int i = s->npds - 1; i >= 0; i--)
        if (s->pds[i] != skip)
            goro__unlock(&s->pds[i]->lock);
}

/* What a poll(2) entry says of a case: its readiness bit, -EBADF, or 0. */
static int level_result(const goro_case_t *c, const struct pollfd *level)
{
    if (level->revents & POLLNVAL)
        return -EBADF;              /* closed behind goro's back */
    short seen = case_poll_events(c) | POLLHUP | POLLERR;
    return (level->revents & seen) ? case_events(c) : 0;
}

/* Under the locks: every descriptor case's result now, without waiting
 * (the readiness bit, a negative errno, or 0), into fc[i].ready. */
static void look(struct goro_select_fds *s)
{
    bool any = false;
    for (int i = 0; i < s->n; i++) {
        const goro_case_t *c = &s->cases[i];
        bool live = is_fd_case(c) && s->fc[i].pd;
        s->level[i] = (struct pollfd){ .fd = live ? s->fc[i].fd : -1,
                                       .events = case_poll_events(c) };
        any |= live;
    }
    int r = 0;
    if (any)
        while ((r = poll(s->level, (nfds_t)s->n, 0)) < 0 && errno == EINTR)
            ;
    for (int i = 0; i < s->n; i++) {
        const goro_case_t *c = &s->cases[i];
        struct goro_fd_case *f = &s->fc[i];
        if (!is_fd_case(c))
            continue;
        if (!f->pd) {
            f->ready = f->err;      /* 0 for a switched-off case */
            continue;
        }
        /* fd: a live case's record is locked by this select */
        GORO_ASSERT(goro__lock_mine(&f->pd->lock));
        f->ready = goro__fd_check_locked(f->pd, f->gen, case_events(c));
        if (!f->ready && r >= 0)    /* r < 0: no memory for it; wait for the edges */
            f->ready = level_result(c, &s->level[i]);
    }
}

/* Case i was completed by an edge (the select holds no lock): is the
 * descriptor still ready? The edge may be stale, and the descriptor's
 * life may have ended since (then -EBADF: goro_close's waiters get that).
 * Looked at under the record's lock, at the case's generation. If it is
 * ready, the edge goes on: the select reads or writes nothing itself, and
 * nobody knows how much its caller will take, so the next waiter (or the
 * record's flag, for an I/O call on its way to wait) gets it too. */
static int woken(const struct goro_select_fds *s, int i)
{
    const goro_case_t *c = &s->cases[i];
    const struct goro_fd_case *f = &s->fc[i];
    GORO_ASSERT(is_fd_case(c) && f->pd);     /* fd: only a live case is woken */
    struct goro_pollfd *pd = f->pd;
    struct goro *next = NULL;
    goro__lock(&pd->lock);
    int r = goro__fd_check_locked(pd, f->gen, case_events(c));
    if (r == 0) {
        struct pollfd level = { .fd = f->fd, .events = case_poll_events(c) };
        int n;
        while ((n = poll(&level, 1, 0)) < 0 && errno == EINTR)
            ;
        r = n < 0 ? case_events(c) : level_result(c, &level);   /* no memory: trust it */
        if (r > 0)
            next = goro__fd_edge_again_locked(pd, r);
    }
    goro__unlock(&pd->lock);
    if (next)
        goro__ready(next);
    return r;
}

int goro__select_fds(struct goro_select_fds *s, enum goro_select_fds_step step, int i,
                     const void *skip)
{
    switch (step) {
    case GORO_SELECT_FDS_PREPARE:
        return prepare(s);
    case GORO_SELECT_FDS_LOCK:
        lock_all(s, skip);
        return 0;
    case GORO_SELECT_FDS_UNLOCK:
        unlock_all(s, skip);
        return 0;
    case GORO_SELECT_FDS_LOOK:
        look(s);
        return 0;
    case GORO_SELECT_FDS_WOKEN:
        return woken(s, i);
    }
    return -EINVAL;
}
