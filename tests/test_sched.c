/* Scheduler stress: many messages through channels across the workers, a
 * hunt for lost wake-ups, fairness against a runnext ping-pong on one
 * worker, idle CPU with everything parked, spawning and joining from
 * foreign threads and across workers. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "helpers.h"
#include "suites.h"
#include "internal.h"               /* goro__sched.active (sched/active.c) */
#include "sched/sched.h"            /* goro__active_next */

static void busy(uint32_t spins)
{
    for (volatile uint32_t i = 0; i < spins; i++)
        ;
}

/* In a loop that keeps a worker busy on purpose: lets the kernel (or
 * valgrind, which runs one thread at a time) run the other workers. */
static void spin_pause(void)
{
    sched_yield();
}

/* ---- many messages, several producers and consumers ---- */

enum { SP = 4, SC = 6 };

static struct {
    goro_chan_t *buf, *unb;
    long n;
    _Atomic uint64_t *seen;         /* one bit per message id */
    atomic_long received;
} st;

static void stress_producer(long p)
{
    uint32_t r = (uint32_t)p * 2654435761u + 11;
    long from = st.n * p / SP, to = st.n * (p + 1) / SP;
    for (long id = from; id < to; id++) {
        uint32_t x = t_rnd(&r);
        int e;
        if (x % 8 == 0) {
            /* whichever channel takes it first */
            goro_case_t cs[2] = { { st.buf, GORO_SEND, &id, 0 },
                                  { st.unb, GORO_SEND, &id, 0 } };
            int i = goro_select(cs, 2, 0);
            e = i < 0 ? i : cs[i].result;
        } else {
            e = goro_chan_send(x % 2 ? st.buf : st.unb, &id);
        }
        if (e != 0) {
            t_fail("producer %ld: send of %ld returned %d", p, id, e);
            return;
        }
        if (x % 16 == 3)
            goro_yield();
    }
}

static bool mark(long id, long c)
{
    if (id < 0 || id >= st.n) {
        t_fail("consumer %ld: got id %ld, out of range", c, id);
        return false;
    }
    uint64_t bit = 1ull << (id % 64);
    if (atomic_fetch_or(&st.seen[id / 64], bit) & bit) {
        t_fail("consumer %ld: id %ld delivered twice", c, id);
        return false;
    }
    atomic_fetch_add(&st.received, 1);
    return true;
}

static void stress_consumer(long c)
{
    uint32_t r = (uint32_t)c * 747796405u + 5;
    long id;
    int mode = (int)(c % 3);
    if (mode < 2) {
        goro_chan_t *ch = mode == 0 ? st.buf : st.unb;
        int e;
        while ((e = goro_chan_recv(ch, &id)) > 0) {
            if (!mark(id, c))
                return;
            if (t_rnd(&r) % 16 == 0)
                goro_yield();
        }
        if (e != 0)
            t_fail("consumer %ld: recv returned %d", c, e);
        return;
    }
    goro_case_t cs[2] = { { st.buf, GORO_RECV, &id, 0 }, { st.unb, GORO_RECV, &id, 0 } };
    while (cs[0].ch || cs[1].ch) {
        int i = goro_select(cs, 2, 0);
        if (i < 0) {
            t_fail("consumer %ld: select returned %d", c, i);
            return;
        }
        if (cs[i].result == 0) {
            cs[i].ch = NULL;            /* closed: switch the case off */
            continue;
        }
        if (!mark(id, c))
            return;
        if (t_rnd(&r) % 16 == 0)
            goro_yield();
    }
}

