/* Fuzz target: the election rules (replication/election.c) and the Hello's
 * identity rules (replication/handshake.c) from the point of view of an
 * attacker that holds one node's certificate. Three voters with automatic
 * failover: nodes 0 and 1 are honest, node 2 is the attacker. Each input
 * is a sequence of what the attacker can make a node receive on its
 * replication port (the inbound surface: a Hello whose epochs a node adopts
 * once its identity passes, vote requests with any epoch and log position,
 * replies to the honest nodes' requests, acknowledgements echoing any
 * time) interleaved with time passing and the honest nodes' own protocol
 * (ticks, their requests and replies delivered between them, heartbeats
 * and acknowledgements between a primary and its follower).
 *
 * Invariants, whatever the input:
 *   - no epoch ever exceeds the node's ceiling (the two nodes' wall clocks
 *     a second apart) nor BQ_EPOCH_MAX, and no epoch decreases;
 *   - once the attacker falls silent (node 2 dead), the honest pair elects
 *     a primary that may acknowledge writes within 40 timeouts;
 *   - a Hello of another cluster id, or naming a node that is not its
 *     certificate's, is refused by the identity rules (whatever its
 *     epochs), so its epochs are never believed.
 * The attacker cannot send heartbeats, frames or floors as a primary: the
 * standbys dial the primary's own address, which the attacker does not
 * hold (docs/operations.md, threat model). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "protocol/frame.h"
#include "replication/election.h"
#include "replication/handshake.h"

#define T 1000000 /* the failover timeout of the simulation, ns */
#define ATTACKER 2

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader_t;

static uint64_t take(reader_t *r, size_t bytes)
{
    uint64_t v = 0;
    for (size_t i = 0; i < bytes && r->n > 0; i++, r->p++, r->n--)
        v = v << 8 | *r->p;
    return v;
}

/* An epoch from the input: small steps, near the ceiling, or anything. */
static uint64_t an_epoch(reader_t *r, uint64_t ours, uint64_t ceiling)
{
    switch (take(r, 1) % 4) {
    case 0:
        return ours + take(r, 1) % 4;
    case 1:
        return ceiling - 2 + take(r, 1) % 4;
    case 2:
        return UINT64_MAX - take(r, 1) % 4;
    default:
        return take(r, 8);
    }
}

typedef struct world {
    bq_election_t n[2];
    int64_t wall_s;     /* the wall clock, for the epoch ceiling */
    bq_el_pos_t log[2]; /* each honest node's log position */
    int64_t now;
    uint64_t epoch_seen[2];
} world_t;

static void check_epochs(world_t *w)
{
    for (int i = 0; i < 2; i++) {
        BQF_CHECK(w->n[i].epoch <= BQ_EPOCH_MAX && w->n[i].epoch <= w->n[i].ceiling,
                  "node %d epoch %llu above its ceiling %llu", i, (unsigned long long)w->n[i].epoch,
                  (unsigned long long)w->n[i].ceiling);
        BQF_CHECK(w->n[i].epoch >= w->epoch_seen[i], "node %d epoch went back", i);
        w->epoch_seen[i] = w->n[i].epoch;
    }
}

/* Delivers node i's current request to the other honest node and its
 * reply back (the honest protocol, instantaneous). */
static void honest_request(world_t *w, int i)
{
    int o = 1 - i;
    /* A granted prevote starts the real election: its request goes too. */
    for (unsigned eff = BQ_EL_REQUEST, k = 0; (eff & BQ_EL_REQUEST) && k < 2; k++) {
        bq_el_request_t req = bq_el_current_request(&w->n[i], w->log[i]);
        bq_el_reply_t rep;
        bq_el_on_request(&w->n[o], w->now, (size_t)i, &req, w->log[o], &rep);
        eff = bq_el_on_reply(&w->n[i], w->now, (size_t)o, &rep, w->log[i]);
    }
}

/* A primary heartbeats its follower, which acknowledges (CheckQuorum). A
 * follower of a higher epoch drops the stale stream, and its Hello on the
 * next connection names its epoch (replication/feeder.c: the primary then
 * steps down). */
static void honest_heartbeat(world_t *w, int p)
{
    int o = 1 - p;
    bool accept;
    bq_el_on_primary(&w->n[o], w->now, (size_t)p, w->n[p].epoch, &accept);
    if (accept)
        bq_el_on_ack(&w->n[p], w->now, (size_t)o, w->n[o].epoch, w->now);
    else
        bq_el_on_epoch(&w->n[p], w->now, w->n[o].epoch);
}

/* Time passes by dt for both honest nodes, with their protocol; each one's
 * wall clock may be a second off the other's. */
static void honest_step(world_t *w, int64_t dt)
{
    w->now += dt;
    w->wall_s += dt > 0 ? 1 : 0;
    for (int i = 0; i < 2; i++)
        bq_el_set_ceiling(&w->n[i], bq_el_epoch_ceiling(w->wall_s - i));
    for (int i = 0; i < 2; i++) {
        unsigned eff = bq_el_tick(&w->n[i], w->now, w->log[i]);
        if (eff & BQ_EL_REQUEST)
            honest_request(w, i);
        if (w->n[i].role == BQ_EL_PRIMARY)
            honest_heartbeat(w, i);
    }
    check_epochs(w);
}

