/*
 * Rings: one io_uring per P, made by the first file call that runs on it.
 *
 * Invariants:
 *  1. A ring's queues are touched only under its lock (fr->lk): the
 *     submission queue by whoever queues or submits, the completion queue
 *     by whoever reaps. A call queues its SQE and parks; every look at the
 *     descriptors' base (from the poller: a worker whose run queue is
 *     empty and every POLL_INTERVAL slices, an idle worker before it
 *     sleeps - in the base or on its futex - with goro__file_flush of its
 *     own P's ring; the monitor with goro__file_flush_all) submits what is
 *     queued in one io_uring_enter - cached reads complete right there -
 *     and reaps. A
 *     completion the kernel posts later also shows on the ring's eventfd,
 *     registered on the descriptors' base (io/poller.h), so the worker
 *     asleep there wakes for it. So a completion reaches the scheduler
 *     with no thread woken for it alone, and 32 queued SQEs are submitted
 *     at once by the call that queues the 32nd.
 *  2. A request (struct ring_req) lives in its caller's frame and its
 *     address is the SQE's user_data; the caller returns only once the
 *     request's state reads DONE - after its CQE was reaped, and after the
 *     reaper stopped touching it. So the kernel writes no buffer of a call
 *     that returned, and no reaper writes a frame that is gone.
 *  3. The state word orders completion against parking without a lock, as
 *     the offload pool's does: PENDING -> the waiter (its park's commit,
 *     after it was saved); the reaper swaps in CLAIMING, claims the waiter
 *     it found, then stores DONE. A wait ended by its deadline or by
 *     cancellation takes its record back (waiter -> PENDING); if it still
 *     can, the request is cancelled in the ring (IORING_OP_ASYNC_CANCEL,
 *     whose own completion has no request) and its CQE waited for, firmly.
 *  4. A submission the kernel refuses for lack of room (-EBUSY, -EAGAIN,
 *     -ENOMEM) stays in the queue and is submitted again after a reap and
 *     a yield: a call waits for room, it never fails for it.
 *  5. The eventfd announces only what the submitter does not reap itself:
 *     its notifications are off (IORING_CQ_EVENTFD_DISABLED) from a submit
 *     of queued SQEs until the reap that follows finds the queue empty,
 *     all under fr->lk; turning them back on is followed by a full fence
 *     and one more look at the tail, so a completion the kernel posted
 *     while they were off is reaped then. That takes a full barrier on the
 *     kernel's side too, between its store of the tail and its read of the
 *     flag: Linux 6.x has one there (the smp_mb of its wake-up of CQ
 *     waiters comes before the eventfd's signal), which is an
 *     implementation fact, not a promise of the ABI; a completion missed
 *     through it waits for the ring's next flush. Without this, each
 *     batch of cached reads woke the worker asleep in the base: 40-50k
 *     context switches in a run of bench/file_pread against 1.6-1.9k with
 *     the notifications on only while nobody reaps.
 *  6. Completions beyond the completion queue's room (2 x RING_ENTRIES
 *     unreaped) wait on the kernel's overflow list, announced once: every
 *     look at a ring counts that list as work, and a reap that empties the
 *     queue moves the list in (io_uring_get_events) and reaps again.
 *
 * Rings are not used under valgrind (it cannot see the kernel write
 * buffers through a ring), with GORO_IO_URING=0, or when io_uring_setup
 * fails for good (ENOSYS, EPERM from seccomp, io_uring_disabled = 2): then
 * every call runs on the offload pool (file.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <liburing.h>
#include <valgrind/valgrind.h>

#include "internal.h"
#include "file/file.h"
#include "io/poller.h"
#include "sched/idle.h"              /* goro__full_barrier */
#include "sched/sched.h"

#define RING_ENTRIES 256
/* Queued SQEs are submitted at the P's next poll, or at once when this
 * many wait: one io_uring_enter for many calls. */
#define SUBMIT_BATCH 32
#define REAP_BATCH 32

#define REQ_PENDING 0u
#define REQ_DONE 1u
#define REQ_CLAIMING 2u

struct ring_req {
    _Atomic uintptr_t state;       /* REQ_*, or the waiting coroutine */
    int res;                       /* the CQE's result (before CLAIMING) */
};

struct file_ring {
    goro_lock_t lk;                /* the queues (invariant 1) */
    _Atomic int queued;            /* SQEs not yet submitted (written under lk) */
    struct io_uring ring;
    int efd;                       /* the ring's eventfd, in the descriptors' base */
    struct event ev;
};

