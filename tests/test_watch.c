/* Watching a scope, one-shot timers and coroutine-locals
 * (docs/structured.md): done channels of coroutines and groups,
 * after-functions and their stop, goro_timer_t, goro_key_t.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "suites.h"

/* ---- done channels ---- */

/* Selects on its own done channel and a channel nobody sends on. The
 * cancel closes done before it ends the coroutine's wait: the select
 * returns the done case (1), as in Go; later waits end with -ECANCELED. */
static long watch_own_done(goro_chan_t *never)
{
    goro_chan_t *done = goro_done(NULL);
    if (!done || done != goro_done(NULL))
        return -100;
    if (goro_chan_try_recv(done, NULL) != -EAGAIN)
        return -101;                /* open before the cancel */
    goro_case_t cs[] = { { .ch = never, .op = GORO_RECV },
                         { .ch = done, .op = GORO_RECV } };
    int r = goro_select(cs, 2, 0);
    if (r == 1 && cs[1].result != 0)
        return -103;                /* not closed */
    return r == 1 && goro_sleep(GORO_SEC) == -ECANCELED ? 1 : r;
}

START_TEST(done_closes_when_a_coroutine_is_cancelled)
{
    goro_chan_t *never = t_chan_new(0, 0);
    goro_t *h = go(watch_own_done, never);
    t_settle();
    goro_chan_t *done = goro_done(h);
    ck_assert_ptr_nonnull(done);
    ck_assert_int_eq(goro_chan_try_recv(done, NULL), -EAGAIN);
    ck_assert_int_eq(goro_cancel(h), 0);
    /* A thread's select sees it closed: done is valid while h is. */
    goro_case_t c = { .ch = done, .op = GORO_RECV };
    ck_assert_int_eq(goro_select_until(&c, 1, 0, goro_now() + 10 * GORO_SEC), 0);
    ck_assert_int_eq(c.result, 0);              /* closed */
    long r;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 1);
    ck_assert_ptr_null(goro_done(NULL));    /* a thread is no scope */
    goro_chan_free(never);
}
END_TEST

static long returns_at_once(void) { return 7; }

/* Ending is not being cancelled: the done channel of a coroutine that
 * returned stays open, until its handle goes. */
START_TEST(done_stays_open_when_a_coroutine_ends)
{
    goro_t *h = go(returns_at_once);
    goro_chan_t *done = goro_done(h);
    ck_assert_ptr_nonnull(done);
    t_settle();
    ck_assert_int_eq(goro_chan_try_recv(done, NULL), -EAGAIN);
    ck_assert_int_eq(goro_join(h, NULL), 0);
}
END_TEST

static long parks(goro_chan_t *never)
{
    goro_chan_recv(never, NULL);
    return 0;
}

static long fails_soon(void)
{
    goro_sleep(GORO_MSEC);
    return -EIO;
}

/* A group's done channel closes on its first failure, and on its
 * deadline (fired by a timer, on the scheduler's context). */
START_TEST(done_closes_when_a_group_is_cancelled)
{
    goro_chan_t *never = t_chan_new(0, 0);
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    goro_chan_t *done = goro_group_done(g);
    ck_assert_ptr_nonnull(done);
    ck_assert_ptr_eq(goro_group_done(g), done);
    ck_assert_int_eq(goro_group_go(g, parks, never), 0);
    ck_assert_int_eq(goro_group_go(g, fails_soon), 0);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), -EIO);
    ck_assert_int_eq(goro_chan_try_recv(done, NULL), 0);    /* closed */
    ck_assert_int_eq(goro_group_free(g), 0);

    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){
                         .deadline = goro_now() + 5 * GORO_MSEC }), 0);
    ck_assert_int_eq(goro_group_go(g, parks, never), 0);
    goro_case_t c = { .ch = goro_group_done(g), .op = GORO_RECV };
    ck_assert_int_eq(goro_select_until(&c, 1, 0, goro_now() + 10 * GORO_SEC), 0);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), -ETIMEDOUT);
    ck_assert_int_eq(goro_group_free(g), 0);

    /* Waited for without a cancel: it stays open. */
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_group_go(g, returns_at_once), 0);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), 0);
    ck_assert_int_eq(goro_chan_try_recv(goro_group_done(g), NULL), -EAGAIN);
    ck_assert_int_eq(goro_group_free(g), 0);
    ck_assert_ptr_null(goro_group_done(NULL));
    goro_chan_free(never);
}
END_TEST

