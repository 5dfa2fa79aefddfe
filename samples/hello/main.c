/* hello: spawning coroutines with ordinary C functions and joining them.
 * The main sample until samples/echod exists. */
#include <goro.h>
#include <stdio.h>
#include <string.h>

static int add(int a, int b) { return a + b; }

static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static void greet(const char *who, int times)
{
    for (int i = 0; i < times; i++) {
        printf("hello, %s (%d/%d) from coroutine %llu\n", who, i + 1, times,
               (unsigned long long)goro_id(goro_self()));
        goro_yield();
    }
}

int main(void)
{
    long r;
    goro_t *h = go(add, 2, 3);
    if (!h || goro_join(h, &r) != 0) {
        perror("go");
        return 1;
    }
    printf("add(2, 3) = %ld\n", r);

    goro_t *a = go(greet, "world", 3);
    goro_t *b = go(greet, "goro", 3);
    goro_join(a, NULL);
    goro_join(b, NULL);

    enum { N = 8 };
    goro_t *f[N];
    for (int i = 0; i < N; i++)
        f[i] = go(fib, 20 + i);
    for (int i = 0; i < N; i++) {
        goro_join(f[i], &r);
        printf("fib(%d) = %ld\n", 20 + i, r);
    }
    printf("%d workers; shutting down\n", goro_workers());
    return goro_shutdown() == 0 ? 0 : 1;
}
