/* Exception state per coroutine (runtime/coro/cxx.c, docs/cxx.md): `throw;`
 * after parking in a catch block rethrows the coroutine's own exception -
 * parked by a yield, a sleep, a channel or a preemption, on one worker and
 * on two, after moving to another worker too; std::uncaught_exceptions()
 * counts the coroutine's own exceptions while a destructor parks during
 * unwinding; a new coroutine starts with none. */
#include "runner.h"

#include <atomic>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace {

/* An exception that says whose it is. */
struct tagged : std::runtime_error {
    long tag;
    explicit tagged(long t) : std::runtime_error("tagged " + std::to_string(t)), tag(t) {}
};

/* The tag of the exception `throw;` rethrows here, or a negative code:
 * -1 another type, -2 nothing to rethrow (std::terminate would follow, so
 * the check is made before rethrowing). */
long rethrown_tag()
{
    if (!std::current_exception())
        return -2;
    try {
        throw;
    } catch (const tagged &t) {
        return t.tag;
    } catch (...) {
        return -1;
    }
}

/* Not pthread_self(): glibc declares it const, and the compiler may reuse
 * a value read before a switch. */
long thread_id()
{
    return syscall(SYS_gettid);
}

int64_t mono_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * GORO_SEC + ts.tv_nsec;
}

std::atomic<unsigned long> sink;   /* keeps the work from being optimised away */

/* Computes, never calling goro, until `arrived` reaches `want`: with more
 * coroutines than workers that happens only if the runtime preempts the
 * spinners (they spin inside their catch blocks). Where preemption is
 * cooperative only, it yields instead. False if the deadline passed. */
GORO_PREEMPTIBLE bool spin_until_all(std::atomic<int> *arrived, int want, int64_t deadline)
{
    unsigned long x = 1;
    while (arrived->load(std::memory_order_relaxed) < want) {
        for (int i = 0; i < 2000; i++)
            x = x * 6364136223846793005UL + 1442695040888963407UL;
        if (!ct::async_preemption())
            goro_yield();
        if (mono_ns() > deadline)
            return false;
    }
    sink.store(x, std::memory_order_relaxed);
    return true;
}

struct rethrow_run {
    int coroutines;
    int rounds;
    std::atomic<int> arrived{0};
    std::atomic<long> checks{0};
    std::vector<goro_chan_t *> pairs;   /* coroutines 2k and 2k+1 meet on pairs[k] */
};

/* Every kind of park inside a catch block, and inside a nested one, then
 * `throw;` - which must find this coroutine's exception each time. */
void rethrow_after_parks(rethrow_run *run, int me)
{
    for (int round = 0; round < run->rounds; round++) {
        long outer_tag = me * 100000L + round;
        try {
            throw tagged(outer_tag);
        } catch (const tagged &outer) {
            std::exception_ptr held = std::current_exception();
            if (round == 0) {
                run->arrived.fetch_add(1);
                bool all = spin_until_all(&run->arrived, run->coroutines,
                                          mono_ns() + 20 * GORO_SEC);
                CT_CHECKF(all, "coroutine %d: the spinners were not preempted in 20 s", me);
            }
            goro_sleep(20 * GORO_USEC);
            CT_CHECKF(rethrown_tag() == outer_tag, "coroutine %d after a sleep: %ld, want %ld",
                      me, rethrown_tag(), outer_tag);
            try {
                throw tagged(-outer_tag - 1);
            } catch (const tagged &inner) {
                int v = me;
                goro_chan_t *ch = run->pairs[static_cast<size_t>(me / 2)];
                int rc = (me % 2) ? goro_chan_recv(ch, &v) : goro_chan_send(ch, &v);
                CT_CHECKF(rc >= 0, "channel: %d", rc);
                CT_CHECKF(rethrown_tag() == inner.tag, "coroutine %d after a channel "
                          "(nested catch): %ld, want %ld", me, rethrown_tag(), inner.tag);
            }
            goro_yield();
            CT_CHECKF(std::current_exception() == held, "coroutine %d: the exception "
                      "being handled changed across a yield", me);
            CT_CHECKF(rethrown_tag() == outer_tag, "coroutine %d after a yield: %ld, want %ld",
                      me, rethrown_tag(), outer_tag);
            CT_CHECK(outer.tag == outer_tag);
            run->checks.fetch_add(1);
        }
        CT_CHECKF(!std::current_exception() && std::uncaught_exceptions() == 0,
                  "coroutine %d: exception state left after its catch block", me);
    }
}

