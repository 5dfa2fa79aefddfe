/* Preemption (docs/preemption.md): coroutines that never make a goro call
 * do not stop a ticker on their worker; every register - integer, FP,
 * vector - survives thousands of preemptions bit for bit; libc under heavy
 * preemption never deadlocks; a coroutine stuck in a blocking libc call
 * does not stop the others; no-preempt sections hold; the application's own
 * signal handlers still get their signals; EINTR never leaks out of a goro
 * call; a negative slice switches preemption off.
 *
 * The spinning code is GORO_PREEMPTIBLE: in a statically linked test binary
 * (aarch64 under qemu) the rest of the executable, libc included, is not a
 * safe point. Spinners stop at pt.stop or, whatever happens, at
 * pt.hard_end, so that a failed test still lets goro_shutdown() return.
 *
 * Asynchronous preemption is off in TSan builds, under valgrind and with
 * GORO_PREEMPT=0 (only the cooperative flag works there, and a spinner
 * makes no goro call): the tests that need it skip there.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#include "test_preempt.h"

/* A line for the log, written at once: a failing check ends the test's
 * process (fork mode) before stdio would flush it. */
void __attribute__((format(printf, 1, 2))) report(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* ---- what every test shares ---- */

struct preempt_round pt;

/* True when the test can run; otherwise says why not. */
bool needs_async(const char *test)
{
    if (t_async_preemption())
        return true;
    t_skip(test, "asynchronous preemption is off (TSan, valgrind or GORO_PREEMPT=0)");
    return false;
}

/* Each test runs on a runtime of its own making. */
void restart(int workers, int64_t slice_ns)
{
    t_restart(&(goro_config_t){ .workers = workers, .slice_ns = slice_ns });
}

void reset_round(double limit)
{
    atomic_store(&pt.stop, 0);
    atomic_store(&pt.last_ran, NOBODY);
    pt.hard_end = t_now() + limit;
}

/* A new round of coroutines; none of them runs past `limit` seconds. The
 * host's stalls are watched from here (check_lateness). */
void begin(double limit)
{
    reset_round(limit);
    t_host_watch_begin();
}

/* restart() and begin() at once: the usual start of a test. */
void restart_for(int workers, int64_t slice_ns, double limit)
{
    restart(workers, slice_ns);
    begin(t_timeout(limit));
}

static void setup(void)
{
    reset_round(0);
    t_fail_reset();
}

/* Also after a failed test (CK_FORK=no): whatever still spins ends, so
 * that the shutdown returns and the next suite starts afresh. */
static void teardown(void)
{
    atomic_store(&pt.stop, 1);
    t_stop();
    t_host_watch_end();
}

void join_all(goro_t **h, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
}

/* Lets the round's coroutines run `seconds`, then ends and joins them. */
void run_for(double seconds, goro_t **h, int n)
{
    t_nap(seconds);
    atomic_store(&pt.stop, 1);
    join_all(h, n);
}

/* ---- spinners: integer work, no call ---- */

/* It asks which thread it is on through the thread pointer, not gettid():
 * a system call per chunk gave the preemption signal a place to land in
 * libc at every chunk (docs/preemption.md), and the worker was handed over
 * instead of preempted in one run in four under ASan. */
GORO_PREEMPTIBLE void spinner(struct spinner *s)
{
    uint64_t x = (uint64_t)s->id;
    if (s->check_tid)
        s->tid = t_thread();
    for (long n = 1; !atomic_load_explicit(&pt.stop, memory_order_relaxed); n++) {
        x = churn(x);
        s->switches += note_progress(s->id);
        if (s->check_tid && t_thread() != s->tid)
            s->moved++;
        atomic_store_explicit(&s->chunks, n, memory_order_relaxed);
        if (n % 16 == 0 && (t_now() > pt.hard_end || (s->end && t_now() > s->end)))
            break;
    }
    s->x = x;
}

/* Spins until `until` (seconds, t_now) without any goro call. */
GORO_PREEMPTIBLE uint64_t spin_for(double until)
{
    uint64_t x = 1;
    while (t_now() < until && t_now() < pt.hard_end)
        x = churn(x);
    return x;
}

long total_switches(const struct spinner *s, int n)
{
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += s[i].switches;
    return sum;
}

/* Spinners on a one-worker runtime took turns on one thread: preemption,
 * not a hand-off of the worker to another thread (which the monitor does
 * for code it cannot preempt), let the others run. A spinner reads the
 * clock all the time, and a request that lands in that read (vDSO code,
 * not preemptible) is declined; three in a row, three slices running,
 * and the monitor hands the worker over - rarely, once in some dozens of
 * runs. So preemption must have done nearly all of the work: at most one
 * turn in four found a spinner on another thread (with preemption broken,
 * every turn would). */
void check_taking_turns_mostly_in_place(const struct spinner *s, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        ck_assert_msg(atomic_load(&s[i].chunks) > 0 && s[i].switches >= 3, "%s: spinner %d "
                      "made %ld chunks and was switched %ld times: spinners on one worker "
                      "do not take turns", what, i + 1, atomic_load(&s[i].chunks),
                      s[i].switches);
        ck_assert_msg(4 * s[i].moved <= s[i].switches, "%s: spinner %d was found on another "
                      "thread %ld times in %ld turns: the worker was handed over, not "
                      "preempted", what, i + 1, s[i].moved, s[i].switches);
    }
}

