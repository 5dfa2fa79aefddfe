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
 * would have without goro, core file included. When goro's handler ends
 * the process so (a stack overflow, a crash no earlier handler took), an
 * execution trace under way is written first (trace.c, goro__trace_die).
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
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"
#include "debug/debug.h"
#include "sched/sched.h"

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

void goro__write_all(int fd, const char *s, size_t n)
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
        goro__write_all(o->fd, buf, len);
}

/* ---- symbols ----
 *
 * libunwind names a code address after the nearest function symbol below
 * it, from the object's full symbol table (.symtab, or the compressed
 * .gnu_debugdata) when it has one, else from its dynamic symbols alone. In
 * an object without a full table - libc.so.6 and ld.so as Debian ships
 * them - an address in a local function (qsort's msort_with_tmp, say) is
 * then named after whichever exported function lies below it, with a large
 * offset ("mrand48_r+0x2b4"): a wrong name, which misleads more than none.
 * So every name is checked against the dynamic symbol table, whose entries
 * carry their size (dladdr1, RTLD_DL_SYMENT); a name that fails the check
 * becomes "??" with the object and the offset in it, which addr2line and
 * gdb can still resolve against the object's debug information. */

/* A code address as it reads in a report: the function's name and start,
 * or, when no name can be trusted, the object containing it. */
struct code_name {
    char name[128];                 /* "" when unknown */
    uintptr_t start;                /* where the named function begins */
    const char *object;             /* file of the containing object, or NULL */
    uintptr_t object_base;
};

/* The dynamic symbol that contains addr, if one does. */
static bool dynamic_symbol_at(uintptr_t addr, Dl_info *info)
{
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1((void *)addr, info, (void **)&sym, RTLD_DL_SYMENT) || !info->dli_sname ||
        !info->dli_saddr || !sym)
        return false;
    uintptr_t start = (uintptr_t)info->dli_saddr;
    return sym->st_size ? addr - start < sym->st_size : addr == start;
}

/* Whether libunwind's answer for lookup - a function beginning at start -
 * can be right. It cannot when a dynamic symbol contains lookup but begins
 * above start (libunwind passed over it), or when none contains lookup and
 * start is itself a dynamic symbol's (which, by its size, ends below
 * lookup). A start that is no dynamic symbol's came from the full symbol
 * table: trusted. So is everything in objects the loader does not know
 * (a static program), where no dynamic table exists to check against. */
static bool unwind_name_plausible(uintptr_t start, uintptr_t lookup)
{
    Dl_info info;
    if (!dladdr((void *)lookup, &info))
        return true;
    if (dynamic_symbol_at(lookup, &info))
        return (uintptr_t)info.dli_saddr <= start;
    return !(dynamic_symbol_at(start, &info) && (uintptr_t)info.dli_saddr == start);
}

/* Names the function containing lookup, an address inside the code (for a
 * return address, the address before it). unwound: libunwind's name and
 * the function's start, if it gave one. */
static void name_code(uintptr_t lookup, const char *unwound, uintptr_t unwound_start,
                      struct code_name *cn)
{
    Dl_info info;
    memset(cn, 0, sizeof *cn);
    if (unwound && unwind_name_plausible(unwound_start, lookup)) {
        snprintf(cn->name, sizeof cn->name, "%s", unwound);
        cn->start = unwound_start;
    } else if (dynamic_symbol_at(lookup, &info)) {
        snprintf(cn->name, sizeof cn->name, "%s", info.dli_sname);
        cn->start = (uintptr_t)info.dli_saddr;
    }
    if (!cn->name[0] && dladdr((void *)lookup, &info) && info.dli_fname) {
        cn->object = info.dli_fname;
        cn->object_base = (uintptr_t)info.dli_fbase;
    }
}

/* "name+0x1c"; "?? (libc.so.6+0x3fbf4)"; "??" - for an address at ip. */
static void format_code(const struct code_name *cn, uintptr_t ip, char *buf, size_t len)
{
    if (cn->name[0]) {
        snprintf(buf, len, "%s+0x%lx", cn->name, (unsigned long)(ip - cn->start));
    } else if (cn->object) {
        const char *slash = strrchr(cn->object, '/');
        snprintf(buf, len, "?? (%s+0x%lx)", slash ? slash + 1 : cn->object,
                 (unsigned long)(ip - cn->object_base));
    } else {
        snprintf(buf, len, "??");
    }
}

/* libunwind's name for the frame at cursor, whose ip is ip: the function's
 * start into *start. Its offset counts from ip even when it looked up
 * ip - 1 (a return address), so the start is exact either way. */
