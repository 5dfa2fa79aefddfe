/* Descriptor numbers reused at once: goro_close racing other threads that
 * make new descriptors and use them through goro.
 *
 *  - fresh_numbers_are_never_refused: a number goro_close has just freed
 *    and the kernel hands out again is a fresh file; the first goro call
 *    on it must work, never say -EBADF because of the old file's close.
 *  - closed_readers_never_read_a_new_file: a reader inside a goro call on
 *    a descriptor that another thread closes ends with the old file's data
 *    or -EBADF, never with the data of the socket that took the number.
 *  - select_woken_by_an_edge_never_reports_a_new_file: a select's
 *    descriptor case woken by an edge looks at the level again; if the
 *    descriptor is closed and its number taken by another file while it
 *    looks, it says -EBADF or the old file's readiness, never the new
 *    file's (deterministic: the test binary wraps poll(2)).
 *
 * The first two run GORO_TEST_FDREUSE_MS milliseconds (default 2000; a
 * quarter when slow). Coroutines and foreign threads note problems with
 * t_fail(). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

static double run_seconds(void)
{
    const char *ms = getenv("GORO_TEST_FDREUSE_MS");
    double s = (ms ? atof(ms) : 2000) / 1000;
    return t_slow() ? s / 4 : s;
}

static atomic_int stop;

static bool pair(int s[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) == 0)
        return true;
    t_fail("socketpair: %s", strerror(errno));
    return false;
}

/* ---- fresh numbers ----
 * Closers register a descriptor with a poller (a read that times out at
 * once) and goro_close it; users make socket pairs, which get the numbers
 * just freed, and use them at once. */

static atomic_long closes, uses;

static void close_loop(void)
{
    while (!atomic_load(&stop) && !t_failed()) {
        int s[2];
        char c;
        if (!pair(s))
            return;
        long r = goro_read_until(s[0], &c, 1, goro_now());
        if (r != -ETIMEDOUT)
            t_fail("closer: read on an idle socket said %ld", r);
        if (goro_close(s[0]) != 0 || goro_close(s[1]) != 0)
            t_fail("closer: goro_close failed");
        atomic_fetch_add(&closes, 1);
    }
}

static void use_loop(void)
{
    while (!atomic_load(&stop) && !t_failed()) {
        int q[2];
        char c = 0;
        if (!pair(q))
            return;
        long w = goro_write(q[0], "x", 1);
        long r = w == 1 ? goro_read(q[1], &c, 1) : 0;
        long ready = r == 1 ? goro_wait_fd(q[0], GORO_WRITABLE, goro_now() + GORO_SEC) : 0;
        if (w != 1 || r != 1 || c != 'x' || ready != GORO_WRITABLE)
            t_fail("on fresh socket pair %d/%d: write %ld, read %ld ('%c'), wait_fd %ld "
                   "(after %ld uses, %ld closes)", q[0], q[1], w, r, c ? c : '?', ready,
                   atomic_load(&uses), atomic_load(&closes));
        goro_close(q[0]);
        goro_close(q[1]);
        atomic_fetch_add(&uses, 1);
    }
}

static long close_coro(void) { close_loop(); return 0; }
static long use_coro(void) { use_loop(); return 0; }
static void *close_thread(void *arg) { (void)arg; close_loop(); return NULL; }
static void *use_thread(void *arg) { (void)arg; use_loop(); return NULL; }

START_TEST(fresh_numbers_are_never_refused)
{
    enum { EACH = 2 };
    atomic_store(&stop, 0);
    atomic_store(&closes, 0);
    atomic_store(&uses, 0);
    pthread_t th[2 * EACH];
    goro_t *g[2 * EACH];
    for (int i = 0; i < EACH; i++) {
        ck_assert_int_eq(pthread_create(&th[2 * i], NULL, close_thread, NULL), 0);
        ck_assert_int_eq(pthread_create(&th[2 * i + 1], NULL, use_thread, NULL), 0);
        g[2 * i] = go(close_coro);
        g[2 * i + 1] = go(use_coro);
        ck_assert(g[2 * i] && g[2 * i + 1]);
    }
    double end = t_now() + run_seconds();
    while (t_now() < end && !t_failed())
        t_nap(0.01);
    atomic_store(&stop, 1);
    for (int i = 0; i < 2 * EACH; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_int_eq(goro_join(g[i], NULL), 0);
    }
    printf("fdreuse: %ld closes, %ld fresh pairs used\n", atomic_load(&closes),
           atomic_load(&uses));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_gt(atomic_load(&uses), 0);
}
END_TEST

