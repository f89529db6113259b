/* Degraded mode end to end: any single failure of any supported topology,
 * with default flags, leaves a cluster that acknowledges writes within a
 * bounded time, and nothing acknowledged is lost (docs/replication.md,
 * "What can be lost"). Real beanstalkd-ha processes on loopback over TLS
 * (certificates from deploy/mkcerts), started and killed by pid through
 * tests/support/cluster.h; clients put and delete one command at a time
 * through any node (tests/support/workload.h) and every operation is
 * checked against a snapshot of the primary at the end.
 *
 * Topologies: PAIR (two nodes, manual failover: n1 --role=primary, n2
 * --role=standby), WITNESS (n1 and n2 data nodes, n3 --role=witness,
 * --failover=auto), TRIO (three data nodes, --failover=auto).
 *
 * Cases: a standby killed (pair, witness, trio: writes go on; pair and
 * witness after --sync-timeout, degraded, and sync comes back by itself
 * when it returns); the primary killed (pair: beanstalkctl's promote, and
 * the old primary follows when it returns; witness: elected); the witness
 * killed (nothing changes); a standby that stops without closing its
 * connection (SIGSTOP) while a put waits (the put gets its reply); strict
 * mode (--sync-fallback refuse: writes refused, nothing lost); a second
 * failure while degraded (pair: only the writes acknowledged in the window
 * may be lost, and promote needs --force; witness: the standby that lacks
 * them is not elected, the old primary is when it returns, nothing is
 * lost); a queue of a million jobs while a standby is away and comes back.
 *
 * The bounds asserted are twice the targets of issue 12 (the figures are
 * printed; docs/failover.md records them). BQT_FILTER='name*' runs some
 * cases only; BQ_DEGRADED_JOBS sets the large queue (1000000). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/cluster.h"
#include "tests/support/history.h"
#include "tests/support/workload.h"

#ifndef BQ_MKCERTS
#error "BQ_MKCERTS must name deploy/mkcerts"
#endif

#define WORKERS 2
#define TUBE "dg"
#define STANDBY_LOST_MAX_MS 12000     /* target 6 s */
#define PROMOTED_MAX_MS 12000         /* target 6 s after the accepted promote */
#define WITNESS_FAILOVER_MAX_MS 16000 /* target 8 s */
#define AFTER_ACKS 30
#define SYNC_TIMEOUT_MS 2000     /* the default --sync-timeout */
#define FAILOVER_TIMEOUT_MS 1000 /* the default --failover-timeout */
#if defined(__SANITIZE_ADDRESS__)
#define LARGE_JOBS 200000 /* ASan: five times slower and larger */
#else
#define LARGE_JOBS 1000000
#endif

typedef enum topo { PAIR, WITNESS, TRIO } topo_t;

static char g_certs[160];
static const char *const g_names[] = {"n1", "n2", "n3"};

static const char *const pair_primary[] = {"--role=primary", NULL};
static const char *const pair_standby[] = {"--role=standby", NULL};
static const char *const strict_primary[] = {"--role=primary", "--sync-fallback", "refuse", NULL};
static const char *const auto_data[] = {"--role=standby", "--failover=auto", NULL};
static const char *const witness_data[] = {"--role=standby", "--failover=auto", "--witness", "n3",
                                           NULL};
static const char *const auto_witness[] = {"--role=witness", "--failover=auto", NULL};

typedef struct suite {
    topo_t topo;
    bqc_cluster_t *c;
    bqw_t *w;
    const char *const *flags[3];
    bool passed;
} suite_t;

static int group_setup(void **state)
{
    (void)state;
    return bqc_certs_make(BQ_MKCERTS, g_certs, sizeof g_certs, g_names, 3);
}

static int group_teardown(void **state)
{
    (void)state;
    bqc_remove_tree(g_certs);
    return 0;
}

static int setup(void **state)
{
    suite_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    suite_t *s = *state;
    bqw_free(s->w);
    bqc_finish(s->c, s->passed);
    free(s);
    return 0;
}

