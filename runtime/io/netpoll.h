/* Descriptor records of the poller (runtime/io/netpoll.c), for io.c and
 * a select's descriptor cases (select_fd.c). Inside io/ only. */
#ifndef GORO_NETPOLL_H
#define GORO_NETPOLL_H

#include <event2/event_struct.h>

#include "internal.h"
#include "wait/waitq.h"

/* What is known about a descriptor number. */
enum goro_pd_state {
    PD_UNKNOWN,                    /* never used, or closed since */
    PD_CLOSING,                    /* goro_close / goro_fd_release under way:
                                      the old file is still open */
    PD_NONBLOCK,                   /* made non-blocking; not registered yet */
    PD_UNPOLLABLE,                 /* a regular file or the like: never waits */
    PD_REGISTERED,                 /* its event is in a base */
};

/* A record's transitions, under its lock (netpoll.c asserts them):
 *   UNKNOWN -> NONBLOCK | UNPOLLABLE   a life begins (new_life_locked)
 *   NONBLOCK -> REGISTERED             the first wait (register_locked)
 *   NONBLOCK -> UNPOLLABLE             epoll refuses the file (goro__fd_arm)
 *   any but CLOSING -> CLOSING         goro_close / release (retire)
 *   CLOSING -> UNKNOWN                 the life ends (new_life_locked)
 * Waiters queue on rq / wq only while it is REGISTERED, and CLOSING takes
 * them all: a record that is not REGISTERED has none. */

/* One per descriptor number, kept while the process lives. A number is
 * reused: what the record learned about one open file (state, the ready
 * flags, is_socket) is set afresh whenever the number starts a new life
 * (netpoll.c, new_life_locked): when goro lets it go, when goro_socket or
 * goro_accept makes it, and when the first call prepares it. How a life
 * ends, so that nothing of it reaches the next: netpoll.c, "the end of a
 * life". fd comes first: debuggers print a parked coroutine's wait_obj
 * (this record) as its descriptor. */
struct goro_pollfd {
    int fd;
    goro_lock_t lock;              /* everything below but the atomics */
    _Atomic uint32_t gen;          /* bumped when a life begins and when it ends */
    _Atomic uint32_t ops;          /* calls between goro__fd_enter and _leave */
    _Atomic int state_hint;        /* state, readable without the lock */
    int state;                     /* enum goro_pd_state */
    bool rready, wready;           /* an edge came while nobody waited */
    bool closer;                   /* CLOSING for a goro_close: it calls close(2) */
    _Atomic bool is_socket;        /* writes go through send(MSG_NOSIGNAL) */
    struct goro_waitq rq, wq;      /* waiting readers / writers, FIFO */
    struct goro_waitq cq;          /* a goro_close or release waiting for ops
                                      to drain, or for another one to end */
    struct event ev;               /* persistent, edge-triggered, both ways */
};

/* The record for fd (NULL if fd is out of range, or if !create and it
 * was never used). */
GORO_HIDDEN struct goro_pollfd *goro__pollfd(int fd, bool create);
/* A select's descriptor case (select_fd.c) starts here: the record,
 * ready for use, and its generation. */
GORO_HIDDEN int goro__fd_begin(int fd, struct goro_pollfd **pd, uint32_t *gen);
/* Every I/O call: goro__fd_begin, and the number is held until
 * goro__fd_leave: goro_close waits for it before close(2), so the number
 * cannot pass to another file while the call may still use it. */
GORO_HIDDEN int goro__fd_enter(int fd, struct goro_pollfd **pd, uint32_t *gen);
GORO_HIDDEN void goro__fd_leave(struct goro_pollfd *pd);
/* Without the lock, for a call that holds the number across several
 * system calls: the life the call began in is ending (a goro_close or
 * release marked it CLOSING) or over. */
static inline bool goro__fd_let_go(struct goro_pollfd *pd, uint32_t gen)
{
    return atomic_load_explicit(&pd->gen, memory_order_relaxed) != gen ||
           atomic_load(&pd->state_hint) == PD_CLOSING;
}
/* fd is a socket the kernel just made, non-blocking: drop stale state. */
GORO_HIDDEN void goro__fd_new(int fd);
/* Waits until pd is ready for one of events (GORO_READABLE and/or
 * GORO_WRITABLE): the ones seen, or -EBADF (closed), -ETIMEDOUT,
 * -ECANCELED. An edge is consumed: the caller retries its call until
 * EAGAIN before it waits again. */
GORO_HIDDEN int goro__fd_wait(struct goro_pollfd *pd, uint32_t gen, int events,
                              int64_t deadline);
/* For a select's descriptor case (select_fd.c), before it takes any lock:
 * registers pd with a poller if it is not yet, so that its edges come.
 * 0, or -EBADF if the descriptor was let go since gen, or why it could
 * not be registered. */
GORO_HIDDEN int goro__fd_arm(struct goro_pollfd *pd, uint32_t gen);
/* Under pd->lock, for a select's descriptor case: -EBADF if the
 * descriptor was let go since gen, events for one that never waits (a
 * regular file), else 0: the select asks poll(2) for the level, under the
 * same lock hold in which it queues its waiter on pd->rq / pd->wq, so an
 * edge after that poll wakes it. The remembered edges are left to the I/O
 * calls. */
GORO_HIDDEN int goro__fd_check_locked(struct goro_pollfd *pd, uint32_t gen, int events);
/* Under pd->lock, pd REGISTERED at the generation the caller began with
 * (goro__fd_check_locked said 0): an edge woke a select's case on dir,
 * and the select reads or writes nothing itself. The edge goes on, to the
 * next waiter in dir - returned, to be made runnable once the lock is
 * dropped - or into the remembered flag (for an I/O call that saw EAGAIN
 * just before the edge and has not queued yet). */
GORO_HIDDEN struct goro *goro__fd_edge_again_locked(struct goro_pollfd *pd, int dir);
/* A woken waiter succeeded: the next one in dir tries its luck too. */
GORO_HIDDEN void goro__fd_pass(struct goro_pollfd *pd, int dir);
/* goro_fd_release: ends the number's life in goro (waiters wake with
 * EBADF, calls under way are waited for) and leaves it open. 0, or
 * -EBADF if a goro_close of it is under way. */
GORO_HIDDEN int goro__fd_forget(int fd);
/* goro_close: the same, then close(2); its result. */
GORO_HIDDEN int goro__fd_close(int fd);
GORO_HIDDEN void goro__netpoll_forget_all(void);

#endif
