/* Time: goro_now, sleeps, many sleepers, and the deadline of every kind
 * of wait - a timed-out wait ends at its deadline and leaves no trace
 * (nothing sent, received, locked or queued), a past deadline never
 * blocks, and a release racing the deadline is either taken or left in
 * place, never lost. Every wait is tried in a coroutine and on a thread
 * the runtime does not own. Sleeps and deadlines are checked exactly on
 * the virtual clock (t_virtual), except descriptor waits, which keep the
 * real clock there too; real_clock_sleep_latency is the one check of
 * real-time lateness.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

static int64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * GORO_SEC + ts.tv_nsec;
}

/* How late a wake-up may be. The figures of a quiet machine belong to the
 * benchmarks; here a timer only has to fire "within a few ms", plus any
 * stall of the host's since the test began (helpers.h). */
static int64_t late_bound(void)
{
    int64_t host = t_host_stalled();
    if (t_slow())
        return 150 * GORO_MSEC + host;
    return (t_sanitized() ? 40 * GORO_MSEC : 15 * GORO_MSEC) + host;
}

/* A call that must not block at all still gets scheduled like any other. */
static int64_t instant_bound(void) { return late_bound(); }

/* ---- the clock ---- */

static atomic_long published;       /* the latest goro_now() anybody saw */

/* A reading taken after another thread's reading was published is not
 * smaller than it: one clock, monotonic across workers. */
static void clock_reader(long n)
{
    int64_t last = 0;
    for (long i = 0; i < n; i++) {
        int64_t seen = atomic_load(&published);
        int64_t t = goro_now();
        if (t < last || t < seen) {
            t_fail("goro_now went back: %ld after %ld (own) / %ld (published)",
                   (long)t, (long)last, (long)seen);
            return;
        }
        last = t;
        t_max_update(&published, t);
        if (i % 1000 == 0)
            goro_yield();
    }
}

START_TEST(now_is_monotonic)
{
    /* the same clock as CLOCK_MONOTONIC */
    for (int i = 0; i < 1000; i++) {
        int64_t a = clock_ns(), t = goro_now(), b = clock_ns();
        T_CHECK(a <= t && t <= b, "goro_now %ld outside [%ld, %ld]", (long)t, (long)a, (long)b);
    }
    atomic_store(&published, 0);
    goro_t *h[4];
    long n = t_scale(200000);
    for (int i = 0; i < 4; i++)
        ck_assert_ptr_nonnull(h[i] = go(clock_reader, n));
    clock_reader(n / 4);                    /* and this thread too */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(GORO_SEC, 1000 * GORO_MSEC);
    ck_assert_int_eq(GORO_MSEC, 1000 * GORO_USEC);
    ck_assert_int_eq(GORO_USEC, 1000);
}
END_TEST

/* ---- sleep ---- */

enum { SAMPLES = 7 };

/* Sleeps SAMPLES times for ns; out[] gets how long each took. A negative
 * entry records a non-zero result. */
static void sleep_samples(int64_t ns, int64_t *out)
{
    for (int i = 0; i < SAMPLES; i++) {
        int64_t t0 = goro_now();
        int r = i % 2 ? goro_sleep(ns) : goro_sleep_until(t0 + ns);
        out[i] = r == 0 ? goro_now() - t0 : -1;
    }
}

static void check_samples(const char *where, int64_t ns, int64_t *s)
{
    for (int i = 0; i < SAMPLES; i++) {
        ck_assert_msg(s[i] >= 0, "%s: sleep %.0f ms returned an error", where, t_ms(ns));
        ck_assert_msg(s[i] >= ns, "%s: sleep %.1f ms woke after %.3f ms", where, t_ms(ns),
                      t_ms(s[i]));
        /* the worst one: it did wake, at most a generous margin late */
        ck_assert_msg(s[i] < ns + 20 * late_bound(), "%s: sleep %.1f ms took %.1f ms",
                      where, t_ms(ns), t_ms(s[i]));
    }
    /* the typical one (a busy machine may delay a few): within a few ms */
    t_sort_i64(s, SAMPLES);
    ck_assert_msg(s[SAMPLES / 2] < ns + late_bound(), "%s: sleep %.1f ms: median %.2f ms",
                  where, t_ms(ns), t_ms(s[SAMPLES / 2]));
}

/* The time area's one real-clock latency case: sleeps of 1, 5 and 20 ms,
 * in a coroutine and on this thread, end within a few ms of their time
 * (plus any stall of the host's: helpers.h). Every other check of a
 * sleep's or a deadline's time is exact, on the virtual clock. */
START_TEST(real_clock_sleep_latency)
{
    const int64_t durations[] = { 1 * GORO_MSEC, 5 * GORO_MSEC, 20 * GORO_MSEC };
    for (size_t d = 0; d < sizeof durations / sizeof durations[0]; d++) {
        int64_t s[SAMPLES];
        ck_assert_int_eq(goro_join(go(sleep_samples, durations[d], s), NULL), 0);
        check_samples("coroutine", durations[d], s);
        sleep_samples(durations[d], s);         /* this thread: blocks it */
        check_samples("thread", durations[d], s);
    }
}
END_TEST

/* Sleeps of 1 us to an hour, by duration and to a time, end exactly when
 * due; nothing to wait for (0, negative, a past or the present time)
 * returns 0 at once. In a coroutine, and on a thread the runtime does
 * not own (t_virtual_seeded's on_thread). */