/* ---- after-functions ---- */

static atomic_int calls;
static goro_chan_t *called;        /* capacity 64: one value per call */

static void count_call(void *arg)
{
    atomic_fetch_add(&calls, 1);
    long v = (long)(intptr_t)arg;
    if (goro_self() == NULL)
        t_fail("after-function: not in a coroutine");
    goro_chan_send(called, &v);
}

static void calls_reset(void)
{
    atomic_store(&calls, 0);
    called = t_chan_new(sizeof(long), 64);
}


START_TEST(after_cancel_runs_once_and_stop_says_whether_it_prevented)
{
    calls_reset();
    goro_chan_t *never = t_chan_new(0, 0);
    goro_t *h = go(parks, never);
    goro_after_t *s1, *s2;
    ck_assert_int_eq(goro_after_cancel(h, count_call, (void *)1, &s1), 0);
    ck_assert_int_eq(goro_after_cancel(h, count_call, (void *)2, &s2), 0);
    ck_assert_int_eq(goro_after_cancel(h, count_call, (void *)3, NULL), 0);   /* no handle */
    ck_assert_int_eq(goro_after_stop(s2), 1);      /* prevented */
    t_settle();
    ck_assert_int_eq(atomic_load(&calls), 0);
    ck_assert_int_eq(goro_cancel(h), 0);
    long v, seen = 0;
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(goro_chan_recv_until(called, &v, goro_now() + 10 * GORO_SEC), 1);
        seen |= 1L << v;
    }
    ck_assert_int_eq(seen, (1 << 1) | (1 << 3));
    ck_assert_int_eq(goro_after_stop(s1), 0);      /* it ran */
    /* Registered on a cancelled scope: runs at once. */
    ck_assert_int_eq(goro_after_cancel(h, count_call, (void *)4, &s1), 0);
    ck_assert_int_eq(goro_chan_recv_until(called, &v, goro_now() + 10 * GORO_SEC), 1);
    ck_assert_int_eq(v, 4);
    ck_assert_int_eq(goro_after_stop(s1), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    t_settle();
    ck_assert_int_eq(atomic_load(&calls), 3);
    ck_assert_int_eq(goro_after_cancel(NULL, count_call, NULL, &s1), -EINVAL);   /* a thread */
    ck_assert_ptr_null(s1);
    goro_chan_free(never);
    goro_chan_free(called);
}
END_TEST

/* A scope that ends uncancelled never calls: stop then says it was
 * prevented, and the after-function's coroutine is gone (the shutdown in
 * the fixture's teardown would wait for it otherwise). */
START_TEST(after_cancel_never_runs_once_the_scope_is_over)
{
    calls_reset();
    goro_t *h = go(fails_soon);
    goro_after_t *s;
    ck_assert_int_eq(goro_after_cancel(h, count_call, (void *)1, &s), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    goro_group_t *g;
    goro_after_t *gs, *gs2;
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_group_after_cancel(g, count_call, (void *)2, &gs), 0);
    ck_assert_int_eq(goro_group_go(g, returns_at_once), 0);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), 0);
    ck_assert_int_eq(goro_group_after_cancel(g, count_call, (void *)3, &gs2), 0);
    ck_assert_int_eq(goro_group_cancel(g), 0);      /* after its wait: over */
    t_settle();
    ck_assert_int_eq(goro_group_free(g), 0);
    ck_assert_int_eq(atomic_load(&calls), 0);
    ck_assert_int_eq(goro_after_stop(s), 1);
    ck_assert_int_eq(goro_after_stop(gs), 1);
    ck_assert_int_eq(goro_after_stop(gs2), 1);
    ck_assert_int_eq(goro_after_stop(NULL), -EINVAL);
    ck_assert_int_eq(goro_group_after_cancel(NULL, count_call, NULL, NULL), -EINVAL);
    goro_chan_free(called);
}
END_TEST

