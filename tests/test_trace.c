/* The execution trace (runtime/debug/trace.c, trace_json.c;
 * docs/debugging.md, "Execution trace"):
 *   - a known run - a parent spawns "alice", who sleeps 1 ms and sends,
 *     five times, and "bob", who receives five values - gives valid JSON
 *     (parsed here by a strict parser of the test's own), slices that
 *     never overlap on any track, a flow for every wake-up, and exactly
 *     the waits, timer fires, wake-ups and spawns that run had; each
 *     worker slice of a coroutine is one of its "running" slices;
 *   - a ring too small for the run keeps its latest events, says how many
 *     it lost, and the file stays well formed;
 *   - bad input: no path, a path that cannot be made, a second start, a
 *     stop with no trace, buffer sizes out of range;
 *   - GORO_TRACE=file traces a program from its start to its shutdown,
 *     and names the cause when the file cannot be made;
 *   - tools/goro-trace-svg draws the known run, and a reserved coroutine
 *     (the deadline class) that misses a deadline and is throttled: its
 *     three periods, their deadlines, the throttled span and the miss;
 *   - a process that dies with a trace under way - the deadlock abort
 *     (GORO_TRACE), a SIGSEGV and an abort() in a coroutine (a trace from
 *     goro_trace_start) - leaves a valid file that has the run up to its
 *     death and says how it ended; a stop racing an abort: the file is
 *     written once, by one of them.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

/* ---- a strict JSON parser: enough to check what the trace writes ---- */

enum jt { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };
struct jv {
    enum jt t;
    double num;
    char *str;                     /* J_STR */
    struct jv *items;              /* J_ARR, J_OBJ (values) */
    char **keys;                   /* J_OBJ */
    size_t n;
};

struct jp {
    const char *s;
    size_t i, len;
    const char *err;
};

static void ws(struct jp *p)
{
    while (p->i < p->len && strchr(" \t\r\n", p->s[p->i]))
        p->i++;
}

static bool lit(struct jp *p, const char *w)
{
    size_t n = strlen(w);
    if (p->len - p->i < n || memcmp(p->s + p->i, w, n) != 0)
        return false;
    p->i += n;
    return true;
}

static bool parse_value(struct jp *p, struct jv *v, int depth);

static bool parse_string(struct jp *p, char **out)
{
    if (p->i >= p->len || p->s[p->i] != '"')
        return p->err = "string expected", false;
    p->i++;
    size_t raw = 0;                /* the text up to the closing quote: no shorter */
    while (p->i + raw < p->len && p->s[p->i + raw] != '"')
        raw += p->s[p->i + raw] == '\\' ? 2 : 1;
    char *b = malloc(raw + 1);
    size_t n = 0;
    while (p->i < p->len && p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c < 0x20) {
            free(b);
            return p->err = "control character in a string", false;
        }
        if (c == '\\') {
            if (p->i >= p->len)
                break;
            char e = p->s[p->i++];
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *k = strchr(from, e);
            if (e == 'u') {
                unsigned u;
                if (p->len - p->i < 4 || sscanf(p->s + p->i, "%4x", &u) != 1) {
                    free(b);
                    return p->err = "bad \\u escape", false;
                }
                p->i += 4;
                c = (unsigned char)(u < 0x100 ? u : '?');
            } else if (k && e) {
                c = (unsigned char)to[k - from];
            } else {
                free(b);
                return p->err = "bad escape", false;
            }
        }
        b[n++] = (char)c;
    }
    if (p->i >= p->len) {
        free(b);
        return p->err = "unterminated string", false;
    }
    p->i++;
    b[n] = 0;
    *out = b;
    return true;
}

static bool parse_number(struct jp *p, struct jv *v)
{
    size_t start = p->i;
    if (p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->len || !strchr("0123456789", p->s[p->i]) || !p->s[p->i])
        return p->err = "number expected", false;
    if (p->s[p->i] == '0' && p->i + 1 < p->len && strchr("0123456789", p->s[p->i + 1]) &&
        p->s[p->i + 1])
        return p->err = "leading zero", false;
    while (p->i < p->len && p->s[p->i] && strchr("0123456789.eE+-", p->s[p->i]))
        p->i++;
    char tmp[64];
    size_t n = p->i - start;
    if (n >= sizeof tmp)
        return p->err = "number too long", false;
    memcpy(tmp, p->s + start, n);
    tmp[n] = 0;
    char *end;
    v->num = strtod(tmp, &end);
    if (*end)
        return p->err = "bad number", false;
    v->t = J_NUM;
    return true;
}

static bool parse_list(struct jp *p, struct jv *v, bool obj, int depth)
{
    char close = obj ? '}' : ']';
    size_t cap = 0;
    p->i++;
    v->t = obj ? J_OBJ : J_ARR;
    ws(p);
    if (p->i < p->len && p->s[p->i] == close) {
        p->i++;
        return true;
    }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 8;
            v->items = realloc(v->items, cap * sizeof *v->items);
            if (obj)
                v->keys = realloc(v->keys, cap * sizeof *v->keys);
        }
        ws(p);
        if (obj) {
            if (!parse_string(p, &v->keys[v->n]))
                return false;
            ws(p);
            if (!lit(p, ":"))
                return p->err = "':' expected", false;
        }
        memset(&v->items[v->n], 0, sizeof v->items[0]);
        if (!parse_value(p, &v->items[v->n], depth + 1)) {
            if (obj)
                free(v->keys[v->n]);
            return false;
        }
        v->n++;
        ws(p);
        if (lit(p, ","))
            continue;
        if (p->i < p->len && p->s[p->i] == close) {
            p->i++;
            return true;
        }
        return p->err = obj ? "',' or '}' expected" : "',' or ']' expected", false;
    }
}

