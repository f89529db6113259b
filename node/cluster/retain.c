/* A new primary keeps the segments it had when it took office until every
 * standby has rejoined it, for at most RETAIN_MS (docs/failover.md,
 * "Rejoin"). Taking office opens a new segment, so every older one whose
 * jobs are all gone could be compacted at once; a standby that was a frame
 * or two behind the old primary (a kill -9) then finds the frames it needs
 * gone and must copy everything (a full resync). Held back, it resumes. */
#include "node/cluster/internal.h"

#include <inttypes.h>

#include "node/base/clock.h"
#include "node/base/log.h"

#define RETAIN_MS ((uint64_t)5 * 60 * 1000) /* a node away longer resyncs */
#define CHECK_MS 250

/* True when every standby that holds jobs (witnesses hold none) streams
 * from this primary past the first frame of its epoch. */
static bool all_rejoined(const bq_cluster_t *c)
{
    int64_t now = bq_clock_now().mono;
    for (size_t i = 0; i < c->npeers; i++) {
        bq_feeder_standby_t sb;
        bq_feeder_standby(c->feeder, i, now, &sb);
        if (!sb.witness && (!sb.connected || sb.flushed < c->retain.from))
            return false;
    }
    return true;
}

static void retain_end(bq_cluster_t *c, const char *why)
{
    uv_timer_stop(&c->retain.timer);
    bq_binlog_keep_from(c->host.binlog, 0);
    bq_log(BQ_LOG_INFO, "binlog: compaction of the earlier epochs resumes", "why=\"%s\"", why);
}

static void on_check(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    if (c->closing || c->standby)
        return;
    if (all_rejoined(c))
        retain_end(c, "every standby rejoined");
    else if (uv_now(c->host.loop) - c->retain.since > RETAIN_MS)
        retain_end(c, "a standby stayed away: it resyncs when it comes back");
}

void bq__cluster_retain_start(bq_cluster_t *c, uint64_t epoch_first_lsn)
{
    bq_binlog_t *b = c->host.binlog;
    bq_binlog_seg_info_t oldest;
    if (c->npeers == 0 || bq_binlog_nsegs(b) < 2)
        return;
    bq_binlog_seg(b, 0, &oldest);
    c->retain.from = epoch_first_lsn;
    c->retain.since = uv_now(c->host.loop);
    bq_binlog_keep_from(b, oldest.first_lsn);
    uv_timer_start(&c->retain.timer, on_check, CHECK_MS, CHECK_MS);
    bq_log(BQ_LOG_DEBUG, "binlog: earlier segments kept until the standbys rejoin",
           "from_lsn=%" PRIu64 " epoch_first_lsn=%" PRIu64, oldest.first_lsn, epoch_first_lsn);
}

void bq__cluster_retain_stop(bq_cluster_t *c)
{
    uv_timer_stop(&c->retain.timer);
    bq_binlog_keep_from(c->host.binlog, 0);
}
