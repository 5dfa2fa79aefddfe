/* wait/group.c: the tree of groups, for coro/ - a spawn into a group, a
 * coroutine's end and goro_cancel call up into it.
 *
 * contract groups for coro: goro__cancel_tree goro__group_limited
 *     goro__group_admit goro__group_admit_undo goro__group_link
 *     goro__group_exit goro__cancel_with_cause goro__scope_free
 */
#ifndef GORO_WAIT_GROUP_H
#define GORO_WAIT_GROUP_H

#include "internal.h"

/* goro_cancel and a token's cancel: h's flag and current wait, then every
 * group h made, down the tree. */
GORO_HIDDEN void goro__cancel_tree(struct goro *h);
/* The same with why: code (ETIMEDOUT for a deadline above) and a cause
 * the groups copy (NULL: none). */
GORO_HIDDEN void goro__cancel_tree_cause(struct goro *h, int code, const goro_err_t *cause);
/* goro_cancel_cause: h keeps cause (taken), or frees it if it has one. */
GORO_HIDDEN void goro__cancel_with_cause(struct goro *h, goro_err_t *cause);
/* A spawn into grp. With a limit it takes a slot first (may wait; 0,
 * -ECANCELED, -EINVAL), then gives it back if the spawn failed, or links
 * the new member (admitted). Without one, the made coroutine is admitted
 * and linked in one pass (0, or the same refusals: the spawner then
 * discards it). */
GORO_HIDDEN bool goro__group_limited(const struct goro_group *grp);
GORO_HIDDEN int goro__group_admit(struct goro_group *grp, bool wait);
GORO_HIDDEN void goro__group_admit_undo(struct goro_group *grp);
GORO_HIDDEN int goro__group_link(struct goro_group *grp, struct goro *g, bool admitted);
/* A coroutine's end, on its own stack: orphans the groups it made and
 * leaves its own, with its error or result. */
GORO_HIDDEN void goro__group_exit(struct goro *g, long result);

/* A handle's release (coro.c): h's done channel (wait/scope.c) goes. */
GORO_HIDDEN void goro__scope_free(struct goro_watchers *w);

#endif
