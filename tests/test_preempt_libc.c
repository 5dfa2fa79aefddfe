/* Preemption and the code it lands in: libc under heavy preemption never
 * deadlocks; goro calls yield when preemption was asked (the cooperative
 * half); no-preempt sections hold the worker; a negative slice never
 * preempts.
 *
 * Part of the preempt suite (test_preempt.c registers it). Coroutines
 * never call ck_assert (see helpers.h). */
#include "test_preempt.h"

/* ---- libc under heavy preemption ---- */

/* malloc, stdio and friends take locks. A coroutine preempted while it
 * holds one, with another coroutine on the same thread wanting it next,
 * would deadlock: the runtime must never preempt inside libc. Here four
 * coroutines call them all the time, at a 1 ms slice, and in between spin
 * in their own code - so that most preemptions succeed there, and the rest
 * are refused in libc. */
static struct {
    FILE *devnull;
    atomic_long ops;
} lc;

struct libc_user {
    int id;
    long ops, switches;
};

static GORO_PREEMPTIBLE void libc_user(struct libc_user *u)
{
    uint32_t r = (uint32_t)u->id * 2654435761u + 1;
    char line[256];
    while (!atomic_load_explicit(&pt.stop, memory_order_relaxed) && t_now() < pt.hard_end) {
        size_t n = 16 + t_rnd(&r) % 32768;
        unsigned char *p = t_rnd(&r) % 4 ? malloc(n) : calloc(1, n);
        if (!p) {
            t_fail("libc user %d: out of memory", u->id);
            return;
        }
        for (size_t i = 0; i < n; i += 64)      /* our own code: a safe point */
            p[i] = (unsigned char)(i ^ r);
        snprintf(line, sizeof line, "%d %zu %.3f %s %lx", u->id, n, (double)n / 7.0,
                 "goro", (unsigned long)p[0]);
        fprintf(lc.devnull, "%s\n", line);
        if (t_rnd(&r) % 8 == 0)
            fflush(lc.devnull);
        unsigned char *q = realloc(p, n / 2 + 1);
        free(q ? q : p);
        u->ops++;
        u->switches += note_progress(u->id);
        atomic_fetch_add_explicit(&lc.ops, 1, memory_order_relaxed);
        for (int i = 0; i < 4; i++)     /* mostly own code: preemptible */
            r = (uint32_t)churn(r);
    }
}

START_TEST(libc_calls_under_preemption_never_deadlock)
{
    enum { NU = 4 };
    double run = (double)t_scale(3000) / 1000;
    double stall = t_timeout(2);
    restart_for(1, GORO_MSEC, 20);
    lc.devnull = fopen("/dev/null", "w");
    ck_assert_ptr_nonnull(lc.devnull);
    atomic_store(&lc.ops, 0);
    struct libc_user u[NU];
    goro_t *h[NU];
    for (int i = 0; i < NU; i++) {
        u[i] = (struct libc_user){ .id = i + 1 };
        ck_assert_ptr_nonnull(h[i] = go(libc_user, &u[i]));
    }
    /* progress must never pause for long: a deadlock is a pause forever */
    double t0 = t_now(), last_change = t0;
    long last = 0;
    while (t_now() - t0 < run) {
        t_nap(0.01);
        long now = atomic_load(&lc.ops);
        if (now != last) {
            last = now;
            last_change = t_now();
        }
        /* coroutines may be stuck for good: do not wait for them */
        ck_assert_msg(t_now() - last_change < stall, "libc calls under preemption: no "
                      "progress for %.1f s after %ld operations (a deadlock?)", stall, now);
    }
    atomic_store(&pt.stop, 1);
    join_all(h, NU);
    fclose(lc.devnull);
    long ops = 0, switches = 0;
    char each[128];
    int len = 0;
    for (int i = 0; i < NU; i++) {
        ops += u[i].ops;
        switches += u[i].switches;
        len += snprintf(each + len, sizeof each - (size_t)len, "%s%ld", i ? ", " : "",
                        u[i].ops);
    }
    report("preempt: %d coroutines in malloc/stdio for %.1f s on one worker at a 1 ms "
           "slice: %ld rounds (%s), %ld preemptions\n", NU, run, ops, each, switches);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    /* They never yield: without preemption only the first would have run.
     * With it each gets its turns - a quarter of a fair share at least. */
    for (int i = 0; t_async_preemption() && i < NU; i++)
        ck_assert_msg(u[i].ops >= ops / NU / 4 && u[i].switches >= 2, "libc user %d: %ld "
                      "of %ld rounds, switched %ld times", i + 1, u[i].ops, ops,
                      u[i].switches);
}
END_TEST

