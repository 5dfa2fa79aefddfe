/* Pipelines (docs/pipelines.md): the allocator alone - the worked
 * examples, D'Hondt against exhaustive scoring on random loads - and whole
 * runs: every item through, ordered output, workers moving to the
 * bottleneck (and not under the static rule), fail-fast and skip-failed,
 * cancel, deadline and a cancelled caller with no item lost, stats and the
 * SVG, bad use, and a randomized stress of pipeline shapes.
 *
 * Items are malloc'd: every item the source makes must be sunk, dropped
 * (freed by the stage) or discarded (freed by attr.discard) exactly once,
 * which ASan and valgrind check along with the counters.
 *
 * Coroutines never call ck_assert (see helpers.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "suites.h"

/* ---- the allocator ---- */

static int alloc2(int rule, long la, double ta, int da, long lb, double tb, int db, int w,
                  int seats[2])
{
    goro_stage_load_t load[2] = { { la, ta, da }, { lb, tb, db } };
    return goro_pipeline_allocate(rule, load, 2, w, seats);
}

START_TEST(allocate_worked_examples)
{
    for (int rule = GORO_PIPELINE_DHONDT; rule <= GORO_PIPELINE_EXHAUSTIVE; rule++) {
        int s[2];
        /* 2 workers; A has 3 items, B none: both to A. */
        ck_assert_int_eq(alloc2(rule, 3, 1, 0, 0, 1, 0, 2, s), 2);
        ck_assert_msg(s[0] == 2 && s[1] == 0, "rule %d: A %d B %d", rule, s[0], s[1]);
        /* A 1 item, B 2, service times [1, 1]: one each. */
        ck_assert_int_eq(alloc2(rule, 1, 1, 0, 2, 1, 0, 2, s), 2);
        ck_assert_msg(s[0] == 1 && s[1] == 1, "rule %d: A %d B %d", rule, s[0], s[1]);
        /* A done, B 2 items: both to B. */
        ck_assert_int_eq(alloc2(rule, 0, 1, 1, 2, 1, 0, 2, s), 2);
        ck_assert_msg(s[0] == 0 && s[1] == 2, "rule %d: A %d B %d", rule, s[0], s[1]);
        /* Both done: nothing; a done stage with items left still gets none. */
        ck_assert_int_eq(alloc2(rule, 0, 1, 1, 0, 1, 1, 2, s), 0);
        ck_assert_msg(s[0] == 0 && s[1] == 0, "rule %d", rule);
        ck_assert_int_eq(alloc2(rule, 5, 1, 1, 0, 1, 0, 2, s), 0);
        /* Service time weighs: 10 items of 1 against 2 of 10. */
        ck_assert_int_eq(alloc2(rule, 10, 1, 0, 2, 10, 0, 3, s), 3);
        ck_assert_msg(s[0] == 1 && s[1] == 2, "rule %d: A %d B %d", rule, s[0], s[1]);
        /* The tie rule: equal work, one seat - the later stage. */
        ck_assert_int_eq(alloc2(rule, 4, 1, 0, 4, 1, 0, 1, s), 1);
        ck_assert_msg(s[0] == 0 && s[1] == 1, "rule %d: A %d B %d", rule, s[0], s[1]);
    }
    /* The rules differ beyond ties: work 10 and 4, two seats. D'Hondt gives
     * both to A (quotients 10, then 5 > 4); the least sum is one each
     * (10/2 + 4/2 = 7 < 10/3 + 4 = 7.33). */
    int s[2];
    alloc2(GORO_PIPELINE_DHONDT, 10, 1, 0, 4, 1, 0, 2, s);
    ck_assert_msg(s[0] == 2 && s[1] == 0, "D'Hondt: A %d B %d", s[0], s[1]);
    alloc2(GORO_PIPELINE_EXHAUSTIVE, 10, 1, 0, 4, 1, 0, 2, s);
    ck_assert_msg(s[0] == 1 && s[1] == 1, "exhaustive: A %d B %d", s[0], s[1]);

    /* Bad input. */
    goro_stage_load_t load[GORO_PIPELINE_STAGES_MAX + 1] = { { 1, 1, 0 } };
    int seats[GORO_PIPELINE_STAGES_MAX + 1];
    ck_assert_int_eq(goro_pipeline_allocate(0, NULL, 1, 1, seats), -EINVAL);
    ck_assert_int_eq(goro_pipeline_allocate(0, load, 1, 1, NULL), -EINVAL);
    ck_assert_int_eq(goro_pipeline_allocate(0, load, 0, 1, seats), -EINVAL);
    ck_assert_int_eq(goro_pipeline_allocate(0, load, GORO_PIPELINE_STAGES_MAX + 1, 1, seats),
                     -EINVAL);
    ck_assert_int_eq(goro_pipeline_allocate(0, load, 1, 0, seats), -EINVAL);
    ck_assert_int_eq(goro_pipeline_allocate(0, load, 1, 65537, seats), -EINVAL);
    ck_assert_int_eq(goro_pipeline_allocate(GORO_PIPELINE_STATIC, load, 1, 1, seats), -EINVAL);
    ck_assert_int_eq(goro_pipeline_allocate(7, load, 1, 1, seats), -EINVAL);
    load[0].service_ns = NAN;
    ck_assert_int_eq(goro_pipeline_allocate(0, load, 1, 1, seats), -EINVAL);
    load[0] = (goro_stage_load_t){ -1, 1, 0 };
    ck_assert_int_eq(goro_pipeline_allocate(0, load, 1, 1, seats), -EINVAL);
    /* Exhaustive over 16 stages and 64 workers: C(79, 15) allocations. */
    for (int i = 0; i < 16; i++)
        load[i] = (goro_stage_load_t){ 10 + i, 1, 0 };
    ck_assert_int_eq(goro_pipeline_allocate(GORO_PIPELINE_EXHAUSTIVE, load, 16, 64, seats),
                     -E2BIG);
    ck_assert_int_eq(goro_pipeline_allocate(GORO_PIPELINE_DHONDT, load, 16, 64, seats), 64);
    int sum = 0;
    for (int i = 0; i < 16; i++)
        sum += seats[i];
    ck_assert_int_eq(sum, 64);
}
END_TEST

