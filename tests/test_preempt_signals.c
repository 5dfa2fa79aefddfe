/* Signals: the application's own handlers, installed before or after the
 * start, still get their signals; EINTR never leaks out of a goro call;
 * SIGURGs from elsewhere do not stop preemption.
 *
 * Part of the preempt suite (test_preempt.c registers it). Coroutines
 * never call ck_assert (see helpers.h). */
#include "test_preempt.h"

/* ---- the application's own signal handlers ---- */

#define APP_TAG 0x61707021      /* si_value of the application's own SIGURGs */

static struct {
    atomic_long usr1;           /* SIGUSR1 or SIGVTALRM seen */
    atomic_long urg_own;        /* SIGURG with APP_TAG seen */
    atomic_long urg_other;      /* other SIGURGs (the runtime's) seen */
    atomic_int chain;           /* pass those on to prev_urg */
    struct sigaction prev_urg;
    atomic_ulong worker;        /* pthread_t of the only worker */
    long resent;                /* SIGURGs sent again (merged with another) */
} as;

static void app_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    atomic_fetch_add(&as.usr1, 1);
}

/* The documented way to own SIGURG next to goro: SA_ONSTACK, and signals
 * that are not yours go to the handler you replaced. */
static void app_urg(int sig, siginfo_t *si, void *uc)
{
    if (si->si_code == SI_QUEUE && si->si_value.sival_int == APP_TAG) {
        atomic_fetch_add(&as.urg_own, 1);
        return;
    }
    atomic_fetch_add(&as.urg_other, 1);
    if (atomic_load(&as.chain) && (as.prev_urg.sa_flags & SA_SIGINFO) &&
        as.prev_urg.sa_sigaction)
        as.prev_urg.sa_sigaction(sig, si, uc);
}

static void note_worker(void)
{
    atomic_store(&as.worker, (unsigned long)pthread_self());
}

/* The thread of the only worker. */
static pthread_t the_worker(void)
{
    atomic_store(&as.worker, 0);
    goro_t *w = go(note_worker);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(goro_join(w, NULL), 0);
    return (pthread_t)atomic_load(&as.worker);
}

/* The ways this test sends a signal: to the process or to the worker. */
/* A signal sent to the worker itself is SIGVTALRM: the workers block
 * SIGUSR1, as every notifiable signal (docs/api.md, "Signals"), so that a
 * SIGUSR1 sent to the process reaches a thread of the program's. */
enum app_send { USR1_KILL, VTALRM_THREAD, URG_QUEUE, URG_THREAD, APP_SENDS };

static const char *const app_send_name[APP_SENDS] = {
    "SIGUSR1 from kill()", "SIGVTALRM from pthread_kill() to the worker",
    "SIGURG from sigqueue()", "SIGURG from pthread_sigqueue() to the worker",
};

static int send_one(enum app_send how, pthread_t worker)
{
    union sigval own = { .sival_int = APP_TAG };
    switch (how) {
    case USR1_KILL:
        return kill(getpid(), SIGUSR1) ? errno : 0;
    case VTALRM_THREAD:
        return pthread_kill(worker, SIGVTALRM);
    case URG_QUEUE:
        return sigqueue(getpid(), SIGURG, own) ? errno : 0;
    default:
        return pthread_sigqueue(worker, SIGURG, own);
    }
}

/* Sends one signal and waits until the application's handler counted it.
 * A SIGURG is sent again if it does not arrive within 0.1 s: like every
 * signal below SIGRTMIN it merges with one still pending - the runtime's,
 * if the worker has not taken that yet (say, while it waits for a CPU). */
