/* deadline: periodic coroutines with deadlines among CPU-bound spinners
 * and an echo load (docs/deadline.md).
 *
 *   deadline [-o timeline.svg] [seconds] [off | overrun]
 *
 * Three periodic tasks - a short, frequent one (1 ms of work due 2 ms
 * into each 4 ms period), a mixer (2 ms due at 8 of 10) and a logger
 * (4 ms due at 20 of 20) - run beside 4 spinners that never wait and 64
 * echo pairs over socket pairs. Each prints how many of its jobs ended
 * after their deadline. With reservations (the default) they run first,
 * earliest deadline first, and none misses; with "off" they are ordinary
 * coroutines and wait behind the spinners' slices. With "overrun" the
 * short task's jobs take 2.5 ms where they cannot be preempted: each ends
 * past its deadline (a miss), and what it overran is a debt its next
 * period pays by waiting (throttled) - while the others still meet theirs.
 *
 * -o file.svg traces the run's first 180 ms (kept beside it as
 * file.svg.json) and draws the reserved coroutines' timeline from 100 to
 * 180 ms with goro-trace-svg --reserved (tools/ of the source tree, else
 * PATH): when each ran, its periods and deadlines, throttles and misses
 * (docs/deadline.md); with "off", the workers and the busiest coroutines.
 * The trace begins before the spawns, which name the coroutines in it. */
#define _GNU_SOURCE
#include <goro.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS GORO_MSEC

static atomic_int stop;
static double iters_per_ns;         /* the spin loop's speed, measured at start */
static bool reserved = true;

struct task {
    const char *name;
    const char *tag;                /* its coroutine's name */
    bool overruns;                  /* "overrun": 2.5 times its runtime, unpreemptible */
    goro_dl_t dl;
    long jobs, misses;
    int64_t worst;
};

/* CPU work of about ns. */
static void work(int64_t ns)
{
    long n = (long)(iters_per_ns * (double)ns);
    for (volatile long i = 0; i < n; i++)
        ;
}

static void calibrate(void)
{
    struct timespec a, b;
    long n = 20000000;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (volatile long i = 0; i < n; i++)
        ;
    clock_gettime(CLOCK_MONOTONIC, &b);
    iters_per_ns = (double)n / (double)((b.tv_sec - a.tv_sec) * 1000000000L + b.tv_nsec - a.tv_nsec);
}

static long periodic(void *arg)
{
    struct task *t = arg;
    int64_t release = goro_now();
    while (!atomic_load(&stop)) {
        /* An overrunning job ends (goro_dl_next) inside its section: left
         * first, it would be preempted and charged, and the refill would
         * move its deadline on before the job's end is compared with it. */
        if (t->overruns) {
            goro_preempt_disable();
            work(t->dl.runtime * 5 / 2);
        } else {
            work(t->dl.runtime * 8 / 10);   /* 80% of its reservation */
        }
        int64_t late = goro_now() - (release + t->dl.deadline);
        t->jobs++;
        if (late > 0) {
            t->misses++;
            if (late > t->worst)
                t->worst = late;
        }
        release += t->dl.period;
        if (reserved) {
            goro_dl_next();
            if (t->overruns)
                goro_preempt_enable();
            goro_dl_stats_t s;
            goro_dl_stats(NULL, &s);
            release = s.abs_deadline - t->dl.deadline;
        } else {
            int64_t now = goro_now();
            if (release < now)
                release = now;          /* behind: the next job starts at once */
            goro_sleep_until(release);
        }
    }
    return 0;
}

static long spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        work(MS);
    return 0;
}

static long echo_server(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[64];
    ssize_t n;
    while ((n = goro_read(fd, buf, sizeof buf)) > 0)
        if (goro_write(fd, buf, (size_t)n) != n)
            break;
    goro_close(fd);
    return 0;
}

static long echo_client(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[64] = "ping";
    while (!atomic_load(&stop)) {
        if (goro_write(fd, buf, 16) != 16 || goro_read_full(fd, buf, 16) != 16)
            break;
        goro_sleep(100 * GORO_USEC);
    }
    goro_close(fd);
    return 0;
}

#define DRAW_FROM 100000               /* us into the trace: past the start */
#define TRACE_FOR 0.18                  /* s: DRAW_FROM and 80 ms to draw in detail */

/* Sleeps through the run, whose first TRACE_FOR the trace started before
 * the spawns records. */
