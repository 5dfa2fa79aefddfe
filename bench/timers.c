/* timers.c - the scheduler's timers: lateness by heap size, a ticker among
 * cooperative yielders, and the cost of resetting a timer.
 *
 * Measures:
 *  - timers_<N>_p50_late / _p99_late, N = 10^2 .. 10^5: N coroutines sleep
 *    N * 10 us each, over and over, so that N timers are always pending
 *    while wake-ups come at a steady 10^5 a second whatever N is: the
 *    figure shows what the size of the heaps costs, not overload. Each
 *    sleep's lateness is (time it runs again) - (its deadline); the first
 *    sleep spreads the coroutines over the period and is not recorded.
 *  - ticker_p50_late / _p99_late / _max_late: a 1 ms goro_ticker read by
 *    one coroutine among YIELDERS coroutines that work ~0.5 ms between
 *    goro_yield calls, for TICK_SECONDS; each tick's lateness is (time it
 *    is received) - (its scheduled time). Run with 1 and with 2 workers.
 *  - timer_reset: ns per goro_ticker_reset (stop a timer, start it again)
 *    with 10^4 other timers pending, as Go's time.Timer.Reset.
 *  - timers_idle_cpu: the process's CPU time over IDLE_SECONDS while 10^4
 *    coroutines sleep with their timers an hour away, in % of one CPU
 *    (target < 0.1).
 * As bench/peers/go/timers.go. Workers: GORO_WORKERS from the env.
 *
 * Output:
 *   name=timers_<N>_p50_late impl=goro value=<us> unit=us  (and _p99_late)
 *   name=ticker_p50_late impl=goro value=<us> unit=us  (and _p99, _max)
 *   name=timer_reset impl=goro value=<ns> unit=ns
 *   name=timers_idle_cpu impl=goro value=<percent> unit=%
 */
#include "bench.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>

#include <goro.h>

#define STEP (10 * GORO_USEC)       /* one wake-up every STEP, any N */
#define RUN_NS (GORO_SEC)           /* per heap size, at least 3 rounds */
#define YIELDERS 4
#define TICK_SECONDS 2
#define RESETS 1000000L
#define PENDING 10000L
#define IDLE_N 10000L
#define IDLE_SECONDS 5

/* ---- lateness by heap size ---- */

static int64_t *late;
static long nlate_per;              /* samples per sleeper */

static void sleeper(long i, long n)
{
    int64_t period = n * STEP;
    int64_t *mine = late + i * nlate_per;
    int64_t due = goro_now() + period * i / n;
    BENCH_CHECK(goro_sleep_until(due));
    for (long r = 0; r < nlate_per; r++) {
        due += period;
        BENCH_CHECK(goro_sleep_until(due));
        mine[r] = goro_now() - due;
    }
}

static void heap_size_run(long n)
{
    nlate_per = RUN_NS / (n * STEP);
    if (nlate_per < 3)
        nlate_per = 3;
    long total = n * nlate_per;
    late = calloc((size_t)total, sizeof *late);
    goro_t **h = calloc((size_t)n, sizeof *h);
    if (!late || !h)
        bench_die("timers: out of memory");
    for (long i = 0; i < n; i++)
        BENCH_CHECK(goro_go(&h[i], NULL, sleeper, i, n));
    for (long i = 0; i < n; i++)
        BENCH_CHECK(goro_join(h[i], NULL));
    bench_sort_i64(late, total);
    char name[64];
    snprintf(name, sizeof name, "timers_%ld_p50_late", n);
    bench_report(name, bench_quantile_us(late, total, 0.50), "us");
    snprintf(name, sizeof name, "timers_%ld_p99_late", n);
    bench_report(name, bench_quantile_us(late, total, 0.99), "us");
    if (late[0] < 0)
        bench_die("timers: a sleep woke %.3f us early", (double)-late[0] / 1e3);
    free(late);
    free(h);
}

/* ---- a ticker among yielders ---- */

static atomic_int stop;

static void yielder(void)
{
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int64_t until = goro_now() + 500 * GORO_USEC;
        while (goro_now() < until)
            ;
        goro_yield();
    }
}

