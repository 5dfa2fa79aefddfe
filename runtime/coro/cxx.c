/* C++ support (docs/cxx.md): the C++ runtime's exception state kept per
 * coroutine (the switch path calls in through runtime/coro/cxx_eh.h), goro_exit
 * unwinding a coroutine's frames so that destructors run, and the
 * exceptions that escape coroutines started by the C++ go(), kept for their
 * joiners.
 *
 * This file is C and needs nothing from the C++ runtime at link time: a C
 * program links and runs without it, and each switch then costs one load
 * and a branch more. Everything C++ is in include/goro/cxx.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unwind.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"
#include "coro/cxx_eh.h"

/* ---- finding the C++ runtime ---- */

/* The C++ runtime's per-thread globals. libsupc++ (GCC) and libc++abi
 * (LLVM) agree on these two fields; a third follows on ARM EHABI only,
 * which neither x86-64 nor aarch64 is. */
struct cxa_eh_globals {
    void *caught_exceptions;       /* what `throw;` rethrows, innermost first */
    unsigned int uncaught_exceptions;  /* std::uncaught_exceptions() */
};

/* Weak: resolved when the C++ runtime is part of the program at start
 * (linked, or preloaded); NULL in a C program, which then needs no C++. */
extern void *__cxa_get_globals(void) __attribute__((weak));
#pragma weak _Unwind_ForcedUnwind

GORO_HIDDEN _Atomic(goro__cxa_get_globals_fn) goro__cxx_globals;

/* The first runtime to register wins: a process has one C++ runtime. */
void goro__cxx_register(void *(*get_globals)(void))
{
    goro__cxa_get_globals_fn none = NULL;
    if (get_globals)
        atomic_compare_exchange_strong(&goro__cxx_globals, &none, get_globals);
}

/* Once, at load. A C++ library loaded later with dlopen registers from
 * goro/cxx.h instead, as every C++ translation unit that includes it does. */
__attribute__((constructor)) static void find_cxx_runtime(void)
{
    if (__cxa_get_globals)
        goro__cxx_register(__cxa_get_globals);
}

const void *goro__cxx_runtime(void)
{
    return (const void *)atomic_load_explicit(&goro__cxx_globals, memory_order_relaxed);
}

/* ---- exception state per coroutine ---- */

/* The calling thread's globals. Their address is fixed for the thread's
 * life, so each thread asks the C++ runtime once (through a PLT call and
 * __tls_get_addr; the switch then costs two loads and two stores). */
static __thread struct cxa_eh_globals *thread_globals
    __attribute__((tls_model("initial-exec")));

static struct cxa_eh_globals *globals_here(void)
{
    struct cxa_eh_globals *eh = thread_globals;
    if (unlikely(!eh))
        thread_globals = eh =
            atomic_load_explicit(&goro__cxx_globals, memory_order_relaxed)();
    return eh;
}

void goro__cxx_eh_save_slow(struct goro *g)
{
    struct cxa_eh_globals *eh = globals_here();
    g->cxx_caught = eh->caught_exceptions;
    g->cxx_uncaught = eh->uncaught_exceptions;
}

void goro__cxx_eh_restore_slow(const struct goro *g)
{
    struct cxa_eh_globals *eh = globals_here();
    eh->caught_exceptions = g->cxx_caught;
    eh->uncaught_exceptions = g->cxx_uncaught;
}

/* ---- goro_exit: a forced unwind, as glibc's pthread_exit does ----
 *
 * The unwinder runs every frame's cleanups (destructors, the end of catch
 * blocks) from goro_exit's caller outwards, and calls exit_stop before
 * each frame. The coroutine's first frame, goro__ctx_entry, has an
 * undefined return address in its CFI (arch/<arch>/switch.S): there the
 * unwinder reports the end of the stack and exit_stop calls goro_exit
 * again, which ends the coroutine on what is left of its stack. A frame without unwind information ends
 * the walk there too: the frames outside it are left as they are, which is
 * what a direct exit does to all of them. */

struct exit_unwind {
    struct _Unwind_Exception exc;   /* the unwinder's record: not on the stack,
                                       which the cleanups reuse */
    long result;
};

