/* Deadlock reports and leak detection (runtime/debug/deadlock.c, leaks.c,
 * waitgraph.c; docs/debugging.md, "Deadlocks and leaks"):
 *   - the classic two-mutex cycle, with the main thread joining: the
 *     process aborts with "all coroutines are asleep - deadlock!", the
 *     waits, who holds each mutex, and the cycle;
 *   - a receive nobody can answer, to a callback, which breaks the
 *     deadlock by cancelling; GORO_DEADLOCK=report reports and goes on;
 *   - waits the world outside may end (a descriptor, a timer, a thread
 *     that runs, a signal subscription) are no deadlock;
 *   - goro_leaks: the cycle, a receive on a channel nobody holds, a
 *     forgotten child sending to a parent that is gone, a mutex held by a
 *     coroutine that ended - and the same waits while something live can
 *     still end them, which are no leaks; goro_dump's line.
 * Deadlock children are skipped under TSan and qemu-user: their own
 * threads are ones the check cannot know (it then says nothing, as it
 * must); and under valgrind, where they hang (not understood yet). The
 * leak tests too, under valgrind and qemu (not run there yet). Channel leaks
 * are not checked under TSan or valgrind: TSan's tables keep every lock's
 * address, valgrind's memory every thread's registers (found, they keep
 * the channel reachable); nor in GORO_DEBUG builds, where one run found a
 * channel's lock address kept somewhere (the lock checker's list of held
 * locks is now cleared; not proven the cause). Counts are taken against the leaks already
 * there: under valgrind one process runs every test.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

/* Whether this run checks leaks, and deadlocks (above). */
static bool leaks_run_here(const char *test)
{
    if (t_valgrind() || t_slow()) {
        t_skip(test, t_valgrind() ? "valgrind" : "qemu-user's own threads");
        return false;
    }
    return true;
}

static bool checks_run_here(const char *test)
{
#ifdef T_TSAN
    t_skip(test, "TSan's own thread");
    return false;
#endif
    return leaks_run_here(test);
}

/* ---- the two-mutex cycle ---- */

static goro_mutex_t m1 = GORO_MUTEX_INIT, m2 = GORO_MUTEX_INIT;
static goro_waitgroup_t both_hold;

/* Takes first, waits until the other holds its own, then wants second. */
__attribute__((noinline)) static long lock_both(goro_mutex_t *first, goro_mutex_t *second)
{
    goro_mutex_lock(first);
    goro_waitgroup_done(&both_hold);
    goro_waitgroup_wait(&both_hold);
    int err = goro_mutex_lock(second);
    if (err == 0)
        goro_mutex_unlock(second);
    goro_mutex_unlock(first);
    return err;
}

static long alice(void *arg)
{
    (void)arg;
    return lock_both(&m1, &m2);
}

static long bob(void *arg)
{
    (void)arg;
    return lock_both(&m2, &m1);
}

static void start_cycle(goro_t **a, goro_t **b)
{
    goro_waitgroup_init(&both_hold);
    goro_waitgroup_add(&both_hold, 2);
    goro_spawn(a, &(goro_attr_t){ .name = "alice" }, alice, NULL);
    goro_spawn(b, &(goro_attr_t){ .name = "bob" }, bob, NULL);
}

static int cycle_child(void *arg)
{
    (void)arg;
    goro_start(&(goro_config_t){ .workers = 2 });
    goro_t *a, *b;
    start_cycle(&a, &b);
    goro_join(a, NULL);             /* never returns: the monitor aborts */
    printf("join returned\n");
    return 3;
}

START_TEST(two_mutex_cycle_aborts_with_the_cycle)
{
    if (!checks_run_here("two_mutex_cycle_aborts_with_the_cycle"))
        return;
    static char out[1 << 16];
    int st = t_run_child(cycle_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %.4000s", out);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "status %#x: %.4000s", st, out);
    ck_assert_msg(t_count_lines(out, "goro: all coroutines are asleep - deadlock!", NULL) == 1,
                  "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "  thread ", "(outside the runtime) waits: join coroutine ",
                                "\"alice\"", NULL) == 1, "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "  coroutine ", "\"alice\" waits: mutex 0x",
                                "held by coroutine ", "\"bob\"", NULL) == 1, "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "  coroutine ", "\"bob\" waits: mutex 0x",
                                "held by coroutine ", "\"alice\"", NULL) == 1, "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "  cycle: coroutine ", "\"alice\" -> mutex 0x",
                                "\"bob\" -> mutex 0x", NULL) == 1, "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "goro: aborting", NULL) == 1, "%.4000s", out);
    /* the dump follows, with the backtraces */
    ck_assert_msg(t_count_lines(out, "", "lock_both", NULL) >= 2, "%.4000s", out);
    ck_assert_msg(!strstr(out, "join returned"), "%.4000s", out);
}
END_TEST

