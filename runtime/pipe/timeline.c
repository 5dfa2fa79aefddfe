/*
 * A pipeline's timeline (attr.timeline): which stage each worker served
 * when, and the queue lengths over time - what goro_pipeline_svg draws.
 *
 * Bounded whatever the run's length: consecutive batches of one worker on
 * one stage are one segment (gaps up to merge_ns joined), and when the
 * segments fill their array the gap allowed grows fourfold and they are
 * joined again; queue samples are taken at most every sample_every and
 * halved (every other one dropped, the interval doubled) when full.
 * Called under the pipeline's lock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pipe/pipe.h"

#define SEG_MAX (1 << 16)
#define SAMPLE_MAX 2048
#define MERGE_NS 100000              /* 100 us */
#define SAMPLE_EVERY_NS 1000000      /* 1 ms */

int goro__pipe_timeline_init(struct goro_pipeline *p)
{
    struct pipe_timeline *tl = &p->tl;
    tl->cap_seg = 1024;
    tl->seg = malloc(sizeof *tl->seg * (size_t)tl->cap_seg);
    tl->last = malloc(sizeof *tl->last * (size_t)p->workers);
    tl->cap_sample = SAMPLE_MAX;
    tl->sample_t = malloc(sizeof *tl->sample_t * SAMPLE_MAX);
    tl->sample_q = malloc(sizeof *tl->sample_q * SAMPLE_MAX * (size_t)p->nstages);
    if (!tl->seg || !tl->last || !tl->sample_t || !tl->sample_q) {
        goro__pipe_timeline_free(p);
        return -ENOMEM;
    }
    for (int i = 0; i < p->workers; i++)
        tl->last[i] = -1;
    tl->merge_ns = MERGE_NS;
    tl->sample_every = SAMPLE_EVERY_NS;
    return 0;
}

void goro__pipe_timeline_free(struct goro_pipeline *p)
{
    struct pipe_timeline *tl = &p->tl;
    free(tl->seg);
    free(tl->last);
    free(tl->sample_t);
    free(tl->sample_q);
    memset(tl, 0, sizeof *tl);
}

/* Joins segments again with a wider gap, in place (each worker's last
 * kept segment is the one a later one may extend). */
static void compact(struct goro_pipeline *p)
{
    struct pipe_timeline *tl = &p->tl;
    tl->merge_ns *= 4;
    for (int i = 0; i < p->workers; i++)
        tl->last[i] = -1;
    int out = 0;
    for (int i = 0; i < tl->nseg; i++) {
        struct pipe_segment s = tl->seg[i];
        int k = tl->last[s.worker];
        if (k >= 0 && tl->seg[k].stage == s.stage && s.t0 - tl->seg[k].t1 <= tl->merge_ns) {
            if (s.t1 > tl->seg[k].t1)
                tl->seg[k].t1 = s.t1;
            continue;
        }
        tl->seg[out] = s;
        tl->last[s.worker] = out++;
    }
    tl->nseg = out;
}

/* Room for one more segment: grow, else compact; false when even that
 * leaves the array nearly full (the timeline then stops: truncated). */
static bool segment_room(struct goro_pipeline *p)
{
    struct pipe_timeline *tl = &p->tl;
    if (tl->nseg < tl->cap_seg)
        return true;
    if (tl->cap_seg < SEG_MAX) {
        struct pipe_segment *grown = realloc(tl->seg, sizeof *grown * (size_t)tl->cap_seg * 2);
        if (grown) {
            tl->seg = grown;
            tl->cap_seg *= 2;
            return true;
        }
    }
    for (int round = 0; round < 6 && tl->nseg > tl->cap_seg * 3 / 4; round++)
        compact(p);
    if (tl->nseg < tl->cap_seg)
        return true;
    tl->truncated = true;
    return false;
}

static void sample_queues(struct goro_pipeline *p, int64_t now)
{
    struct pipe_timeline *tl = &p->tl;
    if (tl->nsample && now - tl->last_sample < tl->sample_every)
        return;
    if (tl->nsample == tl->cap_sample) {
        int S = p->nstages, half = 0;
        for (int i = 0; i < tl->nsample; i += 2, half++) {
            tl->sample_t[half] = tl->sample_t[i];
            memmove(&tl->sample_q[half * S], &tl->sample_q[i * S], sizeof *tl->sample_q * S);
        }
        tl->nsample = half;
        tl->sample_every *= 2;
    }
    int i = tl->nsample++;
    tl->sample_t[i] = now;
    for (int s = 0; s < p->nstages; s++)
        tl->sample_q[i * p->nstages + s] = (int32_t)pipe_ring_len(&p->stage[s].queue);
    tl->last_sample = now;
}

void goro__pipe_timeline_batch(struct goro_pipeline *p, int worker, int stage, int64_t t0,
                               int64_t t1)
{
    struct pipe_timeline *tl = &p->tl;
    sample_queues(p, t1);
    if (tl->truncated)
        return;
    int k = tl->last[worker];
    if (k >= 0 && tl->seg[k].stage == stage && t0 - tl->seg[k].t1 <= tl->merge_ns) {
        tl->seg[k].t1 = t1;
        return;
    }
    if (!segment_room(p))
        return;
    tl->seg[tl->nseg] = (struct pipe_segment){ t0, t1, (uint16_t)worker, (uint16_t)stage };
    tl->last[worker] = tl->nseg++;
}
