/* Internals of the binlog writer shared by binlog.c (writing, syncing,
 * rotation, compaction) and repl.c (what replication reads, and a
 * standby appending the primary's frames). Not for other modules. */
#ifndef BQ_NODE_BINLOG_INTERNAL_H
#define BQ_NODE_BINLOG_INTERNAL_H

#include "node/binlog/binlog.h"
#include "node/binlog/fsync_thread.h"
#include "node/base/log.h"
#include "node/base/counters.h"

typedef struct seg {
    uint64_t seq;
    uint64_t first_lsn, epoch; /* from its header */
    int64_t created_wall;
    uint64_t data_start; /* offset of its first frame */
    bool checkpoint;     /* it starts with a checkpoint */
    uint64_t size;       /* bytes on disk (the preallocation of the current one) */
    uint64_t jobs;       /* live jobs whose latest full record is in it */
    uint64_t moved_lsn;  /* the last record that took a job out of it */
    uint64_t gone_after; /* compaction decided to remove it: everything written by
                            then (0: not yet) must be fsynced before it goes */
} seg_t;

struct bq_binlog {
    uv_loop_t *loop;
    uint64_t keep_from; /* compaction keeps segments with frames from here (0: none) */
    bq_engine_t *engine;
    bq_binlog_config_t cfg;
    bq_binlog_sync_t primary_sync; /* the -f mode as given (a follower syncs always) */
    seg_t *segs;                   /* on disk, oldest first; the last one is current */
    size_t nsegs, segcap;
    uint64_t total; /* bytes of every segment on disk */
    int fd;         /* the current segment */
    uint64_t data_end, prealloc;
    bool fresh;         /* the current segment has only its opening records */
    bool in_checkpoint; /* the opening records are being logged */
    uint8_t *batch;
    size_t batch_len, batch_cap;
    bq_binlog_lsns_t lsns;
    uint64_t release;
    uint64_t synced_told; /* the durable LSN at the last released call */
    uint64_t epoch;
    uint64_t follow_first; /* standby: the primary's segment the current one follows */
    void (*written)(void *arg);
    void *written_arg;
    uint64_t live_jobs;
    /* fsync */
    uv_timer_t sync_timer;
    bq_fsync_thread_t syncer; /* the fdatasync, on a thread of its own */
    bool syncing, sync_again;
    bool eager; /* every write starts an fsync at once (bq_binlog_sync_eagerly) */
    int sync_fd;
    bq_histogram_t fsync_hist; /* every fdatasync's duration (loop thread) */
    uint64_t sync_lsn;
    int64_t dirty_since; /* loop ms of the first write no fsync covers; -1 if none */
    /* failures */
    uv_timer_t retry_timer;
    uint64_t backoff_ms;
    bool write_failed, sync_failed;
    bq_log_limit_t room_warn, rotate_warn;
    int64_t rotate_retry_at;
    /* compaction */
    uint64_t mig_seq;
    size_t mig_cursor;
    bool mig_hit;
    uint64_t written_ct, migrated_ct;
    uint64_t counted_ct;   /* records of commands and compaction (stats) */
    bool sync_ever_failed; /* an fsync failed in this run: no clean-stop marker */
    uint64_t bytes_out;    /* bytes of frames written since start */
    void (*released)(void *arg);
    void *released_arg;
    /* test seams */
    long fault_after; /* BQ_FAULT_FALLOCATE_FAIL_AFTER, -1 when unset */
    long fallocs;
    bool stopping;
};

static inline seg_t *bq__binlog_current(bq_binlog_t *b)
{
    return &b->segs[b->nsegs - 1];
}

/* Creates segment seq, starting at the next LSN, as the current one (no
 * records logged). 0 or -errno. */
int bq__binlog_create_segment(bq_binlog_t *b, uint64_t seq, bool checkpoint, bq_now_t now);

/* Writes the batch and syncs the current segment, then closes it (no
 * segment is current after it): a later segment never exists while this
 * one lacks frames. 0 or -errno (a failed write or sync is retried). */
int bq__binlog_close_current(bq_binlog_t *b);

/* Empties the engine and replays the directory into it again (after its
 * files changed under a follower: a cut), reloading the segment list and
 * the positions. 0 or -errno (logged by replay). */
int bq__binlog_replay_again(bq_binlog_t *b, bq_now_t now);

/* Creates segment seq as the current one and logs its opening records (a
 * checkpoint). 0 or -errno. */
int bq__binlog_open_segment(bq_binlog_t *b, uint64_t seq, bq_now_t now);

/* Writes the pending batch (unless the log is failing) and applies the
 * fsync policy. */
void bq__binlog_flush(bq_binlog_t *b);

/* Makes the batch buffer hold at least need bytes. 0 or -1. */
int bq__binlog_ensure_batch(bq_binlog_t *b, size_t need);

/* Before closing the current segment (unless -F): fsyncs it on the loop
 * thread. 0, or -1 (a retry is scheduled). */
int bq__binlog_sync_before_rotation(bq_binlog_t *b);

/* Segment old (fd, its data end and preallocation), current until now, is
 * closed: trims its zero tail and closes fd unless an fsync still uses it. */
void bq__binlog_retire(bq_binlog_t *b, seg_t *old, int fd, uint64_t end, uint64_t prealloc);

/* Removes the oldest segment file (and syncs the directory). */
void bq__binlog_unlink_oldest(bq_binlog_t *b);

/* Whether the oldest segment may be removed now: only once everything
 * written when its removal was first decided is fsynced, whatever -f says
 * (the records that moved its jobs out, and the newer segments' opening
 * records, which restate the id reservation: after a power loss no id may
 * be handed out twice). If not, starts that fsync. */
bool bq__binlog_may_unlink_oldest(bq_binlog_t *b);

/* A record at lsn moved a job's full record to the current segment (full;
 * from prev_file, 0 for a new job) or deleted it (gone; from prev_file):
 * the live jobs per segment follow. */
void bq__binlog_count_change(bq_binlog_t *b, bool full, bool gone, uint32_t prev_file,
                             uint64_t lsn);

/* bq_engine_each_job_file callback: counts a live job in its segment. */
void bq__binlog_count_job(void *arg, uint32_t file);

#endif
