/*
 * goro_dump: every coroutine and every worker, for people - what each
 * coroutine waits on, where it was spawned from, and where it is now. With
 * GORO_DUMP_ON_SIGQUIT=1 in the environment, SIGQUIT (Ctrl-\) prints the
 * dump to stderr and the program goes on, as a Go program prints its
 * goroutines (Go then exits; this does not).
 *
 * A parked or runnable coroutine is unwound from the context it saved when
 * it switched out; a running one cannot be (its registers are in its
 * worker's CPU), except the one that asks for the dump or that the signal
 * interrupted. The other workers keep running meanwhile, so the dump is a
 * snapshot taken one coroutine at a time: a coroutine may change state
 * while it is printed. Reading a stack that changes under the unwinder can
 * fault; fault.c catches that and the backtrace is cut short.
 *
 * From the signal handler nothing is allocated and output goes straight to
 * the descriptor with write(2); see fault.c and docs/debugging.md for what
 * is not async-signal-safe in POSIX's terms.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "debug/debug.h"
#include "sched/sched.h"
#include "coro/coro.h"

struct dump {
    struct goro_out *out;
    void *ucontext;                /* the signal's context, or NULL */
    struct goro *self;             /* the coroutine producing the dump, if any */
    int count;
};

static struct goro_m *thread_running(const struct goro *g)
{
    int n;
    struct goro_m *ms = goro__registry_ms(&n);
    for (int i = 0; i < n; i++)
        if (ms[i].curg == g)
            return &ms[i];
    return NULL;
}

/* Workers are not threads. A worker is a P, the right to run coroutines
 * (runtime/sched/sched.c), and there are goro_workers() of them; threads (Ms)
 * may be more. When a thread blocks in a system call with coroutines
 * queued behind it, sysmon hands its worker to another thread (a spare,
 * or a new one), and the blocked thread, once back, waits as a spare. A P's
 * owner says which thread holds it: a blocked thread's own m->p still
 * names the worker it lost until it comes back. */

/* The thread holding p. While sysmon retakes p (owner RETAKING), the
 * thread it is taken from, until sysmon decides. */
static struct goro_m *p_holder(struct goro_p *p)
{
    struct goro_m *owner = atomic_load_explicit(&p->owner, memory_order_acquire);
    return owner == GORO_P_RETAKING ? __atomic_load_n(&p->m, __ATOMIC_RELAXED) : owner;
}

/* The P that m holds, or NULL: m is a spare thread. */
static struct goro_p *worker_held_by(const struct goro_m *m)
{
    struct goro_p *ps = goro__sched.procs;
    for (int i = 0; ps && i < goro__sched.nprocs; i++)
        if (p_holder(&ps[i]) == m)
            return &ps[i];
    return NULL;
}

void goro__describe_wait(const struct goro *g, char *buf, size_t len)
{
    goro__describe_wait_of(g->wait, g->wait_obj, buf, len);
}

void goro__describe_wait_of(int wait, const void *obj, char *buf, size_t len)
{
    const char *why = goro__wait_name(wait);
    switch (wait) {
    case GORO_W_IO:
        /* the descriptor record starts with its fd (runtime/io/netpoll.h) */
        if (obj) {
            snprintf(buf, len, "io fd=%d", *(const int *)obj);
            return;
        }
        break;
    case GORO_W_JOIN: {
        uint64_t id;            /* the joined one may be ending meanwhile */
        if (obj && goro__copy_guarded(&id, &((const struct goro *)obj)->id, sizeof id)) {
            snprintf(buf, len, "join coroutine %llu", (unsigned long long)id);
            return;
        }
        break;
    }
    case GORO_W_OFFLOAD:
        if (obj) {
            char fn[160];
            goro__symbolize(obj, fn, sizeof fn);
            snprintf(buf, len, "offload %s", fn);
            return;
        }
        break;
    default:
        break;
    }
    if (obj)
        snprintf(buf, len, "%s %p", why, obj);
    else
        snprintf(buf, len, "%s", why);
}

