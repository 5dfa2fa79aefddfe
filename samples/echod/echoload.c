/* echoload: load for an echo server, itself a goro program.
 *
 * Each connection is a coroutine running a closed loop, written as plain
 * blocking code: send a message, read until the whole echo is back, check
 * it, note the latency, send the next. (--engine epoll runs the same loops
 * as state machines on one plain thread instead: load_epoll.c.) The parent process (load_procs.c)
 * forks one or more of these load processes and tells each, through a
 * pipe, when to start counting, when to stop and when to close; each
 * reports counts and latencies back through another pipe. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <goro.h>

#include "echoload.h"

/* Connects in flight at once: beyond the server's accept queue they would
 * be dropped and retried a second later. */
#define DIALING_MAX 256

/* Failures by kind; the first of each kind is described on stderr. */
static const char *const failure_text[F_KINDS] = {
    [F_CONNECT] = "connect failed",
    [F_IO] = "a connection failed",
    [F_VERIFY] = "an echo differed from the message sent",
    [F_SILENT] = "a connection got no echo before the end",
};

struct client {
    long id;                    /* over all processes: picks source and pattern */
    uint64_t rounds;
};

static struct {
    const struct load_options *opt;
    struct sockaddr_in target;
    char target_text[INET_ADDRSTRLEN + 8];   /* the same, for goro_dial */
    _Atomic int phase;
    _Atomic long connected;
    _Atomic long failures[F_KINDS];
    _Atomic int failure_said[F_KINDS];
    _Atomic uint64_t rounds_recent, rounds_measured;
    struct hist recent, measured;
    goro_sem_t dialing;
    goro_waitgroup_t dialed, stopped, finished;
    goro_chan_t *released;      /* closed when the connections may close */
    goro_mutex_t report_lock;   /* one report at a time on the pipe */
    int report_fd;
    int proc;
} load;

static const goro_attr_t client_attr = { .name = "echoload-conn" };
static const goro_attr_t service_attr = { .name = "echoload-service", .stack_size = 64 * 1024 };

/* ---- messages ---- */

static uint64_t mix(uint64_t x)           /* splitmix64's finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A message no other connection or round sends: a stale or crossed echo
 * cannot pass the check. */
void load_fill(unsigned char *msg, size_t size, long id, uint64_t round)
{
    uint64_t x = mix(((uint64_t)id << 32) ^ round ^ 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < size; i += 8) {
        x = mix(x + i);
        size_t n = size - i < 8 ? size - i : 8;
        memcpy(msg + i, &x, n);
    }
    /* One line, so that echod --lines echoes it whole: "\n" at the end
     * and nowhere else. */
    for (size_t i = 0; i + 1 < size; i++)
        if (msg[i] == '\n')
            msg[i] = ' ';
    if (size)
        msg[size - 1] = '\n';
}

/* ---- failures ---- */

void load_failed(enum load_failure kind, int err)
{
    atomic_fetch_add(&load.failures[kind], 1);
    if (atomic_exchange(&load.failure_said[kind], 1) == 0)
        fprintf(stderr, "echoload: %s%s%s (more are only counted)\n", failure_text[kind],
                err ? ": " : "", err ? strerror(err) : "");
}

/* ---- one connection ---- */

enum load_phase load_phase_now(void)
{
    return atomic_load_explicit(&load.phase, memory_order_relaxed);
}

void load_connected(void)
{
    atomic_fetch_add(&load.connected, 1);
}

struct sockaddr_in load_source(long id)
{
    return (struct sockaddr_in){
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl(0x7f000001u + (uint32_t)(id % load.opt->sources)),
    };
}

