/*
 * How many Ps may be busy at once: all of them, unless the worker threads
 * wait for CPUs they do not get (invariant 11 in sched.c).
 *
 * The runtime starts a worker per CPU and wakes an idle one whenever work
 * is queued and nobody spins (invariant 5). That pays while every worker
 * gets a CPU of its own. Where other work holds the CPUs - a load
 * generator beside a server, other programs - a worker woken for a burst
 * waits for a CPU, the coroutines it took wait with it, and each burst
 * costs a sleep and a wake-up more: on the 2-CPU development machine an
 * echo server loaded from the same machine made 0.7-0.9x the round trips
 * of one worker, with 2-4x its p99 (docs/performance.md, "How many
 * workers run").
 *
 * The rule. sysmon, every ACTIVE_EVERY while a P is busy, reads how long
 * the threads owning Ps ran and how long they waited runnable since its
 * last look (the kernel's schedstat of each), and how often they went to
 * sleep (m->sleeps). They were crowded when they waited more than
 * WAIT_SHARE of the time they ran and slept at least SLEEPS_MIN times:
 * workers that take turns on too few CPUs, each running dry and sleeping
 * every few coroutines. Workers kept busy by long work wait as much when
 * other threads share their CPUs, but seldom sleep, and a second one
 * still adds CPU time (a pipeline's two stages ran at once with a third
 * thread beside them): they keep their count. Crowded, one fewer P may be
 * busy (never fewer than one). Every PROBE_EVERY one more may, for one
 * look: crowded then, the count goes back down and the next probe waits
 * PROBE_EVERY; not crowded, it stays, and the next look may raise it
 * again. goro__active_next is the rule alone (tests/test_sched.c).
 *
 * What the count changes (idle.c, sched.c):
 *   - a producer wakes an idle M only while fewer Ps than the count are
 *     busy (spinner_start);
 *   - an M going idle while that many are busy does not take its P back
 *     for work queued elsewhere: the busy ones run it;
 *   - an idle M sleeps on its note's futex rather than in the descriptors'
 *     base while the count is below nprocs and another P is busy: that P
 *     polls the base between coroutines, as a lone worker does, instead
 *     of the kernel waking a second thread for each burst of readiness.
 *   - but a busy P that has kept one coroutine for STUCK with work queued
 *     behind it gets an idle M (sysmon.c, check_stuck).
 * Programs that use classes keep every worker (goro__active_full): a HIGH
 * or reserved coroutine must not wait behind a busy P.
 *
 * Off unless GORO_ADAPT=1. It brought echod at 100 connections level with
 * one worker, but samples/httpd at 1000 connections of 1 KiB (wrk on the
 * same machine) fell from 43-58k requests a second with a p99 of 50-76 ms
 * to 37-49k and 87-223 ms (docs/performance.md, "How many workers run"):
 * what one busy worker leaves waiting there is not understood yet, and a
 * default may not trade one server's tail for another's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "sched/sched.h"
#include "sched/inner.h"
#include "sched/idle.h"
#include "sched/runq.h"
#include "base/env.h"

#define ACTIVE_EVERY (10 * GORO_MSEC)
#define PROBE_EVERY GORO_SEC
#define WAIT_SHARE_NUM 3            /* crowded: waited > 3/10 of the time run */
#define WAIT_SHARE_DEN 10
#define RAN_MIN (2 * GORO_MSEC)     /* less run than this says nothing */
#define SLEEPS_MIN 20               /* fewer sleeps a look: the work is long */

/* sysmon's own (goro__active_tick), per P: the thread it read and the
 * totals it read there. */
struct active_seen {
    pid_t tid;
    uint32_t sleeps;
    uint64_t ran, waited;
};

static bool adapt;
_Atomic bool goro__debug_active_frozen;
static struct active_seen *seen;
static int64_t next_look, probe_at;
static bool probing;

int goro__active_start(int nprocs)
{
    atomic_store(&goro__sched.active, nprocs);
    adapt = nprocs > 1 && goro__env_flag("GORO_ADAPT", false);
    next_look = probe_at = 0;
    probing = false;
    free(seen);
    seen = NULL;
    if (adapt && !(seen = calloc((size_t)nprocs, sizeof *seen)))
        return -ENOMEM;
    return 0;
}

void goro__active_stop(void)
{
    free(seen);
    seen = NULL;
    adapt = false;
}

int goro__active_next(int active, int nprocs, bool crowded, bool *probe, int64_t now,
                      int64_t *next_probe)
{
    if (*probe) {
        *probe = false;
        if (crowded) {
            *next_probe = now + PROBE_EVERY;
            return active - 1;
        }
        return active;
    }
    if (crowded && active > 1) {
        *next_probe = now + PROBE_EVERY;
        return active - 1;
    }
    if (!crowded && active < nprocs && now >= *next_probe) {
        *probe = true;
        return active + 1;
    }
    return active;
}

/* The totals of p's thread since the last look, added to *ran, *waited
 * and *sleeps; a thread that changed meanwhile (a hand-off) adds nothing. */
static void look_at(int i, uint64_t *ran, uint64_t *waited, uint64_t *sleeps)
{
    struct goro_p *p = &goro__sched.procs[i];
    goro__lock(&goro__sched.lock);
    struct goro_m *m = p->idle ? NULL : p->m;
    pid_t tid = m ? __atomic_load_n(&m->tid, __ATOMIC_ACQUIRE) : 0;
    goro__unlock(&goro__sched.lock);
    char buf[96];
    unsigned long long r, w;
    if (!m || goro__m_task_file(m, "schedstat", buf, sizeof buf) < 0 ||
        sscanf(buf, "%llu %llu", &r, &w) != 2)
        return;
    uint32_t n = atomic_load_explicit(&m->sleeps, memory_order_relaxed);
    struct active_seen *s = &seen[i];
    if (s->tid == tid && r >= s->ran && w >= s->waited) {
        *ran += r - s->ran;
        *waited += w - s->waited;
        *sleeps += n - s->sleeps;
    }
    *s = (struct active_seen){ tid, n, r, w };
}

void goro__active_tick(int64_t now)
{
    if (!adapt || now < next_look ||
        atomic_load_explicit(&goro__debug_active_frozen, memory_order_relaxed))
        return;
    next_look = now + ACTIVE_EVERY;
    uint64_t ran = 0, waited = 0, sleeps = 0;
    for (int i = 0; i < goro__sched.nprocs; i++)
        look_at(i, &ran, &waited, &sleeps);
    bool crowded = ran >= (uint64_t)RAN_MIN && sleeps >= SLEEPS_MIN &&
                   waited * WAIT_SHARE_DEN > ran * WAIT_SHARE_NUM;
    int was = atomic_load_explicit(&goro__sched.active, memory_order_relaxed);
    int now_active = goro__active_next(was, goro__sched.nprocs, crowded, &probing, now,
                                       &probe_at);
    /* invariant 11: at least one P, at most every P */
    GORO_ASSERT(now_active >= 1 && now_active <= goro__sched.nprocs);
    if (now_active == was)
        return;
    atomic_store_explicit(&goro__sched.active, now_active, memory_order_relaxed);
    if (now_active > was)
        goro__spinner_start_if_idle(NULL);  /* the P it lets run, run */
}
