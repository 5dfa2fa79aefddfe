/*
 * Groups: coroutines spawned together, waited for together, cancelled
 * together (docs/structured.md).
 *
 * The tree. A group belongs to the coroutine that made it (its owner;
 * none when a thread made it) and lists its live members; a coroutine
 * lists the groups it made. Cancelling a coroutine cancels its groups,
 * which cancel their members, which cancel their groups, and so on down:
 * goro__cancel_tree walks owner -> groups -> members while holding each
 * list's lock. The locks are object locks taken top down only (a tree
 * has no cycles), so the walk cannot deadlock:
 *   - an owner's groups_lock, then one of its groups' locks;
 *   - a group's lock, then one of its members' groups_lock.
 * A member leaves its group's list under the group's lock before its
 * record can be reused, and a group leaves its owner's list under the
 * owner's groups_lock before it is freed: whatever the walk finds under a
 * lock is alive while it holds that lock.
 *
 * Invariants, under the group's lock:
 *   1. running counts members admitted and not yet ended (a spawn takes its
 *      slot before it makes the coroutine, and gives it back if it fails):
 *      the wait returns only at running == 0, so a group outlives no member.
 *   2. Once cancelled, a group stays cancelled: no member is admitted, the
 *      spawners waiting for a slot are woken to fail, and every member
 *      alive then or linked later has its cancel flag set.
 *   3. A waiter for a slot or for the end is woken only after the lock is
 *      released, and the waker touches the group no more: the woken waiter
 *      may free it at once.
 *   4. running is never negative nor, in a group with a limit, above the
 *      limit (a spawn waits for a slot first) - unless goro_group_set_limit
 *      lowered it: then the members running go on and no spawn is admitted
 *      until running is below it; every listed member holds a slot, so at
 *      running == 0 the list of members is empty.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sched/sched.h"
#include "runtime.h"
#include "coro/coro.h"
#include "coro/token.h"
#include "wait/group.h"
#include "wait/waitq.h"
#include "wait/scope.h"

/* The two intrusive lists (a group's members, a coroutine's groups):
 * doubly linked through the fields prev and next of each node. */
#define LIST_PUSH(head, x, prev, next) do {                                   \
        (x)->prev = NULL;                                                     \
        (x)->next = (head);                                                   \
        if (head)                                                             \
            (head)->prev = (x);                                               \
        (head) = (x);                                                         \
    } while (0)
#define LIST_UNLINK(head, x, prev, next) do {                                 \
        if ((x)->prev)                                                        \
            (x)->prev->next = (x)->next;                                      \
        else                                                                  \
            (head) = (x)->next;                                               \
        if ((x)->next)                                                        \
            (x)->next->prev = (x)->prev;                                      \
        (x)->prev = (x)->next = NULL;                                         \
    } while (0)

struct goro_group {
    goro_lock_t lock;              /* guards everything below but timer */
    struct goro_timer timer;       /* the deadline: cancels the group */
    int64_t deadline;              /* its own, or its maker's in force if nearer;
                                      its members' deadline in force (0: none) */
    bool deadline_above;           /* ... and it was its maker's */
    struct goro *owner;            /* its maker (NULL: a thread); under the owner's groups_lock */
    struct goro_group *owner_prev, *owner_next;   /* the owner's list */
    struct goro *members;          /* live members (g->group_prev/next) */
    int running;                   /* invariant 1 */
    int limit;                     /* 0: none */
    int policy;                    /* enum goro_group_policy */
    bool waited;                   /* its wait has returned: admits nothing */
    int8_t lent;                   /* the class lent to every member, plus one (0: none) */
    int cancel_code;               /* 0, or why it was cancelled (ECANCELED, ETIMEDOUT) */
    bool inherited;                /* ... by a cancel from above it, not its own */
    goro_err_t *cause;             /* the cancel's cause (owned), or NULL: none given */
    struct goro_watchers watch;       /* its done channel and after-functions (scope.c) */
    struct goro_afterfn *tell;     /* taken by the cancel, told once the lock is dropped */
    bool won;                      /* GORO_GROUP_FIRST_RESULT: a member succeeded */
    long result;                   /* that member's result */
    int spawned, failed;
    goro_err_t *first;             /* FIRST_ERROR: the first failure before any cancel */
    goro_err_t **fails;            /* the others: every failure, in order of ending */
    int nfails, fails_cap;
    struct goro_waitq admit;       /* spawners waiting for a slot */
    struct goro_waitq done;        /* the one waiting for the end */
    char name[32];
};

