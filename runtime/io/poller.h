/* io/: descriptors, the poller and signals - everything libevent lives
 * here: the event bases, the descriptor records (netpoll.h), the I/O
 * calls (io.c), a select's descriptor cases (select_fd.c) and
 * goro_signal_notify (signal.c). Timers are the scheduler's
 * (sched/timer.c: the heaps, their deadlines and their firing); libevent
 * watches descriptors, and one timerfd per base, the P's alarm, which ends
 * a sleeping poll at the P's first timer.
 *
 * This header is the poller contract, the only way lower layers reach
 * io/: the scheduler through goro__netpoll, which looks at a P's base and
 * hands back what became runnable, sleeping - when asked - no later than
 * the P's first timer; wait/'s select through goro__select_fds. Calls
 * sched/ (park, ready, the first timer's deadline), wait/ (waiter queues;
 * channels, for signals) and base/; upward, the first use that starts the
 * runtime and the signal handlers' chaining (debug/).
 *
 * layer: io - descriptors, the poller and signals: all of libevent
 * may call: wait, sched, base
 * uses: start, reports, fatal, rings
 * contract poller for sched: goro__netpoll goro__netpoll_break
 *     goro__netpoll_looking goro__netpoll_init goro__netpoll_fini goro__netpoll_forget_all
 * contract select-fd for wait: goro__select_fds
 * contract signals for debug: goro__signal_subscribers
 * contract nosigpipe for net: goro__without_sigpipe
 */
#ifndef GORO_IO_POLLER_H
#define GORO_IO_POLLER_H

#include <poll.h>

#include "internal.h"

/* netpoll.c: the poller. The scheduler's only way in is goro__netpoll,
 * which hands back the coroutines a look at one P's event base made
 * runnable; everything libevent (the bases, the descriptor records, the
 * alarm that ends a sleeping poll) stays behind it. Every descriptor is
 * registered in P 0's base (GORO_NETPOLL_FDS_P): one M asleep there
 * watches them all, and a burst of readiness wakes one thread. The other
 * Ps' bases hold only their alarm and break event. */
#define GORO_NETPOLL_FDS_P (&goro__sched.procs[0])
/* From an event callback, inside goro__netpoll's loop: g (already
 * claimed) joins that poll's result. */
GORO_HIDDEN void goro__ready_polled(struct goro *g);
/* For what a look finds outside libevent's callbacks too (file/'s rings,
 * reaped at every look and by their own callers): g (already claimed)
 * joins the look's result when one runs on this thread - inject_polled in
 * sched/ is the one place a poll's result is queued, within the run
 * queue's room - else it is made runnable as any wake-up (goro__ready). */
GORO_HIDDEN void goro__ready_seen(struct goro *g);
/* io.c: fn(arg), a write-like call of want bytes, with the SIGPIPE it may
 * raise in this thread blocked and taken off again (goro promises -EPIPE,
 * never the signal): for calls with no MSG_NOSIGNAL, such as sendfile(2).
 * errno is fn's. */
GORO_HIDDEN ssize_t goro__without_sigpipe(ssize_t (*fn)(void *), void *arg, size_t want);
GORO_HIDDEN int goro__netpoll_init(struct goro_p *p);
GORO_HIDDEN void goro__netpoll_fini(struct goro_p *p);
/* block: as m's way to sleep; returns at once unless m->note still reads
 * GORO_NOTE_SLEEPING once the base is m's to loop. room: at most this many
 * coroutines are made runnable (at least one); the base keeps the rest. */
#define GORO_NOTE_SLEEPING 2
/* Looks at p's base once and puts what became runnable in *out (at most
 * room; the rest stay for the next look); returns out->n. sleep_note NULL:
 * never waits. Else it is the caller's note, and the poll sleeps until an
 * event, goro__netpoll_break(p) or sleeper's first timer
 * (goro__timers_first, read once the poll owns the base) - unless the note
 * no longer reads GORO_NOTE_SLEEPING by then (a wake already sent is not
 * lost) - or returns GORO_NETPOLL_TAKEN at once: another M sleeps in p's
 * base, and watches it. sleeper is the caller's own P (NULL: sysmon): the
 * look first flushes that P's file ring, or every ring for sysmon. */