START_TEST(stress_messages_no_loss_no_duplicate)
{
    st.n = t_scale(1000000);
    size_t words = (size_t)(st.n + 63) / 64;
    st.seen = calloc(words, sizeof *st.seen);
    ck_assert_ptr_nonnull(st.seen);
    atomic_store(&st.received, 0);
    ck_assert_int_eq(goro_chan_new(&st.buf, sizeof(long), 32), 0);
    ck_assert_int_eq(goro_chan_new(&st.unb, sizeof(long), 0), 0);
    double t0 = t_now();
    goro_t *prod[SP], *cons[SC];
    for (long i = 0; i < SC; i++)
        ck_assert_ptr_nonnull(cons[i] = go(stress_consumer, i));
    for (long i = 0; i < SP; i++)
        ck_assert_ptr_nonnull(prod[i] = go(stress_producer, i));
    for (int i = 0; i < SP; i++)
        ck_assert_int_eq(goro_join(prod[i], NULL), 0);
    ck_assert_int_eq(goro_chan_close(st.buf), 0);
    ck_assert_int_eq(goro_chan_close(st.unb), 0);
    for (int i = 0; i < SC; i++)
        ck_assert_int_eq(goro_join(cons[i], NULL), 0);
    double dt = t_now() - t0;
    printf("stress: %ld messages, %d producers, %d consumers: %.2f s (%.0f ns/message)\n",
           st.n, SP, SC, dt, dt * 1e9 / (double)st.n);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&st.received), st.n);
    for (size_t w = 0; w < words; w++) {
        uint64_t want = (w + 1) * 64 <= (size_t)st.n ? ~0ull
                                                      : (1ull << (st.n % 64)) - 1;
        ck_assert_msg(atomic_load(&st.seen[w]) == want, "ids %zu..%zu: bits %#lx",
                      w * 64, w * 64 + 63, (unsigned long)atomic_load(&st.seen[w]));
    }
    ck_assert_int_eq(goro_chan_free(st.buf), 0);
    ck_assert_int_eq(goro_chan_free(st.unb), 0);
    free(st.seen);
}
END_TEST

/* ---- lost wake-up hunt ---- */

enum { LP = 4, LT = 2 };

static struct {
    goro_chan_t *ping[LP], *pong[LP];
    goro_chan_t *tick;
    atomic_long trips[LP];
    atomic_long ended;              /* coroutines that have finished */
    atomic_int stop, ticker_stop;
    goro_chan_t *hand;              /* the hand-off pair */
    atomic_long acked, handoffs;
} lw;

static long total_trips(void)
{
    long s = 0;
    for (int i = 0; i < LP; i++)
        s += atomic_load(&lw.trips[i]);
    return s;
}

/* Sends pings and waits for the matching pong; now and then waits for a
 * tick from a plain thread instead, so that every coroutine is parked at
 * once and the workers go to sleep, to be woken from outside. */
static void lw_initiator(long i)
{
    uint32_t r = (uint32_t)i * 2654435761u + 3;
    for (long seq = 0; !atomic_load(&lw.stop); seq++) {
        uint32_t x = t_rnd(&r);
        busy(x % 512);
        if (x % 8 == 1 && goro_chan_recv(lw.tick, NULL) != 1) {
            t_fail("initiator %ld: tick channel closed early", i);
            break;
        }
        if (x % 16 == 2)
            goro_yield();
        long got = -1;
        if (goro_chan_send(lw.ping[i], &seq) != 0 ||
            goro_chan_recv(lw.pong[i], &got) != 1 || got != seq + 1) {
            t_fail("initiator %ld: round %ld broken (got %ld)", i, seq, got);
            break;
        }
        atomic_fetch_add(&lw.trips[i], 1);
    }
    goro_chan_close(lw.ping[i]);
    atomic_fetch_add(&lw.ended, 1);
}

static void lw_responder(long i)
{
    uint32_t r = (uint32_t)i * 747796405u + 9;
    long seq;
    while (goro_chan_recv(lw.ping[i], &seq) == 1) {
        uint32_t x = t_rnd(&r);
        busy(x % 256);
        if (x % 16 == 5)
            goro_yield();
        seq++;
        if (goro_chan_send(lw.pong[i], &seq) != 0) {
            t_fail("responder %ld: pong failed", i);
            break;
        }
    }
    atomic_fetch_add(&lw.ended, 1);
}

/* A hand-off that only another worker can complete: the sender makes the
 * receiver runnable (into its own worker's runnext) and then keeps that
 * worker busy until the receiver has run. Only an idle worker woken by the
 * send (or a spinner that sees the receiver) can run it. Everything else
 * in the hunt parks quickly, so a second worker is always free soon; a
 * receiver left unrun for a second means a wake-up was lost. */