/* "group \"name\"", or "group" for one without a name: how errors and
 * messages name it. */
static const char *label(const struct goro_group *grp, char *buf, size_t len)
{
    if (!grp->name[0])
        return "group";
    snprintf(buf, len, "group \"%s\"", grp->name);
    return buf;
}

/* ---- priorities down the tree ---- */

static void group_lend(struct goro_group *grp, int prio);

/* Lends prio to g and everything below it: the members of every group g
 * made, recursively, with the locks taken as a cancel takes them (top). */
static void lend_tree(struct goro *g, int prio)
{
    goro__prio_lend(g, prio);
    goro__lock(&g->groups_lock);
    for (struct goro_group *grp = g->groups; grp; grp = grp->owner_next)
        group_lend(grp, prio);
    goro__unlock(&g->groups_lock);
}

/* grp's waiter, or a waiter above it, is of class prio: every member runs
 * at least at it until it ends (its loans end with it), and so does each
 * member linked later (goro__group_link). Raised only, never lowered: the
 * wait that lends ends only when every member has. */
static void group_lend(struct goro_group *grp, int prio)
{
    if (prio < GORO_PRIO_NORMAL)
        return;
    goro__lock(&grp->lock);
    /* While every coroutine is NORMAL, a NORMAL loan changes no class: the
     * walk over the members (a miss on each record) is skipped. Read under
     * the lock: a member spawned LOW was marked before it was linked. */
    bool walk = prio > GORO_PRIO_NORMAL || goro__classes_in_use();
    if (grp->lent < prio + 1) {
        grp->lent = (int8_t)(prio + 1);
        for (struct goro *m = walk ? grp->members : NULL; m; m = m->group_next)
            lend_tree(m, prio);
    }
    goro__unlock(&grp->lock);
}

/* ---- cancellation down the tree ---- */

static void cancel_members(struct goro_group *grp, int code, const goro_err_t *cause,
                           struct goro **wake);
static void fails_free(struct goro_group *grp);
static void group_cancel(struct goro_group *grp, int code, const goro_err_t *cause,
                         bool inherited);

/* h's flag, its current wait, then every group it made (see the top).
 * The groups learn why (code, and a copy of cause): a deadline above them
 * reaches them as ETIMEDOUT. */
void goro__cancel_tree_cause(struct goro *h, int code, const goro_err_t *cause)
{
    /* Its watchers first: once woken, h may run to its end, which tells
     * them it is over (they would miss this cancel). */
    goro__lock(&h->groups_lock);
    struct goro_afterfn *tell = goro__scope_fire(&h->watch);
    goro__unlock(&h->groups_lock);
    if (goro__cancel_claim(h))
        goro__ready(h);
    goro__lock(&h->groups_lock);
    for (struct goro_group *grp = h->groups; grp; grp = grp->owner_next)
        group_cancel(grp, code, cause, true);
    goro__unlock(&h->groups_lock);
    goro__scope_tell(tell, true);
}

void goro__cancel_tree(struct goro *h)
{
    goro__cancel_tree_cause(h, ECANCELED, NULL);
}

/* Under grp's lock: invariant 2. The first cancel sets why (code, a copy
 * of cause), which goes down to every member's groups. Spawners waiting
 * for a slot are chained on *wake, to be woken once the lock is dropped. */
