/*
 * A report callback (goro_stall_watch, goro_deadlock_watch): the program
 * sets or replaces it at any time, the monitor thread calls it. Once
 * goro__watch_set returns, a callback it replaced is not running (unless
 * the caller is that callback) and is never called again, so its arg is
 * the caller's to free. `calling` is set under the lock that the setter
 * changes fn under: the setter either sees the call coming, or the
 * monitor reads the new fn.
 */
#define _GNU_SOURCE
#include <sched.h>

#include "internal.h"
#include "debug/debug.h"

static __thread const struct goro_watch *running;   /* this thread is in its fn */

void goro__watch_set(struct goro_watch *w, void (*fn)(void), void *arg)
{
    goro__lock(&w->lock);
    w->fn = fn;
    w->arg = arg;
    goro__unlock(&w->lock);
    while (running != w && atomic_load_explicit(&w->calling, memory_order_acquire))
        sched_yield();
}

bool goro__watch_isset(struct goro_watch *w)
{
    goro__lock(&w->lock);
    bool set = w->fn != NULL;
    goro__unlock(&w->lock);
    return set;
}

void (*goro__watch_begin(struct goro_watch *w, void **arg))(void)
{
    goro__lock(&w->lock);
    void (*fn)(void) = w->fn;
    *arg = w->arg;
    if (fn)
        atomic_store_explicit(&w->calling, 1, memory_order_relaxed);
    goro__unlock(&w->lock);
    if (fn)
        running = w;
    return fn;
}

void goro__watch_done(struct goro_watch *w)
{
    running = NULL;
    atomic_store_explicit(&w->calling, 0, memory_order_release);
}
