/*
 * A pipeline's item stores (pipeline.c's invariants 1 and 4): the ring of
 * a stage's queue, and the heap that puts the last stage's outputs back in
 * order for the sink, keyed by item number. Callers hold the pipeline's
 * mutex; the sizes are fixed when the run starts (window slots each), so
 * nothing here grows or fails after ring_init.
 */
#include <errno.h>
#include <stdlib.h>

#include "pipe/pipe.h"

int goro__pipe_ring_init(struct pipe_ring *r, uint32_t slots)
{
    r->slot = malloc(sizeof *r->slot * slots);
    r->mask = slots - 1;
    r->head = r->tail = 0;
    return r->slot ? 0 : -ENOMEM;
}

void goro__pipe_ring_push(struct pipe_ring *r, struct pipe_item it)
{
    r->slot[r->tail++ & r->mask] = it;
}

struct pipe_item goro__pipe_ring_pop(struct pipe_ring *r)
{
    return r->slot[r->head++ & r->mask];
}

void goro__pipe_heap_push(struct goro_pipeline *p, struct pipe_item it)
{
    uint32_t i = p->nheap++;
    while (i > 0 && p->heap[(i - 1) / 2].seq > it.seq) {
        p->heap[i] = p->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    p->heap[i] = it;
}

struct pipe_item goro__pipe_heap_pop(struct goro_pipeline *p)
{
    struct pipe_item top = p->heap[0], last = p->heap[--p->nheap];
    uint32_t i = 0, n = p->nheap;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && p->heap[c + 1].seq < p->heap[c].seq)
            c++;
        if (p->heap[c].seq >= last.seq)
            break;
        p->heap[i] = p->heap[c];
        i = c;
    }
    if (n)
        p->heap[i] = last;
    return top;
}

