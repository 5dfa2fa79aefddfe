/* Sockets: peer reset and half-close, accept storms, goro_wait_fd
 * readiness and several readers of one descriptor, refused and accepted
 * connects.
 *
 * Part of the io suite (test_io.c registers it). Coroutines never call
 * ck_assert (see helpers.h): they note problems with t_fail() and the
 * test asserts at the end. */
#include "test_io.h"

/* ---- reset and half-close ---- */

atomic_int waiter_in;

long read_one(int fd)
{
    char c;
    atomic_store(&waiter_in, 1);
    return goro_read(fd, &c, 1);
}

static long write_lots(int fd)
{
    size_t len = 8 << 20;
    uint8_t *buf = calloc(1, len);
    if (!buf)
        return -ENOMEM;
    size_t written = 0;
    atomic_store(&waiter_in, 1);
    ssize_t r = goro_write_all_until(fd, buf, len, &written, GORO_FOREVER);
    free(buf);
    if (r >= 0 || written >= len)
        t_fail("write_all to a reset peer: %zd, %zu of %zu written", r, written, len);
    return r;
}

bool pipe_error(long r) { return r == -EPIPE || r == -ECONNRESET; }

/* A peer that closes with SO_LINGER 0 sends a reset: a parked reader gets
 * -ECONNRESET; a parked writer and later writes get -EPIPE or
 * -ECONNRESET. SIGPIPE stays at its default action throughout, so a
 * write that raised it would kill the test. */
START_TEST(peer_reset)
{
    sigpipe_default();
    int p[2];
    long r = 0;
    /* a parked reader */
    t_tcp_pair(p);
    atomic_store(&waiter_in, 0);
    goro_t *h = go(read_one, p[0]);
    ck_assert_ptr_nonnull(h);
    t_wait_flag(&waiter_in, t_timeout(10));
    t_settle();
    t_set_linger0(p[1]);
    ck_assert_int_eq(close(p[1]), 0);       /* p[1] was never given to goro */
    double dt = join_timed(h, &r);
    ck_assert_int_eq(r, -ECONNRESET);
    ck_assert_msg(dt < t_prompt(), "reader woke %.0f ms after the reset", dt * 1e3);
    /* the error was reported; writes now fail without a signal */
    for (int i = 0; i < 3; i++) {
        ssize_t w = goro_write(p[0], "x", 1);
        ck_assert_msg(pipe_error(w), "write %d after reset: %zd", i, w);
    }
    ck_assert_int_eq(goro_close(p[0]), 0);

    /* a parked writer (the peer reads nothing, so the buffers fill) */
    t_tcp_pair(p);
    t_set_bufs(p[0], 64 << 10);
    t_set_bufs(p[1], 64 << 10);
    atomic_store(&waiter_in, 0);
    h = go(write_lots, p[0]);
    ck_assert_ptr_nonnull(h);
    t_wait_flag(&waiter_in, t_timeout(10));
    t_settle();
    t_set_linger0(p[1]);
    ck_assert_int_eq(close(p[1]), 0);
    dt = join_timed(h, &r);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(pipe_error(r), "parked writer after reset: %ld", r);
    ck_assert_msg(dt < t_prompt(), "writer woke %.0f ms after the reset", dt * 1e3);
    ck_assert_int_eq(goro_close(p[0]), 0);

    /* the main thread writing to a peer that closed normally: the first
     * write may still be accepted (the peer answers it with a reset) */
    t_tcp_pair(p);
    ck_assert_int_eq(close(p[1]), 0);
    ssize_t w = 0;
    for (int i = 0; i < 100 && w >= 0; i++) {
        w = goro_write(p[0], "abc", 3);
        if (w >= 0)
            t_nap(0.001);
    }
    ck_assert_msg(pipe_error(w), "writes to a closed peer: %zd", w);
    ck_assert_msg(pipe_error(goro_send(p[0], "x", 1, 0)), "send after the error");
    ck_assert_int_eq(goro_close(p[0]), 0);
    sigpipe_restore();
}
END_TEST

