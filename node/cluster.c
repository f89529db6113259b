/* Cluster mode glue: the binlog seen as replication's log (primary) and
 * sink (standby), TLS contexts from the flags, the standby's client proxy
 * and resync download, and the replication status in `stats` and the log.
 * Decisions live in replication/; this file only connects the pieces. */
#include "cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "protocol/frame.h"
#include "proxy.h"
#include "replication/feeder.h"
#include "replication/receiver.h"
#include "replication/tls.h"
#include "resync.h"
#include "segment.h"
#include "server.h"

struct bq_cluster {
    bq_server_t *s;
    const bq_flags_t *f;
    char **argv;
    bool standby, closing;
    bq_repl_peer_t peers[BQ_FLAGS_MAX_PEERS];
    size_t npeers;
    const bq_flags_peer_t *self;
    SSL_CTX *tls_server, *tls_client;
    bq_repl_log_t log;
    bq_repl_sink_t sink;
    bq_feeder_t *feeder;
    bq_receiver_t *receiver;
    bq_proxy_t *proxy;
    bq_resync_t *resync;
    uv_timer_t status;
    char extra[4096];
};

/* ---- the binlog as replication's log (primary) ---- */

static size_t log_nsegs(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_nsegs(c->s->binlog);
}

static void log_seg(void *arg, size_t i, bq_repl_seg_t *out)
{
    bq_cluster_t *c = arg;
    bq_binlog_seg_info_t in;
    bq_binlog_seg(c->s->binlog, i, &in);
    *out = (bq_repl_seg_t){.seq = in.seq,
                           .first_lsn = in.first_lsn,
                           .epoch = in.epoch,
                           .created_wall = in.created_wall,
                           .data_start = in.data_start,
                           .data_end = in.data_end,
                           .current = in.current};
}

static void log_path(void *arg, uint64_t seq, char *buf, size_t cap)
{
    bq_cluster_t *c = arg;
    bq_segment_path(buf, cap, bq_binlog_dir(c->s->binlog), seq);
}

static uint64_t log_written(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_written_lsn(c->s->binlog);
}

static uint64_t log_epoch(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_epoch(c->s->binlog);
}

static uint64_t log_last(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_last_lsn(c->s->binlog);
}

static uint64_t log_durable(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_durable_lsn(c->s->binlog);
}

/* ---- the binlog and engine as replication's sink (standby) ---- */

static int sink_segment(void *arg, uint64_t first_lsn, uint64_t epoch, int64_t created_wall)
{
    bq_cluster_t *c = arg;
    (void)created_wall; /* the standby's segment is stamped with its own clock */
    return bq_binlog_follow_segment(c->s->binlog, first_lsn, epoch, bq_clock_now());
}

static int sink_frames(void *arg, const uint8_t *data, size_t len, uint64_t last_lsn,
                       uint64_t epoch)
{
    bq_cluster_t *c = arg;
    bq_binlog_t *b = c->s->binlog;
    if (bq_binlog_follow_frames(b, data, len, last_lsn, epoch) != 0)
        return -1;
    uint32_t file = bq_binlog_current_file(b);
    bq_now_t now = bq_clock_now();
    /* Whole frames with valid checksums: the receiver checked them all. */
    for (size_t off = 0; off < len;) {
        bq_frame_t f;
        bq_frame_read_header(data + off, &f);
        int r = bq_engine_apply(c->s->engine, data + off + BQ_FRAME_HEADER, f.len, file, now);
        if (r != 0) {
            bq_log(BQ_LOG_ERROR, "replication: a record from the primary cannot be applied",
                   "lsn=%" PRIu64 " err=%d", f.lsn, r);
            return -1;
        }
        off += BQ_FRAME_HEADER + f.len;
    }
    return 0;
}

static int sink_resync_begin(void *arg)
{
    bq_cluster_t *c = arg;
    bq_resync_abort(c->resync);
    c->resync = NULL;
    return bq_resync_begin(&c->resync, bq_binlog_dir(c->s->binlog), c->f->node_id,
                           c->f->cluster_id);
}

