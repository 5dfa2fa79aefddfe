/* pipe/: pipelines (docs/pipelines.md) - stages on bounded queues, served
 * by worker coroutines that the allocator moves between stages. Built on
 * the public API only (groups, mutex, cond, error objects): this layer
 * calls nothing below it but through goro.h.
 *
 * layer: pipe - pipelines, built on the public API (goro.h) alone
 * may call: nothing
 */
#ifndef GORO_PIPE_PIPE_H
#define GORO_PIPE_PIPE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "goro.h"

#define PIPE_NAME_MAX 24
/* EXHAUSTIVE refuses to try more allocations than this (-E2BIG). */
#define PIPE_EXHAUSTIVE_MAX 1000000

/* alloc.c. work[s] = l_s * t_s, 0 for a stage that is done or idle.
 * Fill seats[] and return the seats given; the exhaustive one returns
 * -E2BIG past PIPE_EXHAUSTIVE_MAX allocations. */
int goro__pipe_dhondt(const double *work, int nstages, int workers, int *seats);
int goro__pipe_exhaustive(const double *work, int nstages, int workers, int *seats);
/* The number of allocations EXHAUSTIVE tries for `eligible` stages, capped
 * at PIPE_EXHAUSTIVE_MAX + 1. */
long goro__pipe_allocations(int eligible, int workers);

/* An item on its way, with its number from the source. */
struct pipe_item {
    uint64_t seq;
    void *item;
};

/* A ring of items; capacity (mask + 1) holds the whole window, so a push
 * never overflows (the window bounds every item inside the pipeline). */
struct pipe_ring {
    struct pipe_item *slot;
    uint32_t mask, head, tail;
};

struct pipe_stage {
    char name[PIPE_NAME_MAX];
    goro_stage_fn *fn;
    goro_stage_batch_fn *batch_fn;
    void *arg;
    int batch, capacity;
    struct pipe_ring queue;        /* its input */
    int seats;                     /* workers serving it now */
    int share;                     /* the allocator's last word */
    bool done;                     /* nothing will come any more */
    double service_ns;             /* moving average per item; 0: not measured */
    uint64_t items, dropped, failed;
    int64_t busy_ns;
};

/* timeline.c: who served what, and the queues, for the SVG. */
struct pipe_segment {
    int64_t t0, t1;
    uint16_t worker, stage;
};

struct pipe_timeline {
    struct pipe_segment *seg;
    int nseg, cap_seg;
    int *last;                     /* per worker: its last segment, or -1 */
    int64_t merge_ns;              /* gaps below this join two segments */
    bool truncated;
    int64_t *sample_t;             /* queue lengths: sample_t[i] and */
    int32_t *sample_q;             /* sample_q[i * nstages + s] */
    int nsample, cap_sample;
    int64_t sample_every, last_sample;
};

struct goro_pipeline {
    goro_mutex_t mu;
    goro_cond_t work;              /* idle workers */
    goro_cond_t space;             /* the source, for room in the window */
    goro_cond_t out;               /* the sink, for the next item */
    goro_pipeline_attr_t attr;
    char name[PIPE_NAME_MAX];
    struct pipe_stage *stage;
    int nstages, workers;
    int state;                     /* 0 new, 1 running, 2 ended */
    goro_group_t *group;           /* while running */
    goro_source_fn *source;
    void *source_arg;
    goro_sink_fn *sink;
    void *sink_arg;
    bool source_done, source_waits, sink_waits;
    int idle;                      /* workers waiting on `work` */
    uint64_t next_seq;             /* the source's next item number */
    uint64_t left;                 /* items that left: sunk, dropped or failed */
    uint64_t out_items, failed;    /* dropped: the stages' sum */
    struct pipe_ring outq;         /* unordered: the last stage's outputs */
    struct pipe_item *heap;        /* ordered: min-heap on seq, holes included */
    uint32_t nheap;
    goro_err_t **errors;           /* SKIP_FAILED: the first ones */
    int nerrors;
    uint64_t decisions;
    int64_t t_start, t_end;
    struct pipe_timeline tl;
};

/* A hole in the ordered output: an item that was dropped or failed. */
extern char goro__pipe_hole;
#define PIPE_HOLE ((void *)&goro__pipe_hole)

/* pipeline.c: takes p->mu, also in a cancelled coroutine. */
void goro__pipe_lock(struct goro_pipeline *p);

/* timeline.c, under p->mu. */
int goro__pipe_timeline_init(struct goro_pipeline *p);
void goro__pipe_timeline_free(struct goro_pipeline *p);
void goro__pipe_timeline_batch(struct goro_pipeline *p, int worker, int stage, int64_t t0,
                               int64_t t1);

static inline uint32_t pipe_ring_len(const struct pipe_ring *r)
{
    return r->tail - r->head;
}

#endif
