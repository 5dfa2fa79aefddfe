/* goro_start / goro_shutdown: settings, waiting for every coroutine,
 * releasing unjoined handles, starting again. These tests stop the runtime
 * of their process; the next test's fixture starts it again. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
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


START_TEST(start_settings)
{
    t_stop();
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
    t_stop();
    goro_config_t cfg = { .workers = 3 };

    /* a first cycle warms what outlives a shutdown by design (thread stack
     * cache, malloc arenas of the workers) */
    ck_assert_int_eq(goro_start(&cfg), 0);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(goro_join(go(count_when_done, 10L), NULL), 0);
    ck_assert_int_eq(goro_shutdown(), 0);
    long maps0 = t_maps_count();
    long vm0 = t_read_long_file("/proc/self/statm");  /* VmSize, pages */
    ck_assert_int_gt(maps0, 0);
    ck_assert_int_gt(vm0, 0);

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
    long vm_mid = t_read_long_file("/proc/self/statm");
    ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(atomic_load(&finished), 2 * n + 8);   /* it waited */
    ck_assert_int_eq(goro_workers(), 0);
    long maps1 = t_maps_count();
    /* what may stay: sanitizer allocator regions and fake stacks */
    const long slack = t_sanitized() ? 64 : 8;
#ifdef T_TSAN
    /* TSan remaps its shadow on every munmap, which splits its mappings */
    maps1 = maps0;
#endif
    /* Their stacks held address space (mappings too, but stacks may share
     * arenas): at least 2n of 256 KiB. */
    long page_kib = sysconf(_SC_PAGESIZE) / 1024;
    ck_assert_msg((vm_mid - vm0) * page_kib >= 2 * n * 256, "the unjoined coroutines held "
                  "no stacks? VmSize %ld KiB before, %ld KiB while running", vm0 * page_kib,
                  vm_mid * page_kib);
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

/* ---- handles released by other threads while goro_shutdown runs ----
 * A thread the runtime does not own detaches (or joins) handles while the
 * main thread shuts the runtime down; then a new runtime spawns. A detach
 * of an ended coroutine gives its stack back to the pool; one that landed
 * after the shutdown had emptied the pool left there a stack the shutdown
 * then unmapped, and the next runtime's first spawn crashed on it. Each
 * round starts the releasers at a random point of the shutdown (up to 1.5
 * times as long as the last ones took), so that rounds sweep its phases:
 * waiting, stopping the workers, unmapping the stacks, after it. Every
 * detach must return 0 (h is released by the detach or with the rest), a
 * join its coroutine's result or -ESHUTDOWN (the shutdown released h), and
 * the next runtime must run. In a child process: the old failure was a
 * crash. */

enum { SR_HANDLES = 128, SR_THREADS = 2 };

static struct {
    goro_t *h[SR_HANDLES];
    long want[SR_HANDLES];          /* each one's result */
    int n;
    bool join;                      /* the releasers join (else detach) */
    atomic_int go;                  /* the releasers may start */
    atomic_long ended;              /* coroutines that have returned */
    atomic_long shut_out;           /* joins answered -ESHUTDOWN */
} sr;

struct sr_releaser {
    pthread_t thread;
    int idx;
    double delay;                   /* seconds after go */
    char bad[160];                  /* the first unexpected result */
};

static long sr_work(long yields)
{
    for (long i = 0; i < yields; i++)
        goro_yield();
    atomic_fetch_add(&sr.ended, 1);
    return yields + 1;
}

static void *sr_release(void *arg)
{
    struct sr_releaser *t = arg;
    while (!atomic_load(&sr.go))
        ;
    double until = t_now() + t->delay;
    while (t_now() < until)
        ;
    for (int i = t->idx; i < sr.n; i += SR_THREADS) {
        if (!sr.join) {
            int e = goro_detach(sr.h[i]);
            if (e && !t->bad[0])
                snprintf(t->bad, sizeof t->bad, "goro_detach of handle %d: %d", i, e);
            continue;
        }
        long res = -1;
        int e = goro_join(sr.h[i], &res);
        if (e == -ESHUTDOWN)
            atomic_fetch_add(&sr.shut_out, 1);
        else if ((e || res != sr.want[i]) && !t->bad[0])
            snprintf(t->bad, sizeof t->bad, "goro_join of handle %d: %d, result %ld (want %ld)",
                     i, e, res, sr.want[i]);
    }
    return NULL;
}

/* One round; stress: some coroutines still run when the shutdown starts,
 * and the releasers join every other round. Returns 0 or prints why not. */
