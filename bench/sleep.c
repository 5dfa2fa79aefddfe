/* sleep.c - timer lateness with many sleeping coroutines.
 *
 * Measures: how late goro_sleep() wakes a coroutine. 10^4 coroutines each
 * sleep 1 ms, ROUNDS times in a row; every wake-up records its lateness,
 * (time it runs again) - (time it went to sleep + 1 ms), and the figures
 * are the median, 99th percentile and maximum over all 2 * 10^5 sleeps,
 * as in bench/peers/go/sleep.go (time.Sleep). A first, unrecorded sleep of
 * i / N ms spreads the coroutines over the millisecond, so the wake-ups
 * are due in a steady stream rather than in one burst per round. That
 * stream is 10^7 wake-ups a second, more than a few CPUs serve easily: the
 * tail figures show how wake-ups queue when the workers fall behind. Single measurement (it is a distribution already). A sleep that
 * ends before its deadline fails the program (after the figures). Workers:
 * GORO_WORKERS from the env, default the number of online CPUs.
 *
 * Output:
 *   name=sleep_p50_late impl=goro value=<us> unit=us
 *   name=sleep_p99_late impl=goro value=<us> unit=us
 *   name=sleep_max_late impl=goro value=<us> unit=us
 */
#include "bench.h"

#include <goro.h>

#define N 10000L
#define ROUNDS 20

static int64_t *late;   /* N * ROUNDS lateness samples, ns */

/* Coroutine i: its own slice of late[], no sharing. */
static void sleeper(long i)
{
    int64_t *mine = late + i * ROUNDS;
    BENCH_CHECK(goro_sleep(GORO_MSEC * i / N));
    for (int r = 0; r < ROUNDS; r++) {
        int64_t t0 = goro_now();
        BENCH_CHECK(goro_sleep(GORO_MSEC));
        mine[r] = goro_now() - t0 - GORO_MSEC;
    }
}

static void driver(void)
{
    static goro_t *h[N];
    for (long i = 0; i < N; i++)
        BENCH_CHECK(goro_go(&h[i], NULL, sleeper, i));
    for (long i = 0; i < N; i++)
        BENCH_CHECK(goro_join(h[i], NULL));
}

/* Samples below zero in sorted v[n]. */
static long count_early(const int64_t *v, long n)
{
    long k = 0;
    while (k < n && v[k] < 0)
        k++;
    return k;
}

int main(void)
{
    const long n = N * ROUNDS;
    late = calloc(n, sizeof *late);
    if (!late)
        bench_die("sleep: out of memory");
    goro_t *d;
    BENCH_CHECK(goro_go(&d, NULL, driver));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_sort_i64(late, n);
    bench_report("sleep_p50_late", bench_quantile_us(late, n, 0.50), "us");
    bench_report("sleep_p99_late", bench_quantile_us(late, n, 0.99), "us");
    bench_report("sleep_max_late", bench_quantile_us(late, n, 1.0), "us");
    /* A sleep that ends before its deadline is a wrong result, not a
     * fast one: report the figures, then fail. */
    if (late[0] < 0)
        bench_die("sleep: %ld of %ld sleeps woke early, the earliest by %.3f us",
                  count_early(late, n), n, (double)-late[0] / 1e3);
    free(late);
    return 0;
}
