/* Unit tests of the election rules (replication/election.c): one vote per
 * epoch, the log comparison with the floor, the witness, PreVote (nothing
 * stored, denied while a primary is heard), higher epochs adopted with a
 * step down, split votes standing again after a new random timeout,
 * CheckQuorum fencing on echoed send times (one-way loss included), a
 * paused primary, manual mode, a single voter; then a randomized
 * simulation of 3 and 5 nodes (and 2 nodes + a witness) exchanging
 * messages through a queue with random delays, losses, one-way cuts,
 * pauses and crashes, which checks that no epoch has two primaries, that
 * at no instant two nodes may acknowledge writes, that every vote and epoch
 * change is reported for storage, that a new primary holds every committed
 * record, and that a primary emerges once the faults stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"
#include "replication/election.h"

#define T 1000 /* the timeout of these tests, ns */

static bq_el_pos_t pos(uint64_t epoch, uint64_t lsn)
{
    bq_el_pos_t p = {epoch, lsn};
    return p;
}

static bq_el_config_t config(size_t nvoters, size_t self, bool can_lead, bool automatic)
{
    bq_el_config_t c = {nvoters, self, can_lead, automatic, T};
    return c;
}

static bq_el_request_t request(uint64_t epoch, bool prevote, bq_el_pos_t last)
{
    bq_el_request_t r = {epoch, prevote, last};
    return r;
}

static bq_el_reply_t reply_of(uint64_t epoch, bool prevote, bool granted)
{
    bq_el_reply_t r = {epoch, prevote, granted};
    return r;
}

/* Asks e for a vote of from; returns whether it was granted. */
static bool ask(bq_election_t *e, int64_t now, size_t from, uint64_t epoch, bool prevote,
                bq_el_pos_t last, bq_el_pos_t mine, unsigned *eff)
{
    bq_el_request_t req = request(epoch, prevote, last);
    bq_el_reply_t rep;
    unsigned x = bq_el_on_request(e, now, from, &req, mine, &rep);

    if (eff)
        *eff = x;
    assert_int_equal(rep.prevote, prevote);
    assert_int_equal(rep.epoch, rep.granted ? epoch : e->epoch);
    return rep.granted;
}

/* Node 0 of three, automatic, made primary of epoch + 1 at now by a
 * campaign and node 1's vote arriving at now + 10. */
static void make_primary(bq_election_t *e, uint64_t epoch, int64_t now)
{
    bq_el_config_t c = config(3, 0, true, true);
    bq_el_reply_t r = reply_of(epoch + 1, false, true);

    bq_el_init(e, &c, epoch, -1, 1, now - 5 * T);
    assert_int_equal(bq_el_campaign(e, now), BQ_EL_PERSIST | BQ_EL_REQUEST);
    assert_int_equal(bq_el_on_reply(e, now + 10, 1, &r, pos(epoch, 0)),
                     BQ_EL_LEAD | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e->role, BQ_EL_PRIMARY);
}

static void test_pos_and_names(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, true);
    bq_el_config_t w = config(3, 2, false, true);

    assert_int_equal(bq_el_pos_cmp(pos(1, 9), pos(2, 0)), -1);
    assert_int_equal(bq_el_pos_cmp(pos(2, 0), pos(1, 9)), 1);
    assert_int_equal(bq_el_pos_cmp(pos(2, 3), pos(2, 4)), -1);
    assert_int_equal(bq_el_pos_cmp(pos(2, 4), pos(2, 3)), 1);
    assert_int_equal(bq_el_pos_cmp(pos(2, 4), pos(2, 4)), 0);
    bq_el_init(&e, &c, 0, -1, 1, 0);
    assert_string_equal(bq_el_role_name(&e), "standby");
    e.role = BQ_EL_PRECANDIDATE;
    assert_string_equal(bq_el_role_name(&e), "precandidate");
    e.role = BQ_EL_CANDIDATE;
    assert_string_equal(bq_el_role_name(&e), "candidate");
    e.role = BQ_EL_PRIMARY;
    assert_string_equal(bq_el_role_name(&e), "primary");
    bq_el_init(&e, &w, 0, -1, 1, 0);
    assert_string_equal(bq_el_role_name(&e), "witness");
}

static void test_init(void **state)
{
    (void)state;
    bq_election_t e, f;
    bq_el_config_t c = config(3, 1, true, true);
    bool differ = false;

    bq_el_init(&e, &c, 7, 2, 0, 100);
    assert_true(e.rng != 0);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    assert_int_equal(e.epoch, 7);
    assert_int_equal(e.voted_for, 2);
    assert_int_equal(e.primary, -1);
    assert_false(e.fenced);
    assert_int_equal(e.granted, 0);
    assert_true(e.deadline >= 100 + T && e.deadline < 100 + 2 * T);
    assert_true(bq_el_next_deadline(&e) == e.deadline);
    bq_el_init(&f, &c, 7, 2, 0, 100);
    assert_true(f.deadline == e.deadline); /* reproducible */
    for (uint64_t seed = 1; seed < 8; seed++) {
        bq_el_init(&f, &c, 7, 2, seed, 100);
        assert_true(f.rng != 0);
        assert_true(f.deadline >= 100 + T && f.deadline < 100 + 2 * T);
        differ |= f.deadline != e.deadline;
    }
    assert_true(differ);
    bq_el_init(&e, &c, 7, 3, 0, 100); /* not a voter: no vote */
    assert_int_equal(e.voted_for, -1);
    c.automatic = false;
    bq_el_init(&e, &c, 7, -1, 0, 100);
    assert_true(bq_el_next_deadline(&e) == INT64_MAX);
}

/* Manual mode, so that only the epoch and the vote decide. */
static void test_vote_once_per_epoch(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, false);
    unsigned eff;

    bq_el_init(&e, &c, 3, -1, 1, 0);
    assert_true(ask(&e, 1, 1, 4, false, pos(3, 10), pos(3, 10), &eff));
    assert_int_equal(eff, BQ_EL_PERSIST);
    assert_int_equal(e.epoch, 4);
    assert_int_equal(e.voted_for, 1);
    assert_false(ask(&e, 2, 2, 4, false, pos(3, 10), pos(3, 10), &eff));
    assert_int_equal(eff, 0);
    assert_int_equal(e.voted_for, 1);
    assert_true(ask(&e, 3, 1, 4, false, pos(3, 10), pos(3, 10), &eff)); /* again: same */
    assert_int_equal(eff, 0);
    assert_false(ask(&e, 4, 2, 3, false, pos(3, 10), pos(3, 10), &eff)); /* stale */
    assert_int_equal(eff, 0);
    assert_true(ask(&e, 5, 2, 5, false, pos(3, 10), pos(3, 10), &eff));
    assert_int_equal(eff, BQ_EL_PERSIST);
    assert_int_equal(e.voted_for, 2);
    /* A stored vote survives a restart. */
    bq_el_init(&e, &c, 5, 2, 1, 6);
    assert_false(ask(&e, 7, 1, 5, false, pos(3, 10), pos(3, 10), NULL));
    assert_true(ask(&e, 8, 2, 5, false, pos(3, 10), pos(3, 10), NULL));
}

