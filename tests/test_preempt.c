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
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

#define SLICE (10 * GORO_MSEC)

/* A line for the log, written at once: a failing check ends the test's
 * process (fork mode) before stdio would flush it. */
static void __attribute__((format(printf, 1, 2))) report(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* ---- what every test shares ---- */

static struct {
    atomic_int stop;            /* every coroutine of the test ends */
    atomic_int last_ran;        /* id of the coroutine that made progress last */
    double hard_end;            /* spinners end by then, whatever happens */
} pt;

enum { TICKER_ID = -1, NOBODY = -2 };

/* True when the test can run; otherwise says why not. */
static bool needs_async(const char *test)
{
    if (t_async_preemption())
        return true;
    t_skip(test, "asynchronous preemption is off (TSan, valgrind or GORO_PREEMPT=0)");
    return false;
}

/* Each test runs on a runtime of its own making. */
static void restart(int workers, int64_t slice_ns)
{
    t_restart(&(goro_config_t){ .workers = workers, .slice_ns = slice_ns });
}

static void reset_round(double limit)
{
    atomic_store(&pt.stop, 0);
    atomic_store(&pt.last_ran, NOBODY);
    pt.hard_end = t_now() + limit;
}

/* A new round of coroutines; none of them runs past `limit` seconds. The
 * host's stalls are watched from here (check_lateness). */
static void begin(double limit)
{
    reset_round(limit);
    t_host_watch_begin();
}

/* restart() and begin() at once: the usual start of a test. */
static void restart_for(int workers, int64_t slice_ns, double limit)
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

static void join_all(goro_t **h, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
}

/* Lets the round's coroutines run `seconds`, then ends and joins them. */
static void run_for(double seconds, goro_t **h, int n)
{
    t_nap(seconds);
    atomic_store(&pt.stop, 1);
    join_all(h, n);
}

/* ---- spinners: integer work, no call ---- */

struct spinner {
    int id;                     /* >= 1 */
    bool check_tid;             /* compare the thread after every chunk */
    double end;                 /* if set: stop then (t_now) */
    atomic_long chunks;         /* progress */
    long switches;              /* chunks after which another coroutine had run */
    uintptr_t tid;              /* where it started (t_thread) */
    long moved;                 /* chunks that found it on another thread */
    uint64_t x;                 /* keeps the work alive */
};

/* About 0.1 ms of dependent multiply-adds (a few ms under qemu). */
static inline __attribute__((always_inline)) uint64_t churn(uint64_t x)
{
    for (int i = 0; i < (1 << 16); i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* Progress of coroutine `id` on a one-worker runtime: if someone else made
 * progress since its last note, it was switched out in between - and since
 * a spinner never yields, that was a preemption. */
static inline __attribute__((always_inline)) bool note_progress(int id)
{
    if (atomic_load_explicit(&pt.last_ran, memory_order_relaxed) == id)
        return false;
    atomic_store_explicit(&pt.last_ran, id, memory_order_relaxed);
    return true;
}

/* It asks which thread it is on through the thread pointer, not gettid():
 * a system call per chunk gave the preemption signal a place to land in
 * libc at every chunk (docs/preemption.md), and the worker was handed over
 * instead of preempted in one run in four under ASan. */
static GORO_PREEMPTIBLE void spinner(struct spinner *s)
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
static GORO_PREEMPTIBLE uint64_t spin_for(double until)
{
    uint64_t x = 1;
    while (t_now() < until && t_now() < pt.hard_end)
        x = churn(x);
    return x;
}

static long total_switches(const struct spinner *s, int n)
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
static void check_taking_turns_mostly_in_place(const struct spinner *s, int n, const char *what)
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

struct ticker {
    int64_t period;
    bool record_tid;            /* keep sleep_tid */
    atomic_long ticks;
    atomic_long sleep_tid;      /* while asleep: the thread it slept on */
    atomic_long watch_tid;      /* when set: count ticks on that thread */
    atomic_long ticks_on_watch;
    int64_t max_late;           /* ns; read after the join */
    double late_sum;
};

static void ticker(struct ticker *t)
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
static int64_t slow_factor(void)
{
    if (t_slow())
        return 10;
#ifdef T_TSAN
    return 5;                       /* every thread start and wake-up is slow */
#else
    return t_sanitized() ? 2 : 1;
#endif
}

static int64_t late_limit(int64_t slice) { return 6 * slice * slow_factor(); }
static int64_t mean_late_limit(int64_t slice) { return 3 * slice / 2 * slow_factor(); }

static double mean_late(const struct ticker *t)
{
    long n = atomic_load(&t->ticks);
    return n ? t->late_sum / (double)n : 0;
}

/* The ticker woke about a slice late at most, mostly. The largest
 * lateness may also hold a stall of the host's since begin(). */
static void check_lateness(const struct ticker *t, int64_t slice, const char *what)
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
static void go_ticker_and_spinners(struct ticker *tk, struct spinner *sp, int ns, goro_t **h)
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

/* ---- register state: auto-vectorised FP and integer SIMD ---- */

enum { FPN = 256, NACC = 24 };
typedef double v8d __attribute__((vector_size(64)));

/* One spinner's data; the FP maps are contractions, so values stay in
 * range however many rounds run, and every result depends on the exact
 * rounding of every earlier one. */
struct fpstate {
    v8d acc[NACC];
    double d[FPN], e[FPN];
    float f[FPN], g[FPN];
    uint32_t u[FPN], w[FPN];
    uint16_t h[FPN];
    double dsum;
    float fsum;
    uint64_t usum;
} __attribute__((aligned(64)));

/* The round, inlined into one function per instruction set below (each
 * compiled at -O3 for its own vector width). The accumulator loop keeps
 * NACC vectors live at once: more than 16, so on AVX-512 it uses
 * zmm16-zmm31 too, and on aarch64 all of v0-v31. */
static inline __attribute__((always_inline)) void fp_round_body(struct fpstate *s, uint32_t r)
{
    const double c = (double)(r % 1024) * (1.0 / 1024) - 0.5;
    const float cf = (float)c;
    for (int i = 0; i < FPN; i++) {
        double d = s->d[i] * 0.75 + s->e[i] * 0.25 + c;
        s->e[i] = s->e[i] * 0.5 - d * 0.125 + 0.001 * (double)i;
        s->d[i] = d;
    }
    for (int i = 0; i < FPN; i++) {
        float f = s->f[i] * 0.625f + s->g[i] * 0.375f - cf;
        s->g[i] = s->g[i] * 0.5f + f * 0.25f;
        s->f[i] = f;
    }
    for (int i = 0; i < FPN; i++) {
        uint32_t u = s->u[i] * 2654435761u + s->w[i];
        s->w[i] = (s->w[i] ^ (u >> 13)) + r;
        s->u[i] = u ^ (u << 7);
        s->h[i] = (uint16_t)((uint16_t)(s->h[i] + (u >> 16)) ^ (uint16_t)i);
    }
    double ds = 0;
    float fs = 0;
    uint64_t us = 0;
    for (int i = 0; i < FPN; i++) {
        ds += s->d[i] * s->e[i];
        fs += s->f[i];
        us += s->u[i] ^ s->h[i];
    }
    s->dsum = s->dsum * 0.5 + ds;
    s->fsum = s->fsum * 0.5f + fs;
    s->usum = s->usum * 31 + us;
    v8d a[NACC];
    for (int k = 0; k < NACC; k++)
        a[k] = s->acc[k];
    for (int j = 0; j < 32; j++)
#pragma GCC unroll 32
        for (int k = 0; k < NACC; k++)
            a[k] = a[k] * 0.5 + a[(k + 1) % NACC] * 0.25 + c;
    for (int k = 0; k < NACC; k++)
        s->acc[k] = a[k];
}

/* gcc vectorises at -O3 (clang at -O2 already), and prefers 256-bit
 * vectors unless told otherwise. */
#if defined(__clang__)
#define T_VECTORISE
#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl"), min_vector_width(512)))
#else
#define T_VECTORISE __attribute__((optimize("O3")))
#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,prefer-vector-width=512")))
#endif

#define FP_ROUND(name, ...) \
    static GORO_PREEMPTIBLE T_VECTORISE __VA_ARGS__ \
    void name(struct fpstate *s, uint32_t r) { fp_round_body(s, r); }

FP_ROUND(fp_round_base)
#if defined(__x86_64__)
FP_ROUND(fp_round_avx2, __attribute__((target("avx2,fma"))))
FP_ROUND(fp_round_avx512, T_AVX512)
#elif defined(__aarch64__)
FP_ROUND(fp_round_sve, __attribute__((target("+sve"))))
#endif

struct fp_variant {
    const char *name;
    void (*round)(struct fpstate *, uint32_t);
};

/* The instruction sets this CPU has, each with its own round. */
static int fp_variants(struct fp_variant *v)
{
    int n = 0;
    v[n++] = (struct fp_variant){ "base", fp_round_base };
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        v[n++] = (struct fp_variant){ "avx2", fp_round_avx2 };
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        v[n++] = (struct fp_variant){ "avx512", fp_round_avx512 };
#elif defined(__aarch64__)
#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22)
#endif
    if (getauxval(AT_HWCAP) & HWCAP_SVE)
        v[n++] = (struct fp_variant){ "sve", fp_round_sve };
#endif
    return n;
}

static void fp_init(struct fpstate *s, uint32_t seed)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < FPN; i++) {
        s->d[i] = (double)(t_rnd(&seed) % 2000) / 1000.0 - 1.0;
        s->e[i] = (double)(t_rnd(&seed) % 2000) / 1000.0 - 1.0;
        s->f[i] = (float)(t_rnd(&seed) % 2000) / 1000.0f - 1.0f;
        s->g[i] = (float)(t_rnd(&seed) % 2000) / 1000.0f - 1.0f;
        s->u[i] = t_rnd(&seed);
        s->w[i] = t_rnd(&seed);
        s->h[i] = (uint16_t)t_rnd(&seed);
    }
    for (int k = 0; k < NACC; k++)
        for (int j = 0; j < 8; j++)
            s->acc[k][j] = (double)(t_rnd(&seed) % 1000) / 1000.0;
}

struct fp_spinner {
    int id;
    const struct fp_variant *v;
    uint32_t seed;
    long rounds;
    long switches;
    struct fpstate *s;
};

static GORO_PREEMPTIBLE void fp_spinner(struct fp_spinner *f)
{
    for (uint32_t r = 0; !atomic_load_explicit(&pt.stop, memory_order_relaxed); r++) {
        f->v->round(f->s, r);
        f->switches += note_progress(f->id);
        f->rounds = (long)r + 1;
        if (r % 256 == 255 && t_now() > pt.hard_end)
            break;
    }
}

/* The rounds a spinner made, again on this thread (never preempted). */
static bool fp_matches_reference(const struct fp_spinner *f, struct fpstate *ref)
{
    fp_init(ref, f->seed);
    for (long r = 0; r < f->rounds; r++)
        f->v->round(ref, (uint32_t)r);
    return memcmp(ref, f->s, sizeof *ref) == 0;
}

/* A short slice makes thousands of preemptions in a couple of seconds. */
START_TEST(fp_and_simd_state_survives_preemption)
{
    if (!needs_async("fp_and_simd_state_survives_preemption"))
        return;
    enum { PER = 2, MAXV = 4 };
    const int64_t slice = GORO_MSEC;
    double run = t_slow() ? 4.0 : 2.0;
    struct fp_variant v[MAXV];
    int nv = fp_variants(v), n = nv * PER;
    struct fp_spinner f[MAXV * PER];
    goro_t *h[MAXV * PER];
    struct fpstate *ref = aligned_alloc(64, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    restart_for(1, slice, 20);
    for (int i = 0; i < n; i++) {
        f[i] = (struct fp_spinner){ .id = i + 1, .v = &v[i % nv], .seed = 1234u + (uint32_t)i };
        ck_assert_ptr_nonnull(f[i].s = aligned_alloc(64, sizeof *f[i].s));
        fp_init(f[i].s, f[i].seed);
        ck_assert_ptr_nonnull(h[i] = go(fp_spinner, &f[i]));
    }
    run_for(run, h, n);
    long switches = 0, rounds = 0;
    for (int i = 0; i < n; i++) {
        switches += f[i].switches;
        rounds += f[i].rounds;
    }
    char each[256];
    int len = 0;
    for (int i = 0; i < n; i++)
        len += snprintf(each + len, sizeof each - (size_t)len, "%s%s %ld", i ? ", " : "",
                        f[i].v->name, f[i].switches);
    report("preempt: %d FP/SIMD spinners on one worker, %.0f ms slice, %.1f s: %ld rounds, "
           "%ld preemptions (%s)\n", n, t_ms(slice), run, rounds, switches, each);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(f[i].rounds > 0, "FP spinner %d (%s) never ran", i + 1, f[i].v->name);
        ck_assert_msg(fp_matches_reference(&f[i], ref), "FP spinner %d (%s): state after "
                      "%ld rounds and %ld preemptions differs from the same rounds run "
                      "without preemption", i + 1, f[i].v->name, f[i].rounds,
                      f[i].switches);
        free(f[i].s);
    }
    free(ref);
    /* At 1 ms slices up to 1000 a second; without preemption there would
     * be one per spinner. Room for a busy machine. */
    long want = (long)(run * (t_slow() ? 10 : t_sanitized() ? 50 : 100));
    ck_assert_msg(switches >= want, "only %ld preemptions of %d FP spinners in %.1f s at "
                  "a %.0f ms slice (want >= %ld)", switches, n, run, t_ms(slice), want);
}
END_TEST


/* ---- every register, from assembly ---- */

/* goro_test_regs_spin(in, out, iters, wide) loads every register the
 * program can see from *in, spins `iters` times changing only a counter
 * register, and stores them all to *out; the caller compares. x86-64: 14
 * GPRs (all but rsp and the counter rcx), the flags (CF PF AF ZF SF OF and
 * DF), MXCSR and the x87 control word with non-default rounding, a full x87
 * stack, 12 words of the red zone below rsp, and by `wide` xmm0-15 (0),
 * ymm0-15 (1) or zmm0-31 with k0-k7 (2). aarch64: x0-x28 and x30 (x29 is
 * the counter), NZCV, FPCR and FPSR, v0-v31. */
/* Formats what differs into what[len]; true. */
static bool __attribute__((format(printf, 3, 4))) differ(char *what, size_t len,
                                                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, len, fmt, ap);
    va_end(ap);
    return true;
}

