/* Binlog replay at start-up: reads every segment of the directory in
 * order, checks each frame (length, CRC-32C, LSNs that follow one another)
 * and applies its record to the engine with bq_engine_apply(), the same path
 * a standby uses.
 *
 * Damage policy (docs/binlog.md): a torn or corrupt tail (no frame with a
 * valid checksum and a later LSN after the damage in its segment, and only
 * empty segments after it) ends replay there; the damaged bytes are copied
 * aside to DIR/bqlog.<seq>.corrupt-<offset> and the segment is truncated,
 * with a warning naming segment and offset (a last segment whose prefix is
 * damaged and that holds no frame is renamed to .corrupt-0 instead). Damage
 * anywhere else, and missing frames (an LSN gap), stop start-up with a clear
 * message, unless skip_corrupt is set: then the damaged bytes are copied
 * aside the same way, logged as possibly lost or resurrected jobs, and replay
 * continues at the next valid frame. A segment of another format version
 * always stops start-up. */
#ifndef BQ_NODE_REPLAY_H
#define BQ_NODE_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "protocol/engine.h"

typedef struct bq_replay_result {
    uint64_t first_seq, last_seq; /* segments found; 0 when there were none */
    uint64_t last_lsn;            /* the last applied frame's LSN; with none, one less than the
                                     highest first_lsn of a segment header (0 without either):
                                     the next frame gets last_lsn + 1 */
    uint64_t last_epoch;          /* of that frame (or header) */
    uint64_t end_offset;          /* where the data of segment last_seq ends now (after any
                                     truncation): the next frame could go there; 0 when that
                                     segment was moved aside, its prefix is damaged or damage
                                     in it was skipped */
    uint64_t records;             /* frames applied */
    uint64_t damaged;             /* damaged regions found and dealt with (copied aside,
                                     truncated, moved aside, or LSN gaps skipped) */
    uint64_t skipped;             /* of those, the ones replay went on past (skip_corrupt):
                                     records before the end of the log may be missing */
} bq_replay_result_t;

/* Replays every segment of dir into e at now. 0, or -1 after logging why
 * start-up must stop (middle damage without skip_corrupt, an I/O error, out
 * of memory, or beanstalkd binlog files with no segment of ours: starting
 * would silently drop their jobs). */
int bq_replay(const char *dir, bq_engine_t *e, bq_now_t now, bool skip_corrupt,
              bq_replay_result_t *res);

#endif
