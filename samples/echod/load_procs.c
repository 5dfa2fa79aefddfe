/* echoload's parent process: forks the load processes (echoload.c), keeps
 * the one clock of the run - connect, warm up, measure, stop, hold, close -
 * and adds up what they report. It does not use goro itself: it only waits
 * on pipes, with poll(). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "echoload.h"

struct child {
    pid_t pid;
    int report_fd, control_fd;
    long first, count;              /* its connections */
    bool connected, final, gone;
    struct report latest;           /* its latest counters */
};

static struct {
    const struct load_options *opt;
    struct child *kids;
    int nkids;
    const char *phase;              /* for the progress line */
    int64_t started, last_line;     /* ns */
    int64_t recent_rounds;          /* since the last progress line */
    struct hist recent;
    int64_t measured_rounds;
    struct hist measured;
    long lost;                      /* connections of processes that died */
    double server_cpu[2];           /* --server-pid's CPU seconds at measure, stop */
} run;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t seconds_ns(double s)
{
    return (int64_t)(s * 1e9);
}

/* The CPU seconds (user + system, every thread) process pid has used,
 * from /proc/PID/stat; -1 when it cannot be read (the server is gone). */
static double cpu_seconds(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* After the command name's closing parenthesis (the name may hold
     * spaces): state is field 3, utime and stime fields 14 and 15. */
    const char *p = strrchr(buf, ')');
    unsigned long long ut, st;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                     &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void sample_server(int which)
{
    if (run.opt->server_pid)
        run.server_cpu[which] = cpu_seconds(run.opt->server_pid);
}

/* ---- starting the load processes ---- */

static void start_child(struct child *k, int index)
{
    int report[2], control[2];
    if (pipe(report) != 0 || pipe(control) != 0) {
        perror("echoload: pipe");
        exit(1);
    }
    fflush(NULL);                   /* nothing buffered gets written twice */
    k->pid = fork();
    if (k->pid < 0) {
        perror("echoload: fork");
        exit(1);
    }
    if (k->pid == 0) {
        for (int i = 0; i < index; i++) {   /* the earlier children's pipes */
            close(run.kids[i].report_fd);
            close(run.kids[i].control_fd);
        }
        close(report[0]);
        close(control[1]);
        _exit(load_process(run.opt, index, k->first, k->count, report[1], control[0]));
    }
    close(report[1]);
    close(control[0]);
    k->report_fd = report[0];
    k->control_fd = control[1];
}

static void start_children(void)
{
    const struct load_options *opt = run.opt;
    long first = 0;
    run.nkids = opt->procs;
    run.kids = calloc((size_t)run.nkids, sizeof *run.kids);
    if (!run.kids) {
        fputs("echoload: out of memory\n", stderr);
        exit(1);
    }
    for (int i = 0; i < run.nkids; i++) {
        struct child *k = &run.kids[i];
        k->first = first;
        k->count = opt->conns / opt->procs + (i < opt->conns % opt->procs);
        first += k->count;
        start_child(k, i);
    }
}

static void tell_all(char cmd)
{
    for (int i = 0; i < run.nkids; i++)
        if (!run.kids[i].gone && write(run.kids[i].control_fd, &cmd, 1) != 1)
            run.kids[i].gone = true;
}

/* ---- reports ---- */

static long sum(size_t field_offset)
{
    long total = 0;
    for (int i = 0; i < run.nkids; i++)
        total += *(const int64_t *)((const char *)&run.kids[i].latest + field_offset);
    return total;
}

static long errors_so_far(void)
{
    return sum(offsetof(struct report, connect_errors)) + sum(offsetof(struct report, io_errors)) +
           sum(offsetof(struct report, verify_errors)) + sum(offsetof(struct report, silent)) +
           run.lost;
}

static void take(struct child *k, const struct report *r)
{
    k->latest = *r;
    switch (r->kind) {
    case REPORT_PROGRESS:
        run.recent_rounds += r->rounds;
        hist_merge(&run.recent, &r->hist);
        break;
    case REPORT_CONNECTED:
        k->connected = true;
        break;
    case REPORT_FINAL:
        k->final = true;
        run.measured_rounds += r->rounds;
        hist_merge(&run.measured, &r->hist);
        break;
    }
}

/* A load process ended (or broke its pipe) before its final report: all
 * its connections count as failed. */
