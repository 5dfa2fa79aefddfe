/*
 * Tickers: a channel that receives the time every period, on the
 * scheduler's timers (sched/timer.c).
 *
 * A ticker is one FUNC timer and a channel of capacity one. The timer
 * fires at start + k * period for k = 1, 2, ... (drift-free: the schedule
 * never slides by the lateness of a tick) and offers that scheduled time
 * to the channel without waiting; a tick that finds the previous one
 * still unread is dropped, and ticks missed while the runtime was busy are
 * skipped, like Go's time.Ticker - a slow reader sees fewer ticks, never a
 * burst of stale ones.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "wait/waitq.h"
#include "sched/sched.h"
#include "runtime.h"

struct goro_ticker {
    struct goro_timer timer;       /* first: fire gets the ticker from it */
    goro_chan_t *ch;
    int64_t period;
    _Atomic uint64_t dropped;      /* ticks not delivered (reader behind) */
};

/* A ticker's or a one-shot timer's two parts: the channel of int64_t
 * times it delivers on (capacity one), and its timer, off, calling fire. */
static int chan_timer_init(struct goro_timer *timer, goro_chan_t **ch,
                           int64_t (*fire)(struct goro_timer *, int64_t))
{
    int err = goro_chan_new(ch, sizeof(int64_t), 1);
    if (err)
        return err;
    timer->kind = GORO_TIMER_FUNC;
    timer->fire = fire;
    atomic_init(&timer->idx, GORO_TIMER_OFF);
    return 0;
}

/* On a runtime thread's g0 or sysmon, without the heap's lock. */
static int64_t tick_fire(struct goro_timer *timer, int64_t now)
{
    struct goro_ticker *t = (struct goro_ticker *)timer;
    /* Fired more than a period late (a busy or slowed machine): the tick
     * offered is the latest time on the schedule, not a stale one, and
     * the ones passed over count as dropped. */
    int64_t missed = now > timer->when ? (now - timer->when) / t->period : 0;
    int64_t tick = timer->when + missed * t->period;
    /* ticker: the tick offered is the latest time on the schedule, never
     * a stale one, and the next one is ahead */
    GORO_ASSERT(now <= timer->when || (tick <= now && now - tick < t->period));
    if (goro_chan_try_send(t->ch, &tick) != 0)
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->dropped, (uint64_t)missed, memory_order_relaxed);
    return tick + t->period;        /* the next time on the schedule, ahead */
}

/* On the heap of the caller's P, if it has one. */
static void ticker_start(struct goro_ticker *t)
{
    goro__timer_start(&t->timer, goro__current_p(), goro__now() + t->period);
}

int goro_ticker_new(goro_ticker_t **out, int64_t period)
{
    if (!out || period <= 0)
        return -EINVAL;
    int err = goro__ensure_started();
    if (err)
        return err;
    struct goro_ticker *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    if ((err = chan_timer_init(&t->timer, &t->ch, tick_fire))) {
        free(t);
        return err;
    }
    t->period = period;
    ticker_start(t);
    *out = t;
    return 0;
}

goro_chan_t *goro_ticker_chan(goro_ticker_t *t)
{
    return t ? t->ch : NULL;
}

int goro_ticker_wait(goro_ticker_t *t, int64_t *tick)
{
    return goro_ticker_wait_until(t, tick, GORO_FOREVER);
}

int goro_ticker_wait_until(goro_ticker_t *t, int64_t *tick, int64_t deadline)
{
    if (!t)
        return -EINVAL;
    int64_t when;
    int got = goro_chan_recv_until(t->ch, &when, deadline);
    if (got < 0)
        return got;
    if (tick)
        *tick = when;
    return 0;
}

int goro_ticker_reset(goro_ticker_t *t, int64_t period)
{
    if (!t || period <= 0)
        return -EINVAL;
    int err = goro__ensure_started();   /* after goro_shutdown, as go() would */
    if (err)
        return err;
    goro__timer_stop(&t->timer);    /* no fire runs from here on */
    t->period = period;
    ticker_start(t);
    return 0;
}

