/*
 * goro/structured.h: coroutines that run, wait, fail and are cancelled
 * together, and what travels with them (docs/structured.md). goro.h
 * includes it; it may be included alone.
 *
 *   Priorities      three classes, lent to whoever a waiter waits for
 *   Error objects   failures that travel with a coroutine's end
 *   Groups          spawn, wait, fail and cancel together; the cancellation
 *                   tree
 *   Single-flight   callers of one key share one computation
 *   Watching        a scope's done channel, after-functions; one-shot timers
 */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_STRUCTURED_H
#define GORO_STRUCTURED_H

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

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
                             the group; its error is then ETIMEDOUT. Its
                             members' deadline in force (goro_deadline), or
                             the maker's if nearer */
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
 * Weighted semaphores: n units at a time, all or nothing, FIFO
 *
 *   goro_wsem_t mem;
 *   goro_wsem_init(&mem, 64 << 20);              // 64 MB of buffers
 *   if (goro_wsem_acquire_until(&mem, len, deadline) == 0) {
 *       ...                                       // use len bytes
 *       goro_wsem_release(&mem, len);
 *   }
 *
 * Go's semaphore.Weighted. A request takes its n units at once or waits
 * holding none, so two callers that each need several units cannot
 * deadlock by holding part of them. Waiters are served in arrival order:
 * a large request at the head of the queue holds back smaller later ones
 * even when they would fit (otherwise it could starve). A waiter that
 * gives up (deadline, cancel) holds nothing and lets those behind it in.
 * The object is the caller's (no allocation); destroy it when no caller
 * waits.
 * ------------------------------------------------------------------------ */
typedef struct goro_wsem { uintptr_t opaque[5]; } goro_wsem_t;
#define GORO_WSEM_INIT(size) { { 0, (uintptr_t)(size) } }

/* size >= 0 units, all free. 0 or -EINVAL. */
int goro_wsem_init(goro_wsem_t *sem, long size);
/* Takes n units (may switch). 0; -EINVAL (NULL, n < 0, or n > size: it
 * could never be had); -ETIMEDOUT, -ECANCELED holding nothing. n == 0
 * returns at once when nobody waits, else queues like any request. */
int goro_wsem_acquire(goro_wsem_t *sem, long n);
int goro_wsem_acquire_until(goro_wsem_t *sem, long n, int64_t deadline);
/* 0, or -EAGAIN when n units are not free now or others wait (FIFO). */
int goro_wsem_try_acquire(goro_wsem_t *sem, long n);
/* Gives n units back and hands them to the waiters at the head while they
 * fit. 0, or -EINVAL (n < 0, or more than is held: nothing changes). */
int goro_wsem_release(goro_wsem_t *sem, long n);
/* Units held now (a snapshot), or -EINVAL. */
long goro_wsem_held(goro_wsem_t *sem);
/* Callers waiting now (a snapshot, for tests and monitoring), or -EINVAL. */
int goro_wsem_waiting(goro_wsem_t *sem);
/* 0, -EINVAL, or -EBUSY while a caller waits. */
int goro_wsem_destroy(goro_wsem_t *sem);

/* ------------------------------------------------------------------------
 * Futures: one value (or an error object) for many waiters (docs/structured.md)
 *
 *   goro_future_t *f;
 *   goro_future_new(&f, sizeof(struct page));     // the value's size, fixed
 *   go(fetch_into, f);                            // goro_future_set(f, &page)
 *   struct page p;                                //   or goro_future_fail(f, err)
 *   goro_err_t *err;
 *   if (goro_future_get_until(f, &p, &err, deadline) == 0) ...
 *   goro_future_free(f);
 *
 * Set once, with a value of the size given at creation (copied in) or
 * with an error object; read by any number of waiters, each of which gets
 * its own copy of the value (and of the error). goro_future_done(f) is a
 * channel that is closed when f is set: put it in a goro_select as a
 * GORO_RECV case to wait for f beside other things, then read f with
 * goro_future_get (it no longer waits).
 *
 * Lifetime: goro_future_new() -> goro_future_set() or _fail() (once, from
 * any coroutine or thread) and goro_future_get()s (before or after the
 * set) -> goro_future_free() by its owner once no get waits. The done
 * channel is the future's: freed with it, not by the caller.
 * ------------------------------------------------------------------------ */
