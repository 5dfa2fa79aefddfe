/*
 * The poller: one libevent base per P, and the table of descriptors that
 * coroutines wait on.
 *
 * A descriptor is registered once, the first time a call on it would
 * block, with P 0's base, which holds every descriptor (poller.h): one
 * persistent, edge-triggered event for both directions. Its readiness is remembered in
 * the descriptor record (rready / wready) when nobody waits, so an edge is
 * never lost; waiters queue per direction and an edge wakes the first one.
 * A woken waiter that then succeeds passes the turn to the next (io.c),
 * because one edge may stand for more than one waiter's worth of data.
 *
 * Timers are not libevent's (sched/timer.c): a base has one timerfd, the
 * P's alarm, set only when an M is about to sleep in it until a deadline
 * earlier than the one it is set for - not on every loop, as libevent's
 * precise timers would.
 *
 * Bases are looped only by whoever holds the P's poll_lock: any busy M
 * looks at the descriptors' base without blocking (every POLL_INTERVAL
 * slices and when it runs out of work), as an idle M looking for work
 * does; an M going to sleep blocks in it, unless another M already sleeps
 * there (poll_sleeper) - then it sleeps on its note's futex (sched/idle.c)
 * and the one sleeper watches every descriptor. Event
 * callbacks run on that M's g0 and never switch: they claim waits and
 * collect the coroutines in m->polled, which the scheduler then queues.
 *
 * Closed and reused descriptors: goro_close ends the number's life in
 * goro before close(2) frees it, so that nothing of the old file reaches
 * the next one (see "the end of a life" below).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/thread.h>

#include "internal.h"
#include "io/poller.h"
#include "debug/debug.h"
#include "sched/sched.h"
#include "runtime.h"
#include "io/netpoll.h"
#include "file/file.h"
#include "wait/waitq.h"

GORO_HIDDEN _Atomic int goro__io_used;

/* ---- event bases ---- */

static __thread sigjmp_buf *making_base;   /* set while this thread makes one */

static void libevent_log(int severity, const char *msg)
{
    /* libevent reports recoverable conditions (a failed epoll_ctl that the
     * caller sees as an error anyway) as warnings: only errors matter. A
     * base that cannot be made is reported by goro__netpoll_init. */
    if (severity >= EVENT_LOG_ERR && !making_base)
        fprintf(stderr, "goro: libevent: %s\n", msg);
}

static void libevent_setup(void)
{
    event_set_log_callback(libevent_log);
    /* Bases are touched from every worker (timers deleted, fds registered
     * and woken across threads): libevent must lock them and be able to
     * wake a thread sleeping in one. */
    evthread_use_pthreads();
}

static void break_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;                      /* its job was to end the loop */
}

/* ---- making a base without letting libevent exit ----
 * libevent 2.1 treats one failure of event_base_new_with_config as fatal:
 * when the epoll backend cannot make its signal pipe (evsig_init_, out of
 * descriptors), it calls exit(1), or the fatal callback if one is set and
 * exit(1) after it returns. Every other failure there (epoll_create1, the
 * wake-up eventfd, memory) returns NULL. A library must not end its host,
 * so goro first checks that a base's descriptors are to be had, and keeps
 * a fatal callback set while it makes a base, which jumps back out of
 * libevent on this thread. libevent has no getter for the callback: the
 * default (none) is what is restored. */

/* Descriptors a base takes: the epoll fd, the signal pipe (two), the
 * eventfd that wakes it, and the P's alarm (a timerfd). */
#define BASE_FDS 5
/* libevent's code for a failed internal assertion: that still aborts. */
#define LIBEVENT_ERR_ABORT ((int)0xdeaddead)

static __thread int fatal_errno;

static void libevent_fatal(int code)
{
    if (making_base && code != LIBEVENT_ERR_ABORT) {
        fatal_errno = errno;        /* what the failed call said */
        siglongjmp(*making_base, 1);
    }
    /* Another thread's, or a broken assertion: as if no callback were set. */
    if (code == LIBEVENT_ERR_ABORT)
        abort();
}                                   /* libevent calls exit(code) next */

/* 0 if n descriptors (new open files, not dups: ENFILE counts files) can
 * be opened now, else what opening one said. */
static int fds_available(int n)
{
    int fds[BASE_FDS], got = 0, err = 0;
    while (got < n && got < BASE_FDS && !err) {
        fds[got] = eventfd(0, EFD_CLOEXEC);
        if (fds[got] < 0)
            err = -errno;
        else
            got++;
    }
    while (got > 0)
        close(fds[--got]);
    return err;
}

