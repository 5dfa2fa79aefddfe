/* Child processes (goro/process.h, docs/process.md): exit codes and
 * signals, the deadline that kills, pipes both ways at once, cwd and
 * environment, exec errors, bad input, EMFILE, cancellation of a wait,
 * many spawns from every worker without a leaked descriptor or a zombie,
 * the child's signal mask and dispositions, and the polling fallback
 * (GORO_PROC_NO_PIDFD=1). Coroutines never call ck_assert (helpers.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <goro.h>

#include "helpers.h"
#include "suites.h"

/* ---- helpers ---- */

static int count_fds(void)
{
    return (int)t_fd_count();
}

/* The count, once it is want again (helpers.h: a runtime thread may hold
 * one for a moment; a leak stays). */
static int count_fds_back_to(int want)
{
    return (int)t_fd_count_back_to(want);
}

/* Whether pid is still a process (a zombie included): /proc/<pid>. */
static bool pid_exists(pid_t pid)
{
    char path[32];
    snprintf(path, sizeof path, "/proc/%d", (int)pid);
    struct stat st;
    return stat(path, &st) == 0;
}

/* Spawns argv with attr and waits; returns the status or a negative errno. */
static int run(const char *const *argv, const goro_process_attr_t *attr)
{
    goro_process_t *p;
    int r = goro_process_spawn(&p, argv, attr);
    if (r)
        return r;
    int st = -1;
    r = goro_process_wait(p, &st);
    goro_process_free(p);
    return r ? r : st;
}

static const goro_process_attr_t search = { .path_search = 1 };

static long exit_codes(void)
{
    static const char *const t[] = { "true", NULL }, *const f[] = { "false", NULL },
                             *const s7[] = { "/bin/sh", "-c", "exit 7", NULL };
    int st;
    if ((st = run(t, &search)) != 0 || goro_process_exit_code(st) != 0)
        t_fail("true: %d", st);
    if ((st = run(f, &search)) < 0 || goro_process_exit_code(st) != 1)
        t_fail("false: %d", st);
    if ((st = run(s7, NULL)) < 0 || goro_process_exit_code(st) != 7 ||
        goro_process_signal(st) != 0)
        t_fail("exit 7: %d", st);
    return 0;
}

static long killed_by_sigterm(void)
{
    static const char *const argv[] = { "/bin/sleep", "100", NULL };
    goro_process_t *p;
    int r = goro_process_spawn(&p, argv, NULL), st = -1;
    if (r)
        return t_fail("spawn: %d", r), 0;
    if ((r = goro_process_kill(p, SIGTERM)) != 0)
        t_fail("kill: %d", r);
    if ((r = goro_process_wait(p, &st)) != 0 || goro_process_signal(st) != SIGTERM ||
        goro_process_exit_code(st) != -1)
        t_fail("wait: %d status %#x", r, st);
    if ((r = goro_process_kill(p, SIGTERM)) != -ESRCH)
        t_fail("kill after reaping: %d", r);
    if ((r = goro_process_wait(p, &st)) != 0 || goro_process_signal(st) != SIGTERM)
        t_fail("second wait: %d status %#x", r, st);
    goro_process_free(p);
    return 0;
}

/* A child that ignores SIGTERM and never exits: killed at the deadline,
 * reaped (no /proc entry, not even a zombie's). */
static long killed_at_deadline(void)
{
    static const char *const argv[] = { "/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done",
                                         NULL };
    goro_process_t *p;
    int r = goro_process_spawn(&p, argv, NULL), st = -1;
    if (r)
        return t_fail("spawn: %d", r), 0;
    pid_t pid = goro_process_pid(p);
    int64_t t0 = goro_now();
    if ((r = goro_process_wait_until(p, &st, t0 + 20 * GORO_MSEC)) != -ETIMEDOUT)
        t_fail("wait_until: %d", r);
    if ((r = goro_process_wait_kill_until(p, &st, goro_now() + 50 * GORO_MSEC)) != -ETIMEDOUT)
        t_fail("wait_kill_until: %d", r);
    if (goro_process_signal(st) != SIGKILL)
        t_fail("status %#x, not SIGKILL", st);
    if (pid_exists(pid))
        t_fail("pid %d still in /proc after the reap", (int)pid);
    goro_process_free(p);
    return 0;
}

