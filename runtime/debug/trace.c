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
 * 5. A trace's file is written once: by goro_trace_stop, or by a fatal end
 *    of the process (goro__trace_die: a crash, the runtime's own abort),
 *    whichever claims it first (file_state ARMED -> WRITING). The other
 *    leaves it alone: a stop returns -ECANCELED; a fatal end waits a while
 *    for the writer to finish (unless the writer is itself) and then dies.
 *
 * Written at a fatal end. goro__trace_die runs in a signal handler, on a
 * thread that may hold any lock, while other threads go on: it takes no
 * lock it might wait for (trace.lock is not taken; attach_lock is tried a
 * bounded number of times, and the rings are read without it if it stays
 * held, which the file then says), allocates nothing but mappings, and
 * writes with write(2) to the descriptor the start opened (trace_json.c).
 * The events it writes are those of the rings up to that moment.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"
#include "base/env.h"
#include "base/sanitizer.h"
#include "debug/debug.h"
#include "ticks.h"                  /* arch/<arch>/: goro__ticks */

#if defined(GORO_ASAN) || defined(GORO_TSAN)
void __sanitizer_set_death_callback(void (*callback)(void));
#endif

#define DEFAULT_BUFFER (64u << 20)  /* per thread: 2M events */
#define MIN_BUFFER (64u << 10)
#define MAX_BUFFER ((size_t)1 << 34)
#define MAX_RINGS 4096
#define SLACK 8                     /* invariant 3 */
#define LOCK_TRIES 10000            /* a fatal end's tries of attach_lock */
#define WAIT_MS 5000                /* a fatal end's wait for another writer */

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
    int fd;                         /* the file, open from start to the write */
    pid_t pid;                      /* the process that started it */
    uint64_t cap;                   /* events per ring */
    struct goro_trace_clock clk;
} trace = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* Invariant 5. NONE: no file to write; ARMED: a trace runs (trace's fields
 * above are set, published by the store of ARMED); WRITING: one writes it,
 * file_writer the thread; DONE: written at a fatal end. */
enum { FILE_NONE, FILE_ARMED, FILE_WRITING, FILE_DONE };
static _Atomic int file_state;
static _Atomic pid_t file_writer;
static struct goro_trace_ring views_buf[MAX_RINGS];     /* the writer's */

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

/* For a fatal end, which must not wait for ever: the holder may be the
 * thread that is dying. */
