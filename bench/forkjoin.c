/* forkjoin.c - fork-join tree of ~1 us leaves, 1 and 2 workers.
 *
 * Measures: wall time in ms of a binary fork-join over 2^20 leaves; each
 * internal node runs its left half in a new coroutine and its right half
 * inline, then joins the left one (goro_join, which hands back its result)
 * and adds the two results. Each leaf does ~1 us of busy integer work:
 * xorshift64 iterations, the count calibrated once at startup (best of 5
 * timings of 5e6 iterations) so one leaf takes ~1 us. Same tree shape, leaf
 * function and calibration as bench/peers/go/forkjoin.go. Ideal time is
 * 2^20 us / workers (~1049 ms / workers). Run on 1 worker, then (after
 * goro_shutdown and a fresh goro_start) on 2; best (minimum) of 2 runs each.
 * The tree is started from a coroutine, timed there.
 *
 * Output:
 *   name=forkjoin_1w impl=goro value=<ms> unit=ms
 *   name=forkjoin_2w impl=goro value=<ms> unit=ms
 *   name=forkjoin_speedup impl=goro value=<1w / 2w> unit=x
 */
#include "bench.h"

#include <stdint.h>

#include <goro.h>

#define DEPTH 20 /* 2^20 leaves */
#define REPS 2

static long leaf_iters;

/* n xorshift64 steps from seed; the result is used, so the loop stays. */
__attribute__((noinline)) static uint64_t work(uint64_t seed, long n)
{
    uint64_t x = seed | 1;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static long calibrate(void)
{
    const long n = 5000000;
    double best = 1e300;
    volatile uint64_t sink = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = bench_now_ns();
        sink += work((uint64_t)r + 1, n);
        double ns = bench_now_ns() - t0;
        if (ns < best)
            best = ns;
    }
    if (sink == 0)
        fprintf(stderr, "forkjoin: unexpected zero\n");
    long it = (long)((double)n * 1000 / best); /* iterations per 1000 ns */
    return it < 1 ? 1 : it;
}

/* The number of leaves whose work result was non-zero (xorshift never maps
 * a non-zero state to zero, so this must be 2^d). */
static uint64_t fj(int d, uint64_t seed)
{
    if (d == 0)
        return work(seed, leaf_iters) != 0;
    goro_t *h;
    long left;
    BENCH_CHECK(goro_go(&h, NULL, fj, d - 1, 2 * seed));
    uint64_t right = fj(d - 1, 2 * seed + 1);
    BENCH_CHECK(goro_join(h, &left));
    return (uint64_t)left + right;
}

static void driver(double *best_ms)
{
    *best_ms = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now_ns();
        uint64_t n = fj(DEPTH, 1);
        double ms = (bench_now_ns() - t0) / 1e6;
        if (n != (uint64_t)1 << DEPTH)
            bench_die("forkjoin: got %llu leaves, want %llu",
                      (unsigned long long)n, 1ull << DEPTH);
        if (ms < *best_ms)
            *best_ms = ms;
    }
}

static double measure(int workers)
{
    double best;
    goro_t *d;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = workers }));
    BENCH_CHECK(goro_go(&d, NULL, driver, &best));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    return best;
}

int main(void)
{
    leaf_iters = calibrate();
    double t1 = measure(1);
    bench_report("forkjoin_1w", t1, "ms");
    double t2 = measure(2);
    bench_report("forkjoin_2w", t2, "ms");
    bench_report("forkjoin_speedup", t1 / t2, "x");
    return 0;
}
