/*
 * Leaving and resuming a coroutine: the switch (switch_to, on a coroutine's
 * way out; goro__execute, from g0), what the resumed side finishes for the
 * leaver (post_switch), yield, preemption's park and a coroutine's end.
 *
 * Keeps invariants 2 (a context is published only by the context switched
 * to, once it is saved) and 3 (after a switch the M is read again, errno
 * restored); the slice's count that 4 and 9 rest on (tick); and 8's "only
 * in yield and exit" (goro__migrate). See the prose at the top of sched.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"
#include "base/sanitizer.h"
#include "debug/debug.h"                /* goro__stall_leaving */
#include "coro/cxx_eh.h"                 /* C++: exception state per coroutine */
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"
#include "sched/deadline.h"

/* Run by the context that was switched to: finishes what the leaver asked
 * for, now that the leaver's registers are saved (invariant 2). */
static void post_switch(struct goro_m *m)
{
    struct goro *prev = m->post_g;
    enum goro_post what = m->post;
    m->post = GORO_POST_NONE;
    m->post_g = NULL;
#ifdef GORO_DEBUG
    /* prev's registers are on its stack now: whatever comes next may
     * resume it. */
    if (prev)
        atomic_store_explicit(&prev->saved, 1, memory_order_release);
#endif
    switch (what) {
    case GORO_POST_NONE:
        break;
    case GORO_POST_YIELD:
        atomic_store_explicit(&prev->state, GORO_S_RUNNABLE, memory_order_relaxed);
        goro__queue_ready(m->p, prev, false, NULL);
        break;
    case GORO_POST_PARK:
        /* invariant 2: its waiter record is let go (goro__park_commit) only now */
        GORO_ASSERT(atomic_load_explicit(&prev->state, memory_order_relaxed) == GORO_S_PARKED);
        goro__park_commit(m, prev);
        break;
    case GORO_POST_EXIT:
        goro__release(prev);
        break;
    case GORO_POST_EXIT_JOINED:
        goro__coroutine_ended();    /* the joiner frees the slab */
        break;
    case GORO_POST_MIGRATE:
        atomic_store_explicit(&prev->state, GORO_S_RUNNABLE, memory_order_relaxed);
        if (goro__classes_in_use())
            goro__queue_ready(NULL, prev, false, NULL);
        else
            goro__globrunq_put_batch(&prev, 1);
        goro__spinner_start_if_idle(NULL);         /* m gave its P up (goro__migrate) */
        break;
    case GORO_POST_PREEMPT:
        atomic_store_explicit(&prev->state, GORO_S_RUNNABLE, memory_order_relaxed);
        /* A reserved coroutine waits on m's own EDF list instead (or is
         * throttled there): pinned all the same (preempt.c says why). */
        if (unlikely(goro__classes_in_use() && m->p &&
                     atomic_load_explicit(&prev->dl, memory_order_relaxed)))
            goro__dl_pin(m, prev);
        else
            goro__pinned_push(m, prev);
        break;
    }
    /* Invariant (base/lock.h): no runtime lock is held across a switch
     * but those a park hands to its commit, released just above - so
     * what runs next starts holding none, and a coroutine never resumes
     * on a thread that holds a lock taken on its behalf elsewhere. Debug
     * builds check it, and name the lock held and where it was taken. */
#ifdef GORO_DEBUG
    if (unlikely(goro__locks_count() != 0))
        goro__locks_none_held();
#endif
}


/* A new time slice on p. Only p's owner writes schedtick (others, later
 * sysmon, only read it), so no atomic read-modify-write is needed. */
static void tick(struct goro_p *p)
{
    uint32_t t = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    atomic_store_explicit(&p->schedtick, t + 1, memory_order_relaxed);
}

/* The class of the slice p starts, for sysmon's preemption of lower
 * classes, and a reserved coroutine's charging begins: out of line, so
 * that start_slice stays small enough to inline where no class is used. */
