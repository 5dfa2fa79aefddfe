/* switch_ucontext.c - glibc ucontext (swapcontext) context-switch cost.
 *
 * Measures: ns per single context switch between two ucontext_t contexts
 * ping-ponging with swapcontext(). One swapcontext() = one switch; a
 * main->coroutine->main round trip counts as two. Same shape as
 * switch_boost.cc and goro's raw switch benchmark, but glibc's swapcontext
 * also saves/restores the signal mask (an rt_sigprocmask syscall per switch),
 * which is why it is ~100x slower. Best (minimum) of 5 repetitions.
 *
 * Output: name=switch impl=glibc_ucontext value=<ns> unit=ns
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#define ROUND_TRIPS 300000L /* 6e5 switches per repetition */
#define REPS 5
#define STACK_SIZE (64 * 1024)

static ucontext_t main_ctx, co_ctx;
static volatile int stop;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void co_fn(void)
{
    while (!stop)
        swapcontext(&co_ctx, &main_ctx);
    /* returning switches to uc_link (main_ctx) */
}

int main(void)
{
    void *stack = malloc(STACK_SIZE);
    if (!stack || getcontext(&co_ctx) != 0)
        return 1;
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = STACK_SIZE;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, co_fn, 0);

    for (long i = 0; i < 10000; i++) /* warm-up */
        swapcontext(&main_ctx, &co_ctx);

    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < ROUND_TRIPS; i++)
            swapcontext(&main_ctx, &co_ctx);
        double t = (now_ns() - t0) / (2.0 * ROUND_TRIPS);
        if (t < best)
            best = t;
    }

    stop = 1;
    swapcontext(&main_ctx, &co_ctx); /* coroutine returns via uc_link */
    free(stack);
    printf("name=switch impl=glibc_ucontext value=%.2f unit=ns\n", best);
    return 0;
}
