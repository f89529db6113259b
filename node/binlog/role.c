/* The binlog's role changes in place (docs/failover.md, "Role changes in
 * place"). A standby that becomes the primary already holds in its engine
 * exactly what its log says (every record it appended it applied), so
 * nothing is replayed: the segment it was following is synced and closed,
 * the -f mode given comes back, job ids go on as after a replay, and a new
 * segment opens the new epoch with a checkpoint, as a start as primary
 * does. A primary that becomes a standby writes and syncs what it logged,
 * closes its segment and waits for the new primary's stream to open the
 * next one (bq_binlog_follow_segment). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "node/binlog/internal.h"
#include "protocol/frame.h"

/* A follower's acks say "durable": -f MS becomes -f 0 while following. */
static void follow_sync(bq_binlog_t *b)
{
    b->cfg.follower = true;
    b->cfg.sync = b->primary_sync == BQ_BINLOG_SYNC_TIMED ? BQ_BINLOG_SYNC_ALWAYS : b->primary_sync;
}

int bq_binlog_become_primary(bq_binlog_t *b, uint64_t epoch, bq_now_t now)
{
    if (!b->cfg.follower)
        return -EINVAL;
    if (epoch <= b->epoch || epoch > BQ_EPOCH_MAX) {
        bq_log(BQ_LOG_ERROR, "cannot open the epoch won: the log has reached it",
               "dir=\"%s\" won=%llu log=%llu", b->cfg.dir, (unsigned long long)epoch,
               (unsigned long long)b->epoch);
        return -ERANGE;
    }
    int r = bq__binlog_close_current(b);
    if (r != 0)
        return r;
    b->cfg.follower = false;
    b->cfg.new_epoch = true;
    b->cfg.sync = b->primary_sync;
    b->follow_first = 0;
    /* The live jobs per segment are exact already (bq_binlog_follow_applied):
     * nothing here costs more with more jobs. As after a replay: ids go on
     * past every reserved one, and a block its predecessor may have handed
     * out unseen here is skipped (again on a retry: ids are only skipped). */
    bq_engine_resume_ids(b->engine, false);
    if (b->epoch > 0)
        bq_engine_skip_id_block(b->engine);
    bq_engine_set_ids_durable(b->engine, bq_binlog_ids_durable(b));
    uint64_t followed = b->epoch;
    b->epoch = epoch;
    uint64_t seq = b->nsegs > 0 ? bq__binlog_current(b)->seq + 1 : 1;
    r = bq__binlog_open_segment(b, seq, now);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot create a binlog segment", "dir=\"%s\" seq=%llu err=\"%s\"",
               b->cfg.dir, (unsigned long long)seq, strerror(-r));
        b->epoch = followed; /* still a follower: a retry opens the epoch */
        follow_sync(b);
        return r;
    }
    bq_log(BQ_LOG_INFO, "binlog: primary in place",
           "dir=\"%s\" segment=%llu jobs=%llu next_lsn=%llu epoch=%llu", b->cfg.dir,
           (unsigned long long)seq, (unsigned long long)b->live_jobs,
           (unsigned long long)(b->lsns.last + 1), (unsigned long long)b->epoch);
    return 0;
}

int bq_binlog_become_follower(bq_binlog_t *b)
{
    if (b->cfg.follower)
        return 0;
    int r = bq__binlog_close_current(b);
    if (r != 0)
        return r;
    follow_sync(b);
    b->cfg.new_epoch = false;
    b->eager = false;
    b->follow_first = 0;
    bq_log(BQ_LOG_INFO, "binlog: standby in place", "dir=\"%s\" last_lsn=%llu epoch=%llu",
           b->cfg.dir, (unsigned long long)b->lsns.last, (unsigned long long)b->epoch);
    return 0;
}
