/* Deadlines in force (goro/structured.h: goro_deadline_push, a group's
 * deadline inherited by its members): every wait honours the nearer of
 * its own deadline and the one in force, without being passed it. Timing
 * tests run on the virtual clock (t_virtual), where a wait that a deadline
 * ends resumes at that deadline exactly. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "suites.h"

/* ---- "library" code: waits that take no deadline ---- */

static goro_chan_t *lib_ch;        /* unbuffered; nobody sends */
static goro_mutex_t lib_mu, lib_cv_mu;
static goro_cond_t lib_cv;
static goro_sem_t lib_sem;
static goro_wsem_t lib_wsem;
static goro_t *lib_holder;
static goro_chan_t *lib_stop;      /* closed to end the holder */

static void forever(goro_chan_t *ch)
{
    long v;
    goro_mutex_lock(&lib_mu);
    goro_chan_recv(ch, &v);         /* until closed */
    goro_mutex_unlock(&lib_mu);
}

static int w_recv(void) { long v; return goro_chan_recv(lib_ch, &v); }
static int w_send(void) { long v = 1; return goro_chan_send(lib_ch, &v); }
static int w_select(void)
{
    long v;
    goro_case_t cs[] = { { .ch = lib_ch, .op = GORO_RECV, .elem = &v } };
    return goro_select(cs, 1, 0);
}
static int w_lock(void) { return goro_mutex_lock(&lib_mu); }
static int w_sem(void) { return goro_sem_acquire(&lib_sem); }
static int w_wsem(void) { return goro_wsem_acquire(&lib_wsem, 2); }
static int w_join(void) { return goro_join(lib_holder, NULL); }
static int w_future(void)
{
    goro_future_t *f;
    long v;
    if (goro_future_new(&f, sizeof v) != 0)
        return 1;
    int r = goro_future_get(f, &v, NULL);
    goro_future_free(f);
    return r;
}
static int w_sleep(void) { return goro_sleep(3600 * GORO_SEC); }
static int w_cond(void)
{
    goro_mutex_lock(&lib_cv_mu);
    int r = goro_cond_wait(&lib_cv, &lib_cv_mu);
    goro_mutex_unlock(&lib_cv_mu);
    return r;
}

static const struct {
    const char *name;
    int (*wait)(void);
} lib_waits[] = {
    { "recv", w_recv }, { "send", w_send }, { "select", w_select }, { "lock", w_lock },
    { "sem", w_sem }, { "wsem", w_wsem }, { "join", w_join }, { "future", w_future },
    { "sleep", w_sleep }, { "cond", w_cond },
};

static void through_library_body(void *arg)
{
    (void)arg;
    lib_ch = t_chan_new(sizeof(long), 0);
    goro_mutex_init(&lib_mu);
    goro_mutex_init(&lib_cv_mu);
    goro_cond_init(&lib_cv);
    goro_sem_init(&lib_sem, 0);
    goro_wsem_init(&lib_wsem, 2);
    goro_wsem_acquire(&lib_wsem, 1);     /* one of two held: 2 must wait */
    lib_stop = t_chan_new(sizeof(long), 0);
    if (goro_go(&lib_holder, NULL, forever, lib_stop) != 0) {
        t_fail("go");
        return;
    }
    goro_sleep(GORO_MSEC);          /* the holder takes lib_mu */
    for (size_t i = 0; i < sizeof lib_waits / sizeof lib_waits[0]; i++) {
        int64_t t0 = goro_now(), dl = t0 + 10 * GORO_MSEC;
        int64_t prev = goro_deadline_push(dl);
        if (prev != GORO_FOREVER || goro_deadline() != dl)
            t_fail("%s: push saw %lld, in force %lld", lib_waits[i].name, (long long)prev,
                   (long long)goro_deadline());
        int r = lib_waits[i].wait();
        int64_t took = goro_now() - t0;
        goro_deadline_pop(prev);
        if (r != -ETIMEDOUT || took != 10 * GORO_MSEC)
            t_fail("%s under a 10 ms deadline: %d after %lld ns, want -ETIMEDOUT at 10 ms",
                   lib_waits[i].name, r, (long long)took);
        if (goro_deadline() != GORO_FOREVER)
            t_fail("%s: after the pop %lld, want none", lib_waits[i].name,
                   (long long)goro_deadline());
    }
    /* after the pop, waits work again, with their own deadlines */
    long v;
    int64_t t1 = goro_now();
    if (goro_chan_recv_until(lib_ch, &v, t1 + 5 * GORO_MSEC) != -ETIMEDOUT ||
        goro_now() != t1 + 5 * GORO_MSEC)
        t_fail("a wait after the pop");
    if (goro_sleep(GORO_MSEC) != 0)
        t_fail("a sleep after the pop");
    goro_chan_close(lib_stop);
    if (goro_join(lib_holder, NULL) != 0)
        t_fail("the join after the pop");
    goro_chan_free(lib_stop);
    goro_chan_free(lib_ch);
    goro_cond_destroy(&lib_cv);
    goro_mutex_destroy(&lib_mu);
    goro_mutex_destroy(&lib_cv_mu);
    goro_sem_destroy(&lib_sem);
}

