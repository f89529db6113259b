/* The job engine: jobs, tubes, heaps, reservations and every state transition
 * of the beanstalk protocol.
 *
 * Pure: the engine never reads a clock, a socket or a file. Every entry point
 * that depends on time takes `now`; replies and wake-ups leave through the
 * hooks given at creation. The engine is single-threaded and not re-entrant:
 * a hook must never call back into the engine (defer the work instead).
 *
 * Times are nanoseconds. `mono` drives live timers (TTR, delay, pause,
 * reserve timeouts); `wall` only stamps what must survive a restart
 * (created_at). */
#ifndef BQ_ENGINE_H
#define BQ_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/parse.h"

#define BQ_NS_PER_S INT64_C(1000000000)
/* Default and largest -z value (beanstalkd's). */
#define BQ_MAX_JOB_SIZE_DEFAULT 65535u
#define BQ_MAX_JOB_SIZE_LIMIT 1073741824u
/* Jobs with a priority below this count as urgent. */
#define BQ_URGENT_THRESHOLD 1024u
/* A reserve answers DEADLINE_SOON this long before a reservation expires. */
#define BQ_SAFETY_MARGIN (1 * BQ_NS_PER_S)
/* bq_engine_tick() result when no timer is pending. */
#define BQ_NEVER INT64_MAX

typedef struct bq_engine bq_engine_t;
typedef struct bq_client bq_client_t;
typedef struct bq_job bq_job_t;

typedef struct bq_now {
    int64_t mono; /* monotonic clock, ns */
    int64_t wall; /* realtime clock, ns since the epoch */
} bq_now_t;

/* Facts about the process that `stats` reports; filled by the node. */
typedef struct bq_server_info {
    long pid;
    const char *version;
    int64_t utime_us, stime_us; /* rusage */
    uint64_t uptime_s;
    uint64_t binlog_oldest_index, binlog_current_index;
    uint64_t binlog_records_migrated, binlog_records_written;
    uint64_t binlog_max_size;
    const char *id;       /* 16 hex chars, random per process */
    const char *hostname; /* uname nodename */
    const char *os;       /* uname version */
    const char *platform; /* uname machine */
    const char *extra;    /* more "key: value\n" lines after beanstalkd's (cluster mode) */
} bq_server_info_t;

/* A durable change, handed to the log hook: one packed bq.log.Record. */
typedef struct bq_log_entry {
    const uint8_t *data;
    size_t len;
    uint64_t job_id;    /* the job it is about, 0 for tube and id records */
    uint32_t prev_file; /* the segment of the job's full record before, 0 if none */
    bool full;          /* a full job record: the job's file becomes its segment */
    bool gone;          /* a delete: the job leaves prev_file */
    bool sync;          /* must be on disk before any reply that follows it */
    bool meta;          /* the log's own bookkeeping (id reservations, a checkpoint's
                           restated pauses), not a change a command made */
} bq_log_entry_t;

/* The log_room hook's answers. */
typedef enum bq_room {
    BQ_ROOM_GRANTED, /* the log takes the record */
    BQ_ROOM_FULL,    /* no room (disk full, log failing): OUT_OF_MEMORY */
    BQ_ROOM_REFUSED, /* the node refuses writes now (a fenced primary...): a put gets
                        DRAINING, other changes OUT_OF_MEMORY */
} bq_room_t;

typedef struct bq_engine_hooks {
    /* Appends reply bytes to connection `conn`'s output, in order. Required. */
    void (*send)(void *conn, const char *data, size_t len);
    /* `conn` stopped waiting (its reply was sent): resume feeding its input.
     * Called from inside the engine, so the node must defer the work. Required. */
    void (*wake)(void *conn);
    /* Fills *info for a `stats` reply. Required. */
    void (*server_info)(void *arg, bq_server_info_t *info);
    /* Optional: a command was parsed on `conn` (for -VV tracing). */
    void (*command)(void *conn, bq_op_t op);
    /* Optional, with log (binlog on): whether the log can take a record of
     * at most `bytes` now. Asked before a logged change; anything but
     * BQ_ROOM_GRANTED makes the command answer with nothing changed. A
     * delete asks with is_delete, for which room is kept in reserve. */
    bq_room_t (*log_room)(void *arg, size_t bytes, bool is_delete);
    /* Optional: appends a durable change to the log; returns the number of
     * the segment it went to. Room was granted by log_room. */
    uint32_t (*log)(void *arg, const bq_log_entry_t *entry);
    void *arg; /* passed to server_info, log_room and log */
} bq_engine_hooks_t;

typedef struct bq_engine_config {
    uint32_t max_job_size; /* -z: largest body in bytes (0 allows only empty bodies) */
} bq_engine_config_t;

/* Creates an empty engine with the `default` tube; NULL when out of memory.
 * Copies *cfg and *hooks. */
bq_engine_t *bq_engine_new(const bq_engine_config_t *cfg, const bq_engine_hooks_t *hooks);

/* Frees the engine with every job and tube. Close every client first. */
void bq_engine_free(bq_engine_t *e);

