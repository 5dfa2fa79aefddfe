/* Must NOT compile: a two-field attribute written straight into goro_go.
 * `make test-strict` checks that the compiler's first error names the fix
 * (GORO_ATTR). */
#include <goro.h>

static int one(int a) { return a; }

int main(void)
{
    goro_t *h;
    goro_go(&h, &(goro_attr_t){ .name = "x", .stack_size = 65536 }, one, 1);
    return goro_join(h, NULL);
}
