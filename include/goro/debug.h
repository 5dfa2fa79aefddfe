/*
 * goro/debug.h: looking inside a running program (docs/debugging.md) -
 * the dump of every coroutine, stall reports, deadlock and leak reports,
 * the execution trace. goro.h includes it; it may be included alone.
 */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_DEBUG_H
#define GORO_DEBUG_H

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------
 * Debugging
 * ------------------------------------------------------------------------ */

/* Prints every coroutine - id, name, state, what it waits on, entry
 * function and a backtrace - and every worker, to out. Meant for humans
 * (the format may change). With GORO_DUMP_ON_SIGQUIT=1 in the
 * environment, SIGQUIT prints it to stderr and the process goes on.
 * Returns 0 or a negative errno. */
int goro_dump(FILE *out);

/* ---- Stall reports (docs/debugging.md, "Stalls") ----
 * A stall: a coroutine that keeps its worker for threshold or longer
 * without a switch - a long computation in code that cannot be preempted
 * (a library, a no-preempt section), or a blocking system call. The monitor thread notices it, samples the
 * coroutine where it runs (a signal to its worker, whose handler walks its
 * stack with libunwind; never for a thread blocked in the kernel, whose
 * call would fail with EINTR: the call is named instead) and reports it
 * once: its id and name, how long so far, why preemption did not end it,
 * and the backtrace. When the stall ends its length goes into a histogram
 * (goro_stall_stats, goro_dump). */

/* Why preemption did not end a stall. */
typedef enum goro_stall_why {
    GORO_STALL_PREEMPTIBLE,   /* it could be preempted where it was sampled
                                 (or GORO_SLICE=off asked for no preemption) */
    GORO_STALL_FOREIGN,       /* in code not marked preemptible (a library) */
    GORO_STALL_NOPREEMPT,     /* inside goro_preempt_disable */
    GORO_STALL_RUNTIME,       /* inside goro's own code */
    GORO_STALL_ASYNC_OFF,     /* asynchronous preemption is off (GORO_PREEMPT=0,
                                 valgrind, TSan) */
    GORO_STALL_BLOCKED,       /* blocked in the kernel (a system call) */
    GORO_STALL_UNANSWERED     /* its worker did not answer the sampling signal */
} goro_stall_why_t;

/* One stall, as a report callback receives it. Every pointer is valid
 * during the call only. */
typedef struct goro_stall {
    uint64_t id;              /* the coroutine */
    const char *name;         /* its name, "" if it has none */
    int worker;               /* the worker it holds */
    int64_t ns;               /* how long it had run when sampled */
    goro_stall_why_t why;
    const char *reason;       /* why, in words, naming the library if any */
    int nframes;              /* backtrace depth; 0 when none was taken */
    const void *const *frames;  /* code addresses, innermost first */
    const char *text;         /* the whole report as stderr would get it */
} goro_stall_t;

/* Called on the monitor thread, for each stall; must return quickly and
 * must not wait on anything of goro's. */
typedef void (*goro_stall_fn)(const goro_stall_t *stall, void *arg);

/* Reports stalls of threshold_ns or longer from now on: to fn, each one,
 * if fn is given; else to stderr, at most one report a second (those
 * left out are summed up once the second is over, or at shutdown, naming
 * the last). Every stall is counted in goro_stall_stats whether reported
 * or not. threshold_ns 0 turns reports off. May be
 * called before or after goro_start; GORO_STALL=<ms> in the environment
 * does the same at each start (stderr). Once it returns, the previous fn
 * is not running (unless it is the caller) and is not called again: its
 * arg may be freed. Returns 0, or -EINVAL for a threshold below 1 ms
 * (GORO_MSEC) other than 0. */
int goro_stall_watch(int64_t threshold_ns, goro_stall_fn fn, void *arg);

#define GORO_STALL_BUCKETS 16
/* Stalls since the process began (across restarts). bucket i counts ended
 * stalls of 2^i to 2^(i+1) ms (bucket 0: under 2 ms, the last: 2^15 ms or
 * more), whatever the threshold was when each was seen. A stall is in
 * the buckets once its coroutine has left the slice: by the time a join
 * of that coroutine returns, say. */
typedef struct goro_stall_stats {
    int64_t threshold_ns;     /* now; 0: off */
    uint64_t stalls;          /* seen, ongoing ones included */
    uint64_t reported;        /* reports made (callback or stderr) */
    uint64_t suppressed;      /* left out of stderr by the one-a-second rule */
    int64_t longest_ns;       /* of the ended ones */
    uint64_t buckets[GORO_STALL_BUCKETS];
} goro_stall_stats_t;

/* Fills *st. Returns 0, or -EINVAL for NULL. */
int goro_stall_stats(goro_stall_stats_t *st);

