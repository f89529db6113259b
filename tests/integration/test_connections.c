/* Integration tests for connection-level behaviour: close and quit release
 * a connection's reserved jobs, a half-closed waiting connection gets
 * TIMED_OUT, drain mode (SIGUSR1) refuses only put, and the server listens
 * on a UNIX socket (also over a stale socket file). Ports testserv.c's
 * close_releases_job, quit_releases_job, put_in_drain, peek_ok_unix and
 * unix_auto_removal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "tests/integration/itest.h"

extern char **environ;

/* A consumer reserves job 1 (ttr 100) put by the producer t->fd. */
static int reserve_as_consumer(it_ctx_t *t)
{
    int cons = bqt_client(&t->srv);
    bqt_sends(cons, "reserve-with-timeout 1\r\n");
    it_put(t->fd, "0 0 100", "a", 1);
    it_expect_job(cons, "RESERVED", 1, "a");
    it_expect_state(t->fd, 1, "reserved");
    return cons;
}

/* testserv: close_releases_job. */
static void close_releases_reserved_job(void **state)
{
    it_ctx_t *t = *state;
    int cons = reserve_as_consumer(t);
    close(cons);
    bqt_sends(t->fd, "reserve-with-timeout 1\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    char *releases = it_job_stat(t->fd, 1, "releases");
    assert_string_equal(releases, "0");
    free(releases);
}

/* testserv: quit_releases_job. quit also closes the connection. */
static void quit_releases_reserved_job(void **state)
{
    it_ctx_t *t = *state;
    int cons = reserve_as_consumer(t);
    bqt_sends(cons, "quit\r\n");
    bqt_expect_eof(cons, BQT_DEADLINE_MS);
    close(cons);
    bqt_sends(t->fd, "reserve-with-timeout 1\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
}

/* A waiting reserve on a connection that shuts down its write side answers
 * TIMED_OUT at once; commands sent before are answered first; then EOF. */
static void half_close_times_out_waiting_reserve(void **state)
{
    it_ctx_t *t = *state;
    bqt_sends(t->fd, "list-tube-used\r\nreserve\r\n");
    bqt_expect(t->fd, "USING default\r\n");
    int probe = bqt_client(&t->srv);
    it_wait_stat(probe, "stats\r\n", "current-waiting", "1", BQT_DEADLINE_MS);
    close(probe);
    long long t0 = bqt_now_ms();
    assert_int_equal(shutdown(t->fd, SHUT_WR), 0);
    bqt_expect(t->fd, "TIMED_OUT\r\n");
    assert_in_range(bqt_now_ms() - t0, 0, 999);
    bqt_expect_eof(t->fd, BQT_DEADLINE_MS);
}

/* Puts SIGUSR1 to the server and waits until stats says draining. */
static void enter_drain_mode(it_ctx_t *t)
{
    bqt_server_signal(&t->srv, SIGUSR1);
    it_wait_stat(t->fd, "stats\r\n", "draining", "true", BQT_DEADLINE_MS);
}

/* testserv: put_in_drain. */
static void put_in_drain_mode_is_draining(void **state)
{
    it_ctx_t *t = *state;
    enter_drain_mode(t);
    bqt_sends(t->fd, "put 0 0 1 1\r\n");
    bqt_sends(t->fd, "x\r\n");
    bqt_expect(t->fd, "DRAINING\r\n");
    assert_int_equal(bqt_stat_int(t->fd, "stats\r\n", "total-jobs"), 0);
}

/* In drain mode only put is refused; EXPECTED_CRLF comes before DRAINING;
 * existing jobs can be reserved, kicked and deleted; new clients connect. */
static void drain_mode_serves_everything_but_put(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 10", "a", 1);
    it_put(t->fd, "0 100 10", "b", 2);
    enter_drain_mode(t);
    bqt_sends(t->fd, "put 0 0 1 1\r\nxyz\r\n");
    bqt_expect(t->fd, "EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n");
    int other = bqt_client(&t->srv);
    it_cmd(other, "use default\r\n", "USING default\r\n");
    bqt_sends(other, "reserve\r\n");
    it_expect_job(other, "RESERVED", 1, "a");
    it_cmd(other, "release 1 0 0\r\n", "RELEASED\r\n");
    it_cmd(other, "kick 5\r\n", "KICKED 1\r\n");
    it_cmd(other, "delete 1\r\n", "DELETED\r\n");
    it_cmd(other, "delete 2\r\n", "DELETED\r\n");
    close(other);
}

/* The server with -l unix:<dir>/sock. */
static int setup_unix(void **state)
{
    return it_start_on(state, true, NULL);
}

/* testserv: peek_ok_unix. */
static void put_and_peek_over_unix_socket(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 1", "a", 1);
    bqt_sends(t->fd, "peek 1\r\n");
    it_expect_job(t->fd, "FOUND", 1, "a");
}

static bool unix_socket_accepts(void *path)
{
    int fd = bqt_connect_unix(path);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* testserv: unix_auto_removal. A server killed with SIGKILL leaves its
 * socket file behind; a new server on the same path replaces it. */
static void stale_unix_socket_is_replaced(void **state)
{
    it_ctx_t *t = *state;
    close(t->fd);
    t->fd = -1;
    bqt_server_signal(&t->srv, SIGKILL);
    assert_int_not_equal(bqt_server_wait(&t->srv, BQT_DEADLINE_MS), -1);
    assert_int_equal(access(t->srv.unix_path, F_OK), 0);
    assert_false(unix_socket_accepts(t->srv.unix_path));

    char listen[320], log[300];
    snprintf(listen, sizeof listen, "unix:%s", t->srv.unix_path);
    snprintf(log, sizeof log, "%s/second.log", t->srv.dir);
    char *const argv[] = {(char *)bqt_our_binary(), "-l", listen, NULL};
    posix_spawn_file_actions_t fa;
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawn(&t->spawned, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(rc, 0);
    assert_true(bqt_wait_until(unix_socket_accepts, t->srv.unix_path, 10000));
    t->fd = bqt_connect_unix(t->srv.unix_path);
    it_put(t->fd, "0 0 1", "a", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(close_releases_reserved_job),
        IT_TEST(quit_releases_reserved_job),
        IT_TEST(half_close_times_out_waiting_reserve),
        IT_TEST(put_in_drain_mode_is_draining),
        IT_TEST(drain_mode_serves_everything_but_put),
        cmocka_unit_test_setup_teardown(put_and_peek_over_unix_socket, setup_unix, it_teardown),
        cmocka_unit_test_setup_teardown(stale_unix_socket_is_replaced, setup_unix, it_teardown),
    };
    return cmocka_run_group_tests_name("connections", tests, NULL, NULL);
}