static int sink_resync_segment(void *arg, uint64_t first_lsn, uint64_t epoch,
                               int64_t created_wall, bool checkpoint)
{
    bq_cluster_t *c = arg;
    return c->resync ? bq_resync_segment(c->resync, first_lsn, epoch, created_wall, checkpoint)
                     : -1;
}

static int sink_resync_frames(void *arg, const uint8_t *data, size_t len)
{
    bq_cluster_t *c = arg;
    return c->resync ? bq_resync_frames(c->resync, data, len) : -1;
}

static void sink_resync_abort(void *arg)
{
    bq_cluster_t *c = arg;
    bq_resync_abort(c->resync);
    c->resync = NULL;
}

/* The download is complete: the process starts again on it (the directory
 * lock goes with the old image; the new one installs the download). */
static void sink_resync_done(void *arg)
{
    bq_cluster_t *c = arg;
    bq_resync_t *r = c->resync;
    c->resync = NULL;
    if (!r || bq_resync_finish(r) != 0)
        return;
    bq_logm(BQ_LOG_INFO, "replication: restarting to install the resync");
    execv("/proc/self/exe", c->argv);
    bq_log(BQ_LOG_ERROR, "replication: cannot restart; exiting so a supervisor restarts us",
           "err=\"%s\"", strerror(errno));
    _exit(1);
}

static void sink_primary(void *arg, const char *node, const char *host, const char *port)
{
    bq_cluster_t *c = arg;
    (void)node;
    bq_proxy_set_target(c->proxy, host, port);
}

/* ---- set-up ---- */

static int make_tls(bq_cluster_t *c)
{
    char err[256];
    bq_tls_files_t files = {.cert = c->f->tls_cert, .key = c->f->tls_key, .ca = c->f->tls_ca};
    if (c->f->repl_plaintext) {
        bq_logm(BQ_LOG_WARN, "replication runs in plaintext (--repl-plaintext): tests only");
        return 0;
    }
    c->tls_server = bq_tls_ctx_new(true, &files, err, sizeof err);
    if (c->tls_server)
        c->tls_client = bq_tls_ctx_new(false, &files, err, sizeof err);
    if (!c->tls_client) {
        bq_log(BQ_LOG_ERROR, "cannot set up TLS for replication", "err=\"%s\"", err);
        return -1;
    }
    return 0;
}

static void repl_config(bq_cluster_t *c, bq_repl_config_t *rc)
{
    for (size_t i = 0; i < c->f->npeers; i++) {
        const bq_flags_peer_t *p = &c->f->peers[i];
        if (strcmp(p->name, c->f->node_id) == 0) {
            c->self = p;
            continue;
        }
        c->peers[c->npeers++] = (bq_repl_peer_t){.name = p->name, .host = p->host, .port = p->port};
    }
    *rc = (bq_repl_config_t){
        .cluster_id = c->f->cluster_id,
        .node_id = c->f->node_id,
        .peers = c->peers,
        .npeers = c->npeers,
        .tls_server = c->tls_server,
        .tls_client = c->tls_client,
        .idle_ms = c->f->repl_timeout_ms,
    };
}

static void on_committed(void *arg);
static void on_status(uv_timer_t *t);

