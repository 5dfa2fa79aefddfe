/* The hand-off of a blocked worker (docs/scheduler.md, "Hand-off"; sched.c
 * invariant 8): when a worker's thread is stuck in a blocking system call
 * (or declines preemption for 3 slices), sysmon gives its P - run queue and
 * event base - to another thread; the stuck thread comes back as a spare.
 *
 * randomized_handoff_stress mixes coroutines that block their thread in
 * libc (usleep, nanosleep, read() on a pipe, poll()) with channel traffic,
 * spawn/join trees, sleepers and CPU spinners, for GORO_STRESS_SECONDS
 * (default 2 s; GORO_STRESS_SEED repeats a run's random choices), and then
 * checks that nothing was lost: every coroutine finished and was joined,
 * every message arrived exactly once, no wait ran into its deadline, and
 * never more coroutines computed at once than there are workers.
 *
 * all_workers_blocked_queued_work_runs blocks every worker at once and
 * expects the coroutines queued behind them to run on spare threads.
 *
 * Every wait is bounded (the _until forms, a rescue for pipe readers, a
 * watchdog that dumps the runtime): a lost wake-up fails with a message
 * instead of hanging. Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef GORO_TEST_SQLITE
#include <sqlite3.h>
#endif

#include "helpers.h"
#include "suites.h"

#define SLICE (10 * GORO_MSEC)

/* ---- what both tests share ---- */

