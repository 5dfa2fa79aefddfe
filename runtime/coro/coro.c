/* Coroutine lifetime: spawn, run, exit, join, detach. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"
#include "runtime.h"
#include "debug/debug.h"
#include "wait/group.h"
#include "base/sanitizer.h"
#include "coro/token.h"

/* Filled by goro__capture (via goro__capture_store) and consumed by
 * goro__spawn_captured in the same go() expression. Between the two the
 * caller runs its own code, where it may be preempted and another
 * coroutine of the same thread may spawn: so a coroutine keeps its capture
 * in its own record - in `call`, which its entry no longer needs once it
 * runs - and only a thread the runtime does not own uses the thread's. */
static __thread struct goro_callregs captured __attribute__((tls_model("initial-exec")));

static struct goro_callregs *capture_area_of(struct goro *self)
{
    return self ? &self->call : &captured;
}

static struct goro_callregs *capture_area(void)
{
    return capture_area_of(goro__current());
}

/* From call.S: regs holds the registers, and the stack window when
 * with_stack (goro__capture), else not (goro__capture_regs). */
void goro__capture_store(const struct goro_callregs *regs, int with_stack)
{
    struct goro_callregs *to = capture_area();
    if (with_stack)
        *to = *regs;
    else
        memcpy(to, regs, offsetof(struct goro_callregs, stack));
}

/* Widens the raw return register to a long as the function's type says. */
static long widen(long raw, int kind)
{
    switch (kind) {
    case GORO__RET_VOID: return 0;
    case GORO__RET_S8: return (int8_t)raw;
    case GORO__RET_U8: return (uint8_t)raw;
    case GORO__RET_S16: return (int16_t)raw;
    case GORO__RET_U16: return (uint16_t)raw;
    case GORO__RET_S32: return (int32_t)raw;
    case GORO__RET_U32: return (uint32_t)raw;
    default: return raw;
    }
}

/* The last steps of a coroutine, on its own stack: the cleanups of the
 * calls it ended inside run (coro.h), its locals' destructors, the locks it holds stay held
 * without it (sched/prio.c), its groups and its own group are settled,
 * its end hook runs, its token ends. */
static void life_end(struct goro *g, long result)
{
    struct goro_unwind *u;
    while ((u = g->unwind)) {
        g->unwind = u->next;
        u->fn(u);
    }
    goro__locals_end(g);           /* destructors, on its own stack, as itself */
    goro__holds_end(g);
    goro__dl_end(g);               /* its reservation's share given back */
    goro__group_exit(g, result);
    if (g->end_hook)
        g->end_hook(g, result);
    if (g->wg)
        goro_waitgroup_done(g->wg);    /* goro_waitgroup_go: after fn, as Go's wg.Go */
    goro__token_life_end(g);
}

/* Every coroutine starts here (from goro__ctx_entry) and never returns. */
void goro__coro_main(void *arg)
{
    struct goro *g = arg;
    goro__coro_start(g);
    long r;
    if (g->entry_kind == GORO_ENTRY_PLAIN)
        r = ((long (*)(void *))(void (*)(void))g->fn)(g->arg);
    else
        r = widen(goro__invoke(&g->call, g->fn, g->stack_args), g->ret_kind);
    life_end(g, r);
    goro__exit_current(r);
}

/* Where a spawn runs: its M (NULL: a thread outside the runtime, which
 * spawns through the gate) and the P it entered the runtime on, once for
 * the record, its id and its queue (NULL: none; the global pools and
 * queue). */
struct spawn_site {
    struct goro_m *m;
    struct goro_p *p;
};

static int spawn_begin(goro_t **h, const goro_attr_t *attr, void (*fn)(void), struct goro **g,
                       struct spawn_site *at);

/* goro_waitgroup_go: attr.group carries the wait group (tagged
 * GORO__GROUP_WG). It counts the coroutine before it exists (wg.Add(1)),
 * and the coroutine's end counts it done (life_end); a refused spawn gives
 * the count back. */
