/* The second layer of structured concurrency (docs/structured.md): the
 * weighted semaphore, futures, cancellation causes, TryGo and SetLimit
 * (done channels and coroutine-local storage: test_watch.c).
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

/* ---- weighted semaphore ---- */

static goro_wsem_t wsem;

struct wreq {
    long n;
    int64_t deadline;
    int code;
    atomic_int got;                /* it holds its units */
};

static int wsem_take(struct wreq *r)
{
    r->code = goro_wsem_acquire_until(&wsem, r->n, r->deadline ? r->deadline : GORO_FOREVER);
    if (r->code == 0)
        atomic_store(&r->got, 1);
    return r->code;
}

/* Waits until n callers are queued. */
static void wsem_wait_queued(int n)
{
    double end = t_now() + t_timeout(10);
    while (goro_wsem_waiting(&wsem) < n && t_now() < end)
        t_nap(0.001);
    ck_assert_int_eq(goro_wsem_waiting(&wsem), n);
}

START_TEST(wsem_bad_use)
{
    ck_assert_int_eq(goro_wsem_init(NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_wsem_init(&wsem, -1), -EINVAL);
    ck_assert_int_eq(goro_wsem_init(&wsem, 4), 0);
    ck_assert_int_eq(goro_wsem_acquire(NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_wsem_acquire(&wsem, -1), -EINVAL);
    ck_assert_int_eq(goro_wsem_acquire(&wsem, 5), -EINVAL);   /* never satisfiable */
    ck_assert_int_eq(goro_wsem_release(&wsem, 1), -EINVAL);   /* nothing held */
    ck_assert_int_eq(goro_wsem_acquire(&wsem, 3), 0);
    ck_assert_int_eq(goro_wsem_try_acquire(&wsem, 2), -EAGAIN);
    ck_assert_int_eq(goro_wsem_try_acquire(&wsem, 1), 0);
    ck_assert_int_eq(goro_wsem_held(&wsem), 4);
    ck_assert_int_eq(goro_wsem_release(&wsem, 5), -EINVAL);   /* more than held */
    ck_assert_int_eq(goro_wsem_held(&wsem), 4);
    ck_assert_int_eq(goro_wsem_release(&wsem, 4), 0);
    ck_assert_int_eq(goro_wsem_acquire(&wsem, 0), 0);
    ck_assert_int_eq(goro_wsem_destroy(&wsem), 0);
    goro_wsem_t st = GORO_WSEM_INIT(7);
    ck_assert_int_eq(goro_wsem_try_acquire(&st, 7), 0);
    ck_assert_int_eq(goro_wsem_held(&st), 7);
}
END_TEST

/* A large request at the head holds back a small later one that would
 * fit (FIFO); when the large one gives up, the small one gets in. */
START_TEST(wsem_fifo_large_head_blocks_small)
{
    ck_assert_int_eq(goro_wsem_init(&wsem, 10), 0);
    ck_assert_int_eq(goro_wsem_acquire(&wsem, 5), 0);      /* 5 free */
    struct wreq big = { .n = 8 }, small = { .n = 2 };
    goro_t *hb = go(wsem_take, &big);
    wsem_wait_queued(1);
    goro_t *hs = go(wsem_take, &small);
    wsem_wait_queued(2);
    ck_assert_int_eq(goro_wsem_try_acquire(&wsem, 1), -EAGAIN);   /* others wait */
    t_settle();
    ck_assert_int_eq(atomic_load(&small.got), 0);           /* 2 fit, but 8 is first */
    ck_assert_int_eq(goro_wsem_release(&wsem, 3), 0);       /* 8 free: big, then not small */
    ck_assert_int_eq(goro_join(hb, NULL), 0);
    ck_assert_int_eq(big.code, 0);
    ck_assert_int_eq(goro_wsem_held(&wsem), 10);
    ck_assert_int_eq(goro_wsem_release(&wsem, 2), 0);       /* small's 2 */
    ck_assert_int_eq(goro_join(hs, NULL), 0);
    ck_assert_int_eq(small.code, 0);
    ck_assert_int_eq(goro_wsem_release(&wsem, 10), 0);

    /* The head gives up (deadline): the one behind it fits and is let in
     * at once, without a release. */
    ck_assert_int_eq(goro_wsem_acquire(&wsem, 5), 0);
    big = (struct wreq){ .n = 8 };
    small = (struct wreq){ .n = 2 };
    hb = go(wsem_take, &big);
    wsem_wait_queued(1);
    hs = go(wsem_take, &small);
    wsem_wait_queued(2);
    ck_assert_int_eq(goro_cancel(hb), 0);
    ck_assert_int_eq(goro_join(hb, NULL), 0);
    ck_assert_int_eq(big.code, -ECANCELED);
    ck_assert_int_eq(goro_join(hs, NULL), 0);
    ck_assert_int_eq(small.code, 0);
    ck_assert_int_eq(goro_wsem_held(&wsem), 7);
    ck_assert_int_eq(goro_wsem_release(&wsem, 7), 0);
    ck_assert_int_eq(goro_wsem_destroy(&wsem), 0);
}
END_TEST

/* Randomized stress: workers take random amounts (some with deadlines that
 * pass, some cancelled), hold them briefly and give them back. Checked: the
 * units held never exceed the size; a full-size request among a stream of
 * small ones is served (FIFO: it cannot starve); nothing is left held or
 * queued; nobody hangs (a waiter that gave up lets the next one in). */
enum { WS_SIZE = 16 };
static atomic_long ws_held, ws_max, ws_done, ws_gave_up, ws_big_served;
static atomic_int ws_stop;

static void ws_worker(long seed)
{
    uint32_t rnd = (uint32_t)seed * 2654435761u + 1;
    while (!atomic_load(&ws_stop)) {
        long n = 1 + (long)(t_rnd(&rnd) % 6);
        int64_t deadline = t_rnd(&rnd) % 4 == 0 ? goro_now() + (t_rnd(&rnd) % 50) * GORO_USEC
                                                 : GORO_FOREVER;
        int r = goro_wsem_acquire_until(&wsem, n, deadline);
        if (r == -ETIMEDOUT || r == -ECANCELED) {
            atomic_fetch_add(&ws_gave_up, 1);
            if (r == -ECANCELED)
                return;
            continue;
        }
        if (r != 0) {
            t_fail("acquire %ld: %d", n, r);
            return;
        }
        long h = atomic_fetch_add(&ws_held, n) + n;
        t_max_update(&ws_max, h);
        if (t_rnd(&rnd) % 2)
            goro_yield();
        atomic_fetch_sub(&ws_held, n);
        if (goro_wsem_release(&wsem, n) != 0)
            t_fail("release %ld", n);
        atomic_fetch_add(&ws_done, 1);
    }
}

static void ws_big(long rounds)
{
    for (long i = 0; i < rounds; i++) {
        if (goro_wsem_acquire(&wsem, WS_SIZE) != 0) {
            t_fail("big acquire");
            return;
        }
        long h = atomic_fetch_add(&ws_held, WS_SIZE) + WS_SIZE;
        t_max_update(&ws_max, h);
        atomic_fetch_sub(&ws_held, WS_SIZE);
        goro_wsem_release(&wsem, WS_SIZE);
        atomic_fetch_add(&ws_big_served, 1);
        goro_yield();
    }
}

START_TEST(wsem_randomized_stress)
{
    enum { W = 24 };
    long rounds = t_scale(200);
    ck_assert_int_eq(goro_wsem_init(&wsem, WS_SIZE), 0);
    atomic_store(&ws_held, 0);
    atomic_store(&ws_max, 0);
    atomic_store(&ws_done, 0);
    atomic_store(&ws_gave_up, 0);
    atomic_store(&ws_big_served, 0);
    atomic_store(&ws_stop, 0);
    goro_t *h[W];
    for (long i = 0; i < W; i++)
        ck_assert_ptr_nonnull(h[i] = go(ws_worker, i));
    goro_t *big = go(ws_big, rounds);
    ck_assert_ptr_nonnull(big);
    /* The big one finishes while the small ones never stop. */
    ck_assert_int_eq(goro_join(big, NULL), 0);
    ck_assert_int_eq(atomic_load(&ws_big_served), rounds);
    /* Some are cancelled mid-wait, the rest stop. */
    for (int i = 0; i < W; i += 3)
        goro_cancel(h[i]);
    atomic_store(&ws_stop, 1);
    for (int i = 0; i < W; i++)
        goro_join(h[i], NULL);
    ck_assert_ptr_null(t_failed());
    ck_assert_int_le(atomic_load(&ws_max), WS_SIZE);
    ck_assert_int_eq(goro_wsem_held(&wsem), 0);
    ck_assert_int_eq(goro_wsem_waiting(&wsem), 0);
    ck_assert_int_gt(atomic_load(&ws_done), 0);
    ck_assert_int_eq(goro_wsem_destroy(&wsem), 0);
}
END_TEST


/* ---- futures ---- */

struct big { long a[8]; };

static goro_future_t *fut;
static atomic_long fut_got, fut_bad;

static int fut_getter(long i)
{
    struct big v = { { 0 } };
    goro_err_t *err = NULL;
    int r = goro_future_get(fut, &v, &err);
    if (r != 0 || err || v.a[0] != 7 || v.a[7] != 77) {
        atomic_fetch_add(&fut_bad, 1);
        t_fail("getter %ld: %d, a[0] %ld", i, r, v.a[0]);
    }
    atomic_fetch_add(&fut_got, 1);
    return r;
}

static int fut_canceled(long i)
{
    (void)i;
    struct big v = { { 0 } };
    goro_err_t *err = NULL;
    int r = goro_future_get(fut, &v, &err);
    if (err || v.a[0] != 0)
        t_fail("cancelled getter: err %p, a[0] %ld", (void *)err, v.a[0]);
    return r;
}

/* 1000 waiters (fewer where stacks are dear), one of them cancelled while
 * it waits: it returns -ECANCELED with nothing copied, every other gets
 * the whole value, and the future is freed once they have returned. */
START_TEST(future_many_waiters_and_a_cancelled_one)
{
    long n = t_live(1000);
    ck_assert_int_eq(goro_future_new(&fut, sizeof(struct big)), 0);
    atomic_store(&fut_got, 0);
    atomic_store(&fut_bad, 0);
    goro_t **h = calloc((size_t)n, sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (long i = 0; i < n; i++)
        ck_assert_ptr_nonnull(h[i] = go(fut_getter, i));
    goro_t *c = go(fut_canceled, 0L);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(goro_future_ready(fut), 0);
    t_settle();
    ck_assert_int_eq(goro_cancel(c), 0);
    long r;
    ck_assert_int_eq(goro_join(c, &r), 0);
    ck_assert_int_eq(r, -ECANCELED);
    ck_assert_int_eq(atomic_load(&fut_got), 0);
    ck_assert_int_eq(goro_future_free(fut), -EBUSY);        /* getters wait */
    struct big v = { { 7 } };
    v.a[7] = 77;
    ck_assert_int_eq(goro_future_set(fut, &v), 0);
    ck_assert_int_eq(goro_future_set(fut, &v), -EALREADY);
    ck_assert_int_eq(goro_future_fail(fut, goro_err_new(EIO, "late")), -EALREADY);
    for (long i = 0; i < n; i++) {
        ck_assert_int_eq(goro_join(h[i], &r), 0);
        ck_assert_int_eq(r, 0);
    }
    ck_assert_int_eq(atomic_load(&fut_got), n);
    ck_assert_ptr_null(t_failed());
    /* A get after the set reads at once. */
    struct big w = { { 0 } };
    ck_assert_int_eq(goro_future_get(fut, &w, NULL), 0);
    ck_assert_int_eq(w.a[7], 77);
    ck_assert_int_eq(goro_future_free(fut), 0);
    free(h);
}
END_TEST

static int fut_err_getter(long i)
{
    (void)i;
    goro_err_t *err = NULL;
    int r = goro_future_get(fut, NULL, &err);
    if (r != -ENOENT || !err || goro_err_code(err) != ENOENT ||
        !goro_err_cause(err) || goro_err_code(goro_err_cause(err)) != EIO)
        t_fail("error getter: %d", r);
    goro_err_free(err);
    return r;
}

START_TEST(future_error_and_bad_use)
{
    ck_assert_int_eq(goro_future_new(NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_future_new(&fut, (size_t)1 << 40), -EINVAL);
    ck_assert_int_eq(goro_future_new(&fut, sizeof(long)), 0);
    ck_assert_int_eq(goro_future_set(fut, NULL), -EINVAL);
    ck_assert_int_eq(goro_future_fail(fut, NULL), -EINVAL);
    ck_assert_int_eq(goro_future_get(NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_future_get_until(fut, NULL, NULL, goro_now()), -ETIMEDOUT);
    goro_t *h[4];
    for (int i = 0; i < 4; i++)
        ck_assert_ptr_nonnull(h[i] = go(fut_err_getter, (long)i));
    t_settle();
    ck_assert_int_eq(goro_future_fail(fut, goro_err_wrap(goro_err_new(EIO, "disk"), ENOENT,
                                                          "no page")), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_ptr_null(t_failed());
    ck_assert_int_eq(goro_future_get(fut, NULL, NULL), -ENOENT);
    ck_assert_int_eq(goro_future_free(fut), 0);
    ck_assert_int_eq(goro_future_free(NULL), 0);
}
END_TEST

static void fut_set_later(goro_future_t *f)
{
    goro_sleep(GORO_MSEC);
    long v = 5;
    goro_future_set(f, &v);
}

/* The done channel in a select beside another channel; all-of and any-of. */
START_TEST(future_select_all_any)
{
    goro_future_t *fs[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(goro_future_new(&fs[i], sizeof(long)), 0);
    goro_chan_t *other = t_chan_new(sizeof(int), 0);
    goro_case_t cases[2] = {
        { .ch = other, .op = GORO_RECV },
        { .ch = goro_future_done(fs[1]), .op = GORO_RECV },
    };
    ck_assert_ptr_eq(cases[1].ch, goro_future_done(fs[1]));
    ck_assert_int_eq(goro_select(cases, 2, GORO_SELECT_NOWAIT), -EAGAIN);
    goro_t *h = go(fut_set_later, fs[1]);
    ck_assert_int_eq(goro_select(cases, 2, 0), 1);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    long v = 0;
    ck_assert_int_eq(goro_future_get(fs[1], &v, NULL), 0);
    ck_assert_int_eq(v, 5);
    /* any-of: fs[1] is set. all-of: not before the others. */
    ck_assert_int_eq(goro_future_any_until(fs, 3, GORO_FOREVER), 1);
    ck_assert_int_eq(goro_future_all_until(fs, 3, goro_now() + GORO_MSEC), -ETIMEDOUT);
    ck_assert_int_eq(goro_future_set(fs[0], &v), 0);
    ck_assert_int_eq(goro_future_fail(fs[2], goro_err_new(EPIPE, "gone")), 0);
    ck_assert_int_eq(goro_future_all_until(fs, 3, GORO_FOREVER), -EPIPE);
    ck_assert_int_eq(goro_future_all_until(fs, 2, GORO_FOREVER), 0);
    ck_assert_int_eq(goro_future_any_until(fs, 0, GORO_FOREVER), -EINVAL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(goro_future_free(fs[i]), 0);
    ck_assert_int_eq(goro_chan_free(other), 0);
}
END_TEST

static long flight_blocked(const char *key, void *arg)
{
    (void)key;
    goro_chan_recv(arg, NULL);
    return 42;
}

/* The future form of single-flight: two callers share; the shared flag;
 * a caller frees its future before the end; a lone call is not shared. */
START_TEST(flight_future_form_and_shared)
{
    goro_flight_t *fl;
    ck_assert_int_eq(goro_flight_new(&fl), 0);
    goro_chan_t *release = t_chan_new(0, 0);
    goro_future_t *a, *b, *c;
    ck_assert_int_eq(goro_flight_start(fl, "k", flight_blocked, release, &a), 0);
    ck_assert_int_eq(goro_flight_start(fl, "k", flight_blocked, release, &b), 0);
    ck_assert_int_eq(goro_flight_start(fl, "k", flight_blocked, release, &c), 0);
    ck_assert_int_eq(goro_future_free(c), 0);           /* gave up early: no leak */
    ck_assert_int_eq(goro_future_ready(a), 0);
    ck_assert_int_eq(goro_chan_close(release), 0);
    goro_flight_result_t r = { 0 };
    ck_assert_int_eq(goro_future_get(a, &r, NULL), 0);
    ck_assert_int_eq(r.value, 42);
    ck_assert_int_eq(r.shared, 1);
    ck_assert_int_eq(goro_future_get(b, &r, NULL), 0);
    ck_assert_int_eq(r.shared, 1);
    goro_future_free(a);
    goro_future_free(b);
    ck_assert_int_eq(goro_flight_start(fl, "k", flight_blocked, release, &a), 0);
    ck_assert_int_eq(goro_future_get(a, &r, NULL), 0);
    ck_assert_int_eq(r.shared, 0);
    goro_future_free(a);
    ck_assert_int_eq(goro_flight_start(NULL, "k", flight_blocked, NULL, &a), -EINVAL);
    ck_assert_ptr_null(a);
    double end = t_now() + t_timeout(10);
    while (goro_flight_free(fl) == -EBUSY && t_now() < end)
        t_nap(0.001);
    ck_assert_int_eq(goro_chan_free(release), 0);
}
END_TEST

/* ---- cancellation causes ---- */

/* Three levels: a coroutine's group, a member's group, its member's group;
 * the innermost member blocks until cancelled. Each level records what its
 * group's wait returned. */
struct level {
    int depth;
    int64_t deadline;              /* the outermost group's, or 0 */
    int wait_code;                 /* its group's wait */
    int cause_code;                /* goro_cause() seen by the member */
    char cause_msg[64];
};
static struct level levels[4];
static atomic_int innermost_ready;

static void note_cause(struct level *l)
{
    const goro_err_t *c = goro_cause();
    l->cause_code = c ? goro_err_code(c) : 0;
    snprintf(l->cause_msg, sizeof l->cause_msg, "%s", c && goro_err_msg(c) ? goro_err_msg(c) : "");
}

static void level_run(struct level *l)
{
    if (l->depth == 3) {
        atomic_store(&innermost_ready, 1);
        goro_chan_t *never = NULL;
        goro_case_t cs = { .ch = never, .op = GORO_RECV };
        goro_sleep(3600 * GORO_SEC);
        (void)cs;
        note_cause(l);
        return;
    }
    goro_group_t *g;
    if (goro_group_new(&g, &(goro_group_attr_t){ .deadline = l->deadline }) != 0) {
        t_fail("group_new");
        return;
    }
    goro_group_go(g, level_run, &levels[l->depth + 1]);
    l->wait_code = goro_group_wait(g, NULL, NULL);
    note_cause(l);
    goro_group_free(g);
}

static void levels_reset(int64_t deadline)
{
    memset(levels, 0, sizeof levels);
    for (int i = 0; i < 4; i++)
        levels[i].depth = i;
    levels[0].deadline = deadline;
    atomic_store(&innermost_ready, 0);
}

/* A deadline of the outermost group reaches the nested groups as what it
 * is: their waits return -ETIMEDOUT, and every member's cause is
 * ETIMEDOUT. */
/* On the virtual clock: the tree is built before the deadline passes
 * (on the real one a loaded machine could pass it first, and the
 * innermost member would never be spawned). */
static void deadline_levels_body(void *arg)
{
    (void)arg;
    levels_reset(goro_now() + 20 * GORO_MSEC);
    goro_t *h = go(level_run, &levels[0]);
    if (!h || goro_join(h, NULL) != 0) {
        t_fail("the top coroutine");
        return;
    }
    for (int i = 0; i < 3; i++)
        if (levels[i].wait_code != -ETIMEDOUT)
            t_fail("level %d: wait %d", i, levels[i].wait_code);
    for (int i = 1; i < 4; i++)
        if (levels[i].cause_code != ETIMEDOUT)
            t_fail("level %d: cause %d", i, levels[i].cause_code);
}

START_TEST(cause_deadline_reaches_nested_groups_as_etimedout)
{
    t_virtual(deadline_levels_body, NULL);
}
END_TEST

/* goro_cancel_cause at the top: the cause reaches every member three
 * groups down, and the top coroutine itself. */
START_TEST(cause_through_three_levels)
{
    levels_reset(0);
    goro_t *h = go(level_run, &levels[0]);
    ck_assert_int_eq(t_wait_flag(&innermost_ready, t_timeout(10)), 1);
    ck_assert_int_eq(goro_cancel_cause(h, goro_err_new(ESHUTDOWN, "server stopping")), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(levels[i].cause_code == ESHUTDOWN, "level %d: cause %d", i,
                      levels[i].cause_code);
        ck_assert_str_eq(levels[i].cause_msg, "server stopping");
    }
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(levels[i].wait_code, -ECANCELED);
    /* Not cancelled: no cause. A plain cancel: ECANCELED, no message. */
    ck_assert_ptr_null(goro_cause());
    ck_assert_int_eq(goro_cancel_cause(NULL, goro_err_new(EIO, "x")), -EINVAL);
}
END_TEST

/* ---- groups: TryGo, SetLimit ---- */

static void blocks_on(goro_chan_t *ch)
{
    goro_chan_recv(ch, NULL);
}

static int spawn_waiting(goro_group_t *g, goro_chan_t *ch)
{
    return goro_group_go(g, blocks_on, ch);
}

START_TEST(group_try_go_and_set_limit)
{
    goro_group_t *g;
    goro_chan_t *release = t_chan_new(0, 0);
    ck_assert_int_eq(goro_group_new(&g, &(goro_group_attr_t){ .limit = 1 }), 0);
    ck_assert_int_eq(goro_group_try_go(g, blocks_on, release), 0);
    ck_assert_int_eq(goro_group_try_go(g, blocks_on, release), -EAGAIN);
    ck_assert_int_eq(goro_group_running(g), 1);
    /* A spawner waits for a slot; raising the limit lets it in. */
    goro_t *sp = go(spawn_waiting, g, release);
    t_settle();
    ck_assert_int_eq(goro_group_running(g), 1);
    ck_assert_int_eq(goro_group_set_limit(g, 0), -EBUSY);   /* limit -> none, members run */
    ck_assert_int_eq(goro_group_set_limit(g, -1), -EINVAL);
    ck_assert_int_eq(goro_group_set_limit(g, 3), 0);
    long r;
    ck_assert_int_eq(goro_join(sp, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_group_running(g), 2);
    ck_assert_int_eq(goro_group_try_go(g, blocks_on, release), 0);
    ck_assert_int_eq(goro_group_try_go(g, blocks_on, release), -EAGAIN);
    ck_assert_int_eq(goro_group_set_limit(g, 1), 0);          /* lowered: none stopped */
    ck_assert_int_eq(goro_group_running(g), 3);
    ck_assert_int_eq(goro_chan_close(release), 0);
    ck_assert_int_eq(goro_group_wait(g, NULL, NULL), 0);
    ck_assert_int_eq(goro_group_try_go(g, blocks_on, release), -EINVAL);   /* no reuse */
    ck_assert_int_eq(goro_group_set_limit(g, 0), 0);
    ck_assert_int_eq(goro_group_try_go(NULL, blocks_on, release), -EINVAL);
    ck_assert_int_eq(goro_group_free(g), 0);
    ck_assert_int_eq(goro_chan_free(release), 0);
}
END_TEST

Suite *structured_suite(void)
{
    Suite *s = suite_create("structured");
    TCase *tc = t_runtime_tcase(s, "wsem", 60);
    tcase_add_test(tc, wsem_bad_use);
    tcase_add_test(tc, wsem_fifo_large_head_blocks_small);
    tcase_add_test(tc, wsem_randomized_stress);
    tc = t_runtime_tcase(s, "future", 60);
    tcase_add_test(tc, future_many_waiters_and_a_cancelled_one);
    tcase_add_test(tc, future_error_and_bad_use);
    tcase_add_test(tc, future_select_all_any);
    tcase_add_test(tc, flight_future_form_and_shared);
    tc = t_runtime_tcase(s, "cause", 60);
    tcase_add_test(tc, cause_deadline_reaches_nested_groups_as_etimedout);
    tcase_add_test(tc, cause_through_three_levels);
    tcase_add_test(tc, group_try_go_and_set_limit);
    return s;
}
