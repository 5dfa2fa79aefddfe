/*
 * Stall reports: a coroutine that keeps its worker for the threshold
 * (GORO_STALL=<ms>, goro_stall_watch) without a switch is reported once,
 * with why preemption did not end it and where it was.
 *
 * sysmon calls goro__stall_check for every P on each round:
 *   1. A busy P whose slice (schedtick) has lasted the threshold is a
 *      stall. If its thread is blocked in the kernel it is reported at
 *      once, naming the system call: a signal would make that call fail
 *      with EINTR. Else sysmon asks the thread for a sample (m->stall.req,
 *      then a tagged SIGURG, preempt.c) and looks for the answer on its
 *      next rounds.
 *   2. The handler, on the worker, walks the interrupted stack (code
 *      addresses only: naming them opens object files, which sysmon does),
 *      says why it would not preempt there, and stores done = req.
 *   3. sysmon names the frames and reports: to the callback, or to stderr
 *      at most once a second - those left out are summed up, naming the
 *      last, once the second is over. No answer within ANSWER_WAIT (a
 *      handler the program put before ours, a blocked signal) is reported
 *      as such; a stall that ends first is reported with the sample if it
 *      came, else as over before it could be sampled.
 *   4. The stall ends when its coroutine leaves the slice: the coroutine
 *      itself puts the length into the histogram on its way out
 *      (goro__stall_leave, from switch_to), before anything it wakes - its
 *      joiner - runs; sysmon does it instead when it sees the slice over
 *      first (the P went idle, a thread that lost its P came back).
 * Invariants:
 *   - a stall is counted (n_stalls) the moment sysmon sees it reach the
 *     threshold, before any report, and its track's `open` set; the one
 *     who clears `open` (compare-and-swap: the coroutine leaving, or
 *     sysmon) adds its length to the histogram, so every counted stall
 *     ends in the histogram exactly once and ended <= stalls at any read;
 *   - only sysmon writes a track's other fields, and its `since` before
 *     `open` (release), so the coroutine that clears `open` reads the
 *     right start;
 *   - sysmon reads a sample only once done == req (acquire), and the
 *     handler writes one only while done != req, so the two never touch
 *     it at once - a late answer to a request sysmon gave up on is an
 *     answer to the next one, which is as good a sample.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "internal.h"
#include "sched/sched.h"
#include "base/env.h"
#include "debug/debug.h"

#define ANSWER_WAIT (200 * GORO_MSEC)
#define STDERR_EVERY GORO_SEC

enum { PHASE_NONE, PHASE_WATCHING, PHASE_ASKED, PHASE_REPORTED, PHASE_IGNORED };

static _Atomic int64_t threshold;
static struct goro_watch watch = GORO_WATCH_INIT;

/* Statistics (sysmon writes, anyone reads). */
static _Atomic uint64_t n_stalls, n_reported, n_suppressed;
static _Atomic int64_t longest;
static _Atomic uint64_t buckets[GORO_STALL_BUCKETS];
static int64_t last_stderr = INT64_MIN;    /* sysmon only */
static uint64_t left_out;                  /* since the last stderr report (sysmon) */
static char left_last[512];                /* the last one left out: its first line */

int goro_stall_watch(int64_t threshold_ns, goro_stall_fn fn, void *arg)
{
    if (threshold_ns < 0 || (threshold_ns > 0 && threshold_ns < GORO_MSEC))
        return -EINVAL;
    /* Waits for a call of the old fn under way (watch.c). */
    goro__watch_set(&watch, (void (*)(void))fn, arg);
    atomic_store(&threshold, threshold_ns);
    return 0;
}

void goro__stall_start(void)
{
    long ms;
    if (goro__env_long("GORO_STALL", 1, 3600 * 1000L, " ms", &ms))
        goro_stall_watch(ms * GORO_MSEC, NULL, NULL);
}

int goro_stall_stats(goro_stall_stats_t *st)
{
    if (!st)
        return -EINVAL;
    memset(st, 0, sizeof *st);
    st->threshold_ns = atomic_load(&threshold);
    /* the ends first: a stall is counted before it can end (invariants) */
    for (int i = 0; i < GORO_STALL_BUCKETS; i++)
        st->buckets[i] = atomic_load(&buckets[i]);
    st->longest_ns = atomic_load(&longest);
    st->stalls = atomic_load(&n_stalls);
    st->reported = atomic_load(&n_reported);
    st->suppressed = atomic_load(&n_suppressed);
    return 0;
}

