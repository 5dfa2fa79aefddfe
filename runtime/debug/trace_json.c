/*
 * The execution trace written out: the rings' events (trace.c), merged by
 * time, as a Chrome trace event file (the JSON object format) that
 * ui.perfetto.dev and chrome://tracing open, and tools/goro-trace-svg
 * draws.
 *
 * Tracks (pid, tid):
 *   (1, n)   worker n: one slice per time slice, named after the coroutine
 *            ("ended": why it left), "idle" while the worker sleeps, and
 *            instants: steals, timer fires, ready descriptors, the
 *            monitor's preemption requests, blocked calls, lost Ps;
 *   (2, id)  coroutine id: "running" / "runnable" / "waiting: <what>"
 *            slices, one after the other; a flow arrow from the slice of
 *            the coroutine that spawned or woke it to its next run;
 *   (3, 0)   the monitor thread, (3, tid) threads outside the runtime.
 * Every track's slices are complete events ("X") written in time order
 * and never overlapping (a start is clamped to the previous end), so they
 * nest trivially whatever small skew the per-thread clocks show.
 * Timestamps are microseconds from the trace's start, to the nanosecond.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "debug/debug.h"

enum { CO_UNKNOWN, CO_RUNNING, CO_RUNNABLE, CO_WAITING, CO_ENDED };

struct co {
    uint64_t id;
    double since, last_end;         /* its state's start; its last slice's end */
    uint64_t flow;                  /* the arrow that ends at its next run */
    uint64_t obj;                   /* what it waits on */
    int worker;
    uint8_t st, wait;
    char name[32];
};

struct track {                      /* one ring's thread */
    int pid, tid;
    uint64_t run_g;                 /* running there, 0: none */
    double run_since, last_end;
    bool idle;
    double idle_since;
};

struct writer {
    FILE *f;
    bool first;
    double scale;                   /* microseconds per tick */
    uint64_t t0;
    struct co *co;                  /* entries; co[0] unused */
    size_t nco, capco;
    uint32_t *index;                /* open addressing: entry numbers */
    size_t capindex;
    uint64_t flows;
    bool oom;
};

static void sep(struct writer *w)
{
    fputs(w->first ? "\n" : ",\n", w->f);
    w->first = false;
}

/* A JSON string's body. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);   /* names are bytes: no UTF-8 promised */
        else
            fputc(c, f);
    }
}

/* ---- coroutines by id ---- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    return x ^ (x >> 33);
}

static bool index_grow(struct writer *w)
{
    size_t cap = w->capindex ? w->capindex * 2 : 1024;
    uint32_t *ix = calloc(cap, sizeof *ix);
    if (!ix)
        return false;
    for (size_t i = 1; i < w->nco; i++) {
        size_t h = mix(w->co[i].id) & (cap - 1);
        while (ix[h])
            h = (h + 1) & (cap - 1);
        ix[h] = (uint32_t)i;
    }
    free(w->index);
    w->index = ix;
    w->capindex = cap;
    return true;
}

/* id's entry; made if `make` (NULL when out of memory). */
static struct co *co_get(struct writer *w, uint64_t id, bool make)
{
    if (!id || !w->capindex)
        return NULL;
    size_t h = mix(id) & (w->capindex - 1);
    for (; w->index[h]; h = (h + 1) & (w->capindex - 1))
        if (w->co[w->index[h]].id == id)
            return &w->co[w->index[h]];
    if (!make || w->oom)
        return NULL;
    if (w->nco + 1 > w->capco) {
        size_t cap = w->capco * 2;
        struct co *c = realloc(w->co, cap * sizeof *c);
        if (!c)
            goto oom;
        w->co = c;
        w->capco = cap;
    }
    if (2 * (w->nco + 1) > w->capindex) {
        if (!index_grow(w))
            goto oom;
        h = mix(id) & (w->capindex - 1);
        while (w->index[h])
            h = (h + 1) & (w->capindex - 1);
    }
    struct co *c = &w->co[w->nco];
    memset(c, 0, sizeof *c);
    c->id = id;
    c->worker = -1;
    w->index[h] = (uint32_t)w->nco++;
    return c;
oom:
    w->oom = true;
    return NULL;
}

