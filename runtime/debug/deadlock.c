/*
 * Deadlock reports: "goro: all coroutines are asleep - deadlock!", as Go
 * says it, with who waits for what and the cycles among them; then an
 * abort, or the program's callback (goro_deadlock_watch).
 *
 * The process is deadlocked when all of these hold:
 *   1. every P is idle, the global queue is empty, and no coroutine is
 *      running or runnable (one blocked in a call of its own is running),
 *      nor woken: a wait already ended (claimed) whose coroutine or
 *      thread has not run yet - a thread may wait long for a CPU;
 *   2. no P has a timer: a sleep, a deadline or a ticker will fire;
 *   3. no coroutine waits on a descriptor or an offload, and no channel is
 *      subscribed to signals: the world outside may end those;
 *   4. a thread outside the runtime waits in a goro call with no deadline
 *      (a join, a channel, a lock, goro_shutdown), none waits with one,
 *      and every other thread of the process is the runtime's own. A
 *      thread that does anything else may yet send, unlock or cancel; Go
 *      has no such threads, C programs do, and they make this the rule
 *      Go need not have;
 *   5. nothing moved (goro__sched_activity) for CONFIRM, nor while the
 *      snapshot (waitgraph.c) was judged: it was not taken mid-change.
 *
 * sysmon asks goro__deadlock_pending each time it would sleep with every
 * P idle. 2-4's cheap parts first; when they hold, the deadlock is
 * suspected and sysmon sleeps CONFIRM at most, then the full check walks
 * the registry. A check that finds no deadlock is not repeated before
 * RECHECK unless something moved (a coroutine ran: a P woke sysmon);
 * a confirmed one is reported once, until something moves again.
 * Only sysmon runs this file's state machine.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "sched/sched.h"
#include "io/poller.h"
#include "base/env.h"
#include "debug/debug.h"

#define CONFIRM (100 * GORO_MSEC)
#define RECHECK GORO_SEC

enum { MODE_ABORT, MODE_REPORT, MODE_OFF };
static _Atomic int mode;

static struct goro_watch watch = GORO_WATCH_INIT;

enum { PHASE_NONE, PHASE_SUSPECT, PHASE_CLEARED, PHASE_REPORTED };
static int phase;                      /* sysmon only, as the rest */
static uint64_t phase_activity;        /* goro__sched_activity when the phase began */
static int64_t phase_since;

void goro__deadlock_start(void)
{
    static const char *const words[] = { "abort", "report", "off" };
    atomic_store(&mode, goro__env_word("GORO_DEADLOCK", words, 3, "abort, report or off",
                                       MODE_ABORT));
    phase = PHASE_NONE;
}

int goro_deadlock_watch(goro_deadlock_fn fn, void *arg)
{
    goro__watch_set(&watch, (void (*)(void))fn, arg);
    return 0;
}

/* ---- the cheap half of the rule ---- */

struct outside_count {
    int untimed, timed;
};

static void count_outside(struct goro *g, pid_t tid, bool timed, void *arg)
{
    (void)g;
    (void)tid;
    struct outside_count *c = arg;
    if (timed)
        c->timed++;
    else
        c->untimed++;
}

static bool suspect(void)
{
    if (atomic_load(&goro__sched.npidle) != goro__sched.nprocs ||
        atomic_load(&goro__sched.gq_size) != 0)
        return false;
    for (int i = 0; i < goro__sched.nprocs; i++)
        if (goro__timers_first(&goro__sched.procs[i]) != INT64_MAX)
            return false;
    struct outside_count c = { 0, 0 };
    goro__outside_waits(count_outside, &c);
    return c.untimed > 0 && c.timed == 0 && goro__signal_subscribers() == 0;
}

/* ---- the full check ---- */

/* Every thread of the process is the runtime's own (named goro-...) or
 * waits from outside with no deadline (4). */
static bool only_waiting_threads(const struct goro_wgraph *wg)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return false;
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        pid_t tid = (pid_t)atoi(e->d_name);
        bool waits = false;
        for (int i = 0; i < wg->n && !waits; i++)
            waits = wg->nodes[i].outside && wg->nodes[i].tid == tid && !wg->nodes[i].timed;
        if (waits)
            continue;
        char comm[32];
        if (goro__task_file(tid, "comm", comm, sizeof comm) < 0)
            continue;               /* it has just ended */
        ok = strncmp(comm, "goro-", 5) == 0;
    }
    closedir(d);
    return ok;
}

