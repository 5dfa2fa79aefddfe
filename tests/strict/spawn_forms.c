/* Every spawn form of goro.h, compiled by `make test-strict` in each C
 * mode a user may pick (-std=c11, c17, c2x, gnu11, with -pedantic -Wall
 * -Wextra -Werror, by gcc and by clang), then run: each coroutine's result
 * must be what the direct call gives. No GNU extension is needed at the
 * call site. */
#include <goro.h>
#include <stdio.h>
#include <string.h>

struct pair { long a, b; };

static void nothing(void) {}
static int one(int a) { return a; }
static int two(int a, int b) { return a * 10 + b; }
static long six(long a, long b, long c, long d, long e, long f)
{
    return a + b + c + d + e + f;
}
static long twelve(long a, long b, long c, long d, long e, long f, long g,
                   long h, long i, long j, long k, long l)
{
    return a + b + c + d + e + f + g + h + i + j + k + l;
}
static long mixed(char c, double d, struct pair p, const char *s, float f)
{
    return c + (long)d + p.a + p.b + (long)strlen(s) + (long)f;
}
/* 1 when the running coroutine has the name want */
static int named(const char *want) { return strcmp(goro_name(goro_self()), want) == 0; }

static int failures;

static void expect(const char *what, long got, long want)
{
    if (got != want) {
        fprintf(stderr, "spawn_forms: %s gave %ld, want %ld\n", what, got, want);
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

int main(void)
{
    goro_t *h = NULL;
    long (*fp)(long, long, long, long, long, long) = six;
    struct pair p = { 3, 4 };

    /* go(): no arguments, one, two, up to the register limit, past it,
     * through a function pointer, of mixed types */
    expect("go(nothing)", joined(go(nothing)), 0);
    expect("go(one, 7)", joined(go(one, 7)), 7);
    expect("go(two, 4, 2)", joined(go(two, 4, 2)), 42);
    expect("go(six, ...)", joined(go(six, 1, 2, 3, 4, 5, 6)), 21);
    expect("go(fp, ...)", joined(go(fp, 1, 1, 1, 1, 1, 1)), 6);
    expect("go(twelve, ...)",
           joined(go(twelve, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)), 78);
    expect("go(mixed, ...)",
           joined(go(mixed, 1, 2.5, p, "abcde", 6.0f)),
           1 + 2 + 3 + 4 + 5 + 6);

    /* goro_go(): NULL attribute, with and without arguments, detached */
    expect("goro_go NULL attr", goro_go(&h, NULL, nothing), 0);
    expect("  its join", joined(h), 0);
    expect("goro_go NULL attr, args", goro_go(&h, NULL, two, 1, 2), 0);
    expect("  its join", joined(h), 12);
    expect("goro_go detached", goro_go(NULL, NULL, one, 1), 0);

    /* attributes: a named one, one field in place, several fields through
     * GORO_ATTR or in parentheses */
    goro_attr_t attr = { .name = "named", .stack_size = 65536 };
    expect("goro_go &attr", goro_go(&h, &attr, named, "named"), 0);
    expect("  its name", joined(h), 1);
    expect("goro_go one field", goro_go(&h, &(goro_attr_t){ .name = "one" }, named, "one"), 0);
    expect("  its name", joined(h), 1);
    expect("goro_go GORO_ATTR",
           goro_go(&h, GORO_ATTR(.name = "attr", .stack_size = 65536), named, "attr"), 0);
    expect("  its name", joined(h), 1);
    expect("goro_go GORO_ATTR, args",
           goro_go(&h, GORO_ATTR(.name = "x", .stack_size = 65536,
                                 .priority = GORO_PRIORITY_HIGH), two, 3, 4), 0);
    expect("  its join", joined(h), 34);
    expect("goro_go (&(goro_attr_t){ a, b })",
           goro_go(&h, (&(goro_attr_t){ .name = "paren", .stack_size = 65536 }), named, "paren"), 0);
    expect("  its name", joined(h), 1);

    /* groups: members with no arguments and with some */
    goro_group_t *g = NULL;
    expect("goro_group_new", goro_group_new(&g, NULL), 0);
    expect("goro_group_go(g, nothing)", goro_group_go(g, nothing), 0);
    expect("goro_group_go(g, six, ...)", goro_group_go(g, six, 1, 2, 3, 4, 5, 6), 0);
    expect("goro_group_wait", goro_group_wait(g, NULL, NULL), 0);
    expect("goro_group_free", goro_group_free(g), 0);

    expect("goro_shutdown", goro_shutdown(), 0);
    if (failures)
        return 1;
    printf("spawn_forms: every form ran\n");
    return 0;
}
