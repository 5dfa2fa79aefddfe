/*
 * The wait graph: a snapshot of every coroutine, and of every thread that
 * waits in a goro call from outside the runtime, with what each waits on
 * and who alone can end that wait. The deadlock check (deadlock.c) and
 * goro_leaks (leaks.c) judge it, and print it with the functions below.
 *
 * Edges:
 *   - holder: a mutex's holder, a written rwlock's writer, a once's or a
 *     flight's runner, a joined coroutine. Only it can end the wait.
 *   - members: a group's wait ends when its members do.
 *   - channels: a channel wait, or a select over channels only; anybody
 *     who can reach the channel may end it.
 *   - the outside: a descriptor, an offload, a deadline, a sleep - the
 *     world outside the coroutines ends these.
 *
 * The snapshot is taken while everything runs: the registry is copied
 * under its lock (so no slab goes away meanwhile), then objects are read
 * through goro__copy_guarded, since an object a coroutine waited on a
 * moment ago may be gone. A coroutine may change state after it was
 * copied; the deadlock check makes sure nothing moved (goro__sched_
 * activity) before it believes a snapshot.
 *
 * The arrays live in mappings of their own, not on the heap: the leak scan
 * reads the whole heap for pointers to channels, and must not find the
 * copies made here (goro__waitgraph_each_range).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "sched/sched.h"
#include "debug/debug.h"
#include "wait/waitq.h"

/* Room for need elements in a growable array in a mapping of its own. */
static bool reserve(void **base, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 4096 / elem;
    if (ncap < need)
        ncap = need;
    void *p = mmap(NULL, ncap * elem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return false;
    if (*base) {
        memcpy(p, *base, *cap * elem);     /* all of it: what is used is less */
        munmap(*base, *cap * elem);
    }
    *base = p;
    *cap = ncap;
    return true;
}

static void swap_bytes(unsigned char *a, unsigned char *b, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        unsigned char t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

static void sift_down(unsigned char *base, size_t at, size_t n, size_t size,
                      int (*cmp)(const void *, const void *))
{
    for (size_t child; (child = 2 * at + 1) < n; at = child) {
        if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size) < 0)
            child++;
        if (cmp(base + at * size, base + child * size) >= 0)
            return;
        swap_bytes(base + at * size, base + child * size, size);
    }
}

/* Heapsort, in place: qsort may copy the elements to a buffer on the heap,
 * and the leak scan would find the addresses in that buffer afterwards. */
void goro__sort_in_place(void *base, size_t n, size_t size,
                         int (*cmp)(const void *, const void *))
{
    unsigned char *b = base;
    for (size_t i = n / 2; i-- > 0;)
        sift_down(b, i, n, size, cmp);
    for (size_t end = n; end-- > 1;) {
        swap_bytes(b, b + end * size, size);
        sift_down(b, 0, end, size, cmp);
    }
}

static struct goro_wnode *add_node(struct goro_wgraph *wg)
{
    if (!reserve((void **)&wg->nodes, &wg->cap, (size_t)wg->n + 1, sizeof *wg->nodes)) {
        wg->incomplete = true;
        return NULL;
    }
    struct goro_wnode *v = &wg->nodes[wg->n++];
    memset(v, 0, sizeof *v);
    v->holder_node = -1;
    return v;
}

static void copy_coroutine(struct goro *live, void *arg)
{
    struct goro_wgraph *wg = arg;
    int state = atomic_load_explicit(&live->state, memory_order_acquire);
    /* The rest is read as it is at the moment, unsynchronized: copied
     * first (a snapshot, which TSan is not asked to order). */
    struct goro copy, *g = &copy;
    if (state == GORO_S_FREE || !goro__copy_guarded(g, live, offsetof(struct goro, call)) ||
        (g->flags & (GORO_F_G0 | GORO_F_EXTERNAL)))
        return;
    struct goro_wnode *v = add_node(wg);
    if (!v)
        return;
    v->g = live;
    v->id = g->id;
    memcpy(v->name, g->name, sizeof v->name);
    v->name[sizeof v->name - 1] = '\0';
    v->state = state;
    v->group = g->group;
    v->lo = (uintptr_t)g->lo;
    v->hi = (uintptr_t)g->hi;
    if (state == GORO_S_PARKED || state == GORO_S_RUNNABLE)
        v->sp = (uintptr_t)g->sp;
    if (state == GORO_S_PARKED) {
        v->wait = g->wait;
        v->obj = g->wait_obj;
        v->timed = g->wait_timed;
        v->woken = atomic_load_explicit(&g->wake, memory_order_relaxed) >= GORO_WAKE_DONE;
    }
}

