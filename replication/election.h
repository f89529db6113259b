/* Who is primary: Raft's leader election (Ongaro and Ousterhout, sections
 * 5.2 and 5.4; PreVote and CheckQuorum from Ongaro's thesis, 9.6) applied to
 * the binlog stream, with epoch = term, a node's log position (last epoch,
 * last LSN) = Raft's (last term, last index), primary = leader, standby or
 * witness = follower. Pure: time is passed in (ns, monotonic), the caller
 * sends the messages, stores what must be durable and applies the effects.
 *
 * The rules, each one a line of the model in tests/model/election.pml:
 * - A voter grants one vote per epoch (epoch and vote are durable before the
 *   reply leaves; none in the epoch of a primary it follows, which may have
 *   taken office without votes), and only to a candidate whose log position
 *   is at least its own and at least its floor (the highest commit position
 *   a primary reported to it while sync was in force; a witness, which has
 *   no log, compares with its floor alone). So a winner holds every record
 *   that a majority, or the sync standbys, acknowledged.
 * - Seeing a higher epoch in any message makes a node a follower of that
 *   epoch with no vote given; messages of a lower epoch are stale. An epoch
 *   is believed only up to the ceiling (bq_el_epoch_ceiling: 2^32, plus a
 *   thousand for every second since 2023-11-14 by the wall clock, never
 *   above BQ_EPOCH_MAX): a message naming a higher one changes nothing and
 *   is refused, and no node stands above it. Honest epochs grow by one per
 *   election, far below it; a peer that pushes epochs as high as it allows
 *   leaves room for elections, which the ceiling gains a thousand times a
 *   second, and needs 10^8 years to bring the cluster near 2^62. (A bound
 *   on the step one message may make instead would let a peer push one
 *   node far ahead of the others, which could then never adopt its epoch:
 *   tests/fuzz/fuzz_election.c found that.)
 * - PreVote: a follower that heard nothing from a primary for the timeout
 *   first asks whether it could win (epoch + 1, nothing stored); a voter
 *   says yes only when the candidate's log would get its vote and it has not
 *   heard from a primary itself within the timeout. Only a majority of yes
 *   starts the real election, so a node cut off from the others cannot
 *   disturb a working primary by inflating epochs. With automatic on, a
 *   real vote too is given only a full timeout after the voter last heard
 *   from a primary, gave a vote or started (it may have acknowledged a
 *   primary just before it stopped); the epoch is adopted at once.
 * - Timeouts are randomized in [timeout, 2 * timeout) so that candidates
 *   rarely collide; a split vote stands again after a new random timeout.
 * - CheckQuorum (fencing): a primary counts a voter as in contact while the
 *   voter acknowledged, within the timeout, a message the primary sent; the
 *   time that counts is when the primary sent the echoed message, so a link
 *   that carries only acknowledgements (one-way loss) does not keep it in
 *   contact. Without a majority (itself included) in contact it is fenced:
 *   it may not acknowledge writes. A voter (the candidate itself included,
 *   unless an operator's bq_el_campaign) votes only a full timeout after the
 *   last message it got from the primary, which the primary sent no later,
 *   so the old primary is fenced before any new one can win. A new primary
 *   counts the voters that elected it as in contact from when it sent its
 *   request (their votes echo it); bq_el_assume counts every voter as in
 *   contact from then.
 * - Manual failover (automatic off) never stands on its own: an operator
 *   starts an election (bq_el_campaign) or, knowing what may be lost, makes
 *   a node primary without votes (bq_el_assume). The primary is not fenced.
 */
#ifndef BQ_REPL_ELECTION_H
#define BQ_REPL_ELECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BQ_EL_MAX_VOTERS 8
/* The epoch ceiling: BASE always, plus RATE a second of wall-clock time
 * after EPOCH0 (Unix seconds). */
#define BQ_EL_CEILING_BASE (UINT64_C(1) << 32)
#define BQ_EL_CEILING_RATE UINT64_C(1000)
#define BQ_EL_CEILING_EPOCH0 INT64_C(1700000000)

