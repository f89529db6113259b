/* Renders a node's metrics (metrics.h) in the Prometheus text format with
 * node/admin/metrics_text.h. Naming follows Prometheus' rules: one prefix
 * (beanstalkd_ha_), base units (seconds, bytes), counters end in _total,
 * and a label is only used where summing over it makes sense (beanstalkd's
 * producer, worker and waiting connections overlap, so they are separate
 * gauges). Cluster families are only written on a cluster node, the binlog
 * ones only with -b, the certificate's expiry only with TLS;
 * docs/admin-api.md lists them all. */
#include "node/admin/metrics.h"

#include <stdio.h>
#include <string.h>

#define P "beanstalkd_ha_"

/* The commands of beanstalkd's `stats` (cmd-<name>), plus reserve-job and
 * kick-job which beanstalkd counts but does not print. */
static const struct {
    bq_op_t op;
    const char *name;
} commands[] = {
    {BQ_OP_PUT, "put"},
    {BQ_OP_PEEK, "peek"},
    {BQ_OP_PEEK_READY, "peek-ready"},
    {BQ_OP_PEEK_DELAYED, "peek-delayed"},
    {BQ_OP_PEEK_BURIED, "peek-buried"},
    {BQ_OP_RESERVE, "reserve"},
    {BQ_OP_RESERVE_TIMEOUT, "reserve-with-timeout"},
    {BQ_OP_RESERVE_JOB, "reserve-job"},
    {BQ_OP_DELETE, "delete"},
    {BQ_OP_RELEASE, "release"},
    {BQ_OP_USE, "use"},
    {BQ_OP_WATCH, "watch"},
    {BQ_OP_IGNORE, "ignore"},
    {BQ_OP_BURY, "bury"},
    {BQ_OP_KICK, "kick"},
    {BQ_OP_KICK_JOB, "kick-job"},
    {BQ_OP_TOUCH, "touch"},
    {BQ_OP_STATS, "stats"},
    {BQ_OP_STATS_JOB, "stats-job"},
    {BQ_OP_STATS_TUBE, "stats-tube"},
    {BQ_OP_LIST_TUBES, "list-tubes"},
    {BQ_OP_LIST_TUBE_USED, "list-tube-used"},
    {BQ_OP_LIST_TUBES_WATCHED, "list-tubes-watched"},
    {BQ_OP_PAUSE_TUBE, "pause-tube"},
};

static void gauge(bq_prom_t *p, const char *name, const char *help, double v)
{
    bq_prom_family(p, name, "gauge", help);
    bq_prom_value(p, v);
}

static void counter(bq_prom_t *p, const char *name, const char *help, double v)
{
    bq_prom_family(p, name, "counter", help);
    bq_prom_value(p, v);
}

static void process_metrics(bq_prom_t *p, const bq_metrics_process_t *m)
{
    counter(p, "process_cpu_seconds_total", "user and system CPU time spent", m->cpu_seconds);
    gauge(p, "process_resident_memory_bytes", "resident memory size", (double)m->resident_bytes);
    gauge(p, "process_virtual_memory_bytes", "virtual memory size", (double)m->virtual_bytes);
    gauge(p, "process_open_fds", "open file descriptors", (double)m->open_fds);
    if (m->max_fds > 0)
        gauge(p, "process_max_fds", "the limit of open file descriptors", (double)m->max_fds);
    gauge(p, "process_start_time_seconds", "start time of the process since the epoch",
          m->start_time_seconds);
}

static void job_metrics(bq_prom_t *p, const bq_metrics_engine_t *m)
{
    bq_prom_family(p, P "jobs", "gauge", "jobs by state (current-jobs-* of stats)");
    bq_prom_labeled(p, "state", "ready", (double)m->ready);
    bq_prom_labeled(p, "state", "reserved", (double)m->reserved);
    bq_prom_labeled(p, "state", "delayed", (double)m->delayed);
    bq_prom_labeled(p, "state", "buried", (double)m->buried);
    gauge(p, P "jobs_urgent", "ready jobs with a priority below 1024", (double)m->urgent);
    counter(p, P "jobs_created_total", "jobs put since the process started (total-jobs)",
            (double)m->jobs_created);
    counter(p, P "job_timeouts_total", "reservations that timed out (job-timeouts)",
            (double)m->job_timeouts);
    gauge(p, P "draining", "1 in drain mode (put answers DRAINING)", m->draining);
}

