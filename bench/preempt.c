/* preempt.c - what preemption costs CPU-bound coroutines, and what it buys
 * a coroutine that wants to run on time.
 *
 * Measures, with NSPIN spinners per worker (coroutines that never make a
 * goro call: a dependent multiply-add chain in GORO_PREEMPTIBLE code):
 *  - throughput: each spinner does WORK iterations; the figure is the wall
 *    time until all are done, with a 10 ms slice (preempt_work_on) and with
 *    preemption off (slice -1, preempt_work_off). Runs alternate, best of
 *    REPS each. run.sh reports on / off (target <= 1.01: < 1% loss);
 *  - latency: one more coroutine sleeps 1 ms in a loop among spinners that
 *    run until the end, 10 ms slice, for TICK_SECONDS; each wake-up's
 *    lateness is (time it runs again) - (time it went to sleep + 1 ms), and
 *    the figures are the median, 99th percentile and maximum (target for
 *    p99: 2 slices). As bench/peers/go/preempt.go (goroutines, time.Sleep).
 * Workers: GORO_WORKERS from the env, default the number of online CPUs.
 *
 * Output:
 *   name=preempt_work_on impl=goro value=<ms> unit=ms
 *   name=preempt_work_off impl=goro value=<ms> unit=ms
 *   name=preempt_tick_p50_late impl=goro value=<us> unit=us
 *   name=preempt_tick_p99_late impl=goro value=<us> unit=us
 *   name=preempt_tick_max_late impl=goro value=<us> unit=us
 */
#include "bench.h"

#include <stdatomic.h>
#include <stdint.h>

#include <goro.h>

#define NSPIN 4                     /* spinners per worker */
#define WORK (1L << 27)             /* iterations per spinner: ~0.2 s */
#define REPS 3
#define SLICE (10 * GORO_MSEC)
#define TICK_SECONDS 3
#define MAX_TICKS 100000

/* The work: each step depends on the last, so it cannot be vectorised
 * or skipped, and nothing in it is a goro call. */
static GORO_PREEMPTIBLE uint64_t work(long n)
{
    uint64_t x = 1;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static uint64_t sink;               /* keeps the results alive */

static void spinner_fixed(void)
{
    uint64_t x = work(WORK);
    __atomic_fetch_xor(&sink, x, __ATOMIC_RELAXED);
}

/* Wall time, in ns, of NSPIN * workers spinners doing their WORK. */
static double time_work(int64_t slice_ns)
{
    goro_config_t cfg = { .slice_ns = slice_ns };
    BENCH_CHECK(goro_start(&cfg));
    int n = NSPIN * goro_workers();
    goro_t **h = calloc((size_t)n, sizeof *h);
    if (!h)
        bench_die("preempt: out of memory");
    double t0 = bench_now_ns();
    for (int i = 0; i < n; i++)
        BENCH_CHECK(goro_go(&h[i], NULL, spinner_fixed));
    for (int i = 0; i < n; i++)
        BENCH_CHECK(goro_join(h[i], NULL));
    double dt = bench_now_ns() - t0;
    free(h);
    BENCH_CHECK(goro_shutdown());
    return dt;
}

/* ---- latency ---- */

static atomic_int stop;
static int64_t late[MAX_TICKS];
static long nlate;

static GORO_PREEMPTIBLE void spinner_until_stop(void)
{
    uint64_t x = 1;
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        x ^= work(1 << 16);
    __atomic_fetch_xor(&sink, x, __ATOMIC_RELAXED);
}

static void ticker(void)
{
    int64_t end = goro_now() + TICK_SECONDS * GORO_SEC;
    while (goro_now() < end && nlate < MAX_TICKS) {
        int64_t t0 = goro_now();
        BENCH_CHECK(goro_sleep(GORO_MSEC));
        late[nlate++] = goro_now() - t0 - GORO_MSEC;
    }
    atomic_store(&stop, 1);
}

static void measure_ticks(void)
{
    goro_config_t cfg = { .slice_ns = SLICE };
    BENCH_CHECK(goro_start(&cfg));
    int n = NSPIN * goro_workers();
    goro_t **h = calloc((size_t)n + 1, sizeof *h);
    if (!h)
        bench_die("preempt: out of memory");
    for (int i = 0; i < n; i++)
        BENCH_CHECK(goro_go(&h[i], NULL, spinner_until_stop));
    BENCH_CHECK(goro_go(&h[n], NULL, ticker));
    for (int i = 0; i <= n; i++)
        BENCH_CHECK(goro_join(h[i], NULL));
    free(h);
    BENCH_CHECK(goro_shutdown());
}

int main(void)
{
    double on = 1e300, off = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t = time_work(SLICE);
        on = t < on ? t : on;
        t = time_work(-1);
        off = t < off ? t : off;
    }
    bench_report("preempt_work_on", on / 1e6, "ms");
    bench_report("preempt_work_off", off / 1e6, "ms");

    measure_ticks();
    if (nlate < 10)
        bench_die("preempt: the ticker woke only %ld times in %d s", nlate, TICK_SECONDS);
    bench_sort_i64(late, nlate);
    bench_report("preempt_tick_p50_late", bench_quantile_us(late, nlate, 0.50), "us");
    bench_report("preempt_tick_p99_late", bench_quantile_us(late, nlate, 0.99), "us");
    bench_report("preempt_tick_max_late", bench_quantile_us(late, nlate, 1.0), "us");
    if (late[0] < 0)
        bench_die("preempt: a 1 ms sleep ended %.3f us early", (double)-late[0] / 1e3);
    return 0;
}
