/* The standby's side of replication: finds the primary among the peers
 * (each is tried in turn; one that is not the primary refuses), says Hello
 * with the last (epoch, LSN) of the local log, and follows the stream: each
 * Frames message is checked whole (replication/follow.h) and then handed to
 * the node, which appends the frames to its binlog and applies them to its
 * engine. Acks report the written, flushed and applied LSNs after each
 * change and every idle_ms / 4 as a heartbeat; each ack carries the epoch
 * followed and echoes the `sent` time of the last heartbeat (the primary's
 * CheckQuorum). Any break (refusal, bad
 * frame, silence beyond idle_ms, close) drops the link and a new attempt
 * follows after a short backoff. */
#ifndef BQ_REPL_RECEIVER_H
#define BQ_REPL_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proto/repl.pb-c.h"
#include "replication/repl.h"

/* The primary a standby follows, as its Welcome described it. */
typedef struct bq_repl_primary {
    const char *node; /* its node id */
    const char *host; /* where clients are proxied to: its client address */
    const char *port;
    const char *security; /* the link's protocol: "TLSv1.3" etc. */
    bool resync;          /* the stream starts with a full resync */
    bool cut;             /* the log was cut back to the fork point (start_lsn - 1) */
    uint64_t start_lsn;   /* the first record the stream carries */
    uint64_t last_lsn;    /* the primary's last record at its Welcome */
    uint64_t epoch;       /* the primary's epoch */
} bq_repl_primary_t;

/* What the receiver needs from the node (all borrowed). The receiver
 * reports the events these hooks carry through them alone: the node logs
 * them (node/cluster/cluster.c); what no hook carries goes to replication/report.h. */
typedef struct bq_repl_sink {
    /* The local log: its last frame (applied), that frame's epoch, and how
     * far it is written and durable. */
    uint64_t (*last_lsn)(void *arg);
    uint64_t (*last_epoch)(void *arg);
    /* Optional: the highest epoch this node has seen (its election's), sent
     * in the Hello so that a primary of a lower epoch steps down. */
    uint64_t (*seen_epoch)(void *arg);
    uint64_t (*written_lsn)(void *arg);
    uint64_t (*durable_lsn)(void *arg);
    /* The stream enters the primary's segment starting at first_lsn. 0 or <0. */
    int (*segment)(void *arg, uint64_t first_lsn, uint64_t epoch, int64_t created_wall);
    /* Appends and applies checked frames data[0..len) (the last is
     * last_lsn, in epoch). 0 or <0 (the link is dropped). */
    int (*frames)(void *arg, const uint8_t *data, size_t len, uint64_t last_lsn, uint64_t epoch);
    /* Optional, with cut: where the local log's epochs begin, oldest first
     * (at most max, the newest), for the Hello; returns how many. */
    size_t (*epochs)(void *arg, Bq__Repl__EpochStart *out, size_t max);
    /* Optional: the local log forked from the primary's after lsn: cut it
     * there (frames after it moved aside) before the stream goes on. 0 or
     * <0 (the link is dropped). */
    int (*cut)(void *arg, uint64_t lsn);
    /* A full resync: a new log is downloaded beside the current one. */
    int (*resync_begin)(void *arg);
    int (*resync_segment)(void *arg, uint64_t first_lsn, uint64_t epoch, int64_t created_wall,
                          bool checkpoint);
    int (*resync_frames)(void *arg, const uint8_t *data, size_t len);
    /* The download caught up with the primary, up to last_lsn: install it
     * (the node restarts on it). */
    void (*resync_done)(void *arg, uint64_t last_lsn);
    void (*resync_abort)(void *arg);
    /* The primary is known: p (borrowed for the call) describes it and the
     * stream it starts. */
    void (*primary)(void *arg, const bq_repl_primary_t *p);
    /* The primary followed, node id `node`, was lost (why: the link's close
     * reason): none is known until the next call of primary. */
    void (*primary_lost)(void *arg, const char *node, const char *why);
    /* Optional (elections): the primary, peer `peer` of epoch, was heard
     * (hb: its heartbeat, NULL for its Welcome). false: that epoch is stale
     * here; the link is dropped. */
    bool (*heard)(void *arg, size_t peer, uint64_t epoch, const Bq__Repl__Heartbeat *hb);
    /* Optional (a witness): the floor it has stored durably in epoch (0:
     * none), acknowledged to the primary with every ack. */
    uint64_t (*kept_floor)(void *arg, uint64_t epoch);
    /* Optional: the primary, peer `peer` of epoch, asks us to stand now
     * (switchover). */
    void (*promote)(void *arg, size_t peer, uint64_t epoch);
    void *arg;
} bq_repl_sink_t;

typedef struct bq_receiver bq_receiver_t;

/* What the standby knows of its primary, for the status. */
typedef struct bq_receiver_status {
    bool connected;
    const char *primary;  /* node id, "" when none */
    const char *security; /* "TLSv1.3" etc. */
    bool resyncing;
    uint64_t primary_epoch, primary_last_lsn, primary_commit_lsn;
    int64_t last_heard_ms; /* since the last message (-1 never) */
} bq_receiver_status_t;

/* Creates a receiver on loop (cfg copied, strings borrowed; sink borrowed).
 * Returns new (free with bq_receiver_free) or NULL when out of memory. */
bq_receiver_t *bq_receiver_new(uv_loop_t *loop, const bq_repl_config_t *cfg,
                               const bq_repl_sink_t *sink);

/* Starts looking for the primary (again, after bq_receiver_stop). */
void bq_receiver_start(bq_receiver_t *r);

/* Stops following (this node became the primary): drops the link, aborts a
 * resync download, tells the sink nothing more; bq_receiver_start resumes. */
void bq_receiver_stop(bq_receiver_t *r);

/* The local log's positions changed (a write or an fsync completed): acks. */
void bq_receiver_progress(bq_receiver_t *r);

/* Fills *st. */
void bq_receiver_status(const bq_receiver_t *r, bq_receiver_status_t *st);

/* Stops: closes the link and the timers (shutdown). */
void bq_receiver_close(bq_receiver_t *r);

/* Frees r after bq_receiver_close and after the loop ran the close
 * callbacks. NULL is a no-op. */
void bq_receiver_free(bq_receiver_t *r);

#endif