static void cancel_members(struct goro_group *grp, int code, const goro_err_t *cause,
                           struct goro **wake)
{
    if (!grp->cancel_code) {
        grp->cancel_code = code;
        grp->cause = cause ? goro_err_copy(cause) : NULL;
        GORO_ASSERT(!grp->tell);
        grp->tell = goro__scope_fire(&grp->watch);
    }
    *wake = goro__waitq_take_all(&grp->admit, false, 0, *wake);
    /* group: once cancelled, no spawner waits for a slot (2) */
    GORO_ASSERT(grp->cancel_code && !grp->admit.head);
    for (struct goro *m = grp->members; m; m = m->group_next)
        goro__cancel_tree_cause(m, grp->cancel_code, grp->cause);
}

static void group_cancel(struct goro_group *grp, int code, const goro_err_t *cause,
                         bool inherited)
{
    struct goro *wake = NULL;
    goro__lock(&grp->lock);
    if (!grp->cancel_code)
        grp->inherited = inherited;
    cancel_members(grp, code, cause, &wake);
    struct goro_afterfn *tell = grp->tell;
    grp->tell = NULL;
    goro__unlock(&grp->lock);
    goro__ready_list(wake);
    goro__scope_tell(tell, true);
}

/* Why the calling coroutine was cancelled: the cause given to it, else
 * why its group was cancelled (the pointer stays valid while it is a
 * member: a group's cause is set once), else a plain cancel's ECANCELED. */
const goro_err_t *goro_cause(void)
{
    struct goro *self = goro__current();
    if (!self || (self->flags & GORO_F_EXTERNAL))
        return NULL;
    goro_err_t *own = atomic_load_explicit(&self->cause, memory_order_acquire);
    if (own)
        return own;
    const goro_err_t *c = NULL;
    struct goro_group *grp = self->group;
    if (grp) {
        goro__lock(&grp->lock);
        c = grp->cause ? grp->cause
            : grp->cancel_code ? goro__err_stand_in(grp->cancel_code) : NULL;
        goro__unlock(&grp->lock);
    }
    if (!c && self->in_force && goro__now() >= self->in_force)
        c = goro__err_stand_in(ETIMEDOUT);  /* its deadline in force passed */
    if (!c && atomic_load(&self->cancelled))
        c = goro__err_stand_in(ECANCELED);
    return c;
}

/* goro_cancel_cause's work, h alive: h keeps cause (or frees it: it has
 * one already, or has ended), and its groups a copy of the cause it has. */
void goro__cancel_with_cause(struct goro *h, goro_err_t *cause)
{
    /* The groups copy from a copy of our own: once published, h's cause
     * may be freed by h's end at any moment. */
    goro_err_t *mine = goro_err_copy(cause);
    goro_err_t *expect = NULL;
    if (!atomic_compare_exchange_strong(&h->cause, &expect, cause)) {
        goro_err_free(cause);       /* the first cause wins, or h has ended */
        goro_err_free(mine);
        mine = NULL;                /* its groups have the first one's */
    }
    goro__cancel_tree_cause(h, ECANCELED, mine);
    goro_err_free(mine);
}

/* The deadline, on a runtime thread's g0 or sysmon: never switches. */
static int64_t deadline_fire(struct goro_timer *t, int64_t now)
{
    (void)now;
    struct goro_group *grp = (struct goro_group *)((char *)t - offsetof(struct goro_group, timer));
    group_cancel(grp, ETIMEDOUT, NULL, grp->deadline_above);
    return -1;
}

/* ---- making and freeing ---- */

static void owner_link(struct goro_group *grp, struct goro *owner)
{
    grp->owner = owner;
    if (!owner)
        return;
    goro__lock(&owner->groups_lock);
    LIST_PUSH(owner->groups, grp, owner_prev, owner_next);
    goro__unlock(&owner->groups_lock);
}

static void owner_unlink(struct goro_group *grp)
{
    struct goro *owner = grp->owner;
    if (!owner)
        return;
    goro__lock(&owner->groups_lock);
    LIST_UNLINK(owner->groups, grp, owner_prev, owner_next);
    grp->owner = NULL;
    goro__unlock(&owner->groups_lock);
}

