/* Unit tests of the job engine (protocol/engine.c, commands.c, put.c,
 * transitions.c, timers.c, tube.c, client.c), driven through sessions by the
 * header-only harness in engine_harness.h: commands go in as protocol text,
 * replies come out of the send hook, time is advanced by hand and
 * bq_engine_tick() runs the timers. No socket, no clock, no sleep.
 *
 * Expected behaviour is beanstalkd 1.13 (prot.c, conn.c, ms.c) as described
 * in the reference report, sections 1.5-1.15. After every command and every
 * tick the harness recounts the engine's structures and compares them with
 * its counters (h_check); h_done() checks again while closing everything.
 *
 * Tests that show a divergence from beanstalkd are kept but skipped with a
 * "BUG: ..." message; set BQ_RUN_KNOWN_BUGS=1 to run them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine_harness.h"

/* ---- put ---- */

static void engine_put_makes_job_ready(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "put 5 0 10 5\r\nhello\r\n", "INSERTED 1\r\n");
    bq_job_t *j = h_job(h, 1);
    assert_non_null(j);
    assert_int_equal(j->state, BQ_JOB_READY);
    assert_string_equal(h_job_stat(h, a, 1, "state"), "ready");
    assert_int_equal(h_job_stat_int(h, a, 1, "pri"), 5);
    assert_int_equal(h_job_stat_int(h, a, 1, "ttr"), 10);
    h_cmd(h, a, "peek-ready\r\n", h_job_reply("FOUND", 1, "hello"));
    h_cmd(h, a, "peek 1\r\n", h_job_reply("FOUND", 1, "hello"));
    assert_int_equal(h->e->ready_ct, 1);
    assert_int_equal(h->e->urgent_ct, 1);
    assert_int_equal(h->e->total_jobs_ct, 1);
    h_done(h);
}

static void engine_put_with_delay_makes_job_delayed(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    int64_t t0 = h->now.mono;
    uint64_t id = h_put(h, a, 1, 5, 10, "later");
    assert_int_equal(h_job(h, id)->state, BQ_JOB_DELAYED);
    assert_string_equal(h_job_stat(h, a, id, "state"), "delayed");
    assert_int_equal(h_job_stat_int(h, a, id, "delay"), 5);
    assert_int_equal(h_job_stat_int(h, a, id, "time-left"), 5);
    h_cmd(h, a, "peek-ready\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "peek-delayed\r\n", h_job_reply("FOUND", id, "later"));
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(5));
    h_cmd(h, a, "reserve-with-timeout 0\r\n", "");
    assert_true(h_blocked(h, a));
    h_tick(h); /* the timeout of 0 ends at this tick */
    h_expect(h, a, "TIMED_OUT\r\n");
    /* one nanosecond early: still delayed */
    h_at(h, t0 + H_S(5) - 1);
    assert_int_equal(h_job(h, id)->state, BQ_JOB_DELAYED);
    assert_int_equal(h_job_stat_int(h, a, id, "time-left"), 0);
    h_at(h, t0 + H_S(5));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "later"));
    h_done(h);
}

static void engine_put_ttr_zero_becomes_one(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 0, "x");
    assert_int_equal(h_job_stat_int(h, a, id, "ttr"), 1);
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "x"));
    h_at(h, t0 + H_S(1));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    h_done(h);
}

static void engine_delayed_jobs_become_ready_in_deadline_order(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    int64_t t0 = h->now.mono;
    uint64_t j3 = h_put(h, a, 0, 3, 10, "three");
    uint64_t j1 = h_put(h, a, 9, 1, 10, "one");
    uint64_t j2 = h_put(h, a, 5, 2, 10, "two");
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(1));
    assert_int_equal(h_advance(h, H_S(1)), t0 + H_S(2));
    assert_int_equal(h_job(h, j1)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, j2)->state, BQ_JOB_DELAYED);
    assert_int_equal(h_advance(h, H_S(1)), t0 + H_S(3));
    assert_int_equal(h_job(h, j2)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, j3)->state, BQ_JOB_DELAYED);
    assert_int_equal(h_advance(h, H_S(1)), BQ_NEVER);
    assert_int_equal(h_job(h, j3)->state, BQ_JOB_READY);
    /* a late tick moves every due job at once */
    h_put(h, a, 0, 1, 10, "d1");
    h_put(h, a, 0, 2, 10, "d2");
    h_advance(h, H_S(10));
    assert_int_equal(h->e->delayed_ct, 0);
    assert_int_equal(h->e->ready_ct, 5);
    h_done(h);
}

/* ---- reserve ---- */

static void engine_reserve_takes_lowest_pri_then_lowest_id(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 10, 0, 10, "a");
    h_put(h, a, 5, 0, 10, "b");
    h_put(h, a, 5, 0, 10, "c");
    h_put(h, a, 0, 0, 10, "d");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 4, "d"));
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 2, "b"));
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 3, "c"));
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "a"));
    assert_int_equal(h_job(h, 4)->reserves, 1);
    assert_int_equal(h->e->reserved_ct, 4);
    assert_int_equal(h_client(h, a)->reserved.len, 4);
    h_done(h);
}

static void engine_reserve_across_watched_tubes_takes_min_pri_id(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int p = h_open(h), w = h_open(h);
    h_cmd(h, p, "use a\r\n", "USING a\r\n");
    h_put(h, p, 5, 0, 10, "a5"); /* 1 */
    h_cmd(h, p, "use b\r\n", "USING b\r\n");
    h_put(h, p, 1, 0, 10, "b1"); /* 2 */
    h_put(h, p, 5, 0, 10, "b5"); /* 3 */
    h_cmd(h, p, "use c\r\n", "USING c\r\n");
    h_put(h, p, 0, 0, 10, "c0"); /* 4: in a tube w does not watch */
    h_cmd(h, w, "watch a\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "watch b\r\n", "WATCHING 3\r\n");
    h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", 2, "b1"));
    /* equal pri across tubes: the lower id wins */
    h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", 1, "a5"));
    h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", 3, "b5"));
    h_cmd(h, w, "reserve-with-timeout 0\r\n", "");
    h_tick(h);
    h_expect(h, w, "TIMED_OUT\r\n");
    assert_int_equal(h_job(h, 4)->state, BQ_JOB_READY);
    h_done(h);
}

static void engine_reserve_pri_compare_is_unsigned(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int p = h_open(h), w = h_open(h);
    h_cmd(h, p, "use a\r\n", "USING a\r\n");
    h_put(h, p, 4294967295u, 0, 10, "max");  /* 1 */
    h_put(h, p, 2147483648u, 0, 10, "2^31"); /* 2 */
    h_cmd(h, p, "use b\r\n", "USING b\r\n");
    h_put(h, p, 2147483647u, 0, 10, "2^31-1"); /* 3 */
    h_put(h, p, 4294967294u, 0, 10, "max-1");  /* 4 */
    h_cmd(h, p, "use default\r\n", "USING default\r\n");
    h_put(h, p, 1024, 0, 10, "1024"); /* 5 */
    h_cmd(h, w, "watch a\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "watch b\r\n", "WATCHING 3\r\n");
    const uint64_t order[] = {5, 3, 2, 4, 1};
    const char *bodies[] = {"1024", "2^31-1", "2^31", "max-1", "max"};
    for (int i = 0; i < 5; i++)
        h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", order[i], bodies[i]));
    /* pri >= 1024 is not urgent; 1023 is */
    h_put(h, p, 1023, 0, 10, "u");
    assert_int_equal(h->e->urgent_ct, 1);
    h_done(h);
}

static void engine_reserve_blocks_until_a_job_arrives(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int w = h_open(h), p = h_open(h);
    h_cmd(h, w, "reserve\r\n", "");
    assert_true(h_blocked(h, w));
    assert_int_equal(h->e->waiting_ct, 1);
    h_advance(h, H_S(3600));
    assert_true(h_blocked(h, w));
    assert_int_equal(h->conns[w].wakes, 0);
    uint64_t id = h_put(h, p, 0, 0, 10, "job");
    h_expect(h, w, h_job_reply("RESERVED", id, "job"));
    assert_int_equal(h->conns[w].wakes, 1);
    assert_false(h_blocked(h, w));
    assert_int_equal(h->e->waiting_ct, 0);
    assert_int_equal(h->e->ready_ct, 0);
    h_done(h);
}

/* ---- reserve-job ---- */

static void engine_reserve_job_of_ready_job(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 0, 0, 10, "one");
    uint64_t id = h_put(h, a, 9, 0, 10, "two");
    h_cmd(h, a, "reserve-job 2\r\n", h_job_reply("RESERVED", id, "two"));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_RESERVED);
    assert_int_equal(h_job_stat_int(h, a, id, "reserves"), 1);
    assert_int_equal(h_job_stat_int(h, a, id, "time-left"), 10);
    assert_int_equal(h->e->workers, 1);
    h_done(h);
}

static void engine_reserve_job_of_delayed_job(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 100, 10, "d");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", id, "d"));
    assert_int_equal(h->e->delayed_ct, 0);
    assert_int_equal(bq_engine_next_due(h->e), h->now.mono + H_S(10));
    /* released with delay 0 it becomes ready */
    h_cmd(h, a, "release 1 0 0\r\n", "RELEASED\r\n");
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    h_done(h);
}

static void engine_reserve_job_of_buried_job(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "b");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "b"));
    h_cmd(h, a, "bury 1 7\r\n", "BURIED\r\n");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", id, "b"));
    assert_int_equal(h->e->buried_ct, 0);
    assert_int_equal(h_job_stat_int(h, a, id, "reserves"), 2);
    h_done(h);
}

static void engine_reserve_job_of_reserved_or_missing_job_is_not_found(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "r");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", id, "r"));
    h_cmd(h, a, "reserve-job 1\r\n", "NOT_FOUND\r\n"); /* by itself */
    h_cmd(h, b, "reserve-job 1\r\n", "NOT_FOUND\r\n"); /* by another */
    h_cmd(h, b, "reserve-job 2\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "reserve-job 18446744073709551615\r\n", "NOT_FOUND\r\n");
    /* a failed reserve-job does not make b a worker */
    assert_false(h_client(h, b)->worker);
    h_done(h);
}

static void engine_reserve_job_never_answers_deadline_soon(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 0, 0, 1, "soon");
    uint64_t other = h_put(h, a, 0, 0, 10, "other");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", 1, "soon"));
    /* job 1 is inside its safety margin at once (ttr 1) */
    h_cmd(h, a, "reserve-job 2\r\n", h_job_reply("RESERVED", other, "other"));
    h_done(h);
}

static void engine_reserve_job_ignores_pause(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "p");
    h_cmd(h, a, "pause-tube default 60\r\n", "PAUSED\r\n");
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", id, "p"));
    h_done(h);
}

/* ---- delete ---- */