static void test_log_comparison(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, false);
    bq_el_config_t w = config(3, 2, false, false);
    bq_el_pos_t mine = pos(3, 10);

    /* PreVote is asked first, a timeout after the start. */
    bq_el_init(&e, &c, 3, -1, 1, 0);
    assert_false(ask(&e, T, 1, 4, true, pos(2, 50), mine, NULL));
    assert_false(ask(&e, T, 1, 4, false, pos(2, 50), mine, NULL));
    assert_false(ask(&e, T, 1, 5, false, pos(3, 9), mine, NULL));
    assert_true(ask(&e, T, 1, 6, true, pos(3, 10), mine, NULL));
    assert_true(ask(&e, T, 1, 6, false, pos(3, 10), mine, NULL));
    assert_true(ask(&e, T, 1, 7, false, pos(4, 1), mine, NULL));
    /* The floor: above the node's own log, it decides. */
    bq_el_raise_floor(&e, pos(3, 20));
    bq_el_raise_floor(&e, pos(3, 5)); /* never lowered */
    assert_int_equal(e.floor.lsn, 20);
    assert_false(ask(&e, 1, 1, 8, true, pos(3, 15), mine, NULL));
    assert_false(ask(&e, 1, 1, 8, false, pos(3, 15), mine, NULL));
    assert_true(ask(&e, 1, 1, 9, false, pos(3, 20), mine, NULL));
    /* A witness has no log: the floor alone. */
    bq_el_init(&e, &w, 3, -1, 1, 0);
    assert_true(ask(&e, 1, 0, 4, false, pos(0, 0), pos(0, 0), NULL));
    bq_el_raise_floor(&e, pos(2, 7));
    assert_false(ask(&e, 1, 1, 5, false, pos(2, 6), pos(0, 0), NULL));
    assert_true(ask(&e, 1, 1, 5, false, pos(2, 7), pos(0, 0), NULL));
}

static void test_witness(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t w = config(3, 2, false, true);
    bool accept;

    bq_el_init(&e, &w, 1, -1, 1, 0);
    assert_true(e.deadline == INT64_MAX);
    assert_true(bq_el_next_deadline(&e) == INT64_MAX);
    assert_int_equal(bq_el_tick(&e, 100 * T, pos(0, 0)), 0);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    assert_int_equal(bq_el_campaign(&e, 100 * T), 0);
    assert_int_equal(bq_el_assume(&e, 100 * T), 0);
    assert_int_equal(e.epoch, 1);
    /* It votes, and follows. */
    assert_true(ask(&e, 100 * T, 0, 2, true, pos(1, 3), pos(0, 0), NULL));
    assert_true(ask(&e, 100 * T, 0, 2, false, pos(1, 3), pos(0, 0), NULL));
    assert_int_equal(bq_el_on_primary(&e, 100 * T + 1, 0, 2, &accept), BQ_EL_NEW_PRIMARY);
    assert_true(accept);
    assert_int_equal(bq_el_tick(&e, 1000 * T, pos(0, 0)), 0);
    assert_string_equal(bq_el_role_name(&e), "witness");
}

/* A full automatic election: deadline, PreVote, vote, primary. */
static void test_election_flow(void **state)
{
    (void)state;
    bq_election_t a, b;
    bq_el_config_t ca = config(3, 0, true, true), cb = config(3, 1, true, true);
    bq_el_request_t req;
    bq_el_reply_t rep;
    bq_el_pos_t mine = pos(2, 40);
    int64_t d;

    bq_el_init(&a, &ca, 2, -1, 7, 0);
    bq_el_init(&b, &cb, 2, -1, 8, 0);
    d = a.deadline;
    assert_int_equal(bq_el_tick(&a, d - 1, mine), 0);
    assert_int_equal(bq_el_tick(&a, d, mine), BQ_EL_REQUEST);
    assert_int_equal(a.role, BQ_EL_PRECANDIDATE);
    assert_int_equal(a.epoch, 2);
    assert_true(a.deadline >= d + T && a.deadline < d + 2 * T);
    req = bq_el_current_request(&a, mine);
    assert_true(req.prevote);
    assert_int_equal(req.epoch, 3);
    assert_int_equal(req.last.lsn, 40);
    /* PreVote changes nothing on the voter. */
    assert_int_equal(bq_el_on_request(&b, d + 1, 0, &req, mine, &rep), 0);
    assert_true(rep.granted && rep.prevote);
    assert_int_equal(rep.epoch, 3);
    assert_int_equal(b.epoch, 2);
    assert_int_equal(b.voted_for, -1);
    assert_int_equal(bq_el_on_reply(&a, d + 2, 1, &rep, mine), BQ_EL_PERSIST | BQ_EL_REQUEST);
    assert_int_equal(a.role, BQ_EL_CANDIDATE);
    assert_int_equal(a.epoch, 3);
    assert_int_equal(a.voted_for, 0);
    req = bq_el_current_request(&a, mine);
    assert_false(req.prevote);
    assert_int_equal(req.epoch, 3);
    assert_int_equal(bq_el_on_request(&b, d + 3, 0, &req, mine, &rep), BQ_EL_PERSIST);
    assert_true(rep.granted && !rep.prevote);
    assert_int_equal(b.voted_for, 0);
    assert_int_equal(bq_el_on_reply(&a, d + 4, 1, &rep, mine), BQ_EL_LEAD | BQ_EL_NEW_PRIMARY);
    assert_int_equal(a.role, BQ_EL_PRIMARY);
    assert_int_equal(a.primary, 0);
    assert_false(a.fenced);
    assert_true(bq_el_may_ack(&a, d + 4));
    /* b's vote answers the request sent at d + 2: in contact from then. */
    assert_true(bq_el_next_deadline(&a) == d + 2 + T);
    /* A late vote changes nothing. */
    rep = reply_of(3, false, true);
    assert_int_equal(bq_el_on_reply(&a, d + 5, 2, &rep, mine), 0);
}

