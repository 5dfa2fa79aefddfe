/* Coroutine stacks: depth within the reserve, overflow reports, pages given
 * back when a slab is reused, and running out of memory mappings. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

#define KiB 1024L

/* Recurses until the frame address is `target` bytes below `top`, touching
 * a 480-byte buffer per frame (so every page on the way is dirtied), calls
 * at_bottom() there, and returns the depth reached in bytes. Not a tail
 * call: the buffer is read after the recursive call returns. */
static T_NOINLINE long dig(char *top, long target, void (*at_bottom)(void))
{
    volatile char buf[480];
    char *here = __builtin_frame_address(0);
    buf[0] = 1;
    buf[sizeof buf - 1] = 2;
    long depth;
    if (top - here >= target) {
        if (at_bottom)
            at_bottom();
        depth = top - here;
    } else {
        depth = dig(top, target, at_bottom);
    }
    return depth + buf[0] + buf[sizeof buf - 1] - 3;
}

static long dig_from_here(long target, void (*at_bottom)(void))
{
    return dig(__builtin_frame_address(0), target, at_bottom);
}

static void yield_at_bottom(void) { goro_yield(); }

START_TEST(deep_recursion_within_default_stack)
{
    long r = 0;
    goro_t *h = go(dig_from_here, 150 * KiB, yield_at_bottom);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_ge(r, 150 * KiB);
    ck_assert_int_lt(r, 160 * KiB);
}
END_TEST