/* Test-side brute force over every allocation of w seats to the stages
 * with work: the least largest quotient, compared as sorted vectors
 * (leximin), and the least sum; counts the optima of each. */
struct brute {
    int n;
    double work[6];
    int cur[6], best_mm[6], best_sum[6];
    double mm[6], sum;
    int n_mm, n_sum;
    bool have;
};

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static void sorted_quotients(const struct brute *b, const int *w, double *q)
{
    int k = 0;
    for (int s = 0; s < b->n; s++)
        if (b->work[s] > 0)
            q[k++] = b->work[s] / (w[s] + 1);
    qsort(q, (size_t)k, sizeof *q, cmp_desc);
}

static int leximin_cmp(const struct brute *b, const double *x, const double *y)
{
    int k = 0;
    for (int s = 0; s < b->n; s++)
        k += b->work[s] > 0;
    for (int i = 0; i < k; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

static double sum_score(const struct brute *b, const int *w)
{
    double sum = 0;
    for (int s = 0; s < b->n; s++)
        if (b->work[s] > 0)
            sum += b->work[s] / (w[s] + 1);
    return sum;
}

static void brute_walk(struct brute *b, int s, int left)
{
    if (s == b->n) {
        if (left)
            return;
        double q[6], sum = sum_score(b, b->cur);
        sorted_quotients(b, b->cur, q);
        if (!b->have || leximin_cmp(b, q, b->mm) < 0) {
            memcpy(b->mm, q, sizeof q);
            memcpy(b->best_mm, b->cur, sizeof b->cur);
            b->n_mm = 1;
        } else if (leximin_cmp(b, q, b->mm) == 0) {
            b->n_mm++;
        }
        double eps = 1e-9 * sum;
        if (!b->have || sum < b->sum - eps) {
            b->sum = sum;
            memcpy(b->best_sum, b->cur, sizeof b->cur);
            b->n_sum = 1;
        } else if (fabs(sum - b->sum) <= eps) {
            b->n_sum++;
        }
        b->have = true;
        return;
    }
    if (b->work[s] <= 0) {
        b->cur[s] = 0;
        brute_walk(b, s + 1, left);
        return;
    }
    for (int w = 0; w <= left; w++) {
        b->cur[s] = w;
        brute_walk(b, s + 1, left - w);
    }
}

/* D'Hondt by the book: one seat at a time to the largest quotient; on a
 * tie the stage with fewer seats, then the later one. */
static void dhondt_by_the_book(const double *work, int n, int w, int *seats)
{
    memset(seats, 0, sizeof(int) * (size_t)n);
    for (int k = 0; k < w; k++) {
        int best = -1;
        for (int s = 0; s < n; s++) {
            if (work[s] <= 0)
                continue;
            double q = work[s] / (seats[s] + 1), qb = best < 0 ? 0 : work[best] / (seats[best] + 1);
            if (best < 0 || q > qb || (q == qb && seats[s] <= seats[best]))
                best = s;
        }
        if (best < 0)
            return;
        seats[best]++;
    }
}

START_TEST(allocate_dhondt_is_the_seat_by_seat_method)
{
    /* The allocator starts each stage above zero seats (alloc.c); the
     * result must be the one-at-a-time method's, ties included: small
     * integer loads make many. */
    uint32_t seed = 0xd4ed7;
    for (long k = 0; k < t_scale(100000); k++) {
        int n = 1 + (int)(t_rnd(&seed) % 16), w = 1 + (int)(t_rnd(&seed) % 64);
        goro_stage_load_t load[16];
        double work[16];
        for (int s = 0; s < n; s++) {
            bool small = t_rnd(&seed) % 2;
            load[s] = (goro_stage_load_t){ (long)(t_rnd(&seed) % (small ? 4 : 1000)),
                                           small ? 1 : 1 + t_rnd(&seed) % 100000 / 7.0,
                                           t_rnd(&seed) % 8 == 0 };
            work[s] = load[s].done ? 0 : load[s].queued * load[s].service_ns;
        }
        int got[16], want[16];
        goro_pipeline_allocate(GORO_PIPELINE_DHONDT, load, n, w, got);
        dhondt_by_the_book(work, n, w, want);
        for (int s = 0; s < n; s++)
            ck_assert_msg(got[s] == want[s], "case %ld: stage %d of %d, %d workers: %d, not %d",
                          k, s, n, w, got[s], want[s]);
    }
}
END_TEST

START_TEST(allocate_dhondt_against_exhaustive_on_random_loads)
{
    uint32_t seed = 0x5eed1234;
    long trials = t_scale(20000), differ_sum = 0, unique_mm = 0;
    for (long k = 0; k < trials; k++) {
        struct brute b = { .n = 1 + (int)(t_rnd(&seed) % 5) };
        goro_stage_load_t load[6];
        int w = 1 + (int)(t_rnd(&seed) % 8), any = 0;
        for (int s = 0; s < b.n; s++) {
            load[s] = (goro_stage_load_t){ (long)(t_rnd(&seed) % 12),
                                           (double)(1 + t_rnd(&seed) % 6),
                                           t_rnd(&seed) % 6 == 0 };
            b.work[s] = load[s].done ? 0 : load[s].queued * load[s].service_ns;
            any |= b.work[s] > 0;
        }
        int dh[6], ex[6];
        int gd = goro_pipeline_allocate(GORO_PIPELINE_DHONDT, load, b.n, w, dh);
        int ge = goro_pipeline_allocate(GORO_PIPELINE_EXHAUSTIVE, load, b.n, w, ex);
        ck_assert_int_eq(gd, any ? w : 0);
        ck_assert_int_eq(ge, any ? w : 0);
        if (!any)
            continue;
        brute_walk(&b, 0, w);
        /* D'Hondt is the leximin optimum: the same quotients always, the
         * same allocation whenever that optimum is unique. */
        double q[6];
        sorted_quotients(&b, dh, q);
        ck_assert_msg(leximin_cmp(&b, q, b.mm) == 0, "trial %ld: D'Hondt not leximin", k);
        if (b.n_mm == 1) {
            unique_mm++;
            ck_assert_msg(memcmp(dh, b.best_mm, sizeof(int) * (size_t)b.n) == 0,
                          "trial %ld: D'Hondt differs from the unique optimum", k);
        }
        /* Exhaustive finds the least sum; the same allocation when unique. */
        ck_assert_msg(fabs(sum_score(&b, ex) - b.sum) <= 1e-9 * b.sum, "trial %ld", k);
        if (b.n_sum == 1)
            ck_assert_msg(memcmp(ex, b.best_sum, sizeof(int) * (size_t)b.n) == 0,
                          "trial %ld: exhaustive differs from the unique least sum", k);
        /* No seat on a stage without work. */
        for (int s = 0; s < b.n; s++)
            ck_assert(b.work[s] > 0 || (dh[s] == 0 && ex[s] == 0));
        differ_sum += sum_score(&b, dh) > b.sum * (1 + 1e-9);
    }
    /* Most optima are unique, and the two scoring rules do disagree. */
    ck_assert_msg(unique_mm > trials / 2, "%ld of %ld unique", unique_mm, trials);
    ck_assert_msg(differ_sum > 0, "D'Hondt never differed from the least sum");
}
END_TEST

/* ---- items and their accounting ---- */

struct item {
    uint64_t n;                      /* the source's count */
    uint64_t v;
};

static atomic_long made, sunk, discarded, dropped_items;

static void counters_reset(void)
{
    atomic_store(&made, 0);
    atomic_store(&sunk, 0);
    atomic_store(&discarded, 0);
    atomic_store(&dropped_items, 0);
}

static void discard_item(void *item, void *arg)
{
    (void)arg;
    free(item);
    atomic_fetch_add(&discarded, 1);
}

/* Counts items up to its limit (LONG_MAX: forever), each an n and v = n. */
struct counter_source {
    uint64_t next, limit;
    double nap;                      /* seconds between items (a slow source) */
};

static long count_source(void **out, void *arg)
{
    struct counter_source *cs = arg;
    if (cs->next == cs->limit)
        return GORO_PIPELINE_END;
    if (cs->nap > 0)
        goro_sleep((int64_t)(cs->nap * GORO_SEC));
    struct item *it = malloc(sizeof *it);
    if (!it)
        return -ENOMEM;
    it->n = it->v = cs->next++;
    atomic_fetch_add(&made, 1);
    *out = it;
    return 0;
}

static void spin_ns(int64_t ns)
{
    int64_t end = goro_now() + ns;
    while (goro_now() < end)
        ;
}

static long add3(void **item, void *arg, goro_err_t **err)
{
    (void)arg, (void)err;
    ((struct item *)*item)->v += 3;
    return 0;
}

static long times2(void **item, void *arg, goro_err_t **err)
{
    (void)arg, (void)err;
    ((struct item *)*item)->v *= 2;
    return 0;
}

static long minus1_batch(void **items, int n, void *arg, goro_err_t **err)
{
    (void)arg, (void)err;
    for (int i = 0; i < n; i++)
        ((struct item *)items[i])->v -= 1;
    return 0;
}

/* The sink: checks v = (n + 3) * 2 - 1 (unless untouched: v = n) and,
 * when ordered, the order. */
struct checker {
    bool ordered, untouched;
    uint64_t last;
    bool any;
    uint64_t sum;
};

static long check_sink(void *item, void *arg)
{
    struct checker *c = arg;
    struct item *it = item;
    if (it->v != (c->untouched ? it->n : (it->n + 3) * 2 - 1))
        t_fail("item %llu: v %llu", (unsigned long long)it->n, (unsigned long long)it->v);
    if (c->ordered && c->any && it->n <= c->last)
        t_fail("item %llu after %llu", (unsigned long long)it->n, (unsigned long long)c->last);
    c->last = it->n;
    c->any = true;
    c->sum += it->n;
    free(it);
    atomic_fetch_add(&sunk, 1);
    return 0;
}

static goro_pipeline_t *three_stages(goro_pipeline_attr_t a)
{
    goro_pipeline_t *p;
    a.discard = discard_item;
    ck_assert_int_eq(goro_pipeline_new(&p, &a), 0);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .name = "add", .fn = add3 }), 0);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .name = "double", .fn = times2,
                                                             .batch = 7 }), 1);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .name = "less",
                                                             .batch_fn = minus1_batch,
                                                             .capacity = 5 }), 2);
    return p;
}