enum { MODE_UNKNOWN, MODE_RING, MODE_POOL };

GORO_HIDDEN _Atomic int goro__file_ring_off;
static _Atomic int mode;                   /* MODE_*: decided once per run */
static goro_lock_t rings_lk = GORO_LOCK_INIT;
/* By P id; Ps beyond the table run their calls on the pool. */
#define MAX_RINGS 1024
static struct file_ring *_Atomic rings[MAX_RINGS];
/* A ring was made: until then the poller's look costs one load. */
static _Atomic int rings_made;
/* Pollers inside goro__file_flush_all. Workers still poll while
 * goro__file_stop runs: it takes each ring out of rings[] first, then
 * waits until no flush is under way before it frees any, so no flush
 * holds a ring that is freed (both sides seq_cst: a flush that found a
 * ring had counted itself before, and the stop sees that count). */
static _Atomic int flushers;

/* ---- completions ---- */

static bool cq_has_work(struct file_ring *fr);

/* Under fr->lk: completions the kernel kept on its overflow list (the
 * completion queue was full: 2 x RING_ENTRIES unreaped) are moved into
 * the queue; true if there were any. Nothing announces them again, and
 * a submit only fetches them when something is queued (invariant 6). */
static bool cq_overflow_flush(struct file_ring *fr)
{
    if (!io_uring_cq_has_overflow(&fr->ring))
        return false;
    (void)io_uring_get_events(&fr->ring);
    return true;
}

/* Invariant 3: the reaper's side, with res copied under the ring lock. */
static void req_complete(struct ring_req *r, int res)
{
    r->res = res;
    uintptr_t old = atomic_exchange_explicit(&r->state, REQ_CLAIMING, memory_order_acq_rel);
    GORO_ASSERT(old != REQ_DONE && old != REQ_CLAIMING);  /* ring: one CQE a request */
    /* Inside a look at the descriptors' base its result takes the waiter
     * (the look's caller queues it within the run queue's room); outside,
     * a plain wake-up. */
    if (old != REQ_PENDING && goro__claim((struct goro *)old, GORO_WAKE_DONE))
        goro__ready_seen((struct goro *)old);
    atomic_store_explicit(&r->state, REQ_DONE, memory_order_release);
}

/* Invariant 5: the eventfd's notifications are off while this thread
 * submits (and reaps right after); turned back on, the completion queue
 * is read again. True: it may hold entries no notification announced. */
static bool eventfd_unquiet(struct file_ring *fr)
{
    if (io_uring_cq_eventfd_enabled(&fr->ring))
        return false;
    (void)io_uring_cq_eventfd_toggle(&fr->ring, true);
    goro__full_barrier();              /* the flag, then the tail */
    return cq_has_work(fr);
}

/* Reaps what fr's completion queue holds; the requests complete after the
 * lock is dropped (a claim may take the scheduler's locks). */
static void reap_locked_then_unlock(struct file_ring *fr)
{
    for (;;) {
        struct ring_req *got[REAP_BATCH];
        int res[REAP_BATCH], n = 0;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&fr->ring, head, cqe) {
            if (n == REAP_BATCH)
                break;
            seen++;
            struct ring_req *r = io_uring_cqe_get_data(cqe);
            if (!r)
                continue;              /* an ASYNC_CANCEL's own completion */
            got[n] = r;
            res[n++] = cqe->res;
        }
        io_uring_cq_advance(&fr->ring, seen);
        bool more = n == REAP_BATCH || cq_overflow_flush(fr) || eventfd_unquiet(fr);
        goro__unlock(&fr->lk);
        for (int i = 0; i < n; i++)
            req_complete(got[i], res[i]);
        if (!more)
            return;
        goro__lock(&fr->lk);
    }
}

/* The eventfd's callback, on the g0 of whoever polls the descriptors'
 * base: any thread, hence the ring's lock. */
static void ring_event(int fd, short what, void *arg)
{
    (void)what;
    struct file_ring *fr = arg;
    eventfd_t n;
    (void)eventfd_read(fd, &n);        /* level-triggered: drain it first */
    goro__lock(&fr->lk);
    reap_locked_then_unlock(fr);
}

static void submit_and_reap(struct file_ring *fr);

/* ---- making and ending rings ---- */

