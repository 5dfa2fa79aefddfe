/* Tokens (runtime/coro/token.c): naming one life of a coroutine by value, so
 * that it can be cancelled after its handle is gone. Not installed. */
#ifndef GORO_TOKEN_H
#define GORO_TOKEN_H

#include "internal.h"

/* struct goro.token_state, per life: whether a token was taken. */
enum goro_token_state {
    GORO_TOKEN_NONE,               /* no token taken yet */
    GORO_TOKEN_LIVE,               /* taken: the life is published in the table */
    GORO_TOKEN_ENDED,              /* the coroutine has ended */
};

GORO_HIDDEN void goro__token_unpublish(struct goro *g);

/* The coroutine g is ending (its function returned or it called
 * goro_exit): tokens of this life answer -ESRCH from now on. Runs on g;
 * costs one atomic exchange when no token was taken. */
static inline void goro__token_life_end(struct goro *g)
{
    if (atomic_exchange_explicit(&g->token_state, GORO_TOKEN_ENDED, memory_order_acq_rel) ==
        GORO_TOKEN_LIVE)
        goro__token_unpublish(g);
}

/* The slab g is being unmapped: its table entry goes back for reuse. */
GORO_HIDDEN void goro__token_slot_put(struct goro *g);

/* coro.c: marks h cancelled; true if that ended a wait (the caller then
 * makes h runnable). h must be alive and not change lives meanwhile. */
GORO_HIDDEN bool goro__cancel_claim(struct goro *h);

#endif
