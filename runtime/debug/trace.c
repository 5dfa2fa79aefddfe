/*
 * The execution trace: what the scheduler did, event by event, for
 * goro_trace_stop (trace_json.c) to write as a Chrome / Perfetto trace.
 *
 * Recording. Every thread that records gets a ring of its own - a worker's
 * is its P's for as long as it holds one (an M holds its P for life but
 * for a hand-off), the monitor's is the monitor's, a thread outside the
 * runtime that spawns or wakes has its own - so an event is a few stores
 * and no lock: read the tick counter, fill the slot at pos, publish pos
 * (release). A full ring overwrites its oldest events: the trace keeps the
 * last buffer_size / 32 events of each thread and says how many it lost.
 * While no trace runs, an event is one relaxed load of goro__sched.tracing.
 *
 * Invariants:
 * 1. Only a ring's thread writes it (tls_buf). Recording is never
 *    interrupted by a recording on the same thread: the runtime's own code
 *    is never preempted (sched/preempt.c), and attach refuses to recurse.
 * 2. A ring outlives every writer: it is never unmapped. Its thread's exit
 *    marks it gone, and a later trace may give it to another thread; a
 *    trace of another buffer size maps new ones.
 * 3. The stop clears the flag before it reads the rings. A thread
 *    that loaded the flag just before may still record one event, at pos:
 *    past what the stop reads, unless the ring wrapped - then that slot is
 *    the oldest, so the stop leaves the oldest SLACK events of a full ring
 *    out.
 * 4. Each trace has a number (gen); a ring records for the trace whose
 *    number it holds, from its pos at that trace's first event (base).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"
#include "base/env.h"
#include "debug/debug.h"
#include "ticks.h"                  /* arch/<arch>/: goro__ticks */

#define DEFAULT_BUFFER (64u << 20)  /* per thread: 2M events */
#define MIN_BUFFER (64u << 10)
#define MAX_BUFFER ((size_t)1 << 34)
#define MAX_RINGS 4096
#define SLACK 8                     /* invariant 3 */

struct ring {
    _Atomic uint64_t pos;           /* events ever written (owner; release) */
    uint64_t base;                  /* pos when this trace began here */
    uint32_t gen;                   /* the trace it records for */
    int kind, id;                   /* its track (GORO_TRACK_*) */
    bool gone;                      /* its thread exited (under attach_lock) */
    uint64_t mask;
    struct goro_tev *ev;            /* the ring, after this header's page */
};

static struct {
    pthread_mutex_t lock;           /* start and stop */
    bool on, from_env;
    FILE *file;
    uint64_t cap;                   /* events per ring */
    struct goro_trace_clock clk;
} trace = { .lock = PTHREAD_MUTEX_INITIALIZER };

static _Atomic uint32_t gen;        /* the trace under way, or the last */
static _Atomic uint64_t unrecorded; /* events with no ring to go to */
static struct ring *rings[MAX_RINGS];
static int nrings;                  /* under attach_lock */
static _Atomic int attach_lock;     /* a spin lock: taken under runtime locks */
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread struct ring *tls_ring;
static __thread bool attaching;

static void attach_lock_take(void)
{
    while (atomic_exchange_explicit(&attach_lock, 1, memory_order_acquire))
        sched_yield();
}

static void attach_lock_drop(void)
{
    atomic_store_explicit(&attach_lock, 0, memory_order_release);
}

/* The thread's exit: its ring may serve another thread in a later trace. */
static void ring_gone(void *r)
{
    attach_lock_take();
    ((struct ring *)r)->gone = true;
    attach_lock_drop();
}

static void key_make(void)
{
    pthread_key_create(&ring_key, ring_gone);
}

static struct ring *ring_map(uint64_t cap)
{
    size_t page = goro__page_size();
    size_t size = page + cap * sizeof(struct goro_tev);
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    struct ring *r = map;
    r->mask = cap - 1;
    r->ev = (struct goro_tev *)((char *)map + page);
    return r;
}