/* ---- a callback that breaks the deadlock ---- */

static char hook_text[1 << 15];
static atomic_int hook_calls;
static goro_t *hook_victim;

static void on_deadlock(const char *report, void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&hook_calls, 1) == 0)
        snprintf(hook_text, sizeof hook_text, "%s", report);
    if (hook_victim)
        goro_cancel(hook_victim);
}

static long lonely_receiver(void *arg)
{
    (void)arg;
    goro_chan_t *ch = t_chan_new(sizeof(int), 0);
    int v;
    int r = goro_chan_recv(ch, &v);
    goro_chan_free(ch);
    return r;
}

static int hook_child(void *arg)
{
    (void)arg;
    goro_start(&(goro_config_t){ .workers = 2 });
    goro_deadlock_watch(on_deadlock, NULL);
    goro_spawn(&hook_victim, &(goro_attr_t){ .name = "lonely" }, lonely_receiver, NULL);
    long r = 0;
    goro_join(hook_victim, &r);     /* ends when the callback cancels it */
    hook_victim = NULL;
    printf("calls=%d result=%ld\n%s", atomic_load(&hook_calls), r, hook_text);
    return goro_shutdown();
}

START_TEST(callback_gets_the_report_and_may_cancel)
{
    if (!checks_run_here("callback_gets_the_report_and_may_cancel"))
        return;
    static char out[1 << 16];
    int st = t_run_child(hook_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %.4000s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %.4000s", st, out);
    char want[64];
    snprintf(want, sizeof want, "calls=1 result=%d", -ECANCELED);
    ck_assert_msg(strstr(out, want), "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "goro: all coroutines are asleep - deadlock!", NULL) == 1,
                  "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "  coroutine ", "\"lonely\" waits: chan recv 0x", NULL) == 1,
                  "%.4000s", out);
    ck_assert_msg(!strstr(out, "goro: aborting"), "%.4000s", out);
}
END_TEST

static void on_alarm(int sig)
{
    (void)sig;
    static const char alive[] = "still alive\n";
    (void)!write(1, alive, sizeof alive - 1);
    _exit(0);
}

static int report_mode_child(void *arg)
{
    (void)arg;
    setenv("GORO_DEADLOCK", "report", 1);
    signal(SIGALRM, on_alarm);
    goro_start(&(goro_config_t){ .workers = 1 });
    goro_t *h;
    goro_spawn(&h, &(goro_attr_t){ .name = "lonely" }, lonely_receiver, NULL);
    alarm(t_valgrind() ? 10 : t_sanitized() ? 5 : 2);
    goro_join(h, NULL);
    return 3;
}