/* A library that takes no deadline honours its caller's: channels,
 * select, locks, semaphores, join, futures, sleep, condition variables
 * each end at the deadline, exactly, with -ETIMEDOUT; after the pop they
 * wait as before. */
START_TEST(inherit_library_waits_end_at_the_deadline_in_force)
{
    t_virtual(through_library_body, NULL);
}
END_TEST

/* ---- the nearer of the two ---- */

static void nearer_body(void *arg)
{
    (void)arg;
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    long v;
    int64_t t0 = goro_now();
    /* its own deadline nearer: that one, as before */
    int64_t prev = goro_deadline_push(t0 + 100 * GORO_MSEC);
    if (goro_chan_recv_until(ch, &v, t0 + 10 * GORO_MSEC) != -ETIMEDOUT ||
        goro_now() != t0 + 10 * GORO_MSEC)
        t_fail("own deadline nearer: ended at +%lld", (long long)(goro_now() - t0));
    /* nested: a farther push changes nothing, a nearer one narrows */
    int64_t mid = goro_deadline_push(t0 + 500 * GORO_MSEC);
    if (mid != t0 + 100 * GORO_MSEC || goro_deadline() != t0 + 100 * GORO_MSEC)
        t_fail("a farther push widened the deadline");
    int64_t inner = goro_deadline_push(t0 + 30 * GORO_MSEC);
    if (goro_chan_recv_until(ch, &v, t0 + 400 * GORO_MSEC) != -ETIMEDOUT ||
        goro_now() != t0 + 30 * GORO_MSEC)
        t_fail("inner scope: ended at +%lld, want +30 ms", (long long)(goro_now() - t0));
    goro_deadline_pop(inner);
    if (goro_deadline() != t0 + 100 * GORO_MSEC)
        t_fail("pop of the inner scope");
    if (goro_chan_recv(ch, &v) != -ETIMEDOUT || goro_now() != t0 + 100 * GORO_MSEC)
        t_fail("outer scope: ended at +%lld, want +100 ms", (long long)(goro_now() - t0));
    goro_deadline_pop(mid);
    goro_deadline_pop(prev);
    /* a sleep that ends before the deadline is a success; one cut short
     * by it says so */
    int64_t t1 = goro_now();
    prev = goro_deadline_push(t1 + 10 * GORO_MSEC);
    if (goro_sleep(5 * GORO_MSEC) != 0)
        t_fail("a sleep inside the deadline");
    if (goro_sleep(GORO_SEC) != -ETIMEDOUT || goro_now() != t1 + 10 * GORO_MSEC)
        t_fail("a sleep cut by the deadline");
    /* passed already: refused at once, nothing done */
    if (goro_chan_try_send(ch, &v) != -EAGAIN)
        t_fail("try_send");
    /* a sleep that ends by the deadline is a success, even at it */
    if (goro_sleep(0) != 0 || goro_sleep(1) != -ETIMEDOUT || goro_now() != t1 + 10 * GORO_MSEC)
        t_fail("sleeps at the deadline");
    goro_deadline_pop(prev);
    goro_chan_free(ch);
}

START_TEST(inherit_the_nearer_deadline_wins_and_scopes_nest)
{
    t_virtual(nearer_body, NULL);
}
END_TEST

