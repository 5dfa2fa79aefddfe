/* Groups (docs/structured.md): members waited for together; the first
 * failure, the deadline, goro_group_cancel and the cancel of the group's
 * maker cancel the members, down a tree of nested groups; a limit on the
 * members running at once; the three policies; a cancelled coroutine
 * still waits for its members; bad use; and cancels racing the members'
 * ends. (Every wait kind ended by a group's cancel: test_cancel.c.)
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

static long ok_after(int64_t ns)
{
    return goro_sleep(ns) == 0 ? 7 : -ECANCELED;
}

static long sleep_long(void)
{
    return goro_sleep(3600 * GORO_SEC);        /* -ECANCELED once cancelled */
}

static void fail_with(int code, int64_t after)
{
    goro_sleep(after);
    goro_exit_err(goro_err_new(code, "member failed on purpose"));
}

static long return_negative(int code)
{
    return -code;
}

START_TEST(group_all_succeed)
{
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(goro_group_go(g, ok_after, (int64_t)(i % 3) * GORO_MSEC), 0);
    goro_err_t *err = (goro_err_t *)1;
    long r = -1;
    ck_assert_int_eq(goro_group_wait(g, &r, &err), 0);
    ck_assert_ptr_null(err);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_group_running(g), 0);
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

START_TEST(group_first_error_cancels_the_rest)
{
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){ .name = "batch" }), 0);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(goro_group_go(g, sleep_long), 0);
    ck_assert_int_eq(goro_group_go(g, fail_with, EIO, 5 * GORO_MSEC), 0);
    double t0 = t_now();
    goro_err_t *err;
    ck_assert_int_eq(goro_group_wait(g, NULL, &err), -EIO);
    double dt = t_now() - t0;
    ck_assert_msg(dt < 0.005 + t_prompt(), "the sleepers were not cancelled: %.0f ms",
                  dt * 1e3);
    ck_assert_int_eq(goro_err_code(err), EIO);
    ck_assert_str_eq(goro_err_msg(err), "member failed on purpose");
    ck_assert_uint_ne(goro_err_coroutine(err), 0);
    goro_err_free(err);
    /* Failed: nothing more is admitted. */
    ck_assert_int_eq(goro_group_go(g, ok_after, (int64_t)0), -EINVAL);   /* waited */
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

START_TEST(group_negative_return_is_a_failure)
{
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_group_go(g, return_negative, ECONNREFUSED), 0);
    goro_err_t *err;
    ck_assert_int_eq(goro_group_wait(g, NULL, &err), -ECONNREFUSED);
    ck_assert_int_eq(goro_err_code(err), ECONNREFUSED);
    char want[32];
    snprintf(want, sizeof want, "returned %d", -ECONNREFUSED);
    ck_assert_str_eq(goro_err_msg(err), want);
    goro_err_free(err);
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

/* ---- the limit ---- */

static atomic_long now_running, max_running, started_members;

static long counted(int64_t ns, int fail_at)
{
    long me = atomic_fetch_add(&started_members, 1);
    t_max_update(&max_running, atomic_fetch_add(&now_running, 1) + 1);
    int e = goro_sleep(ns);
    atomic_fetch_sub(&now_running, 1);
    if (e)
        return e;
    return me == fail_at ? -EPIPE : 0;
}

static void counters_reset(void)
{
    atomic_store(&now_running, 0);
    atomic_store(&max_running, 0);
    atomic_store(&started_members, 0);
}

/* Feeds n members into g, from whoever calls it; returns how many were
 * spawned before the group refused. */
static long feed(goro_group_t *g, long n, int fail_at)
{
    long i;
    /* Long enough that a slow spawner (TSan, qemu) still fills every slot. */
    int64_t each = fail_at < 0 ? 20 * GORO_MSEC : GORO_MSEC;
    for (i = 0; i < n; i++) {
        int e = goro_group_go(g, counted, each, fail_at);
        if (e == -ECANCELED)
            break;
        if (e)
            t_fail("goro_group_go: %d", e);
    }
    return i;
}

