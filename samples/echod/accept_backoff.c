/* What the acceptor does when accept fails: goro_accept_backoff rides it
 * out; this says so on stderr, once, and counts the refusals.
 *
 * At the descriptor limit (EMFILE, ENFILE) the pending connection stays in
 * the listen queue and the listener stays readable, so retrying at once
 * would spin. Instead the acceptor sleeps, 1 ms doubling to 100 ms: a
 * connection that ends frees a descriptor, and the next attempt takes it.
 * Connections already open are served all along. Only the acceptor
 * coroutine calls these, so the "said" flags need no lock. */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "echod.h"

#define BACKOFF_MAX (100 * GORO_MSEC)

static _Atomic unsigned long limit_hits;

unsigned long fd_limit_hits(void)
{
    return atomic_load_explicit(&limit_hits, memory_order_relaxed);
}

/* Called while the acceptor holds the slot of the connection it waits
 * for: conns_reserved() is one more than the connections open. */
static void say_once(int err)
{
    static bool said;
    if (said)
        return;
    said = true;
    fprintf(stderr, "echod: accept: %s with %ld connections open; serving them and "
            "accepting again as they close (retries back off to %d ms; the status "
            "line counts refusals as fd_limit_hits)\n",
            strerror(-err), conns_reserved() - 1, (int)(BACKOFF_MAX / GORO_MSEC));
}

static void say_unexpected_once(int err)
{
    static bool said;
    if (!said) {
        said = true;
        fprintf(stderr, "echod: accept: %s; retrying with backoff\n", strerror(-err));
    }
}

static void on_error(int err, void *arg)
{
    (void)arg;
    switch (err) {
    case -EMFILE:
    case -ENFILE:
        atomic_fetch_add_explicit(&limit_hits, 1, memory_order_relaxed);
        say_once(err);
        break;
    case -ENOBUFS:
    case -ENOMEM:              /* kernel memory: backed off too */
        say_unexpected_once(err);
        break;
    default:                   /* one connection that died in the queue */
        break;
    }
}

const goro_accept_opts_t accept_opts = { .max = BACKOFF_MAX, .on_error = on_error };
