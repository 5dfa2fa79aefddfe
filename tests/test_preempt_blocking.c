/* A coroutine in a blocking libc call hands its worker over and does not
 * stop the others; goro_preempt_allow marks code preemptible; slices end
 * within the documented bound.
 *
 * Part of the preempt suite (test_preempt.c registers it). Coroutines
 * never call ck_assert (see helpers.h). */
#include "test_preempt.h"

/* ---- a coroutine in a blocking libc call ---- */

struct blocker {
    struct ticker *tk;
    int ntk;
    goro_t *h[4];               /* the tickers, when it spawns them */
    double seconds;
    long tid;                   /* the worker it blocked */
    long ticks_during;
    int found;                  /* a ticker slept on the blocked worker */
};

static long sum_ticks(const struct ticker *tk, int n)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += atomic_load(&tk[i].ticks);
    return s;
}

/* Blocks its worker in usleep() (no goro call) - preferably once a ticker
 * has gone to sleep on this worker's timers. */
static void blocker(struct blocker *b)
{
    double give_up = t_now() + t_timeout(1);
    while (!b->found && t_now() < give_up) {
        goro_yield();               /* may move it: look from where it is now */
        b->tid = t_tid();
        for (int i = 0; i < b->ntk; i++)
            b->found |= atomic_load(&b->tk[i].sleep_tid) == b->tid;
    }
    long before = sum_ticks(b->tk, b->ntk);
    usleep((useconds_t)(b->seconds * 1e6));
    b->ticks_during = sum_ticks(b->tk, b->ntk) - before;
}

static int64_t max_late_of(const struct ticker *tk, int n)
{
    int64_t m = 0;
    for (int i = 0; i < n; i++)
        m = tk[i].max_late > m ? tk[i].max_late : m;
    return m;
}

/* One worker: while a coroutine sits in usleep(), its P goes to another
 * thread, which runs the ticker queued behind it. */
START_TEST(blocking_call_hands_the_worker_over)
{
    restart_for(1, SLICE, 10);
    struct ticker tk = { .period = 2 * GORO_MSEC, .record_tid = true };
    struct blocker b = { .tk = &tk, .ntk = 1, .seconds = 0.3 };
    goro_t *h[2];
    ck_assert_ptr_nonnull(h[0] = go(ticker, &tk));
    ck_assert_ptr_nonnull(h[1] = go(blocker, &b));
    ck_assert_int_eq(goro_join(h[1], NULL), 0);
    atomic_store(&pt.stop, 1);
    ck_assert_int_eq(goro_join(h[0], NULL), 0);
    report("preempt: a coroutine in usleep(%.0f ms) on the only worker: the ticker ticked "
           "%ld times meanwhile, max lateness %.2f ms\n", b.seconds * 1e3, b.ticks_during,
           t_ms(tk.max_late));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert(b.found);
    check_lateness(&tk, SLICE, "behind a coroutine blocked in usleep()");
    ck_assert_msg(b.ticks_during >= (long)(b.seconds * 1e9 /
                                           (double)(tk.period + mean_late_limit(SLICE))) / 2,
                  "the ticker ticked %ld times in %.0f ms behind a blocked coroutine",
                  b.ticks_during, b.seconds * 1e3);
}
END_TEST

/* Spawns the tickers one at a time and lets each run before the next:
 * a new coroutine is this worker's runnext, so it usually first sleeps
 * here. Spawned all at once, an idle worker could steal every one of
 * them (seen under qemu), and no ticker's timer would be on the worker
 * that blocks. */
static void blocker_with_tickers(struct blocker *b)
{
    for (int i = 0; i < b->ntk; i++) {
        if (!(b->h[i] = go(ticker, &b->tk[i]))) {
            t_fail("go failed");
            return;
        }
        double give_up = t_now() + t_timeout(1);
        while (atomic_load(&b->tk[i].sleep_tid) == 0 && atomic_load(&b->tk[i].ticks) == 0 &&
               t_now() < give_up)
            goro_yield();
    }
    blocker(b);
}

/* Two workers: one blocks in usleep() right after a ticker went to sleep
 * on its timers. The other worker, and the monitor polling the blocked
 * worker's timers, keep every ticker on time. */