static void limit_run(bool from_coroutine)
{
    counters_reset();
    t_fail_reset();
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){ .limit = 3 }), 0);
    long fed;
    if (from_coroutine) {
        goro_t *h = go(feed, g, 30L, -1);
        ck_assert_int_eq(goro_join(h, &fed), 0);
    } else {
        fed = feed(g, 30, -1);
    }
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(fed, 30);
    ck_assert_int_eq(atomic_load(&started_members), 30);
    ck_assert_int_eq(atomic_load(&max_running), 3);
    ck_assert_int_eq(goro_group_free(g), 0);
}

START_TEST(group_limit_from_a_thread)
{
    limit_run(false);
}
END_TEST

START_TEST(group_limit_from_a_coroutine)
{
    limit_run(true);
}
END_TEST

/* The first failure drops the members still queued: the feeder is told. */
START_TEST(group_limit_failure_stops_the_feeder)
{
    counters_reset();
    t_fail_reset();
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){ .limit = 2 }), 0);
    long fed = feed(g, 1000, 4);
    goro_err_t *err;
    ck_assert_int_eq(goro_group_wait(g, NULL, &err), -EPIPE);
    goro_err_free(err);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(fed < 20, "the feeder went on after the failure: %ld members", fed);
    ck_assert_int_eq(atomic_load(&started_members), fed);
    ck_assert_int_le(atomic_load(&max_running), 2);
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

/* ---- policies ---- */

START_TEST(group_collect_all_lists_every_failure)
{
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){
                         .name = "all", .policy = GORO_GROUP_COLLECT_ALL }), 0);
    ck_assert_int_eq(goro_group_go(g, fail_with, EIO, (int64_t)0), 0);
    ck_assert_int_eq(goro_group_go(g, ok_after, 20 * GORO_MSEC), 0);   /* not cancelled */
    ck_assert_int_eq(goro_group_go(g, return_negative, ENOENT), 0);
    ck_assert_int_eq(goro_group_go(g, fail_with, EACCES, 2 * GORO_MSEC), 0);
    goro_err_t *err;
    int rc = goro_group_wait(g, NULL, &err);
    ck_assert_int_eq(goro_err_count(err), 3);
    ck_assert_int_eq(rc, -goro_err_code(goro_err_at(err, 0)));
    int seen = 0;
    for (size_t i = 0; i < 3; i++) {
        int c = goro_err_code(goro_err_at(err, i));
        seen |= (c == EIO) | (c == ENOENT) << 1 | (c == EACCES) << 2;
    }
    ck_assert_int_eq(seen, 7);
    ck_assert_str_eq(goro_err_msg(err), "group \"all\": 3 of its 4 members failed");
    goro_err_free(err);
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

static long answer_after(long value, int64_t ns)
{
    int e = goro_sleep(ns);
    return e ? e : value;
}

START_TEST(group_first_result_wins_and_cancels)
{
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){
                         .policy = GORO_GROUP_FIRST_RESULT }), 0);
    ck_assert_int_eq(goro_group_go(g, answer_after, 1L, 3600 * GORO_SEC), 0);
    ck_assert_int_eq(goro_group_go(g, return_negative, EIO), 0);   /* a failure: no matter */
    ck_assert_int_eq(goro_group_go(g, answer_after, 3L, 3600 * GORO_SEC), 0);
    /* the winner last: once it has answered, the group takes no more */
    ck_assert_int_eq(goro_group_go(g, answer_after, 42L, 5 * GORO_MSEC), 0);
    long r = 0;
    double t0 = t_now();
    ck_assert_int_eq(goro_group_wait(g, &r, NULL), 0);
    ck_assert_msg(t_now() - t0 < 0.005 + t_prompt(), "the slow ones were not cancelled");
    ck_assert_int_eq(r, 42);
    ck_assert_int_eq(goro_group_free(g), 0);

    /* None succeeds: every failure is listed. */
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){
                         .name = "any", .policy = GORO_GROUP_FIRST_RESULT }), 0);
    ck_assert_int_eq(goro_group_go(g, return_negative, EIO), 0);
    ck_assert_int_eq(goro_group_go(g, fail_with, ENOENT, GORO_MSEC), 0);
    goro_err_t *err;
    ck_assert_int_lt(goro_group_wait(g, &r, &err), 0);
    ck_assert_int_eq(goro_err_count(err), 2);
    ck_assert_str_eq(goro_err_msg(err), "group \"any\": none of its 2 members succeeded");
    goro_err_free(err);
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

