/*
 * goro_signal_notify: signals delivered on channels - Go's signal.Notify.
 *
 * The runtime blocks no signal in its threads (sched/thread.c: they keep
 * the mask the program started the runtime with, which every child they
 * start inherits), so a signal sent to the process lands on any thread
 * that does not block it. Each signal somebody listens to has a handler of
 * ours, installed with sigaction: whichever thread runs it - main, a
 * worker in the middle of a coroutine, sysmon, a pool thread - it counts
 * the signal in caught[] and rings the doorbell, an eventfd. It only
 * counts and writes: async-signal-safe, no lock, no goro call. When every
 * thread blocks the signal - the program blocked it before starting the
 * runtime - it stays pending instead, and a signalfd over the listened
 * signals reads it (a signalfd needs no mask of ours: it only takes what
 * is pending). Both descriptors are watched on event base 0 (netpoll.c).
 * Their callback runs on the g0 of whichever thread polls that base, or
 * on sysmon; it try-sends the signal number to every subscribed channel -
 * a full one misses it, as in Go - and never waits.
 *
 * A signal nobody listens to keeps the disposition the program gave it:
 * the first subscription sets the earlier one aside, the last one puts it
 * back (unless the program has installed another meanwhile), so an
 * unnotified SIGTERM still ends the process.
 *
 * Lifetime: subscriptions belong to the running runtime. goro_shutdown,
 * once the runtime's threads are gone, ends them all
 * (goro__signal_end_all): the handlers go, the signals' earlier
 * dispositions come back, and the channels are never touched again. The
 * two descriptors are made once and kept for the process's life, so that a
 * handler running late never writes to a closed (or reused) descriptor.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <event2/event_struct.h>

#include "internal.h"
#include "io/poller.h"
#include "debug/debug.h"
#include "sched/sched.h"
#include "runtime.h"
#include "wait/waitq.h"

/* ---- subscriptions ---- */

struct subscription {
    goro_chan_t *ch;
    sigset_t sigs;
};

/* Everything below is under `lock`, except what the handler touches
 * (caught, doorbell_fd: atomics). */
static goro_lock_t lock = GORO_LOCK_INIT_RANK(GORO_RANK_SIGNAL);
static struct subscription *subs;
static int nsubs, subs_cap;
static int listeners[_NSIG];               /* subscriptions per signal */
static struct sigaction before[_NSIG];     /* its disposition before the first */
static _Atomic unsigned caught[_NSIG];     /* taken by the handler, not yet sent */
static _Atomic int doorbell_fd = -1;       /* eventfd the handler writes */
static int pending_fd = -1;                /* signalfd of every signal listened to */
static struct event doorbell_ev, pending_ev;
static bool doorbell_watched, pending_watched;   /* in base 0 of this runtime */

int goro__signal_subscribers(void)
{
    goro__lock(&lock);
    int n = nsubs;
    goro__unlock(&lock);
    return n;
}

/* goro__ though static: see goro__on_sigurg (preempt.c). */
static void goro__on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    int saved = errno;
    atomic_fetch_add_explicit(&caught[sig], 1, memory_order_relaxed);
    uint64_t one = 1;
    (void)!write(atomic_load_explicit(&doorbell_fd, memory_order_relaxed), &one, sizeof one);
    errno = saved;
}

