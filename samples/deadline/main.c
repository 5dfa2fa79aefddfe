/* deadline: periodic coroutines with deadlines among CPU-bound spinners
 * and an echo load (docs/deadline.md).
 *
 *   deadline [seconds] [off]
 *
 * Three periodic tasks - a short, frequent one (1 ms of work due 2 ms
 * into each 4 ms period), a mixer (2 ms due at 8 of 10) and a logger
 * (4 ms due at 20 of 20) - run beside 4 spinners that never wait and 64
 * echo pairs over socket pairs. Each prints how many of its jobs ended
 * after their deadline. With reservations (the default) they run first,
 * earliest deadline first, and none misses; with "off" they are ordinary
 * coroutines and wait behind the spinners' slices. */
#define _GNU_SOURCE
#include <goro.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MS GORO_MSEC

static atomic_int stop;
static double iters_per_ns;         /* the spin loop's speed, measured at start */
static bool reserved = true;

struct task {
    const char *name;
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
        work(t->dl.runtime * 8 / 10);       /* 80% of its reservation */
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

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    reserved = !(argc > 2 && strcmp(argv[2], "off") == 0);
    calibrate();
    struct task tasks[] = {
        { "pink  (1/2/4 ms)", { 1 * MS, 2 * MS, 4 * MS }, 0, 0, 0 },
        { "mixer (2/8/10 ms)", { 2 * MS, 8 * MS, 10 * MS }, 0, 0, 0 },
        { "log   (4/20/20 ms)", { 4 * MS, 20 * MS, 20 * MS }, 0, 0, 0 },
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
        int e = goro_spawn(&hs[n++], reserved ? GORO_ATTR(.deadline = &tasks[i].dl) : NULL,
                           periodic, &tasks[i]);
        if (e != 0) {
            fprintf(stderr, "%s: %s\n", tasks[i].name, strerror(-e));
            return 1;
        }
    }
    usleep((useconds_t)(seconds * 1e6));
    atomic_store(&stop, 1);
    for (int i = 0; i < n; i++)
        goro_join(hs[i], NULL);
    printf("%s, %d workers, %.1f s, %d spinners, %d echo pairs\n",
           reserved ? "reserved (deadline class)" : "ordinary coroutines (off)", goro_workers(),
           seconds, NSPIN, NECHO);
    long total = 0;
    for (int i = 0; i < NT; i++) {
        printf("  %-20s %6ld jobs, %5ld missed, worst %.2f ms late\n", tasks[i].name,
               tasks[i].jobs, tasks[i].misses, (double)tasks[i].worst / MS);
        total += tasks[i].misses;
    }
    printf("misses: %ld\n", total);
    goro_shutdown();
    return 0;
}
