/* Closing: goro_close and goro_fd_release under waiters, a call that
 * comes while goro_close closes its descriptor, a fresh file on a number
 * goro_close has just closed, and no preemption while goro_close runs the
 * executable's code under a record lock.
 *
 * Part of the io suite (test_io.c registers it). Coroutines never call
 * ck_assert (see helpers.h): they note problems with t_fail() and the
 * test asserts at the end. */
#include "test_io.h"

/* ---- close and release under waiters ---- */

static long accept_one(int fd)
{
    atomic_store(&waiter_in, 1);
    return goro_accept(fd, NULL, NULL);
}

static long write_forever(int fd)
{
    static char junk[1 << 16];
    atomic_store(&waiter_in, 1);
    for (;;) {
        ssize_t w = goro_write(fd, junk, sizeof junk);
        if (w < 0)
            return w;
    }
}

/* Spawns fn(fd), lets it park, closes fd (goro_close) and checks that the
 * waiter wakes promptly with -EBADF. */
static void close_under(long (*fn)(int), int fd, const char *what)
{
    atomic_store(&waiter_in, 0);
    goro_t *h = spawn_announced(go(fn, fd));
    double t0 = t_now();
    ck_assert_int_eq(goro_close(fd), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    double dt = t_now() - t0;
    ck_assert_msg(r == -EBADF, "%s: waiter got %ld, want -EBADF", what, r);
    ck_assert_msg(dt < t_prompt(), "%s: waiter woke %.0f ms after the close", what, dt * 1e3);
}

static long round_trip_on(int fd[2])
{
    char c = 0;
    ssize_t r = goro_read(fd[0], &c, 1);
    return r == 1 ? c : r;
}

/* A reused descriptor number must start clean: no stale registration. */
static void fresh_pair_works(void)
{
    int p[2];
    make_socketpair(SOCK_STREAM, p);
    goro_t *h = go(round_trip_on, p);
    ck_assert_ptr_nonnull(h);
    t_settle();
    ck_assert_int_eq(goro_write(p[1], "k", 1), 1);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 'k');
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);
}

/* ---- a call that comes while goro_close closes its descriptor ----
 * The test binary is linked with -Wl,--wrap=close: every close(2) of the
 * runtime passes here, and one can be held up on purpose, which opens the
 * window between goro_close's release of the record and close(2) wide. */
int __real_close(int fd);
int __wrap_close(int fd);
static atomic_int slow_close_fd = -1;
static atomic_long in_slow_close;
/* Runs right after close(2) of this number has returned, inside the
 * goro_close that called it (see fresh_file_on_a_closed_number). */
static atomic_int reuse_fd = -1;
static void reuse_number(int fd);
/* Computes in the wrapper for this long, on this number (see
 * no_preemption_under_a_record_lock). */
static atomic_int spin_close_fd = -1;
static void spin_in_close(void);

int __wrap_close(int fd)
{
    if (fd >= 0 && atomic_load(&slow_close_fd) == fd) {
        atomic_store(&in_slow_close, 1);
        t_nap(0.05);
    }
    if (fd >= 0 && atomic_load(&spin_close_fd) == fd)
        spin_in_close();
    int r = __real_close(fd);
    if (fd >= 0 && atomic_exchange(&reuse_fd, -1) == fd)
        reuse_number(fd);
    return r;
}

static void *close_slowly(void *fd)
{
    return (void *)(intptr_t)goro_close((int)(intptr_t)fd);
}

static long read_once(int fd)
{
    char c;
    return goro_read(fd, &c, 1);
}

/* The read must be refused (-EBADF): it used to make the closing
 * descriptor non-blocking, register it and park on that registration,
 * which close(2) then removed - for ever. */
