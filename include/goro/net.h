/* goro/net.h - listening and dialling by name (docs/net.md). Built on
 * goro.h's I/O calls; goro.h includes it; it may be included alone. */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_NET_H
#define GORO_NET_H

#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------
 * Listening and dialling (docs/net.md)
 *
 * Every descriptor these calls return is a goro descriptor (non-blocking,
 * close-on-exec, closed with goro_close).
 *
 * Networks: "tcp" (IPv4 or IPv6, whichever the address gives), "tcp4",
 * "tcp6", "unix" (stream sockets on a path, or "@name" for Linux's
 * abstract namespace). Addresses: "host:port", "[v6-address]:port",
 * ":port" (every address when listening, the loopback when dialling); the
 * port is a number or a service name, 0 picks a free port when listening.
 *
 * Name resolution (goro_dial) runs getaddrinfo on the offload pool, so it
 * honours /etc/hosts and nsswitch and never blocks a worker; getaddrinfo's
 * EAI_* codes come back as negative errno:
 *   EAI_NONAME, EAI_NODATA, EAI_ADDRFAMILY  -ENOENT   (no such name)
 *   EAI_AGAIN                               -EAGAIN   (try again later)
 *   EAI_FAIL                                -EIO      (the resolver failed)
 *   EAI_MEMORY                              -ENOMEM
 *   EAI_FAMILY                              -EAFNOSUPPORT
 *   EAI_SERVICE, EAI_SOCKTYPE, EAI_BADFLAGS -EINVAL   (say, an unknown port name)
 *   EAI_OVERFLOW                            -ENAMETOOLONG
 *   EAI_SYSTEM                              -errno    (e.g. -EMFILE)
 * ------------------------------------------------------------------------ */

/* What goro_listen does with an existing file at a unix socket's path. */
enum goro_unix_remove {
    GORO_UNIX_REMOVE_STALE = 0,  /* remove a socket file nobody listens on */
    GORO_UNIX_REMOVE_NEVER,      /* never: -EADDRINUSE */
    GORO_UNIX_REMOVE_ALWAYS,     /* remove any socket file (never another kind) */
};

/* Options of goro_listen; zero fields mean the default, so a NULL pointer
 * or { 0 } is the common case. */
typedef struct goro_listen_opts {
    int backlog;         /* listen(2)'s backlog; 0: 65535 (the kernel caps it
                            at net.core.somaxconn) */
    int no_reuseaddr;    /* 1: leave SO_REUSEADDR off (tcp; it is on by
                            default, so a restarted server binds at once) */
    int reuseport;       /* 1: SO_REUSEPORT (several listeners share a port) */
    int v6only;          /* IPV6_V6ONLY: 0 the system's default, 1 on, -1 off
                            (an IPv6 wildcard then takes IPv4 too) */
    int unix_remove;     /* enum goro_unix_remove */
    int nagle;           /* nonzero: leave Nagle's algorithm on for the accepted
                            TCP connections (TCP_NODELAY off; see goro_listen) */
} goro_listen_opts_t;

/* Creates a socket, binds it to address and listens; *fd receives it.
 * Does not switch for numeric addresses; a host name is resolved on the
 * offload pool (that wait is not cancellable). For "tcp" and ":port" the
 * socket is IPv6 dual stack where the system allows, else IPv4. A TCP
 * listener has TCP_NODELAY set, which every connection accepted from it
 * inherits: as in Go, a write is sent at once, not held back by Nagle's
 * algorithm until the peer acknowledges the last one (a response written
 * in two parts would otherwise wait for the peer's delayed ACK, 40 ms);
 * opts->nagle leaves it off. The file
 * of a unix socket stays after goro_close: unlink it when done (abstract
 * names vanish with the socket). Returns 0 or a negative errno: -EINVAL
 * (NULL arguments, an unknown network, a malformed address, a negative
 * backlog), -ENAMETOOLONG (a unix path past sun_path), -EADDRINUSE,
 * -EACCES, -EADDRNOTAVAIL, -EMFILE / -ENFILE, the resolution codes above,
 * or what socket, setsockopt, bind or listen returned. */
