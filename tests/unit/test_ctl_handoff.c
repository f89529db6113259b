/* Unit tests of beanstalkctl handoff's choice (node/ctl/ctl_handoff.c):
 * nodes that are not the primary (standby, witness, candidate) have
 * nothing to hand off; a primary with no standbys, or only witnesses,
 * disconnected or catching-up ones, has no target and says why; among
 * streaming standbys the most flushed wins over a less lagging one, ties
 * go to the lower lag and then to the lower name, whatever the order of
 * the list; entries without a name or numbers are handled; a document
 * without a role is reported as such. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/ctl/ctl_handoff.h"

/* A primary's /status with the given "standbys" array (JSON text). */
static cJSON *primary_with(const char *standbys)
{
    size_t cap = strlen(standbys) + 256;
    char *text = malloc(cap);
    assert_non_null(text);
    snprintf(text, cap,
             "{\"node_id\":\"n1\",\"role\":\"primary\",\"epoch\":4,\"last_lsn\":200,"
             "\"standbys\":%s}",
             standbys);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    assert_non_null(doc);
    return doc;
}

/* Runs the choice on doc (freed) and checks it found target. */
static void expect_target(cJSON *doc, const char *target, double flushed, double lag)
{
    bq_ctl_handoff_t h;
    bq_ctl_handoff_choose(doc, &h);
    assert_int_equal(h.kind, BQ_CTL_HANDOFF_TARGET);
    assert_non_null(h.target);
    assert_string_equal(h.target, target);
    assert_true(h.flushed_lsn == flushed);
    assert_true(h.lag_records == lag);
    cJSON_Delete(doc);
}

/* Runs the choice on doc (freed) and checks it found no target, with why. */
static void expect_none(cJSON *doc, const char *why)
{
    bq_ctl_handoff_t h;
    bq_ctl_handoff_choose(doc, &h);
    assert_int_equal(h.kind, BQ_CTL_HANDOFF_NO_TARGET);
    assert_null(h.target);
    assert_string_equal(h.why, why);
    cJSON_Delete(doc);
}

static void not_primary_has_nothing_to_hand_off(void **state)
{
    (void)state;
    static const char *const roles[] = {"standby", "witness", "precandidate", "candidate"};
    for (size_t k = 0; k < sizeof roles / sizeof roles[0]; k++) {
        char text[256], why[128];
        /* A standby's document may even carry a stale standbys list: it is not looked at. */
        snprintf(text, sizeof text,
                 "{\"node_id\":\"n2\",\"role\":\"%s\",\"primary\":\"n1\",\"standbys\":"
                 "[{\"node_id\":\"n3\",\"state\":\"streaming\",\"flushed_lsn\":9}]}",
                 roles[k]);
        cJSON *doc = cJSON_Parse(text);
        assert_non_null(doc);
        bq_ctl_handoff_t h;
        bq_ctl_handoff_choose(doc, &h);
        assert_int_equal(h.kind, BQ_CTL_HANDOFF_NOT_PRIMARY);
        assert_null(h.target);
        snprintf(why, sizeof why, "not the primary: nothing to hand off (role %s)", roles[k]);
        assert_string_equal(h.why, why);
        cJSON_Delete(doc);
    }
}

static void primary_without_standbys_has_no_target(void **state)
{
    (void)state;
    expect_none(primary_with("[]"), "no standby to hand off to (the primary lists none)");
    cJSON *doc = cJSON_Parse("{\"node_id\":\"n1\",\"role\":\"primary\"}");
    expect_none(doc, "no standby to hand off to (the primary lists none)");
    doc = cJSON_Parse("{\"role\":\"primary\",\"standbys\":{\"n2\":1}}"); /* not an array */
    expect_none(doc, "no standby to hand off to (the primary lists none)");
}

static void witness_only_is_no_target(void **state)
{
    (void)state;
    expect_none(primary_with("[{\"node_id\":\"w1\",\"state\":\"witness\",\"flushed_lsn\":0}]"),
                "no streaming standby to hand off to (w1: witness)");
}

static void disconnected_and_catching_up_are_no_target(void **state)
{
    (void)state;
    expect_none(primary_with("[{\"node_id\":\"n2\",\"state\":\"catching-up\",\"flushed_lsn\":199},"
                             "{\"node_id\":\"n3\",\"state\":\"disconnected\"},"
                             "{\"node_id\":\"w\",\"state\":\"witness\"},{\"flushed_lsn\":5}]"),
                "no streaming standby to hand off to (n2: catching-up, n3: disconnected, "
                "w: witness, (no node_id): (no state))");
}

static void streaming_wins_over_a_more_flushed_lagging_one(void **state)
{
    (void)state;
    /* n2 has flushed more but is not in sync (catching-up): only streaming ones count. */
    expect_target(primary_with("[{\"node_id\":\"n2\",\"state\":\"catching-up\","
                               "\"flushed_lsn\":200,\"lag_records\":0},"
                               "{\"node_id\":\"n3\",\"state\":\"streaming\",\"flushed_lsn\":150,"
                               "\"lag_records\":50},"
                               "{\"node_id\":\"w\",\"state\":\"witness\",\"flushed_lsn\":300}]"),
                  "n3", 150, 50);
}

