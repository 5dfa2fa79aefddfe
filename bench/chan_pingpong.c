/* chan_pingpong.c - unbuffered-channel ping-pong.
 *
 * Measures: ns per one-way hand-off between two coroutines that bounce a
 * value over two unbuffered channels (ping: A->B, pong: B->A); a round trip
 * is two hand-offs. Each hand-off is a blocking send meeting a parked
 * receiver: a channel operation plus a scheduler switch. One worker
 * (compare with bench/peers/go/pingpong.go under GOMAXPROCS=1). 6e5
 * hand-offs per repetition; best (minimum) of 5 repetitions.
 *
 * Output: name=chan_pingpong impl=goro value=<ns> unit=ns
 */
#include "bench.h"

#include <goro.h>

#define ROUND_TRIPS 300000L /* 6e5 hand-offs per repetition */
#define REPS 5

static goro_chan_t *ping, *pong;

/* B: echoes v + 1 until ping is closed, then closes pong. */
static void echo(void)
{
    long v;
    while (goro_chan_recv(ping, &v) > 0) {
        v++;
        BENCH_CHECK(goro_chan_send(pong, &v));
    }
    BENCH_CHECK(goro_chan_close(pong));
}

static void run(long n)
{
    long v = 0;
    for (long i = 0; i < n; i++) {
        BENCH_CHECK(goro_chan_send(ping, &v));
        if (goro_chan_recv(pong, &v) != 1)
            bench_die("chan_pingpong: pong closed early");
    }
    if (v != n)
        bench_die("chan_pingpong: lost messages");
}

static void driver(double *best)
{
    goro_t *b;
    BENCH_CHECK(goro_go(&b, NULL, echo));
    run(10000); /* warm-up */
    *best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now_ns();
        run(ROUND_TRIPS);
        double t = (bench_now_ns() - t0) / (2.0 * ROUND_TRIPS);
        if (t < *best)
            *best = t;
    }
    BENCH_CHECK(goro_chan_close(ping));
    if (goro_chan_recv(pong, NULL) != 0)
        bench_die("chan_pingpong: pong not closed");
    BENCH_CHECK(goro_join(b, NULL));
}

int main(void)
{
    double best;
    goro_t *d;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 1 }));
    BENCH_CHECK(goro_chan_new(&ping, sizeof(long), 0));
    BENCH_CHECK(goro_chan_new(&pong, sizeof(long), 0));
    BENCH_CHECK(goro_go(&d, NULL, driver, &best));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_chan_free(ping));
    BENCH_CHECK(goro_chan_free(pong));
    BENCH_CHECK(goro_shutdown());
    bench_report("chan_pingpong", best, "ns");
    return 0;
}