static void lw_hand_sender(void)
{
    uint32_t r = 0x9e3779b9u;
    double limit = t_timeout(1.0);
    for (long seq = 1; !atomic_load(&lw.stop); seq++) {
        uint32_t x = t_rnd(&r);
        if (x % 4 == 0 && goro_chan_recv(lw.tick, NULL) != 1)
            break;
        busy(x % 1024);
        if (goro_chan_send(lw.hand, &seq) != 0) {
            t_fail("hand-off sender: send failed");
            break;
        }
        double end = t_now() + limit;
        unsigned spins = 0;
        while (atomic_load(&lw.acked) != seq) {
            if (++spins % 256 == 0)
                spin_pause();
            if (spins % 256 == 0 && t_now() > end) {
                t_fail("lost wake-up: a coroutine made runnable at hand-off %ld was "
                       "not run by the other worker(s) for %.1f s", seq, limit);
                while (atomic_load(&lw.acked) != seq)
                    goro_yield();       /* let it run here, and end */
                goto out;
            }
        }
        atomic_fetch_add(&lw.handoffs, 1);
    }
out:
    goro_chan_close(lw.hand);
    atomic_fetch_add(&lw.ended, 1);
}

static void lw_hand_receiver(void)
{
    long seq;
    while (goro_chan_recv(lw.hand, &seq) == 1)
        atomic_store(&lw.acked, seq);
    atomic_fetch_add(&lw.ended, 1);
}

static void *lw_ticker(void *arg)
{
    uint32_t r = (uint32_t)(uintptr_t)arg * 2246822519u + 1;
    while (!atomic_load(&lw.ticker_stop)) {
        uint32_t x = t_rnd(&r);
        t_nap((double)(x % 300) * 1e-6);
        /* blocking (this thread parks, a coroutine wakes it) or not */
        if (x % 2)
            goro_chan_try_send(lw.tick, NULL);
        else if (goro_chan_send(lw.tick, NULL) != 0)
            break;
    }
    return NULL;
}

static void nothing(void) {}

/* The count of Ps that may be busy (sched/active.c, invariant 11), moved
 * at random between 1 and every P while the hunt runs: each move lands in
 * some phase of a wake-up, a sleep or a recheck. */
static _Atomic int mover_stop;

static void *count_mover(void *arg)
{
    uint32_t r = (uint32_t)(uintptr_t)arg;
    int n = goro_workers();
    while (!atomic_load(&mover_stop)) {
        uint32_t x = t_rnd(&r);
        atomic_store(&goro__sched.active, 1 + (int)(x % (uint32_t)n));
        t_nap((double)(x % 2000) * 1e-6);
    }
    atomic_store(&goro__sched.active, n);
    return NULL;
}

