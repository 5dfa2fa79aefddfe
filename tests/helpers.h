/* Shared helpers of the Check suite (tests/helpers.c).
 *
 * Rules every test file follows:
 *  - never call ck_assert*() from a coroutine or from a thread other than
 *    the test's own: in CK_FORK=no mode a failure longjmps to the runner, which
 *    must not happen on a worker's stack. Coroutines record problems with
 *    t_fail() (first message wins) and the test asserts t_failed() == NULL.
 *  - loop counts go through t_scale() (GORO_TEST_SLOW=1: qemu, valgrind).
 *  - a test that cannot run in this configuration calls t_skip() and returns.
 */
#ifndef GORO_TEST_HELPERS_H
#define GORO_TEST_HELPERS_H

#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/types.h>

#include "goro.h"

#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif

#define T_NOINLINE __attribute__((noinline))

/* ck_assert_msg() for loops: Check records every passing assertion (a
 * write to its pipe in fork mode), which is slow inside a hot loop. */
#define T_CHECK(cond, ...) do {                                             \
        if (!(cond))                                                        \
            ck_abort_msg(__VA_ARGS__);                                      \
    } while (0)

/* tests/arch/<arch>/regs.S: loads every callee-saved register (x86-64: rbx
 * rbp r12-r15; aarch64: x19-x28, x29, d8-d15) with a pattern derived from
 * seed, calls fn, returns a mask of the registers that changed (0: none). */
uint64_t goro_test_regs_across(void (*fn)(void), uint64_t seed);

/* The runner (check_main.c); lets tests ask whether Check forks. */
extern SRunner *t_runner;
bool t_forking(void);            /* each test runs in its own process */

bool t_slow(void);               /* GORO_TEST_SLOW set (qemu, valgrind) */
bool t_valgrind(void);           /* GORO_TEST_VALGRIND set */
bool t_sanitized(void);          /* built with ASan or TSan */
long t_scale(long n);            /* n, n/10 when slow, n/50 under valgrind; >= 1 */
/* A count of coroutines alive at once, or of stacks a test goes through:
 * t_scale(n), and a tenth of that under TSan, which gives each stack a
 * fiber whose megabytes of state it clears (7 ms a fiber where page
 * faults are dear: 2000 sleepers took 20 s) and keeps shadow memory for
 * every stack it has seen (3000 echo connections: over 5 GB). */
long t_live(long n);
double t_timeout(double seconds);/* a Check timeout scaled for slow runs */
void t_skip(const char *test, const char *why);
/* Whether the runtime preempts asynchronously (runtime/preempt.c decides
 * it): not under TSan or valgrind, nor with GORO_PREEMPT=0. */
bool t_async_preemption(void);

/* Checked fixture: make sure a runtime with >= 2 workers is running (the
 * first go() would start one implicitly; the tests want migration). The
 * teardown, in fork mode only, shuts it down and so checks that the test
 * left no coroutine behind. */
void t_setup_runtime(void);
void t_teardown_runtime(void);

/* A test case of suite s, added to it, with a timeout of t_timeout(seconds);
 * t_runtime_tcase() gives it the fixture above too. */
TCase *t_tcase(Suite *s, const char *name, double seconds);
TCase *t_runtime_tcase(Suite *s, const char *name, double seconds);

/* Runtimes of a test's own making. t_stop: stops the runtime if it runs
 * (asserting a clean stop). t_restart: t_stop, then starts one with cfg
 * (asserting that it started, with cfg->workers workers when that is set)
 * and clears the failure note. */
void t_stop(void);
void t_restart(const goro_config_t *cfg);

/* Failure notes from coroutines and foreign threads. */
void t_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *t_failed(void);      /* NULL when nothing failed */
void t_fail_reset(void);

/* Values the compiler cannot cache across a switch. */
int t_errno(void);               /* errno, read through a non-inlinable call */
void t_set_errno(int e);
long t_tid(void);                /* gettid(), through a system call */
/* The calling thread's thread pointer: which thread, without a system call
 * (a loop that must stay in its own code, to be preemptible, asks this).
 * An asm volatile, so the compiler reads it again at every call. */
