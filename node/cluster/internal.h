/* Internals of node/cluster/'s glue, shared by its files: cluster.c
 * (set-up, the release point, close), log_sink.c (the binlog and engine as
 * replication's log and sink), elections.c (the failover hooks),
 * switchover.c (a primary handing over) and status.c (`stats` keys, /status,
 * the log). Not for other folders: their contract is cluster.h. */
#ifndef BQ_NODE_CLUSTER_INTERNAL_H
#define BQ_NODE_CLUSTER_INTERNAL_H

#include <openssl/ssl.h>

#include "node/binlog/resync.h"
#include "node/cluster/cluster.h"
#include "node/cluster/proxy.h"
#include "replication/feeder.h"
#include "replication/receiver.h"

struct bq_cluster {
    bq_cluster_host_t host; /* the node's parts, borrowed */
    const bq_flags_t *f;
    char **argv;
    bool standby, closing;
    bq_repl_config_t rc;   /* the transport's view of the cluster */
    uv_timer_t role_timer; /* a role change runs from the loop, not inside a callback */
    const char *role_why;  /* a role change is pending (writes are refused meanwhile) */
    struct {
        int to;           /* the target's peer index; -1: none in progress */
        bool promoted;    /* Promote sent: nothing more is acknowledged */
        int64_t deadline; /* ns (monotonic) */
        int64_t lost_at;  /* after Promote: when the target's link was first seen
                             gone (ns, monotonic), 0 while it is up */
        bq_cluster_done_cb done;
        void *arg;
        uv_timer_t poll;
    } handover;
    bq_repl_peer_t peers[BQ_FLAGS_MAX_PEERS];
    size_t npeers;
    const bq_flags_peer_t *self;
    SSL_CTX *tls_server, *tls_client;
    bq_repl_log_t log;
    bq_repl_sink_t sink;
    bq_feeder_t *feeder;
    bq_receiver_t *receiver;
    bq_proxy_t *proxy;
    bq_resync_t *resync;
    bq_failover_t *failover;
    uint64_t released;     /* the last release point handed out (primary) */
    int sync_logged;       /* the sync state last logged (primary), -1 at first */
    char primary_name[64]; /* the primary we follow (standby) */
    struct {
        char start[8], primary[64];
        bq_cluster_rejoin_t last; /* strings point at start and primary */
        bool cut;                 /* a cut came just before this Welcome's report */
        uint64_t cut_records, cut_bytes;
    } rejoin;
    uv_timer_t status;
    struct {
        uv_timer_t timer; /* checks whether every standby rejoined */
        uint64_t from;    /* the first LSN of this primary's epoch */
        uint64_t since;   /* loop ms when it took office */
    } retain;
    char extra[4096];
};

/* Tells the host the release point and the refusal as they are now
 * (cluster.c). */
void bq__cluster_tell_release(bq_cluster_t *c);

/* Replaces the process image with a new start on the same flags (the
 * directory lock goes with the old image), to install a downloaded
 * resync; never returns (cluster.c). */
void bq__cluster_restart(bq_cluster_t *c, const char *why);

/* The election was won: this node becomes the primary of its epoch in
 * place, or stepped down: it becomes a standby in place (role.c). Each
 * sets role_why and runs from the loop a moment later. */
void bq__cluster_lead(bq_cluster_t *c);
void bq__cluster_step_down(bq_cluster_t *c);

/* A primary that took office keeps its earlier segments until every
 * standby rejoined it past epoch_first_lsn, or for a bound; stop: at once
 * (stepping down, closing) (retain.c). */
void bq__cluster_retain_start(bq_cluster_t *c, uint64_t epoch_first_lsn);
void bq__cluster_retain_stop(bq_cluster_t *c);

/* Fills c->log with the binlog seen as replication's log (log_sink.c). */
void bq__cluster_log_init(bq_cluster_t *c);

/* Fills c->sink with the binlog and engine seen as replication's sink
 * (log_sink.c). */
void bq__cluster_sink_init(bq_cluster_t *c);

/* Starts automatic or manual failover for c (elections.c); 0 or -1. */
int bq__cluster_start_failover(bq_cluster_t *c, const bq_failover_plan_t *plan,
                               const bq_repl_config_t *rc);

/* The feeder's hooks into the election: votes, acks, higher epochs
 * (elections.c). */
bq_feeder_hooks_t bq__cluster_feeder_hooks(void);

/* "primary", "standby" or "witness" (status.c). */
const char *bq__cluster_role_name(const bq_cluster_t *c);

/* One line per change of the primary's sync state (status.c). */
void bq__cluster_log_sync_state(bq_cluster_t *c);

/* The status timer: the replication status in the log (status.c). */
void bq__cluster_on_status(uv_timer_t *t);

#endif
