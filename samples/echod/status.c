/* Counters and the status line. One coroutine prints every line, so the
 * previous sample used for the rate needs no lock; SIGUSR1 pokes it
 * through a channel. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "echod.h"

static _Atomic unsigned long echoed, accepted;
static _Atomic long coroutines;
static goro_chan_t *requests;     /* capacity 1: pokes pile up as one */

void stats_echoed(void)
{
    atomic_fetch_add_explicit(&echoed, 1, memory_order_relaxed);
}

void stats_accepted(void)
{
    atomic_fetch_add_explicit(&accepted, 1, memory_order_relaxed);
}

void stats_coroutine(int delta)
{
    atomic_fetch_add_explicit(&coroutines, delta, memory_order_relaxed);
}

/* Resident bytes: the second field of /proc/self/statm, in pages. */
static long rss_bytes(void)
{
    char text[128];
    long size, resident;
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    if (sscanf(text, "%ld %ld", &size, &resident) != 2)
        return -1;
    return resident * sysconf(_SC_PAGESIZE);
}

static void print_line(int64_t *last_time, unsigned long *last_echoed)
{
    int64_t now = goro_now();
    unsigned long e = atomic_load_explicit(&echoed, memory_order_relaxed);
    double seconds = (double)(now - *last_time) / GORO_SEC;
    double rate = seconds > 0 ? (double)(e - *last_echoed) / seconds : 0;

    fprintf(stderr, "echod: status conns=%ld rtps=%.0f rss=%.1fMiB coroutines=%ld "
            "accepted=%lu fd_limit_hits=%lu\n",
            conns_live(), rate, (double)rss_bytes() / (1 << 20),
            atomic_load_explicit(&coroutines, memory_order_relaxed),
            atomic_load_explicit(&accepted, memory_order_relaxed), fd_limit_hits());
    *last_time = now;
    *last_echoed = e;
}

void status_init(void)
{
    if (goro_chan_new(&requests, 0, 1) < 0) {
        fputs("echod: out of memory\n", stderr);
        _exit(1);
    }
}

void status_request(void)
{
    goro_chan_try_send(requests, NULL);   /* -EAGAIN: a line is coming anyway */
}

void status_loop(int64_t interval_ns)
{
    int64_t last_time = goro_now();
    unsigned long last_echoed = 0;
    int64_t next = interval_ns ? last_time + interval_ns : GORO_FOREVER;

    for (;;) {
        int r = goro_chan_recv_until(requests, NULL, next);
        if (r == -ETIMEDOUT) {
            /* Keep the beat; skip beats missed while the machine was busy. */
            int64_t now = goro_now();
            next += interval_ns;
            if (next <= now)
                next = now + interval_ns;
        } else if (r < 0) {
            return;                       /* cancelled: shutting down */
        }
        print_line(&last_time, &last_echoed);
    }
}