static int run_traced(double seconds)
{
    double traced = seconds < TRACE_FOR ? seconds : TRACE_FOR;
    usleep((useconds_t)(traced * 1e6));
    int e = goro_trace_stop();
    if (e != 0)
        fprintf(stderr, "trace: %s\n", strerror(-e));
    if (seconds > traced)
        usleep((useconds_t)((seconds - traced) * 1e6));
    return e;
}

/* goro-trace-svg --reserved json svg (without reservations: the workers
 * and the busiest coroutines): 0, or why not. */
static int draw(const char *json, const char *svg)
{
    const char *tool = access("tools/goro-trace-svg", R_OK) == 0 ? "tools/goro-trace-svg"
                                                                 : "goro-trace-svg";
    char from[32], to[32];
    snprintf(from, sizeof from, "%d", DRAW_FROM);
    snprintf(to, sizeof to, "%d", (int)(TRACE_FOR * 1e6));
    char *argv[] = { (char *)tool, "--width", "1000", "--from", from, "--to", to, (char *)json,
                     (char *)svg, reserved ? "--reserved" : NULL, NULL };
    pid_t pid;
    int st, e = posix_spawnp(&pid, tool, NULL, NULL, argv, NULL);
    if (e != 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "%s %s: failed (%s)\n", tool, json, e ? strerror(e) : "see above");
        return 1;
    }
    printf("timeline: %s (the trace: %s)\n", svg, json);
    return 0;
}

int main(int argc, char **argv)
{
    const char *svg = NULL;
    if (argc > 2 && strcmp(argv[1], "-o") == 0) {
        svg = argv[2];
        argc -= 2;
        argv += 2;
    }
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    reserved = !(argc > 2 && strcmp(argv[2], "off") == 0);
    bool overrun = argc > 2 && strcmp(argv[2], "overrun") == 0;
    char json[4096];
    if (svg && snprintf(json, sizeof json, "%s.json", svg) >= (int)sizeof json)
        return fprintf(stderr, "-o: name too long\n"), 1;
    calibrate();
    int e;
    if (svg && (e = goro_trace_start(json, NULL)) != 0)
        return fprintf(stderr, "trace %s: %s\n", json, strerror(-e)), 1;
    struct task tasks[] = {
        { "pink  (1/2/4 ms)", "pink 1/2/4", overrun, { 1 * MS, 2 * MS, 4 * MS }, 0, 0, 0 },
        { "mixer (2/8/10 ms)", "mixer 2/8/10", false, { 2 * MS, 8 * MS, 10 * MS }, 0, 0, 0 },
        { "log   (4/20/20 ms)", "log 4/20/20", false, { 4 * MS, 20 * MS, 20 * MS }, 0, 0, 0 },
    };
    enum { NT = 3, NSPIN = 4, NECHO = 64 };
    goro_t *hs[NT + NSPIN + 2 * NECHO];
    int n = 0;
    for (int i = 0; i < NSPIN; i++)
        if (goro_spawn(&hs[n++], NULL, spinner, NULL) != 0)
            return perror("spawn"), 1;
    for (int i = 0; i < NECHO; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            return perror("socketpair"), 1;
        goro_spawn(&hs[n++], NULL, echo_server, (void *)(intptr_t)sv[0]);
        goro_spawn(&hs[n++], NULL, echo_client, (void *)(intptr_t)sv[1]);
    }
    for (int i = 0; i < NT; i++) {
        goro_attr_t attr = { .name = tasks[i].tag, .deadline = reserved ? &tasks[i].dl : NULL };
        e = goro_spawn(&hs[n++], &attr, periodic, &tasks[i]);
        if (e != 0) {
            fprintf(stderr, "%s: %s\n", tasks[i].name, strerror(-e));
            return 1;
        }
    }
    int traced = -1;
    if (svg)
        traced = run_traced(seconds);
    else
        usleep((useconds_t)(seconds * 1e6));
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++)
        goro_join(hs[i], NULL);
    printf("%s, %d workers, %.1f s, %d spinners, %d echo pairs\n",
           !reserved ? "ordinary coroutines (off)"
           : overrun ? "reserved, pink overruns unpreemptibly" : "reserved (deadline class)",
           goro_workers(),
           seconds, NSPIN, NECHO);
    long total = 0;
    for (int i = 0; i < NT; i++) {
        printf("  %-20s %6ld jobs, %5ld missed, worst %.2f ms late\n", tasks[i].name,
               tasks[i].jobs, tasks[i].misses, (double)tasks[i].worst / MS);
        total += tasks[i].misses;
    }
    printf("misses: %ld\n", total);
    goro_shutdown();
    if (svg && (traced != 0 || draw(json, svg) != 0))
        return 1;
    return 0;
}
