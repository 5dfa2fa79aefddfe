/* Starting and stopping the runtime; settings from goro_config_t and the
 * environment (GORO_WORKERS, GORO_STACK_SIZE). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define DEFAULT_STACK (256 * 1024)
#define DEFAULT_SLICE (10 * GORO_MSEC)
#define MAX_WORKERS 1024

static goro_lock_t start_lock = GORO_LOCK_INIT;

/* Parses a size such as 65536, 64k, 1M; 0 if absent or malformed. */
static size_t parse_size(const char *s)
{
    if (!s || !*s)
        return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    }
    return *end ? 0 : (size_t)v;
}

static int env_workers(void)
{
    const char *s = getenv("GORO_WORKERS");
    if (!s || !*s)
        return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > MAX_WORKERS) {
        fprintf(stderr, "goro: ignoring GORO_WORKERS=%s (want 1..%d)\n", s, MAX_WORKERS);
        return 0;
    }
    return (int)v;
}

static size_t env_stack_size(void)
{
    const char *s = getenv("GORO_STACK_SIZE");
    size_t v = parse_size(s), rounded;
    if (s && *s && goro__stack_size_check(v, &rounded) != 0) {
        fprintf(stderr, "goro: ignoring GORO_STACK_SIZE=%s (want 16k..1g)\n", s);
        return 0;
    }
    return v ? rounded : 0;
}

/* GORO_SLICE: milliseconds, or "off". */
static int64_t env_slice(void)
{
    const char *s = getenv("GORO_SLICE");
    if (!s || !*s)
        return 0;
    if (strcmp(s, "off") == 0)
        return -1;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 1 || v > 60000) {
        fprintf(stderr, "goro: ignoring GORO_SLICE=%s (want 1..60000 ms, or off)\n", s);
        return 0;
    }
    return (int64_t)v * GORO_MSEC;
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
    goro__fault_install();
    int err = goro__sched_start(workers);
    if (err == 0)
        atomic_store(&goro__sched.started, 1);
    return err;
}

int goro_start(const goro_config_t *cfg)
{
    goro__lock(&start_lock);
    int err = atomic_load(&goro__sched.started) ? -EALREADY : start_locked(cfg);
    goro__unlock(&start_lock);
    return err;
}

int goro__ensure_started(void)
{
    if (likely(atomic_load_explicit(&goro__sched.started, memory_order_acquire)))
        return 0;
    goro__lock(&start_lock);
    int err = atomic_load(&goro__sched.started) ? 0 : start_locked(NULL);
    goro__unlock(&start_lock);
    return err;
}

int goro_shutdown_until(int64_t deadline)
{
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
    goro__sched_stop();
    goro__offload_stop();
    goro__slab_free_all();
    atomic_store(&goro__sched.started, 0);
    goro__spawn_gate_open();        /* only now: a spawn starts a new runtime */
    goro__unlock(&start_lock);
    return 0;
}

int goro_shutdown(void)
{
    return goro_shutdown_until(GORO_FOREVER);
}