#if defined(__x86_64__)
struct regblock {
    uint64_t gpr[14];           /* rax rbx rdx rsi rdi rbp r8 .. r15 */
    uint64_t counter;           /* rcx: out 0 */
    uint64_t flags;
    uint32_t mxcsr;
    uint16_t fcw, pad0;
    double x87[8];              /* st0 .. st7 */
    uint64_t redzone[12];       /* -128(%rsp) .. -40(%rsp) */
    uint8_t pad1[24];
    uint8_t vec[32][64];
    uint64_t k[8];
};
_Static_assert(__builtin_offsetof(struct regblock, mxcsr) == 128, "layout");
_Static_assert(__builtin_offsetof(struct regblock, x87) == 136, "layout");
_Static_assert(__builtin_offsetof(struct regblock, redzone) == 200, "layout");
_Static_assert(__builtin_offsetof(struct regblock, vec) == 320, "layout");
_Static_assert(__builtin_offsetof(struct regblock, k) == 2368, "layout");
static const char *const gpr_name[14] = { "rax", "rbx", "rdx", "rsi", "rdi", "rbp", "r8",
                                          "r9", "r10", "r11", "r12", "r13", "r14", "r15" };
#define NGPR 14
#define FLAGS_MASK 0xcd5u       /* CF PF AF ZF SF DF OF */
#define FLAGS_SET 0xcd7u        /* all of them, and the always-one bit 1 */
#define MXCSR_SET 0xffc0u       /* exceptions masked, round to zero, FTZ, DAZ */
#define FCW_MASK 0x0f3fu
#define FCW_SET 0x0e7fu         /* masked, double precision, round to zero */

