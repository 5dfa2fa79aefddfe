/* wait/: waiting on objects - waiter records and their queues (this
 * header, waitq.c), channels and select (chan.c), the sync primitives
 * (sync.c), groups (group.c), single-flight (flight.c) and tickers
 * (ticker.c). Calls sched/ (park, ready, claim), coro/ (a cancel's claim,
 * the error objects, goro_exit's unwinding) and base/; upward, a select's
 * descriptor cases (io/poller.h: goro__select_fds) and the first use that
 * starts the runtime. debug/ reads who holds what through "waitgraph".
 *
 * layer: wait - waiting on objects: waiter queues, channels and select,
 *     the sync primitives, groups, single-flight, tickers
 * may call: coro, sched, base
 * uses: select-fd, start, fatal
 * contract waitgraph for debug: goro__wait_holder goro__select_chans
 *
 * Waiter records and FIFO queues of them, shared by channels, select and
 * the sync primitives. A waiter lives on the stack of the coroutine (or
 * thread) that waits, which stays put while it is parked. Queues are
 * doubly linked so that a waiter can leave from the middle (a select that
 * fired elsewhere, a deadline, a cancellation). All queue operations happen
 * under the lock of the object the queue belongs to.
 *
 * Taking a waiter from a queue claims its coroutine's wait (enum
 * goro_wake): a waiter whose wait already ended - a select that fired on
 * another case, a deadline, a cancellation - is dropped instead, and it
 * removes itself (a no-op once dropped) when it runs.
 *
 * A select's waiters form a group. Whoever completes one of them also
 * takes the group's other waiters off the same object's queues, under the
 * lock it holds: once the partner's call returns, the object may be freed,
 * so the woken select must never need that object again (chan.c). */
#ifndef GORO_WAITQ_H
#define GORO_WAITQ_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "sched/sched.h"

struct goro_waitq {
    struct goro_waiter *head, *tail;
};

struct goro_waiter {
    struct goro *g;
    struct goro_waiter *prev, *next;
    struct goro_waitq *q;          /* the queue it is (or was last) on */
    void *elem;                    /* channels: element source / destination */
    struct goro_waiter *group;     /* select: every case's waiter, [ngroup] */
    const void *obj;               /* select: the object whose lock guards q */
    int ngroup;
    int tag;                       /* handed to the woken coroutine (g->wake_tag):
                                      a select's case index, a wait's direction */
    int kind;                      /* rwlock: 1 = writer */
    int8_t prio;                   /* mutex, rwlock: the class it lends the holder */
    bool queued;
    bool success;                  /* completed by a partner, not by close */
};

/* Queue invariants, under the owner's lock: head and tail are both set
 * or both NULL; a waiter is on at most one queue at a time, and w->q
 * names it while it is (queued); a select's waiter is its own case's
 * (group[tag]) - one waiter per case. */
static inline void goro__waitq_push(struct goro_waitq *q, struct goro_waiter *w)
{
    GORO_ASSERT(!w->queued);        /* waitq: a waiter is on one queue at most */
    GORO_ASSERT(!q->head == !q->tail);
    GORO_ASSERT(!w->group || (w->tag >= 0 && w->tag < w->ngroup && &w->group[w->tag] == w));
    w->next = NULL;
    w->prev = q->tail;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    w->q = q;
    w->queued = true;
}