static void engine_delete_in_every_state(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h);
    uint64_t ready = h_put(h, a, 0, 0, 10, "ready");
    uint64_t delayed = h_put(h, a, 0, 50, 10, "delayed");
    uint64_t buried = h_put(h, a, 0, 0, 10, "buried");
    h_cmd(h, a, "reserve-job 3\r\n", h_job_reply("RESERVED", buried, "buried"));
    h_cmd(h, a, "bury 3 0\r\n", "BURIED\r\n");
    uint64_t reserved = h_put(h, a, 0, 0, 10, "reserved");
    h_cmd(h, a, "reserve-job 4\r\n", h_job_reply("RESERVED", reserved, "reserved"));
    /* ready, delayed and buried jobs: anyone may delete them */
    h_cmd(h, b, "delete 1\r\n", "DELETED\r\n");
    h_cmd(h, b, "delete 2\r\n", "DELETED\r\n");
    h_cmd(h, b, "delete 3\r\n", "DELETED\r\n");
    assert_null(h_job(h, ready));
    assert_null(h_job(h, delayed));
    assert_null(h_job(h, buried));
    /* the delayed job's timer is gone too */
    assert_int_equal(bq_engine_next_due(h->e), h->now.mono + H_S(10));
    /* a reserved job: only its reserver */
    h_cmd(h, b, "delete 4\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "delete 4\r\n", "DELETED\r\n");
    h_cmd(h, a, "delete 4\r\n", "NOT_FOUND\r\n");
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    assert_int_equal(h_stat(h, a, "stats-tube default\r\n", "cmd-delete"), 4);
    assert_int_equal(h_stat(h, a, "stats\r\n", "cmd-delete"), 6);
    assert_int_equal(h_stat(h, a, "stats\r\n", "total-jobs"), 4);
    assert_int_equal(h->e->jobs.len, 0);
    h_done(h);
}

static void engine_non_owner_cannot_touch_a_reserved_job(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "mine");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "mine"));
    h_cmd(h, b, "delete 1\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "release 1 0 0\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "bury 1 0\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "touch 1\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "kick-job 1\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "reserve-job 1\r\n", "NOT_FOUND\r\n");
    /* peek and stats-job work on any job */
    h_cmd(h, b, "peek 1\r\n", h_job_reply("FOUND", id, "mine"));
    assert_string_equal(h_job_stat(h, b, id, "state"), "reserved");
    assert_int_equal(h_job(h, id)->state, BQ_JOB_RESERVED);
    assert_int_equal(h_job(h, id)->releases + h_job(h, id)->buries, 0);
    h_done(h);
}

/* ---- release ---- */

static void engine_release_without_delay_makes_job_ready(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 5, 0, 10, "r");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "r"));
    h_cmd(h, a, "release 1 2000 0\r\n", "RELEASED\r\n");
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    assert_int_equal(h_job_stat_int(h, a, id, "pri"), 2000);
    assert_int_equal(h_job_stat_int(h, a, id, "releases"), 1);
    assert_int_equal(h->e->urgent_ct, 0); /* pri 2000 is not urgent */
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    h_cmd(h, a, "release 1 0 0\r\n", "NOT_FOUND\r\n"); /* not reserved any more */
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "r"));
    h_cmd(h, a, "release 1 3 0\r\n", "RELEASED\r\n");
    assert_int_equal(h_job_stat_int(h, a, id, "releases"), 2);
    assert_int_equal(h_job_stat_int(h, a, id, "reserves"), 2);
    assert_int_equal(h->e->urgent_ct, 1);
    h_done(h);
}

static void engine_release_with_delay_makes_job_delayed(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 5, 0, 10, "r");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "r"));
    h_advance(h, H_S(1));
    int64_t t1 = h->now.mono;
    h_cmd(h, a, "release 1 7 3\r\n", "RELEASED\r\n");
    assert_int_equal(h_job(h, id)->state, BQ_JOB_DELAYED);
    assert_string_equal(h_job_stat(h, a, id, "state"), "delayed");
    assert_int_equal(h_job_stat_int(h, a, id, "delay"), 3);
    assert_int_equal(h_job_stat_int(h, a, id, "pri"), 7);
    assert_int_equal(h_job_stat_int(h, a, id, "releases"), 1);
    assert_int_equal(h->e->reserved_ct, 0);
    assert_int_equal(h->e->delayed_ct, 1);
    assert_int_equal(bq_engine_next_due(h->e), t1 + H_S(3));
    h_at(h, t1 + H_S(3) - 1);
    assert_int_equal(h_job(h, id)->state, BQ_JOB_DELAYED);
    h_at(h, t1 + H_S(3));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    assert_int_equal(h_job_stat_int(h, a, id, "delay"), 3);
    h_done(h);
}

static void engine_release_hands_job_to_a_waiter(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    uint64_t id = h_put(h, a, 5, 0, 10, "r");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "r"));
    h_cmd(h, w, "reserve\r\n", "");
    h_cmd(h, a, "release 1 5 0\r\n", "RELEASED\r\n");
    h_expect(h, w, h_job_reply("RESERVED", id, "r"));
    assert_int_equal(h->conns[w].wakes, 1);
    assert_true(bq__job_reserved_by(h_job(h, id), h_client(h, w)));
    h_done(h);
}

/* ---- bury and kick ---- */

static void engine_bury_sets_pri_and_counts(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 5, 0, 10, "b");
    h_cmd(h, a, "bury 1 1\r\n", "NOT_FOUND\r\n"); /* ready, not reserved */
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "b"));
    h_cmd(h, a, "bury 1 77\r\n", "BURIED\r\n");
    assert_int_equal(h_job(h, id)->state, BQ_JOB_BURIED);
    assert_string_equal(h_job_stat(h, a, id, "state"), "buried");
    assert_int_equal(h_job_stat_int(h, a, id, "pri"), 77);
    assert_int_equal(h_job_stat_int(h, a, id, "buries"), 1);
    assert_int_equal(h_job_stat_int(h, a, id, "time-left"), 0);
    assert_int_equal(h->e->buried_ct, 1);
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    h_cmd(h, a, "peek-buried\r\n", h_job_reply("FOUND", id, "b"));
    h_done(h);
}

/* Buries jobs ids[0..n) (each put and reserved by a) in that order. */
static void bury_in_order(harness_t *h, int a, const uint64_t *ids, int n)
{
    for (int i = 0; i < n; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "reserve-job %" PRIu64 "\r\n", ids[i]);
        h_send(h, a, cmd);
        assert_true(strncmp(h_out(h, a), "RESERVED ", 9) == 0);
        h_clear(h, a);
        snprintf(cmd, sizeof cmd, "bury %" PRIu64 " 0\r\n", ids[i]);
        h_cmd(h, a, cmd, "BURIED\r\n");
    }
}

static void engine_buried_jobs_are_kicked_in_fifo_order(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    for (int i = 0; i < 4; i++)
        h_put(h, a, (uint32_t)(100 - i), 0, 10, "x");
    const uint64_t order[4] = {3, 1, 4, 2};
    bury_in_order(h, a, order, 4);
    h_cmd(h, a, "peek-buried\r\n", h_job_reply("FOUND", 3, "x"));
    for (int i = 0; i < 4; i++) {
        h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
        assert_int_equal(h_job(h, order[i])->state, BQ_JOB_READY);
        for (int k = i + 1; k < 4; k++)
            assert_int_equal(h_job(h, order[k])->state, BQ_JOB_BURIED);
    }
    h_cmd(h, a, "kick 1\r\n", "KICKED 0\r\n");
    assert_int_equal(h_job_stat_int(h, a, 3, "kicks"), 1);
    assert_int_equal(h_job_stat_int(h, a, 3, "buries"), 1);
    h_done(h);
}

static void engine_kick_takes_buried_before_delayed(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 0, 0, 10, "b");
    h_put(h, a, 0, 100, 10, "d1");
    h_put(h, a, 0, 200, 10, "d2");
    const uint64_t b[1] = {1};
    bury_in_order(h, a, b, 1);
    h_cmd(h, a, "kick 10\r\n", "KICKED 1\r\n");
    assert_int_equal(h->e->delayed_ct, 2);
    h_cmd(h, a, "kick 10\r\n", "KICKED 2\r\n");
    h_cmd(h, a, "kick 10\r\n", "KICKED 0\r\n");
    assert_int_equal(h->e->ready_ct, 3);
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    h_done(h);
}

static void engine_kick_respects_its_bound(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = h_put(h, a, 0, 0, 10, "k");
    bury_in_order(h, a, ids, 5);
    h_cmd(h, a, "kick 0\r\n", "KICKED 0\r\n");
    h_cmd(h, a, "kick 2\r\n", "KICKED 2\r\n");
    assert_int_equal(h->e->buried_ct, 3);
    h_cmd(h, a, "kick 4294967296\r\n", "KICKED 0\r\n"); /* truncated to 0 */
    h_cmd(h, a, "kick -1\r\n", "KICKED 3\r\n");         /* UINT_MAX */
    h_done(h);
}

static void engine_kick_takes_delayed_by_deadline_and_keeps_delay(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t d30 = h_put(h, a, 0, 30, 10, "30");
    uint64_t d10 = h_put(h, a, 0, 10, 10, "10");
    uint64_t d20 = h_put(h, a, 0, 20, 10, "20");
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    assert_int_equal(h_job(h, d10)->state, BQ_JOB_READY);
    assert_int_equal(bq_engine_next_due(h->e), h->now.mono + H_S(20));
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    assert_int_equal(h_job(h, d20)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, d30)->state, BQ_JOB_DELAYED);
    h_cmd(h, a, "kick-job 1\r\n", "KICKED\r\n");
    assert_int_equal(h_job(h, d30)->state, BQ_JOB_READY);
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    assert_int_equal(h_job_stat_int(h, a, d10, "delay"), 10);
    assert_int_equal(h_job_stat_int(h, a, d30, "delay"), 30);
    assert_int_equal(h_job_stat_int(h, a, d30, "kicks"), 1);
    assert_int_equal(h_job_stat_int(h, a, d30, "time-left"), 0);
    h_done(h);
}

static void engine_kick_works_on_the_used_tube_only(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 0, 5, 10, "in default");
    h_cmd(h, a, "use other\r\n", "USING other\r\n");
    h_cmd(h, a, "kick 10\r\n", "KICKED 0\r\n");
    h_put(h, a, 0, 5, 10, "in other");
    h_cmd(h, a, "kick 10\r\n", "KICKED 1\r\n");
    assert_int_equal(h_job(h, 1)->state, BQ_JOB_DELAYED);
    assert_int_equal(h_job(h, 2)->state, BQ_JOB_READY);
    h_done(h);
}

