/*
 * goro: Go-style concurrency for C.
 *
 * This header is the whole public contract. Everything in it is prefixed
 * goro_ / GORO_, except the spawn macro `go`.
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
 * Coroutines
 * ------------------------------------------------------------------------ */

typedef struct goro goro_t;

/* Per-spawn options. Zero fields mean "the default". A stack overflow is
 * caught by a 64 KiB guard and reported; a frame larger than that is caught
 * only in code built with -fstack-clash-protection (pkg-config --cflags
 * goro has it; docs/api.md, "Stacks"). */
typedef struct goro_group goro_group_t;
typedef struct goro_attr {
    const char *name;     /* copied (first 31 bytes); shown by debugging tools */
    size_t stack_size;    /* reserve in bytes, rounded up to pages; 16 KiB..1 GiB */
    goro_group_t *group;  /* spawn into this group (no handle: h must be NULL);
                             see goro_group_go */
    int priority;         /* enum goro_priority; 0: the spawner's (see below) */
} goro_attr_t;

/* ------------------------------------------------------------------------
 * Priorities (docs/structured.md, "Priorities")
 *
 * Three classes. A runnable HIGH coroutine runs before NORMAL ones, and a
 * NORMAL one before LOW ones, on every worker; within a class the order is
 * the usual one. Starvation is bounded: once every 61 slices of a worker
 * its NORMAL queue goes before HIGH, and once every 61 its LOW queue goes
 * first. A HIGH coroutine that waits while every worker runs a lower
 * class has one of them preempted (within about a millisecond, where the
 * code can be preempted; else at its next goro call).
 *
 * Inheritance: a coroutine waiting for a mutex, for a rwlock's writer, for
 * a coroutine it joins or for a group's members lends its class to them
 * while it waits (the holder, the joinee, every member): the one it waits
 * for runs at least at the waiter's class, and gets its own back when the
 * wait ends. Group members pass it on to the members of their own groups,
 * and a holder that itself waits for a lock passes it on to that lock's
 * holder, down a chain of locks (and gives it back along it).
 * A coroutine spawned with priority 0 (GORO_PRIORITY_INHERIT) takes its
 * spawner's own class (NORMAL from a thread). With GORO_PRIORITY_INHERIT=0
 * in the environment nothing is lent (to measure what inheritance buys).
 * ------------------------------------------------------------------------ */

enum goro_priority {
    GORO_PRIORITY_INHERIT = 0,     /* goro_attr_t: the spawner's class */
    GORO_PRIORITY_LOW = 1,         /* background: runs when nothing else waits */
    GORO_PRIORITY_NORMAL = 2,      /* the default */
    GORO_PRIORITY_HIGH = 3,        /* latency first: control loops, heartbeats */
};

/* Sets the calling coroutine's own class, from its next switch on (loans
 * it has stay). Returns 0, -EINVAL (not a class) or -EPERM (not in a
 * coroutine). */
int goro_priority_set(int priority);

/* h's class now - its own, or a higher one it inherits from a waiter
 * (NULL: the calling coroutine; GORO_PRIORITY_NORMAL on a thread), or
 * -EINVAL. goro_priority_base gives its own class. */
int goro_priority_get(const goro_t *h);
int goro_priority_base(const goro_t *h);

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
 * Error objects: failures that travel with completion (docs/structured.md)
 *
 * A goro_err_t holds an errno-style code, a message, an optional cause (a
 * chain: "could not load the page" caused by "connect failed") and an
 * optional list of further errors (a batch that collects every failure),
 * and the id and name of the coroutine that made it. A coroutine ends with
 * one through goro_exit_err(); goro_join_err() hands it to the joiner.
 * Ownership: one owner at a time, and it moves - goro_err_wrap takes the
 * cause, goro_err_add the item, goro_exit_err the error; the last owner
 * calls goro_err_free. An error the joiner does not take (goro_join, a
 * detached coroutine) is freed with the coroutine. Making an error never
 * fails: without memory, goro_err_new returns a shared stand-in with code
 * ENOMEM that goro_err_free leaves alone. A plain errno return costs none
 * of this.
 * ------------------------------------------------------------------------ */

typedef struct goro_err goro_err_t;

/* A new error: code is an errno value (a negative one is taken as -code);
 * fmt a printf format for the message, or NULL for strerror(code). Records
 * the running coroutine. Never NULL (see above). */
