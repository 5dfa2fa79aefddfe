/* Single-flight (docs/structured.md): callers of one key - coroutines and
 * threads - share one computation and its result, or each get a copy of
 * its error; the key is free again once it ends; a caller that gives up
 * (deadline, cancel, a group's cancel above it) returns alone while the
 * computation goes on for the others, and to its end when nobody waits;
 * forget; bad use; and a randomized race of callers giving up against
 * computations ending. (The flight wait ended by every kind of cancel and
 * by its deadline: test_cancel.c and test_time.c.)
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "suites.h"

static atomic_long computations;   /* fn calls */

/* Blocks until arg (a channel) is closed, then returns 40 + the key's
 * length; -1000 - code if its own wait failed (it must not: nobody
 * cancels a computation). */
static long blocked_fn(const char *key, void *arg)
{
    atomic_fetch_add(&computations, 1);
    int r = goro_chan_recv(arg, NULL);
    if (r < 0)
        return -1000 + r;
    return 40 + (long)strlen(key);
}

/* Waits until n callers wait for key's computation. */
static void wait_waiting(goro_flight_t *fl, const char *key, int n)
{
    double end = t_now() + t_timeout(10);
    while (goro_flight_waiting(fl, key) < n && t_now() < end)
        t_nap(0.001);
    ck_assert_int_eq(goro_flight_waiting(fl, key), n);
}

struct call {
    goro_flight_t *fl;
    const char *key;
    void *arg;
    int64_t deadline;
    long result;
    int code;
    goro_err_t *err;
};

static long do_call(struct call *c)
{
    c->result = -1;
    c->code = goro_flight_do_until(c->fl, c->key, blocked_fn, c->arg, &c->result, &c->err,
                                   c->deadline ? c->deadline : GORO_FOREVER);
    return c->code;
}

static void *thread_call(void *arg)
{
    do_call(arg);
    return NULL;
}

START_TEST(flight_callers_share_one_computation)
{
    enum { N = 8 };
    goro_flight_t *fl;
    ck_assert_int_eq(goro_flight_new(&fl), 0);
    goro_chan_t *release = t_chan_new(0, 0);
    atomic_store(&computations, 0);
    /* A thread starts it; coroutines on every worker join it. */
    struct call first = { .fl = fl, .key = "page", .arg = release };
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, thread_call, &first), 0);
    ck_assert_int_eq(t_wait_at_least(&computations, 1, t_timeout(10)), 1);
    struct call calls[N];
    goro_t *h[N];
    for (int i = 0; i < N; i++) {
        calls[i] = (struct call){ .fl = fl, .key = "page", .arg = NULL };
        ck_assert_ptr_nonnull(h[i] = go(do_call, &calls[i]));
    }
    wait_waiting(fl, "page", N + 1);               /* and the thread */
    ck_assert_int_eq(goro_flight_free(fl), -EBUSY);
    ck_assert_int_eq(goro_chan_close(release), 0);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
        ck_assert_int_eq(calls[i].code, 0);
        ck_assert_int_eq(calls[i].result, 44);
        ck_assert_ptr_null(calls[i].err);
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(first.code, 0);
    ck_assert_int_eq(first.result, 44);
    ck_assert_int_eq(atomic_load(&computations), 1);
    /* Once it has ended the key is free: the next caller computes again. */
    struct call again = { .fl = fl, .key = "page", .arg = release };
    ck_assert_int_eq(do_call(&again), 0);
    ck_assert_int_eq(again.result, 44);
    ck_assert_int_eq(atomic_load(&computations), 2);
    ck_assert_int_eq(goro_flight_free(fl), 0);
    ck_assert_int_eq(goro_chan_free(release), 0);
}
END_TEST

/* Fails after the channel closes: key "negative" by a negative return,
 * any other with an error object that has a cause. */
static long failing_fn(const char *key, void *arg)
{
    atomic_fetch_add(&computations, 1);
    goro_chan_recv(arg, NULL);
    if (strcmp(key, "negative") == 0)
        return -ENOENT;
    goro_exit_err(goro_err_wrap(goro_err_new(ECONNREFUSED, "connect to %s", key), EIO,
                                "could not load %s", key));
}

static long do_failing(goro_flight_t *fl, const char *key, goro_chan_t *ch, goro_err_t **err)
{
    long v = 123;
    int r = goro_flight_do(fl, key, failing_fn, ch, &v, err);
    return r;
}

