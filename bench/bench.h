/* bench.h - small helpers shared by goro's benchmark programs.
 *
 * Every program prints one line per figure:
 *   name=<what> impl=goro value=<number> unit=<unit>
 * Errors go to stderr and end the program with status 1. */
#ifndef GORO_BENCH_H
#define GORO_BENCH_H

#define _GNU_SOURCE
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <goro.h>

static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

__attribute__((noreturn, format(printf, 1, 2), unused))
static void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* Checks a goro call that returns 0 or -errno. */
#define BENCH_CHECK(call) do {                                              \
        int bench_err_ = (call);                                            \
        if (bench_err_ < 0)                                                 \
            bench_die("%s:%d: %s failed: %s", __FILE__, __LINE__, #call,    \
                      strerror(-bench_err_));                               \
    } while (0)

__attribute__((unused))
static void bench_report(const char *name, double value, const char *unit)
{
    printf("name=%s impl=goro value=%.2f unit=%s\n", name, value, unit);
    fflush(stdout);
}

__attribute__((unused))
static int bench_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

__attribute__((unused))
static void bench_sort_i64(int64_t *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_i64);
}

/* The q-quantile (0 <= q <= 1) of sorted nanoseconds v[n], in microseconds. */
__attribute__((unused))
static double bench_quantile_us(const int64_t *v, long n, double q)
{
    long k = (long)(q * (double)(n - 1) + 0.5);
    return (double)v[k] / 1e3;
}

/* Whether the runtime (started) keeps stacks in shared arenas with guard
 * regions (MADV_GUARD_INSTALL) rather than a mapping per stack: goro_dump
 * says which. Then 10^6 stacks need no raised vm.max_map_count. */
__attribute__((unused))
static bool bench_stacks_in_arenas(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        bench_die("open_memstream failed");
    BENCH_CHECK(goro_dump(f));
    fclose(f);
    bool yes = strstr(text, "MADV_GUARD_INSTALL") != NULL;
    free(text);
    return yes;
}

#endif
