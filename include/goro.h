/*
 * goro: Go-style concurrency for C.
 *
 * This header and the ones beside it in goro/, which it includes at its
 * end, are the whole public contract. Everything in them is prefixed
 * goro_ / GORO_, except the spawn macro `go`. This one holds the core, in
 * the order a program meets it: the runtime, spawning and joining,
 * channels, select, synchronisation, time and cancellation, I/O. The
 * others hold what fewer programs need:
 *   goro/structured.h  priorities, error objects, groups (the cancellation
 *                      tree), single-flight
 *   goro/pipeline.h    pipelines
 *   goro/debug.h       dumps, stall and deadlock watches, leaks, the trace
 *   goro/cxx.h         the C++ forms (C++17)
 *   goro/process.h     child processes: spawn, pipes, wait, kill
 *   goro/net.h         listen and dial by name, Happy Eyeballs
 *   goro/stream.h      buffered readers and writers, goro_copy, fd passing
 * Including goro.h is all a program needs; each goro/ header may also be
 * included alone (it includes goro.h first).
 *
 * Error convention (uniform across the API):
 *   Calls that can fail return 0 (or a non-negative count) on success and a
 *   NEGATIVE errno value on failure, e.g. -EINVAL. They never report through
 *   errno, because a coroutine may resume on another thread and compilers may
 *   keep the address of the previous thread's errno in a register across a
 *   call (see docs/api.md, "Errors"). The only exception is go(), which
 *   returns NULL and sets errno, like malloc.
 *
 * Threads: coroutines run on the runtime's worker threads and may resume on
 * a different worker after any call that can switch (marked "may switch"
 * below). Threads the runtime does not own may call go(), goro_join() and the
 * channel / sync calls too: there, waiting blocks the calling thread.
 *
 * Signal handlers: no goro call is async-signal-safe except goro_now().
 * The others take short internal locks (the try forms too), allocate or
 * switch: one made from a handler that interrupted its thread inside goro
 * can wait for ever for a lock that thread holds (builds with -DGORO_DEBUG
 * abort with a message instead). Write to a pipe or an eventfd in the
 * handler and read it with goro_read() in a coroutine (docs/api.md,
 * "Signal handlers").
 */
#ifndef GORO_H
#define GORO_H

#if defined(__cplusplus) && __cplusplus < 201703L
#error "goro.h needs C++17 or later: compile with -std=c++17"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

#define GORO_VERSION_MAJOR 0
#define GORO_VERSION_MINOR 1
/* ------------------------------------------------------------------------
 * Runtime
 * ------------------------------------------------------------------------ */

/* Settings for goro_start(). Zero fields mean "the default". A bad value
 * in the environment is ignored with a line on stderr ("goro: ignoring
 * NAME=VALUE (want ...)") and the default is used (docs/api.md). */
typedef struct goro_config {
    int workers;          /* worker threads; default: GORO_WORKERS or online CPUs */
    size_t stack_size;    /* default stack reserve; default: GORO_STACK_SIZE or 256 KiB */
    int64_t slice_ns;     /* time slice before preemption; default: GORO_SLICE
                             (milliseconds) or 10 ms; negative: never preempt */
    /* The clock: GORO_CLOCK_VIRTUAL is the deterministic testing mode
     * (docs/testing.md): one worker, no preemption, the seed below
     * choosing which runnable coroutine goes next, and a virtual goro_now()
     * that stands still while coroutines run and jumps to the next
     * deadline when none can. default: GORO_TEST_CLOCK (real or virtual),
     * else real. */
    int clock;            /* enum goro_clock */
    uint64_t seed;        /* default: GORO_TEST_SEED, else 1 */
} goro_config_t;

enum goro_clock { GORO_CLOCK_DEFAULT, GORO_CLOCK_REAL, GORO_CLOCK_VIRTUAL };

/* Starts the runtime. Optional: the first go() starts it with the defaults.
 * Returns 0, -EALREADY if it is running, -EINVAL for a bad setting,
 * -EAGAIN / -ENOMEM if threads or memory could not be had, or -EMFILE /
 * -ENFILE if descriptors could not (each worker's event base takes five; a
 * one-line message names the cause). A failed start leaves nothing behind
 * and may be tried again. -ENOTRECOVERABLE in a forked child (below). */
int goro_start(const goro_config_t *config);

/* Waits until every coroutine has finished, then stops the worker threads
 * and releases all memory the runtime holds, including handles that were
 * never joined. Call from a thread the runtime does not own (e.g. main).
 * Returns 0, -EPERM from inside a coroutine, -ENOTCONN if not started,
 * -ENOTRECOVERABLE in a forked child (below). The runtime may be started
 * again afterwards. While it waits, go() and goro_spawn from threads the
 * runtime does not own fail with -ESHUTDOWN (coroutines may still spawn:
 * their children are waited for too). After 10 s it prints once, to
 * stderr, which coroutines it is waiting for. */
int goro_shutdown(void);

/* goro_shutdown, giving up at deadline (goro_now() clock): -ETIMEDOUT if
 * coroutines are still alive then; the runtime is left running as it was
 * (outside spawns are accepted again) and may be shut down later. */
int goro_shutdown_until(int64_t deadline);

/* fork(): the runtime does not survive it. In a child forked while the
 * runtime runs, the runtime's state (shared epoll instances included) is
 * the parent's: every goro call that would start, stop, spawn, wait or do
 * I/O returns -ENOTRECOVERABLE at once (go(): NULL, errno set), with one
 * line on stderr; goro_close only closes, leaving the parent's
 * registration alone. Call only exec*() or _exit() there; posix_spawn and
 * fork + exec work as usual. A child forked while the runtime is not
 * running (never started, or shut down) may start one of its own. */

/* Number of worker threads of the running runtime (0 if not started). */
int goro_workers(void);

/* ------------------------------------------------------------------------
 * Coroutines: spawn, join, detach
 * ------------------------------------------------------------------------ */