static void hunt(bool moving)
{
    double duration = t_slow() ? 1.0 : 3.0;
    double stall_limit = t_timeout(2.0);
    memset(&lw, 0, sizeof lw);
    for (int i = 0; i < LP; i++) {
        ck_assert_int_eq(goro_chan_new(&lw.ping[i], sizeof(long), 0), 0);
        ck_assert_int_eq(goro_chan_new(&lw.pong[i], sizeof(long), 0), 0);
    }
    ck_assert_int_eq(goro_chan_new(&lw.tick, 0, 0), 0);
    ck_assert_int_eq(goro_chan_new(&lw.hand, sizeof(long), 0), 0);
    pthread_t tickers[LT];
    for (long i = 0; i < LT; i++)
        ck_assert_int_eq(pthread_create(&tickers[i], NULL, lw_ticker, (void *)(i + 1)), 0);
    goro_t *ini[LP], *resp[LP], *hs, *hr;
    for (long i = 0; i < LP; i++) {
        ck_assert_ptr_nonnull(resp[i] = go(lw_responder, i));
        ck_assert_ptr_nonnull(ini[i] = go(lw_initiator, i));
    }
    ck_assert_ptr_nonnull(hr = go(lw_hand_receiver));
    ck_assert_ptr_nonnull(hs = go(lw_hand_sender));
    pthread_t mover;
    if (moving) {
        atomic_store(&goro__debug_active_frozen, true);
        atomic_store(&mover_stop, 0);
        ck_assert_int_eq(pthread_create(&mover, NULL, count_mover, (void *)0x5bd1e995u), 0);
    }

    /* The watchdog: progress (round trips, then coroutines ending once
     * told to stop) must never pause for stall_limit. */
    double start = t_now(), last_change = start, dt = 0;
    long last = 0, trips = 0;
    while (atomic_load(&lw.ended) < 2 * LP + 2) {
        t_nap(0.005);
        if (!atomic_load(&lw.stop) && t_now() - start >= duration) {
            trips = total_trips();
            dt = t_now() - start;
            atomic_store(&lw.stop, 1);
        }
        long now = total_trips() + atomic_load(&lw.handoffs) + atomic_load(&lw.ended);
        if (now != last) {
            last = now;
            last_change = t_now();
        } else if (t_now() - last_change > stall_limit) {
            char stall[256];
            int len = snprintf(stall, sizeof stall, "no progress for %.1f s after %ld "
                               "round trips, %ld of %d coroutines ended (per pair:",
                               stall_limit, total_trips(), atomic_load(&lw.ended), 2 * LP + 2);
            for (int i = 0; i < LP; i++)
                len += snprintf(stall + len, sizeof stall - (size_t)len, " %ld",
                                atomic_load(&lw.trips[i]));
            /* a spawn wakes an idle worker: does that revive them? (not
             * joined: if nothing runs it, joining would hang too) */
            goro_go(NULL, NULL, nothing);
            t_nap(t_timeout(0.2));
            snprintf(stall + len, sizeof stall - (size_t)len, ")%s",
                     total_trips() + atomic_load(&lw.handoffs) + atomic_load(&lw.ended) != now
                         ? "; resumed after a spawn woke a worker: a lost wake-up"
                         : "; still stuck after a spawn");
            /* coroutines may be stranded: do not wait for them */
            ck_abort_msg("lost wake-up hunt: %s", stall);
        }
    }
    if (moving) {
        atomic_store(&mover_stop, 1);
        pthread_join(mover, NULL);
        atomic_store(&goro__debug_active_frozen, false);
    }
    for (int i = 0; i < LP; i++) {
        ck_assert_int_eq(goro_join(ini[i], NULL), 0);
        ck_assert_int_eq(goro_join(resp[i], NULL), 0);
    }
    ck_assert_int_eq(goro_join(hs, NULL), 0);
    ck_assert_int_eq(goro_join(hr, NULL), 0);
    atomic_store(&lw.ticker_stop, 1);
    goro_chan_close(lw.tick);           /* releases a ticker stuck in send */
    for (int i = 0; i < LT; i++)
        pthread_join(tickers[i], NULL);
    long handoffs = atomic_load(&lw.handoffs);
    printf("lost wake-up hunt%s: %ld round trips and %ld cross-worker hand-offs in %.1f s\n",
           moving ? " (the count of busy Ps moving)" : "", trips, handoffs, dt);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(trips > t_scale(1000), "only %ld round trips in %.1f s", trips, dt);
    ck_assert_msg(handoffs > t_scale(100), "only %ld hand-offs in %.1f s", handoffs, dt);
    for (int i = 0; i < LP; i++) {
        ck_assert_int_eq(goro_chan_free(lw.ping[i]), 0);
        ck_assert_int_eq(goro_chan_free(lw.pong[i]), 0);
    }
    ck_assert_int_eq(goro_chan_free(lw.tick), 0);
    ck_assert_int_eq(goro_chan_free(lw.hand), 0);
}

START_TEST(lost_wakeup_hunt)
{
    hunt(false);
}
END_TEST

/* The same with the count of Ps that may be busy moving (invariant 11):
 * producers that skip the wake-up, Ms that leave work to the busy ones
 * and sleep on their futex, and counts raised again, lose nothing. */
START_TEST(lost_wakeup_hunt_while_the_busy_count_moves)
{
    hunt(true);
}
END_TEST

/* ---- a wake-up that only an idle worker can serve ---- */

/* Nothing else runs: each hand-off wakes the receiver into the sender's own
 * runnext while the sender keeps its worker busy, so another worker, idle
 * or on its way to idling (the delay before each send is random, to land
 * in every phase of that), has to pick the receiver up. If that wake-up is
 * lost nothing else would ever wake the idle worker: the sender notices
 * after a second and reports it. */
