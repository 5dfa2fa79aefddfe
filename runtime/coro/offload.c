/*
 * Offload: run a blocking function on a small pool of threads while the
 * calling coroutine parks, so its worker goes on running the others.
 *
 * A job lives on the caller's stack. Its state word orders completion
 * against parking without a lock: the caller parks with a commit step that
 * moves PENDING -> the caller's record; the pool thread, when fn returns,
 * swaps in DONE and wakes whoever it finds. Either the caller sees DONE in
 * its commit (and never sleeps), or the pool thread sees the caller and
 * wakes it - after it was saved, because the commit runs after the save.
 *
 * Threads start on demand, up to the pool size, and stay until shutdown.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "coro/coro.h"
#include "sched/sched.h"

#define JOB_PENDING 0u
#define JOB_DONE 1u

struct job {
    long (*fn)(void *);
    void *arg;
    long result;
    _Atomic uintptr_t state;       /* JOB_PENDING, JOB_DONE or the waiter */
    struct job *next;
};

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static struct job *queue_head, *queue_tail;
static pthread_t *threads;
static int nthreads, nidle, max_threads;
static bool stopping;

#define MAX_POOL 1024

/* GORO_OFFLOAD_THREADS, or twice the workers (at least 4). */
static int pool_size(void)
{
    long n;
    if (goro__env_long("GORO_OFFLOAD_THREADS", 1, MAX_POOL, NULL, &n))
        return (int)n;
    n = 2L * goro_workers();
    return n < 4 ? 4 : (int)n;
}

static void finish(struct job *j)
{
    uintptr_t old = atomic_exchange_explicit(&j->state, JOB_DONE, memory_order_acq_rel);
    GORO_ASSERT(old != JOB_DONE);   /* offload: a job completes once */
    if (old != JOB_PENDING)
        goro__claim_ready((struct goro *)old);   /* a firm wait: the claim always wins */
}

static void *pool_main(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "goro-offload");
    pthread_mutex_lock(&pool_mu);
    for (;;) {
        while (!queue_head && !stopping) {
            nidle++;
            pthread_cond_wait(&pool_cv, &pool_mu);
            nidle--;
        }
        if (!queue_head)
            break;                  /* stopping, and nothing left to run */
        struct job *j = queue_head;
        queue_head = j->next;
        if (!queue_head)
            queue_tail = NULL;
        pthread_mutex_unlock(&pool_mu);
        j->result = j->fn(j->arg);
        finish(j);
        pthread_mutex_lock(&pool_mu);
    }
    pthread_mutex_unlock(&pool_mu);
    return NULL;
}

/* Under pool_mu: queues j and makes sure some thread will take it. */
static int submit_locked(struct job *j)
{
    if (!threads) {
        max_threads = pool_size();
        threads = calloc((size_t)max_threads, sizeof *threads);
        if (!threads)
            return -ENOMEM;
    }
    if (nidle == 0 && nthreads < max_threads) {
        int err = goro__thread_create(&threads[nthreads], 0, pool_main, NULL);
        if (err == 0)
            nthreads++;
        else if (nthreads == 0)
            return -err;            /* nobody could ever run it */
    }
    j->next = NULL;
    if (queue_tail)
        queue_tail->next = j;
    else
        queue_head = j;
    queue_tail = j;
    pthread_cond_signal(&pool_cv);
    return 0;
}

/* Run once the caller is saved: wait for the job unless it is done. */
static bool job_commit(void *arg, struct goro *self)
{
    struct job *j = arg;
    uintptr_t expect = JOB_PENDING;
    return atomic_compare_exchange_strong_explicit(&j->state, &expect, (uintptr_t)self,
        memory_order_acq_rel, memory_order_acquire);
}

int goro_offload(long (*fn)(void *), void *arg, long *result)
{
    if (!fn)
        return -EINVAL;
    if (!goro__current()) {
        /* A thread of its own: blocking it is what it asked for. */
        long r = fn(arg);
        if (result)
            *result = r;
        return 0;
    }
    if (goro__forked())
        return goro__forked_error();    /* no pool threads in a child (fork.c) */
    struct job j = { .fn = fn, .arg = arg };
    pthread_mutex_lock(&pool_mu);
    int err = stopping ? -ESHUTDOWN : submit_locked(&j);
    pthread_mutex_unlock(&pool_mu);
    if (err)
        return err;
    /* Firm: j lives in this frame and the pool thread writes to it. */
    struct goro_park how = { .why = GORO_W_OFFLOAD, .obj = fn, .commit = job_commit,
                             .arg = &j, .deadline = GORO_FOREVER, .firm = true,
                             .real = true };
    int outcome = goro__park(&how);
    /* offload: the caller goes on only once its job is done - a firm wait
     * that its pool thread alone ends */
    GORO_ASSERT(outcome == GORO_WAKE_DONE &&
                atomic_load_explicit(&j.state, memory_order_acquire) == JOB_DONE);
    (void)outcome;
    if (result)
        *result = j.result;
    return 0;
}

/* At shutdown, after every coroutine has ended (so no job is queued). */
void goro__offload_stop(void)
{
    pthread_mutex_lock(&pool_mu);
    stopping = true;
    pthread_cond_broadcast(&pool_cv);
    int n = nthreads;
    pthread_mutex_unlock(&pool_mu);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_lock(&pool_mu);
    free(threads);
    threads = NULL;
    nthreads = nidle = max_threads = 0;
    stopping = false;
    pthread_mutex_unlock(&pool_mu);
}