typedef struct goro goro_t;
typedef struct goro_group goro_group_t;   /* a group: goro/structured.h */

/* Per-spawn options. Zero fields mean "the default". A stack overflow is
 * caught by a 64 KiB guard and reported; a frame larger than that is caught
 * only in code built with -fstack-clash-protection (pkg-config --cflags
 * goro has it; docs/api.md, "Stacks"). */
typedef struct goro_attr {
    const char *name;     /* copied (first 31 bytes); shown by debugging tools */
    size_t stack_size;    /* reserve in bytes, rounded up to pages; 16 KiB..1 GiB */
    goro_group_t *group;  /* spawn into this group (no handle: h must be NULL);
                             see goro_group_go, goro/structured.h */
    int priority;         /* enum goro_priority (goro/structured.h); 0: the spawner's */
    const struct goro_dl *deadline;   /* a reservation (goro/deadline.h), admitted
                                         at the spawn (-EBUSY refused); NULL: none */
} goro_attr_t;

/*
 * go(fn, args...) spawns a coroutine that runs fn(args...) and returns its
 * handle, or NULL with errno set (EINVAL: fn is NULL; EAGAIN / ENOMEM: no
 * memory or mapping for a stack - a one-line message names the cause; or
 * what goro_start returned, when this go() started the runtime).
 *
 *   static int add(int a, int b) { return a + b; }
 *   goro_t *h = go(add, 2, 3);
 *   long r;
 *   goro_join(h, &r);                           // r == 5
 *
 * fn is any function (or function pointer) with any parameters; the
 * arguments are evaluated once, in the caller, and checked and converted by
 * the compiler exactly as in a direct call fn(args...). Limits, checked at
 * compile time: at most GORO_MAX_ARGS arguments, each at most 16 bytes
 * (pass larger objects by pointer); fn returns void, an integer, an enum,
 * bool or a pointer, which goro_join() hands back as a long.
 *
 * The handle must be joined (goro_join) or detached (goro_detach) exactly
 * once; it stays valid until then.
 */
#define go(...) goro__go_handle(__VA_ARGS__)

/* goro_go(&h, &attr, fn, args...): the full form. h may be NULL, which
 * spawns the coroutine detached; attr may be NULL. Returns 0 or -errno.
 *
 * An attribute made in place with more than one field is written
 * GORO_ATTR(fields...), or in parentheses:
 *
 *   goro_go(&h, GORO_ATTR(.name = "x", .stack_size = 65536), fn, 1);
 *   goro_go(&h, (&(goro_attr_t){ .name = "x", .stack_size = 65536 }), fn, 1);
 *
 * (the preprocessor splits a macro's arguments at every comma outside
 * parentheses, braces included, and no macro can tell afterwards how many
 * of the pieces were the attribute and how many fn's arguments). One field
 * needs neither: &(goro_attr_t){ .name = "x" }. */
#define goro_go(h, attr, ...) goro__go((h), attr, __VA_ARGS__)

/* A pointer to a goro_attr_t made in place from designated fields; it
 * lives until the end of the enclosing block. C only: in C++ goro_go is a
 * function, and takes the address of a named goro_attr_t. */
#ifndef __cplusplus
#define GORO_ATTR(...) (&(goro_attr_t){ __VA_ARGS__ })
#endif

/* Plain-function form, for bindings and for code that prefers void *:
 * runs fn(arg); its return value is the join result. */
int goro_spawn(goro_t **h, const goro_attr_t *attr,
               long (*fn)(void *), void *arg);

/* Waits for h to finish (may switch) and releases it. If result is not
 * NULL it receives the function's return value (or goro_exit's argument).
 * Returns 0, or -EINVAL (NULL or detached handle), -EDEADLK (joining
 * itself), -ESHUTDOWN (from a thread the runtime does not own, once
 * goro_shutdown has released h: it releases unjoined handles after every
 * coroutine has ended). Joining a handle twice is undefined: the handle is
 * gone after the first join. */
int goro_join(goro_t *h, long *result);

/* Lets h finish on its own; its resources are released when it ends.
 * Returns 0 or -EINVAL. h must not be used afterwards: to cancel it
 * later, take a goro_token() first. A detach from a thread the runtime
 * does not own may race goro_shutdown: once the shutdown has released h
 * (and until the runtime starts again) it returns 0 and leaves h alone. */
int goro_detach(goro_t *h);

/* The running coroutine, or NULL on a thread that is not running one. */
goro_t *goro_self(void);

/* Lets other runnable coroutines run (may switch). Returns at once when
 * called outside a coroutine. */
void goro_yield(void);

/* Ends the running coroutine with result (its join value). Does not return.
 * Outside a coroutine it is an error: prints a message and aborts. */
__attribute__((noreturn)) void goro_exit(long result);

/* Unique id, 1 or more (0 for NULL). Ids grow with time but are handed out
 * in small blocks per worker, so they are not strictly in spawn order. */
uint64_t goro_id(const goro_t *h);

/* Name given at spawn ("" if none). The string lives as long as h. */
const char *goro_name(const goro_t *h);

/* Renames the running coroutine (copies at most 31 bytes); -EPERM outside one. */
int goro_set_name(const char *name);

/* ------------------------------------------------------------------------
 * Channels (Go semantics). A channel carries fixed-size elements, copied
 * in and out. Capacity 0 is unbuffered: a send waits for a receiver.
 * Lifetime: goro_chan_new() -> any number of send/recv/select/close from
 * any coroutine or thread -> goro_chan_free() once nobody uses it.
 * ------------------------------------------------------------------------ */

typedef struct goro_chan goro_chan_t;

/* Creates a channel of capacity elements of elem_size bytes (elem_size may
 * be 0 for pure signalling). Returns 0, -EINVAL (NULL out, absurd sizes),
 * -ENOMEM. */
int goro_chan_new(goro_chan_t **ch, size_t elem_size, size_t capacity);

/* Frees ch. Returns 0, -EINVAL, -EBUSY if coroutines still wait on it. */
int goro_chan_free(goro_chan_t *ch);

