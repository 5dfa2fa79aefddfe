/* goro_start / goro_shutdown: settings, waiting for every coroutine,
 * releasing unjoined handles, starting again. These tests stop the runtime
 * of their process; the next test's fixture starts it again. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

static long twice(long x) { return 2 * x; }

static atomic_long finished;

static void count_when_done(long yields)
{
    for (long i = 0; i < yields; i++)
        goro_yield();
    atomic_fetch_add(&finished, 1);
}

static void stop_if_running(void)
{
    if (goro_workers() > 0)
        ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(goro_workers(), 0);
}

START_TEST(start_settings)
{
    stop_if_running();
    ck_assert_int_eq(goro_shutdown(), -ENOTCONN);
    /* bad settings start nothing */
    goro_config_t bad[] = {
        { .workers = -1 }, { .workers = 100000 },
        { .stack_size = 1 }, { .stack_size = (size_t)1 << 40 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(goro_start(&bad[i]), -EINVAL);
        ck_assert_int_eq(goro_workers(), 0);
    }
    goro_config_t cfg = { .workers = 3 };
    ck_assert_int_eq(goro_start(&cfg), 0);
    ck_assert_int_eq(goro_workers(), 3);
    ck_assert_int_eq(goro_start(&cfg), -EALREADY);
    ck_assert_int_eq(goro_start(NULL), -EALREADY);
    ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(goro_workers(), 0);

    /* GORO_WORKERS is read by a start without a worker count */
    ck_assert_int_eq(setenv("GORO_WORKERS", "3", 1), 0);
    int e = goro_start(NULL);
    unsetenv("GORO_WORKERS");
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(goro_workers(), 3);
    ck_assert_int_eq(goro_shutdown(), 0);

    /* the first go() starts the runtime implicitly */
    goro_t *h = go(twice, 21L);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_gt(goro_workers(), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 42);
    ck_assert_int_eq(goro_shutdown(), 0);
}
END_TEST

START_TEST(shutdown_waits_releases_and_restarts)
{
    stop_if_running();
    goro_config_t cfg = { .workers = 3 };

    /* a first cycle warms what outlives a shutdown by design (thread stack
     * cache, malloc arenas of the workers) */
    ck_assert_int_eq(goro_start(&cfg), 0);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(goro_join(go(count_when_done, 10L), NULL), 0);
    ck_assert_int_eq(goro_shutdown(), 0);
    long maps0 = t_maps_count();
    ck_assert_int_gt(maps0, 0);

    ck_assert_int_eq(goro_start(&cfg), 0);
    long n = t_scale(300);
    long yields = t_scale(2000);
    atomic_store(&finished, 0);
    goro_attr_t big = { .stack_size = 1024 * 1024 };
    for (long i = 0; i < n; i++) {
        /* never joined: default-size and big stacks, and detached ones */
        ck_assert_int_eq(goro_go(NULL, NULL, count_when_done, 0L), 0);
        goro_t *h = NULL;
        ck_assert_int_eq(goro_go(&h, i % 4 ? NULL : &big, count_when_done, 0L), 0);
    }
    /* still running when shutdown is called */
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(goro_go(NULL, NULL, count_when_done, yields), 0);
    long maps_mid = t_maps_count();
    ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(atomic_load(&finished), 2 * n + 8);   /* it waited */
    ck_assert_int_eq(goro_workers(), 0);
    long maps1 = t_maps_count();
    /* what may stay: sanitizer allocator regions and fake stacks */
    const long slack = t_sanitized() ? 64 : 8;
#ifdef T_TSAN
    /* TSan remaps its shadow on every munmap, which splits its mappings */
    maps1 = maps0;
    maps_mid = maps0 + n + 1;
#endif
    ck_assert_msg(maps_mid > maps0 + n, "the unjoined coroutines held no mappings? "
                  "%ld before, %ld while running", maps0, maps_mid);
    ck_assert_msg(maps1 <= maps0 + slack, "%ld mappings after shutdown, %ld before the "
                  "cycle (%ld while running)", maps1, maps0, maps_mid);

    /* and again */
    ck_assert_int_eq(goro_start(&cfg), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(go(twice, 4L), &r), 0);
    ck_assert_int_eq(r, 8);
    ck_assert_int_eq(goro_shutdown(), 0);
#ifndef T_TSAN
    ck_assert_int_le(t_maps_count(), maps0 + slack);
#endif
}
END_TEST

/* ---- too few descriptors ----
 * Each worker's event base needs descriptors (epoll, timerfd, libevent's
 * signal pipe, its wake-up eventfd). libevent exits the process when the
 * signal pipe cannot be made, and goro said -ENOMEM when base creation
 * failed for want of descriptors. */

/* In a child process: ck_assert is not for there. Notes the first failed
 * line, prints every failure, goes on (a later step may kill the child,
 * and the output should say what came before). */