START_TEST(pipeline_runs_every_item_through)
{
    int rules[] = { GORO_PIPELINE_DHONDT, GORO_PIPELINE_EXHAUSTIVE, GORO_PIPELINE_STATIC };
    uint64_t n = (uint64_t)t_scale(20000);
    for (int k = 0; k < 3; k++) {
        counters_reset();
        goro_pipeline_t *p = three_stages((goro_pipeline_attr_t){ .rule = rules[k],
                                                                  .workers = 3,
                                                                  .window = 100 });
        struct counter_source src = { .limit = n };
        struct checker chk = { 0 };
        goro_err_t *err = (goro_err_t *)1;
        ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, check_sink, &chk, &err), 0);
        ck_assert_ptr_null(err);
        ck_assert_msg(!t_failed(), "%s", t_failed());
        ck_assert_int_eq(atomic_load(&sunk), (long)n);
        ck_assert_uint_eq(chk.sum, n * (n - 1) / 2);
        goro_pipeline_stats_t st;
        goro_stage_stats_t ss[4];
        ck_assert_int_eq(goro_pipeline_stats(p, &st, ss, 4), 3);
        ck_assert_int_eq(st.state, 2);
        ck_assert_uint_eq(st.in, n);
        ck_assert_uint_eq(st.out, n);
        ck_assert_int_eq(st.inside, 0);
        ck_assert_int_eq(st.workers, 3);
        ck_assert_int_gt(st.elapsed_ns, 0);
        ck_assert(rules[k] == GORO_PIPELINE_STATIC ? st.decisions == 0 : st.decisions > 0);
        for (int s = 0; s < 3; s++) {
            ck_assert_uint_eq(ss[s].items, n);
            ck_assert_int_eq(ss[s].queued, 0);
            ck_assert_int_eq(ss[s].workers, 0);
            ck_assert(ss[s].done);
            ck_assert(ss[s].service_ns > 0);
            double rate = (double)n / ((double)st.elapsed_ns / 1e9);
            ck_assert_msg(fabs(ss[s].per_sec - rate) <= rate * 1e-9, "%g/s, %g/s", ss[s].per_sec,
                          rate);
        }
        ck_assert_str_eq(ss[1].name, "double");
        /* It runs once. */
        ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, NULL, NULL, NULL), -EINVAL);
        ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 }), -EBUSY);
        ck_assert_int_eq(goro_pipeline_free(p), 0);
        ck_assert_int_eq(atomic_load(&discarded), 0);
    }
}
END_TEST

