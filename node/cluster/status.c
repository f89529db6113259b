/* The node's replication status: the cluster keys of `stats`, the /status
 * document, the periodic line in the log, and one line per change of the
 * primary's sync state. */
#include "node/cluster/internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "node/base/clock.h"
#include "node/base/log.h"

const char *bq__cluster_role_name(const bq_cluster_t *c)
{
    return !c->standby ? "primary" : c->f->role == BQ_ROLE_WITNESS ? "witness" : "standby";
}

/* One line per change of the primary's sync state: an operator must see
 * when writes are acknowledged without a standby (degraded) or refused. */
void bq__cluster_log_sync_state(bq_cluster_t *c)
{
    bq_sync_state_t st = bq_feeder_sync_state(c->feeder);
    if ((int)st == c->sync_logged)
        return;
    bool first = c->sync_logged < 0;
    c->sync_logged = (int)st;
    if (first && (st == BQ_SYNC_OFF || st == BQ_SYNC_WAITING))
        return; /* the start-up line says the mode; no standby yet is normal */
    bq_log(st == BQ_SYNC_DEGRADED || st == BQ_SYNC_REFUSING ? BQ_LOG_WARN : BQ_LOG_INFO,
           st == BQ_SYNC_DEGRADED   ? "replication: sync degraded: writes are acknowledged "
                                      "without a standby (--sync-fallback async)"
           : st == BQ_SYNC_REFUSING ? "replication: sync lost: writes are refused "
                                      "(--sync-fallback refuse)"
           : st == BQ_SYNC_WAITING  ? "replication: too few standbys in sync: replies wait"
           : st == BQ_SYNC_ON       ? "replication: sync restored"
                                    : "replication: sync off",
           "state=%s in_sync=%zu", bq_commit_state_name(st), bq_feeder_in_sync(c->feeder));
}

