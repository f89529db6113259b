/* Unit tests of replication/report.c, linked without node/: lines go to a
 * sink the test installs, which keeps them. Covers: nothing is written
 * (and nothing counted) without a sink or below the sink's level; a line
 * carries its level, message and the formatted pairs; a rate-limited event
 * writes one line a second, counts what it drops and reports the count on
 * its next line; two limits do not share their second. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "replication/report.h"

#define MAX_LINES 8

typedef struct line {
    bq_report_level_t level;
    char msg[64];
    char kv[128];
    unsigned long suppressed;
} line_t;

static line_t lines[MAX_LINES];
static int nlines;
static bq_report_level_t shown; /* the most verbose level written */

static bool cap_enabled(bq_report_level_t level)
{
    return level <= shown;
}

static void cap_write(bq_report_level_t level, const char *msg, unsigned long suppressed,
                      const char *kv, va_list ap) __attribute__((format(printf, 4, 0)));

static void cap_write(bq_report_level_t level, const char *msg, unsigned long suppressed,
                      const char *kv, va_list ap)
{
    assert_true(nlines < MAX_LINES);
    line_t *l = &lines[nlines++];
    l->level = level;
    l->suppressed = suppressed;
    snprintf(l->msg, sizeof l->msg, "%s", msg);
    vsnprintf(l->kv, sizeof l->kv, kv, ap);
}

static const bq_report_sink_t capture = {.enabled = cap_enabled, .write = cap_write};

static int setup(void **state)
{
    (void)state;
    memset(lines, 0, sizeof lines);
    nlines = 0;
    shown = BQ_REPORT_INFO;
    bq_report_set_sink(&capture);
    return 0;
}

static void test_no_sink(void **state)
{
    (void)state;
    bq_report_limit_t lim = {0};
    bq_report_set_sink(NULL);
    assert_false(bq_report_enabled(BQ_REPORT_ERROR));
    bq_report(BQ_REPORT_ERROR, "replication: cannot listen", "addr=%s", "x");
    bq_report_limited(&lim, BQ_REPORT_WARN, "replication: TLS peer refused", "peer=%s", "x");
    assert_int_equal(nlines, 0);
    assert_int_equal(lim.last_ns, 0);
    assert_int_equal(lim.suppressed, 0);
}

static void test_line(void **state)
{
    (void)state;
    assert_true(bq_report_enabled(BQ_REPORT_INFO));
    bq_report(BQ_REPORT_WARN, "replication: standby disconnected", "standby=%s why=\"%s\"", "b",
              "timeout");
    assert_int_equal(nlines, 1);
    assert_int_equal(lines[0].level, BQ_REPORT_WARN);
    assert_string_equal(lines[0].msg, "replication: standby disconnected");
    assert_string_equal(lines[0].kv, "standby=b why=\"timeout\"");
    assert_int_equal(lines[0].suppressed, 0);
}

/* Below the sink's level: no line, and a rate limit does not count it. */
static void test_level(void **state)
{
    (void)state;
    bq_report_limit_t lim = {0};
    assert_false(bq_report_enabled(BQ_REPORT_DEBUG));
    bq_report(BQ_REPORT_DEBUG, "replication: link open", "peer=%s", "x");
    bq_report_limited(&lim, BQ_REPORT_DEBUG, "replication: link open", "peer=%s", "x");
    assert_int_equal(nlines, 0);
    assert_int_equal(lim.last_ns, 0);
    assert_int_equal(lim.suppressed, 0);
    shown = BQ_REPORT_DEBUG;
    bq_report(BQ_REPORT_DEBUG, "replication: link open", "peer=%s", "x");
    assert_int_equal(nlines, 1);
    assert_int_equal(lines[0].level, BQ_REPORT_DEBUG);
}

static void test_limited(void **state)
{
    (void)state;
    bq_report_limit_t lim = {0};
    for (int i = 0; i < 5; i++)
        bq_report_limited(&lim, BQ_REPORT_WARN, "replication: standby refused", "n=%d", i);
    assert_int_equal(nlines, 1); /* the first; four dropped within the second */
    assert_string_equal(lines[0].kv, "n=0");
    assert_int_equal(lines[0].suppressed, 0);
    assert_int_equal(lim.suppressed, 4);
    lim.last_ns -= 1000000000LL; /* a second later */
    bq_report_limited(&lim, BQ_REPORT_WARN, "replication: standby refused", "n=%d", 5);
    assert_int_equal(nlines, 2);
    assert_string_equal(lines[1].kv, "n=5");
    assert_int_equal(lines[1].suppressed, 4);
    assert_int_equal(lim.suppressed, 0);
    bq_report_limited(&lim, BQ_REPORT_WARN, "replication: standby refused", "n=%d", 6);
    assert_int_equal(nlines, 2);
    assert_int_equal(lim.suppressed, 1);
}

static void test_limits_apart(void **state)
{
    (void)state;
    bq_report_limit_t a = {0}, b = {0};
    bq_report_limited(&a, BQ_REPORT_INFO, "replication: connection closed", "peer=%s", "a");
    bq_report_limited(&b, BQ_REPORT_WARN, "replication: TLS peer refused", "peer=%s", "b");
    bq_report_limited(&a, BQ_REPORT_INFO, "replication: connection closed", "peer=%s", "a");
    assert_int_equal(nlines, 2);
    assert_string_equal(lines[0].msg, "replication: connection closed");
    assert_string_equal(lines[1].msg, "replication: TLS peer refused");
    assert_int_equal(a.suppressed, 1);
    assert_int_equal(b.suppressed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_sink, setup),
        cmocka_unit_test_setup(test_line, setup),
        cmocka_unit_test_setup(test_level, setup),
        cmocka_unit_test_setup(test_limited, setup),
        cmocka_unit_test_setup(test_limits_apart, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
