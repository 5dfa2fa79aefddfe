/* Cancellation: goro_cancel ends the current wait of every kind with
 * -ECANCELED, promptly, whether the coroutine was parked in it or still
 * running when cancelled; every later wait fails too, while the calls that
 * never wait (unlock, close, try_*) still work, so the coroutine unwinds
 * and what it held is free for others. A cancelled wait leaves no trace.
 * Then: cancel twice, cancel a finished coroutine, cancel itself, offload
 * and once run to their end, and a stress where receivers and senders are
 * cancelled in the middle of a stream: no value lost or duplicated.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

/* ---- a wait of every kind, cancelled ---- */

/* setup() on the test thread makes the wait block; prepare() (if any)
 * runs in the coroutine before it can be cancelled; wait() runs in the
 * coroutine and returns the call's result; after() on the test thread
 * checks that the cancelled wait left no trace and undoes setup(). */
struct blocker {
    const char *name;
    void (*setup)(void);
    long (*wait)(void);
    void (*after)(void);
    int (*prepare)(void);
};

/* The waits, plain (test_time.c has their _until forms); their fixtures
 * are the t_bw_* of helpers.h. */
static long wait_read(void)
{
    char b[16];
    return goro_read(t_bw.s[0], b, sizeof b);
}

static long wait_recv(void)
{
    char b[16];
    return goro_recv(t_bw.s[0], b, sizeof b, 0);
}

static long wait_fd(void) { return goro_wait_fd(t_bw.s[0], GORO_READABLE, GORO_FOREVER); }
static long wait_write(void) { return goro_write(t_bw.s[0], "abcd", 4); }
static long wait_accept(void) { return goro_accept(t_bw.l, NULL, NULL); }

static long wait_connect(void)
{
    return goro_connect(t_bw.c, (struct sockaddr *)&t_bw.addr, sizeof t_bw.addr);
}

static void nothing(void) {}

static long wait_sleep(void) { return goro_sleep(3600 * GORO_SEC); }
static long wait_forever(void) { return goro_sleep_until(GORO_FOREVER); }

static long wait_recv_unb(void)
{
    long v = -1;
    return goro_chan_recv(t_bw.unb, &v);
}

static long wait_recv_buf(void)
{
    long v = -1;
    return goro_chan_recv(t_bw.buf, &v);
}

static long wait_send_unb(void)
{
    long v = 7;
    return goro_chan_send(t_bw.unb, &v);
}

static long wait_send_full(void)
{
    long v = 8;
    return goro_chan_send(t_bw.buf, &v);
}

static long wait_select(void)
{
    long in = -1, out = 9;
    goro_case_t cs[3];
    t_bw_select_cases(cs, &in, &out);
    return goro_select(cs, 3, 0);
}

static long wait_mutex(void) { return goro_mutex_lock(&t_bw.mu); }
static long wait_rdlock(void) { return goro_rwlock_rdlock(&t_bw.rw); }
static long wait_wrlock(void) { return goro_rwlock_wrlock(&t_bw.rw); }

/* Taken before the cancel: whether an uncontended lock counts as a wait
 * once cancelled is not what this is about. */
static int lock_cond_mutex(void) { return goro_mutex_lock(&t_bw.mu); }

/* The mutex is held again when the cancelled wait returns, and unlocking
 * it (which never waits) still works. */
static long wait_cond(void)
{
    long r = goro_cond_wait(&t_bw.cv, &t_bw.mu);
    if (goro_mutex_trylock(&t_bw.mu) != -EBUSY)
        t_fail("cond_wait returned %ld without the mutex", r);
    else if (goro_mutex_unlock(&t_bw.mu) != 0)
        t_fail("cond_wait: unlock after the cancel failed");
    return r;
}

static long wait_sem(void) { return goro_sem_acquire(&t_bw.sem); }
static long wait_wg(void) { return goro_waitgroup_wait(&t_bw.wg); }

static long wait_join(void)
{
    long r = -1;
    return goro_join(t_bw.blocked, &r);
}

static long wait_group_slot(void)
{
    return goro_group_go(t_bw.grp, nothing);
}

static long wait_flight(void) { return t_bw_flight_wait(GORO_FOREVER); }

/* A future nobody sets yet: the cancelled get leaves it pending and
 * unwaited (it frees), and a later set reaches a later get. */
static goro_future_t *bw_future;
static void future_setup(void) { ck_assert_int_eq(goro_future_new(&bw_future, sizeof(long)), 0); }

static long wait_future(void)
{
    long v = -1;
    goro_err_t *err = NULL;
    int r = goro_future_get(bw_future, &v, &err);
    if (err)
        t_fail("future: an error object from a get that gave up");
    return r;
}

static void future_after(void)
{
    ck_assert_int_eq(goro_future_ready(bw_future), 0);
    long v = 5, got = -1;
    ck_assert_int_eq(goro_future_set(bw_future, &v), 0);
    ck_assert_int_eq(goro_future_get(bw_future, &got, NULL), 0);
    ck_assert_int_eq(got, 5);
    ck_assert_int_eq(goro_future_free(bw_future), 0);
}

/* A weighted semaphore with every unit held: the cancelled acquire takes
 * nothing and leaves the queue. */
static goro_wsem_t bw_wsem;
static void wsem_setup(void)
{
    ck_assert_int_eq(goro_wsem_init(&bw_wsem, 3), 0);
    ck_assert_int_eq(goro_wsem_acquire(&bw_wsem, 2), 0);
}

/* A barrier of two with nobody else: the cancelled waiter leaves the
 * round, which is empty again. */
static goro_barrier_t bw_barrier;
static void barrier_setup(void) { ck_assert_int_eq(goro_barrier_init(&bw_barrier, 2), 0); }
static long wait_barrier(void) { return goro_barrier_wait(&bw_barrier); }
static void barrier_after(void) { ck_assert_int_eq(goro_barrier_destroy(&bw_barrier), 0); }

static long wait_wsem(void) { return goro_wsem_acquire(&bw_wsem, 2); }