#define R_LOADX(n) "  movdqu 320+" #n "*64(%rdi), %xmm" #n "\n"
#define R_LOADY(n) "  vmovdqu 320+" #n "*64(%rdi), %ymm" #n "\n"
#define R_LOADZ(n) "  vmovdqu64 320+" #n "*64(%rdi), %zmm" #n "\n"
#define R_STOREX(n) "  movdqu %xmm" #n ", 320+" #n "*64(%rax)\n"
#define R_STOREY(n) "  vmovdqu %ymm" #n ", 320+" #n "*64(%rax)\n"
#define R_STOREZ(n) "  vmovdqu64 %zmm" #n ", 320+" #n "*64(%rax)\n"
#define R_16(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) \
    M(12) M(13) M(14) M(15)
#define R_32(M) R_16(M) M(16) M(17) M(18) M(19) M(20) M(21) M(22) M(23) M(24) \
    M(25) M(26) M(27) M(28) M(29) M(30) M(31)
#define R_LOADK(n) "  kmovq 2368+" #n "*8(%rdi), %k" #n "\n"
#define R_STOREK(n) "  kmovq %k" #n ", 2368+" #n "*8(%rax)\n"
#define R_8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define R_FLD(n) "  fldl 136+(7-" #n ")*8(%rdi)\n"
#define R_FSTP(n) "  fstpl 136+" #n "*8(%rax)\n"
#define R_RZIN(n) "  mov 200+" #n "*8(%rdi), %rax\n  mov %rax, -128+" #n "*8(%rsp)\n"
/* after the loop two words were pushed: the red zone moved 16 bytes up */
#define R_RZOUT(n) "  mov -112+" #n "*8(%rsp), %rbx\n  mov %rbx, 200+" #n "*8(%rax)\n"
#define R_12(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)

__asm__(
    ".pushsection goro_preemptible,\"ax\",@progbits\n"
    ".p2align 4\n"
    ".type goro_test_regs_spin,@function\n"
    "goro_test_regs_spin:\n"
    "  .cfi_startproc\n"
    "  push %rbp\n  .cfi_adjust_cfa_offset 8\n  .cfi_rel_offset rbp, 0\n"
    "  push %rbx\n  .cfi_adjust_cfa_offset 8\n  .cfi_rel_offset rbx, 0\n"
    "  push %r12\n  .cfi_adjust_cfa_offset 8\n  .cfi_rel_offset r12, 0\n"
    "  push %r13\n  .cfi_adjust_cfa_offset 8\n  .cfi_rel_offset r13, 0\n"
    "  push %r14\n  .cfi_adjust_cfa_offset 8\n  .cfi_rel_offset r14, 0\n"
    "  push %r15\n  .cfi_adjust_cfa_offset 8\n  .cfi_rel_offset r15, 0\n"
    /* 0: out, 8: wide, 16: in, 24: caller's MXCSR, 28: caller's x87 CW */
    "  sub $40, %rsp\n  .cfi_adjust_cfa_offset 40\n"
    "  mov %rsi, 0(%rsp)\n"
    "  movslq %ecx, %rcx\n  mov %rcx, 8(%rsp)\n"
    "  mov %rdi, 16(%rsp)\n"
    "  stmxcsr 24(%rsp)\n  fnstcw 28(%rsp)\n"
    "  ldmxcsr 128(%rdi)\n  fldcw 132(%rdi)\n"
    R_8(R_FLD)
    "  cmp $1, %rcx\n  jb 10f\n  je 11f\n"
    R_32(R_LOADZ) R_8(R_LOADK)
    "  jmp 12f\n"
    "11:\n" R_16(R_LOADY)
    "  jmp 12f\n"
    "10:\n" R_16(R_LOADX)
    "12:\n"
    R_12(R_RZIN)
    "  mov %rdx, %rcx\n"
    "  pushq 120(%rdi)\n  .cfi_adjust_cfa_offset 8\n"
    "  popfq\n  .cfi_adjust_cfa_offset -8\n"
    "  mov 0(%rdi), %rax\n  mov 8(%rdi), %rbx\n  mov 16(%rdi), %rdx\n"
    "  mov 24(%rdi), %rsi\n  mov 40(%rdi), %rbp\n  mov 48(%rdi), %r8\n"
    "  mov 56(%rdi), %r9\n  mov 64(%rdi), %r10\n  mov 72(%rdi), %r11\n"
    "  mov 80(%rdi), %r12\n  mov 88(%rdi), %r13\n  mov 96(%rdi), %r14\n"
    "  mov 104(%rdi), %r15\n  mov 32(%rdi), %rdi\n"
    /* the spin: `loop` changes rcx and nothing else, not even the flags */
    "1: loop 1b\n"
    "  pushfq\n  .cfi_adjust_cfa_offset 8\n"
    "  push %rax\n  .cfi_adjust_cfa_offset 8\n"
    "  mov 16(%rsp), %rax\n"
    "  mov %rbx, 8(%rax)\n  mov %rdx, 16(%rax)\n  mov %rsi, 24(%rax)\n"
    "  mov %rdi, 32(%rax)\n  mov %rbp, 40(%rax)\n  mov %r8, 48(%rax)\n"
    "  mov %r9, 56(%rax)\n  mov %r10, 64(%rax)\n  mov %r11, 72(%rax)\n"
    "  mov %r12, 80(%rax)\n  mov %r13, 88(%rax)\n  mov %r14, 96(%rax)\n"
    "  mov %r15, 104(%rax)\n  mov %rcx, 112(%rax)\n"
    R_12(R_RZOUT)
    "  pop %rbx\n  .cfi_adjust_cfa_offset -8\n  mov %rbx, 0(%rax)\n"
    "  pop %rbx\n  .cfi_adjust_cfa_offset -8\n  mov %rbx, 120(%rax)\n"
    "  cld\n"
    "  stmxcsr 128(%rax)\n  fnstcw 132(%rax)\n"
    R_8(R_FSTP)
    "  mov 8(%rsp), %rcx\n"
    "  cmp $1, %rcx\n  jb 20f\n  je 21f\n"
    R_32(R_STOREZ) R_8(R_STOREK)
    "  vzeroupper\n  jmp 22f\n"
    "21:\n" R_16(R_STOREY)
    "  vzeroupper\n  jmp 22f\n"
    "20:\n" R_16(R_STOREX)
    "22:\n"
    "  ldmxcsr 24(%rsp)\n  fldcw 28(%rsp)\n"
    "  add $40, %rsp\n  .cfi_adjust_cfa_offset -40\n"
    "  pop %r15\n  .cfi_adjust_cfa_offset -8\n"
    "  pop %r14\n  .cfi_adjust_cfa_offset -8\n"
    "  pop %r13\n  .cfi_adjust_cfa_offset -8\n"
    "  pop %r12\n  .cfi_adjust_cfa_offset -8\n"
    "  pop %rbx\n  .cfi_adjust_cfa_offset -8\n"
    "  pop %rbp\n  .cfi_adjust_cfa_offset -8\n"
    "  ret\n"
    "  .cfi_endproc\n"
    ".size goro_test_regs_spin, .-goro_test_regs_spin\n"
    ".popsection\n");