static inline uintptr_t t_thread(void)
{
    uintptr_t tp;
#if defined(__x86_64__)
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
#elif defined(__aarch64__)
    __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
#else
#error "t_thread: unknown architecture"
#endif
    return tp;
}

/* Monotonic seconds. */
double t_now(void);
/* Nanoseconds (goro_now() differences) as milliseconds, for messages. */
double t_ms(int64_t ns);
/* How long a woken or cancelled wait may take to return: generous (0.25 s,
 * 0.5 s sanitized, scaled for slow runs), but far below the 1 s a
 * poll-based fallback, a missed wake-up or a timer would cost. */
double t_prompt(void);

/* Sleeps the calling thread (not a coroutine: the whole worker) for the
 * given seconds, resuming after signals. */
void t_nap(double seconds);
/* A nap long enough for other threads to reach their next parking point
 * (50 ms, scaled for slow runs). */
void t_settle(void);
/* xorshift32: a cheap, reproducible pseudo-random sequence per state. */
uint32_t t_rnd(uint32_t *state);
/* Raises *max to v if v is larger (from any thread). */
void t_max_update(atomic_long *max, long v);
/* The host's own stalls. A machine shared with others can stop a process,
 * or the CPU one of its threads is on, for 100 ms or more (seen in CI); a
 * timing limit cannot tell that from the runtime's lateness. So plain
 * threads, no runtime code, one bound to each CPU, sleep 1 ms over and
 * over between begin and end and keep their largest oversleep: what the
 * host alone cost. A timing check adds that to its limit (it can only
 * widen the limit by a stall that really happened). begin restarts a
 * watch already running; end returns the largest oversleep in ns (0 if
 * none ran). The watchers block every signal, so they never take one
 * meant for the process; under valgrind, which runs one thread at a time,
 * there are none. The fixture pair watches for a whole test
 * (tcase_add_checked_fixture). */
void t_host_watch_begin(void);
int64_t t_host_watch_end(void);
int64_t t_host_stalled(void);    /* the largest oversleep so far; the watch goes on */
void t_host_watch_fixture_begin(void);
void t_host_watch_fixture_end(void);

/* Sorts v[n] ascending (lateness samples, nanoseconds). */
void t_sort_i64(int64_t *v, size_t n);

/* A new channel (goro_chan_new); fails the test if it cannot be made. */
goro_chan_t *t_chan_new(size_t elem, size_t cap);

/* Spins (goro_yield inside a coroutine, sched_yield and at most 1 ms naps
 * outside) until *v >= target or the timeout expires; returns *v. */
long t_wait_at_least(atomic_long *v, long target, double timeout_s);
/* The same for an int flag becoming non-zero; returns the flag. */
int t_wait_flag(atomic_int *flag, double timeout_s);

/* Moving coroutines between workers. The scheduler keeps a yielding
 * coroutine on its worker; it moves only when woken by another worker. So
 * t_hop() (from a coroutine) asks the test's main thread for a "ticket"
 * coroutine and joins it; the main thread spawns tickets into the global
 * queue (t_serve_hops), whichever worker runs one wakes the hopper there.
 * t_serve_hops serves until *done >= target (or timeout) and returns *done;
 * t_hops_moved() counts hops that came back on another thread. Outside a
 * coroutine t_hop() returns at once. */
void t_hop(void);
long t_serve_hops(atomic_long *done, long target, double timeout_s);
void t_hops_reset(void);
long t_hops_moved(void);
long t_hops_total(void);

/* /proc/self/maps line count and resident set size in KiB. */
long t_maps_count(void);
long t_rss_kib(void);
long t_read_long_file(const char *path);

