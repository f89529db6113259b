/* Unit tests of the primary's commit point (replication/commit.c): one and
 * two standbys needing one and two acknowledgements, acks out of order and
 * going backwards, disconnects and reconnects with less data, the fallback
 * (WAITING -> DEGRADED or REFUSING at exactly the timeout, and back to sync
 * after a catch-up), and a randomized comparison with a small reference
 * model that also checks the invariants: the commit point never goes back,
 * never passes the local release point, and, while sync is in force, every
 * advance is covered by need standbys' flushed LSNs. Also: standbys that
 * stall without disconnecting, the primary's own fsync wanted at once, and
 * witnesses' floors in the degraded majority rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "replication/commit.h"

#define T 1000 /* the timeout of these tests, ns */

static void ack(bq_commit_t *c, size_t i, uint64_t flushed, int64_t now)
{
    bq_commit_ack(c, i, flushed, flushed, flushed, now);
}

static void test_off(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 2, 0, BQ_FALLBACK_REFUSE, T, 5, 0);
    assert_int_equal(c.state, BQ_SYNC_OFF);
    assert_int_equal(c.commit, 5);
    bq_commit_logged(&c, 9);
    assert_int_equal(bq_commit_update(&c, 9, 10 * T), 9);
    assert_int_equal(c.state, BQ_SYNC_OFF);
    assert_int_equal(c.short_since, -1);
    assert_true(bq_commit_next_deadline(&c) == INT64_MAX);
    assert_string_equal(bq_commit_state_name(c.state), "off");
}

static void test_one_standby_needing_one(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    assert_true(bq_commit_next_deadline(&c) == T);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 0, 1);
    assert_int_equal(c.sb[0].target, 10);
    assert_int_equal(bq_commit_in_sync(&c), 0);
    assert_int_equal(bq_commit_update(&c, 10, 2), 0);
    ack(&c, 0, 5, 3);
    assert_int_equal(bq_commit_update(&c, 10, 4), 5);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    ack(&c, 0, 10, 5);
    assert_int_equal(bq_commit_in_sync(&c), 1);
    assert_int_equal(bq_commit_update(&c, 10, 6), 10);
    assert_int_equal(c.state, BQ_SYNC_ON);
    assert_int_equal(c.short_since, -1);
    assert_true(bq_commit_next_deadline(&c) == INT64_MAX);
    assert_string_equal(bq_commit_state_name(c.state), "sync");
    /* The local release point limits it too. */
    bq_commit_logged(&c, 20);
    ack(&c, 0, 20, 7);
    assert_int_equal(bq_commit_update(&c, 15, 8), 15);
    assert_int_equal(bq_commit_update(&c, 20, 9), 20);
}