static int bucket_of(int64_t ns)
{
    int64_t ms = ns / GORO_MSEC;
    int i = 0;
    while (ms >= 2 && i < GORO_STALL_BUCKETS - 1) {
        ms >>= 1;
        i++;
    }
    return i;
}

/* From sysmon or from the coroutine that stalled (invariants above). */
static void stall_ended(int64_t ns)
{
    if (ns < 0)
        ns = 0;
    int64_t was = atomic_load_explicit(&longest, memory_order_relaxed);
    while (ns > was && !atomic_compare_exchange_weak_explicit(&longest, &was, ns,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed))
        ;
    atomic_fetch_add(&buckets[bucket_of(ns)], 1);
}

/* tr's stall, open as o, ends now - if no one ended it first. */
static void stall_settle(struct goro_stall_track *tr, uint64_t o, int64_t now)
{
    int64_t since = atomic_load_explicit(&tr->since, memory_order_relaxed);
    if (o && atomic_compare_exchange_strong_explicit(&tr->open, &o, 0, memory_order_acq_rel,
                                                     memory_order_relaxed))
        stall_ended(now - since);
}

/* sysmon: tr (on slice tick, or on a thread: tick unused) reached the
 * threshold: a stall from now on, whether or not it is ever reported. */
static void stall_count(struct goro_stall_track *tr, bool on_thread)
{
    atomic_fetch_add(&n_stalls, 1);
    GORO_ASSERT(atomic_load_explicit(&tr->open, memory_order_relaxed) == 0);
    atomic_store_explicit(&tr->open, on_thread ? GORO_STALL_OPEN_M : GORO_STALL_OPEN_P | tr->tick,
                          memory_order_release);
}

/* The worker m, in switch_to: its coroutine leaves the slice. A stall
 * counted on its P for this very slice, or on m after a hand-off, is over. */
void goro__stall_leave(struct goro_m *m)
{
    int64_t now = goro__now();
    struct goro_p *p = m->p;
    if (p) {
        uint64_t o = atomic_load_explicit(&p->sm_stall.open, memory_order_acquire);
        if (o == (GORO_STALL_OPEN_P | atomic_load_explicit(&p->schedtick, memory_order_relaxed)))
            stall_settle(&p->sm_stall, o, now);
    }
    uint64_t o = atomic_load_explicit(&m->sm_stall.open, memory_order_acquire);
    if (o)
        stall_settle(&m->sm_stall, o, now);
}

/* ---- on the worker: the SIGURG handler's half ---- */

bool goro__stall_asked(struct goro_m *m)
{
    return atomic_load_explicit(&m->stall.req, memory_order_relaxed) !=
           atomic_load_explicit(&m->stall.done, memory_order_relaxed);
}

/* Before anything changes uc (a preemption redirects it). */
void goro__stall_sample(struct goro_m *m, struct goro *g, void *uc)
{
    struct goro_stall_sample *s = &m->stall;
    s->id = g ? g->id : 0;
    if (g)
        memcpy(s->name, g->name, sizeof s->name);
    s->nips = g ? goro__backtrace_ips(uc, s->ips, GORO_STALL_FRAMES) : 0;
}

void goro__stall_answer(struct goro_m *m, int why)
{
    m->stall.why = (uint8_t)why;
    atomic_store_explicit(&m->stall.done, atomic_load_explicit(&m->stall.req, memory_order_relaxed),
                          memory_order_release);
}

/* ---- on sysmon: noticing, reporting, ending ---- */