static const char *unwind_name(unw_cursor_t *cursor, uintptr_t ip, char *name, size_t len,
                               uintptr_t *start)
{
    unw_word_t off;
    int err = unw_get_proc_name(cursor, name, len, &off);
    if ((err != 0 && err != -UNW_ENOMEM) || off > ip)   /* ENOMEM: cut short */
        return NULL;
    *start = ip - (uintptr_t)off;
    return name;
}

/* libunwind's names, remembered by address. Its lookup reads
 * /proc/self/maps and maps the object file each time (1.2-1.6 ms a frame
 * measured), and a dump names the same few return addresses in every
 * coroutine. A slot is written once, by whoever claims it empty, and
 * never changes after READY: readers look only at READY slots, so a
 * signal handler may read and fill it too (no lock, no allocation). A
 * slot held by another address, or left WRITING by a walk that escaped a
 * fault, is passed by. (Code unloaded by dlclose and other code loaded at
 * its address would keep the old name.) */
enum { NAME_SLOTS = 512, NAME_LEN = 128 };
enum { SLOT_EMPTY, SLOT_WRITING, SLOT_READY };

struct name_slot {
    _Atomic int state;
    bool exact, found;
    uintptr_t ip, start;
    char name[NAME_LEN];
};

static struct name_slot name_slots[NAME_SLOTS];

static struct name_slot *name_slot_of(uintptr_t ip, bool exact)
{
    uint64_t h = ((uint64_t)ip * 0x9e3779b97f4a7c15ull) >> 32;
    return &name_slots[(h + exact) % NAME_SLOTS];
}

/* unwind_name, through the remembered names. */
static const char *remembered_name(unw_cursor_t *cursor, uintptr_t ip, bool exact, char *name,
                                   uintptr_t *start)
{
    struct name_slot *slot = name_slot_of(ip, exact);
    if (atomic_load_explicit(&slot->state, memory_order_acquire) == SLOT_READY &&
        slot->ip == ip && slot->exact == exact) {
        if (!slot->found)
            return NULL;
        memcpy(name, slot->name, NAME_LEN);
        *start = slot->start;
        return name;
    }
    const char *found = unwind_name(cursor, ip, name, NAME_LEN, start);
    int empty = SLOT_EMPTY;
    if (atomic_compare_exchange_strong_explicit(&slot->state, &empty, SLOT_WRITING,
                                                memory_order_acquire, memory_order_relaxed)) {
        slot->ip = ip;
        slot->exact = exact;
        slot->found = found != NULL;
        slot->start = found ? *start : 0;
        if (found)
            memcpy(slot->name, name, NAME_LEN);
        atomic_store_explicit(&slot->state, SLOT_READY, memory_order_release);
    }
    return found;
}

/* The function of the frame at cursor, checked (see above), as text. exact:
 * ip is where the frame stopped (a fault, or the frame a signal
 * interrupted), not a return address - which may lie just past the end of
 * a function whose last instruction is a call, so it is looked up at ip - 1,
 * as libunwind does. */
static void describe_frame(unw_cursor_t *cursor, uintptr_t ip, bool exact, char *buf,
                           size_t len)
{
    char name[NAME_LEN];
    uintptr_t start = 0;
    const char *unwound = remembered_name(cursor, ip, exact, name, &start);
    struct code_name cn;
    name_code(exact || !ip ? ip : ip - 1, unwound, start, &cn);
    format_code(&cn, ip, buf, len);
}

void goro__symbolize(const void *ip, char *buf, size_t len)
{
    uintptr_t addr = (uintptr_t)ip;
    unw_context_t ctx;
    unw_cursor_t cursor;
    char name[NAME_LEN];
    uintptr_t start = 0;
    const char *unwound = NULL;
    /* A cursor standing at addr + 1: libunwind looks a return address up
     * at address - 1, which is addr. */
    if (unw_getcontext(&ctx) == 0 && unw_init_local(&cursor, &ctx) == 0 &&
        unw_set_reg(&cursor, UNW_REG_IP, (unw_word_t)addr + 1) == 0)
        unwound = remembered_name(&cursor, addr + 1, false, name, &start);
    struct code_name cn;
    name_code(addr, unwound, start, &cn);
    if (!cn.name[0] && !cn.object)
        snprintf(buf, len, "%p", ip);
    else if (cn.name[0] && addr == cn.start)
        snprintf(buf, len, "%s", cn.name);
    else
        format_code(&cn, addr, buf, len);
}

/* ---- backtraces ---- */

/* One frame a line; runs of the same return address (recursion) print as
 * one line. exact: the first frame's ip is a signal's (see describe_frame). */
