/* Tests of the fault proxy (faultproxy.h). The test thread plays both ends:
 * a plain listening socket stands for the target node and bqt_connect() for
 * the client, and every wait is a poll() with a deadline. Covers each mode
 * (PASS forwards both ways and half-closes, STALL holds and later delivers,
 * DROP closes and refuses, BLACKHOLE swallows, HOLD_UP and HOLD_DOWN lose
 * one direction only), cuts in either direction, the counters, and stop
 * with connections open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/bqtest.h"
#include "tests/support/faultproxy.h"

/* How long a negative check ("nothing arrives") watches. */
#define QUIET_MS 200
/* Bytes pushed through a PASS link to check flow control and integrity. */
#define BULK (4 * 1024 * 1024)

typedef struct ctx {
    int target_fd; /* listening socket standing for the target node */
    bqt_proxy_t *proxy;
} ctx_t;

static int setup(void **state)
{
    ctx_t *t = calloc(1, sizeof *t);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (!t)
        return -1;
    t->target_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t->target_fd >= 0 && bind(t->target_fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        listen(t->target_fd, 16) == 0 &&
        getsockname(t->target_fd, (struct sockaddr *)&a, &len) == 0)
        t->proxy = bqt_proxy_start("127.0.0.1", ntohs(a.sin_port));
    if (!t->proxy) {
        if (t->target_fd >= 0)
            close(t->target_fd);
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    ctx_t *t = *state;
    bqt_proxy_stop(t->proxy);
    close(t->target_fd);
    free(t);
    return 0;
}

/* Accepts the proxy's connection at the target within timeout_ms; -1 when
 * none arrives. */
static int target_accept(ctx_t *t, int timeout_ms)
{
    struct pollfd p = {t->target_fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0)
        return -1;
    return accept(t->target_fd, NULL, NULL);
}

/* Opens client -> proxy -> target and returns both ends. */
static void open_link(ctx_t *t, int *client, int *server)
{
    *client = bqt_connect(bqt_proxy_port(t->proxy));
    assert_true(*client >= 0);
    *server = target_accept(t, BQT_DEADLINE_MS);
    assert_true(*server >= 0);
}

static void set_nonblocking(int fd)
{
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

static char pattern_at(size_t i)
{
    return (char)('a' + i % 23);
}

/* Sends the next pattern bytes (at most up to `total`) on the non-blocking
 * fd and advances *sent; a full socket buffer sends nothing. */
static void send_some(int fd, size_t *sent, size_t total)
{
    char chunk[16384];
    size_t n = sizeof chunk;
    if (total - *sent < n)
        n = total - *sent;
    for (size_t i = 0; i < n; i++)
        chunk[i] = pattern_at(*sent + i);
    ssize_t w = send(fd, chunk, n, MSG_NOSIGNAL);
    assert_true(w > 0 || errno == EAGAIN);
    *sent += w > 0 ? (size_t)w : 0;
}

/* Sends `total` pattern bytes on src while reading and checking them on
 * dst, both non-blocking, within BQT_DEADLINE_MS. */
static void transfer(int src, int dst, size_t total)
{
    char chunk[16384];
    size_t sent = 0, got = 0;
    long long deadline = bqt_now_ms() + BQT_DEADLINE_MS;
    set_nonblocking(src);
    while (got < total) {
        struct pollfd p[2] = {{dst, POLLIN, 0}, {sent < total ? src : -1, POLLOUT, 0}};
        long long left = deadline - bqt_now_ms();
        assert_true(left > 0 && poll(p, 2, (int)left) > 0);
        if (p[1].revents & POLLOUT)
            send_some(src, &sent, total);
        if (p[0].revents) {
            ssize_t r = recv(dst, chunk, sizeof chunk, 0);
            assert_true(r > 0);
            for (size_t i = 0; i < (size_t)r; i++) {
                if (chunk[i] != pattern_at(got + i))
                    fail_msg("byte %zu differs", got + i);
            }
            got += (size_t)r;
        }
    }
    assert_int_equal(sent, total);
}

/* Sends pattern bytes on fd until nothing more goes for QUIET_MS; returns
 * how many went. Fails when the peer side never pushes back. */
static size_t fill_until_blocked(int fd)
{
    const size_t cap = 256u * 1024 * 1024;
    size_t sent = 0;
    set_nonblocking(fd);
    for (;;) {
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, QUIET_MS) == 0)
            return sent;
        assert_true(sent < cap);
        send_some(fd, &sent, cap);
    }
}

/* Sends `total` pattern bytes on fd within BQT_DEADLINE_MS; fails when the
 * peer does not take them. */
static void push(int fd, size_t total)
{
    size_t sent = 0;
    long long deadline = bqt_now_ms() + BQT_DEADLINE_MS;
    set_nonblocking(fd);
    while (sent < total) {
        struct pollfd p = {fd, POLLOUT, 0};
        long long left = deadline - bqt_now_ms();
        assert_true(left > 0 && poll(&p, 1, (int)left) > 0);
        send_some(fd, &sent, total);
    }
}

