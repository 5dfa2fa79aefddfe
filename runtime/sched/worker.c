/*
 * Starting and stopping the scheduler: the tables of Ps and Ms, the
 * worker threads (their loop is sched.c's goro__m_main), the drain that
 * goro_shutdown waits in, and ids for new coroutines.
 *
 * Keeps invariant 8's last sentence (the number of Ps never changes while
 * the runtime runs: they are made here, once). See the prose at the top of
 * sched.c.
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

#define MAX_EXTRA_MS 256           /* spare threads beyond the Ps */

/* Frees the tables goro__sched_start made, the event bases of the Ps
 * (netpoll_fini leaves a P without one alone) and their timer heaps. */
static void sched_tables_free(void)
{
    goro__registry_set_ms(NULL, 0);
    for (int i = 0; goro__sched.procs && i < goro__sched.nprocs; i++) {
        goro__netpoll_fini(&goro__sched.procs[i]);
        goro__timers_fini(&goro__sched.procs[i].timers);
    }
    free(goro__sched.procs);
    free(goro__sched.ms);
    goro__sched.procs = NULL;
    goro__sched.ms = NULL;
    goro__sched.nprocs = 0;
}

int goro__sched_start(int nprocs)
{
    goro__sched.nprocs = nprocs;
    goro__sched.procs = calloc((size_t)nprocs, sizeof *goro__sched.procs);
    goro__sched.ms_cap = nprocs + MAX_EXTRA_MS;
    goro__sched.ms = calloc((size_t)goro__sched.ms_cap, sizeof *goro__sched.ms);
    goro__sched.spares = goro__sched.waitp = NULL;
    /* The hand-off needs the asymmetric barrier (invariant 8). */
    goro__sched.handoff_ok =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (!goro__sched.procs || !goro__sched.ms) {
        sched_tables_free();
        return -ENOMEM;
    }
    atomic_store(&goro__sched.stopping, 0);
    atomic_store(&goro__sched.npidle, 0);
    atomic_store(&goro__sched.nmspinning, 0);
    goro__sched.pidle = NULL;
    for (int i = 0; i < nprocs; i++) {
        goro__sched.procs[i].id = i;
        goro__sched.procs[i].m = &goro__sched.ms[i];
        goro__sched.procs[i].rand = 0x9e3779b9u * (uint32_t)(i + 1);
        goro__sched.procs[i].alarm_fd = -1;
        goro__timers_init(&goro__sched.procs[i].timers);
        goro__sched.ms[i].id = i;
        goro__lock_rank(&goro__sched.ms[i].pin_lock, GORO_RANK_LEAF);
        goro__lock_rank(&goro__sched.procs[i].classq.lock, GORO_RANK_LEAF);
        goro__sched.ms[i].p = &goro__sched.procs[i];
        atomic_store(&goro__sched.procs[i].owner, &goro__sched.ms[i]);
    }
    goro__steal_order_init(nprocs);
    goro__sched.prio_inherit = goro__env_flag("GORO_PRIORITY_INHERIT", true);
    int started = 0, err = goro__active_start(nprocs);
    for (int i = 0; i < nprocs && !err; i++)
        err = goro__netpoll_init(&goro__sched.procs[i]);
    if (err) {
        sched_tables_free();
        return err;
    }
    atomic_store(&goro__sched.nms, nprocs);
    goro__registry_set_ms(goro__sched.ms, nprocs);
    for (; started < nprocs; started++) {
        err = goro__thread_create(&goro__sched.ms[started].thread, GORO_THREAD_STACK, goro__m_main,
                                  &goro__sched.ms[started]);
        if (err)
            break;
    }
    if (!err)
        err = -goro__sysmon_start(goro__sched.slice_ns);
    if (err) {
        atomic_store(&goro__sched.stopping, 1);
        for (int i = 0; i < started; i++) {
            goro__m_notify(&goro__sched.ms[i]);
            pthread_join(goro__sched.ms[i].thread, NULL);
        }
        sched_tables_free();
        return -err;
    }
    return 0;
}

/* Coroutines alive, from per-P counters. Exits are read before spawns:
 * every exit counted then has its spawn counted too (the spawn happened
 * before the exit, which happened before it was read), and a coroutine
 * alive throughout keeps the difference above zero - so 0 means none is
 * left, even with counters read one by one while coroutines still run.
 * (Threads without a P cannot spawn during goro_shutdown: the gate.) */