static void test_two_standbys(void **state)
{
    (void)state;
    bq_commit_t one, two;
    bq_commit_init(&one, 2, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_init(&two, 2, 2, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_t *cs[] = {&one, &two};
    for (size_t k = 0; k < 2; k++) {
        bq_commit_logged(cs[k], 100);
        bq_commit_connected(cs[k], 0, 0, 1);
        bq_commit_connected(cs[k], 1, 0, 1);
        ack(cs[k], 0, 40, 2);
        ack(cs[k], 1, 70, 2);
    }
    /* Need 1: the highest flushed; need 2: the second highest. */
    assert_int_equal(bq_commit_update(&one, 100, 3), 70);
    assert_int_equal(bq_commit_update(&two, 100, 3), 40);
    for (size_t k = 0; k < 2; k++)
        ack(cs[k], 1, 100, 4);
    assert_int_equal(bq_commit_update(&one, 100, 5), 100);
    assert_int_equal(one.state, BQ_SYNC_ON);
    assert_int_equal(bq_commit_update(&two, 100, 5), 40);
    assert_int_equal(two.state, BQ_SYNC_WAITING);
    ack(&two, 0, 100, 6);
    assert_int_equal(bq_commit_update(&two, 100, 7), 100);
    assert_int_equal(two.state, BQ_SYNC_ON);
    assert_int_equal(bq_commit_in_sync(&two), 2);
}

/* Automatic failover: the primary is one of the need + 1 copies only up to
 * its durable LSN (a lazy fsync would otherwise let a power loss forget an
 * acknowledged record that only one other node holds). */
static void test_primary_counts_when_durable(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 2, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    c.self_counts = true;
    bq_commit_logged(&c, 100);
    bq_commit_connected(&c, 0, 0, 1);
    bq_commit_connected(&c, 1, 0, 1);
    ack(&c, 0, 100, 2);
    ack(&c, 1, 30, 2);
    /* Copies: standby 0 at 100, standby 1 at 30, the primary at 0. */
    assert_int_equal(bq_commit_update(&c, 100, 3), 30);
    bq_commit_self_durable(&c, 60);
    assert_int_equal(bq_commit_update(&c, 100, 4), 60);
    bq_commit_self_durable(&c, 50); /* never backwards */
    assert_int_equal(c.self_durable, 60);
    /* Both standbys hold it: the primary's fsync is not needed. */
    ack(&c, 1, 100, 5);
    assert_int_equal(bq_commit_update(&c, 100, 6), 100);
    /* Without self_counts the same positions give the highest standby. */
    bq_commit_init(&c, 2, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_logged(&c, 100);
    bq_commit_connected(&c, 0, 0, 1);
    ack(&c, 0, 100, 2);
    assert_int_equal(bq_commit_update(&c, 100, 3), 100);
}

static void test_acks_out_of_order(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_logged(&c, 30);
    bq_commit_connected(&c, 0, 0, 1);
    bq_commit_ack(&c, 0, 20, 8, 6, 2);
    bq_commit_ack(&c, 0, 12, 5, 9, 3); /* a late ack, partly older */
    assert_int_equal(c.sb[0].written, 20);
    assert_int_equal(c.sb[0].flushed, 8);
    assert_int_equal(c.sb[0].applied, 9);
    assert_int_equal(c.sb[0].acked_at, 3);
    assert_int_equal(bq_commit_update(&c, 30, 4), 8);
    ack(&c, 0, 0, 5);
    assert_int_equal(bq_commit_update(&c, 30, 6), 8);
    assert_int_equal(c.sb[0].flushed, 8);
}

static void test_reconnect_with_less(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    assert_int_equal(bq_commit_in_sync(&c), 1); /* nothing to catch up */
    assert_int_equal(bq_commit_update(&c, 10, 2), 10);
    assert_int_equal(c.state, BQ_SYNC_ON);
    bq_commit_disconnected(&c, 0, 3);
    assert_int_equal(bq_commit_in_sync(&c), 0);
    assert_false(c.sb[0].in_sync);
    assert_int_equal(bq_commit_update(&c, 10, 4), 10);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    assert_true(bq_commit_next_deadline(&c) == 4 + T);
    /* It lost data: its flushed LSN goes back, the commit point does not. */
    bq_commit_logged(&c, 12);
    bq_commit_connected(&c, 0, 4, 5);
    assert_int_equal(c.sb[0].flushed, 4);
    assert_int_equal(c.sb[0].written, 4);
    assert_int_equal(c.sb[0].applied, 4);
    assert_int_equal(c.sb[0].target, 12);
    assert_int_equal(bq_commit_update(&c, 12, 6), 10);
    ack(&c, 0, 11, 7);
    assert_int_equal(bq_commit_update(&c, 12, 8), 11);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    ack(&c, 0, 12, 9);
    assert_int_equal(bq_commit_update(&c, 12, 10), 12);
    assert_int_equal(c.state, BQ_SYNC_ON);
}

static void test_disconnected_ack_stays_durable(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 2, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 0, 1);
    bq_commit_connected(&c, 1, 0, 1);
    ack(&c, 0, 10, 2);
    ack(&c, 1, 10, 2);
    bq_commit_logged(&c, 15);
    ack(&c, 0, 15, 3);
    bq_commit_disconnected(&c, 0, 4);
    /* Standby 1 keeps sync on; standby 0 holds 15 durably. */
    assert_int_equal(bq_commit_update(&c, 15, 5), 15);
    assert_int_equal(c.state, BQ_SYNC_ON);
    /* An ack reaching a disconnected standby does not bring it in sync. */
    bq_commit_disconnected(&c, 1, 6);
    ack(&c, 1, 15, 7);
    assert_false(c.sb[1].in_sync);
    assert_int_equal(c.sb[1].flushed, 15);
    assert_int_equal(bq_commit_in_sync(&c), 0);
    assert_int_equal(bq_commit_update(&c, 15, 8), 15);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
}

static void test_waiting_to_degraded(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_ASYNC, T, 0, 100);
    bq_commit_logged(&c, 5);
    assert_int_equal(bq_commit_update(&c, 5, 100 + T - 1), 0);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    assert_true(bq_commit_next_deadline(&c) == 100 + T);
    assert_int_equal(bq_commit_update(&c, 5, 100 + T), 5);
    assert_int_equal(c.state, BQ_SYNC_DEGRADED);
    assert_true(bq_commit_next_deadline(&c) == INT64_MAX);
    assert_string_equal(bq_commit_state_name(c.state), "degraded");
    bq_commit_logged(&c, 50);
    assert_int_equal(bq_commit_update(&c, 50, 100 + T + 1), 50);
    /* A standby catches up: sync again, from the commit point on. */
    bq_commit_connected(&c, 0, 20, 100 + T + 2);
    assert_int_equal(bq_commit_update(&c, 50, 100 + T + 3), 50);
    assert_int_equal(c.state, BQ_SYNC_DEGRADED);
    ack(&c, 0, 50, 100 + T + 4);
    bq_commit_logged(&c, 60);
    assert_int_equal(bq_commit_update(&c, 60, 100 + T + 5), 50);
    assert_int_equal(c.state, BQ_SYNC_ON);
    ack(&c, 0, 60, 100 + T + 6);
    assert_int_equal(bq_commit_update(&c, 60, 100 + T + 7), 60);
}

static void test_waiting_to_refusing(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    assert_int_equal(bq_commit_update(&c, 10, 2), 10);
    bq_commit_disconnected(&c, 0, 1000);
    bq_commit_logged(&c, 12);
    assert_int_equal(bq_commit_update(&c, 12, 1000), 10);
    assert_int_equal(c.short_since, 1000);
    assert_int_equal(bq_commit_update(&c, 12, 1000 + T - 1), 10);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    assert_int_equal(bq_commit_update(&c, 12, 1000 + T), 10);
    assert_int_equal(c.state, BQ_SYNC_REFUSING);
    assert_true(bq_commit_next_deadline(&c) == INT64_MAX);
    assert_string_equal(bq_commit_state_name(c.state), "refusing");
    /* Back to sync after the catch-up; the replies waiting go out. */
    bq_commit_connected(&c, 0, 10, 1000 + T + 1);
    assert_int_equal(bq_commit_update(&c, 12, 1000 + T + 2), 10);
    assert_int_equal(c.state, BQ_SYNC_REFUSING);
    ack(&c, 0, 12, 1000 + T + 3);
    assert_int_equal(bq_commit_update(&c, 12, 1000 + T + 4), 12);
    assert_int_equal(c.state, BQ_SYNC_ON);
    assert_int_equal(c.short_since, -1);
    /* A new short period starts its own timeout. */
    bq_commit_disconnected(&c, 0, 5000);
    assert_int_equal(bq_commit_update(&c, 12, 5000), 12);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    assert_true(bq_commit_next_deadline(&c) == 5000 + T);
}

static void test_never_decreases(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_ASYNC, T, 7, 0);
    assert_int_equal(c.commit, 7);
    assert_int_equal(bq_commit_update(&c, 3, 1), 7); /* local release below it */
    assert_int_equal(bq_commit_update(&c, 9, T), 9);
    assert_int_equal(bq_commit_update(&c, 8, T + 1), 9);
    bq_commit_connected(&c, 0, 9, T + 2);
    assert_int_equal(c.state, BQ_SYNC_DEGRADED);
    assert_int_equal(bq_commit_update(&c, 9, T + 3), 9);
    assert_int_equal(c.state, BQ_SYNC_ON);
    bq_commit_connected(&c, 0, 1, T + 4); /* flushed back to 1 */
    assert_int_equal(bq_commit_update(&c, 9, T + 5), 9);
}