/* ---- readers of closed descriptors ----
 * A reader coroutine is inside goro_read_full for two bytes: it has taken
 * the first ('O'), which the closer sees (nothing left to read). The
 * closer sends the second ('P'), which wakes the reader, and at once, or
 * a little later, goro_closes the reader's descriptor and makes socket
 * pairs with data ('N') that take the number. Busy coroutines keep the
 * workers' queues full, so that a woken reader waits a while before it
 * runs: the close then lands between its wake-up and its read. */

static atomic_long got_old, got_ebadf, number_taken;

static long read_two(int fd)
{
    char buf[2] = { 0, 0 };
    size_t got = 0;
    long r = goro_read_full_until(fd, buf, 2, &got, goro_now() + (int64_t)(t_timeout(10) * GORO_SEC));
    for (size_t i = 0; i < got; i++)
        if (buf[i] != "OP"[i])
            t_fail("a reader of closed descriptor %d got '%c' at %zu (read_full: %ld): the "
                   "data of the socket that took the number", fd, buf[i], i, r);
    if (r == 2)
        atomic_fetch_add(&got_old, 1);
    else if (r == -EBADF)
        atomic_fetch_add(&got_ebadf, 1);
    else
        t_fail("a reader of closed descriptor %d: read_full said %ld, want 2 or -EBADF", fd, r);
    return r;
}

static long busy(void)
{
    while (!atomic_load(&stop)) {
        double until = t_now() + 50e-6;
        while (t_now() < until)
            ;
        goro_yield();
    }
    return 0;
}

static long queued(int fd)
{
    int n = -1;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

static void close_round(uint32_t *rnd)
{
    int a[2], b[2][2];
    if (!pair(a))
        return;
    goro_t *h = go(read_two, a[0]);
    if (!h) {
        t_fail("go: %s", strerror(errno));
        return;
    }
    /* The reader is inside its call once it has taken the first byte. */
    double limit = t_now() + t_timeout(10);
    if (write(a[1], "O", 1) != 1)
        t_fail("write: %s", strerror(errno));
    while (queued(a[0]) != 0 && t_now() < limit)
        sched_yield();
    if (write(a[1], "P", 1) != 1)
        t_fail("write: %s", strerror(errno));
    double until = t_now() + (t_rnd(rnd) % 400) * 1e-6;
    while (t_now() < until)
        ;
    int old = a[0];
    if (goro_close(a[0]) != 0)
        t_fail("goro_close of the reader's descriptor failed");
    for (int i = 0; i < 2; i++) {
        if (!pair(b[i]))
            return;
        if (write(b[i][0], "NN", 2) != 2 || write(b[i][1], "NN", 2) != 2)
            t_fail("write: %s", strerror(errno));
        for (int j = 0; j < 2; j++)
            if (b[i][j] == old)
                atomic_fetch_add(&number_taken, 1);
    }
    long r = 0;
    if (goro_join(h, &r) != 0)
        t_fail("join of a reader failed");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            goro_close(b[i][j]);
    goro_close(a[1]);
}

static void *closer(void *arg)
{
    uint32_t rnd = (uint32_t)(uintptr_t)arg * 2654435761u | 1;
    while (!atomic_load(&stop) && !t_failed())
        close_round(&rnd);
    return NULL;
}

START_TEST(closed_readers_never_read_a_new_file)
{
    enum { CLOSERS = 2 };
    int nbusy = 2 * goro_workers();
    atomic_store(&stop, 0);
    atomic_store(&got_old, 0);
    atomic_store(&got_ebadf, 0);
    atomic_store(&number_taken, 0);
    goro_t *bz[16];
    if (nbusy > 16)
        nbusy = 16;
    for (int i = 0; i < nbusy; i++) {
        bz[i] = go(busy);
        ck_assert_ptr_nonnull(bz[i]);
    }
    pthread_t th[CLOSERS];
    for (int i = 0; i < CLOSERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, closer, (void *)(uintptr_t)(i + 1)), 0);
    double end = t_now() + run_seconds();
    while (t_now() < end && !t_failed())
        t_nap(0.01);
    atomic_store(&stop, 1);
    for (int i = 0; i < CLOSERS; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < nbusy; i++)
        ck_assert_int_eq(goro_join(bz[i], NULL), 0);
    printf("fdreuse: readers of closed descriptors: %ld got the old data, %ld -EBADF; "
           "%ld numbers taken by new sockets\n", atomic_load(&got_old), atomic_load(&got_ebadf),
           atomic_load(&number_taken));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_gt(atomic_load(&got_old) + atomic_load(&got_ebadf), 0);
}
END_TEST

/* ---- a select woken by an edge while its descriptor is closed ----
 * The test binary is linked with -Wl,--wrap=poll: every poll(2) of the
 * runtime passes here. A select's descriptor case polls its descriptor
 * twice: once under the locks before it waits (nothing there yet), once
 * when an edge has woken it. At the second, a thread goro_closes the
 * descriptor and puts a readable file on its number (dup2) - before the
 * poll, unless the runtime holds that off - and the poll goes on. */

