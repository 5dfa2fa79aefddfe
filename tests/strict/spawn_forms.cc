// The C++ spawn forms of goro.h, compiled by `make test-strict` with
// -std=c++17 and c++20 (-pedantic -Wall -Wextra -Werror), by g++ and by
// clang++, then run: results, attributes, groups and an exception that
// crosses a coroutine's end.
#include <goro.h>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

static void nothing() {}
static int two(int a, int b) { return a * 10 + b; }
static int named(const char *want) { return std::strcmp(goro_name(goro_self()), want) == 0; }
static int fails(int a)
{
    if (a < 0)
        throw std::runtime_error("negative");
    return a;
}

static int failures;

static void expect(const char *what, long got, long want)
{
    if (got != want) {
        std::fprintf(stderr, "spawn_forms (C++): %s gave %ld, want %ld\n", what, got, want);
        failures++;
    }
}

static long joined(goro_t *h)
{
    long r = -999;
    if (!h || goro_join(h, &r) != 0)
        return -998;
    return r;
}

int main()
{
    goro_t *h = nullptr;
    expect("go(nothing)", joined(go(nothing)), 0);
    expect("go(two, 4, 2)", joined(go(two, 4, 2)), 42);
    expect("go(lambda)", joined(go([] { return 5; })), 5);
    std::string s = "abc";
    expect("go(lambda, string)",
           joined(go([](const std::string &t) { return (int)t.size(); }, s)), 3);
    expect("goro_go nullptr attr", goro_go(&h, nullptr, two, 1, 2), 0);
    expect("  its join", joined(h), 12);
    goro_attr_t attr{};
    attr.name = "named";
    attr.stack_size = 65536;
    expect("goro_go &attr", goro_go(&h, &attr, named, "named"), 0);
    expect("  its name", joined(h), 1);

    goro_group_t *g = nullptr;
    expect("goro_group_new", goro_group_new(&g, nullptr), 0);
    expect("goro_group_go(g, nothing)", goro_group_go(g, nothing), 0);
    expect("goro_group_go(g, two, 1, 2)", goro_group_go(g, two, 1, 2), 0);
    expect("goro_group_wait", goro_group_wait(g, nullptr, nullptr), 0);
    expect("goro_group_free", goro_group_free(g), 0);

    long caught = 0;
    try {
        goro_join_rethrow(go(fails, -1));
    } catch (const std::runtime_error &e) {
        caught = std::strcmp(e.what(), "negative") == 0;
    }
    expect("an exception through goro_join_rethrow", caught, 1);

    expect("goro_shutdown", goro_shutdown(), 0);
    if (failures)
        return 1;
    std::printf("spawn_forms (C++): every form ran\n");
    return 0;
}