/* A cancel from above reaches the after-functions of a group two levels
 * down: top coroutine -> its group -> a member -> the member's group. */
static long nested_member(goro_chan_t *never)
{
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return -ENOMEM;
    goro_group_after_cancel(g, count_call, (void *)9, NULL);
    goro_group_go(g, parks, never);
    goro_group_wait(g, NULL, NULL);
    goro_group_free(g);
    return 0;
}

static long nested_top(goro_chan_t *never)
{
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return -ENOMEM;
    goro_group_go(g, nested_member, never);
    goro_group_wait(g, NULL, NULL);
    goro_group_free(g);
    return 0;
}

START_TEST(after_cancel_reached_from_above)
{
    calls_reset();
    goro_chan_t *never = t_chan_new(0, 0);
    goro_t *h = go(nested_top, never);
    t_settle();
    ck_assert_int_eq(goro_cancel(h), 0);
    long v;
    ck_assert_int_eq(goro_chan_recv_until(called, &v, goro_now() + 10 * GORO_SEC), 1);
    ck_assert_int_eq(v, 9);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    goro_chan_free(never);
    goro_chan_free(called);
}
END_TEST

/* Stop races the cancel: for every function, exactly one of "stop
 * prevented it" and "it ran". */
static atomic_int ran[64];

static void mark(void *arg)
{
    atomic_fetch_add(&ran[(intptr_t)arg], 1);
}

static long stop_all(goro_after_t **stops, int n, atomic_int *prevented)
{
    for (int i = 0; i < n; i++)
        prevented[i] = goro_after_stop(stops[i]);
    return 0;
}

START_TEST(after_stop_races_the_cancel)
{
    long rounds = t_scale(200);
    for (long r = 0; r < rounds; r++) {
        goro_chan_t *never = t_chan_new(0, 0);
        goro_t *h = go(parks, never);
        goro_after_t *stops[64];
        atomic_int prevented[64];
        for (int i = 0; i < 64; i++) {
            atomic_store(&ran[i], 0);
            ck_assert_int_eq(goro_after_cancel(h, mark, (void *)(intptr_t)i, &stops[i]), 0);
        }
        goro_t *st = go(stop_all, stops, 64, prevented);
        ck_assert_int_eq(goro_cancel(h), 0);
        ck_assert_int_eq(goro_join(st, NULL), 0);
        ck_assert_int_eq(goro_join(h, NULL), 0);
        for (int i = 0; i < 64; i++) {
            double end = t_now() + t_timeout(10);
            while (!atomic_load(&prevented[i]) && !atomic_load(&ran[i]) && t_now() < end)
                t_nap(0.0005);
            ck_assert_msg(atomic_load(&prevented[i]) + atomic_load(&ran[i]) == 1,
                          "round %ld fn %d: prevented %d ran %d", r, i,
                          atomic_load(&prevented[i]), atomic_load(&ran[i]));
        }
        goro_chan_free(never);
    }
}
END_TEST

/* ---- one-shot timers ---- */

