/* Channels: unbuffered and buffered hand-off, FIFO order, close, the
 * non-blocking forms, zero-size elements, len/cap, free with waiters, bad
 * input. Coroutines never call ck_assert (see helpers.h): they note
 * problems with t_fail() and the test asserts at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "suites.h"

/* ---- unbuffered ---- */

static atomic_int sent_flag;

static void send_one(goro_chan_t *ch, long v)
{
    int e = goro_chan_send(ch, &v);
    if (e != 0)
        t_fail("send_one: goro_chan_send returned %d", e);
    atomic_store(&sent_flag, 1);
}

START_TEST(unbuffered_send_waits_for_receiver)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    atomic_store(&sent_flag, 0);
    goro_t *h = go(send_one, ch, 42L);
    ck_assert_ptr_nonnull(h);
    t_settle();
    /* nobody received: the send cannot have completed */
    ck_assert_int_eq(atomic_load(&sent_flag), 0);
    ck_assert_int_eq(goro_chan_len(ch), 0);
    long v = 0;
    ck_assert_int_eq(goro_chan_recv(ch, &v), 1);    /* main thread receives */
    ck_assert_int_eq(v, 42);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_int_eq(atomic_load(&sent_flag), 1);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

static void send_range(goro_chan_t *ch, long from, long to, int yield_every)
{
    for (long i = from; i < to; i++) {
        int e = goro_chan_send(ch, &i);
        if (e != 0) {
            t_fail("send_range: send of %ld returned %d", i, e);
            return;
        }
        if (yield_every && i % yield_every == 0)
            goro_yield();
    }
}

/* Receives until closed; values must arrive as from, from+1, ... */
static long recv_in_order(goro_chan_t *ch, long from)
{
    long v, want = from;
    int r;
    while ((r = goro_chan_recv(ch, &v)) > 0) {
        if (v != want) {
            t_fail("recv_in_order: got %ld, want %ld", v, want);
            return -1;
        }
        want++;
    }
    if (r != 0)
        t_fail("recv_in_order: recv returned %d", r);
    if (v != 0)
        t_fail("recv_in_order: closed recv left %ld in elem", v);
    return want - from;
}

static void stream_one_to_one(size_t cap, long n, int yield_every)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), cap);
    t_fail_reset();
    goro_t *rx = go(recv_in_order, ch, 0L);
    goro_t *tx = go(send_range, ch, 0L, n, yield_every);
    ck_assert_ptr_nonnull(rx);
    ck_assert_ptr_nonnull(tx);
    ck_assert_int_eq(goro_join(tx, NULL), 0);
    ck_assert_int_eq(goro_chan_close(ch), 0);
    long got = -1;
    ck_assert_int_eq(goro_join(rx, &got), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(got, n);
    ck_assert_int_eq(goro_chan_free(ch), 0);
}

START_TEST(unbuffered_stream_in_order)
{
    stream_one_to_one(0, t_scale(100000), 0);
    stream_one_to_one(0, t_scale(20000), 3);
}
END_TEST

/* ---- buffered ---- */

START_TEST(buffered_fifo_and_full)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), 8);
    ck_assert_int_eq(goro_chan_cap(ch), 8);
    /* several laps around the ring, with different fill levels */
    long next_in = 0, next_out = 0;
    for (int lap = 0; lap < 5; lap++) {
        int fill = lap == 0 ? 8 : 3 + lap;
        for (int i = 0; i < fill; i++, next_in++)
            ck_assert_int_eq(goro_chan_try_send(ch, &next_in), 0);
        ck_assert_int_eq(goro_chan_len(ch), fill);
        if (fill == 8) {
            long x = -7;
            ck_assert_int_eq(goro_chan_try_send(ch, &x), -EAGAIN);
            ck_assert_int_eq(goro_chan_len(ch), 8);
        }
        for (int i = 0; i < fill; i++, next_out++) {
            long v = -1;
            ck_assert_int_eq(goro_chan_try_recv(ch, &v), 1);
            ck_assert_int_eq(v, next_out);
            ck_assert_int_eq(goro_chan_len(ch), fill - i - 1);
        }
        long v = -1;
        ck_assert_int_eq(goro_chan_try_recv(ch, &v), -EAGAIN);
    }
    /* recv into NULL discards the value */
    long x = 5;
    ck_assert_int_eq(goro_chan_send(ch, &x), 0);
    x = 6;
    ck_assert_int_eq(goro_chan_send(ch, &x), 0);
    ck_assert_int_eq(goro_chan_recv(ch, NULL), 1);
    ck_assert_int_eq(goro_chan_recv(ch, &x), 1);
    ck_assert_int_eq(x, 6);
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