#define GORO_NETPOLL_TAKEN (-1)
GORO_HIDDEN int goro__netpoll(struct goro_p *p, struct goro_p *sleeper,
                              _Atomic uint32_t *sleep_note, int room, struct goro_polled *out);
GORO_HIDDEN void goro__netpoll_break(struct goro_p *p);
/* Another thread looks at p's base without sleeping in it: what it finds
 * is queued within microseconds. */
GORO_HIDDEN bool goro__netpoll_looking(struct goro_p *p);
GORO_HIDDEN void goro__netpoll_forget_all(void);
extern GORO_HIDDEN _Atomic int goro__io_used;

/* select_fd.c: a select's descriptor cases (GORO_FD_READ / _WRITE), for
 * wait/chan.c - the select's one way into io/. The select owns the
 * memory (struct goro_select_fds and its arrays, n entries each) and
 * drives it through goro__select_fds, step by step:
 *   PREPARE  before any lock: each descriptor case's record, registered
 *            with a poller so that its edges come, or its error (fc[i]);
 *            the distinct records in lock order (pds, npds). Returns how
 *            many descriptor cases can ever be ready.
 *   LOCK     after the select's channel locks: every record's lock but
 *            skip's, in descriptor order. UNLOCK: the same, in reverse.
 *   LOOK     under the locks: each descriptor case's result now, into
 *            fc[i].ready: its readiness bit, a negative errno, or 0.
 *   WOKEN    the waiter of case i was completed by an edge, and the
 *            select holds no lock: its result, or 0 if the descriptor is
 *            not ready any more (the select starts again). A descriptor
 *            whose life ended meanwhile (goro_close) says -EBADF.
 * A live case's waiter goes on fc[i].q, guarded by the lock of fc[i].pd
 * (its object). Nothing in s is written after PREPARE but by LOOK. */
struct goro_pollfd;
struct goro_waitq;
struct goro_fd_case {
    int fd;                        /* *elem, read once; < 0: never ready */
    int err;                       /* the case's result at once (-EBADF...) */
    struct goro_pollfd *pd;        /* NULL: no record (switched off, or err) */
    uint32_t gen;                  /* the record's generation at PREPARE */
    struct goro_waitq *q;          /* where its waiter queues (with pd) */
    int ready;                     /* LOOK's answer */
};
struct goro_select_fds {
    const goro_case_t *cases;
    int n;
    struct goro_fd_case *fc;       /* [n]: descriptor cases' entries only */
    struct pollfd *level;          /* [n]: LOOK's poll(2) */
    struct goro_pollfd **pds;      /* [n]: the distinct records, in lock order */
    int npds;
};
enum goro_select_fds_step {
    GORO_SELECT_FDS_PREPARE, GORO_SELECT_FDS_LOCK, GORO_SELECT_FDS_UNLOCK,
    GORO_SELECT_FDS_LOOK, GORO_SELECT_FDS_WOKEN,
};
/* i: the case, for WOKEN; skip: the record not to touch, for LOCK and
 * UNLOCK (a partner completed the select's wait on it). */
GORO_HIDDEN int goro__select_fds(struct goro_select_fds *s, enum goro_select_fds_step step,
                                 int i, const void *skip);

/* netpoll.c, for signal.c and file/'s rings (their eventfds): the
 * descriptors' base (GORO_NETPOLL_FDS_P) of the running runtime watches fd
 * for reading; cb runs on a runtime thread's g0 and must not switch. The
 * caller ends the watch with event_del before the base goes at shutdown. */
GORO_HIDDEN int goro__netpoll_watch(struct event *ev, int fd,
                                    void (*cb)(int, short, void *), void *arg);

/* signal.c: goro_shutdown ends every subscription once the runtime's
 * threads are gone. */
GORO_HIDDEN void goro__signal_end_all(void);
/* signal.c: the number of channels subscribed to signals now (for the
 * deadlock check: a signal may come any time and wake a receiver). */
GORO_HIDDEN int goro__signal_subscribers(void);

#endif