START_TEST(deep_recursion_within_1mib_stack)
{
    goro_attr_t attr = { .name = "deep", .stack_size = 1024 * KiB };
    goro_t *h = NULL;
    ck_assert_int_eq(goro_go(&h, &attr, dig_from_here, 800 * KiB, yield_at_bottom), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_ge(r, 800 * KiB);
    ck_assert_int_lt(r, 810 * KiB);
}
END_TEST

/* ---- overflow ---- */

static volatile int never;            /* keeps the compiler from seeing an endless loop */

static T_NOINLINE long recurse_forever(long n)
{
    volatile char buf[256];
    buf[0] = (char)n;
    if (never)
        return n;
    return recurse_forever(n + 1) + buf[0];
}

static atomic_int overflow_go;

static long overflow_body(void)
{
    t_wait_flag(&overflow_go, 30);
    return recurse_forever(0);
}

static int overflow_child(void *arg)
{
    (void)arg;
    goro_attr_t attr = { .name = "bottomless" };
    goro_t *h = NULL;
    int e = goro_go(&h, &attr, overflow_body);
    if (e != 0) {
        printf("goro_go failed: %d\n", e);
        return 3;
    }
    printf("ID=%llu\n", (unsigned long long)goro_id(h));
    atomic_store(&overflow_go, 1);
    goro_join(h, NULL);
    printf("join returned\n");
    return 4;
}

START_TEST(overflow_is_reported)
{
#ifdef T_ASAN
    t_skip("overflow_is_reported", "ASan reports the overflow itself");
    return;
#endif
    if (t_valgrind()) {
        t_skip("overflow_is_reported", "valgrind");
        return;
    }
    static char out[64 * 1024];
    int st = t_run_child(overflow_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child could not run or hung; output:\n%s", out);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
                  "child status %#x (want SIGABRT); output:\n%.2000s", st, out);
    const char *idl = strstr(out, "ID=");
    ck_assert_msg(idl != NULL, "output:\n%.2000s", out);
    unsigned long long id = strtoull(idl + 3, NULL, 10);
    ck_assert_uint_ne(id, 0);
    char want[128];
    snprintf(want, sizeof want, "stack overflow in coroutine %llu", id);
    ck_assert_msg(strstr(out, want), "no \"%s\" in:\n%.2000s", want, out);
    ck_assert_msg(strstr(out, "bottomless"), "no name in:\n%.2000s", out);
    ck_assert_msg(strstr(out, "GORO_STACK_SIZE"), "no hint in:\n%.2000s", out);
}
END_TEST

/* ---- frames larger than the guard ---- */

#define PAGE ((uintptr_t)sysconf(_SC_PAGESIZE))
#define GUARD_SCAN (1024 * KiB)       /* how far a guard is looked for */

/* The guard below the stack that holds sp: reading down from sp page by
 * page to the first page the kernel refuses (*lo, the guard's high end),
 * then on while it refuses (*map, its low end). Its size, 0 if none. */
static long guard_below(uintptr_t sp, uintptr_t *map, uintptr_t *lo)
{
    uintptr_t p = sp & ~(PAGE - 1);
    while (sp - p < GUARD_SCAN && !t_unreadable(p))
        p -= PAGE;
    if (sp - p >= GUARD_SCAN)
        return 0;
    *lo = p + PAGE;
    while (*lo - p < GUARD_SCAN && t_unreadable(p))
        p -= PAGE;
    *map = p + PAGE;
    return (long)(*lo - *map);
}

/* Whether every page from sp up to (not including) end can be read, and
 * end lies within `within` bytes above sp. */
static bool readable_up_to(uintptr_t sp, uintptr_t end, uintptr_t within)
{
    if (end <= sp || end - sp > within)
        return false;
    for (uintptr_t p = sp & ~(PAGE - 1); p < end; p += PAGE)
        if (t_unreadable(p))
            return false;
    return true;
}

static _Atomic uintptr_t own_guard_at;

static long own_guard(void)
{
    uintptr_t map = 0, lo;
    long size = guard_below((uintptr_t)__builtin_frame_address(0), &map, &lo);
    atomic_store(&own_guard_at, map);
    return size;
}


/* gcc's stack-clash protection on aarch64 leaves frames below 63 KiB
 * unprobed and assumes a 64 KiB guard; elsewhere a guard that large also
 * catches such frames in code built without the flag. */
static long deep_body(void);

START_TEST(guard_covers_unprobed_frames)
{
    long guard = 0;
    goro_attr_t small = { .stack_size = 32 * KiB };
    goro_t *h = NULL;
    uintptr_t small_at = 0;
    int small_reused = 0;
    /* Stacks reused after their pages went back to the kernel (a deep
     * default one trimmed in its pool, a small one given back to its
     * arena) keep their guard. In arenas a freed slot is the next one its
     * worker takes; which worker runs a round is the scheduler's choice,
     * so rounds go on until a slot was seen reused twice. */
    bool arenas = t_stacks_in_arenas();
    for (int round = 0; round < 3 || (arenas && small_reused < 2 && round < 40); round++) {
        ck_assert_int_eq(goro_join(go(deep_body), NULL), 0);
        ck_assert_ptr_nonnull(h = go(own_guard));
        ck_assert_int_eq(goro_join(h, &guard), 0);
        ck_assert_msg(guard >= 64 * KiB, "default stack, round %d: guard of %ld KiB", round,
                      guard / KiB);
        ck_assert_int_eq(goro_go(&h, &small, own_guard), 0);
        ck_assert_int_eq(goro_join(h, &guard), 0);
        ck_assert_msg(guard >= 64 * KiB, "32 KiB stack, round %d: guard of %ld KiB", round,
                      guard / KiB);
        small_reused += atomic_load(&own_guard_at) == small_at;
        small_at = atomic_load(&own_guard_at);
    }
    if (arenas)
        ck_assert_int_ge(small_reused, 2);
}
END_TEST

/* A function with a large local array that it fills from its low end up, as
 * memset does: unprobed, its first store lands the array's size below the
 * stack pointer, past any guard smaller than that. The tests are built with
 * -fstack-clash-protection (Makefile): the prologue then touches the stack
 * on the way down (every page on x86-64, every 64 KiB on aarch64, where
 * smaller frames are not probed at all), so the first store beyond the
 * stack lands in the guard. */
static volatile long frame_sink;
#define FILL_FRAME(kib)                                                   \
    static T_NOINLINE void fill_frame_##kib(void)                         \
    {                                                                     \
        char a[kib * 1024];                                               \
        volatile char *v = a;                                             \
        for (size_t i = 0; i < sizeof a; i++)                             \
            v[i] = (char)i;                                               \
        frame_sink += v[0] + v[sizeof a - 1];                             \
    }
FILL_FRAME(8)
FILL_FRAME(32)
FILL_FRAME(64)
FILL_FRAME(256)

static const struct frame_case {
    int kib;
    void (*fill)(void);
} frame_cases[] = {
    { 8, fill_frame_8 }, { 32, fill_frame_32 }, { 64, fill_frame_64 }, { 256, fill_frame_256 },
};

#define FRAME_STACK (32 * KiB)        /* echod's default */
enum { FRAME_CANDIDATES = 8 };

/* Coroutines on 32 KiB stacks, mapped one after the other; the test picks
 * two whose stacks are adjacent, and the upper one calls the large frame. */
static struct {
    const struct frame_case *c;
    goro_chan_t *go[FRAME_CANDIDATES];
    _Atomic uintptr_t sp[FRAME_CANDIDATES];
    atomic_long ready;
} frames;

static long frame_candidate(int i)
{
    atomic_store(&frames.sp[i], (uintptr_t)__builtin_frame_address(0));
    atomic_fetch_add(&frames.ready, 1);
    goro_chan_recv(frames.go[i], NULL);        /* the others wait forever */
    goro_set_name("bigframe");
    /* A few KiB of the stack left, as after a deep call chain: the 8 KiB
     * frame overflows too. */
    return dig_from_here(FRAME_STACK - 5 * KiB, frames.c->fill);
}

/* Candidate i's stack: its guard [map, lo), then the stack up from lo. */
struct frame_slab {
    uintptr_t map, lo, sp;
    long guard;
};

static int frame_child(void *arg)
{
    frames.c = arg;
    goro_config_t cfg = { .workers = 2 };
    if (goro_start(&cfg) != 0)
        return 10;
    goro_attr_t attr = { .name = "frame", .stack_size = FRAME_STACK };
    goro_t *h[FRAME_CANDIDATES];
    for (int i = 0; i < FRAME_CANDIDATES; i++)
        if (goro_chan_new(&frames.go[i], 0, 1) != 0 || goro_go(&h[i], &attr, frame_candidate, i) != 0)
            return 11;
    if (t_wait_at_least(&frames.ready, FRAME_CANDIDATES, t_timeout(10)) < FRAME_CANDIDATES)
        return 12;
    struct frame_slab s[FRAME_CANDIDATES];
    for (int i = 0; i < FRAME_CANDIDATES; i++) {
        s[i].sp = atomic_load(&frames.sp[i]);
        if (!(s[i].guard = guard_below(s[i].sp, &s[i].map, &s[i].lo)))
            return 13;
    }
    /* The neighbour is the stack right below the overflowing one's guard:
     * nothing but its own top (a few pages: the frames above sp and the
     * coroutine's record) lies between its sp and that guard. */
    int a = -1, b = -1;
    for (int i = 0; i < FRAME_CANDIDATES && a < 0; i++)
        for (int j = 0; j < FRAME_CANDIDATES; j++)
            if (j != i && readable_up_to(s[j].sp, s[i].map, 4 * PAGE)) {
                a = i;
                b = j;
                break;
            }
    if (a < 0) {
        printf("no two of %d stacks are adjacent\n", FRAME_CANDIDATES);
        return 14;
    }
    /* Read-only while it waits (it never runs again): a store into it
     * faults there, and the crash is not reported as an overflow. */
    struct { uintptr_t lo, hi; } nb = { s[b].lo, s[a].map };
    if (mprotect((void *)nb.lo, nb.hi - nb.lo, PROT_READ) != 0)
        return 15;
    printf("ID=%llu: %d KiB frame, guard of %ld KiB, the neighbour's stack at [%#lx, %#lx)\n",
           (unsigned long long)goro_id(h[a]), frames.c->kib, s[a].guard / KiB,
           (unsigned long)nb.lo, (unsigned long)nb.hi);
    goro_chan_send(frames.go[a], NULL);
    goro_join(h[a], NULL);
    printf("join returned\n");
    return 4;
}

/* A large frame on a 32 KiB stack dies of the overflow report, and the
 * stack mapped below it is left alone. */
START_TEST(large_frame_overflow_is_reported)
{
    const struct frame_case *c = &frame_cases[_i];
#ifdef T_ASAN
    t_skip("large_frame_overflow_is_reported", "ASan reports the overflow itself");
    return;
#endif
    if (t_valgrind()) {
        t_skip("large_frame_overflow_is_reported", "valgrind");
        return;
    }
    static char out[64 * 1024];
    int st = t_run_child(frame_child, (void *)c, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "%d KiB frame: child could not run or hung; output:\n%s", c->kib, out);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
                  "%d KiB frame: child status %#x (want SIGABRT); output:\n%.2000s", c->kib, st,
                  out);
    const char *idl = strstr(out, "ID=");
    ck_assert_msg(idl != NULL, "output:\n%.2000s", out);
    char want[128];
    snprintf(want, sizeof want, "stack overflow in coroutine %llu \"bigframe\"",
             strtoull(idl + 3, NULL, 10));
    ck_assert_msg(strstr(out, want), "%d KiB frame: no \"%s\" in:\n%.2000s", c->kib, want, out);
    ck_assert_msg(!strstr(out, "crashed"), "%d KiB frame: a crash, not an overflow:\n%.2000s",
                  c->kib, out);
}
END_TEST

