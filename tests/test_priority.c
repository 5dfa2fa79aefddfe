/* Priorities (docs/structured.md, "Priorities"): the API and its bad
 * input; HIGH runs before NORMAL and NORMAL before LOW on a worker; LOW is
 * not starved (one turn in 61 slices); inheritance along the wait edges -
 * a mutex's and a rwlock writer's holder, a joinee, a group's members -
 * given back when the wait ends; priority inversion with and without
 * inheritance (p99 of the HIGH waiter's wait); a HIGH 1 ms ticker among
 * LOW floods on every worker.
 *
 * The ordering checks run in child processes with one worker, where the
 * order is the scheduler's alone. Coroutines never call ck_assert. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

/* go() at a class: the handle, or NULL. */
#define go_at(prio, ...) ({                                                   \
        goro_t *h_ = NULL;                                                    \
        goro_go(&h_, &(goro_attr_t){ .priority = (prio) }, __VA_ARGS__);      \
        h_;                                                                   \
    })

/* ---- the API ---- */

static long report_priority(void *arg)
{
    (void)arg;
    return goro_priority_get(NULL) * 10 + goro_priority_base(NULL);
}

static long spawns_child(void *arg)
{
    long r = 0;
    goro_join(go(report_priority, arg), &r);     /* takes its spawner's class */
    return r;
}

START_TEST(priority_api)
{
    ck_assert_int_eq(goro_priority_set(GORO_PRIORITY_HIGH), -EPERM);     /* a thread */
    ck_assert_int_eq(goro_priority_get(NULL), GORO_PRIORITY_NORMAL);
    ck_assert_int_eq(goro_priority_set(9), -EINVAL);
    goro_t *h;
    ck_assert_int_eq(goro_spawn(&h, &(goro_attr_t){ .priority = 4 },
                                report_priority, NULL), -EINVAL);
    ck_assert_int_eq(goro_spawn(&h, &(goro_attr_t){ .priority = -1 },
                                report_priority, NULL), -EINVAL);
    long r = 0;
    ck_assert_int_eq(goro_join(go(report_priority, NULL), &r), 0);
    ck_assert_int_eq(r, 22);                 /* NORMAL from a thread */
    for (int p = GORO_PRIORITY_LOW; p <= GORO_PRIORITY_HIGH; p++) {
        ck_assert_int_eq(goro_spawn(&h, &(goro_attr_t){ .priority = p },
                                    spawns_child, NULL), 0);
        ck_assert_int_eq(goro_join(h, &r), 0);
        /* Its child takes its class - and may be lent NORMAL through the
         * two joins, this thread's (if it came in time) and its parent's. */
        int lent = p > GORO_PRIORITY_NORMAL ? p : GORO_PRIORITY_NORMAL;
        ck_assert_int_eq(r % 10, p);
        ck_assert_msg(r / 10 == p || r / 10 == lent, "class %ld of %d", r / 10, p);
    }
}
END_TEST

/* ---- the run queues, on one worker ---- */

static char order[128];
static atomic_int norder, nrecorded;    /* slots taken; letters written */

static void record(char c)
{
    int i = atomic_fetch_add(&norder, 1);
    if (i < (int)sizeof order - 1)
        order[i] = c;
    atomic_fetch_add(&nrecorded, 1);    /* release: the letter is in */
}

static void mark(int c) { record((char)c); }

/* Spawns 30 of each class, interleaved, without switching (it is HIGH
 * itself, so the HIGH ones it makes do not cut it short), then lets them
 * run: HIGH first, then NORMAL, then LOW - but for the turns the
 * starvation bounds give (slices 2 and 3 of every 61, and the runnext
 * slot that a NORMAL one shares its slice through): a few at most. */
enum { PER_CLASS = 30 };

static long spawn_mixed(void)
{
    static const int classes[] = { GORO_PRIORITY_LOW, GORO_PRIORITY_NORMAL, GORO_PRIORITY_HIGH };
    static const char names[] = "lnh";
    for (int i = 0; i < 3 * PER_CLASS; i++)
        goro_go(NULL, &(goro_attr_t){ .priority = classes[i % 3] }, mark, names[i % 3] + 0);
    goro_sleep(20 * GORO_MSEC);
    return 0;
}

static int count_in(const char *s, int from, int to, char c)
{
    int n = 0;
    for (int i = from; i < to; i++)
        n += s[i] == c;
    return n;
}

static int order_child(void *arg)
{
    (void)arg;
    if (goro_start(&(goro_config_t){ .workers = 1 }) != 0)
        return 2;
    /* The spawner is HIGH itself: not cut short for the HIGH ones it makes. */
    goro_join(go_at(GORO_PRIORITY_HIGH, spawn_mixed), NULL);
    /* The spawner's sleep lets them run, but it may end first on a slow
     * run (under qemu beside other work, one had run after 20 ms): the
     * order is what is checked, so wait for all of them. */
    double end = t_now() + t_timeout(10);
    while (atomic_load(&nrecorded) < 3 * PER_CLASS && t_now() < end)
        t_nap(0.001);
    int n = atomic_load(&norder);
    order[n < (int)sizeof order ? n : (int)sizeof order - 1] = 0;
    printf("%s\n", order);
    if (n != 3 * PER_CLASS)
        return 3;
    int h_first = count_in(order, 0, PER_CLASS, 'h');
    int n_mid = count_in(order, PER_CLASS, 2 * PER_CLASS, 'n');
    int l_last = count_in(order, 2 * PER_CLASS, 3 * PER_CLASS, 'l');
    return h_first >= PER_CLASS - 5 && n_mid >= PER_CLASS - 5 && l_last >= PER_CLASS - 5 ? 0 : 1;
}