/* Which track this thread's events belong to. */
static void ring_name(struct ring *r)
{
    struct goro_m *m = goro__m();
    if (m && m >= goro__sched.ms && m < goro__sched.ms + goro__sched.ms_cap) {
        r->kind = GORO_TRACK_WORKER;
        r->id = m->id;
    } else if (m) {
        r->kind = GORO_TRACK_MONITOR;
        r->id = 0;
    } else {
        r->kind = GORO_TRACK_THREAD;
        r->id = gettid();
    }
}

/* A ring for this thread in the trace under way (invariants 2 and 4):
 * its own if it fits, else one whose thread has gone, else a new one. */
static struct ring *attach(uint32_t now)
{
    if (attaching)
        return NULL;
    attaching = true;
    pthread_once(&key_once, key_make);
    attach_lock_take();
    struct ring *r = tls_ring;
    if (r && r->mask + 1 != trace.cap) {
        r->gone = true;
        r = NULL;
    }
    for (int i = 0; !r && i < nrings; i++)
        if (rings[i]->gone && rings[i]->gen != now && rings[i]->mask + 1 == trace.cap) {
            r = rings[i];
            r->gone = false;
        }
    if (!r && nrings < MAX_RINGS && (r = ring_map(trace.cap)))
        rings[nrings++] = r;
    if (r) {
        ring_name(r);
        r->base = atomic_load_explicit(&r->pos, memory_order_relaxed);
        r->gen = now;
        tls_ring = r;
        pthread_setspecific(ring_key, r);
    }
    attach_lock_drop();
    attaching = false;
    return r;
}

/* Records t (its ticks are filled in here) on this thread's ring. */
static void record(struct goro_tev *t)
{
    uint32_t now = atomic_load_explicit(&gen, memory_order_relaxed);
    struct ring *r = tls_ring;
    if (unlikely(!r || r->gen != now) && !(r = attach(now))) {
        atomic_fetch_add_explicit(&unrecorded, 1, memory_order_relaxed);
        return;
    }
    uint64_t i = atomic_load_explicit(&r->pos, memory_order_relaxed);
    t->ticks = goro__ticks();
    r->ev[i & r->mask] = *t;
    atomic_store_explicit(&r->pos, i + 1, memory_order_release);
}

void goro__trace_emit(int type, uint64_t g, uint64_t arg, uint32_t x, int a, int b)
{
    struct goro_tev t = { .g = g, .arg = arg, .x = x, .a = (uint8_t)a, .b = (uint8_t)b,
                          .type = (uint8_t)type };
    record(&t);
}

_Static_assert(offsetof(struct goro_tev, b) + 1 - offsetof(struct goro_tev, arg) ==
               GORO_TEV_TEXT, "a NAME's text overlays arg..b");
_Static_assert(sizeof(struct goro_tev) == 32, "an event is 32 bytes");

void goro__trace_name(const struct goro *g)
{
    size_t len = strnlen(g->name, sizeof g->name);
    for (size_t at = 0; at < len; at += GORO_TEV_TEXT) {
        struct goro_tev t = { .g = g->id, .c = (uint8_t)(at / GORO_TEV_TEXT),
                              .type = GORO_TEV_NAME };
        size_t n = len - at < GORO_TEV_TEXT ? len - at : GORO_TEV_TEXT;
        memcpy((char *)&t + offsetof(struct goro_tev, arg), g->name + at, n);
        record(&t);
    }
}

static int buffer_events(const goro_trace_attr_t *attr, uint64_t *cap)
{
    size_t bytes = attr ? attr->buffer_size : 0;
    if (bytes && (bytes < MIN_BUFFER || bytes > MAX_BUFFER))
        return -EINVAL;
    if (!bytes && !goro__env_size("GORO_TRACE_BUFFER", MIN_BUFFER, MAX_BUFFER, &bytes))
        bytes = DEFAULT_BUFFER;
    uint64_t n = 1;
    while (n * 2 * sizeof(struct goro_tev) <= bytes)
        n *= 2;
    *cap = n;
    return 0;
}