static int sr_round(long round, bool stress, double *took, uint32_t *rnd)
{
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0) {
        printf("round %ld: goro_start failed\n", round);
        return 1;
    }
    int most = (int)t_live(SR_HANDLES);     /* TSan: a tenth (each is a fiber) */
    sr.n = stress ? 1 + (int)(t_rnd(rnd) % most) : most;
    sr.join = stress && round % 2;
    atomic_store(&sr.go, 0);
    atomic_store(&sr.ended, 0);
    for (int i = 0; i < sr.n; i++) {
        long yields = stress && t_rnd(rnd) % 4 == 0 ? t_rnd(rnd) % 200 : 0;
        sr.want[i] = yields + 1;
        sr.h[i] = go(sr_work, yields);
        if (!sr.h[i]) {
            printf("round %ld: go() failed: %d\n", round, errno);
            return 1;
        }
    }
    /* The plain round detaches ended coroutines: their stacks go to the pool. */
    while (!stress && atomic_load(&sr.ended) < sr.n)
        sched_yield();
    struct sr_releaser rel[SR_THREADS];
    for (int i = 0; i < SR_THREADS; i++) {
        rel[i] = (struct sr_releaser){ .idx = i, .delay = *took * 1.5 * (t_rnd(rnd) % 1000) / 1000 };
        if (pthread_create(&rel[i].thread, NULL, sr_release, &rel[i]) != 0) {
            printf("round %ld: pthread_create failed\n", round);
            return 1;
        }
    }
    double t0 = t_now();
    atomic_store(&sr.go, 1);
    int e = goro_shutdown();
    *took = t_now() - t0;
    for (int i = 0; i < SR_THREADS; i++)
        pthread_join(rel[i].thread, NULL);
    if (e) {
        printf("round %ld: goro_shutdown: %d\n", round, e);
        return 1;
    }
    for (int i = 0; i < SR_THREADS; i++)
        if (rel[i].bad[0]) {
            printf("round %ld: %s\n", round, rel[i].bad);
            return 1;
        }
    /* The next runtime's first spawns take pooled stacks, if any are left. */
    for (long x = 0; x < 4; x++) {
        long r = 0;
        goro_t *h = go(twice, x);
        if (!h || goro_join(h, &r) != 0 || r != 2 * x) {
            printf("round %ld: a coroutine of the next runtime: %ld\n", round, r);
            return 1;
        }
    }
    if ((e = goro_shutdown()) != 0) {
        printf("round %ld: the second goro_shutdown: %d\n", round, e);
        return 1;
    }
    return 0;
}

/* arg: the stress, which runs GORO_TEST_SHUTDOWN_MS (default 2000; a
 * quarter when slow), else 300 plain rounds or 3 s, whichever ends first. */
static int sr_child(void *arg)
{
    bool stress = arg != NULL;
    const char *ms_env = getenv("GORO_TEST_SHUTDOWN_MS");
    double secs = stress ? (ms_env ? atof(ms_env) / 1000 : 2) : 3;
    double end = t_now() + (t_slow() ? secs / 4 : secs);
    long rounds = stress ? LONG_MAX : t_scale(300);
    double took = 0.001;
    uint32_t rnd = 12345;
    long done = 0;
    atomic_store(&sr.shut_out, 0);
    for (; done < rounds && t_now() < end; done++)
        if (sr_round(done, stress, &took, &rnd) != 0)
            return 1;
    if (stress)
        printf("%ld rounds, %ld joins refused by the shutdown\n", done, atomic_load(&sr.shut_out));
    else
        printf("%ld rounds of detaches racing the shutdown\n", done);
    return 0;
}

static void sr_run(bool stress)
{
    const char *ms_env = getenv("GORO_TEST_SHUTDOWN_MS");
    double secs = (stress && ms_env ? atof(ms_env) / 1000 : 3) + 30;
    static char out[4096];
    int st = t_run_child(sr_child, stress ? (void *)1 : NULL, t_timeout(secs), out, sizeof out);
    printf("%s", out);
    ck_assert_msg(st != -1, "the child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x%s: %s", st,
                  WIFSIGNALED(st) ? " (killed by a signal)" : "", out);
}

START_TEST(detach_while_shutting_down)
{
    sr_run(false);
}
END_TEST

