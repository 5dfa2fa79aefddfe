/* httpd: a static file server, one coroutine per connection.
 *
 *   httpd [-p port] [-b address] [-w workers] [-q] [root]
 *
 * Serves the files under root (default: the current directory) over
 * HTTP/1.1: GET and HEAD, keep-alive, Last-Modified and 304 on
 * If-Modified-Since, one byte range (206, 416). Each connection is a
 * coroutine that reads requests through a buffered reader and sends files
 * with goro_sendfile, which parks on the socket and never blocks a worker
 * on the disk. An access log in the Common Log Format goes to stdout
 * through a buffered writer (-q: none). The request parsing, dates and
 * ranges are in http.c; docs/httpd.md tells the rest. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <goro.h>

#include "http.h"

/* How long a connection may take to send a request head (a keep-alive
 * connection's wait for its next request included), and to take each
 * SEND_CHUNK bytes of a response. */
#define REQUEST_TIMEOUT (60 * GORO_SEC)
#define SEND_TIMEOUT (60 * GORO_SEC)
#define SEND_CHUNK ((int64_t)1 << 20)

static int root;                        /* the served directory */
static bool quiet;                      /* -q: no access log */

struct conn {
    int fd;
    goro_reader_t in;
    struct clock clock;                 /* the Date header and the log's time */
    time_t mtime;                       /* the last Last-Modified formatted, */
    char last_modified[32];             /* kept: most requests ask for the same files */
    char peer[INET6_ADDRSTRLEN];
};

/* ---- the access log ----
 * Connections format their lines and send them to one logger coroutine,
 * which owns the buffered writer: lines gather while requests keep coming
 * and go out in one write when none is waiting, or when the buffer fills. */
struct log_line {
    int len;
    char text[320];
};
static goro_chan_t *log_lines;
static goro_writer_t log_out;

static void logger(void)
{
    struct log_line l;
    while (goro_chan_recv(log_lines, &l) > 0) {
        goro_writer_write(&log_out, l.text, (size_t)l.len);
        if (goro_chan_len(log_lines) == 0)
            goro_writer_flush(&log_out);
    }
}

static void log_request(struct conn *c, const struct request *req, int status, int64_t bytes)
{
    struct log_line l;
    if (quiet)
        return;
    if (req->method_name[0] == 0)       /* no request line could be read */
        l.len = snprintf(l.text, sizeof l.text, "%s - - [%s] \"-\" %d %lld\n", c->peer,
                         c->clock.log, status, (long long)bytes);
    else
        l.len = snprintf(l.text, sizeof l.text, "%s - - [%s] \"%s /%.200s HTTP/1.%d\" %d %lld\n",
                         c->peer, c->clock.log, req->method_name, req->path, req->minor, status,
                         (long long)bytes);
    goro_chan_send(log_lines, &l);
}

/* ---- responses ---- */

/* Sends all n bytes; MSG_MORE when a file follows, so that a small
 * response leaves as one segment with the file's first bytes. */
