/* goro_copy (docs/streams.md): splice, sendfile, or read and write, parking
 * on the descriptors. Built on the public API, and on io's SIGPIPE
 * contract: sendfile and splice have no MSG_NOSIGNAL. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "goro.h"
#include "io/poller.h"               /* the nosigpipe contract */

#define COPY_CHUNK ((size_t)1 << 16)

struct copy {
    int dst, src;
    int64_t left;          /* bytes still allowed; < 0: no limit */
    int64_t done;          /* bytes that reached dst */
    int64_t deadline;
};

static size_t chunk(const struct copy *c)
{
    return c->left >= 0 && (uint64_t)c->left < COPY_CHUNK ? (size_t)c->left : COPY_CHUNK;
}

static void moved(struct copy *c, size_t n)
{
    c->done += (int64_t)n;
    if (c->left >= 0)
        c->left -= (int64_t)n;
}

/* The kernel calls below need the descriptors non-blocking (goro_read
 * does the same on its first call): a pipe or socket that is not would
 * block the worker. Regular files never report EAGAIN, so they stay. */
static int nonblocking(int fd, const struct stat *st)
{
    if (S_ISREG(st->st_mode))
        return 0;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0)
        return -errno;
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

/* A system call's EAGAIN: park on fd. 0 to try again or a negative errno. */
static int await(const struct copy *c, int fd, int events)
{
    int e = goro_wait_fd(fd, events, c->deadline);
    return e < 0 ? e : 0;
}

/* sendfile(2) and splice(2) into dst, whose reader or peer may be gone:
 * -EPIPE (errno), never SIGPIPE, as every goro write promises. */
struct kcopy {
    int in, out;
    size_t n;
    bool splice;
};

static ssize_t kcopy_run(void *arg)
{
    const struct kcopy *k = arg;
    return k->splice ? splice(k->in, NULL, k->out, NULL, k->n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
                     : sendfile(k->out, k->in, NULL, k->n);
}

static ssize_t kcopy(int in, int out, size_t n, bool splice)
{
    return goro__without_sigpipe(kcopy_run, &(struct kcopy){ in, out, n, splice }, n);
}

/* sendfile from a regular file: its offset advances by what was sent.
 * Returns 0 at end of file or max, 1 when sendfile cannot serve this
 * pair and nothing was sent (the caller falls back), or a negative errno. */
static int by_sendfile(struct copy *c)
{
    while (c->left != 0) {
        ssize_t n = kcopy(c->src, c->dst, chunk(c), false);
        if (n > 0) {
            moved(c, (size_t)n);
        } else if (n == 0) {
            return 0;
        } else if (errno == EAGAIN) {
            int e = await(c, c->dst, GORO_WRITABLE);
            if (e)
                return e;
        } else if (errno != EINTR) {
            if ((errno == EINVAL || errno == ENOSYS) && c->done == 0)
                return 1;
            return -errno;
        }
    }
    return 0;
}

/* One splice from in to out. On EAGAIN it parks on wait_in (readable)
 * and then wait_out (writable), those that are not -1: splice reports an
 * empty input and a full output alike, so with both it waits for the
 * input first, tries again, then for the output. The private pipe of
 * by_pipe is never waited on (it is never registered with goro).
 * Returns the count, 0 at end of file, or a negative errno. */
static ssize_t splice_once(const struct copy *c, int in, int out, size_t n, int wait_in,
                           int wait_out)
{
    for (int turn = 0;; turn++) {
        ssize_t k = kcopy(in, out, n, true);
        if (k >= 0)
            return k;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            return -errno;
        int fd = wait_in, ev = GORO_READABLE;
        if (fd < 0 || (wait_out >= 0 && turn % 2)) {
            fd = wait_out;
            ev = GORO_WRITABLE;
        }
        int e = goro_wait_fd(fd, ev, c->deadline);
        if (e < 0)
            return e;
    }
}

/* One side is a pipe: splice straight across. */
static int by_splice(struct copy *c)
{
    while (c->left != 0) {
        ssize_t n = splice_once(c, c->src, c->dst, chunk(c), c->src, c->dst);
        if (n <= 0) {
            if ((n == -EINVAL || n == -ENOSYS) && c->done == 0)
                return 1;
            return (int)n;
        }
        moved(c, (size_t)n);
    }
    return 0;
}

/* Neither side is a pipe: splice through a private one. What enters the
 * pipe is always drained to dst before the next read from src, so the
 * bytes counted are those that reached dst, and none stay behind. */
static int by_pipe(struct copy *c)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    int ret = 0;
    while (c->left != 0) {
        ssize_t in = splice_once(c, c->src, p[1], chunk(c), c->src, -1);
        if (in <= 0) {
            ret = (in == -EINVAL || in == -ENOSYS) && c->done == 0 ? 1 : (int)in;
            break;
        }
        for (ssize_t out = 0; out < in;) {
            ssize_t k = splice_once(c, p[0], c->dst, (size_t)(in - out), -1, c->dst);
            if (k <= 0) {
                ret = k < 0 ? (int)k : -EIO;
                goto done;
            }
            out += k;
            moved(c, (size_t)k);
        }
    }
done:
    close(p[0]);
    close(p[1]);
    return ret;
}

static int by_buffer(struct copy *c)
{
    char *buf = malloc(COPY_CHUNK);
    if (!buf)
        return -ENOMEM;
    int ret = 0;
    while (c->left != 0) {
        ssize_t n = goro_read_until(c->src, buf, chunk(c), c->deadline);
        if (n <= 0) {
            ret = (int)n;
            break;
        }
        size_t wrote = 0;
        ssize_t w = goro_write_all_until(c->dst, buf, (size_t)n, &wrote, c->deadline);
        moved(c, wrote);
        if (w < 0) {
            ret = (int)w;
            break;
        }
    }
    free(buf);
    return ret;
}

int64_t goro_copy_until(int dst, int src, int64_t max, int64_t *copied, int64_t deadline)
{
    struct copy c = { .dst = dst, .src = src, .left = max < 0 ? -1 : max,
                      .deadline = deadline };
    struct stat sd, ss;
    int ret;
    if (dst < 0 || src < 0) {
        ret = -EINVAL;
        goto out;
    }
    if (fstat(dst, &sd) < 0 || fstat(src, &ss) < 0) {
        ret = -errno;
        goto out;
    }
    if ((ret = nonblocking(dst, &sd)) || (ret = nonblocking(src, &ss)))
        goto out;
    ret = 1;
    if (S_ISREG(ss.st_mode))
        ret = by_sendfile(&c);
    else if (S_ISFIFO(ss.st_mode) || S_ISFIFO(sd.st_mode))
        ret = by_splice(&c);
    else if (S_ISSOCK(ss.st_mode) && (S_ISSOCK(sd.st_mode) || S_ISREG(sd.st_mode)))
        ret = by_pipe(&c);
    if (ret == 1)
        ret = by_buffer(&c);
out:
    if (copied)
        *copied = c.done;
    return ret < 0 ? ret : c.done;
}

int64_t goro_copy(int dst, int src, int64_t max, int64_t *copied)
{
    return goro_copy_until(dst, src, max, copied, GORO_FOREVER);
}
