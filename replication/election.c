/* Who is primary: the election rules of election.h as a state machine. Each
 * entry point takes the time it runs at and returns the effects the caller
 * must apply; nothing here sends, stores or reads a clock. An old primary
 * and a new one never both may acknowledge writes (the lease argument of
 * Ongaro's thesis, 6.4.1) because, in automatic mode, a voter gives a real
 * vote, like a prevote, only a timeout after it last heard from a primary,
 * gave a vote or started, and a new primary's contact with the voters that
 * elected it dates from when it sent the request their votes answer. */
#include "replication/election.h"

#include <string.h>

#include "protocol/frame.h"

#define NEVER INT64_MIN

int bq_el_pos_cmp(bq_el_pos_t a, bq_el_pos_t b)
{
    if (a.epoch != b.epoch)
        return a.epoch < b.epoch ? -1 : 1;
    if (a.lsn != b.lsn)
        return a.lsn < b.lsn ? -1 : 1;
    return 0;
}

uint64_t bq_el_epoch_ceiling(int64_t wall_s)
{
    uint64_t secs = wall_s > BQ_EL_CEILING_EPOCH0 ? (uint64_t)(wall_s - BQ_EL_CEILING_EPOCH0) : 0;
    uint64_t room = BQ_EPOCH_MAX - BQ_EL_CEILING_BASE;
    return BQ_EL_CEILING_BASE +
           (secs > room / BQ_EL_CEILING_RATE ? room : secs * BQ_EL_CEILING_RATE);
}

void bq_el_set_ceiling(bq_election_t *e, uint64_t ceiling)
{
    if (ceiling > BQ_EPOCH_MAX)
        ceiling = BQ_EPOCH_MAX;
    if (ceiling > e->ceiling)
        e->ceiling = ceiling;
}

bool bq_el_epoch_plausible(const bq_election_t *e, uint64_t epoch)
{
    return epoch <= e->ceiling;
}

static uint64_t next_rand(bq_election_t *e)
{
    uint64_t x = e->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    e->rng = x;
    return x;
}

static size_t majority(const bq_election_t *e)
{
    return e->cfg.nvoters / 2 + 1;
}

static uint32_t bit(size_t i)
{
    return (uint32_t)1 << i;
}

static size_t count_bits(uint32_t v)
{
    size_t n = 0;
    for (; v; v &= v - 1)
        n++;
    return n;
}

/* Whether the node stands on its own when its deadline passes. */
static bool stands(const bq_election_t *e)
{
    return e->cfg.automatic && e->cfg.can_lead;
}

/* Whether now is less than a timeout after since (NEVER: it is not). */
static bool within(const bq_election_t *e, int64_t since, int64_t now)
{
    return since != NEVER && now - since < e->cfg.timeout_ns;
}

/* A new random deadline in [now + timeout, now + 2 * timeout), or none. */
static void rearm(bq_election_t *e, int64_t now)
{
    uint64_t t = (uint64_t)e->cfg.timeout_ns;

    e->deadline = stands(e) ? now + (int64_t)t + (int64_t)(next_rand(e) % t) : INT64_MAX;
}

static unsigned set_fenced(bq_election_t *e, bool fenced)
{
    if (e->fenced == fenced)
        return 0;
    e->fenced = fenced;
    return BQ_EL_FENCE;
}

static unsigned set_primary(bq_election_t *e, int primary)
{
    if (e->primary == primary)
        return 0;
    e->primary = primary;
    return BQ_EL_NEW_PRIMARY;
}

/* Voters in contact at now, itself included. */
static size_t in_contact(const bq_election_t *e, int64_t now)
{
    size_t n = 1;
    for (size_t i = 0; i < e->cfg.nvoters; i++)
        if (i != e->cfg.self && within(e, e->contact_at[i], now))
            n++;
    return n;
}

static unsigned become_follower(bq_election_t *e, int64_t now)
{
    unsigned eff;

    if (e->role == BQ_EL_FOLLOWER)
        return 0;
    eff = BQ_EL_STEP_DOWN | set_fenced(e, false);
    e->role = BQ_EL_FOLLOWER;
    e->granted = 0;
    rearm(e, now);
    return eff;
}

/* Moves to a higher, plausible epoch with no vote given and no primary
 * known. */
