/* Before a primary in manual failover mode opens its binlog, it asks its
 * peers which primary they know: one PreVote request each (which changes
 * nothing on their side) through replication/canvass.h, over the cluster's
 * mutual TLS, on a private libuv loop. A peer that is, or follows, another
 * primary means a standby was promoted while this node was away, and
 * starting as primary would make two (docs/failover.md, "Manual
 * failover"). */
#ifndef BQ_NODE_START_PROBE_H
#define BQ_NODE_START_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "node/base/flags.h"

typedef struct bq_start_probe {
    size_t asked;     /* the peers */
    size_t answered;  /* those that answered in time */
    char primary[64]; /* a primary other than this node that a peer knows; "" when none */
    char via[64];     /* the peer that named it */
} bq_start_probe_t;

/* Asks f's peers (f borrowed) which primary they know, as a candidate for
 * epoch whose log ends in last_epoch; waits until every peer answered, one
 * named another primary, or timeout_ms passed. 0 and *out, or -1 when the
 * probe could not run (TLS set-up, out of memory; logged). */
int bq_start_probe(const bq_flags_t *f, uint64_t epoch, uint64_t last_epoch, uint64_t timeout_ms,
                   bq_start_probe_t *out);

#endif
