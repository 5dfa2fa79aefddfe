/* The registry of live connections: a semaphore for --max-conns, a wait
 * group counting connections until they are closed, and an intrusive list
 * (nodes on the serving coroutines' stacks) so shutdown can cancel them.
 *
 * A cancelled coroutine cannot count on taking a lock again (every later
 * wait of it returns -ECANCELED), so whoever cancels a connection first
 * takes it off the list; a coroutine whose lock fails knows it was. Closing
 * a connection only releases and counts down, which never waits. */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>

#include "echod.h"

static goro_mutex_t list_lock = GORO_MUTEX_INIT;
static struct conn *list;            /* under list_lock */
static bool refusing;                /* under list_lock: shutdown cancelled the list */
static goro_sem_t slots;             /* --max-conns */
static goro_waitgroup_t open_conns = GORO_WAITGROUP_INIT;
static _Atomic long live;            /* connections being served: status line */
static _Atomic long reserved;        /* accepted and not closed, + the acceptor's slot */

void conns_init(long max_conns)
{
    goro_sem_init(&slots, max_conns > 0 ? max_conns : LONG_MAX);
}

int conns_reserve(void)
{
    int err = goro_sem_acquire(&slots);
    if (err < 0)
        return err;
    goro_waitgroup_add(&open_conns, 1);
    atomic_fetch_add_explicit(&reserved, 1, memory_order_relaxed);
    return 0;
}

void conns_unreserve(void)
{
    atomic_fetch_sub_explicit(&reserved, 1, memory_order_relaxed);
    goro_sem_release(&slots);
    goro_waitgroup_done(&open_conns);
}

long conns_live(void)
{
    return atomic_load_explicit(&live, memory_order_relaxed);
}

long conns_reserved(void)
{
    return atomic_load_explicit(&reserved, memory_order_relaxed);
}

static void unlist(struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->listed = false;
}

int conn_open(struct conn *c, int fd)
{
    /* An echo goes out as it comes in: goro_listen's listener has
     * TCP_NODELAY, which fd inherits (no Nagle wait for an ACK). */
    *c = (struct conn){ .fd = fd, .self = goro_self() };
    stats_coroutine(+1);
    atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
    if (goro_mutex_lock(&list_lock) < 0)
        return -ESHUTDOWN;
    if (!refusing) {
        c->next = list;
        if (list)
            list->prev = c;
        list = c;
        c->listed = true;
    }
    goro_mutex_unlock(&list_lock);
    return c->listed ? 0 : -ESHUTDOWN;
}

void conn_close(struct conn *c)
{
    /* A failed lock means shutdown cancelled us, and unlisted us first. */
    if (goro_mutex_lock(&list_lock) == 0) {
        if (c->listed)
            unlist(c);
        goro_mutex_unlock(&list_lock);
    }
    goro_close(c->fd);
    atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
    stats_coroutine(-1);
    conns_unreserve();
}

/* Cancels every listed connection and refuses new ones. */
static void cancel_all(void)
{
    if (goro_mutex_lock(&list_lock) < 0)
        return;                 /* the caller itself is being stopped */
    refusing = true;
    while (list) {
        struct conn *c = list;
        goro_t *self = c->self;
        unlist(c);              /* c's coroutine may return once cancelled */
        goro_cancel(self);
    }
    goro_mutex_unlock(&list_lock);
}

void conns_drain(int64_t deadline)
{
    if (goro_waitgroup_wait_until(&open_conns, deadline) == 0)
        return;
    cancel_all();
    goro_waitgroup_wait(&open_conns);
}

void conns_cancel_now(void)
{
    cancel_all();
}
