/* Unit tests of tests/support/prom_parse.c, the Prometheus text checker the
 * metrics tests rely on: a text with every kind of family passes and its
 * values are found by canonical key; each broken input (bad names, labels,
 * escapes, values, missing or late HELP/TYPE, split families, duplicate
 * series, counters without _total or negative, histograms with bad
 * buckets, a missing final newline) is rejected with a line number. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/prom_parse.h"

static const char GOOD[] = "# HELP a_total things\n"
                           "# TYPE a_total counter\n"
                           "a_total{kind=\"x\"} 3\n"
                           "a_total{kind=\"y \\\"q\\\" \\\\ \\n\"} 0\n"
                           "# A free comment\n"
                           "\n"
                           "# TYPE g gauge\n"
                           "# HELP g a gauge with an escaped \\\\ help\\n\n"
                           "g 1.5e-3\n"
                           "# HELP h_seconds latency\n"
                           "# TYPE h_seconds histogram\n"
                           "h_seconds_bucket{op=\"w\",le=\"0.1\"} 1\n"
                           "h_seconds_bucket{op=\"w\",le=\"1\"} 2\n"
                           "h_seconds_bucket{op=\"w\",le=\"+Inf\"} 2\n"
                           "h_seconds_sum{op=\"w\"} 0.75\n"
                           "h_seconds_count{op=\"w\"} 2\n"
                           "# HELP s a summary\n"
                           "# TYPE s summary\n"
                           "s{quantile=\"0.5\"} NaN\n"
                           "s_sum 0\n"
                           "s_count 0 1700000000000\n"
                           "# HELP inf gauges may be infinite\n"
                           "# TYPE inf gauge\n"
                           "inf{b=\"2\",a=\"1\"} -Inf\n";

static void good_text_parses_and_values_are_found(void **state)
{
    (void)state;
    bqp_text_t t;
    char err[256] = "";
    int r = bqp_parse(GOOD, &t, err, sizeof err);
    if (r != 0)
        fail_msg("%s", err);
    assert_int_equal(t.families, 5);
    double v;
    assert_true(bqp_get(&t, "a_total{kind=\"x\"}", &v));
    assert_true(v == 3);
    assert_true(bqp_get(&t, "a_total{kind=\"y \\\"q\\\" \\\\ \\n\"}", &v));
    assert_true(bqp_get(&t, "g", &v));
    assert_true(fabs(v - 0.0015) < 1e-12);
    assert_true(bqp_get(&t, "h_seconds_bucket{le=\"+Inf\",op=\"w\"}", &v));
    assert_true(v == 2);
    assert_true(bqp_get(&t, "s{quantile=\"0.5\"}", &v) && isnan(v));
    assert_true(bqp_get(&t, "inf{a=\"1\",b=\"2\"}", &v) && isinf(v) && v < 0);
    assert_false(bqp_get(&t, "inf{b=\"2\",a=\"1\"}", &v)); /* keys sort the labels */
    assert_false(bqp_get(&t, "nope", &v));
    bqp_free(&t);
}

#define HG "# HELP g x\n# TYPE g gauge\n"
#define HC "# HELP c_total x\n# TYPE c_total counter\n"
#define HH "# HELP h x\n# TYPE h histogram\n"

static void broken_texts_are_rejected(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } cases[] = {
        {HG "g 1", "no newline at the end"},
        {HG "g 1\r\n", "CR"},
        {HG "1g 1\n", "bad metric name"},
        {HG "g-x 1\n", "want one space"},
        {"# HELP 9g x\n", "bad metric name in HELP"},
        {"# HELP g x\n# TYPE g gauges\ng 1\n", "unknown type"},
        {"g 1\n", "without HELP and TYPE"},
        {"# TYPE g gauge\ng 1\n", "without HELP and TYPE"},
        {"# HELP g x\ng 1\n", "without HELP and TYPE"},
        {HG "g 1\n# HELP g again\n", "after its samples"},
        {"# HELP g x\n# HELP g y\n# TYPE g gauge\n", "second HELP"},
        {"# HELP g x\n# TYPE g gauge\n# TYPE g counter\n", "second TYPE"},
        {HG "g 1\n" HC "c_total 1\ng 2\n", "not in one group"},
        {HG "g{a=\"1\"} 1\ng{a=\"1\"} 2\n", "duplicate series"},
        {HG "g{b=\"2\",a=\"1\"} 1\ng{a=\"1\",b=\"2\"} 2\n", "duplicate series"},
        {HG "g{a=\"1\",a=\"2\"} 1\n", "label a twice"},
        {HG "g{1a=\"1\"} 1\n", "bad label name"},
        {HG "g{__a=\"1\"} 1\n", "bad label name"},
        {HG "g{a=1} 1\n", "want =\""},
        {HG "g{a=\"1} 1\n", "unterminated"},
        {HG "g{a=\"\\t\"} 1\n", "bad escape"},
        {HG "g{a=\"1\" b=\"2\"} 1\n", "want , or }"},
        {"# HELP g bad \\t escape\n# TYPE g gauge\ng 1\n", "bad escape in HELP"},
        {HG "g one\n", "bad value"},
        {HG "g 0x10\n", "bad value"},
        {HG "g inf\n", "bad value"},
        {HG "g 1 12.5\n", "bad timestamp"},
        {HG "g  1\n", "bad value"},
        {"# HELP c x\n# TYPE c counter\nc 1\n", "does not end in _total"},
        {HC "c_total -1\n", "negative"},
        {HC "c_total NaN\n", "negative"},
        {HH "h 1\n", "without _bucket"},
        {HH "h_bucket 1\nh_sum 1\nh_count 1\n", "without a valid le"},
        {HH "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "last bucket is not"},
        {HH "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", "decreases"},
        {HH "h_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\n"
            "h_count 1\n",
         "not increasing"},
        {HH "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n", "_count is not"},
        {HH "h_bucket{le=\"+Inf\"} 1\nh_count 1\n", "no _sum"},
        {HH "h_bucket{le=\"+Inf\"} 1\nh_sum 1\n", "no _count"},
        {HH "h_bucket{le=\"+Inf\"} 1\nh_sum{le=\"1\"} 1\nh_count 1\n", "le on _sum"},
        {"# HELP s x\n# TYPE s summary\ns 1\n", "without quantile"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bqp_text_t t;
        char err[256] = "";
        if (bqp_parse(cases[i].text, &t, err, sizeof err) == 0)
            fail_msg("case %zu accepted:\n%s", i, cases[i].text);
        if (strstr(err, cases[i].why) == NULL || strncmp(err, "line ", 5) != 0)
            fail_msg("case %zu: error \"%s\", want \"%s\"", i, err, cases[i].why);
        assert_int_equal(t.n, 0); /* freed */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(good_text_parses_and_values_are_found),
        cmocka_unit_test(broken_texts_are_rejected),
    };
    return cmocka_run_group_tests_name("prom_parse", tests, NULL, NULL);
}
