/* Mutex, rwlock, condition variable, semaphore, wait group and once, used
 * by coroutines spread over the workers (and by plain threads). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "helpers.h"
#include "suites.h"

/* Runs fn(arg) on n coroutines and joins them all. */
static void run_coroutines(int n, void (*fn)(long), long arg_base)
{
    goro_t *h[256];
    ck_assert_int_le(n, 256);
    for (int i = 0; i < n; i++) {
        h[i] = go(fn, arg_base + i);
        ck_assert_ptr_nonnull(h[i]);
    }
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
}

/* ---- mutex ---- */

static goro_mutex_t mu = GORO_MUTEX_INIT;
static long plain_counter;          /* guarded by mu, deliberately not atomic */
static atomic_int inside;
static long mutex_iters;

static void mutex_worker(long seed)
{
    uint32_t r = (uint32_t)seed * 2654435761u + 1;
    for (long i = 0; i < mutex_iters; i++) {
        if (goro_mutex_lock(&mu) != 0) {
            t_fail("goro_mutex_lock failed");
            return;
        }
        if (atomic_fetch_add(&inside, 1) != 0)
            t_fail("two holders of the mutex at once");
        long c = plain_counter;
        if (t_rnd(&r) % 8 == 0)
            goro_yield();           /* keep it locked across a switch */
        plain_counter = c + 1;
        atomic_fetch_sub(&inside, 1);
        if (goro_mutex_unlock(&mu) != 0) {
            t_fail("goro_mutex_unlock failed");
            return;
        }
        if (t_rnd(&r) % 4 == 0)
            goro_yield();
    }
}

static void *mutex_thread(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        goro_mutex_lock(&mu);
        if (atomic_fetch_add(&inside, 1) != 0)
            t_fail("two holders of the mutex at once (thread)");
        plain_counter++;
        atomic_fetch_sub(&inside, 1);
        goro_mutex_unlock(&mu);
    }
    return NULL;
}

START_TEST(mutex_counter_exact_under_contention)
{
    enum { N = 16, THREADS = 2 };
    ck_assert_int_eq(goro_mutex_init(&mu), 0);
    plain_counter = 0;
    atomic_store(&inside, 0);
    mutex_iters = t_scale(20000);
    long per_thread = t_scale(5000);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, mutex_thread, (void *)per_thread), 0);
    run_coroutines(N, mutex_worker, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(plain_counter, N * mutex_iters + THREADS * per_thread);
    ck_assert_int_eq(goro_mutex_destroy(&mu), 0);
}
END_TEST

static int unlock_it(goro_mutex_t *m) { return goro_mutex_unlock(m); }

