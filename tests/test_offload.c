/* goro_offload: blocking work on the pool while the coroutine parks. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include <goro.h>

#include "helpers.h"
#include "suites.h"

static long add_one(void *arg)
{
    return (long)(intptr_t)arg + 1;
}

static long blocking_sleep(void *arg)
{
    usleep((useconds_t)(intptr_t)arg);       /* blocks its thread for real */
    return (long)(intptr_t)arg;
}

static long offload_once(long x)
{
    long r = -1;
    int e = goro_offload(add_one, (void *)(intptr_t)x, &r);
    if (e != 0)
        t_fail("goro_offload: %d", e);
    return r;
}

START_TEST(offload_returns_the_result)
{
    long r = 0;
    goro_t *h = go(offload_once, 41L);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(r, 42);
}
END_TEST

START_TEST(offload_bad_input_and_outside_coroutines)
{
    long r = 0;
    ck_assert_int_eq(goro_offload(NULL, NULL, &r), -EINVAL);
    /* On a thread of its own it just calls fn. */
    ck_assert_int_eq(goro_offload(add_one, (void *)(intptr_t)6, &r), 0);
    ck_assert_int_eq(r, 7);
    ck_assert_int_eq(goro_offload(add_one, NULL, NULL), 0);
}
END_TEST

/* While every worker's coroutines sit in blocking calls, other coroutines
 * still run promptly: the calls block pool threads, not workers. */
static long offloaded_sleeper(long us)
{
    long r = 0;
    if (goro_offload(blocking_sleep, (void *)(intptr_t)us, &r) != 0 || r != us)
        t_fail("offloaded sleep: result %ld", r);
    return 0;
}

static long quick(long x)
{
    return x * 2;
}

START_TEST(offload_keeps_workers_free)
{
    long us = t_slow() ? 1000000 : 200000;
    int n = 2 * goro_workers();             /* more than enough to block them all */
    goro_t *h[64];
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++)
        ck_assert_ptr_nonnull(h[i] = go(offloaded_sleeper, us));
    usleep(20000);                          /* let them all get into the call */
    double t0 = t_now();
    long r = 0;
    goro_t *q = go(quick, 21L);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(goro_join(q, &r), 0);
    double waited = t_now() - t0;
    ck_assert_int_eq(r, 42);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(waited < us * 1e-6 / 2, "a coroutine waited %.0f ms while %d coroutines "
                  "were in %ld ms offloaded calls", waited * 1e3, n, us / 1000);
}
END_TEST

/* More jobs than pool threads: they queue, and every one completes once. */
static atomic_long jobs_done;

static long count_job(void *arg)
{
    usleep(500);
    atomic_fetch_add(&jobs_done, 1);
    return (long)(intptr_t)arg * 3;
}

static long many_offloads(long id)
{
    long r = 0;
    if (goro_offload(count_job, (void *)(intptr_t)id, &r) != 0 || r != id * 3)
        t_fail("job %ld: result %ld", id, r);
    return 0;
}

START_TEST(offload_more_jobs_than_threads)
{
    long n = t_scale(200);
    if (n < 20)
        n = 20;
    atomic_store(&jobs_done, 0);
    goro_t *h[200];
    for (long i = 0; i < n; i++)
        ck_assert_ptr_nonnull(h[i] = go(many_offloads, i));
    for (long i = 0; i < n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&jobs_done), n);
}
END_TEST

Suite *offload_suite(void)
{
    Suite *s = suite_create("offload");
    TCase *tc = t_runtime_tcase(s, "offload", 30);
    tcase_add_test(tc, offload_returns_the_result);
    tcase_add_test(tc, offload_bad_input_and_outside_coroutines);
    tcase_add_test(tc, offload_keeps_workers_free);
    tcase_add_test(tc, offload_more_jobs_than_threads);
    return s;
}
