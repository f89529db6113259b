/* The primary's side of replication: listens on --repl-listen, checks each
 * standby's Hello (replication/handshake.h), streams the binlog to it
 * (replication/sender.h), keeps every standby's acknowledged positions and
 * from them the commit point (replication/commit.h), and sends heartbeats.
 * On a node that is not the primary the feeder still listens, and answers
 * every Hello with Refuse(NOT_PRIMARY), so a standby looking for the
 * primary moves on to the next peer. On any node it answers vote requests
 * through the hooks (elections, node/cluster/failover.c). */
#ifndef BQ_REPL_FEEDER_H
#define BQ_REPL_FEEDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "replication/commit.h"
#include "proto/repl.pb-c.h"
#include "replication/repl.h"

typedef struct bq_feeder bq_feeder_t;

/* What the feeder hears that the election (node/cluster/failover.c) needs; every
 * hook is optional, arg is the feeder's callback arg. */
typedef struct bq_feeder_hooks {
    /* A voter asks for our vote (any role): fill reply's epoch, prevote and
     * granted; peer is the voter's index in repl.peers. */
    void (*vote)(void *arg, size_t peer, const Bq__Repl__VoteRequest *req,
                 Bq__Repl__VoteReply *reply);
    /* Primary: standby `peer`, following epoch, acknowledged a heartbeat we
     * sent at echo (our monotonic clock, ns; 0 when none yet). */
    void (*ack)(void *arg, size_t peer, uint64_t epoch, int64_t echo);
    /* A peer told us of an epoch above ours (its Hello). */
    void (*higher_epoch)(void *arg, uint64_t epoch);
} bq_feeder_hooks_t;

typedef struct bq_feeder_config {
    bq_repl_config_t repl;
    bool primary;            /* false: refuse every standby (NOT_PRIMARY) */
    const char *client_host; /* where standbys proxy clients to; NULL: our --peer host */
    const char *client_port;
    unsigned sync_need; /* --sync-standbys */
    bq_fallback_t fallback;
    int64_t sync_timeout_ns;
    bool count_self; /* the primary counts as a copy only when durable
                        (automatic failover; replication/commit.h) */
    bq_feeder_hooks_t hooks;
} bq_feeder_config_t;

/* Per standby, for the status and stats. */
typedef struct bq_feeder_standby {
    const char *name;
    bool witness; /* a voter without jobs (heartbeats only) */
    bool connected, in_sync;
    const char *addr; /* "ip:port" while connected */
    uint64_t sent, written, flushed, applied;
    uint64_t lag_records;    /* our last LSN - its applied LSN */
    uint64_t lag_bytes;      /* binlog bytes between them (approximate) */
    uint64_t lag_ms;         /* how long ago the first frame it lacks was written */
    int64_t clock_offset_ms; /* its clock - ours, from its last ack */
    uint64_t floor;          /* a witness: the floor it acknowledged storing */
} bq_feeder_standby_t;

/* Creates a feeder on loop for log (borrowed; cfg is copied, its strings
 * borrowed). committed(arg) is called when the commit point may have moved
 * (an ack arrived, or the sync state changed). Returns new (free with
 * bq_feeder_free) or NULL when out of memory. */
bq_feeder_t *bq_feeder_new(uv_loop_t *loop, const bq_feeder_config_t *cfg, const bq_repl_log_t *log,
                           void (*committed)(void *arg), void *arg);

/* Starts listening on host:port. 0, or a negative libuv error (the caller
 * logs the outcome: node/cluster/cluster.c). */
int bq_feeder_listen(bq_feeder_t *f, const char *host, const char *port);

/* The binlog wrote frames up to lsn, bytes in all since start (primary):
 * wakes the senders. */
void bq_feeder_written(bq_feeder_t *f, uint64_t lsn, uint64_t bytes, int64_t now);

/* The primary's binlog is durable up to lsn (count_self). */
void bq_feeder_durable(bq_feeder_t *f, uint64_t lsn);

/* The commit point given the local binlog's release point, at now. */
uint64_t bq_feeder_commit(bq_feeder_t *f, uint64_t local_release, int64_t now);

/* True when replies may wait for this node's own fsync (see
 * bq_commit_wants_self_durable): the binlog must then sync at once. */
bool bq_feeder_wants_self_durable(const bq_feeder_t *f);

/* The sync state now (BQ_SYNC_OFF without sync standbys). */
bq_sync_state_t bq_feeder_sync_state(const bq_feeder_t *f);

/* Standbys connected and in sync. */
size_t bq_feeder_in_sync(const bq_feeder_t *f);

/* The standbys: how many, and a snapshot of standby i at now. */
size_t bq_feeder_nstandbys(const bq_feeder_t *f);
void bq_feeder_standby(const bq_feeder_t *f, size_t i, int64_t now, bq_feeder_standby_t *out);

/* Sends Promote (our epoch) to standby peer over its link: it should stand
 * now (switchover). 0, or -1 when it is not connected. */
int bq_feeder_send_promote(bq_feeder_t *f, size_t peer);

/* The node's role changed in place: primary streams to the standbys and
 * counts their copies from the log's end now; not primary closes every
 * standby's stream and refuses Hellos (NOT_PRIMARY). Votes go on either
 * way. */
void bq_feeder_set_primary(bq_feeder_t *f, bool primary);

/* Closes the listener and every link (shutdown). */
void bq_feeder_close(bq_feeder_t *f);

/* Frees f after bq_feeder_close and after the loop ran the close
 * callbacks. NULL is a no-op. */
void bq_feeder_free(bq_feeder_t *f);

#endif