static void wsem_after(void)
{
    ck_assert_int_eq(goro_wsem_waiting(&bw_wsem), 0);
    ck_assert_int_eq(goro_wsem_held(&bw_wsem), 2);
    ck_assert_int_eq(goro_wsem_release(&bw_wsem, 2), 0);
    ck_assert_int_eq(goro_wsem_destroy(&bw_wsem), 0);
}

static const struct blocker blockers[] = {
    { "read", t_bw_pair_setup, wait_read, t_bw_after_read, NULL },
    { "recv", t_bw_pair_setup, wait_recv, t_bw_after_read, NULL },
    { "wait_fd", t_bw_pair_setup, wait_fd, t_bw_after_read, NULL },
    { "write", t_bw_full_setup, wait_write, t_bw_after_write, NULL },
    { "accept", t_bw_listen_setup, wait_accept, t_bw_after_accept, NULL },
    { "connect", t_bw_stalled_setup, wait_connect, t_bw_after_connect, NULL },
    { "sleep", nothing, wait_sleep, nothing, NULL },
    { "sleep forever", nothing, wait_forever, nothing, NULL },
    { "chan_recv unbuffered", t_bw_chans_setup, wait_recv_unb, t_bw_after_chans, NULL },
    { "chan_recv buffered", t_bw_chans_setup, wait_recv_buf, t_bw_after_chans, NULL },
    { "chan_send unbuffered", t_bw_chans_setup, wait_send_unb, t_bw_after_chans, NULL },
    { "chan_send full", t_bw_full_chans_setup, wait_send_full, t_bw_after_chans, NULL },
    { "select", t_bw_full_chans_setup, wait_select, t_bw_after_chans, NULL },
    { "mutex", t_bw_mutex_setup, wait_mutex, t_bw_after_mutex, NULL },
    { "rdlock vs writer", t_bw_wrheld_setup, wait_rdlock, t_bw_after_rwlock, NULL },
    { "wrlock vs writer", t_bw_wrheld_setup, wait_wrlock, t_bw_after_rwlock, NULL },
    { "wrlock vs reader", t_bw_rdheld_setup, wait_wrlock, t_bw_after_rdheld, NULL },
    { "cond", t_bw_cond_setup, wait_cond, t_bw_after_cond, lock_cond_mutex },
    { "sem", t_bw_sem_setup, wait_sem, t_bw_after_sem, NULL },
    { "waitgroup", t_bw_wg_setup, wait_wg, t_bw_after_wg, NULL },
    { "join", t_bw_join_setup, wait_join, t_bw_after_join, NULL },
    { "group slot", t_bw_group_full_setup, wait_group_slot, t_bw_after_group, NULL },
    { "flight", t_bw_flight_setup, wait_flight, t_bw_after_flight, NULL },
    { "future", future_setup, wait_future, future_after, NULL },
    { "weighted sem", wsem_setup, wait_wsem, wsem_after, NULL },
    { "barrier", barrier_setup, wait_barrier, barrier_after, NULL },
};
enum { NBLOCKERS = sizeof blockers / sizeof blockers[0] };

static atomic_int started;

/* The coroutine under test. running: it is cancelled while it runs (it
 * spins, never waiting, until it sees goro_cancelled()), so the wait it
 * then enters must fail at once. Afterwards every further wait fails too,
 * and it unwinds. */
static long cancel_target(const struct blocker *b, long running)
{
    if (goro_cancelled())
        t_fail("%s: cancelled before anybody asked", b->name);
    if (b->prepare && b->prepare() != 0)
        t_fail("%s: prepare failed", b->name);
    atomic_store(&started, 1);
    if (running) {
        double end = t_now() + t_timeout(10);
        while (!goro_cancelled() && t_now() < end)
            ;
    }
    long r = b->wait();
    if (!goro_cancelled())
        t_fail("%s: goro_cancelled() is 0 after the cancel", b->name);
    int later = goro_sleep(GORO_SEC);
    if (later != -ECANCELED)
        t_fail("%s: a later sleep returned %d, want -ECANCELED", b->name, later);
    long v;
    goro_chan_t *ch = NULL;
    if (goro_chan_new(&ch, sizeof v, 0) == 0) {
        int e = goro_chan_recv(ch, &v);
        if (e != -ECANCELED)
            t_fail("%s: a later chan_recv returned %d, want -ECANCELED", b->name, e);
        goro_chan_free(ch);
    }
    return r;
}

