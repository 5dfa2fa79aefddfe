/*
 * Who owns a P, and what sysmon does to Ps and Ms: the hand-off of a P
 * from an M stuck outside the runtime to another M (a spare, one waiting
 * for a P, or a new thread), an M without a P waiting to be handed one,
 * cutting a lower class's slice short, freeing the coroutines pinned to an
 * M that stays away, and the stack caches of idle Ps.
 *
 * Keeps invariant 8 (goro__rt_enter / the retake in three steps), and 7's rule
 * that whoever takes a P off a list makes it run. See the prose at the top
 * of sched.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"
#include "sched/deadline.h"

/* ---- P ownership (invariant 8) ---- */

struct goro_p *goro__rt_enter(struct goro_m *m, bool may_move)
{
    int level = atomic_load_explicit(&m->in_rt, memory_order_relaxed);
    atomic_store_explicit(&m->in_rt, level + 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (level > 0) {
        /* Nested: the P is ours unless the outer entry found it gone
         * (then it went on without one, and so must this). */
        struct goro_p *p = m->p;
        return p && goro__p_owner_settled(p) == m ? p : NULL;
    }
    struct goro_p *p = m->p;
    if (likely(p && atomic_load_explicit(&p->owner, memory_order_acquire) == m))
        return p;
    /* sysmon, retaking, sees in_rt > 0 and backs off */
    if (p && goro__p_owner_settled(p) == m)
        return p;
    /* Lost for good: forget it, so that nothing here (goro__spinner_start_if_idle, the
     * preemption check, the poller) goes on believing this M holds it.
     * Only m writes m->p while m runs a coroutine. */
    m->p = NULL;
    if (!may_move || !m->curg)
        return NULL;                /* still inside: the caller leaves */
    goro__migrate(m, m->curg);            /* resumes on an M with a P, inside */
    return goro__m()->p;
}

struct goro_p *goro__p_enter_on(struct goro_m *m)
{
    if (!m)
        return NULL;
    struct goro_p *p = goro__rt_enter(m, false);
    if (!p)
        goro__rt_leave(m);                /* no P (lost, or sysmon): the caller goes global */
    return p;
}

struct goro_p *goro__p_enter(void)
{
    return goro__p_enter_on(goro__m());
}

void goro__p_leave(void)
{
    struct goro_m *m = goro__m();
    if (m && atomic_load_explicit(&m->in_rt, memory_order_relaxed) > 0)
        goro__rt_leave(m);
}

/* ---- an M without a P waits to be handed one ---- */

/* Under goro__sched.lock: p goes to M `to` (which sleeps on its handed word). */
void goro__give_p_locked(struct goro_p *p, struct goro_m *to)
{
    GORO_ASSERT(!p->idle);          /* invariant 7: an idle P is taken off first */
    p->m = to;
    to->p = p;
    atomic_store_explicit(&to->lost_p_at, 0, memory_order_relaxed);
    atomic_store_explicit(&p->owner, to, memory_order_release);
}

void goro__m_notify_handed(struct goro_m *to)
{
    atomic_store_explicit(&to->handed, 1, memory_order_release);
    goro__futex_wake(&to->handed, 1);
}

/* m has no P (it lost it, or gave it to a waiter): sleep as a spare until
 * one is handed over - first in line if coroutines pinned to m wait.
 * Returns true with a P in m->p, false when the runtime stops. */
bool goro__m_wait_for_p(struct goro_m *m)
{
    if (m->dl_pinned)
        goro__dl_unpin_all(m);
    goro__lock(&goro__sched.lock);
    bool pinned = goro__pinned_any(m);
    struct goro_m **list = pinned ? &goro__sched.waitp : &goro__sched.spares;
    atomic_store_explicit(&m->handed, 0, memory_order_relaxed);
    m->next_free = *list;
    *list = m;
    if (pinned)
        atomic_fetch_add_explicit(&goro__sched.nwaitp, 1, memory_order_relaxed);
    /* Waiting for a P while one sleeps idle: wake its M as a spinner (as
     * spinner_start does); with nothing to run it hands the P to us when it gives
     * it up (find_runnable). Busy Ps reach that point on their own. */
    struct goro_p *idle = pinned ? goro__pidle_get() : NULL;
    struct goro_m *idle_m = idle ? idle->m : NULL;
    goro__unlock(&goro__sched.lock);
    if (idle_m) {
        atomic_fetch_add(&goro__sched.nmspinning, 1);
        goro__sysmon_kick();
        goro__m_notify(idle_m);
    }
    while (!atomic_load_explicit(&m->handed, memory_order_acquire)) {
        if (atomic_load(&goro__sched.stopping))
            return false;
        goro__futex_wait(&m->handed, 0);
    }
    return m->p != NULL && !atomic_load(&goro__sched.stopping);
}

/* ---- the hand-off: sysmon gives a P away from a blocked M ---- */

/* The first len - 1 bytes of /proc/self/task/<tid>/<name>, as a string;
 * the length, or -1. Read afresh each time (only for a thread that looks
 * stuck), keeping no descriptor. */
ssize_t goro__task_file(pid_t tid, const char *name, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return n;
}

ssize_t goro__m_task_file(struct goro_m *m, const char *name, char *buf, size_t len)
{
    pid_t tid = __atomic_load_n(&m->tid, __ATOMIC_ACQUIRE);
    return tid > 0 ? goro__task_file(tid, name, buf, len) : -1;   /* -1: not started yet */
}

/* The scheduling state of m's thread: R, S, D ... ('?' if unknown). */
char goro__m_thread_state(struct goro_m *m)
{
    char buf[256];
    if (goro__m_task_file(m, "stat", buf, sizeof buf) < 0)
        return '?';
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

/* sysmon: coroutines of class cls (HIGH, or the deadline class; above it:
 * any) wait while p runs one of a lower class: cut p's slice short
 * (invariant 9) - again every `retry` while the slice
 * lasts (the coroutine may be where it cannot be preempted: it then
 * yields at its next goro call). Not while p's thread is in the kernel: a
 * blocking call would fail with EINTR (the slice rule hands such a P over
 * instead). True if asked. *blocked (if not NULL): p's M, when it was
 * found blocked so. */
bool goro__preempt_for_class(struct goro_p *p, int64_t now, int64_t retry, int cls,
                             struct goro_m **blocked)
{
    uint32_t t = atomic_load_explicit(&p->schedtick, memory_order_relaxed);
    if (!atomic_load_explicit(&p->running, memory_order_relaxed) ||
        atomic_load_explicit(&p->running_prio, memory_order_relaxed) >= cls ||
        (p->sm_class_tick == t + 1 && now - p->sm_class_when < retry))
        return false;
    p->sm_class_when = now;
    goro__lock(&goro__sched.lock);
    struct goro_m *m = p->idle ? NULL : p->m;
    goro__unlock(&goro__sched.lock);
    if (!m)
        return false;
    p->sm_class_tick = t + 1;
    char st = goro__m_thread_state(m);
    if (st == 'S' || st == 'D') {
        if (blocked)
            *blocked = m;
        return false;
    }
    atomic_store_explicit(&p->preempt_req, t + 1, memory_order_relaxed);
    if (goro__preempt_async())
        goro__preempt_signal(m);
    return true;
}

/* sysmon, now and then: the stack caches of idle Ps go to the global
 * pool, whose ageing returns the slabs an idle program no longer uses. A
 * P on the idle list is nobody's: its M (or a waker) takes it off under
 * sched.lock before touching its cache again, so the lock makes the cache
 * ours meanwhile. A P that runs keeps its cache: its owner alone may
 * touch it, and a busy P reuses it. */
void goro__spill_idle_caches(void)
{
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro_p *p = &goro__sched.procs[i];
        goro__lock(&goro__sched.lock);  /* once a second: no need to peek first */
        if (p->idle)
            goro__slab_cache_spill(p);
        goro__unlock(&goro__sched.lock);
    }
}

/* sysmon: is p's M stuck where the P could be given away - in the
 * kernel (a blocking call: state S or D), or running for `long_run`? */
bool goro__handoff_wanted(struct goro_p *p, bool long_run, bool *blocked,
                          struct goro_m **mp)
{
    *blocked = false;
    goro__lock(&goro__sched.lock);
    struct goro_m *m = p->idle ? NULL : p->m;
    goro__unlock(&goro__sched.lock);
    *mp = m;
    if (!m || !goro__sched.handoff_ok || atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0)
        return false;
    char st = goro__m_thread_state(m);
    *blocked = st == 'S' || st == 'D';
    /* Coroutines pinned to m do not keep the P there: they cannot run
     * before m comes back either way, and the rest of the P's work can
     * (goro__unpin_stuck frees the pinned ones if m stays away). Timers
     * pending on p are not: once one is overdue, sysmon runs it (sysmon.c,
     * check_timers) and its sleeper waits in the global queue, which is.
     * Counting every pending timer handed workers over far too often with
     * many sleepers (bench/timers heap, 10^5 timers: p99 lateness 189-226
     * ms against 1.1-4.6 ms). */
    /* An M waiting for a P (goro__m_wait_for_p) is work too: its pinned
     * coroutines run nowhere else, and may hold what m's thread waits for
     * (a foreign lock whose busy handler sleeps it). Before, with nothing
     * queued, each waited on the other until m's call gave up
     * (test_handoff.c, pinned_to_a_thread_waiting_for_a_p_runs). */
    bool work = !goro__runq_empty(p) || goro__global_work() || goro__io_in_use() ||
                goro__pinned_any(m) ||
                atomic_load_explicit(&goro__sched.nwaitp, memory_order_relaxed) > 0;
    return work && (*blocked || long_run);
}

/* sysmon: gives p to another M (a waiting or spare one, or a new thread)
 * if m, its M as goro__handoff_wanted found it, still owns it and is
 * outside the runtime (invariant 8; an idle M is on g0, hence inside). */
bool goro__handoff(struct goro_p *p, struct goro_m *m)
{
    struct goro_m *expect = m;
    if (!atomic_compare_exchange_strong(&p->owner, &expect, GORO_P_RETAKING))
        return false;
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    if (atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0) {
        atomic_store_explicit(&p->owner, m, memory_order_release);
        return false;
    }
    /* invariant 8: the retake is ours, m is outside: p is ours to give */
    GORO_ASSERT(atomic_load_explicit(&p->owner, memory_order_relaxed) == GORO_P_RETAKING);
    goro__lock(&goro__sched.lock);
    struct goro_m *to = goro__waitp_take_locked();
    if (!to && (to = goro__sched.spares))
        goro__sched.spares = to->next_free;
    bool fresh = !to;
    if (fresh && atomic_load(&goro__sched.nms) < goro__sched.ms_cap)
        to = &goro__sched.ms[atomic_load(&goro__sched.nms)];
    if (!to) {
        atomic_store_explicit(&p->owner, m, memory_order_release);
        goro__unlock(&goro__sched.lock);
        return false;
    }
    if (fresh) {
        int id = atomic_load(&goro__sched.nms);
        memset(to, 0, sizeof *to);
        goro__lock_rank(&to->pin_lock, GORO_RANK_LEAF);
        to->id = id;
        goro__give_p_locked(p, to);       /* before the thread reads it */
        int err = goro__thread_create(&to->thread, GORO_THREAD_STACK, goro__m_main, to);
        if (err) {
            to->p = NULL;
            p->m = m;
            atomic_store_explicit(&p->owner, m, memory_order_release);
            goro__unlock(&goro__sched.lock);
            static _Atomic int once;
            goro__warn_once(&once, "cannot start a thread to take over a blocked worker's "
                            "queue (%s): its coroutines wait until it returns; raise "
                            "RLIMIT_NPROC (ulimit -u) or the thread limit", strerror(err));
            return false;
        }
        atomic_store(&goro__sched.nms, id + 1);
        goro__registry_set_ms(goro__sched.ms, id + 1);
    } else {
        goro__give_p_locked(p, to);
    }
    atomic_store_explicit(&m->lost_p_at, goro__now(), memory_order_relaxed);
    goro__unlock(&goro__sched.lock);
    goro__dl_backstop_off(m);       /* it may be blocked: stop_lost signals it if not */
    GORO_TRACE(GORO_TEV_HANDOFF, (uint64_t)m->id, (uint64_t)to->id, (uint32_t)p->id, 0, 0);
    if (!fresh)
        goro__m_notify_handed(to);
    return true;
}

/* sysmon: a thread whose P was handed off while it seemed blocked (state
 * S or D for a moment) or would not be preempted may come back to run its
 * coroutine in code that never calls goro - a loop of the program's. It
 * would run on without a P, one thread more than the workers competing
 * for the CPUs (seen: a spinner ran that way for a second beside both
 * workers, and reserved coroutines lost a third of their CPU). So each
 * such thread, running outside the runtime and not blocked, is signalled
 * every `retry`: its coroutine is stopped at a safe point, pinned to it,
 * and the thread waits for a P (switch.c, goro__preempt_park). True while
 * one is seen. */
bool goro__stop_lost(int64_t now, int64_t retry)
{
    if (!goro__preempt_async())
        return false;
    bool seen = false;
    int nms = atomic_load(&goro__sched.nms);
    for (int i = 0; i < nms; i++) {
        struct goro_m *m = &goro__sched.ms[i];
        if (!atomic_load_explicit(&m->lost_p_at, memory_order_relaxed) ||
            atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0)
            continue;
        seen = true;
        if (now - m->sm_stop_when < retry)
            continue;
        m->sm_stop_when = now;
        char st = goro__m_thread_state(m);
        if (st != 'S' && st != 'D')     /* a blocking call would fail with EINTR */
            goro__preempt_signal(m);
    }
    return seen;
}

/* sysmon: a preempted coroutine is pinned to its thread because compiled
 * code may hold the address of a thread-local (errno's, say) across the
 * point where it was interrupted. But if that thread lost its P and stays
 * outside the runtime - blocked in the kernel, or in code that refuses
 * preemption - the pinned coroutine could wait for ever, and it may hold
 * what the thread is waiting for (a lock in foreign code). After `after`
 * it moves to the global queue and may resume on any worker
 * (docs/preemption.md states the rule for thread-local addresses). */
bool goro__unpin_stuck(int64_t now, int64_t after, bool *pending)
{
    *pending = false;
    struct gq_batch global;
    goro__gq_batch_init(&global);
    bool moved = false;
    int nms = atomic_load(&goro__sched.nms);
    for (int i = 0; i < nms; i++) {
        struct goro_m *m = &goro__sched.ms[i];
        int64_t lost = atomic_load_explicit(&m->lost_p_at, memory_order_relaxed);
        if (!lost || !goro__pinned_any(m))
            continue;
        *pending = true;
        if (now - lost < after || atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0)
            continue;
        for (struct goro *g = goro__pinned_take_all(m), *next; g; g = next) {
            next = g->next;
            goro__gq_batch_add(&global, g);
            moved = true;
        }
    }
    if (!moved)
        return false;
    goro__gq_batch_flush(&global);
    goro__spinner_start_if_idle(NULL);
    return true;
}
