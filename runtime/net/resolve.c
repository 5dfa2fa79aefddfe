/* Addresses: parsing "host:port", and name resolution that never blocks a
 * worker.
 *
 * getaddrinfo runs on the offload pool rather than through an asynchronous
 * DNS library: it is the resolver the rest of the system uses (nsswitch,
 * /etc/hosts, mDNS, the libc's sorting of RFC 6724), and a lookup is rare
 * next to the connections it serves. goro_offload waits for its job to the
 * end and writes into its caller's frame, so the dialler does not call it
 * itself: a detached coroutine does, on a job on the heap, and signals a
 * channel; the dialler waits on that channel with its deadline and may
 * leave early. The job is shared by reference count: whoever drops the
 * last reference frees the job, its channel and any result nobody took. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

goro__net_gai_fn *goro__net_getaddrinfo = getaddrinfo;

int goro__net_family(const char *network, int *family)
{
    static const struct { const char *name; int family; } nets[] = {
        { "tcp", AF_UNSPEC }, { "tcp4", AF_INET }, { "tcp6", AF_INET6 }, { "unix", AF_UNIX },
    };
    if (!network)
        return -EINVAL;
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++)
        if (strcmp(network, nets[i].name) == 0) {
            *family = nets[i].family;
            return 0;
        }
    return -EINVAL;
}

int goro__net_split(const char *address, char *host, char *port)
{
    const char *colon, *h = address;
    size_t hlen;

    if (!address)
        return -EINVAL;
    if (address[0] == '[') {
        const char *close = strchr(address, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = address + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(address, ':');
        if (!colon || memchr(address, ':', (size_t)(colon - address)))
            return -EINVAL;     /* no port, or an IPv6 address without [] */
        hlen = (size_t)(colon - address);
    }
    size_t plen = strlen(colon + 1);
    if (hlen >= NET_HOST_MAX || plen == 0 || plen >= NET_PORT_MAX)
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = 0;
    memcpy(port, colon + 1, plen + 1);
    return 0;
}

int goro__net_unix_addr(const char *address, struct sockaddr_un *sun, socklen_t *len)
{
    if (!address || !address[0])
        return -EINVAL;
    size_t n = strlen(address);
    if (n >= sizeof sun->sun_path)
        return -ENAMETOOLONG;
    memset(sun, 0, sizeof *sun);
    sun->sun_family = AF_UNIX;
    memcpy(sun->sun_path, address, n);
    if (address[0] == '@') {
        sun->sun_path[0] = 0;                  /* abstract: no trailing NUL */
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    return 0;
}

int goro__net_eai(int eai, int saved_errno)
{
    switch (eai) {
    case 0: return 0;
    case EAI_NONAME: case EAI_NODATA: case EAI_ADDRFAMILY: return -ENOENT;
    case EAI_AGAIN: return -EAGAIN;
    case EAI_FAIL: return -EIO;
    case EAI_MEMORY: return -ENOMEM;
    case EAI_FAMILY: return -EAFNOSUPPORT;
    case EAI_SERVICE: case EAI_SOCKTYPE: case EAI_BADFLAGS: return -EINVAL;
    case EAI_OVERFLOW: return -ENAMETOOLONG;
    case EAI_SYSTEM: return saved_errno > 0 ? -saved_errno : -EIO;
    default: return -EIO;
    }
}

struct lookup {
    _Atomic int refs;            /* the dialler's and the resolver's */
    goro_chan_t *done;           /* one token when res/err are set */
    struct addrinfo hints;
    struct addrinfo *res;        /* freed by whoever frees the lookup, unless taken */
    int err;                     /* negative errno */
    char host[NET_HOST_MAX], port[NET_PORT_MAX];
};

static void lookup_unref(struct lookup *l)
{
    if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (l->res)
        freeaddrinfo(l->res);
    goro_chan_free(l->done);
    free(l);
}

/* On a pool thread: the blocking part. */
static long lookup_run(void *arg)
{
    struct lookup *l = arg;
    int eai = goro__net_getaddrinfo(l->host[0] ? l->host : NULL, l->port, &l->hints, &l->res);
    l->err = goro__net_eai(eai, errno);
    if (eai)
        l->res = NULL;
    return 0;
}

/* The detached resolver coroutine. The offload's completion orders the
 * pool thread's writes before this coroutine's, and the channel orders
 * them before the dialler's reads. try_send never waits, so a cancelled
 * tree cannot stop the token: the channel has room for exactly it. */
static long lookup_main(void *arg)
{
    struct lookup *l = arg;
    int r = goro_offload(lookup_run, l, NULL);
    if (r < 0)
        l->err = r;
    r = goro_chan_try_send(l->done, NULL);
    (void)r;
    lookup_unref(l);
    return 0;
}

int goro__net_resolve(const char *host, const char *port, int family, bool passive,
                      int64_t deadline, struct addrinfo **res)
{
    struct lookup *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    if (strlen(host) >= sizeof l->host || strlen(port) >= sizeof l->port) {
        free(l);
        return -EINVAL;
    }
    int err = goro_chan_new(&l->done, 0, 1);
    if (err < 0) {
        free(l);
        return err;
    }
    strcpy(l->host, host);
    strcpy(l->port, port);
    l->hints.ai_family = family;
    l->hints.ai_socktype = SOCK_STREAM;
    l->hints.ai_flags = passive ? AI_PASSIVE : 0;
    if (!goro_self()) {                         /* a plain thread may block */
        atomic_init(&l->refs, 1);
        lookup_run(l);
        goto take;
    }
    atomic_init(&l->refs, 2);
    goro_t *h;
    err = goro_spawn(&h, GORO_ATTR(.name = "goro-resolve"), lookup_main, l);
    if (err < 0) {
        atomic_store(&l->refs, 1);
        lookup_unref(l);
        return err;
    }
    goro_detach(h);
    err = goro_chan_recv_until(l->done, NULL, deadline);
    if (err < 0) {
        lookup_unref(l);                        /* the resolver frees it all */
        return err;
    }
take:
    err = l->err;
    *res = l->res;
    l->res = NULL;
    lookup_unref(l);
    return err;
}