/* Whether the kernel refuses to read addr: a guard, or nothing mapped.
 * Guard regions (MADV_GUARD_INSTALL) do not show in /proc/self/maps, so
 * the tests find guards this way, whichever kind the runtime uses. */
bool t_unreadable(uintptr_t addr);
/* The line of goro_dump (runtime started) that says how stacks are
 * guarded, or ""; and whether that is in arenas with guard regions. */
const char *t_stack_space_line(void);
bool t_stacks_in_arenas(void);

/* Entries in /proc/self/fd (the descriptors this process has open). */
long t_fd_count(void);
/* The same, once it is want again or after half a second (scaled): a
 * runtime thread holds a descriptor for a moment now and then (the
 * monitor reads /proc/self/task/<tid>/stat for a thread that looks
 * stuck; valgrind makes that often), a leaked one stays. */
long t_fd_count_back_to(long want);

/* Loopback sockets for the I/O suites, made with plain (blocking) system
 * calls on the test's own thread; they fail the test when the system says
 * no. A descriptor handed to goro's I/O calls must later be closed with
 * goro_close(); one never handed to goro may be closed with close(). */
struct sockaddr_in t_loopback(uint16_t port);       /* 127.0.0.1:port */
int t_tcp_listener(int backlog, struct sockaddr_in *addr);  /* fd; addr: where */
void t_tcp_pair(int fd[2]);                         /* a connected TCP pair */
void t_set_linger0(int fd);                         /* close() sends a reset */
void t_set_bufs(int fd, int bytes);                 /* SO_SNDBUF and SO_RCVBUF */
/* A listener whose accept queue is full (backlog 0 and one connection
 * nobody accepts): the kernel drops further SYNs, so a connect to *addr
 * stays in progress (retried after 1 s, 3 s, ...) until given up. Close
 * *filler and the returned listener with close() afterwards. */
int t_stalled_listener(struct sockaddr_in *addr, int *filler);

/* Lines of text that start with prefix ("" for any) and contain every
 * one of the NULL-terminated words after it. */
int t_count_lines(const char *text, const char *prefix, ...);

/* Runs fn(arg) in a child process with stdout and stderr captured into out
 * (NUL-terminated, truncated to outlen - 1). The child exits with fn's
 * return value. Kills the child after timeout_s. Returns the wait status
 * (or -1 if the child could not be made or was killed on timeout). Shuts
 * the runtime down first if it runs in this process (a child of a threaded
 * process would have no workers). */
int t_run_child(int (*fn)(void *), void *arg, double timeout_s,
                char *out, size_t outlen);

/* ---- deterministic tests (tests/helpers_virtual.c) ----
 * t_virtual: runs body(arg) in a coroutine of a runtime of its own on the
 * virtual clock (docs/testing.md: one worker, no preemption, the clock
 * jumps to the next deadline when every coroutine waits, so a wait ends
 * exactly at its deadline and an order is the same every run), in a child
 * process, so it works with CK_FORK=no too. The body checks with t_fail()
 * (never ck_assert from the coroutine); the test fails with its message,
 * or when the child dies, hangs (t_timeout(60)), or leaves a coroutine
 * behind. What the body prints shows in the test's output. Shuts this
 * process's runtime down first (t_run_child). t_virtual_seeded picks the
 * seed (t_virtual: 1) and whether body runs on the child's main thread,
 * which the runtime does not own, instead (a fixture's ck_assert there
 * fails the test too). */
void t_virtual(void (*body)(void *), void *arg);
/* In such a body: t_fail with the message and leave the body (a failed
 * body's child exits without waiting for the coroutines it left). */
#define T_VCHECK(cond, ...) do {                                            \
        if (!(cond)) {                                                      \
            t_fail(__VA_ARGS__);                                            \
            return;                                                         \
        }                                                                   \
    } while (0)
void t_virtual_seeded(void (*body)(void *), void *arg, uint64_t seed, bool on_thread);