/* The feeder: the primary's, or the standby's that refuses every Hello. */
static int start_feeder(bq_cluster_t *c, const bq_repl_config_t *rc)
{
    const bq_flags_t *f = c->f;
    bq_feeder_config_t fc = {
        .repl = *rc,
        .primary = !c->standby,
        .client_host = f->addr && f->addr_given ? f->addr : NULL,
        .client_port = f->port,
        .sync_need = f->sync_standbys > 0 ? (unsigned)f->sync_standbys : 0,
        .fallback = f->sync_fallback_async ? BQ_FALLBACK_ASYNC : BQ_FALLBACK_REFUSE,
        .sync_timeout_ns = (int64_t)f->sync_timeout_ms * 1000000,
    };
    /* A wildcard listen address is no use to a proxy: it takes our peer host. */
    if (fc.client_host && (!strcmp(fc.client_host, "0.0.0.0") || !strcmp(fc.client_host, "::")))
        fc.client_host = NULL;
    c->log = (bq_repl_log_t){.nsegs = log_nsegs,
                             .seg = log_seg,
                             .path = log_path,
                             .written_lsn = log_written,
                             .epoch = log_epoch,
                             .arg = c};
    c->feeder = bq_feeder_new(&c->s->loop, &fc, &c->log, on_committed, c);
    if (!c->feeder)
        return -1;
    char host[256], port[8];
    const char *listen = f->repl_listen;
    if (listen) {
        const char *colon = strrchr(listen, ':');
        snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
        snprintf(port, sizeof port, "%s", colon + 1);
    } else {
        snprintf(host, sizeof host, "%s", c->self->host);
        snprintf(port, sizeof port, "%s", c->self->port);
    }
    size_t hl = strlen(host);
    if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    return bq_feeder_listen(c->feeder, host, port) == 0 ? 0 : -1;
}

static int start_receiver(bq_cluster_t *c, const bq_repl_config_t *rc)
{
    c->sink = (bq_repl_sink_t){
        .last_lsn = log_last,
        .last_epoch = log_epoch,
        .written_lsn = log_written,
        .durable_lsn = log_durable,
        .segment = sink_segment,
        .frames = sink_frames,
        .resync_begin = sink_resync_begin,
        .resync_segment = sink_resync_segment,
        .resync_frames = sink_resync_frames,
        .resync_done = sink_resync_done,
        .resync_abort = sink_resync_abort,
        .primary = sink_primary,
        .arg = c,
    };
    c->proxy = bq_proxy_new(&c->s->loop);
    c->receiver = bq_receiver_new(&c->s->loop, rc, &c->sink);
    if (!c->proxy || !c->receiver)
        return -1;
    bq_receiver_start(c->receiver);
    return 0;
}

int bq_cluster_start(bq_cluster_t **out, bq_server_t *s, const bq_flags_t *f, char **argv)
{
    bq_cluster_t *c = calloc(1, sizeof *c);
    bq_repl_config_t rc;
    if (!c)
        return -1;
    c->s = s;
    c->f = f;
    c->argv = argv;
    c->standby = f->role == BQ_ROLE_STANDBY;
    *out = c;
    if (make_tls(c) != 0)
        return -1;
    repl_config(c, &rc);
    if (start_feeder(c, &rc) != 0 || (c->standby && start_receiver(c, &rc) != 0))
        return -1;
    uv_timer_init(&s->loop, &c->status);
    c->status.data = c;
    if (f->status_interval_ms > 0)
        uv_timer_start(&c->status, on_status, f->status_interval_ms, f->status_interval_ms);
    bq_log(BQ_LOG_INFO, "cluster mode", "role=%s node=%s cluster=%s epoch=%" PRIu64
           " sync_standbys=%ld sync_fallback=%s",
           c->standby ? "standby" : "primary", f->node_id, f->cluster_id,
           bq_binlog_epoch(s->binlog), f->sync_standbys,
           f->sync_fallback_async ? "async" : "refuse");
    return 0;
}

/* ---- running ---- */

bool bq_cluster_standby(const bq_cluster_t *c)
{
    return c->standby;
}

bool bq_cluster_refusing(const bq_cluster_t *c)
{
    return c && c->feeder && bq_feeder_sync_state(c->feeder) == BQ_SYNC_REFUSING;
}

void bq_cluster_accept(bq_cluster_t *c, int fd)
{
    bq_proxy_accept(c->proxy, fd);
}

uint64_t bq_cluster_release(bq_cluster_t *c, uint64_t local)
{
    if (c->standby)
        return local;
    return bq_feeder_commit(c->feeder, local, bq_clock_now().mono);
}

