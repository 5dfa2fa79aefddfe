/* file/: files without blocking a worker (docs/files.md) - the calls of
 * goro/file.h. ring.c keeps one io_uring per P and waits for its
 * completions; file.c describes each call once (struct file_op) and runs
 * it through a ring, on the offload pool (the fallback) or, outside a
 * coroutine, directly; sendfile.c moves a file to a socket.
 *
 * layer: file - files through io_uring (one ring per P) or the offload pool
 * may call: io, sched, base
 * uses: start
 * contract rings for io: goro__file_flush goro__file_flush_all
 */
#ifndef GORO_FILE_FILE_H
#define GORO_FILE_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "internal.h"

struct io_uring_sqe;

/* One call, as ring.c prepares it and file.c runs it without a ring. */
enum file_kind {
    FOP_OPENAT, FOP_READV, FOP_WRITEV, FOP_FSYNC, FOP_FDATASYNC, FOP_STATX,
    FOP_UNLINKAT, FOP_RENAMEAT, FOP_MKDIRAT,
};
struct file_op {
    enum file_kind kind;
    int fd, fd2;                   /* fd: the file or dirfd; fd2: renameat's newdirfd */
    const char *path, *path2;
    int flags;
    unsigned mode;                 /* open/mkdir mode; statx mask */
    const struct iovec *iov;
    int iovcnt;
    int64_t off;
    struct statx *stx;
};

/* ring.c. Runs op through the calling P's ring and waits for it until
 * deadline or cancellation. Returns 0 with *res the kernel's result, the
 * wait's error (-ETIMEDOUT, -ECANCELED: the operation was cancelled in the
 * ring and is over), or 1: no ring here - run it another way. */
GORO_HIDDEN int goro__ring_run(const struct file_op *op, int64_t deadline, long *res);
/* For the poller, at every look at the descriptors' base (io/netpoll.c),
 * also by an M that will sleep elsewhere: submits what every ring has
 * queued and reaps its completions, claiming their waiters
 * (goro__claim_ready). Costs a load before the first ring is made, and
 * two per idle ring after. */
GORO_HIDDEN void goro__file_flush_all(void);
/* The same for p's ring alone: a worker's look flushes its own. */
struct goro_p;
GORO_HIDDEN void goro__file_flush(struct goro_p *p);
/* Whether this run uses rings (makes the caller's P's ring if needed). */
GORO_HIDDEN bool goro__ring_usable(void);
/* At shutdown, once every coroutine has ended: every ring goes. */
GORO_HIDDEN void goro__file_stop(void);
/* Tests: nonzero sends every call to the fallback. */
extern GORO_HIDDEN _Atomic int goro__file_ring_off;
/* sendfile.c: chunks goro_sendfile read in before sending (tests). */
extern GORO_HIDDEN _Atomic long goro__sendfile_warmed;

#endif