static void engine_kick_job_of_each_state(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h);
    uint64_t ready = h_put(h, a, 0, 0, 10, "r");
    uint64_t delayed = h_put(h, a, 0, 9, 10, "d");
    uint64_t buried = h_put(h, a, 0, 0, 10, "b");
    const uint64_t bl[1] = {buried};
    bury_in_order(h, a, bl, 1);
    uint64_t reserved = h_put(h, a, 0, 0, 10, "v");
    h_cmd(h, a, "reserve-job 4\r\n", h_job_reply("RESERVED", reserved, "v"));
    h_cmd(h, b, "use elsewhere\r\n", "USING elsewhere\r\n");
    /* kick-job works on any tube, from any connection */
    h_cmd(h, b, "kick-job 1\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "kick-job 2\r\n", "KICKED\r\n");
    h_cmd(h, b, "kick-job 3\r\n", "KICKED\r\n");
    h_cmd(h, b, "kick-job 4\r\n", "NOT_FOUND\r\n");
    h_cmd(h, b, "kick-job 5\r\n", "NOT_FOUND\r\n");
    assert_int_equal(h_job(h, ready)->kicks, 0);
    assert_int_equal(h_job(h, delayed)->kicks, 1);
    assert_int_equal(h_job(h, buried)->kicks, 1);
    assert_int_equal(h->e->ready_ct, 3);
    h_done(h);
}

/* ---- touch ---- */

static void engine_touch_extends_deadline_and_keeps_reserves(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 5, "t");
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "t"));
    h_at(h, t0 + H_S(3));
    assert_int_equal(h_job_stat_int(h, a, id, "time-left"), 2);
    h_cmd(h, a, "touch 1\r\n", "TOUCHED\r\n");
    assert_int_equal(h_job_stat_int(h, a, id, "time-left"), 5);
    assert_int_equal(h_job_stat_int(h, a, id, "reserves"), 1);
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(8));
    h_at(h, t0 + H_S(5)); /* the old deadline passes harmlessly */
    assert_int_equal(h_job(h, id)->state, BQ_JOB_RESERVED);
    h_at(h, t0 + H_S(8));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, id)->timeouts, 1);
    h_cmd(h, a, "touch 1\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "touch 99\r\n", "NOT_FOUND\r\n");
    h_done(h);
}

/* touch reorders the client's reservations: the other job expires first. */
static void engine_touch_reorders_reservation_deadlines(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    int64_t t0 = h->now.mono;
    uint64_t j1 = h_put(h, a, 0, 0, 4, "one");
    uint64_t j2 = h_put(h, a, 1, 0, 6, "two");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", j1, "one"));
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", j2, "two"));
    h_at(h, t0 + H_S(3));
    h_cmd(h, a, "touch 1\r\n", "TOUCHED\r\n"); /* j1 now due at t0+7 */
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(6));
    h_at(h, t0 + H_S(6));
    assert_int_equal(h_job(h, j2)->state, BQ_JOB_READY);
    assert_int_equal(h_job(h, j1)->state, BQ_JOB_RESERVED);
    h_at(h, t0 + H_S(7));
    assert_int_equal(h_job(h, j1)->state, BQ_JOB_READY);
    h_done(h);
}

/* ---- TTR ---- */

static void engine_ttr_expiry_at_exactly_the_deadline(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 2, "ttr");
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "ttr"));
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(2));
    h_at(h, t0 + H_S(2) - 1);
    assert_int_equal(h_job(h, id)->state, BQ_JOB_RESERVED);
    assert_int_equal(h_job_stat_int(h, a, id, "time-left"), 0);
    h_at(h, t0 + H_S(2));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    assert_int_equal(h_job_stat_int(h, a, id, "timeouts"), 1);
    assert_int_equal(h_job_stat_int(h, a, id, "releases"), 0);
    assert_int_equal(h_stat(h, a, "stats\r\n", "job-timeouts"), 1);
    assert_int_equal(h_stat(h, a, "stats\r\n", "current-jobs-reserved"), 0);
    assert_int_equal(h_stat(h, a, "stats\r\n", "current-jobs-ready"), 1);
    assert_string_equal(h_out(h, a), ""); /* no message about it */
    /* a second expiry counts again */
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "ttr"));
    h_advance(h, H_S(2));
    assert_int_equal(h_job(h, id)->timeouts, 2);
    assert_int_equal(h->e->timeout_ct, 2);
    h_done(h);
}

static void engine_ttr_expiry_hands_job_to_a_waiter(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 3, "again");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "again"));
    h_cmd(h, w, "reserve\r\n", "");
    h_advance(h, H_S(3));
    h_expect(h, w, h_job_reply("RESERVED", id, "again"));
    assert_string_equal(h_out(h, a), "");
    assert_true(bq__job_reserved_by(h_job(h, id), h_client(h, w)));
    assert_int_equal(h_job(h, id)->reserves, 2);
    assert_int_equal(h_job(h, id)->timeouts, 1);
    h_done(h);
}

static void engine_ttr_expiries_of_one_late_tick(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    for (uint32_t ttr = 1; ttr <= 5; ttr++)
        h_put(h, a, 0, 0, ttr, "x");
    for (int i = 0; i < 5; i++) {
        h_send(h, a, "reserve\r\n");
        h_clear(h, a);
    }
    assert_int_equal(h->e->reserved_ct, 5);
    h_advance(h, H_S(3));
    assert_int_equal(h->e->reserved_ct, 2);
    assert_int_equal(h->e->timeout_ct, 3);
    h_advance(h, H_S(100));
    assert_int_equal(h->e->reserved_ct, 0);
    assert_int_equal(h->e->timeout_ct, 5);
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    h_done(h);
}

/* ---- DEADLINE_SOON ---- */

static void engine_deadline_soon_precheck_without_ready_jobs(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 2, "d");
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "d"));
    /* exactly one safety margin before the deadline */
    h_at(h, t0 + H_S(1));
    h_cmd(h, a, "reserve\r\n", "DEADLINE_SOON\r\n");
    assert_false(h_blocked(h, a));
    h_cmd(h, a, "reserve-with-timeout 5\r\n", "DEADLINE_SOON\r\n");
    assert_int_equal(h_job(h, id)->state, BQ_JOB_RESERVED);
    assert_int_equal(h->conns[a].wakes, 0);
    assert_int_equal(h_stat(h, a, "stats\r\n", "cmd-reserve"), 2);
    assert_int_equal(h_stat(h, a, "stats\r\n", "cmd-reserve-with-timeout"), 1);
    h_done(h);
}

static void engine_deadline_soon_precheck_with_ready_job_reserves_it(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 1, "d");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "d"));
    uint64_t next = h_put(h, a, 0, 0, 10, "next");
    /* within the margin, but a ready job exists */
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", next, "next"));
    h_done(h);
}

/* The pre-check counts ready jobs of paused tubes (beanstalkd's conn_ready
 * ignores pause), so the reserve waits and gets DEADLINE_SOON at the tick. */
static void engine_deadline_soon_precheck_ignores_pause(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 1, "d");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "d"));
    h_put(h, a, 0, 0, 10, "paused");
    h_cmd(h, a, "pause-tube default 100\r\n", "PAUSED\r\n");
    h_cmd(h, a, "reserve\r\n", "");
    assert_true(h_blocked(h, a));
    h_tick(h);
    h_expect(h, a, "DEADLINE_SOON\r\n");
    assert_int_equal(h->conns[a].wakes, 1);
    h_done(h);
}

static void engine_deadline_soon_while_waiting_one_second_before(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 3, "d");
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "d"));
    h_cmd(h, a, "reserve\r\n", "");
    assert_true(h_blocked(h, a));
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(2));
    h_at(h, t0 + H_S(2) - 1);
    assert_string_equal(h_out(h, a), "");
    h_at(h, t0 + H_S(2));
    h_expect(h, a, "DEADLINE_SOON\r\n");
    assert_false(h_blocked(h, a));
    assert_int_equal(h->conns[a].wakes, 1);
    assert_int_equal(h_job(h, id)->state, BQ_JOB_RESERVED);
    /* not waiting any more: the job expires at its deadline */
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(3));
    h_at(h, t0 + H_S(3));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    h_done(h);
}

static void engine_deadline_soon_while_waiting_with_a_later_timeout(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "d");
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "d"));
    /* the timeout comes first */
    h_cmd(h, a, "reserve-with-timeout 2\r\n", "");
    h_at(h, t0 + H_S(2));
    h_expect(h, a, "TIMED_OUT\r\n");
    /* now the safety margin comes first */
    h_cmd(h, a, "reserve-with-timeout 100\r\n", "");
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(9));
    h_at(h, t0 + H_S(9));
    h_expect(h, a, "DEADLINE_SOON\r\n");
    h_done(h);
}

/* ---- reserve-with-timeout ---- */

static void engine_reserve_with_timeout_zero(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "reserve-with-timeout 0\r\n", "");
    assert_true(h_blocked(h, a));
    assert_int_equal(bq_engine_next_due(h->e), h->now.mono);
    h_tick(h);
    h_expect(h, a, "TIMED_OUT\r\n");
    assert_int_equal(h->conns[a].wakes, 1);
    uint64_t id = h_put(h, a, 0, 0, 10, "now");
    h_cmd(h, a, "reserve-with-timeout 0\r\n", h_job_reply("RESERVED", id, "now"));
    h_done(h);
}

static void engine_reserve_with_timeout_n_ends_at_the_deadline(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve-with-timeout 7\r\n", "");
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(7));
    h_at(h, t0 + H_S(7) - 1);
    assert_string_equal(h_out(h, a), "");
    assert_true(h_blocked(h, a));
    h_at(h, t0 + H_S(7));
    h_expect(h, a, "TIMED_OUT\r\n");
    assert_false(h_blocked(h, a));
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    h_done(h);
}

static void engine_reserve_with_timeout_gets_a_job_before_the_deadline(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), p = h_open(h);
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "reserve-with-timeout 7\r\n", "");
    h_at(h, t0 + H_S(6));
    uint64_t id = h_put(h, p, 0, 0, 10, "in time");
    h_expect(h, a, h_job_reply("RESERVED", id, "in time"));
    /* the old timeout does not fire later */
    h_at(h, t0 + H_S(7));
    assert_string_equal(h_out(h, a), "");
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(16));
    h_done(h);
}

/* ---- half-close ---- */

static void engine_halfclose_while_waiting_times_out(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_send(h, a, "reserve\r\nlist-tube-used\r\n");
    assert_true(h_blocked(h, a));
    assert_string_equal(h_out(h, a), "");
    bq_session_eof(h->conns[a].s, h->now);
    h_expect(h, a, "TIMED_OUT\r\n");
    assert_false(h_blocked(h, a));
    assert_int_equal(h->e->waiting_ct, 0);
    /* commands sent before the half-close still run */
    h_pump(h);
    h_expect(h, a, "USING default\r\n");
    h_done(h);
}

static void engine_halfclosed_reserve_times_out_at_once(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), p = h_open(h);
    bq_session_eof(h->conns[a].s, h->now);
    assert_string_equal(h_out(h, a), "");
    h_cmd(h, a, "reserve\r\n", "TIMED_OUT\r\n");
    h_cmd(h, a, "reserve-with-timeout 10\r\n", "TIMED_OUT\r\n");
    assert_false(h_blocked(h, a));
    /* a ready job is still delivered */
    uint64_t id = h_put(h, p, 0, 0, 10, "x");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "x"));
    h_done(h);
}