static int regs_max_wide(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        return 2;
    return __builtin_cpu_supports("avx") ? 1 : 0;
}

static int vec_bytes(int wide) { return wide == 2 ? 64 : wide == 1 ? 32 : 16; }
static int vec_count(int wide) { return wide == 2 ? 32 : 16; }
static const char *vec_name(int wide) { return wide == 2 ? "zmm" : wide == 1 ? "ymm" : "xmm"; }

static void regs_fill(struct regblock *b, uint32_t seed)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < NGPR; i++)
        b->gpr[i] = (uint64_t)t_rnd(&seed) << 32 | t_rnd(&seed);
    b->flags = FLAGS_SET;
    b->mxcsr = MXCSR_SET;
    b->fcw = FCW_SET;
    for (int i = 0; i < 8; i++)
        b->x87[i] = (double)(int32_t)t_rnd(&seed) * 0.25;
    for (int i = 0; i < 12; i++)
        b->redzone[i] = (uint64_t)t_rnd(&seed) << 32 | t_rnd(&seed);
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 64; j++)
            b->vec[i][j] = (uint8_t)t_rnd(&seed);
    for (int i = 0; i < 8; i++)
        b->k[i] = (uint64_t)t_rnd(&seed) << 32 | t_rnd(&seed);
}

/* True if a register lost its value; what[len] then names the first. */
static bool regs_differ(const struct regblock *in, const struct regblock *out, int wide,
                        char *what, size_t len)
{
    for (int i = 0; i < NGPR; i++)
        if (in->gpr[i] != out->gpr[i])
            return differ(what, len, "%s: %#lx, not %#lx", gpr_name[i],
                            (unsigned long)out->gpr[i], (unsigned long)in->gpr[i]);
    if (out->counter != 0)
        return differ(what, len, "rcx (the counter): %lu", (unsigned long)out->counter);
    if ((out->flags & FLAGS_MASK) != (FLAGS_SET & FLAGS_MASK))
        return differ(what, len, "rflags: %#lx, not %#x (masked %#x)",
                        (unsigned long)out->flags, FLAGS_SET, FLAGS_MASK);
    if (out->mxcsr != in->mxcsr)
        return differ(what, len, "mxcsr: %#x, not %#x", out->mxcsr, in->mxcsr);
    if ((out->fcw & FCW_MASK) != (in->fcw & FCW_MASK))
        return differ(what, len, "x87 control word: %#x, not %#x", out->fcw, in->fcw);
    for (int i = 0; i < 8; i++)
        if (memcmp(&in->x87[i], &out->x87[i], sizeof(double)) != 0)
            return differ(what, len, "st%d: %g, not %g", i, out->x87[i], in->x87[i]);
    for (int i = 0; i < 12; i++)
        if (in->redzone[i] != out->redzone[i])
            return differ(what, len, "red zone word at rsp-%d", 128 - 8 * i);
    for (int i = 0; i < vec_count(wide); i++)
        if (memcmp(in->vec[i], out->vec[i], (size_t)vec_bytes(wide)) != 0)
            return differ(what, len, "%s%d", vec_name(wide), i);
    for (int i = 0; wide == 2 && i < 8; i++)
        if (in->k[i] != out->k[i])
            return differ(what, len, "k%d: %#lx, not %#lx", i, (unsigned long)out->k[i],
                            (unsigned long)in->k[i]);
    return false;
}

#elif defined(__aarch64__)
struct regblock {
    uint64_t x[31];             /* x0 .. x30; x29 is the counter: out 0 */
    uint64_t nzcv;
    uint64_t fpcr, fpsr;
    uint8_t v[32][16];
};
_Static_assert(__builtin_offsetof(struct regblock, nzcv) == 248, "layout");
_Static_assert(__builtin_offsetof(struct regblock, v) == 272, "layout");
#define NZCV_SET 0xb0000000u    /* N C V */
#define FPCR_MASK 0x03c00000u
#define FPCR_SET 0x03c00000u    /* round to zero, flush to zero, default NaN */
#define FPSR_MASK 0x0800009fu
#define FPSR_SET 0x0800001fu    /* some cumulative exception bits and QC */

__asm__(
    ".pushsection goro_preemptible,\"ax\",@progbits\n"
    ".p2align 4\n"
    ".type goro_test_regs_spin,%function\n"
    "goro_test_regs_spin:\n"
    "  .cfi_startproc\n"
    /* 0: x29 x30, 16..95: x19-x28, 96..159: d8-d15, 160: out,
     * 168: caller's FPCR, 176: caller's FPSR */
    "  stp x29, x30, [sp, #-192]!\n"
    "  .cfi_def_cfa_offset 192\n  .cfi_offset x29, -192\n  .cfi_offset x30, -184\n"
    "  stp x19, x20, [sp, #16]\n  stp x21, x22, [sp, #32]\n"
    "  stp x23, x24, [sp, #48]\n  stp x25, x26, [sp, #64]\n"
    "  stp x27, x28, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n"
    "  stp d12, d13, [sp, #128]\n  stp d14, d15, [sp, #144]\n"
    "  str x1, [sp, #160]\n"
    "  mrs x9, fpcr\n  str x9, [sp, #168]\n"
    "  mrs x9, fpsr\n  str x9, [sp, #176]\n"
    "  ldr x9, [x0, #256]\n  msr fpcr, x9\n"
    "  ldr x9, [x0, #264]\n  msr fpsr, x9\n"
    "  add x9, x0, #272\n"
    "  ld1 {v0.16b-v3.16b}, [x9], #64\n  ld1 {v4.16b-v7.16b}, [x9], #64\n"
    "  ld1 {v8.16b-v11.16b}, [x9], #64\n  ld1 {v12.16b-v15.16b}, [x9], #64\n"
    "  ld1 {v16.16b-v19.16b}, [x9], #64\n  ld1 {v20.16b-v23.16b}, [x9], #64\n"
    "  ld1 {v24.16b-v27.16b}, [x9], #64\n  ld1 {v28.16b-v31.16b}, [x9], #64\n"
    "  ldr x9, [x0, #248]\n  msr nzcv, x9\n"
    "  mov x29, x2\n"
    "  ldp x1, x2, [x0, #8]\n  ldp x3, x4, [x0, #24]\n  ldp x5, x6, [x0, #40]\n"
    "  ldp x7, x8, [x0, #56]\n  ldp x9, x10, [x0, #72]\n  ldp x11, x12, [x0, #88]\n"
    "  ldp x13, x14, [x0, #104]\n  ldp x15, x16, [x0, #120]\n"
    "  ldp x17, x18, [x0, #136]\n  ldp x19, x20, [x0, #152]\n"
    "  ldp x21, x22, [x0, #168]\n  ldp x23, x24, [x0, #184]\n"
    "  ldp x25, x26, [x0, #200]\n  ldp x27, x28, [x0, #216]\n"
    "  ldr x30, [x0, #240]\n  ldr x0, [x0]\n"
    /* the spin: sub (not subs) and cbnz leave NZCV alone */
    "1: sub x29, x29, #1\n"
    "  cbnz x29, 1b\n"
    "  stp x0, x1, [sp, #-16]!\n"
    "  ldr x0, [sp, #16+160]\n"
    "  mrs x1, nzcv\n  str x1, [x0, #248]\n"
    "  stp x2, x3, [x0, #16]\n  stp x4, x5, [x0, #32]\n  stp x6, x7, [x0, #48]\n"
    "  stp x8, x9, [x0, #64]\n  stp x10, x11, [x0, #80]\n  stp x12, x13, [x0, #96]\n"
    "  stp x14, x15, [x0, #112]\n  stp x16, x17, [x0, #128]\n"
    "  stp x18, x19, [x0, #144]\n  stp x20, x21, [x0, #160]\n"
    "  stp x22, x23, [x0, #176]\n  stp x24, x25, [x0, #192]\n"
    "  stp x26, x27, [x0, #208]\n  stp x28, x29, [x0, #224]\n"
    "  str x30, [x0, #240]\n"
    "  ldp x2, x3, [sp], #16\n  stp x2, x3, [x0]\n"
    "  mrs x9, fpcr\n  str x9, [x0, #256]\n"
    "  mrs x9, fpsr\n  str x9, [x0, #264]\n"
    "  add x9, x0, #272\n"
    "  st1 {v0.16b-v3.16b}, [x9], #64\n  st1 {v4.16b-v7.16b}, [x9], #64\n"
    "  st1 {v8.16b-v11.16b}, [x9], #64\n  st1 {v12.16b-v15.16b}, [x9], #64\n"
    "  st1 {v16.16b-v19.16b}, [x9], #64\n  st1 {v20.16b-v23.16b}, [x9], #64\n"
    "  st1 {v24.16b-v27.16b}, [x9], #64\n  st1 {v28.16b-v31.16b}, [x9], #64\n"
    "  ldr x9, [sp, #168]\n  msr fpcr, x9\n"
    "  ldr x9, [sp, #176]\n  msr fpsr, x9\n"
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n"
    "  ldp d12, d13, [sp, #128]\n  ldp d14, d15, [sp, #144]\n"
    "  ldp x19, x20, [sp, #16]\n  ldp x21, x22, [sp, #32]\n"
    "  ldp x23, x24, [sp, #48]\n  ldp x25, x26, [sp, #64]\n"
    "  ldp x27, x28, [sp, #80]\n"
    "  ldp x29, x30, [sp], #192\n"
    "  .cfi_restore x29\n  .cfi_restore x30\n  .cfi_def_cfa_offset 0\n"
    "  ret\n"
    "  .cfi_endproc\n"
    ".size goro_test_regs_spin, .-goro_test_regs_spin\n"
    ".popsection\n");