static inline void goro__waitq_remove(struct goro_waitq *q, struct goro_waiter *w)
{
    if (!w->queued)
        return;
    GORO_ASSERT(w->q == q);         /* waitq: a waiter leaves only the queue it is on */
    GORO_ASSERT(w->prev ? w->prev->next == w : q->head == w);
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

/* w's select has fired: its other waiters on w's object (guarded by the
 * lock the caller holds) leave their queues now. */
static inline void goro__waitq_drop_group(struct goro_waiter *w)
{
    for (int i = 0; i < w->ngroup; i++) {
        struct goro_waiter *s = &w->group[i];
        if (s != w && s->obj == w->obj && s->queued)
            goro__waitq_remove(s->q, s);
    }
}

/* Takes the first waiter whose wait it can claim, recording which select
 * case fired. The caller makes w->g runnable (goro__ready) after it has
 * finished with w and dropped the lock. */
static inline struct goro_waiter *goro__waitq_pop(struct goro_waitq *q)
{
    struct goro_waiter *w;
    while ((w = q->head)) {
        goro__waitq_remove(q, w);
        if (goro__claim(w->g, GORO_WAKE_DONE)) {
            /* select: the claim completes one case, the claimed waiter's own */
            GORO_ASSERT(!w->group || &w->group[w->tag] == w);
            w->g->wake_tag = w->tag;
            if (w->group)
                goro__waitq_drop_group(w);
            return w;
        }
    }
    return NULL;
}

/* Takes every claimable waiter of q, marking each with success (and
 * zeroing zero_bytes of its elem, if it has one: receivers of a closed
 * channel), and chains their coroutines through g->next in front of list,
 * to be made runnable (goro__ready_list) once the lock is dropped. */
static inline struct goro *goro__waitq_take_all(struct goro_waitq *q, bool success,
                                               size_t zero_bytes, struct goro *list)
{
    struct goro_waiter *w;
    while ((w = goro__waitq_pop(q))) {
        w->success = success;
        if (zero_bytes && w->elem)
            memset(w->elem, 0, zero_bytes);
        w->g->next = list;
        list = w->g;
    }
    return list;
}


/* Called with lk held and nothing ready: queues w (filled in by the
 * caller: g, and elem or kind) on q and parks until a partner takes it
 * (0: w->success says how), or the deadline, a cancellation - unless
 * firm - or nothing (-errno). lk is released either way; w is off q when
 * this returns. The one way every channel and sync wait parks. */
GORO_HIDDEN int goro__waitq_wait(struct goro_waitq *q, struct goro_waiter *w,
                                 goro_lock_t *lk, enum goro_wait why, const void *obj,
                                 int64_t deadline, bool firm);

/* goro__waitq_wait's queueing and parking, for a wait that sets up its
 * own park (how: its unlock must drop lk - goro__unlock_cb, lk). Checks
 * nothing first; returns the outcome (enum goro_wake), with lk released
 * and w off q unless a partner completed the wait (GORO_WAKE_DONE). */
struct goro_park;
GORO_HIDDEN int goro__waitq_park(struct goro_waitq *q, struct goro_waiter *w,
                                 goro_lock_t *lk, const struct goro_park *how);

/* ---- for the wait graph (debug/waitgraph.c) ----
 * Who alone can end a wait, read from the object through copy (which
 * copies len bytes of memory that may be gone, or says false): a snapshot
 * for the deadlock and leak reports, taken without the object's lock. */
enum goro_held {
    GORO_HELD_NONE, GORO_HELD_CORO, GORO_HELD_THREAD,
    GORO_HELD_ENDED                /* the graph's verdict: by a coroutine that has ended */
};
typedef bool goro_copy_fn(void *dst, const void *src, size_t len);
/* A wait of kind why on obj: a mutex's or a written rwlock's holder, a
 * once's runner (sync.c), a flight's runner (flight.c). GORO_HELD_CORO:
 * *g is the holder's record, *id its id when it took the object (0: not
 * known); ENDED: a lock left held by a coroutine that has ended, *id its
 * id; NONE: nobody in particular can end it (or it is not held). */
GORO_HIDDEN enum goro_held goro__wait_holder(int why, const void *obj, goro_copy_fn *copy,
                                             struct goro **g, uint64_t *id);
GORO_HIDDEN enum goro_held goro__flight_holder(const void *obj, goro_copy_fn *copy,
                                               struct goro **g);
/* A parked select's objects (chan.c; obj is its first waiter record): up
 * to max channels into chans; returns how many it has, or -1 if it also
 * waits on a descriptor (which the outside world may end). *heap_bytes:
 * the size of its own records on the heap from obj on (0: on its stack),
 * which the leak scan must not take for references. */
GORO_HIDDEN int goro__select_chans(const void *obj, goro_copy_fn *copy, const void **chans,
                                   int max, size_t *heap_bytes);

/* chan.c, for io/signal.c: the element size ch was made with. */
GORO_HIDDEN size_t goro__chan_elem_size(const goro_chan_t *ch);

#endif
