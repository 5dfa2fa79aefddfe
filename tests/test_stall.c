/* Stall reports (runtime/debug/stall.c; docs/debugging.md, "Stalls"): a
 * coroutine that keeps its worker past the threshold is reported once,
 * with its id and name, how long, why preemption did not end it and a
 * backtrace taken where it runs; its length lands in the histogram.
 *   - in zlib (a library not marked preemptible), to stderr, in a child:
 *     the report names zlib's function and the user function that called
 *     it; a second stall within the second is left out and counted;
 *   - in a no-preempt section, to a callback;
 *   - blocked in a system call: named, no signal sent (it would EINTR);
 *   - below the threshold, or with reports off: nothing.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef GORO_TEST_ZLIB
#include <zlib.h>
#endif

#include "helpers.h"
#include "suites.h"

/* Under TSan a signal handler runs late, from inside TSan's runtime, on a
 * copy of the context: libunwind may not get past TSan's frames. */
#ifdef T_TSAN
#define UNWIND_FROM_HANDLERS false
#else
#define UNWIND_FROM_HANDLERS true
#endif

/* Runs without a goro call for ms milliseconds, preemption off. */
__attribute__((noinline)) static long spin_unpreempted(long ms)
{
    goro_preempt_disable();
    double end = t_now() + ms / 1000.0;
    volatile unsigned long x = 0;
    while (t_now() < end)
        x = x + 1;
    goro_preempt_enable();
    return (long)(x & 1);
}

static uint64_t stalls_seen(void)
{
    goro_stall_stats_t st;
    goro_stall_stats(&st);
    return st.stalls;
}

/* Runs without a goro call, preemption off, until the monitor has seen it
 * stall (it may look seldom under valgrind) and at least min_ms; gives up
 * after 10 s (scaled). */
__attribute__((noinline)) static long spin_until_seen(long min_ms)
{
    uint64_t before = stalls_seen();
    goro_preempt_disable();
    double t0 = t_now(), cap = t0 + t_timeout(10);
    volatile unsigned long x = 0;
    while ((stalls_seen() == before || t_now() < t0 + min_ms / 1000.0) && t_now() < cap)
        x = x + 1;
    goro_preempt_enable();
    return stalls_seen() == before ? -1 : 0;
}

/* The histogram's count of ended stalls. */
static uint64_t ended_stalls(void)
{
    goro_stall_stats_t st;
    goro_stall_stats(&st);
    uint64_t n = 0;
    for (int i = 0; i < GORO_STALL_BUCKETS; i++)
        n += st.buckets[i];
    return n;
}

static bool wait_ended(uint64_t n, double seconds)
{
    double end = t_now() + t_timeout(seconds);
    while (ended_stalls() < n && t_now() < end)
        usleep(1000);
    return ended_stalls() >= n;
}

#ifdef GORO_TEST_ZLIB
/* Stalls reported or left out of stderr: a stall is counted when seen,
 * and reported once its sample came (or it ended). */
static uint64_t told_stalls(void)
{
    goro_stall_stats_t st;
    goro_stall_stats(&st);
    return st.reported + st.suppressed;
}

static bool wait_told(uint64_t n, double seconds)
{
    double end = t_now() + t_timeout(seconds);
    while (told_stalls() < n && t_now() < end)
        usleep(1000);
    return told_stalls() >= n;
}

/* ---- a coroutine in zlib, reported to stderr ---- */

static unsigned char *zin, *zout;
static size_t zin_len;

/* Text that compresses, but not trivially: level 9 works at it. */
static void fill_words(unsigned char *p, size_t n)
{
    static const char *words[] = { "goro ", "stall ", "worker ", "deflate ", "stack ",
                                   "coroutine ", "preempt ", "signal ", "zlib ", "unwind " };
    uint32_t r = 2463534242u;
    for (size_t i = 0; i < n;) {
        r ^= r << 13, r ^= r >> 17, r ^= r << 5;
        const char *w = words[r % 10];
        for (; *w && i < n; w++)
            p[i++] = (unsigned char)(r & 0x100 ? *w : *w ^ 0x20);
    }
}

static double compress_seconds(size_t n)
{
    uLongf out = compressBound(n);
    double t0 = t_now();
    compress2(zout, &out, zin, n, 9);
    return t_now() - t0;
}

/* The user function the report must name, between the coroutine's entry
 * and zlib. */
long squeeze_for_a_while(void);
__attribute__((noinline)) long squeeze_for_a_while(void)
{
    uLongf out = compressBound(zin_len);
    int rc = compress2(zout, &out, zin, zin_len, 9);
    return rc == Z_OK ? (long)out : -1;
}

static long squeezer(void)
{
    return squeeze_for_a_while();
}

