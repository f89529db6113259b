/* The standby's checks on what the primary sends: the Welcome must fit the
 * standby's log, segment starts and frames must continue it exactly (each
 * frame's CRC-32C valid, LSNs one after another, epochs never going back and
 * never above the primary's). Pure: nothing is applied until a whole Frames
 * message passed. */
#ifndef BQ_REPL_FOLLOW_H
#define BQ_REPL_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/repl.pb-c.h"

typedef enum bq_follow_status {
    BQ_FOLLOW_OK = 0,
    BQ_FOLLOW_BAD_FRAME,   /* a frame's length or CRC is wrong, or one is cut */
    BQ_FOLLOW_GAP,         /* an LSN other than the next one */
    BQ_FOLLOW_OLD_EPOCH,   /* an epoch below one already followed */
    BQ_FOLLOW_NEW_EPOCH,   /* an epoch above the primary's (from its Welcome) */
    BQ_FOLLOW_BAD_WELCOME, /* a Welcome that does not fit the hello */
    BQ_FOLLOW_BAD_SEGMENT, /* a segment start that does not fit the stream */
} bq_follow_status_t;

typedef struct bq_follow {
    uint64_t next_lsn;      /* the LSN the next frame must have */
    uint64_t epoch;         /* the highest epoch followed so far */
    uint64_t primary_epoch; /* from the Welcome */
    bool segment_open;      /* a SegmentStart has been seen on this stream */
} bq_follow_t;

/* Checks the Welcome w against the hello this standby sent (last_epoch,
 * last_lsn) and, when it fits, sets f up to follow the stream: RESUME must
 * start at last_lsn + 1, CUT right after a cut_after below last_lsn (the
 * caller cuts its log there, then sets f->epoch to the epoch of its frame
 * cut_after), RESYNC anywhere from 1 on; the primary's epoch must be at
 * least last_epoch. */
bq_follow_status_t bq_follow_welcome(bq_follow_t *f, uint64_t last_epoch, uint64_t last_lsn,
                                     const Bq__Repl__Welcome *w);

/* Checks a SegmentStart: the first of a stream may start at or before the
 * next LSN (the stream resumes inside it); later ones must start exactly at
 * it. Its epoch must be within [f->epoch, primary epoch]. On OK, sets
 * *checkpoint to whether the standby's segment opened for it begins with
 * the primary's checkpoint (it starts exactly at the next LSN). */
bq_follow_status_t bq_follow_segment(bq_follow_t *f, const Bq__Repl__SegmentStart *s,
                                     bool *checkpoint);

/* Checks every frame of data[0..len) (one Frames message; it must hold
 * whole frames, at least one). On OK advances f past them and sets
 * *last_lsn to the last frame's LSN; otherwise f is unchanged and
 * *bad_lsn is the LSN (or expected LSN) of the first bad frame. A frame
 * before any SegmentStart is BQ_FOLLOW_BAD_SEGMENT. */
bq_follow_status_t bq_follow_frames(bq_follow_t *f, const uint8_t *data, size_t len,
                                    uint64_t *last_lsn, uint64_t *bad_lsn);

/* The name of a status, for logs. */
const char *bq_follow_status_name(bq_follow_status_t st);

#endif
