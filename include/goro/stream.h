/*
 * goro/stream.h: buffered readers and writers over goro descriptors (or
 * any read/write function, such as a TLS stream's), goro_copy between
 * descriptors with splice/sendfile, and recvmsg/sendmsg with descriptor
 * passing (docs/streams.md). Built on goro.h's I/O. goro.h includes it;
 * it may be included alone.
 */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_STREAM_H
#define GORO_STREAM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------
 * Buffered reader (Go's bufio.Reader)
 *
 *   goro_reader_t r;
 *   goro_reader_init(&r, fd, 4096);      // lines up to 4096 bytes
 *   const char *line; size_t len;
 *   while (goro_reader_read_line(&r, &line, &len) == 1)
 *       handle(line, len);               // valid until the next call on r
 *   goro_reader_destroy(&r);             // does not close fd
 *
 * The buffer has a fixed size, given at init: it bounds a line (or a
 * delimited record, or a peek). Calls that return a pointer into the
 * buffer (read_line, read_delim, slice, peek) are zero-copy: the bytes
 * stay valid until the next call on the reader. Every call that may need
 * more bytes may switch; each waits at most once per fill and passes the
 * source's errors through (-ETIMEDOUT past the deadline, -ECANCELED when
 * the coroutine is cancelled, -ECONNRESET...), keeping what is buffered,
 * so a call may be retried. End of file is not latched: a call after it
 * asks the source again. A reader belongs to one coroutine at a time.
 * ------------------------------------------------------------------------ */

/* A source: reads at most n bytes into buf, waiting (parked) until some
 * arrive, end of file, or deadline (absolute, goro_now()'s clock;
 * GORO_FOREVER: none). Returns the count, 0 at end of file, or a negative errno. */
typedef ssize_t goro_read_fn(void *ctx, void *buf, size_t n, int64_t deadline);

/* The largest buffer a reader or writer takes (-EINVAL beyond). */
#define GORO_STREAM_MAX_BUFFER ((size_t)1 << 30)

typedef struct goro_reader {
    /* Private: use the calls below. */
    goro_read_fn *read;
    void *ctx;
    char *buf;
    size_t size;          /* capacity of buf */
    size_t r, w;          /* buffered bytes: buf[r, w) */
    size_t scan;          /* buf[r, r + scan) holds no delimiter (searched) */
    int skip;             /* -1: none; else a delimiter: the rest of an
                             over-long record is dropped through it */
    int fd;               /* goro_reader_init's, or -1 */
} goro_reader_t;

/* A reader over descriptor fd (read with goro_read_until) with a buffer of
 * size bytes. 0, -EINVAL (NULL r, fd < 0, size 0 or past
 * GORO_STREAM_MAX_BUFFER) or -ENOMEM. Does not switch. */
int goro_reader_init(goro_reader_t *r, int fd, size_t size);
/* The same over read(ctx, ...) (-EINVAL for a NULL read). */
int goro_reader_init_fn(goro_reader_t *r, goro_read_fn *read, void *ctx, size_t size);
/* Frees the buffer (the descriptor stays open; buffered bytes are lost).
 * NULL and a destroyed reader are fine. */
void goro_reader_destroy(goro_reader_t *r);

/* The next line, without its "\n" or "\r\n" (a lone "\r" stays), in
 * *line / *len, valid until the next call on r. Returns 1 for a line, 0
 * at end of file with nothing buffered (a last line without "\n" comes
 * first as a line of its own), or a negative errno: -EINVAL (NULL
 * argument), the source's errors, or -EMSGSIZE for a line that does not
 * fit in the buffer with its "\n": its bytes are dropped, and the next
 * read_line or read_delim drops the rest of it through its "\n", so the
 * reader goes on at the line after (any other call first ends the
 * dropping). May switch. */
int goro_reader_read_line(goro_reader_t *r, const char **line, size_t *len);
int goro_reader_read_line_until(goro_reader_t *r, const char **line, size_t *len,
                                int64_t deadline);

/* The bytes up to and including the next delim (0..255) in *p, valid
 * until the next call on r. Returns their count (the last record before
 * end of file may lack delim), 0 at end of file with nothing buffered, or
 * a negative errno: -EINVAL, the source's, or -EMSGSIZE as read_line's. */
