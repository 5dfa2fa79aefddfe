/* Short internal locks and one-shot thread parking, both on futexes.
 * The runtime's critical sections are a few dozen instructions long, so the
 * lock spins briefly before it sleeps. Never held across a switch, except
 * by the park protocol, which releases it on the same thread right after
 * the switch (see goro__park). */
#ifndef GORO_LOCK_H
#define GORO_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

/* A spin-wait hint to the CPU. */
#if defined(__x86_64__)
#define cpu_relax() __asm__ volatile("pause")
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() do { } while (0)
#endif

/* word: 0 = free, 1 = held, 2 = held and somebody may be sleeping on it.
 * Builds with -DGORO_DEBUG also record the holder's thread id: a thread
 * that takes a lock it already holds - a goro call from a signal handler
 * that interrupted the runtime, or a bug - would wait for itself for ever;
 * instead it prints why and aborts (lock.c). The field fits in the padding
 * the sync objects' layouts already have (sync.c asserts their sizes). */
typedef struct {
    _Atomic uint32_t word;
#ifdef GORO_DEBUG
    _Atomic int32_t holder;        /* thread id, 0: free (or not known) */
#endif
} goro_lock_t;

#define GORO_LOCK_INIT { 0 }

void goro__lock_slow(goro_lock_t *l) __attribute__((visibility("hidden")));
void goro__unlock_slow(goro_lock_t *l) __attribute__((visibility("hidden")));

#ifdef GORO_DEBUG
/* The calling thread's id (cached; async-signal-safe). */
int32_t goro__lock_self(void) __attribute__((visibility("hidden")));
#endif

static inline void goro__lock(goro_lock_t *l)
{
    uint32_t expect = 0;
    if (!atomic_compare_exchange_strong_explicit(&l->word, &expect, 1,
            memory_order_acquire, memory_order_relaxed))
        goro__lock_slow(l);
#ifdef GORO_DEBUG
    atomic_store_explicit(&l->holder, goro__lock_self(), memory_order_relaxed);
#endif
}

static inline void goro__unlock(goro_lock_t *l)
{
#ifdef GORO_DEBUG
    /* Before the release: the next holder's record must not be erased. */
    atomic_store_explicit(&l->holder, 0, memory_order_relaxed);
#endif
    if (atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2)
        goro__unlock_slow(l);
}

/* An unlock function with the signature goro__park wants. */
void goro__unlock_cb(void *lock) __attribute__((visibility("hidden")));

/* futex wrappers: wait while *word == val (EINTR and spurious wake-ups are
 * the caller's loop's business), for at most ns nanoseconds if ns >= 0;
 * wake up to n waiters. The only futex calls of the runtime. */
void goro__futex_wait(_Atomic uint32_t *word, uint32_t val) __attribute__((visibility("hidden")));
void goro__futex_wait_ns(_Atomic uint32_t *word, uint32_t val, int64_t ns)
    __attribute__((visibility("hidden")));
void goro__futex_wake(_Atomic uint32_t *word, int n) __attribute__((visibility("hidden")));

#endif
