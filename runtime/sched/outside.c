/*
 * Threads the runtime does not own: the record a thread waits with (its
 * stand-in coroutine, blocked on a futex word instead of switching), the
 * list of such threads waiting now (for the deadlock check and the virtual
 * clock's deadlines) and the spawn gate that keeps their spawns out of a
 * shutdown.
 *
 * Keeps invariant 10's part for threads (the clock jumps to their
 * deadlines too, and ends their waits); such a thread is on no run queue
 * (invariant 1: goro__ready wakes its futex word). See the prose at the
 * top of sched.c.
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

/* ---- threads the runtime does not own ---- */

/* Such a thread gets a stand-in coroutine record the first time it waits,
 * so waiter lists hold one kind of thing; goro__park blocks the thread on
 * the record's futex word instead of switching. */
static __thread struct goro external;

struct goro *goro__external_self(void)
{
    external.flags = GORO_F_EXTERNAL;
    return &external;
}

/* ---- threads that wait from outside the runtime ---- */

/* Every thread the runtime does not own, while it waits in a goro call
 * (or in goro_shutdown), is on this list: the deadlock check (debug/
 * deadlock.c) must know that it is blocked, and the reports say on what.
 * Each begin or end of such a wait bumps outside_moves, and wakes sysmon
 * if it sleeps: a thread that begins to wait may be the last one. */
struct outside_wait {
    struct goro *g;                /* its stand-in record; NULL: goro_shutdown */
    pid_t tid;
    int64_t deadline;              /* negative: none (GORO_FOREVER) */
    struct outside_wait *prev, *next;
};
static __thread struct outside_wait outside_self;
static struct outside_wait *outside_list;
static goro_lock_t outside_lock = GORO_LOCK_INIT_RANK(GORO_RANK_LEAF);

void goro__outside_begin(struct goro *g, int64_t deadline)
{
    struct outside_wait *w = &outside_self;
    if (!w->tid)
        w->tid = (pid_t)syscall(SYS_gettid);
    w->g = g;
    w->deadline = deadline;
    goro__lock(&outside_lock);
    w->prev = NULL;
    w->next = outside_list;
    if (outside_list)
        outside_list->prev = w;
    outside_list = w;
    goro__unlock(&outside_lock);
    atomic_fetch_add(&goro__sched.outside_moves, 1);
    goro__sysmon_kick();
}

void goro__outside_end(void)
{
    struct outside_wait *w = &outside_self;
    goro__lock(&outside_lock);
    if (w->prev)
        w->prev->next = w->next;
    else
        outside_list = w->next;
    if (w->next)
        w->next->prev = w->prev;
    goro__unlock(&outside_lock);
    atomic_fetch_add(&goro__sched.outside_moves, 1);
}

/* The earliest deadline of a thread outside waiting in a goro call. */
int64_t goro__outside_first_deadline(void)
{
    int64_t first = INT64_MAX;
    goro__lock(&outside_lock);
    for (struct outside_wait *w = outside_list; w; w = w->next)
        if (w->g && w->deadline >= 0 && w->deadline < first)
            first = w->deadline;
    goro__unlock(&outside_lock);
    return first;
}

/* Ends the waits of threads outside whose deadline the clock has passed,
 * as a timer ends a coroutine's. */
void goro__outside_time_out(int64_t now)
{
    goro__lock(&outside_lock);
    for (struct outside_wait *w = outside_list; w; w = w->next)
        if (w->g && w->deadline >= 0 && w->deadline <= now &&
            goro__claim(w->g, GORO_WAKE_TIMEDOUT))
            goro__ready(w->g);      /* a thread: its futex word */
    goro__unlock(&outside_lock);
}

void goro__outside_waits(void (*fn)(struct goro *g, pid_t tid, bool timed, void *arg),
                         void *arg)
{
    goro__lock(&outside_lock);
    for (struct outside_wait *w = outside_list; w; w = w->next)
        fn(w->g, w->tid, w->deadline >= 0, arg);
    goro__unlock(&outside_lock);
}

uint64_t goro__sched_activity(void)
{
    uint64_t sum = atomic_load(&goro__sched.outside_moves) + atomic_load(&goro__sched.spawned_ext);
    for (int i = 0; i < goro__sched.nprocs; i++)
        sum += atomic_load_explicit(&goro__sched.procs[i].schedtick, memory_order_acquire);
    return sum;
}

/* A thread the runtime does not own waits on its own futex word. */
int goro__park_external(const struct goro_park *how)
{
    struct goro *ext = goro__external_self();
    ext->wait = (uint8_t)how->why;
    ext->wait_obj = how->obj;
    ext->wait_timed = how->deadline >= 0;
    /* park entry: a thread waits in one call at a time */
    GORO_ASSERT(atomic_load_explicit(&ext->wake, memory_order_relaxed) == GORO_WAKE_IDLE);
    goro__outside_begin(ext, how->deadline);
    atomic_store(&ext->wake, how->firm ? GORO_WAKE_ARMED_FIRM : GORO_WAKE_ARMED);
    if (how->unlock)
        how->unlock(how->arg);
    if (how->commit && !how->commit(how->arg, ext) && goro__claim(ext, GORO_WAKE_DONE))
        atomic_store_explicit(&ext->ext_word, 1, memory_order_relaxed);
    for (;;) {
        if (atomic_exchange_explicit(&ext->ext_word, 0, memory_order_acquire))
            break;
        if (how->deadline < 0) {
            goro__futex_wait(&ext->ext_word, 0);
            continue;
        }
        int64_t left = how->deadline - goro__now();
        if (left <= 0 && goro__claim(ext, GORO_WAKE_TIMEDOUT))
            break;                  /* nobody will wake us: done */
        if (left > GORO_MSEC && goro__clock_virtual())
            left = GORO_MSEC;       /* the clock may jump: look again (invariant 10) */
        if (left > 0) {
            goro__futex_wait_ns(&ext->ext_word, 0, left);
        } else {
            goro__futex_wait(&ext->ext_word, 0);  /* a claim won: its wake comes */
        }
    }
    goro__outside_end();
    int outcome = (int)atomic_load(&ext->wake);
    GORO_ASSERT(outcome >= GORO_WAKE_DONE);   /* the claim protocol: ended by a claim */
    atomic_store(&ext->wake, GORO_WAKE_IDLE);
    ext->wait = GORO_W_NONE;
    ext->wait_obj = NULL;
    return outcome;
}

/* ---- the spawn gate: threads the runtime does not own vs shutdown ----
 * A spawn from such a thread counts itself in ext_spawning, then reads
 * closing; shutdown sets closing, then waits for ext_spawning to drain.
 * Both sides are seq_cst: either the spawner sees closing and refuses, or
 * shutdown waits for it and then counts its coroutine as alive. */

int goro__spawn_gate_enter(void)
{
    atomic_fetch_add(&goro__sched.ext_spawning, 1);
    if (!atomic_load(&goro__sched.closing))
        return 0;
    atomic_fetch_sub(&goro__sched.ext_spawning, 1);
    return -ESHUTDOWN;
}

void goro__spawn_gate_leave(void)
{
    atomic_fetch_sub(&goro__sched.ext_spawning, 1);
}

void goro__spawn_gate_close(void)
{
    atomic_store(&goro__sched.closing, 1);
    while (atomic_load(&goro__sched.ext_spawning) != 0)
        sched_yield();
}

/* Once the runtime reads as not started (a spawn then starts a new one),
 * or when the shutdown gave up. */
void goro__spawn_gate_open(void)
{
    atomic_store(&goro__sched.closing, 0);
}

