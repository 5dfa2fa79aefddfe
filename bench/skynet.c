/* skynet.c - the skynet benchmark (https://github.com/atemerev/skynet).
 *
 * Measures: wall time in ms to build a 10-ary tree of coroutines with
 * 1,000,000 leaves (1,111,111 coroutines in total); each node creates an
 * unbuffered channel, spawns its 10 children detached, which report back
 * over it; leaves send their id and each node sums what it receives. The
 * root total must be 499999500000. Same tree and channel-based reduction as
 * bench/peers/go/skynet.go. Workers: GORO_WORKERS from the env, default the
 * number of online CPUs (compare with Go at GOMAXPROCS = the same). The root
 * is spawned and timed from a driver coroutine. Best (minimum) of 3 runs.
 *
 * Many coroutines may be alive at once: with a mapping per stack (two
 * mappings each, kernels without MADV_GUARD_INSTALL) vm.max_map_count may
 * have to be raised (bench/run.sh does).
 *
 * Output:
 *   name=skynet impl=goro value=<ms> unit=ms
 *   name=skynet_workers impl=goro value=<workers> unit=count
 */
#include "bench.h"

#include <stdint.h>

#include <goro.h>

#define LEAVES 1000000
#define DIV 10
#define REPS 3
#define WANT 499999500000LL

static void skynet(goro_chan_t *c, int64_t num, int64_t size)
{
    if (size == 1) {
        BENCH_CHECK(goro_chan_send(c, &num));
        return;
    }
    goro_chan_t *rc;
    BENCH_CHECK(goro_chan_new(&rc, sizeof(int64_t), 0));
    int64_t sub = size / DIV;
    for (int64_t i = 0; i < DIV; i++)
        BENCH_CHECK(goro_go(NULL, NULL, skynet, rc, num + i * sub, sub));
    int64_t sum = 0;
    for (int i = 0; i < DIV; i++) {
        int64_t v;
        if (goro_chan_recv(rc, &v) != 1)
            bench_die("skynet: channel closed");
        sum += v;
    }
    BENCH_CHECK(goro_chan_free(rc));
    BENCH_CHECK(goro_chan_send(c, &sum));
}

static void driver(double *best_ms)
{
    *best_ms = 1e300;
    for (int r = 0; r < REPS; r++) {
        goro_chan_t *c;
        BENCH_CHECK(goro_chan_new(&c, sizeof(int64_t), 0));
        double t0 = bench_now_ns();
        BENCH_CHECK(goro_go(NULL, NULL, skynet, c, (int64_t)0, (int64_t)LEAVES));
        int64_t sum;
        if (goro_chan_recv(c, &sum) != 1)
            bench_die("skynet: channel closed");
        double ms = (bench_now_ns() - t0) / 1e6;
        BENCH_CHECK(goro_chan_free(c));
        if (sum != WANT)
            bench_die("skynet: wrong sum %lld, want %lld", (long long)sum, WANT);
        if (ms < *best_ms)
            *best_ms = ms;
    }
}

int main(void)
{
    double best;
    goro_t *d;
    BENCH_CHECK(goro_start(NULL)); /* workers: GORO_WORKERS or online CPUs */
    BENCH_CHECK(goro_go(&d, NULL, driver, &best));
    BENCH_CHECK(goro_join(d, NULL));
    int workers = goro_workers();
    BENCH_CHECK(goro_shutdown());
    bench_report("skynet", best, "ms");
    printf("name=skynet_workers impl=goro value=%d unit=count\n", workers);
    return 0;
}