/* Freeing a running process kills it and reaps it in the background. */
static long free_running(void)
{
    static const char *const argv[] = { "/bin/sleep", "100", NULL };
    goro_process_t *p;
    int r = goro_process_spawn(&p, argv, NULL);
    if (r)
        return t_fail("spawn: %d", r), 0;
    pid_t pid = goro_process_pid(p);
    if ((r = goro_process_free(p)) != 0)
        t_fail("free: %d", r);
    int64_t end = goro_now() + (int64_t)(t_timeout(5) * 1e9);
    while (pid_exists(pid) && goro_now() < end)
        goro_sleep(GORO_MSEC);
    if (pid_exists(pid))
        t_fail("pid %d not reaped after free", (int)pid);
    return 0;
}

static void run_co(long (*fn)(void))
{
    t_fail_reset();
    goro_t *h = go(fn);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
}

START_TEST(process_exit_codes)
{
    run_co(exit_codes);
    /* outside a coroutine too */
    static const char *const s7[] = { "/bin/sh", "-c", "exit 7", NULL };
    ck_assert_int_eq(goro_process_exit_code(run(s7, NULL)), 7);
}
END_TEST

START_TEST(process_killed_by_signal)
{
    run_co(killed_by_sigterm);
}
END_TEST

START_TEST(process_killed_at_deadline)
{
    run_co(killed_at_deadline);
    run_co(free_running);
    /* from a thread the reap is done when free returns */
    static const char *const argv[] = { "/bin/sleep", "100", NULL };
    goro_process_t *p;
    ck_assert_int_eq(goro_process_spawn(&p, argv, NULL), 0);
    pid_t pid = goro_process_pid(p);
    ck_assert_int_eq(goro_process_free(p), 0);
    ck_assert(!pid_exists(pid));
}
END_TEST

/* ---- pipes ---- */

#define MIB (1 << 20)

static long feed(long fd)
{
    char *buf = malloc(MIB);
    for (int i = 0; i < MIB; i++)
        buf[i] = (char)(i * 7 + i / 251);
    ssize_t r = goro_write_all((int)fd, buf, MIB);
    if (r != MIB)
        t_fail("write to cat: %zd", r);
    free(buf);
    return 0;
}

static long drain(long fd)
{
    char *buf = malloc(MIB + 1);
    ssize_t r = goro_read_full((int)fd, buf, MIB + 1);
    if (r != MIB)
        t_fail("read from cat: %zd", r);
    for (int i = 0; r == MIB && i < MIB; i++)
        if (buf[i] != (char)(i * 7 + i / 251)) {
            t_fail("byte %d differs", i);
            break;
        }
    free(buf);
    return 0;
}

/* 1 MiB through cat, written and read by two coroutines at once: neither
 * pipe's 64 KiB could hold it, so one side alone would deadlock. */
static long cat_both_ways(void)
{
    static const char *const argv[] = { "cat", NULL };
    goro_process_attr_t a = { .path_search = 1,
                              .stdio = { { .mode = GORO_STDIO_PIPE },
                                         { .mode = GORO_STDIO_PIPE } } };
    goro_process_t *p;
    int r = goro_process_spawn(&p, argv, &a), st = -1;
    if (r)
        return t_fail("spawn: %d", r), 0;
    if (goro_process_fd(p, 2) != -1 || (fcntl(goro_process_fd(p, 0), F_GETFL) & O_NONBLOCK) == 0 ||
        (fcntl(goro_process_fd(p, 1), F_GETFD) & FD_CLOEXEC) == 0)
        t_fail("parent ends: not non-blocking and close-on-exec");
    goro_t *w = go(feed, (long)goro_process_fd(p, 0));
    goro_t *d = go(drain, (long)goro_process_fd(p, 1));
    goro_join(w, NULL);
    goro_process_close_fd(p, 0);       /* end of input: cat exits */
    goro_join(d, NULL);
    if ((r = goro_process_wait(p, &st)) != 0 || goro_process_exit_code(st) != 0)
        t_fail("cat: %d status %#x", r, st);
    if (goro_process_close_fd(p, 0) != -EBADF)
        t_fail("second close_fd");
    goro_process_free(p);
    return 0;
}