/* ---- events out ---- */

static void co_label(const struct co *c, uint64_t id, char *buf, size_t len)
{
    if (c && c->name[0])
        snprintf(buf, len, "%s (%" PRIu64 ")", c->name, id);
    else
        snprintf(buf, len, "coroutine %" PRIu64, id);
}

/* A complete slice [start, end) on (pid, tid), after *last_end. args: the
 * inside of a JSON object, or NULL. */
static void slice(struct writer *w, int pid, uint64_t tid, double start, double end,
                  double *last_end, const char *name, const char *args)
{
    if (start < *last_end)
        start = *last_end;
    if (end < start)
        end = start;
    *last_end = end;
    sep(w);
    fprintf(w->f, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":%.3f,\"dur\":%.3f,"
            "\"name\":\"", pid, tid, start, end - start);
    put_text(w->f, name);
    fprintf(w->f, "\"%s%s%s}", args ? ",\"args\":{" : "", args ? args : "", args ? "}" : "");
}

static void instant(struct writer *w, int pid, uint64_t tid, double ts, const char *name,
                    const char *args)
{
    sep(w);
    fprintf(w->f, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":%.3f,"
            "\"name\":\"%s\"%s%s%s}", pid, tid, ts, name, args ? ",\"args\":{" : "",
            args ? args : "", args ? "}" : "");
}

/* ph: "s" (from the waker's slice) or "f" (to the woken one's next). */
static void flow(struct writer *w, const char *ph, uint64_t id, uint64_t tid, double ts)
{
    sep(w);
    fprintf(w->f, "{\"ph\":\"%s\",%s\"id\":%" PRIu64 ",\"pid\":2,\"tid\":%" PRIu64
            ",\"ts\":%.3f,\"cat\":\"wake\",\"name\":\"wake\"}", ph,
            ph[0] == 'f' ? "\"bp\":\"e\"," : "", id, tid, ts);
}

static const char *ended_why(int post)
{
    switch (post) {
    case GORO_POST_YIELD: return "yield";
    case GORO_POST_PARK: return "wait";
    case GORO_POST_EXIT: case GORO_POST_EXIT_JOINED: return "exit";
    case GORO_POST_PREEMPT: return "preempted";
    case GORO_POST_MIGRATE: return "moved (its worker lost the P)";
    default: return "?";
    }
}

/* The slice of c's state that ends at ts (runnable or waiting). */
static void co_close_state(struct writer *w, struct co *c, double ts)
{
    char name[48], args[64];
    if (c->st == CO_RUNNABLE) {
        slice(w, 2, c->id, c->since, ts, &c->last_end, "runnable", NULL);
    } else if (c->st == CO_WAITING) {
        snprintf(name, sizeof name, "waiting: %s", goro__wait_name(c->wait));
        snprintf(args, sizeof args, "\"object\":\"0x%" PRIx64 "\"", c->obj);
        slice(w, 2, c->id, c->since, ts, &c->last_end, name, c->obj ? args : NULL);
    }
}

static void co_run_end(struct writer *w, struct co *c, double ts)
{
    char args[32];
    snprintf(args, sizeof args, "\"worker\":%d", c->worker);
    slice(w, 2, c->id, c->since, ts, &c->last_end, "running", args);
}

/* The worker's slice for the coroutine it ran, ended by `why`. */
static void track_run_end(struct writer *w, struct track *t, double ts, const char *why)
{
    char name[64], args[96];
    co_label(co_get(w, t->run_g, false), t->run_g, name, sizeof name);
    snprintf(args, sizeof args, "\"coroutine\":%" PRIu64 ",\"ended\":\"%s\"", t->run_g, why);
    slice(w, t->pid, (uint64_t)t->tid, t->run_since, ts, &t->last_end, name, args);
    t->run_g = 0;
}