START_TEST(buffered_stream_in_order)
{
    stream_one_to_one(1, t_scale(50000), 0);
    stream_one_to_one(16, t_scale(100000), 0);
    stream_one_to_one(7, t_scale(50000), 5);
}
END_TEST

static void send_three(goro_chan_t *ch)
{
    for (long i = 0; i < 3; i++)
        if (goro_chan_send(ch, &i) != 0)
            t_fail("send_three: send %ld failed", i);
    atomic_store(&sent_flag, 1);
}

START_TEST(buffered_send_waits_when_full)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), 2);
    atomic_store(&sent_flag, 0);
    goro_t *h = go(send_three, ch);
    ck_assert_ptr_nonnull(h);
    double end = t_now() + t_timeout(5);
    while (goro_chan_len(ch) < 2 && t_now() < end)
        t_nap(0.001);
    t_settle();
    ck_assert_int_eq(goro_chan_len(ch), 2);
    ck_assert_int_eq(atomic_load(&sent_flag), 0);   /* the third one waits */
    long v = -1;
    ck_assert_int_eq(goro_chan_recv(ch, &v), 1);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);        /* so it got through */
    ck_assert_int_eq(atomic_load(&sent_flag), 1);
    ck_assert_int_eq(goro_chan_len(ch), 2);
    ck_assert_int_eq(goro_chan_recv(ch, &v), 1);
    ck_assert_int_eq(v, 1);
    ck_assert_int_eq(goro_chan_recv(ch, &v), 1);
    ck_assert_int_eq(v, 2);
    ck_assert_int_eq(goro_chan_len(ch), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

/* ---- close ---- */

START_TEST(close_semantics)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), 4);
    for (long i = 1; i <= 3; i++)
        ck_assert_int_eq(goro_chan_send(ch, &i), 0);
    ck_assert_int_eq(goro_chan_close(ch), 0);
    ck_assert_int_eq(goro_chan_close(ch), -EPIPE);
    long x = 99;
    ck_assert_int_eq(goro_chan_send(ch, &x), -EPIPE);
    ck_assert_int_eq(goro_chan_try_send(ch, &x), -EPIPE);
    ck_assert_int_eq(goro_chan_len(ch), 3);         /* rejected sends added nothing */
    /* buffered values are still delivered, in order */
    for (long i = 1; i <= 3; i++) {
        long v = -1;
        ck_assert_int_eq(goro_chan_recv(ch, &v), 1);
        ck_assert_int_eq(v, i);
    }
    /* then: 0 and a zeroed element, every time, blocking or not */
    for (int k = 0; k < 3; k++) {
        long v = 0x5a5a5a5aL;
        ck_assert_int_eq(goro_chan_recv(ch, &v), 0);
        ck_assert_int_eq(v, 0);
        v = 0x5a5a5a5aL;
        ck_assert_int_eq(goro_chan_try_recv(ch, &v), 0);
        ck_assert_int_eq(v, 0);
    }
    ck_assert_int_eq(goro_chan_recv(ch, NULL), 0);
    ck_assert_int_eq(goro_chan_len(ch), 0);
    ck_assert_int_eq(goro_chan_cap(ch), 4);
    ck_assert_int_eq(goro_chan_free(ch), 0);

    /* unbuffered, with a struct element */
    struct big { long a[5]; } b;
    memset(&b, 0xab, sizeof b);
    goro_chan_t *u = t_chan_new(sizeof b, 0);
    ck_assert_int_eq(goro_chan_close(u), 0);
    ck_assert_int_eq(goro_chan_recv(u, &b), 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(b.a[i], 0);
    ck_assert_int_eq(goro_chan_send(u, &b), -EPIPE);
    ck_assert_int_eq(goro_chan_close(u), -EPIPE);
    ck_assert_int_eq(goro_chan_free(u), 0);
}
END_TEST

static atomic_long arrived;

static long recv_expect_closed(goro_chan_t *ch)
{
    long v = 0x1234;
    atomic_fetch_add(&arrived, 1);
    int r = goro_chan_recv(ch, &v);
    if (r != 0)
        t_fail("receiver woken by close: recv returned %d", r);
    if (v != 0)
        t_fail("receiver woken by close: elem %#lx, not zeroed", v);
    return r;
}

