#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

SRunner *t_runner;

bool t_forking(void)
{
    return t_runner && srunner_fork_status(t_runner) == CK_FORK;
}

static bool env_set(const char *name)
{
    const char *s = getenv(name);
    return s && *s && strcmp(s, "0") != 0;
}

bool t_slow(void) { return env_set("GORO_TEST_SLOW") || t_valgrind(); }
bool t_valgrind(void) { return env_set("GORO_TEST_VALGRIND"); }

bool t_sanitized(void)
{
#if defined(T_ASAN) || defined(T_TSAN)
    return true;
#else
    return false;
#endif
}

long t_scale(long n)
{
    long r = t_valgrind() ? n / 50 : t_slow() ? n / 10 : n;
    return r < 1 ? 1 : r;
}

long t_live(long n)
{
    long r = t_scale(n);
#ifdef T_TSAN
    r /= 10;
#endif
    return r < 1 ? 1 : r;
}

double t_timeout(double seconds)
{
    return t_slow() ? seconds * 10 : seconds;
}

void t_skip(const char *test, const char *why)
{
    fprintf(stderr, "SKIP %s: %s\n", test, why);
}

bool t_async_preemption(void)
{
#ifdef T_TSAN
    return false;
#else
    const char *env = getenv("GORO_PREEMPT");
    return !t_valgrind() && !(env && strcmp(env, "0") == 0);
#endif
}

void t_setup_runtime(void)
{
    if (goro_workers() >= 2)
        return;
    if (goro_workers() == 1)            /* someone started a 1-worker runtime */
        ck_assert_int_eq(goro_shutdown(), 0);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    goro_config_t cfg = { .workers = n < 2 ? 2 : n > 8 ? 8 : (int)n };
    int err = goro_start(&cfg);
    ck_assert_msg(err == 0, "goro_start: %s", strerror(-err));
    ck_assert_int_ge(goro_workers(), 2);
    t_fail_reset();
}

TCase *t_tcase(Suite *s, const char *name, double seconds)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, t_timeout(seconds));
    suite_add_tcase(s, tc);
    return tc;
}

TCase *t_runtime_tcase(Suite *s, const char *name, double seconds)
{
    TCase *tc = t_tcase(s, name, seconds);
    tcase_add_checked_fixture(tc, t_setup_runtime, t_teardown_runtime);
    return tc;
}

void t_teardown_runtime(void)
{
    if (goro_workers() <= 0)
        return;
    if (t_forking()) {
        ck_assert_int_eq(goro_shutdown(), 0);
        return;
    }
    /* One process runs every test (valgrind): the next test gets a fresh
     * runtime too, unless something of this one is still running. Its
     * descriptor records go with it - tests close descriptors with
     * close(2) as well, and a record left from a closed descriptor would
     * call the next socketpair with its number non-blocking when it is not
     * (docs/io.md: goro_fd_release before close). */
    (void)goro_shutdown_until(goro_now() + 2 * GORO_SEC);
}

/* ---- failure notes ---- */

static atomic_int fail_set;
static char fail_msg[512];

