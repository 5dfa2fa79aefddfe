/* TEMPORARY: replaced by include/goro/file.h at merge */
#include <errno.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <goro.h>

#include "file_shim.h"

int goro_open(const char *path, int flags, mode_t mode)
{
    return goro_openat(AT_FDCWD, path, flags, mode);
}

int goro_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    int fd = openat(dirfd, path, flags, mode);
    return fd < 0 ? -errno : fd;
}

int goro_fstat(int fd, struct stat *out)
{
    return fstat(fd, out) < 0 ? -errno : 0;
}

int64_t goro_sendfile_until(int sock, int file, int64_t *offset, int64_t count, int64_t deadline)
{
    int64_t sent = 0;
    while (sent < count) {
        off_t off = (off_t)*offset;
        ssize_t n = sendfile(sock, file, &off, (size_t)(count - sent));
        if (n > 0) {
            *offset = off;
            sent += n;
        } else if (n == 0) {
            break;
        } else if (errno == EAGAIN) {
            int err = goro_wait_fd(sock, GORO_WRITABLE, deadline);
            if (err < 0)
                return sent > 0 ? sent : err;
        } else if (errno != EINTR) {
            return sent > 0 ? sent : -errno;
        }
    }
    return sent;
}