static int spawn_begin_wg(goro_t **h, const goro_attr_t *attr, void (*fn)(void),
                          struct goro **g, struct spawn_site *at)
{
    goro_waitgroup_t *wg = (goro_waitgroup_t *)((uintptr_t)attr->group & ~(uintptr_t)7);
    if (h)
        *h = NULL;
    if (h || !fn || !wg)
        return -EINVAL;
    int err = goro_waitgroup_add(wg, 1);
    if (err)
        return err;
    goro_attr_t plain = *attr;
    plain.group = NULL;
    err = spawn_begin(NULL, &plain, fn, g, at);
    if (err)
        goro_waitgroup_done(wg);
    else
        (*g)->wg = wg;
    return err;
}

/* Everything both spawn forms share; the caller fills in the entry and
 * schedules the coroutine. */
static int spawn(goro_t **h, const goro_attr_t *attr, void (*fn)(void),
                 const struct spawn_site *at, struct goro **out)
{
    if (goro__forked())
        return goro__forked_error();
    if (!fn)
        return -EINVAL;
    int err = goro__ensure_started();
    if (err)
        return err;
    size_t size = goro__sched.stack_size;
    if (attr && attr->stack_size && (err = goro__stack_size_check(attr->stack_size, &size)))
        return err;
    /* Its class: attr's, or its spawner's own (NORMAL from a thread). */
    struct goro *spawner = at->m ? at->m->curg : NULL;
    int prio = spawner ? spawner->prio : GORO_PRIO_NORMAL;
    if (attr && (err = goro__prio_check(attr->priority, &prio)))
        return err;
    struct goro *g = goro__slab_get(at->p, size, &err);
    if (!g)
        return err;
    /* coro: a spawn takes a free record (FREE -> RUNNABLE) */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_FREE);
    g->id = goro__next_id(at->p);   /* first: the reservation's trace names it */
    /* A reservation (sched/deadline.c): admitted now, or no spawn. */
    if (attr && attr->deadline && (err = goro__dl_spawn(g, attr->deadline)) != 0) {
        goro__slab_put(g);
        return err;
    }
    g->prio = (int8_t)prio;
    if (prio != GORO_PRIO_NORMAL)
        goro__prio_classes_used();
    if (attr && attr->name) {
        strncpy(g->name, attr->name, sizeof g->name - 1);
        g->name[sizeof g->name - 1] = 0;
    }
    if (!h)
        atomic_store_explicit(&g->exit_word, GORO_EXIT_DETACHED, memory_order_relaxed);
    goro__san_stack_reset(g);
    g->fn = fn;
    g->sp = goro__ctx_make(g->hi, goro__coro_main, g);
#ifdef GORO_DEBUG
    atomic_store_explicit(&g->saved, 1, memory_order_relaxed);   /* a fresh context */
#endif
    goro__san_fiber_name(g);
    *out = g;
    if (h)
        *h = g;
    return 0;
}

/* The two ends of every spawn. begin enters the runtime - a thread the
 * runtime does not own through the gate (sched/outside.c), so that goro_shutdown
 * either waits for its coroutine or refuses it; a coroutine on its P -
 * and makes the coroutine (*g); the caller says how it starts; end
 * schedules it and leaves. */
static int spawn_begin(goro_t **h, const goro_attr_t *attr, void (*fn)(void), struct goro **g,
                       struct spawn_site *at)
{
    if (h)
        *h = NULL;
    /* A group member: nobody joins it (the group does). With a limit it
     * takes a slot first, which may wait for one; without, it is admitted
     * once made, in the same pass that links it (wait/group.c). The group
     * of goro_group_go(NULL, ...) is GORO__GROUP_NULL (goro/structured.h). */
    uintptr_t tagged = (uintptr_t)(attr ? attr->group : NULL);
    if (tagged & GORO__GROUP_WG)
        return spawn_begin_wg(h, attr, fn, g, at);
    bool no_wait = tagged & GORO__GROUP_TRY;    /* goro_group_try_go */
    struct goro_group *grp = (struct goro_group *)(tagged & ~(uintptr_t)GORO__GROUP_TRY);
    if (grp && (h || !fn || grp == GORO__GROUP_NULL))
        return -EINVAL;
    bool slot_first = grp && goro__group_limited(grp);
    int err = slot_first ? goro__group_admit(grp, !no_wait) : 0;
    if (err)
        return err;
    /* After the admission, which may have moved us to another M. */
    at->m = goro__m();
    at->p = goro__p_enter_on(at->m);
    err = at->m ? 0 : goro__spawn_gate_enter();
    if (!err) {
        err = spawn(h, attr, fn, at, g);
        if (!err && grp && (err = goro__group_link(grp, *g, slot_first)) != 0) {
            goro__dl_end(*g);       /* its reservation, if any, given back */
            goro__slab_put(*g);     /* refused: it never ran */
        }
        if (err && !at->m)
            goro__spawn_gate_leave();
    }
    if (err && at->p)
        goro__p_leave();
    if (err && slot_first)
        goro__group_admit_undo(grp);
    return err;
}