static void send_and_wait(const char *phase, enum app_send how, pthread_t worker)
{
    bool urg = how >= URG_QUEUE;
    atomic_long *count = urg ? &as.urg_own : &as.usr1;
    long before = atomic_load(count), got = before;
    for (int attempt = 0; attempt < (urg ? 10 : 1) && got == before; attempt++) {
        int err = send_one(how, worker);
        ck_assert_msg(err == 0, "%s: sending %s: %s", phase, app_send_name[how],
                      strerror(err));
        as.resent += attempt > 0;
        got = t_wait_at_least(count, before + 1, t_timeout(urg ? 0.1 : 1));
    }
    ck_assert_msg(got > before, "%s: the application's handler never saw %s", phase,
                  app_send_name[how]);
}

/* Spinners and a ticker on the only worker while this thread sends every
 * kind of signal `rounds` times; each must reach the application's
 * handler, and the spinners must still be preempted. */
static void signal_phase(const char *phase, int rounds, bool runtime_urg_expected)
{
    enum { NS = 2 };
    begin(t_timeout(20));
    struct ticker tk;
    struct spinner sp[NS];
    goro_t *h[NS + 1];
    pthread_t worker = the_worker();
    go_ticker_and_spinners(&tk, sp, NS, h);
    t_nap(t_timeout(0.05));
    as.resent = 0;
    for (int i = 0; i < rounds; i++) {
        for (enum app_send k = 0; k < APP_SENDS; k++)
            send_and_wait(phase, k, worker);
        t_nap(0.01);
    }
    run_for(t_slow() ? 1.0 : 0.3, h, NS + 1);
    report("preempt: signals %s: SIGUSR1 %ld, own SIGURG %ld, the runtime's SIGURG %ld "
           "seen by the application (%ld own SIGURGs sent twice); ticker %ld ticks (max "
           "lateness %.2f ms), spinners switched %ld times\n", phase, atomic_load(&as.usr1),
           atomic_load(&as.urg_own), atomic_load(&as.urg_other), as.resent,
           atomic_load(&tk.ticks), t_ms(tk.max_late), total_switches(sp, NS));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(runtime_urg_expected || atomic_load(&as.urg_other) == 0, "%s: %ld of the "
                  "runtime's SIGURGs reached the application's handler: goro_start did not "
                  "put its own handler in front of it", phase, atomic_load(&as.urg_other));
    ck_assert_msg(as.resent <= 4 * rounds / 10 + 1, "%s: %ld of %d own SIGURGs had to be "
                  "sent again", phase, as.resent, 2 * rounds);
    check_taking_turns_mostly_in_place(sp, NS, phase);
    check_lateness(&tk, SLICE, phase);
}

static void app_handlers(struct sigaction *usr1, struct sigaction *urg)
{
    memset(usr1, 0, sizeof *usr1);
    memset(urg, 0, sizeof *urg);
    usr1->sa_sigaction = app_usr1;
    usr1->sa_flags = SA_SIGINFO | SA_RESTART;
    urg->sa_sigaction = app_urg;
    urg->sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
}

START_TEST(application_handlers_installed_after_start)
{
    if (!needs_async("application_handlers_installed_after_start"))
        return;
    int rounds = (int)t_scale(20);
    struct sigaction usr1, urg, old_usr1, old_vtalrm;
    app_handlers(&usr1, &urg);
    restart(1, SLICE);
    atomic_store(&as.chain, 1);
    ck_assert_int_eq(sigaction(SIGUSR1, &usr1, &old_usr1), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &usr1, &old_vtalrm), 0);
    ck_assert_int_eq(sigaction(SIGURG, &urg, &as.prev_urg), 0);
    signal_phase("installed after goro_start (SIGURG chained)", rounds, true);
    ck_assert_int_eq(sigaction(SIGURG, &as.prev_urg, NULL), 0);
    ck_assert_int_eq(sigaction(SIGUSR1, &old_usr1, NULL), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &old_vtalrm, NULL), 0);
    atomic_store(&as.chain, 0);
}
END_TEST

/* The runtime has run before in this process (so its handler was
 * installed once already); the application then installs its own
 * handlers and starts the runtime again. */
