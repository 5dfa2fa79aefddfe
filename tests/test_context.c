/* What a switch must preserve: callee-saved registers, the FP control state
 * (rounding mode, x87 control word, MXCSR), FP locals at -O2, and errno,
 * with coroutines moving between worker threads (t_hop, served by the test's
 * main thread). */
#define _GNU_SOURCE
#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "suites.h"

static void yield_twice(void)
{
    goro_yield();
    goro_yield();
}

/* Parks on a child of this worker: a park and a wake-up, no move. */
static void spawn_join_child(void)
{
    goro_t *h = go(yield_twice);
    if (!h || goro_join(h, NULL) != 0)
        t_fail("child spawn/join failed");
}

/* goro_test_regs_across() calls its function with the stack 8 bytes off
 * the ABI's 16-byte alignment (tests/arch/x86_64/regs.S pushes 7 words and
 * subtracts 8 more: see regs_helper_keeps_stack_aligned). Until it is
 * fixed, the functions it calls realign the stack themselves, or any
 * aligned SSE spill in them (or below) faults. */
#if defined(__x86_64__)
#define T_REALIGN __attribute__((force_align_arg_pointer))
#else
#define T_REALIGN
#endif

static T_REALIGN void rx_yield(void) { goro_yield(); }
static T_REALIGN void rx_yield_twice(void) { yield_twice(); }
static T_REALIGN void rx_spawn_join_child(void) { spawn_join_child(); }
static T_REALIGN void rx_hop(void) { t_hop(); }

/* The kind of switch for round i of n: mostly yields, a park on a local
 * child every 8th, and about 16 hops over the n rounds (a hop costs a
 * round trip through the main thread; about half of them move). */
static void (*switch_kind(long i, long n))(void)
{
    long period = n / 16 + 1;
    if (i % period == period / 2)
        return rx_hop;
    if (i % 8 == 7)
        return rx_spawn_join_child;
    return i % 2 ? rx_yield_twice : rx_yield;
}

static void switch_point(long i, long n)
{
    switch_kind(i, n)();
}

/* Coroutines bump it when they finish; the main thread serves hops until
 * all have (t_serve_hops), then joins them. */
static atomic_long finished;

static void start_round(void)
{
    atomic_store(&finished, 0);
    t_hops_reset();
}

/* A new round: body(&jobs[i]) in coroutine h[i], for i < k. */
#define GO_ROUND(h, k, body, jobs) do {                                    \
        start_round();                                                      \
        for (int i_ = 0; i_ < (k); i_++)                                    \
            ck_assert_ptr_nonnull((h)[i_] = go(body, &(jobs)[i_]));          \
    } while (0)

/* Serves hops until k coroutines finished, joins them, checks that some
 * coroutine did change threads (the fixture gives >= 2 workers). */
static void finish_round(goro_t **h, int k)
{
    ck_assert_int_eq(t_serve_hops(&finished, k, t_timeout(30)), k);
    for (int i = 0; i < k; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(t_hops_moved() > 0, "no coroutine changed threads (%ld hops)",
                  t_hops_total());
}

/* ---- callee-saved registers ---- */

static atomic_long steps;            /* bumped by every coroutine, every round */

struct regs_job {
    uint64_t seed;
    long iters;
    uint64_t bad;                    /* OR of the masks goro_test_regs_across returned */
    long interleaved;                /* rounds in which somebody else ran */
};

static void regs_body(struct regs_job *job)
{
    for (long i = 0; i < job->iters; i++) {
        long before = atomic_fetch_add(&steps, 1) + 1;
        uint64_t seed = job->seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ULL);
        uint64_t mask = goro_test_regs_across(switch_kind(i, job->iters), seed);
        if (mask && !job->bad)
            t_fail("seed %#llx round %ld: registers changed, mask %#llx",
                   (unsigned long long)job->seed, i, (unsigned long long)mask);
        job->bad |= mask;
        job->interleaved += atomic_load(&steps) != before;
    }
    atomic_fetch_add(&finished, 1);
}

