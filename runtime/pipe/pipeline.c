/*
 * Pipelines (docs/pipelines.md): a source, stages joined by bounded
 * queues, a sink; a budget of worker coroutines that the allocator moves
 * between stages after every batch.
 *
 * A run is a group of coroutines made by goro_pipeline_run's caller: the
 * source, the sink and the W workers. One mutex (p->mu) guards the whole
 * state; a worker holds it only to choose a stage, take a batch and hand
 * the batch's outputs on, never while a stage's function runs.
 *
 * Invariants, under p->mu:
 *   1. Every item inside the pipeline - next_seq - left of them - is in
 *      exactly one place: a stage's queue, a worker's batch, or the output
 *      ring (or heap, ordered); an item leaves when the sink takes it or
 *      it is dropped or fails. The source makes no item while the window
 *      is full, so no ring or heap (window slots each) overflows.
 *   2. A stage is done when the one before it is done (the source, for the
 *      first), its queue is empty and no worker serves it: nothing can
 *      reach it again. done never turns off, and the run's work is over
 *      when the last stage is done.
 *   3. A worker waits on `work` only when the allocator gives it no
 *      stage. Whoever may have made work for it (a push, a queue falling
 *      below its bound, a stage done) calls wake(), which signals one idle
 *      worker while work is left - also right after a worker took its
 *      batch - so that no work is left with every worker asleep. The one
 *      woken always finds work: the allocator hands out all W seats while
 *      any stage has work, and the other workers hold at most W - 1 (the
 *      static rule has no such guarantee, so there wake() wakes them all).
 *   4. Ordered: the heap holds every item and hole that has left the last
 *      stage and not reached the sink, keyed by its number; the sink takes
 *      the top only when its number is next_out. A dropped or failed item
 *      leaves a hole so that the numbers stay dense.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pipe/pipe.h"

#define DEFAULT_WINDOW 1024
#define DEFAULT_CAPACITY 64
#define MAX_WINDOW (1 << 20)
#define MAX_WORKERS 4096
#define BATCH_TARGET_NS 100000.0  /* an adaptive batch: about this much work */
#define SINK_BATCH 16
#define ERRORS_KEPT 100           /* SKIP_FAILED lists at most this many */

char goro__pipe_hole;

enum { PICK_NONE = -1, PICK_END = -2 };

struct pipe_worker {
    struct goro_pipeline *p;
    int id;
    struct pipe_item *buf;         /* its batch */
};

/* The state must stay whole through a cancel, and a cancelled coroutine's
 * goro_mutex_lock fails at once while the lock is held: it is retried,
 * with a turn for the holder in between (the lock is held only for short
 * spans, never across a stage's function, the source or the sink). */
void goro__pipe_lock(struct goro_pipeline *p)
{
    while (goro_mutex_lock(&p->mu) != 0)
        goro_yield();
}

/* ---- state ---- */

static void let_go(struct goro_pipeline *p, void *item)
{
    if (item != PIPE_HOLE && item != GORO_PIPELINE_DROPPED && p->attr.discard)
        p->attr.discard(item, p->attr.discard_arg);
}

static bool all_done(const struct goro_pipeline *p)
{
    return p->stage[p->nstages - 1].done;
}

/* Invariant 2, in one pass from the source down. */
static void mark_done(struct goro_pipeline *p)
{
    bool upstream = p->source_done;
    for (int s = 0; s < p->nstages; s++) {
        struct pipe_stage *st = &p->stage[s];
        if (!st->done && upstream && pipe_ring_len(&st->queue) == 0 && st->seats == 0)
            st->done = true;
        upstream = st->done;
    }
}

/* Stage s can be served: items queued, and room after it (a full next
 * queue holds it back; the sink's side is bounded by the window). */
static bool servable(const struct goro_pipeline *p, int s)
{
    const struct pipe_stage *st = &p->stage[s];
    if (pipe_ring_len(&st->queue) == 0)
        return false;
    if (s + 1 == p->nstages)
        return true;
    const struct pipe_stage *next = &p->stage[s + 1];
    return pipe_ring_len(&next->queue) < (uint32_t)next->capacity;
}