static void track_idle_end(struct writer *w, struct track *t, double ts)
{
    slice(w, t->pid, (uint64_t)t->tid, t->idle_since, ts, &t->last_end, "idle", NULL);
    t->idle = false;
}

/* g is runnable from ts; woken by `by` (a running coroutine) or not. */
static void co_ready(struct writer *w, uint64_t g, uint64_t by, double ts)
{
    struct co *c = co_get(w, g, true);
    if (!c || c->st == CO_RUNNING || c->st == CO_RUNNABLE)
        return;
    co_close_state(w, c, ts);
    c->st = CO_RUNNABLE;
    c->since = ts;
    struct co *waker = co_get(w, by, false);
    if (waker && waker->st == CO_RUNNING) {
        c->flow = ++w->flows;
        flow(w, "s", c->flow, by, ts);
    }
}

static void on_event(struct writer *w, struct track *t, const struct goro_tev *e, double ts)
{
    char args[128];
    struct co *c;
    switch (e->type) {
    case GORO_TEV_SPAWN:
        co_ready(w, e->g, e->arg, ts);  /* new: nothing before to close */
        break;
    case GORO_TEV_NAME:
        if ((c = co_get(w, e->g, true)) && e->c * GORO_TEV_TEXT < sizeof c->name - 1) {
            size_t at = (size_t)e->c * GORO_TEV_TEXT;
            size_t n = sizeof c->name - 1 - at;
            memcpy(c->name + at, (const char *)e + offsetof(struct goro_tev, arg),
                   n < GORO_TEV_TEXT ? n : GORO_TEV_TEXT);
        }
        break;
    case GORO_TEV_RUN:
        if (t->run_g)
            track_run_end(w, t, ts, "?");
        if (t->idle)
            track_idle_end(w, t, ts);
        t->run_g = e->g;
        t->run_since = ts;
        if ((c = co_get(w, e->g, true))) {
            co_close_state(w, c, ts);
            if (c->flow)
                flow(w, "f", c->flow, c->id, ts);
            c->flow = 0;
            c->st = CO_RUNNING;
            c->since = ts;
            c->worker = t->pid == 1 ? t->tid : -1;
        }
        break;
    case GORO_TEV_STOP: {
        const char *why = ended_why(e->a);
        char what[64];
        if (e->a == GORO_POST_PARK) {
            snprintf(what, sizeof what, "wait: %s", goro__wait_name(e->b));
            why = what;
        }
        if (t->run_g == e->g)
            track_run_end(w, t, ts, why);
        if (!(c = co_get(w, e->g, true)))
            break;
        if (c->st == CO_RUNNING)
            co_run_end(w, c, ts);
        c->since = ts;
        c->flow = 0;
        if (e->a == GORO_POST_PARK) {
            c->st = CO_WAITING;
            c->wait = e->b;
            c->obj = ~e->arg;       /* stored inverted (goro__trace_addr) */
        } else {
            c->st = e->a == GORO_POST_EXIT || e->a == GORO_POST_EXIT_JOINED ? CO_ENDED
                                                                           : CO_RUNNABLE;
        }
        break;
    }
    case GORO_TEV_READY:
        co_ready(w, e->g, e->arg, ts);
        break;
    case GORO_TEV_TIMER:
    case GORO_TEV_IO:
        snprintf(args, sizeof args, "\"coroutine\":%" PRIu64, e->g);
        instant(w, t->pid, (uint64_t)t->tid, ts,
                e->type == GORO_TEV_IO ? "descriptor ready"
                : e->g ? "timer fired" : "timer fired (function)", e->g ? args : NULL);
        if (e->g)
            co_ready(w, e->g, 0, ts);
        break;
    case GORO_TEV_STEAL:
        snprintf(args, sizeof args, "\"coroutine\":%" PRIu64 ",\"from_p\":%" PRIu32, e->g, e->x);
        instant(w, t->pid, (uint64_t)t->tid, ts, "steal", args);
        break;
    case GORO_TEV_IDLE:
        if (t->run_g)
            track_run_end(w, t, ts, "?");
        t->idle = true;
        t->idle_since = ts;
        break;
    case GORO_TEV_BUSY:
        if (t->idle)
            track_idle_end(w, t, ts);
        break;
    case GORO_TEV_PREEMPT:
        snprintf(args, sizeof args, "\"p\":%" PRIu32 ",\"worker\":%" PRIu64, e->x, e->arg);
        instant(w, t->pid, (uint64_t)t->tid, ts, "preemption asked", args);
        instant(w, 1, e->arg, ts, "preemption asked", args);
        break;
    case GORO_TEV_BLOCKED:
        snprintf(args, sizeof args, "\"worker\":%" PRIu64, e->arg);
        instant(w, t->pid, (uint64_t)t->tid, ts, "blocked in a system call", args);
        instant(w, 1, e->arg, ts, "blocked in a system call", args);
        break;
    case GORO_TEV_HANDOFF:
        snprintf(args, sizeof args, "\"p\":%" PRIu32 ",\"from_worker\":%" PRIu64
                 ",\"to_worker\":%" PRIu64, e->x, e->g, e->arg);
        instant(w, t->pid, (uint64_t)t->tid, ts, "hand-off", args);
        instant(w, 1, e->g, ts, "P handed off", args);
        break;
    case GORO_TEV_STACK_GC:
        snprintf(args, sizeof args, "\"stacks\":%" PRIu32 ",\"bytes\":%" PRIu64, e->x, e->arg);
        instant(w, t->pid, (uint64_t)t->tid, ts, e->x ? "stacks unmapped" : "stack trimmed",
                args);
        break;
    }
}

