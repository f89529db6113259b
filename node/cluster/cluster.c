/* Cluster mode glue: the binlog seen as replication's log (primary) and
 * sink (standby), TLS contexts from the flags, the standby's client proxy
 * and resync download, and the replication status in `stats` and the log.
 * Decisions live in replication/; this file only connects the pieces. */
#include "node/cluster/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/base/clock.h"
#include "node/cluster/tls.h"
#include "node/base/log.h"
#include "node/base/counters.h"
#include "protocol/frame.h"
#include "node/cluster/proxy.h"
#include "replication/feeder.h"
#include "replication/receiver.h"
#include "node/binlog/resync.h"
#include "node/binlog/segment.h"

struct bq_cluster {
    bq_cluster_host_t host; /* the node's parts, borrowed */
    const bq_flags_t *f;
    char **argv;
    bool standby, closing;
    bq_repl_config_t rc;   /* the transport's view of the cluster */
    uv_timer_t restart;    /* a role change waits for replies to leave */
    const char *restart_why;
    struct {
        int to;               /* the target's peer index; -1: none in progress */
        bool promoted;        /* Promote sent: nothing more is acknowledged */
        int64_t deadline;     /* ns (monotonic) */
        int64_t lost_at;      /* after Promote: when the target's link was first seen
                                 gone (ns, monotonic), 0 while it is up */
        bq_cluster_done_cb done;
        void *arg;
        uv_timer_t poll;
    } handover;
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
    bq_failover_t *failover;
    uint64_t released;      /* the last release point handed out (primary) */
    int sync_logged;        /* the sync state last logged (primary), -1 at first */
    char primary_name[64];  /* the primary we follow (standby) */
    uv_timer_t status;
    char extra[4096];
};

static void tell_release(bq_cluster_t *c);

static const char *role_name(const bq_cluster_t *c)
{
    return !c->standby ? "primary" : c->f->role == BQ_ROLE_WITNESS ? "witness" : "standby";
}

/* ---- the binlog as replication's log (primary) ---- */

static size_t log_nsegs(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_nsegs(c->host.binlog);
}

static void log_seg(void *arg, size_t i, bq_repl_seg_t *out)
{
    bq_cluster_t *c = arg;
    bq_binlog_seg_info_t in;
    bq_binlog_seg(c->host.binlog, i, &in);
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
    bq_segment_path(buf, cap, bq_binlog_dir(c->host.binlog), seq);
}

static uint64_t log_written(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_written_lsn(c->host.binlog);
}

static uint64_t log_epoch(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_epoch(c->host.binlog);
}

static uint64_t log_last(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_last_lsn(c->host.binlog);
}

static uint64_t log_durable(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_binlog_durable_lsn(c->host.binlog);
}

/* ---- the binlog and engine as replication's sink (standby) ---- */

static int sink_segment(void *arg, uint64_t first_lsn, uint64_t epoch, int64_t created_wall)
{
    bq_cluster_t *c = arg;
    (void)created_wall; /* the standby's segment is stamped with its own clock */
    int r = bq_binlog_follow_segment(c->host.binlog, first_lsn, epoch, bq_clock_now());
    if (r == 0 && c->failover)
        bq_failover_epoch_started(c->failover, epoch, first_lsn, c->primary_name);
    return r;
}

