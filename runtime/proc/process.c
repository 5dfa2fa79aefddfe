/*
 * Child processes (docs/process.md).
 *
 * Spawning: posix_spawn, whose glibc implementation is clone(CLONE_VM |
 * CLONE_VFORK) into exec - no copy of a threaded process ever runs code,
 * so other workers may hold any lock meanwhile - and which reports an
 * exec error (or a failed file action) as its return value. Pipes are
 * made close-on-exec; only the dup2 file actions give the child its ends
 * at 0, 1 and 2 (dup2 clears close-on-exec on the copy). Every descriptor
 * this file opens is closed on every path out of spawn.
 *
 * Waiting: the pidfd becomes readable when the child ends; goro_wait_fd
 * parks on it, then waitid(WNOHANG) reaps. Without a pidfd the wait polls
 * waitid(WNOHANG) with goro_sleep between tries.
 *
 * Reaping and signalling exclude each other through reap_lock: a signal
 * must never reach a process that got the number after goro reaped ours.
 * With a pidfd the kernel already refuses that; without one, the check of
 * `state` and the kill() happen under the lock that the reap takes, so the
 * reap cannot slip in between. The lock is held across one system call
 * only, in goro's own code, where the runtime never preempts: a spinner
 * waits for a system call to return, never for a parked holder.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

extern char **environ;

#define POLL_FIRST (1 * GORO_MSEC)
#define POLL_MAX (20 * GORO_MSEC)

/* ---- the reap lock ---- */

static void reap_lock(struct goro_process *p)
{
    while (atomic_flag_test_and_set_explicit(&p->reap_lock, memory_order_acquire))
        sched_yield();
}

static void reap_unlock(struct goro_process *p)
{
    atomic_flag_clear_explicit(&p->reap_lock, memory_order_release);
}

/* A wait(2) status from waitid's report. */
static int status_of(const siginfo_t *si)
{
    switch (si->si_code) {
    case CLD_EXITED:
        return (si->si_status & 0xff) << 8;
    case CLD_DUMPED:
        return (si->si_status & 0x7f) | 0x80;
    default:                   /* CLD_KILLED */
        return si->si_status & 0x7f;
    }
}

/* One reap attempt without waiting: 1 reaped (now or before), 0 still
 * running, or -errno (-ECHILD: reaped by someone else). */
static int try_reap(struct goro_process *p)
{
    if (atomic_load_explicit(&p->state, memory_order_acquire) == PROC_REAPED)
        return 1;
    siginfo_t si;
    int r, err = 0;
    reap_lock(p);
    do {
        memset(&si, 0, sizeof si);
        r = p->pidfd >= 0 ? waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG) : -1;
        if (p->pidfd < 0 || (r < 0 && errno == EINVAL))   /* no P_PIDFD: Linux < 5.4 */
            r = waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        err = -errno;
    else if (si.si_pid == p->pid) {
        p->status = status_of(&si);
        atomic_store_explicit(&p->state, PROC_REAPED, memory_order_release);
    }
    reap_unlock(p);
    if (err)
        return err;
    return atomic_load_explicit(&p->state, memory_order_relaxed) == PROC_REAPED;
}

/* Reaps in place, blocking the thread: for a process already killed when
 * no coroutine can do it. */
static void reap_blocking(struct goro_process *p)
{
    siginfo_t si;
    reap_lock(p);
    if (atomic_load_explicit(&p->state, memory_order_relaxed) != PROC_REAPED) {
        while (waitid(P_PID, (id_t)p->pid, &si, WEXITED) < 0 && errno == EINTR)
            ;
        atomic_store_explicit(&p->state, PROC_REAPED, memory_order_release);
    }
    reap_unlock(p);
}

/* ---- spawn ---- */

static bool pidfd_wanted(void)
{
    const char *e = getenv("GORO_PROC_NO_PIDFD");
    return !(e && *e && strcmp(e, "0") != 0);
}

/* fd moved to a number >= 3 (close-on-exec), so that no dup2 of the file
 * actions overwrites it before it is copied. Closes fd; -errno on error. */
static int above_stdio(int fd)
{
    if (fd >= 3)
        return fd;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int err = errno;
    close(fd);
    return hi >= 0 ? hi : -err;
}

/* What spawn opened, for closing on every path out. */
struct spawn_fds {
    int parent[3];             /* the pipes' parent ends: kept on success */
    int child[3];              /* the pipes' child ends and moved copies */
};

static void close_all(int *fd, int n)
{
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0) {
            close(fd[i]);
            fd[i] = -1;
        }
}

static int add_pipe(struct spawn_fds *s, int i, posix_spawn_file_actions_t *fa)
{
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return -errno;
    int mine = i == 0 ? pp[1] : pp[0], theirs = i == 0 ? pp[0] : pp[1];
    mine = above_stdio(mine);
    if (mine < 0) {
        close(theirs);
        return mine;
    }
    s->parent[i] = mine;
    theirs = above_stdio(theirs);
    if (theirs < 0)
        return theirs;
    s->child[i] = theirs;
    if (fcntl(mine, F_SETFL, fcntl(mine, F_GETFL) | O_NONBLOCK) < 0)
        return -errno;
    return -posix_spawn_file_actions_adddup2(fa, theirs, i);
}