static void exact_sleeps_body(void *where)
{
    const int64_t durations[] = { GORO_USEC, GORO_MSEC, 5 * GORO_MSEC, 20 * GORO_MSEC,
                                  3600 * GORO_SEC };
    for (size_t d = 0; d < sizeof durations / sizeof durations[0]; d++)
        for (int i = 0; i < 2; i++) {
            int64_t t0 = goro_now(), ns = durations[d];
            int r = i ? goro_sleep(ns) : goro_sleep_until(t0 + ns);
            if (r != 0 || goro_now() - t0 != ns)
                t_fail("%s: sleep%s %.3f ms: %d after %.3f ms", (char *)where,
                       i ? "" : "_until", t_ms(ns), r, t_ms(goro_now() - t0));
        }
    int64_t t0 = goro_now();
    if (goro_sleep(0) || goro_sleep(-5) || goro_sleep_until(t0 - GORO_MSEC) ||
        goro_sleep_until(0) || goro_sleep_until(t0) || goro_now() != t0)
        t_fail("%s: a sleep with nothing to wait for took %.3f ms or failed", (char *)where,
               t_ms(goro_now() - t0));
}

START_TEST(sleep_is_exact)
{
    t_virtual(exact_sleeps_body, "coroutine");
    t_virtual_seeded(exact_sleeps_body, "thread", 1, true);
}
END_TEST

static struct {
    long n;
    int64_t base;
    int64_t *offset;
    long *order;                    /* who woke k-th */
    long seq;                       /* one worker: no atomics needed */
} sl;

static void sleeper(long i)
{
    int e = goro_sleep_until(sl.base + sl.offset[i]);
    if (e != 0 || goro_now() != sl.base + sl.offset[i])
        t_fail("sleeper %ld: %d, %lld ns off its deadline", i, e,
               (long long)(goro_now() - sl.base - sl.offset[i]));
    sl.order[sl.seq++] = i;
}

/* 10^4 coroutines sleep 1-5 ms at the same time: each wakes exactly at
 * its deadline, and they wake in deadline order. */
static void many_sleepers_body(void *unused)
{
    (void)unused;
    goro_t **h = calloc((size_t)sl.n, sizeof *h);
    if (!h) {
        t_fail("calloc");
        return;
    }
    uint32_t r = 12345;
    sl.seq = 0;
    sl.base = goro_now();
    for (long i = 0; i < sl.n; i++) {
        sl.offset[i] = GORO_MSEC + (int64_t)(t_rnd(&r) % (4 * GORO_MSEC));
        if (goro_go(&h[i], NULL, sleeper, i) != 0) {
            t_fail("go %ld failed", i);
            sl.n = i;
        }
    }
    for (long i = 0; i < sl.n; i++)
        goro_join(h[i], NULL);
    free(h);
    if (sl.seq != sl.n)
        t_fail("%ld of %ld sleepers woke", sl.seq, sl.n);
    for (long k = 1; k < sl.seq; k++)
        if (sl.offset[sl.order[k]] < sl.offset[sl.order[k - 1]])
            t_fail("the sleeper due at %.3f ms woke after the one due at %.3f ms",
                   t_ms(sl.offset[sl.order[k]]), t_ms(sl.offset[sl.order[k - 1]]));
    printf("many sleepers: %ld woke at their deadlines, in deadline order\n", sl.seq);
}

START_TEST(many_sleepers)
{
    sl.n = t_live(10000);
    sl.offset = calloc((size_t)sl.n, sizeof *sl.offset);
    sl.order = calloc((size_t)sl.n, sizeof *sl.order);
    ck_assert(sl.offset && sl.order);
    t_virtual(many_sleepers_body, NULL);
    free(sl.offset);
    free(sl.order);
}
END_TEST

/* ---- a wait of every kind, made to time out ---- */

/* What one kind of wait needs: setup() on the test thread makes the wait
 * block; wait() is the _until call (in a coroutine or on the test thread);
 * after() on the test thread checks that the timed-out wait left no trace
 * and undoes setup(). */
struct timed {
    const char *name;
    void (*setup)(void);
    long (*wait)(int64_t deadline);
    void (*after)(void);
    bool fd;                        /* a descriptor wait: the real clock's */
};

/* The waits (test_cancel.c has their plain forms); their fixtures are
 * the t_bw_* of helpers.h. */
static long wait_read(int64_t dl)
{
    char b[16];
    return goro_read_until(t_bw.s[0], b, sizeof b, dl);
}

static long wait_readv(int64_t dl)
{
    char a[3], b[13];
    struct iovec iov[2] = { { a, sizeof a }, { b, sizeof b } };
    return goro_readv_until(t_bw.s[0], iov, 2, dl);
}

static long wait_recv(int64_t dl)
{
    char b[16];
    return goro_recv_until(t_bw.s[0], b, sizeof b, 0, dl);
}

static long wait_recvfrom(int64_t dl)
{
    char b[16];
    struct sockaddr_storage from;
    socklen_t len = sizeof from;
    return goro_recvfrom_until(t_bw.s[0], b, sizeof b, 0, (struct sockaddr *)&from, &len, dl);
}

static long wait_write(int64_t dl)
{
    return goro_write_until(t_bw.s[0], "abcd", 4, dl);
}

static long wait_writev(int64_t dl)
{
    struct iovec iov[2] = { { "ab", 2 }, { "cd", 2 } };
    return goro_writev_until(t_bw.s[0], iov, 2, dl);
}