/* On the virtual clock: the group ends exactly at its deadline, its
 * members cancelled, and says why; members that end in time keep the
 * deadline from firing, also after the group is freed (ASan would see a
 * stale one use freed memory). */
static void deadline_body(void *unused)
{
    (void)unused;
    goro_group_t *g;
    int64_t deadline = goro_now() + 30 * GORO_MSEC;
    T_VCHECK(goro_group_new(&g, &(goro_group_attr_t){ .name = "slow", .deadline = deadline })
             == 0, "group_new");
    for (int i = 0; i < 4; i++)
        T_VCHECK(goro_group_go(g, sleep_long) == 0, "member %d refused", i);
    goro_err_t *err = NULL;
    int r = goro_group_wait(g, NULL, &err);
    T_VCHECK(r == -ETIMEDOUT && goro_now() == deadline,
             "group_wait: %d, %.3f ms after the deadline; want -ETIMEDOUT at it", r,
             t_ms(goro_now() - deadline));
    T_VCHECK(err && strcmp(goro_err_msg(err), "group \"slow\": its deadline passed") == 0,
             "error: %s", err ? goro_err_msg(err) : "none");
    goro_err_free(err);
    T_VCHECK(goro_group_go(g, sleep_long) == -EINVAL, "a member after the end was taken");
    goro_group_free(g);

    int64_t t0 = goro_now();
    T_VCHECK(goro_group_new(&g, &(goro_group_attr_t){ .deadline = t0 + 20 * GORO_MSEC }) == 0,
             "group_new");
    T_VCHECK(goro_group_go(g, ok_after, (int64_t)GORO_MSEC) == 0, "group_go");
    T_VCHECK(goro_group_wait(g, NULL, NULL) == 0 && goro_now() == t0 + GORO_MSEC,
             "members that ended in time: the group did not end with them at 1 ms");
    goro_group_free(g);
    goro_sleep(30 * GORO_MSEC);     /* a stale deadline would fire now, on freed memory */
}

START_TEST(group_deadline_cancels_it)
{
    t_virtual(deadline_body, NULL);
}
END_TEST

/* The group area's one real-clock latency case: a group's deadline ends
 * it promptly on the real clock, with members on several workers; a
 * host that stops this thread for the 30 ms sees the later members
 * refused, rightly: refused only once the deadline has passed. */
START_TEST(real_clock_group_deadline_latency)
{
    goro_group_t *g;
    int64_t deadline = goro_now() + 30 * GORO_MSEC;
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){
                         .name = "slow", .deadline = deadline }), 0);
    for (int i = 0; i < 4; i++) {
        int rc = goro_group_go(g, sleep_long);
        ck_assert_msg(rc == 0 || (rc == -ECANCELED && goro_now() >= deadline),
                      "member %d: %d, %.1f ms before the deadline", i, rc,
                      t_ms(deadline - goro_now()));
    }
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), -ETIMEDOUT);
    int64_t late = goro_now() - deadline;
    ck_assert_msg(late >= 0 && late < (int64_t)(t_prompt() * GORO_SEC) + t_host_stalled(),
                  "ended %.1f ms after the deadline (the host stalled %.1f ms)", t_ms(late),
                  t_ms(t_host_stalled()));
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

/* ---- the tree ---- */

#define DEPTH 5

struct level_report {
    atomic_int leaf_parked;
    atomic_int cleaned[DEPTH + 1];  /* level i's member finished its cleanup */
    int wait_rc[DEPTH + 1];
};
static struct level_report lr;

/* Level `depth` makes a group, puts level depth+1 in it and waits; the
 * leaf sleeps until cancelled, then spends 10 ms cleaning up (without
 * waiting): a waiter that did not wait for it would see no cleanup. */