static bool parse_value(struct jp *p, struct jv *v, int depth)
{
    if (depth > 32)
        return p->err = "nested too deep", false;
    ws(p);
    if (p->i >= p->len)
        return p->err = "value expected", false;
    char c = p->s[p->i];
    if (c == '{' || c == '[')
        return parse_list(p, v, c == '{', depth);
    if (c == '"') {
        v->t = J_STR;
        return parse_string(p, &v->str);
    }
    if (lit(p, "true") || lit(p, "false")) {
        v->t = J_BOOL;
        return true;
    }
    if (lit(p, "null")) {
        v->t = J_NULL;
        return true;
    }
    return parse_number(p, v);
}

static void jv_free(struct jv *v)
{
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        jv_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static const struct jv *jget(const struct jv *o, const char *key)
{
    if (!o || o->t != J_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return &o->items[i];
    return NULL;
}

static double jnum(const struct jv *o, const char *key, double dflt)
{
    const struct jv *v = jget(o, key);
    return v && v->t == J_NUM ? v->num : dflt;
}

static const char *jstr(const struct jv *o, const char *key)
{
    const struct jv *v = jget(o, key);
    return v && v->t == J_STR ? v->str : "";
}

/* Reads and parses path into *root; NULL or the parse error. */
static const char *load(const char *path, struct jv *root)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return "cannot open the trace";
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    size_t got = fread(buf, 1, (size_t)len, f);
    fclose(f);
    buf[got] = 0;
    struct jp p = { buf, 0, got, NULL };
    memset(root, 0, sizeof *root);
    bool ok = parse_value(&p, root, 0);
    ws(&p);
    if (ok && p.i != p.len)
        ok = false, p.err = "text after the value";
    static char msg[128];
    if (!ok)
        snprintf(msg, sizeof msg, "invalid JSON at byte %zu: %s", p.i, p.err);
    free(buf);
    return ok ? NULL : msg;
}

/* ---- what the trace says ---- */

struct ev {
    char ph;
    int pid;
    double tid, ts, dur, id;
    const char *name;
    const struct jv *args;
};

struct trace {
    struct jv root;
    struct ev *ev;
    size_t n;
};

static const char *trace_load(const char *path, struct trace *t)
{
    const char *err = load(path, &t->root);
    if (err)
        return err;
    const struct jv *list = jget(&t->root, "traceEvents");
    if (!list || list->t != J_ARR)
        return "no traceEvents array";
    t->ev = calloc(list->n + 1, sizeof *t->ev);
    for (size_t i = 0; i < list->n; i++) {
        const struct jv *o = &list->items[i];
        const char *ph = jstr(o, "ph");
        if (o->t != J_OBJ || strlen(ph) != 1)
            return "an event without ph";
        t->ev[t->n++] = (struct ev){ ph[0], (int)jnum(o, "pid", -1), jnum(o, "tid", -1),
                                     jnum(o, "ts", -1), jnum(o, "dur", -1), jnum(o, "id", -1),
                                     jstr(o, "name"), jget(o, "args") };
    }
    return NULL;
}

static void trace_free(struct trace *t)
{
    jv_free(&t->root);
    free(t->ev);
}

static int cmp_ev(const void *a, const void *b)
{
    const struct ev *x = *(const struct ev *const *)a, *y = *(const struct ev *const *)b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Every track's complete slices are well nested: here, never overlapping
 * (each starts at or after the end of the one before), with a duration,
 * and in microseconds printed to the nanosecond (0.002 for rounding). */
static const char *check_nesting(const struct trace *t)
{
    static char msg[200];
    const struct ev **x = calloc(t->n + 1, sizeof *x);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->ev[i].ph == 'X')
            x[n++] = &t->ev[i];
        else if (!strchr("Mifs", t->ev[i].ph)) {
            free(x);
            return "an event of an unexpected phase";
        }
    }
    qsort(x, n, sizeof *x, cmp_ev);
    const char *err = NULL;
    for (size_t i = 0; i < n && !err; i++) {
        if (x[i]->dur < 0 || x[i]->ts < 0 || x[i]->pid < 1 || x[i]->tid < 0)
            err = "a slice without ts, dur, pid or tid";
        else if (i > 0 && x[i - 1]->pid == x[i]->pid && x[i - 1]->tid == x[i]->tid &&
                 x[i - 1]->ts + x[i - 1]->dur > x[i]->ts + 0.002) {
            snprintf(msg, sizeof msg, "slices overlap on (%d, %.0f): \"%s\" %.3f+%.3f, \"%s\" %.3f",
                     x[i]->pid, x[i]->tid, x[i - 1]->name, x[i - 1]->ts, x[i - 1]->dur,
                     x[i]->name, x[i]->ts);
            err = msg;
        }
    }
    free(x);
    return err;
}

/* The coroutine track whose name starts with name, or -1. */
static double track_of(const struct trace *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].ph == 'M' && t->ev[i].pid == 2 && strcmp(t->ev[i].name, "thread_name") == 0 &&
            strncmp(jstr(t->ev[i].args, "name"), name, strlen(name)) == 0)
            return t->ev[i].tid;
    return -1;
}