void rethrow_test(int workers)
{
    /* A 1 ms slice: the spinners are preempted soon. */
    ct::start(workers, GORO_MSEC);
    rethrow_run run;
    run.coroutines = 8;
    run.rounds = static_cast<int>(ct::scale(200));
    for (int k = 0; k < run.coroutines / 2; k++) {
        goro_chan_t *ch;
        CT_CHECK(goro_chan_new(&ch, sizeof(int), 0) == 0);
        run.pairs.push_back(ch);
    }
    std::vector<goro_t *> hs;
    for (int i = 0; i < run.coroutines; i++)
        hs.push_back(go(rethrow_after_parks, &run, i));
    for (goro_t *h : hs)
        CT_CHECK(goro_join(h, nullptr) == 0);
    for (goro_chan_t *ch : run.pairs)
        goro_chan_free(ch);
    CT_CHECK(run.checks.load() == run.coroutines * run.rounds);
    if (!ct::async_preemption())
        ct::note("the spinners yielded: asynchronous preemption is off here (TSan or "
                 "GORO_PREEMPT=0), so nothing was preempted inside a catch block");
}

} // namespace

CT_TEST(rethrow_after_park_1_worker)
{
    rethrow_test(1);
}

CT_TEST(rethrow_after_park_2_workers)
{
    rethrow_test(2);
}

namespace {

/* std::uncaught_exceptions() while a destructor parks during unwinding:
 * 1 for the unwinding coroutine, before and after the park (on whatever
 * thread it resumes), 0 in its catch; 0 all along for the others. */
struct uncaught_run {
    std::atomic<int> unwinding{0};
    std::atomic<bool> done{false};
};

struct parks_in_destructor {
    int *out_before, *out_after;
    ~parks_in_destructor()
    {
        *out_before = std::uncaught_exceptions();
        goro_sleep(200 * GORO_USEC);
        goro_yield();
        *out_after = std::uncaught_exceptions();
    }
};

void unwinder(uncaught_run *run, int me)
{
    for (int round = 0; round < 50; round++) {
        int before = -1, after = -1, in_catch = -1;
        run->unwinding.fetch_add(1);
        try {
            parks_in_destructor d{&before, &after};
            throw tagged(me);
        } catch (const tagged &) {
            in_catch = std::uncaught_exceptions();
        }
        run->unwinding.fetch_sub(1);
        CT_CHECKF(before == 1 && after == 1 && in_catch == 0,
                  "unwinder %d: uncaught_exceptions %d before the park, %d after, %d in "
                  "the catch; want 1, 1, 0", me, before, after, in_catch);
    }
}

void observer(uncaught_run *run, std::atomic<long> *overlaps)
{
    while (!run->done.load()) {
        int n = std::uncaught_exceptions();
        CT_CHECKF(n == 0, "a coroutine that throws nothing sees uncaught_exceptions %d", n);
        if (run->unwinding.load() > 0)
            overlaps->fetch_add(1);
        goro_yield();
    }
}

void uncaught_test(int workers)
{
    ct::start(workers);
    uncaught_run run;
    std::atomic<long> overlaps{0};
    std::vector<goro_t *> unwinders, observers;
    for (int i = 0; i < 3; i++)
        observers.push_back(go(observer, &run, &overlaps));
    for (int i = 0; i < 4; i++)
        unwinders.push_back(go(unwinder, &run, i));
    for (goro_t *h : unwinders)
        CT_CHECK(goro_join(h, nullptr) == 0);
    run.done = true;
    for (goro_t *h : observers)
        CT_CHECK(goro_join(h, nullptr) == 0);
    CT_CHECKF(overlaps.load() > 0, "the observers never ran while a destructor was parked");
}

} // namespace

