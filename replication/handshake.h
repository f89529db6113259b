/* The primary's answer to a standby's Hello: refuse it, resume the stream
 * after the standby's last LSN, cut the standby's log back to where it
 * forked from ours and stream from there, or resync it from the oldest
 * retained segment. Pure: each log is described by where its epochs begin
 * (the primary's: its retained segments; the standby's: the epochs its
 * Hello lists).
 *
 * Every frame of a segment carries the segment's epoch (a new epoch always
 * opens a new segment), so the epoch of any retained LSN is known from the
 * segment list. Two logs that hold the same LSN in the same epoch hold the
 * same frames up to it (one primary per epoch, as in Raft). The standby
 * resumes when the primary holds its last frame in the same epoch and every
 * frame after it, or holds every frame after it and its epoch history puts
 * that last frame (compacted away) in the same epoch. Otherwise the fork point is the last LSN at
 * which both logs have the same epoch: a standby that can cut (its Hello says so) moves its frames
 * after it aside and the stream goes on from there, when the primary still holds every frame after
 * it (Kafka's leader-epoch truncation, PostgreSQL's pg_rewind). Anything else is a RESYNC, which is
 * always safe. */
#ifndef BQ_REPL_HANDSHAKE_H
#define BQ_REPL_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/repl.pb-c.h"

#define BQ_REPL_VERSION 1u

typedef struct bq_hs_segment {
    uint64_t first_lsn; /* its first frame */
    uint64_t epoch;     /* of every frame in it */
} bq_hs_segment_t;

typedef struct bq_hs_primary {
    const char *cluster_id;
    const char *node_id;         /* the primary's own */
    uint64_t epoch;              /* its current epoch */
    uint64_t last_lsn;           /* its last frame (0 with none) */
    const bq_hs_segment_t *segs; /* retained segments, oldest first (nsegs >= 1) */
    size_t nsegs;
    uint64_t before_epoch;    /* the epoch of frame segs[0].first_lsn - 1, no longer
                                 retained (compacted), as the primary's epoch history
                                 records it; 0: unknown or none */
    const char *const *peers; /* node ids allowed to follow (the other peers) */
    const bool *witness;      /* per peer: declared a witness (NULL: none is) */
    size_t npeers;
    const char *tls_name; /* the name the standby's certificate matched;
                             NULL in plaintext */
} bq_hs_primary_t;

typedef enum bq_hs_action {
    BQ_HS_REFUSE = 0,
    BQ_HS_RESUME,
    BQ_HS_RESYNC,
    BQ_HS_CUT, /* the standby cuts its log after cut_after; the stream starts after it */
} bq_hs_action_t;

typedef struct bq_hs_decision {
    bq_hs_action_t action;
    Bq__Repl__RefuseReason reason; /* for REFUSE */
    const char *detail;            /* for REFUSE: a static one-line explanation */
    uint64_t start_lsn;            /* the first frame to send */
    size_t seg;                    /* index in segs of the segment holding start_lsn
                                      (for RESUME at last_lsn + 1: the last one) */
    uint64_t cut_after;            /* for CUT: the fork point (start_lsn - 1) */
} bq_hs_decision_t;

/* The most epochs of a standby's Hello that are read (its newest). */
#define BQ_HS_MAX_EPOCHS 64

/* The identity rules alone: true (and *out a refusal) when hello h has a
 * version other than BQ_REPL_VERSION, another cluster id, a node id that is
 * empty, our own, not a peer or not the certificate's name, or claims the
 * role (witness or standby) our flags do not give that peer. Nothing a
 * hello says (its epochs) may be believed before these pass. */
bool bq_hs_identity_refused(const bq_hs_primary_t *p, const Bq__Repl__Hello *h,
                            bq_hs_decision_t *out);

/* Decides what to do with hello h (borrowed) on primary p. Refusals: the
 * identity rules, or a standby that saw an epoch above ours (we are a
 * stale primary). */
void bq_hs_decide(const bq_hs_primary_t *p, const Bq__Repl__Hello *h, bq_hs_decision_t *out);

/* The epoch of frame lsn on p, or -1 when lsn is 0, beyond last_lsn or
 * before the oldest retained segment. */
int64_t bq_hs_epoch_of(const bq_hs_primary_t *p, uint64_t lsn);

/* The fork point of hello h's log with p's: the last LSN (<= its last_lsn
 * and p's) that both logs hold in the same epoch, as far as p's retained
 * segments and h's epochs tell; -1 when none is known. */
int64_t bq_hs_fork(const bq_hs_primary_t *p, const Bq__Repl__Hello *h);

#endif