typedef struct goro_future goro_future_t;

/* A pending future for a value of size bytes (0: an event with no value).
 * 0, -EINVAL (NULL f, size over 1 GiB), -ENOMEM. */
int goro_future_new(goro_future_t **f, size_t size);
/* Sets the value (copies size bytes from value) and wakes every waiter.
 * 0, -EINVAL (NULL f, or NULL value with size > 0), -EALREADY (set
 * already: nothing changes). */
int goro_future_set(goro_future_t *f, const void *value);
/* Sets an error instead: takes err in every case (freed on -EINVAL,
 * -EALREADY). */
int goro_future_fail(goro_future_t *f, goro_err_t *err);
/* Waits until f is set (may switch). 0: the value was copied to value
 * (may be NULL); -code of f's error, with *err (may be NULL) a copy owned
 * by the caller; or, with *err NULL, -ETIMEDOUT / -ECANCELED when this
 * waiter gave up (f is unchanged), -EINVAL. */
int goro_future_get(goro_future_t *f, void *value, goro_err_t **err);
int goro_future_get_until(goro_future_t *f, void *value, goro_err_t **err,
                          int64_t deadline);
/* 1 once set, 0 before, -EINVAL. */
int goro_future_ready(goro_future_t *f);
/* A channel (element size 0) closed once f is set; NULL: NULL f or no
 * memory. Made on the first call; every call returns the same one. */
goro_chan_t *goro_future_done(goro_future_t *f);
/* 0 (NULL: nothing), or -EBUSY while a get waits (f is left as it was). */
int goro_future_free(goro_future_t *f);
/* All-of: waits until every one of fs[0..n) is set; 0 if all hold values,
 * else -code of the first failed one in the order given; -ETIMEDOUT /
 * -ECANCELED if the wait gave up first; -EINVAL, -ENOMEM. */
int goro_future_all_until(goro_future_t *const *fs, int n, int64_t deadline);
/* Any-of: waits until one of fs[0..n) is set and returns its index (of
 * several set, one at random); -ETIMEDOUT, -ECANCELED, -EINVAL, -ENOMEM. */
int goro_future_any_until(goro_future_t *const *fs, int n, int64_t deadline);

/* Single-flight's future form (Go's DoChan): *f, owned by the caller, is
 * set when key's computation ends - started now, or the one already in
 * flight - with a goro_flight_result_t, or a copy of its error. shared:
 * the outcome went to more than one caller. Never waits. 0, -EINVAL,
 * -ENOMEM. The caller frees *f (goro_future_free) whenever it likes, set
 * or not: the computation keeps what it needs. */
typedef struct goro_flight_result {
    long value;
    int shared;
} goro_flight_result_t;
int goro_flight_start(goro_flight_t *fl, const char *key,
                      long (*fn)(const char *key, void *arg), void *arg,
                      goro_future_t **f);

/* ------------------------------------------------------------------------
 * Cancellation with a cause (Go's context.Cause) (docs/structured.md)
 *
 * goro_cancel_cause(h, err) is goro_cancel(h) that also says why. The
 * cause reaches every coroutine the cancel reaches: h itself, and the
 * members of the groups below it, however deep; each reads it with
 * goro_cause(). A group cancelled by its deadline gives ETIMEDOUT, and so
 * do the groups below it (their waits return -ETIMEDOUT, "a deadline above
 * it passed"); the first failure of a FIRST_ERROR group is its members'
 * cause. The waits themselves end with -ECANCELED (or -ETIMEDOUT for a
 * coroutine whose deadline in force has passed, below): the cause says
 * why. The first cause wins; later ones are freed.
 * ------------------------------------------------------------------------ */

/* Cancels h as goro_cancel does, with cause (taken in every case: kept by
 * h until it ends, or freed). 0 or -EINVAL (NULL h or cause). */
int goro_cancel_cause(goro_t *h, goro_err_t *cause);
/* The same through a token: 0, -ESRCH (ended), -EINVAL. */
int goro_cancel_token_cause(goro_token_t tok, goro_err_t *cause);
/* goro_group_cancel with a cause for its members (taken; the group keeps
 * a copy unless it was cancelled already). 0 or -EINVAL. */
