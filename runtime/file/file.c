/*
 * The file calls of goro/file.h. Each is described once (struct file_op)
 * and run one of three ways:
 *  - in a coroutine with a ring: through the P's io_uring (ring.c);
 *  - in a coroutine without one (the fallback): on the offload pool, a
 *    firm wait that runs the call to its end - except reads and writes at
 *    the file position of descriptors that can wait forever (pipes, FIFOs,
 *    terminals, sockets), which are goro_readv / goro_writev's: they park
 *    on the poller, so that a deadline or a cancellation ends them as it
 *    ends a ring's read (pipes refuse RWF_NOWAIT, so the pool could not
 *    end them);
 *  - outside a coroutine: the system call, blocking its thread.
 * Either way a read or write that finds a non-blocking descriptor empty
 * (-EAGAIN) parks on the poller and tries again: the calls never return
 * -EAGAIN or -EINTR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "goro.h"
#include "internal.h"
#include "file/file.h"
#include "runtime.h"
#include "sched/sched.h"

/* read(2)'s most: larger counts are short (an SQE's length is 32 bits). */
#define FILE_RW_MAX 0x7ffff000L

/* ---- the system calls, for the pool and for threads ---- */

static long sys_rw(const struct file_op *op)
{
    ssize_t n = op->kind == FOP_READV
        ? preadv2(op->fd, op->iov, op->iovcnt, (off_t)op->off, 0)
        : pwritev2(op->fd, op->iov, op->iovcnt, (off_t)op->off, 0);
    return n < 0 ? -errno : (long)n;
}

static long run_sync(void *arg)
{
    const struct file_op *op = arg;
    long r;
    switch (op->kind) {
    case FOP_OPENAT:
        r = openat(op->fd, op->path, op->flags, (mode_t)op->mode);
        break;
    case FOP_READV:
    case FOP_WRITEV:
        return sys_rw(op);
    case FOP_FSYNC:
        r = fsync(op->fd);
        break;
    case FOP_FDATASYNC:
        r = fdatasync(op->fd);
        break;
    case FOP_STATX:
        r = statx(op->fd, op->path, op->flags, op->mode, op->stx);
        break;
    case FOP_UNLINKAT:
        r = unlinkat(op->fd, op->path, op->flags);
        break;
    case FOP_RENAMEAT:
        r = renameat(op->fd, op->path, op->fd2, op->path2);
        break;
    case FOP_MKDIRAT:
        r = mkdirat(op->fd, op->path, (mode_t)op->mode);
        break;
    default:
        r = -1;
        errno = EINVAL;
    }
    return r < 0 ? -errno : r;
}

/* ---- the fallback ---- */

static long pool_run(struct file_op *op, int64_t deadline)
{
    int err = goro__wait_check(deadline);
    if (err)
        return goro__wait_refused(err);
    long r;
    err = goro_offload(run_sync, op, &r);
    return err ? err : r;
}

/* Whether fd can wait forever (anything but a regular file or a block
 * device), or -errno. */
static int can_wait_forever(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    return !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode);
}

/* A read or write at the file position of a descriptor that may wait
 * forever, without a ring: goro_readv / goro_writev, which park on the
 * poller (and make the descriptor non-blocking, as they always do). An
 * offset on such a descriptor is pread(2)'s -ESPIPE, from the pool. */
static long pool_rw_parked(struct file_op *op, int64_t deadline)
{
    if (op->off != -1)
        return pool_run(op, deadline);
    return op->kind == FOP_READV ? goro_readv_until(op->fd, op->iov, op->iovcnt, deadline)
                                 : goro_writev_until(op->fd, op->iov, op->iovcnt, deadline);
}

/* ---- one call, whichever way ---- */

static long run(struct file_op *op, int64_t deadline)
{
    int err = goro__ensure_started();
    if (err)
        return err;
    if (!goro__current())
        return run_sync(op);
    bool rw = op->kind == FOP_READV || op->kind == FOP_WRITEV;
    for (;;) {
        long r;
        err = goro__wait_check(deadline);
        if (err)
            return goro__wait_refused(err);
        int how = goro__ring_run(op, deadline, &r);
        if (how < 0)
            return how;
        if (how == 1) {
            if (!rw)
                return pool_run(op, deadline);
            int forever = can_wait_forever(op->fd);
            if (forever < 0)
                return forever;
            return forever ? pool_rw_parked(op, deadline) : pool_run(op, deadline);
        }
        if (!rw || (r != -EAGAIN && r != -EINTR))
            return r;
        /* A non-blocking descriptor with nothing for us: park on it. */
        int w = goro_wait_fd(op->fd, op->kind == FOP_READV ? GORO_READABLE : GORO_WRITABLE,
                             deadline);
        if (w < 0)
            return w;
    }
}