static void test_prevote(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, true);
    bq_el_reply_t rep;
    unsigned eff;
    bool accept;

    bq_el_init(&e, &c, 5, -1, 1, 0);
    assert_int_equal(bq_el_on_primary(&e, 10 * T, 2, 5, &accept), BQ_EL_NEW_PRIMARY);
    assert_true(accept);
    /* The primary was heard within the timeout: no. */
    assert_false(ask(&e, 11 * T - 1, 1, 6, true, pos(5, 1), pos(5, 1), &eff));
    assert_int_equal(eff, 0);
    assert_true(ask(&e, 11 * T, 1, 6, true, pos(5, 1), pos(5, 1), &eff));
    assert_int_equal(eff, 0);
    assert_int_equal(e.epoch, 5);
    assert_int_equal(e.voted_for, -1);
    assert_int_equal(e.primary, 2);
    assert_false(ask(&e, 11 * T, 1, 5, true, pos(5, 1), pos(5, 1), NULL)); /* not above */
    /* A primary in contact says no; fenced, yes. */
    make_primary(&e, 5, 20 * T);
    assert_false(ask(&e, 20 * T + 20, 1, 7, true, pos(6, 9), pos(6, 0), NULL));
    assert_int_equal(bq_el_tick(&e, 21 * T, pos(6, 0)), BQ_EL_FENCE);
    assert_true(ask(&e, 21 * T, 1, 7, true, pos(6, 9), pos(6, 0), &eff));
    assert_int_equal(eff, 0);
    assert_int_equal(e.role, BQ_EL_PRIMARY);
    /* A precandidate ignores a grant for another epoch... */
    bq_el_init(&e, &c, 2, -1, 1, 0);
    assert_int_equal(bq_el_tick(&e, e.deadline, pos(2, 0)), BQ_EL_REQUEST);
    rep = reply_of(2, true, true); /* not for epoch + 1 */
    assert_int_equal(bq_el_on_reply(&e, e.deadline, 1, &rep, pos(2, 0)), 0);
    assert_int_equal(e.role, BQ_EL_PRECANDIDATE);
    /* ...but a refusal carries the voter's epoch: a higher one is adopted. */
    rep = reply_of(9, true, false);
    assert_int_equal(bq_el_on_reply(&e, e.deadline, 1, &rep, pos(2, 0)),
                     BQ_EL_PERSIST | BQ_EL_STEP_DOWN);
    assert_int_equal(e.epoch, 9);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    /* So does a fenced primary probing the voters: it steps down. */
    make_primary(&e, 9, 30 * T);
    assert_int_equal(bq_el_tick(&e, 31 * T, pos(9, 0)), BQ_EL_FENCE);
    rep = reply_of(11, true, false);
    assert_int_equal(bq_el_on_reply(&e, 31 * T, 1, &rep, pos(9, 0)),
                     BQ_EL_PERSIST | BQ_EL_STEP_DOWN | BQ_EL_FENCE | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
}

static void test_higher_epoch_steps_down(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, true);
    bq_el_reply_t rep = reply_of(9, false, false);
    unsigned eff;
    bool accept;

    make_primary(&e, 2, 10 * T);
    assert_true(ask(&e, 10 * T + 20, 1, 7, false, pos(3, 0), pos(3, 0), &eff));
    assert_int_equal(eff, BQ_EL_PERSIST | BQ_EL_STEP_DOWN | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    assert_int_equal(e.epoch, 7);
    assert_int_equal(e.voted_for, 1);
    assert_int_equal(e.primary, -1);
    assert_false(bq_el_may_ack(&e, 10 * T + 20));
    assert_true(e.deadline >= 10 * T + 20 + T);
    /* A candidate, on a refusal of a higher epoch. */
    bq_el_init(&e, &c, 2, -1, 1, 0);
    assert_int_equal(bq_el_campaign(&e, 0), BQ_EL_PERSIST | BQ_EL_REQUEST);
    assert_int_equal(bq_el_on_reply(&e, 1, 1, &rep, pos(2, 0)), BQ_EL_PERSIST | BQ_EL_STEP_DOWN);
    assert_int_equal(e.epoch, 9);
    assert_int_equal(e.voted_for, -1);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    /* A primary, on an acknowledgement of a higher epoch. */
    make_primary(&e, 2, 10 * T);
    assert_int_equal(bq_el_on_ack(&e, 10 * T + 20, 2, 4, 10 * T),
                     BQ_EL_PERSIST | BQ_EL_STEP_DOWN | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.epoch, 4);
    /* A precandidate, on a primary of a higher epoch. */
    bq_el_init(&e, &c, 2, -1, 1, 0);
    assert_int_equal(bq_el_tick(&e, e.deadline, pos(2, 0)), BQ_EL_REQUEST);
    assert_int_equal(bq_el_on_primary(&e, e.deadline, 2, 5, &accept),
                     BQ_EL_PERSIST | BQ_EL_STEP_DOWN | BQ_EL_NEW_PRIMARY);
    assert_true(accept);
    assert_int_equal(e.primary, 2);
    assert_int_equal(e.epoch, 5);
    /* A stale primary is refused and changes nothing. */
    assert_int_equal(bq_el_on_primary(&e, e.deadline + 1, 1, 4, &accept), 0);
    assert_false(accept);
    assert_int_equal(e.primary, 2);
    /* A candidate, on the primary of its own epoch. */
    assert_int_equal(bq_el_campaign(&e, 20 * T), BQ_EL_PERSIST | BQ_EL_REQUEST | BQ_EL_NEW_PRIMARY);
    assert_int_equal(bq_el_on_primary(&e, 20 * T + 1, 1, 6, &accept),
                     BQ_EL_STEP_DOWN | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.voted_for, 0);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
}

/* Automatic mode: a real vote too waits a timeout after the primary was
 * heard (the epoch is adopted at once); manual mode does not wait. */
static void test_real_vote_waits_after_primary(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, true);
    unsigned eff;
    bool accept;

    bq_el_init(&e, &c, 4, -1, 1, 0);
    bq_el_on_primary(&e, 10 * T, 2, 4, &accept);
    assert_false(ask(&e, 10 * T + T / 2, 1, 5, false, pos(4, 0), pos(4, 0), &eff));
    assert_int_equal(eff, BQ_EL_PERSIST | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.epoch, 5);
    assert_int_equal(e.voted_for, -1);
    assert_true(ask(&e, 11 * T, 1, 5, false, pos(4, 0), pos(4, 0), &eff));
    assert_int_equal(eff, BQ_EL_PERSIST);
    /* A vote given counts as hearing from a primary: no other vote, real
     * or pre, for a timeout, and the deadline starts again. */
    assert_true(e.deadline >= 12 * T);
    assert_false(ask(&e, 12 * T - 1, 2, 6, true, pos(4, 0), pos(4, 0), NULL));
    assert_false(ask(&e, 12 * T - 1, 2, 6, false, pos(4, 0), pos(4, 0), NULL));
    assert_true(ask(&e, 12 * T, 2, 7, false, pos(4, 0), pos(4, 0), NULL));
    /* A node that just started may have acked a primary before it stopped. */
    bq_el_init(&e, &c, 7, -1, 1, 50 * T);
    assert_false(ask(&e, 51 * T - 1, 1, 8, true, pos(4, 0), pos(4, 0), NULL));
    assert_false(ask(&e, 51 * T - 1, 1, 8, false, pos(4, 0), pos(4, 0), NULL));
    assert_true(ask(&e, 51 * T, 1, 9, false, pos(4, 0), pos(4, 0), NULL));
    /* Manual: the operator's candidate gets the vote at once. */
    c.automatic = false;
    bq_el_init(&e, &c, 4, -1, 1, 0);
    bq_el_on_primary(&e, 10 * T, 2, 4, &accept);
    assert_true(ask(&e, 10 * T + 1, 1, 5, false, pos(4, 0), pos(4, 0), NULL));
}

/* A follower of a known primary gives no vote in that primary's epoch
 * (it may have taken office without votes, by bq_el_assume). */
