/*
 * Error objects (goro_err_t): an errno-style code, a message, an optional
 * cause and an optional list of further errors, with the coroutine that
 * made it. A coroutine can end with one (goro_exit_err); its joiner takes
 * it (goro_join_err), and an error nobody takes is freed with the
 * coroutine's record.
 *
 * Ownership is single and moves: whoever holds an error frees it or hands
 * it on (wrap, add, exit). Making one never fails: without memory it is a
 * shared, immutable stand-in with code ENOMEM, which goro_err_free leaves
 * alone, so that a failure is never lost for want of memory to describe it.
 * A plain errno return costs nothing of this.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"

struct goro_err {
    int code;                      /* positive errno value, 0: none given */
    bool stand_in;                 /* the out-of-memory error: never freed */
    uint64_t coroutine;            /* its maker's id, 0 outside a coroutine */
    char coroutine_name[32];
    goro_err_t *cause;             /* owned */
    goro_err_t **items;            /* owned, goro_err_add's */
    size_t n, cap;
    /* A C++ exception that escaped a group member (cxx.c), owned: freed
     * with the error, not copied by goro_err_copy. */
    struct goro__cxx_escaped *escaped;
    char msg[];
};

/* Has no message storage: nothing reads msg of a stand-in (has_msg). */
static goro_err_t out_of_memory = {
    .code = ENOMEM, .stand_in = true,
};

/* Causes without a message: a plain cancel, a deadline (goro_cause). */
static goro_err_t canceled_stand_in = { .code = ECANCELED, .stand_in = true };
static goro_err_t timedout_stand_in = { .code = ETIMEDOUT, .stand_in = true };

const goro_err_t *goro__err_stand_in(int code)
{
    return code == ETIMEDOUT ? &timedout_stand_in : &canceled_stand_in;
}

static bool has_msg(const goro_err_t *e)
{
    return !e->stand_in && e->msg[0];
}

/* The message: fmt formatted, or empty (print then uses strerror). */
static goro_err_t *err_make(int code, const char *fmt, va_list ap)
{
    char *msg = NULL;
    int len = 0;
    if (fmt && (len = vasprintf(&msg, fmt, ap)) < 0)
        return NULL;
    goro_err_t *e = calloc(1, sizeof *e + (size_t)len + 1);
    if (!e) {
        free(msg);
        return NULL;
    }
    e->code = code < 0 ? -code : code;
    if (msg)
        memcpy(e->msg, msg, (size_t)len + 1);
    free(msg);
    struct goro *self = goro__current();
    if (self) {
        e->coroutine = self->id;
        memcpy(e->coroutine_name, self->name, sizeof e->coroutine_name);
    }
    return e;
}

goro_err_t *goro_err_new(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    goro_err_t *e = err_make(code, fmt, ap);
    va_end(ap);
    return e ? e : &out_of_memory;
}

goro_err_t *goro_err_wrap(goro_err_t *cause, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    goro_err_t *e = err_make(code, fmt, ap);
    va_end(ap);
    if (!e)
        return cause ? cause : &out_of_memory;   /* keep the more specific one */
    e->cause = cause;
    return e;
}

int goro_err_add(goro_err_t *list, goro_err_t *e)
{
    if (!list || !e || list == e || list->stand_in)
        return -EINVAL;
    if (list->n == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 4;
        goro_err_t **items = realloc(list->items, cap * sizeof *items);
        if (!items)
            return -ENOMEM;             /* e stays the caller's */
        list->items = items;
        list->cap = cap;
    }
    list->items[list->n++] = e;
    return 0;
}

/* A deep copy, or NULL when memory ran out part way (what was made is
 * freed). The stand-in is shared, not copied. */
static goro_err_t *err_copy(const goro_err_t *e)
{
    if (e->stand_in)
        return (goro_err_t *)e;
    size_t len = strlen(e->msg) + 1;
    goro_err_t *c = calloc(1, sizeof *c + len);
    if (!c)
        return NULL;
    c->code = e->code;
    c->coroutine = e->coroutine;
    memcpy(c->coroutine_name, e->coroutine_name, sizeof c->coroutine_name);
    memcpy(c->msg, e->msg, len);
    if (e->n && !(c->items = calloc(e->n, sizeof *c->items)))
        goto fail;
    c->cap = e->n;
    for (; c->n < e->n; c->n++)
        if (!(c->items[c->n] = err_copy(e->items[c->n])))
            goto fail;
    if (e->cause && !(c->cause = err_copy(e->cause)))
        goto fail;
    return c;
fail:
    goro_err_free(c);
    return NULL;
}

