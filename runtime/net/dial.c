/* goro_dial: resolution, then Happy Eyeballs (RFC 8305) over the
 * addresses.
 *
 * One coroutine runs every attempt: each is a non-blocking connect whose
 * socket joins a goro_select as a write case, so there are no helper
 * coroutines to cancel or join. The loop starts an attempt, then waits
 * for the first of: an attempt finishing, the attempt delay (time to start
 * the next one), the caller's deadline. A failed attempt starts the next
 * at once. Invariant: pending[0..npending-1] are exactly the sockets whose
 * connect is in flight; each is closed once, by the loop or at the end. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

#define DEFAULT_DELAY (250 * GORO_MSEC)

struct dial {
    const struct net_local *local;
    int pending[NET_DIAL_MAX];
    int npending;
    int last_err;                /* the last attempt's failure */
};

/* Starts a connect to sa: 1 when it is in flight, 0 when it connected at
 * once (*fd is the winner), or a negative errno. */
static int attempt(struct dial *d, const struct sockaddr_storage *sa, socklen_t len, int *fd)
{
    const struct net_local *l = d->local;
    if (l && l->addr.ss_family != sa->ss_family)
        return -EAFNOSUPPORT;
    int s = goro_socket(sa->ss_family, SOCK_STREAM, 0);
    if (s < 0)
        return s;
    if (l) {
        int one = 1;
        setsockopt(s, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(s, (const struct sockaddr *)&l->addr, l->len) != 0) {
            int err = -errno;
            goro_close(s);
            return err;
        }
    }
    if (connect(s, (const struct sockaddr *)sa, len) == 0) {
        *fd = s;
        return 0;
    }
    int err = -errno;
    if (err == -EINPROGRESS) {      /* (-EAGAIN from TCP: no local port left) */
        d->pending[d->npending++] = s;
        return 1;
    }
    goro_close(s);
    return err;
}

/* The pending socket i is ready: 0 when it connected, else its error (it
 * is closed). Either way it leaves the pending set. */
static int finish(struct dial *d, int i, int *fd)
{
    int s = d->pending[i], soerr = 0;
    socklen_t sl = sizeof soerr;
    d->pending[i] = d->pending[--d->npending];
    if (getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
        soerr = errno;
    if (soerr == 0) {
        *fd = s;
        return 0;
    }
    goro_close(s);
    return -soerr;
}

int goro__net_dial_addrs(const struct sockaddr_storage *addrs, const socklen_t *lens, int n,
                         const struct net_local *local, int64_t delay, int64_t deadline,
                         int *fd)
{
    struct dial d = { .local = local, .npending = 0, .last_err = -ECONNREFUSED };
    goro_case_t cases[NET_DIAL_MAX];
    int next = 0, r = -EINVAL;

    if (!addrs || !lens || n <= 0 || n > NET_DIAL_MAX || !fd)
        return -EINVAL;
    for (;;) {
        /* Start the next address: now, if nothing is in flight. */
        while (next < n && d.npending == 0) {
            r = attempt(&d, &addrs[next], lens[next], fd);
            next++;
            if (r == 0)
                goto out;
            if (r < 0)
                d.last_err = r;
        }
        if (d.npending == 0) {
            r = d.last_err;
            goto out;
        }
        int64_t until = deadline;
        if (next < n && delay >= 0) {
            int64_t start_next = goro_now() + delay;
            if (deadline == GORO_FOREVER || start_next < deadline)
                until = start_next;
        }
        for (int i = 0; i < d.npending; i++)
            cases[i] = (goro_case_t){ .op = GORO_FD_WRITE, .elem = &d.pending[i] };
        int k = goro_select_until(cases, d.npending, 0, until);
        if (k >= 0) {
            if ((r = finish(&d, k, fd)) == 0)
                goto out;
            d.last_err = r;
            continue;
        }
        if (k != -ETIMEDOUT || until == deadline) {
            r = k;
            goto out;
        }
        r = attempt(&d, &addrs[next], lens[next], fd);   /* the delay passed */
        next++;
        if (r == 0)
            goto out;
        if (r < 0)
            d.last_err = r;
    }
out:
    /* The losers, and everything when nobody won. */
    for (int i = 0; i < d.npending; i++)
        goro_close(d.pending[i]);
    return r;
}

/* RFC 8305 section 4: alternate the families, starting with the one the
 * resolver put first (its RFC 6724 sort knows which is preferred here). */
int goro__net_interleave(const struct addrinfo *res, struct sockaddr_storage *addrs,
                         socklen_t *lens)
{
    const struct addrinfo *next[2] = { res, res };   /* the first family, the other */
    int first = res->ai_family, n = 0;

    for (int turn = 0; n < NET_DIAL_MAX; turn ^= 1) {
        const struct addrinfo *ai = next[turn];
        while (ai && (ai->ai_family == first) != (turn == 0))
            ai = ai->ai_next;
        if (!ai && !next[turn ^ 1])
            break;
        if (ai && ai->ai_addrlen <= sizeof addrs[n]) {
            memcpy(&addrs[n], ai->ai_addr, ai->ai_addrlen);
            lens[n++] = ai->ai_addrlen;
        }
        next[turn] = ai ? ai->ai_next : NULL;
    }
    return n;
}

static int dial_unix(const char *address, int64_t deadline, int *fd)
{
    struct sockaddr_un sun;
    socklen_t len;
    int err = goro__net_unix_addr(address, &sun, &len);
    if (err)
        return err;
    int s = goro_socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0)
        return s;
    if ((err = goro_connect_until(s, (struct sockaddr *)&sun, len, deadline)) != 0) {
        goro_close(s);
        return err;
    }
    *fd = s;
    return 0;
}

