/* Elections on a node (docs/failover.md): the pure rules of
 * replication/election.h driven by the loop's clock, their durable part in
 * DIR/election (node/cluster/election_store.h), vote requests sent through
 * replication/canvass.h and answered through the feeder's hooks.
 *
 * A won election or a step-down goes to the hooks, which change the node's
 * role in place (node/cluster/role.c): no restart, no replay. At a start,
 * the plan decides the role from the flags and DIR/election. */
#ifndef BQ_NODE_FAILOVER_H
#define BQ_NODE_FAILOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/base/flags.h"
#include "proto/repl.pb-c.h"
#include "replication/election.h"
#include "replication/repl.h"

/* How this start goes, decided from the flags and DIR/election before the
 * binlog opens. */
typedef struct bq_failover_plan {
    bq_role_t role;     /* what the node starts as */
    uint64_t min_epoch; /* primary: the epoch it opens is at least this */
    char why[160];      /* a start-up line for the log */
} bq_failover_plan_t;

/* Decides *plan for flags f (a node in cluster mode). -1 when DIR/election
 * cannot be read (logged: a damaged file stops the start). */
int bq_failover_plan(const bq_flags_t *f, bq_failover_plan_t *plan);

typedef struct bq_failover bq_failover_t;

typedef struct bq_failover_hooks {
    /* The node's log position (last epoch, last LSN). */
    bq_el_pos_t (*mine)(void *arg);
    /* It won epoch: become its primary (in place). */
    void (*lead)(void *arg);
    /* It was primary and must not be any more (a higher epoch): become a
     * standby (in place). */
    void (*step_down)(void *arg);
    /* Whether it may acknowledge writes changed (fencing). */
    void (*fence)(void *arg);
    void *arg;
} bq_failover_hooks_t;

/* Starts elections for a node started by plan whose binlog opened
 * log_epoch (a primary's new epoch), with repl (the other nodes) and f
 * borrowed. Voter i is repl->peers[i]; the node itself is voter
 * repl->npeers. 0 and *out (free it in any case), or -1 (logged). */
int bq_failover_start(bq_failover_t **out, uv_loop_t *loop, const bq_flags_t *f,
                      const bq_failover_plan_t *plan, uint64_t log_epoch,
                      const bq_repl_config_t *repl, const bq_failover_hooks_t *hooks);

/* Records that this node's log now holds epoch from first_lsn, opened by
 * node (a primary at open, a standby when the stream enters an epoch). */
void bq_failover_epoch_started(bq_failover_t *fo, uint64_t epoch, uint64_t first_lsn,
                               const char *node);

/* The epoch of frame lsn of this node's log by its epoch history (frames
 * compacted away too), 0 when unknown; lsn must be in the log. */
uint64_t bq_failover_epoch_of(const bq_failover_t *fo, uint64_t lsn);

/* Feeder hooks: a vote request; an ack of standby peer; a higher epoch. */
void bq_failover_vote(bq_failover_t *fo, size_t peer, const Bq__Repl__VoteRequest *req,
                      Bq__Repl__VoteReply *reply);
void bq_failover_ack(bq_failover_t *fo, size_t peer, uint64_t epoch, int64_t echo);
void bq_failover_higher_epoch(bq_failover_t *fo, uint64_t epoch);

/* Receiver hook: the primary peer of epoch was heard (hb may be NULL).
 * false: its epoch is stale. */
bool bq_failover_heard(bq_failover_t *fo, size_t peer, uint64_t epoch,
                       const Bq__Repl__Heartbeat *hb);

/* The floor this node (a witness) has stored for epoch, 0 when none: it
 * never votes for a log below (epoch, that LSN). */
uint64_t bq_failover_kept_floor(const bq_failover_t *fo, uint64_t epoch);

/* An operator or a switchover asks this node to stand now. force: become
 * primary without votes (may lose acknowledged writes; logged as such).
 * 0 when started (the outcome follows: primary in place, or nothing),
 * -1 with a reason in why. */
int bq_failover_promote(bq_failover_t *fo, bool force, char *why, size_t whylen);

/* The primary peer of epoch hands over to us (switchover): stand now when
 * it is the primary we follow. 0, or -1 with the reason in why. */
int bq_failover_handover(bq_failover_t *fo, size_t peer, uint64_t epoch, char *why, size_t whylen);

/* The primary asked a standby to stand (switchover): it will vote for it. */
void bq_failover_hand_over(bq_failover_t *fo);

/* Whether the node may acknowledge writes now (always true in manual mode
 * on a primary). */
bool bq_failover_may_ack(const bq_failover_t *fo);

/* For the status: the election state (borrowed). */
const bq_election_t *bq_failover_election(const bq_failover_t *fo);

/* Closes timers and links (shutdown). */
void bq_failover_close(bq_failover_t *fo);

/* Frees fo after bq_failover_close and after the loop ran the close
 * callbacks. NULL is a no-op. */
void bq_failover_free(bq_failover_t *fo);

#endif
