/* parked.c - memory per parked coroutine.
 *
 * Measures: bytes of resident memory per blocked coroutine. A driver
 * coroutine spawns 10^6 detached coroutines that each block receiving on
 * one shared unbuffered channel, waits (goro_waitgroup_t) until all have
 * started, yields once, then reports (VmRSS after - VmRSS before) / 10^6
 * from /proc/self/status, as bench/peers/go/parked.go does. Then it closes
 * the channel and waits for all of them to exit. Single measurement (memory
 * is not timing noise). Workers: GORO_WORKERS from the env, default the
 * number of online CPUs.
 *
 * Each parked coroutine holds its own stack mapping (two kernel mappings
 * with the guard), so vm.max_map_count must be above ~2.1 million
 * (bench/run.sh raises it to 4194304 when it can).
 *
 * Output:
 *   name=parked_mem impl=goro value=<B per coroutine> unit=B
 *   name=parked_spawn impl=goro value=<ns per coroutine> unit=ns
 */
#include "bench.h"

#include <goro.h>

#define N 1000000L

static goro_chan_t *ch;
static goro_waitgroup_t started = GORO_WAITGROUP_INIT;
static goro_waitgroup_t exited = GORO_WAITGROUP_INIT;

static long vm_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        bench_die("parked: cannot open /proc/self/status");
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    if (kb < 0)
        bench_die("parked: VmRSS not found");
    return kb * 1024;
}

static void parked(void)
{
    BENCH_CHECK(goro_waitgroup_done(&started));
    if (goro_chan_recv(ch, NULL) != 0)
        bench_die("parked: received a value from a channel nobody sends on");
    BENCH_CHECK(goro_waitgroup_done(&exited));
}

struct result { double bytes, spawn_ns; };

static void driver(struct result *res)
{
    long rss0 = vm_rss();
    BENCH_CHECK(goro_waitgroup_add(&started, N));
    BENCH_CHECK(goro_waitgroup_add(&exited, N));
    double t0 = bench_now_ns();
    for (long i = 0; i < N; i++)
        BENCH_CHECK(goro_go(NULL, NULL, parked));
    BENCH_CHECK(goro_waitgroup_wait(&started));
    res->spawn_ns = (bench_now_ns() - t0) / N;
    goro_yield();
    long rss1 = vm_rss();
    BENCH_CHECK(goro_chan_close(ch));
    BENCH_CHECK(goro_waitgroup_wait(&exited));
    res->bytes = (double)(rss1 - rss0) / N;
}

int main(void)
{
    struct result res;
    goro_t *d;
    BENCH_CHECK(goro_start(NULL)); /* workers: GORO_WORKERS or online CPUs */
    BENCH_CHECK(goro_chan_new(&ch, 0, 0));
    BENCH_CHECK(goro_waitgroup_init(&started));
    BENCH_CHECK(goro_waitgroup_init(&exited));
    BENCH_CHECK(goro_go(&d, NULL, driver, &res));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_chan_free(ch));
    BENCH_CHECK(goro_waitgroup_destroy(&started));
    BENCH_CHECK(goro_waitgroup_destroy(&exited));
    BENCH_CHECK(goro_shutdown());
    bench_report("parked_mem", res.bytes, "B");
    bench_report("parked_spawn", res.spawn_ns, "ns");
    return 0;
}