goro_err_t *goro_err_copy(const goro_err_t *e)
{
    if (!e)
        return NULL;
    goro_err_t *c = err_copy(e);
    return c ? c : &out_of_memory;
}

int goro_err_code(const goro_err_t *e)
{
    return e ? e->code : 0;
}

const char *goro_err_msg(const goro_err_t *e)
{
    if (!e)
        return "";
    if (has_msg(e))
        return e->msg;
    return e->code ? strerror(e->code) : "";
}

const goro_err_t *goro_err_cause(const goro_err_t *e)
{
    return e ? e->cause : NULL;
}

size_t goro_err_count(const goro_err_t *e)
{
    return e ? e->n : 0;
}

const goro_err_t *goro_err_at(const goro_err_t *e, size_t i)
{
    return e && i < e->n ? e->items[i] : NULL;
}

uint64_t goro_err_coroutine(const goro_err_t *e)
{
    return e ? e->coroutine : 0;
}

const char *goro_err_coroutine_name(const goro_err_t *e)
{
    return e ? e->coroutine_name : "";
}

/* One error on one line: "<msg>: <strerror> [coroutine <id> <name>]". */
static void print_one(FILE *f, const goro_err_t *e)
{
    fputs(goro_err_msg(e), f);
    if (has_msg(e) && e->code)
        fprintf(f, ": %s", strerror(e->code));
    if (e->coroutine)
        fprintf(f, " [coroutine %llu%s%s]", (unsigned long long)e->coroutine,
                e->coroutine_name[0] ? " " : "", e->coroutine_name);
    fputc('\n', f);
}

static void print_tree(FILE *f, const goro_err_t *e, int depth)
{
    for (; e; e = e->cause) {
        print_one(f, e);
        for (size_t i = 0; i < e->n; i++) {
            fprintf(f, "%*s- ", 2 * depth + 2, "");
            print_tree(f, e->items[i], depth + 2);
        }
        if (e->cause)
            fprintf(f, "%*scaused by: ", 2 * depth + 2, "");
    }
}

int goro_err_print(FILE *f, const goro_err_t *e)
{
    if (!f || !e)
        return -EINVAL;
    print_tree(f, e, 0);
    return ferror(f) ? -EIO : 0;
}

void goro_err_free(goro_err_t *e)
{
    while (e && !e->stand_in) {
        goro_err_t *cause = e->cause;
        for (size_t i = 0; i < e->n; i++)
            goro_err_free(e->items[i]);
        free(e->items);
        if (e->escaped)
            e->escaped->destroy(e->escaped);
        free(e);
        e = cause;
    }
}

goro_err_t *goro__err_take_at_end(struct goro *g, long result)
{
    goro_err_t *e = g->err;
    g->err = NULL;
    if (!e && result < 0)
        e = goro_err_new((int)-result, "returned %ld", result);
    return e;
}

void goro_exit_err(goro_err_t *e)
{
    struct goro *self = goro__current();
    if (!self) {
        fprintf(stderr, "goro: goro_exit_err() called outside a coroutine\n");
        abort();
    }
    goro_err_free(self->err);
    self->err = e;
    goro_exit(e ? -(long)e->code : 0);
}

/* ---- C++: an exception that escaped a group member (cxx.c, goro/cxx.h) ---- */

int goro__err_set_escaped(goro_err_t *e, struct goro__cxx_escaped *x)
{
    if (!e || e->stand_in || e->escaped)
        return -EINVAL;
    e->escaped = x;
    return 0;
}

/* The first exception carried by e, its list items (in order) or its
 * causes, taken from it: the caller owns it. NULL: none. */
struct goro__cxx_escaped *goro__err_take_escaped(goro_err_t *e)
{
    for (; e && !e->stand_in; e = e->cause) {
        struct goro__cxx_escaped *x = e->escaped;
        if (x) {
            e->escaped = NULL;
            return x;
        }
        for (size_t i = 0; i < e->n; i++)
            if ((x = goro__err_take_escaped(e->items[i])))
                return x;
    }
    return NULL;
}