uint64_t goro_ticker_dropped(const goro_ticker_t *t)
{
    return t ? atomic_load_explicit(&t->dropped, memory_order_relaxed) : 0;
}

int goro_ticker_free(goro_ticker_t *t)
{
    if (!t)
        return -EINVAL;
    goro__timer_stop(&t->timer);
    int err = goro_chan_free(t->ch);
    if (err) {
        /* A coroutine waits on it: leave it ticking, as it was. */
        if (t->timer.p)
            ticker_start(t);
        return err;
    }
    free(t);
    return 0;
}

/* ---- one-shot timers ----
 *
 * One FUNC timer and a channel of capacity one. state moves PENDING ->
 * FIRED (the fire, which then offers the time: the channel is empty, as
 * stop and reset drain it) or PENDING -> STOPPED (stop, reset, after
 * goro__timer_stop, which waits out a fire in progress: so a stop that
 * finds PENDING did prevent it). Reset moves it back to PENDING with the
 * timer off and the channel drained. Stop, reset and free are the owner's,
 * one at a time. */

enum { T_PENDING, T_FIRED, T_STOPPED };

struct goro_oneshot {
    struct goro_timer timer;       /* first: fire gets the record from it */
    goro_chan_t *ch;
    _Atomic int state;
};

static int64_t oneshot_fire(struct goro_timer *timer, int64_t now)
{
    struct goro_oneshot *t = (struct goro_oneshot *)timer;
    int pending = T_PENDING;
    if (atomic_compare_exchange_strong(&t->state, &pending, T_FIRED)) {
        int r = goro_chan_try_send(t->ch, &now);
        /* timer: one value per start, into a drained channel */
        GORO_ASSERT(r == 0);
        (void)r;
    }
    return -1;
}

static void oneshot_start(struct goro_oneshot *t, int64_t ns)
{
    atomic_store(&t->state, T_PENDING);
    goro__timer_start(&t->timer, goro__current_p(), goro__now() + (ns > 0 ? ns : 0));
}

int goro_timer_new(goro_timer_t **out, int64_t ns)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    int err = goro__ensure_started();
    if (err)
        return err;
    struct goro_oneshot *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    if ((err = chan_timer_init(&t->timer, &t->ch, oneshot_fire))) {
        free(t);
        return err;
    }
    oneshot_start(t, ns);
    *out = t;
    return 0;
}

goro_chan_t *goro_timer_chan(goro_timer_t *t)
{
    return t ? t->ch : NULL;
}

/* Stops t for good or until a reset: 1 if it was pending. */
static int oneshot_stop(struct goro_oneshot *t)
{
    goro__timer_stop(&t->timer);    /* no fire runs from here on */
    int pending = T_PENDING;
    int prevented = atomic_compare_exchange_strong(&t->state, &pending, T_STOPPED);
    int64_t stale;
    (void)goro_chan_try_recv(t->ch, &stale);   /* Go 1.23: no stale value */
    return prevented;
}

int goro_timer_stop(goro_timer_t *t)
{
    return t ? oneshot_stop(t) : -EINVAL;
}

int goro_timer_reset(goro_timer_t *t, int64_t ns)
{
    if (!t)
        return -EINVAL;
    int err = goro__ensure_started();
    if (err)
        return err;
    int was = oneshot_stop(t);
    oneshot_start(t, ns);
    return was;
}

int goro_timer_free(goro_timer_t *t)
{
    if (!t)
        return -EINVAL;
    goro__timer_stop(&t->timer);
    int err = goro_chan_free(t->ch);
    if (err) {
        /* A coroutine waits on it: leave it as it was. */
        if (atomic_load(&t->state) == T_PENDING)
            goro__timer_start(&t->timer, goro__current_p(), t->timer.when);
        return err;
    }
    free(t);
    return 0;
}
