/* wait/scope.c: watching a scope (a coroutine or a group) for its cancel -
 * its done channel and the functions run after it (docs/structured.md).
 * Not installed. */
#ifndef GORO_WAIT_SCOPE_H
#define GORO_WAIT_SCOPE_H

#include "internal.h"

struct goro_afterfn;

/* struct goro_watchers is in internal.h (a coroutine embeds one). */


/* Under the scope's lock. fire: the cancel (closes done, takes the
 * after-functions to be told); end: the scope is over (takes them to be
 * told they will not run). Each returns the list taken, which the caller
 * passes to goro__scope_tell once the lock is dropped. */
GORO_HIDDEN struct goro_afterfn *goro__scope_fire(struct goro_watchers *w);
GORO_HIDDEN struct goro_afterfn *goro__scope_end(struct goro_watchers *w);
GORO_HIDDEN void goro__scope_tell(struct goro_afterfn *list, bool fired);
/* Under the scope's lock: the done channel, made now if needed (NULL: no
 * memory). */
GORO_HIDDEN goro_chan_t *goro__scope_done(struct goro_watchers *w);
/* Registers fn(arg) on w, a live scope's watch guarded by lk. */
GORO_HIDDEN int goro__scope_after(struct goro_watchers *w, goro_lock_t *lk, void (*fn)(void *),
                                  void *arg, goro_after_t **stop);
/* The scope is freed: its done channel goes with it. */
GORO_HIDDEN void goro__scope_free(struct goro_watchers *w);

#endif
