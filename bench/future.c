/* future.c - a future's set + get against a channel hand-off.
 *
 * Measures: ns per one-way hand-off between two coroutines on one worker,
 * bounced as in chan_pingpong: A sets ping[i] and gets pong[i], B gets
 * ping[i] and sets pong[i]. Each hand-off is a set meeting a parked
 * getter, plus a switch. The futures are made before the clock starts
 * and freed after it stops (a future is set once). The channel form runs
 * in the same process, alternating with it, best (minimum) of 5 each, so
 * that the ratio is of one run.
 *
 * Output: name=future_handoff, name=future_chan_handoff (ns); bench/run.sh
 * prints their ratio (future_vs_chan_handoff, target <= 1.0).
 */
#include "bench.h"

#include <goro.h>

#define ROUND_TRIPS 100000L
#define REPS 5

static goro_future_t *fping[ROUND_TRIPS], *fpong[ROUND_TRIPS];
static goro_chan_t *cping, *cpong;

static void fecho(long n)
{
    for (long i = 0; i < n; i++) {
        long v;
        BENCH_CHECK(goro_future_get(fping[i], &v, NULL));
        v++;
        BENCH_CHECK(goro_future_set(fpong[i], &v));
    }
}

static double run_futures(long n)
{
    for (long i = 0; i < n; i++) {
        BENCH_CHECK(goro_future_new(&fping[i], sizeof(long)));
        BENCH_CHECK(goro_future_new(&fpong[i], sizeof(long)));
    }
    goro_t *b;
    BENCH_CHECK(goro_go(&b, NULL, fecho, n));
    goro_yield();                  /* b parks on fping[0] */
    long v = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < n; i++) {
        BENCH_CHECK(goro_future_set(fping[i], &v));
        BENCH_CHECK(goro_future_get(fpong[i], &v, NULL));
    }
    double t = (bench_now_ns() - t0) / (2.0 * n);
    if (v != n)
        bench_die("future: lost values");
    BENCH_CHECK(goro_join(b, NULL));
    for (long i = 0; i < n; i++) {
        BENCH_CHECK(goro_future_free(fping[i]));
        BENCH_CHECK(goro_future_free(fpong[i]));
    }
    return t;
}

static void cecho(void)
{
    long v;
    while (goro_chan_recv(cping, &v) > 0) {
        v++;
        BENCH_CHECK(goro_chan_send(cpong, &v));
    }
}

static double run_chan(long n)
{
    BENCH_CHECK(goro_chan_new(&cping, sizeof(long), 0));
    BENCH_CHECK(goro_chan_new(&cpong, sizeof(long), 0));
    goro_t *b;
    BENCH_CHECK(goro_go(&b, NULL, cecho));
    goro_yield();
    long v = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < n; i++) {
        BENCH_CHECK(goro_chan_send(cping, &v));
        if (goro_chan_recv(cpong, &v) != 1)
            bench_die("chan: closed early");
    }
    double t = (bench_now_ns() - t0) / (2.0 * n);
    BENCH_CHECK(goro_chan_close(cping));
    BENCH_CHECK(goro_join(b, NULL));
    BENCH_CHECK(goro_chan_free(cping));
    BENCH_CHECK(goro_chan_free(cpong));
    return t;
}

static void driver(double *best)
{
    run_futures(1000);             /* warm-up */
    run_chan(1000);
    best[0] = best[1] = 1e300;
    for (int r = 0; r < REPS; r++) {
        double f = run_futures(ROUND_TRIPS), c = run_chan(ROUND_TRIPS);
        if (f < best[0])
            best[0] = f;
        if (c < best[1])
            best[1] = c;
    }
}

int main(void)
{
    double best[2];
    goro_t *d;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 1 }));
    BENCH_CHECK(goro_go(&d, NULL, driver, best));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_report("future_handoff", best[0], "ns");
    bench_report("future_chan_handoff", best[1], "ns");
    return 0;
}
