/* Tests of node/cluster/proxy.c, the standby's client proxy, with real beanstalkd
 * processes ($BQ_REFERENCE) as targets. The proxy runs in this process: a
 * libuv loop on its own thread, accepting through node/client/listen.c on a free
 * loopback port; the test thread talks to it over blocking sockets with
 * deadlines, and calls the proxy's functions on the loop thread (on_loop,
 * through a uv_async handle, waiting for the call to finish).
 *
 * Covered: put/reserve/delete and a 2.5 MB job through the proxy give
 * beanstalkd's exact replies, with a numeric target and with "localhost"
 * (looked up); with no target a new client is held until one is set (its
 * commands answered then, in order), or at the hold bound answered
 * INTERNAL_ERROR for each command and closed; a target that cannot be
 * reached or resolved closes it at the bound too; setting the same target keeps
 * connections;
 * another moves them to the new beanstalkd with their session restored
 * (the tube used, the watch list in beanstalkd's order, a reserve in flight
 * sent again; the restore's replies never reach the client), and the one
 * with a put half sent stays on the old target until the put's reply, then
 * moves; the target dying holds the client until a new
 * target is set (then moved), or closes it at the hold bound;
 * the client closing or resetting closes the target side (beanstalkd's
 * current-connections drops); a half-close passes through (TIMED_OUT, then
 * EOF), also one made before the target is connected; close_all and free
 * while the target's address is being looked up (the test's DNS server,
 * tests/support/fakedns.h, holds the queries so that the lookup waits:
 * hold_dns).
 *
 * Bounds, measured from outside: bytes the client sent, less the commands
 * beanstalkd counts and the bytes the kernel holds in each socket on the
 * path (/proc/net/tcp), are in the proxy. A stream of pipelined commands
 * whose replies are not read stalls the client with about 1 MiB queued in
 * the proxy each way (then every reply arrives); bytes sent while the
 * lookup waits stall at about 1 MiB kept. Every teardown frees the proxy
 * with whatever the test left open; ASan checks for leaks. Not covered: a
 * looked-up name whose first address refuses (the next one is tried); this
 * machine's resolver gives one address for every name it knows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#include "node/client/listen.h"
#include "node/cluster/proxy.h"
#include "tests/integration/itest.h"
#include "tests/support/fakedns.h"

#define QUEUE_HIGH (1024 * 1024) /* proxy.c's bound */
#define READ_MAX (64 * 1024)     /* proxy.c's read size */
#define STREAM_MAX (256ll << 20) /* far beyond every buffer on the path */
#define STALL_MS 300             /* no progress for this long: the path is full */
#define SMALL_BUF 4096           /* socket buffers on the reply path */
#define MID_BUF (128 * 1024)     /* several loopback MSS: no silly-window stalls */
#define PEEK "peek 1\r\n"        /* 8 bytes; beanstalkd answers NOT_FOUND (11) */
#define NOT_FOUND "NOT_FOUND\r\n"
#define HOLD_MS 1500 /* how long a client waits for a new target */
#define BIG_JOB 2500000
#define HELD_NAME "primary.proxy.test" /* resolved by the test's DNS server only */

typedef struct fx fx_t;
typedef void (*loop_fn)(fx_t *f, void *arg);

struct fx {
    uv_loop_t loop;
    uv_async_t wake;
    bq_listener_t listener;
    bq_proxy_t *proxy;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    loop_fn fn; /* the call on_loop waits for, NULL when done */
    void *arg;
    int port;           /* the proxy's */
    int accept_sndbuf;  /* when > 0, SO_SNDBUF of accepted sockets */
    int accept_rcvbuf;  /* when > 0, SO_RCVBUF of accepted sockets */
    bqt_server_t bs[2]; /* targets */
    char bs_port[2][16];
    int leftover_fd; /* a client the test leaves to teardown, or -1 */
};

/* The DNS server the proxy's lookups go to (BQ_TEST_DNS_SERVERS, set in
 * main): it answers HELD_NAME with 127.0.0.1, or holds the queries. */
static bqt_dns_t *dns;

/* ---- the loop thread ---- */

