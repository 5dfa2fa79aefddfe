/* The preempt suite's shared part: test_preempt.c makes the suite and
 * holds what every test shares (the round's state, spinners, the
 * ticker, the lateness checks); the tests sit by concern in
 * test_preempt_<concern>.c, each adding its own through
 * preempt_<concern>_tests(). */
#ifndef GORO_TEST_PREEMPT_H
#define GORO_TEST_PREEMPT_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

#define SLICE (10 * GORO_MSEC)

struct preempt_round {
    atomic_int stop;            /* every coroutine of the test ends */
    atomic_int last_ran;        /* id of the coroutine that made progress last */
    double hard_end;            /* spinners end by then, whatever happens */
};
extern struct preempt_round pt;

enum { TICKER_ID = -1, NOBODY = -2 };

struct spinner {
    int id;                     /* >= 1 */
    bool check_tid;             /* compare the thread after every chunk */
    double end;                 /* if set: stop then (t_now) */
    atomic_long chunks;         /* progress */
    long switches;              /* chunks after which another coroutine had run */
    uintptr_t tid;              /* where it started (t_thread) */
    long moved;                 /* chunks that found it on another thread */
    uint64_t x;                 /* keeps the work alive */
};

struct ticker {
    int64_t period;
    bool record_tid;            /* keep sleep_tid */
    atomic_long ticks;
    atomic_long sleep_tid;      /* while asleep: the thread it slept on */
    atomic_long watch_tid;      /* when set: count ticks on that thread */
    atomic_long ticks_on_watch;
    int64_t max_late;           /* ns; read after the join */
    double late_sum;
};

/* About 0.1 ms of dependent multiply-adds (a few ms under qemu). */
static inline __attribute__((always_inline)) uint64_t churn(uint64_t x)
{
    for (int i = 0; i < (1 << 16); i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* Progress of coroutine `id` on a one-worker runtime: if someone else made
 * progress since its last note, it was switched out in between - and since
 * a spinner never yields, that was a preemption. */
static inline __attribute__((always_inline)) bool note_progress(int id)
{
    if (atomic_load_explicit(&pt.last_ran, memory_order_relaxed) == id)
        return false;
    atomic_store_explicit(&pt.last_ran, id, memory_order_relaxed);
    return true;
}

/* test_preempt.c (see there for each one's comment) */
void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool needs_async(const char *test);
void restart(int workers, int64_t slice_ns);
void reset_round(double limit);
void begin(double limit);
void restart_for(int workers, int64_t slice_ns, double limit);
void join_all(goro_t **h, int n);
void run_for(double seconds, goro_t **h, int n);
void spinner(struct spinner *s);
uint64_t spin_for(double until);
long total_switches(const struct spinner *s, int n);
void check_taking_turns_mostly_in_place(const struct spinner *s, int n, const char *what);
void ticker(struct ticker *t);
int64_t slow_factor(void);
int64_t late_limit(int64_t slice);
int64_t mean_late_limit(int64_t slice);
double mean_late(const struct ticker *t);
void check_lateness(const struct ticker *t, int64_t slice, const char *what);
void go_ticker_and_spinners(struct ticker *tk, struct spinner *sp, int ns, goro_t **h);

void preempt_regs_tests(TCase *tc);      /* test_preempt_regs.c */
void preempt_libc_tests(TCase *tc);      /* test_preempt_libc.c */
void preempt_signals_tests(TCase *tc);   /* test_preempt_signals.c */
void preempt_blocking_tests(TCase *tc);  /* test_preempt_blocking.c */

#endif