static unsigned adopt(bq_election_t *e, uint64_t epoch, int64_t now)
{
    if (epoch <= e->epoch || !bq_el_epoch_plausible(e, epoch))
        return 0;
    e->epoch = epoch;
    e->voted_for = -1;
    return BQ_EL_PERSIST | set_primary(e, -1) | become_follower(e, now);
}

/* Whether a real request of `from` in epoch for last would get the vote, on
 * the epoch and log alone: a higher epoch, or ours with the vote free (no
 * primary known either) or already given to from; and a log at least ours
 * and at least the floor. */
static bool would_vote(const bq_election_t *e, size_t from, uint64_t epoch, bq_el_pos_t last,
                       bq_el_pos_t mine)
{
    if (epoch < e->epoch)
        return false;
    if (epoch == e->epoch && e->voted_for != (int)from && (e->voted_for != -1 || e->primary != -1))
        return false;
    return bq_el_pos_cmp(last, mine) >= 0 && bq_el_pos_cmp(last, e->floor) >= 0;
}

static unsigned lead(bq_election_t *e, int64_t now)
{
    unsigned eff = BQ_EL_LEAD | set_primary(e, (int)e->cfg.self) | set_fenced(e, false);

    /* The voters that elected it keep their contact (see bq_el_on_reply). */
    e->contact_at[e->cfg.self] = now;
    e->role = BQ_EL_PRIMARY;
    e->deadline = INT64_MAX;
    return eff;
}

/* Stands in epoch + 1, voting for itself; the request goes out at now. */
static unsigned start_election(bq_election_t *e, int64_t now)
{
    unsigned eff = BQ_EL_PERSIST | BQ_EL_REQUEST;

    if (e->epoch >= e->ceiling)
        return 0;
    e->epoch++;
    e->voted_for = (int)e->cfg.self;
    eff |= set_primary(e, -1);
    e->role = BQ_EL_CANDIDATE;
    e->granted = bit(e->cfg.self);
    /* contact_at[self]: when the request went out; a vote, answering it,
     * puts its voter in contact from then (bq_el_on_reply). */
    for (size_t i = 0; i < BQ_EL_MAX_VOTERS; i++)
        e->contact_at[i] = NEVER;
    e->contact_at[e->cfg.self] = now;
    rearm(e, now);
    if (count_bits(e->granted) >= majority(e))
        eff |= lead(e, now);
    return eff;
}

static unsigned start_prevote(bq_election_t *e, int64_t now)
{
    if (e->epoch >= e->ceiling) {
        rearm(e, now);
        return 0;
    }
    e->role = BQ_EL_PRECANDIDATE;
    e->granted = bit(e->cfg.self);
    rearm(e, now);
    if (count_bits(e->granted) >= majority(e))
        return start_election(e, now);
    return BQ_EL_REQUEST;
}

void bq_el_init(bq_election_t *e, const bq_el_config_t *cfg, uint64_t epoch, int voted_for,
                uint64_t seed, int64_t now)
{
    memset(e, 0, sizeof(*e));
    e->cfg = *cfg;
    if (e->cfg.nvoters > BQ_EL_MAX_VOTERS)
        e->cfg.nvoters = BQ_EL_MAX_VOTERS;
    e->role = BQ_EL_FOLLOWER;
    e->epoch = epoch;
    e->ceiling = BQ_EL_CEILING_BASE;
    e->voted_for = voted_for >= 0 && (size_t)voted_for < e->cfg.nvoters ? voted_for : -1;
    e->primary = -1;
    /* It may have acknowledged a primary just before it stopped. */
    e->heard_at = now;
    for (size_t i = 0; i < BQ_EL_MAX_VOTERS; i++)
        e->contact_at[i] = NEVER;
    e->rng = seed ^ 0x9e3779b97f4a7c15u;
    if (e->rng == 0)
        e->rng = 0x9e3779b97f4a7c15u;
    rearm(e, now);
}