START_TEST(flight_error_reaches_every_caller_as_a_copy)
{
    enum { N = 4 };
    goro_flight_t *fl;
    ck_assert_int_eq(goro_flight_new(&fl), 0);
    const char *keys[] = { "db", "negative" };
    for (int k = 0; k < 2; k++) {
        goro_chan_t *release = t_chan_new(0, 0);
        goro_err_t *errs[N] = { 0 };
        goro_t *h[N];
        for (int i = 0; i < N; i++)
            ck_assert_ptr_nonnull(h[i] = go(do_failing, fl, keys[k], release, &errs[i]));
        wait_waiting(fl, keys[k], N);
        ck_assert_int_eq(goro_chan_close(release), 0);
        for (int i = 0; i < N; i++) {
            long r = 0;
            ck_assert_int_eq(goro_join(h[i], &r), 0);
            ck_assert_ptr_nonnull(errs[i]);
            for (int j = 0; j < i; j++)
                ck_assert_ptr_ne(errs[i], errs[j]);      /* each its own copy */
            if (k == 0) {
                ck_assert_int_eq(r, -EIO);
                ck_assert_int_eq(goro_err_code(errs[i]), EIO);
                ck_assert_str_eq(goro_err_msg(errs[i]), "could not load db");
                ck_assert_int_eq(goro_err_code(goro_err_cause(errs[i])), ECONNREFUSED);
                ck_assert_str_eq(goro_err_msg(goro_err_cause(errs[i])), "connect to db");
                ck_assert_str_eq(goro_err_coroutine_name(errs[i]), "flight db");
            } else {
                ck_assert_int_eq(r, -ENOENT);
                ck_assert_int_eq(goro_err_code(errs[i]), ENOENT);
                ck_assert_ptr_nonnull(strstr(goro_err_msg(errs[i]), "returned -2"));
            }
            goro_err_free(errs[i]);
        }
        ck_assert_int_eq(goro_chan_free(release), 0);
    }
    /* Without an err pointer the code still comes back. */
    goro_chan_t *closed = t_chan_new(0, 0);
    ck_assert_int_eq(goro_chan_close(closed), 0);
    ck_assert_int_eq(goro_flight_do(fl, "db", failing_fn, closed, NULL, NULL), -EIO);
    ck_assert_int_eq(goro_chan_free(closed), 0);
    ck_assert_int_eq(goro_flight_free(fl), 0);
}
END_TEST

/* ---- giving up ---- */

static atomic_int fn_ended, fn_saw_cancel;

static long slow_fn(const char *key, void *arg)
{
    (void)key;
    atomic_fetch_add(&computations, 1);
    int r = goro_sleep(*(int64_t *)arg);
    atomic_store(&fn_saw_cancel, r != 0 || goro_cancelled());
    atomic_store(&fn_ended, 1);
    return 5;
}

static long do_slow(goro_flight_t *fl, int64_t *how_long, int64_t deadline)
{
    long v = -1;
    int r = goro_flight_do_until(fl, "slow", slow_fn, how_long, &v, NULL, deadline);
    return r ? r : v;
}

/* A group member two levels down: cancelled through the tree. */
static long in_group(goro_flight_t *fl, int64_t *how_long)
{
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return -1000;
    goro_group_go(g, do_slow, fl, how_long, GORO_FOREVER);
    goro_err_t *err = NULL;
    int r = goro_group_wait(g, NULL, &err);
    goro_err_free(err);
    goro_group_free(g);
    return r;
}

/* On the virtual clock, so every give-up and end is at its exact time:
 * the starter gives up at its 20 ms deadline, one caller is cancelled,
 * one is in a group that is cancelled, one waits to the end at 150 ms;
 * the computation sees no cancel. Then every caller gone (the only one
 * gives up at 5 ms): it still runs to its end at 200 ms, and the set is
 * busy until then. */