START_TEST(callee_saved_registers_survive_switches)
{
    enum { K = 8 };
    struct regs_job jobs[K];
    goro_t *h[K];
    long iters = t_scale(4000);
    atomic_store(&steps, 0);
    for (int k = 0; k < K; k++)
        jobs[k] = (struct regs_job){
            .seed = 0x5a5a000000000000ULL + (uint64_t)k * 0x0011223344556677ULL,
            .iters = iters,
        };
    GO_ROUND(h, K, regs_body, jobs);
    finish_round(h, K);
    long interleaved = 0;
    for (int k = 0; k < K; k++) {
        ck_assert_msg(jobs[k].bad == 0, "coroutine %d: mask %#llx", k,
                      (unsigned long long)jobs[k].bad);
        interleaved += jobs[k].interleaved;
    }
    /* The helper really ran across switches to other coroutines: in a
     * quarter of one coroutine's rounds at least (8 share 2 workers; under
     * TSan, whose switches are slow, 3167 of 32,000 rounds were seen). */
    ck_assert_int_gt(interleaved, iters / 4);
}
END_TEST

/* The helper itself must call fn as the ABI says: with the stack 16-byte
 * aligned at the call, so that fn's frame address (x86-64: rbp after the
 * push; aarch64: x29) is 16-byte aligned. */
static uintptr_t seen_frame;
static T_NOINLINE void record_frame(void)
{
    seen_frame = (uintptr_t)__builtin_frame_address(0);
}

static long frame_alignment_in_coroutine(void)
{
    uint64_t mask = goro_test_regs_across(record_frame, 0x1234);
    return mask ? -1 : (long)(seen_frame & 15);
}

START_TEST(regs_helper_keeps_stack_aligned)
{
    ck_assert_uint_eq(goro_test_regs_across(record_frame, 0x4321), 0);
    ck_assert_msg((seen_frame & 15) == 0, "goro_test_regs_across called fn with a "
                  "misaligned stack (frame address %#lx)", (unsigned long)seen_frame);
    long r = -2;
    ck_assert_int_eq(goro_join(go(frame_alignment_in_coroutine), &r), 0);
    ck_assert_int_eq(r, 0);
}
END_TEST

/* ---- FP control state ---- */

/* A signature of the current rounding: float narrowing, lrint (both honoured
 * by valgrind too) and an SSE/NEON division. */
static T_NOINLINE uint64_t rounding_signature(void)
{
    volatile double third = 1.0 / 3.0, two_half = 2.5, neg = -2.5;
    volatile double one = 1.0, seven = 7.0;
    float f = (float)third;
    uint32_t fb;
    memcpy(&fb, &f, sizeof fb);
    double q = one / seven;
    uint64_t qb;
    memcpy(&qb, &q, sizeof qb);
    uint64_t a = (uint64_t)lrint(two_half) & 0xff, b = (uint64_t)lrint(neg) & 0xff;
    return ((uint64_t)fb | a << 32 | b << 40) ^ (qb << 48) ^ (qb & 0xffff) << 16;
}

struct round_job {
    int mode;
    long iters;
    uint64_t signature;              /* taken after fesetround, before yielding */
    long bad_mode, bad_signature;
};

static void rounding_body(struct round_job *job)
{
    if (fesetround(job->mode) != 0) {
        t_fail("fesetround(%d) failed", job->mode);
        atomic_fetch_add(&finished, 1);
        return;
    }
    job->signature = rounding_signature();
    for (long i = 0; i < job->iters; i++) {
        switch_point(i, job->iters);
        job->bad_mode += fegetround() != job->mode;
        job->bad_signature += rounding_signature() != job->signature;
    }
    atomic_fetch_add(&finished, 1);
}

static long default_rounding_inside(void)
{
    return fegetround();
}

START_TEST(rounding_mode_is_per_coroutine)
{
    enum { K = 6 };
    const int modes[K] = { FE_TOWARDZERO, FE_UPWARD, FE_TONEAREST,
                           FE_DOWNWARD, FE_TOWARDZERO, FE_UPWARD };
    struct round_job jobs[K];
    goro_t *h[K];
    long iters = t_scale(3000);
    for (int k = 0; k < K; k++)
        jobs[k] = (struct round_job){ .mode = modes[k], .iters = iters };
    GO_ROUND(h, K, rounding_body, jobs);
    finish_round(h, K);
    for (int k = 0; k < K; k++) {
        ck_assert_msg(jobs[k].bad_mode == 0, "coroutine %d (mode %#x): fegetround "
                      "differed after %ld of %ld switches", k, modes[k],
                      jobs[k].bad_mode, iters);
        ck_assert_msg(jobs[k].bad_signature == 0, "coroutine %d (mode %#x): rounding "
                      "behaviour differed after %ld of %ld switches", k, modes[k],
                      jobs[k].bad_signature, iters);
    }
    /* the modes really differ (else this test could not fail) */
    ck_assert_uint_ne(jobs[0].signature, jobs[1].signature);
    ck_assert_uint_ne(jobs[1].signature, jobs[2].signature);
    ck_assert_uint_ne(jobs[0].signature, jobs[2].signature);
    /* nothing leaked to the main thread or into new coroutines */
    ck_assert_int_eq(fegetround(), FE_TONEAREST);
    for (int i = 0; i < 8; i++) {
        long r = -1;
        ck_assert_int_eq(goro_join(go(default_rounding_inside), &r), 0);
        ck_assert_int_eq(r, FE_TONEAREST);
    }
}
END_TEST

