/* The binlog's side of replication. On a primary: what the senders read (the
 * segments on disk, how far frames reached the current file, a callback
 * after each write). On a standby: appending the primary's frames unchanged,
 * segment by segment as the primary cut them, so the standby's segments are
 * the primary's, each starting with the same checkpoint.
 *
 * A standby never logs records of its own, so it cannot move jobs forward;
 * the primary's compaction does that, and its relogged records arrive like
 * any other. The live jobs per segment are counted as each frame is
 * applied (bq_binlog_follow_applied), exactly as the primary counts what it
 * logs, so a standby that becomes the primary has them at once. When the
 * primary's stream starts a new segment and the log is more than twice what
 * the live jobs need, the standby removes the oldest segments that hold no
 * live job, as long as a later, closed (so fsynced) segment starts with a
 * checkpoint that restates the id reservation and the paused tubes. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "node/binlog/internal.h"
#include "node/binlog/segment.h"

void bq_binlog_on_write(bq_binlog_t *b, void (*written)(void *arg), void *arg)
{
    b->written = written;
    b->written_arg = arg;
}

const char *bq_binlog_dir(const bq_binlog_t *b)
{
    return b->cfg.dir;
}

uint64_t bq_binlog_epoch(const bq_binlog_t *b)
{
    return b->epoch;
}

uint64_t bq_binlog_written_lsn(const bq_binlog_t *b)
{
    return b->lsns.written;
}

uint64_t bq_binlog_durable_lsn(const bq_binlog_t *b)
{
    return b->cfg.sync == BQ_BINLOG_SYNC_NEVER ? b->lsns.written : b->lsns.synced;
}

uint64_t bq_binlog_written_bytes(const bq_binlog_t *b)
{
    return b->bytes_out;
}

size_t bq_binlog_nsegs(const bq_binlog_t *b)
{
    return b->nsegs;
}

void bq_binlog_seg(const bq_binlog_t *b, size_t i, bq_binlog_seg_info_t *out)
{
    const seg_t *sg = &b->segs[i];
    bool cur = i + 1 == b->nsegs && b->fd >= 0;
    *out = (bq_binlog_seg_info_t){
        .seq = sg->seq,
        .first_lsn = sg->first_lsn,
        .epoch = sg->epoch,
        .created_wall = sg->created_wall,
        .data_start = sg->data_start,
        .data_end = cur ? b->data_end : sg->size,
        .current = cur,
        .jobs = sg->jobs,
    };
}

uint32_t bq_binlog_current_file(const bq_binlog_t *b)
{
    return b->nsegs > 0 ? (uint32_t)b->segs[b->nsegs - 1].seq : 0;
}

/* Removes the oldest segments that hold no live job, up to the newest
 * closed segment starting with a checkpoint. The live jobs per segment are
 * kept exact as frames are applied (bq_binlog_follow_applied). */
static void follower_compact(bq_binlog_t *b)
{
    /* Only once the log is more than twice what the live jobs need, which
     * is also when the primary moves them forward (so the standby's log
     * stays within about twice the live data, like the primary's). */
    uint64_t live = bq_engine_live_log_bytes(b->engine);
    uint64_t floor = live > b->cfg.seg_size ? live : b->cfg.seg_size;
    if (b->total / 2 <= floor)
        return;
    size_t keep_from = 0;
    for (size_t i = 0; i + 1 < b->nsegs; i++)
        if (b->segs[i].checkpoint)
            keep_from = i;
    while (keep_from > 0 && b->segs[0].jobs == 0 && bq__binlog_may_unlink_oldest(b)) {
        bq__binlog_unlink_oldest(b);
        keep_from--;
    }
}

int bq_binlog_follow_segment(bq_binlog_t *b, uint64_t primary_first, uint64_t epoch, bq_now_t now)
{
    if (b->fd >= 0 && b->follow_first == primary_first && b->epoch == epoch)
        return 0; /* the current segment already follows it */
    /* Frames received so far belong to the old segment. */
    bq__binlog_flush(b);
    if (b->batch_len > 0)
        return -EAGAIN;
    if (b->fd >= 0 && bq__binlog_sync_before_rotation(b) != 0)
        return -EIO;
    int old_fd = b->fd;
    uint64_t old_end = b->data_end, old_prealloc = b->prealloc;
    uint64_t seq = b->nsegs > 0 ? b->segs[b->nsegs - 1].seq + 1 : 1;
    b->epoch = epoch;
    int r = bq__binlog_create_segment(b, seq, b->lsns.last + 1 == primary_first, now);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot create a binlog segment", "dir=\"%s\" seq=%llu err=\"%s\"",
               b->cfg.dir, (unsigned long long)seq, strerror(-r));
        return r;
    }
    b->follow_first = primary_first;
    if (old_fd >= 0)
        bq__binlog_retire(b, &b->segs[b->nsegs - 2], old_fd, old_end, old_prealloc);
    follower_compact(b);
    return 0;
}

/* Grows the current segment's preallocation ahead of the data; a failure
 * only means the writes extend the file themselves. */
static void follower_grow(bq_binlog_t *b, uint64_t need)
{
    if (need <= b->prealloc)
        return;
    uint64_t step = b->cfg.seg_size ? b->cfg.seg_size : (uint64_t)1 << 20;
    uint64_t to = need + step;
    if (bq_segment_preallocate(b->fd, to) == 0) {
        b->total += to - b->prealloc;
        b->segs[b->nsegs - 1].size = to;
        b->prealloc = to;
    }
}

void bq_binlog_follow_applied(bq_binlog_t *b, const bq_apply_effect_t *eff, uint64_t lsn)
{
    if (b->nsegs > 0 && (eff->full || eff->gone))
        bq__binlog_count_change(b, eff->full, eff->gone, eff->existed ? eff->prev_file : 0, lsn);
}

int bq_binlog_follow_frames(bq_binlog_t *b, const uint8_t *data, size_t len, uint64_t last_lsn,
                            uint64_t epoch)
{
    if (b->fd < 0 || bq__binlog_ensure_batch(b, b->batch_len + len) != 0)
        return -1;
    memcpy(b->batch + b->batch_len, data, len);
    b->batch_len += len;
    b->lsns.last = last_lsn;
    b->epoch = epoch;
    b->written_ct++;
    follower_grow(b, b->data_end + b->batch_len);
    return 0;
}
