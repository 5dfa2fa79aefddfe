/*
 * Watching a scope - a coroutine or a group - for its cancel: the done
 * channel (Go's ctx.Done()) and the functions run when it is cancelled
 * (Go's context.AfterFunc). docs/structured.md.
 *
 * A scope embeds a struct goro_watchers (internal.h) under its own lock. The
 * cancel (goro__scope_fire, from the cancel walk, which may run on a
 * runtime thread's scheduler context for a group's deadline) closes the
 * done channel and tells every armed after-function; it never spawns nor
 * waits. Each after-function has its own coroutine, spawned when it is
 * registered, which waits on the function's own event channel for one of
 * two events: FIRED (the scope was cancelled) or ENDED (the scope is over:
 * a coroutine's end, a group's wait or free). It runs fn only on FIRED and
 * only if it wins the function's state from ARMED; goro_after_stop wins it
 * the other way. So the call happens at most once, and stop's answer says
 * truly whether it was prevented.
 *
 * Invariants:
 *   1. state moves ARMED -> FIRED (the watcher, before calling fn) or
 *      ARMED -> STOPPED (goro_after_stop), once.
 *   2. A record is on at most one scope list, linked while the scope is
 *      neither cancelled nor over; the scope unlinks it under its lock and
 *      tells it once (one event into a channel of capacity one: the send
 *      never waits).
 *   3. refs counts the scope's list (until told), the watcher coroutine
 *      and the caller's stop handle; the last one frees the record and its
 *      channel. The teller holds the list's reference until its send has
 *      returned, so the woken watcher never frees a channel still in use.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "sched/sched.h"
#include "wait/scope.h"

enum { ARMED, FIRED, STOPPED };
enum { EV_FIRED = 1, EV_ENDED = 2 };

struct goro_afterfn {
    struct goro_afterfn *next;     /* the scope's list (invariant 2) */
    goro_chan_t *ev;               /* int, capacity one */
    _Atomic int state;             /* invariant 1 */
    _Atomic int refs;              /* invariant 3 */
    void (*fn)(void *arg);
    void *arg;
};

static void unref(struct goro_afterfn *a)
{
    if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) != 1)
        return;
    goro_chan_free(a->ev);
    free(a);
}

struct goro_afterfn *goro__scope_fire(struct goro_watchers *w)
{
    if (w->fired)
        return NULL;
    w->fired = true;
    if (w->done)
        goro_chan_close(w->done);
    struct goro_afterfn *list = w->afters;
    w->afters = NULL;
    return list;
}

struct goro_afterfn *goro__scope_end(struct goro_watchers *w)
{
    w->ended = true;
    struct goro_afterfn *list = w->afters;
    w->afters = NULL;
    return list;
}

void goro__scope_tell(struct goro_afterfn *list, bool fired)
{
    int ev = fired ? EV_FIRED : EV_ENDED;
    while (list) {
        struct goro_afterfn *a = list;
        list = a->next;
        int r = goro_chan_try_send(a->ev, &ev);
        /* watch: each record is told once, into its empty channel (2) */
        GORO_ASSERT(r == 0);
        (void)r;
        unref(a);                   /* the list's reference (3) */
    }
}

goro_chan_t *goro__scope_done(struct goro_watchers *w)
{
    if (!w->done && goro_chan_new(&w->done, 0, 0) == 0 && w->fired)
        goro_chan_close(w->done);
    return w->done;
}

void goro__scope_free(struct goro_watchers *w)
{
    /* watch: the scope is over, nothing is left to tell */
    GORO_ASSERT(!w->afters);
    if (w->done)
        goro_chan_free(w->done);
    w->done = NULL;
}

/* The after-function's coroutine: waits for its one event. */
static long after_main(void *arg)
{
    struct goro_afterfn *a = arg;
    int ev = 0;
    /* Not cancellable: nobody holds this coroutine's handle, and it must
     * not miss its event (a shutdown waits for it: every scope ends). */
    while (goro_chan_recv(a->ev, &ev) == -ECANCELED)
        ;
    int armed = ARMED;
    if (ev == EV_FIRED && atomic_compare_exchange_strong(&a->state, &armed, FIRED))
        a->fn(a->arg);
    unref(a);                       /* the watcher's reference (3) */
    return 0;
}

