/*
 * Tokens: cancelling a coroutine whose handle is gone (goro_token,
 * goro_cancel_token).
 *
 * A detached coroutine's slab is reused by the next spawn, or unmapped
 * when it has been pooled for a while, so a pointer kept past its end may
 * name another coroutine, or no memory at all. A token is therefore not a
 * pointer but a pair: a slot of a table that is never freed, and the id of
 * the life it names (ids are never reused in a process, restarts of the
 * runtime included). goro_cancel_token reads only the table until it knows
 * that life still runs, and the life cannot end while it looks:
 *
 *   - goro_token gives the slab a slot (kept for the slab's every life,
 *     returned when the slab is unmapped) and publishes the life in it:
 *     entry.life = id, under the entry's lock;
 *   - the coroutine, as it ends, takes the id out again under the same
 *     lock (goro__token_life_end, token.h), before its slab can be reused;
 *   - goro_cancel_token cancels only while it holds that lock and finds
 *     its id there, so the slab is mapped and holds that very coroutine.
 *
 * Which of goro_token and the end comes first is settled by one atomic
 * word per life (struct goro.token_state): the end swaps in ENDED; the
 * token publishes only if it moves NONE to LIVE; the end takes the lock
 * only if it found LIVE. Coroutines nobody takes a token of pay that one
 * exchange, and nothing at spawn.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"
#include "wait/group.h"
#include "coro/token.h"

#define SLOTS_PER_CHUNK 1024u
#define SLOTS_MAX (1u << 22)       /* slabs with a slot at one time */

struct token_entry {
    goro_lock_t lock;              /* guards life; held while cancelling through it */
    uint32_t next_free;            /* free list link (table_lock) */
    uint64_t life;                 /* id of the coroutine published here, or 0 */
    struct goro *g;                /* the slab holding the slot (table_lock) */
};

/* Chunks are allocated on first use and never freed: a token may be
 * looked up at any time, long after its slab is gone. */
static struct token_entry *_Atomic chunks[SLOTS_MAX / SLOTS_PER_CHUNK];
static goro_lock_t table_lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF);   /* the free list, slab<->slot */
static uint32_t next_unused = 1;   /* slot 0 means "none" */
static uint32_t free_head;         /* 0: empty */

static struct token_entry *entry(uint32_t slot)
{
    if (slot == 0 || slot >= SLOTS_MAX)
        return NULL;
    struct token_entry *chunk = atomic_load_explicit(&chunks[slot / SLOTS_PER_CHUNK],
                                                     memory_order_acquire);
    return chunk ? &chunk[slot % SLOTS_PER_CHUNK] : NULL;
}

/* Under table_lock: a free slot for g, or 0 (out of memory or slots). */
static uint32_t slot_take_locked(struct goro *g)
{
    uint32_t slot = free_head;
    if (slot) {
        free_head = entry(slot)->next_free;
    } else {
        if (next_unused >= SLOTS_MAX)
            return 0;
        _Atomic(struct token_entry *) *chunk = &chunks[next_unused / SLOTS_PER_CHUNK];
        if (!atomic_load_explicit(chunk, memory_order_relaxed)) {
            struct token_entry *fresh = calloc(SLOTS_PER_CHUNK, sizeof *fresh);
            if (!fresh)
                return 0;
            atomic_store_explicit(chunk, fresh, memory_order_release);
        }
        slot = next_unused++;
    }
    entry(slot)->g = g;
    return slot;
}

/* The slot of h's slab, given one on first use; 0 if none can be had. */
static uint32_t slot_of(struct goro *h)
{
    goro__lock(&table_lock);
    if (!h->token_slot)
        h->token_slot = slot_take_locked(h);
    uint32_t slot = h->token_slot;
    goro__unlock(&table_lock);
    return slot;
}

void goro__token_slot_put(struct goro *g)
{
    uint32_t slot = g->token_slot;
    if (!slot)
        return;
    struct token_entry *e = entry(slot);
    goro__lock(&e->lock);
    e->life = 0;                    /* ended already: an unmapped slab runs nothing */
    goro__unlock(&e->lock);
    goro__lock(&table_lock);
    e->g = NULL;
    e->next_free = free_head;
    free_head = slot;
    g->token_slot = 0;
    goro__unlock(&table_lock);
}

void goro__token_unpublish(struct goro *g)
{
    struct token_entry *e = entry(g->token_slot);
    goro__lock(&e->lock);
    e->life = 0;
    goro__unlock(&e->lock);
}

/* A handle the caller may still use: not joined or detached (as far as
 * can be told), or the caller's own. */
static bool handle_usable(const struct goro *h)
{
    if (!h || (h->flags & (GORO_F_EXTERNAL | GORO_F_G0)))
        return false;
    if (h == goro__current())
        return true;
    return atomic_load_explicit(&h->state, memory_order_relaxed) != GORO_S_FREE &&
           atomic_load_explicit(&h->exit_word, memory_order_relaxed) != GORO_EXIT_DETACHED;
}

int goro_token(goro_t *h, goro_token_t *tok)
{
    if (!tok)
        return -EINVAL;
    *tok = (goro_token_t){ 0 };
    if (!handle_usable(h))
        return -EINVAL;
    uint32_t slot = slot_of(h);
    if (!slot)
        return -ENOMEM;
    struct token_entry *e = entry(slot);
    goro__lock(&e->lock);
    uint8_t expect = GORO_TOKEN_NONE;
    if (atomic_compare_exchange_strong_explicit(&h->token_state, &expect, GORO_TOKEN_LIVE,
            memory_order_acq_rel, memory_order_acquire))
        e->life = h->id;            /* else published already, or ended */
    goro__unlock(&e->lock);
    *tok = (goro_token_t){ .id = h->id, .slot = slot };
    return 0;
}

int goro_cancel_token(goro_token_t tok)
{
    struct token_entry *e = entry(tok.slot);
    if (!e || tok.id == 0)
        return -EINVAL;
    goro__lock(&e->lock);
    if (e->life != tok.id) {
        goro__unlock(&e->lock);
        return -ESRCH;              /* ended: its slab may hold another one now */
    }
    /* Under the lock g cannot end (its life's end takes it). */
    goro__cancel_tree(e->g);
    goro__unlock(&e->lock);
    return 0;
}

int goro_cancel_token_cause(goro_token_t tok, goro_err_t *cause)
{
    struct token_entry *e = entry(tok.slot);
    if (!e || tok.id == 0 || !cause) {
        goro_err_free(cause);
        return -EINVAL;
    }
    goro__lock(&e->lock);
    if (e->life != tok.id) {
        goro__unlock(&e->lock);
        goro_err_free(cause);
        return -ESRCH;
    }
    goro__cancel_with_cause(e->g, cause);
    goro__unlock(&e->lock);
    return 0;
}