static void test_need_above_standbys(void **state)
{
    (void)state;
    bq_commit_t c, a;
    bq_commit_init(&c, 1, 2, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_init(&a, 1, 2, BQ_FALLBACK_ASYNC, T, 0, 0);
    bq_commit_t *cs[] = {&c, &a};
    for (size_t k = 0; k < 2; k++) {
        bq_commit_logged(cs[k], 10);
        bq_commit_connected(cs[k], 0, 10, 1);
        assert_int_equal(bq_commit_update(cs[k], 10, 2), 0);
        assert_int_equal(cs[k]->state, BQ_SYNC_WAITING);
    }
    assert_int_equal(bq_commit_update(&c, 10, T), 0);
    assert_int_equal(c.state, BQ_SYNC_REFUSING);
    assert_int_equal(bq_commit_update(&a, 10, T), 10);
    assert_int_equal(a.state, BQ_SYNC_DEGRADED);
}

static void test_bad_index_and_names(void **state)
{
    (void)state;
    bq_commit_t c, before;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    memcpy(&before, &c, sizeof(c));
    bq_commit_connected(&c, 1, 5, 1);
    bq_commit_ack(&c, 1, 5, 5, 5, 1);
    bq_commit_disconnected(&c, 7, 1);
    assert_memory_equal(&before, &c, sizeof(c));
    assert_string_equal(bq_commit_state_name(BQ_SYNC_WAITING), "waiting");
    assert_string_equal(bq_commit_state_name((bq_sync_state_t)99), "unknown");
}

/* A standby that stops acknowledging without closing its connection (a
 * lost machine, a hung disk) holds replies back; after the timeout without
 * the commit point moving, the fallback comes into force, every waiting
 * reply is released (async), and the standby must catch up with what was
 * logged when it was dropped to count again. */
static void test_silent_standby_stalls_then_degrades(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_ASYNC, T, 0, 0);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    assert_int_equal(bq_commit_update(&c, 10, 2), 10);
    assert_int_equal(c.state, BQ_SYNC_ON);
    assert_true(bq_commit_next_deadline(&c) == INT64_MAX);
    /* Records it never acknowledges: held since 100. */
    bq_commit_logged(&c, 20);
    assert_int_equal(bq_commit_update(&c, 20, 100), 10);
    assert_int_equal(c.held_since, 100);
    assert_true(bq_commit_next_deadline(&c) == 100 + T);
    /* Progress restarts the clock. */
    ack(&c, 0, 15, 150);
    assert_int_equal(bq_commit_update(&c, 20, 150), 15);
    assert_int_equal(c.held_since, 150);
    ack(&c, 0, 15, 500); /* a heartbeat ack: no progress */
    assert_int_equal(bq_commit_update(&c, 20, 150 + T - 1), 15);
    assert_int_equal(c.state, BQ_SYNC_ON);
    assert_int_equal(bq_commit_update(&c, 20, 150 + T), 20);
    assert_int_equal(c.state, BQ_SYNC_DEGRADED);
    assert_false(c.sb[0].in_sync);
    assert_int_equal(c.sb[0].target, 20);
    assert_int_equal(bq_commit_in_sync(&c), 0);
    assert_true(bq_commit_next_deadline(&c) == INT64_MAX);
    /* It stays degraded until the standby has everything logged when it was
     * dropped, then sync is back by itself. */
    bq_commit_logged(&c, 30);
    assert_int_equal(bq_commit_update(&c, 30, 2000), 30);
    ack(&c, 0, 19, 2001);
    assert_int_equal(bq_commit_update(&c, 30, 2002), 30);
    assert_int_equal(c.state, BQ_SYNC_DEGRADED);
    ack(&c, 0, 20, 2003);
    bq_commit_logged(&c, 40);
    assert_int_equal(bq_commit_update(&c, 40, 2004), 30);
    assert_int_equal(c.state, BQ_SYNC_ON);
    ack(&c, 0, 40, 2005);
    assert_int_equal(bq_commit_update(&c, 40, 2006), 40);
}