static long send_expect_pipe(goro_chan_t *ch, long x)
{
    atomic_fetch_add(&arrived, 1);
    int r = goro_chan_send(ch, &x);
    if (r != -EPIPE)
        t_fail("sender woken by close: send returned %d, want -EPIPE", r);
    return r;
}

START_TEST(close_wakes_waiting_receivers)
{
    enum { K = 8 };
    for (size_t cap = 0; cap <= 2; cap += 2) {
        goro_chan_t *ch = t_chan_new(sizeof(long), cap);
        goro_t *h[K];
        atomic_store(&arrived, 0);
        t_fail_reset();
        for (int i = 0; i < K; i++)
            ck_assert_ptr_nonnull(h[i] = go(recv_expect_closed, ch));
        ck_assert_int_eq(t_wait_at_least(&arrived, K, t_timeout(10)), K);
        t_settle();
        ck_assert_int_eq(goro_chan_free(ch), -EBUSY);   /* they are waiting */
        ck_assert_int_eq(goro_chan_close(ch), 0);
        for (int i = 0; i < K; i++) {
            long r = -1;
            ck_assert_int_eq(goro_join(h[i], &r), 0);
            ck_assert_int_eq(r, 0);
        }
        ck_assert_msg(!t_failed(), "cap %zu: %s", cap, t_failed());
        ck_assert_int_eq(goro_chan_free(ch), 0);
    }
}
END_TEST

START_TEST(close_wakes_waiting_senders)
{
    enum { K = 8 };
    for (size_t cap = 0; cap <= 1; cap++) {
        goro_chan_t *ch = t_chan_new(sizeof(long), cap);
        long first = 77;
        if (cap)
            ck_assert_int_eq(goro_chan_try_send(ch, &first), 0);    /* full */
        goro_t *h[K];
        atomic_store(&arrived, 0);
        t_fail_reset();
        for (int i = 0; i < K; i++)
            ck_assert_ptr_nonnull(h[i] = go(send_expect_pipe, ch, (long)i));
        ck_assert_int_eq(t_wait_at_least(&arrived, K, t_timeout(10)), K);
        t_settle();
        ck_assert_int_eq(goro_chan_free(ch), -EBUSY);
        ck_assert_int_eq(goro_chan_close(ch), 0);
        for (int i = 0; i < K; i++) {
            long r = 0;
            ck_assert_int_eq(goro_join(h[i], &r), 0);
            ck_assert_int_eq(r, -EPIPE);
        }
        ck_assert_msg(!t_failed(), "cap %zu: %s", cap, t_failed());
        /* the value buffered before the close is still there, nothing else */
        long v = -1;
        if (cap) {
            ck_assert_int_eq(goro_chan_recv(ch, &v), 1);
            ck_assert_int_eq(v, 77);
        }
        ck_assert_int_eq(goro_chan_recv(ch, &v), 0);
        ck_assert_int_eq(v, 0);
        ck_assert_int_eq(goro_chan_free(ch), 0);
    }
}
END_TEST

/* ---- non-blocking forms ---- */

START_TEST(try_forms_eagain)
{
    goro_chan_t *u = t_chan_new(sizeof(int), 0);
    int x = 3, v = -1;
    ck_assert_int_eq(goro_chan_try_send(u, &x), -EAGAIN);  /* no receiver */
    ck_assert_int_eq(goro_chan_try_recv(u, &v), -EAGAIN);  /* no sender */
    ck_assert_int_eq(v, -1);
    ck_assert_int_eq(goro_chan_len(u), 0);

    ck_assert_int_eq(goro_chan_free(u), 0);

    /* with a receiver parked, try_send hands over directly */
    goro_chan_t *lu = t_chan_new(sizeof(long), 0);
    goro_t *h = go(recv_in_order, lu, 10L);
    ck_assert_ptr_nonnull(h);
    for (long want = 10; want < 13; want++) {
        double end = t_now() + t_timeout(10);
        int e;
        while ((e = goro_chan_try_send(lu, &want)) == -EAGAIN && t_now() < end)
            t_nap(0.0002);
        ck_assert_int_eq(e, 0);
    }
    ck_assert_int_eq(goro_chan_close(lu), 0);
    long got = 0;
    ck_assert_int_eq(goro_join(h, &got), 0);
    ck_assert_int_eq(got, 3);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_chan_free(lu), 0);

    /* with a sender parked, try_recv takes from it */
    goro_chan_t *s = t_chan_new(sizeof(long), 0);
    atomic_store(&sent_flag, 0);
    h = go(send_one, s, 5L);
    ck_assert_ptr_nonnull(h);
    long lv = 0;
    int e;
    double end = t_now() + t_timeout(10);
    while ((e = goro_chan_try_recv(s, &lv)) == -EAGAIN && t_now() < end)
        t_nap(0.0002);
    ck_assert_int_eq(e, 1);
    ck_assert_int_eq(lv, 5);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_int_eq(goro_chan_free(s), 0);

    /* buffered: empty and full */
    goro_chan_t *b = t_chan_new(sizeof(int), 1);
    ck_assert_int_eq(goro_chan_try_recv(b, &v), -EAGAIN);
    ck_assert_int_eq(goro_chan_try_send(b, &x), 0);
    ck_assert_int_eq(goro_chan_try_send(b, &x), -EAGAIN);
    ck_assert_int_eq(goro_chan_try_recv(b, &v), 1);
    ck_assert_int_eq(v, 3);
    ck_assert_int_eq(goro_chan_try_recv(b, &v), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(b), 0);
}
END_TEST