/* ---- stack pages given back ---- */

static long rss_deep_body(void)
{
    return dig_from_here(200 * KiB, NULL);
}

static long deep_body(void)
{
    return rss_deep_body();
}

static long rss_deep_yield_body(void)
{
    return dig_from_here(200 * KiB, yield_at_bottom);
}

static void nothing(void) {}

/* Many coroutines deep at once, each parked at the bottom: the slabs go
 * back to the pools holding 200 KiB of dirty stack each unless the runtime
 * gives the pages back. */
static atomic_long at_bottom_count;
static atomic_int release_bottom;
static void wait_at_bottom(void)
{
    atomic_fetch_add(&at_bottom_count, 1);
    while (!atomic_load(&release_bottom))
        goro_yield();
}

/* The runtime's count of pooled stacks (runtime/coro/stack.c). */
int goro__slab_pooled(void);

static void hold_until_closed(goro_chan_t *gate)
{
    goro_chan_recv(gate, NULL);
}

/* Spawns n coroutines that are all alive at once, so each takes a stack of
 * its own, then ends them and joins them: from a coroutine, so that the
 * stacks go back to the workers' own caches. */
static long burst_from_a_coroutine(long n)
{
    goro_chan_t *gate;
    if (goro_chan_new(&gate, 1, 0) != 0)
        return -1;
    goro_t **hs = calloc((size_t)n, sizeof *hs);
    long made = 0;
    while (hs && made < n && (hs[made] = go(hold_until_closed, gate)))
        made++;
    goro_chan_close(gate);
    long joined = 0;
    for (long i = 0; i < made; i++)
        joined += goro_join(hs[i], NULL) == 0;
    free(hs);
    goro_chan_free(gate);
    return joined == n ? 0 : -1;
}