/* event_base_new_with_config, or NULL and *err. A base abandoned by the
 * jump leaks its epoll fd, its eventfd and some memory: only when another
 * thread took the last descriptors after fds_available looked. */
static struct event_base *base_new(struct event_config *cfg, int *err)
{
    sigjmp_buf back;
    struct event_base *volatile base = NULL;
    *err = 0;
    if (sigsetjmp(back, 0) == 0) {
        making_base = &back;
        event_set_fatal_callback(libevent_fatal);
        base = event_base_new_with_config(cfg);
    } else {
        *err = fatal_errno > 0 ? -fatal_errno : -EMFILE;
    }
    event_set_fatal_callback(NULL);
    making_base = NULL;
    if (!base && !*err) {
        /* libevent does not say why: descriptors, or else memory */
        *err = fds_available(BASE_FDS);
        if (*err != -EMFILE && *err != -ENFILE)
            *err = -ENOMEM;
    }
    return base;
}

/* One line naming the cause and what to do about it. */
static void report_start_failure(int id, int err)
{
    const char *fix = "raise RLIMIT_NOFILE (ulimit -n) or close descriptors";
    if (err == -EMFILE)
        fprintf(stderr, "goro: cannot start: out of file descriptors (EMFILE) creating the "
                "event base of worker %d; %s\n", id, fix);
    else if (err == -ENFILE)
        fprintf(stderr, "goro: cannot start: the system is out of open files (ENFILE) "
                "creating the event base of worker %d; close descriptors or raise "
                "fs.file-max\n", id);
    else
        fprintf(stderr, "goro: cannot start: %s creating the event base of worker %d\n",
                strerror(-err), id);
}

/* The alarm went off: the poll that runs this returns (EVLOOP_ONCE), and
 * its M looks at the timers. Read, so that the descriptor is quiet. */
static void alarm_rang(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct goro_p *p = arg;
    uint64_t expirations;
    while (read(fd, &expirations, sizeof expirations) < 0 && errno == EINTR)
        ;
    p->alarm_at = INT64_MAX;
}

static int alarm_init(struct goro_p *p)
{
    p->alarm_at = INT64_MAX;
    p->alarm_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (p->alarm_fd < 0)
        return -errno;
    p->alarm_ev = event_new(p->base, p->alarm_fd, EV_READ | EV_PERSIST, alarm_rang, p);
    if (!p->alarm_ev || event_add(p->alarm_ev, NULL) < 0)
        return -ENOMEM;
    return 0;
}

/* Sets the alarm for until, unless it goes off no later already (one that
 * rings early only makes a sleeper look and sleep again). Under poll_lock. */
static void alarm_set(struct goro_p *p, int64_t until)
{
    if (until >= p->alarm_at)
        return;
    struct itimerspec when = { .it_value = { (time_t)(until / GORO_SEC),
                                             (long)(until % GORO_SEC) } };
    if (timerfd_settime(p->alarm_fd, TFD_TIMER_ABSTIME, &when, NULL) == 0)
        p->alarm_at = until;
}

/* The virtual clock (sched.c, "the virtual clock"): the alarm is on the
 * real one, at most VIRTUAL_LOOK away - the sleeper looks again for a jump
 * it may make (a thread outside may have begun a timed wait). */
#define VIRTUAL_LOOK GORO_MSEC

static int64_t virtual_alarm(int64_t until)
{
    int64_t look = goro__real_now() + VIRTUAL_LOOK;
    if (until == INT64_MAX)
        return look;
    int64_t real = goro__clock_real_of(until);
    return real < look ? real : look;
}

static int base_init(struct goro_p *p)
{
    p->alarm_fd = -1;
    struct event_config *cfg = event_config_new();
    if (!cfg)
        return -ENOMEM;
    /* No cached time, because events are added from threads other than
     * the one looping the base, whose cache is stale; ignore EVENT_*
     * environment settings meant for other programs. Not PRECISE_TIMER:
     * the base has no timers (the alarm is ours), and that flag costs a
     * timerfd_settime on every loop. */
    event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV | EVENT_BASE_FLAG_NO_CACHE_TIME);
    event_config_require_features(cfg, EV_FEATURE_ET);
    int err = fds_available(BASE_FDS);
    if (!err)
        p->base = base_new(cfg, &err);
    event_config_free(cfg);
    if (err)
        return err;
    p->break_ev = event_new(p->base, -1, 0, break_event, NULL);
    err = p->break_ev ? alarm_init(p) : -ENOMEM;
    if (err)
        goro__netpoll_fini(p);
    return err;
}

