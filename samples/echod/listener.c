/* The listening socket and the descriptor limit. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "echod.h"

/* The kernel caps the accept queue at net.core.somaxconn; ask for more so
 * that raising the sysctl is enough. */
#define BACKLOG 65535

static void __attribute__((noreturn)) cannot_listen(const char *address, int port,
                                                     const char *why)
{
    fprintf(stderr, "echod: cannot listen on %s port %d: %s\n", address, port, why);
    exit(1);
}

static void print_bound(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;

    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
            port = ntohs(in->sin_port);
        } else {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
            port = ntohs(in6->sin6_port);
        }
    }
    /* Tests and scripts read the port from this line (with --port 0). */
    fprintf(stderr, "echod: listening on %s port %d\n", host, port);
}

int listen_tcp(const char *address, int port)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
    };
    struct addrinfo *ai;
    char service[16];
    int one = 1;

    snprintf(service, sizeof service, "%d", port);
    int err = getaddrinfo(address, service, &hints, &ai);
    if (err)
        cannot_listen(address, port, err == EAI_NONAME ? "not a numeric address"
                                                       : gai_strerror(err));
    int fd = goro_socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0)
        cannot_listen(address, port, strerror(-fd));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, BACKLOG) != 0)
        cannot_listen(address, port, strerror(errno));
    freeaddrinfo(ai);
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