static bool handler_is_ours(int sig)
{
    struct sigaction now;
    return sigaction(sig, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
           now.sa_sigaction == goro__on_signal;
}

/* Every signal with at least one listener. */
static void listened_set(sigset_t *set)
{
    sigemptyset(set);
    for (int sig = 1; sig < _NSIG; sig++)
        if (listeners[sig] > 0)
            sigaddset(set, sig);
}

static int update_pending_mask(void)
{
    sigset_t set;
    listened_set(&set);
    return signalfd(pending_fd, &set, 0) < 0 ? -errno : 0;
}

static void deliver(int sig, unsigned times)
{
    for (int i = 0; i < nsubs; i++)
        if (sigismember(&subs[i].sigs, sig))
            for (unsigned n = 0; n < times; n++)
                (void)goro_chan_try_send(subs[i].ch, &sig);   /* full: missed */
}

/* Base 0's callback for both descriptors: sends what either has. */
static void signals_ready(int fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    goro__lock(&lock);
    uint64_t rings;
    (void)!read(atomic_load_explicit(&doorbell_fd, memory_order_relaxed), &rings, sizeof rings);
    for (int sig = 1; sig < _NSIG; sig++) {
        unsigned n = atomic_exchange_explicit(&caught[sig], 0, memory_order_relaxed);
        if (n)
            deliver(sig, n);
    }
    struct signalfd_siginfo si[16];
    ssize_t got;
    while ((got = read(pending_fd, si, sizeof si)) > 0)
        for (size_t i = 0; i < (size_t)got / sizeof *si; i++)
            deliver((int)si[i].ssi_signo, 1);
    goro__unlock(&lock);
}

static void ring_doorbell(void)
{
    uint64_t one = 1;
    (void)!write(atomic_load_explicit(&doorbell_fd, memory_order_relaxed), &one, sizeof one);
}

/* Under lock: the two descriptors exist (made once) and base 0 of the
 * running runtime watches them. */
static int watch_locked(void)
{
    if (atomic_load_explicit(&doorbell_fd, memory_order_relaxed) < 0) {
        sigset_t none;
        sigemptyset(&none);
        int bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        int pending = bell < 0 ? -1 : signalfd(-1, &none, SFD_NONBLOCK | SFD_CLOEXEC);
        if (pending < 0) {
            int err = -errno;
            if (bell >= 0)
                close(bell);
            return err;
        }
        pending_fd = pending;
        atomic_store_explicit(&doorbell_fd, bell, memory_order_relaxed);
    }
    /* One may be watched without the other (a failed attempt): harmless,
     * the callback reads both. Deleting it again here could wait for ever
     * for its callback, which waits for our lock. */
    int err = 0;
    if (!doorbell_watched &&
        !(err = goro__netpoll_watch(&doorbell_ev, atomic_load(&doorbell_fd), signals_ready,
                                    NULL)))
        doorbell_watched = true;
    if (!err && !pending_watched &&
        !(err = goro__netpoll_watch(&pending_ev, pending_fd, signals_ready, NULL)))
        pending_watched = true;
    return err;
}

static void listen_start(int sig)
{
    atomic_store_explicit(&caught[sig], 0, memory_order_relaxed);
    goro__sigaction(sig, goro__on_signal, &before[sig]);
}

/* The disposition goes back to what it was - unless the program has put
 * another in place of ours since. */
static void listen_stop(int sig)
{
    if (handler_is_ours(sig))
        sigaction(sig, &before[sig], NULL);
}

static struct subscription *find_locked(const goro_chan_t *ch)
{
    for (int i = 0; i < nsubs; i++)
        if (subs[i].ch == ch)
            return &subs[i];
    return NULL;
}

/* Under lock: ch's subscription, a new one (empty) if it has none; NULL
 * when out of memory. */
static struct subscription *find_or_add_locked(goro_chan_t *ch)
{
    struct subscription *s = find_locked(ch);
    if (s)
        return s;
    if (nsubs == subs_cap) {
        int cap = subs_cap ? 2 * subs_cap : 4;
        struct subscription *grown = realloc(subs, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        subs = grown;
        subs_cap = cap;
    }
    s = &subs[nsubs++];
    s->ch = ch;
    sigemptyset(&s->sigs);
    return s;
}

static void remove_locked(struct subscription *s)
{
    for (int sig = 1; sig < _NSIG; sig++)
        if (sigismember(&s->sigs, sig) && --listeners[sig] == 0)
            listen_stop(sig);
    *s = subs[--nsubs];
}

/* Signals sent to the process as a whole that a program may want to wait
 * for. Not: SIGKILL, SIGSTOP (cannot be caught); SIGURG (preemption);
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT (raised by the
 * thread that faults, and the crash reporter's); SIGPIPE, SIGXFSZ (raised
 * by the thread whose write failed: goro's I/O returns -EPIPE instead);
 * SIGTTIN, SIGTTOU (job control: left to their default, which stops);
 * SIGPROF, SIGVTALRM (profilers sample whichever thread runs); SIGPWR,
 * SIGXCPU, SIGSTKFLT (garbage collectors use the first two to stop
 * threads). */
static bool notifiable(int sig)
{
    switch (sig) {
    case SIGHUP: case SIGINT: case SIGQUIT: case SIGTERM: case SIGUSR1: case SIGUSR2:
    case SIGALRM: case SIGCHLD: case SIGWINCH: case SIGTSTP: case SIGCONT: case SIGIO:
        return true;
    default:
        return sig >= SIGRTMIN && sig <= SIGRTMAX;
    }
}

static int check_args(goro_chan_t *ch, const int *sigs, int nsigs)
{
    if (!ch || !sigs || nsigs < 1 || goro__chan_elem_size(ch) != sizeof(int))
        return -EINVAL;
    for (int i = 0; i < nsigs; i++)
        if (sigs[i] < 1 || sigs[i] >= _NSIG || !notifiable(sigs[i]))
            return -EINVAL;
    return 0;
}

static int notify_locked(goro_chan_t *ch, const int *sigs, int nsigs)
{
    int err = watch_locked();
    if (err)
        return err;
    struct subscription *s = find_or_add_locked(ch);
    if (!s)
        return -ENOMEM;
    for (int i = 0; i < nsigs; i++) {
        int sig = sigs[i];
        if (sigismember(&s->sigs, sig))
            continue;
        sigaddset(&s->sigs, sig);
        if (listeners[sig]++ == 0)
            listen_start(sig);
    }
    err = update_pending_mask();
    /* A signal already pending when it joined the mask wakes no poller:
     * let the callback look now. */
    ring_doorbell();
    return err;
}

int goro_signal_notify(goro_chan_t *ch, const int *sigs, int nsigs)
{
    int err = check_args(ch, sigs, nsigs);
    if (err)
        return err;
    if (goro__forked())
        return goro__forked_error();
    /* From a thread the runtime does not own: as a spawn, through the gate,
     * so that goro_shutdown cannot free base 0 under us (-ESHUTDOWN while
     * it runs); the runtime starts if it is not running. */
    bool outside = !goro__m();
    if (outside && (err = goro__spawn_gate_enter()))
        return err;
    err = goro__ensure_started();
    if (!err) {
        goro__lock(&lock);
        err = notify_locked(ch, sigs, nsigs);
        goro__unlock(&lock);
    }
    if (outside)
        goro__spawn_gate_leave();
    return err;
}

int goro_signal_stop(goro_chan_t *ch)
{
    if (!ch)
        return -EINVAL;
    goro__lock(&lock);
    struct subscription *s = find_locked(ch);
    int err = 0;
    if (s) {
        remove_locked(s);
        err = update_pending_mask();
    }
    goro__unlock(&lock);
    return err;
}

/* The runtime has stopped (goro_shutdown, once its threads are gone): its
 * subscriptions end with it. Base 0 is gone, and its events with it
 * (event_base_free deletes them); the next notify watches afresh. */
void goro__signal_end_all(void)
{
    goro__lock(&lock);
    for (int sig = 1; sig < _NSIG; sig++)
        if (listeners[sig] > 0) {
            listeners[sig] = 0;
            listen_stop(sig);
        }
    if (pending_fd >= 0)
        update_pending_mask();
    free(subs);
    subs = NULL;
    nsubs = subs_cap = 0;
    doorbell_watched = pending_watched = false;
    goro__unlock(&lock);
}