static bool attach_lock_try(void)
{
    for (int i = 0; i < LOCK_TRIES; i++) {
        if (!atomic_exchange_explicit(&attach_lock, 1, memory_order_acquire))
            return true;
        sched_yield();
    }
    return false;
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

#if defined(GORO_ASAN) || defined(GORO_TSAN)
/* A sanitizer's report ends the process from its own signal handler (a
 * SIGSEGV it reports instead of passing it on to fault.c's) or from its
 * checks: either way, through its death callback. */
static void on_sanitizer_death(void)
{
    goro__trace_die("sanitizer report");
}
#endif

/* Sets the callback above in each sanitizer runtime: GCC links UBSan's
 * apart from ASan's, each with a callback of its own, and a UBSan report
 * would end the process without the trace. */
static void death_callback_set(void)
{
#if defined(GORO_ASAN) || defined(GORO_TSAN)
    static bool set;
    if (set)
        return;
    set = true;
    __sanitizer_set_death_callback(on_sanitizer_death);
    void *ubsan = dlopen("libubsan.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void (*ubsan_set)(void (*)(void)) =
        ubsan ? (void (*)(void (*)(void)))dlsym(ubsan, "__sanitizer_set_death_callback") : NULL;
    if (ubsan_set && ubsan_set != __sanitizer_set_death_callback)
        ubsan_set(on_sanitizer_death);
    if (ubsan)
        dlclose(ubsan);             /* loaded still: the program links it */
#endif
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
    death_callback_set();
    trace.fd = fd;
    trace.pid = getpid();
    trace.cap = cap;
    atomic_store(&unrecorded, 0);
    atomic_fetch_add(&gen, 1);
    trace.clk.ns0 = goro__real_now();
    trace.clk.t0 = goro__ticks();
    trace.on = true;
    atomic_store(&file_state, FILE_ARMED);
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

/* This trace's part of each ring (invariants 3 and 4). fatal: attach_lock
 * is only tried; whether it was taken goes to *locked. Read without it, a
 * ring being attached may show a stale start (the read stays inside the
 * ring: the clamp below) or be missed. */
static int views(struct goro_trace_ring *v, uint64_t *lost, bool fatal, bool *locked)
{
    uint32_t now = atomic_load(&gen);
    int n = 0;
    if (fatal)
        *locked = attach_lock_try();
    else
        attach_lock_take(), *locked = true;
    int count = *(volatile int *)&nrings;
    for (int i = 0; i < count && i < MAX_RINGS; i++) {
        struct ring *r = *(struct ring *volatile *)&rings[i];
        if (!r || !r->ev || r->gen != now)
            continue;
        uint64_t to = atomic_load_explicit(&r->pos, memory_order_acquire);
        uint64_t from = r->base;
        if (to - from > r->mask + 1 - SLACK) {
            *lost += to - from - (r->mask + 1 - SLACK);
            from = to - (r->mask + 1 - SLACK);
        }
        v[n++] = (struct goro_trace_ring){ r->ev, r->mask, from, to, r->kind, r->id };
    }
    if (*locked)
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
    trace.on = false;
    trace.from_env = false;
    int armed = FILE_ARMED;
    if (!atomic_compare_exchange_strong(&file_state, &armed, FILE_WRITING))
        return -ECANCELED;          /* a fatal end writes it (invariant 5) */
    atomic_store(&file_writer, gettid());
    atomic_store(&goro__sched.tracing, 0);
    trace.clk.t1 = goro__ticks();
    trace.clk.ns1 = goro__real_now();
    uint64_t lost = atomic_load(&unrecorded);
    bool locked;
    int n = views(views_buf, &lost, false, &locked);
    struct goro_trace_out o = { .fd = trace.fd, .ended = "stopped",
                                .under_way = "(the trace stopped)" };
    int err = goro__trace_write(&o, views_buf, n, &trace.clk, lost);
    if (close(trace.fd) != 0 && !err)
        err = -errno;
    trace.fd = -1;
    rings_release();
    GORO_ASSERT(atomic_load(&file_state) == FILE_WRITING);     /* invariant 5: ours */
    atomic_store(&file_state, FILE_NONE);
    return err;
}

int goro_trace_stop(void)
{
    pthread_mutex_lock(&trace.lock);
    int err = stop_locked();
    pthread_mutex_unlock(&trace.lock);
    return err;
}

/* ---- a fatal end (invariant 5; "Written at a fatal end" above) ---- */

/* Another thread writes the file: give it time to finish, as the process
 * dies when this thread goes on. Not when it is this thread (a fault in
 * the writer), nor for ever (the writer may be stuck or dying too). */
static void wait_for_writer(void)
{
    pid_t me = gettid();
    struct timespec ms = { 0, 1000000 };
    for (int i = 0; i < WAIT_MS && atomic_load(&file_state) == FILE_WRITING &&
                    atomic_load(&file_writer) != me; i++)
        nanosleep(&ms, NULL);
}

void goro__trace_die(const char *why)
{
    /* In a forked child, the trace and its file are its parent's. */
    if (atomic_load(&file_state) == FILE_NONE || trace.pid != getpid())
        return;
    int armed = FILE_ARMED;
    if (!atomic_compare_exchange_strong(&file_state, &armed, FILE_WRITING)) {
        wait_for_writer();
        return;
    }
    atomic_store(&file_writer, gettid());
    atomic_store(&goro__sched.tracing, 0);
    struct goro_trace_clock clk = trace.clk;
    clk.t1 = goro__ticks();
    clk.ns1 = goro__real_now();
    uint64_t lost = atomic_load(&unrecorded);
    bool locked;
    int n = views(views_buf, &lost, true, &locked);
    struct goro_trace_out o = {
        .fd = trace.fd, .ended = why, .under_way = "(the process died)",
        .incomplete = locked ? NULL : "the rings were read without their lock (it stayed held)",
    };
    goro__trace_write(&o, views_buf, n, &clk, lost);
    atomic_store(&file_state, FILE_DONE);
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
