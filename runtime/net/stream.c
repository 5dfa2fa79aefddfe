/* Buffered readers and writers (docs/streams.md): Go's bufio over a goro
 * descriptor or any read/writev function. Built on the public API only. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "goro.h"

static ssize_t fd_read(void *ctx, void *buf, size_t n, int64_t deadline)
{
    return goro_read_until((int)(intptr_t)ctx, buf, n, deadline);
}

static ssize_t fd_writev(void *ctx, const struct iovec *iov, int iovcnt, int64_t deadline)
{
    int fd = (int)(intptr_t)ctx;
    if (iovcnt == 1)        /* a flush: write(2) costs the kernel less */
        return goro_write_until(fd, iov[0].iov_base, iov[0].iov_len, deadline);
    return goro_writev_until(fd, iov, iovcnt, deadline);
}

static int buffer_new(char **buf, size_t size)
{
    if (size == 0 || size > GORO_STREAM_MAX_BUFFER)
        return -EINVAL;
    *buf = malloc(size);
    return *buf ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------------------
 * Reader. Invariant: r <= w <= size, and buf[r, r + scan) holds no byte
 * of the delimiter last searched for (scan <= w - r); every call that
 * consumes or searches for another delimiter resets scan.
 * ------------------------------------------------------------------------ */

int goro_reader_init_fn(goro_reader_t *r, goro_read_fn *read, void *ctx, size_t size)
{
    if (!r || !read)
        return -EINVAL;
    memset(r, 0, sizeof *r);
    int e = buffer_new(&r->buf, size);
    if (e)
        return e;
    r->read = read;
    r->ctx = ctx;
    r->size = size;
    r->skip = -1;
    r->fd = -1;
    return 0;
}

int goro_reader_init(goro_reader_t *r, int fd, size_t size)
{
    if (fd < 0)
        return -EINVAL;
    int e = goro_reader_init_fn(r, fd_read, (void *)(intptr_t)fd, size);
    if (e == 0)
        r->fd = fd;
    return e;
}

void goro_reader_destroy(goro_reader_t *r)
{
    if (!r)
        return;
    free(r->buf);
    r->buf = NULL;
    r->r = r->w = r->size = r->scan = 0;
}

size_t goro_reader_buffered(const goro_reader_t *r)
{
    return r ? r->w - r->r : 0;
}

static void consume(goro_reader_t *r, size_t n)
{
    r->r += n;
    r->scan = 0;
    if (r->r == r->w)
        r->r = r->w = 0;
}

size_t goro_reader_discard(goro_reader_t *r, size_t n)
{
    if (!r)
        return 0;
    size_t have = r->w - r->r;
    if (n > have)
        n = have;
    consume(r, n);
    r->skip = -1;
    return n;
}

/* One read of the source into the free space at the end (moving the
 * buffered bytes to the front first if there is none). Returns the count,
 * 0 at end of file, a negative errno; the buffer must not be full. */
static ssize_t fill(goro_reader_t *r, int64_t deadline)
{
    if (r->w == r->size && r->r > 0) {
        memmove(r->buf, r->buf + r->r, r->w - r->r);
        r->w -= r->r;
        r->r = 0;
    }
    ssize_t n = r->read(r->ctx, r->buf + r->w, r->size - r->w, deadline);
    if (n > 0)
        r->w += (size_t)n;
    return n;
}

/* The length of the record through delim, waiting for it: > 0; 0 at end
 * of file with nothing buffered; the buffered bytes at end of file when
 * they lack delim; -ENOBUFS when the buffer is full without delim; the
 * source's errors. Consumes nothing. */
static ssize_t find(goro_reader_t *r, int delim, int64_t deadline)
{
    for (;;) {
        char *at = memchr(r->buf + r->r + r->scan, delim, r->w - r->r - r->scan);
        if (at)
            return at - (r->buf + r->r) + 1;
        r->scan = r->w - r->r;
        if (r->scan == r->size)
            return -ENOBUFS;
        ssize_t n = fill(r, deadline);
        if (n == 0)
            return (ssize_t)(r->w - r->r);
        if (n < 0)
            return n;
    }
}

/* Drops the rest of an over-long record through r->skip: 0 when done (the
 * next record starts here), or the source's error (still dropping). */
static int skip_rest(goro_reader_t *r, int64_t deadline)
{
    while (r->skip >= 0) {
        char *at = memchr(r->buf + r->r, r->skip, r->w - r->r);
        if (at) {
            consume(r, (size_t)(at - (r->buf + r->r)) + 1);
            r->skip = -1;
            break;
        }
        consume(r, r->w - r->r);
        ssize_t n = fill(r, deadline);
        if (n == 0)
            r->skip = -1;
        else if (n < 0)
            return (int)n;
    }
    return 0;
}

/* read_delim, with what to do when the record does not fit. */
static ssize_t delim_record(goro_reader_t *r, int delim, const char **p, int64_t deadline,
                            bool keep_long)
{
    if (!r || !p || !r->buf || delim < 0 || delim > UCHAR_MAX)
        return -EINVAL;
    if (keep_long) {
        r->skip = -1;
    } else {
        int e = skip_rest(r, deadline);
        if (e)
            return e;
    }
    ssize_t n = find(r, delim, deadline);
    *p = r->buf + r->r;
    if (n == -ENOBUFS && !keep_long) {
        consume(r, r->w - r->r);
        r->skip = delim;
        return -EMSGSIZE;
    }
    if (n > 0)
        consume(r, (size_t)n);
    return n;
}

ssize_t goro_reader_read_delim_until(goro_reader_t *r, int delim, const char **p,
                                     int64_t deadline)
{
    return delim_record(r, delim, p, deadline, false);
}

ssize_t goro_reader_read_delim(goro_reader_t *r, int delim, const char **p)
{
    return goro_reader_read_delim_until(r, delim, p, GORO_FOREVER);
}

ssize_t goro_reader_slice_until(goro_reader_t *r, int delim, const char **p, int64_t deadline)
{
    return delim_record(r, delim, p, deadline, true);
}

ssize_t goro_reader_slice(goro_reader_t *r, int delim, const char **p)
{
    return goro_reader_slice_until(r, delim, p, GORO_FOREVER);
}

int goro_reader_read_line_until(goro_reader_t *r, const char **line, size_t *len,
                                int64_t deadline)
{
    if (!line || !len)
        return -EINVAL;
    const char *p;
    ssize_t n = delim_record(r, '\n', &p, deadline, false);
    if (n <= 0)
        return (int)n;
    size_t k = (size_t)n;
    if (p[k - 1] == '\n') {
        k--;
        if (k > 0 && p[k - 1] == '\r')
            k--;
    }
    *line = p;
    *len = k;
    return 1;
}

int goro_reader_read_line(goro_reader_t *r, const char **line, size_t *len)
{
    return goro_reader_read_line_until(r, line, len, GORO_FOREVER);
}

ssize_t goro_reader_peek_until(goro_reader_t *r, size_t n, const char **p, int64_t deadline)
{
    if (!r || !p || !r->buf || n > r->size)
        return -EINVAL;
    r->skip = -1;
    while (r->w - r->r < n) {
        ssize_t got = fill(r, deadline);
        if (got == 0)
            break;
        if (got < 0)
            return got;
    }
    size_t have = r->w - r->r;
    *p = r->buf + r->r;
    return (ssize_t)(have < n ? have : n);
}

ssize_t goro_reader_peek(goro_reader_t *r, size_t n, const char **p)
{
    return goro_reader_peek_until(r, n, p, GORO_FOREVER);
}

/* Copies up to n buffered bytes to buf; returns how many. */
static size_t take(goro_reader_t *r, void *buf, size_t n)
{
    size_t have = r->w - r->r;
    if (n > have)
        n = have;
    memcpy(buf, r->buf + r->r, n);
    consume(r, n);
    return n;
}

ssize_t goro_reader_read_until(goro_reader_t *r, void *buf, size_t n, int64_t deadline)
{
    if (!r || (!buf && n) || !r->buf)
        return -EINVAL;
    r->skip = -1;
    if (n == 0)
        return 0;
    if (r->w > r->r)
        return (ssize_t)take(r, buf, n);
    if (n >= r->size)       /* nothing to gain from the buffer */
        return r->read(r->ctx, buf, n, deadline);
    ssize_t got = fill(r, deadline);
    if (got <= 0)
        return got;
    return (ssize_t)take(r, buf, n);
}

ssize_t goro_reader_read(goro_reader_t *r, void *buf, size_t n)
{
    return goro_reader_read_until(r, buf, n, GORO_FOREVER);
}

ssize_t goro_reader_read_full_until(goro_reader_t *r, void *buf, size_t n, size_t *got,
                                    int64_t deadline)
{
    size_t done = 0;
    ssize_t e = 0;
    if (!r || (!buf && n) || !r->buf || n > SSIZE_MAX) {
        e = -EINVAL;
        goto out;
    }
    while (done < n) {
        e = goro_reader_read_until(r, (char *)buf + done, n - done, deadline);
        if (e <= 0)
            break;
        done += (size_t)e;
        e = 0;
    }
out:
    if (got)
        *got = done;
    return e < 0 ? e : (ssize_t)done;
}

ssize_t goro_reader_read_full(goro_reader_t *r, void *buf, size_t n)
{
    return goro_reader_read_full_until(r, buf, n, NULL, GORO_FOREVER);
}

/* ------------------------------------------------------------------------
 * Writer. Invariant: n <= size; buf[0, n) is what was accepted and not yet
 * written; err, once set, stays (Go's rule: after a failed write the
 * stream's state is unknown, so nothing more is sent).
 * ------------------------------------------------------------------------ */

int goro_writer_init_fn(goro_writer_t *w, goro_writev_fn *writev, void *ctx, size_t size)
{
    if (!w || !writev)
        return -EINVAL;
    memset(w, 0, sizeof *w);
    int e = buffer_new(&w->buf, size);
    if (e)
        return e;
    w->writev = writev;
    w->ctx = ctx;
    w->size = size;
    w->fd = -1;
    return 0;
}

int goro_writer_init(goro_writer_t *w, int fd, size_t size)
{
    if (fd < 0)
        return -EINVAL;
    int e = goro_writer_init_fn(w, fd_writev, (void *)(intptr_t)fd, size);
    if (e == 0)
        w->fd = fd;
    return e;
}

void goro_writer_destroy(goro_writer_t *w)
{
    if (!w)
        return;
    free(w->buf);
    w->buf = NULL;
    w->n = w->size = 0;
}

size_t goro_writer_buffered(const goro_writer_t *w)
{
    return w ? w->n : 0;
}

size_t goro_writer_available(const goro_writer_t *w)
{
    return w ? w->size - w->n : 0;
}

int goro_writer_error(const goro_writer_t *w)
{
    return w ? w->err : -EINVAL;
}

/* Writes the buffer, then data[0, len), all of it, through the sink (in
 * one writev when the sink takes it whole). On an error the unsent part of
 * the buffer stays at its front and the error sticks. */
static int drain(goro_writer_t *w, const char *data, size_t len, int64_t deadline)
{
    size_t sent = 0, total = w->n + len;
    while (sent < total) {
        struct iovec iov[2];
        int cnt = 0;
        if (sent < w->n)
            iov[cnt++] = (struct iovec){ w->buf + sent, w->n - sent };
        size_t dsent = sent > w->n ? sent - w->n : 0;
        if (len > dsent)
            iov[cnt++] = (struct iovec){ (char *)data + dsent, len - dsent };
        ssize_t k = w->writev(w->ctx, iov, cnt, deadline);
        if (k <= 0) {
            w->err = k < 0 ? (int)k : -EIO;
            break;
        }
        sent += (size_t)k;
    }
    size_t left = sent < w->n ? w->n - sent : 0;
    memmove(w->buf, w->buf + (w->n - left), left);
    w->n = left;
    return w->err;
}

ssize_t goro_writer_write_until(goro_writer_t *w, const void *buf, size_t n, int64_t deadline)
{
    if (!w || (!buf && n) || !w->buf || n > SSIZE_MAX)
        return -EINVAL;
    if (w->err)
        return w->err;
    const char *p = buf;
    if (n <= w->size - w->n) {
        memcpy(w->buf + w->n, p, n);
        w->n += n;
        return (ssize_t)n;
    }
    if (n >= w->size) {             /* large: beside the buffer, no copy */
        int e = drain(w, p, n, deadline);
        return e ? e : (ssize_t)n;
    }
    size_t part = w->size - w->n;   /* fill the buffer, send it, keep the rest */
    memcpy(w->buf + w->n, p, part);
    w->n = w->size;
    int e = drain(w, NULL, 0, deadline);
    if (e)
        return e;
    memcpy(w->buf, p + part, n - part);
    w->n = n - part;
    return (ssize_t)n;
}

ssize_t goro_writer_write(goro_writer_t *w, const void *buf, size_t n)
{
    return goro_writer_write_until(w, buf, n, GORO_FOREVER);
}

ssize_t goro_writer_write_string(goro_writer_t *w, const char *s)
{
    if (!s)
        return -EINVAL;
    return goro_writer_write(w, s, strlen(s));
}

ssize_t goro_writer_vprintf(goro_writer_t *w, int64_t deadline, const char *fmt, va_list ap)
{
    if (!w || !fmt || !w->buf)
        return -EINVAL;
    if (w->err)
        return w->err;
    va_list again;
    va_copy(again, ap);
    size_t room = w->size - w->n;
    int len = vsnprintf(w->buf + w->n, room, fmt, ap);
    ssize_t ret;
    if (len < 0) {
        ret = -EINVAL;
    } else if ((size_t)len < room) {     /* it fit (with vsnprintf's NUL) */
        w->n += (size_t)len;
        ret = len;
    } else {
        char *tmp = malloc((size_t)len + 1);
        if (!tmp) {
            ret = -ENOMEM;
        } else {
            vsnprintf(tmp, (size_t)len + 1, fmt, again);
            ret = goro_writer_write_until(w, tmp, (size_t)len, deadline);
            free(tmp);
        }
    }
    va_end(again);
    return ret;
}

ssize_t goro_writer_printf(goro_writer_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ssize_t r = goro_writer_vprintf(w, GORO_FOREVER, fmt, ap);
    va_end(ap);
    return r;
}

int goro_writer_flush_until(goro_writer_t *w, int64_t deadline)
{
    if (!w || !w->buf)
        return -EINVAL;
    if (w->err)
        return w->err;
    return w->n ? drain(w, NULL, 0, deadline) : 0;
}

int goro_writer_flush(goro_writer_t *w)
{
    return goro_writer_flush_until(w, GORO_FOREVER);
}
