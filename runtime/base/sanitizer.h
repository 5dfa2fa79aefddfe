/* Telling ASan, TSan and valgrind about stack switches. Without these they
 * see one thread jump between unrelated stacks and report garbage. All of it
 * compiles to nothing in ordinary builds (valgrind's client requests are a
 * few no-op instructions unless the program runs under valgrind). */
#ifndef GORO_SANITIZER_H
#define GORO_SANITIZER_H

#include "internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define GORO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GORO_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define GORO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORO_TSAN 1
#endif
#endif

#ifdef GORO_ASAN
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
#endif
#ifdef GORO_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_set_fiber_name(void *fiber, const char *name);
#endif

/* Called on the leaving side, right before goro__ctx_switch. */
static inline void goro__san_leave(struct goro *from, struct goro *to, int from_dies)
{
#ifdef GORO_ASAN
    const void *lo = (to->flags & GORO_F_G0) ? to->asan_stack_lo : (const void *)to->lo;
    size_t size = (to->flags & GORO_F_G0) ? to->asan_stack_size : (size_t)(to->hi - to->lo);
    __sanitizer_start_switch_fiber(from_dies ? NULL : &from->asan_fake_stack, lo, size);
#endif
#ifdef GORO_TSAN
    (void)from; (void)from_dies;
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    (void)from; (void)to; (void)from_dies;
}

/* Called on the arriving side, right after goro__ctx_switch returns (or at
 * the start of a new context). */
static inline void goro__san_arrive(struct goro *self)
{
#ifdef GORO_ASAN
    __sanitizer_finish_switch_fiber(self->asan_fake_stack, NULL, NULL);
#endif
    (void)self;
}

/* A stack about to be reused: a finished coroutine never returned from
 * its last frames, so ASan still has their redzones marked there. */
static inline void goro__san_stack_reset(struct goro *g)
{
#ifdef GORO_ASAN
    __asan_unpoison_memory_region(g->lo, (size_t)(g->hi - g->lo));
#endif
#ifdef GORO_TSAN
    /* Likewise TSan's shadow call stack of the slab's fiber keeps the
     * frames every ended life left on it; before it overflows (64K frames)
     * the fiber is made afresh, every 64 lives. Never the running fiber:
     * the slab is not in use here. */
    if (++g->tsan_lives % 64 == 0) {
        __tsan_destroy_fiber(g->tsan_fiber);
        g->tsan_fiber = __tsan_create_fiber(0);
    }
#endif
    (void)g;
}

/* A TSan fiber costs about what a TSan thread does, so each slab keeps one
 * for all the coroutines that live on it: made when it is mapped,
 * destroyed when it is unmapped, renamed at each spawn. */
static inline void goro__san_fiber_create(struct goro *g)
{
#ifdef GORO_TSAN
    g->tsan_fiber = __tsan_create_fiber(0);
#endif
    (void)g;
}

static inline void goro__san_fiber_name(struct goro *g)
{
#ifdef GORO_TSAN
    if (g->name[0])
        __tsan_set_fiber_name(g->tsan_fiber, g->name);
#endif
    (void)g;
}

static inline void goro__san_fiber_destroy(struct goro *g)
{
#ifdef GORO_TSAN
    if (g->tsan_fiber)
        __tsan_destroy_fiber(g->tsan_fiber);
    g->tsan_fiber = NULL;
#endif
    (void)g;
}

/* The thread's own stack, as the g0 context of a worker. */
static inline void goro__san_thread_init(struct goro *g0)
{
#ifdef GORO_TSAN
    g0->tsan_fiber = __tsan_get_current_fiber();
#endif
#ifdef GORO_ASAN
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &addr, &size);
        pthread_attr_destroy(&attr);
    }
    g0->asan_stack_lo = addr;
    g0->asan_stack_size = size;
#endif
    (void)g0;
}

#endif
