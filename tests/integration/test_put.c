/* Integration tests for put over TCP: argument parsing (priority, delay,
 * ttr, size), the job size limit (-z) and how JOB_TOO_BIG swallows exactly
 * <bytes>+2 bytes, EXPECTED_CRLF, and the ttr values reported back by
 * stats-job. Ports testserv.c's put tests: too_big, job_size_invalid,
 * job_size_max_plus_1, negative_delay, garbage_priority, negative_priority,
 * max_priority, too_big_priority, zero_delay, small_delay, ttrlarge and
 * ttr_small (put_in_drain is in test_connections.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

/* The largest -z beanstalkd accepts (1 GiB). */
#define MAX_JOB_SIZE 1073741824u

static int setup_z10(void **state)
{
    static const char *const args[] = {"-z", "10", NULL};
    return it_start(state, args);
}

static int setup_zmax(void **state)
{
    static const char *const args[] = {"-z", "1073741824", NULL};
    return it_start(state, args);
}

/* testserv: too_big. With -z 10, "put ... 11" swallows the next 13 bytes
 * ("delete 9999\r\n") as its body, then the next put works. */
static void too_big_swallows_body_then_next_put_works(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put 0 0 0 11\r\n");
    bqt_sends(t->fd, "delete 9999\r\n");
    bqt_sends(t->fd, "put 0 0 0 1\r\n");
    bqt_sends(t->fd, "x\r\n");
    bqt_expect(t->fd, "JOB_TOO_BIG\r\n");
    bqt_expect(t->fd, "INSERTED 1\r\n");
}

/* JOB_TOO_BIG is sent only after exactly <bytes>+2 bytes: with one byte
 * missing nothing arrives; the byte after them is a new command. */
static void too_big_waits_for_exactly_bytes_plus_2(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put 0 0 0 11\r\nyyyyyyyyyyyy");
    bqt_expect_silence(t->fd, 200);
    bqt_sends(t->fd, "ylist-tube-used\r\n");
    bqt_expect(t->fd, "JOB_TOO_BIG\r\nUSING default\r\n");
    long long jobs = bqt_stat_int(t->fd, "stats\r\n", "total-jobs");
    assert_int_equal(jobs, 0);
}

/* The size check comes before the trailing-garbage check of the line. */
static void too_big_wins_over_trailing_garbage(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put 0 0 0 11 junk\r\n0123456789abclist-tube-used\r\n");
    bqt_expect(t->fd, "JOB_TOO_BIG\r\nUSING default\r\n");
}

/* testserv: job_size_invalid. Sizes that do not parse give BAD_FORMAT
 * without swallowing anything. */
static void job_size_invalid_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put 0 0 0 4294967296\r\n");
    bqt_sends(t->fd, "put 0 0 0 10b\r\n");
    bqt_sends(t->fd, "put 0 0 0 --!@#$%^&&**()0b\r\n");
    bqt_sends(t->fd, "put 0 0 0 1\r\n");
    bqt_sends(t->fd, "x\r\n");
    bqt_expect(t->fd, "BAD_FORMAT\r\nBAD_FORMAT\r\nBAD_FORMAT\r\nINSERTED 1\r\n");
}

/* testserv: job_size_max_plus_1. With the largest -z, a job one byte larger
 * is still refused after its whole body has been read. */
static void job_size_max_plus_1_is_too_big(void **state)
{
    it_ctx_t *t = *state;
    const size_t chunk = 1024 * 1024;
    char *body = malloc(chunk);
    assert_non_null(body);
    memset(body, 'a', chunk);
    bqt_sends(t->fd, "put 0 0 0 1073741825\r\n");
    for (size_t sent = 0; sent < MAX_JOB_SIZE; sent += chunk)
        bqt_send(t->fd, body, chunk);
    free(body);
    bqt_sends(t->fd, "x\r\n");
    bqt_expect(t->fd, "JOB_TOO_BIG\r\n");
    it_cmd(t->fd, "list-tube-used\r\n", "USING default\r\n");
}

/* Without -z the limit is 65535 bytes: 65535 is stored, 65536 refused. */
static void default_max_job_size_is_65535(void **state)
{
    it_ctx_t *t = *state;
    const size_t max = 65535;
    char *body = malloc(max + 2);
    assert_non_null(body);
    memset(body, 'b', max + 1);
    body[max + 1] = '\0';
    bqt_sends(t->fd, "put 0 0 1 65536\r\n");
    bqt_sends(t->fd, body);
    bqt_sends(t->fd, "\r\n");
    bqt_expect(t->fd, "JOB_TOO_BIG\r\n");
    body[max] = '\0';
    it_put(t->fd, "0 0 1", body, 1);
    free(body);
    long long limit = bqt_stat_int(t->fd, "stats\r\n", "max-job-size");
    assert_int_equal(limit, 65535);
}

