/* Integration tests for reserve, reserve-with-timeout and reserve-job over
 * TCP: timeouts, DEADLINE_SOON, TTR expiry, several waiting workers, strict
 * timeout parsing (1.13) and reserve-job on jobs in every state. Every wait
 * is a blocking reply (or a polled stat) with a deadline, measured with
 * bqt_now_ms(). Ports testserv.c's reserve_with_timeout_2conns,
 * reserve_ttr_deadline_soon, reserve_job_ttr_deadline_soon,
 * reserve_job_already_reserved, reserve_job_ready, reserve_job_delayed and
 * reserve_job_buried. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

/* testserv: reserve_with_timeout_2conns. Another connection watching the
 * same tube does not disturb the timeout. */
static void reserve_with_timeout_times_out_with_two_watchers(void **state)
{
    it_ctx_t *t = *state;
    int other = bqt_client(&t->srv);
    it_cmd(t->fd, "watch foo\r\n", "WATCHING 2\r\n");
    long long t0 = bqt_now_ms();
    bqt_sends(t->fd, "reserve-with-timeout 1\r\n");
    it_cmd(other, "watch foo\r\n", "WATCHING 2\r\n");
    bqt_expect(t->fd, "TIMED_OUT\r\n");
    assert_in_range(bqt_now_ms() - t0, 1000 - IT_MS_SLACK, 2999);
    close(other);
}

/* reserve-with-timeout 0 answers at once, with a job or TIMED_OUT. */
static void reserve_with_timeout_zero_answers_at_once(void **state)
{
    it_ctx_t *t = *state;
    long long t0 = bqt_now_ms();
    it_cmd(t->fd, "reserve-with-timeout 0\r\n", "TIMED_OUT\r\n");
    assert_in_range(bqt_now_ms() - t0, 0, 999);
    it_put(t->fd, "0 0 1", "a", 1);
    bqt_sends(t->fd, "reserve-with-timeout 0\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
}

/* Commands pipelined behind a waiting reserve run after it completes. */
static void command_behind_waiting_reserve_runs_after_it(void **state)
{
    it_ctx_t *t = *state;
    long long t0 = bqt_now_ms();
    bqt_sends(t->fd, "reserve-with-timeout 1\r\nlist-tube-used\r\n");
    bqt_expect(t->fd, "TIMED_OUT\r\nUSING default\r\n");
    assert_in_range(bqt_now_ms() - t0, 1000 - IT_MS_SLACK, 2999);
}

/* 1.13 parses the timeout strictly: no sign, no overflow, <= INT_MAX
 * (1.12 accepted these with strtol). */
static void reserve_with_timeout_rejects_bad_timeouts(void **state)
{
    it_ctx_t *t = *state;
    if (it_is_ref112(t)) {
        it_note_skip("strict reserve-with-timeout parsing");
        skip();
    }
    it_cmd(t->fd, "reserve-with-timeout -1\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "reserve-with-timeout abc\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "reserve-with-timeout \r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "reserve-with-timeout 2147483648\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "reserve-with-timeout 4294967297\r\n", "BAD_FORMAT\r\n");
}

/* reserve takes no arguments; trailing text is BAD_FORMAT. */
static void reserve_with_trailing_text_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "reserve \r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "reservex\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "reserve-with-timeout\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "reserve-job\r\n", "BAD_FORMAT\r\n");
}

/* testserv: reserve_ttr_deadline_soon. With a ttr-1 job reserved and
 * nothing else ready, the next reserve answers DEADLINE_SOON at once and the
 * job stays reserved. */
