/* The node's event counters for /metrics that no other module keeps:
 * elections, role changes, fencing, switchovers, forced promotions and
 * resync installs; and the histogram type of the binlog's fsync latency.
 *
 * A role change (and a resync install) re-executes the process image with
 * the same pid, which would reset counters kept in memory: the counters
 * travel across the exec in the environment (BQ_HA_COUNTERS), written just
 * before execv and read back at start-up, so a counter only resets when
 * the process really ends. Counters are bumped and read on the loop thread
 * only. */
#ifndef BQ_NODE_METRICS_COUNTERS_H
#define BQ_NODE_METRICS_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

typedef enum bq_counter {
    BQ_COUNTER_ELECTIONS_STARTED,  /* this node stood as a candidate (not a pre-vote) */
    BQ_COUNTER_ELECTIONS_WON,      /* ... and won */
    BQ_COUNTER_BECAME_PRIMARY,     /* role change in place: became the primary */
    BQ_COUNTER_BECAME_STANDBY,     /* role change in place: a primary steps down */
    BQ_COUNTER_FENCINGS,           /* a primary lost its majority and stopped acking */
    BQ_COUNTER_SWITCHOVERS_DONE,   /* a switchover from this primary completed */
    BQ_COUNTER_SWITCHOVERS_FAILED, /* ... or was given up */
    BQ_COUNTER_FORCED_PROMOTIONS,  /* promote --force on this node */
    BQ_COUNTER_RESYNCS,            /* full resyncs installed (standby) */
    BQ_COUNTER_REJOINS_RESUME,     /* a stream began right after our last record */
    BQ_COUNTER_REJOINS_CUT,        /* ... after our log was cut back to a fork point */
    BQ_COUNTER_REJOINS_RESYNC,     /* ... with a full resync */
    BQ_COUNTER_CUT_RECORDS,        /* records moved aside by those cuts */
    BQ_COUNTERS
} bq_counter_t;

/* The environment variable that carries the counters across a re-exec. */
#define BQ_COUNTERS_ENV "BQ_HA_COUNTERS"

/* Adds one to counter c. */
void bq_metrics_count(bq_counter_t c);

/* Adds n to counter c. */
void bq_metrics_count_n(bq_counter_t c, uint64_t n);

/* The value of counter c. */
uint64_t bq_metrics_counter(bq_counter_t c);

/* The counter's short name ("elections_started"), as in BQ_HA_COUNTERS. */
const char *bq_metrics_counter_name(bq_counter_t c);

/* Writes every counter into BQ_HA_COUNTERS ("name=value,..."): call just
 * before execv. 0, or -1 when setenv failed (the counters then reset). */
int bq_metrics_counters_export_env(void);

/* At start-up: adds the values in BQ_HA_COUNTERS (if set; unknown names
 * and malformed entries are ignored) to the counters and unsets it.
 * Returns how many counters were read. */
size_t bq_metrics_counters_import_env(void);

/* Zeroes every counter (tests). */
void bq_metrics_counters_reset(void);

/* A latency histogram with fixed bounds in seconds (BQ_HIST_BOUNDS, then
 * +Inf); zero-initialise it. */
#define BQ_HIST_BUCKETS 13
typedef struct bq_histogram {
    uint64_t bucket[BQ_HIST_BUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
    uint64_t count;
    uint64_t sum_ns;
} bq_histogram_t;

/* The upper bound of bucket i (< BQ_HIST_BUCKETS), in seconds. */
double bq_histogram_bound(size_t i);

/* Records one observation of ns nanoseconds. */
void bq_histogram_observe(bq_histogram_t *h, int64_t ns);

#endif
