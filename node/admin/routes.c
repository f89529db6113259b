/* The admin API's routes: the node's state rendered as the /status JSON
 * document (cJSON), /readyz from the same state, /metrics gathered from
 * the engine, the binlog, the cluster and the process (node/admin/metrics.h),
 * and the operator's requests handed to the cluster (node/cluster/cluster.h). A
 * single beanstalkd (no --role) serves the same routes: role "single",
 * always ready, no promote or switchover (409). */
#include "node/admin/routes.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "node/admin/access.h"
#include "node/admin/console.h"
#include "node/admin/console_auth.h"
#include "node/base/log.h"
#include "node/admin/metrics.h"
#include "replication/tls.h"

/* ---- /status ---- */

static void add_standby(cJSON *arr, const bq_cluster_standby_status_t *sb)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    cJSON_AddStringToObject(o, "node_id", sb->name);
    cJSON_AddStringToObject(o, "state", sb->state);
    cJSON_AddStringToObject(o, "address", sb->addr);
    cJSON_AddNumberToObject(o, "clock_offset_seconds", sb->clock_offset_seconds);
    if (strcmp(sb->state, "witness") == 0) {
        /* No records: the floor it promised never to vote below instead. */
        cJSON_AddNumberToObject(o, "floor_lsn", (double)sb->floor);
        cJSON_AddItemToArray(arr, o);
        return;
    }
    cJSON_AddNumberToObject(o, "sent_lsn", (double)sb->sent);
    cJSON_AddNumberToObject(o, "written_lsn", (double)sb->written);
    cJSON_AddNumberToObject(o, "flushed_lsn", (double)sb->flushed);
    cJSON_AddNumberToObject(o, "applied_lsn", (double)sb->applied);
    cJSON_AddNumberToObject(o, "lag_records", (double)sb->lag_records);
    cJSON_AddNumberToObject(o, "lag_bytes", (double)sb->lag_bytes);
    cJSON_AddNumberToObject(o, "lag_seconds", sb->lag_seconds);
    cJSON_AddItemToArray(arr, o);
}

