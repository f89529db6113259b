/* Integration tests for delete and release over TCP: which jobs a
 * connection may delete or release, argument parsing, and the state, priority
 * and counters of a released job. Ports testserv.c's delete_ready,
 * delete_reserved_by_other, delete_bad_format, release_bad_format and
 * release_not_found. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

/* testserv: delete_ready. */
static void delete_ready_job(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 0", "", 1);
    it_cmd(t->fd, "delete 1\r\n", "DELETED\r\n");
    it_cmd(t->fd, "peek 1\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "delete 1\r\n", "NOT_FOUND\r\n");
}

/* testserv: delete_reserved_by_other. */
static void delete_job_reserved_by_other_is_not_found(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    int other = bqt_client(&t->srv);
    bqt_sends(other, "reserve\r\n");
    it_expect_job(other, "RESERVED", 1, "a");
    it_cmd(t->fd, "delete 1\r\n", "NOT_FOUND\r\n");
    it_cmd(other, "delete 1\r\n", "DELETED\r\n");
    close(other);
}

/* Buried and delayed jobs can be deleted by any connection. */
static void delete_buried_and_delayed_jobs(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    it_put(t->fd, "0 100 1", "b", 2);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    it_cmd(t->fd, "bury 1 0\r\n", "BURIED\r\n");
    int other = bqt_client(&t->srv);
    it_cmd(other, "delete 1\r\n", "DELETED\r\n");
    it_cmd(other, "delete 2\r\n", "DELETED\r\n");
    close(other);
    long long jobs = bqt_stat_int(t->fd, "stats\r\n", "current-jobs-buried");
    assert_int_equal(jobs, 0);
}

/* testserv: delete_bad_format. */
static void delete_bad_id_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "delete 18446744073709551616\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "delete 184467440737095516160000000000000000000000000000\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "delete foo111\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "delete 111foo\r\n", "BAD_FORMAT\r\n");
}

/* testserv: release_bad_format. Bad id, priority or delay. */
static void release_bad_arguments_are_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "release 18446744073709551616 1 1\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "release 184467440737095516160000000000000000000000000000 1 1\r\n",
           "BAD_FORMAT\r\n");
    it_cmd(t->fd, "release foo111\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "release 111foo\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "release 18446744073709551615 abc 1\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "release 18446744073709551615 1 abc\r\n", "BAD_FORMAT\r\n");
}

/* testserv: release_not_found. */
static void release_unreserved_job_is_not_found(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "release 1 1 1\r\n", "NOT_FOUND\r\n");
    it_put(t->fd, "0 0 1", "a", 1);
    it_cmd(t->fd, "release 1 1 1\r\n", "NOT_FOUND\r\n");
}

/* Release sets the new priority; with a delay the job becomes delayed. */
static void release_sets_priority_and_delay(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "10 0 60", "a", 1);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    it_cmd(t->fd, "release 1 7 0\r\n", "RELEASED\r\n");
    char *pri = it_job_stat(t->fd, 1, "pri");
    assert_string_equal(pri, "7");
    free(pri);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    it_cmd(t->fd, "release 1 7 100\r\n", "RELEASED\r\n");
    it_expect_state(t->fd, 1, "delayed");
    char *releases = it_job_stat(t->fd, 1, "releases");
    assert_string_equal(releases, "2");
    free(releases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(delete_ready_job),
        IT_TEST(delete_job_reserved_by_other_is_not_found),
        IT_TEST(delete_buried_and_delayed_jobs),
        IT_TEST(delete_bad_id_is_bad_format),
        IT_TEST(release_bad_arguments_are_bad_format),
        IT_TEST(release_unreserved_job_is_not_found),
        IT_TEST(release_sets_priority_and_delay),
    };
    return cmocka_run_group_tests_name("delete_release", tests, NULL, NULL);
}