/* Random work per item (0..40 us), every 7th item dropped. */
static long jitter_or_drop(void **item, void *arg, goro_err_t **err)
{
    (void)arg, (void)err;
    struct item *it = *item;
    uint32_t r = (uint32_t)(it->n * 2654435761u);
    spin_ns(r % 40000);
    if (it->n % 7 == 3) {
        free(it);
        atomic_fetch_add(&dropped_items, 1);
        return GORO_PIPELINE_DROP;
    }
    it->v = (it->v + 3) * 2 - 1;     /* what check_sink expects */
    return 0;
}

START_TEST(pipeline_ordered_output_keeps_the_source_order)
{
    counters_reset();
    goro_pipeline_t *p;
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .ordered = 1, .workers = 6,
                                                                    .window = 64,
                                                                    .discard = discard_item }),
                     0);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .name = "jitter",
                                                             .fn = jitter_or_drop }), 0);
    uint64_t n = (uint64_t)t_scale(5000);
    struct counter_source src = { .limit = n };
    struct checker chk = { .ordered = true };
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, check_sink, &chk, NULL), 0);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&sunk) + atomic_load(&dropped_items), (long)n);
    ck_assert_int_eq(atomic_load(&dropped_items), (long)((n + 3) / 7));
    goro_pipeline_stats_t st;
    goro_pipeline_stats(p, &st, NULL, 0);
    ck_assert_uint_eq(st.dropped, (uint64_t)atomic_load(&dropped_items));
    ck_assert_int_eq(goro_pipeline_free(p), 0);
}
END_TEST

/* ---- workers move to the bottleneck ---- */

struct phased {
    atomic_long in[2], max[2][2];    /* per stage: inside now; most at once, per phase */
    uint64_t switch_at;              /* items below it: phase 0 */
    int64_t heavy, light;            /* ns per item */
};

static long phased_stage(struct phased *ph, int s, struct item *it)
{
    int phase = it->n >= ph->switch_at;
    long now = atomic_fetch_add(&ph->in[s], 1) + 1;
    t_max_update(&ph->max[s][phase], now);
    /* Stage 0 is heavy in phase 0, stage 1 in phase 1. */
    int64_t ns = (s == phase) ? ph->heavy : ph->light;
    int64_t end = goro_now() + ns;
    while (goro_now() < end)
        if (t_valgrind())
            goro_yield();
    atomic_fetch_sub(&ph->in[s], 1);
    return 0;
}

static long phased_a(void **item, void *arg, goro_err_t **err)
{
    (void)err;
    return phased_stage(arg, 0, *item);
}

static long phased_b(void **item, void *arg, goro_err_t **err)
{
    (void)err;
    return phased_stage(arg, 1, *item);
}

static long free_sink(void *item, void *arg)
{
    (void)arg;
    free(item);
    atomic_fetch_add(&sunk, 1);
    return 0;
}

static void run_phased(int rule, struct phased *ph, goro_pipeline_t **out)
{
    counters_reset();
    memset(ph, 0, sizeof *ph);
    uint64_t n = (uint64_t)t_scale(2000);
    ph->switch_at = n / 2;
    /* The source must stay ahead of the heavy stage, or its queue never
     * holds two items to share: under valgrind making an item costs
     * about as much as 200 us of work (CI saw "a 1 at once while
     * heavy"), so there the stages work ten times longer. */
    int64_t k = t_valgrind() ? 10 : 1;
    ph->heavy = 200000 * k;
    ph->light = 20000 * k;
    goro_pipeline_t *p;
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .rule = rule, .workers = 2,
                                                                    .timeline = 1,
                                                                    .discard = discard_item }),
                     0);
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "a", .fn = phased_a, .arg = ph });
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "b", .fn = phased_b, .arg = ph });
    struct counter_source src = { .limit = n };
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, free_sink, NULL, NULL), 0);
    ck_assert_int_eq(atomic_load(&sunk), (long)n);
    *out = p;
}