static long level(int depth)
{
    if (depth == DEPTH) {
        atomic_store(&lr.leaf_parked, 1);
        int e = goro_sleep(3600 * GORO_SEC);
        for (double end = t_now() + 0.01; t_now() < end;)
            ;
        atomic_store(&lr.cleaned[depth], 1);
        return e;
    }
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return -ENOMEM;
    if (goro_group_go(g, level, depth + 1) != 0)
        t_fail("level %d: goro_group_go failed", depth);
    int rc = goro_group_wait(g, NULL, NULL);
    lr.wait_rc[depth] = rc;
    if (!atomic_load(&lr.cleaned[depth + 1]))
        t_fail("level %d: the wait returned before its member's cleanup", depth);
    goro_group_free(g);
    atomic_store(&lr.cleaned[depth], 1);
    return rc;
}

START_TEST(group_cancel_reaches_5_levels_down)
{
    memset(&lr, 0, sizeof lr);
    t_fail_reset();
    goro_t *top = go(level, 0);
    ck_assert_msg(t_wait_flag(&lr.leaf_parked, t_timeout(10)), "the leaf never started");
    t_settle();
    double t0 = t_now();
    ck_assert_int_eq(goro_cancel(top), 0);
    long r;
    ck_assert_int_eq(goro_join(top, &r), 0);
    ck_assert_msg(t_now() - t0 < 0.01 + t_prompt(), "the tree took %.0f ms to unwind",
                  (t_now() - t0) * 1e3);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    for (int d = 0; d < DEPTH; d++)
        ck_assert_msg(lr.wait_rc[d] == -ECANCELED, "level %d's wait: %d", d, lr.wait_rc[d]);
    ck_assert_int_eq(r, -ECANCELED);
}
END_TEST

/* A detached coroutine that made a group: its token's cancel reaches the
 * group too. */
START_TEST(group_cancel_by_token_reaches_the_group)
{
    memset(&lr, 0, sizeof lr);
    t_fail_reset();
    goro_t *h = go(level, DEPTH - 1);
    goro_token_t tok;
    ck_assert_int_eq(goro_token(h, &tok), 0);
    ck_assert_int_eq(goro_detach(h), 0);
    ck_assert_msg(t_wait_flag(&lr.leaf_parked, t_timeout(10)), "the leaf never started");
    ck_assert_int_eq(goro_cancel_token(tok), 0);
    ck_assert_msg(t_wait_flag(&lr.cleaned[DEPTH - 1], t_timeout(10)), "the tree never ended");
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(lr.wait_rc[DEPTH - 1], -ECANCELED);
}
END_TEST

static long make_group_when_cancelled(void)
{
    goro_cancel(goro_self());
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return 1;
    long bad = 0;
    bad |= (goro_group_go(g, ok_after, (int64_t)0) != -ECANCELED) << 1;
    bad |= (goro_group_wait(g, NULL, NULL) != -ECANCELED) << 2;
    bad |= (goro_group_free(g) != 0) << 3;
    return bad;
}

START_TEST(group_made_by_a_cancelled_coroutine_starts_cancelled)
{
    goro_t *h = go(make_group_when_cancelled);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
}
END_TEST

/* A group without a limit admits a member once it is made: a refused one
 * is discarded there, before it could run. */
static atomic_int refused_ran;

static void must_not_run(void)
{
    atomic_fetch_add(&refused_ran, 1);
}

/* The process's address space, from /proc/self/statm. */
static long vm_size_mib(void)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld", &pages), 1);
    fclose(f);
    return pages * sysconf(_SC_PAGESIZE) / (1 << 20);
}

static int spawn_refused(goro_group_t *g)
{
    goro_attr_t attr = { .group = g, .name = "refused-member" };
    return goro_go(NULL, &attr, must_not_run);
}

START_TEST(group_refused_member_never_runs_nor_stays)
{
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_group_cancel(g), 0);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(spawn_refused(g), -ECANCELED);
    ck_assert_int_eq(goro_group_running(g), 0);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), -ECANCELED);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(spawn_refused(g), -EINVAL);
    ck_assert_int_eq(goro_group_free(g), 0);
    goro_sleep(5 * GORO_MSEC);
    ck_assert_int_eq(atomic_load(&refused_ran), 0);
    /* Nothing is kept of them: 20,000 more refusals map no more stacks
     * (each kept one would hold a stack's reserve, 20,000 of them over a
     * GiB of address space). */
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_group_cancel(g), 0);
    long before = vm_size_mib();
    for (int i = 0; i < 20000; i++)
        ck_assert_int_eq(spawn_refused(g), -ECANCELED);
    long grown = vm_size_mib() - before;
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), -ECANCELED);
    ck_assert_int_eq(goro_group_free(g), 0);
    ck_assert_msg(grown < 64, "20,000 refused members took %ld MiB more address space", grown);
}
END_TEST

