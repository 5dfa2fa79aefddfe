/* echo_libevent.c - libevent echo server, the event-library baseline for
 * goro's echo benchmark (bench/echo.sh).
 *
 *   echo_libevent --port P
 *
 * Listens on 127.0.0.1:P and sends every byte it receives back, on one
 * thread: an evconnlistener accepts, each connection is a socket
 * bufferevent whose read callback moves the whole input buffer to the
 * output buffer (evbuffer_add_buffer moves the chains, no copy).
 *
 * Backpressure: once more than HIGH_WATER bytes wait in the output (the
 * peer does not read its echoes), the connection stops reading; the write
 * callback, which fires when the output has drained to LOW_WATER, resumes
 * it. The read high watermark bounds the input side the same way, so a
 * connection never holds much more than HIGH_WATER bytes.
 *
 * Prints one "listening" line to stderr; exits with status 0 on SIGTERM or
 * SIGINT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#define HIGH_WATER (64 * 1024)
#define LOW_WATER (16 * 1024)

static void die(const char *what)
{
    fprintf(stderr, "echo_libevent: %s failed\n", what);
    exit(1);
}

/* Thousands of connections need thousands of descriptors. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct evbuffer *out = bufferevent_get_output(bev);
    (void)arg;
    evbuffer_add_buffer(out, bufferevent_get_input(bev));
    if (evbuffer_get_length(out) >= HIGH_WATER)
        bufferevent_disable(bev, EV_READ);
}

/* The output drained to LOW_WATER (after most writes): read again if
 * on_read had stopped. */
static void on_write(struct bufferevent *bev, void *arg)
{
    (void)arg;
    if (!(bufferevent_get_enabled(bev) & EV_READ))
        bufferevent_enable(bev, EV_READ);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        bufferevent_free(bev);   /* closes the socket too */
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int salen, void *arg)
{
    struct event_base *base = evconnlistener_get_base(l);
    struct bufferevent *bev;
    int one = 1;
    (void)sa, (void)salen, (void)arg;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        evutil_closesocket(fd);
        return;
    }
    bufferevent_setcb(bev, on_read, on_write, on_event, NULL);
    bufferevent_setwatermark(bev, EV_READ, 0, HIGH_WATER);
    bufferevent_setwatermark(bev, EV_WRITE, LOW_WATER, 0);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void on_signal(evutil_socket_t sig, short what, void *base)
{
    (void)sig, (void)what;
    event_base_loopbreak(base);
}

/* --port P; --threads is accepted for symmetry with echo_epoll, but only 1. */
static int parse_port(int argc, char **argv)
{
    int port = 0, ok = argc % 2 == 1;
    for (int i = 1; ok && i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else
            ok = strcmp(argv[i], "--threads") == 0 && atoi(argv[i + 1]) == 1;
    }
    if (!ok || port <= 0 || port > 65535) {
        fprintf(stderr, "usage: echo_libevent --port P [--threads 1]\n");
        exit(2);
    }
    return port;
}

int main(int argc, char **argv)
{
    int port = parse_port(argc, argv);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    struct event_base *base;
    struct evconnlistener *l;
    struct event *sigterm, *sigint;

    raise_nofile();
    signal(SIGPIPE, SIG_IGN);   /* a peer gone mid-write is an error event */
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    base = event_base_new();
    if (!base)
        die("event_base_new");
    /* SOMAXCONN, not libevent's default backlog of 128: thousands of
     * connections arrive at once, and a dropped SYN costs a 1 s retry. */
    l = evconnlistener_new_bind(base, on_accept, NULL,
                                LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE, SOMAXCONN,
                                (struct sockaddr *)&sa, sizeof sa);
    if (!l) {
        perror("echo_libevent: bind");
        return 1;
    }
    sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    sigint = evsignal_new(base, SIGINT, on_signal, base);
    if (!sigterm || !sigint || evsignal_add(sigterm, NULL) || evsignal_add(sigint, NULL))
        die("evsignal_add");
    fprintf(stderr, "echo_libevent: listening on 127.0.0.1:%d\n", port);
    event_base_dispatch(base);
    /* Open connections are not tracked; they close with the process. */
    event_free(sigterm);
    event_free(sigint);
    evconnlistener_free(l);
    event_base_free(base);
    return 0;
}
