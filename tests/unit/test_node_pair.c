/* The node's own client connection (node/client/pair.h): a connected pair
 * of the listener's kind, both ends non-blocking and close-on-exec. */
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/client/pair.h"

/* Checks fds is a connected pair of family af, both ends non-blocking and
 * close-on-exec, and closes it. */
static void check_pair(int fds[2], int af)
{
    for (int i = 0; i < 2; i++) {
        assert_true(fcntl(fds[i], F_GETFL) & O_NONBLOCK);
        assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        assert_int_equal(getsockname(fds[i], (struct sockaddr *)&ss, &len), 0);
        assert_int_equal(ss.ss_family, af);
    }
    char buf[8];
    assert_int_equal(write(fds[0], "put", 3), 3);
    assert_int_equal(read(fds[1], buf, sizeof buf), 3);
    assert_memory_equal(buf, "put", 3);
    assert_int_equal(write(fds[1], "OK", 2), 2);
    assert_int_equal(read(fds[0], buf, sizeof buf), 2);
    assert_int_equal(read(fds[0], buf, sizeof buf), -1); /* nothing more: it would block */
    close(fds[0]);
    assert_int_equal(read(fds[1], buf, sizeof buf), 0); /* the other end sees EOF */
    close(fds[1]);
}

static void tcp_pair_on_loopback(void **state)
{
    (void)state;
    int fds[2] = {-1, -1};
    assert_int_equal(bq_client_pair(false, fds), 0);
    check_pair(fds, AF_INET);
}

static void unix_pair(void **state)
{
    (void)state;
    int fds[2] = {-1, -1};
    assert_int_equal(bq_client_pair(true, fds), 0);
    check_pair(fds, AF_UNIX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tcp_pair_on_loopback),
        cmocka_unit_test(unix_pair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