START_TEST(mutex_errors)
{
    goro_mutex_t m;
    ck_assert_int_eq(goro_mutex_init(&m), 0);
    ck_assert_int_eq(goro_mutex_unlock(&m), -EPERM);
    ck_assert_int_eq(goro_mutex_trylock(&m), 0);
    ck_assert_int_eq(goro_mutex_trylock(&m), -EBUSY);
    ck_assert_int_eq(goro_mutex_destroy(&m), -EBUSY);
    ck_assert_int_eq(goro_mutex_unlock(&m), 0);
    ck_assert_int_eq(goro_mutex_unlock(&m), -EPERM);
    ck_assert_int_eq(goro_mutex_trylock(&m), 0);    /* it is free again */
    /* any coroutine may unlock it */
    long r = -1;
    ck_assert_int_eq(goro_join(go(unlock_it, &m), &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_mutex_lock(&m), 0);
    ck_assert_int_eq(goro_mutex_unlock(&m), 0);
    ck_assert_int_eq(goro_mutex_destroy(&m), 0);
    goro_mutex_t s = GORO_MUTEX_INIT;
    ck_assert_int_eq(goro_mutex_trylock(&s), 0);
    ck_assert_int_eq(goro_mutex_unlock(&s), 0);

    ck_assert_int_eq(goro_mutex_init(NULL), -EINVAL);
    ck_assert_int_eq(goro_mutex_lock(NULL), -EINVAL);
    ck_assert_int_eq(goro_mutex_trylock(NULL), -EINVAL);
    ck_assert_int_eq(goro_mutex_unlock(NULL), -EINVAL);
    ck_assert_int_eq(goro_mutex_destroy(NULL), -EINVAL);
}
END_TEST

/* ---- rwlock ---- */

static goro_rwlock_t rw;
static atomic_long readers_in, writers_in, max_readers;
static atomic_int rw_stop;
static double rw_deadline;
static long shared_a, shared_b;     /* writers keep a == b; readers check */
static long rw_iters;

/* Holds a read lock without yielding until another reader is seen inside
 * at the same time (only possible on another worker) or time runs out. */
static void parallel_reader(long id)
{
    (void)id;
    if (goro_rwlock_rdlock(&rw) != 0) {
        t_fail("rdlock failed");
        return;
    }
    long n = atomic_fetch_add(&readers_in, 1) + 1;
    t_max_update(&max_readers, n);
    while (atomic_load(&max_readers) < 2 && t_now() < rw_deadline)
        ;
    atomic_fetch_sub(&readers_in, 1);
    goro_rwlock_unlock(&rw);
}

START_TEST(rwlock_readers_run_in_parallel)
{
    ck_assert_int_ge(goro_workers(), 2);
    ck_assert_int_eq(goro_rwlock_init(&rw), 0);
    atomic_store(&readers_in, 0);
    atomic_store(&max_readers, 0);
    rw_deadline = t_now() + t_timeout(3);
    run_coroutines(8, parallel_reader, 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(atomic_load(&max_readers) >= 2,
                  "readers on two workers never held the lock together");
    ck_assert_int_eq(goro_rwlock_destroy(&rw), 0);
}
END_TEST

static void rw_mixed(long id)
{
    uint32_t r = (uint32_t)id * 2246822519u + 7;
    bool writer = id % 4 == 0;
    for (long i = 0; i < rw_iters; i++) {
        if (writer) {
            goro_rwlock_wrlock(&rw);
            if (atomic_fetch_add(&writers_in, 1) != 0 || atomic_load(&readers_in) != 0)
                t_fail("writer not alone: %ld writers, %ld readers",
                       atomic_load(&writers_in), atomic_load(&readers_in));
            shared_a++;
            if (t_rnd(&r) % 4 == 0)
                goro_yield();
            shared_b++;
            atomic_fetch_sub(&writers_in, 1);
            goro_rwlock_unlock(&rw);
        } else {
            goro_rwlock_rdlock(&rw);
            atomic_fetch_add(&readers_in, 1);
            if (atomic_load(&writers_in) != 0)
                t_fail("reader inside with a writer");
            long a = shared_a;
            if (t_rnd(&r) % 4 == 0)
                goro_yield();
            long b = shared_b;
            if (a != b || shared_a != a)
                t_fail("reader saw a torn update: a %ld, b %ld", a, b);
            atomic_fetch_sub(&readers_in, 1);
            goro_rwlock_unlock(&rw);
        }
        if (t_rnd(&r) % 3 == 0)
            goro_yield();
    }
}

START_TEST(rwlock_writers_exclusive)
{
    enum { N = 16 };            /* 4 writers, 12 readers */
    ck_assert_int_eq(goro_rwlock_init(&rw), 0);
    atomic_store(&readers_in, 0);
    atomic_store(&writers_in, 0);
    shared_a = shared_b = 0;
    rw_iters = t_scale(10000);
    run_coroutines(N, rw_mixed, 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(shared_a, 4 * rw_iters);
    ck_assert_int_eq(shared_b, 4 * rw_iters);
    ck_assert_int_eq(goro_rwlock_destroy(&rw), 0);
}
END_TEST

static atomic_long reads_done;

/* Overlapping readers: each yields while holding the lock, so the lock is
 * never free of readers as long as new ones may enter. */
static void stream_reader(long id)
{
    (void)id;
    while (!atomic_load(&rw_stop)) {
        goro_rwlock_rdlock(&rw);
        goro_yield();
        atomic_fetch_add(&reads_done, 1);
        goro_rwlock_unlock(&rw);
    }
}

static atomic_int writer_got;

static void lone_writer(void)
{
    goro_rwlock_wrlock(&rw);
    atomic_store(&writer_got, 1);
    goro_rwlock_unlock(&rw);
}

START_TEST(rwlock_writer_not_starved_by_readers)
{
    enum { R = 8 };
    ck_assert_int_eq(goro_rwlock_init(&rw), 0);
    atomic_store(&rw_stop, 0);
    atomic_store(&reads_done, 0);
    atomic_store(&writer_got, 0);
    goro_t *h[R];
    for (int i = 0; i < R; i++)
        ck_assert_ptr_nonnull(h[i] = go(stream_reader, (long)i));
    t_wait_at_least(&reads_done, 1000, t_timeout(10));
    goro_t *w = go(lone_writer);
    ck_assert_ptr_nonnull(w);
    int got = t_wait_flag(&writer_got, t_timeout(5));
    long reads = atomic_load(&reads_done);
    atomic_store(&rw_stop, 1);              /* let it through in any case */
    for (int i = 0; i < R; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_int_eq(goro_join(w, NULL), 0);
    ck_assert_msg(got, "writer waited 5 s behind a stream of readers (%ld reads)", reads);
    ck_assert_int_eq(goro_rwlock_destroy(&rw), 0);
}
END_TEST

static int write_once(goro_rwlock_t *l)
{
    int e = goro_rwlock_wrlock(l);
    atomic_store(&writer_got, 1);
    return e ? e : goro_rwlock_unlock(l);
}

START_TEST(rwlock_errors)
{
    goro_rwlock_t l;
    ck_assert_int_eq(goro_rwlock_init(&l), 0);
    ck_assert_int_eq(goro_rwlock_unlock(&l), -EPERM);
    ck_assert_int_eq(goro_rwlock_tryrdlock(&l), 0);
    ck_assert_int_eq(goro_rwlock_tryrdlock(&l), 0);
    ck_assert_int_eq(goro_rwlock_trywrlock(&l), -EBUSY);
    ck_assert_int_eq(goro_rwlock_destroy(&l), -EBUSY);
    ck_assert_int_eq(goro_rwlock_unlock(&l), 0);
    ck_assert_int_eq(goro_rwlock_unlock(&l), 0);
    ck_assert_int_eq(goro_rwlock_unlock(&l), -EPERM);
    ck_assert_int_eq(goro_rwlock_trywrlock(&l), 0);
    ck_assert_int_eq(goro_rwlock_tryrdlock(&l), -EBUSY);
    ck_assert_int_eq(goro_rwlock_trywrlock(&l), -EBUSY);
    ck_assert_int_eq(goro_rwlock_destroy(&l), -EBUSY);
    ck_assert_int_eq(goro_rwlock_unlock(&l), 0);
    ck_assert_int_eq(goro_rwlock_unlock(&l), -EPERM);

    /* a waiting writer holds back new readers */
    ck_assert_int_eq(goro_rwlock_rdlock(&l), 0);
    atomic_store(&writer_got, 0);
    goro_t *h = go(write_once, &l);
    ck_assert_ptr_nonnull(h);
    /* tryrdlock succeeds (and is undone) until the writer has queued */
    double end = t_now() + t_timeout(10);
    int e;
    while ((e = goro_rwlock_tryrdlock(&l)) == 0 && t_now() < end) {
        ck_assert_int_eq(goro_rwlock_unlock(&l), 0);
        t_nap(0.0005);
    }
    ck_assert_int_eq(e, -EBUSY);
    ck_assert_int_eq(atomic_load(&writer_got), 0);
    ck_assert_int_eq(goro_rwlock_destroy(&l), -EBUSY);
    ck_assert_int_eq(goro_rwlock_unlock(&l), 0);     /* the writer gets it */
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(atomic_load(&writer_got), 1);
    ck_assert_int_eq(goro_rwlock_trywrlock(&l), 0);  /* and released it */
    ck_assert_int_eq(goro_rwlock_unlock(&l), 0);
    ck_assert_int_eq(goro_rwlock_destroy(&l), 0);

    ck_assert_int_eq(goro_rwlock_init(NULL), -EINVAL);
    ck_assert_int_eq(goro_rwlock_rdlock(NULL), -EINVAL);
    ck_assert_int_eq(goro_rwlock_wrlock(NULL), -EINVAL);
    ck_assert_int_eq(goro_rwlock_unlock(NULL), -EINVAL);
    ck_assert_int_eq(goro_rwlock_destroy(NULL), -EINVAL);
}
END_TEST

/* ---- condition variable ---- */

enum { QCAP = 4 };
static struct {
    goro_mutex_t mu;
    goro_cond_t not_full, not_empty;
    long buf[QCAP];
    int head, count;
    bool done;
} q;
static atomic_long consumed_sum, consumed_n;
static long pc_items;

static void cv_producer(long id)
{
    for (long i = 0; i < pc_items; i++) {
        long item = id * pc_items + i + 1;
        goro_mutex_lock(&q.mu);
        while (q.count == QCAP)
            goro_cond_wait(&q.not_full, &q.mu);
        q.buf[(q.head + q.count) % QCAP] = item;
        q.count++;
        goro_cond_signal(&q.not_empty);
        goro_mutex_unlock(&q.mu);
    }
}

static void cv_consumer(long id)
{
    (void)id;
    for (;;) {
        goro_mutex_lock(&q.mu);
        while (q.count == 0 && !q.done)
            goro_cond_wait(&q.not_empty, &q.mu);
        if (q.count == 0) {                 /* done and drained */
            goro_mutex_unlock(&q.mu);
            return;
        }
        long item = q.buf[q.head];
        q.head = (q.head + 1) % QCAP;
        q.count--;
        goro_cond_signal(&q.not_full);
        goro_mutex_unlock(&q.mu);
        atomic_fetch_add(&consumed_sum, item);
        atomic_fetch_add(&consumed_n, 1);
    }
}

START_TEST(cond_producer_consumer)
{
    enum { P = 4, C = 3 };
    memset(&q, 0, sizeof q);
    ck_assert_int_eq(goro_mutex_init(&q.mu), 0);
    ck_assert_int_eq(goro_cond_init(&q.not_full), 0);
    ck_assert_int_eq(goro_cond_init(&q.not_empty), 0);
    atomic_store(&consumed_sum, 0);
    atomic_store(&consumed_n, 0);
    pc_items = t_scale(20000);
    goro_t *prod[P], *cons[C];
    for (int i = 0; i < C; i++)
        ck_assert_ptr_nonnull(cons[i] = go(cv_consumer, (long)i));
    for (int i = 0; i < P; i++)
        ck_assert_ptr_nonnull(prod[i] = go(cv_producer, (long)i));
    for (int i = 0; i < P; i++)
        ck_assert_int_eq(goro_join(prod[i], NULL), 0);
    ck_assert_int_eq(goro_mutex_lock(&q.mu), 0);
    q.done = true;
    ck_assert_int_eq(goro_cond_broadcast(&q.not_empty), 0);
    ck_assert_int_eq(goro_mutex_unlock(&q.mu), 0);
    for (int i = 0; i < C; i++)
        ck_assert_int_eq(goro_join(cons[i], NULL), 0);
    long n = P * pc_items;
    ck_assert_int_eq(atomic_load(&consumed_n), n);
    ck_assert_int_eq(atomic_load(&consumed_sum), n * (n + 1) / 2);
    ck_assert_int_eq(goro_cond_destroy(&q.not_full), 0);
    ck_assert_int_eq(goro_cond_destroy(&q.not_empty), 0);
    ck_assert_int_eq(goro_mutex_destroy(&q.mu), 0);
}
END_TEST

static goro_mutex_t cmu;
static goro_cond_t cv;
static int nwaiting;                /* under cmu */
static long tokens;                 /* under cmu */
static bool released;               /* under cmu */
static atomic_long wakeups, finished;

/* Counts itself as waiting, under cmu: once the main thread holds cmu and
 * sees all of them counted, all are queued on cv (goro_cond_wait queues
 * before it lets go of the mutex). */
static void cv_token_waiter(long id)
{
    (void)id;
    goro_mutex_lock(&cmu);
    nwaiting++;
    while (tokens == 0 && !released) {
        goro_cond_wait(&cv, &cmu);
        atomic_fetch_add(&wakeups, 1);
    }
    if (tokens > 0)
        tokens--;
    nwaiting--;
    goro_mutex_unlock(&cmu);
    atomic_fetch_add(&finished, 1);
}

static bool all_waiting(int k, double timeout)
{
    double end = t_now() + timeout;
    for (;;) {
        goro_mutex_lock(&cmu);
        int n = nwaiting;
        goro_mutex_unlock(&cmu);
        if (n == k)
            return true;
        if (t_now() > end)
            return false;
        t_nap(0.0002);
    }
}

static void release_all(void)
{
    goro_mutex_lock(&cmu);
    released = true;
    goro_cond_broadcast(&cv);
    goro_mutex_unlock(&cmu);
}

START_TEST(cond_signal_wakes_one_broadcast_all)
{
    enum { K = 6 };
    ck_assert_int_eq(goro_mutex_init(&cmu), 0);
    ck_assert_int_eq(goro_cond_init(&cv), 0);
    nwaiting = 0;
    tokens = 0;
    released = false;
    atomic_store(&wakeups, 0);
    atomic_store(&finished, 0);
    goro_t *h[K];
    for (int i = 0; i < K; i++)
        ck_assert_ptr_nonnull(h[i] = go(cv_token_waiter, (long)i));
    bool queued = all_waiting(K, t_timeout(10));
    if (!queued)
        release_all();
    ck_assert_msg(queued, "waiters never all reached goro_cond_wait");
    ck_assert_int_eq(goro_cond_destroy(&cv), -EBUSY);

    /* signal: one token, one waiter woken, no more */
    for (int round = 1; round <= 2; round++) {
        goro_mutex_lock(&cmu);
        tokens++;
        goro_cond_signal(&cv);
        goro_mutex_unlock(&cmu);
        long f = t_wait_at_least(&finished, round, t_timeout(5));
        t_nap(t_timeout(0.02));
        long w = atomic_load(&wakeups);
        if (f != round || w != round)
            release_all();
        ck_assert_msg(f == round, "signal %d: %ld waiters finished", round, f);
        ck_assert_msg(w == round, "signal %d: %ld wake-ups, want %d", round, w, round);
    }
    ck_assert(all_waiting(K - 2, t_timeout(5)));

    /* broadcast: every remaining waiter wakes */
    release_all();
    long f = t_wait_at_least(&finished, K, t_timeout(5));
    ck_assert_msg(f == K, "broadcast: %ld of %d waiters finished", f, K);
    ck_assert_int_eq(atomic_load(&wakeups), K);
    for (int i = 0; i < K; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_int_eq(goro_cond_destroy(&cv), 0);
    ck_assert_int_eq(goro_mutex_destroy(&cmu), 0);

    /* errors */
    goro_mutex_t unlocked = GORO_MUTEX_INIT;
    ck_assert_int_eq(goro_cond_wait(&cv, &unlocked), -EPERM);
    ck_assert_int_eq(goro_cond_wait(NULL, &unlocked), -EINVAL);
    ck_assert_int_eq(goro_cond_wait(&cv, NULL), -EINVAL);
    ck_assert_int_eq(goro_cond_signal(NULL), -EINVAL);
    ck_assert_int_eq(goro_cond_broadcast(NULL), -EINVAL);
    ck_assert_int_eq(goro_cond_signal(&cv), 0);       /* nobody waits: no-op */
    ck_assert_int_eq(goro_cond_broadcast(&cv), 0);
}
END_TEST

/* ---- semaphore ---- */

static goro_sem_t sem;
static atomic_long sem_inside, sem_max;
static goro_chan_t *sem_gate;       /* closed once all tasks exist */

static void sem_task(long id)
{
    uint32_t r = (uint32_t)id * 747796405u + 1;
    /* start together, so that there is a crowd at the semaphore (spawned
     * one by one, each could be done before the next exists) */
    if (goro_chan_recv(sem_gate, NULL) != 0)
        t_fail("sem_task: gate");
    if (goro_sem_acquire(&sem) != 0) {
        t_fail("sem_acquire failed");
        return;
    }
    long n = atomic_fetch_add(&sem_inside, 1) + 1;
    t_max_update(&sem_max, n);
    /* Until 3 have been inside at once, a holder waits (100 ms at most)
     * for the others: woken one by one by a slow host, each task could
     * otherwise be out again before the third got in. A semaphore that
     * admits fewer than 3 still leaves the maximum short. */
    for (int w = 0; atomic_load(&sem_max) < 3 && w < 200; w++)
        goro_sleep(GORO_MSEC / 2);
    for (int i = 0, k = 1 + (int)(t_rnd(&r) % 8); i < k; i++) {
        for (volatile int s = 0; s < 200; s++)
            ;
        goro_yield();
    }
    atomic_fetch_sub(&sem_inside, 1);
    goro_sem_release(&sem);
}

START_TEST(sem_bounds_parallelism)
{
    ck_assert_int_eq(goro_sem_init(&sem, 3), 0);
    atomic_store(&sem_inside, 0);
    atomic_store(&sem_max, 0);
    ck_assert_int_eq(goro_chan_new(&sem_gate, 0, 0), 0);
    goro_t *h[100];
    for (int i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(h[i] = go(sem_task, (long)i));
    ck_assert_int_eq(goro_chan_close(sem_gate), 0);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_msg(atomic_load(&sem_max) <= 3, "%ld inside a semaphore of 3",
                  atomic_load(&sem_max));
    ck_assert_msg(atomic_load(&sem_max) == 3, "never 3 inside (max %ld)",
                  atomic_load(&sem_max));
    /* all 3 units are back */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(goro_sem_try_acquire(&sem), 0);
    ck_assert_int_eq(goro_sem_try_acquire(&sem), -EAGAIN);
    ck_assert_int_eq(goro_sem_destroy(&sem), 0);
    ck_assert_int_eq(goro_chan_free(sem_gate), 0);
}
END_TEST

static int acquire_it(goro_sem_t *s) { return goro_sem_acquire(s); }

START_TEST(sem_errors_and_waiters)
{
    goro_sem_t s;
    ck_assert_int_eq(goro_sem_init(&s, -1), -EINVAL);
    ck_assert_int_eq(goro_sem_init(NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_sem_init(&s, 1), 0);
    ck_assert_int_eq(goro_sem_try_acquire(&s), 0);
    ck_assert_int_eq(goro_sem_try_acquire(&s), -EAGAIN);
    ck_assert_int_eq(goro_sem_release(&s), 0);
    ck_assert_int_eq(goro_sem_try_acquire(&s), 0);
    /* a coroutine waits; destroy reports it; a release hands it the unit */
    goro_t *h = go(acquire_it, &s);
    ck_assert_ptr_nonnull(h);
    double end = t_now() + t_timeout(10);
    int e;
    while ((e = goro_sem_destroy(&s)) == 0 && t_now() < end)
        t_nap(0.0005);
    ck_assert_int_eq(e, -EBUSY);
    ck_assert_int_eq(goro_sem_release(&s), 0);
    long r = -1;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_sem_try_acquire(&s), -EAGAIN);   /* handed over, not counted */
    ck_assert_int_eq(goro_sem_destroy(&s), 0);
    ck_assert_int_eq(goro_sem_acquire(NULL), -EINVAL);
    ck_assert_int_eq(goro_sem_try_acquire(NULL), -EINVAL);
    ck_assert_int_eq(goro_sem_release(NULL), -EINVAL);
}
END_TEST

/* ---- wait group ---- */

static goro_waitgroup_t wg;
static atomic_long wg_done_count;

static void wg_member(long i)
{
    (void)i;
    atomic_fetch_add(&wg_done_count, 1);
    if (goro_waitgroup_done(&wg) != 0)
        t_fail("waitgroup_done failed");
}

static atomic_long wg_waiters_saw;

static void wg_waiter(long n)
{
    if (goro_waitgroup_wait(&wg) != 0)
        t_fail("waitgroup_wait failed");
    if (atomic_load(&wg_done_count) != n)
        t_fail("waiter returned with %ld of %ld members done",
               atomic_load(&wg_done_count), n);
    atomic_fetch_add(&wg_waiters_saw, 1);
}

START_TEST(waitgroup_many_members)
{
    long n = t_live(100000);
    const long in_flight = 8192;    /* stack mappings: see test_spawn.c */
    ck_assert_int_eq(goro_waitgroup_init(&wg), 0);
    atomic_store(&wg_done_count, 0);
    atomic_store(&wg_waiters_saw, 0);
    ck_assert_int_eq(goro_waitgroup_add(&wg, n), 0);
    goro_t *w[3];
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(w[i] = go(wg_waiter, n));
    for (long i = 0; i < n; i++) {
        if (i - atomic_load(&wg_done_count) >= in_flight)
            t_wait_at_least(&wg_done_count, i - in_flight / 2, t_timeout(30));
        int e = goro_go(NULL, NULL, wg_member, i);
        T_CHECK(e == 0, "goro_go #%ld: %d", i, e);
    }
    ck_assert_int_eq(goro_waitgroup_wait(&wg), 0);
    ck_assert_int_eq(atomic_load(&wg_done_count), n);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(goro_join(w[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&wg_waiters_saw), 3);
    ck_assert_int_eq(goro_waitgroup_wait(&wg), 0);      /* count 0: at once */
    ck_assert_int_eq(goro_waitgroup_destroy(&wg), 0);
}
END_TEST

START_TEST(waitgroup_negative_count)
{
    goro_waitgroup_t g = GORO_WAITGROUP_INIT;
    ck_assert_int_eq(goro_waitgroup_done(&g), -EINVAL);
    ck_assert_int_eq(goro_waitgroup_add(&g, -1), -EINVAL);
    ck_assert_int_eq(goro_waitgroup_add(&g, 2), 0);
    ck_assert_int_eq(goro_waitgroup_add(&g, -3), -EINVAL);   /* refused whole */
    ck_assert_int_eq(goro_waitgroup_done(&g), 0);
    ck_assert_int_eq(goro_waitgroup_done(&g), 0);
    ck_assert_int_eq(goro_waitgroup_wait(&g), 0);            /* 2 - 1 - 1 = 0 */
    ck_assert_int_eq(goro_waitgroup_done(&g), -EINVAL);
    ck_assert_int_eq(goro_waitgroup_add(&g, 0), 0);
    ck_assert_int_eq(goro_waitgroup_add(NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_waitgroup_wait(NULL), -EINVAL);
    ck_assert_int_eq(goro_waitgroup_destroy(&g), 0);
}
END_TEST

/* ---- once ---- */

static goro_once_t once;
static atomic_int once_runs, once_finished;
static atomic_long once_callers_in;

static void once_fn(void)
{
    atomic_fetch_add(&once_runs, 1);
    /* take a while, switching, so that the other callers arrive meanwhile */
    double end = t_now() + t_timeout(0.02);
    while (atomic_load(&once_callers_in) < 100 && t_now() < end)
        goro_yield();
    for (int i = 0; i < 50; i++)
        goro_yield();
    atomic_store(&once_finished, 1);
}

static void once_caller(long i)
{
    (void)i;
    atomic_fetch_add(&once_callers_in, 1);
    int e = goro_once(&once, once_fn);
    if (e != 0)
        t_fail("goro_once returned %d", e);
    if (!atomic_load(&once_finished))
        t_fail("goro_once returned before fn finished");
}

START_TEST(once_runs_exactly_once)
{
    once = (goro_once_t)GORO_ONCE_INIT;
    atomic_store(&once_runs, 0);
    atomic_store(&once_finished, 0);
    atomic_store(&once_callers_in, 0);
    goro_t *h[100];
    for (int i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(h[i] = go(once_caller, (long)i));
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(goro_join(h[i], NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&once_runs), 1);
    ck_assert_int_eq(goro_once(&once, once_fn), 0);       /* from a thread, later */
    ck_assert_int_eq(atomic_load(&once_runs), 1);
    ck_assert_int_eq(goro_once(NULL, once_fn), -EINVAL);
    ck_assert_int_eq(goro_once(&once, NULL), -EINVAL);
}
END_TEST

/* An init function that calls goro_once on its own once object would wait
 * for itself: the inner call must fail with -EDEADLK at once, and the outer
 * one complete. Run in a child process: the hang this guards against is
 * not cancellable (once waits are firm), so only a kill ends it. */
static goro_once_t rec_once;
static int rec_runs, rec_inner;

static void recursive_init(void)
{
    rec_runs++;
    rec_inner = goro_once(&rec_once, recursive_init);
}

/* "outer=0 inner=-35 runs=1": what one recursive goro_once did. */
static int once_recursion_report(const char *who)
{
    rec_once = (goro_once_t)GORO_ONCE_INIT;
    rec_runs = 0;
    rec_inner = 1;
    int outer = goro_once(&rec_once, recursive_init);
    int again = goro_once(&rec_once, recursive_init);
    printf("%s: outer=%d inner=%d runs=%d again=%d\n", who, outer, rec_inner, rec_runs,
           again);
    return outer == 0 && rec_inner == -EDEADLK && rec_runs == 1 && again == 0 ? 0 : 1;
}

static int once_recursion_in_coroutine(void)
{
    return once_recursion_report("coroutine");
}

/* arg: the caller is a coroutine (non-NULL) or the child's own thread. */
static int once_recursion_child(void *in_coroutine)
{
    if (!in_coroutine)
        return once_recursion_report("thread");
    long r = 1;
    goro_t *h = go(once_recursion_in_coroutine);
    if (!h || goro_join(h, &r) != 0)
        return 2;
    return (int)r;
}

START_TEST(once_recursion_is_edeadlk)
{
    static const char *const who[] = { "a thread", "a coroutine" };
    for (int i = 0; i < 2; i++) {
        char out[1024];
        int st = t_run_child(once_recursion_child, i ? &rec_once : NULL, t_timeout(5),
                             out, sizeof out);
        ck_assert_msg(st != -1, "a recursive goro_once from %s hung (child killed after "
                      "%.0f s); output: %s", who[i], t_timeout(5), out);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "recursive goro_once from %s: status %#x, output: %s", who[i], st, out);
    }
}
END_TEST

/* After goro_shutdown, plain threads still use goro's sync objects: one
 * waits for a goro_once the other runs. Waking it went through the
 * scheduler's idle list, left pointing at the freed workers. */
static goro_once_t after_once = GORO_ONCE_INIT;
static atomic_int after_runs;

static void after_fn(void)
{
    t_nap(0.05);
    atomic_fetch_add(&after_runs, 1);
}

static void *after_thread(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)goro_once(&after_once, after_fn);
}

static int after_shutdown_child(void *arg)
{
    (void)arg;
    goro_t *h = go(after_fn);       /* a runtime that ran, with idle workers */
    if (!h || goro_join(h, NULL) != 0 || goro_shutdown() != 0)
        return 90;
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&t[i], NULL, after_thread, NULL) != 0)
            return 91;
        t_nap(0.01);                /* the second one waits for the first */
    }
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r)
            return 92;
    }
    return atomic_load(&after_runs) == 2 ? 0 : 93;
}

START_TEST(once_between_threads_after_shutdown)
{
    char out[512];
    int st = t_run_child(after_shutdown_child, NULL, t_timeout(10), out, sizeof out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
}
END_TEST

/* ---- a lock whose holder has ended ----
 * A coroutine locks and ends without unlocking; its stack is unmapped at
 * once (an odd size is not pooled, and GORO_STACK_GUARD=mprotect gives
 * each stack a mapping of its own). The lock stays locked (as in Go); a
 * HIGH waiter that lends the holder its class, and anyone's unlock, must
 * not touch the ended holder's record. In a child: on failure it crashes. */
static goro_mutex_t ended_mu;
static goro_rwlock_t ended_rw;
static atomic_int ended_waiting, ended_got;

static long lock_and_end(void *arg)
{
    (void)arg;
    if (goro_priority_set(GORO_PRIORITY_LOW) != 0 || goro_mutex_lock(&ended_mu) != 0 ||
        goro_rwlock_wrlock(&ended_rw) != 0)
        return 1;
    return 0;                       /* ends holding both */
}

static long wait_for_ended(void *arg)
{
    (void)arg;
    atomic_store(&ended_waiting, 1);
    int e = goro_mutex_lock(&ended_mu);
    int e2 = e ? e : goro_rwlock_wrlock(&ended_rw);
    atomic_store(&ended_got, 1);
    if (!e2)
        e2 = goro_rwlock_wunlock(&ended_rw);
    if (!e)
        e = goro_mutex_unlock(&ended_mu);
    return e ? e : e2;
}

/* Spawns a holder that ends holding both locks and joins it (its stack
 * goes then). */
static int ended_holder(void)
{
    goro_t *h;
    long r = -1;
    goro_attr_t odd = { .stack_size = 64 * 1024 };
    if (goro_spawn(&h, &odd, lock_and_end, NULL) != 0 || goro_join(h, &r) != 0 || r != 0)
        return 1;
    return 0;
}

static int ended_holder_child(void *arg)
{
    (void)arg;
    setenv("GORO_STACK_GUARD", "mprotect", 1);    /* a freed odd slab is unmapped */
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0)
        return 10;
    goro_mutex_init(&ended_mu);
    goro_rwlock_init(&ended_rw);
    /* 1. Anyone unlocks what an ended holder locked (Go's rule). */
    if (ended_holder() != 0)
        return 11;
    printf("trylock %d trywrlock %d\n", goro_mutex_trylock(&ended_mu),
           goro_rwlock_trywrlock(&ended_rw));
    if (goro_mutex_unlock(&ended_mu) != 0 || goro_rwlock_wunlock(&ended_rw) != 0)
        return 12;
    /* 2. A HIGH waiter lends its class to the ended holder's lock. */
    if (ended_holder() != 0)
        return 13;
    goro_t *w;
    if (goro_spawn(&w, &(goro_attr_t){ .priority = GORO_PRIORITY_HIGH }, wait_for_ended,
                   NULL) != 0)
        return 14;
    while (!atomic_load(&ended_waiting))
        t_nap(0.001);
    t_settle();                     /* it waits for the mutex now */
    if (atomic_load(&ended_got))
        return 15;                  /* the lock did not stay locked */
    if (goro_mutex_unlock(&ended_mu) != 0)
        return 16;
    t_settle();
    if (goro_rwlock_wunlock(&ended_rw) != 0)
        return 17;
    long r = -1;
    if (goro_join(w, &r) != 0 || r != 0)
        return 18;
    if (goro_mutex_destroy(&ended_mu) != 0 || goro_rwlock_destroy(&ended_rw) != 0)
        return 19;
    puts("ok");
    return goro_shutdown() == 0 ? 0 : 20;
}

START_TEST(lock_of_an_ended_holder_stays_locked_and_is_safe)
{
    char out[4096];
    int st = t_run_child(ended_holder_child, NULL, t_timeout(20), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
    ck_assert_msg(strstr(out, "trylock -16 trywrlock -16\n"), "%s", out);
}
END_TEST

/* ---- a once whose fn ends its coroutine ----
 * fn ends the coroutine (goro_exit, or goro_exit_err from deeper down)
 * while callers wait: the once counts as done (as Go's with a panic), the
 * waiters return 0 at once, and a later caller - its coroutine likely on
 * the ended runner's stack - returns 0 without running anything. In a
 * child: on the old code the waiters hung for ever. */
static goro_once_t end_once;
static atomic_int end_started, end_release, end_never;
static int end_how;                 /* 0: goro_exit, 1: goro_exit_err */

static T_NOINLINE void end_here(void)
{
    if (end_how)
        goro_exit_err(goro_err_new(EIO, "fn failed"));
    goro_exit(7);
}

/* Frames between fn and the exit. */
static T_NOINLINE void end_deep(int depth)
{
    void (*volatile next)(void) = end_here;
    if (depth > 0)
        end_deep(depth - 1);
    else
        next();
    t_fail("fn went on after goro_exit");
}

static void end_fn(void)
{
    atomic_store(&end_started, 1);
    while (!atomic_load(&end_release))
        goro_sleep(GORO_MSEC);
    end_deep(3);
}

static void never_fn(void)
{
    atomic_fetch_add(&end_never, 1);
}

static long end_runner(void *arg)
{
    (void)arg;
    goro_once(&end_once, end_fn);
    return 99;                      /* not reached */
}

static long end_waiter(void *arg)
{
    (void)arg;
    return goro_once(&end_once, never_fn);
}

static int once_end_round(int how)
{
    end_once = (goro_once_t)GORO_ONCE_INIT;
    end_how = how;
    atomic_store(&end_started, 0);
    atomic_store(&end_release, 0);
    atomic_store(&end_never, 0);
    goro_t *run, *w[3], *later;
    if (goro_spawn(&run, NULL, end_runner, NULL) != 0)
        return 1;
    while (!atomic_load(&end_started))
        t_nap(0.001);
    for (int i = 0; i < 3; i++)
        if (goro_spawn(&w[i], NULL, end_waiter, NULL) != 0)
            return 2;
    t_settle();                     /* they wait for fn */
    atomic_store(&end_release, 1);
    long r = -1, wr[3] = { -1, -1, -1 }, lr = -1;
    goro_err_t *err = NULL;
    int j = goro_join_err(run, &r, &err);
    int code = err ? goro_err_code(err) : 0;
    goro_err_free(err);
    int64_t until = goro_now() + 5 * GORO_SEC;
    int hung = 0;
    for (int i = 0; i < 3; i++)
        hung += goro_join_until(w[i], &wr[i], until) != 0;
    if (hung) {
        printf("%s: %d of 3 waiters hung\n", how ? "exit_err" : "exit", hung);
        fflush(stdout);
        _exit(3);                   /* they cannot be cancelled */
    }
    if (goro_spawn(&later, NULL, end_waiter, NULL) != 0 ||
        goro_join_until(later, &lr, goro_now() + 5 * GORO_SEC) != 0) {
        printf("a later caller hung\n");
        fflush(stdout);
        _exit(4);
    }
    int thread = goro_once(&end_once, never_fn);
    printf("%s: join=%d runner=%ld code=%d waiters=%ld,%ld,%ld later=%ld thread=%d never=%d\n",
           how ? "exit_err" : "exit", j, r, code, wr[0], wr[1], wr[2], lr, thread,
           atomic_load(&end_never));
    return 0;
}

static int once_end_child(void *arg)
{
    (void)arg;
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0)
        return 10;
    for (int how = 0; how < 2; how++)
        if (once_end_round(how) != 0)
            return 11;
    return goro_shutdown() == 0 ? 0 : 12;
}

START_TEST(once_whose_fn_ends_its_coroutine_counts_as_done)
{
    char out[4096];
    int st = t_run_child(once_end_child, NULL, t_timeout(30), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
    ck_assert_msg(strstr(out, "exit: join=0 runner=7 code=0 waiters=0,0,0 later=0 thread=0 "
                              "never=0\n"), "%s", out);
    ck_assert_msg(strstr(out, "exit_err: join=0 runner=-5 code=5 waiters=0,0,0 later=0 "
                              "thread=0 never=0\n"), "%s", out);
}
END_TEST

/* ---- rwlock: releasing one side ----
 * goro_rwlock_unlock by a coroutine that holds neither side, while
 * another holds the write lock: -EPERM, and the writer keeps it. */
static goro_rwlock_t side_rw;

static long unlock_not_mine(void *arg)
{
    (void)arg;
    return goro_rwlock_unlock(&side_rw);
}

static long hand_over_write(void *arg)
{
    (void)arg;
    return goro_rwlock_wunlock(&side_rw);
}

static long write_and_hold(goro_chan_t *release)
{
    long e = goro_rwlock_wrlock(&side_rw);
    goro_chan_send(release, &e);            /* it holds the write lock now */
    goro_chan_recv(release, NULL);
    return e ? e : goro_rwlock_unlock(&side_rw);
}

static long try_write(void *arg)
{
    (void)arg;
    return goro_rwlock_trywrlock(&side_rw);
}

START_TEST(rwlock_unlock_by_a_non_holder_is_eperm)
{
    goro_rwlock_init(&side_rw);
    /* As reported: coroutine A writes; B, holding neither side, unlocks;
     * C tries to write. */
    goro_chan_t *release = t_chan_new(sizeof(long), 0);
    goro_t *a, *h;
    long r = 1;
    ck_assert_ptr_nonnull(a = go(write_and_hold, release));
    ck_assert_int_eq(goro_chan_recv(release, &r), 1);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_spawn(&h, NULL, unlock_not_mine, NULL), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -EPERM);
    ck_assert_int_eq(goro_spawn(&h, NULL, try_write, NULL), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -EBUSY);            /* no second writer */
    ck_assert_int_eq(goro_chan_close(release), 0);
    ck_assert_int_eq(goro_join(a, &r), 0);
    ck_assert_int_eq(r, 0);                 /* A's own unlock */
    ck_assert_int_eq(goro_chan_free(release), 0);

    /* The same with the test's thread as the writer. */
    ck_assert_int_eq(goro_rwlock_wrlock(&side_rw), 0);
    ck_assert_int_eq(goro_spawn(&h, NULL, unlock_not_mine, NULL), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -EPERM);
    ck_assert_int_eq(goro_rwlock_trywrlock(&side_rw), -EBUSY);   /* still written */
    ck_assert_int_eq(goro_rwlock_tryrdlock(&side_rw), -EBUSY);
    ck_assert_int_eq(goro_rwlock_runlock(&side_rw), -EPERM);      /* no reader */
    /* The writer's own unlock, and a hand-over: anyone may wunlock. */
    ck_assert_int_eq(goro_rwlock_unlock(&side_rw), 0);
    ck_assert_int_eq(goro_rwlock_wunlock(&side_rw), -EPERM);
    ck_assert_int_eq(goro_rwlock_wrlock(&side_rw), 0);
    ck_assert_int_eq(goro_spawn(&h, NULL, hand_over_write, NULL), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(goro_rwlock_runlock(&side_rw), -EPERM);
    /* Readers: runlock, or unlock by a reader; wunlock is no read release. */
    ck_assert_int_eq(goro_rwlock_rdlock(&side_rw), 0);
    ck_assert_int_eq(goro_rwlock_rdlock(&side_rw), 0);
    ck_assert_int_eq(goro_rwlock_wunlock(&side_rw), -EPERM);
    ck_assert_int_eq(goro_rwlock_runlock(&side_rw), 0);
    ck_assert_int_eq(goro_rwlock_unlock(&side_rw), 0);
    ck_assert_int_eq(goro_rwlock_runlock(&side_rw), -EPERM);
    ck_assert_int_eq(goro_rwlock_unlock(&side_rw), -EPERM);
    ck_assert_int_eq(goro_rwlock_runlock(NULL), -EINVAL);
    ck_assert_int_eq(goro_rwlock_wunlock(NULL), -EINVAL);
    ck_assert_int_eq(goro_rwlock_destroy(&side_rw), 0);
}
END_TEST

/* ---- stress: holders that end, under priorities and cancellation ----
 * Coroutines of random classes, some on odd stacks (unmapped when they
 * end: GORO_STACK_GUARD=mprotect), lock random mutexes and the rwlock's
 * write side, sometimes two in a row (a chain for the loans), hold them
 * across switches, and now and then end holding one (returning or
 * goro_exit). A reaper unlocks what the ended left locked (anyone may);
 * the main thread cancels coroutines at random. Every lock must stay
 * exclusive and end unlocked; onces whose fn may end its coroutine must
 * run fn once and free every waiter. */
enum { SM = 4, SLIVE = 24 };
static goro_mutex_t s_mu[SM];
static goro_rwlock_t s_rw;
static _Atomic uint64_t s_owner[SM + 1];      /* [SM]: the rwlock's writer */
static atomic_int s_readers, s_stop;
static atomic_long s_ended_holding, s_reaped, s_locks;
#define S_ENDED UINT64_MAX

static int s_take(int i)
{
    int e = i < SM ? goro_mutex_lock(&s_mu[i]) : goro_rwlock_wrlock(&s_rw);
    if (e)
        return e;
    if (i == SM && atomic_load(&s_readers))
        t_fail("a writer beside readers");
    uint64_t was = atomic_exchange(&s_owner[i], goro_id(goro_self()));
    if (was)
        t_fail("lock %d taken while %llu held it", i, (unsigned long long)was);
    atomic_fetch_add(&s_locks, 1);
    return 0;
}

static void s_give(int i)
{
    atomic_store(&s_owner[i], 0);
    int e = i < SM ? goro_mutex_unlock(&s_mu[i]) : goro_rwlock_unlock(&s_rw);
    if (e)
        t_fail("unlock of lock %d: %d", i, e);
}

/* Ends the coroutine holding lock i. */
static void s_end_holding(int i, uint32_t r)
{
    atomic_store(&s_owner[i], S_ENDED);
    atomic_fetch_add(&s_ended_holding, 1);
    if (r & 1)
        goro_exit(0);
}

static long s_worker(void *arg)
{
    uint32_t r = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    for (int step = 0; step < 16; step++) {
        uint32_t x = t_rnd(&r);
        if (x % 8 == 0) {
            if (goro_rwlock_rdlock(&s_rw) != 0)
                return 0;
            atomic_fetch_add(&s_readers, 1);
            if (atomic_load(&s_owner[SM]) && atomic_load(&s_owner[SM]) != S_ENDED)
                t_fail("a reader beside a writer");
            goro_yield();
            atomic_fetch_sub(&s_readers, 1);
            if (goro_rwlock_runlock(&s_rw) != 0)
                t_fail("runlock failed");
            continue;
        }
        int i = (int)(x / 8 % (SM + 1)), j = (int)(x / 64 % SM);
        if (s_take(i) != 0)
            return 0;                           /* cancelled while waiting */
        bool two = i < j && x / 1024 % 3 == 0;  /* in order: a chain, no cycle */
        if (two && s_take(j) != 0) {
            s_give(i);
            return 0;
        }
        if (x / 4096 % 2)
            goro_yield();
        if (x / 8192 % 12 == 0) {
            if (two)
                s_give(j);
            s_end_holding(i, x);
            return 0;
        }
        if (two)
            s_give(j);
        s_give(i);
    }
    return 0;
}

/* Unlocks what ended holders left locked. */
static long s_reaper(void *arg)
{
    (void)arg;
    while (!atomic_load(&s_stop)) {
        for (int i = 0; i <= SM; i++) {
            uint64_t ended = S_ENDED;
            if (!atomic_compare_exchange_strong(&s_owner[i], &ended, 0))
                continue;
            int e = i < SM ? goro_mutex_unlock(&s_mu[i]) : goro_rwlock_wunlock(&s_rw);
            if (e)
                t_fail("unlock of an ended holder's lock %d: %d", i, e);
            atomic_fetch_add(&s_reaped, 1);
        }
        goro_sleep(100 * GORO_USEC);
    }
    return 0;
}

static goro_once_t s_once;
static atomic_int s_once_runs;

static void s_once_fn(void)
{
    atomic_fetch_add(&s_once_runs, 1);
    goro_yield();
    uint32_t x = (uint32_t)goro_id(goro_self());
    if (x % 3 == 0)
        goro_exit(0);
    if (x % 3 == 1)
        goro_exit_err(goro_err_new(EIO, "once fn failed"));
}

static long s_once_caller(void *arg)
{
    (void)arg;
    if (goro_once(&s_once, s_once_fn) != 0)
        t_fail("goro_once failed");
    return 0;
}

static int stress_child(void *arg)
{
    (void)arg;
    setenv("GORO_STACK_GUARD", "mprotect", 1);
    if (goro_start(&(goro_config_t){ .workers = 2 }) != 0)
        return 10;
    for (int i = 0; i < SM; i++)
        goro_mutex_init(&s_mu[i]);
    goro_rwlock_init(&s_rw);
    goro_t *reaper = go(s_reaper, NULL);
    goro_t *live[SLIVE] = { NULL };
    uint32_t r = 12345;
    long n = t_live(20000), cancelled = 0;
    for (long k = 0; k < n; k++) {
        int slot = (int)(k % SLIVE);
        if (live[slot])
            goro_join(live[slot], NULL);
        uint32_t x = t_rnd(&r);
        goro_attr_t a = { .priority = GORO_PRIORITY_LOW + (int)(x % 3),
                          .stack_size = x / 4 % 4 == 0 ? 64 * 1024 : 0 };
        if (goro_spawn(&live[slot], &a, s_worker, (void *)(uintptr_t)k) != 0)
            return 11;
        goro_t *victim = live[x / 256 % SLIVE];
        if (x / 16 % 16 == 0 && victim) {
            goro_cancel(victim);
            cancelled++;
        }
    }
    for (int i = 0; i < SLIVE; i++)
        if (live[i])
            goro_join(live[i], NULL);
    atomic_store(&s_stop, 1);
    goro_join(reaper, NULL);
    for (int i = 0; i <= SM; i++)           /* the last ones the reaper left */
        if (atomic_load(&s_owner[i]) == S_ENDED &&
            (i < SM ? goro_mutex_unlock(&s_mu[i]) : goro_rwlock_wunlock(&s_rw)) == 0)
            atomic_fetch_add(&s_reaped, 1);
    for (int i = 0; i < SM; i++)
        if (goro_mutex_destroy(&s_mu[i]) != 0)
            t_fail("mutex %d still locked", i);
    if (goro_rwlock_destroy(&s_rw) != 0)
        t_fail("rwlock still busy");
    /* Onces whose fn may end its coroutine, with waiters. */
    long rounds = t_live(2000);
    for (long k = 0; k < rounds; k++) {
        s_once = (goro_once_t)GORO_ONCE_INIT;
        atomic_store(&s_once_runs, 0);
        goro_t *h[5];
        for (int i = 0; i < 5; i++)
            if (goro_spawn(&h[i], &(goro_attr_t){ .priority = GORO_PRIORITY_LOW + i % 3 },
                           s_once_caller, NULL) != 0)
                return 12;
        for (int i = 0; i < 5; i++)
            goro_join(h[i], NULL);
        if (atomic_load(&s_once_runs) != 1)
            t_fail("once fn ran %d times", atomic_load(&s_once_runs));
    }
    printf("stress: %ld coroutines, %ld locks, %ld ended holding, %ld reaped, %ld cancels, "
           "%ld once rounds%s%s\n", n, atomic_load(&s_locks), atomic_load(&s_ended_holding),
           atomic_load(&s_reaped), cancelled, rounds, t_failed() ? ": " : "",
           t_failed() ? t_failed() : "");
    if (t_failed())
        return 13;
    return goro_shutdown() == 0 ? 0 : 14;
}

START_TEST(stress_holders_that_end)
{
    static char out[8192];
    int st = t_run_child(stress_child, NULL, t_timeout(120), out, sizeof out);
    ck_assert_msg(st != -1, "child hung: %s", out);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, out);
    ck_assert_msg(strstr(out, "stress: "), "%s", out);
    printf("%s", out);
}
END_TEST

Suite *sync_suite(void)
{
    Suite *s = suite_create("sync");
    TCase *tc = t_runtime_tcase(s, "sync", 30);
    tcase_add_test(tc, mutex_counter_exact_under_contention);
    tcase_add_test(tc, mutex_errors);
    tcase_add_test(tc, rwlock_readers_run_in_parallel);
    tcase_add_test(tc, rwlock_writers_exclusive);
    tcase_add_test(tc, rwlock_writer_not_starved_by_readers);
    tcase_add_test(tc, rwlock_errors);
    tcase_add_test(tc, cond_producer_consumer);
    tcase_add_test(tc, cond_signal_wakes_one_broadcast_all);
    tcase_add_test(tc, sem_bounds_parallelism);
    tcase_add_test(tc, sem_errors_and_waiters);
    tcase_add_test(tc, waitgroup_many_members);
    tcase_add_test(tc, waitgroup_negative_count);
    tcase_add_test(tc, once_runs_exactly_once);
    tc = t_runtime_tcase(s, "once_recursion", 30);
    tcase_add_test(tc, once_recursion_is_edeadlk);
    tcase_add_test(tc, once_between_threads_after_shutdown);
    tcase_add_test(tc, once_whose_fn_ends_its_coroutine_counts_as_done);
    tc = t_runtime_tcase(s, "ended_holders", 180);
    tcase_add_test(tc, lock_of_an_ended_holder_stays_locked_and_is_safe);
    tcase_add_test(tc, rwlock_unlock_by_a_non_holder_is_eperm);
    tcase_add_test(tc, stress_holders_that_end);
    return s;
}