START_TEST(blocked_worker_does_not_stop_the_others)
{
    enum { NT = 4 };
    struct ticker tk[NT];
    struct blocker b;
    /* The scene needs a ticker asleep on the worker that blocks; an idle
     * worker may steal every one first (a loaded machine): then it is set
     * again, up to three times, before the test gives up. */
    for (int attempt = 0; attempt < 3; attempt++) {
        restart_for(2, SLICE, 10);
        for (int i = 0; i < NT; i++)
            tk[i] = (struct ticker){ .period = 2 * GORO_MSEC, .record_tid = true };
        b = (struct blocker){ .tk = tk, .ntk = NT, .seconds = 0.3 };
        goro_t *h = go(blocker_with_tickers, &b);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(goro_join(h, NULL), 0);
        atomic_store(&pt.stop, 1);
        for (int i = 0; i < NT; i++)
            if (b.h[i])
                ck_assert_int_eq(goro_join(b.h[i], NULL), 0);
        if (b.found)
            break;
    }
    int64_t late = max_late_of(tk, NT), limit = late_limit(SLICE);
    report("preempt: a coroutine in usleep(%.0f ms) on one of 2 workers%s: %d tickers "
           "ticked %ld times meanwhile, max lateness %.2f ms\n", b.seconds * 1e3,
           b.found ? ", with a ticker's timer on it" : "", NT, b.ticks_during, t_ms(late));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(b.found, "no ticker ever slept on the worker its spawner ran on");
    ck_assert_msg(late <= limit, "a ticker woke %.2f ms late while another worker was "
                  "blocked in usleep() (limit %.0f ms)", t_ms(late), t_ms(limit));
    ck_assert_msg(b.ticks_during >= NT * (long)(b.seconds * 1e9 / (double)(2 * GORO_MSEC + limit)) / 2,
                  "%d tickers ticked %ld times in %.0f ms next to a blocked worker", NT,
                  b.ticks_during, b.seconds * 1e3);
}
END_TEST

/* ---- goro_preempt_allow ---- */

/* Not GORO_PREEMPTIBLE: a section of its own, which goro_preempt_allow
 * marks. In a static executable nothing else makes it a safe point; in a
 * dynamic one the executable's code is preemptible anyway. */
#define T_ALLOWED __attribute__((noinline, section("t_allowed_text")))
extern const char __start_t_allowed_text[], __stop_t_allowed_text[];

static T_ALLOWED uint64_t allowed_spin_for(double until)
{
    uint64_t x = 3;
    while (t_now() < until && t_now() < pt.hard_end)
        x = churn(x);
    return x;
}

struct allowed_run {
    struct ticker *tk;
    long before_allow, after_allow;
    int allow_err;
};

/* The ticks the ticker made on this thread while the spin lasted: it runs
 * here only if the spin is preempted (elsewhere, if the monitor hands the
 * worker to another thread because the spin resists). */
static long ticks_here_during_allowed_spin(struct ticker *tk)
{
    goro_yield();                   /* a fresh slice, on the worker's thread */
    atomic_store(&tk->ticks_on_watch, 0);
    atomic_store(&tk->watch_tid, t_tid());
    allowed_spin_for(t_now() + (t_slow() ? 1.0 : 0.2));
    atomic_store(&tk->watch_tid, 0);
    return atomic_load(&tk->ticks_on_watch);
}

static void allowed_runner(struct allowed_run *a)
{
    while (atomic_load(&a->tk->ticks) < 2 && t_now() < pt.hard_end)
        goro_yield();
    a->before_allow = ticks_here_during_allowed_spin(a->tk);
    a->allow_err = goro_preempt_allow(__start_t_allowed_text, __stop_t_allowed_text);
    a->after_allow = ticks_here_during_allowed_spin(a->tk);
    atomic_store(&pt.stop, 1);
}

static bool statically_linked(void)
{
    return getauxval(AT_BASE) == 0;     /* no dynamic loader was mapped */
}