/* An M's thread id: written by the thread itself as it starts, which a
 * dump right after goro_start may race with (0: not yet). */
static int m_tid(const struct goro_m *m)
{
    return (int)__atomic_load_n(&m->tid, __ATOMIC_ACQUIRE);
}

static void print_running(struct dump *d, struct goro *g)
{
    struct goro_m *m = thread_running(g);
    const char *printing = m && m == goro__m() ? ", the one printing this" : "";
    struct goro_p *p = m ? worker_held_by(m) : NULL;
    if (p)
        goro__outf(d->out, "  running on worker %d (thread %d)%s\n", p->id, m_tid(m),
                   printing);
    else if (m)
        goro__outf(d->out, "  running on spare thread %d (its worker was handed off)%s\n",
                   m_tid(m), printing);
    if (g == d->self && d->ucontext)
        goro__backtrace_out(d->out, d->ucontext);   /* interrupted by the signal */
    else if (g == d->self)
        goro__backtrace_out(d->out, NULL);          /* called goro_dump itself */
    else
        goro__outf(d->out, "  (not walked: its registers are live on its thread)\n");
}

static void dump_coroutine(struct goro *g, void *arg)
{
    struct dump *d = arg;
    int state = atomic_load_explicit(&g->state, memory_order_acquire);
    if (state == GORO_S_FREE)
        return;
    d->count++;
    char entry[160], wait[160] = "";
    goro__symbolize((void *)g->fn, entry, sizeof entry);
    if (state == GORO_S_PARKED) {
        strcpy(wait, ": ");
        goro__describe_wait(g, wait + 2, sizeof wait - 2);
    }
    goro__outf(d->out, "\ncoroutine %llu%s%s%s [%s%s], entry %s\n",
               (unsigned long long)g->id, g->name[0] ? " \"" : "", g->name,
               g->name[0] ? "\"" : "", goro__state_name(state), wait, entry);
    if (g->in_force) {              /* goro_deadline_push, its group's deadline */
        int64_t left = g->in_force - goro__now();
        long long ms = llabs(left) / GORO_MSEC, us = llabs(left) % GORO_MSEC / 1000;
        goro__outf(d->out, "  deadline in force: %s%lld.%03lld ms%s\n",
                   left >= 0 ? "in " : "passed ", ms, us, left >= 0 ? "" : " ago");
    }
    char dl[200];
    if (goro__dl_describe(g, dl, sizeof dl))
        goro__outf(d->out, "  %s\n", dl);
    switch (state) {
    case GORO_S_RUNNING:
        print_running(d, g);
        break;
    case GORO_S_DEAD:
        goro__outf(d->out, "  (finished; its handle is not joined yet)\n");
        break;
    default:
        goro__backtrace_saved(d->out, g);
        break;
    }
}

static void print_coroutine_name(struct goro_out *o, const struct goro *g)
{
    goro__outf(o, "coroutine %llu%s%s%s", (unsigned long long)g->id, g->name[0] ? " \"" : "",
               g->name, g->name[0] ? "\"" : "");
}

/* "worker 0: thread 812, running coroutine 5", one line per P. */
static void dump_workers(struct dump *d)
{
    struct goro_p *ps = goro__sched.procs;
    for (int i = 0; ps && i < goro__sched.nprocs; i++) {
        struct goro_m *m = p_holder(&ps[i]);
        if (!m) {
            goro__outf(d->out, "worker %d: being handed to another thread\n", ps[i].id);
            continue;
        }
        goro__outf(d->out, "worker %d: thread %d, ", ps[i].id, m_tid(m));
        struct goro *g = m->curg;
        if (g) {
            goro__outf(d->out, "running ");
            print_coroutine_name(d->out, g);
            goro__outf(d->out, "\n");
        } else {
            goro__outf(d->out, "in the scheduler (idle or between coroutines)\n");
        }
    }
}

