/* Futex-based internal lock and futex wrappers (see lock.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "lock.h"

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
    signal(SIGABRT, SIG_DFL);       /* one report, not a second from fault.c */
    abort();
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
    if (atomic_load_explicit(&l->holder, memory_order_relaxed) == goro__lock_self())
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