/* 1 and 3 on the snapshot. */
static bool all_asleep(const struct goro_wgraph *wg)
{
    if (wg->inexact || wg->incomplete)
        return false;
    for (int i = 0; i < wg->n; i++) {
        const struct goro_wnode *v = &wg->nodes[i];
        if (v->state == GORO_S_DEAD)
            continue;
        if (v->state != GORO_S_PARKED || v->by_outside || v->woken)
            return false;           /* running, may be ended from outside, or woken */
    }
    return true;
}

static void write_report(struct goro_out *o, const struct goro_wgraph *wg)
{
    goro__outf(o, "goro: all coroutines are asleep - deadlock!\n");
    goro__outf(o, "goro: who waits for what:\n");
    for (int pass = 0; pass < 2; pass++)    /* the threads first */
        for (int i = 0; i < wg->n; i++)
            if (wg->nodes[i].state == GORO_S_PARKED && wg->nodes[i].outside == (pass == 0))
                goro__waitgraph_print_node(o, wg, i);
    goro__waitgraph_cycles(o, wg, NULL);
    goro__outf(o, "\n");
    goro__dump_out(o, NULL, GORO_DUMP_PLAIN);   /* every one is stuck: no leak scan */
}

/* Reports: to the callback, or to stderr and then an abort (with a core
 * file where the system keeps them: gdb's extension reads it). */
static void report(const char *text, size_t len)
{
    void *arg;
    goro_deadlock_fn fn = (goro_deadlock_fn)goro__watch_begin(&watch, &arg);
    if (fn) {
        fn(text, arg);
        goro__watch_done(&watch);
        return;
    }
    goro__write_all(2, text, len);
    if (atomic_load(&mode) == MODE_REPORT)
        return;
    static const char tail[] = "goro: aborting (GORO_DEADLOCK=report reports and goes on; "
                               "goro_deadlock_watch takes the report instead)\n";
    goro__write_all(2, tail, sizeof tail - 1);
    goro__fatal_abort("aborted: deadlock");     /* not a crash: no crash report on top */
}

/* The full check, with activity what it read when the suspicion began:
 * true if it found (and reported) a deadlock. */
static bool confirm(uint64_t activity)
{
    struct goro_wgraph wg;
    goro__waitgraph_build(&wg);
    bool dead = all_asleep(&wg) && only_waiting_threads(&wg) && suspect();
    char *text = NULL;
    size_t len = 0;
    if (dead) {
        FILE *mem = open_memstream(&text, &len);
        if (mem) {
            struct goro_out o = { .file = mem, .fd = -1 };
            write_report(&o, &wg);
            if (fclose(mem) != 0) {
                free(text);
                text = NULL;
            }
        }
    }
    goro__waitgraph_free(&wg);
    /* 5: nothing moved while the snapshot was taken and judged. */
    dead = dead && text && goro__sched_activity() == activity;
    if (dead)
        report(text, len);
    free(text);
    return dead;
}

int64_t goro__deadlock_pending(int64_t now)
{
    if (atomic_load_explicit(&mode, memory_order_relaxed) == MODE_OFF &&
        !goro__watch_isset(&watch))
        return -1;
    uint64_t activity = goro__sched_activity();
    bool moved = activity != phase_activity;
    if (phase == PHASE_REPORTED && !moved)
        return -1;
    if (phase == PHASE_CLEARED) {
        if (!moved)
            return -1;
        if (now - phase_since < RECHECK)
            return phase_since + RECHECK - now;
    }
    if (!suspect()) {
        phase = PHASE_NONE;
        return -1;
    }
    if (phase != PHASE_SUSPECT || moved) {
        phase = PHASE_SUSPECT;
        phase_activity = activity;
        phase_since = now;
        return CONFIRM;
    }
    if (now - phase_since < CONFIRM)
        return phase_since + CONFIRM - now;
    phase = confirm(activity) ? PHASE_REPORTED : PHASE_CLEARED;
    phase_activity = activity;
    phase_since = now;
    return phase == PHASE_CLEARED ? RECHECK : -1;
}