static void giving_up_body(void *unused)
{
    (void)unused;
    static int64_t how_long;
    how_long = 150 * GORO_MSEC;
    goro_flight_t *fl;
    T_VCHECK(goro_flight_new(&fl) == 0, "flight_new");
    atomic_store(&computations, 0);
    atomic_store(&fn_ended, 0);
    int64_t t0 = goro_now();
    goro_t *starter = go(do_slow, fl, &how_long, t0 + 20 * GORO_MSEC);
    long r = 0;
    goro_join(starter, &r);
    T_VCHECK(r == -ETIMEDOUT && goro_now() == t0 + 20 * GORO_MSEC,
             "starter: %ld at %.3f ms, want -ETIMEDOUT at 20 ms", r, t_ms(goro_now() - t0));
    T_VCHECK(atomic_load(&computations) == 1, "%ld computations", atomic_load(&computations));
    goro_t *cancelled = go(do_slow, fl, &how_long, GORO_FOREVER);
    goro_group_t *outer;
    T_VCHECK(goro_group_new(&outer, NULL) == 0, "group_new");
    T_VCHECK(goro_group_go(outer, in_group, fl, &how_long) == 0, "group_go");
    goro_t *patient = go(do_slow, fl, &how_long, GORO_FOREVER);
    goro_sleep(GORO_MSEC);          /* every one of them waits */
    T_VCHECK(goro_flight_waiting(fl, "slow") == 3, "%d waiting, want 3",
             goro_flight_waiting(fl, "slow"));
    goro_cancel(cancelled);
    goro_join(cancelled, &r);
    T_VCHECK(r == -ECANCELED, "cancelled caller: %ld", r);
    goro_group_cancel(outer);
    T_VCHECK(goro_group_wait(outer, NULL, NULL) == -ECANCELED, "group_wait");
    goro_group_free(outer);
    T_VCHECK(atomic_load(&fn_ended) == 0, "the computation ended with its callers");
    goro_join(patient, &r);
    T_VCHECK(r == 5 && goro_now() == t0 + 150 * GORO_MSEC,
             "patient caller: %ld at %.3f ms, want 5 at 150 ms", r, t_ms(goro_now() - t0));
    T_VCHECK(atomic_load(&fn_saw_cancel) == 0, "the computation saw a cancel");
    T_VCHECK(atomic_load(&computations) == 1, "%ld computations", atomic_load(&computations));

    atomic_store(&fn_ended, 0);
    how_long = 200 * GORO_MSEC;
    t0 = goro_now();
    T_VCHECK(do_slow(fl, &how_long, t0 + 5 * GORO_MSEC) == -ETIMEDOUT &&
             goro_now() == t0 + 5 * GORO_MSEC, "the only caller did not give up at 5 ms");
    T_VCHECK(goro_flight_free(fl) == -EBUSY, "free while it computes was not refused");
    goro_sleep_until(t0 + 200 * GORO_MSEC - 1);
    T_VCHECK(atomic_load(&fn_ended) == 0, "the computation ended before its 200 ms");
    goro_sleep_until(t0 + 200 * GORO_MSEC + 1);     /* it ended at 200 ms */
    T_VCHECK(atomic_load(&fn_ended) == 1 && atomic_load(&fn_saw_cancel) == 0,
             "the computation did not run to its end undisturbed");
    T_VCHECK(goro_flight_free(fl) == 0, "free after the end");
}

START_TEST(flight_caller_giving_up_does_not_cancel_it)
{
    t_virtual(giving_up_body, NULL);
}
END_TEST

/* ---- forget, bad use ---- */

START_TEST(flight_forget_starts_a_new_computation)
{
    goro_flight_t *fl;
    ck_assert_int_eq(goro_flight_new(&fl), 0);
    goro_chan_t *a = t_chan_new(0, 0), *b = t_chan_new(0, 0);
    atomic_store(&computations, 0);
    struct call old1 = { .fl = fl, .key = "k", .arg = a }, old2 = old1;
    goro_t *h1 = go(do_call, &old1);
    ck_assert_int_eq(t_wait_at_least(&computations, 1, t_timeout(10)), 1);
    goro_t *h2 = go(do_call, &old2);
    wait_waiting(fl, "k", 2);
    ck_assert_int_eq(goro_flight_forget(fl, "k"), 0);
    ck_assert_int_eq(goro_flight_forget(fl, "k"), -ENOENT);
    ck_assert_int_eq(goro_flight_waiting(fl, "k"), 0);    /* untied: not "k"'s now */
    struct call fresh = { .fl = fl, .key = "k", .arg = b };
    goro_t *h3 = go(do_call, &fresh);
    ck_assert_int_eq(t_wait_at_least(&computations, 2, t_timeout(10)), 2);
    wait_waiting(fl, "k", 1);
    /* The new one ends first; the forgotten one still completes for its
     * callers. */
    ck_assert_int_eq(goro_chan_close(b), 0);
    ck_assert_int_eq(goro_join(h3, NULL), 0);
    ck_assert_int_eq(fresh.code, 0);
    ck_assert_int_eq(goro_join_until(h1, NULL, goro_now() + 10 * GORO_MSEC), -ETIMEDOUT);
    ck_assert_int_eq(goro_chan_close(a), 0);
    ck_assert_int_eq(goro_join(h1, NULL), 0);
    ck_assert_int_eq(goro_join(h2, NULL), 0);
    ck_assert_int_eq(old1.code, 0);
    ck_assert_int_eq(old2.result, 41);
    ck_assert_int_eq(atomic_load(&computations), 2);
    ck_assert_int_eq(goro_flight_free(fl), 0);
    ck_assert_int_eq(goro_chan_free(a), 0);
    ck_assert_int_eq(goro_chan_free(b), 0);
}
END_TEST