static int regs_max_wide(void) { return 0; }

static void regs_fill(struct regblock *b, uint32_t seed)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < 31; i++)
        b->x[i] = (uint64_t)t_rnd(&seed) << 32 | t_rnd(&seed);
    b->nzcv = NZCV_SET;
    b->fpcr = FPCR_SET;
    b->fpsr = FPSR_SET;
    for (int i = 0; i < 32; i++)
        for (int j = 0; j < 16; j++)
            b->v[i][j] = (uint8_t)t_rnd(&seed);
}

static bool regs_differ(const struct regblock *in, const struct regblock *out, int wide,
                        char *what, size_t len)
{
    (void)wide;
    for (int i = 0; i < 31; i++)
        if (i != 29 && in->x[i] != out->x[i])
            return differ(what, len, "x%d: %#lx, not %#lx", i, (unsigned long)out->x[i],
                            (unsigned long)in->x[i]);
    if (out->x[29] != 0)
        return differ(what, len, "x29 (the counter): %lu", (unsigned long)out->x[29]);
    if ((out->nzcv & 0xf0000000u) != NZCV_SET)
        return differ(what, len, "nzcv: %#lx, not %#x", (unsigned long)out->nzcv,
                        NZCV_SET);
    if ((out->fpcr & FPCR_MASK) != FPCR_SET)
        return differ(what, len, "fpcr: %#lx, not %#x", (unsigned long)out->fpcr,
                        FPCR_SET);
    if ((out->fpsr & FPSR_MASK) != (FPSR_SET & FPSR_MASK))
        return differ(what, len, "fpsr: %#lx, not %#x", (unsigned long)out->fpsr,
                        FPSR_SET);
    for (int i = 0; i < 32; i++)
        if (memcmp(in->v[i], out->v[i], 16) != 0)
            return differ(what, len, "v%d", i);
    return false;
}
#endif

void goro_test_regs_spin(const struct regblock *in, struct regblock *out, uint64_t iters,
                         int wide);

struct reg_spinner {
    int id, wide;
    uint64_t iters;             /* per call: a few ms */
    long calls, switches;
    char bad[160];              /* the first register found changed */
};

static GORO_PREEMPTIBLE void reg_spinner(struct reg_spinner *r)
{
    struct regblock *in = aligned_alloc(64, sizeof *in), *out = aligned_alloc(64, sizeof *out);
    if (!in || !out) {
        t_fail("reg spinner: out of memory");
        goto done;
    }
    for (uint32_t seed = (uint32_t)r->id * 7919u + 1;
         !atomic_load_explicit(&pt.stop, memory_order_relaxed) && t_now() < pt.hard_end;
         seed++) {
        regs_fill(in, seed);
        memset(out, 0xa5, sizeof *out);
        goro_test_regs_spin(in, out, r->iters, r->wide);
        r->calls++;
        r->switches += note_progress(r->id);
        if (regs_differ(in, out, r->wide, r->bad, sizeof r->bad))
            break;
    }
done:
    free(in);
    free(out);
}

/* Iterations of the assembly spin that take about `seconds`. */
static uint64_t regs_calibrate(double seconds)
{
    struct regblock *in = aligned_alloc(64, sizeof *in), *out = aligned_alloc(64, sizeof *out);
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    regs_fill(in, 1);
    uint64_t n = 1 << 16;
    double dt;
    for (;;) {
        double t0 = t_now();
        goro_test_regs_spin(in, out, n, 0);
        dt = t_now() - t0;
        if (dt > 0.002 || n > ((uint64_t)1 << 40))
            break;
        n *= 4;
    }
    char what[160];
    ck_assert_msg(!regs_differ(in, out, 0, what, sizeof what),
                  "the register spin is broken without preemption: %s", what);
    free(in);
    free(out);
    return (uint64_t)((double)n * seconds / dt) + 1;
}

START_TEST(every_register_survives_preemption)
{
    if (!needs_async("every_register_survives_preemption"))
        return;
    enum { PER = 2 };
    const int64_t slice = GORO_MSEC;
    double run = t_slow() ? 4.0 : 2.0;
    uint64_t iters = regs_calibrate(0.002);
    int nw = regs_max_wide() + 1, n = nw * PER;
    struct reg_spinner r[3 * PER];
    goro_t *h[3 * PER];
    restart_for(1, slice, 20);
    for (int i = 0; i < n; i++) {
        r[i] = (struct reg_spinner){ .id = i + 1, .wide = i % nw, .iters = iters };
        ck_assert_ptr_nonnull(h[i] = go(reg_spinner, &r[i]));
    }
    run_for(run, h, n);
    long calls = 0, switches = 0;
    for (int i = 0; i < n; i++) {
        calls += r[i].calls;
        switches += r[i].switches;
    }
    report("preempt: %d register spinners (widest: %d), %.0f ms slice, %.1f s: %ld spins "
           "of ~2 ms, %ld of them preempted\n", n, nw - 1, t_ms(slice), run, calls, switches);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    for (int i = 0; i < n; i++) {
        ck_assert_msg(r[i].bad[0] == 0, "register spinner %d (width %d): after %ld spins, "
                      "%ld preemptions: %s", i + 1, r[i].wide, r[i].calls, r[i].switches,
                      r[i].bad);
        ck_assert_msg(r[i].calls > 0, "register spinner %d never ran", i + 1);
    }
    /* a spin of 2 slices is nearly always cut; without preemption each
     * spinner would run all its spins in one go */
    ck_assert_msg(switches >= calls / 4 && switches >= 4 * n, "only %ld of %ld register "
                  "spins of 2 ms were preempted at a %.0f ms slice", switches, calls,
                  t_ms(slice));
}
END_TEST

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

/* ---- the application's own signal handlers ---- */