/* ---- groups ---- */

struct member_seen {
    int64_t deadline;              /* goro_deadline() in the member */
    int wait;                      /* its wait's result */
    int cause;                     /* goro_cause()'s code after it */
    int64_t ended;                 /* goro_now() when the wait ended */
};
static struct member_seen seen[4];

static void member(int depth)
{
    struct member_seen *m = &seen[depth];
    m->deadline = goro_deadline();
    if (depth < 3) {
        goro_group_t *g;
        if (goro_group_new(&g, NULL) != 0) {
            t_fail("group_new");
            return;
        }
        goro_group_go(g, member, depth + 1);
        goro_group_wait(g, NULL, NULL);
        goro_group_free(g);
    }
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    long v;
    m->wait = goro_chan_recv(ch, &v);
    m->ended = goro_now();
    const goro_err_t *c = goro_cause();
    m->cause = c ? goro_err_code(c) : 0;
    goro_chan_free(ch);
}

static void groups_body(void *arg)
{
    (void)arg;
    memset(seen, 0, sizeof seen);
    int64_t t0 = goro_now();
    /* the maker's deadline in force, nearer than the group's own */
    int64_t prev = goro_deadline_push(t0 + 20 * GORO_MSEC);
    goro_group_t *g;
    if (goro_group_new(&g, &(goro_group_attr_t){ .deadline = t0 + GORO_SEC }) != 0) {
        t_fail("group_new");
        return;
    }
    goro_group_go(g, member, 1);
    int r = goro_group_wait(g, NULL, NULL);
    if (r != -ETIMEDOUT)
        t_fail("the group's wait: %d, want -ETIMEDOUT", r);
    goro_group_free(g);
    goro_deadline_pop(prev);
    for (int d = 1; d < 4; d++) {
        if (seen[d].deadline != t0 + 20 * GORO_MSEC)
            t_fail("level %d: deadline +%lld, want +20 ms", d, (long long)(seen[d].deadline - t0));
        if (seen[d].wait != -ETIMEDOUT || seen[d].cause != ETIMEDOUT)
            t_fail("level %d: wait %d cause %d, want -ETIMEDOUT and ETIMEDOUT", d, seen[d].wait,
                   seen[d].cause);
    }
    if (seen[3].ended != t0 + 20 * GORO_MSEC)
        t_fail("the innermost wait ended at +%lld", (long long)(seen[3].ended - t0));
}

/* A deadline in force reaches every member three groups down: each
 * reads it, its waits end at it with -ETIMEDOUT (not -ECANCELED), its
 * cause is ETIMEDOUT, and the group's wait says ETIMEDOUT. */
START_TEST(inherit_group_members_three_levels_down)
{
    t_virtual(groups_body, NULL);
}
END_TEST

static void plain_child(int64_t *out)
{
    *out = goro_deadline();
}

static void cancel_target(int *out)
{
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    long v;
    goro_deadline_push(goro_now() + GORO_SEC);
    *out = goro_chan_recv(ch, &v);
    goro_chan_free(ch);
}

static void plain_body(void *arg)
{
    (void)arg;
    int64_t prev = goro_deadline_push(goro_now() + 10 * GORO_MSEC);
    int64_t child = 0;
    goro_t *h;
    goro_go(&h, NULL, plain_child, &child);
    goro_deadline_pop(prev);
    goro_join(h, NULL);
    if (child != GORO_FOREVER)
        t_fail("a go() child inherited %lld", (long long)child);
    /* a cancel before the deadline is a cancel */
    int r = 0;
    goro_go(&h, NULL, cancel_target, &r);
    goro_sleep(GORO_MSEC);
    goro_cancel(h);
    goro_join(h, NULL);
    if (r != -ECANCELED)
        t_fail("a cancel before the deadline: %d, want -ECANCELED", r);
}

/* Coroutines spawned outside a group start with no deadline (as they
 * start uncancelled), and a cancel before the deadline stays a cancel. */
START_TEST(inherit_not_by_plain_spawns_and_a_cancel_stays_a_cancel)
{
    t_virtual(plain_body, NULL);
}
END_TEST

/* ---- real waits ---- */