/* Reads exactly n pattern bytes from fd within BQT_DEADLINE_MS. */
static void expect_pattern(int fd, size_t n)
{
    char *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(bqt_read_n(fd, buf, n, BQT_DEADLINE_MS), n);
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != pattern_at(i))
            fail_msg("byte %zu differs", i);
    }
    free(buf);
}

static bool no_link_open(void *arg)
{
    return bqt_proxy_open(arg) == 0;
}

static void pass_forwards_both_ways_and_counts(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_sends(client, "hello");
    bqt_expect(server, "hello");
    bqt_sends(server, "hello");
    bqt_expect(client, "hello");
    transfer(client, server, BULK);
    transfer(server, client, BULK);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 5 + BULK);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_DOWN), 5 + BULK);
    assert_int_equal(bqt_proxy_connections(t->proxy), 1);
    assert_int_equal(bqt_proxy_open(t->proxy), 1);
    close(client);
    close(server);
    assert_true(bqt_wait_until(no_link_open, t->proxy, BQT_DEADLINE_MS));
}

/* The client's FIN reaches the target, which can still answer. */
static void pass_forwards_half_close(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_sends(client, "last words");
    assert_int_equal(shutdown(client, SHUT_WR), 0);
    bqt_expect(server, "last words");
    bqt_expect_eof(server, BQT_DEADLINE_MS);
    bqt_sends(server, "reply");
    bqt_expect(client, "reply");
    assert_int_equal(bqt_proxy_open(t->proxy), 1);
    close(server);
    bqt_expect_eof(client, BQT_DEADLINE_MS);
    assert_true(bqt_wait_until(no_link_open, t->proxy, BQT_DEADLINE_MS));
    close(client);
}

/* STALL holds bytes both ways and new connections; PASS delivers them. */
static void stall_holds_until_pass(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_proxy_set(t->proxy, BQT_PROXY_STALL);
    bqt_sends(client, "ping");
    bqt_sends(server, "pong");
    bqt_expect_silence(server, QUIET_MS);
    bqt_expect_silence(client, QUIET_MS);
    int late = bqt_connect(bqt_proxy_port(t->proxy));
    assert_true(late >= 0);
    bqt_sends(late, "late");
    assert_int_equal(target_accept(t, QUIET_MS), -1);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 0);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_DOWN), 0);

    bqt_proxy_set(t->proxy, BQT_PROXY_PASS);
    bqt_expect(server, "ping");
    bqt_expect(client, "pong");
    int late_server = target_accept(t, BQT_DEADLINE_MS);
    assert_true(late_server >= 0);
    bqt_expect(late_server, "late");
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 8);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_DOWN), 4);
    assert_int_equal(bqt_proxy_connections(t->proxy), 2);
    assert_int_equal(bqt_proxy_open(t->proxy), 2);
    close(late);
    close(late_server);
    close(client);
    close(server);
}

/* A stalled link buffers a bounded amount, then pushes back on the sender;
 * nothing is lost when it resumes. */
static void stall_pushes_back_and_loses_nothing(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_proxy_set(t->proxy, BQT_PROXY_STALL);
    size_t sent = fill_until_blocked(client);
    assert_true(sent >= BQT_PROXY_BUFFER);
    bqt_expect_silence(server, 1);
    bqt_proxy_set(t->proxy, BQT_PROXY_PASS);
    expect_pattern(server, sent);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), sent);
    close(client);
    close(server);
}

static void drop_closes_open_and_refuses_new(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_proxy_set(t->proxy, BQT_PROXY_DROP);
    assert_int_equal(bqt_proxy_open(t->proxy), 0);
    bqt_expect_eof(client, BQT_DEADLINE_MS);
    bqt_expect_eof(server, BQT_DEADLINE_MS);
    close(client);
    close(server);

    int refused = bqt_connect(bqt_proxy_port(t->proxy));
    assert_true(refused >= 0); /* the listener stays; the proxy closes at once */
    bqt_expect_eof(refused, BQT_DEADLINE_MS);
    close(refused);
    assert_int_equal(target_accept(t, QUIET_MS), -1);
    assert_int_equal(bqt_proxy_connections(t->proxy), 2);
    assert_int_equal(bqt_proxy_open(t->proxy), 0);

    bqt_proxy_set(t->proxy, BQT_PROXY_PASS);
    open_link(t, &client, &server);
    bqt_sends(client, "back");
    bqt_expect(server, "back");
    close(client);
    close(server);
}

/* cut_after(UP, 5) on an open link: exactly 5 bytes reach the target, then
 * both ends see the close; a link opened afterwards is not cut. */
static void cut_up_delivers_exact_bytes(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_proxy_cut_after(t->proxy, BQT_PROXY_UP, 5);
    bqt_sends(client, "0123456789");
    bqt_expect(server, "01234");
    bqt_expect_eof(server, BQT_DEADLINE_MS);
    bqt_expect_eof(client, BQT_DEADLINE_MS);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 5);
    assert_int_equal(bqt_proxy_open(t->proxy), 0);
    close(client);
    close(server);

    open_link(t, &client, &server);
    bqt_sends(client, "0123456789");
    bqt_expect(server, "0123456789");
    close(client);
    close(server);
}

