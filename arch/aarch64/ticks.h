/* The execution trace's clock (runtime/debug/trace.c): the generic timer's
 * virtual count, readable from user space on Linux, at a constant rate
 * across CPUs; the trace converts it to nanoseconds by two readings of
 * CLOCK_MONOTONIC, at its start and its end. */
#ifndef GORO_TICKS_H
#define GORO_TICKS_H

#include <stdint.h>

static inline uint64_t goro__ticks(void)
{
    uint64_t t;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(t));
    return t;
}

#endif
