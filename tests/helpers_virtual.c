/* Helpers for deterministic tests and for proving them so: a test body run
 * on the virtual clock in a child process (t_virtual), and the host's
 * stalls injected on purpose (t_stall_inject_start). See helpers.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

/* Check's own: whether a failed ck_assert ends the process (_exit) or
 * longjmps back into the runner. Not in check.h, but exported; the child
 * below needs the former whatever mode the runner is in (see there). */
void set_fork_status(enum fork_status fstat);

/* ---- a body on the virtual clock ---- */

struct virtual_run {
    void (*body)(void *);
    void *arg;
    uint64_t seed;
    bool on_thread;
};

static void virtual_coroutine(struct virtual_run *v)
{
    v->body(v->arg);
}

static int virtual_child(void *p)
{
    struct virtual_run *v = p;
    /* A ck_assert here (a fixture's, on this thread) must end this child,
     * not longjmp into the copy of the runner it inherited: with
     * CK_FORK=no that copy would go on running the rest of the suite. */
    set_fork_status(CK_FORK);
    t_fail_reset();
    int e = goro_start(&(goro_config_t){ .clock = GORO_CLOCK_VIRTUAL, .seed = v->seed });
    if (e != 0) {
        printf("goro_start on the virtual clock: %s\n", strerror(-e));
        return 10;
    }
    if (v->on_thread) {
        v->body(v->arg);
    } else {
        goro_t *g;
        if ((e = goro_go(&g, NULL, virtual_coroutine, v)) != 0 || (e = goro_join(g, NULL)) != 0) {
            printf("the body's coroutine: %s\n", strerror(-e));
            return 11;
        }
    }
    if (t_failed())
        return 12;                  /* t_fail printed the message already */
    /* every coroutine the body started has ended (shutdown waits for
     * them: one left waiting shows as the child's timeout) */
    if ((e = goro_shutdown()) != 0) {
        printf("goro_shutdown: %s\n", strerror(-e));
        return 13;
    }
    return 0;
}

/* The line of the child's output that t_fail wrote, or all of it. */
static const char *failure_of(const char *out)
{
    const char *f = strstr(out, "t_fail: ");
    return f ? f + 8 : out;
}

void t_virtual_seeded(void (*body)(void *), void *arg, uint64_t seed, bool on_thread)
{
    struct virtual_run v = { body, arg, seed, on_thread };
    static char out[1 << 15];
    /* The host's watchers are threads too: with them running, the fork
     * below would be a multi-threaded one (TSan refuses to start threads
     * after it). The virtual clock has no use for them. */
    t_host_watch_end();
    int st = t_run_child(virtual_child, &v, t_timeout(60), out, sizeof out);
    /* what the body printed (figures) goes on to the test's output */
    fputs(out, stdout);
    ck_assert_msg(st >= 0, "virtual clock, seed %llu: the child did not end (timeout)\n%s",
                  (unsigned long long)seed, out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "virtual clock, seed %llu, %s: %s", (unsigned long long)seed,
                  WIFEXITED(st) ? "failed" : strsignal(WTERMSIG(st)), failure_of(out));
}

void t_virtual(void (*body)(void *), void *arg)
{
    t_virtual_seeded(body, arg, 1, false);
}

/* ---- the host's stalls, on purpose ---- */

static pid_t injector;

/* The injector: a process of its own (so that it does not stop itself)
 * that stops the test process group - the runner and every test child it
 * forks - for 50-200 ms at random, every 100-600 ms, as a host shared
 * with others does now and then. It dies with the runner. */
static void inject_loop(pid_t group, uint32_t rnd)
{
    for (;;) {
        t_nap((100 + t_rnd(&rnd) % 500) / 1000.0);
        if (getppid() == 1 || kill(-group, SIGSTOP) != 0)
            _exit(0);
        t_nap((50 + t_rnd(&rnd) % 150) / 1000.0);
        kill(-group, SIGCONT);
    }
}

bool t_stall_injecting(void)
{
    const char *s = getenv("GORO_TEST_STALL_INJECT");
    return s && *s && strcmp(s, "0") != 0;
}

void t_stall_inject_start(void)
{
    if (!t_stall_injecting() || injector)
        return;
    /* Its own process group, so that the stops reach this process and
     * its test children but not the shell or make that started it. */
    if (getpgrp() != getpid())
        setpgid(0, 0);
    pid_t group = getpgrp();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("stall injector: fork");
        return;
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        inject_loop(group, (uint32_t)time(NULL) | 1);
    }
    injector = pid;
    fprintf(stderr, "GORO_TEST_STALL_INJECT: process %d stops this one for 50-200 ms at random\n",
            (int)pid);
}

void t_stall_inject_stop(void)
{
    if (!injector)
        return;
    kill(injector, SIGKILL);
    while (waitpid(injector, NULL, 0) < 0 && errno == EINTR)
        ;
    injector = 0;
    kill(0, SIGCONT);               /* in case it died between a stop and its end */
}