/* Strict: a stalled standby makes the node refuse writes; the replies that
 * were waiting keep waiting for a standby. */
static void test_silent_standby_strict_refuses(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_REFUSE, T, 0, 0);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    bq_commit_logged(&c, 12);
    assert_int_equal(bq_commit_update(&c, 12, 10), 10);
    assert_int_equal(bq_commit_update(&c, 12, 10 + T), 10);
    assert_int_equal(c.state, BQ_SYNC_REFUSING);
    assert_int_equal(bq_commit_floor_lsn(&c), 10);
    ack(&c, 0, 12, 20 + T);
    assert_int_equal(bq_commit_update(&c, 12, 21 + T), 12);
    assert_int_equal(c.state, BQ_SYNC_ON);
}

/* Nothing held back (no writes, or standbys ahead of the local release
 * point): no clock runs, however long. */
static void test_idle_never_stalls(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 1, 1, BQ_FALLBACK_ASYNC, T, 0, 0);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    assert_int_equal(bq_commit_update(&c, 10, 2), 10);
    assert_int_equal(bq_commit_update(&c, 10, 100 * T), 10);
    assert_int_equal(c.state, BQ_SYNC_ON);
    assert_int_equal(c.held_since, -1);
    /* Held back by the local release point (the primary's own fsync under
     * -f 0), not by the standby: no clock either. */
    bq_commit_logged(&c, 20);
    ack(&c, 0, 20, 100 * T + 1);
    assert_int_equal(bq_commit_update(&c, 15, 100 * T + 2), 15);
    assert_int_equal(bq_commit_update(&c, 15, 200 * T), 15);
    assert_int_equal(c.state, BQ_SYNC_ON);
    assert_int_equal(c.held_since, -1);
}

