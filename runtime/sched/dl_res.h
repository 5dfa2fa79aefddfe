/* A reservation's record, as the deadline class's own files share it
 * (deadline.c: reservations, budgets, charging, loans; dl_watch.c: what
 * sysmon does for the class). Nothing outside the class includes this. */
#ifndef GORO_SCHED_DL_RES_H
#define GORO_SCHED_DL_RES_H

#include "internal.h"
#include "goro/deadline.h"

#define ENFORCE_RETRY (100 * GORO_USEC)  /* a spent budget's preemption, asked again */

/* The fields up to worst_over are read by gdb/goro_gdb.py (through
 * goro_debug.off_dl) at these offsets: keep them (asserted below). */
struct goro_dlres {
    goro_dl_t dl;
    uint64_t bw;                    /* runtime / period << BW_SHIFT, rounded down */
    struct goro *g;
    _Atomic int64_t abs;            /* the current absolute deadline */
    _Atomic int64_t budget;         /* ns left in this period (< 0: overrun) */
    _Atomic uint64_t periods, misses, throttles;
    _Atomic int64_t worst_late, worst_over;
    int64_t from;                   /* its running slice's start, by charge_clock (its M) */
    bool parked;                    /* it left its CPU to wait: the wake-up rule is due */
    int64_t held_until;             /* pinned and throttled: its next period (0: not) */
    struct goro_timer timer;        /* replenishment, while throttled */
    /* Under releases.lock: when its coroutine is due back (its next
     * period from goro_dl_next, or its replenishment; 0: not, or sysmon
     * has seen to it), linked while it waits for that. */
    int64_t release_at;
    struct goro_dlres *release_next;
    bool releasing;
    /* Its loan, under loans.lock: the holder record of the lock it waits
     * for (NULL: none) and that lock's holder (NULL: a thread, nobody). */
    const void *loan_h;
    struct goro *loan_to;
    struct goro_dlres *loan_next;
};

_Static_assert(offsetof(struct goro_dlres, abs) == 40 && offsetof(struct goro_dlres, budget) == 48 &&
               offsetof(struct goro_dlres, periods) == 56 &&
               offsetof(struct goro_dlres, worst_over) == 88, "gdb/goro_gdb.py reads these");

static inline int64_t ld(_Atomic int64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static inline void st(_Atomic int64_t *v, int64_t x)
{
    atomic_store_explicit(v, x, memory_order_relaxed);
}

static inline void bump(_Atomic uint64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static inline void raise_to(_Atomic int64_t *v, int64_t x)
{
    int64_t old = ld(v);
    while (x > old && !atomic_compare_exchange_weak(v, &old, x))
        ;
}

static inline struct goro_dlres *res_of(const struct goro *g)
{
    return atomic_load_explicit(&((struct goro *)g)->dl, memory_order_relaxed);
}

/* dl_watch.c: r's coroutine waits on a P's timer heap until at (its next
 * period, or its replenishment), and sysmon sees that the timer fires on
 * time; _drop: it is back, or its reservation goes. */
GORO_HIDDEN void goro__dl_release_add(struct goro_dlres *r, int64_t at);
GORO_HIDDEN void goro__dl_release_drop(struct goro_dlres *r);
/* dl_watch.c: a reserved coroutine queued with deadline key while no P
 * idles needs a P cut for it: sysmon should look now. */
GORO_HIDDEN bool goro__dl_must_cut(int64_t key);

#endif
