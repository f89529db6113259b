/* Cluster mode (--role): ties the node's binlog, engine and listeners to
 * replication. On the primary: the feeder streams the binlog to the
 * standbys and its commit point holds replies back (sync mode), and writes
 * are refused while the sync fallback says so. On a standby: the receiver
 * follows the primary into the binlog and the engine (no timers run, no
 * client is served: client connections are proxied to the primary), and a
 * full resync is downloaded beside the log, then installed by restarting
 * the process on it. Either way the node reports its replication status in
 * `stats` (extra keys after beanstalkd's) and periodically in the log. */
#ifndef BQ_NODE_CLUSTER_H
#define BQ_NODE_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include <uv.h>

#include "node/base/flags.h"
#include "node/binlog/binlog.h"
#include "node/client/listen.h"
#include "node/cluster/failover.h"
#include "protocol/engine.h"

typedef struct bq_cluster bq_cluster_t;

/* The node's parts the cluster drives (borrowed: the owner, the server,
 * keeps them until bq_cluster_free), and where it tells what the owner
 * needs: released(arg, lsn) whenever the point up to which replies may
 * leave (it never goes back), or whether writes are refused or paused
 * (bq_cluster_refusal, bq_cluster_pause), may have changed. */
typedef struct bq_cluster_host {
    uv_loop_t *loop;
    bq_engine_t *engine;
    bq_binlog_t *binlog;
    bq_listener_t *listener; /* passed on to the process image of a restart */
    void (*released)(void *arg, uint64_t lsn);
    /* The node's role changed in place. standby: it stopped being the
     * primary; the owner must end every local session now (their
     * reservations are void), handing the clients that can move to
     * bq_cluster_take_client, before the engine follows a new primary. */
    void (*role_changed)(void *arg, bool standby);
    /* It became the primary: a client its proxy held or served is served
     * here now (as bq_proxy_adopt_fn; the owner feeds input first and drops
     * the replies of the first restores commands). */
    void (*adopt)(void *arg, int fd, const char *input, size_t len, size_t restores);
    void *arg;
} bq_cluster_host_t;

/* Starts cluster mode on host (after its binlog started) as f and plan
 * say; argv is the process's (borrowed: the node restarts itself with it
 * to install a resync or to change role). 0 and a new cluster in *out, or
 * -1 (logged). */
int bq_cluster_start(bq_cluster_t **out, const bq_cluster_host_t *host, const bq_flags_t *f,
                     const bq_failover_plan_t *plan, char **argv);

/* True on a standby. */
bool bq_cluster_standby(const bq_cluster_t *c);

/* Why the primary refuses writes now (sync fallback "refuse" in force,
 * fenced, a switchover, stepping down), or NULL when it takes them; read
 * with the time now, nothing changes. */
const char *bq_cluster_refusal(const bq_cluster_t *c);

/* Why the primary's writes wait now instead of being refused (a
 * switchover, stepping down: both end within a bound, by writes resuming
 * here or by its clients moving to the new primary), or NULL. */
const char *bq_cluster_pause(const bq_cluster_t *c);

/* A client this node served as primary, now that it steps down: proxied to
 * the next primary with its session (bq_proxy_take's arguments: fd owned,
 * the rest borrowed). 0, or -1 (fd closed). */
int bq_cluster_take_client(bq_cluster_t *c, int fd, const char *use, const char *const *watch,
                           size_t nwatch, const char *input, size_t len);

/* A client connection arrived on a standby: proxied (takes ownership of fd). */
void bq_cluster_accept(bq_cluster_t *c, int fd);

/* The binlog wrote frames, or released more (synced them): the cluster
 * streams them, and tells the host its release point (host.released). */
void bq_cluster_written(bq_cluster_t *c);
void bq_cluster_synced(bq_cluster_t *c);

/* Asks this node to become primary (beanstalkctl promote): 0 when an
 * election or the promotion started, -1 with the reason in why. */