goro_err_t *goro_err_new(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same, with cause (NULL: none) as its cause, owned by the new error.
 * Without memory it returns cause itself (or the stand-in if cause is NULL):
 * the more specific failure is the one kept. */
goro_err_t *goro_err_wrap(goro_err_t *cause, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends e to list's errors; list owns it from then on. Returns 0,
 * -EINVAL (NULL, the same error, or list is the stand-in) or -ENOMEM (e
 * stays the caller's). */
int goro_err_add(goro_err_t *list, goro_err_t *e);

/* A deep copy of e (its causes and list too), owned by the caller: for
 * handing one failure to several owners. NULL for NULL; the stand-in
 * when memory runs out. */
goro_err_t *goro_err_copy(const goro_err_t *e);

/* Its parts; each takes NULL (0, "" or NULL back). Strings live as long as
 * the error. goro_err_msg is strerror(code) when no message was given. */
int goro_err_code(const goro_err_t *e);
const char *goro_err_msg(const goro_err_t *e);
const goro_err_t *goro_err_cause(const goro_err_t *e);
size_t goro_err_count(const goro_err_t *e);
const goro_err_t *goro_err_at(const goro_err_t *e, size_t i);
uint64_t goro_err_coroutine(const goro_err_t *e);        /* 0: made outside one */
const char *goro_err_coroutine_name(const goro_err_t *e);

/* Writes e, one line per error - "<message>: <strerror> [coroutine <id>
 * <name>]" - its list items below it ("- "), its causes after it
 * ("caused by: "). Returns 0, -EINVAL (NULL) or -EIO. */
int goro_err_print(FILE *f, const goro_err_t *e);

/* Frees e, its causes and its list (NULL and the stand-in: nothing). */
void goro_err_free(goro_err_t *e);

/* Ends the running coroutine with e (owned by the coroutine from then on;
 * NULL: none); its join result is -goro_err_code(e). Does not return.
 * Outside a coroutine it prints a message and aborts, as goro_exit. */
__attribute__((noreturn)) void goro_exit_err(goro_err_t *e);

/* goro_join that also hands over the error object h ended with: *err gets
 * it (the caller owns it) or NULL. err may be NULL (as goro_join). */
int goro_join_err(goro_t *h, long *result, goro_err_t **err);
int goro_join_err_until(goro_t *h, long *result, goro_err_t **err, int64_t deadline);

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
 * Groups: spawn together, wait together, fail and cancel together
 * (docs/structured.md)
 *
 *   goro_group_t *g;
 *   goro_group_new(&g, &(goro_group_attr_t){ .limit = 8,
 *                                            .deadline = goro_now() + 2 * GORO_SEC });
 *   for (int i = 0; i < n; i++)
 *       if (goro_group_go(g, fetch, urls[i]) != 0)
 *           break;                           // the group failed: stop feeding it
 *   goro_err_t *err;
 *   if (goro_group_wait(g, NULL, &err) != 0) {
 *       goro_err_print(stderr, err);
 *       goro_err_free(err);
 *   }
 *   goro_group_free(g);
 *
 * A member fails when it ends with an error object (goro_exit_err) or
 * returns a negative value (taken as -errno; the group makes the error).
 * With a limit, goro_group_go waits (may switch) while `limit` members
 * run, so a loop that feeds a group never holds more than that many
 * coroutines. The first failure cancels the group, by default: the members
 * still running are cancelled (goro_cancel) and goro_group_go fails with
 * -ECANCELED. So do the deadline, goro_group_cancel and the cancellation
 * of the coroutine that made the group.
 *
 * The tree: cancelling a coroutine cancels every group it made, which
 * cancels their members, and so on down. goro_group_wait is not
 * cancellable: a cancelled coroutine still waits for its members (they
 * have been cancelled too) and then unwinds. Waits that do not belong to
 * the tree are not cancelled through it: goro_once and goro_offload run
 * to their end, as with goro_cancel.
 *
 * Lifetime: goro_group_new() -> goro_group_go()... -> goro_group_wait()
 * (exactly once; it returns when every member has ended) ->
 * goro_group_free(). A group outlives no member: freeing it with members
 * fails with -EBUSY and a message, and a coroutine that ends before the
 * groups it made have been waited for is reported on stderr.
 * ------------------------------------------------------------------------ */

/* What the group does with its members' results. */
enum goro_group_policy {
    GORO_GROUP_FIRST_ERROR = 0,    /* the first failure cancels the rest and is the
                                      group's error (Go's errgroup) */
    GORO_GROUP_COLLECT_ALL = 1,    /* no cancel on failure; the error lists them all */
    GORO_GROUP_FIRST_RESULT = 2,   /* the first success is the group's result and
                                      cancels the rest; fails only if all fail */
};

typedef struct goro_group_attr {
    const char *name;     /* copied (first 31 bytes); named in its errors */
    int limit;            /* at most this many members at once; 0: no limit */
    int policy;           /* enum goro_group_policy */
    int64_t deadline;     /* on goro_now()'s clock; 0: none. Passing it cancels
                             the group; its error is then ETIMEDOUT */
} goro_group_attr_t;

/* Makes a group, owned by the calling coroutine (cancelling it cancels the
 * group) or by nobody when called from a thread. attr may be NULL.
 * Returns 0, -EINVAL (NULL g, negative limit, unknown policy), -ENOMEM, or
 * what starting the runtime returned. */
int goro_group_new(goro_group_t **g, const goro_group_attr_t *attr);

/* goro_group_go(g, fn, args...) spawns fn(args...) into g, as go() does;
 * with a limit it first waits for a free slot (may switch). Returns 0,
 * -ECANCELED (the group was cancelled or failed: nothing was spawned, and
 * the caller stops feeding it; also when the caller itself is cancelled
 * while it waits for a slot), -EINVAL (NULL g or fn, or g already waited
 * for), or what go() fails with. The plain-function form is goro_spawn
 * with NULL h and attr.group set. */
#define goro_group_go(g, ...) \
    goro_go(NULL, &(goro_attr_t){ .group = goro__group_arg(g) }, __VA_ARGS__)
/* goro_group_go's group: attr.group NULL means "no group", so a NULL g
 * goes in as GORO__GROUP_NULL, which a spawn refuses (-EINVAL). */
#define GORO__GROUP_NULL ((goro_group_t *)(uintptr_t)1)
static inline goro_group_t *goro__group_arg(goro_group_t *g)
{
    return g ? g : GORO__GROUP_NULL;
}

/* Cancels every member (and down the tree); g still has to be waited for.
 * Returns 0 or -EINVAL. */
int goro_group_cancel(goro_group_t *g);

/* Waits until every member has ended (may switch; not cancellable, see
 * above). Returns 0, or -code of the group's error: *err (may be NULL)
 * gets it, owned by the caller: the first failure (FIRST_ERROR); one
 * error listing every failure (COLLECT_ALL, and FIRST_RESULT when none
 * succeeded); or ETIMEDOUT / ECANCELED for a group whose deadline passed
 * or that was cancelled before any failure. *result (may be NULL) gets
 * the winner's result under FIRST_RESULT, else 0. -EINVAL: NULL g, or
 * waited for already; -EDEADLK: called by one of g's members. */
int goro_group_wait(goro_group_t *g, long *result, goro_err_t **err);

/* Members admitted and not yet ended, or -EINVAL. */
int goro_group_running(const goro_group_t *g);

/* Frees g. Returns 0, -EINVAL, or -EBUSY (members still run: g is left
 * as it was, and a message says so). */
int goro_group_free(goro_group_t *g);

/* ------------------------------------------------------------------------
 * Single-flight: callers of one key share one computation
 * (docs/structured.md)
 *
 *   static goro_flight_t *fills;             // goro_flight_new(&fills) once
 *   long page;
 *   goro_err_t *err;
 *   int r = goro_flight_do_until(fills, url, load_page, cache, &page, &err,
 *                                goro_now() + GORO_SEC);
 *
 * The first caller of a key starts fn(key, arg) in a coroutine of its
 * own; callers of the same key that arrive before it ends wait for it and
 * get the same result, or each a copy of the same error. Once it has
 * ended the key is free: the next caller starts a new computation (the
 * result is not kept; put a cache in front). The computation belongs to
 * nobody's tree: a caller that gives up - its deadline, its cancellation,
 * the cancellation of a group above it - returns alone, and the
 * computation goes on for the others, to its end, even if every caller
 * has gone. fn fails as a group member does: with an error object
 * (goro_exit_err) or a negative return (the flight makes the error).
 *
 * Lifetime: goro_flight_new() -> goro_flight_do()... from any coroutine
 * or thread -> goro_flight_free() once no call is in flight or waited
 * for. Keys are copied.
 * ------------------------------------------------------------------------ */

typedef struct goro_flight goro_flight_t;

/* Makes an empty set of keyed computations. Returns 0, -EINVAL (NULL fl)
 * or -ENOMEM. */
int goro_flight_new(goro_flight_t **fl);

/* Returns key's outcome, computing it with fn(key, arg) unless a
 * computation of key is already in flight (may switch; key and arg are
 * then the first caller's: arg must stay valid until fn returns, even if
 * that caller gives up). Returns 0 with *result (may be NULL) set to fn's
 * return; -code when the computation failed, with *err (may be NULL) set
 * to a copy of its error, owned by the caller; or, with *err NULL,
 * -ECANCELED / -ETIMEDOUT when this caller gave up (the computation goes
 * on), -EDEADLK when called by the key's own computation, -EINVAL (NULL
 * fl, key or fn), -ENOMEM, or what starting a coroutine fails with. */
int goro_flight_do(goro_flight_t *fl, const char *key, long (*fn)(const char *key, void *arg),
                   void *arg, long *result, goro_err_t **err);
int goro_flight_do_until(goro_flight_t *fl, const char *key,
                         long (*fn)(const char *key, void *arg), void *arg, long *result,
                         goro_err_t **err, int64_t deadline);

/* Unties key from its computation in flight: that computation still
 * completes for the callers already waiting, and the next caller of key
 * starts a new one (for a value known to be stale). Returns 0, -ENOENT
 * (nothing in flight for key) or -EINVAL. */
int goro_flight_forget(goro_flight_t *fl, const char *key);

/* Callers waiting for key's computation in flight (0: none in flight), or
 * -EINVAL. A snapshot, for tests and monitoring. */
int goro_flight_waiting(goro_flight_t *fl, const char *key);

/* Frees fl. Returns 0, -EINVAL, or -EBUSY while a computation is in flight
 * or a caller is inside goro_flight_do (fl is left as it was). */
int goro_flight_free(goro_flight_t *fl);

/* ------------------------------------------------------------------------
 * Pipelines: stages joined by bounded queues, workers moved to the stage
 * that needs them (docs/pipelines.md)
 *
 *   goro_pipeline_t *p;
 *   goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .ordered = 1 });
 *   goro_pipeline_stage(p, &(goro_stage_t){ .name = "parse", .fn = parse });
 *   goro_pipeline_stage(p, &(goro_stage_t){ .name = "hash", .fn = hash });
 *   goro_err_t *err;
 *   if (goro_pipeline_run(p, read_line, file, count, &totals, &err) != 0) {
 *       goro_err_print(stderr, err);
 *       goro_err_free(err);
 *   }
 *   goro_pipeline_free(p);
 *
 * Items are pointers. The source makes them, one call at a time; each
 * stage's function turns an item into its output in place (or drops it);
 * the sink takes the last stage's outputs, one call at a time. Between
 * them every stage has a bounded input queue. A budget of worker
 * coroutines serves the stages: after each batch a worker asks the
 * allocator where it is needed, from each stage's queue length and its
 * service time per item as measured (a moving average), by the
 * Jefferson/D'Hondt method by default. A stage may so run on several
 * workers at once, and workers move when a stage slows down.
 *
 * With `ordered`, the sink sees items in the order the source made them,
 * even when a stage ran them on several workers at once (a reorder buffer
 * bounded by the window). The window bounds the items inside the
 * pipeline, source to sink: the source waits while it is full.
 *
 * Failure: a stage fails an item by returning a negative -errno, with an
 * error object in *err if it wants (the pipeline wraps it, naming the
 * stage and the item's number). By default (GORO_PIPELINE_FAIL_FAST) the
 * first failure - of the source, a stage or the sink - cancels the whole
 * pipeline and goro_pipeline_run returns it; with
 * GORO_PIPELINE_SKIP_FAILED a failed item is left out, the others go on,
 * and goro_pipeline_run returns one error listing the failures. The
 * pipeline's coroutines are a group (goro_group_t) made by the caller of
 * goro_pipeline_run: cancelling that caller, a group above it, the
 * deadline or goro_pipeline_cancel cancel them all. Items the pipeline
 * lets go of - a failed item, those still inside when it is cancelled -
 * are handed to attr.discard, so nothing is lost or leaked.
 *
 * Lifetime: goro_pipeline_new() -> goro_pipeline_stage()... ->
 * goro_pipeline_run() (once; from a coroutine or a thread; returns when
 * every item is through or the pipeline failed) -> goro_pipeline_stats()
 * and goro_pipeline_svg() at any time, also during the run from another
 * coroutine or thread -> goro_pipeline_free().
 * ------------------------------------------------------------------------ */

typedef struct goro_pipeline goro_pipeline_t;

#define GORO_PIPELINE_END 1      /* a source's return: no more items */
#define GORO_PIPELINE_DROP 1     /* a stage's return: the item goes no further
                                    (the stage has disposed of it) */
#define GORO_PIPELINE_STAGES_MAX 64
#define GORO_PIPELINE_BATCH_MAX 256

/* A batch function's mark for an item it dropped (items[i] = it). */
extern const char goro_pipeline_dropped_[1];
#define GORO_PIPELINE_DROPPED ((void *)goro_pipeline_dropped_)

/* The source: 0 with *item set, GORO_PIPELINE_END, or -errno (fails the
 * pipeline). Runs in a coroutine of its own and may block (read a file,
 * receive from a channel). */
typedef long goro_source_fn(void **item, void *arg);
/* A stage, per item: replaces *item by its output and returns 0, or
 * returns GORO_PIPELINE_DROP, or fails with -errno (optionally putting an
 * error object, which the pipeline takes, in *err; *item must then still
 * be an item the discard function accepts). */
typedef long goro_stage_fn(void **item, void *arg, goro_err_t **err);
/* A stage, per batch: replaces each items[i] by its output or by
 * GORO_PIPELINE_DROPPED; returns 0, or -errno (and *err) to fail every
 * item of the batch. */
typedef long goro_stage_batch_fn(void **items, int n, void *arg, goro_err_t **err);
/* The sink: takes ownership of item; returns 0 or -errno. */
typedef long goro_sink_fn(void *item, void *arg);

typedef struct goro_stage {
    const char *name;            /* copied (first 23 bytes) */
    goro_stage_fn *fn;           /* exactly one of fn and batch_fn */
    goro_stage_batch_fn *batch_fn;
    void *arg;
    int batch;                   /* items a worker takes per turn, at most
                                    GORO_PIPELINE_BATCH_MAX; 0: adaptive
                                    (about 100 us of work per turn) */
    int capacity;                /* its input queue's bound (items); 0: 64 */
} goro_stage_t;

/* How workers are given to stages (goro_pipeline_allocate). */
enum goro_pipeline_rule {
    GORO_PIPELINE_DHONDT = 0,     /* seats one at a time to the largest
                                     quotient l*t/(w+1) */
    GORO_PIPELINE_EXHAUSTIVE = 1, /* the allocation of least sum of l*t/(w+1),
                                     by trying them all (small pipelines) */
    GORO_PIPELINE_STATIC = 2,     /* no allocator: worker i serves stages
                                     i, i+W, ... (or stage i mod S) */
};

enum goro_pipeline_policy {
    GORO_PIPELINE_FAIL_FAST = 0,     /* the first failure cancels the pipeline */
    GORO_PIPELINE_SKIP_FAILED = 1,   /* a failed item is left out; the run's error
                                        lists the failures */
};

typedef struct goro_pipeline_attr {
    const char *name;            /* copied (first 23 bytes); names its coroutines */
    int workers;                 /* stage workers (coroutines), 1..4096;
                                    0: goro_workers() */
    int rule;                    /* enum goro_pipeline_rule */
    int policy;                  /* enum goro_pipeline_policy */
    int ordered;                 /* 1: the sink sees the source's order */
    int window;                  /* items inside at most, 1..2^20; 0: 1024 */
    int64_t deadline;            /* on goro_now()'s clock; 0: none */
    int timeline;                /* 1: record which stage each worker served,
                                    and the queues, for goro_pipeline_svg */
    size_t stack_size;           /* of its coroutines; 0: the default */
    void (*discard)(void *item, void *arg);   /* items let go of; NULL: none */
    void *discard_arg;
} goro_pipeline_attr_t;

/* Makes an empty pipeline. attr may be NULL. Returns 0, -EINVAL (NULL p,
 * a field out of range), -ENOMEM, or what starting the runtime returned. */
int goro_pipeline_new(goro_pipeline_t **p, const goro_pipeline_attr_t *attr);

/* Appends a stage (the source feeds the first, the last feeds the sink).
 * Returns its index, or -EINVAL (NULL, no function or both, a batch or
 * capacity out of range), -E2BIG (more than GORO_PIPELINE_STAGES_MAX),
 * -EBUSY (the pipeline has run), -ENOMEM. */
int goro_pipeline_stage(goro_pipeline_t *p, const goro_stage_t *stage);

/* Runs the pipeline to its end (may switch). sink may be NULL: outputs
 * then go to the discard function. Returns 0, or -code of the run's error,
 * given in *err (may be NULL; owned by the caller): the first failure, a
 * list of them (SKIP_FAILED), or ETIMEDOUT / ECANCELED. Also -EINVAL (NULL
 * p or source, no stage, run already), -E2BIG (EXHAUSTIVE over too many
 * allocations), -ENOMEM, or what spawning a coroutine fails with. */
int goro_pipeline_run(goro_pipeline_t *p, goro_source_fn *source, void *source_arg,
                      goro_sink_fn *sink, void *sink_arg, goro_err_t **err);

/* Cancels a running pipeline (goro_pipeline_run returns -ECANCELED).
 * Returns 0, -EINVAL, or -ESRCH when it is not running. */
int goro_pipeline_cancel(goro_pipeline_t *p);

typedef struct goro_stage_stats {
    char name[24];
    long queued;                 /* items in its input queue */
    int workers;                 /* workers serving it now */
    int share;                   /* its workers in the allocator's last decision */
    double service_ns;           /* per item, the moving average (0: not yet) */
    uint64_t items;              /* items through it */
    uint64_t dropped, failed;
    double per_sec;              /* items through it per second, since the start */
    int64_t busy_ns;             /* worker time spent on it */
    int done;                    /* no item will come to it any more */
} goro_stage_stats_t;

typedef struct goro_pipeline_stats {
    int state;                   /* 0 not run, 1 running, 2 ended */
    int stages, workers, idle;   /* idle: workers waiting for work */
    uint64_t in, out;            /* from the source; to the sink */
    uint64_t dropped, failed;
    long inside;                 /* items between source and sink */
    int64_t elapsed_ns;          /* since the run started (to its end) */
    uint64_t decisions;          /* allocator runs */
} goro_pipeline_stats_t;

/* Fills *st (may be NULL) and the first n of stages[] (NULL only with n
 * 0). Returns the number of stages, or -EINVAL (NULL p, n < 0, NULL
 * stages with n > 0). */
int goro_pipeline_stats(goro_pipeline_t *p, goro_pipeline_stats_t *st,
                        goro_stage_stats_t *stages, int n);

/* Writes an SVG picture of the run so far: one lane per worker coloured
 * by the stage it served, and each queue's length over time. Returns 0,
 * -EINVAL, -ENODATA (attr.timeline was not set, or nothing ran yet), -EIO
 * (writing f failed). */
int goro_pipeline_svg(goro_pipeline_t *p, FILE *f);

/* Frees p. Returns 0, -EINVAL, or -EBUSY while it runs. */
int goro_pipeline_free(goro_pipeline_t *p);

/* The allocator alone, a pure function: given each stage's load, fills
 * seats[0..nstages) with the workers each gets under rule (DHONDT or
 * EXHAUSTIVE). A stage that is done, or has no work (queued * service is
 * 0), gets none; a service_ns <= 0 counts as 1 (items alone). Ties: see
 * docs/pipelines.md. Returns the workers given (fewer than `workers`
 * only when no stage has work), or -EINVAL (NULL, nstages not in
 * 1..GORO_PIPELINE_STAGES_MAX, workers not in 1..65536, another rule),
 * -E2BIG (EXHAUSTIVE with more than 10^6 allocations to try). */
typedef struct goro_stage_load {
    long queued;                 /* l: items waiting */
    double service_ns;           /* t: time per item */
    int done;                    /* will never have work again */
} goro_stage_load_t;

int goro_pipeline_allocate(int rule, const goro_stage_load_t *load, int nstages, int workers,
                           int *seats);

/* ------------------------------------------------------------------------
 * Time, deadlines and cancellation
 *
 * Every call that can wait has a form ending in _until that takes an
 * absolute deadline on goro_now()'s clock; past it the call gives up with
 * -ETIMEDOUT, having done nothing (nothing sent, received or locked).
 * GORO_FOREVER means no deadline, which is what the short forms use.
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
 * outside a coroutine sleeps the thread. Returns 0, or -ECANCELED. */
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

/* Waits until fd is ready for any of events (GORO_READABLE, GORO_WRITABLE)
 * and returns the ones that are, or -EBADF, -EINVAL, -ETIMEDOUT, -ECANCELED.
 * Readiness can be spurious: the next call may still find nothing. */
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
 * Preemption
 *
 * A coroutine that runs longer than its time slice without a call that
 * switches is preempted: the monitor thread interrupts its worker with
 * SIGURG and, if the coroutine is at a safe point, it is suspended there
 * (every register saved) and resumed later on the same worker thread. A
 * safe point is an instruction in the program's own code - the executable,
 * when libc is a shared library - or in code marked below; never in libc,
 * the dynamic loader, the vDSO or goro. Elsewhere the coroutine yields at
 * its next goro call instead. See docs/preemption.md.
 * ------------------------------------------------------------------------ */

/* Puts a function in the code that may be preempted anywhere, even when
 * the rest of its executable may not be (a statically linked program). */
#define GORO_PREEMPTIBLE __attribute__((section("goro_preemptible"), noinline))

/* Marks [start, end) - say, the text of a library of your own that takes
 * no locks - as preemptible. At most 32 ranges. Returns 0, -EINVAL, -ENOSPC. */
int goro_preempt_allow(const void *start, const void *end);

/* A no-preempt section of the calling coroutine (nests; a no-op outside a
 * coroutine). Inside, the coroutine is never suspended asynchronously. */
void goro_preempt_disable(void);
void goro_preempt_enable(void);

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
 * C++ (C++17; docs/cxx.md)
 *
 * From C++ the same API, plus native forms in place of the go() macro:
 *
 *   goro_t *h = go([=] { return count(text); });     // any callable
 *   go(f, 2, std::string("x"));                       // copies, as std::thread
 *   long n = goro_join_rethrow(h);                    // rethrows its exception
 *
 * go(f, args...) -> goro_t *, or NULL with errno set (EINVAL: f is a null
 *   pointer; ENOMEM: no memory for the callable; else as the C form).
 *   f and args are decay-copied (moved when they are rvalues) in the
 *   caller, which gets any exception their constructors throw; the
 *   coroutine calls std::invoke(std::move(f), std::move(args)...) and
 *   destroys them when it ends. Pass references with std::ref. The call
 *   returns void, an integer, an enum, bool or a pointer (checked at
 *   compile time), which goro_join hands back as a long.
 * goro_go(&h, &attr, f, args...) -> 0 or -errno; h NULL: detached.
 * An exception that escapes f ends the coroutine (join result 0) and is
 *   kept for its joiner:
 *     goro_join(h, &result, &error)  0 or -errno as goro_join; error (a
 *                                    std::exception_ptr *, may be NULL)
 *                                    receives it, or nullptr;
 *     goro_join_until(h, &result, &error, deadline)   the same, timed;
 *     goro_join_rethrow(h)           the result, or rethrows the exception;
 *                                    a join error as std::system_error.
 *   A coroutine that is detached when an exception escapes it calls
 *   std::terminate, as std::thread does. A plain goro_join (C, or the
 *   two-argument form) of a coroutine whose exception escaped returns 0
 *   with result 0, and the exception is destroyed.
 *
 * In every coroutine, however started: the exceptions being handled
 * (`throw;`) and std::uncaught_exceptions() belong to the coroutine, not
 * to its thread; goro_exit() unwinds the coroutine's frames, running
 * destructors, before it ends it (catch (...) sees it, and must rethrow).
 * ------------------------------------------------------------------------ */

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

/* Implementation of the C++ forms (runtime/coro/cxx.c, coro.c). Not part of
 * the contract. An exception that escaped a coroutine stays with the
 * coroutine until a join takes it; a join or detach that does not want it
 * destroys it. */
struct goro__cxx_escaped {
    void (*destroy)(struct goro__cxx_escaped *e);
};
void goro__cxx_register(void *(*get_globals)(void));
int goro__cxx_keep(struct goro__cxx_escaped *e);
int goro__cxx_join_until(goro_t *h, long *result, struct goro__cxx_escaped **escaped,
                         int64_t deadline);
int goro__cxx_exiting(void);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif

#if defined(__cplusplus) && __cplusplus >= 201703L
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <cxxabi.h>

#undef go
#undef goro_go

namespace goro__cxx {

/* goro keeps the C++ runtime's exception state per coroutine once it
 * knows where that runtime keeps it. It looks when libgoro is loaded; each
 * C++ translation unit that includes this header also tells it when it is
 * loaded, which covers a C++ library that a C program dlopens later. */
inline const bool registered =
    (goro__cxx_register(reinterpret_cast<void *(*)(void)>(&abi::__cxa_get_globals)), true);

template <class R>
inline constexpr bool returns_a_long = std::is_void_v<R> || std::is_integral_v<R> ||
    std::is_enum_v<R> || std::is_pointer_v<R> || std::is_null_pointer_v<R>;

/* The join value, widened as the C form widens it. */
template <class R>
long to_long(R &&value)
{
    using D = std::decay_t<R>;
    if constexpr (std::is_pointer_v<D>)
        return static_cast<long>(reinterpret_cast<std::intptr_t>(value));
    else if constexpr (std::is_null_pointer_v<D>)
        return 0;
    else
        return static_cast<long>(value);
}

/* The callable and its arguments, decay-copied. On the heap, but for a
 * small lone callable (fits_in_arg): the spawner may return before the
 * coroutine runs, and goro_spawn carries one pointer. */
template <class F, class... A>
struct task {
    std::tuple<F, A...> parts;

    template <class... X>
    explicit task(X &&...x) : parts(std::forward<X>(x)...) {}

    long run()
    {
        return std::apply([](F &f, A &...a) -> long {
            if constexpr (std::is_void_v<std::invoke_result_t<F, A...>>) {
                std::invoke(std::move(f), std::move(a)...);
                return 0;
            } else {
                return to_long(std::invoke(std::move(f), std::move(a)...));
            }
        }, parts);
    }
};

/* An exception that escaped a coroutine, until its joiner takes it. */
struct escaped : goro__cxx_escaped {
    std::exception_ptr error;
};

inline void destroy_escaped(goro__cxx_escaped *e)
{
    delete static_cast<escaped *>(e);
}

/* In the handler of what escaped: keep it for the joiner, or terminate. */
inline void keep_escaped() noexcept
{
    escaped *e = new (std::nothrow) escaped{};
    if (e) {
        e->destroy = &destroy_escaped;
        e->error = std::current_exception();
        if (goro__cxx_keep(e) == 0)
            return;
        delete e;
        std::fprintf(stderr, "goro: an exception escaped detached coroutine %llu\n",
                     static_cast<unsigned long long>(goro_id(goro_self())));
    } else {
        std::fprintf(stderr, "goro: no memory to keep the exception that escaped "
                     "coroutine %llu\n", static_cast<unsigned long long>(goro_id(goro_self())));
    }
    std::terminate();               /* in the handler: the message names the exception */
}

/* Runs the task and keeps what escapes it for the joiner. goro_exit's
 * unwinding passes through the catch (...) on to the coroutine's first
 * frame. */
template <class Task>
long run_guarded(Task &t)
{
    try {
        return t.run();
    } catch (...) {
        if (goro__cxx_exiting())
            throw;
        keep_escaped();
    }
    return 0;
}

/* The coroutine's entry (goro_spawn's fn) for a task on the heap. */
template <class Task>
long entry(void *arg)
{
    std::unique_ptr<Task> t(static_cast<Task *>(arg));
    return run_guarded(*t);
}

/* A callable without arguments that fits in a pointer and copies as bytes
 * - a function pointer, a lambda that captures a pointer or two ints -
 * travels in goro_spawn's arg itself: no allocation. */
template <class Fn>
inline constexpr bool fits_in_arg = std::is_trivially_copyable_v<Fn> &&
    sizeof(Fn) <= sizeof(void *) && alignof(Fn) <= alignof(void *);

template <class Fn>
long entry_in_arg(void *arg)
{
    alignas(Fn) unsigned char bytes[sizeof(Fn)];
    std::memcpy(bytes, &arg, sizeof(Fn));
    task<Fn> t(*std::launder(reinterpret_cast<Fn *>(bytes)));
    return run_guarded(t);
}

template <class F, class... A>
int spawn(goro_t **h, const goro_attr_t *attr, F &&f, A &&...args)
{
    using Fn = std::decay_t<F>;
    static_assert(std::is_invocable_v<Fn, std::decay_t<A>...>,
                  "goro: go(f, args...) calls f with moved copies of args, as std::thread "
                  "does; pass references with std::ref, null pointers as nullptr");
    static_assert(returns_a_long<std::invoke_result_t<Fn, std::decay_t<A>...>>,
                  "goro: the callable must return void, an integer, an enum, bool or a "
                  "pointer (goro_join hands it back as a long); hand other results back "
                  "through a captured reference, a channel or a std::promise");
    if (h)
        *h = nullptr;
    using Given = std::remove_cv_t<std::remove_reference_t<F>>;
    if constexpr (std::is_pointer_v<Given> || std::is_member_pointer_v<Given>) {
        if (!f)
            return -EINVAL;             /* as the C form: "fn is NULL" */
    }
    if constexpr (sizeof...(A) == 0 && fits_in_arg<Fn>) {
        Fn copy(std::forward<F>(f));
        void *arg = nullptr;
        std::memcpy(&arg, &copy, sizeof copy);
        return goro_spawn(h, attr, &entry_in_arg<Fn>, arg);
    }
    using Task = task<Fn, std::decay_t<A>...>;
    Task *t = new (std::nothrow) Task(std::forward<F>(f), std::forward<A>(args)...);
    if (!t)
        return -ENOMEM;
    int err = goro_spawn(h, attr, &entry<Task>, t);
    if (err)
        delete t;
    return err;
}

} // namespace goro__cxx

template <class F, class... A>
goro_t *go(F &&f, A &&...args)
{
    goro_t *h = nullptr;
    int err = goro__cxx::spawn(&h, nullptr, std::forward<F>(f), std::forward<A>(args)...);
    return goro__handle_or_errno(err, h);
}

template <class F, class... A>
int goro_go(goro_t **h, const goro_attr_t *attr, F &&f, A &&...args)
{
    return goro__cxx::spawn(h, attr, std::forward<F>(f), std::forward<A>(args)...);
}

#undef goro_group_go
/* An exception escaping a group member ends the program, as for any
 * detached coroutine: catch it and end with goro_exit_err. */
template <class F, class... A>
int goro_group_go(goro_group_t *g, F &&f, A &&...args)
{
    goro_attr_t attr{};
    attr.group = goro__group_arg(g);
    return goro__cxx::spawn(nullptr, &attr, std::forward<F>(f), std::forward<A>(args)...);
}

inline int goro_join_until(goro_t *h, long *result, std::exception_ptr *error,
                           int64_t deadline)
{
    if (error)
        *error = nullptr;
    goro__cxx_escaped *kept = nullptr;
    int err = goro__cxx_join_until(h, result, error ? &kept : nullptr, deadline);
    if (kept) {
        std::unique_ptr<goro__cxx::escaped> e(static_cast<goro__cxx::escaped *>(kept));
        *error = std::move(e->error);
    }
    return err;
}

inline int goro_join(goro_t *h, long *result, std::exception_ptr *error)
{
    return goro_join_until(h, result, error, GORO_FOREVER);
}

inline long goro_join_rethrow(goro_t *h)
{
    long result = 0;
    std::exception_ptr error;
    int err = goro_join(h, &result, &error);
    if (err)
        throw std::system_error(-err, std::generic_category(), "goro_join");
    if (error)
        std::rethrow_exception(error);
    return result;
}

#elif defined(__cplusplus)
/* Older C++ has had its one #error line (top of this file); the C spawn
 * macros would add a page more, so they go quiet. */
#undef go
#undef goro_go
#undef goro_group_go
#define go(...) ((goro_t *)0)
#define goro_go(...) (-1)
#define goro_group_go(...) (-1)
#endif /* C++17 */
#endif /* GORO_H */