static int sink_frames(void *arg, const uint8_t *data, size_t len, uint64_t last_lsn,
                       uint64_t epoch)
{
    bq_cluster_t *c = arg;
    bq_binlog_t *b = c->host.binlog;
    if (bq_binlog_follow_frames(b, data, len, last_lsn, epoch) != 0)
        return -1;
    uint32_t file = bq_binlog_current_file(b);
    bq_now_t now = bq_clock_now();
    /* Whole frames with valid checksums: the receiver checked them all. */
    for (size_t off = 0; off < len;) {
        bq_frame_t f;
        bq_frame_read_header(data + off, &f);
        int r = bq_engine_apply(c->host.engine, data + off + BQ_FRAME_HEADER, f.len, file, now);
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
    return bq_resync_begin(&c->resync, bq_binlog_dir(c->host.binlog), c->f->node_id,
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

/* Replaces the process image with a new start on the same flags (the
 * directory lock goes with the old image); never returns. */
static void restart(bq_cluster_t *c, const char *why)
{
    bq_log(BQ_LOG_INFO, "restarting", "why=\"%s\"", why);
    if (bq_listen_pass_on_exec(c->host.listener) != 0)
        bq_log(BQ_LOG_WARN, "cannot pass the listening socket on; the new image binds again",
               "err=\"%s\"", strerror(errno));
    bq_metrics_counters_export_env();
    execv("/proc/self/exe", c->argv);
    bq_log(BQ_LOG_ERROR, "cannot restart; exiting so a supervisor restarts us",
           "err=\"%s\"", strerror(errno));
    _exit(1);
}

/* The download is complete: the process starts again on it (the new image
 * installs the download). */
static void sink_resync_done(void *arg, uint64_t last_lsn)
{
    bq_cluster_t *c = arg;
    bq_log(BQ_LOG_INFO, "replication: resync downloaded; installing it", "last_lsn=%" PRIu64,
           last_lsn);
    bq_resync_t *r = c->resync;
    c->resync = NULL;
    if (!r || bq_resync_finish(r) != 0)
        return;
    bq_metrics_count(BQ_COUNTER_RESYNCS);
    restart(c, "install the resync");
}

static void sink_primary(void *arg, const bq_repl_primary_t *p)
{
    bq_cluster_t *c = arg;
    snprintf(c->primary_name, sizeof c->primary_name, "%s", p->node);
    bq_proxy_set_target(c->proxy, p->host, p->port);
    bq_log(BQ_LOG_INFO, "replication: following the primary",
           "primary=%s security=%s start=%s from_lsn=%" PRIu64 " primary_last_lsn=%" PRIu64
           " epoch=%" PRIu64,
           p->node, p->security, p->resync ? "resync" : "resume", p->start_lsn, p->last_lsn,
           p->epoch);
}

static void sink_primary_lost(void *arg, const char *node, const char *why)
{
    bq_cluster_t *c = arg;
    bq_log(BQ_LOG_WARN, "replication: lost the primary", "primary=%s why=\"%s\"", node, why);
    c->primary_name[0] = '\0';
    bq_proxy_set_target(c->proxy, NULL, NULL);
}

static uint64_t sink_seen_epoch(void *arg)
{
    bq_cluster_t *c = arg;
    return bq_failover_election(c->failover)->epoch;
}

static bool sink_heard(void *arg, size_t peer, uint64_t epoch, const Bq__Repl__Heartbeat *hb)
{
    bq_cluster_t *c = arg;
    return bq_failover_heard(c->failover, peer, epoch, hb);
}

static uint64_t sink_kept_floor(void *arg, uint64_t epoch)
{
    bq_cluster_t *c = arg;
    return bq_failover_kept_floor(c->failover, epoch);
}

/* The primary hands over to us (switchover): stand now. */
static void sink_promote(void *arg, size_t peer, uint64_t epoch)
{
    bq_cluster_t *c = arg;
    char why[256];
    bq_log(BQ_LOG_INFO, "switchover: the primary hands over to us", "primary=%s epoch=%" PRIu64,
           c->peers[peer].name, epoch);
    if (bq_failover_handover(c->failover, peer, epoch, why, sizeof why) != 0)
        bq_log(BQ_LOG_WARN, "switchover: cannot stand", "why=\"%s\"", why);
}

/* ---- elections ---- */

static bq_el_pos_t fo_mine(void *arg)
{
    bq_cluster_t *c = arg;
    bq_binlog_t *b = c->host.binlog;
    return (bq_el_pos_t){.epoch = bq_binlog_epoch(b), .lsn = bq_binlog_last_lsn(b)};
}

static void on_restart(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    restart(c, c->restart_why);
}

/* Won: restart as the primary of the epoch, with the voters' contact
 * times (the monotonic clock survives exec), a moment later so that a reply
 * already queued (an operator's request) leaves first. */
static void fo_lead(void *arg)
{
    bq_cluster_t *c = arg;
    const bq_election_t *e = bq_failover_election(c->failover);
    static char env[32 + 21 * BQ_EL_MAX_VOTERS];
    int n = snprintf(env, sizeof env, "%" PRIu64 ":", e->epoch);
    for (size_t i = 0; i < e->cfg.nvoters && n > 0 && (size_t)n < sizeof env; i++)
        n += snprintf(env + n, sizeof env - (size_t)n, "%s%" PRId64, i ? "," : "",
                      e->contact_at[i]);
    setenv("BQ_HA_OFFICE", env, 1);
    bq_metrics_count(BQ_COUNTER_BECAME_PRIMARY);
    c->restart_why = "won the election: taking office as primary";
    uv_timer_start(&c->restart, on_restart, 20, 0);
}

/* A primary that steps down restarts a moment later, so that the vote it
 * granted (the reason, often) reaches its candidate; meanwhile it is not
 * primary for the election and acknowledges nothing. */
static void fo_step_down(void *arg)
{
    bq_cluster_t *c = arg;
    if (c->standby || c->restart_why)
        return;
    bq_metrics_count(BQ_COUNTER_BECAME_STANDBY);
    c->restart_why = "a higher epoch exists: stepping down to standby";
    uv_timer_start(&c->restart, on_restart, 100, 0);
    tell_release(c);
}

static void fo_fence(void *arg)
{
    bq_cluster_t *c = arg;
    if (!c->closing && !c->standby && c->feeder)
        tell_release(c);
}

static void fd_vote(void *arg, size_t peer, const Bq__Repl__VoteRequest *req,
                    Bq__Repl__VoteReply *reply)
{
    bq_cluster_t *c = arg;
    bq_failover_vote(c->failover, peer, req, reply);
}

static void fd_ack(void *arg, size_t peer, uint64_t epoch, int64_t echo)
{
    bq_cluster_t *c = arg;
    if (c->failover)
        bq_failover_ack(c->failover, peer, epoch, echo);
}

static void fd_higher_epoch(void *arg, uint64_t epoch)
{
    bq_cluster_t *c = arg;
    if (c->failover)
        bq_failover_higher_epoch(c->failover, epoch);
}

static int start_failover(bq_cluster_t *c, const bq_failover_plan_t *plan,
                          const bq_repl_config_t *rc)
{
    bq_failover_hooks_t h = {.mine = fo_mine,
                             .lead = fo_lead,
                             .step_down = fo_step_down,
                             .fence = fo_fence,
                             .arg = c};
    bq_binlog_t *b = c->host.binlog;
    if (bq_failover_start(&c->failover, c->host.loop, c->f, plan, bq_binlog_epoch(b), rc, &h) != 0)
        return -1;
    if (!c->standby && bq_binlog_nsegs(b) > 0) {
        bq_binlog_seg_info_t cur;
        bq_binlog_seg(b, bq_binlog_nsegs(b) - 1, &cur);
        bq_failover_epoch_started(c->failover, bq_binlog_epoch(b), cur.first_lsn, c->f->node_id);
    }
    return 0;
}

/* ---- set-up ---- */

static int make_tls(bq_cluster_t *c)
{
    if (c->f->repl_plaintext)
        bq_logm(BQ_LOG_WARN, "replication runs in plaintext (--repl-plaintext): tests only");
    return bq_cluster_tls_new(c->f, &c->tls_server, &c->tls_client);
}

static void repl_config(bq_cluster_t *c, bq_repl_config_t *rc)
{
    for (size_t i = 0; i < c->f->npeers; i++) {
        const bq_flags_peer_t *p = &c->f->peers[i];
        if (strcmp(p->name, c->f->node_id) == 0) {
            c->self = p;
            continue;
        }
        c->peers[c->npeers++] = (bq_repl_peer_t){
            .name = p->name, .host = p->host, .port = p->port, .witness = p->witness};
    }
    *rc = (bq_repl_config_t){
        .cluster_id = c->f->cluster_id,
        .node_id = c->f->node_id,
        .peers = c->peers,
        .npeers = c->npeers,
        .tls_server = c->tls_server,
        .tls_client = c->tls_client,
        .idle_ms = c->f->repl_timeout_ms,
        .witness = c->f->role == BQ_ROLE_WITNESS,
    };
    /* Heartbeats every quarter of it: a failover timeout needs several. */
    if (c->f->failover_auto && c->f->failover_timeout_ms < rc->idle_ms)
        rc->idle_ms = c->f->failover_timeout_ms;
}

static void on_committed(void *arg);
static void on_status(uv_timer_t *t);
static void log_sync_state(bq_cluster_t *c);

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
        .count_self = f->failover_auto,
        .hooks = {.vote = fd_vote, .ack = fd_ack, .higher_epoch = fd_higher_epoch},
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
    c->feeder = bq_feeder_new(c->host.loop, &fc, &c->log, on_committed, c);
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
    int r = bq_feeder_listen(c->feeder, host, port);
    if (r != 0)
        bq_log(BQ_LOG_ERROR, "replication: cannot listen", "addr=%s:%s err=\"%s\"", host, port,
               uv_strerror(r));
    else
        bq_log(BQ_LOG_INFO, "replication: listening", "addr=%s:%s role=%s", host, port,
               fc.primary ? "primary" : "standby");
    return r == 0 ? 0 : -1;
}

static int start_receiver(bq_cluster_t *c, const bq_repl_config_t *rc)
{
    c->sink = (bq_repl_sink_t){
        .last_lsn = log_last,
        .last_epoch = log_epoch,
        .seen_epoch = sink_seen_epoch,
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
        .primary_lost = sink_primary_lost,
        .heard = sink_heard,
        .kept_floor = c->f->role == BQ_ROLE_WITNESS ? sink_kept_floor : NULL,
        .promote = sink_promote,
        .arg = c,
    };
    c->proxy = bq_proxy_new(c->host.loop);
    c->receiver = bq_receiver_new(c->host.loop, rc, &c->sink);
    if (!c->proxy || !c->receiver)
        return -1;
    bq_receiver_start(c->receiver);
    return 0;
}

int bq_cluster_start(bq_cluster_t **out, const bq_cluster_host_t *host, const bq_flags_t *f,
                     const bq_failover_plan_t *plan, char **argv)
{
    bq_cluster_t *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->host = *host;
    c->f = f;
    c->argv = argv;
    c->sync_logged = -1;
    c->standby = f->role == BQ_ROLE_STANDBY || f->role == BQ_ROLE_WITNESS;
    *out = c;
    if (make_tls(c) != 0)
        return -1;
    repl_config(c, &c->rc);
    uv_timer_init(c->host.loop, &c->restart);
    c->restart.data = c;
    uv_timer_init(c->host.loop, &c->handover.poll);
    c->handover.poll.data = c;
    c->handover.to = -1;
    uv_timer_init(c->host.loop, &c->status);
    c->status.data = c;
    if (start_failover(c, plan, &c->rc) != 0 || start_feeder(c, &c->rc) != 0 ||
        (c->standby && start_receiver(c, &c->rc) != 0))
        return -1;
    if (f->status_interval_ms > 0)
        uv_timer_start(&c->status, on_status, f->status_interval_ms, f->status_interval_ms);
    bq_log(BQ_LOG_INFO, "cluster mode", "role=%s node=%s cluster=%s epoch=%" PRIu64
           " sync_standbys=%ld sync_fallback=%s",
           role_name(c), f->node_id, f->cluster_id,
           bq_binlog_epoch(c->host.binlog), f->sync_standbys,
           f->sync_fallback_async ? "async" : "refuse");
    tell_release(c);
    return 0;
}

/* ---- running ---- */

bool bq_cluster_standby(const bq_cluster_t *c)
{
    return c->standby;
}

const char *bq_cluster_refusal(const bq_cluster_t *c)
{
    if (!c || c->standby || !c->feeder)
        return NULL;
    if (c->restart_why)
        return "stepping down";
    if (c->handover.to >= 0)
        return "switchover in progress";
    if (!bq_failover_may_ack(c->failover))
        return "fenced: no majority of voters in contact";
    if (bq_feeder_sync_state(c->feeder) == BQ_SYNC_REFUSING)
        return "too few standbys in sync";
    return NULL;
}

void bq_cluster_accept(bq_cluster_t *c, int fd)
{
    bq_proxy_accept(c->proxy, fd);
}

/* The point replies may be released up to now: the binlog's, held back on
 * a primary by the commit point (brought up to date as of now, which arms
 * the sync fallback's deadline and logs a change of the sync state). */
static uint64_t release_now(bq_cluster_t *c)
{
    uint64_t local = bq_binlog_release_lsn(c->host.binlog);
    if (c->standby)
        return local;
    /* Fenced, or stepping down: nothing more is acknowledged. */
    if (!bq_failover_may_ack(c->failover) || c->restart_why || c->handover.promoted)
        return c->released;
    uint64_t r = bq_feeder_commit(c->feeder, local, bq_clock_now().mono);
    log_sync_state(c);
    /* A reply that waits for our own fsync never waits for the -f timer. */
    bq_binlog_sync_eagerly(c->host.binlog, bq_feeder_wants_self_durable(c->feeder));
    if (r > c->released)
        c->released = r;
    return c->released;
}

/* Tells the host the release point and the refusal as they are now. */
static void tell_release(bq_cluster_t *c)
{
    if (c->closing)
        return;
    uint64_t lsn = release_now(c);
    c->host.released(c->host.arg, lsn, bq_cluster_refusal(c));
}

int bq_cluster_promote(bq_cluster_t *c, bool force, char *why, size_t whylen)
{
    if (!c->failover) {
        snprintf(why, whylen, "not in cluster mode");
        return -1;
    }
    return bq_failover_promote(c->failover, force, why, whylen);
}

/* ---- switchover (primary) ---- */

/* How long a switchover may pause writes before it is given up. */
static uint64_t switchover_ms(const bq_flags_t *f)
{
    uint64_t t = 3 * (uint64_t)f->failover_timeout_ms;
    return t > 5000 ? t : 5000;
}

/* Ends the handover: writes resume (failure) or the node is stepping down. */
static void handover_end(bq_cluster_t *c, int status, const char *text)
{
    bq_cluster_done_cb done = c->handover.done;
    c->handover.to = -1;
    c->handover.promoted = false;
    c->handover.done = NULL;
    uv_timer_stop(&c->handover.poll);
    bq_metrics_count(status == 200 ? BQ_COUNTER_SWITCHOVERS_DONE : BQ_COUNTER_SWITCHOVERS_FAILED);
    bq_log(status == 200 ? BQ_LOG_INFO : BQ_LOG_WARN, "switchover", "result=\"%s\"", text);
    if (done)
        done(c->handover.arg, status, text);
    tell_release(c);
}

static void on_handover_poll(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    int64_t now = bq_clock_now().mono;
    size_t to = (size_t)c->handover.to;
    if (c->restart_why) {
        handover_end(c, 200, "switched over: this node follows the new primary");
        return;
    }
    if (now > c->handover.deadline) {
        handover_end(c, 504, c->handover.promoted
                                 ? "the target did not take over in time; writes resumed here"
                                 : "the target did not catch up in time; writes resumed here");
        return;
    }
    bq_feeder_standby_t sb;
    bq_feeder_standby(c->feeder, to, now, &sb);
    if (!c->handover.promoted && !sb.connected) {
        handover_end(c, 504, "the target disconnected before it had every record; writes "
                             "resumed here");
        return;
    }
    /* After Promote the target drops its link to restart as primary and
     * asks for our vote at once; silent for a timeout, it died. */
    if (c->handover.promoted && sb.connected)
        c->handover.lost_at = 0;
    else if (c->handover.promoted && c->handover.lost_at == 0)
        c->handover.lost_at = now;
    else if (c->handover.promoted &&
             now - c->handover.lost_at > (int64_t)c->f->failover_timeout_ms * 1000000) {
        handover_end(c, 504, "the target went away after it was asked to stand; writes "
                             "resumed here");
        return;
    }
    if (!c->handover.promoted &&
        sb.flushed >= bq_binlog_last_lsn(c->host.binlog)) {
        if (bq_feeder_send_promote(c->feeder, to) == 0) {
            c->handover.promoted = true;
            bq_failover_hand_over(c->failover);
            bq_log(BQ_LOG_INFO, "switchover: the target has every record; asking it to stand",
                   "target=%s lsn=%" PRIu64, c->peers[to].name, sb.flushed);
        }
    }
}

int bq_cluster_switchover(bq_cluster_t *c, const char *to, bq_cluster_done_cb done, void *arg,
                          char *why, size_t whylen)
{
    int peer = -1;
    for (size_t i = 0; i < c->npeers; i++)
        if (strcmp(c->peers[i].name, to) == 0)
            peer = (int)i;
    bq_feeder_standby_t sb = {0};
    if (peer >= 0 && c->feeder)
        bq_feeder_standby(c->feeder, (size_t)peer, bq_clock_now().mono, &sb);
    if (c->standby || !c->feeder)
        snprintf(why, whylen, "this node is not the primary");
    else if (c->handover.to >= 0 || c->restart_why)
        snprintf(why, whylen, "a switchover is already in progress");
    else if (peer < 0)
        snprintf(why, whylen, "%s is not a peer of this node", to);
    else if (!sb.connected || !sb.in_sync)
        snprintf(why, whylen, "%s is not a connected standby in sync", to);
    else {
        c->handover.to = peer;
        c->handover.promoted = false;
        c->handover.lost_at = 0;
        c->handover.deadline = bq_clock_now().mono + (int64_t)switchover_ms(c->f) * 1000000;
        c->handover.done = done;
        c->handover.arg = arg;
        uv_timer_start(&c->handover.poll, on_handover_poll, 0, 5);
        bq_log(BQ_LOG_INFO, "switchover: writes paused until the target has every record",
               "target=%s timeout_ms=%" PRIu64, to, switchover_ms(c->f));
        tell_release(c);
        return 0;
    }
    return -1;
}

/* One line per change of the primary's sync state: an operator must see
 * when writes are acknowledged without a standby (degraded) or refused. */
static void log_sync_state(bq_cluster_t *c)
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

/* The commit point may have moved, or the sync state changed (logged when
 * the commit point is computed again). */
static void on_committed(void *arg)
{
    bq_cluster_t *c = arg;
    if (c->closing || c->standby)
        return;
    tell_release(c);
}

void bq_cluster_written(bq_cluster_t *c)
{
    bq_binlog_t *b = c->host.binlog;
    if (c->standby)
        bq_receiver_progress(c->receiver);
    else
        bq_feeder_written(c->feeder, bq_binlog_written_lsn(b), bq_binlog_written_bytes(b),
                          bq_clock_now().mono);
}

void bq_cluster_synced(bq_cluster_t *c)
{
    if (c->standby) {
        bq_receiver_progress(c->receiver);
    } else if (c->f->failover_auto && c->feeder) {
        /* The primary's own copy counts once durable (replication/commit.h). */
        bq_feeder_durable(c->feeder, bq_binlog_durable_lsn(c->host.binlog));
    }
    tell_release(c);
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
    return put_kv(buf, cap, n,
                  "cluster-primary: \"%s\"\ncluster-primary-last-lsn: %" PRIu64
                  "\ncluster-resyncing: %s\ncluster-proxied-connections: %zu\n",
                  st.primary, st.primary_last_lsn, st.resyncing ? "true" : "false",
                  bq_proxy_count(c->proxy));
}

/* Formats every cluster key into c->extra. */
static const char *format_status(bq_cluster_t *c)
{
    bq_binlog_t *b = c->host.binlog;
    size_t cap = sizeof c->extra;
    size_t n = put_kv(c->extra, cap, 0,
                      "cluster-role: %s\ncluster-node-id: \"%s\"\ncluster-epoch: %" PRIu64
                      "\ncluster-last-lsn: %" PRIu64 "\ncluster-durable-lsn: %" PRIu64
                      "\ncluster-commit-lsn: %" PRIu64 "\n",
                      role_name(c), c->f->node_id, bq_binlog_epoch(b),
                      bq_binlog_last_lsn(b), bq_binlog_durable_lsn(b),
                      c->standby ? bq_binlog_durable_lsn(b) : c->released);
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
        st->not_ready = bq_cluster_refusal(c);
    } else {
        bq_receiver_status_t rs;
        bq_receiver_status(c->receiver, &rs);
        st->primary = rs.connected && rs.primary[0] ? rs.primary : NULL;
        st->primary_commit_lsn = rs.primary_commit_lsn;
        st->not_ready = !rs.connected ? "no primary followed" : rs.resyncing ? "resyncing" : NULL;
    }
    st->ready = st->not_ready == NULL;
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
    if (c->handover.done) { /* a switchover in progress: its caller's handle must be answered */
        bq_cluster_done_cb done = c->handover.done;
        c->handover.done = NULL;
        c->handover.to = -1;
        done(c->handover.arg, 503, "switchover abandoned: this node is shutting down");
        /* (the admin server stopped first: the answer only frees the handle) */
    }
    if (c->status.data)
        uv_close((uv_handle_t *)&c->status, NULL);
    if (c->restart.data)
        uv_close((uv_handle_t *)&c->restart, NULL);
    if (c->handover.poll.data)
        uv_close((uv_handle_t *)&c->handover.poll, NULL);
    bq_failover_close(c->failover);
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
    bq_failover_free(c->failover);
    SSL_CTX_free(c->tls_server);
    SSL_CTX_free(c->tls_client);
    free(c);
}
