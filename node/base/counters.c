/* The node's event counters (counters.h): a static array bumped on
 * the loop thread, and its round trip through the environment across the
 * execv that installs a resync; plus the fixed-bucket latency histogram. */
#include "node/base/counters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t counters[BQ_COUNTERS];

static const char *const names[BQ_COUNTERS] = {
    [BQ_COUNTER_ELECTIONS_STARTED] = "elections_started",
    [BQ_COUNTER_ELECTIONS_WON] = "elections_won",
    [BQ_COUNTER_BECAME_PRIMARY] = "became_primary",
    [BQ_COUNTER_BECAME_STANDBY] = "became_standby",
    [BQ_COUNTER_FENCINGS] = "fencings",
    [BQ_COUNTER_SWITCHOVERS_DONE] = "switchovers_done",
    [BQ_COUNTER_SWITCHOVERS_FAILED] = "switchovers_failed",
    [BQ_COUNTER_FORCED_PROMOTIONS] = "forced_promotions",
    [BQ_COUNTER_RESYNCS] = "resyncs",
    [BQ_COUNTER_REJOINS_RESUME] = "rejoins_resume",
    [BQ_COUNTER_REJOINS_CUT] = "rejoins_cut",
    [BQ_COUNTER_REJOINS_RESYNC] = "rejoins_resync",
    [BQ_COUNTER_CUT_RECORDS] = "cut_records",
};

void bq_metrics_count(bq_counter_t c)
{
    bq_metrics_count_n(c, 1);
}

void bq_metrics_count_n(bq_counter_t c, uint64_t n)
{
    if (c < BQ_COUNTERS)
        counters[c] += n;
}

uint64_t bq_metrics_counter(bq_counter_t c)
{
    return c < BQ_COUNTERS ? counters[c] : 0;
}

const char *bq_metrics_counter_name(bq_counter_t c)
{
    return c < BQ_COUNTERS ? names[c] : "";
}

int bq_metrics_counters_export_env(void)
{
    char buf[BQ_COUNTERS * 48];
    size_t n = 0;
    for (size_t i = 0; i < BQ_COUNTERS && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%llu", i ? "," : "", names[i],
                              (unsigned long long)counters[i]);
    return setenv(BQ_COUNTERS_ENV, buf, 1) == 0 ? 0 : -1;
}

/* Adds the value of entry "name=value" (length len) to its counter. */
static size_t import_entry(const char *e, size_t len)
{
    const char *eq = memchr(e, '=', len);
    if (!eq || eq + 1 == e + len)
        return 0;
    char num[24];
    size_t nl = (size_t)(e + len - eq - 1);
    if (nl >= sizeof num)
        return 0;
    memcpy(num, eq + 1, nl);
    num[nl] = '\0';
    char *end;
    unsigned long long v = strtoull(num, &end, 10);
    if (*end != '\0' || num[0] < '0' || num[0] > '9')
        return 0;
    for (size_t i = 0; i < BQ_COUNTERS; i++) {
        if (strlen(names[i]) == (size_t)(eq - e) && memcmp(names[i], e, (size_t)(eq - e)) == 0) {
            counters[i] += v;
            return 1;
        }
    }
    return 0;
}

size_t bq_metrics_counters_import_env(void)
{
    const char *v = getenv(BQ_COUNTERS_ENV);
    size_t got = 0;
    while (v && *v) {
        const char *comma = strchr(v, ',');
        size_t len = comma ? (size_t)(comma - v) : strlen(v);
        got += import_entry(v, len);
        v = comma ? comma + 1 : NULL;
    }
    unsetenv(BQ_COUNTERS_ENV);
    return got;
}

void bq_metrics_counters_reset(void)
{
    memset(counters, 0, sizeof counters);
}

/* 100 us to 1 s: an SSD's fdatasync is ~0.1-2 ms, a loaded disk's 10-100. */
static const double bounds[BQ_HIST_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
};

double bq_histogram_bound(size_t i)
{
    return i < BQ_HIST_BUCKETS ? bounds[i] : 0;
}

void bq_histogram_observe(bq_histogram_t *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    double s = (double)ns / 1e9;
    size_t i = 0;
    while (i < BQ_HIST_BUCKETS && s > bounds[i])
        i++;
    h->bucket[i]++;
    h->count++;
    h->sum_ns += (uint64_t)ns;
}
