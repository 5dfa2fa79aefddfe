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
 *            monitor's preemption requests, blocked calls, lost Ps,
 *            and reserved coroutines' new periods, throttles and misses
 *            (args.g names the coroutine; any thread's track may have
 *            them: the one that started the period or queued it);
 *   (2, id)  coroutine id: "running" / "runnable" / "waiting: <what>"
 *            slices, one after the other; a flow arrow from the slice of
 *            the coroutine that spawned or woke it to its next run;
 *   (3, 0)   the monitor thread, (3, tid) threads outside the runtime.
 * Every track's slices are complete events ("X") written in time order
 * and never overlapping (a start is clamped to the previous end), so they
 * nest trivially whatever small skew the per-thread clocks show.
 * Timestamps are microseconds from the trace's start, to the nanosecond.
 *
 * The writer may run in a signal handler (a crash, an abort: trace.c), on
 * any thread, while other threads go on. So it is async-signal-safe: no
 * stdio, no malloc, no locks. Its text goes through a fixed buffer to
 * write(2), numbers are formatted here, and its tables are mapped with
 * mmap. Only one write runs at a time (trace.c's claim), which is what
 * lets the buffer be static.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "debug/debug.h"

enum { CO_UNKNOWN, CO_RUNNING, CO_RUNNABLE, CO_WAITING, CO_ENDED };

/* Times are nanoseconds from the trace's start. */
struct co {
    uint64_t id;
    uint64_t since, last_end;       /* its state's start; its last slice's end */
    uint64_t flow;                  /* the arrow that ends at its next run */
    uint64_t obj;                   /* what it waits on */
    int worker;
    uint8_t st, wait;
    char name[32];
};

struct track {                      /* one ring's thread */
    int pid, tid;
    uint64_t run_g;                 /* running there, 0: none */
    uint64_t run_since, last_end;
    bool idle;
    uint64_t idle_since;
};

#define OUT_SIZE (1 << 16)
static char out_buf[OUT_SIZE];      /* one write at a time (trace.c) */

struct writer {
    int fd;
    size_t len;                     /* bytes of out_buf not yet written */
    int err;                        /* the first failed write's errno */
    bool first;
    double scale;                   /* nanoseconds per tick */
    uint64_t t0;
    struct co *co;                  /* entries; co[0] unused */
    size_t nco, capco;
    uint32_t *index;                /* open addressing: entry numbers */
    size_t capindex;
    uint64_t flows;
    bool oom;
};

/* ---- memory: from the kernel, zeroed (no malloc in a signal handler) ---- */

static void *mem_get(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void mem_put(void *p, size_t size)
{
    if (p)
        munmap(p, size);
}

/* ---- text out ---- */

static void out_flush(struct writer *w)
{
    const char *s = out_buf;
    size_t n = w->len;
    while (n && !w->err) {
        ssize_t k = write(w->fd, s, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            w->err = k < 0 ? errno : EIO;
        else
            s += k, n -= (size_t)k;
    }
    w->len = 0;
}

static void out(struct writer *w, const char *s, size_t n)
{
    while (n) {
        if (w->len == OUT_SIZE)
            out_flush(w);
        size_t k = n < OUT_SIZE - w->len ? n : OUT_SIZE - w->len;
        memcpy(out_buf + w->len, s, k);
        w->len += k;
        s += k;
        n -= k;
    }
}

static void out_s(struct writer *w, const char *s)
{
    out(w, s, strlen(s));
}

/* v in decimal (base 10) or lower-case hex (base 16) at d; its length. */
static size_t fmt_u(char *d, uint64_t v, unsigned base)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    for (size_t i = 0; i < n; i++)
        d[i] = tmp[n - 1 - i];
    return n;
}

static void out_u(struct writer *w, uint64_t v)
{
    char d[24];
    out(w, d, fmt_u(d, v, 10));
}

static void out_i(struct writer *w, int64_t v)
{
    if (v < 0)
        out(w, "-", 1);
    out_u(w, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

/* Nanoseconds as microseconds to the nanosecond, as "%.3f" prints them. */
static void out_us(struct writer *w, uint64_t ns)
{
    char frac[4] = { '.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10),
                     (char)('0' + ns % 10) };
    out_u(w, ns / 1000);
    out(w, frac, sizeof frac);
}

/* A line of text being made (a name, an event's args), cut at its size. */
struct txt {
    size_t n;
    char s[128];
};

static void txt_s(struct txt *t, const char *s)
{
    while (*s && t->n < sizeof t->s - 1)
        t->s[t->n++] = *s++;
    t->s[t->n] = 0;
}

static void txt_num(struct txt *t, uint64_t v, unsigned base)
{
    char d[24];
    d[fmt_u(d, v, base)] = 0;
    txt_s(t, d);
}

static void txt_i(struct txt *t, int64_t v)
{
    if (v < 0)
        txt_s(t, "-");
    txt_num(t, v < 0 ? -(uint64_t)v : (uint64_t)v, 10);
}

static void sep(struct writer *w)
{
    out_s(w, w->first ? "\n" : ",\n");
    w->first = false;
}

/* A JSON string's body. */
static void put_text(struct writer *w, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            out(w, e, 2);
        } else if (c < 0x20 || c >= 0x7f) {    /* names are bytes: no UTF-8 promised */
            char e[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4],
                          "0123456789abcdef"[c & 15] };
            out(w, e, 6);
        } else {
            out(w, (const char *)&c, 1);
        }
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
    uint32_t *ix = mem_get(cap * sizeof *ix);
    if (!ix)
        return false;
    for (size_t i = 1; i < w->nco; i++) {
        size_t h = mix(w->co[i].id) & (cap - 1);
        while (ix[h])
            h = (h + 1) & (cap - 1);
        ix[h] = (uint32_t)i;
    }
    mem_put(w->index, w->capindex * sizeof *w->index);
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
        struct co *c = mem_get(cap * sizeof *c);
        if (!c)
            goto oom;
        memcpy(c, w->co, w->nco * sizeof *c);
        mem_put(w->co, w->capco * sizeof *c);
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

static void co_label(const struct co *c, uint64_t id, struct txt *t)
{
    if (c && c->name[0]) {
        txt_s(t, c->name);
        txt_s(t, " (");
        txt_num(t, id, 10);
        txt_s(t, ")");
    } else {
        txt_s(t, "coroutine ");
        txt_num(t, id, 10);
    }
}

/* ,"args":{...} when there are args. */
static void out_args(struct writer *w, const char *args)
{
    if (args) {
        out_s(w, ",\"args\":{");
        out_s(w, args);
        out_s(w, "}");
    }
}

/* "ph":"<ph>",<more>"pid":<pid>,"tid":<tid>,"ts":<ts> */
static void out_head(struct writer *w, const char *ph, const char *more, int pid, uint64_t tid,
                     uint64_t ts)
{
    sep(w);
    out_s(w, "{\"ph\":\"");
    out_s(w, ph);
    out_s(w, "\",");
    out_s(w, more);
    out_s(w, "\"pid\":");
    out_i(w, pid);
    out_s(w, ",\"tid\":");
    out_u(w, tid);
    out_s(w, ",\"ts\":");
    out_us(w, ts);
}

/* A complete slice [start, end) on (pid, tid), after *last_end. args: the
 * inside of a JSON object, or NULL. */
static void slice(struct writer *w, int pid, uint64_t tid, uint64_t start, uint64_t end,
                  uint64_t *last_end, const char *name, const char *args)
{
    if (start < *last_end)
        start = *last_end;
    if (end < start)
        end = start;
    *last_end = end;
    out_head(w, "X", "", pid, tid, start);
    out_s(w, ",\"dur\":");
    out_us(w, end - start);
    out_s(w, ",\"name\":\"");
    put_text(w, name);
    out_s(w, "\"");
    out_args(w, args);
    out_s(w, "}");
}

static void instant(struct writer *w, int pid, uint64_t tid, uint64_t ts, const char *name,
                    const char *args)
{
    out_head(w, "i", "\"s\":\"t\",", pid, tid, ts);
    out_s(w, ",\"name\":\"");
    out_s(w, name);
    out_s(w, "\"");
    out_args(w, args);
    out_s(w, "}");
}

/* ph: "s" (from the waker's slice) or "f" (to the woken one's next). */
static void flow(struct writer *w, const char *ph, uint64_t id, uint64_t tid, uint64_t ts)
{
    sep(w);
    out_s(w, "{\"ph\":\"");
    out_s(w, ph);
    out_s(w, ph[0] == 'f' ? "\",\"bp\":\"e\",\"id\":" : "\",\"id\":");
    out_u(w, id);
    out_s(w, ",\"pid\":2,\"tid\":");
    out_u(w, tid);
    out_s(w, ",\"ts\":");
    out_us(w, ts);
    out_s(w, ",\"cat\":\"wake\",\"name\":\"wake\"}");
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
static void co_close_state(struct writer *w, struct co *c, uint64_t ts)
{
    struct txt name = { 0 }, args = { 0 };
    if (c->st == CO_RUNNABLE) {
        slice(w, 2, c->id, c->since, ts, &c->last_end, "runnable", NULL);
    } else if (c->st == CO_WAITING) {
        txt_s(&name, "waiting: ");
        txt_s(&name, goro__wait_name(c->wait));
        txt_s(&args, "\"object\":\"0x");
        txt_num(&args, c->obj, 16);
        txt_s(&args, "\"");
        slice(w, 2, c->id, c->since, ts, &c->last_end, name.s, c->obj ? args.s : NULL);
    }
}

static void co_run_end(struct writer *w, struct co *c, uint64_t ts)
{
    struct txt args = { 0 };
    txt_s(&args, "\"worker\":");
    txt_i(&args, c->worker);
    slice(w, 2, c->id, c->since, ts, &c->last_end, "running", args.s);
}

/* The worker's slice for the coroutine it ran, ended by `why`. */
static void track_run_end(struct writer *w, struct track *t, uint64_t ts, const char *why)
{
    struct txt name = { 0 }, args = { 0 };
    co_label(co_get(w, t->run_g, false), t->run_g, &name);
    txt_s(&args, "\"coroutine\":");
    txt_num(&args, t->run_g, 10);
    txt_s(&args, ",\"ended\":\"");
    txt_s(&args, why);
    txt_s(&args, "\"");
    slice(w, t->pid, (uint64_t)t->tid, t->run_since, ts, &t->last_end, name.s, args.s);
    t->run_g = 0;
}

static void track_idle_end(struct writer *w, struct track *t, uint64_t ts)
{
    slice(w, t->pid, (uint64_t)t->tid, t->idle_since, ts, &t->last_end, "idle", NULL);
    t->idle = false;
}

/* g is runnable from ts; woken by `by` (a running coroutine) or not. */
static void co_ready(struct writer *w, uint64_t g, uint64_t by, uint64_t ts)
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

/* args, made anew. */
static const char *args_of(struct txt *t, const char *k1, uint64_t v1, const char *k2,
                           uint64_t v2, const char *k3, uint64_t v3)
{
    t->n = 0;
    const char *k[3] = { k1, k2, k3 };
    uint64_t v[3] = { v1, v2, v3 };
    for (int i = 0; i < 3 && k[i]; i++) {
        txt_s(t, i ? ",\"" : "\"");
        txt_s(t, k[i]);
        txt_s(t, "\":");
        txt_num(t, v[i], 10);
    }
    return t->s;
}

/* A reserved coroutine's period: when it starts and its deadline, in ns
 * from this instant (signed: a debt's refill may start one ahead). */
static void dl_period(struct writer *w, const struct track *t, const struct goro_tev *e,
                      uint64_t ts)
{
    struct txt args = { 0 };
    int64_t deadline = (int64_t)e->arg;
    txt_s(&args, "\"g\":");
    txt_num(&args, e->g, 10);
    txt_s(&args, ",\"start_ns\":");
    txt_i(&args, deadline - (int64_t)e->x * 1000);
    txt_s(&args, ",\"deadline_ns\":");
    txt_i(&args, deadline);
    instant(w, t->pid, (uint64_t)t->tid, ts, "deadline: new period", args.s);
}

static void on_event(struct writer *w, struct track *t, const struct goro_tev *e, uint64_t ts)
{
    struct txt args;
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
        struct txt what = { 0 };
        if (e->a == GORO_POST_PARK) {
            txt_s(&what, "wait: ");
            txt_s(&what, goro__wait_name(e->b));
            why = what.s;
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
        instant(w, t->pid, (uint64_t)t->tid, ts,
                e->type == GORO_TEV_IO ? "descriptor ready"
                : e->g ? "timer fired" : "timer fired (function)",
                e->g ? args_of(&args, "coroutine", e->g, NULL, 0, NULL, 0) : NULL);
        if (e->g)
            co_ready(w, e->g, 0, ts);
        break;
    case GORO_TEV_STEAL:
        instant(w, t->pid, (uint64_t)t->tid, ts, "steal",
                args_of(&args, "coroutine", e->g, "from_p", e->x, NULL, 0));
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
        args_of(&args, "p", e->x, "worker", e->arg, NULL, 0);
        instant(w, t->pid, (uint64_t)t->tid, ts, "preemption asked", args.s);
        instant(w, 1, e->arg, ts, "preemption asked", args.s);
        break;
    case GORO_TEV_BLOCKED:
        args_of(&args, "worker", e->arg, NULL, 0, NULL, 0);
        instant(w, t->pid, (uint64_t)t->tid, ts, "blocked in a system call", args.s);
        instant(w, 1, e->arg, ts, "blocked in a system call", args.s);
        break;
    case GORO_TEV_HANDOFF:
        args_of(&args, "p", e->x, "from_worker", e->g, "to_worker", e->arg);
        instant(w, t->pid, (uint64_t)t->tid, ts, "hand-off", args.s);
        instant(w, 1, e->g, ts, "P handed off", args.s);
        break;
    case GORO_TEV_STACK_GC:
        instant(w, t->pid, (uint64_t)t->tid, ts, e->x ? "stacks unmapped" : "stack trimmed",
                args_of(&args, "stacks", e->x, "bytes", e->arg, NULL, 0));
        break;
    case GORO_TEV_DL_THROTTLE:
        instant(w, t->pid, (uint64_t)t->tid, ts, "deadline: throttled",
                args_of(&args, "g", e->g, "wait_ns", e->arg, NULL, 0));
        break;
    case GORO_TEV_DL_MISS:
        instant(w, t->pid, (uint64_t)t->tid, ts, "deadline: missed",
                args_of(&args, "g", e->g, "late_ns", e->arg, NULL, 0));
        break;
    case GORO_TEV_DL_PERIOD:
        dl_period(w, t, e, ts);
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

static uint64_t ns_of(const struct writer *w, uint64_t ticks)
{
    return ticks >= w->t0 ? (uint64_t)((double)(ticks - w->t0) * w->scale + 0.5) : 0;
}

/* {"ph":"M","pid":<pid>,[ "tid":<tid>,]"name":"<what>","args":{"<key>": */
static void meta_head(struct writer *w, int pid, const uint64_t *tid, const char *what,
                      const char *key)
{
    sep(w);
    out_s(w, "{\"ph\":\"M\",\"pid\":");
    out_i(w, pid);
    if (tid) {
        out_s(w, ",\"tid\":");
        out_u(w, *tid);
    }
    out_s(w, ",\"name\":\"");
    out_s(w, what);
    out_s(w, "\",\"args\":{\"");
    out_s(w, key);
    out_s(w, "\":");
}

static void meta_name(struct writer *w, int pid, const uint64_t *tid, const char *what,
                      const char *name)
{
    meta_head(w, pid, tid, what, "name");
    out_s(w, "\"");
    put_text(w, name);
    out_s(w, "\"}}");
}

static void metadata(struct writer *w, struct track *tr, int n)
{
    static const char *const procs[] = { NULL, "goro workers", "goro coroutines",
                                         "goro monitor and threads" };
    for (int p = 1; p <= 3; p++) {
        meta_name(w, p, NULL, "process_name", procs[p]);
        meta_head(w, p, NULL, "process_sort_index", "sort_index");
        out_i(w, p);
        out_s(w, "}}");
    }
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = tr[j].pid == tr[i].pid && tr[j].tid == tr[i].tid;
        if (seen)
            continue;
        struct txt name = { 0 };
        uint64_t tid = (uint64_t)tr[i].tid;    /* >= 0: a number, a thread's id */
        txt_s(&name, tr[i].pid == 1 ? "worker " : tid == 0 ? "monitor" : "thread ");
        if (tr[i].pid == 1 || tid != 0)
            txt_i(&name, tr[i].tid);
        meta_name(w, tr[i].pid == 1 ? 1 : 3, &tid, "thread_name", name.s);
    }
    for (size_t i = 1; i < w->nco; i++) {
        struct txt name = { 0 };
        uint64_t tid = w->co[i].id;
        co_label(&w->co[i], w->co[i].id, &name);
        meta_name(w, 2, &tid, "thread_name", name.s);
        meta_head(w, 2, &tid, "thread_sort_index", "sort_index");
        out_u(w, w->co[i].id);
        out_s(w, "}}");
    }
}

/* ---- the file ---- */

/* Walks the rings' events in time order, then ends what was under way. */
static void events_out(struct writer *w, struct track *tr, struct cursor *cur,
                       struct cursor **heap, const struct goro_trace_ring *v, int n,
                       const struct goro_trace_clock *clk, const char *why)
{
    int nh = 0;
    for (int i = 0; i < n; i++) {
        tr[i].pid = v[i].kind == GORO_TRACK_WORKER ? 1 : 3;
        tr[i].tid = v[i].kind == GORO_TRACK_MONITOR ? 0 : v[i].id;
        cur[i] = (struct cursor){ &v[i], v[i].from, 0 };
        if (v[i].from < v[i].to)
            heap[nh++] = &cur[i];
    }
    for (int i = nh / 2 - 1; i >= 0; i--)
        heap_down(heap, nh, i);
    while (nh > 0) {
        struct cursor *c = heap[0];
        uint64_t t = cursor_ticks(c);
        const struct goro_tev *e = &c->v->ev[c->i & c->v->mask];
        on_event(w, &tr[c->v - v], e, ns_of(w, t));
        c->last = t;
        if (++c->i == c->v->to)
            heap[0] = heap[--nh];
        heap_down(heap, nh, 0);
    }
    /* What was under way at the end ends there. */
    uint64_t end = ns_of(w, clk->t1);
    for (int i = 0; i < n; i++) {
        if (tr[i].run_g)
            track_run_end(w, &tr[i], end, why);
        if (tr[i].idle)
            track_idle_end(w, &tr[i], end);
    }
    for (size_t i = 1; i < w->nco; i++) {
        struct co *c = &w->co[i];
        if (c->st == CO_RUNNING)
            co_run_end(w, c, end);
        else
            co_close_state(w, c, end);
    }
}

int goro__trace_write(const struct goro_trace_out *o, const struct goro_trace_ring *v, int n,
                      const struct goro_trace_clock *clk, uint64_t dropped)
{
    struct writer w = { .fd = o->fd, .first = true, .t0 = clk->t0 };
    w.scale = clk->t1 > clk->t0 ? (double)(clk->ns1 - clk->ns0) / (double)(clk->t1 - clk->t0)
                                : 1.0;
    size_t ntr = ((size_t)n + 1) * sizeof(struct track);
    size_t ncur = ((size_t)n + 1) * sizeof(struct cursor);
    size_t nheap = ((size_t)n + 1) * sizeof(struct cursor *);
    struct track *tr = mem_get(ntr);
    struct cursor *cur = mem_get(ncur);
    struct cursor **heap = mem_get(nheap);
    w.capco = 1024;
    w.co = mem_get(w.capco * sizeof *w.co);
    int err = -ENOMEM;
    if (!tr || !cur || !heap || !w.co || !index_grow(&w))
        goto out;
    w.nco = 1;
    out_s(&w, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    uint64_t events = 0;
    for (int i = 0; i < n; i++)
        events += v[i].to - v[i].from;
    events_out(&w, tr, cur, heap, v, n, clk, o->under_way);
    metadata(&w, tr, n);
    out_s(&w, "\n],\"otherData\":{\"producer\":\"goro\",\"events\":\"");
    out_u(&w, events);
    out_s(&w, "\",\"lost\":\"");
    out_u(&w, dropped);
    out_s(&w, "\",\"coroutines\":\"");
    out_u(&w, w.nco - 1);
    out_s(&w, "\",\"complete\":\"");
    out_s(&w, w.oom ? "no: out of memory" : o->incomplete ? "no: " : "yes");
    if (!w.oom && o->incomplete)
        put_text(&w, o->incomplete);
    out_s(&w, "\",\"ended\":\"");
    put_text(&w, o->ended);
    out_s(&w, "\"}}\n");
    out_flush(&w);
    err = w.err ? -w.err : w.oom ? -ENOMEM : 0;
out:
    mem_put(tr, ntr), mem_put(cur, ncur), mem_put(heap, nheap);
    mem_put(w.co, w.capco * sizeof *w.co);
    mem_put(w.index, w.capindex * sizeof *w.index);
    return err;
}
