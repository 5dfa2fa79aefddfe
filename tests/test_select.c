/* goro_select: readiness, fairness, NOWAIT, NULL channels, waiting on
 * several channels (and leaving the other queues clean), send cases, close,
 * duplicate channels, more cases than the on-stack arrays hold; descriptor
 * cases beside channels: ready first, woken, deadline, cancel, goro_close,
 * many selects on one descriptor, and the race of a descriptor's readiness
 * against a channel's value. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "helpers.h"
#include "suites.h"

/* try_send on an unbuffered channel succeeds only while a receiver waits:
 * retry until one does (that proves it was parked) or time runs out. */
static int send_when_waited(goro_chan_t *ch, const void *elem)
{
    double end = t_now() + t_timeout(10);
    int e;
    while ((e = goro_chan_try_send(ch, elem)) == -EAGAIN && t_now() < end)
        t_nap(0.0002);
    return e;
}

static int recv_when_waited(goro_chan_t *ch, void *elem)
{
    double end = t_now() + t_timeout(10);
    int e;
    while ((e = goro_chan_try_recv(ch, elem)) == -EAGAIN && t_now() < end)
        t_nap(0.0002);
    return e;
}

/* ---- readiness ---- */

START_TEST(ready_case_is_chosen)
{
    goro_chan_t *c[3];
    for (int i = 0; i < 3; i++)
        c[i] = t_chan_new(sizeof(long), 1);
    for (int round = 0; round < 50; round++) {
        int ready = round % 3;
        long x = 100 + round;
        ck_assert_int_eq(goro_chan_try_send(c[ready], &x), 0);
        long v[3] = { -1, -1, -1 };
        goro_case_t cs[3];
        for (int i = 0; i < 3; i++)
            cs[i] = (goro_case_t){ c[i], GORO_RECV, &v[i], -99 };
        int r = goro_select(cs, 3, round % 2 ? GORO_SELECT_NOWAIT : 0);
        ck_assert_int_eq(r, ready);
        ck_assert_int_eq(cs[ready].result, 1);
        ck_assert_int_eq(v[ready], 100 + round);
        for (int i = 0; i < 3; i++)
            if (i != ready)
                ck_assert_int_eq(v[i], -1);
        ck_assert_int_eq(goro_chan_len(c[ready]), 0);
    }
    /* send cases: only the channel with room is ready */
    long one = 1, two = 2;
    ck_assert_int_eq(goro_chan_try_send(c[0], &one), 0);    /* c[0] full */
    goro_case_t cs[2] = {
        { c[0], GORO_SEND, &two, -99 },
        { c[1], GORO_SEND, &two, -99 },
    };
    ck_assert_int_eq(goro_select(cs, 2, 0), 1);
    ck_assert_int_eq(cs[1].result, 0);
    long v = 0;
    ck_assert_int_eq(goro_chan_try_recv(c[1], &v), 1);
    ck_assert_int_eq(v, 2);
    ck_assert_int_eq(goro_chan_try_recv(c[0], &v), 1);
    ck_assert_int_eq(v, 1);                                 /* not overwritten */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(goro_chan_free(c[i]), 0);
}
END_TEST

/* ---- fairness ---- */

struct fair_run {
    int ncases;
    long rounds;
    long counts[3];
};

/* Every channel always holds a value: each select has ncases ready cases. */
static void fair_recv(struct fair_run *f)
{
    goro_chan_t *c[3] = { 0 };
    goro_case_t cs[3];
    long v[3];
    for (int i = 0; i < f->ncases; i++) {
        if (goro_chan_new(&c[i], sizeof(long), 2) != 0) {
            t_fail("fair_recv: goro_chan_new");
            goto out;
        }
        long x = i;
        goro_chan_try_send(c[i], &x);
    }
    for (long k = 0; k < f->rounds; k++) {
        for (int i = 0; i < f->ncases; i++)
            cs[i] = (goro_case_t){ c[i], GORO_RECV, &v[i], 0 };
        int r = goro_select(cs, f->ncases, 0);
        if (r < 0 || r >= f->ncases || v[r] != r || cs[r].result != 1) {
            t_fail("fair_recv: select returned %d", r);
            goto out;
        }
        f->counts[r]++;
        long x = r;
        if (goro_chan_try_send(c[r], &x) != 0) {
            t_fail("fair_recv: refill failed");
            goto out;
        }
        if (k % 256 == 0)
            goro_yield();
    }
out:
    for (int i = 0; i < f->ncases; i++)
        if (c[i])
            goro_chan_free(c[i]);
}

/* Send cases on channels that always have room; run on this thread. */
static void fair_send(struct fair_run *f)
{
    goro_chan_t *c[3];
    goro_case_t cs[3];
    long x[3] = { 0, 1, 2 };
    for (int i = 0; i < f->ncases; i++)
        c[i] = t_chan_new(sizeof(long), 1);
    for (long k = 0; k < f->rounds; k++) {
        for (int i = 0; i < f->ncases; i++)
            cs[i] = (goro_case_t){ c[i], GORO_SEND, &x[i], -1 };
        int r = goro_select(cs, f->ncases, GORO_SELECT_NOWAIT);
        T_CHECK(r >= 0 && r < f->ncases && cs[r].result == 0, "select returned %d", r);
        f->counts[r]++;
        long v = -1;
        T_CHECK(goro_chan_try_recv(c[r], &v) == 1 && v == r, "drain %d: %ld", r, v);
    }
    for (int i = 0; i < f->ncases; i++)
        ck_assert_int_eq(goro_chan_free(c[i]), 0);
}

