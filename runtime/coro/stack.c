/*
 * Coroutine stacks ("slabs"), laid out high to low as
 *
 *   [ struct goro | stack, growing down ... | guard ]
 *   hi-end                                    map
 *
 * arena.c provides the address space and the guard: a slot of a shared
 * arena with a guard region (MADV_GUARD_INSTALL), or a mapping of its own
 * with an mprotect'ed guard. The memory is MAP_NORESERVE and read-write, so
 * the kernel commits pages only as the coroutine first touches them (and a
 * read() into a stack buffer never sees EFAULT, as it would with
 * fault-driven growth). The guard (64 KiB, see GUARD_MIN) turns an
 * overflow into a SIGSEGV that fault.c reports, also for a large frame in
 * code built with -fstack-clash-protection.
 *
 * Slabs of the default size are pooled: a small LIFO cache per P (no lock)
 * in front of a global pool. The pool holds chains, not slabs: a P's cache
 * spills half of itself as one chain and refills by taking one chain whole,
 * so neither walks the records of slabs freed long ago - with tens of
 * thousands of stacks mapped, each such record is on a page of its own,
 * a TLB and a cache miss, and a walk pays them one after the other. A slab
 * going back to a pool gives its deep
 * pages back to the kernel when its coroutine went deep (seen at a switch)
 * and, to catch deep excursions between switches, every 64th reuse.
 *
 * The global pool is not capped while coroutines come and go: unmapping
 * and mapping stacks in a burst costs system calls, a contended mmap lock
 * and TLB shootdowns on every CPU. Pooled slabs still hold address space
 * and mappings (RLIMIT_AS, vm.max_map_count), so they go back:
 *  - down to POOL_KEEP slabs when a worker is about to sleep
 *    (goro__slab_trim_idle);
 *  - when unused for a while (goro__slab_trim_tick, from the monitor
 *    thread): every IDLE_NS the slabs in the pool become "aged"; reuse
 *    takes fresh slabs first, and the aged ones still there IDLE_NS later
 *    are unmapped. An unused slab is returned after one to two IDLE_NS;
 *  - all at once when a stack cannot be mapped (ENOMEM), before the one
 *    retry (release_pools).
 * A P's cache is touched by the P's owner only, so another thread's failed
 * mapping cannot empty it. The monitor moves the caches of idle Ps (whose
 * owner has given them up) into the global pool once per IDLE_NS
 * (goro__spill_idle_caches in sched/handoff.c), where the ageing returns them:
 * an idle program keeps no slab pooled for more than about three IDLE_NS,
 * in a cache or in the pool.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "internal.h"
#include "coro/coro.h"
#include "debug/debug.h"
#include "sched/sched.h"
#include "base/sanitizer.h"
#include "coro/token.h"

/* The guard must be at least as large as the largest frame compiled code
 * allocates without touching it: gcc's stack-clash protection probes every
 * 4 KiB on x86-64 but assumes a 64 KiB guard on aarch64 (frames up to
 * 63 KiB go unprobed there). 64 KiB everywhere also catches frames below
 * about 60 KiB in code built without the flag. A guard costs address
 * space only: no memory, and no extra mapping. */
#define GUARD_MIN (64 * 1024)
#define KEEP_BYTES (16 * 1024)        /* top of a pooled stack kept resident */
#define P_CACHE_MAX 64
#define POOL_KEEP 4096                /* pooled slabs kept when workers idle */
#define TRIM_BATCH 64
#define IDLE_NS GORO_SEC              /* pooled and unused this long: unmapped */
#define TICK_BUDGET_NS (GORO_MSEC / 2)  /* unmapping per monitor tick, about */

/* The global pool of default-size slabs, under pool_lock: `fresh` came in
 * since the last ageing step (at aged_at), `aged` before it and has not
 * been reused since. Each is a stack of chains: a chain is at most
 * P_CACHE_MAX slabs linked through pool_next (NULL-terminated); its first
 * slab holds the next chain (pool_chain) and the chain's length
 * (pool_chain_len), which the other slabs' fields do not. */