START_TEST(pipeline_moves_workers_to_the_bottleneck)
{
    struct phased ph;
    goro_pipeline_t *p;
    /* D'Hondt: both workers on stage a while it is heavy, on b after. */
    run_phased(GORO_PIPELINE_DHONDT, &ph, &p);
    ck_assert_msg(atomic_load(&ph.max[0][0]) == 2 && atomic_load(&ph.max[1][1]) == 2,
                  "a %ld at once while heavy, b %ld", atomic_load(&ph.max[0][0]),
                  atomic_load(&ph.max[1][1]));
    goro_stage_stats_t ss[2];
    goro_pipeline_stats(p, NULL, ss, 2);
    /* The SVG shows it: a picture of the two lanes and both queues. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(goro_pipeline_svg(p, f), 0);
    fclose(f);
    ck_assert_msg(strncmp(buf, "<svg ", 5) == 0 && strstr(buf, "</svg>\n") == buf + len - 7,
                  "%.200s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "worker 1"));
    ck_assert_ptr_nonnull(strstr(buf, ">b</text>"));
    ck_assert_ptr_nonnull(strstr(buf, "<polyline"));
    ck_assert_ptr_nonnull(strstr(buf, "#f28e2b"));  /* stage b's colour, in a lane */
    free(buf);
    ck_assert_int_eq(goro_pipeline_free(p), 0);

    /* Static: one worker per stage, whatever the load. */
    run_phased(GORO_PIPELINE_STATIC, &ph, &p);
    ck_assert_msg(atomic_load(&ph.max[0][0]) == 1 && atomic_load(&ph.max[1][1]) == 1,
                  "a %ld at once, b %ld", atomic_load(&ph.max[0][0]),
                  atomic_load(&ph.max[1][1]));
    ck_assert_int_eq(goro_pipeline_free(p), 0);
}
END_TEST

/* ---- failure ---- */

/* Fails every item n with n % every == every - 1 (or only the first such
 * with `once`), with a cause. */
struct failing {
    uint64_t every;
    bool once;
};

static long fail_some(void **item, void *arg, goro_err_t **err)
{
    struct item *it = *item;
    const struct failing *f = arg;
    if (it->n % f->every == f->every - 1 && (!f->once || it->n < f->every)) {
        *err = goro_err_new(EPROTO, "item %llu is bad", (unsigned long long)it->n);
        return -EPROTO;
    }
    it->v = (it->v + 3) * 2 - 1;
    return 0;
}

START_TEST(pipeline_first_failure_cancels_it)
{
    counters_reset();
    goro_pipeline_t *p;
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .name = "job", .workers = 2,
                                                                    .discard = discard_item }),
                     0);
    struct failing bad = { 500, true };
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "check", .fn = fail_some, .arg = &bad });
    struct counter_source src = { .limit = UINT64_MAX };   /* it would never end */
    struct checker chk = { 0 };
    goro_err_t *err = NULL;
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, check_sink, &chk, &err), -EPROTO);
    ck_assert_ptr_nonnull(err);
    ck_assert_str_eq(goro_err_msg(err), "job: stage check, item 499");
    ck_assert_ptr_nonnull(goro_err_cause(err));
    ck_assert_str_eq(goro_err_msg(goro_err_cause(err)), "item 499 is bad");
    ck_assert_msg(strncmp(goro_err_coroutine_name(err), "job worker ", 11) == 0, "%s",
                  goro_err_coroutine_name(err));
    goro_err_free(err);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    /* Nothing lost: each item made was sunk or discarded (the bad one too). */
    ck_assert_int_eq(atomic_load(&made), atomic_load(&sunk) + atomic_load(&discarded));
    ck_assert_int_ge(atomic_load(&discarded), 1);
    goro_pipeline_stats_t st;
    goro_pipeline_stats(p, &st, NULL, 0);
    ck_assert_uint_eq(st.failed, 1);
    ck_assert_int_eq(goro_pipeline_free(p), 0);
}
END_TEST

static long failing_sink(void *item, void *arg)
{
    (void)arg;
    struct item *it = item;
    long r = it->n == 20 ? -ENOSPC : 0;
    free(it);
    atomic_fetch_add(&sunk, 1);
    return r;
}

static long failing_source(void **out, void *arg)
{
    struct counter_source *cs = arg;
    if (cs->next == 30)
        return -EIO;
    return count_source(out, arg);
}

static long failing_at_once(void **out, void *arg)
{
    (void)out, (void)arg;
    return -EIO;
}

START_TEST(pipeline_source_failing_at_once)
{
    /* The source runs while its pipeline's other coroutines are still
     * being spawned, and its failure cancels their group: the run's error
     * is the source's, not the -ECANCELED the later spawns get. */
    for (int i = 0; i < 50; i++) {
        goro_pipeline_t *p;
        ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .workers = 8 }), 0);
        goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 });
        goro_err_t *err = NULL;
        ck_assert_int_eq(goro_pipeline_run(p, failing_at_once, NULL, free_sink, NULL, &err), -EIO);
        ck_assert_str_eq(goro_err_msg(err), "source, item 0");
        goro_err_free(err);
        ck_assert_int_eq(goro_pipeline_free(p), 0);
    }
}
END_TEST

