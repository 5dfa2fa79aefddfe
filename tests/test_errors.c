/* Bad input and misuse: every call reports it with the documented negative
 * errno (go(): NULL and errno), and nothing is left behind. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "suites.h"

static int add2(int a, int b) { return a + b; }
static void nothing(void) {}

START_TEST(null_functions)
{
    goro_t *h = (goro_t *)&h;
    ck_assert_int_eq(goro_spawn(&h, NULL, NULL, NULL), -EINVAL);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(goro_spawn(NULL, NULL, NULL, NULL), -EINVAL);

    int (*fp)(int, int) = NULL;
    errno = 0;
    ck_assert_ptr_null(go(fp, 1, 2));
    ck_assert_int_eq(errno, EINVAL);
    h = (goro_t *)&h;
    ck_assert_int_eq(goro_go(&h, NULL, fp, 1, 2), -EINVAL);
    ck_assert_ptr_null(h);
    void (*vp)(void) = NULL;
    ck_assert_int_eq(goro_go(NULL, NULL, vp), -EINVAL);
}
END_TEST

START_TEST(bad_stack_sizes)
{
    static const size_t bad[] = { 1, 4096, 16 * 1024 - 1, ((size_t)1 << 30) + 1,
                                  (size_t)1 << 40, (size_t)-1 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        goro_attr_t attr = { .stack_size = bad[i] };
        goro_t *h = (goro_t *)&h;
        ck_assert_msg(goro_go(&h, &attr, add2, 1, 2) == -EINVAL,
                      "stack_size %zu accepted", bad[i]);
        ck_assert_ptr_null(h);
        ck_assert_int_eq(goro_go(NULL, &attr, nothing), -EINVAL);
        ck_assert_int_eq(goro_spawn(&h, &attr, (long (*)(void *))(void (*)(void))nothing,
                                    NULL), -EINVAL);
    }
    /* the limits themselves are fine; sizes are rounded up to pages */
    static const size_t good[] = { 16 * 1024, 16 * 1024 + 1, 100000, (size_t)1 << 30 };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (good[i] >= ((size_t)1 << 30) && t_valgrind())
            continue;
        goro_attr_t attr = { .stack_size = good[i] };
        goro_t *h = NULL;
        ck_assert_msg(goro_go(&h, &attr, add2, 40, 2) == 0, "stack_size %zu refused",
                      good[i]);
        long r = 0;
        ck_assert_int_eq(goro_join(h, &r), 0);
        ck_assert_int_eq(r, 42);
    }
}
END_TEST

/* ---- join / detach misuse ---- */

static atomic_int gate;
static atomic_int ready;
static goro_t *published;

static void wait_gate(void)
{
    published = goro_self();
    atomic_store(&ready, 1);
    t_wait_flag(&gate, t_timeout(30));
}

static void set_ready(void) { atomic_store(&ready, 1); }

START_TEST(join_and_detach_misuse)
{
    ck_assert_int_eq(goro_join(NULL, NULL), -EINVAL);
    long r = 0;
    ck_assert_int_eq(goro_join(NULL, &r), -EINVAL);
    ck_assert_int_eq(goro_detach(NULL), -EINVAL);

    /* a coroutine spawned detached cannot be joined */
    atomic_store(&gate, 0);
    atomic_store(&ready, 0);
    ck_assert_int_eq(goro_go(NULL, NULL, wait_gate), 0);
    ck_assert_int_eq(t_wait_flag(&ready, t_timeout(30)), 1);
    ck_assert_int_eq(goro_join(published, NULL), -EINVAL);
    ck_assert_int_eq(goro_detach(published), -EINVAL);
    atomic_store(&gate, 1);

    /* detach, then join or detach again: -EINVAL while it still runs */
    atomic_store(&gate, 0);
    goro_t *h = go(wait_gate);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_detach(h), 0);
    ck_assert_int_eq(goro_detach(h), -EINVAL);
    ck_assert_int_eq(goro_join(h, NULL), -EINVAL);
    atomic_store(&gate, 1);

    /* detaching a coroutine that (most likely) finished releases it */
    atomic_store(&ready, 0);
    h = go(set_ready);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(t_wait_flag(&ready, t_timeout(30)), 1);
    for (int i = 0; i < 100; i++)
        sched_yield();
    ck_assert_int_eq(goro_detach(h), 0);
}
END_TEST

/* Misuse that must be tried from inside a coroutine. Returns a bit mask of
 * the checks that failed. */
static long inside_checks(void)
{
    long bad = 0;
    goro_t *me = goro_self();
    if (goro_join(me, NULL) != -EDEADLK)
        bad |= 1;
    long r = 0;
    goro_t *h = go(add2, 20, 22);
    if (!h || goro_join(h, &r) != 0 || r != 42)
        bad |= 2;
    /* the slab of h now sits in this worker's cache; joining it again is
     * caught while it is not reused */
    if (h && goro_join(h, &r) != -EINVAL)
        bad |= 4;
    if (goro_shutdown() != -EPERM)
        bad |= 8;
    if (goro_start(NULL) != -EALREADY)
        bad |= 16;
    if (goro_set_name(NULL) != -EINVAL)
        bad |= 32;
    if (goro_set_name("ok") != 0 || strcmp(goro_name(me), "ok") != 0)
        bad |= 64;
    return bad;
}

START_TEST(misuse_inside_a_coroutine)
{
    long r = -1;
    goro_t *h = go(inside_checks);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_msg(r == 0, "failed checks (mask): %#lx (1 self-join, 2 join, 4 double "
                  "join, 8 shutdown, 16 start, 32 set_name(NULL), 64 set_name)", r);
}
END_TEST

START_TEST(misuse_outside_a_coroutine)
{
    ck_assert_int_eq(goro_set_name("main"), -EPERM);
    ck_assert_int_eq(goro_set_name(NULL), -EPERM);
    ck_assert_int_eq(goro_start(NULL), -EALREADY);
    goro_config_t cfg = { .workers = 3 };
    ck_assert_int_eq(goro_start(&cfg), -EALREADY);
    goro_yield();                       /* returns at once */
    ck_assert_ptr_null(goro_self());
}
END_TEST

Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = t_runtime_tcase(s, "errors", 30);
    tcase_add_test(tc, null_functions);
    tcase_add_test(tc, bad_stack_sizes);
    tcase_add_test(tc, join_and_detach_misuse);
    tcase_add_test(tc, misuse_inside_a_coroutine);
    tcase_add_test(tc, misuse_outside_a_coroutine);
    return s;
}
