/* The deterministic testing mode (goro_config_t.clock, GORO_TEST_CLOCK;
 * runtime/sched/sched.c invariant 10; docs/testing.md). Each test runs in
 * a child process with a runtime of its own:
 *   - a program whose timeouts are ten minutes and more - a receive, a
 *     mutex, a join, an hour's sleep, a one-minute ticker, a thread outside
 *     sleeping five minutes - ends in well under a second of real time,
 *     each wait ending exactly at its virtual deadline;
 *   - the same seed gives the same interleaving of yielding and sleeping
 *     coroutines, run after run; different seeds give different ones;
 *   - a wait on a descriptor keeps the clock to the real pace (a deadline
 *     is not jumped over while the world may still answer);
 *   - settings: one worker; more is -EINVAL; the clock is real again
 *     after goro_shutdown.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

#define MIN_NS (60 * GORO_SEC)

static int64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GORO_SEC + ts.tv_nsec;
}

static int start_virtual(uint64_t seed)
{
    return goro_start(&(goro_config_t){ .clock = GORO_CLOCK_VIRTUAL, .seed = seed });
}

/* Runs fn(arg) in a child process, which must exit with 0; out gets what
 * it printed. */
static void child_ok(int (*fn)(void *), void *arg, char *out, size_t len)
{
    int st = t_run_child(fn, arg, t_timeout(60), out, len);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d\n%s", st, out);
}

/* Prints "what: <virtual seconds it took>" to stdout. */
static void took(const char *what, int64_t from)
{
    printf("%s: %.3f s\n", what, (double)(goro_now() - from) / GORO_SEC);
}

/* ---- long timeouts, in no time ---- */

static goro_mutex_t timeouts_mu;

static void forever(void)
{
    goro_sleep(24 * 60 * MIN_NS);
}

static void timeouts_body(void)
{
    goro_chan_t *ch;
    if (goro_chan_new(&ch, sizeof(int), 0) != 0)
        return;
    int64_t t = goro_now();
    int v;
    printf("recv_until: %d\n", goro_chan_recv_until(ch, &v, t + 10 * MIN_NS));
    took("recv", t);
    goro_mutex_lock(&timeouts_mu);
    goro_t *h;
    t = goro_now();
    goro_go(&h, NULL, forever);
    printf("join_until: %d\n", goro_join_until(h, NULL, t + 15 * MIN_NS));
    took("join", t);
    goro_cancel(h);
    goro_join(h, NULL);
    goro_mutex_unlock(&timeouts_mu);
    t = goro_now();
    goro_sleep(60 * MIN_NS);
    took("sleep", t);
    goro_ticker_t *tk;
    if (goro_ticker_new(&tk, MIN_NS) != 0)
        return;
    t = goro_now();
    int64_t none = 0;
    printf("ticker_wait_until: %d %lld\n",
           goro_ticker_wait_until(tk, &none, t + MIN_NS / 2), (long long)none);
    took("tick wait", t);
    for (int i = 0; i < 10; i++) {
        int64_t at;
        goro_ticker_wait(tk, &at);
        if (at != t + (i + 1) * MIN_NS)
            printf("tick %d late: %lld ns\n", i, (long long)(at - t - (i + 1) * MIN_NS));
    }
    took("ticks", t);
    goro_ticker_free(tk);
    goro_chan_free(ch);
}

static int timeouts_child(void *arg)
{
    (void)arg;
    int64_t real = real_ns();
    if (start_virtual(1) != 0 || goro_workers() != 1)
        return 10;
    goro_mutex_init(&timeouts_mu);
    goro_t *g;
    if (goro_go(&g, NULL, timeouts_body) != 0 || goro_join(g, NULL) != 0)
        return 11;
    int64_t t = goro_now();
    printf("outside sleep: %d\n", goro_sleep(5 * MIN_NS));
    took("outside", t);
    if (goro_shutdown() != 0)
        return 12;
    printf("real: %.3f s\n", (double)(real_ns() - real) / GORO_SEC);
    return 0;
}

START_TEST(ten_minute_timeouts_take_no_time)
{
    char out[4096];
    child_ok(timeouts_child, NULL, out, sizeof out);
    ck_assert_msg(strstr(out, "recv_until: -110\nrecv: 600.000 s\n"), "%s", out);
    ck_assert_msg(strstr(out, "join_until: -110\njoin: 900.000 s\n"), "%s", out);
    ck_assert_msg(strstr(out, "sleep: 3600.000 s\n"), "%s", out);
    ck_assert_msg(strstr(out, "ticker_wait_until: -110 0\ntick wait: 30.000 s\n"), "%s", out);
    ck_assert_msg(strstr(out, "ticks: 600.000 s\n") && !strstr(out, "late"), "%s", out);
    ck_assert_msg(strstr(out, "outside sleep: 0\noutside: 300.000 s\n"), "%s", out);
    double real = -1;
    const char *r = strstr(out, "real: ");
    if (r)
        real = atof(r + 6);
    /* about 2 hours of timeouts: milliseconds natively, a few seconds on
     * the slowest runs (valgrind, qemu) */
    ck_assert_msg(real >= 0 && real < (t_slow() ? 20 : 2), "%s", out);
}
END_TEST

/* ---- the same seed, the same interleaving ---- */

static char order[512];
static int order_len;

static void interleaved(long id)
{
    for (int i = 0; i < 4; i++) {
        order[order_len++] = (char)('a' + id);
        if (i == 1)
            goro_sleep((id % 3) * GORO_MSEC);
        else
            goro_yield();
    }
}