/* Two standbys needed, one stalls: the healthy one is dropped too only when
 * it is behind, and counts again as soon as it has caught up; sync needs
 * both. */
static void test_stall_with_two_needed(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 2, 2, BQ_FALLBACK_ASYNC, T, 0, 0);
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    bq_commit_connected(&c, 1, 10, 1);
    bq_commit_logged(&c, 20);
    ack(&c, 1, 20, 2);
    assert_int_equal(bq_commit_update(&c, 20, 3), 10);
    assert_int_equal(bq_commit_update(&c, 20, 3 + T), 20);
    assert_int_equal(c.state, BQ_SYNC_DEGRADED);
    assert_false(c.sb[0].in_sync);
    assert_true(c.sb[1].in_sync); /* it had everything */
    assert_int_equal(bq_commit_in_sync(&c), 1);
}

/* Automatic failover, three nodes, one standby gone: sync holds with the
 * other standby and the primary's own fsync, which must then start at once
 * (group commit) rather than on the -f timer. */
static void test_self_durable_wanted(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 2, 1, BQ_FALLBACK_ASYNC, T, 0, 0);
    c.self_counts = true;
    bq_commit_logged(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    bq_commit_connected(&c, 1, 10, 1);
    assert_int_equal(bq_commit_update(&c, 10, 2), 10);
    assert_true(bq_commit_wants_self_durable(&c)); /* the fastest two of three */
    bq_commit_disconnected(&c, 1, 3);
    assert_int_equal(bq_commit_update(&c, 10, 4), 10);
    assert_int_equal(c.state, BQ_SYNC_ON);
    assert_true(bq_commit_wants_self_durable(&c));
    bq_commit_logged(&c, 20);
    ack(&c, 0, 20, 5);
    assert_int_equal(bq_commit_update(&c, 20, 6), 10); /* the primary's fsync */
    assert_int_equal(c.held_since, -1);                /* not held by the standbys */
    bq_commit_self_durable(&c, 20);
    assert_int_equal(bq_commit_update(&c, 20, 7), 20);
    /* Without self_counts the primary's fsync is never waited for here. */
    bq_commit_t m;
    bq_commit_init(&m, 2, 1, BQ_FALLBACK_ASYNC, T, 0, 0);
    assert_false(bq_commit_wants_self_durable(&m));
}

/* Two data nodes and a witness: degraded with self_counts is Raft's
 * majority rule, the witness's durable floor standing in for a copy; the
 * floor the witnesses are asked to promise is the primary's durable LSN. */