int goro_group_cancel_cause(goro_group_t *g, goro_err_t *cause);
/* Why the calling coroutine was cancelled: the cause given to it, else its
 * group's (a copy of the cause from above, the first failure, or a
 * message-less ETIMEDOUT for a deadline), else a message-less ETIMEDOUT
 * if its deadline in force (goro_deadline) has passed, else a
 * message-less ECANCELED for a plain cancel; NULL when none of these
 * holds (or outside a coroutine). Borrowed: valid until the coroutine ends; goro_err_copy it
 * to keep it. */
const goro_err_t *goro_cause(void);

/* ------------------------------------------------------------------------
 * Deadlines in force (Go's ctx.Deadline, context.WithDeadline)
 * (docs/structured.md)
 *
 *   int64_t prev = goro_deadline_push(goro_now() + 50 * GORO_MSEC);
 *   int r = fetch_profile(db, id);   // its goro waits end by then
 *   goro_deadline_pop(prev);         // r may be -ETIMEDOUT
 *
 * A coroutine has a deadline in force, which every goro wait it makes
 * honours without being passed it: I/O, sleep, channels, select, locks,
 * semaphores, joins, futures - each ends by the nearer of its own
 * deadline and the one in force, and returns -ETIMEDOUT when the one in
 * force ends it (a sleep cut short by it too). goro_offload and goro_once
 * waits, which run to their end, are the exception, as for cancellation.
 *
 * It comes from two places. goro_deadline_push narrows it for a stretch
 * of code in the same coroutine (scopes nest: push returns the deadline
 * in force before it, pop puts that back). And a group's members inherit
 * their group's deadline: the group's own (goro_group_attr_t.deadline),
 * or its maker's deadline in force if that is nearer; so a deadline
 * reaches every level of groups below it, and a member cancelled by it
 * gets -ETIMEDOUT from its waits rather than -ECANCELED. A pushed
 * deadline is not a cancel: it closes no done channel, and after the pop
 * the coroutine's waits work again. Coroutines spawned with go() or
 * goro_go() outside a group start with none, as they start uncancelled.
 * ------------------------------------------------------------------------ */

/* The calling coroutine's deadline in force, or GORO_FOREVER: none (and
 * outside a coroutine). */
int64_t goro_deadline(void);
/* Narrows the caller's deadline in force to deadline if that is nearer
 * (GORO_FOREVER or any negative value: no change) and returns the one in
 * force before, for goro_deadline_pop. Outside a coroutine it does
 * nothing and returns GORO_FOREVER. Never fails. */
int64_t goro_deadline_push(int64_t deadline);
/* Makes prev (from goro_deadline_push) the caller's deadline in force
 * again. Outside a coroutine it does nothing. */
void goro_deadline_pop(int64_t prev);

/* ------------------------------------------------------------------------
 * Groups: TryGo, SetLimit (docs/structured.md)
 *
 * goro_group_try_go(g, fn, args...) is goro_group_go that never waits for
 * a slot: -EAGAIN when `limit` members run (nothing spawned); the other
 * results as goro_group_go. Without a limit it is goro_group_go.
 * goro_group_set_limit(g, n) changes the limit (0: none): raising it lets
 * waiting spawners in at once; lowering it admits no one until fewer than
 * n run (running members are not stopped). Moving between no limit and a
 * limit is refused with -EBUSY while members run. 0, -EINVAL, -EBUSY.
 * A group is not reused after its wait (-EINVAL): make a new one.
 * ------------------------------------------------------------------------ */
#define GORO__GROUP_TRY ((uintptr_t)2)
static inline goro_group_t *goro__group_try_arg(goro_group_t *g)
{
    return (goro_group_t *)((uintptr_t)goro__group_arg(g) | GORO__GROUP_TRY);
}
#define goro_group_try_go(g, ...) \
    goro_go(NULL, &(goro_attr_t){ .group = goro__group_try_arg(g) }, __VA_ARGS__)
int goro_group_set_limit(goro_group_t *g, int limit);