/* ---- merging the rings ---- */

struct cursor {
    const struct goro_trace_ring *v;
    uint64_t i;
    uint64_t last;                  /* ticks never go back within a ring */
};

static uint64_t cursor_ticks(struct cursor *c)
{
    uint64_t t = c->v->ev[c->i & c->v->mask].ticks;
    return t < c->last ? c->last : t;
}

static void heap_down(struct cursor **h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < n && cursor_ticks(h[l]) < cursor_ticks(h[m]))
            m = l;
        if (l + 1 < n && cursor_ticks(h[l + 1]) < cursor_ticks(h[m]))
            m = l + 1;
        if (m == i)
            return;
        struct cursor *x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
}

static double us_of(const struct writer *w, uint64_t ticks)
{
    return ticks >= w->t0 ? (double)(ticks - w->t0) * w->scale : 0.0;
}

static void metadata(struct writer *w, struct track *tr, int n)
{
    static const char *const procs[] = { NULL, "goro workers", "goro coroutines",
                                         "goro monitor and threads" };
    for (int p = 1; p <= 3; p++) {
        sep(w);
        fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\","
                "\"args\":{\"name\":\"%s\"}}", p, procs[p]);
        sep(w);
        fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\","
                "\"args\":{\"sort_index\":%d}}", p, p);
    }
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = tr[j].pid == tr[i].pid && tr[j].tid == tr[i].tid;
        if (seen)
            continue;
        sep(w);
        if (tr[i].pid == 1)
            fprintf(w->f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\","
                    "\"args\":{\"name\":\"worker %d\"}}", tr[i].tid, tr[i].tid);
        else if (tr[i].tid == 0)
            fprintf(w->f, "{\"ph\":\"M\",\"pid\":3,\"tid\":0,\"name\":\"thread_name\","
                    "\"args\":{\"name\":\"monitor\"}}");
        else
            fprintf(w->f, "{\"ph\":\"M\",\"pid\":3,\"tid\":%d,\"name\":\"thread_name\","
                    "\"args\":{\"name\":\"thread %d\"}}", tr[i].tid, tr[i].tid);
    }
    for (size_t i = 1; i < w->nco; i++) {
        char name[64];
        co_label(&w->co[i], w->co[i].id, name, sizeof name);
        sep(w);
        fprintf(w->f, "{\"ph\":\"M\",\"pid\":2,\"tid\":%" PRIu64 ",\"name\":\"thread_name\","
                "\"args\":{\"name\":\"", w->co[i].id);
        put_text(w->f, name);
        fprintf(w->f, "\"}}");
        sep(w);
        fprintf(w->f, "{\"ph\":\"M\",\"pid\":2,\"tid\":%" PRIu64 ",\"name\":\"thread_sort_index\","
                "\"args\":{\"sort_index\":%" PRIu64 "}}", w->co[i].id, w->co[i].id);
    }
}