static GORO_NOINLINE void note_running_class(struct goro_p *p, struct goro *g)
{
    atomic_store_explicit(&p->running_prio, (int8_t)goro__queue_class(g), memory_order_relaxed);
    if (unlikely(goro__dl_in_use())) {
        if (atomic_load_explicit(&g->dl, memory_order_relaxed)) {
            goro__dl_begin(p, g);
        } else {
            if (atomic_load_explicit(&p->dl_until, memory_order_relaxed))
                atomic_store_explicit(&p->dl_until, 0, memory_order_relaxed);
            /* no budget timer under an unreserved slice (dl_timer.c) */
            goro__dl_backstop_disarm(goro__m());
        }
    }
}

static inline __attribute__((always_inline)) void start_slice(struct goro_m *m, struct goro *g,
                                                              bool inherit)
{
    /* Only a coroutine made runnable - or a parked joiner whose wait the
     * exiting coroutine claimed, and hands its slice to - and whose
     * leaving switch has saved its registers is resumed (ARMED and the
     * queues come after the save: post_switch). */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_RUNNABLE ||
                (atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_PARKED &&
                 atomic_load_explicit(&g->wake, memory_order_relaxed) == GORO_WAKE_DONE));
#ifdef GORO_DEBUG
    /* invariant 2: never resumed before its leaving switch saved it */
    GORO_ASSERT(atomic_exchange_explicit(&g->saved, 0, memory_order_acq_rel) == 1);
#endif
    /* invariant 8: m runs on its P only while it owns it (sysmon may be
     * trying a retake, which it abandons: m is inside) */
    GORO_ASSERT(goro__p_owner_settled(m->p) == m);
    m->curg = g;
    g->m = m;
    atomic_store_explicit(&g->state, GORO_S_RUNNING, memory_order_relaxed);
    if (goro__classes_in_use())
        note_running_class(m->p, g);
    if (!inherit)
        tick(m->p);
}

/* The trace's events for a switch from self (leaving with what) to next
 * (NULL: to g0). */
static GORO_NOINLINE __attribute__((cold)) void trace_switch(struct goro *self,
                                                             enum goro_post what,
                                                             struct goro *next)
{
    goro__trace_emit(GORO_TEV_STOP, self->id,
                     what == GORO_POST_PARK ? goro__trace_addr(self->wait_obj) : 0, 0, what,
                     self->wait);
    if (next)
        goro__trace_emit(GORO_TEV_RUN, next->id, 0, 0, 0, 0);
}

/* Leaves the running coroutine `self` (on m) with action `what`, switching
 * to next (already taken from a queue, inherit as goro__pick_local set it) or,
 * when NULL, to g0. Returns when self is resumed - possibly on another M. */
static void switch_to(struct goro_m *m, struct goro *self, enum goro_post what,
                      struct goro *next, bool inherit)
{
    struct goro *to = next ? next : &m->g0;
    uintptr_t sp_now = (uintptr_t)__builtin_frame_address(0);
    if (sp_now < self->min_sp)
        self->min_sp = sp_now;
    m->post = what;
    m->post_g = self;
    /* A reserved coroutine pays for its slice (before the next begins). */
    if (goro__classes_in_use() && atomic_load_explicit(&self->dl, memory_order_relaxed))
        goro__dl_charge(m->p, self, what);
    goro__stall_leaving(m);         /* before start_slice moves schedtick */
    if (goro__trace_on())           /* one look for both events */
        trace_switch(self, what, next);
    if (next)
        start_slice(m, next, inherit);
    else
        m->curg = NULL;
    self->m = NULL;
    /* errno is per thread and the coroutine may come back on another one:
     * save it here, restore it into the thread it resumes on. Each M keeps
     * its thread's errno address (fixed for the thread's life), and the M
     * is looked up again after the switch. */
    self->saved_errno = *m->errno_ptr;
    goro__cxx_eh_save(self);        /* C++: and the exceptions it handles */
    goro__san_leave(self, to, what >= GORO_POST_EXIT);
    /* Resumed: everything about "here" is new - the M we now run on is the
     * one the resumer passed (it knows which M it runs on). */
    struct goro_m *now = goro__ctx_switch(&self->sp, to->sp, m);
    goro__san_arrive(self);
    /* invariant 3: the M the resumer passed is the thread we run on now,
     * and it runs us */
    GORO_ASSERT(now == goro__m() && now->curg == self);
    post_switch(now);
    *now->errno_ptr = self->saved_errno;
    goro__cxx_eh_restore(self);     /* C++: into the thread it resumes on */
}

