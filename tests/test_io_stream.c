/* Streams: thousands of loopback TCP connections echoing at once, partial
 * reads and writes, vectored and short reads, goro_read_full records,
 * goro_writev_all's partial writes and edges.
 *
 * Part of the io suite (test_io.c registers it). Coroutines never call
 * ck_assert (see helpers.h): they note problems with t_fail() and the
 * test asserts at the end. */
#include "test_io.h"

/* ---- thousands of connections ---- */

enum { ECHO_MSGS = 4, ECHO_ACCEPTORS = 4, ECHO_MAX = 2048 };

static struct {
    struct sockaddr_in addr;
    int lfd;
    atomic_long arrived;        /* clients past their connect */
    atomic_long accepted;
    atomic_long finished;       /* clients that verified every echo */
    goro_chan_t *gate;          /* closed once every connection is open */
    goro_waitgroup_t servers;
} ec;

static void echo_server(int fd)
{
    uint8_t buf[4096];
    for (;;) {
        ssize_t r = goro_read(fd, buf, sizeof buf);
        if (r == 0)
            break;
        if (r < 0) {
            t_fail("echo server: read: %zd", r);
            break;
        }
        ssize_t w = goro_write_all(fd, buf, (size_t)r);
        if (w != r) {
            t_fail("echo server: write_all(%zd): %zd", r, w);
            break;
        }
    }
    if (goro_close(fd) != 0)
        t_fail("echo server: close failed");
    goro_waitgroup_done(&ec.servers);
}

static void echo_acceptor(long id)
{
    for (;;) {
        int fd = goro_accept(ec.lfd, NULL, NULL);
        if (fd == -EBADF)
            return;             /* the test closed the listener: done */
        if (fd < 0) {
            t_fail("acceptor %ld: accept: %d", id, fd);
            return;
        }
        atomic_fetch_add(&ec.accepted, 1);
        goro_waitgroup_add(&ec.servers, 1);
        int e = goro_go(NULL, NULL, echo_server, fd);
        if (e != 0) {
            t_fail("acceptor %ld: spawn: %d", id, e);
            goro_close(fd);
            goro_waitgroup_done(&ec.servers);
        }
    }
}

/* Sends one message (odd ids through writev in two pieces) and checks
 * that the same bytes come back. */
static bool echo_once(int fd, long id, int m)
{
    uint8_t out[ECHO_MAX], in[ECHO_MAX];
    size_t len = 1 + (size_t)(id * 131 + m * 977) % ECHO_MAX;
    uint32_t seed = (uint32_t)(id * ECHO_MSGS + m);
    fill(out, len, seed, 0);
    ssize_t w;
    if (id % 2) {
        struct iovec iov[2] = { { out, len / 2 }, { out + len / 2, len - len / 2 } };
        w = goro_writev(fd, iov, 2);
        if (w > 0 && (size_t)w < len) {     /* a partial writev is legal */
            ssize_t rest = goro_write_all(fd, out + w, len - (size_t)w);
            w = rest < 0 ? rest : w + rest;
        }
    } else {
        w = goro_write_all(fd, out, len);
    }
    if (w != (ssize_t)len) {
        t_fail("client %ld msg %d: wrote %zd of %zu", id, m, w, len);
        return false;
    }
    ssize_t r = goro_read_full(fd, in, len);
    if (r != (ssize_t)len || mismatch(in, len, seed, 0) >= 0) {
        t_fail("client %ld msg %d: echo %zd of %zu bytes, first bad byte %ld",
               id, m, r, len, r > 0 ? mismatch(in, (size_t)r, seed, 0) : -1L);
        return false;
    }
    return true;
}