static void on_wake(uv_async_t *a)
{
    fx_t *f = a->data;
    pthread_mutex_lock(&f->mu);
    if (f->fn)
        f->fn(f, f->arg);
    f->fn = NULL;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void on_accept(bq_listener_t *l, int fd)
{
    fx_t *f = l->data;
    if (f->accept_sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &f->accept_sndbuf, sizeof f->accept_sndbuf);
    if (f->accept_rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &f->accept_rcvbuf, sizeof f->accept_rcvbuf);
    bq_proxy_accept(f->proxy, fd);
}

static void *loop_main(void *arg)
{
    fx_t *f = arg;
    uv_run(&f->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* Runs fn(f, arg) on the loop thread and waits (5 s at most) for it. */
static void on_loop(fx_t *f, loop_fn fn, void *arg)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&f->mu);
    f->fn = fn;
    f->arg = arg;
    assert_int_equal(uv_async_send(&f->wake), 0);
    int rc = 0;
    while (f->fn && rc == 0)
        rc = pthread_cond_timedwait(&f->cv, &f->mu, &deadline);
    bool done = f->fn == NULL;
    pthread_mutex_unlock(&f->mu);
    if (!done)
        fail_msg("the proxy's loop did not run a call within 5 s");
}

typedef struct target {
    const char *host, *port;
} target_t;

static void do_set_target(fx_t *f, void *arg)
{
    const target_t *t = arg;
    bq_proxy_set_target(f->proxy, t->host, t->port);
}

static void set_target(fx_t *f, const char *host, const char *port)
{
    target_t t = {host, port};
    on_loop(f, do_set_target, &t);
}

static void do_count(fx_t *f, void *arg)
{
    *(size_t *)arg = bq_proxy_count(f->proxy);
}

static size_t proxy_count(fx_t *f)
{
    size_t n = 0;
    on_loop(f, do_count, &n);
    return n;
}

static fx_t *count_fx; /* the fixture count_reached asks */
static size_t count_want;

static bool count_reached(void *arg)
{
    (void)arg;
    return proxy_count(count_fx) == count_want;
}

/* Waits (deadline) until the proxy holds n connections. */
static void expect_count(fx_t *f, size_t n)
{
    count_fx = f;
    count_want = n;
    if (!bqt_wait_until(count_reached, NULL, BQT_DEADLINE_MS))
        fail_msg("the proxy holds %zu connections, not %zu", proxy_count(f), n);
}

static void do_close_all(fx_t *f, void *arg)
{
    (void)arg;
    bq_proxy_close_all(f->proxy);
}

static void do_stop(fx_t *f, void *arg)
{
    (void)arg;
    bq_listen_close(&f->listener);
    bq_proxy_free(f->proxy);
    uv_close((uv_handle_t *)&f->wake, NULL);
}

static void do_open(fx_t *f, void *arg)
{
    *(int *)arg = bq_listen_open(&f->listener, &f->loop, "127.0.0.1", "0", true, on_accept, f);
}

/* Makes the lookups from now on wait, until release_dns answers them. */
static void hold_dns(void)
{
    bqt_dns_hold(dns, true);
}

static void release_dns(void)
{
    bqt_dns_hold(dns, false);
}

/* ---- fixture ---- */

/* Starts beanstalkd i (jobs up to BIG_JOB bytes). */
static void start_target(fx_t *f, int i)
{
    static const char *const args[] = {"-z", "3000000", NULL};
    assert_int_equal(bqt_server_start(&f->bs[i], bqt_reference_binary(), args), 0);
    snprintf(f->bs_port[i], sizeof f->bs_port[i], "%d", f->bs[i].port);
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->leftover_fd = -1;
    signal(SIGPIPE, SIG_IGN); /* the node ignores it too */
    start_target(f, 0);
    start_target(f, 1);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(uv_async_init(&f->loop, &f->wake, on_wake), 0);
    f->wake.data = f;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->proxy = bq_proxy_new(&f->loop, HOLD_MS);
    assert_non_null(f->proxy);
    assert_int_equal(pthread_create(&f->thread, NULL, loop_main, f), 0);
    int rc = -1;
    on_loop(f, do_open, &rc);
    assert_int_equal(rc, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(f->listener.fd, (struct sockaddr *)&a, &len), 0);
    f->port = ntohs(a.sin_port);
    set_target(f, "127.0.0.1", f->bs_port[0]);
    *state = f;
    return 0;
}

/* Frees the proxy with whatever connections the test left open. */
static int teardown(void **state)
{
    fx_t *f = *state;
    on_loop(f, do_stop, NULL);
    release_dns();
    assert_int_equal(pthread_join(f->thread, NULL), 0);
    if (f->leftover_fd >= 0)
        close(f->leftover_fd);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* every handle closed */
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    bqt_server_stop(&f->bs[0]);
    bqt_server_stop(&f->bs[1]);
    free(f);
    return 0;
}

/* ---- helpers ---- */

/* A client connection through the proxy. */
static int client(fx_t *f)
{
    int fd = bqt_connect(f->port);
    assert_true(fd >= 0);
    return fd;
}

/* Asserts that the next read on fd returns 0 (EOF) within the deadline. */
static void expect_eof(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, BQT_DEADLINE_MS), 1);
    char c;
    ssize_t n = read(fd, &c, 1);
    if (n != 0)
        fail_msg("expected EOF, read returned %zd (%s)", n, n < 0 ? strerror(errno) : "data");
}