/* With no link open, a cut arms the next one, here target -> client. */
static void cut_down_arms_next_link(void **state)
{
    ctx_t *t = *state;
    int client, server;
    bqt_proxy_cut_after(t->proxy, BQT_PROXY_DOWN, 3);
    open_link(t, &client, &server);
    bqt_sends(client, "up is not cut");
    bqt_expect(server, "up is not cut");
    bqt_sends(server, "abcdef");
    bqt_expect(client, "abc");
    bqt_expect_eof(client, BQT_DEADLINE_MS);
    bqt_expect_eof(server, BQT_DEADLINE_MS);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_DOWN), 3);
    close(client);
    close(server);
}

/* BLACKHOLE accepts and swallows without ever reaching the target, even
 * after PASS returns; a link that was open before is only held. */
static void blackhole_swallows_new_and_holds_open(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_proxy_set(t->proxy, BQT_PROXY_BLACKHOLE);
    int lost = bqt_connect(bqt_proxy_port(t->proxy));
    assert_true(lost >= 0);
    push(lost, BULK); /* completes only because the proxy reads and discards */
    bqt_sends(client, "held");
    bqt_expect_silence(server, QUIET_MS);
    assert_int_equal(target_accept(t, QUIET_MS), -1);

    bqt_proxy_set(t->proxy, BQT_PROXY_PASS);
    bqt_expect(server, "held");
    bqt_expect_silence(lost, 1);
    assert_int_equal(target_accept(t, QUIET_MS), -1);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 4);
    assert_int_equal(bqt_proxy_connections(t->proxy), 2);
    assert_int_equal(bqt_proxy_open(t->proxy), 2);
    close(lost);
    close(client);
    close(server);
    assert_true(bqt_wait_until(no_link_open, t->proxy, BQT_DEADLINE_MS));
}

/* HOLD_DOWN loses target -> client only, on an open link and on one opened
 * meanwhile (connected onward: the target hears it); PASS delivers what
 * was held. */
static void hold_down_passes_up_only(void **state)
{
    ctx_t *t = *state;
    int client, server, late, late_server;
    open_link(t, &client, &server);
    bqt_proxy_set(t->proxy, BQT_PROXY_HOLD_DOWN);
    bqt_sends(client, "ack");
    bqt_expect(server, "ack");
    bqt_sends(server, "beat");
    bqt_expect_silence(client, QUIET_MS);
    open_link(t, &late, &late_server);
    bqt_sends(late, "hello");
    bqt_expect(late_server, "hello");
    bqt_sends(late_server, "welcome");
    bqt_expect_silence(late, QUIET_MS);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 8);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_DOWN), 0);

    bqt_proxy_set(t->proxy, BQT_PROXY_PASS);
    bqt_expect(client, "beat");
    bqt_expect(late, "welcome");
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_DOWN), 11);
    assert_int_equal(bqt_proxy_open(t->proxy), 2);
    close(late);
    close(late_server);
    close(client);
    close(server);
}

/* HOLD_UP is the mirror image; the client's FIN is held with its bytes. */
static void hold_up_passes_down_only(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_proxy_set(t->proxy, BQT_PROXY_HOLD_UP);
    bqt_sends(server, "beat");
    bqt_expect(client, "beat");
    bqt_sends(client, "ack");
    assert_int_equal(shutdown(client, SHUT_WR), 0);
    bqt_expect_silence(server, QUIET_MS);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 0);

    bqt_proxy_set(t->proxy, BQT_PROXY_PASS);
    bqt_expect(server, "ack");
    bqt_expect_eof(server, BQT_DEADLINE_MS);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_UP), 3);
    assert_int_equal(bqt_proxy_bytes(t->proxy, BQT_PROXY_DOWN), 4);
    close(client);
    close(server);
}

static void stop_closes_open_links(void **state)
{
    ctx_t *t = *state;
    int client, server;
    open_link(t, &client, &server);
    bqt_proxy_set(t->proxy, BQT_PROXY_STALL);
    bqt_proxy_stop(t->proxy);
    t->proxy = NULL;
    bqt_expect_eof(client, BQT_DEADLINE_MS);
    bqt_expect_eof(server, BQT_DEADLINE_MS);
    close(client);
    close(server);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(pass_forwards_both_ways_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(pass_forwards_half_close, setup, teardown),
        cmocka_unit_test_setup_teardown(stall_holds_until_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(stall_pushes_back_and_loses_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(drop_closes_open_and_refuses_new, setup, teardown),
        cmocka_unit_test_setup_teardown(cut_up_delivers_exact_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(cut_down_arms_next_link, setup, teardown),
        cmocka_unit_test_setup_teardown(blackhole_swallows_new_and_holds_open, setup, teardown),
        cmocka_unit_test_setup_teardown(hold_down_passes_up_only, setup, teardown),
        cmocka_unit_test_setup_teardown(hold_up_passes_down_only, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_closes_open_links, setup, teardown),
    };
    return cmocka_run_group_tests_name("faultproxy", tests, NULL, NULL);
}
