/* The cluster families of /metrics: role, epoch and LSNs, readiness, sync
 * replication's state, every standby's connection, positions and lag (on
 * the primary), and the counters of elections, role changes, fencing,
 * switchovers and resyncs (node/base/counters.h). Standby names are
 * label values and escaped as such. */
#include "node/admin/metrics.h"

#include <string.h>

#define P "beanstalkd_ha_"

static void gauge(bq_prom_t *p, const char *name, const char *help, double v)
{
    bq_prom_family(p, name, "gauge", help);
    bq_prom_value(p, v);
}

/* One family with a sample per label value in vals[0..n), 1 for the one
 * equal to current, 0 for the others. */
static void one_of(bq_prom_t *p, const char *name, const char *help, const char *label,
                   const char *const *vals, size_t n, const char *current)
{
    bq_prom_family(p, name, "gauge", help);
    for (size_t i = 0; i < n; i++)
        bq_prom_labeled(p, label, vals[i], current && strcmp(current, vals[i]) == 0);
}

static void node_metrics(bq_prom_t *p, const bq_cluster_status_t *st)
{
    static const char *const roles[] = {"primary", "standby", "precandidate", "candidate"};
    bq_prom_family(p, P "node_info", "gauge", "1, labelled with the node and cluster ids");
    const char *l[] = {"node_id", st->node_id ? st->node_id : "", "cluster_id",
                       st->cluster_id ? st->cluster_id : ""};
    bq_prom_sample(p, NULL, l, 2, 1);
    one_of(p, P "role", "1 for the node's current role", "role", roles, 4, st->role);
    gauge(p, P "epoch", "the epoch the node is in", (double)st->epoch);
    gauge(p, P "last_lsn", "the node's last binlog record", (double)st->last_lsn);
    gauge(p, P "durable_lsn", "records up to here are on disk", (double)st->durable_lsn);
    gauge(p, P "commit_lsn", "replies up to here may be sent", (double)st->commit_lsn);
    if (strcmp(st->role, "primary") != 0)
        gauge(p, P "primary_commit_lsn", "standby: the primary's commit LSN at its last heartbeat",
              (double)st->primary_commit_lsn);
    gauge(p, P "fenced", "1 while a primary without a majority refuses writes", st->fenced);
    gauge(p, P "ready", "1 when the node serves clients (readyz)", st->ready);
    gauge(p, P "failover_auto", "1 with --failover=auto", st->failover_auto);
}

static void sync_metrics(bq_prom_t *p, const bq_cluster_status_t *st)
{
    static const char *const states[] = {"off", "sync", "waiting", "degraded", "refusing"};
    static const char *const fallbacks[] = {"async", "refuse"};
    gauge(p, P "sync_standbys_required", "--sync-standbys: standbys that must have a record",
          st->sync_standbys);
    one_of(p, P "sync_fallback", "1 for --sync-fallback (too few standbys in sync)", "fallback",
           fallbacks, 2, st->fallback_async ? "async" : "refuse");
    if (!st->sync_state)
        return; /* a standby */
    one_of(p, P "sync_state", "1 for the primary's sync state", "state", states, 5, st->sync_state);
    gauge(p, P "sync_degraded", "1 while fallback async is in force (acks without standbys)",
          strcmp(st->sync_state, "degraded") == 0);
    gauge(p, P "standbys_in_sync", "standbys connected and in sync", (double)st->in_sync);
}

static double standby_value(const bq_cluster_standby_status_t *sb, size_t f)
{
    switch (f) {
    case 0:
        return strcmp(sb->state, "disconnected") != 0;
    case 1:
        return (double)sb->flushed;
    case 2:
        return (double)sb->applied;
    case 3:
        return (double)sb->lag_records;
    case 4:
        return (double)sb->lag_bytes;
    default:
        return sb->lag_seconds;
    }
}

static void standby_metrics(bq_prom_t *p, const bq_cluster_status_t *st)
{
    static const struct {
        const char *name, *help;
    } fam[] = {
        {P "standby_connected", "1 while the standby is connected"},
        {P "standby_flushed_lsn", "the last record the standby has on disk"},
        {P "standby_applied_lsn", "the last record the standby has applied"},
        {P "standby_lag_records", "records the standby has not applied"},
        {P "standby_lag_bytes", "binlog bytes the standby has not applied"},
        {P "standby_lag_seconds", "age of the oldest record the standby lacks"},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        bq_prom_family(p, fam[f].name, "gauge", fam[f].help);
        for (size_t i = 0; i < st->nstandbys; i++)
            bq_prom_labeled(p, "standby", st->standbys[i].name, standby_value(&st->standbys[i], f));
    }
}

static void counter2(bq_prom_t *p, const char *name, const char *help, const char *label,
                     const char *a, bq_counter_t ca, const char *b, bq_counter_t cb)
{
    bq_prom_family(p, name, "counter", help);
    bq_prom_labeled(p, label, a, (double)bq_metrics_counter(ca));
    bq_prom_labeled(p, label, b, (double)bq_metrics_counter(cb));
}

static void counter(bq_prom_t *p, const char *name, const char *help, bq_counter_t c)
{
    bq_prom_family(p, name, "counter", help);
    bq_prom_value(p, (double)bq_metrics_counter(c));
}

static void event_metrics(bq_prom_t *p)
{
    counter(p, P "elections_started_total", "elections this node stood in as a candidate",
            BQ_COUNTER_ELECTIONS_STARTED);
    counter(p, P "elections_won_total", "elections this node won", BQ_COUNTER_ELECTIONS_WON);
    counter2(p, P "role_changes_total", "role changes in place, by the role taken", "to", "primary",
             BQ_COUNTER_BECAME_PRIMARY, "standby", BQ_COUNTER_BECAME_STANDBY);
    counter(p, P "fencings_total", "times this primary lost its majority and stopped acking",
            BQ_COUNTER_FENCINGS);
    counter2(p, P "switchovers_total", "switchovers this primary ran, by outcome", "result", "done",
             BQ_COUNTER_SWITCHOVERS_DONE, "failed", BQ_COUNTER_SWITCHOVERS_FAILED);
    counter(p, P "forced_promotions_total", "promotions forced on this node (promote --force)",
            BQ_COUNTER_FORCED_PROMOTIONS);
    counter(p, P "resyncs_total", "full resyncs this standby installed", BQ_COUNTER_RESYNCS);
    bq_prom_family(p, P "rejoins_total", "counter",
                   "streams this standby began, by where: resume (after its last record), cut "
                   "(after its log was cut back to the fork point) or resync");
    bq_prom_labeled(p, "start", "resume", (double)bq_metrics_counter(BQ_COUNTER_REJOINS_RESUME));
    bq_prom_labeled(p, "start", "cut", (double)bq_metrics_counter(BQ_COUNTER_REJOINS_CUT));
    bq_prom_labeled(p, "start", "resync", (double)bq_metrics_counter(BQ_COUNTER_REJOINS_RESYNC));
    counter(p, P "cut_records_total", "records moved aside by cuts back to a fork point",
            BQ_COUNTER_CUT_RECORDS);
}

void bq_metrics_cluster(bq_prom_t *p, const bq_cluster_status_t *st)
{
    node_metrics(p, st);
    sync_metrics(p, st);
    if (st->sync_state)
        standby_metrics(p, st);
    event_metrics(p);
}