static int count(const struct trace *t, char ph, int pid, double tid, const char *name)
{
    int n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->ev[i].ph == ph && t->ev[i].pid == pid && (tid < 0 || t->ev[i].tid == tid) &&
             (!name || strcmp(t->ev[i].name, name) == 0);
    return n;
}

/* A slice of (pid, tid) that starts at ts (to the rounding), or NULL. */
static const struct ev *slice_at(const struct trace *t, int pid, double tid, double ts,
                                 const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].ph == 'X' && t->ev[i].pid == pid && t->ev[i].tid == tid &&
            fabs(t->ev[i].ts - ts) <= 0.002 && (!name || strcmp(t->ev[i].name, name) == 0))
            return &t->ev[i];
    return NULL;
}

/* The "s" and "f" halves of flow id. */
static void flow_ends(const struct trace *t, double id, const struct ev **s, const struct ev **f)
{
    *s = *f = NULL;
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].id == id && (t->ev[i].ph == 's' || t->ev[i].ph == 'f'))
            *(t->ev[i].ph == 's' ? s : f) = &t->ev[i];
}

/* Loads path, which must be valid JSON with well-nested tracks. */
static void load_checked(const char *path, struct trace *t)
{
    const char *err = trace_load(path, t);
    ck_assert_msg(err == NULL, "%s", err);
    err = check_nesting(t);
    ck_assert_msg(err == NULL, "%s", err);
}

static char *temp_path(const char *what)
{
    static char path[3][64];
    static int k;
    char *p = path[k++ % 3];
    snprintf(p, sizeof path[0], "/tmp/goro-trace-%s-%d.json", what, (int)getpid());
    return p;
}

/* ---- the known run ---- */

#define ROUNDS 5
static goro_chan_t *run_ch;

static void alice(void)
{
    for (int i = 0; i < ROUNDS; i++) {
        if (goro_sleep(GORO_MSEC) != 0)
            t_fail("alice: sleep failed");
        if (goro_chan_send(run_ch, &i) != 0)
            t_fail("alice: send failed");
    }
}

static void bob(void)
{
    for (int i = 0; i < ROUNDS; i++) {
        int v;
        if (goro_chan_recv(run_ch, &v) != 1 || v != i)
            t_fail("bob: receive %d failed", i);
    }
}

static void parent(void)
{
    goro_t *a, *b;
    goro_attr_t aa = { .name = "alice" }, ba = { .name = "bob" };
    if (goro_go(&a, &aa, alice) != 0 || goro_go(&b, &ba, bob) != 0) {
        t_fail("parent: spawn failed");
        return;
    }
    goro_join(a, NULL);
    goro_join(b, NULL);
}

static void known_run(const char *path, const goro_trace_attr_t *attr)
{
    run_ch = t_chan_new(sizeof(int), 0);
    ck_assert_int_eq(goro_trace_start(path, attr), 0);
    goro_t *p;
    goro_attr_t pa = { .name = "parent" };
    ck_assert_int_eq(goro_go(&p, &pa, parent), 0);
    ck_assert_int_eq(goro_join(p, NULL), 0);
    ck_assert_int_eq(goro_trace_stop(), 0);
    ck_assert_ptr_null(t_failed());
    ck_assert_int_eq(goro_chan_free(run_ch), 0);
}

/* "timer fired" events of coroutine g. */
static int timers_fired(const struct trace *t, double g)
{
    int n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->ev[i].ph == 'i' && strcmp(t->ev[i].name, "timer fired") == 0 &&
             jnum(t->ev[i].args, "coroutine", -1) == g;
    return n;
}

/* Worker slices of coroutine g that ended with a reason starting with why. */
static int ended_with(const struct trace *t, double g, const char *why)
{
    int n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->ev[i].ph == 'X' && t->ev[i].pid == 1 && jnum(t->ev[i].args, "coroutine", -1) == g &&
             strncmp(jstr(t->ev[i].args, "ended"), why, strlen(why)) == 0;
    return n;
}

/* Flows that start on track `from` and end on track `to`. */
static int flows_between(const struct trace *t, double from, double to)
{
    int n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct ev *s, *f;
        if (t->ev[i].ph != 's')
            continue;
        flow_ends(t, t->ev[i].id, &s, &f);
        n += s && f && s->tid == from && f->tid == to;
    }
    return n;
}