/* Sends the element at elem (may switch). Returns 0, -EPIPE if ch is or
 * becomes closed (the element is not sent), -EINVAL for a NULL channel or
 * a NULL elem (allowed only when the element size is 0). */
int goro_chan_send(goro_chan_t *ch, const void *elem);

/* Receives into elem (may be NULL to discard; may switch). Returns 1 when
 * a value was received, 0 when ch is closed and drained (elem is zeroed),
 * -EINVAL for a NULL channel. Idiom: while (goro_chan_recv(ch, &v) > 0). */
int goro_chan_recv(goro_chan_t *ch, void *elem);

/* Non-blocking forms: -EAGAIN instead of waiting. */
int goro_chan_try_send(goro_chan_t *ch, const void *elem);
int goro_chan_try_recv(goro_chan_t *ch, void *elem);

/* Closes ch: waiting receivers get 0, waiting senders -EPIPE; buffered
 * values can still be received. Returns 0, -EPIPE if already closed,
 * -EINVAL. */
int goro_chan_close(goro_chan_t *ch);

/* Buffered elements now / capacity (racy snapshots; -EINVAL for NULL). */
long goro_chan_len(goro_chan_t *ch);
long goro_chan_cap(goro_chan_t *ch);

/* ------------------------------------------------------------------------
 * Select: wait for the first of several channel or descriptor cases
 * (Go's select statement)
 * ------------------------------------------------------------------------ */

/* Case kinds of goro_select: channel cases, and descriptor cases, which
 * wait for a descriptor to become readable / writable beside the channels. */
enum { GORO_SEND = 1, GORO_RECV = 2, GORO_FD_READ = 3, GORO_FD_WRITE = 4 };

/* One case of goro_select(). A NULL ch is never ready (as a nil channel
 * in Go), which lets a loop switch cases off.
 *
 * A descriptor case has op GORO_FD_READ or GORO_FD_WRITE, a NULL ch, and
 * elem pointing to the descriptor, an int read once per call:
 *     { .op = GORO_FD_READ, .elem = &sock }
 * It fires when the descriptor is ready as poll(2) saw it at that moment
 * (readable: data, end of file or an error; data left unread by an earlier
 * call counts). It reads and writes nothing: with several readers of one
 * descriptor another may take the data first, and the read that follows
 * finds nothing (goro_read then waits). Its result is GORO_READABLE (or
 * GORO_WRITABLE), or a negative errno: -EBADF for a bad descriptor or one
 * closed with goro_close while the select waits. A negative descriptor is
 * never ready, like a NULL channel. The descriptor is made non-blocking,
 * as by any goro I/O call. */
typedef struct goro_case {
    goro_chan_t *ch;
    int op;              /* GORO_SEND, GORO_RECV, GORO_FD_READ, GORO_FD_WRITE */
    void *elem;          /* send: the element (NULL only for size 0: else
                            -EINVAL); recv: destination or NULL;
                            descriptor cases: the int descriptor (not NULL) */
    int result;          /* out: as goro_chan_send / goro_chan_recv return;
                            descriptor cases: the readiness bit or -errno */
} goro_case_t;

#define GORO_SELECT_NOWAIT 0x1   /* a default case: never wait */

/* Waits until one case can proceed, performs it and returns its index
 * (may switch). When several are ready one is chosen uniformly at random.
 * With GORO_SELECT_NOWAIT returns -EAGAIN if none is ready. Returns
 * -EINVAL for bad arguments (a descriptor case with a channel or
 * without a descriptor); with no non-NULL channel, no descriptor case and
 * no NOWAIT, -EDEADLK (it would wait forever). */
int goro_select(goro_case_t *cases, int ncases, int flags);

/* ------------------------------------------------------------------------
 * Synchronisation. All of these park the coroutine, never the worker
 * thread (a thread the runtime does not own blocks instead). Each type is
 * a plain struct the caller owns: initialise with its _INIT macro or
 * _init(), destroy when no one uses it. No allocation.
 * ------------------------------------------------------------------------ */

typedef struct goro_mutex { uintptr_t opaque[6]; } goro_mutex_t;
typedef struct goro_rwlock { uintptr_t opaque[7]; } goro_rwlock_t;
typedef struct goro_cond { uintptr_t opaque[3]; } goro_cond_t;
typedef struct goro_sem { uintptr_t opaque[4]; } goro_sem_t;
typedef struct goro_waitgroup { uintptr_t opaque[4]; } goro_waitgroup_t;
typedef struct goro_once { uintptr_t opaque[4]; } goro_once_t;

#define GORO_MUTEX_INIT { { 0 } }
#define GORO_RWLOCK_INIT { { 0 } }
#define GORO_COND_INIT { { 0 } }
#define GORO_WAITGROUP_INIT { { 0 } }
#define GORO_ONCE_INIT { { 0 } }

/* Mutex: FIFO hand-off to waiters. Any coroutine may unlock it (as in Go).
 * lock: 0 (may switch), or -ECANCELED when a cancelled coroutine would
 * have to wait (see goro_cancel); trylock: 0 or -EBUSY; unlock: 0, or
 * -EPERM when it is not locked; destroy: 0 or -EBUSY when locked.
 * A coroutine that ends holding a mutex (or a rwlock's write side) leaves
 * it locked, as in Go: its waiters wait on until somebody unlocks it (any
 * coroutine or thread may), and nothing is lent to the ended holder. */
int goro_mutex_init(goro_mutex_t *mu);
int goro_mutex_lock(goro_mutex_t *mu);
int goro_mutex_trylock(goro_mutex_t *mu);
int goro_mutex_unlock(goro_mutex_t *mu);
int goro_mutex_destroy(goro_mutex_t *mu);

