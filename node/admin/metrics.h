/* The /metrics text of a node (docs/admin-api.md lists every family):
 * jobs, tubes, commands and connections from the engine, the binlog's
 * bytes, segments and fsync latency, replication and elections from the
 * cluster, TLS handshake failures, the process's CPU, memory and file
 * descriptors. The figures are gathered into the snapshot structs below
 * (metrics_engine.c, metrics_process.c, node/admin/routes.c), then
 * bq_metrics_render writes them, so the text can be tested from made-up
 * figures. */
#ifndef BQ_NODE_METRICS_H
#define BQ_NODE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/cluster/cluster.h"
#include "node/base/counters.h"
#include "node/admin/metrics_text.h"
#include "protocol/engine.h"

/* Tubes exported one by one at most; the others are only counted. */
#define BQ_METRICS_MAX_TUBES 1000

typedef struct bq_metrics_tube {
    char name[BQ_NAME_MAX + 1];
    uint64_t ready, reserved, delayed, buried, urgent;
} bq_metrics_tube_t;

/* The engine's `stats` figures. */
typedef struct bq_metrics_engine {
    uint64_t ready, reserved, delayed, buried, urgent;
    uint64_t jobs_created, job_timeouts;
    uint64_t connections, producers, workers, waiting, connections_accepted;
    uint64_t tubes;
    uint64_t ops[BQ_OP_COUNT]; /* commands run, by op */
    size_t ntube;              /* entries of tube[], at most BQ_METRICS_MAX_TUBES */
    bq_metrics_tube_t *tube;   /* owned; freed by bq_metrics_engine_free */
    bool draining;
} bq_metrics_engine_t;

/* Fills *m from e (borrowed): the totals and the first BQ_METRICS_MAX_TUBES
 * tubes in list-tubes order. 0, or -1 when out of memory. */
int bq_metrics_engine_read(const bq_engine_t *e, bq_metrics_engine_t *m);

/* Frees what bq_metrics_engine_read allocated. */
void bq_metrics_engine_free(bq_metrics_engine_t *m);

typedef struct bq_metrics_binlog {
    uint64_t bytes_written, records_written, segments, disk_bytes;
    bool failing;
    bq_histogram_t fsync; /* copied */
    /* The filesystem holding the binlog directory (statvfs): bytes an
     * unprivileged process may still write, and its size; left out when
     * fs_known is false (statvfs failed). */
    bool fs_known;
    uint64_t fs_avail_bytes, fs_size_bytes;
} bq_metrics_binlog_t;

/* Fills m's filesystem figures from statvfs of path (borrowed): fs_known
 * and the bytes available to an unprivileged user (f_bavail) and the size
 * (f_blocks), in f_frsize units. 0, or -1 (fs_known false) when statvfs
 * fails. */
int bq_metrics_filesystem_read(const char *path, bq_metrics_binlog_t *m);

typedef struct bq_metrics_process {
    double cpu_seconds, start_time_seconds;
    uint64_t resident_bytes, virtual_bytes, open_fds, max_fds;
} bq_metrics_process_t;

/* Fills *p from /proc/self/stat, /proc/stat, /proc/self/fd and
 * getrlimit. 0, or -1 when /proc could not be read (*p zeroed). */
int bq_metrics_process_read(bq_metrics_process_t *p);

/* Parses the text of /proc/self/stat (borrowed) with the clock tick rate,
 * the page size and the boot time (btime of /proc/stat) into *p's CPU,
 * memory and start time. 0, or -1 when it is malformed. */
int bq_metrics_parse_stat(const char *stat, long ticks, long page, uint64_t btime,
                          bq_metrics_process_t *p);

/* Everything one scrape shows; NULL members are left out. */
typedef struct bq_metrics_source {
    const char *version;
    const bq_metrics_engine_t *engine;
    const bq_metrics_binlog_t *binlog;   /* NULL without -b */
    const bq_cluster_status_t *cluster;  /* NULL on a single beanstalkd */
    const bq_metrics_process_t *process; /* NULL when /proc could not be read */
    uint64_t tls_failures_replication, tls_failures_admin;
    /* The notAfter of the node's own TLS certificate, in seconds since the
     * epoch (bq_tls_certificate_expiry); left out without has_tls_cert. */
    bool has_tls_cert;
    int64_t tls_cert_not_after;
} bq_metrics_source_t;

/* Writes the families of a cluster node's replication, elections and
 * failovers (metrics_cluster.c) from st (borrowed) and the event counters. */
void bq_metrics_cluster(bq_prom_t *p, const bq_cluster_status_t *st);

/* The /metrics text: new, freed with free; NULL when out of memory. */
char *bq_metrics_render(const bq_metrics_source_t *src);

#endif