static void lose(struct child *k)
{
    k->gone = true;
    close(k->report_fd);
    if (!k->final) {
        fprintf(stderr, "echoload: load process %d ended early\n", (int)(k - run.kids));
        run.lost += k->count;
        k->connected = k->final = true;     /* nothing more to wait for */
    }
}

static void receive(struct child *k)
{
    static struct report r;
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = read(k->report_fd, (char *)&r + got, sizeof r - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            lose(k);
            return;
        }
        got += (size_t)n;
    }
    take(k, &r);
}

/* ---- progress ---- */

static void progress_line(void)
{
    int64_t now = now_ns();
    double seconds = (double)(now - run.last_line) / 1e9;
    /* A second with no round trip (the first, while connecting) has no
     * latency to show: zeros there would read as a failure. */
    if (!run.opt->quiet && seconds > 0 && run.recent_rounds == 0)
        fprintf(stderr, "echoload: %4.0fs %-9s conns=%ld/%ld (no round trip this second) errors=%ld\n",
                (double)(now - run.started) / 1e9, run.phase,
                sum(offsetof(struct report, connected)), run.opt->conns, errors_so_far());
    else if (!run.opt->quiet && seconds > 0)
        fprintf(stderr, "echoload: %4.0fs %-9s conns=%ld/%ld rt/s=%.0f p50=%.0fus p99=%.0fus "
                "errors=%ld\n", (double)(now - run.started) / 1e9, run.phase,
                sum(offsetof(struct report, connected)), run.opt->conns,
                (double)run.recent_rounds / seconds,
                (double)hist_quantile(&run.recent, 0.5) / 1e3,
                (double)hist_quantile(&run.recent, 0.99) / 1e3, errors_so_far());
    run.last_line = now;
    run.recent_rounds = 0;
    memset(&run.recent, 0, sizeof run.recent);
}

/* ---- the timeline ---- */

/* Takes reports until deadline (ns) passes or, with a condition, until it
 * holds for every process that is still there. Prints progress each second. */
static void pump(int64_t deadline, bool (*until)(const struct child *))
{
    struct pollfd fds[run.nkids];
    for (;;) {
        bool done = until != NULL;
        int n = 0;
        for (int i = 0; i < run.nkids; i++) {
            if (until && !until(&run.kids[i]))
                done = false;
            if (!run.kids[i].gone)
                fds[n++] = (struct pollfd){ .fd = run.kids[i].report_fd, .events = POLLIN };
        }
        int64_t now = now_ns();
        if (done || (deadline && now >= deadline))
            return;
        int64_t next_line = run.last_line + 1000000000;
        if (now >= next_line) {
            progress_line();
            continue;
        }
        int64_t wake = deadline && deadline < next_line ? deadline : next_line;
        if (poll(fds, (nfds_t)n, (int)((wake - now) / 1000000) + 1) < 0 && errno != EINTR)
            return;
        for (int i = 0, j = 0; i < run.nkids; i++)
            if (!run.kids[i].gone && (fds[j++].revents & (POLLIN | POLLHUP | POLLERR)))
                receive(&run.kids[i]);
    }
}

static bool has_connected(const struct child *k) { return k->connected; }
static bool has_finished(const struct child *k) { return k->final; }
static bool has_gone(const struct child *k) { return k->gone; }

/* Returns the seconds measured. */
static double drive(void)
{
    const struct load_options *opt = run.opt;
    run.started = run.last_line = now_ns();
    run.phase = "connecting";
    pump(0, has_connected);
    bool any = sum(offsetof(struct report, connected)) > 0;
    if (any) {
        run.phase = "warm-up";
        pump(now_ns() + seconds_ns(opt->warmup), NULL);
        tell_all(CONTROL_MEASURE);
        sample_server(0);
    }
    int64_t t0 = now_ns();
    if (any) {
        run.phase = "measuring";
        pump(t0 + seconds_ns(opt->duration), NULL);
    }
    tell_all(CONTROL_STOP);
    sample_server(1);
    int64_t t1 = now_ns();
    run.phase = "stopping";
    pump(0, has_finished);
    if (opt->hold > 0) {
        run.phase = "holding";
        fprintf(stderr, "echoload: holding %ld connections open for %g s\n",
                sum(offsetof(struct report, connected)), opt->hold);
        pump(now_ns() + seconds_ns(opt->hold), NULL);
    }
    tell_all(CONTROL_CLOSE);
    run.phase = "closing";
    pump(0, has_gone);
    return (double)(t1 - t0) / 1e9;
}