/* "GOROEXIT": not a C++ exception class, so catch clauses other than
 * catch (...) (and abi::__forced_unwind in libstdc++) let it through. */
#define EXIT_CLASS 0x474f524f45584954ULL

/* The unwinder's record is deleted only by a catch (...) that ended
 * without `throw;`: the coroutine would go on after goro_exit. */
static void exit_swallowed(_Unwind_Reason_Code reason, struct _Unwind_Exception *exc)
{
    (void)reason;
    (void)exc;
    fputs("goro: goro_exit() unwinds the coroutine's frames, and a catch (...) "
          "ended without rethrowing (throw;)\n", stderr);
    abort();
}

/* The exception class's type, as the unwind.h in use spells it (GCC's and
 * clang's name it _Unwind_Exception_Class, libunwind's says uint64_t). */
typedef __typeof__(((struct _Unwind_Exception *)0)->exception_class) exception_class_t;

static _Unwind_Reason_Code exit_stop(int version, _Unwind_Action actions,
                                     exception_class_t cls,
                                     struct _Unwind_Exception *exc,
                                     struct _Unwind_Context *ctx, void *arg)
{
    (void)version;
    (void)cls;
    (void)exc;
    (void)ctx;
    if (!(actions & _UA_END_OF_STACK))
        return _URC_NO_REASON;      /* run this frame's cleanups and go on */
    struct exit_unwind *x = arg;
    long result = x->result;
    free(x);
    goro_exit(result);              /* unwound: on with the rest of the exit */
}

void goro__cxx_exit_unwind(long result)
{
    if (!atomic_load_explicit(&goro__cxx_globals, memory_order_relaxed) ||
        !_Unwind_ForcedUnwind || goro__current()->cxx_exiting)
        return;                     /* C, or unwound already: exit now */
    struct exit_unwind *x = aligned_alloc(_Alignof(struct exit_unwind), sizeof *x);
    if (!x)
        return;                     /* exits without running destructors */
    memset(x, 0, sizeof *x);
    x->exc.exception_class = EXIT_CLASS;
    x->exc.exception_cleanup = exit_swallowed;
    x->result = result;
    goro__current()->cxx_exiting = 1;
    _Unwind_ForcedUnwind(&x->exc, exit_stop, x);
    /* Back only if the unwinder failed before running any cleanup (this
     * frame is intact): end the coroutine directly. */
    goro__current()->cxx_exiting = 0;
    free(x);
}

int goro__cxx_exiting(void)
{
    struct goro *g = goro__current();
    return g && g->cxx_exiting;
}

/* ---- exceptions that escaped, until their joiner takes them ----
 *
 * The C++ go() catches what escapes a coroutine and leaves it on the
 * coroutine (g->cxx_escaped), which a join hands over (coro.c) or
 * destroys; a detach destroys it. */

/* A group member (detached, as members are): what escaped becomes its
 * error - ENOTRECOVERABLE, with the exception's what() as the message -
 * which fails the group like any member's error, carrying the exception
 * to the C++ group wait (goro/cxx.h). */
static int keep_in_group(struct goro *self, struct goro__cxx_escaped *e)
{
    goro_err_t *err = e->what ? goro_err_new(ENOTRECOVERABLE, "%s", e->what)
                              : goro_err_new(ENOTRECOVERABLE,
                                             "an exception escaped a group member");
    if (goro__err_set_escaped(err, e) != 0)
        return -ENOMEM;             /* the stand-in: the caller terminates */
    goro_err_free(self->err);
    self->err = err;
    return 0;
}

int goro__cxx_keep(struct goro__cxx_escaped *e)
{
    struct goro *self = goro__current();
    if (!self)
        return -EPERM;
    /* Nobody can join a detached coroutine: the caller terminates. A
     * detach after this (the coroutine still running its exit) destroys
     * what was kept with the handle. */
    if (atomic_load_explicit(&self->exit_word, memory_order_acquire) == GORO_EXIT_DETACHED)
        return self->group ? keep_in_group(self, e) : -EINVAL;
    self->cxx_escaped = e;
    return 0;
}