#define APP_TAG 0x61707021      /* si_value of the application's own SIGURGs */

static struct {
    atomic_long usr1;           /* SIGUSR1 or SIGVTALRM seen */
    atomic_long urg_own;        /* SIGURG with APP_TAG seen */
    atomic_long urg_other;      /* other SIGURGs (the runtime's) seen */
    atomic_int chain;           /* pass those on to prev_urg */
    struct sigaction prev_urg;
    atomic_ulong worker;        /* pthread_t of the only worker */
    long resent;                /* SIGURGs sent again (merged with another) */
} as;

static void app_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    atomic_fetch_add(&as.usr1, 1);
}

/* The documented way to own SIGURG next to goro: SA_ONSTACK, and signals
 * that are not yours go to the handler you replaced. */
static void app_urg(int sig, siginfo_t *si, void *uc)
{
    if (si->si_code == SI_QUEUE && si->si_value.sival_int == APP_TAG) {
        atomic_fetch_add(&as.urg_own, 1);
        return;
    }
    atomic_fetch_add(&as.urg_other, 1);
    if (atomic_load(&as.chain) && (as.prev_urg.sa_flags & SA_SIGINFO) &&
        as.prev_urg.sa_sigaction)
        as.prev_urg.sa_sigaction(sig, si, uc);
}

static void note_worker(void)
{
    atomic_store(&as.worker, (unsigned long)pthread_self());
}

/* The thread of the only worker. */
static pthread_t the_worker(void)
{
    atomic_store(&as.worker, 0);
    goro_t *w = go(note_worker);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(goro_join(w, NULL), 0);
    return (pthread_t)atomic_load(&as.worker);
}

/* The ways this test sends a signal: to the process or to the worker. */
/* A signal sent to the worker itself is SIGVTALRM: the workers block
 * SIGUSR1, as every notifiable signal (docs/api.md, "Signals"), so that a
 * SIGUSR1 sent to the process reaches a thread of the program's. */
enum app_send { USR1_KILL, VTALRM_THREAD, URG_QUEUE, URG_THREAD, APP_SENDS };

static const char *const app_send_name[APP_SENDS] = {
    "SIGUSR1 from kill()", "SIGVTALRM from pthread_kill() to the worker",
    "SIGURG from sigqueue()", "SIGURG from pthread_sigqueue() to the worker",
};

static int send_one(enum app_send how, pthread_t worker)
{
    union sigval own = { .sival_int = APP_TAG };
    switch (how) {
    case USR1_KILL:
        return kill(getpid(), SIGUSR1) ? errno : 0;
    case VTALRM_THREAD:
        return pthread_kill(worker, SIGVTALRM);
    case URG_QUEUE:
        return sigqueue(getpid(), SIGURG, own) ? errno : 0;
    default:
        return pthread_sigqueue(worker, SIGURG, own);
    }
}

/* Sends one signal and waits until the application's handler counted it.
 * A SIGURG is sent again if it does not arrive within 0.1 s: like every
 * signal below SIGRTMIN it merges with one still pending - the runtime's,
 * if the worker has not taken that yet (say, while it waits for a CPU). */
static void send_and_wait(const char *phase, enum app_send how, pthread_t worker)
{
    bool urg = how >= URG_QUEUE;
    atomic_long *count = urg ? &as.urg_own : &as.usr1;
    long before = atomic_load(count), got = before;
    for (int attempt = 0; attempt < (urg ? 10 : 1) && got == before; attempt++) {
        int err = send_one(how, worker);
        ck_assert_msg(err == 0, "%s: sending %s: %s", phase, app_send_name[how],
                      strerror(err));
        as.resent += attempt > 0;
        got = t_wait_at_least(count, before + 1, t_timeout(urg ? 0.1 : 1));
    }
    ck_assert_msg(got > before, "%s: the application's handler never saw %s", phase,
                  app_send_name[how]);
}

/* Spinners and a ticker on the only worker while this thread sends every
 * kind of signal `rounds` times; each must reach the application's
 * handler, and the spinners must still be preempted. */
static void signal_phase(const char *phase, int rounds, bool runtime_urg_expected)
{
    enum { NS = 2 };
    begin(t_timeout(20));
    struct ticker tk;
    struct spinner sp[NS];
    goro_t *h[NS + 1];
    pthread_t worker = the_worker();
    go_ticker_and_spinners(&tk, sp, NS, h);
    t_nap(t_timeout(0.05));
    as.resent = 0;
    for (int i = 0; i < rounds; i++) {
        for (enum app_send k = 0; k < APP_SENDS; k++)
            send_and_wait(phase, k, worker);
        t_nap(0.01);
    }
    run_for(t_slow() ? 1.0 : 0.3, h, NS + 1);
    report("preempt: signals %s: SIGUSR1 %ld, own SIGURG %ld, the runtime's SIGURG %ld "
           "seen by the application (%ld own SIGURGs sent twice); ticker %ld ticks (max "
           "lateness %.2f ms), spinners switched %ld times\n", phase, atomic_load(&as.usr1),
           atomic_load(&as.urg_own), atomic_load(&as.urg_other), as.resent,
           atomic_load(&tk.ticks), t_ms(tk.max_late), total_switches(sp, NS));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(runtime_urg_expected || atomic_load(&as.urg_other) == 0, "%s: %ld of the "
                  "runtime's SIGURGs reached the application's handler: goro_start did not "
                  "put its own handler in front of it", phase, atomic_load(&as.urg_other));
    ck_assert_msg(as.resent <= 4 * rounds / 10 + 1, "%s: %ld of %d own SIGURGs had to be "
                  "sent again", phase, as.resent, 2 * rounds);
    check_taking_turns_mostly_in_place(sp, NS, phase);
    check_lateness(&tk, SLICE, phase);
}

static void app_handlers(struct sigaction *usr1, struct sigaction *urg)
{
    memset(usr1, 0, sizeof *usr1);
    memset(urg, 0, sizeof *urg);
    usr1->sa_sigaction = app_usr1;
    usr1->sa_flags = SA_SIGINFO | SA_RESTART;
    urg->sa_sigaction = app_urg;
    urg->sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
}

START_TEST(application_handlers_installed_after_start)
{
    if (!needs_async("application_handlers_installed_after_start"))
        return;
    int rounds = (int)t_scale(20);
    struct sigaction usr1, urg, old_usr1, old_vtalrm;
    app_handlers(&usr1, &urg);
    restart(1, SLICE);
    atomic_store(&as.chain, 1);
    ck_assert_int_eq(sigaction(SIGUSR1, &usr1, &old_usr1), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &usr1, &old_vtalrm), 0);
    ck_assert_int_eq(sigaction(SIGURG, &urg, &as.prev_urg), 0);
    signal_phase("installed after goro_start (SIGURG chained)", rounds, true);
    ck_assert_int_eq(sigaction(SIGURG, &as.prev_urg, NULL), 0);
    ck_assert_int_eq(sigaction(SIGUSR1, &old_usr1, NULL), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &old_vtalrm, NULL), 0);
    atomic_store(&as.chain, 0);
}
END_TEST

/* The runtime has run before in this process (so its handler was
 * installed once already); the application then installs its own
 * handlers and starts the runtime again. */
START_TEST(application_handlers_installed_before_start)
{
    if (!needs_async("application_handlers_installed_before_start"))
        return;
    int rounds = (int)t_scale(20);
    struct sigaction usr1, urg, old_usr1, old_urg, old_vtalrm;
    app_handlers(&usr1, &urg);
    restart(1, SLICE);
    ck_assert_int_eq(goro_shutdown(), 0);
    atomic_store(&as.chain, 0);
    ck_assert_int_eq(sigaction(SIGUSR1, &usr1, &old_usr1), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &usr1, &old_vtalrm), 0);
    ck_assert_int_eq(sigaction(SIGURG, &urg, &old_urg), 0);
    restart(1, SLICE);
    signal_phase("installed before goro_start", rounds, false);
    ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(sigaction(SIGURG, &old_urg, NULL), 0);
    ck_assert_int_eq(sigaction(SIGUSR1, &old_usr1, NULL), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &old_vtalrm, NULL), 0);
}
END_TEST

