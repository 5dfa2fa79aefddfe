/* switch.c - goro's raw context switch, without the scheduler.
 *
 * Measures: ns per single context switch between two contexts that resume
 * each other through goro__ctx_switch (the runtime's hidden switch routine
 * in arch/<arch>/switch.S): the main thread's context and one context on a
 * stack mmap'd here, started with goro__ctx_make. One goro__ctx_switch = one
 * switch; a main->coroutine->main round trip counts as two. Measured the
 * same way as bench/peers/switch_boost.cc (one resume() = one switch), 2e7
 * switches per repetition. Best (minimum) of 5 repetitions.
 *
 * switch_same_site: the same, but both contexts switch from one call site,
 * as every coroutine does inside the scheduler; the return predictor then
 * guesses right (see arch/x86_64/switch.S).
 *
 * Output: name=switch impl=goro value=<ns> unit=ns
 *         name=switch_same_site impl=goro value=<ns> unit=ns
 */
#include "bench.h"

#include <stdint.h>
#include <sys/mman.h>

#include "ctx_layout.h"

/* Hidden in libgoro.a, linkable from a static executable. */
void *goro__ctx_switch(void **save_sp, void *load_sp, void *value);

#define ROUND_TRIPS 10000000L /* 2e7 switches per repetition */
#define REPS 5
#define STACK_SIZE (64 * 1024)

static void *main_sp, *co_sp;
static volatile int stop;

/* Same-call-site variant: both contexts run this loop, so each resumes
 * exactly where the other was suspended - as coroutines do inside the
 * scheduler, where all switches happen at one call site. */
static void *a_sp, *b_sp;
static volatile long hops;

__attribute__((noinline)) static void hop_loop(void **self, void **other)
{
    while (hops-- > 0)
        goro__ctx_switch(self, *other, NULL);
}

__attribute__((noreturn)) static void b_entry(void *arg)
{
    (void)arg;
    for (;;) {
        hop_loop(&b_sp, &a_sp);
        goro__ctx_switch(&b_sp, a_sp, NULL);   /* out of hops: hand back to A */
    }
}

/* ns per switch when both sides switch from the same call site. */
static double same_site(void *top)
{
    b_sp = goro__ctx_make(top, b_entry, NULL);
    double best = 1e300;
    for (int r = 0; r <= REPS; r++) {       /* round 0 warms up */
        hops = 2 * ROUND_TRIPS;
        double t0 = bench_now_ns();
        hop_loop(&a_sp, &b_sp);
        double t = (bench_now_ns() - t0) / (2.0 * ROUND_TRIPS);
        if (r && t < best)
            best = t;
    }
    return best;
}

/* The second context: switches straight back, until told to stop. */
__attribute__((noreturn)) static void co_entry(void *arg)
{
    (void)arg;
    while (!stop)
        goro__ctx_switch(&co_sp, main_sp, NULL);
    goro__ctx_switch(&co_sp, main_sp, NULL); /* final hand-back; never resumed */
    abort();
}

int main(void)
{
    char *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        bench_die("switch: mmap failed");
    void *top = (void *)((uintptr_t)(stack + STACK_SIZE) & ~(uintptr_t)15);
    co_sp = goro__ctx_make(top, co_entry, NULL);

    for (long i = 0; i < 100000; i++) /* warm-up */
        goro__ctx_switch(&main_sp, co_sp, NULL);

    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now_ns();
        for (long i = 0; i < ROUND_TRIPS; i++)
            goro__ctx_switch(&main_sp, co_sp, NULL);
        double t = (bench_now_ns() - t0) / (2.0 * ROUND_TRIPS);
        if (t < best)
            best = t;
    }

    stop = 1;
    goro__ctx_switch(&main_sp, co_sp, NULL);   /* co_entry sees stop and hands back */
    bench_report("switch", best, "ns");
    bench_report("switch_same_site", same_site(top), "ns");
    munmap(stack, STACK_SIZE);
    return 0;
}
