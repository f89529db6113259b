/* The history checker (tests/support/history.h) on made-up histories and
 * snapshots built by hand, no server: each rule of docs/testing.md, "The
 * history checker", that issue 18 added fires where it should and stays
 * quiet where it should not. (The older rules are tested against a real
 * server in tests/integration/test_binlog_crash.c, "the checker itself".) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/support/history.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define TUBE "t"

typedef struct fx {
    bqh_history_t *h;
    bqh_snapshot_t *snap;
    uint64_t t; /* the made-up history's time 0 */
    bqh_report_t rep;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->h = bqh_new();
    f->t = bqh_now_ns() - 3600 * SEC; /* the made-up past */
    *state = f;
    return f->h ? 0 : -1;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    bqh_snapshot_free(f->snap);
    bqh_free(f->h);
    free(f);
    return 0;
}

static uint64_t at(const fx_t *f, uint64_t ms)
{
    return f->t + ms * MS;
}

/* A put by worker sent at ms (its reply 1 ms later) in TUBE. */
static void put(fx_t *f, int worker, uint64_t ms, bqh_outcome_t out, uint64_t id, const char *body,
                uint32_t pri, uint32_t delay)
{
    bqh_job_t j = {.tube = TUBE, .pri = pri, .delay = delay};
    bqh_put_job(f->h, worker, at(f, ms), at(f, ms + 1), out, id, body, strlen(body), &j);
}

static void del(fx_t *f, int worker, uint64_t ms, bqh_outcome_t out, uint64_t id)
{
    bqh_delete(f->h, worker, at(f, ms), at(f, ms + 1), out, id);
}

static void cmd(fx_t *f, uint64_t ms, bqh_outcome_t out, bqh_cmd_t c, uint64_t id, uint32_t pri,
                uint32_t delay)
{
    bqh_job_cmd(f->h, 0, at(f, ms), at(f, ms + 1), out, c, id, pri, delay);
}

/* Starts this check's snapshot at ms (after every operation). */
static void snapshot(fx_t *f, uint64_t ms)
{
    bqh_snapshot_free(f->snap);
    f->snap = bqh_snapshot_new(at(f, ms));
    assert_non_null(f->snap);
}

/* The snapshot shows job id with body in tube, in state with pri, delay. */
static void shows_in(fx_t *f, uint64_t id, const char *body, const char *tube, bqh_state_t st,
                     uint32_t pri, uint32_t delay)
{
    bqh_job_t j = {.tube = tube, .pri = pri, .delay = delay, .state = st};
    assert_int_equal(
        bqh_snapshot_add(f->snap, bqh_snapshot_time(f->snap), id, body, strlen(body), &j), 0);
}

static void shows(fx_t *f, uint64_t id, const char *body, bqh_state_t st, uint32_t pri,
                  uint32_t delay)
{
    shows_in(f, id, body, TUBE, st, pri, delay);
}

/* Checks under rules (NULL: all promised); prints the report when it
 * finds problems, and returns their number. */
static size_t check(fx_t *f, const bqh_rules_t *rules)
{
    size_t bad = bqh_check(f->h, f->snap, rules, &f->rep);
    if (bad)
        bqh_report_print(stderr, f->h, &f->rep);
    return bad;
}

/* ---- 1. a refused delete is a known failure ---- */

static void refused_delete_excuses_nothing(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 0, 0);
    put(f, 0, 20, BQH_ACKED, 2, "b", 0, 0);
    del(f, 0, 30, BQH_REFUSED, 1); /* OUT_OF_MEMORY: 1 must still be there */
    del(f, 0, 40, BQH_ACKED, 2);
    snapshot(f, 100);
    assert_int_equal(check(f, NULL), 1);
    assert_int_equal(f->rep.problems[BQH_LOST], 1);
    assert_int_equal(f->rep.bad[0].id, 1);
    assert_int_equal(f->rep.deletes_refused, 1);
    snapshot(f, 200); /* with 1 there, all is well */
    shows(f, 1, "a", BQH_READY, 0, 0);
    assert_int_equal(check(f, NULL), 0);
}

/* ---- 2. an unknown outcome excuses only at a fault ---- */