static int spawn_end(struct goro *g, const struct spawn_site *at)
{
    goro__schedule_new(g, at->m, at->p);
    if (!at->m)
        goro__spawn_gate_leave();
    return 0;
}

int goro__spawn_captured(goro_t **h, const goro_attr_t *attr, void (*fn)(void), int ret)
{
    struct goro *g;
    struct spawn_site at;
    int err = spawn_begin(h, attr, fn, &g, &at);
    if (err)
        return err;
    const struct goro_callregs *captured_here = capture_area_of(at.m ? at.m->curg : NULL);
    g->entry_kind = GORO_ENTRY_CAPTURED;
    g->ret_kind = (uint8_t)(ret & 0xff);
    /* Nothing since the capture ran go(). Only scalars in registers: the
     * stack-argument window is not needed (and not copied, twice). */
    g->stack_args = (ret & GORO__STACK_ARGS) != 0;
    memcpy(&g->call, captured_here, g->stack_args ? sizeof *captured_here
                                                  : offsetof(struct goro_callregs, stack));
    return spawn_end(g, &at);
}

int goro_spawn(goro_t **h, const goro_attr_t *attr, long (*fn)(void *), void *arg)
{
    struct goro *g;
    struct spawn_site at;
    int err = spawn_begin(h, attr, (void (*)(void))fn, &g, &at);
    if (err)
        return err;
    g->entry_kind = GORO_ENTRY_PLAIN;
    g->arg = arg;
    return spawn_end(g, &at);
}

goro_t *goro__handle_or_errno(int err, goro_t *h)
{
    if (err) {
        errno = -err;
        return NULL;
    }
    return h;
}

/* h's slab goes back; an exception the C++ go() kept on it goes to
 * *escaped if the joiner takes it, else is destroyed; so does the error
 * object it ended with, to *err. */
static void handle_free(struct goro *h, struct goro__cxx_escaped **escaped, goro_err_t **err)
{
    struct goro__cxx_escaped *e = h->cxx_escaped;
    if (escaped)
        *escaped = e;
    else if (e)
        e->destroy(e);
    if (err)
        *err = h->err;
    else
        goro_err_free(h->err);
    goro__scope_free(&h->watch);   /* the done channel lives as long as the handle */
    goro__slab_put(h);
}

/* Runs on the context that followed a finished coroutine (its stack is no
 * longer in use): hand it to its joiner, or free it if detached. */
void goro__release(struct goro *g)
{
    /* After DEAD is stored a joiner may free g at any moment: touch g no
     * more. A joiner found here is claimed while the word reads WAKING, so
     * one that gave up meanwhile waits for DEAD before it goes on. */
    /* coro: only a running coroutine ends (RUNNING -> DEAD) */
    GORO_ASSERT(atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_RUNNING);
    atomic_store_explicit(&g->state, GORO_S_DEAD, memory_order_relaxed);
    uintptr_t old = atomic_exchange_explicit(&g->exit_word, GORO_EXIT_WAKING,
                                             memory_order_acq_rel);
    /* coro: its end is decided once (exit_word: never WAKING or DEAD yet) */
    GORO_ASSERT(old != GORO_EXIT_WAKING && old != GORO_EXIT_DEAD);
    if (old == GORO_EXIT_DETACHED) {
        handle_free(g, NULL, NULL);
    } else if (old == GORO_EXIT_RUNNING) {
        atomic_store_explicit(&g->exit_word, GORO_EXIT_DEAD, memory_order_release);
    } else {
        struct goro *joiner = (struct goro *)old;
        bool won = goro__claim(joiner, GORO_WAKE_DONE);
        atomic_store_explicit(&g->exit_word, GORO_EXIT_DEAD, memory_order_release);
        if (won)
            goro__ready(joiner);
    }
    goro__coroutine_ended();
}