/* ---- the cooperative half: code that is never a safe point ---- */

/* Nearly all of this loop's time goes to memset, in libc (never a safe
 * point; in a static executable the loop is not one either). The request
 * then waits for the next goro call, here a non-blocking channel send:
 * the ticker must still get its turns. This is all there is in TSan and
 * valgrind builds. */
struct libc_spinner {
    int id;
    goro_chan_t *full;          /* try_send always finds it full */
    long switches;
};

static void libc_spinner(struct libc_spinner *s)
{
    size_t len = 256 * 1024;
    unsigned char *buf = malloc(len);
    if (!buf) {
        t_fail("libc spinner: out of memory");
        return;
    }
    for (int i = 0; !atomic_load_explicit(&pt.stop, memory_order_relaxed); i++) {
        memset(buf, i, len);
        int e = goro_chan_try_send(s->full, NULL);
        if (e != -EAGAIN) {
            t_fail("try_send on a full channel returned %d", e);
            break;
        }
        s->switches += note_progress(s->id);
        if (t_now() > pt.hard_end)
            break;
    }
    free(buf);
}

START_TEST(goro_calls_yield_when_preemption_was_asked)
{
    enum { NS = 2 };
    double run = t_slow() ? 3.0 : 1.0;
    restart_for(1, SLICE, 10);
    goro_chan_t *full;
    ck_assert_int_eq(goro_chan_new(&full, 0, 1), 0);
    ck_assert_int_eq(goro_chan_try_send(full, NULL), 0);
    struct ticker tk = { .period = 2 * GORO_MSEC };
    struct libc_spinner sp[NS];
    goro_t *h[NS + 1];
    ck_assert_ptr_nonnull(h[0] = go(ticker, &tk));
    for (int i = 0; i < NS; i++) {
        sp[i] = (struct libc_spinner){ .id = i + 1, .full = full };
        ck_assert_ptr_nonnull(h[i + 1] = go(libc_spinner, &sp[i]));
    }
    run_for(run, h, NS + 1);
    ck_assert_int_eq(goro_chan_recv(full, NULL), 1);
    ck_assert_int_eq(goro_chan_free(full), 0);
    long ticks = atomic_load(&tk.ticks);
    report("preempt: %d memset spinners and a ticker on one worker for %.1f s: %ld ticks, "
           "lateness mean %.2f ms, max %.2f ms; spinners switched %ld and %ld times\n", NS,
           run, ticks, mean_late(&tk) / 1e6, t_ms(tk.max_late), sp[0].switches, sp[1].switches);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    for (int i = 0; i < NS; i++)
        ck_assert_msg(sp[i].switches >= 3, "memset spinner %d was switched %ld times",
                      i + 1, sp[i].switches);
    check_lateness(&tk, SLICE, "next to coroutines that only make non-blocking goro calls");
}
END_TEST

/* ---- no-preempt sections ---- */

/* Inside a section the coroutine is never suspended: on a one-worker
 * runtime nothing else runs on its thread. Sections shorter than 3 slices
 * keep the worker outright (the ticker does not run at all); in a longer
 * one the monitor hands the worker's queue to another thread, and the
 * ticker may run there - never on the section's thread. */