#ifdef __x86_64__
/* A getter and a setter of a control register, through memory. */
#define CONTROL_REG(type, get, set, store, load)                            \
    static inline type get(void)                                            \
    {                                                                       \
        type v;                                                             \
        __asm__ volatile(store " %0" : "=m"(v));                            \
        return v;                                                           \
    }                                                                       \
    static inline void set(type v) { __asm__ volatile(load " %0" : : "m"(v)); }

CONTROL_REG(uint16_t, x87_cw, x87_set_cw, "fnstcw", "fldcw")
CONTROL_REG(uint32_t, mxcsr, mxcsr_set, "stmxcsr", "ldmxcsr")

#define X87_PC_MASK 0x0300u
#define MXCSR_FTZ 0x8000u
#define MXCSR_DAZ 0x0040u
#define MXCSR_CONTROL 0xffc0u            /* everything but the sticky flags */

struct cw_job {
    uint16_t pc;                         /* x87 precision control bits */
    uint32_t mx;                         /* extra MXCSR control bits */
    long iters, bad_cw, bad_mx;
};

static void control_word_body(struct cw_job *job)
{
    x87_set_cw((uint16_t)((x87_cw() & ~X87_PC_MASK) | job->pc));
    mxcsr_set(mxcsr() | job->mx);
    uint32_t want_mx = mxcsr() & MXCSR_CONTROL;
    for (long i = 0; i < job->iters; i++) {
        switch_point(i, job->iters);
        job->bad_cw += (x87_cw() & X87_PC_MASK) != job->pc;
        job->bad_mx += (mxcsr() & MXCSR_CONTROL) != want_mx;
    }
    atomic_fetch_add(&finished, 1);
}

static long cw_of_new_coroutine(void)
{
    return (long)x87_cw() << 32 | (mxcsr() & MXCSR_CONTROL);
}
#endif

START_TEST(x87_control_word_and_mxcsr_are_per_coroutine)
{
#ifndef __x86_64__
    t_skip("x87_control_word_and_mxcsr_are_per_coroutine", "x86-64 only");
#else
    if (t_valgrind()) {
        /* valgrind models neither x87 precision control nor FTZ/DAZ */
        t_skip("x87_control_word_and_mxcsr_are_per_coroutine", "valgrind");
        return;
    }
    enum { K = 6 };
    const uint16_t pcs[K] = { 0x000, 0x200, 0x300, 0x000, 0x200, 0x300 };
    const uint32_t mxs[K] = { MXCSR_FTZ | MXCSR_DAZ, 0, MXCSR_FTZ, 0, MXCSR_DAZ, 0 };
    struct cw_job jobs[K];
    goro_t *h[K];
    long iters = t_scale(3000);
    for (int k = 0; k < K; k++)
        jobs[k] = (struct cw_job){ .pc = pcs[k], .mx = mxs[k], .iters = iters };
    GO_ROUND(h, K, control_word_body, jobs);
    finish_round(h, K);
    for (int k = 0; k < K; k++) {
        ck_assert_msg(jobs[k].bad_cw == 0, "coroutine %d: x87 precision bits "
                      "changed after %ld switches", k, jobs[k].bad_cw);
        ck_assert_msg(jobs[k].bad_mx == 0, "coroutine %d: MXCSR control bits "
                      "changed after %ld switches", k, jobs[k].bad_mx);
    }
    /* a new coroutine starts with the ABI defaults */
    long r = 0;
    ck_assert_int_eq(goro_join(go(cw_of_new_coroutine), &r), 0);
    ck_assert_int_eq(r, (long)0x037f << 32 | 0x1f80);
#endif
}
END_TEST

/* ---- FP-heavy code across switches ---- */

/* Twelve accumulators live across every call to goro_yield(): at -O2 on
 * aarch64 eight of them sit in d8-d15, on x86-64 they are spilled. Outside
 * a coroutine goro_yield() returns at once, so the main thread computes the
 * same thing with the same code. */