/* ---- the handle gate: threads the runtime does not own vs shutdown ----
 * goro_shutdown unmaps every slab, those of handles nobody joined among
 * them; a join or detach from a thread the runtime does not own may be
 * reading such a handle, or putting its slab back into the pool, at that
 * moment. A slab put back after the shutdown had emptied the pool would
 * stay there unmapped, for the next runtime's first spawn to take.
 *
 * Invariant: once handles_close() has returned, no thread the runtime does
 * not own reads or frees a handle of this runtime, until the next start.
 * Such a call counts itself in ext_handling, then reads closed; the
 * shutdown, with every coroutine ended, sets closed, then waits for
 * ext_handling to drain, and only then unmaps (runtime.c). Both sides are
 * seq_cst: either the call sees closed and leaves h alone - the shutdown
 * releases h with the rest - or the shutdown waits until it is done. closed
 * stays set until the next start, so a call racing a shutdown that has
 * already returned never reads an unmapped handle either. Coroutines need
 * no gate: the shutdown waits for them to end. */
static _Atomic int handles_closed;
static _Atomic int ext_handling;

/* 0: the caller may use h until handle_gate_leave; -ESHUTDOWN: h has been
 * released by a shutdown, or is being (do not read it). */
static int handle_gate_enter(bool outside)
{
    if (!outside)
        return 0;
    atomic_fetch_add(&ext_handling, 1);
    if (!atomic_load(&handles_closed))
        return 0;
    atomic_fetch_sub(&ext_handling, 1);
    return -ESHUTDOWN;
}

static void handle_gate_leave(bool outside)
{
    if (outside)
        atomic_fetch_sub(&ext_handling, 1);
}

void goro__handles_close(void)
{
    GORO_ASSERT(!goro__m());
    atomic_store(&handles_closed, 1);
    while (atomic_load(&ext_handling) != 0)
        sched_yield();
}

void goro__handles_open(void)
{
    atomic_store(&handles_closed, 0);
}

/* A handle is gone after join or detach. While its slab sits unused in a
 * pool the mistake of using it again is caught; once the slab is reused it
 * cannot be (as with pthread_join). */
static bool handle_invalid(const struct goro *h)
{
    return !h || atomic_load_explicit(&h->state, memory_order_relaxed) == GORO_S_FREE ||
           atomic_load_explicit(&h->exit_word, memory_order_relaxed) == GORO_EXIT_DETACHED;
}

/* Run once the joiner is saved: publish it, unless h ended meanwhile. */
static bool join_commit(void *arg, struct goro *self)
{
    struct goro *h = arg;
    uintptr_t expect = GORO_EXIT_RUNNING;
    return atomic_compare_exchange_strong_explicit(&h->exit_word, &expect,
        (uintptr_t)self, memory_order_acq_rel, memory_order_acquire);
}

/* The commit of a join's wait parked again after a change of the joiner's
 * class: it is published already, and waits on unless h ended meanwhile
 * (the exit found it awake and could not wake it). WAKING is an exit
 * deciding: one that ends h stores DEAD next; the exit's hand-off, having
 * failed to claim the awake joiner, stores the joiner back - then it waits
 * on, for h's release to wake it. */
static bool join_recommit(void *arg, struct goro *self)
{
    struct goro *h = arg;
    uintptr_t w;
    while ((w = atomic_load_explicit(&h->exit_word, memory_order_acquire)) == GORO_EXIT_WAKING)
        cpu_relax();
    return w == (uintptr_t)self;
}

/* The joiner's wait ended without the exit (deadline, cancel): withdraw
 * from h. Returns true if withdrawn, false if h died meanwhile (then the
 * join has succeeded after all). */