START_TEST(release_shutdown_race)
{
    sr_run(true);
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

/* goro_start from a coroutine while goro_shutdown waits for it: the
 * runtime is running, so -EALREADY at once - and goro_pipeline_new, which
 * starts the runtime through goro_start, succeeds. The coroutine calls
 * them once the spawn gate is shut (a thread's go() fails with
 * -ESHUTDOWN): goro_shutdown is then waiting for it. */
static atomic_int sd_shut;
static atomic_int sd_start, sd_pipe;

static long sd_caller(void)
{
    while (!atomic_load(&sd_shut))
        goro_sleep(GORO_MSEC);
    atomic_store(&sd_start, goro_start(NULL));
    goro_pipeline_t *p = NULL;
    int err = goro_pipeline_new(&p, NULL);
    atomic_store(&sd_pipe, err);
    if (err == 0)
        goro_pipeline_free(p);
    return 0;
}

static long sd_nothing(void) { return 0; }

static void *sd_watch(void *arg)
{
    (void)arg;
    for (;;) {
        goro_t *h = go(sd_nothing);
        if (!h)
            break;                  /* ESHUTDOWN: the shutdown is waiting */
        goro_join(h, NULL);
    }
    atomic_store(&sd_shut, 1);
    return NULL;
}

START_TEST(start_while_shutting_down)
{
    ck_assert_int_eq(goro_start(&(goro_config_t){ .workers = 2 }), 0);
    atomic_store(&sd_shut, 0);
    atomic_store(&sd_start, 1);
    atomic_store(&sd_pipe, 1);
    ck_assert_int_eq(goro_detach(go(sd_caller)), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, sd_watch, NULL), 0);
    int err = goro_shutdown_until(goro_now() + (int64_t)(t_timeout(5) * GORO_SEC));
    pthread_join(t, NULL);
    if (err) {                      /* let what held it up end first */
        while (atomic_load(&sd_pipe) == 1)
            usleep(1000);
        goro_shutdown();
    }
    ck_assert_msg(err == 0, "goro_shutdown: %d (a goro_start it waited for held it up)", err);
    ck_assert_int_eq(atomic_load(&sd_start), -EALREADY);
    ck_assert_int_eq(atomic_load(&sd_pipe), 0);
}
END_TEST

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
    t_stop();
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

/* ---- fork ----
 * A child of a process whose runtime runs has one thread and a copy of the
 * runtime's state, shared kernel objects included (the epoll instances).
 * It used to get handles that never ran, and a goro_shutdown that never
 * returned. Now every goro call that would wait fails at once with
 * -ENOTRECOVERABLE, and calls that do not wait leave the parent alone. */

extern char **environ;

static struct {
    int notes[2];                   /* the child's stderr */
    int sock[2];                    /* the parent's reader waits on sock[0] */
    atomic_int reader_in;
} fk;

static long fork_reader(void)
{
    char c = 0;
    atomic_store(&fk.reader_in, 1);
    ssize_t n = goro_read(fk.sock[0], &c, 1);
    return n == 1 ? c : n;
}

static long nothing(void *arg) { return (long)arg; }

static bool child_expect(bool ok, const char *call, long got)
{
    if (!ok)
        dprintf(2, "child: %s gave %ld\n", call, got);
    return ok;
}

/* The child of a coroutine. SIGALRM ends a call that hangs. */
static __attribute__((noreturn)) void forked_child(void)
{
    signal(SIGALRM, SIG_DFL);
    alarm((unsigned)t_timeout(5));
    dup2(fk.notes[1], 2);
    const int refused = -ENOTRECOVERABLE;
    bool ok = true;
    /* closing an inherited descriptor leaves the parent's registration */
    ok &= child_expect(goro_close(fk.sock[0]) == 0, "goro_close", 0);
    t_set_errno(0);
    goro_t *h = go(nothing, (void *)1);
    ok &= child_expect(!h && t_errno() == -refused, "go() (errno)", h ? 0 : t_errno());
    int r = goro_spawn(&h, NULL, nothing, NULL);
    ok &= child_expect(r == refused, "goro_spawn", r);
    r = goro_start(NULL);
    ok &= child_expect(r == refused, "goro_start", r);
    r = goro_shutdown();
    ok &= child_expect(r == refused, "goro_shutdown", r);
    int p[2];
    ok &= child_expect(pipe2(p, O_CLOEXEC) == 0, "pipe2", 0);
    char c;
    ssize_t n = goro_read(p[0], &c, 1);     /* I/O may wait: refused */
    ok &= child_expect(n == refused, "goro_read", n);
    r = goro_sleep(GORO_MSEC);
    ok &= child_expect(r == refused, "goro_sleep", r);
    _exit(ok ? 0 : 1);
}

