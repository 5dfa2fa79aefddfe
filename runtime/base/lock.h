/* Short internal locks and one-shot thread parking, both on futexes.
 * The runtime's critical sections are a few dozen instructions long, so the
 * lock spins briefly before it sleeps. Never held across a switch, except
 * by the park protocol, which releases it on the same thread right after
 * the switch (see goro__park).
 *
 * Each thread counts the locks it holds (goro__locks_held), in every
 * build: the preemption handler never suspends a coroutine whose thread
 * holds one (sched/preempt.c). Code outside goro's own section - a PLT
 * stub, a function the executable interposes - may run while goro holds
 * a lock; suspended there, the coroutine could resume on another worker
 * holding it, and the next coroutine here could wait for it for ever. The
 * count is right at every instruction outside goro's code, which is
 * where the handler looks at it (goro__locks_add). */
#ifndef GORO_LOCK_H
#define GORO_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A spin-wait hint to the CPU. */
#if defined(__x86_64__)
#define cpu_relax() __asm__ volatile("pause")
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield")
#else
#define cpu_relax() do { } while (0)
#endif

/* One step of waiting for another thread that is a few instructions from
 * done: a spin hint for the first `spins` steps, then the CPU given away
 * (that thread may have lost its own). */
static inline void spin_or_yield(int step, int spins)
{
    if (step < spins)
        cpu_relax();
    else
        sched_yield();
}

/* word: 0 = free, 1 = held, 2 = held and somebody may be sleeping on it.
 * Builds with -DGORO_DEBUG also record the holder's thread id: a thread
 * that takes a lock it already holds - a goro call from a signal handler
 * that interrupted the runtime, or a bug - would wait for itself for ever;
 * instead it prints why and aborts (lock.c). The field fits in the padding
 * the sync objects' layouts already have (sync.c asserts their sizes).
 *
 * The lock order, checked by debug builds: every lock has a rank, and a
 * thread may take a lock only if every lock it holds ranks lower - or, for
 * object locks and descriptor records, the same (a select holds several,
 * in its own order). The rank lives in the top byte of `holder`.
 *
 * The order of this enum IS the acquisition order: a lock is taken only
 * under locks above it here, never under one below it. To add a lock,
 * put its rank where it is taken (after every lock held when it is taken,
 * before every lock taken under it) and say what it guards; the rules for
 * each are in docs/architecture.md, "Locks". */
enum goro_lock_rank {
    /* 0: a lock never given a rank (GORO_LOCK_INIT, calloc) - an object's
     * lock; it ranks as GORO_RANK_OBJECT (lock.c, rank_of). */
    GORO_RANK_UNSET,
    GORO_RANK_START,               /* runtime.c: the layers' start and stop */
    GORO_RANK_SIGNAL,              /* io/signal.c: the subscriptions; signals are
                                      sent to channels under it */
    GORO_RANK_OBJECT,              /* an object's: a channel's, a sync object's, a
                                      group's, a flight's, a token's, a coroutine's
                                      holds_lock (prio.c); every unranked lock */
    GORO_RANK_RECORD,              /* a descriptor record (io/netpoll.h); libevent's
                                      base lock is taken under it */
    GORO_RANK_SCHED,               /* goro__sched.lock: Ps, Ms, the global queue,
                                      the idle and spare lists */
    GORO_RANK_TIMERS,              /* a P's timer heap (sched/timer.c) */
    GORO_RANK_LEAF,                /* nothing is taken under it: an M's pin_lock,
                                      the stack pool's, the registry's, the token
                                      table's, preemption's code ranges, ... */
};

typedef struct {
    _Atomic uint32_t word;
#ifdef GORO_DEBUG
    _Atomic int32_t holder;        /* rank << 24 | thread id (0: free) */
#endif
} goro_lock_t;

#define GORO_LOCK_INIT { 0 }
#ifdef GORO_DEBUG
#define GORO_LOCK_INIT_RANK(rank) { 0, (int32_t)(rank) << 24 }
#else
#define GORO_LOCK_INIT_RANK(rank) { 0 }
#endif

/* The locks this thread holds (see the top of the file); only this
 * thread and its signal handler read it. */
extern __thread int goro__locks_held
    __attribute__((visibility("hidden"), tls_model("initial-exec")));

