/* goro_listen, goro_listen_addr and goro_accept_backoff. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net.h"

#define DEFAULT_BACKLOG 65535

static int sockopt(int fd, int level, int name, int value)
{
    return setsockopt(fd, level, name, &value, sizeof value) == 0 ? 0 : -errno;
}

static int bind_listen(int fd, const struct sockaddr *sa, socklen_t len, int backlog)
{
    if (bind(fd, sa, len) != 0 || listen(fd, backlog) != 0)
        return -errno;
    return 0;
}

static int listen_inet(const struct addrinfo *ai, const goro_listen_opts_t *o, int backlog,
                       int *out)
{
    int fd = goro_socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0)
        return fd;
    int err = 0;
    if (!o->no_reuseaddr)
        err = sockopt(fd, SOL_SOCKET, SO_REUSEADDR, 1);
    if (!err && o->reuseport)
        err = sockopt(fd, SOL_SOCKET, SO_REUSEPORT, 1);
    if (!err && !o->nagle)       /* inherited by every accepted connection */
        err = sockopt(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    if (!err && ai->ai_family == AF_INET6 && o->v6only)
        err = sockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, o->v6only > 0);
    if (!err)
        err = bind_listen(fd, ai->ai_addr, ai->ai_addrlen, backlog);
    if (err) {
        goro_close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

/* Numeric addresses never wait; a name goes to the pool. */
static int listen_host(const char *host, const char *port, int family,
                       const goro_listen_opts_t *o, int backlog, int *fd)
{
    struct addrinfo hints = { .ai_family = family, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICHOST };
    struct addrinfo *res = NULL;
    int err, eai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (eai == EAI_NONAME && host[0])
        err = goro__net_resolve(host, port, family, true, GORO_FOREVER, &res);
    else
        err = goro__net_eai(eai, errno);
    if (err)
        return err;
    err = -EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        err = listen_inet(ai, o, backlog, fd);
        if (err == 0 || err == -EADDRINUSE || err == -EACCES)
            break;
    }
    freeaddrinfo(res);
    return err;
}

/* ":port" with "tcp" takes the IPv6 wildcard (dual stack unless v6only),
 * or IPv4's where IPv6 is off. */
static int listen_tcp(int family, const char *address, const goro_listen_opts_t *o,
                      int backlog, int *fd)
{
    char host[NET_HOST_MAX], port[NET_PORT_MAX];
    int err = goro__net_split(address, host, port);
    if (err)
        return err;
    if (host[0] || family != AF_UNSPEC)
        return listen_host(host, port, family, o, backlog, fd);
    err = listen_host(host, port, AF_INET6, o, backlog, fd);
    if (err == -EAFNOSUPPORT || err == -EADDRNOTAVAIL)
        err = listen_host(host, port, AF_INET, o, backlog, fd);
    return err;
}

/* An existing file at path: removed if it is a socket and the policy says
 * so (STALE: only when a connect is refused, i.e. nobody listens). */
static int unix_clear(const struct sockaddr_un *sun, socklen_t len, int policy)
{
    struct stat st;
    if (sun->sun_path[0] == 0 || lstat(sun->sun_path, &st) != 0)
        return 0;                      /* abstract, or nothing there */
    if (!S_ISSOCK(st.st_mode) || policy == GORO_UNIX_REMOVE_NEVER)
        return -EADDRINUSE;
    if (policy == GORO_UNIX_REMOVE_STALE) {
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (probe < 0)
            return -errno;
        int r = connect(probe, (const struct sockaddr *)sun, len);
        int e = errno;
        close(probe);
        if (r == 0 || e != ECONNREFUSED)
            return -EADDRINUSE;        /* someone listens (or its queue is full) */
    }
    return unlink(sun->sun_path) == 0 || errno == ENOENT ? 0 : -errno;
}