static long wait_send(int64_t dl)
{
    return goro_send_until(t_bw.s[0], "abcd", 4, 0, dl);
}

/* write_all_until on a small socket nobody reads: some of it goes out,
 * the rest times out, *written says how much. */
static void small_setup(void)
{
    t_bw_pair_setup();
    t_set_bufs(t_bw.s[0], 16 << 10);
    t_bw.filled = 0;
    t_bw.written = 12345678;
}

static long wait_write_all(int64_t dl)
{
    enum { N = 4 << 20 };
    /* Mapped, not static (LeakSanitizer scans every global at each
     * test's exit) nor calloc'd (a sanitizer's calloc touches every page:
     * 69 ms of a past-deadline call under TSan). */
    char *big = mmap(NULL, N, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (big == MAP_FAILED) {
        t_fail("mmap: %s", strerror(errno));
        return -ENOMEM;
    }
    size_t w = 0;
    long r = goro_write_all_until(t_bw.s[0], big, N, &w, dl);
    munmap(big, N);
    t_bw.written = w;
    if (w >= N)
        t_fail("write_all_until: %zu of %d written, yet %ld", w, N, r);
    return r;
}

static long wait_accept(int64_t dl)
{
    return goro_accept_until(t_bw.l, NULL, NULL, dl);
}

static long wait_connect(int64_t dl)
{
    return goro_connect_until(t_bw.c, (struct sockaddr *)&t_bw.addr, sizeof t_bw.addr, dl);
}

static long wait_fd(int64_t dl)
{
    return goro_wait_fd(t_bw.s[0], GORO_READABLE, dl);
}

/* A timed-out receive or join leaves what it would fill (-1) untouched. */
static long untouched(long r, long v, const char *what, const char *into)
{
    if (r == -ETIMEDOUT && v != -1)
        t_fail("timed-out %s wrote %ld into the %s", what, v, into);
    return r;
}

static long wait_recv_unb(int64_t dl)
{
    long v = -1;
    long r = goro_chan_recv_until(t_bw.unb, &v, dl);
    return untouched(r, v, "recv", "element");
}

static long wait_recv_buf(int64_t dl)
{
    long v;
    return goro_chan_recv_until(t_bw.buf, &v, dl);
}

static long wait_send_unb(int64_t dl)
{
    long v = 7;
    return goro_chan_send_until(t_bw.unb, &v, dl);
}

static long wait_send_full(int64_t dl)
{
    long v = 8;
    return goro_chan_send_until(t_bw.buf, &v, dl);
}

static long wait_select(int64_t dl)
{
    long in = -1, out = 9;
    goro_case_t cs[3];
    t_bw_select_cases(cs, &in, &out);
    return goro_select_until(cs, 3, 0, dl);
}

static long wait_mutex(int64_t dl) { return goro_mutex_lock_until(&t_bw.mu, dl); }
static long wait_rdlock(int64_t dl) { return goro_rwlock_rdlock_until(&t_bw.rw, dl); }
static long wait_wrlock(int64_t dl) { return goro_rwlock_wrlock_until(&t_bw.rw, dl); }

/* The mutex is held again when the timed-out wait returns. */
static long wait_cond(int64_t dl)
{
    if (goro_mutex_lock(&t_bw.mu) != 0)
        return -1000;
    long r = goro_cond_wait_until(&t_bw.cv, &t_bw.mu, dl);
    if (goro_mutex_trylock(&t_bw.mu) != -EBUSY)
        t_fail("cond_wait_until returned %ld without the mutex", r);
    else if (goro_mutex_unlock(&t_bw.mu) != 0)
        t_fail("cond_wait_until: unlock afterwards failed");
    return r;
}

static long wait_sem(int64_t dl) { return goro_sem_acquire_until(&t_bw.sem, dl); }
static long wait_wg(int64_t dl) { return goro_waitgroup_wait_until(&t_bw.wg, dl); }

static long wait_join(int64_t dl)
{
    long r = -1;
    long e = goro_join_until(t_bw.blocked, &r, dl);
    return untouched(e, r, "join", "result");
}

static const struct timed timed[] = {
    { "read", t_bw_pair_setup, wait_read, t_bw_after_read, true },
    { "readv", t_bw_pair_setup, wait_readv, t_bw_after_read, true },
    { "recv", t_bw_pair_setup, wait_recv, t_bw_after_read, true },
    { "recvfrom", t_bw_pair_setup, wait_recvfrom, t_bw_after_read, true },
    { "write", t_bw_full_setup, wait_write, t_bw_after_write, true },
    { "writev", t_bw_full_setup, wait_writev, t_bw_after_write, true },
    { "send", t_bw_full_setup, wait_send, t_bw_after_write, true },
    { "write_all", small_setup, wait_write_all, t_bw_after_write, true },
    { "accept", t_bw_listen_setup, wait_accept, t_bw_after_accept, true },
    { "connect", t_bw_stalled_setup, wait_connect, t_bw_after_connect, true },
    { "wait_fd", t_bw_pair_setup, wait_fd, t_bw_after_read, true },
    { "chan_recv unbuffered", t_bw_chans_setup, wait_recv_unb, t_bw_after_chans, false },
    { "chan_recv buffered", t_bw_chans_setup, wait_recv_buf, t_bw_after_chans, false },
    { "chan_send unbuffered", t_bw_chans_setup, wait_send_unb, t_bw_after_chans, false },
    { "chan_send full", t_bw_full_chans_setup, wait_send_full, t_bw_after_chans, false },
    { "select", t_bw_full_chans_setup, wait_select, t_bw_after_chans, false },
    { "mutex", t_bw_mutex_setup, wait_mutex, t_bw_after_mutex, false },
    { "rdlock vs writer", t_bw_wrheld_setup, wait_rdlock, t_bw_after_rwlock, false },
    { "wrlock vs writer", t_bw_wrheld_setup, wait_wrlock, t_bw_after_rwlock, false },
    { "wrlock vs reader", t_bw_rdheld_setup, wait_wrlock, t_bw_after_rdheld, false },
    { "cond", t_bw_cond_setup, wait_cond, t_bw_after_cond, false },
    { "sem", t_bw_sem_setup, wait_sem, t_bw_after_sem, false },
    { "waitgroup", t_bw_wg_setup, wait_wg, t_bw_after_wg, false },
    { "join", t_bw_join_setup, wait_join, t_bw_after_join, false },
    { "flight", t_bw_flight_setup, t_bw_flight_wait, t_bw_after_flight, false },
};
enum { NTIMED = sizeof timed / sizeof timed[0] };

static long timed_wait(const struct timed *w, int64_t rel, int64_t *late)
{
    int64_t dl = goro_now() + rel;
    long r = w->wait(dl);
    *late = goro_now() - dl;
    return r;
}

/* timed_wait in a new coroutine, or on this thread (not the runtime's). */
static long timed_wait_in(bool in_coroutine, const struct timed *w, int64_t rel,
                          int64_t *late)
{
    long r = 0;
    if (!in_coroutine)
        return timed_wait(w, rel, late);
    ck_assert_int_eq(goro_join(go(timed_wait, w, rel, late), &r), 0);
    return r;
}

/* One timed-out wait, in a coroutine or on this thread: -ETIMEDOUT, not
 * before the deadline, no trace. A wake-up later than late_bound() is
 * tried again (twice): a busy machine can delay one wake-up, a timer that
 * fires late by design is late every time. */
static void check_timeout(const struct timed *w, bool in_coroutine)
{
    const char *where = in_coroutine ? "coroutine" : "thread";
    int64_t late = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        w->setup();
        t_fail_reset();
        long r = timed_wait_in(in_coroutine, w, 20 * GORO_MSEC, &late);
        ck_assert_msg(!t_failed(), "%s (%s): %s", w->name, where, t_failed());
        ck_assert_msg(r == -ETIMEDOUT, "%s (%s): %ld, want -ETIMEDOUT", w->name, where, r);
        ck_assert_msg(late >= 0, "%s (%s): gave up %.3f ms before the deadline",
                      w->name, where, t_ms(-late));
        w->after();
        if (late < late_bound())
            return;
    }
    ck_abort_msg("%s (%s): timed out %.1f ms after the deadline, three times",
                 w->name, where, t_ms(late));
}