/* As sched.c decides it: hand-off needs membarrier (valgrind has none). */
static bool handoff_available(void)
{
    if (t_valgrind())
        return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

static void restart(int workers)
{
    t_restart(&(goro_config_t){ .workers = workers, .slice_ns = SLICE });
}

static long thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Sleeps the whole thread (not just the coroutine) for ns, across EINTR:
 * a SIGURG may land just before sysmon sees the thread blocked. */
static void thread_nanosleep(int64_t ns)
{
    struct timespec ts = { (time_t)(ns / GORO_SEC), (long)(ns % GORO_SEC) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int read_byte(int fd)
{
    char c;
    ssize_t n;
    while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
        ;
    return (int)n;
}

static void write_byte(int fd)
{
    char c = 'x';
    while (write(fd, &c, 1) < 0 && errno == EINTR)
        ;
}

/* Dependent multiply-adds, no call: about 1 ns each. */
static GORO_PREEMPTIBLE uint64_t crunch(uint64_t x, long n)
{
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* Which coroutine ran last on this thread. Not inlined, so that a caller
 * never keeps the address of another thread's copy across a switch. */
static __thread long thread_tag;

static T_NOINLINE long swap_thread_tag(long tag)
{
    long old = thread_tag;
    thread_tag = tag;
    __asm__ volatile("" ::: "memory");
    return old;
}

/* ---- the stress ---- */

enum kind {
    K_USLEEP, K_NANOSLEEP, K_PIPE_THREAD, K_PIPE_CORO, K_POLL,
    K_PRODUCER, K_SPAWNER, K_SLEEPER, K_SPINNER, NKINDS
};
static const char *const kind_names[NKINDS] = {
    "usleep", "nanosleep", "pipe-read(thread writes)", "pipe-read(coroutine writes)",
    "poll", "producer", "spawner", "sleeper", "spinner"
};

enum { NCH = 3, NCONS = 2 * NCH, MAX_DEPTH = 2, MAX_WAKES = 4096 };

/* A reader waiting in read() for the waker thread to write its pipe. */
struct wake_req {
    struct wake_req *next;
    int fd;
    double due;
};

static struct {
    uint32_t seed;
    int workers;
    bool handoff;               /* the runtime hands blocked workers over */
    bool async;                 /* asynchronous preemption is on */
    double end;                 /* no new roots after this */
    double hard_end;            /* spinners and tickers stop, whatever happens */
    double wait_limit;          /* seconds any one wait may last */
    atomic_int stop;            /* the ticker ends */
    atomic_int threads_stop;    /* the waker and the watchdog end */
    atomic_long serial;
    atomic_long spawned, finished, joined;
    atomic_long kinds_run[NKINDS];
    atomic_int running_now, running_max;    /* coroutines between computes_begin/end */
    atomic_int blocked_now, blocked_max;    /* threads in a blocking call of ours */
    atomic_long progress;       /* the watchdog's pulse */
    goro_chan_t *ch[NCH];
    atomic_long next_id;
    long id_cap;
    _Atomic uint64_t *sent, *received;
    atomic_long nsent, nreceived;
    atomic_long spinners_long, spinners_cut;
    atomic_llong ticker_ticks, ticker_max_gap;
    atomic_long rescued;        /* pipe readers whose writer coroutine never ran */
    int quiet_pipe[2];          /* nobody writes it: poll() on it just waits */
    _Atomic(struct wake_req *) wake_reqs;
} hs;

#define SFAIL(fmt, ...) t_fail("seed %u: " fmt, hs.seed, __VA_ARGS__)

static int64_t deadline(void)
{
    return goro_now() + (int64_t)(hs.wait_limit * 1e9);
}

static uint32_t rnd_for(long serial)
{
    uint32_t r = hs.seed ^ (uint32_t)((uint64_t)serial * 0x9e3779b97f4a7c15u >> 32);
    if (!r)
        r = 1;
    t_rnd(&r);
    return r;
}

static void bump_max(atomic_int *max, int v)
{
    int m = atomic_load(max);
    while (v > m && !atomic_compare_exchange_weak(max, &m, v))
        ;
}

static void blocked_begin(void)
{
    bump_max(&hs.blocked_max, atomic_fetch_add(&hs.blocked_now, 1) + 1);
}

static void blocked_end(void)
{
    atomic_fetch_sub(&hs.blocked_now, 1);
    atomic_fetch_add(&hs.progress, 1);
}

/* Computes for 1 us..0.5 ms, counted in running_now. The goro_yield first puts
 * the coroutine on a thread that owns a P: after a blocking call its old
 * thread may have lost it, and runs it only until its next goro call.
 * Inside, no system call (the thread never looks blocked) and no
 * preemption (a suspended coroutine would stay counted): so the thread
 * keeps its P, and running_now can exceed the workers only if two threads
 * use one P or a thread runs coroutines without one. */
static void computes(uint32_t *r, long serial)
{
    goro_yield();
    goro_preempt_disable();
    bump_max(&hs.running_max, atomic_fetch_add(&hs.running_now, 1) + 1);
    if (hs.async)
        swap_thread_tag(serial);    /* a spinner on this thread sees it was cut */
    uint64_t x = crunch(*r, 1000l << (t_rnd(r) % 10));
    atomic_fetch_sub(&hs.running_now, 1);
    goro_preempt_enable();
    *r ^= (uint32_t)x & 1;
    atomic_fetch_add(&hs.progress, 1);
}

static void mark_received(long id, int consumer)
{
    if (id < 0 || id >= hs.id_cap) {
        SFAIL("consumer %d: message id %ld out of range", consumer, id);
        return;
    }
    uint64_t bit = 1ull << (id % 64);
    if (atomic_fetch_or(&hs.received[id / 64], bit) & bit)
        SFAIL("consumer %d: message %ld received twice", consumer, id);
    atomic_fetch_add(&hs.nreceived, 1);
    atomic_fetch_add(&hs.progress, 1);
}

/* Long-lived: receives from one channel, or two through select, with
 * short deadlines (timers racing with senders), until they are closed. */
static void consumer(int c)
{
    uint32_t r = rnd_for(-1 - c);
    goro_chan_t *a = hs.ch[c % NCH], *b = c >= NCH ? hs.ch[(c + 1) % NCH] : NULL;
    long id;
    while (a || b) {
        int64_t until = goro_now() + (int64_t)(1 + t_rnd(&r) % 30) * GORO_MSEC;
        int res;
        if (b) {
            goro_case_t cs[2] = { { a, GORO_RECV, &id, 0 }, { b, GORO_RECV, &id, 0 } };
            int i = goro_select_until(cs, 2, 0, until);
            if (i == -ETIMEDOUT)
                continue;
            if (i < 0) {
                SFAIL("consumer %d: select returned %d", c, i);
                return;
            }
            if ((res = cs[i].result) == 0) {
                *(i == 0 ? &a : &b) = NULL;     /* closed and drained */
                if (!a) {
                    a = b;
                    b = NULL;
                }
                continue;
            }
        } else {
            res = goro_chan_recv_until(a, &id, until);
            if (res == -ETIMEDOUT)
                continue;
            if (res == 0) {
                a = NULL;
                continue;
            }
            if (res < 0) {
                SFAIL("consumer %d: recv returned %d", c, res);
                return;
            }
        }
        mark_received(id, c);
        uint32_t x = t_rnd(&r);
        if (x % 64 == 0) {                       /* block the worker, holding nothing */
            blocked_begin();
            thread_nanosleep(GORO_MSEC);
            blocked_end();
        } else if (x % 8 == 1) {
            computes(&r, -1 - c);
        }
    }
}

/* Sleeps 1 ms at a time until told to stop; the longest lateness says
 * whether timers kept firing while workers were blocked. */
static void ticker(void)
{
    while (!atomic_load(&hs.stop) && t_now() < hs.hard_end) {
        int64_t t0 = goro_now();
        goro_sleep(GORO_MSEC);
        long long late = (long long)(goro_now() - t0 - GORO_MSEC);
        long long m = atomic_load(&hs.ticker_max_gap);
        while (late > m && !atomic_compare_exchange_weak(&hs.ticker_max_gap, &m, late))
            ;
        atomic_fetch_add(&hs.ticker_ticks, 1);
        atomic_fetch_add(&hs.progress, 1);
    }
}

/* Never calls goro while async preemption is on: only preemption lets
 * others run on its thread, which the thread tag shows. Without it (TSan,
 * valgrind) it passes a cooperative point after every chunk. */
static GORO_PREEMPTIBLE void spinner(long serial, double seconds)
{
    double until = t_now() + seconds;
    long cuts = 0;
    if (hs.async)
        swap_thread_tag(serial);
    uint64_t x = (uint64_t)serial;
    while (t_now() < until && t_now() < hs.hard_end) {
        x = crunch(x, 20000);
        if (hs.async) {
            cuts += swap_thread_tag(serial) != serial;
        } else {
            goro_preempt_disable();
            goro_preempt_enable();
        }
    }
    if (hs.async && seconds * 1e9 >= 3 * SLICE) {
        atomic_fetch_add(&hs.spinners_long, 1);
        atomic_fetch_add(&hs.spinners_cut, cuts > 0);
    }
    atomic_fetch_add(&hs.progress, 1 + (long)(x & 1));
}

static void pipe_writer(int fd, int64_t delay)
{
    if (delay)
        goro_sleep(delay);
    else
        goro_yield();
    write_byte(fd);
    atomic_fetch_add(&hs.finished, 1);
}

static void body(long serial, int kind, int depth);

static goro_t *spawn(int kind, int depth)
{
    long serial = atomic_fetch_add(&hs.serial, 1);
    goro_t *h = go(body, serial, kind, depth);
    if (!h)
        SFAIL("go(%s) failed: %s", kind_names[kind], strerror(errno));
    else
        atomic_fetch_add(&hs.spawned, 1);
    return h;
}

static void join(goro_t *h, const char *what)
{
    int e = goro_join_until(h, NULL, deadline());
    if (e == 0)
        atomic_fetch_add(&hs.joined, 1);
    else
        SFAIL("join of a %s coroutine returned %d after %.1f s", what, e, hs.wait_limit);
}

static int random_kind(uint32_t *r, int depth)
{
    for (;;) {
        int k = (int)(t_rnd(r) % NKINDS);
        if (k == K_SPAWNER && depth >= MAX_DEPTH)
            continue;
        /* without hand-off, readers waiting for coroutines could block
         * every worker: the writer would never run */
        if (k == K_PIPE_CORO && !hs.handoff)
            k = K_PIPE_THREAD;
        return k;
    }
}

static int64_t ms_between(uint32_t *r, int lo, int hi)
{
    return (int64_t)(lo + (int)(t_rnd(r) % (uint32_t)(hi - lo + 1))) * GORO_MSEC;
}

static void body(long serial, int kind, int depth)
{
    uint32_t r = rnd_for(serial);
    int rounds = 1 + (int)(t_rnd(&r) % 3);
    atomic_fetch_add(&hs.kinds_run[kind], 1);
    for (int round = 0; round < rounds; round++) {
        switch (kind) {
        case K_USLEEP:
            blocked_begin();
            usleep((useconds_t)(ms_between(&r, 1, 15) / 1000));
            blocked_end();
            break;
        case K_NANOSLEEP:
            blocked_begin();
            thread_nanosleep(ms_between(&r, 1, 15));
            blocked_end();
            break;
        case K_PIPE_THREAD: {
            int fd[2];
            if (pipe2(fd, O_CLOEXEC) != 0) {
                SFAIL("pipe2: %s", strerror(errno));
                break;
            }
            struct wake_req w = { .fd = fd[1], .due = t_now() + (double)ms_between(&r, 1, 15) / 1e9 };
            w.next = atomic_load(&hs.wake_reqs);
            while (!atomic_compare_exchange_weak(&hs.wake_reqs, &w.next, &w))
                ;
            blocked_begin();
            int n = read_byte(fd[0]);       /* the waker thread always writes */
            blocked_end();
            if (n != 1)
                SFAIL("read from a pipe returned %d", n);
            close(fd[0]);
            close(fd[1]);
            break;
        }
        case K_PIPE_CORO: {
            /* the writer lands in this worker's runnext and is stuck behind
             * this reader until the worker is handed over */
            int fd[2];
            if (pipe2(fd, O_CLOEXEC) != 0) {
                SFAIL("pipe2: %s", strerror(errno));
                break;
            }
            goro_t *w = go(pipe_writer, fd[1], t_rnd(&r) % 2 ? ms_between(&r, 0, 5) : 0);
            if (!w) {
                SFAIL("go(pipe_writer): %s", strerror(errno));
                close(fd[0]);
                close(fd[1]);
                break;
            }
            atomic_fetch_add(&hs.spawned, 1);
            struct pollfd pfd = { .fd = fd[0], .events = POLLIN };
            blocked_begin();
            int pr;
            double give_up = t_now() + hs.wait_limit;
            while ((pr = poll(&pfd, 1, (int)(hs.wait_limit * 1e3))) < 0 && errno == EINTR &&
                   t_now() < give_up)
                ;
            if (pr != 1) {
                /* lost: the writer, queued behind us, never ran */
                atomic_fetch_add(&hs.rescued, 1);
                SFAIL("a pipe reader waited %.1f s for its writer coroutine (poll %d)",
                      hs.wait_limit, pr);
                write_byte(fd[1]);
            }
            int n = read_byte(fd[0]);
            blocked_end();
            if (n != 1)
                SFAIL("read from a pipe returned %d", n);
            join(w, "pipe writer");
            close(fd[0]);
            close(fd[1]);
            break;
        }
        case K_POLL: {
            struct pollfd pfd = { .fd = hs.quiet_pipe[0], .events = POLLIN };
            blocked_begin();
            int pr = poll(&pfd, 1, (int)(ms_between(&r, 1, 15) / GORO_MSEC));
            blocked_end();
            if (pr != 0 && !(pr < 0 && errno == EINTR))
                SFAIL("poll on a pipe nobody writes returned %d", pr);
            break;
        }
        case K_PRODUCER: {
            int n = 1 + (int)(t_rnd(&r) % 16);
            for (int i = 0; i < n; i++) {
                long id = atomic_fetch_add(&hs.next_id, 1);
                if (id >= hs.id_cap)
                    break;
                int c = (int)(t_rnd(&r) % NCH);
                int e = goro_chan_send_until(hs.ch[c], &id, deadline());
                if (e != 0) {
                    SFAIL("send of message %ld on channel %d returned %d (%.1f s limit)", id,
                          c, e, hs.wait_limit);
                    break;
                }
                atomic_fetch_or(&hs.sent[id / 64], 1ull << (id % 64));
                atomic_fetch_add(&hs.nsent, 1);
                if (t_rnd(&r) % 4 == 0)
                    computes(&r, serial);
            }
            break;
        }
        case K_SPAWNER: {
            goro_t *h[4];
            int n = 1 + (int)(t_rnd(&r) % 4);
            for (int i = 0; i < n; i++) {
                int k = random_kind(&r, depth + 1);
                h[i] = spawn(k, depth + 1);
            }
            for (int i = 0; i < n; i++)
                if (h[i])
                    join(h[i], "child");
            break;
        }
        case K_SLEEPER:
            if (t_rnd(&r) % 2)
                goro_sleep(ms_between(&r, 0, 3));
            else
                for (int i = (int)(t_rnd(&r) % 8); i >= 0; i--)
                    goro_yield();
            break;
        case K_SPINNER:
            spinner(serial, (double)ms_between(&r, 2, 60) / 1e9);
            break;
        }
        if (kind != K_SPINNER && t_rnd(&r) % 2)
            computes(&r, serial);
    }
    atomic_fetch_add(&hs.finished, 1);
    atomic_fetch_add(&hs.progress, 1);
}

/* A plain thread: writes the pipes of K_PIPE_THREAD readers when due. */
static void *waker_main(void *arg)
{
    (void)arg;
    static struct { int fd; double due; } pending[MAX_WAKES];
    int n = 0;
    while (!atomic_load(&hs.threads_stop) || n > 0 || atomic_load(&hs.wake_reqs)) {
        /* copy the requests: a reader frees its record once written */
        for (struct wake_req *w = atomic_exchange(&hs.wake_reqs, NULL); w;) {
            struct wake_req *next = w->next;
            if (n < MAX_WAKES) {
                pending[n].fd = w->fd;
                pending[n].due = w->due;
                n++;
            } else {
                write_byte(w->fd);
            }
            w = next;
        }
        double now = t_now();
        for (int i = 0; i < n;)
            if (pending[i].due <= now) {
                write_byte(pending[i].fd);
                pending[i] = pending[--n];
            } else {
                i++;
            }
        thread_nanosleep(200 * GORO_USEC);
    }
    return NULL;
}

/* A plain thread: a run without progress for wait_limit is a hang - say
 * so, with a dump of every coroutine, before the Check timeout strikes. */
static void *watchdog_main(void *arg)
{
    (void)arg;
    long last = -1;
    double since = t_now();
    bool dumped = false;
    while (!atomic_load(&hs.threads_stop)) {
        long p = atomic_load(&hs.progress);
        if (p != last) {
            last = p;
            since = t_now();
        } else if (!dumped && t_now() - since > hs.wait_limit) {
            dumped = true;
            SFAIL("no progress for %.1f s (a deadlock or lost wake-up)", hs.wait_limit);
            fprintf(stderr, "handoff stress (seed %u): no progress for %.1f s; the runtime:\n",
                    hs.seed, hs.wait_limit);
            goro_dump(stderr);
        }
        thread_nanosleep(20 * GORO_MSEC);
    }
    return NULL;
}

static double stress_seconds(void)
{
    const char *s = getenv("GORO_STRESS_SECONDS");
    double d = s && *s ? atof(s) : 2.0;
    if (d <= 0)
        d = 2.0;
    return t_valgrind() ? d / 4 : t_slow() ? d / 2 : d;
}

static uint32_t stress_seed(void)
{
    const char *s = getenv("GORO_STRESS_SEED");
    if (s && *s)
        return (uint32_t)strtoul(s, NULL, 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t x = (uint32_t)ts.tv_nsec ^ (uint32_t)getpid() << 16;
    return x ? x : 1;
}

#define CHECK(cond, ...) ck_assert_msg(cond, "handoff stress, seed %u (GORO_STRESS_SEED=%u), "  \
                                       "%d workers: " __VA_ARGS__)
#define ARGS hs.seed, hs.seed, hs.workers

START_TEST(randomized_handoff_stress)
{
    uint32_t seed = stress_seed();
    uint32_t r = seed;
    int workers = 2 + (int)(t_rnd(&r) % 3);      /* 2..4: more than the CPUs, often */
    restart(workers);

    memset(&hs, 0, sizeof hs);
    hs.seed = seed;
    hs.workers = workers;
    hs.handoff = handoff_available();
    hs.async = t_async_preemption();
    double seconds = stress_seconds();
    hs.end = t_now() + seconds;
    hs.wait_limit = t_timeout(t_sanitized() ? 10 : 5);
    hs.hard_end = hs.end + 4 * hs.wait_limit;
    hs.id_cap = t_scale(1l << 22);
    hs.sent = calloc((size_t)hs.id_cap / 64 + 1, sizeof *hs.sent);
    hs.received = calloc((size_t)hs.id_cap / 64 + 1, sizeof *hs.received);
    ck_assert(hs.sent && hs.received);
    static const size_t caps[NCH] = { 0, 1, 8 };
    for (int i = 0; i < NCH; i++)
        ck_assert_int_eq(goro_chan_new(&hs.ch[i], sizeof(long), caps[i]), 0);
    ck_assert_int_eq(pipe2(hs.quiet_pipe, O_CLOEXEC), 0);
    pthread_t waker, watchdog;
    ck_assert_int_eq(pthread_create(&waker, NULL, waker_main, NULL), 0);
    ck_assert_int_eq(pthread_create(&watchdog, NULL, watchdog_main, NULL), 0);

    goro_t *tick = go(ticker);
    goro_t *cons[NCONS];
    ck_assert_ptr_nonnull(tick);
    for (int c = 0; c < NCONS; c++)
        ck_assert_ptr_nonnull(cons[c] = go(consumer, c));

    /* Keep up to `live` roots going: join the finished ones (without
     * waiting), spawn new ones; a root that outlives its limit is lost. */
    enum { MAX_LIVE = 32 };
    int live = 4 * workers + (int)(t_rnd(&r) % 8);
    goro_t *root[MAX_LIVE] = { 0 };
    double born[MAX_LIVE];
    int root_kind[MAX_LIVE];
    long roots = 0;
    while (!t_failed()) {
        bool spawning = t_now() < hs.end, any = false, done_one = false;
        for (int i = 0; i < live; i++) {
            if (root[i]) {
                int e = goro_join_until(root[i], NULL, goro_now());
                if (e == -ETIMEDOUT && t_now() - born[i] > 2 * hs.wait_limit)
                    e = goro_join_until(root[i], NULL, deadline());
                if (e == -ETIMEDOUT) {
                    any = true;
                    if (t_now() - born[i] > 3 * hs.wait_limit) {
                        SFAIL("a %s coroutine did not finish in %.1f s",
                              kind_names[root_kind[i]], t_now() - born[i]);
                        break;
                    }
                    continue;
                }
                if (e != 0)
                    SFAIL("join of a root returned %d", e);
                atomic_fetch_add(&hs.joined, 1);
                root[i] = NULL;
                done_one = true;
            }
            if (spawning) {
                root_kind[i] = random_kind(&r, 0);
                born[i] = t_now();
                if ((root[i] = spawn(root_kind[i], 0)))
                    roots++;
                any = true;
            }
        }
        if (!any)
            break;
        if (!done_one)
            thread_nanosleep(200 * GORO_USEC);
    }
    bool roots_lost = t_failed() != NULL;

    atomic_store(&hs.stop, 1);
    int e = goro_join_until(tick, NULL, deadline());
    CHECK(e == 0, "the ticker did not end: join returned %d (%s)", ARGS, e,
          t_failed() ? t_failed() : "");
    for (int i = 0; i < NCH; i++)
        ck_assert_int_eq(goro_chan_close(hs.ch[i]), 0);
    for (int c = 0; c < NCONS; c++) {
        e = goro_join_until(cons[c], NULL, deadline());
        CHECK(e == 0, "consumer %d did not end after the channels closed: %d (%s)", ARGS, c,
              e, t_failed() ? t_failed() : "");
    }
    long threads = thread_count();
    atomic_store(&hs.threads_stop, 1);
    pthread_join(waker, NULL);
    pthread_join(watchdog, NULL);

    long spawned = atomic_load(&hs.spawned), finished = atomic_load(&hs.finished),
         joined = atomic_load(&hs.joined), messages = atomic_load(&hs.nsent);
    printf("handoff stress: seed %u, %d workers, %.1f s, hand-off %s, async preemption %s: "
           "%ld roots, %ld coroutines, %ld messages, up to %d computing and %d blocked at "
           "once, ticker late by at most %.1f ms over %lld ticks, %ld of %ld long spinners "
           "cut, %ld threads\n", hs.seed, hs.workers, seconds, hs.handoff ? "on" : "off",
           hs.async ? "on" : "off", roots, spawned, messages, atomic_load(&hs.running_max),
           atomic_load(&hs.blocked_max), (double)atomic_load(&hs.ticker_max_gap) / 1e6,
           (long long)atomic_load(&hs.ticker_ticks), atomic_load(&hs.spinners_cut),
           atomic_load(&hs.spinners_long), threads);
    fflush(stdout);

    CHECK(!t_failed(), "%s", ARGS, t_failed());
    CHECK(!roots_lost, "roots lost", ARGS);
    /* every coroutine ran to its end and was joined exactly once */
    CHECK(spawned == finished && finished == joined,
          "%ld spawned, %ld finished, %ld joined", ARGS, spawned, finished, joined);
    for (int k = 0; k < NKINDS; k++)
        if (k != K_PIPE_CORO || hs.handoff)
            CHECK(atomic_load(&hs.kinds_run[k]) > 0, "no %s coroutine ran", ARGS, kind_names[k]);
    /* every message sent was received, exactly once (twice fails above) */
    CHECK(atomic_load(&hs.nreceived) == messages, "%ld messages sent, %ld received", ARGS,
          messages, atomic_load(&hs.nreceived));
    for (long w = 0; w <= hs.id_cap / 64; w++)
        T_CHECK(atomic_load(&hs.sent[w]) == atomic_load(&hs.received[w]),
                "handoff stress, seed %u: messages %ld..%ld: sent %#llx, received %#llx",
                hs.seed, w * 64, w * 64 + 63, (unsigned long long)atomic_load(&hs.sent[w]),
                (unsigned long long)atomic_load(&hs.received[w]));
    /* at most one thread per P computes: a P is never used twice */
    CHECK(atomic_load(&hs.running_max) <= hs.workers,
          "%d coroutines computed at once on %d workers", ARGS, atomic_load(&hs.running_max),
          hs.workers);
    /* timers fired while workers were blocked */
    CHECK(atomic_load(&hs.ticker_ticks) > 0 &&
          atomic_load(&hs.ticker_max_gap) < (long long)(t_timeout(2) * 1e9),
          "a 1 ms ticker was late by %.1f ms", ARGS,
          (double)atomic_load(&hs.ticker_max_gap) / 1e6);
    /* preemption cut long spinners: others ran on their thread meanwhile */
    if (hs.async && atomic_load(&hs.spinners_long) >= 8)
        CHECK(atomic_load(&hs.spinners_cut) > 0, "none of %ld spinners of 3+ slices was "
              "preempted", ARGS, atomic_load(&hs.spinners_long));
    /* stuck threads came back as spares: at most one per blocked call
     * (plus the workers, sysmon, the waker, the watchdog, main, TSan's) */
    CHECK(threads <= hs.workers + atomic_load(&hs.blocked_max) + 6,
          "%ld threads for %d workers and at most %d blocked calls at once", ARGS, threads,
          hs.workers, atomic_load(&hs.blocked_max));

    for (int i = 0; i < NCH; i++)
        ck_assert_int_eq(goro_chan_free(hs.ch[i]), 0);
    close(hs.quiet_pipe[0]);
    close(hs.quiet_pipe[1]);
    free(hs.sent);
    free(hs.received);
}
END_TEST

/* ---- every worker blocked at once ---- */

enum { MAX_BLOCKERS = 4, QUEUED = 8 };

static struct {
    int n;
    double give_up;
    atomic_int arrived;
    atomic_int in_read[MAX_BLOCKERS];
    int pipe[MAX_BLOCKERS][2];
    goro_t *ticker, *queued[QUEUED];
    uint64_t sink[QUEUED];
    atomic_int stop;
    atomic_long ticks, jobs_done;
    atomic_llong first_tick_ns;
} wb;

static void wb_ticker(void)
{
    while (!atomic_load(&wb.stop) && t_now() < wb.give_up) {
        goro_sleep(GORO_MSEC);
        long long zero = 0;
        atomic_compare_exchange_strong(&wb.first_tick_ns, &zero, (long long)goro_now());
        atomic_fetch_add(&wb.ticks, 1);
    }
}

static void wb_job(long i)
{
    uint64_t x = (uint64_t)i;
    for (int k = 0; k < 4; k++) {
        x = crunch(x, 50000);
        goro_yield();
    }
    wb.sink[i] = x;
    atomic_fetch_add(&wb.jobs_done, 1);
}

/* Holds its worker until every blocker holds one, then blocks it in
 * read(). Blocker 0 first queues the ticker and the jobs on its own P,
 * behind itself. Not preemptible meanwhile: a preempted blocker would be
 * pinned to a thread that another blocker is about to block. */
static void wb_blocker(int i)
{
    goro_preempt_disable();
    atomic_fetch_add(&wb.arrived, 1);
    while (atomic_load(&wb.arrived) < wb.n)
        if (t_now() > wb.give_up) {
            t_fail("blocker %d: only %d of %d blockers ever ran at once", i,
                   atomic_load(&wb.arrived), wb.n);
            break;
        }
    goro_preempt_enable();
    if (i == 0) {
        if (!(wb.ticker = go(wb_ticker)))
            t_fail("go(ticker) failed");
        for (long k = 0; k < QUEUED; k++)
            if (!(wb.queued[k] = go(wb_job, k)))
                t_fail("go(job) failed");
    }
    atomic_store(&wb.in_read[i], 1);
    int n = read_byte(wb.pipe[i][0]);
    atomic_store(&wb.in_read[i], 0);
    if (n != 1)
        t_fail("blocker %d: read returned %d", i, n);
    goro_yield();                   /* back on a thread with a P */
}

/* Every worker blocks in read() with coroutines queued behind one of
 * them: sysmon hands that P to a spare thread, so the queued coroutines
 * and the ticker's timer run within a few slices; the blocked threads come
 * back as spares, which later rounds reuse. */
START_TEST(all_workers_blocked_queued_work_runs)
{
    int workers = _i;
    if (!handoff_available()) {
        t_skip("all_workers_blocked_queued_work_runs", "no membarrier: hand-off is off");
        return;
    }
    restart(workers);
    enum { ROUNDS = 4 };
    long threads_after[ROUNDS];
    t_settle();
    long threads_before = thread_count();
    for (int round = 0; round < ROUNDS; round++) {
        memset(&wb, 0, sizeof wb);
        wb.n = workers;
        wb.give_up = t_now() + t_timeout(10);
        goro_t *h[MAX_BLOCKERS];
        for (int i = 0; i < workers; i++) {
            ck_assert_int_eq(pipe2(wb.pipe[i], O_CLOEXEC), 0);
            ck_assert_ptr_nonnull(h[i] = go(wb_blocker, i));
        }
        double limit = t_timeout(2);
        bool all_in = false;
        for (double end = t_now() + limit; !all_in && t_now() < end && !t_failed();) {
            all_in = true;
            for (int i = 0; i < workers; i++)
                all_in &= atomic_load(&wb.in_read[i]) != 0;
            if (!all_in)
                thread_nanosleep(100 * GORO_USEC);
        }
        int64_t blocked_at = goro_now();
        long want = 20;
        t_wait_at_least(&wb.ticks, want, limit);
        t_wait_at_least(&wb.jobs_done, QUEUED, limit);
        int64_t waited = goro_now() - blocked_at;
        int still_blocked = 0;
        for (int i = 0; i < workers; i++)
            still_blocked += atomic_load(&wb.in_read[i]);
        long ticks = atomic_load(&wb.ticks), jobs = atomic_load(&wb.jobs_done);
        long long first = atomic_load(&wb.first_tick_ns);
        double first_ms = first ? (double)(first - blocked_at) / 1e6 : -1;
        for (int i = 0; i < workers; i++)
            write_byte(wb.pipe[i][1]);
        for (int i = 0; i < workers; i++)
            ck_assert_int_eq(goro_join_until(h[i], NULL, goro_now() + (int64_t)(limit * 1e9)), 0);
        atomic_store(&wb.stop, 1);
        if (wb.ticker)
            ck_assert_int_eq(goro_join_until(wb.ticker, NULL, goro_now() + (int64_t)(limit * 1e9)), 0);
        for (int k = 0; k < QUEUED; k++)
            if (wb.queued[k])
                ck_assert_int_eq(goro_join_until(wb.queued[k], NULL,
                                                 goro_now() + (int64_t)(limit * 1e9)), 0);
        for (int i = 0; i < workers; i++) {
            close(wb.pipe[i][0]);
            close(wb.pipe[i][1]);
        }
        t_settle();
        threads_after[round] = thread_count();
        printf("handoff: %d workers all blocked in read() (round %d): first tick after "
               "%.1f ms, %ld ticks and %ld/%d queued jobs in %.1f ms, %ld threads\n", workers,
               round, first_ms, ticks, jobs, QUEUED, (double)waited / 1e6, threads_after[round]);
        fflush(stdout);
        ck_assert_msg(!t_failed(), "%s", t_failed());
        ck_assert_msg(all_in, "round %d: the %d blockers were never all in read() at once",
                      round, workers);
        /* the queued coroutines ran while every worker was still blocked */
        ck_assert_msg(still_blocked == workers && ticks >= want && jobs == QUEUED,
                      "round %d: with all %d workers blocked, %ld ticks and %ld of %d queued "
                      "jobs in %.0f ms (%d still blocked)", round, workers, ticks, jobs, QUEUED,
                      (double)waited / 1e6, still_blocked);
        /* within a few slices: sysmon sees a slice of 10 ms, then hands over */
        ck_assert_msg(first && first_ms < t_timeout(0.2) * 1e3,
                      "round %d: first tick %.1f ms after every worker blocked", round, first_ms);
    }
    /* The stuck threads came back as spares. A round hands off one P or
     * more (those with work when sysmon looks), so the first round may
     * not make all the spares a later one needs; but never more than one
     * per P in all: without reuse, four rounds would make at least four. */
    ck_assert_msg(threads_after[ROUNDS - 1] <= threads_before + workers,
                  "threads: %ld before, %ld after the first round, %ld after the last, with "
                  "%d workers: spares are not reused", threads_before, threads_after[0],
                  threads_after[ROUNDS - 1], workers);
}
END_TEST

/* ---- a stuck thread must not hold its P's other work hostage ----
 * Each of these failed before its fix; see the issue each names. */

static struct {
    atomic_int flag, stop, held;
    atomic_long ticks, last_tick_ns, max_gap_ns;
    goro_chan_t *ch;
} st;

static void st_reset(void)
{
    atomic_store(&st.flag, 0);
    atomic_store(&st.stop, 0);
    atomic_store(&st.held, 0);
    atomic_store(&st.ticks, 0);
    atomic_store(&st.last_tick_ns, 0);
    atomic_store(&st.max_gap_ns, 0);
}

static void st_set_flag(void)
{
    atomic_store(&st.flag, 1);
}

static void st_recv_then_flag(void)
{
    long v;
    if (goro_chan_recv(st.ch, &v) == 1)
        atomic_store(&st.flag, 1);
}

/* Blocks its thread (nanosleep) until the flag is set or `limit` passes;
 * returns how long it waited, in ns. */
static int64_t st_thread_wait_flag(int64_t limit)
{
    int64_t t0 = goro_now();
    while (!atomic_load(&st.flag) && goro_now() - t0 < limit)
        thread_nanosleep(GORO_MSEC);
    return goro_now() - t0;
}

/* One worker: a coroutine blocks its thread past a slice, so sysmon gives
 * the P to another thread; then it spawns (or wakes) a coroutine and keeps
 * its thread blocked. The newcomer must run on the P's new thread: the
 * stuck thread once believed it still held the P and skipped waking it. */
static long st_spawn_while_handed(int wake)
{
    thread_nanosleep(4 * SLICE);    /* the P goes to another thread */
    if (wake) {
        long v = 1;
        if (goro_chan_try_send(st.ch, &v) != 0)
            return -1;              /* the receiver was not parked */
    } else {
        goro_t *h = go(st_set_flag);
        if (!h)
            return -2;
        goro_detach(h);
    }
    return st_thread_wait_flag(GORO_SEC);
}

START_TEST(one_worker_work_made_after_handoff_runs)
{
    if (!handoff_available()) {
        t_skip("one_worker_work_made_after_handoff_runs", "no membarrier");
        return;
    }
    restart(1);
    /* A timer once used: sysmon then hands a blocked P over even with
     * nothing queued (its base may hold work), as in any real program. */
    goro_t *sl = go(goro_sleep, GORO_MSEC);
    ck_assert_int_eq(goro_join(sl, NULL), 0);
    for (int wake = 0; wake < 2; wake++) {
        st_reset();
        ck_assert_int_eq(goro_chan_new(&st.ch, sizeof(long), 0), 0);
        goro_t *rx = wake ? go(st_recv_then_flag) : NULL;
        if (wake)
            t_settle();             /* parked on the channel */
        goro_t *h = go(st_spawn_while_handed, wake);
        long waited = -1;
        ck_assert_int_eq(goro_join(h, &waited), 0);
        ck_assert_msg(waited >= 0, "setup failed: %ld", waited);
        ck_assert_msg(atomic_load(&st.flag) && waited < t_timeout(0.3) * GORO_SEC,
                      "%s on the handed-off P: not run after %.0f ms",
                      wake ? "a coroutine woken" : "a coroutine spawned", t_ms(waited));
        if (rx)
            ck_assert_int_eq(goro_join(rx, NULL), 0);
        ck_assert_int_eq(goro_chan_free(st.ch), 0);
    }
}
END_TEST

/* A 1 ms ticker whose largest gap is recorded. */
static void st_ticker(void)
{
    while (!atomic_load(&st.stop)) {
        goro_sleep(GORO_MSEC);
        int64_t now = goro_now(), last = atomic_exchange(&st.last_tick_ns, now);
        if (last && atomic_load(&st.ticks) > 2)
            t_max_update(&st.max_gap_ns, now - last);
        atomic_fetch_add(&st.ticks, 1);
    }
}

/* Computes for `ms` in code that may be preempted: it gets preempted, and
 * so pinned to its thread. */
static GORO_PREEMPTIBLE void st_long_runner(long ms)
{
    int64_t end = goro_now() + ms * GORO_MSEC;
    uint64_t x = 1;
    while (goro_now() < end)
        x = crunch(x, 10000);
    __asm__ volatile("" : : "r"(x));
}

/* Computes for `ms` where preemption is refused (as in foreign code). */
static void st_unpreemptible(long ms)
{
    goro_preempt_disable();
    int64_t end = goro_now() + ms * GORO_MSEC;
    uint64_t x = 1;
    while (goro_now() < end)
        x = crunch(x, 10000);
    goro_preempt_enable();
    __asm__ volatile("" : : "r"(x));
}

/* A coroutine preempted on a thread is pinned there; when another one on
 * that thread then refuses preemption, the hand-off after 3 slices must
 * still happen (it was refused because the thread had pinned coroutines),
 * so the ticker queued on the same P keeps ticking. */
START_TEST(pinned_coroutine_does_not_stop_handoff)
{
    if (!handoff_available() || !t_async_preemption()) {
        t_skip("pinned_coroutine_does_not_stop_handoff", "no hand-off or no async preemption");
        return;
    }
    restart(1);
    st_reset();
    goro_t *tk = go(st_ticker);
    t_settle();
    t_host_watch_begin();
    goro_t *lr = go(st_long_runner, 3 * SLICE / GORO_MSEC);    /* preempted: pinned */
    goro_t *un = go(st_unpreemptible, 40 * SLICE / GORO_MSEC);
    ck_assert_int_eq(goro_join(un, NULL), 0);
    ck_assert_int_eq(goro_join(lr, NULL), 0);
    atomic_store(&st.stop, 1);
    ck_assert_int_eq(goro_join(tk, NULL), 0);
    double host = t_ms(t_host_watch_end());
    double gap = t_ms(atomic_load(&st.max_gap_ns));
    ck_assert_msg(gap < t_timeout(0.15) * 1e3 + host, "ticker gap %.0f ms while its thread's "
                  "coroutine refused preemption (the host stalled %.0f ms)", gap, host);
}
END_TEST

/* The foreign-lock case (a database lock held across preemption): the
 * holder is preempted and pinned to its thread; the next coroutine there
 * waits for that lock by blocking the thread (a busy handler's sleep). The
 * holder must get to run elsewhere and release it, long before the
 * waiter would give up. */
static struct {
    long tid_before, tid_after, tid_waiter;
    void *altstack_after, *altstack_waiter;
} sl;

static void *current_altstack(void)
{
    stack_t ss;
    return sigaltstack(NULL, &ss) == 0 ? ss.ss_sp : NULL;
}

static GORO_PREEMPTIBLE void st_lock_holder(void)
{
    sl.tid_before = t_tid();
    atomic_store(&st.held, 1);
    st_long_runner(2 * SLICE / GORO_MSEC);  /* preempted while holding it */
    sl.tid_after = t_tid();
    sl.altstack_after = current_altstack();
    atomic_store(&st.held, 0);
}

static long st_lock_waiter(void)
{
    int64_t t0 = goro_now();
    while (atomic_load(&st.held) && goro_now() - t0 < 5 * GORO_SEC)
        thread_nanosleep(GORO_MSEC);
    sl.tid_waiter = t_tid();        /* no goro call in the loop: still its thread */
    sl.altstack_waiter = current_altstack();
    return goro_now() - t0;
}

/* One round of the lock cases: the holder, then the waiter, both joined;
 * how long the waiter waited. */
static long holder_then_waiter(void (*holder)(void), long (*waiter)(void))
{
    goro_t *h = go(holder);
    goro_t *w = go(waiter);
    long waited = -1;
    ck_assert_int_eq(goro_join(w, &waited), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    return waited;
}

START_TEST(pinned_lock_holder_runs_when_its_thread_blocks)
{
    if (!handoff_available() || !t_async_preemption()) {
        t_skip("pinned_lock_holder_runs_when_its_thread_blocks",
               "no hand-off or no async preemption");
        return;
    }
    restart(1);
    for (int round = 0; round < 3; round++) {
        st_reset();
        long waited = holder_then_waiter(st_lock_holder, st_lock_waiter);
        ck_assert_msg(waited < t_timeout(0.5) * GORO_SEC,
                      "round %d: the lock was released after %.0f ms (the holder was pinned "
                      "to the waiter's blocked thread)", round, t_ms(waited));
        /* It resumed on another thread, whose signal stack stayed its own
         * (the copied frame named the first thread's). */
        ck_assert_msg(sl.tid_before == sl.tid_waiter && sl.tid_after != sl.tid_before,
                      "round %d: threads %ld -> %ld, waiter on %ld", round, sl.tid_before,
                      sl.tid_after, sl.tid_waiter);
        ck_assert_msg(sl.altstack_after && sl.altstack_after != sl.altstack_waiter,
                      "round %d: two threads share the signal stack %p", round,
                      sl.altstack_after);
    }
}
END_TEST

/* The holder pinned to a thread that waits for a P, while the P's own
 * thread blocks: the holder blocks the thread (its P goes to a new one,
 * which runs the waiter), comes back to compute without a P, and is
 * stopped and pinned to its thread, which then waits for a P. The waiter,
 * on the P, sleeps the P's thread until the lock is free, refusing
 * preemption (as in a foreign library's busy handler). Nothing is queued
 * on the P, so the P must go to the waiting thread anyway: before, sysmon
 * handed a blocked P over only for queued work, and the two waited on
 * each other until the waiter gave up (SQLite's "database is locked"
 * after its 5 s busy timeout, once in ~20 runs under ASan). */
static atomic_int st_waiter_in;

static GORO_PREEMPTIBLE void st_holder_blocks_first(void)
{
    atomic_store(&st.held, 1);
    sl.tid_before = t_tid();
    /* blocked until its P went to a new thread, which runs the waiter */
    int64_t give_up = goro_now() + 5 * GORO_SEC;
    while (!atomic_load(&st_waiter_in) && goro_now() < give_up)
        thread_nanosleep(GORO_MSEC);
    st_long_runner(3 * SLICE / GORO_MSEC);  /* no P: stopped and pinned here */
    sl.tid_after = t_tid();
    atomic_store(&st.held, 0);
}

static long st_unpreemptible_waiter(void)
{
    atomic_store(&st_waiter_in, 1);
    goro_preempt_disable();
    long waited = st_lock_waiter();
    goro_preempt_enable();
    return waited;
}

START_TEST(pinned_to_a_thread_waiting_for_a_p_runs)
{
    if (!handoff_available() || !t_async_preemption()) {
        t_skip("pinned_to_a_thread_waiting_for_a_p_runs", "no hand-off or no async preemption");
        return;
    }
    restart(1);
    for (int round = 0; round < 3; round++) {
        st_reset();
        atomic_store(&st_waiter_in, 0);
        long waited = holder_then_waiter(st_holder_blocks_first, st_unpreemptible_waiter);
        ck_assert_msg(waited < t_timeout(0.5) * GORO_SEC,
                      "round %d: the lock was released after %.0f ms (its holder was pinned "
                      "to a thread waiting for the P the waiter's thread kept)", round,
                      t_ms(waited));
        /* the waiter ran on another thread than the holder began on */
        ck_assert_msg(sl.tid_waiter != sl.tid_before, "round %d: holder on %ld, waiter on %ld",
                      round, sl.tid_before, sl.tid_waiter);
    }
}
END_TEST

/* A coroutine pinned to a thread that waits for a P, while the P's
 * coroutines switch all the time (they yield): no slice of theirs lasts,
 * so sysmon never cuts one, and the P never falls idle. The holder blocks
 * its thread (its P goes to a new one, which runs the yielders), then
 * computes without a P, is stopped and pinned, and its thread waits for
 * the P. It must get it within a few slices: before, it waited as long as
 * the yielders ran (found by io's no_preemption_under_a_record_lock on
 * the code before the lock count, whose closer was pinned so). */
static atomic_int yl_in, yl_stop;

static GORO_PREEMPTIBLE void yl_holder(void)
{
    int64_t give_up = goro_now() + 5 * GORO_SEC;
    while (!atomic_load(&yl_in) && goro_now() < give_up)
        thread_nanosleep(GORO_MSEC);
    st_long_runner(3 * SLICE / GORO_MSEC);  /* no P: stopped and pinned here */
}

static long yl_yielder(void)
{
    atomic_store(&yl_in, 1);
    long turns = 0;
    while (!atomic_load(&yl_stop)) {
        goro_yield();
        turns++;
    }
    return turns;
}

START_TEST(pinned_to_a_thread_waiting_beside_yielders_runs)
{
    if (!handoff_available() || !t_async_preemption()) {
        t_skip("pinned_to_a_thread_waiting_beside_yielders_runs",
               "no hand-off or no async preemption");
        return;
    }
    restart(1);
    for (int round = 0; round < 3; round++) {
        atomic_store(&yl_in, 0);
        atomic_store(&yl_stop, 0);
        goro_t *h = go(yl_holder), *y[2] = { go(yl_yielder), go(yl_yielder) };
        ck_assert(h && y[0] && y[1]);
        double t0 = t_now();
        int r = goro_join_until(h, NULL, goro_now() + (int64_t)(t_timeout(3) * 1e9));
        double took = t_now() - t0;
        atomic_store(&yl_stop, 1);
        long turns = 0;
        for (int i = 0; i < 2; i++) {
            long t = 0;
            ck_assert_int_eq(goro_join(y[i], &t), 0);
            turns += t;
        }
        if (r != 0)
            ck_assert_int_eq(goro_join(h, NULL), 0);
        printf("handoff: a pinned coroutine beside yielders (round %d): done after %.0f ms, "
               "%ld yields\n", round, took * 1e3, turns);
        ck_assert_msg(r == 0 && took < t_timeout(0.5),
                      "round %d: the pinned coroutine finished %s %.0f ms (its thread waited "
                      "for the P the yielders kept)", round, r ? "not within" : "after",
                      took * 1e3);
    }
}
END_TEST

/* When the thread that would take over a blocked worker cannot be started
 * (RLIMIT_NPROC), one line says so; the queued work waits for the worker.
 * RLIMIT_NPROC binds only unprivileged users: the child, started as root,
 * becomes nobody first. */
static int nproc_child(void *arg)
{
    (void)arg;
    if (setgid(65534) != 0 || setuid(65534) != 0)
        return 90;
    if (goro_start(&(goro_config_t){ .workers = 1, .slice_ns = SLICE }) != 0)
        return 91;
    long threads = thread_count();
    struct rlimit rl = { (rlim_t)threads, (rlim_t)threads };
    if (setrlimit(RLIMIT_NPROC, &rl) != 0)
        return 92;
    st_reset();
    goro_t *nap = go(goro_sleep, GORO_MSEC);    /* a timer used: hand-off wanted */
    goro_join(nap, NULL);
    goro_t *b = go(thread_nanosleep, 6 * SLICE);
    goro_t *f = go(st_set_flag);                /* queued behind the blocked one */
    if (!b || !f || goro_join(b, NULL) || goro_join(f, NULL))
        return 93;
    return goro_shutdown() == 0 && atomic_load(&st.flag) ? 0 : 94;
}

START_TEST(refused_handoff_thread_is_reported)
{
    if (getuid() != 0 || !handoff_available()) {
        t_skip("refused_handoff_thread_is_reported", "needs root (to drop to nobody)");
        return;
    }
    if (t_slow()) {
        t_skip("refused_handoff_thread_is_reported", "an emulator's threads are its own");
        return;
    }
    char out[2048];
    int status = t_run_child(nproc_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x: %s",
                  status, out);
    const char *line = strstr(out, "cannot start a thread to take over a blocked worker");
    ck_assert_msg(line && strstr(line, "RLIMIT_NPROC"), "no message: %s", out);
    ck_assert_msg(!strstr(line + 1, "cannot start a thread"), "said twice: %s", out);
}
END_TEST

#ifdef GORO_TEST_SQLITE
/* The same with SQLite's own write lock: two coroutines share a database
 * on one worker with a 1 ms slice. A writer is preempted inside its
 * transaction (pinned to the thread); the other one's BEGIN IMMEDIATE finds
 * the database locked, and SQLite's busy handler sleeps that same thread.
 * The preempted writer must commit from another thread well within the
 * busy timeout: no call may see "database is locked". */
struct sq_writer {
    const char *path;
    int id, rounds, busy;
    char err[160];
};

static GORO_PREEMPTIBLE void sq_compute(void)
{
    st_long_runner(3);              /* inside the transaction: preempted */
}

static bool sq_ok(struct sq_writer *w, sqlite3 *db, int rc, const char *what)
{
    if (rc == SQLITE_OK || rc == SQLITE_DONE)
        return true;
    if (rc == SQLITE_BUSY)
        w->busy++;
    if (!w->err[0])
        snprintf(w->err, sizeof w->err, "writer %d: %s: %s", w->id, what, sqlite3_errmsg(db));
    return false;
}

static void sq_write(struct sq_writer *w)
{
    sqlite3 *db;
    if (sqlite3_open(w->path, &db) != SQLITE_OK) {
        snprintf(w->err, sizeof w->err, "writer %d: open failed", w->id);
        return;
    }
    sqlite3_busy_timeout(db, 5000);
    for (int i = 0; i < w->rounds && !w->err[0]; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "INSERT INTO t VALUES (%d, %d)", w->id, i);
        if (!sq_ok(w, db, sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), "begin"))
            break;
        sq_compute();
        if (!sq_ok(w, db, sqlite3_exec(db, sql, NULL, NULL, NULL), "insert") ||
            !sq_ok(w, db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit"))
            break;
        goro_yield();               /* let the other one in */
    }
    sqlite3_close(db);
}

START_TEST(sqlite_writers_never_see_locked)
{
    if (!handoff_available() || !t_async_preemption()) {
        t_skip("sqlite_writers_never_see_locked", "no hand-off or no async preemption");
        return;
    }
    t_restart(&(goro_config_t){ .workers = 1, .slice_ns = GORO_MSEC });
    char path[] = "/tmp/goro-sqlite-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "CREATE TABLE t (w INTEGER, i INTEGER)", NULL, NULL,
                                  NULL), SQLITE_OK);
    sqlite3_close(db);
    int rounds = (int)t_scale(60);
    struct sq_writer w[2] = { { path, 0, rounds, 0, "" }, { path, 1, rounds, 0, "" } };
    int64_t t0 = goro_now();
    goro_t *h[2] = { go(sq_write, &w[0]), go(sq_write, &w[1]) };
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    double ms = t_ms(goro_now() - t0);
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &q, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    int rows = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    unlink(path);
    printf("sqlite: %d rows by two writers in %.0f ms, 1 worker, 1 ms slice\n", rows, ms);
    ck_assert_msg(!w[0].err[0] && !w[1].err[0], "%s%s", w[0].err, w[1].err);
    ck_assert_int_eq(rows, 2 * rounds);
}
END_TEST
#endif

/* A loop on a wait whose deadline has passed never parks. It must still
 * give way when its slice is over (every return from goro is a preemption
 * point), and never end up running beside the thread that replaced it. */
static const char *const expired_kinds[] = {
    "chan recv", "select", "mutex", "read", "sleep", "join"
};
static goro_mutex_t st_mu = GORO_MUTEX_INIT;
static int st_pipe[2];
static goro_t *st_never;            /* ends only after the loops have ended */
static atomic_int st_never_stop;

/* Its own flag: had it ended at st.stop, a loop's last join_until could
 * collect it before the loop saw st.stop, and the test's join would be
 * handed a joined handle. */
static void st_until_stop(void)
{
    while (!atomic_load(&st_never_stop))
        goro_sleep(GORO_MSEC);
}

static void st_expired_loop(int kind)
{
    long v;
    char c;
    goro_case_t cs = { st.ch, GORO_RECV, &v, 0 };
    while (!atomic_load(&st.stop)) {
        switch (kind) {
        case 0: goro_chan_recv_until(st.ch, &v, 0); break;
        case 1: goro_select_until(&cs, 1, 0, 0); break;
        case 2: goro_mutex_lock_until(&st_mu, 0); break;    /* held by the test */
        case 3: goro_read_until(st_pipe[0], &c, 1, 0); break;
        case 4: goro_sleep_until(0); break;
        default: goro_join_until(st_never, NULL, 0); break;
        }
    }
}

START_TEST(expired_wait_loop_yields)
{
    int kind = _i;
    if (t_valgrind()) {
        /* valgrind runs one thread at a time: the ticker's gaps measure it */
        t_skip("expired_wait_loop_yields", "valgrind");
        return;
    }
    restart(2);
    st_reset();
    ck_assert_int_eq(goro_chan_new(&st.ch, sizeof(long), 0), 0);
    ck_assert_int_eq(pipe2(st_pipe, O_CLOEXEC | O_NONBLOCK), 0);
    ck_assert_int_eq(goro_mutex_lock(&st_mu), 0);
    atomic_store(&st_never_stop, 0);
    st_never = go(st_until_stop);
    t_host_watch_begin();           /* before threads0: it counts the watch */
    long threads0 = thread_count();
    goro_t *tk = go(st_ticker);
    goro_t *loops[2];
    for (int i = 0; i < 2; i++)
        loops[i] = go(st_expired_loop, kind);
    long max_threads = 0;
    for (int i = 0; i < 40; i++) {
        t_nap(0.01);
        long n = thread_count();
        max_threads = n > max_threads ? n : max_threads;
    }
    atomic_store(&st.stop, 1);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(goro_join(loops[i], NULL), 0);
    ck_assert_int_eq(goro_join(tk, NULL), 0);
    atomic_store(&st_never_stop, 1);
    ck_assert_int_eq(goro_join(st_never, NULL), 0);
    ck_assert_int_eq(goro_mutex_unlock(&st_mu), 0);
    ck_assert_int_eq(goro_close(st_pipe[0]), 0);
    close(st_pipe[1]);
    ck_assert_int_eq(goro_chan_free(st.ch), 0);
    double host = t_ms(t_host_watch_end());
    double gap = t_ms(atomic_load(&st.max_gap_ns));
    /* One spare may come and go (a thread sampled asleep in the kernel
     * past its slice). Under the sanitizers their own locks put threads to
     * sleep often enough for a second, so there the bound cannot tell two
     * loops that never give way (one replacement thread each) and only
     * the plain builds check it strictly. */
    long spare = t_sanitized() || t_slow() ? 2 : 1;
    ck_assert_msg(max_threads <= threads0 + spare, "%s: threads: %ld at the start, up to %ld "
                  "with two loops on expired waits", expired_kinds[kind], threads0, max_threads);
    /* a stall of the host's stops the ticker too */
    ck_assert_msg(atomic_load(&st.ticks) > 20 && gap < t_timeout(0.1) * 1e3 + host,
                  "%s: ticker: %ld ticks, largest gap %.0f ms (the host stalled %.0f ms)",
                  expired_kinds[kind], atomic_load(&st.ticks), gap, host);
}
END_TEST

static void setup(void)
{
    t_fail_reset();
}

/* Also after a failed test (CK_FORK=no): what still runs ends by its
 * deadline, so the shutdown returns. */
static void teardown(void)
{
    atomic_store(&hs.stop, 1);
    atomic_store(&wb.stop, 1);
    atomic_store(&st.stop, 1);
    atomic_store(&st.flag, 1);
    atomic_store(&st.held, 0);
    t_stop();
}

Suite *handoff_suite(void)
{
    Suite *s = suite_create("handoff");
    TCase *tc = tcase_create("handoff");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, t_timeout(60) + stress_seconds() * (t_slow() ? 10 : 2));
    tcase_add_test(tc, randomized_handoff_stress);
    tcase_add_loop_test(tc, all_workers_blocked_queued_work_runs, 1, 4);
    suite_add_tcase(s, tc);
    tc = tcase_create("stuck");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, t_timeout(30));
    tcase_add_test(tc, one_worker_work_made_after_handoff_runs);
    tcase_add_test(tc, pinned_coroutine_does_not_stop_handoff);
    tcase_add_test(tc, pinned_lock_holder_runs_when_its_thread_blocks);
    tcase_add_test(tc, pinned_to_a_thread_waiting_for_a_p_runs);
    tcase_add_test(tc, pinned_to_a_thread_waiting_beside_yielders_runs);
#ifdef GORO_TEST_SQLITE
    tcase_add_test(tc, sqlite_writers_never_see_locked);
#endif
    tcase_add_test(tc, refused_handoff_thread_is_reported);
    tcase_add_loop_test(tc, expired_wait_loop_yields, 0,
                        (int)(sizeof expired_kinds / sizeof expired_kinds[0]));
    suite_add_tcase(s, tc);
    return s;
}
