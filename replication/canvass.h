/* The transport of one round of vote requests (replication/election.h): a
 * short-lived link (replication/link.h, the cluster's mutual TLS) to every
 * other voter, one VoteRequest each, one VoteReply back, then closed. A
 * voter that does not answer within the deadline counts as no answer. A new
 * round cancels the previous one: replies of an old round are never
 * reported. */
#ifndef BQ_REPL_CANVASS_H
#define BQ_REPL_CANVASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proto/repl.pb-c.h"
#include "replication/repl.h"

typedef struct bq_canvass bq_canvass_t;

/* A voter answered: peer is its index in cfg->peers; reply borrowed for
 * the call. */
typedef void (*bq_canvass_reply_cb)(void *arg, size_t peer, const Bq__Repl__VoteReply *reply);

/* Creates the canvasser for cfg (copied; its strings and TLS contexts
 * borrowed). Returns new (free with bq_canvass_free) or NULL. */
bq_canvass_t *bq_canvass_new(uv_loop_t *loop, const bq_repl_config_t *cfg, bq_canvass_reply_cb cb,
                             void *arg);

/* Starts a round: sends req (copied; its cluster_id, node_id and version
 * are filled from the config) to every peer, each with deadline_ms to
 * connect and answer. Cancels the round in progress. 0, or -1 when out of
 * memory. */
int bq_canvass_round(bq_canvass_t *c, const Bq__Repl__VoteRequest *req, uint64_t deadline_ms);

/* Cancels the round in progress (its links are closed; nothing more is
 * reported). */
void bq_canvass_cancel(bq_canvass_t *c);

/* Cancels, then frees c once the loop has closed its links (call before
 * the loop's last run). NULL is a no-op. */
void bq_canvass_free(bq_canvass_t *c);

#endif
