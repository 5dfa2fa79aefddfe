/* The runtime's data model - coroutines (struct goro), processors
 * (goro_p), worker threads (goro_m) and the scheduler's state - shared by
 * every layer of runtime/. Not installed.
 *
 * runtime/ is in layers, a folder each. What a layer is, whom it may call
 * and the contracts it offers and uses are in the first comment of its
 * face header (sched/sched.h, io/poller.h, ...); tools/check-layers.py
 * reads them, checks every call and #include against them and writes the
 * map into docs/architecture.md. Each file includes the faces it uses;
 * this one only base/'s. Lock order: base/lock.h.
 *
 * in layer: base
 */
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
#include "base/lock.h"

#define GORO_HIDDEN __attribute__((visibility("hidden")))
#define GORO_NOINLINE __attribute__((noinline))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The runtime's rules, checked in GORO_DEBUG builds (make test-debug):
 * a broken one prints "goro: broken rule: <cond> (file:line)" with a
 * backtrace and aborts. Free in other builds: cond is not evaluated. */
#ifdef GORO_DEBUG
#define GORO_ASSERT(cond) \
    (likely(cond) ? (void)0 : goro__assert_failed(#cond, __FILE__, __LINE__))
__attribute__((visibility("hidden"), noreturn, cold)) void
goro__assert_failed(const char *cond, const char *file, int line);
/* Run by goro__park_commit, if set, just before it arms a wait (arming) and
 * between arming it and the rest of its commit (armed): let a test hold
 * those windows open (tests/test_priority.c, tests/test_cancel.c). */
struct goro;
extern void (*goro__debug_park_arming)(struct goro *g);
extern void (*goro__debug_park_armed)(struct goro *g);
/* Run by goro_group_wait, if set, once the waiter has lent the members its
 * class and before it parks: a loan landing there must still reach them
 * (tests/test_priority.c). */
extern void (*goro__debug_group_lent)(struct goro *g);
#else
#define GORO_ASSERT(cond) ((void)0)
#endif
/* Set: sysmon leaves goro__sched.active alone (sched/active.c), and a
 * test moves it itself (tests/test_sched.c). In every build: the stress
 * runs under TSan too. */
extern _Atomic bool goro__debug_active_frozen __attribute__((visibility("hidden")));

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
 * runtime/debug/registry.c in step). */
enum goro_wait {
    GORO_W_NONE, GORO_W_JOIN, GORO_W_CHAN_SEND, GORO_W_CHAN_RECV,
    GORO_W_SELECT, GORO_W_MUTEX, GORO_W_RWLOCK, GORO_W_COND, GORO_W_SEM,
    GORO_W_WAITGROUP, GORO_W_ONCE, GORO_W_SLEEP, GORO_W_IO, GORO_W_OFFLOAD,
    GORO_W_GROUP, GORO_W_FLIGHT, GORO_W_FUTURE, GORO_W_BARRIER,
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
    GORO_WAKE_ARMED_LENDS,         /* parked in a wait that lends its class (a
                                      lock's waiter): anybody may claim, and a
                                      change of its class may (RECLASS) */
    GORO_WAKE_ARMED_FIRM,          /* parked: only the partner may claim */
    GORO_WAKE_ARMED_FIRM_LENDS,    /* the same in a wait that lends its class
                                      (a group's wait): and a change of its
                                      class (RECLASS) */
    GORO_WAKE_DONE,                /* the partner completed the wait */
    GORO_WAKE_TIMEDOUT,
    GORO_WAKE_CANCELED,
    GORO_WAKE_RECLASS,             /* its class changed while it waited: it lends
                                      the new one and waits on (sched/prio.c) */
};

/* ARMED or ARMED_LENDS: a wait any claim may end (one compare). */
static inline bool goro__wake_open(uint32_t w)
{
    return w - GORO_WAKE_ARMED <= GORO_WAKE_ARMED_LENDS - GORO_WAKE_ARMED;
}

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

/* A coroutine's value for a key (coro/local.c): the value and the
 * generation of the key it was set under. */
#define GORO_LOCALS 8
struct goro_local {
    void *value;
    uint32_t gen;
};

/* Watching a scope - a coroutine or a group - for its cancel
 * (wait/scope.c): embedded in the scope, under the scope's lock (a
 * coroutine's groups_lock, a group's lock); zero is "not cancelled, not
 * ended". */
struct goro_afterfn;
struct goro_watchers {
    goro_chan_t *done;             /* made on first request; closed by the cancel */
    struct goro_afterfn *afters;   /* armed after-functions, not yet told */
    bool fired;                    /* cancelled: done closed, afters told */
    bool ended;                    /* the scope is over: afters told it will not fire */
};

/*
 * A coroutine. It lives at the top of its own stack mapping ("slab"), so a
 * parked coroutine that has used little stack costs one page plus what the
 * kernel keeps for the mapping. Slabs are registered once, when mapped, and
 * recycled through the stack pools; the registry (runtime/debug/registry.c) lets
 * debuggers find every one of them.
 */
struct goro {
    /* Per life: zeroed at every spawn (everything before min_sp). */
    void *sp;                      /* saved context; valid while not running */
    _Atomic int state;             /* enum goro_state */
    uint8_t wait;                  /* enum goro_wait, while PARKED */
    uint8_t ret_kind;              /* enum goro__ret */
    uint8_t entry_kind;            /* enum goro_entry_kind */
    uint8_t flags;                 /* GORO_F_* */
    uint8_t stack_args;            /* call.stack holds arguments */
    uint8_t wait_timed;            /* while PARKED: a deadline ends the wait */
    /* Its class (enum goro__prio), and the classes lent to it by waiters
     * (sched/prio.c: low 16 bits count NORMAL loans, high 16 HIGH ones).
     * Zero for both: NORMAL, nothing lent. In the first line, beside
     * state, which every wake-up writes: reading them costs no miss. */
    int8_t prio;
    _Atomic uint32_t loans;
    uint64_t id;
    struct goro_m *m;              /* worker running it, NULL if not running */
    const void *wait_obj;          /* what it is parked on (debugging) */
    struct goro *next;             /* wake-list link */
    _Atomic uint32_t wake;         /* enum goro_wake: who ends the current wait */
    int wake_tag;                  /* the tag of the waiter that was claimed */
    _Atomic uint8_t cancelled;     /* goro_cancel was called (sticky) */
    /* The deadline in force (sched/park.c): every wait of its own honours
     * the nearer of it and the one it is given. Its group's, set when it
     * is linked (before it first runs), or narrowed by goro_deadline_push;
     * read and written by itself only after that. 0: none. */
    int64_t in_force;
    _Atomic uint8_t committing;    /* its park's commit is still running (park.c) */
    _Atomic uint8_t token_state;   /* enum goro_token_state (token.h) */
    _Atomic int nopreempt;         /* depth of no-preempt sections */
    int saved_errno;
    /* C++ (runtime/coro/cxx.c): the C++ runtime's per-thread exception state
     * (__cxa_get_globals), kept here while the coroutine is switched out;
     * and the flag that goro_exit is unwinding it. */
    void *cxx_caught;
    unsigned int cxx_uncaught;
    uint8_t cxx_exiting;
#ifdef GORO_DEBUG
    _Atomic uint8_t saved;         /* its context is saved: it may be resumed */
#endif
    struct goro__cxx_escaped *cxx_escaped;  /* until joined (coro.c) */
    goro_err_t *err;               /* goro_exit_err's, until joined (err.c) */
    /* Why it was cancelled (goro_cancel_cause): set once from NULL by a
     * compare-exchange (the first cause wins), read by itself only; its end
     * swaps in GORO__CAUSE_ENDED and frees it, so a later cause is refused
     * (and freed by its giver) rather than leaked. */
    _Atomic(goro_err_t *) cause;
    /* The tree of groups (wait/group.c): the group it is a member of and
     * its place in that group's list (under the group's lock); the groups
     * it made (under groups_lock). */
    struct goro_group *group;
    struct goro *group_prev, *group_next;
    struct goro_group *groups;
    goro_lock_t groups_lock;
    /* Its done channel and after-functions (wait/scope.c), under
     * groups_lock; the channel lives until the handle is released. */
    struct goro_watchers watch;
    /* Run by its end, on its own stack, with the result it ended with (and
     * g->err): how a computation that waiters share hands its outcome to
     * them (wait/flight.c). NULL: nothing. */
    void (*end_hook)(struct goro *g, long result);
    /* goro_waitgroup_go's wait group: its end counts it done. */
    goro_waitgroup_t *wg;
    /* The locks it holds (sched/prio.c): their holder records, linked
     * through h->next, under holds_lock; its end takes them all off. */
    struct goro_holder *holds;
    goro_lock_t holds_lock;
    /* Cleanups its end runs, innermost first, if it ends inside the
     * frames that pushed them (coro/coro.h: goro_once's fn). Its own. */
    struct goro_unwind *unwind;
    _Atomic uint32_t ext_word;     /* futex word for GORO_F_EXTERNAL parking */
    long result;                   /* join value */
    _Atomic uintptr_t exit_word;   /* GORO_EXIT_* or the joiner's record */
    void (*fn)(void);              /* entry function */
    void *arg;                     /* its argument (GORO_ENTRY_PLAIN) */
    void *asan_fake_stack;
    /* The deadline class (sched/deadline.c): its reservation (set by
     * itself, or by its spawner before it runs), the earliest deadline
     * lock waiters lend it (0: none; under the loans' lock), and the
     * deadline it was queued with on an EDF list. */
    _Atomic(struct goro_dlres *) dl;
    _Atomic int64_t dl_lent;
    int64_t dl_key;

    /* Per life too, but set at every spawn instead (GORO_LIFE_ZEROED ends
     * the cleared part: fewer bytes to clear). */
    uintptr_t min_sp;              /* lowest sp seen at switches (trim hint) */
    /* Coroutine-local values (coro/local.c): not cleared at a spawn but
     * by the end of a life that set any (locals_used), so a spawn pays
     * nothing for them. */
    uint8_t locals_used;
    uint32_t locals_more_n;        /* entries in locals_more */
    struct goro_local *locals_more;    /* keys past GORO_LOCALS, or NULL */
    struct goro_local locals[GORO_LOCALS];
    char name[32];                 /* name[0] cleared; the rest may be stale */

    /* Not per life: the g0 records' thread stacks (for ASan), and the
     * pool's links while the slab waits in one (coro/stack.c: the next
     * slab of its chain; the first of a chain, the next chain and the
     * chain's length). */
    const void *asan_stack_lo;
    size_t asan_stack_size;
    struct goro *pool_next;
    struct goro *pool_chain;
    uint32_t pool_chain_len;

    /* The slab, set when mapped and kept across lives. [map, map + guard)
     * is the guard; [lo, hi) is the usable stack. */
    char *map;
    size_t map_size;
    struct goro_arena *arena;      /* the arena it is a slot of; NULL: its own mapping */
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

#define GORO__CAUSE_ENDED ((goro_err_t *)(uintptr_t)1)

/* The part of a record cleared for each new life (stack.c). */
#define GORO_LIFE_ZEROED offsetof(struct goro, min_sp)

/* Priority classes inside the runtime: enum goro_priority minus 2, so that
 * a zeroed record is NORMAL. */
enum goro__prio { GORO_PRIO_LOW = -1, GORO_PRIO_NORMAL = 0, GORO_PRIO_HIGH = 1 };
/* The deadline class, above every priority (sched/deadline.c): never a
 * coroutine's own class nor a loan, only where it is queued and what a P
 * runs (goro__queue_class). */
#define GORO_PRIO_DL 2
#define GORO_LOAN_NORMAL 1u
#define GORO_LOAN_HIGH (1u << 16)

/* GORO_NO_PRIORITIES builds the scheduler without classes - every
 * coroutine NORMAL, the HIGH and LOW lists never looked at - for
 * bench/run.sh to price them (the API stays; it has no effect). */
#ifdef GORO_NO_PRIORITIES
#define GORO_CLASSES 0
#else
#define GORO_CLASSES 1
#endif

/* g's own class. Other threads read it (lenders, the API) while g may set
 * it (goro_priority_set): one relaxed byte, never torn. */
static inline int goro__prio_own(const struct goro *g)
{
    return __atomic_load_n(&g->prio, __ATOMIC_RELAXED);
}

/* g's class with the loans it has: its own, or the highest one lent. */
static inline int goro__prio_with(const struct goro *g, uint32_t loans)
{
    if (!GORO_CLASSES)
        return GORO_PRIO_NORMAL;
    if (loans >= GORO_LOAN_HIGH)
        return GORO_PRIO_HIGH;
    int own = goro__prio_own(g);
    return loans && own < GORO_PRIO_NORMAL ? GORO_PRIO_NORMAL : own;
}

/* g's class now. */
static inline int goro__prio_of(const struct goro *g)
{
    return goro__prio_with(g, atomic_load_explicit(&((struct goro *)g)->loans,
                                                   memory_order_relaxed));
}

/* Appends g to a list linked through g->next. */
static inline void goro__chain_append(struct goro **head, struct goro **tail, struct goro *g)
{
    g->next = NULL;
    if (*tail)
        (*tail)->next = g;
    else
        *head = g;
    *tail = g;
}

/* The runnable coroutines of the classes besides NORMAL (a P's, or the
 * global ones): a list per class, linked through g->next, under lock;
 * n[i] is list i's length, readable without it. The DL list is kept in
 * order of g->dl_key (earliest first; sched/deadline.c), and dl_first is
 * its head's key (0: empty), also readable without the lock. */
enum { GORO_PQ_HIGH, GORO_PQ_LOW, GORO_PQ_DL, GORO_PQ_COUNT };
struct goro_classq {
    goro_lock_t lock;
    struct goro *head[GORO_PQ_COUNT], *tail[GORO_PQ_COUNT];
    _Atomic int n[GORO_PQ_COUNT];
    _Atomic int64_t dl_first;
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

/* A timer (sched/timer.c): an entry in one P's heap, kept in its owner's
 * memory - the parking frame of a coroutine with a deadline, a ticker -
 * never allocated by the runtime. */
struct goro_timer {
    int64_t when;                  /* CLOCK_MONOTONIC ns, under the heap's lock */
    struct goro_p *p;              /* the heap it belongs to (set when started) */
    _Atomic int32_t idx;           /* heap index, or GORO_TIMER_OFF / _SPILLED */
    uint8_t kind;                  /* GORO_TIMER_WAKE or GORO_TIMER_FUNC */
    bool running;                  /* FUNC: fire runs now (under the heap's lock) */
    bool stopped;                  /* FUNC: stopped meanwhile: not put back */
    struct goro *g;                /* WAKE: the parked coroutine whose wait it claims */
    /* FUNC: runs without the heap's lock on a runtime thread's g0 (must not
     * switch); returns when to fire next, or -1 for never. */
    int64_t (*fire)(struct goro_timer *t, int64_t now);
    struct goro_timer *spill_next; /* the spill list (heap could not grow) */
};
#define GORO_TIMER_OFF (-1)        /* in no heap: never started, fired, or stopped */
#define GORO_TIMER_SPILLED (-2)    /* on its P's spill list */
enum { GORO_TIMER_WAKE, GORO_TIMER_FUNC };

/* A heap slot: the deadline beside the pointer, so that sifting reads no
 * timer. */
struct goro_timer_slot {
    int64_t when;
    struct goro_timer *t;
};

/* One P's timers: a 4-ary min-heap by `when` (shallower than a binary heap:
 * fewer cache lines per sift), and a list for the rare timer added when
 * the heap could not grow. Anyone may add, stop or run them, under lock;
 * `first` is readable without it. */
struct goro_timers {
    goro_lock_t lock;
    struct goro_timer_slot *heap;
    uint32_t n, cap;
    struct goro_timer *spill;
    _Atomic int64_t first;         /* earliest when, INT64_MAX: none */
};

/* Stall reports (debug/stall.c). A sample of what an M runs, taken by
 * its SIGURG handler when sysmon asks: sysmon bumps req and signals; the
 * handler fills the rest and stores done = req (release). */
#define GORO_STALL_FRAMES 32
struct goro_stall_sample {
    _Atomic uint32_t req, done;
    uint64_t id;                   /* 0: no coroutine was running */
    char name[32];
    uint8_t why;                   /* goro_stall_why_t */
    int nips;
    uintptr_t ips[GORO_STALL_FRAMES];
};
/* What sysmon follows of a P's stall (sysmon only). */
struct goro_stall_track {
    uint8_t phase;                 /* none, watching, asked, reported, ignored */
    uint32_t tick, req;            /* the stalled slice's schedtick; the sample asked */
    _Atomic int64_t since;         /* the slice's start (read by the worker too) */
    int64_t asked_at;
    struct goro_m *m;
    /* A counted stall whose end is not yet in the histogram: which slice
     * (GORO_STALL_OPEN_P | tick, or GORO_STALL_OPEN_M for a thread that
     * lost its P), else 0. Whoever clears it (compare-and-swap) puts the
     * length in: the stalled coroutine as it leaves (goro__stall_leave),
     * or sysmon when it sees the slice over. */
    _Atomic uint64_t open;
};
#define GORO_STALL_OPEN_P (1ull << 32)
#define GORO_STALL_OPEN_M (2ull << 32)

/* A processor: the right to run coroutines, with its local run queue.
 * Owned by one worker thread at a time (see runtime/sched/sched.c).
 * Who writes what: "owner" is the M that holds the P (p->owner == m, and
 * m inside the runtime or on its g0); "start" is goro__sched_start, before
 * any worker runs; sysmon writes only its sm_ fields and the atomics it
 * names. Readers of another P's fields use the atomics. */
struct goro_p {
    int id;                        /* start */
    _Atomic uint32_t runq_head;    /* consumers CAS it (owner pops, thieves steal) */
    _Atomic uint32_t runq_tail;    /* only the owner stores it */
    _Atomic(struct goro *) runq[GORO_RUNQ_SIZE];   /* owner stores, thieves read */
    _Atomic(struct goro *) runnext;   /* owner stores; owner and thieves exchange */
    _Atomic uint32_t schedtick;    /* owner: bumped each time a new slice starts */
    uint32_t runnext_streak;       /* inherited turns in a row (owner only) */
    _Atomic uint64_t spawned;      /* coroutines spawned here (owner writes) */
    _Atomic uint64_t exited;       /* coroutines ended here (owner writes) */
    _Atomic int running;           /* owner: a worker is executing on it */
    struct goro_m *m;              /* its worker (changes under goro__sched.lock) */
    _Atomic(struct goro_m *) owner;  /* m, or GORO_P_RETAKING while sysmon takes it */
    struct goro_p *idle_next;      /* sched.pidle list, under sched.lock */
    bool idle;                     /* on the idle list, under sched.lock */
    uint32_t rand;                 /* steal-order random state (owner) */
    uint64_t id_next, id_end;      /* block of coroutine ids handed to this P (owner) */
    struct goro *free_slabs;       /* stack cache (owner; stop drains it) */
    _Atomic int nfree;             /* its length (owner writes; tests read) */
    struct goro_timers timers;     /* deadlines, sleeps and tickers started here */
    struct goro_polled timed;      /* woken by its own timers, run before the ring (owner) */
    _Atomic int64_t timers_seen;   /* owner: when it last looked at its timers (sysmon reads) */
    struct event_base *base;       /* I/O of coroutines run here (start, stop) */
    struct event *break_ev;        /* activated to wake an M asleep in base (start, stop) */
    struct event *alarm_ev;        /* alarm_fd's event in base (start, stop) */
    int alarm_fd;                  /* timerfd: wakes a sleeping poll for `timers` */
    int64_t alarm_at;              /* when alarm_fd is set to go off (poll_lock holder) */
    _Atomic int poll_lock;         /* whoever holds it may loop base */
    _Atomic int poll_sleeper;      /* the holder sleeps in base (io/netpoll.c) */
    _Atomic(struct goro_m *) sleeping_m;  /* the M that last slept for it (that M;
                                             a timer's kick reads it: sched/idle.c) */
    uint32_t poll_tick;            /* schedtick at the last poll (owner) */
    _Atomic uint32_t npolls;       /* polls of base, by anyone (sysmon watches) */
    _Atomic uint32_t preempt_req;  /* sysmon: schedtick + 1 of a slice to cut short */
    _Atomic int want_global;       /* sysmon sets, owner clears: the global queue has waited */
    _Atomic int want_give;         /* sysmon sets, owner clears: an M with pinned coroutines
                                      has waited a slice for a P (sched.c, find_runnable) */
    uint32_t sm_tick, sm_npolls;   /* sysmon's last look (sysmon only) */
    int64_t sm_when, sm_since, sm_poll_when;   /* (sysmon only) */
    int64_t sm_retry;              /* next look at a stuck slice, after this (sysmon only) */
    uint32_t sm_declines;          /* preempt_declines when the slice began (sysmon only) */
    _Atomic uint32_t preempt_declines;  /* requests the signal handler could not honour */
    /* HIGH and LOW runnable coroutines (NORMAL ones use the ring): anyone
     * adds and takes. */
    struct goro_classq classq;
    uint32_t low_seen;             /* owner: goro__sched.low_rescan when last rescanned */
    _Atomic int8_t running_prio;   /* owner: the class of the slice it runs (sysmon reads) */
    uint32_t sm_class_tick;        /* sysmon: schedtick + 1 of a slice cut for a class */
    int64_t sm_class_when;         /* sysmon: when it asked */
    struct goro_stall_track sm_stall;
    /* The deadline class: when the reserved coroutine running here spends
     * its budget (0: none runs; owner writes, sysmon reads), and when its
     * slice began (owner). */
    _Atomic int64_t dl_until;
    /* The deadline the reserved coroutine running here runs by (its key:
     * its own or a lent one; 0: none runs; owner writes, sysmon and
     * queuers read): an earlier one queued cuts the latest of these. */
    _Atomic int64_t dl_running;
    /* Its M has a reserved coroutine pinned (goro_m.dl_pinned) that may
     * run from this time on (0: none; owner writes, sysmon reads). */
    _Atomic int64_t dl_pinned_at;
};

/* A worker thread. Its fields are written by its own thread ("m") unless
 * said otherwise: a P is handed to a P-less M by whoever gives it up,
 * under goro__sched.lock, before `handed` wakes it. */
struct goro_m {
    int id;                        /* start, or the hand-off that makes it */
    pthread_t thread;              /* its creator */
    pid_t tid;                     /* m at start (release: sysmon reads it) */
    struct goro_p *p;              /* m, or the giver of a P (see above) */
    struct goro *curg;             /* the coroutine running here, or NULL (m) */
    struct goro g0;                /* the thread's own stack: schedules (m) */
    _Atomic uint32_t note;         /* sleep/wake futex word: m and its wakers */
    _Atomic uint32_t sleeps;       /* its sleeps (m counts, sysmon reads: active.c) */
    struct goro_p *_Atomic sleep_base;  /* whose base m sleeps in (m; wakers read
                                           it once the note reads SLEEPING) */
    int *errno_ptr;                /* this thread's errno (m, at start) */
    bool spinning;                 /* looking for work (counted in nmspinning; m) */
    /* What the context switched to does for the one that left (m). */
    enum goro_post post;
    struct goro *post_g;
    void (*post_unlock)(void *);
    bool (*post_commit)(void *, struct goro *);
    void *post_arg;
    uint32_t post_armed;           /* GORO_WAKE_ARMED[_FIRM][_LENDS] for POST_PARK */
    int8_t post_lent;              /* with a _LENDS state: the class the waiter lends */
    struct goro_timer *post_timer; /* deadline timer to start, or NULL */
    int64_t post_deadline;
    struct goro_polled slept;      /* what woke its sleeping poll (m) */
    /* Preempted here: resume here (FIFO), unless this thread stays outside
     * the runtime for UNPIN_SLICES after losing its P (then sysmon moves
     * them to the global queue). Under pin_lock; npinned for peeking. */
    goro_lock_t pin_lock;
    struct goro *pinned, *pinned_tail;
    _Atomic int npinned;
    _Atomic int64_t lost_p_at;     /* sysmon took its P away then (0: has one) */
    int64_t sm_stop_when;          /* sysmon: when it last signalled it for that */
    _Atomic int in_rt;             /* > 0 while in the runtime (may touch p; m) */
    _Atomic uint32_t handed;       /* futex: a P was handed to this P-less M */
    struct goro_m *next_free;      /* goro__sched.spares / .waitp link, under its lock */
    _Atomic int signal_pending;    /* a preemption SIGURG is on its way (sysmon, m) */
    int64_t signal_sent_at;        /* when (sysmon only) */
    void *altstack;                /* the signal stack (m, at start and end) */
    size_t altstack_size;
    struct goro_stall_sample stall;  /* answered by its SIGURG handler (m) */
    struct goro_stall_track sm_stall;  /* a stall it kept after a hand-off (sysmon) */
    /* Reserved coroutines preempted here (sched/deadline.c): pinned like
     * the others, but picked by deadline, and held while throttled. m
     * only: nothing else takes them; an M that lost its P moves them to
     * its plain pinned list when it waits for one (goro__dl_unpin_all). */
    struct goro *dl_pinned;
    /* Its backstop timer (sched/dl_timer.c): made by m at its first
     * reserved slice; the state is read by sysmon (acquire), armed by m. */
    timer_t dl_timer;
    _Atomic int8_t dl_timer_state;
    bool dl_timer_armed;
};

/* The scheduler's global state. */
struct goro_sched {
    goro_lock_t lock;              /* global queue, idle list */
    struct goro **gq;              /* global queue: a ring of gq_cap pointers */
    uint32_t gq_cap, gq_first;
    _Atomic int gq_size;
    /* Set (for good) before the first coroutine of a class other than
     * NORMAL, or the first loan: until then a pick skips the classes'
     * lists (sched.c, invariant 9). Beside gq_size, which a pick reads. */
    _Atomic bool classes_used;
    /* Set (for good) before the first reservation of the deadline class
     * (sched/deadline.c); classes_used is set before it. */
    _Atomic bool dl_used;
    /* An execution trace runs (debug/trace.c): in the line a pick reads. */
    _Atomic bool tracing;
    /* The deterministic testing mode (sched.c, "the virtual clock"): one
     * P, whose owner alone uses seed; real_waits counts coroutines waiting
     * on descriptors or offloaded calls meanwhile. */
    _Atomic bool virtual_clock;
    uint32_t seed;
    _Atomic int real_waits;
    struct goro_p *pidle;
    _Atomic int npidle;
    _Atomic int nmspinning;
    int nprocs;
    /* Ps that may be busy at once, 1..nprocs (sched/active.c; sysmon
     * writes it, producers and idle Ms read it: invariant 11). */
    _Atomic int active;
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
    _Atomic uint64_t outside_moves;  /* threads outside the runtime began or ended a wait */
    _Atomic int closing;           /* goro_shutdown: spawns from outside refused */
    _Atomic int ext_spawning;      /* spawns under way on threads without a P */
    _Atomic uint32_t live_futex;   /* bumped by exits while draining */
    _Atomic uint64_t id_next;
    size_t stack_size;             /* default reserve */
    int64_t slice_ns;              /* preemption slice; < 0: never */
    /* The global HIGH and LOW queues (queued from threads without a P).
     * A line of their own: every pick reads the counts once classes are
     * used. */
    _Alignas(64) struct goro_classq classq;
    /* Bumped when a LOW coroutine is lent a class: queued LOW coroutines
     * are looked at again (sched.c, goro__pick_local). */
    _Atomic uint32_t low_rescan;
    bool prio_inherit;             /* GORO_PRIORITY_INHERIT=0 turns lending off */
};

extern GORO_HIDDEN struct goro_sched goro__sched;

/* A class other than NORMAL has been used (set once, never cleared): until
 * then every coroutine is NORMAL and the class lists and loans are not
 * looked at (sched.c, invariant 9). */
static inline bool goro__classes_in_use(void)
{
    return GORO_CLASSES && atomic_load_explicit(&goro__sched.classes_used, memory_order_relaxed);
}

#include "base/env.h"

#endif