/* The pid of the beanstalkd that fd ends up at. */
static long long server_pid(int fd)
{
    return bqt_stat_int(fd, "stats\r\n", "pid");
}

/* ---- tests ---- */

static void commands_get_beanstalkd_replies(void **state)
{
    fx_t *f = *state;
    int fd = client(f);
    it_put(fd, "0 0 60", "hello", 1);
    it_cmd(fd, "peek 1\r\n", "FOUND 1 5\r\nhello\r\n");
    it_cmd(fd, "reserve\r\n", "RESERVED 1 5\r\nhello\r\n");
    it_cmd(fd, "delete 1\r\n", "DELETED\r\n");
    it_cmd(fd, "delete 1\r\n", "NOT_FOUND\r\n");
    it_cmd(fd, "use tube-a\r\n", "USING tube-a\r\n");
    it_cmd(fd, "frobnicate\r\n", "UNKNOWN_COMMAND\r\n");
    assert_int_equal(server_pid(fd), f->bs[0].pid);
    assert_int_equal(proxy_count(f), 1);
    close(fd);
    expect_count(f, 0);
}

/* A put of BIG_JOB bytes as one message (malloc'd; *len set). */
static char *big_put(size_t *len)
{
    char head[64];
    int h = snprintf(head, sizeof head, "put 0 0 60 %d\r\n", BIG_JOB);
    char *m = malloc((size_t)h + BIG_JOB + 2);
    assert_non_null(m);
    memcpy(m, head, (size_t)h);
    for (size_t i = 0; i < BIG_JOB; i++)
        m[h + i] = (char)('a' + i % 26);
    memcpy(m + h + BIG_JOB, "\r\n", 2);
    *len = (size_t)h + BIG_JOB + 2;
    return m;
}

/* Sends a BIG_JOB-byte put on fd (blocking), then checks it comes back. */
static void big_job_round_trip(int fd)
{
    size_t len;
    char *msg = big_put(&len);
    bqt_send(fd, msg, len);
    bqt_expect(fd, "INSERTED 1\r\n");
    bqt_sends(fd, "reserve\r\n");
    char line[64];
    snprintf(line, sizeof line, "RESERVED 1 %d\r\n", BIG_JOB);
    bqt_expect(fd, line);
    char *got = malloc(BIG_JOB + 2);
    assert_non_null(got);
    assert_int_equal(bqt_read_n(fd, got, BIG_JOB + 2, BQT_DEADLINE_MS), BIG_JOB + 2);
    assert_memory_equal(got, msg + len - BIG_JOB - 2, BIG_JOB + 2);
    free(got);
    free(msg);
}

static void big_job_passes_both_ways(void **state)
{
    fx_t *f = *state;
    int fd = client(f);
    big_job_round_trip(fd);
    close(fd);
}

/* "localhost" is looked up (in /etc/hosts, where ::1 may come first and
 * beanstalkd listens on 127.0.0.1 only: through a refused attempt too), and
 * a name only the DNS server knows. */