static goro_lock_t pool_lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF);
static struct goro *fresh, *aged;
static int64_t aged_at;
static _Atomic int pool_count;        /* fresh + aged; peeked without the lock */
/* Between goro__slab_free_all and the next start: the pool is empty and
 * stays so. Every slab in the pool is mapped; the shutdown unmaps every
 * slab, so nothing may come back after it has emptied the pool (coroutines
 * have ended, workers stopped, and joins and detaches from other threads
 * are kept out by coro.c's handle gate). */
static bool pool_closed;

/* Only pool_lock's holder writes pool_count, so a load and a store do:
 * no locked read-modify-write (two per spawn while a P's cache spills
 * into the pool and refills from it). */
static void pool_count_add(int d)
{
    atomic_store_explicit(&pool_count, atomic_load_explicit(&pool_count, memory_order_relaxed) + d,
                          memory_order_relaxed);
}
/* A P's cache length: written by its owner alone (load and store, as
 * pool_count), read by goro__slab_pooled from any thread. */
static int cache_len(struct goro_p *p)
{
    return atomic_load_explicit(&p->nfree, memory_order_relaxed);
}
static void cache_len_set(struct goro_p *p, int n)
{
    atomic_store_explicit(&p->nfree, n, memory_order_relaxed);
}
/* The slabs in all the Ps' caches, at this moment. */
static int caches_len(void)
{
    int n = 0;
    for (int i = 0; i < goro__sched.nprocs; i++)
        n += cache_len(&goro__sched.procs[i]);
    return n;
}
static _Atomic int64_t trim_due;      /* the tick has nothing to do before this */

size_t goro__page_size(void)
{
    static _Atomic size_t page;      /* racing first calls store the same value */
    size_t p = atomic_load_explicit(&page, memory_order_relaxed);
    if (!p) {
        p = (size_t)sysconf(_SC_PAGESIZE);
        atomic_store_explicit(&page, p, memory_order_relaxed);
    }
    return p;
}

static size_t guard_size(void)
{
    size_t page = goro__page_size();
    return page > GUARD_MIN ? page : GUARD_MIN;
}

/* Validates a requested stack size; rounds it up to whole pages. */
int goro__stack_size_check(size_t size, size_t *rounded)
{
    if (size < GORO_STACK_MIN || size > GORO_STACK_MAX)
        return -EINVAL;
    size_t page = goro__page_size();
    *rounded = (size + page - 1) & ~(page - 1);
    return 0;
}

static long read_long_file(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static long count_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    if (!f)
        return -1;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* Whether size more bytes of mappings would pass RLIMIT_AS (*limit). */
static bool over_as_limit(size_t size, rlim_t *limit)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return false;
    long pages = read_long_file("/proc/self/statm");     /* VmSize */
    *limit = rl.rlim_cur;
    return pages > 0 && (rlim_t)pages * goro__page_size() + size > rl.rlim_cur;
}

/* mmap/mprotect of size bytes failed, even with the pools emptied: say why
 * once, in terms a person can act on. */
static int explain_map_failure(int err, size_t size)
{
    static _Atomic int said_maps, said_as, said_mem;
    long max = read_long_file("/proc/sys/vm/max_map_count");
    long have = count_mappings();
    rlim_t limit;
    if (err == ENOMEM && max > 0 && have >= 0 && have + 8 >= max) {
        goro__warn_once(&said_maps,
            "cannot map a coroutine stack: the process has %ld memory mappings "
            "and vm.max_map_count is %ld (%s); raise it, e.g. sysctl -w "
            "vm.max_map_count=%ld", have, max,
            goro__stacks_in_arenas()
                ? "coroutine stacks share a few of them"
                : "each coroutine stack takes 2 without MADV_GUARD_INSTALL, Linux 6.13",
            max * 4);
        return -EAGAIN;
    }
    if (err == ENOMEM && over_as_limit(size, &limit)) {
        goro__warn_once(&said_as,
            "cannot map a coroutine stack: the address space limit (RLIMIT_AS, "
            "ulimit -v) of %llu MiB is reached; raise it, or lower the stack size "
            "(goro_attr_t.stack_size, GORO_STACK_SIZE) or the number of coroutines",
            (unsigned long long)(limit >> 20));
        return -ENOMEM;
    }
    goro__warn_once(&said_mem,
        "cannot map a coroutine stack: %s; lower the stack size "
        "(goro_attr_t.stack_size, GORO_STACK_SIZE) or the number of coroutines",
        strerror(err));
    return -ENOMEM;
}

