/*
 * The runtime and fork(2).
 *
 * A child has one thread, the one that called fork, and a copy of the rest:
 * run queues and coroutines of workers that do not exist there, locks that
 * the parent's threads held, and the epoll instances, which the child
 * shares with the parent (a registration the child drops is dropped for
 * the parent too). None of it can be carried over, so a child of a process
 * whose runtime runs is refused: every goro call that would start, stop,
 * spawn, wait or do I/O fails at once with -ENOTRECOVERABLE (the state
 * here cannot be recovered; ECHILD would read as "no child processes"),
 * and goro_close only closes. A child that calls only exec*() or _exit()
 * never notices.
 *
 * The hooks: spawn (coro.c), goro_start and goro_shutdown (runtime.c), the
 * I/O calls' entry and the descriptor records (netpoll.c), and in sched.c
 * the wait check (every wait that can fail), goro__park (firm waits, which
 * skip that check) and goro_yield (the run queues hold the parent's
 * coroutines).
 *
 * A child forked while the runtime was not running (never started, or
 * shut down) copies nothing live and may start a runtime of its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "internal.h"
#include "sched/sched.h"

GORO_HIDDEN _Atomic int goro__fork_child;

/* In the child, on its one thread, before fork returns there. */
static void after_fork_in_child(void)
{
    if (atomic_load_explicit(&goro__sched.started, memory_order_relaxed) || goro__sched.procs)
        atomic_store_explicit(&goro__fork_child, 1, memory_order_relaxed);
}

int goro__fork_install(void)
{
    static bool installed;          /* under goro_start's lock */
    if (installed)
        return 0;
    int err = pthread_atfork(NULL, NULL, after_fork_in_child);
    if (err)
        return -err;
    installed = true;
    return 0;
}

int goro__forked_error(void)
{
    static _Atomic int said;
    /* write(2): the parent's threads may have held stdio's locks */
    static const char line[] = "goro: the runtime does not survive fork(); in the child, "
                               "call only exec*() or _exit() (or goro calls that do not wait)\n";
    if (!atomic_exchange(&said, 1)) {
        ssize_t n = write(STDERR_FILENO, line, sizeof line - 1);
        (void)n;                    /* nowhere to report a failed report */
    }
    return -ENOTRECOVERABLE;
}

/* Firm waits (offload, once) never fail otherwise: CANCELED is the one
 * outcome their callers can take, and better than waiting for ever. */
int goro__forked_park(const struct goro_park *how)
{
    goro__forked_error();
    if (how->unlock)                /* a park releases it; so does a refusal */
        how->unlock(how->arg);
    return GORO_WAKE_CANCELED;
}
