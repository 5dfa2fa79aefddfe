/*
 * What sysmon does for the deadline class (deadline.c; docs/deadline.md):
 * it stops a reserved coroutine whose budget is spent, cuts the slice of
 * a lower class - or of a later deadline - for a reserved coroutine
 * queued, and sees that the timers which bring reserved coroutines back
 * (their next period, their replenishment) fire on time.
 *
 * Invariant "releases": a reservation is on the releases list exactly
 * while its coroutine waits for such a time (r->releasing); release_at is
 * that time until sysmon has run the due timers for it (then 0), and
 * releases.first the earliest release_at. All of it under releases.lock,
 * a leaf; sysmon reads first alone, an atomic, to sleep until it.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "sched/inner.h"
#include "sched/deadline.h"
#include "sched/dl_res.h"

/* Reservations whose coroutine waits for a time on a P's timer heap: its
 * next period, or its replenishment. A busy P runs its due timers only at
 * a switch - or at sysmon's look, a millisecond late (sysmon.c,
 * TIMERS_STARVED) - and the start of a period must not wait behind a
 * NORMAL coroutine's slice: sysmon wakes at the first of these times and
 * runs the due timers of busy Ps (goro__dl_watch). */
static struct {
    goro_lock_t lock;
    struct goro_dlres *head;
    _Atomic int64_t first;          /* the earliest release_at (0: none) */
} releases = { .lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF) };

/* Under releases.lock: first follows the list. */
static void releases_first(void)
{
    int64_t f = 0;
    for (struct goro_dlres *r = releases.head; r; r = r->release_next)
        if (r->release_at && (!f || r->release_at < f))
            f = r->release_at;
    st(&releases.first, f);
}

/* r's coroutine waits for at; sysmon is told (its sleep may end later). */
void goro__dl_release_add(struct goro_dlres *r, int64_t at)
{
    goro__lock(&releases.lock);
    if (!r->releasing) {
        r->release_next = releases.head;
        releases.head = r;
        r->releasing = true;
    }
    r->release_at = at;
    releases_first();
    goro__unlock(&releases.lock);
    goro__sysmon_poke_by(at);
}

/* It is back (or released): off the list. */
void goro__dl_release_drop(struct goro_dlres *r)
{
    goro__lock(&releases.lock);
    if (r->releasing) {
        struct goro_dlres **at = &releases.head;
        while (*at != r) {
            GORO_ASSERT(*at);       /* releases: releasing means listed */
            at = &(*at)->release_next;
        }
        *at = r->release_next;
        r->releasing = false;
        r->release_at = 0;
        releases_first();
    }
    goro__unlock(&releases.lock);
}

/* sysmon: the releases due by now are marked seen and the due timers of
 * busy Ps run (an idle P's M sleeps until its first timer itself); *wake
 * comes no later than the next release. */
static void releases_run(int64_t now, int64_t *wake)
{
    int64_t f = ld(&releases.first);
    if (f && f > now) {
        if (f < *wake)
            *wake = f;
        return;
    }
    if (!f)
        return;
    goro__lock(&releases.lock);
    for (struct goro_dlres *r = releases.head; r; r = r->release_next)
        if (r->release_at && r->release_at <= now)
            r->release_at = 0;
    releases_first();
    f = ld(&releases.first);
    goro__unlock(&releases.lock);
    if (f && f < *wake)
        *wake = f;
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *p = &goro__sched.procs[i];
        if (!atomic_load_explicit(&p->running, memory_order_relaxed) ||
            goro__timers_first(p) > now)
            continue;
        struct goro_polled woke = { NULL, NULL, 0 };
        if (goro__timers_run(p, now, &woke) > 0)
            goro__inject_global(&woke);
    }
}

/* The P sysmon cuts for a reserved coroutine queued with deadline key:
 * one running a lower class, else the one running the latest deadline
 * later than key (NULL: every P runs an earlier or equal deadline). EDF
 * is preemptive: without this cut, a job of a 1 ms period queued behind
 * two of 3-4 ms ran only when one of them ended. */
static struct goro_p *cut_for(int64_t key)
{
    struct goro_p *victim = NULL;
    int64_t worst = key;
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *v = &goro__sched.procs[i];
        if (!atomic_load_explicit(&v->running, memory_order_relaxed))
            continue;
        if (atomic_load_explicit(&v->running_prio, memory_order_relaxed) < GORO_PRIO_DL)
            return v;
        int64_t k = ld(&v->dl_running);
        if (k > worst) {
            victim = v;
            worst = k;
        }
    }
    return victim;
}

/* Queued with key while no P idles (an idle one is woken for it,
 * invariant 5) and some P runs a lower class or a later deadline: sysmon
 * is woken now to cut one, rather than at its next round (up to a
 * quarter slice away). */
bool goro__dl_must_cut(int64_t key)
{
    return atomic_load_explicit(&goro__sched.npidle, memory_order_relaxed) == 0 &&
           cut_for(key) != NULL;
}

void goro__dl_watch(int64_t now, int64_t *wake)
{
    if (!goro__dl_in_use())
        return;
    releases_run(now, wake);
    struct goro_classq *all = &goro__sched.classq;
    int waiting = atomic_load_explicit(&all->n[GORO_PQ_DL], memory_order_relaxed);
    int64_t first = ld(&all->dl_first);     /* the earliest deadline queued */
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *p = &goro__sched.procs[i];
        waiting += atomic_load_explicit(&p->classq.n[GORO_PQ_DL], memory_order_relaxed);
        int64_t k = ld(&p->classq.dl_first);
        if (k && (!first || k < first))
            first = k;
        /* A pinned reserved coroutine may run, behind a lower class: only
         * its own M can run it, so it is this P's slice that is cut. */
        int64_t pin = ld(&p->dl_pinned_at);
        if (pin && now >= pin)
            goro__preempt_for_class(p, now, ENFORCE_RETRY, GORO_PRIO_DL, NULL);
        else if (pin && pin < *wake)
            *wake = pin;
        int64_t until = ld(&p->dl_until);
        if (!until)
            continue;
        if (now >= until) {
            struct goro_m *blocked = NULL;
            goro__preempt_for_class(p, now, ENFORCE_RETRY, GORO_PRIO_DL + 1, &blocked);
            goro__dl_backstop_off(blocked);     /* no EINTR for a blocked thread */
            until = now + ENFORCE_RETRY;
        }
        if (until < *wake)
            *wake = until;
    }
    /* Reserved coroutines queued while Ps run lower classes: as many of
     * those slices are cut (as for HIGH ones, sysmon.c's check_classes). */
    for (int i = 0; i < goro__sched.nprocs && waiting > 0; i++)
        if (goro__preempt_for_class(&goro__sched.procs[i], now, ENFORCE_RETRY, GORO_PRIO_DL, NULL))
            waiting--;
    /* Still one queued, and every P runs a reserved coroutine: the one
     * with the latest deadline gives way if the earliest queued is
     * earlier (the preemptive half of EDF). */
    struct goro_p *v = waiting > 0 && first ? cut_for(first) : NULL;
    if (v && atomic_load_explicit(&v->running_prio, memory_order_relaxed) >= GORO_PRIO_DL)
        goro__preempt_for_class(v, now, ENFORCE_RETRY, GORO_PRIO_DL + 1, NULL);
}