/* Every pooled stack goes back once the program idles - those in a
 * worker's own cache too: the monitor moves the caches of idle workers to
 * the global pool and returns what stays unused there (about 1-3 s). */
START_TEST(idle_workers_give_their_cached_stacks_back)
{
    long n = 300;
    goro_t *h = go(burst_from_a_coroutine, n);
    long r = -1;
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    int pooled = goro__slab_pooled();
    double limit = t_slow() ? 20 : 8, start = t_now();
    while (pooled > 0 && t_now() - start < limit) {
        t_nap(0.05);
        pooled = goro__slab_pooled();
    }
    ck_assert_msg(pooled == 0, "%d stacks still pooled %.1f s after %ld coroutines ended "
                  "and the workers went idle", pooled, limit, n);
}
END_TEST

/* n coroutines alive at once, spawned from here, parked on one gate:
 * 0 if no two of them were handed the same record, as a pooled slab
 * given out twice would be. */
static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return x < y ? -1 : x > y;
}

static long burst_distinct(long n)
{
    goro_chan_t *gate;
    if (goro_chan_new(&gate, 1, 0) != 0)
        return -1;
    goro_t **hs = calloc((size_t)n, sizeof *hs), **sorted = calloc((size_t)n, sizeof *hs);
    long made = 0, same = 0;
    while (hs && sorted && made < n && (hs[made] = go(hold_until_closed, gate)))
        made++;
    if (sorted && made == n) {
        memcpy(sorted, hs, (size_t)n * sizeof *hs);
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_ptr);
        for (long i = 1; i < n; i++)
            same += sorted[i] == sorted[i - 1];
    }
    goro_chan_close(gate);
    long joined = 0;
    for (long i = 0; i < made; i++)
        joined += goro_join(hs[i], NULL) == 0;
    free(hs);
    free(sorted);
    goro_chan_free(gate);
    return made == n && joined == n && same == 0 ? 0 : -1;
}

/* The global pool holds chains of slabs: a worker's cache spills half of
 * itself as one chain and refills by taking one whole, and a thread the
 * runtime does not own takes one slab at a time, splitting a chain. In
 * turns of both, every live coroutine has a slab of its own. */
START_TEST(pooled_stacks_go_to_one_coroutine_at_a_time)
{
    long n = 100 + t_scale(200);     /* more than a worker's cache */
    for (int round = 0; round < 4; round++) {
        goro_t *h = go(burst_distinct, n);   /* a worker: by chains */
        long r = -1;
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(goro_join(h, &r), 0);
        ck_assert_msg(r == 0, "round %d: a slab went to two coroutines (from a worker)", round);
        ck_assert_msg(burst_distinct(n / 3 + round) == 0,    /* this thread: one at a time */
                      "round %d: a slab went to two coroutines (from a thread)", round);
    }
}
END_TEST

static long deep_and_wait(void)
{
    return dig_from_here(200 * KiB, wait_at_bottom);
}

