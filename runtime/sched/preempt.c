/*
 * Asynchronous preemption: the SIGURG handler, and what counts as a safe
 * point.
 *
 * sysmon (sysmon.c) asks for a preemption by setting the P's preempt_req to
 * its current slice and signalling the worker. The handler, on the
 * worker's alternate signal stack, suspends the coroutine only if all of
 * this holds; otherwise the request stays, and the coroutine yields at its
 * next goro call (goro__preempt_check):
 *   - the request is for the slice running now (not a stale one);
 *   - the coroutine is not in a no-preempt section, and its thread holds
 *     no lock of the runtime (base/lock.h);
 *   - the interrupted instruction is in code known to take no locks of
 *     its own: the executable's text when libc is a shared library (in a
 *     static executable libc is inside it, so only marked code counts), or
 *     code marked with GORO_PREEMPTIBLE / goro_preempt_allow - and never
 *     goro's own code (the goro_text section: the build renames .text),
 *     nor the executable's PLT, whose stubs goro's calls go through too
 *     when goro is linked into the executable;
 *     The executable counts only if neither the allocator nor the C++
 *     runtime is part of it either (add_executable);
 *   - the stack has room for the copied frame.
 * Then the kernel's signal frame is copied onto the coroutine stack and the
 * handler returns into goro__preempt_resume (arch/<arch>/preempt.S), which
 * yields; rt_sigreturn on the copy restores everything. The coroutine is
 * pinned to this worker until its next cooperative switch, because compiled
 * code may hold thread-local addresses in registers, and because the frame
 * restores this thread's signal stack settings.
 *
 * The same handler answers sysmon's stall samples (debug/stall.c): before
 * anything else it records where the coroutine is and, after, why it would
 * not be preempted there.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <valgrind/valgrind.h>

#include "internal.h"
#include "sched/sched.h"
#include "sched/deadline.h"
#include "coro/cxx_eh.h"
#include "base/sanitizer.h"
#include "debug/debug.h"
#include "sigframe.h"

void goro__preempt_resume(void);

/* goro's code, whatever module it is linked into (see Makefile). */
extern const char __start_goro_text[] __attribute__((weak, visibility("hidden")));
extern const char __stop_goro_text[] __attribute__((weak, visibility("hidden")));
/* Code the program marked with GORO_PREEMPTIBLE. */
extern const char __start_goro_preemptible[] __attribute__((weak));
extern const char __stop_goro_preemptible[] __attribute__((weak));

/* The program's goro_preempt_allow ranges (32, as goro.h says), the
 * executable's code segments and the goro_preemptible section: each
 * kind has room of its own, so the program's never take the others'. */
#define MAX_ALLOWED 32
#define MAX_EXEC_SEGS 8
#define MAX_RANGES (MAX_ALLOWED + MAX_EXEC_SEGS + 1)
struct code_range { uintptr_t lo, hi; };
static struct code_range ranges[MAX_RANGES];
static _Atomic int nranges;        /* entries below are complete */
static int nallowed;               /* the program's, under ranges_lock */
static goro_lock_t ranges_lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF);
static struct sigaction app_action;  /* what the program had for SIGURG */
static bool async_enabled;
#define GORO_URG_TAG 0x676f726f     /* si_value of our SIGURGs */

/* allowed: a range of the program's (goro_preempt_allow). */
static int add_range(uintptr_t lo, uintptr_t hi, bool allowed)
{
    if (lo >= hi)
        return -EINVAL;
    goro__lock(&ranges_lock);
    int n = atomic_load_explicit(&nranges, memory_order_relaxed);
    int err = allowed && nallowed == MAX_ALLOWED ? -ENOSPC : 0;
    /* the runtime's own: at most MAX_EXEC_SEGS + 1 of them, once */
    GORO_ASSERT(err || n < MAX_RANGES);
    if (!err) {
        ranges[n] = (struct code_range){ lo, hi };
        nallowed += allowed;
        atomic_store_explicit(&nranges, n + 1, memory_order_release);
    }
    goro__unlock(&ranges_lock);
    return err;
}

