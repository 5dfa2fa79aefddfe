/* The C++ go(): callables of every kind (std::invoke), arguments
 * decay-copied into the coroutine as std::thread copies them, results
 * widened to a long as the C form widens them, errors as NULL + errno; and
 * an exception that escapes a coroutine, delivered to its joiner - or
 * std::terminate for a detached one. */
#include "runner.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include <sys/wait.h>

namespace {

long join_result(goro_t *h)
{
    long r = -12345;
    CT_CHECKF(h != nullptr, "go() failed: %s", std::strerror(errno));
    if (h)
        CT_CHECK(goro_join(h, &r) == 0);
    return r;
}

long add3(long a, int b, short c)
{
    return a * 100 + b * 10 + c;
}

long length_of(const std::string &s)
{
    return static_cast<long>(s.size());
}

struct counter {
    long base;
    long plus(long k) const { return base + k; }
};

enum class small : short { minus_three = -3 };

} // namespace

CT_TEST(go_lambda_captures_by_value)
{
    ct::start(2);
    std::string text = "copied";
    goro_t *h = go([text] { return text == "copied" ? 1 : 0; });
    text = "changed after go()";
    CT_CHECK(join_result(h) == 1);

    int calls = 0;                  /* a mutable lambda works on its own copy */
    h = go([calls]() mutable { return ++calls; });
    CT_CHECK(join_result(h) == 1);
    CT_CHECK(calls == 0);
}

CT_TEST(go_std_function)
{
    ct::start(2);
    std::function<int(int, int)> times = [](int a, int b) { return a * b; };
    goro_t *h = go(times, 6, 7);
    times = nullptr;                /* the coroutine has its own copy */
    CT_CHECK(join_result(h) == 42);
}

CT_TEST(go_function_pointer_with_arguments)
{
    ct::start(2);
    CT_CHECK(join_result(go(add3, 1, 2, 3)) == 123);
    CT_CHECK(join_result(go(&add3, 4L, static_cast<short>(5), 6)) == 456);
    /* A temporary bound to a const reference: the coroutine's copy lives as
     * long as the coroutine. */
    CT_CHECK(join_result(go(length_of, std::string(100, 'x'))) == 100);
    CT_CHECK(join_result(go(length_of, "literal")) == 7);
    counter c{40};
    CT_CHECK(join_result(go(&counter::plus, &c, 2L)) == 42);
}

CT_TEST(go_move_only_argument)
{
    ct::start(2);
    auto p = std::make_unique<int>(5);
    goro_t *h = go([](std::unique_ptr<int> q) { return *q; }, std::move(p));
    CT_CHECK(p == nullptr);
    CT_CHECK(join_result(h) == 5);

    /* A move-only callable, which std::function could not hold. */
    auto q = std::make_unique<int>(9);
    h = go([owned = std::move(q)] { return *owned; });
    CT_CHECK(join_result(h) == 9);

    /* Not joined: the coroutine destroys its copies when it ends. */
    auto shared = std::make_shared<int>(1);
    std::weak_ptr<int> watch = shared;
    goro_t *d = go([](std::shared_ptr<int> s) { goro_sleep(GORO_MSEC); return *s; }, shared);
    shared.reset();
    CT_CHECK(goro_detach(d) == 0);
    for (int i = 0; i < 2000 && !watch.expired(); i++)
        goro_sleep(GORO_MSEC);
    CT_CHECK(watch.expired());
}

/* A lone callable that fits in a pointer travels in goro_spawn's argument
 * (no allocation); one a little larger goes to the heap. */
CT_TEST(go_small_and_larger_lone_callables)
{
    ct::start(1);
    long value = 41;
    long *p = &value;
    goro_t *a = go([p] { return *p + 1; });
    goro_t *b = go([] { return 3; });
    goro_t *c = go(+[]() -> long { return 4; });
    goro_t *d = go([p, value] { return *p + value; });
    CT_CHECK(join_result(a) == 42 && join_result(b) == 3 && join_result(c) == 4);
    CT_CHECK(join_result(d) == 82);
    std::string error;
    try {
        goro_join_rethrow(go([p] { throw std::runtime_error(std::to_string(*p)); }));
    } catch (const std::runtime_error &e) {
        error = e.what();
    }
    CT_CHECK(error == "41");
}