static int send_all(int fd, const char *p, size_t n, int flags)
{
    while (n > 0) {
        ssize_t w = goro_send_until(fd, p, n, flags, goro_now() + SEND_TIMEOUT);
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* len bytes of file from off; -1 if they could not all be sent (the peer
 * left or stalled, or the file shrank: the promised length cannot be kept). */
static int send_body(int sock, int file, int64_t off, int64_t len)
{
    while (len > 0) {
        int64_t chunk = len < SEND_CHUNK ? len : SEND_CHUNK;
        if (goro_sendfile_until(sock, file, &off, chunk, goro_now() + SEND_TIMEOUT) != chunk)
            return -1;
        len -= chunk;
    }
    return 0;
}

static const char *connection_header(const struct request *req, bool keep)
{
    if (!keep)
        return "Connection: close\r\n";
    return req->minor == 0 ? "Connection: keep-alive\r\n" : "";
}

/* A response without a file: an error, with a one-line text body, or a
 * 304 (no body). Errors in the request itself close the connection.
 * Returns 0 to keep the connection, -1 to close it. */
static int send_status(struct conn *c, const struct request *req, int status,
                       const char *extra)
{
    char head[512];
    bool keep = req->keep_alive && (status == 304 || status == 403 || status == 404 ||
                                     status == 416);
    int n;
    if (status == 304) {                /* no Content-* of its own: the file's would apply */
        n = snprintf(head, sizeof head,
                     "HTTP/1.1 304 Not Modified\r\nServer: goro-httpd\r\nDate: %s\r\n"
                     "Last-Modified: %s\r\n%s\r\n",
                     c->clock.http, c->last_modified, connection_header(req, keep));
    } else {
        char body[64];
        int len = snprintf(body, sizeof body, "%d %s\n", status, http_reason(status));
        n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nServer: goro-httpd\r\nDate: %s\r\n%s"
                     "Content-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s",
                     status, http_reason(status), c->clock.http, extra, len,
                     connection_header(req, keep), req->method == METHOD_HEAD ? "" : body);
    }
    log_request(c, req, status, 0);
    return send_all(c->fd, head, (size_t)n, 0) == 0 && keep ? 0 : -1;
}

/* Opens path (relative, without "..") under the root without following a
 * symbolic link anywhere: every directory on the way is opened with
 * O_NOFOLLOW, so a link fails (ELOOP as the last component, ENOTDIR as a
 * directory), whether it leads out of the root or not. The simplest rule that a link cannot get around, and one open
 * per directory level (openat2's RESOLVE_BENEATH would follow the links
 * that stay inside in one call, but is a Linux 5.6 call of its own).
 * O_NONBLOCK: opening a FIFO must not wait for a writer (it is then not a
 * regular file: 404); reading a regular file ignores the flag. */
static int open_beneath(const char *path)
{
    char name[PATH_MAX_REQ];
    int dir = root;
    const char *p = path;
    for (const char *slash; (slash = strchr(p, '/')); p = slash + 1) {
        memcpy(name, p, (size_t)(slash - p));
        name[slash - p] = 0;
        int next = goro_openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        if (dir != root)
            goro_close(dir);
        if (next < 0)
            return next;
        dir = next;
    }
    int fd = goro_openat(dir, *p ? p : ".", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (dir != root)
        goro_close(dir);
    return fd;
}

/* The file for a request, open and regular, with its status in *st; a
 * directory stands for its index.html (*name says which was opened).
 * -errno if there is none. */
static int open_file(const char *path, struct stat *st, const char **name)
{
    int fd = open_beneath(path);
    *name = path;
    if (fd >= 0 && goro_fstat(fd, st) != 0)
        st->st_mode = 0;                /* not served */
    if (fd >= 0 && S_ISDIR(st->st_mode)) {
        *name = "index.html";
        int index = goro_openat(fd, "index.html", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
        goro_close(fd);
        if ((fd = index) >= 0 && goro_fstat(fd, st) != 0)
            st->st_mode = 0;
    }
    if (fd >= 0 && !S_ISREG(st->st_mode)) {
        goro_close(fd);
        return -ENOENT;
    }
    return fd;
}

static int send_file(struct conn *c, const struct request *req)
{
    struct stat st;
    const char *name;
    int file = open_file(req->path, &st, &name);
    if (file < 0)
        return send_status(c, req, file == -ENOENT || file == -ENOTDIR ? 404
                                   : file == -ELOOP || file == -EACCES ? 403 : 500, "");

    if (st.st_mtime != c->mtime) {
        http_date(st.st_mtime, c->last_modified);
        c->mtime = st.st_mtime;
    }
    int status = 200, ret;
    int64_t size = st.st_size, first = 0, last = size - 1;
    char range[96] = "";
    if (req->if_modified_since >= 0 && st.st_mtime <= req->if_modified_since) {
        status = 304;
    } else if (req->range[0] && req->method == METHOD_GET &&
               (!req->if_range[0] || strcmp(req->if_range, c->last_modified) == 0)) {
        int r = http_range(req->range, size, &first, &last);
        if (r < 0) {
            status = 416;
            snprintf(range, sizeof range, "Content-Range: bytes */%lld\r\n", (long long)size);
        } else if (r > 0) {
            status = 206;
            snprintf(range, sizeof range, "Content-Range: bytes %lld-%lld/%lld\r\n",
                     (long long)first, (long long)last, (long long)size);
        }
    }
    if (status == 304 || status == 416) {
        ret = send_status(c, req, status, range);
    } else {
        char head[1024];
        int64_t len = last - first + 1;
        bool body = req->method == METHOD_GET && len > 0;
        int n = snprintf(head, sizeof head,
                         "HTTP/1.1 %d %s\r\nServer: goro-httpd\r\nDate: %s\r\n"
                         "Content-Type: %s\r\nContent-Length: %lld\r\nLast-Modified: %s\r\n"
                         "Accept-Ranges: bytes\r\n%s%s\r\n",
                         status, http_reason(status), c->clock.http, http_mime_type(name),
                         (long long)len, c->last_modified, range,
                         connection_header(req, req->keep_alive));
        log_request(c, req, status, body ? len : 0);
        ret = send_all(c->fd, head, (size_t)n, body ? MSG_MORE : 0) == 0 &&
                      (!body || send_body(c->fd, file, first, len) == 0) && req->keep_alive
                  ? 0 : -1;
    }
    goro_close(file);
    return ret;
}

/* One request: 0 to go on with the next on this connection, -1 to close. */
static int serve_request(struct conn *c)
{
    struct request req;
    int status = http_read_request(&c->in, &req, goro_now() + REQUEST_TIMEOUT);
    if (status < 0)
        return -1;
    clock_update(&c->clock);
    if (status > 0)
        return send_status(c, &req, status, "");
    if (req.method == METHOD_OTHER)
        return send_status(c, &req, 405, "Allow: GET, HEAD\r\n");
    /* A body has no meaning here, but a small one is read and dropped
     * so the next request on the connection can be read. */
    for (int64_t left = req.content_length; left > 0;) {
        char drop[1024];
        ssize_t n = goro_reader_read_until(&c->in, drop, left < 1024 ? (size_t)left : 1024,
                                           goro_now() + REQUEST_TIMEOUT);
        if (n <= 0)
            return -1;
        left -= n;
    }
    return send_file(c, &req);
}

static void serve(int fd)
{
    struct conn c = { .fd = fd, .mtime = -1, .peer = "-" };
    if (!quiet) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        struct in6_addr *a6 = &((struct sockaddr_in6 *)&sa)->sin6_addr;
        if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0)
            ;
        else if (sa.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, c.peer, sizeof c.peer);
        else if (IN6_IS_ADDR_V4MAPPED(a6))  /* a dual-stack listener's IPv4 peer */
            inet_ntop(AF_INET, &a6->s6_addr[12], c.peer, sizeof c.peer);
        else
            inet_ntop(AF_INET6, a6, c.peer, sizeof c.peer);
    }
    if (goro_reader_init(&c.in, fd, REQUEST_BUF) == 0) {
        while (serve_request(&c) == 0) {
        }
        goro_reader_destroy(&c.in);
    }
    goro_close(fd);
}

static void accept_loop(int listener)
{
    for (;;) {
        int fd = goro_accept_backoff(listener, NULL, NULL, NULL, GORO_FOREVER);
        if (fd < 0)
            return;
        if (goro_go(NULL, NULL, serve, fd) != 0)
            goro_close(fd);             /* no memory for a stack: drop it */
    }
}

static void __attribute__((noreturn)) usage(void)
{
    fputs("usage: httpd [-p port] [-b address] [-w workers] [-q] [root]\n"
          "  -p port     TCP port (default 8080; 0: any free one)\n"
          "  -b address  address to listen on (default: all)\n"
          "  -w workers  worker threads (default: one per CPU)\n"
          "  -q          no access log\n", stderr);
    exit(2);
}

/* Each connection takes a descriptor and each response one more. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    const char *port = "8080", *bind = "", *dir = ".";
    int opt, err, listener;
    goro_config_t config = { 0 };

    while ((opt = getopt(argc, argv, "p:b:w:qh")) != -1) {
        switch (opt) {
        case 'p': port = optarg; break;
        case 'b': bind = optarg; break;
        case 'w': config.workers = atoi(optarg); break;
        case 'q': quiet = true; break;
        default: usage();
        }
    }
    if (optind < argc)
        dir = argv[optind++];
    if (optind < argc)
        usage();

    raise_fd_limit();
    if ((err = goro_start(&config)) < 0) {
        fprintf(stderr, "httpd: cannot start the runtime: %s\n", strerror(-err));
        return 1;
    }
    if ((root = goro_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)) < 0) {
        fprintf(stderr, "httpd: %s: %s\n", dir, strerror(-root));
        return 1;
    }
    char address[INET6_ADDRSTRLEN + 16];
    snprintf(address, sizeof address, strchr(bind, ':') ? "[%s]:%s" : "%s:%s", bind, port);
    if ((err = goro_listen("tcp", address, NULL, &listener)) < 0) {
        fprintf(stderr, "httpd: cannot listen on %s: %s\n", address, strerror(-err));
        return 1;
    }
    if (!quiet) {
        if (goro_chan_new(&log_lines, sizeof(struct log_line), 1024) < 0 ||
            goro_writer_init(&log_out, STDOUT_FILENO, 64 * 1024) < 0 ||
            goro_go(NULL, NULL, logger) < 0) {
            fputs("httpd: cannot start the access log\n", stderr);
            return 1;
        }
    }
    /* Tests and scripts read the port from this line (with -p 0). */
    fprintf(stderr, "httpd: serving %s on port %d\n", dir, goro_listen_addr(listener, NULL, 0));
    goro_t *acceptor = go(accept_loop, listener);
    return acceptor && goro_join(acceptor, NULL) == 0 ? 0 : 1;
}