int goro__trace_write(FILE *f, const struct goro_trace_ring *v, int n,
                      const struct goro_trace_clock *clk, uint64_t dropped)
{
    struct writer w = { .f = f, .first = true, .t0 = clk->t0 };
    w.scale = clk->t1 > clk->t0 ? (double)(clk->ns1 - clk->ns0) / 1e3 / (double)(clk->t1 - clk->t0)
                                : 1e-3;
    struct track *tr = calloc((size_t)n + 1, sizeof *tr);
    struct cursor *cur = calloc((size_t)n + 1, sizeof *cur);
    struct cursor **heap = calloc((size_t)n + 1, sizeof *heap);
    w.capco = 1024;
    w.co = malloc(w.capco * sizeof *w.co);
    if (!tr || !cur || !heap || !w.co || !index_grow(&w)) {
        free(tr), free(cur), free(heap), free(w.co), free(w.index);
        return -ENOMEM;
    }
    w.nco = 1;
    static char iobuf[1 << 16];
    setvbuf(f, iobuf, _IOFBF, sizeof iobuf);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);

    int nh = 0;
    uint64_t events = 0;
    for (int i = 0; i < n; i++) {
        tr[i].pid = v[i].kind == GORO_TRACK_WORKER ? 1 : 3;
        tr[i].tid = v[i].kind == GORO_TRACK_MONITOR ? 0 : v[i].id;
        cur[i] = (struct cursor){ &v[i], v[i].from, 0 };
        events += v[i].to - v[i].from;
        if (v[i].from < v[i].to)
            heap[nh++] = &cur[i];
    }
    for (int i = nh / 2 - 1; i >= 0; i--)
        heap_down(heap, nh, i);
    while (nh > 0) {
        struct cursor *c = heap[0];
        uint64_t t = cursor_ticks(c);
        const struct goro_tev *e = &c->v->ev[c->i & c->v->mask];
        on_event(&w, &tr[c->v - v], e, us_of(&w, t));
        c->last = t;
        if (++c->i == c->v->to)
            heap[0] = heap[--nh];
        heap_down(heap, nh, 0);
    }

    /* What was under way at the stop ends there. */
    double end = us_of(&w, clk->t1);
    for (int i = 0; i < n; i++) {
        if (tr[i].run_g)
            track_run_end(&w, &tr[i], end, "(the trace stopped)");
        if (tr[i].idle)
            track_idle_end(&w, &tr[i], end);
    }
    for (size_t i = 1; i < w.nco; i++) {
        struct co *c = &w.co[i];
        if (c->st == CO_RUNNING)
            co_run_end(&w, c, end);
        else
            co_close_state(&w, c, end);
    }
    metadata(&w, tr, n);
    fprintf(f, "\n],\"otherData\":{\"producer\":\"goro\",\"events\":\"%" PRIu64 "\","
            "\"lost\":\"%" PRIu64 "\",\"coroutines\":\"%zu\",\"complete\":\"%s\"}}\n",
            events, dropped, w.nco - 1, w.oom ? "no: out of memory" : "yes");
    int err = w.oom ? -ENOMEM : 0;
    if (fflush(f) != 0 || ferror(f))
        err = -(errno ? errno : EIO);
    free(tr), free(cur), free(heap), free(w.co), free(w.index);
    return err;
}