/* Runs on the thread calling goro_start, before any worker exists. */
int goro__netpoll_init(struct goro_p *p)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, libevent_setup);
    int err = base_init(p);
    if (err)
        report_start_failure(p->id, err);
    return err;
}

void goro__netpoll_fini(struct goro_p *p)
{
    if (p->alarm_ev)
        event_free(p->alarm_ev);
    if (p->alarm_fd >= 0)
        close(p->alarm_fd);
    if (p->break_ev)
        event_free(p->break_ev);
    if (p->base)
        event_base_free(p->base);
    p->alarm_ev = p->break_ev = NULL;
    p->alarm_fd = -1;
    p->base = NULL;
}

/* The loop this thread runs: where its callbacks put what they ready. */
struct poll_run {
    struct goro_polled *out;
    int room;                       /* out->n at which the loop stops */
    struct event_base *base;
};
static __thread struct poll_run *this_poll;

/* Takes p's poll_lock for a sleeper: false if another M sleeps in the
 * base (it watches it: the caller sleeps elsewhere). A non-blocking
 * poller holds the lock for one look: wait for it. */
static bool sleep_lock(struct goro_p *p)
{
    while (atomic_exchange_explicit(&p->poll_lock, 1, memory_order_acquire)) {
        if (atomic_load_explicit(&p->poll_sleeper, memory_order_acquire))
            return false;
        cpu_relax();
    }
    return true;
}

/* Only the holder of poll_lock may loop a base; a sleeper waits for a
 * non-blocking poller to finish, others give up. */
int goro__netpoll(struct goro_p *p, struct goro_p *sleeper, _Atomic uint32_t *sleep_note,
                  int room, struct goro_polled *out)
{
    *out = (struct goro_polled){ NULL, NULL, 0 };
    bool block = sleep_note != NULL;
    struct poll_run run = { out, room > 0 ? room : 1, p->base };
    /* The caller's own file ring (sysmon: every ring) is flushed at every
     * look, also by an M that then sleeps elsewhere; only its own, or the
     * other worker runs dry and sleeps (file/ring.c). What completed joins
     * this look's result (goro__ready_seen): work found, so no sleep. */
    this_poll = &run;
    if (sleeper)
        goro__file_flush(sleeper);
    else
        goro__file_flush_all();
    this_poll = NULL;
    /* Work found: a sleeper does not sleep. A non-blocking look still
     * looks at the descriptors (with room left): rings that always have
     * completions must not keep a socket's readiness unseen. */
    if (out->n && (block || out->n >= run.room))
        return out->n;
    if (atomic_exchange_explicit(&p->poll_lock, 1, memory_order_acquire)) {
        if (!block)
            return out->n;
        if (!sleep_lock(p))
            return GORO_NETPOLL_TAKEN;
    }
    /* A blocking loop is how an M sleeps (sched/idle.c, goro__note_sleep). A waker
     * sets the note, then activates break_ev; a non-blocking poller that
     * held the lock just now may have run break_ev's callback instead of
     * us. With the lock held only we can run it from here on, so the note
     * read now decides: already notified, do not block. */
    if (block && atomic_load_explicit(sleep_note, memory_order_acquire) != GORO_NOTE_SLEEPING) {
        atomic_store_explicit(&p->poll_lock, 0, memory_order_release);
        return 0;
    }
    /* The sleep ends by the P's first timer: read now that we own the base,
     * so that a timer started meanwhile breaks this very poll. */
    if (block) {
        int64_t until = goro__timers_first(sleeper);
        if (until != INT64_MAX && until <= goro__now())
            block = false;          /* due already: the caller runs it */
        else if (goro__clock_virtual())
            alarm_set(p, virtual_alarm(until));
        else if (until != INT64_MAX)
            alarm_set(p, until);
    }
    this_poll = &run;
    atomic_fetch_add_explicit(&p->npolls, 1, memory_order_relaxed);
    if (block)
        atomic_store_explicit(&p->poll_sleeper, 1, memory_order_release);
    /* NO_EXIT_ON_EMPTY: a base with nothing registered must still block
     * (until goro__netpoll_break), not return at once. */
    event_base_loop(p->base, block ? EVLOOP_ONCE | EVLOOP_NO_EXIT_ON_EMPTY : EVLOOP_NONBLOCK);
    this_poll = NULL;
    if (block)
        atomic_store_explicit(&p->poll_sleeper, 0, memory_order_relaxed);
    atomic_store_explicit(&p->poll_lock, 0, memory_order_release);
    return out->n;
}

