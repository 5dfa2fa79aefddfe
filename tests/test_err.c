/* Error objects: their parts, printing, ownership through exit and join. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <goro.h>

#include "helpers.h"
#include "suites.h"

/* What goro_err_print writes for e. */
static char *printed(const goro_err_t *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(goro_err_print(f, e), 0);
    fclose(f);
    return text;
}

START_TEST(err_parts_and_printing)
{
    goro_err_t *refused = goro_err_new(-ECONNREFUSED, "connect to %s", "127.0.0.1:9");
    ck_assert_int_eq(goro_err_code(refused), ECONNREFUSED);
    ck_assert_str_eq(goro_err_msg(refused), "connect to 127.0.0.1:9");
    ck_assert_uint_eq(goro_err_coroutine(refused), 0);       /* not made in one */
    ck_assert_str_eq(goro_err_coroutine_name(refused), "");

    goro_err_t *fetch = goro_err_wrap(refused, EIO, "fetch %d failed", 3);
    ck_assert_ptr_eq(goro_err_cause(fetch), refused);
    ck_assert_ptr_null(goro_err_cause(refused));
    char *want = NULL, *got = printed(fetch);
    ck_assert_int_ge(asprintf(&want, "fetch 3 failed: %s\n  caused by: connect to 127.0.0.1:9: %s\n",
                              strerror(EIO), strerror(ECONNREFUSED)), 0);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);

    /* A list of failures, one of them with a cause of its own; no message
     * means strerror's. */
    goro_err_t *batch = goro_err_new(ECANCELED, "batch");
    ck_assert_int_eq(goro_err_add(batch, goro_err_new(ETIMEDOUT, NULL)), 0);
    ck_assert_int_eq(goro_err_add(batch, goro_err_wrap(goro_err_new(ENOENT, "open a"), EIO,
                                                       "load a")), 0);
    ck_assert_uint_eq(goro_err_count(batch), 2);
    ck_assert_str_eq(goro_err_msg(goro_err_at(batch, 0)), strerror(ETIMEDOUT));
    ck_assert_ptr_null(goro_err_at(batch, 2));
    got = printed(batch);
    ck_assert_int_ge(asprintf(&want, "batch: %s\n  - %s\n  - load a: %s\n      caused by: open a: %s\n",
                              strerror(ECANCELED), strerror(ETIMEDOUT), strerror(EIO),
                              strerror(ENOENT)), 0);
    ck_assert_str_eq(got, want);
    free(got);
    free(want);

    /* Many items: the list grows. */
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(goro_err_add(batch, goro_err_new(EAGAIN, "item %d", i)), 0);
    ck_assert_uint_eq(goro_err_count(batch), 102);
    ck_assert_str_eq(goro_err_msg(goro_err_at(batch, 101)), "item 99");

    goro_err_free(fetch);
    goro_err_free(batch);
}
END_TEST

/* A copy prints the same and lives on alone: the original freed first,
 * the copy's parts still read (ASan and valgrind see any sharing). */
START_TEST(err_copy_is_deep)
{
    goro_err_t *batch = goro_err_new(EIO, "batch");
    ck_assert_int_eq(goro_err_add(batch, goro_err_wrap(goro_err_new(ECONNREFUSED, "connect"),
                                                       EIO, "item 1")), 0);
    ck_assert_int_eq(goro_err_add(batch, goro_err_new(ETIMEDOUT, NULL)), 0);
    goro_err_t *top = goro_err_wrap(batch, EAGAIN, "retry later");
    char *want = printed(top);
    goro_err_t *copy = goro_err_copy(top);
    ck_assert_ptr_nonnull(copy);
    ck_assert_ptr_ne(copy, top);
    ck_assert_ptr_ne(goro_err_cause(copy), batch);
    goro_err_free(top);
    char *got = printed(copy);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(goro_err_count(goro_err_cause(copy)), 2);
    ck_assert_str_eq(goro_err_msg(goro_err_cause(goro_err_at(goro_err_cause(copy), 0))),
                     "connect");
    goro_err_free(copy);
    free(got);
    free(want);
    ck_assert_ptr_null(goro_err_copy(NULL));
}
END_TEST

START_TEST(err_bad_input)
{
    goro_err_t *e = goro_err_new(EINVAL, "e");
    ck_assert_int_eq(goro_err_add(NULL, e), -EINVAL);
    ck_assert_int_eq(goro_err_add(e, NULL), -EINVAL);
    ck_assert_int_eq(goro_err_add(e, e), -EINVAL);
    ck_assert_int_eq(goro_err_print(NULL, e), -EINVAL);
    ck_assert_int_eq(goro_err_print(stderr, NULL), -EINVAL);
    ck_assert_int_eq(goro_err_code(NULL), 0);
    ck_assert_str_eq(goro_err_msg(NULL), "");
    ck_assert_ptr_null(goro_err_cause(NULL));
    ck_assert_uint_eq(goro_err_count(NULL), 0);
    ck_assert_ptr_null(goro_err_at(NULL, 0));
    ck_assert_uint_eq(goro_err_coroutine(NULL), 0);
    ck_assert_str_eq(goro_err_coroutine_name(NULL), "");
    goro_err_t *plain = goro_err_wrap(NULL, 0, NULL);     /* no code, no message */
    ck_assert_str_eq(goro_err_msg(plain), "");
    goro_err_free(plain);
    goro_err_free(NULL);
    goro_err_free(e);
}
END_TEST

/* ---- through exit and join ---- */

static uint64_t failer_id;

static void failer(int code)
{
    failer_id = goro_id(goro_self());
    goro_err_t *cause = goro_err_new(ECONNREFUSED, "connect");
    goro_exit_err(goro_err_wrap(cause, code, "fetch"));
}