static void test_known_primary_holds_the_epoch(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, false);
    bool accept;

    bq_el_init(&e, &c, 3, -1, 1, 0);
    bq_el_on_primary(&e, 10, 2, 4, &accept);
    assert_int_equal(e.voted_for, -1);
    assert_false(ask(&e, 20, 1, 4, false, pos(4, 0), pos(3, 0), NULL));
    assert_false(ask(&e, 20, 1, 4, true, pos(4, 0), pos(3, 0), NULL));
    assert_true(ask(&e, 20, 1, 5, false, pos(4, 0), pos(3, 0), NULL));
}

static void test_split_vote_stands_again(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(5, 3, true, true);
    int64_t offsets[6], now;
    bool differ = false;

    bq_el_init(&e, &c, 1, -1, 3, 0);
    /* A prevote round without a majority: a new round, epoch unchanged. */
    now = e.deadline;
    assert_int_equal(bq_el_tick(&e, now, pos(1, 0)), BQ_EL_REQUEST);
    assert_int_equal(bq_el_tick(&e, e.deadline - 1, pos(1, 0)), 0);
    now = e.deadline;
    assert_int_equal(bq_el_tick(&e, now, pos(1, 0)), BQ_EL_REQUEST);
    assert_int_equal(e.role, BQ_EL_PRECANDIDATE);
    assert_int_equal(e.epoch, 1);
    assert_int_equal(e.granted, 1u << 3);
    assert_true(e.deadline >= now + T && e.deadline < now + 2 * T);
    /* A candidate with two of five votes: PreVote again (epoch unchanged,
     * so one cut off does not raise it), at a new random time. */
    for (int i = 0; i < 6; i++) {
        bq_el_campaign(&e, now);
        bq_el_reply_t rep = reply_of(e.epoch, false, true);
        uint64_t epoch = e.epoch;

        assert_int_equal(bq_el_on_reply(&e, now, (size_t)i % 3, &rep, pos(1, 0)), 0);
        assert_int_equal(bq_el_tick(&e, e.deadline - 1, pos(1, 0)), 0);
        now = e.deadline;
        assert_int_equal(bq_el_tick(&e, now, pos(1, 0)), BQ_EL_REQUEST);
        assert_int_equal(e.epoch, epoch);
        assert_int_equal(e.voted_for, 3);
        assert_int_equal(e.granted, 1u << 3);
        assert_int_equal(e.role, BQ_EL_PRECANDIDATE);
        offsets[i] = e.deadline - now;
        assert_true(offsets[i] >= T && offsets[i] < 2 * T);
        differ |= i > 0 && offsets[i] != offsets[0];
    }
    assert_true(differ);
}

static void test_check_quorum(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(5, 0, true, true);

    /* Node 1's vote answers the request sent at 0: contact until T. */
    make_primary(&e, 1, 0);
    assert_true(bq_el_next_deadline(&e) == T);
    assert_int_equal(bq_el_tick(&e, T - 1, pos(2, 1)), 0);
    assert_true(bq_el_may_ack(&e, T - 1));
    assert_int_equal(bq_el_tick(&e, T, pos(2, 1)), BQ_EL_FENCE);
    assert_true(e.fenced);
    assert_false(bq_el_may_ack(&e, T));
    assert_true(bq_el_next_deadline(&e) == INT64_MAX);
    assert_int_equal(bq_el_tick(&e, 2 * T, pos(2, 1)), 0);
    /* An ack of a message sent at 2T: in contact again, until 3T. */
    assert_int_equal(bq_el_on_ack(&e, 2 * T + 5, 2, 2, 2 * T), BQ_EL_FENCE);
    assert_false(e.fenced);
    assert_true(bq_el_may_ack(&e, 2 * T + 5));
    assert_true(bq_el_next_deadline(&e) == 3 * T);
    /* Older echoes never move a contact back; stale epochs do not count. */
    assert_int_equal(bq_el_on_ack(&e, 2 * T + 6, 2, 2, T), 0);
    assert_int_equal(bq_el_on_ack(&e, 2 * T + 6, 1, 1, 2 * T + 6), 0);
    assert_true(bq_el_next_deadline(&e) == 3 * T);
    /* Five voters: the second freshest of the others decides. */
    bq_el_init(&e, &c, 1, -1, 1, 0);
    bq_el_assume(&e, 0);
    assert_true(bq_el_next_deadline(&e) == T);
    bq_el_on_ack(&e, 500, 1, 2, 100);
    assert_true(bq_el_next_deadline(&e) == T); /* nodes 2 to 4: still at 0 */
    bq_el_on_ack(&e, 500, 2, 2, 300);
    assert_true(bq_el_next_deadline(&e) == 100 + T);
    bq_el_on_ack(&e, 500, 3, 2, 200);
    assert_true(bq_el_next_deadline(&e) == 200 + T);
    assert_true(bq_el_may_ack(&e, 200 + T - 1));
    assert_false(bq_el_may_ack(&e, 200 + T));
    /* An echo from the future counts as now. */
    bq_el_on_ack(&e, 600, 1, 2, 100 * T);
    assert_true(e.contact_at[1] == 600);
}

/* Acks keep arriving, but the primary's messages no longer reach the
 * voter: they echo the last one it got, and the primary is fenced. */
static void test_one_way_loss(void **state)
{
    (void)state;
    bq_election_t e;
    int64_t fenced_at = 0;

    make_primary(&e, 1, 0);
    assert_int_equal(bq_el_on_ack(&e, 300, 1, 2, 250), 0);
    for (int64_t now = 400; now < 4 * T; now += T / 4) {
        unsigned eff = bq_el_on_ack(&e, now, 1, 2, 250);
        eff |= bq_el_tick(&e, now, pos(2, 1));
        assert_int_equal(bq_el_may_ack(&e, now), now < 250 + T);
        if (eff & BQ_EL_FENCE)
            fenced_at = now;
    }
    assert_true(e.fenced);
    assert_int_equal(fenced_at, 1400); /* the first ack at or after 250 + T */
}

/* A process paused for a long time must not ack before its first tick. */
static void test_pause_without_tick(void **state)
{
    (void)state;
    bq_election_t e;

    make_primary(&e, 1, 0);
    bq_el_on_ack(&e, 500, 1, 2, 400);
    assert_true(bq_el_may_ack(&e, 500));
    assert_false(bq_el_may_ack(&e, 10 * T));
    assert_false(e.fenced); /* not recomputed yet */
    assert_true(bq_el_next_deadline(&e) <= 10 * T);
    assert_int_equal(bq_el_tick(&e, 10 * T, pos(2, 1)), BQ_EL_FENCE);
}