bool goro__netpoll_looking(struct goro_p *p)
{
    return atomic_load_explicit(&p->poll_lock, memory_order_relaxed) &&
           !atomic_load_explicit(&p->poll_sleeper, memory_order_relaxed);
}

/* Ends a blocking goro__netpoll on p (or the next one, if none runs). */
void goro__netpoll_break(struct goro_p *p)
{
    event_active(p->break_ev, EV_READ, 0);
}

/* A descriptor the runtime watches for itself (signal.c), on base 0 for
 * the runtime's life: level-triggered, until the base goes at shutdown.
 * cb runs on the g0 of whichever thread polls base 0 (its owner, an idle
 * M, sysmon) and must not switch. */
int goro__netpoll_watch(struct event *ev, int fd, void (*cb)(int, short, void *), void *arg)
{
    if (event_assign(ev, GORO_NETPOLL_FDS_P->base, fd, EV_READ | EV_PERSIST, cb, arg) < 0)
        return -EINVAL;
    errno = 0;
    if (event_add(ev, NULL) < 0)
        return errno ? -errno : -ENOMEM;
    /* Busy Ps look at the descriptors' base only when somebody uses I/O. */
    atomic_store_explicit(&goro__io_used, 1, memory_order_relaxed);
    return 0;
}

void goro__ready_polled(struct goro *g)
{
    if (g->flags & GORO_F_EXTERNAL) {
        goro__ready(g);             /* a thread: its futex */
        return;
    }
    struct poll_run *run = this_poll;   /* callbacks run only inside goro__netpoll */
    struct goro_polled *out = run->out;
    GORO_TRACE(GORO_TEV_IO, g->id, 0, 0, 0, 0);
    atomic_store_explicit(&g->state, GORO_S_RUNNABLE, memory_order_relaxed);
    /* In the order the loop found them: timers by deadline. */
    goro__chain_append(&out->head, &out->tail, g);
    /* Enough for the run queue's free room: the loop stops after this
     * callback, and the rest stay active in the base, in the order found
     * (timers by deadline), for the next look. Spilling them to the global
     * queue instead would put the earliest deadlines behind later ones. */
    if (++out->n == run->room)
        event_base_loopbreak(run->base);
}

void goro__ready_seen(struct goro *g)
{
    if (this_poll)
        goro__ready_polled(g);      /* the look's result: its caller queues it */
    else
        goro__ready(g);
}

/* ---- the descriptor table ----
 * Two levels, chunks allocated on first use, never freed while the process
 * lives (a record must stay valid for callbacks and late callers). */

#define PD_CHUNK 256
#define PD_MAX (1 << 24)
static struct goro_pollfd *_Atomic pd_chunks[PD_MAX / PD_CHUNK];

struct goro_pollfd *goro__pollfd(int fd, bool create)
{
    if (fd < 0 || fd >= PD_MAX)
        return NULL;
    _Atomic(struct goro_pollfd *) *slot = &pd_chunks[fd / PD_CHUNK];
    struct goro_pollfd *chunk = atomic_load_explicit(slot, memory_order_acquire);
    if (!chunk) {
        if (!create)
            return NULL;
        struct goro_pollfd *fresh = calloc(PD_CHUNK, sizeof *fresh);
        if (!fresh)
            return NULL;
        for (int i = 0; i < PD_CHUNK; i++) {
            fresh[i].fd = fd / PD_CHUNK * PD_CHUNK + i;
            goro__lock_rank(&fresh[i].lock, GORO_RANK_RECORD);
        }
        if (atomic_compare_exchange_strong(slot, &chunk, fresh))
            chunk = fresh;
        else
            free(fresh);            /* another thread won */
    }
    return &chunk[fd % PD_CHUNK];
}

/* ---- readiness ---- */

/* Under pd->lock: one waiter of q, or the flag, takes the edge. */
static struct goro *edge_locked(struct goro_waitq *q, bool *ready)
{
    struct goro_waiter *w = goro__waitq_pop(q);
    if (!w) {
        *ready = true;
        return NULL;
    }
    w->success = true;
    return w->g;
}

static void fd_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    struct goro_pollfd *pd = arg;
    struct goro *r = NULL, *w = NULL;
    goro__lock(&pd->lock);
    /* record: waiters only on a registered record (netpoll.h) */
    GORO_ASSERT(pd->state == PD_REGISTERED || (!pd->rq.head && !pd->wq.head));
    if (pd->state == PD_REGISTERED) {
        if (what & EV_READ)
            r = edge_locked(&pd->rq, &pd->rready);
        if (what & EV_WRITE)
            w = edge_locked(&pd->wq, &pd->wready);
    }
    goro__unlock(&pd->lock);
    if (r)
        goro__ready_polled(r);
    if (w)
        goro__ready_polled(w);
}