static struct {
    goro_chan_t *ch;
    atomic_long acked;
    atomic_long worst_ns;
    long rounds;
} ho;

static void ho_receiver(void)
{
    long seq;
    while (goro_chan_recv(ho.ch, &seq) == 1)
        atomic_store(&ho.acked, seq);
}

static void ho_sender(void)
{
    uint32_t r = 0x2545f491u;
    double limit = t_timeout(1.0);
    for (long seq = 1; seq <= ho.rounds; seq++) {
        busy(t_rnd(&r) % 8192);
        double t0 = t_now();
        if (goro_chan_send(ho.ch, &seq) != 0) {
            t_fail("hand-off: send failed");
            break;
        }
        unsigned spins = 0;
        while (atomic_load(&ho.acked) != seq) {
            if (++spins % 256 == 0)
                spin_pause();
            if (spins % 256 == 0 && t_now() - t0 > limit) {
                t_fail("lost wake-up: hand-off %ld of %ld: the receiver made runnable "
                       "while the sender kept its worker busy was not run by another "
                       "worker for %.1f s", seq, ho.rounds, limit);
                while (atomic_load(&ho.acked) != seq)
                    goro_yield();       /* run it here and end */
                seq = ho.rounds;
                break;
            }
        }
        long ns = (long)((t_now() - t0) * 1e9);
        if (ns > atomic_load(&ho.worst_ns))
            atomic_store(&ho.worst_ns, ns);
    }
    goro_chan_close(ho.ch);
}

static void handoffs(long rounds)
{
    ck_assert_int_ge(goro_workers(), 2);
    ho.rounds = rounds;
    atomic_store(&ho.acked, 0);
    atomic_store(&ho.worst_ns, 0);
    t_fail_reset();
    ck_assert_int_eq(goro_chan_new(&ho.ch, sizeof(long), 0), 0);
    double t0 = t_now();
    goro_t *rx = go(ho_receiver), *tx = go(ho_sender);
    ck_assert_ptr_nonnull(rx);
    ck_assert_ptr_nonnull(tx);
    ck_assert_int_eq(goro_join(tx, NULL), 0);
    ck_assert_int_eq(goro_join(rx, NULL), 0);
    printf("cross-worker hand-offs: %ld in %.2f s, slowest %.1f us\n", ho.rounds,
           t_now() - t0, (double)atomic_load(&ho.worst_ns) / 1e3);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&ho.acked), ho.rounds);
    ck_assert_int_eq(goro_chan_free(ho.ch), 0);
}

START_TEST(handoff_wakes_idle_worker)
{
    handoffs(t_scale(20000));
}
END_TEST

/* The same while only one P may be busy (invariant 11): the sender keeps
 * its P without a switch, so no busy P runs the receiver; sysmon wakes an
 * idle M for it once the P has been stuck a millisecond (check_stuck) -
 * in every build, preemption or not (TSan and valgrind have none). */
START_TEST(handoff_wakes_idle_worker_while_one_p_may_run)
{
    atomic_store(&goro__debug_active_frozen, true);
    atomic_store(&goro__sched.active, 1);
    handoffs(t_scale(300));
    atomic_store(&goro__sched.active, goro_workers());
    atomic_store(&goro__debug_active_frozen, false);
}
END_TEST

/* ---- fairness: a runnext ping-pong on one worker ---- */

static struct {
    goro_chan_t *ab, *ba;
    atomic_int stop;
    atomic_long pings, bystander;
} fp;

static void pp_a(void)
{
    for (long x = 0; !atomic_load(&fp.stop); x++) {
        if (goro_chan_send(fp.ab, &x) != 0 || goro_chan_recv(fp.ba, &x) != 1) {
            t_fail("ping-pong: A broken");
            break;
        }
        atomic_fetch_add(&fp.pings, 1);
    }
    goro_chan_close(fp.ab);
}

static void pp_b(void)
{
    long x;
    while (goro_chan_recv(fp.ab, &x) == 1)
        if (goro_chan_send(fp.ba, &x) != 0) {
            t_fail("ping-pong: B broken");
            return;
        }
}

static void bystander(void)
{
    while (!atomic_load(&fp.stop)) {
        atomic_fetch_add(&fp.bystander, 1);
        goro_yield();
    }
}

