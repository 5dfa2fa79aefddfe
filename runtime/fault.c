/*
 * Faults and the reports they produce.
 *
 * A write into a coroutine's guard pages is a stack overflow. It is caught
 * on the worker's alternate signal stack (the coroutine's own stack is
 * exhausted), reported with the coroutine's id, name, entry function,
 * stack size and a libunwind backtrace, and the process aborts.
 *
 * Any other crash - SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT - goes to the
 * handler that was installed before goro's, if there was one (it may own
 * the signal: a garbage collector, a sanitizer). Otherwise, when it
 * happened inside a coroutine, it is reported the same way ("goro:
 * coroutine N (name) crashed: signal ..."), and then the default action
 * is restored and the signal raised again, so the process dies of it as it
 * would have without goro, core file included.
 *
 * Reports are written with write(2) from the signal handler. They use
 * snprintf and libunwind's symbol lookup, which POSIX does not list as
 * async-signal-safe but which neither allocate nor take locks for what is
 * printed here; see docs/debugging.md.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

#define ALTSTACK_MIN (64 * 1024)    /* signal frames are KBs with AVX-512 */
#define MAX_FRAMES 64

static const int crash_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
#define NCRASH (int)(sizeof crash_signals / sizeof *crash_signals)
static struct sigaction old_actions[NCRASH];
static _Atomic int installed;
static _Atomic int reporting;       /* one crash report at a time */

/* Set while this thread walks a stack that may change under it (a dump
 * runs while other workers go on): a fault during the walk jumps back
 * here instead of killing the process. */
static __thread sigjmp_buf *walk_escape __attribute__((tls_model("initial-exec")));

/* ---- output ---- */

static void write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

void goro__outf(struct goro_out *o, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    if (o->file)
        fwrite(buf, 1, len, o->file);
    else
        write_all(o->fd, buf, len);
}

/* ---- symbols ---- */

/* The function containing ip and ip's offset in it: from the full symbol
 * table through libunwind (static functions, static binaries), else from
 * the dynamic symbol table. */
static bool lookup_symbol(uintptr_t ip, char *buf, size_t len, uintptr_t *off)
{
    unw_context_t ctx;
    unw_cursor_t cursor;
    unw_word_t uoff;
    if (unw_getcontext(&ctx) == 0 && unw_init_local(&cursor, &ctx) == 0 &&
        /* +1: libunwind looks a (return) address up at address - 1 */
        unw_set_reg(&cursor, UNW_REG_IP, (unw_word_t)ip + 1) == 0 &&
        unw_get_proc_name(&cursor, buf, len, &uoff) == 0 && uoff >= 1) {
        *off = (uintptr_t)uoff - 1;
        return true;
    }
    Dl_info info;
    if (dladdr((void *)ip, &info) && info.dli_sname && info.dli_saddr) {
        snprintf(buf, len, "%s", info.dli_sname);
        *off = ip - (uintptr_t)info.dli_saddr;
        return true;
    }
    return false;
}

void goro__symbolize(const void *ip, char *buf, size_t len)
{
    char name[128];
    uintptr_t off;
    if (!lookup_symbol((uintptr_t)ip, name, sizeof name, &off))
        snprintf(buf, len, "%p", ip);
    else if (off)
        snprintf(buf, len, "%s+0x%lx", name, (unsigned long)off);
    else
        snprintf(buf, len, "%s", name);
}

/* ---- backtraces ---- */

/* One frame a line; runs of the same return address (recursion) print as
 * one line. */
static void print_frames(struct goro_out *o, unw_cursor_t *cursor)
{
    unw_word_t last = 0;
    int repeats = 0, printed = 0;
    for (int depth = 0; depth < 100000 && printed < MAX_FRAMES; depth++) {
        unw_word_t ip, off;
        char name[128];
        unw_get_reg(cursor, UNW_REG_IP, &ip);
        if (depth > 0 && ip == last) {
            repeats++;
        } else {
            if (repeats) {
                goro__outf(o, "      ... the frame above %d more times\n", repeats);
                repeats = 0;
            }
            if (unw_get_proc_name(cursor, name, sizeof name, &off) != 0) {
                snprintf(name, sizeof name, "?");
                off = 0;
            }
            goro__outf(o, "  #%-5d 0x%012lx %s+0x%lx\n", depth, (unsigned long)ip, name,
                       (unsigned long)off);
            printed++;
        }
        last = ip;
        if (unw_step(cursor) <= 0)
            break;
    }
    if (repeats)
        goro__outf(o, "      ... the frame above %d more times\n", repeats);
}

/* Without unwind tables: follow the frame-pointer chain of a parked
 * context, staying inside its stack. */
