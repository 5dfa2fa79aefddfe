/* coro/: a coroutine's life - spawn, entry, exit, join, detach and
 * cancellation (coro.c), its stack (stack.c: pooled, trimmed; arena.c:
 * mapped and guarded), the tokens that cancel detached ones (token.c), the offload
 * pool for blocking calls (offload.c) and C++ support (cxx.c).
 *
 * Calls sched/ (park, ready, the spawn gate) and base/; the tree of groups
 * (wait/group.h: a spawn into a group, a coroutine's end, a cancel), the
 * first use that starts the runtime and debug/'s registry and trace. sched/
 * calls up into it only through the contract of a coroutine's life,
 * marked "for sched/" below: the end of a coroutine (goro__release) and
 * the stack cache (slab put, trimming); the C++ switch hooks: cxx_eh.h.
 *
 * layer: coro - a coroutine's life: spawn, entry, exit, join, detach,
 *     cancellation; stacks, tokens, the offload pool, C++ support
 * may call: sched, base
 * uses: groups, start, reports, fatal
 * contract life for sched: goro__release goro__slab_put
 *     goro__slab_trim_idle goro__slab_trim_tick goro__slab_trim_pending
 *     goro__slab_cache_spill
 * contract stacks for debug: goro__page_size goro__stacks_in_arenas
 *     goro__stack_space_counts goro__stack_space_each
 */
#ifndef GORO_CORO_CORO_H
#define GORO_CORO_CORO_H

#include "internal.h"

/* Coroutine stack sizes allowed (goro_attr_t.stack_size, GORO_STACK_SIZE). */
#define GORO_STACK_MIN ((size_t)16 * 1024)
#define GORO_STACK_MAX ((size_t)1 << 30)

/* stack.c */
/* A record with its stack: p is the caller's P (it is inside; NULL: none). */
GORO_HIDDEN struct goro *goro__slab_get(struct goro_p *p, size_t stack_size, int *err);
GORO_HIDDEN void goro__slab_put(struct goro *g);              /* for sched/ too */
GORO_HIDDEN void goro__slab_free_all(void);   /* at shutdown; closes the pool */
GORO_HIDDEN void goro__slab_pool_open(void);  /* at a start */
GORO_HIDDEN bool goro__slab_trim_idle(void);                   /* for sched/ */
GORO_HIDDEN void goro__slab_cache_spill(struct goro_p *p);     /* for sched/ */
GORO_HIDDEN int goro__slab_pooled(void);                       /* for the tests too */
/* For sched/ (sysmon), every round: unmaps pooled stacks unused for 1 s.
 * Pending: the pool is not empty, so later ticks may have work. */
GORO_HIDDEN void goro__slab_trim_tick(int64_t now);
GORO_HIDDEN bool goro__slab_trim_pending(void);
GORO_HIDDEN size_t goro__page_size(void);
GORO_HIDDEN int goro__stack_size_check(size_t size, size_t *rounded);

/* arena.c: address space for stacks, with their guard at the low end.
 * guard_init (at each start, no stack mapped) chooses arenas with guard
 * regions or a mapping per stack with mprotect; reserve returns size bytes
 * whose first guard bytes fault, or NULL with errno set, and the arena to
 * give to release. The mode and the counts are for goro_dump. */
struct goro_arena;
GORO_HIDDEN void goro__stack_guard_init(void);
GORO_HIDDEN char *goro__stack_reserve(size_t size, size_t guard, struct goro_arena **arena);
GORO_HIDDEN void goro__stack_release(char *map, size_t size, struct goro_arena *arena);
GORO_HIDDEN void goro__stack_space_free(void);
GORO_HIDDEN bool goro__stacks_in_arenas(void);
GORO_HIDDEN void goro__stack_space_counts(long *arenas, long *stacks);
/* Calls fn for every arena's range (under the arenas' lock: fn must not
 * map or free stacks); for the leak scan, which leaves stacks out. */
GORO_HIDDEN void goro__stack_space_each(void (*fn)(const void *lo, size_t len, void *arg),
                                        void *arg);
/* For gdb's generate-core-file (gdb/goro_gdb.py): lifts or restores the
 * guard regions, which gdb cannot read. */
GORO_HIDDEN long goro__arena_guards(int lift);

/* err.c: for a coroutine's end, on its own stack - the failure it ended
 * with, taken from it (the joiner gets none): its error object, or one
 * made from a negative result (it names the coroutine); NULL for a
 * success. Groups and single-flight hand it on. */
GORO_HIDDEN goro_err_t *goro__err_take_at_end(struct goro *g, long result);
/* A shared, immutable error of code ETIMEDOUT, or else ECANCELED, with
 * no message (goro_err_free leaves it alone): a cause nobody gave. */
GORO_HIDDEN const goro_err_t *goro__err_stand_in(int code);

/* Cleanups a coroutine's end runs (pthread_cleanup_push's kind), for
 * state that names the coroutine while it is inside some call of its own -
 * goro_once running fn, which may end the coroutine at any depth (wait/
 * sync.c). A record lies in the frame that pushes it and is pushed and
 * popped by its coroutine alone, innermost first. An end that leaves the
 * frames in place (goro_exit, goro_exit_err in C) runs the records still
 * pushed, innermost first, in life_end, on the same stack below them. An
 * end or an exception that unwinds them (C++) passes each frame's cleanup
 * handler, which pops its record and runs it: such a frame is built with
 * -fexceptions, or the unwind leaves a record whose frame is gone. */
struct goro_unwind {
    struct goro_unwind *next;
    void (*fn)(struct goro_unwind *u);
};

static inline void goro__unwind_push(struct goro *g, struct goro_unwind *u)
{
    u->next = g->unwind;
    g->unwind = u;
}

static inline void goro__unwind_pop(struct goro *g, struct goro_unwind *u)
{
    GORO_ASSERT(g->unwind == u);    /* innermost first */
    g->unwind = u->next;
}

/* local.c: a coroutine's end, on its own stack: its coroutine-local
 * values' destructors run (pthread's rounds) and its slots are cleared. */
GORO_HIDDEN void goro__locals_end(struct goro *g);

/* offload.c */
GORO_HIDDEN void goro__offload_stop(void);

/* coro.c */
GORO_HIDDEN void goro__coro_main(void *g);
GORO_HIDDEN void goro__capture_store(const struct goro_callregs *regs, int with_stack);
/* For sched/: runs on the context after a coroutine's last switch, hands
 * it to its joiner or frees it. */
GORO_HIDDEN void goro__release(struct goro *g);
/* For goro_shutdown, with every coroutine ended: close waits until no
 * thread the runtime does not own is inside a join, detach or cancel, and
 * refuses later ones (they leave the handle alone) until open, at the next
 * start. */
GORO_HIDDEN void goro__handles_close(void);
GORO_HIDDEN void goro__handles_open(void);

/* cxx.c: C++ support (docs/cxx.md); the switch path's part is in
 * runtime/coro/cxx_eh.h. goro_exit's first step: with the C++ runtime, unwinds
 * the coroutine's frames (destructors run) and calls goro_exit again.
 * Returns at once in C, in that second call, or if the unwinder gave up:
 * goro_exit then ends the coroutine. */
GORO_HIDDEN void goro__cxx_exit_unwind(long result);

#endif