/* The commit point may have moved, or the sync state changed. */
static void on_committed(void *arg)
{
    bq_cluster_t *c = arg;
    if (c->closing || c->standby)
        return;
    bq_server_released(c->s);
}

void bq_cluster_written(bq_cluster_t *c)
{
    bq_binlog_t *b = c->s->binlog;
    if (c->standby)
        bq_receiver_progress(c->receiver);
    else
        bq_feeder_written(c->feeder, bq_binlog_written_lsn(b), bq_binlog_written_bytes(b),
                          bq_clock_now().mono);
}

void bq_cluster_synced(bq_cluster_t *c)
{
    if (c->standby)
        bq_receiver_progress(c->receiver);
}

/* ---- status ---- */

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
                   sb.name,
                   !sb.connected ? "disconnected" : sb.in_sync ? "streaming" : "catching-up",
                   sb.sent, sb.written, sb.flushed, sb.applied, sb.lag_records, sb.lag_bytes,
                   sb.lag_ms, sb.clock_offset_ms);
    }
    return n;
}

static size_t standby_keys(bq_cluster_t *c, char *buf, size_t cap, size_t n)
{
    bq_receiver_status_t st;
    bq_receiver_status(c->receiver, &st);
    return put_kv(buf, cap, n,
                  "cluster-primary: \"%s\"\ncluster-primary-last-lsn: %" PRIu64
                  "\ncluster-resyncing: %s\ncluster-proxied-connections: %zu\n",
                  st.primary, st.primary_last_lsn, st.resyncing ? "true" : "false",
                  bq_proxy_count(c->proxy));
}

/* Formats every cluster key into c->extra. */
static const char *format_status(bq_cluster_t *c)
{
    bq_binlog_t *b = c->s->binlog;
    size_t cap = sizeof c->extra;
    size_t n = put_kv(c->extra, cap, 0,
                      "cluster-role: %s\ncluster-node-id: \"%s\"\ncluster-epoch: %" PRIu64
                      "\ncluster-last-lsn: %" PRIu64 "\ncluster-durable-lsn: %" PRIu64
                      "\ncluster-commit-lsn: %" PRIu64 "\n",
                      c->standby ? "standby" : "primary", c->f->node_id, bq_binlog_epoch(b),
                      bq_binlog_last_lsn(b), bq_binlog_durable_lsn(b),
                      c->standby ? bq_binlog_durable_lsn(b) : bq_server_release_lsn(c->s));
    n = c->standby ? standby_keys(c, c->extra, cap, n) : primary_keys(c, c->extra, cap, n);
    (void)n;
    return c->extra;
}

void bq_cluster_fill_info(bq_cluster_t *c, bq_server_info_t *info)
{
    info->extra = format_status(c);
}

/* The status in the log: one line per key group, at info level. */
static void on_status(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    char line[4096];
    size_t j = 0;
    for (const char *p = format_status(c); *p && j + 2 < sizeof line; p++)
        line[j++] = *p == '\n' ? ' ' : *p == '"' ? '\'' : *p;
    line[j] = '\0';
    bq_log(BQ_LOG_INFO, "replication status", "%s", line);
}

void bq_cluster_close(bq_cluster_t *c)
{
    if (!c || c->closing)
        return;
    c->closing = true;
    if (c->status.data)
        uv_close((uv_handle_t *)&c->status, NULL);
    bq_feeder_close(c->feeder);
    bq_receiver_close(c->receiver);
    if (c->proxy)
        bq_proxy_close_all(c->proxy);
    bq_resync_abort(c->resync);
    c->resync = NULL;
}

void bq_cluster_free(bq_cluster_t *c)
{
    if (!c)
        return;
    bq_feeder_free(c->feeder);
    bq_receiver_free(c->receiver);
    bq_proxy_free(c->proxy);
    SSL_CTX_free(c->tls_server);
    SSL_CTX_free(c->tls_client);
    free(c);
}
