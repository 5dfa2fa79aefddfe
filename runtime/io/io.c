/*
 * The I/O calls. Each tries its system call first; only when that says
 * EAGAIN does it wait for readiness (netpoll.c) and try again. A caller
 * that was woken and then succeeded passes the turn to the next waiter in
 * the same direction, because the edge that woke it may have brought more
 * than one caller's worth (several acceptors on one listener).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "io/poller.h"
#include "sched/sched.h"
#include "io/netpoll.h"

/* errno right now. Not inlined and opaque to the optimiser: glibc's
 * __errno_location is declared const, so after a switch to another thread
 * the compiler could otherwise reuse the old thread's errno address. */
static GORO_NOINLINE int errno_now(void)
{
    int e = errno;
    __asm__ volatile("" ::: "memory");
    return e;
}

/* The arguments of one call, for the generic loop. */
struct io_call {
    struct goro_pollfd *pd;
    void *buf;
    const void *cbuf;
    size_t len;
    int flags;
    const struct iovec *iov;
    int iovcnt;
    struct sockaddr *addr;
    socklen_t *addrlen;
    const struct sockaddr *caddr;
    socklen_t caddrlen;
};

typedef ssize_t (*io_op)(int fd, struct io_call *c);

static ssize_t io_run(int fd, uint32_t gen, int dir, int64_t deadline, io_op op,
                      struct io_call *c)
{
    bool woken = false;
    for (;;) {
        ssize_t n = op(fd, c);
        int e = n < 0 ? errno_now() : 0;
        if (n < 0 && e == EINTR)
            continue;
        if (n >= 0 || (e != EAGAIN && e != EWOULDBLOCK)) {
            if (woken)
                goro__fd_pass(c->pd, dir);
            else
                goro__preempt_check();  /* it never waits when data keeps coming */
            return n >= 0 ? n : -e;
        }
        int r = goro__fd_wait(c->pd, gen, dir, deadline);
        if (r < 0)
            return r;
        woken = true;
    }
}

/* The call holds the number throughout (goro__fd_enter): a wait woken by
 * an edge reads from the file that sent it, even when goro_close of it
 * comes before the read - never from a file that took the number after. */
static ssize_t io_loop(int fd, int dir, int64_t deadline, io_op op, struct io_call *c)
{
    uint32_t gen;
    int err = goro__fd_enter(fd, &c->pd, &gen);
    if (err)
        return err;
    ssize_t n = io_run(fd, gen, dir, deadline, op, c);
    goro__fd_leave(c->pd);
    return n;
}

/* The _full and _all calls make several calls, and hold the number across
 * all of them: a goro_close in between makes the next one fail, where the
 * number could otherwise have passed to another file meanwhile. NULL if
 * it cannot be held: the first call then says why. */
static struct goro_pollfd *hold(int fd)
{
    struct goro_pollfd *pd;
    uint32_t gen;
    return goro__fd_enter(fd, &pd, &gen) == 0 ? pd : NULL;
}

static void unhold(struct goro_pollfd *pd)
{
    if (pd)
        goro__fd_leave(pd);
}

/* ---- reading ---- */

static ssize_t op_read(int fd, struct io_call *c) { return read(fd, c->buf, c->len); }
static ssize_t op_readv(int fd, struct io_call *c) { return readv(fd, c->iov, c->iovcnt); }

static ssize_t op_recvfrom(int fd, struct io_call *c)
{
    return recvfrom(fd, c->buf, c->len, c->flags, c->addr, c->addrlen);
}

ssize_t goro_read_until(int fd, void *buf, size_t len, int64_t deadline)
{
    struct io_call c = { .buf = buf, .len = len };
    return io_loop(fd, GORO_READABLE, deadline, op_read, &c);
}

ssize_t goro_read(int fd, void *buf, size_t len)
{
    return goro_read_until(fd, buf, len, GORO_FOREVER);
}

ssize_t goro_readv_until(int fd, const struct iovec *iov, int iovcnt, int64_t deadline)
{
    struct io_call c = { .iov = iov, .iovcnt = iovcnt };
    return io_loop(fd, GORO_READABLE, deadline, op_readv, &c);
}

ssize_t goro_readv(int fd, const struct iovec *iov, int iovcnt)
{
    return goro_readv_until(fd, iov, iovcnt, GORO_FOREVER);
}

