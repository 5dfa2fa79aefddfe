/* The deadline class (deadline.c) as the rest of sched/ sees it: where a
 * coroutine is queued, the EDF lists, charging a slice, the monitor's
 * enforcement. What other layers call is in sched.h. */
#ifndef GORO_SCHED_DEADLINE_H
#define GORO_SCHED_DEADLINE_H

#include "internal.h"
#include "sched/sched.h"

/* A reservation has been made (set for good; classes_in_use is too). */
static inline bool goro__dl_in_use(void)
{
    return GORO_CLASSES && atomic_load_explicit(&goro__sched.dl_used, memory_order_relaxed);
}

/* Where g goes when it becomes runnable: the EDF list if it has a
 * reservation or a deadline lent (GORO_PRIO_DL), else its class. Callers
 * read it only once goro__classes_in_use(). */
static inline int goro__queue_class(const struct goro *g)
{
    if (unlikely(goro__dl_in_use()) &&
        (atomic_load_explicit(&((struct goro *)g)->dl, memory_order_relaxed) ||
         atomic_load_explicit(&((struct goro *)g)->dl_lent, memory_order_relaxed)))
        return GORO_PRIO_DL;
    return goro__prio_of(g);
}

/* g (RUNNABLE, of the DL class) onto p's EDF list (the global one for p
 * NULL) by its deadline - after the wake-up rule if it parked, and unless
 * its budget is spent: then it is throttled (held by its replenishment
 * timer, in no queue, until its next period). From goro__pq_put. */
GORO_HIDDEN void goro__dl_put(struct goro_p *p, struct goro *g);
/* The earliest of p's EDF list, the global one, the other Ps' lists and
 * m's pinned reserved coroutines that may run; NULL: none. m owns p. */
GORO_HIDDEN struct goro *goro__dl_get(struct goro_m *m, struct goro_p *p);
/* g, reserved, was preempted on m (post-switch): onto m's own list, held
 * there until its next period if its budget is spent. */
GORO_HIDDEN void goro__dl_pin(struct goro_m *m, struct goro *g);
/* m lost its P: its reserved coroutines pinned to it go to its plain
 * pinned list, which goro__m_wait_for_p and sysmon's unpinning see (one
 * left on m's own list waited for ever on a spare thread). A throttled
 * one runs once more and is stopped again. */
GORO_HIDDEN void goro__dl_unpin_all(struct goro_m *m);
/* An idle M's theft: the earliest head of another P's EDF list. */
GORO_HIDDEN struct goro *goro__dl_steal(struct goro_p *p);
/* p starts a slice of g, which has a reservation: the clock is read, and
 * the monitor told when its budget runs out. */
GORO_HIDDEN void goro__dl_begin(struct goro_p *p, struct goro *g);
/* g (reserved) leaves p's CPU with post action what: charged for the
 * slice; parked: the wake-up rule applies when it is queued again. */
GORO_HIDDEN void goro__dl_charge(struct goro_p *p, struct goro *g, int what);
/* Moves the DL coroutines of a list p's own timers woke to the EDF lists
 * (the timed queue runs after them). */
GORO_HIDDEN void goro__dl_timed(struct goro_p *p, struct goro_polled *list);
/* dl_timer.c, the backstop (its rules are at the top there). m arms its
 * timer for a slice whose budget runs out at until, and disarms it when
 * the slice ends; sysmon turns it off (m blocked, or without its P); m
 * deletes it on its way out. */
GORO_HIDDEN void goro__dl_backstop_arm(struct goro_m *m, int64_t until);
GORO_HIDDEN void goro__dl_backstop_disarm(struct goro_m *m);
GORO_HIDDEN void goro__dl_backstop_off(struct goro_m *m);
GORO_HIDDEN void goro__dl_backstop_fini(struct goro_m *m);
/* The SIGURG handler, on m's thread: the budget's signal was declined
 * (the coroutine was where it cannot be preempted); the timer fires
 * again BACKSTOP_RETRY from now, if the slice still has it armed. */
GORO_HIDDEN void goro__dl_backstop_retry(struct goro_m *m);
/* The SIGURG handler, on p's owner: the reserved slice p runs is past its
 * budget's end. */
GORO_HIDDEN bool goro__dl_budget_spent(struct goro_p *p, int64_t now);
/* si_value of the backstop's SIGURG (si_code SI_TIMER) */
#define GORO_URG_BUDGET_TAG 0x676f7262
/* sysmon: preempts p's reserved coroutine once its budget is spent, and
 * DL coroutines queued while Ps run lower classes; *wake: lowered to when
 * to look again. */
GORO_HIDDEN void goro__dl_watch(int64_t now, int64_t *wake);

#endif
