/*
 * goro_leaks: coroutines parked for good while the program goes on.
 *
 * On the wait graph (waitgraph.c), a coroutine is live - able to run
 * again some day - if it runs or is runnable, if the world outside may
 * end its wait (a descriptor, a deadline, an offload), or:
 *   - its wait has a holder (a lock's, a once's, a joined coroutine) that
 *     is live or is a thread;
 *   - it waits on a group one of whose members is live;
 *   - it waits on channels one of which is reachable: its address is in
 *     memory outside the stacks of coroutines not known to be live - the
 *     heap, the globals, the threads' stacks (the roots) - or in the stack
 *     of a live coroutine (found live, its stack is read in turn).
 * Waits the graph cannot judge (conditions, semaphores, wait groups, an
 * rwlock held by readers) count as live. Whatever is left is leaked.
 *
 * The scan reads memory with process_vm_readv on the process itself:
 * memory unmapped meanwhile fails the read instead of faulting, and the
 * sanitizers do not see it. Left out: every stack arena and slab (stacks
 * are judged one by one, from their saved sp), the graph's and the scan's
 * own mappings, the workers' stacks, signal stacks and records (skip_
 * workers), mappings of 1 TiB or more (a sanitizer's shadow), and the
 * calling thread's frames below goro_leaks (they hold the addresses being
 * looked for). Pages not in memory are skipped when the system has no
 * swap (they are zero); mincore says which.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"
#include "coro/coro.h"
#include "debug/debug.h"

#define PAGE 4096u
#define READ_CHUNK (64u * 1024)
#define MINCORE_WINDOW (1ull << 30)
#define HUGE_MAPPING (1ull << 40)     /* 1 TiB */

enum { M_CANDIDATE, M_LIVE, M_ENDED };

struct range {
    uintptr_t lo, hi;
};

/* Everything the scan keeps, in mappings of its own (left out of it). */
struct leakscan {
    struct goro_wgraph wg;
    uintptr_t *targets;            /* the candidates' channels, sorted, unique */
    size_t ntargets, targets_cap;
    uint8_t *found;                /* [ntargets] */
    size_t nfound;
    struct range *skip;            /* sorted by lo */
    size_t nskip, skip_cap;
    unsigned char *buf;            /* READ_CHUNK */
    unsigned char *vec;            /* mincore's, one byte per page of a window */
    int *stack;                    /* the worklist of nodes found live */
    size_t nstack;
    /* Who waits on what, by the thing waited on (compressed rows): for
     * target t, waiters[by_target[t] .. by_target[t + 1]); for node u,
     * the nodes it holds for (holder edges) and, if it is a group member,
     * the nodes waiting on its group, in deps[by_node[u] .. by_node[u + 1]). */
    uint32_t *by_target, *waiters;
    uint32_t *by_node, *deps;
    size_t nwaiters, ndeps;
    long *fresh;                   /* targets found and not yet spread */
    size_t nfresh;
    uintptr_t cut;                 /* the caller's frames start here */
    bool swap;                     /* the system swaps: absent pages are not zero */
};

static void *map_array(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void unmap_array(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 1);
}

static void add_skip(const void *lo, size_t len, void *arg)
{
    struct leakscan *s = arg;
    if (s->nskip == s->skip_cap) {
        size_t cap = s->skip_cap ? s->skip_cap * 2 : 1024;
        struct range *r = map_array(cap * sizeof *r);
        if (!r)
            return;                 /* read more: only a slower scan */
        if (s->skip) {
            memcpy(r, s->skip, s->nskip * sizeof *r);
            unmap_array(s->skip, s->skip_cap * sizeof *r);
        }
        s->skip = r;
        s->skip_cap = cap;
    }
    s->skip[s->nskip++] = (struct range){ (uintptr_t)lo, (uintptr_t)lo + len };
}

static void skip_slab(struct goro *g, void *arg)
{
    add_skip(g->map, g->map_size, arg);
}

/* The workers' own stacks, signal stacks and records: only the scheduler
 * runs on them (coroutines have their own), and what it leaves there - the
 * lock of a channel a coroutine parked on, the registers a signal
 * interrupted - are stale copies, not references. */
