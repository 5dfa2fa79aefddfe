/* What the files of sched/ offer one another, by the file that defines
 * it: nothing outside sched/ calls these (the layer's face is sched.h).
 * The run queues and the idle Ms have their own headers, runq.h and
 * idle.h. Inline: the few that every switch or wake-up runs. */
#ifndef GORO_SCHED_INNER_H
#define GORO_SCHED_INNER_H

#include "internal.h"
#include "sched/sched.h"
#include "io/poller.h"                   /* the poller contract */
#include "coro/coro.h"                   /* a coroutine's life, stacks */
#include "debug/debug.h"                 /* reports, the trace */
#include "base/sanitizer.h"

/* ---- handoff.c: a P's owner (invariant 8) ---- */

/* p's owner once a retake under way is decided: sysmon, seeing the asker
 * inside the runtime, gives the P back, or hands it to another M. */
static inline struct goro_m *goro__p_owner_settled(struct goro_p *p)
{
    struct goro_m *owner;
    while ((owner = atomic_load_explicit(&p->owner, memory_order_acquire)) == GORO_P_RETAKING)
        cpu_relax();
    return owner;
}

/* Enters the runtime on m (m->in_rt counts the entries): returns m's P
 * if it is still m's, else NULL - and with may_move, a coroutine whose M
 * lost its P moves to one with a P first (goro__migrate) and gets that. */
GORO_HIDDEN struct goro_p *goro__rt_enter(struct goro_m *m, bool may_move);

static inline void goro__rt_leave(struct goro_m *m)
{
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(&m->in_rt, atomic_load_explicit(&m->in_rt, memory_order_relaxed) - 1,
                          memory_order_release);
}

/* m has no P: sleep as a spare until one is handed over. True with a P
 * in m->p, false when the runtime stops. */
GORO_HIDDEN bool goro__m_wait_for_p(struct goro_m *m);
/* Under goro__sched.lock: p goes to M `to`, which then wakes
 * (goro__m_notify_handed, after the unlock). */
GORO_HIDDEN void goro__give_p_locked(struct goro_p *p, struct goro_m *to);
GORO_HIDDEN void goro__m_notify_handed(struct goro_m *to);

/* ---- sched.c: the loop ---- */

/* The next coroutine from local work and the global queue, as a coroutine
 * leaving and g0 both take it first (stealing is g0's job); *inherit: it
 * came from runnext and inherits the slice. */
GORO_HIDDEN struct goro *goro__pick_local(struct goro_m *m, bool *inherit);
/* A worker thread's body: find work, run it, until the runtime stops. */
GORO_HIDDEN void *goro__m_main(void *arg);

/* How many slices a busy P runs between looks at its event base. */
#define POLL_INTERVAL 61

static inline bool goro__io_in_use(void)
{
    return atomic_load_explicit(&goro__io_used, memory_order_relaxed) != 0;
}

static inline bool goro__poll_due(struct goro_p *p)
{
    return goro__io_in_use() &&
           atomic_load_explicit(&p->schedtick, memory_order_relaxed) - p->poll_tick >=
               POLL_INTERVAL;
}

/* One of p's timers is due at *now. Reads the clock only when p has
 * timers. The owner asking notes when it looked: sysmon runs the timers
 * of an owner that has not looked for a while (it is in a long slice). */
static inline bool goro__timers_due_at(struct goro_p *p, bool owner, int64_t *now)
{
    int64_t first = goro__timers_first(p);
    if (first == INT64_MAX)
        return false;
    *now = goro__now();
    if (owner)
        atomic_store_explicit(&p->timers_seen, *now, memory_order_relaxed);
    return *now >= first;
}

/* Asked by p's owner. */
static inline bool goro__timers_due(struct goro_p *p)
{
    int64_t now;
    return goro__timers_due_at(p, true, &now);
}

/* ---- switch.c: leaving and resuming ---- */

/* Leaves the running coroutine self (on m) with action what, for the next
 * local coroutine if there is one, else for g0. Returns when self is
 * resumed - possibly on another M. */
GORO_HIDDEN void goro__switch_out(struct goro_m *m, struct goro *self, enum goro_post what);
/* The same, always by way of g0 (m has no P to pick from). */
GORO_HIDDEN void goro__switch_to_g0(struct goro_m *m, struct goro *self, enum goro_post what);
/* g0 side: run g until it switches back. */
GORO_HIDDEN void goro__execute(struct goro_m *m, struct goro *g, bool inherit);
/* m lost its P: self goes to the global queue by way of m's g0. */
GORO_HIDDEN void goro__migrate(struct goro_m *m, struct goro *self);
/* goro__preempt_check for m, the caller's goro__m(). */
GORO_HIDDEN void goro__preempt_check_on(struct goro_m *m);

/* Owner-only counter: a plain load and store, no read-modify-write. */
static inline void goro__bump(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_release);
}

/* ---- park.c: waiting ---- */

/* post_switch's half of goro__park, once the parked coroutine g is saved:
 * arm its wait, then let wakers in (invariant 2). */
GORO_HIDDEN void goro__park_commit(struct goro_m *m, struct goro *g);

/* ---- outside.c: threads the runtime does not own ---- */

/* Such a thread (g: its stand-in record; NULL for goro_shutdown) begins
 * or ends a wait in a goro call, until deadline (negative: none). */
GORO_HIDDEN void goro__outside_begin(struct goro *g, int64_t deadline);
GORO_HIDDEN void goro__outside_end(void);
/* The earliest deadline of a thread outside waiting, INT64_MAX if none. */
GORO_HIDDEN int64_t goro__outside_first_deadline(void);
/* Ends the waits of threads outside whose deadline is at or before now. */
GORO_HIDDEN void goro__outside_time_out(int64_t now);
/* goro__park for a thread the runtime does not own. */
GORO_HIDDEN int goro__park_external(const struct goro_park *how);
/* goro_shutdown: spawns from such threads are refused from now on, and
 * those under way have ended. */
GORO_HIDDEN void goro__spawn_gate_close(void);

/* ---- vclock.c: the virtual clock (invariant 10) ---- */

/* p's owner has nothing to run: the clock jumps to the next deadline.
 * True if a timer of p is due now. */
GORO_HIDDEN bool goro__clock_jump(struct goro_p *p);
/* After a real sleep from real_from: the clock follows the real one while
 * a wait on the world is under way, else it may jump. True if a timer of
 * p is due now. */
GORO_HIDDEN bool goro__clock_slept(struct goro_p *p, int64_t real_from);
/* At a pick: the seed chooses which runnable coroutine goes next. */
GORO_HIDDEN GORO_NOINLINE void goro__seeded_turn(struct goro_p *p);

#endif