static bool any_servable(const struct goro_pipeline *p)
{
    for (int s = 0; s < p->nstages; s++)
        if (servable(p, s))
            return true;
    return false;
}

static bool source_room(const struct goro_pipeline *p)
{
    return p->next_seq - p->left < (uint64_t)p->attr.window &&
           pipe_ring_len(&p->stage[0].queue) < (uint32_t)p->stage[0].capacity;
}

static bool sink_ready(const struct goro_pipeline *p)
{
    if (p->attr.ordered)
        return p->nheap && p->heap[0].seq == p->left;
    return pipe_ring_len(&p->outq) > 0;
}

/* Invariant 3: after any change, wakes whoever may now go on. */
static void wake(struct goro_pipeline *p)
{
    bool ended = all_done(p);
    mark_done(p);
    if (all_done(p)) {
        if (!ended)
            goro_cond_broadcast(&p->work);
    } else if (p->idle > 0 && any_servable(p)) {
        /* Under an allocator any woken worker finds a stage below its
         * share (the allocator gives out every seat while work exists, and
         * the others hold fewer); a static worker may not serve the stage
         * that has the work, so all are woken. */
        if (p->attr.rule == GORO_PIPELINE_STATIC)
            goro_cond_broadcast(&p->work);
        else
            goro_cond_signal(&p->work);
    }
    if (p->sink_waits && (sink_ready(p) || all_done(p)))
        goro_cond_signal(&p->out);
    if (p->source_waits && source_room(p))
        goro_cond_signal(&p->space);
}

/* ---- choosing a stage ---- */

/* Worker i of W serves stages i, i+W, ... (W <= S), or stage i mod S:
 * the one with the most work among them. */
static int pick_static(struct goro_pipeline *p, int id)
{
    int best = PICK_NONE;
    double best_work = 0;
    int step = p->workers <= p->nstages ? p->workers : p->nstages;
    for (int s = id % p->nstages; s < p->nstages; s += step) {
        if (!servable(p, s))
            continue;
        const struct pipe_stage *st = &p->stage[s];
        double w = pipe_ring_len(&st->queue) * (st->service_ns > 0 ? st->service_ns : 1);
        if (w >= best_work) {
            best = s;
            best_work = w;
        }
    }
    return best;
}

/* Asks the allocator for the seats of every stage (its work: queue length
 * times service time; an unmeasured stage counts at the mean of the
 * measured ones) and takes the stage furthest below its share - on a tie
 * the one it served last, then the larger quotient, then the later. */
static int pick(struct goro_pipeline *p, int id, int last)
{
    if (all_done(p))                 /* done flags are current: wake() after every change */
        return PICK_END;
    if (p->attr.rule == GORO_PIPELINE_STATIC)
        return pick_static(p, id);
    double known = 0, work[GORO_PIPELINE_STAGES_MAX];
    int measured = 0, seats[GORO_PIPELINE_STAGES_MAX];
    for (int s = 0; s < p->nstages; s++)
        if (p->stage[s].service_ns > 0) {
            known += p->stage[s].service_ns;
            measured++;
        }
    double prior = measured ? known / measured : 1;
    for (int s = 0; s < p->nstages; s++) {
        const struct pipe_stage *st = &p->stage[s];
        work[s] = servable(p, s) ? pipe_ring_len(&st->queue) *
                                       (st->service_ns > 0 ? st->service_ns : prior)
                                 : 0;
    }
    if (p->attr.rule == GORO_PIPELINE_EXHAUSTIVE)
        goro__pipe_exhaustive(work, p->nstages, p->workers, seats);  /* sized at run */
    else
        goro__pipe_dhondt(work, p->nstages, p->workers, seats);
    p->decisions++;
    int best = PICK_NONE, best_gap = 0;
    double best_q = 0;
    for (int s = 0; s < p->nstages; s++) {
        struct pipe_stage *st = &p->stage[s];
        st->share = seats[s];
        int gap = seats[s] - st->seats;
        if (gap <= 0)
            continue;
        double q = work[s] / (st->seats + 1);
        if (best == PICK_NONE || gap > best_gap ||
            (gap == best_gap && best != last && (s == last || q >= best_q))) {
            best = s;
            best_gap = gap;
            best_q = q;
        }
    }
    return best;
}