static long succeeder(void)
{
    return 7;
}

static void ends_without_error(void)
{
    goro_exit_err(NULL);
}

START_TEST(err_reaches_the_joiner)
{
    static const goro_attr_t named = { .name = "fetcher" };
    goro_t *h;
    long r = 0;
    goro_err_t *err = NULL;
    ck_assert_int_eq(goro_go(&h, &named, failer, EIO), 0);
    ck_assert_int_eq(goro_join_err(h, &r, &err), 0);
    ck_assert_int_eq(r, -EIO);                       /* the result says it too */
    ck_assert_ptr_nonnull(err);
    ck_assert_int_eq(goro_err_code(err), EIO);
    ck_assert_uint_eq(goro_err_coroutine(err), failer_id);
    ck_assert_str_eq(goro_err_coroutine_name(err), "fetcher");
    ck_assert_int_eq(goro_err_code(goro_err_cause(err)), ECONNREFUSED);
    char *text = printed(err), *want = NULL;
    ck_assert_int_ge(asprintf(&want, "fetch: %s [coroutine %llu fetcher]\n  caused by: connect: %s "
                              "[coroutine %llu fetcher]\n", strerror(EIO),
                              (unsigned long long)failer_id, strerror(ECONNREFUSED),
                              (unsigned long long)failer_id), 0);
    ck_assert_str_eq(text, want);
    free(text);
    free(want);
    goro_err_free(err);

    /* No error: *err is NULL, whatever it held. */
    err = (goro_err_t *)&r;
    ck_assert_int_eq(goro_go(&h, NULL, succeeder), 0);
    ck_assert_int_eq(goro_join_err_until(h, &r, &err, goro_now() + 10 * GORO_SEC), 0);
    ck_assert_ptr_null(err);
    ck_assert_int_eq(r, 7);
    err = (goro_err_t *)&r;
    ck_assert_int_eq(goro_go(&h, NULL, ends_without_error), 0);
    ck_assert_int_eq(goro_join_err(h, &r, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_join_err(NULL, &r, &err), -EINVAL);
}
END_TEST

/* An error nobody takes goes with its coroutine: a plain join, a join_err
 * without err, a detached coroutine (ASan and valgrind see a leak). */
static void detached_failer(goro_waitgroup_t *wg)
{
    goro_waitgroup_done(wg);
    goro_exit_err(goro_err_new(ENOMEM, "detached"));
}

START_TEST(err_not_taken_is_freed)
{
    goro_t *h;
    long r = 0;
    ck_assert_int_eq(goro_go(&h, NULL, failer, EPIPE), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -EPIPE);
    ck_assert_int_eq(goro_go(&h, NULL, failer, EPIPE), 0);
    ck_assert_int_eq(goro_join_err(h, NULL, NULL), 0);
    goro_waitgroup_t wg = GORO_WAITGROUP_INIT;
    goro_waitgroup_add(&wg, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(goro_go(NULL, NULL, detached_failer, &wg), 0);
    ck_assert_int_eq(goro_waitgroup_wait(&wg), 0);
}
END_TEST

/* Many coroutines end with errors of their own while joiners on other
 * workers take them in a random order: each error reaches its own joiner. */
#define MANY 2000

static void numbered_failer(int i)
{
    if (i % 3 == 0)
        goro_yield();
    goro_exit_err(goro_err_new(1 + i % 100, "failer %d", i));
}

struct taker {
    goro_t **h;
    const int *order;
    int from, n;
};

static void take_errors(struct taker *t)
{
    for (int k = 0; k < t->n; k++) {
        int i = t->order[t->from + k];
        goro_err_t *err = NULL;
        long r = 0;
        char want[32];
        snprintf(want, sizeof want, "failer %d", i);
        if (goro_join_err(t->h[i], &r, &err) != 0 || !err || goro_err_code(err) != 1 + i % 100 ||
            r != -(1 + i % 100) || strcmp(goro_err_msg(err), want) != 0)
            t_fail("coroutine %d: r %ld, error %s", i, r, err ? goro_err_msg(err) : "none");
        goro_err_free(err);
    }
}

START_TEST(err_many_joiners)
{
    static goro_t *h[MANY];
    static int order[MANY];
    static struct taker takers[8];
    int per = (int)t_live(MANY) / 8, many = per * 8;
    ck_assert_int_gt(per, 0);
    for (int i = 0; i < many; i++) {
        order[i] = i;
        ck_assert_int_eq(goro_go(&h[i], NULL, numbered_failer, i), 0);
    }
    /* Joined in a shuffled order, so that joins and exits interleave
     * differently each run. */
    for (int i = many - 1; i > 0; i--) {
        int j = rand() % (i + 1), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    goro_t *th[8];
    for (int t = 0; t < 8; t++) {
        takers[t] = (struct taker){ h, order, t * per, per };
        ck_assert_int_eq(goro_go(&th[t], NULL, take_errors, &takers[t]), 0);
    }
    for (int t = 0; t < 8; t++)
        ck_assert_int_eq(goro_join(th[t], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
}
END_TEST

Suite *err_suite(void)
{
    Suite *s = suite_create("err");
    TCase *tc = t_runtime_tcase(s, "err", 30);
    tcase_add_test(tc, err_parts_and_printing);
    tcase_add_test(tc, err_copy_is_deep);
    tcase_add_test(tc, err_bad_input);
    tcase_add_test(tc, err_reaches_the_joiner);
    tcase_add_test(tc, err_not_taken_is_freed);
    tcase_add_test(tc, err_many_joiners);
    return s;
}