/* ---- pause-tube ---- */

static void engine_pause_tube_delays_reserve_until_the_pause_ends(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "p");
    int64_t t0 = h->now.mono;
    h_cmd(h, a, "pause-tube default 2\r\n", "PAUSED\r\n");
    h_cmd(h, w, "reserve\r\n", "");
    assert_true(h_blocked(h, w));
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(2));
    h_at(h, t0 + H_S(2) - 1);
    assert_string_equal(h_out(h, w), "");
    h_at(h, t0 + H_S(2));
    h_expect(h, w, h_job_reply("RESERVED", id, "p"));
    assert_int_equal(h_stat(h, a, "stats-tube default\r\n", "pause"), 0);
    h_done(h);
}

static void engine_reserve_with_timeout_on_paused_tube_times_out(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 0, 0, 10, "p");
    h_cmd(h, a, "pause-tube default 5\r\n", "PAUSED\r\n");
    h_cmd(h, a, "reserve-with-timeout 1\r\n", "");
    h_advance(h, H_S(1));
    h_expect(h, a, "TIMED_OUT\r\n");
    assert_int_equal(h->e->ready_ct, 1);
    h_done(h);
}

static void engine_pause_zero_unpauses_at_the_next_tick(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "p");
    h_cmd(h, a, "pause-tube default 100\r\n", "PAUSED\r\n");
    h_cmd(h, w, "reserve\r\n", "");
    h_advance(h, H_S(10));
    assert_string_equal(h_out(h, w), "");
    /* pause 0 is a pause of 1 ns: it ends at the next tick after that */
    h_cmd(h, a, "pause-tube default 0\r\n", "PAUSED\r\n");
    assert_int_equal(bq_engine_next_due(h->e), h->now.mono + 1);
    assert_string_equal(h_out(h, w), "");
    h_advance(h, 1);
    h_expect(h, w, h_job_reply("RESERVED", id, "p"));
    assert_int_equal(h_stat(h, a, "stats-tube default\r\n", "cmd-pause-tube"), 2);
    h_done(h);
}

static void engine_paused_tube_allows_peek_kick_and_reserve_job(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    uint64_t r = h_put(h, a, 0, 0, 10, "r");
    uint64_t b = h_put(h, a, 0, 0, 10, "b");
    const uint64_t bl[1] = {b};
    bury_in_order(h, a, bl, 1);
    h_cmd(h, a, "pause-tube default 100\r\n", "PAUSED\r\n");
    h_cmd(h, a, "peek-ready\r\n", h_job_reply("FOUND", r, "r"));
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    assert_int_equal(h_job(h, b)->state, BQ_JOB_READY);
    /* the kicked job is ready but the tube is paused: reserve waits */
    h_cmd(h, w, "reserve-with-timeout 1\r\n", "");
    h_advance(h, H_S(1));
    h_expect(h, w, "TIMED_OUT\r\n");
    h_cmd(h, w, "reserve-job 2\r\n", h_job_reply("RESERVED", b, "b"));
    h_cmd(h, a, "delete 1\r\n", "DELETED\r\n");
    h_done(h);
}

static void engine_paused_tube_delayed_jobs_still_become_ready(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    int64_t t0 = h->now.mono;
    uint64_t id = h_put(h, a, 0, 2, 10, "d");
    h_cmd(h, a, "pause-tube default 5\r\n", "PAUSED\r\n");
    h_cmd(h, w, "reserve\r\n", "");
    h_at(h, t0 + H_S(2));
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    assert_string_equal(h_out(h, w), "");
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_S(5));
    h_at(h, t0 + H_S(5));
    h_expect(h, w, h_job_reply("RESERVED", id, "d"));
    h_done(h);
}

static void engine_pause_of_one_watched_tube_leaves_the_others(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int p = h_open(h), w = h_open(h);
    h_cmd(h, p, "use a\r\n", "USING a\r\n");
    h_put(h, p, 0, 0, 10, "a0");
    h_cmd(h, p, "use b\r\n", "USING b\r\n");
    h_put(h, p, 9, 0, 10, "b9");
    h_cmd(h, w, "watch a\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "watch b\r\n", "WATCHING 3\r\n");
    h_cmd(h, p, "pause-tube a 10\r\n", "PAUSED\r\n");
    assert_int_equal(h_client(h, w)->ready.len, 1);
    assert_int_equal(h_client(h, w)->ready_tubes, 2);
    h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", 2, "b9"));
    h_cmd(h, w, "reserve\r\n", "");
    h_advance(h, H_S(10));
    h_expect(h, w, h_job_reply("RESERVED", 1, "a0"));
    h_done(h);
}

static void engine_pause_tube_replies_and_counting(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "pause-tube nosuch 1\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "pause-tube -bad 1\r\n", "BAD_FORMAT\r\n");    /* counted */
    h_cmd(h, a, "pause-tube default x\r\n", "BAD_FORMAT\r\n"); /* not counted */
    h_cmd(h, a, "pause-tubedefault 1\r\n", "PAUSED\r\n");
    assert_int_equal(h_stat(h, a, "stats\r\n", "cmd-pause-tube"), 3);
    assert_int_equal(h_stat(h, a, "stats-tube default\r\n", "cmd-pause-tube"), 1);
    /* a pause while paused restarts it */
    int64_t t0 = h->now.mono;
    h_advance(h, H_MS(500));
    h_cmd(h, a, "pause-tube default 3\r\n", "PAUSED\r\n");
    assert_int_equal(bq_engine_next_due(h->e), t0 + H_MS(500) + H_S(3));
    h_done(h);
}

static void engine_pause_is_lost_when_the_tube_is_freed(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "use t\r\n", "USING t\r\n");
    h_cmd(h, a, "pause-tube t 100\r\n", "PAUSED\r\n");
    h_cmd(h, a, "use default\r\n", "USING default\r\n");
    assert_null(bq__tube_find(h->e, "t", 1));
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    h_cmd(h, a, "use t\r\n", "USING t\r\n");
    assert_int_equal(h_stat(h, a, "stats-tube t\r\n", "pause"), 0);
    assert_int_equal(h_stat(h, a, "stats-tube t\r\n", "cmd-pause-tube"), 0);
    h_done(h);
}

/* beanstalkd's process_queue unpauses every tube whose pause has ended and
 * then hands out the best (pri, id) job across all of them. */
static void engine_simultaneous_unpause_hands_out_the_best_job(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int p = h_open(h), w = h_open(h);
    h_cmd(h, p, "use a\r\n", "USING a\r\n");
    h_put(h, p, 10, 0, 10, "a10");
    h_cmd(h, p, "use b\r\n", "USING b\r\n");
    h_put(h, p, 1, 0, 10, "b1");
    h_cmd(h, p, "pause-tube a 1\r\n", "PAUSED\r\n");
    h_cmd(h, p, "pause-tube b 1\r\n", "PAUSED\r\n");
    h_cmd(h, w, "watch a\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "watch b\r\n", "WATCHING 3\r\n");
    h_cmd(h, w, "reserve\r\n", "");
    h_advance(h, H_S(1));
    h_expect(h, w, h_job_reply("RESERVED", 2, "b1"));
    h_done(h);
}

/* ---- drain mode ---- */

static void engine_drain_mode_refuses_put_after_its_body(void **state)
{
    (void)state;
    harness_t *h = h_new(10);
    int a = h_open(h), w = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "before");
    h_put(h, a, 0, 50, 10, "delayed");
    bq_engine_set_draining(h->e, true);
    assert_true(bq_engine_draining(h->e));
    /* the reply comes only once the body is complete */
    h_send(h, a, "put 0 0 10 5\r\nhel");
    assert_string_equal(h_out(h, a), "");
    h_send(h, a, "lo\r\n");
    h_expect(h, a, "DRAINING\r\n");
    /* JOB_TOO_BIG and EXPECTED_CRLF win over DRAINING */
    h_cmd(h, a, "put 0 0 10 11\r\n0123456789a\r\n", "JOB_TOO_BIG\r\n");
    h_cmd(h, a, "put 0 0 10 1\r\nxyz", "EXPECTED_CRLF\r\n");
    h_cmd(h, a, "\r\n", "UNKNOWN_COMMAND\r\n");
    /* everything else works */
    h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", id, "before"));
    h_cmd(h, w, "release 1 0 0\r\n", "RELEASED\r\n");
    h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", id, "before"));
    h_cmd(h, w, "bury 1 0\r\n", "BURIED\r\n");
    h_cmd(h, w, "kick 5\r\n", "KICKED 1\r\n");
    h_cmd(h, w, "kick 5\r\n", "KICKED 1\r\n");
    h_cmd(h, w, "delete 1\r\n", "DELETED\r\n");
    h_cmd(h, w, "use x\r\n", "USING x\r\n");
    h_cmd(h, w, "watch x\r\n", "WATCHING 2\r\n");
    assert_string_equal(h_yaml_value(h_yaml(h, w, "stats\r\n"), "draining"), "true");
    assert_int_equal(h_stat(h, w, "stats\r\n", "total-jobs"), 2);
    /* the refused put still took an id */
    assert_int_equal(h->e->next_id, 5);
    h_done(h);
}

/* ---- waiting clients ---- */

/* beanstalkd's ms_take: with waiters 1..6 and 6 jobs the order is
 * 1,2,3,6,5,4 (the take cursor advances, removal swaps in the last). */
static void engine_waiters_get_jobs_in_multiset_order(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int w[6];
    for (int i = 0; i < 6; i++) {
        w[i] = h_open(h);
        h_cmd(h, w[i], "reserve\r\n", "");
    }
    int p = h_open(h);
    assert_int_equal(h_stat(h, p, "stats-tube default\r\n", "current-waiting"), 6);
    const int order[6] = {0, 1, 2, 5, 4, 3};
    for (int k = 0; k < 6; k++) {
        char body[16];
        snprintf(body, sizeof body, "job%d", k + 1);
        uint64_t id = h_put(h, p, 0, 0, 10, body);
        for (int i = 0; i < 6; i++) {
            if (i == order[k])
                h_expect(h, w[i], h_job_reply("RESERVED", id, body));
            else
                assert_string_equal(h_out(h, w[i]), "");
        }
    }
    assert_int_equal(h->e->waiting_ct, 0);
    h_done(h);
}

/* Three waiters that each get a job before the next arrives: arrival order. */
static void engine_waiters_three_in_arrival_order(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = h_open(h);
        h_cmd(h, w[i], "reserve\r\n", "");
    }
    int p = h_open(h);
    for (int k = 0; k < 3; k++) {
        uint64_t id = h_put(h, p, 0, 0, 10, "j");
        h_expect(h, w[k], h_job_reply("RESERVED", id, "j"));
    }
    h_done(h);
}