START_TEST(pipeline_skip_failed_goes_on)
{
    counters_reset();
    goro_pipeline_t *p;
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){
                                           .policy = GORO_PIPELINE_SKIP_FAILED, .workers = 3,
                                           .ordered = 1, .discard = discard_item }),
                     0);
    struct failing bad = { 7, false };
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "check", .fn = fail_some, .arg = &bad });
    uint64_t n = 2000;
    struct counter_source src = { .limit = n };
    struct checker chk = { .ordered = true };
    goro_err_t *err = NULL;
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, check_sink, &chk, &err), -EPROTO);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(atomic_load(&sunk), (long)(n - n / 7));
    ck_assert_int_eq(atomic_load(&discarded), (long)(n / 7));
    ck_assert_str_eq(goro_err_msg(err), "285 of 2000 items failed");
    ck_assert_uint_eq(goro_err_count(err), 100);                /* the first 100 kept */
    ck_assert_msg(strncmp(goro_err_msg(goro_err_at(err, 0)), "stage check, item ", 18) == 0,
                  "%s", goro_err_msg(goro_err_at(err, 0)));
    char cause[64];
    snprintf(cause, sizeof cause, "item %s is bad", goro_err_msg(goro_err_at(err, 0)) + 18);
    ck_assert_str_eq(goro_err_msg(goro_err_cause(goro_err_at(err, 0))), cause);
    goro_err_free(err);
    ck_assert_int_eq(goro_pipeline_free(p), 0);

    /* The sink's failure is listed too (the sink owns the item anyway);
     * the source's ends the run. */
    counters_reset();
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){
                                           .policy = GORO_PIPELINE_SKIP_FAILED,
                                           .discard = discard_item }),
                     0);
    goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 });
    struct counter_source src2 = { .limit = 25 };
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src2, failing_sink, NULL, &err),
                     -ENOSPC);
    ck_assert_str_eq(goro_err_msg(goro_err_at(err, 0)), "sink, item 20");
    goro_err_free(err);
    ck_assert_int_eq(atomic_load(&sunk), 25);
    goro_pipeline_free(p);

    counters_reset();
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .discard = discard_item }),
                     0);
    goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 });
    struct counter_source src3 = { .limit = 100 };
    ck_assert_int_eq(goro_pipeline_run(p, failing_source, &src3, free_sink, NULL, &err), -EIO);
    ck_assert_str_eq(goro_err_msg(err), "source, item 30");
    goro_err_free(err);
    ck_assert_int_eq(atomic_load(&made), atomic_load(&sunk) + atomic_load(&discarded));
    goro_pipeline_free(p);
}
END_TEST

/* ---- cancel, deadline, a cancelled caller ---- */

static long slow_stage(void **item, void *arg, goro_err_t **err)
{
    (void)arg, (void)err, (void)item;
    goro_sleep(GORO_MSEC / 2);
    return 0;
}

static goro_pipeline_t *endless(int64_t deadline)
{
    goro_pipeline_t *p;
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .workers = 4,
                                                                    .deadline = deadline,
                                                                    .window = 50,
                                                                    .discard = discard_item }),
                     0);
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "slow", .fn = slow_stage });
    goro_pipeline_stage(p, &(goro_stage_t){ .name = "add", .fn = add3 });
    return p;
}

static long run_endless(goro_pipeline_t *p)
{
    struct counter_source src = { .limit = UINT64_MAX };
    return goro_pipeline_run(p, count_source, &src, free_sink, NULL, NULL);
}

START_TEST(pipeline_cancel_deadline_and_cancelled_caller)
{
    /* goro_pipeline_cancel from another coroutine (here: the test thread). */
    counters_reset();
    goro_pipeline_t *p = endless(0);
    ck_assert_int_eq(goro_pipeline_cancel(p), -ESRCH);
    goro_t *h = go(run_endless, p);
    t_wait_at_least(&sunk, 20, t_timeout(10));
    goro_pipeline_stats_t st;
    goro_pipeline_stats(p, &st, NULL, 0);
    ck_assert_int_eq(st.state, 1);
    ck_assert(st.inside > 0 && st.inside <= 50);
    ck_assert_int_eq(goro_pipeline_free(p), -EBUSY);
    ck_assert_int_eq(goro_pipeline_cancel(p), 0);
    long r;
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -ECANCELED);
    ck_assert_int_eq(atomic_load(&made), atomic_load(&sunk) + atomic_load(&discarded));
    ck_assert_int_gt(atomic_load(&discarded), 0);
    ck_assert_int_eq(goro_pipeline_free(p), 0);

    /* The deadline. */
    counters_reset();
    p = endless(goro_now() + 50 * GORO_MSEC);
    double t0 = t_now();
    ck_assert_int_eq(run_endless(p), -ETIMEDOUT);
    ck_assert(t_now() - t0 < 0.05 + t_prompt());
    ck_assert_int_eq(atomic_load(&made), atomic_load(&sunk) + atomic_load(&discarded));
    ck_assert_int_eq(goro_pipeline_free(p), 0);

    /* Cancelling the coroutine that runs it. */
    counters_reset();
    p = endless(0);
    h = go(run_endless, p);
    t_wait_at_least(&sunk, 20, t_timeout(10));
    ck_assert_int_eq(goro_cancel(h), 0);
    ck_assert_int_eq(goro_join(h, &r), 0);
    ck_assert_int_eq(r, -ECANCELED);
    ck_assert_int_eq(atomic_load(&made), atomic_load(&sunk) + atomic_load(&discarded));
    ck_assert_int_eq(goro_pipeline_free(p), 0);
}
END_TEST

/* ---- bad use ---- */