START_TEST(preempt_allow_marks_code_preemptible)
{
    if (!needs_async("preempt_allow_marks_code_preemptible"))
        return;
    restart_for(1, SLICE, 10);
    struct ticker tk = { .period = 2 * GORO_MSEC };
    struct allowed_run a = { .tk = &tk };
    goro_t *h[2];
    ck_assert_ptr_nonnull(h[0] = go(ticker, &tk));
    ck_assert_ptr_nonnull(h[1] = go(allowed_runner, &a));
    join_all(h, 2);
    bool fixed = statically_linked();
    report("preempt: ticks on the thread of a spinner in unmarked code (%s executable): "
           "%ld before goro_preempt_allow, %ld after\n", fixed ? "static" : "dynamic",
           a.before_allow, a.after_allow);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(a.allow_err, 0);
    if (fixed)
        ck_assert_msg(a.before_allow == 0, "a static executable's unmarked code was "
                      "preempted (%ld ticks)", a.before_allow);
    else
        ck_assert_msg(a.before_allow >= 2, "the executable's own code was not preempted "
                      "although libc is shared (%ld ticks)", a.before_allow);
    ck_assert_msg(a.after_allow >= 2, "code marked with goro_preempt_allow was not "
                  "preempted (%ld ticks)", a.after_allow);

    /* bad ranges; then the table fills up (with ranges of data: harmless) */
    static char data[64];
    ck_assert_int_eq(goro_preempt_allow(NULL, data), -EINVAL);
    ck_assert_int_eq(goro_preempt_allow(data, NULL), -EINVAL);
    ck_assert_int_eq(goro_preempt_allow(data + 1, data), -EINVAL);
    ck_assert_int_eq(goro_preempt_allow(data, data), -EINVAL);
    int ok = 1, e = 0;              /* the real range above */
    for (int i = 0; i < 63 && (e = goro_preempt_allow(data + i, data + i + 1)) == 0; i++)
        ok++;
    ck_assert_int_eq(e, -ENOSPC);
    /* 32, not more: the room beyond is the executable's and the runtime's,
     * which a program marking code before goro_start must not take */
    ck_assert_msg(ok == 32, "%d ranges could be marked (the API promises 32)", ok);
}
END_TEST

/* ---- how long a slice lasts before the preemption ---- */

#define LAT_MAX 400

/* Two spinners that make no call take turns on one worker; each one, on
 * getting the worker back, notes how long the other's slice lasted, from
 * its first instant to its last. The host's stall during that slice, as
 * the watch saw a new largest one then, is taken off. */
static struct {
    atomic_int owner;               /* the spinner that ran last: 0, 1; -1 none */
    int64_t start[2], last[2], host[2];
    int64_t sample[LAT_MAX];
    atomic_int n;
} lat;

static int64_t lat_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static GORO_PREEMPTIBLE void lat_spinner(intptr_t me)
{
    uint32_t x = 2463534242u + (uint32_t)me;
    while (!atomic_load_explicit(&pt.stop, memory_order_relaxed) &&
           atomic_load_explicit(&lat.n, memory_order_relaxed) < LAT_MAX) {
        /* a few microseconds of work between clock reads: a request
         * mostly lands here, seldom in the vDSO (not preemptible) */
        for (int i = 0; i < 2000; i++)
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        __asm__ volatile("" : "+r"(x));
        int64_t t = lat_now();
        int was = atomic_load_explicit(&lat.owner, memory_order_relaxed);
        if (was != me) {
            if (was >= 0) {
                int64_t host = t_host_stalled(), ns = lat.last[was] - lat.start[was];
                if (host > lat.host[was])
                    ns -= host;
                int n = atomic_load(&lat.n);
                if (n < LAT_MAX)
                    lat.sample[n] = ns;
                atomic_store(&lat.n, n + 1);
            }
            atomic_store_explicit(&lat.owner, (int)me, memory_order_relaxed);
            lat.start[me] = t;
            lat.host[me] = t_host_stalled();
        }
        lat.last[me] = t;
        if (t_now() > pt.hard_end)
            break;
    }
}

/* The median slice of a spinner on one worker, in ns (host stalls off). */
static int64_t median_slice(int64_t slice, int samples)
{
    restart_for(1, slice, 30);
    memset(&lat, 0, sizeof lat);
    atomic_store(&lat.owner, -1);
    goro_t *h[2];
    ck_assert_ptr_nonnull(h[0] = go(lat_spinner, (intptr_t)0));
    ck_assert_ptr_nonnull(h[1] = go(lat_spinner, (intptr_t)1));
    while (atomic_load(&lat.n) < samples + 2 && t_now() < pt.hard_end)
        t_nap(0.01);
    atomic_store(&pt.stop, 1);
    join_all(h, 2);
    int n = atomic_load(&lat.n);
    ck_assert_msg(n >= samples + 2, "only %d slices seen", n);
    n = n > LAT_MAX ? LAT_MAX : n;
    /* the first two: the spinners' start, not a preemption */
    t_sort_i64(lat.sample + 2, (size_t)n - 2);
    int64_t med = lat.sample[2 + (n - 2) / 2];
    report("slice %.0f ms: %d slices, median %.3f ms, p90 %.3f ms, max %.3f ms "
           "(host stall %.3f ms)\n", t_ms(slice), n - 2, t_ms(med),
           t_ms(lat.sample[2 + (n - 2) * 9 / 10]), t_ms(lat.sample[n - 1]),
           t_ms(t_host_stalled()));
    return med;
}

