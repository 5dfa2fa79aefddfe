/* pipeline.c - scheduled pipelines (docs/pipelines.md) against their
 * baselines, on two CPU-bound jobs of three stages each:
 *   balanced  every stage BAL rounds of work per item;
 *   moving    the first half of the items heavy in stage 0, the second
 *             half heavy in stage 2 (HEAVY rounds; the others LIGHT):
 *             the bottleneck moves mid-run.
 * A round is one splitmix64 step (bench/peers/go/pipeline.go does the
 * same arithmetic). Every mode must produce the same checksum.
 *
 * Modes, 2 worker threads (GORO_WORKERS=2) unless said:
 *   loop       one thread, the three stages one after the other per item
 *              (the COST baseline), no runtime;
 *   dhondt     goro_pipeline, 2 stage workers, D'Hondt allocation;
 *   static     2 stage workers split evenly: worker 0 serves stages 0 and
 *              2, worker 1 stage 1;
 *   per_stage  3 stage workers, one per stage (static);
 *   ordered    dhondt with ordered output.
 * Also the allocator's decision for 16 stages x 64 workers, and the two
 * scoring rules compared on random loads (how often they differ, and what
 * each costs in the other's measure).
 *
 * Output (best of REPS; times in ms):
 *   name=pipeline_<job>_<mode> impl=goro value=<ms> unit=ms
 *   name=pipeline_alloc_16x64 impl=goro value=<ns> unit=ns
 *   name=pipeline_alloc_4x8, pipeline_exhaustive_4x8 (ns per decision)
 *   name=pipeline_rules_differ (% of random loads)
 *   name=pipeline_dhondt_sum_excess_{mean,max} (% over the least sum)
 *   name=pipeline_exhaustive_bottleneck_excess_{mean,max} (% over D'Hondt's)
 */
#include "bench.h"

#include <goro.h>

#define N 30000L
#define BAL 2000
#define LIGHT 600
#define HEAVY 6000
#define REPS 3

struct item {
    uint64_t n, v;
};

static struct item items[N];
static int job_moving;

static uint64_t rounds(uint64_t x, int k)
{
    for (int i = 0; i < k; i++) {
        x += 0x9e3779b97f4a7c15ull;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        x = z ^ (z >> 31);
    }
    return x;
}

static int cost(int stage, uint64_t n)
{
    if (!job_moving)
        return BAL;
    int heavy = n < N / 2 ? 0 : 2;
    return stage == heavy ? HEAVY : LIGHT;
}

static void stage_work(int stage, struct item *it)
{
    it->v = rounds(it->v + (uint64_t)stage, cost(stage, it->n));
}

static long stage_fn(void **item, void *arg, goro_err_t **err)
{
    (void)err;
    stage_work((int)(intptr_t)arg, *item);
    return 0;
}

static long next_item;

static long source(void **out, void *arg)
{
    (void)arg;
    if (next_item == N)
        return GORO_PIPELINE_END;
    struct item *it = &items[next_item];
    it->n = (uint64_t)next_item;
    it->v = (uint64_t)next_item++;
    *out = it;
    return 0;
}

struct sum {
    uint64_t xor;
    long count;
    int ordered;
    long last;
};

static long sink(void *item, void *arg)
{
    struct sum *s = arg;
    struct item *it = item;
    if (s->ordered && (long)it->n != s->last + 1)
        bench_die("pipeline: item %llu after %ld", (unsigned long long)it->n, s->last);
    s->last = (long)it->n;
    s->xor ^= it->v * 0x9e3779b97f4a7c15ull + it->n;
    s->count++;
    return 0;
}

static uint64_t run_loop(void)
{
    struct sum s = { 0 };
    for (long i = 0; i < N; i++) {
        struct item it = { (uint64_t)i, (uint64_t)i };
        for (int st = 0; st < 3; st++)
            stage_work(st, &it);
        sink(&it, &s);
    }
    return s.xor;
}

static uint64_t run_pipeline(int rule, int workers, int ordered)
{
    goro_pipeline_t *p;
    BENCH_CHECK(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .rule = rule, .workers = workers,
                                                               .ordered = ordered }));
    for (intptr_t st = 0; st < 3; st++)
        BENCH_CHECK(goro_pipeline_stage(p, &(goro_stage_t){ .fn = stage_fn, .arg = (void *)st }));
    next_item = 0;
    struct sum s = { .ordered = ordered, .last = -1 };
    goro_err_t *err = NULL;
    int r = goro_pipeline_run(p, source, NULL, sink, &s, &err);
    if (r) {
        goro_err_print(stderr, err);
        bench_die("pipeline: run failed");
    }
    if (s.count != N)
        bench_die("pipeline: %ld items out of %ld", s.count, N);
    BENCH_CHECK(goro_pipeline_free(p));
    return s.xor;
}

enum { LOOP, DHONDT, STATIC, PER_STAGE, ORDERED, MODES };
static const char *const mode_name[MODES] = { "loop", "dhondt", "static", "per_stage",
                                              "ordered" };

static uint64_t run_mode(int mode)
{
    switch (mode) {
    case LOOP: return run_loop();
    case DHONDT: return run_pipeline(GORO_PIPELINE_DHONDT, 2, 0);
    case STATIC: return run_pipeline(GORO_PIPELINE_STATIC, 2, 0);
    case PER_STAGE: return run_pipeline(GORO_PIPELINE_STATIC, 3, 0);
    default: return run_pipeline(GORO_PIPELINE_DHONDT, 2, 1);
    }
}