ssize_t goro_recvfrom_until(int fd, void *buf, size_t len, int flags,
                            struct sockaddr *from, socklen_t *fromlen, int64_t deadline)
{
    struct io_call c = { .buf = buf, .len = len, .flags = flags, .addr = from,
                         .addrlen = fromlen };
    return io_loop(fd, GORO_READABLE, deadline, op_recvfrom, &c);
}

ssize_t goro_recvfrom(int fd, void *buf, size_t len, int flags,
                      struct sockaddr *from, socklen_t *fromlen)
{
    return goro_recvfrom_until(fd, buf, len, flags, from, fromlen, GORO_FOREVER);
}

ssize_t goro_recv_until(int fd, void *buf, size_t len, int flags, int64_t deadline)
{
    return goro_recvfrom_until(fd, buf, len, flags, NULL, NULL, deadline);
}

ssize_t goro_recv(int fd, void *buf, size_t len, int flags)
{
    return goro_recvfrom_until(fd, buf, len, flags, NULL, NULL, GORO_FOREVER);
}

/* ---- writing ----
 * goro promises -EPIPE, never SIGPIPE, for a reader or peer that is gone,
 * whatever the program does with the signal (goro leaves its disposition
 * alone). Sockets get it for free from MSG_NOSIGNAL. Nothing like it exists
 * for write(2) on a pipe, which raises SIGPIPE in the writing thread: there
 * the signal is blocked in this thread around the call, and one that the
 * call raised is taken off again before the mask is restored. */

static bool is_socket(struct goro_pollfd *pd)
{
    return atomic_load_explicit(&pd->is_socket, memory_order_relaxed);
}

/* send() said ENOTSOCK: the record is older than the descriptor (closed
 * with close(2), the number reused by something goro did not make). */
static void not_a_socket(struct goro_pollfd *pd)
{
    atomic_store_explicit(&pd->is_socket, false, memory_order_relaxed);
}

static bool sigpipe_pending(void)
{
    sigset_t set;
    return sigpending(&set) == 0 && sigismember(&set, SIGPIPE);
}

/* op(fd, c), a write(2)-like call, without SIGPIPE. The SIGPIPE a write
 * raises is directed at this thread, and sigtimedwait takes the thread's
 * own pending signals first, so the one taken is the write's. A SIGPIPE
 * the program already had pending (only possible while it blocks the
 * signal) is left for it: that one and the write's are indistinguishable.
 * Looked for after EPIPE, and after a count short of want: a call that
 * moved some bytes before the reader went (a pipe write, the loops inside
 * sendfile and splice) may have raised it and still return the count. */