/* ---- bad use ---- */

static long wait_own_group(goro_group_t **gp)
{
    return goro_group_wait(*gp, NULL, NULL);
}

static void must_not_run_arg(long x)
{
    (void)x;
    must_not_run();
}

static long group_go_null_from_coroutine(void)
{
    return goro_group_go(NULL, must_not_run);
}

START_TEST(group_bad_use)
{
    goro_group_t *g;
    long r = 0;
    ck_assert_int_eq(goro_group_new(NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){ .limit = -1 }), -EINVAL);
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){ .policy = 9 }), -EINVAL);
    ck_assert_int_eq(goro_group_wait(NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_group_cancel(NULL), -EINVAL);
    ck_assert_int_eq(goro_group_free(NULL), -EINVAL);
    ck_assert_int_eq(goro_group_running(NULL), -EINVAL);
    /* A NULL group: refused, not a detached coroutine outside any group
     * (that one would run must_not_run). */
    atomic_store(&refused_ran, 0);
    int rc = goro_group_go(NULL, must_not_run);
    ck_assert_int_eq(rc, -EINVAL);
    rc = goro_group_go(NULL, must_not_run_arg, 7L);
    ck_assert_int_eq(rc, -EINVAL);
    goro_t *h;
    ck_assert_int_eq(goro_join(go(group_go_null_from_coroutine), &r), 0);
    ck_assert_int_eq(r, -EINVAL);
    goro_sleep(5 * GORO_MSEC);
    ck_assert_int_eq(atomic_load(&refused_ran), 0);
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_spawn(&h, &(goro_attr_t){ .group = g }, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_go(&h, &(goro_attr_t){ .group = g }, sleep_long), -EINVAL);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(goro_group_running(g), 0);
    /* Freeing a group with members. */
    ck_assert_int_eq(goro_group_go(g, sleep_long), 0);
    ck_assert_int_eq(goro_group_free(g), -EBUSY);
    ck_assert_int_eq(goro_group_running(g), 1);
    ck_assert_int_eq(goro_group_cancel(g), 0);
    goro_err_t *err;
    ck_assert_int_eq(goro_group_wait(g, NULL, &err), -ECANCELED);
    goro_err_free(err);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), -EINVAL);    /* twice */
    ck_assert_int_eq(goro_group_free(g), 0);
    /* A member waiting for its own group. */
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_group_go(g, wait_own_group, &g), 0);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), -EDEADLK);
    ck_assert_int_eq(goro_group_free(g), 0);
}
END_TEST

/* ---- cancels racing the members' ends ---- */

static long random_member(uint32_t seed)
{
    uint32_t s = seed;
    int steps = (int)(t_rnd(&s) % 8);
    for (int i = 0; i < steps; i++)
        if (t_rnd(&s) % 2)
            goro_yield();
        else if (goro_sleep(GORO_USEC * (t_rnd(&s) % 50)) != 0)
            return -ECANCELED;
    switch (t_rnd(&s) % 5) {
    case 0: return -EIO;
    case 1: goro_exit_err(goro_err_new(EPIPE, "random"));
    default: return 0;
    }
}

static long random_nest(uint32_t seed, int depth)
{
    uint32_t s = seed;
    goro_group_t *g;
    int policy = (int)(t_rnd(&s) % 3);
    if (goro_group_new(&g, &(goro_group_attr_t){ .policy = policy,
                                                 .limit = (int)(t_rnd(&s) % 4) }) != 0)
        return -ENOMEM;
    int n = 1 + (int)(t_rnd(&s) % 6);
    for (int i = 0; i < n; i++) {
        int e = depth < 2 && t_rnd(&s) % 3 == 0
                    ? goro_group_go(g, random_nest, t_rnd(&s), depth + 1)
                    : goro_group_go(g, random_member, t_rnd(&s));
        if (e && e != -ECANCELED)
            t_fail("goro_group_go: %d", e);
        if (e)
            break;
    }
    if (t_rnd(&s) % 4 == 0)
        goro_group_cancel(g);
    goro_err_t *err = NULL;
    int rc = goro_group_wait(g, NULL, &err);
    if ((rc == 0) != (err == NULL))
        t_fail("wait: %d with error %p", rc, (void *)err);
    if (goro_group_running(g) != 0)
        t_fail("members left after the wait: %d", goro_group_running(g));
    goro_err_free(err);
    if (goro_group_free(g) != 0)
        t_fail("goro_group_free failed after the wait");
    return rc;
}