static void unknown_delete_excuses_only_at_a_fault(void **state)
{
    fx_t *f = *state;
    uint64_t t0 = bqh_now_ns();
    bqh_job_t j = {.tube = TUBE};
    bqh_put_job(f->h, 0, t0, t0 + 1, BQH_ACKED, 1, "a", 1, &j);
    bqh_put_job(f->h, 0, t0 + 2, t0 + 3, BQH_ACKED, 2, "b", 1, &j);
    bqh_put_job(f->h, 0, t0 + 4, t0 + 5, BQH_ACKED, 3, "c", 1, &j);
    /* 1: sent before the fault, found dead once it began: excused. */
    uint64_t sent = bqh_now_ns();
    bqh_fault(f->h, "kill -9");
    bqh_delete(f->h, 0, sent, bqh_now_ns(), BQH_UNKNOWN, 1);
    bqh_settled(f->h, "restarted");
    /* 2: sent once the fault was over, died: no excuse, and unexplained. */
    uint64_t late = bqh_now_ns() + 1000;
    bqh_delete(f->h, 0, late, late + 1, BQH_UNKNOWN, 2);
    f->snap = bqh_snapshot_new(late + 10);
    j.state = BQH_READY;
    assert_int_equal(bqh_snapshot_add(f->snap, late + 10, 3, "c", 1, &j), 0);
    assert_int_equal(check(f, NULL), 2);
    assert_int_equal(f->rep.problems[BQH_LOST], 1);
    assert_int_equal(f->rep.problems[BQH_UNEXPLAINED], 1);
    for (size_t i = 0; i < f->rep.nbad; i++)
        assert_int_equal(f->rep.bad[i].id, 2);
    assert_int_equal(f->rep.faults, 1);
    assert_int_equal(f->rep.unknown_excused, 1);
}

/* The same with times that straddle the fault: excused. */
static void unknown_in_flight_at_a_fault_is_excused(void **state)
{
    fx_t *f = *state;
    uint64_t t0 = bqh_now_ns();
    bqh_job_t j = {.tube = TUBE};
    bqh_put_job(f->h, 0, t0, t0 + 1, BQH_ACKED, 1, "a", 1, &j);
    bqh_put_job(f->h, 0, t0 + 2, t0 + 3, BQH_ACKED, 2, "b", 1, &j);
    uint64_t sent = bqh_now_ns();
    bqh_fault(f->h, "kill -9");
    bqh_put_job(f->h, 0, sent, bqh_now_ns(), BQH_UNKNOWN, 0, "u", 1, &j); /* stored after all */
    bqh_delete(f->h, 0, sent, bqh_now_ns(), BQH_UNKNOWN, 1);
    bqh_settled(f->h, "reaped");
    f->snap = bqh_snapshot_new(bqh_now_ns());
    j.state = BQH_READY;
    assert_int_equal(bqh_snapshot_add(f->snap, bqh_now_ns(), 2, "b", 1, &j), 0);
    assert_int_equal(bqh_snapshot_add(f->snap, bqh_now_ns(), 3, "u", 1, &j), 0);
    assert_int_equal(check(f, NULL), 0);
    assert_int_equal(f->rep.unknown_excused, 2);
}

/* An unknown put with no fault at all: unexplained, and its job, which
 * the server holds, is unexpected. */
static void unknown_put_without_fault_is_reported(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_UNKNOWN, 0, "u", 0, 0);
    put(f, 0, 20, BQH_UNKNOWN, 0, "v", 0, 0); /* absent: unexplained only */
    snapshot(f, 100);
    shows(f, 1, "u", BQH_READY, 0, 0);
    assert_int_equal(check(f, NULL), 3);
    assert_int_equal(f->rep.problems[BQH_UNEXPLAINED], 2);
    assert_int_equal(f->rep.problems[BQH_UNEXPECTED], 1);
}

/* A put whose outcome stayed unknown at a fault: a worker's RESERVED of
 * its job promises nothing (a primary cut off from the others hands out
 * jobs it never commits), but once a snapshot has shown it, it is held. */