/* ---- zero-size elements ---- */

static void signal_n(goro_chan_t *ch, long n)
{
    for (long i = 0; i < n; i++)
        if (goro_chan_send(ch, NULL) != 0) {
            t_fail("signal_n: send %ld failed", i);
            return;
        }
}

START_TEST(zero_size_elements)
{
    goro_chan_t *b = t_chan_new(0, 3);
    ck_assert_int_eq(goro_chan_cap(b), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(goro_chan_try_send(b, NULL), 0);
    ck_assert_int_eq(goro_chan_try_send(b, NULL), -EAGAIN);
    ck_assert_int_eq(goro_chan_len(b), 3);
    long canary = 0x77;
    ck_assert_int_eq(goro_chan_recv(b, &canary), 1);   /* nothing copied */
    ck_assert_int_eq(canary, 0x77);
    ck_assert_int_eq(goro_chan_recv(b, NULL), 1);
    ck_assert_int_eq(goro_chan_len(b), 1);
    ck_assert_int_eq(goro_chan_close(b), 0);
    ck_assert_int_eq(goro_chan_recv(b, NULL), 1);
    ck_assert_int_eq(goro_chan_recv(b, &canary), 0);
    ck_assert_int_eq(canary, 0x77);                    /* 0 bytes "zeroed" */
    ck_assert_int_eq(goro_chan_free(b), 0);

    /* unbuffered signalling between a coroutine and this thread */
    goro_chan_t *u = t_chan_new(0, 0);
    ck_assert_int_eq(goro_chan_cap(u), 0);
    ck_assert_int_eq(goro_chan_try_send(u, NULL), -EAGAIN);
    long n = t_scale(10000);
    goro_t *h = go(signal_n, u, n);
    ck_assert_ptr_nonnull(h);
    for (long i = 0; i < n; i++)
        T_CHECK(goro_chan_recv(u, NULL) == 1, "signal %ld not received", i);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_int_eq(goro_chan_try_recv(u, NULL), -EAGAIN);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_chan_free(u), 0);
}
END_TEST

START_TEST(len_and_cap)
{
    size_t caps[] = { 0, 1, 2, 100, 4096 };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        goro_chan_t *ch = t_chan_new(sizeof(short), caps[i]);
        ck_assert_int_eq(goro_chan_cap(ch), (long)caps[i]);
        ck_assert_int_eq(goro_chan_len(ch), 0);
        short s = 1;
        long fill = caps[i] < 100 ? (long)caps[i] : 100;
        for (long k = 0; k < fill; k++)
            ck_assert_int_eq(goro_chan_try_send(ch, &s), 0);
        ck_assert_int_eq(goro_chan_len(ch), fill);
        ck_assert_int_eq(goro_chan_cap(ch), (long)caps[i]);
        if (fill)
            ck_assert_int_eq(goro_chan_try_recv(ch, &s), 1);
        ck_assert_int_eq(goro_chan_len(ch), fill ? fill - 1 : 0);
        ck_assert_int_eq(goro_chan_free(ch), 0);
    }
}
END_TEST

/* ---- free ---- */

