/* The standby's checks on the replication stream. A Welcome must fit the
 * hello it answers; then SegmentStarts and Frames must continue the log
 * exactly: whole frames with valid lengths and CRC-32C, LSNs one after
 * another, epochs never going back and never above the primary's. A Frames
 * message is checked whole before the follow state moves, so a caller
 * applies all of its frames or none. Pure: bytes in, a verdict out. */
#include "replication/follow.h"

#include "protocol/frame.h"

bq_follow_status_t bq_follow_welcome(bq_follow_t *f, uint64_t last_epoch, uint64_t last_lsn,
                                     const Bq__Repl__Welcome *w)
{
    bool resume = w->start == BQ__REPL__START__RESUME, cut = w->start == BQ__REPL__START__CUT;

    if (!resume && !cut && w->start != BQ__REPL__START__RESYNC)
        return BQ_FOLLOW_BAD_WELCOME;
    if (w->epoch < last_epoch)
        return BQ_FOLLOW_BAD_WELCOME;
    if (resume ? w->start_lsn != last_lsn + 1
        : cut  ? w->cut_after >= last_lsn || w->start_lsn != w->cut_after + 1
               : w->start_lsn < 1)
        return BQ_FOLLOW_BAD_WELCOME;
    f->next_lsn = w->start_lsn;
    /* A resync replaces the standby's log: no epoch of it still counts; a
     * cut's is the one of the fork point (bq_follow_cut). */
    f->epoch = resume ? last_epoch : 0;
    f->primary_epoch = w->epoch;
    f->segment_open = false;
    return BQ_FOLLOW_OK;
}

bq_follow_status_t bq_follow_segment(bq_follow_t *f, const Bq__Repl__SegmentStart *s,
                                     bool *checkpoint)
{
    if (s->first_lsn == 0 || s->first_lsn > f->next_lsn)
        return BQ_FOLLOW_BAD_SEGMENT;
    /* Only the first segment of a stream may have begun before it. */
    if (f->segment_open && s->first_lsn != f->next_lsn)
        return BQ_FOLLOW_BAD_SEGMENT;
    if (s->epoch < f->epoch)
        return BQ_FOLLOW_OLD_EPOCH;
    if (s->epoch > f->primary_epoch)
        return BQ_FOLLOW_NEW_EPOCH;
    f->epoch = s->epoch;
    f->segment_open = true;
    *checkpoint = s->first_lsn == f->next_lsn;
    return BQ_FOLLOW_OK;
}

/* Checks one decoded frame against the expected LSN and the running epoch. */
static bq_follow_status_t check_frame(const bq_follow_t *f, const bq_frame_t *fr, uint64_t next,
                                      uint64_t epoch)
{
    if (fr->lsn != next)
        return BQ_FOLLOW_GAP;
    if (fr->epoch < epoch)
        return BQ_FOLLOW_OLD_EPOCH;
    if (fr->epoch > f->primary_epoch)
        return BQ_FOLLOW_NEW_EPOCH;
    return BQ_FOLLOW_OK;
}

bq_follow_status_t bq_follow_frames(bq_follow_t *f, const uint8_t *data, size_t len,
                                    uint64_t *last_lsn, uint64_t *bad_lsn)
{
    uint64_t next = f->next_lsn, epoch = f->epoch;
    size_t off = 0;

    if (!f->segment_open) {
        *bad_lsn = next;
        return BQ_FOLLOW_BAD_SEGMENT;
    }
    if (len == 0) {
        *bad_lsn = next;
        return BQ_FOLLOW_BAD_FRAME;
    }
    while (off < len) {
        bq_frame_t fr;
        const uint8_t *payload;
        bq_follow_status_t st;

        /* A zero header (END) has no place in a stream: it is bad too. */
        if (bq_frame_decode(data + off, len - off, &fr, &payload) != BQ_FRAME_OK) {
            *bad_lsn = next;
            return BQ_FOLLOW_BAD_FRAME;
        }
        st = check_frame(f, &fr, next, epoch);
        if (st != BQ_FOLLOW_OK) {
            *bad_lsn = fr.lsn;
            return st;
        }
        epoch = fr.epoch;
        next++;
        off += BQ_FRAME_HEADER + (size_t)fr.len;
    }
    f->next_lsn = next;
    f->epoch = epoch;
    *last_lsn = next - 1;
    return BQ_FOLLOW_OK;
}

const char *bq_follow_status_name(bq_follow_status_t st)
{
    static const char *const names[] = {
        "ok",          "bad frame",         "lsn gap", "old epoch", "epoch above the primary's",
        "bad welcome", "bad segment start",
    };
    return st <= BQ_FOLLOW_BAD_SEGMENT ? names[st] : "unknown";
}