/* On the virtual clock: a 20 ms and a 10-minute deadline, in a coroutine
 * and on the thread: -ETIMEDOUT exactly at the deadline, no trace. Runs on
 * the child's main thread (t_virtual_seeded's on_thread), which does the
 * fixtures' part as the test thread does on the real clock. */
static void exact_timeout_body(void *p)
{
    const struct timed *w = p;
    const int64_t rel[] = { 20 * GORO_MSEC, 600 * GORO_SEC };
    for (int where = 0; where < 2; where++)
        for (int k = 0; k < 2; k++) {
            int64_t late = -1;
            w->setup();
            long r = timed_wait_in(where == 0, w, rel[k], &late);
            if (r != -ETIMEDOUT || late != 0)
                t_fail("%s (%s, %.0f ms): %ld, %lld ns after the deadline; want -ETIMEDOUT "
                       "at it", w->name, where == 0 ? "coroutine" : "thread", t_ms(rel[k]), r,
                       (long long)late);
            w->after();
        }
}

/* Descriptor waits keep the real clock even on the virtual one
 * (docs/testing.md): they are timed there, with a margin. */
START_TEST(timeout_of_every_wait)
{
    const struct timed *w = &timed[_i];
    if (!w->fd) {
        t_virtual_seeded(exact_timeout_body, (void *)w, 1, true);
        return;
    }
    check_timeout(w, true);
    check_timeout(w, false);
}
END_TEST

/* A deadline already past gives up at once (0 or long ago, the same),
 * with no trace: no time passes on the virtual clock. */
static void exact_past_body(void *p)
{
    const struct timed *w = p;
    const int64_t past[] = { -GORO_MSEC, -GORO_SEC };
    for (int where = 0; where < 2; where++)
        for (int k = 0; k < 2; k++) {
            int64_t late = 0;
            w->setup();
            int64_t t0 = goro_now();
            long r = timed_wait_in(where == 0, w, past[k], &late);
            if (r != -ETIMEDOUT || goro_now() != t0)
                t_fail("%s (%s), past deadline: %ld after %.3f ms", w->name,
                       where == 0 ? "coroutine" : "thread", r, t_ms(goro_now() - t0));
            w->after();
        }
}