static void looked_up_target(void **state)
{
    fx_t *f = *state;
    set_target(f, "localhost", f->bs_port[0]);
    int fd = client(f);
    big_job_round_trip(fd);
    assert_int_equal(server_pid(fd), f->bs[0].pid);
    close(fd);
    size_t asked = bqt_dns_queries(dns);
    set_target(f, HELD_NAME, f->bs_port[1]);
    fd = client(f);
    big_job_round_trip(fd);
    assert_int_equal(server_pid(fd), f->bs[1].pid);
    assert_true(bqt_dns_queries(dns) > asked);
    close(fd);
}

/* Asserts EOF on fd no sooner than half the hold bound (held meanwhile). */
static void expect_eof_after_hold(int fd)
{
    long long t0 = bqt_now_ms();
    expect_eof(fd);
    long long waited = bqt_now_ms() - t0;
    if (waited < HOLD_MS / 2)
        fail_msg("a held client was closed after %lld ms, before the hold bound %d", waited,
                 HOLD_MS);
}

/* With no target, a new client is held: its commands are answered once a
 * target is set, in order; with none in time, each command it sent gets
 * INTERNAL_ERROR and it is closed, at the hold bound. */
static void no_target_holds_new_clients(void **state)
{
    fx_t *f = *state;
    set_target(f, NULL, NULL);
    int fd = client(f);
    bqt_sends(fd, "use a\r\nlist-tube-used\r\nwatch b\r\nlist-tube-us");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 300), 0);
    assert_int_equal(proxy_count(f), 1);
    set_target(f, "127.0.0.1", f->bs_port[0]);
    it_cmd(fd, "ed\r\n", "USING a\r\nUSING a\r\nWATCHING 2\r\nUSING a\r\n");
    close(fd);
    set_target(f, NULL, NULL);
    fd = client(f);
    bqt_sends(fd, "list-tube-used\r\nreserve\r\nput 0 0 1 2\r\nab\r\n");
    long long t0 = bqt_now_ms();
    char got[64] = "";
    size_t want = 3 * strlen("INTERNAL_ERROR\r\n");
    assert_int_equal(bqt_read_n(fd, got, want, HOLD_MS + BQT_DEADLINE_MS), want);
    assert_string_equal(got, "INTERNAL_ERROR\r\nINTERNAL_ERROR\r\nINTERNAL_ERROR\r\n");
    if (bqt_now_ms() - t0 < HOLD_MS / 2)
        fail_msg("a held client was failed before the hold bound %d", HOLD_MS);
    expect_eof(fd);
    close(fd);
    fd = client(f);
    expect_eof_after_hold(fd); /* nothing sent: nothing to answer */
    close(fd);
    expect_count(f, 0);
}

/* A target that refuses or cannot be looked up: a new client is held,
 * retried, and closed at the hold bound. */
static void unreachable_target_closes_at_the_bound(void **state)
{
    fx_t *f = *state;
    char port[16];
    snprintf(port, sizeof port, "%d", bqt_free_port()); /* nothing listens there */
    const char *const hosts[][2] = {
        {"127.0.0.1", port}, {"localhost", port}, {"localhost", "no-such-service-name"}};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        set_target(f, hosts[i][0], hosts[i][1]);
        int fd = client(f);
        expect_eof_after_hold(fd);
        close(fd);
        expect_count(f, 0);
    }
}

/* Sends cmd and returns its whole "OK <n>" reply, body included. */
static char *ask_yaml(int fd, const char *cmd)
{
    bqt_sends(fd, cmd);
    char *line = bqt_read_line(fd, BQT_DEADLINE_MS);
    assert_non_null(line);
    assert_true(strncmp(line, "OK ", 3) == 0);
    size_t n = strtoul(line + 3, NULL, 10);
    char *all = malloc(strlen(line) + n + 8);
    assert_non_null(all);
    size_t k = (size_t)sprintf(all, "%s\r\n", line);
    assert_int_equal(bqt_read_n(fd, all + k, n + 2, BQT_DEADLINE_MS), n + 2);
    all[k + n + 2] = '\0';
    free(line);
    return all;
}

/* True once beanstalkd s has a client waiting in reserve. */
static bool reserve_waiting(void *arg)
{
    int fd = bqt_client(arg);
    long long n = bqt_stat_int(fd, "stats\r\n", "current-waiting");
    close(fd);
    return n >= 1;
}

