/*
 * The registry: every coroutine slab and every worker, findable without
 * thread-locals, so that debuggers (live or on a core) and the dump can
 * list them all. A slab is registered once, when it is mapped, and stays
 * registered while pooled (its state then reads FREE).
 *
 * goro_debug is the exported, versioned description that the gdb
 * extension (gdb/goro_gdb.py) reads: where the arrays are, the offsets of
 * the fields it needs, the names of states and wait reasons, and the
 * layout of a saved context - so the script works on builds without debug
 * information and never hard-codes a struct layout. Every offset comes
 * from offsetof: fields may be added to struct goro and struct goro_m at
 * will. Changing the layout of goro_debug itself bumps its version.
 *
 * This file also carries the gdb extension itself, in the
 * .debug_gdb_scripts section, so that gdb loads it for any program linked
 * with goro.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "debug/debug.h"

/* Version 2. All fields are fixed-size and laid out without padding, so
 * the script can read the table with one struct format (it checks `size`).
 * The register names of the saved context are gdb's, one per slot of the
 * frame that goro__ctx_switch stores, "-" for a slot that is no register. */
struct goro_debug_info {
    uint32_t version;
    uint32_t size;                  /* sizeof(struct goro_debug_info) */
    struct goro *_Atomic *coros;    /* [ncoros]: slabs, some FREE */
    uint32_t ncoros;
    uint32_t capacity;
    struct goro_m *ms;              /* [nms] workers */
    uint32_t nms;
    uint32_t sizeof_m;
    uint32_t sizeof_goro;
    uint32_t nstates;               /* entries of state_names */
    const char *const *state_names; /* enum goro_state */
    const char *const *wait_names;  /* enum goro_wait */
    uint32_t nwaits;                /* entries of wait_names */
    uint32_t flag_g0;               /* GORO_F_G0, GORO_F_EXTERNAL */
    uint32_t flag_external;
    /* offsets in struct goro */
    uint16_t off_sp, off_state, off_wait, off_flags, off_id, off_m,
             off_wait_obj, off_fn, off_name, off_lo, off_hi, off_stack_size;
    uint16_t size_name;
    /* offsets in struct goro_m */
    uint16_t off_m_id, off_m_tid, off_m_curg, off_m_g0;
    /* the saved context: words, the slots of pc and frame pointer, and
     * how far above the saved sp the resumed caller's sp lies */
    uint16_t ctx_words, ctx_slot_pc, ctx_slot_fp, ctx_caller_sp;
    /* the reservation's pointer in struct goro (sched/deadline.c keeps the
     * record's first fields where the script reads them) */
    uint16_t off_dl;
    const char *ctx_regs;           /* space-separated gdb register names */
    char arch[16];
};

/* Keep in step with enum goro_state and enum goro_wait (internal.h). */
static const char *const state_names[] = {
    [GORO_S_FREE] = "free", [GORO_S_RUNNABLE] = "runnable",
    [GORO_S_RUNNING] = "running", [GORO_S_PARKED] = "parked",
    [GORO_S_DEAD] = "dead",
};

static const char *const wait_names[GORO_W__COUNT] = {
    [GORO_W_NONE] = "none", [GORO_W_JOIN] = "join",
    [GORO_W_CHAN_SEND] = "chan send", [GORO_W_CHAN_RECV] = "chan recv",
    [GORO_W_SELECT] = "select", [GORO_W_MUTEX] = "mutex",
    [GORO_W_RWLOCK] = "rwlock", [GORO_W_COND] = "cond", [GORO_W_SEM] = "sem",
    [GORO_W_WAITGROUP] = "waitgroup", [GORO_W_ONCE] = "once",
    [GORO_W_SLEEP] = "sleep", [GORO_W_IO] = "io", [GORO_W_OFFLOAD] = "offload",
    [GORO_W_GROUP] = "group", [GORO_W_FLIGHT] = "flight",
    [GORO_W_FUTURE] = "future", [GORO_W_BARRIER] = "barrier",
};

#if defined(__x86_64__)
#define CTX_REGS "- r15 r14 r13 r12 rbx rbp pc"
#elif defined(__aarch64__)
#define CTX_REGS "- - x19 x20 x21 x22 x23 x24 x25 x26 x27 x28 " \
                 "d8 d9 d10 d11 d12 d13 d14 d15 x29 x30"
#else
#error "goro: no saved-context description for this architecture"
#endif

const char *goro__state_name(int state)
{
    return state >= 0 && state < (int)(sizeof state_names / sizeof *state_names)
        ? state_names[state] : "?";
}