struct section_run {
    struct ticker *tk;
    long short_ticks;           /* ticks during short sections: must be 0 */
    long between;               /* ticks during preemptible spins between them */
    long long_here;             /* ticks on this thread in a long section: 0 */
    long long_elsewhere;        /* ticks elsewhere in it (the hand-off) */
    long nested_here;           /* the same in a nested section */
    long after_enable;          /* ticks within 3 slices of leaving */
    long later;                 /* ticks in the 150 ms after that */
    bool moved;                 /* the section's coroutine changed threads */
};

static double slices(double n) { return n * (double)SLICE / 1e9; }

/* Spins n slices; returns the ticks the ticker made meanwhile. */
static long ticks_during_spin(struct ticker *tk, double n)
{
    long before = atomic_load(&tk->ticks);
    spin_for(t_now() + slices(n));
    return atomic_load(&tk->ticks) - before;
}

/* A long section (or n slices): ticks on this thread / elsewhere. */
static void long_section(struct section_run *s, double n, long *here, long *elsewhere)
{
    long tid = t_tid();
    atomic_store(&s->tk->ticks_on_watch, 0);
    atomic_store(&s->tk->watch_tid, tid);
    *elsewhere += ticks_during_spin(s->tk, n);
    atomic_store(&s->tk->watch_tid, 0);
    *here += atomic_load(&s->tk->ticks_on_watch);
    *elsewhere -= atomic_load(&s->tk->ticks_on_watch);
    s->moved |= t_tid() != tid;
}

static void section_runner(struct section_run *s)
{
    struct ticker *tk = s->tk;
    while (atomic_load(&tk->ticks) < 2 && t_now() < pt.hard_end)
        goro_yield();               /* the ticker is alive */
    for (int i = 0; i < 4; i++) {
        goro_yield();               /* a fresh slice: the section ends before 3 */
        goro_preempt_disable();
        s->short_ticks += ticks_during_spin(tk, 2);
        goro_preempt_enable();
        s->between += ticks_during_spin(tk, 3);
    }
    goro_preempt_disable();
    long_section(s, 15, &s->long_here, &s->long_elsewhere);
    goro_preempt_disable();         /* nested: after one enable, still inside */
    long_section(s, 5, &s->nested_here, &s->long_elsewhere);
    goro_preempt_enable();
    long_section(s, 5, &s->nested_here, &s->long_elsewhere);
    long before = atomic_load(&tk->ticks);
    goro_preempt_enable();
    spin_for(t_now() + slices(3));
    s->after_enable = atomic_load(&tk->ticks) - before;
    s->later = ticks_during_spin(tk, 15);
    atomic_store(&pt.stop, 1);
}

START_TEST(no_preempt_section_holds_the_worker)
{
    if (!needs_async("no_preempt_section_holds_the_worker"))
        return;
    /* outside a coroutine: nothing to do, and nothing breaks */
    goro_preempt_disable();
    goro_preempt_enable();
    goro_preempt_enable();
    restart_for(1, SLICE, 10);
    struct ticker tk = { .period = 2 * GORO_MSEC };
    struct section_run s = { .tk = &tk };
    goro_t *h[2];
    ck_assert_ptr_nonnull(h[0] = go(ticker, &tk));
    ck_assert_ptr_nonnull(h[1] = go(section_runner, &s));
    join_all(h, 2);
    report("preempt: ticks during 2-slice no-preempt sections %ld (between them %ld); "
           "during 25 slices of long and nested sections %ld on their thread, %ld on "
           "another; within 3 slices of the end %ld, in the next 15 slices %ld\n",
           s.short_ticks, s.between, s.long_here + s.nested_here, s.long_elsewhere,
           s.after_enable, s.later);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(s.short_ticks == 0, "the ticker ran %ld times during 2-slice no-preempt "
                  "sections on its only worker", s.short_ticks);
    ck_assert_msg(s.between > 0, "the ticker never ran between the sections");
    ck_assert_msg(s.long_here == 0, "a coroutine in a no-preempt section was suspended: "
                  "the ticker ran %ld times on its thread", s.long_here);
    ck_assert_msg(s.nested_here == 0, "a coroutine in a nested no-preempt section (one "
                  "enable of two) was suspended: the ticker ran %ld times on its thread",
                  s.nested_here);
    ck_assert_msg(!s.moved, "a coroutine in a no-preempt section changed threads");
    ck_assert_msg(s.after_enable > 0, "the ticker did not run within 3 slices of the "
                  "section's end");
    ck_assert_msg(s.later >= 2, "after the section the spinner was not preempted: "
                  "%ld ticks in 15 slices", s.later);
}
END_TEST