/* ---- the ticker: sleeps `period` in a loop, measures how late it wakes ---- */

void ticker(struct ticker *t)
{
    while (!atomic_load_explicit(&pt.stop, memory_order_relaxed)) {
        if (t->record_tid)
            atomic_store(&t->sleep_tid, t_tid());
        int64_t t0 = goro_now();
        int e = goro_sleep(t->period);
        int64_t late = goro_now() - t0 - t->period;
        atomic_store(&t->sleep_tid, 0);
        if (e != 0) {
            t_fail("ticker: goro_sleep returned %d", e);
            return;
        }
        if (late > t->max_late)
            t->max_late = late;
        t->late_sum += (double)late;
        note_progress(TICKER_ID);
        long watch = atomic_load(&t->watch_tid);
        if (watch && t_tid() == watch)
            atomic_fetch_add(&t->ticks_on_watch, 1);
        atomic_fetch_add(&t->ticks, 1);
    }
}

/* How late a ticker sharing one worker with spinners may wake: the spinner
 * in front of it runs out its slice (the monitor notices within a quarter
 * slice), the monitor finds the timer within 2 ms, and a woken coroutine
 * runs before the other spinners: about a slice. The bound on the worst
 * wake-up leaves room for a busy machine, where the worker thread itself
 * waits for a CPU now and then; the mean shows the typical case. qemu and
 * the sanitizers are slower. */
int64_t slow_factor(void)
{
    if (t_slow())
        return 10;
#ifdef T_TSAN
    return 5;                       /* every thread start and wake-up is slow */
#else
    return t_sanitized() ? 2 : 1;
#endif
}

int64_t late_limit(int64_t slice) { return 6 * slice * slow_factor(); }
int64_t mean_late_limit(int64_t slice) { return 3 * slice / 2 * slow_factor(); }

double mean_late(const struct ticker *t)
{
    long n = atomic_load(&t->ticks);
    return n ? t->late_sum / (double)n : 0;
}

/* The ticker woke about a slice late at most, mostly. The largest
 * lateness may also hold a stall of the host's since begin(). */
void check_lateness(const struct ticker *t, int64_t slice, const char *what)
{
    int64_t host = t_host_watch_end();
    int64_t limit = late_limit(slice) + host, mean_limit = mean_late_limit(slice);
    ck_assert_msg(t->max_late <= limit, "%s: the ticker woke %.2f ms late (limit %.0f ms: "
                  "slice %.0f ms, the host stalled %.0f ms)", what, t_ms(t->max_late),
                  t_ms(limit), t_ms(slice), t_ms(host));
    ck_assert_msg(mean_late(t) <= (double)mean_limit, "%s: the ticker woke %.2f ms late on "
                  "average (limit %.0f ms, slice %.0f ms)", what, mean_late(t) / 1e6,
                  t_ms(mean_limit), t_ms(slice));
}

