/* group.c - the cost of groups (docs/structured.md).
 *
 * group_member: ns per member for goro_group_go + run + exit + the group's
 *   wait, a trivial member (it stores one int), 1000 members per group
 *   (new, 1000 spawns, wait, free), next to join_member: the same with
 *   go() + goro_join of each handle, measured in the same process,
 *   alternating, best of 5 repetitions of 5e5 coroutines each. 1 worker:
 *   the spawner runs in a coroutine, as bench/spawn does.
 * group_cancel: ns per member to cancel a group of 10^5 members parked in
 *   a sleep and wait until all have unwound (goro_group_cancel +
 *   goro_group_wait), 2 workers; best of 3. With a mapping per stack
 *   (no MADV_GUARD_INSTALL) it needs 2 x 10^5 mappings: skipped (a
 *   "# skip" line) when vm.max_map_count is lower.
 *
 * Output:
 *   name=group_member impl=goro value=<ns> unit=ns
 *   name=join_member impl=goro value=<ns> unit=ns
 *   name=group_cancel impl=goro value=<ns> unit=ns
 */
#include "bench.h"

#include <errno.h>
#include <stdio.h>

#include <goro.h>

#define BATCH 1000
#define BATCHES 500L
#define REPS 5
#define PARKED 100000
#define CANCEL_REPS 3

static int sink[BATCH];
static goro_t *h[BATCH];

static void trivial(int i)
{
    sink[i] = i;
}

static void by_group(long nb)
{
    for (long b = 0; b < nb; b++) {
        goro_group_t *g;
        BENCH_CHECK(goro_group_new(&g, NULL));
        for (int i = 0; i < BATCH; i++)
            BENCH_CHECK(goro_group_go(g, trivial, i));
        BENCH_CHECK(goro_group_wait(g, NULL, NULL));
        BENCH_CHECK(goro_group_free(g));
    }
}

static void by_join(long nb)
{
    for (long b = 0; b < nb; b++) {
        for (int i = 0; i < BATCH; i++)
            BENCH_CHECK(goro_go(&h[i], NULL, trivial, i));
        for (int i = 0; i < BATCH; i++)
            BENCH_CHECK(goro_join(h[i], NULL));
    }
}

static double timed(void (*how)(long))
{
    double t0 = bench_now_ns();
    how(BATCHES);
    return (bench_now_ns() - t0) / (BATCH * BATCHES);
}

static void members(double out[2])
{
    by_group(10);                   /* warm-up: fills the stack pools */
    by_join(10);
    out[0] = out[1] = 1e300;
    for (int r = 0; r < REPS; r++) {
        double g = timed(by_group), j = timed(by_join);
        out[0] = g < out[0] ? g : out[0];
        out[1] = j < out[1] ? j : out[1];
    }
}

static long parked(void)
{
    return goro_sleep(3600 * GORO_SEC);
}

static double cancel_parked(void)
{
    double best = 1e300;
    for (int r = 0; r < CANCEL_REPS; r++) {
        goro_group_t *g;
        BENCH_CHECK(goro_group_new(&g, NULL));
        for (int i = 0; i < PARKED; i++)
            BENCH_CHECK(goro_group_go(g, parked));
        goro_sleep(20 * GORO_MSEC);     /* every member parked */
        double t0 = bench_now_ns();
        BENCH_CHECK(goro_group_cancel(g));
        int rc = goro_group_wait(g, NULL, NULL);
        double t = (bench_now_ns() - t0) / PARKED;
        if (rc != -ECANCELED) {
            fprintf(stderr, "group_cancel: the wait returned %d, want -ECANCELED\n", rc);
            exit(1);
        }
        BENCH_CHECK(goro_group_free(g));
        best = t < best ? t : best;
    }
    return best;
}

static void cancel_into(double *out)
{
    *out = cancel_parked();
}

static long map_count_max(void)
{
    long v = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = 0;
        fclose(f);
    }
    return v;
}

int main(void)
{
    double m[2];
    goro_t *d;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 1 }));
    BENCH_CHECK(goro_go(&d, NULL, members, m));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_report("group_member", m[0], "ns");
    bench_report("join_member", m[1], "ns");

    double c;
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 2 }));
    if (!bench_stacks_in_arenas() && map_count_max() < 2L * PARKED + 10000) {
        printf("# skip: group_cancel: vm.max_map_count is below %ld\n", 2L * PARKED + 10000);
        return goro_shutdown() != 0;
    }
    BENCH_CHECK(goro_go(&d, NULL, cancel_into, &c));
    BENCH_CHECK(goro_join(d, NULL));
    BENCH_CHECK(goro_shutdown());
    bench_report("group_cancel", c, "ns");
    return 0;
}
