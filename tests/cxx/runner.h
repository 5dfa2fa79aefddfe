/* A small self-contained runner for the C++ tests (the .cc files here).
 *
 * Each test is a function registered with CT_TEST; it starts the runtime it
 * wants (ct::start), runs coroutines and shuts the runtime down (ct::stop,
 * or the runner does). Coroutines and foreign threads never throw or jump
 * to report a failure: CT_CHECK records it (the first message is kept) and
 * the runner reports the test as failed once it returns. A test that
 * cannot run in this build calls ct::skip, one that ran only in part
 * ct::note. CT_CHILD registers code that
 * runs in a child process (ct::run_child), for checks that end the process
 * (std::terminate, abort). */
#ifndef GORO_CXX_TESTS_RUNNER_H
#define GORO_CXX_TESTS_RUNNER_H

#include <goro.h>

#include <cstdint>
#include <string>

namespace ct {

using test_fn = void (*)();

struct registrar {
    registrar(const char *name, test_fn fn, bool child);
};

void fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool failed();
void skip(const char *why);
/* The test ran, but part of it could not (said next to its "ok"). */
void note(const char *what);

/* A runtime for this test: workers, and the slice (0: the default). */
void start(int workers, int64_t slice_ns = 0);
void stop();

/* Asynchronous preemption works here (not in TSan builds, nor with
 * GORO_PREEMPT=0); sanitized builds; loop counts scaled for them. */
bool async_preemption();
bool sanitized();
long scale(long n);

/* Runs the CT_CHILD named child in a new process of this program; returns
 * its wait status and what it wrote to stderr. */
int run_child(const char *child, std::string *err);

} // namespace ct

#define CT_TEST(name)                                                       \
    static void name();                                                     \
    static const ct::registrar name##_registrar(#name, name, false);        \
    static void name()

#define CT_CHILD(name)                                                      \
    static void name();                                                     \
    static const ct::registrar name##_registrar(#name, name, true);         \
    static void name()

#define CT_CHECK(cond)                                                      \
    do {                                                                    \
        if (!(cond))                                                        \
            ct::fail(__FILE__, __LINE__, "%s", #cond);                      \
    } while (0)

#define CT_CHECKF(cond, ...)                                                \
    do {                                                                    \
        if (!(cond))                                                        \
            ct::fail(__FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)

#endif