/* Empties e back to what bq_engine_new made (its hooks, -z and drain mode
 * kept; counters reset), for a log that is replayed again. Close every
 * client first. 0, or -1 when out of memory (e unchanged). */
int bq_engine_reset(bq_engine_t *e);

/* Sets drain mode: `put` answers DRAINING, everything else works. */
void bq_engine_set_draining(bq_engine_t *e, bool draining);

/* True in drain mode. */
bool bq_engine_draining(const bq_engine_t *e);

/* Pauses writes (a switchover or a step-down under way): a session holds a
 * command that changes a job or a tube (put, delete, release, bury, touch,
 * kick, kick-job, pause-tube) unanswered, and its later commands, until
 * writes resume; the owner then feeds held sessions again. */
void bq_engine_set_writes_paused(bq_engine_t *e, bool paused);

/* True while writes are paused. */
bool bq_engine_writes_paused(const bq_engine_t *e);

/* The server-wide figures of `stats`, read without running a command (no
 * counter is bumped). */
typedef struct bq_engine_stats {
    uint64_t ready, reserved, delayed, buried, urgent; /* current jobs */
    uint64_t total_jobs, timeouts;                     /* since start-up */
    uint64_t clients, producers, workers, waiting;     /* current connections */
    uint64_t total_conns;                              /* since start-up */
    uint64_t ntubes;
    uint64_t op_ct[BQ_OP_COUNT]; /* commands run, by op (cmd-* of stats) */
    bool draining;
} bq_engine_stats_t;

/* Fills *out with e's figures. */
void bq_engine_stats(const bq_engine_t *e, bq_engine_stats_t *out);

/* One tube's current jobs, as `stats-tube` counts them. */
typedef struct bq_engine_tube_stats {
    const char *name; /* borrowed from e until the tube goes away */
    size_t name_len;
    uint64_t ready, reserved, delayed, buried, urgent;
} bq_engine_tube_stats_t;

/* Fills *out for tube i (0 <= i < stats.ntubes, in list-tubes order). */
void bq_engine_tube_stats(const bq_engine_t *e, size_t i, bq_engine_tube_stats_t *out);

/* The -z limit in force. */
uint32_t bq_engine_max_job_size(const bq_engine_t *e);

/* Opens a client for connection `conn` (using and watching `default`);
 * NULL when out of memory. */
bq_client_t *bq_engine_client_open(bq_engine_t *e, void *conn);

/* Closes client c: its reserved jobs go back to ready, it stops waiting.
 * Frees c. */
void bq_engine_client_close(bq_engine_t *e, bq_client_t *c, bq_now_t now);

/* The peer half-closed: a waiting reserve answers TIMED_OUT now, and later
 * reserves that would block answer TIMED_OUT at once. */
void bq_engine_client_halfclose(bq_engine_t *e, bq_client_t *c, bq_now_t now);

/* True while c waits in reserve; its later commands must not run yet. */
bool bq_engine_client_waiting(const bq_client_t *c);

/* While c waits in reserve: its deadline (mono ns), or BQ_NEVER for a
 * reserve without a timeout. */
int64_t bq_engine_client_wait_deadline(const bq_client_t *c);

/* The tube c uses (borrowed, NUL-terminated). */
const char *bq_engine_client_use(const bq_client_t *c);

/* The tubes c watches: how many, and tube i (borrowed), in beanstalkd's
 * multiset order (what list-tubes-watched shows). */
size_t bq_engine_client_nwatch(const bq_client_t *c);
const char *bq_engine_client_watch(const bq_client_t *c, size_t i);

/* Sends len bytes to c's connection through the send hook. */
void bq_engine_client_send(bq_engine_t *e, bq_client_t *c, const char *data, size_t len);

/* Runs one successfully parsed command for c (any op but put and quit) and
 * replies through the send hook. */
void bq_engine_exec(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd, bq_now_t now);

typedef enum bq_put_start {
    BQ_PUT_READ_BODY,  /* *job is allocated: read bytes+2 into bq_job_body() */
    BQ_PUT_TOO_BIG,    /* discard bytes+2 from the input, then reply JOB_TOO_BIG */
    BQ_PUT_NO_MEMORY,  /* discard bytes+2 from the input, then reply OUT_OF_MEMORY */
    BQ_PUT_BAD_FORMAT, /* replied BAD_FORMAT already; the body is not consumed */
    BQ_PUT_DRAINING,   /* the node refuses writes (the log refused the id
                          reservation): discard bytes+2, then reply DRAINING */
} bq_put_start_t;

/* First half of a parsed `put` (cmd->op == BQ_OP_PUT): counts it, checks the
 * size and trailing text in beanstalkd's order, allocates the job and stamps
 * its id and creation time (beanstalkd does both when the line arrives). */
bq_put_start_t bq_engine_put_begin(bq_engine_t *e, bq_client_t *c, const bq_cmd_t *cmd,
                                   bq_now_t now, bq_job_t **job);

/* Where the body of a job from bq_engine_put_begin goes: bq_job_body_size()
 * bytes, i.e. the body followed by its CRLF. */
