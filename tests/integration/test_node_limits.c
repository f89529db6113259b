/* Integration tests of the node's resource limits, against our binary only:
 * 10,000 idle connections at about a kilobyte each, running out of file
 * descriptors (survived, logged, recovered), a client that never reads its
 * replies (server memory stays bounded), a half-closed client that still
 * gets every reply, a reset with output pending, and random bytes. */
#define _GNU_SOURCE /* prlimit() */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"

#define IDLE_CONNS 10000
#define BODY_SIZE 60000
#define PEEK_REPLY_SIZE (sizeof "FOUND 1 60000\r\n" - 1 + BODY_SIZE + 2)

static int srv_setup(void **state)
{
    bqt_server_t *s = calloc(1, sizeof *s);
    if (!s || bqt_server_start(s, bqt_our_binary(), NULL) != 0) {
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int srv_teardown(void **state)
{
    bqt_server_stop(*state);
    free(*state);
    return 0;
}

/* The server's resident set size in KiB. */
static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    long kib = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

static bool served(int fd, int timeout_ms)
{
    bqt_sends(fd, "list-tube-used\r\n");
    char *line = bqt_read_line(fd, timeout_ms);
    bool ok = line && strcmp(line, "USING default\r\n") == 0;
    free(line);
    return ok;
}

typedef struct conns_arg {
    const bqt_server_t *s;
    long long want;
} conns_arg_t;

static bool connections_are(void *arg)
{
    conns_arg_t *a = arg;
    int fd = bqt_client(a->s);
    long long n = bqt_stat_int(fd, "stats\r\n", "current-connections");
    close(fd);
    return n == a->want;
}

/* Puts one BODY_SIZE job (id 1) through a fresh connection. */
static void put_big_job(const bqt_server_t *s)
{
    static char body[BODY_SIZE];
    int fd = bqt_client(s);
    memset(body, 'b', sizeof body);
    bqt_sends(fd, "put 0 0 100 60000\r\n");
    bqt_send(fd, body, sizeof body);
    bqt_sends(fd, "\r\n");
    bqt_expect(fd, "INSERTED 1\r\n");
    close(fd);
}

static void ten_thousand_idle_connections(void **state)
{
    bqt_server_t *s = *state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    bqt_require(rl.rlim_max >= IDLE_CONNS + 100,
                "a hard descriptor limit of at least 10,100 (ulimit -Hn; .ci/run raises it)");
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);

    int *fds = calloc(IDLE_CONNS, sizeof *fds);
    long before = rss_kib(s->pid);
    for (int i = 0; i < IDLE_CONNS; i++) {
        fds[i] = bqt_client(s);
        assert_true(fds[i] >= 0);
    }
    for (int i = 0; i < IDLE_CONNS; i++)
        bqt_sends(fds[i], "list-tube-used\r\n");
    for (int i = 0; i < IDLE_CONNS; i++)
        bqt_expect(fds[i], "USING default\r\n");
    conns_arg_t all = {s, IDLE_CONNS + 1};
    assert_true(bqt_wait_until(connections_are, &all, BQT_DEADLINE_MS));
    long per_conn = (rss_kib(s->pid) - before) * 1024 / IDLE_CONNS;
    fprintf(stderr, "server memory per idle connection: about %ld bytes\n", per_conn);
    assert_true(per_conn < 4096);
    for (int i = 0; i < IDLE_CONNS; i++)
        close(fds[i]);
    free(fds);
    conns_arg_t one = {s, 1};
    assert_true(bqt_wait_until(connections_are, &one, 30000));
}

static bool log_mentions_emfile(void *arg)
{
    char buf[16384];
    FILE *f = fopen(((bqt_server_t *)arg)->log_path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return strstr(buf, "out of file descriptors") != NULL;
}

static bool new_client_served(void *arg)
{
    int fd = bqt_client(arg);
    bool ok = fd >= 0 && served(fd, 1000);
    if (fd >= 0)
        close(fd);
    return ok;
}

static void out_of_file_descriptors_is_survived(void **state)
{
    bqt_server_t *s = *state;
    struct rlimit low = {64, 64};
    enum { N = 200 };
    int fds[N], ok = 0;

    int first = bqt_client(s);
    assert_true(served(first, BQT_DEADLINE_MS));
    assert_int_equal(prlimit(s->pid, RLIMIT_NOFILE, &low, NULL), 0);
    for (int i = 0; i < N; i++) {
        fds[i] = bqt_client(s);
        assert_true(fds[i] >= 0);
    }
    for (int i = 0; i < N; i++)
        ok += served(fds[i], BQT_DEADLINE_MS);
    assert_true(ok > 0);
    assert_true(ok < N);
    assert_true(served(first, BQT_DEADLINE_MS));
    assert_true(bqt_wait_until(log_mentions_emfile, s, BQT_DEADLINE_MS));
    for (int i = 0; i < N; i++)
        close(fds[i]);
    assert_true(bqt_wait_until(new_client_served, s, 10000));
    close(first);
}

/* Sends up to len bytes without blocking; returns how many went out. */
static size_t send_some(int fd, const char *data, size_t len)
{
    ssize_t n = send(fd, data, len, MSG_DONTWAIT);
    if (n < 0) {
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
        return 0;
    }
    return (size_t)n;
}

static void slow_reader_memory_is_bounded(void **state)
{
    bqt_server_t *s = *state;
    enum { PEEKS = 20000 };
    static char cmds[PEEKS * 8 + 1];
    static char buf[1 << 20];

    put_big_job(s);
    for (int i = 0; i < PEEKS; i++)
        memcpy(cmds + i * 8, "peek 1\r\n", 8);
    long base = rss_kib(s->pid), peak = base;
    int fd = bqt_client(s), other = bqt_client(s);
    size_t sent = 0, total = (size_t)PEEKS * 8;

    /* Never read for a while: the server must stop queueing replies. */
    long long quiet_until = bqt_now_ms() + 1500;
    while (bqt_now_ms() < quiet_until) {
        if (sent < total)
            sent += send_some(fd, cmds + sent, total - sent);
        long r = rss_kib(s->pid);
        peak = r > peak ? r : peak;
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, 5);
    }
    fprintf(stderr, "slow reader: %zu command bytes sent, server rss %ld -> %ld KiB\n", sent, base,
            peak);
    assert_true(peak - base < 32 * 1024); /* the replies would be 1.2 GB */
    assert_true(served(other, BQT_DEADLINE_MS));

    /* Now read everything: no reply may be lost. */
    size_t want = (size_t)PEEKS * PEEK_REPLY_SIZE, got = 0;
    long long deadline = bqt_now_ms() + 60000;
    while (got < want && bqt_now_ms() < deadline) {
        struct pollfd p = {fd, POLLIN | (sent < total ? POLLOUT : 0), 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        if (p.revents & POLLOUT)
            sent += send_some(fd, cmds + sent, total - sent);
        if (p.revents & POLLIN) {
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            assert_true(n > 0 || errno == EAGAIN);
            got += n > 0 ? (size_t)n : 0;
        }
    }
    assert_int_equal(got, want);
    close(fd);
    close(other);
}

static void half_closed_client_gets_every_reply(void **state)
{
    bqt_server_t *s = *state;
    enum { PEEKS = 100 };
    static char buf[1 << 20];

    put_big_job(s);
    int fd = bqt_client(s);
    for (int i = 0; i < PEEKS; i++)
        bqt_sends(fd, "peek 1\r\n");
    bqt_sends(fd, "reserve\r\nreserve\r\nlist-tube-used\r\nput 0 0 1 5\r\nab");
    shutdown(fd, SHUT_WR);
    const char *end = "TIMED_OUT\r\nUSING default\r\n";
    char last[32] = {0};
    size_t got = 0, keep = strlen(end);
    long long deadline = bqt_now_ms() + 30000;
    for (;;) {
        assert_true(bqt_now_ms() < deadline);
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        assert_true(n >= 0);
        if (n == 0)
            break;
        got += (size_t)n;
        /* slide the last `keep` bytes of the stream into last[] */
        size_t take = (size_t)n < keep ? (size_t)n : keep;
        memmove(last, last + take, keep - take);
        memcpy(last + keep - take, buf + n - take, take);
    }
    assert_memory_equal(last, end, keep);
    const char *reserved = "RESERVED 1 60000\r\n";
    size_t want = PEEKS * PEEK_REPLY_SIZE + strlen(reserved) + BODY_SIZE + 2 +
                  strlen("TIMED_OUT\r\nUSING default\r\n");
    assert_int_equal(got, want);
    close(fd);
}

static void reset_with_pending_output_is_survived(void **state)
{
    bqt_server_t *s = *state;
    struct linger lg = {1, 0};

    put_big_job(s);
    for (int k = 0; k < 20; k++) {
        int fd = bqt_client(s);
        for (int i = 0; i < 200; i++)
            bqt_sends(fd, "peek 1\r\n");
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
        close(fd); /* RST */
    }
    conns_arg_t one = {s, 1};
    assert_true(bqt_wait_until(connections_are, &one, BQT_DEADLINE_MS));
}

static void random_bytes_never_hurt_the_server(void **state)
{
    bqt_server_t *s = *state;
    enum { CONNS = 4, BYTES = 1 << 20 };
    static char junk[BYTES], sink[65536];
    uint64_t x = 0x9e3779b97f4a7c15u;

    for (size_t i = 0; i < sizeof junk; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        junk[i] = (char)(i % 61 == 60 ? '\n' : i % 61 == 59 ? '\r' : (char)x);
    }
    for (int c = 0; c < CONNS; c++) {
        int fd = bqt_client(s);
        size_t sent = 0;
        long long deadline = bqt_now_ms() + 30000;
        while (sent < sizeof junk && bqt_now_ms() < deadline) {
            struct pollfd p = {fd, POLLIN | POLLOUT, 0};
            if (poll(&p, 1, 100) <= 0)
                continue;
            if (p.revents & POLLOUT)
                sent += send_some(fd, junk + sent, sizeof junk - sent);
            if (p.revents & POLLIN && recv(fd, sink, sizeof sink, MSG_DONTWAIT) == 0)
                break; /* the junk said quit */
            if (p.revents & (POLLERR | POLLHUP))
                break;
        }
        close(fd);
    }
    assert_true(new_client_served(s));
}

#define SRV_TEST(f) cmocka_unit_test_setup_teardown(f, srv_setup, srv_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        SRV_TEST(ten_thousand_idle_connections),
        SRV_TEST(out_of_file_descriptors_is_survived),
        SRV_TEST(slow_reader_memory_is_bounded),
        SRV_TEST(half_closed_client_gets_every_reply),
        SRV_TEST(reset_with_pending_output_is_survived),
        SRV_TEST(random_bytes_never_hurt_the_server),
    };
    return bqt_exit(cmocka_run_group_tests_name("node_limits", tests, NULL, NULL));
}