static void tube_metrics(bq_prom_t *p, const bq_metrics_engine_t *m)
{
    static const char *const states[] = {"ready", "reserved", "delayed", "buried"};
    gauge(p, P "tubes", "tubes that exist (current-tubes)", (double)m->tubes);
    bq_prom_family(p, P "tube_jobs", "gauge", "jobs of a tube by state (stats-tube)");
    for (size_t i = 0; i < m->ntube; i++) {
        const bq_metrics_tube_t *t = &m->tube[i];
        const uint64_t v[] = {t->ready, t->reserved, t->delayed, t->buried};
        for (size_t s = 0; s < 4; s++) {
            const char *l[] = {"tube", t->name, "state", states[s]};
            bq_prom_sample(p, NULL, l, 2, (double)v[s]);
        }
    }
    bq_prom_family(p, P "tube_jobs_urgent", "gauge", "ready jobs of a tube with priority < 1024");
    for (size_t i = 0; i < m->ntube; i++)
        bq_prom_labeled(p, "tube", m->tube[i].name, (double)m->tube[i].urgent);
    gauge(p, P "tubes_not_exported", "tubes left out of the tube_* families (over 1000)",
          (double)(m->tubes > m->ntube ? m->tubes - m->ntube : 0));
}

static void command_metrics(bq_prom_t *p, const bq_metrics_engine_t *m)
{
    bq_prom_family(p, P "commands_total", "counter", "commands run, by name (cmd-* of stats)");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        bq_prom_labeled(p, "command", commands[i].name, (double)m->ops[commands[i].op]);
    gauge(p, P "connections", "open client connections (current-connections)",
          (double)m->connections);
    gauge(p, P "producer_connections", "connections that have put a job (current-producers)",
          (double)m->producers);
    gauge(p, P "worker_connections", "connections that have reserved (current-workers)",
          (double)m->workers);
    gauge(p, P "waiting_connections", "connections waiting in reserve (current-waiting)",
          (double)m->waiting);
    counter(p, P "connections_accepted_total", "client connections accepted (total-connections)",
            (double)m->connections_accepted);
}

static void fsync_histogram(bq_prom_t *p, const bq_histogram_t *h)
{
    bq_prom_family(p, P "binlog_fsync_duration_seconds", "histogram",
                   "time an fdatasync of the binlog took");
    uint64_t cum = 0;
    for (size_t i = 0; i <= BQ_HIST_BUCKETS; i++) {
        char le[32];
        if (i < BQ_HIST_BUCKETS)
            snprintf(le, sizeof le, "%g", bq_histogram_bound(i));
        else
            snprintf(le, sizeof le, "+Inf");
        cum += h->bucket[i];
        const char *l[] = {"le", le};
        bq_prom_sample(p, "_bucket", l, 1, (double)cum);
    }
    bq_prom_sample(p, "_sum", NULL, 0, (double)h->sum_ns / 1e9);
    bq_prom_sample(p, "_count", NULL, 0, (double)h->count);
}

static void binlog_metrics(bq_prom_t *p, const bq_metrics_binlog_t *b)
{
    counter(p, P "binlog_written_bytes_total", "bytes of records written to the binlog",
            (double)b->bytes_written);
    counter(p, P "binlog_written_records_total", "records written to the binlog",
            (double)b->records_written);
    gauge(p, P "binlog_segments", "binlog segment files on disk", (double)b->segments);
    gauge(p, P "binlog_size_bytes", "bytes the binlog segments take on disk (preallocation too)",
          (double)b->disk_bytes);
    gauge(p, P "binlog_failing", "1 while a binlog write or fsync fails and is retried",
          b->failing);
    fsync_histogram(p, &b->fsync);
    if (b->fs_known) {
        gauge(p, P "binlog_filesystem_avail_bytes",
              "bytes still free for the node on the binlog directory's filesystem (statvfs)",
              (double)b->fs_avail_bytes);
        gauge(p, P "binlog_filesystem_size_bytes",
              "size of the binlog directory's filesystem (statvfs)", (double)b->fs_size_bytes);
    }
}

static void tls_metrics(bq_prom_t *p, const bq_metrics_source_t *s)
{
    bq_prom_family(p, P "tls_handshake_failures_total", "counter",
                   "TLS handshakes that failed (bad or missing certificate, not TLS, ...)");
    bq_prom_labeled(p, "channel", "replication", (double)s->tls_failures_replication);
    bq_prom_labeled(p, "channel", "admin", (double)s->tls_failures_admin);
    if (s->has_tls_cert)
        gauge(p, P "tls_certificate_expiry_timestamp_seconds",
              "notAfter of the node's own TLS certificate, since the epoch",
              (double)s->tls_cert_not_after);
}

char *bq_metrics_render(const bq_metrics_source_t *src)
{
    bq_prom_t p = {0};
    bq_prom_family(&p, P "build_info", "gauge", "1, labelled with the version");
    bq_prom_labeled(&p, "version", src->version ? src->version : "", 1);
    if (src->engine) {
        job_metrics(&p, src->engine);
        tube_metrics(&p, src->engine);
        command_metrics(&p, src->engine);
    }
    if (src->binlog)
        binlog_metrics(&p, src->binlog);
    if (src->cluster)
        bq_metrics_cluster(&p, src->cluster);
    tls_metrics(&p, src);
    if (src->process)
        process_metrics(&p, src->process);
    return bq_prom_finish(&p);
}