static void bench_job(const char *job)
{
    double best[MODES];
    uint64_t want = 0;
    for (int m = 0; m < MODES; m++)
        best[m] = 1e300;
    /* Modes interleaved per repetition, so that all see the same load. */
    for (int rep = 0; rep < REPS; rep++)
        for (int m = 0; m < MODES; m++) {
            double t0 = bench_now_ns();
            uint64_t x = run_mode(m);
            double ms = (bench_now_ns() - t0) / 1e6;
            if (m == LOOP && rep == 0)
                want = x;
            else if (x != want)
                bench_die("pipeline %s %s: checksum %llx, the loop's %llx", job, mode_name[m],
                          (unsigned long long)x, (unsigned long long)want);
            if (ms < best[m])
                best[m] = ms;
        }
    for (int m = 0; m < MODES; m++) {
        char name[64];
        snprintf(name, sizeof name, "pipeline_%s_%s", job, mode_name[m]);
        bench_report(name, best[m], "ms");
    }
}

static double decision_ns(int rule, goro_stage_load_t *load, int S, int W, long calls)
{
    int seats[GORO_PIPELINE_STAGES_MAX];
    double best = 1e300;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = bench_now_ns();
        for (long i = 0; i < calls; i++) {
            load[i % S].queued = (long)((uint64_t)(load[i % S].queued * 7 + 13) % 500);
            if (goro_pipeline_allocate(rule, load, S, W, seats) < 0)
                bench_die("allocate failed");
        }
        double ns = (bench_now_ns() - t0) / (double)calls;
        if (ns < best)
            best = ns;
    }
    return best;
}

/* The allocator's decision: 16 stages of random loads and 64 workers;
 * 4 stages and 8 workers under both rules. */
static void bench_alloc(void)
{
    goro_stage_load_t load[16];
    uint64_t x = 1;
    for (int s = 0; s < 16; s++) {
        x = rounds(x, 1);
        load[s] = (goro_stage_load_t){ (long)(x % 500), (double)(1 + (x >> 20) % 50000), 0 };
    }
    bench_report("pipeline_alloc_16x64", decision_ns(GORO_PIPELINE_DHONDT, load, 16, 64, 200000),
                 "ns");
    bench_report("pipeline_alloc_4x8", decision_ns(GORO_PIPELINE_DHONDT, load, 4, 8, 200000),
                 "ns");
    bench_report("pipeline_exhaustive_4x8",
                 decision_ns(GORO_PIPELINE_EXHAUSTIVE, load, 4, 8, 20000), "ns");
}

static double score_sum(const goro_stage_load_t *l, const int *w, int S)
{
    double sum = 0;
    for (int s = 0; s < S; s++)
        if (!l[s].done)
            sum += (double)l[s].queued * l[s].service_ns / (w[s] + 1);
    return sum;
}

static double score_max(const goro_stage_load_t *l, const int *w, int S)
{
    double m = 0;
    for (int s = 0; s < S; s++) {
        double q = l[s].done ? 0 : (double)l[s].queued * l[s].service_ns / (w[s] + 1);
        if (q > m)
            m = q;
    }
    return m;
}

/* D'Hondt against the least sum on random loads: 2..6 stages, 1..12
 * workers, queues 0..100, service times 1..100, one stage in 8 done. */
static void bench_rules(void)
{
    enum { CASES = 100000 };
    uint64_t x = 7;
    long differ = 0, n = 0;
    double sum_ex = 0, sum_max = 0, bott_ex = 0, bott_max = 0;
    for (int c = 0; c < CASES; c++) {
        goro_stage_load_t load[6];
        x = rounds(x, 1);
        int S = 2 + (int)(x % 5), W = 1 + (int)((x >> 8) % 12);
        for (int s = 0; s < S; s++) {
            x = rounds(x, 1);
            load[s] = (goro_stage_load_t){ (long)(x % 101), (double)(1 + (x >> 16) % 100),
                                           (x >> 40) % 8 == 0 };
        }
        int dh[6], ex[6];
        if (goro_pipeline_allocate(GORO_PIPELINE_DHONDT, load, S, W, dh) <= 0 ||
            goro_pipeline_allocate(GORO_PIPELINE_EXHAUSTIVE, load, S, W, ex) <= 0)
            continue;
        n++;
        differ += memcmp(dh, ex, sizeof(int) * (size_t)S) != 0;
        double e1 = 100 * (score_sum(load, dh, S) / score_sum(load, ex, S) - 1);
        double e2 = 100 * (score_max(load, ex, S) / score_max(load, dh, S) - 1);
        sum_ex += e1;
        bott_ex += e2;
        if (e1 > sum_max)
            sum_max = e1;
        if (e2 > bott_max)
            bott_max = e2;
    }
    bench_report("pipeline_rules_differ", 100.0 * differ / n, "%");
    bench_report("pipeline_dhondt_sum_excess_mean", sum_ex / n, "%");
    bench_report("pipeline_dhondt_sum_excess_max", sum_max, "%");
    bench_report("pipeline_exhaustive_bottleneck_excess_mean", bott_ex / n, "%");
    bench_report("pipeline_exhaustive_bottleneck_excess_max", bott_max, "%");
}

int main(void)
{
    BENCH_CHECK(goro_start(&(goro_config_t){ .workers = 2 }));
    job_moving = 0;
    bench_job("balanced");
    job_moving = 1;
    bench_job("moving");
    bench_alloc();
    bench_rules();
    BENCH_CHECK(goro_shutdown());
    return 0;
}