/* Items per turn: the stage's fixed batch, or about BATCH_TARGET_NS of
 * work, shared among the workers the allocator gave the stage. */
static int batch_size(const struct goro_pipeline *p, int s)
{
    const struct pipe_stage *st = &p->stage[s];
    long len = pipe_ring_len(&st->queue), b = st->batch;
    if (b == 0) {
        b = st->service_ns > 0 ? (long)(BATCH_TARGET_NS / st->service_ns) : 1;
        long share = st->share > 0 ? st->share : 1;
        long fair = (len + share - 1) / share;
        if (b > fair)
            b = fair;
        if (b > GORO_PIPELINE_BATCH_MAX)
            b = GORO_PIPELINE_BATCH_MAX;
        if (b < 1)
            b = 1;
    }
    return (int)(b < len ? b : len);
}

/* ---- a worker's batch ---- */

static goro_err_t *item_error(struct goro_pipeline *p, const char *what, long code,
                              goro_err_t *cause, uint64_t seq)
{
    int c = code < 0 && code > -4096 ? (int)-code : EINVAL;
    const char *sep = p->name[0] ? ": " : "";
    if (cause)
        return goro_err_wrap(cause, c, "%s%s%s, item %llu", p->name, sep, what,
                             (unsigned long long)seq);
    if (code >= 0)
        return goro_err_new(c, "%s%s%s, item %llu: returned %ld", p->name, sep, what,
                            (unsigned long long)seq, code);
    return goro_err_new(c, "%s%s%s, item %llu", p->name, sep, what, (unsigned long long)seq);
}

/* SKIP_FAILED: counts the failure and keeps its error for the run's list
 * (the first ERRORS_KEPT of them). */
static void note_failure(struct goro_pipeline *p, goro_err_t *e)
{
    p->failed++;
    if (!p->errors)
        p->errors = calloc(ERRORS_KEPT, sizeof *p->errors);
    if (p->errors && p->nerrors < ERRORS_KEPT)
        p->errors[p->nerrors++] = e;
    else
        goro_err_free(e);
}

/* A batch function's call: every item of the batch fails with it, or
 * each slot becomes its output or a hole. */
static int run_batch_fn(struct goro_pipeline *p, struct pipe_stage *st, struct pipe_item *buf,
                        int n, goro_err_t **failure, int *ndropped)
{
    if (goro_cancelled())
        return 0;
    void *items[GORO_PIPELINE_BATCH_MAX];
    for (int i = 0; i < n; i++)
        items[i] = buf[i].item;
    goro_err_t *cause = NULL;
    long r = st->batch_fn(items, n, st->arg, &cause);
    if (r != 0) {
        char what[64];
        snprintf(what, sizeof what, "stage %s, a batch of %d", st->name, n);
        *failure = item_error(p, what, r, cause, buf[0].seq);
    }
    for (int i = 0; i < n; i++) {
        if (r != 0)
            let_go(p, items[i]);
        else if (items[i] == GORO_PIPELINE_DROPPED)
            (*ndropped)++;
        buf[i].item = r != 0 || items[i] == GORO_PIPELINE_DROPPED ? PIPE_HOLE : items[i];
    }
    return r != 0 && p->attr.policy == GORO_PIPELINE_FAIL_FAST ? 0 : n;
}

/* Runs stage s on buf[0..n) without the lock. Each slot ends as its output,
 * or PIPE_HOLE (dropped, or failed and let go of). Returns the number of
 * items done (n unless cancelled or failed fast); a failure goes to *fail
 * (FAIL_FAST) or to skipped[] (SKIP_FAILED). */