static void print_fp_chain(struct goro_out *o, const struct goro *g)
{
    const uint64_t *f = g->sp;
    uintptr_t pc = (uintptr_t)f[GORO_CTX_SLOT_PC];
    const uintptr_t *fp = (const uintptr_t *)(uintptr_t)f[GORO_CTX_SLOT_FP];
    goro__outf(o, "  (no unwind information: following frame pointers)\n");
    for (int depth = 0; depth < MAX_FRAMES && pc; depth++) {
        char name[160];
        goro__symbolize((void *)(pc - 1), name, sizeof name);
        goro__outf(o, "  #%-5d 0x%012lx %s\n", depth, (unsigned long)pc, name);
        if ((const char *)fp < g->lo || (const char *)(fp + 2) > g->hi)
            break;
        pc = fp[1];
        fp = (const uintptr_t *)fp[0];
    }
}

/* A libunwind context holding a parked coroutine's registers as they are
 * right after its goro__ctx_switch call returns: the resume address as pc
 * (a return address, which unw_init_local looks up at pc - 1, as wanted),
 * the caller's sp, and the callee-saved registers the switch stored. */
static void context_from_saved(unw_context_t *uc, const struct goro *g)
{
    const uint64_t *f = g->sp;
    memset(uc, 0, sizeof *uc);
#if defined(__x86_64__)
    greg_t *r = uc->uc_mcontext.gregs;
    r[REG_RIP] = (greg_t)f[GORO_CTX_SLOT_PC];
    r[REG_RSP] = (greg_t)(uintptr_t)(f + GORO_CTX_FRAME_WORDS);
    r[REG_RBP] = (greg_t)f[GORO_CTX_SLOT_FP];
    r[REG_RBX] = (greg_t)f[GORO_CTX_SLOT_RBX];
    r[REG_R12] = (greg_t)f[GORO_CTX_SLOT_R12];
    r[REG_R13] = (greg_t)f[GORO_CTX_SLOT_R13];
    r[REG_R14] = (greg_t)f[GORO_CTX_SLOT_R14];
    r[REG_R15] = (greg_t)f[GORO_CTX_SLOT_R15];
#elif defined(__aarch64__)
    for (int i = 0; i < 10; i++)
        uc->uc_mcontext.regs[19 + i] = f[GORO_CTX_SLOT_X19 + i];
    uc->uc_mcontext.regs[29] = f[GORO_CTX_SLOT_X29];
    uc->uc_mcontext.regs[30] = f[GORO_CTX_SLOT_X30];
    uc->uc_mcontext.sp = (uint64_t)(uintptr_t)(f + GORO_CTX_FRAME_WORDS);
    uc->uc_mcontext.pc = f[GORO_CTX_SLOT_PC];
#endif
}

enum walk_from { WALK_HERE, WALK_SIGNAL, WALK_SAVED };

/* Seeds a cursor and prints the frames, with faults caught (see
 * walk_escape). The context lives in this frame, which stays alive for
 * the whole walk, as unw_getcontext requires. */
static void guarded_walk(struct goro_out *o, enum walk_from from, void *ucontext,
                         const struct goro *g)
{
    sigjmp_buf escape;
    sigjmp_buf *volatile outer = walk_escape;
    if (sigsetjmp(escape, 1)) {
        walk_escape = outer;
        goro__outf(o, "  (backtrace cut short: the stack changed while it was read)\n");
        return;
    }
    walk_escape = &escape;
    unw_context_t ctx;
    unw_cursor_t cursor;
    int err;
    if (from == WALK_SIGNAL) {
        err = unw_init_local2(&cursor, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME);
    } else if (from == WALK_SAVED) {
        context_from_saved(&ctx, g);
        err = unw_init_local(&cursor, &ctx);
    } else {
        unw_getcontext(&ctx);
        err = unw_init_local(&cursor, &ctx);
    }
    if (err == 0)
        print_frames(o, &cursor);
    else if (from == WALK_SAVED)
        print_fp_chain(o, g);
    else
        goro__outf(o, "  (no backtrace: libunwind could not start)\n");
    walk_escape = outer;
}

void goro__backtrace_out(struct goro_out *o, void *ucontext)
{
    guarded_walk(o, ucontext ? WALK_SIGNAL : WALK_HERE, ucontext, NULL);
}

void goro__backtrace_saved(struct goro_out *o, const struct goro *g)
{
    guarded_walk(o, WALK_SAVED, NULL, g);
}

void goro__backtrace_fd(int fd, void *ucontext)
{
    struct goro_out o = { .file = NULL, .fd = fd };
    goro__backtrace_out(&o, ucontext);
}

/* ---- reports ---- */

static void report_overflow(struct goro *g, void *uc)
{
    struct goro_out o = { .file = NULL, .fd = 2 };
    char entry[160];
    goro__symbolize((void *)g->fn, entry, sizeof entry);
    goro__outf(&o,
               "goro: stack overflow in coroutine %llu \"%s\" (entry %s): its stack of "
               "%zu bytes is exhausted; give it more with goro_attr_t.stack_size or "
               "GORO_STACK_SIZE\n",
               (unsigned long long)g->id, g->name, entry, g->stack_size);
    goro__backtrace_out(&o, uc);
}

