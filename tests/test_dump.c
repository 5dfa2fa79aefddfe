/* What goro_dump and the crash reports say (runtime/debug/dump.c, runtime/debug/fault.c;
 * docs/debugging.md): workers counted as workers, not threads; code
 * addresses named after the function that contains them, or "??" - never
 * after another function. The tests that need a runtime of their own shape,
 * or a crash, run in a child process (t_run_child), and the parent checks
 * the text the child printed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdatomic.h>

#include "helpers.h"
#include "internal.h"
#include "debug/debug.h"
#include "suites.h"

/* ---- text helpers ---- */

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
    ck_assert_msg(t_count_lines(blocked, "goro: dump of process ", ", 1 worker", NULL) == 1 &&
                  t_count_lines(blocked, "worker ", NULL) == 1 &&
                  t_count_lines(blocked, "worker 0: thread ", NULL) == 1,
                  "with GORO_WORKERS=1, want one worker in the dump:\n%s", blocked);
    const char *handed = "(its worker was handed off)";
    ck_assert_msg(t_count_lines(blocked, "spare thread (no worker): thread ", "running coroutine",
                              "\"blocker", handed, NULL) == 2 &&
                  t_count_lines(blocked, "  running on spare thread ", handed, NULL) == 2,
                  "want both blocked threads listed as spares running their blocker:\n%s",
                  blocked);
    ck_assert_msg(t_count_lines(released, "goro: dump of process ", ", 1 worker", NULL) == 1 &&
                  t_count_lines(released, "worker ", NULL) == 1 &&
                  t_count_lines(released, "spare thread (no worker): thread ", ", idle", NULL) == 2,
                  "once the blockers are back, want one worker and two idle spares:\n%s",
                  released);
    free(blocked);
    free(released);
}
END_TEST

/* ---- symbols ---- */

/* Whether text, the name runtime/debug/fault.c gave the code at ip ("fn+0x1c",
 * "?? (libc.so.6+0x3fbf4)", "??"), names no function but the one that
 * contains lookup (ip, or ip - 1 for a return address). "??" is never
 * wrong. A name counts from start = ip - offset; when a dynamic symbol
 * begins there, its size says whether it reaches lookup - a name from a
 * full symbol table has no size to check here, and is taken as right. On
 * failure, *why says what is wrong. */
static bool names_right_function(const char *text, uintptr_t ip, uintptr_t lookup,
                                 char *why, size_t len)
{
    if (strncmp(text, "??", 2) == 0)
        return true;
    const char *plus = strstr(text, "+0x");
    unsigned long off = plus ? strtoul(plus + 3, NULL, 16) : 0;
    uintptr_t start = ip - off;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1((void *)start, &info, (void **)&sym, RTLD_DL_SYMENT) || !info.dli_sname ||
        (uintptr_t)info.dli_saddr != start || !sym)
        return true;
    if (sym->st_size ? lookup - start < sym->st_size : lookup == start)
        return true;
    snprintf(why, len, "\"%s\" for code at %#lx, but %s (%s) is %lu bytes long at %#lx",
             text, (unsigned long)lookup, info.dli_sname, info.dli_fname,
             (unsigned long)sym->st_size, (unsigned long)start);
    return false;
}

/* Not exported: only a full symbol table names it. */
static T_NOINLINE int local_function(int x)
{
    __asm__ volatile("" : "+r"(x));
    return x * 3 + 1;
}

static void *sort_return;

/* qsort calls it from inside libc: from an exported function, or from a
 * local one that libc's dynamic symbols do not name. */
static int compare_recording(const void *a, const void *b)
{
    sort_return = __builtin_return_address(0);
    return *(const int *)a - *(const int *)b;
}

START_TEST(symbolize_names_the_containing_function_or_nothing)
{
    char text[200], why[300] = "";
    const char *fn = (const char *)(uintptr_t)local_function;
    goro__symbolize(fn + 4, text, sizeof text);
    ck_assert_msg(strcmp(text, "local_function+0x4") == 0,
                  "a static function of the test, 4 bytes in: \"%s\"", text);
    goro__symbolize(fn, text, sizeof text);
    ck_assert_msg(strcmp(text, "local_function") == 0, "its entry: \"%s\"", text);

    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = 64 - i;
    qsort(v, 64, sizeof *v, compare_recording);
    uintptr_t call = (uintptr_t)sort_return - 1;    /* the call instruction */
    goro__symbolize((void *)call, text, sizeof text);
    ck_assert_msg(names_right_function(text, call, call, why, sizeof why),
                  "the code in libc that calls qsort's comparator: %s", why);
}
END_TEST

/* ---- a crash report through a libc callback ---- */

#ifdef T_ASAN
/* ASan owns SIGSEGV and reports it itself; SIGABRT is left to goro
 * (docs/debugging.md), and abort() adds libc frames of its own. */
#define CRASH_SIGNAL SIGABRT
#else
#define CRASH_SIGNAL SIGSEGV
#endif

static T_NOINLINE void crash_in_local_function(int *volatile *where)
{
    if (CRASH_SIGNAL == SIGABRT)
        abort();
    **where = 42;
}

/* Crashes when first called: by qsort, from inside libc. */
static int compare_and_crash(const void *a, const void *b)
{
    int *volatile nowhere = NULL;
    crash_in_local_function(&nowhere);
    return *(const int *)a - *(const int *)b;
}

