/* Internal data structures shared by the runtime's files. Not installed. */
#ifndef GORO_INTERNAL_H
#define GORO_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

#include "goro.h"
#include "ctx_layout.h"
#include "lock.h"

#define GORO_HIDDEN __attribute__((visibility("hidden")))
#define GORO_NOINLINE __attribute__((noinline))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* xorshift32: cheap, good enough for choosing victims and select cases.
 * *state must not be 0. */
static inline uint32_t goro__xorshift32(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

/* Bytes of the caller's stack-argument area that go() forwards: 12
 * arguments of at most 16 bytes each (enforced by the macro). */
#define GORO__STACK_WINDOW 192

/* What goro__capture stores (layout fixed by arch/<arch>/call.S). */
struct goro_callregs {
    uint64_t gpr[8];
    uint64_t vec[8][2];
    unsigned char stack[GORO__STACK_WINDOW];
};
/* The offsets arch/<arch>/call.S uses. */
_Static_assert(offsetof(struct goro_callregs, gpr) == 0, "call.S: gpr at 0");
_Static_assert(offsetof(struct goro_callregs, vec) == 64, "call.S: vec at 64");
_Static_assert(offsetof(struct goro_callregs, stack) == 192, "call.S: stack at 192");
_Static_assert(sizeof(struct goro_callregs) == 384, "call.S: 384 bytes");

void *goro__ctx_switch(void **save_sp, void *load_sp, void *value);
long goro__invoke(const struct goro_callregs *regs, void (*fn)(void), long stack);

/* Coroutine states. Transitions: FREE -> RUNNABLE (spawn) -> RUNNING <->
 * RUNNABLE / PARKED -> DEAD (finished, waiting for join) -> FREE. */
enum goro_state {
    GORO_S_FREE, GORO_S_RUNNABLE, GORO_S_RUNNING, GORO_S_PARKED, GORO_S_DEAD
};

/* Why a coroutine is parked (shown by debugging tools; keep the names in
 * runtime/registry.c in step). */
enum goro_wait {
    GORO_W_NONE, GORO_W_JOIN, GORO_W_CHAN_SEND, GORO_W_CHAN_RECV,
    GORO_W_SELECT, GORO_W_MUTEX, GORO_W_RWLOCK, GORO_W_COND, GORO_W_SEM,
    GORO_W_WAITGROUP, GORO_W_ONCE, GORO_W_SLEEP, GORO_W_IO, GORO_W_OFFLOAD,
    GORO_W__COUNT
};

/*
 * Waking a parked coroutine is a claim. Every party that may end a wait -
 * the partner who completes it, its deadline timer, goro_cancel, close of
 * an fd - first moves `wake` from ARMED to its outcome by CAS; only the
 * winner makes the coroutine runnable, the others leave it alone. ARMED is
 * set after the coroutine is saved (in the post-switch step), before the
 * object lock is released, so no claim can see a half-parked coroutine.
 * FIRM waits (offload, once, internal) can be ended by their partner only.
 */
enum goro_wake {
    GORO_WAKE_IDLE,                /* not in a wait */
    GORO_WAKE_ARMED,               /* parked: anybody may claim */
    GORO_WAKE_ARMED_FIRM,          /* parked: only the partner may claim */
    GORO_WAKE_DONE,                /* the partner completed the wait */
    GORO_WAKE_TIMEDOUT,
    GORO_WAKE_CANCELED,
};

/* How a coroutine entered: go() captured registers, or goro_spawn(fn, arg). */
enum goro_entry_kind { GORO_ENTRY_CAPTURED, GORO_ENTRY_PLAIN };

/* exit_word: orders the end of a coroutine against join and detach with
 * one atomic word. RUNNING -> DEAD (exit first), -> DETACHED (detach
 * first), or -> the joiner's struct goro (join first, then exit wakes it:
 * joiner -> WAKING -> DEAD, or back to the joiner if its wait had ended). */
#define GORO_EXIT_RUNNING 0u
#define GORO_EXIT_DETACHED 1u
#define GORO_EXIT_DEAD 2u
#define GORO_EXIT_WAKING 3u   /* the exit is claiming its joiner's wait */

#define GORO_F_EXTERNAL 0x2u  /* stands for a thread the runtime does not own */
#define GORO_F_G0       0x4u  /* a worker's scheduling context (thread stack) */

struct goro_m;
struct goro_p;
struct event;
struct event_base;

/*
 * A coroutine. It lives at the top of its own stack mapping ("slab"), so a
 * parked coroutine that has used little stack costs one page plus what the
 * kernel keeps for the mapping. Slabs are registered once, when mapped, and
 * recycled through the stack pools; the registry (runtime/registry.c) lets
 * debuggers find every one of them.
 */
struct goro {
    /* Per life: zeroed at every spawn (everything before `map`). */
    void *sp;                      /* saved context; valid while not running */
    _Atomic int state;             /* enum goro_state */
    uint8_t wait;                  /* enum goro_wait, while PARKED */
    uint8_t ret_kind;              /* enum goro__ret */
    uint8_t entry_kind;            /* enum goro_entry_kind */
    uint8_t flags;                 /* GORO_F_* */
    uint8_t stack_args;            /* call.stack holds arguments */
    uint64_t id;
    struct goro_m *m;              /* worker running it, NULL if not running */
    const void *wait_obj;          /* what it is parked on (debugging) */
    struct goro *next;             /* wake-list link */
    _Atomic uint32_t wake;         /* enum goro_wake: who ends the current wait */
    int wake_tag;                  /* the tag of the waiter that was claimed */
    _Atomic uint8_t cancelled;     /* goro_cancel was called (sticky) */
    _Atomic uint8_t token_state;   /* enum goro_token_state (token.h) */
    _Atomic int nopreempt;         /* depth of no-preempt sections */
    int saved_errno;
    /* C++ (runtime/cxx.c): the C++ runtime's per-thread exception state
     * (__cxa_get_globals), kept here while the coroutine is switched out;
     * and the flag that goro_exit is unwinding it. */
    void *cxx_caught;
    unsigned int cxx_uncaught;
    uint8_t cxx_exiting;
    struct goro__cxx_escaped *cxx_escaped;  /* until joined (coro.c) */
    _Atomic uint32_t ext_wake;     /* futex word for GORO_F_EXTERNAL parking */
    long result;                   /* join value */
    _Atomic uintptr_t exit_word;   /* GORO_EXIT_* or the joiner's record */
    void (*fn)(void);              /* entry function */
    void *arg;                     /* its argument (GORO_ENTRY_PLAIN) */
    uintptr_t min_sp;              /* lowest sp seen at switches (trim hint) */
    struct goro *pool_next;
    void *asan_fake_stack;
    const void *asan_stack_lo;     /* g0 only: the thread stack, for ASan */
    size_t asan_stack_size;
    char name[32];

    /* The slab, set when mapped and kept across lives. [map, map + guard)
     * is PROT_NONE; [lo, hi) is the usable stack. */
    char *map;
    size_t map_size;
    size_t stack_size;             /* the reserve asked for */
    char *lo, *hi;
    uint32_t reuses;               /* times this slab was reused (trim pacing) */
    uint32_t registry_slot;
    uint32_t token_slot;           /* its entry in token.c's table, 0: none yet */
    unsigned valgrind_id;
    void *tsan_fiber;              /* TSan's record: costly, so one per slab */
    uint32_t tsan_lives;           /* lives on tsan_fiber (see sanitizer.h) */

    struct goro_callregs call;     /* its arguments (GORO_ENTRY_CAPTURED) */
};

/* Post-switch actions: what the context that is switched to does with the
 * one that just left, once the leaver's registers are safely saved. */
enum goro_post {
    GORO_POST_NONE, GORO_POST_YIELD, GORO_POST_PARK,
    GORO_POST_EXIT,                /* release the dead coroutine */
    GORO_POST_EXIT_JOINED,         /* dead, and its joiner runs now: count it */
    GORO_POST_PREEMPT,             /* preempted: queue it on this M only */
    GORO_POST_MIGRATE              /* its M lost its P: to the global queue */
};

/* A run queue slot count (Go uses 256: a power of two big enough that the
 * global queue is rarely touched, small enough to scan and steal). */
#define GORO_RUNQ_SIZE 256u

/* What one poll made runnable, in the order its callbacks found them
 * (timers by deadline), chained through g->next. */
struct goro_polled {
    struct goro *head, *tail;
    int n;
};

/* A processor: the right to run coroutines, with its local run queue.
 * Owned by one worker thread at a time (see runtime/sched.c). */
struct goro_p {
    int id;
    _Atomic uint32_t runq_head;    /* consumers CAS it (owner pops, thieves steal) */
    _Atomic uint32_t runq_tail;    /* only the owner stores it */
    _Atomic(struct goro *) runq[GORO_RUNQ_SIZE];
    _Atomic(struct goro *) runnext;
    _Atomic uint32_t schedtick;    /* bumped each time a new slice starts */
    uint32_t runnext_streak;       /* inherited turns in a row (owner only) */
    _Atomic uint64_t spawned;      /* coroutines spawned here (owner writes) */
    _Atomic uint64_t exited;       /* coroutines ended here (owner writes) */
    _Atomic int running;           /* a worker is executing on it */
    struct goro_m *m;              /* the worker that owns it (under goro__sched.lock when it changes) */
    _Atomic(struct goro_m *) owner;  /* m, or GORO_P_RETAKING while sysmon takes it */
    struct goro_p *idle_next;      /* sched.pidle list, under sched.lock */
    bool idle;                     /* on the idle list, under sched.lock */
    uint32_t rand;                 /* steal-order random state */
    uint64_t id_next, id_end;      /* block of coroutine ids handed to this P */
    struct goro *free_slabs;       /* stack cache */
    int nfree;
    struct event_base *base;       /* I/O and timers of coroutines run here */
    struct event *wake_ev;         /* activated to wake an M asleep in base */
    _Atomic int poll_lock;         /* whoever holds it may loop base */
    uint32_t poll_tick;            /* schedtick at the last poll */
    _Atomic uint32_t npolls;       /* polls of base, by anyone (sysmon watches) */
    _Atomic uint32_t preempt_req;  /* schedtick + 1 of a slice to cut short */
    _Atomic int want_global;       /* sysmon: the global queue has waited */
    uint32_t sm_tick, sm_npolls;   /* sysmon's last look (sysmon only) */
    int64_t sm_when, sm_since, sm_poll_when;
    int64_t sm_retry;              /* next look at a stuck slice, after this */
    uint32_t sm_declines;          /* preempt_declines when the slice began */
    _Atomic uint32_t preempt_declines;  /* requests the signal handler could not honour */
};

/* A worker thread. */
struct goro_m {
    int id;
    pthread_t thread;
    pid_t tid;
    struct goro_p *p;
    struct goro *curg;             /* the coroutine running here, or NULL */
    struct goro g0;                /* the thread's own stack: schedules */
    _Atomic uint32_t note;         /* sleep/wake futex word */
    int *errno_ptr;                /* this thread's errno */
    bool spinning;                 /* looking for work (counted in nmspinning) */
    enum goro_post post;
    struct goro *post_g;
    void (*post_unlock)(void *);
    bool (*post_commit)(void *, struct goro *);
    void *post_arg;
    uint32_t post_armed;           /* GORO_WAKE_ARMED[_FIRM] for POST_PARK */
    struct event *post_timer;      /* deadline timer to arm, or NULL */
    int64_t post_deadline;
    struct goro_polled slept;      /* what woke its sleeping poll (m only) */
    /* Preempted here: resume here (FIFO), unless this thread stays outside
     * the runtime for UNPIN_SLICES after losing its P (then sysmon moves
     * them to the global queue). Under pin_lock; npinned for peeking. */
    goro_lock_t pin_lock;
    struct goro *pinned, *pinned_tail;
    _Atomic int npinned;
    _Atomic int64_t lost_p_at;     /* sysmon took its P away then (0: has one) */
    _Atomic int in_rt;             /* > 0 while in the runtime (may touch p) */
    _Atomic uint32_t handed;       /* futex: a P was handed to this P-less M */
    struct goro_m *next_free;      /* goro__sched.spares / .waitp list link */
    _Atomic int signal_pending;    /* a preemption SIGURG is on its way */
    int64_t signal_sent_at;        /* when (sysmon only) */
    void *altstack;
    size_t altstack_size;
};

/* The scheduler's global state. */
struct goro_sched {
    goro_lock_t lock;              /* global queue, idle list */
    struct goro **gq;              /* global queue: a ring of gq_cap pointers */
    uint32_t gq_cap, gq_first;
    _Atomic int gq_size;
    struct goro_p *pidle;
    _Atomic int npidle;
    _Atomic int nmspinning;
    int nprocs;
    struct goro_p *procs;
    struct goro_m *ms;             /* [ms_cap]: the first nms are threads */
    _Atomic int nms;
    int ms_cap;
    struct goro_m *spares;         /* P-less Ms, asleep (under lock) */
    struct goro_m *waitp;          /* P-less Ms with pinned work, waiting for a P */
    _Atomic int nwaitp;            /* how many (readable without the lock) */
    bool handoff_ok;               /* membarrier works: handoff is allowed */
    _Atomic int started;
    _Atomic int stopping;
    int64_t gq_waiting_since;      /* sysmon only: when it saw gq non-empty */
    _Atomic uint64_t spawned_ext;  /* spawns from threads without a P */
    _Atomic int draining;          /* goro_shutdown is waiting */
    _Atomic int closing;           /* goro_shutdown: spawns from outside refused */
    _Atomic int ext_spawning;      /* spawns under way on threads without a P */
    _Atomic uint32_t live_futex;   /* bumped by exits while draining */
    _Atomic uint64_t id_next;
    size_t stack_size;             /* default reserve */
    int64_t slice_ns;              /* preemption slice; < 0: never */
};

extern GORO_HIDDEN struct goro_sched goro__sched;

/* sched.c */
GORO_HIDDEN struct goro_m *goro__m(void);
GORO_HIDDEN struct goro *goro__current(void);
GORO_HIDDEN void goro__ready(struct goro *g);
GORO_HIDDEN void goro__ready_list(struct goro *list);
/* How a wait is set up: why (for debuggers), the object, the lock to drop
 * once parked (unlock) or the publishing step (commit: parks unless it
 * returns false, for waits published by one atomic step), a deadline
 * (GORO_FOREVER for none) and whether it is firm (not cancellable). */
struct goro_park {
    enum goro_wait why;
    const void *obj;
    void (*unlock)(void *);
    bool (*commit)(void *, struct goro *);
    void *arg;
    int64_t deadline;
    bool firm;
};
/* Parks the running coroutine (or blocks this thread if it is not one)
 * until a claim ends the wait; returns the winning enum goro_wake. */
GORO_HIDDEN int goro__park(const struct goro_park *how);
/* Claims g's wait with outcome; true if it won (the caller then wakes g). */
GORO_HIDDEN bool goro__claim(struct goro *g, uint32_t outcome);
/* Claims with GORO_WAKE_DONE and makes g runnable; false if it lost. */
GORO_HIDDEN bool goro__wake(struct goro *g);
/* Before waiting: -ECANCELED, -ETIMEDOUT (deadline passed) or 0. */
GORO_HIDDEN int goro__wait_check(int64_t deadline);
/* Returns err from a call that ended without parking (wait_check said no),
 * after the preemption check such a return owes (call it with no lock
 * held): a loop on an expired or cancelled wait must still give way. */
GORO_HIDDEN int goro__wait_refused(int err);
/* The error for a park result other than GORO_WAKE_DONE. */
GORO_HIDDEN int goro__wake_error(int outcome);
GORO_HIDDEN struct goro_p *goro__current_p(void);
/* Around code that uses the calling M's P from a coroutine: enter returns
 * the P (NULL on a thread without one), which is the M's until leave.
 * A coroutine whose M lost its P (handed off while it blocked) moves to
 * another worker in enter. */
GORO_HIDDEN struct goro_p *goro__p_enter(void);
GORO_HIDDEN void goro__p_leave(void);
GORO_HIDDEN __attribute__((noreturn)) void goro__exit_current(long result);
GORO_HIDDEN void goro__schedule_new(struct goro *g);
GORO_HIDDEN int goro__sched_start(int nprocs);
/* goro_shutdown: waits for every coroutine to end (0, or -ETIMEDOUT at
 * deadline: then nothing is stopped), then stops. */
GORO_HIDDEN int goro__sched_drain(int64_t deadline);
GORO_HIDDEN void goro__sched_stop(void);
/* Around a spawn from a thread without a P: -ESHUTDOWN while shutting down. */
GORO_HIDDEN int goro__spawn_gate_enter(void);
GORO_HIDDEN void goro__spawn_gate_leave(void);
GORO_HIDDEN void goro__spawn_gate_open(void);
GORO_HIDDEN uint64_t goro__next_id(void);
/* A new coroutine's first steps on its own stack, and its last. */
GORO_HIDDEN void goro__coro_start(struct goro *g);
GORO_HIDDEN void goro__coroutine_ended(void);

/* runtime.c */
GORO_HIDDEN int goro__ensure_started(void);

/* stack.c */
GORO_HIDDEN struct goro *goro__slab_get(size_t stack_size, int *err);
GORO_HIDDEN void goro__slab_put(struct goro *g);
GORO_HIDDEN void goro__slab_free_all(void);
GORO_HIDDEN bool goro__slab_trim_idle(void);
/* The monitor thread, every round: unmaps pooled stacks unused for 1 s.
 * Pending: the pool is not empty, so later ticks may have work. */
GORO_HIDDEN void goro__slab_trim_tick(int64_t now);
GORO_HIDDEN bool goro__slab_trim_pending(void);
GORO_HIDDEN size_t goro__page_size(void);
GORO_HIDDEN int goro__stack_size_check(size_t size, size_t *rounded);

/* registry.c */
GORO_HIDDEN int goro__registry_add(struct goro *g);
GORO_HIDDEN void goro__registry_remove(struct goro *g);
GORO_HIDDEN void goro__registry_set_ms(struct goro_m *ms, int n);
GORO_HIDDEN struct goro *goro__registry_last(void);
/* Calls fn for every registered slab, with no slab unmapped meanwhile;
 * in_signal: gives up waiting for the lock after a while and returns 1. */
GORO_HIDDEN int goro__registry_walk(void (*fn)(struct goro *g, void *arg), void *arg,
                                    bool in_signal);
GORO_HIDDEN struct goro_m *goro__registry_ms(int *n);
GORO_HIDDEN const char *goro__state_name(int state);
GORO_HIDDEN const char *goro__wait_name(int wait);

/* timer.c */
GORO_HIDDEN int64_t goro__now(void);
GORO_HIDDEN void goro__timer_arm(struct event *ev, struct goro_p *p, struct goro *g,
                                 int64_t deadline);
GORO_HIDDEN void goro__timer_disarm(struct event *ev);

/* netpoll.c: the poller. The scheduler's only way in is goro__netpoll,
 * which hands back the coroutines a look at one P's event base made
 * runnable; everything libevent (bases, descriptor records, timers) stays
 * behind it. */
/* From an event callback, inside goro__netpoll's loop: g (already
 * claimed) joins that poll's result. */
GORO_HIDDEN void goro__ready_polled(struct goro *g);
GORO_HIDDEN int goro__netpoll_init(struct goro_p *p);
GORO_HIDDEN void goro__netpoll_fini(struct goro_p *p);
/* block: as m's way to sleep; returns at once unless m->note still reads
 * GORO_NOTE_SLEEPING once the base is m's to loop. room: at most this many
 * coroutines are made runnable (at least one); the base keeps the rest. */
#define GORO_NOTE_SLEEPING 2
/* Looks at p's base once and puts what became runnable in *out (at most
 * room; the rest stay for the next look); returns out->n. sleep_note NULL:
 * never waits. Else it is the caller's note, and the poll sleeps until an
 * event or goro__netpoll_wake - unless the note no longer reads
 * GORO_NOTE_SLEEPING once the poll owns the base (a wake already sent is
 * not lost). */
GORO_HIDDEN int goro__netpoll(struct goro_p *p, _Atomic uint32_t *sleep_note, int room,
                              struct goro_polled *out);
GORO_HIDDEN void goro__netpoll_wake(struct goro_p *p);
GORO_HIDDEN void goro__netpoll_forget_all(void);
extern GORO_HIDDEN _Atomic int goro__io_used;

/* fork.c: in a child forked while the runtime ran, goro is refused. */
extern GORO_HIDDEN _Atomic int goro__fork_child;
static inline bool goro__forked(void)
{
    return unlikely(atomic_load_explicit(&goro__fork_child, memory_order_relaxed));
}
GORO_HIDDEN int goro__fork_install(void);      /* at start, under its lock */
GORO_HIDDEN int goro__forked_error(void);      /* -ENOTRECOVERABLE; says why once */
/* goro__park in such a child: releases how's lock, returns
 * GORO_WAKE_CANCELED without parking. */
GORO_HIDDEN int goro__forked_park(const struct goro_park *how);

/* preempt.c */
GORO_HIDDEN int goro__preempt_install(void);
GORO_HIDDEN void goro__preempt_signal(struct goro_m *m);
GORO_HIDDEN bool goro__preempt_async(void);
/* sched.c: is a preemption asked for p's current slice? Yield if so. */
GORO_HIDDEN bool goro__preempt_requested(struct goro_p *p);
GORO_HIDDEN void goro__preempt_check(void);
/* uc: the copied signal frame's ucontext, which rt_sigreturn restores. */
GORO_HIDDEN void goro__preempt_park(void *uc);

/* sysmon.c */
GORO_HIDDEN int goro__sysmon_start(int64_t slice_ns);
GORO_HIDDEN void goro__sysmon_stop(void);
GORO_HIDDEN void goro__sysmon_kick(void);
/* sched.c, for sysmon */
#define GORO_P_RETAKING ((struct goro_m *)1)
GORO_HIDDEN bool goro__handoff(struct goro_p *p, struct goro_m *m);
GORO_HIDDEN bool goro__handoff_wanted(struct goro_p *p, bool long_run, bool *blocked,
                                      struct goro_m **m);
GORO_HIDDEN void goro__sysmon_attach(struct goro_m *m);
GORO_HIDDEN void goro__inject_global(struct goro_polled *list);
/* Moves the coroutines pinned to Ms that lost their P at least `after` ns
 * ago and are still outside the runtime to the global queue; true if it
 * moved any. *pending: some are pinned to an M without a P (watch them). */
GORO_HIDDEN bool goro__unpin_stuck(int64_t now, int64_t after, bool *pending);

/* offload.c */
GORO_HIDDEN void goro__offload_stop(void);

/* signal.c: every thread of the runtime is made here (stack_size 0: the
 * default; returns pthread_create's result, a positive errno), with the
 * notifiable signals blocked and the runtime's own (SIGURG, the faults)
 * unblocked. When the last of them ends, goro_signal_notify's
 * subscriptions end too. */
GORO_HIDDEN int goro__thread_create(pthread_t *thread, size_t stack_size,
                                    void *(*fn)(void *), void *arg);
/* The stack of the workers, spares and sysmon: they run only the
 * scheduler (coroutines have their own stacks). */
#define GORO_THREAD_STACK (256 * 1024)
/* chan.c, for signal.c: the element size ch was made with. */
GORO_HIDDEN size_t goro__chan_elem_size(const goro_chan_t *ch);
/* netpoll.c, for signal.c: base 0 of the running runtime watches fd for
 * reading; cb runs on a runtime thread's g0 and must not switch. */
GORO_HIDDEN int goro__netpoll_watch(struct event *ev, int fd,
                                    void (*cb)(int, short, void *), void *arg);

/* env.c: settings from the environment, all by one rule. A setting that
 * is unset or empty returns false (or dflt); a bad one too, after printing
 * "goro: ignoring NAME=VALUE (want ...)"; the caller then uses its default.
 * _long: a decimal number in min..max (min >= 0; more: text after the
 * range in the message); _size: bytes, k/M/g suffixes allowed; _is: the
 * value is exactly word; _flag: 0 or 1. */
GORO_HIDDEN bool goro__env_long(const char *name, long min, long max, const char *more,
                                long *out);
GORO_HIDDEN bool goro__env_size(const char *name, size_t min, size_t max, size_t *out);
GORO_HIDDEN bool goro__env_is(const char *name, const char *word);
GORO_HIDDEN bool goro__env_flag(const char *name, bool dflt);
/* Coroutine stack sizes allowed (goro_attr_t.stack_size, GORO_STACK_SIZE). */
#define GORO_STACK_MIN ((size_t)16 * 1024)
#define GORO_STACK_MAX ((size_t)1 << 30)

/* fault.c */
GORO_HIDDEN int goro__fault_thread_init(struct goro_m *m);
GORO_HIDDEN void goro__fault_thread_fini(struct goro_m *m);
GORO_HIDDEN void goro__fault_install(void);
/* Installs handler for sig as the runtime's handlers all are: SA_SIGINFO,
 * on the per-M alternate stack (a coroutine may be near its stack's end),
 * restarting interrupted calls, nothing extra blocked. old: as sigaction. */
GORO_HIDDEN int goro__sigaction(int sig, void (*handler)(int, siginfo_t *, void *),
                                struct sigaction *old);
/* Calls the handler act names, if it names one (not SIG_DFL or SIG_IGN):
 * for chaining to what the program installed before us. */
GORO_HIDDEN bool goro__sig_chain(const struct sigaction *act, int sig, siginfo_t *si, void *uc);
GORO_HIDDEN void goro__backtrace_fd(int fd, void *ucontext);
/* Where reports go: a FILE, or (file NULL) a descriptor written with
 * write(2), which is what a signal handler uses. */
struct goro_out {
    FILE *file;
    int fd;
};
GORO_HIDDEN void goro__outf(struct goro_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The backtrace of a signal context, or of the caller if ucontext is NULL. */
GORO_HIDDEN void goro__backtrace_out(struct goro_out *o, void *ucontext);
/* The backtrace of a coroutine that is not running, from its saved context. */
GORO_HIDDEN void goro__backtrace_saved(struct goro_out *o, const struct goro *g);
/* "name" or "name+0x12" or the address, for a code address. */
GORO_HIDDEN void goro__symbolize(const void *ip, char *buf, size_t len);

/* dump.c */
GORO_HIDDEN void goro__dump_install(void);
GORO_HIDDEN void goro__dump_out(struct goro_out *o, void *ucontext, bool in_signal);
/* "chan recv 0x...", "io fd=12", "join coroutine 7": what g waits for. */
GORO_HIDDEN void goro__describe_wait(const struct goro *g, char *buf, size_t len);

/* coro.c */
GORO_HIDDEN struct goro *goro__external_self(void);
/* Prints "goro: <message>\n" to stderr once per call site key. */
GORO_HIDDEN void goro__warn_once(_Atomic int *once, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
GORO_HIDDEN void goro__coro_main(void *g);
GORO_HIDDEN void goro__capture_store(const struct goro_callregs *regs);
GORO_HIDDEN void goro__release(struct goro *g);

/* cxx.c: C++ support (docs/cxx.md); the switch path's part is in
 * runtime/cxx_eh.h. goro_exit's first step: with the C++ runtime, unwinds
 * the coroutine's frames (destructors run) and calls goro_exit again.
 * Returns at once in C, in that second call, or if the unwinder gave up:
 * goro_exit then ends the coroutine. */
GORO_HIDDEN void goro__cxx_exit_unwind(long result);


#endif