/* ---- EINTR never leaks out of a goro call ---- */

/* Coroutines doing I/O, sleeps, channel operations, locking, offloads and
 * joins next to preempted spinners (where preemption is asynchronous),
 * while a thread showers the workers and this thread with SIGURG (not the
 * runtime's: spurious to it) and SIGUSR1 (a handler without SA_RESTART, so
 * the kernel restarts nothing). */
static struct {
    atomic_int storm_stop;
    atomic_ulong targets[32];   /* pthread_t of threads to signal */
    atomic_int ntargets;
    atomic_long signals, usr1;
    atomic_long io, sleeps, chans, locks, offloads, joins, main_ops;
    int sv[2];
    goro_chan_t *ping, *pong, *never;
    goro_mutex_t mu;
    long guarded;
} ei;

static void ei_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&ei.usr1, 1);
}

static void ei_target_me(void)
{
    int i = atomic_fetch_add(&ei.ntargets, 1);
    if (i < 32)
        atomic_store(&ei.targets[i], (unsigned long)pthread_self());
    else
        atomic_fetch_sub(&ei.ntargets, 1);
}

/* False (and a note) if a goro call failed; -EINTR is named. */
static bool ei_ok(const char *what, long r)
{
    if (r >= 0)
        return true;
    if (r == -EINTR)
        t_fail("%s returned -EINTR", what);
    else
        t_fail("%s returned %ld", what, r);
    return false;
}

static bool ei_running(void)
{
    return !atomic_load_explicit(&pt.stop, memory_order_relaxed) && t_now() < pt.hard_end;
}

static void *ei_storm(void *arg)
{
    (void)arg;
    uint32_t r = 99;
    while (!atomic_load(&ei.storm_stop)) {
        int n = atomic_load(&ei.ntargets);
        int sig = t_rnd(&r) % 3 == 0 ? SIGUSR1 : SIGURG;
        if (n > 0 && t_rnd(&r) % 8 != 0)
            pthread_kill((pthread_t)atomic_load(&ei.targets[t_rnd(&r) % (uint32_t)n]), sig);
        else
            kill(getpid(), sig);
        atomic_fetch_add(&ei.signals, 1);
        /* 20-220 us apart (more where signals are slow to deliver), even
         * when the nap itself is interrupted */
        double gap = (double)(20 + t_rnd(&r) % 200) * 1e-6 * (double)slow_factor();
        double until = t_now() + gap;
        for (double now = t_now(); now < until; now = t_now())
            t_nap(until - now);
    }
    return NULL;
}

static uint8_t ei_byte(uint64_t i) { return (uint8_t)(i * 131 ^ i >> 9); }

static void ei_writer(void)
{
    ei_target_me();
    uint32_t r = 5;
    uint8_t buf[8192];
    uint64_t off = 0;
    while (ei_running()) {
        size_t len = 1 + t_rnd(&r) % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = ei_byte(off + i);
        ssize_t n = t_rnd(&r) % 2 ? goro_write(ei.sv[0], buf, len)
                                : goro_write_all(ei.sv[0], buf, len);
        if (!ei_ok("goro_write", n))
            break;
        off += (uint64_t)n;
    }
    ei_ok("goro_close", goro_close(ei.sv[0]));
}

static void ei_reader(void)
{
    ei_target_me();
    uint8_t buf[4096];
    uint64_t off = 0;
    for (;;) {
        ssize_t n = goro_read(ei.sv[1], buf, sizeof buf);
        if (n == 0 || !ei_ok("goro_read", n))
            break;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != ei_byte(off + (uint64_t)i)) {
                t_fail("socket stream corrupted at byte %lu", (unsigned long)(off + (uint64_t)i));
                goto out;
            }
        off += (uint64_t)n;
        atomic_fetch_add(&ei.io, 1);
    }
out:
    ei_ok("goro_close", goro_close(ei.sv[1]));
}

static void ei_sleeper(void)
{
    ei_target_me();
    uint32_t r = 7;
    while (ei_running()) {
        int64_t ns = (int64_t)(1 + t_rnd(&r) % 300) * GORO_USEC, t0 = goro_now();
        if (!ei_ok("goro_sleep", goro_sleep(ns)))
            break;
        if (goro_now() - t0 < ns) {
            t_fail("goro_sleep(%lld ns) returned early", (long long)ns);
            break;
        }
        atomic_fetch_add(&ei.sleeps, 1);
    }
}

static void ei_pinger(void)
{
    ei_target_me();
    for (long i = 0; ei_running(); i++) {
        long back = -1;
        if (!ei_ok("goro_chan_send", goro_chan_send(ei.ping, &i)) ||
            !ei_ok("goro_chan_recv", goro_chan_recv(ei.pong, &back)))
            break;
        if (back != i + 1) {
            t_fail("channel round trip %ld came back as %ld", i, back);
            break;
        }
        if (i % 16 == 0) {
            int e = goro_chan_recv_until(ei.never, NULL, goro_now() + 200 * GORO_USEC);
            if (e != -ETIMEDOUT) {
                t_fail("goro_chan_recv_until on an empty channel returned %d", e);
                break;
            }
        }
        atomic_fetch_add(&ei.chans, 1);
    }
    goro_chan_close(ei.ping);
}

static void ei_ponger(void)
{
    ei_target_me();
    long v;
    int e;
    while ((e = goro_chan_recv(ei.ping, &v)) == 1) {
        v++;
        if (!ei_ok("goro_chan_send", goro_chan_send(ei.pong, &v)))
            return;
    }
    ei_ok("goro_chan_recv", e);
}

static void ei_locker(long id)
{
    ei_target_me();
    while (ei_running()) {
        if (!ei_ok("goro_mutex_lock", goro_mutex_lock(&ei.mu)))
            break;
        ei.guarded++;
        if (id == 0)
            churn((uint64_t)ei.guarded);    /* held across preemptions */
        ei_ok("goro_mutex_unlock", goro_mutex_unlock(&ei.mu));
        atomic_fetch_add(&ei.locks, 1);
        goro_yield();
    }
}

static long ei_square(void *arg)
{
    long x = (long)(intptr_t)arg;
    return x * x;
}

static void ei_offloader(void)
{
    ei_target_me();
    for (long i = 1; ei_running(); i++) {
        long r = 0;
        if (!ei_ok("goro_offload", goro_offload(ei_square, (void *)(intptr_t)i, &r)))
            break;
        if (r != i * i) {
            t_fail("goro_offload: %ld squared is not %ld", i, r);
            break;
        }
        atomic_fetch_add(&ei.offloads, 1);
    }
}

static long ei_child(long x) { return x + 1; }

static void ei_joiner(void)
{
    ei_target_me();
    for (long i = 0; ei_running(); i++) {
        goro_t *c = go(ei_child, i);
        long r = -1;
        if (!c) {
            t_fail("go failed");
            break;
        }
        if (!ei_ok("goro_join", goro_join(c, &r)))
            break;
        atomic_fetch_add(&ei.joins, 1);
    }
}

/* This thread's part: waits of a thread the runtime does not own. Each
 * round must be quick: the spinners are preempted, whatever the signals. */