int goro_preempt_allow(const void *start, const void *end)
{
    if (!start || !end)
        return -EINVAL;
    return add_range((uintptr_t)start, (uintptr_t)end, true);
}

/* Why the executable's own code is not a safe point although the program
 * is dynamically linked, or NULL (it is). Set once, at the first install. */
static const char *exec_unsafe;
static uintptr_t exec_lo, exec_hi;  /* the executable's code, then */
static bool exec_scanned;           /* under goro_start's lock */
/* The executable's PLT sections: written before its segments are
 * published (add_range's release store), read by the handler after. */
#define MAX_PLT 4
static struct code_range plt[MAX_PLT];
static int nplt;

/* Whether at, the address the program uses for the function `name`, is
 * the function's own code in [lo, hi). A non-PIE executable that takes
 * the address of a function from a shared library gets a stub in its
 * PLT for it, and exports the name as an undefined symbol whose value is
 * the stub, so that every module agrees on the pointer: dlsym returns
 * that stub, and dladdr names it, but the symbol says it is undefined. */
static bool code_in(const char *name, uintptr_t at, uintptr_t lo, uintptr_t hi)
{
    if (!at || at < lo || at >= hi)
        return false;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1((void *)at, &info, (void **)&sym, RTLD_DL_SYMENT) && sym &&
        (uintptr_t)info.dli_saddr == at)
        return sym->st_shndx != SHN_UNDEF;
    /* Not exported at all: a definition the executable keeps to itself
     * (-static-libstdc++ without -rdynamic: the address goro/cxx.h
     * registered), unless it is the stub the loader hands out for the
     * name. (From defined_in, at is what dlsym returned: never so.) */
    return (uintptr_t)dlsym(RTLD_DEFAULT, name) != at;
}

static bool defined_in(const char *name, uintptr_t lo, uintptr_t hi)
{
    return code_in(name, (uintptr_t)dlsym(RTLD_DEFAULT, name), lo, hi);
}

/* Whether the program's C++ runtime (found by coro/cxx.c, or registered by
 * goro/cxx.h) is in [lo, hi): with -static-libstdc++ the executable does
 * not export it, so dlsym would not see it. */
static bool cxx_in(uintptr_t lo, uintptr_t hi)
{
    return code_in("__cxa_get_globals", (uintptr_t)goro__cxx_runtime(), lo, hi) ||
           defined_in("__cxa_get_globals", lo, hi);
}

/* The executable's code segments, as the loader reports them. */
struct exec_code {
    uintptr_t bias;                 /* where it is loaded */
    bool dynamic;                   /* it has an interpreter: libc is not in it */
    int n;                          /* segments seen; the first MAX_EXEC_SEGS kept */
    struct code_range seg[MAX_EXEC_SEGS];
    uintptr_t lo, hi;               /* all of them */
};

/* dl_iterate_phdr's callback runs under the loader's lock: it only
 * copies; the lookups (dlsym, dladdr) come after it returned. */
static int read_executable(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct exec_code *x = arg;
    x->bias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_INTERP)
            x->dynamic = true;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t a = info->dlpi_addr + ph->p_vaddr;
            if (x->n < MAX_EXEC_SEGS)
                x->seg[x->n] = (struct code_range){ a, a + ph->p_memsz };
            x->n++;
            x->lo = a < x->lo ? a : x->lo;
            x->hi = a + ph->p_memsz > x->hi ? a + ph->p_memsz : x->hi;
        }
    }
    return 1;                       /* the first module is the executable */
}

static bool read_all(int fd, void *buf, size_t len, off_t at)
{
    return len <= SSIZE_MAX && pread(fd, buf, len, at) == (ssize_t)len;
}

/* Whether a section of this name holds PLT stubs: ".plt", ".plt.sec"
 * (with IBT), ".plt.got", ".iplt". */
static bool plt_name(const char *name)
{
    return strncmp(name, ".plt", 4) == 0 || strcmp(name, ".iplt") == 0;
}

/* Finds the executable's PLT sections in its file (section headers are
 * not loaded): true if it could read them (there may be none). */