/* ---- the result ---- */

static int reap(void)
{
    int bad = 0;
    for (int i = 0; i < run.nkids; i++) {
        int status;
        if (waitpid(run.kids[i].pid, &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            bad++;
    }
    return bad;
}

static long us(int64_t ns)
{
    return (long)((ns + 500) / 1000);
}

static void summary(double measured, long errors)
{
    const struct load_options *opt = run.opt;
    long connected = sum(offsetof(struct report, connected));
    double rtps = measured > 0 ? (double)run.measured_rounds / measured : 0;
    long p50 = us(hist_quantile(&run.measured, 0.5));
    long p99 = us(hist_quantile(&run.measured, 0.99));
    long p999 = us(hist_quantile(&run.measured, 0.999));

    bool lean = opt->engine == ENGINE_EPOLL;
    int threads = lean ? 1 : opt->workers;
    printf("echoload: %ld of %ld connections to %s port %d from %d source address%s, "
           "%d process%s x %d %s%s\n", connected, opt->conns, opt->host_text, opt->port,
           opt->sources, opt->sources > 1 ? "es" : "", opt->procs, opt->procs > 1 ? "es" : "",
           threads, lean ? "epoll thread" : "worker", threads > 1 ? "s" : "");
    printf("echoload: %.2f s measured after %g s warm-up: %lld round trips of %zu B, %.0f/s%s\n",
           measured, opt->warmup, (long long)run.measured_rounds, opt->size, rtps,
           opt->verify ? ", every byte checked" : "");
    printf("echoload: latency p50 %ld us, p99 %ld us, p99.9 %ld us\n", p50, p99, p999);
    printf("echoload: errors %ld (connect %ld, i/o %ld, verify %ld, never echoed %ld, "
           "lost with a process %ld)\n", errors, sum(offsetof(struct report, connect_errors)),
           sum(offsetof(struct report, io_errors)), sum(offsetof(struct report, verify_errors)),
           sum(offsetof(struct report, silent)), run.lost);
    double cpu = run.server_cpu[1] - run.server_cpu[0];
    bool have_cpu = opt->server_pid && run.server_cpu[0] >= 0 && run.server_cpu[1] >= 0 &&
                    run.measured_rounds > 0;
    double cpu_us = have_cpu ? cpu * 1e6 / (double)run.measured_rounds : 0;
    if (have_cpu)
        printf("echoload: server pid %d used %.2f s of CPU over the %.2f s measured "
               "(%.0f%% of one CPU): %.2f us per round trip\n", opt->server_pid, cpu,
               measured, measured > 0 ? cpu * 100 / measured : 0, cpu_us);
    printf("RESULT conns=%ld size=%zu duration=%g rtps=%.0f p50_us=%ld p99_us=%ld "
           "p999_us=%ld errors=%ld", connected, opt->size, opt->duration, rtps, p50, p99,
           p999, errors);
    if (have_cpu)
        printf(" server_cpu_us_per_rt=%.2f", cpu_us);
    putchar('\n');
    fflush(stdout);
}

/* SIGINT/SIGTERM to the parent alone (a script stopping it) ends the load
 * processes too, rather than leaving them to finish on their own. Only
 * async-signal-safe calls here. */
static void on_stop_signal(int sig)
{
    for (int i = 0; i < run.nkids; i++)
        if (run.kids[i].pid > 0)
            kill(run.kids[i].pid, SIGTERM);
    _exit(128 + sig);
}

int run_load(const struct load_options *opt)
{
    run.opt = opt;
    signal(SIGPIPE, SIG_IGN);       /* a dead child's control pipe: see reap() */
    start_children();
    signal(SIGINT, on_stop_signal);     /* after the fork: children keep the default */
    signal(SIGTERM, on_stop_signal);
    double measured = drive();
    int crashed = reap();
    long errors = errors_so_far();
    if (crashed && !run.lost)
        errors += crashed;          /* a process that failed after reporting */
    summary(measured, errors);
    return errors > 0 && !opt->allow_errors ? 1 : 0;
}