unsigned bq_el_tick(bq_election_t *e, int64_t now, bq_el_pos_t mine)
{
    if (e->role == BQ_EL_PRIMARY)
        return e->cfg.automatic ? set_fenced(e, !bq_el_may_ack(e, now)) : 0;
    if (!stands(e) || now < e->deadline)
        return 0;
    if (bq_el_pos_cmp(mine, e->floor) < 0) {
        /* It would not vote for itself: records it lacks were committed. */
        rearm(e, now);
        return 0;
    }
    /* A candidate that did not win asks again with PreVote first (as etcd
     * does): one cut off from the others does not keep raising its epoch. */
    return start_prevote(e, now);
}

bq_el_request_t bq_el_current_request(const bq_election_t *e, bq_el_pos_t mine)
{
    bq_el_request_t req;

    req.prevote = e->role == BQ_EL_PRECANDIDATE;
    req.epoch = req.prevote ? e->epoch + 1 : e->epoch;
    req.last = mine;
    return req;
}

/* A real request: adopts a higher epoch, then gives the vote if it may. */
static unsigned vote(bq_election_t *e, int64_t now, size_t from, const bq_el_request_t *req,
                     bq_el_pos_t mine, bool *granted)
{
    unsigned eff = adopt(e, req->epoch, now);

    *granted = req->epoch == e->epoch && would_vote(e, from, req->epoch, req->last, mine) &&
               !(e->cfg.automatic && within(e, e->heard_at, now));
    if (!*granted)
        return eff;
    if (e->voted_for != (int)from) {
        e->voted_for = (int)from;
        eff |= BQ_EL_PERSIST;
    }
    e->heard_at = now; /* the candidate may win and take office at once */
    rearm(e, now);
    return eff;
}

/* A request refused because the candidate's log is behind ours: when no
 * primary is heard from, we hold what it lacks and may stand, so we stand
 * at once instead of at our random deadline (a second or two later, after
 * the candidate's own deadline let it down); asking is harmless, a PreVote
 * changes nothing. A candidacy of ours in progress is left alone. */
static void stand_sooner(bq_election_t *e, int64_t now, const bq_el_request_t *req,
                         bq_el_pos_t mine)
{
    if (!stands(e) || within(e, e->heard_at, now) || bq_el_pos_cmp(req->last, mine) >= 0 ||
        bq_el_pos_cmp(mine, e->floor) < 0 ||
        (e->role != BQ_EL_FOLLOWER && e->role != BQ_EL_PRECANDIDATE))
        return;
    if (e->deadline > now)
        e->deadline = now;
}

unsigned bq_el_on_request(bq_election_t *e, int64_t now, size_t from, const bq_el_request_t *req,
                          bq_el_pos_t mine, bq_el_reply_t *reply)
{
    unsigned eff = 0;
    bool ok = false;

    if (from < e->cfg.nvoters && from != e->cfg.self && bq_el_epoch_plausible(e, req->epoch)) {
        if (req->prevote)
            ok = would_vote(e, from, req->epoch, req->last, mine) && !within(e, e->heard_at, now) &&
                 !bq_el_may_ack(e, now);
        else
            eff = vote(e, now, from, req, mine, &ok);
        if (!ok)
            stand_sooner(e, now, req, mine);
    }
    reply->epoch = ok ? req->epoch : e->epoch;
    reply->prevote = req->prevote;
    reply->granted = ok;
    return eff;
}

unsigned bq_el_on_reply(bq_election_t *e, int64_t now, size_t from, const bq_el_reply_t *reply,
                        bq_el_pos_t mine)
{
    (void)mine;
    if (from >= e->cfg.nvoters || from == e->cfg.self)
        return 0;
    /* A refusal carries the voter's own epoch (a granted prevote carries
     * the epoch asked about, which nobody is in yet). */
    if ((!reply->prevote || !reply->granted) && reply->epoch > e->epoch)
        return adopt(e, reply->epoch, now);
    if (!reply->granted)
        return 0;
    if (reply->prevote && e->role == BQ_EL_PRECANDIDATE && reply->epoch == e->epoch + 1) {
        e->granted |= bit(from);
        if (count_bits(e->granted) >= majority(e))
            return start_election(e, now);
    } else if (!reply->prevote && e->role == BQ_EL_CANDIDATE && reply->epoch == e->epoch) {
        e->granted |= bit(from);
        e->contact_at[from] = e->contact_at[e->cfg.self];
        if (count_bits(e->granted) >= majority(e))
            return lead(e, now);
    }
    return 0;
}

