/* A first program against an installed goro (make test-install): built
 * through pkg-config and through CMake, shared and static. A producer and
 * a consumer on a channel, a spawn with a two-field attribute; prints one
 * line and exits 0 when every result is right. */
#include <goro.h>
#include <stdio.h>

static long sum_of(goro_chan_t *ch)
{
    long sum = 0;
    int v;
    while (goro_chan_recv(ch, &v) > 0)
        sum += v;
    return sum;
}

static void produce(goro_chan_t *ch, int n)
{
    for (int i = 1; i <= n; i++)
        goro_chan_send(ch, &i);
    goro_chan_close(ch);
}

int main(void)
{
    goro_chan_t *ch;
    goro_t *consumer;
    long sum = 0;
    if (goro_chan_new(&ch, sizeof(int), 4) != 0)
        return 1;
    if (goro_go(&consumer, GORO_ATTR(.name = "consumer", .stack_size = 65536),
                sum_of, ch) != 0)
        return 1;
    goro_detach(go(produce, ch, 100));
    goro_join(consumer, &sum);
    goro_chan_free(ch);
    printf("installed goro: sum 1..100 = %ld\n", sum);
    return goro_shutdown() == 0 && sum == 5050 ? 0 : 1;
}