static int zlib_child(void *arg)
{
    (void)arg;
    /* about 350 ms of compression on this machine, whatever its speed */
    size_t cap = 64u << 20;
    zin = malloc(cap);
    zout = malloc(compressBound(cap));
    if (!zin || !zout)
        return 10;
    fill_words(zin, cap);
    double one = compress_seconds(1u << 20);
    size_t mib = one > 0 ? (size_t)(0.35 / one) + 1 : 8;
    zin_len = (mib > 64 ? 64 : mib) << 20;
    setenv("GORO_STALL", "50", 1);
    /* the counts go on from the parent's (one process under valgrind) */
    goro_stall_stats_t before;
    goro_stall_stats(&before);
    uint64_t ended_before = ended_stalls();
    goro_config_t cfg = { .workers = 2 };
    if (goro_start(&cfg) != 0)
        return 11;
    goro_t *h;
    long packed = 0;
    if (goro_go(&h, &(goro_attr_t){ .name = "squeezer" }, squeezer) != 0 ||
        goro_join(h, &packed) != 0 || packed <= 0)
        return 12;
    printf("squeezer id=%llu\n", (unsigned long long)goro_id(h));
    /* a second stall right after: stderr gets one report a second */
    long spun = -1;
    if (goro_join(go(spin_until_seen, 0L), &spun) != 0 || spun != 0)
        return 13;
    if (!wait_ended(ended_before + 2, 5) ||
        !wait_told(before.reported + before.suppressed + 2, 5)) {
        printf("stalls seen %llu (before %llu), ended %llu (before %llu)\n",
               (unsigned long long)stalls_seen(), (unsigned long long)before.stalls,
               (unsigned long long)ended_stalls(), (unsigned long long)ended_before);
        return 14;
    }
    goro_stall_stats_t st;
    goro_stall_stats(&st);
    printf("stalls=%llu reported=%llu suppressed=%llu longest_ms=%lld\n",
           (unsigned long long)(st.stalls - before.stalls),
           (unsigned long long)(st.reported - before.reported),
           (unsigned long long)(st.suppressed - before.suppressed),
           (long long)(st.longest_ns / GORO_MSEC));
    fflush(stdout);
    goro_dump(stdout);
    fflush(stdout);
    return goro_shutdown() == 0 ? 0 : 15;
}

START_TEST(stall_in_zlib_is_reported)
{
    static char out[64 * 1024];
    int st = t_run_child(zlib_child, NULL, t_timeout(60), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %.4000s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %.4000s", st, out);
    ck_assert_msg(t_count_lines(out, "", "goro: coroutine ", "(squeezer) has held worker ",
                             t_async_preemption() ? "without a switch: in code not marked "
                             "preemptible (libz.so" : "asynchronous preemption is off",
                             NULL) == 1, "no stall line: %.4000s", out);
    /* the backtrace: zlib's exported entry points (its internals have no
     * names in Debian's library) and the caller */
    ck_assert_msg(!UNWIND_FROM_HANDLERS || t_count_lines(out, "", "  #", "deflate", NULL) + t_count_lines(out, "", "  #", "compress2",
                  NULL) >= 1, "no zlib frame: %.4000s", out);
    ck_assert_msg(!UNWIND_FROM_HANDLERS || t_count_lines(out, "", "  #", "squeeze_for_a_while+", NULL) == 1,
                  "no user frame: %.4000s", out);
    /* the second report comes within the second, unless the machine is
     * slow enough to spread them */
    ck_assert_msg(t_count_lines(out, "", "stalls=2 reported=1 suppressed=1", NULL) == 1 ||
                  (t_slow() && t_count_lines(out, "", "stalls=2 reported=2 suppressed=0", NULL) == 1),
                  "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "", "goro: stalls: ", " seen, longest ", "(reported from 50 ms)",
                             "; by length: ", NULL) == 1, "no dump line: %.4000s", out);
    /* the squeeze ran about 350 ms: the longest is at least the threshold */
    const char *l = strstr(out, "longest_ms=");
    ck_assert_msg(l && atol(l + 11) >= 50, "%.4000s", out);
}
END_TEST
#endif

/* ---- reports to a callback ---- */

struct seen {
    _Atomic int n;
    uint64_t id;
    int why, nframes;
    int64_t ns;
    char reason[160];
    char text[4096];
};
static struct seen seen;

static void on_stall(const goro_stall_t *st, void *arg)
{
    struct seen *s = arg;
    if (atomic_load(&s->n) == 0) {
        s->id = st->id;
        s->why = st->why;
        s->nframes = st->nframes;
        s->ns = st->ns;
        snprintf(s->reason, sizeof s->reason, "%s", st->reason);
        snprintf(s->text, sizeof s->text, "%s", st->text);
    }
    atomic_fetch_add(&s->n, 1);
}

