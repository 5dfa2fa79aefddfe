/* The io suite's shared part: the files test_io_<concern>.c hold its
 * tests by concern; test_io.c makes the suite and its test cases, and each
 * file adds its tests through io_<concern>_tests(). The helpers below are
 * the ones several of those files use. */
#ifndef GORO_TEST_IO_H
#define GORO_TEST_IO_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

/* The suite's test cases: io (most), cancel_detached (longer timeout),
 * sigpipe (SIGPIPE at its default action: these fail by dying of it). */
struct io_tcases {
    TCase *io, *cancel_detached, *sigpipe;
};

void io_stream_tests(struct io_tcases *tc);   /* test_io_stream.c */
void io_sock_tests(struct io_tcases *tc);     /* test_io_sock.c */
void io_pipe_tests(struct io_tcases *tc);     /* test_io_pipe.c */
void io_close_tests(struct io_tcases *tc);    /* test_io_close.c */
void io_errors_tests(struct io_tcases *tc);   /* test_io_errors.c */
void io_threads_tests(struct io_tcases *tc);  /* test_io_threads.c */

/* Shared between the files (defined where their first test is). */
enum { BIG = 4 << 20 };                 /* a big stream's bytes */
/* test_io_stream.c: reads a pattern stream (seed) in small pieces once
 * reader_go is set; returns the byte count. */
extern atomic_int reader_go;
long small_reader(int fd, long seed);
/* test_io_sock.c: a waiter sets waiter_in as it starts; read_one reads a
 * byte, wait_readable waits for readability, spawn_announced returns h
 * once its waiter started and parked; read_byte counts its readers in
 * readers_waiting; pipe_error: a write's error on a closed peer; connect_to
 * connects a new socket to a and closes it (its result). */
extern atomic_int waiter_in;
long read_one(int fd);
long wait_readable(int fd);
goro_t *spawn_announced(goro_t *h);
extern atomic_long readers_waiting;
long read_byte(int fd);
bool pipe_error(long r);
long connect_to(const struct sockaddr_in *a);
/* test_io_pipe.c: n round trips over a stream (the initiator sends 2i,
 * the responder answers v + 1). */
long pingpong(int fd, long n, long initiator);

/* The byte at offset i of stream seed: not periodic in any small length,
 * so a lost, repeated or reordered piece shows. */
static inline uint8_t pat(uint32_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ seed * 40503u;
    return (uint8_t)(x >> 11 ^ x >> 23 ^ i);
}

static inline void fill(uint8_t *p, size_t len, uint32_t seed, size_t off)
{
    for (size_t i = 0; i < len; i++)
        p[i] = pat(seed, off + i);
}

/* First offset where p differs from the stream, or -1. */
static inline long mismatch(const uint8_t *p, size_t len, uint32_t seed, size_t off)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != pat(seed, off + i))
            return (long)i;
    return -1;
}

static inline bool has_fl(int fd, int fl) { return (fcntl(fd, F_GETFL) & fl) != 0; }
static inline bool has_fd_fl(int fd, int fl) { return (fcntl(fd, F_GETFD) & fl) != 0; }
static inline bool is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

static inline void make_pipe(int p[2]) { ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0); }

static inline void make_socketpair(int type, int p[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, p), 0);
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Joins h, which must finish within limit seconds of now (checked by the
 * caller from the returned elapsed time); *r gets its result. */
static inline double join_timed(goro_t *h, long *r)
{
    double t0 = t_now();
    ck_assert_int_eq(goro_join(h, r), 0);
    return t_now() - t0;
}

/* SIGPIPE at its default action, so that a write raising it kills the
 * test process (and the test fails) instead of going unnoticed. (One
 * saved action per file: each test restores what it set.) */
static struct sigaction saved_pipe;

static inline void sigpipe_default(void)
{
    struct sigaction sa = { .sa_handler = SIG_DFL };
    ck_assert_int_eq(sigaction(SIGPIPE, &sa, &saved_pipe), 0);
}

static inline void sigpipe_restore(void) { sigaction(SIGPIPE, &saved_pipe, NULL); }

#endif
