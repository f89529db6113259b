/* Name lookups that are never answered (a DNS server that drops queries:
 * tests/support/fakedns.h holding them, the server pointed at it with
 * BQ_TEST_DNS_SERVERS, peers named *.hang.test) must not hold what has
 * nothing to do with them: a primary's start-up, its fsyncs and the
 * replies that wait for them, shutdown, and a failover while the dead
 * primary's name alone goes unanswered. The server runs with
 * UV_THREADPOOL_SIZE=1, so that nothing queued on libuv's pool would help
 * if lookups ran there. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"
#include "tests/support/cluster.h"
#include "tests/support/fakedns.h"
#include "tests/support/history.h"
#include "tests/support/workload.h"

#define PUTS 20
#define PUT_MS 10000 /* the first put waits out --sync-timeout (2 s): no standby */
#define START_MS 30000

typedef struct fx {
    char work[160], bdir[200];
    bqt_server_t srv;
    bqt_dns_t *dns;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f || bqt_mkdtemp(f->work, sizeof f->work, "bq-hung") != 0)
        return -1;
    snprintf(f->bdir, sizeof f->bdir, "%s/binlog", f->work);
    if (mkdir(f->bdir, 0700) != 0)
        return -1;
    f->dns = bqt_dns_start();
    if (!f->dns)
        return -1;
    bqt_dns_hold(f->dns, true); /* for good: no query is ever answered */
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    bqt_server_stop(&f->srv);
    bqt_dns_stop(f->dns);
    bqc_remove_tree(f->work);
    free(f);
    return 0;
}

/* Starts node n1 with peers n2 and n3 whose names are never answered,
 * and extra flags (NULL-terminated), with a threadpool of one thread. */
static void start_node(fx_t *f, const char *const *extra)
{
    char self[64], n2[64], n3[64];
    snprintf(self, sizeof self, "n1=127.0.0.1:%d", bqt_free_port());
    snprintf(n2, sizeof n2, "n2=n2.hang.test:%d", bqt_free_port());
    snprintf(n3, sizeof n3, "n3=n3.hang.test:%d", bqt_free_port());
    const char *args[24] = {
        "-b",     f->bdir, "-f",     "0", "--node-id",       "n1", "--peer", self,
        "--peer", n2,      "--peer", n3,  "--repl-plaintext"};
    size_t k = 13;
    for (const char *const *e = extra; e && *e && k < 23; e++)
        args[k++] = *e;
    args[k] = NULL;
    char dns[32];
    snprintf(dns, sizeof dns, "127.0.0.1:%d", bqt_dns_port(f->dns));
    setenv("BQ_TEST_DNS_SERVERS", dns, 1);
    setenv("UV_THREADPOOL_SIZE", "1", 1);
    int rc = bqt_server_start(&f->srv, bqt_our_binary(), args);
    unsetenv("BQ_TEST_DNS_SERVERS");
    unsetenv("UV_THREADPOOL_SIZE");
    assert_int_equal(rc, 0);
}

/* SIGTERM ends the node cleanly within the bound. */
static void stops_in_time(fx_t *f)
{
    bqt_term_within(&f->srv, BQT_SIGTERM_BOUND_MS, "n1, every lookup unanswered");
}

/* A primary whose peers' names are never answered: the start-up probe
 * gives up on them at its deadline, every put of a one-at-a-time client is
 * acknowledged after its own fsync (-f 0), and SIGTERM ends it. */
static void primary_fsyncs_while_lookups_hang(void **state)
{
    fx_t *f = *state;
    static const char *const extra[] = {"--role", "primary", NULL};
    start_node(f, extra);
    bqt_wait_log(f->srv.log_path, "n1", "cluster start", "role=primary", 1, START_MS);
    int fd = bqt_connect(f->srv.port);
    assert_true(fd >= 0);
    long long worst = 0;
    for (int i = 0; i < PUTS; i++) {
        long long t0 = bqt_now_ms();
        char *line = bqc_ask(fd, "put 0 0 60 3\r\nabc\r\n", PUT_MS);
        if (!line || strncmp(line, "INSERTED ", 9) != 0)
            fail_msg("put %d: %s after %lld ms (an fsync held behind hung lookups?)", i + 1,
                     line ? line : "no reply", bqt_now_ms() - t0);
        free(line);
        if (bqt_now_ms() - t0 > worst)
            worst = bqt_now_ms() - t0;
    }
    close(fd);
    fprintf(stderr,
            "%d puts acknowledged while every lookup went unanswered; slowest %lld "
            "ms (the first waits out --sync-timeout)\n",
            PUTS, worst);
    /* The lookups really hung: asked, never answered, no peer reached. */
    assert_true(bqt_dns_queries(f->dns) > 0);
    assert_int_equal(bqt_log_count(f->srv.log_path, "replication: standby connected", NULL), 0);
    stops_in_time(f);
}

/* A node with automatic failover whose peers' names are never answered
 * keeps asking (a canvass round, links retried) and stops on SIGTERM. */