static void reserved_unknown_put_is_not_promised(void **state)
{
    fx_t *f = *state;
    uint64_t sent = bqh_now_ns();
    bqh_job_t j = {.tube = TUBE};
    bqh_fault(f->h, "links of the primary cut");
    bqh_put_job(f->h, 0, sent, bqh_now_ns(), BQH_UNKNOWN, 0, "u", 1, &j);
    uint64_t r = bqh_now_ns();
    bqh_reserve(f->h, 1, r, r + 1, 7, "u", 1);
    bqh_settled(f->h, "healed");
    f->snap = bqh_snapshot_new(bqh_now_ns());
    assert_int_equal(check(f, NULL), 0); /* gone with the old primary: allowed */
    bqh_snapshot_free(f->snap);
    f->snap = bqh_snapshot_new(bqh_now_ns()); /* now a snapshot shows it... */
    j.state = BQH_READY;
    assert_int_equal(bqh_snapshot_add(f->snap, bqh_now_ns(), 7, "u", 1, &j), 0);
    assert_int_equal(check(f, NULL), 0);
    bqh_snapshot_free(f->snap);
    f->snap = bqh_snapshot_new(bqh_now_ns()); /* ...and it may not vanish after that */
    assert_int_equal(check(f, NULL), 1);
    assert_int_equal(f->rep.problems[BQH_LOST], 1);
    assert_int_equal(f->rep.bad[0].id, 7);
}

/* ---- 3. NOT_FOUND to one's own job, then the job again ---- */

static void not_found_then_back_is_flagged(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 0, 0);
    put(f, 1, 11, BQH_ACKED, 2, "b", 0, 0);
    put(f, 1, 12, BQH_ACKED, 3, "c", 0, 0);
    del(f, 0, 20, BQH_NOT_FOUND, 1); /* worker 0's own job: flagged */
    del(f, 0, 21, BQH_NOT_FOUND, 2); /* worker 1's job: it may have been reserved */
    bqh_reserve(f->h, 2, at(f, 30), at(f, 31), 3, "c", 1);
    del(f, 2, 40, BQH_NOT_FOUND, 3); /* reserved by worker 2, then RESERVED again */
    bqh_reserve(f->h, 1, at(f, 50), at(f, 51), 3, "c", 1);
    snapshot(f, 100);
    shows(f, 1, "a", BQH_READY, 0, 0);
    shows(f, 2, "b", BQH_READY, 0, 0);
    shows(f, 3, "c", BQH_READY, 0, 0);
    assert_int_equal(check(f, NULL), 2);
    assert_int_equal(f->rep.problems[BQH_REAPPEARED], 2);
    for (size_t i = 0; i < f->rep.nbad; i++)
        assert_true(f->rep.bad[i].id == 1 || f->rep.bad[i].id == 3);
}

static void not_found_in_the_window_is_allowed(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 0, 0);
    put(f, 0, 11, BQH_ACKED, 2, "b", 0, 0);
    del(f, 0, 500, BQH_NOT_FOUND, 1); /* in the window */
    del(f, 0, 20, BQH_NOT_FOUND, 2);  /* before it: flagged */
    snapshot(f, 3000);
    shows(f, 1, "a", BQH_READY, 0, 0);
    shows(f, 2, "b", BQH_READY, 0, 0);
    bqh_rules_t rules = {.promised_before = at(f, 400), .promised_after = at(f, 1000)};
    assert_int_equal(check(f, &rules), 1);
    assert_int_equal(f->rep.problems[BQH_REAPPEARED], 1);
    assert_int_equal(f->rep.bad[0].id, 2);
    assert_int_equal(f->rep.allowed_not_found, 1);
}

/* ---- 4. the state of every job ---- */

static void state_after_put_is_checked(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 5, 0);
    put(f, 0, 11, BQH_ACKED, 2, "b", 5, 0);
    put(f, 0, 12, BQH_ACKED, 3, "c", 5, 0);
    put(f, 0, 13, BQH_ACKED, 4, "d", 5, 0);
    put(f, 0, 14, BQH_ACKED, 5, "e", 5, 0);
    bqh_put(f->h, 0, at(f, 15), at(f, 16), BQH_ACKED, 6, "f", 1); /* no attributes: unchecked */
    snapshot(f, 100);
    shows(f, 1, "a", BQH_READY, 5, 0);
    shows(f, 2, "b", BQH_RESERVED, 5, 0);          /* reserved counts as ready */
    shows(f, 3, "c", BQH_READY, 6, 0);             /* wrong priority */
    shows(f, 4, "d", BQH_BURIED, 5, 0);            /* never buried */
    shows_in(f, 5, "e", "other", BQH_READY, 5, 0); /* wrong tube */
    shows(f, 6, "f", BQH_BURIED, 9, 9);
    assert_int_equal(check(f, NULL), 3);
    assert_int_equal(f->rep.problems[BQH_STATE], 3);
    assert_int_equal(f->rep.states_checked, 4);
    for (size_t i = 0; i < f->rep.nbad; i++)
        assert_true(f->rep.bad[i].id >= 3 && f->rep.bad[i].id <= 5);
}