/* The numeric local address of opts, if any. */
static int local_addr(const char *text, struct net_local *l)
{
    char host[NET_HOST_MAX], port[NET_PORT_MAX];
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV };
    struct addrinfo *res;
    int err = goro__net_split(text, host, port);
    if (err)
        return err;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &res) != 0)
        return -EINVAL;
    memcpy(&l->addr, res->ai_addr, res->ai_addrlen);
    l->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* A numeric host (dotted IPv4, IPv6 without a zone) and a decimal port,
 * parsed in place: 1 and the address, or 0 - anything else, even what
 * getaddrinfo would read as a number ("127.1", "fe80::1%eth0", a service
 * name), goes to the resolver, which gives the same answer slower. */
static int numeric_addr(const char *host, const char *port, int family,
                        struct sockaddr_storage *ss, socklen_t *len)
{
    unsigned long p = 0;
    for (const char *c = port; *c; c++) {
        if (*c < '0' || *c > '9' || (p = p * 10 + (unsigned long)(*c - '0')) > 65535)
            return 0;
    }
    memset(ss, 0, sizeof *ss);
    struct in_addr a4;
    struct in6_addr a6;
    if (family != AF_INET6 && inet_pton(AF_INET, host, &a4) == 1) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)p);
        in->sin_addr = a4;
        *len = sizeof *in;
        return 1;
    }
    if (family != AF_INET && inet_pton(AF_INET6, host, &a6) == 1) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)p);
        in6->sin6_addr = a6;
        *len = sizeof *in6;
        return 1;
    }
    return 0;
}

/* A cancellation or a deadline (the caller's, or the one in force) that
 * came before the dial ends it before any connect - a loopback connect
 * can succeed at once, and a name's lookup would have been refused - with
 * the error any wait returns then: a cancelled coroutine's sleep until now
 * (-ECANCELED, or -ETIMEDOUT when a group's deadline cancelled it). */
static int dial_refused(int64_t deadline)
{
    if (goro_cancelled()) {
        int r = goro_sleep_until(goro_now());
        return r < 0 ? r : -ECANCELED;
    }
    int64_t in_force = goro_deadline();
    if (in_force != GORO_FOREVER && (deadline == GORO_FOREVER || in_force < deadline))
        deadline = in_force;
    return deadline != GORO_FOREVER && goro_now() >= deadline ? -ETIMEDOUT : 0;
}

int goro_dial_opts(const char *network, const char *address, const goro_dial_opts_t *opts,
                   int64_t deadline, int *fd)
{
    char host[NET_HOST_MAX], port[NET_PORT_MAX];
    int family, err;

    if (!fd || !address)
        return -EINVAL;
    if ((err = goro__net_family(network, &family)) != 0)
        return err;
    if (family == AF_UNIX)
        return dial_unix(address, deadline, fd);
    if ((err = goro__net_split(address, host, port)) != 0)
        return err;
    int64_t delay = opts && opts->attempt_delay ? opts->attempt_delay : DEFAULT_DELAY;
    struct net_local local;
    if (opts && opts->local && (err = local_addr(opts->local, &local)) != 0)
        return err;

    struct sockaddr_storage addrs[NET_DIAL_MAX];
    socklen_t lens[NET_DIAL_MAX];
    int n = port[0] ? numeric_addr(host, port, family, &addrs[0], &lens[0]) : 0;
    if (n == 1 && (err = dial_refused(deadline)) != 0)
        return err;
    if (n == 0) {
        /* A name: the offload pool (resolve.c), which can wait. */
        struct addrinfo *res = NULL;
        if ((err = goro__net_resolve(host, port, family, false, deadline, &res)) != 0)
            return err;
        n = res ? goro__net_interleave(res, addrs, lens) : 0;
        if (res)
            freeaddrinfo(res);
        if (n == 0)
            return -ENOENT;
    }
    err = goro__net_dial_addrs(addrs, lens, n, opts && opts->local ? &local : NULL, delay,
                               deadline, fd);
    if (err == 0 && !(opts && opts->nagle))  /* cannot fail on a TCP socket */
        setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
    return err;
}

int goro_dial(const char *network, const char *address, int64_t deadline, int *fd)
{
    return goro_dial_opts(network, address, NULL, deadline, fd);
}