ssize_t goro__without_sigpipe(ssize_t (*fn)(void *), void *arg, size_t want)
{
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    bool blocked = sigismember(&old, SIGPIPE);
    bool had = blocked && sigpipe_pending();
    ssize_t n = fn(arg);
    int e = n < 0 ? errno_now() : 0;
    if (!had && (e == EPIPE || (n >= 0 && (size_t)n < want))) {
        struct timespec now = { 0, 0 };
        while (sigtimedwait(&pipe_only, NULL, &now) < 0 && errno_now() == EINTR)
            ;
    }
    if (!blocked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = e;                      /* for the caller's errno_now() */
    return n;
}

struct unsignalled_op {
    io_op op;
    int fd;
    struct io_call *c;
};

/* The bytes a write or writev of c asks for. */
static size_t call_len(const struct io_call *c)
{
    if (!c->iov)
        return c->len;
    size_t n = 0;
    for (int i = 0; i < c->iovcnt; i++)
        n += c->iov[i].iov_len;
    return n;
}

static ssize_t run_unsignalled(void *arg)
{
    struct unsignalled_op *u = arg;
    return u->op(u->fd, u->c);
}

static ssize_t unsignalled(io_op op, int fd, struct io_call *c)
{
    struct unsignalled_op u = { op, fd, c };
    return goro__without_sigpipe(run_unsignalled, &u, call_len(c));
}

static ssize_t plain_write(int fd, struct io_call *c) { return write(fd, c->cbuf, c->len); }
static ssize_t plain_writev(int fd, struct io_call *c) { return writev(fd, c->iov, c->iovcnt); }

static ssize_t op_write(int fd, struct io_call *c)
{
    if (likely(is_socket(c->pd))) {
        ssize_t n = send(fd, c->cbuf, c->len, MSG_NOSIGNAL);
        if (n >= 0 || errno_now() != ENOTSOCK)
            return n;
        not_a_socket(c->pd);
    }
    return unsignalled(plain_write, fd, c);
}

static ssize_t op_writev(int fd, struct io_call *c)
{
    if (likely(is_socket(c->pd))) {
        struct msghdr msg = { .msg_iov = (struct iovec *)c->iov, .msg_iovlen = (size_t)c->iovcnt };
        ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (n >= 0 || errno_now() != ENOTSOCK)
            return n;
        not_a_socket(c->pd);
    }
    return unsignalled(plain_writev, fd, c);
}

static ssize_t op_sendto(int fd, struct io_call *c)
{
    return sendto(fd, c->cbuf, c->len, c->flags | MSG_NOSIGNAL, c->caddr, c->caddrlen);
}

ssize_t goro_write_until(int fd, const void *buf, size_t len, int64_t deadline)
{
    struct io_call c = { .cbuf = buf, .len = len };
    return io_loop(fd, GORO_WRITABLE, deadline, op_write, &c);
}

ssize_t goro_write(int fd, const void *buf, size_t len)
{
    return goro_write_until(fd, buf, len, GORO_FOREVER);
}

ssize_t goro_writev_until(int fd, const struct iovec *iov, int iovcnt, int64_t deadline)
{
    if (iovcnt < 0 || iovcnt > IOV_MAX)
        return -EINVAL;             /* as writev(2) says; sendmsg would say EMSGSIZE */
    struct io_call c = { .iov = iov, .iovcnt = iovcnt };
    return io_loop(fd, GORO_WRITABLE, deadline, op_writev, &c);
}

ssize_t goro_writev(int fd, const struct iovec *iov, int iovcnt)
{
    return goro_writev_until(fd, iov, iovcnt, GORO_FOREVER);
}

ssize_t goro_read_full_until(int fd, void *buf, size_t len, size_t *got, int64_t deadline)
{
    struct goro_pollfd *held = hold(fd);
    size_t done = 0;
    ssize_t r = 0;
    while (done < len) {
        r = goro_read_until(fd, (char *)buf + done, len - done, deadline);
        if (r <= 0)
            break;                  /* end of file, or an error */
        done += (size_t)r;
    }
    if (got)
        *got = done;
    if (len == 0)                   /* still report a bad descriptor */
        r = goro_read_until(fd, buf, 0, deadline);
    unhold(held);
    return r < 0 ? r : (ssize_t)done;
}

ssize_t goro_read_full(int fd, void *buf, size_t len)
{
    return goro_read_full_until(fd, buf, len, NULL, GORO_FOREVER);
}

ssize_t goro_write_all_until(int fd, const void *buf, size_t len, size_t *written,
                             int64_t deadline)
{
    struct goro_pollfd *held = hold(fd);
    size_t done = 0;
    ssize_t r = 0;
    while (done < len) {
        r = goro_write_until(fd, (const char *)buf + done, len - done, deadline);
        if (r < 0)
            break;
        done += (size_t)r;
    }
    if (written)
        *written = done;
    if (len == 0)                   /* still report a bad descriptor */
        r = goro_write_until(fd, buf, 0, deadline);
    unhold(held);
    return r < 0 ? r : (ssize_t)len;
}

ssize_t goro_write_all(int fd, const void *buf, size_t len)
{
    return goro_write_all_until(fd, buf, len, NULL, GORO_FOREVER);
}

/* goro_writev_all gathers from the caller's iovecs through a window of
 * at most WRITEV_WINDOW entries on the stack, rebuilt after every partial
 * write from the first unwritten byte on: the caller's array is only read,
 * and no allocation can fail. Past 64 non-empty entries that costs one
 * system call per window (the kernel itself copies more than 8 entries to
 * the heap); 1 KiB of stack suits the smallest coroutine stacks (16 KiB). */
#define WRITEV_WINDOW 64

/* Where the next unwritten byte is: entry idx, offset off in it. */
struct iov_pos {
    int idx;
    size_t off;
};

/* Copies the unwritten rest, empty entries left out, into win. */
static int iov_window(const struct iovec *iov, int iovcnt, struct iov_pos at,
                      struct iovec win[WRITEV_WINDOW])
{
    int k = 0;
    for (int i = at.idx; i < iovcnt && k < WRITEV_WINDOW; i++) {
        size_t skip = i == at.idx ? at.off : 0;
        if (iov[i].iov_len > skip)
            win[k++] = (struct iovec){ (char *)iov[i].iov_base + skip, iov[i].iov_len - skip };
    }
    return k;
}

static void iov_advance(const struct iovec *iov, int iovcnt, struct iov_pos *at, size_t n)
{
    while (at->idx < iovcnt && n >= iov[at->idx].iov_len - at->off) {
        n -= iov[at->idx].iov_len - at->off;
        at->idx++;
        at->off = 0;
    }
    at->off += n;
}

/* The byte count of all entries: -EINVAL if it passes SSIZE_MAX, as
 * writev(2) says. */
static ssize_t iov_total(const struct iovec *iov, int iovcnt)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
            return -EINVAL;
        total += iov[i].iov_len;
    }
    return (ssize_t)total;
}

