/* I/O from threads that are not coroutines (they block the thread), and
 * detached readers cancelled through their tokens.
 *
 * Part of the io suite (test_io.c registers it). Coroutines never call
 * ck_assert (see helpers.h): they note problems with t_fail() and the
 * test asserts at the end. */
#include "test_io.h"

/* ---- threads that are not coroutines ---- */

static long write_later(int fd, long c)
{
    goro_sleep(20 * GORO_MSEC);
    char b = (char)c;
    return goro_write(fd, &b, 1);
}

static long slow_consumer(int fd, long n)
{
    long got = small_reader(fd, 21);
    if (got != n)
        t_fail("slow consumer: %ld of %ld bytes", got, n);
    return got;
}

static long accept_and_echo(int l)
{
    int fd = goro_accept(l, NULL, NULL);
    if (fd < 0)
        return fd;
    char buf[16];
    ssize_t r = goro_read(fd, buf, sizeof buf);
    if (r > 0)
        goro_write_all(fd, buf, (size_t)r);
    goro_close(fd);
    return r;
}

/* On a thread the runtime does not own, a call that would wait blocks the
 * thread: read, accept, connect, partial writes, wait_fd. */
static void plain_thread_io(void)
{
    int p[2];
    make_pipe(p);
    goro_t *h = go(write_later, p[1], 'w');
    ck_assert_ptr_nonnull(h);
    char c = 0;
    double t0 = t_now();
    ck_assert_int_eq(goro_read(p[0], &c, 1), 1);        /* blocks about 20 ms */
    ck_assert_int_eq(c, 'w');
    ck_assert_msg(t_now() - t0 > 0.015, "read returned before the data was written");
    ck_assert_int_eq(goro_join(h, NULL), 0);
    h = go(write_later, p[1], 'v');
    ck_assert_int_eq(goro_wait_fd(p[0], GORO_READABLE, GORO_FOREVER), GORO_READABLE);
    ck_assert_int_eq(goro_read(p[0], &c, 1), 1);
    ck_assert_int_eq(c, 'v');
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_int_eq(goro_close(p[0]), 0);
    ck_assert_int_eq(goro_close(p[1]), 0);

    /* accept blocks until a coroutine connects */
    struct sockaddr_in a;
    int l = t_tcp_listener(8, &a);
    h = go(connect_to, &a);
    int fd = goro_accept(l, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_close(fd), 0);

    /* connect and a round trip, a coroutine on the other end */
    h = go(accept_and_echo, l);
    fd = goro_socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(goro_connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(goro_write_all(fd, "echo", 4), 4);
    char buf[8];
    ck_assert_int_eq(goro_read_full(fd, buf, 4), 4);
    ck_assert_int_eq(memcmp(buf, "echo", 4), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 4);
    ck_assert_int_eq(goro_close(fd), 0);
    ck_assert_int_eq(goro_close(l), 0);

    /* 4 MiB to a slow coroutine reader: many partial writes, blocking */
    int s[2];
    make_socketpair(SOCK_STREAM, s);
    t_set_bufs(s[0], 32 << 10);
    atomic_store(&reader_go, 1);
    h = go(slow_consumer, s[1], (long)BIG);
    uint8_t *big = xmalloc(BIG);
    fill(big, BIG, 21, 0);
    ck_assert_int_eq(goro_write_all(s[0], big, BIG), BIG);
    ck_assert_int_eq(shutdown(s[0], SHUT_WR), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, BIG);
    free(big);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}

static void *pthread_pingpong(void *arg)
{
    int fd = *(int *)arg;
    long n = t_scale(2000);
    return (void *)(intptr_t)pingpong(fd, n, 1);
}

START_TEST(calls_from_plain_threads)
{
    plain_thread_io();
    ck_assert_msg(!t_failed(), "%s", t_failed());
    /* a pthread in a ping-pong with a coroutine: both sides wait in turn */
    int s[2];
    make_socketpair(SOCK_STREAM, s);
    goro_t *h = go(pingpong, s[1], t_scale(2000), 0L);
    ck_assert_ptr_nonnull(h);
    pthread_t th;
    void *res = (void *)1;
    ck_assert_int_eq(pthread_create(&th, NULL, pthread_pingpong, &s[0]), 0);
    ck_assert_int_eq(pthread_join(th, &res), 0);
    ck_assert_int_eq(goro_join(h, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_ptr_null(res);
    ck_assert_int_eq(goro_close(s[0]), 0);
    ck_assert_int_eq(goro_close(s[1]), 0);
}
END_TEST

/* ---- cancelling detached coroutines through tokens ---- */

static atomic_long token_read_result;
static goro_token_t self_token;      /* published by self_token_set */
static atomic_int self_token_set;

static void read_until_cancelled(int fd)
{
    char b;
    atomic_store(&waiter_in, 1);
    atomic_store(&token_read_result, goro_read(fd, &b, 1));
}

/* Detached, hands out its own token. */
static void read_with_own_token(int fd)
{
    goro_token_t tok;
    if (goro_token(goro_self(), &tok) != 0)
        t_fail("goro_token(goro_self())");
    self_token = tok;
    atomic_store(&self_token_set, 1);
    read_until_cancelled(fd);
}

/* Until the coroutine's end has been seen by its token: -ESRCH. */
static int cancel_until_gone(goro_token_t tok, double timeout_s)
{
    double end = t_now() + timeout_s;
    int r;
    while ((r = goro_cancel_token(tok)) == 0 && t_now() < end)
        t_nap(0.0005);
    return r;
}

static long forty_two(void) { return 42; }

/* A server's reader, detached, stopped without shutdown(2): parked in a
 * read, it wakes with -ECANCELED and consumed nothing; once it has ended
 * the token says -ESRCH. */
START_TEST(cancel_detached_reader)
{
    for (int own = 0; own < 2; own++) {
        int s[2];
        make_socketpair(SOCK_STREAM, s);
        atomic_store(&waiter_in, 0);
        atomic_store(&self_token_set, 0);
        atomic_store(&token_read_result, 1);
        goro_t *h;
        goro_token_t tok;
        if (own) {
            ck_assert_int_eq(goro_go(NULL, NULL, read_with_own_token, s[0]), 0);
            ck_assert(t_wait_flag(&self_token_set, t_timeout(10)));
            tok = self_token;
        } else {
            ck_assert_int_eq(goro_go(&h, NULL, read_until_cancelled, s[0]), 0);
            ck_assert_int_eq(goro_token(h, &tok), 0);
            ck_assert_uint_eq(tok.id, goro_id(h));
            ck_assert_int_eq(goro_detach(h), 0);
        }
        ck_assert(t_wait_flag(&waiter_in, t_timeout(10)));
        t_settle();
        ck_assert_int_eq(atomic_load(&token_read_result), 1);     /* parked */
        double t0 = t_now();
        ck_assert_int_eq(goro_cancel_token(tok), 0);
        while (atomic_load(&token_read_result) == 1 && t_now() - t0 < t_timeout(10))
            t_nap(0.0002);
        ck_assert_msg(t_now() - t0 < t_prompt(), "the cancel took %.3f s", t_now() - t0);
        ck_assert_int_eq(atomic_load(&token_read_result), -ECANCELED);
        ck_assert_int_eq(cancel_until_gone(tok, t_timeout(10)), -ESRCH);
        ck_assert_int_eq(goro_cancel_token(tok), -ESRCH);          /* and stays so */
        /* the descriptor lost nothing */
        ck_assert_int_eq(goro_write(s[1], "x", 1), 1);
        char b = 0;
        ck_assert_int_eq(goro_read(s[0], &b, 1), 1);
        ck_assert_int_eq(b, 'x');
        ck_assert_int_eq(goro_close(s[0]), 0);
        ck_assert_int_eq(goro_close(s[1]), 0);
    }

    /* a coroutine that ended but is not joined: a token is still given,
     * and cancels nothing; bad tokens and handles */
    goro_t *h = go(forty_two);
    ck_assert_ptr_nonnull(h);
    t_settle();
    goro_token_t tok;
    ck_assert_int_eq(goro_token(h, &tok), 0);
    ck_assert_int_eq(cancel_until_gone(tok, t_timeout(10)), -ESRCH);
    long r = 0;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 42);
    ck_assert_int_eq(goro_cancel_token(tok), -ESRCH);
    ck_assert_int_eq(goro_cancel_token((goro_token_t){ 0 }), -EINVAL);
    ck_assert_int_eq(goro_cancel_token((goro_token_t){ .id = tok.id }), -EINVAL);
    ck_assert_int_eq(goro_cancel_token((goro_token_t){ .id = 1, .slot = 1u << 30 }), -EINVAL);
    ck_assert_int_eq(goro_token(NULL, &tok), -EINVAL);
    ck_assert_uint_eq(tok.id, 0);
    ck_assert_int_eq(goro_token(goro_self(), &tok), -EINVAL);  /* a thread, not a coroutine */
    ck_assert_int_eq(goro_token(h, NULL), -EINVAL);
}
END_TEST

/* The race: tokens of detached coroutines are cancelled at random moments
 * - while they run, while they sleep, as they end, after they ended -
 * while new spawns keep reusing their slabs (default stacks go back to the
 * pool) and odd-sized stacks are unmapped as their coroutines end. A
 * cancel must reach its own coroutine or nobody: the bystanders, which no
 * token names, must never see one. Run under ASan, a cancel that touched
 * an unmapped or reused slab shows up too. */
enum { RACE_WINDOW = 64 };

static struct {
    goro_token_t *toks;
    atomic_long published;          /* tokens ready to be cancelled */
    atomic_long handled;            /* tokens the canceller is done with */
    long rounds;
    atomic_long cancel_ok, cancel_gone, victims_cancelled;
    goro_waitgroup_t wg;
} tr;

static void race_victim(long kind, long spin)
{
    bool cancelled = false;
    for (long i = 0; i < spin; i++)
        __asm__ volatile("" ::: "memory");
    if (kind == 1)
        goro_yield();
    if (kind >= 2)
        cancelled = goro_sleep(spin * 10) == -ECANCELED;
    if (cancelled || goro_cancelled())
        atomic_fetch_add(&tr.victims_cancelled, 1);
    goro_waitgroup_done(&tr.wg);
}

static void race_bystander(long spin)
{
    if (spin % 2)
        goro_yield();
    int r = goro_sleep(spin * 10);
    if (r != 0 || goro_cancelled())
        t_fail("a bystander was cancelled (sleep: %d)", r);
    goro_waitgroup_done(&tr.wg);
}

static void *race_canceller(void *arg)
{
    uint32_t rnd = (uint32_t)(uintptr_t)arg;
    for (long i = 0; i < tr.rounds; i++) {
        while (atomic_load(&tr.published) <= i)
            sched_yield();
        for (uint32_t n = t_rnd(&rnd) % 4000; n > 0; n--)
            __asm__ volatile("" ::: "memory");
        int r = goro_cancel_token(tr.toks[i]);
        if (r == 0)
            atomic_fetch_add(&tr.cancel_ok, 1);
        else if (r == -ESRCH)
            atomic_fetch_add(&tr.cancel_gone, 1);
        else
            t_fail("goro_cancel_token: %d", r);
        atomic_store(&tr.handled, i + 1);
    }
    return NULL;
}

START_TEST(cancel_token_races_slab_reuse)
{
    tr.rounds = t_live(20000);
    tr.toks = xmalloc((size_t)tr.rounds * sizeof *tr.toks);
    atomic_store(&tr.published, 0);
    atomic_store(&tr.handled, 0);
    atomic_store(&tr.cancel_ok, 0);
    atomic_store(&tr.cancel_gone, 0);
    atomic_store(&tr.victims_cancelled, 0);
    goro_waitgroup_init(&tr.wg);
    t_fail_reset();
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, race_canceller, (void *)(uintptr_t)7), 0);
    uint32_t rnd = 12345;
    goro_attr_t odd = { .stack_size = 64 * 1024 };   /* unmapped when it ends */
    for (long i = 0; i < tr.rounds; i++) {
        while (i - atomic_load(&tr.handled) >= RACE_WINDOW)
            sched_yield();
        long kind = t_rnd(&rnd) % 4, spin = t_rnd(&rnd) % 3000;
        goro_t *h;
        goro_waitgroup_add(&tr.wg, 2);
        T_CHECK(goro_go(&h, kind == 3 ? &odd : NULL, race_victim, kind, spin) == 0, "spawn");
        T_CHECK(goro_token(h, &tr.toks[i]) == 0, "goro_token");
        T_CHECK(goro_detach(h) == 0, "detach");
        atomic_store(&tr.published, i + 1);
        T_CHECK(goro_go(NULL, NULL, race_bystander, (long)(t_rnd(&rnd) % 3000)) == 0, "spawn");
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(goro_waitgroup_wait(&tr.wg), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    long ok = atomic_load(&tr.cancel_ok), gone = atomic_load(&tr.cancel_gone);
    ck_assert_int_eq(ok + gone, tr.rounds);
    ck_assert_msg(atomic_load(&tr.victims_cancelled) <= ok, "%ld victims saw a cancel, %ld "
                  "cancels reached one", atomic_load(&tr.victims_cancelled), ok);
    /* Both outcomes, so that the race was run; valgrind runs one thread at
     * a time, and qemu nearly so: there every cancel may come first. */
    ck_assert_msg(ok > 0 && (gone > 0 || t_slow()), "cancels that reached a victim %ld, "
                  "too late %ld", ok, gone);
    /* every victim has ended: its token says so, whatever its slab does now */
    for (long i = 0; i < tr.rounds; i++)
        T_CHECK(cancel_until_gone(tr.toks[i], t_timeout(10)) == -ESRCH, "token %ld", i);
    free(tr.toks);
}
END_TEST

/* Adds this file's tests to the io suite's test cases (test_io.h). */
void io_threads_tests(struct io_tcases *tc)
{
    tcase_add_test(tc->io, calls_from_plain_threads);
    tcase_add_test(tc->cancel_detached, cancel_detached_reader);
    tcase_add_test(tc->cancel_detached, cancel_token_races_slab_reuse);
}