static void print_frames(struct goro_out *o, unw_cursor_t *cursor, bool exact)
{
    unw_word_t last = 0;
    int repeats = 0, printed = 0;
    for (int depth = 0; depth < 100000 && printed < MAX_FRAMES; depth++) {
        unw_word_t ip;
        char name[160];
        unw_get_reg(cursor, UNW_REG_IP, &ip);
        if (depth > 0 && ip == last) {
            repeats++;
        } else {
            if (repeats) {
                goro__outf(o, "      ... the frame above %d more times\n", repeats);
                repeats = 0;
            }
            describe_frame(cursor, (uintptr_t)ip, exact, name, sizeof name);
            goro__outf(o, "  #%-5d 0x%012lx %s\n", depth, (unsigned long)ip, name);
            printed++;
        }
        last = ip;
        exact = unw_is_signal_frame(cursor) > 0;    /* the next frame was interrupted */
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
        print_frames(o, &cursor, from == WALK_SIGNAL);
    else if (from == WALK_SAVED)
        print_fp_chain(o, g);
    else
        goro__outf(o, "  (no backtrace: libunwind could not start)\n");
    walk_escape = outer;
}

int goro__backtrace_ips(void *ucontext, uintptr_t *ips, int max)
{
    sigjmp_buf escape;
    sigjmp_buf *volatile outer = walk_escape;
    volatile int n = 0;
    if (sigsetjmp(escape, 1)) {
        walk_escape = outer;
        return n;                   /* what was read before the fault */
    }
    walk_escape = &escape;
    unw_cursor_t cursor;
    if (unw_init_local2(&cursor, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) == 0) {
        do {
            unw_word_t ip;
            if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || !ip)
                break;
            ips[n] = (uintptr_t)ip;
            n = n + 1;
        } while (n < max && unw_step(&cursor) > 0);
    }
    walk_escape = outer;
    return n;
}

__attribute__((no_sanitize("address", "thread")))
bool goro__copy_guarded(void *dst, const void *src, size_t len)
{
    sigjmp_buf escape;
    sigjmp_buf *volatile outer = walk_escape;
    if (sigsetjmp(escape, 1)) {
        walk_escape = outer;
        return false;
    }
    walk_escape = &escape;
    volatile unsigned char *d = dst;
    const volatile unsigned char *s = src;
    for (size_t i = 0; i < len; i++)
        d[i] = s[i];
    walk_escape = outer;
    return true;
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

/* The trace under way ends with the process: "signal SIGSEGV". */
static void trace_die(int sig)
{
    const char *abbrev = sigabbrev_np(sig);
    char why[32] = "signal SIG";
    size_t n = strlen(why);
    for (; abbrev && *abbrev && n < sizeof why - 1; abbrev++)
        why[n++] = *abbrev;
    why[n] = 0;
    goro__trace_die(why);
}

/* goro__ though static: see goro__on_sigurg (preempt.c). */
static void goro__on_fault(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (walk_escape && (sig == SIGSEGV || sig == SIGBUS))
        siglongjmp(*walk_escape, 1);
    struct goro_m *m = goro__m();
    struct goro *g = m ? m->curg : NULL;
    char *addr = si->si_addr;
    /* A trace under way is written before the report: its writer is
     * async-signal-safe, the report's symbol lookup not quite (TSan sees
     * libunwind's call malloc), and a report to a closed pipe ends the
     * process. */
    if (g && (sig == SIGSEGV || sig == SIGBUS) && addr >= g->map && addr < g->lo) {
        goro__trace_die("aborted: stack overflow");
        report_overflow(g, uc);
        goro__fatal_abort("aborted: stack overflow");
    }
    const struct sigaction *old = old_action(sig);
    if (old && goro__sig_chain(old, sig, si, uc)) {
        errno = saved;
        return;
    }
    /* The first crash reports; a second thread crashing meanwhile just
     * dies with it (the process is going down anyway). */
    trace_die(sig);
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

/* libunwind sets itself up on its first use (a backtrace here, a C++
 * throw in the program), and not all of that setup is under its lock: two
 * threads making the first use at once race inside it. Made here, before
 * any worker runs, no coroutine makes it. */
static void unwind_setup(void)
{
    unw_context_t ctx;
    unw_cursor_t cursor;
    if (unw_getcontext(&ctx) == 0)
        (void)unw_init_local(&cursor, &ctx);
}

void goro__fault_install(void)
{
    if (atomic_exchange(&installed, 1))
        return;
    unwind_setup();
    for (int i = 0; i < NCRASH; i++)
        goro__sigaction(crash_signals[i], goro__on_fault, &old_actions[i]);
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