static void check_uniform(const struct fair_run *f, const char *what)
{
    double mean = (double)f->rounds / f->ncases;
    char buf[128];
    int len = 0;
    for (int i = 0; i < f->ncases; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, " %ld", f->counts[i]);
    printf("select fairness (%s, %d ready cases, %ld rounds):%s\n",
           what, f->ncases, f->rounds, buf);
    long total = 0;
    for (int i = 0; i < f->ncases; i++) {
        total += f->counts[i];
        /* binomial sd is < 50 here; +-20% of the mean is > 13 sd */
        ck_assert_msg(f->counts[i] >= 0.8 * mean && f->counts[i] <= 1.2 * mean,
                      "%s: case %d chosen %ld times of %ld (mean %.0f):%s",
                      what, i, f->counts[i], f->rounds, mean, buf);
    }
    ck_assert_int_eq(total, f->rounds);
}

START_TEST(ready_cases_chosen_uniformly)
{
    /* fixed count: the bound below is statistical, not a loop budget */
    for (int n = 2; n <= 3; n++) {
        struct fair_run f = { .ncases = n, .rounds = 10000 };
        t_fail_reset();
        goro_t *h = go(fair_recv, &f);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(goro_join(h, NULL), 0);
        ck_assert_msg(!t_failed(), "%s", t_failed());
        check_uniform(&f, "recv, in a coroutine");

        struct fair_run g = { .ncases = n, .rounds = 10000 };
        fair_send(&g);
        check_uniform(&g, "send, on a thread");
    }
}
END_TEST

/* ---- NOWAIT, NULL channels, bad arguments ---- */

START_TEST(nowait_and_null_channels)
{
    goro_chan_t *a = t_chan_new(sizeof(int), 0), *b = t_chan_new(sizeof(int), 1);
    int x = 5, v = -1;
    ck_assert_int_eq(goro_chan_try_send(b, &x), 0);   /* b full */
    goro_case_t cs[3] = {
        { a, GORO_RECV, &v, -99 },      /* no sender */
        { a, GORO_SEND, &x, -99 },      /* no receiver */
        { b, GORO_SEND, &x, -99 },      /* full */
    };
    ck_assert_int_eq(goro_select(cs, 3, GORO_SELECT_NOWAIT), -EAGAIN);
    ck_assert_int_eq(v, -1);
    ck_assert_int_eq(goro_chan_len(b), 1);
    ck_assert_int_eq(goro_chan_try_send(a, &x), -EAGAIN);  /* left no waiter behind */

    /* NULL channels are never ready, whatever their op */
    goro_case_t n3[3] = {
        { NULL, GORO_RECV, &v, -99 },
        { b, GORO_RECV, &v, -99 },
        { NULL, GORO_SEND, &x, -99 },
    };
    ck_assert_int_eq(goro_select(n3, 3, 0), 1);
    ck_assert_int_eq(v, 5);
    ck_assert_int_eq(n3[0].result, -99);
    ck_assert_int_eq(n3[2].result, -99);
    ck_assert_int_eq(goro_select(n3, 3, GORO_SELECT_NOWAIT), -EAGAIN);

    /* all NULL: would wait forever */
    goro_case_t none[2] = { { NULL, GORO_RECV, &v, 0 }, { NULL, GORO_SEND, &x, 0 } };
    ck_assert_int_eq(goro_select(none, 2, 0), -EDEADLK);
    ck_assert_int_eq(goro_select(none, 2, GORO_SELECT_NOWAIT), -EAGAIN);
    ck_assert_int_eq(goro_select(none, 0, 0), -EDEADLK);
    ck_assert_int_eq(goro_select(none, 0, GORO_SELECT_NOWAIT), -EAGAIN);

    /* bad arguments */
    ck_assert_int_eq(goro_select(NULL, 1, 0), -EINVAL);
    ck_assert_int_eq(goro_select(cs, -1, 0), -EINVAL);
    ck_assert_int_eq(goro_select(cs, 1, 0x100), -EINVAL);
    goro_case_t bad[2] = { { b, GORO_RECV, &v, 0 }, { a, 7, &x, 0 } };
    ck_assert_int_eq(goro_select(bad, 2, GORO_SELECT_NOWAIT), -EINVAL);
    ck_assert_int_eq(goro_chan_free(a), 0);
    ck_assert_int_eq(goro_chan_free(b), 0);
}
END_TEST

/* ---- waiting on several channels ---- */

struct sel_wait {
    goro_case_t cs[8];
    int n;
    long v[8];
    int flags;
};

static long select_and_return(struct sel_wait *s)
{
    return goro_select(s->cs, s->n, s->flags);
}

/* Probing a queue with try_send/try_recv drops a stale select waiter on
 * the way (the waiter's select has fired), which would hide one that was
 * left behind: so some rounds look at the queues with goro_chan_free()
 * first, which refuses (-EBUSY) while anything is still queued. */
START_TEST(wait_woken_by_one_others_left_clean)
{
    enum { NC = 6 };                /* recv on 0..3, send on 4..5 */
    for (int probe_first = 0; probe_first < 2; probe_first++)
    for (int woke = 0; woke < NC; woke++) {
        goro_chan_t *c[NC];
        for (int i = 0; i < NC; i++)
            c[i] = t_chan_new(sizeof(long), 0);
        struct sel_wait s = { .n = NC };
        long out = 1000 + woke;
        for (int i = 0; i < NC; i++) {
            s.v[i] = -1;
            s.cs[i] = i < 4 ? (goro_case_t){ c[i], GORO_RECV, &s.v[i], -99 }
                            : (goro_case_t){ c[i], GORO_SEND, &out, -99 };
        }
        goro_t *h = go(select_and_return, &s);
        ck_assert_ptr_nonnull(h);
        long x = 500 + woke, got = -1;
        if (woke < 4)
            ck_assert_int_eq(send_when_waited(c[woke], &x), 0);  /* it was parked */
        else
            ck_assert_int_eq(recv_when_waited(c[woke], &got), 1);
        long r = -1;
        ck_assert_int_eq(goro_join(h, &r), 0);
        ck_assert_int_eq(r, woke);
        if (woke < 4) {
            ck_assert_int_eq(s.cs[woke].result, 1);
            ck_assert_int_eq(s.v[woke], 500 + woke);
        } else {
            ck_assert_int_eq(s.cs[woke].result, 0);
            ck_assert_int_eq(got, 1000 + woke);
        }
        for (int i = 0; i < NC; i++)
            if (i != woke) {
                ck_assert_int_eq(s.cs[i].result, -99);
                if (i < 4)
                    ck_assert_int_eq(s.v[i], -1);
            }
        if (probe_first) {
            /* the finished select must not take or give anything more */
            for (int i = 0; i < NC; i++)
                if (i < 4)
                    ck_assert_int_eq(goro_chan_try_send(c[i], &x), -EAGAIN);
                else
                    ck_assert_int_eq(goro_chan_try_recv(c[i], &got), -EAGAIN);
        }
        /* nothing is left queued anywhere */
        for (int i = 0; i < NC; i++)
            ck_assert_msg(goro_chan_free(c[i]) == 0, "woken by case %d, %s: a waiter "
                          "is left on the channel of case %d", woke,
                          probe_first ? "after probing" : "not probed", i);
    }
}
END_TEST

