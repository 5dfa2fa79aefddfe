/* goro_once when fn does not return (include/goro.h, runtime/wait/sync.c):
 * a C++ exception through it, in a coroutine that catches it and goes on,
 * or on a plain thread; goro_exit inside it (a forced unwind). The once
 * counts as run: the callers waiting meanwhile return 0, fn never runs
 * again, and a later call - from the same coroutine too - returns 0 (not
 * -EDEADLK). */
#include "runner.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

goro_once_t once;
std::atomic<int> started, release, never, destroyed;

struct counted {
    ~counted() { destroyed++; }
};

void reset()
{
    once = GORO_ONCE_INIT;
    started = release = never = destroyed = 0;
}

void never_fn()
{
    never++;
}

void wait_for_release()
{
    started = 1;
    while (!release)
        goro_sleep(GORO_MSEC);
}

void throwing_fn()
{
    counted c;
    wait_for_release();
    throw std::runtime_error("fn failed");
}

void exiting_fn()
{
    counted c;
    wait_for_release();
    goro_exit(7);
}

/* The runner: goro_once with fn, catching what it throws; then again. */
long run_throwing()
{
    int caught = 0;
    try {
        goro_once(&once, throwing_fn);
    } catch (const std::runtime_error &e) {
        caught = std::string(e.what()) == "fn failed";
    }
    int again = goro_once(&once, never_fn);
    return caught && again == 0 ? 0 : 100 + again;
}

long run_exiting()
{
    goro_once(&once, exiting_fn);
    return -1;                      /* not reached */
}

/* Starts run, waits for fn, queues waiters, lets fn end; the waiters must
 * return 0 promptly. They cannot be cancelled (a once's wait is firm): if
 * they hang, the process cannot shut down, so it ends here. */
void fn_ends_with_waiters(long (*run)(), long want)
{
    ct::start(2);
    reset();
    goro_t *r = nullptr, *w[3];
    CT_CHECK(goro_spawn(&r, nullptr, [](void *f) { return ((long (*)())f)(); },
                        reinterpret_cast<void *>(run)) == 0);
    while (!started)
        goro_sleep(GORO_MSEC);
    for (goro_t *&h : w)
        h = go([] { return static_cast<long>(goro_once(&once, never_fn)); });
    goro_sleep(50 * GORO_MSEC);     /* they wait for fn */
    release = 1;
    long res = -100;
    CT_CHECK(goro_join(r, &res) == 0);
    CT_CHECKF(res == want, "runner: %ld, want %ld", res, want);
    for (goro_t *h : w) {
        long v = -100;
        if (goro_join_until(h, &v, goro_now() + 5 * GORO_SEC) != 0) {
            std::fprintf(stderr, "a goro_once waiter hung after fn ended\n");
            std::_Exit(3);
        }
        CT_CHECKF(v == 0, "waiter: %ld", v);
    }
    long later = -100;
    goro_t *h = go([] { return static_cast<long>(goro_once(&once, never_fn)); });
    CT_CHECK(goro_join_until(h, &later, goro_now() + 5 * GORO_SEC) == 0);
    CT_CHECKF(later == 0, "later caller: %ld", later);
    CT_CHECK(never == 0);
    CT_CHECK(destroyed == 1);
}

} // namespace

CT_TEST(once_exception_through_fn_counts_as_run)
{
    fn_ends_with_waiters(run_throwing, 0);
}

CT_TEST(once_goro_exit_in_fn_counts_as_run)
{
    fn_ends_with_waiters(run_exiting, 7);
}

CT_TEST(once_exception_through_fn_on_a_thread)
{
    ct::start(1);
    reset();
    release = 1;
    int caught = 0, again = -100;
    std::thread t([&] {
        try {
            goro_once(&once, throwing_fn);
        } catch (const std::runtime_error &) {
            caught = 1;
        }
        again = goro_once(&once, never_fn);
    });
    t.join();
    CT_CHECK(caught == 1);
    CT_CHECKF(again == 0, "again: %d", again);
    CT_CHECK(never == 0);
}
