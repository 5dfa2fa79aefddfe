/*
 * The runtime's threads: every one of them (workers, the hand-off's spares,
 * sysmon, the offload pool) is made by goro__thread_create, with the
 * signals a program may want to wait for blocked.
 *
 * The kernel gives a signal sent to the process (kill, Ctrl-C, a timer, a
 * child's exit) to any one thread that does not block it. A program that
 * blocks SIGTERM in main and waits for it with sigwait or a signalfd
 * therefore loses it to a worker, where the default action ends the
 * process, unless every thread blocks it. The program cannot change the
 * mask of threads it did not create, so the runtime's threads block the
 * notifiable set (goro__signal_notifiable) for their whole life, whether
 * or not anybody is notified of them - a signal notified later would need
 * the masks of threads already running. The runtime's own signals are
 * unblocked in them even if the creating thread blocked them: SIGURG
 * (preemption) and the faults the crash reporter handles.
 * goro_signal_notify (io/signal.c) builds on this.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched/sched.h"

/* ---- which signals ---- */

/* Signals sent to the process as a whole that a program may want to wait
 * for. Not: SIGKILL, SIGSTOP (cannot be caught); SIGURG (preemption);
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT (raised by the
 * thread that faults, and the crash reporter's); SIGPIPE, SIGXFSZ (raised
 * by the thread whose write failed: goro's I/O returns -EPIPE instead);
 * SIGTTIN, SIGTTOU (a thread blocking them gets EIO from the terminal
 * instead of stopping); SIGPROF, SIGVTALRM (profilers sample whichever
 * thread runs); SIGPWR, SIGXCPU, SIGSTKFLT (garbage collectors use the first
 * two to stop threads). */
bool goro__signal_notifiable(int sig)
{
    switch (sig) {
    case SIGHUP: case SIGINT: case SIGQUIT: case SIGTERM: case SIGUSR1: case SIGUSR2:
    case SIGALRM: case SIGCHLD: case SIGWINCH: case SIGTSTP: case SIGCONT: case SIGIO:
        return true;
    default:
        return sig >= SIGRTMIN && sig <= SIGRTMAX;
    }
}

/* With GORO_DUMP_ON_SIGQUIT=1 (dump.c) SIGQUIT prints the dump on the
 * thread it lands on - preferably a worker, whose running coroutine the
 * dump can then unwind - so the workers keep it unblocked. Read once, as
 * dump.c does (the same rule: exactly "1"). */
static bool dump_owns_sigquit(void)
{
    static _Atomic int owns = -1;
    int v = atomic_load_explicit(&owns, memory_order_relaxed);
    if (v < 0) {
        const char *s = getenv("GORO_DUMP_ON_SIGQUIT");
        v = s && strcmp(s, "1") == 0;
        atomic_store_explicit(&owns, v, memory_order_relaxed);
    }
    return v;
}

/* The mask of a new runtime thread: its creator's (the program may have
 * blocked more), plus the notifiable signals, minus the runtime's own. */
static void runtime_thread_mask(sigset_t *mask)
{
    pthread_sigmask(SIG_BLOCK, NULL, mask);
    for (int sig = 1; sig < _NSIG; sig++)
        if (goro__signal_notifiable(sig) && !(sig == SIGQUIT && dump_owns_sigquit()))
            sigaddset(mask, sig);
    static const int own[] = { SIGURG, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        sigdelset(mask, own[i]);
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