static const char *name_of(suite_t *s, size_t i)
{
    return s->c->node[i].name;
}

/* A new cluster of topology t (its nodes not started), every node with an
 * admin port; primary_flags replaces the pair's primary flags when given. */
static void make(suite_t *s, topo_t t, const char *const *primary_flags)
{
    size_t n = t == PAIR ? 2 : 3;
    s->topo = t;
    s->c = bqc_new("bq-degraded", n, g_names, g_certs);
    assert_non_null(s->c);
    s->w = bqw_new(s->c, TUBE, WORKERS);
    assert_non_null(s->w);
    for (size_t i = 0; i < n; i++)
        s->c->node[i].admin_port = bqt_free_port();
    s->flags[0] = t == PAIR      ? (primary_flags ? primary_flags : pair_primary)
                  : t == WITNESS ? witness_data
                                 : auto_data;
    s->flags[1] = t == PAIR ? pair_standby : t == WITNESS ? witness_data : auto_data;
    s->flags[2] = t == WITNESS ? auto_witness : auto_data;
}

static void node_up(suite_t *s, size_t i)
{
    bqw_node_up(s->w, i, s->flags[i]);
}

/* Starts every node and waits until a primary has the other nodes
 * streaming from it (a witness is listed as "witness", not streaming);
 * returns the primary's index. */
static size_t start_cluster(suite_t *s, topo_t t, const char *const *primary_flags)
{
    bqc_view_t v;
    make(s, t, primary_flags);
    for (size_t i = 0; i < s->c->n; i++)
        node_up(s, i);
    size_t p = bqw_wait_settled(s->w, t == WITNESS ? 1u << 2 : 0, &v);
    assert_string_equal(v.sync, "sync");
    return p;
}

/* The data node other than p (the witness excluded). */
static size_t other_data(suite_t *s, size_t p)
{
    for (size_t i = 0; i < s->c->n; i++)
        if (i != p && !(s->topo == WITNESS && i == 2))
            return i;
    fail_msg("no data node but %s", name_of(s, p));
    return 0;
}

typedef struct sync_wait {
    suite_t *s;
    size_t p;
    const char *want;
    char seen[32];
} sync_wait_t;

static bool sync_is(void *arg)
{
    sync_wait_t *sw = arg;
    bqc_view_t v;
    int fd = bqt_connect(sw->s->c->node[sw->p].srv.port);
    char *r = fd >= 0 ? bqc_ask(fd, "stats\r\n", BQW_PROBE_MS) : NULL;
    bool ok = bqc_view_parse(r, &v) == 0;
    free(r);
    if (fd >= 0)
        close(fd);
    if (ok)
        snprintf(sw->seen, sizeof sw->seen, "%s", v.sync);
    return ok && strcmp(v.sync, sw->want) == 0;
}

/* Waits until node p's stats show cluster-sync-state: want. */
static void wait_sync(suite_t *s, size_t p, const char *want)
{
    sync_wait_t sw = {.s = s, .p = p, .want = want, .seen = "?"};
    if (!bqt_wait_until(sync_is, &sw, BQC_WAIT_MS))
        fail_msg("%s's sync state stayed %s, want %s", name_of(s, p), sw.seen, want);
}

/* kill -9 of node i under load; returns the ms from the kill to the first
 * put sent after it and acknowledged, and asserts it is below max_ms. */
static long long kill_and_time(suite_t *s, size_t i, const char *what, long long max_ms)
{
    bqw_wait_acks(s->w, 50);
    bqh_mark(bqw_history(s->w), "kill -9 of %s (%s)", name_of(s, i), what);
    bqw_node_kill(s->w, i);
    uint64_t t0 = bqw_recovery_arm(s->w);
    long long ms = bqw_recovery_wait(s->w, t0, what);
    fprintf(stderr, "%s: writes acknowledged again after %lld ms\n", what, ms);
    if (ms >= max_ms)
        fail_msg("%s: writes were acknowledged again after %lld ms, want < %lld", what, ms, max_ms);
    bqw_wait_acks(s->w, AFTER_ACKS);
    return ms;
}