START_TEST(application_handlers_installed_before_start)
{
    if (!needs_async("application_handlers_installed_before_start"))
        return;
    int rounds = (int)t_scale(20);
    struct sigaction usr1, urg, old_usr1, old_urg, old_vtalrm;
    app_handlers(&usr1, &urg);
    restart(1, SLICE);
    ck_assert_int_eq(goro_shutdown(), 0);
    atomic_store(&as.chain, 0);
    ck_assert_int_eq(sigaction(SIGUSR1, &usr1, &old_usr1), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &usr1, &old_vtalrm), 0);
    ck_assert_int_eq(sigaction(SIGURG, &urg, &old_urg), 0);
    restart(1, SLICE);
    signal_phase("installed before goro_start", rounds, false);
    ck_assert_int_eq(goro_shutdown(), 0);
    ck_assert_int_eq(sigaction(SIGURG, &old_urg, NULL), 0);
    ck_assert_int_eq(sigaction(SIGUSR1, &old_usr1, NULL), 0);
    ck_assert_int_eq(sigaction(SIGVTALRM, &old_vtalrm, NULL), 0);
}
END_TEST

/* ---- EINTR never leaks out of a goro call ---- */

/* Coroutines doing I/O, sleeps, channel operations, locking, offloads and
 * joins next to preempted spinners (where preemption is asynchronous),
 * while a thread showers the workers and this thread with SIGURG (not the
 * runtime's: spurious to it) and SIGUSR1 (a handler without SA_RESTART, so
 * the kernel restarts nothing). */
static struct {
    atomic_int storm_stop;
    atomic_ulong targets[32];   /* pthread_t of threads to signal */
    atomic_int ntargets;
    atomic_long signals, usr1;
    atomic_long io, sleeps, chans, locks, offloads, joins, main_ops;
    int sv[2];
    goro_chan_t *ping, *pong, *never;
    goro_mutex_t mu;
    long guarded;
} ei;

static void ei_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&ei.usr1, 1);
}

static void ei_target_me(void)
{
    int i = atomic_fetch_add(&ei.ntargets, 1);
    if (i < 32)
        atomic_store(&ei.targets[i], (unsigned long)pthread_self());
    else
        atomic_fetch_sub(&ei.ntargets, 1);
}

/* False (and a note) if a goro call failed; -EINTR is named. */
static bool ei_ok(const char *what, long r)
{
    if (r >= 0)
        return true;
    if (r == -EINTR)
        t_fail("%s returned -EINTR", what);
    else
        t_fail("%s returned %ld", what, r);
    return false;
}

static bool ei_running(void)
{
    return !atomic_load_explicit(&pt.stop, memory_order_relaxed) && t_now() < pt.hard_end;
}

static void *ei_storm(void *arg)
{
    (void)arg;
    uint32_t r = 99;
    while (!atomic_load(&ei.storm_stop)) {
        int n = atomic_load(&ei.ntargets);
        int sig = t_rnd(&r) % 3 == 0 ? SIGUSR1 : SIGURG;
        if (n > 0 && t_rnd(&r) % 8 != 0)
            pthread_kill((pthread_t)atomic_load(&ei.targets[t_rnd(&r) % (uint32_t)n]), sig);
        else
            kill(getpid(), sig);
        atomic_fetch_add(&ei.signals, 1);
        /* 20-220 us apart (more where signals are slow to deliver), even
         * when the nap itself is interrupted */
        double gap = (double)(20 + t_rnd(&r) % 200) * 1e-6 * (double)slow_factor();
        double until = t_now() + gap;
        for (double now = t_now(); now < until; now = t_now())
            t_nap(until - now);
    }
    return NULL;
}

static uint8_t ei_byte(uint64_t i) { return (uint8_t)(i * 131 ^ i >> 9); }