START_TEST(priority_classes_run_in_order)
{
    char out[4096];
    int st = t_run_child(order_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "order: %.2000s", out);
}
END_TEST

/* LOW among NORMAL coroutines that yield for ever: it gets turns, about one
 * in 61 slices, never more than a NORMAL one. */
static atomic_int stop_floods;
static atomic_long turns[2];

static void spin_yield(int which)
{
    while (!atomic_load(&stop_floods)) {
        atomic_fetch_add(&turns[which], 1);
        goro_yield();
    }
}

static int starve_child(void *arg)
{
    (void)arg;
    if (goro_start(&(goro_config_t){ .workers = 1 }) != 0)
        return 2;
    goro_t *n[4], *low;
    for (int i = 0; i < 4; i++)
        n[i] = go(spin_yield, 0);
    low = go_at(GORO_PRIORITY_LOW, spin_yield, 1);
    struct timespec ts = { 0, 200 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    atomic_store(&stop_floods, 1);
    for (int i = 0; i < 4; i++)
        goro_join(n[i], NULL);
    goro_join(low, NULL);
    long normal = atomic_load(&turns[0]), lowt = atomic_load(&turns[1]);
    double share = (double)lowt / (double)(normal + lowt);
    printf("normal turns %ld, low turns %ld: low share %.4f (one in 61: %.4f)\n", normal, lowt,
           share, 1.0 / 61);
    return lowt > 0 && share > 0.5 / 61 && share < 2.0 / 61 ? 0 : 1;
}

START_TEST(priority_low_is_not_starved)
{
    char out[4096];
    int st = t_run_child(starve_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%.2000s", out);
}
END_TEST

/* ---- inheritance ---- */

static goro_mutex_t mu = GORO_MUTEX_INIT;
static goro_rwlock_t rw = GORO_RWLOCK_INIT;
static goro_chan_t *release;
static atomic_int holding;

/* Holds mu (or rw for writing) until release closes. */
static long hold(int rwlock)
{
    if (rwlock ? goro_rwlock_wrlock(&rw) : goro_mutex_lock(&mu))
        return -1;
    atomic_store(&holding, 1);
    goro_chan_recv(release, NULL);
    return rwlock ? goro_rwlock_unlock(&rw) : goro_mutex_unlock(&mu);
}

static long take(int rwlock)
{
    if (rwlock ? goro_rwlock_wrlock(&rw) : goro_mutex_lock(&mu))
        return -1;
    return rwlock ? goro_rwlock_unlock(&rw) : goro_mutex_unlock(&mu);
}

static long block_on(goro_chan_t *ch)
{
    goro_chan_recv(ch, NULL);
    return 0;
}

/* Waits until h's class reads want (lending happens as the waiter parks). */
static void wait_class(goro_t *h, int want)
{
    double end = t_now() + t_timeout(10);
    while (goro_priority_get(h) != want && t_now() < end)
        t_nap(0.001);
    ck_assert_int_eq(goro_priority_get(h), want);
}

/* Cancels h, a waiter for a lock, and sees it give up (take: -1). */
static void give_up(goro_t *h)
{
    long r = 0;
    ck_assert_int_eq(goro_cancel(h), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -1);
}

START_TEST(priority_lent_to_holder_joinee_and_members)
{
    for (int rwlock = 0; rwlock < 2; rwlock++) {
        release = t_chan_new(0, 0);
        atomic_store(&holding, 0);
        goro_t *l = go_at(GORO_PRIORITY_LOW, hold, rwlock);
        ck_assert(t_wait_flag(&holding, t_timeout(10)));
        ck_assert_int_eq(goro_priority_get(l), GORO_PRIORITY_LOW);
        /* A NORMAL waiter lends NORMAL, then a HIGH one HIGH; as they give
         * up, the holder gets back to what the rest lend. */
        goro_t *n = go_at(GORO_PRIORITY_NORMAL, take,
                            rwlock);
        wait_class(l, GORO_PRIORITY_NORMAL);
        goro_t *h = go_at(GORO_PRIORITY_HIGH, take,
                            rwlock);
        wait_class(l, GORO_PRIORITY_HIGH);
        ck_assert_int_eq(goro_priority_base(l), GORO_PRIORITY_LOW);
        give_up(h);
        long r = 0;
        wait_class(l, GORO_PRIORITY_NORMAL);
        /* Released: handed to the NORMAL waiter; l lent nothing any more. */
        ck_assert_int_eq(goro_chan_close(release), 0);
        ck_assert_int_eq(goro_join(n, &r), 0);
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(goro_priority_get(l), GORO_PRIORITY_LOW);
        ck_assert_int_eq(goro_join(l, &r), 0);
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(goro_chan_free(release), 0);
    }

    /* A HIGH joiner lends HIGH to the coroutine it joins, until the join
     * ends (here: its deadline). */
    goro_chan_t *ch = t_chan_new(0, 0);
    goro_t *l = go_at(GORO_PRIORITY_LOW, block_on, ch);
    goro_t *j = go_at(GORO_PRIORITY_HIGH, goro_join_until, l, (long *)NULL, goro_now() + 100 * GORO_MSEC);
    wait_class(l, GORO_PRIORITY_HIGH);
    long r = 0;
    ck_assert_int_eq(goro_join(j, &r), 0);
    ck_assert_int_eq(r, -ETIMEDOUT);
    ck_assert_int_eq(goro_priority_get(l), GORO_PRIORITY_LOW);
    ck_assert_int_eq(goro_chan_close(ch), 0);
    ck_assert_int_eq(goro_join(l, NULL), 0);
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

/* ---- chains of locks ----
 * l holds mu; m holds mu2 and waits for mu; a HIGH coroutine waits for
 * mu2. Its class goes to m, and from m, waiting, on to l - and back, both
 * steps, when it gives up. */
static goro_mutex_t mu2 = GORO_MUTEX_INIT;
static atomic_int holding2;

static long hold_then_take(int rwlock)
{
    if (goro_mutex_lock(&mu2))
        return -1;
    atomic_store(&holding2, 1);
    long r = take(rwlock);
    goro_mutex_unlock(&mu2);
    return r;
}

static long take2(void)
{
    if (goro_mutex_lock(&mu2))
        return -1;
    return goro_mutex_unlock(&mu2);
}

START_TEST(priority_lent_down_a_chain_of_locks)
{
    for (int rwlock = 0; rwlock < 2; rwlock++) {
        release = t_chan_new(0, 0);
        atomic_store(&holding, 0);
        atomic_store(&holding2, 0);
        goro_t *l = go_at(GORO_PRIORITY_LOW, hold, rwlock);
        ck_assert(t_wait_flag(&holding, t_timeout(10)));
        goro_t *m = go_at(GORO_PRIORITY_LOW, hold_then_take, rwlock);
        ck_assert(t_wait_flag(&holding2, t_timeout(10)));
        goro_t *h = go_at(GORO_PRIORITY_HIGH, take2);
        wait_class(m, GORO_PRIORITY_HIGH);
        wait_class(l, GORO_PRIORITY_HIGH);
        ck_assert_int_eq(goro_priority_base(l), GORO_PRIORITY_LOW);
        /* The HIGH waiter gives up: both get back to their own class. */
        give_up(h);
        long r = 0;
        wait_class(m, GORO_PRIORITY_LOW);
        wait_class(l, GORO_PRIORITY_LOW);
        /* The chain still works as locks: released, m gets mu, then ends. */
        ck_assert_int_eq(goro_chan_close(release), 0);
        ck_assert_int_eq(goro_join(l, &r), 0);
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(goro_join(m, &r), 0);
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(goro_chan_free(release), 0);
    }
}
END_TEST

/* ---- a lock's holder that waits for a join or a group ----
 * j holds mu and waits for c (a join, or a group's wait with c a member);
 * a HIGH coroutine comes to wait for mu. j's class rises while it waits:
 * c must get it too. A join gives it back as it falls; a group's members
 * keep a class they were lent until they end (raise only). */
static _Atomic(goro_t *) helper;

/* Runs fn(arg) in a LOW child and waits for it: a join, or (by_group) a
 * group's wait. Its children return 7, which a join hands over and a
 * group's wait stands for by succeeding; -1: the wait failed. */
static long wait_for_child(int by_group, long (*fn)(void *), void *arg)
{
    long r = -1;
    if (by_group) {
        goro_group_t *g;
        if (goro_group_new(&g, NULL) != 0)
            return -1;
        if (goro_spawn(NULL, &(goro_attr_t){ .group = g, .priority = GORO_PRIORITY_LOW }, fn,
                       arg) == 0 &&
            goro_group_wait(g, NULL, NULL) == 0)
            r = 7;
        goro_group_free(g);
    } else {
        goro_t *c;
        if (goro_spawn(&c, &(goro_attr_t){ .priority = GORO_PRIORITY_LOW }, fn, arg) != 0 ||
            goro_join(c, &r) != 0)
            r = -1;
    }
    return r;
}

static long publish_and_block(void *ch)
{
    atomic_store(&helper, goro_self());
    goro_chan_recv(ch, NULL);
    return 7;
}

static long hold_and_wait_for(int by_group)
{
    if (goro_mutex_lock(&mu))
        return -1;
    long r = wait_for_child(by_group, publish_and_block, release);
    goro_mutex_unlock(&mu);
    return r;
}

START_TEST(priority_lent_on_through_a_join_or_a_group)
{
    int by_group = _i;
    release = t_chan_new(0, 0);
    atomic_store(&helper, NULL);
    goro_t *j = go_at(GORO_PRIORITY_LOW, hold_and_wait_for, by_group);
    double end = t_now() + t_timeout(10);
    while (!atomic_load(&helper) && t_now() < end)
        t_nap(0.001);
    goro_t *c = atomic_load(&helper);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(goro_priority_get(c), GORO_PRIORITY_LOW);
    goro_t *h = go_at(GORO_PRIORITY_HIGH, take, 0);
    wait_class(j, GORO_PRIORITY_HIGH);
    wait_class(c, GORO_PRIORITY_HIGH);
    give_up(h);
    wait_class(j, GORO_PRIORITY_LOW);
    if (by_group) {
        t_nap(0.02);
        ck_assert_int_eq(goro_priority_get(c), GORO_PRIORITY_HIGH);    /* raise only */
    } else {
        wait_class(c, GORO_PRIORITY_LOW);
    }
    long r = -1;
    ck_assert_int_eq(goro_chan_close(release), 0);
    ck_assert_int_eq(goro_join(j, &r), 0);
    ck_assert_int_eq(r, 7);
    ck_assert_int_eq(goro_chan_free(release), 0);
}
END_TEST

/* Randomized: the class a join's or a group's waiter lends changes at
 * random moments against the end of what it waits for - a HIGH coroutine
 * comes for the waiter's lock with a random deadline while the child
 * yields a random number of times. Every wait ends (a lost wake-up is a
 * timeout), the join hands over the child's result, and the waiter, once
 * it holds nothing, is lent nothing. */
static long yield_then_return(void *n)
{
    for (long i = 0; i < (long)n; i++)
        goro_yield();
    return 7;
}

static long waiter_round(uint32_t seed)
{
    if (goro_mutex_lock(&mu))
        return -1;
    long n = (long)(t_rnd(&seed) % 20);
    long r = wait_for_child(seed & 1, yield_then_return, (void *)n);
    goro_mutex_unlock(&mu);
    int lent = goro_priority_get(NULL);
    return r != 7 ? -2 + r : lent != GORO_PRIORITY_LOW ? -10 - lent : 0;
}

static long lock_briefly(uint32_t seed)
{
    for (uint32_t i = t_rnd(&seed) % 8; i > 0; i--)
        goro_yield();
    int r = goro_mutex_lock_until(&mu, goro_now() + (t_rnd(&seed) % 100) * GORO_USEC);
    if (r == 0)
        goro_mutex_unlock(&mu);
    return r == 0 || r == -ETIMEDOUT ? 0 : r;
}

/* The rounds, from a LOW coroutine that nobody joins until it is done
 * (a join from the test's thread would lend it NORMAL, and it would lend
 * that on to the waiters it joins). */
static atomic_int rounds_done;
static long loan_rounds_run(uint32_t seed);

static long loan_rounds(uint32_t seed)
{
    long n = loan_rounds_run(seed);
    atomic_store(&rounds_done, 1);
    return n;
}

static long loan_rounds_run(uint32_t seed)
{
    long rounds = t_scale(3000);
    for (long i = 0; i < rounds; i++) {
        goro_t *j = go_at(GORO_PRIORITY_LOW, waiter_round, t_rnd(&seed));
        goro_t *h = go_at(GORO_PRIORITY_HIGH, lock_briefly, t_rnd(&seed));
        long rj = -1, rh = -1;
        if (!j || !h || goro_join(j, &rj) != 0 || goro_join(h, &rh) != 0 || rj || rh)
        {
            t_fail("round %ld: waiter %ld, locker %ld", i, rj, rh);
            return -1;
        }
    }
    return rounds;
}

START_TEST(priority_join_and_group_loans_random_stress)
{
    uint32_t seed = (uint32_t)time(NULL) | 1;
    long rounds = -1;
    atomic_store(&rounds_done, 0);
    goro_t *d = go_at(GORO_PRIORITY_LOW, loan_rounds, seed);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(t_wait_flag(&rounds_done, t_timeout(120)), "seed %u: rounds never ended", seed);
    ck_assert_int_eq(goro_join(d, &rounds), 0);
    ck_assert_msg(rounds > 0, "seed %u: %s", seed, t_failed());
    printf("join and group loans stress (seed %u): %ld rounds\n", seed, rounds);
}
END_TEST

#ifdef GORO_DEBUG
#include "internal.h"

/* ---- debug builds: a loan that lands while the waiter parks ----
 * m, waiting for mu, chooses the class it lends l before its wait is
 * armed; a loan to m in between (h, HIGH, waiting for mu2, which m holds)
 * finds no wait to claim. The hook holds that window open on m's worker
 * until the loan has landed; m's class must still reach l. */
static _Atomic(goro_t *) arming_target;
static atomic_int arming_seen;

/* Run by a debug hook on g's worker: if g is *target (the first time
 * only), says so in *seen and holds the window open until g is lent HIGH. */
static void hold_until_lent_high(struct goro *g, _Atomic(goro_t *) *target, atomic_int *seen)
{
    if (g != atomic_load(target))
        return;
    atomic_store(target, NULL);
    atomic_store(seen, 1);
    double end = t_now() + t_timeout(5);
    while (goro_priority_get(g) != GORO_PRIORITY_HIGH && t_now() < end)
        usleep(1000);
}

static void hold_arming(struct goro *g)
{
    hold_until_lent_high(g, &arming_target, &arming_seen);     /* the first park only */
}

static long arming_m(void)
{
    if (goro_mutex_lock(&mu2))
        return -1;
    atomic_store(&arming_target, goro_self());
    long r = take(0);
    goro_mutex_unlock(&mu2);
    return r;
}

static int arming_child(void *arg)
{
    (void)arg;
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0)
        return 10;
    goro__debug_park_arming = hold_arming;
    release = NULL;
    if (goro_chan_new(&release, 0, 0) != 0)
        return 11;
    goro_t *l = go_at(GORO_PRIORITY_LOW, hold, 0);
    if (!l || !t_wait_flag(&holding, 10))
        return 11;
    goro_t *m = go_at(GORO_PRIORITY_LOW, arming_m);
    if (!m || !t_wait_flag(&arming_seen, 10))
        return 12;                              /* m never parked */
    goro_t *h = go_at(GORO_PRIORITY_HIGH, take2);
    double end = t_now() + 10;
    while (goro_priority_get(l) != GORO_PRIORITY_HIGH && t_now() < end)
        usleep(1000);
    int got_m = goro_priority_get(m), got_l = goro_priority_get(l);
    printf("m %d, l %d (HIGH %d)\n", got_m, got_l, GORO_PRIORITY_HIGH);
    goro__debug_park_arming = NULL;
    long r1 = -1, r2 = -1, r3 = -1;
    if (goro_chan_close(release) != 0 || goro_join(l, &r1) != 0 || goro_join(m, &r2) != 0 ||
        goro_join(h, &r3) != 0 || r1 || r2 || r3)
        return 13;
    if (got_m != GORO_PRIORITY_HIGH)
        return 14;                              /* h's loan never reached m */
    if (got_l != GORO_PRIORITY_HIGH)
        return 15;                              /* ... nor went on to l */
    goro_chan_free(release);
    return goro_shutdown() == 0 ? 0 : 16;
}

START_TEST(debug_loan_while_the_waiter_arms_goes_on)
{
    static char out[4096];
    int st = t_run_child(arming_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %.2000s", st, out);
}
END_TEST

/* ---- debug builds: a loan that lands as a group's waiter parks ----
 * j holds mu and waits for its group (c a member). Between lending the
 * members its class and parking, j is lent HIGH by h, which comes for mu;
 * the hook holds that window open on j's worker until the loan has landed.
 * The class j parks lending must be the one it lent, so the commit sees
 * the change and c gets HIGH too. */
static _Atomic(goro_t *) lent_target;
static atomic_int lent_seen;

static void hold_group_lent(struct goro *g)
{
    hold_until_lent_high(g, &lent_target, &lent_seen);
}

static long hold_and_wait_for_group_marked(void)
{
    atomic_store(&lent_target, goro_self());
    return hold_and_wait_for(1);
}

START_TEST(debug_loan_while_a_group_waiter_parks_reaches_the_members)
{
    release = t_chan_new(0, 0);
    atomic_store(&helper, NULL);
    atomic_store(&lent_seen, 0);
    goro__debug_group_lent = hold_group_lent;
    goro_t *j = go_at(GORO_PRIORITY_LOW, hold_and_wait_for_group_marked);
    bool seen = t_wait_flag(&lent_seen, t_timeout(10));
    goro__debug_group_lent = NULL;      /* entered (or never): no later test meets it */
    ck_assert(seen);
    double end = t_now() + t_timeout(10);
    while (!atomic_load(&helper) && t_now() < end)
        t_nap(0.001);
    goro_t *c = atomic_load(&helper);
    ck_assert_ptr_nonnull(c);
    goro_t *h = go_at(GORO_PRIORITY_HIGH, take, 0);
    wait_class(j, GORO_PRIORITY_HIGH);
    end = t_now() + t_timeout(2);
    while (goro_priority_get(c) != GORO_PRIORITY_HIGH && t_now() < end)
        t_nap(0.001);
    int got = goro_priority_get(c);
    give_up(h);
    long r = -1;
    ck_assert_int_eq(goro_chan_close(release), 0);
    ck_assert_int_eq(goro_join(j, &r), 0);
    ck_assert_int_eq(r, 7);
    ck_assert_int_eq(goro_chan_free(release), 0);
    ck_assert_msg(got == GORO_PRIORITY_HIGH, "the member's class %d: j's loan never reached it",
                  got);
}
END_TEST
#endif

/* Randomized: coroutines of every class lock two of four mutexes in order
 * (so chains form and no cycle), with random deadlines, cancels of each
 * other and changes of their own class, on every worker. No two ever hold
 * one mutex; every wait ends; and each coroutine, once it holds nothing,
 * is lent nothing by a lock. */
enum { CH_LOCKS = 4, CH_WORKERS = 24, CH_ITERS = 400 };
static goro_mutex_t ch_mu[CH_LOCKS];
static atomic_int ch_inside[CH_LOCKS];
static atomic_int ch_bad;
static goro_t *ch_g[CH_WORKERS];
/* Tokens, not handles: a worker may cancel one the test has already
 * joined. Filled before the gate opens, read only after. */
static goro_token_t ch_tok[CH_WORKERS];
static goro_chan_t *ch_gate;

static int ch_lock(int i, uint32_t *seed)
{
    int r = t_rnd(seed) % 4 == 0
                ? goro_mutex_lock_until(&ch_mu[i], goro_now() + (t_rnd(seed) % 200) * GORO_USEC)
                : goro_mutex_lock(&ch_mu[i]);
    if (r == 0 && atomic_fetch_add(&ch_inside[i], 1) != 0)
        atomic_store(&ch_bad, 1);
    return r;
}

static void ch_unlock(int i)
{
    atomic_fetch_sub(&ch_inside[i], 1);
    if (goro_mutex_unlock(&ch_mu[i]) != 0)
        atomic_store(&ch_bad, 2);
}

static long chain_worker(uint32_t seed)
{
    long done = 0;
    goro_chan_recv(ch_gate, NULL);            /* closed once ch_tok is filled */
    for (int it = 0; it < CH_ITERS; it++) {
        if (t_rnd(&seed) % 16 == 0)
            goro_priority_set(GORO_PRIORITY_LOW + (int)(t_rnd(&seed) % 3));
        if (t_rnd(&seed) % 512 == 0)          /* sticky: rare, or all give up */
            goro_cancel_token(ch_tok[t_rnd(&seed) % CH_WORKERS]);
        int a = (int)(t_rnd(&seed) % (CH_LOCKS - 1));
        int b = a + 1 + (int)(t_rnd(&seed) % (uint32_t)(CH_LOCKS - 1 - a));
        if (ch_lock(a, &seed) != 0)
            continue;
        if (ch_lock(b, &seed) == 0) {
            if (t_rnd(&seed) % 2)
                goro_yield();
            ch_unlock(b);
            done++;
        }
        ch_unlock(a);
    }
    /* Holding nothing, it is lent nothing by a lock; only the joiner, a
     * thread, lends NORMAL. */
    int base = goro_priority_base(NULL), now = goro_priority_get(NULL);
    if (now > (base > GORO_PRIORITY_NORMAL ? base : GORO_PRIORITY_NORMAL))
        atomic_store(&ch_bad, 3);
    return done;
}

START_TEST(priority_chains_random_stress)
{
    atomic_store(&ch_bad, 0);
    for (int i = 0; i < CH_LOCKS; i++)
        ck_assert_int_eq(goro_mutex_init(&ch_mu[i]), 0);
    uint32_t seed = (uint32_t)time(NULL) | 1;
    ck_assert_int_eq(goro_chan_new(&ch_gate, 1, 0), 0);
    for (int i = 0; i < CH_WORKERS; i++) {
        ch_g[i] = go_at(GORO_PRIORITY_LOW + i % 3, chain_worker, seed + (uint32_t)i * 7919u);
        ck_assert_int_eq(goro_token(ch_g[i], &ch_tok[i]), 0);
    }
    ck_assert_int_eq(goro_chan_close(ch_gate), 0);
    long total = 0;
    for (int i = 0; i < CH_WORKERS; i++) {
        /* The last joiner is NORMAL and nobody else waits: once each has
         * ended, nothing is lent to any that lives on. */
        long r = 0;
        ck_assert_int_eq(goro_join(ch_g[i], &r), 0);
        total += r;
    }
    ck_assert_msg(atomic_load(&ch_bad) == 0, "seed %u: %s", seed,
                  (const char *[]){ "", "two held one mutex", "an unlock failed",
                                    "a loan outlived its lock" }[atomic_load(&ch_bad)]);
    for (int i = 0; i < CH_LOCKS; i++) {
        ck_assert_int_eq(goro_mutex_trylock(&ch_mu[i]), 0);     /* nobody holds it */
        ck_assert_int_eq(goro_mutex_unlock(&ch_mu[i]), 0);
    }
    ck_assert_int_eq(goro_chan_free(ch_gate), 0);
    printf("chains stress (seed %u): %ld pairs of locks taken\n", seed, total);
    ck_assert_int_gt(total, 0);
}
END_TEST

/* A HIGH coroutine waiting for its group lends HIGH to its LOW members and
 * to the members they wait for in turn. */
static goro_t *member_self[2];
static atomic_int members_up;

static long inner_member(goro_chan_t *ch)
{
    member_self[1] = goro_self();
    atomic_fetch_add(&members_up, 1);
    goro_chan_recv(ch, NULL);
    return 0;
}

static long outer_member(goro_chan_t *ch)
{
    member_self[0] = goro_self();
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return -1;
    goro_group_go(g, inner_member, ch);
    atomic_fetch_add(&members_up, 1);
    long r = goro_group_wait(g, NULL, NULL);
    goro_group_free(g);
    return r;
}

static long high_group_waiter(goro_chan_t *ch)
{
    goro_group_t *g;
    if (goro_group_new(&g, NULL) != 0)
        return -1;
    goro_spawn(NULL, &(goro_attr_t){ .group = g, .priority = GORO_PRIORITY_LOW },
               (long (*)(void *))outer_member, ch);
    while (atomic_load(&members_up) < 2)
        goro_sleep(GORO_MSEC);
    long r = goro_group_wait(g, NULL, NULL);
    goro_group_free(g);
    return r;
}

START_TEST(priority_lent_down_a_group_tree)
{
    goro_chan_t *ch = t_chan_new(0, 0);
    atomic_store(&members_up, 0);
    goro_t *w = go_at(GORO_PRIORITY_HIGH, high_group_waiter, ch);
    wait_class(NULL, GORO_PRIORITY_NORMAL);          /* the test thread: untouched */
    double end = t_now() + t_timeout(10);
    while ((atomic_load(&members_up) < 2 || goro_priority_get(member_self[1]) !=
            GORO_PRIORITY_HIGH) && t_now() < end)
        t_nap(0.001);
    ck_assert_int_eq(goro_priority_base(member_self[0]), GORO_PRIORITY_LOW);
    ck_assert_int_eq(goro_priority_get(member_self[0]), GORO_PRIORITY_HIGH);
    ck_assert_int_eq(goro_priority_get(member_self[1]), GORO_PRIORITY_HIGH);
    ck_assert_int_eq(goro_chan_close(ch), 0);
    long r = -1;
    ck_assert_int_eq(goro_join(w, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

/* ---- priority inversion: with inheritance and without ----
 * One worker. A LOW coroutine holds the mutex for 20 chunks of work,
 * yielding between them; four NORMAL coroutines yield for ever; a HIGH
 * one wants the mutex. Without inheritance the holder gets one turn in 61
 * slices; with it, the holder runs at HIGH until it unlocks. */

enum { INV_ROUNDS = 30, INV_CHUNKS = 20 };
static atomic_int inv_stop;

static void busy_us(int us)
{
    int64_t end = goro_now() + us * GORO_USEC;
    while (goro_now() < end)
        ;
}

static void flood(void)
{
    while (!atomic_load(&inv_stop)) {
        busy_us(20);
        goro_yield();
    }
}

static long low_holder(goro_mutex_t *m, atomic_int *locked)
{
    goro_mutex_lock(m);
    atomic_store(locked, 1);
    for (int i = 0; i < INV_CHUNKS; i++) {
        busy_us(20);
        goro_yield();
    }
    goro_mutex_unlock(m);
    return 0;
}

static int64_t high_waiter(goro_mutex_t *m)
{
    int64_t t0 = goro_now();
    goro_mutex_lock(m);
    int64_t waited = goro_now() - t0;
    goro_mutex_unlock(m);
    return waited;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The chain: holds m1, then waits for m2 (which low_holder holds). */
static long low_middle(goro_mutex_t *m1, goro_mutex_t *m2, atomic_int *locked)
{
    goro_mutex_lock(m1);
    atomic_store(locked, 1);
    goro_mutex_lock(m2);
    goro_mutex_unlock(m2);
    goro_mutex_unlock(m1);
    return 0;
}

/* low_holder, which first starts the middle of the chain: spawned here,
 * it queues on this worker's LOW list beside the holder and gets its turn
 * while the holder works (one spawned by a thread would wait in the
 * global LOW list until the worker's own LOW list is empty). */
static long low_holder_chain(goro_mutex_t *m, atomic_int *locked, goro_mutex_t *m1,
                             atomic_int *locked1, goro_t **mid)
{
    *mid = go_at(GORO_PRIORITY_LOW, low_middle, m1, m, locked1);
    return low_holder(m, locked);     /* locks m before mid can run */
}

/* *arg: bit 0 inheritance on, bit 1 a chain - the HIGH waiter wants a
 * mutex whose LOW holder waits for the mutex the working LOW holder has. */
static int inversion_child(void *arg)
{
    int mode = *(int *)arg;
    if (!(mode & 1))
        setenv("GORO_PRIORITY_INHERIT", "0", 1);
    if (goro_start(&(goro_config_t){ .workers = 1 }) != 0)
        return 2;
    goro_t *f[4];
    for (int i = 0; i < 4; i++)
        f[i] = go(flood);
    int64_t waits[INV_ROUNDS];
    for (int round = 0; round < INV_ROUNDS; round++) {
        goro_mutex_t m = GORO_MUTEX_INIT, m1 = GORO_MUTEX_INIT;
        atomic_int locked = 0, locked1 = 0;
        goro_t *l, *mid = NULL;
        if (mode & 2)
            l = go_at(GORO_PRIORITY_LOW, low_holder_chain, &m, &locked, &m1, &locked1, &mid);
        else
            l = go_at(GORO_PRIORITY_LOW, low_holder, &m, &locked);
        while (!atomic_load(&locked) || ((mode & 2) && !atomic_load(&locked1)))
            t_nap(0.0002);
        goro_mutex_t *wanted = mode & 2 ? &m1 : &m;
        long w = 0;
        goro_t *h = go_at(GORO_PRIORITY_HIGH, high_waiter, wanted);
        goro_join(h, &w);
        goro_join(l, NULL);
        if (mid)
            goro_join(mid, NULL);
        waits[round] = w;
    }
    atomic_store(&inv_stop, 1);
    for (int i = 0; i < 4; i++)
        goro_join(f[i], NULL);
    qsort(waits, INV_ROUNDS, sizeof waits[0], cmp_i64);
    printf("%.3f %.3f\n", t_ms(waits[INV_ROUNDS / 2]), t_ms(waits[INV_ROUNDS * 99 / 100]));
    return 0;
}

static void inversion_run(int mode, double *p50, double *p99)
{
    char out[4096];
    int st = t_run_child(inversion_child, &mode, t_timeout(60), out, sizeof out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "inversion: %.2000s", out);
    ck_assert_int_eq(sscanf(out, "%lf %lf", p50, p99), 2);
}

START_TEST(priority_inheritance_bounds_inversion)
{
    double with50, with99, without50, without99;
    inversion_run(1, &with50, &with99);
    inversion_run(0, &without50, &without99);
    printf("priority inversion, HIGH waiter's wait: with inheritance p50 %.3f ms p99 %.3f ms; "
           "without p50 %.3f ms p99 %.3f ms\n", with50, with99, without50, without99);
    /* 20 chunks of 20 us at HIGH: well under 5 ms even on a slow run;
     * without, 20 turns one slice in 61 apart, each behind 4 x 20 us. */
    ck_assert_msg(with99 < without99 / 3, "with %.3f ms, without %.3f ms", with99, without99);
    ck_assert_msg(with99 < t_timeout(0.005) * 1e3, "p99 %.3f ms with inheritance", with99);
}
END_TEST

/* The same through a chain of two locks: the HIGH waiter's class reaches
 * the working holder through the holder it waits for. */
START_TEST(priority_inheritance_bounds_inversion_through_a_chain)
{
    double with50, with99, without50, without99;
    inversion_run(3, &with50, &with99);
    inversion_run(2, &without50, &without99);
    printf("priority inversion through a chain of 2 locks, HIGH waiter's wait: with "
           "inheritance p50 %.3f ms p99 %.3f ms; without p50 %.3f ms p99 %.3f ms\n",
           with50, with99, without50, without99);
    ck_assert_msg(with99 < without99 / 3, "with %.3f ms, without %.3f ms", with99, without99);
    ck_assert_msg(with99 < t_timeout(0.005) * 1e3, "p99 %.3f ms with inheritance", with99);
}
END_TEST

/* ---- a HIGH ticker among LOW floods on every worker ---- */

enum { TICKS = 300 };

static long high_ticker(int64_t *late)
{
    goro_ticker_t *t;
    if (goro_ticker_new(&t, GORO_MSEC) != 0)
        return -1;
    for (int i = 0; i < TICKS; i++) {
        int64_t tick;
        if (goro_ticker_wait(t, &tick) != 0)
            return -2;
        late[i] = goro_now() - tick;
    }
    goro_ticker_free(t);
    return 0;
}

/* CPU work in the program's own code that never yields: only preemption
 * takes it off its worker. */
static void low_flood(void)
{
    /* Without asynchronous preemption (TSan, valgrind) it yields now and
     * then instead. */
    bool cooperative = t_sanitized() || t_valgrind();
    volatile uint64_t x = 0;
    while (!atomic_load(&inv_stop)) {
        for (int i = 0; i < 100000; i++)
            x = x + (uint64_t)i;     /* volatile: the loop stays */
        if (cooperative)
            goro_yield();
    }
}

START_TEST(priority_high_ticker_among_low_floods)
{
    static int64_t late[TICKS];
    atomic_store(&inv_stop, 0);
    int nf = 4 * goro_workers();
    goro_t *f[64];
    for (int i = 0; i < nf && i < 64; i++)
        f[i] = go_at(GORO_PRIORITY_LOW, low_flood);
    long r = -1;
    ck_assert_int_eq(goro_join(go_at(GORO_PRIORITY_HIGH, high_ticker, late), &r), 0);
    atomic_store(&inv_stop, 1);
    for (int i = 0; i < nf && i < 64; i++)
        ck_assert_int_eq(goro_join(f[i], NULL), 0);
    ck_assert_int_eq(r, 0);
    t_sort_i64(late, TICKS);
    double p50 = t_ms(late[TICKS / 2]), p99 = t_ms(late[TICKS * 99 / 100]);
    printf("HIGH 1 ms ticker among %d LOW floods on %d workers: lateness p50 %.3f ms, "
           "p99 %.3f ms (slice 10 ms)\n", nf, goro_workers(), p50, p99);
    ck_assert_msg(p99 <= t_timeout(0.010) * 1e3, "p99 %.3f ms, over one slice", p99);
}
END_TEST

Suite *priority_suite(void)
{
    Suite *s = suite_create("priority");
    TCase *tc = t_runtime_tcase(s, "priority", 120);
    tcase_add_test(tc, priority_api);
    tcase_add_test(tc, priority_classes_run_in_order);
    tcase_add_test(tc, priority_low_is_not_starved);
    tcase_add_test(tc, priority_lent_to_holder_joinee_and_members);
    tcase_add_test(tc, priority_lent_down_a_chain_of_locks);
    tcase_add_loop_test(tc, priority_lent_on_through_a_join_or_a_group, 0, 2);  /* join, group */
    tcase_add_test(tc, priority_join_and_group_loans_random_stress);
#ifdef GORO_DEBUG
    tcase_add_test(tc, debug_loan_while_the_waiter_arms_goes_on);
    tcase_add_test(tc, debug_loan_while_a_group_waiter_parks_reaches_the_members);
#endif
    tcase_add_test(tc, priority_chains_random_stress);
    tcase_add_test(tc, priority_lent_down_a_group_tree);
    tcase_add_test(tc, priority_inheritance_bounds_inversion);
    tcase_add_test(tc, priority_inheritance_bounds_inversion_through_a_chain);
    tcase_add_test(tc, priority_high_ticker_among_low_floods);
    return s;
}