/* "SIGSEGV (Segmentation fault) at address 0x10" */
static void describe_signal(int sig, const siginfo_t *si, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np(sig), *descr = sigdescr_np(sig);
    int n = snprintf(buf, len, "SIG%s (%s)", abbrev ? abbrev : "?", descr ? descr : "?");
    bool hardware = si->si_code > 0;
    if (n > 0 && (size_t)n < len && hardware && sig != SIGABRT)
        snprintf(buf + n, len - (size_t)n, " at address 0x%lx", (unsigned long)si->si_addr);
}

static void report_crash(struct goro_m *m, struct goro *g, int sig, siginfo_t *si, void *uc)
{
    struct goro_out o = { .file = NULL, .fd = 2 };
    char what[160], entry[160];
    describe_signal(sig, si, what, sizeof what);
    goro__symbolize((void *)g->fn, entry, sizeof entry);
    if (g->name[0])
        goro__outf(&o, "goro: coroutine %llu (%s) crashed: signal %s\n",
                   (unsigned long long)g->id, g->name, what);
    else
        goro__outf(&o, "goro: coroutine %llu crashed: signal %s\n",
                   (unsigned long long)g->id, what);
    goro__outf(&o, "goro: entry %s, on worker %d (thread %d)\n", entry, m->id, (int)m->tid);
    goro__backtrace_out(&o, uc);
}

bool goro__sig_chain(const struct sigaction *act, int sig, siginfo_t *si, void *uc)
{
    if (act->sa_flags & SA_SIGINFO) {
        if (!act->sa_sigaction)
            return false;
        act->sa_sigaction(sig, si, uc);
    } else {
        if (act->sa_handler == SIG_DFL || act->sa_handler == SIG_IGN)
            return false;
        act->sa_handler(sig);
    }
    return true;
}

static const struct sigaction *old_action(int sig)
{
    for (int i = 0; i < NCRASH; i++)
        if (crash_signals[i] == sig)
            return &old_actions[i];
    return NULL;
}

/* Dies of sig as if goro had no handler. A fault the hardware raised is
 * raised again by the instruction when the handler returns; a signal that
 * was sent (kill, abort) is sent again, and arrives once the handler
 * returns and unblocks it. */
static void die_by_default(int sig, const siginfo_t *si)
{
    signal(sig, SIG_DFL);
    if (si->si_code <= 0 || sig == SIGABRT)
        syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (walk_escape && (sig == SIGSEGV || sig == SIGBUS))
        siglongjmp(*walk_escape, 1);
    struct goro_m *m = goro__m();
    struct goro *g = m ? m->curg : NULL;
    char *addr = si->si_addr;
    if (g && (sig == SIGSEGV || sig == SIGBUS) && addr >= g->map && addr < g->lo) {
        report_overflow(g, uc);
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    const struct sigaction *old = old_action(sig);
    if (old && goro__sig_chain(old, sig, si, uc)) {
        errno = saved;
        return;
    }
    /* The first crash reports; a second thread crashing meanwhile just
     * dies with it (the process is going down anyway). */
    if (g && !atomic_exchange(&reporting, 1))
        report_crash(m, g, sig, si, uc);
    die_by_default(sig, si);
    errno = saved;
}

int goro__sigaction(int sig, void (*handler)(int, siginfo_t *, void *), struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, old) == 0 ? 0 : -errno;
}

void goro__fault_install(void)
{
    if (atomic_exchange(&installed, 1))
        return;
    for (int i = 0; i < NCRASH; i++)
        goro__sigaction(crash_signals[i], on_fault, &old_actions[i]);
    goro__dump_install();
}

/* Every worker gets an alternate signal stack: a fault on an exhausted
 * coroutine stack could not push a signal frame there. */
int goro__fault_thread_init(struct goro_m *m)
{
    long sys = sysconf(_SC_SIGSTKSZ);   /* larger with SVE/AMX state */
    size_t size = sys > ALTSTACK_MIN ? (size_t)sys * 4 : ALTSTACK_MIN;
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return -errno;
    stack_t ss = { .ss_sp = mem, .ss_size = size, .ss_flags = 0 };
    if (sigaltstack(&ss, NULL) != 0) {
        int e = errno;
        munmap(mem, size);
        return -e;
    }
    m->altstack = mem;
    m->altstack_size = size;
    return 0;
}

void goro__fault_thread_fini(struct goro_m *m)
{
    if (!m->altstack)
        return;
    stack_t ss = { .ss_flags = SS_DISABLE };
    sigaltstack(&ss, NULL);
    munmap(m->altstack, m->altstack_size);
    m->altstack = NULL;
}