/* ---- spinners and a ticker on one worker ---- */

/* h[0]: a 2 ms ticker; h[1..ns]: spinners that check their thread. */
void go_ticker_and_spinners(struct ticker *tk, struct spinner *sp, int ns, goro_t **h)
{
    *tk = (struct ticker){ .period = 2 * GORO_MSEC };
    ck_assert_ptr_nonnull(h[0] = go(ticker, tk));
    for (int i = 0; i < ns; i++) {
        sp[i] = (struct spinner){ .id = i + 1, .check_tid = true };
        ck_assert_ptr_nonnull(h[i + 1] = go(spinner, &sp[i]));
    }
}

START_TEST(spinners_do_not_stop_a_ticker)
{
    if (!needs_async("spinners_do_not_stop_a_ticker"))
        return;
    enum { NS = 2 };
    double run = t_slow() ? 3.0 : 1.0;
    restart_for(1, SLICE, 10);
    struct ticker tk;
    struct spinner sp[NS];
    goro_t *h[NS + 1];
    go_ticker_and_spinners(&tk, sp, NS, h);
    run_for(run, h, NS + 1);
    long ticks = atomic_load(&tk.ticks);
    report("preempt: %d spinners and a 2 ms ticker on one worker for %.1f s: %ld ticks, "
           "lateness mean %.2f ms, max %.2f ms; spinners switched %ld times\n", NS, run,
           ticks, mean_late(&tk) / 1e6, t_ms(tk.max_late), total_switches(sp, NS));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    check_taking_turns_mostly_in_place(sp, NS, "spinners next to a ticker");
    check_lateness(&tk, SLICE, "spinners next to a ticker");
    ck_assert_msg(ticks >= (long)(run * 1e9 / (double)(tk.period + mean_late_limit(SLICE))) / 2,
                  "the ticker ticked %ld times in %.1f s next to spinners", ticks, run);
}
END_TEST

/* ---- a preempted coroutine resumes on its own thread ---- */

/* Compiled code may keep thread-local addresses in registers, so a
 * coroutine preempted at an arbitrary instruction must come back on the
 * thread it left, even when another worker is idle and steals: here the
 * even-numbered spinners stop early, so that one worker's queue runs dry
 * while the other still has preempted spinners. */
START_TEST(preempted_coroutine_stays_on_its_thread)
{
    if (!needs_async("preempted_coroutine_stays_on_its_thread"))
        return;
    enum { NS = 5 };
    double run = t_slow() ? 3.0 : 1.0;
    restart_for(2, SLICE, 10);
    struct spinner sp[NS];
    goro_t *h[NS];
    double t0 = t_now();
    for (int i = 0; i < NS; i++) {
        sp[i] = (struct spinner){ .id = i + 1, .check_tid = true,
                                  .end = i % 2 ? 0 : t0 + run * (0.2 + 0.1 * i) };
        ck_assert_ptr_nonnull(h[i] = go(spinner, &sp[i]));
    }
    run_for(run, h, NS);
    long moved = 0, idle = 0;
    for (int i = 0; i < NS; i++) {
        moved += sp[i].moved;
        idle += atomic_load(&sp[i].chunks) == 0;
    }
    report("preempt: %d spinners on 2 workers for %.1f s: %ld chunks found on another "
           "thread\n", NS, run, moved);
    ck_assert_msg(idle == 0, "%ld of %d spinners on 2 workers never ran", idle, NS);
    ck_assert_msg(moved == 0, "preempted spinners resumed on another thread (%ld chunks)",
                  moved);
}
END_TEST

Suite *preempt_suite(void)
{
    Suite *s = suite_create("preempt");
    TCase *tc = t_tcase(s, "preempt", 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, spinners_do_not_stop_a_ticker);
    tcase_add_test(tc, preempted_coroutine_stays_on_its_thread);
    preempt_regs_tests(tc);
    preempt_libc_tests(tc);
    preempt_signals_tests(tc);
    preempt_blocking_tests(tc);
    return s;
}
