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

#include "parse.h"

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
} bq_server_info_t;

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
    void *arg; /* passed to server_info */
} bq_engine_hooks_t;

typedef struct bq_engine_config {
    uint32_t max_job_size; /* -z: largest body in bytes (0 allows only empty bodies) */
} bq_engine_config_t;

/* Creates an empty engine with the `default` tube; NULL when out of memory.
 * Copies *cfg and *hooks. */
bq_engine_t *bq_engine_new(const bq_engine_config_t *cfg, const bq_engine_hooks_t *hooks);

/* Frees the engine with every job and tube. Close every client first. */
void bq_engine_free(bq_engine_t *e);

/* Sets drain mode: `put` answers DRAINING, everything else works. */
void bq_engine_set_draining(bq_engine_t *e, bool draining);

/* True in drain mode. */
bool bq_engine_draining(const bq_engine_t *e);

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

/* Runs every timer due at now (delayed jobs becoming ready, pauses ending,
 * TTR expiry, DEADLINE_SOON, reserve timeouts). Returns the next due time
 * (mono ns) or BQ_NEVER. */
int64_t bq_engine_tick(bq_engine_t *e, bq_now_t now);

/* The next due time (mono ns) without running anything, or BQ_NEVER. */
int64_t bq_engine_next_due(const bq_engine_t *e);

#endif