static void test_manual_mode(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, false);
    bq_el_reply_t rep;
    bool accept;

    bq_el_init(&e, &c, 1, -1, 1, 0);
    assert_true(bq_el_next_deadline(&e) == INT64_MAX);
    assert_int_equal(bq_el_tick(&e, 1000 * T, pos(1, 0)), 0);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    /* It still answers and adopts higher epochs. */
    assert_true(ask(&e, 1000 * T, 1, 2, true, pos(1, 0), pos(1, 0), NULL));
    assert_int_equal(bq_el_on_primary(&e, 1000 * T, 2, 3, &accept),
                     BQ_EL_PERSIST | BQ_EL_NEW_PRIMARY);
    /* An operator's campaign: no standing again on its own. */
    assert_int_equal(bq_el_campaign(&e, 1001 * T),
                     BQ_EL_PERSIST | BQ_EL_REQUEST | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.epoch, 4);
    assert_true(bq_el_next_deadline(&e) == INT64_MAX);
    assert_int_equal(bq_el_tick(&e, 2000 * T, pos(1, 0)), 0);
    rep = reply_of(4, false, true);
    assert_int_equal(bq_el_on_reply(&e, 2000 * T, 2, &rep, pos(1, 0)),
                     BQ_EL_LEAD | BQ_EL_NEW_PRIMARY);
    /* Never fenced. */
    assert_int_equal(bq_el_tick(&e, 9000 * T, pos(1, 0)), 0);
    assert_true(bq_el_may_ack(&e, 9000 * T));
    assert_true(bq_el_next_deadline(&e) == INT64_MAX);
    assert_int_equal(bq_el_campaign(&e, 9000 * T), 0);
    assert_int_equal(bq_el_assume(&e, 9000 * T), 0);
    /* Forced: primary of the next epoch without votes. */
    bq_el_init(&e, &c, 4, -1, 1, 0);
    assert_int_equal(bq_el_assume(&e, 5), BQ_EL_PERSIST | BQ_EL_LEAD | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.epoch, 5);
    assert_int_equal(e.voted_for, 0);
    assert_int_equal(e.role, BQ_EL_PRIMARY);
    assert_true(bq_el_may_ack(&e, 5));
}

/* A higher epoch told by any message is adopted; a primary steps down. */
static void test_on_epoch(void **state)
{
    (void)state;
    bq_election_t e;
    make_primary(&e, 2, 10 * T);
    assert_int_equal(bq_el_on_epoch(&e, 10 * T + 5, 3), 0); /* its own epoch */
    assert_int_equal(bq_el_on_epoch(&e, 10 * T + 5, 7),
                     BQ_EL_PERSIST | BQ_EL_STEP_DOWN | BQ_EL_NEW_PRIMARY);
    assert_int_equal(e.epoch, 7);
    assert_int_equal(e.voted_for, -1);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    assert_false(bq_el_may_ack(&e, 10 * T + 6));
}

static void test_single_voter(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(1, 0, true, true);
    unsigned eff;

    bq_el_init(&e, &c, 0, -1, 1, 0);
    eff = bq_el_tick(&e, e.deadline, pos(0, 0));
    assert_true(eff & BQ_EL_LEAD);
    assert_true(eff & BQ_EL_PERSIST);
    assert_int_equal(e.epoch, 1);
    assert_int_equal(e.role, BQ_EL_PRIMARY);
    assert_true(bq_el_next_deadline(&e) == INT64_MAX);
    assert_int_equal(bq_el_tick(&e, 1000 * T, pos(1, 1)), 0);
    assert_true(bq_el_may_ack(&e, 1000 * T));
    c.automatic = false;
    bq_el_init(&e, &c, 0, -1, 1, 0);
    eff = bq_el_campaign(&e, 3);
    assert_true(eff & BQ_EL_LEAD);
    assert_int_equal(e.role, BQ_EL_PRIMARY);
}

/* A voter that refuses a candidate whose log is behind its own stands at
 * once when no primary is heard from (not at its random deadline), and
 * not while one is, nor as a candidate, nor below its floor. */
static void test_better_log_stands_sooner(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, true);
    bq_el_pos_t mine = pos(2, 40);
    bool accept;
    int64_t d;

    bq_el_init(&e, &c, 2, -1, 1, 0);
    /* Within the timeout of the start it could still hear a primary. */
    assert_false(ask(&e, T / 2, 1, 3, true, pos(2, 30), mine, NULL));
    assert_true(e.deadline >= T);
    /* Past it: behind ours, so it stands now... */
    assert_false(ask(&e, T + 1, 1, 3, true, pos(2, 30), mine, NULL));
    assert_int_equal(e.deadline, T + 1);
    assert_int_equal(bq_el_tick(&e, T + 1, mine), BQ_EL_REQUEST);
    assert_int_equal(e.role, BQ_EL_PRECANDIDATE);
    /* ...also as a precandidate whose round a voter let down. */
    assert_false(ask(&e, T + 5, 1, 3, true, pos(2, 30), mine, NULL));
    assert_int_equal(e.deadline, T + 5);
    /* Equal logs: the vote is the candidate's, nothing moves. */
    bq_el_init(&e, &c, 2, -1, 1, 0);
    d = e.deadline;
    assert_true(ask(&e, T + 1, 1, 3, true, mine, mine, NULL));
    assert_int_equal(e.deadline, d);
    /* A live primary: no. */
    bq_el_init(&e, &c, 2, -1, 1, 0);
    bq_el_on_primary(&e, 5 * T, 2, 2, &accept);
    assert_true(accept);
    d = e.deadline;
    assert_false(ask(&e, 5 * T + 10, 1, 3, true, pos(2, 30), mine, NULL));
    assert_int_equal(e.deadline, d);
    /* A candidate keeps its own election going. */
    bq_el_init(&e, &c, 2, -1, 1, 0);
    assert_int_equal(bq_el_campaign(&e, 2 * T), BQ_EL_PERSIST | BQ_EL_REQUEST);
    d = e.deadline;
    assert_false(ask(&e, 4 * T, 1, 3, true, pos(2, 30), mine, NULL));
    assert_int_equal(e.deadline, d);
    /* Below its floor it would not vote for itself either. */
    bq_el_init(&e, &c, 2, -1, 1, 0);
    bq_el_raise_floor(&e, pos(2, 50));
    d = e.deadline;
    assert_false(ask(&e, T + 1, 1, 3, true, pos(2, 30), mine, NULL));
    assert_int_equal(e.deadline, d);
    /* A witness never stands. */
    c = config(3, 0, false, true);
    bq_el_init(&e, &c, 2, -1, 1, 0);
    assert_false(ask(&e, T + 1, 1, 3, true, pos(2, 30), mine, NULL));
    assert_int_equal(bq_el_next_deadline(&e), INT64_MAX);
}

static void test_below_floor_does_not_stand(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, true);
    int64_t d;

    bq_el_init(&e, &c, 2, -1, 1, 0);
    bq_el_raise_floor(&e, pos(2, 30));
    d = e.deadline;
    assert_int_equal(bq_el_tick(&e, d, pos(2, 29)), 0);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    assert_true(e.deadline >= d + T);
    assert_int_equal(bq_el_tick(&e, e.deadline, pos(2, 30)), BQ_EL_REQUEST);
}

/* Epochs above the ceiling change nothing from any message, however far
 * below BQ_EPOCH_MAX; any epoch up to it is believed (no step limit: honest
 * nodes pushed apart must be able to adopt each other's epochs); the
 * ceiling grows with the wall clock, never goes down, and no node stands
 * at it, so epoch + 1 never wraps. */