/* Readers-writer lock; a waiting writer holds back new readers.
 * wunlock releases the write side, whoever calls it (as Go's Unlock: a
 * hand-over, or a writer that ended), -EPERM if it is not written;
 * runlock releases one read (Go's RUnlock), -EPERM if nobody reads.
 * unlock releases the caller's side: the write side if the caller is the
 * writer, else one read; -EPERM if another coroutine or thread holds the
 * write side (release someone else's write lock with wunlock) or nobody
 * holds it. A thread is told apart by its record for the runtime, which a
 * later thread may reuse. */
int goro_rwlock_init(goro_rwlock_t *rw);
int goro_rwlock_rdlock(goro_rwlock_t *rw);
int goro_rwlock_wrlock(goro_rwlock_t *rw);
int goro_rwlock_tryrdlock(goro_rwlock_t *rw);
int goro_rwlock_trywrlock(goro_rwlock_t *rw);
int goro_rwlock_unlock(goro_rwlock_t *rw);
int goro_rwlock_runlock(goro_rwlock_t *rw);
int goro_rwlock_wunlock(goro_rwlock_t *rw);
int goro_rwlock_destroy(goro_rwlock_t *rw);

/* Condition variable bound to a goro_mutex_t at each wait. wait: unlocks
 * mu, parks, relocks mu before returning 0. No spurious wake-ups are made,
 * but callers should still re-check their predicate in a loop. */
int goro_cond_init(goro_cond_t *cv);
int goro_cond_wait(goro_cond_t *cv, goro_mutex_t *mu);
int goro_cond_signal(goro_cond_t *cv);
int goro_cond_broadcast(goro_cond_t *cv);
int goro_cond_destroy(goro_cond_t *cv);

/* Counting semaphore: acquire takes a unit or waits (FIFO); release adds
 * one. init: -EINVAL for a negative count. */
int goro_sem_init(goro_sem_t *sem, long count);
int goro_sem_acquire(goro_sem_t *sem);
int goro_sem_try_acquire(goro_sem_t *sem);   /* 0 or -EAGAIN */
int goro_sem_release(goro_sem_t *sem);
int goro_sem_destroy(goro_sem_t *sem);        /* -EBUSY with waiters */

/* Wait group: add(n) before starting n tasks, done() in each, wait() until
 * the count is 0. add making the count negative returns -EINVAL. */
int goro_waitgroup_init(goro_waitgroup_t *wg);
int goro_waitgroup_add(goro_waitgroup_t *wg, long n);
int goro_waitgroup_done(goro_waitgroup_t *wg);
int goro_waitgroup_wait(goro_waitgroup_t *wg);
int goro_waitgroup_destroy(goro_waitgroup_t *wg);

/* Runs fn exactly once over all callers; callers arriving while it runs
 * wait for it to finish (that wait is not cancellable). Returns 0, -EINVAL,
 * or -EDEADLK at once when fn itself - the coroutine or thread running it -
 * calls goro_once on the same once: it would wait for itself. fn must not
 * wait for another coroutine that calls goro_once on it either; that is
 * not detected, and both wait for ever. An fn that does not return - its
 * coroutine ends inside it (goro_exit, goro_exit_err), a C++ exception
 * passes through it - counts as run, as in Go: the waiters return 0 and
 * fn never runs again. */
int goro_once(goro_once_t *once, void (*fn)(void));

/* ------------------------------------------------------------------------
 * Time, deadlines and cancellation
 *
 * Every call that can wait has a form ending in _until that takes an
 * absolute deadline on goro_now()'s clock; past it the call gives up with
 * -ETIMEDOUT, having done nothing (nothing sent, received or locked).
 * GORO_FOREVER means no deadline, which is what the short forms use.
 * Every wait also honours the coroutine's deadline in force, if it has
 * one (goro_deadline_push, a group's deadline: goro/structured.h): it
 * ends by the nearer of the two, -ETIMEDOUT.
 *
 * goro_cancel(h) makes h's current wait, and every later one, return
 * -ECANCELED at once: I/O, sleep, channels, select, locks, semaphores, wait
 * groups and join. The coroutine then unwinds normally, releasing what it
 * holds (unlock, close and free never wait, so they still work). Only
 * goro_offload() and goro_once() waits run to their end; the next wait
 * reports the cancellation.
 * ------------------------------------------------------------------------ */

#define GORO_FOREVER ((int64_t)-1)
#define GORO_USEC ((int64_t)1000)
#define GORO_MSEC ((int64_t)1000000)
#define GORO_SEC ((int64_t)1000000000)

/* Nanoseconds on CLOCK_MONOTONIC: the clock of every deadline. */
int64_t goro_now(void);

/* Parks the coroutine for ns nanoseconds / until deadline (may switch);
 * outside a coroutine sleeps the thread. Returns 0, -ECANCELED, or
 * -ETIMEDOUT when the deadline in force comes first and cuts it short.
 * goro_sleep with ns > 0 always parks, so others run, however small ns;
 * goro_sleep(0) and goro_sleep_until a deadline already passed return
 * at once. */
int goro_sleep(int64_t ns);
int goro_sleep_until(int64_t deadline);

/* Tickers. A ticker delivers the time on a channel every period ns: the
 * scheduled time of each tick (start + k * period on goro_now()'s clock,
 * so ticks never drift by their own lateness). The channel holds one
 * tick; a tick that finds the previous one unread is dropped, and ticks
 * missed while the program could not run are skipped, not delivered in a
 * burst (Go's time.Ticker behaves the same). Receive with
 * goro_ticker_wait, or put goro_ticker_chan(t) in a select with
 * GORO_RECV and an int64_t to receive into.
 * Lifetime: goro_ticker_new() -> waits/selects from any coroutine or
 * thread -> goro_ticker_free() once nobody waits on it. */
typedef struct goro_ticker goro_ticker_t;

/* Starts a ticker whose first tick is due period ns from now. Returns 0,
 * -EINVAL (NULL t, period <= 0), -ENOMEM, or what starting the runtime
 * returned. */
int goro_ticker_new(goro_ticker_t **t, int64_t period);

/* The ticker's channel of int64_t tick times (capacity 1), for select.
 * Owned by the ticker: do not close or free it. NULL for a NULL t. */
