/* The binlog writer's decisions, kept apart from its I/O so that each one is
 * unit-tested: whether a record has room in the current segment (and how far
 * to grow it), which LSN a reply may be released at under each -f mode, when
 * to rotate, and what compaction does next. Pure: no I/O, no clock, no
 * allocation. */
#ifndef BQ_NODE_BINLOG_POLICY_H
#define BQ_NODE_BINLOG_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/engine.h"
#include "protocol/frame.h"

/* The largest delete frame: the engine asks for 16 payload bytes
 * (BQ_LOG_DELETE_MAX, protocol/engine_internal.h) plus the frame header.
 * Room for one per live job is kept in reserve so deletes always fit. */
#define BQ_BINLOG_DELETE_FRAME (BQ_LOG_DELETE_MAX + BQ_FRAME_HEADER)
/* Room beyond the delete reserve that a new segment gets, for the records
 * that restate the id reservation and pauses at its start. */
#define BQ_BINLOG_SEGMENT_MARGIN 4096u

/* When fsync runs. */
typedef enum bq_binlog_sync {
    BQ_BINLOG_SYNC_ALWAYS, /* -f 0: replies wait for fsync (group commit) */
    BQ_BINLOG_SYNC_TIMED,  /* -f MS: fsync at most MS ms after a write */
    BQ_BINLOG_SYNC_NEVER,  /* -F: only id reservations are fsynced */
} bq_binlog_sync_t;

/* Space in the current segment, as the room check sees it. */
typedef struct bq_binlog_space {
    uint64_t used;      /* offset after the written data and the pending batch */
    uint64_t prealloc;  /* bytes preallocated for the segment */
    uint64_t live_jobs; /* jobs that may still need a delete record */
    uint64_t seg_size;  /* -s */
    bool failing;       /* writes are failing: only deletes are taken */
} bq_binlog_space_t;

typedef enum bq_binlog_room {
    BQ_BINLOG_ROOM_GRANT,  /* fits in the preallocated space */
    BQ_BINLOG_ROOM_GROW,   /* fits after growing the preallocation to *grow_to */
    BQ_BINLOG_ROOM_REFUSE, /* the log is failing: refuse */
} bq_binlog_room_t;

/* The bytes kept in reserve for one delete per live job. */
uint64_t bq_binlog_delete_reserve(uint64_t live_jobs);

/* Decides whether a record of at most `bytes` payload bytes (a delete when
 * is_delete) may be appended. A delete needs only its own frame; anything
 * else must also leave the delete reserve, including a delete for itself.
 * On BQ_BINLOG_ROOM_GROW sets *grow_to: the preallocation grows by at least
 * a quarter segment at a time. */
bq_binlog_room_t bq_binlog_room_decide(const bq_binlog_space_t *sp, size_t bytes, bool is_delete,
                                       uint64_t *grow_to);

/* The size to preallocate for a new segment: -s, or more when the delete
 * reserve and the segment's opening records need more. */
uint64_t bq_binlog_segment_alloc(uint64_t seg_size, uint64_t live_jobs);

/* True when the current segment (data ending at data_end, a file offset) is
 * full and holds more than its opening records (fresh is false), and
 * rotation may be tried now (mono ms): a failed attempt set retry_at (0 when
 * none). */
bool bq_binlog_rotate_due(uint64_t data_end, uint64_t seg_size, bool fresh, int64_t now_ms,
                          int64_t retry_at);

/* The LSNs of the log. Sync-required entries (id reservations) that are not
 * yet synced lie in [sync_lo, sync_hi]; 0 when there are none. */
typedef struct bq_binlog_lsns {
    uint64_t last;    /* last assigned */
    uint64_t written; /* last written to the file (page cache) */
    uint64_t synced;  /* last covered by a completed fsync */
    uint64_t sync_lo, sync_hi;
} bq_binlog_lsns_t;

/* Records that entry lsn must be fsynced before any reply after it leaves. */
void bq_binlog_lsns_need_sync(bq_binlog_lsns_t *l, uint64_t lsn);

/* Records that an fsync covering everything up to lsn completed. */
void bq_binlog_lsns_synced(bq_binlog_lsns_t *l, uint64_t lsn);

/* True when a sync-required entry has been written but not synced: an fsync
 * must start now whatever the mode. */
bool bq_binlog_lsns_sync_urgent(const bq_binlog_lsns_t *l);

/* The highest LSN whose replies may leave: synced under -f 0, written
 * otherwise, and never past an unsynced sync-required entry. */
uint64_t bq_binlog_lsns_release(const bq_binlog_lsns_t *l, bq_binlog_sync_t mode);

/* Whether job ids may go on after the highest logged id rather than after
 * the highest reserved one, once the log's last id reservation allows it
 * (bq_engine_resume_ids): only on a single node (standalone), on a log no
 * cluster wrote (last_epoch 0) and when replay skipped no damage. */
bool bq_binlog_ids_may_continue(bool standalone, uint64_t last_epoch, uint64_t skipped);

/* What compaction does next with the oldest segment. */
typedef enum bq_binlog_compact {
    BQ_BINLOG_COMPACT_NONE,    /* nothing to do */
    BQ_BINLOG_COMPACT_UNLINK,  /* no live job's full record is in it: remove it */
    BQ_BINLOG_COMPACT_MIGRATE, /* rewrite its live jobs into the current segment */
} bq_binlog_compact_t;

/* Decides for the oldest of nsegs segments (the newest is the current one),
 * given the bytes of every segment on disk, the bytes the live jobs need and
 * the live jobs whose full record is in the oldest. An unused oldest segment
 * always goes; live jobs are moved only while the log is more than twice as
 * large as max(live, -s). */
bq_binlog_compact_t bq_binlog_compact_decide(size_t nsegs, uint64_t total, uint64_t live,
                                             uint64_t seg_size, uint64_t oldest_jobs);

#endif