static void fd_body(int *fds)
{
    char c;
    int64_t prev = goro_deadline_push(goro_now() + 20 * GORO_MSEC);
    ssize_t n = goro_read(fds[0], &c, 1);
    goro_deadline_pop(prev);
    if (n != -ETIMEDOUT)
        t_fail("a read under the deadline: %zd, want -ETIMEDOUT", n);
    /* after the pop: the byte written now is read */
    if (goro_write(fds[1], "x", 1) != 1 || goro_read(fds[0], &c, 1) != 1 || c != 'x')
        t_fail("a read after the pop");
}

/* I/O on the real clock: a read with no data ends at the deadline in
 * force; after the pop the descriptor works. */
START_TEST(inherit_io_wait_ends_at_the_deadline)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    goro_t *h = go(fd_body, fds);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_msg(t_failed() == NULL, "%s", t_failed());
    ck_assert_int_eq(goro_close(fds[0]), 0);
    ck_assert_int_eq(goro_close(fds[1]), 0);
}
END_TEST

/* ---- randomized stress on the real clock ---- */

static goro_chan_t *st_ch;         /* unbuffered: senders meet receivers */
static goro_mutex_t st_mu;
static atomic_long st_timeouts, st_done, st_cancels;

struct stresser {
    uint32_t seed;
    atomic_int cancelled;           /* set before goro_cancel */
};

/* Random waits under random deadlines in force (some past, some nested),
 * each checked: -ETIMEDOUT only once the nearer deadline has passed,
 * -ECANCELED only after a cancel; never a hang (the test's timeout). */
static void stresser_run(struct stresser *st)
{
    int rounds = (int)t_scale(1000);
    for (int i = 0; i < rounds; i++) {
        uint32_t r = t_rnd(&st->seed);
        int64_t now = goro_now();
        int64_t dl = now + (int64_t)(r % 2000) * GORO_USEC - 100 * GORO_USEC;
        int64_t prev = goro_deadline_push(dl);
        int64_t inner_prev = 0;
        bool nested = r & 0x10000;
        if (nested)
            inner_prev = goro_deadline_push(now + (int64_t)(t_rnd(&st->seed) % 3000) * GORO_USEC);
        int64_t in_force = goro_deadline();
        long v = i;
        int res;
        switch ((r >> 8) % 4) {
        case 0: res = goro_chan_send(st_ch, &v); break;
        case 1: res = goro_chan_recv(st_ch, &v); res = res == 1 ? 0 : res; break;
        case 2:
            res = goro_mutex_lock(&st_mu);
            if (res == 0) {
                goro_sleep((int64_t)(r % 200) * GORO_USEC);
                goro_mutex_unlock(&st_mu);
            }
            break;
        default: res = goro_sleep((int64_t)(r % 3000) * GORO_USEC); break;
        }
        int64_t end = goro_now();
        if (nested)
            goro_deadline_pop(inner_prev);
        goro_deadline_pop(prev);
        if (goro_deadline() != GORO_FOREVER)
            t_fail("after the pops: %lld in force", (long long)goro_deadline());
        if (res == -ETIMEDOUT) {
            atomic_fetch_add(&st_timeouts, 1);
            if (end < in_force)
                t_fail("-ETIMEDOUT %lld ns before the deadline in force",
                       (long long)(in_force - end));
        } else if (res == -ECANCELED) {
            if (!atomic_load(&st->cancelled))
                t_fail("-ECANCELED without a cancel");
            return;
        } else if (res != 0) {
            t_fail("a wait returned %d", res);
        } else {
            atomic_fetch_add(&st_done, 1);
        }
    }
}

