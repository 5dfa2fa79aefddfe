/* sched/: the scheduler. Owns the Ps and Ms (struct goro_p, goro_m,
 * goro__sched in internal.h), their run queues, idle lists and hand-off,
 * the runtime's threads (thread.c), parking and readying coroutines (the
 * one way every wait in wait/, io/ and coro/ sleeps and wakes), the
 * switch, preemption (preempt.c) and the monitor thread (sysmon.c), and
 * the refusal of a forked child (fork.c).
 *
 * Calls base/ and, upward, only named contracts: the poller (io/poller.h:
 * goro__netpoll), the coroutine's life (coro/coro.h: goro__release at its
 * end, the stack cache; coro/cxx_eh.h: the C++ switch hooks) and the
 * reports (debug/debug.h). debug/ reads it through "inspect" (read only)
 * and may ask a worker for a stall sample ("sample"), nothing more.
 *
 * layer: sched - the scheduler: Ps and Ms, run queues, idle lists and
 *     hand-off, the runtime's threads, park and ready, the switch,
 *     preemption, the monitor thread, timers
 * may call: base
 * uses: poller, life, cxx, reports, monitor, fatal
 * contract inspect for debug: goro__m goro__current goro__forked
 *     goro__forked_error goro__task_file goro__m_task_file
 *     goro__m_thread_state goro__outside_waits goro__sched_activity
 *     goro__timers_first goro__dl_describe goro__preempt_unsafe_exec
 * contract sample for debug: goro__m_ask_sample
 */
#ifndef GORO_SCHED_SCHED_H
#define GORO_SCHED_SCHED_H

#include "internal.h"

/* active.c: how many Ps may be busy at once (invariant 11). start: the
 * count is nprocs, and GORO_ADAPT is read; tick: sysmon's look, every
 * 10 ms while a P is busy; next: the rule alone - the count after a look
 * that found the workers crowded or not, *probe set while one more P is
 * let run for a look, *next_probe when the next such look may be. */
GORO_HIDDEN int goro__active_start(int nprocs);
GORO_HIDDEN void goro__active_stop(void);
GORO_HIDDEN void goro__active_tick(int64_t now);
GORO_HIDDEN int goro__active_next(int active, int nprocs, bool crowded, bool *probe,
                                  int64_t now, int64_t *next_probe);

/* prio.c: classes lent along wait edges (prio is an enum goro__prio). */
/* Before a coroutine of a class other than NORMAL or a loan exists. */
GORO_HIDDEN void goro__prio_classes_used(void);
/* Lends prio to g: true if a loan was made (prio above g's own class). */
GORO_HIDDEN bool goro__prio_lend(struct goro *g, int prio);
GORO_HIDDEN void goro__prio_unlend(struct goro *g, int prio);
/* goro_attr_t.priority: -EINVAL, or 0 with *prio set (left alone for
 * GORO_PRIORITY_INHERIT). */
GORO_HIDDEN int goro__prio_check(int priority, int *prio);
/* The holder of a lock, lent the highest class of its waiters; every call
 * under the lock's own lock, lk (the record lies in the same object, at
 * most 255 bytes above it). set: g took it (goro__waiter_self()); clear:
 * released; waiter: one of class prio starts (+1) or stops (-1) waiting.
 * The record names a coroutine only while it lives: the coroutine's end
 * takes it off every record it holds (goro__holds_end; the lock stays
 * held, as in Go, until somebody unlocks it). */
enum { GORO_HELD_BY_NONE, GORO_HELD_BY_CORO, GORO_HELD_BY_THREAD, GORO_HELD_BY_ENDED };
struct goro_holder {
    struct goro *g;                /* the coroutine holding it, while it lives */
    union {
        struct goro_holder *next;  /* with g: the next lock g holds (g->holds) */
        uintptr_t thread;          /* a thread's: its stand-in (compared, never read) */
        uint64_t ended_id;         /* an ended coroutine's: its id (reports) */
    };
    uint16_t waiting[2];           /* waiters lending: [0] NORMAL, [1] HIGH */
    int8_t lent;                   /* the class g is lent now, plus one (0: none) */
    bool held;
    uint8_t by;                    /* GORO_HELD_BY_*: who holds it */
    uint8_t lk_off;                /* the lock's own lock lies this far below */
};
GORO_HIDDEN void goro__holder_set(struct goro_holder *h, goro_lock_t *lk, struct goro *g);
GORO_HIDDEN void goro__holder_clear(struct goro_holder *h);
/* Whether g (goro__waiter_self()) holds it. */
GORO_HIDDEN bool goro__holder_is(const struct goro_holder *h, const struct goro *g);
/* For coro/, at g's end, on its own stack: off every lock it holds. */
GORO_HIDDEN void goro__holds_end(struct goro *g);
GORO_HIDDEN void goro__holder_waiter(struct goro_holder *h, int prio, int delta);