/* A log position, compared epoch first, then LSN. */
typedef struct bq_el_pos {
    uint64_t epoch;
    uint64_t lsn;
} bq_el_pos_t;

typedef enum bq_el_role {
    BQ_EL_FOLLOWER = 0, /* standby or witness */
    BQ_EL_PRECANDIDATE, /* asking whether it could win; epoch unchanged */
    BQ_EL_CANDIDATE,    /* stands in its epoch, having voted for itself */
    BQ_EL_PRIMARY,
} bq_el_role_t;

typedef struct bq_el_config {
    size_t nvoters;     /* voters, itself included: 1..BQ_EL_MAX_VOTERS */
    size_t self;        /* its index among them */
    bool can_lead;      /* false for a witness: votes, never stands */
    bool automatic;     /* --failover=auto: stands on its own, fences */
    int64_t timeout_ns; /* --failover-timeout, > 0 */
} bq_el_config_t;

typedef struct bq_election {
    bq_el_config_t cfg;
    bq_el_role_t role;
    uint64_t epoch;   /* current epoch (durable) */
    int voted_for;    /* voter given the vote in epoch, or -1 (durable) */
    int primary;      /* the primary of epoch when known, or -1 */
    bool fenced;      /* as last computed by bq_el_tick or bq_el_on_ack */
    int64_t heard_at; /* last message from a primary, vote given, or start */
    int64_t deadline; /* follower, (pre)candidate with automatic: when it stands */
    uint32_t granted; /* voters (bit per index) that granted the current request */
    int64_t contact_at[BQ_EL_MAX_VOTERS]; /* primary: send time of the last echoed message */
    bq_el_pos_t floor;                    /* never vote for a candidate below this */
    uint64_t ceiling;                     /* no epoch above this is believed or stood in (the
                                             caller keeps it up to date: bq_el_set_ceiling) */
    uint64_t rng;                         /* xorshift64 state, never 0 */
} bq_election_t;

/* A vote request. prevote: asks whether the voter would vote in epoch
 * (= the candidate's epoch + 1), which changes nothing on either side. */
typedef struct bq_el_request {
    uint64_t epoch;
    bool prevote;
    bq_el_pos_t last; /* the candidate's log position */
} bq_el_request_t;

typedef struct bq_el_reply {
    uint64_t epoch; /* the request's epoch when granted, else the voter's epoch */
    bool prevote;   /* answers a prevote */
    bool granted;
} bq_el_reply_t;

/* What the caller must do after a call, in this order (bit set). */
enum {
    BQ_EL_PERSIST = 1u << 0,     /* epoch or voted_for changed: store both durably first */
    BQ_EL_REQUEST = 1u << 1,     /* send bq_el_current_request to every other voter */
    BQ_EL_LEAD = 1u << 2,        /* became primary of epoch: open it in the log, feed */
    BQ_EL_STEP_DOWN = 1u << 3,   /* was primary or candidate, now a follower of epoch */
    BQ_EL_FENCE = 1u << 4,       /* fenced changed: see e->fenced */
    BQ_EL_NEW_PRIMARY = 1u << 5, /* primary changed: see e->primary (may be -1) */
};

/* -1, 0 or 1 as a is below, equal to or above b. */
int bq_el_pos_cmp(bq_el_pos_t a, bq_el_pos_t b);

/* The epoch ceiling at wall-clock time wall_s (Unix seconds). */
uint64_t bq_el_epoch_ceiling(int64_t wall_s);

/* Sets the ceiling (from bq_el_epoch_ceiling of the wall clock, before each
 * call that may see an epoch); it never goes down. */
void bq_el_set_ceiling(bq_election_t *e, uint64_t ceiling);

/* Whether epoch may be believed from a message: at most the ceiling. */
bool bq_el_epoch_plausible(const bq_election_t *e, uint64_t epoch);

