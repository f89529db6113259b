/* The admin API's routes on a cluster node: the cluster's state rendered as
 * the /status JSON document (cJSON) and as Prometheus metrics, and the
 * operator's requests handed to the cluster (node/cluster.h). */
#include "admin_routes.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

/* ---- /status ---- */

static void add_standby(cJSON *arr, const bq_cluster_standby_status_t *sb)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return;
    cJSON_AddStringToObject(o, "node_id", sb->name);
    cJSON_AddStringToObject(o, "state", sb->state);
    cJSON_AddStringToObject(o, "address", sb->addr);
    cJSON_AddNumberToObject(o, "sent_lsn", (double)sb->sent);
    cJSON_AddNumberToObject(o, "written_lsn", (double)sb->written);
    cJSON_AddNumberToObject(o, "flushed_lsn", (double)sb->flushed);
    cJSON_AddNumberToObject(o, "applied_lsn", (double)sb->applied);
    cJSON_AddNumberToObject(o, "lag_records", (double)sb->lag_records);
    cJSON_AddNumberToObject(o, "lag_bytes", (double)sb->lag_bytes);
    cJSON_AddNumberToObject(o, "lag_seconds", sb->lag_seconds);
    cJSON_AddNumberToObject(o, "clock_offset_seconds", sb->clock_offset_seconds);
    cJSON_AddItemToArray(arr, o);
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

char *bq_admin_status_json(const bq_cluster_status_t *st)
{
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
    add_sync(doc, st);
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

/* ---- /metrics ---- */

typedef struct text {
    char *buf;
    size_t len, cap;
    bool failed;
} text_t;

static void put(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(text_t *t, const char *fmt, ...)
{
    va_list ap;
    for (int pass = 0; pass < 2 && !t->failed; pass++) {
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
        } else if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        } else {
            size_t cap = (t->cap + (size_t)n) * 2;
            char *p = realloc(t->buf, cap);
            if (!p)
                t->failed = true;
            else
                t->buf = p, t->cap = cap;
        }
    }
}

/* One family's HELP and TYPE lines. */
static void family(text_t *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void standby_metrics(text_t *t, const bq_cluster_status_t *st)
{
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"beanstalkd_ha_standby_connected", "1 while the standby is connected"},
        {"beanstalkd_ha_standby_lag_records", "records the standby has not applied"},
        {"beanstalkd_ha_standby_lag_bytes", "binlog bytes the standby has not applied"},
        {"beanstalkd_ha_standby_lag_seconds", "age of the oldest record the standby lacks"},
    };
    for (size_t f = 0; f < sizeof fam / sizeof fam[0]; f++) {
        family(t, fam[f].name, "gauge", fam[f].help);
        for (size_t i = 0; i < st->nstandbys; i++) {
            const bq_cluster_standby_status_t *sb = &st->standbys[i];
            double v = f == 0   ? strcmp(sb->state, "disconnected") != 0
                       : f == 1 ? (double)sb->lag_records
                       : f == 2 ? (double)sb->lag_bytes
                                : sb->lag_seconds;
            put(t, "%s{standby=\"%s\"} %.17g\n", fam[f].name, sb->name, v);
        }
    }
}

