/*
 * The runtime's threads: every one of them (workers, the hand-off's spares,
 * sysmon, the offload pool) is made by goro__thread_create, with the signal
 * mask of the thread that started the runtime - the program's - and no
 * more.
 *
 * Why no more: a mask is inherited across fork and kept across execve, and
 * a coroutine's system(), popen, posix_spawn or fork+exec starts its child
 * from whichever runtime thread runs it. glibc's system and posix_spawn
 * run no atfork handler, so nothing of ours could unblock in the child
 * what a runtime thread blocks: a child born with SIGTERM blocked ignores
 * it (its parent's waitpid after kill waits for ever), and a program whose
 * main thread ended (pthread_exit) would have no thread left that takes
 * SIGTERM at all. So, as in Go, a signal sent to the process may land on a
 * runtime thread like on any thread of a threaded program, and its
 * disposition decides: the default action, the program's handler, or
 * goro_signal_notify's (io/signal.c, which needs no mask). A program that
 * waits for signals itself (sigwait, signalfd) blocks them before it
 * starts the runtime - as before it creates any thread - and the runtime's
 * threads then block them too.
 *
 * The mask is taken when the runtime starts (goro__thread_mask_capture),
 * so that a spare or pool thread made later, from any thread, gets the same
 * one. Only the runtime's own signals are taken out of it, even when the
 * program blocked them: SIGURG (preemption) and the faults the crash
 * reporter handles.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched/sched.h"

/* ---- which mask ---- */

/* The starting thread's mask, written by goro__thread_mask_capture under
 * the start lock before any runtime thread exists (each start) and read by
 * goro__thread_create after that (started's release/acquire orders them). */
static sigset_t program_mask;
static bool captured;

void goro__thread_mask_capture(void)
{
    pthread_sigmask(SIG_BLOCK, NULL, &program_mask);
    captured = true;
}

/* The mask of a new runtime thread: the program's, less the runtime's own
 * signals. (Before any start - no runtime thread is made then - the
 * caller's.) */
static void runtime_thread_mask(sigset_t *mask)
{
    if (captured)
        *mask = program_mask;
    else
        pthread_sigmask(SIG_BLOCK, NULL, mask);
    static const int own[] = { SIGURG, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        sigdelset(mask, own[i]);
}

void goro__thread_mask(sigset_t *mask)
{
    runtime_thread_mask(mask);
}

/* ---- the runtime's threads ---- */

struct thread_start {
    void *(*fn)(void *);
    void *arg;
};

static void *runtime_thread_main(void *p)
{
    struct thread_start start = *(struct thread_start *)p;
    free(p);
    return start.fn(start.arg);
}

/* The new thread inherits the mask in force when pthread_create runs:
 * set it for that moment. (pthread_attr_setsigmask_np would not do under
 * TSan, whose pthread_create gives the new thread its creator's mask.) */
int goro__thread_create(pthread_t *thread, size_t stack_size, void *(*fn)(void *), void *arg)
{
    struct thread_start *start = malloc(sizeof *start);
    if (!start)
        return EAGAIN;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (stack_size)
        pthread_attr_setstacksize(&attr, stack_size);
    *start = (struct thread_start){ fn, arg };
    sigset_t mask, old;
    runtime_thread_mask(&mask);
    pthread_sigmask(SIG_SETMASK, &mask, &old);
    int err = pthread_create(thread, &attr, runtime_thread_main, start);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err)
        free(start);
    return err;
}