/* Variant 0: all three spawned from this thread; 1: the bystander is
 * spawned by A (into A's worker's local queue) once the pair runs. */
static void pp_a_spawning(goro_t **by)
{
    long x = 0;
    if (goro_chan_send(fp.ab, &x) != 0 || goro_chan_recv(fp.ba, &x) != 1)
        t_fail("ping-pong: first round broken");
    *by = go(bystander);
    pp_a();
}

START_TEST(runnext_pair_cannot_starve_others)
{
    double wait = t_timeout(2.0);
    long by[2], pings[2];
    for (int variant = 0; variant < 2; variant++) {
        t_restart(&(goro_config_t){ .workers = 1 });
        memset(&fp, 0, sizeof fp);
        ck_assert_int_eq(goro_chan_new(&fp.ab, sizeof(long), 0), 0);
        ck_assert_int_eq(goro_chan_new(&fp.ba, sizeof(long), 0), 0);
        goro_t *a, *b, *c = NULL;
        if (variant == 0) {
            ck_assert_ptr_nonnull(a = go(pp_a));
            ck_assert_ptr_nonnull(b = go(pp_b));
            ck_assert_ptr_nonnull(c = go(bystander));
        } else {
            ck_assert_ptr_nonnull(b = go(pp_b));
            ck_assert_ptr_nonnull(a = go(pp_a_spawning, &c));
        }
        /* both sides must move: the pair and the bystander */
        t_wait_at_least(&fp.pings, 1000, wait);
        by[variant] = t_wait_at_least(&fp.bystander, 1000, wait);
        pings[variant] = atomic_load(&fp.pings);
        atomic_store(&fp.stop, 1);          /* A stops, closes; all end */
        ck_assert_int_eq(goro_join(a, NULL), 0);
        ck_assert_int_eq(goro_join(b, NULL), 0);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(goro_join(c, NULL), 0);
        printf("runnext fairness (variant %d, 1 worker): %ld round trips, "
               "bystander ran %ld times\n", variant, pings[variant], by[variant]);
        ck_assert_msg(!t_failed(), "%s", t_failed());
        ck_assert_int_eq(goro_chan_free(fp.ab), 0);
        ck_assert_int_eq(goro_chan_free(fp.ba), 0);
    }
    ck_assert_int_eq(goro_shutdown(), 0);       /* the next test wants 2+ workers */
    for (int v = 0; v < 2; v++) {
        ck_assert_msg(pings[v] >= 1000, "variant %d: the pair made %ld round trips",
                      v, pings[v]);
        ck_assert_msg(by[v] >= 1000, "a ping-pong pair on one worker starved a yielding "
                      "coroutine (%s): it ran %ld / %ld times (variants 0 / 1) in %.1f s "
                      "while the pair made %ld / %ld round trips",
                      v == 0 ? "all spawned from a thread" : "spawned by the pair",
                      by[0], by[1], wait, pings[0], pings[1]);
    }
}
END_TEST

/* ---- idle CPU ---- */

static atomic_long parked_count;