/* Whether p's next switch goes through g0: a poll or a timer is due
 * (libevent's loop and timer callbacks do not belong on a coroutine's
 * stack), the slice was cut short, or sysmon asked p to be given to an M
 * that waits for one. */
static bool g0_due(struct goro_p *p)
{
    return goro__poll_due(p) || goro__preempt_requested(p) || goro__timers_due(p) ||
           goro__give_wanted(p);
}

/* As switch_to, with the next local coroutine if there is one. */
void goro__switch_out(struct goro_m *m, struct goro *self, enum goro_post what)
{
    bool inherit = false;
    bool via_g0 = g0_due(m->p);
    struct goro *next = via_g0 ? NULL : goro__pick_local(m, &inherit);
    switch_to(m, self, what, next, inherit);
}

/* As switch_to, for g0: m has no P to pick from. */
void goro__switch_to_g0(struct goro_m *m, struct goro *self, enum goro_post what)
{
    switch_to(m, self, what, NULL, false);
}

/* Entry of every new coroutine context, reached from goro__ctx_entry. */
GORO_HIDDEN void goro__coro_start(struct goro *g)
{
    goro__san_arrive(g);
    goro__cxx_eh_restore(g);        /* C++: a new coroutine handles no exception */
    struct goro_m *m = goro__m();
    post_switch(m);
    goro__rt_leave(m);                    /* to the coroutine's own code */
}

/* g0 side: run g until it switches back here. */
void goro__execute(struct goro_m *m, struct goro *g, bool inherit)
{
    GORO_TRACE(GORO_TEV_RUN, g->id, 0, 0, 0, 0);
    start_slice(m, g, inherit);
    goro__san_leave(&m->g0, g, 0);
    goro__ctx_switch(&m->g0.sp, g->sp, m);
    goro__san_arrive(&m->g0);
    goro__cxx_eh_restore(&m->g0);   /* C++: no stale copy of g's exceptions */
    post_switch(m);                 /* g0 never migrates */
}

/* m lost its P: self goes to the global queue by way of m's g0, which
 * then finds itself without a P (find_runnable) and becomes a spare. */
void goro__migrate(struct goro_m *m, struct goro *self)
{
    m->p = NULL;
    switch_to(m, self, GORO_POST_MIGRATE, NULL, false);
}

void goro_yield(void)
{
    if (goro__forked())
        return;                     /* the run queues are the parent's (fork.c) */
    struct goro_m *m = goro__m();
    struct goro *self = m ? m->curg : NULL;
    if (!self)
        return;
    goro__rt_enter(m, true);
    m = goro__m();
    bool inherit = false;
    bool poll = g0_due(m->p);
    /* A reserved coroutine yields only to earlier deadlines, and may be
     * throttled: queued first (post_switch), then g0 picks. */
    bool dl = goro__classes_in_use() && goro__queue_class(self) == GORO_PRIO_DL;
    struct goro *next = poll || dl ? NULL : goro__pick_local(m, &inherit);
    if (!next && !poll && !dl) {
        goro__stall_leaving(m);     /* its slice ends all the same */
        tick(m->p);                 /* nobody to yield to */
    }
    else
        switch_to(m, self, GORO_POST_YIELD, next, false);
    goro__rt_leave(goro__m());
}

/* ---- preemption (see runtime/sched/preempt.c and runtime/sched/sysmon.c) ---- */

bool goro__give_wanted(struct goro_p *p)
{
    return unlikely(atomic_load_explicit(&p->want_give, memory_order_relaxed) != 0);
}

bool goro__preempt_requested(struct goro_p *p)
{
    return atomic_load_explicit(&p->preempt_req, memory_order_relaxed) ==
           atomic_load_explicit(&p->schedtick, memory_order_relaxed) + 1;
}

/* The cooperative half: goro calls that do not switch anyway look here,
 * on their way out. A coroutine whose thread lost its P meanwhile (handed
 * off while it blocked, or refused preemption) moves on here too:
 * goro_yield takes it to a thread with a P, so a thread that was replaced
 * never goes on running coroutines beside its replacement.
 *
 * Not while the thread holds a runtime lock: such a call can be made from
 * inside the runtime (a cancel tells a member's after-functions through
 * goro_chan_try_send under its group's lock), and a yield there would
 * carry the lock across a switch (post_switch asserts it never does) - on
 * one worker, the next coroutine to want it would wait for ever. The next
 * check, after the unlock, does it instead. */