/* The threads that hold no worker: blocked ones whose worker was handed
 * over (still running their coroutine), and spares waiting for a worker. */
static void dump_spare_threads(struct dump *d)
{
    int n;
    struct goro_m *ms = goro__registry_ms(&n);
    for (int i = 0; i < n; i++) {
        if (worker_held_by(&ms[i]))
            continue;
        goro__outf(d->out, "spare thread (no worker): thread %d, ", m_tid(&ms[i]));
        struct goro *g = ms[i].curg;
        if (g) {
            goro__outf(d->out, "running ");
            print_coroutine_name(d->out, g);
            goro__outf(d->out, " (its worker was handed off)\n");
        } else {
            goro__outf(d->out, "idle\n");
        }
    }
}

/* "stacks: guards by MADV_GUARD_INSTALL, 1200 stacks in 8 arenas" */
static void dump_stack_space(struct goro_out *o)
{
    long arenas, stacks;
    goro__stack_space_counts(&arenas, &stacks);
    if (!goro__stacks_in_arenas())
        goro__outf(o, "goro: stack guards by mprotect (two mappings per stack)\n");
    else
        goro__outf(o, "goro: stack guards by MADV_GUARD_INSTALL, %ld stack%s in %ld arena%s\n",
                   stacks, stacks == 1 ? "" : "s", arenas, arenas == 1 ? "" : "s");
}

void goro__dump_out(struct goro_out *o, void *ucontext, int how)
{
    struct dump d = { .out = o, .ucontext = ucontext, .self = goro__current() };
    int nthreads;
    int nworkers = goro__registry_ms(&nthreads) && goro__sched.procs ? goro__sched.nprocs : 0;
    goro__outf(o, "goro: dump of process %d, %d worker%s\n", (int)getpid(), nworkers,
               nworkers == 1 ? "" : "s");
    int inexact = goro__registry_walk(dump_coroutine, &d, how == GORO_DUMP_IN_SIGNAL);
    goro__outf(o, "\n");
    dump_workers(&d);
    dump_spare_threads(&d);
    goro__outf(o, "goro: %d coroutine%s%s\n", d.count, d.count == 1 ? "" : "s",
               inexact ? " (the registry was busy: the list may be incomplete)" : "");
    goro__stall_dump(o);
    if (how == GORO_DUMP_LEAKS)
        goro__leaks_dump(o);
    dump_stack_space(o);
}

int goro_dump(FILE *out)
{
    if (!out)
        return -EINVAL;
    /* Printed into memory first: the registry is locked while it is
     * walked, and out may be a pipe that a coroutine has to drain. */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    struct goro_out o = { .file = mem ? mem : out, .fd = -1 };
    goro__dump_out(&o, NULL, GORO_DUMP_LEAKS);
    if (mem) {
        if (fclose(mem) != 0) {
            free(text);
            return -ENOMEM;
        }
        fwrite(text, 1, len, out);
        free(text);
    }
    return ferror(out) ? -EIO : 0;
}

/* ---- SIGQUIT ---- */

static _Atomic int dumping;

/* goro__ though static: see goro__on_sigurg (preempt.c). */
static void goro__on_sigquit(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    int saved = errno;
    if (!atomic_exchange(&dumping, 1)) {
        struct goro_out o = { .file = NULL, .fd = 2 };
        goro__dump_out(&o, uc, GORO_DUMP_IN_SIGNAL);
        atomic_store(&dumping, 0);
    }
    errno = saved;
}

/* Called once, when the runtime first starts (goro__fault_install). */
void goro__dump_install(void)
{
    if (!goro__env_flag("GORO_DUMP_ON_SIGQUIT", false))
        return;
    /* On the alternate stack where there is one: the interrupted
     * coroutine may have little stack left, and unwinding takes some. */
    goro__sigaction(SIGQUIT, goro__on_sigquit, NULL);
}
