/* Integration tests for bury, kick, kick-job and touch over TCP: who may
 * bury or touch a job, what kick moves (buried jobs before delayed ones) and
 * the id parsing of these commands. Ports testserv.c's peek_buried_kick,
 * touch_bad_format, touch_not_found, bury_bad_format, kickjob_bad_format,
 * kickjob_buried and kickjob_delayed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

/* testserv: peek_buried_kick. Only a reserved job can be buried; kick 1
 * makes it ready again; nothing is left to kick afterwards. */
static void bury_then_kick_makes_job_ready(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "A", 1);
    it_cmd(t->fd, "bury 1 0\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "peek-buried\r\n", "NOT_FOUND\r\n");

    bqt_sends(t->fd, "reserve-with-timeout 0\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "A");
    it_cmd(t->fd, "bury 1 0\r\n", "BURIED\r\n");
    bqt_sends(t->fd, "peek-buried\r\n");
    it_expect_job(t->fd, "FOUND", 1, "A");

    it_cmd(t->fd, "kick 1\r\n", "KICKED 1\r\n");
    it_cmd(t->fd, "peek-buried\r\n", "NOT_FOUND\r\n");
    bqt_sends(t->fd, "peek-ready\r\n");
    it_expect_job(t->fd, "FOUND", 1, "A");
    it_cmd(t->fd, "kick 1\r\n", "KICKED 0\r\n");
}

/* testserv: touch_bad_format. */
static void touch_bad_id_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "touch a111\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "touch 111a\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "touch !@#!@#\r\n", "BAD_FORMAT\r\n");
}

/* testserv: touch_not_found. */
static void touch_missing_job_is_not_found(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "touch 1\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "touch 100000000000000\r\n", "NOT_FOUND\r\n");
}

/* touch works only for the connection holding the reservation. */
static void touch_only_by_the_reserver(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 60", "A", 1);
    it_cmd(t->fd, "touch 1\r\n", "NOT_FOUND\r\n");
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "A");
    int other = bqt_client(&t->srv);
    it_cmd(other, "touch 1\r\n", "NOT_FOUND\r\n");
    close(other);
    it_cmd(t->fd, "touch 1\r\n", "TOUCHED\r\n");
    it_expect_state(t->fd, 1, "reserved");
}

/* testserv: bury_bad_format. */
static void bury_bad_arguments_are_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "bury 111abc 2\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "bury 111\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "bury 111 222abc\r\n", "BAD_FORMAT\r\n");
}

/* testserv: kickjob_bad_format. */
static void kick_job_bad_id_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "kick-job a111\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "kick-job 111a\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "kick-job !@#!@#\r\n", "BAD_FORMAT\r\n");
}

/* testserv: kickjob_buried. */
static void kick_job_kicks_a_buried_job_once(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "A", 1);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "A");
    it_cmd(t->fd, "bury 1 0\r\n", "BURIED\r\n");
    it_cmd(t->fd, "kick-job 100\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "kick-job 1\r\n", "KICKED\r\n");
    it_cmd(t->fd, "kick-job 1\r\n", "NOT_FOUND\r\n");
    it_expect_state(t->fd, 1, "ready");
}

/* testserv: kickjob_delayed. A ready job cannot be kicked, a delayed one once. */
static void kick_job_kicks_a_delayed_job_once(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "A", 1);
    it_put(t->fd, "0 10 1", "B", 2);
    it_cmd(t->fd, "kick-job 1\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "kick-job 2\r\n", "KICKED\r\n");
    it_cmd(t->fd, "kick-job 2\r\n", "NOT_FOUND\r\n");
    it_expect_state(t->fd, 2, "ready");
}

/* kick moves buried jobs first; only when none are buried, delayed ones. */
static void kick_prefers_buried_over_delayed(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "A", 1);
    it_put(t->fd, "0 100 1", "B", 2);
    it_put(t->fd, "0 100 1", "C", 3);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "A");
    it_cmd(t->fd, "bury 1 0\r\n", "BURIED\r\n");
    it_cmd(t->fd, "kick 10\r\n", "KICKED 1\r\n");
    it_expect_state(t->fd, 2, "delayed");
    it_cmd(t->fd, "kick 10\r\n", "KICKED 2\r\n");
    it_expect_state(t->fd, 3, "ready");
    it_cmd(t->fd, "kick 10\r\n", "KICKED 0\r\n");
    char *kicks = it_job_stat(t->fd, 2, "kicks");
    assert_string_equal(kicks, "1");
    free(kicks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(bury_then_kick_makes_job_ready),    IT_TEST(touch_bad_id_is_bad_format),
        IT_TEST(touch_missing_job_is_not_found),    IT_TEST(touch_only_by_the_reserver),
        IT_TEST(bury_bad_arguments_are_bad_format), IT_TEST(kick_job_bad_id_is_bad_format),
        IT_TEST(kick_job_kicks_a_buried_job_once),  IT_TEST(kick_job_kicks_a_delayed_job_once),
        IT_TEST(kick_prefers_buried_over_delayed),
    };
    return cmocka_run_group_tests_name("kick_bury", tests, NULL, NULL);
}