static bool pool_forced(void)
{
    return RUNNING_ON_VALGRIND || !goro__env_flag("GORO_IO_URING", true);
}

static struct file_ring *ring_make(int *err)
{
    struct file_ring *fr = calloc(1, sizeof *fr);
    if (!fr) {
        *err = -ENOMEM;
        return NULL;
    }
    *err = io_uring_queue_init(RING_ENTRIES, &fr->ring, 0);
    if (*err < 0) {
        free(fr);
        return NULL;
    }
    fr->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fr->efd < 0)
        *err = -errno;
    else if ((*err = io_uring_register_eventfd(&fr->ring, fr->efd)) == 0)
        *err = goro__netpoll_watch(&fr->ev, fr->efd, ring_event, fr);
    if (*err) {
        if (fr->efd >= 0)
            close(fr->efd);
        io_uring_queue_exit(&fr->ring);
        free(fr);
        return NULL;
    }
    return fr;
}

/* Under rings_lk: p's ring, made if it has none; NULL: none (mode may
 * have become MODE_POOL for good). */
static struct file_ring *ring_get_locked(struct goro_p *p)
{
    if (p->id >= MAX_RINGS)
        return NULL;
    struct file_ring *fr = atomic_load_explicit(&rings[p->id], memory_order_relaxed);
    if (fr)
        return fr;
    int err;
    fr = ring_make(&err);
    if (!fr) {
        /* Refused for good: the kernel lacks io_uring or forbids it. A
         * shortage (ENOMEM, EMFILE) only sends this call to the pool. */
        if (err == -ENOSYS || err == -EPERM || err == -EACCES || err == -EINVAL)
            atomic_store(&mode, MODE_POOL);
        return NULL;
    }
    atomic_store(&mode, MODE_RING);
    atomic_store_explicit(&rings[p->id], fr, memory_order_release);
    atomic_store_explicit(&rings_made, 1, memory_order_release);
    return fr;
}

/* The ring of the P the caller runs on; NULL: use the pool. */
static struct file_ring *ring_here(void)
{
    if (atomic_load_explicit(&goro__file_ring_off, memory_order_relaxed))
        return NULL;
    int m = atomic_load_explicit(&mode, memory_order_acquire);
    if (m == MODE_POOL)
        return NULL;
    struct goro_p *p = goro__current_p();
    if (!p)
        return NULL;
    if (m == MODE_RING && p->id < MAX_RINGS) {
        struct file_ring *fr = atomic_load_explicit(&rings[p->id], memory_order_acquire);
        if (fr)
            return fr;
    }
    if (m == MODE_UNKNOWN && pool_forced()) {
        atomic_store(&mode, MODE_POOL);
        return NULL;
    }
    goro__lock(&rings_lk);
    struct file_ring *fr = ring_get_locked(p);
    goro__unlock(&rings_lk);
    return fr;
}

/* Without the lock: whether fr's completion queue seems to hold entries,
 * or the kernel's overflow list does (io_uring_cq_ready reads the head
 * plainly; the reaper writes it under the lock, so both sides are atomic
 * here). */
static bool cq_has_work(struct file_ring *fr)
{
    return __atomic_load_n(fr->ring.cq.ktail, __ATOMIC_ACQUIRE) !=
           __atomic_load_n(fr->ring.cq.khead, __ATOMIC_RELAXED) ||
           io_uring_cq_has_overflow(&fr->ring);
}

/* How many times the monitor tries a ring's lock before it leaves the
 * ring to its owner's next look: a holder that queues one SQE or reaps
 * keeps it for well under a microsecond. */
#define FLUSH_TRIES 64

/* Submits and reaps fr if it has anything; the caller counts itself in
 * flushers around it. The monitor (wait false) does not sleep on another
 * P's ring lock, which that P's coroutines take for every call (it did,
 * 20 thousand times in a 2 s run of bench/file_pread): it tries the lock
 * for a moment, then leaves the ring. What is in it then is not lost: a
 * completion is announced on the eventfd (invariant 5), which the
 * monitor's look at the base reads next, and a queued SQE is submitted
 * at its owner's next look (at the latest before the owner sleeps) or
 * at the monitor's next. */
static void flush_ring(struct file_ring *fr, bool wait)
{
    if (!fr || (atomic_load_explicit(&fr->queued, memory_order_relaxed) == 0 &&
                !cq_has_work(fr)))
        return;
    if (wait) {
        goro__lock(&fr->lk);
    } else {
        int tries = 0;
        while (!goro__trylock(&fr->lk))
            if (++tries == FLUSH_TRIES)
                return;
            else
                cpu_relax();
    }
    submit_and_reap(fr);
}