/* ---- Watching a scope: done channels, after-functions (Go's ctx.Done,
 * context.AfterFunc) ----
 *
 *   goro_case_t cs[] = { { .ch = goro_group_done(g), .op = GORO_RECV },
 *                        { .ch = jobs, .op = GORO_RECV, .elem = &job } };
 *   if (goro_select(cs, 2, 0) == 0) ...       // the group was cancelled
 *
 * A scope is a coroutine or a group. Its done channel (element size 0) is
 * closed when the scope is cancelled - goro_cancel, a cancel from above,
 * a group's first failure or deadline, goro_group_cancel - and never
 * otherwise: a scope that ends without being cancelled leaves it open.
 * Every call returns the same channel, made on the first one. It is the
 * scope's: not freed by the caller, valid while the scope is - a
 * coroutine's until its handle is released (joined, or detached after its
 * end; for a detached coroutine, its own end), a group's until
 * goro_group_free. No select may wait on it past that.
 *
 * goro_after_cancel(h, fn, arg, &stop) runs fn(arg) in a coroutine of its
 * own when h is cancelled (at once if it already is); after h is over (a
 * coroutine's end, a group's wait or free) fn never runs. *stop (stop may
 * be NULL: no handle) is the caller's: goro_after_stop(stop) releases it
 * and returns 1 if fn had not started and now never will, 0 if it has
 * started (or run). Call it exactly once per handle. Each after-function
 * holds a parked coroutine until its scope is cancelled or over (a
 * shutdown waits for that). */
typedef struct goro_afterfn goro_after_t;

/* h's done channel (NULL h: the calling coroutine's); NULL: not a
 * coroutine that can be cancelled (a thread, a freed handle) or no
 * memory. */
goro_chan_t *goro_done(goro_t *h);
/* g's done channel; NULL: NULL g or no memory. */
goro_chan_t *goro_group_done(goro_group_t *g);
/* Registers fn(arg) to run when h (NULL: the caller) is cancelled. 0,
 * -EINVAL (no such coroutine, NULL fn), -ENOMEM, or what a spawn fails
 * with; *stop NULL on failure. */
int goro_after_cancel(goro_t *h, void (*fn)(void *arg), void *arg, goro_after_t **stop);
/* The same for a group. */
int goro_group_after_cancel(goro_group_t *g, void (*fn)(void *arg), void *arg,
                            goro_after_t **stop);
/* 1: fn will never run because of this stop; 0: it has started (or run);
 * -EINVAL (NULL). Releases stop. */
int goro_after_stop(goro_after_t *stop);

/* ---- One-shot timers (Go's time.Timer, time.After) ----
 *
 *   goro_timer_t *t;
 *   goro_timer_new(&t, 50 * GORO_MSEC);          // time.NewTimer / time.After
 *   goro_case_t cs[] = { { .ch = goro_timer_chan(t), .op = GORO_RECV, .elem = &when },
 *                        { .ch = replies, .op = GORO_RECV, .elem = &reply } };
 *   goro_select(cs, 2, 0);
 *   goro_timer_free(t);
 *
 * A timer's channel (int64_t elements, capacity one) receives the time it
 * fired (goro_now()'s clock) once, ns after the start or reset. time.After
 * is goro_timer_new + goro_timer_chan: C has no collector, so the timer is
 * what the caller frees - goro_timer_free, at any time, fired or not, read
 * or not (it stops it first; the channel goes with it). Go 1.23's rules:
 * stop and reset leave no stale value behind - after either, a receive
 * sees only a fire that comes later. */
typedef struct goro_oneshot goro_timer_t;

/* Starts a timer that fires once, ns from now (ns <= 0: at once). 0,
 * -EINVAL (NULL t), -ENOMEM, or what starting the runtime returned. */
int goro_timer_new(goro_timer_t **t, int64_t ns);
/* Its channel (the timer's: freed with it); NULL for NULL. */
goro_chan_t *goro_timer_chan(goro_timer_t *t);
/* 1 if this stopped it before it fired (Go's t.Stop() true), 0 if it
 * had fired or was stopped already; -EINVAL. A value it sent and nobody
 * received is dropped. */
int goro_timer_stop(goro_timer_t *t);
/* Stops it, drops an unread value, and starts it again to fire ns from
 * now. 1 if it was still pending, 0 if not; -EINVAL. */
int goro_timer_reset(goro_timer_t *t, int64_t ns);
/* Stops and frees t and its channel. 0, -EINVAL, or -EBUSY while a
 * coroutine waits on its channel (t is left as it was). */
int goro_timer_free(goro_timer_t *t);