static int dial(const struct client *c)
{
    const struct load_options *opt = load.opt;
    struct sockaddr_in source = load_source(c->id);
    char local[INET_ADDRSTRLEN + 4];
    int fd = -1;

    /* Port chosen at connect, per (source, server) pair: 64k per source. */
    inet_ntop(AF_INET, &source.sin_addr, local, INET_ADDRSTRLEN);
    strcat(local, ":0");
    goro_sem_acquire(&load.dialing);
    int err = goro_dial_opts("tcp4", load.target_text, &(goro_dial_opts_t){ .local = local },
                             goro_now() + (int64_t)(opt->timeout * GORO_SEC), &fd);
    goro_sem_release(&load.dialing);
    if (err) {
        load_failed(F_CONNECT, -err);
        return err;
    }
    load_connected();               /* goro_dial set TCP_NODELAY */
    return fd;
}

/* One message there and back: 0, -errno, or 1 when the echo differs. */
static int round_trip(int fd, struct goro_tls_conn *tls, const unsigned char *out,
                      unsigned char *in, size_t size)
{
    int64_t deadline = goro_now() + (int64_t)(load.opt->timeout * GORO_SEC);
    for (size_t off = 0; off < size; off += LOAD_PIECE) {
        size_t n = size - off < LOAD_PIECE ? size - off : LOAD_PIECE;
        ssize_t w = tls ? load_tls_write_all(tls, out + off, n, deadline)
                        : goro_write_all_until(fd, out + off, n, NULL, deadline);
        if (w < 0)
            return (int)w;
        ssize_t r = tls ? load_tls_read_full(tls, in + off, n, deadline)
                        : goro_read_full_until(fd, in + off, n, NULL, deadline);
        if (r < 0 || (size_t)r < n)
            return r < 0 ? (int)r : -ECONNRESET;   /* an early end */
        if (load.opt->verify && memcmp(in + off, out + off, n) != 0)
            return 1;
    }
    return 0;
}

void load_note_round(int64_t ns)
{
    atomic_fetch_add_explicit(&load.rounds_recent, 1, memory_order_relaxed);
    hist_record(&load.recent, ns);
    if (load_phase_now() == MEASURING) {
        atomic_fetch_add_explicit(&load.rounds_measured, 1, memory_order_relaxed);
        hist_record(&load.measured, ns);
    }
}

/* The closed loop, until told to stop (true) or something fails (false). */
static bool echo_loop(int fd, struct goro_tls_conn *tls, struct client *c, unsigned char *out,
                      unsigned char *in)
{
    size_t size = load.opt->size;
    while (load_phase_now() != STOPPED) {
        load_fill(out, size, c->id, c->rounds);
        int64_t t0 = goro_now();
        int r = round_trip(fd, tls, out, in, size);
        if (r == 1) {
            load_failed(F_VERIFY, 0);
            return false;
        }
        if (r < 0) {
            load_failed(F_IO, -r);
            return false;
        }
        load_note_round(goro_now() - t0);
        c->rounds++;
    }
    if (c->rounds == 0)
        load_failed(F_SILENT, 0);
    return true;
}

static void client(struct client *c)
{
    unsigned char *buf = malloc(2 * load.opt->size);
    int fd = -ENOMEM;
    if (buf)
        fd = dial(c);
    else
        load_failed(F_CONNECT, ENOMEM);
    struct goro_tls_conn *tls = NULL;
    int err;
    if (fd >= 0 && load.opt->tls &&
        (err = load_tls_open(fd, &tls, goro_now() + (int64_t)(load.opt->timeout * GORO_SEC)))) {
        load_failed(F_CONNECT, -err);
        goro_close(fd);
        fd = -1;
    }
    goro_waitgroup_done(&load.dialed);
    if (fd >= 0 && !echo_loop(fd, tls, c, buf, buf + load.opt->size)) {
        load_tls_close(tls);
        tls = NULL;
        goro_close(fd);                    /* broken: do not hold it */
        fd = -1;
    }
    goro_waitgroup_done(&load.stopped);
    goro_chan_recv(load.released, NULL);   /* hold the connection until then */
    load_tls_close(tls);
    if (fd >= 0)
        goro_close(fd);
    free(buf);
    goro_waitgroup_done(&load.finished);
}