START_TEST(inherit_stress_random_deadlines_and_cancels)
{
    enum { N = 40 };
    st_ch = t_chan_new(sizeof(long), 0);
    goro_mutex_init(&st_mu);
    atomic_store(&st_timeouts, 0);
    atomic_store(&st_done, 0);
    static struct stresser sts[N];
    goro_t *hs[N];
    for (int i = 0; i < N; i++) {
        sts[i].seed = 0x9e3779b9u * (uint32_t)(i + 1);
        atomic_store(&sts[i].cancelled, 0);
        ck_assert_int_eq(goro_go(&hs[i], NULL, stresser_run, &sts[i]), 0);
    }
    uint32_t seed = 7;
    for (int k = 0; k < N / 4; k++) {
        t_nap(0.002);
        int i = (int)(t_rnd(&seed) % N);
        atomic_store(&sts[i].cancelled, 1);
        goro_cancel(hs[i]);
        atomic_fetch_add(&st_cancels, 1);
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(goro_join(hs[i], NULL), 0);
    ck_assert_msg(t_failed() == NULL, "%s", t_failed());
    ck_assert_msg(atomic_load(&st_timeouts) > 0 && atomic_load(&st_done) > 0,
                  "timeouts %ld, done %ld: both outcomes must occur", atomic_load(&st_timeouts),
                  atomic_load(&st_done));
    printf("inherit stress: %ld timed out, %ld done, %ld cancels\n", atomic_load(&st_timeouts),
           atomic_load(&st_done), atomic_load(&st_cancels));
    ck_assert_int_eq(goro_mutex_destroy(&st_mu), 0);
    ck_assert_int_eq(goro_chan_free(st_ch), 0);
}
END_TEST

static atomic_int dump_parked;

static void dump_target(goro_chan_t *ch)
{
    long v;
    goro_deadline_push(goro_now() + 3600 * GORO_SEC);
    atomic_store(&dump_parked, 1);
    goro_chan_recv(ch, &v);
}

/* goro_dump names a coroutine's deadline in force. */
START_TEST(inherit_dump_shows_the_deadline_in_force)
{
#ifdef T_TSAN
    /* the dump reads records that running threads write (docs/debugging.md) */
    t_skip("inherit_dump_shows_the_deadline_in_force", "TSan reports the dump's reads as races");
    return;
#endif
    goro_chan_t *ch = t_chan_new(sizeof(long), 0);
    atomic_store(&dump_parked, 0);
    goro_t *h;
    ck_assert_int_eq(goro_go(&h, GORO_ATTR(.name = "bounded"), dump_target, ch), 0);
    ck_assert_int_eq(t_wait_flag(&dump_parked, t_timeout(10)), 1);
    t_settle();
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    goro_dump(f);
    fclose(f);
    const char *at = strstr(text, "\"bounded\"");
    ck_assert_msg(at != NULL, "no coroutine \"bounded\" in:\n%s", text);
    ck_assert_msg(strstr(at, "deadline in force: in 359") != NULL, "no deadline line in:\n%s", at);
    free(text);
    ck_assert_int_eq(goro_chan_close(ch), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_int_eq(goro_chan_free(ch), 0);
}
END_TEST

/* Outside a coroutine there is no deadline in force, and push does
 * nothing. */
START_TEST(inherit_outside_a_coroutine_is_none)
{
    ck_assert_int_eq(goro_deadline(), GORO_FOREVER);
    ck_assert_int_eq(goro_deadline_push(goro_now()), GORO_FOREVER);
    ck_assert_int_eq(goro_deadline(), GORO_FOREVER);
    goro_deadline_pop(goro_now());
    ck_assert_int_eq(goro_deadline(), GORO_FOREVER);
    ck_assert_int_eq(goro_sleep(0), 0);
}
END_TEST

Suite *inherit_suite(void)
{
    Suite *s = suite_create("inherit");
    TCase *tc = t_runtime_tcase(s, "virtual", 60);
    tcase_add_test(tc, inherit_library_waits_end_at_the_deadline_in_force);
    tcase_add_test(tc, inherit_the_nearer_deadline_wins_and_scopes_nest);
    tcase_add_test(tc, inherit_group_members_three_levels_down);
    tcase_add_test(tc, inherit_not_by_plain_spawns_and_a_cancel_stays_a_cancel);
    tc = t_runtime_tcase(s, "real", 60);
    tcase_add_test(tc, inherit_io_wait_ends_at_the_deadline);
    tcase_add_test(tc, inherit_outside_a_coroutine_is_none);
    tcase_add_test(tc, inherit_dump_shows_the_deadline_in_force);
    tc = t_runtime_tcase(s, "stress", 120);
    tcase_add_test(tc, inherit_stress_random_deadlines_and_cancels);
    return s;
}