/* How the last stream from a primary began: "last_rejoin", null when none. */
static void add_rejoin(cJSON *doc, const bq_cluster_rejoin_t *r)
{
    if (!r->start) {
        cJSON_AddNullToObject(doc, "last_rejoin");
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(doc, "last_rejoin");
    if (!o)
        return;
    cJSON_AddStringToObject(o, "start", r->start);
    cJSON_AddStringToObject(o, "primary", r->primary);
    cJSON_AddNumberToObject(o, "epoch", (double)r->epoch);
    cJSON_AddNumberToObject(o, "from_lsn", (double)r->from_lsn);
    cJSON_AddNumberToObject(o, "primary_last_lsn", (double)r->primary_last_lsn);
    cJSON_AddNumberToObject(
        o, "records_to_stream",
        r->primary_last_lsn >= r->from_lsn ? (double)(r->primary_last_lsn - r->from_lsn + 1) : 0.0);
    cJSON_AddNumberToObject(o, "cut_records", (double)r->cut_records);
    cJSON_AddNumberToObject(o, "cut_bytes", (double)r->cut_bytes);
    cJSON_AddNumberToObject(o, "at", (double)r->at_wall_ms / 1000.0);
}

static void add_sync(cJSON *doc, const bq_cluster_status_t *st)
{
    cJSON *sync = cJSON_AddObjectToObject(doc, "sync");
    if (!sync)
        return;
    cJSON_AddNumberToObject(sync, "standbys", st->sync_standbys);
    cJSON_AddStringToObject(sync, "fallback", st->fallback_async ? "async" : "refuse");
    if (st->sync_state)
        cJSON_AddStringToObject(sync, "state", st->sync_state);
    cJSON_AddNumberToObject(sync, "in_sync", (double)st->in_sync);
}

/* A single beanstalkd's document: its role and binlog positions. */
static char *single_json(const bq_cluster_status_t *st)
{
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return NULL;
    cJSON_AddStringToObject(doc, "role", st->role);
    cJSON_AddNumberToObject(doc, "last_lsn", (double)st->last_lsn);
    cJSON_AddNumberToObject(doc, "durable_lsn", (double)st->durable_lsn);
    cJSON_AddNumberToObject(doc, "commit_lsn", (double)st->commit_lsn);
    cJSON_AddBoolToObject(doc, "ready", st->ready);
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    return text;
}

char *bq_admin_status_json(const bq_cluster_status_t *st)
{
    if (strcmp(st->role, "single") == 0)
        return single_json(st);
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return NULL;
    cJSON_AddStringToObject(doc, "node_id", st->node_id);
    cJSON_AddStringToObject(doc, "cluster_id", st->cluster_id);
    cJSON_AddStringToObject(doc, "role", st->role);
    cJSON_AddNumberToObject(doc, "epoch", (double)st->epoch);
    cJSON_AddNumberToObject(doc, "last_lsn", (double)st->last_lsn);
    cJSON_AddNumberToObject(doc, "durable_lsn", (double)st->durable_lsn);
    cJSON_AddNumberToObject(doc, "commit_lsn", (double)st->commit_lsn);
    if (st->primary)
        cJSON_AddStringToObject(doc, "primary", st->primary);
    else
        cJSON_AddNullToObject(doc, "primary");
    if (strcmp(st->role, "primary") != 0)
        cJSON_AddNumberToObject(doc, "primary_commit_lsn", (double)st->primary_commit_lsn);
    cJSON_AddStringToObject(doc, "failover", st->failover_auto ? "auto" : "manual");
    cJSON_AddBoolToObject(doc, "fenced", st->fenced);
    cJSON_AddBoolToObject(doc, "ready", st->ready);
    if (st->not_ready)
        cJSON_AddStringToObject(doc, "not_ready", st->not_ready);
    if (st->riding)
        cJSON_AddBoolToObject(doc, "holding_clients", true);
    if (st->paused)
        cJSON_AddStringToObject(doc, "writes_paused", st->paused);
    add_sync(doc, st);
    add_rejoin(doc, &st->rejoin);
    cJSON *sbs = cJSON_AddArrayToObject(doc, "standbys");
    for (size_t i = 0; sbs && i < st->nstandbys; i++)
        add_standby(sbs, &st->standbys[i]);
    cJSON *peers = cJSON_AddArrayToObject(doc, "peers");
    for (size_t i = 0; peers && i < st->npeers; i++) {
        cJSON *p = cJSON_CreateObject();
        if (!p)
            break;
        cJSON_AddStringToObject(p, "node_id", st->peer_names[i]);
        cJSON_AddStringToObject(p, "address", st->peer_addrs[i]);
        cJSON_AddItemToArray(peers, p);
    }
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    return text;
}

/* ---- handlers ---- */

static const char NOT_CLUSTER[] = "not a cluster node (started without --role)";

/* A single beanstalkd (no --role): its binlog's positions, always ready. */
static void single_status(const bq_admin_node_t *s, bq_cluster_status_t *st)
{
    memset(st, 0, sizeof *st);
    st->role = "single";
    st->ready = true;
    if (s->binlog) {
        st->epoch = bq_binlog_epoch(s->binlog);
        st->last_lsn = bq_binlog_last_lsn(s->binlog);
        st->durable_lsn = bq_binlog_durable_lsn(s->binlog);
        st->commit_lsn = bq_binlog_release_lsn(s->binlog);
    }
}

/* A standby that follows a primary is ready only while it lags at most
 * READY_MAX_LAG records behind the commit LSN of the primary's last
 * heartbeat (docs/admin-api.md). */
static void apply_lag_bound(bq_cluster_status_t *st)
{
    static char why[128];
    if (!st->ready || st->primary == NULL || strcmp(st->role, "primary") == 0 ||
        st->primary_commit_lsn <= st->durable_lsn + BQ_ADMIN_READY_MAX_LAG)
        return;
    snprintf(why, sizeof why, "lagging %" PRIu64 " records behind the primary (bound %d)",
             st->primary_commit_lsn - st->durable_lsn, BQ_ADMIN_READY_MAX_LAG);
    st->ready = false;
    st->not_ready = why;
}

/* The node's status now (new, free it), or NULL when out of memory. */
static bq_cluster_status_t *status_now(const bq_admin_node_t *s)
{
    bq_cluster_status_t *st = malloc(sizeof *st);
    if (st && !s->cluster) {
        single_status(s, st);
    } else if (st) {
        bq_cluster_status(s->cluster, st);
        apply_lag_bound(st);
    }
    return st;
}

static bool h_ready(void *arg, char *why, size_t whylen)
{
    bq_cluster_status_t *st = status_now(arg);
    bool ready = st && st->ready;
    snprintf(why, whylen, "%s", !st ? "out of memory" : st->not_ready ? st->not_ready : "");
    free(st);
    return ready;
}

static char *h_status(void *arg)
{
    bq_cluster_status_t *st = status_now(arg);
    char *doc = st ? bq_admin_status_json(st) : NULL;
    free(st);
    return doc;
}

static void binlog_figures(bq_binlog_t *b, bq_metrics_binlog_t *m)
{
    m->bytes_written = bq_binlog_written_bytes(b);
    m->records_written = bq_binlog_records_written(b);
    m->segments = bq_binlog_nsegs(b);
    m->disk_bytes = bq_binlog_disk_bytes(b);
    m->failing = bq_binlog_failing(b);
    m->fsync = *bq_binlog_fsync_histogram(b);
    bq_metrics_filesystem_read(bq_binlog_dir(b), m);
}

static char *h_metrics(void *arg)
{
    const bq_admin_node_t *s = arg;
    bq_metrics_engine_t eng;
    bq_metrics_binlog_t bl;
    bq_metrics_process_t pr;
    bq_cluster_status_t *st = s->cluster ? status_now(s) : NULL;
    if ((s->cluster && !st) || bq_metrics_engine_read(s->engine, &eng) != 0) {
        free(st);
        return NULL;
    }
    bq_metrics_source_t src = {
        .version = BQ_VERSION,
        .engine = &eng,
        .cluster = st,
        .tls_failures_replication = bq_tls_handshake_failures(BQ_TLS_REPLICATION),
        .tls_failures_admin = bq_tls_handshake_failures(BQ_TLS_ADMIN),
    };
    src.has_tls_cert = bq_tls_certificate_expiry(&src.tls_cert_not_after);
    if (s->binlog) {
        binlog_figures(s->binlog, &bl);
        src.binlog = &bl;
    }
    if (bq_metrics_process_read(&pr) == 0)
        src.process = &pr;
    char *text = bq_metrics_render(&src);
    bq_metrics_engine_free(&eng);
    free(st);
    return text;
}

static void h_promote(void *arg, bool force, bq_admin_reply_t *r)
{
    const bq_admin_node_t *s = arg;
    char why[256];
    if (!s->cluster) {
        bq_admin_respond(r, 409, NOT_CLUSTER);
        return;
    }
    if (bq_cluster_promote(s->cluster, force, why, sizeof why) != 0) {
        bq_admin_respond(r, 409, why);
        return;
    }
    bq_admin_respond(r, 202,
                     force ? "promotion forced: this node restarts as the primary"
                           : "election started: this node becomes the primary if a "
                             "majority of voters agrees");
}

static void h_console(void *arg, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    const bq_admin_node_t *s = arg;
    bq_console_handle(s->console, q, r);
}

static void switchover_done(void *arg, int status, const char *text)
{
    bq_admin_respond(arg, status, text);
}

static void h_switchover(void *arg, const char *to, bq_admin_reply_t *r)
{
    const bq_admin_node_t *s = arg;
    char why[256];
    if (!s->cluster)
        bq_admin_respond(r, 409, NOT_CLUSTER);
    else if (bq_cluster_switchover(s->cluster, to, switchover_done, r, why, sizeof why) != 0)
        bq_admin_respond(r, 409, why);
}

/* Reads the operator password: the first line of path (without its line
 * end) into buf[BQ_CONSOLE_PASSWORD_MAX + 1], its length in *len. 0, or -1
 * (logged). */
static int read_password(const char *path, char *buf, size_t *len)
{
    FILE *fp = fopen(path, "re");
    struct stat st;
    if (fp == NULL) {
        bq_log(BQ_LOG_ERROR, "cannot read the console password file", "path=\"%s\" err=\"%s\"",
               path, strerror(errno));
        return -1;
    }
    if (fstat(fileno(fp), &st) == 0 && (st.st_mode & 077) != 0)
        bq_log(BQ_LOG_WARN, "the console password file is readable by others",
               "path=\"%s\" mode=%03o", path, (unsigned)(st.st_mode & 0777));
    size_t n = fgets(buf, BQ_CONSOLE_PASSWORD_MAX + 1, fp) ? strcspn(buf, "\r\n") : 0;
    fclose(fp);
    buf[n] = '\0';
    if (n < BQ_CONSOLE_PASSWORD_MIN || n >= BQ_CONSOLE_PASSWORD_MAX) {
        bq_log(BQ_LOG_ERROR, "the console password must be one line of 12 to 255 bytes",
               "path=\"%s\" length=%zu", path, n);
        return -1;
    }
    *len = n;
    return 0;
}

/* The node's console, with its password file read; NULL (logged) when it
 * cannot start. */
static bq_console_t *start_console(bq_admin_node_t *s, const bq_flags_t *f)
{
    char pw[BQ_CONSOLE_PASSWORD_MAX + 1];
    size_t pwlen = 0;
    if (f->console_password_file && read_password(f->console_password_file, pw, &pwlen) != 0)
        return NULL;
    bq_console_config_t cfg = {.loop = s->loop,
                               .open_client = s->open_client,
                               .client_arg = s->arg,
                               .switchover = s->cluster ? h_switchover : NULL,
                               .arg = s,
                               .node_id = f->node_id,
                               .password = f->console_password_file ? pw : NULL,
                               .password_len = pwlen};
    bq_console_t *con = bq_console_new(&cfg);
    memset(pw, 0, sizeof pw);
    if (con == NULL)
        bq_log(BQ_LOG_ERROR, "cannot start the web console", "err=\"out of memory\"");
    return con;
}

void bq_admin_routes_stop(bq_admin_node_t *node, bq_admin_t **admin)
{
    if (*admin)
        bq_admin_stop(*admin);
    *admin = NULL;
    bq_console_free(node->console);
    node->console = NULL;
}

int bq_admin_routes_start(bq_admin_node_t *s, const bq_flags_t *f, bq_admin_t **out)
{
    static const char *names[2];
    size_t n = 0;
    *out = NULL;
    if (!f->admin_listen)
        return 0;
    /* The operator, and this node itself (its own hand-off): no other
     * peer's certificate is taken for anything (node/admin/access.h). */
    names[n++] = BQ_ADMIN_OPERATOR;
    if (f->node_id)
        names[n++] = f->node_id;
    char host[256];
    const char *colon = strrchr(f->admin_listen, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - f->admin_listen), f->admin_listen);
    size_t hl = strlen(host);
    if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    /* With the cluster's certificates the admin API is TLS on loopback too
     * (which then also answers plaintext GETs): a local user cannot POST. */
    bq_admin_config_t cfg = {.host = host,
                             .port = atoi(colon + 1),
                             .tls = bq_cluster_tls_server(s->cluster),
                             .names = names,
                             .nnames = n,
                             .self = f->node_id};
    bq_admin_handlers_t h = {.arg = (void *)s,
                             .ready = h_ready,
                             .status = h_status,
                             .metrics = h_metrics,
                             .promote = h_promote,
                             .switchover = h_switchover,
                             .console = h_console};
    if (bq_flags_admin_scope(f) == BQ_FLAGS_ADMIN_NOT_NUMERIC) {
        bq_log(BQ_LOG_ERROR, "the admin API needs a numeric address (IPv4 or [IPv6])", "addr=%s",
               f->admin_listen);
        return -1;
    }
    if ((s->console = start_console(s, f)) == NULL)
        return -1;
    int r = bq_admin_start(s->loop, &cfg, &h, out);
    if (r == -EINVAL) {
        bq_log(BQ_LOG_ERROR, "the admin API needs TLS off loopback (--tls-cert/--tls-key/--tls-ca)",
               "addr=%s", f->admin_listen);
        return -1;
    }
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot start the admin API", "addr=%s err=\"%s\"", f->admin_listen,
               uv_strerror(r));
        return -1;
    }
    bq_log(BQ_LOG_INFO, "admin API listening", "addr=%s security=\"%s\"", bq_admin_address(*out),
           !cfg.tls ? "plaintext (loopback)"
           : bq_flags_admin_scope(f) == BQ_FLAGS_ADMIN_LOOPBACK
               ? "TLS, and plaintext for GETs (loopback); a client certificate to POST"
               : "TLS (client certificate required to POST)");
    return 0;
}