goro_chan_t *goro_ticker_chan(goro_ticker_t *t);

/* Waits for the next tick (may switch); *tick (may be NULL) gets its
 * scheduled time. Returns 0, -ECANCELED, -EINVAL. */
int goro_ticker_wait(goro_ticker_t *t, int64_t *tick);

/* goro_ticker_wait, giving up at deadline (goro_now() clock): also
 * -ETIMEDOUT, with *tick unchanged and the tick, if one comes later,
 * left for the next wait. */
int goro_ticker_wait_until(goro_ticker_t *t, int64_t *tick, int64_t deadline);

/* Restarts the schedule: the next tick is due period ns from now (a tick
 * already delivered stays in the channel). After goro_shutdown it starts
 * the runtime again, as go() does. Returns 0, -EINVAL, or what starting
 * the runtime returned. */
int goro_ticker_reset(goro_ticker_t *t, int64_t period);

/* Ticks dropped or skipped so far because the reader was behind. */
uint64_t goro_ticker_dropped(const goro_ticker_t *t);

/* Stops and frees t; no tick is delivered once it returns. Returns 0,
 * -EINVAL, or -EBUSY (a coroutine waits on its channel: t keeps ticking,
 * untouched). */
int goro_ticker_free(goro_ticker_t *t);

/* Asks h to stop: see above. Cancelling twice, or a coroutine that has
 * finished but is not joined yet, is harmless. Returns 0 or -EINVAL. */
int goro_cancel(goro_t *h);

/* A token names one coroutine by value, for cancelling it after its
 * handle is gone (detached: it may end, and its memory serve another
 * coroutine, at any moment). Take it while the handle is valid, or from
 * the coroutine itself with goro_token(goro_self(), &tok):
 *
 *   goro_token_t tok;
 *   goro_token(h, &tok);
 *   goro_detach(h);
 *   ...
 *   goro_cancel_token(tok);      // from any coroutine or thread, any time
 *
 * A token is plain data: copy it, keep it as long as you like, share it
 * between threads; it holds nothing and is never released. It stays safe
 * to use after the coroutine has ended, after its memory is reused or
 * unmapped, and after goro_shutdown: it never reaches another coroutine.
 * id is goro_id() of the coroutine; the other fields are private. */
typedef struct goro_token {
    uint64_t id;
    uint32_t slot;
    uint32_t reserved;
} goro_token_t;

/* Fills *tok for h (a valid handle, or goro_self()). Returns 0, -EINVAL
 * (NULL, or a handle already joined or detached), -ENOMEM. A token of a
 * coroutine that has ended already is valid and cancels nothing. */
int goro_token(goro_t *h, goro_token_t *tok);

/* goro_cancel for the coroutine tok names, while it runs: returns 0, or
 * -ESRCH once it has ended (its function returned or it called
 * goro_exit), -EINVAL for a zeroed or forged token. */
int goro_cancel_token(goro_token_t tok);

/* 1 if the calling coroutine has been cancelled, else 0. */
int goro_cancelled(void);

/* Deadline forms of the waiting calls above (same results, plus
 * -ETIMEDOUT, and -ECANCELED after goro_cancel). goro_cond_wait_until
 * re-acquires mu before it returns, whatever the result. */
int goro_join_until(goro_t *h, long *result, int64_t deadline);
int goro_chan_send_until(goro_chan_t *ch, const void *elem, int64_t deadline);
int goro_chan_recv_until(goro_chan_t *ch, void *elem, int64_t deadline);
int goro_select_until(goro_case_t *cases, int ncases, int flags, int64_t deadline);
int goro_mutex_lock_until(goro_mutex_t *mu, int64_t deadline);
int goro_rwlock_rdlock_until(goro_rwlock_t *rw, int64_t deadline);
int goro_rwlock_wrlock_until(goro_rwlock_t *rw, int64_t deadline);
int goro_cond_wait_until(goro_cond_t *cv, goro_mutex_t *mu, int64_t deadline);
int goro_sem_acquire_until(goro_sem_t *sem, int64_t deadline);
int goro_waitgroup_wait_until(goro_waitgroup_t *wg, int64_t deadline);

/* ------------------------------------------------------------------------
 * I/O
 *
 * These look like the system calls they wrap, but a call that would block
 * parks the coroutine (never the worker thread) until the descriptor is
 * ready, the deadline passes or the coroutine is cancelled. Results: the
 * system call's (a count, 0 at end of file) or a negative errno; never
 * -EAGAIN or -EINTR. Any descriptor works; sockets, pipes, terminals and
 * event fds park, regular files simply read and write (use goro_offload
 * for slow disks). The first call on a descriptor makes it non-blocking
 * (O_NONBLOCK belongs to the open file, so another process sharing it sees
 * that too). Several coroutines may wait on one descriptor (say, accept):
 * each readiness wakes them in turn.
 *
 * A descriptor used here must be closed with goro_close(), or given up
 * with goro_fd_release() before it is closed another way: the runtime
 * keeps it registered with its event base until then. Writes whose peer or
 * reader is gone (sockets, pipes) return -EPIPE and never raise SIGPIPE;
 * the signal's disposition is left alone, and a SIGPIPE the program has
 * pending itself stays pending.
 * ------------------------------------------------------------------------ */

#define GORO_READABLE 0x1
#define GORO_WRITABLE 0x2

/* goro_wait_fd's flag for a caller whose own read or write on fd has just
 * failed with EAGAIN: it skips the check of fd's present state (a poll(2)
 * that can only say "not ready") and waits for readiness that comes after,
 * as goro_read does itself. Without it the state is checked first. */
#define GORO_AFTER_EAGAIN 0x4

/* Waits until fd is ready for any of events (GORO_READABLE, GORO_WRITABLE;
 * GORO_AFTER_EAGAIN may be or-ed in) and returns the ones that are, or
 * -EBADF, -EINVAL, -ETIMEDOUT, -ECANCELED. Readiness can be spurious: the
 * next call may still find nothing. */
