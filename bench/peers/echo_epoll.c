/* echo_epoll.c - hand-written epoll echo server, the C baseline for goro's
 * echo benchmark (bench/echo.sh).
 *
 *   echo_epoll --port P [--threads N]
 *
 * Listens on 127.0.0.1:P and sends every byte it receives back. Each of the
 * N threads (default 1) has its own listening socket (SO_REUSEPORT, so the
 * kernel spreads new connections over them) and its own edge-triggered
 * epoll set, and serves the connections it accepted: no locks, no hand-off
 * between threads - the shape a tuned C server has.
 *
 * A connection owns a small buffer. It reads at most one buffer full, writes
 * it back, and reads again only once all of it has gone out: when the peer
 * does not read, the socket's send buffer fills, the write stops short and
 * the connection waits for EPOLLOUT, so no data piles up in the server.
 *
 * Prints one "listening" line to stderr; exits with status 0 on SIGTERM or
 * SIGINT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE 4096   /* per connection; as Go's and goro's servers */
#define MAX_EVENTS 256
#define MAX_THREADS 64

struct conn {
    int fd;
    uint32_t off, len;  /* bytes buf[off, len) still to be written */
    char buf[BUF_SIZE];
};

/* Markers in epoll_event.data.ptr for the two descriptors that are not
 * connections. */
static char listen_tag, stop_tag;

static int stop_fd = -1;  /* eventfd: written once on SIGTERM / SIGINT */

static void die(const char *what)
{
    perror(what);
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

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    if (fd < 0)
        die("socket");
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0)
        die("SO_REUSEPORT");
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("bind");
    if (listen(fd, SOMAXCONN) < 0)
        die("listen");
    return fd;
}

static void add_fd(int ep, int fd, uint32_t events, void *ptr)
{
    struct epoll_event ev = { .events = events, .data.ptr = ptr };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        die("epoll_ctl");
}

static void conn_close(struct conn *c)
{
    close(c->fd);   /* also removes it from the epoll set */
    free(c);
}

/* Accepts until the backlog is empty (edge-triggered: the next edge comes
 * only with a new connection). Out of descriptors or memory, the
 * connection stays in the backlog and is tried at the next edge. */
static void accept_all(int ep, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        struct conn *c = malloc(sizeof *c);
        if (!c) {
            close(fd);
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        c->off = c->len = 0;
        /* Both directions at once, edge-triggered: EPOLLOUT then fires only
         * when a full send buffer drains, so it costs nothing otherwise and
         * needs no epoll_ctl per stalled write. */
        add_fd(ep, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, c);
    }
}

/* Writes what is pending. Returns 1 when all went out, 0 when the socket
 * is full (wait for EPOLLOUT), -1 on error. */
static int flush(struct conn *c)
{
    while (c->off < c->len) {
        ssize_t n = write(c->fd, c->buf + c->off, c->len - c->off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? 0 : -1;
        }
        c->off += (uint32_t)n;
    }
    c->off = c->len = 0;
    return 1;
}

/* Echoes until the socket has nothing more to read or cannot take more.
 * Either way an edge will come (EPOLLIN or EPOLLOUT) to resume. Returns 0,
 * or -1 when the connection is finished. */
static int serve(struct conn *c)
{
    for (;;) {
        int r = flush(c);
        if (r <= 0)
            return r;
        ssize_t n = read(c->fd, c->buf, BUF_SIZE);
        if (n > 0) {
            c->len = (uint32_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN ? 0 : -1;
    }
}

static void *worker(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event evs[MAX_EVENTS];
    if (ep < 0)
        die("epoll_create1");
    add_fd(ep, lfd, EPOLLIN | EPOLLET, &listen_tag);
    /* Level-triggered and never read: every thread sees the stop. */
    add_fd(ep, stop_fd, EPOLLIN, &stop_tag);
    for (;;) {
        int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &stop_tag)
                goto out;   /* connections die with the process */
            if (p == &listen_tag)
                accept_all(ep, lfd);
            else if (serve(p) < 0)
                conn_close(p);
        }
    }
out:
    close(ep);
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: echo_epoll --port P [--threads N]\n");
    exit(2);
}

static void parse(int argc, char **argv, int *port, int *threads)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--port") == 0)
            *port = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0)
            *threads = atoi(argv[++i]);
        else
            usage();
    }
    if (*port <= 0 || *port > 65535 || *threads < 1 || *threads > MAX_THREADS)
        usage();
}

int main(int argc, char **argv)
{
    int port = 0, threads = 1, sig;
    pthread_t tid[MAX_THREADS];
    int lfd[MAX_THREADS];
    sigset_t stop;

    parse(argc, argv, &port, &threads);
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);   /* a peer gone mid-write is an EPIPE */
    /* Blocked before any thread starts, so only sigwait below takes them. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    stop_fd = eventfd(0, EFD_CLOEXEC);
    if (stop_fd < 0)
        die("eventfd");
    /* All sockets bound before the "listening" line, so a client that
     * reads it can connect at once. */
    for (int i = 0; i < threads; i++)
        lfd[i] = listen_on(port);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)lfd[i]) != 0)
            die("pthread_create");
    fprintf(stderr, "echo_epoll: listening on 127.0.0.1:%d, %d thread(s)\n", port, threads);
    sigwait(&stop, &sig);
    if (eventfd_write(stop_fd, 1) < 0)
        die("eventfd_write");
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        close(lfd[i]);
    }
    return 0;
}
