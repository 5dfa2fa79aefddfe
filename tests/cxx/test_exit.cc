/* goro_exit() in C++: it unwinds the coroutine's frames, running every
 * destructor and the end of every catch block, innermost first, passes
 * catch (...) handlers that rethrow, is caught by no typed handler, and
 * ends the coroutine with its result - whether the coroutine was started by
 * the C++ go() or by goro_spawn. A catch (...) that swallows it aborts
 * with a message. */
#include "runner.h"

#include <atomic>
#include <csignal>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>

namespace {

struct noted {
    const char *name;
    std::vector<std::string> *log;
    ~noted() { log->push_back(name); }
};

/* Parks in its destructor, which goro_exit's unwinding runs. */
struct parks_when_destroyed {
    std::vector<std::string> *log;
    ~parks_when_destroyed()
    {
        goro_sleep(200 * GORO_USEC);
        goro_yield();
        log->push_back("parked");
    }
};

const char *const depth_names[] = { "depth 0", "depth 1", "depth 2", "depth 3" };

/* Through a pointer the compiler cannot see through: deep() below recurses
 * a bounded number of times, which g++ does not believe of a path that
 * ends in a noreturn call. */
void (*volatile exit_coroutine)(long) = goro_exit;

long deep(int depth, std::vector<std::string> *log, long result)
{
    noted here{depth_names[depth], log};
    if (depth > 0)
        return deep(depth - 1, log, result) + 1;
    exit_coroutine(result);
    return -1;
}

long exits_from_the_depths(std::vector<std::string> *log, long result)
{
    noted top{"top", log};
    try {
        parks_when_destroyed parks{log};
        try {
            noted inner{"in try", log};
            deep(3, log, result);
        } catch (const std::exception &) {
            log->push_back("a typed catch caught goro_exit");
        }
    } catch (...) {
        log->push_back("catch (...)");
        throw;
    }
    log->push_back("goro_exit returned");
    return -1;
}

const std::vector<std::string> expected = {
    "depth 0", "depth 1", "depth 2", "depth 3", "in try", "parked", "catch (...)", "top",
};

std::string joined(const std::vector<std::string> &v)
{
    std::string s;
    for (const std::string &e : v)
        s += (s.empty() ? "" : ", ") + e;
    return s;
}

long plain_entry(void *arg)
{
    return exits_from_the_depths(static_cast<std::vector<std::string> *>(arg), 77);
}

} // namespace

CT_TEST(goro_exit_runs_destructors)
{
    ct::start(2);
    for (int i = 0; i < 20; i++) {
        std::vector<std::string> log;
        goro_t *h = go(exits_from_the_depths, &log, 42L + i);
        long r = -1;
        std::exception_ptr error;
        CT_CHECK(goro_join(h, &r, &error) == 0);
        CT_CHECKF(r == 42 + i, "result %ld, want %d", r, 42 + i);
        CT_CHECK(error == nullptr);
        CT_CHECKF(log == expected, "C++ go(): destructors ran as: %s", joined(log).c_str());
    }
}

CT_TEST(goro_exit_runs_destructors_of_goro_spawn_coroutines)
{
    ct::start(2);
    std::vector<std::string> log;
    goro_t *h;
    CT_CHECK(goro_spawn(&h, nullptr, plain_entry, &log) == 0);
    long r = -1;
    CT_CHECK(goro_join(h, &r) == 0);
    CT_CHECK(r == 77);
    CT_CHECKF(log == expected, "goro_spawn: destructors ran as: %s", joined(log).c_str());
}

namespace {

struct counted {
    static std::atomic<int> live;
    counted() { live++; }
    counted(const counted &) { live++; }
    ~counted() { live--; }
};
std::atomic<int> counted::live{0};

} // namespace

/* goro_exit inside a catch block ends the handling of the exception (it is
 * freed: ASan would see a leak) and leaves no exception state behind. */
CT_TEST(goro_exit_inside_a_catch_block)
{
    ct::start(1);
    for (int i = 0; i < 20; i++) {
        goro_t *h = go([] {
            try {
                throw std::runtime_error("being handled");
            } catch (const std::runtime_error &) {
                counted c;
                goro_exit(5);
            }
            return 0;
        });
        long r = 0;
        CT_CHECK(goro_join(h, &r) == 0);
        CT_CHECK(r == 5);
    }
    CT_CHECK(counted::live.load() == 0);
    int uncaught = -1;
    bool current = true;
    CT_CHECK(goro_join(go([&] {
        uncaught = std::uncaught_exceptions();
        current = static_cast<bool>(std::current_exception());
    }), nullptr) == 0);
    CT_CHECKF(uncaught == 0 && !current, "after the exits: uncaught %d, current %d",
              uncaught, current);
}

CT_CHILD(child_swallows_goro_exit)
{
    ct::start(1);
    goro_t *h = go([] {
        try {
            goro_exit(1);
        } catch (...) {
            /* swallowed: the coroutine would go on after goro_exit */
        }
        return 2;
    });
    goro_join(h, nullptr);
}

CT_TEST(goro_exit_swallowed_aborts)
{
    std::string err;
    int status = ct::run_child("child_swallows_goro_exit", &err);
    CT_CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
              "status %#x, want SIGABRT; stderr: %s", status, err.c_str());
    CT_CHECKF(err.find("ended without rethrowing") != std::string::npos, "stderr: %s",
              err.c_str());
}
