/*
 * goro_sendfile: a file to a socket, in chunks, parking on the socket.
 *
 * sendfile(2) blocks in two ways: on a full socket, and on file pages not
 * in memory, which it reads synchronously. The first is the poller's
 * (EAGAIN -> goro_wait_fd; the socket is made non-blocking by it). For the
 * second, each chunk is probed first: a one-byte read without blocking
 * (RWF_NOWAIT) of the chunk's first and last page. If either is not in
 * memory, the chunk is read through goro_pread - the ring, or the pool -
 * into a scratch buffer, which fills the page cache without a worker
 * waiting for the disk; sendfile then finds the pages there. (A page in
 * the middle of a chunk that was evicted alone can still be read
 * synchronously; the readahead that fills a chunk makes that rare.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include "goro.h"
#include "internal.h"
#include "file/file.h"
#include "io/poller.h"

#define CHUNK (256L * 1024)

/* sendfile(2) has no MSG_NOSIGNAL: a peer that is gone raises SIGPIPE,
 * which goro never lets through (-EPIPE instead; io/io.c). */
struct sf_call {
    int sock, file;
    off_t *off;
    size_t len;
};

static ssize_t sendfile_call(void *arg)
{
    struct sf_call *c = arg;
    return sendfile(c->sock, c->file, c->off, c->len);
}

/* Whether the byte at off is in memory (or past the end of the file). */
static bool cached(int file, int64_t off)
{
    char b;
    struct iovec v = { &b, 1 };
    ssize_t n = preadv2(file, &v, 1, (off_t)off, RWF_NOWAIT);
    return n >= 0 || errno != EAGAIN;
}

/* Makes sure [off, off + len) of file is in the page cache; scratch is
 * made on first need. */
static int warm(int file, int64_t off, int64_t len, char **scratch, int64_t deadline)
{
    if (cached(file, off) && cached(file, off + len - 1))
        return 0;
    if (!*scratch && !(*scratch = malloc(CHUNK)))
        return -ENOMEM;
    while (len > 0) {
        ssize_t n = goro_pread_until(file, *scratch, (size_t)len, (off_t)off, deadline);
        if (n <= 0)
            return (int)n;         /* 0: end of file, sendfile will say so */
        off += n;
        len -= n;
    }
    return 0;
}

int64_t goro_sendfile_until(int sock, int file, int64_t *offset, int64_t count,
                            int64_t deadline)
{
    if (!offset || count < 0 || *offset < 0)
        return -EINVAL;
    char *scratch = NULL;
    int64_t sent = 0;
    int err = 0;
    bool in_coro = goro_self() != NULL;
    if (in_coro) {
        /* A blocking socket would block the worker: the poller's first
         * look makes it non-blocking. */
        int fl = fcntl(sock, F_GETFL);
        if (fl < 0)
            return -errno;
        if (!(fl & O_NONBLOCK) && (err = goro_wait_fd(sock, GORO_WRITABLE, deadline)) < 0)
            return err;
        err = 0;
    }
    while (sent < count) {
        int64_t len = count - sent < CHUNK ? count - sent : CHUNK;
        if (in_coro && (err = warm(file, *offset, len, &scratch, deadline)) < 0)
            break;
        off_t off = (off_t)*offset;
        ssize_t n = goro__without_sigpipe(sendfile_call,
                                          &(struct sf_call){ sock, file, &off, (size_t)len },
                                          (size_t)len);
        if (n > 0) {
            *offset = off;
            sent += n;
            continue;
        }
        if (n == 0)
            break;                     /* end of file */
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN || !in_coro) {
            err = -errno;
            break;
        }
        int w = goro_wait_fd(sock, GORO_WRITABLE, deadline);
        if (w < 0) {
            err = w;
            break;
        }
    }
    free(scratch);
    return sent > 0 ? sent : err;
}

int64_t goro_sendfile(int sock, int file, int64_t *offset, int64_t count)
{
    return goro_sendfile_until(sock, file, offset, count, GORO_FOREVER);
}