/* ---- Deadlocks and leaks (docs/debugging.md, "Deadlocks and leaks") ----
 * A deadlock: no coroutine can ever run again, and a thread waits for one.
 * Precisely: every coroutine is parked, on nothing a timer, a descriptor,
 * an offload or a signal could end; at least one thread outside the
 * runtime waits in a goro call with no deadline (goro_join, a channel, a
 * lock, goro_shutdown), none waits with one, and every other thread of
 * the process is one of the runtime's own. (A thread doing anything else
 * might still send, unlock or cancel: then nothing is said.) The monitor
 * thread notices within about 100 ms and reports, as Go does, "goro: all
 * coroutines are asleep - deadlock!", who waits for what, who holds each
 * lock, the cycles among them, and the dump (goro_dump) - then aborts, so
 * that a core file keeps the scene for gdb. GORO_DEADLOCK=report in the
 * environment reports and goes on; GORO_DEADLOCK=off checks nothing (read
 * at each start). */

/* Called on the monitor thread with the report (valid during the call)
 * instead of stderr and the abort; it may cancel coroutines to break the
 * deadlock, or end the process. Must not wait on anything of goro's. */
typedef void (*goro_deadlock_fn)(const char *report, void *arg);

/* Sends deadlock reports to fn from now on (NULL: back to stderr and the
 * GORO_DEADLOCK setting; with fn set, the check runs even when that says
 * off). One report per deadlock: the next comes only after something has
 * run. Once it returns, the previous fn is not running (unless it is the
 * caller) and is not called again. Returns 0. */
int goro_deadlock_watch(goro_deadlock_fn fn, void *arg);

/* A leak: a coroutine parked for good while the rest of the program goes
 * on. goro_leaks finds those parked, with no deadline,
 *   - in a cycle of waits (two coroutines that each hold the mutex the
 *     other wants, a coroutine that joins one that joins it back), or on
 *     a lock held by a coroutine that has ended or is itself leaked, or
 *     joining one that is leaked, or on a group whose members all are;
 *   - on channels that nothing else can reach: no memory outside the
 *     leaked coroutines' own stacks holds their address - the heap, the
 *     globals, the stacks of threads and of the coroutines that can still
 *     run are read for it (a forgotten child that sends its result to a
 *     parent that gave up).
 * The scan is conservative: memory that still holds a stale copy of a
 * channel's address (a freed block, a dead frame) keeps it reachable, so
 * a leak may be missed, but nothing reachable is called leaked (unless its
 * address is hidden: XORed, or only in a register or the kernel).
 * Waits on conditions, semaphores and wait groups are not judged: they
 * live inside the program's own structures, which only a tracing
 * collector could follow. Writes one line per leaked coroutine with its
 * backtrace to out (NULL: count only) and returns how many it found, or
 * -ENOMEM. It reads all the process's memory: seconds for gigabytes. */
int goro_leaks(FILE *out);

/* ---- Execution trace (docs/debugging.md, "Execution trace") ----
 * What the scheduler does, event by event: spawns, time slices, waits
 * with what they wait on, wake-ups (with who woke whom), steals,
 * preemption, hand-offs of a worker blocked in a system call, timers,
 * ready descriptors, idle workers, stacks given back. Each thread records
 * into a ring of its own (no lock; about 10-20 ns an event); a full ring
 * keeps its latest events. goro_trace_stop writes the Chrome trace event
 * format that ui.perfetto.dev and chrome://tracing open (a track per
 * worker and per coroutine, arrows for wake-ups); tools/goro-trace-svg
 * draws it without a browser. GORO_TRACE=file.json in the environment
 * traces from the first goro_start to goro_shutdown (or exit). A process
 * that dies of a crash or an abort (a fatal signal, the deadlock abort)
 * writes the trace under way up to its death. */
typedef struct goro_trace_attr {
    /* Ring per recording thread, in bytes (32 per event), rounded down to
     * a power of two; 0: GORO_TRACE_BUFFER from the environment, else
     * 64 MiB. Mapped lazily: only what is written takes memory. */
    size_t buffer_size;
} goro_trace_attr_t;

/* Creates (truncates) path and starts recording; attr may be NULL.
 * Returns 0; -EINVAL (no path, buffer_size outside 64 KiB..16 GiB),
 * -EBUSY (a trace is under way), or open(2)'s error. The runtime need not
 * be running. */
int goro_trace_start(const char *path, const goro_trace_attr_t *attr);

/* Stops recording and writes the file, on the calling thread (seconds for
 * millions of events; call it where that is acceptable). Returns 0;
 * -EINVAL if no trace is under way; a write error (the file is then
 * incomplete); -ENOMEM (the file is complete JSON but lacks coroutine
 * tracks); -ECANCELED (the process is dying and writes the file itself). */
int goro_trace_stop(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* GORO_DEBUG_H */
