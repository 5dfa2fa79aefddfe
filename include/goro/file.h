/* goro/file.h - files without blocking a worker (docs/files.md): opens,
 * reads, writes, syncs and metadata through io_uring, or the offload pool
 * where io_uring is missing or refused. goro.h includes it; it may be
 * included alone. */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_FILE_H
#define GORO_FILE_H

#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

struct statx;                   /* <sys/stat.h> has it with _GNU_SOURCE */

/* ------------------------------------------------------------------------
 * Files (docs/files.md)
 *
 * Calls on regular files (and anything else open(2) gives) that park the
 * coroutine, never its worker thread. Each runs through the io_uring of
 * the worker the coroutine runs on: one ring per worker, made at its first
 * use; the worker submits what its coroutines queued and collects the
 * completions whenever it looks at its poller (no thread per call).
 * Where io_uring is missing or refused (an old kernel, a seccomp profile,
 * kernel.io_uring_disabled = 2) or GORO_IO_URING=0 is set, the same calls
 * run on the offload pool (goro_offload) with the same results.
 *
 * Every call returns >= 0 or a negative errno, never -EAGAIN or -EINTR.
 * The _until forms take an absolute goro_now() deadline (GORO_NO_DEADLINE:
 * none) and return -ETIMEDOUT when it passes; every call returns
 * -ECANCELED when the coroutine is cancelled while it waits. A call that
 * ends so is cancelled in the kernel first: its buffer is never written
 * after it returned. An operation that completed before its cancellation
 * could take effect returns its result (the next wait sees the
 * cancellation). Outside a coroutine the calls simply block.
 *
 * Offsets: off >= 0 reads or writes there; off == -1 uses and advances
 * the file position, as read(2) and write(2) do - the way to read a pipe,
 * FIFO or terminal. Counts beyond 0x7ffff000 are short, as in read(2).
 *
 * A descriptor from goro_open is closed with goro_close, as every one.
 * ------------------------------------------------------------------------ */

/* openat(2) (flags and mode as there; O_CLOEXEC is always added). A FIFO
 * opened without O_NONBLOCK waits for its other end; through io_uring
 * that wait ends at cancellation, on the pool it runs to its end. */
int goro_open(const char *path, int flags, mode_t mode);
int goro_openat(int dirfd, const char *path, int flags, mode_t mode);

/* pread(2) / pwrite(2) and their vectored forms (n: at most IOV_MAX
 * entries). A short count at end of file, as pread(2). */
ssize_t goro_pread(int fd, void *buf, size_t n, off_t off);
ssize_t goro_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t goro_preadv(int fd, const struct iovec *iov, int n, off_t off);
ssize_t goro_pwritev(int fd, const struct iovec *iov, int n, off_t off);
ssize_t goro_pread_until(int fd, void *buf, size_t n, off_t off, int64_t deadline);
ssize_t goro_pwrite_until(int fd, const void *buf, size_t n, off_t off, int64_t deadline);

/* fsync(2), fdatasync(2). */
int goro_fsync(int fd);
int goro_fdatasync(int fd);

/* statx(2) (flags: AT_*; mask: STATX_*), fstat(2). */
int goro_statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *out);
int goro_fstat(int fd, struct stat *out);

/* unlinkat(2), renameat(2), mkdirat(2). */
int goro_unlinkat(int dirfd, const char *path, int flags);
int goro_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
int goro_mkdirat(int dirfd, const char *path, mode_t mode);

/* Sends count bytes of file from *offset to the socket sock and advances
 * *offset by what was sent. The coroutine parks while the socket is full;
 * file pages not in memory are read through io_uring (or the pool) first,
 * so the worker does not wait for the disk (where cachestat(2) is missing
 * or refused, only the first and last page of each 256 KiB chunk are
 * looked at: docs/files.md). A goro_close of sock ends the call at its
 * next chunk. Returns the bytes sent - short only at end of file, or when
 * an error (deadline, cancellation, a reset, a goro_close) came after some
 * bytes were sent - or a negative errno (-EINVAL for a NULL offset or
 * negative count, -EBADF, the errors of sendfile(2)). */
int64_t goro_sendfile(int sock, int file, int64_t *offset, int64_t count);
int64_t goro_sendfile_until(int sock, int file, int64_t *offset, int64_t count,
                            int64_t deadline);

/* From a coroutine: whether the calls above run through io_uring (1) or
 * the offload pool (0) on its worker (the worker's ring is made if it has
 * none yet). Outside a coroutine: 0, as the calls block there. Starts the
 * runtime if it is not running (a negative errno if that fails). */
int goro_file_uses_ring(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
