/* spawn.c - coroutine spawn + run + exit + join cost, pooled stacks.
 *
 * Measures: ns per coroutine for goro_go() + run + exit + goro_join() of a
 * trivial coroutine (it stores one int), in batches of 1000: spawn 1000,
 * join the 1000, repeat (as bench/peers/go/spawn.go does with a WaitGroup).
 * The spawning runs in a coroutine on the runtime, so joins park it instead
 * of blocking a thread; after the warm-up every stack comes from the
 * runtime's stack pools. Run with 1 worker, then (after goro_shutdown and a
 * fresh goro_start) with 2 workers. 5e5 coroutines per repetition; best
 * (minimum) of 5 repetitions.
 *
 * Output:
 *   name=spawn impl=goro value=<ns> unit=ns      (1 worker)
 *   name=spawn_2w impl=goro value=<ns> unit=ns   (2 workers)
 */
#include "bench.h"

#include <goro.h>

#define BATCH 1000
#define BATCHES 500L /* 5e5 coroutines per repetition */
#define REPS 5

static int sink[BATCH];
static goro_t *h[BATCH];

static void trivial(int i)
{
    sink[i] = i;
}

static void run(long nb)
{
    for (long b = 0; b < nb; b++) {
        for (int i = 0; i < BATCH; i++)
            BENCH_CHECK(goro_go(&h[i], NULL, trivial, i));
        for (int i = 0; i < BATCH; i++)
            BENCH_CHECK(goro_join(h[i], NULL));
    }
}

static double driver(void)
{
    run(10); /* warm-up: fills the stack pools */
    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now_ns();
        run(BATCHES);
        double t = (bench_now_ns() - t0) / (BATCH * BATCHES);
        if (t < best)
            best = t;
    }
    return best;
}

/* The driver returns a double, which go() cannot hand back: box it. */
static void driver_into(double *out)
{
    *out = driver();
}

static double measure(int workers)
{
    double best;
    goro_t *d;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = workers }));
    BENCH_CHECK(goro_go(&d, NULL, driver_into, &best));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    return best;
}

int main(void)
{
    bench_report("spawn", measure(1), "ns");
    bench_report("spawn_2w", measure(2), "ns");
    return 0;
}