CT_TEST(uncaught_exceptions_per_coroutine_1_worker)
{
    uncaught_test(1);
}

CT_TEST(uncaught_exceptions_per_coroutine_2_workers)
{
    uncaught_test(2);
}

namespace {

/* Catches on one worker, parks, rethrows after resuming - on another
 * worker as often as not: the main thread (a thread the runtime does not
 * own) wakes it, which queues it globally, for whichever worker is free. */
struct migration_run {
    std::atomic<long> moved{0};
    long rounds;
};

void migrator(migration_run *run, goro_chan_t *wake, int me)
{
    for (long round = 0; round < run->rounds; round++) {
        long tag = me * 100000L + round;
        try {
            throw tagged(tag);
        } catch (const tagged &) {
            long here = thread_id();
            CT_CHECK(goro_chan_recv(wake, nullptr) == 1);
            if (here != thread_id())
                run->moved.fetch_add(1);
            CT_CHECKF(rethrown_tag() == tag, "coroutine %d: %ld, want %ld", me,
                      rethrown_tag(), tag);
        }
    }
}

} // namespace

CT_TEST(exception_across_migration)
{
    ct::start(2);
    migration_run run;
    run.rounds = ct::scale(200);
    const int n = 6;
    std::vector<goro_chan_t *> wakes(n);
    std::vector<goro_t *> hs;
    for (int i = 0; i < n; i++) {
        CT_CHECK(goro_chan_new(&wakes[static_cast<size_t>(i)], 0, 0) == 0);
        hs.push_back(go(migrator, &run, wakes[static_cast<size_t>(i)], i));
    }
    for (long round = 0; round < run.rounds; round++)
        for (goro_chan_t *ch : wakes)
            CT_CHECK(goro_chan_send(ch, nullptr) == 0);
    for (goro_t *h : hs)
        CT_CHECK(goro_join(h, nullptr) == 0);
    for (goro_chan_t *ch : wakes)
        goro_chan_free(ch);
    CT_CHECKF(run.moved.load() > 0, "no coroutine resumed on another worker in its catch block");
}

namespace {

struct state_seen {
    int uncaught;
    bool has_current;
};

state_seen fresh_state()
{
    return { std::uncaught_exceptions(), static_cast<bool>(std::current_exception()) };
}

/* Parks in a catch block and leaves the handle for the main thread. */
void parks_in_catch(goro_chan_t *release)
{
    try {
        throw tagged(7);
    } catch (const tagged &) {
        goro_chan_recv(release, nullptr);
        CT_CHECK(rethrown_tag() == 7);
    }
}

} // namespace

/* A new coroutine handles no exception, even when the last one to run on
 * its thread left in the middle of a catch block. */
CT_TEST(new_coroutine_has_no_exception_state)
{
    ct::start(1);
    goro_chan_t *release;
    CT_CHECK(goro_chan_new(&release, 0, 0) == 0);
    goro_t *parked = go(parks_in_catch, release);
    goro_sleep(2 * GORO_MSEC);          /* it is parked in its catch block now */
    for (int i = 0; i < 20; i++) {
        state_seen seen{-1, true};
        goro_t *h = go([&seen] { seen = fresh_state(); });
        CT_CHECK(goro_join(h, nullptr) == 0);
        CT_CHECKF(seen.uncaught == 0 && !seen.has_current,
                  "a new coroutine sees uncaught_exceptions %d, an exception being "
                  "handled: %d", seen.uncaught, seen.has_current);
    }
    CT_CHECK(goro_chan_close(release) == 0);
    CT_CHECK(goro_join(parked, nullptr) == 0);
    goro_chan_free(release);
}
