/* fetch: fan-out to many servers as one group - a limit on the requests
 * in flight, a deadline for the whole batch, the first failure cancelling
 * the rest, failures printed as error objects with their causes, and
 * duplicate requests sharing one fetch (single-flight).
 *
 * It starts its own little HTTP/1.0 servers on 127.0.0.1 (coroutines of
 * this process, each with a behaviour: quick, slow, failing, or a port
 * nobody listens on), then runs four scenarios against them:
 *
 *   shared       64 requests for 16 pages (four in a row for each) on 8
 *                servers, at most 8 at once: all succeed, and requests for
 *                a page already being fetched share that fetch
 *   first-error  one server answers 500: the group's first failure cancels
 *                the requests still running and stops the feeding loop
 *   deadline     one server takes 10 s: the group's 300 ms deadline
 *                cancels the batch
 *   collect-all  a failing server and a closed port, and the policy that
 *                collects every failure: one error lists them all
 *
 *   fetch [-l limit] [-v] [scenario...]     (default: all four, in order)
 *
 * Exit status 0 when every scenario ended as it should (so `make test`
 * runs it), 1 otherwise. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <goro.h>

/* ---- the servers ---- */

enum behaviour { QUICK, SLOW, FAILING, CLOSED };

struct server {
    enum behaviour how;
    int fd;                        /* listening, -1 for CLOSED */
    uint16_t port;
};

/* Reads the request head (up to the blank line) and returns the page
 * number asked for ("GET /page/<n> "), or -1. */
static int read_request(int fd)
{
    char req[512];
    size_t got = 0;
    while (got < sizeof req - 1) {
        ssize_t n = goro_read(fd, req + got, sizeof req - 1 - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
        req[got] = 0;
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    int page;
    return sscanf(req, "GET /page/%d ", &page) == 1 ? page : -1;
}

/* One connection: answers after a delay that depends on the server. */
static void serve(struct server *s, int fd)
{
    int page = read_request(fd);
    int64_t delay = s->how == SLOW ? 10 * GORO_SEC : (5 + page % 7 * 3) * GORO_MSEC;
    char resp[256];
    int len;
    if (page < 0 || goro_sleep(delay) != 0)
        len = 0;                   /* a bad request, or shutting down: just close */
    else if (s->how == FAILING)
        len = snprintf(resp, sizeof resp, "HTTP/1.0 500 Internal Server Error\r\n"
                       "Content-Length: 15\r\n\r\ndatabase is down");
    else
        len = snprintf(resp, sizeof resp, "HTTP/1.0 200 OK\r\n\r\npage %d from port %u\n",
                       page, s->port);
    if (len > 0)
        goro_write_all(fd, resp, (size_t)len);
    goro_close(fd);
}

/* Accepts until the group it runs in is cancelled; each connection is
 * served by a member of the same group. */
static long accept_loop(struct server *s, goro_group_t *servers)
{
    int fd;
    while ((fd = goro_accept(s->fd, NULL, NULL)) >= 0)
        if (goro_group_go(servers, serve, s, fd) != 0)
            goro_close(fd);
    return fd == -ECANCELED ? 0 : fd;
}

/* goro_listen on an ephemeral port of 127.0.0.1 (closed at once for
 * a CLOSED server: connecting to it is refused). */
static int server_open(struct server *s)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    int fd = goro_socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return fd;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0) {
        int err = -errno;
        goro_close(fd);
        return err;
    }
    s->port = ntohs(a.sin_port);
    s->fd = fd;
    if (s->how == CLOSED) {
        goro_close(fd);
        s->fd = -1;
    }
    return 0;
}

/* ---- the client ---- */

/* GET /page/<page> from localhost:port. NULL on a 200 (*len: the body's
 * length), else the error, with what went wrong below it as its cause. */