static void run_cancelled(const struct blocker *b, bool running)
{
    const char *how = running ? "running" : "parked";
    b->setup();
    t_fail_reset();
    atomic_store(&started, 0);
    goro_t *h = go(cancel_target, b, (long)running);
    ck_assert_ptr_nonnull(h);
    ck_assert_msg(t_wait_flag(&started, t_timeout(10)), "%s: never started", b->name);
    if (!running)
        t_settle();                   /* parked in the wait by now */
    double t0 = t_now();
    ck_assert_int_eq(goro_cancel(h), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    double dt = t_now() - t0;
    ck_assert_msg(!t_failed(), "%s (%s): %s", b->name, how, t_failed());
    ck_assert_msg(r == -ECANCELED, "%s (%s): %ld, want -ECANCELED", b->name, how, r);
    ck_assert_msg(dt < t_prompt(), "%s (%s): returned %.0f ms after the cancel",
                  b->name, how, dt * 1e3);
    b->after();
}

/* On the virtual clock (one worker: the target runs and parks in its wait
 * before this coroutine's 1 ms sleep ends, no settling nap needed): the
 * cancelled wait returns -ECANCELED with no time passing. */
static void parked_steps(const struct blocker *b)
{
    atomic_store(&started, 0);
    goro_t *h = go(cancel_target, b, 0L);
    T_VCHECK(h, "%s: go failed", b->name);
    goro_sleep(GORO_MSEC);
    T_VCHECK(atomic_load(&started), "%s: never started", b->name);
    int64_t t0 = goro_now();
    goro_cancel(h);
    long r = 0;
    goro_join(h, &r);
    T_VCHECK(r == -ECANCELED, "%s (parked): %ld, want -ECANCELED", b->name, r);
    T_VCHECK(goro_now() == t0, "%s (parked): returned %.3f ms after the cancel", b->name,
             t_ms(goro_now() - t0));
}

static void parked_body(void *p)
{
    const struct blocker *b = p;
    b->setup();                     /* on the child's main thread, as on the test's */
    ck_assert_int_eq(goro_join(go(parked_steps, b), NULL), 0);
    if (!t_failed())
        b->after();
}

/* Descriptor waits (the first six) keep the real clock even on the
 * virtual one: they stay there, checked for promptness. */
enum { NFD_BLOCKERS = 6 };

START_TEST(cancel_parked_wait)
{
    if (_i >= NFD_BLOCKERS)
        t_virtual_seeded(parked_body, (void *)&blockers[_i], 1, true);
    else
        run_cancelled(&blockers[_i], false);
}
END_TEST

/* The cancel area's one real-clock latency case: a parked sleep, on
 * several workers, returns promptly after its cancel (t_prompt). */
START_TEST(real_clock_cancel_latency)
{
    ck_assert_str_eq(blockers[6].name, "sleep");
    run_cancelled(&blockers[6], false);
}
END_TEST

START_TEST(cancel_before_wait)
{
    run_cancelled(&blockers[_i], true);
}
END_TEST

/* ---- the same waits, ended by a group's cancel two levels up ----
 * The test thread's group holds `middle`, whose own group holds the
 * coroutine under test: goro_group_cancel of the outer group reaches it
 * through the tree. */

static atomic_long in_group_result;

static long target_in_group(const struct blocker *b)
{
    long r = cancel_target(b, 0);
    atomic_store(&in_group_result, r);
    return r;
}

static long middle(const struct blocker *b)
{
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return -ENOMEM;
    if (goro_group_go(g, target_in_group, b) != 0)
        t_fail("%s: goro_group_go failed", b->name);
    int rc = goro_group_wait(g, NULL, NULL);
    goro_group_free(g);
    return rc;
}

START_TEST(group_cancel_ends_every_wait)
{
    const struct blocker *b = &blockers[_i];
    b->setup();
    t_fail_reset();
    atomic_store(&started, 0);
    atomic_store(&in_group_result, 1);
    goro_group_t *outer;
    ck_assert_int_eq(goro_group_new(&outer, NULL), 0);
    ck_assert_int_eq(goro_group_go(outer, middle, b), 0);
    ck_assert_msg(t_wait_flag(&started, t_timeout(10)), "%s: never started", b->name);
    t_settle();                       /* parked in the wait by now */
    double t0 = t_now();
    ck_assert_int_eq(goro_group_cancel(outer), 0);
    ck_assert_int_eq(goro_group_wait(outer, NULL, NULL), -ECANCELED);
    double dt = t_now() - t0;
    ck_assert_int_eq(goro_group_free(outer), 0);
    ck_assert_msg(!t_failed(), "%s: %s", b->name, t_failed());
    ck_assert_msg(atomic_load(&in_group_result) == -ECANCELED, "%s: %ld, want -ECANCELED",
                  b->name, atomic_load(&in_group_result));
    ck_assert_msg(dt < t_prompt(), "%s: ended %.0f ms after the cancel", b->name, dt * 1e3);
    b->after();
}
END_TEST

/* ---- unwinding ---- */

static goro_mutex_t held;

/* Holds a mutex and a socket, parks on a channel; once cancelled, lets
 * go of both (neither call waits) and reports how that went. */
static long holder(goro_chan_t *ch, int fd)
{
    if (goro_mutex_lock(&held) != 0)
        return -1;
    atomic_store(&started, 1);
    long v, bad = 0;
    int r = goro_chan_recv(ch, &v);
    bad |= r != -ECANCELED;
    bad |= (goro_mutex_unlock(&held) != 0) << 1;
    bad |= (goro_close(fd) != 0) << 2;
    bad |= (goro_chan_try_recv(ch, &v) != -EAGAIN) << 3;   /* try_* still answer */
    return bad;
}

static atomic_int waiter_got;

static void lock_after(void)
{
    if (goro_mutex_lock(&held) == 0) {
        atomic_store(&waiter_got, 1);
        goro_mutex_unlock(&held);
    }
}

/* A cancelled coroutine unwinds normally: the mutex it held goes to the
 * coroutine queued behind it; its descriptor closes. */
START_TEST(cancelled_coroutine_releases_what_it_holds)
{
    ck_assert_int_eq(goro_mutex_init(&held), 0);
    goro_chan_t *ch;
    ck_assert_int_eq(goro_chan_new(&ch, sizeof(long), 0), 0);
    int s[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
    ck_assert_int_eq(goro_write(s[0], "x", 1), 1);     /* goro knows s[0] */
    atomic_store(&started, 0);
    atomic_store(&waiter_got, 0);
    goro_t *h = go(holder, ch, s[0]);
    ck_assert_ptr_nonnull(h);
    ck_assert(t_wait_flag(&started, t_timeout(10)));
    goro_t *w = go(lock_after);                 /* queues behind the holder */
    ck_assert_ptr_nonnull(w);
    t_settle();
    ck_assert_int_eq(atomic_load(&waiter_got), 0);
    ck_assert_int_eq(goro_cancel(h), 0);
    long bad = -1;
    ck_assert_int_eq(goro_join(h, &bad), 0);
    ck_assert_msg(bad == 0, "unwinding after the cancel: failure bits %#lx", bad);
    ck_assert_int_eq(goro_join(w, NULL), 0);
    ck_assert_int_eq(atomic_load(&waiter_got), 1);
    ck_assert_int_eq(goro_mutex_trylock(&held), 0);
    ck_assert_int_eq(goro_mutex_unlock(&held), 0);
    ck_assert_int_eq(goro_mutex_destroy(&held), 0);
    char c;
    ck_assert_int_eq(read(s[1], &c, 1), 1);
    ck_assert_int_eq(read(s[1], &c, 1), 0);     /* s[0] was closed */
    close(s[1]);
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

/* ---- only the cancelled coroutine is affected ---- */

static atomic_long arrived;

static long recv_value(goro_chan_t *ch)
{
    long v = -1;
    atomic_fetch_add(&arrived, 1);
    int r = goro_chan_recv(ch, &v);
    return r == 1 ? v : -1000 + r;
}

static long accept_conn(int l)
{
    atomic_fetch_add(&arrived, 1);
    int fd = goro_accept(l, NULL, NULL);
    if (fd >= 0)
        goro_close(fd);
    return fd >= 0 ? 1 : fd;
}

START_TEST(cancel_is_per_coroutine)
{
    /* two receivers on one channel; one is cancelled, the other still
     * gets the value sent afterwards */
    goro_chan_t *ch;
    ck_assert_int_eq(goro_chan_new(&ch, sizeof(long), 0), 0);
    atomic_store(&arrived, 0);
    goro_t *a = go(recv_value, ch), *b = go(recv_value, ch);
    ck_assert_int_eq(t_wait_at_least(&arrived, 2, t_timeout(10)), 2);
    t_settle();
    ck_assert_int_eq(goro_cancel(a), 0);
    long ra = 0, rb = 0;
    ck_assert_int_eq(goro_join(a, &ra), 0);
    ck_assert_int_eq(ra, -1000 - ECANCELED);
    long v = 31;
    ck_assert_int_eq(goro_chan_send(ch, &v), 0);
    ck_assert_int_eq(goro_join(b, &rb), 0);
    ck_assert_int_eq(rb, 31);
    ck_assert_int_eq(goro_chan_free(ch), 0);
    ck_assert_int_eq(goro_cancelled(), 0);      /* this thread is not a coroutine */

    /* three acceptors on one listener; one is cancelled, the other two
     * take the next two connections */
    struct sockaddr_in addr;
    int l = t_tcp_listener(8, &addr);
    atomic_store(&arrived, 0);
    goro_t *acc[3];
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(acc[i] = go(accept_conn, l));
    ck_assert_int_eq(t_wait_at_least(&arrived, 3, t_timeout(10)), 3);
    t_settle();
    ck_assert_int_eq(goro_cancel(acc[1]), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(acc[1], &r), 0);
    ck_assert_int_eq(r, -ECANCELED);
    int c[2];
    for (int i = 0; i < 2; i++) {
        c[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(connect(c[i], (struct sockaddr *)&addr, sizeof addr), 0);
    }
    ck_assert_int_eq(goro_join(acc[0], &r), 0);
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(goro_join(acc[2], &r), 0);
    ck_assert_int_eq(r, 1);
    close(c[0]);
    close(c[1]);
    ck_assert_int_eq(goro_close(l), 0);
}
END_TEST

/* ---- cancel twice, after the end, itself, bad handles ---- */

static long finish_now(void) { return 17; }

static long cancel_self(void)
{
    long bad = 0;
    bad |= goro_cancelled() != 0;
    bad |= (goro_cancel(goro_self()) != 0) << 1;
    bad |= (goro_cancel(goro_self()) != 0) << 2;           /* twice */
    bad |= (goro_cancelled() != 1) << 3;
    bad |= (goro_sleep(GORO_MSEC) != -ECANCELED) << 4;
    goro_mutex_t m = GORO_MUTEX_INIT;                       /* never waits: works */
    bad |= (goro_mutex_trylock(&m) != 0) << 5;
    bad |= (goro_mutex_unlock(&m) != 0) << 6;
    goro_chan_t *ch = NULL;
    bad |= (goro_chan_new(&ch, 0, 1) != 0) << 7;
    bad |= (goro_chan_try_send(ch, NULL) != 0) << 8;
    bad |= (goro_chan_try_recv(ch, NULL) != 1) << 9;
    bad |= (goro_chan_recv(ch, NULL) != -ECANCELED) << 10;  /* would wait */
    bad |= (goro_chan_close(ch) != 0) << 11;
    bad |= (goro_chan_free(ch) != 0) << 12;
    return bad;
}

START_TEST(cancel_twice_finished_self_and_bad)
{
    /* twice, on a parked coroutine: one -ECANCELED, nothing else odd */
    const struct blocker *b = &blockers[6];     /* sleep */
    ck_assert_str_eq(b->name, "sleep");
    t_fail_reset();
    atomic_store(&started, 0);
    goro_t *h = go(cancel_target, b, 0L);
    ck_assert(t_wait_flag(&started, t_timeout(10)));
    t_settle();
    ck_assert_int_eq(goro_cancel(h), 0);
    ck_assert_int_eq(goro_cancel(h), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(r, -ECANCELED);

    /* finished but not joined: harmless, the result is intact */
    h = go(finish_now);
    ck_assert_ptr_nonnull(h);
    t_nap(t_timeout(0.02));
    ck_assert_int_eq(goro_cancel(h), 0);
    ck_assert_int_eq(goro_cancel(h), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 17);

    /* itself */
    ck_assert_int_eq(goro_join(go(cancel_self), &r), 0);
    ck_assert_msg(r == 0, "cancel of itself: failure bits %#lx", r);

    ck_assert_int_eq(goro_cancel(NULL), -EINVAL);
    ck_assert_int_eq(goro_cancelled(), 0);
}
END_TEST

/* ---- offload and once run to their end ---- */

static atomic_int job_done;

static long slow_job(void *arg)
{
    (void)arg;
    usleep(t_slow() ? 500000 : 100000);
    atomic_store(&job_done, 1);
    return 5;
}

static long offloader(void)
{
    long res = 0;
    atomic_store(&started, 1);
    int e = goro_offload(slow_job, NULL, &res);
    if (e != 0 || res != 5 || !atomic_load(&job_done))
        t_fail("offload under a cancel: %d, result %ld, done %d", e, res,
               atomic_load(&job_done));
    return goro_sleep(GORO_SEC);                /* the next wait reports it */
}

static goro_once_t once;
static atomic_int once_release, once_finished;

static void once_fn(void)
{
    atomic_store(&started, 1);
    while (!atomic_load(&once_release))
        goro_yield();
    atomic_store(&once_finished, 1);
}

static long once_runner(void) { return goro_once(&once, once_fn); }

static atomic_int once_waiter_in, once_waiter_out;

static long once_waiter(void)
{
    atomic_store(&once_waiter_in, 1);
    int e = goro_once(&once, once_fn);
    atomic_store(&once_waiter_out, 1);
    if (e != 0 || !atomic_load(&once_finished))
        t_fail("once under a cancel: %d, fn finished %d", e, atomic_load(&once_finished));
    return goro_sleep(GORO_SEC);
}

START_TEST(offload_and_once_run_to_their_end)
{
    atomic_store(&job_done, 0);
    atomic_store(&started, 0);
    t_fail_reset();
    goro_t *h = go(offloader);
    ck_assert(t_wait_flag(&started, t_timeout(10)));
    t_nap(t_timeout(0.02));                       /* inside the job */
    ck_assert_int_eq(goro_cancel(h), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(r, -ECANCELED);

    once = (goro_once_t)GORO_ONCE_INIT;
    atomic_store(&started, 0);
    atomic_store(&once_release, 0);
    atomic_store(&once_finished, 0);
    atomic_store(&once_waiter_in, 0);
    atomic_store(&once_waiter_out, 0);
    goro_t *runner = go(once_runner);
    ck_assert(t_wait_flag(&started, t_timeout(10)));       /* fn is running */
    goro_t *w = go(once_waiter);
    ck_assert(t_wait_flag(&once_waiter_in, t_timeout(10)));
    t_settle();
    ck_assert_int_eq(goro_cancel(w), 0);
    t_settle();
    int out_early = atomic_load(&once_waiter_out);
    atomic_store(&once_release, 1);
    ck_assert_int_eq(goro_join(runner, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_join(w, &r), 0);
    ck_assert_msg(!out_early, "goro_once returned to a cancelled waiter before fn finished");
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(r, -ECANCELED);
}
END_TEST

/* ---- stress: cancels in the middle of a stream ---- */

enum { SR = 8, SS = 4 };

static struct {
    goro_chan_t *ch;
    long n;                         /* values per round */
    atomic_long next;               /* next value a sender takes */
    atomic_int *sent;               /* per value: the send returned 0 */
    atomic_int *recvd;              /* per value: times received */
    goro_t *rx[SR];
} cs;

static void note_received(long v)
{
    if (v < 0 || v >= cs.n)
        t_fail("stress: received %ld, out of range", v);
    else
        atomic_fetch_add(&cs.recvd[v], 1);
}

/* Receives until cancelled (odd ids through select). */
static void stress_receiver(long id)
{
    for (;;) {
        long v = -1;
        int r;
        if (id % 2) {
            goro_case_t c = { cs.ch, GORO_RECV, &v, 0 };
            r = goro_select(&c, 1, 0);
            r = r == 0 ? c.result : r;
        } else {
            r = goro_chan_recv(cs.ch, &v);
        }
        if (r == -ECANCELED)
            return;
        if (r != 1) {
            t_fail("stress receiver: %d", r);
            return;
        }
        note_received(v);
    }
}

/* Sends fresh values until cancelled or out of values. */
static void stress_sender(long id)
{
    (void)id;
    for (;;) {
        long v = atomic_fetch_add(&cs.next, 1);
        if (v >= cs.n)
            return;
        int r = goro_chan_send(cs.ch, &v);
        if (r == 0) {
            atomic_store(&cs.sent[v], 1);
        } else {
            if (r != -ECANCELED)
                t_fail("stress sender: %d", r);
            return;
        }
    }
}

/* Cancels the second half of the receivers from a coroutine, while the
 * test thread cancels the first half (and, racing it, all of them). */
static void canceller(long seed)
{
    uint32_t r = (uint32_t)seed | 1;
    for (int i = SR - 1; i >= 0; i--) {
        if (t_rnd(&r) % 2)
            goro_yield();
        if (goro_cancel(cs.rx[i]) != 0)
            t_fail("canceller: cancel failed");
    }
}

static void stress_round(long round, uint32_t *r)
{
    goro_t *tx[SS];
    atomic_store(&cs.next, 0);
    for (long i = 0; i < SR; i++)
        ck_assert_ptr_nonnull(cs.rx[i] = go(stress_receiver, i));
    for (long i = 0; i < SS; i++)
        ck_assert_ptr_nonnull(tx[i] = go(stress_sender, i));
    t_nap((double)(t_rnd(r) % 300) * 1e-6);        /* let the stream get going */
    goro_t *c = go(canceller, round);
    ck_assert_ptr_nonnull(c);
    for (int i = 0; i < SR; i++) {
        ck_assert_int_eq(goro_cancel(cs.rx[i]), 0);
        if (t_rnd(r) % 4 == 0)
            t_nap((double)(t_rnd(r) % 50) * 1e-6);
    }
    ck_assert_int_eq(goro_join(c, NULL), 0);
    for (int i = 0; i < SR; i++)
        ck_assert_int_eq(goro_join(cs.rx[i], NULL), 0);
    /* no receiver is left: senders still sending wait until cancelled */
    for (int i = 0; i < SS; i++)
        ck_assert_int_eq(goro_cancel(tx[i]), 0);
    for (int i = 0; i < SS; i++)
        ck_assert_int_eq(goro_join(tx[i], NULL), 0);
    long v;
    while (goro_chan_try_recv(cs.ch, &v) == 1)  /* buffered leftovers count */
        note_received(v);
}

static void stress_check(long round)
{
    long n = atomic_load(&cs.next) < cs.n ? atomic_load(&cs.next) : cs.n;
    for (long v = 0; v < n; v++) {
        int s = atomic_load(&cs.sent[v]), k = atomic_load(&cs.recvd[v]);
        T_CHECK(k <= 1, "round %ld: value %ld received %d times", round, v, k);
        T_CHECK(s == k, "round %ld: value %ld %s", round, v,
                s ? "sent but never received (lost)" : "received but its send failed");
    }
}

/* Receivers parked on a channel are cancelled (from two threads at once)
 * while senders keep sending; then the senders are cancelled. Every value
 * whose send returned 0 was received exactly once; no value whose send
 * failed was received. Unbuffered and buffered channels alternate. */
START_TEST(cancel_during_stream_loses_nothing)
{
    long rounds = t_scale(300);
    cs.n = 100000;                  /* more than any round can send */
    cs.sent = calloc((size_t)cs.n, sizeof *cs.sent);
    cs.recvd = calloc((size_t)cs.n, sizeof *cs.recvd);
    ck_assert(cs.sent && cs.recvd);
    uint32_t r = 2024;
    long total = 0;
    for (long round = 0; round < rounds; round++) {
        ck_assert_int_eq(goro_chan_new(&cs.ch, sizeof(long), round % 2 ? 4 : 0), 0);
        t_fail_reset();
        stress_round(round, &r);
        ck_assert_msg(!t_failed(), "round %ld: %s", round, t_failed());
        stress_check(round);
        long used = atomic_load(&cs.next) < cs.n ? atomic_load(&cs.next) : cs.n;
        memset(cs.sent, 0, (size_t)used * sizeof *cs.sent);       /* the next round */
        memset(cs.recvd, 0, (size_t)used * sizeof *cs.recvd);
        total += used;
        ck_assert_int_eq(goro_chan_free(cs.ch), 0);
    }
    printf("cancel stress: %ld rounds, %ld sends attempted\n", rounds, total);
    free(cs.sent);
    free(cs.recvd);
}
END_TEST

/* ---- randomized race: cancel, deadline and release of every wait kind ----
 *
 * Each round races three ways of ending one wait that has a deadline: the
 * deadline itself (a few microseconds away), goro_cancel, and the partner
 * that completes it, in a random order and at random moments, with the
 * waiter and the driver on different workers. Whatever wins, the wait must
 * end exactly once and leave nothing behind: a release that reports
 * success means the waiter got it, and a timer armed for a finished wait
 * (whose frame is gone) would corrupt the event base or end a later wait.
 * The run lasts GORO_TEST_RACE_MS milliseconds (default 2000). */

enum race_kind {
    RK_SLEEP, RK_RECV, RK_SEND, RK_SELECT, RK_MUTEX, RK_RWLOCK, RK_COND, RK_SEM,
    RK_WAITGROUP, RK_JOIN, RK_READ, RK__COUNT
};
static const char *const race_kind_name[RK__COUNT] = {
    "sleep", "recv", "send", "select", "mutex", "rwlock", "cond", "sem", "waitgroup",
    "join", "read"
};

struct race_slot {
    goro_chan_t *a, *b, *gate;      /* unbuffered; gate releases a join's child */
    goro_mutex_t mu, cmu;
    goro_rwlock_t rw;
    goro_cond_t cv;
    goro_sem_t sem;
    goro_waitgroup_t wg;
    int pipe[2];
    goro_t *child;
    /* one round */
    enum race_kind kind;
    int64_t deadline;
    atomic_int waiting;             /* the waiter is about to wait */
    long result;
    long counts[RK__COUNT][3];      /* done, timed out, cancelled */
};

static long race_child(struct race_slot *s)
{
    long v;
    return goro_chan_recv(s->gate, &v) == 1 ? 5 : -1;
}

/* The waiter: one wait of the round's kind; 1 when it was completed. */
static long race_waiter(struct race_slot *s)
{
    long v = 0, got = 0;
    int r;
    s->deadline += goro_now();      /* from now: the wait parks before it */
    atomic_store(&s->waiting, 1);
    switch (s->kind) {
    case RK_SLEEP:
        r = goro_sleep_until(s->deadline);
        return r == 0 ? -ETIMEDOUT : r;     /* a sleep can only time out */
    case RK_RECV:
        r = goro_chan_recv_until(s->a, &v, s->deadline);
        return r == 1 ? (v == 11 ? 1 : -1000) : r;
    case RK_SEND:
        v = 12;
        r = goro_chan_send_until(s->a, &v, s->deadline);
        return r == 0 ? 1 : r;
    case RK_SELECT: {
        goro_case_t sc[2] = { { s->a, GORO_RECV, &v, -99 }, { s->b, GORO_RECV, &got, -99 } };
        r = goro_select_until(sc, 2, 0, s->deadline);
        return r == 0 ? (v == 11 && sc[0].result == 1 ? 1 : -1000) : r < 0 ? r : -1001;
    }
    case RK_MUTEX:
        r = goro_mutex_lock_until(&s->mu, s->deadline);
        if (r == 0)
            goro_mutex_unlock(&s->mu);
        return r == 0 ? 1 : r;
    case RK_RWLOCK:
        r = goro_rwlock_wrlock_until(&s->rw, s->deadline);
        if (r == 0)
            goro_rwlock_unlock(&s->rw);
        return r == 0 ? 1 : r;
    case RK_COND:
        if (goro_mutex_lock(&s->cmu) != 0)
            return -1002;
        r = goro_cond_wait_until(&s->cv, &s->cmu, s->deadline);
        goro_mutex_unlock(&s->cmu);
        return r == 0 ? 1 : r;
    case RK_SEM:
        r = goro_sem_acquire_until(&s->sem, s->deadline);
        return r == 0 ? 1 : r;
    case RK_WAITGROUP:
        r = goro_waitgroup_wait_until(&s->wg, s->deadline);
        return r == 0 ? 1 : r;
    case RK_JOIN:
        r = goro_join_until(s->child, &got, s->deadline);
        if (r == 0)
            s->child = NULL;
        return r == 0 ? (got == 5 ? 1 : -1003) : r;
    case RK_READ: {
        char c;
        ssize_t n = goro_read_until(s->pipe[0], &c, 1, s->deadline);
        return n == 1 ? 1 : (long)n;
    }
    default:
        return -1004;
    }
}

/* Before the waiter starts: make its wait block. */
static void race_setup(struct race_slot *s)
{
    switch (s->kind) {
    case RK_MUTEX: goro_mutex_lock(&s->mu); break;
    case RK_RWLOCK: goro_rwlock_rdlock(&s->rw); break;
    case RK_WAITGROUP: goro_waitgroup_add(&s->wg, 1); break;
    case RK_JOIN: s->child = go(race_child, s); break;
    default: break;
    }
}

/* The partner's move; true when it completed the wait (or, for the
 * releases that cannot tell, -1: it released what the waiter waits for). */
static int race_release(struct race_slot *s)
{
    long v = 11;
    switch (s->kind) {
    case RK_RECV: case RK_SELECT: return goro_chan_try_send(s->a, &v) == 0;
    case RK_SEND: return goro_chan_try_recv(s->a, &v) == 1 ? (v == 12 ? 1 : -2) : 0;
    case RK_MUTEX: goro_mutex_unlock(&s->mu); return -1;
    case RK_RWLOCK: goro_rwlock_unlock(&s->rw); return -1;
    case RK_COND: goro_cond_signal(&s->cv); return -1;
    case RK_SEM: goro_sem_release(&s->sem); return -1;
    case RK_WAITGROUP: goro_waitgroup_done(&s->wg); return -1;
    case RK_JOIN: goro_chan_send(s->gate, &v); return -1;
    case RK_READ: return write(s->pipe[1], "x", 1) == 1 ? -1 : -2;
    default: return 0;
    }
}

/* After the round: undo what is left, so the next round starts clean. */
static void race_cleanup(struct race_slot *s, bool released)
{
    long v;
    char c;
    int e;
    switch (s->kind) {
    case RK_MUTEX: if (!released) goro_mutex_unlock(&s->mu); break;
    case RK_RWLOCK: if (!released) goro_rwlock_unlock(&s->rw); break;
    case RK_SEM: if (released && s->result != 1) goro_sem_try_acquire(&s->sem); break;
    case RK_WAITGROUP: if (!released) goro_waitgroup_done(&s->wg); break;
    case RK_JOIN:
        if (!released)
            goro_chan_send(s->gate, &v);
        if (s->child && (e = goro_join(s->child, &v)) != 0)
            t_fail("race: the join's child could not be joined: %s (the waiter's join "
                   "returned %ld)", strerror(-e), s->result);
        s->child = NULL;
        break;
    case RK_READ: while (read(s->pipe[0], &c, 1) == 1) {} break;
    default: break;
    }
}

static void race_spin(uint32_t *r, int max_ns)
{
    int64_t until = goro_now() + (int64_t)(t_rnd(r) % (uint32_t)max_ns);
    while (goro_now() < until) {}
}

static void race_round(struct race_slot *s, uint32_t *r)
{
    s->kind = (enum race_kind)(t_rnd(r) % RK__COUNT);
    race_setup(s);
    atomic_store(&s->waiting, 0);
    s->deadline = 2000 + (int64_t)(t_rnd(r) % 20000);      /* the waiter adds now */
    goro_t *h = go(race_waiter, s);
    if (!h) {
        t_fail("race: go failed");
        return;
    }
    /* The waiter sits in our runnext until an idle worker steals it. */
    for (int64_t give_up = goro_now() + GORO_SEC; !atomic_load(&s->waiting);)
        if (goro_now() > give_up)
            goro_yield();
    race_spin(r, 25000);
    int how = (int)(t_rnd(r) % 4);  /* cancel, release, both, or neither */
    int rel = 0;
    bool released = false;
    if (how == 2 && t_rnd(r) % 2) {
        released = true;
        rel = race_release(s);
    }
    if (how == 0 || how == 2)
        goro_cancel(h);
    if (how == 1 || (how == 2 && !released)) {
        if (how == 2)
            race_spin(r, 2000);
        released = true;
        rel = race_release(s);
    }
    int e = goro_join(h, &s->result);
    if (e != 0) {
        t_fail("race: joining the %s waiter failed: %s", race_kind_name[s->kind], strerror(-e));
        return;
    }
    long res = s->result;
    int slot = res == 1 ? 0 : res == -ETIMEDOUT ? 1 : res == -ECANCELED ? 2 : -1;
    if (slot < 0)
        t_fail("race %s: the wait ended with %ld", race_kind_name[s->kind], res);
    else
        s->counts[s->kind][slot]++;
    if (rel == 1 && res != 1)
        t_fail("race %s: the partner completed the wait, the waiter got %ld",
               race_kind_name[s->kind], res);
    if (rel == -2)
        t_fail("race %s: the release failed", race_kind_name[s->kind]);
    race_cleanup(s, released);
}

static long race_driver(struct race_slot *s)
{
    uint32_t r = (uint32_t)(uintptr_t)s | 1;
    const char *ms_env = getenv("GORO_TEST_RACE_MS");
    int64_t ms = ms_env ? atol(ms_env) : 2000;
    int64_t end = goro_now() + (t_slow() ? ms / 4 : ms) * GORO_MSEC;
    long rounds = 0;
    while (goro_now() < end && !t_failed()) {
        race_round(s, &r);
        rounds++;
    }
    return rounds;
}

static int race_child_process(void *arg)
{
    (void)arg;
    enum { DRIVERS = 2 };
    if (goro_start(&(goro_config_t){ .workers = 4 }) != 0)
        return 90;
    static struct race_slot slots[DRIVERS];
    goro_t *d[DRIVERS];
    for (int i = 0; i < DRIVERS; i++) {
        struct race_slot *s = &slots[i];
        if (goro_chan_new(&s->a, sizeof(long), 0) || goro_chan_new(&s->b, sizeof(long), 0) ||
            goro_chan_new(&s->gate, sizeof(long), 0) || goro_sem_init(&s->sem, 0) ||
            pipe2(s->pipe, O_NONBLOCK | O_CLOEXEC))
            return 91;
        d[i] = go(race_driver, s);
    }
    long rounds = 0;
    for (int i = 0; i < DRIVERS; i++) {
        long n = 0;
        if (!d[i] || goro_join(d[i], &n) != 0)
            return 92;
        rounds += n;
    }
    if (t_failed()) {
        printf("%s\n", t_failed());
        return 93;
    }
    printf("race: %ld rounds (done/timed out/cancelled):", rounds);
    for (int k = 0; k < RK__COUNT; k++) {
        long c[3] = { 0, 0, 0 };
        for (int i = 0; i < DRIVERS; i++)
            for (int j = 0; j < 3; j++)
                c[j] += slots[i].counts[k][j];
        printf(" %s %ld/%ld/%ld", race_kind_name[k], c[0], c[1], c[2]);
    }
    printf("\n");
    for (int i = 0; i < DRIVERS; i++) {
        goro_close(slots[i].pipe[0]);
        close(slots[i].pipe[1]);
        if (goro_chan_free(slots[i].a) || goro_chan_free(slots[i].b) ||
            goro_chan_free(slots[i].gate))
            return 94;
    }
    return goro_shutdown() == 0 ? 0 : 95;
}

START_TEST(cancel_deadline_release_race)
{
    const char *ms_env = getenv("GORO_TEST_RACE_MS");
    double secs = (ms_env ? atof(ms_env) / 1000 : 2) + 30;
    static char out[4096];
    int st = t_run_child(race_child_process, NULL, t_timeout(secs), out, sizeof out);
    printf("%s", out);
    ck_assert_msg(st != -1, "the race child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "race child status %#x: %s", st, out);
}
END_TEST

#ifdef GORO_DEBUG
#include "internal.h"

/* ---- debug builds: a cancel that lands while the park still commits ----
 * Once goro__park_commit (sched/park.c) has armed a wait, a lock-free
 * claim (goro_cancel here) may resume the coroutine on the other worker,
 * and that one may run it to its end and free its slab while the commit
 * still reads it. The debug hook holds that window open on the parking
 * worker: it waits for the victim to be gone (its token says so, and a
 * little longer for its slab to
 * be unmapped: a 64 KiB stack in mprotect mode is) or for 500 ms, whichever
 * comes first. The victim must still be there when the hook gives up: it
 * may not end before its park has finished with it. */
static _Atomic(goro_t *) armed_target;
static _Atomic int armed_seen, armed_victim_gone, armed_hook_done, armed_start;

static void hold_armed(struct goro *g)
{
    if (g != atomic_load(&armed_target))
        return;
    atomic_store(&armed_seen, 1);
    for (int ms = 0; ms < 500 && !atomic_load(&armed_victim_gone); ms++)
        usleep(1000);
    atomic_store(&armed_hook_done, 1 + atomic_load(&armed_victim_gone));
}

static long armed_victim(void)
{
    atomic_store(&armed_target, goro_self());
    while (!atomic_load(&armed_start))
        goro_yield();
    return goro_sleep(60 * GORO_SEC);
}

static int armed_child(void *arg)
{
    (void)arg;
    goro_config_t cfg = { .workers = 2 };
    setenv("GORO_STACK_GUARD", "mprotect", 1);    /* a freed odd slab is unmapped */
    if (goro_start(&cfg) != 0)
        return 10;
    goro__debug_park_armed = hold_armed;
    goro_attr_t odd = { .stack_size = 64 * 1024 };
    goro_t *h;
    goro_token_t tok;
    if (goro_go(&h, &odd, armed_victim) != 0 || goro_token(h, &tok) != 0)
        return 11;
    while (!atomic_load(&armed_target))
        usleep(100);
    goro_detach(h);
    atomic_store(&armed_start, 1);
    if (!t_wait_flag(&armed_seen, 10))
        return 12;                                /* the victim never parked */
    if (goro_cancel_token(tok) != 0)
        return 13;
    int gone = 0;
    for (int ms = 0; ms < 10000 && !atomic_load(&armed_hook_done); ms++) {
        if (!gone && goro_cancel_token(tok) == -ESRCH) {
            gone = 1;
            usleep(20 * 1000);                    /* its slab released */
            atomic_store(&armed_victim_gone, 1);
        }
        usleep(1000);
    }
    int hook = atomic_load(&armed_hook_done);
    goro__debug_park_armed = NULL;
    for (int ms = 0; ms < 10000 && goro_cancel_token(tok) != -ESRCH; ms++)
        usleep(1000);
    printf("hook=%d gone=%d\n", hook, goro_cancel_token(tok) == -ESRCH);
    if (hook != 1)
        return hook ? 14 : 15;    /* 14: the victim ended while its park committed */
    return goro_shutdown() == 0 ? 0 : 16;
}

START_TEST(debug_cancel_waits_for_the_parks_commit)
{
    static char out[4096];
    int st = t_run_child(armed_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
    ck_assert_msg(strstr(out, "hook=1 gone=1"), "%s", out);
}
END_TEST
#endif

Suite *cancel_suite(void)
{
    Suite *s = suite_create("cancel");
    TCase *tc = t_runtime_tcase(s, "cancel", 30);
    tcase_add_loop_test(tc, cancel_parked_wait, 0, NBLOCKERS);
    tcase_add_test(tc, real_clock_cancel_latency);
    tcase_add_loop_test(tc, cancel_before_wait, 0, NBLOCKERS);
    tcase_add_loop_test(tc, group_cancel_ends_every_wait, 0, NBLOCKERS);
    tcase_add_test(tc, cancelled_coroutine_releases_what_it_holds);
    tcase_add_test(tc, cancel_is_per_coroutine);
    tcase_add_test(tc, cancel_twice_finished_self_and_bad);
    tcase_add_test(tc, offload_and_once_run_to_their_end);
    tcase_add_test(tc, cancel_during_stream_loses_nothing);
    /* its own child process and runtime (4 workers); the timeout follows
     * GORO_TEST_RACE_MS (the child's own limit is what catches a hang) */
    tc = t_tcase(s, "race", 3600);
    tcase_add_test(tc, cancel_deadline_release_race);
#ifdef GORO_DEBUG
    tc = t_tcase(s, "debug", 30);
    tcase_add_test(tc, debug_cancel_waits_for_the_parks_commit);
#endif
    return s;
}
