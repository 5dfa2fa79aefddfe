/* Pipes, socketpairs, datagrams (unix and UDP), a pipe without a reader
 * (SIGPIPE), a socket reusing a pipe's number, regular files and devices.
 *
 * Part of the io suite (test_io.c registers it). Coroutines never call
 * ck_assert (see helpers.h): they note problems with t_fail() and the
 * test asserts at the end. */
#include "test_io.h"

#include <poll.h>

/* ---- pipes, socketpairs, datagrams ---- */

enum { PIPE_BYTES = 1 << 20 };

static long pipe_writer(int fd)
{
    uint8_t buf[9000];
    uint32_t r = 99;
    size_t off = 0;
    while (off < PIPE_BYTES) {
        size_t n = 1 + t_rnd(&r) % sizeof buf;
        if (n > PIPE_BYTES - off)
            n = PIPE_BYTES - off;
        fill(buf, n, 3, off);
        ssize_t w = goro_write(fd, buf, n);     /* may be partial */
        if (w <= 0 || (size_t)w > n) {
            t_fail("pipe write: %zd", w);
            break;
        }
        off += (size_t)w;
    }
    return goro_close(fd);                      /* the reader sees end of file */
}

/* Round trips over a stream: the initiator sends 2i and expects 2i + 1
 * back, the responder answers every v with v + 1. */
long pingpong(int fd, long n, long initiator)
{
    for (long i = 0; i < n; i++) {
        long v = 2 * i;
        if (initiator && goro_write_all(fd, &v, sizeof v) != sizeof v) {
            t_fail("pingpong %ld: write", i);
            return -1;
        }
        ssize_t r = goro_read_full(fd, &v, sizeof v);
        long want = initiator ? 2 * i + 1 : 2 * i;
        if (r != sizeof v || v != want) {
            t_fail("pingpong %ld: read %zd, value %ld, want %ld", i, r, v, want);
            return -1;
        }
        v++;
        if (!initiator && goro_write_all(fd, &v, sizeof v) != sizeof v) {
            t_fail("pingpong %ld: write back", i);
            return -1;
        }
    }
    return 0;
}

static long dgram_sender(int fd, long n)
{
    uint8_t buf[3000];
    for (long i = 0; i < n; i++) {
        size_t len = 1 + (size_t)(i * 397) % sizeof buf;
        fill(buf, len, (uint32_t)i, 0);
        ssize_t w = goro_send(fd, buf, len, 0);
        if (w != (ssize_t)len) {
            t_fail("datagram %ld: send %zd of %zu", i, w, len);
            return -1;
        }
    }
    return 0;
}

START_TEST(pipes_socketpairs_datagrams)
{
    /* a pipe: 1 MiB in random pieces, then end of file */
    int p[2];
    make_pipe(p);
    goro_t *h = go(pipe_writer, p[1]);
    ck_assert_ptr_nonnull(h);
    uint8_t *buf = xmalloc(PIPE_BYTES);
    ck_assert_int_eq(goro_read_full(p[0], buf, PIPE_BYTES), PIPE_BYTES);
    ck_assert_int_eq(mismatch(buf, PIPE_BYTES, 3, 0), -1);
    ck_assert_int_eq(goro_read(p[0], buf, 1), 0);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_close(p[0]), 0);
    free(buf);

    /* a stream socketpair: many round trips, each side parked in turn */
    make_socketpair(SOCK_STREAM, p);
    long n = t_scale(5000);
    goro_t *a = go(pingpong, p[0], n, 1L), *b = go(pingpong, p[1], n, 0L);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(goro_join(a, NULL), 0);
    ck_assert_int_eq(goro_join(b, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);

    /* a datagram socketpair keeps message boundaries and order (the
     * sender outruns the reader and parks on a full socket) */
    make_socketpair(SOCK_DGRAM, p);
    n = t_scale(2000);
    h = go(dgram_sender, p[0], n);
    ck_assert_ptr_nonnull(h);
    uint8_t dg[4096];
    for (long i = 0; i < n; i++) {
        size_t len = 1 + (size_t)(i * 397) % 3000;
        ssize_t got = goro_recv(p[1], dg, sizeof dg, 0);
        T_CHECK(got == (ssize_t)len && mismatch(dg, len, (uint32_t)i, 0) < 0,
                "datagram %ld: %zd bytes, want %zu", i, got, len);
    }
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);
}
END_TEST

static long udp_echo(int fd)
{
    char buf[64];
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    ssize_t n = goro_recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
    if (n <= 0 || len != sizeof from) {
        t_fail("recvfrom: %zd, len %u", n, len);
        return -1;
    }
    return goro_sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
}