/* Adds d to the count (and reads it: goro__locks_count). Taking counts before the lock word changes and
 * releasing after, so that at no instruction is a lock held uncounted
 * (an atomic may be a call into libgcc's helpers, -moutline-atomics,
 * which are not goro's code). x86-64 reaches a thread-local through %fs
 * at every access; elsewhere a compiler may keep its address across a
 * call, and a call that switches may resume on another thread: there the
 * count is kept through a call it cannot see into (lock.c). */
#if defined(__x86_64__)
static inline void goro__locks_add(int d)
{
    goro__locks_held += d;
}
static inline int goro__locks_count(void)
{
    return goro__locks_held;
}
#else
void goro__locks_add(int d) __attribute__((visibility("hidden")));
int goro__locks_count(void) __attribute__((visibility("hidden")));
#endif

void goro__lock_slow(goro_lock_t *l) __attribute__((visibility("hidden")));
void goro__unlock_slow(goro_lock_t *l) __attribute__((visibility("hidden")));

#ifdef GORO_DEBUG
/* The calling thread's id (cached; async-signal-safe). */
int32_t goro__lock_self(void) __attribute__((visibility("hidden")));
/* The order check: l is taken (aborts if the thread holds a lock of a
 * higher rank), l is released. */
void goro__lock_taken(goro_lock_t *l) __attribute__((visibility("hidden")));
void goro__lock_released(goro_lock_t *l) __attribute__((visibility("hidden")));
/* The switch's rule (sched/switch.c, post_switch): returns if the thread
 * holds no runtime lock, else aborts naming each one it holds and where
 * it was taken. */
void goro__locks_none_held(void) __attribute__((visibility("hidden")));
#endif

#ifdef GORO_DEBUG
/* Whether the calling thread holds l: for GORO_ASSERT, which says "under
 * l" where the prose does. Only in debug builds (it reads holder). */
static inline bool goro__lock_mine(goro_lock_t *l)
{
    return (atomic_load_explicit(&l->holder, memory_order_relaxed) & 0xffffff) ==
           goro__lock_self();
}
#endif

/* Gives a lock made at run time (calloc, memset) its rank. */
static inline void goro__lock_rank(goro_lock_t *l, enum goro_lock_rank rank)
{
#ifdef GORO_DEBUG
    atomic_store_explicit(&l->holder, (int32_t)rank << 24, memory_order_relaxed);
#else
    (void)l;
    (void)rank;
#endif
}

static inline void goro__lock(goro_lock_t *l)
{
    uint32_t expect = 0;
    goro__locks_add(1);
    if (!atomic_compare_exchange_strong_explicit(&l->word, &expect, 1,
            memory_order_acquire, memory_order_relaxed))
        goro__lock_slow(l);
#ifdef GORO_DEBUG
    goro__lock_taken(l);
#endif
}

static inline void goro__unlock(goro_lock_t *l)
{
#ifdef GORO_DEBUG
    /* Before the release: the next holder's record must not be erased. */
    goro__lock_released(l);
#endif
    bool sleeper = atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2;
    goro__locks_add(-1);
    if (sleeper)
        goro__unlock_slow(l);
}

/* Takes l only if it is free now, outside the order check (debug builds
 * record no holder): for the two that may run in a signal handler, or
 * under a leaf lock (debug/registry.c, sched/deadline.c). A try never
 * waits, so it cannot close a cycle of waits. Counted as every lock is;
 * released with goro__unlock_unranked. */
static inline bool goro__trylock_unranked(goro_lock_t *l)
{
    uint32_t expect = 0;
    goro__locks_add(1);
    if (atomic_compare_exchange_strong_explicit(&l->word, &expect, 1,
            memory_order_acquire, memory_order_relaxed))
        return true;
    goro__locks_add(-1);
    return false;
}

static inline void goro__unlock_unranked(goro_lock_t *l)
{
    bool sleeper = atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2;
    goro__locks_add(-1);
    if (sleeper)
        goro__unlock_slow(l);
}

/* Takes l only if it is free now: whether it did. For the one place that
 * takes a lock while holding one that ranks the same but is taken after
 * it elsewhere (the end of a coroutine's locks, sched/prio.c): it must
 * not wait there, or the two orders could wait for each other. */
static inline bool goro__trylock(goro_lock_t *l)
{
    if (!goro__trylock_unranked(l))
        return false;
#ifdef GORO_DEBUG
    goro__lock_taken(l);
#endif
    return true;
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
