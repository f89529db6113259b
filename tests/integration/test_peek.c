/* Integration tests for peek, peek-ready and peek-delayed over TCP: found
 * and missing ids, id parsing, which delayed job peek-delayed shows, and
 * that the peek-* commands look at the used tube only. Ports testserv.c's
 * peek_ok, peek_not_found, peek_bad_format and peek_delayed (peek_buried_kick
 * is in test_kick_bury.c, peek_ok_unix in test_connections.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

/* testserv: peek_ok. */
static void peek_existing_job_is_found(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    bqt_sends(t->fd, "peek 1\r\n");
    it_expect_job(t->fd, "FOUND", 1, "a");
}

/* testserv: peek_not_found. */
static void peek_missing_job_is_not_found(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    it_cmd(t->fd, "peek 2\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "peek 18446744073709551615\r\n", "NOT_FOUND\r\n");
}

/* testserv: peek_bad_format. Ids beyond UINT64_MAX or with letters. */
static void peek_bad_id_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "peek 18446744073709551616\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "peek 184467440737095516160000000000000000000000000000\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "peek foo111\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "peek 111foo\r\n", "BAD_FORMAT\r\n");
}

/* testserv: peek_delayed. The delayed job with the soonest deadline first. */
static void peek_delayed_shows_soonest_deadline(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "peek-delayed\r\n", "NOT_FOUND\r\n");
    it_put(t->fd, "0 0 1", "A", 1);
    it_put(t->fd, "0 99 1", "B", 2);
    it_put(t->fd, "0 98 1", "C", 3);

    bqt_sends(t->fd, "peek-delayed\r\n");
    it_expect_job(t->fd, "FOUND", 3, "C");
    it_cmd(t->fd, "delete 3\r\n", "DELETED\r\n");
    bqt_sends(t->fd, "peek-delayed\r\n");
    it_expect_job(t->fd, "FOUND", 2, "B");
    it_cmd(t->fd, "delete 2\r\n", "DELETED\r\n");
    it_cmd(t->fd, "peek-delayed\r\n", "NOT_FOUND\r\n");
}

/* peek-ready shows the highest-priority (lowest number) ready job, lowest id
 * among equals. */
static void peek_ready_shows_most_urgent_job(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "peek-ready\r\n", "NOT_FOUND\r\n");
    it_put(t->fd, "5 0 1", "five", 1);
    it_put(t->fd, "3 0 1", "three-a", 2);
    it_put(t->fd, "3 0 1", "three-b", 3);
    bqt_sends(t->fd, "peek-ready\r\n");
    it_expect_job(t->fd, "FOUND", 2, "three-a");
}

/* peek-ready/-delayed/-buried look at the used tube, not the watched ones;
 * peek <id> finds a job in any tube. */
static void peek_commands_use_the_used_tube(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "use other\r\n", "USING other\r\n");
    it_put(t->fd, "0 0 1", "r", 1);
    it_put(t->fd, "0 50 1", "d", 2);
    it_cmd(t->fd, "use default\r\n", "USING default\r\n");
    it_cmd(t->fd, "watch other\r\n", "WATCHING 2\r\n");
    it_cmd(t->fd, "peek-ready\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "peek-delayed\r\n", "NOT_FOUND\r\n");
    bqt_sends(t->fd, "peek 2\r\n");
    it_expect_job(t->fd, "FOUND", 2, "d");
    it_cmd(t->fd, "use other\r\n", "USING other\r\n");
    bqt_sends(t->fd, "peek-ready\r\n");
    it_expect_job(t->fd, "FOUND", 1, "r");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(peek_existing_job_is_found),       IT_TEST(peek_missing_job_is_not_found),
        IT_TEST(peek_bad_id_is_bad_format),        IT_TEST(peek_delayed_shows_soonest_deadline),
        IT_TEST(peek_ready_shows_most_urgent_job), IT_TEST(peek_commands_use_the_used_tube),
    };
    return cmocka_run_group_tests_name("peek", tests, NULL, NULL);
}
