/* proc/: child processes (docs/process.md) - spawn through posix_spawn,
 * waits parked on a pidfd (or polled where there is none), kill, and the
 * deadline that kills. Built on the public API only, as pipe/ is: this
 * layer calls nothing below it but through goro.h.
 *
 * layer: proc - child processes, built on the public API (goro.h) alone
 * may call: nothing
 */
#ifndef GORO_PROC_PROC_H
#define GORO_PROC_PROC_H

#include <stdatomic.h>
#include <sys/types.h>

#include "goro.h"

enum { PROC_RUNNING, PROC_REAPED };

struct goro_process {
    pid_t pid;
    int pidfd;                 /* -1: the wait polls waitid(WNOHANG) */
    int fd[3];                 /* the parent's pipe ends, -1 if none */
    int status;                /* wait(2) status, once state is PROC_REAPED */
    _Atomic int state;         /* PROC_RUNNING until reaped, then PROC_REAPED */
    atomic_flag reap_lock;     /* a reap attempt or a signal under way */
    _Atomic int waiting;       /* a wait under way (one at a time) */
};

#endif