static goro_flight_t *self_fl;

static long calls_itself(const char *key, void *arg)
{
    (void)arg;
    atomic_fetch_add(&computations, 1);
    return goro_flight_do(self_fl, key, calls_itself, NULL, NULL, NULL);
}

static long do_cancelled_first(goro_flight_t *fl)
{
    goro_cancel(goro_self());
    return goro_flight_do(fl, "x", blocked_fn, NULL, NULL, NULL);
}

START_TEST(flight_bad_use)
{
    goro_flight_t *fl;
    goro_err_t *err = (goro_err_t *)1;
    ck_assert_int_eq(goro_flight_new(NULL), -EINVAL);
    ck_assert_int_eq(goro_flight_new(&fl), 0);
    ck_assert_int_eq(goro_flight_do(NULL, "k", blocked_fn, NULL, NULL, &err), -EINVAL);
    ck_assert_ptr_null(err);
    ck_assert_int_eq(goro_flight_do(fl, NULL, blocked_fn, NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_flight_do(fl, "k", NULL, NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_flight_forget(fl, "k"), -ENOENT);
    ck_assert_int_eq(goro_flight_forget(NULL, "k"), -EINVAL);
    ck_assert_int_eq(goro_flight_waiting(fl, "k"), 0);
    ck_assert_int_eq(goro_flight_waiting(NULL, "k"), -EINVAL);
    ck_assert_int_eq(goro_flight_free(NULL), -EINVAL);
    /* The computation calling its own key would wait for itself. */
    self_fl = fl;
    atomic_store(&computations, 0);
    goro_err_t *e = NULL;
    ck_assert_int_eq(goro_flight_do(fl, "me", calls_itself, NULL, NULL, &e), -EDEADLK);
    ck_assert_ptr_nonnull(e);
    goro_err_free(e);
    ck_assert_int_eq(atomic_load(&computations), 1);
    /* A caller cancelled before it calls starts nothing. */
    long r = 0;
    ck_assert_int_eq(goro_join(go(do_cancelled_first, fl), &r), 0);
    ck_assert_int_eq(r, -ECANCELED);
    ck_assert_int_eq(atomic_load(&computations), 1);
    /* A deadline already past: nothing either. */
    ck_assert_int_eq(goro_flight_do_until(fl, "y", blocked_fn, NULL, NULL, NULL,
                                          goro_now() - 1), -ETIMEDOUT);
    ck_assert_int_eq(atomic_load(&computations), 1);
    ck_assert_int_eq(goro_flight_free(fl), 0);
}
END_TEST

/* ---- a race: callers giving up against computations ending ---- */

enum { RACE_KEYS = 6, RACE_CALLERS = 24 };
static goro_flight_t *race_fl;
static atomic_int race_active[RACE_KEYS];
static atomic_long race_done, race_gave_up, race_failed;
static atomic_int race_stop;

/* Key i computes 1000 + i after a short random wait; key 0 fails. At most
 * one computation of a key runs at a time (nobody forgets in this race). */
static long race_fn(const char *key, void *arg)
{
    (void)arg;
    int i = key[1] - '0';
    if (atomic_fetch_add(&race_active[i], 1) != 0)
        t_fail("two computations of %s at once", key);
    atomic_fetch_add(&computations, 1);
    uint32_t seed = (uint32_t)goro_now() | 1;
    if (t_rnd(&seed) % 2)
        goro_sleep((int64_t)(t_rnd(&seed) % 300) * GORO_USEC);
    else
        goro_yield();
    if (goro_cancelled())
        t_fail("computation of %s cancelled", key);
    atomic_fetch_sub(&race_active[i], 1);
    if (i == 0)
        goro_exit_err(goro_err_new(EPROTO, "key %s fails", key));
    return 1000 + i;
}

static long race_caller(uint32_t seed)
{
    char key[3] = "k0";
    while (!atomic_load(&race_stop)) {
        int i = (int)(t_rnd(&seed) % RACE_KEYS);
        key[1] = (char)('0' + i);
        int64_t dl = t_rnd(&seed) % 3 ? GORO_FOREVER
                                      : goro_now() + (int64_t)(t_rnd(&seed) % 200) * GORO_USEC;
        long v = -1;
        goro_err_t *err = NULL;
        int r = goro_flight_do_until(race_fl, key, race_fn, NULL, &v, &err, dl);
        if (r == 0 && v != 1000 + i)
            t_fail("%s: result %ld", key, v);
        else if (r == -EPROTO && (i != 0 || !err || goro_err_code(err) != EPROTO))
            t_fail("%s: failed without its error", key);
        else if ((r == -ETIMEDOUT || r == -ECANCELED) && err)
            t_fail("%s: gave up with an error object", key);
        else if (r && r != -EPROTO && r != -ETIMEDOUT && r != -ECANCELED)
            t_fail("%s: %d", key, r);
        if (r == 0)
            atomic_fetch_add(&race_done, 1);
        else if (r == -EPROTO)
            atomic_fetch_add(&race_failed, 1);
        else
            atomic_fetch_add(&race_gave_up, 1);
        goro_err_free(err);
        if (goro_cancelled())
            return 0;
    }
    return 0;
}

START_TEST(flight_race_giving_up_against_ending)
{
    ck_assert_int_eq(goro_flight_new(&race_fl), 0);
    atomic_store(&race_stop, 0);
    atomic_store(&computations, 0);
    t_fail_reset();
    goro_t *h[RACE_CALLERS];
    uint32_t seed = 0x9e3779b9u ^ (uint32_t)goro_now();
    for (int i = 0; i < RACE_CALLERS; i++)
        ck_assert_ptr_nonnull(h[i] = go(race_caller, t_rnd(&seed)));
    /* Cancels land at random among them, each ending one caller. */
    double end = t_now() + (t_slow() ? 5 : 1.5);
    int cancelled = 0;
    while (t_now() < end) {
        t_nap(0.01);
        if (cancelled < RACE_CALLERS / 2)
            goro_cancel(h[t_rnd(&seed) % RACE_CALLERS]), cancelled++;
    }
    atomic_store(&race_stop, 1);
    for (int i = 0; i < RACE_CALLERS; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    int fr;
    double until = t_now() + t_timeout(10);
    while ((fr = goro_flight_free(race_fl)) == -EBUSY && t_now() < until)
        t_nap(0.001);
    ck_assert_int_eq(fr, 0);
    long done = atomic_load(&race_done), failed = atomic_load(&race_failed);
    printf("flight race: %ld answers, %ld failures, %ld gave up, %ld computations\n", done,
           failed, atomic_load(&race_gave_up), atomic_load(&computations));
    ck_assert_msg(done > 100 && failed > 10 && atomic_load(&race_gave_up) > 10,
                  "done %ld, failed %ld, gave up %ld", done, failed,
                  atomic_load(&race_gave_up));
    /* Sharing happened: fewer computations than answers. */
    ck_assert_msg(atomic_load(&computations) < done + failed, "%ld computations, %ld answers",
                  atomic_load(&computations), done + failed);
}
END_TEST

Suite *flight_suite(void)
{
    Suite *s = suite_create("flight");
    TCase *tc = t_runtime_tcase(s, "flight", 60);
    tcase_add_test(tc, flight_callers_share_one_computation);
    tcase_add_test(tc, flight_error_reaches_every_caller_as_a_copy);
    tcase_add_test(tc, flight_caller_giving_up_does_not_cancel_it);
    tcase_add_test(tc, flight_forget_starts_a_new_computation);
    tcase_add_test(tc, flight_bad_use);
    tcase_add_test(tc, flight_race_giving_up_against_ending);
    return s;
}
