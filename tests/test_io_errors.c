/* Bad descriptors and arguments; descriptor and memory leaks over many
 * connections.
 *
 * Part of the io suite (test_io.c registers it). Coroutines never call
 * ck_assert (see helpers.h): they note problems with t_fail() and the
 * test asserts at the end. */
#include "test_io.h"

/* ---- bad input ---- */

static void expect_badf(int fd)
{
    char buf[4];
    struct iovec iov = { buf, sizeof buf };
    struct sockaddr_in a = t_loopback(9);
    ck_assert_int_eq(goro_read(fd, buf, sizeof buf), -EBADF);
    ck_assert_int_eq(goro_read_until(fd, buf, sizeof buf, goro_now() + GORO_SEC), -EBADF);
    ck_assert_int_eq(goro_write(fd, buf, sizeof buf), -EBADF);
    ck_assert_int_eq(goro_write_all(fd, buf, sizeof buf), -EBADF);
    ck_assert_int_eq(goro_readv(fd, &iov, 1), -EBADF);
    ck_assert_int_eq(goro_writev(fd, &iov, 1), -EBADF);
    ck_assert_int_eq(goro_recv(fd, buf, sizeof buf, 0), -EBADF);
    ck_assert_int_eq(goro_send(fd, buf, sizeof buf, 0), -EBADF);
    ck_assert_int_eq(goro_recvfrom(fd, buf, sizeof buf, 0, NULL, NULL), -EBADF);
    ck_assert_int_eq(goro_sendto(fd, buf, sizeof buf, 0, NULL, 0), -EBADF);
    ck_assert_int_eq(goro_accept(fd, NULL, NULL), -EBADF);
    ck_assert_int_eq(goro_connect(fd, (struct sockaddr *)&a, sizeof a), -EBADF);
    ck_assert_int_eq(goro_wait_fd(fd, GORO_READABLE, GORO_FOREVER), -EBADF);
    ck_assert_int_eq(goro_wait_fd(fd, GORO_WRITABLE, goro_now() + GORO_SEC), -EBADF);
    ck_assert_int_eq(goro_close(fd), -EBADF);
    ck_assert_int_eq(goro_fd_release(fd), -EBADF);
}

static long bad_fds_in_coroutine(int closed)
{
    /* the same checks cannot ck_assert here; run the calls and report */
    char buf[4];
    int fds[] = { -1, closed, INT_MAX };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (goro_read(fds[i], buf, 1) != -EBADF || goro_write(fds[i], buf, 1) != -EBADF ||
            goro_accept(fds[i], NULL, NULL) != -EBADF ||
            goro_wait_fd(fds[i], GORO_READABLE, GORO_FOREVER) != -EBADF ||
            goro_close(fds[i]) != -EBADF)
            t_fail("coroutine: fd %d not -EBADF everywhere", fds[i]);
    }
    return 0;
}

/* Bad descriptors: -1, other negatives, a closed one, numbers beyond the
 * descriptor limit and INT_MAX all give -EBADF from every call, at once. */