char *bq_job_body(bq_job_t *j);
size_t bq_job_body_size(const bq_job_t *j);

/* Second half of `put`: takes ownership of job, whose body (with CRLF) is
 * complete; checks the CRLF and drain mode, stores the job and replies. */
void bq_engine_put_finish(bq_engine_t *e, bq_client_t *c, bq_job_t *job, bq_now_t now);

/* Frees a job from bq_engine_put_begin whose body never completed. */
void bq_engine_put_abort(bq_engine_t *e, bq_job_t *job);

/* ---- the binlog side (see docs/binlog.md) ---- */

/* Largest packed delete record: room kept per live job so deletes always fit. */
#define BQ_LOG_DELETE_MAX 16
/* Job-table slots one bq_engine_file_jobs() call looks at. */
#define BQ_FILE_SCAN_SLOTS 65536

/* Errors of bq_engine_apply(). */
#define BQ_EBADRECORD (-1) /* not a valid record */
#define BQ_ENOMEM (-2)

/* Applies one packed record, as found in segment `file`, at now: the same
 * state transition that the logged command made, with no reply, no hook and
 * no counter changed beyond the recorded values. Used by binlog replay and by
 * standbys; no client may hold a reservation. 0 or BQ_E*. */
int bq_engine_apply(bq_engine_t *e, const uint8_t *data, size_t len, uint32_t file, bq_now_t now);

/* What applying one record did to the jobs' segments (for a log that keeps
 * count of the live jobs per segment, as a standby's binlog does). */
typedef struct bq_apply_effect {
    bool full;          /* a job's full record: the job's segment is now `file` */
    bool gone;          /* a job was deleted */
    bool existed;       /* the job was there before (its full record in prev_file) */
    uint32_t prev_file; /* with existed: its segment before */
} bq_apply_effect_t;

/* bq_engine_apply, also telling in *eff what it did to the jobs' segments
 * (zeroed when it did nothing to them). */
int bq_engine_apply_ex(bq_engine_t *e, const uint8_t *data, size_t len, uint32_t file, bq_now_t now,
                       bq_apply_effect_t *eff);

/* Moves the next job id one reservation block further: a new primary skips
 * ids its predecessor may have handed out from a block whose reservation
 * never reached it (call before the checkpoint that logs the reservation). */
void bq_engine_skip_id_block(bq_engine_t *e);

/* After replay: sets where job ids go on. With may_continue, and when the
 * last id reservation replayed says so (a clean stop, or a writer that
 * showed no id before its record was durable), the next id is one past the
 * highest id logged (as beanstalkd's); otherwise it is past every reserved
 * id. Every id below the next one then counts as shown. */
void bq_engine_resume_ids(bq_engine_t *e, bool may_continue);

/* True when the last id reservation applied lets ids go on after the
 * highest logged one (bq_engine_resume_ids). */
bool bq_engine_ids_settled(const bq_engine_t *e);

/* Declares that no reply shows an id before the job's full record is durable
 * (a single node under -f 0); logged with every id reservation. */
void bq_engine_set_ids_durable(bq_engine_t *e, bool durable);

/* Logs what a new segment must repeat so that older segments are never
 * needed for it: the id reservation and every tube still paused. */
void bq_engine_log_checkpoint(bq_engine_t *e, bq_now_t now);

/* Logs the last record of a clean shutdown: an id reservation marked
 * clean_stop. Log it only once every earlier record is durable. */
void bq_engine_log_clean_stop(bq_engine_t *e);

/* Logs job id in full again (compaction moves it to the current segment).
 * 0, or -1 when the job is gone or the log has no room. */
int bq_engine_relog_job(bq_engine_t *e, uint64_t id, bq_now_t now);

/* Collects up to max ids of jobs whose full record is in segment `file`,
 * scanning at most BQ_FILE_SCAN_SLOTS slots of the job table from *cursor
 * (start at 0), so one call stays short; returns how many were found. The
 * scan is over when *cursor reaches bq_engine_scan_end(). */
size_t bq_engine_file_jobs(const bq_engine_t *e, uint32_t file, size_t *cursor, uint64_t *ids,
                           size_t max);

/* Where a bq_engine_file_jobs() scan ends. */
size_t bq_engine_scan_end(const bq_engine_t *e);

/* Calls fn(arg, file) for every job (to count the jobs per segment). */
void bq_engine_each_job_file(const bq_engine_t *e, void (*fn)(void *arg, uint32_t file), void *arg);

/* Approximate bytes of the full records of every live job: what the binlog
 * must keep at least. */
uint64_t bq_engine_live_log_bytes(const bq_engine_t *e);

/* Runs every timer due at now (delayed jobs becoming ready, pauses ending,
 * TTR expiry, DEADLINE_SOON, reserve timeouts). Returns the next due time
 * (mono ns) or BQ_NEVER. */
int64_t bq_engine_tick(bq_engine_t *e, bq_now_t now);

/* The next due time (mono ns) without running anything, or BQ_NEVER. */
int64_t bq_engine_next_due(const bq_engine_t *e);

#endif