/* UDP on loopback: recvfrom reports the sender, sendto answers it. */
START_TEST(udp_sendto_recvfrom)
{
    int s = goro_socket(AF_INET, SOCK_DGRAM, 0), c = goro_socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_ge(s, 0);
    ck_assert_int_ge(c, 0);
    struct sockaddr_in sa = t_loopback(0), ca = t_loopback(0);
    socklen_t len = sizeof sa;
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(getsockname(s, (struct sockaddr *)&sa, &len), 0);
    ck_assert_int_eq(bind(c, (struct sockaddr *)&ca, sizeof ca), 0);
    len = sizeof ca;
    ck_assert_int_eq(getsockname(c, (struct sockaddr *)&ca, &len), 0);
    goro_t *h = go(udp_echo, s);
    ck_assert_ptr_nonnull(h);
    t_settle();                                   /* parked in recvfrom */
    ck_assert_int_eq(goro_sendto(c, "datagram", 8, 0, (struct sockaddr *)&sa, sizeof sa), 8);
    char buf[64];
    struct sockaddr_in from;
    len = sizeof from;
    ck_assert_int_eq(goro_recvfrom(c, buf, sizeof buf, 0, (struct sockaddr *)&from, &len), 8);
    ck_assert_int_eq(memcmp(buf, "datagram", 8), 0);
    ck_assert_int_eq(from.sin_port, sa.sin_port);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(r, 8);
    ck_assert_int_eq(goro_close(s), 0);
    ck_assert_int_eq(goro_close(c), 0);
}
END_TEST

static bool sigpipe_pending(void)
{
    sigset_t set;
    ck_assert_int_eq(sigpending(&set), 0);
    return sigismember(&set, SIGPIPE);
}

static bool sigpipe_blocked(void)
{
    sigset_t set;
    ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, NULL, &set), 0);
    return sigismember(&set, SIGPIPE);
}

/* Writes to p[1] with its reader gone, which must fail with -EPIPE. */
static void write_readerless(int p[2])
{
    struct iovec iov = { .iov_base = "xy", .iov_len = 2 };
    ck_assert_int_eq(goro_write(p[1], "x", 1), -EPIPE);
    ck_assert_int_eq(goro_writev(p[1], &iov, 1), -EPIPE);
    ck_assert_int_eq(goro_write_all(p[1], "xy", 2), -EPIPE);
}

/* A pipe whose reader is gone: -EPIPE and no SIGPIPE, with the signal at
 * its default action (it would kill the test). The caller's signal mask
 * and a SIGPIPE it has pending are left as they were. */
START_TEST(pipe_without_reader)
{
    sigpipe_default();
    int p[2];
    make_pipe(p);
    ck_assert_int_eq(goro_write(p[1], "x", 1), 1);
    ck_assert_int_eq(close(p[0]), 0);           /* never given to goro */
    write_readerless(p);
    ck_assert(!sigpipe_blocked());
    ck_assert(!sigpipe_pending());

    /* blocked by the caller: nothing left pending by goro's writes */
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &pipe_only, &old), 0);
    write_readerless(p);
    ck_assert(!sigpipe_pending());
    /* the caller's own pending SIGPIPE is not consumed */
    ck_assert_int_eq(raise(SIGPIPE), 0);
    write_readerless(p);
    ck_assert(sigpipe_pending());
    struct timespec zero = { 0, 0 };
    ck_assert_int_eq(sigtimedwait(&pipe_only, NULL, &zero), SIGPIPE);
    ck_assert(sigpipe_blocked());
    ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);

    /* and from a coroutine */
    goro_t *h = go(goro_write, p[1], "x", (size_t)1);
    ck_assert_ptr_nonnull(h);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -EPIPE);
    ck_assert_int_eq(goro_close(p[1]), 0);
    sigpipe_restore();
}
END_TEST

/* Frees the number of the write end of a pipe that goro has written as a
 * pipe; the read end stays open, so that number is the lowest free one and
 * the next descriptor the process makes reuses it. how: 0 goro_close,
 * 1 goro_fd_release then close(2), 2 close(2) alone (which bypasses goro;
 * goro_socket and goro_accept then drop the stale record). Returns the
 * read end, to close once the number is reused. */
static int pipe_number_freed(int how, int *num)
{
    int p[2];
    make_pipe(p);
    ck_assert_int_eq(goro_write(p[1], "x", 1), 1);
    *num = p[1];
    if (how == 0)
        ck_assert_int_eq(goro_close(p[1]), 0);
    if (how == 1)
        ck_assert_int_eq(goro_fd_release(p[1]), 0);
    if (how >= 1)
        ck_assert_int_eq(close(p[1]), 0);
    return p[0];
}

/* Writes to fd, whose peer is gone, until an error: -EPIPE (a TCP peer
 * answers the first writes with a reset, which may show as -ECONNRESET
 * first). */