static void reserve_with_job_near_deadline_is_deadline_soon(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    bqt_sends(t->fd, "reserve-with-timeout 1\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    it_expect_state(t->fd, 1, "reserved");
    long long t0 = bqt_now_ms();
    it_cmd(t->fd, "reserve-with-timeout 1\r\n", "DEADLINE_SOON\r\n");
    assert_in_range(bqt_now_ms() - t0, 0, 999);
    it_expect_state(t->fd, 1, "reserved");
    it_cmd(t->fd, "release 1 0 0\r\n", "RELEASED\r\n");
    it_expect_state(t->fd, 1, "ready");
}

/* A waiting reserve gets DEADLINE_SOON one second before the deadline of a
 * job the connection holds (ttr 2: after about 1 s, before 2 s). */
static void waiting_reserve_gets_deadline_soon(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 2", "a", 1);
    long long t0 = bqt_now_ms();
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    it_cmd(t->fd, "reserve\r\n", "DEADLINE_SOON\r\n");
    assert_in_range(bqt_now_ms() - t0, 1000 - IT_MS_SLACK, 1999);
}

/* With a deadline soon but another job ready, reserve delivers that job. */
static void deadline_soon_yields_to_a_ready_job(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    it_put(t->fd, "0 0 10", "b", 2);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 2, "b");
}

/* When the ttr runs out the job is ready again, counted as a timeout, and a
 * waiting worker gets it. */
static void expired_ttr_gives_job_to_waiting_worker(void **state)
{
    it_ctx_t *t = *state;
    int worker = bqt_client(&t->srv);
    it_put(t->fd, "0 0 1", "a", 1);
    long long t0 = bqt_now_ms();
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    bqt_sends(worker, "reserve-with-timeout 4\r\n");
    int poller = it_ttr_poller(t, t->fd);
    it_wait_stat(poller, "stats-job 1\r\n", "timeouts", "1", 3000);
    it_unpoll(poller, t->fd);
    it_expect_job(worker, "RESERVED", 1, "a");
    assert_in_range(bqt_now_ms() - t0, 1000 - IT_MS_SLACK, 2999);
    assert_int_equal(bqt_stat_int(t->fd, "stats\r\n", "job-timeouts"), 1);
    it_cmd(t->fd, "delete 1\r\n", "NOT_FOUND\r\n");
    it_cmd(worker, "delete 1\r\n", "DELETED\r\n");
    close(worker);
}

/* Reads "RESERVED <id> 1\r\n<body>\r\n" and returns the id. */
static unsigned long long read_reserved_id(int fd)
{
    char *line = bqt_expect_prefix(fd, "RESERVED ");
    unsigned long long id = strtoull(line + 9, NULL, 10);
    free(line);
    char body[3];
    assert_int_equal(bqt_read_n(fd, body, 3, BQT_DEADLINE_MS), 3);
    return id;
}

/* Two workers wait; two puts give each worker one job. */
static void two_waiting_workers_get_one_job_each(void **state)
{
    it_ctx_t *t = *state;
    int w1 = bqt_client(&t->srv), w2 = bqt_client(&t->srv);
    bqt_sends(w1, "reserve\r\n");
    bqt_sends(w2, "reserve-with-timeout 10\r\n");
    it_wait_stat(t->fd, "stats\r\n", "current-waiting", "2", BQT_DEADLINE_MS);
    it_put(t->fd, "0 0 10", "a", 1);
    it_put(t->fd, "0 0 10", "b", 2);
    unsigned long long id1 = read_reserved_id(w1), id2 = read_reserved_id(w2);
    assert_true((id1 == 1 && id2 == 2) || (id1 == 2 && id2 == 1));
    it_wait_stat(t->fd, "stats\r\n", "current-waiting", "0", BQT_DEADLINE_MS);
    close(w1);
    close(w2);
}

/* testserv: reserve_job_ttr_deadline_soon. A delayed job reserved by id
 * behaves like any reservation: DEADLINE_SOON, and after the ttr it is ready
 * (not delayed again). */