/* deadline.c: the deadline class (goro/deadline.h). spawn: g, not yet
 * running, takes the reservation dl (admission: -EINVAL, -EBUSY,
 * -ENOMEM); end: g, ending, gives its reservation back. lend: the
 * running coroutine self starts waiting for the lock whose holder record
 * is h (held by holder, NULL for none), under the lock's own lock: a
 * reserved self lends it its deadline; unlend: self's wait is over
 * (called by self, with no lock held). moved: h now names `to` (NULL: a
 * thread, an ended coroutine or nobody), under the lock's own lock: the
 * loans made through h go to `to`. */
GORO_HIDDEN int goro__dl_spawn(struct goro *g, const struct goro_dl *dl);
GORO_HIDDEN void goro__dl_end(struct goro *g);
GORO_HIDDEN void goro__dl_lend(const void *h, struct goro *holder, struct goro *self);
GORO_HIDDEN void goro__dl_unlend(struct goro *self);
GORO_HIDDEN void goro__dl_holder_moved(const void *h, struct goro *to);
/* For goro_dump: g's reservation and counters, or its lent deadline, as
 * one line into buf; false if it has neither (or they could not be read
 * without waiting: a dump may run in a signal handler). */
GORO_HIDDEN bool goro__dl_describe(const struct goro *g, char *buf, size_t len);

/* sched.c (the M, the loop), switch.c (a coroutine's start and end),
 * park.c (waiting and waking), handoff.c (entering on a P), outside.c
 * (threads the runtime does not own, the spawn gate), worker.c (start,
 * drain, stop) */
GORO_HIDDEN struct goro_m *goro__m(void);
/* The variable goro__m() reads. Only for a read that no switch can
 * separate from its use (coro/local.c's get: a few loads, in goro's own
 * code, which is never preempted asynchronously): a value read before a
 * switch is stale after it, which goro__m() guards against. */
extern GORO_HIDDEN __thread struct goro_m *goro__tls_m
    __attribute__((tls_model("initial-exec")));
GORO_HIDDEN struct goro *goro__current(void);
/* The record a thread the runtime does not own waits with. */
GORO_HIDDEN struct goro *goro__external_self(void);
/* The waiting party: the running coroutine, or this thread's stand-in. */
static inline struct goro *goro__waiter_self(void)
{
    struct goro *g = goro__current();
    return g ? g : goro__external_self();
}
GORO_HIDDEN void goro__ready(struct goro *g);
GORO_HIDDEN void goro__ready_list(struct goro *list);
/* How a wait is set up: why (for debuggers), the object, the lock to drop
 * once parked (unlock) or the publishing step (commit: parks unless it
 * returns false, for waits published by one atomic step), a deadline
 * (GORO_FOREVER for none) and whether it is firm (not cancellable). */
struct goro_park {
    enum goro_wait why;
    const void *obj;
    void (*unlock)(void *);
    bool (*commit)(void *, struct goro *);
    void *arg;
    int64_t deadline;
    bool firm;
    bool lends;                    /* it lends its class to the one it waits for:
                                      a change of class may end it (RECLASS) */
    int8_t lent;                   /* with lends: the class it lends */
    bool real;                     /* it waits on the world (a descriptor, a
                                      thread): the virtual clock follows the
                                      real one meanwhile (invariant 10) */
};
/* Parks the running coroutine (or blocks this thread if it is not one)
 * until a claim ends the wait; returns the winning enum goro_wake. */
GORO_HIDDEN int goro__park(const struct goro_park *how);
/* Claims g's wait with outcome; true if it won (the caller then wakes g). */
GORO_HIDDEN bool goro__claim(struct goro *g, uint32_t outcome);
/* Claims with GORO_WAKE_DONE and makes g runnable; false if it lost. */
GORO_HIDDEN bool goro__claim_ready(struct goro *g);
/* Before waiting: -ECANCELED, -ETIMEDOUT (deadline, or the caller's
 * deadline in force, passed) or 0. */
GORO_HIDDEN int goro__wait_check(int64_t deadline);
/* The nearer of deadline (GORO_FOREVER: none) and dl (a g->in_force:
 * 0 none). */
GORO_HIDDEN int64_t goro__deadline_nearer(int64_t deadline, int64_t dl);
/* Returns err from a call that ended without parking (wait_check said no),
 * after the preemption check such a return owes (call it with no lock
 * held): a loop on an expired or cancelled wait must still give way. */