/* ---- Coroutine-local storage (pthread keys for coroutines) ----
 *
 *   static goro_key_t conn_key;                  // goro_key_create(&conn_key, conn_close)
 *   goro_local_set(conn_key, c);                 // this coroutine's value
 *   struct conn *c = goro_local_get(conn_key);   // NULL until set
 *
 * Each coroutine has its own value for each key, NULL until it sets one.
 * When a coroutine ends (returns, goro_exit, goro_exit_err, a C++ unwind),
 * each non-NULL value of a live key is cleared and passed to the key's
 * destructor (NULL: none), on the coroutine's own stack, as that
 * coroutine, after the cleanups of the calls it ended in; destructors that
 * set values again get up to three more rounds (pthread's rule). A thread
 * outside the coroutines has no values: get returns NULL, set -EPERM (use
 * pthread keys there). Deleting a key runs no destructor: its values read
 * as NULL from then on (and through a later key), and are the caller's to
 * free. Up to 1024 keys at once; the first 8 cost no allocation. */
typedef uint32_t goro_key_t;

/* 0, -EINVAL (NULL key), -EAGAIN (1024 keys in use). */
int goro_key_create(goro_key_t *key, void (*dtor)(void *value));
/* 0, or -EINVAL (not a key in use). */
int goro_key_delete(goro_key_t key);
/* The calling coroutine's value for key; NULL: none, not a key in use, or
 * not in a coroutine. */
void *goro_local_get(goro_key_t key);
/* 0; -EINVAL (not a key in use), -EPERM (not in a coroutine), -ENOMEM. */
int goro_local_set(goro_key_t key, void *value);

/* ---- sync: OnceValue, WaitGroup.Go, a barrier ----
 *
 * goro_once_value: goro_once with an argument and a value (Go's
 * sync.OnceValue). The first caller runs fn(arg); every caller, before or
 * after, gets its return in *value (may be NULL). As goro_once, the others
 * wait for it (not cancellable), and fn ending its coroutine instead of
 * returning (goro_exit, a C++ exception) still counts as done: every call
 * then returns -EOWNERDEAD with *value 0. 0, -EOWNERDEAD, -EINVAL (NULL
 * once or fn), -EDEADLK (fn calls it on its own once). */
typedef struct goro_once_value {
    goro_once_t once;
    long value;                    /* fn's return, once it has returned */
    int returned;
} goro_once_value_t;
#define GORO_ONCE_VALUE_INIT { GORO_ONCE_INIT, 0, 0 }
int goro_once_value(goro_once_value_t *ov, long (*fn)(void *arg), void *arg, long *value);

/* goro_waitgroup_go(wg, fn, args...) is Go's wg.Go: goro_waitgroup_add(wg,
 * 1), then fn(args...) in a new detached coroutine, whose end (after fn,
 * however it ends) is goro_waitgroup_done(wg). Returns 0, -EINVAL (NULL
 * wg or fn), or what the add or go() fails with (then nothing is counted). */
#define GORO__GROUP_WG ((uintptr_t)4)
static inline goro_group_t *goro__wg_arg(goro_waitgroup_t *wg)
{
    return (goro_group_t *)((uintptr_t)wg | GORO__GROUP_WG);
}
#define goro_waitgroup_go(wg, ...) \
    goro_go(NULL, &(goro_attr_t){ .group = goro__wg_arg(wg) }, __VA_ARGS__)

/* A barrier (pthread_barrier_t): goro_barrier_wait returns once n
 * callers are inside the round - GORO_BARRIER_SERIAL to one of them (the
 * last to arrive; PTHREAD_BARRIER_SERIAL_THREAD), 0 to the others - and
 * the barrier is ready for the next round at once. A waiter that gives up
 * (-ETIMEDOUT, -ECANCELED) leaves the round: the others go on waiting,
 * and the round still needs n callers inside it at once (it never trips
 * short). One whose deadline or cancel comes as the round trips passed
 * (0). goro_barrier_init: 0, -EINVAL (NULL, n <= 0). destroy: 0, -EINVAL,
 * -EBUSY while a round has callers in it. */
typedef struct goro_barrier { uintptr_t opaque[6]; } goro_barrier_t;
#define GORO_BARRIER_SERIAL 1
int goro_barrier_init(goro_barrier_t *b, long n);
int goro_barrier_wait(goro_barrier_t *b);
int goro_barrier_wait_until(goro_barrier_t *b, int64_t deadline);
int goro_barrier_destroy(goro_barrier_t *b);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* GORO_STRUCTURED_H */