START_TEST(reused_stacks_give_deep_pages_back)
{
    if (t_valgrind() || t_sanitized()) {
        /* RSS of the instrumented process says little about ours */
        t_skip("reused_stacks_give_deep_pages_back", "valgrind or sanitizer");
        return;
    }
    long cycles = t_scale(1000);
    goro_t *h;
    long r;
    /* warm up: allocator, thread stacks, first slabs */
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(goro_join(go(nothing), NULL), 0);
        ck_assert_int_eq(goro_join(go(rss_deep_yield_body), &r), 0);
    }
    long base = t_rss_kib();
    ck_assert_int_gt(base, 0);
    long worst = base;
    /* 1: deep (parked at the bottom) then shallow, one at a time */
    for (long i = 0; i < cycles; i++) {
        T_CHECK((h = go(rss_deep_yield_body)) && goro_join(h, &r) == 0 && r >= 200 * KiB,
                "deep coroutine %ld", i);
        T_CHECK((h = go(nothing)) && goro_join(h, NULL) == 0, "shallow coroutine %ld", i);
        if (i % 64 == 0) {
            long now = t_rss_kib();
            worst = now > worst ? now : worst;
        }
    }
    ck_assert_msg(worst - base < 512, "RSS grew by %ld KiB over %ld deep+shallow "
                  "cycles", worst - base, cycles);

    /* 2: deep without switching at the bottom, then shallow */
    base = t_rss_kib();
    worst = base;
    for (long i = 0; i < cycles; i++) {
        T_CHECK((h = go(rss_deep_body)) && goro_join(h, &r) == 0 && r >= 200 * KiB,
                "deep coroutine %ld", i);
        T_CHECK((h = go(nothing)) && goro_join(h, NULL) == 0, "shallow coroutine %ld", i);
        if (i % 64 == 0) {
            long now = t_rss_kib();
            worst = now > worst ? now : worst;
        }
    }
    ck_assert_msg(worst - base < 512, "RSS grew by %ld KiB over %ld deep (no switch "
                  "at the bottom) + shallow cycles", worst - base, cycles);

    /* 3: K deep at once, all parked at the bottom, then all joined */
    enum { K = 32 };
    goro_t *hs[K];
    long rounds = t_scale(1000) / K + 1;
    base = t_rss_kib();
    long peak = 0, after = 0;
    for (long round = 0; round < rounds; round++) {
        atomic_store(&at_bottom_count, 0);
        atomic_store(&release_bottom, 0);
        for (int k = 0; k < K; k++)
            ck_assert_ptr_nonnull(hs[k] = go(deep_and_wait));
        ck_assert_int_eq(t_wait_at_least(&at_bottom_count, K, t_timeout(30)), K);
        long now = t_rss_kib();
        peak = now > peak ? now : peak;
        atomic_store(&release_bottom, 1);
        for (int k = 0; k < K; k++)
            T_CHECK(goro_join(hs[k], &r) == 0 && r >= 200 * KiB, "deep %d", k);
        for (int k = 0; k < K; k++)
            ck_assert_ptr_nonnull(hs[k] = go(nothing));
        for (int k = 0; k < K; k++)
            ck_assert_int_eq(goro_join(hs[k], NULL), 0);
        after = t_rss_kib();
        ck_assert_msg(after - base < K * 32 + 1024, "round %ld: RSS %ld KiB above "
                      "the start after joining %d deep coroutines (peak %ld above)",
                      round, after - base, K, peak - base);
    }
    /* the deep phase itself did use the memory (the test can fail) */
    ck_assert_int_gt(peak - base, K * 150);
}
END_TEST

/* ---- vm.max_map_count ---- */

static atomic_int maps_release;

static void park_until_released(void)
{
    while (!atomic_load(&maps_release))
        goro_yield();
}

#define NO_ARENAS 77                  /* a child's status: nothing to test */

/* One mapping split into single pages of alternating protection, one
 * mapping per page (neighbours with equal flags would merge), that leaves
 * `headroom` of vm.max_map_count. Its size in pages; 0 on failure. */