static long half_close_side(int fd)
{
    char buf[16];
    atomic_store(&waiter_in, 1);
    ssize_t r = goro_read_full(fd, buf, 5);
    if (r != 5 || memcmp(buf, "hello", 5) != 0)
        t_fail("half-close: read %zd, want hello", r);
    r = goro_read(fd, buf, sizeof buf);     /* the peer shut its side: end of file */
    if (r != 0)
        t_fail("half-close: read after SHUT_WR returned %zd, want 0", r);
    r = goro_read(fd, buf, sizeof buf);     /* and again */
    if (r != 0)
        t_fail("half-close: second read after SHUT_WR returned %zd", r);
    if (goro_write_all(fd, "back", 4) != 4)  /* our side still writes */
        t_fail("half-close: write back failed");
    return 0;
}

/* shutdown(SHUT_WR) on one side: the other reads the data, then 0 (also
 * when parked before it came), and can still write back. */
START_TEST(half_close)
{
    int p[2];
    t_tcp_pair(p);
    atomic_store(&waiter_in, 0);
    goro_t *h = go(half_close_side, p[0]);
    ck_assert_ptr_nonnull(h);
    t_wait_flag(&waiter_in, t_timeout(10));
    t_settle();                               /* parked in read */
    ck_assert_int_eq(goro_write_all(p[1], "hel", 3), 3);
    t_settle();
    ck_assert_int_eq(goro_write_all(p[1], "lo", 2), 2);
    ck_assert_int_eq(shutdown(p[1], SHUT_WR), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    char buf[8];
    ck_assert_int_eq(goro_read_full(p[1], buf, 4), 4);
    ck_assert_int_eq(memcmp(buf, "back", 4), 0);
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_read(p[1], buf, sizeof buf), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);
}
END_TEST

/* ---- accept storms ---- */

enum { STORM_ACCEPTORS = 5 };

static struct {
    struct sockaddr_in addr;
    int lfd;
    long n;
    atomic_int *seen;           /* per client id: times accepted */
    atomic_long by[STORM_ACCEPTORS];
    goro_chan_t *gate;
} st;

static void storm_acceptor(long id)
{
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        memset(&from, 0xff, sizeof from);
        int fd = goro_accept(st.lfd, (struct sockaddr *)&from, &len);
        if (fd == -EBADF)
            return;
        if (fd < 0) {
            t_fail("storm acceptor %ld: %d", id, fd);
            return;
        }
        if (len != sizeof from || from.sin_family != AF_INET ||
            from.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
            t_fail("storm acceptor: peer address len %u family %d", len, from.sin_family);
        if (!has_fl(fd, O_NONBLOCK) || !has_fd_fl(fd, FD_CLOEXEC))
            t_fail("accepted fd is not non-blocking and close-on-exec");
        uint32_t who = UINT32_MAX;
        ssize_t r = goro_read_full(fd, &who, sizeof who);
        if (r != sizeof who || who >= (uint32_t)st.n)
            t_fail("storm acceptor %ld: read id: %zd (%u)", id, r, who);
        else
            atomic_fetch_add(&st.seen[who], 1);
        atomic_fetch_add(&st.by[id], 1);
        goro_close(fd);
    }
}

static void storm_client(long id)
{
    goro_chan_recv(st.gate, NULL);          /* everybody connects at once */
    int fd = goro_socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        t_fail("storm client: socket: %d", fd);
        return;
    }
    int e = goro_connect(fd, (struct sockaddr *)&st.addr, sizeof st.addr);
    uint32_t who = (uint32_t)id;
    char c;
    if (e != 0)
        t_fail("storm client %ld: connect: %d", id, e);
    else if (goro_write_all(fd, &who, sizeof who) != sizeof who)
        t_fail("storm client %ld: write", id);
    else if (goro_read(fd, &c, 1) != 0)     /* the acceptor closes */
        t_fail("storm client %ld: no end of file", id);
    goro_close(fd);
}

/* Hundreds of clients connect at the same moment to one listener served
 * by several acceptor coroutines: every connection is accepted exactly
 * once, and closing the listener sends every acceptor home with -EBADF. */