START_TEST(call_while_goro_close_closes_is_refused)
{
    int s[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
    /* The read may come after close(2) (it waits for the record's lock
     * while close(2) runs, and a slow machine may start it later still):
     * the number must then stay free. The kernel gives open() the lowest
     * free number, so a number far above those in use stays free, and the
     * read cannot find some other thread's fresh file on it (sysmon's
     * /proc reads, for one). */
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    int want = rl.rlim_cur > 701 ? 700 : (int)rl.rlim_cur - 1;
    int hi = fcntl(s[0], F_DUPFD_CLOEXEC, want);
    ck_assert_int_ge(hi, want);
    ck_assert_int_eq(close(s[0]), 0);
    s[0] = hi;
    char c;
    ck_assert_int_eq(goro_read_until(s[0], &c, 1, goro_now() + GORO_MSEC), -ETIMEDOUT);
    atomic_store(&in_slow_close, 0);
    atomic_store(&slow_close_fd, s[0]);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, close_slowly, (void *)(intptr_t)s[0]), 0);
    ck_assert_int_eq(t_wait_at_least(&in_slow_close, 1, t_timeout(5)), 1);
    goro_t *h = go(read_once, s[0]);
    ck_assert_ptr_nonnull(h);
    long r = 0;
    int j = goro_join_until(h, &r, goro_now() + (int64_t)(t_timeout(2) * GORO_SEC));
    void *closed;
    ck_assert_int_eq(pthread_join(th, &closed), 0);
    atomic_store(&slow_close_fd, -1);
    ck_assert_msg(j == 0, "a read begun while goro_close was closing its descriptor was "
                  "still waiting after %.0f s", t_timeout(2));
    ck_assert_int_eq(r, -EBADF);
    ck_assert_int_eq((int)(intptr_t)closed, 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

START_TEST(close_wakes_waiters)
{
    int p[2];
    make_socketpair(SOCK_STREAM, p);
    close_under(read_one, p[0], "read");
    fresh_pair_works();
    ck_assert_int_eq(goro_close(p[1]), 0);

    make_pipe(p);
    close_under(wait_readable, p[0], "wait_fd");
    fresh_pair_works();
    ck_assert_int_eq(goro_close(p[1]), 0);

    make_socketpair(SOCK_STREAM, p);
    close_under(write_forever, p[0], "write");
    fresh_pair_works();
    ck_assert_int_eq(goro_close(p[1]), 0);

    int l = t_tcp_listener(8, NULL);
    close_under(accept_one, l, "accept");
    fresh_pair_works();

    /* two readers on one descriptor both wake */
    make_socketpair(SOCK_STREAM, p);
    atomic_store(&readers_waiting, 0);
    goro_t *a = go(read_byte, p[0]), *b = go(read_byte, p[0]);
    ck_assert_int_eq(t_wait_at_least(&readers_waiting, 2, t_timeout(10)), 2);
    t_settle();
    ck_assert_int_eq(goro_close(p[0]), 0);
    long ra = 0, rb = 0;
    ck_assert_int_eq(goro_join(a, &ra), 0);
    ck_assert_int_eq(goro_join(b, &rb), 0);
    ck_assert_int_eq(ra, -1000 - EBADF);
    ck_assert_int_eq(rb, -1000 - EBADF);
    ck_assert_int_eq(goro_close(p[1]), 0);
}
END_TEST

/* goro_fd_release: waiters wake with -EBADF, the descriptor stays open and
 * works with plain calls; goro may take it up again later. */
/* ---- a fresh file on a number goro_close has just closed ----
 * Once close(2) has returned, the number is anybody's: another thread's
 * open() may get it at once, and its calls on that fresh file must work.
 * They used to get -EBADF while goro_close had not yet cleared the mark it
 * put on the number's record before close(2). Here the number is taken
 * inside that window (reuse_number runs in the close wrapper), and a
 * plain thread uses it; the window stays open for up to a settle. */
static struct {
    int peer;                       /* the fresh socket's other end */
    atomic_int go, done;
    long wrote, read, ready;
    char got;
} fresh;

static void reuse_number(int fd)
{
    int q[2];
    /* The kernel hands out the lowest free number: fd, unless another
     * thread took it first (then it is put there). */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, q) != 0 ||
        (q[0] != fd && (dup2(q[0], fd) != fd || __real_close(q[0]) != 0)) ||
        write(q[1], "n", 1) != 1) {
        t_fail("could not put a fresh socket on %d: %s", fd, strerror(errno));
        return;
    }
    fresh.peer = q[1];
    atomic_store(&fresh.go, 1);
    t_wait_flag(&fresh.done, t_timeout(0.2));   /* goro_close has not returned yet */
}

static void *use_fresh_number(void *arg)
{
    int fd = (int)(intptr_t)arg;
    if (!t_wait_flag(&fresh.go, t_timeout(10)))
        return NULL;
    fresh.wrote = goro_write(fd, "w", 1);
    fresh.read = goro_read(fd, &fresh.got, 1);
    fresh.ready = goro_wait_fd(fd, GORO_READABLE | GORO_WRITABLE, goro_now() + GORO_SEC);
    atomic_store(&fresh.done, 1);
    return NULL;
}

