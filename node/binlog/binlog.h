/* The binlog writer: appends the engine's durable changes to segment files
 * in -b DIR with group commit, makes them as durable as the -f mode
 * promises before their replies leave, rotates and compacts segments, and
 * replays them at start-up. docs/binlog.md describes the format and the
 * guarantees. */
#ifndef BQ_NODE_BINLOG_H
#define BQ_NODE_BINLOG_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "node/binlog/policy.h"
#include "node/base/counters.h"
#include "protocol/engine.h"

typedef struct bq_binlog bq_binlog_t;

typedef struct bq_binlog_config {
    const char *dir;        /* -b (borrowed; must outlive the binlog) */
    uint64_t seg_size;      /* -s */
    bq_binlog_sync_t sync;  /* -f 0, -f MS or -F */
    uint64_t fsync_ms;      /* MS for BQ_BINLOG_SYNC_TIMED */
    bool skip_corrupt;      /* --binlog-skip-corrupt */
    bool follower;          /* standby: frames come from the primary (bq_binlog_follow_*) */
    bool new_epoch;         /* primary: start a new epoch (the log's last epoch + 1) */
    uint64_t min_epoch;     /* with new_epoch: at least this one (an epoch won or seen) */
    const char *node_id;    /* stamped in segment headers (borrowed); NULL = "" */
    const char *cluster_id; /* likewise */
    bool standalone;        /* a single node (no cluster): a clean stop is marked in the
                               log, and ids may go on after the highest logged one
                               (docs/binlog.md, "Job ids after a restart") */
} bq_binlog_config_t;

/* A segment on disk, for replication's sender. */
typedef struct bq_binlog_seg_info {
    uint64_t seq, first_lsn, epoch;
    int64_t created_wall;
    uint64_t data_start; /* offset of its first frame */
    uint64_t data_end;   /* frames lie before this offset (a zero header may end them sooner) */
    bool current;        /* the one being appended to */
    uint64_t jobs;       /* live jobs whose latest full record is in it */
} bq_binlog_seg_info_t;

/* Errors of bq_binlog_open and bq_binlog_start. */
enum {
    BQ_BINLOG_EDIR = -1,    /* directory missing, locked, foreign or not writable */
    BQ_BINLOG_EREPLAY = -2, /* replay stopped start-up */
    BQ_BINLOG_ENOMEM = -3,
};

/* Locks cfg->dir and checks that it holds no beanstalkd binlog; on success
 * sets *out to a new binlog on loop (free with bq_binlog_free). Logs and
 * returns a BQ_BINLOG_E* code on failure. */
int bq_binlog_open(bq_binlog_t **out, uv_loop_t *loop, const bq_binlog_config_t *cfg);

/* Calls released(arg) whenever the release LSN or the durable LSN advances
 * (a write or an fsync completed), so the node can flush replies that were
 * held back (in cluster mode they may wait for this node's fsync). */
void bq_binlog_on_release(bq_binlog_t *b, void (*released)(void *arg), void *arg);

/* Replays the directory into e (borrowed; its log hooks must point at b),
 * closes the old last segment and starts a new one with a checkpoint. 0 or
 * a BQ_BINLOG_E* code (logged). */
int bq_binlog_start(bq_binlog_t *b, bq_engine_t *e, bq_now_t now);

/* Engine log_room hook (arg is the binlog). */
bq_room_t bq_binlog_room(void *arg, size_t bytes, bool is_delete);

/* Engine log hook (arg is the binlog): copies the record into this loop
 * turn's batch and returns the current segment's number. Never fails. */
uint32_t bq_binlog_log(void *arg, const bq_log_entry_t *entry);

/* End of a loop turn: writes the batch, applies the fsync policy, rotates
 * and compacts. Returns true while compaction has work left for another
 * turn (keep the loop from blocking). */
bool bq_binlog_turn(bq_binlog_t *b, bq_now_t now);

/* The last LSN handed out: replies queued now depend on at most this. */
uint64_t bq_binlog_last_lsn(const bq_binlog_t *b);

/* The highest LSN whose replies may be sent now. */
uint64_t bq_binlog_release_lsn(const bq_binlog_t *b);

/* While on (and unless -F), every write starts an fsync at once whatever
 * -f says, group-committed as under -f 0: a reply that waits for this
 * node's durable LSN never waits for the -f timer. Turning it on starts an
 * fsync of what is written and not yet synced. */
void bq_binlog_sync_eagerly(bq_binlog_t *b, bool on);

/* True while a write or fsync has failed and is being retried. */
bool bq_binlog_failing(const bq_binlog_t *b);

/* Adds the binlog figures to a `stats` reply. */
void bq_binlog_fill_info(const bq_binlog_t *b, bq_server_info_t *info);

/* True when no reply may show a job id before the job's full record is
 * durable: a single node under -f 0. Every reply then waits for every
 * record logged before it to be fsynced. */
bool bq_binlog_ids_durable(const bq_binlog_t *b);