START_TEST(past_deadline_never_blocks)
{
    const struct timed *w = &timed[_i];
    if (!w->fd) {
        t_virtual_seeded(exact_past_body, (void *)w, 1, true);
        return;
    }
    const int64_t past[] = { -GORO_MSEC, -GORO_SEC };
    for (int where = 0; where < 2; where++) {
        for (int k = 0; k < 2; k++) {
            int64_t late = 0;
            w->setup();
            t_fail_reset();
            int64_t t0 = goro_now();
            long r = timed_wait_in(where == 0, w, past[k], &late);
            int64_t took = goro_now() - t0;
            ck_assert_msg(!t_failed(), "%s: %s", w->name, t_failed());
            ck_assert_msg(r == -ETIMEDOUT, "%s, past deadline: %ld", w->name, r);
            ck_assert_msg(took < instant_bound(), "%s, past deadline: took %.1f ms",
                          w->name, t_ms(took));
            w->after();
        }
    }
}
END_TEST

/* ---- a wait that could complete at once, with a past deadline ----
 * The header leaves open whether it completes or gives up; either way it
 * returns at once and the outcome matches the result. */

struct ready {
    const char *name;
    void (*setup)(void);
    long (*op)(int64_t deadline);
    void (*after)(long result);
    bool fd;                        /* a descriptor wait: the real clock's */
};

static long op_recv_ready(int64_t dl)
{
    long v = 0;
    long r = goro_chan_recv_until(t_bw.buf, &v, dl);
    if (r == 1 && v != 5)
        t_fail("received %ld, want 5", v);
    return r;
}

static void free_chans(void)
{
    ck_assert_int_eq(goro_chan_free(t_bw.unb), 0);
    ck_assert_int_eq(goro_chan_free(t_bw.buf), 0);
}

/* Received and gone, or not received and still there. */
static void after_recv_ready(long r)
{
    ck_assert_msg(r == 1 || r == -ETIMEDOUT, "recv: %ld", r);
    ck_assert_int_eq(goro_chan_len(t_bw.buf), r == 1 ? 0 : 1);
    long v = 0;
    if (r != 1) {
        ck_assert_int_eq(goro_chan_try_recv(t_bw.buf, &v), 1);
        ck_assert_int_eq(v, 5);
    }
    free_chans();
}

static long op_send_room(int64_t dl)
{
    long v = 6;
    return goro_chan_send_until(t_bw.buf, &v, dl);
}

/* Sent and there, or not sent and not there. */
static void after_send_room(long r)
{
    ck_assert_msg(r == 0 || r == -ETIMEDOUT, "send: %ld", r);
    ck_assert_int_eq(goro_chan_len(t_bw.buf), r == 0 ? 1 : 0);
    long v = 0;
    if (r == 0) {
        ck_assert_int_eq(goro_chan_try_recv(t_bw.buf, &v), 1);
        ck_assert_int_eq(v, 6);
    }
    free_chans();
}

static long op_select_ready(int64_t dl)
{
    long v = 0;
    goro_case_t cs[2] = { { t_bw.unb, GORO_RECV, &v, 0 }, { t_bw.buf, GORO_RECV, &v, 0 } };
    long r = goro_select_until(cs, 2, 0, dl);
    if (r == 1 && (cs[1].result != 1 || v != 5))
        t_fail("select: result %d value %ld", cs[1].result, v);
    return r == 1 ? 1 : r;
}

static void free_mutex_setup(void) { ck_assert_int_eq(goro_mutex_init(&t_bw.mu), 0); }

static long op_mutex(int64_t dl) { return goro_mutex_lock_until(&t_bw.mu, dl); }

static void after_mutex_ready(long r)
{
    ck_assert_msg(r == 0 || r == -ETIMEDOUT, "mutex: %ld", r);
    if (r == 0)
        ck_assert_int_eq(goro_mutex_unlock(&t_bw.mu), 0);       /* it was taken */
    else
        ck_assert_int_eq(goro_mutex_trylock(&t_bw.mu), 0);      /* it was not */
    if (r != 0)
        ck_assert_int_eq(goro_mutex_unlock(&t_bw.mu), 0);
    ck_assert_int_eq(goro_mutex_destroy(&t_bw.mu), 0);
}

static void free_rw_setup(void) { ck_assert_int_eq(goro_rwlock_init(&t_bw.rw), 0); }

static long op_rdlock(int64_t dl) { return goro_rwlock_rdlock_until(&t_bw.rw, dl); }

static void after_rdlock_ready(long r)
{
    ck_assert_msg(r == 0 || r == -ETIMEDOUT, "rdlock: %ld", r);
    ck_assert_int_eq(goro_rwlock_trywrlock(&t_bw.rw), r == 0 ? -EBUSY : 0);
    ck_assert_int_eq(goro_rwlock_unlock(&t_bw.rw), 0);
    ck_assert_int_eq(goro_rwlock_destroy(&t_bw.rw), 0);
}

static void unit_setup(void) { ck_assert_int_eq(goro_sem_init(&t_bw.sem, 1), 0); }

static void after_sem_ready(long r)
{
    ck_assert_msg(r == 0 || r == -ETIMEDOUT, "sem: %ld", r);
    ck_assert_int_eq(goro_sem_try_acquire(&t_bw.sem), r == 0 ? -EAGAIN : 0);
    ck_assert_int_eq(goro_sem_destroy(&t_bw.sem), 0);
}

static void zero_wg_setup(void) { ck_assert_int_eq(goro_waitgroup_init(&t_bw.wg), 0); }

static void after_wg_ready(long r)
{
    ck_assert_msg(r == 0 || r == -ETIMEDOUT, "waitgroup: %ld", r);
    ck_assert_int_eq(goro_waitgroup_destroy(&t_bw.wg), 0);
}

static long finished_body(void) { return 42; }