static long rw(enum file_kind kind, int fd, const struct iovec *iov, int n, off_t off,
               int64_t deadline)
{
    if (n < 0 || n > IOV_MAX || (n > 0 && !iov) || off < -1)
        return -EINVAL;
    struct file_op op = { .kind = kind, .fd = fd, .iov = iov, .iovcnt = n, .off = off };
    if (n == 0) {
        /* Still the descriptor's checks (EBADF, EISDIR...), as pread(2). */
        static char none;
        static const struct iovec empty = { &none, 0 };
        op.iov = &empty;
        op.iovcnt = 1;
    }
    return run(&op, deadline);
}

/* ---- the calls ---- */

int goro_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    if (!path)
        return -EFAULT;
    struct file_op op = { .kind = FOP_OPENAT, .fd = dirfd, .path = path,
                          .flags = flags | O_CLOEXEC, .mode = mode };
    return (int)run(&op, GORO_FOREVER);
}

int goro_open(const char *path, int flags, mode_t mode)
{
    return goro_openat(AT_FDCWD, path, flags, mode);
}

ssize_t goro_pread_until(int fd, void *buf, size_t n, off_t off, int64_t deadline)
{
    if (!buf && n)
        return -EFAULT;
    struct iovec v = { buf, n > (size_t)FILE_RW_MAX ? (size_t)FILE_RW_MAX : n };
    return rw(FOP_READV, fd, &v, 1, off, deadline);
}

ssize_t goro_pwrite_until(int fd, const void *buf, size_t n, off_t off, int64_t deadline)
{
    if (!buf && n)
        return -EFAULT;
    struct iovec v = { (void *)buf, n > (size_t)FILE_RW_MAX ? (size_t)FILE_RW_MAX : n };
    return rw(FOP_WRITEV, fd, &v, 1, off, deadline);
}

ssize_t goro_pread(int fd, void *buf, size_t n, off_t off)
{
    return goro_pread_until(fd, buf, n, off, GORO_FOREVER);
}

ssize_t goro_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return goro_pwrite_until(fd, buf, n, off, GORO_FOREVER);
}

ssize_t goro_preadv(int fd, const struct iovec *iov, int n, off_t off)
{
    return rw(FOP_READV, fd, iov, n, off, GORO_FOREVER);
}

ssize_t goro_pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    return rw(FOP_WRITEV, fd, iov, n, off, GORO_FOREVER);
}

static int sync_call(enum file_kind kind, int fd)
{
    struct file_op op = { .kind = kind, .fd = fd };
    return (int)run(&op, GORO_FOREVER);
}

int goro_fsync(int fd)
{
    return sync_call(FOP_FSYNC, fd);
}

int goro_fdatasync(int fd)
{
    return sync_call(FOP_FDATASYNC, fd);
}

int goro_statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *out)
{
    if (!path || !out)
        return -EFAULT;
    struct file_op op = { .kind = FOP_STATX, .fd = dirfd, .path = path, .flags = flags,
                          .mode = mask, .stx = out };
    return (int)run(&op, GORO_FOREVER);
}

/* fstat(2) in place, not through the ring: io_uring runs every
 * IORING_OP_STATX on one of the kernel's io-wq threads (it forces the op
 * async), a wake-up and two thread switches per call, while an open
 * file's attributes are in memory on a local filesystem. (A network one
 * may ask its server; a call that blocks that long is what the monitor's
 * hand-off is for.) Cancellation and the deadline in force are honoured
 * as by every file call. */
int goro_fstat(int fd, struct stat *out)
{
    if (!out)
        return -EFAULT;
    if (goro__current()) {
        int err = goro__wait_check(GORO_FOREVER);
        if (err)
            return goro__wait_refused(err);
    }
    return fstat(fd, out) == 0 ? 0 : -errno;
}

int goro_unlinkat(int dirfd, const char *path, int flags)
{
    if (!path)
        return -EFAULT;
    struct file_op op = { .kind = FOP_UNLINKAT, .fd = dirfd, .path = path, .flags = flags };
    return (int)run(&op, GORO_FOREVER);
}

int goro_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    if (!oldpath || !newpath)
        return -EFAULT;
    struct file_op op = { .kind = FOP_RENAMEAT, .fd = olddirfd, .path = oldpath,
                          .fd2 = newdirfd, .path2 = newpath };
    return (int)run(&op, GORO_FOREVER);
}

int goro_mkdirat(int dirfd, const char *path, mode_t mode)
{
    if (!path)
        return -EFAULT;
    struct file_op op = { .kind = FOP_MKDIRAT, .fd = dirfd, .path = path, .mode = mode };
    return (int)run(&op, GORO_FOREVER);
}

int goro_file_uses_ring(void)
{
    int err = goro__ensure_started();
    if (err)
        return err;
    return goro__ring_usable() ? 1 : 0;
}