static long stderr_apart(void)
{
    static const char *const argv[] = { "/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL };
    goro_process_attr_t a = { .stdio = { { .mode = GORO_STDIO_NULL }, { .mode = GORO_STDIO_PIPE },
                                         { .mode = GORO_STDIO_PIPE } } };
    goro_process_t *p;
    int r = goro_process_spawn(&p, argv, &a), st = -1;
    if (r)
        return t_fail("spawn: %d", r), 0;
    char out[32] = "", err[32] = "";
    ssize_t no = goro_read_full(goro_process_fd(p, 1), out, sizeof out - 1);
    ssize_t ne = goro_read_full(goro_process_fd(p, 2), err, sizeof err - 1);
    if (no != 4 || strcmp(out, "out\n") || ne != 4 || strcmp(err, "err\n"))
        t_fail("stdout %zd '%s', stderr %zd '%s'", no, out, ne, err);
    if ((r = goro_process_wait(p, &st)) != 0 || goro_process_exit_code(st) != 3)
        t_fail("wait: %d status %#x", r, st);
    goro_process_free(p);
    return 0;
}

START_TEST(process_pipes)
{
    run_co(cat_both_ways);
    run_co(stderr_apart);
}
END_TEST

/* ---- cwd, environment, given descriptors, output ---- */

static long cwd_and_env(void)
{
    static const char *const argv[] = { "sh", "-c", "pwd; echo \"$GORO_T\"; echo e >&2", NULL };
    static char *const env[] = { "GORO_T=honoured", "PATH=/usr/bin:/bin", NULL };
    int errp[2];
    if (pipe2(errp, O_CLOEXEC))
        return t_fail("pipe"), 0;
    goro_process_attr_t a = { .path_search = 1, .cwd = "/proc", .envp = env,
                              .stdio = { [2] = { .mode = GORO_STDIO_FD, .fd = errp[1] } } };
    char out[64], err[8] = "";
    size_t n = 0;
    int st = -1, r = goro_process_output(argv, &a, out, sizeof out - 1, &n, &st, GORO_FOREVER);
    out[n] = 0;
    close(errp[1]);
    ssize_t ne = read(errp[0], err, sizeof err - 1);
    close(errp[0]);
    if (r || st != 0 || strcmp(out, "/proc\nhonoured\n") || ne != 2 || strcmp(err, "e\n"))
        t_fail("output: %d status %#x '%s' stderr '%s'", r, st, out, err);
    /* more than cap: the first cap bytes and -E2BIG, process waited for */
    static const char *const yes[] = { "/bin/sh", "-c", "head -c 100000 /dev/zero", NULL };
    r = goro_process_output(yes, NULL, out, 10, &n, &st, GORO_FOREVER);
    if (r != -E2BIG || n != 10 || st != 0)
        t_fail("over cap: %d n %zu status %#x", r, n, st);
    /* a deadline that kills */
    static const char *const slow[] = { "/bin/sleep", "100", NULL };
    r = goro_process_output(slow, NULL, out, sizeof out, &n, &st, goro_now() + 20 * GORO_MSEC);
    if (r != -ETIMEDOUT || n != 0 || goro_process_signal(st) != SIGKILL)
        t_fail("deadline: %d n %zu status %#x", r, n, st);
    return 0;
}

START_TEST(process_cwd_env_output)
{
    run_co(cwd_and_env);
}
END_TEST

/* ---- errors ---- */

/* Under an emulator (qemu-user, valgrind) the emulator is what the child
 * execs, and it reports a missing program by exiting, not through
 * posix_spawn: exec errors are seen natively only. */
START_TEST(process_exec_errors)
{
    if (t_slow()) {
        t_skip("process_exec_errors", "under an emulator the emulator itself is exec'd");
        return;
    }
    goro_process_t *p = NULL;
    int n0 = count_fds();
    static const char *const none[] = { "/nonexistent/goro-no-such-binary", NULL };
    static const char *const nopath[] = { "goro-no-such-binary", NULL };
    static const char *const sh[] = { "/bin/sh", "-c", "exit 0", NULL };
    goro_process_attr_t pipes = { .stdio = { { .mode = GORO_STDIO_PIPE },
                                             { .mode = GORO_STDIO_PIPE },
                                             { .mode = GORO_STDIO_PIPE } } };
    ck_assert_int_eq(goro_process_spawn(&p, none, &pipes), -ENOENT);
    ck_assert_int_eq(goro_process_spawn(&p, nopath, &search), -ENOENT);
    pipes.cwd = "/nonexistent-dir";
    ck_assert_int_eq(goro_process_spawn(&p, sh, &pipes), -ENOENT);
    static const char *const notexec[] = { "/proc/self/status", NULL };
    ck_assert_int_eq(goro_process_spawn(&p, notexec, NULL), -EACCES);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(count_fds_back_to(n0), n0);
}
END_TEST

START_TEST(process_bad_input)
{
    goro_process_t *p = NULL;
    static const char *const empty[] = { NULL }, *const blank[] = { "", NULL },
                             *const ok[] = { "/bin/sh", "-c", "exit 0", NULL };
    ck_assert_int_eq(goro_process_spawn(&p, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_process_spawn(&p, empty, NULL), -EINVAL);
    ck_assert_int_eq(goro_process_spawn(&p, blank, NULL), -EINVAL);
    ck_assert_int_eq(goro_process_spawn(NULL, ok, NULL), -EINVAL);
    goro_process_attr_t a = { .stdio = { [1] = { .mode = 99 } } };
    ck_assert_int_eq(goro_process_spawn(&p, ok, &a), -EINVAL);
    a.stdio[1] = (goro_stdio_t){ .mode = GORO_STDIO_FD, .fd = -1 };
    ck_assert_int_eq(goro_process_spawn(&p, ok, &a), -EINVAL);
    a.stdio[1] = (goro_stdio_t){ .mode = GORO_STDIO_FD, .fd = 1000 };
    ck_assert_int_eq(goro_process_spawn(&p, ok, &a), -EBADF);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(goro_process_wait(NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_process_wait_kill_until(NULL, NULL, 0), -EINVAL);
    ck_assert_int_eq(goro_process_kill(NULL, SIGTERM), -EINVAL);
    ck_assert_int_eq(goro_process_free(NULL), -EINVAL);
    ck_assert_int_eq(goro_process_fd(NULL, 0), -EINVAL);
    ck_assert_int_eq(goro_process_close_fd(NULL, 0), -EINVAL);
    ck_assert_int_eq(goro_process_pid(NULL), -1);
    ck_assert_int_eq(goro_process_output(ok, NULL, NULL, 5, NULL, NULL, 0), -EINVAL);
    ck_assert_int_eq(goro_process_spawn(&p, ok, NULL), 0);
    ck_assert_int_eq(goro_process_fd(p, 3), -EINVAL);
    ck_assert_int_eq(goro_process_fd(p, 1), -1);
    ck_assert_int_eq(goro_process_close_fd(p, 1), -EBADF);
    ck_assert_int_eq(goro_process_kill(p, -1), -EINVAL);
    ck_assert_int_eq(goro_process_kill(p, 4096), -EINVAL);
    int st = -1;
    ck_assert_int_eq(goro_process_wait(p, &st), 0);
    ck_assert_int_eq(st, 0);
    ck_assert_int_eq(goro_process_free(p), 0);
}
END_TEST

/* In a child of its own (the limit is per process): at every limit just
 * above the open descriptors, spawn with three pipes succeeds or fails
 * with -EMFILE, and leaves the count of descriptors as it was. */
static int emfile_child(void *arg)
{
    (void)arg;
    static const char *const argv[] = { "/bin/sh", "-c", "exit 0", NULL };
    goro_process_attr_t a = { .stdio = { { .mode = GORO_STDIO_PIPE }, { .mode = GORO_STDIO_PIPE },
                                         { .mode = GORO_STDIO_PIPE } } };
    goro_process_t *p;
    int st;
    /* the runtime's own descriptors first (a wait that parks starts it) */
    static const char *const nap[] = { "/bin/sleep", "0.05", NULL };
    if (goro_start(NULL) || goro_process_spawn(&p, nap, NULL) || goro_process_wait(p, &st) ||
        goro_process_free(p))
        return 8;
    int top = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            top = fd;
    /* fill the holes below top: the limit then leaves exactly `extra` */
    for (int fd; (fd = fcntl(0, F_DUPFD_CLOEXEC, 0)) >= 0 && fd < top;)
        ;
    top = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            top = fd;
    int n0 = count_fds(), emfiles = 0, oks = 0;
    for (int extra = 1; extra <= 10; extra++) {
        struct rlimit rl = { (rlim_t)(top + extra), (rlim_t)(top + extra) };
        struct rlimit old;
        getrlimit(RLIMIT_NOFILE, &old);
        rl.rlim_max = old.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            return 2;
        int r = goro_process_spawn(&p, argv, &a);
        if (r == 0) {
            oks++;
            if (goro_process_wait(p, &st) != 0 || st != 0)
                return 3;
            goro_process_free(p);
        } else if (r == -EMFILE)
            emfiles++;
        else {
            printf("limit %d: spawn %d\n", top + extra, r);
            return 4;
        }
        rl.rlim_cur = old.rlim_cur;
        setrlimit(RLIMIT_NOFILE, &rl);
        int now = count_fds_back_to(n0);
        if (now != n0) {
            printf("limit %d: %d descriptors, %d before\n", top + extra, now, n0);
            return 5;
        }
    }
    printf("emfile %d ok %d\n", emfiles, oks);
    if (!emfiles || !oks)
        return 6;
    return goro_workers() > 0 && goro_shutdown() != 0 ? 7 : 0;
}

START_TEST(process_emfile)
{
    static char out[1024];
    int st = t_run_child(emfile_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %#x: %s", st, out);
}
END_TEST

/* ---- cancellation ---- */

static _Atomic int waiting;

static long waiter(long pp)
{
    goro_process_t *p = (goro_process_t *)pp;
    atomic_store(&waiting, 1);
    int st, r = goro_process_wait(p, &st);
    if (r != -ECANCELED)
        t_fail("cancelled wait: %d", r);
    return 0;
}

static void cancel_a_wait(void)
{
    static const char *const argv[] = { "/bin/sleep", "100", NULL };
    goro_process_t *p;
    ck_assert_int_eq(goro_process_spawn(&p, argv, NULL), 0);
    t_fail_reset();
    atomic_store(&waiting, 0);
    goro_t *h = go(waiter, (long)p);
    ck_assert_ptr_nonnull(h);
    while (!atomic_load(&waiting))
        t_nap(0.001);
    t_nap(0.02);
    ck_assert_int_eq(goro_cancel(h), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    /* it runs on and can be waited for again */
    ck_assert_int_eq(goro_process_kill(p, 0), 0);
    ck_assert_int_eq(goro_process_wait_until(p, NULL, goro_now() + GORO_MSEC), -ETIMEDOUT);
    ck_assert_int_eq(goro_process_kill(p, SIGINT), 0);
    int st = -1;
    ck_assert_int_eq(goro_process_wait(p, &st), 0);
    ck_assert_int_eq(goro_process_signal(st), SIGINT);
    ck_assert_int_eq(goro_process_free(p), 0);
}

static long second_waiter(long pp)
{
    goro_process_t *p = (goro_process_t *)pp;
    int r = goro_process_wait(p, NULL);
    if (r != -EBUSY)
        t_fail("second wait: %d", r);
    if ((r = goro_process_free(p)) != -EBUSY)
        t_fail("free while waited for: %d", r);
    return 0;
}

/* One wait at a time: a second one, and a free, find it busy. */
static void busy_wait(void)
{
    static const char *const argv[] = { "/bin/sleep", "100", NULL };
    goro_process_t *p;
    ck_assert_int_eq(goro_process_spawn(&p, argv, NULL), 0);
    t_fail_reset();
    atomic_store(&waiting, 0);
    goro_t *h = go(waiter, (long)p);
    while (!atomic_load(&waiting))
        t_nap(0.001);
    t_nap(0.02);
    goro_t *b = go(second_waiter, (long)p);
    ck_assert_int_eq(goro_join(b, NULL), 0);
    goro_cancel(h);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_process_free(p), 0);    /* from a thread: killed, reaped */
}

START_TEST(process_cancel_wait)
{
    cancel_a_wait();
    busy_wait();
}
END_TEST

/* ---- many at once ---- */

static pid_t *freed_pids;

static long one_of_many(long i)
{
    static const char *const t[] = { "/bin/sh", "-c", "exit 5", NULL },
                             *const bad[] = { "/nonexistent/goro-x", NULL };
    goro_process_attr_t a = { .stdio = { { .mode = GORO_STDIO_PIPE }, { .mode = GORO_STDIO_PIPE },
                                         { .mode = GORO_STDIO_NULL } } };
    goro_process_t *p;
    int r;
    switch (i % 4) {
    case 0:                              /* fails: its pipes must go */
        r = goro_process_spawn(&p, bad, &a);
        if (r == 0 && t_slow()) {        /* the emulator ran, and fails by exiting */
            int st;
            goro_process_wait(p, &st);
            goro_process_free(p);
            return 0;
        }
        if (r != -ENOENT)
            t_fail("%ld: bad spawn %d", i, r);
        return 0;
    case 1: {                            /* freed while it runs */
        static const char *const s[] = { "/bin/sleep", "100", NULL };
        if ((r = goro_process_spawn(&p, s, &a)) != 0)
            return t_fail("%ld: spawn %d", i, r), 0;
        freed_pids[i] = goro_process_pid(p);
        goro_process_free(p);
        return 0;
    }
    default: {
        if ((r = goro_process_spawn(&p, t, i % 4 == 2 ? &a : NULL)) != 0)
            return t_fail("%ld: spawn %d", i, r), 0;
        int st = -1;
        if ((r = goro_process_wait(p, &st)) != 0 || goro_process_exit_code(st) != 5)
            t_fail("%ld: wait %d status %#x", i, r, st);
        goro_process_free(p);
        return 0;
    }
    }
}

static void many_spawns(void)
{
    long n = t_scale(200);
    goro_t **h = calloc((size_t)n, sizeof *h);
    freed_pids = calloc((size_t)n, sizeof *freed_pids);
    static const char *const t[] = { "/bin/sh", "-c", "exit 0", NULL };
    ck_assert_int_eq(run(t, NULL), 0);        /* the runtime's own descriptors first */
    int n0 = count_fds();
    t_fail_reset();
    for (long i = 0; i < n; i++)
        ck_assert_ptr_nonnull(h[i] = go(one_of_many, i));
    for (long i = 0; i < n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    free(h);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    /* the freed ones are reaped in the background: no zombie stays */
    double end = t_now() + t_timeout(10);
    for (long i = 0; i < n; i++) {
        while (freed_pids[i] && pid_exists(freed_pids[i]) && t_now() < end)
            t_nap(0.002);
        ck_assert_msg(!freed_pids[i] || !pid_exists(freed_pids[i]), "pid %d left",
                      (int)freed_pids[i]);
    }
    free(freed_pids);
    /* a background reaper closes its pidfd just after its reap, so the
     * last one may still hold it when its pid is gone: wait for that too */
    while (count_fds() != n0 && t_now() < end)
        t_nap(0.002);
    ck_assert_int_eq(count_fds_back_to(n0), n0);
}

START_TEST(process_many_concurrent)
{
    many_spawns();
}
END_TEST

/* ---- the polling fallback ---- */

START_TEST(process_no_pidfd_fallback)
{
    static const char *const s[] = { "/bin/sleep", "100", NULL };
    goro_process_t *p;
    /* with a pidfd a live process holds one descriptor; polled, none */
    int n0 = count_fds();
    ck_assert_int_eq(goro_process_spawn(&p, s, NULL), 0);
    int with_pidfd = count_fds() - n0;
    ck_assert_int_eq(goro_process_wait_kill_until(p, NULL, 0), -ETIMEDOUT);
    goro_process_free(p);
    setenv("GORO_PROC_NO_PIDFD", "1", 1);
    n0 = count_fds();
    ck_assert_int_eq(goro_process_spawn(&p, s, NULL), 0);
    int polled = count_fds() - n0;
    ck_assert_int_eq(goro_process_wait_kill_until(p, NULL, 0), -ETIMEDOUT);
    goro_process_free(p);
    ck_assert_int_eq(polled, 0);
    ck_assert_int_le(with_pidfd, 1);    /* 0 on a kernel without pidfd_open */
    run_co(exit_codes);
    run_co(killed_by_sigterm);
    run_co(killed_at_deadline);
    run_co(free_running);
    cancel_a_wait();
    many_spawns();
    unsetenv("GORO_PROC_NO_PIDFD");
}
END_TEST

/* ---- the child's signal mask and dispositions ---- */

static char status_out[512];

static long read_status(void)
{
    /* not through sh: dash unblocks every signal when it starts */
    static const char *const argv[] = { "grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status",
                                        NULL };
    size_t n = 0;
    int st, r = goro_process_output(argv, &search, status_out, sizeof status_out - 1, &n, &st,
                                    GORO_FOREVER);
    status_out[n] = 0;
    if (r || st)
        t_fail("grep: %d status %#x", r, st);
    return 0;
}

/* The program blocks SIGUSR1 and ignores SIGPIPE and SIGHUP before the
 * start; a child spawned from a coroutine (on a worker) blocks SIGUSR1
 * and nothing else, ignores SIGHUP, and has SIGPIPE at its default. */
static int mask_child(void *arg)
{
    (void)arg;
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &m, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    goro_t *h = go(read_status);
    if (!h || goro_join(h, NULL) != 0 || t_failed())
        return printf("%s\n", t_failed() ? t_failed() : "go"), 2;
    unsigned long long blk = 0, ign = 0;
    char *b = strstr(status_out, "SigBlk:"), *i = strstr(status_out, "SigIgn:");
    if (!b || !i)
        return printf("no masks: %s\n", status_out), 3;
    blk = strtoull(b + 7, NULL, 16);
    ign = strtoull(i + 7, NULL, 16);
    printf("%s", status_out);
    if (blk != 1ull << (SIGUSR1 - 1))
        return 4;
    if (!(ign & 1ull << (SIGHUP - 1)) || (ign & 1ull << (SIGPIPE - 1)))
        return 5;
    return goro_shutdown() == 0 ? 0 : 6;
}

START_TEST(process_signal_mask)
{
    if (t_slow() || t_valgrind()) {
        t_skip("process_signal_mask", "/proc shows the emulator's masks");
        return;
    }
    static char out[2048];
    int st = t_run_child(mask_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %#x: %s", st, out);
}
END_TEST

Suite *process_suite(void)
{
    Suite *s = suite_create("process");
    TCase *tc = t_runtime_tcase(s, "process", 60);
    tcase_add_test(tc, process_exit_codes);
    tcase_add_test(tc, process_killed_by_signal);
    tcase_add_test(tc, process_killed_at_deadline);
    tcase_add_test(tc, process_pipes);
    tcase_add_test(tc, process_cwd_env_output);
    tcase_add_test(tc, process_exec_errors);
    tcase_add_test(tc, process_bad_input);
    tcase_add_test(tc, process_emfile);
    tcase_add_test(tc, process_cancel_wait);
    tcase_add_test(tc, process_many_concurrent);
    tcase_add_test(tc, process_no_pidfd_fallback);
    tcase_add_test(tc, process_signal_mask);
    return s;
}