static void slab_unmap(struct goro *g)
{
    goro__token_slot_put(g);        /* tokens must not find it any more */
    goro__registry_remove(g);
    goro__san_fiber_destroy(g);
    VALGRIND_STACK_DEREGISTER(g->valgrind_id);
    goro__stack_release(g->map, g->map_size, g->arena);
}

/* Unmaps a pool_next list; returns how many slabs it held. */
static int unmap_list(struct goro *g)
{
    int n = 0;
    uint64_t bytes = 0;
    for (; g; n++) {
        struct goro *next = g->pool_next;
        bytes += g->map_size;
        slab_unmap(g);
        g = next;
    }
    if (n)
        GORO_TRACE(GORO_TEV_STACK_GC, 0, bytes, (uint32_t)n, 0, 0);
    return n;
}

/* ---- the global pool (callers hold pool_lock) ---- */

/* Pushes the chain of n slabs that starts at head. */
static void chain_push(struct goro **stack, struct goro *head, uint32_t n)
{
    GORO_ASSERT(!pool_closed && n >= 1 && n <= P_CACHE_MAX);
    head->pool_chain = *stack;
    head->pool_chain_len = n;
    *stack = head;
    pool_count_add((int)n);
}

static void pool_push(struct goro *g)
{
    g->pool_next = NULL;
    chain_push(&fresh, g, 1);
}

/* One slab off the top chain of *stack: its first; the second, if any,
 * becomes the chain's first. */
static struct goro *chain_pop_one(struct goro **stack)
{
    struct goro *g = *stack;
    if (!g)
        return NULL;
    struct goro *rest = g->pool_next;
    if (rest) {
        rest->pool_chain = g->pool_chain;
        rest->pool_chain_len = g->pool_chain_len - 1;
        *stack = rest;
    } else {
        *stack = g->pool_chain;
    }
    pool_count_add(-1);
    return g;
}

/* For reuse: the slab pooled last (its top is the likeliest to be cached);
 * an aged one only when no fresh one is left. */
static struct goro *pool_pop_newest(void)
{
    return chain_pop_one(fresh ? &fresh : &aged);
}

/* For a P's cache: the newest chain whole (*n slabs), or NULL. */
static struct goro *pool_pop_chain(uint32_t *n)
{
    struct goro **from = fresh ? &fresh : &aged;
    struct goro *g = *from;
    if (g) {
        *from = g->pool_chain;
        *n = g->pool_chain_len;
        pool_count_add(-(int)*n);
    }
    return g;
}

/* For unmapping: aged slabs first. */
static struct goro *pool_pop_oldest(void)
{
    return chain_pop_one(aged ? &aged : &fresh);
}

/* Empties the pool into one list. */
static struct goro *pool_take_all(void)
{
    struct goro *all = NULL, *g;
    while ((g = pool_pop_oldest())) {
        g->pool_next = all;
        all = g;
    }
    return all;
}

/* Out of address space or mappings: unmaps every pooled slab this thread
 * may touch - the global pool, and its own P's cache (another P's cache is
 * its owner's alone). Returns how many. */
static int release_pools(void)
{
    struct goro *cached = NULL;
    struct goro_p *p = goro__p_enter();
    if (p) {
        cached = p->free_slabs;
        p->free_slabs = NULL;
        cache_len_set(p, 0);
        goro__p_leave();
    }
    goro__lock(&pool_lock);
    struct goro *pooled = pool_take_all();
    goro__unlock(&pool_lock);
    return unmap_list(cached) + unmap_list(pooled);
}

