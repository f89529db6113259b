/* Integration tests for pause-tube over TCP: a paused tube holds back
 * reserve until the pause ends, pause 0 releases a blocked reserver at once,
 * and what still works on a paused tube. Every wait is a blocking reply with
 * a deadline, measured with bqt_now_ms(). Ports testserv.c's pause and
 * unpause_tube. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

/* testserv: pause. After pause-tube default 1, reserve returns the job only
 * when the second has passed. */
static void pause_holds_reserve_for_the_pause(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 0", "x", 1);
    long long t0 = bqt_now_ms();
    it_cmd(t->fd, "pause-tube default 1\r\n", "PAUSED\r\n");
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "x");
    long long elapsed = bqt_now_ms() - t0;
    assert_in_range(elapsed, 1000 - IT_MS_SLACK, 2999);
}

/* testserv: unpause_tube. A reserver blocked on a tube paused for a day gets
 * the job as soon as the tube is paused for 0 s. */
static void pause_zero_releases_blocked_reserver(void **state)
{
    it_ctx_t *t = *state;
    int worker = bqt_client(&t->srv);
    it_put(t->fd, "0 0 0", "", 1);
    it_cmd(t->fd, "pause-tube default 86400\r\n", "PAUSED\r\n");
    bqt_sends(worker, "reserve\r\n");
    it_wait_stat(t->fd, "stats-tube default\r\n", "current-waiting", "1", BQT_DEADLINE_MS);
    long long t0 = bqt_now_ms();
    it_cmd(t->fd, "pause-tube default 0\r\n", "PAUSED\r\n");
    it_expect_job(worker, "RESERVED", 1, "");
    assert_in_range(bqt_now_ms() - t0, 0, 999);
    close(worker);
}

/* reserve-with-timeout on a paused tube with a ready job times out. */
static void paused_tube_times_out_reserve_with_timeout(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "x", 1);
    it_cmd(t->fd, "pause-tube default 100\r\n", "PAUSED\r\n");
    long long t0 = bqt_now_ms();
    it_cmd(t->fd, "reserve-with-timeout 1\r\n", "TIMED_OUT\r\n");
    assert_in_range(bqt_now_ms() - t0, 1000 - IT_MS_SLACK, 2999);
    it_expect_state(t->fd, 1, "ready");
}

/* peek-ready, kick, reserve-job and delete still work on a paused tube. */
static void paused_tube_still_serves_other_commands(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    it_put(t->fd, "0 100 1", "b", 2);
    it_cmd(t->fd, "pause-tube default 100\r\n", "PAUSED\r\n");
    bqt_sends(t->fd, "peek-ready\r\n");
    it_expect_job(t->fd, "FOUND", 1, "a");
    it_cmd(t->fd, "kick 1\r\n", "KICKED 1\r\n");
    bqt_sends(t->fd, "reserve-job 2\r\n");
    it_expect_job(t->fd, "RESERVED", 2, "b");
    it_cmd(t->fd, "delete 1\r\n", "DELETED\r\n");
    it_cmd(t->fd, "delete 2\r\n", "DELETED\r\n");
}

/* pause-tube on a missing tube, and its argument parsing. */
static void pause_tube_missing_or_malformed(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "pause-tube nosuch 10\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "pause-tube default\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "pause-tube default x\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "pause-tube default 4294967296\r\n", "BAD_FORMAT\r\n");
}

/* stats-tube reports the pause, the time left and the per-tube counter. */
static void stats_tube_shows_pause(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "pause-tube default 100\r\n", "PAUSED\r\n");
    char *body = it_ok(t->fd, "stats-tube default\r\n");
    char *pause = it_yaml_get(body, "pause");
    char *left = it_yaml_get(body, "pause-time-left");
    char *count = it_yaml_get(body, "cmd-pause-tube");
    assert_string_equal(pause, "100");
    assert_in_range(strtol(left, NULL, 10), 99, 100);
    assert_string_equal(count, "1");
    free(pause);
    free(left);
    free(count);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(pause_holds_reserve_for_the_pause),
        IT_TEST(pause_zero_releases_blocked_reserver),
        IT_TEST(paused_tube_times_out_reserve_with_timeout),
        IT_TEST(paused_tube_still_serves_other_commands),
        IT_TEST(pause_tube_missing_or_malformed),
        IT_TEST(stats_tube_shows_pause),
    };
    return cmocka_run_group_tests_name("pause", tests, NULL, NULL);
}
