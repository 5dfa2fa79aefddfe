/*
 * Time: the clock of every deadline, sleeping, and the deadline timers of
 * parked coroutines. A timer is a libevent event in the event base of the
 * worker the coroutine parked on, stored in the parking frame (no
 * allocation); its callback claims the wait (enum goro_wake) and makes the
 * coroutine runnable. Whoever resumes the coroutine deletes the timer
 * before the frame goes away, from whichever worker that is: bases are
 * created with libevent's locking, and event_del waits for a callback
 * that is running at that moment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "internal.h"

int64_t goro_now(void)
{
    return goro__now();
}

static void timer_fired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct goro *g = arg;
    if (goro__claim(g, GORO_WAKE_TIMEDOUT))
        goro__ready_polled(g);
}

/* libevent measures timeouts on its own monotonic clock, relative to when
 * the event is added: convert once, here. */
void goro__timer_arm(struct event *ev, struct goro_p *p, struct goro *g, int64_t deadline)
{
    int64_t left = deadline - goro__now();
    if (left < 0)
        left = 0;
    /* Whole microseconds, rounded up, plus one: libevent adds this to its
     * own clock read truncated to the microsecond. Never early. */
    left += 2 * GORO_USEC - 1;
    struct timeval tv = { (time_t)(left / GORO_SEC), (suseconds_t)(left % GORO_SEC / 1000) };
    /* p is NULL when the coroutine parks on an M that lost its P: any
     * base serves (whoever polls it makes g runnable). */
    struct event_base *base = p ? p->base : goro__sched.procs[0].base;
    event_assign(ev, base, -1, 0, timer_fired, g);
    atomic_store_explicit(&goro__io_used, 1, memory_order_relaxed);
    event_add(ev, &tv);
}

void goro__timer_disarm(struct event *ev)
{
    event_del(ev);
}

int goro_sleep_until(int64_t deadline)
{
    struct goro *self = goro__current();
    if (!self) {
        /* A thread of its own: sleep it, restarting after signals. */
        if (deadline < 0)
            deadline = INT64_MAX;
        struct timespec ts = { (time_t)(deadline / GORO_SEC), (long)(deadline % GORO_SEC) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        return 0;
    }
    int err = goro__wait_check(deadline < 0 ? GORO_FOREVER : deadline);
    if (err)
        return goro__wait_refused(err == -ETIMEDOUT ? 0 : err);
    struct goro_park how = { .why = GORO_W_SLEEP, .deadline = deadline };
    int outcome = goro__park(&how);
    return outcome == GORO_WAKE_CANCELED ? -ECANCELED : 0;
}

int goro_sleep(int64_t ns)
{
    if (ns < 0)
        ns = 0;
    return goro_sleep_until(goro__now() + ns);
}
