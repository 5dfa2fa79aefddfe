/*
 * Single-flight (docs/structured.md): the callers of one key share one
 * computation, which runs in a coroutine of its own - the runner - so that
 * no caller's cancellation reaches it.
 *
 * A set (goro_flight_t) is a hash table of the calls in flight, keyed by
 * string, under one lock. A call is made by its first caller (the
 * starter), which spawns the runner and then waits like every later
 * caller: a waiter record on the call's queue. The runner's end hook
 * (g->end_hook, run on its own stack by coro/'s life_end) finishes the
 * call: takes it off the table, hands each waiter its outcome and wakes
 * it.
 *
 * Invariants, under the set's lock:
 *   1. A call is in the table, under its key, from its making until it is
 *      finished or forgotten; at most one call per key is in the table.
 *   2. A finished call has no waiter queued: the finish takes them all
 *      (those that gave up are dropped), and a caller never queues on a
 *      finished call.
 *   3. The call is freed by whoever is last of the runner's finish and the
 *      starter: until the starter has queued (or seen the call finished),
 *      `starting` is set and the finish leaves the call to it. So a runner
 *      that ends before its starter has waited loses nothing.
 *   4. `users` counts callers inside goro_flight_do and `running` the calls
 *      not finished: the set is freed only when both are 0, so a caller
 *      that gave up can still take the lock to leave the queue.
 * A woken waiter reads only its own record (filled before it is woken,
 * while the finish holds its claim), never the call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched/sched.h"
#include "coro/coro.h"
#include "wait/future.h"
#include "wait/waitq.h"

struct flight_call {
    struct flight_call *next;      /* the table's chain */
    struct goro_flight *set;
    long (*fn)(const char *key, void *arg);
    void *arg;
    struct goro *runner;           /* once it runs: a call from it is -EDEADLK */
    uint64_t hash;
    bool keyed;                    /* invariant 1 */
    bool starting;                 /* invariant 3 */
    bool finished;
    long result;                   /* once finished */
    goro_err_t *err;               /* once finished: the starter's, if it is to come */
    struct goro_waitq waiters;
    int callers;                   /* every caller so far: > 1 is "shared" */
    struct goro_future **futures;  /* goro_flight_start's, each held (future.h) */
    int nfutures;
    char key[];
};

struct goro_flight {
    goro_lock_t lock;
    struct flight_call **table;
    size_t nbuckets;               /* a power of two */
    size_t keyed;
    int users, running;            /* invariant 4 */
};

/* What a waiter is handed (its record's elem). */
struct flight_outcome {
    long result;
    goro_err_t *err;
};

#define FLIGHT_BUCKETS_MIN 16