static void ei_writer(void)
{
    ei_target_me();
    uint32_t r = 5;
    uint8_t buf[8192];
    uint64_t off = 0;
    while (ei_running()) {
        size_t len = 1 + t_rnd(&r) % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = ei_byte(off + i);
        ssize_t n = t_rnd(&r) % 2 ? goro_write(ei.sv[0], buf, len)
                                : goro_write_all(ei.sv[0], buf, len);
        if (!ei_ok("goro_write", n))
            break;
        off += (uint64_t)n;
    }
    ei_ok("goro_close", goro_close(ei.sv[0]));
}

static void ei_reader(void)
{
    ei_target_me();
    uint8_t buf[4096];
    uint64_t off = 0;
    for (;;) {
        ssize_t n = goro_read(ei.sv[1], buf, sizeof buf);
        if (n == 0 || !ei_ok("goro_read", n))
            break;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != ei_byte(off + (uint64_t)i)) {
                t_fail("socket stream corrupted at byte %lu", (unsigned long)(off + (uint64_t)i));
                goto out;
            }
        off += (uint64_t)n;
        atomic_fetch_add(&ei.io, 1);
    }
out:
    ei_ok("goro_close", goro_close(ei.sv[1]));
}

static void ei_sleeper(void)
{
    ei_target_me();
    uint32_t r = 7;
    while (ei_running()) {
        int64_t ns = (int64_t)(1 + t_rnd(&r) % 300) * GORO_USEC, t0 = goro_now();
        if (!ei_ok("goro_sleep", goro_sleep(ns)))
            break;
        if (goro_now() - t0 < ns) {
            t_fail("goro_sleep(%lld ns) returned early", (long long)ns);
            break;
        }
        atomic_fetch_add(&ei.sleeps, 1);
    }
}

static void ei_pinger(void)
{
    ei_target_me();
    for (long i = 0; ei_running(); i++) {
        long back = -1;
        if (!ei_ok("goro_chan_send", goro_chan_send(ei.ping, &i)) ||
            !ei_ok("goro_chan_recv", goro_chan_recv(ei.pong, &back)))
            break;
        if (back != i + 1) {
            t_fail("channel round trip %ld came back as %ld", i, back);
            break;
        }
        if (i % 16 == 0) {
            int e = goro_chan_recv_until(ei.never, NULL, goro_now() + 200 * GORO_USEC);
            if (e != -ETIMEDOUT) {
                t_fail("goro_chan_recv_until on an empty channel returned %d", e);
                break;
            }
        }
        atomic_fetch_add(&ei.chans, 1);
    }
    goro_chan_close(ei.ping);
}

static void ei_ponger(void)
{
    ei_target_me();
    long v;
    int e;
    while ((e = goro_chan_recv(ei.ping, &v)) == 1) {
        v++;
        if (!ei_ok("goro_chan_send", goro_chan_send(ei.pong, &v)))
            return;
    }
    ei_ok("goro_chan_recv", e);
}

static void ei_locker(long id)
{
    ei_target_me();
    while (ei_running()) {
        if (!ei_ok("goro_mutex_lock", goro_mutex_lock(&ei.mu)))
            break;
        ei.guarded++;
        if (id == 0)
            churn((uint64_t)ei.guarded);    /* held across preemptions */
        ei_ok("goro_mutex_unlock", goro_mutex_unlock(&ei.mu));
        atomic_fetch_add(&ei.locks, 1);
        goro_yield();
    }
}

static long ei_square(void *arg)
{
    long x = (long)(intptr_t)arg;
    return x * x;
}

static void ei_offloader(void)
{
    ei_target_me();
    for (long i = 1; ei_running(); i++) {
        long r = 0;
        if (!ei_ok("goro_offload", goro_offload(ei_square, (void *)(intptr_t)i, &r)))
            break;
        if (r != i * i) {
            t_fail("goro_offload: %ld squared is not %ld", i, r);
            break;
        }
        atomic_fetch_add(&ei.offloads, 1);
    }
}

