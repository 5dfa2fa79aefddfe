/* The second layer of structured concurrency (docs/structured.md): the
 * weighted semaphore, futures, cancellation causes, done channels,
 * coroutine-local storage.
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

Suite *structured_suite(void)
{
    Suite *s = suite_create("structured");
    TCase *tc = t_runtime_tcase(s, "wsem", 60);
    tcase_add_test(tc, wsem_bad_use);
    tcase_add_test(tc, wsem_fifo_large_head_blocks_small);
    tcase_add_test(tc, wsem_randomized_stress);
    return s;
}