char *bq_admin_metrics_text(const bq_cluster_status_t *st)
{
    static const char *const roles[] = {"primary", "standby", "precandidate", "candidate"};
    static const char *const states[] = {"off", "sync", "waiting", "degraded", "refusing"};
    text_t t = {0};
    family(&t, "beanstalkd_ha_role", "gauge", "1 for the node's current role");
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        put(&t, "beanstalkd_ha_role{role=\"%s\"} %d\n", roles[i], strcmp(st->role, roles[i]) == 0);
    family(&t, "beanstalkd_ha_epoch", "gauge", "the epoch the node is in");
    put(&t, "beanstalkd_ha_epoch %" PRIu64 "\n", st->epoch);
    family(&t, "beanstalkd_ha_last_lsn", "gauge", "the node's last binlog record");
    put(&t, "beanstalkd_ha_last_lsn %" PRIu64 "\n", st->last_lsn);
    family(&t, "beanstalkd_ha_durable_lsn", "gauge", "records up to here are on disk");
    put(&t, "beanstalkd_ha_durable_lsn %" PRIu64 "\n", st->durable_lsn);
    family(&t, "beanstalkd_ha_commit_lsn", "gauge", "replies up to here may be sent");
    put(&t, "beanstalkd_ha_commit_lsn %" PRIu64 "\n", st->commit_lsn);
    family(&t, "beanstalkd_ha_fenced", "gauge",
           "1 while a primary without a majority refuses writes");
    put(&t, "beanstalkd_ha_fenced %d\n", st->fenced);
    family(&t, "beanstalkd_ha_ready", "gauge", "1 when the node serves clients (readyz)");
    put(&t, "beanstalkd_ha_ready %d\n", st->ready);
    if (st->sync_state) {
        family(&t, "beanstalkd_ha_sync_state", "gauge", "1 for the primary's sync state");
        for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
            put(&t, "beanstalkd_ha_sync_state{state=\"%s\"} %d\n", states[i],
                strcmp(st->sync_state, states[i]) == 0);
        family(&t, "beanstalkd_ha_standbys_in_sync", "gauge", "standbys connected and in sync");
        put(&t, "beanstalkd_ha_standbys_in_sync %zu\n", st->in_sync);
        standby_metrics(&t, st);
    }
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    return t.buf;
}

/* ---- handlers ---- */

static bq_cluster_status_t *status_now(bq_server_t *s)
{
    bq_cluster_status_t *st = malloc(sizeof *st);
    if (st)
        bq_cluster_status(s->cluster, st);
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

static char *h_metrics(void *arg)
{
    bq_cluster_status_t *st = status_now(arg);
    char *doc = st ? bq_admin_metrics_text(st) : NULL;
    free(st);
    return doc;
}

static void h_promote(void *arg, bool force, bq_admin_reply_t *r)
{
    bq_server_t *s = arg;
    char why[256];
    if (bq_cluster_promote(s->cluster, force, why, sizeof why) != 0) {
        bq_admin_respond(r, 409, why);
        return;
    }
    bq_admin_respond(r, 202, force ? "promotion forced: this node restarts as the primary"
                                   : "election started: this node becomes the primary if a "
                                     "majority of voters agrees");
}

static void switchover_done(void *arg, int status, const char *text)
{
    bq_admin_respond(arg, status, text);
}

static void h_switchover(void *arg, const char *to, bq_admin_reply_t *r)
{
    bq_server_t *s = arg;
    char why[256];
    if (bq_cluster_switchover(s->cluster, to, switchover_done, r, why, sizeof why) != 0)
        bq_admin_respond(r, 409, why);
}

/* 127.0.0.0/8 and ::1 (the address is numeric): plaintext is enough there. */
static bool loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0;
}

int bq_admin_routes_start(bq_server_t *s, const bq_flags_t *f, bq_admin_t **out)
{
    static const char *names[BQ_FLAGS_MAX_PEERS + 1];
    size_t n = 0;
    *out = NULL;
    if (!f->admin_listen || !s->cluster)
        return 0;
    for (size_t i = 0; i < f->npeers; i++)
        names[n++] = f->peers[i].name;
    names[n++] = "beanstalkctl";
    char host[256];
    const char *colon = strrchr(f->admin_listen, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - f->admin_listen), f->admin_listen);
    size_t hl = strlen(host);
    if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    bq_admin_config_t cfg = {.host = host,
                             .port = atoi(colon + 1),
                             .tls = loopback(host) ? NULL : bq_cluster_tls_server(s->cluster),
                             .names = names,
                             .nnames = n};
    bq_admin_handlers_t h = {.arg = s,
                             .ready = h_ready,
                             .status = h_status,
                             .metrics = h_metrics,
                             .promote = h_promote,
                             .switchover = h_switchover};
    int r = bq_admin_start(&s->loop, &cfg, &h, out);
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
    bq_log(BQ_LOG_INFO, "admin API listening", "addr=%s security=%s", bq_admin_address(*out),
           cfg.tls ? "mutual TLS" : "plaintext (loopback)");
    return 0;
}