static void copy_outside(struct goro *g, pid_t tid, bool timed, void *arg)
{
    struct goro_wgraph *wg = arg;
    struct goro_wnode *v = add_node(wg);
    if (!v)
        return;
    v->g = g;
    v->tid = tid;
    v->outside = true;
    v->state = GORO_S_PARKED;
    v->timed = timed;
    if (g) {
        v->wait = g->wait;
        v->obj = g->wait_obj;
        /* claimed: woken, whenever its thread gets a CPU to run on */
        v->woken = atomic_load_explicit(&g->wake, memory_order_acquire) >= GORO_WAKE_DONE;
    }
}

static int by_record(const void *a, const void *b)
{
    const struct goro_wnode *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->g, q = (uintptr_t)y->g;
    return p < q ? -1 : p > q;
}

/* The node of record g, or -1. Nodes are sorted by record (build). */
int goro__waitgraph_find(const struct goro_wgraph *wg, const struct goro *g)
{
    int lo = 0, hi = wg->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        uintptr_t at = (uintptr_t)wg->nodes[mid].g;
        if (at == (uintptr_t)g)
            return mid;
        if (at < (uintptr_t)g)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Who holds what v waits on: its node, a thread, or a coroutine that has
 * ended (a lock it never released; its record may serve another since). */
static void resolve_holder(struct goro_wgraph *wg, struct goro_wnode *v)
{
    struct goro *h = NULL;
    uint64_t id = 0;
    enum goro_held held = GORO_HELD_NONE;
    if (v->wait == GORO_W_JOIN) {
        h = (struct goro *)v->obj;
        held = h ? GORO_HELD_CORO : GORO_HELD_NONE;
    } else {
        held = goro__wait_holder(v->wait, v->obj, goro__copy_guarded, &h, &id);
    }
    if (held != GORO_HELD_CORO) {
        v->held = held;
        v->holder_id = held == GORO_HELD_ENDED ? id : 0;   /* a lock it left held */
        return;
    }
    v->holder = h;
    int i = goro__waitgraph_find(wg, h);
    if (i >= 0 && wg->nodes[i].outside) {
        v->held = GORO_HELD_THREAD;
        return;
    }
    if (i >= 0 && (!id || wg->nodes[i].id == id)) {
        v->held = GORO_HELD_CORO;
        v->holder_node = i;
        v->holder_id = wg->nodes[i].id;
        return;
    }
    /* Not a live coroutine now: a thread's stand-in (a thread that holds
     * it and waits for nothing of ours), or a coroutine that has ended. */
    uint8_t flags = 0;
    if (goro__copy_guarded(&flags, &h->flags, sizeof flags) && (flags & GORO_F_EXTERNAL)) {
        v->held = GORO_HELD_THREAD;
        return;
    }
    v->held = GORO_HELD_ENDED;
    v->holder_id = id;
}

/* v's channels, into chans: a channel wait's one, or a select's (asked
 * twice: how many, then into place - never through the heap, where the
 * leak scan would find the copies). */
static void resolve_channels(struct goro_wgraph *wg, struct goro_wnode *v)
{
    v->chan0 = wg->nchans;
    bool chan = v->wait == GORO_W_CHAN_SEND || v->wait == GORO_W_CHAN_RECV;
    int n = chan ? 1 : v->wait == GORO_W_SELECT
        ? goro__select_chans(v->obj, goro__copy_guarded, NULL, 0, &v->records) : 0;
    if (n < 0)
        v->by_outside = true;       /* a descriptor case */
    if (n <= 0)
        return;
    if (!reserve((void **)&wg->chans, &wg->chans_cap, (size_t)wg->nchans + (size_t)n,
                 sizeof *wg->chans)) {
        wg->incomplete = true;
        return;
    }
    if (chan)
        wg->chans[wg->nchans] = v->obj;
    else
        n = goro__select_chans(v->obj, goro__copy_guarded, &wg->chans[wg->nchans], n,
                               &v->records);
    v->nchans = n > 0 ? n : 0;
    wg->nchans += v->nchans;
}

int goro__waitgraph_build(struct goro_wgraph *wg)
{
    memset(wg, 0, sizeof *wg);
    wg->inexact = goro__registry_walk(copy_coroutine, wg, false) != 0;
    goro__outside_waits(copy_outside, wg);
    if (wg->n > 1)
        goro__sort_in_place(wg->nodes, (size_t)wg->n, sizeof *wg->nodes, by_record);
    for (int i = 0; i < wg->n; i++) {
        struct goro_wnode *v = &wg->nodes[i];
        if (v->state != GORO_S_PARKED || !v->g)
            continue;
        switch (v->wait) {
        case GORO_W_IO: case GORO_W_OFFLOAD: case GORO_W_SLEEP:
            v->by_outside = true;
            break;
        default:
            v->by_outside = v->timed;
            break;
        }
        resolve_holder(wg, v);
        resolve_channels(wg, v);
    }
    return wg->incomplete ? -ENOMEM : 0;
}

void goro__waitgraph_free(struct goro_wgraph *wg)
{
    if (wg->nodes)
        munmap(wg->nodes, wg->cap * sizeof *wg->nodes);
    if (wg->chans)
        munmap(wg->chans, wg->chans_cap * sizeof *wg->chans);
    memset(wg, 0, sizeof *wg);
}

void goro__waitgraph_each_range(const struct goro_wgraph *wg,
                                void (*fn)(const void *lo, size_t len, void *arg), void *arg)
{
    if (wg->nodes)
        fn(wg->nodes, wg->cap * sizeof *wg->nodes, arg);
    if (wg->chans)
        fn(wg->chans, wg->chans_cap * sizeof *wg->chans, arg);
}

/* ---- printing ---- */

static void print_who(struct goro_out *o, const struct goro_wnode *v)
{
    if (v->outside) {
        goro__outf(o, "thread %d (outside the runtime)", (int)v->tid);
        return;
    }
    goro__outf(o, "coroutine %llu", (unsigned long long)v->id);
    if (v->name[0])
        goro__outf(o, " \"%s\"", v->name);
}

static void print_wait(struct goro_out *o, const struct goro_wgraph *wg,
                       const struct goro_wnode *v)
{
    if (v->outside && !v->g) {
        goro__outf(o, "goro_shutdown (for every coroutine to end)");
        return;
    }
    if (v->wait == GORO_W_JOIN) {
        goro__outf(o, "join ");
        if (v->holder_node >= 0)
            print_who(o, &wg->nodes[v->holder_node]);
        else
            goro__outf(o, "%p", v->obj);
        return;
    }
    char what[160];
    goro__describe_wait_of(v->wait, v->obj, what, sizeof what);
    goro__outf(o, "%s", what);
}

void goro__waitgraph_print_node(struct goro_out *o, const struct goro_wgraph *wg, int i)
{
    const struct goro_wnode *v = &wg->nodes[i];
    goro__outf(o, "  ");
    print_who(o, v);
    goro__outf(o, " waits: ");
    print_wait(o, wg, v);
    if (v->timed)
        goro__outf(o, " (until a deadline)");
    if (v->wait != GORO_W_JOIN) {
        switch (v->held) {
        case GORO_HELD_CORO:
            goro__outf(o, ", held by ");
            print_who(o, &wg->nodes[v->holder_node]);
            break;
        case GORO_HELD_THREAD:
            goro__outf(o, ", held by a thread outside the runtime");
            break;
        case GORO_HELD_ENDED:
            goro__outf(o, ", held by coroutine %llu, which has ended",
                       (unsigned long long)v->holder_id);
            break;
        default:
            break;
        }
    } else if (v->held == GORO_HELD_ENDED) {
        goro__outf(o, " (ended)");
    }
    goro__outf(o, "\n");
}

/* Cycles of holder edges (each node has at most one, so each cycle is a
 * loop that a walk from any of its nodes comes back to): printed as
 * "cycle: coroutine 1 -> mutex 0x... -> coroutine 2 -> ... -> coroutine 1";
 * returns how many. in_cycle (wg->n bytes, may be NULL) marks their nodes. */
int goro__waitgraph_cycles(struct goro_out *o, const struct goro_wgraph *wg, uint8_t *in_cycle)
{
    int *seen = calloc((size_t)wg->n + 1, sizeof *seen);
    if (!seen)
        return 0;
    int cycles = 0;
    for (int s = 0; s < wg->n; s++) {
        int i = s;
        while (i >= 0 && !seen[i]) {
            seen[i] = s + 1;
            i = wg->nodes[i].holder_node;
        }
        if (i < 0 || seen[i] != s + 1)
            continue;               /* ran out, or into an earlier walk */
        cycles++;
        if (o)
            goro__outf(o, "  cycle: ");
        int j = i;
        do {
            const struct goro_wnode *v = &wg->nodes[j];
            if (in_cycle)
                in_cycle[j] = 1;
            if (o) {
                print_who(o, v);
                goro__outf(o, " -> ");
                if (v->wait != GORO_W_JOIN) {
                    print_wait(o, wg, v);
                    goro__outf(o, " -> ");
                }
            }
            j = v->holder_node;
        } while (j != i);
        if (o) {
            print_who(o, &wg->nodes[i]);
            goro__outf(o, "\n");
        }
    }
    free(seen);
    return cycles;
}