static void ei_main_thread(double run)
{
    double end = t_now() + run, worst = 0;
    for (long i = 0; t_now() < end; i++) {
        double t0 = t_now();
        goro_t *c = go(ei_child, i);
        ck_assert_ptr_nonnull(c);
        long r = -1;
        int e = goro_join(c, &r);
        ck_assert_msg(e == 0, "goro_join on the main thread returned %d", e);
        e = goro_sleep(100 * GORO_USEC);
        ck_assert_msg(e == 0, "goro_sleep on the main thread returned %d", e);
        atomic_fetch_add(&ei.main_ops, 1);
        worst = t_now() - t0 > worst ? t_now() - t0 : worst;
    }
    ck_assert_msg(worst < t_timeout(1), "a spawn, join and sleep on the main thread took "
                  "%.2f s amid the signals", worst);
}

START_TEST(eintr_never_leaks_out_of_goro_calls)
{
    double run = t_slow() ? 2.0 : 1.5;
    struct sigaction sa = { .sa_handler = ei_usr1 }, old;
    sigemptyset(&sa.sa_mask);           /* no SA_RESTART: nothing is restarted */
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, &old), 0);
    memset(&ei, 0, sizeof ei);
    restart_for(2, SLICE, 20);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ei.sv), 0);
    ck_assert_int_eq(goro_chan_new(&ei.ping, sizeof(long), 0), 0);
    ck_assert_int_eq(goro_chan_new(&ei.pong, sizeof(long), 0), 0);
    ck_assert_int_eq(goro_chan_new(&ei.never, 0, 0), 0);
    ck_assert_int_eq(goro_mutex_init(&ei.mu), 0);
    ei_target_me();                     /* this thread, in its waits */
    struct spinner sp[2] = { { .id = 1 }, { .id = 2 } };
    goro_t *h[13];
    int n = 0;
    /* without asynchronous preemption they would keep both workers */
    for (int i = 0; t_async_preemption() && i < 2; i++)
        ck_assert_ptr_nonnull(h[n++] = go(spinner, &sp[i]));
    ck_assert_ptr_nonnull(h[n++] = go(ei_reader));
    ck_assert_ptr_nonnull(h[n++] = go(ei_writer));
    ck_assert_ptr_nonnull(h[n++] = go(ei_sleeper));
    ck_assert_ptr_nonnull(h[n++] = go(ei_ponger));
    ck_assert_ptr_nonnull(h[n++] = go(ei_pinger));
    for (long i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(h[n++] = go(ei_locker, i));
    ck_assert_ptr_nonnull(h[n++] = go(ei_offloader));
    ck_assert_ptr_nonnull(h[n++] = go(ei_joiner));
    pthread_t storm;
    double t0 = t_now();
    ck_assert_int_eq(pthread_create(&storm, NULL, ei_storm, NULL), 0);
    ei_main_thread(run);
    atomic_store(&pt.stop, 1);
    atomic_store(&ei.storm_stop, 1);
    ck_assert_int_eq(pthread_join(storm, NULL), 0);
    run = t_now() - t0;
    join_all(h, n);
    report("preempt: %ld signals (%ld SIGUSR1 handled) during %.1f s of goro calls: %ld "
           "reads, %ld sleeps, %ld channel round trips, %ld locks, %ld offloads, %ld "
           "joins, %ld waits on the main thread\n", atomic_load(&ei.signals),
           atomic_load(&ei.usr1), run, atomic_load(&ei.io), atomic_load(&ei.sleeps),
           atomic_load(&ei.chans), atomic_load(&ei.locks), atomic_load(&ei.offloads),
           atomic_load(&ei.joins), atomic_load(&ei.main_ops));
    ck_assert_int_eq(sigaction(SIGUSR1, &old, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(ei.guarded, atomic_load(&ei.locks));
    ck_assert_int_eq(goro_mutex_destroy(&ei.mu), 0);
    ck_assert_int_eq(goro_chan_free(ei.ping), 0);
    ck_assert_int_eq(goro_chan_free(ei.pong), 0);
    ck_assert_int_eq(goro_chan_free(ei.never), 0);
    ck_assert_int_gt(atomic_load(&ei.signals), 100);
    ck_assert_int_gt(atomic_load(&ei.usr1), 0);
    atomic_long *counts[] = { &ei.io, &ei.sleeps, &ei.chans, &ei.locks, &ei.offloads,
                              &ei.joins, &ei.main_ops };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        ck_assert_msg(atomic_load(counts[i]) > 0, "operation kind %zu never completed", i);
}
END_TEST

/* ---- SIGURGs from elsewhere ---- */

/* Someone else's SIGURGs - the application's own, or out-of-band data on
 * a socket it owns - reach the worker while the runtime's requests do. A
 * standard signal that arrives while another is pending merges with it:
 * the runtime must not lose its requests for good when that happens. */
static struct {
    atomic_int stop;
    atomic_long sent;
    pthread_t worker;
} fu;

static void *foreign_urg(void *arg)
{
    (void)arg;
    while (!atomic_load(&fu.stop)) {
        pthread_kill(fu.worker, SIGURG);
        atomic_fetch_add(&fu.sent, 1);
        double until = t_now() + 20e-6 * (double)slow_factor();
        for (double now = t_now(); now < until; now = t_now())
            t_nap(until - now);
    }
    return NULL;
}

START_TEST(foreign_sigurgs_do_not_stop_preemption)
{
    if (!needs_async("foreign_sigurgs_do_not_stop_preemption"))
        return;
    enum { NS = 2 };
    double run = t_slow() ? 3.0 : 1.0;
    restart_for(1, SLICE, 10);
    fu.worker = the_worker();
    atomic_store(&fu.stop, 0);
    atomic_store(&fu.sent, 0);
    struct ticker tk;
    struct spinner sp[NS];
    goro_t *h[NS + 1];
    go_ticker_and_spinners(&tk, sp, NS, h);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, foreign_urg, NULL), 0);
    t_nap(run);
    atomic_store(&pt.stop, 1);
    atomic_store(&fu.stop, 1);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    join_all(h, NS + 1);
    report("preempt: %ld foreign SIGURGs to the worker in %.1f s: ticker %ld ticks, lateness "
           "mean %.2f ms, max %.2f ms; spinners switched %ld times\n", atomic_load(&fu.sent),
           run, atomic_load(&tk.ticks), mean_late(&tk) / 1e6, t_ms(tk.max_late),
           total_switches(sp, NS));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    check_taking_turns_mostly_in_place(sp, NS, "next to foreign SIGURGs");
    check_lateness(&tk, SLICE, "next to foreign SIGURGs");
}
END_TEST

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
    ck_assert_msg(ok >= 32, "only %d ranges could be marked (the API promises 32)", ok);
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

Suite *preempt_suite(void)
{
    Suite *s = suite_create("preempt");
    TCase *tc = t_tcase(s, "preempt", 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, spinners_do_not_stop_a_ticker);
    tcase_add_test(tc, preempted_coroutine_stays_on_its_thread);
    tcase_add_test(tc, fp_and_simd_state_survives_preemption);
    tcase_add_test(tc, every_register_survives_preemption);
    tcase_add_test(tc, libc_calls_under_preemption_never_deadlock);
    tcase_add_test(tc, goro_calls_yield_when_preemption_was_asked);
    tcase_add_test(tc, no_preempt_section_holds_the_worker);
    tcase_add_test(tc, negative_slice_never_preempts);
    tcase_add_test(tc, application_handlers_installed_after_start);
    tcase_add_test(tc, application_handlers_installed_before_start);
    tcase_add_test(tc, eintr_never_leaks_out_of_goro_calls);
    tcase_add_test(tc, foreign_sigurgs_do_not_stop_preemption);
    tcase_add_test(tc, blocked_worker_does_not_stop_the_others);
    tcase_add_test(tc, blocking_call_hands_the_worker_over);
    tcase_add_test(tc, slices_end_within_the_documented_bound);
    /* last: it fills the table of marked ranges for the rest of the process */
    tcase_add_test(tc, preempt_allow_marks_code_preemptible);
    return s;
}