START_TEST(pipeline_bad_use)
{
    goro_pipeline_t *p;
    ck_assert_int_eq(goro_pipeline_new(NULL, NULL), -EINVAL);
    goro_pipeline_attr_t bad[] = {
        { .workers = -1 }, { .workers = 4097 }, { .window = -1 }, { .window = (1 << 20) + 1 },
        { .rule = 3 }, { .policy = 2 }, { .deadline = -1 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = (goro_pipeline_t *)1;
        ck_assert_int_eq(goro_pipeline_new(&p, &bad[i]), -EINVAL);
        ck_assert_ptr_null(p);
    }
    ck_assert_int_eq(goro_pipeline_new(&p, NULL), 0);
    ck_assert_int_eq(goro_pipeline_stage(NULL, &(goro_stage_t){ .fn = add3 }), -EINVAL);
    ck_assert_int_eq(goro_pipeline_stage(p, NULL), -EINVAL);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ 0 }), -EINVAL);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3,
                                                             .batch_fn = minus1_batch }),
                     -EINVAL);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3, .batch = -1 }), -EINVAL);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3, .batch = 257 }),
                     -EINVAL);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3, .capacity = -1 }),
                     -EINVAL);
    struct counter_source src = { .limit = 10 };
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, NULL, NULL, NULL), -EINVAL);
    for (int i = 0; i < GORO_PIPELINE_STAGES_MAX; i++)
        ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 }), i);
    ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 }), -E2BIG);
    ck_assert_int_eq(goro_pipeline_run(NULL, count_source, &src, NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_pipeline_run(p, NULL, &src, NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(goro_pipeline_svg(p, stderr), -ENODATA);
    ck_assert_int_eq(goro_pipeline_svg(NULL, stderr), -EINVAL);
    ck_assert_int_eq(goro_pipeline_svg(p, NULL), -EINVAL);
    ck_assert_int_eq(goro_pipeline_stats(NULL, NULL, NULL, 0), -EINVAL);
    ck_assert_int_eq(goro_pipeline_stats(p, NULL, NULL, 1), -EINVAL);
    ck_assert_int_eq(goro_pipeline_stats(p, NULL, NULL, 0), GORO_PIPELINE_STAGES_MAX);
    ck_assert_int_eq(goro_pipeline_cancel(NULL), -EINVAL);
    ck_assert_int_eq(goro_pipeline_free(NULL), -EINVAL);
    /* 64 stages of 64 workers: too many allocations to try them all. */
    ck_assert_int_eq(goro_pipeline_free(p), 0);
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){
                                           .rule = GORO_PIPELINE_EXHAUSTIVE, .workers = 64 }),
                     0);
    for (int i = 0; i < 16; i++)
        goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 });
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, NULL, NULL, NULL), -E2BIG);
    ck_assert_int_eq(goro_pipeline_free(p), 0);
    /* Without a sink the outputs go to discard; with neither, nowhere. */
    counters_reset();
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .discard = discard_item }),
                     0);
    goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3 });
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, NULL, NULL, NULL), 0);
    ck_assert_int_eq(atomic_load(&discarded), 10);
    ck_assert_int_eq(goro_pipeline_free(p), 0);
    /* A stage's name is escaped in the picture. */
    ck_assert_int_eq(goro_pipeline_new(&p, &(goro_pipeline_attr_t){ .timeline = 1,
                                                                    .name = "a<b" }),
                     0);
    goro_pipeline_stage(p, &(goro_stage_t){ .fn = add3, .name = "x&y" });
    src = (struct counter_source){ .limit = 10 };
    counters_reset();
    ck_assert_int_eq(goro_pipeline_run(p, count_source, &src, free_sink, NULL, NULL), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(goro_pipeline_svg(p, f), 0);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "a&lt;b"));
    ck_assert_ptr_nonnull(strstr(buf, "x&amp;y"));
    ck_assert_ptr_null(strstr(buf, "x&y"));
    free(buf);
    ck_assert_int_eq(goro_pipeline_free(p), 0);
}
END_TEST

/* ---- stress: random shapes, every item accounted for ---- */

struct shape {
    uint32_t seed;
    int drop_every;                  /* 0: none */
};

static long random_stage(void **item, void *arg, goro_err_t **err)
{
    (void)err;
    struct shape *sh = arg;
    struct item *it = *item;
    uint32_t r = (uint32_t)(it->n * 2654435761u) ^ sh->seed;
    switch (r % 16) {
    case 0: goro_yield(); break;
    case 1: goro_sleep(20 * GORO_USEC); break;
    case 2: spin_ns(r % 20000); break;
    default: break;
    }
    if (sh->drop_every && it->n % (uint64_t)sh->drop_every == (r >> 8) % 2) {
        free(it);
        atomic_fetch_add(&dropped_items, 1);
        return GORO_PIPELINE_DROP;
    }
    return 0;
}

/* Random pipelines, one after the other, for GORO_TEST_PIPELINE_MS
 * milliseconds (default 3000, 2000 when slow): 1..5 stages of random work
 * (yields, sleeps, spins, drops), 1..6 workers, windows of 1..64, queues
 * of 1..8, every rule, ordered or not. A lost wake-up hangs a run (the
 * test's timeout); a lost or doubled item breaks the count. */
