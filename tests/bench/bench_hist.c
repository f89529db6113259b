/* Log-linear latency histogram used by bq-bench. A value v below 128 ns has
 * its own bucket; above, v is reduced to its top 7 significant bits, so each
 * power of two is covered by 64 buckets and a bucket's width is at most
 * 1/64 of its value. Recording is a handful of integer operations, which
 * keeps the load generator's own cost per reply negligible. */
#include "bench_hist.h"

#include <string.h>

#define LINEAR (1u << BQ_HIST_LINEAR_BITS)
#define HALF (1u << (BQ_HIST_LINEAR_BITS - 1))

static unsigned top_bit(uint64_t v)
{
    unsigned msb = 0;
    while (v >>= 1)
        msb++;
    return msb;
}

static unsigned bucket_of(uint64_t v)
{
    if (v < LINEAR)
        return (unsigned)v;
    unsigned msb = top_bit(v);
    if (msb > BQ_HIST_MAX_BITS)
        return BQ_HIST_BUCKETS - 1;
    unsigned shift = msb - (BQ_HIST_LINEAR_BITS - 1);
    unsigned mant = (unsigned)(v >> shift);
    return LINEAR + (shift - 1) * HALF + (mant - HALF);
}

static uint64_t bucket_upper(unsigned idx)
{
    if (idx < LINEAR)
        return idx;
    unsigned k = idx - LINEAR;
    unsigned shift = k / HALF + 1;
    uint64_t mant = HALF + k % HALF;
    return ((mant + 1) << shift) - 1;
}

void bq_hist_init(bq_hist_t *h)
{
    memset(h, 0, sizeof(*h));
}

void bq_hist_record(bq_hist_t *h, uint64_t ns)
{
    h->buckets[bucket_of(ns)]++;
    h->count++;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

void bq_hist_merge(bq_hist_t *dst, const bq_hist_t *src)
{
    for (unsigned i = 0; i < BQ_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    if (src->max_ns > dst->max_ns)
        dst->max_ns = src->max_ns;
}

uint64_t bq_hist_quantile(const bq_hist_t *h, double q)
{
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)h->count);
    if ((double)rank < q * (double)h->count)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < BQ_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t up = bucket_upper(i);
            return up < h->max_ns ? up : h->max_ns;
        }
    }
    return h->max_ns;
}