/* ---- a standby lost ---- */

/* Pair and witness: writes stall for --sync-timeout at most, go on
 * degraded, and sync comes back by itself once the standby returns. */
static void standby_lost(suite_t *s, topo_t t, const char *what)
{
    size_t p = start_cluster(s, t, NULL);
    size_t b = other_data(s, p);
    bqw_start(s->w);
    kill_and_time(s, b, what, STANDBY_LOST_MAX_MS);
    wait_sync(s, p, "degraded");
    bqc_wait_log(s->c, p, "replication: sync degraded", NULL, 1, BQC_WAIT_MS);
    node_up(s, b);
    bqw_wait_streaming(s->w, b, false);
    wait_sync(s, p, "sync");
    bqc_wait_log(s->c, p, "replication: sync restored", NULL, 2, BQC_WAIT_MS);
    bqw_wait_acks(s->w, AFTER_ACKS);
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

static void pair_standby_lost(void **state)
{
    standby_lost(*state, PAIR, "two nodes, standby killed");
}

static void witness_standby_lost(void **state)
{
    standby_lost(*state, WITNESS, "two nodes and a witness, standby killed");
}

/* Three nodes: the other standby and the primary's own fsync keep sync
 * on; nothing degrades. */
static void trio_standby_lost(void **state)
{
    suite_t *s = *state;
    size_t p = start_cluster(s, TRIO, NULL);
    bqw_start(s->w);
    kill_and_time(s, other_data(s, p), "three nodes, standby killed", STANDBY_LOST_MAX_MS);
    wait_sync(s, p, "sync");
    assert_int_equal(bqc_log_count(s->c, p, "replication: sync degraded", NULL), 0);
    node_up(s, other_data(s, p));
    bqw_wait_streaming(s->w, other_data(s, p), false);
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

/* The witness dies: the primary keeps its standby in sync and a majority
 * in contact; writes never stop. */
static void witness_lost(void **state)
{
    suite_t *s = *state;
    size_t p = start_cluster(s, WITNESS, NULL);
    bqw_start(s->w);
    kill_and_time(s, 2, "two nodes and a witness, witness killed", STANDBY_LOST_MAX_MS);
    bqw_wait_acks(s->w, 200);
    wait_sync(s, p, "sync");
    assert_int_equal(bqc_log_count(s->c, p, "fenced", NULL), 0);
    node_up(s, 2);
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

/* ---- the primary lost ---- */

typedef struct promote_try {
    const bqc_cluster_t *c;
    size_t i;
    int status;
    const char *path;
    char body[256];
} promote_try_t;

/* Asks for a promotion; done unless refused because the primary is alive. */
static bool promote_tried(void *arg)
{
    promote_try_t *t = arg;
    t->status = bqc_admin_call(t->c, t->i, "POST", t->path, t->body, sizeof t->body);
    return !(t->status == 409 && strstr(t->body, "alive"));
}

/* POST path (/promote or /promote?force=1) to node i once the primary is
 * known to be gone; returns the status, the body in t. */
static int promote(suite_t *s, size_t i, const char *path, promote_try_t *t)
{
    *t = (promote_try_t){.c = s->c, .i = i, .path = path};
    if (!bqt_wait_until(promote_tried, t, BQC_WAIT_MS))
        fail_msg("%s on %s: refused for %d ms (the primary alive): %s", path, name_of(s, i),
                 BQC_WAIT_MS, t->body);
    return t->status;
}

/* Two nodes: the primary dies, the operator promotes the standby (accepted:
 * it holds every acknowledged write), which then takes writes alone within
 * --sync-timeout; the old primary comes back with its usual flags and
 * follows; sync is back. */
static void pair_primary_lost(void **state)
{
    suite_t *s = *state;
    promote_try_t t;
    size_t p = start_cluster(s, PAIR, NULL), b = other_data(s, p);
    bqw_start(s->w);
    bqw_wait_acks(s->w, 100);
    bqh_mark(bqw_history(s->w), "kill -9 of the primary %s", name_of(s, p));
    bqw_node_kill(s->w, p);
    bqc_wait_log(s->c, b, "replication: lost the primary", NULL, 1, BQC_WAIT_MS);
    if (promote(s, b, "/promote", &t) != 202)
        fail_msg("promote on %s answered %d: %s", name_of(s, b), t.status, t.body);
    uint64_t t0 = bqw_recovery_arm(s->w);
    long long ms = bqw_recovery_wait(s->w, t0, "the accepted promote");
    fprintf(stderr,
            "two nodes, primary killed: writes acknowledged %lld ms after the accepted "
            "promote\n",
            ms);
    if (ms >= PROMOTED_MAX_MS)
        fail_msg("writes acknowledged %lld ms after the promote, want < %d", ms, PROMOTED_MAX_MS);
    wait_sync(s, b, "degraded");
    node_up(s, p); /* its usual --role=primary: it finds b leads */
    bqc_wait_log(s->c, p, "replication: following the primary", NULL, 1, BQC_WAIT_MS);
    wait_sync(s, b, "sync");
    bqw_wait_acks(s->w, AFTER_ACKS);
    bqw_check(s->w, b, NULL, NULL);
    s->passed = true;
}

/* Two data nodes and a witness: the primary dies; the standby and the
 * witness elect the standby, which takes writes alone (the witness's floor
 * standing in for the second copy) within the bound. */
static void witness_primary_lost(void **state)
{
    suite_t *s = *state;
    bqc_view_t v;
    size_t p = start_cluster(s, WITNESS, NULL), b = other_data(s, p);
    bqw_start(s->w);
    kill_and_time(s, p, "two nodes and a witness, primary killed", WITNESS_FAILOVER_MAX_MS);
    assert_int_equal(bqw_wait_primary(s->w, (int)p, &v), b);
    wait_sync(s, b, "degraded");
    node_up(s, p);
    bqw_wait_streaming(s->w, p, false);
    wait_sync(s, b, "sync");
    bqw_wait_acks(s->w, AFTER_ACKS);
    bqw_check(s->w, b, NULL, NULL);
    s->passed = true;
}

/* ---- a standby that stops without a word ---- */

/* Two nodes: the standby is stopped (SIGSTOP: its connection stays open,
 * nothing is acknowledged); a put made then waits, and gets INSERTED once
 * --sync-timeout has passed without progress, not before; the standby
 * resumes, catches up, and sync is back. */
static void stalled_standby_put_gets_reply(void **state)
{
    suite_t *s = *state;
    size_t p = start_cluster(s, PAIR, NULL), b = other_data(s, p);
    int fd = bqw_client(s->w, p);
    unsigned long long id = 0;
    char err[160] = "";
    assert_int_equal(bqw_put(s->w, fd, BQC_REPLY_MS, &id, err, sizeof err), BQH_ACKED);
    bqt_server_signal(&s->c->node[b].srv, SIGSTOP);
    long long t0 = bqt_now_ms();
    bqh_outcome_t out = bqw_put(s->w, fd, BQC_REPLY_MS, &id, err, sizeof err);
    long long ms = bqt_now_ms() - t0;
    fprintf(stderr, "a put waiting on a stopped standby: %s after %lld ms\n",
            out == BQH_ACKED     ? "INSERTED"
            : out == BQH_UNKNOWN ? "no reply"
                                 : err,
            ms);
    assert_int_equal(out, BQH_ACKED);
    if (ms < SYNC_TIMEOUT_MS * 9 / 10 || ms >= 2 * SYNC_TIMEOUT_MS + 2000)
        fail_msg("the held put was answered after %lld ms, want about %d", ms, SYNC_TIMEOUT_MS);
    wait_sync(s, p, "degraded");
    /* Degraded: the next put does not wait. */
    t0 = bqt_now_ms();
    assert_int_equal(bqw_put(s->w, fd, BQC_REPLY_MS, &id, err, sizeof err), BQH_ACKED);
    assert_true(bqt_now_ms() - t0 < SYNC_TIMEOUT_MS / 2);
    bqt_server_signal(&s->c->node[b].srv, SIGCONT);
    wait_sync(s, p, "sync");
    close(fd);
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

/* ---- strict mode ---- */

/* --sync-fallback refuse on two nodes: the standby dies; writes are refused
 * (DRAINING) once --sync-timeout passes, nothing is acknowledged that the
 * standby lacks, and once it returns writes go on; nothing is lost. */
static void strict_refuses_and_loses_nothing(void **state)
{
    suite_t *s = *state;
    size_t p = start_cluster(s, PAIR, strict_primary), b = other_data(s, p);
    bqw_start(s->w);
    bqw_wait_acks(s->w, 100);
    bqw_node_kill(s->w, b);
    wait_sync(s, p, "refusing");
    int fd = bqw_client(s->w, p);
    unsigned long long id = 0;
    char err[160] = "";
    assert_int_equal(bqw_put(s->w, fd, BQC_REPLY_MS, &id, err, sizeof err), BQH_REFUSED);
    close(fd);
    unsigned long before = bqw_acked(s->w);
    node_up(s, b);
    wait_sync(s, p, "sync");
    bqw_wait_acks(s->w, AFTER_ACKS);
    assert_true(bqw_acked(s->w) > before);
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

/* ---- a second failure while degraded ---- */

/* Two nodes: the standby dies, the primary goes on alone (degraded), then
 * dies too. The standby, restarted, may lack what was acknowledged in
 * between: promote is refused without --force; with it, the cluster takes
 * writes again, and the only jobs lost (or deletes undone) are those
 * acknowledged between the standby's death and the primary's. */
static void pair_second_failure_loses_only_the_window(void **state)
{
    suite_t *s = *state;
    promote_try_t t;
    bqh_report_t rep;
    size_t p = start_cluster(s, PAIR, NULL), b = other_data(s, p);
    bqw_start(s->w);
    bqw_wait_acks(s->w, 100);
    uint64_t window = bqh_now_ns();
    bqh_mark(bqw_history(s->w), "kill -9 of the standby %s", name_of(s, b));
    bqw_node_kill(s->w, b);
    wait_sync(s, p, "degraded");
    bqw_wait_acks(s->w, 200); /* acknowledged by the primary alone */
    bqh_mark(bqw_history(s->w), "kill -9 of the primary %s", name_of(s, p));
    bqw_node_kill(s->w, p);
    node_up(s, b);
    bqc_wait_log(s->c, b, "cluster start", "role=standby", 1, BQC_WAIT_MS);
    assert_int_equal(promote(s, b, "/promote", &t), 409);
    if (!strstr(t.body, "--force"))
        fail_msg("promote of a standby that may lack writes answered: %s", t.body);
    /* Until this promote no node takes writes: an acknowledgement recorded
     * before it came from the dead primary (a worker may read the reply it
     * sent just before the kill a little after the kill returned). */
    uint64_t window_end = bqh_now_ns();
    assert_int_equal(promote(s, b, "/promote?force=1", &t), 202);
    uint64_t t0 = bqw_recovery_arm(s->w);
    bqw_recovery_wait(s->w, t0, "the forced promote");
    bqw_wait_acks(s->w, AFTER_ACKS);
    bqh_rules_t rules = {.promised_before = window, .promised_after = window_end};
    bqw_check(s->w, b, &rules, &rep);
    fprintf(stderr,
            "second failure: %zu lost and %zu deletes undone, all acknowledged while "
            "degraded\n",
            rep.allowed_lost, rep.allowed_resurrected);
    assert_true(rep.allowed_lost + rep.allowed_resurrected > 0);
    s->passed = true;
}

/* Two data nodes and a witness: the standby dies, the primary goes on with
 * the witness's floor, then dies too. The standby, restarted, lacks what
 * the primary and the witness acknowledged: the witness refuses to elect
 * it. The old primary, restarted, is elected; nothing is lost. */
static void witness_second_failure_elects_only_the_complete_node(void **state)
{
    suite_t *s = *state;
    bqc_view_t v;
    size_t p = start_cluster(s, WITNESS, NULL), b = other_data(s, p);
    bqw_start(s->w);
    bqw_wait_acks(s->w, 100);
    bqw_node_kill(s->w, b);
    wait_sync(s, p, "degraded");
    bqw_wait_acks(s->w, 200); /* acknowledged by the primary and the witness */
    bqw_node_kill(s->w, p);
    bqw_stop(s->w);
    node_up(s, b);
    /* Several election timeouts: the witness refuses every time. */
    bqc_wait_log(s->c, 2, "election: vote requested", "below our floor", 3, BQC_WAIT_MS);
    assert_int_equal(bqc_log_count(s->c, b, "election: won", NULL), 0);
    node_up(s, p);
    size_t q = bqw_wait_primary(s->w, -1, &v);
    assert_int_equal(q, p);
    bqw_wait_streaming(s->w, b, false);
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

/* Two data nodes and a witness, --sync-timeout 10 s: the primary dies, the
 * standby is elected and, before any write of its epoch is acknowledged,
 * dies too. The witness has heard the new primary (its heartbeats) but
 * was promised nothing of the new epoch, so the old primary, restarted, is
 * elected again and nothing is lost. */
static void witness_new_primary_dies_before_writes(void **state)
{
    suite_t *s = *state;
    static const char *const slow[] = {"--role=standby", "--failover=auto", "--witness", "n3",
                                       "--sync-timeout", "10000",           NULL};
    bqc_view_t v;
    make(s, WITNESS, NULL);
    s->flags[0] = s->flags[1] = slow;
    for (size_t i = 0; i < 3; i++)
        node_up(s, i);
    size_t p = bqw_wait_settled(s->w, 1u << 2, &v), b = other_data(s, p);
    bqw_start(s->w);
    bqw_wait_acks(s->w, 100);
    bqw_stop(s->w);
    bqw_node_kill(s->w, p);
    bqc_wait_log(s->c, b, "role change in place", "role=primary", 1, BQC_WAIT_MS);
    char heard[64];
    snprintf(heard, sizeof heard, "primary=%s", name_of(s, b));
    bqc_wait_log(s->c, 2, "replication: following the primary", heard, 1, BQC_WAIT_MS);
    bqc_wait_log(s->c, 2, "election: the primary is known", heard, 1, BQC_WAIT_MS);
    struct timespec beat = {0, 600 * 1000000}; /* a few heartbeats reach the witness */
    nanosleep(&beat, NULL);
    wait_sync(s, b, "waiting");
    bqw_node_kill(s->w, b);
    node_up(s, p);
    assert_int_equal(bqw_wait_primary(s->w, (int)b, &v), p);
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

/* ---- a large queue ---- */

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* Puts n jobs of 100 bytes into tube "bulk" through fd, 1000 in flight. */
static void fill(int fd, long n)
{
    static char cmd[1000 * 128];
    char body[101];
    memset(body, 'x', 100);
    body[100] = '\0';
    char *r = bqc_ask(fd, "use bulk\r\n", BQC_REPLY_MS);
    assert_string_equal(r, "USING bulk\r\n");
    free(r);
    for (long done = 0; done < n;) {
        long k = n - done < 1000 ? n - done : 1000;
        size_t len = 0;
        for (long j = 0; j < k; j++)
            len += (size_t)snprintf(cmd + len, sizeof cmd - len, "put 0 0 600 100\r\n%s\r\n", body);
        bqt_send(fd, cmd, len);
        for (long j = 0; j < k; j++) {
            char *line = bqt_read_line(fd, BQC_REPLY_MS);
            if (!line || strncmp(line, "INSERTED ", 9) != 0)
                fail_msg("filling: put %ld answered \"%s\"", done + j, line ? line : "nothing");
            free(line);
        }
        done += k;
    }
}

static long long bulk_ready(int fd)
{
    return bqt_stat_int(fd, "stats-tube bulk\r\n", "current-jobs-ready");
}

typedef struct caught_up {
    suite_t *s;
    size_t p, b;
} caught_up_t;

/* Node b applied everything the primary p logged. */
static bool standby_caught_up(void *arg)
{
    caught_up_t *cu = arg;
    bqc_view_t v;
    int fd = bqt_connect(cu->s->c->node[cu->p].srv.port);
    char *r = fd >= 0 ? bqc_ask(fd, "stats\r\n", BQW_PROBE_MS) : NULL;
    bool ok = bqc_view_parse(r, &v) == 0;
    int k = ok ? bqc_view_standby(&v, cu->s->c->node[cu->b].name) : -1;
    free(r);
    if (fd >= 0)
        close(fd);
    return k >= 0 && !strcmp(v.sb[k].state, "streaming") && v.sb[k].applied == v.last_lsn;
}

/* Two data nodes and a witness holding a million jobs: the standby dies and
 * writes go on within the bound; it comes back, resumes from its log (no
 * resync), catches up, sync is back, and both nodes hold every job. */
static void witness_large_queue_standby_away(void **state)
{
    suite_t *s = *state;
    long jobs = env_long("BQ_DEGRADED_JOBS", LARGE_JOBS);
    size_t p = start_cluster(s, WITNESS, NULL), b = other_data(s, p);
    int fd = bqt_client(&s->c->node[p].srv);
    long long t0 = bqt_now_ms();
    fill(fd, jobs);
    fprintf(stderr, "large queue: %ld jobs in %lld ms\n", jobs, bqt_now_ms() - t0);
    bqw_start(s->w);
    kill_and_time(s, b, "a million jobs, standby killed", STANDBY_LOST_MAX_MS);
    fill(fd, 1000);
    node_up(s, b);
    bqc_wait_log(s->c, p, "replication: standby connected", "start=resume", 1, BQC_WAIT_MS);
    caught_up_t cu = {s, p, b};
    if (!bqt_wait_until(standby_caught_up, &cu, BQC_WAIT_MS))
        fail_msg("the standby did not catch up within %d ms", BQC_WAIT_MS);
    wait_sync(s, p, "sync");
    assert_int_equal(bulk_ready(fd), jobs + 1000);
    close(fd);
    bqh_foreign_jobs(bqw_history(s->w), (uint64_t)jobs + 1000);
    bqw_check(s->w, p, NULL, NULL);
    /* The standby, alone on its directory, holds every job too. */
    bqc_signal(s->c, b, SIGTERM);
    bqt_server_t one;
    const char *const args[] = {"-b", s->c->node[b].bdir, NULL};
    assert_int_equal(bqt_server_start(&one, bqt_our_binary(), args), 0);
    int sfd = bqt_client(&one);
    assert_int_equal(bulk_ready(sfd), jobs + 1000);
    close(sfd);
    bqt_server_stop(&one);
    s->passed = true;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(pair_standby_lost),
        T(witness_standby_lost),
        T(trio_standby_lost),
        T(witness_lost),
        T(pair_primary_lost),
        T(witness_primary_lost),
        T(stalled_standby_put_gets_reply),
        T(strict_refuses_and_loses_nothing),
        T(pair_second_failure_loses_only_the_window),
        T(witness_second_failure_elects_only_the_complete_node),
        T(witness_new_primary_dies_before_writes),
        T(witness_large_queue_standby_away),
    };
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("degraded", tests, group_setup, group_teardown);
}
