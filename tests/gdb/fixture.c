/*
 * The program the debugging tests look at (tests/gdb/run.sh). It starts two
 * workers and leaves coroutines parked on a channel receive, a channel
 * send, a mutex, a sleep, a socket read and a join, plus two coroutines
 * spinning, one on each worker; then it calls checkpoint(), where the
 * tests stop it.
 *
 *   fixture [live]    after the checkpoint, release everything and exit 0
 *   fixture crash     instead of the checkpoint, a spinning coroutine
 *                     writes through a NULL pointer while the other one
 *                     is held inside a signal handler (SIGUSR2), so that
 *                     the core has a coroutine interrupted by a signal
 *   fixture dump      goro_dump(stdout) at the checkpoint, then as live
 *   fixture sigquit   at the checkpoint, a spinning coroutine raises SIGQUIT
 *                     on its worker, then main sends it to the process (run
 *                     it with GORO_DUMP_ON_SIGQUIT=1); then as live
 *
 * Lines marked with a "where:" comment are what the tests expect as the
 * place each coroutine waits; they find the line numbers by that mark.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <goro.h>

#define NOINLINE __attribute__((noinline))

/* Where the tests stop the program: external, so that gdb finds them. */
void checkpoint(void);
void released(void);

/* Globals, so that the tests can print them. */
goro_chan_t *empty_chan;            /* unbuffered: a receiver waits on it */
goro_chan_t *full_chan;             /* capacity 2, full: a sender waits on it */
goro_mutex_t held_mutex = GORO_MUTEX_INIT;
goro_t *recv_handle;                /* the joiner waits for this one */
int sock[2];

static atomic_int parked_count;     /* about to park */
static atomic_int spinning_count;
static atomic_int stop_spinning;
static atomic_int crash_now;
static atomic_int quit_now;         /* 1: spin2 raises SIGQUIT, 2: it did */
static atomic_int hold_now;         /* 1: spin2 raises SIGUSR2, 2: it is held */
static atomic_int woken_count;      /* keeps the waits from being tail calls */

NOINLINE void checkpoint(void)
{
    __asm__ volatile("" ::: "memory");
}

/* Reached once every coroutine has been released and joined. */
NOINLINE void released(void)
{
    __asm__ volatile("" ::: "memory");
}

static NOINLINE void crash_here(int *volatile *where)
{
    **where = 42;                                       /* where: crash */
}

static NOINLINE long chan_receiver(goro_chan_t *ch)
{
    long v = 0;
    atomic_fetch_add(&parked_count, 1);
    goro_chan_recv(ch, &v);                             /* where: chan_recv */
    return v;
}

static NOINLINE void chan_sender(goro_chan_t *ch)
{
    long v = 3;
    atomic_fetch_add(&parked_count, 1);
    goro_chan_send(ch, &v);                             /* where: chan_send */
    atomic_fetch_add(&woken_count, 1);
}

static NOINLINE void mutex_waiter(goro_mutex_t *mu)
{
    atomic_fetch_add(&parked_count, 1);
    goro_mutex_lock(mu);                                /* where: mutex */
    atomic_fetch_add(&woken_count, 1);
    goro_mutex_unlock(mu);
}

static NOINLINE int sleeper(void)
{
    atomic_fetch_add(&parked_count, 1);
    int r = goro_sleep(3600 * GORO_SEC);                /* where: sleep */
    atomic_fetch_add(&woken_count, 1);
    return r;
}

static NOINLINE long reader(int fd)
{
    char c;
    atomic_fetch_add(&parked_count, 1);
    long r = goro_read(fd, &c, 1);                      /* where: io */
    atomic_fetch_add(&woken_count, 1);
    return r;
}

static NOINLINE long joiner(goro_t *h)
{
    long r = 0;
    atomic_fetch_add(&parked_count, 1);
    goro_join(h, &r);                                   /* where: join */
    return r;
}

/* spin2's SIGUSR2 handler: it spins here until the crash ends the process,
 * with every signal blocked, preemption's SIGURG too. (No call in the loop:
 * the first frame with a line is this one, libc's debug information or not.) */
static NOINLINE void held_by_signal(int sig)
{
    (void)sig;
    static volatile long spins;
    atomic_store(&hold_now, 2);
    for (;;) spins++;                                   /* where: held */
}

static void hold_on_signal(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = held_by_signal;
    sigfillset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
}

/* Runtime threads block the signals a program may wait for: unblock
 * SIGUSR2 on this one and send it here. */