static bool find_plt(uintptr_t bias)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ElfW(Ehdr) eh;
    ElfW(Shdr) *sh = NULL;
    char *names = NULL;
    /* The file must be the program the loader mapped: run as `ld.so
     * ./prog`, /proc/self/exe is the loader. */
    bool ok = read_all(fd, &eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
              bias + eh.e_entry == getauxval(AT_ENTRY) && eh.e_shentsize == sizeof *sh &&
              eh.e_shnum > 0 && eh.e_shstrndx < eh.e_shnum &&
              (sh = calloc(eh.e_shnum, sizeof *sh)) &&
              read_all(fd, sh, (size_t)eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff);
    const ElfW(Shdr) *strs = ok ? &sh[eh.e_shstrndx] : NULL;
    ok = ok && strs->sh_type == SHT_STRTAB && strs->sh_size > 0 && strs->sh_size < (1u << 24) &&
         (names = malloc(strs->sh_size + 1)) &&
         read_all(fd, names, strs->sh_size, (off_t)strs->sh_offset);
    if (ok)
        names[strs->sh_size] = '\0';
    for (int i = 0; ok && i < eh.e_shnum; i++) {
        if (!(sh[i].sh_flags & SHF_EXECINSTR) || sh[i].sh_name >= strs->sh_size)
            continue;
        if (!plt_name(names + sh[i].sh_name))
            continue;
        if (nplt == MAX_PLT)
            ok = false;
        else
            plt[nplt++] = (struct code_range){ bias + sh[i].sh_addr,
                                               bias + sh[i].sh_addr + sh[i].sh_size };
    }
    free(names);
    free(sh);
    close(fd);
    return ok;
}

static bool in_plt(uintptr_t pc)
{
    for (int i = 0; i < nplt; i++)
        if (pc >= plt[i].lo && pc < plt[i].hi)
            return true;
    return false;
}

/* The executable's own code, if no runtime that takes locks or keeps
 * per-thread caches is part of it. libc is not when the program has an
 * interpreter (it has shared libraries). Nor may its allocator be - a
 * sanitizer's runtime, which clang links in, or a static malloc - nor the
 * C++ runtime (-static-libstdc++): a coroutine suspended inside malloc,
 * and another on the same thread calling it, would corrupt the thread's
 * allocator cache or wait forever for a lock the first holds. */
static void add_executable(void)
{
    struct exec_code x = { .dynamic = false, .lo = UINTPTR_MAX };
    dl_iterate_phdr(read_executable, &x);
    if (!x.dynamic || !x.n)
        return;                     /* static: libc is in it */
    uintptr_t lo = x.lo, hi = x.hi;
    exec_lo = lo;
    exec_hi = hi;
    if (x.n > MAX_EXEC_SEGS)
        exec_unsafe = "the executable has more code segments than goro keeps: only code "
                      "marked GORO_PREEMPTIBLE is preempted";
    else if (defined_in("malloc", lo, hi) || defined_in("free", lo, hi))
        exec_unsafe = "the executable holds its own allocator (a sanitizer's runtime or a "
                      "static malloc): only code marked GORO_PREEMPTIBLE is preempted";
    else if (cxx_in(lo, hi))
        exec_unsafe = "the executable holds its own C++ runtime (-static-libstdc++): only "
                      "code marked GORO_PREEMPTIBLE is preempted";
    else if (!find_plt(x.bias))
        exec_unsafe = "goro could not find the executable's PLT in /proc/self/exe (no "
                      "section headers, /proc not mounted, or run through ld.so): only code "
                      "marked GORO_PREEMPTIBLE is preempted";
    if (exec_unsafe)
        return;
    for (int i = 0; i < x.n; i++)
        add_range(x.seg[i].lo, x.seg[i].hi, false);
}

const char *goro__preempt_unsafe_exec(uintptr_t pc)
{
    return exec_unsafe && pc >= exec_lo && pc < exec_hi ? exec_unsafe : NULL;
}

static bool in_goro(uintptr_t pc)
{
    return __start_goro_text && pc >= (uintptr_t)__start_goro_text &&
           pc < (uintptr_t)__stop_goro_text;
}

