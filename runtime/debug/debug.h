/* debug/: what people and tools see - the registry of coroutines and the
 * exported goro_debug description gdb reads (registry.c), the crash and
 * overflow reports with their backtraces (fault.c) and goro_dump (dump.c).
 *
 * It reads the records of every layer (internal.h's data model) to report
 * on them, and calls base/ and, of the other layers, only what they offer
 * it by name: the scheduler's read-only "inspect", the one request it may
 * make of a worker ("sample": a stall sample), the stack space, the wait
 * graph and the signal subscriptions. Every layer reports through it.
 *
 * layer: debug - what people and tools see: the registry gdb reads, crash
 *     and stall reports, dumps, the deadlock check, the wait graph, leaks,
 *     the execution trace
 * may call: base
 * uses: inspect, sample, stacks, waitgraph, signals
 * contract fatal for all: goro__backtrace_fd goro__trace_die goro__symbolize
 * contract reports for sched, coro, io: goro__registry_add
 *     goro__registry_remove goro__registry_last goro__trace_on
 *     goro__trace_name goro__trace_emit goro__trace_addr goro__sigaction
 *     goro__sig_chain
 * contract monitor for sched: goro__registry_set_ms
 *     goro__fault_thread_init goro__fault_thread_fini goro__dump_out
 *     goro__deadlock_pending goro__stall_leaving goro__stall_asked
 *     goro__stall_answer goro__stall_sample goro__stall_check
 *     goro__stall_check_threads goro__stall_flush goro__stall_handoff
 *     goro__stall_pending
 */
#ifndef GORO_DEBUG_DEBUG_H
#define GORO_DEBUG_DEBUG_H

#include <stdio.h>

#include "internal.h"
#include "wait/waitq.h"

/* registry.c */
GORO_HIDDEN int goro__registry_add(struct goro *g);
GORO_HIDDEN void goro__registry_remove(struct goro *g);
GORO_HIDDEN void goro__registry_set_ms(struct goro_m *ms, int n);
GORO_HIDDEN struct goro *goro__registry_last(void);
/* Calls fn for every registered slab, with no slab unmapped meanwhile;
 * in_signal: gives up waiting for the lock after a while and returns 1. */
GORO_HIDDEN int goro__registry_walk(void (*fn)(struct goro *g, void *arg), void *arg,
                                    bool in_signal);
GORO_HIDDEN struct goro_m *goro__registry_ms(int *n);
GORO_HIDDEN const char *goro__state_name(int state);
GORO_HIDDEN const char *goro__wait_name(int wait);

/* fault.c */
GORO_HIDDEN int goro__fault_thread_init(struct goro_m *m);
GORO_HIDDEN void goro__fault_thread_fini(struct goro_m *m);
GORO_HIDDEN void goro__fault_install(void);
/* Installs handler for sig as the runtime's handlers all are: SA_SIGINFO,
 * on the per-M alternate stack (a coroutine may be near its stack's end),
 * restarting interrupted calls, nothing extra blocked. old: as sigaction. */
GORO_HIDDEN int goro__sigaction(int sig, void (*handler)(int, siginfo_t *, void *),
                                struct sigaction *old);
/* Calls the handler act names, if it names one (not SIG_DFL or SIG_IGN):
 * for chaining to what the program installed before us. */
GORO_HIDDEN bool goro__sig_chain(const struct sigaction *act, int sig, siginfo_t *si, void *uc);
GORO_HIDDEN void goro__backtrace_fd(int fd, void *ucontext);
/* Where reports go: a FILE, or (file NULL) a descriptor written with
 * write(2), which is what a signal handler uses. */