static void target_change_moves_sessions(void **state)
{
    fx_t *f = *state;
    int a = client(f), b = client(f), d = client(f), e = client(f);
    assert_int_equal(server_pid(a), f->bs[0].pid);
    assert_int_equal(server_pid(b), f->bs[0].pid);
    it_cmd(a, "use t1\r\n", "USING t1\r\n");
    it_cmd(a, "watch w1\r\n", "WATCHING 2\r\n");
    it_cmd(a, "watch w2\r\n", "WATCHING 3\r\n");
    it_cmd(a, "ignore default\r\n", "WATCHING 2\r\n");
    char *watched = ask_yaml(a, "list-tubes-watched\r\n");
    set_target(f, "127.0.0.1", f->bs_port[0]); /* the same: nothing happens */
    it_cmd(a, "list-tube-used\r\n", "USING t1\r\n");
    assert_int_equal(proxy_count(f), 4);
    bqt_sends(d, "reserve\r\n");           /* waits on an empty server */
    bqt_sends(e, "put 0 0 60 10\r\nhalf"); /* a put half sent */
    assert_true(bqt_wait_until(reserve_waiting, &f->bs[0], BQT_DEADLINE_MS));
    set_target(f, "127.0.0.1", f->bs_port[1]);
    /* The put in flight stays on the old server until its reply, then the
     * client moves too. */
    it_cmd(e, "567890\r\n", "INSERTED 1\r\n");
    assert_int_equal(server_pid(e), f->bs[1].pid);
    close(e);
    /* The others go on, on the other beanstalkd, with their sessions. */
    assert_int_equal(server_pid(a), f->bs[1].pid);
    it_cmd(a, "list-tube-used\r\n", "USING t1\r\n");
    char *again = ask_yaml(a, "list-tubes-watched\r\n");
    assert_string_equal(again, watched);
    free(again);
    free(watched);
    assert_int_equal(server_pid(b), f->bs[1].pid);
    it_cmd(b, "list-tube-used\r\n", "USING default\r\n");
    /* The reserve in flight was sent again: a job on the new one reaches it. */
    int direct = bqt_client(&f->bs[1]);
    it_cmd(direct, "put 0 0 60 2\r\nhi\r\n", "INSERTED 1\r\n");
    it_cmd(d, "", "RESERVED 1 2\r\nhi\r\n");
    close(direct);
    assert_int_equal(proxy_count(f), 3);
    close(a);
    close(b);
    close(d);
    int c = client(f);
    assert_int_equal(server_pid(c), f->bs[1].pid);
    on_loop(f, do_close_all, NULL);
    expect_eof(c);
    close(c);
    assert_int_equal(proxy_count(f), 0);
}

/* The target dies: an idle client is held (no EOF), then moved when a new
 * target is set; with no new target it is closed at the hold bound. */
static void target_death_holds_client(void **state)
{
    fx_t *f = *state;
    int fd = client(f), late = client(f);
    it_cmd(fd, "use held\r\n", "USING held\r\n");
    assert_int_equal(server_pid(late), f->bs[0].pid);
    bqt_server_signal(&f->bs[0], SIGKILL);
    assert_true(bqt_server_wait(&f->bs[0], BQT_DEADLINE_MS) != -1);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 300), 0); /* held: no EOF, no bytes */
    /* A command sent while held waits for the next target. */
    bqt_sends(fd, "list-tube-used\r\n");
    set_target(f, "127.0.0.1", f->bs_port[1]);
    it_cmd(fd, "", "USING held\r\n");
    assert_int_equal(server_pid(fd), f->bs[1].pid);
    close(fd);
    /* Held with no target to go to: closed at the bound. */
    bqt_server_signal(&f->bs[1], SIGKILL);
    assert_true(bqt_server_wait(&f->bs[1], BQT_DEADLINE_MS) != -1);
    expect_eof_after_hold(late);
    close(late);
}

