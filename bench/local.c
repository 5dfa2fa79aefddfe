/* local.c - goro_local_get, the coroutine-local read.
 *
 * Measures: ns per goro_local_get in a loop of gets of one of the inline
 * keys and one of the overflow keys (past the first 8), in a coroutine,
 * best (minimum) of 5; pthread_getspecific beside it for scale.
 *
 * Output: name=local_get, local_get_overflow, pthread_getspecific (ns);
 * bench/run.sh holds local_get to its target (<= 2 ns).
 */
#include "bench.h"

#include <goro.h>
#include <pthread.h>

#define GETS 20000000L
#define REPS 5

static goro_key_t inl, over;
static pthread_key_t pkey;

/* The sum keeps the loads; noinline keeps the loop from being folded. */
static __attribute__((noinline)) double time_gets(goro_key_t k)
{
    uintptr_t sum = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < GETS; i++)
        sum += (uintptr_t)goro_local_get(k);
    double t = (bench_now_ns() - t0) / GETS;
    if (sum != (uintptr_t)GETS * (uintptr_t)goro_local_get(k))
        bench_die("local: lost values");
    return t;
}

static __attribute__((noinline)) double time_pthread(void)
{
    uintptr_t sum = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < GETS; i++)
        sum += (uintptr_t)pthread_getspecific(pkey);
    double t = (bench_now_ns() - t0) / GETS;
    if (sum != (uintptr_t)GETS * 3)
        bench_die("pthread: lost values");
    return t;
}

static void driver(double *best)
{
    goro_key_t fill[8];
    BENCH_CHECK(goro_key_create(&inl, NULL));
    for (int i = 0; i < 8; i++)
        BENCH_CHECK(goro_key_create(&fill[i], NULL));
    BENCH_CHECK(goro_key_create(&over, NULL));   /* index 9: the overflow array */
    BENCH_CHECK(goro_local_set(inl, (void *)1));
    BENCH_CHECK(goro_local_set(over, (void *)2));
    if (pthread_key_create(&pkey, NULL) || pthread_setspecific(pkey, (void *)3))
        bench_die("pthread key");
    best[0] = best[1] = best[2] = 1e300;
    for (int r = 0; r < REPS; r++) {
        double a = time_gets(inl), b = time_gets(over), c = time_pthread();
        best[0] = a < best[0] ? a : best[0];
        best[1] = b < best[1] ? b : best[1];
        best[2] = c < best[2] ? c : best[2];
    }
}

int main(void)
{
    double best[3];
    goro_t *d;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 1 }));
    BENCH_CHECK(goro_go(&d, NULL, driver, best));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_report("local_get", best[0], "ns");
    bench_report("local_get_overflow", best[1], "ns");
    bench_report("pthread_getspecific", best[2], "ns");
    return 0;
}