static int park_on(goro_chan_t *ch)
{
    atomic_fetch_add(&parked_count, 1);
    return goro_chan_recv(ch, NULL);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

START_TEST(idle_cpu_near_zero)
{
    enum { NMAX = 1000 };
    const int N = (int)t_live(NMAX);
    goro_chan_t *ch;
    ck_assert_int_eq(goro_chan_new(&ch, 0, 0), 0);
    static goro_t *h[NMAX];
    atomic_store(&parked_count, 0);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_nonnull(h[i] = go(park_on, ch));
    ck_assert_int_eq(t_wait_at_least(&parked_count, N, t_timeout(10)), N);
    t_nap(t_timeout(0.2));                /* let the workers settle into sleep */
    double c0 = cpu_seconds(), w0 = t_now();
    t_nap(1.0);
    double used = cpu_seconds() - c0, wall = t_now() - w0;
    printf("idle CPU with %d coroutines parked: %.2f ms over %.2f s (%.3f%% of one CPU)\n",
           N, used * 1e3, wall, used / wall * 100);
    ck_assert_int_eq(goro_chan_close(ch), 0);
    for (int i = 0; i < N; i++) {
        long r = -1;
        ck_assert_int_eq(goro_join(h[i], &r), 0);
        T_CHECK(r == 0, "parked coroutine %d: recv returned %ld", i, r);
    }
    ck_assert_int_eq(goro_chan_free(ch), 0);
    /* TSan's background thread and valgrind's scheduler have their own
     * costs; the runtime's share is what is measured elsewhere */
    double limit = t_valgrind() ? 0.2 : t_sanitized() ? 0.05 : 0.01;
    ck_assert_msg(used < limit * wall, "idle process used %.2f ms of CPU in %.2f s "
                  "(limit %.0f ms)", used * 1e3, wall, limit * wall * 1e3);
}
END_TEST

/* ---- foreign threads ---- */

static long triple(long x) { return 3 * x + 1; }

static atomic_long foreign_joined;

static void *spawn_join_thread(void *arg)
{
    long n = (long)arg;
    enum { B = 64 };
    goro_t *h[B];
    for (long base = 0; base < n; base += B) {
        long k = n - base < B ? n - base : B;
        for (long i = 0; i < k; i++)
            if (!(h[i] = go(triple, base + i))) {
                t_fail("foreign thread: go failed");
                k = i;
                break;
            }
        for (long i = 0; i < k; i++) {
            long r = -1;
            if (goro_join(h[i], &r) != 0 || r != triple(base + i))
                t_fail("foreign thread: join %ld gave %ld", base + i, r);
            atomic_fetch_add(&foreign_joined, 1);
        }
    }
    return NULL;
}

/* Runs on a worker without yielding until told, so that whoever joins it
 * meanwhile has to wait for it while it runs. */
struct runner {
    atomic_int started, joining, done;
    atomic_long tid;
    uint32_t tail_spins;
};

static long run_until_joined(struct runner *r)
{
    atomic_store(&r->tid, t_tid());
    atomic_store(&r->started, 1);
    double end = t_now() + t_timeout(5);
    while (!atomic_load(&r->joining)) {
        spin_pause();                    /* keeps the worker: never yields */
        if (t_now() > end) {
            t_fail("run_until_joined: the joiner never came");
            break;
        }
    }
    busy(r->tail_spins);                 /* vary the race with the join */
    atomic_store(&r->done, 1);
    return 4242;
}

static void *join_running_thread(void *arg)
{
    long rounds = (long)arg;
    uint32_t seed = 77;
    for (long i = 0; i < rounds; i++) {
        struct runner r = { .tail_spins = t_rnd(&seed) % 20000 };
        goro_t *h = go(run_until_joined, &r);
        if (!h) {
            t_fail("join_running_thread: go failed");
            return NULL;
        }
        double end = t_now() + t_timeout(5);
        while (!atomic_load(&r.started) && t_now() < end)
            spin_pause();
        atomic_store(&r.joining, 1);
        long res = -1;
        if (goro_join(h, &res) != 0 || res != 4242)
            t_fail("foreign join of a running coroutine: result %ld", res);
        if (!atomic_load(&r.done))
            t_fail("foreign join returned before the coroutine finished");
    }
    return NULL;
}

START_TEST(spawn_and_join_from_foreign_threads)
{
    enum { T = 4 };
    long per = t_scale(5000), rounds = t_scale(200);
    atomic_store(&foreign_joined, 0);
    pthread_t th[T + 1];
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, spawn_join_thread, (void *)per), 0);
    ck_assert_int_eq(pthread_create(&th[T], NULL, join_running_thread, (void *)rounds), 0);
    for (int i = 0; i <= T; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&foreign_joined), T * per);
}
END_TEST

/* ---- join across workers ---- */

static atomic_long cross_rounds;

static void joiner(struct runner *r, goro_t *target)
{
    /* the target never yields */
    double end = t_now() + t_timeout(5);
    while (!atomic_load(&r->started)) {
        spin_pause();
        if (t_now() > end) {
            t_fail("joiner: target never started");
            break;
        }
    }
    /* Usually on another worker; on the target's own thread only if the
     * target was preempted (it never yields by itself), which is fine. */
    atomic_store(&r->joining, 1);
    long res = -1;
    if (goro_join(target, &res) != 0 || res != 4242)
        t_fail("coroutine join across workers: result %ld", res);
    if (!atomic_load(&r->done))
        t_fail("join returned before the target finished");
    atomic_fetch_add(&cross_rounds, 1);
}