/* ---- a negative slice: no preemption at all ---- */

struct starver {
    struct ticker *tk;
    double length;
    long alive_before, during;
};

static void starver(struct starver *s)
{
    while (atomic_load(&s->tk->ticks) < 3 && t_now() < pt.hard_end)
        goro_yield();
    s->alive_before = atomic_load(&s->tk->ticks);
    spin_for(t_now() + s->length);
    s->during = atomic_load(&s->tk->ticks) - s->alive_before;
}

/* Runs a 300 ms spinner next to a 1 ms ticker on a runtime started with
 * cfg; returns the ticks during the spin, and checks the ticker lives. */
static long ticks_next_to_starver(const goro_config_t *cfg)
{
    t_restart(cfg);
    begin(t_timeout(10));
    struct ticker tk = { .period = GORO_MSEC };
    struct starver s = { .tk = &tk, .length = 0.3 };
    goro_t *h[2];
    ck_assert_ptr_nonnull(h[0] = go(ticker, &tk));
    ck_assert_ptr_nonnull(h[1] = go(starver, &s));
    ck_assert_int_eq(goro_join(h[1], NULL), 0);
    /* the ticker runs again once the spinner is gone */
    atomic_long *ticks = &tk.ticks;
    long after = atomic_load(ticks);
    ck_assert_int_ge(t_wait_at_least(ticks, after + 3, t_timeout(2)), after + 3);
    atomic_store(&pt.stop, 1);
    ck_assert_int_eq(goro_join(h[0], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_ge(s.alive_before, 3);
    return s.during;
}

START_TEST(negative_slice_never_preempts)
{
    goro_config_t off = { .workers = 1, .slice_ns = -1 };
    long during = ticks_next_to_starver(&off);
    ck_assert_msg(during == 0, "with slice_ns = -1 a spinner was preempted: the ticker on "
                  "its worker ran %ld times during a 300 ms spin", during);
    /* GORO_SLICE=off does the same when the config leaves the slice 0 */
    ck_assert_int_eq(setenv("GORO_SLICE", "off", 1), 0);
    goro_config_t env = { .workers = 1 };
    during = ticks_next_to_starver(&env);
    unsetenv("GORO_SLICE");
    ck_assert_msg(during == 0, "with GORO_SLICE=off the ticker ran %ld times during a "
                  "300 ms spin", during);
    /* and the default preempts (where asynchronous preemption exists) */
    if (t_async_preemption()) {
        during = ticks_next_to_starver(&env);
        ck_assert_msg(during >= 3, "with the default slice the ticker ran only %ld times "
                      "during a 300 ms spin", during);
    }
}
END_TEST

/* Adds this file's tests to the preempt test case (test_preempt.h). */
void preempt_libc_tests(TCase *tc)
{
    tcase_add_test(tc, libc_calls_under_preemption_never_deadlock);
    tcase_add_test(tc, goro_calls_yield_when_preemption_was_asked);
    tcase_add_test(tc, no_preempt_section_holds_the_worker);
    tcase_add_test(tc, negative_slice_never_preempts);
}