START_TEST(bad_descriptors)
{
    /* a closed descriptor with a high number, which nothing will reuse
     * (the kernel hands out the lowest free number) */
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    int high = rl.rlim_cur > 15001 ? 15000 : (int)rl.rlim_cur - 1;
    int p[2];
    make_pipe(p);
    int closed = dup2(p[0], high);
    ck_assert_int_eq(closed, high);
    close(p[0]);
    close(p[1]);
    ck_assert_int_eq(close(closed), 0);
    int fds[] = { -1, -2, INT_MIN, closed, 19999, 1 << 20, INT_MAX };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        expect_badf(fds[i]);
    ck_assert_int_eq(goro_join(go(bad_fds_in_coroutine, closed), NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
}
END_TEST

/* Bad arguments on good descriptors. What is asserted: the runtime
 * passes bad buffers to the kernel or checks them itself, so a NULL
 * buffer with a length gives -EFAULT (the kernel's answer) or -EINVAL;
 * bad event masks are the runtime's own check: -EINVAL; the rest are the
 * kernel's answers (-EINVAL, -ENOTSOCK, -EOPNOTSUPP), passed through. */
static bool fault_or_inval(long r) { return r == -EFAULT || r == -EINVAL; }

START_TEST(bad_arguments)
{
    int s[2];
    make_socketpair(SOCK_STREAM, s);
    ck_assert_int_eq(goro_write(s[1], "data", 4), 4);   /* readable: no parking */
    long r = goro_read(s[0], NULL, 4);
    ck_assert_msg(fault_or_inval(r), "read into NULL: %ld", r);
    r = goro_recv(s[0], NULL, 4, 0);
    ck_assert_msg(fault_or_inval(r), "recv into NULL: %ld", r);
    r = goro_write(s[0], NULL, 4);
    ck_assert_msg(fault_or_inval(r), "write from NULL: %ld", r);
    r = goro_write_all(s[0], NULL, 4);
    ck_assert_msg(fault_or_inval(r), "write_all from NULL: %ld", r);
    r = goro_readv(s[0], NULL, 1);
    ck_assert_msg(fault_or_inval(r), "readv NULL iov: %ld", r);
    char buf[8];
    struct iovec iov = { buf, sizeof buf };
    ck_assert_int_eq(goro_readv(s[0], &iov, -1), -EINVAL);
    ck_assert_int_eq(goro_writev(s[0], &iov, -1), -EINVAL);
    /* the data is still there after the failed reads */
    ck_assert_int_eq(goro_read(s[0], buf, sizeof buf), 4);
    ck_assert_int_eq(memcmp(buf, "data", 4), 0);

    /* event masks */
    ck_assert_int_eq(goro_wait_fd(s[0], 0, GORO_FOREVER), -EINVAL);
    ck_assert_int_eq(goro_wait_fd(s[0], GORO_AFTER_EAGAIN, GORO_FOREVER), -EINVAL);
    ck_assert_int_eq(goro_wait_fd(s[0], 0x8, GORO_FOREVER), -EINVAL);
    ck_assert_int_eq(goro_wait_fd(s[0], GORO_READABLE | 0x100, GORO_FOREVER), -EINVAL);
    ck_assert_int_eq(goro_wait_fd(s[0], -1, GORO_FOREVER), -EINVAL);

    /* socket calls on the wrong kind of descriptor */
    int p[2];
    make_pipe(p);
    struct sockaddr_in a = t_loopback(9);
    ck_assert_int_eq(goro_accept(p[0], NULL, NULL), -ENOTSOCK);
    ck_assert_int_eq(goro_connect(p[0], (struct sockaddr *)&a, sizeof a), -ENOTSOCK);
    ck_assert_int_eq(goro_recv(p[0], buf, 1, 0), -ENOTSOCK);
    ck_assert_int_eq(goro_send(p[1], buf, 1, 0), -ENOTSOCK);
    int t = goro_socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(t, 0);
    ck_assert_int_eq(goro_accept(t, NULL, NULL), -EINVAL);     /* not listening */
    ck_assert_int_eq(goro_connect(t, (struct sockaddr *)&a, 1), -EINVAL);  /* short address */
    r = goro_connect(t, NULL, sizeof a);
    ck_assert_msg(fault_or_inval(r), "connect to NULL: %ld", r);
    ck_assert_int_eq(goro_close(t), 0);
    t = goro_socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_ge(t, 0);
    ck_assert_int_eq(goro_accept(t, NULL, NULL), -EOPNOTSUPP);     /* datagrams */
    ck_assert_int_eq(goro_close(t), 0);
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

/* ---- leaks over many connections ---- */

enum { LEAK_PAIRS = 8 };

static struct {
    struct sockaddr_in addr;
    int lfd;
    long total;
    atomic_long next;
    atomic_long accepting;      /* servers between the start of an accept and its end */
} lk;

/* Client: connect, read the server's byte, close with a reset (SO_LINGER
 * 0: no TIME_WAIT, so 10^5 connections do not run the ephemeral ports dry). */
static void leak_client(void)
{
    while (atomic_fetch_add(&lk.next, 1) < lk.total) {
        int fd = goro_socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) {
            t_fail("leak client: socket %d", fd);
            return;
        }
        int e = goro_connect(fd, (struct sockaddr *)&lk.addr, sizeof lk.addr);
        char c;
        struct linger lg = { 1, 0 };
        if (e != 0 || goro_read(fd, &c, 1) != 1 ||
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0)
            t_fail("leak client: connect %d or read failed", e);
        if (goro_close(fd) != 0)
            t_fail("leak client: close");
    }
}

static void leak_server(void)
{
    for (;;) {
        atomic_fetch_add(&lk.accepting, 1);
        int fd = goro_accept(lk.lfd, NULL, NULL);
        atomic_fetch_sub(&lk.accepting, 1);
        if (fd == -EBADF)
            return;
        if (fd < 0) {
            t_fail("leak server: accept %d", fd);
            return;
        }
        char c = 's';
        if (goro_write(fd, &c, 1) != 1)
            t_fail("leak server: write");
        ssize_t r = goro_read(fd, &c, 1);   /* the client's reset (or a FIN) */
        if (r != -ECONNRESET && r != 0)
            t_fail("leak server: read after the client's close: %zd", r);
        if (goro_close(fd) != 0)
            t_fail("leak server: close");
    }
}

static double leak_round(long cycles)
{
    lk.lfd = t_tcp_listener(SOMAXCONN, &lk.addr);
    lk.total = cycles;
    atomic_store(&lk.next, 0);
    double t0 = t_now();
    goro_t *c[LEAK_PAIRS], *s[LEAK_PAIRS];
    for (int i = 0; i < LEAK_PAIRS; i++) {
        ck_assert_ptr_nonnull(s[i] = go(leak_server));
        ck_assert_ptr_nonnull(c[i] = go(leak_client));
    }
    for (int i = 0; i < LEAK_PAIRS; i++)
        ck_assert_int_eq(goro_join(c[i], NULL), 0);
    /* Every server waits in accept before the listener goes: a descriptor
     * used while it is being closed is the program's race (goro_close then
     * refuses the call, but the number may be someone else's by then). */
    ck_assert_int_eq(t_wait_at_least(&lk.accepting, LEAK_PAIRS, t_timeout(10)), LEAK_PAIRS);
    t_settle();
    ck_assert_int_eq(goro_close(lk.lfd), 0);
    for (int i = 0; i < LEAK_PAIRS; i++)
        ck_assert_int_eq(goro_join(s[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    return t_now() - t0;
}

/* 10^5 connect/accept/close cycles leave the descriptor count exactly as
 * it was and the resident size flat. The first round warms up whatever the
 * runtime keeps (event base, per-descriptor table, stacks, malloc arenas);
 * after it, the tolerance is 4 MiB: a leak of 21 bytes per descriptor over
 * the 2 * 10^5 descriptors of the big round would exceed it, while
 * allocator noise stays well below (measured: +0 to +64 KiB). With the
 * counts scaled down (emulators) only larger leaks show. Sanitizers keep
 * freed memory in quarantine and shadow, so RSS is checked without them. */
START_TEST(no_leak_over_many_connections)
{
    leak_round(t_live(2000));
    long fds0 = t_fd_count(), rss0 = t_rss_kib(), maps0 = t_maps_count();
    long cycles = t_live(100000);
#ifdef T_TSAN
    cycles /= 5;                /* TSan: about 10 ms per cycle; the count still checks leaks */
#endif
    double dt = leak_round(cycles);
    long fds1 = t_fd_count_back_to(fds0), rss1 = t_rss_kib(), maps1 = t_maps_count();
    printf("io leak: %ld connections in %.2f s (%.1f us each); rss %+ld KiB, maps %+ld\n",
           cycles, dt, dt * 1e6 / (double)cycles, rss1 - rss0, maps1 - maps0);
    ck_assert_int_eq(fds1, fds0);
    if (!t_sanitized() && !t_valgrind())
        ck_assert_msg(rss1 - rss0 < 4096, "resident size grew by %ld KiB over %ld connections",
                      rss1 - rss0, cycles);
}
END_TEST

/* Adds this file's tests to the io suite's test cases (test_io.h). */
void io_errors_tests(struct io_tcases *tc)
{
    tcase_add_test(tc->io, bad_descriptors);
    tcase_add_test(tc->io, bad_arguments);
    tcase_add_test(tc->io, no_leak_over_many_connections);
}
