/* spawn_pthread.c - OS thread spawn cost.
 *
 * Measures: ns per pthread_create + pthread_join of a thread that runs a
 * trivial function (default attributes, so default 8 MiB mmap'd stack,
 * usually recycled by glibc's stack cache). Comparable to goro's spawn
 * benchmark (create + run + exit + wait of a trivial coroutine) as the
 * "what it costs with plain threads" baseline. Best (minimum) of 5
 * repetitions.
 *
 * Output: name=spawn impl=pthread value=<ns> unit=ns
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#define SPAWNS 5000L /* per repetition */
#define REPS 5

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *trivial(void *arg)
{
    return arg;
}

static int spawn_join(void)
{
    pthread_t t;
    void *ret;
    if (pthread_create(&t, NULL, trivial, NULL) != 0)
        return -1;
    if (pthread_join(t, &ret) != 0)
        return -1;
    return 0;
}

int main(void)
{
    for (int i = 0; i < 1000; i++) /* warm-up (fills glibc stack cache) */
        if (spawn_join() != 0) {
            fprintf(stderr, "spawn_pthread: pthread_create/join failed\n");
            return 1;
        }

    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < SPAWNS; i++)
            if (spawn_join() != 0) {
                fprintf(stderr, "spawn_pthread: pthread_create/join failed\n");
                return 1;
            }
        double t = (now_ns() - t0) / SPAWNS;
        if (t < best)
            best = t;
    }
    printf("name=spawn impl=pthread value=%.2f unit=ns\n", best);
    return 0;
}