int bq_cluster_promote(bq_cluster_t *c, bool force, char *why, size_t whylen);

/* The end of an asynchronous operation: an HTTP status and a line. */
typedef void (*bq_cluster_done_cb)(void *arg, int status, const char *text);

/* Hands the primary role over to standby `to` (beanstalkctl switchover):
 * writes are refused until it has flushed every record, then it is asked to
 * stand and this node steps down; done(arg, ...) reports the outcome (200,
 * or 504 when given up and writes resumed). 0 when started, -1 with the
 * reason in why (nothing changed). */
int bq_cluster_switchover(bq_cluster_t *c, const char *to, bq_cluster_done_cb done, void *arg,
                          char *why, size_t whylen);

/* A standby as the primary sees it. */
typedef struct bq_cluster_standby_status {
    const char *name, *state, *addr; /* state: streaming, catching-up, disconnected */
    uint64_t sent, written, flushed, applied, lag_records, lag_bytes;
    double lag_seconds, clock_offset_seconds;
    uint64_t floor; /* a witness (state "witness"): the floor it acknowledged storing */
} bq_cluster_standby_status_t;

/* How this node's last stream from a primary began (a rejoin). */
typedef struct bq_cluster_rejoin {
    const char *start;         /* "resume", "cut" or "resync"; NULL: none yet */
    const char *primary;       /* the primary's node id */
    uint64_t epoch;            /* the primary's epoch */
    uint64_t from_lsn;         /* the first record streamed */
    uint64_t primary_last_lsn; /* the primary's last record then: from_lsn..it to stream */
    uint64_t cut_records;      /* cut: records moved aside */
    uint64_t cut_bytes;        /* cut: their bytes */
    int64_t at_wall_ms;        /* when (ms since the epoch) */
} bq_cluster_rejoin_t;

/* The node's replication and election state (strings borrowed from c, valid
 * until the next call). */
typedef struct bq_cluster_status {
    const char *node_id, *cluster_id, *role; /* primary, standby, candidate... */
    uint64_t epoch, last_lsn, durable_lsn, commit_lsn;
    const char *primary;         /* the primary's node id, or NULL when unknown */
    uint64_t primary_commit_lsn; /* standby: the commit LSN of the primary's last heartbeat */
    bool failover_auto, fenced, ready;
    const char *not_ready; /* why not ready, or NULL */
    bool riding;           /* standby: no primary, ready while it holds clients for one */
    const char *paused;    /* primary: why writes wait (bq_cluster_pause), or NULL */
    unsigned sync_standbys;
    bool fallback_async;
    const char *sync_state; /* primary: off, sync, waiting, degraded, refusing */
    size_t in_sync;
    size_t nstandbys;
    bq_cluster_standby_status_t standbys[BQ_FLAGS_MAX_PEERS];
    size_t npeers; /* the other nodes and their replication addresses */
    const char *peer_names[BQ_FLAGS_MAX_PEERS];
    char peer_addrs[BQ_FLAGS_MAX_PEERS][280];
    bq_cluster_rejoin_t rejoin;
} bq_cluster_status_t;

/* Fills *st (large: caller-allocated) with the state now. */
void bq_cluster_status(bq_cluster_t *c, bq_cluster_status_t *st);

/* The server side TLS context of the cluster (replication's certificates),
 * or NULL in plaintext; borrowed. */
SSL_CTX *bq_cluster_tls_server(const bq_cluster_t *c);

/* Adds the cluster keys to a `stats` reply (info->extra points into c). */
void bq_cluster_fill_info(bq_cluster_t *c, bq_server_info_t *info);

/* Closes links, listeners and timers (shutdown). NULL is a no-op. */
void bq_cluster_close(bq_cluster_t *c);

/* Frees c after bq_cluster_close and after the loop ran the close
 * callbacks. NULL is a no-op. */
void bq_cluster_free(bq_cluster_t *c);

#endif