static size_t put_kv(char *buf, size_t cap, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t put_kv(char *buf, size_t cap, size_t n, const char *fmt, ...)
{
    va_list ap;
    if (n >= cap)
        return n;
    va_start(ap, fmt);
    int w = vsnprintf(buf + n, cap - n, fmt, ap);
    va_end(ap);
    return w < 0 ? n : n + (size_t)w;
}

static const char *standby_state(const bq_feeder_standby_t *sb)
{
    return !sb->connected ? "disconnected"
           : sb->witness  ? "witness"
           : sb->in_sync  ? "streaming"
                          : "catching-up";
}

/* The primary's keys: sync state and every standby. */
static size_t primary_keys(bq_cluster_t *c, char *buf, size_t cap, size_t n)
{
    int64_t now = bq_clock_now().mono;
    n = put_kv(buf, cap, n, "cluster-sync-state: %s\ncluster-standbys-in-sync: %zu\n",
               bq_commit_state_name(bq_feeder_sync_state(c->feeder)), bq_feeder_in_sync(c->feeder));
    for (size_t i = 0; i < bq_feeder_nstandbys(c->feeder); i++) {
        bq_feeder_standby_t sb;
        bq_feeder_standby(c->feeder, i, now, &sb);
        n = put_kv(buf, cap, n,
                   "cluster-standby-%s: \"state=%s sent=%" PRIu64 " written=%" PRIu64
                   " flushed=%" PRIu64 " applied=%" PRIu64 " lag-records=%" PRIu64
                   " lag-bytes=%" PRIu64 " lag-ms=%" PRIu64 " clock-offset-ms=%" PRId64 "\"\n",
                   sb.name, standby_state(&sb), sb.sent, sb.written, sb.flushed, sb.applied,
                   sb.lag_records, sb.lag_bytes, sb.lag_ms, sb.clock_offset_ms);
    }
    return n;
}

static size_t standby_keys(bq_cluster_t *c, char *buf, size_t cap, size_t n)
{
    bq_receiver_status_t st;
    bq_receiver_status(c->receiver, &st);
    const bq_cluster_rejoin_t *r = &c->rejoin.last;
    return put_kv(buf, cap, n,
                  "cluster-primary: \"%s\"\ncluster-primary-last-lsn: %" PRIu64
                  "\ncluster-resyncing: %s\ncluster-proxied-connections: %zu\n"
                  "cluster-rejoin: %s\ncluster-rejoin-from-lsn: %" PRIu64
                  "\ncluster-rejoin-cut-records: %" PRIu64 "\n",
                  st.primary, st.primary_last_lsn, st.resyncing ? "true" : "false",
                  bq_proxy_count(c->proxy), r->start ? r->start : "none", r->from_lsn,
                  r->cut_records);
}

/* Formats every cluster key into c->extra. */
static const char *format_status(bq_cluster_t *c)
{
    bq_binlog_t *b = c->host.binlog;
    size_t cap = sizeof c->extra;
    size_t n =
        put_kv(c->extra, cap, 0,
               "cluster-role: %s\ncluster-node-id: \"%s\"\ncluster-epoch: %" PRIu64
               "\ncluster-last-lsn: %" PRIu64 "\ncluster-durable-lsn: %" PRIu64
               "\ncluster-commit-lsn: %" PRIu64 "\n",
               bq__cluster_role_name(c), c->f->node_id, bq_binlog_epoch(b), bq_binlog_last_lsn(b),
               bq_binlog_durable_lsn(b), c->standby ? bq_binlog_durable_lsn(b) : c->released);
    n = c->standby ? standby_keys(c, c->extra, cap, n) : primary_keys(c, c->extra, cap, n);
    (void)n;
    return c->extra;
}

static void standby_status(bq_cluster_t *c, size_t i, int64_t now, bq_cluster_standby_status_t *o)
{
    bq_feeder_standby_t sb;
    bq_feeder_standby(c->feeder, i, now, &sb);
    *o = (bq_cluster_standby_status_t){
        .name = sb.name,
        .state = standby_state(&sb),
        .addr = sb.connected ? sb.addr : "",
        .sent = sb.sent,
        .written = sb.written,
        .flushed = sb.flushed,
        .applied = sb.applied,
        .lag_records = sb.lag_records,
        .lag_bytes = sb.lag_bytes,
        .lag_seconds = (double)sb.lag_ms / 1000.0,
        .clock_offset_seconds = (double)sb.clock_offset_ms / 1000.0,
        .floor = sb.floor,
    };
}

void bq_cluster_status(bq_cluster_t *c, bq_cluster_status_t *st)
{
    bq_binlog_t *b = c->host.binlog;
    const bq_election_t *e = bq_failover_election(c->failover);
    int64_t now = bq_clock_now().mono;
    memset(st, 0, sizeof *st);
    st->node_id = c->f->node_id;
    st->cluster_id = c->f->cluster_id;
    st->role = c->standby ? bq_el_role_name(e) : "primary";
    st->epoch = bq_binlog_epoch(b) > e->epoch ? bq_binlog_epoch(b) : e->epoch;
    st->last_lsn = bq_binlog_last_lsn(b);
    st->durable_lsn = bq_binlog_durable_lsn(b);
    st->commit_lsn = c->standby ? st->durable_lsn : c->released;
    st->failover_auto = c->f->failover_auto;
    st->fenced = !c->standby && !bq_failover_may_ack(c->failover);
    st->sync_standbys = (unsigned)c->f->sync_standbys;
    st->fallback_async = c->f->sync_fallback_async;
    if (!c->standby) {
        st->primary = c->f->node_id;
        st->sync_state = bq_commit_state_name(bq_feeder_sync_state(c->feeder));
        st->in_sync = bq_feeder_in_sync(c->feeder);
        st->nstandbys = bq_feeder_nstandbys(c->feeder);
        for (size_t i = 0; i < st->nstandbys && i < BQ_FLAGS_MAX_PEERS; i++)
            standby_status(c, i, now, &st->standbys[i]);
        /* A pause (switchover, stepping down) holds writes: still ready. */
        st->paused = bq_cluster_pause(c);
        st->not_ready = st->paused ? NULL : bq_cluster_refusal(c);
    } else {
        bq_receiver_status_t rs;
        bq_receiver_status(c->receiver, &rs);
        st->primary = rs.connected && rs.primary[0] ? rs.primary : NULL;
        st->primary_commit_lsn = rs.primary_commit_lsn;
        /* Just after the primary went away, clients are held for the next
         * one: the node stays ready through the election, for the bound. */
        st->riding = !rs.connected && bq_proxy_riding(c->proxy);
        st->not_ready = st->riding      ? NULL
                        : !rs.connected ? "no primary followed"
                        : rs.resyncing  ? "resyncing"
                                        : NULL;
    }
    st->ready = st->not_ready == NULL;
    st->rejoin = c->rejoin.last;
    st->npeers = c->npeers;
    for (size_t i = 0; i < c->npeers; i++) {
        st->peer_names[i] = c->peers[i].name;
        snprintf(st->peer_addrs[i], sizeof st->peer_addrs[i], "%s:%s", c->peers[i].host,
                 c->peers[i].port);
    }
}

SSL_CTX *bq_cluster_tls_server(const bq_cluster_t *c)
{
    return c ? c->tls_server : NULL;
}

void bq_cluster_fill_info(bq_cluster_t *c, bq_server_info_t *info)
{
    info->extra = format_status(c);
}

/* The status in the log: one line per key group, at info level. */
void bq__cluster_on_status(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    char line[4096];
    size_t j = 0;
    for (const char *p = format_status(c); *p && j + 2 < sizeof line; p++)
        line[j++] = *p == '\n' ? ' ' : *p == '"' ? '\'' : *p;
    line[j] = '\0';
    bq_log(BQ_LOG_INFO, "replication status", "%s", line);
}