static goro_err_t *get(uint16_t port, int page, long *len)
{
    char buf[1024], addr[32];
    goro_err_t *cause = NULL;
    int fd = -1;
    snprintf(addr, sizeof addr, "localhost:%u", port);
    int r = goro_dial("tcp4", addr, GORO_FOREVER, &fd);   /* resolved on the pool */
    if (r < 0) {
        cause = goro_err_new(r, "dial %s", addr);
        goto out;
    }
    int n = snprintf(buf, sizeof buf, "GET /page/%d HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", page);
    ssize_t w = goro_write_all(fd, buf, (size_t)n);
    if (w < 0) {
        cause = goro_err_new((int)w, "send the request");
        goto out;
    }
    size_t got = 0;
    ssize_t k;
    while (got < sizeof buf - 1 && (k = goro_read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)k;
    buf[got] = 0;
    if (k < 0) {
        cause = goro_err_new((int)k, "read the response");
        goto out;
    }
    int status = 0;
    char *body = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !body)
        cause = goro_err_new(EPROTO, "no HTTP response (%zu bytes)", got);
    else if (status != 200)
        cause = goro_err_new(EPROTO, "HTTP %d: %s", status, body + 4);
    else
        *len = (long)strlen(body + 4);
out:
    if (fd >= 0)
        goro_close(fd);
    return cause ? goro_err_wrap(cause, goro_err_code(cause), "GET 127.0.0.1:%u/page/%d",
                                 port, page)
                 : NULL;
}

/* ---- a batch ---- */

struct batch {
    struct server *servers;
    int nservers;
    goro_flight_t *shared;         /* requests of one page share its fetch, or NULL */
    atomic_int in_flight, most_in_flight, done, cancelled;
    atomic_long fetches;
};

struct request {
    struct batch *b;
    int page;
};

static void note_start(struct batch *b)
{
    int now = atomic_fetch_add(&b->in_flight, 1) + 1;
    int most = atomic_load(&b->most_in_flight);
    while (now > most && !atomic_compare_exchange_weak(&b->most_in_flight, &most, now))
        ;
}

/* The page's server: pages are spread over the servers by number. */
static uint16_t port_of(const struct batch *b, int page)
{
    return b->servers[page % b->nservers].port;
}

/* The single-flight computation: one fetch of a page (key "page/<n>"). */
static long fetch_page(const char *key, void *arg)
{
    struct batch *b = arg;
    int page = atoi(key + 5);
    long len = 0;
    atomic_fetch_add(&b->fetches, 1);
    goro_err_t *e = get(port_of(b, page), page, &len);
    if (e)
        goro_exit_err(e);
    return len;
}

/* A group member: one request, fetched directly or through the shared
 * fetches. Its failure is an error object naming the request. */
static long request(struct batch *b, int page)
{
    char name[32];
    snprintf(name, sizeof name, "request %d", page);
    goro_set_name(name);
    note_start(b);
    long len = 0;
    goro_err_t *e = NULL;
    int r = 0;
    if (b->shared) {
        char key[32];
        snprintf(key, sizeof key, "page/%d", page);
        r = goro_flight_do(b->shared, key, fetch_page, b, &len, &e);
    } else {
        atomic_fetch_add(&b->fetches, 1);
        e = get(port_of(b, page), page, &len);
        r = e ? -goro_err_code(e) : 0;
    }
    atomic_fetch_sub(&b->in_flight, 1);
    if (goro_cancelled()) {
        atomic_fetch_add(&b->cancelled, 1);
        goro_err_free(e);
        return -ECANCELED;
    }
    if (r < 0)
        goro_exit_err(goro_err_wrap(e ? e : goro_err_new(r, NULL), -r, "request for page %d",
                                    page));
    atomic_fetch_add(&b->done, 1);
    return len;
}

struct scenario {
    const char *name;
    enum behaviour servers[8];
    int nservers, requests, pages;
    int policy;
    int64_t deadline;              /* relative; 0: none */
    bool shared;
    int want, want_too;            /* the group's outcome: 0 or -errno (either) */
    int failures;                  /* collect-all: the failures its error lists */
};

static const struct scenario scenarios[] = {
    { "shared", { QUICK, QUICK, QUICK, QUICK, QUICK, QUICK, QUICK, QUICK }, 8, 64, 16,
      GORO_GROUP_FIRST_ERROR, 2 * GORO_SEC, true, 0, 0, 0 },
    { "first-error", { QUICK, QUICK, FAILING, QUICK }, 4, 40, 40,
      GORO_GROUP_FIRST_ERROR, 2 * GORO_SEC, false, -EPROTO, -EPROTO, 0 },
    { "deadline", { QUICK, QUICK, QUICK, SLOW }, 4, 16, 16,
      GORO_GROUP_FIRST_ERROR, 300 * GORO_MSEC, false, -ETIMEDOUT, -ETIMEDOUT, 0 },
    /* Its code is the first failure's: a refused connect usually. */
    { "collect-all", { QUICK, FAILING, CLOSED }, 3, 6, 6,
      GORO_GROUP_COLLECT_ALL, 2 * GORO_SEC, false, -ECONNREFUSED, -EPROTO, 4 },
};