static void most_flushed_wins_before_lag(void **state)
{
    (void)state;
    /* n3 has flushed more; n2's lower lag does not matter then. */
    expect_target(primary_with("[{\"node_id\":\"n2\",\"state\":\"streaming\",\"flushed_lsn\":190,"
                               "\"lag_records\":1},"
                               "{\"node_id\":\"n3\",\"state\":\"streaming\",\"flushed_lsn\":200,"
                               "\"lag_records\":7}]"),
                  "n3", 200, 7);
}

static void tie_on_flushed_goes_to_lower_lag(void **state)
{
    (void)state;
    expect_target(primary_with("[{\"node_id\":\"n2\",\"state\":\"streaming\",\"flushed_lsn\":200,"
                               "\"lag_records\":3},"
                               "{\"node_id\":\"n3\",\"state\":\"streaming\",\"flushed_lsn\":200,"
                               "\"lag_records\":1}]"),
                  "n3", 200, 1);
    /* A lag the primary did not report ranks after a known one. */
    expect_target(primary_with("[{\"node_id\":\"n2\",\"state\":\"streaming\",\"flushed_lsn\":200},"
                               "{\"node_id\":\"n3\",\"state\":\"streaming\",\"flushed_lsn\":200,"
                               "\"lag_records\":9}]"),
                  "n3", 200, 9);
}

static void full_tie_goes_to_lower_name_in_any_order(void **state)
{
    (void)state;
    static const char a[] = "{\"node_id\":\"node-b\",\"state\":\"streaming\",\"flushed_lsn\":200,"
                            "\"lag_records\":0}";
    static const char b[] = "{\"node_id\":\"node-a\",\"state\":\"streaming\",\"flushed_lsn\":200,"
                            "\"lag_records\":0}";
    char list[512];
    snprintf(list, sizeof list, "[%s,%s]", a, b);
    expect_target(primary_with(list), "node-a", 200, 0);
    snprintf(list, sizeof list, "[%s,%s]", b, a);
    expect_target(primary_with(list), "node-a", 200, 0);
}

static void unnamed_or_numberless_entries(void **state)
{
    (void)state;
    /* An entry without a node_id cannot be asked for; one without numbers ranks last. */
    expect_target(primary_with("[{\"state\":\"streaming\",\"flushed_lsn\":500},"
                               "{\"node_id\":\"\",\"state\":\"streaming\",\"flushed_lsn\":500},"
                               "{\"node_id\":\"n4\",\"state\":\"streaming\"},"
                               "{\"node_id\":\"n3\",\"state\":\"streaming\",\"flushed_lsn\":\"x\"},"
                               "{\"node_id\":\"n2\",\"state\":\"streaming\",\"flushed_lsn\":3}]"),
                  "n2", 3, -1);
    expect_target(primary_with("[{\"node_id\":\"n4\",\"state\":\"streaming\"}]"), "n4", -1, -1);
}

static void no_role_is_reported(void **state)
{
    (void)state;
    bq_ctl_handoff_t h;
    cJSON *doc = cJSON_Parse("{\"node_id\":\"n1\",\"role\":7}");
    bq_ctl_handoff_choose(doc, &h);
    assert_int_equal(h.kind, BQ_CTL_HANDOFF_NO_ROLE);
    assert_string_equal(h.why, "the node's /status does not say its role");
    cJSON_Delete(doc);
    bq_ctl_handoff_choose(NULL, &h);
    assert_int_equal(h.kind, BQ_CTL_HANDOFF_NO_ROLE);
}

static void long_lists_are_cut_not_overflowed(void **state)
{
    (void)state;
    char list[8192] = "[";
    for (int k = 0; k < 60; k++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used,
                 "%s{\"node_id\":\"standby-%02d\",\"state\":"
                 "\"disconnected\"}",
                 k ? "," : "", k);
    }
    strcat(list, "]");
    bq_ctl_handoff_t h;
    cJSON *doc = primary_with(list);
    bq_ctl_handoff_choose(doc, &h);
    assert_int_equal(h.kind, BQ_CTL_HANDOFF_NO_TARGET);
    assert_true(strlen(h.why) < sizeof h.why);
    assert_non_null(strstr(h.why, "no streaming standby to hand off to (standby-00: disconnected"));
    assert_non_null(strstr(h.why, "disconnected, ...)"));
    cJSON_Delete(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(not_primary_has_nothing_to_hand_off),
        cmocka_unit_test(primary_without_standbys_has_no_target),
        cmocka_unit_test(witness_only_is_no_target),
        cmocka_unit_test(disconnected_and_catching_up_are_no_target),
        cmocka_unit_test(streaming_wins_over_a_more_flushed_lagging_one),
        cmocka_unit_test(most_flushed_wins_before_lag),
        cmocka_unit_test(tie_on_flushed_goes_to_lower_lag),
        cmocka_unit_test(full_tie_goes_to_lower_name_in_any_order),
        cmocka_unit_test(unnamed_or_numberless_entries),
        cmocka_unit_test(no_role_is_reported),
        cmocka_unit_test(long_lists_are_cut_not_overflowed),
    };
    return cmocka_run_group_tests_name("ctl_handoff", tests, NULL, NULL);
}