START_TEST(join_across_workers)
{
    ck_assert_int_ge(goro_workers(), 2);
    long rounds = t_scale(300);
    uint32_t seed = 12345;
    atomic_store(&cross_rounds, 0);
    for (long i = 0; i < rounds; i++) {
        struct runner r = { .tail_spins = t_rnd(&seed) % 20000 };
        goro_t *t = go(run_until_joined, &r);
        ck_assert_ptr_nonnull(t);
        goro_t *j = go(joiner, &r, t);
        ck_assert_ptr_nonnull(j);
        ck_assert_int_eq(goro_join(j, NULL), 0);
        if (t_failed())
            break;
    }
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&cross_rounds), rounds);
}
END_TEST

/* ---- how many Ps may be busy: the rule (sched/active.c) ---- */

START_TEST(busy_count_rule)
{
    const int64_t sec = GORO_SEC;
    bool probe = false;
    int64_t next = 0;
    /* 2 Ps, every one allowed: crowded, one fewer; the next probe a
     * second later */
    ck_assert_int_eq(goro__active_next(2, 2, true, &probe, 10, &next), 1);
    ck_assert(!probe);
    ck_assert_int_eq(next, 10 + sec);
    /* never below one, crowded or not; no probe before its time */
    ck_assert_int_eq(goro__active_next(1, 2, true, &probe, 20, &next), 1);
    ck_assert_int_eq(goro__active_next(1, 2, false, &probe, 30, &next), 1);
    ck_assert(!probe);
    /* its time: one more, for a look */
    ck_assert_int_eq(goro__active_next(1, 2, false, &probe, 10 + sec, &next), 2);
    ck_assert(probe);
    /* the look finds them crowded: back down, the next probe a second on */
    ck_assert_int_eq(goro__active_next(2, 2, true, &probe, 20 + sec, &next), 1);
    ck_assert(!probe);
    ck_assert_int_eq(next, 20 + 2 * sec);
    /* a probe that finds room keeps the P, and the next look may add one
     * more (4 Ps) */
    ck_assert_int_eq(goro__active_next(1, 4, false, &probe, 20 + 2 * sec, &next), 2);
    ck_assert(probe);
    ck_assert_int_eq(goro__active_next(2, 4, false, &probe, 30 + 2 * sec, &next), 2);
    ck_assert(!probe);
    ck_assert_int_eq(goro__active_next(2, 4, false, &probe, 40 + 2 * sec, &next), 3);
    ck_assert(probe);
    ck_assert_int_eq(goro__active_next(3, 4, false, &probe, 50 + 2 * sec, &next), 3);
    ck_assert_int_eq(goro__active_next(3, 4, false, &probe, 60 + 2 * sec, &next), 4);
    ck_assert_int_eq(goro__active_next(4, 4, false, &probe, 70 + 2 * sec, &next), 4);
    ck_assert(!probe);
    /* every P allowed and not crowded: nothing moves */
    ck_assert_int_eq(goro__active_next(4, 4, false, &probe, 80 + 2 * sec, &next), 4);
    ck_assert(!probe);
}
END_TEST

Suite *sched_suite(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = t_runtime_tcase(s, "stress", 60);
    tcase_add_test(tc, stress_messages_no_loss_no_duplicate);
    tcase_add_test(tc, lost_wakeup_hunt);
    tcase_add_test(tc, lost_wakeup_hunt_while_the_busy_count_moves);
    tcase_add_test(tc, handoff_wakes_idle_worker);
    tcase_add_test(tc, handoff_wakes_idle_worker_while_one_p_may_run);
    tcase_add_test(tc, spawn_and_join_from_foreign_threads);
    tcase_add_test(tc, join_across_workers);
    tcase_add_test(tc, idle_cpu_near_zero);
    tcase_add_test(tc, busy_count_rule);

    tc = t_runtime_tcase(s, "fairness", 30);  /* reconfigures the runtime */
    tcase_add_test(tc, runnext_pair_cannot_starve_others);
    return s;
}