static NOINLINE void hold_this_thread(void)
{
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
    raise(SIGUSR2);                 /* held in held_by_signal() */
}

static NOINLINE void spin_step(volatile long *n)
{
    (*n)++;                                             /* where: spin */
}

static NOINLINE void spinner(int crasher)
{
    volatile long n = 0;
    int *volatile nowhere = NULL;
    atomic_fetch_add(&spinning_count, 1);
    while (!atomic_load(&stop_spinning)) {
        spin_step(&n);
        if (crasher && atomic_load(&crash_now))
            crash_here(&nowhere);
        if (!crasher && atomic_load(&quit_now) == 1) {
            raise(SIGQUIT);         /* a signal to this worker thread */
            atomic_store(&quit_now, 2);
        }
        if (!crasher && atomic_load(&hold_now) == 1)
            hold_this_thread();
    }
}

static void wait_until(atomic_int *counter, int want, const char *what)
{
    for (int i = 0; atomic_load(counter) < want; i++) {
        if (i == 5000) {
            fprintf(stderr, "fixture: timed out waiting for %s\n", what);
            exit(3);
        }
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
}

static goro_t *spawn_named(const char *name, goro_t **h, int err)
{
    if (err) {
        fprintf(stderr, "fixture: cannot spawn %s: %s\n", name, strerror(-err));
        exit(2);
    }
    return *h;
}

#define SPAWN(label, ...) __extension__({                                   \
    goro_t *h_ = NULL;                                                        \
    goro_attr_t a_ = { .name = (label) };                                     \
    spawn_named((label), &h_, goro_go(&h_, &a_, __VA_ARGS__));                \
})

/* Undoes every wait, so that a live run ends normally: the tests check
 * that a program looked at with gdb goes on unharmed. */
static int release_all(goro_t **hs, int n, goro_t *sleeping)
{
    long v = 7;
    atomic_store(&stop_spinning, 1);
    goro_chan_send(empty_chan, &v);
    goro_chan_recv(full_chan, &v);
    goro_mutex_unlock(&held_mutex);
    if (write(sock[1], "x", 1) != 1)
        return 1;
    goro_cancel(sleeping);
    for (int i = 0; i < n; i++)
        if (goro_join(hs[i], NULL) != 0)
            return 1;
    released();
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "live";
    goro_config_t cfg = { .workers = 2 };
    long v = 1;
    if (goro_start(&cfg) != 0 || goro_chan_new(&empty_chan, sizeof(long), 0) != 0 ||
        goro_chan_new(&full_chan, sizeof(long), 2) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, sock) != 0)
        return 2;
    goro_chan_send(full_chan, &v);
    goro_chan_send(full_chan, &v);
    goro_mutex_lock(&held_mutex);

    goro_t *hs[8];
    int n = 0;
    recv_handle = SPAWN("receiver", chan_receiver, empty_chan);
    hs[n++] = SPAWN("sender", chan_sender, full_chan);
    hs[n++] = SPAWN("locker", mutex_waiter, &held_mutex);
    goro_t *sleeping = hs[n++] = SPAWN("sleeper", sleeper);
    hs[n++] = SPAWN("reader", reader, sock[0]);
    hs[n++] = SPAWN("joiner", joiner, recv_handle);
    wait_until(&parked_count, 6, "coroutines to park");
    /* They have announced themselves; give them time to get parked. */
    struct timespec settle = { 0, 200 * 1000 * 1000 };
    nanosleep(&settle, NULL);
    hs[n++] = SPAWN("spin1", spinner, 1);
    hs[n++] = SPAWN("spin2", spinner, 0);
    wait_until(&spinning_count, 2, "two spinners");

    if (strcmp(mode, "crash") == 0) {
        hold_on_signal();
        atomic_store(&hold_now, 1);
        wait_until(&hold_now, 2, "spin2 held in its signal handler");
        atomic_store(&crash_now, 1);
        goro_join(hs[n - 2], NULL);
        return 4;                   /* not reached: the crash ends the process */
    }
    if (strcmp(mode, "dump") == 0)
        goro_dump(stdout);
    if (strcmp(mode, "sigquit") == 0) {
        atomic_store(&quit_now, 1);
        wait_until(&quit_now, 2, "the coroutine's SIGQUIT");
        kill(getpid(), SIGQUIT);
    }
    checkpoint();
    if (release_all(hs, n, sleeping) != 0)
        return 1;
    goro_chan_free(empty_chan);
    goro_chan_free(full_chan);
    if (goro_shutdown() != 0)
        return 1;
    printf("fixture: done\n");
    return 0;
}