const char *goro__wait_name(int wait)
{
    return wait >= 0 && wait < GORO_W__COUNT && wait_names[wait] ? wait_names[wait] : "?";
}

#define OFF(t, f) ((uint16_t)offsetof(t, f))
__attribute__((visibility("default"), used))
struct goro_debug_info goro_debug = {
    .version = 3,
    .size = sizeof(struct goro_debug_info),
    .sizeof_goro = sizeof(struct goro),
    .sizeof_m = sizeof(struct goro_m),
    .nstates = sizeof state_names / sizeof *state_names,
    .state_names = state_names,
    .wait_names = wait_names,
    .nwaits = GORO_W__COUNT,
    .flag_g0 = GORO_F_G0,
    .flag_external = GORO_F_EXTERNAL,
    .off_sp = OFF(struct goro, sp), .off_state = OFF(struct goro, state),
    .off_wait = OFF(struct goro, wait), .off_flags = OFF(struct goro, flags),
    .off_id = OFF(struct goro, id), .off_m = OFF(struct goro, m),
    .off_wait_obj = OFF(struct goro, wait_obj), .off_fn = OFF(struct goro, fn),
    .off_name = OFF(struct goro, name), .off_lo = OFF(struct goro, lo),
    .off_hi = OFF(struct goro, hi), .off_stack_size = OFF(struct goro, stack_size),
    .size_name = sizeof(((struct goro *)0)->name),
    .off_m_id = OFF(struct goro_m, id), .off_m_tid = OFF(struct goro_m, tid),
    .off_m_curg = OFF(struct goro_m, curg), .off_m_g0 = OFF(struct goro_m, g0),
    .ctx_words = GORO_CTX_FRAME_WORDS, .ctx_slot_pc = GORO_CTX_SLOT_PC,
    .ctx_slot_fp = GORO_CTX_SLOT_FP,
    .ctx_caller_sp = GORO_CTX_FRAME_WORDS * sizeof(uint64_t),
    .off_dl = OFF(struct goro, dl),
    .ctx_regs = CTX_REGS,
    .arch = GORO_ARCH_NAME,
};

/* The script reads the table with one fixed format: no padding anywhere. */
_Static_assert(sizeof(void *) == 8, "goro_debug assumes 64-bit pointers");
_Static_assert(sizeof(struct goro_debug_info) == 4 * 2 + 8 + 4 * 2 + 8 + 4 * 4 + 8 * 2 +
               4 * 3 + 2 * 13 + 2 * 4 + 2 * 5 + 8 + 16, "goro_debug has padding");
_Static_assert(sizeof(state_names) / sizeof(*state_names) == GORO_S_DEAD + 1,
               "a state without a name");

/* The gdb extension, embedded: gdb runs it for every program (or core)
 * that contains this object, once the program's path is allowed by gdb's
 * auto-load safe-path (see docs/debugging.md). Embedding the text, rather
 * than naming a file, keeps the script in step with the tables above.
 * Entry kind 4 is "Python text": the first line names it, a NUL ends it;
 * "MS" with entry size 1 lets the linker drop duplicate entries. The
 * Makefile runs the compiler from the top of the tree. */
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\",%progbits,1\n"
        ".byte 4\n"
        ".ascii \"goro_gdb.py\\n\"\n"
        ".incbin \"gdb/goro_gdb.py\"\n"
        ".byte 0\n"
        ".popsection\n");

static goro_lock_t registry_lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF);

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

/* Calls fn(g, arg) for every registered slab, with the registry locked so
 * that no slab is unmapped meanwhile (fn must not spawn or free stacks).
 * From a signal handler the lock may be held by the interrupted code:
 * then, after a short wait, the walk goes on without it and returns 1
 * (the caller says the list may be inexact); otherwise 0. */
int goro__registry_walk(void (*fn)(struct goro *g, void *arg), void *arg, bool in_signal)
{
    bool locked = true;
    if (in_signal) {
        int tries = 0;
        while (!goro__trylock_unranked(&registry_lock)) {
            if (++tries > 100000) {
                locked = false;
                break;
            }
            cpu_relax();
        }
    } else {
        goro__lock(&registry_lock);
    }
    uint32_t n = goro_debug.ncoros;
    for (uint32_t i = 0; i < n && i < goro_debug.ncoros; i++)
        fn(atomic_load_explicit(&goro_debug.coros[i], memory_order_relaxed), arg);
    if (locked)
        goro__unlock(&registry_lock);
    return locked ? 0 : 1;
}

/* The workers, or NULL when the runtime is not running. */
struct goro_m *goro__registry_ms(int *n)
{
    *n = (int)goro_debug.nms;
    return goro_debug.ms;
}