static void client_close_closes_target_side(void **state)
{
    fx_t *f = *state;
    int direct = bqt_client(&f->bs[0]);
    int fd = client(f);
    it_cmd(fd, "list-tube-used\r\n", "USING default\r\n");
    assert_int_equal(bqt_stat_int(direct, "stats\r\n", "current-connections"), 2);
    close(fd);
    it_wait_stat(direct, "stats\r\n", "current-connections", "1", BQT_DEADLINE_MS);
    expect_count(f, 0);
    /* A reset instead of a close: the proxy's read fails. */
    fd = client(f);
    it_cmd(fd, "list-tube-used\r\n", "USING default\r\n");
    struct linger lg = {1, 0};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(fd);
    it_wait_stat(direct, "stats\r\n", "current-connections", "1", BQT_DEADLINE_MS);
    expect_count(f, 0);
    close(direct);
}

static void half_close_passes_through(void **state)
{
    fx_t *f = *state;
    int fd = client(f);
    it_cmd(fd, "list-tube-used\r\n", "USING default\r\n");
    bqt_sends(fd, "reserve\r\n");
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    bqt_expect(fd, "TIMED_OUT\r\n");
    expect_eof(fd);
    expect_count(f, 0); /* both sides sent EOF: the proxy let go */
    close(fd);
}

/* ---- back-pressure ---- */

/* Bytes the kernel holds in the established loopback sockets that talk to
 * port (tx of the connecting side, rx of the accepting side) and that port
 * talks from (tx of the accepting side, rx of the connecting side), except
 * the connection from skip_port. */
typedef struct queues {
    long long to_tx, to_rx, from_tx, from_rx;
} queues_t;

static queues_t kernel_queues(int port, int skip_port)
{
    queues_t q = {0, 0, 0, 0};
    FILE *in = fopen("/proc/net/tcp", "r");
    assert_non_null(in);
    char line[512];
    assert_non_null(fgets(line, sizeof line, in)); /* the heading */
    while (fgets(line, sizeof line, in)) {
        unsigned lip, lport, rip, rport, st;
        unsigned long tx, rx;
        if (sscanf(line, " %*u: %x:%x %x:%x %x %lx:%lx", &lip, &lport, &rip, &rport, &st, &tx,
                   &rx) != 7 ||
            st != 1 /* ESTABLISHED */ || (int)lport == skip_port || (int)rport == skip_port)
            continue;
        if ((int)rport == port) {
            q.to_tx += (long long)tx;
            q.from_rx += (long long)rx;
        }
        if ((int)lport == port) {
            q.to_rx += (long long)rx;
            q.from_tx += (long long)tx;
        }
    }
    fclose(in);
    return q;
}

/* Everything on the path at one moment. */
typedef struct snapshot {
    long long sent;  /* bytes the client sent */
    long long peeks; /* commands beanstalkd ran (0 without a direct connection) */
    queues_t proxy;  /* kernel queues client <-> proxy */
    queues_t server; /* kernel queues proxy <-> beanstalkd */
} snapshot_t;

/* direct: a connection straight to beanstalkd 0 for its cmd-peek, or -1. */
static snapshot_t snap(fx_t *f, int direct, long long sent)
{
    snapshot_t s;
    memset(&s, 0, sizeof s);
    s.sent = sent;
    int skip = -1;
    if (direct >= 0) {
        s.peeks = bqt_stat_int(direct, "stats\r\n", "cmd-peek");
        struct sockaddr_in a;
        socklen_t len = sizeof a;
        assert_int_equal(getsockname(direct, (struct sockaddr *)&a, &len), 0);
        skip = ntohs(a.sin_port); /* the ACK of its stats reply may still be on its way */
    }
    s.proxy = kernel_queues(f->port, skip);
    s.server = kernel_queues(f->bs[0].port, skip);
    return s;
}

/* A non-blocking connection to the proxy, with SO_RCVBUF rcvbuf when > 0. */
static int nb_client(fx_t *f, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    assert_true(fd >= 0);
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)f->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    return fd;
}

/* What the client sends: len bytes of data, or with repeat, data[0..8)
 * over and over (data holds copies of it) up to STREAM_MAX. */
typedef struct source {
    const char *data;
    size_t len;
    bool repeat;
} source_t;

/* Sends src on non-blocking fd without reading, until the path is full: no
 * progress for STALL_MS and the same snapshot before and after. Fails when
 * everything went through (the proxy buffers without bound). Returns the
 * stable snapshot. */