static struct goro *slab_map(size_t stack_size, int *err)
{
    size_t guard = guard_size();
    size_t head = (sizeof(struct goro) + 63) & ~(size_t)63;
    size_t map_size = guard + stack_size + ((head + goro__page_size() - 1) & ~(goro__page_size() - 1));
    struct goro_arena *arena;
    char *map = goro__stack_reserve(map_size, guard, &arena);
    int e = map ? 0 : errno;
    /* ENOMEM: out of address space (RLIMIT_AS) or of mappings; idle
     * pooled slabs may be what holds them. */
    if (e == ENOMEM && release_pools() > 0) {
        map = goro__stack_reserve(map_size, guard, &arena);
        e = map ? 0 : errno;
    }
    if (!map) {
        *err = explain_map_failure(e, map_size);
        return NULL;
    }
    struct goro *g = (struct goro *)(map + map_size - head);
    memset(g, 0, sizeof *g);
    g->map = map;
    g->map_size = map_size;
    g->arena = arena;
    g->stack_size = stack_size;
    g->lo = map + guard;
    g->hi = (char *)((uintptr_t)g & ~(uintptr_t)15);
    g->valgrind_id = VALGRIND_STACK_REGISTER(g->lo, g->hi);
    goro__san_fiber_create(g);
    if ((*err = goro__registry_add(g)) != 0) {
        goro__san_fiber_destroy(g);
        VALGRIND_STACK_DEREGISTER(g->valgrind_id);
        goro__stack_release(map, map_size, arena);
        return NULL;
    }
    return g;
}

static bool is_default_size(const struct goro *g)
{
    return g->stack_size == goro__sched.stack_size;
}

/* Returns the deep part of a stack to the kernel when it was used. */
static void slab_trim(struct goro *g)
{
    uintptr_t keep = (uintptr_t)g->hi - KEEP_BYTES;
    keep &= ~(uintptr_t)(goro__page_size() - 1);
    if (g->min_sp < keep || ++g->reuses % 64 == 0) {
        madvise(g->lo, keep - (uintptr_t)g->lo, MADV_DONTNEED);
        GORO_TRACE(GORO_TEV_STACK_GC, 0, keep - (uintptr_t)g->lo, 0, 0, 0);
    }
}

/* Starts a new life on a pooled slab: the per-life fields come first in
 * struct goro, so one clear covers them and keeps the slab's own. */
static struct goro *slab_reset(struct goro *g)
{
    memset(g, 0, GORO_LIFE_ZEROED);   /* 16-byte stores (Makefile: STRINGOPS) */
    g->min_sp = UINTPTR_MAX;
    g->name[0] = 0;
    return g;
}

/* A pooled default-size slab, or NULL: from p's cache (the caller is
 * inside, on p), refilled from the global pool half a cache at a time;
 * without a P, from the pool. */
static struct goro *pooled_slab(struct goro_p *p)
{
    struct goro *g;
    if (!p) {
        goro__lock(&pool_lock);
        g = pool_pop_newest();
        goro__unlock(&pool_lock);
        return g;
    }
    if (!p->free_slabs) {
        uint32_t n = 0;
        goro__lock(&pool_lock);
        p->free_slabs = pool_pop_chain(&n);
        goro__unlock(&pool_lock);
        cache_len_set(p, (int)n);
    }
    g = p->free_slabs;
    if (g) {
        p->free_slabs = g->pool_next;
        cache_len_set(p, cache_len(p) - 1);
        /* The next spawn's record: its page walk and miss overlap this
         * spawn instead of stalling the next one. */
        __builtin_prefetch(p->free_slabs, 1, 3);
    }
    return g;
}

struct goro *goro__slab_get(struct goro_p *p, size_t stack_size, int *err)
{
    *err = 0;
    struct goro *g = stack_size == goro__sched.stack_size ? pooled_slab(p) : NULL;
    if (g)
        return slab_reset(g);
    g = slab_map(stack_size, err);
    if (g)
        g->min_sp = UINTPTR_MAX;
    return g;
}

void goro__slab_put(struct goro *g)
{
    if (!is_default_size(g)) {
        slab_unmap(g);
        return;
    }
    atomic_store_explicit(&g->state, GORO_S_FREE, memory_order_relaxed);
    slab_trim(g);
    struct goro_p *p = goro__p_enter();
    if (p && cache_len(p) < P_CACHE_MAX) {
        g->pool_next = p->free_slabs;
        p->free_slabs = g;
        cache_len_set(p, cache_len(p) + 1);
        goro__p_leave();
        return;
    }
    if (!p) {
        goro__lock(&pool_lock);
        pool_push(g);
        goro__unlock(&pool_lock);
        return;
    }
    /* Cache full: its older half goes to the global pool as one chain;
     * the newer half, freed last and likeliest cached, stays. */
    struct goro *cut = p->free_slabs;
    for (int i = 1; i < P_CACHE_MAX / 2; i++)
        cut = cut->pool_next;
    struct goro *older = cut->pool_next;
    cut->pool_next = NULL;
    goro__lock(&pool_lock);
    chain_push(&fresh, older, (uint32_t)(cache_len(p) - P_CACHE_MAX / 2));
    goro__unlock(&pool_lock);
    g->pool_next = p->free_slabs;
    p->free_slabs = g;
    cache_len_set(p, P_CACHE_MAX / 2 + 1);
    goro__p_leave();
}