int goro_group_new(goro_group_t **out, const goro_group_attr_t *attr)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (attr && (attr->limit < 0 || attr->policy < GORO_GROUP_FIRST_ERROR ||
                 attr->policy > GORO_GROUP_FIRST_RESULT))
        return -EINVAL;
    int err = goro__ensure_started();   /* the deadline's timer needs the runtime */
    if (err)
        return err;
    struct goro_group *grp = calloc(1, sizeof *grp);
    if (!grp)
        return -ENOMEM;
    grp->limit = attr ? attr->limit : 0;
    grp->policy = attr ? attr->policy : GORO_GROUP_FIRST_ERROR;
    if (attr && attr->name)
        snprintf(grp->name, sizeof grp->name, "%s", attr->name);
    grp->timer.kind = GORO_TIMER_FUNC;
    grp->timer.fire = deadline_fire;
    atomic_init(&grp->timer.idx, GORO_TIMER_OFF);
    struct goro *self = goro__current();
    owner_link(grp, self);
    /* Made by a cancelled coroutine: cancelled from the start, as every
     * later wait of its maker is. A cancel that walked the maker's list
     * before the link set the flag before it, so it is seen here. */
    if (self && atomic_load(&self->cancelled)) {
        const goro_err_t *why = goro_cause();   /* before the lock: it takes its group's */
        goro_err_t *cause = why && goro_err_msg(why) ? goro_err_copy(why) : NULL;
        goro__lock(&grp->lock);     /* a cancel walk may be here already */
        if (!grp->cancel_code) {
            grp->cancel_code = goro_err_code(why) == ETIMEDOUT ? ETIMEDOUT : ECANCELED;
            grp->inherited = true;
            grp->cause = cause;
            cause = NULL;
        }
        goro__unlock(&grp->lock);
        goro_err_free(cause);
    }
    /* A group made under a deadline in force has it too: its members
     * inherit it, and it cancels them when it passes. */
    int64_t own = attr && attr->deadline > 0 ? attr->deadline : GORO_FOREVER;
    int64_t dl = goro__deadline_nearer(own, self ? self->in_force : 0);
    grp->deadline = dl < 0 ? 0 : dl ? dl : 1;
    grp->deadline_above = dl != own;
    if (grp->deadline)
        goro__timer_start(&grp->timer, goro__current_p(), grp->deadline);
    *out = grp;
    return 0;
}

int goro_group_free(goro_group_t *grp)
{
    if (!grp)
        return -EINVAL;
    goro__lock(&grp->lock);
    int running = grp->running;
    goro__unlock(&grp->lock);
    if (running) {
        char b[48];
        fprintf(stderr, "goro: goro_group_free: %s still has %d member%s; "
                "goro_group_wait for it first\n", label(grp, b, sizeof b), running,
                running == 1 ? "" : "s");
        return -EBUSY;
    }
    goro__timer_stop(&grp->timer);  /* waits for a deadline that is firing */
    owner_unlink(grp);
    goro__lock(&grp->lock);
    struct goro_afterfn *tell = goro__scope_end(&grp->watch);   /* never waited for */
    goro__unlock(&grp->lock);
    goro__scope_tell(tell, false);
    goro__scope_free(&grp->watch);
    goro_err_free(grp->first);      /* never waited for */
    goro_err_free(grp->cause);
    fails_free(grp);
    free(grp);
    return 0;
}

/* A coroutine ends with groups it made still allocated: they leave its
 * list (nobody could cancel them through it any more). A group still
 * holding members outlives its maker: said once per group. */
static void orphan_groups(struct goro *self)
{
    goro__lock(&self->groups_lock);
    struct goro_group *grp;
    while ((grp = self->groups)) {
        LIST_UNLINK(self->groups, grp, owner_prev, owner_next);
        char b[48];
        goro__lock(&grp->lock);
        int running = grp->running;
        const char *what = label(grp, b, sizeof b);
        grp->owner = NULL;
        goro__unlock(&grp->lock);
        if (running)
            fprintf(stderr, "goro: coroutine %llu ended before its %s (%d member%s still "
                    "running); goro_group_wait for a group before its maker ends\n",
                    (unsigned long long)self->id, what, running, running == 1 ? "" : "s");
    }
    goro__unlock(&self->groups_lock);
}

