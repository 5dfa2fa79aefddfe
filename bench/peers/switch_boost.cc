// switch_boost.cc - Boost.Context (fcontext) context-switch cost.
//
// Measures: ns per single context switch between two boost::context::fiber
// (fiber_fcontext backend, fixedsize_stack) contexts that resume each other.
// One resume() = one switch; a main->fiber->main round trip counts as two.
// Comparable to goro's raw switch benchmark: both are user-space register
// save/restore + stack-pointer swap with no scheduler and no signal-mask
// syscall. Best (minimum) of 5 repetitions of the timed loop.
//
// Output: name=switch impl=boost_fcontext value=<ns> unit=ns
#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>

#include <cstdio>
#include <ctime>
#include <memory>
#include <utility>

namespace ctx = boost::context;

static const long ROUND_TRIPS = 10000000;  // 2e7 switches per repetition
static const int REPS = 5;

static double now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main() {
    bool stop = false;
    ctx::fiber f{std::allocator_arg, ctx::fixedsize_stack(64 * 1024),
                 [&stop](ctx::fiber &&c) {
                     while (!stop) c = std::move(c).resume();
                     return std::move(c);
                 }};

    // warm-up
    for (long i = 0; i < 100000; i++) f = std::move(f).resume();

    double best = 1e300;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (long i = 0; i < ROUND_TRIPS; i++) f = std::move(f).resume();
        double t = (now_ns() - t0) / (2.0 * ROUND_TRIPS);
        if (t < best) best = t;
    }

    stop = true;
    f = std::move(f).resume();  // let the fiber return; f becomes empty
    if (f) {
        std::fprintf(stderr, "switch_boost: fiber did not terminate\n");
        return 1;
    }
    std::printf("name=switch impl=boost_fcontext value=%.2f unit=ns\n", best);
    return 0;
}