static snapshot_t send_until_stalled(fx_t *f, int fd, int direct, source_t src)
{
    long long sent = 0, deadline = bqt_now_ms() + 120000;
    long long total = src.repeat ? STREAM_MAX : (long long)src.len;
    while (bqt_now_ms() < deadline) {
        const char *from = src.repeat ? src.data + sent % 8 : src.data + sent;
        size_t n = src.repeat ? src.len - 8 : src.len - (size_t)sent;
        ssize_t w = send(fd, from, n, 0);
        if (w > 0) {
            sent += w;
            if (sent >= total)
                fail_msg("the proxy took all %lld bytes without being read from", sent);
            continue;
        }
        assert_true(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        snapshot_t before = snap(f, direct, sent);
        if (poll(&p, 1, STALL_MS) != 0)
            continue;
        snapshot_t after = snap(f, direct, sent);
        if (memcmp(&before, &after, sizeof before) == 0)
            return after;
    }
    fail_msg("the path neither stalled nor took everything in 120 s");
    snapshot_t none = {0};
    return none;
}

/* Finishes the partial command, reads every reply (each NOT_FOUND) and
 * returns the number of commands. */
static long long drain(int fd, long long sent)
{
    long long cmds = (sent + 7) / 8, want = cmds * 11, got = 0;
    size_t rest = (size_t)(cmds * 8 - sent);
    static char buf[READ_MAX];
    long long deadline = bqt_now_ms() + 120000;
    while (got < want) {
        struct pollfd p = {.fd = fd, .events = POLLIN | (rest ? POLLOUT : 0)};
        assert_true(poll(&p, 1, 1000) >= 0 && bqt_now_ms() < deadline);
        if (rest && (p.revents & POLLOUT)) {
            ssize_t n = send(fd, PEEK + 8 - rest, rest, 0);
            if (n > 0)
                rest -= (size_t)n;
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        assert_true(n > 0);
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != NOT_FOUND[(got + i) % 11])
                fail_msg("reply byte %lld is wrong", got + i);
        got += n;
    }
    assert_true(got == want);
    return cmds;
}

static void pipelined_stream_stays_bounded(void **state)
{
    fx_t *f = *state;
    f->accept_sndbuf = SMALL_BUF; /* the replies pile up in the proxy sooner */
    int direct = bqt_client(&f->bs[0]);
    int fd = nb_client(f, SMALL_BUF);
    static char pattern[READ_MAX];
    for (size_t i = 0; i < sizeof pattern; i += 8)
        memcpy(pattern + i, PEEK, 8);
    snapshot_t s = send_until_stalled(f, fd, direct, (source_t){pattern, sizeof pattern, true});
    /* Client to server: what the client sent, less what beanstalkd ran and
     * what the kernel holds, is in the proxy (or, up to one 224-byte read,
     * in beanstalkd's command buffer). */
    long long up =
        s.sent - 8 * s.peeks - s.proxy.to_tx - s.proxy.to_rx - s.server.to_tx - s.server.to_rx;
    /* Server to client: every reply is still on the way (none was read). */
    long long down =
        11 * s.peeks - s.server.from_tx - s.server.from_rx - s.proxy.from_tx - s.proxy.from_rx;
    print_message("sent %lld, run %lld, in the proxy: %lld up, %lld down\n", s.sent, s.peeks, up,
                  down);
    /* Both directions stay bounded; the stall comes from one of them being
     * full (which one fills first depends on scheduling: a full reply
     * queue stops the proxy reading the client too). */
    assert_true(up <= QUEUE_HIGH + READ_MAX + 224);
    assert_true(down <= QUEUE_HIGH + READ_MAX + 11);
    assert_true(up > QUEUE_HIGH - 224 || down > QUEUE_HIGH - 11);
    long long cmds = drain(fd, s.sent);
    assert_int_equal(bqt_stat_int(direct, "stats\r\n", "cmd-peek"), cmds);
    close(fd);
    close(direct);
}

/* While the target's address is being looked up, the client's bytes wait
 * in the proxy, at most about 1 MiB of them; then they all go through. */
static void early_bytes_wait_bounded(void **state)
{
    fx_t *f = *state;
    f->accept_rcvbuf = MID_BUF;
    int direct = bqt_client(&f->bs[0]);
    set_target(f, HELD_NAME, f->bs_port[0]);
    hold_dns();
    int fd = nb_client(f, 0);
    int sndbuf = MID_BUF;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    size_t len;
    char *msg = big_put(&len);
    snapshot_t s = send_until_stalled(f, fd, -1, (source_t){msg, len, false});
    long long held = s.sent - s.proxy.to_tx - s.proxy.to_rx;
    print_message("sent %lld, held in the proxy: %lld\n", s.sent, held);
    assert_true(held > QUEUE_HIGH && held <= QUEUE_HIGH + READ_MAX);
    assert_int_equal(proxy_count(f), 1);
    assert_int_equal(bqt_stat_int(direct, "stats\r\n", "current-connections"), 1);
    release_dns();
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK), 0);
    bqt_send(fd, msg + s.sent, len - (size_t)s.sent);
    bqt_expect(fd, "INSERTED 1\r\n");
    char peek[64];
    snprintf(peek, sizeof peek, "FOUND 1 %d\r\n", BIG_JOB);
    bqt_sends(fd, "peek 1\r\n");
    bqt_expect(fd, peek);
    char *body = malloc(BIG_JOB + 2);
    assert_non_null(body);
    assert_int_equal(bqt_read_n(fd, body, BIG_JOB + 2, BQT_DEADLINE_MS), BIG_JOB + 2);
    assert_memory_equal(body, msg + len - BIG_JOB - 2, BIG_JOB + 2);
    free(body);
    free(msg);
    close(fd);
    close(direct);
}