CT_TEST(go_references_through_std_ref)
{
    ct::start(2);
    int x = 0;
    goro_t *h = go([](int &r) { r = 9; }, std::ref(x));
    CT_CHECK(join_result(h) == 0);
    CT_CHECK(x == 9);
}

CT_TEST(go_results_widen_as_in_c)
{
    ct::start(1);
    CT_CHECK(join_result(go([] { return true; })) == 1);
    CT_CHECK(join_result(go([] { return -5; })) == -5);
    CT_CHECK(join_result(go([] { return UINT_MAX; })) == 4294967295L);
    CT_CHECK(join_result(go([] { return static_cast<signed char>(-1); })) == -1);
    CT_CHECK(join_result(go([] { return static_cast<unsigned char>(255); })) == 255);
    CT_CHECK(join_result(go([] { return small::minus_three; })) == -3);
    CT_CHECK(join_result(go([] { return ULONG_MAX; })) == -1);
    static int target;
    CT_CHECK(join_result(go([] { return &target; })) == reinterpret_cast<long>(&target));
    CT_CHECK(join_result(go([] { return nullptr; })) == 0);
    CT_CHECK(join_result(go([] {})) == 0);
}

CT_TEST(goro_go_attributes_and_detached)
{
    ct::start(2);
    goro_attr_t attr = {};
    attr.name = "cxx-named";
    attr.stack_size = 64 * 1024;
    goro_t *h = nullptr;
    CT_CHECK(goro_go(&h, &attr, [] { return std::strcmp(goro_name(goro_self()), "cxx-named"); }) == 0);
    CT_CHECK(join_result(h) == 0);

    goro_waitgroup_t wg = GORO_WAITGROUP_INIT;
    CT_CHECK(goro_waitgroup_add(&wg, 1) == 0);
    CT_CHECK(goro_go(nullptr, nullptr, [&wg] { goro_waitgroup_done(&wg); }) == 0);
    CT_CHECK(goro_waitgroup_wait(&wg) == 0);
}

CT_TEST(go_errors)
{
    ct::start(1);
    long (*none)(void) = nullptr;
    errno = 0;
    CT_CHECK(go(none) == nullptr);
    CT_CHECK(errno == EINVAL);
    goro_t *h = reinterpret_cast<goro_t *>(1);
    CT_CHECK(goro_go(&h, nullptr, none) == -EINVAL);
    CT_CHECK(h == nullptr);

    goro_attr_t tiny = {};
    tiny.stack_size = 1024;         /* below the minimum */
    CT_CHECK(goro_go(&h, &tiny, [] {}) == -EINVAL);

    /* A copy constructor that throws: in the caller, nothing spawned. */
    struct bad_copy {
        bad_copy() = default;
        bad_copy(const bad_copy &) { throw std::runtime_error("no copies"); }
    };
    bad_copy original;
    bool thrown = false;
    try {
        go([](const bad_copy &) {}, original);
    } catch (const std::runtime_error &) {
        thrown = true;
    }
    CT_CHECK(thrown);
}

CT_TEST(go_from_coroutines_and_threads)
{
    ct::start(2);
    goro_t *outer = go([] {
        goro_t *inner = go([](int a) { return a + 1; }, 41);
        long r = 0;
        return goro_join(inner, &r) == 0 ? r : -1;
    });
    CT_CHECK(join_result(outer) == 42);
    long from_thread = 0;
    std::thread t([&from_thread] { from_thread = goro_join_rethrow(go([] { return 7; })); });
    t.join();
    CT_CHECK(from_thread == 7);
}

namespace {

struct tagged : std::runtime_error {
    explicit tagged(const std::string &what) : std::runtime_error(what) {}
};

} // namespace

CT_TEST(join_rethrows_the_coroutine_exception)
{
    ct::start(2);
    std::string what;
    try {
        goro_join_rethrow(go([] {
            goro_sleep(GORO_MSEC);      /* may resume elsewhere first */
            throw tagged("from the coroutine");
        }));
    } catch (const tagged &e) {
        what = e.what();
    }
    CT_CHECK(what == "from the coroutine");

    int thrown = 0;
    try {
        goro_join_rethrow(go([] { throw 42; }));
    } catch (int v) {
        thrown = v;
    }
    CT_CHECK(thrown == 42);

    /* The joiner is a coroutine too, on either worker. */
    goro_t *joiner = go([] {
        try {
            goro_join_rethrow(go([] { throw std::out_of_range("inner"); }));
        } catch (const std::out_of_range &) {
            return 1;
        }
        return 0;
    });
    CT_CHECK(join_result(joiner) == 1);
    CT_CHECK(goro_join_rethrow(go([] { return 5; })) == 5);
}