static void bury_release_kick_job_touch(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 5, 0);
    put(f, 0, 11, BQH_ACKED, 2, "b", 5, 0);
    put(f, 0, 12, BQH_ACKED, 3, "c", 5, 0);
    bqh_reserve(f->h, 0, at(f, 20), at(f, 21), 1, "a", 1);
    cmd(f, 22, BQH_ACKED, BQH_BURY, 1, 7, 0); /* 1: buried pri 7 */
    bqh_reserve(f->h, 0, at(f, 30), at(f, 31), 2, "b", 1);
    cmd(f, 32, BQH_ACKED, BQH_TOUCH, 2, 0, 0);
    cmd(f, 33, BQH_ACKED, BQH_RELEASE, 2, 8, 0); /* 2: ready pri 8 */
    bqh_reserve(f->h, 0, at(f, 40), at(f, 41), 3, "c", 1);
    cmd(f, 42, BQH_ACKED, BQH_BURY, 3, 9, 0);
    cmd(f, 43, BQH_ACKED, BQH_KICK_JOB, 3, 0, 0);     /* 3: ready pri 9 */
    cmd(f, 44, BQH_NOT_FOUND, BQH_KICK_JOB, 2, 0, 0); /* no change */
    snapshot(f, 100);
    shows(f, 1, "a", BQH_BURIED, 7, 0);
    shows(f, 2, "b", BQH_READY, 8, 0);
    shows(f, 3, "c", BQH_READY, 9, 0);
    assert_int_equal(check(f, NULL), 0);
    assert_int_equal(f->rep.states_checked, 3);
    snapshot(f, 200); /* each with the state before its last command: all wrong */
    shows(f, 1, "a", BQH_READY, 5, 0);
    shows(f, 2, "b", BQH_READY, 5, 0);
    shows(f, 3, "c", BQH_BURIED, 9, 0);
    assert_int_equal(check(f, NULL), 3);
    assert_int_equal(f->rep.problems[BQH_STATE], 3);
}

/* An unknown outcome at a fault, or an acknowledgement in the rules'
 * window, allows the state before and after; a reserve of a job that can
 * only be buried is a state problem. */
static void uncertain_commands_allow_both(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 5, 0);
    put(f, 0, 11, BQH_ACKED, 2, "b", 5, 0);
    put(f, 0, 12, BQH_ACKED, 3, "c", 5, 0);
    cmd(f, 20, BQH_ACKED, BQH_BURY, 1, 6, 0);
    cmd(f, 500, BQH_ACKED, BQH_BURY, 2, 6, 0); /* in the window */
    cmd(f, 30, BQH_ACKED, BQH_BURY, 3, 6, 0);
    bqh_reserve(f->h, 1, at(f, 40), at(f, 41), 3, "c", 1); /* 3 is buried */
    snapshot(f, 3000);
    shows(f, 1, "a", BQH_READY, 5, 0); /* bury promised: wrong */
    shows(f, 2, "b", BQH_READY, 5, 0); /* bury not promised: allowed */
    shows(f, 3, "c", BQH_READY, 6, 0);
    bqh_rules_t rules = {.promised_before = at(f, 400), .promised_after = at(f, 1000)};
    assert_int_equal(check(f, &rules), 2);
    assert_int_equal(f->rep.problems[BQH_STATE], 2);
    for (size_t i = 0; i < f->rep.nbad; i++)
        assert_true(f->rep.bad[i].id == 1 || f->rep.bad[i].id == 3);
}

static void delayed_job_ready_only_past_its_deadline(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 0, 100); /* deadline at +100.01 s */
    put(f, 0, 11, BQH_ACKED, 2, "b", 0, 2);   /* deadline at +2.011 s */
    put(f, 0, 12, BQH_ACKED, 3, "c", 0, 100);
    snapshot(f, 1500); /* 2 may be ready (margin 1 s), 1 may not */
    shows(f, 1, "a", BQH_READY, 0, 100);
    shows(f, 2, "b", BQH_READY, 0, 2);
    shows(f, 3, "c", BQH_DELAYED, 0, 100);
    assert_int_equal(check(f, NULL), 1);
    assert_int_equal(f->rep.problems[BQH_STATE], 1);
    assert_int_equal(f->rep.bad[0].id, 1);
    assert_int_equal(f->rep.states_lenient, 1);
}