static int limit = 8;
static bool verbose;

/* Runs one scenario: its servers, its batch, its report. True if the
 * batch ended as the scenario says it must. */
static bool run(const struct scenario *sc)
{
    struct server srv[8];
    goro_group_t *servers;
    int err = goro_group_new(&servers, &(goro_group_attr_t){ .name = "servers" });
    if (err) {
        fprintf(stderr, "fetch: goro_group_new: %s\n", strerror(-err));
        return false;
    }
    for (int i = 0; i < sc->nservers; i++) {
        srv[i] = (struct server){ .how = sc->servers[i], .fd = -1 };
        if ((err = server_open(&srv[i])) < 0) {
            fprintf(stderr, "fetch: cannot listen on 127.0.0.1: %s\n", strerror(-err));
            goro_group_cancel(servers);
            goro_group_wait(servers, NULL, NULL);
            goro_group_free(servers);
            return false;
        }
        if (srv[i].fd >= 0)
            goro_group_go(servers, accept_loop, &srv[i], servers);
    }

    struct batch b = { .servers = srv, .nservers = sc->nservers };
    if (sc->shared && goro_flight_new(&b.shared) != 0)
        return false;
    int64_t t0 = goro_now();
    goro_group_t *g;
    goro_group_attr_t attr = { .name = sc->name, .limit = limit, .policy = sc->policy,
                               .deadline = sc->deadline ? t0 + sc->deadline : 0 };
    if ((err = goro_group_new(&g, &attr)) != 0) {
        fprintf(stderr, "fetch: goro_group_new: %s\n", strerror(-err));
        return false;
    }
    int fed = 0;
    for (; fed < sc->requests; fed++)
        if (goro_group_go(g, request, &b, fed * sc->pages / sc->requests) != 0)
            break;                 /* the group failed: stop feeding it */
    goro_err_t *gerr = NULL;
    int r = goro_group_wait(g, NULL, &gerr);
    double ms = (double)(goro_now() - t0) / 1e6;
    goro_group_free(g);

    printf("%s: %d of %d requests fed, %d done, %d cancelled, %ld fetches, "
           "at most %d at once (limit %d), %.0f ms\n", sc->name, fed, sc->requests,
           atomic_load(&b.done), atomic_load(&b.cancelled), atomic_load(&b.fetches),
           atomic_load(&b.most_in_flight), limit, ms);
    if (gerr) {
        printf("  the group's error:\n");
        goro_err_print(stdout, gerr);
    }
    bool ok = (r == sc->want || r == sc->want_too) &&
              atomic_load(&b.most_in_flight) <= limit &&
              (!sc->failures || goro_err_count(gerr) == (size_t)sc->failures);
    if (!ok)
        printf("  UNEXPECTED: the group returned %d (%s), want %d\n", r,
               r ? strerror(-r) : "ok", sc->want);
    if (verbose)
        goro_dump(stdout);
    goro_err_free(gerr);

    /* The servers go; so does any shared fetch still waiting on one. */
    goro_group_cancel(servers);
    goro_group_wait(servers, NULL, NULL);
    goro_group_free(servers);
    while (b.shared && goro_flight_free(b.shared) == -EBUSY)
        goro_sleep(GORO_MSEC);
    return ok;
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "l:vh")) != -1) {
        if (opt == 'l' && (limit = atoi(optarg)) >= 1)
            continue;
        if (opt == 'v') {
            verbose = true;
            continue;
        }
        fprintf(stderr, "usage: fetch [-l limit (>= 1)] [-v] [shared|first-error|deadline|"
                "collect-all]...\n");
        return 2;
    }
    enum { NSC = sizeof scenarios / sizeof scenarios[0] };
    bool all_ok = true;
    int ran = 0;
    for (int i = 0; i < NSC; i++) {
        bool chosen = optind == argc;
        for (int a = optind; a < argc; a++)
            chosen |= strcmp(argv[a], scenarios[i].name) == 0;
        if (chosen) {
            all_ok &= run(&scenarios[i]);
            ran++;
        }
    }
    if (!ran) {
        fprintf(stderr, "fetch: no such scenario (shared, first-error, deadline, collect-all)\n");
        return 2;
    }
    return goro_shutdown() == 0 && all_ok ? 0 : 1;
}