static void reserve_job_on_delayed_job_expires_to_ready(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 5 1", "a", 1);
    it_expect_state(t->fd, 1, "delayed");
    long long t0 = bqt_now_ms();
    bqt_sends(t->fd, "reserve-job 1\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    it_expect_state(t->fd, 1, "reserved");
    it_cmd(t->fd, "reserve-with-timeout 1\r\n", "DEADLINE_SOON\r\n");
    it_expect_state(t->fd, 1, "reserved");
    int poller = it_ttr_poller(t, t->fd);
    it_wait_stat(poller, "stats-job 1\r\n", "state", "ready", 3000);
    it_unpoll(poller, t->fd);
    assert_in_range(bqt_now_ms() - t0, 1000 - IT_MS_SLACK, 2999);
}

/* testserv: reserve_job_already_reserved. */
static void reserve_job_twice_is_not_found(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "A", 1);
    bqt_sends(t->fd, "reserve-job 1\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "A");
    it_cmd(t->fd, "reserve-job 1\r\n", "NOT_FOUND\r\n");
    int other = bqt_client(&t->srv);
    it_cmd(other, "reserve-job 1\r\n", "NOT_FOUND\r\n");
    close(other);
}

/* testserv: reserve_job_ready. */
static void reserve_job_takes_a_ready_job_by_id(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "A", 1);
    it_put(t->fd, "0 0 1", "B", 2);
    bqt_sends(t->fd, "reserve-job 2\r\n");
    it_expect_job(t->fd, "RESERVED", 2, "B");
    it_cmd(t->fd, "reserve-job 3\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "release 1 1 0\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "release 2 1 0\r\n", "RELEASED\r\n");
}

/* testserv: reserve_job_delayed. Released with delay 0, it is ready. */
static void reserve_job_takes_a_delayed_job_by_id(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 100 1", "A", 1);
    it_put(t->fd, "0 100 1", "B", 2);
    it_put(t->fd, "0 100 1", "C", 3);
    bqt_sends(t->fd, "reserve-job 2\r\n");
    it_expect_job(t->fd, "RESERVED", 2, "B");
    it_cmd(t->fd, "release 2 1 0\r\n", "RELEASED\r\n");
    it_expect_state(t->fd, 2, "ready");
    it_expect_state(t->fd, 1, "delayed");
}

/* testserv: reserve_job_buried. Two buried jobs reserved by id in reverse
 * order and released are ready. */
static void reserve_job_takes_buried_jobs_by_id(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "A", 1);
    bqt_sends(t->fd, "reserve-job 1\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "A");
    it_cmd(t->fd, "bury 1 1\r\n", "BURIED\r\n");
    it_put(t->fd, "0 0 1", "B", 2);
    bqt_sends(t->fd, "reserve-job 2\r\n");
    it_expect_job(t->fd, "RESERVED", 2, "B");
    it_cmd(t->fd, "bury 2 1\r\n", "BURIED\r\n");

    bqt_sends(t->fd, "reserve-job 2\r\n");
    it_expect_job(t->fd, "RESERVED", 2, "B");
    bqt_sends(t->fd, "reserve-job 1\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "A");
    it_cmd(t->fd, "release 1 1 0\r\n", "RELEASED\r\n");
    it_cmd(t->fd, "release 2 1 0\r\n", "RELEASED\r\n");
    it_expect_state(t->fd, 1, "ready");
    it_expect_state(t->fd, 2, "ready");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(reserve_with_timeout_times_out_with_two_watchers),
        IT_TEST(reserve_with_timeout_zero_answers_at_once),
        IT_TEST(command_behind_waiting_reserve_runs_after_it),
        IT_TEST(reserve_with_timeout_rejects_bad_timeouts),
        IT_TEST(reserve_with_trailing_text_is_bad_format),
        IT_TEST(reserve_with_job_near_deadline_is_deadline_soon),
        IT_TEST(waiting_reserve_gets_deadline_soon),
        IT_TEST(deadline_soon_yields_to_a_ready_job),
        IT_TEST(expired_ttr_gives_job_to_waiting_worker),
        IT_TEST(two_waiting_workers_get_one_job_each),
        IT_TEST(reserve_job_on_delayed_job_expires_to_ready),
        IT_TEST(reserve_job_twice_is_not_found),
        IT_TEST(reserve_job_takes_a_ready_job_by_id),
        IT_TEST(reserve_job_takes_a_delayed_job_by_id),
        IT_TEST(reserve_job_takes_buried_jobs_by_id),
    };
    return cmocka_run_group_tests_name("reserve", tests, NULL, NULL);
}
