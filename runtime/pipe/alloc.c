/*
 * The allocator (docs/pipelines.md): how many workers each stage of a
 * pipeline gets, from each stage's work - its queue length l times its
 * service time per item t. A pure module: no locks, no allocation.
 *
 * Two rules:
 *   - Jefferson/D'Hondt: the W seats are given one at a time, each to the
 *     stage with the largest quotient work / (w + 1), w being the seats it
 *     has so far. O(W log S) with a heap of the stages. It minimises the
 *     largest quotient left over - the drain time of the bottleneck stage.
 *   - Exhaustive scoring: every way of giving the W seats to the stages is
 *     tried, and the one with the least sum of work / (w + 1) is taken.
 *     C(W+S-1, S-1) allocations, so only for small pipelines.
 * Both give no seat to a stage without work (done, or nothing queued):
 * an allocation may use fewer than W seats, and none at all when every
 * stage is idle.
 *
 * Ties (exactly equal quotients, or sums equal within 1e-12): D'Hondt
 * gives the seat to the stage with fewer seats so far, then to the later
 * stage; exhaustive takes the allocation with more seats downstream,
 * compared from the last stage back. Later stages win because finishing
 * an item frees its place in the window and its memory sooner.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "pipe/pipe.h"

const char goro_pipeline_dropped_[1];

/* D'Hondt's order: a's next seat comes before b's (q: each stage's next
 * quotient, work / (seats + 1), kept up to date). */
static bool seat_before(const double *q, const int *seats, int a, int b)
{
    if (q[a] != q[b])
        return q[a] > q[b];
    if (seats[a] != seats[b])
        return seats[a] < seats[b];
    return a > b;
}

static void sift_down(int *heap, int n, int i, const double *q, const int *seats)
{
    for (;;) {
        int best = i, l = 2 * i + 1, r = l + 1;
        if (l < n && seat_before(q, seats, heap[l], heap[best]))
            best = l;
        if (r < n && seat_before(q, seats, heap[r], heap[best]))
            best = r;
        if (best == i)
            return;
        int t = heap[i];
        heap[i] = heap[best];
        heap[best] = t;
        i = best;
    }
}

/* Seats one at a time would be W heap steps. Most are foregone: the W-th
 * largest quotient, where D'Hondt stops, is at most C/W (C the total
 * work: were it above, fewer than W quotients would reach it). So every
 * quotient work/k with k < W * work / C lies strictly above where it
 * stops and is among those it gives: each stage starts with that many
 * seats (the largest integer below W * work / C, a hair lower for
 * rounding), fewer than S seats are left to give one at a time, and ties
 * at the stopping quotient meet the same seat counts as from zero. */
int goro__pipe_dhondt(const double *work, int nstages, int workers, int *seats)
{
    int heap[GORO_PIPELINE_STAGES_MAX], n = 0, given = 0;
    double q[GORO_PIPELINE_STAGES_MAX], total = 0;
    for (int s = 0; s < nstages; s++)
        if (work[s] > 0)
            total += work[s];
    for (int s = 0; s < nstages; s++) {
        seats[s] = 0;
        if (work[s] <= 0)
            continue;
        double share = workers * (work[s] / total) * (1 - 1e-9);
        int start = share > 1 ? (int)ceil(share) - 1 : 0;
        seats[s] = start;
        given += start;
        q[s] = work[s] / (start + 1);
        heap[n++] = s;
    }
    if (n == 0)
        return 0;
    for (int i = n / 2 - 1; i >= 0; i--)
        sift_down(heap, n, i, q, seats);
    /* The top's quotient only falls, so one sift per seat. */
    for (; given < workers; given++) {
        int s = heap[0];
        q[s] = work[s] / (++seats[s] + 1);
        sift_down(heap, n, 0, q, seats);
    }
    return workers;
}

long goro__pipe_allocations(int eligible, int workers)
{
    if (eligible <= 0)
        return 0;
    /* C(workers + eligible - 1, eligible - 1), stopping past the cap. */
    long double c = 1;
    for (int i = 1; i < eligible; i++) {
        c = c * (workers + i) / i;
        if (c > PIPE_EXHAUSTIVE_MAX)
            return PIPE_EXHAUSTIVE_MAX + 1;
    }
    return (long)(c + 0.5);
}

struct exhaustive {
    const double *work;
    int elig[GORO_PIPELINE_STAGES_MAX], n;
    int cur[GORO_PIPELINE_STAGES_MAX];
    int *best;
    double best_score;
    bool found;
    int nstages;
};

/* The tie rule: more seats downstream, from the last stage back. */
static bool more_downstream(const int *a, const int *b, int nstages)
{
    for (int s = nstages - 1; s >= 0; s--)
        if (a[s] != b[s])
            return a[s] > b[s];
    return false;
}

static void consider(struct exhaustive *x, double score)
{
    double eps = 1e-12 * fmax(fabs(score), fabs(x->best_score));
    bool better = !x->found || score < x->best_score - eps;
    if (!better && fabs(score - x->best_score) <= eps)
        better = more_downstream(x->cur, x->best, x->nstages);
    if (!better)
        return;
    x->found = true;
    x->best_score = score;
    for (int s = 0; s < x->nstages; s++)
        x->best[s] = x->cur[s];
}

static void walk(struct exhaustive *x, int i, int left, double score)
{
    int s = x->elig[i];
    if (i == x->n - 1) {
        x->cur[s] = left;
        consider(x, score + x->work[s] / (left + 1));
        return;
    }
    for (int w = 0; w <= left; w++) {
        x->cur[s] = w;
        walk(x, i + 1, left - w, score + x->work[s] / (w + 1));
    }
}

int goro__pipe_exhaustive(const double *work, int nstages, int workers, int *seats)
{
    struct exhaustive x = { .work = work, .best = seats, .nstages = nstages };
    for (int s = 0; s < nstages; s++) {
        seats[s] = 0;
        x.cur[s] = 0;
        if (work[s] > 0)
            x.elig[x.n++] = s;
    }
    if (x.n == 0)
        return 0;
    if (goro__pipe_allocations(x.n, workers) > PIPE_EXHAUSTIVE_MAX)
        return -E2BIG;
    /* Every seat is given: a stage with work is always better off with one
     * more, so an allocation that keeps a seat back is never the best. */
    walk(&x, 0, workers, 0);
    return workers;
}

int goro_pipeline_allocate(int rule, const goro_stage_load_t *load, int nstages, int workers,
                           int *seats)
{
    if (!load || !seats || nstages < 1 || nstages > GORO_PIPELINE_STAGES_MAX ||
        workers < 1 || workers > 65536)
        return -EINVAL;
    if (rule != GORO_PIPELINE_DHONDT && rule != GORO_PIPELINE_EXHAUSTIVE)
        return -EINVAL;
    double work[GORO_PIPELINE_STAGES_MAX];
    for (int s = 0; s < nstages; s++) {
        double t = load[s].service_ns;
        if (isnan(t) || isinf(t) || load[s].queued < 0)
            return -EINVAL;
        work[s] = load[s].done || load[s].queued == 0 ? 0 : (double)load[s].queued * (t > 0 ? t : 1);
    }
    if (rule == GORO_PIPELINE_DHONDT)
        return goro__pipe_dhondt(work, nstages, workers, seats);
    return goro__pipe_exhaustive(work, nstages, workers, seats);
}
