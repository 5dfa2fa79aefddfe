/* accept.c - connections per second: goro_listen + goro_dial.
 *
 * Measures: accept + first echo + close per second on the loopback. A
 * server coroutine accepts (goro_accept_backoff) and starts a coroutine
 * per connection that echoes one 64-byte message and closes; CLIENTS
 * client coroutines each loop: goro_dial("tcp4", "127.0.0.1:port"), write
 * 64 B, read the echo, read the end of file, close. The server closes
 * first, so TIME_WAIT stays on its side and the client ports come back at
 * once. CONNS connections per repetition, best of REPS. Comparable to
 * bench/peers/go/accept.go (net.Listen / net.Dial). Workers: GORO_WORKERS
 * (run.sh gives both sides the same count).
 *
 * Output:
 *   name=accept impl=goro value=<connections per second> unit=conn/s
 */
#include "bench.h"

#include <stdatomic.h>

#include <goro.h>

#define CLIENTS 32
#define CONNS 20000L
#define REPS 3
#define MSG 64

static char addr[64];
static _Atomic long left;

static void serve(int fd)
{
    char buf[MSG];
    ssize_t n = goro_read_full(fd, buf, MSG);
    if (n == MSG)
        goro_write_all(fd, buf, MSG);
    goro_close(fd);
}

static void acceptor(int lfd)
{
    int fd;
    while ((fd = goro_accept_backoff(lfd, NULL, NULL, NULL, GORO_FOREVER)) >= 0)
        if (goro_go(NULL, NULL, serve, fd) != 0)
            goro_close(fd);
}

static void client(void)
{
    char out[MSG], in[MSG + 1];
    memset(out, 'x', sizeof out);
    while (atomic_fetch_sub(&left, 1) > 0) {
        int fd;
        BENCH_CHECK(goro_dial("tcp4", addr, GORO_FOREVER, &fd));
        BENCH_CHECK((int)goro_write_all(fd, out, MSG));
        if (goro_read_full(fd, in, MSG + 1) != MSG)   /* the echo, then end of file */
            bench_die("accept: no echo");
        goro_close(fd);
    }
}

static void driver(double *best)
{
    int lfd;
    BENCH_CHECK(goro_listen("tcp4", "127.0.0.1:0", NULL, &lfd));
    BENCH_CHECK(goro_listen_addr(lfd, addr, sizeof addr));
    goro_t *acc, *h[CLIENTS];
    BENCH_CHECK(goro_go(&acc, NULL, acceptor, lfd));
    *best = 0;
    for (int r = 0; r <= REPS; r++) {          /* round 0 warms up */
        atomic_store(&left, r ? CONNS : CONNS / 10);
        double t0 = bench_now_ns();
        for (int i = 0; i < CLIENTS; i++)
            BENCH_CHECK(goro_go(&h[i], NULL, client));
        for (int i = 0; i < CLIENTS; i++)
            BENCH_CHECK(goro_join(h[i], NULL));
        double rate = CONNS / ((bench_now_ns() - t0) / 1e9);
        if (r && rate > *best)
            *best = rate;
    }
    goro_cancel(acc);
    goro_join(acc, NULL);
    goro_close(lfd);
}

int main(void)
{
    double best;
    goro_t *d;
    BENCH_CHECK(goro_start(NULL));
    BENCH_CHECK(goro_go(&d, NULL, driver, &best));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_report("accept", best, "conn/s");
    return 0;
}