START_TEST(accept_storm)
{
    st.n = t_live(800);
    if (st.n < 20)
        st.n = 20;
    st.lfd = t_tcp_listener(SOMAXCONN, &st.addr);
    st.seen = calloc((size_t)st.n, sizeof *st.seen);
    ck_assert_ptr_nonnull(st.seen);
    for (int i = 0; i < STORM_ACCEPTORS; i++)
        atomic_store(&st.by[i], 0);
    ck_assert_int_eq(goro_chan_new(&st.gate, 0, 0), 0);
    goro_t *acc[STORM_ACCEPTORS];
    for (long i = 0; i < STORM_ACCEPTORS; i++)
        ck_assert_ptr_nonnull(acc[i] = go(storm_acceptor, i));
    goro_t **h = xmalloc((size_t)st.n * sizeof *h);
    for (long i = 0; i < st.n; i++)
        ck_assert_ptr_nonnull(h[i] = go(storm_client, i));
    t_settle();                               /* all parked at the gate */
    ck_assert_int_eq(goro_chan_close(st.gate), 0);
    for (long i = 0; i < st.n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    double t0 = t_now();
    ck_assert_int_eq(goro_close(st.lfd), 0);
    for (int i = 0; i < STORM_ACCEPTORS; i++)
        ck_assert_int_eq(goro_join(acc[i], NULL), 0);
    double dt = t_now() - t0;
    ck_assert_msg(!t_failed(), "%s", t_failed());
    long total = 0;
    for (int i = 0; i < STORM_ACCEPTORS; i++)
        total += atomic_load(&st.by[i]);
    ck_assert_int_eq(total, st.n);
    for (long i = 0; i < st.n; i++)
        ck_assert_msg(atomic_load(&st.seen[i]) == 1, "client %ld accepted %d times",
                      i, atomic_load(&st.seen[i]));
    ck_assert_msg(dt < t_prompt(), "acceptors took %.0f ms to see the close", dt * 1e3);
    free(h);
    free(st.seen);
    ck_assert_int_eq(goro_chan_free(st.gate), 0);
}
END_TEST

/* ---- goro_wait_fd ---- */

long wait_readable(int fd)
{
    atomic_store(&waiter_in, 1);
    return goro_wait_fd(fd, GORO_READABLE, GORO_FOREVER);
}

static long wait_writable(int fd)
{
    atomic_store(&waiter_in, 1);
    return goro_wait_fd(fd, GORO_WRITABLE, GORO_FOREVER);
}

goro_t *spawn_announced(goro_t *h)
{
    ck_assert_ptr_nonnull(h);
    ck_assert_msg(t_wait_flag(&waiter_in, t_timeout(10)), "waiter never started");
    t_settle();
    return h;
}

/* Fills a non-blocking-capable pipe or socket until it would block, with
 * plain system calls: the count written. */
static long fill_up(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    ck_assert_int_eq(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
    static char junk[65536];
    long total = 0;
    for (;;) {
        ssize_t w = write(fd, junk, sizeof junk);
        if (w < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            break;
        }
        total += w;
    }
    /* the descriptor stays non-blocking: goro would make it so anyway */
    return total;
}

static void drain(int fd, long n)
{
    static char junk[65536];
    while (n > 0) {
        ssize_t r = goro_read(fd, junk, n < (long)sizeof junk ? (size_t)n : sizeof junk);
        ck_assert_int_gt(r, 0);
        n -= r;
    }
}

START_TEST(wait_fd_readiness)
{
    int p[2];
    make_pipe(p);
    /* an empty pipe's write end is writable at once */
    ck_assert_int_eq(goro_wait_fd(p[1], GORO_WRITABLE, GORO_FOREVER), GORO_WRITABLE);
    /* a parked waiter wakes when data comes, with READABLE only */
    atomic_store(&waiter_in, 0);
    goro_t *h = spawn_announced(go(wait_readable, p[0]));
    ck_assert_int_eq(write(p[1], "z", 1), 1);
    long r = -1;
    double dt = join_timed(h, &r);
    ck_assert_int_eq(r, GORO_READABLE);
    ck_assert_msg(dt < t_prompt(), "woke %.0f ms after the write", dt * 1e3);
    /* data still there: readable at once; wait_fd consumed nothing */
    ck_assert_int_eq(goro_wait_fd(p[0], GORO_READABLE | GORO_WRITABLE, GORO_FOREVER),
                     GORO_READABLE);
    char c;
    ck_assert_int_eq(goro_read(p[0], &c, 1), 1);
    /* a full pipe parks a WRITABLE waiter until the reader makes room */
    long filled = fill_up(p[1]);
    atomic_store(&waiter_in, 0);
    h = spawn_announced(go(wait_writable, p[1]));
    drain(p[0], filled);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, GORO_WRITABLE);
    /* end of file counts as readable */
    atomic_store(&waiter_in, 0);
    h = spawn_announced(go(wait_readable, p[0]));
    ck_assert_int_eq(goro_close(p[1]), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, GORO_READABLE);
    ck_assert_int_eq(goro_read(p[0], &c, 1), 0);
    /* a socket with room and no data: WRITABLE of the two */
    int s[2];
    make_socketpair(SOCK_STREAM, s);
    ck_assert_int_eq(goro_wait_fd(s[0], GORO_READABLE | GORO_WRITABLE, GORO_FOREVER),
                     GORO_WRITABLE);
    ck_assert_int_eq(goro_write(s[1], "q", 1), 1);
    r = goro_wait_fd(s[0], GORO_READABLE | GORO_WRITABLE, GORO_FOREVER);
    ck_assert_msg(r > 0 && (r & ~(GORO_READABLE | GORO_WRITABLE)) == 0 && (r & GORO_READABLE),
                  "socket with data and room: %ld", r);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
    ck_assert_int_eq(goro_close(p[0]), 0);
}
END_TEST

/* GORO_AFTER_EAGAIN: the caller's own recv/send has just said EAGAIN, and
 * the wait skips the state check. It must still see everything that comes
 * after: on a descriptor goro never saw before (registered by this wait),
 * data written after the EAGAIN but before the wait, data written while
 * it waits, and room made while a writer waits. */
static long wait_after_eagain(int fd)
{
    atomic_store(&waiter_in, 1);
    return goro_wait_fd(fd, GORO_READABLE | GORO_AFTER_EAGAIN, GORO_FOREVER);
}

static long wait_writable_after_eagain(int fd)
{
    atomic_store(&waiter_in, 1);
    return goro_wait_fd(fd, GORO_WRITABLE | GORO_AFTER_EAGAIN, GORO_FOREVER);
}

START_TEST(wait_fd_after_eagain)
{
    int s[2];
    char c;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
    ck_assert_int_eq(fcntl(s[0], F_SETFL, fcntl(s[0], F_GETFL) | O_NONBLOCK), 0);
    /* never seen by goro: the wait registers it, nothing comes */
    ck_assert_int_eq(recv(s[0], &c, 1, 0), -1);
    ck_assert_int_eq(errno, EAGAIN);
    ck_assert_int_eq(goro_wait_fd(s[0], GORO_READABLE | GORO_AFTER_EAGAIN,
                                  goro_now() + 20 * GORO_MSEC), -ETIMEDOUT);
    /* data between the EAGAIN and the wait: the edge was kept */
    ck_assert_int_eq(write(s[1], "a", 1), 1);
    ck_assert_int_eq(goro_wait_fd(s[0], GORO_READABLE | GORO_AFTER_EAGAIN,
                                  goro_now() + 5 * GORO_SEC), GORO_READABLE);
    ck_assert_int_eq(recv(s[0], &c, 1, 0), 1);
    ck_assert_int_eq(recv(s[0], &c, 1, 0), -1);
    /* data while it waits */
    atomic_store(&waiter_in, 0);
    goro_t *h = spawn_announced(go(wait_after_eagain, s[0]));
    ck_assert_int_eq(write(s[1], "b", 1), 1);
    long r = -1;
    double dt = join_timed(h, &r);
    ck_assert_int_eq(r, GORO_READABLE);
    ck_assert_msg(dt < t_prompt(), "woke %.0f ms after the write", dt * 1e3);
    ck_assert_int_eq(recv(s[0], &c, 1, 0), 1);
    ck_assert_int_eq(c, 'b');
    /* room while a writer waits */
    long filled = fill_up(s[0]);
    atomic_store(&waiter_in, 0);
    h = spawn_announced(go(wait_writable_after_eagain, s[0]));
    drain(s[1], filled);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, GORO_WRITABLE);
    /* the flag alone names no direction */
    ck_assert_int_eq(goro_wait_fd(s[0], GORO_AFTER_EAGAIN, GORO_FOREVER), -EINVAL);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

/* Several coroutines parked on one descriptor: each readiness wakes one in
 * turn, and every byte goes to exactly one reader. */
atomic_long readers_waiting;

long read_byte(int fd)
{
    char c = 0;
    atomic_fetch_add(&readers_waiting, 1);
    ssize_t r = goro_read(fd, &c, 1);
    return r == 1 ? c : -1000 + r;
}

START_TEST(several_readers_one_fd)
{
    enum { K = 4 };
    int p[2];
    make_pipe(p);
    atomic_store(&readers_waiting, 0);
    goro_t *h[K];
    for (int i = 0; i < K; i++)
        ck_assert_ptr_nonnull(h[i] = go(read_byte, p[0]));
    ck_assert_int_eq(t_wait_at_least(&readers_waiting, K, t_timeout(10)), K);
    t_settle();
    for (int i = 0; i < K; i++) {
        char c = (char)('a' + i);
        ck_assert_int_eq(goro_write(p[1], &c, 1), 1);
        if (i % 2)
            t_settle();           /* one at a time, and two back to back */
    }
    int seen = 0;
    for (int i = 0; i < K; i++) {
        long r = 0;
        ck_assert_int_eq(goro_join(h[i], &r), 0);
        ck_assert_msg(r >= 'a' && r < 'a' + K, "reader %d: %ld", i, r);
        ck_assert_msg(!(seen & 1 << (r - 'a')), "byte %c read twice", (char)r);
        seen |= 1 << (r - 'a');
    }
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);
}
END_TEST