static bool pc_preemptible(uintptr_t pc)
{
    if (in_goro(pc) || in_plt(pc))
        return false;
    int n = atomic_load_explicit(&nranges, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (pc >= ranges[i].lo && pc < ranges[i].hi)
            return true;
    return false;
}

/* A copy the sanitizers do not intercept: it writes below the interrupted
 * stack pointer, on purpose. */
__attribute__((no_sanitize_address))
static void frame_copy(void *dst, const void *src, size_t n)
{
    volatile unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

/* Room to leave below the copy: the yield's own frames. */
#define PREEMPT_STACK_MARGIN (8 * 1024)

/* Whether g, stopped at pc by the signal, may be suspended there; else
 * why not (goro_stall_why_t). in_rt: not in the middle of a switch or
 * any P-using runtime code, whatever the section its instructions ended
 * up in. */
static int decline_reason(struct goro_m *m, struct goro *g, uintptr_t pc)
{
    if (!async_enabled)
        return GORO_STALL_ASYNC_OFF;
    if (atomic_load_explicit(&g->nopreempt, memory_order_relaxed) != 0)
        return GORO_STALL_NOPREEMPT;
    if (atomic_load_explicit(&m->in_rt, memory_order_relaxed) != 0 || in_goro(pc) ||
        goro__locks_held != 0)
        return GORO_STALL_RUNTIME;
    return pc_preemptible(pc) ? GORO_STALL_PREEMPTIBLE : GORO_STALL_FOREIGN;
}

/* Named goro__ though static: without debug information, gdb's extension
 * tells the runtime's frames from the program's by that prefix. */
__attribute__((no_sanitize_address))
static void goro__on_sigurg(int sig, siginfo_t *si, void *ucv)
{
    int saved_errno = errno;
    bool budget = si->si_code == SI_TIMER && si->si_value.sival_int == GORO_URG_BUDGET_TAG;
    bool ours = budget || (si->si_code == SI_QUEUE && si->si_value.sival_int == GORO_URG_TAG);
    struct goro_m *m = goro__m();
    /* SIGURG is a standard signal: one of ours sent while another is
     * pending merges into it, and only the other's siginfo arrives. So on
     * a worker every SIGURG also serves a request of ours, if there is one
     * (goro__preempt_requested says), and one that is not tagged as ours
     * also goes to the program's handler. */
    if (!ours)
        goro__sig_chain(&app_action, sig, si, ucv);   /* SIGURG's default: ignored */
    if (!m) {
        errno = saved_errno;
        return;
    }
    atomic_store_explicit(&m->signal_pending, 0, memory_order_relaxed);
    ucontext_t *uc = ucv;
    struct goro *g = m->curg;
    if (g && (g->flags & GORO_F_G0))
        g = NULL;
    /* sysmon's stall report (debug/stall.c) wants to know where g is:
     * sampled before a preemption rewrites uc. */
    bool sample = goro__stall_asked(m);
    if (sample)
        goro__stall_sample(m, g, uc);
    int why = g ? decline_reason(m, g, goro__sigframe_pc(uc)) : GORO_STALL_RUNTIME;
    struct goro_p *p = m->p;
    bool owned = p && atomic_load_explicit(&p->owner, memory_order_relaxed) == m;
    /* Its P was handed off while g ran on: every signal of ours asks g to
     * stop (handoff.c, goro__stop_lost). */
    bool lost = !owned && atomic_load_explicit(&m->lost_p_at, memory_order_relaxed);
    /* The backstop's timer (dl_timer.c): it asks what sysmon would have
     * asked, if the reserved slice running here is past its budget. */
    if (budget && owned && g && goro__dl_budget_spent(p, goro__now()))
        atomic_store_explicit(&p->preempt_req,
                              atomic_load_explicit(&p->schedtick, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    if (g && ((owned && goro__preempt_requested(p)) || lost)) {
        bool done = why == GORO_STALL_PREEMPTIBLE &&
                    goro__sigframe_redirect(uc, (uintptr_t)g->lo, PREEMPT_STACK_MARGIN,
                                            goro__preempt_resume, frame_copy);
        /* The copy keeps the interrupted mask and restores it when g
         * resumes. The worker goes on with its own:
         * g may be inside a handler of the program's, whose signal is
         * blocked until it returns, and the next coroutines here - and
         * the children they start - must not inherit that. */
        if (done)
            goro__thread_mask(&uc->uc_sigmask);
        /* sysmon hands the P off after a few of these (not merely because
         * this thread was slow to get the CPU and the signal). */
        if (owned && !done && why != GORO_STALL_ASYNC_OFF)
            atomic_fetch_add_explicit(&p->preempt_declines, 1, memory_order_relaxed);
        /* The budget's own signal, declined: its timer asks again soon
         * (dl_timer.c), not the monitor, which may be kept off the CPU. */
        if (budget && owned && !done)
            goro__dl_backstop_retry(m);
    }
    if (sample)
        goro__stall_answer(m, why);
    errno = saved_errno;
}

static bool async_wanted(void)
{
#if defined(GORO_TSAN)
    return false;                   /* TSan delivers signals late, on a copy of the context */
#else
    if (!goro__env_flag("GORO_PREEMPT", true))
        return false;
    if (RUNNING_ON_VALGRIND)
        return false;               /* its signal frames are its own */
    return true;
#endif
}

/* At every start: the program may have installed a SIGURG handler of its
 * own since the last one; ours goes in front of it again (and chains). */
int goro__preempt_install(void)
{
    async_enabled = async_wanted();
    /* Once: goro_preempt_allow may have added ranges before the first
     * start; that is no reason to leave the executable out. */
    if (!exec_scanned) {
        exec_scanned = true;
        add_executable();
        if (__start_goro_preemptible)
            add_range((uintptr_t)__start_goro_preemptible, (uintptr_t)__stop_goro_preemptible,
                      false);
    }
    struct sigaction now;
    if (sigaction(SIGURG, NULL, &now) != 0)
        return -errno;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == goro__on_sigurg)
        return 0;
    app_action = now;
    return goro__sigaction(SIGURG, goro__on_sigurg, NULL);
}

#define SIGNAL_RESEND (20 * GORO_MSEC)

/* sysmon: a tagged SIGURG to m, unless one is on its way already. */
void goro__preempt_signal(struct goro_m *m)
{
    /* One on its way is enough - unless it has been on its way for long:
     * a handler the program put in front of ours may have kept it. */
    int64_t now = goro__now();
    if (atomic_exchange_explicit(&m->signal_pending, 1, memory_order_acq_rel) &&
        now - m->signal_sent_at < SIGNAL_RESEND)
        return;
    m->signal_sent_at = now;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGURG;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_int = GORO_URG_TAG;
    if (syscall(SYS_rt_tgsigqueueinfo, getpid(), __atomic_load_n(&m->tid, __ATOMIC_ACQUIRE), SIGURG, &si) != 0)
        atomic_store_explicit(&m->signal_pending, 0, memory_order_relaxed);
}

/* The tagged SIGURG is also how the handler learns of a stall sample asked
 * for (goro__stall_asked): one on its way serves both. */
void goro__m_ask_sample(struct goro_m *m)
{
    goro__preempt_signal(m);
}

bool goro__preempt_async(void)
{
    return async_enabled;
}

/* Only the coroutine itself and its worker's signal handler touch the
 * count: same thread, so relaxed atomics (which the compiler may not sink
 * past the section's code) suffice. */
void goro_preempt_disable(void)
{
    struct goro *g = goro__current();
    if (g)
        atomic_fetch_add_explicit(&g->nopreempt, 1, memory_order_relaxed);
}

void goro_preempt_enable(void)
{
    struct goro *g = goro__current();
    if (g && atomic_load_explicit(&g->nopreempt, memory_order_relaxed) > 0 &&
        atomic_fetch_sub_explicit(&g->nopreempt, 1, memory_order_relaxed) == 1)
        goro__preempt_check();      /* a request that waited for us */
}