void t_fail(const char *fmt, ...)
{
    int zero = 0;               /* only the first failure writes the note */
    if (!atomic_compare_exchange_strong(&fail_set, &zero, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fail_msg, sizeof fail_msg, fmt, ap);
    va_end(ap);
    /* Now too: a test that hangs after this (a partner left waiting)
     * ends by Check's timeout, which would not say why. */
    fprintf(stderr, "t_fail: %s\n", fail_msg);
    atomic_store(&fail_set, 2);
}

const char *t_failed(void)
{
    int s = atomic_load(&fail_set);
    if (s == 0)
        return NULL;
    while (atomic_load(&fail_set) != 2)
        sched_yield();
    return fail_msg;
}

void t_fail_reset(void)
{
    atomic_store(&fail_set, 0);
    fail_msg[0] = 0;
}

/* ---- runtimes of a test's own making ---- */

void t_stop(void)
{
    if (goro_workers() > 0)
        ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(goro_workers(), 0);
}

void t_restart(const goro_config_t *cfg)
{
    t_stop();
    int e = goro_start(cfg);
    ck_assert_msg(e == 0, "goro_start(workers %d, slice %lld ns): %s", cfg->workers,
                  (long long)cfg->slice_ns, strerror(-e));
    if (cfg->workers > 0)
        ck_assert_int_eq(goro_workers(), cfg->workers);
    t_fail_reset();
}

/* ---- values that must be re-read after a switch ---- */

T_NOINLINE int t_errno(void)
{
    int e = errno;
    __asm__ volatile("" : "+r"(e));
    return e;
}

T_NOINLINE void t_set_errno(int e)
{
    __asm__ volatile("" : "+r"(e));
    errno = e;
}

T_NOINLINE long t_tid(void)
{
    return syscall(SYS_gettid);
}

double t_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void t_nap(double seconds)
{
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void t_settle(void)
{
    t_nap(t_timeout(0.05));
}

double t_ms(int64_t ns) { return (double)ns / 1e6; }

double t_prompt(void) { return t_timeout(t_sanitized() ? 0.5 : 0.25); }

/* ---- the host's own stalls ---- */

/* One watcher per CPU this process may use, each bound to its CPU: a
 * stall of one CPU alone (another tenant, a vCPU descheduled) stops the
 * workers on it and that CPU's watcher with them. */
#define HOST_WATCHERS 16

static struct {
    pthread_t thread[HOST_WATCHERS];
    int n;                      /* running */
    atomic_int stop;
    atomic_long oversleep;      /* largest, ns */
} host_watch;

static void *host_watch_loop(void *arg)
{
    int cpu = (int)(intptr_t)arg;
    pthread_setname_np(pthread_self(), "t-host-watch");
    if (cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one);     /* on failure: unbound, still a witness */
    }
    const struct timespec ms = { 0, 1000000 };
    while (!atomic_load(&host_watch.stop)) {
        double t0 = t_now();
        nanosleep(&ms, NULL);
        t_max_update(&host_watch.oversleep, (long)((t_now() - t0) * 1e9) - ms.tv_nsec);
    }
    return NULL;
}

void t_host_watch_begin(void)
{
    t_host_watch_end();
    if (t_valgrind())
        return;     /* one thread at a time: it would measure valgrind (limits are wide there) */
    atomic_store(&host_watch.stop, 0);
    atomic_store(&host_watch.oversleep, 0);
    cpu_set_t cpus;
    int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);     /* inherited: blocked from their start */
    for (int cpu = 0; cpu < CPU_SETSIZE && host_watch.n < HOST_WATCHERS; cpu++) {
        if (ncpu && !CPU_ISSET(cpu, &cpus))
            continue;
        int e = pthread_create(&host_watch.thread[host_watch.n], NULL, host_watch_loop,
                               (void *)(intptr_t)(ncpu ? cpu : -1));
        ck_assert_msg(e == 0, "the host's watch: pthread_create: %s", strerror(e));
        host_watch.n++;
        if (!ncpu)
            break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int64_t t_host_stalled(void)
{
    return host_watch.n ? atomic_load(&host_watch.oversleep) : 0;
}

int64_t t_host_watch_end(void)
{
    if (!host_watch.n)
        return 0;
    atomic_store(&host_watch.stop, 1);
    for (int i = 0; i < host_watch.n; i++)
        pthread_join(host_watch.thread[i], NULL);
    host_watch.n = 0;
    return atomic_load(&host_watch.oversleep);
}

void t_host_watch_fixture_begin(void) { t_host_watch_begin(); }
void t_host_watch_fixture_end(void) { t_host_watch_end(); }

void t_max_update(atomic_long *max, long v)
{
    long m = atomic_load(max);
    while (v > m && !atomic_compare_exchange_weak(max, &m, v))
        ;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void t_sort_i64(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
}

goro_chan_t *t_chan_new(size_t elem, size_t cap)
{
    goro_chan_t *ch = NULL;
    int e = goro_chan_new(&ch, elem, cap);
    ck_assert_msg(e == 0, "goro_chan_new(%zu, %zu): %d", elem, cap, e);
    ck_assert_ptr_nonnull(ch);
    return ch;
}

uint32_t t_rnd(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

static void pause_a_little(unsigned spins)
{
    if (goro_self()) {
        goro_yield();
    } else if (spins % 64 != 63) {
        sched_yield();
    } else {
        struct timespec ts = { 0, 200 * 1000 };   /* 0.2 ms */
        nanosleep(&ts, NULL);
    }
}

long t_wait_at_least(atomic_long *v, long target, double timeout_s)
{
    double end = t_now() + timeout_s;
    long x;
    for (unsigned i = 0; (x = atomic_load(v)) < target; i++) {
        if (i % 256 == 255 && t_now() > end)
            break;
        pause_a_little(i);
    }
    return x;
}

int t_wait_flag(atomic_int *flag, double timeout_s)
{
    double end = t_now() + timeout_s;
    int x;
    for (unsigned i = 0; (x = atomic_load(flag)) == 0; i++) {
        if (i % 256 == 255 && t_now() > end)
            break;
        pause_a_little(i);
    }
    return x;
}

/* ---- moving coroutines between workers ---- */

struct ticket {
    struct ticket *next;
    goro_t *h;
    atomic_int served;          /* h is set: the ticket coroutine exists */
    atomic_long started_on;     /* the ticket's thread, once it runs */
    atomic_int joining;         /* the hopper is about to park in goro_join */
};

static _Atomic(struct ticket *) ticket_requests;
static atomic_long hops_moved, hops_total;

static void ticket_body(struct ticket *t)
{
    atomic_store(&t->started_on, t_tid());
    while (!atomic_load(&t->joining))
        goro_yield();
    /* let the hopper get from the flag into goro_join's park */
    double end = t_now() + t_timeout(20e-6);
    while (t_now() < end)
        ;
}

/* The hopper asks for a ticket and keeps its worker busy (no yield) until
 * the ticket runs: it can then only run on another worker. Joining parks
 * the hopper; the ticket's exit wakes it on the ticket's worker. After 2 ms
 * (20 ms when slow) without the ticket running (no other worker free) it
 * waits by yielding, and may not move. */
void t_hop(void)
{
    if (!goro_self())
        return;                 /* like goro_yield(): nothing to do outside */
    struct ticket t = { .next = NULL };
    long tid = t_tid();
    t.next = atomic_load(&ticket_requests);
    while (!atomic_compare_exchange_weak(&ticket_requests, &t.next, &t))
        ;
    double end = t_now() + t_timeout(2e-3);
    for (unsigned i = 0; !atomic_load(&t.served) || !atomic_load(&t.started_on); i++)
        if (i % 64 == 63 && t_now() > end)
            goro_yield();
    atomic_store(&t.joining, 1);
    if (!t.h || goro_join(t.h, NULL) != 0)
        t_fail("t_hop: ticket spawn or join failed");
    atomic_fetch_add(&hops_total, 1);
    if (t_tid() != tid)
        atomic_fetch_add(&hops_moved, 1);
}

long t_serve_hops(atomic_long *done, long target, double timeout_s)
{
    double end = t_now() + timeout_s;
    long x;
    for (unsigned i = 0; (x = atomic_load(done)) < target; i++) {
        struct ticket *t = atomic_exchange(&ticket_requests, NULL);
        if (!t) {
            if (i % 256 == 255 && t_now() > end)
                break;
            sched_yield();
            continue;
        }
        while (t) {
            struct ticket *next = t->next;  /* t may be gone once served */
            t->h = go(ticket_body, t);
            atomic_store(&t->served, 1);
            t = next;
        }
    }
    return x;
}

void t_hops_reset(void)
{
    atomic_store(&hops_moved, 0);
    atomic_store(&hops_total, 0);
}

long t_hops_moved(void) { return atomic_load(&hops_moved); }
long t_hops_total(void) { return atomic_load(&hops_total); }

/* ---- /proc ---- */

long t_maps_count(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    long n = 0;
    int c;
    while ((c = getc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

long t_rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size, rss;
    if (!f)
        return -1;
    int ok = fscanf(f, "%ld %ld", &size, &rss) == 2;
    fclose(f);
    return ok ? rss * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

bool t_unreadable(uintptr_t addr)
{
    /* Read as another process would: valgrind checks the buffer of a
     * write() (memory below a stack pointer is off limits to it), not the
     * remote side of process_vm_readv. qemu-user lacks the call. */
    char c;
    struct iovec local = { &c, 1 }, remote = { (void *)addr, 1 };
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n == 1 || errno != ENOSYS)
        return n != 1 && errno == EFAULT;
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    bool refused = write(fds[1], (const void *)addr, 1) < 0 && errno == EFAULT;
    close(fds[0]);
    close(fds[1]);
    return refused;
}

const char *t_stack_space_line(void)
{
    static char line[256];
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    line[0] = 0;
    if (f && goro_dump(f) == 0 && fflush(f) == 0) {
        const char *l = strstr(text, "goro: stack guards");
        if (l)
            snprintf(line, sizeof line, "%.*s", (int)strcspn(l, "\n"), l);
    }
    if (f)
        fclose(f);
    free(text);
    return line;
}

bool t_stacks_in_arenas(void)
{
    return strstr(t_stack_space_line(), "MADV_GUARD_INSTALL") != NULL;
}

long t_read_long_file(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

long t_fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;               /* the directory's own descriptor */
}

long t_fd_count_back_to(long want)
{
    double end = t_now() + t_timeout(0.5);
    long n;
    while ((n = t_fd_count()) != want && t_now() < end)
        t_nap(0.001);
    return n;
}

/* ---- loopback sockets ---- */

struct sockaddr_in t_loopback(uint16_t port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

int t_tcp_listener(int backlog, struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = t_loopback(0);
    socklen_t len = sizeof a;
    ck_assert_msg(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", strerror(errno));
    ck_assert_msg(listen(fd, backlog) == 0, "listen: %s", strerror(errno));
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    if (addr)
        *addr = a;
    return fd;
}

void t_tcp_pair(int fd[2])
{
    struct sockaddr_in a;
    int l = t_tcp_listener(1, &a);
    fd[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(fd[0] >= 0, "socket: %s", strerror(errno));
    ck_assert_msg(connect(fd[0], (struct sockaddr *)&a, sizeof a) == 0,
                  "connect: %s", strerror(errno));
    fd[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    ck_assert_msg(fd[1] >= 0, "accept: %s", strerror(errno));
    close(l);
    int one = 1;                /* small messages go out at once */
    setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void t_set_linger0(int fd)
{
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
}

void t_set_bufs(int fd, int bytes)
{
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes), 0);
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes), 0);
}

int t_stalled_listener(struct sockaddr_in *addr, int *filler)
{
    int l = t_tcp_listener(0, addr);
    *filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(*filler >= 0, "socket: %s", strerror(errno));
    /* on loopback the handshake completes inside connect() */
    ck_assert_msg(connect(*filler, (struct sockaddr *)addr, sizeof *addr) == 0,
                  "connect: %s", strerror(errno));
    return l;
}

/* ---- children ---- */

int t_run_child(int (*fn)(void *), void *arg, double timeout_s,
                char *out, size_t outlen)
{
    /* A child of a multi-threaded process has only the forking thread: the
     * runtime in it would have no workers. Stop ours first (it waits for
     * every coroutine); the next test's fixture starts it again. */
    if (goro_workers() > 0 && goro_shutdown() != 0)
        return -1;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        setvbuf(stdout, NULL, _IONBF, 0);
        _exit(fn(arg));
    }
    close(pfd[1]);
    size_t len = 0;
    double end = t_now() + timeout_s;
    bool killed = false;
    for (;;) {
        int ms = (int)((end - t_now()) * 1000);
        if (ms <= 0) {
            kill(pid, SIGKILL);
            killed = true;
            break;
        }
        struct pollfd p = { .fd = pfd[0], .events = POLLIN };
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        char buf[4096];
        ssize_t n = read(pfd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t room = outlen > len + 1 ? outlen - len - 1 : 0;
        size_t take = (size_t)n < room ? (size_t)n : room;
        memcpy(out + len, buf, take);
        len += take;
    }
    if (outlen)
        out[len] = 0;
    close(pfd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return killed ? -1 : status;
}

/* ---- waits of every kind, blocked until the test ends them ---- */

struct t_bw t_bw;

void t_bw_pair_setup(void)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t_bw.s), 0);
}

void t_bw_pair_close(void)
{
    ck_assert_int_eq(goro_close(t_bw.s[0]), 0);
    ck_assert_int_eq(goro_close(t_bw.s[1]), 0);
}

void t_bw_after_read(void)
{
    char c = 0;
    ck_assert_int_eq(goro_write(t_bw.s[1], "n", 1), 1);
    ck_assert_int_eq(goro_read(t_bw.s[0], &c, 1), 1);
    ck_assert_int_eq(c, 'n');
    t_bw_pair_close();
}

/* A unix stream socket that is full stays full (its buffer is charged to
 * the writer until read; TCP on loopback would free room as data moves to
 * the peer), so any further write blocks. */
void t_bw_full_setup(void)
{
    t_bw_pair_setup();
    int fl = fcntl(t_bw.s[0], F_GETFL);
    ck_assert_int_eq(fcntl(t_bw.s[0], F_SETFL, fl | O_NONBLOCK), 0);
    static char junk[1 << 16];
    t_bw.filled = 0;
    t_bw.written = 0;
    for (;;) {
        ssize_t w = write(t_bw.s[0], junk, sizeof junk);
        if (w < 0) {
            ck_assert_int_eq(errno, EAGAIN);
            break;
        }
        t_bw.filled += w;
    }
}

void t_bw_after_write(void)
{
    static char junk[1 << 16];
    long want = t_bw.filled + (long)t_bw.written, got = 0;
    for (;;) {
        ssize_t r = recv(t_bw.s[1], junk, sizeof junk, MSG_DONTWAIT);
        if (r <= 0) {
            ck_assert_msg(r < 0 && errno == EAGAIN, "drain: %zd", r);
            break;
        }
        got += r;
    }
    ck_assert_msg(got == want, "the peer holds %ld bytes, want %ld", got, want);
    t_bw_pair_close();
}

void t_bw_listen_setup(void) { t_bw.l = t_tcp_listener(8, &t_bw.addr); }

void t_bw_after_accept(void)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(c, (struct sockaddr *)&t_bw.addr, sizeof t_bw.addr), 0);
    int fd = goro_accept(t_bw.l, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(goro_close(fd), 0);
    close(c);
    ck_assert_int_eq(goro_close(t_bw.l), 0);
}

void t_bw_stalled_setup(void)
{
    t_bw.l = t_stalled_listener(&t_bw.addr, &t_bw.filler);
    t_bw.c = goro_socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(t_bw.c, 0);
}

void t_bw_after_connect(void)
{
    ck_assert_int_eq(goro_close(t_bw.c), 0);    /* the attempt is abandoned */
    close(t_bw.filler);
    close(t_bw.l);
}

void t_bw_chans_setup(void)
{
    ck_assert_int_eq(goro_chan_new(&t_bw.unb, sizeof(long), 0), 0);
    ck_assert_int_eq(goro_chan_new(&t_bw.buf, sizeof(long), 1), 0);
}

void t_bw_full_chans_setup(void)
{
    t_bw_chans_setup();
    long v = 5;
    ck_assert_int_eq(goro_chan_try_send(t_bw.buf, &v), 0);
}

/* A stale waiter left behind would take the next value. */
void t_bw_after_chans(void)
{
    long v = 6;
    ck_assert_int_eq(goro_chan_try_send(t_bw.unb, &v), -EAGAIN);   /* no receiver */
    ck_assert_int_eq(goro_chan_try_recv(t_bw.unb, &v), -EAGAIN);   /* no sender */
    long n = goro_chan_len(t_bw.buf);
    if (n == 0)                 /* the empty buffered channel: still works */
        ck_assert_int_eq(goro_chan_try_send(t_bw.buf, &v), 0);
    v = 0;
    ck_assert_int_eq(goro_chan_try_recv(t_bw.buf, &v), 1);
    ck_assert_int_eq(v, n ? 5 : 6);         /* the value buffered before, only */
    ck_assert_int_eq(goro_chan_try_recv(t_bw.buf, &v), -EAGAIN);
    ck_assert_int_eq(goro_chan_free(t_bw.unb), 0);                 /* nobody waits */
    ck_assert_int_eq(goro_chan_free(t_bw.buf), 0);
}

void t_bw_select_cases(goro_case_t cs[3], long *in, long *out)
{
    cs[0] = (goro_case_t){ t_bw.unb, GORO_RECV, in, 0 };
    cs[1] = (goro_case_t){ t_bw.buf, GORO_SEND, out, 0 };
    cs[2] = (goro_case_t){ t_bw.unb, GORO_SEND, out, 0 };
}

void t_bw_mutex_setup(void)
{
    ck_assert_int_eq(goro_mutex_init(&t_bw.mu), 0);
    ck_assert_int_eq(goro_mutex_trylock(&t_bw.mu), 0);
}

void t_bw_after_mutex(void)
{
    ck_assert_int_eq(goro_mutex_unlock(&t_bw.mu), 0);
    ck_assert_int_eq(goro_mutex_trylock(&t_bw.mu), 0);  /* free, not handed over */
    ck_assert_int_eq(goro_mutex_unlock(&t_bw.mu), 0);
    ck_assert_int_eq(goro_mutex_destroy(&t_bw.mu), 0);
}

void t_bw_wrheld_setup(void)
{
    ck_assert_int_eq(goro_rwlock_init(&t_bw.rw), 0);
    ck_assert_int_eq(goro_rwlock_trywrlock(&t_bw.rw), 0);
}

void t_bw_rdheld_setup(void)
{
    ck_assert_int_eq(goro_rwlock_init(&t_bw.rw), 0);
    ck_assert_int_eq(goro_rwlock_tryrdlock(&t_bw.rw), 0);
}

/* The test thread lets go of its hold (read or write): then the lock is
 * free - no stale waiter was handed it. */
void t_bw_after_rwlock(void)
{
    ck_assert_int_eq(goro_rwlock_unlock(&t_bw.rw), 0);
    ck_assert_int_eq(goro_rwlock_trywrlock(&t_bw.rw), 0);
    ck_assert_int_eq(goro_rwlock_unlock(&t_bw.rw), 0);
    ck_assert_int_eq(goro_rwlock_destroy(&t_bw.rw), 0);
}

/* A reader held it: a writer that gave up no longer holds new readers
 * back. */
void t_bw_after_rdheld(void)
{
    ck_assert_int_eq(goro_rwlock_tryrdlock(&t_bw.rw), 0);
    ck_assert_int_eq(goro_rwlock_unlock(&t_bw.rw), 0);
    t_bw_after_rwlock();
}

void t_bw_cond_setup(void)
{
    ck_assert_int_eq(goro_mutex_init(&t_bw.mu), 0);
    ck_assert_int_eq(goro_cond_init(&t_bw.cv), 0);
}

void t_bw_after_cond(void)
{
    ck_assert_int_eq(goro_cond_destroy(&t_bw.cv), 0);      /* not still queued */
    ck_assert_int_eq(goro_mutex_trylock(&t_bw.mu), 0);     /* released by the waiter */
    ck_assert_int_eq(goro_mutex_unlock(&t_bw.mu), 0);
    ck_assert_int_eq(goro_mutex_destroy(&t_bw.mu), 0);
}

void t_bw_sem_setup(void) { ck_assert_int_eq(goro_sem_init(&t_bw.sem, 0), 0); }

void t_bw_after_sem(void)
{
    ck_assert_int_eq(goro_sem_release(&t_bw.sem), 0);
    ck_assert_int_eq(goro_sem_try_acquire(&t_bw.sem), 0);      /* not given to a ghost */
    ck_assert_int_eq(goro_sem_try_acquire(&t_bw.sem), -EAGAIN);
    ck_assert_int_eq(goro_sem_destroy(&t_bw.sem), 0);
}

void t_bw_wg_setup(void)
{
    ck_assert_int_eq(goro_waitgroup_init(&t_bw.wg), 0);
    ck_assert_int_eq(goro_waitgroup_add(&t_bw.wg, 1), 0);
}

void t_bw_after_wg(void)
{
    ck_assert_int_eq(goro_waitgroup_done(&t_bw.wg), 0);
    ck_assert_int_eq(goro_waitgroup_wait(&t_bw.wg), 0);
    ck_assert_int_eq(goro_waitgroup_destroy(&t_bw.wg), 0);
}

static long bw_blocked_body(goro_chan_t *release)
{
    goro_chan_recv(release, NULL);
    return 42;
}

void t_bw_join_setup(void)
{
    ck_assert_int_eq(goro_chan_new(&t_bw.release, 0, 0), 0);
    ck_assert_ptr_nonnull(t_bw.blocked = go(bw_blocked_body, t_bw.release));
}

void t_bw_group_full_setup(void)
{
    ck_assert_int_eq(goro_chan_new(&t_bw.release, 0, 0), 0);
    ck_assert_int_eq(goro_group_new(&t_bw.grp, &(goro_group_attr_t){ .limit = 1 }), 0);
    ck_assert_int_eq(goro_group_go(t_bw.grp, bw_blocked_body, t_bw.release), 0);
}

/* Key "k" of t_bw.fl: computed until release closes, then 42; its
 * caller besides the one under test waits for it all along. */
static long bw_flight_fn(const char *key, void *release)
{
    (void)key;
    int r = goro_chan_recv(release, NULL);
    return r == 0 ? 42 : r;
}

long t_bw_flight_wait(int64_t deadline)
{
    long v = -1;
    goro_err_t *err = NULL;
    int r = goro_flight_do_until(t_bw.fl, "k", bw_flight_fn, t_bw.release, &v, &err,
                                 deadline);
    if (err) {
        t_fail("flight: an error object from a wait that gave up: %s", goro_err_msg(err));
        goro_err_free(err);
    }
    if (r == 0 && v != 42)
        t_fail("flight: result %ld", v);
    return r;
}

static long bw_flight_caller(void)
{
    return t_bw_flight_wait(GORO_FOREVER);
}

void t_bw_flight_setup(void)
{
    ck_assert_int_eq(goro_chan_new(&t_bw.release, 0, 0), 0);
    ck_assert_int_eq(goro_flight_new(&t_bw.fl), 0);
    ck_assert_ptr_nonnull(t_bw.flight_caller = go(bw_flight_caller));
}

/* The wait that gave up did not end the computation: the other caller
 * gets its result, and the set is idle afterwards. */
void t_bw_after_flight(void)
{
    ck_assert_int_eq(goro_chan_close(t_bw.release), 0);
    long r = -1;
    ck_assert_int_eq(goro_join(t_bw.flight_caller, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_flight_free(t_bw.fl), 0);
    ck_assert_int_eq(goro_chan_free(t_bw.release), 0);
}

/* The spawn that was refused took no slot and left no member. */
void t_bw_after_group(void)
{
    ck_assert_int_eq(goro_group_running(t_bw.grp), 1);
    ck_assert_int_eq(goro_chan_close(t_bw.release), 0);
    ck_assert_int_eq(goro_group_wait(t_bw.grp, NULL, NULL), 0);
    ck_assert_int_eq(goro_group_free(t_bw.grp), 0);
    ck_assert_int_eq(goro_chan_free(t_bw.release), 0);
}

/* The joinee did not end with its joiner's wait. */
void t_bw_after_join(void)
{
    ck_assert_int_eq(goro_chan_close(t_bw.release), 0);
    long r = 0;
    ck_assert_int_eq(goro_join(t_bw.blocked, &r), 0);
    ck_assert_int_eq(r, 42);
    ck_assert_int_eq(goro_chan_free(t_bw.release), 0);
}

int t_count_lines(const char *text, const char *prefix, ...)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
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