static T_NOINLINE void fp_series(long n, double seed, double out[12])
{
    double a0 = seed, a1 = seed * 0.5, a2 = seed * 0.25, a3 = 1.0 - seed;
    double a4 = 0, a5 = 1, a6 = -seed, a7 = seed * seed;
    double a8 = 0.125, a9 = 3.0, a10 = seed / 3, a11 = 1e-3;
    for (long i = 1; i <= n; i++) {
        double x = (double)i + seed;
        double r = 1.0 / x;
        a0 += r;
        a1 += r * r;
        a2 += r * a0;
        a3 -= a1 * 1e-3;
        a4 += (i & 1) ? r : -r;
        a5 *= 1.0 + r * 1e-3;
        a6 += a5 * r - a4;
        a7 = a7 * 0.999 + r;
        a8 += a2 * a3 * 1e-6;
        a9 = a9 * 0.5 + a7 * 0.25 + a0 * 1e-4;
        a10 += a6 * a8 * 1e-9 - r * a11;
        a11 = a11 * 0.99 + a9 * 1e-5;
        if (i % 4 == 0)
            switch_point(i / 4, n / 4);
    }
    double res[12] = { a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 };
    memcpy(out, res, sizeof res);
}

struct fp_job {
    long n;
    double seed;
    double out[12];
};

static void fp_body(struct fp_job *job)
{
    fp_series(job->n, job->seed, job->out);
    atomic_fetch_add(&finished, 1);
}

START_TEST(fp_locals_survive_switches)
{
    enum { K = 8 };
    struct fp_job jobs[K];
    goro_t *h[K];
    long n = t_scale(50000);
    for (int k = 0; k < K; k++)
        jobs[k] = (struct fp_job){ .n = n, .seed = 0.5 + k * 0.37 };
    GO_ROUND(h, K, fp_body, jobs);
    finish_round(h, K);
    for (int k = 0; k < K; k++) {
        double want[12];
        fp_series(n, jobs[k].seed, want);
        for (int j = 0; j < 12; j++)
            ck_assert_msg(memcmp(&want[j], &jobs[k].out[j], sizeof(double)) == 0,
                          "coroutine %d accumulator %d: %.17g, want %.17g", k, j,
                          jobs[k].out[j], want[j]);
    }
    /* different seeds give different results (the comparison is not vacuous) */
    ck_assert_msg(memcmp(jobs[0].out, jobs[1].out, sizeof jobs[0].out) != 0,
                  "seeds gave identical results");
}
END_TEST

/* ---- errno ---- */

struct errno_job {
    int base;
    long iters, bad;
    int first_bad_got, first_bad_want;
};

static void errno_body(struct errno_job *job)
{
    int want = job->base;
    t_set_errno(want);
    for (long i = 0; i < job->iters; i++) {
        switch_point(i, job->iters);
        int got = t_errno();
        if (got != want && job->bad++ == 0) {
            job->first_bad_got = got;
            job->first_bad_want = want;
        }
        want = job->base + (int)(i % 13);
        t_set_errno(want);
    }
    atomic_fetch_add(&finished, 1);
}

START_TEST(errno_is_per_coroutine)
{
    enum { K = 8 };
    struct errno_job jobs[K];
    goro_t *h[K];
    long iters = t_scale(5000);
    ck_assert_int_ge(goro_workers(), 2);
    for (int k = 0; k < K; k++)
        jobs[k] = (struct errno_job){ .base = 1000 * (k + 1), .iters = iters };
    GO_ROUND(h, K, errno_body, jobs);
    t_set_errno(77);
    finish_round(h, K);
    ck_assert_int_eq(t_errno(), 77);     /* serving and joining kept ours */
    for (int k = 0; k < K; k++)
        ck_assert_msg(jobs[k].bad == 0, "coroutine %d: errno wrong after %ld of %ld "
                      "switches (first: %d, want %d)", k, jobs[k].bad, iters,
                      jobs[k].first_bad_got, jobs[k].first_bad_want);
}
END_TEST

Suite *context_suite(void)
{
    Suite *s = suite_create("context");
    TCase *tc = t_runtime_tcase(s, "switch", 30);
    tcase_add_test(tc, regs_helper_keeps_stack_aligned);
    tcase_add_test(tc, callee_saved_registers_survive_switches);
    tcase_add_test(tc, rounding_mode_is_per_coroutine);
    tcase_add_test(tc, x87_control_word_and_mxcsr_are_per_coroutine);
    tcase_add_test(tc, fp_locals_survive_switches);
    tcase_add_test(tc, errno_is_per_coroutine);
    return s;
}