static int run_batch(struct goro_pipeline *p, int s, struct pipe_item *buf, int n,
                     goro_err_t **fail, goro_err_t **skipped, int *nskipped, int *ndropped)
{
    struct pipe_stage *st = &p->stage[s];
    bool fast = p->attr.policy == GORO_PIPELINE_FAIL_FAST;
    goro_err_t *e = NULL;
    if (st->batch_fn) {
        int done = run_batch_fn(p, st, buf, n, &e, ndropped);
        if (e && fast)
            *fail = e;
        else if (e)
            skipped[(*nskipped)++] = e;
        return done;
    }
    for (int i = 0; i < n; i++) {
        if (goro_cancelled())
            return i;
        goro_err_t *cause = NULL;
        long r = st->fn(&buf[i].item, st->arg, &cause);
        if (r == 0)
            continue;
        if (r == GORO_PIPELINE_DROP) {
            if (cause)
                goro_err_free(cause);
            (*ndropped)++;
            buf[i].item = PIPE_HOLE;
            continue;
        }
        char what[40];
        snprintf(what, sizeof what, "stage %s", st->name);
        e = item_error(p, what, r, cause, buf[i].seq);
        let_go(p, buf[i].item);
        buf[i].item = PIPE_HOLE;
        if (fast) {
            *fail = e;
            return i;
        }
        skipped[(*nskipped)++] = e;
    }
    return n;
}

/* Hands a batch's outputs on (under p->mu): to the next stage's queue, or
 * to the sink's ring or heap; holes go to the heap (ordered) or leave. */
static void pass_on(struct goro_pipeline *p, int s, const struct pipe_item *buf, int n)
{
    bool last = s + 1 == p->nstages;
    for (int i = 0; i < n; i++) {
        if (buf[i].item == PIPE_HOLE) {
            if (p->attr.ordered)
                goro__pipe_heap_push(p, buf[i]);
            else
                p->left++;
        } else if (!last) {
            goro__pipe_ring_push(&p->stage[s + 1].queue, buf[i]);
        } else if (p->attr.ordered) {
            goro__pipe_heap_push(p, buf[i]);
        } else {
            goro__pipe_ring_push(&p->outq, buf[i]);
        }
    }
}

/* A robust moving average: each batch's time per item moves the average
 * by 1/8 of the difference, the sample first clamped to 4x either way so
 * that one outlier (a page fault storm, a preemption) moves it little,
 * while a lasting change is followed within a few batches. */
static void note_service(struct pipe_stage *st, int64_t ns, int n)
{
    double x = (double)ns / n;
    if (x < 1)
        x = 1;
    if (st->service_ns <= 0) {
        st->service_ns = x;
        return;
    }
    if (x > 4 * st->service_ns)
        x = 4 * st->service_ns;
    if (x < st->service_ns / 4)
        x = st->service_ns / 4;
    st->service_ns += (x - st->service_ns) / 8;
}

static long pipe_worker(void *arg)
{
    struct pipe_worker *w = arg;
    struct goro_pipeline *p = w->p;
    goro_err_t *fail = NULL, *skipped[GORO_PIPELINE_BATCH_MAX];
    /* A batch let go of (stop, below), handed to attr.discard once the
     * mutex is released: the program's code, which may call the pipeline
     * again (goro_pipeline_stats, _cancel) and would wait on the mutex
     * this worker holds. */
    void *gone[GORO_PIPELINE_BATCH_MAX];
    int ngone = 0;
    int last = PICK_NONE;
    goro__pipe_lock(p);
    for (;;) {
        int s = pick(p, w->id, last);
        if (s == PICK_END)
            break;
        if (s == PICK_NONE) {
            p->idle++;
            int r = goro_cond_wait(&p->work, &p->mu);
            p->idle--;
            if (r)
                break;               /* cancelled */
            continue;
        }
        struct pipe_stage *st = &p->stage[s];
        int n = batch_size(p, s);
        for (int i = 0; i < n; i++)
            w->buf[i] = goro__pipe_ring_pop(&st->queue);
        st->seats++;
        last = s;
        wake(p);                     /* room upstream, the source, a next worker */
        goro_mutex_unlock(&p->mu);

        int nskipped = 0, ndropped = 0;
        int64_t t0 = goro_now();
        int done = run_batch(p, s, w->buf, n, &fail, skipped, &nskipped, &ndropped);
        int64_t t1 = goro_now();

        goro__pipe_lock(p);
        st->seats--;
        st->items += (uint64_t)done;
        st->dropped += (uint64_t)ndropped;
        st->failed += (uint64_t)nskipped;
        st->busy_ns += t1 - t0;
        if (done > 0)
            note_service(st, t1 - t0, done);
        for (int i = 0; i < nskipped; i++)
            note_failure(p, skipped[i]);
        if (p->attr.timeline)
            goro__pipe_timeline_batch(p, w->id, s, t0, t1);
        bool stop = done < n || fail;
        if (stop) {
            /* Cancelled, or failed fast: the batch is let go of whole, its
             * slots holes that keep the numbers dense. */
            if (fail) {
                st->failed++;
                p->failed++;
            }
            for (int i = 0; i < n; i++) {
                gone[ngone++] = w->buf[i].item;
                w->buf[i].item = PIPE_HOLE;
            }
        }
        pass_on(p, s, w->buf, n);
        wake(p);
        if (stop)
            break;
        /* The source and the sink share the threads with the workers: a
         * turn for them (and anyone else) between batches. */
        goro_mutex_unlock(&p->mu);
        goro_yield();
        goro__pipe_lock(p);
    }
    goro_mutex_unlock(&p->mu);
    for (int i = 0; i < ngone; i++)
        let_go(p, gone[i]);
    if (fail)
        goro_exit_err(fail);         /* the group cancels the rest */
    return 0;
}