/* ---- reports to the parent, and its commands ---- */

static void send_report(enum report_kind kind, struct report *r)
{
    r->kind = kind;
    r->proc = load.proc;
    r->connected = atomic_load(&load.connected);
    r->connect_errors = atomic_load(&load.failures[F_CONNECT]);
    r->io_errors = atomic_load(&load.failures[F_IO]);
    r->verify_errors = atomic_load(&load.failures[F_VERIFY]);
    r->silent = atomic_load(&load.failures[F_SILENT]);
    goro_mutex_lock(&load.report_lock);
    goro_write_all(load.report_fd, r, sizeof *r);
    goro_mutex_unlock(&load.report_lock);
}

/* Every second: round trips and latencies since the last report. Stopped by
 * closing quit, never cancelled: a cancelled write could leave half a
 * report in the pipe. */
static void progress_loop(goro_chan_t *quit)
{
    static struct report r;       /* 9 KiB: off the stack */
    int64_t next = goro_now();
    for (;;) {
        next += GORO_SEC;
        if (goro_chan_recv_until(quit, NULL, next) != -ETIMEDOUT)
            return;
        memset(&r, 0, sizeof r);
        r.rounds = (int64_t)atomic_exchange(&load.rounds_recent, 0);
        hist_drain(&load.recent, &r.hist);
        send_report(REPORT_PROGRESS, &r);
    }
}

static void control_loop(int fd)
{
    char cmd;
    while (goro_read(fd, &cmd, 1) == 1 && cmd != CONTROL_CLOSE) {
        if (cmd == CONTROL_MEASURE)
            atomic_store(&load.phase, MEASURING);
        else if (cmd == CONTROL_STOP)
            atomic_store(&load.phase, STOPPED);
    }
    atomic_store(&load.phase, STOPPED);     /* also when the parent is gone */
    goro_chan_close(load.released);
    goro_close(fd);
}

/* ---- the process ---- */

/* Starts the connection coroutines, at --ramp per second if asked. */
static void start_clients(struct client *clients, long first, long count)
{
    double ramp = load.opt->ramp / load.opt->procs;
    int64_t t0 = goro_now();
    for (long i = 0; i < count; i++) {
        if (ramp > 0)
            goro_sleep_until(t0 + (int64_t)((double)i * GORO_SEC / ramp));
        clients[i].id = first + i;
        if (goro_go(NULL, &client_attr, client, &clients[i]) != 0) {
            load_failed(F_CONNECT, ENOMEM);
            goro_waitgroup_done(&load.dialed);
            goro_waitgroup_done(&load.stopped);
            goro_waitgroup_done(&load.finished);
        }
    }
}

__attribute__((noreturn)) static void die_out_of_memory(void)
{
    fputs("echoload: out of memory\n", stderr);
    exit(1);
}

static void report_final(void)
{
    static struct report final;   /* 9 KiB: off the stack */
    memset(&final, 0, sizeof final);
    final.rounds = (int64_t)atomic_load(&load.rounds_measured);
    hist_drain(&load.measured, &final.hist);
    send_report(REPORT_FINAL, &final);
}

static void report_connected(void)
{
    static struct report connected;
    send_report(REPORT_CONNECTED, &connected);
}

/* --engine goro: a coroutine per connection. */
static void run_coroutines(long first, long count)
{
    struct client *clients = calloc((size_t)count, sizeof *clients);
    if (!clients) {
        die_out_of_memory();
    }
    start_clients(clients, first, count);
    goro_waitgroup_wait(&load.dialed);
    report_connected();
    goro_waitgroup_wait(&load.stopped);
    report_final();
    goro_waitgroup_wait(&load.finished);
    free(clients);
}

static long lean_dial_call(void *arg)
{
    const long *range = arg;
    return (long)(intptr_t)lean_dial(load.opt, &load.target, range[0], range[1]);
}

static long lean_run_call(void *l)
{
    lean_run(l);
    return 0;
}