/* A client that half-closes before the target is connected: its command
 * is still answered, then it sees EOF. */
static void half_close_before_connect(void **state)
{
    fx_t *f = *state;
    set_target(f, HELD_NAME, f->bs_port[0]);
    hold_dns();
    int fd = client(f);
    bqt_sends(fd, "list-tube-used\r\n");
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    release_dns();
    bqt_expect(fd, "USING default\r\n");
    expect_eof(fd);
    expect_count(f, 0);
    close(fd);
}

/* Connections whose target address is still being looked up are closed by
 * close_all, and freed with the proxy (teardown, with one left open). */
static void close_while_resolving(void **state)
{
    fx_t *f = *state;
    set_target(f, HELD_NAME, f->bs_port[0]);
    hold_dns();
    int a = client(f), b = client(f);
    expect_count(f, 2);
    on_loop(f, do_close_all, NULL);
    assert_int_equal(proxy_count(f), 0);
    expect_eof(a);
    expect_eof(b);
    close(a);
    close(b);
    f->leftover_fd = client(f);
    expect_count(f, 1);
}

int main(void)
{
    dns = bqt_dns_start();
    if (!dns) {
        fprintf(stderr, "cannot start the test's DNS server\n");
        return 1;
    }
    char servers[32];
    snprintf(servers, sizeof servers, "127.0.0.1:%d", bqt_dns_port(dns));
    setenv("BQ_TEST_DNS_SERVERS", servers, 1); /* read by replication/resolve.c */
    if (!bqt_reference_available()) {
        fprintf(stderr, "no reference beanstalkd at %s\n", bqt_reference_binary());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(commands_get_beanstalkd_replies, setup, teardown),
        cmocka_unit_test_setup_teardown(big_job_passes_both_ways, setup, teardown),
        cmocka_unit_test_setup_teardown(looked_up_target, setup, teardown),
        cmocka_unit_test_setup_teardown(no_target_holds_new_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(unreachable_target_closes_at_the_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(target_change_moves_sessions, setup, teardown),
        cmocka_unit_test_setup_teardown(target_death_holds_client, setup, teardown),
        cmocka_unit_test_setup_teardown(client_close_closes_target_side, setup, teardown),
        cmocka_unit_test_setup_teardown(half_close_passes_through, setup, teardown),
        cmocka_unit_test_setup_teardown(pipelined_stream_stays_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(early_bytes_wait_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(half_close_before_connect, setup, teardown),
        cmocka_unit_test_setup_teardown(close_while_resolving, setup, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    bqt_dns_stop(dns);
    return failed;
}
