/*
 * Coroutine-local storage (docs/structured.md): pthread keys for
 * coroutines, Boost.Fiber's fiber_specific_ptr.
 *
 * A key is an index into a process-wide table of destructors and a
 * generation: goro_key_t = generation << 16 | index + 1 (0 is never a
 * key). A coroutine's value for a key is a struct goro_local in its record
 * - GORO_LOCALS inline slots, then an overflow array made on the first set
 * of a higher index - holding the value and the generation of the key it
 * was set under, so a value set under a deleted key is never seen through
 * a later key that reuses its index (pthread's "a new key reads NULL
 * everywhere").
 *
 * Invariants:
 *   1. Outside a life that set values, a record's slots are all zero and
 *      its overflow array NULL: a fresh slab is zero, and every end clears
 *      what its life set (goro__locals_end). So a spawn clears nothing.
 *   2. A slot is read and written by its own coroutine only; the key
 *      table under keys_lock, except the generation and destructor a get
 *      or an end reads (atomics: a key deleted concurrently with its use
 *      is the caller's race, as with pthread keys, but never a torn read).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"

#define KEYS_MAX 1024              /* indexes; a key is one of them + a generation */
#define DTOR_ROUNDS 4              /* PTHREAD_DESTRUCTOR_ITERATIONS */

struct key_slot {
    _Atomic uint32_t gen;          /* odd: in use; even: free */
    _Atomic(void (*)(void *)) dtor;
};

static struct key_slot keys[KEYS_MAX];
static goro_lock_t keys_lock;

static inline uint32_t key_index(goro_key_t k) { return (uint32_t)(k & 0xffff) - 1; }
static inline uint32_t key_gen(goro_key_t k) { return (uint32_t)(k >> 16); }

int goro_key_create(goro_key_t *key, void (*dtor)(void *))
{
    if (!key)
        return -EINVAL;
    goro__lock(&keys_lock);
    for (uint32_t i = 0; i < KEYS_MAX; i++) {
        uint32_t gen = atomic_load_explicit(&keys[i].gen, memory_order_relaxed);
        if (gen & 1)
            continue;
        gen = (gen + 1) & 0xffff;   /* odd: in use; wraps within 16 bits */
        atomic_store_explicit(&keys[i].dtor, dtor, memory_order_relaxed);
        atomic_store_explicit(&keys[i].gen, gen, memory_order_release);
        goro__unlock(&keys_lock);
        *key = (goro_key_t)gen << 16 | (i + 1);
        return 0;
    }
    goro__unlock(&keys_lock);
    return -EAGAIN;
}

/* The key's slot if k names a key in use now, else NULL. */
static struct key_slot *key_live(goro_key_t k)
{
    uint32_t i = key_index(k);
    if (i >= KEYS_MAX)
        return NULL;
    uint32_t gen = atomic_load_explicit(&keys[i].gen, memory_order_acquire);
    return (gen & 1) && gen == key_gen(k) ? &keys[i] : NULL;
}

int goro_key_delete(goro_key_t key)
{
    goro__lock(&keys_lock);
    struct key_slot *s = key_live(key);
    if (s) {
        atomic_store_explicit(&s->dtor, NULL, memory_order_relaxed);
        atomic_store_explicit(&s->gen, (key_gen(key) + 1) & 0xffff, memory_order_release);
    }
    goro__unlock(&keys_lock);
    return s ? 0 : -EINVAL;
}

/* g's slot for index i; NULL if past the overflow array (get: no value). */
static inline struct goro_local *slot_of(struct goro *g, uint32_t i)
{
    if (i < GORO_LOCALS)
        return &g->locals[i];
    i -= GORO_LOCALS;
    return i < g->locals_more_n ? &g->locals_more[i] : NULL;
}

void *goro_local_get(goro_key_t key)
{
    /* Nothing can move this coroutine to another worker between the read
     * of m and of m->curg: nothing here switches, and goro's own code is
     * never preempted asynchronously (sched/preempt.c). The inline slots
     * are the path the branches favour; the generation checks end in one
     * conditional move rather than two branches. */
    struct goro_m *m = goro__tls_m;
    if (__builtin_expect(!m, 0))
        return NULL;
    struct goro *g = m->curg;
    uint32_t i = key_index(key);
    struct goro_local *l;
    if (__builtin_expect(g && i < GORO_LOCALS, 1))
        l = &g->locals[i];
    else if (!g || i >= KEYS_MAX || !(l = slot_of(g, i)))
        return NULL;
    /* A value set under this key's generation, while the key is in use: a
     * deleted key's value, or one of an earlier key of the same index,
     * reads as NULL. */
    uint32_t gen = l->gen;
    void *v = l->value;
    uint32_t live = atomic_load_explicit(&keys[i].gen, memory_order_relaxed);
    return ((gen ^ key_gen(key)) | (live ^ gen)) == 0 ? v : NULL;
}

/* Makes the overflow array reach index i (i >= GORO_LOCALS). */
static int grow(struct goro *g, uint32_t i)
{
    uint32_t n = g->locals_more_n ? g->locals_more_n : 8;
    while (n <= i - GORO_LOCALS)
        n *= 2;
    struct goro_local *more = realloc(g->locals_more, n * sizeof *more);
    if (!more)
        return -ENOMEM;
    memset(more + g->locals_more_n, 0, (n - g->locals_more_n) * sizeof *more);
    g->locals_more = more;
    g->locals_more_n = n;
    return 0;
}

int goro_local_set(goro_key_t key, void *value)
{
    struct goro *g = goro__current();
    if (!g)
        return -EPERM;              /* a thread: pthread keys are for threads */
    if (!key_live(key))
        return -EINVAL;
    uint32_t i = key_index(key);
    struct goro_local *l = slot_of(g, i);
    if (!l) {
        if (!value)
            return 0;               /* NULL is what it reads already */
        int err = grow(g, i);
        if (err)
            return err;
        l = slot_of(g, i);
    }
    l->value = value;
    l->gen = key_gen(key);
    g->locals_used = 1;
    return 0;
}

/* One pass over g's slots: each non-NULL value of a live key is taken
 * (the slot cleared) and its destructor called with it. True if any
 * destructor ran (it may have set values again). */
static bool dtor_pass(struct goro *g)
{
    bool ran = false;
    uint32_t n = GORO_LOCALS + g->locals_more_n;
    for (uint32_t i = 0; i < n; i++) {
        struct goro_local *l = slot_of(g, i);
        void *v = l->value;
        uint32_t gen = l->gen;
        *l = (struct goro_local){ 0 };
        if (!v)
            continue;
        uint32_t now = atomic_load_explicit(&keys[i].gen, memory_order_acquire);
        void (*dtor)(void *) = atomic_load_explicit(&keys[i].dtor, memory_order_relaxed);
        if (now == gen && dtor) {
            dtor(v);
            ran = true;
        }
    }
    return ran;
}

void goro__locals_end(struct goro *g)
{
    if (!g->locals_used)
        return;
    /* pthread's rule: destructors that set values again get another
     * round, up to DTOR_ROUNDS; what is left then is dropped. */
    for (int round = 0; round < DTOR_ROUNDS && dtor_pass(g); round++)
        ;
    uint32_t n = GORO_LOCALS + g->locals_more_n;
    for (uint32_t i = 0; i < n; i++)
        *slot_of(g, i) = (struct goro_local){ 0 };   /* invariant 1 */
    free(g->locals_more);
    g->locals_more = NULL;
    g->locals_more_n = 0;
    g->locals_used = 0;
}