static void write_until_epipe(int fd)
{
    ssize_t w = 0;
    for (int i = 0; i < 200 && w != -EPIPE; i++) {
        w = goro_write(fd, "x", 1);
        ck_assert_msg(w == 1 || pipe_error(w), "write to a vanished peer: %zd", w);
        if (w == 1)
            t_nap(0.001);
    }
    ck_assert_int_eq(w, -EPIPE);
    struct iovec iov = { .iov_base = "xy", .iov_len = 2 };
    ck_assert_int_eq(goro_writev(fd, &iov, 1), -EPIPE);
}

/* A socket that reuses the number of a pipe goro wrote to: its writes
 * still give -EPIPE, never SIGPIPE (at its default action here, so a
 * signal kills the test). The descriptor's record used to keep "not a
 * socket" from the pipe's life, and the socket was written with write(). */
START_TEST(socket_reusing_a_pipe_number)
{
    sigpipe_default();
    /* how 2: goro never learns of the socket, and its record still says
     * "pipe": the write is made without SIGPIPE all the same */
    for (int how = 0; how < 3; how++) {
        int num;
        int rd = pipe_number_freed(how, &num);
        int s[2];
        make_socketpair(SOCK_STREAM, s);
        ck_assert_int_eq(s[0], num);
        ck_assert_int_eq(close(rd), 0);
        ck_assert_int_eq(close(s[1]), 0);       /* the peer vanishes */
        write_until_epipe(s[0]);
        ck_assert_int_eq(goro_close(s[0]), 0);
    }
    /* closed with close(2); an accepted connection reuses the number */
    struct sockaddr_in a;
    int l = t_tcp_listener(1, &a);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(c, 0);
    ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    int num;
    int rd = pipe_number_freed(2, &num);
    int fd = goro_accept(l, NULL, NULL);
    ck_assert_int_eq(fd, num);
    ck_assert_int_eq(close(rd), 0);
    t_set_linger0(c);
    ck_assert_int_eq(close(c), 0);
    write_until_epipe(fd);
    ck_assert_int_eq(goro_close(fd), 0);
    ck_assert_int_eq(close(l), 0);
    sigpipe_restore();
}
END_TEST

/* ---- regular files and devices ---- */

static long file_io(int fd)
{
    enum { N = 1 << 20 };
    uint8_t *buf = malloc(N);
    if (!buf)
        return -1;
    fill(buf, N, 11, 0);
    long bad = 0;
    ssize_t w = goro_write_all(fd, buf, N);
    if (w != N) {
        t_fail("file: write_all %zd", w);
        bad = 1;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        t_fail("file: lseek");
        bad = 1;
    }
    memset(buf, 0, N);
    ssize_t r = goro_read_full(fd, buf, N);
    if (r != N || mismatch(buf, N, 11, 0) >= 0) {
        t_fail("file: read back %zd bytes, first bad %ld", r, mismatch(buf, N, 11, 0));
        bad = 1;
    }
    if (goro_read(fd, buf, 1) != 0) {       /* end of file: 0, never a park */
        t_fail("file: read at end of file did not return 0");
        bad = 1;
    }
    /* poll(2) calls a regular file always ready, so wait_fd should too */
    int ev = goro_wait_fd(fd, GORO_READABLE | GORO_WRITABLE, goro_now() + 5 * GORO_SEC);
    if (ev != (GORO_READABLE | GORO_WRITABLE)) {
        t_fail("file: wait_fd returned %d, want both (a file is always ready)", ev);
        bad = 1;
    }
    free(buf);
    return bad;
}

static long device_io(void)
{
    int z = open("/dev/zero", O_RDONLY | O_CLOEXEC), n = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (z < 0 || n < 0)
        return -1;
    char buf[4096];
    memset(buf, 1, sizeof buf);
    long bad = 0;
    if (goro_read(z, buf, sizeof buf) != (ssize_t)sizeof buf || buf[0] || buf[4095]) {
        t_fail("/dev/zero: read failed");
        bad = 1;
    }
    if (goro_write(n, buf, sizeof buf) != (ssize_t)sizeof buf) {
        t_fail("/dev/null: write failed");
        bad = 1;
    }
    /* epoll refuses these; poll(2) calls them always ready, so must wait_fd */
    int ev = goro_wait_fd(n, GORO_READABLE | GORO_WRITABLE, goro_now() + 5 * GORO_SEC);
    if (ev != (GORO_READABLE | GORO_WRITABLE)) {
        t_fail("/dev/null: wait_fd returned %d, want both", ev);
        bad = 1;
    }
    goro_close(z);
    goro_close(n);
    return bad;
}

/* Regular files and /dev/zero, /dev/null never park (epoll refuses them):
 * reads and writes return data, end of file returns 0, from a coroutine
 * and from this thread. */