static void test_epoch_ceiling(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 1, true, true);
    bool accept = true;
    unsigned eff = 0;
    uint64_t huge = UINT64_MAX, above = BQ_EL_CEILING_BASE + 1;

    assert_true(bq_el_epoch_ceiling(0) == BQ_EL_CEILING_BASE);
    assert_true(bq_el_epoch_ceiling(BQ_EL_CEILING_EPOCH0 + 10) ==
                BQ_EL_CEILING_BASE + 10 * BQ_EL_CEILING_RATE);
    assert_true(bq_el_epoch_ceiling(INT64_MAX) == BQ_EPOCH_MAX);
    make_primary(&e, 2, 10 * T);
    assert_true(e.ceiling == BQ_EL_CEILING_BASE);
    assert_false(bq_el_epoch_plausible(&e, huge));
    assert_false(bq_el_epoch_plausible(&e, above));
    assert_true(bq_el_epoch_plausible(&e, BQ_EL_CEILING_BASE));
    assert_int_equal(bq_el_on_epoch(&e, 10 * T + 20, huge), 0);
    assert_int_equal(bq_el_on_epoch(&e, 10 * T + 20, above), 0);
    assert_int_equal(bq_el_on_ack(&e, 10 * T + 20, 1, huge, 10 * T + 20) & BQ_EL_STEP_DOWN, 0);
    bq_el_reply_t r = reply_of(huge, false, false);
    assert_int_equal(bq_el_on_reply(&e, 10 * T + 20, 1, &r, pos(3, 0)), 0);
    assert_false(ask(&e, 10 * T + 20, 1, huge, false, pos(huge, huge), pos(3, 0), &eff));
    assert_int_equal(eff, 0);
    assert_false(ask(&e, 10 * T + 20, 1, above, true, pos(3, 9), pos(3, 0), &eff));
    assert_int_equal(e.epoch, 3);
    assert_int_equal(e.role, BQ_EL_PRIMARY);
    /* A follower does not follow a primary above the ceiling; any epoch up
     * to it, however far above its own, it does. */
    bq_el_init(&e, &c, 5, -1, 1, 0);
    assert_int_equal(bq_el_on_primary(&e, 1, 0, huge, &accept), 0);
    assert_false(accept);
    assert_int_equal(e.epoch, 5);
    eff = bq_el_on_primary(&e, 2, 0, BQ_EL_CEILING_BASE - 7, &accept);
    assert_true(accept);
    assert_true(eff & BQ_EL_PERSIST);
    assert_true(e.epoch == BQ_EL_CEILING_BASE - 7);
    /* The ceiling rises with time and never goes down. */
    bq_el_set_ceiling(&e, above + 5);
    assert_true(bq_el_epoch_plausible(&e, above));
    bq_el_set_ceiling(&e, 9);
    assert_true(e.ceiling == above + 5);
    bq_el_set_ceiling(&e, huge);
    assert_true(e.ceiling == BQ_EPOCH_MAX);
    /* At the ceiling nobody stands, campaigns or assumes office. */
    bq_el_init(&e, &c, BQ_EL_CEILING_BASE, -1, 1, 0);
    assert_int_equal(bq_el_tick(&e, e.deadline, pos(1, 1)), 0);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    assert_int_equal(bq_el_campaign(&e, 5), 0);
    assert_int_equal(bq_el_assume(&e, 5), 0);
    assert_true(e.epoch == BQ_EL_CEILING_BASE);
    assert_int_equal(e.role, BQ_EL_FOLLOWER);
    bq_el_set_ceiling(&e, BQ_EL_CEILING_BASE + 1); /* a moment later */
    assert_true(bq_el_campaign(&e, 6) & BQ_EL_REQUEST);
    assert_true(e.epoch == BQ_EL_CEILING_BASE + 1);
}

static void test_bad_indices(void **state)
{
    (void)state;
    bq_election_t e;
    bq_el_config_t c = config(3, 0, true, false);
    bq_el_reply_t rep = reply_of(1, false, true);
    bool accept;

    bq_el_init(&e, &c, 0, -1, 1, 0);
    assert_false(ask(&e, 10, 0, 1, false, pos(0, 0), pos(0, 0), NULL));
    assert_false(ask(&e, 10, 3, 1, false, pos(0, 0), pos(0, 0), NULL));
    assert_int_equal(e.epoch, 0);
    assert_int_equal(bq_el_on_primary(&e, 10, 0, 1, &accept), 0);
    assert_false(accept);
    assert_int_equal(bq_el_on_primary(&e, 10, 7, 1, &accept), 0);
    assert_false(accept);
    bq_el_campaign(&e, 10);
    assert_int_equal(bq_el_on_reply(&e, 10, 0, &rep, pos(0, 0)), 0);
    assert_int_equal(bq_el_on_reply(&e, 10, 5, &rep, pos(0, 0)), 0);
    assert_int_equal(e.role, BQ_EL_CANDIDATE);
}

/* ---- The simulation ---- */

#define SIM_MAXN 5
#define SIM_QMAX 4096
#define SIM_EPOCHS 8192
#define SIM_HB (T / 4)    /* heartbeat interval */
#define SIM_CALM (20 * T) /* a calm phase: no faults */
#ifndef SIM_SEEDS
#define SIM_SEEDS 200 /* raise it (-DSIM_SEEDS=) for a longer run */
#endif

typedef enum { M_REQ, M_REPLY, M_APPEND, M_ACK } mkind_t;

typedef struct msg {
    int64_t at;
    size_t from, to;
    mkind_t kind;
    bq_el_request_t req;
    bq_el_reply_t rep;
    uint64_t epoch;     /* APPEND, ACK */
    int64_t sent_at;    /* APPEND: when sent; ACK: the echo */
    bq_el_pos_t pos;    /* APPEND: the primary's log; ACK: the voter's */
    bq_el_pos_t commit; /* APPEND: the primary's commit position */
} msg_t;

typedef struct node {
    bq_election_t e;
    bq_el_pos_t mine;
    bq_el_pos_t commit;          /* as primary */
    bq_el_pos_t acked[SIM_MAXN]; /* as primary, in its epoch */
    uint64_t d_epoch;            /* the durable copy */
    int d_voted;
    bool up;
    int64_t down_until, paused_until, next_hb;
} node_t;

typedef struct sim {
    size_t n;
    bool witness; /* node 2 is a witness (n == 3) */
    bq_el_config_t cfg[SIM_MAXN];
    node_t nd[SIM_MAXN];
    msg_t q[SIM_QMAX];
    size_t nq;
    uint64_t rng;
    int64_t now, phase_end;
    bool calm;
    unsigned loss[SIM_MAXN][SIM_MAXN]; /* percent, from -> to */
    int8_t leader_of[SIM_EPOCHS];
    int8_t vote[SIM_MAXN][SIM_EPOCHS];
    uint64_t committed[SIM_EPOCHS]; /* per epoch: 1 + the highest LSN committed */
    size_t leads, calms;
} sim_t;