/* ---- members ---- */

/* Under grp's lock: why it admits no member (its wait has returned, or it
 * was cancelled), or 0. */
static int refusal(const struct goro_group *grp)
{
    return grp->waited ? -EINVAL : grp->cancel_code ? -ECANCELED : 0;
}

/* Read without the lock: goro_group_set_limit moves a limit between 0
 * and n only while no member runs (and spawns into it must not race it). */
bool goro__group_limited(const struct goro_group *grp)
{
    return __atomic_load_n(&grp->limit, __ATOMIC_RELAXED) != 0;
}

int goro__group_admit(struct goro_group *grp, bool wait)
{
    goro__lock(&grp->lock);
    for (;;) {
        int err = refusal(grp);
        if (err) {
            goro__unlock(&grp->lock);
            return err;
        }
        if (grp->running < grp->limit) {
            grp->running++;
            goro__unlock(&grp->lock);
            return 0;
        }
        if (!wait) {
            goro__unlock(&grp->lock);
            return -EAGAIN;
        }
        /* group: a spawner waits for a slot only when all are taken (4);
         * more may run than the limit after goro_group_set_limit lowered it */
        GORO_ASSERT(grp->running >= grp->limit);
        struct goro_waiter w = { .g = goro__waiter_self() };
        err = goro__waitq_wait(&grp->admit, &w, &grp->lock, GORO_W_GROUP, grp,
                               GORO_FOREVER, false);
        if (err)
            return err;             /* the spawner was cancelled */
        goro__lock(&grp->lock);
    }
}

/* Gives a slot back: the next spawner waiting for one, and at the last
 * member the waiters for the end, are chained on *wake. */
static void slot_free(struct goro_group *grp, struct goro **wake)
{
    grp->running--;
    /* group: never negative; at 0 no member is left (invariants 1, 4) */
    GORO_ASSERT(grp->running >= 0 && (grp->running > 0 || !grp->members));
    struct goro_waiter *w = goro__waitq_pop(&grp->admit);
    if (w) {
        w->g->next = *wake;
        *wake = w->g;
    }
    if (grp->running == 0)
        *wake = goro__waitq_take_all(&grp->done, true, 0, *wake);
}

void goro__group_admit_undo(struct goro_group *grp)
{
    struct goro *wake = NULL;
    goro__lock(&grp->lock);
    slot_free(grp, &wake);
    goro__unlock(&grp->lock);
    goro__ready_list(wake);         /* invariant 3 */
}

int goro__group_link(struct goro_group *grp, struct goro *g, bool admitted)
{
    goro__lock(&grp->lock);
    int err = admitted ? 0 : refusal(grp);
    if (err) {
        goro__unlock(&grp->lock);
        return err;
    }
    if (!admitted)
        grp->running++;             /* invariant 1: before it can run */
    /* group: a member holds a slot (4); the limit was checked when it took
     * the slot, and may have been lowered since (goro_group_set_limit) */
    GORO_ASSERT(grp->running > 0);
    /* group: a cancelled group admits nobody new (2) */
    GORO_ASSERT(admitted || !grp->cancel_code);
    g->group = grp;
    g->in_force = grp->deadline;          /* before it runs: its own from then on */
    LIST_PUSH(grp->members, g, group_prev, group_next);
    grp->spawned++;
    if (grp->cancel_code)
        atomic_store(&g->cancelled, 1);   /* invariant 2: it has not run yet */
    if (grp->lent)
        lend_tree(g, grp->lent - 1);
    goro__unlock(&grp->lock);
    return 0;
}