static int add_stdio(struct spawn_fds *s, int i, const goro_stdio_t *io,
                     posix_spawn_file_actions_t *fa)
{
    switch (io->mode) {
    case GORO_STDIO_INHERIT:
        return 0;
    case GORO_STDIO_PIPE:
        return add_pipe(s, i, fa);
    case GORO_STDIO_NULL:
        return -posix_spawn_file_actions_addopen(fa, i, "/dev/null",
                                                 i == 0 ? O_RDONLY : O_WRONLY, 0);
    case GORO_STDIO_FD: {
        if (io->fd < 0)
            return -EINVAL;
        if (fcntl(io->fd, F_GETFD) < 0)
            return -EBADF;
        int fd = io->fd;
        if (fd < 3 && fd != i) {   /* another dup2 might overwrite it first */
            fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
            if (fd < 0)
                return -errno;
            s->child[i] = fd;
        }
        return -posix_spawn_file_actions_adddup2(fa, fd, i);
    }
    default:
        return -EINVAL;
    }
}

static int check_args(goro_process_t **p, const char *const argv[],
                      const goro_process_attr_t *attr)
{
    if (!p || !argv || !argv[0] || !argv[0][0])
        return -EINVAL;
    for (int i = 0; attr && i < 3; i++)
        if (attr->stdio[i].mode < GORO_STDIO_INHERIT || attr->stdio[i].mode > GORO_STDIO_FD)
            return -EINVAL;
    return 0;
}

/* The attributes: the caller's signal mask (a runtime thread's is the
 * program's), SIGPIPE at its default action. */
