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
 * Where the kernel has MADV_GUARD_INSTALL the stacks are slots of shared
 * arenas and this runs with the default vm.max_map_count (65530); with
 * GORO_STACK_GUARD=mprotect, or on older kernels, each stack is two
 * mappings and vm.max_map_count must be above ~2.1 million (bench/run.sh
 * raises it to 4194304 when it can). `parked --guard-mode` prints which
 * ("arenas" or "mprotect") and exits.
 *
 * Output:
 *   name=parked_mem impl=goro value=<B per coroutine> unit=B
 *   name=parked_spawn impl=goro value=<ns per coroutine> unit=ns
 *   name=parked_maps impl=goro value=<mappings added for the 10^6> unit=maps
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

static long maps_count(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    if (!f)
        bench_die("parked: cannot open /proc/self/maps");
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

struct result { double bytes, spawn_ns, maps; };

static void driver(struct result *res)
{
    long rss0 = vm_rss(), maps0 = maps_count();
    BENCH_CHECK(goro_waitgroup_add(&started, N));
    BENCH_CHECK(goro_waitgroup_add(&exited, N));
    double t0 = bench_now_ns();
    for (long i = 0; i < N; i++)
        BENCH_CHECK(goro_go(NULL, NULL, parked));
    BENCH_CHECK(goro_waitgroup_wait(&started));
    res->spawn_ns = (bench_now_ns() - t0) / N;
    goro_yield();
    long rss1 = vm_rss();
    res->maps = (double)(maps_count() - maps0);
    BENCH_CHECK(goro_chan_close(ch));
    BENCH_CHECK(goro_waitgroup_wait(&exited));
    res->bytes = (double)(rss1 - rss0) / N;
}

int main(int argc, char **argv)
{
    struct result res;
    goro_t *d;
    BENCH_CHECK(goro_start(NULL)); /* workers: GORO_WORKERS or online CPUs */
    if (argc > 1 && strcmp(argv[1], "--guard-mode") == 0) {
        puts(bench_stacks_in_arenas() ? "arenas" : "mprotect");
        return goro_shutdown() != 0;
    }
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
    bench_report("parked_maps", res.maps, "maps");
    return 0;
}
