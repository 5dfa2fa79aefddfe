/* Spawning, joining, detaching; ids and names; goro_exit; foreign threads. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "helpers.h"
#include "suites.h"

static long square_plus(long i) { return i * i + 7; }

/* Joins h and checks its result; returns false (with a note) otherwise. */
static bool join_expect(goro_t *h, long want, const char *what, long i)
{
    long r = -12345;
    int e = goro_join(h, &r);
    if (e != 0) {
        t_fail("%s %ld: goro_join returned %d", what, i, e);
        return false;
    }
    if (r != want) {
        t_fail("%s %ld: result %ld, want %ld", what, i, r, want);
        return false;
    }
    return true;
}

/* Spawns n coroutines in batches and joins each, checking every result. */
static long spawn_join_batches(long n)
{
    enum { BATCH = 256 };
    goro_t *h[BATCH];
    long done = 0;
    for (long base = 0; base < n; base += BATCH) {
        long k = n - base < BATCH ? n - base : BATCH;
        for (long i = 0; i < k; i++) {
            h[i] = go(square_plus, base + i);
            if (!h[i]) {
                t_fail("go #%ld failed: %s", base + i, strerror(errno));
                for (long j = 0; j < i; j++)
                    goro_join(h[j], NULL);
                return done;
            }
        }
        for (long i = 0; i < k; i++)
            done += join_expect(h[i], square_plus(base + i), "spawn", base + i);
    }
    return done;
}

START_TEST(spawn_join_100k_from_main)
{
    long n = t_live(100000);
    ck_assert_int_eq(spawn_join_batches(n), n);
    ck_assert_msg(!t_failed(), "%s", t_failed());
}
END_TEST

static long spawn_join_in_coroutine(long n) { return spawn_join_batches(n); }

START_TEST(spawn_join_100k_from_coroutine)
{
    long n = t_live(100000), done = -1;
    goro_t *h = go(spawn_join_in_coroutine, n);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &done), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(done, n);
}
END_TEST

static atomic_long detached_done;
static atomic_long detached_sum;

static void detached_body(long i)
{
    atomic_fetch_add(&detached_sum, i);
    atomic_fetch_add(&detached_done, 1);
}

START_TEST(detached_100k_complete)
{
    long n = t_live(100000);
    /* Keep at most this many in flight: without arenas every live coroutine
     * holds two stack mappings (vm.max_map_count allows ~32k), and the
     * spawning thread could outrun two workers. */
    const long in_flight = 8192;
    atomic_store(&detached_done, 0);
    atomic_store(&detached_sum, 0);
    for (long i = 0; i < n; i++) {
        if (i - atomic_load(&detached_done) >= in_flight)
            t_wait_at_least(&detached_done, i - in_flight / 2, t_timeout(30));
        int e = goro_go(NULL, NULL, detached_body, i);
        T_CHECK(e == 0, "goro_go #%ld: %d", i, e);
    }
    long got = t_wait_at_least(&detached_done, n, t_timeout(30));
    ck_assert_int_eq(got, n);
    ck_assert_int_eq(atomic_load(&detached_sum), n * (n - 1) / 2);
}
END_TEST

/* Detached coroutines spawned by coroutines (slabs go back to P caches). */
static void detached_spawner(long n)
{
    for (long i = 0; i < n; i++) {
        if (goro_go(NULL, NULL, detached_body, i) != 0) {
            t_fail("nested goro_go #%ld failed", i);
            return;
        }
        if (i % 64 == 0)
            goro_yield();
    }
}

START_TEST(detached_from_coroutines_complete)
{
    long per = t_live(20000), spawners = 4;
    atomic_store(&detached_done, 0);
    atomic_store(&detached_sum, 0);
    for (long s = 0; s < spawners; s++)
        ck_assert_int_eq(goro_go(NULL, NULL, detached_spawner, per), 0);
    long got = t_wait_at_least(&detached_done, per * spawners, t_timeout(30));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(got, per * spawners);
    ck_assert_int_eq(atomic_load(&detached_sum), spawners * (per * (per - 1) / 2));
}
END_TEST

/* A coroutine that is still running when joined: the joiner must wait. */
static atomic_int slow_started;
static long slow_worker(long spins)
{
    atomic_store(&slow_started, 1);
    long acc = 0;
    for (long i = 0; i < spins; i++) {
        acc += i;
        goro_yield();
    }
    return acc;
}

/* Detach racing the coroutine's end: the exit briefly marks the handle
 * WAKING while it settles its outcome, and a detach landing there was
 * refused as misuse (-EINVAL) instead of waiting, as join does. The
 * detaching thread spins a random few hundred nanoseconds so that it hits
 * every part of the exit; the window is a few instructions, so the run is
 * long (time-bounded). */
