/* echoload's lean engine (--engine epoll): every connection of a load
 * process on one plain thread, one level-triggered epoll set, no runtime.
 *
 * Each connection is a small state machine running the same closed loop
 * as the coroutine engine's: write a piece of the message, read its echo
 * back in full, check it, and go on with the next piece or the next
 * message. Per round trip it makes the calls a hand-written server makes
 * (a write, a read, a share of an epoll_wait), which is what lets a
 * benchmark measure a server and not its load generator. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <goro.h>

#include "echoload.h"

#define EVENTS_MAX 256
/* How often, at most, the loop looks at the phase and the deadlines when
 * no event comes. */
#define TICK_MS 20

struct lean_conn {
    int fd;                     /* -1: never connected, or failed */
    bool busy;                  /* a round trip is in flight */
    bool want_out;              /* registered for EPOLLOUT too */
    long id;
    uint64_t rounds;
    size_t off;                 /* where the piece in flight starts */
    size_t piece;               /* its length */
    size_t sent, got;           /* of the piece */
    int64_t t0;                 /* the round's start */
    unsigned char *out, *in;
};

struct lean_load {
    const struct load_options *opt;
    int ep;
    long count;
    long busy;                  /* connections with a round in flight */
    struct lean_conn *conns;
    unsigned char *bufs;
};

/* ---- connecting ---- */

/* A connected, non-blocking socket from connection id's source address,
 * or -errno. The connect blocks (at most the round-trip timeout). */
static int lean_connect(const struct load_options *opt, const struct sockaddr_in *target, long id)
{
    struct sockaddr_in source = load_source(id);
    struct timeval limit = { .tv_sec = (time_t)opt->timeout,
                             .tv_usec = (long)((opt->timeout - (double)(time_t)opt->timeout) * 1e6) };
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    if (bind(fd, (struct sockaddr *)&source, sizeof source) != 0 ||
        connect(fd, (const struct sockaddr *)target, sizeof *target) != 0 ||
        fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
        int err = errno == EINPROGRESS ? ETIMEDOUT : errno;   /* SO_SNDTIMEO ran out */
        close(fd);
        return -err;
    }
    return fd;
}

/* --ramp: connection i of this process is due at t0 + i / rate. */
static void ramp_wait(const struct load_options *opt, int64_t t0, long i)
{
    double rate = opt->ramp / opt->procs;
    if (rate <= 0)
        return;
    int64_t due = t0 + (int64_t)((double)i * 1e9 / rate), wait = due - goro_now();
    if (wait > 0)
        nanosleep(&(struct timespec){ wait / 1000000000, wait % 1000000000 }, NULL);
}

