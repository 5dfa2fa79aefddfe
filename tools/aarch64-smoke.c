/*
 * aarch64 cross-toolchain smoke test for goro.
 *
 * Proves that a -static aarch64 binary linked against the sysroot built by
 * tools/aarch64-sysroot.sh can, under qemu-user:
 *   - run a Check suite (fork mode by default, CK_FORK=no also works),
 *   - create pthreads,
 *   - unwind its own stack with libunwind (local unwinding + proc names),
 *   - run a libevent base with pthread locking enabled and a 10ms timer.
 *
 * Build/run: see tools/aarch64-flags.txt.
 */
#define _GNU_SOURCE
#include <check.h>
#include <event2/event.h>
#include <event2/thread.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* ---- pthreads ---------------------------------------------------------- */

static void *thread_fn(void *arg)
{
    int *v = arg;
    *v = *v * 2 + 1;
    return arg;
}

START_TEST(test_pthreads)
{
    pthread_t t[2];
    int v[2] = {10, 20};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, thread_fn, &v[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *ret = NULL;
        ck_assert_int_eq(pthread_join(t[i], &ret), 0);
        ck_assert_ptr_eq(ret, &v[i]);
    }
    ck_assert_int_eq(v[0], 21);
    ck_assert_int_eq(v[1], 41);
}
END_TEST

/* ---- libunwind --------------------------------------------------------- */

static int __attribute__((noinline)) walk_stack(int *found_self)
{
    unw_context_t ctx;
    unw_cursor_t cur;
    int frames = 0;

    if (unw_getcontext(&ctx) != 0 || unw_init_local(&cur, &ctx) != 0)
        return -1;
    do {
        char name[256];
        unw_word_t off = 0, ip = 0;
        unw_get_reg(&cur, UNW_REG_IP, &ip);
        if (unw_get_proc_name(&cur, name, sizeof name, &off) != 0)
            strcpy(name, "??");
        printf("  #%d 0x%lx %s+0x%lx\n", frames, (unsigned long)ip, name,
               (unsigned long)off);
        /* gcc may clone walk_stack as walk_stack.constprop.0 */
        if (strncmp(name, "walk_stack", 10) == 0 ||
            strncmp(name, "test_unwind_fn", 14) == 0)
            (*found_self)++;
        frames++;
    } while (unw_step(&cur) > 0 && frames < 64);
    fflush(stdout);
    return frames;
}

START_TEST(test_unwind)
{
    int found = 0;
    int frames = walk_stack(&found);
    ck_assert_int_ge(frames, 3);
    ck_assert_int_ge(found, 2); /* walk_stack + test_unwind_fn */

    void *buf[32];
    int n = unw_backtrace(buf, 32);
    ck_assert_int_ge(n, 2);
}
END_TEST

/* ---- libevent ---------------------------------------------------------- */

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(int *)arg += 1;
}

START_TEST(test_libevent)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    struct event_base *base = event_base_new();
    ck_assert_ptr_nonnull(base);
    int fired = 0;
    struct event *ev = evtimer_new(base, on_timer, &fired);
    ck_assert_ptr_nonnull(ev);
    struct timeval tv = {0, 10 * 1000}, t0, t1;
    gettimeofday(&t0, NULL);
    ck_assert_int_eq(evtimer_add(ev, &tv), 0);
    /* 1 = "loop exited because no events are left" (timer was one-shot) */
    ck_assert_int_ne(event_base_dispatch(base), -1);
    gettimeofday(&t1, NULL);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_usec - t0.tv_usec) / 1000;
    printf("  libevent backend=%s timer fired=%d after %ldms\n",
           event_base_get_method(base), fired, ms);
    fflush(stdout);
    ck_assert_int_eq(fired, 1);
    ck_assert_int_ge(ms, 9);
    event_free(ev);
    event_base_free(base);
}
END_TEST

/* ---- fork-mode only: a test that is expected to exit(3) ---------------- */

START_TEST(test_exit_in_child)
{
    exit(3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("aarch64-smoke");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30); /* qemu is slow; default is 4s */
    tcase_add_test(tc, test_pthreads);
    tcase_add_test(tc, test_unwind);
    tcase_add_test(tc, test_libevent);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    int forking = srunner_fork_status(sr) == CK_FORK;
    printf("Check fork mode: %s\n", forking ? "CK_FORK" : "CK_NOFORK");
    if (forking) /* exit tests are only meaningful with a forked child */
        tcase_add_exit_test(tc, test_exit_in_child, 3);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