/* ---- connect ---- */

long connect_to(const struct sockaddr_in *a)
{
    int fd = goro_socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return fd;
    long r = goro_connect(fd, (const struct sockaddr *)a, sizeof *a);
    goro_close(fd);
    return r;
}

/* A port with a bound socket that does not listen answers SYN with a
 * reset: -ECONNREFUSED, from a coroutine and from this thread. The bound
 * socket keeps anybody else from taking the port meanwhile. */
START_TEST(connect_refused_and_accepted)
{
    int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(holder, 0);
    struct sockaddr_in a = t_loopback(0);
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(holder, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(holder, (struct sockaddr *)&a, &len), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(go(connect_to, &a), &r), 0);
    ck_assert_int_eq(r, -ECONNREFUSED);
    ck_assert_int_eq(connect_to(&a), -ECONNREFUSED);
    close(holder);

    /* and a listening one: connected (accept on this thread) */
    struct sockaddr_in la;
    int l = t_tcp_listener(8, &la);
    goro_t *h = go(connect_to, &la);
    ck_assert_ptr_nonnull(h);
    int fd = goro_accept(l, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_close(fd), 0);
    ck_assert_int_eq(goro_close(l), 0);

    /* goro_socket: non-blocking and close-on-exec, as promised */
    fd = goro_socket(AF_INET6, SOCK_STREAM, 0);
    if (fd >= 0) {
        ck_assert(has_fl(fd, O_NONBLOCK));
        ck_assert(has_fd_fl(fd, FD_CLOEXEC));
        ck_assert_int_eq(goro_close(fd), 0);
    }
    ck_assert_int_lt(goro_socket(-1, SOCK_STREAM, 0), 0);
}
END_TEST

/* Adds this file's tests to the io suite's test cases (test_io.h). */
void io_sock_tests(struct io_tcases *tc)
{
    tcase_add_test(tc->io, peer_reset);
    tcase_add_test(tc->io, half_close);
    tcase_add_test(tc->io, accept_storm);
    tcase_add_test(tc->io, wait_fd_readiness);
    tcase_add_test(tc->io, wait_fd_after_eagain);
    tcase_add_test(tc->io, several_readers_one_fd);
    tcase_add_test(tc->io, connect_refused_and_accepted);
}
