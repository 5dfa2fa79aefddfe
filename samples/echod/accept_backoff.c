/* What the acceptor does when accept fails.
 *
 * At the descriptor limit (EMFILE, ENFILE) the pending connection stays in
 * the listen queue and the listener stays readable, so retrying at once
 * would spin. Instead the acceptor sleeps, 1 ms doubling to 100 ms: a
 * connection that ends frees a descriptor, and the next attempt takes it.
 * Connections already open are served all along. Only the acceptor
 * coroutine calls these, so the backoff state needs no lock. */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "echod.h"

#define BACKOFF_FIRST (1 * GORO_MSEC)
#define BACKOFF_MAX (100 * GORO_MSEC)

static int64_t backoff = BACKOFF_FIRST;
static _Atomic unsigned long limit_hits;

unsigned long fd_limit_hits(void)
{
    return atomic_load_explicit(&limit_hits, memory_order_relaxed);
}

/* Called with no slot held by the acceptor: conns_reserved() is exactly
 * the connections open. */
static void say_once(int err)
{
    static bool said;
    if (said)
        return;
    said = true;
    fprintf(stderr, "echod: accept: %s with %ld connections open; serving them and "
            "accepting again as they close (retries back off to %d ms; the status "
            "line counts refusals as fd_limit_hits)\n",
            strerror(-err), conns_reserved(), (int)(BACKOFF_MAX / GORO_MSEC));
}

static void say_unexpected_once(int err)
{
    static bool said;
    if (!said) {
        said = true;
        fprintf(stderr, "echod: accept: %s; retrying with backoff\n", strerror(-err));
    }
}

static int back_off(void)
{
    int err = goro_sleep(backoff);
    backoff = backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
    return err;
}

int accept_failed(int err)
{
    switch (err) {
    case -ECANCELED:          /* shutdown */
    case -EBADF:              /* the listener was closed */
        return err;
    case -EMFILE:
    case -ENFILE:
        atomic_fetch_add_explicit(&limit_hits, 1, memory_order_relaxed);
        say_once(err);
        return back_off();
    /* The connection died in the queue, or a network error about that one
     * connection (accept(2) says to retry at once). */
    case -ECONNABORTED: case -EPROTO: case -ENETDOWN: case -ENOPROTOOPT:
    case -EHOSTDOWN: case -ENONET: case -EHOSTUNREACH: case -EOPNOTSUPP:
    case -ENETUNREACH: case -EPERM:
        return 0;
    default:                  /* ENOBUFS, ENOMEM, ...: kernel memory */
        say_unexpected_once(err);
        return back_off();
    }
}

void accept_succeeded(void)
{
    backoff = BACKOFF_FIRST;
    stats_accepted();
}