int __real_poll(struct pollfd *fds, nfds_t n, int timeout);
int __wrap_poll(struct pollfd *fds, nfds_t n, int timeout);

static atomic_int hook_fd = -1;    /* the select's descriptor, while armed */
static atomic_long hook_polls;     /* polls that asked about it, once done */
static int hook_fresh;             /* a readable file to put on its number */
static atomic_int reused;          /* the closer is done: closed and reused */
static atomic_bool reused_before_poll;
static pthread_t hook_thread;

static void *close_and_reuse(void *unused)
{
    (void)unused;
    int fd = atomic_load(&hook_fd);
    int err = goro_close(fd);
    if (err)
        t_fail("goro_close of the select's descriptor: %d", err);
    else if (dup2(hook_fresh, fd) != fd)
        t_fail("dup2 onto the closed number: %s", strerror(errno));
    atomic_store(&reused, 1);
    return NULL;
}

/* On the select's thread, maybe under the record's lock: no goro call,
 * no switch - a plain wait of the thread. The closer can finish only if
 * nothing holds it off; then the poll below sees the new file. */
static void reuse_now(void)
{
    if (pthread_create(&hook_thread, NULL, close_and_reuse, NULL) != 0) {
        t_fail("pthread_create: %s", strerror(errno));
        return;
    }
    double end = t_now() + t_timeout(0.25);
    while (!atomic_load(&reused) && t_now() < end)
        t_nap(0.001);
    atomic_store(&reused_before_poll, atomic_load(&reused) != 0);
}

int __wrap_poll(struct pollfd *fds, nfds_t n, int timeout)
{
    int fd = atomic_load(&hook_fd);
    for (nfds_t i = 0; fd >= 0 && i < n; i++)
        if (fds[i].fd == fd) {
            /* Counted once it has looked: counted before, the test's
             * write could land between the count and the first look,
             * which then found the byte itself and never polled again
             * (2 of 40 runs under TSan). */
            if (atomic_load(&hook_polls) == 1)
                reuse_now();
            int r = __real_poll(fds, n, timeout);
            atomic_fetch_add(&hook_polls, 1);
            return r;
        }
    return __real_poll(fds, n, timeout);
}

static long select_read(int fd)
{
    goro_case_t c = { .op = GORO_FD_READ, .elem = &fd };
    int r = goro_select(&c, 1, 0);
    return r < 0 ? r : c.result;
}

START_TEST(select_woken_by_an_edge_never_reports_a_new_file)
{
    int s[2], fresh[2];
    ck_assert(pair(s) && pair(fresh));
    ck_assert_int_eq(write(fresh[1], "n", 1), 1);
    hook_fresh = fresh[0];
    atomic_store(&reused, 0);
    atomic_store(&hook_polls, 0);
    atomic_store(&hook_fd, s[0]);
    goro_t *h = go(select_read, s[0]);
    ck_assert_ptr_nonnull(h);
    /* The select has looked (nothing to read) under the record's lock, in
     * the hold in which it queues: an edge from here on wakes it. */
    ck_assert_int_ge(t_wait_at_least(&hook_polls, 1, t_timeout(5)), 1);
    ck_assert_int_eq(write(s[1], "o", 1), 1);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    atomic_store(&hook_fd, -1);
    ck_assert_int_eq(atomic_load(&hook_polls), 2);
    ck_assert_int_eq(pthread_join(hook_thread, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    bool first = atomic_load(&reused_before_poll);
    ck_assert_msg(r == (first ? -EBADF : GORO_READABLE),
                  "a select woken by an edge on a descriptor %s said %ld, want %d",
                  first ? "closed and reused before it looked again"
                        : "closed only after it looked again", r,
                  first ? -EBADF : GORO_READABLE);
    ck_assert_int_eq(goro_close(s[0]), 0);   /* the fresh file's dup by now */
    ck_assert_int_eq(goro_close(s[1]), 0);
    ck_assert_int_eq(goro_close(fresh[0]), 0);
    ck_assert_int_eq(goro_close(fresh[1]), 0);
}
END_TEST

Suite *fdreuse_suite(void)
{
    Suite *s = suite_create("fdreuse");
    double secs = run_seconds() + 30;
    TCase *tc = t_runtime_tcase(s, "fdreuse", secs);
    tcase_add_test(tc, fresh_numbers_are_never_refused);
    tcase_add_test(tc, closed_readers_never_read_a_new_file);
    tcase_add_test(tc, select_woken_by_an_edge_never_reports_a_new_file);
    return s;
}