/* Runs fn on a plain thread, so that the runtime goes on serving the
 * parent's pipes meanwhile. */
static long off_worker(long (*fn)(void *), void *arg)
{
    long result = 0;
    int err = goro_offload(fn, arg, &result);
    if (err) {
        fprintf(stderr, "echoload: cannot start the connections' thread: %s\n", strerror(-err));
        exit(1);
    }
    return result;
}

/* --engine epoll: the connections on one plain thread. */
static void run_lean(long first, long count)
{
    long range[2] = { first, count };
    struct lean_load *l = (struct lean_load *)(intptr_t)off_worker(lean_dial_call, range);
    if (!l) {
        die_out_of_memory();
    }
    report_connected();
    off_worker(lean_run_call, l);
    report_final();
    goro_chan_recv(load.released, NULL);   /* hold the connections until then */
    lean_close(l);
}

static void run(long first, long count, int control_fd)
{
    goro_chan_t *quit;
    goro_t *control, *progress;

    if (goro_chan_new(&quit, 0, 0) < 0 ||
        goro_go(&control, &service_attr, control_loop, control_fd) < 0 ||
        goro_go(&progress, &service_attr, progress_loop, quit) < 0) {
        die_out_of_memory();
    }
    if (load.opt->engine == ENGINE_EPOLL)
        run_lean(first, count);
    else
        run_coroutines(first, count);
    goro_chan_close(quit);
    goro_join(progress, NULL);
    goro_join(control, NULL);
    goro_chan_free(quit);
    goro_close(load.report_fd);
}

/* Each connection takes a descriptor; the limit is per process. */
static int check_fd_limit(long count, int procs)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    long need = count + 64;
    if (rl.rlim_max == RLIM_INFINITY || (long)rl.rlim_max >= need)
        return 0;
    fprintf(stderr, "echoload: %ld connections per process need %ld descriptors but the "
            "limit is %ld: use more --procs (now %d) or raise ulimit -n\n",
            count, need, (long)rl.rlim_max, procs);
    return -1;
}

static int setup(const struct load_options *opt, int proc, long count, int report_fd)
{
    load.opt = opt;
    load.proc = proc;
    load.report_fd = report_fd;
    load.target = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr = opt->host,
                                        .sin_port = htons((uint16_t)opt->port) };
    inet_ntop(AF_INET, &opt->host, load.target_text, INET_ADDRSTRLEN);
    snprintf(load.target_text + strlen(load.target_text), 8, ":%d", opt->port);
    /* The lean engine's connections are not coroutines: one worker serves
     * the pipes. */
    int workers = opt->engine == ENGINE_EPOLL ? 1 : opt->workers;
    /* An OpenSSL handshake needs more than the echo loop's 32 KiB. */
    goro_config_t config = { .workers = workers,
                             .stack_size = opt->tls ? 128 * 1024 : 32 * 1024 };
    int err = goro_start(&config);
    if (!err)
        err = goro_chan_new(&load.released, 0, 0);
    if (err) {
        fprintf(stderr, "echoload: cannot start: %s\n", strerror(-err));
        return -1;
    }
    load_tls_setup(opt);
    goro_sem_init(&load.dialing, DIALING_MAX);
    goro_waitgroup_add(&load.dialed, count);
    goro_waitgroup_add(&load.stopped, count);
    goro_waitgroup_add(&load.finished, count);
    return 0;
}

int load_process(const struct load_options *opt, int proc, long first, long count,
                 int report_fd, int control_fd)
{
    if (check_fd_limit(count, opt->procs) < 0 || setup(opt, proc, count, report_fd) < 0)
        return 2;
    goro_t *h = go(run, first, count, control_fd);
    if (!h) {
        perror("echoload: cannot start");
        return 1;
    }
    goro_join(h, NULL);
    goro_chan_free(load.released);
    return goro_shutdown() == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    struct load_options opt;
    load_options_parse(argc, argv, &opt);
    return run_load(&opt);
}