static void seen_reset(void)
{
    memset(&seen, 0, sizeof seen);
}

START_TEST(stall_in_no_preempt_section_goes_to_the_callback)
{
    seen_reset();
    uint64_t ended = ended_stalls();
    ck_assert_int_eq(goro_stall_watch(30 * GORO_MSEC, on_stall, &seen), 0);
    goro_t *h;
    ck_assert_int_eq(goro_go(&h, &(goro_attr_t){ .name = "spinner" }, spin_until_seen, 60L), 0);
    uint64_t id = goro_id(h);
    long spun = -1;
    ck_assert_int_eq(goro_join(h, &spun), 0);
    ck_assert_msg(spun == 0, "the monitor never saw the stall");
    ck_assert_msg(t_wait_flag(&seen.n, t_timeout(5)), "no report");
    ck_assert_msg(wait_ended(ended + 1, 5), "the stall never ended in the histogram");
    ck_assert_int_eq(goro_stall_watch(0, NULL, NULL), 0);
    ck_assert_int_eq(atomic_load(&seen.n), 1);              /* once per stall */
    ck_assert_uint_eq(seen.id, id);
    ck_assert_msg(seen.ns >= 30 * GORO_MSEC, "%lld ns", (long long)seen.ns);
    ck_assert_msg(strstr(seen.text, "(spinner) has held worker "), "%s", seen.text);
    if (t_async_preemption()) {
        ck_assert_int_eq(seen.why, GORO_STALL_NOPREEMPT);
        ck_assert_msg(strstr(seen.reason, "no-preempt section"), "%s", seen.reason);
    } else {
        ck_assert_int_eq(seen.why, GORO_STALL_ASYNC_OFF);
    }
    if (!UNWIND_FROM_HANDLERS)
        return;
    ck_assert_msg(seen.nframes >= 2, "%d frames: %s", seen.nframes, seen.text);
    ck_assert_msg(t_count_lines(seen.text, "", "  #", "spin_until_seen+", NULL) == 1, "%s", seen.text);
}
END_TEST

/* Below the threshold: nothing. Reports off: nothing, and the stall is
 * not counted. */
START_TEST(short_runs_and_reports_off_say_nothing)
{
    seen_reset();
    ck_assert_int_eq(goro_stall_watch(300 * GORO_MSEC, on_stall, &seen), 0);
    ck_assert_int_eq(goro_join(go(spin_unpreempted, 40L), NULL), 0);
    usleep(100 * 1000);
    ck_assert_int_eq(goro_stall_watch(0, NULL, NULL), 0);
    goro_stall_stats_t before, after;
    goro_stall_stats(&before);
    ck_assert_int_eq(goro_join(go(spin_unpreempted, 60L), NULL), 0);
    usleep(50 * 1000);
    goro_stall_stats(&after);
    ck_assert_int_eq(atomic_load(&seen.n), 0);
    ck_assert_uint_eq(after.stalls, before.stalls);
    ck_assert_int_eq(after.threshold_ns, 0);
}
END_TEST