START_TEST(known_run_is_valid_and_matches)
{
    char *path = temp_path("known");
    known_run(path, NULL);
    struct trace t = { 0 };
    load_checked(path, &t);
    const struct jv *other = jget(&t.root, "otherData");
    ck_assert_str_eq(jstr(other, "lost"), "0");
    ck_assert_str_eq(jstr(other, "complete"), "yes");

    double pa = track_of(&t, "parent"), a = track_of(&t, "alice"), b = track_of(&t, "bob");
    ck_assert_msg(pa >= 0 && a >= 0 && b >= 0, "named coroutine tracks missing");
    /* alice: five sleeps, each ended by its timer */
    ck_assert_int_eq(count(&t, 'X', 2, a, "waiting: sleep"), ROUNDS);
    ck_assert_int_eq(timers_fired(&t, a), ROUNDS);
    /* A sleep's deadline is taken during the run before its wait (which
     * starts when the coroutine has left: later, by as much as the thread
     * was held up - 580 us once under qemu): from that run's start to the
     * wake is at least 1 ms (10 us for rounding and the CPUs' skew). */
    for (size_t i = 0; i < t.n; i++) {
        const struct ev *e = &t.ev[i];
        if (e->ph != 'X' || e->pid != 2 || e->tid != a || strcmp(e->name, "waiting: sleep") != 0)
            continue;
        const struct ev *run = NULL;
        for (size_t j = 0; j < t.n && !run; j++)
            if (t.ev[j].ph == 'X' && t.ev[j].pid == 2 && t.ev[j].tid == a &&
                strcmp(t.ev[j].name, "running") == 0 &&
                fabs(t.ev[j].ts + t.ev[j].dur - e->ts) <= 0.002)
                run = &t.ev[j];
        ck_assert_msg(run, "no run of alice ends where her sleep at %.3f begins", e->ts);
        ck_assert_msg(e->ts + e->dur - run->ts >= 990, "a 1 ms sleep ended %.3f us after "
                      "the run that began it started", e->ts + e->dur - run->ts);
    }
    /* five transfers over an unbuffered channel: whoever came first waited
     * each time, and the other one woke it */
    int waits = count(&t, 'X', 2, a, "waiting: chan send") + count(&t, 'X', 2, b, "waiting: chan recv");
    ck_assert_int_eq(waits, ROUNDS);
    ck_assert_int_eq(flows_between(&t, a, b) + flows_between(&t, b, a), ROUNDS);
    /* the spawns: arrows from the parent to each child's first run */
    ck_assert_int_eq(flows_between(&t, pa, a), 1);
    ck_assert_int_eq(flows_between(&t, pa, b), 1);
    /* every flow has both ends, and ends where a run of its coroutine starts */
    for (size_t i = 0; i < t.n; i++) {
        if (t.ev[i].ph != 's' && t.ev[i].ph != 'f')
            continue;
        const struct ev *s, *f;
        flow_ends(&t, t.ev[i].id, &s, &f);
        ck_assert_msg(s && f, "flow %.0f has one end", t.ev[i].id);
        ck_assert_msg(slice_at(&t, 2, f->tid, f->ts, "running"), "flow %.0f ends off a run",
                      f->id);
        ck_assert_msg(s->ts <= f->ts + 0.002, "flow %.0f goes back in time", f->id);
    }
    /* the worker tracks show the same runs as the coroutine tracks */
    int runs = 0, on_workers = 0;
    for (size_t i = 0; i < t.n; i++) {
        const struct ev *e = &t.ev[i];
        if (e->ph == 'X' && e->pid == 2 && strcmp(e->name, "running") == 0) {
            runs++;
            double worker = jnum(e->args, "worker", -1);
            const struct ev *w = slice_at(&t, 1, worker, e->ts, NULL);
            ck_assert_msg(w && jnum(w->args, "coroutine", -1) == e->tid &&
                          fabs(w->dur - e->dur) <= 0.002,
                          "a run of coroutine %.0f at %.3f is not on worker %.0f", e->tid,
                          e->ts, worker);
        }
        if (e->ph == 'X' && e->pid == 1 && strcmp(e->name, "idle") != 0)
            on_workers++;
    }
    ck_assert_int_eq(runs, on_workers);
    /* each coroutine ran once at its start and once after each wait or
     * turn given up, and was runnable before each run */
    double who[] = { pa, a, b };
    for (int k = 0; k < 3; k++) {
        int run = count(&t, 'X', 2, who[k], "running");
        ck_assert_int_eq(run, count(&t, 'X', 2, who[k], "runnable"));
        ck_assert_int_eq(run, 1 + ended_with(&t, who[k], "wait: ") +
                                  ended_with(&t, who[k], "yield") +
                                  ended_with(&t, who[k], "preempted") +
                                  ended_with(&t, who[k], "moved"));
        ck_assert_int_eq(ended_with(&t, who[k], "exit"), 1);
    }
    trace_free(&t);
    unlink(path);
}
END_TEST

/* ---- a ring too small ---- */

/* Passes a token back and forth n times: each pass parks one side and
 * wakes the other (at least three events). */
static goro_chan_t *ping_ch[2];

static void pinger(long n, int side)
{
    for (long i = 0; i < n; i++) {
        long v = i;
        if (side == 0 && goro_chan_send(ping_ch[0], &v) != 0)
            t_fail("pinger: send");
        if (goro_chan_recv(ping_ch[side ^ 1], &v) != 1)
            t_fail("pinger: receive");
        if (side == 1 && goro_chan_send(ping_ch[1], &v) != 0)
            t_fail("pinger: send back");
    }
}

/* A sleep of a nanosecond has ended before the coroutine can park: it
 * parks all the same, every time (its timer fires at once). */
#define NAPS 20

static void napper(void)
{
    for (int i = 0; i < NAPS; i++)
        if (goro_sleep(1) != 0)
            t_fail("napper: sleep failed");
}

START_TEST(tiny_sleeps_park_every_time)
{
    char *path = temp_path("naps");
    t_fail_reset();
    ck_assert_int_eq(goro_trace_start(path, NULL), 0);
    goro_t *g;
    ck_assert_int_eq(goro_go(&g, &(goro_attr_t){ .name = "napper" }, napper), 0);
    ck_assert_int_eq(goro_join(g, NULL), 0);
    ck_assert_int_eq(goro_trace_stop(), 0);
    ck_assert_ptr_null(t_failed());
    struct trace t = { 0 };
    load_checked(path, &t);
    double n = track_of(&t, "napper");
    ck_assert_msg(n >= 0, "the napper's track is missing");
    ck_assert_int_eq(count(&t, 'X', 2, n, "waiting: sleep"), NAPS);
    ck_assert_int_eq(timers_fired(&t, n), NAPS);
    trace_free(&t);
    unlink(path);
}
END_TEST

