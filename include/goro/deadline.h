/*
 * goro/deadline.h: the deadline class - reservations of CPU time,
 * earliest deadline first, with budgets and admission control
 * (docs/deadline.md). goro.h includes it; it may be included alone.
 */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_DEADLINE_H
#define GORO_DEADLINE_H

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------
 * Deadlines (docs/deadline.md)
 *
 * A reservation (runtime, deadline, period), in nanoseconds, with
 * runtime <= deadline <= period, says: this coroutine needs `runtime` of
 * CPU in every `period`, done within `deadline` of the period's start (as
 * sched_setattr(2) says it of a SCHED_DEADLINE thread). While it has
 * budget it runs before every priority class, the earliest absolute
 * deadline first, on every worker. Its budget is charged for the time it
 * runs; once spent, it is throttled until its next period, and what it
 * overran is taken from its next budget. Waking after its deadline passed
 * (or with more budget than it could use before it at its rate, runtime /
 * deadline) starts a new period: deadline now + deadline, budget refilled
 * (the constant bandwidth server rule; with a deadline shorter than the
 * period and still ahead, the budget is cut to that rate instead). A
 * reserved coroutine waiting for a goro mutex or a rwlock's write side
 * lends its deadline to the holder.
 *
 * Admission: the bandwidths (runtime / period) of all reservations add up
 * to at most the bound - by default 95% of the workers (GORO_DL_BOUND, in
 * percent, or goro_dl_bound_set) - or the new one is refused (-EBUSY) and
 * nothing changes. A release, or the coroutine's end, gives its share back.
 * ------------------------------------------------------------------------ */

/* A reservation, in ns: 0 < runtime <= deadline <= period <= GORO_DL_MAX,
 * runtime >= GORO_DL_MIN. */
typedef struct goro_dl {
    int64_t runtime;
    int64_t deadline;     /* relative to each period's start */
    int64_t period;
} goro_dl_t;

#define GORO_DL_MIN ((int64_t)1000)                    /* 1 us */
#define GORO_DL_MAX ((int64_t)3600 * 1000000000)       /* one hour */

/* What a reservation went through; all 0 without one. */
typedef struct goro_dl_stats {
    goro_dl_t dl;             /* the reservation (zeros: none) */
    uint64_t periods;         /* periods started (the first one included) */
    uint64_t misses;          /* jobs ended (goro_dl_next) after their deadline */
    uint64_t throttles;       /* times its budget ran out and it waited */
    int64_t worst_lateness;   /* ns: the latest a job ended past its deadline */
    int64_t worst_overrun;    /* ns: the most it ran past a spent budget before
                                 it was stopped (the enforcement's lateness) */
    int64_t budget;           /* ns left in this period (may be < 0: overrun) */
    int64_t abs_deadline;     /* goro_now() time of the current deadline */
    int64_t lent_deadline;    /* the earliest deadline lent by lock waiters, 0: none */
} goro_dl_stats_t;

/* Gives the calling coroutine the reservation *dl (replacing its own, if
 * any, whose share is given back; refused, the old one stays).
 * Its first period starts now. 0; -EINVAL: dl NULL or out of range;
 * -EBUSY: admission refused (nothing changed); -EPERM: not a coroutine;
 * -ENOMEM. Does not switch. A spawn takes one with goro_attr_t.deadline
 * (the spawn fails with the same errors). */
int goro_dl_set(const goro_dl_t *dl);

/* Ends the caller's reservation and gives its bandwidth back: it is an
 * ordinary coroutine of its priority class again. 0, -ENOENT: it has
 * none, -EPERM: not a coroutine. */
int goro_dl_release(void);

/* The caller's job of this period is done: counts a miss if it is past
 * its deadline, then sleeps until its next period starts, with a full
 * budget and a new deadline. 0; -ENOENT: no reservation; -ECANCELED:
 * cancelled (the period is still the next one). A job that ends after its
 * period is over starts the next one at once. */
int goro_dl_next(void);

/* h's counters (the caller's for NULL): 0, -EINVAL (out NULL or a freed
 * handle). */
int goro_dl_stats(const goro_t *h, goro_dl_stats_t *out);

/* The admission bound in percent of the workers' time (1..100): 0,
 * -EINVAL out of range, -EBUSY below what is admitted now. get: the bound. */
int goro_dl_bound_set(int percent);
int goro_dl_bound(void);

/* The bandwidth admitted now, in millionths of one worker. */
int64_t goro_dl_admitted(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