void goro__preempt_check_on(struct goro_m *m)
{
    struct goro *self = m ? m->curg : NULL;
    if (!self || atomic_load_explicit(&self->nopreempt, memory_order_relaxed) != 0 ||
        goro__locks_count() != 0)
        return;
    struct goro_p *p = m->p;
    if (!p || atomic_load_explicit(&p->owner, memory_order_relaxed) != m ||
        goro__preempt_requested(p))
        goro_yield();
}

GORO_NOINLINE void goro__preempt_check(void)
{
    goro__preempt_check_on(goro__m());
}

/* Called by goro__preempt_resume on the interrupted coroutine's stack:
 * yield, to come back on this M (post_switch: PREEMPT) - or, if this M
 * loses its P and stays away, on another (goro__unpin_stuck). */
void goro__preempt_park(void *uc)
{
    struct goro_m *m = goro__m();
    struct goro *self = m->curg;
    /* Through g0, which looks at timers, I/O and the global queue first
     * (find_runnable): the slice was cut short. Its P handed off (rt_enter
     * finds it gone and forgets it), self is pinned to m all the same, and
     * g0, without a P, waits for one first in line (goro__m_wait_for_p):
     * a thread running on without a P would take a CPU from the workers. */
    goro__rt_enter(m, false);
    switch_to(m, self, GORO_POST_PREEMPT, NULL, false);
    struct goro_m *now = goro__m();  /* usually m; another M once unpinned */
    if (now != m) {
        /* rt_sigreturn also restores the signal stack the frame names:
         * that of m's thread, which must not become this thread's too. */
        stack_t *ss = &((ucontext_t *)uc)->uc_stack;
        ss->ss_sp = now->altstack;
        ss->ss_size = now->altstack_size;
        if (!now->altstack)
            ss->ss_flags = SS_DISABLE;
    }
    goro__rt_leave(now);
}

/* ---- a coroutine's end ---- */

void goro__exit_current(long result)
{
    struct goro_m *m = goro__m();
    goro__rt_enter(m, true);              /* never left: this context ends */
    m = goro__m();
    struct goro *self = m->curg;
    self->result = result;
    /* A joiner already parked on us can be woken by nothing but this exit.
     * When nothing else is queued here (else it would just go to g0), claim
     * that wake-up and switch straight to the joiner, which continues our
     * slice. It frees our slab once it runs, after this stack is left. With
     * work queued the joiner waits its turn in runnext, as any woken one.
     * WAKING keeps a joiner whose deadline fired from leaving meanwhile. */
    uintptr_t w = atomic_load_explicit(&self->exit_word, memory_order_acquire);
    struct goro *joiner = (struct goro *)w;
    if (w > GORO_EXIT_WAKING && !(joiner->flags & GORO_F_EXTERNAL) && goro__runq_empty(m->p) &&
        !goro__global_work() &&
        atomic_compare_exchange_strong_explicit(&self->exit_word, &w, GORO_EXIT_WAKING,
            memory_order_acq_rel, memory_order_relaxed)) {
        if (goro__claim(joiner, GORO_WAKE_DONE)) {
            GORO_TRACE(GORO_TEV_READY, joiner->id, self->id, 0, 0, 0);
            atomic_store_explicit(&self->state, GORO_S_DEAD, memory_order_relaxed);
            atomic_store_explicit(&self->exit_word, GORO_EXIT_DEAD, memory_order_release);
            switch_to(m, self, GORO_POST_EXIT_JOINED, joiner, true);
        }
        /* The joiner gave up (deadline, cancel): let it withdraw. */
        atomic_store_explicit(&self->exit_word, w, memory_order_release);
    }
    goro__switch_out(m, self, GORO_POST_EXIT);
    __builtin_unreachable();
}

void goro__coroutine_ended(void)
{
    goro__bump(&goro__m()->p->exited);
    if (atomic_load_explicit(&goro__sched.draining, memory_order_relaxed)) {
        atomic_fetch_add(&goro__sched.live_futex, 1);
        goro__futex_wake(&goro__sched.live_futex, 1);
    }
}