static void sort_and_crash(void)
{
    int v[16];
    for (int i = 0; i < 16; i++)
        v[i] = 16 - i;
    qsort(v, 16, sizeof *v, compare_and_crash);
}

static int crash_child(void *arg)
{
    (void)arg;
    setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 });  /* the crash is expected */
    goro_t *h = go(sort_and_crash);
    if (h)
        goro_join(h, NULL);
    printf("the coroutine did not crash\n");
    return 1;
}

/* Every frame of the report names the function containing it, or "??". */
static void check_report_frames(const char *report)
{
    int frames = 0;
    for (const char *line = strstr(report, "\n  #"); line; line = strstr(line + 1, "\n  #")) {
        int depth;
        unsigned long ip;
        char text[300], why[400];
        if (sscanf(line, "\n  #%d 0x%lx %299[^\n]", &depth, &ip, text) != 3)
            continue;
        frames++;
        /* frame 0 stopped at the fault; the others are return addresses */
        uintptr_t lookup = depth == 0 ? ip : ip - 1;
        ck_assert_msg(names_right_function(text, ip, lookup, why, sizeof why),
                      "frame %d names another function: %s\nreport:\n%s", depth, why, report);
    }
    ck_assert_msg(frames >= 4, "want a backtrace in the report:\n%s", report);
}

START_TEST(crash_report_frames_name_their_own_functions)
{
#ifdef T_TSAN
    t_skip("crash_report_frames_name_their_own_functions", "TSan handles the crash itself");
    return;
#endif
    if (t_valgrind()) {
        t_skip("crash_report_frames_name_their_own_functions", "valgrind");
        return;
    }
    static char out[1 << 16];
    int st = t_run_child(crash_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == CRASH_SIGNAL,
                  "child status %#x, want death by signal %d; output:\n%s", st, CRASH_SIGNAL,
                  out);
    const char *report = strstr(out, "goro: coroutine ");
    ck_assert_msg(report && strstr(report, " crashed: signal "), "no crash report:\n%s", out);
    ck_assert_msg(strstr(report, "crash_in_local_function+0x") &&
                  strstr(report, "compare_and_crash+0x") && strstr(report, "sort_and_crash+0x"),
                  "want the test's own functions named in the report:\n%s", report);
    check_report_frames(report);
}
END_TEST

/* ---- libunwind's one-time setup ----
 * libunwind sets itself up on first use without a lock around all of it
 * (a C++ throw, a backtrace). Two coroutines making that first use at the
 * same moment on two workers raced inside it (TSan saw it in a C++ test);
 * the runtime now makes the first use itself when it starts. */

#define UNWIND_WALKERS 2
static atomic_int unwind_arrived;

static void walk_own_stack(void)
{
    atomic_fetch_add(&unwind_arrived, 1);
    /* Both start together: each waits, briefly, for the other. */
    for (int64_t end = goro_now() + GORO_SEC; atomic_load(&unwind_arrived) < UNWIND_WALKERS &&
                                              goro_now() < end;)
        ;
    unw_context_t ctx;
    unw_cursor_t cursor;
    int frames = 0;
    if (unw_getcontext(&ctx) == 0 && unw_init_local(&cursor, &ctx) == 0)
        while (frames < 64 && unw_step(&cursor) > 0)
            frames++;
    if (frames < 1)
        printf("walked %d frames\n", frames);
}

static int first_unwind_child(void *arg)
{
    (void)arg;
    int e = goro_start(&(goro_config_t){ .workers = UNWIND_WALKERS });
    if (e != 0)
        return printf("goro_start: %d\n", e), 2;
    goro_t *h[UNWIND_WALKERS];
    for (int i = 0; i < UNWIND_WALKERS; i++)
        h[i] = go(walk_own_stack);
    for (int i = 0; i < UNWIND_WALKERS; i++)
        if (!h[i] || goro_join(h[i], NULL) != 0)
            return printf("coroutine %d did not run\n", i), 3;
    return goro_shutdown() == 0 ? 0 : 4;
}

START_TEST(first_unwind_in_two_coroutines_at_once)
{
    if (t_valgrind()) {
        /* libunwind probes stack memory by writing it to a pipe: valgrind
         * reports the uninitialised bytes; the race is TSan's to see */
        t_skip("first_unwind_in_two_coroutines_at_once", "valgrind");
        return;
    }
    /* Each child is a first use; under TSan a race shows in about half. */
    for (int round = 0; round < 4; round++) {
        static char out[1 << 16];
        int st = t_run_child(first_unwind_child, NULL, t_timeout(20), out, sizeof out);
        ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strstr(out, "walked"),
                      "child %d: status %#x; output:\n%.2000s", round, st, out);
    }
}
END_TEST

Suite *dump_suite(void)
{
    Suite *s = suite_create("dump");
    TCase *tc = t_tcase(s, "workers", 30);
    tcase_add_test(tc, dump_counts_workers_not_threads);
    tc = t_tcase(s, "symbols", 30);
    tcase_add_test(tc, symbolize_names_the_containing_function_or_nothing);
    tcase_add_test(tc, crash_report_frames_name_their_own_functions);
    tcase_add_test(tc, first_unwind_in_two_coroutines_at_once);
    return s;
}
