/* Waiter records and FIFO queues of them, shared by channels, select and
 * the sync primitives. A waiter lives on the stack of the coroutine (or
 * thread) that waits, which stays put while it is parked. Queues are
 * doubly linked so that a waiter can leave from the middle (a select that
 * fired elsewhere; later, a timeout or a cancellation). All queue
 * operations happen under the lock of the object the queue belongs to. */
#ifndef GORO_WAITQ_H
#define GORO_WAITQ_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"

/* Shared by the waiters of one select: the first waker to claim it wins. */
struct goro_select_wait {
    _Atomic int done;
    int fired;                     /* case index that completed */
};

struct goro_waiter {
    struct goro *g;
    struct goro_waiter *prev, *next;
    void *elem;                    /* channels: element source / destination */
    struct goro_select_wait *sel;  /* non-NULL when part of a select */
    int case_index;
    int kind;                      /* rwlock: 1 = writer */
    bool queued;
    bool success;                  /* completed by a partner, not by close */
};

struct goro_waitq {
    struct goro_waiter *head, *tail;
};

static inline void goro__waitq_push(struct goro_waitq *q, struct goro_waiter *w)
{
    w->next = NULL;
    w->prev = q->tail;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    w->queued = true;
}

static inline void goro__waitq_remove(struct goro_waitq *q, struct goro_waiter *w)
{
    if (!w->queued)
        return;
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    w->prev = w->next = NULL;
    w->queued = false;
}

/* Takes the first waiter that can still be woken: a select waiter whose
 * select already fired elsewhere is dropped on the way. */
static inline struct goro_waiter *goro__waitq_pop(struct goro_waitq *q)
{
    struct goro_waiter *w;
    while ((w = q->head)) {
        goro__waitq_remove(q, w);
        if (!w->sel)
            return w;
        int zero = 0;
        if (atomic_compare_exchange_strong(&w->sel->done, &zero, 1)) {
            w->sel->fired = w->case_index;
            return w;
        }
    }
    return NULL;
}

/* The waiting party: the running coroutine, or this thread's stand-in. */
static inline struct goro *goro__waiter_self(void)
{
    struct goro *g = goro__current();
    return g ? g : goro__external_self();
}

#endif