/* The object's file name (no directory) for a code address. */
static const char *object_of(uintptr_t pc)
{
    Dl_info info;
    if (!pc || !dladdr((void *)pc, &info) || !info.dli_fname || !info.dli_fname[0])
        return "the program";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

/* The system call m's thread is blocked in, by name where known. */
static void blocked_call(struct goro_m *m, char *buf, size_t len)
{
    char line[128];
    long nr = -1;
    if (goro__m_task_file(m, "syscall", line, sizeof line) < 0 || sscanf(line, "%ld", &nr) != 1)
        nr = -1;
    static const struct { long nr; const char *name; } names[] = {
        { SYS_read, "read" }, { SYS_write, "write" }, { SYS_futex, "futex" },
        { SYS_nanosleep, "nanosleep" }, { SYS_clock_nanosleep, "clock_nanosleep" },
        { SYS_ppoll, "ppoll" }, { SYS_pselect6, "pselect6" }, { SYS_epoll_pwait, "epoll_pwait" },
        { SYS_accept, "accept" }, { SYS_accept4, "accept4" }, { SYS_connect, "connect" },
        { SYS_recvfrom, "recvfrom" }, { SYS_sendto, "sendto" }, { SYS_recvmsg, "recvmsg" },
        { SYS_sendmsg, "sendmsg" }, { SYS_openat, "openat" }, { SYS_fsync, "fsync" },
        { SYS_fdatasync, "fdatasync" }, { SYS_flock, "flock" }, { SYS_fcntl, "fcntl" },
        { SYS_wait4, "wait4" }, { SYS_waitid, "waitid" }, { SYS_readv, "readv" },
        { SYS_writev, "writev" }, { SYS_pread64, "pread64" }, { SYS_pwrite64, "pwrite64" },
        { SYS_rt_sigtimedwait, "rt_sigtimedwait" }, { SYS_msync, "msync" },
#ifdef SYS_poll
        { SYS_poll, "poll" },
#endif
#ifdef SYS_select
        { SYS_select, "select" },
#endif
#ifdef SYS_epoll_wait
        { SYS_epoll_wait, "epoll_wait" },
#endif
#ifdef SYS_pause
        { SYS_pause, "pause" },
#endif
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].nr == nr) {
            snprintf(buf, len, "blocked in the kernel (system call %s)", names[i].name);
            return;
        }
    if (nr >= 0)
        snprintf(buf, len, "blocked in the kernel (system call %ld)", nr);
    else
        snprintf(buf, len, "blocked in the kernel");
}

static void why_text(int why, uintptr_t pc, char *buf, size_t len)
{
    switch (why) {
    case GORO_STALL_PREEMPTIBLE:
        if (goro__sched.slice_ns < 0)
            snprintf(buf, len, "never preempted (GORO_SLICE=off)");
        else
            snprintf(buf, len, "preemptible where it was sampled (not yet asked, or just "
                     "back from code that is not)");
        break;
    case GORO_STALL_FOREIGN: {
        const char *unsafe = goro__preempt_unsafe_exec(pc);
        snprintf(buf, len, "in code not marked preemptible (%s%s%s)", object_of(pc),
                 unsafe ? ": " : "", unsafe ? unsafe : "");
        break;
    }
    case GORO_STALL_NOPREEMPT:
        snprintf(buf, len, "in a no-preempt section (goro_preempt_disable)");
        break;
    case GORO_STALL_RUNTIME:
        snprintf(buf, len, "inside goro's own code");
        break;
    case GORO_STALL_ASYNC_OFF:
        snprintf(buf, len, "asynchronous preemption is off");
        break;
    default:
        snprintf(buf, len, "its worker did not answer the sampling signal");
        break;
    }
}

/* The stalls left out of stderr, summed up with the last one's first
 * line: when the second is over (sysmon, each round), or at stop. */
static void left_out_say(int64_t now, bool now_or_never)
{
    if (!left_out || (!now_or_never && now - last_stderr < STDERR_EVERY))
        return;
    struct goro_out o = { .file = NULL, .fd = 2 };
    goro__outf(&o, "goro: %llu more stall%s, left out of stderr (one report a second; "
               "goro_stall_stats counts them all); the last:\n%s",
               (unsigned long long)left_out, left_out == 1 ? "" : "s", left_last);
    left_out = 0;
    last_stderr = now;
}

/* sysmon stopped (shutdown): what it left out is said now. */
void goro__stall_flush(void)
{
    left_out_say(0, true);
}