void goro__file_flush(struct goro_p *p)
{
    if (!atomic_load_explicit(&rings_made, memory_order_relaxed) || p->id >= MAX_RINGS)
        return;
    atomic_fetch_add(&flushers, 1);
    flush_ring(atomic_load(&rings[p->id]), true);
    atomic_fetch_sub_explicit(&flushers, 1, memory_order_release);
}

void goro__file_flush_all(void)
{
    if (!atomic_load_explicit(&rings_made, memory_order_relaxed))
        return;
    atomic_fetch_add(&flushers, 1);
    int n = goro__sched.nprocs < MAX_RINGS ? goro__sched.nprocs : MAX_RINGS;
    for (int i = 0; i < n; i++)
        flush_ring(atomic_load(&rings[i]), false);
    atomic_fetch_sub_explicit(&flushers, 1, memory_order_release);
}

bool goro__ring_usable(void)
{
    return ring_here() != NULL;
}

void goro__file_stop(void)
{
    goro__lock(&rings_lk);
    struct file_ring *gone[MAX_RINGS];
    int n = 0;
    for (int i = 0; i < MAX_RINGS; i++) {
        struct file_ring *fr = atomic_exchange(&rings[i], NULL);
        if (fr)
            gone[n++] = fr;
    }
    /* No flush may still hold one (see flushers). */
    while (atomic_load(&flushers))
        sched_yield();
    for (int i = 0; i < n; i++) {
        struct file_ring *fr = gone[i];
        event_del(&fr->ev);            /* waits for a callback under way */
        io_uring_queue_exit(&fr->ring);
        close(fr->efd);
        free(fr);
    }
    atomic_store(&mode, MODE_UNKNOWN);   /* the next run decides anew */
    goro__unlock(&rings_lk);
}

/* ---- submitting ---- */

static void prep(struct io_uring_sqe *sqe, const struct file_op *op)
{
    switch (op->kind) {
    case FOP_OPENAT:
        io_uring_prep_openat(sqe, op->fd, op->path, op->flags, op->mode);
        break;
    case FOP_READV:
        if (op->iovcnt == 1)
            io_uring_prep_read(sqe, op->fd, op->iov[0].iov_base,
                               (unsigned)op->iov[0].iov_len, (uint64_t)op->off);
        else
            io_uring_prep_readv(sqe, op->fd, op->iov, (unsigned)op->iovcnt, (uint64_t)op->off);
        break;
    case FOP_WRITEV:
        if (op->iovcnt == 1)
            io_uring_prep_write(sqe, op->fd, op->iov[0].iov_base,
                                (unsigned)op->iov[0].iov_len, (uint64_t)op->off);
        else
            io_uring_prep_writev(sqe, op->fd, op->iov, (unsigned)op->iovcnt, (uint64_t)op->off);
        break;
    case FOP_FSYNC:
    case FOP_FDATASYNC:
        io_uring_prep_fsync(sqe, op->fd, op->kind == FOP_FDATASYNC ? IORING_FSYNC_DATASYNC : 0);
        break;
    case FOP_STATX:
        io_uring_prep_statx(sqe, op->fd, op->path, op->flags, op->mode, op->stx);
        break;
    case FOP_UNLINKAT:
        io_uring_prep_unlinkat(sqe, op->fd, op->path, op->flags);
        break;
    case FOP_RENAMEAT:
        io_uring_prep_renameat(sqe, op->fd, op->path, op->fd2, op->path2, 0);
        break;
    case FOP_MKDIRAT:
        io_uring_prep_mkdirat(sqe, op->fd, op->path, op->mode);
        break;
    }
}

/* Invariant 4: under fr->lk, submits everything queued, waiting for room
 * (the lock is dropped meanwhile); then reaps (and unlocks). */