/* p's cache goes to the global pool, where ageing returns what is not
 * reused. The caller holds p: the monitor, while p idles (sched/handoff.c). */
void goro__slab_cache_spill(struct goro_p *p)
{
    if (!p->free_slabs)
        return;
    goro__lock(&pool_lock);
    chain_push(&fresh, p->free_slabs, (uint32_t)cache_len(p));
    goro__unlock(&pool_lock);
    p->free_slabs = NULL;
    cache_len_set(p, 0);
}

/* Slabs pooled now, in the global pool and the Ps' caches: a test's view
 * of an idle runtime (a count of the moment, not a snapshot). */
int goro__slab_pooled(void)
{
    return atomic_load_explicit(&pool_count, memory_order_relaxed) + caches_len();
}

/* Unmaps up to TRIM_BATCH pooled slabs above POOL_KEEP. Returns whether
 * more remain to trim. Called by workers with nothing to do. */
bool goro__slab_trim_idle(void)
{
    if (pool_count <= POOL_KEEP)    /* racy peek: a hint is enough */
        return false;
    struct goro *batch = NULL;
    goro__lock(&pool_lock);
    for (int i = 0; i < TRIM_BATCH && pool_count > POOL_KEEP; i++) {
        struct goro *x = pool_pop_oldest();
        x->pool_next = batch;
        batch = x;
    }
    bool more = pool_count > POOL_KEEP;
    goro__unlock(&pool_lock);
    unmap_list(batch);
    return more;
}

/* Up to TRIM_BATCH aged slabs that are due (unused for IDLE_NS), after
 * starting a new age if the last one is over and fully unmapped. */
static struct goro *take_idle(int64_t now)
{
    struct goro *batch = NULL;
    goro__lock(&pool_lock);
    if (!aged && now - aged_at >= IDLE_NS) {
        aged = fresh;
        fresh = NULL;
        aged_at = now;
    }
    for (int i = 0; i < TRIM_BATCH && aged && now - aged_at >= IDLE_NS; i++) {
        struct goro *x = chain_pop_one(&aged);
        x->pool_next = batch;
        batch = x;
    }
    atomic_store_explicit(&trim_due, aged_at + IDLE_NS, memory_order_relaxed);
    goro__unlock(&pool_lock);
    return batch;
}

/* From the monitor thread (no P needed), now on goro__now()'s clock:
 * unmaps pooled slabs unused for IDLE_NS, for about TICK_BUDGET_NS at
 * most. Two loads when there is nothing to do. */
void goro__slab_trim_tick(int64_t now)
{
    if (atomic_load_explicit(&pool_count, memory_order_relaxed) == 0 ||
        now < atomic_load_explicit(&trim_due, memory_order_relaxed))
        return;
    int64_t stop = goro__now() + TICK_BUDGET_NS;
    while (unmap_list(take_idle(now)) == TRIM_BATCH && goro__now() < stop)
        ;
}

/* Whether the global pool or a P's cache holds slabs that a later tick
 * may unmap (a cache after the monitor spills it): the monitor keeps
 * ticking while one does, even with every worker idle. */
bool goro__slab_trim_pending(void)
{
    return goro__slab_pooled() > 0;
}

/* At shutdown, with every coroutine ended: unmap every slab, pooled or
 * still holding an unjoined result. */
void goro__slab_free_all(void)
{
    goro__lock(&pool_lock);
    struct goro *pooled = pool_take_all();
    pool_closed = true;
    goro__unlock(&pool_lock);
    unmap_list(pooled);
    struct goro *g;
    while ((g = goro__registry_last()))
        slab_unmap(g);
    goro__stack_space_free();
}

/* At a start: the pool the last shutdown left empty takes slabs again. */
void goro__slab_pool_open(void)
{
    goro__lock(&pool_lock);
    GORO_ASSERT(!fresh && !aged && atomic_load(&pool_count) == 0);
    pool_closed = false;
    goro__unlock(&pool_lock);
}