START_TEST(regular_files_and_devices)
{
    for (int where = 0; where < 2; where++) {
        char path[] = "/tmp/goro-io-XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        unlink(path);
        long bad = -1, dbad = -1;
        if (where == 0) {
            ck_assert_int_eq(goro_join(go(file_io, fd), &bad), 0);
            ck_assert_int_eq(goro_join(go(device_io), &dbad), 0);
        } else {
            bad = file_io(fd);
            dbad = device_io();
        }
        ck_assert_msg(!t_failed(), "%s: %s", where ? "thread" : "coroutine", t_failed());
        ck_assert_int_eq(bad, 0);
        ck_assert_int_eq(dbad, 0);
        ck_assert_int_eq(goro_close(fd), 0);
    }
}
END_TEST

/* ---- every descriptor watched while the workers sleep ----
 * The descriptors' readiness is watched by one sleeping worker for all
 * (io/poller.h); the others sleep on their futex, until their timers.
 * Answerers wait on pipes while a thread outside writes to one at a time
 * with pauses long enough for every worker to go to sleep in between, and
 * a sleeper's ticks keep timers due on whatever worker it runs: an answer
 * or a tick that never comes is a descriptor or a timer nobody watched. */

enum { WATCH_PIPES = 12 };

static struct {
    _Atomic int stop;
    _Atomic int64_t worst_gap;
} wt;

static long watch_answerer(int in, int out)
{
    char c;
    ssize_t r;
    while ((r = goro_read(in, &c, 1)) == 1)
        if (goro_write(out, &c, 1) != 1) {
            t_fail("answerer: write back");
            return -1;
        }
    if (r != 0)
        t_fail("answerer: read %zd", r);
    return 0;
}

static long watch_ticker(void)
{
    int64_t last = goro_now();
    while (!atomic_load(&wt.stop)) {
        goro_sleep(GORO_MSEC);
        int64_t now = goro_now();
        if (now - last > atomic_load(&wt.worst_gap))
            atomic_store(&wt.worst_gap, now - last);
        last = now;
    }
    return 0;
}

START_TEST(descriptors_watched_while_workers_sleep)
{
    t_restart(&(goro_config_t){ .workers = 2 });
    int in[WATCH_PIPES][2], out[WATCH_PIPES][2];
    goro_t *g[WATCH_PIPES];
    atomic_store(&wt.stop, 0);
    atomic_store(&wt.worst_gap, 0);
    t_fail_reset();
    for (int i = 0; i < WATCH_PIPES; i++) {
        ck_assert_int_eq(pipe2(in[i], O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(out[i], O_CLOEXEC), 0);
        g[i] = go(watch_answerer, in[i][0], out[i][1]);
        ck_assert_ptr_nonnull(g[i]);
    }
    goro_t *ticker = go(watch_ticker);
    ck_assert_ptr_nonnull(ticker);
    long rounds = t_scale(400), late = 0;
    for (long r = 0; r < rounds; r++) {
        int i = (int)(r * 5 % WATCH_PIPES);
        t_nap(r % 3 ? 0.0005 : 0.003);      /* every worker asleep by now */
        char c = (char)r, back = 0;
        ck_assert_int_eq(write(in[i][1], &c, 1), 1);
        struct pollfd pfd = { out[i][0], POLLIN, 0 };
        if (poll(&pfd, 1, (int)(t_timeout(2.0) * 1000)) != 1) {
            late++;
            break;
        }
        ck_assert_int_eq(read(out[i][0], &back, 1), 1);
        ck_assert_int_eq(back, c);
    }
    atomic_store(&wt.stop, 1);
    ck_assert_msg(late == 0, "a descriptor's readiness was not seen for %.1f s with the "
                  "workers asleep", t_timeout(2.0));
    for (int i = 0; i < WATCH_PIPES; i++)
        close(in[i][1]);            /* end of file: the answerers end */
    for (int i = 0; i < WATCH_PIPES; i++) {
        ck_assert_int_eq(goro_join(g[i], NULL), 0);
        close(in[i][0]);
        close(out[i][0]);
        close(out[i][1]);
    }
    ck_assert_int_eq(goro_join(ticker, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(atomic_load(&wt.worst_gap) < (int64_t)(t_timeout(1.0) * GORO_SEC),
                  "a 1 ms sleep took %.1f ms", t_ms(atomic_load(&wt.worst_gap)));
}
END_TEST

/* Adds this file's tests to the io suite's test cases (test_io.h). */
void io_pipe_tests(struct io_tcases *tc)
{
    tcase_add_test(tc->io, pipes_socketpairs_datagrams);
    tcase_add_test(tc->io, udp_sendto_recvfrom);
    tcase_add_test(tc->io, regular_files_and_devices);
    tcase_add_test(tc->io, descriptors_watched_while_workers_sleep);
    tcase_add_test(tc->sigpipe, pipe_without_reader);
    tcase_add_test(tc->sigpipe, socket_reusing_a_pipe_number);
}