int goro_wait_fd(int fd, int events, int64_t deadline);

ssize_t goro_read(int fd, void *buf, size_t len);
ssize_t goro_read_until(int fd, void *buf, size_t len, int64_t deadline);
ssize_t goro_readv(int fd, const struct iovec *iov, int iovcnt);
ssize_t goro_readv_until(int fd, const struct iovec *iov, int iovcnt, int64_t deadline);

/* Writes at least one byte (a partial write is normal), like write(). */
ssize_t goro_write(int fd, const void *buf, size_t len);
ssize_t goro_write_until(int fd, const void *buf, size_t len, int64_t deadline);
ssize_t goro_writev(int fd, const struct iovec *iov, int iovcnt);
ssize_t goro_writev_until(int fd, const struct iovec *iov, int iovcnt, int64_t deadline);

/* Reads exactly len bytes, waiting as often as needed: the reading side of
 * goro_write_all, for fixed-size records. Returns len; fewer (0 included)
 * when end of file came first - that many bytes are in buf; or a negative
 * errno, and then *got (if not NULL) says how many bytes arrived before it. */
ssize_t goro_read_full(int fd, void *buf, size_t len);
ssize_t goro_read_full_until(int fd, void *buf, size_t len, size_t *got, int64_t deadline);

/* Writes all len bytes, waiting as often as needed. Returns len, or a
 * negative errno; then *written (if not NULL) says how much went out. */
ssize_t goro_write_all(int fd, const void *buf, size_t len);
ssize_t goro_write_all_until(int fd, const void *buf, size_t len, size_t *written,
                             int64_t deadline);

/* The gathering form: writes every byte of all iovcnt entries, in order,
 * waiting as often as needed. iov is only read, never changed (partial
 * writes go on from a copy of what is left); empty entries are fine.
 * Returns the sum of the lengths, or a negative errno - then *written (if
 * not NULL) says how much went out: -EINVAL for iovcnt < 0 or > IOV_MAX,
 * a NULL iov, or lengths summing past SSIZE_MAX. Past 64 entries the
 * bytes may leave in several system calls even when there is room. */
ssize_t goro_writev_all(int fd, const struct iovec *iov, int iovcnt);
ssize_t goro_writev_all_until(int fd, const struct iovec *iov, int iovcnt, size_t *written,
                              int64_t deadline);

ssize_t goro_recv(int fd, void *buf, size_t len, int flags);
ssize_t goro_recv_until(int fd, void *buf, size_t len, int flags, int64_t deadline);
ssize_t goro_send(int fd, const void *buf, size_t len, int flags);
ssize_t goro_send_until(int fd, const void *buf, size_t len, int flags, int64_t deadline);
ssize_t goro_recvfrom(int fd, void *buf, size_t len, int flags,
                      struct sockaddr *from, socklen_t *fromlen);
ssize_t goro_recvfrom_until(int fd, void *buf, size_t len, int flags,
                            struct sockaddr *from, socklen_t *fromlen, int64_t deadline);
ssize_t goro_sendto(int fd, const void *buf, size_t len, int flags,
                    const struct sockaddr *to, socklen_t tolen);
ssize_t goro_sendto_until(int fd, const void *buf, size_t len, int flags,
                          const struct sockaddr *to, socklen_t tolen, int64_t deadline);

/* A new socket, already non-blocking and close-on-exec: the fd or -errno. */
int goro_socket(int domain, int type, int protocol);

/* Accepts a connection: returns its fd (non-blocking, close-on-exec) or a
 * negative errno (-EMFILE / -ENFILE at the descriptor limit). */
int goro_accept(int fd, struct sockaddr *addr, socklen_t *addrlen);
int goro_accept_until(int fd, struct sockaddr *addr, socklen_t *addrlen, int64_t deadline);

/* Connects and waits for the outcome: 0 or a negative errno (e.g.
 * -ECONNREFUSED). On -ETIMEDOUT / -ECANCELED the attempt may still be in
 * flight: close the socket. */
int goro_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);
int goro_connect_until(int fd, const struct sockaddr *addr, socklen_t addrlen,
                       int64_t deadline);

/* Closes fd. Calls waiting on it return -EBADF first; a call already woken
 * finishes on this file, and goro_close waits for it, so that nothing of
 * this file reaches the next one to get the number - which may happen as
 * soon as close() returns (docs/io.md, "Closing"). Returns 0 or the
 * negative errno of close() (the descriptor is gone either way), or
 * -EBADF if another goro_close of fd is under way (that one closes it). */
int goro_close(int fd);

/* Forgets fd without closing it (waiters wake with -EBADF, calls under way
 * are waited for, as by goro_close), for handing it to code that is not
 * goro-aware. Returns 0 or -EBADF. */
int goro_fd_release(int fd);

/* ------------------------------------------------------------------------
 * Blocking calls
 * ------------------------------------------------------------------------ */

/* Runs fn(arg) on a thread of a small pool while the calling coroutine
 * parks, so the worker thread goes on running other coroutines (may
 * switch). For calls that can only block: getaddrinfo, file I/O, a library
 * that blocks. fn's return value goes to *result (if not NULL). Outside a
 * coroutine it simply calls fn. The pool starts threads on demand, up to
 * GORO_OFFLOAD_THREADS (default: twice the workers, at least 4); jobs
 * beyond that wait their turn. Returns 0, -EINVAL (NULL fn), -ENOMEM or
 * -EAGAIN (no pool thread could be started), -ESHUTDOWN. */
int goro_offload(long (*fn)(void *), void *arg, long *result);

/* ------------------------------------------------------------------------
 * Signals (Go's signal.Notify; docs/api.md, "Signals")
 *
 * The runtime's threads block no signal of their own: they keep the mask
 * of the thread that started the runtime, and so do the children that
 * coroutines start (system, popen, posix_spawn, fork+exec). A signal sent
 * to the process may land on any of them, where its disposition takes it
 * (an unnotified SIGTERM ends the process). To wait for signals yourself
 * (sigwait, signalfd), block them in main before the runtime starts. The
 * notifiable signals: SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
 * SIGALRM, SIGCHLD, SIGWINCH, SIGTSTP, SIGCONT, SIGIO, SIGRTMIN..SIGRTMAX.
 * ------------------------------------------------------------------------ */