/* A body whose last two bytes are not CRLF: EXPECTED_CRLF, and the bytes
 * after <bytes>+2 are parsed as the next command. */
static void body_without_crlf_is_expected_crlf(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put 1 0 10 1\r\nabc\r\n");
    bqt_expect(t->fd, "EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n");
    it_cmd(t->fd, "peek 1\r\n", "NOT_FOUND\r\n");
}

/* testserv: negative_delay. */
static void negative_delay_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "put 512 -1 100 0\r\n", "BAD_FORMAT\r\n");
}

/* testserv: garbage_priority. The body is not consumed, so it is parsed as
 * a command of its own. */
static void garbage_priority_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put -1kkdj9djjkd9 0 100 1\r\n");
    bqt_sends(t->fd, "a\r\n");
    bqt_expect(t->fd, "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n");
}

/* testserv: negative_priority. */
static void negative_priority_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put -1 0 100 1\r\n");
    bqt_sends(t->fd, "a\r\n");
    bqt_expect(t->fd, "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n");
}

/* testserv: max_priority. */
static void max_priority_is_accepted(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "4294967295 0 100", "a", 1);
    char *pri = it_job_stat(t->fd, 1, "pri");
    assert_string_equal(pri, "4294967295");
    free(pri);
}

/* testserv: too_big_priority. */
static void too_big_priority_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "put 4294967296 0 100 1\r\n");
    bqt_sends(t->fd, "a\r\n");
    bqt_expect(t->fd, "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n");
}

/* testserv: zero_delay. An empty body with delay 0 is a ready job. */
static void zero_delay_put_is_ready(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "", 1);
    it_expect_state(t->fd, 1, "ready");
}

/* testserv: small_delay. Delay 1 gives a delayed job. */
static void small_delay_put_is_delayed(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 1 1", "", 1);
    it_expect_state(t->fd, 1, "delayed");
}

/* testserv: ttrlarge. Large ttr values come back unchanged (a microsecond
 * overflow regression in old beanstalkd). */
static void large_ttr_round_trips(void **state)
{
    it_ctx_t *t = *state;
    static const char *const ttrs[] = {"120", "4294", "4295", "4296", "4297", "5000", "21600"};
    const size_t n = sizeof ttrs / sizeof ttrs[0];
    for (size_t i = 0; i < n; i++) {
        char args[32];
        snprintf(args, sizeof args, "0 0 %s", ttrs[i]);
        it_put(t->fd, args, "a", i + 1);
    }
    for (size_t i = 0; i < n; i++) {
        char *ttr = it_job_stat(t->fd, i + 1, "ttr");
        assert_string_equal(ttr, ttrs[i]);
        free(ttr);
    }
}

/* testserv: ttr_small. A ttr of 0 is raised to 1 s. */
static void zero_ttr_becomes_one(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 0", "a", 1);
    char *ttr = it_job_stat(t->fd, 1, "ttr");
    assert_string_equal(ttr, "1");
    free(ttr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(too_big_swallows_body_then_next_put_works, setup_z10,
                                        it_teardown),
        cmocka_unit_test_setup_teardown(too_big_waits_for_exactly_bytes_plus_2, setup_z10,
                                        it_teardown),
        cmocka_unit_test_setup_teardown(too_big_wins_over_trailing_garbage, setup_z10, it_teardown),
        cmocka_unit_test_setup_teardown(job_size_invalid_is_bad_format, setup_zmax, it_teardown),
        cmocka_unit_test_setup_teardown(job_size_max_plus_1_is_too_big, setup_zmax, it_teardown),
        IT_TEST(default_max_job_size_is_65535),
        IT_TEST(body_without_crlf_is_expected_crlf),
        IT_TEST(negative_delay_is_bad_format),
        IT_TEST(garbage_priority_is_bad_format),
        IT_TEST(negative_priority_is_bad_format),
        IT_TEST(max_priority_is_accepted),
        IT_TEST(too_big_priority_is_bad_format),
        IT_TEST(zero_delay_put_is_ready),
        IT_TEST(small_delay_put_is_delayed),
        IT_TEST(large_ttr_round_trips),
        IT_TEST(zero_ttr_becomes_one),
    };
    return cmocka_run_group_tests_name("put", tests, NULL, NULL);
}