START_TEST(send_case_woken_by_receiver)
{
    goro_chan_t *a = t_chan_new(sizeof(long), 0), *b = t_chan_new(sizeof(long), 0);
    struct sel_wait s = { .n = 2 };
    long out = 31337;
    s.v[1] = -1;
    s.cs[0] = (goro_case_t){ a, GORO_SEND, &out, -99 };
    s.cs[1] = (goro_case_t){ b, GORO_RECV, &s.v[1], -99 };
    goro_t *h = go(select_and_return, &s);
    ck_assert_ptr_nonnull(h);
    long got = 0;
    ck_assert_int_eq(recv_when_waited(a, &got), 1);
    ck_assert_int_eq(got, 31337);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(s.cs[0].result, 0);
    ck_assert_int_eq(s.v[1], -1);
    long x = 1;
    ck_assert_int_eq(goro_chan_try_send(b, &x), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(a), 0);
    ck_assert_int_eq(goro_chan_free(b), 0);
}
END_TEST

/* A thread the runtime does not own waits in select; a coroutine wakes it. */
static void send_later(goro_chan_t *ch, long x)
{
    for (int i = 0; i < 100; i++)
        goro_yield();
    if (goro_chan_send(ch, &x) != 0)
        t_fail("send_later: send failed");
}

START_TEST(thread_waits_in_select)
{
    goro_chan_t *a = t_chan_new(sizeof(long), 0), *b = t_chan_new(sizeof(long), 0);
    for (int round = 0; round < 20; round++) {
        long va = -1, vb = -1;
        goro_case_t cs[2] = { { a, GORO_RECV, &va, -99 }, { b, GORO_RECV, &vb, -99 } };
        goro_t *h = go(send_later, round % 2 ? a : b, (long)round);
        ck_assert_ptr_nonnull(h);
        int r = goro_select(cs, 2, 0);
        ck_assert_int_eq(r, round % 2 ? 0 : 1);
        ck_assert_int_eq(cs[r].result, 1);
        ck_assert_int_eq(r ? vb : va, round);
        ck_assert_int_eq(goro_join(h, NULL), 0);
    }
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_chan_free(a), 0);
    ck_assert_int_eq(goro_chan_free(b), 0);
}
END_TEST

/* ---- close ---- */