static void auto_node_stops_while_lookups_hang(void **state)
{
    fx_t *f = *state;
    static const char *const extra[] = {"--role", "standby", "--failover", "auto", NULL};
    start_node(f, extra);
    bqt_wait_log(f->srv.log_path, "n1", "cluster mode", NULL, 1, START_MS);
    long long until = bqt_now_ms() + 3000; /* several rounds of lookups */
    while (bqt_now_ms() < until && bqt_dns_queries(f->dns) < 8)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    assert_true(bqt_dns_queries(f->dns) > 0);
    stops_in_time(f);
}

/* ---- a failover while the dead primary's name hangs ---- */

#define FO_NODES 3
#define FO_MAX_MS 5000 /* kill -9 to a put acknowledged (about 1.6 s; the hang was 60 s) */

typedef struct fo {
    bqc_cluster_t *c;
    bqw_t *w;
    bqt_dns_t *dns;
    bool passed;
} fo_t;

static int setup_fo(void **state)
{
    static const char *const names[FO_NODES] = {"n1", "n2", "n3"};
    fo_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->dns = bqt_dns_start();
    f->c = f->dns ? bqc_new("bq-hung-fo", FO_NODES, names, NULL) : NULL;
    f->w = f->c ? bqw_new(f->c, "hung", 2) : NULL;
    if (!f->w) {
        bqc_finish(f->c, true);
        bqt_dns_stop(f->dns);
        free(f);
        return -1;
    }
    snprintf(f->c->peer_domain, sizeof f->c->peer_domain, "dns.test");
    *state = f;
    return 0;
}

static int teardown_fo(void **state)
{
    fo_t *f = *state;
    bqw_stop(f->w);
    bqc_finish(f->c, f->passed);
    bqw_free(f->w);
    bqt_dns_stop(f->dns);
    free(f);
    return 0;
}

/* Three nodes with automatic failover whose peers are names (n1.dns.test)
 * answered by the test's DNS server. The primary is killed and, from just
 * before, lookups of its name are never answered (a dead pod's name in a
 * slow or stale resolver, as in issue 14, where they held a failover for
 * 60 s): the survivors still elect a new primary in the usual time, the
 * other standby streams from it, -f 0 puts are acknowledged (their fsyncs
 * are not held), the survivors keep asking for the dead name, SIGTERM
 * ends each within the bound, and the history checker finds nothing lost. */
static void failover_while_the_dead_name_hangs(void **state)
{
    fo_t *f = *state;
    static const char *const flags[] = {"--role=standby", "--failover=auto", "-f", "0", NULL};
    char dns[32];
    bqc_view_t v;
    snprintf(dns, sizeof dns, "127.0.0.1:%d", bqt_dns_port(f->dns));
    setenv("BQ_TEST_DNS_SERVERS", dns, 1);
    for (size_t i = 0; i < FO_NODES; i++)
        bqw_node_up(f->w, i, flags);
    unsetenv("BQ_TEST_DNS_SERVERS");
    bqw_start(f->w);
    size_t p = bqw_wait_settled(f->w, 0, &v);
    bqw_wait_acks(f->w, 50);
    bqt_dns_drop(f->dns, f->c->node[p].name);
    size_t before = bqt_dns_queries(f->dns);
    bqw_node_kill(f->w, p);
    uint64_t t0 = bqw_recovery_arm(f->w);
    long long ms = bqw_recovery_wait(f->w, t0, "killing the primary whose name hangs");
    size_t q = bqw_wait_primary(f->w, (int)p, &v);
    size_t other = 3 - p - q;
    bqw_wait_streaming(f->w, other, false);
    bqw_wait_acks(f->w, 50);
    fprintf(stderr, "failover with %s's name unanswered: %lld ms (%s is primary, %s streams)\n",
            f->c->node[p].name, ms, f->c->node[q].name, f->c->node[other].name);
    assert_true(ms < FO_MAX_MS);
    /* The survivors really asked for the dead name (and got no answer). */
    long long until = bqt_now_ms() + 5000;
    while (bqt_dns_queries(f->dns) <= before && bqt_now_ms() < until)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    assert_true(bqt_dns_queries(f->dns) > before);
    bqw_check(f->w, q, NULL, NULL);
    bqt_term_within(&f->c->node[other].srv, BQT_SIGTERM_BOUND_MS, "a standby, a lookup hanging");
    bqt_term_within(&f->c->node[q].srv, BQT_SIGTERM_BOUND_MS, "the primary, a lookup hanging");
    f->passed = true;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(primary_fsyncs_while_lookups_hang, setup, teardown),
        cmocka_unit_test_setup_teardown(auto_node_stops_while_lookups_hang, setup, teardown),
        cmocka_unit_test_setup_teardown(failover_while_the_dead_name_hangs, setup_fo, teardown_fo),
    };
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("hung_lookups", tests, NULL, NULL);
}
