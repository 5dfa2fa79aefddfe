/* net/: listen and dial by name (docs/net.md), and streams
 * (docs/streams.md: stream.c, copy.c, msg.c - buffered readers and
 * writers, goro_copy, descriptor passing). Built on the public API, as
 * pipe/ is: this layer calls nothing below it but through goro.h
 * (goro_socket, goro_connect, goro_select, goro_offload, channels,
 * goro_read/goro_write, goro_wait_fd) - and io's goro__without_sigpipe,
 * for goro_copy's sendfile and splice, which have no MSG_NOSIGNAL.
 *
 * layer: net - listen and dial by name, streams, built on the public API (goro.h)
 * may call: nothing
 * uses: nosigpipe
 */
#ifndef GORO_NET_NET_H
#define GORO_NET_NET_H

#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "goro.h"

/* A network name parsed: its socket family (AF_UNSPEC for "tcp") or
 * AF_UNIX. */
int goro__net_family(const char *network, int *family);

/* "host:port" split into host (empty for ":port") and port; "[v6]:port"
 * loses its brackets. Returns 0 or -EINVAL (no port, an unbracketed IPv6
 * address, too long). */
#define NET_HOST_MAX 256
#define NET_PORT_MAX 32
int goro__net_split(const char *address, char *host, char *port);

/* A unix address: a path, or "@name" for the abstract namespace. Returns
 * 0 or -EINVAL / -ENAMETOOLONG. */
int goro__net_unix_addr(const char *address, struct sockaddr_un *sun, socklen_t *len);

/* getaddrinfo's EAI_* code as a negative errno (goro/net.h lists them). */
int goro__net_eai(int eai, int saved_errno);

/* resolve.c. Resolves host:port for family (AF_UNSPEC, AF_INET, AF_INET6)
 * on the offload pool; *res is the caller's to freeaddrinfo. Waiting
 * stops at deadline or cancellation (-ETIMEDOUT, -ECANCELED) while the
 * lookup finishes in the background and frees its own result. passive:
 * AI_PASSIVE, for listening. */
int goro__net_resolve(const char *host, const char *port, int family, bool passive,
                      int64_t deadline, struct addrinfo **res);

/* The getaddrinfo resolve.c calls: tests swap in a slow one. Its results
 * are freed with freeaddrinfo. Set it only while no lookup runs. */
typedef int goro__net_gai_fn(const char *, const char *, const struct addrinfo *,
                             struct addrinfo **);
extern goro__net_gai_fn *goro__net_getaddrinfo;

/* dial.c. Happy Eyeballs over addrs[0..n-1], tried in the order given, a
 * new attempt every delay (negative: one at a time) until one connects:
 * *fd gets the winner. local (NULL: none) is bound first; addresses of
 * another family fail with -EAFNOSUPPORT. Returns 0, -ETIMEDOUT,
 * -ECANCELED, -EINVAL, or the last attempt's error. */
#define NET_DIAL_MAX 64
struct net_local {
    struct sockaddr_storage addr;
    socklen_t len;
};
/* res's addresses into addrs/lens (at most NET_DIAL_MAX) in RFC 8305's
 * order: the families alternate, starting with res's first. Returns n. */
int goro__net_interleave(const struct addrinfo *res, struct sockaddr_storage *addrs,
                         socklen_t *lens);
int goro__net_dial_addrs(const struct sockaddr_storage *addrs, const socklen_t *lens, int n,
                         const struct net_local *local, int64_t delay, int64_t deadline,
                         int *fd);

#endif /* GORO_NET_NET_H */