static void interleave_body(void)
{
    goro_t *h[6];
    for (long i = 0; i < 6; i++)
        goro_go(&h[i], NULL, interleaved, i);
    for (int i = 0; i < 6; i++)
        goro_join(h[i], NULL);
}

static int interleave_child(void *arg)
{
    if (start_virtual((uint64_t)(uintptr_t)arg) != 0)
        return 10;
    goro_t *g;
    if (goro_go(&g, NULL, interleave_body) != 0 || goro_join(g, NULL) != 0)
        return 11;
    order[order_len] = 0;
    printf("order %s\n", order);
    return goro_shutdown() == 0 ? 0 : 12;
}

static void run_order(uintptr_t seed, char *buf, size_t len)
{
    char out[1024];
    child_ok(interleave_child, (void *)seed, out, sizeof out);
    const char *o = strstr(out, "order ");
    ck_assert_msg(o && strlen(o) > 6 + 24, "%s", out);
    snprintf(buf, len, "%.24s", o + 6);
}

START_TEST(same_seed_same_interleaving)
{
    char runs[4][3][32];
    for (int s = 0; s < 4; s++)
        for (int k = 0; k < 3; k++) {
            run_order((uintptr_t)s + 1, runs[s][k], sizeof runs[s][k]);
            ck_assert_msg(k == 0 || strcmp(runs[s][k], runs[s][0]) == 0,
                          "seed %d: %s, then %s", s + 1, runs[s][0], runs[s][k]);
        }
    int distinct = 1;
    for (int s = 1; s < 4; s++) {
        bool seen = false;
        for (int u = 0; u < s; u++)
            seen |= strcmp(runs[s][0], runs[u][0]) == 0;
        distinct += !seen;
    }
    ck_assert_msg(distinct >= 2, "four seeds, one order: %s", runs[0][0]);
}
END_TEST

/* ---- a descriptor wait keeps real time ---- */

static void pipe_body(void)
{
    int fd[2];
    if (pipe(fd) != 0)
        return;
    char c;
    int64_t t = goro_now(), real = real_ns();
    ssize_t n = goro_read_until(fd[0], &c, 1, t + 50 * GORO_MSEC);
    printf("read_until: %zd after %.3f s real\n", n, (double)(real_ns() - real) / GORO_SEC);
    took("read", t);
    close(fd[0]);
    close(fd[1]);
}

/* The same wait as a select's descriptor case, beside a channel nobody
 * sends on: the descriptor keeps the clock real as well. */
static void select_pipe_body(void)
{
    int fd[2];
    goro_chan_t *ch;
    if (pipe(fd) != 0)
        return;
    if (goro_chan_new(&ch, 0, 0) != 0)
        return;
    goro_case_t cases[] = { { .ch = ch, .op = GORO_RECV }, { .op = GORO_FD_READ, .elem = &fd[0] } };
    int64_t t = goro_now(), real = real_ns();
    int n = goro_select_until(cases, 2, 0, t + 50 * GORO_MSEC);
    printf("select_until: %d after %.3f s real\n", n, (double)(real_ns() - real) / GORO_SEC);
    took("select", t);
    goro_chan_free(ch);
    close(fd[0]);
    close(fd[1]);
}

static int pipe_child(void *arg)
{
    if (start_virtual(1) != 0)
        return 10;
    goro_t *g;
    if (goro_go(&g, NULL, arg ? select_pipe_body : pipe_body) != 0 || goro_join(g, NULL) != 0)
        return 11;
    return goro_shutdown() == 0 ? 0 : 12;
}

START_TEST(descriptor_wait_keeps_real_time)
{
    static const char *const said[] = { "read_until: -110 after ", "select_until: -110 after " };
    char out[1024];
    child_ok(pipe_child, _i ? "select" : NULL, out, sizeof out);
    const char *r = strstr(out, said[_i]);
    ck_assert_msg(r, "%s", out);
    ck_assert_msg(atof(r + strlen(said[_i])) >= 0.045, "%s", out);
}
END_TEST

/* ---- settings ---- */

static int settings_child(void *arg)
{
    (void)arg;
    if (goro_start(&(goro_config_t){ .clock = GORO_CLOCK_VIRTUAL, .workers = 2 }) != -EINVAL)
        return 10;
    if (goro_start(&(goro_config_t){ .clock = 7 }) != -EINVAL)
        return 11;
    if (start_virtual(0) != 0 || goro_workers() != 1)
        return 12;
    int64_t v = goro_now();
    usleep(20000);
    if (goro_now() != v)
        return 13;                  /* it stands still while nothing waits */
    if (goro_shutdown() != 0)
        return 14;
    int64_t real = real_ns(), now = goro_now();
    if (now < real - GORO_SEC || now > real + GORO_SEC)
        return 15;                  /* the real clock again */
    setenv("GORO_TEST_CLOCK", "virtual", 1);
    if (goro_start(NULL) != 0 || goro_workers() != 1)
        return 16;
    /* virtual again: it stands still (its epoch says nothing: a machine
     * up for less than the epoch has a real clock behind it) */
    v = goro_now();
    usleep(20000);
    if (goro_now() != v)
        return 17;
    return goro_shutdown() == 0 ? 0 : 18;
}

START_TEST(one_worker_and_the_real_clock_after)
{
    char out[1024];
    child_ok(settings_child, NULL, out, sizeof out);
}
END_TEST

Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = t_tcase(s, "virtual", 120);
    tcase_add_test(tc, ten_minute_timeouts_take_no_time);
    tcase_add_test(tc, same_seed_same_interleaving);
    tcase_add_loop_test(tc, descriptor_wait_keeps_real_time, 0, 2);  /* read, select */
    tcase_add_test(tc, one_worker_and_the_real_clock_after);
    return s;
}
