/* Signals and shutdown.
 *
 * SIGINT, SIGTERM and SIGUSR1 arrive as numbers on a channel
 * (goro_signal_notify), read by an ordinary coroutine: no echod code runs
 * in a signal handler. The first SIGINT/SIGTERM wakes the supervisor,
 * which stops accepting and drains; a second one cancels every connection
 * at once. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "echod.h"

/* Printing and draining need more stack than an echo loop. */
static const goro_attr_t service_attr = { .name = "echod-service", .stack_size = 64 * 1024 };

static goro_chan_t *stop_requests;   /* capacity 1 */
static goro_chan_t *signals;         /* signal numbers (int) */

static const int wanted[] = { SIGINT, SIGTERM, SIGUSR1 };

void signals_block(void)
{
    /* Blocked in main before the runtime starts, so in every thread (the
     * runtime's inherit main's mask): the runtime then reads them from its
     * signalfd, and no handler interrupts a thread. Not needed otherwise,
     * but it keeps them working under ThreadSanitizer, which holds a
     * handler back while its thread sleeps in a system call TSan does not
     * intercept. echod starts no child process, which would inherit it. */
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++)
        sigaddset(&set, wanted[i]);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void signals_subscribe(void)
{
    /* Room for a few: a signal that finds the channel full is dropped. */
    int err = goro_chan_new(&signals, sizeof(int), 4);
    if (err == 0)
        err = goro_signal_notify(signals, wanted, sizeof wanted / sizeof *wanted);
    if (err < 0) {
        fprintf(stderr, "echod: cannot subscribe to signals: %s\n", strerror(-err));
        exit(1);
    }
}

static void signal_loop(void)
{
    int sig;
    int stops = 0;

    while (goro_chan_recv(signals, &sig) > 0) {    /* until cancelled */
        if (sig == SIGUSR1) {
            status_request();
        } else if (stops++ == 0) {
            goro_chan_try_send(stop_requests, NULL);
        } else {
            fputs("echod: second stop signal: closing every connection now\n", stderr);
            conns_cancel_now();
        }
    }
}

struct stop_plan {
    goro_t *acceptor, *status, *signals;
    int listener;
    int64_t grace;
};

static void stop_service(goro_t *h)
{
    goro_cancel(h);
    goro_join(h, NULL);
    stats_coroutine(-1);
}

static void supervise(const struct stop_plan *plan)
{
    goro_chan_recv(stop_requests, NULL);
    fprintf(stderr, "echod: stopping: no new connections; %ld open get %.1f s to finish\n",
            conns_live(), (double)plan->grace / GORO_SEC);
    stop_service(plan->acceptor);
    goro_close(plan->listener);
    conns_drain(goro_now() + plan->grace);
    stop_service(plan->status);
    stop_service(plan->signals);
    goro_signal_stop(signals);            /* nothing more is sent to the channel */
    goro_chan_free(signals);
}

/* goro_go() with the service stack; exits when even that is impossible. */
static goro_t *started(const char *what, int err, goro_t *h)
{
    if (err < 0) {
        fprintf(stderr, "echod: cannot start the %s: %s\n", what, strerror(-err));
        exit(1);
    }
    stats_coroutine(+1);
    return h;
}

int run_until_stopped(goro_t *acceptor, int listener, const struct echod_options *opt)
{
    struct stop_plan plan = { .acceptor = acceptor, .listener = listener, .grace = opt->grace };
    goro_t *h;
    int err;

    stats_coroutine(+1);                  /* the acceptor, started by main */
    status_init();
    if (goro_chan_new(&stop_requests, 0, 1) < 0)
        return 1;
    err = goro_go(&h, &service_attr, status_loop, opt->status_interval);
    plan.status = started("status line", err, h);
    err = goro_go(&h, &service_attr, signal_loop);
    plan.signals = started("signal reader", err, h);
    err = goro_go(&h, &service_attr, supervise, &plan);
    started("supervisor", err, h);

    goro_join(h, NULL);                   /* returns once every connection is closed */
    fputs("echod: stopped\n", stderr);
    return goro_shutdown() == 0 ? 0 : 1;
}