/* What escaped a coroutine is destroyed by whichever join or detach ends
 * the handle without taking it: the C join, the two-argument form, a join
 * given no exception_ptr, a detach after the end. */
static std::atomic<int> counted_alive;

struct counted_error {
    counted_error() { counted_alive++; }
    counted_error(const counted_error &) { counted_alive++; }
    ~counted_error() { counted_alive--; }
};

CT_TEST(escaped_exception_freed_by_every_end_of_a_handle)
{
    ct::start(2);
    auto thrower = [] { throw counted_error(); };
    long r = -1;
    CT_CHECK(goro_join(go(thrower), &r) == 0);              /* the C join */
    CT_CHECK(r == 0);
    CT_CHECK(goro_join(go(thrower), &r, nullptr) == 0);
    goro_t *h = go(thrower);
    while (goro_join_until(h, &r, goro_now()) == -ETIMEDOUT)
        goro_sleep(GORO_MSEC);
    std::exception_ptr error;
    h = go(thrower);
    goro_sleep(20 * GORO_MSEC);                             /* ended, not joined */
    CT_CHECK(goro_detach(h) == 0);
    CT_CHECK(goro_join(go(thrower), &r, &error) == 0);      /* taken: alive */
    CT_CHECK(counted_alive.load() == 1);
    error = nullptr;
    CT_CHECK(counted_alive.load() == 0);
}

CT_TEST(join_with_exception_ptr)
{
    ct::start(2);
    long r = -1;
    std::exception_ptr error;
    CT_CHECK(goro_join(go([] { throw std::logic_error("kept"); }), &r, &error) == 0);
    CT_CHECK(r == 0);
    CT_CHECK(error != nullptr);
    std::string what;
    try {
        std::rethrow_exception(error);
    } catch (const std::logic_error &e) {
        what = e.what();
    }
    CT_CHECK(what == "kept");

    CT_CHECK(goro_join(go([] { return 3; }), &r, &error) == 0);
    CT_CHECK(r == 3 && error == nullptr);

    /* No place for it: dropped (and freed). */
    CT_CHECK(goro_join(go([] { throw std::logic_error("dropped"); }), &r, nullptr) == 0);

    /* Timed out first: the exception waits for the join that succeeds. */
    goro_t *h = go([] {
        goro_sleep(20 * GORO_MSEC);
        throw std::runtime_error("late");
    });
    CT_CHECK(goro_join_until(h, &r, &error, goro_now() + GORO_MSEC) == -ETIMEDOUT);
    CT_CHECK(error == nullptr);
    CT_CHECK(goro_join_until(h, &r, &error, GORO_FOREVER) == 0);
    CT_CHECK(error != nullptr);

    bool system_error = false;
    try {
        goro_join_rethrow(nullptr);
    } catch (const std::system_error &e) {
        system_error = e.code().value() == EINVAL;
    }
    CT_CHECK(system_error);
}

CT_CHILD(child_detached_at_spawn_throws)
{
    ct::start(2);
    goro_go(nullptr, nullptr, [] { throw std::runtime_error("nobody joins this"); });
    goro_shutdown();
}

CT_CHILD(child_detached_later_throws)
{
    ct::start(2);
    goro_detach(go([] {
        goro_sleep(10 * GORO_MSEC);     /* detached by then */
        throw std::runtime_error("detached before it threw");
    }));
    goro_shutdown();
}

namespace {

void expect_terminate(const char *child, const char *what)
{
    std::string err;
    int status = ct::run_child(child, &err);
    CT_CHECKF(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
              "%s: status %#x, want SIGABRT; stderr: %s", child, status, err.c_str());
    CT_CHECKF(err.find("goro: an exception escaped detached coroutine") != std::string::npos,
              "%s: stderr: %s", child, err.c_str());
    CT_CHECKF(err.find(what) != std::string::npos, "%s: stderr: %s", child, err.c_str());
}

} // namespace

