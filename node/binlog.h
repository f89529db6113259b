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

#include "binlog_policy.h"
#include "protocol/engine.h"

typedef struct bq_binlog bq_binlog_t;

typedef struct bq_binlog_config {
    const char *dir;       /* -b (borrowed; must outlive the binlog) */
    uint64_t seg_size;     /* -s */
    bq_binlog_sync_t sync; /* -f 0, -f MS or -F */
    uint64_t fsync_ms;     /* MS for BQ_BINLOG_SYNC_TIMED */
    bool skip_corrupt;     /* --binlog-skip-corrupt */
} bq_binlog_config_t;

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

/* Calls released(arg) whenever the release LSN advances (a write or an
 * fsync completed), so the node can flush replies that were held back. */
void bq_binlog_on_release(bq_binlog_t *b, void (*released)(void *arg), void *arg);

/* Replays the directory into e (borrowed; its log hooks must point at b),
 * closes the old last segment and starts a new one with a checkpoint. 0 or
 * a BQ_BINLOG_E* code (logged). */
int bq_binlog_start(bq_binlog_t *b, bq_engine_t *e, bq_now_t now);

/* Engine log_room hook (arg is the binlog). */
bool bq_binlog_room(void *arg, size_t bytes, bool is_delete);

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

/* True while a write or fsync has failed and is being retried. */
bool bq_binlog_failing(const bq_binlog_t *b);

/* Adds the binlog figures to a `stats` reply. */
void bq_binlog_fill_info(const bq_binlog_t *b, bq_server_info_t *info);

/* Shutdown: closes the binlog's timers, so the loop can finish; no fsync
 * starts after this. NULL is a no-op. */
void bq_binlog_stop(bq_binlog_t *b);

/* After bq_binlog_stop and after the loop has run until the timers closed
 * and any fsync ended: writes what is left, fsyncs, trims the current
 * segment to its data and frees b. The directory lock is kept until the
 * process exits. NULL is a no-op. */
void bq_binlog_free(bq_binlog_t *b);

#endif