START_TEST(bad_thresholds_are_refused)
{
    ck_assert_int_eq(goro_stall_watch(-1, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_stall_watch(GORO_MSEC - 1, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_stall_stats(NULL), -EINVAL);
    goro_stall_stats_t st;
    ck_assert_int_eq(goro_stall_stats(&st), 0);
    ck_assert_int_eq(st.threshold_ns, 0);           /* the refusals changed nothing */
}
END_TEST

/* ---- blocked in the kernel ---- */

/* Not goro_sleep: the worker blocks, in steps, until the report came
 * (the monitor may look seldom under valgrind), 10 s at most (scaled). */
static long sleep_in_the_kernel(void)
{
    double cap = t_now() + t_timeout(10);
    do
        usleep(100 * 1000);
    while (atomic_load(&seen.n) == 0 && t_now() < cap);
    return 0;
}

/* A fresh runtime of its own: nothing else waits for the worker, so it is
 * not handed on, and the stall stays on the worker. */
static int blocked_child(void *arg)
{
    (void)arg;
    goro_config_t cfg = { .workers = 1 };
    if (goro_start(&cfg) != 0)
        return 10;
    if (goro_stall_watch(60 * GORO_MSEC, on_stall, &seen) != 0)
        return 11;
    goro_t *h;
    if (goro_go(&h, &(goro_attr_t){ .name = "sleeper" }, sleep_in_the_kernel) != 0)
        return 12;
    uint64_t id = goro_id(h);
    if (goro_join(h, NULL) != 0 || !t_wait_flag(&seen.n, t_timeout(5)))
        return 13;
    printf("same_id=%d why=%d frames=%d\n%s\n", seen.id == id, seen.why, seen.nframes, seen.text);
    return goro_shutdown() == 0 ? 0 : 14;
}

START_TEST(blocked_call_is_named)
{
    static char out[8192];
    seen_reset();
    int st = t_run_child(blocked_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
    char want[64];
    snprintf(want, sizeof want, "same_id=1 why=%d frames=0", GORO_STALL_BLOCKED);
    ck_assert_msg(strstr(out, want), "%s", out);
    /* qemu-user's thread sits in the host's call, whatever the guest's was */
    ck_assert_msg(t_count_lines(out, "", "(sleeper) has held worker 0 for ",
                             t_slow() ? "blocked in the kernel" : "(system call clock_nanosleep)",
                             NULL) == 1, "%s", out);
}
END_TEST

/* ---- two stalls within the second, to stderr ---- */

static uint64_t stall_count, stall_ended;

static void stats_now(void)
{
    goro_stall_stats_t st;
    goro_stall_stats(&st);
    stall_count = st.stalls;
    stall_ended = 0;
    for (int i = 0; i < GORO_STALL_BUCKETS; i++)
        stall_ended += st.buckets[i];
}

/* Stalls A and B, one right after the other: B's report falls within
 * A's second. Read right after each join, the statistics hold each stall
 * and its end; stderr names B too, later (the one-a-second rule may delay
 * a report, never drop it). */
static int two_stalls_child(void *arg)
{
    (void)arg;
    setenv("GORO_STALL", "40", 1);
    goro_config_t cfg = { .workers = 2 };
    if (goro_start(&cfg) != 0)
        return 10;
    goro_t *h;
    long spun = -1;
    if (goro_go(&h, &(goro_attr_t){ .name = "first" }, spin_until_seen, 120L) != 0 ||
        goro_join(h, &spun) != 0 || spun != 0)
        return 11;
    stats_now();
    printf("after A: stalls=%llu ended=%llu\n", (unsigned long long)stall_count,
           (unsigned long long)stall_ended);
    if (goro_go(&h, &(goro_attr_t){ .name = "second" }, spin_until_seen, 120L) != 0)
        return 12;
    printf("B is coroutine %llu\n", (unsigned long long)goro_id(h));
    if (goro_join(h, &spun) != 0 || spun != 0)
        return 13;
    stats_now();
    goro_stall_stats_t st;
    goro_stall_stats(&st);
    printf("after B: stalls=%llu ended=%llu longest_ms=%lld\n", (unsigned long long)stall_count,
           (unsigned long long)stall_ended, (long long)(st.longest_ns / GORO_MSEC));
    fflush(stdout);
    return goro_shutdown() == 0 ? 0 : 14;
}

START_TEST(no_stall_is_hidden)
{
    /* It counts stalls of 40 ms exactly; under valgrind every slice is
     * that slow (seen: stalls=2 after A) */
    if (t_valgrind()) {
        t_skip("no_stall_is_hidden", "under valgrind every slice stalls");
        return;
    }
    static char out[16 * 1024];
    int st = t_run_child(two_stalls_child, NULL, t_timeout(60), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
    ck_assert_msg(strstr(out, "after A: stalls=1 ended=1\n"), "%s", out);
    ck_assert_msg(strstr(out, "after B: stalls=2 ended=2 "), "%s", out);
    /* B spun 120 ms; its start is seen at the monitor's next look (up to
     * slice/4 later) */
    const char *l = strstr(out, "longest_ms=");
    ck_assert_msg(l && atol(l + 11) >= 120 - 10, "%s", out);
    /* stderr names both: A reported, B reported or summed up */
    ck_assert_msg(t_count_lines(out, "", "goro: coroutine ", "(first) has held worker ", NULL) == 1,
                  "%s", out);
    const char *b = strstr(out, "B is coroutine ");
    ck_assert_msg(b, "%s", out);
    char who[64];
    snprintf(who, sizeof who, "coroutine %llu (second)", (unsigned long long)atoll(b + 15));
    ck_assert_msg(t_count_lines(out, "goro: ", who, NULL) >= 1, "B never on stderr: %s", out);
}
END_TEST

Suite *stall_suite(void)
{
    Suite *s = suite_create("stall");
    TCase *tc = t_runtime_tcase(s, "stall", 30);
    tcase_add_test(tc, stall_in_no_preempt_section_goes_to_the_callback);
    tcase_add_test(tc, short_runs_and_reports_off_say_nothing);
    tcase_add_test(tc, bad_thresholds_are_refused);
    tc = t_tcase(s, "child", 90);
#ifdef GORO_TEST_ZLIB
    tcase_add_test(tc, stall_in_zlib_is_reported);
#endif
    tcase_add_test(tc, blocked_call_is_named);
    tcase_add_test(tc, no_stall_is_hidden);
    return s;
}
