/* What goro_dump and the crash reports say (runtime/dump.c, runtime/fault.c;
 * docs/debugging.md): workers counted as workers, not threads. The tests
 * that need a runtime of their own shape run in a child process
 * (t_run_child), and the parent checks the text the child printed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

/* ---- text helpers ---- */

/* Lines of text that start with prefix and contain every one of the
 * NULL-terminated words after it. */
static int count_lines(const char *text, const char *prefix, ...)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        bool match = strncmp(buf, prefix, strlen(prefix)) == 0;
        va_list ap;
        va_start(ap, prefix);
        for (const char *w; match && (w = va_arg(ap, const char *));)
            match = strstr(buf, w) != NULL;
        va_end(ap);
        n += match;
        line = end ? end + 1 : NULL;
    }
    return n;
}

/* The part of text between the line "=== name" and the next "=== " line. */
static char *section(const char *text, const char *name)
{
    char mark[64];
    snprintf(mark, sizeof mark, "=== %s\n", name);
    const char *start = strstr(text, mark);
    if (!start)
        return strdup("");
    start += strlen(mark);
    const char *end = strstr(start, "=== ");
    return strndup(start, end ? (size_t)(end - start) : strlen(start));
}

/* ---- workers and spare threads ---- */

#define SLICE (10 * GORO_MSEC)

static struct {
    atomic_int release;             /* the blockers may return */
    atomic_int blocking[2];         /* blocker i holds its thread */
    atomic_int marker_ran;
} hd;

/* As sched.c decides it: hand-off needs membarrier (valgrind has none). */
static bool handoff_available(void)
{
    return !t_valgrind() &&
           syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

static void thread_nanosleep(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / GORO_SEC), (long)(ns % GORO_SEC) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Holds its thread - not just the coroutine - asleep in the kernel until
 * released: after a slice sysmon hands the worker to another thread. Not
 * preemptible meanwhile, so that it stays on this thread. */
static void blocker(int i)
{
    goro_preempt_disable();
    atomic_store(&hd.blocking[i], 1);
    while (!atomic_load(&hd.release))
        thread_nanosleep(GORO_MSEC);
    goro_preempt_enable();
    goro_yield();                   /* back on a thread that holds a worker */
}

static void marker(void)
{
    atomic_store(&hd.marker_ran, 1);
}

/* The main thread of the child, which is no worker, waits without goro. */
static bool wait_flag(atomic_int *flag)
{
    for (double end = t_now() + t_timeout(3); !atomic_load(flag); thread_nanosleep(GORO_MSEC))
        if (t_now() > end)
            return false;
    return true;
}

static goro_t *spawn_blocker(int i)
{
    goro_t *h = NULL;
    goro_attr_t attr = { .name = i ? "blocker1" : "blocker0" };
    return goro_go(&h, &attr, blocker, i) == 0 ? h : NULL;
}

static void print_dump(const char *name)
{
    printf("=== %s\n", name);
    goro_dump(stdout);
    fflush(stdout);
}

/* One worker. blocker0 holds its thread, so the queued blocker1 runs on a
 * thread the worker is handed to, and holds that one; the queued marker
 * then runs on a third. Dumped then (two threads blocked, each running its
 * coroutine without a worker), and again once both blockers came back
 * (two idle spares). */
static int two_handoffs_child(void *arg)
{
    (void)arg;
    setenv("GORO_WORKERS", "1", 1);
    int e = goro_start(&(goro_config_t){ .slice_ns = SLICE });
    if (e != 0 || goro_workers() != 1) {
        printf("goro_start: %d, %d workers\n", e, goro_workers());
        return 2;
    }
    goro_t *b0 = spawn_blocker(0), *b1 = NULL, *m = NULL;
    if (!b0 || !wait_flag(&hd.blocking[0]))
        return printf("blocker0 did not start\n"), 3;
    if (!(b1 = spawn_blocker(1)) || !wait_flag(&hd.blocking[1]))
        return printf("blocker1 never ran: no hand-off\n"), 4;
    if (!(m = go(marker)) || !wait_flag(&hd.marker_ran))
        return printf("the marker never ran: no second hand-off\n"), 5;
    goro_join(m, NULL);
    print_dump("blocked");
    atomic_store(&hd.release, 1);
    goro_join(b0, NULL);
    goro_join(b1, NULL);
    t_settle();                     /* the blockers' threads wait as spares */
    print_dump("released");
    return goro_shutdown() == 0 ? 0 : 6;
}

START_TEST(dump_counts_workers_not_threads)
{
#ifdef T_TSAN
    /* the dump reads records that running threads write (docs/debugging.md) */
    t_skip("dump_counts_workers_not_threads", "TSan reports the dump's reads as races");
    return;
#endif
    if (!handoff_available()) {
        t_skip("dump_counts_workers_not_threads", "no membarrier: hand-off is off");
        return;
    }
    static char out[1 << 16];
    int st = t_run_child(two_handoffs_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "child status %#x; output:\n%s", st, out);
    char *blocked = section(out, "blocked"), *released = section(out, "released");
    ck_assert_msg(count_lines(blocked, "goro: dump of process ", ", 1 worker", NULL) == 1 &&
                  count_lines(blocked, "worker ", NULL) == 1 &&
                  count_lines(blocked, "worker 0: thread ", NULL) == 1,
                  "with GORO_WORKERS=1, want one worker in the dump:\n%s", blocked);
    const char *handed = "(its worker was handed off)";
    ck_assert_msg(count_lines(blocked, "spare thread (no worker): thread ", "running coroutine",
                              "\"blocker", handed, NULL) == 2 &&
                  count_lines(blocked, "  running on spare thread ", handed, NULL) == 2,
                  "want both blocked threads listed as spares running their blocker:\n%s",
                  blocked);
    ck_assert_msg(count_lines(released, "goro: dump of process ", ", 1 worker", NULL) == 1 &&
                  count_lines(released, "worker ", NULL) == 1 &&
                  count_lines(released, "spare thread (no worker): thread ", ", idle", NULL) == 2,
                  "once the blockers are back, want one worker and two idle spares:\n%s",
                  released);
    free(blocked);
    free(released);
}
END_TEST

Suite *dump_suite(void)
{
    Suite *s = suite_create("dump");
    TCase *tc = t_tcase(s, "workers", 30);
    tcase_add_test(tc, dump_counts_workers_not_threads);
    return s;
}