static int listen_unix(const char *address, const goro_listen_opts_t *o, int backlog, int *out)
{
    struct sockaddr_un sun;
    socklen_t len;
    int err = goro__net_unix_addr(address, &sun, &len);
    if (err)
        return err;
    if (o->unix_remove < GORO_UNIX_REMOVE_STALE || o->unix_remove > GORO_UNIX_REMOVE_ALWAYS)
        return -EINVAL;
    if ((err = unix_clear(&sun, len, o->unix_remove)) != 0)
        return err;
    int fd = goro_socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return fd;
    if ((err = bind_listen(fd, (struct sockaddr *)&sun, len, backlog)) != 0) {
        goro_close(fd);
        return err;
    }
    *out = fd;
    return 0;
}

int goro_listen(const char *network, const char *address, const goro_listen_opts_t *opts,
                int *fd)
{
    static const goro_listen_opts_t defaults;
    const goro_listen_opts_t *o = opts ? opts : &defaults;
    int family, err;

    if (!address || !fd || o->backlog < 0)
        return -EINVAL;
    if ((err = goro__net_family(network, &family)) != 0)
        return err;
    int backlog = o->backlog ? o->backlog : DEFAULT_BACKLOG;
    if (family == AF_UNIX)
        return listen_unix(address, o, backlog, fd);
    return listen_tcp(family, address, o, backlog, fd);
}

int goro_listen_addr(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[INET6_ADDRSTRLEN];
    int port, n;

    if ((!buf && len) || (buf && !len))
        return -EINVAL;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return -errno;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        n = buf ? snprintf(buf, len, "%s:%d", host, port) : 0;
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        n = buf ? snprintf(buf, len, "[%s]:%d", host, port) : 0;
    } else if (ss.ss_family == AF_UNIX) {
        struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
        size_t plen = sl > offsetof(struct sockaddr_un, sun_path)
                      ? sl - offsetof(struct sockaddr_un, sun_path) : 0;
        port = 0;
        if (plen && sun->sun_path[0] == 0)      /* abstract: "@" and the name */
            n = buf ? snprintf(buf, len, "@%.*s", (int)plen - 1, sun->sun_path + 1) : 0;
        else
            n = buf ? snprintf(buf, len, "%.*s", (int)strnlen(sun->sun_path, plen),
                               sun->sun_path) : 0;
    } else {
        return -EAFNOSUPPORT;
    }
    return buf && (n < 0 || (size_t)n >= len) ? -ENOSPC : port;
}

/* Errors about one connection that died in the queue: accept(2) says to
 * retry at once. */
static bool transient(int err)
{
    switch (-err) {
    case ECONNABORTED: case EPROTO: case ENETDOWN: case ENOPROTOOPT: case EHOSTDOWN:
    case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH: case EPERM:
        return true;
    default:
        return false;
    }
}

int goro_accept_backoff(int fd, struct sockaddr *addr, socklen_t *addrlen,
                        const goro_accept_opts_t *opts, int64_t deadline)
{
    static const goro_accept_opts_t defaults;
    const goro_accept_opts_t *o = opts ? opts : &defaults;
    int64_t max = o->max > 0 ? o->max : 100 * GORO_MSEC;
    int64_t wait = o->first > 0 ? o->first : GORO_MSEC;

    for (;;) {
        socklen_t keep = addrlen ? *addrlen : 0;
        int c = goro_accept_until(fd, addr, addrlen, deadline);
        if (c >= 0)
            return c;
        bool limit = c == -EMFILE || c == -ENFILE || c == -ENOBUFS || c == -ENOMEM;
        if (!limit && !transient(c))
            return c;
        if (addrlen)
            *addrlen = keep;
        if (o->on_error)
            o->on_error(c, o->arg);
        if (!limit)
            continue;
        int64_t until = goro_now() + wait;
        int err = goro_sleep_until(deadline != GORO_FOREVER && deadline < until ? deadline : until);
        if (err < 0)
            return err;
        if (deadline != GORO_FOREVER && goro_now() >= deadline)
            return -ETIMEDOUT;
        wait = wait * 2 > max ? max : wait * 2;
    }
}
