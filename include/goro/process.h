/*
 * goro/process.h: child processes (docs/process.md) - spawn with argv,
 * environment, working directory and standard descriptors (inherited,
 * /dev/null, a given descriptor, or a pipe whose parent end is a goro
 * descriptor), a wait that parks, kill, and a deadline that kills.
 * Built on goro.h. goro.h includes it; it may be included alone.
 */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_PROCESS_H
#define GORO_PROCESS_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------
 * Child processes
 *
 *   goro_process_t *p;
 *   const char *argv[] = { "sort", "-u", NULL };
 *   goro_process_attr_t a = { .path_search = 1,
 *                             .stdio = { [0] = { .mode = GORO_STDIO_PIPE },
 *                                        [1] = { .mode = GORO_STDIO_PIPE } } };
 *   int r = goro_process_spawn(&p, argv, &a);
 *   ... goro_write_all(goro_process_fd(p, 0), ...);
 *   ... goro_process_close_fd(p, 0);     (end of input for the child)
 *   ... goro_read(goro_process_fd(p, 1), ...) until 0;
 *   int status;
 *   goro_process_wait(p, &status);       (parks; never blocks a worker)
 *   goro_process_free(p);
 *
 * The child is started with posix_spawn (no fork of a threaded process:
 * safe while every worker runs), with the calling thread's signal mask
 * (a runtime thread's is the program's) and SIGPIPE at its default action
 * (a program that ignores SIGPIPE does not pass that on; other ignored
 * signals stay ignored, handled ones are reset by exec). It inherits only
 * descriptors 0, 1 and 2 as chosen below and descriptors the program
 * opened without close-on-exec (goro's own are close-on-exec). The
 * calling thread waits while the child execs (the vfork half of
 * posix_spawn, typically well under a millisecond), which is how an exec
 * error comes back from spawn itself.
 *
 * The wait parks on a pidfd (Linux 5.3); where there is none (an older
 * kernel, no descriptor left for it at spawn, or GORO_PROC_NO_PIDFD=1 in
 * the environment) it polls waitid(WNOHANG) at 1 ms growing to 20 ms. The process is reaped only by goro: a program
 * that reaps it itself (waitpid(-1), SIGCHLD set to SIG_IGN) makes the
 * wait return -ECHILD.
 *
 * Statuses are wait(2) statuses: test them with WIFEXITED / WEXITSTATUS
 * / WIFSIGNALED / WTERMSIG, or goro_process_exit_code and
 * goro_process_signal below.
 * ------------------------------------------------------------------------ */

typedef struct goro_process goro_process_t;

/* What a standard descriptor of the child is. */
enum {
    GORO_STDIO_INHERIT = 0,    /* the parent's descriptor of that number */
    GORO_STDIO_PIPE,           /* a pipe; the parent's end: goro_process_fd() */
    GORO_STDIO_NULL,           /* /dev/null */
    GORO_STDIO_FD,             /* a copy of .fd (the parent keeps its own) */
};

typedef struct goro_stdio {
    int mode;                  /* GORO_STDIO_* */
    int fd;                    /* GORO_STDIO_FD: the descriptor to give */
} goro_stdio_t;

typedef struct goro_process_attr {
    char *const *envp;         /* NULL-terminated "K=V"; NULL: the parent's environ */
    const char *cwd;           /* the child's working directory; NULL: the parent's */
    goro_stdio_t stdio[3];     /* stdin, stdout, stderr; zero: inherit */
    int path_search;           /* nonzero: argv[0] without '/' is looked up in PATH */
} goro_process_attr_t;

/* Starts argv[0] with arguments argv (NULL-terminated) and attr (NULL:
 * all defaults); *p gets the process. Does not switch. Returns 0, or:
 * -EINVAL (NULL p or argv, empty argv or argv[0], a bad stdio mode, a
 * GORO_STDIO_FD with a negative fd), -EBADF (a GORO_STDIO_FD that is not
 * open), the error of exec or of the working directory as the child met
 * it (-ENOENT: no such program or directory, -EACCES, -ENOEXEC, ...),
 * -EMFILE / -ENFILE (no descriptor for a pipe), -ENOMEM, -EAGAIN (no
 * process). On error nothing is left: no process, no descriptor. */
int goro_process_spawn(goro_process_t **p, const char *const argv[],
                       const goro_process_attr_t *attr);

/* The child's process id (stays valid until the process is freed; after
 * it has been waited for, the number may serve another process). */
pid_t goro_process_pid(const goro_process_t *p);

/* The parent's end of the child's stdin (i = 0), stdout (1) or stderr
 * (2) when that is a GORO_STDIO_PIPE: a non-blocking, close-on-exec goro
 * descriptor owned by p (for goro_read/goro_write/goro_wait_fd/select).
 * -1 if there is none (not a pipe, already closed), -EINVAL for a NULL p
 * or another i. */
int goro_process_fd(const goro_process_t *p, int i);

/* Closes the parent's end of pipe i early (goro_close; closing stdin is
 * how the child sees end of input). Returns 0, -EINVAL, or -EBADF when
 * there is no such pipe (any more). */
int goro_process_close_fd(goro_process_t *p, int i);

/* Waits for the process to end (may switch) and reaps it; *status (may
 * be NULL) gets its wait(2) status. Once reaped, every later wait
 * returns 0 and the same status at once (a process that has ended is
 * reaped even by a cancelled coroutine: no park is needed). Returns 0, -ETIMEDOUT (past
 * deadline, goro_now() clock), -ECANCELED (the process runs on and can be
 * waited for again), -EINVAL (NULL p), -EBUSY (another coroutine or
 * thread waits for p), -ECHILD (someone else reaped it). */
int goro_process_wait(goro_process_t *p, int *status);
int goro_process_wait_until(goro_process_t *p, int *status, int64_t deadline);

/* Waits until deadline, then kills the process with SIGKILL and reaps it
 * (may switch): a process that never exits does not outlive the deadline,
 * nor stays a zombie. Returns 0 (it ended by the deadline), -ETIMEDOUT (it
 * was killed: *status says so, unless it ended on its own in between), or
 * as goro_process_wait; on -ECANCELED the process may have been killed
 * but not reaped yet (goro_process_free reaps it). */
int goro_process_wait_kill_until(goro_process_t *p, int *status, int64_t deadline);

/* Sends sig (0: only checks) to the process; never to another process
 * that got its number after it was reaped (pidfd_send_signal). Does not
 * switch. Returns 0, -EINVAL (NULL p, bad sig), -ESRCH (already reaped),
 * -EPERM. A process that ended but is not reaped yet takes the signal
 * with no effect (0). */
int goro_process_kill(goro_process_t *p, int sig);

/* Frees p: closes the pipes still open and, if the process has not been
 * reaped, kills it (SIGKILL) and reaps it, so that it never stays a
 * zombie: from a coroutine in the background (a detached coroutine, or in
 * place if none can start), from a thread in place (blocking it for the
 * moment a killed process takes to go). Does not wait for a process that ends on its own: wait first
 * for that. Not while another coroutine waits for p. Returns 0, or
 * -EINVAL (NULL p), -EBUSY (p is being waited for; nothing done). */
int goro_process_free(goro_process_t *p);

/* From a wait status: the exit code (0-255) of a process that exited,
 * else -1; the signal that killed it, else 0. */
int goro_process_exit_code(int status);
int goro_process_signal(int status);

/* Runs argv as goro_process_spawn with attr (its stdio[1] is replaced by
 * a pipe), collects up to cap bytes of its stdout into buf (*len, may be
 * NULL, gets the count; more output is read and dropped), and waits for
 * it with goro_process_wait_kill_until (may switch); *status (may be
 * NULL) gets its status. Returns 0, -ETIMEDOUT (killed at deadline: buf
 * holds what came before), -E2BIG (more than cap bytes came: the first
 * cap are in buf, the process was waited for), or an error of spawn or
 * wait (then the process is killed and reaped). */
int goro_process_output(const char *const argv[], const goro_process_attr_t *attr,
                        void *buf, size_t cap, size_t *len, int *status,
                        int64_t deadline);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* GORO_PROCESS_H */
