/*
 * goro/pipeline.h: stages joined by bounded queues, served by worker
 * coroutines that move to the stage that needs them (docs/pipelines.md).
 * Built on goro.h and goro/structured.h (groups, error objects). goro.h
 * includes it; it may be included alone.
 */
#include "../goro.h"    /* first: goro.h includes the goro/ headers in their order */
#ifndef GORO_PIPELINE_H
#define GORO_PIPELINE_H

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* ------------------------------------------------------------------------
 * Pipelines: stages joined by bounded queues, workers moved to the stage
 * that needs them (docs/pipelines.md)
 *
 *   goro_pipeline_t *p;
 *   goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .ordered = 1 });
 *   goro_pipeline_stage(p, &(goro_stage_t){ .name = "parse", .fn = parse });
 *   goro_pipeline_stage(p, &(goro_stage_t){ .name = "hash", .fn = hash });
 *   goro_err_t *err;
 *   if (goro_pipeline_run(p, read_line, file, count, &totals, &err) != 0) {
 *       goro_err_print(stderr, err);
 *       goro_err_free(err);
 *   }
 *   goro_pipeline_free(p);
 *
 * Items are pointers. The source makes them, one call at a time; each
 * stage's function turns an item into its output in place (or drops it);
 * the sink takes the last stage's outputs, one call at a time. Between
 * them every stage has a bounded input queue. A budget of worker
 * coroutines serves the stages: after each batch a worker asks the
 * allocator where it is needed, from each stage's queue length and its
 * service time per item as measured (a moving average), by the
 * Jefferson/D'Hondt method by default. A stage may so run on several
 * workers at once, and workers move when a stage slows down.
 *
 * With `ordered`, the sink sees items in the order the source made them,
 * even when a stage ran them on several workers at once (a reorder buffer
 * bounded by the window). The window bounds the items inside the
 * pipeline, source to sink: the source waits while it is full.
 *
 * Failure: a stage fails an item by returning a negative -errno, with an
 * error object in *err if it wants (the pipeline wraps it, naming the
 * stage and the item's number). By default (GORO_PIPELINE_FAIL_FAST) the
 * first failure - of the source, a stage or the sink - cancels the whole
 * pipeline and goro_pipeline_run returns it; with
 * GORO_PIPELINE_SKIP_FAILED a failed item is left out, the others go on,
 * and goro_pipeline_run returns one error listing the failures. The
 * pipeline's coroutines are a group (goro_group_t) made by the caller of
 * goro_pipeline_run: cancelling that caller, a group above it, the
 * deadline or goro_pipeline_cancel cancel them all. Items the pipeline
 * lets go of - a failed item, those still inside when it is cancelled -
 * are handed to attr.discard, so nothing is lost or leaked.
 *
 * Lifetime: goro_pipeline_new() -> goro_pipeline_stage()... ->
 * goro_pipeline_run() (once; from a coroutine or a thread; returns when
 * every item is through or the pipeline failed) -> goro_pipeline_stats()
 * and goro_pipeline_svg() at any time, also during the run from another
 * coroutine or thread -> goro_pipeline_free().
 * ------------------------------------------------------------------------ */

typedef struct goro_pipeline goro_pipeline_t;

#define GORO_PIPELINE_END 1      /* a source's return: no more items */
#define GORO_PIPELINE_DROP 1     /* a stage's return: the item goes no further
                                    (the stage has disposed of it) */
#define GORO_PIPELINE_STAGES_MAX 64
#define GORO_PIPELINE_BATCH_MAX 256

/* A batch function's mark for an item it dropped (items[i] = it). */
extern const char goro_pipeline_dropped_[1];
#define GORO_PIPELINE_DROPPED ((void *)goro_pipeline_dropped_)

/* The source: 0 with *item set, GORO_PIPELINE_END, or -errno (fails the
 * pipeline). Runs in a coroutine of its own and may block (read a file,
 * receive from a channel). */
typedef long goro_source_fn(void **item, void *arg);
/* A stage, per item: replaces *item by its output and returns 0, or
 * returns GORO_PIPELINE_DROP, or fails with -errno (optionally putting an
 * error object, which the pipeline takes, in *err; *item must then still
 * be an item the discard function accepts). */
typedef long goro_stage_fn(void **item, void *arg, goro_err_t **err);
/* A stage, per batch: replaces each items[i] by its output or by
 * GORO_PIPELINE_DROPPED; returns 0, or -errno (and *err) to fail every
 * item of the batch. */
typedef long goro_stage_batch_fn(void **items, int n, void *arg, goro_err_t **err);
/* The sink: takes ownership of item; returns 0 or -errno. */
typedef long goro_sink_fn(void *item, void *arg);

typedef struct goro_stage {
    const char *name;            /* copied (first 23 bytes) */
    goro_stage_fn *fn;           /* exactly one of fn and batch_fn */
    goro_stage_batch_fn *batch_fn;
    void *arg;
    int batch;                   /* items a worker takes per turn, at most
                                    GORO_PIPELINE_BATCH_MAX; 0: adaptive
                                    (about 100 us of work per turn) */
    int capacity;                /* its input queue's bound (items); 0: 64 */
} goro_stage_t;

/* How workers are given to stages (goro_pipeline_allocate). */
enum goro_pipeline_rule {
    GORO_PIPELINE_DHONDT = 0,     /* seats one at a time to the largest
                                     quotient l*t/(w+1) */
    GORO_PIPELINE_EXHAUSTIVE = 1, /* the allocation of least sum of l*t/(w+1),
                                     by trying them all (small pipelines) */
    GORO_PIPELINE_STATIC = 2,     /* no allocator: worker i serves stages
                                     i, i+W, ... (or stage i mod S) */
};

enum goro_pipeline_policy {
    GORO_PIPELINE_FAIL_FAST = 0,     /* the first failure cancels the pipeline */
    GORO_PIPELINE_SKIP_FAILED = 1,   /* a failed item is left out; the run's error
                                        lists the failures */
};

typedef struct goro_pipeline_attr {
    const char *name;            /* copied (first 23 bytes); names its coroutines */
    int workers;                 /* stage workers (coroutines), 1..4096;
                                    0: goro_workers() */
    int rule;                    /* enum goro_pipeline_rule */
    int policy;                  /* enum goro_pipeline_policy */
    int ordered;                 /* 1: the sink sees the source's order */
    int window;                  /* items inside at most, 1..2^20; 0: 1024 */
    int64_t deadline;            /* on goro_now()'s clock; 0: none */
    int timeline;                /* 1: record which stage each worker served,
                                    and the queues, for goro_pipeline_svg */
    size_t stack_size;           /* of its coroutines; 0: the default */
    void (*discard)(void *item, void *arg);   /* items let go of; NULL: none */
    void *discard_arg;
} goro_pipeline_attr_t;

/* Makes an empty pipeline. attr may be NULL. Returns 0, -EINVAL (NULL p,
 * a field out of range), -ENOMEM, or what starting the runtime returned. */
int goro_pipeline_new(goro_pipeline_t **p, const goro_pipeline_attr_t *attr);

/* Appends a stage (the source feeds the first, the last feeds the sink).
 * Returns its index, or -EINVAL (NULL, no function or both, a batch or
 * capacity out of range), -E2BIG (more than GORO_PIPELINE_STAGES_MAX),
 * -EBUSY (the pipeline has run), -ENOMEM. */
int goro_pipeline_stage(goro_pipeline_t *p, const goro_stage_t *stage);

/* Runs the pipeline to its end (may switch). sink may be NULL: outputs
 * then go to the discard function. Returns 0, or -code of the run's error,
 * given in *err (may be NULL; owned by the caller): the first failure, a
 * list of them (SKIP_FAILED), or ETIMEDOUT / ECANCELED. Also -EINVAL (NULL
 * p or source, no stage, run already), -E2BIG (EXHAUSTIVE over too many
 * allocations), -ENOMEM, or what spawning a coroutine fails with. */
int goro_pipeline_run(goro_pipeline_t *p, goro_source_fn *source, void *source_arg,
                      goro_sink_fn *sink, void *sink_arg, goro_err_t **err);

/* Cancels a running pipeline (goro_pipeline_run returns -ECANCELED).
 * Returns 0, -EINVAL, or -ESRCH when it is not running. */
int goro_pipeline_cancel(goro_pipeline_t *p);

typedef struct goro_stage_stats {
    char name[24];
    long queued;                 /* items in its input queue */
    int workers;                 /* workers serving it now */
    int share;                   /* its workers in the allocator's last decision */
    double service_ns;           /* per item, the moving average (0: not yet) */
    uint64_t items;              /* items through it */
    uint64_t dropped, failed;
    double per_sec;              /* items through it per second, since the start */
    int64_t busy_ns;             /* worker time spent on it */
    int done;                    /* no item will come to it any more */
} goro_stage_stats_t;

typedef struct goro_pipeline_stats {
    int state;                   /* 0 not run, 1 running, 2 ended */
    int stages, workers, idle;   /* idle: workers waiting for work */
    uint64_t in, out;            /* from the source; to the sink */
    uint64_t dropped, failed;
    long inside;                 /* items between source and sink */
    int64_t elapsed_ns;          /* since the run started (to its end) */
    uint64_t decisions;          /* allocator runs */
} goro_pipeline_stats_t;

/* Fills *st (may be NULL) and the first n of stages[] (NULL only with n
 * 0). Returns the number of stages, or -EINVAL (NULL p, n < 0, NULL
 * stages with n > 0). */
int goro_pipeline_stats(goro_pipeline_t *p, goro_pipeline_stats_t *st,
                        goro_stage_stats_t *stages, int n);

/* Writes an SVG picture of the run so far: one lane per worker coloured
 * by the stage it served, and each queue's length over time. Returns 0,
 * -EINVAL, -ENODATA (attr.timeline was not set, or nothing ran yet), -EIO
 * (writing f failed). */
int goro_pipeline_svg(goro_pipeline_t *p, FILE *f);

/* Frees p. Returns 0, -EINVAL, or -EBUSY while it runs. */
int goro_pipeline_free(goro_pipeline_t *p);

/* The allocator alone, a pure function: given each stage's load, fills
 * seats[0..nstages) with the workers each gets under rule (DHONDT or
 * EXHAUSTIVE). A stage that is done, or has no work (queued * service is
 * 0), gets none; a service_ns <= 0 counts as 1 (items alone). Ties: see
 * docs/pipelines.md. Returns the workers given (fewer than `workers`
 * only when no stage has work), or -EINVAL (NULL, nstages not in
 * 1..GORO_PIPELINE_STAGES_MAX, workers not in 1..65536, another rule),
 * -E2BIG (EXHAUSTIVE with more than 10^6 allocations to try). */
typedef struct goro_stage_load {
    long queued;                 /* l: items waiting */
    double service_ns;           /* t: time per item */
    int done;                    /* will never have work again */
} goro_stage_load_t;

int goro_pipeline_allocate(int rule, const goro_stage_load_t *load, int nstages, int workers,
                           int *seats);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* GORO_PIPELINE_H */