static uint64_t sim_rand(sim_t *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

static int64_t sim_range(sim_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(sim_rand(s) % (uint64_t)(hi - lo));
}

static bool is_data(const sim_t *s, size_t i)
{
    return !(s->witness && i == 2);
}

static bq_el_pos_t max_pos(bq_el_pos_t a, bq_el_pos_t b)
{
    return bq_el_pos_cmp(a, b) >= 0 ? a : b;
}

static void sim_send(sim_t *s, msg_t m)
{
    if (!s->calm && sim_rand(s) % 100 < s->loss[m.from][m.to])
        return;
    if (s->calm)
        m.at = s->now + sim_range(s, 1, T / 50);
    else if (sim_rand(s) % 5 == 0)
        m.at = s->now + sim_range(s, 1, 3 * T);
    else
        m.at = s->now + sim_range(s, 1, T / 2);
    if (s->nq < SIM_QMAX)
        s->q[s->nq++] = m;
}

/* No two nodes that may acknowledge writes at the same instant. */
static void check_acks(const sim_t *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->nd[i].up && bq_el_may_ack(&s->nd[i].e, s->now))
            k++;
    assert_true(k <= 1);
}

static void on_lead(sim_t *s, size_t i)
{
    node_t *d = &s->nd[i];
    uint64_t epoch = d->e.epoch;

    assert_true(epoch < SIM_EPOCHS);
    assert_int_equal(s->leader_of[epoch], -1);
    s->leader_of[epoch] = (int8_t)i;
    assert_true(is_data(s, i));
    /* It holds every record committed in an earlier epoch (a primary of a
     * later epoch may have committed more: its votes came late). */
    for (uint64_t k = epoch; k-- > 0;)
        if (s->committed[k]) {
            assert_true(bq_el_pos_cmp(d->mine, pos(k, s->committed[k] - 1)) >= 0);
            break;
        }
    d->mine = pos(epoch, d->mine.lsn + 1); /* opens its epoch in the log */
    memset(d->acked, 0, sizeof(d->acked));
    d->next_hb = s->now;
    s->leads++;
}

/* Applies the effects of a call on node i, and checks that every change of
 * the epoch or the vote was reported for storage. */
static void apply(sim_t *s, size_t i, unsigned eff)
{
    node_t *d = &s->nd[i];

    if (eff & BQ_EL_PERSIST) {
        assert_true(d->e.epoch >= d->d_epoch);
        d->d_epoch = d->e.epoch;
        d->d_voted = d->e.voted_for;
    }
    assert_true(d->e.epoch == d->d_epoch);
    assert_int_equal(d->e.voted_for, d->d_voted);
    if (d->e.voted_for >= 0) {
        int8_t *v;
        assert_true(d->e.epoch < SIM_EPOCHS);
        v = &s->vote[i][d->e.epoch];
        assert_true(*v == -1 || *v == d->e.voted_for);
        *v = (int8_t)d->e.voted_for;
    }
    if (eff & BQ_EL_LEAD)
        on_lead(s, i);
    if (eff & BQ_EL_REQUEST) {
        msg_t m = {0};
        m.kind = M_REQ;
        m.from = i;
        m.req = bq_el_current_request(&d->e, d->mine);
        for (m.to = 0; m.to < s->n; m.to++)
            if (m.to != i)
                sim_send(s, m);
    }
}

/* The primary's commit position: the majority-th highest log among the
 * voters (with a witness: the lower of the two logs), in its own epoch. */
static void update_commit(sim_t *s, size_t i)
{
    node_t *d = &s->nd[i];
    bq_el_pos_t v[SIM_MAXN], x;
    size_t need = s->n / 2 + 1;

    if (!bq_el_may_ack(&d->e, s->now))
        return;
    if (s->witness) {
        x = d->acked[i == 0 ? 1 : 0];
        if (bq_el_pos_cmp(d->mine, x) < 0)
            x = d->mine;
    } else {
        for (size_t j = 0; j < s->n; j++)
            v[j] = j == i ? d->mine : d->acked[j];
        for (size_t a = 0; a < need; a++)
            for (size_t b = a + 1; b < s->n; b++)
                if (bq_el_pos_cmp(v[b], v[a]) > 0) {
                    bq_el_pos_t t = v[a];
                    v[a] = v[b];
                    v[b] = t;
                }
        x = v[need - 1];
    }
    if (x.epoch != d->e.epoch)
        return;
    d->commit = max_pos(d->commit, x);
    if (x.lsn + 1 > s->committed[x.epoch])
        s->committed[x.epoch] = x.lsn + 1;
}

static void heartbeat(sim_t *s, size_t i)
{
    node_t *d = &s->nd[i];
    msg_t m = {0};

    if (bq_el_may_ack(&d->e, s->now) && sim_rand(s) % 2)
        d->mine.lsn++; /* a write */
    m.kind = M_APPEND;
    m.from = i;
    m.epoch = d->e.epoch;
    m.sent_at = s->now;
    m.pos = d->mine;
    m.commit = d->commit;
    for (m.to = 0; m.to < s->n; m.to++)
        if (m.to != i)
            sim_send(s, m);
    d->next_hb = s->now + SIM_HB;
    update_commit(s, i);
}

/* A follower got the primary's message: it acks it, or tells its epoch. */
static void on_append(sim_t *s, const msg_t *m)
{
    node_t *d = &s->nd[m->to];
    msg_t a = {0};
    bool accept;

    apply(s, m->to, bq_el_on_primary(&d->e, s->now, m->from, m->epoch, &accept));
    if (accept) {
        if (is_data(s, m->to))
            d->mine = max_pos(d->mine, m->pos);
        bq_el_raise_floor(&d->e, m->commit);
    } else if (m->epoch >= d->e.epoch) {
        return;
    }
    a.kind = M_ACK;
    a.from = m->to;
    a.to = m->from;
    a.epoch = d->e.epoch;
    a.sent_at = m->sent_at;
    a.pos = d->mine;
    sim_send(s, a);
}

static void on_ack(sim_t *s, const msg_t *m)
{
    node_t *d = &s->nd[m->to];

    apply(s, m->to, bq_el_on_ack(&d->e, s->now, m->from, m->epoch, m->sent_at));
    if (d->e.role == BQ_EL_PRIMARY && m->epoch == d->e.epoch) {
        d->acked[m->from] = max_pos(d->acked[m->from], m->pos);
        update_commit(s, m->to);
    }
}

static void deliver(sim_t *s, msg_t *m)
{
    node_t *d = &s->nd[m->to];
    msg_t r = {0};

    if (!d->up)
        return;
    if (d->paused_until > s->now) {
        m->at = d->paused_until; /* waits in the socket */
        s->q[s->nq++] = *m;
        return;
    }
    switch (m->kind) {
    case M_REQ:
        r.kind = M_REPLY;
        r.from = m->to;
        r.to = m->from;
        apply(s, m->to, bq_el_on_request(&d->e, s->now, m->from, &m->req, d->mine, &r.rep));
        sim_send(s, r);
        break;
    case M_REPLY:
        apply(s, m->to, bq_el_on_reply(&d->e, s->now, m->from, &m->rep, d->mine));
        break;
    case M_APPEND:
        on_append(s, m);
        break;
    case M_ACK:
        on_ack(s, m);
        break;
    }
}