START_TEST(small_ring_keeps_the_latest_events)
{
    char *path = temp_path("small");
    goro_trace_attr_t attr = { .buffer_size = 64 << 10 };   /* 2048 events a thread */
    ck_assert_int_eq(goro_trace_start(path, &attr), 0);
    ping_ch[0] = t_chan_new(sizeof(long), 0);
    ping_ch[1] = t_chan_new(sizeof(long), 0);
    goro_t *g, *h;
    goro_attr_t ga = { .name = "pinger" };
    long n = t_scale(20000);
    ck_assert_int_eq(goro_go(&g, &ga, pinger, n, 0), 0);
    ck_assert_int_eq(goro_go(&h, NULL, pinger, n, 1), 0);
    ck_assert_int_eq(goro_join(g, NULL), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_int_eq(goro_trace_stop(), 0);
    ck_assert_ptr_null(t_failed());
    ck_assert_int_eq(goro_chan_free(ping_ch[0]), 0);
    ck_assert_int_eq(goro_chan_free(ping_ch[1]), 0);
    struct trace t = { 0 };
    load_checked(path, &t);
    const struct jv *other = jget(&t.root, "otherData");
    long lost = atol(jstr(other, "lost")), kept = atol(jstr(other, "events"));
    /* each thread keeps at most 2048 events; a pass makes at least three */
    ck_assert_msg(lost > 0 && kept > 0 && kept <= 2048 * (goro_workers() + 2),
                  "lost %ld, kept %ld", lost, kept);
    ck_assert_msg(lost + kept >= 3 * n, "lost %ld + kept %ld < %ld", lost, kept, 3 * n);
    /* what is kept is the end of the run: the exits are there */
    bool exit_seen = false;
    for (size_t i = 0; i < t.n; i++)
        exit_seen |= t.ev[i].ph == 'X' && t.ev[i].pid == 1 &&
                     strcmp(jstr(t.ev[i].args, "ended"), "exit") == 0;
    ck_assert_msg(exit_seen, "the run's end is missing");
    trace_free(&t);
    unlink(path);
}
END_TEST

/* ---- bad input ---- */

START_TEST(bad_input_is_refused)
{
    char *path = temp_path("bad");
    ck_assert_int_eq(goro_trace_stop(), -EINVAL);
    ck_assert_int_eq(goro_trace_start(NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_trace_start("", NULL), -EINVAL);
    ck_assert_int_eq(goro_trace_start("/nonexistent-goro-dir/trace.json", NULL), -ENOENT);
    goro_trace_attr_t tiny = { .buffer_size = 1024 }, huge = { .buffer_size = (size_t)1 << 40 };
    ck_assert_int_eq(goro_trace_start(path, &tiny), -EINVAL);
    ck_assert_int_eq(goro_trace_start(path, &huge), -EINVAL);
    ck_assert_int_eq(access(path, F_OK), -1);       /* nothing made for a refusal */
    ck_assert_int_eq(goro_trace_start(path, NULL), 0);
    char *other = temp_path("other");
    ck_assert_int_eq(goro_trace_start(other, NULL), -EBUSY);
    ck_assert_int_eq(access(other, F_OK), -1);
    ck_assert_int_eq(goro_trace_stop(), 0);
    ck_assert_int_eq(goro_trace_stop(), -EINVAL);
    struct trace t = { 0 };
    const char *err = trace_load(path, &t);        /* an empty trace is a trace */
    ck_assert_msg(err == NULL, "%s", err);
    trace_free(&t);
    unlink(path);
}
END_TEST

/* ---- GORO_TRACE ---- */

static void named(void)
{
    goro_set_name("from-the-environment");
    goro_sleep(GORO_MSEC);
}

static int env_child(void *arg)
{
    setenv("GORO_TRACE", (const char *)arg, 1);
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0)
        return 10;
    goro_t *g;
    if (goro_go(&g, NULL, named) != 0 || goro_join(g, NULL) != 0)
        return 11;
    return goro_shutdown() == 0 ? 0 : 12;
}

START_TEST(env_traces_from_start_to_shutdown)
{
    char *path = temp_path("env");
    char out[4096];
    int st = t_run_child(env_child, path, t_timeout(60), out, sizeof out);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d\n%s", st, out);
    struct trace t = { 0 };
    load_checked(path, &t);
    double g = track_of(&t, "from-the-environment");
    ck_assert_msg(g >= 0, "the renamed coroutine's track is missing");
    ck_assert_int_eq(count(&t, 'X', 2, g, "waiting: sleep"), 1);
    trace_free(&t);
    unlink(path);
    /* a file that cannot be made: one line naming it and the cause; the
     * program runs on */
    st = t_run_child(env_child, "/nonexistent-goro-dir/t.json", t_timeout(60), out, sizeof out);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d\n%s", st, out);
    ck_assert_msg(strstr(out, "goro: GORO_TRACE=/nonexistent-goro-dir/t.json: cannot trace: "
                              "No such file or directory\n"), "%s", out);
}
END_TEST

/* ---- a trace that outlives its process ---- */

enum death { DIE_DEADLOCK, DIE_SEGV, DIE_ABORT };
static const char *const death_names[] = { "deadlock", "segv", "abort" };

struct death_run {
    enum death how;
    const char *path;
};

static int *volatile nowhere;       /* a page nobody may touch */
static goro_chan_t *never_ch;

static void sleeper(void)
{
    goro_sleep(GORO_MSEC);
}

static void crasher(enum death how)
{
    goro_sleep(GORO_MSEC);          /* an event of its own before the death */
    if (how == DIE_SEGV)
        *nowhere = 1;
    abort();
}

static void stuck(void)
{
    int v;
    goro_chan_recv(never_ch, &v);   /* nobody sends: the deadlock */
}

/* A trace, a coroutine that sleeps and ends, then the death: a deadlock
 * with the trace from GORO_TRACE, the others from goro_trace_start. */
static int death_child(void *arg)
{
    const struct death_run *d = arg;
    if (d->how == DIE_DEADLOCK)
        setenv("GORO_TRACE", d->path, 1);
    /* not NULL: UBSan would end the process first, without a signal */
    nowhere = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0)
        return 10;
    if (d->how != DIE_DEADLOCK && goro_trace_start(d->path, NULL) != 0)
        return 11;
    goro_t *g;
    if (goro_go(&g, &(goro_attr_t){ .name = "before" }, sleeper) != 0 || goro_join(g, NULL) != 0)
        return 12;
    if (goro_chan_new(&never_ch, sizeof(int), 0) != 0)
        return 13;
    int err = d->how == DIE_DEADLOCK
        ? goro_go(&g, &(goro_attr_t){ .name = "victim" }, stuck)
        : goro_go(&g, &(goro_attr_t){ .name = "victim" }, crasher, d->how);
    if (err != 0)
        return 14;
    goro_join(g, NULL);             /* never returns */
    printf("join returned\n");
    return 15;
}