ssize_t goro_writev_all_until(int fd, const struct iovec *iov, int iovcnt, size_t *written,
                              int64_t deadline)
{
    if (written)
        *written = 0;
    if (iovcnt < 0 || iovcnt > IOV_MAX || (!iov && iovcnt > 0))
        return -EINVAL;
    ssize_t total = iov_total(iov, iovcnt);
    if (total < 0)
        return total;
    struct goro_pollfd *held = hold(fd);
    struct iovec win[WRITEV_WINDOW];
    struct iov_pos at = { 0, 0 };
    size_t done = 0;
    ssize_t r = 0;
    while (done < (size_t)total) {
        int k = iov_window(iov, iovcnt, at, win);
        r = goro_writev_until(fd, win, k, deadline);
        if (r < 0)
            break;
        done += (size_t)r;
        iov_advance(iov, iovcnt, &at, (size_t)r);
    }
    if (written)
        *written = done;
    if (total == 0)                 /* still report a bad descriptor */
        r = goro_writev_until(fd, iov, 0, deadline);
    unhold(held);
    return r < 0 ? r : total;
}

ssize_t goro_writev_all(int fd, const struct iovec *iov, int iovcnt)
{
    return goro_writev_all_until(fd, iov, iovcnt, NULL, GORO_FOREVER);
}

ssize_t goro_sendto_until(int fd, const void *buf, size_t len, int flags,
                          const struct sockaddr *to, socklen_t tolen, int64_t deadline)
{
    struct io_call c = { .cbuf = buf, .len = len, .flags = flags, .caddr = to,
                         .caddrlen = tolen };
    return io_loop(fd, GORO_WRITABLE, deadline, op_sendto, &c);
}

ssize_t goro_sendto(int fd, const void *buf, size_t len, int flags,
                    const struct sockaddr *to, socklen_t tolen)
{
    return goro_sendto_until(fd, buf, len, flags, to, tolen, GORO_FOREVER);
}

ssize_t goro_send_until(int fd, const void *buf, size_t len, int flags, int64_t deadline)
{
    return goro_sendto_until(fd, buf, len, flags, NULL, 0, deadline);
}

ssize_t goro_send(int fd, const void *buf, size_t len, int flags)
{
    return goro_sendto_until(fd, buf, len, flags, NULL, 0, GORO_FOREVER);
}

/* ---- connections ---- */

int goro_socket(int domain, int type, int protocol)
{
    int fd = socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
    if (fd < 0)
        return -errno_now();
    goro__fd_new(fd);
    return fd;
}

