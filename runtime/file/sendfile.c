/*
 * goro_sendfile: a file to a socket, in chunks, parking on the socket.
 *
 * sendfile(2) blocks in two ways: on a full socket, and on file pages not
 * in memory, which it reads synchronously. The first is the poller's: in
 * a coroutine the socket is held as every goro call holds its descriptor
 * (goro__fd_enter: made non-blocking on its first use, the number kept
 * from a concurrent goro_close), and EAGAIN parks on it. For the second,
 * each chunk is looked up in the page cache first: one cachestat(2) for
 * the whole chunk (Linux 6.5), or, where that is missing or cannot say, a
 * one-byte read without blocking (RWF_NOWAIT) of the chunk's first and
 * last page. If pages are missing, the chunk is read through goro_pread -
 * the ring, or the pool - into a scratch buffer, which fills the page
 * cache without a worker waiting for the disk; sendfile then finds the
 * pages there. (Under the probes, a page in the middle of a chunk that
 * was evicted alone can still be read synchronously; the readahead that
 * fills a chunk makes that rare. cachestat counts every page.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "goro.h"
#include "internal.h"
#include "file/file.h"
#include "io/poller.h"
#include "io/netpoll.h"
#include "sched/sched.h"

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

/* A one-byte read at off without blocking: 1 if the byte is in memory, 0
 * if off is past the end of the file, -1 if it is not in memory (or the
 * read failed: sendfile will say why). */
static int probe(int file, int64_t off)
{
    char b;
    struct iovec v = { &b, 1 };
    ssize_t n = preadv2(file, &v, 1, (off_t)off, RWF_NOWAIT);
    return n > 0 ? 1 : n == 0 ? 0 : errno == EAGAIN ? -1 : 1;
}

/* cachestat(2), as the kernel defines it (the C library has no wrapper
 * yet). The number is the same on every architecture. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct cache_range {
    uint64_t off, len;
};
struct cache_stat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Set once cachestat proved missing (ENOSYS). Other refusals are the
 * file's (EPERM: a file the caller may not write and does not own, on
 * recent kernels; EOPNOTSUPP: hugetlbfs): the probes answer for it. */
static _Atomic bool no_cachestat;

enum cache_answer { CACHE_ALL, CACHE_MISSING, CACHE_UNKNOWN };

/* Whether every page of [off, off + len) is in the page cache. Pages past
 * the end of the file are never there: MISSING may mean only that. */
static enum cache_answer cache_lookup(int file, int64_t off, int64_t len)
{
    if (atomic_load_explicit(&no_cachestat, memory_order_relaxed))
        return CACHE_UNKNOWN;
    struct cache_range r = { (uint64_t)off, (uint64_t)len };
    struct cache_stat cs;
    if (syscall(__NR_cachestat, file, &r, &cs, 0) != 0) {
        if (errno == ENOSYS)
            atomic_store_explicit(&no_cachestat, true, memory_order_relaxed);
        return CACHE_UNKNOWN;
    }
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t pages = ((uint64_t)off + (uint64_t)len - 1) / page - (uint64_t)off / page + 1;
    return cs.nr_cache >= pages ? CACHE_ALL : CACHE_MISSING;
}

GORO_HIDDEN _Atomic long goro__sendfile_warmed;

/* Whether [off, off + len) of file must be read in before sendfile. */
static bool needs_warming(int file, int64_t off, int64_t len)
{
    switch (cache_lookup(file, off, len)) {
    case CACHE_ALL:
        return false;
    case CACHE_MISSING:
        /* a page is missing - or the chunk runs past the end of the
         * file, which the last byte's probe tells (then as below) */
        if (probe(file, off + len - 1) != 0)
            return true;
        return probe(file, off) < 0;
    case CACHE_UNKNOWN:
    default:
        return probe(file, off) < 0 || probe(file, off + len - 1) < 0;
    }
}

/* Makes sure [off, off + len) of file is in the page cache; scratch is
 * made on first need. */
static int warm(int file, int64_t off, int64_t len, char **scratch, int64_t deadline)
{
    if (!needs_warming(file, off, len))
        return 0;
    atomic_fetch_add_explicit(&goro__sendfile_warmed, 1, memory_order_relaxed);
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
    /* In a coroutine: held, and non-blocking (a blocking socket would
     * block the worker). Elsewhere the call is sendfile's, as it is. */
    struct goro_pollfd *pd = NULL;
    uint32_t gen = 0;
    int err = goro_self() ? goro__fd_enter(sock, &pd, &gen) : 0;
    if (err)
        return err;
    char *scratch = NULL;
    int64_t sent = 0;
    bool woken = false;
    while (sent < count) {
        int64_t len = count - sent < CHUNK ? count - sent : CHUNK;
        /* A goro_close of the socket waits for this call to leave: it
         * ends the call at the next chunk, not at the end of the file. */
        if (pd && goro__fd_let_go(pd, gen)) {
            err = -EBADF;
            break;
        }
        if (pd && (err = warm(file, *offset, len, &scratch, deadline)) < 0)
            break;
        off_t off = (off_t)*offset;
        ssize_t n = goro__without_sigpipe(sendfile_call,
                                          &(struct sf_call){ sock, file, &off, (size_t)len },
                                          (size_t)len);
        if (n > 0) {
            *offset = off;
            sent += n;
            if (woken) {
                /* as io_run: a writer woken by an edge that then wrote
                 * hands the edge on - another may wait */
                goro__fd_pass(pd, GORO_WRITABLE);
                woken = false;
            } else if (pd) {
                goro__preempt_check();  /* it never waits while the peer keeps up */
            }
            continue;
        }
        if (n == 0)
            break;                     /* end of file */
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN || !pd) {
            err = -errno;
            break;
        }
        /* the edge is consumed: sendfile said EAGAIN just now */
        if ((err = goro__fd_wait(pd, gen, GORO_WRITABLE, deadline)) < 0)
            break;
        err = 0;
        woken = true;
    }
    free(scratch);
    if (pd) {
        if (woken)                      /* woken, then a failure: as io_run */
            goro__fd_pass(pd, GORO_WRITABLE);
        goro__fd_leave(pd);
    }
    return sent > 0 ? sent : err;
}

int64_t goro_sendfile(int sock, int file, int64_t *offset, int64_t count)
{
    return goro_sendfile_until(sock, file, offset, count, GORO_FOREVER);
}