START_TEST(group_cancel_races_the_ends)
{
    t_fail_reset();
    uint32_t s = (uint32_t)time(NULL) | 1;
    double end = t_now() + (t_slow() ? 1.0 : 2.0);
    long rounds = 0;
    while (t_now() < end) {
        goro_t *h[4];
        for (int i = 0; i < 4; i++)
            h[i] = go(random_nest, t_rnd(&s), 0);
        if (t_rnd(&s) % 2)
            for (int k = (int)(t_rnd(&s) % 200); k > 0; k--)
                __asm__ volatile("" ::: "memory");
        for (int i = 0; i < 4; i++)
            if (t_rnd(&s) % 2)
                goro_cancel(h[i]);
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(goro_join(h[i], NULL), 0);
        ck_assert_msg(!t_failed(), "round %ld (seed %u): %s", rounds, s, t_failed());
        rounds++;
    }
    ck_assert_int_gt(rounds, 10);
}
END_TEST

#ifdef GORO_DEBUG
#include "internal.h"
#include "sched/sched.h"

/* ---- debug builds: a cancel at the end of a slice ----
 * A group's cancel tells its members' after-functions (a channel send)
 * under the group's lock. The send looks for a cut slice on its way out;
 * yielding there carried the group's lock across a switch (post_switch
 * asserts it never is; on one worker, the next coroutine to want the lock
 * would wait for ever). Here the canceller's slice is cut the way sysmon
 * cuts it, just before the cancel. */
static atomic_int cut_member_armed, cut_after_ran;

static void cut_after(void *arg)
{
    (void)arg;
    atomic_store(&cut_after_ran, 1);
}

static long cut_member(void *arg)
{
    (void)arg;
    if (goro_after_cancel(NULL, cut_after, NULL, NULL) != 0)
        return -1;
    atomic_store(&cut_member_armed, 1);
    goro_sleep(t_timeout(10) * GORO_SEC);
    return 0;
}

static long cancel_at_a_cut(void *arg)
{
    struct goro_p *p = goro__current_p();
    atomic_store(&p->preempt_req, atomic_load(&p->schedtick) + 1);
    return goro_group_cancel(arg);
}

START_TEST(debug_a_cancel_at_a_cut_slice_keeps_no_lock_across_a_switch)
{
    atomic_store(&cut_member_armed, 0);
    atomic_store(&cut_after_ran, 0);
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);
    ck_assert_int_eq(goro_spawn(NULL, &(goro_attr_t){ .group = g }, cut_member, NULL), 0);
    ck_assert(t_wait_flag(&cut_member_armed, t_timeout(10)));
    long r = -1;
    ck_assert_int_eq(goro_join(go(cancel_at_a_cut, g), &r), 0);
    ck_assert_int_eq(r, 0);
    goro_err_t *err = NULL;
    goro_group_wait(g, NULL, &err);
    goro_err_free(err);
    goro_group_free(g);
    ck_assert(t_wait_flag(&cut_after_ran, t_timeout(10)));
}
END_TEST

/* ---- debug builds: what a C++ member leaves is destroyed under the lock ----
 * A C++ group member whose exception escapes ends with an error carrying
 * the exception (coro/cxx.c, keep_in_group); goro_err_free destroys it,
 * which runs the exception's destructor - the program's code. In a
 * FIRST_ERROR group the failures after the first are freed in
 * member_failed, under the group's lock. Built here the way keep_in_group
 * builds it, with a destroy that notes the thread's lock count and, in
 * the second case, waits as a destructor may (a goro call that parks). */
