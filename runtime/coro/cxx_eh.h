/* C++ exception state per coroutine: the switch path's part.
 *
 * The C++ runtime keeps the exceptions being handled (the stack of caught
 * exceptions that `throw;` rethrows) and the count of exceptions in flight
 * (std::uncaught_exceptions) in per-thread globals, __cxa_get_globals().
 * Coroutines share their worker thread and move between threads, so the
 * switch keeps those two fields per coroutine: saved when a coroutine
 * leaves, put back into whatever thread it resumes on. g0 (the scheduler)
 * puts back its own empty state, so a thread never holds a stale copy of a
 * switched-out coroutine's exceptions.
 *
 * In a program without the C++ runtime goro__cxx_globals stays NULL and each
 * call below is one load and a branch not taken. The copying is out of
 * line (runtime/coro/cxx.c): it reads thread-local storage, whose address the
 * compiler must not carry across the switch (it may resume on another
 * thread). See docs/cxx.md.
 *
 * contract cxx for sched: goro__cxx_eh_save goro__cxx_eh_restore
 *     goro__cxx_runtime
 */
#ifndef GORO_CXX_EH_H
#define GORO_CXX_EH_H

#include "internal.h"

/* __cxa_get_globals of the program's C++ runtime, NULL while it has none
 * (runtime/coro/cxx.c finds it). */
typedef void *(*goro__cxa_get_globals_fn)(void);
extern GORO_HIDDEN _Atomic(goro__cxa_get_globals_fn) goro__cxx_globals;

/* Where the program's C++ runtime is (its __cxa_get_globals), or NULL:
 * preemption asks whether the executable holds it. */
GORO_HIDDEN const void *goro__cxx_runtime(void);

GORO_HIDDEN void goro__cxx_eh_save_slow(struct goro *g);
GORO_HIDDEN void goro__cxx_eh_restore_slow(const struct goro *g);

/* g leaves this thread: keep the thread's exception state in g. */
static inline void goro__cxx_eh_save(struct goro *g)
{
    if (unlikely(atomic_load_explicit(&goro__cxx_globals, memory_order_relaxed) != NULL))
        goro__cxx_eh_save_slow(g);
}

/* g runs on this thread now (resumed, started, or g0 back): its exception
 * state becomes the thread's. */
static inline void goro__cxx_eh_restore(const struct goro *g)
{
    if (unlikely(atomic_load_explicit(&goro__cxx_globals, memory_order_relaxed) != NULL))
        goro__cxx_eh_restore_slow(g);
}

#endif