/* GORO_TEST_STALL_INJECT=1: a process of its own stops the test process
 * group (the runner and its test children) with SIGSTOP for 50-200 ms at
 * random every 100-600 ms, as a busy host does now and then: tests on the
 * virtual clock cannot tell; real-clock latency cases account for it
 * (t_host_stalled() sees the stops) or skip. check_main.c starts it. */
bool t_stall_injecting(void);
void t_stall_inject_start(void);
void t_stall_inject_stop(void);

/* ---- waits of every kind, blocked until the test ends them ----
 * The fixtures the per-kind deadline (test_time.c) and cancel
 * (test_cancel.c) loops share; the waits themselves stay in the suites (the
 * _until calls there, the plain ones here). A t_bw_*_setup() on the test
 * thread makes a wait block; the matching t_bw_after_*() checks that the
 * ended wait left no trace (nothing read, written, received, locked or
 * queued) and undoes the setup. */
struct t_bw {
    int s[2];                       /* a unix stream pair */
    int l, filler, c;               /* listener, connection filling it, client */
    struct sockaddr_in addr;
    long filled;                    /* bytes put in s[0] before the wait */
    size_t written;                 /* bytes a write reported despite failing */
    goro_chan_t *unb, *buf, *release;   /* unbuffered, capacity 1, join_setup's */
    goro_mutex_t mu;
    goro_rwlock_t rw;
    goro_cond_t cv;
    goro_sem_t sem;
    goro_waitgroup_t wg;
    goro_t *blocked;                /* join_setup's coroutine */
    goro_group_t *grp;              /* group_full_setup's: limit 1, one member */
    goro_flight_t *fl;              /* flight_setup's: key "k" in flight */
    goro_t *flight_caller;          /* its other caller */
};
extern struct t_bw t_bw;

void t_bw_group_full_setup(void);   /* grp: its one slot taken */
void t_bw_flight_setup(void);       /* fl: "k" computed until release closes */
long t_bw_flight_wait(int64_t deadline);   /* goro_flight_do_until(fl, "k") */
void t_bw_after_flight(void);       /* the computation went on for its other caller */
void t_bw_after_group(void);
void t_bw_pair_setup(void);         /* s: nothing to read */
void t_bw_pair_close(void);
void t_bw_after_read(void);         /* the next byte sent is the next read */
void t_bw_full_setup(void);         /* s[0] full: a write blocks */
void t_bw_after_write(void);        /* the peer holds filled + written bytes */
void t_bw_listen_setup(void);       /* l: a listener nobody connects to */
void t_bw_after_accept(void);       /* it still accepts */
void t_bw_stalled_setup(void);      /* c: a socket whose connect to addr hangs */
void t_bw_after_connect(void);
void t_bw_chans_setup(void);        /* unb and buf, both empty */
void t_bw_full_chans_setup(void);   /* buf holds 5 */
void t_bw_after_chans(void);        /* no stale waiter; buf holds what it held */
/* unb recv, buf send, unb send: a select that blocks on full_chans_setup */
void t_bw_select_cases(goro_case_t cs[3], long *in, long *out);
void t_bw_mutex_setup(void);        /* mu held by the test thread */
void t_bw_after_mutex(void);        /* released, it is free: not handed over */
void t_bw_wrheld_setup(void);       /* rw write-held by the test thread */
void t_bw_rdheld_setup(void);       /* rw read-held by the test thread */
void t_bw_after_rwlock(void);       /* released, it is free */
void t_bw_after_rdheld(void);       /* new readers are not held back; then as above */
void t_bw_cond_setup(void);         /* mu and cv; the wait takes mu itself */
void t_bw_after_cond(void);         /* cv not queued on, mu released */
void t_bw_sem_setup(void);          /* sem at 0 */
void t_bw_after_sem(void);          /* a release is not given to a ghost */
void t_bw_wg_setup(void);           /* wg at 1 */
void t_bw_after_wg(void);
void t_bw_join_setup(void);         /* blocked: parked until after_join */
void t_bw_after_join(void);         /* still joinable, with its result */

#endif