/* ---- using a descriptor ---- */

/* Under pd->lock: the number refers to another open file now (or to none,
 * for PD_UNKNOWN). Every fact about the old one goes: a socket that
 * inherited "not a socket" from a pipe was written with write(2), and a
 * vanished peer killed the program with SIGPIPE. The generation moves on
 * before the state is published: whoever reads this state without the
 * lock (acquire) and the generation after it has a generation of this
 * life or a later one, never an earlier one. */
static void new_life_locked(struct goro_pollfd *pd, int state, bool socket)
{
    /* record: a life begins on a number without one, and ends only
     * through CLOSING (netpoll.h), with nobody waiting */
    GORO_ASSERT(pd->state == PD_UNKNOWN ? state == PD_NONBLOCK || state == PD_UNPOLLABLE
                                        : pd->state == PD_CLOSING && state == PD_UNKNOWN);
    GORO_ASSERT(!pd->rq.head && !pd->wq.head);
    atomic_fetch_add_explicit(&pd->gen, 1, memory_order_relaxed);
    pd->state = state;
    pd->rready = pd->wready = false;
    atomic_store_explicit(&pd->is_socket, socket, memory_order_relaxed);
    atomic_store_explicit(&pd->state_hint, state, memory_order_release);
}

/* Under pd->lock, first use since it was (re)opened: make it non-blocking
 * and find out what it is: a socket, or something that cannot be polled
 * at all (regular files). */