static bool join_withdraw(struct goro *h, struct goro *self)
{
    for (;;) {
        uintptr_t w = (uintptr_t)self;
        if (atomic_compare_exchange_strong_explicit(&h->exit_word, &w, GORO_EXIT_RUNNING,
                memory_order_acq_rel, memory_order_acquire))
            return true;
        if (w == GORO_EXIT_DEAD)
            return false;
        if (w != GORO_EXIT_WAKING)
            return true;            /* never published: the commit lost to the exit? */
        cpu_relax();                /* the exit is deciding: a few instructions */
    }
}

/* Every join: hands over the result, the escaped C++ exception (escaped
 * not NULL) and the error object (err not NULL). */
static int join_gated(goro_t *h, long *result, struct goro__cxx_escaped **escaped,
                      goro_err_t **err, int64_t deadline)
{
    if (handle_invalid(h))
        return -EINVAL;
    struct goro *self = goro__waiter_self();
    if (self == h)
        return -EDEADLK;
    uintptr_t w = atomic_load_explicit(&h->exit_word, memory_order_acquire);
    while (w == GORO_EXIT_WAKING) {
        cpu_relax();
        w = atomic_load_explicit(&h->exit_word, memory_order_acquire);
    }
    if (w != GORO_EXIT_RUNNING && w != GORO_EXIT_DEAD)
        return -EINVAL;             /* somebody already joins it */
    if (w == GORO_EXIT_RUNNING) {
        int refused = goro__wait_check(deadline);
        if (refused)
            return goro__wait_refused(refused);
        struct goro_park how = { .why = GORO_W_JOIN, .obj = h, .commit = join_commit,
                                 .arg = h, .deadline = deadline, .lends = true };
        /* h runs at least at our class while we wait (sched/prio.c), and
         * at the new one if ours changes meanwhile (RECLASS: the new loan
         * first, then the old one back; then wait on). */
        int prio = goro__prio_of(self);
        bool lent = goro__prio_lend(h, prio);
        int outcome;
        for (;;) {
            how.lent = (int8_t)prio;
            outcome = goro__park(&how);
            if (outcome != GORO_WAKE_RECLASS)
                break;
            int now = goro__prio_of(self);
            bool lent_now = goro__prio_lend(h, now);
            if (lent)
                goro__prio_unlend(h, prio);
            prio = now;
            lent = lent_now;
            how.commit = join_recommit;
        }
        if (lent)
            goro__prio_unlend(h, prio);
        if (outcome != GORO_WAKE_DONE && join_withdraw(h, self))
            return goro__wake_error(outcome);
        /* Woken by the exit, or never parked: h is dead now. */
        w = atomic_load_explicit(&h->exit_word, memory_order_acquire);
        while (w == GORO_EXIT_WAKING) {
            cpu_relax();
            w = atomic_load_explicit(&h->exit_word, memory_order_acquire);
        }
        if (w != GORO_EXIT_DEAD)
            return -EINVAL;         /* lost a race with another joiner */
    }
    /* coro: a join hands over only a DEAD coroutine's record, once */
    GORO_ASSERT(atomic_load_explicit(&h->state, memory_order_relaxed) == GORO_S_DEAD &&
                atomic_load_explicit(&h->exit_word, memory_order_relaxed) == GORO_EXIT_DEAD);
    if (result)
        *result = h->result;
    handle_free(h, escaped, err);
    return 0;
}

/* Every join; from a thread the runtime does not own, behind the handle
 * gate. */
static int join_until(goro_t *h, long *result, struct goro__cxx_escaped **escaped,
                      goro_err_t **err, int64_t deadline)
{
    if (err)
        *err = NULL;
    if (!h)
        return -EINVAL;
    bool outside = !goro__m();
    int refused = handle_gate_enter(outside);
    if (refused)
        return refused;
    int r = join_gated(h, result, escaped, err, deadline);
    handle_gate_leave(outside);
    return r;
}

int goro__cxx_join_until(goro_t *h, long *result, struct goro__cxx_escaped **escaped,
                         int64_t deadline)
{
    return join_until(h, result, escaped, NULL, deadline);
}

int goro_join_until(goro_t *h, long *result, int64_t deadline)
{
    return join_until(h, result, NULL, NULL, deadline);
}

int goro_join_err_until(goro_t *h, long *result, goro_err_t **err, int64_t deadline)
{
    return join_until(h, result, NULL, err, deadline);
}

