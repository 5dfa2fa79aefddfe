/* Registers across preemption: auto-vectorised FP and integer SIMD, and
 * every register, from assembly, survive thousands of preemptions bit for
 * bit.
 *
 * Part of the preempt suite (test_preempt.c registers it). Coroutines
 * never call ck_assert (see helpers.h). */
#include "test_preempt.h"

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

/* Adds this file's tests to the preempt test case (test_preempt.h). */
void preempt_regs_tests(TCase *tc)
{
    tcase_add_test(tc, fp_and_simd_state_survives_preemption);
    tcase_add_test(tc, every_register_survives_preemption);
}