static int prepare_locked(struct goro_pollfd *pd)
{
    int flags = fcntl(pd->fd, F_GETFL);
    if (flags < 0)
        return -errno;
    if (!(flags & O_NONBLOCK) && fcntl(pd->fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return -errno;
    struct stat st;
    if (fstat(pd->fd, &st) < 0)
        return -errno;
    bool pollable = !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISBLK(st.st_mode);
    new_life_locked(pd, pollable ? PD_NONBLOCK : PD_UNPOLLABLE, S_ISSOCK(st.st_mode));
    return 0;
}

/* How a life ends ("the end of a life", below). */
enum pd_end {
    END_CLOSE,                     /* goro_close */
    END_RELEASE,                   /* goro_fd_release: the caller closes it */
    END_LOST,                      /* no longer open, or shutting down */
};

static int retire(struct goro_pollfd *pd, enum pd_end how);

static int begin(int fd, struct goro_pollfd **out, uint32_t *gen, bool hold)
{
    if (fd < 0 || fd >= PD_MAX)
        return -EBADF;
    /* After a fork the records and bases are the parent's (fork.c): a
     * record may call a reused number non-blocking, and a wait would
     * register with the parent's epoll instance. */
    if (goro__forked())
        return goro__forked_error();
    if (!goro__m()) {
        int err = goro__ensure_started();   /* a foreign thread needs the bases */
        if (err)
            return err;
    }
    struct goro_pollfd *pd = goro__pollfd(fd, true);
    if (!pd)
        return -ENOMEM;
    /* The hold is counted before the state is read: a goro_close that
     * marks the record CLOSING after this read sees the count (both
     * seq_cst; retire). */
    if (hold)
        atomic_fetch_add(&pd->ops, 1);
    int err = 0;
    uint32_t g;
    if (atomic_load(&pd->state_hint) < PD_NONBLOCK) {
        /* Under the lock CLOSING means the old file is still open: the
         * caller's number is that file's (a fresh file cannot have it
         * yet: close(2) runs under this lock, and the record leaves
         * CLOSING in the same hold). */
        goro__lock(&pd->lock);
        err = pd->state == PD_UNKNOWN ? prepare_locked(pd) : 0;
        if (pd->state == PD_CLOSING)
            err = -EBADF;
        atomic_store_explicit(&pd->state_hint, pd->state, memory_order_release);
        g = atomic_load_explicit(&pd->gen, memory_order_relaxed);
        goro__unlock(&pd->lock);
    } else {
        g = atomic_load_explicit(&pd->gen, memory_order_acquire);
    }
    if (err) {
        if (hold)
            goro__fd_leave(pd);
        return err;
    }
    *gen = g;
    *out = pd;
    return 0;
}

int goro__fd_begin(int fd, struct goro_pollfd **out, uint32_t *gen)
{
    return begin(fd, out, gen, false);
}

int goro__fd_enter(int fd, struct goro_pollfd **out, uint32_t *gen)
{
    return begin(fd, out, gen, true);
}

static void wake_retirers(struct goro_pollfd *pd);

void goro__fd_leave(struct goro_pollfd *pd)
{
    /* seq_cst, paired with retire: either the retirer's look at ops sees
     * this decrement, or this look sees its CLOSING and wakes it. */
    uint32_t was = atomic_fetch_sub(&pd->ops, 1);
    GORO_ASSERT(was > 0);
    if (was == 1 && atomic_load(&pd->state_hint) == PD_CLOSING)
        wake_retirers(pd);
}

void goro__fd_new(int fd)
{
    /* A descriptor the kernel just handed out cannot be registered any
     * more: a record saying otherwise is left over from a close(2) that
     * bypassed goro_close. Forget it, then note what we know. */
    struct goro_pollfd *pd = goro__pollfd(fd, true);
    if (!pd || goro__forked())      /* the records are the parent's (fork.c) */
        return;
    if (atomic_load_explicit(&pd->state_hint, memory_order_acquire) != PD_UNKNOWN)
        retire(pd, END_LOST);
    goro__lock(&pd->lock);
    if (pd->state == PD_UNKNOWN)    /* else a first call prepared it meanwhile */
        new_life_locked(pd, PD_NONBLOCK, true);     /* made with SOCK_NONBLOCK */
    goro__unlock(&pd->lock);
}

/* Under pd->lock: registers pd with the descriptors' base, P 0's
 * (poller.h: one base for every descriptor, so that one sleeping M
 * watches them all). */
static int register_locked(struct goro_pollfd *pd)
{
    GORO_ASSERT(pd->state == PD_NONBLOCK);  /* record: NONBLOCK -> REGISTERED */
    struct goro_p *p = &goro__sched.procs[0];
    if (event_assign(&pd->ev, p->base, pd->fd, EV_READ | EV_WRITE | EV_PERSIST | EV_ET,
                     fd_event, pd) < 0)
        return -EINVAL;
    errno = 0;
    if (event_add(&pd->ev, NULL) < 0)
        return errno ? -errno : -EBADF;
    pd->state = PD_REGISTERED;
    atomic_store_explicit(&pd->state_hint, PD_REGISTERED, memory_order_release);
    atomic_store_explicit(&goro__io_used, 1, memory_order_relaxed);
    return 0;
}

static void io_unlock(void *arg)
{
    goro__unlock(&((struct goro_pollfd *)arg)->lock);
}

/* Under pd->lock: the remembered edges among events, consumed. */
static int take_ready_locked(struct goro_pollfd *pd, int events)
{
    int seen = 0;
    if ((events & GORO_READABLE) && pd->rready) {
        pd->rready = false;
        seen |= GORO_READABLE;
    }
    if ((events & GORO_WRITABLE) && pd->wready) {
        pd->wready = false;
        seen |= GORO_WRITABLE;
    }
    return seen;
}

int goro__fd_wait(struct goro_pollfd *pd, uint32_t gen, int events, int64_t deadline)
{
    goro__lock(&pd->lock);
    if (atomic_load_explicit(&pd->gen, memory_order_relaxed) != gen ||
        pd->state == PD_CLOSING || pd->state == PD_UNKNOWN) {
        goro__unlock(&pd->lock);
        return -EBADF;
    }
    int seen = pd->state == PD_UNPOLLABLE ? events : take_ready_locked(pd, events);
    if (seen) {
        goro__unlock(&pd->lock);
        return seen;
    }
    int err = pd->state == PD_REGISTERED ? 0 : register_locked(pd);
    if (!err)
        err = goro__wait_check(deadline);
    if (err) {
        goro__unlock(&pd->lock);
        return goro__wait_refused(err);
    }
    /* record: waiters only on a registered record (netpoll.h) */
    GORO_ASSERT(pd->state == PD_REGISTERED);
    /* One waiter per direction, like a select: the first edge claims. */
    struct goro *self = goro__waiter_self();
    struct goro_waiter r = { .g = self, .tag = GORO_READABLE };
    struct goro_waiter w = { .g = self, .tag = GORO_WRITABLE };
    if (events & GORO_READABLE)
        goro__waitq_push(&pd->rq, &r);
    if (events & GORO_WRITABLE)
        goro__waitq_push(&pd->wq, &w);
    struct goro_park how = { .why = GORO_W_IO, .obj = pd, .unlock = io_unlock, .arg = pd,
                             .deadline = deadline, .real = true };
    int outcome = goro__park(&how);
    int fired = self->wake_tag;
    if (outcome != GORO_WAKE_DONE || events == (GORO_READABLE | GORO_WRITABLE)) {
        goro__lock(&pd->lock);
        goro__waitq_remove(&pd->rq, &r);
        goro__waitq_remove(&pd->wq, &w);
        goro__unlock(&pd->lock);
    }
    if (outcome != GORO_WAKE_DONE)
        return goro__wake_error(outcome);
    bool ok = fired == GORO_READABLE ? r.success : w.success;
    return ok ? fired : -EBADF;
}

/* ---- for a select's descriptor cases (select_fd.c) ---- */

int goro__fd_arm(struct goro_pollfd *pd, uint32_t gen)
{
    /* Registered already (the common case): nothing to do. Should it be
     * closing meanwhile, goro__fd_check_locked sees that under the lock. */
    int hint = atomic_load_explicit(&pd->state_hint, memory_order_acquire);
    if ((hint == PD_REGISTERED || hint == PD_UNPOLLABLE) &&
        atomic_load_explicit(&pd->gen, memory_order_relaxed) == gen)
        return 0;
    goro__lock(&pd->lock);
    int err = 0;
    if (atomic_load_explicit(&pd->gen, memory_order_relaxed) != gen ||
        pd->state == PD_CLOSING || pd->state == PD_UNKNOWN)
        err = -EBADF;
    else if (pd->state == PD_NONBLOCK)
        err = register_locked(pd);
    if (err == -EPERM) {
        /* epoll takes no such file (/dev/null, say): it is always ready,
         * like a regular file, and a select case on it fires at once. */
        GORO_ASSERT(pd->state == PD_NONBLOCK && !pd->rq.head && !pd->wq.head);
        pd->state = PD_UNPOLLABLE;
        atomic_store_explicit(&pd->state_hint, PD_UNPOLLABLE, memory_order_release);
        err = 0;
    }
    goro__unlock(&pd->lock);
    return err;
}

int goro__fd_check_locked(struct goro_pollfd *pd, uint32_t gen, int events)
{
    if (atomic_load_explicit(&pd->gen, memory_order_relaxed) != gen ||
        (pd->state != PD_REGISTERED && pd->state != PD_UNPOLLABLE))
        return -EBADF;
    return pd->state == PD_UNPOLLABLE ? events : 0;
}

struct goro *goro__fd_edge_again_locked(struct goro_pollfd *pd, int dir)
{
    GORO_ASSERT(pd->state == PD_REGISTERED);    /* record: edges only while registered */
    return edge_locked(dir == GORO_READABLE ? &pd->rq : &pd->wq,
                       dir == GORO_READABLE ? &pd->rready : &pd->wready);
}

void goro__fd_pass(struct goro_pollfd *pd, int dir)
{
    struct goro_waitq *q = dir == GORO_READABLE ? &pd->rq : &pd->wq;
    goro__lock(&pd->lock);
    struct goro_waiter *w = goro__waitq_pop(q);
    if (w)
        w->success = true;
    goro__unlock(&pd->lock);
    if (w)
        goro__ready(w->g);
}

/* ---- the end of a life ----
 * goro_close must leave nothing of the old file to the next one that gets
 * its number, which another thread's open() may do the moment close(2)
 * returns. So everything happens before close(2), and close(2) itself
 * under the record's lock:
 *  1. the record is marked CLOSING and its generation moves on (calls
 *     begun before now fail at their next wait; new ones are refused),
 *     its waiters are taken, to wake with EBADF;
 *  2. its event leaves the base (event_del, which waits for a callback
 *     under way): no edge of the old file can be delivered any more;
 *  3. it waits until no I/O call holds the number (ops, goro__fd_enter to
 *     _leave): a call woken by an edge before step 1 may be just about to
 *     read, and must read the old file, not the next;
 *  4. close(2) and the start of the next life (PD_UNKNOWN), in one hold
 *     of the lock: a call on the number that takes the lock afterwards
 *     finds a fresh record, never CLOSING, and one that found CLOSING
 *     under the lock was refused while the old file was still open.
 * A call that comes for the old file while close(2) runs waits for the
 * lock (on a socket that lingers, as long as close(2) takes).
 * goro_fd_release is the same without close(2). A number that was closed
 * behind goro's back (goro__fd_new) or a shutdown skips step 3: its file
 * is gone already. */

/* Under pd->lock: parks the caller on pd->cq until goro__fd_leave or the
 * end of another retirement wakes it; returns with the lock held. Firm: a
 * close that has begun finishes. */
static void retire_wait_locked(struct goro_pollfd *pd)
{
    struct goro_waiter w = { .g = goro__waiter_self() };
    goro__waitq_wait(&pd->cq, &w, &pd->lock, GORO_W_IO, pd, GORO_FOREVER, true);
    goro__lock(&pd->lock);
}

/* Makes the coroutines (threads) chained through g->next runnable. */
static void wake(struct goro *list)
{
    if (list)                       /* nobody, mostly: leave the run queues alone */
        goro__ready_list(list);
}

static void wake_retirers(struct goro_pollfd *pd)
{
    goro__lock(&pd->lock);
    struct goro *list = goro__waitq_take_all(&pd->cq, true, 0, NULL);
    goro__unlock(&pd->lock);
    wake(list);
}

static int close_fd(int fd)
{
    /* Linux frees the descriptor even when close reports an error: never
     * retry (the number may already belong to someone else). */
    return close(fd) < 0 ? -errno : 0;
}

/* Under pd->lock, step 1: the waiters, chained to be woken (EBADF). */
static struct goro *mark_closing_locked(struct goro_pollfd *pd, enum pd_end how)
{
    atomic_fetch_add_explicit(&pd->gen, 1, memory_order_relaxed);
    pd->state = PD_CLOSING;         /* callbacks and new waits keep off */
    pd->closer = how == END_CLOSE;
    atomic_store(&pd->state_hint, PD_CLOSING);  /* seq_cst: before ops is read */
    pd->rready = pd->wready = false;
    struct goro *list = goro__waitq_take_all(&pd->rq, false, 0,
                                             goro__waitq_take_all(&pd->wq, false, 0, NULL));
    /* record: CLOSING takes every waiter (netpoll.h) */
    GORO_ASSERT(!pd->rq.head && !pd->wq.head);
    return list;
}

static int retire(struct goro_pollfd *pd, enum pd_end how)
{
    goro__lock(&pd->lock);
    while (pd->state == PD_CLOSING) {
        /* Another goro_close will close this file: this one must not
         * close(2) a number that may be someone else's by then. Another
         * release: once it is over, the number is open and plain again. */
        if (pd->closer || how == END_LOST) {
            goro__unlock(&pd->lock);
            return -EBADF;
        }
        retire_wait_locked(pd);
    }
    bool registered = pd->state == PD_REGISTERED;
    /* record: only a live record closes (any but CLOSING -> CLOSING) */
    GORO_ASSERT(pd->state != PD_CLOSING);
    struct goro *waiters = mark_closing_locked(pd, how);
    goro__unlock(&pd->lock);
    /* Without pd->lock: event_del waits for a callback running elsewhere,
     * and that callback takes pd->lock. */
    if (registered)
        event_del(&pd->ev);
    wake(waiters);
    goro__lock(&pd->lock);
    while (how != END_LOST && atomic_load(&pd->ops) != 0)
        retire_wait_locked(pd);
    GORO_ASSERT(pd->state == PD_CLOSING);
    int err = how == END_CLOSE ? close_fd(pd->fd) : 0;
    pd->closer = false;
    new_life_locked(pd, PD_UNKNOWN, false);
    struct goro *next = goro__waitq_take_all(&pd->cq, true, 0, NULL);
    goro__unlock(&pd->lock);
    wake(next);                     /* releases that waited for this one */
    return err;
}

int goro__fd_forget(int fd)
{
    struct goro_pollfd *pd = goro__pollfd(fd, false);
    /* After a fork, event_del would drop the parent's registration from
     * the epoll instance both share (fork.c): leave the record alone. */
    if (!pd || goro__forked())
        return 0;
    return retire(pd, END_RELEASE);
}

int goro__fd_close(int fd)
{
    struct goro_pollfd *pd = goro__pollfd(fd, false);
    if (!pd || goro__forked())
        return close_fd(fd);
    return retire(pd, END_CLOSE);
}

/* At shutdown, before the bases go: every registration is dropped (no
 * coroutine is left to wait; records must not point at freed bases). */
void goro__netpoll_forget_all(void)
{
    for (size_t c = 0; c < PD_MAX / PD_CHUNK; c++) {
        struct goro_pollfd *chunk = atomic_load(&pd_chunks[c]);
        if (!chunk)
            continue;
        for (int i = 0; i < PD_CHUNK; i++)
            if (chunk[i].state != PD_UNKNOWN)
                retire(&chunk[i], END_LOST);
    }
}