GORO_HIDDEN int goro__wait_refused(int err);
/* The error for a park result other than GORO_WAKE_DONE. */
GORO_HIDDEN int goro__wake_error(int outcome);
GORO_HIDDEN struct goro_p *goro__current_p(void);
/* Around code that uses the calling M's P from a coroutine: enter returns
 * the P (NULL on a thread without one), which is the M's until leave.
 * A coroutine whose M lost its P (handed off while it blocked) moves to
 * another worker in enter. */
GORO_HIDDEN struct goro_p *goro__p_enter(void);
GORO_HIDDEN void goro__p_leave(void);
/* The same for m, the caller's goro__m() (NULL: a thread outside). */
GORO_HIDDEN struct goro_p *goro__p_enter_on(struct goro_m *m);
GORO_HIDDEN __attribute__((noreturn)) void goro__exit_current(long result);
/* A new coroutine g, made on m (NULL: a thread outside), is runnable. p is
 * the spawn's own entry (goro__p_enter_on(m)), which this ends; NULL:
 * none (no P), and g goes to the global queue. */
GORO_HIDDEN void goro__schedule_new(struct goro *g, struct goro_m *m, struct goro_p *p);
GORO_HIDDEN int goro__sched_start(int nprocs);
/* goro_shutdown: waits for every coroutine to end (0, or -ETIMEDOUT at
 * deadline: then nothing is stopped), then stops. */
GORO_HIDDEN int goro__sched_drain(int64_t deadline);
GORO_HIDDEN void goro__sched_stop(void);
/* Around a spawn from a thread without a P: -ESHUTDOWN while shutting down. */
GORO_HIDDEN int goro__spawn_gate_enter(void);
GORO_HIDDEN void goro__spawn_gate_leave(void);
GORO_HIDDEN void goro__spawn_gate_open(void);
/* A new coroutine's id: from p's block of ids (the caller is inside, on
 * p), or the global counter with p NULL. */
GORO_HIDDEN uint64_t goro__next_id(struct goro_p *p);
/* A new coroutine's first steps on its own stack, and its last. */
GORO_HIDDEN void goro__coro_start(struct goro *g);
GORO_HIDDEN void goro__coroutine_ended(void);

/* timer.c: the P timer heaps (struct goro_timers). start: t's kind and g
 * or fire are set; it fires at `when` on p's heap (p NULL: any P's). stop:
 * once it returns, t fires no more and may be freed (a fire under way has
 * ended). */
GORO_HIDDEN void goro__timers_init(struct goro_timers *ts);
GORO_HIDDEN void goro__timers_fini(struct goro_timers *ts);
GORO_HIDDEN void goro__timer_start(struct goro_timer *t, struct goro_p *p, int64_t when);
GORO_HIDDEN void goro__timer_stop(struct goro_timer *t);
/* p's earliest deadline, INT64_MAX if none. */
GORO_HIDDEN int64_t goro__timers_first(struct goro_p *p);
/* Runs p's timers due at now: FUNC timers fire, WAKE timers claim their
 * coroutines, which join *out (RUNNABLE, in deadline order); returns how
 * many joined. */
GORO_HIDDEN int goro__timers_run(struct goro_p *p, int64_t now, struct goro_polled *out);

/* fork.c: in a child forked while the runtime ran, goro is refused. */
extern GORO_HIDDEN _Atomic int goro__fork_child;
static inline bool goro__forked(void)
{
    return unlikely(atomic_load_explicit(&goro__fork_child, memory_order_relaxed));
}
GORO_HIDDEN int goro__fork_install(void);      /* at start, under its lock */
GORO_HIDDEN int goro__forked_error(void);      /* -ENOTRECOVERABLE; says why once */
/* goro__park in such a child: releases how's lock, returns
 * GORO_WAKE_CANCELED without parking. */
GORO_HIDDEN int goro__forked_park(const struct goro_park *how);

/* preempt.c */
GORO_HIDDEN int goro__preempt_install(void);
GORO_HIDDEN void goro__preempt_signal(struct goro_m *m);
/* For debug/stall.c, which has asked m for a stall sample (m->stall.req):
 * m's thread is interrupted so that its handler answers. The one thing
 * debug/ may make a worker do; it preempts nothing by itself. */
GORO_HIDDEN void goro__m_ask_sample(struct goro_m *m);
GORO_HIDDEN bool goro__preempt_async(void);
/* Why code at pc, in the executable, is no safe point although the
 * program is dynamically linked (its allocator or C++ runtime is in it),
 * or NULL. For the stall report's words. */