static void death_leaves_a_trace(enum death how, const char *test)
{
    if (how == DIE_DEADLOCK && (t_valgrind() || t_slow())) {
        t_skip(test, "the deadlock check is not run here (see test_deadlock.c)");
        return;
    }
#ifdef T_TSAN
    if (how == DIE_DEADLOCK) {
        t_skip(test, "TSan's own thread: no deadlock is reported (see test_deadlock.c)");
        return;
    }
    /* TSan takes the SIGSEGV, and its report on a coroutine's stack ends in
     * "nested bug in the same thread": an exit that runs no callback. With
     * TSAN_OPTIONS=handle_segv=0 goro's handler gets it and writes. */
    if (how == DIE_SEGV) {
        t_skip(test, "TSan exits on a SIGSEGV without a death callback");
        return;
    }
#endif
    struct death_run d = { how, temp_path(death_names[how]) };
    unlink(d.path);
    static char out[1 << 16];
    int st = t_run_child(death_child, &d, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %.4000s", out);
    /* under ASan its own report ends a SIGSEGV with an exit status */
    ck_assert_msg(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0 &&
                                      WEXITSTATUS(st) < 10), "status %#x: %.4000s", st, out);
    ck_assert_msg(!strstr(out, "join returned"), "%.4000s", out);
    struct stat sb;
    ck_assert_int_eq(stat(d.path, &sb), 0);
    ck_assert_msg(sb.st_size > 0, "the trace is empty after the %s; the child said:\n%.4000s",
                  death_names[how], out);
    struct trace t = { 0 };
    load_checked(d.path, &t);
    double before = track_of(&t, "before"), victim = track_of(&t, "victim");
    ck_assert_msg(before >= 0 && victim >= 0, "the coroutines' tracks are missing");
    ck_assert_int_eq(count(&t, 'X', 2, before, "waiting: sleep"), 1);
    ck_assert_int_eq(count(&t, 'X', 2, victim,
                           how == DIE_DEADLOCK ? "waiting: chan recv" : "waiting: sleep"), 1);
    ck_assert_int_eq(count(&t, 'X', 2, victim, "running"), how == DIE_DEADLOCK ? 1 : 2);
    const char *ended = jstr(jget(&t.root, "otherData"), "ended");
    const char *want = how == DIE_DEADLOCK ? "aborted: deadlock"
                       : how == DIE_SEGV ? "signal SIGSEGV" : "signal SIGABRT";
#ifdef T_ASAN
    if (how == DIE_SEGV)
        want = "sanitizer report";  /* ASan's handler reports, then ends it */
#endif
    ck_assert_msg(strcmp(ended, want) == 0, "otherData.ended: \"%s\", not \"%s\"", ended, want);
    trace_free(&t);
    unlink(d.path);
}

START_TEST(deadlock_abort_keeps_the_trace)
{
    death_leaves_a_trace(DIE_DEADLOCK, "deadlock_abort_keeps_the_trace");
}
END_TEST

START_TEST(segv_keeps_the_trace)
{
    death_leaves_a_trace(DIE_SEGV, "segv_keeps_the_trace");
}
END_TEST

START_TEST(abort_keeps_the_trace)
{
    death_leaves_a_trace(DIE_ABORT, "abort_keeps_the_trace");
}
END_TEST

/* ---- a stop racing a fatal end: one of them writes ---- */

static atomic_int abort_spin, stop_spin;      /* loop rounds before each */

static void late_abort(void)
{
    for (int i = 0; i < atomic_load(&abort_spin); i++)
        __asm__ volatile("" ::: "memory");
    abort();
}

/* The stop on the main thread, an abort on a worker, each after a spin;
 * prints what the stop returned. */
