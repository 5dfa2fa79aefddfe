/* The runtime's clock, the time base of every deadline (goro_now):
 * CLOCK_MONOTONIC in nanoseconds - or, in the deterministic testing mode
 * (goro_config_t.clock, GORO_TEST_CLOCK=virtual), a virtual clock that
 * stands still while coroutines run and jumps to the next deadline when
 * none can run (sched.c says when). It starts at GORO_VIRTUAL_EPOCH, so
 * that a run's times are the same every time. */
#include <time.h>

#include "internal.h"

static _Atomic int64_t virtual_now;    /* 0: the real clock */

int64_t goro__real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GORO_SEC + ts.tv_nsec;
}

int64_t goro__now(void)
{
    int64_t v = atomic_load_explicit(&virtual_now, memory_order_relaxed);
    return unlikely(v) ? v : goro__real_now();
}

bool goro__clock_virtual(void)
{
    return atomic_load_explicit(&virtual_now, memory_order_relaxed) != 0;
}

void goro__clock_set_virtual(bool on)
{
    atomic_store(&virtual_now, on ? GORO_VIRTUAL_EPOCH : 0);
}

void goro__clock_advance(int64_t to)
{
    int64_t v = atomic_load(&virtual_now);
    while (v && v < to && !atomic_compare_exchange_weak(&virtual_now, &v, to))
        ;
}

int64_t goro__clock_real_of(int64_t t)
{
    int64_t v = atomic_load_explicit(&virtual_now, memory_order_relaxed);
    return v ? goro__real_now() + (t - v) : t;
}
