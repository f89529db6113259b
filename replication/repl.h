/* What the two sides of replication share: the cluster's configuration as
 * the transport needs it, and how the node's binlog is seen from here.
 * replication/ never includes node/: the node hands its binlog over through
 * these interfaces (node/cluster/cluster.c). */
#ifndef BQ_REPL_REPL_H
#define BQ_REPL_REPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/ssl.h>

/* Another node of the cluster: its node id and replication address. */
typedef struct bq_repl_peer {
    const char *name;
    const char *host;
    const char *port;
    bool witness; /* declared a witness in our flags: it may only follow as one */
} bq_repl_peer_t;

typedef struct bq_repl_config {
    const char *cluster_id;
    const char *node_id;         /* ours */
    const bq_repl_peer_t *peers; /* the other nodes (not us) */
    size_t npeers;
    SSL_CTX *tls_server; /* accepting side; NULL with --repl-plaintext */
    SSL_CTX *tls_client; /* connecting side; NULL with --repl-plaintext */
    uint64_t idle_ms;    /* --repl-timeout: a silent link is dropped */
    bool witness;        /* this node is a witness: heartbeats, no frames */
} bq_repl_config_t;

/* A segment of the node's binlog. */
typedef struct bq_repl_seg {
    uint64_t seq, first_lsn, epoch;
    int64_t created_wall;
    uint64_t data_start, data_end; /* frames lie in [data_start, data_end) */
    bool current;                  /* still being appended to */
} bq_repl_seg_t;

/* The primary's binlog, read by the senders (all borrowed). */
typedef struct bq_repl_log {
    size_t (*nsegs)(void *arg);
    void (*seg)(void *arg, size_t i, bq_repl_seg_t *out);
    /* Writes the path of segment seq into buf. */
    void (*path)(void *arg, uint64_t seq, char *buf, size_t cap);
    uint64_t (*written_lsn)(void *arg); /* frames up to here are in the files */
    uint64_t (*epoch)(void *arg);
    /* Optional: the epoch of frame lsn as the log's epoch history records
     * it, also for frames no longer retained; 0 when unknown. */
    uint64_t (*epoch_of)(void *arg, uint64_t lsn);
    void *arg;
} bq_repl_log_t;

/* Heartbeat and ack period for links dropped after idle_ms of silence. */
static inline uint64_t bq_repl_beat_ms(uint64_t idle_ms)
{
    return idle_ms / 4 > 0 ? idle_ms / 4 : 1;
}

/* The wall clock in ns (acks and heartbeats carry it: clock offsets). */
static inline int64_t bq_repl_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

#endif
