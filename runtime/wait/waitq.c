/* Parking on a wait queue under its object's lock: the one wait of
 * channels and the sync primitives (waitq.h). */
#include "internal.h"
#include "sched/sched.h"
#include "wait/waitq.h"

/* Inlined into goro__waitq_wait: every channel wait parks through it. */
static inline int waitq_park(struct goro_waitq *q, struct goro_waiter *w, goro_lock_t *lk,
                             const struct goro_park *how)
{
    goro__waitq_push(q, w);
    int outcome = goro__park(how);
    if (outcome == GORO_WAKE_DONE)
        return outcome;
    /* Ended another way (a deadline, a cancel, a change of class): w may
     * still be queued. */
    goro__lock(lk);
    goro__waitq_remove(q, w);
    goro__unlock(lk);
    return outcome;
}

int goro__waitq_park(struct goro_waitq *q, struct goro_waiter *w, goro_lock_t *lk,
                     const struct goro_park *how)
{
    return waitq_park(q, w, lk, how);
}

int goro__waitq_wait(struct goro_waitq *q, struct goro_waiter *w, goro_lock_t *lk,
                     enum goro_wait why, const void *obj, int64_t deadline, bool firm)
{
    int err = firm ? 0 : goro__wait_check(deadline);
    if (err) {
        goro__unlock(lk);
        return goro__wait_refused(err);
    }
    struct goro_park how = { .why = why, .obj = obj, .unlock = goro__unlock_cb, .arg = lk,
                             .deadline = deadline, .firm = firm };
    int outcome = waitq_park(q, w, lk, &how);
    return outcome == GORO_WAKE_DONE ? 0 : goro__wake_error(outcome);
}