static int start_locked(const char *path, const goro_trace_attr_t *attr)
{
    if (!path || !*path)
        return -EINVAL;
    if (trace.on)
        return -EBUSY;
    uint64_t cap;
    int err = buffer_events(attr, &cap);
    if (err)
        return err;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        err = -errno;
        close(fd);
        return err;
    }
    trace.file = f;
    trace.cap = cap;
    atomic_store(&unrecorded, 0);
    atomic_fetch_add(&gen, 1);
    trace.clk.ns0 = goro__real_now();
    trace.clk.t0 = goro__ticks();
    trace.on = true;
    atomic_store(&goro__sched.tracing, 1);
    return 0;
}

int goro_trace_start(const char *path, const goro_trace_attr_t *attr)
{
    if (goro__forked())
        return goro__forked_error();
    pthread_mutex_lock(&trace.lock);
    int err = start_locked(path, attr);
    pthread_mutex_unlock(&trace.lock);
    return err;
}

/* This trace's part of each ring (invariants 3 and 4). */
static int views(struct goro_trace_ring *v, uint64_t *lost)
{
    uint32_t now = atomic_load(&gen);
    int n = 0;
    attach_lock_take();
    for (int i = 0; i < nrings; i++) {
        struct ring *r = rings[i];
        if (r->gen != now)
            continue;
        uint64_t to = atomic_load_explicit(&r->pos, memory_order_acquire);
        uint64_t from = r->base;
        if (to - from > r->mask + 1 - SLACK) {
            *lost += to - from - (r->mask + 1 - SLACK);
            from = to - (r->mask + 1 - SLACK);
        }
        v[n++] = (struct goro_trace_ring){ r->ev, r->mask, from, to, r->kind, r->id };
    }
    attach_lock_drop();
    return n;
}

/* After the write: the events' memory goes back to the kernel (a late
 * event, invariant 3, lands on a fresh page). */
static void rings_release(void)
{
    attach_lock_take();
    for (int i = 0; i < nrings; i++) {
        struct ring *r = rings[i];
        madvise(r->ev, (r->mask + 1) * sizeof(struct goro_tev), MADV_DONTNEED);
    }
    attach_lock_drop();
}

static int stop_locked(void)
{
    if (!trace.on)
        return -EINVAL;
    atomic_store(&goro__sched.tracing, 0);
    trace.clk.t1 = goro__ticks();
    trace.clk.ns1 = goro__real_now();
    trace.on = false;
    trace.from_env = false;
    static struct goro_trace_ring v[MAX_RINGS];
    uint64_t lost = atomic_load(&unrecorded);
    int n = views(v, &lost);
    int err = goro__trace_write(trace.file, v, n, &trace.clk, lost);
    if (fclose(trace.file) != 0 && !err)
        err = -errno;
    trace.file = NULL;
    rings_release();
    return err;
}

int goro_trace_stop(void)
{
    pthread_mutex_lock(&trace.lock);
    int err = stop_locked();
    pthread_mutex_unlock(&trace.lock);
    return err;
}

/* ---- GORO_TRACE=file.json: from the first start to shutdown or exit ---- */

void goro__trace_env_start(void)
{
    static bool tried;
    const char *path = getenv("GORO_TRACE");
    if (tried || !path || !*path)
        return;
    tried = true;
    pthread_mutex_lock(&trace.lock);
    int err = start_locked(path, NULL);
    if (!err)
        trace.from_env = true;
    pthread_mutex_unlock(&trace.lock);
    if (err)
        fprintf(stderr, "goro: GORO_TRACE=%s: cannot trace: %s\n", path, strerror(-err));
    else
        atexit(goro__trace_env_stop);
}

void goro__trace_env_stop(void)
{
    pthread_mutex_lock(&trace.lock);
    int err = trace.from_env ? stop_locked() : 0;
    pthread_mutex_unlock(&trace.lock);
    if (err)
        fprintf(stderr, "goro: GORO_TRACE: the trace file is incomplete: %s\n", strerror(-err));
}
