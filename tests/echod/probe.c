/* echod_probe: the awkward clients of tests/echod/run.sh, one per mode.
 *
 *   echod_probe midmsg PORT CONNS BYTES   each connection sends BYTES in
 *       1 KiB pieces, 10 ms apart, reading each echo back; prints READY once
 *       every connection has had its first piece echoed (the test sends
 *       SIGTERM then); exit 0 if every connection got its whole echo.
 *   echod_probe hold PORT CONNS SECONDS   opens CONNS connections, pings
 *       each (1 s to answer), then keeps pinging the ones that answered
 *       every 0.5 s for SECONDS; prints served=<n> unserved=<n> and exits 1
 *       if a connection that was served stops answering.
 *   echod_probe reset PORT CONNS   connections that send and then reset
 *       (SO_LINGER 0 close): half right away, half with 256 KiB unread.
 *   echod_probe slow PORT SECONDS   one connection writing as fast as it
 *       can while reading 4 KiB every 10 ms; prints sent= and received=.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <goro.h>

#define PIECE 1024
#define PIECE_GAP (10 * GORO_MSEC)

static int port;
static _Atomic long failures;

static void fail(const char *what, int err)
{
    if (atomic_fetch_add(&failures, 1) < 5)
        fprintf(stderr, "echod_probe: %s: %s\n", what, err ? strerror(err) : "mismatch");
}

static int dial(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int fd = goro_socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return fd;
    int err = goro_connect_until(fd, (struct sockaddr *)&sa, sizeof sa, goro_now() + 5 * GORO_SEC);
    if (err < 0) {
        goro_close(fd);
        return err;
    }
    return fd;
}

/* Sends len bytes and checks that they come back within timeout. */
static int echo_check(int fd, const char *out, size_t len, int64_t timeout)
{
    char in[PIECE];
    int64_t deadline = goro_now() + timeout;
    ssize_t w = goro_write_all_until(fd, out, len, NULL, deadline);
    if (w < 0)
        return (int)w;
    ssize_t r = goro_read_full_until(fd, in, len, NULL, deadline);
    if (r < 0 || (size_t)r < len)
        return r < 0 ? (int)r : -ECONNRESET;   /* an early end */
    return memcmp(in, out, len) == 0 ? 0 : -EBADMSG;
}

/* ---- midmsg ---- */

static goro_waitgroup_t first_echoed = GORO_WAITGROUP_INIT;
static goro_waitgroup_t all_done = GORO_WAITGROUP_INIT;

static void midmsg_conn(long id, long bytes)
{
    char piece[PIECE];
    int fd = dial();
    bool first = true;
    if (fd < 0)
        fail("connect", -fd);
    for (long sent = 0; fd >= 0 && sent < bytes; sent += PIECE) {
        for (int i = 0; i < PIECE; i++)
            piece[i] = (char)(id * 31 + sent / PIECE + i);
        int err = echo_check(fd, piece, PIECE, 5 * GORO_SEC);
        if (err) {
            fail("mid-message echo", -err);
            break;
        }
        if (first)
            goro_waitgroup_done(&first_echoed);
        first = false;
        goro_sleep(PIECE_GAP);
    }
    if (first)
        goro_waitgroup_done(&first_echoed);
    if (fd >= 0)
        goro_close(fd);
    goro_waitgroup_done(&all_done);
}

static int midmsg(long conns, long bytes)
{
    goro_waitgroup_add(&first_echoed, conns);
    goro_waitgroup_add(&all_done, conns);
    for (long i = 0; i < conns; i++)
        goro_go(NULL, NULL, midmsg_conn, i, bytes);
    goro_waitgroup_wait(&first_echoed);
    printf("READY\n");
    fflush(stdout);
    goro_waitgroup_wait(&all_done);
    printf("midmsg conns=%ld bytes=%ld failures=%ld\n", conns, bytes, atomic_load(&failures));
    return atomic_load(&failures) ? 1 : 0;
}

/* ---- hold ---- */

static _Atomic long served, unserved;

/* A served connection must go on being served until the end. */
static void keep_pinging(int fd, const char *ping, size_t len, int64_t until)
{
    while (goro_now() < until) {
        goro_sleep(500 * GORO_MSEC);
        int err = echo_check(fd, ping, len, GORO_SEC);
        if (err) {
            fail("a served connection stopped answering", -err);
            return;
        }
    }
}