/* ---- the source and the sink ---- */

static long pipe_source(void *arg)
{
    struct goro_pipeline *p = arg;
    for (;;) {
        if (goro_cancelled())
            return 0;
        void *item = NULL;
        long r = p->source(&item, p->source_arg);
        if (r == GORO_PIPELINE_END)
            break;
        if (r != 0) {
            goro__pipe_lock(p);
            uint64_t seq = p->next_seq;
            goro_mutex_unlock(&p->mu);
            goro_exit_err(item_error(p, "source", r, NULL, seq));
        }
        goro__pipe_lock(p);
        while (!source_room(p)) {
            p->source_waits = true;
            int e = goro_cond_wait(&p->space, &p->mu);
            p->source_waits = false;
            if (e) {
                goro_mutex_unlock(&p->mu);
                let_go(p, item);
                return 0;
            }
        }
        goro__pipe_ring_push(&p->stage[0].queue, (struct pipe_item){ p->next_seq++, item });
        wake(p);
        goro_mutex_unlock(&p->mu);
    }
    goro__pipe_lock(p);
    p->source_done = true;
    wake(p);
    goro_mutex_unlock(&p->mu);
    return 0;
}

/* Takes up to `max` items for the sink, in order when ordered; holes are
 * passed over and counted as gone. */
static int sink_take(struct goro_pipeline *p, struct pipe_item *got, int max)
{
    int n = 0;
    while (n < max && sink_ready(p)) {
        struct pipe_item it = p->attr.ordered ? goro__pipe_heap_pop(p) : goro__pipe_ring_pop(&p->outq);
        p->left++;                   /* ordered: sink_ready's next number */
        if (it.item != PIPE_HOLE)
            got[n++] = it;
    }
    return n;
}

static long pipe_sink(void *arg)
{
    struct goro_pipeline *p = arg;
    struct pipe_item got[SINK_BATCH];
    goro_err_t *fail = NULL;
    goro__pipe_lock(p);
    for (;;) {
        int n = sink_take(p, got, SINK_BATCH);
        if (n == 0) {
            wake(p);                 /* holes passed make room for the source */
            if (all_done(p) && !sink_ready(p))
                break;
            p->sink_waits = true;
            int e = goro_cond_wait(&p->out, &p->mu);
            p->sink_waits = false;
            if (e)
                break;
            continue;
        }
        goro_mutex_unlock(&p->mu);
        int i = 0, nfailed = 0;
        goro_err_t *skipped[SINK_BATCH];
        for (; i < n && !goro_cancelled(); i++) {
            long r = 0;
            if (p->sink)
                r = p->sink(got[i].item, p->sink_arg);
            else
                let_go(p, got[i].item);
            if (r == 0)
                continue;
            goro_err_t *e = item_error(p, "sink", r, NULL, got[i].seq);
            if (p->attr.policy == GORO_PIPELINE_FAIL_FAST) {
                fail = e;
                i++;
                break;
            }
            skipped[nfailed++] = e;
        }
        for (int j = i; j < n; j++)
            let_go(p, got[j].item);  /* cancelled, or failed fast */
        goro__pipe_lock(p);
        for (int j = 0; j < nfailed; j++)
            note_failure(p, skipped[j]);
        p->out_items += (uint64_t)(i - nfailed - (fail ? 1 : 0));
        if (fail)
            p->failed++;
        wake(p);
        if (fail || i < n)
            break;
    }
    goro_mutex_unlock(&p->mu);
    if (fail)
        goro_exit_err(fail);
    return 0;
}