START_TEST(pipeline_stress_random_shapes)
{
    uint32_t seed = (uint32_t)time(NULL) | 1;
    const char *ms_env = getenv("GORO_TEST_PIPELINE_MS");
    double secs = ms_env ? atof(ms_env) / 1000 : t_slow() ? 2.0 : 3.0;
    double end = t_now() + secs;
    int runs = 0;
    long items = 0;
    while (t_now() < end || runs < 5) {
        counters_reset();
        int S = 1 + (int)(t_rnd(&seed) % 5);
        goro_pipeline_attr_t a = {
            .workers = 1 + (int)(t_rnd(&seed) % 6),
            .window = 1 + (int)(t_rnd(&seed) % 64),
            .ordered = (int)(t_rnd(&seed) % 2),
            .rule = (int)(t_rnd(&seed) % 3),
            .timeline = (int)(t_rnd(&seed) % 2),
            .discard = discard_item,
        };
        if (a.rule == GORO_PIPELINE_EXHAUSTIVE && S > 3)
            a.rule = GORO_PIPELINE_DHONDT;
        goro_pipeline_t *p;
        ck_assert_int_eq(goro_pipeline_new(&p, &a), 0);
        struct shape sh[5];
        for (int s = 0; s < S; s++) {
            sh[s] = (struct shape){ t_rnd(&seed), t_rnd(&seed) % 3 == 0 ? 5 : 0 };
            ck_assert_int_eq(goro_pipeline_stage(p, &(goro_stage_t){
                                 .fn = random_stage, .arg = &sh[s],
                                 .batch = (int)(t_rnd(&seed) % 5),
                                 .capacity = 1 + (int)(t_rnd(&seed) % 8) }),
                             s);
        }
        uint64_t n = 1 + t_rnd(&seed) % (uint32_t)t_scale(1500);
        struct counter_source src = { .limit = n };
        struct checker o = { .ordered = a.ordered, .untouched = true };
        int r = goro_pipeline_run(p, count_source, &src, check_sink, &o, NULL);
        ck_assert_msg(r == 0, "run %d: %s", runs, strerror(-r));
        ck_assert_msg(!t_failed(), "run %d: %s", runs, t_failed());
        ck_assert_msg(atomic_load(&sunk) + atomic_load(&dropped_items) == (long)n &&
                      atomic_load(&discarded) == 0,
                      "run %d (S %d W %d window %d ordered %d rule %d): %llu made, %ld sunk, "
                      "%ld dropped, %ld discarded", runs, S, a.workers, a.window, a.ordered,
                      a.rule, (unsigned long long)n, atomic_load(&sunk),
                      atomic_load(&dropped_items), atomic_load(&discarded));
        ck_assert_int_eq(goro_pipeline_free(p), 0);
        runs++;
        items += (long)n;
    }
    printf("pipeline stress: %d random pipelines, %ld items, every one accounted for\n", runs,
           items);
}
END_TEST

/* ---- a discard function that asks for the stats ----
 * goro_pipeline_stats "may be called at any time, from any coroutine or
 * thread" (docs/pipelines.md). A worker that fails fast lets the rest of
 * its batch go (attr.discard) while it holds the pipeline's mutex: a
 * discard that asks for the stats takes that mutex again. */
static goro_pipeline_t *reent_p;
static atomic_int reent_stats_calls, reent_stats_returned, reent_done;

static void discard_asks_stats(void *item, void *arg)
{
    (void)arg;
    goro_pipeline_stats_t st;
    atomic_fetch_add(&reent_stats_calls, 1);
    if (goro_pipeline_stats(reent_p, &st, NULL, 0) < 0)
        t_fail("discard: goro_pipeline_stats failed");
    atomic_fetch_add(&reent_stats_returned, 1);
    free(item);
    atomic_fetch_add(&discarded, 1);
}

static long slow_first_fail_second(void **item, void *arg, goro_err_t **err)
{
    (void)arg;
    struct item *it = *item;
    if (it->n == 0)
        goro_sleep(50 * GORO_MSEC);   /* the queue fills meanwhile */
    if (it->n == 1) {
        *err = goro_err_new(EPROTO, "item 1 is bad");
        return -EPROTO;
    }
    return 0;
}

static long reent_run(void *arg)
{
    (void)arg;
    struct counter_source src = { .limit = 16 };
    goro_err_t *err = NULL;
    long r = goro_pipeline_run(reent_p, count_source, &src, NULL, NULL, &err);
    goro_err_free(err);
    atomic_store(&reent_done, 1);
    return r;
}

START_TEST(pipeline_discard_may_ask_for_the_stats)
{
    counters_reset();
    atomic_store(&reent_stats_calls, 0);
    atomic_store(&reent_done, 0);
    ck_assert_int_eq(goro_pipeline_new(&reent_p, &(goro_pipeline_attr_t){
                         .name = "reent", .workers = 1, .discard = discard_asks_stats }), 0);
    goro_pipeline_stage(reent_p, &(goro_stage_t){ .name = "s", .fn = slow_first_fail_second,
                                                  .batch = 4 });
    goro_t *h = go(reent_run, NULL);
    ck_assert_ptr_nonnull(h);
    ck_assert_msg(t_wait_flag(&reent_done, t_timeout(5)),
                  "goro_pipeline_run never returned: a discard called under the "
                  "pipeline's mutex waits for it (discard calls: %d, returned: %d)",
                  atomic_load(&reent_stats_calls), atomic_load(&reent_stats_returned));
    goro_join(h, NULL);
    ck_assert_msg(!t_failed(), "%s", t_failed());
    ck_assert_int_eq(goro_pipeline_free(reent_p), 0);
}
END_TEST

Suite *pipeline_suite(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = t_runtime_tcase(s, "pipeline", 120);
    tcase_add_test(tc, allocate_worked_examples);
    tcase_add_test(tc, allocate_dhondt_is_the_seat_by_seat_method);
    tcase_add_test(tc, allocate_dhondt_against_exhaustive_on_random_loads);
    tcase_add_test(tc, pipeline_runs_every_item_through);
    tcase_add_test(tc, pipeline_ordered_output_keeps_the_source_order);
    tcase_add_test(tc, pipeline_moves_workers_to_the_bottleneck);
    tcase_add_test(tc, pipeline_first_failure_cancels_it);
    tcase_add_test(tc, pipeline_source_failing_at_once);
    tcase_add_test(tc, pipeline_skip_failed_goes_on);
    tcase_add_test(tc, pipeline_cancel_deadline_and_cancelled_caller);
    tcase_add_test(tc, pipeline_bad_use);
    tcase_add_test(tc, pipeline_discard_may_ask_for_the_stats);
    TCase *stress = t_runtime_tcase(s, "stress", 600);
    tcase_add_test(stress, pipeline_stress_random_shapes);
    return s;
}
