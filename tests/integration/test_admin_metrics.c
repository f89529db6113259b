/* /metrics scraped over real HTTP from running nodes and checked whole with
 * the strict Prometheus text checker (tests/support/prom_parse.c), then
 * value by value: after N puts into tube "t", commands_total{put} and
 * tube_jobs{t, ready} are N; under -f 0 the fsync histogram counts. A
 * two-node cluster over TLS (n1 primary with --sync-standbys=1, n2
 * standby, both with the admin API on loopback): the primary's and the
 * standby's texts, the standby's replicated tube counts, /readyz on both,
 * and a plaintext client on the replication port counted as a failed TLS
 * handshake. A single beanstalkd (no --role) with --admin-listen: the same
 * engine and binlog families and no cluster ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/bqtest.h"
#include "tests/support/cluster.h"
#include "tests/support/prom_parse.h"

#define PUTS 5
#define HTTP_MS 10000

static char g_certs[200];
static const char *const g_names[] = {"n1", "n2"};
static bqt_server_t g_single;    /* the single beanstalkd, stopped by teardown */
static bqc_cluster_t *g_cluster; /* the cluster, finished by teardown */
static bool g_passed;

/* GET path from 127.0.0.1:port: the body (new, free it) and the status in
 * *status; NULL when no whole answer arrived within HTTP_MS. */
static char *http_get(int port, const char *path, int *status)
{
    char req[256];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    int fd = bqt_connect(port);
    if (fd < 0)
        return NULL;
    bqt_sends(fd, req);
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    assert_non_null(buf);
    long long deadline = bqt_now_ms() + HTTP_MS;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        long long left = deadline - bqt_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) < 0) {
            if (left > 0 && errno == EINTR)
                continue;
            len = 0;
            break;
        }
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    if (!body || sscanf(buf, "HTTP/1.1 %d", status) != 1) {
        free(buf);
        return NULL;
    }
    memmove(buf, body + 4, strlen(body + 4) + 1);
    return buf;
}

/* Scrapes port's /metrics, checks the whole text, parses it into *t. */
static void scrape(int port, bqp_text_t *t)
{
    int status = 0;
    char *text = http_get(port, "/metrics", &status);
    if (!text || status != 200)
        fail_msg("GET /metrics on port %d: status %d", port, status);
    char err[256];
    if (bqp_parse(text, t, err, sizeof err) != 0)
        fail_msg("port %d: /metrics is not valid: %s", port, err);
    free(text);
}

static double get(const bqp_text_t *t, const char *key)
{
    double v;
    if (!bqp_get(t, key, &v))
        fail_msg("no series %s", key);
    return v;
}

typedef struct probe {
    int port;
    const char *key;
    double want; /* the series reaches at least this */
    int status;  /* /readyz: the wanted status (key NULL) */
} probe_t;

static bool reached(void *arg)
{
    probe_t *p = arg;
    int status = 0;
    if (!p->key) {
        char *body = http_get(p->port, "/readyz", &status);
        free(body);
        return status == p->status;
    }
    bqp_text_t t;
    char err[256];
    char *text = http_get(p->port, "/metrics", &status);
    double v = -1;
    if (text && bqp_parse(text, &t, err, sizeof err) == 0) {
        bqp_get(&t, p->key, &v);
        bqp_free(&t);
    }
    free(text);
    return v >= p->want;
}

static void wait_for(int port, const char *key, double want)
{
    probe_t p = {port, key, want, 0};
    if (!bqt_wait_until(reached, &p, BQC_WAIT_MS))
        fail_msg("port %d: %s did not reach %g", port, key ? key : "/readyz", want);
}

static void wait_ready(int port, int status)
{
    probe_t p = {port, NULL, 0, status};
    if (!bqt_wait_until(reached, &p, BQC_WAIT_MS))
        fail_msg("port %d: /readyz did not answer %d", port, status);
}

/* PUTS jobs into tube "t" on fd. */
static void put_jobs(int fd)
{
    bqt_sends(fd, "use t\r\n");
    bqt_expect(fd, "USING t\r\n");
    for (int i = 0; i < PUTS; i++) {
        bqt_sends(fd, "put 0 0 60 1\r\nx\r\n");
        free(bqt_expect_prefix(fd, "INSERTED "));
    }
}

/* The engine and binlog figures every node with -b -f 0 shows after
 * put_jobs on a fresh binlog. */
static void check_after_puts(const bqp_text_t *t)
{
    assert_true(get(t, "beanstalkd_ha_commands_total{command=\"put\"}") == PUTS);
    assert_true(get(t, "beanstalkd_ha_commands_total{command=\"use\"}") == 1);
    assert_true(get(t, "beanstalkd_ha_tube_jobs{state=\"ready\",tube=\"t\"}") == PUTS);
    assert_true(get(t, "beanstalkd_ha_jobs{state=\"ready\"}") == PUTS);
    assert_true(get(t, "beanstalkd_ha_jobs_created_total") == PUTS);
    assert_true(get(t, "beanstalkd_ha_tubes") == 2);
    assert_true(get(t, "beanstalkd_ha_binlog_fsync_duration_seconds_count") > 0);
    assert_true(get(t, "beanstalkd_ha_binlog_written_bytes_total") > 0);
    assert_true(get(t, "beanstalkd_ha_binlog_segments") >= 1);
    assert_true(get(t, "process_open_fds") > 0);
    assert_true(get(t, "process_resident_memory_bytes") > 0);
}