static int race_child(void *arg)
{
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0 ||
        goro_trace_start((const char *)arg, NULL) != 0)
        return 10;
    goro_t *g;
    if (goro_go(&g, &(goro_attr_t){ .name = "before" }, sleeper) != 0 || goro_join(g, NULL) != 0 ||
        goro_go(&g, NULL, late_abort) != 0)
        return 11;
    for (int i = 0; i < atomic_load(&stop_spin); i++)
        __asm__ volatile("" ::: "memory");
    printf("stop=%d\n", goro_trace_stop());
    goro_join(g, NULL);             /* never returns */
    return 12;
}

START_TEST(stop_racing_an_abort_writes_once)
{
    char *path = temp_path("race");
    static char out[1 << 16];
    int by_stop = 0, by_abort = 0;
    char cancelled[32];
    snprintf(cancelled, sizeof cancelled, "stop=%d\n", -ECANCELED);
    uint32_t rnd = 7;
    for (int round = 0; round < t_scale(20); round++) {
        atomic_store(&abort_spin, (int)(t_rnd(&rnd) % 100000));
        atomic_store(&stop_spin, (int)(t_rnd(&rnd) % 400000));
        unlink(path);
        int st = t_run_child(race_child, path, t_timeout(30), out, sizeof out);
        ck_assert_msg(st != -1 && !WIFEXITED(st), "status %#x: %.4000s", st, out);
        struct trace t = { 0 };
        load_checked(path, &t);
        const char *ended = jstr(jget(&t.root, "otherData"), "ended");
        if (strcmp(ended, "stopped") == 0) {
            /* the abort may end the process after the stop wrote but
             * before the child printed what it returned */
            ck_assert_msg(strstr(out, "stop=0\n") || !strstr(out, "stop="), "%.4000s", out);
            by_stop++;
        } else {
            ck_assert_msg(strcmp(ended, "signal SIGABRT") == 0, "ended: %s", ended);
            ck_assert_msg(strstr(out, cancelled) || !strstr(out, "stop="), "%.4000s", out);
            by_abort++;
        }
        ck_assert_msg(track_of(&t, "before") >= 0, "the first coroutine is missing");
        trace_free(&t);
    }
    unlink(path);
    fprintf(stderr, "stop_racing_an_abort_writes_once: written by the stop %d times, "
            "by the abort %d times\n", by_stop, by_abort);
}
END_TEST

/* ---- tools/goro-trace-svg ---- */

START_TEST(svg_tool_draws_the_known_run)
{
    if (t_slow() || access("tools/goro-trace-svg", R_OK) != 0 ||
        system("python3 -c pass >/dev/null 2>&1") != 0) {
        t_skip("svg_tool_draws_the_known_run",
               "needs python3 and tools/ (run from the source tree; not in slow runs)");
        return;
    }
    char *path = temp_path("svg"), svg[80], cmd[256];
    known_run(path, NULL);
    snprintf(svg, sizeof svg, "%s.svg", path);
    snprintf(cmd, sizeof cmd, "python3 tools/goro-trace-svg %s %s 2>&1", path, svg);
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(svg, "r");
    ck_assert_ptr_nonnull(f);
    enum { TEXT_MAX = 1 << 20 };
    char *text = malloc(TEXT_MAX);
    ck_assert_ptr_nonnull(text);
    size_t n = fread(text, 1, TEXT_MAX - 1, f);
    fclose(f);
    text[n] = 0;
    ck_assert_msg(strncmp(text, "<?xml", 5) == 0 && strstr(text, "<svg") &&
                  strstr(text, "</svg>"), "not an SVG document");
    ck_assert_msg(strstr(text, ">worker 0<") && strstr(text, ">alice (") && strstr(text, ">bob ("),
                  "the worker and coroutine rows are missing");
    ck_assert_msg(!strstr(text, "class=\"dl-"), "deadline marks without a reservation");
    /* well-formed XML, by python's own parser */
    snprintf(cmd, sizeof cmd, "python3 -c 'import sys, xml.dom.minidom as m; "
             "m.parse(sys.argv[1])' %s", svg);
    ck_assert_int_eq(system(cmd), 0);
    /* --reserved with none: refused, saying why */
    snprintf(cmd, sizeof cmd, "python3 tools/goro-trace-svg --reserved %s %s 2>&1 | "
             "grep -q 'no reserved coroutines'", path, svg);
    ck_assert_int_eq(system(cmd), 0);
    free(text);
    unlink(svg);
    unlink(path);
}
END_TEST

/* A reserved coroutine (1 ms every 4 ms, due at 2) whose first job
 * spins 3 ms where it cannot be preempted: it ends that job late (a
 * miss), and the 2 ms it overran are a debt - its next period, when it
 * wakes at 4 ms, starts with -1 ms, so it is throttled until 8, where
 * the refill pays the debt two periods on (deadline.md). Three periods:
 * the spawn's, the wake-up's, the refill's. On the real clock: the trace's
 * own. A host that holds it up past 4 ms makes goro_dl_next start the
 * next period at once, with the debt, and the yield throttles it: the
 * same three periods, one throttle, one miss. */
static _Atomic int64_t overrunner_due;     /* its last deadline */

/* CPU time of the calling thread (what a budget is charged). */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * GORO_SEC + ts.tv_nsec;
}