/* Delivers every message due at now, earliest first. */
static void deliver_due(sim_t *s)
{
    for (;;) {
        size_t best = s->nq;
        msg_t m;

        for (size_t k = 0; k < s->nq; k++)
            if (s->q[k].at <= s->now && (best == s->nq || s->q[k].at < s->q[best].at))
                best = k;
        if (best == s->nq)
            return;
        m = s->q[best];
        s->q[best] = s->q[--s->nq];
        deliver(s, &m);
        check_acks(s);
    }
}

static void restart(sim_t *s, size_t i)
{
    node_t *d = &s->nd[i];

    bq_el_init(&d->e, &s->cfg[i], d->d_epoch, d->d_voted, sim_rand(s), s->now);
    d->up = true;
    d->paused_until = 0;
    d->commit = pos(0, 0);
    memset(d->acked, 0, sizeof(d->acked));
}

/* Ticks every running node, checking that nothing happens before its
 * deadline, and sends the primaries' heartbeats. */
static void run_timers(sim_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        node_t *d = &s->nd[i];
        int64_t next;
        unsigned eff;

        if (!d->up && s->now >= d->down_until)
            restart(s, i);
        if (!d->up || d->paused_until > s->now)
            continue;
        next = bq_el_next_deadline(&d->e);
        eff = bq_el_tick(&d->e, s->now, d->mine);
        if (s->now < next)
            assert_int_equal(eff, 0);
        apply(s, i, eff);
        if (d->e.role == BQ_EL_PRIMARY && s->now >= d->next_hb)
            heartbeat(s, i);
        check_acks(s);
    }
}

static void new_losses(sim_t *s)
{
    static const unsigned choice[] = {0, 0, 0, 10, 30, 100};

    for (size_t a = 0; a < s->n; a++)
        for (size_t b = 0; b < s->n; b++)
            s->loss[a][b] = choice[sim_rand(s) % 6];
}

/* Ends a phase: a calm one must end with one primary that all follow. */
static void next_phase(sim_t *s)
{
    if (s->calm) {
        int leader = -1;
        for (size_t i = 0; i < s->n; i++)
            if (bq_el_may_ack(&s->nd[i].e, s->now))
                leader = (int)i;
        assert_true(leader >= 0);
        for (size_t i = 0; i < s->n; i++) {
            assert_int_equal(s->nd[i].e.primary, leader);
            assert_true(s->nd[i].e.epoch == s->nd[leader].e.epoch);
        }
        s->calms++;
        new_losses(s);
        s->phase_end = s->now + sim_range(s, 5 * T, 20 * T);
    } else {
        for (size_t i = 0; i < s->n; i++) {
            if (!s->nd[i].up)
                restart(s, i);
            s->nd[i].paused_until = 0;
        }
        s->phase_end = s->now + SIM_CALM;
    }
    s->calm = !s->calm;
}

/* Chaos: crashes (only the durable state and the log survive) and pauses. */
static void inject_faults(sim_t *s)
{
    uint64_t r = sim_rand(s) % 200;
    size_t i = (size_t)(sim_rand(s) % s->n);
    node_t *d = &s->nd[i];

    if (s->calm || !d->up)
        return;
    if (r <= 1) { /* half of them restart at once: just after an ack */
        d->up = false;
        d->down_until = s->now + sim_range(s, 1, sim_rand(s) % 2 ? T / 4 : 2 * T);
    } else if (r <= 3) {
        new_losses(s);
    } else if (r == 4 && d->paused_until <= s->now) {
        d->paused_until = s->now + sim_range(s, 1, 3 * T);
    }
}

/* The next instant: the earliest event, at most a random step away. */
static void advance(sim_t *s)
{
    int64_t next = s->phase_end;

    for (size_t k = 0; k < s->nq; k++)
        if (s->q[k].at < next)
            next = s->q[k].at;
    for (size_t i = 0; i < s->n; i++) {
        const node_t *d = &s->nd[i];
        int64_t t = !d->up                     ? d->down_until
                    : d->paused_until > s->now ? d->paused_until
                                               : bq_el_next_deadline(&d->e);
        if (t < next)
            next = t;
        if (d->up && d->e.role == BQ_EL_PRIMARY && d->next_hb < next)
            next = d->next_hb;
    }
    if (next > s->now + T / 8)
        next = s->now + sim_range(s, 1, T / 8);
    s->now = next > s->now ? next : s->now + 1;
}

static void simulate(size_t n, bool witness, uint64_t seed, int steps, size_t *leads, size_t *calms)
{
    sim_t *s = calloc(1, sizeof(*s));

    assert_non_null(s);
    s->n = n;
    s->witness = witness;
    s->rng = seed * 0x2545f4914f6cdd1du + 1;
    memset(s->leader_of, -1, sizeof(s->leader_of));
    memset(s->vote, -1, sizeof(s->vote));
    s->calm = true;
    s->phase_end = SIM_CALM;
    for (size_t i = 0; i < n; i++) {
        s->cfg[i] = config(n, i, is_data(s, i), true);
        s->nd[i].d_voted = -1;
        restart(s, i);
    }
    for (int step = 0; step < steps; step++) {
        advance(s);
        check_acks(s);
        if (s->now >= s->phase_end)
            next_phase(s);
        inject_faults(s);
        deliver_due(s);
        run_timers(s);
    }
    *leads += s->leads;
    *calms += s->calms;
    free(s);
}

static void run_sims(size_t n, bool witness, uint64_t seeds)
{
    size_t leads = 0, calms = 0;

    for (uint64_t seed = 1; seed <= seeds; seed++)
        simulate(n, witness, seed, 12000, &leads, &calms);
    /* Failovers happened, and every calm phase ended with a primary. */
    assert_true(leads > 2 * seeds);
    assert_true(calms >= seeds);
}

static void test_sim_three(void **state)
{
    (void)state;
    run_sims(3, false, SIM_SEEDS);
}

static void test_sim_five(void **state)
{
    (void)state;
    run_sims(5, false, SIM_SEEDS);
}

static void test_sim_witness(void **state)
{
    (void)state;
    run_sims(3, true, SIM_SEEDS / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pos_and_names),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_vote_once_per_epoch),
        cmocka_unit_test(test_log_comparison),
        cmocka_unit_test(test_witness),
        cmocka_unit_test(test_election_flow),
        cmocka_unit_test(test_prevote),
        cmocka_unit_test(test_higher_epoch_steps_down),
        cmocka_unit_test(test_real_vote_waits_after_primary),
        cmocka_unit_test(test_known_primary_holds_the_epoch),
        cmocka_unit_test(test_split_vote_stands_again),
        cmocka_unit_test(test_check_quorum),
        cmocka_unit_test(test_one_way_loss),
        cmocka_unit_test(test_pause_without_tick),
        cmocka_unit_test(test_manual_mode),
        cmocka_unit_test(test_single_voter),
        cmocka_unit_test(test_better_log_stands_sooner),
        cmocka_unit_test(test_below_floor_does_not_stand),
        cmocka_unit_test(test_epoch_ceiling),
        cmocka_unit_test(test_bad_indices),
        cmocka_unit_test(test_on_epoch),
        cmocka_unit_test(test_sim_three),
        cmocka_unit_test(test_sim_five),
        cmocka_unit_test(test_sim_witness),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
