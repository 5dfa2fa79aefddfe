/* recvmsg/sendmsg that park, and descriptor passing (SCM_RIGHTS) on unix
 * sockets (docs/streams.md). Built on the public API only. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "goro.h"

/* One message each way: the call, retried after EINTR, parked on the
 * descriptor while it says EAGAIN (unless the caller asked MSG_DONTWAIT). */
static ssize_t msg_loop(int fd, struct msghdr *msg, int flags, int64_t deadline, bool send)
{
    if (fd < 0 || !msg)
        return -EINVAL;
    for (;;) {
        ssize_t n = send ? sendmsg(fd, msg, flags | MSG_DONTWAIT | MSG_NOSIGNAL)
                         : recvmsg(fd, msg, flags | MSG_DONTWAIT);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN || (flags & MSG_DONTWAIT))
            return -errno;
        int e = goro_wait_fd(fd, send ? GORO_WRITABLE : GORO_READABLE, deadline);
        if (e < 0)
            return e;
    }
}

ssize_t goro_recvmsg_until(int fd, struct msghdr *msg, int flags, int64_t deadline)
{
    return msg_loop(fd, msg, flags, deadline, false);
}

ssize_t goro_recvmsg(int fd, struct msghdr *msg, int flags)
{
    return goro_recvmsg_until(fd, msg, flags, GORO_FOREVER);
}

ssize_t goro_sendmsg_until(int fd, const struct msghdr *msg, int flags, int64_t deadline)
{
    return msg_loop(fd, (struct msghdr *)msg, flags, deadline, true);   /* sendmsg only reads it */
}

ssize_t goro_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    return goro_sendmsg_until(fd, msg, flags, GORO_FOREVER);
}

ssize_t goro_send_fds_until(int sock, const int *fds, int nfds, const void *data, size_t len,
                            int64_t deadline)
{
    if (sock < 0 || !fds || nfds < 1 || nfds > GORO_MAX_PASS_FDS || !data || len == 0)
        return -EINVAL;
    size_t space = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int) * GORO_MAX_PASS_FDS)]; } ctl;
    memset(&ctl, 0, space);
    struct iovec iov = { (void *)data, len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = ctl.b, .msg_controllen = space };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    return goro_sendmsg_until(sock, &msg, 0, deadline);
}

ssize_t goro_send_fds(int sock, const int *fds, int nfds, const void *data, size_t len)
{
    return goro_send_fds_until(sock, fds, nfds, data, len, GORO_FOREVER);
}

/* Closes every descriptor that a message's control data carries. */
static void close_all(struct msghdr *msg)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *in = (int *)CMSG_DATA(cm);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, in + i, sizeof fd);
            close(fd);
        }
    }
}

/* The control buffer is sized for the caller's room, and CMSG_SPACE's
 * padding may let the kernel put one more descriptor in it than asked:
 * then, as when it truncated (MSG_CTRUNC), everything received is closed
 * and the call fails, so a caller never holds a descriptor it has no
 * room to know of. */
ssize_t goro_recv_fds_until(int sock, int *fds, int *nfds, void *data, size_t len,
                            int64_t deadline)
{
    if (sock < 0 || !fds || !nfds || *nfds < 1 || *nfds > GORO_MAX_PASS_FDS ||
        (!data && len))
        return -EINVAL;
    int room = *nfds;
    *nfds = 0;
    size_t space = CMSG_SPACE(sizeof(int) * (size_t)room);
    union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int) * GORO_MAX_PASS_FDS)]; } ctl;
    memset(&ctl, 0, space);
    struct iovec iov = { data, len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = ctl.b, .msg_controllen = space };
    ssize_t n = goro_recvmsg_until(sock, &msg, MSG_CMSG_CLOEXEC, deadline);
    if (n < 0)
        return n;
    int got = 0;
    bool over = (msg.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        if (got + k > (size_t)room) {
            over = true;
            break;
        }
        memcpy(fds + got, CMSG_DATA(cm), k * sizeof(int));
        got += (int)k;
    }
    if (over) {
        close_all(&msg);
        return -EMSGSIZE;
    }
    *nfds = got;
    return n;
}

ssize_t goro_recv_fds(int sock, int *fds, int *nfds, void *data, size_t len)
{
    return goro_recv_fds_until(sock, fds, nfds, data, len, GORO_FOREVER);
}