static void overrunner(void)
{
    /* 3 ms of CPU, not of the clock: a budget is charged for CPU time,
     * and a busy host would leave a 3 ms spin less than the 1 ms budget */
    goro_preempt_disable();
    int64_t w0 = goro_now();
    int64_t from = thread_cpu_ns();
    while (thread_cpu_ns() - from < 3 * GORO_MSEC)
        ;
    int64_t w1 = goro_now();
    if (goro_dl_next() != 0)
        t_fail("overrunner: goro_dl_next");
    goro_preempt_enable();
    goro_yield();
    goro_dl_stats_t s;
    if (goro_dl_stats(NULL, &s) != 0 || s.misses != 1 || s.throttles != 1)
        t_fail("overrunner: %llu misses, %llu throttles, %llu periods; the spin took %lld us",
               (unsigned long long)s.misses, (unsigned long long)s.throttles,
               (unsigned long long)s.periods, (long long)(w1 - w0) / 1000);
    atomic_store(&overrunner_due, s.abs_deadline);
}

/* The drawing's window ends with the last slice: the parent outlives the
 * last deadline (the refill's, some periods after the reserved one's end). */
static void dl_parent(void)
{
    goro_dl_t dl = { GORO_MSEC, 2 * GORO_MSEC, 4 * GORO_MSEC };
    goro_attr_t attr = { .name = "overrunner", .deadline = &dl };
    goro_t *h;
    if (goro_go(&h, &attr, overrunner) != 0) {
        t_fail("dl_parent: spawn");
        return;
    }
    goro_join(h, NULL);
    goro_sleep_until(atomic_load(&overrunner_due) + GORO_MSEC);
}

/* Occurrences of needle in text. */
static int occurrences(const char *text, const char *needle)
{
    int n = 0;
    for (const char *at = text; (at = strstr(at, needle)); at++)
        n++;
    return n;
}

START_TEST(svg_tool_draws_a_reserved_coroutine)
{
    if (t_slow() || access("tools/goro-trace-svg", R_OK) != 0 ||
        system("python3 -c pass >/dev/null 2>&1") != 0) {
        t_skip("svg_tool_draws_a_reserved_coroutine",
               "needs python3 and tools/ (run from the source tree; not in slow runs)");
        return;
    }
    char *path = temp_path("dlsvg"), svg[80], cmd[256];
    snprintf(svg, sizeof svg, "%s.svg", path);
    ck_assert_int_eq(goro_trace_start(path, NULL), 0);
    goro_t *p;
    ck_assert_int_eq(goro_go(&p, NULL, dl_parent), 0);
    ck_assert_int_eq(goro_join(p, NULL), 0);
    ck_assert_int_eq(goro_trace_stop(), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    snprintf(cmd, sizeof cmd, "python3 tools/goro-trace-svg --reserved %s %s 2>&1", path, svg);
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(svg, "r");
    ck_assert_ptr_nonnull(f);
    enum { TEXT_MAX = 1 << 20 };
    char *text = malloc(TEXT_MAX);
    ck_assert_ptr_nonnull(text);
    size_t n = fread(text, 1, TEXT_MAX - 1, f);
    fclose(f);
    text[n] = 0;
    /* its row alone: no worker, not the parent */
    ck_assert_msg(strstr(text, "text-anchor=\"end\">overrunner (") && !strstr(text, ">worker 0<"),
                  "the reserved row alone is not drawn");
    ck_assert_int_eq(occurrences(text, "class=\"dl-period\""), 3);
    ck_assert_int_eq(occurrences(text, "class=\"dl-deadline\""), 3);
    ck_assert_int_eq(occurrences(text, "class=\"dl-throttled\""), 1);
    ck_assert_int_eq(occurrences(text, "class=\"dl-miss\""), 1);
    snprintf(cmd, sizeof cmd, "python3 -c 'import sys, xml.dom.minidom as m; "
             "m.parse(sys.argv[1])' %s", svg);
    ck_assert_int_eq(system(cmd), 0);
    /* without --reserved: the workers, then its row, then the others */
    snprintf(cmd, sizeof cmd, "python3 tools/goro-trace-svg %s %s 2>&1", path, svg);
    ck_assert_int_eq(system(cmd), 0);
    f = fopen(svg, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(text, 1, TEXT_MAX - 1, f);
    fclose(f);
    text[n] = 0;
    const char *label = "text-anchor=\"end\">overrunner (";  /* a row's label */
    char *worker = strstr(text, ">worker 0<"), *res = strstr(text, label);
    ck_assert_msg(worker && res && worker < res && occurrences(text, label) == 1,
                  "the workers and the reserved row are not drawn in order");
    ck_assert_int_eq(occurrences(text, "class=\"dl-miss\""), 1);
    free(text);
    unlink(svg);
    unlink(path);
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = t_runtime_tcase(s, "record", 60);
    tcase_add_test(tc, known_run_is_valid_and_matches);
    tcase_add_test(tc, tiny_sleeps_park_every_time);
    tcase_add_test(tc, small_ring_keeps_the_latest_events);
    tcase_add_test(tc, bad_input_is_refused);
    tcase_add_test(tc, svg_tool_draws_the_known_run);
    tcase_add_test(tc, svg_tool_draws_a_reserved_coroutine);
    tc = t_tcase(s, "env", 90);
    tcase_add_test(tc, env_traces_from_start_to_shutdown);
    tcase_add_test(tc, deadlock_abort_keeps_the_trace);
    tcase_add_test(tc, segv_keeps_the_trace);
    tcase_add_test(tc, abort_keeps_the_trace);
    tcase_add_test(tc, stop_racing_an_abort_writes_once);
    return s;
}