static void hold_conn(long id, int64_t until)
{
    char ping[16];
    int n = snprintf(ping, sizeof ping, "ping %ld", id);
    int fd = dial();
    if (fd >= 0 && echo_check(fd, ping, (size_t)n, GORO_SEC) == 0) {
        atomic_fetch_add(&served, 1);
        keep_pinging(fd, ping, (size_t)n, until);
    } else {
        atomic_fetch_add(&unserved, 1);   /* still queued, or refused */
    }
    goro_waitgroup_done(&all_done);
    goro_sleep_until(until);              /* keep the queue as full as it was */
    if (fd >= 0)
        goro_close(fd);
}

static int hold(long conns, double seconds)
{
    int64_t until = goro_now() + (int64_t)(seconds * GORO_SEC);
    goro_waitgroup_add(&all_done, conns);
    for (long i = 0; i < conns; i++)
        goro_go(NULL, NULL, hold_conn, i, until);
    goro_waitgroup_wait(&all_done);
    printf("hold served=%ld unserved=%ld failures=%ld\n", atomic_load(&served),
           atomic_load(&unserved), atomic_load(&failures));
    return atomic_load(&failures) ? 1 : 0;
}

/* ---- reset ---- */

static void reset_conn(long id)
{
    static char junk[256 * 1024];
    struct linger abort_on_close = { .l_onoff = 1, .l_linger = 0 };
    int fd = dial();
    if (fd < 0) {
        fail("connect", -fd);
    } else {
        /* Odd ones leave echod blocked writing to a peer that is about to go. */
        size_t len = id % 2 ? sizeof junk : 64;
        goro_write_all_until(fd, junk, len, NULL, goro_now() + 100 * GORO_MSEC);
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
        goro_close(fd);
    }
    goro_waitgroup_done(&all_done);
}

static int reset(long conns)
{
    goro_waitgroup_add(&all_done, conns);
    for (long i = 0; i < conns; i++)
        goro_go(NULL, NULL, reset_conn, i);
    goro_waitgroup_wait(&all_done);
    printf("reset conns=%ld failures=%ld\n", conns, atomic_load(&failures));
    return atomic_load(&failures) ? 1 : 0;
}

/* ---- slow ---- */

static _Atomic long long sent, received;

static void slow_writer(int fd, int64_t until)
{
    static char chunk[64 * 1024];
    while (goro_now() < until) {
        ssize_t n = goro_write_until(fd, chunk, sizeof chunk, until);
        if (n < 0)
            break;
        atomic_fetch_add(&sent, n);
    }
}

static int slow(double seconds)
{
    char buf[4096];
    int fd = dial();
    if (fd < 0) {
        fail("connect", -fd);
        return 1;
    }
    int64_t until = goro_now() + (int64_t)(seconds * GORO_SEC);
    goro_t *w = go(slow_writer, fd, until);
    while (goro_now() < until) {
        ssize_t n = goro_read_until(fd, buf, sizeof buf, until);
        if (n <= 0)
            break;
        atomic_fetch_add(&received, n);
        goro_sleep(10 * GORO_MSEC);
    }
    goro_join(w, NULL);
    printf("slow sent=%lld received=%lld\n", atomic_load(&sent), atomic_load(&received));
    goro_close(fd);
    return 0;
}

/* ---- main ---- */

static int run(int argc, char **argv)
{
    const char *mode = argv[1];
    port = atoi(argv[2]);
    if (!strcmp(mode, "midmsg") && argc == 5)
        return midmsg(atol(argv[3]), atol(argv[4]));
    if (!strcmp(mode, "hold") && argc == 5)
        return hold(atol(argv[3]), atof(argv[4]));
    if (!strcmp(mode, "reset") && argc == 4)
        return reset(atol(argv[3]));
    if (!strcmp(mode, "slow") && argc == 4)
        return slow(atof(argv[3]));
    fprintf(stderr, "usage: see the top of tests/echod/probe.c\n");
    return 2;
}

int main(int argc, char **argv)
{
    long status = 2;
    if (argc >= 3) {
        goro_t *h = go(run, argc, argv);
        if (h)
            goro_join(h, &status);
    } else {
        fprintf(stderr, "usage: see the top of tests/echod/probe.c\n");
    }
    goro_shutdown();
    return (int)status;
}