static void skip_workers(struct leakscan *s)
{
    /* The scheduler's records too: an M keeps the argument of the last
     * park it committed (a channel's lock is at its address). */
    if (goro__sched.ms)
        add_skip(goro__sched.ms, (size_t)goro__sched.ms_cap * sizeof *goro__sched.ms, s);
    if (goro__sched.procs)
        add_skip(goro__sched.procs, (size_t)goro__sched.nprocs * sizeof *goro__sched.procs, s);
    int n;
    struct goro_m *ms = goro__registry_ms(&n);
    for (int i = 0; ms && i < n; i++) {
        if (!__atomic_load_n(&ms[i].tid, __ATOMIC_ACQUIRE))
            continue;
        struct { void *p; size_t len; } alt;    /* the M's own fields (a snapshot) */
        if (goro__copy_guarded(&alt.p, &ms[i].altstack, sizeof alt.p) &&
            goro__copy_guarded(&alt.len, &ms[i].altstack_size, sizeof alt.len) && alt.p)
            add_skip(alt.p, alt.len, s);
        pthread_attr_t a;
        void *lo;
        size_t len;
        if (pthread_getattr_np(ms[i].thread, &a) != 0)
            continue;
        if (pthread_attr_getstack(&a, &lo, &len) == 0)
            add_skip(lo, len, s);
        pthread_attr_destroy(&a);
    }
}

static int by_lo(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int by_addr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* The index of target w, or -1. */
static long target_of(const struct leakscan *s, uintptr_t w)
{
    if (!s->ntargets || w < s->targets[0] || w > s->targets[s->ntargets - 1])
        return -1;
    size_t lo = 0, hi = s->ntargets;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->targets[mid] < w)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->ntargets && s->targets[lo] == w ? (long)lo : -1;
}

static void scan_words(struct leakscan *s, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i + sizeof(uintptr_t) <= n; i += sizeof(uintptr_t)) {
        uintptr_t w;
        memcpy(&w, p + i, sizeof w);
        long t = target_of(s, w);
        if (t >= 0 && !s->found[t]) {
            s->found[t] = 1;
            s->nfound++;
            s->fresh[s->nfresh++] = t;
        }
    }
}

/* Reads [lo, hi) (word-aligned) through the kernel and scans it. */
static void scan_read(struct leakscan *s, uintptr_t lo, uintptr_t hi)
{
    while (lo < hi && s->nfound < s->ntargets) {
        size_t n = hi - lo < READ_CHUNK ? hi - lo : READ_CHUNK;
        struct iovec local = { s->buf, n }, remote = { (void *)lo, n };
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (got > 0)
            scan_words(s, s->buf, (size_t)got);
        /* A failed or short read: a page went away; go on after it. */
        size_t step = got > 0 ? (size_t)got : PAGE - (lo & (PAGE - 1));
        lo += step < n ? step : n;
    }
}

/* [lo, hi) minus the left-out ranges. */
static void scan_unskipped(struct leakscan *s, uintptr_t lo, uintptr_t hi)
{
    size_t i = 0;
    while (i < s->nskip && s->skip[i].hi <= lo)
        i++;
    for (; lo < hi && i < s->nskip && s->skip[i].lo < hi; i++) {
        if (s->skip[i].lo > lo)
            scan_read(s, lo, s->skip[i].lo);
        if (s->skip[i].hi > lo)
            lo = s->skip[i].hi;
    }
    if (lo < hi)
        scan_read(s, lo, hi);
}

/* A mapping of the roots: its resident pages (all pages if the system
 * swaps and it is not huge), minus what is left out. */
