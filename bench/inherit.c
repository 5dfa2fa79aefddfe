/* inherit.c - a wait inside a deadline in force against the same wait
 * given an explicit deadline.
 *
 * Measures: ns per one-way hand-off over an unbuffered channel between
 * two coroutines on one worker, as chan_pingpong, each side waiting with
 * a deadline far away (so every park arms a timer and stops it): in the
 * explicit form each call is goro_chan_*_until(..., deadline); in the
 * inherited form each coroutine pushed the deadline once
 * (goro_deadline_push) and calls goro_chan_send/recv. Both forms run in
 * the same process, alternating, best (minimum) of 5 each, so the ratio
 * is of one run.
 *
 * Output: name=deadline_inherited_handoff, name=deadline_explicit_handoff
 * (ns); bench/run.sh prints their ratio (deadline_inherited_vs_explicit,
 * target <= 1.05).
 */
#include "bench.h"

#include <goro.h>

#define ROUND_TRIPS 200000L
#define REPS 5

static goro_chan_t *ping, *pong;
static int64_t far;

static void echo_explicit(void)
{
    long v;
    while (goro_chan_recv_until(ping, &v, far) > 0) {
        v++;
        BENCH_CHECK(goro_chan_send_until(pong, &v, far));
    }
}

static void echo_inherited(void)
{
    long v;
    goro_deadline_push(far);
    while (goro_chan_recv(ping, &v) > 0) {
        v++;
        BENCH_CHECK(goro_chan_send(pong, &v));
    }
}

static double run(long n, bool inherited)
{
    BENCH_CHECK(goro_chan_new(&ping, sizeof(long), 0));
    BENCH_CHECK(goro_chan_new(&pong, sizeof(long), 0));
    goro_t *b;
    BENCH_CHECK(goro_go(&b, NULL, inherited ? echo_inherited : echo_explicit));
    goro_yield();
    int64_t prev = inherited ? goro_deadline_push(far) : GORO_FOREVER;
    long v = 0;
    double t0 = bench_now_ns();
    if (inherited) {
        for (long i = 0; i < n; i++) {
            BENCH_CHECK(goro_chan_send(ping, &v));
            if (goro_chan_recv(pong, &v) != 1)
                bench_die("closed early");
        }
    } else {
        for (long i = 0; i < n; i++) {
            BENCH_CHECK(goro_chan_send_until(ping, &v, far));
            if (goro_chan_recv_until(pong, &v, far) != 1)
                bench_die("closed early");
        }
    }
    double t = (bench_now_ns() - t0) / (2.0 * n);
    if (inherited)
        goro_deadline_pop(prev);
    if (v != n)
        bench_die("lost values");
    BENCH_CHECK(goro_chan_close(ping));
    BENCH_CHECK(goro_join(b, NULL));
    BENCH_CHECK(goro_chan_free(ping));
    BENCH_CHECK(goro_chan_free(pong));
    return t;
}

static void driver(double *best)
{
    far = goro_now() + 3600 * GORO_SEC;
    run(1000, true);               /* warm-up */
    run(1000, false);
    best[0] = best[1] = 1e300;
    for (int r = 0; r < REPS; r++) {
        /* each form goes first in every other repetition */
        double i, e;
        if (r % 2) {
            e = run(ROUND_TRIPS, false);
            i = run(ROUND_TRIPS, true);
        } else {
            i = run(ROUND_TRIPS, true);
            e = run(ROUND_TRIPS, false);
        }
        if (i < best[0])
            best[0] = i;
        if (e < best[1])
            best[1] = e;
    }
}

int main(void)
{
    double best[2];
    goro_t *d;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 1 }));
    BENCH_CHECK(goro_go(&d, NULL, driver, best));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_report("deadline_inherited_handoff", best[0], "ns");
    bench_report("deadline_explicit_handoff", best[1], "ns");
    return 0;
}
