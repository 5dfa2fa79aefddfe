/* base/: what every layer uses - runtime locks and futexes (lock.h, with
 * the lock order), the sanitizers' fiber hooks (sanitizer.h), the data
 * model (internal.h), and here settings from the environment, goro_now's
 * clock and one-time warnings. It calls nothing of goro's but what a
 * fatal end reports (debug/'s "fatal": the backtrace, the trace under way)
 * when a lock check or goro__fatal_abort ends the process.
 *
 * layer: base - locks and futexes, the data model, settings from the
 *     environment, the clock, one-time warnings, the sanitizers' hooks
 * may call: nothing
 * uses: fatal
 */
#ifndef GORO_BASE_ENV_H
#define GORO_BASE_ENV_H

#include "internal.h"

/* env.c: settings from the environment, all by one rule. A setting that
 * is unset or empty returns false (or dflt); a bad one too, after printing
 * "goro: ignoring NAME=VALUE (want ...)"; the caller then uses its default.
 * _long: a decimal number in min..max (min >= 0; more: text after the
 * range in the message); _size: bytes, k/M/g suffixes allowed; _is: the
 * value is exactly word; _word: the index of the one of n words it is
 * (want names them in the message); _flag: 0 or 1. */
GORO_HIDDEN bool goro__env_long(const char *name, long min, long max, const char *more,
                                long *out);
GORO_HIDDEN bool goro__env_size(const char *name, size_t min, size_t max, size_t *out);
GORO_HIDDEN bool goro__env_is(const char *name, const char *word);
GORO_HIDDEN int goro__env_word(const char *name, const char *const *words, int n,
                               const char *want, int dflt);
GORO_HIDDEN bool goro__env_flag(const char *name, bool dflt);

/* clock.c: goro_now's clock, in ns: CLOCK_MONOTONIC, or the virtual one
 * (real_now: always CLOCK_MONOTONIC). advance: moves the virtual clock
 * forward to `to` (never back; nothing if it is the real one). real_of:
 * the CLOCK_MONOTONIC time at which goro_now() will read t, if it runs at
 * the real pace from now on. */
#define GORO_VIRTUAL_EPOCH ((int64_t)1000 * GORO_SEC)
GORO_HIDDEN int64_t goro__now(void);
GORO_HIDDEN int64_t goro__real_now(void);
GORO_HIDDEN bool goro__clock_virtual(void);
GORO_HIDDEN void goro__clock_set_virtual(bool on);
GORO_HIDDEN void goro__clock_advance(int64_t to);
GORO_HIDDEN int64_t goro__clock_real_of(int64_t t);

/* warn.c */
/* Prints "goro: <message>\n" to stderr once per call site key. */
GORO_HIDDEN void goro__warn_once(_Atomic int *once, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The runtime's own fatal end, once it has said why: the trace under way
 * is written (its end named by why) and the process aborts, with
 * SIGABRT's default action so that fault.c adds no crash report.
 * Async-signal-safe. */
GORO_HIDDEN __attribute__((noreturn, cold)) void goro__fatal_abort(const char *why);

#endif