static void scan_mapping(struct leakscan *s, uintptr_t lo, uintptr_t hi)
{
    if (s->swap && hi - lo <= (4ull << 30)) {
        scan_unskipped(s, lo, hi);
        return;
    }
    for (uintptr_t w = lo; w < hi && s->nfound < s->ntargets; w += MINCORE_WINDOW) {
        uintptr_t end = hi - w < MINCORE_WINDOW ? hi : w + MINCORE_WINDOW;
        if (mincore((void *)w, end - w, s->vec) != 0) {
            scan_unskipped(s, w, end);
            continue;
        }
        size_t pages = (end - w) / PAGE;
        for (size_t i = 0; i < pages;) {
            if (!(s->vec[i] & 1)) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < pages && (s->vec[j] & 1))
                j++;
            scan_unskipped(s, w + i * PAGE, w + j * PAGE);
            i = j;
        }
    }
}

static bool system_swaps(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return true;
    char line[128];
    unsigned long kb = 1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SwapTotal: %lu kB", &kb) == 1)
            break;
    fclose(f);
    return kb != 0;
}

/* The roots: every readable and writable mapping but the left-out ones;
 * the caller's stack only above its goro_leaks frame. */
static void scan_roots(struct leakscan *s)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) && s->nfound < s->ntargets) {
        unsigned long lo, hi;
        char perms[8], name[256] = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %255[^\n]", &lo, &hi, perms, name) < 3)
            continue;
        if (perms[0] != 'r' || perms[1] != 'w' ||
            strcmp(name, "[vvar]") == 0 || strcmp(name, "[vsyscall]") == 0 ||
            strncmp(name, "/dev/", 5) == 0)
            continue;
        if (hi - lo >= HUGE_MAPPING)
            continue;               /* a sanitizer's shadow, not the program's */
        if (s->cut >= lo && s->cut < hi)
            lo = s->cut & ~(uintptr_t)(sizeof(uintptr_t) - 1);
        scan_mapping(s, lo, hi);
    }
    fclose(f);
}

/* ---- the judgement ---- */

static void make_live(struct leakscan *s, int i)
{
    struct goro_wnode *v = &s->wg.nodes[i];
    if (v->mark == M_LIVE)
        return;
    v->mark = M_LIVE;
    s->stack[s->nstack++] = i;
}

/* The waiters on the targets found since the last call live. */
static void wake_found(struct leakscan *s)
{
    while (s->nfresh) {
        long t = s->fresh[--s->nfresh];
        for (uint32_t k = s->by_target[t]; k < s->by_target[t + 1]; k++)
            make_live(s, (int)s->waiters[k]);
    }
}

/* A live coroutine's stack: from its saved sp, or all of it while it
 * runs (resident pages); for the caller, above its goro_leaks frame. */
static void scan_stack(struct leakscan *s, const struct goro_wnode *v)
{
    if (v->outside || !v->hi || s->nfound == s->ntargets)
        return;
    uintptr_t lo = v->sp ? v->sp : v->lo;
    if (s->cut >= v->lo && s->cut < v->hi)
        lo = s->cut;
    lo &= ~(uintptr_t)(sizeof(uintptr_t) - 1);
    if (v->sp)
        scan_read(s, lo, v->hi);
    else
        scan_mapping(s, lo & ~(uintptr_t)(PAGE - 1), v->hi);
}

/* Whether v's wait is judged at all (else it counts as live). */
static bool judged(const struct goro_wnode *v)
{
    switch (v->wait) {
    case GORO_W_JOIN: case GORO_W_MUTEX: case GORO_W_RWLOCK: case GORO_W_ONCE:
    case GORO_W_FLIGHT:
        return v->held == GORO_HELD_CORO || v->held == GORO_HELD_ENDED;
    case GORO_W_GROUP: case GORO_W_CHAN_SEND: case GORO_W_CHAN_RECV: case GORO_W_SELECT:
        return true;
    default:
        return false;               /* conditions, semaphores, wait groups */
    }
}

/* Candidates, the dead, and the live (onto the worklist). */
static void first_marks(struct leakscan *s)
{
    for (int i = 0; i < s->wg.n; i++) {
        struct goro_wnode *v = &s->wg.nodes[i];
        bool parked = v->state == GORO_S_PARKED && !v->outside;
        v->mark = !parked && v->state == GORO_S_DEAD ? M_ENDED : M_CANDIDATE;
        if (v->mark == M_CANDIDATE && (!parked || v->by_outside || v->woken || !judged(v)))
            make_live(s, i);
    }
}