/* docs/preemption.md, "The monitor": a coroutine that makes no call is
 * asked to stop at its slice's end plus the monitor's lateness in seeing
 * the slice begin (0.1 ms after a preemption, up to a quarter slice
 * otherwise); the median, over a hundred slices and more, must stay
 * within 1.125 slices plus PREEMPT_LATENCY (the monitor's wake-up, the
 * signal, the switch), at 1 ms and 10 ms. Timing means nothing under
 * qemu, valgrind or the sanitizers: skipped there. */
#define PREEMPT_LATENCY (GORO_MSEC / 4)
START_TEST(slices_end_within_the_documented_bound)
{
    if (!needs_async("slices_end_within_the_documented_bound"))
        return;
    if (t_slow() || t_sanitized()) {
        t_skip("slices_end_within_the_documented_bound", "timing under qemu, valgrind or a sanitizer");
        return;
    }
    const int64_t slices[] = { GORO_MSEC, 10 * GORO_MSEC };
    for (int i = 0; i < 2; i++) {
        int64_t slice = slices[i];
        int64_t med = median_slice(slice, slice < 5 * GORO_MSEC ? 200 : 60);
        int64_t bound = slice + slice / 8 + PREEMPT_LATENCY;
        ck_assert_msg(med <= bound, "slice %.0f ms: median %.3f ms, over the bound %.3f ms",
                      t_ms(slice), t_ms(med), t_ms(bound));
    }
}
END_TEST

/* ---- a thread whose worker was handed off, back in a loop ---- */

static atomic_int lost_stop, lost_back;
static atomic_long lost_spun[2];

static void lost_spinner(void *arg)
{
    int i = (int)(intptr_t)arg;
    while (!atomic_load_explicit(&lost_stop, memory_order_relaxed))
        atomic_fetch_add_explicit(&lost_spun[i], 1, memory_order_relaxed);
}

/* Blocks in usleep() (its P is handed off), then spins without a goro
 * call: before, its thread ran on without a P beside the new worker, two
 * threads on the CPUs of one. */
static void lost_blocker(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
    atomic_store(&lost_back, 1);
    lost_spinner((void *)1);
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One worker. The thread that lost it is stopped at its next safe point,
 * its coroutine pinned to it, and it waits for the P (the two coroutines
 * take turns), so the process uses about one CPU, not two. */
START_TEST(a_thread_that_lost_its_worker_does_not_run_on_beside_it)
{
    if (!t_async_preemption())
        return t_skip("a_thread_that_lost_its_worker_does_not_run_on_beside_it",
                      "no asynchronous preemption here");
    if (t_slow())
        return t_skip("a_thread_that_lost_its_worker_does_not_run_on_beside_it",
                      "an emulator's CPU time is its own");
    restart_for(1, SLICE, 10);
    atomic_store(&lost_stop, 0);
    atomic_store(&lost_back, 0);
    goro_t *h[2];
    ck_assert_ptr_nonnull(h[0] = go(lost_spinner, (void *)0));
    ck_assert_ptr_nonnull(h[1] = go(lost_blocker, NULL));
    double give_up = t_now() + t_timeout(2);
    while (!atomic_load(&lost_back) && t_now() < give_up)
        t_nap(0.01);
    t_nap(0.05);
    long b0 = atomic_load(&lost_spun[1]);
    double w0 = t_now(), c0 = process_cpu_s();
    t_nap(0.3);
    double cpus = (process_cpu_s() - c0) / (t_now() - w0);
    long b1 = atomic_load(&lost_spun[1]);
    atomic_store(&lost_stop, 1);
    ck_assert_int_eq(goro_join(h[0], NULL), 0);
    ck_assert_int_eq(goro_join(h[1], NULL), 0);
    report("preempt: a coroutine back from usleep() in a loop, on 1 worker: the process "
           "used %.2f CPUs\n", cpus);
    ck_assert(atomic_load(&lost_back));
    ck_assert_msg(cpus < 1.5, "%.2f CPUs for one worker: the thread that lost its P runs on",
                  cpus);
    ck_assert_msg(b1 > b0, "the coroutine that lost its worker never ran again");
}
END_TEST

/* Adds this file's tests to the preempt test case (test_preempt.h). */
void preempt_blocking_tests(TCase *tc)
{
    tcase_add_test(tc, blocked_worker_does_not_stop_the_others);
    tcase_add_test(tc, blocking_call_hands_the_worker_over);
    tcase_add_test(tc, slices_end_within_the_documented_bound);
    tcase_add_test(tc, a_thread_that_lost_its_worker_does_not_run_on_beside_it);
    /* last: it fills the table of marked ranges for the rest of the process */
    tcase_add_test(tc, preempt_allow_marks_code_preemptible);
}