static void submit_and_reap(struct file_ring *fr)
{
    /* Invariant 5: what completes inside this submit (a cached read does)
     * is reaped below by this thread; announced on the eventfd, it would
     * wake the worker asleep in the descriptors' base for nothing. */
    if (io_uring_sq_ready(&fr->ring))
        (void)io_uring_cq_eventfd_toggle(&fr->ring, false);
    for (;;) {
        int n = io_uring_submit(&fr->ring);
        atomic_store_explicit(&fr->queued, (int)io_uring_sq_ready(&fr->ring),
                              memory_order_relaxed);
        if (n >= 0 || (n != -EBUSY && n != -EAGAIN && n != -ENOMEM && n != -EINTR))
            break;
        /* no room for completions, or the kernel short of memory */
        reap_locked_then_unlock(fr);
        if (goro__current())
            goro_yield();
        else
            sched_yield();
        goro__lock(&fr->lk);
        if (io_uring_sq_ready(&fr->ring) == 0)
            break;                     /* somebody else's submit took it */
    }
    reap_locked_then_unlock(fr);
}

/* Under fr->lk: a free SQE, making room by submitting if need be. */
static struct io_uring_sqe *sqe_get_locked(struct file_ring *fr)
{
    struct io_uring_sqe *sqe;
    while (!(sqe = io_uring_get_sqe(&fr->ring))) {
        submit_and_reap(fr);
        goro__lock(&fr->lk);
    }
    return sqe;
}

static void submit_cancel(struct file_ring *fr, struct ring_req *r)
{
    goro__lock(&fr->lk);
    struct io_uring_sqe *sqe = sqe_get_locked(fr);
    io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)r, 0);
    io_uring_sqe_set_data(sqe, NULL);
    submit_and_reap(fr);
}

/* ---- waiting ---- */

static bool req_commit(void *arg, struct goro *self)
{
    struct ring_req *r = arg;
    uintptr_t expect = REQ_PENDING;
    return atomic_compare_exchange_strong_explicit(&r->state, &expect, (uintptr_t)self,
        memory_order_acq_rel, memory_order_acquire);
}

/* Invariant 2: the reaper is done with r. A few instructions at most. */
static void req_settle(struct ring_req *r)
{
    while (atomic_load_explicit(&r->state, memory_order_acquire) != REQ_DONE)
        sched_yield();
}

/* Waits for r's CQE; returns the park's outcome (GORO_WAKE_DONE, or the
 * deadline's or cancellation's, after which r was cancelled in fr). */
static int req_wait(struct file_ring *fr, struct ring_req *r, int64_t deadline)
{
    if (atomic_load_explicit(&r->state, memory_order_acquire) == REQ_DONE)
        return GORO_WAKE_DONE;         /* done at submission: no park */
    struct goro_park how = { .why = GORO_W_IO, .obj = r, .commit = req_commit, .arg = r,
                             .deadline = deadline, .real = true };
    int outcome = goro__park(&how);
    uintptr_t self = (uintptr_t)goro__current();
    if (outcome != GORO_WAKE_DONE &&
        atomic_compare_exchange_strong_explicit(&r->state, &self, REQ_PENDING,
                                                memory_order_acq_rel, memory_order_acquire)) {
        submit_cancel(fr, r);
        struct goro_park firm = { .why = GORO_W_IO, .obj = r, .commit = req_commit, .arg = r,
                                  .deadline = GORO_FOREVER, .firm = true, .real = true };
        int done = goro__park(&firm);
        /* ring: a cancelled request is waited for until its CQE */
        GORO_ASSERT(done == GORO_WAKE_DONE);
        (void)done;
    }
    req_settle(r);
    return outcome;
}

int goro__ring_run(const struct file_op *op, int64_t deadline, long *res)
{
    struct file_ring *fr = ring_here();
    if (!fr)
        return 1;
    struct ring_req r = { .state = REQ_PENDING };
    goro__lock(&fr->lk);
    struct io_uring_sqe *sqe = sqe_get_locked(fr);
    prep(sqe, op);
    io_uring_sqe_set_data(sqe, &r);
    /* Queued for the P's next poll (when this coroutine has parked and
     * the others have had their turn), unless a batch is full. */
    int queued = atomic_load_explicit(&fr->queued, memory_order_relaxed) + 1;
    atomic_store_explicit(&fr->queued, queued, memory_order_relaxed);
    if (queued >= SUBMIT_BATCH)
        submit_and_reap(fr);
    else
        goro__unlock(&fr->lk);
    int outcome = req_wait(fr, &r, deadline);
    *res = r.res;
    /* Cancelled in time: the wait's error. Done anyway: its result. */
    if (outcome != GORO_WAKE_DONE && (r.res == -ECANCELED || r.res == -EINTR))
        return goro__wake_error(outcome);
    return 0;
}