static long ei_child(long x) { return x + 1; }

static void ei_joiner(void)
{
    ei_target_me();
    for (long i = 0; ei_running(); i++) {
        goro_t *c = go(ei_child, i);
        long r = -1;
        if (!c) {
            t_fail("go failed");
            break;
        }
        if (!ei_ok("goro_join", goro_join(c, &r)))
            break;
        atomic_fetch_add(&ei.joins, 1);
    }
}

/* This thread's part: waits of a thread the runtime does not own. Each
 * round must be quick: the spinners are preempted, whatever the signals. */
static void ei_main_thread(double run)
{
    double end = t_now() + run, worst = 0;
    for (long i = 0; t_now() < end; i++) {
        double t0 = t_now();
        goro_t *c = go(ei_child, i);
        ck_assert_ptr_nonnull(c);
        long r = -1;
        int e = goro_join(c, &r);
        ck_assert_msg(e == 0, "goro_join on the main thread returned %d", e);
        e = goro_sleep(100 * GORO_USEC);
        ck_assert_msg(e == 0, "goro_sleep on the main thread returned %d", e);
        atomic_fetch_add(&ei.main_ops, 1);
        worst = t_now() - t0 > worst ? t_now() - t0 : worst;
    }
    ck_assert_msg(worst < t_timeout(1), "a spawn, join and sleep on the main thread took "
                  "%.2f s amid the signals", worst);
}

