/* cxx_spawn.cc - the C++ go() against the plain C spawn: ns per coroutine for
 * spawn + run + exit + join of a trivial coroutine, in batches of 1000, the
 * spawning done by a coroutine, on 1 worker then 2 (as bench/spawn.c
 * measures the C go() macro). Best (minimum) of 5 repetitions of 2e5.
 *
 *   make bench-cxx-spawn       (bench/spawn gives the C go() figure)
 *
 * Output, one line per figure: name=<what> impl=goro value=<ns> unit=ns
 *   spawn_cxx_fnptr      go(f, i): a function pointer and an int
 *   spawn_cxx_small      go([i] {...}): fits in a pointer, so no allocation
 *   spawn_cxx_lambda     go([s, i] {...}): a lambda holding a std::string
 *   spawn_c_plain        goro_spawn(&h, NULL, fn, arg): no C++ at all */
#include <goro.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <time.h>

namespace {

constexpr int batch = 1000;
constexpr long batches = 200;
constexpr int reps = 5;

int sink[batch];
goro_t *handles[batch];

double now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

void check(int err, const char *what)
{
    if (err < 0) {
        std::fprintf(stderr, "%s failed: %d\n", what, err);
        std::exit(1);
    }
}

void trivial(int i)
{
    sink[i] = i;
}

long trivial_plain(void *arg)
{
    long i = reinterpret_cast<long>(arg);
    sink[i] = static_cast<int>(i);
    return 0;
}

enum kind { fnptr, small, lambda, plain };

void run(kind k, long nb)
{
    const std::string text = "a string too long for the small-string buffer";
    for (long b = 0; b < nb; b++) {
        for (int i = 0; i < batch; i++) {
            switch (k) {
            case fnptr:
                check(goro_go(&handles[i], nullptr, trivial, i), "goro_go");
                break;
            case small:
                check(goro_go(&handles[i], nullptr, [i] { sink[i] = i; }), "goro_go");
                break;
            case lambda:
                check(goro_go(&handles[i], nullptr,
                              [text, i] { sink[i] = static_cast<int>(text.size()); }),
                      "goro_go");
                break;
            case plain:
                check(goro_spawn(&handles[i], nullptr, trivial_plain,
                                 reinterpret_cast<void *>(static_cast<long>(i))),
                      "goro_spawn");
                break;
            }
        }
        for (int i = 0; i < batch; i++)
            check(goro_join(handles[i], nullptr), "goro_join");
    }
}

double best_of(kind k)
{
    run(k, 10);                     /* warm-up: fills the stack pools */
    double best = 1e300;
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        run(k, batches);
        double t = (now_ns() - t0) / (batch * batches);
        if (t < best)
            best = t;
    }
    return best;
}

void measure(int workers, const char *suffix)
{
    goro_config_t cfg = {};
    cfg.workers = workers;
    check(goro_start(&cfg), "goro_start");
    const struct { kind k; const char *name; } figures[] = {
        { fnptr, "spawn_cxx_fnptr" }, { small, "spawn_cxx_small" },
        { lambda, "spawn_cxx_lambda" }, { plain, "spawn_c_plain" },
    };
    for (const auto &f : figures) {
        double ns = 0;
        check(goro_join(go([&ns, &f] { ns = best_of(f.k); }), nullptr), "driver");
        std::printf("name=%s%s impl=goro value=%.2f unit=ns\n", f.name, suffix, ns);
        std::fflush(stdout);
    }
    check(goro_shutdown(), "goro_shutdown");
}

} // namespace

int main()
{
    measure(1, "");
    measure(2, "_2w");
    return 0;
}