/* kick N kicks buried jobs when there are any, else delayed ones. */
static void kick_takes_buried_first(void **state)
{
    fx_t *f = *state;
    put(f, 0, 10, BQH_ACKED, 1, "a", 5, 0);
    put(f, 0, 11, BQH_ACKED, 2, "b", 5, 100);
    put(f, 0, 12, BQH_ACKED, 3, "c", 5, 100);
    cmd(f, 20, BQH_ACKED, BQH_BURY, 1, 5, 0);
    bqh_kick(f->h, 0, at(f, 30), at(f, 31), BQH_ACKED, TUBE, 1000, 1); /* 1 only */
    snapshot(f, 100);
    shows(f, 1, "a", BQH_READY, 5, 0);
    shows(f, 2, "b", BQH_DELAYED, 5, 100);
    shows(f, 3, "c", BQH_READY, 5, 100); /* wrong: not kicked yet */
    assert_int_equal(check(f, NULL), 1);
    assert_int_equal(f->rep.bad[0].id, 3);
    bqh_kick(f->h, 0, at(f, 200), at(f, 201), BQH_ACKED, TUBE, 1000, 2); /* 2 and 3 */
    snapshot(f, 300);
    shows(f, 1, "a", BQH_READY, 5, 0);
    shows(f, 2, "b", BQH_READY, 5, 100);
    shows(f, 3, "c", BQH_DELAYED, 5, 100); /* wrong: kicked */
    assert_int_equal(check(f, NULL), 1);
    assert_int_equal(f->rep.bad[0].id, 3);
}

/* A kick whose class is uncertain (the bury before it unknown) allows
 * both. */
static void kick_after_unknown_bury_allows_both(void **state)
{
    fx_t *f = *state;
    uint64_t t0 = bqh_now_ns();
    bqh_job_t j = {.tube = TUBE, .pri = 5};
    bqh_put_job(f->h, 0, t0, t0 + 1, BQH_ACKED, 1, "a", 1, &j);
    j.delay = 100;
    bqh_put_job(f->h, 0, t0 + 2, t0 + 3, BQH_ACKED, 2, "b", 1, &j);
    uint64_t sent = bqh_now_ns();
    bqh_fault(f->h, "kill -9");
    bqh_job_cmd(f->h, 0, sent, bqh_now_ns(), BQH_UNKNOWN, BQH_BURY, 1, 5, 0);
    bqh_settled(f->h, "restarted");
    uint64_t k = bqh_now_ns();
    bqh_kick(f->h, 0, k, k + 1, BQH_ACKED, TUBE, 1000, 1);
    f->snap = bqh_snapshot_new(k + 10);
    j.state = BQH_READY; /* 1 never buried, 2 kicked: allowed */
    j.delay = 0;
    assert_int_equal(bqh_snapshot_add(f->snap, k + 10, 1, "a", 1, &j), 0);
    j.delay = 100;
    assert_int_equal(bqh_snapshot_add(f->snap, k + 10, 2, "b", 1, &j), 0);
    assert_int_equal(check(f, NULL), 0);
    assert_int_equal(f->rep.states_checked, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(refused_delete_excuses_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(unknown_delete_excuses_only_at_a_fault, setup, teardown),
        cmocka_unit_test_setup_teardown(unknown_in_flight_at_a_fault_is_excused, setup, teardown),
        cmocka_unit_test_setup_teardown(unknown_put_without_fault_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(reserved_unknown_put_is_not_promised, setup, teardown),
        cmocka_unit_test_setup_teardown(not_found_then_back_is_flagged, setup, teardown),
        cmocka_unit_test_setup_teardown(not_found_in_the_window_is_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(state_after_put_is_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(bury_release_kick_job_touch, setup, teardown),
        cmocka_unit_test_setup_teardown(uncertain_commands_allow_both, setup, teardown),
        cmocka_unit_test_setup_teardown(delayed_job_ready_only_past_its_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(kick_takes_buried_first, setup, teardown),
        cmocka_unit_test_setup_teardown(kick_after_unknown_bury_allows_both, setup, teardown),
    };
    return cmocka_run_group_tests_name("history", tests, NULL, NULL);
}