int goro_join_err(goro_t *h, long *result, goro_err_t **err)
{
    return join_until(h, result, NULL, err, GORO_FOREVER);
}

int goro_join(goro_t *h, long *result)
{
    return goro_join_until(h, result, GORO_FOREVER);
}

static int detach_gated(goro_t *h)
{
    if (handle_invalid(h))
        return -EINVAL;
    uintptr_t expect;
    for (;;) {
        expect = GORO_EXIT_RUNNING;
        if (atomic_compare_exchange_strong_explicit(&h->exit_word, &expect,
                GORO_EXIT_DETACHED, memory_order_acq_rel, memory_order_acquire))
            return 0;               /* it frees itself when it ends */
        if (expect != GORO_EXIT_WAKING)
            break;
        cpu_relax();                /* its exit is settling the outcome: DEAD next */
    }
    if (expect != GORO_EXIT_DEAD)
        return -EINVAL;             /* somebody joins it */
    handle_free(h, NULL, NULL);
    return 0;
}

/* Racing a shutdown that releases h: 0, as h is released all the same. */
int goro_detach(goro_t *h)
{
    if (!h)
        return -EINVAL;
    bool outside = !goro__m();
    if (handle_gate_enter(outside))
        return 0;
    int r = detach_gated(h);
    handle_gate_leave(outside);
    return r;
}

/* Sets the flag every later wait checks, then claims the current wait if
 * there is one that may be cancelled. The store and the load of `wake`
 * are seq_cst, as are their counterparts when a wait is armed (sched/park.c),
 * so a wait armed concurrently sees the flag or is seen here. */
bool goro__cancel_claim(struct goro *h)
{
    atomic_store(&h->cancelled, 1);
    return goro__wake_open(atomic_load(&h->wake)) && goro__claim(h, GORO_WAKE_CANCELED);
}

/* Racing a shutdown that releases h: 0, as for any coroutine that has
 * ended (the shutdown waited for it to). */
int goro_cancel(goro_t *h)
{
    if (!h)
        return -EINVAL;
    bool outside = !goro__m();
    if (handle_gate_enter(outside))
        return 0;
    int r = -EINVAL;
    if (atomic_load_explicit(&h->state, memory_order_relaxed) != GORO_S_FREE &&
        !(h->flags & (GORO_F_EXTERNAL | GORO_F_G0))) {
        goro__cancel_tree(h);
        r = 0;
    }
    handle_gate_leave(outside);
    return r;
}

int goro_cancel_cause(goro_t *h, goro_err_t *cause)
{
    if (!h || !cause) {
        goro_err_free(cause);
        return -EINVAL;
    }
    bool outside = !goro__m();
    if (handle_gate_enter(outside)) {
        goro_err_free(cause);
        return 0;
    }
    int r = -EINVAL;
    if (atomic_load_explicit(&h->state, memory_order_relaxed) != GORO_S_FREE &&
        !(h->flags & (GORO_F_EXTERNAL | GORO_F_G0))) {
        goro__cancel_with_cause(h, cause);
        cause = NULL;
        r = 0;
    }
    handle_gate_leave(outside);
    goro_err_free(cause);
    return r;
}

int goro_cancelled(void)
{
    struct goro *self = goro__current();
    return self && atomic_load_explicit(&self->cancelled, memory_order_relaxed);
}

goro_t *goro_self(void)
{
    return goro__current();
}

void goro_exit(long result)
{
    if (!goro__current()) {
        fprintf(stderr, "goro: goro_exit() called outside a coroutine\n");
        abort();
    }
    goro__cxx_exit_unwind(result);  /* C++: destructors first, then here again (cxx.c) */
    life_end(goro__current(), result);
    goro__exit_current(result);
}

uint64_t goro_id(const goro_t *h)
{
    return h ? h->id : 0;
}

const char *goro_name(const goro_t *h)
{
    return h ? h->name : "";
}

int goro_set_name(const char *name)
{
    struct goro *g = goro__current();
    if (!g)
        return -EPERM;
    if (!name)
        return -EINVAL;
    strncpy(g->name, name, sizeof g->name - 1);
    g->name[sizeof g->name - 1] = 0;
    if (goro__trace_on())
        goro__trace_name(g);
    return 0;
}