/* u was found live: what waited on it lives too. */
static void spread(struct leakscan *s, int u)
{
    scan_stack(s, &s->wg.nodes[u]);
    wake_found(s);
    for (uint32_t k = s->by_node[u]; k < s->by_node[u + 1]; k++)
        make_live(s, (int)s->deps[k]);
}

static int by_obj(const void *a, const void *b, void *arg)
{
    const struct goro_wnode *n = arg;
    uintptr_t x = (uintptr_t)n[*(const uint32_t *)a].obj, y = (uintptr_t)n[*(const uint32_t *)b].obj;
    return x < y ? -1 : x > y;
}

/* The group waiters, sorted by group: [*first, *end) of order for grp. */
static void group_range(const struct goro_wnode *n, const uint32_t *order, size_t len,
                        const void *grp, size_t *first, size_t *end)
{
    size_t lo = 0, hi = len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)n[order[mid]].obj < (uintptr_t)grp)
            lo = mid + 1;
        else
            hi = mid;
    }
    *first = *end = lo;
    while (*end < len && n[order[*end]].obj == grp)
        (*end)++;
}

/* The rows of deps: holder edges, and group members to group waiters. */
static int index_deps(struct leakscan *s)
{
    struct goro_wnode *n = s->wg.nodes;
    size_t nn = (size_t)s->wg.n, ngw = 0;
    for (size_t i = 0; i < nn; i++)
        ngw += n[i].mark == M_CANDIDATE && n[i].wait == GORO_W_GROUP;
    uint32_t *gw = map_array((ngw + 1) * sizeof *gw);
    s->by_node = map_array((nn + 1) * sizeof *s->by_node);
    if (!gw || !s->by_node)
        return unmap_array(gw, (ngw + 1) * sizeof *gw), -ENOMEM;
    ngw = 0;
    for (size_t i = 0; i < nn; i++)
        if (n[i].mark == M_CANDIDATE && n[i].wait == GORO_W_GROUP)
            gw[ngw++] = (uint32_t)i;
    qsort_r(gw, ngw, sizeof *gw, by_obj, n);
    /* Count, then fill: by_node[u + 1] counts u's row first. */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (size_t u = 0; u < nn; u++)
                s->by_node[u + 1] += s->by_node[u];
            s->ndeps = s->by_node[nn];
            s->deps = map_array((s->ndeps + 1) * sizeof *s->deps);
            if (!s->deps)
                return unmap_array(gw, (ngw + 1) * sizeof *gw), -ENOMEM;
        }
        uint32_t *fill = pass ? map_array((nn + 1) * sizeof *fill) : NULL;
        if (pass && !fill)
            return unmap_array(gw, (ngw + 1) * sizeof *gw), -ENOMEM;
        for (size_t v = 0; v < nn; v++) {
            int h = n[v].mark == M_CANDIDATE ? n[v].holder_node : -1;
            if (h >= 0) {
                if (pass)
                    s->deps[s->by_node[h] + fill[h]++] = (uint32_t)v;
                else
                    s->by_node[h + 1]++;
            }
            if (!n[v].group)
                continue;
            size_t a, b;
            group_range(n, gw, ngw, n[v].group, &a, &b);
            for (size_t k = a; k < b; k++) {
                if (pass)
                    s->deps[s->by_node[v] + fill[v]++] = gw[k];
                else
                    s->by_node[v + 1]++;
            }
        }
        unmap_array(fill, (nn + 1) * sizeof *fill);
    }
    unmap_array(gw, (ngw + 1) * sizeof *gw);
    return 0;
}