/* ---- the public calls ---- */

/* The runtime, running: goro_workers() sizes the default budget. A
 * pipeline starts it with the defaults, as the first go() would; one that
 * runs already (goro_workers() > 0, or -EALREADY from a start that raced
 * another) is what is wanted. */
static int started(void)
{
    if (goro_workers() > 0)
        return 0;
    int err = goro_start(NULL);
    return err == -EALREADY ? 0 : err;
}

int goro_pipeline_new(goro_pipeline_t **out, const goro_pipeline_attr_t *attr)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    goro_pipeline_attr_t a = attr ? *attr : (goro_pipeline_attr_t){ 0 };
    if (a.workers < 0 || a.workers > MAX_WORKERS || a.window < 0 || a.window > MAX_WINDOW ||
        a.rule < GORO_PIPELINE_DHONDT || a.rule > GORO_PIPELINE_STATIC ||
        a.policy < GORO_PIPELINE_FAIL_FAST || a.policy > GORO_PIPELINE_SKIP_FAILED ||
        a.deadline < 0)
        return -EINVAL;
    int err = started();
    if (err)
        return err;
    struct goro_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    if (a.window == 0)
        a.window = DEFAULT_WINDOW;
    if (a.workers == 0)
        a.workers = goro_workers() > 0 ? goro_workers() : 1;
    if (a.name)
        snprintf(p->name, sizeof p->name, "%s", a.name);
    a.name = NULL;                   /* the copy is p->name */
    p->attr = a;
    p->workers = a.workers;
    goro_mutex_init(&p->mu);
    goro_cond_init(&p->work);
    goro_cond_init(&p->space);
    goro_cond_init(&p->out);
    *out = p;
    return 0;
}

int goro_pipeline_stage(goro_pipeline_t *p, const goro_stage_t *stage)
{
    if (!p || !stage || !stage->fn == !stage->batch_fn || stage->batch < 0 ||
        stage->batch > GORO_PIPELINE_BATCH_MAX || stage->capacity < 0)
        return -EINVAL;
    goro__pipe_lock(p);
    int r = p->state != 0 ? -EBUSY : p->nstages == GORO_PIPELINE_STAGES_MAX ? -E2BIG : 0;
    if (r == 0) {
        struct pipe_stage *grown = realloc(p->stage, sizeof *grown * (p->nstages + 1));
        if (!grown) {
            r = -ENOMEM;
        } else {
            p->stage = grown;
            struct pipe_stage *st = &p->stage[p->nstages];
            *st = (struct pipe_stage){ .fn = stage->fn, .batch_fn = stage->batch_fn,
                                       .arg = stage->arg, .batch = stage->batch,
                                       .capacity = stage->capacity ? stage->capacity
                                                                   : DEFAULT_CAPACITY };
            if (stage->name)
                snprintf(st->name, sizeof st->name, "%s", stage->name);
            else
                snprintf(st->name, sizeof st->name, "%d", p->nstages);
            r = p->nstages++;
        }
    }
    goro_mutex_unlock(&p->mu);
    return r;
}

static void free_rings(struct goro_pipeline *p)
{
    for (int s = 0; s < p->nstages; s++) {
        free(p->stage[s].queue.slot);
        p->stage[s].queue = (struct pipe_ring){ 0 };
    }
    free(p->outq.slot);
    p->outq = (struct pipe_ring){ 0 };
    free(p->heap);
    p->heap = NULL;
    p->nheap = 0;
}