struct goro_out {
    FILE *file;
    int fd;
};
GORO_HIDDEN void goro__outf(struct goro_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* write(2) until all of it is out, EINTR retried; gives up on an error. */
GORO_HIDDEN void goro__write_all(int fd, const char *s, size_t n);
/* The backtrace of a signal context, or of the caller if ucontext is NULL. */
GORO_HIDDEN void goro__backtrace_out(struct goro_out *o, void *ucontext);
/* The backtrace of a coroutine that is not running, from its saved context. */
GORO_HIDDEN void goro__backtrace_saved(struct goro_out *o, const struct goro *g);
/* The code addresses of a signal context's frames, innermost first, at
 * most max; a fault while reading (a stack that makes no sense) cuts the
 * walk short. For a signal handler: names come later (goro__symbolize). */
GORO_HIDDEN int goro__backtrace_ips(void *ucontext, uintptr_t *ips, int max);
/* Copies len bytes from memory that may be unmapped meanwhile (another
 * thread's coroutine); false if a fault cut the copy short. */
GORO_HIDDEN bool goro__copy_guarded(void *dst, const void *src, size_t len);
/* "name" or "name+0x12" or the address, for a code address. */
GORO_HIDDEN void goro__symbolize(const void *ip, char *buf, size_t len);

/* watch.c: a report callback the program may replace while the monitor
 * thread calls it (the file says how). fn is stored as void (*)(void):
 * each user casts it back to its own type. begin returns the fn to call
 * (NULL: none), which the caller follows with done. */
struct goro_watch {
    goro_lock_t lock;
    void (*fn)(void);              /* under lock */
    void *arg;
    _Atomic int calling;           /* the monitor is in a fn it read */
};
#define GORO_WATCH_INIT { GORO_LOCK_INIT_RANK(GORO_RANK_LEAF), NULL, NULL, 0 }
GORO_HIDDEN void goro__watch_set(struct goro_watch *w, void (*fn)(void), void *arg);
GORO_HIDDEN bool goro__watch_isset(struct goro_watch *w);
GORO_HIDDEN void (*goro__watch_begin(struct goro_watch *w, void **arg))(void);
GORO_HIDDEN void goro__watch_done(struct goro_watch *w);

/* stall.c (the file says how; sysmon and the SIGURG handler call it) */
GORO_HIDDEN void goro__stall_start(void);
GORO_HIDDEN void goro__stall_check(struct goro_p *p, int64_t now);
GORO_HIDDEN void goro__stall_handoff(struct goro_p *p, struct goro_m *m);
GORO_HIDDEN void goro__stall_check_threads(int64_t now);
GORO_HIDDEN bool goro__stall_pending(void);
GORO_HIDDEN bool goro__stall_asked(struct goro_m *m);
GORO_HIDDEN void goro__stall_sample(struct goro_m *m, struct goro *g, void *uc);
GORO_HIDDEN void goro__stall_answer(struct goro_m *m, int why);
GORO_HIDDEN void goro__stall_dump(struct goro_out *o);
GORO_HIDDEN void goro__stall_leave(struct goro_m *m);
GORO_HIDDEN void goro__stall_flush(void);
/* A coroutine leaves its slice (switch_to): a stall of it that sysmon
 * counted ends here, before anything it wakes (a joiner) runs. */
static inline void goro__stall_leaving(struct goro_m *m)
{
    struct goro_p *p = m->p;
    if (__builtin_expect((p && atomic_load_explicit(&p->sm_stall.open, memory_order_relaxed)) ||
                         atomic_load_explicit(&m->sm_stall.open, memory_order_relaxed), 0))
        goro__stall_leave(m);
}

/* waitgraph.c: who waits on what, and who alone can end each wait - a
 * snapshot for the deadlock and leak reports (the file says how). */
struct goro_wnode {
    const struct goro *g;          /* the record; NULL: goro_shutdown's thread */
    uint64_t id;
    char name[32];
    pid_t tid;                     /* outside: the thread */
    int state;                     /* enum goro_state */
    uint8_t wait;                  /* enum goro_wait, while PARKED */
    bool timed;                    /* a deadline ends the wait */
    bool outside;                  /* a thread the runtime does not own */
    bool by_outside;               /* the world outside may end it: I/O, time, offload */
    bool woken;                    /* its wait was ended (claimed), it has not run yet */
    uint8_t held;                  /* enum goro_held */
    uint8_t mark;                  /* the checks' own */
    const void *obj;
    const struct goro_group *group;  /* the group it is a member of */
    const struct goro *holder;     /* who alone can end the wait (held) */
    uint64_t holder_id;
    int holder_node;               /* the holder's node, or -1 */
    int chan0, nchans;             /* its channels in chans[] */
    size_t records;                /* a select's own records on the heap, from obj */
    uintptr_t sp, lo, hi;          /* its stack (sp: 0 while it runs) */
};
struct goro_wgraph {
    struct goro_wnode *nodes;      /* sorted by record */
    int n;
    size_t cap;
    const void **chans;
    int nchans;
    size_t chans_cap;
    bool inexact;                  /* the registry was busy */
    bool incomplete;               /* no memory for all of it */
};
GORO_HIDDEN int goro__waitgraph_build(struct goro_wgraph *wg);
GORO_HIDDEN void goro__waitgraph_free(struct goro_wgraph *wg);
/* Sorts without copying elements elsewhere (qsort may, to the heap). */
GORO_HIDDEN void goro__sort_in_place(void *base, size_t n, size_t size,
                                     int (*cmp)(const void *, const void *));
GORO_HIDDEN int goro__waitgraph_find(const struct goro_wgraph *wg, const struct goro *g);
/* The graph's own memory, which a scan for pointers must leave out. */
GORO_HIDDEN void goro__waitgraph_each_range(const struct goro_wgraph *wg,
                                            void (*fn)(const void *lo, size_t len, void *arg),
                                            void *arg);
/* "  coroutine 3 "a" waits: mutex 0x..., held by coroutine 4 "b"" */
GORO_HIDDEN void goro__waitgraph_print_node(struct goro_out *o, const struct goro_wgraph *wg,
                                            int i);
GORO_HIDDEN int goro__waitgraph_cycles(struct goro_out *o, const struct goro_wgraph *wg,
                                       uint8_t *in_cycle);

/* deadlock.c, leaks.c */
GORO_HIDDEN void goro__deadlock_start(void);
/* sysmon, with every P idle, before it sleeps: how long it may sleep
 * (ns) before it asks again, -1 for as long as nothing wakes it. */
GORO_HIDDEN int64_t goro__deadlock_pending(int64_t now);
GORO_HIDDEN void goro__leaks_dump(struct goro_out *o);

/* dump.c */
GORO_HIDDEN void goro__dump_install(void);
/* how: from a signal handler (nothing allocated, the registry maybe
 * busy), plain, or with the leak scan's line (goro_dump). */
enum { GORO_DUMP_PLAIN, GORO_DUMP_LEAKS, GORO_DUMP_IN_SIGNAL };
GORO_HIDDEN void goro__dump_out(struct goro_out *o, void *ucontext, int how);
/* "chan recv 0x...", "io fd=12", "join coroutine 7": what g waits for. */
GORO_HIDDEN void goro__describe_wait(const struct goro *g, char *buf, size_t len);
GORO_HIDDEN void goro__describe_wait_of(int wait, const void *obj, char *buf, size_t len);

/* trace.c, trace_json.c: the execution trace (the files say how). Every
 * event costs one relaxed load while no trace runs; GORO_NO_TRACE builds
 * the library without even that (the bench compares the two). */
enum goro_tev_type {
    GORO_TEV_NONE,
    GORO_TEV_SPAWN,     /* g: the new one; arg: its spawner (0: a thread) */
    GORO_TEV_NAME,      /* g; text: 14 bytes of its name from byte 14 * c */
    GORO_TEV_RUN,       /* g starts a slice on this thread */
    GORO_TEV_STOP,      /* g leaves: a enum goro_post, b enum goro_wait; arg: the object */
    GORO_TEV_READY,     /* g made runnable by arg (0: not a coroutine) */
    GORO_TEV_TIMER,     /* a timer fired: g its sleeper (0: a function timer) */
    GORO_TEV_IO,        /* the poller found g's descriptor ready */
    GORO_TEV_STEAL,     /* g was taken from P x's queue (with half of it) */
    GORO_TEV_IDLE,      /* this worker sleeps: nothing to run */
    GORO_TEV_BUSY,      /* it woke */
    GORO_TEV_PREEMPT,   /* the monitor asks P x's slice to end (worker arg) */
    GORO_TEV_BLOCKED,   /* the monitor: worker arg is blocked in the kernel */
    GORO_TEV_HANDOFF,   /* the monitor gives P x from worker g to worker arg */
    GORO_TEV_STACK_GC,  /* x stacks unmapped, or the deep part of one trimmed: arg bytes */
    GORO_TEV_DL_THROTTLE,  /* reserved g spent its budget: waits arg ns (sched/deadline.c) */
    GORO_TEV_DL_MISS,   /* reserved g ended a job arg ns past its deadline */
    GORO_TEV_DL_PERIOD, /* reserved g's deadline is now + arg ns (int64; its period
                           began x us before that deadline: the relative deadline) */
    GORO_TEV__COUNT
};
/* 32 bytes; text overlays arg..b (a NAME's characters). */
struct goro_tev {
    uint64_t ticks;
    uint64_t g;
    uint64_t arg;
    uint32_t x;
    uint8_t a, b;
    uint8_t c;
    uint8_t type;
};
#define GORO_TEV_TEXT 14
static inline bool goro__trace_on(void)
{
#ifdef GORO_NO_TRACE
    return false;
#else
    return unlikely(atomic_load_explicit(&goro__sched.tracing, memory_order_relaxed));
#endif
}
GORO_HIDDEN __attribute__((cold)) void goro__trace_emit(int type, uint64_t g, uint64_t arg,
                                                        uint32_t x, int a, int b);
#define GORO_TRACE(type, g, arg, x, a, b)                                \
    do {                                                                 \
        if (goro__trace_on())                                            \
            goro__trace_emit((type), (g), (arg), (x), (a), (b));         \
    } while (0)
/* An address as an event stores it: inverted, so that the leak scan
 * (leaks.c) does not take the ring for a reference to the object. */
static inline uint64_t goro__trace_addr(const void *p)
{
    return ~(uint64_t)(uintptr_t)p;
}
/* NAME events for g's name (none if it has none). */
GORO_HIDDEN __attribute__((cold)) void goro__trace_name(const struct goro *g);
/* GORO_TRACE at start; the trace it began ends at shutdown (or exit). */
GORO_HIDDEN void goro__trace_env_start(void);
GORO_HIDDEN void goro__trace_env_stop(void);
/* What trace.c hands the writer: one thread's events of this trace. */
struct goro_trace_ring {
    const struct goro_tev *ev;
    uint64_t mask;                 /* the ring's size - 1 */
    uint64_t from, to;             /* event numbers [from, to) */
    int kind;                      /* GORO_TRACK_* */
    int id;                        /* a worker's number, or a thread's id */
};
enum { GORO_TRACK_WORKER, GORO_TRACK_MONITOR, GORO_TRACK_THREAD };
struct goro_trace_clock {
    uint64_t t0, t1;               /* ticks at start and at stop */
    int64_t ns0, ns1;              /* CLOCK_MONOTONIC then */
};
/* Where the writer writes, and what it says of the trace's end. */
struct goro_trace_out {
    int fd;
    const char *ended;             /* otherData.ended: "stopped", "signal SIGSEGV", ... */
    const char *under_way;         /* why a slice under way at the end ended */
    const char *incomplete;        /* otherData.complete: "no: <this>"; NULL: yes */
};
/* Async-signal-safe: it may write from a fatal signal's handler (trace.c). */
GORO_HIDDEN int goro__trace_write(const struct goro_trace_out *o, const struct goro_trace_ring *v,
                                  int n, const struct goro_trace_clock *clk, uint64_t dropped);
/* A fatal end (a crash, the runtime's own abort): writes the trace under
 * way, if any, saying `why` ended it. Async-signal-safe; a no-op when no
 * trace runs, in a forked child, or when another thread writes it. */
GORO_HIDDEN void goro__trace_die(const char *why);

#endif