/* One thing the attacker does to honest node i. */
static void attack(world_t *w, reader_t *r, int i)
{
    bq_election_t *e = &w->n[i];
    uint64_t c = e->ceiling;
    switch (take(r, 1) % 4) {
    case 0: /* a Hello whose identity passed: its epochs are adopted if plausible */
        bq_el_on_epoch(e, w->now, an_epoch(r, e->epoch, c));
        break;
    case 1: { /* a vote request, prevote or real, with any log position */
        bq_el_request_t req = {.epoch = an_epoch(r, e->epoch, c), .prevote = take(r, 1) & 1};
        req.last.epoch = an_epoch(r, e->epoch, c);
        req.last.lsn = take(r, 8);
        bq_el_reply_t rep;
        bq_el_on_request(e, w->now, ATTACKER, &req, w->log[i], &rep);
        break;
    }
    case 2: { /* a reply to this node's request */
        bq_el_reply_t rep = {.epoch = an_epoch(r, e->epoch, c),
                             .prevote = take(r, 1) & 1,
                             .granted = take(r, 1) & 1};
        bq_el_on_reply(e, w->now, ATTACKER, &rep, w->log[i]);
        break;
    }
    default: /* an acknowledgement echoing any time */
        bq_el_on_ack(e, w->now, ATTACKER, an_epoch(r, e->epoch, c),
                     (int64_t)(take(r, 8) & INT64_MAX));
        break;
    }
    check_epochs(w);
}

/* The identity rules on a fuzzed Hello: another cluster, or a node id that
 * is not the certificate's, is refused whatever the epochs say. */
static void hello_identity(reader_t *r)
{
    static const char *const peers[] = {"n1", "n3"};
    bq_hs_primary_t p = {.cluster_id = "c",
                         .node_id = "n2",
                         .epoch = 5,
                         .peers = peers,
                         .npeers = 2,
                         .tls_name = "n3"};
    char cluster[4] = "c", node[4] = "n3";
    Bq__Repl__Hello h = BQ__REPL__HELLO__INIT;
    h.version = BQ_REPL_VERSION;
    h.epoch = take(r, 8);
    h.last_epoch = take(r, 8);
    h.last_lsn = take(r, 8);
    h.witness = take(r, 1) & 1;
    if (take(r, 1) & 1)
        cluster[0] = (char)('a' + take(r, 1) % 4);
    if (take(r, 1) & 1)
        node[1] = (char)('0' + take(r, 1) % 5);
    h.cluster_id = cluster;
    h.node_id = node;
    bq_hs_decision_t d;
    bool refused = bq_hs_identity_refused(&p, &h, &d);
    bool impostor = strcmp(cluster, "c") != 0 || strcmp(node, "n3") != 0 || h.witness;
    BQF_CHECK(refused == impostor, "identity: cluster %s node %s witness %d refused %d", cluster,
              node, h.witness, refused);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader_t r = {data, size};
    world_t w;
    memset(&w, 0, sizeof w);
    w.wall_s = BQ_EL_CEILING_EPOCH0 + (int64_t)take(&r, 4);
    bq_el_config_t cfg = {.nvoters = 3, .can_lead = true, .automatic = true, .timeout_ns = T};
    uint64_t start = take(&r, 2);
    for (int i = 0; i < 2; i++) {
        cfg.self = (size_t)i;
        bq_el_init(&w.n[i], &cfg, start, -1, 7 + (uint64_t)i, 0);
        bq_el_set_ceiling(&w.n[i], bq_el_epoch_ceiling(w.wall_s - i));
        w.log[i] = (bq_el_pos_t){.epoch = start, .lsn = 10 + (uint64_t)i};
        w.epoch_seen[i] = start;
    }
    while (r.n > 0) {
        switch (take(&r, 1) % 4) {
        case 0:
            honest_step(&w, (int64_t)(take(&r, 1) % 8) * T / 4);
            break;
        case 1:
            hello_identity(&r);
            break;
        default:
            attack(&w, &r, (int)(take(&r, 1) & 1));
            break;
        }
    }
    /* The attacker falls silent: the honest pair must elect a primary. */
    for (int k = 0; k < 40 * 10; k++) {
        honest_step(&w, T / 10);
        for (int i = 0; i < 2; i++)
            if (w.n[i].role == BQ_EL_PRIMARY && bq_el_may_ack(&w.n[i], w.now))
                return 0;
    }
    bqf_fail(__FILE__, __LINE__,
             "no primary 40 timeouts after the attacker stopped (epochs "
             "%llu, %llu; roles %d, %d)",
             (unsigned long long)w.n[0].epoch, (unsigned long long)w.n[1].epoch, w.n[0].role,
             w.n[1].role);
}