START_TEST(fresh_file_on_a_closed_number)
{
    int s[2];
    make_socketpair(SOCK_STREAM, s);
    char c;
    /* registered with a poller, as a descriptor in use is */
    ck_assert_int_eq(goro_read_until(s[0], &c, 1, goro_now() + GORO_MSEC), -ETIMEDOUT);
    memset(&fresh, 0, sizeof fresh);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, use_fresh_number, (void *)(intptr_t)s[0]), 0);
    atomic_store(&reuse_fd, s[0]);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&fresh.done), 1);
    ck_assert_msg(fresh.wrote == 1 && fresh.read == 1 && fresh.got == 'n',
                  "calls on a fresh file on a just-closed number: write %ld, read %ld "
                  "('%c'), want 1, 1 ('n')", fresh.wrote, fresh.read, fresh.got ? fresh.got : '?');
    ck_assert_int_eq(fresh.ready, GORO_WRITABLE);
    ck_assert_int_eq(read(fresh.peer, &c, 1), 1);
    ck_assert_int_eq(c, 'w');
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(close(fresh.peer), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

/* ---- the executable's code run under a lock of goro's ----
 * goro_close calls close(2) holding the descriptor's record lock. Here
 * that call lands in the executable's own code (the wrapper above), which
 * is a safe point for preemption, and computes there for a while. A
 * coroutine suspended there would keep the record locked while others ran
 * on its thread: one of them taking that lock would wait for ever, since
 * the holder is pinned to the thread it blocks. So the closer must not be
 * preempted while it holds the lock (sysmon hands its worker's queue to
 * another thread instead): no coroutine runs on the closer's thread until
 * close(2) has returned. It failed before the lock count (base/lock.h):
 * the neighbours ran there within a slice, and debug builds aborted on
 * the lock order (fdreuse, 1 run in 5 under ASan). */
static atomic_int spinning_tid;     /* the closer's thread, while it spins */
static atomic_long ran_beside;      /* neighbours that ran there meanwhile */
static atomic_int neighbours_stop;

static void spin_in_close(void)
{
    atomic_store(&spinning_tid, (int)gettid());
    double end = t_now() + 0.15;
    volatile unsigned long x = 0;
    while (t_now() < end)
        x = x + 1;
    atomic_store(&spinning_tid, 0);
}

static long neighbour(void)
{
    long turns = 0;
    while (!atomic_load(&neighbours_stop)) {
        int t = atomic_load(&spinning_tid);
        if (t && t == (int)gettid())
            atomic_fetch_add(&ran_beside, 1);
        goro_yield();
        turns++;
    }
    return turns;
}

static long close_spinning(int fd)
{
    atomic_store(&spin_close_fd, fd);
    return goro_close(fd);
}

START_TEST(no_preemption_under_a_record_lock)
{
    enum { NEIGHBOURS = 4 };
    int s[2];
    make_socketpair(SOCK_STREAM, s);
    char c;
    /* registered with a poller, so that goro_close retires a record */
    ck_assert_int_eq(goro_read_until(s[0], &c, 1, goro_now() + GORO_MSEC), -ETIMEDOUT);
    atomic_store(&ran_beside, 0);
    atomic_store(&neighbours_stop, 0);
    goro_t *n[NEIGHBOURS];
    for (int i = 0; i < NEIGHBOURS; i++)
        ck_assert_ptr_nonnull(n[i] = go(neighbour));
    goro_t *closer = go(close_spinning, s[0]);
    ck_assert_ptr_nonnull(closer);
    long r = -1;
    ck_assert_int_eq(goro_join(closer, &r), 0);
    atomic_store(&spin_close_fd, -1);
    atomic_store(&neighbours_stop, 1);
    long turns = 0;
    for (int i = 0; i < NEIGHBOURS; i++) {
        long t = 0;
        ck_assert_int_eq(goro_join(n[i], &t), 0);
        turns += t;
    }
    printf("io: a close computing 150 ms in the executable under a record lock (async "
           "preemption %s): neighbours took %ld turns, %ld of them on its thread\n",
           t_async_preemption() ? "on" : "off", turns, atomic_load(&ran_beside));
    ck_assert_int_eq(r, 0);
    ck_assert_msg(atomic_load(&ran_beside) == 0,
                  "%ld turns of other coroutines ran on the thread of a coroutine that held "
                  "a record lock: it was preempted holding it", atomic_load(&ran_beside));
    ck_assert_int_gt(turns, 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

START_TEST(release_keeps_fd_open)
{
    int p[2];
    make_pipe(p);
    atomic_store(&waiter_in, 0);
    goro_t *h = spawn_announced(go(read_one, p[0]));
    double t0 = t_now();
    ck_assert_int_eq(goro_fd_release(p[0]), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -EBADF);
    ck_assert_msg(t_now() - t0 < t_prompt(), "release woke the waiter late");
    ck_assert(is_open(p[0]));
    ck_assert_int_eq(write(p[1], "r", 1), 1);
    char c = 0;
    ck_assert_int_eq(read(p[0], &c, 1), 1);     /* plain read, fd still fine */
    ck_assert_int_eq(c, 'r');
    ck_assert_int_eq(goro_fd_release(-1), -EBADF);
    /* used with goro again: it parks and wakes as before */
    atomic_store(&waiter_in, 0);
    h = spawn_announced(go(read_one, p[0]));
    ck_assert_int_eq(write(p[1], "s", 1), 1);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(goro_fd_release(p[0]), 0);
    ck_assert_int_eq(close(p[0]), 0);
    ck_assert_int_eq(close(p[1]), 0);          /* never given to goro */
    fresh_pair_works();
}
END_TEST

/* Adds this file's tests to the io suite's test cases (test_io.h). */
void io_close_tests(struct io_tcases *tc)
{
    tcase_add_test(tc->io, close_wakes_waiters);
    tcase_add_test(tc->io, call_while_goro_close_closes_is_refused);
    tcase_add_test(tc->io, fresh_file_on_a_closed_number);
    tcase_add_test(tc->io, no_preemption_under_a_record_lock);
    tcase_add_test(tc->io, release_keeps_fd_open);
}
