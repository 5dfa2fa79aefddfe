/* Starting and stopping the runtime; settings from goro_config_t and the
 * environment (GORO_WORKERS, GORO_STACK_SIZE, GORO_SLICE: read by env.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "runtime.h"
#include "sched/sched.h"
#include "coro/coro.h"
#include "io/poller.h"
#include "file/file.h"
#include "debug/debug.h"

#define DEFAULT_STACK (256 * 1024)
#define DEFAULT_SLICE (10 * GORO_MSEC)
#define MAX_WORKERS 1024

static goro_lock_t start_lock = GORO_LOCK_INIT_RANK(GORO_RANK_START);

/* The environment's settings (env.c: one rule and one message for all);
 * 0 means unset or refused: the default. */
static int env_workers(void)
{
    long v;
    return goro__env_long("GORO_WORKERS", 1, MAX_WORKERS, NULL, &v) ? (int)v : 0;
}

/* GORO_STACK_SIZE, rounded up to pages. */
static size_t env_stack_size(void)
{
    size_t v, rounded;
    if (!goro__env_size("GORO_STACK_SIZE", GORO_STACK_MIN, GORO_STACK_MAX, &v) ||
        goro__stack_size_check(v, &rounded) != 0)
        return 0;
    return rounded;
}

/* GORO_SLICE: milliseconds, or "off" (-1: never preempt). */
static int64_t env_slice(void)
{
    if (goro__env_is("GORO_SLICE", "off"))
        return -1;
    long ms;
    return goro__env_long("GORO_SLICE", 1, 60000, " ms, or off", &ms) ? ms * GORO_MSEC : 0;
}

/* The clock for a run (back to the real one after it, or after a failed
 * start): the clock's own value, and the flag in the scheduler's line that
 * a pick reads. */
static void clock_use(bool virt)
{
    goro__clock_set_virtual(virt);
    atomic_store(&goro__sched.virtual_clock, virt);
}

/* GORO_TEST_CLOCK: real or virtual (docs/testing.md). */
static int env_clock(void)
{
    static const char *const words[] = { "real", "virtual" };
    return goro__env_word("GORO_TEST_CLOCK", words, 2, "real or virtual", 0) + GORO_CLOCK_REAL;
}

static uint64_t env_seed(void)
{
    long seed;
    return goro__env_long("GORO_TEST_SEED", 1, LONG_MAX, "", &seed) ? (uint64_t)seed : 1;
}

static int start_locked(const goro_config_t *cfg)
{
    int workers = cfg && cfg->workers ? cfg->workers : env_workers();
    size_t stack = 0;
    if (cfg && cfg->workers && (cfg->workers < 1 || cfg->workers > MAX_WORKERS))
        return -EINVAL;
    if (cfg && cfg->stack_size) {
        if (goro__stack_size_check(cfg->stack_size, &stack))
            return -EINVAL;
    } else {
        stack = env_stack_size();
    }
    if (!workers) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        workers = n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : (int)n;
    }
    goro__sched.stack_size = stack ? stack : DEFAULT_STACK;
    int64_t slice = cfg && cfg->slice_ns ? cfg->slice_ns : env_slice();
    goro__sched.slice_ns = slice ? slice : DEFAULT_SLICE;
    int clock = cfg && cfg->clock ? cfg->clock : env_clock();
    if (clock < GORO_CLOCK_DEFAULT || clock > GORO_CLOCK_VIRTUAL ||
        (clock == GORO_CLOCK_VIRTUAL && cfg && cfg->workers > 1))
        return -EINVAL;
    bool virt = clock == GORO_CLOCK_VIRTUAL;
    if (virt) {                     /* sched.c, invariant 10 */
        workers = 1;
        goro__sched.slice_ns = -1;
        uint64_t seed = cfg && cfg->seed ? cfg->seed : env_seed();
        goro__sched.seed = (uint32_t)(seed ^ seed >> 32) ? (uint32_t)(seed ^ seed >> 32) : 1;
    }
    clock_use(virt);
    goro__fault_install();
    goro__stack_guard_init();       /* no stack is mapped between runs */
    goro__slab_pool_open();
    goro__handles_open();
    goro__stall_start();
    goro__deadlock_start();
    goro__trace_env_start();
    goro__thread_mask_capture();    /* the program's mask, for every runtime thread */
    int err = goro__fork_install();
    if (!err)
        err = goro__sched_start(workers);
    if (err == 0)
        atomic_store(&goro__sched.started, 1);
    else
        clock_use(false);
    return err;
}

int goro_start(const goro_config_t *cfg)
{
    if (goro__forked())
        return goro__forked_error();
    /* Running: answered without start_lock, which goro_shutdown holds
     * while it waits for every coroutine - the caller's too, when it is
     * one (a coroutine always sees started set: shutdown clears it only
     * after the last has ended). */
    if (atomic_load_explicit(&goro__sched.started, memory_order_acquire))
        return -EALREADY;
    goro__lock(&start_lock);
    int err = atomic_load(&goro__sched.started) ? -EALREADY : start_locked(cfg);
    goro__unlock(&start_lock);
    return err;
}

int goro__ensure_started(void)
{
    if (likely(atomic_load_explicit(&goro__sched.started, memory_order_acquire)))
        return 0;
    if (goro__forked())
        return goro__forked_error();
    goro__lock(&start_lock);
    int err = atomic_load(&goro__sched.started) ? 0 : start_locked(NULL);
    goro__unlock(&start_lock);
    return err;
}

int goro_shutdown_until(int64_t deadline)
{
    if (goro__forked())
        return goro__forked_error();
    if (goro__m())
        return -EPERM;
    goro__lock(&start_lock);
    if (!atomic_load(&goro__sched.started)) {
        goro__unlock(&start_lock);
        return -ENOTCONN;
    }
    int err = goro__sched_drain(deadline);
    if (err) {
        goro__unlock(&start_lock);
        return err;
    }
    goro__handles_close();          /* no other thread frees or reads a slab now */
    goro__file_stop();              /* no call runs now; the bases are still there */
    goro__sched_stop();
    goro__offload_stop();
    goro__signal_end_all();         /* its threads are gone: no poll runs a callback */
    goro__slab_free_all();
    goro__trace_env_stop();         /* every thread of the run has stopped */
    clock_use(false);
    atomic_store(&goro__sched.started, 0);
    goro__spawn_gate_open();        /* only now: a spawn starts a new runtime */
    goro__unlock(&start_lock);
    return 0;
}

int goro_shutdown(void)
{
    return goro_shutdown_until(GORO_FOREVER);
}
