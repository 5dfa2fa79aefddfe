/* TEMPORARY: replaced by include/goro/file.h at merge */
#ifndef HTTPD_FILE_SHIM_H
#define HTTPD_FILE_SHIM_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

int     goro_open(const char *path, int flags, mode_t mode);
int     goro_openat(int dirfd, const char *path, int flags, mode_t mode);
int     goro_fstat(int fd, struct stat *out);
int64_t goro_sendfile_until(int sock, int file, int64_t *offset, int64_t count, int64_t deadline);

#endif