START_TEST(eintr_never_leaks_out_of_goro_calls)
{
    double run = t_slow() ? 2.0 : 1.5;
    struct sigaction sa = { .sa_handler = ei_usr1 }, old;
    sigemptyset(&sa.sa_mask);           /* no SA_RESTART: nothing is restarted */
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, &old), 0);
    memset(&ei, 0, sizeof ei);
    restart_for(2, SLICE, 20);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ei.sv), 0);
    ck_assert_int_eq(goro_chan_new(&ei.ping, sizeof(long), 0), 0);
    ck_assert_int_eq(goro_chan_new(&ei.pong, sizeof(long), 0), 0);
    ck_assert_int_eq(goro_chan_new(&ei.never, 0, 0), 0);
    ck_assert_int_eq(goro_mutex_init(&ei.mu), 0);
    ei_target_me();                     /* this thread, in its waits */
    struct spinner sp[2] = { { .id = 1 }, { .id = 2 } };
    goro_t *h[13];
    int n = 0;
    /* without asynchronous preemption they would keep both workers */
    for (int i = 0; t_async_preemption() && i < 2; i++)
        ck_assert_ptr_nonnull(h[n++] = go(spinner, &sp[i]));
    ck_assert_ptr_nonnull(h[n++] = go(ei_reader));
    ck_assert_ptr_nonnull(h[n++] = go(ei_writer));
    ck_assert_ptr_nonnull(h[n++] = go(ei_sleeper));
    ck_assert_ptr_nonnull(h[n++] = go(ei_ponger));
    ck_assert_ptr_nonnull(h[n++] = go(ei_pinger));
    for (long i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(h[n++] = go(ei_locker, i));
    ck_assert_ptr_nonnull(h[n++] = go(ei_offloader));
    ck_assert_ptr_nonnull(h[n++] = go(ei_joiner));
    pthread_t storm;
    double t0 = t_now();
    ck_assert_int_eq(pthread_create(&storm, NULL, ei_storm, NULL), 0);
    ei_main_thread(run);
    atomic_store(&pt.stop, 1);
    atomic_store(&ei.storm_stop, 1);
    ck_assert_int_eq(pthread_join(storm, NULL), 0);
    run = t_now() - t0;
    join_all(h, n);
    report("preempt: %ld signals (%ld SIGUSR1 handled) during %.1f s of goro calls: %ld "
           "reads, %ld sleeps, %ld channel round trips, %ld locks, %ld offloads, %ld "
           "joins, %ld waits on the main thread\n", atomic_load(&ei.signals),
           atomic_load(&ei.usr1), run, atomic_load(&ei.io), atomic_load(&ei.sleeps),
           atomic_load(&ei.chans), atomic_load(&ei.locks), atomic_load(&ei.offloads),
           atomic_load(&ei.joins), atomic_load(&ei.main_ops));
    ck_assert_int_eq(sigaction(SIGUSR1, &old, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(ei.guarded, atomic_load(&ei.locks));
    ck_assert_int_eq(goro_mutex_destroy(&ei.mu), 0);
    ck_assert_int_eq(goro_chan_free(ei.ping), 0);
    ck_assert_int_eq(goro_chan_free(ei.pong), 0);
    ck_assert_int_eq(goro_chan_free(ei.never), 0);
    ck_assert_int_gt(atomic_load(&ei.signals), 100);
    ck_assert_int_gt(atomic_load(&ei.usr1), 0);
    atomic_long *counts[] = { &ei.io, &ei.sleeps, &ei.chans, &ei.locks, &ei.offloads,
                              &ei.joins, &ei.main_ops };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        ck_assert_msg(atomic_load(counts[i]) > 0, "operation kind %zu never completed", i);
}
END_TEST

/* ---- SIGURGs from elsewhere ---- */

/* Someone else's SIGURGs - the application's own, or out-of-band data on
 * a socket it owns - reach the worker while the runtime's requests do. A
 * standard signal that arrives while another is pending merges with it:
 * the runtime must not lose its requests for good when that happens. */
static struct {
    atomic_int stop;
    atomic_long sent;
    pthread_t worker;
} fu;

static void *foreign_urg(void *arg)
{
    (void)arg;
    while (!atomic_load(&fu.stop)) {
        pthread_kill(fu.worker, SIGURG);
        atomic_fetch_add(&fu.sent, 1);
        double until = t_now() + 20e-6 * (double)slow_factor();
        for (double now = t_now(); now < until; now = t_now())
            t_nap(until - now);
    }
    return NULL;
}

START_TEST(foreign_sigurgs_do_not_stop_preemption)
{
    if (!needs_async("foreign_sigurgs_do_not_stop_preemption"))
        return;
    enum { NS = 2 };
    double run = t_slow() ? 3.0 : 1.0;
    restart_for(1, SLICE, 10);
    fu.worker = the_worker();
    atomic_store(&fu.stop, 0);
    atomic_store(&fu.sent, 0);
    struct ticker tk;
    struct spinner sp[NS];
    goro_t *h[NS + 1];
    go_ticker_and_spinners(&tk, sp, NS, h);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, foreign_urg, NULL), 0);
    t_nap(run);
    atomic_store(&pt.stop, 1);
    atomic_store(&fu.stop, 1);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    join_all(h, NS + 1);
    report("preempt: %ld foreign SIGURGs to the worker in %.1f s: ticker %ld ticks, lateness "
           "mean %.2f ms, max %.2f ms; spinners switched %ld times\n", atomic_load(&fu.sent),
           run, atomic_load(&tk.ticks), mean_late(&tk) / 1e6, t_ms(tk.max_late),
           total_switches(sp, NS));
    ck_assert_msg(!t_failed(), "%s", t_failed());
    check_taking_turns_mostly_in_place(sp, NS, "next to foreign SIGURGs");
    check_lateness(&tk, SLICE, "next to foreign SIGURGs");
}
END_TEST

/* Adds this file's tests to the preempt test case (test_preempt.h). */
void preempt_signals_tests(TCase *tc)
{
    tcase_add_test(tc, application_handlers_installed_after_start);
    tcase_add_test(tc, application_handlers_installed_before_start);
    tcase_add_test(tc, eintr_never_leaks_out_of_goro_calls);
    tcase_add_test(tc, foreign_sigurgs_do_not_stop_preemption);
}