static void echo_client(long id)
{
    int fd = goro_socket(AF_INET, SOCK_STREAM, 0);
    int e = fd < 0 ? fd : goro_connect(fd, (struct sockaddr *)&ec.addr, sizeof ec.addr);
    atomic_fetch_add(&ec.arrived, 1);
    if (e != 0) {
        t_fail("client %ld: socket/connect: %d", id, e);
        if (fd >= 0)
            goro_close(fd);
        return;
    }
    goro_chan_recv(ec.gate, NULL);  /* every connection is open now */
    for (int m = 0; m < ECHO_MSGS; m++)
        if (!echo_once(fd, id, m))
            break;
    /* the server sees end of file and closes its side */
    char c;
    if (shutdown(fd, SHUT_WR) != 0 || goro_read(fd, &c, 1) != 0)
        t_fail("client %ld: no end of file after shutdown", id);
    else
        atomic_fetch_add(&ec.finished, 1);
    if (goro_close(fd) != 0)
        t_fail("client %ld: close failed", id);
}

/* Thousands of connections open at the same time (the clients wait at a
 * gate until all are connected and accepted), each echoing several
 * messages of varied sizes: twice as many descriptors as connections, all
 * parked at once. */
START_TEST(echo_thousands_of_connections)
{
    long n = t_live(3000);
    memset(&ec, 0, sizeof ec);
    ec.lfd = t_tcp_listener(SOMAXCONN, &ec.addr);
    ck_assert_int_eq(goro_chan_new(&ec.gate, 0, 0), 0);
    ck_assert_int_eq(goro_waitgroup_init(&ec.servers), 0);
    long fds0 = t_fd_count();
    goro_t *acc[ECHO_ACCEPTORS];
    for (long i = 0; i < ECHO_ACCEPTORS; i++)
        ck_assert_ptr_nonnull(acc[i] = go(echo_acceptor, i));
    goro_t **h = xmalloc((size_t)n * sizeof *h);
    for (long i = 0; i < n; i++)
        ck_assert_ptr_nonnull(h[i] = go(echo_client, i));
    long arrived = t_wait_at_least(&ec.arrived, n, t_timeout(20));
    long accepted = t_wait_at_least(&ec.accepted, n, t_timeout(20));
    long open_fds = t_fd_count() - fds0;
    ck_assert_int_eq(goro_chan_close(ec.gate), 0);
    for (long i = 0; i < n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    free(h);
    ck_assert_int_eq(goro_close(ec.lfd), 0);
    for (int i = 0; i < ECHO_ACCEPTORS; i++)
        ck_assert_int_eq(goro_join(acc[i], NULL), 0);
    ck_assert_int_eq(goro_waitgroup_wait(&ec.servers), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(arrived, n);
    ck_assert_int_eq(accepted, n);
    ck_assert_msg(open_fds >= 2 * n, "%ld descriptors open at the gate, want >= %ld",
                  open_fds, 2 * n);
    ck_assert_int_eq(atomic_load(&ec.finished), n);
    ck_assert_int_eq(goro_waitgroup_destroy(&ec.servers), 0);
    ck_assert_int_eq(goro_chan_free(ec.gate), 0);
}
END_TEST

/* ---- partial reads and writes ---- */

atomic_int reader_go;

/* Reads the whole stream in small pieces of random size, checking every
 * byte; returns the byte count (end of file ends it). */
long small_reader(int fd, long seed)
{
    uint8_t buf[1500];
    uint32_t r = (uint32_t)seed | 1;
    long total = 0;
    while (!atomic_load(&reader_go))
        goro_yield();
    for (;;) {
        size_t want = 1 + t_rnd(&r) % sizeof buf;
        ssize_t n = goro_read(fd, buf, want);
        if (n == 0)
            return total;
        if (n < 0 || (size_t)n > want) {
            t_fail("small reader: read(%zu): %zd", want, n);
            return -1;
        }
        long bad = mismatch(buf, (size_t)n, (uint32_t)seed, (size_t)total);
        if (bad >= 0) {
            t_fail("small reader: wrong byte at offset %ld", total + bad);
            return -1;
        }
        total += n;
        if (t_rnd(&r) % 64 == 0)
            goro_yield();
    }
}

/* Writes 4 MiB: first with goro_write, which must return partial counts
 * (the socket holds far less and the reader has not started), then the
 * rest with goro_write_all while the reader takes small pieces. */
static long big_writer(int fd, long seed)
{
    uint8_t *buf = malloc(BIG);
    if (!buf)
        return -1;
    fill(buf, BIG, (uint32_t)seed, 0);
    ssize_t first = goro_write(fd, buf, BIG);
    if (first <= 0 || first >= BIG)
        t_fail("first goro_write of %d bytes returned %zd (want a partial count)", BIG, first);
    atomic_store(&reader_go, 1);
    size_t off = first > 0 ? (size_t)first : 0;
    long partials = 0;
    while (off < BIG / 2) {                 /* goro_write keeps going partially */
        ssize_t w = goro_write(fd, buf + off, BIG / 2 - off);
        if (w <= 0) {
            t_fail("goro_write: %zd", w);
            break;
        }
        partials += (size_t)w < BIG / 2 - off;
        off += (size_t)w;
    }
    ssize_t rest = goro_write_all(fd, buf + off, BIG - off);
    if (rest != (ssize_t)(BIG - off))
        t_fail("goro_write_all(%zu): %zd", BIG - off, rest);
    if (shutdown(fd, SHUT_WR) != 0)
        t_fail("shutdown: %s", strerror(t_errno()));
    free(buf);
    return partials + 1;                    /* the first write was partial */
}

START_TEST(partial_writes_and_small_reads)
{
    for (int kind = 0; kind < 2; kind++) {  /* TCP, then a unix socketpair */
        int p[2];
        if (kind == 0)
            t_tcp_pair(p);
        else
            make_socketpair(SOCK_STREAM, p);
        t_set_bufs(p[0], 64 << 10);
        t_set_bufs(p[1], 64 << 10);
        atomic_store(&reader_go, 0);
        t_fail_reset();
        long seed = 77 + kind, partial = 0, got = 0;
        goro_t *rd = go(small_reader, p[1], seed);
        goro_t *wr = go(big_writer, p[0], seed);
        ck_assert_ptr_nonnull(rd);
        ck_assert_ptr_nonnull(wr);
        ck_assert_int_eq(goro_join(wr, &partial), 0);
        ck_assert_int_eq(goro_join(rd, &got), 0);
        ck_assert_msg(!t_failed(), "kind %d: %s", kind, t_failed());
        ck_assert_int_eq(got, BIG);
        /* The first write is partial (checked in big_writer: nobody reads
         * yet). Later ones may not be: a unix socket's write goes on while
         * a reader on the other CPU drains it (CI: the rest of the first
         * 2 MiB went in one call). */
        ck_assert_msg(partial >= 1, "kind %d: %ld partial writes", kind, partial);
        ck_assert_int_eq(goro_close(p[0]), 0);
        ck_assert_int_eq(goro_close(p[1]), 0);
    }
}
END_TEST

/* readv / writev with iovecs that do not line up, and a read asking for
 * more than is there returning what is there. */
static long vector_reader(int fd)
{
    static uint8_t a[7], b[50000], c[60000];
    struct iovec iov[3] = { { a, sizeof a }, { b, sizeof b }, { c, sizeof c } };
    ssize_t n = goro_readv(fd, iov, 3);
    long total = 0;
    /* gather into one buffer to check, reading on until the 100007 bytes are in */
    static uint8_t all[7 + 50000 + 60000];
    while (n > 0) {
        size_t k = (size_t)n, o = 0;
        for (int i = 0; i < 3 && o < k; i++) {
            size_t take = k - o < iov[i].iov_len ? k - o : iov[i].iov_len;
            memcpy(all + total + o, iov[i].iov_base, take);
            o += take;
        }
        total += n;
        if (total >= 100007)
            break;
        n = goro_readv(fd, iov, 3);
    }
    if (n < 0)
        t_fail("readv: %zd", n);
    if (total != 100007 || mismatch(all, (size_t)total, 5, 0) >= 0)
        t_fail("readv: %ld bytes, first bad %ld", total, mismatch(all, (size_t)total, 5, 0));
    return total;
}

START_TEST(vectored_and_short_reads)
{
    int p[2];
    make_socketpair(SOCK_STREAM, p);
    static uint8_t data[100007];
    fill(data, sizeof data, 5, 0);
    goro_t *h = go(vector_reader, p[1]);
    ck_assert_ptr_nonnull(h);
    struct iovec iov[3] = { { data, 1 }, { data + 1, 1000 }, { data + 1001, sizeof data - 1001 } };
    ssize_t w = goro_writev(p[0], iov, 3);
    ck_assert_int_gt(w, 0);
    if ((size_t)w < sizeof data)
        ck_assert_int_eq(goro_write_all(p[0], data + w, sizeof data - (size_t)w),
                         (ssize_t)(sizeof data - (size_t)w));
    long total = 0;
    ck_assert_int_eq(goro_join(h, &total), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(total, (long)sizeof data);

    /* 10 bytes there, 100 asked for: 10 come back, at once */
    ck_assert_int_eq(goro_write(p[0], "0123456789", 10), 10);
    char buf[100];
    ck_assert_int_eq(goro_read(p[1], buf, sizeof buf), 10);
    ck_assert_int_eq(memcmp(buf, "0123456789", 10), 0);
    ck_assert_int_eq(goro_send(p[1], "ab", 2, 0), 2);
    ck_assert_int_eq(goro_recv(p[0], buf, sizeof buf, MSG_PEEK), 2);  /* flags pass through */
    ck_assert_int_eq(goro_recv(p[0], buf, sizeof buf, 0), 2);
    ck_assert_int_eq(memcmp(buf, "ab", 2), 0);
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);
}
END_TEST

/* ---- goro_read_full ---- */

static long trickle_writer(int fd)
{
    /* three pieces with pauses between: the reader must gather them */
    static const char abc[] = "abcdefghijklmnopqrstuvwxyz";
    for (size_t off = 0; off < 26; off += 9) {
        size_t n = 26 - off < 9 ? 26 - off : 9;
        if (goro_write_all(fd, abc + off, n) != (ssize_t)n)
            return -1;
        goro_sleep(2 * GORO_MSEC);
    }
    return 0;
}

START_TEST(read_full_records)
{
    int p[2], q[2];
    t_tcp_pair(p);
    t_tcp_pair(q);
    goro_t *h = go(trickle_writer, p[0]);
    ck_assert_ptr_nonnull(h);
    char buf[100];
    ck_assert_int_eq(goro_read_full(p[1], buf, 26), 26);
    ck_assert_int_eq(memcmp(buf, "abcdefghijklmnopqrstuvwxyz", 26), 0);
    long r = -2;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);

    /* an early end of file: the bytes that came, no error; then 0 */
    ck_assert_int_eq(goro_write_all(p[0], "0123456789", 10), 10);
    ck_assert_int_eq(shutdown(p[0], SHUT_WR), 0);
    ck_assert_int_eq(goro_read_full(p[1], buf, sizeof buf), 10);
    ck_assert_int_eq(memcmp(buf, "0123456789", 10), 0);
    ck_assert_int_eq(goro_read_full(p[1], buf, sizeof buf), 0);

    /* a deadline in the middle of a record: the error, and *got says how
     * much of it is in buf */
    ck_assert_int_eq(goro_write_all(q[0], "xyz", 3), 3);
    size_t got = 99;
    ck_assert_int_eq(goro_read_full_until(q[1], buf, 8, &got, goro_now() + 20 * GORO_MSEC),
                     -ETIMEDOUT);
    ck_assert_uint_eq(got, 3);
    ck_assert_int_eq(memcmp(buf, "xyz", 3), 0);

    /* a bad descriptor, also when nothing is asked for */
    ck_assert_int_eq(goro_read_full(-1, buf, 4), -EBADF);
    got = 99;
    ck_assert_int_eq(goro_read_full_until(-1, buf, 0, &got, GORO_FOREVER), -EBADF);
    ck_assert_uint_eq(got, 0);
    ck_assert_int_eq(goro_read_full(q[1], buf, 0), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(goro_close(p[i]), 0);
        ck_assert_int_eq(goro_close(q[i]), 0);
    }
}
END_TEST

/* ---- goro_writev_all ---- */

/* A gather list over data: n entries of random lengths (a quarter of them
 * empty, some large), covering exactly len bytes. Returns the count. */
static int iov_scatter(struct iovec *iov, int max, uint8_t *data, size_t len, uint32_t *rnd)
{
    int n = 0;
    size_t off = 0;
    while (off < len && n < max - 1) {
        uint32_t pick = t_rnd(rnd), size = pick >> 8;
        size_t want = pick % 4 == 0 ? 0 : (pick >> 2) % 16 == 0 ? 1 + size % 20000 : 1 + size % 600;
        if (want > len - off)
            want = len - off;
        iov[n++] = (struct iovec){ data + off, want };
        off += want;
    }
    if (off < len)
        iov[n++] = (struct iovec){ data + off, len - off };
    return n;
}

/* A reader slower than the writer: small reads with pauses, checking
 * every byte; returns the byte count (end of file ends it). */
static long slow_reader(int fd, long seed)
{
    uint8_t buf[700];
    uint32_t r = (uint32_t)seed | 1;
    long total = 0;
    for (;;) {
        ssize_t n = goro_read(fd, buf, 1 + t_rnd(&r) % sizeof buf);
        if (n <= 0) {
            if (n < 0)
                t_fail("slow reader: %zd", n);
            return total;
        }
        long bad = mismatch(buf, (size_t)n, (uint32_t)seed, (size_t)total);
        if (bad >= 0) {
            t_fail("slow reader: wrong byte at offset %ld", total + bad);
            return -1;
        }
        total += n;
        if (t_rnd(&r) % 16 == 0)
            goro_sleep(100 * GORO_USEC);
    }
}

/* Partial writes land anywhere in the list, across entry boundaries and
 * in the middle of entries, over more entries than one window holds; the
 * caller's array comes back as it was given. */
START_TEST(writev_all_partial_writes)
{
    enum { LEN = 1 << 18, MAXIOV = 1000 };
    uint8_t *data = xmalloc(LEN);
    struct iovec *iov = xmalloc(MAXIOV * sizeof *iov), *copy = xmalloc(MAXIOV * sizeof *iov);
    uint32_t rnd = 4242;
    long rounds = t_scale(6) < 2 ? 2 : t_scale(6);
    for (long round = 0; round < rounds; round++) {
        int p[2];
        if (round % 2)
            make_socketpair(SOCK_STREAM, p);
        else
            t_tcp_pair(p);
        /* TCP with buffers this small would wait for its persist timer */
        t_set_bufs(p[0], round % 2 ? 4096 : 32768);
        t_set_bufs(p[1], round % 2 ? 4096 : 32768);
        size_t len = LEN / 2 + t_rnd(&rnd) % (LEN / 2);
        uint32_t seed = 900 + (uint32_t)round;
        fill(data, len, seed, 0);
        int n = iov_scatter(iov, round % 3 ? MAXIOV : 40, data, len, &rnd);
        memcpy(copy, iov, (size_t)n * sizeof *iov);
        t_fail_reset();
        goro_t *rd = go(slow_reader, p[1], (long)seed);
        ck_assert_ptr_nonnull(rd);
        size_t written = 7;
        ck_assert_int_eq(goro_writev_all_until(p[0], iov, n, &written, GORO_FOREVER),
                         (ssize_t)len);
        ck_assert_uint_eq(written, len);
        ck_assert_int_eq(memcmp(copy, iov, (size_t)n * sizeof *iov), 0);
        ck_assert_int_eq(shutdown(p[0], SHUT_WR), 0);
        long got = 0;
        ck_assert_int_eq(goro_join(rd, &got), 0);
        ck_assert_msg(!t_failed(), "round %ld (%d entries): %s", round, n, t_failed());
        ck_assert_int_eq(got, (long)len);
        ck_assert_int_eq(goro_close(p[0]), 0);
        ck_assert_int_eq(goro_close(p[1]), 0);
    }
    free(copy);
    free(iov);
    free(data);
}
END_TEST

static long writev_all_in_coroutine(int fd)
{
    static const char a[] = "head:", b[] = "body";
    struct iovec iov[3] = { { (void *)a, 5 }, { NULL, 0 }, { (void *)b, 4 } };
    return goro_writev_all(fd, iov, 3);
}

/* Empty entries, no entries, bad descriptors and counts, a deadline in
 * the middle (the error, with *written saying how far it got). */
START_TEST(writev_all_edges)
{
    int s[2];
    make_socketpair(SOCK_STREAM, s);
    char buf[64];
    struct iovec none[3] = { { buf, 0 }, { NULL, 0 }, { buf + 5, 0 } };
    size_t written = 9;
    ck_assert_int_eq(goro_writev_all_until(s[0], none, 3, &written, GORO_FOREVER), 0);
    ck_assert_uint_eq(written, 0);
    ck_assert_int_eq(goro_writev_all(s[0], none, 0), 0);
    ck_assert_int_eq(goro_writev_all(s[0], NULL, 0), 0);
    long r = -1;
    ck_assert_int_eq(goro_join(go(writev_all_in_coroutine, s[0]), &r), 0);
    ck_assert_int_eq(r, 9);
    ck_assert_int_eq(goro_read(s[1], buf, sizeof buf), 9);
    ck_assert_int_eq(memcmp(buf, "head:body", 9), 0);

    /* counts and lengths writev(2) refuses, checked before anything goes */
    struct iovec one = { buf, 1 };
    written = 9;
    ck_assert_int_eq(goro_writev_all_until(s[0], &one, -1, &written, GORO_FOREVER), -EINVAL);
    ck_assert_uint_eq(written, 0);
    ck_assert_int_eq(goro_writev_all(s[0], &one, IOV_MAX + 1), -EINVAL);
    ck_assert_int_eq(goro_writev_all(s[0], NULL, 1), -EINVAL);
    struct iovec huge[2] = { { buf, (size_t)SSIZE_MAX }, { buf, 2 } };
    ck_assert_int_eq(goro_writev_all(s[0], huge, 2), -EINVAL);

    /* bad descriptors, with and without bytes to write */
    int fds[] = { -1, 19999, INT_MAX };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        written = 9;
        ck_assert_int_eq(goro_writev_all_until(fds[i], &one, 1, &written, GORO_FOREVER),
                         -EBADF);
        ck_assert_uint_eq(written, 0);
        ck_assert_int_eq(goro_writev_all(fds[i], none, 3), -EBADF);
        ck_assert_int_eq(goro_writev_all(fds[i], NULL, 0), -EBADF);
    }

    /* nobody reads: the deadline ends it part way, and the peer holds
     * exactly the *written bytes that were reported, in order */
    t_set_bufs(s[0], 4096);
    t_set_bufs(s[1], 4096);
    enum { LEN = 1 << 20 };
    uint8_t *data = xmalloc(LEN);
    fill(data, LEN, 31, 0);
    struct iovec iov[200], copy[200];
    uint32_t rnd = 99;
    int n = iov_scatter(iov, 200, data, LEN, &rnd);
    memcpy(copy, iov, sizeof iov);
    written = 0;
    int64_t t0 = goro_now();
    ck_assert_int_eq(goro_writev_all_until(s[0], iov, n, &written, t0 + 30 * GORO_MSEC),
                     -ETIMEDOUT);
    ck_assert_int_ge(goro_now() - t0, 30 * GORO_MSEC);
    ck_assert_msg(written > 0 && written < LEN, "written %zu", written);
    ck_assert_int_eq(memcmp(copy, iov, sizeof iov), 0);
    ck_assert_int_eq(shutdown(s[0], SHUT_WR), 0);
    uint8_t *got = xmalloc(LEN);
    ck_assert_int_eq(goro_read_full(s[1], got, LEN), (ssize_t)written);
    ck_assert_int_eq(mismatch(got, written, 31, 0), -1);
    free(got);
    free(data);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

/* Adds this file's tests to the io suite's test cases (test_io.h). */
void io_stream_tests(struct io_tcases *tc)
{
    tcase_add_test(tc->io, echo_thousands_of_connections);
    tcase_add_test(tc->io, partial_writes_and_small_reads);
    tcase_add_test(tc->io, vectored_and_short_reads);
    tcase_add_test(tc->io, read_full_records);
    tcase_add_test(tc->io, writev_all_partial_writes);
    tcase_add_test(tc->io, writev_all_edges);
}