static void detach_race_nothing(void) {}

START_TEST(detach_racing_exit_never_refused)
{
    uint32_t r = 77;
    long rounds = 0, refused = 0;
    double end = t_now() + (t_slow() ? 1.0 : 3.0);
    while (t_now() < end) {
        goro_t *h = go(detach_race_nothing);
        ck_assert_ptr_nonnull(h);
        for (uint32_t spin = t_rnd(&r) % 2048; spin; spin--)
            __asm__ volatile("" ::: "memory");
        int e = goro_detach(h);
        refused += e != 0;
        rounds++;
    }
    printf("detach racing exit: %ld rounds, %ld refused\n", rounds, refused);
    ck_assert_msg(refused == 0, "%ld of %ld detaches refused", refused, rounds);
}
END_TEST

START_TEST(join_waits_for_running)
{
    long spins = t_scale(20000);
    atomic_store(&slow_started, 0);
    goro_t *h = go(slow_worker, spins);
    ck_assert_ptr_nonnull(h);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(atomic_load(&slow_started), 1);
    ck_assert_int_eq(r, spins * (spins - 1) / 2);
}
END_TEST

/* ---- self, ids, names ---- */

static goro_t *self_of_coroutine(void) { return goro_self(); }

START_TEST(self_is_null_outside)
{
    ck_assert_ptr_null(goro_self());
    ck_assert_uint_eq(goro_id(NULL), 0);
    ck_assert_str_eq(goro_name(NULL), "");
}
END_TEST

static uint64_t id_seen_inside;
static long self_checks(void)
{
    goro_t *me = goro_self();
    if (!me)
        return -1;
    id_seen_inside = goro_id(me);
    return (long)(intptr_t)me;
}

START_TEST(self_is_the_handle)
{
    goro_t *h = go(self_checks);
    ck_assert_ptr_nonnull(h);
    uint64_t id = goro_id(h);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_ptr_eq((void *)(intptr_t)r, h);
    ck_assert_uint_eq(id_seen_inside, id);
    ck_assert_uint_ne(id, 0);

    h = go(self_of_coroutine);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_ptr_eq((void *)(intptr_t)r, h);
}
END_TEST

static void nothing(void) {}

START_TEST(ids_increase_from_main)
{
    enum { N = 200 };
    goro_t *h[N];
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        h[i] = go(nothing);
        ck_assert_ptr_nonnull(h[i]);
        ids[i] = goro_id(h[i]);
    }
    for (int i = 0; i < N; i++)
        T_CHECK(goro_join(h[i], NULL) == 0, "join %d", i);
    for (int i = 1; i < N; i++)
        T_CHECK(ids[i] > ids[i - 1], "spawn %d got id %llu after %llu", i,
                      (unsigned long long)ids[i], (unsigned long long)ids[i - 1]);
}
END_TEST

/* One spawner coroutine that moves between workers while it spawns: ids
 * must still increase in its spawn order ("1, 2, ... in spawn order"). */
enum { SPAWNER_N = 2000 };
static uint64_t spawner_ids[SPAWNER_N];
static atomic_long spawner_done;