START_TEST(free_with_waiters_is_busy)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    atomic_store(&arrived, 0);
    goro_t *h = go(recv_in_order, ch, 8L);
    ck_assert_ptr_nonnull(h);
    /* the receiver got one value: it was parked, and parks again */
    long x = 8;
    ck_assert_int_eq(goro_chan_send(ch, &x), 0);
    /* a free that succeeds here would pull the channel from under the
     * receiver: give it ample time to park */
    t_nap(t_timeout(0.2));
    ck_assert_int_eq(goro_chan_free(ch), -EBUSY);
    ck_assert_int_eq(goro_chan_free(ch), -EBUSY);   /* still intact */
    x = 9;
    ck_assert_int_eq(goro_chan_send(ch, &x), 0);
    ck_assert_int_eq(goro_chan_close(ch), 0);
    long got = 0;
    ck_assert_int_eq(goro_join(h, &got), 0);
    ck_assert_int_eq(got, 2);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_chan_free(ch), 0);

    /* a waiting sender counts too */
    goro_chan_t *s = t_chan_new(sizeof(long), 0);
    atomic_store(&sent_flag, 0);
    h = go(send_one, s, 1L);
    ck_assert_ptr_nonnull(h);
    t_nap(t_timeout(0.2));
    ck_assert_int_eq(goro_chan_free(s), -EBUSY);
    ck_assert_int_eq(goro_chan_recv(s, &got), 1);
    ck_assert_int_eq(got, 1);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_int_eq(goro_chan_free(s), 0);
}
END_TEST

/* ---- bad input ---- */

START_TEST(bad_input)
{
    long v = 0;
    ck_assert_int_eq(goro_chan_send(NULL, &v), -EINVAL);
    ck_assert_int_eq(goro_chan_recv(NULL, &v), -EINVAL);
    ck_assert_int_eq(goro_chan_try_send(NULL, &v), -EINVAL);
    ck_assert_int_eq(goro_chan_try_recv(NULL, &v), -EINVAL);
    ck_assert_int_eq(goro_chan_close(NULL), -EINVAL);
    ck_assert_int_eq(goro_chan_free(NULL), -EINVAL);
    ck_assert_int_eq(goro_chan_len(NULL), -EINVAL);
    ck_assert_int_eq(goro_chan_cap(NULL), -EINVAL);

    /* A NULL element to send: refused, nothing queued (it used to crash). */
    goro_chan_t *b = t_chan_new(sizeof(long), 1);
    ck_assert_int_eq(goro_chan_try_send(b, NULL), -EINVAL);
    ck_assert_int_eq(goro_chan_send(b, NULL), -EINVAL);
    ck_assert_int_eq(goro_chan_send_until(b, NULL, goro_now() + GORO_MSEC), -EINVAL);
    goro_case_t bad = { b, GORO_SEND, NULL, -99 };
    ck_assert_int_eq(goro_select(&bad, 1, 0), -EINVAL);
    ck_assert_int_eq(goro_chan_len(b), 0);
    ck_assert_int_eq(goro_chan_free(b), 0);

    ck_assert_int_eq(goro_chan_new(NULL, 8, 8), -EINVAL);
    goro_chan_t *ch = NULL;
    ck_assert_int_eq(goro_chan_new(&ch, SIZE_MAX, 1), -EINVAL);
    ck_assert_int_eq(goro_chan_new(&ch, 8, SIZE_MAX), -EINVAL);
    ck_assert_int_eq(goro_chan_new(&ch, SIZE_MAX, SIZE_MAX), -EINVAL);
    ck_assert_int_eq(goro_chan_new(&ch, SIZE_MAX / 2 + 1, 2), -EINVAL);  /* overflows */
    ck_assert_int_eq(goro_chan_new(&ch, (size_t)1 << 40, 0), -EINVAL);
    ck_assert_int_eq(goro_chan_new(&ch, 1, (size_t)1 << 62), -EINVAL);
    ck_assert_ptr_null(ch);
    /* and sane ones still work */
    ck_assert_int_eq(goro_chan_new(&ch, 4096, 16), 0);
    ck_assert_ptr_nonnull(ch);
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

Suite *chan_suite(void)
{
    Suite *s = suite_create("chan");
    TCase *tc = t_runtime_tcase(s, "chan", 30);
    tcase_add_test(tc, unbuffered_send_waits_for_receiver);
    tcase_add_test(tc, unbuffered_stream_in_order);
    tcase_add_test(tc, buffered_fifo_and_full);
    tcase_add_test(tc, buffered_stream_in_order);
    tcase_add_test(tc, buffered_send_waits_when_full);
    tcase_add_test(tc, close_semantics);
    tcase_add_test(tc, close_wakes_waiting_receivers);
    tcase_add_test(tc, close_wakes_waiting_senders);
    tcase_add_test(tc, try_forms_eagain);
    tcase_add_test(tc, zero_size_elements);
    tcase_add_test(tc, len_and_cap);
    tcase_add_test(tc, free_with_waiters_is_busy);
    tcase_add_test(tc, bad_input);
    return s;
}
