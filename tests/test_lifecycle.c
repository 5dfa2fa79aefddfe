/* goro_start / goro_shutdown: settings, waiting for every coroutine,
 * releasing unjoined handles, starting again. These tests stop the runtime
 * of their process; the next test's fixture starts it again. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "suites.h"

static long twice(long x) { return 2 * x; }

static atomic_long finished;

static void count_when_done(long yields)
{
    for (long i = 0; i < yields; i++)
        goro_yield();
    atomic_fetch_add(&finished, 1);
}

static void stop_if_running(void)
{
    if (goro_workers() > 0)
        ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(goro_workers(), 0);
}

START_TEST(start_settings)
{
    stop_if_running();
    ck_assert_int_eq(goro_shutdown(), -ENOTCONN);
    /* bad settings start nothing */
    goro_config_t bad[] = {
        { .workers = -1 }, { .workers = 100000 },
        { .stack_size = 1 }, { .stack_size = (size_t)1 << 40 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(goro_start(&bad[i]), -EINVAL);
        ck_assert_int_eq(goro_workers(), 0);
    }
    goro_config_t cfg = { .workers = 3 };
    ck_assert_int_eq(goro_start(&cfg), 0);
    ck_assert_int_eq(goro_workers(), 3);
    ck_assert_int_eq(goro_start(&cfg), -EALREADY);
    ck_assert_int_eq(goro_start(NULL), -EALREADY);
    ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(goro_workers(), 0);

    /* GORO_WORKERS is read by a start without a worker count */
    ck_assert_int_eq(setenv("GORO_WORKERS", "3", 1), 0);
    int e = goro_start(NULL);
    unsetenv("GORO_WORKERS");
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(goro_workers(), 3);
    ck_assert_int_eq(goro_shutdown(), 0);

    /* the first go() starts the runtime implicitly */
    goro_t *h = go(twice, 21L);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_gt(goro_workers(), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 42);
    ck_assert_int_eq(goro_shutdown(), 0);
}
END_TEST

START_TEST(shutdown_waits_releases_and_restarts)
{
    stop_if_running();
    goro_config_t cfg = { .workers = 3 };

    /* a first cycle warms what outlives a shutdown by design (thread stack
     * cache, malloc arenas of the workers) */
    ck_assert_int_eq(goro_start(&cfg), 0);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(goro_join(go(count_when_done, 10L), NULL), 0);
    ck_assert_int_eq(goro_shutdown(), 0);
    long maps0 = t_maps_count();
    ck_assert_int_gt(maps0, 0);

    ck_assert_int_eq(goro_start(&cfg), 0);
    long n = t_scale(300);
    long yields = t_scale(2000);
    atomic_store(&finished, 0);
    goro_attr_t big = { .stack_size = 1024 * 1024 };
    for (long i = 0; i < n; i++) {
        /* never joined: default-size and big stacks, and detached ones */
        ck_assert_int_eq(goro_go(NULL, NULL, count_when_done, 0L), 0);
        goro_t *h = NULL;
        ck_assert_int_eq(goro_go(&h, i % 4 ? NULL : &big, count_when_done, 0L), 0);
    }
    /* still running when shutdown is called */
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(goro_go(NULL, NULL, count_when_done, yields), 0);
    long maps_mid = t_maps_count();
    ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(atomic_load(&finished), 2 * n + 8);   /* it waited */
    ck_assert_int_eq(goro_workers(), 0);
    long maps1 = t_maps_count();
    /* what may stay: sanitizer allocator regions and fake stacks */
    const long slack = t_sanitized() ? 64 : 8;
#ifdef T_TSAN
    /* TSan remaps its shadow on every munmap, which splits its mappings */
    maps1 = maps0;
    maps_mid = maps0 + n + 1;
#endif
    ck_assert_msg(maps_mid > maps0 + n, "the unjoined coroutines held no mappings? "
                  "%ld before, %ld while running", maps0, maps_mid);
    ck_assert_msg(maps1 <= maps0 + slack, "%ld mappings after shutdown, %ld before the "
                  "cycle (%ld while running)", maps1, maps0, maps_mid);

    /* and again */
    ck_assert_int_eq(goro_start(&cfg), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(go(twice, 4L), &r), 0);
    ck_assert_int_eq(r, 8);
    ck_assert_int_eq(goro_shutdown(), 0);
#ifndef T_TSAN
    ck_assert_int_le(t_maps_count(), maps0 + slack);
#endif
}
END_TEST

Suite *lifecycle_suite(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = t_tcase(s, "lifecycle", 30);
    tcase_add_test(tc, start_settings);
    tcase_add_test(tc, shutdown_waits_releases_and_restarts);
    return s;
}