/* One report: to the callback, or to stderr once a second at most. */
static void report(const goro_stall_t *st, int64_t now)
{
    void *arg;
    goro_stall_fn fn = (goro_stall_fn)goro__watch_begin(&watch, &arg);
    if (fn) {
        atomic_fetch_add_explicit(&n_reported, 1, memory_order_relaxed);
        fn(st, arg);
        goro__watch_done(&watch);
        return;
    }
    if (last_stderr != INT64_MIN && now - last_stderr < STDERR_EVERY) {
        left_out++;
        const char *nl = strchr(st->text, '\n');
        size_t len = nl ? (size_t)(nl - st->text) + 1 : strlen(st->text);
        if (len > sizeof left_last - 1)
            len = sizeof left_last - 1;
        memcpy(left_last, st->text, len);
        left_last[len] = 0;
        atomic_fetch_add_explicit(&n_suppressed, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&n_reported, 1, memory_order_relaxed);
    last_stderr = now;
    goro__write_all(2, st->text, strlen(st->text));
}

/* worker: the P's id, or -1 for a thread whose P went on without it.
 * blocked: the reason in words, when there is no sample to say it. */
static void report_stall(struct goro_stall_track *tr, int worker,
                         const struct goro_stall_sample *s, int why, const char *blocked,
                         int64_t now)
{
    static char text[8192];            /* sysmon only */
    const void *frames[GORO_STALL_FRAMES];
    static char reason[NAME_MAX + 320];  /* sysmon only; why_text's longest, with a file name */
    int nips = why == GORO_STALL_UNANSWERED || blocked ? 0 : s->nips;
    uintptr_t pc = nips ? s->ips[0] : 0;
    if (blocked)
        snprintf(reason, sizeof reason, "%s", blocked);
    else
        why_text(why, pc, reason, sizeof reason);
    int64_t ns = now - tr->since;
    /* Written as the other reports are (goro_out), into text: a report
     * longer than that is cut short. */
    text[0] = 0;
    struct goro_out o = { .file = fmemopen(text, sizeof text, "w"), .fd = -1 };
    if (o.file) {
        goro__outf(&o, "goro: coroutine %llu", (unsigned long long)s->id);
        if (s->name[0])
            goro__outf(&o, " (%.*s)", (int)sizeof s->name, s->name);
        if (worker >= 0)
            goro__outf(&o, " has held worker %d", worker);
        else
            goro__outf(&o, " has held its thread (its worker went on without it)");
        goro__outf(&o, " for %lld ms without a switch: %s\n", (long long)(ns / GORO_MSEC),
                   reason);
    }
    for (int i = 0; i < nips; i++) {
        char name[160];
        /* frame 0 stopped at its pc; the others hold return addresses */
        goro__symbolize((void *)(s->ips[i] - (i ? 1 : 0)), name, sizeof name);
        if (o.file)
            goro__outf(&o, "  #%-5d 0x%012lx %s\n", i, (unsigned long)s->ips[i], name);
        frames[i] = (const void *)s->ips[i];
    }
    if (o.file && !nips && !blocked && why != GORO_STALL_UNANSWERED)
        goro__outf(&o, "  (no backtrace: libunwind found no frames)\n");
    if (o.file)
        fclose(o.file);
    goro_stall_t st = {
        .id = s->id, .name = s->name, .worker = worker, .ns = ns,
        .why = (goro_stall_why_t)why, .reason = reason,
        .nframes = nips, .frames = frames, .text = text,
    };
    report(&st, now);
}

/* tr has lasted the threshold on m: report it now if m's thread is
 * blocked in the kernel, else ask m for a sample. */
static void stall_begin(struct goro_stall_track *tr, int worker, int64_t now)
{
    struct goro_m *m = tr->m;
    char st = goro__m_thread_state(m);
    if (st == 'S' || st == 'D') {
        /* Who is blocked: its M says, as the handler would have. */
        struct goro_stall_sample s = { .id = 0 };
        struct goro *g = NULL;
        /* m may return from its call, and g end, meanwhile: copied with
         * care (the handler's sample needs none: it runs on m) */
        if (!goro__copy_guarded(&g, &m->curg, sizeof g) || !g || g == &m->g0 || !goro__copy_guarded(&s.id, &g->id, sizeof s.id) ||
            !goro__copy_guarded(s.name, g->name, sizeof s.name)) {
            tr->phase = PHASE_IGNORED;
            return;
        }
        char what[96];
        blocked_call(m, what, sizeof what);
        tr->phase = PHASE_REPORTED;
        stall_count(tr, worker < 0);
        report_stall(tr, worker, &s, GORO_STALL_BLOCKED, what, now);
        return;
    }
    if (tr->phase == PHASE_WATCHING)
        stall_count(tr, worker < 0);
    tr->req = atomic_load_explicit(&m->stall.req, memory_order_relaxed) + 1;
    atomic_store_explicit(&m->stall.req, tr->req, memory_order_relaxed);
    tr->asked_at = now;
    tr->phase = PHASE_ASKED;
    goro__m_ask_sample(m);
}

/* over: the stall ended before the answer came (then it is reported
 * without waiting for one). */
static void stall_answered(struct goro_stall_track *tr, int worker, int64_t now, bool over)
{
    struct goro_stall_sample *s = &tr->m->stall;
    bool answered = atomic_load_explicit(&s->done, memory_order_acquire) == tr->req;
    if (!answered && !over && now - tr->asked_at < ANSWER_WAIT)
        return;
    if (answered && s->id == 0) {
        /* Answered on the worker's g0. Still open: the slice was the
         * runtime's own, not a coroutine's - not a stall after all. Closed
         * already: its coroutine left the slice (goro__stall_leave counted
         * its end) before the signal came, and g0 took it - a stall over
         * before its worker answered, which is reported like one. */
        uint64_t o = atomic_load_explicit(&tr->open, memory_order_relaxed);
        if (o && atomic_compare_exchange_strong(&tr->open, &o, 0)) {
            tr->phase = PHASE_IGNORED;
            atomic_fetch_sub(&n_stalls, 1);
            return;
        }
        answered = false;
        over = true;
    }
    tr->phase = PHASE_REPORTED;
    if (answered) {
        report_stall(tr, worker, s, s->why, NULL, now);
    } else {
        struct goro_stall_sample none = { .id = 0 };
        report_stall(tr, worker, &none, GORO_STALL_UNANSWERED,
                     over ? "over before its worker answered the sampling signal" : NULL, now);
    }
}

/* The slice is over: a stall still waiting for its sample is reported
 * now, and one no coroutine ended goes into the histogram. */
static void stall_end(struct goro_stall_track *tr, int worker, int64_t now)
{
    if (tr->phase == PHASE_ASKED)
        stall_answered(tr, worker, now, true);
    stall_settle(tr, atomic_load_explicit(&tr->open, memory_order_acquire), now);
    tr->phase = PHASE_NONE;
}

/* The next step of a track that is on: ask, look for the answer. */
static void stall_step(struct goro_stall_track *tr, int worker, int64_t now, int64_t limit)
{
    if (tr->phase == PHASE_ASKED)
        stall_answered(tr, worker, now, false);
    else if (tr->phase == PHASE_WATCHING && limit > 0 && now - tr->since >= limit)
        stall_begin(tr, worker, now);
}

static _Atomic int handed_tracks;      /* Ms with a track on (sysmon only writes) */

void goro__stall_check(struct goro_p *p, int64_t now)
{
    struct goro_stall_track *tr = &p->sm_stall;
    /* over: a new slice, or none (an idle P starts none until it wakes) */
    if (tr->phase != PHASE_NONE && (tr->tick != p->sm_tick ||
                                    !atomic_load_explicit(&p->running, memory_order_relaxed)))
        stall_end(tr, p->id, now);
    int64_t limit = atomic_load_explicit(&threshold, memory_order_relaxed);
    if (tr->phase == PHASE_NONE) {
        struct goro_m *m = atomic_load_explicit(&p->owner, memory_order_acquire);
        if (limit <= 0 || now - p->sm_since < limit ||
            !atomic_load_explicit(&p->running, memory_order_relaxed) || !m ||
            m == GORO_P_RETAKING)
            return;
        tr->tick = p->sm_tick;
        tr->since = p->sm_since;
        tr->m = m;
        tr->phase = PHASE_WATCHING;
    }
    stall_step(tr, p->id, now, limit);
}

/* sysmon gave p away from m, whose coroutine goes on where it is: the
 * stall, begun or not, is now m's to follow (until m comes back). */
void goro__stall_handoff(struct goro_p *p, struct goro_m *m)
{
    struct goro_stall_track *tr = &p->sm_stall, *to = &m->sm_stall;
    to->phase = tr->phase;
    to->tick = tr->tick;
    to->req = tr->req;
    to->asked_at = tr->asked_at;
    to->m = tr->m;
    atomic_store(&to->since, atomic_load(&tr->since));
    if (to->phase == PHASE_NONE) {
        atomic_store(&to->since, p->sm_since);
        to->m = m;
        to->phase = PHASE_WATCHING;
    }
    /* An open stall moves with its coroutine - unless it ended meanwhile. */
    uint64_t o = atomic_load_explicit(&tr->open, memory_order_acquire);
    if (o && atomic_compare_exchange_strong(&tr->open, &o, 0))
        atomic_store_explicit(&to->open, GORO_STALL_OPEN_M, memory_order_release);
    tr->phase = PHASE_NONE;
    atomic_store_explicit(&handed_tracks, 1, memory_order_relaxed);
}

/* Threads that lost their P while in a coroutine: the stall ends when
 * the thread is back in the runtime (on its g0) or has a P again. */
void goro__stall_check_threads(int64_t now)
{
    left_out_say(now, false);
    if (!atomic_load_explicit(&handed_tracks, memory_order_relaxed))
        return;
    int64_t limit = atomic_load_explicit(&threshold, memory_order_relaxed);
    int nms = atomic_load(&goro__sched.nms), on = 0;
    for (int i = 0; i < nms; i++) {
        struct goro_m *m = &goro__sched.ms[i];
        struct goro_stall_track *tr = &m->sm_stall;
        if (tr->phase == PHASE_NONE)
            continue;
        if (!atomic_load_explicit(&m->lost_p_at, memory_order_relaxed) ||
            atomic_load_explicit(&m->in_rt, memory_order_acquire) != 0) {
            stall_end(tr, -1, now);
            continue;
        }
        stall_step(tr, -1, now, limit);
        on++;
    }
    if (!on)
        atomic_store_explicit(&handed_tracks, 0, memory_order_relaxed);
}

/* sysmon, before it sleeps until a P is busy: a stall it follows must
 * first be seen to end. */
bool goro__stall_pending(void)
{
    if (left_out || atomic_load_explicit(&handed_tracks, memory_order_relaxed))
        return true;
    for (int i = 0; i < goro__sched.nprocs; i++)
        if (goro__sched.procs[i].sm_stall.phase != PHASE_NONE)
            return true;
    return false;
}

/* goro_dump's line. */
void goro__stall_dump(struct goro_out *o)
{
    goro_stall_stats_t st;
    goro_stall_stats(&st);
    if (!st.threshold_ns && !st.stalls) {
        goro__outf(o, "goro: stall reports off (GORO_STALL=<ms> turns them on)\n");
        return;
    }
    char line[512];
    size_t len = 0;
    uint64_t ended = 0;
    for (int i = 0; i < GORO_STALL_BUCKETS; i++)
        ended += st.buckets[i];
    len += (size_t)snprintf(line, sizeof line, "goro: stalls: %llu seen",
                            (unsigned long long)st.stalls);
    if (st.stalls > ended)
        len += (size_t)snprintf(line + len, sizeof line - len, " (%llu not over yet)",
                                (unsigned long long)(st.stalls - ended));
    if (ended)
        len += (size_t)snprintf(line + len, sizeof line - len, ", longest %lld ms",
                                (long long)(st.longest_ns / GORO_MSEC));
    if (st.threshold_ns)
        len += (size_t)snprintf(line + len, sizeof line - len, " (reported from %lld ms)",
                                (long long)(st.threshold_ns / GORO_MSEC));
    const char *sep = "; by length:";
    for (int i = 0; i < GORO_STALL_BUCKETS && len < sizeof line - 64; i++) {
        if (!st.buckets[i])
            continue;
        long lo = i ? 1L << i : 0, hi = (1L << (i + 1)) - 1;
        if (i == GORO_STALL_BUCKETS - 1)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s %ld+ ms %llu", sep, lo,
                                    (unsigned long long)st.buckets[i]);
        else
            len += (size_t)snprintf(line + len, sizeof line - len, "%s %ld-%ld ms %llu", sep,
                                    lo, hi, (unsigned long long)st.buckets[i]);
        sep = ",";
    }
    goro__outf(o, "%s\n", line);
}