/* Under grp's lock: a member failed with e (owned from here on). One
 * the group does not keep goes to *drop, for the caller to free after the
 * lock: an error may carry a C++ exception, whose destructor is the
 * program's code and may wait (a switch under a runtime lock) or call the
 * group again (a lock taken twice). */
static void member_failed(struct goro_group *grp, goro_err_t *e, struct goro **wake,
                          goro_err_t **drop)
{
    grp->failed++;
    if (grp->policy == GORO_GROUP_FIRST_ERROR) {
        if (!grp->cancel_code && !grp->first) {
            grp->first = e;
            cancel_members(grp, ECANCELED, e, wake);   /* the members' cause */
        } else {
            *drop = e;              /* a consequence of the first, or of the cancel */
        }
        return;
    }
    if (grp->nfails == grp->fails_cap) {
        int cap = grp->fails_cap ? 2 * grp->fails_cap : 8;
        goro_err_t **more = realloc(grp->fails, (size_t)cap * sizeof *more);
        if (!more) {
            *drop = e;              /* counted in failed, not described */
            return;
        }
        grp->fails = more;
        grp->fails_cap = cap;
    }
    grp->fails[grp->nfails++] = e;
}

/* Under grp's lock: a member succeeded with result. */
static void member_succeeded(struct goro_group *grp, long result, struct goro **wake)
{
    if (grp->policy != GORO_GROUP_FIRST_RESULT || grp->won || grp->cancel_code)
        return;
    grp->won = true;
    grp->result = result;
    cancel_members(grp, ECANCELED, NULL, wake);   /* the others are not needed */
}

/* A coroutine ends (on its own stack, before its last switch): its groups
 * are orphaned if it did not free them, and it leaves its own group,
 * handing over its error (its own, or one made from a negative result). */
void goro__group_exit(struct goro *g, long result)
{
    goro__lock(&g->groups_lock);
    struct goro_afterfn *tell = goro__scope_end(&g->watch);
    goro__unlock(&g->groups_lock);
    goro__scope_tell(tell, false);  /* its after-functions will not run */
    if (g->groups)
        orphan_groups(g);
    goro_err_t *cause = atomic_exchange(&g->cause, GORO__CAUSE_ENDED);
    if (cause)
        goro_err_free(cause);       /* a later goro_cancel_cause frees its own */
    struct goro_group *grp = g->group;
    if (!grp)
        return;
    goro_err_t *e = goro__err_take_at_end(g, result);
    /* Its group's deadline passed before it ended (its waits saw it, the
     * group's timer may not have run yet): the deadline comes first, so
     * the group's outcome does not depend on which of the two ran first. */
    if (grp->deadline && goro__now() >= grp->deadline)
        group_cancel(grp, ETIMEDOUT, NULL, grp->deadline_above);
    struct goro *wake = NULL;
    goro_err_t *drop = NULL;
    goro__lock(&grp->lock);
    LIST_UNLINK(grp->members, g, group_prev, group_next);
    g->group = NULL;
    if (e)
        member_failed(grp, e, &wake, &drop);
    else
        member_succeeded(grp, result, &wake);
    slot_free(grp, &wake);
    struct goro_afterfn *gtell = grp->tell;
    grp->tell = NULL;
    goro__unlock(&grp->lock);
    goro_err_free(drop);            /* after the lock (member_failed) */
    goro__ready_list(wake);         /* invariant 3: grp may be gone now */
    goro__scope_tell(gtell, true);  /* its after-functions, if this failure cancelled it */
}

/* ---- cancelling and waiting ---- */

int goro_group_cancel(goro_group_t *grp)
{
    if (!grp)
        return -EINVAL;
    group_cancel(grp, ECANCELED, NULL, false);
    return 0;
}

int goro_group_cancel_cause(goro_group_t *grp, goro_err_t *cause)
{
    if (!grp) {
        goro_err_free(cause);
        return -EINVAL;
    }
    group_cancel(grp, ECANCELED, cause, false);
    goro_err_free(cause);           /* the group keeps a copy (first cause wins) */
    return 0;
}