ssize_t goro_reader_read_delim(goro_reader_t *r, int delim, const char **p);
ssize_t goro_reader_read_delim_until(goro_reader_t *r, int delim, const char **p,
                                     int64_t deadline);

/* Go's ReadSlice: as read_delim, but a record that does not fit is kept:
 * -ENOBUFS with the buffer full, nothing consumed, *p pointing at the
 * goro_reader_buffered() bytes, for the caller to take (goro_reader_read)
 * or drop (goro_reader_discard). */
ssize_t goro_reader_slice(goro_reader_t *r, int delim, const char **p);
ssize_t goro_reader_slice_until(goro_reader_t *r, int delim, const char **p,
                                int64_t deadline);

/* The next n bytes without consuming them, in *p (valid until the next
 * call on r): waits until n are buffered. Returns n, fewer at end of file
 * (what there is), or a negative errno: -EINVAL for n past the buffer's
 * size (or NULL p), the source's errors. n == 0 returns 0 at once. */
ssize_t goro_reader_peek(goro_reader_t *r, size_t n, const char **p);
ssize_t goro_reader_peek_until(goro_reader_t *r, size_t n, const char **p, int64_t deadline);

/* Copies up to n bytes to buf: the buffered ones if there are any (no
 * wait), else one read of the source (straight into buf when n is at
 * least the buffer's size). Returns the count, 0 at end of file (or for
 * n == 0), or a negative errno. */
ssize_t goro_reader_read(goro_reader_t *r, void *buf, size_t n);
ssize_t goro_reader_read_until(goro_reader_t *r, void *buf, size_t n, int64_t deadline);

/* Copies exactly n bytes to buf, waiting as often as needed. Returns n,
 * fewer at end of file, or a negative errno, and then *got (if not NULL)
 * says how many bytes were copied to buf before it (they are consumed). */
ssize_t goro_reader_read_full(goro_reader_t *r, void *buf, size_t n);
ssize_t goro_reader_read_full_until(goro_reader_t *r, void *buf, size_t n, size_t *got,
                                    int64_t deadline);

/* The count of bytes buffered (read from the source, not yet consumed). */
size_t goro_reader_buffered(const goro_reader_t *r);
/* Drops up to n buffered bytes (never reads); returns how many. */
size_t goro_reader_discard(goro_reader_t *r, size_t n);

/* ------------------------------------------------------------------------
 * Buffered writer (Go's bufio.Writer)
 *
 * Small writes gather in the buffer; it goes out when full, or at
 * goro_writer_flush, in one gathering write with the next bytes (a write
 * larger than the buffer goes straight out beside what is buffered, in
 * the same writev). Errors are sticky, as in Go: after the first error
 * of the sink (a deadline and cancellation included), every write and
 * flush returns it at once, and the bytes not written stay unsent; only
 * goro_writer_destroy ends the writer. Whatever was buffered at destroy
 * is dropped: flush first. A writer belongs to one coroutine at a time.
 * ------------------------------------------------------------------------ */

/* A sink: writes at least one byte of the iovcnt entries (like writev),
 * waiting until it can or deadline (GORO_FOREVER: none). Returns the count or a
 * negative errno. */
typedef ssize_t goro_writev_fn(void *ctx, const struct iovec *iov, int iovcnt,
                               int64_t deadline);

typedef struct goro_writer {
    /* Private: use the calls below. */
    goro_writev_fn *writev;
    void *ctx;
    char *buf;
    size_t size, n;       /* capacity, bytes buffered */
    int err;              /* the sticky error (negative), or 0 */
    int fd;
} goro_writer_t;

/* A writer over descriptor fd (goro_writev_until) or over writev(ctx, ...)
 * with a buffer of size bytes: 0, -EINVAL (as the reader's) or -ENOMEM. */
int goro_writer_init(goro_writer_t *w, int fd, size_t size);
int goro_writer_init_fn(goro_writer_t *w, goro_writev_fn *writev, void *ctx, size_t size);
/* Frees the buffer, dropping what it holds (the descriptor stays open). */
void goro_writer_destroy(goro_writer_t *w);

/* Takes all n bytes: returns n, or a negative errno (sticky; -EINVAL for
 * NULL arguments, which is not). It writes to the sink (may switch) only
 * when the buffer fills. */
