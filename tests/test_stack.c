/* Coroutine stacks: depth within the reserve, overflow reports, pages given
 * back when a slab is reused, and running out of memory mappings. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* ---- stack pages given back ---- */

static long rss_deep_body(void)
{
    return dig_from_here(200 * KiB, NULL);
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

/* In a child: use up nearly every mapping the kernel allows, then spawn
 * until goro_go fails. Exit status 0 when it failed cleanly with -EAGAIN or
 * -ENOMEM and everything recovered; the parent checks the message. */
static int maps_child(void *arg)
{
    (void)arg;
    enum { MAXH = 4096 };
    static goro_t *h[MAXH];
    goro_config_t cfg = { .workers = 2 };
    if (goro_start(&cfg) != 0)
        return 10;
    for (int i = 0; i < 16; i++)                  /* warm: arenas, pools */
        goro_join(go(nothing), NULL);
    long max = t_read_long_file("/proc/sys/vm/max_map_count");
    long have = t_maps_count();
    const long headroom = 64;
    long pages = max - have - headroom;
    if (max <= 0 || have <= 0 || pages < 16)
        return 11;
    /* One mapping split into single pages of alternating protection: one
     * mapping per page (neighbours with equal flags would merge). */
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    char *fill = mmap(NULL, (size_t)pages * pg, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fill == MAP_FAILED)
        return 12;
    for (long i = 1; i < pages; i += 2)
        if (mprotect(fill + i * pg, pg, PROT_READ) != 0)
            break;
    int n = 0, err = 0;
    while (n < MAXH) {
        err = goro_go(&h[n], NULL, park_until_released);
        if (err)
            break;
        n++;
    }
    printf("spawned=%d err=%d maps=%ld max=%ld\n", n, err, t_maps_count(), max);
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
    munmap(fill, (size_t)pages * pg);
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

START_TEST(map_count_exhaustion_is_reported)
{
    if (t_slow() || t_sanitized()) {
        /* qemu's and the sanitizers' own mappings make the count meaningless */
        t_skip("map_count_exhaustion_is_reported", "slow run or sanitizer");
        return;
    }
    long max = t_read_long_file("/proc/sys/vm/max_map_count");
    if (max <= 0 || max > 200000) {
        t_skip("map_count_exhaustion_is_reported", "vm.max_map_count unreadable or > 200000");
        return;
    }
    static char out[16 * 1024];
    int st = t_run_child(maps_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(st != -1, "child could not run or hung; output:\n%s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "child status %#x; output:\n%.3000s", st, out);
    const char *msg = strstr(out, "vm.max_map_count");
    ck_assert_msg(msg != NULL, "no vm.max_map_count message in:\n%.3000s", out);
    /* one line, said once although goro_go failed several times */
    int goro_lines = 0;
    for (const char *p = out; (p = strstr(p, "goro:")); p++)
        goro_lines++;
    ck_assert_msg(goro_lines == 1, "%d goro: lines in:\n%.3000s", goro_lines, out);
}
END_TEST

Suite *stack_suite(void)
{
    Suite *s = suite_create("stack");
    TCase *tc = t_runtime_tcase(s, "depth", 30);
    tcase_add_test(tc, deep_recursion_within_default_stack);
    tcase_add_test(tc, deep_recursion_within_1mib_stack);
    tcase_add_test(tc, reused_stacks_give_deep_pages_back);

    tc = t_tcase(s, "children", 40);  /* these fork their own child */
    tcase_add_test(tc, overflow_is_reported);
    tcase_add_test(tc, map_count_exhaustion_is_reported);
    return s;
}