/* A waiter served through another tube leaves the waiting set of the first
 * by swap-removal (ms_remove): [1,2,3,4] minus 2 is [1,4,3], and ms_take
 * then serves 1, 4, 3. */
static void engine_waiter_taken_elsewhere_reorders_the_multiset(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int w[4];
    for (int i = 0; i < 4; i++)
        w[i] = h_open(h);
    int p = h_open(h);
    h_cmd(h, w[1], "watch u\r\n", "WATCHING 2\r\n");
    for (int i = 0; i < 4; i++)
        h_cmd(h, w[i], "reserve\r\n", "");
    h_cmd(h, p, "use u\r\n", "USING u\r\n");
    uint64_t id = h_put(h, p, 0, 0, 10, "u");
    h_expect(h, w[1], h_job_reply("RESERVED", id, "u"));
    h_cmd(h, p, "use default\r\n", "USING default\r\n");
    const int order[3] = {0, 3, 2};
    for (int k = 0; k < 3; k++) {
        id = h_put(h, p, 0, 0, 10, "d");
        h_expect(h, w[order[k]], h_job_reply("RESERVED", id, "d"));
        for (int i = 0; i < 4; i++)
            assert_string_equal(h_out(h, w[i]), "");
    }
    h_done(h);
}

static void engine_waiter_on_several_tubes_gets_a_job_from_any(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int w = h_open(h), p = h_open(h);
    h_cmd(h, w, "watch a\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "watch b\r\n", "WATCHING 3\r\n");
    h_cmd(h, w, "watch c\r\n", "WATCHING 4\r\n");
    const char *tubes[] = {"c", "a", "default", "b"};
    for (int i = 0; i < 4; i++) {
        h_cmd(h, w, "reserve\r\n", "");
        assert_int_equal(h_stat(h, p, "stats\r\n", "current-waiting"), 1);
        char cmd[32];
        snprintf(cmd, sizeof cmd, "use %s\r\n", tubes[i]);
        h_send(h, p, cmd);
        h_clear(h, p);
        uint64_t id = h_put(h, p, 0, 0, 10, tubes[i]);
        h_expect(h, w, h_job_reply("RESERVED", id, tubes[i]));
        /* gone from every tube's waiting set */
        for (int k = 0; k < 4; k++) {
            snprintf(cmd, sizeof cmd, "stats-tube %s\r\n", tubes[k]);
            assert_int_equal(h_stat(h, p, cmd, "current-waiting"), 0);
        }
    }
    h_done(h);
}

static void engine_close_of_a_waiting_client(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int w = h_open(h), w2 = h_open(h), p = h_open(h);
    h_cmd(h, w, "watch a\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "reserve-with-timeout 100\r\n", "");
    h_cmd(h, w2, "reserve\r\n", "");
    assert_int_equal(h->e->waiting_ct, 2);
    h_close(h, w);
    assert_int_equal(h->e->waiting_ct, 1);
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    assert_null(bq__tube_find(h->e, "a", 1));
    uint64_t id = h_put(h, p, 0, 0, 10, "x");
    h_expect(h, w2, h_job_reply("RESERVED", id, "x"));
    h_close(h, w2);
    uint64_t id2 = h_put(h, p, 0, 0, 10, "y");
    assert_int_equal(h_job(h, id2)->state, BQ_JOB_READY);
    h_done(h);
}

static void engine_close_returns_reservations_to_ready(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), p = h_open(h);
    for (int i = 0; i < 3; i++)
        h_put(h, p, 0, 0, 10, "r");
    for (int i = 0; i < 3; i++) {
        h_send(h, a, "reserve\r\n");
        h_clear(h, a);
    }
    assert_int_equal(h->e->reserved_ct, 3);
    h_close(h, a);
    assert_int_equal(h->e->reserved_ct, 0);
    assert_int_equal(h->e->ready_ct, 3);
    assert_int_equal(bq_engine_next_due(h->e), BQ_NEVER);
    for (uint64_t id = 1; id <= 3; id++) {
        assert_int_equal(h_job_stat_int(h, p, id, "releases"), 0);
        assert_int_equal(h_job_stat_int(h, p, id, "timeouts"), 0);
        assert_int_equal(h_job_stat_int(h, p, id, "reserves"), 1);
    }
    assert_int_equal(h->e->timeout_ct, 0);
    h_done(h);
}

static void engine_close_hands_returned_jobs_to_waiters(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w1 = h_open(h), w2 = h_open(h);
    h_put(h, a, 0, 0, 10, "one");
    h_put(h, a, 0, 0, 10, "two");
    h_put(h, a, 0, 0, 10, "three");
    for (int i = 0; i < 3; i++) {
        h_send(h, a, "reserve\r\n");
        h_clear(h, a);
    }
    h_cmd(h, w1, "reserve\r\n", "");
    h_cmd(h, w2, "reserve\r\n", "");
    /* a's reserves left the tube's take cursor at 1 (beanstalkd's ms_take
     * on a one-element set), so the first returned job goes to w2 */
    h_close(h, a);
    h_expect(h, w2, h_job_reply("RESERVED", 1, "one"));
    h_expect(h, w1, h_job_reply("RESERVED", 2, "two"));
    assert_int_equal(h_job(h, 3)->state, BQ_JOB_READY);
    assert_int_equal(h->conns[w1].wakes, 1);
    assert_int_equal(h->conns[w2].wakes, 1);
    h_done(h);
}

/* beanstalkd returns a closing client's jobs in the order it reserved them
 * (conn.c enqueue_reserved_jobs walks the reserved list from its head), and
 * each one goes to a waiter at once. */
static void engine_close_returns_jobs_in_reservation_order(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    h_put(h, a, 0, 0, 100, "long ttr");
    h_put(h, a, 0, 0, 10, "short ttr");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 1, "long ttr"));
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", 2, "short ttr"));
    h_cmd(h, w, "reserve\r\n", "");
    h_close(h, a);
    h_expect(h, w, h_job_reply("RESERVED", 1, "long ttr"));
    h_done(h);
}

/* ---- tubes ---- */

static void engine_use_watch_ignore_replies(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "list-tube-used\r\n", "USING default\r\n");
    h_cmd(h, a, "use foo\r\n", "USING foo\r\n");
    h_cmd(h, a, "list-tube-used\r\n", "USING foo\r\n");
    h_cmd(h, a, "watch foo\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "watch foo\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "watch bar\r\n", "WATCHING 3\r\n");
    h_cmd(h, a, "list-tubes-watched\r\n", "OK 26\r\n---\n- default\n- foo\n- bar\n\r\n");
    h_cmd(h, a, "ignore default\r\n", "WATCHING 2\r\n");
    /* the last watched tube fills the hole */
    h_cmd(h, a, "list-tubes-watched\r\n", "OK 16\r\n---\n- bar\n- foo\n\r\n");
    h_cmd(h, a, "ignore nosuch\r\n", "WATCHING 2\r\n");
    assert_null(bq__tube_find(h->e, "nosuch", 6));
    h_cmd(h, a, "ignore bar\r\n", "WATCHING 1\r\n");
    h_cmd(h, a, "ignore foo\r\n", "NOT_IGNORED\r\n");
    h_cmd(h, a, "ignore default\r\n", "WATCHING 1\r\n"); /* not watched */
    h_cmd(h, a, "list-tubes-watched\r\n", "OK 10\r\n---\n- foo\n\r\n");
    h_done(h);
}

static void engine_tube_is_freed_when_nothing_refers_to_it(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h);
    /* users */
    h_cmd(h, a, "use t\r\n", "USING t\r\n");
    h_cmd(h, b, "use t\r\n", "USING t\r\n");
    h_cmd(h, a, "use default\r\n", "USING default\r\n");
    assert_non_null(bq__tube_find(h->e, "t", 1));
    h_cmd(h, b, "use default\r\n", "USING default\r\n");
    assert_null(bq__tube_find(h->e, "t", 1));
    /* watchers */
    h_cmd(h, a, "watch w\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "ignore w\r\n", "WATCHING 1\r\n");
    assert_null(bq__tube_find(h->e, "w", 1));
    /* jobs, in every state */
    h_cmd(h, a, "use j\r\n", "USING j\r\n");
    h_put(h, a, 0, 0, 10, "ready");
    h_put(h, a, 0, 10, 10, "delayed");
    h_put(h, a, 0, 0, 10, "buried");
    h_cmd(h, a, "use default\r\n", "USING default\r\n");
    const uint64_t bl[1] = {3};
    bury_in_order(h, a, bl, 1);
    h_cmd(h, a, "reserve-job 1\r\n", h_job_reply("RESERVED", 1, "ready"));
    assert_int_equal(h->e->ntubes, 2);
    h_cmd(h, a, "delete 2\r\n", "DELETED\r\n");
    h_cmd(h, a, "delete 3\r\n", "DELETED\r\n");
    assert_non_null(bq__tube_find(h->e, "j", 1)); /* the reserved job */
    h_cmd(h, a, "delete 1\r\n", "DELETED\r\n");
    assert_null(bq__tube_find(h->e, "j", 1));
    h_cmd(h, a, "stats-tube j\r\n", "NOT_FOUND\r\n");
    /* closing the only user and watcher */
    h_cmd(h, b, "use u\r\n", "USING u\r\n");
    h_cmd(h, b, "watch v\r\n", "WATCHING 2\r\n");
    assert_int_equal(h->e->ntubes, 3);
    h_close(h, b);
    assert_int_equal(h->e->ntubes, 1);
    h_done(h);
}

static void engine_default_tube_is_never_freed(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "use x\r\n", "USING x\r\n");
    h_cmd(h, a, "watch x\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "ignore default\r\n", "WATCHING 1\r\n");
    assert_int_equal(h->e->default_tube->using_ct + h->e->default_tube->nwatchers, 0);
    h_cmd(h, a, "list-tubes\r\n", "OK 18\r\n---\n- default\n- x\n\r\n");
    h_close(h, a);
    assert_int_equal(h->e->ntubes, 1);
    assert_ptr_equal(h->e->tubes[0], h->e->default_tube);
    int b = h_open(h);
    h_cmd(h, b, "stats-tube default\r\n",
          "OK 267\r\n---\nname: \"default\"\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\n"
          "current-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n"
          "total-jobs: 0\ncurrent-using: 1\ncurrent-watching: 1\ncurrent-waiting: 0\n"
          "cmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n\r\n");
    h_done(h);
}

static void engine_list_tubes_order_after_a_free(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h), c = h_open(h);
    h_cmd(h, a, "use a\r\n", "USING a\r\n");
    h_cmd(h, b, "use b\r\n", "USING b\r\n");
    h_cmd(h, c, "use c\r\n", "USING c\r\n");
    h_cmd(h, a, "list-tubes\r\n", "OK 26\r\n---\n- default\n- a\n- b\n- c\n\r\n");
    h_cmd(h, a, "use default\r\n", "USING default\r\n");
    h_cmd(h, a, "list-tubes\r\n", "OK 22\r\n---\n- default\n- c\n- b\n\r\n");
    h_cmd(h, a, "use d\r\n", "USING d\r\n");
    h_cmd(h, a, "list-tubes\r\n", "OK 26\r\n---\n- default\n- c\n- b\n- d\n\r\n");
    h_done(h);
}

