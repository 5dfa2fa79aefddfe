/* Futex-based internal lock and futex wrappers (see lock.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "debug/debug.h"
#include "base/lock.h"

__thread int goro__locks_held __attribute__((tls_model("initial-exec")));

#if !defined(__x86_64__)
__attribute__((noinline)) void goro__locks_add(int d)
{
    goro__locks_held += d;
}

__attribute__((noinline)) int goro__locks_count(void)
{
    return goro__locks_held;
}
#endif

#ifdef GORO_DEBUG
static __thread int32_t self_tid;

int32_t goro__lock_self(void)
{
    if (!self_tid)
        self_tid = (int32_t)syscall(SYS_gettid);
    return self_tid;
}

/* A child of fork runs on a thread of its own: its id is not the one the
 * forking thread cached. */
static void forget_tid(void)
{
    self_tid = 0;
}

__attribute__((constructor)) static void forget_tid_at_fork(void)
{
    pthread_atfork(NULL, NULL, forget_tid);
}

/* Waiting would be for ever: say why, where, and stop. Only
 * async-signal-safe calls up to the backtrace, which is best effort. */
__attribute__((noreturn, cold)) static void taken_again(void)
{
    static const char msg[] = "goro: a lock of the runtime is taken again by the thread "
                              "that holds it: a goro call from a signal handler, or a bug\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    goro__backtrace_fd(2, NULL);
    goro__fatal_abort("aborted: a runtime lock taken again");
}

/* ---- the lock order (lock.h) ---- */

static const char *const rank_names[] = {
    [GORO_RANK_START] = "the start lock", [GORO_RANK_SIGNAL] = "the signal lock",
    [GORO_RANK_OBJECT] = "an object lock", [GORO_RANK_RECORD] = "a descriptor record",
    [GORO_RANK_SCHED] = "the scheduler lock", [GORO_RANK_TIMERS] = "a timer heap",
    [GORO_RANK_LEAF] = "a leaf lock",
};

#define HELD_MAX 64
static __thread goro_lock_t *held[HELD_MAX];
static __thread void *held_at[HELD_MAX];     /* where each was taken */
static __thread int nheld;

/* The rank as stored: an unset one stays 0, as GORO_LOCK_INIT made it. */
static int32_t rank_bits(goro_lock_t *l)
{
    return (int32_t)((uint32_t)atomic_load_explicit(&l->holder, memory_order_relaxed) &
                     0xff000000u);
}

/* The lock's rank, its place in the order (lock.h): an unset one is an
 * object's. */
static int rank_of(goro_lock_t *l)
{
    int r = (int)((uint32_t)atomic_load_explicit(&l->holder, memory_order_relaxed) >> 24);
    return r > GORO_RANK_UNSET && r <= GORO_RANK_LEAF ? r : GORO_RANK_OBJECT;
}

__attribute__((noreturn, cold)) static void out_of_order(int taking, int holding, int i)
{
    char at[128], msg[320];
    goro__symbolize(held_at[i], at, sizeof at);
    int n = snprintf(msg, sizeof msg, "goro: lock order: %s taken while holding %s\n"
                     "  the lock held (%p) was taken in %s\n", rank_names[taking],
                     rank_names[holding], (void *)held[i], at);
    ssize_t w = write(2, msg, (size_t)n);
    (void)w;
    goro__backtrace_fd(2, NULL);
    goro__fatal_abort("aborted: the runtime's lock order broken");
}

void goro__lock_taken(goro_lock_t *l)
{
    int r = rank_of(l);
    for (int i = 0; i < nheld; i++) {
        int h = rank_of(held[i]);
        bool same_ok = h == r && (r == GORO_RANK_OBJECT || r == GORO_RANK_RECORD);
        if (h > r || (h == r && !same_ok))
            out_of_order(r, h, i);
    }
    if (nheld < HELD_MAX) {
        held_at[nheld] = __builtin_return_address(0);
        held[nheld++] = l;
    }
    atomic_store_explicit(&l->holder, rank_bits(l) | goro__lock_self(), memory_order_relaxed);
}

void goro__locks_none_held(void)
{
    int count = goro__locks_count();
    if (count == 0)
        return;
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "goro: broken rule: a switch left this thread holding "
                     "%d runtime lock%s\n", count, count == 1 ? "" : "s");
    for (int i = 0; i < nheld && n < (int)sizeof msg; i++) {
        char at[128];
        goro__symbolize(held_at[i], at, sizeof at);
        n += snprintf(msg + n, sizeof msg - (size_t)n, "  %s (%p), taken in %s\n",
                      rank_names[rank_of(held[i])], (void *)held[i], at);
    }
    if (count > nheld && n < (int)sizeof msg)
        n += snprintf(msg + n, sizeof msg - (size_t)n,
                      "  %d taken by a try, which records no holder\n", count - nheld);
    ssize_t w = write(2, msg, n < (int)sizeof msg ? (size_t)n : sizeof msg - 1);
    (void)w;
    goro__backtrace_fd(2, NULL);
    goro__fatal_abort("aborted: a runtime lock held across a switch");
}

void goro__lock_released(goro_lock_t *l)
{
    GORO_ASSERT(goro__locks_held > 0);   /* released on the thread that took it */
    atomic_store_explicit(&l->holder, rank_bits(l), memory_order_relaxed);
    for (int i = nheld - 1; i >= 0; i--)
        if (held[i] == l) {
            held[i] = held[--nheld];
            held_at[i] = held_at[nheld];
            held[nheld] = NULL;     /* no stale copy for goro_leaks' scan to find */
            break;
        }
}
#endif

void goro__futex_wait(_Atomic uint32_t *word, uint32_t val)
{
    goro__futex_wait_ns(word, val, -1);
}

void goro__futex_wait_ns(_Atomic uint32_t *word, uint32_t val, int64_t ns)
{
    int saved = errno;
    struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, ns >= 0 ? &ts : NULL, NULL, 0);
    errno = saved;
}

void goro__futex_wake(_Atomic uint32_t *word, int n)
{
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved;
}

void goro__lock_slow(goro_lock_t *l)
{
#ifdef GORO_DEBUG
    if ((atomic_load_explicit(&l->holder, memory_order_relaxed) & 0xffffff) == goro__lock_self())
        taken_again();
#endif
    for (int spin = 0; spin < 100; spin++) {
        uint32_t expect = 0;
        if (atomic_load_explicit(&l->word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&l->word, &expect, 1,
                memory_order_acquire, memory_order_relaxed))
            return;
        cpu_relax();
    }
    /* Mark contended; whoever unlocks a 2 wakes one sleeper. */
    while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
        goro__futex_wait(&l->word, 2);
}

void goro__unlock_slow(goro_lock_t *l)
{
    goro__futex_wake(&l->word, 1);
}

void goro__unlock_cb(void *lock)
{
    goro__unlock(lock);
}
