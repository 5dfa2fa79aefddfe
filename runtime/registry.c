/*
 * The registry: every coroutine slab and every worker, findable without
 * thread-locals, so that debuggers (live or on a core) and the dump can
 * list them all. A slab is registered once, when it is mapped, and stays
 * registered while pooled (its state then reads FREE).
 *
 * goro_debug is the exported, versioned description that the gdb
 * extension reads: where the arrays are and the offsets of the fields it
 * needs, so the script works on builds without full debug information.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

struct goro_debug_info {
    uint32_t version;
    uint32_t sizeof_goro;
    struct goro *_Atomic *coros;    /* [ncoros]: slabs, some FREE */
    uint32_t ncoros;
    uint32_t capacity;
    struct goro_m *ms;              /* [nms] workers */
    uint32_t nms;
    uint32_t sizeof_m;
    /* offsets in struct goro */
    uint16_t off_sp, off_state, off_wait, off_flags, off_id, off_m,
             off_wait_obj, off_fn, off_name, off_lo, off_hi;
    /* offsets in struct goro_m */
    uint16_t off_m_id, off_m_tid, off_m_curg, off_m_g0;
    /* the saved context: words and the slots of pc, frame pointer */
    uint16_t ctx_words, ctx_slot_pc, ctx_slot_fp;
    char arch[16];
};

#define OFF(t, f) ((uint16_t)offsetof(t, f))
__attribute__((visibility("default"), used))
struct goro_debug_info goro_debug = {
    .version = 1,
    .sizeof_goro = sizeof(struct goro),
    .sizeof_m = sizeof(struct goro_m),
    .off_sp = OFF(struct goro, sp), .off_state = OFF(struct goro, state),
    .off_wait = OFF(struct goro, wait), .off_flags = OFF(struct goro, flags),
    .off_id = OFF(struct goro, id), .off_m = OFF(struct goro, m),
    .off_wait_obj = OFF(struct goro, wait_obj), .off_fn = OFF(struct goro, fn),
    .off_name = OFF(struct goro, name), .off_lo = OFF(struct goro, lo),
    .off_hi = OFF(struct goro, hi),
    .off_m_id = OFF(struct goro_m, id), .off_m_tid = OFF(struct goro_m, tid),
    .off_m_curg = OFF(struct goro_m, curg), .off_m_g0 = OFF(struct goro_m, g0),
    .ctx_words = GORO_CTX_FRAME_WORDS, .ctx_slot_pc = GORO_CTX_SLOT_PC,
    .ctx_slot_fp = GORO_CTX_SLOT_FP,
    .arch = GORO_ARCH_NAME,
};

static goro_lock_t registry_lock = GORO_LOCK_INIT;

int goro__registry_add(struct goro *g)
{
    goro__lock(&registry_lock);
    if (goro_debug.ncoros == goro_debug.capacity) {
        uint32_t cap = goro_debug.capacity ? goro_debug.capacity * 2 : 1024;
        struct goro *_Atomic *a = realloc((void *)goro_debug.coros, cap * sizeof *a);
        if (!a) {
            goro__unlock(&registry_lock);
            return -ENOMEM;
        }
        goro_debug.coros = a;
        goro_debug.capacity = cap;
    }
    g->registry_slot = goro_debug.ncoros;
    atomic_store_explicit(&goro_debug.coros[goro_debug.ncoros++], g, memory_order_relaxed);
    goro__unlock(&registry_lock);
    return 0;
}

void goro__registry_remove(struct goro *g)
{
    goro__lock(&registry_lock);
    uint32_t last = --goro_debug.ncoros;
    struct goro *moved = atomic_load_explicit(&goro_debug.coros[last], memory_order_relaxed);
    atomic_store_explicit(&goro_debug.coros[g->registry_slot], moved, memory_order_relaxed);
    moved->registry_slot = g->registry_slot;
    if (goro_debug.ncoros == 0) {
        free((void *)goro_debug.coros);
        goro_debug.coros = NULL;
        goro_debug.capacity = 0;
    }
    goro__unlock(&registry_lock);
}

void goro__registry_set_ms(struct goro_m *ms, int n)
{
    goro_debug.ms = ms;
    goro_debug.nms = (uint32_t)n;
}

/* The most recently registered slab, or NULL (used to unmap all at exit). */
struct goro *goro__registry_last(void)
{
    goro__lock(&registry_lock);
    struct goro *g = goro_debug.ncoros
        ? atomic_load_explicit(&goro_debug.coros[goro_debug.ncoros - 1], memory_order_relaxed)
        : NULL;
    goro__unlock(&registry_lock);
    return g;
}