static void spawn_attr(posix_spawnattr_t *sa)
{
    sigset_t mask, def;
    posix_spawnattr_init(sa);
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigmask(sa, &mask);
    posix_spawnattr_setsigdefault(sa, &def);
    posix_spawnattr_setflags(sa, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

static int start(struct goro_process *p, const char *const argv[],
                 const goro_process_attr_t *attr, struct spawn_fds *s)
{
    static const goro_process_attr_t none;
    if (!attr)
        attr = &none;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t sa;
    int err = -posix_spawn_file_actions_init(&fa);
    if (err)
        return err;
    for (int i = 0; i < 3 && !err; i++)
        err = add_stdio(s, i, &attr->stdio[i], &fa);
    if (!err && attr->cwd)
        err = -posix_spawn_file_actions_addchdir_np(&fa, attr->cwd);
    if (!err) {
        spawn_attr(&sa);
        char *const *env = attr->envp ? attr->envp : environ;
        int (*fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                  const posix_spawnattr_t *, char *const[], char *const[]) =
            attr->path_search ? posix_spawnp : posix_spawn;
        err = -fn(&p->pid, argv[0], &fa, &sa, (char *const *)argv, env);
        posix_spawnattr_destroy(&sa);
    }
    posix_spawn_file_actions_destroy(&fa);
    return err;
}

int goro_process_spawn(goro_process_t **pp, const char *const argv[],
                       const goro_process_attr_t *attr)
{
    int err = check_args(pp, argv, attr);
    if (err)
        return err;
    struct goro_process *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    struct spawn_fds s = { { -1, -1, -1 }, { -1, -1, -1 } };
    err = start(p, argv, attr, &s);
    close_all(s.child, 3);
    if (err) {
        close_all(s.parent, 3);
        free(p);
        return err;
    }
    memcpy(p->fd, s.parent, sizeof p->fd);
    atomic_flag_clear(&p->reap_lock);
    p->pidfd = -1;
    if (pidfd_wanted()) {
        /* No race: the child is ours and unreaped, so pid names it. On
         * failure (Linux < 5.3, EMFILE) this process is polled. */
        long fd = syscall(SYS_pidfd_open, p->pid, 0);
        p->pidfd = fd >= 0 ? (int)fd : -1;
    }
    *pp = p;
    return 0;
}

/* ---- accessors ---- */

pid_t goro_process_pid(const goro_process_t *p)
{
    return p ? p->pid : -1;
}

int goro_process_fd(const goro_process_t *p, int i)
{
    if (!p || i < 0 || i > 2)
        return -EINVAL;
    return p->fd[i];
}

int goro_process_close_fd(goro_process_t *p, int i)
{
    if (!p || i < 0 || i > 2)
        return -EINVAL;
    if (p->fd[i] < 0)
        return -EBADF;
    int fd = p->fd[i];
    p->fd[i] = -1;
    goro_close(fd);
    return 0;
}

int goro_process_exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int goro_process_signal(int status)
{
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* ---- wait, kill ---- */

/* One park until the process may have ended, or the deadline. */
static int park(struct goro_process *p, int64_t deadline, int64_t *pause)
{
    if (p->pidfd >= 0) {
        int r = goro_wait_fd(p->pidfd, GORO_READABLE, deadline);
        return r < 0 ? r : 0;
    }
    int64_t until = goro_now() + *pause;
    if (deadline != GORO_FOREVER && deadline < until)
        until = deadline;
    if (*pause < POLL_MAX)
        *pause *= 2;
    return goro_sleep_until(until);
}

static int wait_locked(struct goro_process *p, int64_t deadline)
{
    int64_t pause = POLL_FIRST;
    for (;;) {
        int r = try_reap(p);
        if (r)
            return r < 0 ? r : 0;
        if (deadline != GORO_FOREVER && goro_now() >= deadline)
            return -ETIMEDOUT;
        r = park(p, deadline, &pause);
        if (r < 0 && r != -ETIMEDOUT)
            return r;
    }
}

int goro_process_wait_until(goro_process_t *p, int *status, int64_t deadline)
{
    if (!p)
        return -EINVAL;
    if (atomic_exchange_explicit(&p->waiting, 1, memory_order_acquire))
        return -EBUSY;
    int r = wait_locked(p, deadline);
    if (r == 0 && status)
        *status = p->status;
    atomic_store_explicit(&p->waiting, 0, memory_order_release);
    return r;
}

int goro_process_wait(goro_process_t *p, int *status)
{
    return goro_process_wait_until(p, status, GORO_FOREVER);
}

int goro_process_kill(goro_process_t *p, int sig)
{
    if (!p || sig < 0 || sig >= NSIG)
        return -EINVAL;
    int r;
    reap_lock(p);
    if (atomic_load_explicit(&p->state, memory_order_relaxed) == PROC_REAPED)
        r = -ESRCH;
    else if (p->pidfd >= 0)
        r = syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0) < 0 ? -errno : 0;
    else
        r = kill(p->pid, sig) < 0 ? -errno : 0;
    reap_unlock(p);
    return r;
}

int goro_process_wait_kill_until(goro_process_t *p, int *status, int64_t deadline)
{
    int r = goro_process_wait_until(p, status, deadline);
    if (r != -ETIMEDOUT)
        return r;
    goro_process_kill(p, SIGKILL);
    r = goro_process_wait_until(p, status, GORO_FOREVER);
    return r ? r : -ETIMEDOUT;
}

/* ---- free ---- */

static void release(struct goro_process *p)
{
    if (p->pidfd >= 0)
        goro_close(p->pidfd);
    free(p);
}

/* The background reaper of a killed process. Should its wait be cancelled
 * (a group it joined was), the kill is already sent: reap in place. */
static long reaper(void *arg)
{
    struct goro_process *p = arg;
    int r = goro_process_wait(p, NULL);
    if (r != 0 && r != -ECHILD)
        reap_blocking(p);
    release(p);
    return 0;
}

int goro_process_free(goro_process_t *p)
{
    if (!p)
        return -EINVAL;
    if (atomic_load_explicit(&p->waiting, memory_order_acquire))
        return -EBUSY;
    for (int i = 0; i < 3; i++)
        if (p->fd[i] >= 0)
            goro_process_close_fd(p, i);
    if (atomic_load_explicit(&p->state, memory_order_acquire) == PROC_REAPED) {
        release(p);
        return 0;
    }
    goro_process_kill(p, SIGKILL);
    /* A coroutine must not block its worker: it leaves the reap to one of
     * its own. A thread may block for the moment a killed process takes
     * to go, and so starts no runtime that the program never asked for. */
    goro_t *h;
    if (goro_self() &&
        goro_spawn(&h, &(goro_attr_t){ .name = "process reaper" }, reaper, p) == 0) {
        goro_detach(h);
        return 0;
    }
    reap_blocking(p);
    release(p);
    return 0;
}

/* ---- output ---- */

/* Reads fd to its end into buf (cap bytes; more is read and dropped,
 * *big set); *n gets the count. Returns 0 or a negative errno. */
static int collect(int fd, char *buf, size_t cap, size_t *n, bool *big, int64_t deadline)
{
    char scratch[4096];
    *n = 0;
    for (;;) {
        bool room = *n < cap;
        ssize_t r = goro_read_until(fd, room ? buf + *n : scratch,
                                    room ? cap - *n : sizeof scratch, deadline);
        if (r <= 0)
            return (int)r;
        if (room)
            *n += (size_t)r;
        else
            *big = true;
    }
}

int goro_process_output(const char *const argv[], const goro_process_attr_t *attr,
                        void *buf, size_t cap, size_t *len, int *status,
                        int64_t deadline)
{
    if (!buf && cap)
        return -EINVAL;
    goro_process_attr_t a = attr ? *attr : (goro_process_attr_t){ 0 };
    a.stdio[1] = (goro_stdio_t){ .mode = GORO_STDIO_PIPE };
    goro_process_t *p;
    int err = goro_process_spawn(&p, argv, &a);
    if (err)
        return err;
    bool big = false;
    size_t n;
    err = collect(p->fd[1], buf, cap, &n, &big, deadline);
    if (len)
        *len = n;
    /* A failed read (deadline, cancellation) ends the process now. */
    int r = goro_process_wait_kill_until(p, status, err ? 0 : deadline);
    goro_process_free(p);
    if (err)
        return err;
    if (r)
        return r;
    return big ? -E2BIG : 0;
}