static long fork_from_coroutine(void)
{
    pid_t pid = fork();
    if (pid == 0)
        forked_child();
    return pid;
}

/* A child that only execs: unaffected. */
static long fork_exec_true(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = { "true", NULL };
        execve("/bin/true", argv, environ);
        _exit(127);
    }
    return pid;
}

static long spawn_true(void)
{
    pid_t pid;
    char *argv[] = { "true", NULL };
    int err = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);
    return err ? -err : pid;
}

/* Runs fn in a coroutine and waits (on this thread) for the child it made. */
static int child_status(long (*fn)(void))
{
    long pid = 0;
    goro_t *h = go(fn);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, &pid), 0);
    ck_assert_msg(pid > 0, "no child: %ld", pid);
    int st;
    while (waitpid((pid_t)pid, &st, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    return st;
}

static long sleep_and_add(long x)
{
    goro_sleep(GORO_MSEC);
    return x + 1;
}

static int fresh_start_child(void *arg)
{
    (void)arg;
    long r = 0;
    goro_t *h = go(sleep_and_add, 41L);
    return h && goro_join(h, &r) == 0 && r == 42 && goro_shutdown() == 0 ? 0 : 1;
}

START_TEST(fork_child_is_refused)
{
    ck_assert_int_eq(pipe2(fk.notes, O_CLOEXEC), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fk.sock), 0);
    atomic_store(&fk.reader_in, 0);
    goro_t *reader = go(fork_reader);
    ck_assert_ptr_nonnull(reader);
    ck_assert(t_wait_flag(&fk.reader_in, t_timeout(10)));
    t_settle();                     /* parked, its descriptor registered */

    int st = child_status(fork_from_coroutine);
    ck_assert_int_eq(close(fk.notes[1]), 0);
    char notes[2048];
    ssize_t len = read(fk.notes[0], notes, sizeof notes - 1);
    notes[len > 0 ? len : 0] = 0;
    ck_assert_int_eq(close(fk.notes[0]), 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x%s: %s", st,
                  WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (hung)" : "", notes);
    const char *line = "goro: the runtime does not survive fork(); in the child, call only "
                       "exec*() or _exit() (or goro calls that do not wait)\n";
    ck_assert_msg(strcmp(notes, line) == 0, "the child said: %s", notes);

    /* exec-only children */
    st = child_status(fork_exec_true);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork+exec child status %#x", st);
    st = child_status(spawn_true);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "posix_spawn child status %#x", st);

    /* the parent goes on: its reader still wakes, coroutines run */
    ck_assert_int_eq(write(fk.sock[1], "k", 1), 1);
    long r = 0;
    int err = goro_join_until(reader, &r, goro_now() + (int64_t)(t_timeout(5) * GORO_SEC));
    ck_assert_msg(err == 0, "the parent's reader did not wake: %d", err);
    ck_assert_int_eq(r, 'k');
    for (long i = 0; i < 50; i++) {
        goro_t *h = go(sleep_and_add, i);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(goro_join(h, &r), 0);
        ck_assert_int_eq(r, i + 1);
    }
    ck_assert_int_eq(goro_close(fk.sock[0]), 0);
    ck_assert_int_eq(close(fk.sock[1]), 0);

    /* a child of a process whose runtime is shut down may start its own */
    char out[1024];
    st = t_run_child(fresh_start_child, NULL, t_timeout(10), out, sizeof out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fresh start in a child: %#x %s",
                  st, out);
}
END_TEST

Suite *lifecycle_suite(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = t_tcase(s, "lifecycle", 30);
    tcase_add_test(tc, start_settings);
    tcase_add_test(tc, shutdown_waits_releases_and_restarts);
    tc = t_tcase(s, "shutdown_race", 60);
    tcase_add_test(tc, detach_while_shutting_down);
    tc = t_tcase(s, "start_during_shutdown", 30);
    tcase_add_test(tc, start_while_shutting_down);
    tc = t_tcase(s, "shutdown_stress", 3600);      /* GORO_TEST_SHUTDOWN_MS: its own bound */
    tcase_add_test(tc, release_shutdown_race);
    tc = t_tcase(s, "descriptors", 30);
    tcase_add_test(tc, start_short_of_descriptors_fails_cleanly);
    tc = t_runtime_tcase(s, "fork", 30);
    tcase_add_test(tc, fork_child_is_refused);
    return s;
}