START_TEST(close_wakes_select)
{
    /* recv case: result 0, element zeroed */
    goro_chan_t *a = t_chan_new(sizeof(long), 0), *b = t_chan_new(sizeof(long), 1);
    struct sel_wait s = { .n = 2 };
    s.v[0] = 0x4444;
    s.v[1] = 0x5555;
    s.cs[0] = (goro_case_t){ a, GORO_RECV, &s.v[0], -99 };
    s.cs[1] = (goro_case_t){ b, GORO_RECV, &s.v[1], -99 };
    goro_t *h = go(select_and_return, &s);
    ck_assert_ptr_nonnull(h);
    t_settle();
    ck_assert_int_eq(goro_chan_close(b), 0);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(s.cs[1].result, 0);
    ck_assert_int_eq(s.v[1], 0);
    ck_assert_int_eq(s.v[0], 0x4444);
    long x = 3;
    ck_assert_int_eq(goro_chan_try_send(a, &x), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(a), 0);
    ck_assert_int_eq(goro_chan_free(b), 0);

    /* send case: -EPIPE */
    goro_chan_t *c = t_chan_new(sizeof(long), 0), *d = t_chan_new(sizeof(long), 0);
    struct sel_wait t = { .n = 2 };
    long out = 9;
    t.v[0] = -1;
    t.cs[0] = (goro_case_t){ c, GORO_RECV, &t.v[0], -99 };
    t.cs[1] = (goro_case_t){ d, GORO_SEND, &out, -99 };
    h = go(select_and_return, &t);
    ck_assert_ptr_nonnull(h);
    t_settle();
    ck_assert_int_eq(goro_chan_close(d), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(t.cs[1].result, -EPIPE);
    ck_assert_int_eq(t.v[0], -1);
    ck_assert_int_eq(goro_chan_try_send(c, &x), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(c), 0);
    ck_assert_int_eq(goro_chan_free(d), 0);

    /* an already closed channel is ready at once */
    goro_chan_t *e = t_chan_new(sizeof(long), 0);
    ck_assert_int_eq(goro_chan_close(e), 0);
    long v = 7;
    goro_case_t cs[1] = { { e, GORO_RECV, &v, -99 } };
    ck_assert_int_eq(goro_select(cs, 1, 0), 0);
    ck_assert_int_eq(cs[0].result, 0);
    ck_assert_int_eq(v, 0);
    cs[0] = (goro_case_t){ e, GORO_SEND, &x, -99 };
    ck_assert_int_eq(goro_select(cs, 1, GORO_SELECT_NOWAIT), 0);
    ck_assert_int_eq(cs[0].result, -EPIPE);
    ck_assert_int_eq(goro_chan_free(e), 0);
}
END_TEST

/* ---- the same channel twice ---- */

START_TEST(same_channel_in_two_cases)
{
    goro_chan_t *a = t_chan_new(sizeof(long), 1);
    long hits[2] = { 0, 0 };
    for (int k = 0; k < 1000; k++) {
        long x = k, v[2] = { -1, -1 };
        ck_assert_int_eq(goro_chan_try_send(a, &x), 0);
        goro_case_t cs[2] = { { a, GORO_RECV, &v[0], -99 }, { a, GORO_RECV, &v[1], -99 } };
        int r = goro_select(cs, 2, 0);
        ck_assert(r == 0 || r == 1);
        ck_assert_int_eq(v[r], k);
        ck_assert_int_eq(v[1 - r], -1);
        ck_assert_int_eq(cs[1 - r].result, -99);
        hits[r]++;
    }
    ck_assert_msg(hits[0] > 300 && hits[1] > 300, "duplicate cases chosen %ld / %ld",
                  hits[0], hits[1]);
    ck_assert_int_eq(goro_chan_free(a), 0);

    /* parked on one unbuffered channel twice: fires once, leaves no waiter */
    goro_chan_t *u = t_chan_new(sizeof(long), 0);
    struct sel_wait s = { .n = 2 };
    s.v[0] = s.v[1] = -1;
    s.cs[0] = (goro_case_t){ u, GORO_RECV, &s.v[0], -99 };
    s.cs[1] = (goro_case_t){ u, GORO_RECV, &s.v[1], -99 };
    goro_t *h = go(select_and_return, &s);
    ck_assert_ptr_nonnull(h);
    long x = 42;
    ck_assert_int_eq(send_when_waited(u, &x), 0);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert(r == 0 || r == 1);
    ck_assert_int_eq(s.v[r], 42);
    ck_assert_int_eq(s.v[1 - r], -1);
    ck_assert_int_eq(goro_chan_try_send(u, &x), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(u), 0);

    /* send and recv on the same unbuffered channel: must not pair with itself */
    u = t_chan_new(sizeof(long), 0);
    struct sel_wait t = { .n = 2 };
    long out = 77;
    t.v[1] = -1;
    t.cs[0] = (goro_case_t){ u, GORO_SEND, &out, -99 };
    t.cs[1] = (goro_case_t){ u, GORO_RECV, &t.v[1], -99 };
    ck_assert_int_eq(goro_select(t.cs, 2, GORO_SELECT_NOWAIT), -EAGAIN);
    h = go(select_and_return, &t);
    ck_assert_ptr_nonnull(h);
    long got = 0;
    ck_assert_int_eq(recv_when_waited(u, &got), 1);
    ck_assert_int_eq(got, 77);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(t.cs[0].result, 0);
    ck_assert_int_eq(t.v[1], -1);
    ck_assert_int_eq(goro_chan_try_send(u, &x), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(u), 0);
}
END_TEST

/* ---- a channel freed by the partner that completed the select ---- */

/* The select's channel is freed as soon as the partner's operation on it
 * returns (docs/api.md allows that): the woken select must not touch it
 * again. One worker makes the order fixed: the partner completes the
 * select, frees the channel, and only then does the select run. The second
 * form also queues the select twice on the freed channel (send and recv). */
struct freed_round {
    goro_chan_t *a, *b;
    long v[2];
    int both_on_a;
};

static long select_on_doomed(struct freed_round *r)
{
    goro_case_t cs[2] = {
        { r->a, GORO_RECV, &r->v[0], -99 },
        { r->both_on_a ? r->a : r->b, r->both_on_a ? GORO_SEND : GORO_RECV, &r->v[1], -99 },
    };
    int k = goro_select(cs, 2, 0);
    return k == 0 && cs[0].result == 1 && r->v[0] == 7 ? 0 : 1000 + k;
}

static long complete_and_free(struct freed_round *r)
{
    goro_t *h = go(select_on_doomed, r);
    if (!h)
        return 1;
    goro_yield();                   /* one worker: the select parks now */
    long x = 7;
    if (goro_chan_send(r->a, &x) != 0)
        return 2;
    if (goro_chan_free(r->a) != 0)  /* the select's operation on a is over */
        return 3;
    long res = -1;
    if (goro_join(h, &res) != 0)
        return 4;
    return res;
}

static int freed_channel_child(void *arg)
{
    (void)arg;
    if (goro_start(&(goro_config_t){ .workers = 1 }) != 0)
        return 90;
    /* Channels of one size, freed and made again: freed ones are reused,
     * so a stale lock word is whatever the allocator left there. */
    for (int i = 0; i < 200; i++) {
        struct freed_round r = { .both_on_a = i % 2 };
        if (goro_chan_new(&r.a, sizeof(long), 0) || goro_chan_new(&r.b, sizeof(long), 0))
            return 91;
        long res = -1;
        goro_t *h = go(complete_and_free, &r);
        if (!h || goro_join(h, &res) != 0)
            return 92;
        if (res != 0) {
            printf("round %d: %ld\n", i, res);
            return 93;
        }
        if (goro_chan_free(r.b) != 0)
            return 94;
    }
    return goro_shutdown() == 0 ? 0 : 95;
}

START_TEST(partner_frees_channel_after_completing)
{
    char out[512];
    int st = t_run_child(freed_channel_child, NULL, t_timeout(10), out, sizeof out);
    ck_assert_msg(st != -1, "the child hung (select spinning on a freed channel's lock)");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
}
END_TEST

/* ---- more cases than fit on the stack ---- */

struct many {
    int n;
    goro_case_t *cs;
};

static long select_many(struct many *m)
{
    return goro_select(m->cs, m->n, 0);
}

START_TEST(many_cases_heap_path)
{
    enum { N = 40 };
    goro_chan_t *b[N], *u[N];
    long v[N];
    struct many m = { .n = N };
    m.cs = calloc(N, sizeof *m.cs);
    ck_assert_ptr_nonnull(m.cs);
    goro_case_t *cs = m.cs;
    for (int i = 0; i < N; i++) {
        b[i] = t_chan_new(sizeof(long), 1);
        u[i] = t_chan_new(sizeof(long), 0);
    }

    /* one ready case among 40, some cases NULL */
    for (int ready = 0; ready < N; ready += 3) {
        long x = 1000 + ready;
        ck_assert_int_eq(goro_chan_try_send(b[ready], &x), 0);
        for (int i = 0; i < N; i++) {
            v[i] = -1;
            cs[i] = (goro_case_t){ (i % 7 == 6 && i != ready) ? NULL : b[i],
                                   GORO_RECV, &v[i], -99 };
        }
        int r = goro_select(cs, N, GORO_SELECT_NOWAIT);
        ck_assert_int_eq(r, ready);
        ck_assert_int_eq(v[ready], 1000 + ready);
        ck_assert_int_eq(cs[ready].result, 1);
        ck_assert_int_eq(goro_select(cs, N, GORO_SELECT_NOWAIT), -EAGAIN);
    }

    /* all 40 ready: every one gets chosen (each ~100 times of 4000) */
    long hits[N] = { 0 };
    for (int i = 0; i < N; i++) {
        long x = i;
        ck_assert_int_eq(goro_chan_try_send(b[i], &x), 0);
    }
    for (int k = 0; k < 4000; k++) {
        for (int i = 0; i < N; i++)
            cs[i] = (goro_case_t){ b[i], GORO_RECV, &v[i], -99 };
        int r = goro_select(cs, N, 0);
        T_CHECK(r >= 0 && r < N && v[r] == r, "select over %d returned %d", N, r);
        hits[r]++;
        long x = r;
        T_CHECK(goro_chan_try_send(b[r], &x) == 0, "refill %d", r);
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(hits[i] > 0, "case %d of %d never chosen in 4000 selects", i, N);

    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(goro_chan_free(b[i]), 0);
        ck_assert_int_eq(goro_chan_free(u[i]), 0);
    }

    /* parked on 40 channels, half of them as a sender: woken by one; the
     * first half of the others is probed, all must be left with no waiter */
    long out[N];
    for (int woke = 5; woke < N; woke += 17) {
        for (int i = 0; i < N; i++) {
            u[i] = t_chan_new(sizeof(long), 0);
            v[i] = -1;
            out[i] = 2000 + i;
            cs[i] = (goro_case_t){ u[i], i % 2 ? GORO_SEND : GORO_RECV,
                                   i % 2 ? (void *)&out[i] : (void *)&v[i], -99 };
        }
        goro_t *h = go(select_many, &m);
        ck_assert_ptr_nonnull(h);
        long x = 3000 + woke, got = -1;
        if (woke % 2)
            ck_assert_int_eq(recv_when_waited(u[woke], &got), 1);
        else
            ck_assert_int_eq(send_when_waited(u[woke], &x), 0);
        long r = -1;
        ck_assert_int_eq(goro_join(h, &r), 0);
        ck_assert_int_eq(r, woke);
        if (woke % 2) {
            ck_assert_int_eq(got, 2000 + woke);
            ck_assert_int_eq(cs[woke].result, 0);
        } else {
            ck_assert_int_eq(v[woke], 3000 + woke);
            ck_assert_int_eq(cs[woke].result, 1);
        }
        for (int i = 0; i < N / 2; i++) {
            if (i % 2)
                ck_assert_int_eq(goro_chan_try_recv(u[i], &got), -EAGAIN);
            else
                ck_assert_int_eq(goro_chan_try_send(u[i], &x), -EAGAIN);
        }
        for (int i = 0; i < N; i++)
            ck_assert_msg(goro_chan_free(u[i]) == 0, "woken by case %d of %d: a waiter "
                          "is left on the channel of case %d", woke, N, i);
    }
    free(m.cs);
}
END_TEST

/* ---- descriptor cases ---- */

static goro_case_t fd_case(int op, int *fd)
{
    return (goro_case_t){ NULL, op, fd, -99 };
}

static void socketpair_nb(int s[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
}

static void close_pair(int s[2])
{
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}

/* The next byte on fd, within a deadline: what a select's fd case said
 * was there must be there (or arrive), and nothing else. */
static int read_byte_until(int fd, double seconds)
{
    unsigned char b;
    ssize_t n = goro_read_until(fd, &b, 1, goro_now() + (int64_t)(seconds * 1e9));
    return n == 1 ? b : (int)n;
}

/* Ready before the call: data there (or left over by a read that did not
 * take all of it), room to write, a value in a channel. */
START_TEST(fd_case_ready_first)
{
    int s[2];
    socketpair_nb(s);
    goro_chan_t *ch = t_chan_new(sizeof(long), 1);
    long v = -1;
    goro_case_t cs[3] = { { ch, GORO_RECV, &v, -99 }, fd_case(GORO_FD_READ, &s[0]),
                          fd_case(GORO_FD_WRITE, &s[0]) };
    /* nothing readable, but writable */
    ck_assert_int_eq(goro_select(cs, 2, GORO_SELECT_NOWAIT), -EAGAIN);
    ck_assert_int_eq(goro_select(cs, 3, 0), 2);
    ck_assert_int_eq(cs[2].result, GORO_WRITABLE);
    ck_assert_int_eq(cs[1].result, -99);
    /* readable: at once, and again while bytes are left */
    ck_assert_int_eq(goro_write(s[1], "abc", 3), 3);
    for (int i = 0; i < 3; i++) {
        cs[1].result = -99;
        ck_assert_int_eq(goro_select(cs, 2, i == 1 ? GORO_SELECT_NOWAIT : 0), 1);
        ck_assert_int_eq(cs[1].result, GORO_READABLE);
        ck_assert_int_eq(read_byte_until(s[0], 1), "abc"[i]);
        ck_assert_int_eq(cs[0].result, -99);
        ck_assert_int_eq(v, -1);
    }
    ck_assert_int_eq(goro_select(cs, 2, GORO_SELECT_NOWAIT), -EAGAIN);
    /* the channel first: the descriptor case waits its turn */
    long x = 5;
    ck_assert_int_eq(goro_chan_try_send(ch, &x), 0);
    ck_assert_int_eq(goro_select(cs, 2, 0), 0);
    ck_assert_int_eq(cs[0].result, 1);
    ck_assert_int_eq(v, 5);
    ck_assert_int_eq(goro_chan_free(ch), 0);
    close_pair(s);

    /* a regular file and /dev/null cannot be polled: always ready */
    char path[] = "/tmp/goro_select_XXXXXX";
    int f = mkstemp(path);
    ck_assert_int_ge(f, 0);
    unlink(path);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    ck_assert_int_ge(null, 0);
    int fds[2] = { f, null };
    for (int i = 0; i < 2; i++) {
        goro_case_t one[1] = { fd_case(i ? GORO_FD_WRITE : GORO_FD_READ, &fds[i]) };
        ck_assert_int_eq(goro_select(one, 1, 0), 0);
        ck_assert_int_eq(one[0].result, i ? GORO_WRITABLE : GORO_READABLE);
        ck_assert_int_eq(goro_close(fds[i]), 0);
    }
}
END_TEST

/* Bad cases: rejected, switched off, or ready at once with -EBADF. */
START_TEST(fd_case_arguments)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), 1);
    int s[2];
    socketpair_nb(s);
    long v;
    goro_case_t bad[2] = { { ch, GORO_FD_READ, &s[0], -99 }, fd_case(GORO_FD_READ, NULL) };
    ck_assert_int_eq(goro_select(&bad[0], 1, 0), -EINVAL);     /* with a channel */
    ck_assert_int_eq(goro_select(&bad[1], 1, 0), -EINVAL);     /* no descriptor */
    int off = -1, closed = 19999, huge = 1 << 30;
    goro_case_t cs[2] = { fd_case(GORO_FD_READ, &off), { NULL, GORO_RECV, &v, -99 } };
    ck_assert_int_eq(goro_select(cs, 2, 0), -EDEADLK);          /* nothing to wait for */
    ck_assert_int_eq(goro_select(cs, 2, GORO_SELECT_NOWAIT), -EAGAIN);
    ck_assert_int_eq(goro_select_until(cs, 2, 0, goro_now() + GORO_MSEC), -EDEADLK);
    int *bads[] = { &closed, &huge };
    for (int i = 0; i < 2; i++) {
        goro_case_t one[2] = { fd_case(i ? GORO_FD_WRITE : GORO_FD_READ, bads[i]),
                               fd_case(GORO_FD_READ, &s[0]) };
        ck_assert_int_eq(goro_select(one, 2, 0), 0);
        ck_assert_int_eq(one[0].result, -EBADF);
        ck_assert_int_eq(one[1].result, -99);
    }
    ck_assert_int_eq(goro_chan_free(ch), 0);
    close_pair(s);
}
END_TEST

