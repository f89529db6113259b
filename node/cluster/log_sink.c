/* The binlog seen by replication: its log on a primary (segments the
 * senders read back), and with the engine its sink on a standby (segments
 * and frames from the primary written and applied, a full resync
 * downloaded beside the log, the primary found or lost for the proxy, a
 * hand-over to stand). */
#include "node/cluster/internal.h"

#include <inttypes.h>
#include <stdio.h>

#include "node/base/clock.h"
#include "node/base/counters.h"
#include "node/base/log.h"
#include "node/binlog/segment.h"
#include "protocol/frame.h"

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
        bq_apply_effect_t eff;
        int r = bq_engine_apply_ex(c->host.engine, data + off + BQ_FRAME_HEADER, f.len, file, now,
                                   &eff);
        if (r == 0)
            bq_binlog_follow_applied(b, &eff, f.lsn);
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

static int sink_resync_segment(void *arg, uint64_t first_lsn, uint64_t epoch, int64_t created_wall,
                               bool checkpoint)
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
    bq__cluster_restart(c, "install the resync");
}

/* Whether segment i of b starts an epoch (the first, or another epoch than
 * the segment before it); *sg gets its description. */
static bool starts_epoch(bq_binlog_t *b, size_t i, bq_binlog_seg_info_t *sg)
{
    bq_binlog_seg_info_t prev;
    bq_binlog_seg(b, i, sg);
    if (i == 0)
        return true;
    bq_binlog_seg(b, i - 1, &prev);
    return prev.epoch != sg->epoch;
}

/* Where the local log's epochs begin, from its segments (each holds
 * frames of one epoch), the newest max. */
static size_t sink_epochs(void *arg, Bq__Repl__EpochStart *out, size_t max)
{
    bq_cluster_t *c = arg;
    bq_binlog_t *b = c->host.binlog;
    bq_binlog_seg_info_t sg;
    size_t total = 0, n = 0;
    for (size_t i = 0; i < bq_binlog_nsegs(b); i++)
        total += starts_epoch(b, i, &sg);
    size_t skip = total > max ? total - max : 0;
    for (size_t i = 0; i < bq_binlog_nsegs(b); i++) {
        if (!starts_epoch(b, i, &sg) || (skip > 0 && skip--))
            continue;
        out[n].epoch = sg.epoch;
        out[n++].first_lsn = sg.first_lsn;
    }
    return n;
}

/* The primary's Welcome says our log forked after lsn: cut it there. */
static int sink_cut(void *arg, uint64_t lsn)
{
    bq_cluster_t *c = arg;
    bq_binlog_cut_t cut;
    int r = bq_binlog_cut_after(c->host.binlog, lsn, bq_clock_now(), &cut);
    if (r != 0)
        return r;
    c->rejoin.cut = true;
    c->rejoin.cut_records = cut.records;
    c->rejoin.cut_bytes = cut.bytes;
    bq_metrics_count_n(BQ_COUNTER_CUT_RECORDS, cut.records);
    return 0;
}

/* Records how this stream began (the rejoin report of /status). */
static void note_rejoin(bq_cluster_t *c, const bq_repl_primary_t *p)
{
    const char *start = p->resync ? "resync" : p->cut ? "cut" : "resume";
    bq_metrics_count(p->resync ? BQ_COUNTER_REJOINS_RESYNC
                     : p->cut  ? BQ_COUNTER_REJOINS_CUT
                               : BQ_COUNTER_REJOINS_RESUME);
    snprintf(c->rejoin.start, sizeof c->rejoin.start, "%s", start);
    snprintf(c->rejoin.primary, sizeof c->rejoin.primary, "%s", p->node);
    c->rejoin.last = (bq_cluster_rejoin_t){
        .start = c->rejoin.start,
        .primary = c->rejoin.primary,
        .epoch = p->epoch,
        .from_lsn = p->start_lsn,
        .primary_last_lsn = p->last_lsn,
        .cut_records = p->cut ? c->rejoin.cut_records : 0,
        .cut_bytes = p->cut ? c->rejoin.cut_bytes : 0,
        .at_wall_ms = bq_clock_now().wall / 1000000,
    };
    c->rejoin.cut = false;
}

static void sink_primary(void *arg, const bq_repl_primary_t *p)
{
    bq_cluster_t *c = arg;
    note_rejoin(c, p);
    snprintf(c->primary_name, sizeof c->primary_name, "%s", p->node);
    bq_proxy_set_target(c->proxy, p->host, p->port);
    bq_log(BQ_LOG_INFO, "replication: following the primary",
           "primary=%s security=%s start=%s from_lsn=%" PRIu64 " primary_last_lsn=%" PRIu64
           " epoch=%" PRIu64,
           p->node, p->security, c->rejoin.start, p->start_lsn, p->last_lsn, p->epoch);
}

static void sink_primary_lost(void *arg, const char *node, const char *why)
{
    bq_cluster_t *c = arg;
    bq_log(BQ_LOG_WARN, "replication: lost the primary", "primary=%s why=\"%s\"", node, why);
    c->primary_name[0] = '\0';
    bq_proxy_set_target(c->proxy, NULL, NULL);
    bq_proxy_primary_lost(c->proxy);
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

/* The epoch of a frame of the local log, compacted or not, by the epoch
 * history (a frame at or below the last one only). */
static uint64_t log_epoch_of(void *arg, uint64_t lsn)
{
    bq_cluster_t *c = arg;
    if (!c->failover || lsn > bq_binlog_last_lsn(c->host.binlog))
        return 0;
    return bq_failover_epoch_of(c->failover, lsn);
}

void bq__cluster_log_init(bq_cluster_t *c)
{
    c->log = (bq_repl_log_t){.nsegs = log_nsegs,
                             .seg = log_seg,
                             .path = log_path,
                             .written_lsn = log_written,
                             .epoch = log_epoch,
                             .epoch_of = log_epoch_of,
                             .arg = c};
}

void bq__cluster_sink_init(bq_cluster_t *c)
{
    c->sink = (bq_repl_sink_t){
        .last_lsn = log_last,
        .last_epoch = log_epoch,
        .seen_epoch = sink_seen_epoch,
        .written_lsn = log_written,
        .durable_lsn = log_durable,
        .epochs = sink_epochs,
        .cut = sink_cut,
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
}