/* ---- stats counters ---- */

static void engine_current_job_counters_follow_each_transition(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    const char *keys[5] = {"current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
                           "current-jobs-delayed", "current-jobs-buried"};
    struct {
        const char *cmd;
        long long want[5]; /* urgent ready reserved delayed buried */
    } steps[] = {
        {"put 1 0 10 1\r\nA\r\n", {1, 1, 0, 0, 0}},
        {"put 2000 0 10 1\r\nB\r\n", {1, 2, 0, 0, 0}},
        {"put 0 5 10 1\r\nC\r\n", {1, 2, 0, 1, 0}},
        {"reserve\r\n", {0, 1, 1, 1, 0}},
        {"bury 1 1\r\n", {0, 1, 0, 1, 1}},
        {"reserve\r\n", {0, 0, 1, 1, 1}},
        {"release 2 3 0\r\n", {1, 1, 0, 1, 1}},
        {"kick 1\r\n", {2, 2, 0, 1, 0}},
        {"kick 1\r\n", {3, 3, 0, 0, 0}},
        {"delete 1\r\n", {2, 2, 0, 0, 0}},
    };
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        h_send(h, a, steps[s].cmd);
        h_clear(h, a);
        const char *yaml = h_yaml(h, a, "stats\r\n");
        for (int k = 0; k < 5; k++) {
            const char *v = h_yaml_value(yaml, keys[k]);
            assert_non_null(v);
            if (strtoll(v, NULL, 10) != steps[s].want[k])
                fail_msg("after %s: %s is %s, want %lld", steps[s].cmd, keys[k], v,
                         steps[s].want[k]);
        }
        const char *t = h_yaml(h, a, "stats-tube default\r\n");
        long long tube_vals[5];
        for (int k = 0; k < 5; k++)
            tube_vals[k] = strtoll(h_yaml_value(t, keys[k]), NULL, 10);
        assert_memory_equal(tube_vals, steps[s].want, sizeof tube_vals);
    }
    h_done(h);
}

static long long stat_of(harness_t *h, int i, const char *key)
{
    return h_stat(h, i, "stats\r\n", key);
}

/* Arguments that do not parse: BAD_FORMAT or UNKNOWN_COMMAND, not counted. */
static void engine_cmd_counters_skip_parse_failures(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    const char *bad[] = {"put 1 2 3\r\n",
                         "peek x\r\n",
                         "peek-readyx\r\n",
                         "delete \r\n",
                         "release 1 2\r\n",
                         "use -x\r\n",
                         "watch a b\r\n",
                         "ignore\r\n",
                         "bury 1\r\n",
                         "kick x\r\n",
                         "touch 1 \r\n",
                         "stats-job\r\n",
                         "stats-tube *\r\n",
                         "list-tubesx\r\n",
                         "reserve \r\n",
                         "reserve-with-timeout -1\r\n",
                         "pause-tube default\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h_send(h, a, bad[i]);
        const char *out = h_out(h, a);
        if (strcmp(out, "BAD_FORMAT\r\n") != 0 && strcmp(out, "UNKNOWN_COMMAND\r\n") != 0)
            fail_msg("%s: got %s", bad[i], out);
        h_clear(h, a);
    }
    const char *yaml = h_yaml(h, a, "stats\r\n");
    const char *names[] = {"put",
                           "peek",
                           "peek-ready",
                           "peek-delayed",
                           "peek-buried",
                           "reserve",
                           "reserve-with-timeout",
                           "delete",
                           "release",
                           "use",
                           "watch",
                           "ignore",
                           "bury",
                           "kick",
                           "touch",
                           "stats-job",
                           "stats-tube",
                           "list-tubes",
                           "list-tube-used",
                           "list-tubes-watched",
                           "pause-tube"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "cmd-%s", names[i]);
        assert_string_equal(h_yaml_value(yaml, key), "0");
    }
    assert_string_equal(h_yaml_value(yaml, "cmd-stats"), "1");
    h_done(h);
}

/* Each command whose arguments parse counts once, whatever its reply. */
static void engine_cmd_counters_follow_beanstalkd_rules(void **state)
{
    (void)state;
    harness_t *h = h_new(10);
    int a = h_open(h);
    h_cmd(h, a, "put 0 0 10 11\r\n0123456789a\r\n", "JOB_TOO_BIG\r\n");
    assert_int_equal(stat_of(h, a, "cmd-put"), 1);
    h_cmd(h, a, "put 0 0 10 1 x\r\n", "BAD_FORMAT\r\n"); /* trailing text: counted */
    assert_int_equal(stat_of(h, a, "cmd-put"), 2);
    assert_int_equal(stat_of(h, a, "current-producers"), 0);
    /* the connection becomes a producer before its body is checked */
    h_cmd(h, a, "put 0 0 10 1\r\nxyz", "EXPECTED_CRLF\r\n");
    assert_int_equal(stat_of(h, a, "cmd-put"), 3);
    assert_int_equal(stat_of(h, a, "current-producers"), 1);
    h_cmd(h, a, "\r\n", "UNKNOWN_COMMAND\r\n");
    h_put(h, a, 0, 0, 10, "x");
    assert_int_equal(stat_of(h, a, "cmd-put"), 4);
    h_cmd(h, a, "peek 99\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "delete 99\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "release 99 0 0\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "bury 99 0\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "touch 99\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "stats-job 99\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "stats-tube nosuch\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "pause-tube -x 0\r\n", "BAD_FORMAT\r\n");
    h_cmd(h, a, "reserve-job 99\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "kick-job 99\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "quit-not\r\nstats\r\n", ""); /* quit: nothing counted, nothing runs */
    int b = h_open(h);
    const char *yaml = h_yaml(h, b, "stats\r\n");
    const char *want[][2] = {{"cmd-peek", "1"},       {"cmd-delete", "1"},
                             {"cmd-release", "1"},    {"cmd-bury", "1"},
                             {"cmd-touch", "1"},      {"cmd-stats-job", "1"},
                             {"cmd-stats-tube", "1"}, {"cmd-pause-tube", "1"},
                             {"cmd-stats", "7"},      {"cmd-reserve", "0"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_string_equal(h_yaml_value(yaml, want[i][0]), want[i][1]);
    /* reserve-job and kick-job are counted but not reported */
    assert_null(h_yaml_value(yaml, "cmd-reserve-job"));
    assert_null(h_yaml_value(yaml, "cmd-kick-job"));
    assert_int_equal(h->e->op_ct[BQ_OP_RESERVE_JOB], 1);
    assert_int_equal(h->e->op_ct[BQ_OP_KICK_JOB], 1);
    h_done(h);
}

static void engine_connection_counters(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h), c = h_open(h);
    assert_int_equal(stat_of(h, a, "current-connections"), 3);
    assert_int_equal(stat_of(h, a, "total-connections"), 3);
    assert_int_equal(stat_of(h, a, "current-producers"), 0);
    assert_int_equal(stat_of(h, a, "current-workers"), 0);
    h_put(h, a, 0, 0, 10, "x");
    h_put(h, a, 0, 0, 10, "y");
    assert_int_equal(stat_of(h, a, "current-producers"), 1);
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 1, "x"));
    h_cmd(h, b, "reserve\r\n", h_job_reply("RESERVED", 2, "y"));
    h_cmd(h, c, "reserve-with-timeout 10\r\n", "");
    assert_int_equal(stat_of(h, a, "current-workers"), 2);
    assert_int_equal(stat_of(h, a, "current-waiting"), 1);
    assert_int_equal(stat_of(h, a, "current-jobs-reserved"), 2);
    h_close(h, c);
    assert_int_equal(stat_of(h, a, "current-waiting"), 0);
    assert_int_equal(stat_of(h, a, "current-workers"), 1);
    h_close(h, b);
    assert_int_equal(stat_of(h, a, "current-workers"), 0);
    assert_int_equal(stat_of(h, a, "current-jobs-reserved"), 0);
    int d = h_open(h);
    assert_int_equal(stat_of(h, d, "current-connections"), 2);
    assert_int_equal(stat_of(h, d, "total-connections"), 4);
    h_close(h, a);
    assert_int_equal(stat_of(h, d, "current-producers"), 0);
    assert_int_equal(stat_of(h, d, "current-connections"), 1);
    h_done(h);
}

static void engine_ids_are_never_reused(void **state)
{
    (void)state;
    harness_t *h = h_new(10);
    int a = h_open(h);
    assert_int_equal(h_put(h, a, 0, 0, 10, "a"), 1);
    h_cmd(h, a, "delete 1\r\n", "DELETED\r\n");
    assert_int_equal(h_put(h, a, 0, 0, 10, "b"), 2);
    /* EXPECTED_CRLF: the job was allocated, its id is gone */
    h_cmd(h, a, "put 0 0 10 2\r\nabcd", "EXPECTED_CRLF\r\n");
    assert_int_equal(h_put(h, a, 0, 0, 10, "c"), 4);
    /* JOB_TOO_BIG and BAD_FORMAT never allocate a job */
    h_cmd(h, a, "put 0 0 10 11\r\n0123456789a\r\n", "JOB_TOO_BIG\r\n");
    h_cmd(h, a, "put 0 0 10 1 junk\r\n", "BAD_FORMAT\r\n");
    assert_int_equal(h_put(h, a, 0, 0, 10, "d"), 5);
    /* a put dropped by a close took its id */
    h_send(h, a, "put 0 0 10 5\r\nab");
    h_close(h, a);
    int b = h_open(h);
    assert_int_equal(h_put(h, b, 0, 0, 10, "e"), 7);
    h_done(h);
}

/* ---- one client watching 10,000 tubes ---- */

#define MANY_TUBES 10000

/* Connection w watches t0..t9999 (creating them); checks every reply. */
static void watch_many_tubes(harness_t *h, int w)
{
    char cmd[64];
    for (int i = 0; i < MANY_TUBES; i++) {
        snprintf(cmd, sizeof cmd, "watch t%d\r\n", i);
        h_send(h, w, cmd);
    }
    size_t off = 0; /* WATCHING 2 ... WATCHING 10001, in order */
    for (int i = 0; i < MANY_TUBES; i++) {
        char want[32];
        int n = snprintf(want, sizeof want, "WATCHING %d\r\n", i + 2);
        assert_memory_equal(h_out(h, w) + off, want, (size_t)n);
        off += (size_t)n;
    }
    assert_int_equal(h->conns[w].out_len, off);
    h_clear(h, w);
}

/* p puts one job into every 7th tube with scattered priorities; returns
 * the id of the best (pri, id). */
