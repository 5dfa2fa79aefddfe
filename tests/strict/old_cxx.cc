// Must NOT compile with -std=c++14: `make test-strict` checks that the
// only error is goro.h's one line asking for C++17.
#include <goro.h>

static int one(int a) { return a; }

int main()
{
    goro_t *h = go(one, 1);
    goro_attr_t attr{};
    return goro_go(&h, &attr, one, 2) + goro_join(h, nullptr);
}