static void fails_free(struct goro_group *grp)
{
    for (int i = 0; i < grp->nfails; i++)
        goro_err_free(grp->fails[i]);
    free(grp->fails);
    grp->fails = NULL;
    grp->nfails = grp->fails_cap = 0;
}

/* Failures taken out of a group under its lock, freed after it
 * (member_failed says why). */
struct fails_out {
    goro_err_t **errs;
    int n;
};

static void fails_take(struct goro_group *grp, struct fails_out *out)
{
    out->errs = grp->fails;
    out->n = grp->nfails;
    grp->fails = NULL;
    grp->nfails = grp->fails_cap = 0;
}

static void fails_out_free(struct fails_out *out)
{
    for (int i = 0; i < out->n; i++)
        goro_err_free(out->errs[i]);
    free(out->errs);
}

static goro_err_t *cancel_error(const struct goro_group *grp)
{
    char b[48];
    const char *l = label(grp, b, sizeof b);
    goro_err_t *cause = grp->cause ? goro_err_copy(grp->cause) : NULL;
    if (grp->cancel_code == ETIMEDOUT)
        return grp->inherited
                   ? goro_err_wrap(cause, ETIMEDOUT, "%s: a deadline above it passed", l)
                   : goro_err_wrap(cause, ETIMEDOUT, "%s: its deadline passed", l);
    return goro_err_wrap(cause, ECANCELED, "%s was cancelled", l);
}

/* Under grp's lock, once every member has ended: what the wait returns.
 * The failures are handed over, or go to *out to be freed after the lock. */
static goro_err_t *outcome(struct goro_group *grp, struct fails_out *out)
{
    if (grp->policy == GORO_GROUP_FIRST_ERROR) {
        goro_err_t *e = grp->first;
        grp->first = NULL;
        return e ? e : grp->cancel_code ? cancel_error(grp) : NULL;
    }
    if (grp->won || (!grp->failed && !grp->cancel_code)) {
        fails_take(grp, out);
        return NULL;
    }
    /* A cancel by a win was handled above: cancel_code is the group's own. */
    int code = grp->cancel_code ? grp->cancel_code
                                : grp->nfails ? goro_err_code(grp->fails[0]) : EIO;
    goro_err_t *all;
    char b[48];
    if (grp->policy == GORO_GROUP_FIRST_RESULT)
        all = goro_err_new(code, "%s: none of its %d members succeeded%s",
                           label(grp, b, sizeof b), grp->spawned,
                           grp->cancel_code == ETIMEDOUT ? " before its deadline" :
                           grp->cancel_code ? " before it was cancelled" : "");
    else
        all = goro_err_new(code, "%s: %d of its %d members failed%s", label(grp, b, sizeof b),
                           grp->failed, grp->spawned,
                           grp->cancel_code == ETIMEDOUT ? " (its deadline passed)" :
                           grp->cancel_code ? " (it was cancelled)" : "");
    for (int i = 0; i < grp->nfails; i++)
        if (goro_err_add(all, grp->fails[i]) == 0)
            grp->fails[i] = NULL;
    fails_take(grp, out);
    return all;
}

#ifdef GORO_DEBUG
void (*goro__debug_group_lent)(struct goro *g);
#endif