static uint64_t put_into_every_7th_tube(harness_t *h, int p)
{
    char cmd[64];
    uint64_t best_id = 0;
    uint32_t best_pri = UINT32_MAX;
    for (int i = 0; i < MANY_TUBES; i += 7) {
        snprintf(cmd, sizeof cmd, "use t%d\r\n", i);
        h_send(h, p, cmd);
        uint32_t pri = (uint32_t)((i * 7919) % 5003);
        snprintf(cmd, sizeof cmd, "put %" PRIu32 " 0 10 1\r\nx\r\n", pri);
        h_clear(h, p);
        h_send(h, p, cmd);
        uint64_t id = strtoull(h_out(h, p) + strlen("INSERTED "), NULL, 10);
        if (pri < best_pri || (pri == best_pri && id < best_id)) {
            best_pri = pri;
            best_id = id;
        }
        h_clear(h, p);
    }
    return best_id;
}

/* Reserves n times on w, each time expecting the best ready job among w's
 * watched unpaused tubes, found by scanning them. */
static void reserve_best_by_scan(harness_t *h, int w, int n)
{
    for (int k = 0; k < n; k++) {
        bq_job_t *expect = NULL;
        bq_client_t *c = h_client(h, w);
        for (size_t i = 0; i < c->nwatch; i++) {
            bq_tube_t *t = c->watch[i]->tube;
            bq_job_t *top = bq_heap_top(&t->ready);
            if (top && !bq__tube_paused(t) && (!expect || bq__job_pri_less(top, expect)))
                expect = top;
        }
        assert_non_null(expect);
        h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", expect->id, "x"));
    }
}

static void engine_ten_thousand_watched_tubes(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    h->auto_check = false; /* a full recount per command would be quadratic */
    int w = h_open(h), p = h_open(h);
    watch_many_tubes(h, w);
    h_check(h);
    uint64_t best_id = put_into_every_7th_tube(h, p);
    h_check(h);
    assert_int_equal(h_client(h, w)->ready.len, (MANY_TUBES + 6) / 7);
    h_cmd(h, w, "reserve\r\n", h_job_reply("RESERVED", best_id, "x"));
    h_check(h);
    reserve_best_by_scan(h, w, 200);
    h_check(h);
    /* pause half of the tubes with jobs, ignore some others */
    char cmd[64];
    for (int i = 0; i < MANY_TUBES; i += 14) {
        snprintf(cmd, sizeof cmd, "pause-tube t%d 100\r\n", i);
        h_cmd(h, p, cmd, "PAUSED\r\n");
    }
    for (int i = 7; i < 1000; i += 14) {
        snprintf(cmd, sizeof cmd, "ignore t%d\r\n", i);
        h_send(h, w, cmd);
        h_clear(h, w);
    }
    h_check(h);
    reserve_best_by_scan(h, w, 100);
    h_check(h);
    h_advance(h, H_S(100)); /* pauses end, reservations expire */
    h_check(h);
    assert_int_equal(h->e->reserved_ct, 0);
    h_close(h, w);
    h_check(h);
    h_done(h);
}

/* ---- peek ---- */

static void engine_peek_commands_look_at_the_used_tube(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 5, 0, 10, "r5");
    h_put(h, a, 1, 0, 10, "r1");
    h_put(h, a, 0, 20, 10, "d20");
    h_put(h, a, 0, 10, 10, "d10");
    h_cmd(h, a, "peek-ready\r\n", h_job_reply("FOUND", 2, "r1"));
    h_cmd(h, a, "peek-delayed\r\n", h_job_reply("FOUND", 4, "d10"));
    h_cmd(h, a, "peek-buried\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "watch other\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "use other\r\n", "USING other\r\n");
    h_cmd(h, a, "peek-ready\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "peek-delayed\r\n", "NOT_FOUND\r\n");
    h_cmd(h, a, "peek 3\r\n", h_job_reply("FOUND", 3, "d20"));
    h_cmd(h, a, "peek 0\r\n", "NOT_FOUND\r\n");
    h_done(h);
}

/* ---- hand-offs to waiting clients ---- */

static void engine_kick_hands_job_to_a_waiter(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    uint64_t id = h_put(h, a, 0, 60, 10, "k");
    h_cmd(h, w, "reserve\r\n", "");
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    h_expect(h, w, h_job_reply("RESERVED", id, "k"));
    assert_int_equal(h_job(h, id)->kicks, 1);
    assert_int_equal(bq_engine_next_due(h->e), h->now.mono + H_S(10));
    h_done(h);
}

static void engine_delayed_job_goes_to_a_waiter_when_ready(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), w = h_open(h);
    int64_t t0 = h->now.mono;
    uint64_t id = h_put(h, a, 0, 4, 10, "d");
    h_cmd(h, w, "reserve\r\n", "");
    h_at(h, t0 + H_S(4));
    h_expect(h, w, h_job_reply("RESERVED", id, "d"));
    assert_int_equal(h->conns[w].wakes, 1);
    h_done(h);
}

/* A tick that runs late, after both the safety margin and the deadline of a
 * waiting client's reservation: the expired job goes back to ready and, as
 * the client waits on its tube, straight back to it. beanstalkd would then
 * overwrite the RESERVED reply with DEADLINE_SOON (prot.c conn_timeout) and
 * leave the job reserved silently; we answer RESERVED only. */
static void engine_late_tick_returns_expired_job_to_its_waiting_owner(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 2, "late");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "late"));
    h_cmd(h, a, "reserve\r\n", "");
    h_advance(h, H_S(5));
    h_expect(h, a, h_job_reply("RESERVED", id, "late"));
    assert_true(bq__job_reserved_by(h_job(h, id), h_client(h, a)));
    assert_int_equal(h_job(h, id)->timeouts, 1);
    assert_int_equal(h_job(h, id)->reserves, 2);
    h_done(h);
}

/* ---- random operations against an oracle ---- */

#define RT_TUBES 5
#define RT_WORKERS 3

static uint64_t rng_state = 0x853C49E6748FEA9Bu;

static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)(((rng_state * 0x2545F4914F6CDD1Du) >> 33) % n);
}

/* The job a reserve by c must return now: the best (pri, id) among the tops
 * of c's watched unpaused tubes, found by scanning (not through c->ready). */
static bq_job_t *oracle_best(bq_client_t *c)
{
    bq_job_t *best = NULL;
    for (size_t k = 0; k < c->nwatch; k++) {
        bq_tube_t *t = c->watch[k]->tube;
        bq_job_t *top = bq_heap_top(&t->ready);
        if (top && !bq__tube_paused(t) && (!best || bq__job_pri_less(top, best)))
            best = top;
    }
    return best;
}

static bool oracle_soon(const harness_t *h, bq_client_t *c)
{
    bq_job_t *top = bq_heap_top(&c->reserved);
    return top && h->now.mono >= top->key - BQ_SAFETY_MARGIN;
}

/* A random job id: usually a live one, sometimes one that is gone. */
static uint64_t random_id(harness_t *h)
{
    return 1 + rnd((uint32_t)h->e->next_id);
}

/* A random job reserved by c, or a random id when it has none. */
static uint64_t random_reserved(harness_t *h, bq_client_t *c)
{
    if (c->reserved.len && rnd(4) != 0)
        return ((bq_job_t *)c->reserved.items[rnd((uint32_t)c->reserved.len)])->id;
    return random_id(h);
}

/* Checks what a worker that was waiting received once it stopped. */
static void settle_waiter(harness_t *h, int w)
{
    const char *out = h_out(h, w);
    uint64_t id;
    if (sscanf(out, "RESERVED %" SCNu64, &id) == 1) {
        assert_string_equal(out, h_job_reply("RESERVED", id, "x"));
        assert_true(bq__job_reserved_by(h_job(h, id), h_client(h, w)));
    } else if (strcmp(out, "TIMED_OUT\r\n") != 0 && strcmp(out, "DEADLINE_SOON\r\n") != 0) {
        fail_msg("waiter got \"%s\"", out);
    }
    h_clear(h, w);
}

static void rt_reserve(harness_t *h, int w, bool blocking)
{
    bq_client_t *c = h_client(h, w);
    bq_job_t *best = oracle_best(c);
    bool soon = oracle_soon(h, c);
    h_clear(h, w);
    h_send(h, w, blocking ? "reserve-with-timeout 2\r\n" : "reserve-with-timeout 0\r\n");
    if (best) {
        h_expect(h, w, h_job_reply("RESERVED", best->id, "x"));
    } else if (soon && c->ready_tubes == 0) {
        h_expect(h, w, "DEADLINE_SOON\r\n");
    } else {
        assert_true(h_blocked(h, w));
        assert_string_equal(h_out(h, w), "");
        if (!blocking) {
            h_tick(h); /* nothing else is due now: the previous tick ran */
            h_expect(h, w, soon ? "DEADLINE_SOON\r\n" : "TIMED_OUT\r\n");
        }
    }
}

/* release, bury or touch (word) of a random job by worker w. */
static void rt_owner_cmd(harness_t *h, int w, const char *word, const char *ok)
{
    bq_client_t *c = h_client(h, w);
    uint64_t id = random_reserved(h, c);
    bq_job_t *j = h_job(h, id);
    bool mine = j && bq__job_reserved_by(j, c);
    char cmd[96];
    if (strcmp(word, "release") == 0)
        snprintf(cmd, sizeof cmd, "release %" PRIu64 " %u %u\r\n", id, rnd(3) * 1000, rnd(3));
    else if (strcmp(word, "bury") == 0)
        snprintf(cmd, sizeof cmd, "bury %" PRIu64 " %u\r\n", id, rnd(3) * 1000);
    else
        snprintf(cmd, sizeof cmd, "touch %" PRIu64 "\r\n", id);
    h_cmd(h, w, cmd, mine ? ok : "NOT_FOUND\r\n");
}

static void rt_delete(harness_t *h, int w)
{
    bq_client_t *c = h_client(h, w);
    uint64_t id = rnd(2) ? random_reserved(h, c) : random_id(h);
    bq_job_t *j = h_job(h, id);
    bool ok = j && (j->state != BQ_JOB_RESERVED || bq__job_reserved_by(j, c));
    char cmd[64];
    snprintf(cmd, sizeof cmd, "delete %" PRIu64 "\r\n", id);
    h_cmd(h, w, cmd, ok ? "DELETED\r\n" : "NOT_FOUND\r\n");
}

static void rt_kick_job(harness_t *h, int w, bool reserve_job)
{
    uint64_t id = random_id(h);
    bq_job_t *j = h_job(h, id);
    char cmd[64];
    if (reserve_job) {
        snprintf(cmd, sizeof cmd, "reserve-job %" PRIu64 "\r\n", id);
        h_cmd(h, w, cmd,
              j && j->state != BQ_JOB_RESERVED ? h_job_reply("RESERVED", id, "x")
                                               : "NOT_FOUND\r\n");
    } else {
        snprintf(cmd, sizeof cmd, "kick-job %" PRIu64 "\r\n", id);
        bool ok = j && (j->state == BQ_JOB_BURIED || j->state == BQ_JOB_DELAYED);
        h_cmd(h, w, cmd, ok ? "KICKED\r\n" : "NOT_FOUND\r\n");
    }
}