static long use_up_mappings(long headroom, char **fill)
{
    long max = t_read_long_file("/proc/sys/vm/max_map_count");
    long have = t_maps_count();
    long pages = max - have - headroom;
    if (max <= 0 || have <= 0 || pages < 16)
        return 0;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    *fill = mmap(NULL, (size_t)pages * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    if (*fill == MAP_FAILED)
        return 0;
    for (long i = 1; i < pages; i += 2)
        if (mprotect(*fill + i * pg, pg, PROT_READ) != 0)
            break;
    printf("mappings: %ld of %ld\n", t_maps_count(), max);
    return pages;
}

/* In a child, stacks each in its own mapping (GORO_STACK_GUARD=mprotect):
 * use up nearly every mapping the kernel allows, then spawn until goro_go
 * fails. Exit status 0 when it failed cleanly with -EAGAIN or -ENOMEM and
 * everything recovered; the parent checks the message. */
static int maps_child(void *arg)
{
    (void)arg;
    enum { MAXH = 4096 };
    static goro_t *h[MAXH];
    goro_config_t cfg = { .workers = 2 };
    setenv("GORO_STACK_GUARD", "mprotect", 1);
    if (goro_start(&cfg) != 0)
        return 10;
    if (t_stacks_in_arenas())
        return 19;
    for (int i = 0; i < 16; i++)                  /* warm: pools */
        goro_join(go(nothing), NULL);
    char *fill;
    long pages = use_up_mappings(64, &fill);
    if (!pages)
        return 11;
    int n = 0, err = 0;
    while (n < MAXH) {
        err = goro_go(&h[n], NULL, park_until_released);
        if (err)
            break;
        n++;
    }
    printf("spawned=%d err=%d maps=%ld\n", n, err, t_maps_count());
    int status = 0;
    if (err != -EAGAIN && err != -ENOMEM)
        status = 13;
    goro_t *extra = NULL;
    if (status == 0 && goro_go(&extra, NULL, nothing) == 0)  /* still full */
        status = 14;
    if (extra)
        goro_join(extra, NULL);
    if (go(nothing) != NULL || (errno != EAGAIN && errno != ENOMEM))
        status = status ? status : 15;
    munmap(fill, (size_t)pages * (size_t)sysconf(_SC_PAGESIZE));
    atomic_store(&maps_release, 1);
    for (int i = 0; i < n; i++)
        if (goro_join(h[i], NULL) != 0)
            status = status ? status : 16;
    goro_t *after = go(nothing);                  /* recovered */
    if (!after || goro_join(after, NULL) != 0)
        status = status ? status : 17;
    if (goro_shutdown() != 0)
        status = status ? status : 18;
    return status;
}

static bool map_count_testable(const char *test)
{
    if (t_slow() || t_sanitized()) {
        /* qemu's and the sanitizers' own mappings make the count meaningless */
        t_skip(test, "slow run or sanitizer");
        return false;
    }
    long max = t_read_long_file("/proc/sys/vm/max_map_count");
    if (max <= 0 || max > 200000) {
        t_skip(test, "vm.max_map_count unreadable or > 200000");
        return false;
    }
    return true;
}

START_TEST(map_count_exhaustion_is_reported)
{
    if (!map_count_testable("map_count_exhaustion_is_reported"))
        return;
    static char out[16 * 1024];
    int st = t_run_child(maps_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(st != -1, "child could not run or hung; output:\n%s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "child status %#x; output:\n%.3000s", st, out);
    const char *msg = strstr(out, "vm.max_map_count");
    ck_assert_msg(msg != NULL, "no vm.max_map_count message in:\n%.3000s", out);
    ck_assert_msg(strstr(out, "each coroutine stack takes 2"), "no cause in:\n%.3000s", out);
    /* one line, said once although goro_go failed several times */
    int goro_lines = 0;
    for (const char *p = out; (p = strstr(p, "goro:")); p++)
        goro_lines++;
    ck_assert_msg(goro_lines == 1, "%d goro: lines in:\n%.3000s", goro_lines, out);
}
END_TEST

/* In a child, stacks in arenas: with all but 64 of the mappings used up,
 * ARENA_SPAWNS coroutines still spawn and park (a mapping per stack would
 * stop at 32), and a burst of them comes and goes. */
enum { ARENA_SPAWNS = 20000 };

static int arena_maps_child(void *arg)
{
    (void)arg;
    static goro_t *h[ARENA_SPAWNS];
    goro_config_t cfg = { .workers = 2 };
    if (goro_start(&cfg) != 0)
        return 10;
    if (!t_stacks_in_arenas())
        return NO_ARENAS;
    char *fill;
    long pages = use_up_mappings(64, &fill);
    if (!pages)
        return 11;
    goro_attr_t small = { .stack_size = 32 * KiB };
    int n = 0, err = 0;
    for (; n < ARENA_SPAWNS && !err; n += !err)
        err = goro_go(&h[n], n % 8 ? NULL : &small, park_until_released);
    printf("spawned=%d err=%d maps=%ld\n", n, err, t_maps_count());
    atomic_store(&maps_release, 1);
    int status = err ? 12 : 0;
    for (int i = 0; i < n; i++)
        if (goro_join(h[i], NULL) != 0)
            status = status ? status : 13;
    munmap(fill, (size_t)pages * (size_t)sysconf(_SC_PAGESIZE));
    /* The dump's stack line only now: goro_dump names every frame of
     * every coroutine through libunwind, which looks each one up in
     * /proc/self/maps - 20,000 coroutines among 65,000 mappings took
     * more than a minute. */
    printf("%s\n", t_stack_space_line());
    if (goro_shutdown() != 0)
        status = status ? status : 14;
    return status;
}

START_TEST(stacks_share_mappings)
{
    if (!map_count_testable("stacks_share_mappings"))
        return;
    static char out[64 * 1024];
    int st = t_run_child(arena_maps_child, NULL, t_timeout(60), out, sizeof out);
    ck_assert_msg(st != -1, "child could not run or hung; output:\n%s", out);
    if (WIFEXITED(st) && WEXITSTATUS(st) == NO_ARENAS) {
        t_skip("stacks_share_mappings", "no MADV_GUARD_INSTALL here");
        return;
    }
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "child status %#x; output:\n%.3000s", st, out);
    ck_assert_msg(!strstr(out, "goro: cannot"), "a message:\n%.3000s", out);
}
END_TEST

/* ---- idle stacks given back ---- */

#define BURST_STACK (256 * KiB)
#define BURST 1024                    /* 1024 x (256 + guard + 4) KiB: > 256 MiB */
#define HEADROOM (16L << 20)          /* address space left when the burst is over */
#define OTHER_STACK (32L << 20)       /* a stack size the pools do not hold */
#define BIG_MALLOC (64L << 20)

static goro_chan_t *burst_end;

static void wait_burst_end(void)
{
    goro_chan_recv(burst_end, NULL);  /* returns 0 once the channel is closed */
}

/* In a child: BURST coroutines alive at once, then all ended and joined
 * (their stacks go to the pools), then the address space limited to what
 * is mapped now plus HEADROOM. Returns 0 or an exit status. */
static int burst_then_limit(void)
{
    static goro_t *h[BURST];
    goro_config_t cfg = { .workers = 2, .stack_size = BURST_STACK };
    if (goro_start(&cfg) != 0 || goro_chan_new(&burst_end, 0, 0) != 0)
        return 10;
    for (int i = 0; i < BURST; i++)
        if (!(h[i] = go(wait_burst_end)))
            return 11;
    goro_chan_close(burst_end);
    for (int i = 0; i < BURST; i++)
        if (goro_join(h[i], NULL) != 0)
            return 12;
    long pages = t_read_long_file("/proc/self/statm");   /* VmSize */
    if (pages <= 0)
        return 13;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0)
        return 14;
    rl.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + HEADROOM;
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        return 15;
    return 0;
}

static void nothing_much(void) {}

/* After the limit: a stack of another size, then 64 MiB of heap. */
static int other_stack_then_malloc(void)
{
    goro_attr_t attr = { .stack_size = OTHER_STACK };
    goro_t *h = NULL;
    int e = goro_go(&h, &attr, nothing_much);
    printf("spawn with a %ld MiB stack: %d\n", OTHER_STACK >> 20, e);
    if (e == 0)
        goro_join(h, NULL);
    void *mem = malloc(BIG_MALLOC);
    printf("malloc(%ld MiB): %s\n", BIG_MALLOC >> 20, mem ? "ok" : "failed");
    free(mem);
    return e != 0 ? 20 : !mem ? 21 : 0;
}

static bool limits_testable(const char *test)
{
    if (t_slow() || t_sanitized() || t_valgrind()) {
        /* qemu-user accepts RLIMIT_AS but does not apply it; ASan aborts
         * when its own mappings fail under the limit; valgrind maps its
         * own too */
        t_skip(test, "slow run, sanitizer or valgrind");
        return false;
    }
    return true;
}

static void check_child(const char *what, int (*fn)(void *), char *out, size_t len)
{
    int st = t_run_child(fn, NULL, t_timeout(30), out, len);
    ck_assert_msg(st != -1, "%s: child could not run or hung; output:\n%s", what, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status %#x; output:\n%.3000s",
                  what, st, out);
}

/* A stack that cannot be mapped: the pools give theirs back first. */
static int failed_map_child(void *arg)
{
    (void)arg;
    int e = burst_then_limit();
    return e ? e : other_stack_then_malloc();
}

START_TEST(failed_mapping_releases_pooled_stacks)
{
    if (!limits_testable("failed_mapping_releases_pooled_stacks"))
        return;
    static char out[16 * 1024];
    check_child("spawn after a burst under RLIMIT_AS", failed_map_child, out, sizeof out);
    ck_assert_msg(!strstr(out, "goro:"), "a message although nothing ran out:\n%.3000s", out);
}
END_TEST

/* Pooled stacks unused for a while go back to the kernel by themselves. */
static int idle_pool_child(void *arg)
{
    (void)arg;
    int e = burst_then_limit();
    if (e)
        return e;
    /* The monitor thread does it, on the real clock: recently used stacks
     * are kept for reuse, idle ones go after 1 to 2 s. */
    t_nap(0.3);
    void *early = malloc(BIG_MALLOC);
    free(early);
    if (early) {
        printf("pooled stacks returned after 0.3 s\n");
        return 26;
    }
    void *mem = NULL;
    for (double end = t_now() + 10; !mem && t_now() < end; t_nap(0.05))
        mem = malloc(BIG_MALLOC);                   /* before any other mapping */
    printf("malloc(%ld MiB) after the pools idled: %s\n", BIG_MALLOC >> 20, mem ? "ok" : "failed");
    if (!mem)
        return 22;
    free(mem);
    return other_stack_then_malloc();
}

START_TEST(idle_pooled_stacks_are_returned)
{
    if (!limits_testable("idle_pooled_stacks_are_returned"))
        return;
    static char out[16 * 1024];
    check_child("malloc after a burst under RLIMIT_AS", idle_pool_child, out, sizeof out);
}
END_TEST

/* Really out of address space: -ENOMEM and one line naming the limit,
 * however often it fails; the pools were emptied on the way, and stacks
 * of the default size can be had again. */
static int exhausted_child(void *arg)
{
    (void)arg;
    int e = burst_then_limit();
    if (e)
        return e;
    goro_attr_t huge = { .stack_size = 1L << 30 };
    goro_t *h = NULL;
    int e1 = goro_go(&h, &huge, nothing_much);
    int e2 = goro_go(&h, &huge, nothing_much);
    printf("1 GiB stack: %d, again: %d\n", e1, e2);
    if (e1 != -ENOMEM || e2 != -ENOMEM)
        return 23;
    void *mem = malloc(BIG_MALLOC);
    printf("malloc(%ld MiB) after the failed spawns: %s\n", BIG_MALLOC >> 20, mem ? "ok" : "failed");
    if (!mem)
        return 24;
    free(mem);
    if (!(h = go(nothing_much)) || goro_join(h, NULL) != 0)
        return 25;
    return 0;
}

START_TEST(address_space_exhaustion_is_reported)
{
    if (!limits_testable("address_space_exhaustion_is_reported"))
        return;
    static char out[16 * 1024];
    check_child("a 1 GiB stack under RLIMIT_AS", exhausted_child, out, sizeof out);
    const char *msg = strstr(out, "goro: ");
    ck_assert_msg(msg != NULL, "no message in:\n%.3000s", out);
    ck_assert_msg(!strstr(msg + 1, "goro: "), "more than one message in:\n%.3000s", out);
    const char *eol = strchr(msg, '\n');
    const char *cause = strstr(msg, "RLIMIT_AS");
    ck_assert_msg(cause && eol && cause < eol, "the message does not name RLIMIT_AS:\n%.3000s",
                  out);
}
END_TEST

Suite *stack_suite(void)
{
    Suite *s = suite_create("stack");
    TCase *tc = t_runtime_tcase(s, "depth", 30);
    tcase_add_test(tc, deep_recursion_within_default_stack);
    tcase_add_test(tc, deep_recursion_within_1mib_stack);
    tcase_add_test(tc, reused_stacks_give_deep_pages_back);
    tcase_add_test(tc, idle_workers_give_their_cached_stacks_back);
    tcase_add_test(tc, pooled_stacks_go_to_one_coroutine_at_a_time);

    tc = t_runtime_tcase(s, "guard", 30);
    tcase_add_test(tc, guard_covers_unprobed_frames);

    tc = t_tcase(s, "children", 40);  /* these fork their own child */
    tcase_add_test(tc, overflow_is_reported);
    tcase_add_test(tc, map_count_exhaustion_is_reported);
    tcase_add_test(tc, stacks_share_mappings);

    tc = t_tcase(s, "frames", 40);    /* a child each */
    tcase_add_loop_test(tc, large_frame_overflow_is_reported, 0,
                        (int)(sizeof frame_cases / sizeof *frame_cases));

    tc = t_tcase(s, "pools", 60);     /* a child each */
    tcase_add_test(tc, failed_mapping_releases_pooled_stacks);
    tcase_add_test(tc, idle_pooled_stacks_are_returned);
    tcase_add_test(tc, address_space_exhaustion_is_reported);
    return s;
}
