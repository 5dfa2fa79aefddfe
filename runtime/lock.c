/* Futex-based internal lock and futex wrappers (see lock.h). */
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lock.h"

void goro__futex_wait(_Atomic uint32_t *word, uint32_t val)
{
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
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