/* FNV-1a: keys are short strings; the table only needs them spread. */
static uint64_t key_hash(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

static struct flight_call **bucket(struct goro_flight *fl, uint64_t hash)
{
    return &fl->table[hash & (fl->nbuckets - 1)];
}

/* Under the lock: key's call in flight, or NULL. */
static struct flight_call *lookup(struct goro_flight *fl, const char *key, uint64_t hash)
{
    for (struct flight_call *c = *bucket(fl, hash); c; c = c->next)
        if (c->hash == hash && strcmp(c->key, key) == 0)
            return c;
    return NULL;
}

/* Under the lock: doubles the table once it holds more calls than buckets.
 * Without memory it stays as it is (longer chains, nothing lost). */
static void grow(struct goro_flight *fl)
{
    if (fl->keyed <= fl->nbuckets)
        return;
    size_t n = fl->nbuckets * 2;
    struct flight_call **t = calloc(n, sizeof *t);
    if (!t)
        return;
    for (size_t i = 0; i < fl->nbuckets; i++)
        for (struct flight_call *c = fl->table[i], *next; c; c = next) {
            next = c->next;
            c->next = t[c->hash & (n - 1)];
            t[c->hash & (n - 1)] = c;
        }
    free(fl->table);
    fl->table = t;
    fl->nbuckets = n;
}

static void insert(struct goro_flight *fl, struct flight_call *c)
{
    GORO_ASSERT(!c->keyed && !c->finished);     /* flight: a call is keyed once (1) */
    struct flight_call **b = bucket(fl, c->hash);
    c->next = *b;
    *b = c;
    c->keyed = true;
    fl->keyed++;
    grow(fl);
}

static void unkey(struct goro_flight *fl, struct flight_call *c)
{
    if (!c->keyed)
        return;
    GORO_ASSERT(fl->keyed > 0);
    struct flight_call **p = bucket(fl, c->hash);
    while (*p != c)
        p = &(*p)->next;
    *p = c->next;
    c->keyed = false;
    fl->keyed--;
}

int goro_flight_new(goro_flight_t **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    struct goro_flight *fl = calloc(1, sizeof *fl);
    if (!fl || !(fl->table = calloc(FLIGHT_BUCKETS_MIN, sizeof *fl->table))) {
        free(fl);
        return -ENOMEM;
    }
    fl->nbuckets = FLIGHT_BUCKETS_MIN;
    *out = fl;
    return 0;
}

int goro_flight_free(goro_flight_t *fl)
{
    if (!fl)
        return -EINVAL;
    goro__lock(&fl->lock);
    bool busy = fl->users || fl->running;
    goro__unlock(&fl->lock);
    if (busy)
        return -EBUSY;
    free(fl->table);
    free(fl);
    return 0;
}

int goro_flight_forget(goro_flight_t *fl, const char *key)
{
    if (!fl || !key)
        return -EINVAL;
    uint64_t hash = key_hash(key);
    goro__lock(&fl->lock);
    struct flight_call *c = lookup(fl, key, hash);
    if (c)
        unkey(fl, c);
    goro__unlock(&fl->lock);
    return c ? 0 : -ENOENT;
}

int goro_flight_waiting(goro_flight_t *fl, const char *key)
{
    if (!fl || !key)
        return -EINVAL;
    uint64_t hash = key_hash(key);
    int n = 0;
    goro__lock(&fl->lock);
    struct flight_call *c = lookup(fl, key, hash);
    for (struct goro_waiter *w = c ? c->waiters.head : NULL; w; w = w->next)
        n++;
    goro__unlock(&fl->lock);
    return n;
}

/* ---- the computation ---- */

/* Ends c with its outcome (owned by c from here): off the table, and every
 * waiter handed the result or a copy of the error, then woken. Frees c
 * unless its starter has still to come for it (invariant 3). */
static void finish(struct flight_call *c, long result, goro_err_t *e)
{
    struct goro_flight *fl = c->set;
    goro__lock(&fl->lock);
    unkey(fl, c);
    c->finished = true;
    c->result = result;
    struct goro_waiter *claimed = NULL, *w;
    while ((w = goro__waitq_pop(&c->waiters))) {
        w->next = claimed;         /* off the queue and claimed: ours to chain */
        claimed = w;
    }
    /* flight: a finished call has no waiter queued (2) */
    GORO_ASSERT(!c->waiters.head && !c->keyed);
    bool starter_to_come = c->starting;
    if (starter_to_come)
        c->err = e;
    GORO_ASSERT(fl->running > 0);   /* flight: counts never negative (4) */
    fl->running--;
    goro_flight_result_t res = { .value = result, .shared = c->callers > 1 };
    struct goro_future **futures = c->futures;
    int nfutures = c->nfutures;
    c->futures = NULL;
    goro__unlock(&fl->lock);
    for (int i = 0; i < nfutures; i++) {
        if (e)
            goro_future_fail(futures[i], goro_err_copy(e));
        else
            goro_future_set(futures[i], &res);
        goro__future_drop(futures[i]);
    }
    free(futures);
    /* Each claimed waiter stays parked, its record in place, until it is
     * made runnable here. */
    while ((w = claimed)) {
        claimed = w->next;
        struct flight_outcome *out = w->elem;
        out->result = result;
        out->err = goro_err_copy(e);
        goro__ready(w->g);
    }
    if (!starter_to_come) {
        goro_err_free(e);
        free(c);
    }
}

/* The runner's end hook: whatever way it ended (return, goro_exit,
 * goro_exit_err), its outcome goes to the waiters. */
static void runner_end(struct goro *g, long result)
{
    finish(g->arg, result, goro__err_take_at_end(g, result));
}

static long runner(void *arg)
{
    struct flight_call *c = arg;
    struct goro *self = goro__current();
    self->end_hook = runner_end;
    goro__lock(&c->set->lock);
    c->runner = self;
    goro__unlock(&c->set->lock);
    return c->fn(c->key, c->arg);
}

/* Makes key's call (its runner is start's), or returns NULL: no memory. */
static struct flight_call *call_new(struct goro_flight *fl, const char *key, uint64_t hash,
                                    long (*fn)(const char *, void *), void *arg)
{
    size_t len = strlen(key) + 1;
    struct flight_call *c = calloc(1, sizeof *c + len);
    if (!c)
        return NULL;
    memcpy(c->key, key, len);
    c->set = fl;
    c->fn = fn;
    c->arg = arg;
    c->hash = hash;
    c->starting = true;
    return c;
}

/* The starter: spawns c's runner; a runner that cannot start finishes c
 * with the error, so the callers that joined meanwhile get it too. */
static void start(struct flight_call *c)
{
    char name[32];
    snprintf(name, sizeof name, "flight %.24s", c->key);
    int err = goro_spawn(NULL, &(goro_attr_t){ .name = name }, runner, c);
    if (err)
        finish(c, err, goro_err_new(err, "flight \"%.64s\": its coroutine could not start",
                                    c->key));
}

/* ---- the callers ---- */

/* Under the lock, which it releases: waits on c (0: finished, *out set)
 * or gives up (-errno). */
static int await(struct goro_flight *fl, struct flight_call *c, struct flight_outcome *out,
                 int64_t deadline)
{
    /* flight: a caller never queues on a finished call (2); the set
     * counts it (4) */
    GORO_ASSERT(!c->finished && fl->users > 0);
    struct goro_waiter w = { .g = goro__waiter_self(), .elem = out };
    return goro__waitq_wait(&c->waiters, &w, &fl->lock, GORO_W_FLIGHT, c, deadline, false);
}

/* The starter, after the spawn: waits like the others, or - the runner has
 * already finished - takes the outcome from c and frees it (invariant 3). */
static int starter_await(struct goro_flight *fl, struct flight_call *c,
                         struct flight_outcome *out, int64_t deadline)
{
    goro__lock(&fl->lock);
    GORO_ASSERT(c->starting);       /* flight: the starter comes for its call once (3) */
    c->starting = false;
    if (!c->finished)
        return await(fl, c, out, deadline);
    goro__unlock(&fl->lock);
    out->result = c->result;
    out->err = c->err;
    free(c);
    return 0;
}

static void user_leave(struct goro_flight *fl)
{
    goro__lock(&fl->lock);
    GORO_ASSERT(fl->users > 0);     /* flight: counts never negative (4) */
    fl->users--;
    goro__unlock(&fl->lock);
}

int goro_flight_do_until(goro_flight_t *fl, const char *key,
                         long (*fn)(const char *key, void *arg), void *arg, long *result,
                         goro_err_t **err, int64_t deadline)
{
    if (err)
        *err = NULL;
    if (!fl || !key || !fn)
        return -EINVAL;
    /* A caller that may not wait starts nothing. */
    int refused = goro__wait_check(deadline);
    if (refused)
        return goro__wait_refused(refused);
    uint64_t hash = key_hash(key);
    struct goro *self = goro__waiter_self();
    struct flight_outcome out = { 0 };
    struct flight_call *fresh = NULL;
    int r;
    goro__lock(&fl->lock);
    fl->users++;
    struct flight_call *c = lookup(fl, key, hash);
    if (!c) {
        /* Made outside the lock; another caller may make key's first. */
        goro__unlock(&fl->lock);
        fresh = call_new(fl, key, hash, fn, arg);
        goro__lock(&fl->lock);
        if (!fresh) {
            fl->users--;
            goro__unlock(&fl->lock);
            return -ENOMEM;
        }
        if (!(c = lookup(fl, key, hash))) {
            insert(fl, fresh);
            fl->running++;
        }
    }
    if (c && c->runner == self) {
        goro__unlock(&fl->lock);
        r = -EDEADLK;
    } else if (c) {
        c->callers++;
        r = await(fl, c, &out, deadline);
    } else {
        fresh->callers = 1;
        goro__unlock(&fl->lock);
        start(fresh);
        r = starter_await(fl, fresh, &out, deadline);
        fresh = NULL;
    }
    free(fresh);                   /* lost the race to make key's call */
    user_leave(fl);
    if (r)
        return r;
    if (result)
        *result = out.result;
    if (!out.err)
        return 0;
    r = -goro_err_code(out.err);
    if (err)
        *err = out.err;
    else
        goro_err_free(out.err);
    return r ? r : -EIO;
}

int goro_flight_do(goro_flight_t *fl, const char *key, long (*fn)(const char *key, void *arg),
                   void *arg, long *result, goro_err_t **err)
{
    return goro_flight_do_until(fl, key, fn, arg, result, err, GORO_FOREVER);
}

/* goro_flight_start: f joins key's call, or a new one it starts. */
int goro_flight_start(goro_flight_t *fl, const char *key,
                      long (*fn)(const char *key, void *arg), void *arg,
                      goro_future_t **out)
{
    if (out)
        *out = NULL;
    if (!fl || !key || !fn || !out)
        return -EINVAL;
    goro_future_t *f;
    int r = goro_future_new(&f, sizeof(goro_flight_result_t));
    if (r)
        return r;
    uint64_t hash = key_hash(key);
    struct flight_call *fresh = call_new(fl, key, hash, fn, arg);
    if (!fresh) {
        goro_future_free(f);
        return -ENOMEM;
    }
    goro__lock(&fl->lock);
    struct flight_call *c = lookup(fl, key, hash);
    bool starts = !c;
    if (starts) {
        c = fresh;
        insert(fl, c);
        fl->running++;
        c->starting = false;        /* nobody comes for it: the finish frees it */
    }
    struct goro_future **more = realloc(c->futures, (size_t)(c->nfutures + 1) * sizeof *more);
    if (!more) {
        if (starts) {               /* nothing started: undo */
            unkey(fl, c);
            fl->running--;
        }
        goro__unlock(&fl->lock);
        free(fresh);
        goro_future_free(f);
        return -ENOMEM;
    }
    c->futures = more;
    c->futures[c->nfutures++] = f;
    c->callers++;
    goro__future_hold(f);           /* the finish's, until it has set f */
    goro__unlock(&fl->lock);
    if (starts)
        start(c);
    else
        free(fresh);
    *out = f;
    return 0;
}

/* A waiter's object is its call (await): the runner alone finishes it. */
enum goro_held goro__flight_holder(const void *obj, goro_copy_fn *copy, struct goro **g)
{
    struct flight_call c;
    if (!copy(&c, obj, sizeof c) || !c.runner || c.finished)
        return GORO_HELD_NONE;
    *g = c.runner;
    return GORO_HELD_CORO;
}
