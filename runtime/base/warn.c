/* One-time warnings: a condition a person should hear about once, not
 * once per occurrence. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"
#include "debug/debug.h"

void goro__warn_once(_Atomic int *once, const char *fmt, ...)
{
    if (atomic_exchange(once, 1))
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "goro: %s\n", buf);
}

void goro__fatal_abort(const char *why)
{
    goro__trace_die(why);
    signal(SIGABRT, SIG_DFL);
    abort();
}

#ifdef GORO_DEBUG
void goro__assert_failed(const char *cond, const char *file, int line)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "goro: broken rule: %s (%s:%d)\n", cond, file, line);
    ssize_t w = write(2, msg, n > 0 && n < (int)sizeof msg ? (size_t)n : sizeof msg - 1);
    (void)w;
    goro__backtrace_fd(2, NULL);
    goro__fatal_abort("aborted: a broken rule of the runtime");
}
#endif