/* Relays the signals sigs[0..nsigs-1] to ch, a channel of int (element
 * size sizeof(int)): each arrival try-sends the signal number, never
 * waiting - when ch is full that arrival is dropped for ch, as in Go, so
 * give ch a buffer. Several channels may take the same signal; calling
 * again for ch adds signals. While a signal has a channel, its handler is
 * the runtime's, whichever thread the kernel gives it to (the program's
 * handler, if any, is set aside; goro_signal_stop puts it back). Starts
 * the runtime if needed, as go() does. Returns 0, -EINVAL (NULL ch or
 * sigs, nsigs < 1, an element size other than sizeof(int), a signal that
 * is not notifiable: SIGKILL, SIGSTOP, SIGURG, SIGPIPE, the faults...),
 * -ENOMEM, -ESHUTDOWN (from a thread the runtime does not own, while
 * goro_shutdown runs). Subscriptions end with the runtime: after
 * goro_shutdown no signal is sent to ch and ch is never touched. */
int goro_signal_notify(goro_chan_t *ch, const int *sigs, int nsigs);

/* Stops relaying signals to ch; once it returns, none is sent to ch (it
 * may be freed). A signal left without channels gets its earlier
 * disposition back. Returns 0 (also when ch had no subscription), -EINVAL
 * for NULL. */
int goro_signal_stop(goro_chan_t *ch);

/* ------------------------------------------------------------------------
 * Preemption
 *
 * A coroutine that runs longer than its time slice without a call that
 * switches is preempted: the monitor thread interrupts its worker with
 * SIGURG and, if the coroutine is at a safe point, it is suspended there
 * (every register saved) and resumed later on the same worker thread. A
 * safe point is an instruction in the program's own code - the executable,
 * when libc is a shared library and neither the allocator (malloc: clang's
 * sanitizers, a static malloc) nor the C++ runtime is linked into it - or
 * in code marked below; never in libc, the dynamic loader, the vDSO or
 * goro. Elsewhere the coroutine yields at its next goro call instead. See
 * docs/preemption.md.
 * ------------------------------------------------------------------------ */

/* Puts a function in the code that may be preempted anywhere, even when
 * the rest of its executable may not be (a statically linked program). */
#define GORO_PREEMPTIBLE __attribute__((section("goro_preemptible"), noinline))

/* Marks [start, end) - say, the text of a library of your own that takes
 * no locks - as preemptible, before or after goro_start: it adds to the
 * safe points, never takes the executable's away. At most 32 ranges.
 * Returns 0, -EINVAL, -ENOSPC. */
int goro_preempt_allow(const void *start, const void *end);

/* A no-preempt section of the calling coroutine (nests; a no-op outside a
 * coroutine). Inside, the coroutine is never suspended asynchronously. */
void goro_preempt_disable(void);
void goro_preempt_enable(void);

/* ------------------------------------------------------------------------
 * Implementation of the spawn macros. Not part of the contract.
 * ------------------------------------------------------------------------ */

#define GORO_MAX_ARGS 12

/* How the spawned function's return value is widened to a long. */
enum goro__ret {
    GORO__RET_VOID, GORO__RET_BAD, GORO__RET_LONG,
    GORO__RET_S8, GORO__RET_U8, GORO__RET_S16, GORO__RET_U16,
    GORO__RET_S32, GORO__RET_U32
};
/* Or'ed into the kind: some argument may travel on the stack. */
#define GORO__STACK_ARGS 0x100

/* Assembly: called through a pointer cast to fn's own type, so the compiler
 * lays out the arguments exactly as fn expects them; it stores the argument
 * registers and the stack-argument area on the calling thread, and returns. */
void goro__capture(void);
/* The same when every argument travels in a register: the caller's stack
 * is not looked at. */
void goro__capture_regs(void);
int goro__spawn_captured(goro_t **h, const goro_attr_t *attr,
                         void (*fn)(void), int ret);

#define goro__fnptr_t(fn) __typeof__(&*(fn))
#define goro__ret_kind_of(call) _Generic((__typeof__(call) *)0,               \
    void *: GORO__RET_VOID, _Bool *: GORO__RET_U8,                            \
    char *: ((char)-1 < 0 ? GORO__RET_S8 : GORO__RET_U8),                     \
    signed char *: GORO__RET_S8, unsigned char *: GORO__RET_U8,               \
    short *: GORO__RET_S16, unsigned short *: GORO__RET_U16,                  \
    int *: GORO__RET_S32, unsigned int *: GORO__RET_U32,                      \
    long *: GORO__RET_LONG, unsigned long *: GORO__RET_LONG,                  \
    long long *: GORO__RET_LONG, unsigned long long *: GORO__RET_LONG,        \
    default: (__builtin_classify_type(*goro__nonvoid_ptr(call)) == 5          \
                  ? GORO__RET_LONG : GORO__RET_BAD))
/* A pointer to the call's type, or to int when the call is void: lets the
 * pointer test above inspect a non-void expression (never evaluated). */
#define goro__nonvoid_ptr(call) _Generic((__typeof__(call) *)0,              \
    void *: (int *)0, default: (__typeof__(call) *)0)

/* Argument counting and per-argument size checks, in ISO C: each list
 * these macros take starts with fn, so that a macro's "..." is never
 * empty (C before C23 wants at least one argument there) and no GNU
 * `, ##__VA_ARGS__` is needed. goro__count(fn, args...) is the number of
 * args, up to 16, so that a call with too many still reaches the static
 * assertion; goro__first and goro__rest split fn from its args. */
#define goro__pick(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13,    \
    a14, a15, a16, a17, N, ...) N
