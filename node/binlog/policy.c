/* The binlog writer's pure decisions (see policy.h). Kept in one
 * place so the rules that make the log safe are easy to check:
 *
 * - Every live job can always be deleted: a delete needs only its own frame,
 *   and every other record must leave one delete frame per live job (and one
 *   for itself) free in the current segment's preallocation.
 * - A reply leaves at the LSN the -f mode promises, and never before an id
 *   reservation in front of it is on disk.
 * - Segments go only from the oldest end, so a delete record never
 *   disappears before the records it cancels. */
#include "node/binlog/policy.h"

uint64_t bq_binlog_delete_reserve(uint64_t live_jobs)
{
    return live_jobs * BQ_BINLOG_DELETE_FRAME;
}

bq_binlog_room_t bq_binlog_room_decide(const bq_binlog_space_t *sp, size_t bytes, bool is_delete,
                                       uint64_t *grow_to)
{
    if (sp->failing && !is_delete)
        return BQ_BINLOG_ROOM_REFUSE;
    uint64_t need = sp->used + (uint64_t)bytes + BQ_FRAME_HEADER;
    if (!is_delete)
        need += bq_binlog_delete_reserve(sp->live_jobs) + BQ_BINLOG_DELETE_FRAME;
    if (need <= sp->prealloc)
        return BQ_BINLOG_ROOM_GRANT;
    uint64_t step = sp->seg_size / 4;
    if (step < need - sp->prealloc)
        step = need - sp->prealloc;
    *grow_to = sp->prealloc + step;
    return BQ_BINLOG_ROOM_GROW;
}

uint64_t bq_binlog_segment_alloc(uint64_t seg_size, uint64_t live_jobs)
{
    uint64_t want = bq_binlog_delete_reserve(live_jobs) + BQ_BINLOG_SEGMENT_MARGIN;
    return seg_size > want ? seg_size : want;
}

bool bq_binlog_rotate_due(uint64_t data_end, uint64_t seg_size, bool fresh, int64_t now_ms,
                          int64_t retry_at)
{
    return !fresh && data_end >= seg_size && now_ms >= retry_at;
}

void bq_binlog_lsns_need_sync(bq_binlog_lsns_t *l, uint64_t lsn)
{
    if (l->sync_lo == 0)
        l->sync_lo = lsn;
    l->sync_hi = lsn;
}

void bq_binlog_lsns_synced(bq_binlog_lsns_t *l, uint64_t lsn)
{
    if (lsn > l->synced)
        l->synced = lsn;
    if (l->sync_hi != 0 && l->sync_hi <= l->synced) {
        l->sync_lo = l->sync_hi = 0;
    } else if (l->sync_lo != 0 && l->sync_lo <= l->synced) {
        /* Entries between lo and hi are not tracked one by one: the next
         * unsynced one is somewhere after synced, so holding replies at
         * synced is safe and lasts one more fsync at most. */
        l->sync_lo = l->synced + 1;
    }
}

bool bq_binlog_lsns_sync_urgent(const bq_binlog_lsns_t *l)
{
    return l->sync_lo != 0 && l->sync_lo <= l->written;
}

uint64_t bq_binlog_lsns_release(const bq_binlog_lsns_t *l, bq_binlog_sync_t mode)
{
    uint64_t r = mode == BQ_BINLOG_SYNC_ALWAYS ? l->synced : l->written;
    if (l->sync_lo != 0 && r >= l->sync_lo)
        r = l->sync_lo - 1;
    return r;
}

bool bq_binlog_ids_may_continue(bool standalone, uint64_t last_epoch, uint64_t skipped)
{
    return standalone && last_epoch == 0 && skipped == 0;
}

bq_binlog_compact_t bq_binlog_compact_decide(size_t nsegs, uint64_t total, uint64_t live,
                                             uint64_t seg_size, uint64_t oldest_jobs)
{
    if (nsegs < 2)
        return BQ_BINLOG_COMPACT_NONE;
    if (oldest_jobs == 0)
        return BQ_BINLOG_COMPACT_UNLINK;
    uint64_t floor = live > seg_size ? live : seg_size;
    return total / 2 > floor ? BQ_BINLOG_COMPACT_MIGRATE : BQ_BINLOG_COMPACT_NONE;
}