static void test_witness_floor_degraded(void **state)
{
    (void)state;
    bq_commit_t c;
    bq_commit_init(&c, 2, 1, BQ_FALLBACK_ASYNC, T, 0, 0);
    c.self_counts = true;
    assert_int_equal(c.majority, 2);
    bq_commit_logged(&c, 10);
    bq_commit_self_durable(&c, 10);
    bq_commit_connected(&c, 0, 10, 1);
    bq_commit_witness(&c, 1);
    assert_int_equal(bq_commit_in_sync(&c), 1); /* the witness never counts */
    assert_int_equal(bq_commit_update(&c, 10, 2), 10);
    assert_int_equal(bq_commit_floor_lsn(&c), 10);
    bq_commit_floor(&c, 1, 7);
    bq_commit_ack(&c, 1, 50, 50, 50, 3); /* a witness's ack moves nothing */
    assert_int_equal(c.sb[1].flushed, 0);
    /* The standby dies. */
    bq_commit_disconnected(&c, 0, 10);
    bq_commit_logged(&c, 30);
    bq_commit_self_durable(&c, 30);
    assert_int_equal(bq_commit_update(&c, 30, 10), 10);
    assert_int_equal(c.state, BQ_SYNC_WAITING);
    assert_int_equal(bq_commit_update(&c, 30, 10 + T), 10);
    assert_int_equal(c.state, BQ_SYNC_DEGRADED);
    assert_true(bq_commit_wants_self_durable(&c));
    assert_int_equal(bq_commit_floor_lsn(&c), 30);
    /* Acknowledged once the witness promises the floor. */
    bq_commit_floor(&c, 1, 25);
    assert_int_equal(bq_commit_update(&c, 30, 11 + T), 25);
    bq_commit_floor(&c, 1, 20); /* never backwards */
    assert_int_equal(c.sb[1].floor, 25);
    bq_commit_floor(&c, 1, 30);
    assert_int_equal(bq_commit_update(&c, 30, 12 + T), 30);
    /* And never past the primary's own durable LSN. */
    bq_commit_logged(&c, 40);
    bq_commit_floor(&c, 1, 40);
    assert_int_equal(bq_commit_update(&c, 40, 13 + T), 30);
    /* Manual failover: degraded means the local release point. */
    bq_commit_t m;
    bq_commit_init(&m, 1, 1, BQ_FALLBACK_ASYNC, T, 0, 0);
    bq_commit_logged(&m, 9);
    assert_int_equal(bq_commit_update(&m, 9, T), 9);
    assert_int_equal(bq_commit_floor_lsn(&m), 0);
}

/* Randomized sequences, checked against invariants computed independently:
 * the commit point never goes back nor past the local release point; every
 * advance while sync is in force is covered by need standbys (need + 1
 * copies with self_counts), and while degraded with self_counts by a
 * majority of copies and witness floors; while sync is on, no reply the
 * primary could release waits a timeout or more without the commit point
 * moving, and while waiting no longer than the timeout since too few
 * standbys were in sync; degraded without self_counts releases everything. */

static uint64_t rng_state = UINT64_C(0x2545F4914F6CDD1D);

static uint64_t rnd(uint64_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (rng_state * UINT64_C(2685821657736338717)) % n;
}

typedef struct model {
    size_t n;
    unsigned need;
    bool self_counts;
    bool witness[BQ_COMMIT_MAX_STANDBYS];
    uint64_t flushed[BQ_COMMIT_MAX_STANDBYS]; /* a witness: its floor */
    uint64_t last_lsn, release, durable;
    int64_t now;
    int64_t moved_at; /* when the commit point last moved or began to be held */
} model_t;

/* How many copies hold lsn: standbys' flushed (witnesses' floors when
 * floors count), and the primary's durable LSN when self_counts. */
static size_t copies(const model_t *m, uint64_t lsn, bool floors)
{
    size_t k = m->self_counts && m->durable >= lsn;
    for (size_t i = 0; i < m->n; i++)
        k += (!m->witness[i] || floors) && m->flushed[i] >= lsn;
    return k;
}

/* One random event, applied to both the model and c. */
static void random_event(model_t *m, bq_commit_t *c)
{
    size_t i = (size_t)rnd(m->n ? m->n : 1);
    switch (rnd(8)) {
    case 0:
        m->last_lsn += rnd(5);
        bq_commit_logged(c, m->last_lsn);
        break;
    case 1:
        m->release += rnd(m->last_lsn - m->release + 1);
        break;
    case 2:
        if (m->n == 0 || m->witness[i])
            break;
        m->flushed[i] = rnd(m->last_lsn + 1);
        bq_commit_connected(c, i, m->flushed[i], m->now);
        break;
    case 3:
        if (m->n == 0)
            break;
        bq_commit_disconnected(c, i, m->now);
        break;
    case 4: {
        if (m->n == 0)
            break;
        uint64_t f = rnd(m->last_lsn + 1);
        if (m->witness[i] && f <= m->durable) {
            if (f > m->flushed[i])
                m->flushed[i] = f;
            bq_commit_floor(c, i, f);
        } else if (!m->witness[i]) {
            if (f > m->flushed[i])
                m->flushed[i] = f;
            bq_commit_ack(c, i, f, f, f, m->now);
        }
        break;
    }
    case 5:
        if (m->self_counts) {
            m->durable += rnd(m->last_lsn - m->durable + 1);
            bq_commit_self_durable(c, m->durable);
        }
        break;
    default:
        m->now += (int64_t)rnd(T / 2);
        break;
    }
}