static void finished_setup(void)
{
    ck_assert_ptr_nonnull(t_bw.blocked = go(finished_body));
    /* it has finished (not joined): the worker, with nothing else to do,
     * runs it before the clock reaches this sleep's end */
    goro_sleep(GORO_MSEC);
}

static long op_join(int64_t dl)
{
    long v = 0;
    long r = goro_join_until(t_bw.blocked, &v, dl);
    if (r == 0 && v != 42)
        t_fail("join result %ld", v);
    return r;
}

static void after_join_ready(long r)
{
    ck_assert_msg(r == 0 || r == -ETIMEDOUT, "join: %ld", r);
    if (r != 0)
        ck_assert_int_eq(goro_join(t_bw.blocked, NULL), 0);      /* still joinable */
}

static void data_setup(void)
{
    t_bw_pair_setup();
    ck_assert_int_eq(goro_write(t_bw.s[1], "d", 1), 1);
}

static long op_read(int64_t dl)
{
    char c;
    return goro_read_until(t_bw.s[0], &c, 1, dl);
}

static void after_read_ready(long r)
{
    ck_assert_msg(r == 1 || r == -ETIMEDOUT, "read: %ld", r);
    char c;
    ck_assert_int_eq(recv(t_bw.s[0], &c, 1, MSG_DONTWAIT), r == 1 ? -1 : 1);
    t_bw_pair_close();
}

static void pending_setup(void)
{
    t_bw_listen_setup();
    t_bw.c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(t_bw.c, (struct sockaddr *)&t_bw.addr, sizeof t_bw.addr), 0);
}

static long op_accept(int64_t dl) { return goro_accept_until(t_bw.l, NULL, NULL, dl); }