static ssize_t op_accept(int fd, struct io_call *c)
{
    for (;;) {
        int nfd = accept4(fd, c->addr, c->addrlen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        /* A connection reset while queued is not the caller's business. */
        if (nfd < 0 && errno_now() == ECONNABORTED)
            continue;
        return nfd;
    }
}

int goro_accept_until(int fd, struct sockaddr *addr, socklen_t *addrlen, int64_t deadline)
{
    struct io_call c = { .addr = addr, .addrlen = addrlen };
    ssize_t nfd = io_loop(fd, GORO_READABLE, deadline, op_accept, &c);
    if (nfd >= 0)
        goro__fd_new((int)nfd);
    return (int)nfd;
}

int goro_accept(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
    return goro_accept_until(fd, addr, addrlen, GORO_FOREVER);
}

/* goro_connect on a held number. */
static int connect_held(int fd, struct goro_pollfd *pd, uint32_t gen,
                        const struct sockaddr *addr, socklen_t addrlen, int64_t deadline)
{
    if (connect(fd, addr, addrlen) == 0)
        return 0;
    int err = errno_now();
    /* EINTR: the connection goes on in the background, as EINPROGRESS. */
    if (err != EINPROGRESS && err != EINTR)
        return -err;
    for (;;) {
        int r = goro__fd_wait(pd, gen, GORO_WRITABLE, deadline);
        if (r < 0)
            return r;
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
            return -errno_now();
        if (soerr != EINPROGRESS && soerr != EALREADY && soerr != EINTR) {
            if (soerr == 0) {
                /* Connected, unless the edge was stale: ask the socket. */
                struct sockaddr_storage peer;
                socklen_t plen = sizeof peer;
                if (getpeername(fd, (struct sockaddr *)&peer, &plen) < 0 &&
                    errno_now() == ENOTCONN)
                    continue;
            }
            return -soerr;
        }
    }
}

int goro_connect_until(int fd, const struct sockaddr *addr, socklen_t addrlen,
                       int64_t deadline)
{
    struct goro_pollfd *pd;
    uint32_t gen;
    int err = goro__fd_enter(fd, &pd, &gen);
    if (err)
        return err;
    err = connect_held(fd, pd, gen, addr, addrlen, deadline);
    goro__fd_leave(pd);
    return err;
}

int goro_connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
    return goro_connect_until(fd, addr, addrlen, GORO_FOREVER);
}

/* ---- readiness and closing ---- */

/* goro_wait_fd on a held number. A level check first: the edges the
 * poller keeps are consumed by the first waiter, but this call promises
 * "ready now", data left over or not. GORO_AFTER_EAGAIN skips the check,
 * as io_run does: the caller's EAGAIN says the state is "not ready", and
 * whatever comes after that raises an edge, kept or waking the wait
 * (registering a descriptor reports its state at once, so the first wait
 * loses nothing either). */
static int wait_held(int fd, struct goro_pollfd *pd, uint32_t gen, int events,
                     int64_t deadline)
{
    if (events & GORO_AFTER_EAGAIN)
        return goro__fd_wait(pd, gen, events & ~GORO_AFTER_EAGAIN, deadline);
    struct pollfd p = { .fd = fd, .events = (short)(((events & GORO_READABLE) ? POLLIN : 0) |
                                                    ((events & GORO_WRITABLE) ? POLLOUT : 0)) };
    for (;;) {
        int n = poll(&p, 1, 0);
        if (n < 0 && errno_now() == EINTR)
            continue;
        if (n < 0)
            return -errno_now();
        if (n > 0) {
            if (p.revents & POLLNVAL)
                return -EBADF;
            int seen = 0;
            if (p.revents & (POLLIN | POLLHUP | POLLERR))
                seen |= events & GORO_READABLE;
            if (p.revents & (POLLOUT | POLLHUP | POLLERR))
                seen |= events & GORO_WRITABLE;
            if (seen)
                return seen;
        }
        int r = goro__fd_wait(pd, gen, events, deadline);
        if (r != 0)
            return r;
    }
}

/* Held, so that the level polled is the file's the caller named, not that
 * of a file that took its number after a goro_close. */
int goro_wait_fd(int fd, int events, int64_t deadline)
{
    if ((events & ~GORO_AFTER_EAGAIN) == 0 ||
        (events & ~(GORO_READABLE | GORO_WRITABLE | GORO_AFTER_EAGAIN)))
        return -EINVAL;
    struct goro_pollfd *pd;
    uint32_t gen;
    int err = goro__fd_enter(fd, &pd, &gen);
    if (err)
        return err;
    err = wait_held(fd, pd, gen, events, deadline);
    goro__fd_leave(pd);
    return err;
}

int goro_fd_release(int fd)
{
    if (fd < 0)
        return -EBADF;
    int err = goro__fd_forget(fd);
    if (err)
        return err;                 /* a goro_close of it is under way */
    return fcntl(fd, F_GETFD) < 0 ? -EBADF : 0;
}

/* The number is free for reuse the moment close(2) returns, which is at
 * the very end (netpoll.c, "the end of a life"). */
int goro_close(int fd)
{
    if (fd < 0)
        return -EBADF;
    return goro__fd_close(fd);
}