/* True when the file at path has a line containing what. */
static bool log_has(const char *path, const char *what)
{
    char line[1024];
    bool found = false;
    FILE *f = fopen(path, "r");
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, what) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Whether the flags take --admin-listen without --role: a start that
 * must fail later (its binlog directory cannot exist) says so. */
static bool single_admin_accepted(void)
{
    char dir[200], log[300], port[16];
    assert_int_equal(bqt_mkdtemp(dir, sizeof dir, "bq-metrics-flags"), 0);
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(port, sizeof port, "%d", bqt_free_port());
    const char *args[] = {"-l",
                          "127.0.0.1",
                          "-p",
                          port,
                          "--admin-listen",
                          "127.0.0.1:1",
                          "-b",
                          "/nonexistent/bq-metrics",
                          NULL};
    bqt_run_to_exit(bqt_our_binary(), args, log, HTTP_MS);
    bool refused = log_has(log, "requires --role");
    bqc_remove_tree(dir);
    return !refused;
}

static void single_node_serves_metrics(void **state)
{
    (void)state;
    char admin[32];
    snprintf(admin, sizeof admin, "127.0.0.1:%d", bqt_free_port());
    const char *args[] = {"-b", "{dir}", "-f", "0", "--admin-listen", admin, NULL};
    bqt_server_t *s = &g_single;
    if (!single_admin_accepted())
        fail_msg("--admin-listen without --role was refused: a single node serves it on "
                 "loopback");
    if (bqt_server_start(s, bqt_our_binary(), args) != 0)
        fail_msg("a single beanstalkd did not start with --admin-listen");
    int port = atoi(strchr(admin, ':') + 1);
    int fd = bqt_client(s);
    put_jobs(fd);
    bqp_text_t t;
    scrape(port, &t);
    check_after_puts(&t);
    double v;
    assert_false(bqp_get(&t, "beanstalkd_ha_role{role=\"primary\"}", &v));
    bqp_free(&t);
    int status = 0;
    char *body = http_get(port, "/status", &status);
    assert_int_equal(status, 200);
    assert_non_null(strstr(body, "\"role\":\"single\""));
    free(body);
    wait_ready(port, 200);
    close(fd);
}

/* A plaintext client on the primary's replication port: a failed handshake. */
static void plaintext_on_repl_port(int port)
{
    int fd = bqt_connect(port);
    assert_true(fd >= 0);
    bqt_sends(fd, "GET / HTTP/1.1\r\n\r\n");
    bqt_expect_eof(fd, BQC_WAIT_MS);
    close(fd);
}

static void cluster_nodes_serve_metrics(void **state)
{
    (void)state;
    bqc_cluster_t *c = g_cluster = bqc_new("bq-metrics", 2, g_names, g_certs);
    assert_non_null(c);
    c->node[0].admin_port = bqt_free_port();
    c->node[1].admin_port = bqt_free_port();
    const char *primary[] = {"--role=primary", "-f", "0", "--sync-standbys=1", NULL};
    const char *standby[] = {"--role=standby", NULL};
    bqc_start(c, 0, primary);
    bqc_start(c, 1, standby);
    int p = c->node[0].admin_port, s = c->node[1].admin_port;
    wait_ready(p, 200); /* the standby is in sync */
    wait_ready(s, 200);
    int fd = bqt_client(&c->node[0].srv);
    put_jobs(fd);

    bqp_text_t t;
    scrape(p, &t);
    check_after_puts(&t);
    assert_true(get(&t, "beanstalkd_ha_role{role=\"primary\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_node_info{cluster_id=\"beanstalkd-ha\",node_id=\"n1\"}") ==
                1);
    assert_true(get(&t, "beanstalkd_ha_sync_state{state=\"sync\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_standby_connected{standby=\"n2\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_sync_standbys_required") == 1);
    double last = get(&t, "beanstalkd_ha_last_lsn");
    bqp_free(&t);
    wait_for(p, "beanstalkd_ha_standby_applied_lsn{standby=\"n2\"}", last);

    wait_for(s, "beanstalkd_ha_tube_jobs{state=\"ready\",tube=\"t\"}", PUTS);
    scrape(s, &t);
    assert_true(get(&t, "beanstalkd_ha_role{role=\"standby\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_commands_total{command=\"put\"}") == 0);
    assert_true(get(&t, "beanstalkd_ha_primary_commit_lsn") >= 0);
    assert_true(get(&t, "beanstalkd_ha_binlog_fsync_duration_seconds_count") > 0);
    bqp_free(&t);

    plaintext_on_repl_port(c->node[0].repl_port);
    wait_for(p, "beanstalkd_ha_tls_handshake_failures_total{channel=\"replication\"}", 1);
    close(fd);
    g_passed = true;
}

static int group_setup(void **state)
{
    (void)state;
    return bqc_certs_make(BQ_MKCERTS, g_certs, sizeof g_certs, g_names, 2);
}

static int group_teardown(void **state)
{
    (void)state;
    bqc_remove_tree(g_certs);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    g_passed = false;
    return 0;
}

/* Stops whatever the case started, passed or not. */
static int teardown(void **state)
{
    (void)state;
    bqt_server_stop(&g_single);
    memset(&g_single, 0, sizeof g_single);
    bqc_finish(g_cluster, g_passed);
    g_cluster = NULL;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(single_node_serves_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(cluster_nodes_serve_metrics, setup, teardown),
    };
    return cmocka_run_group_tests_name("admin_metrics", tests, group_setup, group_teardown);
}