struct lean_load *lean_dial(const struct load_options *opt, const struct sockaddr_in *target,
                            long first, long count)
{
    struct lean_load *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->opt = opt;
    l->count = count;
    l->conns = calloc((size_t)count, sizeof *l->conns);
    l->bufs = malloc((size_t)count * 2 * opt->size);
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    if (!l->conns || !l->bufs || l->ep < 0) {
        if (l->ep >= 0)
            close(l->ep);
        free(l->conns);
        free(l->bufs);
        free(l);
        return NULL;
    }
    int64_t t0 = goro_now();
    for (long i = 0; i < count; i++) {
        struct lean_conn *c = &l->conns[i];
        ramp_wait(opt, t0, i);
        c->id = first + i;
        c->out = l->bufs + (size_t)i * 2 * opt->size;
        c->in = c->out + opt->size;
        c->fd = lean_connect(opt, target, c->id);
        if (c->fd < 0) {
            load_failed(F_CONNECT, -c->fd);
            c->fd = -1;
            continue;
        }
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        if (epoll_ctl(l->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
            load_failed(F_CONNECT, errno);
            close(c->fd);
            c->fd = -1;
            continue;
        }
        load_connected();
    }
    return l;
}

/* ---- one connection's closed loop ---- */

static void drop(struct lean_load *l, struct lean_conn *c, enum load_failure kind, int err)
{
    load_failed(kind, err);
    if (c->busy)
        l->busy--;
    c->busy = false;
    close(c->fd);               /* also leaves the epoll set */
    c->fd = -1;
}

static void watch_out(struct lean_load *l, struct lean_conn *c, bool on)
{
    if (c->want_out == on)
        return;
    struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
    epoll_ctl(l->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = on;
}

/* Writes what the kernel takes of the piece in flight: false if the
 * connection failed. */
static bool send_some(struct lean_load *l, struct lean_conn *c)
{
    while (c->sent < c->piece) {
        ssize_t w = send(c->fd, c->out + c->off + c->sent, c->piece - c->sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w < 0) {
            drop(l, c, F_IO, errno);
            return false;
        }
        c->sent += (size_t)w;
    }
    watch_out(l, c, c->sent < c->piece);
    return true;
}

static bool start_piece(struct lean_load *l, struct lean_conn *c, size_t off)
{
    size_t size = l->opt->size;
    c->off = off;
    c->piece = size - off < LOAD_PIECE ? size - off : LOAD_PIECE;
    c->sent = c->got = 0;
    return send_some(l, c);
}

static void start_round(struct lean_load *l, struct lean_conn *c)
{
    load_fill(c->out, l->opt->size, c->id, c->rounds);
    c->t0 = goro_now();
    c->busy = true;
    l->busy++;
    start_piece(l, c, 0);
}

/* The piece in flight came back whole: check it, then the next piece, the
 * next round, or - once the phase is STOPPED - rest. */
static void piece_done(struct lean_load *l, struct lean_conn *c)
{
    if (l->opt->verify && memcmp(c->in + c->off, c->out + c->off, c->piece) != 0) {
        drop(l, c, F_VERIFY, 0);
        return;
    }
    if (c->off + c->piece < l->opt->size) {
        start_piece(l, c, c->off + c->piece);
        return;
    }
    load_note_round(goro_now() - c->t0);
    c->rounds++;
    c->busy = false;
    l->busy--;
    if (load_phase_now() != STOPPED)
        start_round(l, c);
}

static void receive_some(struct lean_load *l, struct lean_conn *c)
{
    while (c->fd >= 0 && c->busy && c->got < c->piece) {
        ssize_t r = read(c->fd, c->in + c->off + c->got, c->piece - c->got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return;
        if (r <= 0) {               /* an early end, or a failure */
            drop(l, c, F_IO, r == 0 ? ECONNRESET : errno);
            return;
        }
        c->got += (size_t)r;
        if (c->got == c->piece)
            piece_done(l, c);
    }
    if (c->fd >= 0 && !c->busy) {   /* bytes nobody asked for */
        char b;
        if (recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0)
            drop(l, c, F_IO, ECONNRESET);
    }
}

static void on_event(struct lean_load *l, struct lean_conn *c, uint32_t events)
{
    if ((events & EPOLLOUT) && c->busy && !send_some(l, c))
        return;
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        receive_some(l, c);
}

/* Rounds in flight longer than the timeout fail. */
static void check_deadlines(struct lean_load *l, int64_t now)
{
    int64_t limit = (int64_t)(l->opt->timeout * 1e9);
    for (long i = 0; i < l->count; i++) {
        struct lean_conn *c = &l->conns[i];
        if (c->fd >= 0 && c->busy && now - c->t0 > limit)
            drop(l, c, F_IO, ETIMEDOUT);
    }
}

void lean_run(struct lean_load *l)
{
    static struct epoll_event events[EVENTS_MAX];   /* one lean_run per process */
    for (long i = 0; i < l->count; i++)
        if (l->conns[i].fd >= 0)
            start_round(l, &l->conns[i]);
    int64_t checked = goro_now();
    while (load_phase_now() != STOPPED || l->busy > 0) {
        int n = epoll_wait(l->ep, events, EVENTS_MAX, TICK_MS);
        for (int i = 0; i < n; i++)
            on_event(l, events[i].data.ptr, events[i].events);
        int64_t now = goro_now();
        if (now - checked >= TICK_MS * 1000000LL) {
            check_deadlines(l, now);
            checked = now;
        }
    }
    for (long i = 0; i < l->count; i++)
        if (l->conns[i].fd >= 0 && l->conns[i].rounds == 0)
            load_failed(F_SILENT, 0);
}

void lean_close(struct lean_load *l)
{
    for (long i = 0; i < l->count; i++)
        if (l->conns[i].fd >= 0)
            close(l->conns[i].fd);
    close(l->ep);
    free(l->conns);
    free(l->bufs);
    free(l);
}
