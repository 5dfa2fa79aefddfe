/* Latency histogram: exact below 64 ns, then 32 linear buckets per power
 * of two (as HdrHistogram does), so percentiles come from counts in fixed
 * memory instead of sorting every sample. */
#include "echoload.h"

static int top_bit(uint64_t v)
{
    return 63 - __builtin_clzll(v);
}

static int bucket_of(int64_t ns)
{
    if (ns < HIST_EXACT)
        return ns < 0 ? 0 : (int)ns;
    uint64_t v = (uint64_t)ns;
    int k = top_bit(v);                      /* v in [2^k, 2^(k+1)), k >= 6 */
    if (k >= HIST_TOP_BIT)
        return HIST_BUCKETS - 1;
    int shift = k - 5;                       /* keeps the 5 bits below the top one */
    int sub = (int)(v >> shift) - HIST_SUB;  /* 0..31 */
    return HIST_EXACT + (k - 6) * HIST_SUB + sub;
}

/* The middle of bucket b. */
static int64_t value_of(int b)
{
    if (b < HIST_EXACT)
        return b;
    int k = (b - HIST_EXACT) / HIST_SUB + 6;
    int sub = (b - HIST_EXACT) % HIST_SUB;
    int shift = k - 5;
    int64_t low = (int64_t)(HIST_SUB + sub) << shift;
    return low + ((int64_t)1 << shift) / 2;
}

void hist_record(struct hist *h, int64_t ns)
{
    __atomic_fetch_add(&h->n[bucket_of(ns)], 1, __ATOMIC_RELAXED);
}

void hist_drain(struct hist *from, struct hist *into)
{
    for (int b = 0; b < HIST_BUCKETS; b++)
        if (__atomic_load_n(&from->n[b], __ATOMIC_RELAXED))
            into->n[b] += __atomic_exchange_n(&from->n[b], 0, __ATOMIC_RELAXED);
}

void hist_merge(struct hist *into, const struct hist *from)
{
    for (int b = 0; b < HIST_BUCKETS; b++)
        into->n[b] += from->n[b];
}

uint64_t hist_count(const struct hist *h)
{
    uint64_t total = 0;
    for (int b = 0; b < HIST_BUCKETS; b++)
        total += h->n[b];
    return total;
}

int64_t hist_quantile(const struct hist *h, double q)
{
    uint64_t total = hist_count(h);
    if (!total)
        return 0;
    /* The rank of the sample wanted, 1-based: p50 of 1..100 is the 50th. */
    uint64_t rank = (uint64_t)(q * (double)total + 0.5);
    if (rank < 1)
        rank = 1;
    if (rank > total)
        rank = total;
    uint64_t seen = 0;
    for (int b = 0; b < HIST_BUCKETS; b++) {
        seen += h->n[b];
        if (seen >= rank)
            return value_of(b);
    }
    return value_of(HIST_BUCKETS - 1);
}