static void rt_watch(harness_t *h, int w)
{
    bq_client_t *c = h_client(h, w);
    char name[16], cmd[64], want[32];
    snprintf(name, sizeof name, "t%u", rnd(RT_TUBES));
    bq_tube_t *t = bq__tube_find(h->e, name, strlen(name));
    bool watched = t && bq__watch_find(c, t);
    if (rnd(2)) {
        snprintf(cmd, sizeof cmd, "watch %s\r\n", name);
        snprintf(want, sizeof want, "WATCHING %zu\r\n", c->nwatch + !watched);
    } else {
        snprintf(cmd, sizeof cmd, "ignore %s\r\n", name);
        if (watched && c->nwatch < 2)
            snprintf(want, sizeof want, "NOT_IGNORED\r\n");
        else
            snprintf(want, sizeof want, "WATCHING %zu\r\n", c->nwatch - watched);
    }
    h_cmd(h, w, cmd, want);
}

static void rt_put(harness_t *h, int p)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "use t%u\r\n", rnd(RT_TUBES));
    h_send(h, p, cmd);
    h_clear(h, p);
    uint64_t id = h->e->next_id;
    uint32_t delay = rnd(3) == 0 ? 1 + rnd(3) : 0;
    snprintf(cmd, sizeof cmd, "put %u %" PRIu32 " %u 1\r\nx\r\n", rnd(4) * 500, delay, 1 + rnd(5));
    char want[32];
    snprintf(want, sizeof want, "INSERTED %" PRIu64 "\r\n", id);
    h_cmd(h, p, cmd, want);
}

static void rt_kick_or_pause(harness_t *h, int p)
{
    bq_tube_t *t = h_client(h, p)->use;
    char cmd[64], want[32];
    if (rnd(2)) {
        uint32_t n = rnd(4);
        size_t have = t->buried.len ? t->buried.len : t->delay.len;
        snprintf(cmd, sizeof cmd, "kick %u\r\n", n);
        snprintf(want, sizeof want, "KICKED %zu\r\n", have < n ? have : n);
        h_cmd(h, p, cmd, want);
    } else {
        char name[16];
        snprintf(name, sizeof name, "t%u", rnd(RT_TUBES));
        bool exists = bq__tube_find(h->e, name, strlen(name)) != NULL;
        snprintf(cmd, sizeof cmd, "pause-tube %s %u\r\n", name, rnd(3));
        h_cmd(h, p, cmd, exists ? "PAUSED\r\n" : "NOT_FOUND\r\n");
    }
}

static void rt_step(harness_t *h, const int *workers, int p, bool *waiting)
{
    int wi = (int)rnd(RT_WORKERS);
    int w = workers[wi];
    uint32_t op = rnd(16);
    if (waiting[wi] && op < 12)
        op = 12 + rnd(4); /* a waiting worker takes no commands */
    switch (op) {
    case 0:
    case 1:
    case 2:
        rt_reserve(h, w, false);
        break;
    case 3:
        rt_reserve(h, w, true);
        waiting[wi] = h_blocked(h, w);
        break;
    case 4:
        rt_owner_cmd(h, w, "release", "RELEASED\r\n");
        break;
    case 5:
        rt_owner_cmd(h, w, "bury", "BURIED\r\n");
        break;
    case 6:
        rt_owner_cmd(h, w, "touch", "TOUCHED\r\n");
        break;
    case 7:
        rt_delete(h, w);
        break;
    case 8:
        rt_kick_job(h, w, rnd(2));
        break;
    case 9:
        rt_watch(h, w);
        break;
    case 10:
    case 11:
        rt_kick_or_pause(h, p);
        break;
    case 12:
    case 13:
        rt_put(h, p);
        break;
    default:
        h_advance(h, H_MS(rnd(1500)));
        break;
    }
    for (int i = 0; i < RT_WORKERS; i++) {
        if (waiting[i] && !h_blocked(h, workers[i])) {
            settle_waiter(h, workers[i]);
            waiting[i] = false;
        }
        if (!waiting[i])
            assert_string_equal(h_out(h, workers[i]), "");
    }
}

static void engine_random_operations_match_the_oracle(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int workers[RT_WORKERS];
    bool waiting[RT_WORKERS] = {false};
    for (int i = 0; i < RT_WORKERS; i++)
        workers[i] = h_open(h);
    int p = h_open(h);
    for (int step = 0; step < 20000; step++)
        rt_step(h, workers, p, waiting);
    h_advance(h, H_S(100));
    for (int i = 0; i < RT_WORKERS; i++) {
        if (waiting[i])
            settle_waiter(h, workers[i]);
        assert_false(h_blocked(h, workers[i]));
    }
    assert_int_equal(h->e->reserved_ct, 0);
    assert_true(h->e->total_jobs_ct > 1000);
    h_done(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(engine_put_makes_job_ready),
        cmocka_unit_test(engine_put_with_delay_makes_job_delayed),
        cmocka_unit_test(engine_put_ttr_zero_becomes_one),
        cmocka_unit_test(engine_delayed_jobs_become_ready_in_deadline_order),
        cmocka_unit_test(engine_reserve_takes_lowest_pri_then_lowest_id),
        cmocka_unit_test(engine_reserve_across_watched_tubes_takes_min_pri_id),
        cmocka_unit_test(engine_reserve_pri_compare_is_unsigned),
        cmocka_unit_test(engine_reserve_blocks_until_a_job_arrives),
        cmocka_unit_test(engine_reserve_job_of_ready_job),
        cmocka_unit_test(engine_reserve_job_of_delayed_job),
        cmocka_unit_test(engine_reserve_job_of_buried_job),
        cmocka_unit_test(engine_reserve_job_of_reserved_or_missing_job_is_not_found),
        cmocka_unit_test(engine_reserve_job_never_answers_deadline_soon),
        cmocka_unit_test(engine_reserve_job_ignores_pause),
        cmocka_unit_test(engine_delete_in_every_state),
        cmocka_unit_test(engine_non_owner_cannot_touch_a_reserved_job),
        cmocka_unit_test(engine_release_without_delay_makes_job_ready),
        cmocka_unit_test(engine_release_with_delay_makes_job_delayed),
        cmocka_unit_test(engine_release_hands_job_to_a_waiter),
        cmocka_unit_test(engine_bury_sets_pri_and_counts),
        cmocka_unit_test(engine_buried_jobs_are_kicked_in_fifo_order),
        cmocka_unit_test(engine_kick_takes_buried_before_delayed),
        cmocka_unit_test(engine_kick_respects_its_bound),
        cmocka_unit_test(engine_kick_takes_delayed_by_deadline_and_keeps_delay),
        cmocka_unit_test(engine_kick_works_on_the_used_tube_only),
        cmocka_unit_test(engine_kick_job_of_each_state),
        cmocka_unit_test(engine_touch_extends_deadline_and_keeps_reserves),
        cmocka_unit_test(engine_touch_reorders_reservation_deadlines),
        cmocka_unit_test(engine_ttr_expiry_at_exactly_the_deadline),
        cmocka_unit_test(engine_ttr_expiry_hands_job_to_a_waiter),
        cmocka_unit_test(engine_ttr_expiries_of_one_late_tick),
        cmocka_unit_test(engine_deadline_soon_precheck_without_ready_jobs),
        cmocka_unit_test(engine_deadline_soon_precheck_with_ready_job_reserves_it),
        cmocka_unit_test(engine_deadline_soon_precheck_ignores_pause),
        cmocka_unit_test(engine_deadline_soon_while_waiting_one_second_before),
        cmocka_unit_test(engine_deadline_soon_while_waiting_with_a_later_timeout),
        cmocka_unit_test(engine_reserve_with_timeout_zero),
        cmocka_unit_test(engine_reserve_with_timeout_n_ends_at_the_deadline),
        cmocka_unit_test(engine_reserve_with_timeout_gets_a_job_before_the_deadline),
        cmocka_unit_test(engine_halfclose_while_waiting_times_out),
        cmocka_unit_test(engine_halfclosed_reserve_times_out_at_once),
        cmocka_unit_test(engine_pause_tube_delays_reserve_until_the_pause_ends),
        cmocka_unit_test(engine_reserve_with_timeout_on_paused_tube_times_out),
        cmocka_unit_test(engine_pause_zero_unpauses_at_the_next_tick),
        cmocka_unit_test(engine_paused_tube_allows_peek_kick_and_reserve_job),
        cmocka_unit_test(engine_paused_tube_delayed_jobs_still_become_ready),
        cmocka_unit_test(engine_pause_of_one_watched_tube_leaves_the_others),
        cmocka_unit_test(engine_pause_tube_replies_and_counting),
        cmocka_unit_test(engine_pause_is_lost_when_the_tube_is_freed),
        cmocka_unit_test(engine_simultaneous_unpause_hands_out_the_best_job),
        cmocka_unit_test(engine_drain_mode_refuses_put_after_its_body),
        cmocka_unit_test(engine_waiters_get_jobs_in_multiset_order),
        cmocka_unit_test(engine_waiters_three_in_arrival_order),
        cmocka_unit_test(engine_waiter_taken_elsewhere_reorders_the_multiset),
        cmocka_unit_test(engine_waiter_on_several_tubes_gets_a_job_from_any),
        cmocka_unit_test(engine_close_of_a_waiting_client),
        cmocka_unit_test(engine_close_returns_reservations_to_ready),
        cmocka_unit_test(engine_close_hands_returned_jobs_to_waiters),
        cmocka_unit_test(engine_close_returns_jobs_in_reservation_order),
        cmocka_unit_test(engine_use_watch_ignore_replies),
        cmocka_unit_test(engine_tube_is_freed_when_nothing_refers_to_it),
        cmocka_unit_test(engine_default_tube_is_never_freed),
        cmocka_unit_test(engine_list_tubes_order_after_a_free),
        cmocka_unit_test(engine_current_job_counters_follow_each_transition),
        cmocka_unit_test(engine_cmd_counters_skip_parse_failures),
        cmocka_unit_test(engine_cmd_counters_follow_beanstalkd_rules),
        cmocka_unit_test(engine_connection_counters),
        cmocka_unit_test(engine_ids_are_never_reused),
        cmocka_unit_test(engine_ten_thousand_watched_tubes),
        cmocka_unit_test(engine_peek_commands_look_at_the_used_tube),
        cmocka_unit_test(engine_kick_hands_job_to_a_waiter),
        cmocka_unit_test(engine_delayed_job_goes_to_a_waiter_when_ready),
        cmocka_unit_test(engine_late_tick_returns_expired_job_to_its_waiting_owner),
        cmocka_unit_test(engine_random_operations_match_the_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