int goro_listen(const char *network, const char *address, const goro_listen_opts_t *opts,
                int *fd);

/* The address fd is bound to (getsockname), written to buf as goro_dial
 * takes it: "127.0.0.1:8080", "[::1]:8080", a unix path or "@name". Returns
 * the port (0 for unix sockets; the one the system chose after ":0"), or
 * -EBADF, -ENOTSOCK, -EAFNOSUPPORT (another family), -ENOSPC (buf is too
 * small; INET6_ADDRSTRLEN + 8 bytes always fit an inet address), -EINVAL.
 * buf may be NULL (len 0) to read the port alone. */
int goro_listen_addr(int fd, char *buf, size_t len);

/* Options of goro_accept_backoff; zero fields mean the default. */
typedef struct goro_accept_opts {
    int64_t first;       /* the first back-off; 0: 1 ms */
    int64_t max;         /* its cap as it doubles; 0: 100 ms */
    /* Called (if not NULL) with each error it retries, before the wait. */
    void (*on_error)(int err, void *arg);
    void *arg;
} goro_accept_opts_t;

/* goro_accept that rides out the errors a server should survive, as Go's
 * net/http does. At the descriptor limit (-EMFILE, -ENFILE) and when the
 * kernel is short of memory (-ENOBUFS, -ENOMEM) the pending connection
 * stays queued and the listener readable, so retrying at once would spin:
 * it sleeps, first doubling up to max per call, then tries again -
 * connections that close meanwhile free descriptors. A connection that
 * died in the queue (-ECONNABORTED, -EPROTO, network errors about that
 * one peer, -EPERM from a firewall) is skipped at once. Returns the new
 * descriptor, or -ECANCELED, -ETIMEDOUT (deadline on goro_now()'s clock,
 * GORO_FOREVER for none), -EBADF (fd closed), -EINVAL, -ENOTSOCK. May
 * switch. */
int goro_accept_backoff(int fd, struct sockaddr *addr, socklen_t *addrlen,
                        const goro_accept_opts_t *opts, int64_t deadline);

/* Options of goro_dial_opts; zero fields mean the default. */
typedef struct goro_dial_opts {
    /* Happy Eyeballs' connection attempt delay (RFC 8305): the next
     * address is tried this long after the previous attempt started unless
     * that one has finished; 0: 250 ms; negative: attempt one at a time. */
    int64_t attempt_delay;
    /* The local address to connect from, numeric ("127.0.0.2:0"), or
     * NULL for the system's choice. Port 0 leaves the port to connect
     * time (IP_BIND_ADDRESS_NO_PORT), so one source address serves 64k
     * connections per server. Addresses of the other family are skipped. */
    const char *local;
    /* nonzero: leave Nagle's algorithm on (TCP_NODELAY off; see goro_dial). */
    int nagle;
} goro_dial_opts_t;

/* Connects to address on network and puts the connected descriptor in
 * *fd. A numeric address (dotted IPv4, IPv6 without a zone, a decimal
 * port) is parsed in place; a host name is resolved with getaddrinfo on
 * the offload pool (the worker goes on with other coroutines); the
 * addresses are then tried by
 * Happy Eyeballs: families interleaved, starting with the resolver's
 * first choice, a new attempt every attempt_delay until one connects; the
 * first to connect wins and the others are closed; a TCP connection has
 * TCP_NODELAY set, as in Go (goro_listen says why). deadline (goro_now()'s
 * clock, GORO_FOREVER for none) and goro_cancel cover the whole dial,
 * resolution included: a lookup that is abandoned finishes on the pool
 * and frees its own result. May switch. Returns 0 or a negative errno:
 * -EINVAL (NULL arguments, unknown network, malformed address or local
 * address), -ETIMEDOUT, -ECANCELED, the resolution codes above, or the error of the
 * last attempt that failed (-ECONNREFUSED, -ENETUNREACH, -EMFILE, ...). */
int goro_dial(const char *network, const char *address, int64_t deadline, int *fd);
int goro_dial_opts(const char *network, const char *address, const goro_dial_opts_t *opts,
                   int64_t deadline, int *fd);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* GORO_NET_H */