START_TEST(report_mode_reports_and_goes_on)
{
    if (!checks_run_here("report_mode_reports_and_goes_on"))
        return;
    static char out[1 << 16];
    int st = t_run_child(report_mode_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %.4000s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %.4000s", st, out);
    ck_assert_msg(t_count_lines(out, "goro: all coroutines are asleep - deadlock!", NULL) == 1,
                  "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "still alive", NULL) == 1, "%.4000s", out);
}
END_TEST

/* ---- waits the outside may end ---- */

static int pipe_fds[2];

static long read_pipe(void *arg)
{
    (void)arg;
    char c;
    return goro_read(pipe_fds[0], &c, 1);
}

static long nap(void *arg)
{
    goro_sleep((int64_t)(intptr_t)arg);
    return 0;
}

static goro_chan_t *from_thread;

static void *late_sender(void *arg)
{
    (void)arg;
    usleep(t_valgrind() ? 1500000 : 600000);
    int v = 7;
    goro_chan_send(from_thread, &v);
    return NULL;
}

static void *late_writer(void *arg)
{
    (void)arg;
    usleep(t_valgrind() ? 1500000 : 600000);
    (void)!write(pipe_fds[1], "x", 1);
    return NULL;
}

static int outside_child(void *arg)
{
    (void)arg;
    goro_start(&(goro_config_t){ .workers = 2 });
    goro_deadlock_watch(on_deadlock, NULL);
    int64_t wait = (t_valgrind() ? 1500 : 600) * GORO_MSEC;
    /* a descriptor (the thread that writes exits first: only I/O is left) */
    if (pipe(pipe_fds) != 0)
        return 10;
    pthread_t t;
    pthread_create(&t, NULL, late_writer, NULL);
    pthread_detach(t);
    goro_t *h;
    goro_spawn(&h, NULL, read_pipe, NULL);
    goro_join(h, NULL);
    /* a timer */
    goro_spawn(&h, NULL, nap, (void *)(intptr_t)wait);
    goro_join(h, NULL);
    /* a thread that runs and will send */
    from_thread = t_chan_new(sizeof(int), 0);
    pthread_create(&t, NULL, late_sender, NULL);
    int v = 0;
    goro_chan_recv(from_thread, &v);
    pthread_join(t, NULL);
    /* the positive control: now a deadlock */
    goro_spawn(&hook_victim, &(goro_attr_t){ .name = "lonely" }, lonely_receiver, NULL);
    goro_join(hook_victim, NULL);
    printf("calls=%d v=%d\n%s", atomic_load(&hook_calls), v, hook_text);
    return goro_shutdown();
}

START_TEST(waits_the_outside_may_end_are_no_deadlock)
{
    if (!checks_run_here("waits_the_outside_may_end_are_no_deadlock"))
        return;
    static char out[1 << 16];
    int st = t_run_child(outside_child, NULL, t_timeout(60), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %.4000s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %.4000s", st, out);
    ck_assert_msg(strstr(out, "calls=1 v=7"), "%.4000s", out);
    ck_assert_msg(t_count_lines(out, "  coroutine ", "\"lonely\" waits: chan recv", NULL) == 1,
                  "%.4000s", out);
}
END_TEST

/* ---- a wake-up in flight ---- */

static pthread_t joiner_thread;

static void slow_handler(int sig)
{
    (void)sig;
    struct timespec ts = { 0, 400 * 1000 * 1000 };
    nanosleep(&ts, NULL);           /* the joiner is woken, but not running */
}

static long end_while_the_joiner_is_away(void *arg)
{
    (void)arg;
    goro_sleep(50 * GORO_MSEC);     /* the joiner parks in goro_join */
    pthread_kill(joiner_thread, SIGUSR1);
    return 0;                       /* the end wakes the joiner: it runs 400 ms later */
}

static int in_flight_child(void *arg)
{
    (void)arg;
    goro_start(&(goro_config_t){ .workers = 1 });
    goro_deadlock_watch(on_deadlock, NULL);
    joiner_thread = pthread_self();
    signal(SIGUSR1, slow_handler);
    goro_t *h;
    goro_spawn(&h, &(goro_attr_t){ .name = "ender" }, end_while_the_joiner_is_away, NULL);
    goro_join(h, NULL);
    printf("calls=%d\n%s", atomic_load(&hook_calls), hook_text);
    return goro_shutdown();
}

/* A thread whose wait was ended (its join's coroutine ended and woke it)
 * but that has not run yet is no deadlock, however long its CPU is away:
 * the wake-up is in flight. Old: the coroutine dead, the thread still
 * marked as waiting on it, and a report after 100 ms. */
START_TEST(a_woken_thread_that_has_not_run_is_no_deadlock)
{
    if (!checks_run_here("a_woken_thread_that_has_not_run_is_no_deadlock"))
        return;
    static char out[1 << 16];
    int st = t_run_child(in_flight_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %.4000s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %.4000s", st, out);
    ck_assert_msg(strstr(out, "calls=0"), "%.4000s", out);
}
END_TEST

/* ---- leaks ---- */

static int leaks_before;

/* The leaks this test made: goro_leaks' count less those found before. */
static int leaks(char *text, size_t len)
{
    FILE *f = fmemopen(text, len, "w");
    ck_assert_ptr_nonnull(f);
    int n = goro_leaks(f);
    fclose(f);
    text[len - 1] = '\0';
    return n - leaks_before;
}

/* Channel leaks are found where memory holds no stale copies (above). */
static bool channels_judged(void)
{
#if defined(T_TSAN) || defined(GORO_DEBUG)
    return false;   /* GORO_DEBUG: a lock's address was seen kept (CI, once) */
#else
    return !t_valgrind();
#endif
}

/* Gives the coroutines just spawned time to park (a running one is live). */
static void settle(void)
{
    usleep(t_valgrind() ? 300000 : 50000);
}

START_TEST(mutex_cycle_is_a_leak)
{
    if (!leaks_run_here("mutex_cycle_is_a_leak"))
        return;
    leaks_before = goro_leaks(NULL);
    goro_t *a, *b;
    start_cycle(&a, &b);
    settle();
    static char text[1 << 16];
    int n = leaks(text, sizeof text);
    ck_assert_msg(n == 2, "%d: %s", n, text);
    ck_assert_msg(t_count_lines(text, "goro: ", " leaked coroutines", NULL) == 1, "%s", text);
    ck_assert_msg(t_count_lines(text, "  cycle: coroutine ", NULL) == 1, "%s", text);
    ck_assert_msg(t_count_lines(text, "", "lock_both", NULL) >= 2, "%s", text);
    goro_cancel(a);                 /* breaks the cycle: bob then gets m1 */
    long ra, rb;
    goro_join(a, &ra);
    goro_join(b, &rb);
    ck_assert_int_eq(ra, -ECANCELED);
    ck_assert_int_eq(rb, 0);
    ck_assert_int_eq(goro_leaks(NULL), leaks_before);
}
END_TEST

static goro_chan_t *global_ch;

/* A select over more channels than the graph keeps on its stack (64),
 * all of them its own. */
#define WIDE 100
static long lonely_wide_select(void *arg)
{
    (void)arg;
    goro_chan_t *chs[WIDE];
    goro_case_t cs[WIDE];
    for (int i = 0; i < WIDE; i++) {
        chs[i] = t_chan_new(0, 0);
        cs[i] = (goro_case_t){ .ch = chs[i], .op = GORO_RECV };
    }
    int r = goro_select(cs, WIDE, 0);
    for (int i = 0; i < WIDE; i++)
        goro_chan_free(chs[i]);
    return r;
}

static long receive_global(void *arg)
{
    (void)arg;
    int v;
    return goro_chan_recv(global_ch, &v);
}

START_TEST(receive_nobody_can_answer_is_a_leak)
{
    if (!leaks_run_here("receive_nobody_can_answer_is_a_leak"))
        return;
    leaks_before = goro_leaks(NULL);
    goro_t *lonely, *held, *wide;
    goro_spawn(&lonely, &(goro_attr_t){ .name = "lonely" }, lonely_receiver, NULL);
    goro_spawn(&wide, &(goro_attr_t){ .name = "wide" }, lonely_wide_select, NULL);
    global_ch = t_chan_new(sizeof(int), 0);
    goro_spawn(&held, &(goro_attr_t){ .name = "held" }, receive_global, NULL);
    settle();
    static char text[1 << 16];
    int n = leaks(text, sizeof text);
    if (channels_judged()) {
        ck_assert_msg(n == 2, "%d: %s", n, text);
        ck_assert_msg(t_count_lines(text, "  coroutine ", "\"lonely\" waits: chan recv 0x", NULL) == 1,
                      "%s", text);
        ck_assert_msg(t_count_lines(text, "  coroutine ", "\"wide\" waits: select 0x", NULL) == 1,
                      "%s", text);
        ck_assert_msg(t_count_lines(text, "    nothing live refers to channel 0x", NULL) == 1 + WIDE,
                      "%s", text);
        ck_assert_msg(!strstr(text, "\"held\""), "%s", text);
    }
    goro_cancel(lonely);
    goro_join(lonely, NULL);
    goro_cancel(wide);
    goro_join(wide, NULL);
    int v = 1;
    goro_chan_send(global_ch, &v);
    goro_join(held, NULL);
    goro_chan_free(global_ch);
    (void)n;
}
END_TEST

/* A parent gives its child a channel to answer on, then gives up on the
 * answer (here: when told) and ends: the child is left sending. */
static goro_t *forgotten;
static goro_chan_t *parent_go;

static long send_answer(goro_chan_t *ch)
{
    int v = 42;
    int r = goro_chan_send(ch, &v);
    if (r == -ECANCELED)
        goro_chan_free(ch);         /* nobody else will: the parent is gone */
    return r;
}

static long parent(void *arg)
{
    (void)arg;
    goro_chan_t *answer = t_chan_new(sizeof(int), 0);
    goro_go(&forgotten, &(goro_attr_t){ .name = "forgotten" }, send_answer, answer);
    int go = 0;
    goro_chan_recv(parent_go, &go);  /* told to take the answer, or give up */
    int v = 0;
    if (go == 2)
        goro_chan_recv(answer, &v);  /* keeps answer live across the wait */
    return v;
}

START_TEST(forgotten_child_is_a_leak_once_its_parent_is_gone)
{
    if (!leaks_run_here("forgotten_child_is_a_leak_once_its_parent_is_gone"))
        return;
    leaks_before = goro_leaks(NULL);
    parent_go = t_chan_new(sizeof(int), 0);
    goro_t *p = go(parent, NULL);
    ck_assert_ptr_nonnull(p);
    settle();
    static char text[1 << 16];
    int n = leaks(text, sizeof text);
    ck_assert_msg(n == 0, "the parent still holds the channel: %d: %s", n, text);
    int go = 1;
    goro_chan_send(parent_go, &go);
    goro_join(p, NULL);
    settle();
    n = leaks(text, sizeof text);
    if (channels_judged()) {
        ck_assert_msg(n == 1, "%d: %s", n, text);
        ck_assert_msg(t_count_lines(text, "  coroutine ", "\"forgotten\" waits: chan send 0x", NULL) == 1,
                      "%s", text);
        ck_assert_msg(t_count_lines(text, "", "send_answer", NULL) >= 1, "%s", text);
        /* goro_dump says so too */
        static char dump[1 << 16];
        FILE *f = fmemopen(dump, sizeof dump, "w");
        goro_dump(f);
        fclose(f);
        dump[sizeof dump - 1] = '\0';
        if (leaks_before == 0)
            ck_assert_msg(t_count_lines(dump, "goro: 1 leaked coroutine (goro_leaks says which)",
                                        NULL) == 1, "%s", dump);
    }
    goro_cancel(forgotten);
    goro_join(forgotten, NULL);
    goro_chan_free(parent_go);
    (void)n;
}
END_TEST

static goro_mutex_t abandoned = GORO_MUTEX_INIT;

static long lock_and_leave(void *arg)
{
    (void)arg;
    return goro_mutex_lock(&abandoned);   /* never unlocked */
}

static long lock_abandoned(void *arg)
{
    (void)arg;
    int err = goro_mutex_lock(&abandoned);
    return err;
}

START_TEST(lock_held_by_an_ended_coroutine_is_a_leak)
{
    if (!leaks_run_here("lock_held_by_an_ended_coroutine_is_a_leak"))
        return;
    leaks_before = goro_leaks(NULL);
    goro_t *h;
    goro_spawn(&h, &(goro_attr_t){ .name = "leaver" }, lock_and_leave, NULL);
    goro_join(h, NULL);
    goro_spawn(&h, &(goro_attr_t){ .name = "waiter" }, lock_abandoned, NULL);
    settle();
    static char text[1 << 16];
    int n = leaks(text, sizeof text);
    ck_assert_msg(n == 1, "%d: %s", n, text);
    ck_assert_msg(t_count_lines(text, "  coroutine ", "\"waiter\" waits: mutex 0x",
                                ", which has ended", NULL) == 1, "%s", text);
    goro_cancel(h);
    long r;
    goro_join(h, &r);
    ck_assert_int_eq(r, -ECANCELED);
    abandoned = (goro_mutex_t)GORO_MUTEX_INIT;
}
END_TEST

Suite *deadlock_suite(void)
{
    Suite *s = suite_create("deadlock");
    TCase *tc = t_runtime_tcase(s, "leaks", 60);
    tcase_add_test(tc, mutex_cycle_is_a_leak);
    tcase_add_test(tc, receive_nobody_can_answer_is_a_leak);
    tcase_add_test(tc, forgotten_child_is_a_leak_once_its_parent_is_gone);
    tcase_add_test(tc, lock_held_by_an_ended_coroutine_is_a_leak);
    tc = t_tcase(s, "child", 90);
    tcase_add_test(tc, two_mutex_cycle_aborts_with_the_cycle);
    tcase_add_test(tc, callback_gets_the_report_and_may_cancel);
    tcase_add_test(tc, report_mode_reports_and_goes_on);
    tcase_add_test(tc, waits_the_outside_may_end_are_no_deadlock);
    tcase_add_test(tc, a_woken_thread_that_has_not_run_is_no_deadlock);
    return s;
}