GORO_HIDDEN const char *goro__preempt_unsafe_exec(uintptr_t pc);
/* switch.c: is a preemption asked for p's current slice? Yield if so. */
GORO_HIDDEN bool goro__preempt_requested(struct goro_p *p);
/* sysmon asked p's owner to give it to an M waiting with pinned
 * coroutines (sysmon.c, check_waitp): its next switch goes through g0. */
GORO_HIDDEN bool goro__give_wanted(struct goro_p *p);
GORO_HIDDEN void goro__preempt_check(void);
/* uc: the copied signal frame's ucontext, which rt_sigreturn restores. */
GORO_HIDDEN void goro__preempt_park(void *uc);

/* outside.c: threads the runtime does not own that wait in a goro call now (g:
 * the stand-in record with the wait; NULL for goro_shutdown), under a
 * lock: fn must not wait. For the deadlock check and its report. */
GORO_HIDDEN void goro__outside_waits(void (*fn)(struct goro *g, pid_t tid, bool timed,
                                                void *arg), void *arg);
/* A number that changes whenever a coroutine runs, is spawned from a
 * thread, or a thread outside begins or ends a wait: equal readings
 * apart in time mean nothing moved in between. */
GORO_HIDDEN uint64_t goro__sched_activity(void);

/* sysmon.c */
GORO_HIDDEN bool goro__preempt_for_class(struct goro_p *p, int64_t now, int64_t retry,
                                         int cls, struct goro_m **blocked);
GORO_HIDDEN int goro__sysmon_start(int64_t slice_ns);
GORO_HIDDEN void goro__sysmon_stop(void);
GORO_HIDDEN void goro__sysmon_kick(void);
/* Wakes sysmon now if it would sleep past `when` (goro__now() time). */
GORO_HIDDEN void goro__sysmon_poke_by(int64_t when);
/* handoff.c (sched.c: attach, inject_global), for sysmon */
#define GORO_P_RETAKING ((struct goro_m *)1)
GORO_HIDDEN bool goro__handoff(struct goro_p *p, struct goro_m *m);
GORO_HIDDEN bool goro__handoff_wanted(struct goro_p *p, bool long_run, bool *blocked,
                                      struct goro_m **m);
GORO_HIDDEN void goro__sysmon_attach(struct goro_m *m);
/* A thread's file name in /proc/self/task/<tid>/ into buf (a string);
 * its length or -1. The same for m's thread; its scheduling state from
 * there: R, S, D ... ('?' if unknown). File reads: for what looks stuck
 * only. */
GORO_HIDDEN ssize_t goro__task_file(pid_t tid, const char *name, char *buf, size_t len);
GORO_HIDDEN ssize_t goro__m_task_file(struct goro_m *m, const char *name, char *buf,
                                      size_t len);
GORO_HIDDEN char goro__m_thread_state(struct goro_m *m);
GORO_HIDDEN void goro__inject_global(struct goro_polled *list);
/* Moves the coroutines pinned to Ms that lost their P at least `after` ns
 * ago and are still outside the runtime to the global queue; true if it
 * moved any. *pending: some are pinned to an M without a P (watch them). */
GORO_HIDDEN bool goro__unpin_stuck(int64_t now, int64_t after, bool *pending);
/* sysmon: threads that lost their P and run a coroutine outside the
 * runtime are signalled (every retry) to stop it and wait for a P; true
 * while there is one. */
GORO_HIDDEN bool goro__stop_lost(int64_t now, int64_t retry);
/* The stack caches of idle Ps into the global pool (sysmon, now and then). */
GORO_HIDDEN void goro__spill_idle_caches(void);

/* thread.c: every thread of the runtime is made here (stack_size 0: the
 * default; returns pthread_create's result, a positive errno), with the
 * signal mask the program started the runtime with - nothing more blocked,
 * so that children started from them get the program's mask - less the
 * runtime's own signals (SIGURG, the faults). */
GORO_HIDDEN int goro__thread_create(pthread_t *thread, size_t stack_size,
                                    void *(*fn)(void *), void *arg);
/* Takes the calling thread's mask as the program's: at each start, from
 * the starting thread, before any runtime thread is made. */
GORO_HIDDEN void goro__thread_mask_capture(void);
/* The mask runtime threads run with (async-signal-safe). */
GORO_HIDDEN void goro__thread_mask(sigset_t *mask);
/* The stack of the workers, spares and sysmon: they run only the
 * scheduler (coroutines have their own stacks). */
#define GORO_THREAD_STACK (256 * 1024)

#endif
