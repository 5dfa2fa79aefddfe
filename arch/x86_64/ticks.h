/* The execution trace's clock (runtime/debug/trace.c): the time-stamp
 * counter, about 10 ns a read where clock_gettime costs 20-25. Invariant
 * (constant rate, synchronised across CPUs) on every x86-64 Linux runs on
 * today; the trace converts ticks to nanoseconds by two readings of
 * CLOCK_MONOTONIC, at its start and its end. */
#ifndef GORO_TICKS_H
#define GORO_TICKS_H

#include <stdint.h>

static inline uint64_t goro__ticks(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

#endif