static int child_failed;
#define CHILD_CHECK(cond, ...) do {                                         \
        if (!(cond)) {                                                      \
            printf("line %d: ", __LINE__);                                  \
            printf(__VA_ARGS__);                                            \
            printf("\n");                                                   \
            if (!child_failed)                                              \
                child_failed = __LINE__;                                    \
        }                                                                   \
    } while (0)

static long dir_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

enum { FILL_MAX = 1024 };
static int filler[FILL_MAX];
static int nfiller;

/* Takes every free descriptor below the limit. */
static void fill_descriptors(void)
{
    int fd;
    while (nfiller < FILL_MAX && (fd = dup(2)) >= 0)
        filler[nfiller++] = fd;
}

static void free_descriptors(int n)
{
    while (n-- > 0 && nfiller > 0)
        close(filler[--nfiller]);
}

/* How many descriptors could be opened now (left free again). */
static int free_count(void)
{
    int before = nfiller;
    fill_descriptors();
    int n = nfiller - before;
    free_descriptors(n);
    return n;
}

/* goro_start with `spare` descriptors free: -EMFILE, and they are free
 * again afterwards. */
static void start_with_spare(int workers, int spare)
{
    free_descriptors(spare);
    goro_config_t cfg = { .workers = workers };
    int err = goro_start(&cfg);
    CHILD_CHECK(err == -EMFILE, "%d workers, %d descriptors free: goro_start %d (%s), "
                "want -EMFILE", workers, spare, err, strerror(-err));
    CHILD_CHECK(goro_workers() == 0, "%d workers after a failed start", goro_workers());
    int left = free_count();
    CHILD_CHECK(left == spare, "%d descriptors free after the failed start, %d before",
                left, spare);
    fill_descriptors();
}

static long twice_of(long x) { return 2 * x; }

static int start_short_of_descriptors(void *arg)
{
    (void)arg;
    long fds0 = t_fd_count(), threads0 = dir_entries("/proc/self/task");
    struct rlimit rl;
    CHILD_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
    rl.rlim_cur = rl.rlim_max < 256 ? rl.rlim_max : 256;
    CHILD_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
    fill_descriptors();
    CHILD_CHECK(nfiller > 20 && dup(2) < 0 && errno == EMFILE, "could not fill the table");
    /* short before the first base, and in each of its steps */
    for (int spare = 0; spare < 5; spare++)
        start_with_spare(1, spare);
    /* the first two bases made, the third one short: both are undone */
    start_with_spare(3, 12);
    /* the lazy start of the first go() */
    free_descriptors(3);
    t_set_errno(0);
    goro_t *h = go(twice_of, 1L);
    CHILD_CHECK(h == NULL && t_errno() == EMFILE, "go() short of descriptors: %p, errno %d",
                (void *)h, t_errno());
    fill_descriptors();

    free_descriptors(nfiller);
    CHILD_CHECK(t_fd_count() == fds0, "%ld descriptors open, %ld at first", t_fd_count(), fds0);
    CHILD_CHECK(dir_entries("/proc/self/task") == threads0, "%ld threads, %ld at first",
                dir_entries("/proc/self/task"), threads0);
    goro_config_t cfg = { .workers = 3 };
    int err = goro_start(&cfg);
    CHILD_CHECK(err == 0, "goro_start with descriptors free again: %d", err);
    long r = 0;
    h = go(twice_of, 21L);
    CHILD_CHECK(h && goro_join(h, &r) == 0 && r == 42, "a coroutine after the start: %ld", r);
    CHILD_CHECK(goro_shutdown() == 0, "goro_shutdown");
    CHILD_CHECK(t_fd_count() == fds0, "%ld descriptors open after shutdown, %ld at first",
                t_fd_count(), fds0);
    return child_failed;
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

START_TEST(start_short_of_descriptors_fails_cleanly)
{
    stop_if_running();
    char out[8192];
    int st = t_run_child(start_short_of_descriptors, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "child status %#x (exit %d): %s", st, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                  out);
    /* one line per failed start, naming the cause, the worker and the fix */
    const char *line = "goro: cannot start: out of file descriptors (EMFILE) creating "
                       "the event base of worker ";
    ck_assert_msg(count_of(out, line) == 7, "want 7 lines of \"%s\": %s", line, out);
    ck_assert_msg(strstr(out, "worker 2; raise RLIMIT_NOFILE (ulimit -n) or close descriptors"),
                  "no line for worker 2: %s", out);
    ck_assert_msg(!strstr(out, "libevent"), "libevent spoke: %s", out);
}
END_TEST

Suite *lifecycle_suite(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = t_tcase(s, "lifecycle", 30);
    tcase_add_test(tc, start_settings);
    tcase_add_test(tc, shutdown_waits_releases_and_restarts);
    tc = t_tcase(s, "descriptors", 30);
    tcase_add_test(tc, start_short_of_descriptors_fails_cleanly);
    return s;
}