static int make_rings(struct goro_pipeline *p)
{
    uint32_t slots = 1;
    while (slots < (uint32_t)p->attr.window)
        slots <<= 1;
    int r = 0;
    for (int s = 0; s < p->nstages && r == 0; s++)
        r = goro__pipe_ring_init(&p->stage[s].queue, slots);
    if (r == 0 && p->attr.ordered) {
        p->heap = malloc(sizeof *p->heap * slots);
        r = p->heap ? 0 : -ENOMEM;
    } else if (r == 0) {
        r = goro__pipe_ring_init(&p->outq, slots);
    }
    return r;
}

/* Everything still inside after the run (cancelled, failed) is let go of. */
static void let_go_all(struct goro_pipeline *p)
{
    for (int s = 0; s < p->nstages; s++)
        while (pipe_ring_len(&p->stage[s].queue))
            let_go(p, goro__pipe_ring_pop(&p->stage[s].queue).item);
    if (p->outq.slot)
        while (pipe_ring_len(&p->outq))
            let_go(p, goro__pipe_ring_pop(&p->outq).item);
    for (uint32_t i = 0; i < p->nheap; i++)
        let_go(p, p->heap[i].item);
    p->nheap = 0;
}

static int spawn_all(struct goro_pipeline *p, struct pipe_worker *w)
{
    char name[48];
    const char *base = p->name[0] ? p->name : "pipeline";
    goro_attr_t a = { .name = name, .group = p->group, .stack_size = p->attr.stack_size };
    snprintf(name, sizeof name, "%s source", base);
    int r = goro_spawn(NULL, &a, pipe_source, p);
    if (r == 0) {
        snprintf(name, sizeof name, "%s sink", base);
        r = goro_spawn(NULL, &a, pipe_sink, p);
    }
    for (int i = 0; i < p->workers && r == 0; i++) {
        snprintf(name, sizeof name, "%s worker %d", base, i);
        r = goro_spawn(NULL, &a, pipe_worker, &w[i]);
    }
    return r;
}

/* SKIP_FAILED: one error for the run, listing the failures kept. */
static goro_err_t *failures(struct goro_pipeline *p)
{
    const char *sep = p->name[0] ? ": " : "";
    int code = p->nerrors ? goro_err_code(p->errors[0]) : EIO;
    goro_err_t *all = goro_err_new(code, "%s%s%llu of %llu items failed", p->name, sep,
                                   (unsigned long long)p->failed,
                                   (unsigned long long)p->next_seq);
    for (int i = 0; i < p->nerrors; i++)
        if (goro_err_add(all, p->errors[i]) != 0)
            goro_err_free(p->errors[i]);
    p->nerrors = 0;
    return all;
}

static int check_run(const struct goro_pipeline *p, goro_source_fn *source)
{
    if (!source || p->state != 0 || p->nstages == 0)
        return -EINVAL;
    if (p->attr.rule == GORO_PIPELINE_EXHAUSTIVE &&
        goro__pipe_allocations(p->nstages, p->workers) > PIPE_EXHAUSTIVE_MAX)
        return -E2BIG;
    return 0;
}