struct fd_sel {
    goro_case_t cs[4];
    int n;
    int fd;
    long v;
    int64_t deadline;
    atomic_int in;
    atomic_int done;            /* the select returned (result is set) */
    int result;
};

static long fd_select_run(struct fd_sel *f)
{
    atomic_store(&f->in, 1);
    f->result = goro_select_until(f->cs, f->n, 0, f->deadline);
    atomic_store(&f->done, 1);
    return f->result;
}

/* A select parked on a channel and a descriptor. */
static goro_t *fd_select_parked(struct fd_sel *f, goro_chan_t *ch, int fd, int op)
{
    *f = (struct fd_sel){ .n = 2, .fd = fd, .v = -1, .deadline = GORO_FOREVER };
    f->cs[0] = (goro_case_t){ ch, GORO_RECV, &f->v, -99 };
    f->cs[1] = fd_case(op, &f->fd);
    goro_t *h = go(fd_select_run, f);
    ck_assert_ptr_nonnull(h);
    ck_assert(t_wait_flag(&f->in, t_timeout(10)));
    t_settle();
    /* Only the flag: the results are the coroutine's until it is joined. */
    ck_assert_msg(!atomic_load(&f->done), "the select did not wait");
    return h;
}

static double join_time(goro_t *h, long *r)
{
    double t0 = t_now();
    ck_assert_int_eq(goro_join(h, r), 0);
    return t_now() - t0;
}