#include "goro/cxx.h"

static atomic_int esc_destroyed, esc_max_locks, esc_waits;

static long esc_nap(void *arg)
{
    (void)arg;
    usleep(1000);
    return 0;
}

static void esc_destroy(struct goro__cxx_escaped *x)
{
    int n = goro__locks_count();
    if (n > atomic_load(&esc_max_locks))
        atomic_store(&esc_max_locks, n);
    if (atomic_load(&esc_waits)) {
        /* A destructor that waits, as one that closes a file through the
         * offload pool does: a firm wait, which even a cancelled member's
         * call makes (a goro_sleep would return at once: the first
         * failure has cancelled this member). */
        long r;
        goro_offload(esc_nap, NULL, &r);
    }
    atomic_fetch_add(&esc_destroyed, 1);
    free(x);
}

static long esc_member(void *arg)
{
    (void)arg;
    goro_sleep(GORO_MSEC);
    struct goro__cxx_escaped *x = calloc(1, sizeof *x);
    x->destroy = esc_destroy;
    x->what = "escaped";
    goro_err_t *e = goro_err_new(ENOTRECOVERABLE, "escaped");
    if (goro__err_set_escaped(e, x) != 0)
        return -ENOMEM;
    goro_exit_err(e);
    return 0;
}

static void esc_run(int waits)
{
    atomic_store(&esc_destroyed, 0);
    atomic_store(&esc_max_locks, 0);
    atomic_store(&esc_waits, waits);
    goro_group_t *g;
    ck_assert_int_eq(goro_group_new(&g, NULL), 0);     /* FIRST_ERROR */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(goro_spawn(NULL, &(goro_attr_t){ .group = g }, esc_member, NULL), 0);
    goro_err_t *err = NULL;
    goro_group_wait(g, NULL, &err);
    goro_err_free(err);             /* the first one's: here, no lock held */
    goro_group_free(g);
    ck_assert_int_eq(atomic_load(&esc_destroyed), 2);
    ck_assert_msg(atomic_load(&esc_max_locks) == 0,
                  "an escaped exception was destroyed holding %d runtime lock(s)",
                  atomic_load(&esc_max_locks));
}

START_TEST(debug_an_escaped_exception_is_not_destroyed_under_the_group_lock)
{
    esc_run(0);
}
END_TEST

START_TEST(debug_an_escaped_exception_destructor_may_wait)
{
    esc_run(1);
}
END_TEST
#endif

Suite *group_suite(void)
{
    Suite *s = suite_create("group");
    TCase *tc = t_runtime_tcase(s, "group", 60);
    tcase_add_checked_fixture(tc, t_host_watch_fixture_begin, t_host_watch_fixture_end);
    tcase_add_test(tc, group_all_succeed);
    tcase_add_test(tc, group_first_error_cancels_the_rest);
    tcase_add_test(tc, group_negative_return_is_a_failure);
    tcase_add_test(tc, group_limit_from_a_thread);
#ifdef GORO_DEBUG
    tcase_add_test(tc, debug_a_cancel_at_a_cut_slice_keeps_no_lock_across_a_switch);
    tcase_add_test(tc, debug_an_escaped_exception_is_not_destroyed_under_the_group_lock);
    tcase_add_test(tc, debug_an_escaped_exception_destructor_may_wait);
#endif
    tcase_add_test(tc, group_limit_from_a_coroutine);
    tcase_add_test(tc, group_limit_failure_stops_the_feeder);
    tcase_add_test(tc, group_collect_all_lists_every_failure);
    tcase_add_test(tc, group_first_result_wins_and_cancels);
    tcase_add_test(tc, group_deadline_cancels_it);
    tcase_add_test(tc, real_clock_group_deadline_latency);
    tcase_add_test(tc, group_cancel_reaches_5_levels_down);
    tcase_add_test(tc, group_cancel_by_token_reaches_the_group);
    tcase_add_test(tc, group_made_by_a_cancelled_coroutine_starts_cancelled);
    tcase_add_test(tc, group_refused_member_never_runs_nor_stays);
    tcase_add_test(tc, group_bad_use);
    tcase_add_test(tc, group_cancel_races_the_ends);
    return s;
}