static void after_accept_ready(long r)
{
    ck_assert_msg(r >= 0 || r == -ETIMEDOUT, "accept: %ld", r);
    int fd = r >= 0 ? (int)r : goro_accept(t_bw.l, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(goro_close(fd), 0);
    close(t_bw.c);
    ck_assert_int_eq(goro_close(t_bw.l), 0);
}

static const struct ready ready[] = {
    { "chan_recv", t_bw_full_chans_setup, op_recv_ready, after_recv_ready, false },
    { "chan_send", t_bw_chans_setup, op_send_room, after_send_room, false },
    { "select", t_bw_full_chans_setup, op_select_ready, after_recv_ready, false },
    { "mutex", free_mutex_setup, op_mutex, after_mutex_ready, false },
    { "rdlock", free_rw_setup, op_rdlock, after_rdlock_ready, false },
    { "sem", unit_setup, wait_sem, after_sem_ready, false },
    { "waitgroup", zero_wg_setup, wait_wg, after_wg_ready, false },
    { "join", finished_setup, op_join, after_join_ready, false },
    { "read", data_setup, op_read, after_read_ready, true },
    { "accept", pending_setup, op_accept, after_accept_ready, true },
};
enum { NREADY = sizeof ready / sizeof ready[0] };

/* Either outcome, and no time passes on the virtual clock. */
static void exact_ready_body(void *p)
{
    const struct ready *w = p;
    const struct timed op = { .name = w->name, .wait = w->op };
    for (int where = 0; where < 2; where++) {
        int64_t late = 0;
        w->setup();
        long r = timed_wait_in(where == 0, &op, -GORO_MSEC, &late);
        if (late != GORO_MSEC)
            t_fail("%s (%s): took %.3f ms", w->name, where == 0 ? "coroutine" : "thread",
                   t_ms(late - GORO_MSEC));
        w->after(r);
    }
}

START_TEST(past_deadline_when_ready)
{
    const struct ready *w = &ready[_i];
    if (!w->fd) {
        t_virtual_seeded(exact_ready_body, (void *)w, 1, true);
        return;
    }
    const struct timed op = { .name = w->name, .wait = w->op };
    for (int where = 0; where < 2; where++) {
        int64_t late = 0;
        w->setup();
        t_fail_reset();
        long r = timed_wait_in(where == 0, &op, -GORO_MSEC, &late);
        int64_t took = late - GORO_MSEC;        /* from the call, not the deadline */
        ck_assert_msg(!t_failed(), "%s: %s", w->name, t_failed());
        ck_assert_msg(took < instant_bound(), "%s: took %.1f ms", w->name, t_ms(took));
        w->after(r);
    }
}
END_TEST

/* A timed-out cond wait whose mutex is held by someone else at the
 * deadline returns only once it has the mutex again: exactly when this
 * thread lets go of it, 40 ms after the deadline. */
static atomic_int cond_returned;
static int64_t cond_returned_at;

static long cond_waiter(int64_t deadline)
{
    long r = wait_cond(deadline);
    cond_returned_at = goro_now();
    atomic_store(&cond_returned, 1);
    return r;
}

/* In a coroutine, as every step that races a coroutine's deadline must be
 * (a thread outside is not ordered with the worker: between two of its
 * calls the clock may jump past the deadline). */
static void cond_retake_steps(void)
{
    atomic_store(&cond_returned, 0);
    int64_t t0 = goro_now();
    goro_t *h = go(cond_waiter, t0 + 10 * GORO_MSEC);
    if (!h) {
        t_fail("go failed");
        return;
    }
    goro_sleep(GORO_MSEC);          /* the waiter waits, the mutex released */
    if (goro_mutex_trylock(&t_bw.mu) != 0)
        t_fail("the waiter kept the mutex while it waited");
    goro_sleep(49 * GORO_MSEC);     /* well past its deadline */
    int early = atomic_load(&cond_returned);
    goro_mutex_unlock(&t_bw.mu);
    long r = 0;
    goro_join(h, &r);
    if (early)
        t_fail("cond_wait_until returned while another held the mutex");
    if (r != -ETIMEDOUT || cond_returned_at != t0 + 50 * GORO_MSEC)
        t_fail("cond_wait_until: %ld at %.3f ms, want -ETIMEDOUT at 50 ms", r,
               t_ms(cond_returned_at - t0));
}

static void cond_retake_body(void *unused)
{
    (void)unused;
    t_bw_cond_setup();
    ck_assert_int_eq(goro_join(go(cond_retake_steps), NULL), 0);
    t_bw_after_cond();
}

START_TEST(cond_timeout_retakes_a_held_mutex)
{
    t_virtual_seeded(cond_retake_body, NULL, 1, true);
}
END_TEST

/* ---- a release racing the deadline ----
 * A waiter waits with a deadline a few hundred microseconds away; its
 * partner releases (sends, unlocks, posts) at a random moment around that
 * deadline. The outcome must add up every round: either the waiter got it
 * (and the partner's release counted), or the waiter timed out and what
 * was released is still there for the next taker. Never lost, never
 * twice. */

enum { RACE_CHAN_UNB, RACE_CHAN_BUF, RACE_SELECT, RACE_MUTEX, RACE_SEM, RACE_KINDS };

struct race {
    int kind;
    long rounds;
    goro_chan_t *ctl, *rep, *ack;   /* deadline out, release result back, round over */
    goro_chan_t *data, *never;
    goro_mutex_t mu;
    goro_sem_t sem;
    atomic_long got, timed_out;
};

static void spin_until(int64_t t)
{
    while (goro_now() < t)
        goro_yield();
}

/* The partner's release for round k at time t: its result. */
static long race_release(struct race *rc, long k, int64_t t)
{
    spin_until(t);
    switch (rc->kind) {
    case RACE_CHAN_UNB:         /* both sides give up some time after */
        return goro_chan_send_until(rc->data, &k, t + 500 * GORO_USEC);
    case RACE_CHAN_BUF:
    case RACE_SELECT:
        return goro_chan_try_send(rc->data, &k);
    case RACE_MUTEX:
        return goro_mutex_unlock(&rc->mu);
    default:
        return goro_sem_release(&rc->sem);
    }
}

static void race_partner(struct race *rc)
{
    uint32_t r = (uint32_t)rc->kind * 2654435761u + 17;
    for (long k = 0; k < rc->rounds; k++) {
        if (rc->kind == RACE_MUTEX && goro_mutex_lock(&rc->mu) != 0)
            t_fail("race partner: lock");
        int64_t dl;
        if (goro_chan_recv(rc->ctl, &dl) != 1)
            return;
        /* from 200 us before the deadline to 1.5 ms after: both outcomes */
        int64_t t = dl - 200 * GORO_USEC + (int64_t)(t_rnd(&r) % (1700 * GORO_USEC));
        long res = race_release(rc, k, t);
        goro_chan_send(rc->rep, &res);
        goro_chan_recv(rc->ack, NULL);
    }
}

/* The waiter's wait for round k; 1: it got it, -ETIMEDOUT: it did not. */
static long race_wait(struct race *rc, long k, int64_t dl)
{
    long v = -1, r;
    goro_case_t cs[2] = { { rc->never, GORO_RECV, &v, 0 }, { rc->data, GORO_RECV, &v, 0 } };
    switch (rc->kind) {
    case RACE_CHAN_UNB:
    case RACE_CHAN_BUF:
        r = goro_chan_recv_until(rc->data, &v, dl);
        break;
    case RACE_SELECT:
        r = goro_select_until(cs, 2, 0, dl);
        r = r == 1 ? cs[1].result : r;
        break;
    case RACE_MUTEX:
        r = goro_mutex_lock_until(&rc->mu, dl);
        r = r == 0 ? 1 : r;
        if (r == 1)
            goro_mutex_unlock(&rc->mu);
        return r;
    default:
        r = goro_sem_acquire_until(&rc->sem, dl);
        return r == 0 ? 1 : r;
    }
    if (r == 1 && v != k)
        t_fail("race kind %d round %ld: received %ld", rc->kind, k, v);
    return r;
}

/* After a timeout, whatever the partner released is still there: take it
 * (exactly once) so the next round starts clean. */
static void race_settle(struct race *rc, long k, long w, long rel)
{
    long v = -1;
    bool released = rc->kind == RACE_MUTEX || rc->kind == RACE_SEM || rel == 0;
    if (rc->kind == RACE_CHAN_UNB) {
        if ((w == 1) != (rel == 0))
            t_fail("unbuffered round %ld: recv %ld but send %ld (lost or phantom)", k, w, rel);
        return;
    }
    if (!released)
        t_fail("race kind %d round %ld: release failed: %ld", rc->kind, k, rel);
    if (w == 1)
        return;
    if (w != -ETIMEDOUT)
        t_fail("race kind %d round %ld: wait returned %ld", rc->kind, k, w);
    long got;
    if (rc->kind == RACE_MUTEX) {
        got = goro_mutex_trylock(&rc->mu) == 0;
        if (got)
            goro_mutex_unlock(&rc->mu);
    } else if (rc->kind == RACE_SEM) {
        got = goro_sem_try_acquire(&rc->sem) == 0;
    } else {
        got = goro_chan_try_recv(rc->data, &v) == 1 && v == k;
    }
    if (!got)
        t_fail("race kind %d round %ld: timed out and the release is gone", rc->kind, k);
}

static void race_waiter(struct race *rc)
{
    uint32_t r = (uint32_t)rc->kind * 747796405u + 3;
    for (long k = 0; k < rc->rounds; k++) {
        int64_t dl = goro_now() + 100 * GORO_USEC + (int64_t)(t_rnd(&r) % (200 * GORO_USEC));
        goro_chan_send(rc->ctl, &dl);
        long w = race_wait(rc, k, dl), rel = 0;
        goro_chan_recv(rc->rep, &rel);
        race_settle(rc, k, w, rel);
        atomic_fetch_add(w == 1 ? &rc->got : &rc->timed_out, 1);
        /* nothing left over: the next round starts empty */
        if (rc->kind == RACE_SEM && goro_sem_try_acquire(&rc->sem) == 0)
            t_fail("race round %ld: a semaphore unit too many", k);
        if (rc->kind != RACE_MUTEX && rc->kind != RACE_SEM && goro_chan_len(rc->data) != 0)
            t_fail("race round %ld: a value too many", k);
        goro_chan_send(rc->ack, NULL);
    }
}

static void race_init(struct race *rc, int kind, long rounds)
{
    memset(rc, 0, sizeof *rc);
    rc->kind = kind;
    rc->rounds = rounds;
    ck_assert_int_eq(goro_chan_new(&rc->ctl, sizeof(int64_t), 0), 0);
    ck_assert_int_eq(goro_chan_new(&rc->rep, sizeof(long), 0), 0);
    ck_assert_int_eq(goro_chan_new(&rc->ack, 0, 0), 0);
    ck_assert_int_eq(goro_chan_new(&rc->data, sizeof(long), kind == RACE_CHAN_UNB ? 0 : 1), 0);
    ck_assert_int_eq(goro_chan_new(&rc->never, sizeof(long), 0), 0);
    ck_assert_int_eq(goro_mutex_init(&rc->mu), 0);
    ck_assert_int_eq(goro_sem_init(&rc->sem, 0), 0);
}

static void race_free(struct race *rc)
{
    ck_assert_int_eq(goro_chan_free(rc->ctl), 0);
    ck_assert_int_eq(goro_chan_free(rc->rep), 0);
    ck_assert_int_eq(goro_chan_free(rc->ack), 0);
    ck_assert_int_eq(goro_chan_free(rc->data), 0);
    ck_assert_int_eq(goro_chan_free(rc->never), 0);
    ck_assert_int_eq(goro_mutex_destroy(&rc->mu), 0);
    ck_assert_int_eq(goro_sem_destroy(&rc->sem), 0);
}

START_TEST(release_racing_the_deadline)
{
    static struct race rc[RACE_KINDS];
    goro_t *h[2 * RACE_KINDS];
    long rounds = t_scale(1000);
    for (int k = 0; k < RACE_KINDS; k++) {
        race_init(&rc[k], k, rounds);
        ck_assert_ptr_nonnull(h[2 * k] = go(race_partner, &rc[k]));
        ck_assert_ptr_nonnull(h[2 * k + 1] = go(race_waiter, &rc[k]));
    }
    for (int i = 0; i < 2 * RACE_KINDS; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    long got = 0, timed_out = 0;
    for (int k = 0; k < RACE_KINDS; k++) {
        printf("deadline race, kind %d: %ld taken, %ld timed out\n", k,
               atomic_load(&rc[k].got), atomic_load(&rc[k].timed_out));
        ck_assert_int_eq(atomic_load(&rc[k].got) + atomic_load(&rc[k].timed_out), rounds);
        got += atomic_load(&rc[k].got);
        timed_out += atomic_load(&rc[k].timed_out);
        race_free(&rc[k]);
    }
    /* the releases straddle the deadlines: both outcomes must occur, or
     * the race was never run */
    if (!t_slow()) {
        ck_assert_msg(got > 0, "no wait ever got its release");
        ck_assert_msg(timed_out > 0, "no wait ever timed out");
    }
}
END_TEST

Suite *time_suite(void)
{
    Suite *s = suite_create("time");
    /* order and deadlines: on the virtual clock, each in a child process
     * (the descriptor waits among the loops: on the real clock) */
    TCase *tc = t_runtime_tcase(s, "time", 30);
    tcase_add_checked_fixture(tc, t_host_watch_fixture_begin, t_host_watch_fixture_end);
    tcase_add_test(tc, sleep_is_exact);
    tcase_add_test(tc, many_sleepers);
    tcase_add_loop_test(tc, timeout_of_every_wait, 0, NTIMED);
    tcase_add_loop_test(tc, past_deadline_never_blocks, 0, NTIMED);
    tcase_add_loop_test(tc, past_deadline_when_ready, 0, NREADY);
    tcase_add_test(tc, cond_timeout_retakes_a_held_mutex);
    /* several threads, races, and the one latency case: the real clock */
    tc = t_runtime_tcase(s, "real", 30);
    tcase_add_checked_fixture(tc, t_host_watch_fixture_begin, t_host_watch_fixture_end);
    tcase_add_test(tc, now_is_monotonic);
    tcase_add_test(tc, real_clock_sleep_latency);
    tcase_add_test(tc, release_racing_the_deadline);
    return s;
}