START_TEST(timer_fires_once_with_its_time)
{
    goro_timer_t *t;
    int64_t start = goro_now();
    ck_assert_int_eq(goro_timer_new(&t, 5 * GORO_MSEC), 0);
    int64_t when = 0;
    ck_assert_int_eq(goro_chan_recv_until(goro_timer_chan(t), &when,
                                          goro_now() + 10 * GORO_SEC), 1);
    ck_assert(when >= start + 5 * GORO_MSEC);
    ck_assert_int_eq(goro_timer_stop(t), 0);        /* fired already */
    /* Reset after the fire: fires again. */
    ck_assert_int_eq(goro_timer_reset(t, 0), 0);
    ck_assert_int_eq(goro_chan_recv_until(goro_timer_chan(t), &when,
                                          goro_now() + 10 * GORO_SEC), 1);
    ck_assert_int_eq(goro_chan_try_recv(goro_timer_chan(t), &when), -EAGAIN);   /* once */
    ck_assert_int_eq(goro_timer_free(t), 0);
}
END_TEST

START_TEST(timer_stop_and_reset_leave_no_stale_value)
{
    goro_timer_t *t;
    int64_t when;
    ck_assert_int_eq(goro_timer_new(&t, 3600 * GORO_SEC), 0);
    ck_assert_int_eq(goro_timer_stop(t), 1);        /* prevented */
    ck_assert_int_eq(goro_timer_stop(t), 0);
    ck_assert_int_eq(goro_timer_reset(t, 3600 * GORO_SEC), 0);   /* was stopped */
    ck_assert_int_eq(goro_timer_reset(t, 0), 1);    /* was pending */
    /* Fired and unread: stop drops the value. */
    double end = t_now() + t_timeout(10);
    while (goro_timer_stop(t) == 1 && t_now() < end) {
        goro_timer_reset(t, 0);
        t_nap(0.001);
    }
    ck_assert_int_eq(goro_chan_try_recv(goro_timer_chan(t), &when), -EAGAIN);
    /* Freed fired and unread, or pending: both fine. */
    ck_assert_int_eq(goro_timer_reset(t, 0), 0);
    t_nap(0.005);
    ck_assert_int_eq(goro_timer_free(t), 0);
    ck_assert_int_eq(goro_timer_new(&t, 3600 * GORO_SEC), 0);
    ck_assert_int_eq(goro_timer_free(t), 0);
    ck_assert_int_eq(goro_timer_new(NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_timer_stop(NULL), -EINVAL);
    ck_assert_int_eq(goro_timer_reset(NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_timer_free(NULL), -EINVAL);
    ck_assert_ptr_null(goro_timer_chan(NULL));
}
END_TEST

static long recv_timer(goro_timer_t *t)
{
    int64_t when;
    return goro_chan_recv(goro_timer_chan(t), &when);
}

/* Freeing with a coroutine waiting on the channel is refused, and the
 * timer still fires for that coroutine. */
START_TEST(timer_free_with_a_waiter_is_busy)
{
    goro_timer_t *t;
    ck_assert_int_eq(goro_timer_new(&t, 3600 * GORO_SEC), 0);
    goro_t *h = go(recv_timer, t);
    t_settle();
    ck_assert_int_eq(goro_timer_free(t), -EBUSY);
    ck_assert_int_eq(goro_timer_reset(t, GORO_MSEC), 1);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 1);                     /* received */
    ck_assert_int_eq(goro_timer_free(t), 0);
}
END_TEST


/* ---- coroutine-local storage ---- */

static atomic_int freed_sum;

static void free_local(void *v)
{
    atomic_fetch_add(&freed_sum, (int)(intptr_t)v);
}

static goro_key_t k_small, k_big[12];

/* Sets a value under every key, checks it reads back its own, and ends
 * by the way given: return, goro_exit. */
static long locals_user(long base, long how)
{
    if (goro_local_get(k_small) != NULL)
        return -1;                  /* a fresh coroutine reads NULL */
    if (goro_local_set(k_small, (void *)(intptr_t)base) != 0)
        return -2;
    for (int i = 0; i < 12; i++)
        if (goro_local_set(k_big[i], (void *)(intptr_t)(base + 1)) != 0)
            return -3;
    goro_yield();
    if (goro_local_get(k_small) != (void *)(intptr_t)base)
        return -4;
    for (int i = 0; i < 12; i++)
        if (goro_local_get(k_big[i]) != (void *)(intptr_t)(base + 1))
            return -5;
    if (how == 1)
        goro_exit(0);
    return 0;
}

START_TEST(locals_are_per_coroutine_and_destroyed_at_the_end)
{
    atomic_store(&freed_sum, 0);
    ck_assert_int_eq(goro_key_create(&k_small, free_local), 0);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(goro_key_create(&k_big[i], free_local), 0);
    goro_t *a = go(locals_user, 100, 0), *b = go(locals_user, 1000, 1);
    long ra, rb;
    ck_assert_int_eq(goro_join(a, &ra), 0);
    ck_assert_int_eq(goro_join(b, &rb), 0);
    ck_assert_int_eq(ra, 0);
    ck_assert_int_eq(rb, 0);
    /* Each ended coroutine's 13 values went to the destructor. */
    ck_assert_int_eq(atomic_load(&freed_sum), 100 + 12 * 101 + 1000 + 12 * 1001);
    /* A reused record starts with no values (the next spawn reads NULL). */
    atomic_store(&freed_sum, 0);
    a = go(locals_user, 5, 0);
    ck_assert_int_eq(goro_join(a, &ra), 0);
    ck_assert_int_eq(ra, 0);
    /* A thread has none. */
    ck_assert_ptr_null(goro_local_get(k_small));
    ck_assert_int_eq(goro_local_set(k_small, (void *)1), -EPERM);
    for (int i = 0; i < 12; i++)
        ck_assert_int_eq(goro_key_delete(k_big[i]), 0);
    ck_assert_int_eq(goro_key_delete(k_small), 0);
    ck_assert_int_eq(goro_key_delete(k_small), -EINVAL);
    ck_assert_int_eq(goro_key_create(NULL, NULL), -EINVAL);
}
END_TEST

/* A deleted key's value is not seen through a new key on its index, and
 * its destructor does not run. */
static goro_key_t k_old, k_new;

static long delete_while_set(void)
{
    if (goro_local_set(k_old, (void *)7) != 0)
        return -1;
    if (goro_key_delete(k_old) != 0 || goro_key_create(&k_new, free_local) != 0)
        return -2;
    if (goro_local_get(k_old) || goro_local_get(k_new))
        return -3;                  /* NULL through both */
    if (goro_local_set(k_old, (void *)1) != -EINVAL)
        return -4;
    return 0;
}

/* A destructor that sets a value again gets another round. */
static goro_key_t k_again;
static atomic_int again_calls;

static void set_again(void *v)
{
    if (atomic_fetch_add(&again_calls, 1) < 2)
        goro_local_set(k_again, v);
}

static long sets_again(void)
{
    return goro_local_set(k_again, (void *)1);
}

START_TEST(locals_deleted_key_and_destructor_rounds)
{
    atomic_store(&freed_sum, 0);
    ck_assert_int_eq(goro_key_create(&k_old, free_local), 0);
    goro_t *h = go(delete_while_set);
    long r;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(atomic_load(&freed_sum), 0);
    ck_assert_int_eq(goro_key_delete(k_new), 0);
    atomic_store(&again_calls, 0);
    ck_assert_int_eq(goro_key_create(&k_again, set_again), 0);
    h = go(sets_again);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(atomic_load(&again_calls), 3);
    ck_assert_int_eq(goro_key_delete(k_again), 0);
}
END_TEST

/* ---- OnceValue, WaitGroup.Go, barrier ---- */

static atomic_int once_runs;

static long once_fn(void *arg)
{
    atomic_fetch_add(&once_runs, 1);
    goro_sleep(GORO_MSEC);         /* the others arrive meanwhile and wait */
    return (long)(intptr_t)arg * 2;
}

static long once_caller(goro_once_value_t *ov)
{
    long v = -1;
    int r = goro_once_value(ov, once_fn, (void *)21, &v);
    return r ? r : v;
}

static long once_exits(void *arg)
{
    (void)arg;
    goro_exit(5);
}

static long once_exit_caller(goro_once_value_t *ov)
{
    return goro_once_value(ov, once_exits, NULL, NULL);
}

START_TEST(once_value_runs_once_and_hands_every_caller_the_value)
{
    static goro_once_value_t ov = GORO_ONCE_VALUE_INIT;
    atomic_store(&once_runs, 0);
    goro_t *h[8];
    for (int i = 0; i < 8; i++)
        h[i] = go(once_caller, &ov);
    for (int i = 0; i < 8; i++) {
        long r;
        ck_assert_int_eq(goro_join(h[i], &r), 0);
        ck_assert_int_eq(r, 42);
    }
    long v = 0;
    ck_assert_int_eq(goro_once_value(&ov, once_fn, (void *)1, &v), 0);   /* done */
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(atomic_load(&once_runs), 1);
    /* fn ended its coroutine: done, no value, for every caller. */
    static goro_once_value_t ended = GORO_ONCE_VALUE_INIT;
    goro_t *e = go(once_exit_caller, &ended);
    long r;
    ck_assert_int_eq(goro_join(e, &r), 0);
    ck_assert_int_eq(r, 5);                    /* its goro_exit(5) */
    ck_assert_int_eq(goro_once_value(&ended, once_fn, NULL, &v), -EOWNERDEAD);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(goro_once_value(NULL, once_fn, NULL, &v), -EINVAL);
    ck_assert_int_eq(goro_once_value(&ov, NULL, NULL, &v), -EINVAL);
}
END_TEST

static atomic_long wg_sum;

static void wg_add(long v, goro_chan_t *gate)
{
    goro_chan_recv(gate, NULL);
    atomic_fetch_add(&wg_sum, v);
}

START_TEST(waitgroup_go_counts_each_until_its_end)
{
    goro_waitgroup_t wg;
    ck_assert_int_eq(goro_waitgroup_init(&wg), 0);
    goro_chan_t *gate = t_chan_new(0, 0);
    atomic_store(&wg_sum, 0);
    for (long i = 1; i <= 10; i++)
        ck_assert_int_eq(goro_waitgroup_go(&wg, wg_add, i, gate), 0);
    ck_assert_int_eq(goro_waitgroup_wait_until(&wg, goro_now() + 5 * GORO_MSEC), -ETIMEDOUT);
    ck_assert_int_eq(goro_chan_close(gate), 0);
    ck_assert_int_eq(goro_waitgroup_wait(&wg), 0);
    ck_assert_int_eq(atomic_load(&wg_sum), 55);
    ck_assert_int_eq(goro_waitgroup_go(NULL, wg_add, 1, gate), -EINVAL);
    ck_assert_int_eq(goro_waitgroup_destroy(&wg), 0);
    goro_chan_free(gate);
}
END_TEST

static goro_barrier_t bar;
static atomic_int serials, phase_err;
static atomic_long phase[4];

/* rounds rounds; in each, every party must see every other's arrival in
 * the previous phase before it crosses. */
static long barrier_party(long rounds, long parties)
{
    for (long r = 0; r < rounds; r++) {
        atomic_fetch_add(&phase[r % 4], 1);
        int s = goro_barrier_wait(&bar);
        if (s < 0)
            return s;
        if (s == GORO_BARRIER_SERIAL)
            atomic_fetch_add(&serials, 1);
        if (atomic_load(&phase[r % 4]) < (r / 4 + 1) * parties)
            atomic_store(&phase_err, 1);
    }
    return 0;
}

START_TEST(barrier_rounds_have_one_serial_caller_each)
{
    long parties = 6, rounds = t_scale(300);
    ck_assert_int_eq(goro_barrier_init(&bar, parties), 0);
    atomic_store(&serials, 0);
    atomic_store(&phase_err, 0);
    for (int i = 0; i < 4; i++)
        atomic_store(&phase[i], 0);
    goro_t *h[6];
    for (int i = 0; i < parties; i++)
        h[i] = go(barrier_party, rounds, parties);
    for (int i = 0; i < parties; i++) {
        long r;
        ck_assert_int_eq(goro_join(h[i], &r), 0);
        ck_assert_int_eq(r, 0);
    }
    ck_assert_int_eq(atomic_load(&serials), rounds);
    ck_assert_int_eq(atomic_load(&phase_err), 0);
    ck_assert_int_eq(goro_barrier_destroy(&bar), 0);
    ck_assert_int_eq(goro_barrier_init(&bar, 0), -EINVAL);
}
END_TEST

static long barrier_wait_for(int64_t deadline)
{
    return goro_barrier_wait_until(&bar, deadline);
}

/* A waiter whose deadline passes leaves the round: the round needs n
 * callers inside it again. */
START_TEST(barrier_a_waiter_that_gives_up_leaves_the_round)
{
    ck_assert_int_eq(goro_barrier_init(&bar, 2), 0);
    goro_t *a = go(barrier_wait_for, goro_now() + 2 * GORO_MSEC);
    long r;
    ck_assert_int_eq(goro_join(a, &r), 0);
    ck_assert_int_eq(r, -ETIMEDOUT);
    /* One more is not enough: the leaver is not counted. */
    ck_assert_int_eq(goro_barrier_wait_until(&bar, goro_now() + 2 * GORO_MSEC), -ETIMEDOUT);
    ck_assert_int_eq(goro_barrier_destroy(&bar), 0);       /* nobody inside */
    ck_assert_int_eq(goro_barrier_init(&bar, 2), 0);
    a = go(barrier_wait_for, GORO_FOREVER);
    t_settle();
    ck_assert_int_eq(goro_barrier_destroy(&bar), -EBUSY);
    int s = goro_barrier_wait(&bar);
    ck_assert_int_eq(s, GORO_BARRIER_SERIAL);               /* the last to arrive */
    ck_assert_int_eq(goro_join(a, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_barrier_destroy(&bar), 0);
}
END_TEST

Suite *watch_suite(void)
{
    Suite *s = suite_create("watch");
    TCase *tc = t_runtime_tcase(s, "done", 60);
    tcase_add_test(tc, done_closes_when_a_coroutine_is_cancelled);
    tcase_add_test(tc, done_stays_open_when_a_coroutine_ends);
    tcase_add_test(tc, done_closes_when_a_group_is_cancelled);
    tc = t_runtime_tcase(s, "after", 120);
    tcase_add_test(tc, after_cancel_runs_once_and_stop_says_whether_it_prevented);
    tcase_add_test(tc, after_cancel_never_runs_once_the_scope_is_over);
    tcase_add_test(tc, after_cancel_reached_from_above);
    tcase_add_test(tc, after_stop_races_the_cancel);
    tc = t_runtime_tcase(s, "timer", 60);
    tcase_add_test(tc, timer_fires_once_with_its_time);
    tcase_add_test(tc, timer_stop_and_reset_leave_no_stale_value);
    tcase_add_test(tc, timer_free_with_a_waiter_is_busy);
    tc = t_runtime_tcase(s, "local", 60);
    tcase_add_test(tc, locals_are_per_coroutine_and_destroyed_at_the_end);
    tcase_add_test(tc, locals_deleted_key_and_destructor_rounds);
    tc = t_runtime_tcase(s, "sync", 60);
    tcase_add_test(tc, once_value_runs_once_and_hands_every_caller_the_value);
    tcase_add_test(tc, waitgroup_go_counts_each_until_its_end);
    tcase_add_test(tc, barrier_rounds_have_one_serial_caller_each);
    tcase_add_test(tc, barrier_a_waiter_that_gives_up_leaves_the_round);
    return s;
}