/* Calls written(arg) after new frames reached the current segment's file
 * (replication's senders read them from there). */
void bq_binlog_on_write(bq_binlog_t *b, void (*written)(void *arg), void *arg);

/* The directory (borrowed from the config). */
const char *bq_binlog_dir(const bq_binlog_t *b);

/* The epoch this node writes (primary) or last followed (standby). */
uint64_t bq_binlog_epoch(const bq_binlog_t *b);

/* The last LSN written to the file, and the last one as durable as the -f
 * mode makes anything (fsynced; written under -F). */
uint64_t bq_binlog_written_lsn(const bq_binlog_t *b);
uint64_t bq_binlog_durable_lsn(const bq_binlog_t *b);

/* Bytes of frames written since start (for replication lag in bytes). */
uint64_t bq_binlog_written_bytes(const bq_binlog_t *b);

/* Records written since start, and the bytes the segments take on disk
 * (their preallocated size included), for /metrics. */
uint64_t bq_binlog_records_written(const bq_binlog_t *b);
uint64_t bq_binlog_disk_bytes(const bq_binlog_t *b);

/* The durations of every fdatasync so far (borrowed; read on the loop
 * thread). */
const bq_histogram_t *bq_binlog_fsync_histogram(const bq_binlog_t *b);

/* Segments on disk, oldest first: how many, and segment i of them. */
size_t bq_binlog_nsegs(const bq_binlog_t *b);
void bq_binlog_seg(const bq_binlog_t *b, size_t i, bq_binlog_seg_info_t *out);

/* Compaction keeps every segment that holds a frame at or after lsn (0: no
 * floor, compaction as usual): a new primary holds its earlier segments
 * for standbys that have not rejoined yet (node/cluster/retain.c). */
void bq_binlog_keep_from(bq_binlog_t *b, uint64_t lsn);

/* Standby: the primary's stream enters its segment that starts at
 * primary_first in epoch. Unless the current segment already follows that
 * one, syncs and closes the current segment, opens a new one at the next
 * LSN (checkpoint: it starts exactly at primary_first) and removes old
 * segments no longer needed. 0, or -errno (logged). */
int bq_binlog_follow_segment(bq_binlog_t *b, uint64_t primary_first, uint64_t epoch, bq_now_t now);

/* Standby: appends whole, checked frames data[0..len), the last with LSN
 * last_lsn, to this turn's batch. 0, or -1 when out of memory or no
 * segment is open. */
int bq_binlog_follow_frames(bq_binlog_t *b, const uint8_t *data, size_t len, uint64_t last_lsn,
                            uint64_t epoch);

/* Standby to primary in place (no replay: the engine holds what the log
 * says): syncs and closes the followed segment, takes back the -f mode
 * given, sets where job ids go on (as after a replay) and opens epoch in a
 * new segment with a checkpoint. 0, or -errno (logged; b is still a
 * follower). */
int bq_binlog_become_primary(bq_binlog_t *b, uint64_t epoch, bq_now_t now);

/* Primary to standby in place: writes and syncs what was logged, closes the
 * current segment; the next bq_binlog_follow_segment opens one. Close every
 * client of the engine first (a follower's engine holds no reservation).
 * 0, or -errno (the write or sync failed and is retried: try again). */
int bq_binlog_become_follower(bq_binlog_t *b);

/* What bq_binlog_cut_after moved aside. */
typedef struct bq_binlog_cut {
    uint64_t records;  /* frames after the fork point */
    uint64_t bytes;    /* bytes moved or copied aside */
    uint64_t segments; /* whole segments renamed */
} bq_binlog_cut_t;

/* Follower: the log forked from the primary's after lsn (< its last):
 * syncs, moves every frame after lsn aside (<segment>.forked-<offset>
 * files, never deleted), empties the engine and replays the directory into
 * it. 0 and *out, or -errno (logged; the log may be partly moved aside,
 * and a start replays what is left). */
int bq_binlog_cut_after(bq_binlog_t *b, uint64_t lsn, bq_now_t now, bq_binlog_cut_t *out);

/* Standby: frame lsn, just appended, was applied with effect eff (from
 * bq_engine_apply_ex): keeps the live jobs per segment exact. */
void bq_binlog_follow_applied(bq_binlog_t *b, const bq_apply_effect_t *eff, uint64_t lsn);

/* The number of the current segment (the `file` of records applied now). */
uint32_t bq_binlog_current_file(const bq_binlog_t *b);

/* Shutdown: closes the binlog's timers, so the loop can finish; no fsync
 * starts after this. NULL is a no-op. */
void bq_binlog_stop(bq_binlog_t *b);

/* After bq_binlog_stop and after the loop has run until the timers closed
 * and any fsync ended: writes what is left, fsyncs, trims the current
 * segment to its data and frees b. The directory lock is kept until the
 * process exits. NULL is a no-op. */
void bq_binlog_free(bq_binlog_t *b);

#endif