static void check_step(model_t *m, bq_commit_t *c, uint64_t before)
{
    uint64_t after = bq_commit_update(c, m->release, m->now);
    bq_sync_state_t st = c->state;
    uint64_t own = m->self_counts && m->durable < m->release ? m->durable : m->release;
    size_t need = m->need + (m->self_counts ? 1 : 0);

    assert_true(after >= before);
    assert_true(after <= m->release);
    if (after > before && (st == BQ_SYNC_ON || st == BQ_SYNC_WAITING || st == BQ_SYNC_REFUSING))
        assert_true(copies(m, after, false) >= need);
    if (after > before && st == BQ_SYNC_DEGRADED && m->self_counts)
        assert_true(copies(m, after, true) >= (m->n + 1) / 2 + 1);
    if (st == BQ_SYNC_OFF || (st == BQ_SYNC_DEGRADED && !m->self_counts))
        assert_int_equal(after, m->release);
    if (after > before || after >= own)
        m->moved_at = m->now;
    if (st == BQ_SYNC_ON && after < own && c->held_since >= 0)
        assert_true(m->now - c->held_since < T && c->held_since >= m->moved_at - T);
    if (st == BQ_SYNC_ON)
        assert_true(bq_commit_in_sync(c) >= m->need);
    if (st == BQ_SYNC_WAITING) {
        assert_true(bq_commit_in_sync(c) < m->need);
        assert_true(m->now - c->short_since < T);
        assert_true(bq_commit_next_deadline(c) == c->short_since + T);
    }
    if (st == BQ_SYNC_OFF)
        assert_int_equal(m->need, 0);
}

static void test_random_sequences(void **state)
{
    (void)state;
    for (int run = 0; run < 3000; run++) {
        model_t m;
        bq_commit_t c;
        memset(&m, 0, sizeof(m));
        m.n = (size_t)rnd(4);
        m.need = (unsigned)rnd(m.n + 2); /* sometimes more than n */
        m.self_counts = rnd(2);
        m.last_lsn = m.release = m.durable = rnd(3);
        bq_commit_init(&c, m.n, m.need, rnd(2) ? BQ_FALLBACK_ASYNC : BQ_FALLBACK_REFUSE, T,
                       m.release, 0);
        c.self_counts = m.self_counts;
        bq_commit_self_durable(&c, m.durable);
        for (size_t i = 0; i < m.n; i++)
            if (m.self_counts && rnd(3) == 0) {
                m.witness[i] = true;
                bq_commit_witness(&c, i);
            }
        for (int step = 0; step < 300; step++) {
            uint64_t before = c.commit;
            random_event(&m, &c);
            check_step(&m, &c, before);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_one_standby_needing_one),
        cmocka_unit_test(test_two_standbys),
        cmocka_unit_test(test_primary_counts_when_durable),
        cmocka_unit_test(test_acks_out_of_order),
        cmocka_unit_test(test_reconnect_with_less),
        cmocka_unit_test(test_disconnected_ack_stays_durable),
        cmocka_unit_test(test_waiting_to_degraded),
        cmocka_unit_test(test_waiting_to_refusing),
        cmocka_unit_test(test_never_decreases),
        cmocka_unit_test(test_need_above_standbys),
        cmocka_unit_test(test_bad_index_and_names),
        cmocka_unit_test(test_silent_standby_stalls_then_degrades),
        cmocka_unit_test(test_silent_standby_strict_refuses),
        cmocka_unit_test(test_idle_never_stalls),
        cmocka_unit_test(test_stall_with_two_needed),
        cmocka_unit_test(test_self_durable_wanted),
        cmocka_unit_test(test_witness_floor_degraded),
        cmocka_unit_test(test_random_sequences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