static void ticker_run(void)
{
    goro_t *y[YIELDERS];
    for (int i = 0; i < YIELDERS; i++)
        BENCH_CHECK(goro_go(&y[i], NULL, yielder));
    goro_ticker_t *t;
    BENCH_CHECK(goro_ticker_new(&t, GORO_MSEC));
    long n = TICK_SECONDS * 1000L;
    int64_t *tl = calloc((size_t)n, sizeof *tl);
    if (!tl)
        bench_die("timers: out of memory");
    for (long i = 0; i < n; i++) {
        int64_t tick;
        BENCH_CHECK(goro_ticker_wait(t, &tick));
        tl[i] = goro_now() - tick;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < YIELDERS; i++)
        BENCH_CHECK(goro_join(y[i], NULL));
    BENCH_CHECK(goro_ticker_free(t));
    bench_sort_i64(tl, n);
    bench_report("ticker_p50_late", bench_quantile_us(tl, n, 0.50), "us");
    bench_report("ticker_p99_late", bench_quantile_us(tl, n, 0.99), "us");
    bench_report("ticker_max_late", bench_quantile_us(tl, n, 1.0), "us");
    free(tl);
}

/* ---- reset cost ---- */

static void reset_run(void)
{
    goro_ticker_t **pending = calloc(PENDING, sizeof *pending);
    if (!pending)
        bench_die("timers: out of memory");
    for (long i = 0; i < PENDING; i++)
        BENCH_CHECK(goro_ticker_new(&pending[i], 3600 * GORO_SEC + i * GORO_USEC));
    goro_ticker_t *t;
    BENCH_CHECK(goro_ticker_new(&t, 3600 * GORO_SEC));
    double best = 1e18;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = bench_now_ns();
        for (long i = 0; i < RESETS; i++)
            goro_ticker_reset(t, 3600 * GORO_SEC + (i & 1023) * GORO_USEC);
        double per = (bench_now_ns() - t0) / RESETS;
        if (per < best)
            best = per;
    }
    bench_report("timer_reset", best, "ns");
    BENCH_CHECK(goro_ticker_free(t));
    for (long i = 0; i < PENDING; i++)
        BENCH_CHECK(goro_ticker_free(pending[i]));
    free(pending);
}

/* ---- idle cost ---- */

static void long_sleeper(void)
{
    goro_sleep(3600 * GORO_SEC);    /* cancelled at the end */
}

/* CPU the whole process uses while IDLE_N coroutines sleep with IDLE_N
 * timers pending an hour away: the workers must sleep, not poll. */
static void idle_run(void)
{
    goro_t **h = calloc(IDLE_N, sizeof *h);
    if (!h)
        bench_die("timers: out of memory");
    for (long i = 0; i < IDLE_N; i++)
        BENCH_CHECK(goro_go(&h[i], NULL, long_sleeper));
    goro_sleep(GORO_SEC);           /* let every one park and sysmon settle */
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    double t0 = bench_now_ns();
    goro_sleep(IDLE_SECONDS * GORO_SEC);
    getrusage(RUSAGE_SELF, &b);
    double wall = bench_now_ns() - t0;
    double cpu = (double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec) * 1e9 +
                 (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec) * 1e3 +
                 (double)(b.ru_stime.tv_sec - a.ru_stime.tv_sec) * 1e9 +
                 (double)(b.ru_stime.tv_usec - a.ru_stime.tv_usec) * 1e3;
    /* four decimals: the target is below 0.1 % */
    printf("name=timers_idle_cpu impl=goro value=%.4f unit=%%\n", 100.0 * cpu / wall);
    fflush(stdout);
    for (long i = 0; i < IDLE_N; i++)
        BENCH_CHECK(goro_cancel(h[i]));
    for (long i = 0; i < IDLE_N; i++)
        BENCH_CHECK(goro_join(h[i], NULL));
    free(h);
}

static void driver(const char *what)
{
    if (what[0] == 'i') {
        idle_run();
    } else if (what[0] == 'h') {
        for (long n = 100; n <= 100000; n *= 10)
            heap_size_run(n);
    } else if (what[0] == 't') {
        ticker_run();
    } else {
        reset_run();
    }
}

/* argv[1]: "heap", "ticker", "reset" or "idle" (run.sh runs each with its
 * worker count); none: all four. */
int main(int argc, char **argv)
{
    const char *parts[] = { "heap", "ticker", "reset", "idle" };
    for (int i = 0; i < 4; i++) {
        if (argc > 1 && strcmp(argv[1], parts[i]) != 0)
            continue;
        goro_t *d;
        BENCH_CHECK(goro_go(&d, NULL, driver, parts[i]));
        BENCH_CHECK(goro_join(d, NULL));
    }
    BENCH_CHECK(goro_shutdown());
    return 0;
}