ssize_t goro_writer_write(goro_writer_t *w, const void *buf, size_t n);
ssize_t goro_writer_write_until(goro_writer_t *w, const void *buf, size_t n,
                                int64_t deadline);
ssize_t goro_writer_write_string(goro_writer_t *w, const char *s);
/* Formats as printf into the buffer: the byte count or a negative errno
 * (-EINVAL for a bad format). */
ssize_t goro_writer_printf(goro_writer_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
ssize_t goro_writer_vprintf(goro_writer_t *w, int64_t deadline, const char *fmt, va_list ap);

/* Writes out everything buffered: 0 or the sticky negative errno. */
int goro_writer_flush(goro_writer_t *w);
int goro_writer_flush_until(goro_writer_t *w, int64_t deadline);

size_t goro_writer_buffered(const goro_writer_t *w);
size_t goro_writer_available(const goro_writer_t *w);
/* The sticky error, or 0. */
int goro_writer_error(const goro_writer_t *w);

/* ------------------------------------------------------------------------
 * Copying between descriptors
 * ------------------------------------------------------------------------ */

/* Copies from src to dst until end of file or max bytes (max < 0: no
 * limit; may switch), parking on either descriptor when it is not ready, never
 * blocking a worker on a socket or a pipe. The kernel does the moving
 * where it can: splice when either side is a pipe, splice through a
 * private pipe between sockets, sendfile from a regular file; else read
 * and write through a buffer. Reading a regular file (sendfile or read)
 * may block the worker on the disk, as goro_read does. Returns the byte
 * count, or a negative errno - -EINVAL (negative descriptor), -EBADF,
 * -ETIMEDOUT past deadline (GORO_FOREVER: none), -ECANCELED, -EPIPE (dst's
 * reader or peer is gone; never SIGPIPE), the system calls' -
 * and then *copied (if not NULL) says how many bytes reached dst. The
 * descriptors are then registered with goro: close them with goro_close. */
int64_t goro_copy(int dst, int src, int64_t max, int64_t *copied);
int64_t goro_copy_until(int dst, int src, int64_t max, int64_t *copied, int64_t deadline);

/* ------------------------------------------------------------------------
 * Messages and descriptor passing (unix sockets)
 * ------------------------------------------------------------------------ */

/* recvmsg/sendmsg that park (may switch): the count (0: end of file) or
 * a negative errno (-EINVAL for fd < 0 or a NULL msg), never -EAGAIN
 * unless flags holds MSG_DONTWAIT (then they do not wait). sendmsg never
 * raises SIGPIPE (-EPIPE). */
ssize_t goro_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t goro_recvmsg_until(int fd, struct msghdr *msg, int flags, int64_t deadline);
ssize_t goro_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t goro_sendmsg_until(int fd, const struct msghdr *msg, int flags, int64_t deadline);

/* The most descriptors one message carries (the kernel's SCM_MAX_FD). */
#define GORO_MAX_PASS_FDS 253

/* Sends (may switch) the nfds descriptors fds (1..GORO_MAX_PASS_FDS) with the len bytes
 * of data (at least one: they carry the descriptors) in one message on
 * the unix socket sock. Returns the data bytes sent (possibly fewer than
 * len on a stream socket: the descriptors went with the first) or a
 * negative errno: -EINVAL for bad arguments, -EBADF for a bad fds[i]. */
ssize_t goro_send_fds(int sock, const int *fds, int nfds, const void *data, size_t len);
ssize_t goro_send_fds_until(int sock, const int *fds, int nfds, const void *data, size_t len,
                            int64_t deadline);

/* Receives (may switch) a message: up to len bytes of data, and up to *nfds
 * descriptors into fds (close-on-exec); *nfds is set to the count that
 * came. Returns the data bytes (0: end of file) or a negative errno:
 * -EINVAL, -EMSGSIZE when more descriptors came than fit (the kernel
 * truncated the control data, or the caller's room is smaller): every
 * descriptor received is closed, none leak, and the data is consumed. */
ssize_t goro_recv_fds(int sock, int *fds, int *nfds, void *data, size_t len);
ssize_t goro_recv_fds_until(int sock, int *fds, int *nfds, void *data, size_t len,
                            int64_t deadline);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* GORO_STREAM_H */
