/* The listening socket and the descriptor limit. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "echod.h"

static void __attribute__((noreturn)) cannot_listen(const char *address, int port,
                                                     const char *why)
{
    fprintf(stderr, "echod: cannot listen on %s port %d: %s\n", address, port, why);
    exit(1);
}

/* Tests and scripts read the port from this line (with --port 0). */
static void print_bound(int fd)
{
    char bound[INET6_ADDRSTRLEN + 8] = "?";
    int port = goro_listen_addr(fd, bound, sizeof bound);
    char *host = bound, *colon = strrchr(bound, ':');
    if (port < 0)
        port = 0;
    else if (colon)
        *colon = 0;                         /* "[::1]:7007" -> "::1" */
    if (host[0] == '[') {
        host++;
        host[strlen(host) - 1] = 0;
    }
    fprintf(stderr, "echod: listening on %s port %d\n", host, port);
}

int listen_tcp(const char *address, int port)
{
    char where[INET6_ADDRSTRLEN + 16];
    int fd, err;

    if (strchr(address, ':'))
        snprintf(where, sizeof where, "[%s]:%d", address, port);
    else
        snprintf(where, sizeof where, "%s:%d", address, port);
    /* The default backlog is the kernel's cap (net.core.somaxconn), so
     * raising the sysctl is enough. */
    if ((err = goro_listen("tcp", where, NULL, &fd)) != 0)
        cannot_listen(address, port, err == -ENOENT ? "not an address" : strerror(-err));
    print_bound(fd);
    return fd;
}

long raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}