#define goro__count(...) goro__pick(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10,  \
    9, 8, 7, 6, 5, 4, 3, 2, 1, 0, ~)
#define goro__more(...) goro__pick(__VA_ARGS__, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, \
    1, 1, 1, 1, 1, 1, 0, ~)
#define goro__first(...) goro__first_(__VA_ARGS__, ~)
#define goro__first_(f, ...) f
#define goro__rest(...) goro__cat(goro__rest_, goro__more(__VA_ARGS__))(__VA_ARGS__)
#define goro__rest_0(f)
#define goro__rest_1(f, ...) __VA_ARGS__
/* measured after decay: arrays and string literals pass as pointers */
#define goro__fits(x) (sizeof(__typeof__((void)0, (x))) <= 16)
#define goro__all0(P, f) 1
#define goro__all1(P, f, a) P(a)
#define goro__all2(P, f, a, ...) P(a) && goro__all1(P, f, __VA_ARGS__)
#define goro__all3(P, f, a, ...) P(a) && goro__all2(P, f, __VA_ARGS__)
#define goro__all4(P, f, a, ...) P(a) && goro__all3(P, f, __VA_ARGS__)
#define goro__all5(P, f, a, ...) P(a) && goro__all4(P, f, __VA_ARGS__)
#define goro__all6(P, f, a, ...) P(a) && goro__all5(P, f, __VA_ARGS__)
#define goro__all7(P, f, a, ...) P(a) && goro__all6(P, f, __VA_ARGS__)
#define goro__all8(P, f, a, ...) P(a) && goro__all7(P, f, __VA_ARGS__)
#define goro__all9(P, f, a, ...) P(a) && goro__all8(P, f, __VA_ARGS__)
#define goro__all10(P, f, a, ...) P(a) && goro__all9(P, f, __VA_ARGS__)
#define goro__all11(P, f, a, ...) P(a) && goro__all10(P, f, __VA_ARGS__)
#define goro__all12(P, f, a, ...) P(a) && goro__all11(P, f, __VA_ARGS__)
#define goro__all13(P, ...) 0
#define goro__all14(P, ...) 0
#define goro__all15(P, ...) 0
#define goro__all16(P, ...) 0
#define goro__cat(a, b) goro__cat_(a, b)
#define goro__cat_(a, b) a##b
/* goro__all(P, fn, args...): P holds for every one of args */
#define goro__all(P, ...) (goro__cat(goro__all, goro__count(__VA_ARGS__))(P, __VA_ARGS__))
/* A scalar of at most 8 bytes (not a struct or union): with at most 6 of
 * them every argument travels in a register on both ABIs, so the spawn
 * need not carry the caller's stack-argument area. */
#define goro__in_reg(x) (sizeof(__typeof__((void)0, (x))) <= 8 &&              \
    __builtin_classify_type(((void)0, (x))) != 12 &&                          \
    __builtin_classify_type(((void)0, (x))) != 13)
#define goro__regs_only(...)                                                  \
    (goro__count(__VA_ARGS__) <= 6 && goro__all(goro__in_reg, __VA_ARGS__))

/* The attribute goes through this struct first, followed by a designator
 * that only this struct has. A compound-literal attribute with two fields
 * and no parentheses reaches the macro split at its comma; its open brace
 * then takes the designator in, and the first error says what to write. */
struct goro__attr_slot {
    const goro_attr_t *goro__attr;
    char goro_attr_with_commas_needs_GORO_ATTR_or_parentheses;
};

/* goro__go(h, attr, fn, args...) */
#define goro__go(h, attr, ...) __extension__({                                \
    const goro_attr_t *goro__a = (struct goro__attr_slot){ attr,              \
        .goro_attr_with_commas_needs_GORO_ATTR_or_parentheses = 0 }.goro__attr; \
    _Static_assert(goro__count(__VA_ARGS__) <= GORO_MAX_ARGS,                 \
                   "goro: at most 12 arguments; pass a struct pointer");      \
    _Static_assert(goro__all(goro__fits, __VA_ARGS__),                        \
                   "goro: an argument is larger than 16 bytes; pass a pointer"); \
    _Static_assert(goro__ret_kind_of(goro__call(__VA_ARGS__)) != GORO__RET_BAD, \
                   "goro: the function must return void, an integer or a "    \
                   "pointer; hand other results back through an argument");  \
    goro__fnptr_t(goro__first(__VA_ARGS__)) goro__f = (goro__first(__VA_ARGS__)); \
    goro__fnptr_t(goro__first(__VA_ARGS__)) goro__c =                         \
        (goro__fnptr_t(goro__first(__VA_ARGS__)))(goro__regs_only(__VA_ARGS__) \
            ? goro__capture_regs : goro__capture);                            \
    goro__c(goro__rest(__VA_ARGS__));                                         \
    goro__spawn_captured((h), goro__a, (void (*)(void))goro__f,               \
                         goro__ret_kind_of(goro__call(__VA_ARGS__)) |         \
                         (goro__regs_only(__VA_ARGS__) ? 0 : GORO__STACK_ARGS)); \
})
/* fn(args...), never evaluated: only its type is looked at */
#define goro__call(...) (goro__first(__VA_ARGS__))(goro__rest(__VA_ARGS__))

goro_t *goro__handle_or_errno(int err, goro_t *h);
#define goro__go_handle(...) __extension__({                                  \
    goro_t *goro__h = 0;                                                      \
    int goro__e = goro__go(&goro__h, 0, __VA_ARGS__);                         \
    goro__handle_or_errno(goro__e, goro__h);                                  \
})

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------------
 * The rest of the API, one header per audience (see the top of this file)
 * ------------------------------------------------------------------------ */

#include "goro/structured.h"
#include "goro/pipeline.h"
#include "goro/debug.h"
#include "goro/cxx.h"
#include "goro/process.h"
#include "goro/net.h"
#include "goro/stream.h"
#include "goro/deadline.h"
#include "goro/file.h"

#endif /* GORO_H */