unsigned bq_el_on_epoch(bq_election_t *e, int64_t now, uint64_t epoch)
{
    return adopt(e, epoch, now);
}

unsigned bq_el_on_primary(bq_election_t *e, int64_t now, size_t from, uint64_t epoch, bool *accept)
{
    unsigned eff;

    *accept = from < e->cfg.nvoters && from != e->cfg.self && epoch >= e->epoch &&
              bq_el_epoch_plausible(e, epoch);
    if (!*accept)
        return 0;
    eff = adopt(e, epoch, now);
    eff |= become_follower(e, now);
    eff |= set_primary(e, (int)from);
    e->heard_at = now;
    rearm(e, now);
    return eff;
}

unsigned bq_el_on_ack(bq_election_t *e, int64_t now, size_t from, uint64_t epoch, int64_t sent_at)
{
    if (from >= e->cfg.nvoters || from == e->cfg.self)
        return 0;
    if (epoch > e->epoch)
        return adopt(e, epoch, now);
    if (epoch < e->epoch || e->role != BQ_EL_PRIMARY)
        return 0;
    /* An echo from the future is garbage: it must not extend the lease. */
    if (sent_at > now)
        sent_at = now;
    if (sent_at > e->contact_at[from])
        e->contact_at[from] = sent_at;
    return e->cfg.automatic ? set_fenced(e, !bq_el_may_ack(e, now)) : 0;
}

void bq_el_raise_floor(bq_election_t *e, bq_el_pos_t pos)
{
    if (bq_el_pos_cmp(pos, e->floor) > 0)
        e->floor = pos;
}

unsigned bq_el_campaign(bq_election_t *e, int64_t now)
{
    if (!e->cfg.can_lead || e->role == BQ_EL_PRIMARY)
        return 0;
    return start_election(e, now);
}

unsigned bq_el_assume(bq_election_t *e, int64_t now)
{
    unsigned eff;

    if (!e->cfg.can_lead || e->role == BQ_EL_PRIMARY || e->epoch >= e->ceiling)
        return 0;
    eff = start_election(e, now) & ~(unsigned)BQ_EL_REQUEST;
    if (e->role == BQ_EL_PRIMARY)
        return eff;
    /* Forced: every voter starts in contact now, as if it had voted. */
    for (size_t i = 0; i < e->cfg.nvoters; i++)
        e->contact_at[i] = now;
    return eff | lead(e, now);
}

void bq_el_hand_over(bq_election_t *e)
{
    e->heard_at = NEVER;
}

bool bq_el_may_ack(const bq_election_t *e, int64_t now)
{
    if (e->role != BQ_EL_PRIMARY)
        return false;
    return !e->cfg.automatic || in_contact(e, now) >= majority(e);
}

/* The primary's quorum lapses a timeout after the contact of the voter
 * that is the majority-th freshest (itself, always fresh, first). */
static int64_t quorum_end(const bq_election_t *e)
{
    int64_t v[BQ_EL_MAX_VOTERS];
    size_t n = 0, k = majority(e) - 1;

    if (k == 0)
        return INT64_MAX;
    for (size_t i = 0; i < e->cfg.nvoters; i++)
        if (i != e->cfg.self)
            v[n++] = e->contact_at[i];
    /* Selection sort, descending, of the first k places: n < 8. */
    for (size_t i = 0; i < k; i++)
        for (size_t j = i + 1; j < n; j++)
            if (v[j] > v[i]) {
                int64_t t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
    if (v[k - 1] == NEVER)
        return INT64_MIN;
    return v[k - 1] + e->cfg.timeout_ns;
}

int64_t bq_el_next_deadline(const bq_election_t *e)
{
    if (e->role == BQ_EL_PRIMARY)
        return e->cfg.automatic && !e->fenced ? quorum_end(e) : INT64_MAX;
    return stands(e) ? e->deadline : INT64_MAX;
}

const char *bq_el_role_name(const bq_election_t *e)
{
    switch (e->role) {
    case BQ_EL_FOLLOWER:
        return e->cfg.can_lead ? "standby" : "witness";
    case BQ_EL_PRECANDIDATE:
        return "precandidate";
    case BQ_EL_CANDIDATE:
        return "candidate";
    case BQ_EL_PRIMARY:
        return "primary";
    }
    return "unknown";
}