static int collect_targets(struct leakscan *s)
{
    size_t n = 0;
    for (int i = 0; i < s->wg.n; i++)
        if (s->wg.nodes[i].mark == M_CANDIDATE)
            n += (size_t)s->wg.nodes[i].nchans;
    s->targets_cap = n + 1;
    s->targets = map_array(s->targets_cap * sizeof *s->targets);
    s->found = map_array(s->targets_cap);
    s->fresh = map_array(s->targets_cap * sizeof *s->fresh);
    s->by_target = map_array((s->targets_cap + 1) * sizeof *s->by_target);
    s->waiters = map_array(s->targets_cap * sizeof *s->waiters);
    if (!s->targets || !s->found || !s->fresh || !s->by_target || !s->waiters)
        return -ENOMEM;
    for (int i = 0; i < s->wg.n; i++) {
        const struct goro_wnode *v = &s->wg.nodes[i];
        for (int c = 0; v->mark == M_CANDIDATE && c < v->nchans; c++)
            s->targets[s->ntargets++] = (uintptr_t)s->wg.chans[v->chan0 + c];
    }
    goro__sort_in_place(s->targets, s->ntargets, sizeof *s->targets, by_addr);
    size_t u = 0;
    for (size_t i = 0; i < s->ntargets; i++)
        if (!u || s->targets[u - 1] != s->targets[i])
            s->targets[u++] = s->targets[i];
    s->ntargets = u;
    /* The waiters of each target, as rows: count, sum, fill. */
    for (int i = 0; i < s->wg.n; i++) {
        const struct goro_wnode *v = &s->wg.nodes[i];
        for (int c = 0; v->mark == M_CANDIDATE && c < v->nchans; c++)
            s->by_target[target_of(s, (uintptr_t)s->wg.chans[v->chan0 + c]) + 1]++;
    }
    for (size_t t = 0; t < s->ntargets; t++)
        s->by_target[t + 1] += s->by_target[t];
    uint32_t *fill = map_array(s->targets_cap * sizeof *fill);
    if (!fill)
        return -ENOMEM;
    for (int i = 0; i < s->wg.n; i++) {
        const struct goro_wnode *v = &s->wg.nodes[i];
        for (int c = 0; v->mark == M_CANDIDATE && c < v->nchans; c++) {
            long t = target_of(s, (uintptr_t)s->wg.chans[v->chan0 + c]);
            s->waiters[s->by_target[t] + fill[t]++] = (uint32_t)i;
        }
    }
    unmap_array(fill, s->targets_cap * sizeof *fill);
    return 0;
}

static void free_scan(struct leakscan *s)
{
    size_t nn = (size_t)s->wg.n + 1;
    unmap_array(s->targets, s->targets_cap * sizeof *s->targets);
    unmap_array(s->found, s->targets_cap);
    unmap_array(s->fresh, s->targets_cap * sizeof *s->fresh);
    unmap_array(s->by_target, (s->targets_cap + 1) * sizeof *s->by_target);
    unmap_array(s->waiters, s->targets_cap * sizeof *s->waiters);
    unmap_array(s->by_node, nn * sizeof *s->by_node);
    unmap_array(s->deps, (s->ndeps + 1) * sizeof *s->deps);
    unmap_array(s->skip, s->skip_cap * sizeof *s->skip);
    unmap_array(s->buf, READ_CHUNK);
    unmap_array(s->vec, MINCORE_WINDOW / PAGE);
    unmap_array(s->stack, nn * sizeof *s->stack);
    goro__waitgraph_free(&s->wg);
}

