// A C++ program against an installed goro (make test-install), shared and
// -static: an exception thrown and caught inside a coroutine, one that
// crosses the coroutine's end to its joiner, and goro_exit unwinding a
// destructor. Prints one line and exits 0 when each happened.
#include <goro.h>
#include <cstdio>
#include <stdexcept>
#include <string>

static int destroyed;

struct Guard {
    ~Guard() { destroyed++; }
};

static int thrower(int n)
{
    std::string s(64, 'x');             // a destructor on the unwind path
    if (n > 0)
        throw std::runtime_error("thrown in a coroutine");
    return 0;
}

static int catcher(int n)
{
    try {
        return thrower(n);
    } catch (const std::runtime_error &) {
        return 7;
    }
}

static void exits()
{
    Guard g;
    goro_exit(3);
}

int main()
{
    long inside = 0, exited = 0;
    goro_join(go(catcher, 1), &inside);
    bool crossed = false;
    try {
        goro_join_rethrow(go(thrower, 1));
    } catch (const std::runtime_error &e) {
        crossed = std::string(e.what()) == "thrown in a coroutine";
    }
    goro_join(go(exits), &exited);
    std::printf("installed goro (C++): caught inside %ld, across the join %d, "
                "goro_exit %ld with %d destructor\n", inside, crossed, exited, destroyed);
    return goro_shutdown() == 0 && inside == 7 && crossed && exited == 3 && destroyed == 1 ? 0 : 1;
}
