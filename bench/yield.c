/* yield.c - goro_yield() cost.
 *
 * Measures: ns per goro_yield() with two coroutines yielding to each other
 * in a loop on a single worker (goro_start with workers = 1). Each yield puts
 * the caller back on the run queue and switches straight to the other
 * coroutine. Time (taken in a driver coroutine that spawns the two and joins
 * them) is divided by the total number of goro_yield calls made by both, as
 * in bench/peers/go/yield.go (ns per runtime.Gosched). 2e6 yields per
 * repetition; best (minimum) of 5 repetitions.
 *
 * Output: name=yield impl=goro value=<ns> unit=ns
 */
#include "bench.h"

#include <goro.h>

#define PER_G 1000000L /* goro_yield calls per coroutine per repetition */
#define REPS 5

static void yielder(long n)
{
    for (long i = 0; i < n; i++)
        goro_yield();
}

/* Both yielders, spawned and joined; returns the elapsed ns. */
static double run(long n)
{
    goro_t *a, *b;
    double t0 = bench_now_ns();
    BENCH_CHECK(goro_go(&a, NULL, yielder, n));
    BENCH_CHECK(goro_go(&b, NULL, yielder, n));
    BENCH_CHECK(goro_join(a, NULL));
    BENCH_CHECK(goro_join(b, NULL));
    return bench_now_ns() - t0;
}

static double best_ns;

static void driver(void)
{
    run(10000); /* warm-up */
    best_ns = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t = run(PER_G) / (2.0 * PER_G);
        if (t < best_ns)
            best_ns = t;
    }
}

int main(void)
{
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 1 }));
    goro_t *d;
    BENCH_CHECK(goro_go(&d, NULL, driver));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_report("yield", best_ns, "ns");
    return 0;
}