/* Starts e as a follower of the stored epoch and vote (-1: none), with no
 * primary known, as if one had been heard at now, and, when automatic and
 * can_lead, a random deadline from now; seed (any value) makes the
 * timeouts reproducible. */
void bq_el_init(bq_election_t *e, const bq_el_config_t *cfg, uint64_t epoch, int voted_for,
                uint64_t seed, int64_t now);

/* Time passes: a follower or (pre)candidate past its deadline stands
 * (PreVote first), a primary recomputes whether it is fenced. mine is the
 * node's own log position. Returns effects. */
unsigned bq_el_tick(bq_election_t *e, int64_t now, bq_el_pos_t mine);

/* The request the node is making now (valid after BQ_EL_REQUEST). */
bq_el_request_t bq_el_current_request(const bq_election_t *e, bq_el_pos_t mine);

/* Voter `from` asks for a vote; fills *reply and returns effects (a higher
 * epoch in a real request is adopted, and a primary steps down). Refused
 * because the candidate's log is behind ours, with no primary heard from,
 * a node that may stand moves its deadline to now (bq_el_next_deadline). */
unsigned bq_el_on_request(bq_election_t *e, int64_t now, size_t from, const bq_el_request_t *req,
                          bq_el_pos_t mine, bq_el_reply_t *reply);

/* Voter `from` answered our request; returns effects (a majority of prevotes
 * starts the election, a majority of votes makes the node primary). */
unsigned bq_el_on_reply(bq_election_t *e, int64_t now, size_t from, const bq_el_reply_t *reply,
                        bq_el_pos_t mine);

/* A follower got a message (hello reply, frames, heartbeat) from `from`,
 * primary of epoch. Returns effects; false in *accept when epoch is stale
 * (below ours) or not plausible: drop that connection. */
unsigned bq_el_on_primary(bq_election_t *e, int64_t now, size_t from, uint64_t epoch, bool *accept);

/* The primary got from voter `from`, in epoch, an acknowledgement echoing a
 * message the primary sent at sent_at (its own clock). Returns effects (a
 * higher epoch makes it step down; FENCE when fenced changes). */
unsigned bq_el_on_ack(bq_election_t *e, int64_t now, size_t from, uint64_t epoch, int64_t sent_at);

/* A message told of epoch (a standby's Hello, say): a higher one is
 * adopted, and a primary or candidate steps down. Returns effects. */
unsigned bq_el_on_epoch(bq_election_t *e, int64_t now, uint64_t epoch);

/* Raises the floor to pos (from a primary's heartbeat while sync was in
 * force); never lowers it. */
void bq_el_raise_floor(bq_election_t *e, bq_el_pos_t pos);

/* An operator asks this node to stand now, without PreVote: it becomes a
 * candidate of epoch + 1. Returns effects, 0 when it cannot lead, is the
 * primary already, or its epoch is at the ceiling. */
unsigned bq_el_campaign(bq_election_t *e, int64_t now);

/* An operator makes this node primary of epoch + 1 without votes (forced, or
 * the only voter). Returns effects, 0 when it cannot lead, is the primary
 * already, or its epoch is at the ceiling. */
unsigned bq_el_assume(bq_election_t *e, int64_t now);

/* The primary asked a standby to stand (switchover) and acknowledges
 * nothing more: its own recent office no longer holds its vote back. */
void bq_el_hand_over(bq_election_t *e);

/* Whether the node may acknowledge writes at now: it is primary and, when
 * automatic, a majority was in contact within the timeout (checked at now,
 * not at the last tick, so a process that was paused cannot ack). */
bool bq_el_may_ack(const bq_election_t *e, int64_t now);

/* When the next time-driven change can happen (the deadline, or the moment a
 * primary would be fenced; may be past: tick at once), or INT64_MAX. */
int64_t bq_el_next_deadline(const bq_election_t *e);

/* The role's name: "standby", "precandidate", "candidate", "primary" (a
 * follower that cannot lead is a "witness"). */
const char *bq_el_role_name(const bq_election_t *e);

#endif
