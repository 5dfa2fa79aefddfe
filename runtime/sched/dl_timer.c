/*
 * The backstop of budget enforcement (docs/deadline.md, "At an overrun"):
 * a POSIX timer per worker thread that sends that thread the preemption
 * signal BACKSTOP after a reserved coroutine's budget ran out, in case
 * the monitor has not stopped it by then (it asks first: dl_watch.c).
 *
 * Why: the monitor is a thread like any other, and the kernel may keep it
 * off the CPU. Measured on the 2-CPU development machine (HZ=250, no
 * HRTICK): the worker and the monitor were woken onto the same idle CPU
 * at once; the worker, spinning, ran 4.4 ms before the tick let the
 * monitor in, while the other CPU stayed idle, and a 1 ms budget was
 * overrun by 2.2-4.3 ms in 15 of 150 runs of real_clock_budget_enforced
 * under ASan. A timer's expiry is the kernel's own interrupt, and its
 * signal goes to the worker thread: no other thread has to be scheduled.
 *
 * Rules (each timer belongs to one M, m below):
 *  - m alone creates and arms it: when a reserved coroutine's slice
 *    begins with budget to spend (goro__dl_begin), for the budget's end
 *    plus BACKSTOP - and again, from the signal handler, BACKSTOP_RETRY
 *    after each of its signals that was declined; and disarms it when
 *    that slice ends (goro__dl_charge),
 *    when the reservation ends within it (goro__dl_end: the coroutine's
 *    last switch charges nothing), and at the start of any unreserved
 *    slice (switch.c): never armed under a coroutine without a budget.
 *  - sysmon only ever disarms it: when it finds m's thread blocked in the
 *    kernel at the budget's end (the signal would make that call fail with
 *    EINTR, which goro never does to a blocked thread: sleep() and poll()
 *    are not restarted), and when m loses its P. A disarm that races with
 *    m's next arm costs that slice its backstop, never a stray signal.
 *  - Why it is tried again: a signal that finds the coroutine where it
 *    cannot be preempted (in the C library, in a system call's return,
 *    in goro's own code) is declined, and the next try was the monitor's
 *    - which the kernel may be keeping off the CPU, the very case the
 *    timer is for. bench/deadline's jobs overran by up to 12 ms that way
 *    (the monitor waited 0.5-1.5 ms for a CPU each time it woke beside a
 *    busy worker), and the test
 *    real_clock_budget_enforced_in_foreign_code_while_the_monitor_waits
 *    by 50-222 ms. Armed from the handler, after a decline only: a timer
 *    that simply repeated every 50 us (it_interval) kept a signal pending
 *    on a thread slow to handle each one - ten at the same instruction,
 *    the call a redirected coroutine makes to leave - and overruns of a
 *    plain spinner went from 0.1-0.4 ms to 1.4-3.4 ms in one run of
 *    seven (real_clock_budget_enforced). Now the thread always has
 *    BACKSTOP_RETRY of its own between two of them.
 *  - A signal that comes anyway after the slice ended (the expiry racing
 *    the disarm) finds no spent budget on m's P, and asks for nothing.
 *  - The limit: a reserved coroutine that blocks its thread in the kernel
 *    (a foreign sleep or poll, which is never restarted) past its budget's
 *    end by the wall clock, while sysmon is itself kept off the CPU for
 *    BACKSTOP and more, gets EINTR from that call. A timer on the thread's
 *    CPU clock would not fire while it blocks, but the kernel looks at
 *    those only at its tick (4 ms at HZ=250): too coarse for budgets.
 *  - No timer without asynchronous preemption, on the virtual clock, with
 *    preemption off (slice_ns < 0), or where the kernel refuses one: the
 *    monitor alone enforces budgets then, as before.
 */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "internal.h"
#include "sched/sched.h"
#include "sched/deadline.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define BACKSTOP (250 * GORO_USEC)
#define BACKSTOP_RETRY (50 * GORO_USEC)   /* after a declined signal */

enum { TIMER_NONE, TIMER_MADE, TIMER_REFUSED };

static bool wanted(void)
{
    return goro__preempt_async() && !goro__clock_virtual() && goro__sched.slice_ns > 0;
}

/* m: its timer, made on first use; false if there is none. */
static bool made(struct goro_m *m)
{
    int state = atomic_load_explicit(&m->dl_timer_state, memory_order_relaxed);
    if (state != TIMER_NONE)
        return state == TIMER_MADE;
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGURG;
    ev.sigev_value.sival_int = GORO_URG_BUDGET_TAG;
    ev.sigev_notify_thread_id = m->tid;
    bool ok = timer_create(CLOCK_MONOTONIC, &ev, &m->dl_timer) == 0;
    /* release: sysmon reads dl_timer once it sees MADE */
    atomic_store_explicit(&m->dl_timer_state, ok ? TIMER_MADE : TIMER_REFUSED,
                          memory_order_release);
    return ok;
}

static void set(timer_t t, int64_t at)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)(at / GORO_SEC);
    its.it_value.tv_nsec = (long)(at % GORO_SEC);
    timer_settime(t, TIMER_ABSTIME, &its, NULL);
}

void goro__dl_backstop_arm(struct goro_m *m, int64_t until)
{
    if (!m || !wanted() || !made(m))
        return;
    set(m->dl_timer, until + BACKSTOP);
    atomic_signal_fence(memory_order_seq_cst);      /* the handler's retry reads it */
    m->dl_timer_armed = true;
}

void goro__dl_backstop_retry(struct goro_m *m)
{
    if (m && m->dl_timer_armed)
        set(m->dl_timer, goro__now() + BACKSTOP_RETRY);
}

void goro__dl_backstop_disarm(struct goro_m *m)
{
    if (!m || !m->dl_timer_armed)
        return;
    m->dl_timer_armed = false;
    atomic_signal_fence(memory_order_seq_cst);      /* no retry armed past this */
    set(m->dl_timer, 0);            /* an it_value of 0 disarms */
}

void goro__dl_backstop_off(struct goro_m *m)
{
    if (m && atomic_load_explicit(&m->dl_timer_state, memory_order_acquire) == TIMER_MADE)
        set(m->dl_timer, 0);
}

void goro__dl_backstop_fini(struct goro_m *m)
{
    if (atomic_load_explicit(&m->dl_timer_state, memory_order_relaxed) == TIMER_MADE)
        timer_delete(m->dl_timer);
    atomic_store_explicit(&m->dl_timer_state, TIMER_NONE, memory_order_relaxed);
    m->dl_timer_armed = false;
}

bool goro__dl_budget_spent(struct goro_p *p, int64_t now)
{
    int64_t until = atomic_load_explicit(&p->dl_until, memory_order_relaxed);
    return until && now >= until;
}
