/*
 * Faults: a write into a coroutine's guard pages is a stack overflow. It is
 * caught on the worker's alternate signal stack (the coroutine's own stack
 * is exhausted), reported with the coroutine's id, name, entry function,
 * stack size and a libunwind backtrace, and the process aborts. Other
 * faults go to whatever handler was installed before goro's, or take the
 * default action.
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define ALTSTACK_MIN (64 * 1024)    /* signal frames are KBs with AVX-512 */

static struct sigaction old_segv, old_bus;
static _Atomic int installed;

static void write_str(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* The name of the function at ip: from the dynamic symbol table, else
 * from the full symbol table through libunwind (static functions, static
 * binaries), else the address. */
static void name_of(void *ip, char *buf, size_t len)
{
    Dl_info info;
    if (dladdr(ip, &info) && info.dli_sname && info.dli_saddr == ip) {
        snprintf(buf, len, "%s", info.dli_sname);
        return;
    }
    unw_context_t ctx;
    unw_cursor_t cursor;
    unw_word_t off;
    if (unw_getcontext(&ctx) == 0 && unw_init_local(&cursor, &ctx) == 0 &&
        /* +1: libunwind looks a (return) address up at address - 1 */
        unw_set_reg(&cursor, UNW_REG_IP, (unw_word_t)ip + 1) == 0 &&
        unw_get_proc_name(&cursor, buf, len, &off) == 0 && off <= 1)
        return;
    snprintf(buf, len, "%p", ip);
}

/* Writes a backtrace of ucontext (a signal context) or, if NULL, of the
 * caller, one frame a line. Used by crash and overflow reports. */
void goro__backtrace_fd(int fd, void *ucontext)
{
    unw_cursor_t cursor;
    unw_context_t ctx;
    int ok;
    if (ucontext) {
        ok = unw_init_local2(&cursor, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME);
    } else {
        unw_getcontext(&ctx);
        ok = unw_init_local(&cursor, &ctx);
    }
    if (ok != 0) {
        write_str(fd, "  (no backtrace: libunwind could not start)\n");
        return;
    }
    /* Runs of the same return address (recursion) print as one line. */
    unw_word_t last = 0;
    int repeats = 0, printed = 0;
    for (int depth = 0; depth < 100000 && printed < 64; depth++) {
        unw_word_t ip, off;
        char name[128], line[256];
        unw_get_reg(&cursor, UNW_REG_IP, &ip);
        if (depth > 0 && ip == last) {
            repeats++;
        } else {
            if (repeats) {
                snprintf(line, sizeof line, "      ... the frame above %d more times\n", repeats);
                write_str(fd, line);
                repeats = 0;
            }
            if (unw_get_proc_name(&cursor, name, sizeof name, &off) != 0)
                snprintf(name, sizeof name, "?");
            snprintf(line, sizeof line, "  #%-5d 0x%012lx %s+0x%lx\n", depth,
                     (unsigned long)ip, name, (unsigned long)off);
            write_str(fd, line);
            printed++;
        }
        last = ip;
        if (unw_step(&cursor) <= 0)
            break;
    }
    if (repeats) {
        char line[96];
        snprintf(line, sizeof line, "      ... the frame above %d more times\n", repeats);
        write_str(fd, line);
    }
}

static void report_overflow(struct goro *g, void *uc)
{
    char entry[128], msg[512];
    name_of((void *)g->fn, entry, sizeof entry);
    snprintf(msg, sizeof msg,
             "goro: stack overflow in coroutine %llu \"%s\" (entry %s): its stack of "
             "%zu bytes is exhausted; give it more with goro_attr_t.stack_size or "
             "GORO_STACK_SIZE\n",
             (unsigned long long)g->id, g->name, entry, g->stack_size);
    write_str(2, msg);
    goro__backtrace_fd(2, uc);
}

static void chain(int sig, siginfo_t *si, void *uc, const struct sigaction *old)
{
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction) {
            old->sa_sigaction(sig, si, uc);
            return;
        }
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    /* Default action: restore it; returning re-executes the fault. */
    signal(sig, SIG_DFL);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    struct goro_m *m = goro__m();
    struct goro *g = m ? m->curg : NULL;
    char *addr = si->si_addr;
    if (g && addr >= g->map && addr < g->lo) {
        report_overflow(g, uc);
        signal(SIGABRT, SIG_DFL);
        abort();
    }
    chain(sig, si, uc, sig == SIGBUS ? &old_bus : &old_segv);
    errno = saved;
}

void goro__fault_install(void)
{
    if (atomic_exchange(&installed, 1))
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
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