static long ordered_spawner(long n)
{
    for (long i = 0; i < n; i++) {
        goro_t *h = go(nothing);
        if (!h) {
            t_fail("go failed at %ld", i);
            break;
        }
        spawner_ids[i] = goro_id(h);
        goro_join(h, NULL);
        if (i % 20 == 10)
            t_hop();                   /* probably to the other worker */
        else
            goro_yield();
    }
    atomic_store(&spawner_done, 1);
    return n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(ids_unique_from_one_migrating_spawner)
{
    long n = t_scale(SPAWNER_N);
    if (n < 200)
        n = 200;
    atomic_store(&spawner_done, 0);
    t_hops_reset();
    goro_t *s = go(ordered_spawner, n);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(t_serve_hops(&spawner_done, 1, t_timeout(30)), 1);
    long r = 0;
    ck_assert_int_eq(goro_join(s, &r), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(r, n);
    ck_assert_int_gt(t_hops_moved(), 0);
    /* Ids come in per-worker blocks: unique and positive, not ordered. */
    qsort(spawner_ids, (size_t)n, sizeof spawner_ids[0], cmp_u64);
    T_CHECK(spawner_ids[0] >= 1, "id 0 handed out");
    for (long i = 1; i < n; i++)
        T_CHECK(spawner_ids[i] != spawner_ids[i - 1],
                "id %llu handed out twice (the spawner changed threads %ld times "
                "in %ld hops)", (unsigned long long)spawner_ids[i],
                t_hops_moved(), t_hops_total());
    ck_assert_msg(!t_failed(), "%s", t_failed());
}
END_TEST

static long record_ids(uint64_t *out, int n)
{
    for (int i = 0; i < n; i++) {
        goro_t *h = go(nothing);
        if (!h) {
            t_fail("go failed");
            return -1;
        }
        out[i] = goro_id(h);
        if (goro_join(h, NULL) != 0)
            t_fail("join failed");
        if (i % 16 == 0)
            goro_yield();
    }
    return 0;
}

START_TEST(ids_unique_across_spawners)
{
    /* Coroutines on several workers and the main thread spawn at once. */
    enum { PER = 300, SPAWNERS = 4 };
    static uint64_t ids[SPAWNERS + 1][PER];
    goro_t *s[SPAWNERS];
    for (int k = 0; k < SPAWNERS; k++) {
        s[k] = go(record_ids, &ids[k][0], PER);
        ck_assert_ptr_nonnull(s[k]);
    }
    record_ids(ids[SPAWNERS], PER);
    for (int k = 0; k < SPAWNERS; k++)
        ck_assert_int_eq(goro_join(s[k], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    uint64_t *all = &ids[0][0];
    size_t total = (SPAWNERS + 1) * PER;
    for (size_t i = 0; i < total; i++) {
        T_CHECK(all[i] != 0, "id 0 given");
        for (size_t j = i + 1; j < total; j++)
            T_CHECK(all[i] != all[j], "id %llu given twice",
                          (unsigned long long)all[i]);
    }
}
END_TEST

static atomic_int name_go, name_done;
static char name_inside[64], name_after_set[64];

static void named_body(void)
{
    snprintf(name_inside, sizeof name_inside, "%s", goro_name(goro_self()));
    int e = goro_set_name("renamed-coroutine");
    if (e != 0)
        t_fail("goro_set_name returned %d", e);
    snprintf(name_after_set, sizeof name_after_set, "%s", goro_name(goro_self()));
    atomic_store(&name_done, 1);
    t_wait_flag(&name_go, t_timeout(30));  /* main reads goro_name(h) meanwhile */
}

START_TEST(names_from_attr_and_set_name)
{
    atomic_store(&name_go, 0);
    atomic_store(&name_done, 0);
    goro_t *h = NULL;
    goro_attr_t attr = { .name = "worker-7" };
    ck_assert_int_eq(goro_go(&h, &attr, named_body), 0);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(t_wait_flag(&name_done, t_timeout(30)), 1);
    ck_assert_str_eq(name_inside, "worker-7");
    ck_assert_str_eq(name_after_set, "renamed-coroutine");
    ck_assert_str_eq(goro_name(h), "renamed-coroutine");
    atomic_store(&name_go, 1);
    ck_assert_int_eq(goro_join(h, NULL), 0);

    /* no name: ""; long names keep their first 31 bytes */
    h = go(nothing);
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(goro_name(h), "");
    ck_assert_int_eq(goro_join(h, NULL), 0);
    const char *longname = "0123456789abcdefghijABCDEFGHIJ-xyz-too-long";
    attr.name = longname;
    ck_assert_int_eq(goro_go(&h, &attr, nothing), 0);
    ck_assert_uint_eq(strlen(goro_name(h)), 31);
    ck_assert_int_eq(strncmp(goro_name(h), longname, 31), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);

    /* the name is copied at spawn */
    char buf[16] = "copied";
    attr.name = buf;
    ck_assert_int_eq(goro_go(&h, &attr, nothing), 0);
    strcpy(buf, "changed");
    ck_assert_str_eq(goro_name(h), "copied");
    ck_assert_int_eq(goro_join(h, NULL), 0);
}
END_TEST

/* ---- goro_exit ---- */

static atomic_int after_exit_ran;

static T_NOINLINE void exit_deep(long v, int depth)
{
    if (depth < 0)
        return;
    if (depth == 0)
        goro_exit(v);
    exit_deep(v, depth - 1);
    atomic_store(&after_exit_ran, 1);
}

static int exit_from_nested(long v)
{
    exit_deep(v, 5);
    atomic_store(&after_exit_ran, 1);
    return -1;
}

static long exit_plain(void *arg)
{
    exit_deep((long)(intptr_t)arg, 3);
    atomic_store(&after_exit_ran, 1);
    return -1;
}

START_TEST(exit_from_nested_function)
{
    atomic_store(&after_exit_ran, 0);
    long r = 0;
    goro_t *h = go(exit_from_nested, 0x123456789abcL);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &r), 0);
    /* the result is goro_exit's long, not widened as the int return type */
    ck_assert_int_eq(r, 0x123456789abcL);
    ck_assert_int_eq(goro_spawn(&h, NULL, exit_plain, (void *)(intptr_t)-42), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -42);
    ck_assert_int_eq(atomic_load(&after_exit_ran), 0);
}
END_TEST

/* Under valgrind, in this child forked from the process that ran the
 * suite so far, the abort's signal frame went below what the thread had
 * touched of its stack and valgrind would not grow it ("Can't extend
 * stack ... during signal delivery"): the child died of SIGSEGV. So it
 * touches 64 KiB of stack first. */
static T_NOINLINE void touch_stack(void)
{
    volatile char deep[64 * 1024];
    for (size_t i = 0; i < sizeof deep; i += 512)
        deep[i] = 1;
}

static int exit_outside_child(void *arg)
{
    (void)arg;
    if (t_valgrind())
        touch_stack();
    goro_exit(3);
}

START_TEST(exit_outside_coroutine_aborts)
{
    char out[4096];
    int st = t_run_child(exit_outside_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(st != -1, "child could not run or hung");
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
                  "status %#x, output: %s", st, out);
    ck_assert_msg(strstr(out, "goro_exit") != NULL, "output: %s", out);
}
END_TEST

/* ---- threads the runtime does not own ---- */

struct foreign {
    pthread_t thread;
    long n, base, ok;
    goro_t *handoff;           /* spawned by main, joined by this thread */
    long handoff_result;
};

static long times3(long x) { return 3 * x; }

static void *foreign_main(void *arg)
{
    struct foreign *f = arg;
    if (goro_self() != NULL)
        t_fail("goro_self() is not NULL on a foreign thread");
    for (long i = 0; i < f->n; i++) {
        long v = f->base + i;
        goro_t *h = go(times3, v);
        if (!h) {
            t_fail("go from a foreign thread: %s", strerror(errno));
            break;
        }
        long r = 0;
        int e = goro_join(h, &r);
        if (e != 0 || r != 3 * v) {
            t_fail("foreign join: %d, result %ld, want %ld", e, r, 3 * v);
            break;
        }
        f->ok++;
    }
    if (goro_join(f->handoff, &f->handoff_result) != 0)
        t_fail("foreign thread could not join the main thread's coroutine");
    return NULL;
}

static goro_t *foreign_spawned;
static void *foreign_spawn_only(void *arg)
{
    foreign_spawned = go(times3, (long)(intptr_t)arg);
    return NULL;
}

START_TEST(spawn_and_join_from_foreign_threads)
{
    enum { T = 4 };
    struct foreign f[T];
    long n = t_scale(3000);
    for (int i = 0; i < T; i++) {
        f[i] = (struct foreign){ .n = n, .base = 1000000L * i };
        f[i].handoff = go(slow_worker, 200L);
        ck_assert_ptr_nonnull(f[i].handoff);
    }
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(pthread_create(&f[i].thread, NULL, foreign_main, &f[i]), 0);
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(pthread_join(f[i].thread, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    for (int i = 0; i < T; i++) {
        ck_assert_int_eq(f[i].ok, n);
        ck_assert_int_eq(f[i].handoff_result, 200L * 199 / 2);
    }
    /* spawned on a thread that has exited since, joined by main */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, foreign_spawn_only, (void *)(intptr_t)14), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_ptr_nonnull(foreign_spawned);
    long r = 0;
    ck_assert_int_eq(goro_join(foreign_spawned, &r), 0);
    ck_assert_int_eq(r, 42);
}
END_TEST

/* ---- shutdown against spawns from other threads ---- */

static atomic_int shut_stop;
static atomic_long shut_ran, shut_refused, shut_spawned;

static void shut_child(void)
{
    atomic_fetch_add(&shut_ran, 1);
}

static long shut_child_plain(void *arg)
{
    (void)arg;
    shut_child();
    return 0;
}

/* A thread the runtime does not own spawns while main shuts down. Detached
 * from birth: a handle it still held could be released by the shutdown. */
static void *shut_spawner(void *arg)
{
    (void)arg;
    while (!atomic_load(&shut_stop)) {
        int e = goro_spawn(NULL, NULL, shut_child_plain, NULL);
        if (e == 0) {
            atomic_fetch_add(&shut_spawned, 1);
        } else if (e == -ESHUTDOWN) {
            atomic_fetch_add(&shut_refused, 1);
        } else if (e != -EALREADY) {
            printf("goro_spawn: %s\n", strerror(-e));
            return (void *)1;
        }
    }
    return NULL;
}

/* Every coroutine that was spawned ran (none was left in a freed queue),
 * the rest were refused with -ESHUTDOWN, and the runtime starts again.
 * Before the gate, the next start crashed in the scheduler. */
static int shutdown_spawn_child(void *arg)
{
    (void)arg;
    pthread_t t;
    if (pthread_create(&t, NULL, shut_spawner, NULL) != 0)
        return 90;
    for (long round = 0, rounds = t_scale(200); round < rounds; round++) {
        while (goro_workers() == 0)     /* the spawner starts it lazily */
            sched_yield();
        t_nap(0.0002);
        int e = goro_shutdown();
        if (e != 0 && e != -ENOTCONN) {
            printf("round %ld: shutdown %d\n", round, e);
            return 91;
        }
    }
    atomic_store(&shut_stop, 1);
    void *res;
    pthread_join(t, &res);
    if (res)
        return 92;
    if (goro_workers() > 0 && goro_shutdown() != 0)
        return 93;
    long spawned = atomic_load(&shut_spawned), ran = atomic_load(&shut_ran);
    printf("spawned %ld, ran %ld, refused %ld\n", spawned, ran, atomic_load(&shut_refused));
    return spawned == ran && atomic_load(&shut_refused) > 0 ? 0 : 94;
}

START_TEST(spawn_from_thread_during_shutdown)
{
    char out[512];
    int st = t_run_child(shutdown_spawn_child, NULL, t_timeout(60), out, sizeof out);
    printf("%s", out);
    ck_assert_msg(st != -1, "the child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
}
END_TEST

static long shut_blocked(goro_chan_t *ch)
{
    long v;
    return goro_chan_recv(ch, &v);
}

/* A coroutine that never ends: the deadline form gives up and leaves the
 * runtime running; once the coroutine ends, shutdown succeeds. */
START_TEST(shutdown_until_gives_up_and_keeps_running)
{
    if (goro_workers() == 0)
        ck_assert_int_eq(goro_start(NULL), 0);
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    goro_t *h = go(shut_blocked, ch);
    ck_assert_ptr_nonnull(h);
    int64_t t0 = goro_now();
    ck_assert_int_eq(goro_shutdown_until(t0 + 100 * GORO_MSEC), -ETIMEDOUT);
    ck_assert_msg(goro_now() - t0 >= 100 * GORO_MSEC, "gave up early");
    ck_assert_int_gt(goro_workers(), 0);
    goro_t *more = go(shut_child);      /* spawns are accepted again */
    ck_assert_ptr_nonnull(more);
    ck_assert_int_eq(goro_join(more, NULL), 0);
    long v = 1;
    ck_assert_int_eq(goro_chan_send(ch, &v), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 1);
    ck_assert_int_eq(goro_chan_free(ch), 0);
    ck_assert_int_eq(goro_shutdown_until(goro_now() + GORO_SEC), 0);
    ck_assert_int_eq(goro_workers(), 0);
}
END_TEST

Suite *spawn_suite(void)
{
    Suite *s = suite_create("spawn");
    TCase *tc = t_runtime_tcase(s, "spawn", 60);
    tcase_add_test(tc, spawn_join_100k_from_main);
    tcase_add_test(tc, spawn_join_100k_from_coroutine);
    tcase_add_test(tc, detached_100k_complete);
    tcase_add_test(tc, detached_from_coroutines_complete);
    tcase_add_test(tc, join_waits_for_running);
    tcase_add_test(tc, detach_racing_exit_never_refused);
    tcase_add_test(tc, spawn_and_join_from_foreign_threads);

    tc = t_runtime_tcase(s, "identity", 30);
    tcase_add_test(tc, self_is_null_outside);
    tcase_add_test(tc, self_is_the_handle);
    tcase_add_test(tc, ids_increase_from_main);
    tcase_add_test(tc, ids_unique_from_one_migrating_spawner);
    tcase_add_test(tc, ids_unique_across_spawners);
    tcase_add_test(tc, names_from_attr_and_set_name);
    tcase_add_test(tc, exit_from_nested_function);

    tc = t_tcase(s, "exit-outside", 30);  /* forks its own child */
    tcase_add_test(tc, exit_outside_coroutine_aborts);

    tc = t_tcase(s, "shutdown", 90);
    tcase_add_test(tc, spawn_from_thread_during_shutdown);
    tcase_add_test(tc, shutdown_until_gives_up_and_keeps_running);
    return s;
}