static uint64_t live_count(void)
{
    uint64_t exited = 0, spawned = 0;
    for (int i = 0; i < goro__sched.nprocs; i++)
        exited += atomic_load_explicit(&goro__sched.procs[i].exited, memory_order_acquire);
    for (int i = 0; i < goro__sched.nprocs; i++)
        spawned += atomic_load_explicit(&goro__sched.procs[i].spawned, memory_order_acquire);
    spawned += atomic_load_explicit(&goro__sched.spawned_ext, memory_order_acquire);
    return spawned - exited;
}

/* Waits until every coroutine has ended: 0, or -ETIMEDOUT at deadline
 * (GORO_FOREVER: none), with the gate open again. A wait without a
 * deadline says once, after SHUTDOWN_NOTICE, which coroutines it waits for. */
#define SHUTDOWN_NOTICE (10 * GORO_SEC)

int goro__sched_drain(int64_t deadline)
{
    goro__spawn_gate_close();
    atomic_store(&goro__sched.draining, 1);
    goro__outside_begin(NULL, deadline);
    int64_t notice = goro__now() + SHUTDOWN_NOTICE;
    int err = 0;
    for (;;) {
        uint32_t seen = atomic_load(&goro__sched.live_futex);
        uint64_t live = live_count();
        if (live == 0)
            break;
        int64_t now = goro__now();
        if (deadline >= 0 && now >= deadline) {
            err = -ETIMEDOUT;
            break;
        }
        if (deadline < 0 && notice && now >= notice) {
            notice = 0;
            fprintf(stderr, "goro: goro_shutdown has waited %d s for %llu coroutine%s to "
                    "end (goro_shutdown_until gives up at a deadline); these are "
                    "alive:\n", (int)(SHUTDOWN_NOTICE / GORO_SEC), (unsigned long long)live,
                    live == 1 ? "" : "s");
            goro__dump_out(&(struct goro_out){ .file = stderr, .fd = -1 }, NULL, GORO_DUMP_LEAKS);
        }
        /* An exit racing the draining flag may not wake us: poll too. */
        goro__futex_wait_ns(&goro__sched.live_futex, seen, 10 * GORO_MSEC);
    }
    goro__outside_end();
    atomic_store(&goro__sched.draining, 0);
    if (err)
        goro__spawn_gate_open();
    return err;
}

/* After a drain: stops the Ms and frees what the scheduler holds. */
void goro__sched_stop(void)
{
    atomic_store(&goro__sched.spawned_ext, 0);
    goro__sysmon_stop();
    goro__active_stop();
    atomic_store(&goro__sched.stopping, 1);
    int nms = atomic_load(&goro__sched.nms);
    for (int i = 0; i < nms; i++) {
        goro__m_notify(&goro__sched.ms[i]);
        goro__m_notify_handed(&goro__sched.ms[i]);        /* spares sleep on this one */
    }
    for (int i = 0; i < nms; i++)
        pthread_join(goro__sched.ms[i].thread, NULL);
    atomic_store(&goro__sched.nms, 0);
    goro__sched.spares = goro__sched.waitp = NULL;
    atomic_store(&goro__sched.nwaitp, 0);
    goro__sched.pidle = NULL;                 /* the Ps are freed below: nobody to wake */
    atomic_store(&goro__sched.npidle, 0);
    goro__netpoll_forget_all();
    atomic_store(&goro__io_used, 0);
    /* Return the Ps' stack caches to the global pool before freeing them. */
    for (int i = 0; i < goro__sched.nprocs; i++) {
        struct goro *g = goro__sched.procs[i].free_slabs;
        goro__sched.procs[i].free_slabs = NULL;
        atomic_store_explicit(&goro__sched.procs[i].nfree, 0, memory_order_relaxed);
        while (g) {
            struct goro *n = g->pool_next;
            goro__slab_put(g);      /* no P: goes to the global pool */
            g = n;
        }
    }
    sched_tables_free();
    free(goro__sched.gq);
    goro__sched.gq = NULL;
    goro__sched.gq_cap = goro__sched.gq_first = 0;
    atomic_store(&goro__sched.gq_size, 0);
}

uint64_t goro__next_id(struct goro_p *p)
{
    if (p) {
        if (p->id_next == p->id_end) {
            p->id_next = atomic_fetch_add(&goro__sched.id_next, 16) + 1;
            p->id_end = p->id_next + 16;
        }
        return p->id_next++;
    }
    return atomic_fetch_add(&goro__sched.id_next, 1) + 1;
}

int goro_workers(void)
{
    return atomic_load(&goro__sched.started) ? goro__sched.nprocs : 0;
}