/* Judges every node: M_CANDIDATE left at the end means leaked. */
static int judge(struct leakscan *s)
{
    int err = goro__waitgraph_build(&s->wg);
    if (err)
        return err;
    s->buf = map_array(READ_CHUNK);
    s->vec = map_array(MINCORE_WINDOW / PAGE);
    s->stack = map_array(((size_t)s->wg.n + 1) * sizeof *s->stack);
    if (!s->buf || !s->vec || !s->stack)
        return -ENOMEM;
    s->swap = system_swaps();
    first_marks(s);
    if ((err = collect_targets(s)) || (err = index_deps(s)))
        return err;
    goro__stack_space_each(add_skip, s);
    goro__registry_walk(skip_slab, s, false);
    goro__waitgraph_each_range(&s->wg, add_skip, s);
    for (int i = 0; i < s->wg.n; i++)
        if (s->wg.nodes[i].records)
            add_skip(s->wg.nodes[i].obj, s->wg.nodes[i].records, s);
    skip_workers(s);
    add_skip(s->targets, s->targets_cap * sizeof *s->targets, s);
    add_skip(s->found, s->targets_cap, s);
    add_skip(s->fresh, s->targets_cap * sizeof *s->fresh, s);
    add_skip(s->by_target, (s->targets_cap + 1) * sizeof *s->by_target, s);
    add_skip(s->waiters, s->targets_cap * sizeof *s->waiters, s);
    add_skip(s->buf, READ_CHUNK, s);
    add_skip(s->vec, MINCORE_WINDOW / PAGE, s);
    add_skip(s->stack, ((size_t)s->wg.n + 1) * sizeof *s->stack, s);
    add_skip(NULL, 0, s);           /* room for one more, so that the array */
    s->nskip--;                     /* does not move once it lists itself */
    add_skip(s->skip, s->skip_cap * sizeof *s->skip, s);
    qsort(s->skip, s->nskip, sizeof *s->skip, by_lo);
    if (s->ntargets)
        scan_roots(s);
    wake_found(s);
    while (s->nstack)
        spread(s, s->stack[--s->nstack]);
    return 0;
}

static void print_leaks(struct goro_out *o, struct leakscan *s, int n)
{
    goro__outf(o, "goro: %d leaked coroutine%s (parked for good: nothing live can end "
               "the wait)\n", n, n == 1 ? "" : "s");
    uint8_t *in_cycle = calloc((size_t)s->wg.n + 1, 1);
    for (int i = 0; i < s->wg.n; i++) {
        struct goro_wnode *v = &s->wg.nodes[i];
        if (v->mark != M_CANDIDATE)
            continue;
        goro__waitgraph_print_node(o, &s->wg, i);
        for (int c = 0; c < v->nchans; c++)
            goro__outf(o, "    nothing live refers to channel %p\n", s->wg.chans[v->chan0 + c]);
        if (v->holder_node >= 0 && s->wg.nodes[v->holder_node].mark == M_CANDIDATE)
            goro__outf(o, "    which is itself leaked\n");
        goro__backtrace_saved(o, v->g);
    }
    /* The cycles among them (a cycle's nodes are all leaked). */
    for (int i = 0; i < s->wg.n; i++)
        if (s->wg.nodes[i].mark != M_CANDIDATE)
            s->wg.nodes[i].holder_node = -1;
    goro__waitgraph_cycles(o, &s->wg, in_cycle);
    free(in_cycle);
}

static int leaks_out(struct goro_out *o)
{
    struct leakscan s;
    memset(&s, 0, sizeof s);
    s.cut = (uintptr_t)__builtin_frame_address(0);
    int err = judge(&s);
    int n = 0;
    for (int i = 0; !err && i < s.wg.n; i++)
        n += s.wg.nodes[i].mark == M_CANDIDATE;
    if (!err && o && n)
        print_leaks(o, &s, n);
    free_scan(&s);
    return err ? err : n;
}

int goro_leaks(FILE *out)
{
    if (!atomic_load(&goro__sched.started))
        return 0;
    /* The report is built in memory: the registry is walked, and out may
     * be a pipe a coroutine drains (as goro_dump). */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = out ? open_memstream(&text, &len) : NULL;
    struct goro_out o = { .file = mem ? mem : out, .fd = -1 };
    int n = leaks_out(out ? &o : NULL);
    if (mem) {
        if (fclose(mem) == 0)
            fwrite(text, 1, len, out);
        free(text);
    }
    return n;
}

/* goro_dump's line. */
void goro__leaks_dump(struct goro_out *o)
{
    int n = leaks_out(NULL);
    if (n < 0)
        goro__outf(o, "goro: leaks not checked (no memory)\n");
    else if (n == 0)
        goro__outf(o, "goro: no leaked coroutines\n");
    else
        goro__outf(o, "goro: %d leaked coroutine%s (goro_leaks says which)\n", n,
                   n == 1 ? "" : "s");
}