CT_TEST(detached_exception_terminates)
{
    expect_terminate("child_detached_at_spawn_throws", "nobody joins this");
    expect_terminate("child_detached_later_throws", "detached before it threw");
}

/* goro_group_go in C++: any callable, arguments copied as go() copies
 * them; a member that ends with an error object fails the group. */
CT_TEST(group_go_lambdas_and_errors)
{
    ct::start(2);
    goro_group_t *g = nullptr;
    CT_CHECK(goro_group_new(&g, nullptr) == 0);
    std::atomic<long> sum{0};
    for (long i = 1; i <= 10; i++)
        CT_CHECK(goro_group_go(g, [&sum](long k) { sum += k; }, i) == 0);
    CT_CHECK(goro_group_wait(g, nullptr, nullptr) == 0);
    CT_CHECK(sum.load() == 55);
    CT_CHECK(goro_group_free(g) == 0);

    CT_CHECK(goro_group_new(&g, nullptr) == 0);
    std::string what = "copied";
    CT_CHECK(goro_group_go(g, [](std::string s) {
                 goro_exit_err(goro_err_new(EIO, "%s", s.c_str()));
             }, what) == 0);
    goro_err_t *err = nullptr;
    CT_CHECK(goro_group_wait(g, nullptr, &err) == -EIO);
    CT_CHECK(err && std::strcmp(goro_err_msg(err), "copied") == 0);
    goro_err_free(err);
    CT_CHECK(goro_group_free(g) == 0);
}

/* goro_group_go with a NULL group: -EINVAL, nothing runs (it used to
 * start a detached coroutine outside any group). */
CT_TEST(group_go_null_group_refused)
{
    ct::start(2);
    std::atomic<int> ran{0};
    CT_CHECK(goro_group_go(nullptr, [&ran] { ran++; }) == -EINVAL);
    goro_sleep(5 * GORO_MSEC);
    CT_CHECK(ran.load() == 0);
}

/* An exception escaping a group member is the group's error: the first
 * failure cancels the others, and the C++ wait hands the exception back
 * (goro_group_wait with an exception_ptr) or rethrows it. */
CT_TEST(group_member_exception_is_the_groups_error)
{
    ct::start(2);
    goro_group_t *g = nullptr;
    CT_CHECK(goro_group_new(&g, nullptr) == 0);
    goro_chan_t *never = nullptr;
    CT_CHECK(goro_chan_new(&never, 0, 0) == 0);
    CT_CHECK(goro_group_go(g, [never] { goro_chan_recv(never, nullptr); }) == 0);
    CT_CHECK(goro_group_go(g, [] { throw std::runtime_error("member blew up"); }) == 0);
    goro_err_t *err = nullptr;
    std::exception_ptr ex;
    int r = goro_group_wait(g, nullptr, &err, &ex);
    CT_CHECK(r == -ENOTRECOVERABLE);
    CT_CHECK(err && std::strcmp(goro_err_msg(err), "member blew up") == 0);
    CT_CHECK(ex != nullptr);
    try {
        if (ex)
            std::rethrow_exception(ex);
    } catch (const std::runtime_error &e) {
        CT_CHECK(std::strcmp(e.what(), "member blew up") == 0);
    }
    goro_err_free(err);
    CT_CHECK(goro_group_free(g) == 0);

    /* The rethrowing wait, with a thrown int (not a std::exception). */
    CT_CHECK(goro_group_new(&g, nullptr) == 0);
    CT_CHECK(goro_group_go(g, [] { throw 7; }) == 0);
    int caught = 0;
    try {
        goro_group_wait_rethrow(g);
    } catch (int v) {
        caught = v;
    }
    CT_CHECK(caught == 7);
    CT_CHECK(goro_group_free(g) == 0);

    /* No exception: the rethrowing wait returns the result. */
    CT_CHECK(goro_group_new(&g, nullptr) == 0);
    CT_CHECK(goro_group_go(g, [] { return 1; }) == 0);
    CT_CHECK(goro_group_wait_rethrow(g) == 0);
    CT_CHECK(goro_group_free(g) == 0);
    goro_chan_free(never);
}