/* Parked: woken by the descriptor, or by the channel - then the
 * readiness that came with it is not lost: the next select sees it. */
START_TEST(fd_case_wakes_parked_select)
{
    int s[2];
    socketpair_nb(s);
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    struct fd_sel f;
    long r = -1;

    goro_t *h = fd_select_parked(&f, ch, s[0], GORO_FD_READ);
    ck_assert_int_eq(goro_write(s[1], "x", 1), 1);
    ck_assert_msg(join_time(h, &r) < t_prompt(), "the edge was slow to wake the select");
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(f.cs[1].result, GORO_READABLE);
    ck_assert_int_eq(f.cs[0].result, -99);
    ck_assert_int_eq(read_byte_until(s[0], 1), 'x');
    long x = 1;
    ck_assert_int_eq(goro_chan_try_send(ch, &x), -EAGAIN);      /* not queued any more */

    h = fd_select_parked(&f, ch, s[0], GORO_FD_READ);
    x = 77;
    ck_assert_int_eq(send_when_waited(ch, &x), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(f.v, 77);
    ck_assert_int_eq(f.cs[1].result, -99);
    /* a reader gets the next byte: the select left nothing on the queue */
    ck_assert_int_eq(goro_write(s[1], "y", 1), 1);
    ck_assert_int_eq(read_byte_until(s[0], t_timeout(5)), 'y');

    /* a write case: parked while the socket is full, woken by a reader */
    int sent = 0;
    while (send(s[0], "0123456789abcdef", 16, MSG_DONTWAIT) > 0)
        sent += 16;
    h = fd_select_parked(&f, ch, s[0], GORO_FD_WRITE);
    char buf[4096];
    for (int got = 0; got < sent; ) {
        ssize_t n = goro_read(s[1], buf, sizeof buf);
        ck_assert_int_gt(n, 0);
        got += (int)n;
    }
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(f.cs[1].result, GORO_WRITABLE);
    ck_assert_int_eq(goro_chan_free(ch), 0);
    close_pair(s);
}
END_TEST

/* Neither until the deadline; cancelled; the descriptor closed under it. */
START_TEST(fd_case_deadline_cancel_close)
{
    int s[2];
    socketpair_nb(s);
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    long v;
    goro_case_t cs[2] = { { ch, GORO_RECV, &v, -99 }, fd_case(GORO_FD_READ, &s[0]) };
    int64_t t0 = goro_now();
    ck_assert_int_eq(goro_select_until(cs, 2, 0, t0 + 30 * GORO_MSEC), -ETIMEDOUT);
    ck_assert_int_ge(goro_now() - t0, 30 * GORO_MSEC);
    ck_assert_int_eq(cs[1].result, -99);

    struct fd_sel f;
    long r = 0;
    goro_t *h = fd_select_parked(&f, ch, s[0], GORO_FD_READ);
    ck_assert_int_eq(goro_cancel(h), 0);
    ck_assert_msg(join_time(h, &r) < t_prompt(), "the cancel was slow");
    ck_assert_int_eq(r, -ECANCELED);
    ck_assert_int_eq(f.cs[1].result, -99);
    /* nothing of it left on either queue */
    long x = 1;
    ck_assert_int_eq(goro_chan_try_send(ch, &x), -EAGAIN);
    ck_assert_int_eq(goro_write(s[1], "z", 1), 1);
    ck_assert_int_eq(read_byte_until(s[0], t_timeout(5)), 'z');

    /* goro_close of the descriptor: the case fires with -EBADF */
    h = fd_select_parked(&f, ch, s[0], GORO_FD_READ);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_msg(join_time(h, &r) < t_prompt(), "the close was slow to wake the select");
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(f.cs[1].result, -EBADF);
    ck_assert_int_eq(goro_chan_try_send(ch, &x), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(ch), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

/* A thread the runtime does not own waits on a descriptor case. */
static void write_later(int fd)
{
    for (int i = 0; i < 100; i++)
        goro_yield();
    if (goro_write(fd, "t", 1) != 1)
        t_fail("write_later");
}

START_TEST(fd_case_on_a_thread)
{
    int s[2];
    socketpair_nb(s);
    for (int round = 0; round < 10; round++) {
        goro_case_t cs[1] = { fd_case(GORO_FD_READ, &s[0]) };
        goro_t *h = go(write_later, s[1]);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(goro_select_until(cs, 1, 0, goro_now() + 10 * GORO_SEC), 0);
        ck_assert_int_eq(cs[0].result, GORO_READABLE);
        ck_assert_int_eq(read_byte_until(s[0], 1), 't');
        ck_assert_int_eq(goro_join(h, NULL), 0);
    }
    ck_assert_msg(!t_failed(), "%s", t_failed());
    close_pair(s);
}
END_TEST

/* Many selects on one descriptor (with a quit channel each, as acceptors
 * sharing a listener would have): one write of a byte for each wakes them,
 * in turn, and each takes one byte. A case says the descriptor was ready
 * when it was looked at; another reader may take the byte first, so a
 * reader reads without waiting and selects again when it finds nothing.
 * Every byte is taken, promptly (no select left asleep beside data), and
 * the rest leave by quit. */
static atomic_long many_in, many_bytes, many_empty;

static long many_select_reader(int fd, goro_chan_t *quit)
{
    long v;
    long took = 0;
    goro_case_t cs[2] = { { quit, GORO_RECV, &v, -99 }, fd_case(GORO_FD_READ, &fd) };
    atomic_fetch_add(&many_in, 1);
    for (;;) {
        int r = goro_select_until(cs, 2, 0, goro_now() + 20 * GORO_SEC);
        if (r == 0)
            return took;
        if (r != 1 || cs[1].result != GORO_READABLE) {
            t_fail("select on a shared descriptor: %d, result %d", r, cs[1].result);
            return took;
        }
        unsigned char b;
        ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
        if (n < 0 && errno == EAGAIN) {
            atomic_fetch_add(&many_empty, 1);   /* another reader was first */
            continue;
        }
        if (n != 1 || b != 'm') {
            t_fail("the byte after readiness: %zd, %d", n, n == 1 ? b : -errno);
            return took;
        }
        atomic_fetch_add(&many_bytes, 1);
        took++;
    }
}

START_TEST(many_selects_on_one_fd)
{
    enum { N = 24, FIRST = 16 };
    int s[2];
    socketpair_nb(s);
    goro_chan_t *quit = t_chan_new(0, 0);
    atomic_store(&many_in, 0);
    atomic_store(&many_bytes, 0);
    atomic_store(&many_empty, 0);
    t_fail_reset();
    goro_t *h[N];
    for (int i = 0; i < N; i++)
        ck_assert_ptr_nonnull(h[i] = go(many_select_reader, s[0], quit));
    ck_assert_int_eq(t_wait_at_least(&many_in, N, t_timeout(10)), N);
    t_settle();
    char bytes[FIRST];
    memset(bytes, 'm', sizeof bytes);
    ck_assert_int_eq(goro_write(s[1], bytes, FIRST), FIRST);
    ck_assert_int_eq(t_wait_at_least(&many_bytes, FIRST, t_timeout(10)), FIRST);
    t_settle();
    ck_assert_int_eq(atomic_load(&many_bytes), FIRST);
    ck_assert_int_eq(goro_chan_close(quit), 0);
    long took = 0;
    for (int i = 0; i < N; i++) {
        long r = -1;
        ck_assert_int_eq(goro_join(h[i], &r), 0);
        took += r;
    }
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(took, FIRST);
    printf("many selects on one descriptor: %d bytes to %d readers, %ld found it emptied\n",
           FIRST, N, atomic_load(&many_empty));
    ck_assert_int_eq(goro_chan_free(quit), 0);
    close_pair(s);
}
END_TEST

/* The race: a byte on the descriptor and a value on the channel arrive
 * at random moments, in either order, while a coroutine selects on both.
 * Every event is taken exactly once: after the select returns the channel
 * case, the readiness that came meanwhile is not lost to it, and the next
 * select (or read) sees it. */
static struct {
    int fd;
    goro_chan_t *ch, *ack;
    long rounds;
    atomic_long chan_first, fd_first;
} fr;

static long race_consumer(void)
{
    for (long round = 0; round < fr.rounds; round++) {
        bool got_chan = false, got_fd = false;
        long v = -1;
        while (!got_chan || !got_fd) {
            goro_case_t cs[2] = { { fr.ch, GORO_RECV, &v, -99 }, fd_case(GORO_FD_READ, &fr.fd) };
            int r = goro_select_until(cs, 2, 0, goro_now() + 10 * GORO_SEC);
            if (r == 0 && !got_chan && cs[0].result == 1 && v == round) {
                got_chan = true;
                atomic_fetch_add(got_fd ? &fr.fd_first : &fr.chan_first, !got_fd);
            } else if (r == 1 && cs[1].result == GORO_READABLE) {
                int b = read_byte_until(fr.fd, 10);
                if (b != (int)(round & 0x7f)) {
                    t_fail("round %ld: read %d after readiness", round, b);
                    return -1;
                }
                if (!got_chan)
                    atomic_fetch_add(&fr.fd_first, 1);
                got_fd = true;
            } else {
                t_fail("round %ld (chan %d, fd %d): select %d, results %d %d, v %ld", round,
                       got_chan, got_fd, r, cs[0].result, cs[1].result, v);
                return -1;
            }
        }
        long a = round;
        if (goro_chan_send(fr.ack, &a) != 0)
            return -1;
    }
    return 0;
}

static void spin(uint32_t n)
{
    while (n--)
        __asm__ volatile("" ::: "memory");
}

static long race_producer(int wfd)
{
    uint32_t rnd = 2024;
    for (long round = 0; round < fr.rounds; round++) {
        unsigned char b = (unsigned char)(round & 0x7f);
        bool fd_first = t_rnd(&rnd) % 2;
        spin(t_rnd(&rnd) % 20000);
        if (fd_first && goro_write(wfd, &b, 1) != 1)
            return -1;
        spin(t_rnd(&rnd) % 5000);
        if (goro_chan_send(fr.ch, &round) != 0)
            return -1;
        spin(t_rnd(&rnd) % 5000);
        if (!fd_first && goro_write(wfd, &b, 1) != 1)
            return -1;
        long a = -1;
        if (goro_chan_recv(fr.ack, &a) != 1 || a != round)
            return -1;
    }
    return 0;
}

START_TEST(fd_case_races_channel)
{
    int s[2];
    socketpair_nb(s);
    fr.fd = s[0];
    fr.rounds = t_scale(3000);
    fr.ch = t_chan_new(sizeof(long), (size_t)(_i % 2));    /* unbuffered, then 1 */
    fr.ack = t_chan_new(sizeof(long), 0);
    atomic_store(&fr.chan_first, 0);
    atomic_store(&fr.fd_first, 0);
    t_fail_reset();
    goro_t *c = go(race_consumer), *p = go(race_producer, s[1]);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(p);
    long rc = -1, rp = -1;
    ck_assert_int_eq(goro_join(c, &rc), 0);
    ck_assert_int_eq(goro_join(p, &rp), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(rp, 0);
    ck_assert_int_eq(atomic_load(&fr.chan_first) + atomic_load(&fr.fd_first), fr.rounds);
    /* nothing more on either */
    goro_case_t cs[2] = { { fr.ch, GORO_RECV, NULL, -99 }, fd_case(GORO_FD_READ, &fr.fd) };
    ck_assert_int_eq(goro_select(cs, 2, GORO_SELECT_NOWAIT), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(fr.ch), 0);
    ck_assert_int_eq(goro_chan_free(fr.ack), 0);
    close_pair(s);
}
END_TEST

Suite *select_suite(void)
{
    Suite *s = suite_create("select");
    TCase *tc = t_runtime_tcase(s, "select", 30);
    tcase_add_test(tc, ready_case_is_chosen);
    tcase_add_test(tc, ready_cases_chosen_uniformly);
    tcase_add_test(tc, nowait_and_null_channels);
    tcase_add_test(tc, wait_woken_by_one_others_left_clean);
    tcase_add_test(tc, send_case_woken_by_receiver);
    tcase_add_test(tc, thread_waits_in_select);
    tcase_add_test(tc, close_wakes_select);
    tcase_add_test(tc, same_channel_in_two_cases);
    tcase_add_test(tc, many_cases_heap_path);
    tcase_add_test(tc, partner_frees_channel_after_completing);
    tc = t_runtime_tcase(s, "select_fd", 60);
    tcase_add_test(tc, fd_case_ready_first);
    tcase_add_test(tc, fd_case_arguments);
    tcase_add_test(tc, fd_case_wakes_parked_select);
    tcase_add_test(tc, fd_case_deadline_cancel_close);
    tcase_add_test(tc, fd_case_on_a_thread);
    tcase_add_test(tc, many_selects_on_one_fd);
    tcase_add_loop_test(tc, fd_case_races_channel, 0, 2);
    return s;
}