int goro_pipeline_run(goro_pipeline_t *p, goro_source_fn *source, void *source_arg,
                      goro_sink_fn *sink, void *sink_arg, goro_err_t **err)
{
    if (err)
        *err = NULL;
    if (!p)
        return -EINVAL;
    goro__pipe_lock(p);
    int r = check_run(p, source);
    if (r == 0) {
        p->state = 1;                /* no stage is added, no second run */
        p->source = source;
        p->source_arg = source_arg;
        p->sink = sink;
        p->sink_arg = sink_arg;
    }
    goro_mutex_unlock(&p->mu);
    if (r)
        return r;

    size_t per = GORO_PIPELINE_BATCH_MAX;
    struct pipe_worker *w = calloc((size_t)p->workers, sizeof *w);
    struct pipe_item *bufs = calloc((size_t)p->workers * per, sizeof *bufs);
    r = w && bufs ? make_rings(p) : -ENOMEM;
    if (r == 0 && p->attr.timeline)
        r = goro__pipe_timeline_init(p);
    if (r == 0)
        r = goro_group_new(&p->group, &(goro_group_attr_t){ .name = p->name,
                                                             .deadline = p->attr.deadline });
    goro_err_t *gerr = NULL;
    if (r == 0) {
        for (int i = 0; i < p->workers; i++)
            w[i] = (struct pipe_worker){ p, i, bufs + (size_t)i * per };
        goro__pipe_lock(p);
        p->t_start = goro_now();
        goro_mutex_unlock(&p->mu);
        r = spawn_all(p, w);
        if (r)
            goro_group_cancel(p->group);
        goro_group_wait(p->group, NULL, &gerr);
    }

    goro__pipe_lock(p);
    p->state = 2;
    p->t_end = goro_now();
    goro_group_t *g = p->group;
    p->group = NULL;
    goro_mutex_unlock(&p->mu);
    if (g)
        goro_group_free(g);
    let_go_all(p);
    free_rings(p);
    free(bufs);
    free(w);

    goro_err_t *e = gerr;
    if (r == -ECANCELED && e)
        r = 0;      /* the group failed (or was cancelled) while being spawned: its error */
    if (r && e) {                    /* spawning failed, and we cancelled it */
        goro_err_free(e);
        e = NULL;
    }
    if (!r && !e && p->failed && p->attr.policy == GORO_PIPELINE_SKIP_FAILED)
        e = failures(p);
    if (e) {
        r = -goro_err_code(e);
        if (err)
            *err = e;
        else
            goro_err_free(e);
    }
    return r;
}

int goro_pipeline_cancel(goro_pipeline_t *p)
{
    if (!p)
        return -EINVAL;
    goro__pipe_lock(p);
    int r = p->state == 1 && p->group ? goro_group_cancel(p->group) : -ESRCH;
    goro_mutex_unlock(&p->mu);
    return r;
}

int goro_pipeline_stats(goro_pipeline_t *p, goro_pipeline_stats_t *st,
                        goro_stage_stats_t *stages, int n)
{
    if (!p || n < 0 || (n > 0 && !stages))
        return -EINVAL;
    goro__pipe_lock(p);
    int64_t end = p->state == 2 ? p->t_end : goro_now();
    double secs = p->t_start ? (double)(end - p->t_start) / 1e9 : 0;
    uint64_t dropped = 0;
    for (int s = 0; s < p->nstages; s++)
        dropped += p->stage[s].dropped;
    if (st) {
        *st = (goro_pipeline_stats_t){
            .state = p->state, .stages = p->nstages, .workers = p->workers, .idle = p->idle,
            .in = p->next_seq, .out = p->out_items, .dropped = dropped, .failed = p->failed,
            .inside = (long)(p->next_seq - p->left),
            .elapsed_ns = p->t_start ? end - p->t_start : 0, .decisions = p->decisions,
        };
    }
    for (int s = 0; s < n && s < p->nstages; s++) {
        const struct pipe_stage *ps = &p->stage[s];
        goro_stage_stats_t *o = &stages[s];
        *o = (goro_stage_stats_t){
            .queued = pipe_ring_len(&ps->queue), .workers = ps->seats, .share = ps->share,
            .service_ns = ps->service_ns, .items = ps->items, .dropped = ps->dropped,
            .failed = ps->failed, .busy_ns = ps->busy_ns, .done = ps->done,
            .per_sec = secs > 0 ? (double)ps->items / secs : 0,
        };
        memcpy(o->name, ps->name, sizeof o->name);
    }
    int r = p->nstages;
    goro_mutex_unlock(&p->mu);
    return r;
}

int goro_pipeline_free(goro_pipeline_t *p)
{
    if (!p)
        return -EINVAL;
    goro__pipe_lock(p);
    bool busy = p->state == 1;
    goro_mutex_unlock(&p->mu);
    if (busy)
        return -EBUSY;
    for (int i = 0; i < p->nerrors; i++)
        goro_err_free(p->errors[i]);
    free(p->errors);
    goro__pipe_timeline_free(p);
    free_rings(p);
    free(p->stage);
    goro_cond_destroy(&p->work);
    goro_cond_destroy(&p->space);
    goro_cond_destroy(&p->out);
    goro_mutex_destroy(&p->mu);
    free(p);
    return 0;
}