int goro_group_wait(goro_group_t *grp, long *result, goro_err_t **err)
{
    if (err)
        *err = NULL;
    if (!grp)
        return -EINVAL;
    struct goro *self = goro__current();
    if (self && self->group == grp)
        return -EDEADLK;            /* a member would wait for itself */
    /* A cancelled waiter still waits (its children must end first), but
     * its cancel reaches the group, even when it did not make it. */
    if (self && atomic_load(&self->cancelled))
        group_cancel(grp, ECANCELED, NULL, false);
    /* lent: the class this wait lends, read once. It is the class the park
     * below is armed with, so a loan that lands after this read - before
     * the park, or while parked - is a RECLASS (sched/park.c) and reaches
     * the members; read again at the park, it would be taken as lent
     * already and the members would never get it. */
    int lent = self ? goro__prio_of(self) : GORO_PRIO_NORMAL;
    if (self)
        group_lend(grp, lent);
#ifdef GORO_DEBUG
    if (self && goro__debug_group_lent)
        goro__debug_group_lent(self);
#endif
    goro__lock(&grp->lock);
    if (grp->waited) {
        goro__unlock(&grp->lock);
        return -EINVAL;
    }
    while (grp->running > 0) {
        /* Firm: neither a cancel nor a deadline ends it, only the last
         * member - or a change of the waiter's class (RECLASS), which the
         * members get if it is higher (group_lend), and it waits on. */
        struct goro_waiter w = { .g = goro__waiter_self() };
        struct goro_park how = { .why = GORO_W_GROUP, .obj = grp, .unlock = goro__unlock_cb,
                                 .arg = &grp->lock, .deadline = GORO_FOREVER, .firm = true,
                                 .lends = self != NULL, .lent = (int8_t)lent };
        if (goro__waitq_park(&grp->done, &w, &grp->lock, &how) == GORO_WAKE_RECLASS) {
            lent = goro__prio_of(self);
            group_lend(grp, lent);
        }
        goro__lock(&grp->lock);
    }
    /* group: its wait returns only when no member is left (1) */
    GORO_ASSERT(grp->running == 0 && !grp->members && !grp->done.head);
    grp->waited = true;
    struct fails_out dropped = { NULL, 0 };
    goro_err_t *e = outcome(grp, &dropped);
    long r = grp->won ? grp->result : 0;
    struct goro_afterfn *tell = goro__scope_end(&grp->watch);
    goro__unlock(&grp->lock);
    fails_out_free(&dropped);       /* after the lock (member_failed) */
    goro__scope_tell(tell, false);  /* over: its after-functions will not run */
    goro__timer_stop(&grp->timer);  /* after the lock: a firing deadline takes it */
    if (result)
        *result = r;
    int code = e ? -goro_err_code(e) : 0;
    if (err)
        *err = e;
    else
        goro_err_free(e);
    return code;
}

int goro_group_set_limit(goro_group_t *grp, int limit)
{
    if (!grp || limit < 0)
        return -EINVAL;
    struct goro *wake = NULL;
    goro__lock(&grp->lock);
    if ((limit == 0) != (grp->limit == 0) && grp->running) {
        goro__unlock(&grp->lock);
        return -EBUSY;              /* a spawn may be deciding how to take a slot */
    }
    __atomic_store_n(&grp->limit, limit, __ATOMIC_RELAXED);
    /* A raised limit lets waiting spawners in now; a lowered one lets
     * the running members finish and admits none until below it. */
    for (int free = limit - grp->running; free > 0; free--) {
        struct goro_waiter *w = goro__waitq_pop(&grp->admit);
        if (!w)
            break;
        w->g->next = wake;
        wake = w->g;
    }
    goro__unlock(&grp->lock);
    goro__ready_list(wake);
    return 0;
}

int goro_group_running(const goro_group_t *grp)
{
    if (!grp)
        return -EINVAL;
    goro__lock((goro_lock_t *)&grp->lock);
    int n = grp->running;
    goro__unlock((goro_lock_t *)&grp->lock);
    return n;
}

/* ---- watching: the done channel and after-functions (wait/scope.c) ---- */

goro_chan_t *goro_group_done(goro_group_t *grp)
{
    if (!grp)
        return NULL;
    goro__lock(&grp->lock);
    goro_chan_t *ch = goro__scope_done(&grp->watch);
    goro__unlock(&grp->lock);
    return ch;
}

int goro_group_after_cancel(goro_group_t *grp, void (*fn)(void *), void *arg,
                            goro_after_t **stop)
{
    if (!grp) {
        if (stop)
            *stop = NULL;
        return -EINVAL;
    }
    return goro__scope_after(&grp->watch, &grp->lock, fn, arg, stop);
}
