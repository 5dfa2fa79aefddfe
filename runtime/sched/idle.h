/* Ms that sleep and wake, idle Ps, spinners (idle.c; invariants 5-7 in
 * sched.c). Declarations, and the full barrier both sides of invariant 5
 * put between making work visible and looking at the other side. */
#ifndef GORO_SCHED_IDLE_H
#define GORO_SCHED_IDLE_H

#include "internal.h"
#include "sched/sched.h"
#include "base/sanitizer.h"            /* GORO_TSAN */

/* A full barrier (invariant 5). TSan does not model fences (gcc rejects
 * them under -fsanitize=thread), so there a seq_cst read-modify-write
 * stands in. */
#ifdef GORO_TSAN
extern GORO_HIDDEN _Atomic int goro__barrier_word;
static inline void goro__full_barrier(void) { atomic_fetch_add(&goro__barrier_word, 0); }
#else
static inline void goro__full_barrier(void) { atomic_thread_fence(memory_order_seq_cst); }
#endif

/* An M's note: EMPTY, NOTIFIED, SLEEPING (in an event base: m->sleep_base)
 * or FUTEX (on the note's futex; idle.c). */
enum { NOTE_EMPTY, NOTE_NOTIFIED, NOTE_SLEEPING = GORO_NOTE_SLEEPING, NOTE_FUTEX };

/* Sleeps until woken through the note (true), or until events made
 * coroutines runnable (in m->slept) or a timer of m's P is due (false:
 * the note then still reads SLEEPING). */
GORO_HIDDEN bool goro__note_sleep(struct goro_m *m);
GORO_HIDDEN void goro__m_notify(struct goro_m *m);
/* p's first timer moved earlier, by a thread that does not hold p: the
 * sleep of p's M ends, and it looks again. */
GORO_HIDDEN void goro__p_kick(struct goro_p *p);
/* A waker took our P off the idle list while events woke us: wait for its
 * notice, so the note is consistent. */
GORO_HIDDEN void goro__note_absorb(struct goro_m *m);

/* The list of idle Ps. get and put: under goro__sched.lock. take_back: p's
 * own M takes p off again, unless a waker took it first (and is waking the
 * M: invariant 7); true if it was still there. */
GORO_HIDDEN struct goro_p *goro__pidle_get(void);
GORO_HIDDEN void goro__pidle_put(struct goro_p *p);
GORO_HIDDEN bool goro__pidle_take_back(struct goro_p *p);

/* Invariant 11 (active.c): as many Ps are busy as may be - a producer
 * wakes nobody, and an M going idle leaves queued work to the busy ones.
 * Never with classes in use, nor with every P allowed. */
static inline bool goro__active_full(void)
{
    int cap = atomic_load_explicit(&goro__sched.active, memory_order_relaxed);
    return cap < goro__sched.nprocs && !goro__classes_in_use() &&
           goro__sched.nprocs - atomic_load(&goro__sched.npidle) >= cap;
}

/* Producer side of invariant 5: call after making work visible. held: the
 * P the caller holds inside the runtime (goro__rt_enter or g0), else NULL. */
GORO_HIDDEN void goro__spinner_start_if_idle(struct goro_p *held);
/* sysmon: a busy P keeps one coroutine while work waits behind it: wake
 * an idle M even though as many Ps are busy as may be (invariant 11). */
GORO_HIDDEN void goro__spinner_start_stuck(void);
/* m found work while spinning: it stops, and wakes the next (inv. 6). */
GORO_HIDDEN void goro__stop_spinning(struct goro_m *m);
/* m stops counting as a spinner without handing the role on. */
GORO_HIDDEN void goro__spinning_drop(struct goro_m *m);
/* Under goro__sched.lock: the first M waiting for a P for its pinned
 * coroutines, taken off the list, or NULL. */
GORO_HIDDEN struct goro_m *goro__waitp_take_locked(void);

#endif