/* Registers fn(arg) on the watch w of a scope whose lock is lk (the
 * caller checked the scope is alive and keeps it so). */
int goro__scope_after(struct goro_watchers *w, goro_lock_t *lk, void (*fn)(void *),
                      void *arg, goro_after_t **stop)
{
    if (stop)
        *stop = NULL;
    if (!fn)
        return -EINVAL;
    struct goro_afterfn *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    int err = goro_chan_new(&a->ev, sizeof(int), 1);
    if (err) {
        free(a);
        return err;
    }
    a->fn = fn;
    a->arg = arg;
    atomic_init(&a->state, ARMED);
    atomic_init(&a->refs, stop ? 3 : 2);    /* list, watcher, handle */
    err = goro_spawn(NULL, &(goro_attr_t){ .name = "after-func" }, after_main, a);
    if (err) {
        goro_chan_free(a->ev);
        free(a);
        return err;
    }
    if (stop)
        *stop = a;
    goro__lock(lk);
    bool now = w->fired || w->ended;
    bool fired = w->fired;
    if (!now) {
        a->next = w->afters;
        w->afters = a;
    }
    goro__unlock(lk);
    if (now) {
        a->next = NULL;
        goro__scope_tell(a, fired);
    }
    return 0;
}

int goro_after_stop(goro_after_t *a)
{
    if (!a)
        return -EINVAL;
    int armed = ARMED;
    int prevented = atomic_compare_exchange_strong(&a->state, &armed, STOPPED);
    unref(a);                       /* the handle's reference (3) */
    return prevented;
}

/* ---- the scopes: a coroutine (its groups_lock) ---- */

/* h, or the calling coroutine for NULL; NULL if neither is one that can be
 * cancelled (the record of a thread, a free record). */
static struct goro *scope_of(goro_t *h)
{
    struct goro *g = h ? h : goro__current();
    if (!g || (g->flags & (GORO_F_EXTERNAL | GORO_F_G0)) ||
        atomic_load_explicit(&g->state, memory_order_relaxed) == GORO_S_FREE)
        return NULL;
    return g;
}

goro_chan_t *goro_done(goro_t *h)
{
    struct goro *g = scope_of(h);
    if (!g)
        return NULL;
    goro__lock(&g->groups_lock);
    goro_chan_t *ch = goro__scope_done(&g->watch);
    goro__unlock(&g->groups_lock);
    return ch;
}

int goro_after_cancel(goro_t *h, void (*fn)(void *), void *arg, goro_after_t **stop)
{
    struct goro *g = scope_of(h);
    if (!g) {
        if (stop)
            *stop = NULL;
        return -EINVAL;
    }
    return goro__scope_after(&g->watch, &g->groups_lock, fn, arg, stop);
}

/* ---- deadlines in force (goro/structured.h; the waits: sched/park.c) ---- */

/* g->in_force's encoding: 0 is none, so a deadline of 0 (long past) is
 * 1. */
static int64_t dl_of(int64_t deadline)
{
    return deadline < 0 ? 0 : deadline ? deadline : 1;
}

int64_t goro_deadline(void)
{
    struct goro *self = goro__current();
    return self && self->in_force ? self->in_force : GORO_FOREVER;
}

int64_t goro_deadline_push(int64_t deadline)
{
    struct goro *self = goro__current();
    if (!self)
        return GORO_FOREVER;
    int64_t prev = self->in_force ? self->in_force : GORO_FOREVER;
    if (deadline < 0)
        deadline = GORO_FOREVER;
    self->in_force = dl_of(goro__deadline_nearer(deadline, self->in_force));
    return prev;
}

void goro_deadline_pop(int64_t prev)
{
    struct goro *self = goro__current();
    if (self)
        self->in_force = dl_of(prev);
}
