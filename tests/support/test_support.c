/* Self-test of the test support library against the reference beanstalkd:
 * a server starts on a free port and answers, replies are read with
 * deadlines, stats parse, silence and EOF are detected, and a server stopped
 * by a signal is reaped. Skipped when the reference binary is missing. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"

static int start_reference(void **state)
{
    static bqt_server_t server;
    if (!bqt_reference_available()) {
        *state = NULL;
        return 0;
    }
    if (bqt_server_start(&server, bqt_reference_binary(), NULL) != 0)
        return -1;
    *state = &server;
    return 0;
}

static int stop_server(void **state)
{
    if (*state)
        bqt_server_stop(*state);
    return 0;
}

static bqt_server_t *server_or_skip(void **state)
{
    bqt_require(*state != NULL, "Debian's beanstalkd (the reference server)");
    return *state;
}

static void put_then_peek_round_trips(void **state)
{
    int fd = bqt_client(server_or_skip(state));
    bqt_sends(fd, "put 5 0 10 5\r\nhello\r\n");
    char *line = bqt_expect_prefix(fd, "INSERTED ");
    long long id = atoll(line + 9);
    char cmd[64], found[64];
    snprintf(cmd, sizeof cmd, "peek %lld\r\n", id);
    snprintf(found, sizeof found, "FOUND %lld 5\r\nhello\r\n", id);
    bqt_sends(fd, cmd);
    bqt_expect(fd, found);
    free(line);
    close(fd);
}

static void stat_int_reads_counters(void **state)
{
    int fd = bqt_client(server_or_skip(state));
    long long before = bqt_stat_int(fd, "stats\r\n", "cmd-put");
    bqt_sends(fd, "put 0 0 10 1\r\nx\r\n");
    free(bqt_expect_prefix(fd, "INSERTED "));
    assert_int_equal(bqt_stat_int(fd, "stats\r\n", "cmd-put"), before + 1);
    char *name = bqt_stat(fd, "stats-tube default\r\n", "name");
    assert_string_equal(name, "default");
    free(name);
    assert_null(bqt_stat(fd, "stats\r\n", "no-such-key"));
    close(fd);
}

static void silence_then_timed_out(void **state)
{
    int fd = bqt_client(server_or_skip(state));
    long long t0 = bqt_now_ms();
    bqt_sends(fd, "watch empty-tube\r\nignore default\r\nreserve-with-timeout 1\r\n");
    bqt_expect(fd, "WATCHING 2\r\nWATCHING 1\r\n");
    bqt_expect_silence(fd, 300);
    bqt_expect(fd, "TIMED_OUT\r\n");
    assert_true(bqt_now_ms() - t0 >= 900);
    close(fd);
}

static void quit_closes_connection(void **state)
{
    int fd = bqt_client(server_or_skip(state));
    bqt_sends(fd, "quit\r\n");
    bqt_expect_eof(fd, BQT_DEADLINE_MS);
    close(fd);
}

static void read_line_keeps_the_rest(void **state)
{
    int fd = bqt_client(server_or_skip(state));
    bqt_sends(fd, "use one\r\nuse two\r\n");
    char *first = bqt_read_line(fd, BQT_DEADLINE_MS);
    assert_non_null(first);
    assert_string_equal(first, "USING one\r\n");
    bqt_expect(fd, "USING two\r\n");
    free(first);
    close(fd);
}

static void wait_reports_sigterm(void **state)
{
    bqt_server_t own;
    (void)server_or_skip(state);
    assert_int_equal(bqt_server_start(&own, bqt_reference_binary(), NULL), 0);
    assert_true(own.pid > 0);
    bqt_server_signal(&own, SIGTERM);
    int status = bqt_server_wait(&own, 5000);
    assert_true(status != -1);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);
    assert_int_equal(own.pid, 0);
    assert_int_equal(bqt_connect(own.port), -1);
    bqt_server_stop(&own);
}

static void unix_socket_server_answers(void **state)
{
    bqt_server_t own;
    (void)server_or_skip(state);
    assert_int_equal(bqt_server_start_unix(&own, bqt_reference_binary(), NULL), 0);
    int fd = bqt_client(&own);
    bqt_sends(fd, "list-tube-used\r\n");
    bqt_expect(fd, "USING default\r\n");
    close(fd);
    bqt_server_stop(&own);
    assert_int_equal(access(own.unix_path, F_OK), -1);
}

static void free_port_is_bindable(void **state)
{
    (void)state;
    int port = bqt_free_port();
    assert_true(port > 0 && port < 65536);
    assert_int_equal(bqt_connect(port), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_then_peek_round_trips),  cmocka_unit_test(stat_int_reads_counters),
        cmocka_unit_test(silence_then_timed_out),     cmocka_unit_test(quit_closes_connection),
        cmocka_unit_test(read_line_keeps_the_rest),   cmocka_unit_test(wait_reports_sigterm),
        cmocka_unit_test(unix_socket_server_answers), cmocka_unit_test(free_port_is_bindable),
    };
    return bqt_exit(cmocka_run_group_tests(tests, start_reference, stop_server));
}
