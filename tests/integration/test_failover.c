/* Automatic failover end to end: three beanstalkd-ha nodes (n1, n2, n3) on
 * loopback with --failover=auto, -f 0 and the default sync mode, over TLS
 * with certificates from deploy/mkcerts, started and watched through
 * tests/support/cluster.h. Every node starts as a standby and the voters
 * elect the primary; clients may use any node (standbys proxy them to the
 * primary), so a put acknowledged through any node shows that a primary
 * exists, and `stats` on that same connection names it (cluster-node-id,
 * cluster-epoch). A node's own role is read from its log ("cluster start"
 * role=... at a start, "role change in place" role=... after an election
 * or a step-down, "fenced").
 *
 * Workers put and delete concurrently through any live node, reconnecting
 * to another one when a connection dies or a put is refused, and record
 * every operation in a tests/support/history.h history; each case ends by
 * checking a snapshot of the primary against it (nothing acknowledged lost,
 * nothing deleted back). Cases: kill -9 of the primary under load (the
 * failover time is printed), the killed node rejoining as a standby whose
 * binlog then matches the primary's, a paused (SIGSTOP) primary that must
 * not acknowledge after it resumes, a primary cut off by the fault proxy
 * (tests/support/faultproxy.h) that is fenced and steps aside once the
 * links heal, two data nodes and a witness, and random_fault_rounds: round
 * after round, under load, one fault drawn by a seeded PRNG (kill -9, SIGSTOP,
 * partitions whole or partial, one-way loss, a standby's crash, switchovers
 * through the admin API, one whose target crashes), each followed by a wait
 * for the cluster to be whole again; the history is checked at the end.
 * BQ_FAILOVER_ROUNDS sets its number of rounds (20), BQ_FAILOVER_SEED
 * replays a run's choices (the seed is printed; timing is not replayed),
 * BQ_FAILOVER_FAULTS=kill-primary,switchover... draws from those kinds only.
 * The rounds carry a queue of BQ_FAILOVER_QUEUE jobs (20,000; the soak uses
 * 1,000,000) in a tube of their own, put before the first round and
 * counted whole on the last primary.
 *
 * A failed case keeps its work directory (binlogs, every node's logs) and
 * prints where it is. BQT_FILTER='name*' runs some cases only. */
#include <setjmp.h>
#include <dirent.h>
#include <poll.h>
#include <sys/wait.h>
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
#include "tests/support/faultproxy.h"
#include "tests/support/history.h"
#include "tests/support/workload.h"

#ifndef BQ_MKCERTS
#error "BQ_MKCERTS must name deploy/mkcerts"
#endif

#define NODES 3
#define KILL9_WORKERS 4
#define FAILOVER_TIMEOUT_MS 1000 /* the default --failover-timeout */
#define FAILOVER_MAX_MS 10000    /* a generous bound; the target is 3 s */
#define HELD_MS 5000             /* for the reply of a put to a resumed or fenced primary */
#define HOLD_BOUND_MS 5000       /* max(5 s, 4 x the failover timeout): a standby holds clients */
#define AFTER_ACKS 50            /* puts acknowledged after a failover before it counts as over */
#define TUBE "fo"

static char g_certs[160];
static const char *const g_names[NODES] = {"n1", "n2", "n3"};
static const char *const auto_flags[] = {"--role=standby", "--failover=auto", "-f", "0", NULL};

typedef struct suite {
    bqc_cluster_t *c;
    bqw_t *w;                      /* the workers, probes and the history */
    bqt_proxy_t *px[NODES][NODES]; /* px[i][j]: node i's link to node j, when routed */
    struct round *rounds;          /* random_fault_rounds' record, freed by teardown */
    bool passed;
} suite_t;

/* ---- set-up ---- */

static int group_setup(void **state)
{
    (void)state;
    return bqc_certs_make(BQ_MKCERTS, g_certs, sizeof g_certs, g_names, NODES);
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
    s->c = bqc_new("bq-failover", NODES, g_names, g_certs);
    s->w = s->c ? bqw_new(s->c, TUBE, KILL9_WORKERS) : NULL;
    if (!s->w) {
        bqc_finish(s->c, true);
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    suite_t *s = *state;
    bqw_stop(s->w);
    bqc_finish(s->c, s->passed);
    for (size_t i = 0; i < NODES; i++)
        for (size_t j = 0; j < NODES; j++)
            bqt_proxy_stop(s->px[i][j]);
    bqw_free(s->w);
    free(s->rounds);
    free(s);
    return 0;
}

/* ---- nodes ---- */

static const char *name_of(suite_t *s, size_t i)
{
    return s->c->node[i].name;
}

/* Starts (or restarts) node i with the cluster's flags; workers may use it. */
static void node_up(suite_t *s, size_t i)
{
    bqw_node_up(s->w, i, auto_flags);
}

static void start_all(suite_t *s)
{
    for (size_t i = 0; i < NODES; i++)
        node_up(s, i);
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* With the workers running, waits for `more` acknowledged puts, kills the
 * primary p with SIGKILL, and waits until puts sent after the kill are
 * acknowledged (AFTER_ACKS of them); returns the time from the kill to the
 * first of them, in ms. */
static long long kill_primary_under_load(suite_t *s, size_t p, unsigned long more)
{
    bqw_wait_acks(s->w, more);
    bqh_mark(bqw_history(s->w), "kill -9 of the primary %s after %lu acknowledged puts",
             name_of(s, p), bqw_acked(s->w));
    bqw_node_kill(s->w, p);
    uint64_t t0 = bqw_recovery_arm(s->w);
    long long ms = bqw_recovery_wait(s->w, t0, "killing the primary");
    bqw_wait_acks(s->w, AFTER_ACKS);
    fprintf(stderr, "failover: %lld ms (primary %s killed)\n", ms, name_of(s, p));
    return ms;
}

/* ---- 1. a primary is elected, and replaced after kill -9 ---- */

static unsigned long random_target(unsigned long base, unsigned long spread)
{
    unsigned long seed = (unsigned long)bqt_now_ms() ^ ((unsigned long)getpid() << 8);
    return base + seed % spread;
}

static void auto_elects_and_fails_over(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    long long t0 = bqt_now_ms();
    start_all(s);
    size_t p = bqw_wait_primary(s->w, -1, &v0);
    fprintf(stderr, "first primary: %s, epoch %llu, %lld ms after the start\n", v0.node, v0.epoch,
            bqt_now_ms() - t0);
    assert_int_equal(bqc_log_count(s->c, p, "role change in place", "role=primary"), 1);
    bqw_start(s->w);
    long long ms = kill_primary_under_load(s, p, random_target(150, 200));
    size_t q = bqw_wait_primary(s->w, (int)p, &v1);
    fprintf(stderr, "new primary: %s, epoch %llu\n", v1.node, v1.epoch);
    assert_true(q != p);
    assert_true(v1.epoch > v0.epoch);
    bqc_wait_log(s->c, q, "election: won", NULL, 1, BQC_WAIT_MS);
    bqw_check(s->w, q, NULL, NULL);
    if (ms >= FAILOVER_MAX_MS)
        fail_msg("the failover took %lld ms, want < %d", ms, FAILOVER_MAX_MS);
    s->passed = true;
}

/* ---- 2. the killed primary rejoins as a standby ---- */

static void killed_primary_rejoins(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    start_all(s);
    size_t p = bqw_wait_primary(s->w, -1, &v0);
    bqw_start(s->w);
    kill_primary_under_load(s, p, random_target(50, 100));
    size_t q = bqw_wait_primary(s->w, (int)p, &v1);
    node_up(s, p); /* the same flags, a new client port */
    bqc_wait_log(s->c, p, "cluster start", "role=standby", 1, BQC_WAIT_MS);
    bqw_wait_streaming(s->w, p, false);
    bqw_wait_acks(s->w, 100); /* more writes with it back, some of them through it */
    size_t present = bqw_check(s->w, q, NULL, NULL);
    for (size_t i = 0; i < NODES; i++)
        if (i != q)
            bqw_wait_streaming(s->w, i, true);
    assert_int_equal(bqc_log_count(s->c, p, "cluster start", "role=primary"), 0);
    for (size_t i = 0; i < NODES; i++) /* the standbys first: no election meanwhile */
        if (i != q)
            bqc_signal(s->c, i, SIGTERM);
    bqc_signal(s->c, q, SIGTERM);
    size_t nids;
    const unsigned long long *ids = bqw_ids(s->w, &nids);
    size_t found = bqc_compare_dirs(s->c->node[q].bdir, s->c->node[p].bdir, ids, nids);
    fprintf(stderr, "%zu of %zu acknowledged ids in both directories, %zu jobs in all\n", found,
            nids, present);
    assert_true(found > 0 && found <= present);
    s->passed = true;
}

/* ---- 3. a paused primary does not acknowledge after it resumes ---- */

typedef struct until {
    long long at;
} until_t;

static bool time_reached(void *arg)
{
    return bqt_now_ms() >= ((until_t *)arg)->at;
}

static void paused_primary_is_fenced(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    unsigned long long id = 0;
    char err[160] = "";
    start_all(s);
    size_t p = bqw_wait_primary(s->w, -1, &v0);
    int fd = bqw_client(s->w, p);
    size_t standby_starts = bqc_log_count(s->c, p, "role change in place", "role=standby");
    until_t resume = {bqt_now_ms() + 3 * FAILOVER_TIMEOUT_MS};
    bqh_fault(bqw_history(s->w), "SIGSTOP of the primary %s", name_of(s, p));
    bqt_server_signal(&s->c->node[p].srv, SIGSTOP);
    size_t q = bqw_wait_primary(s->w, (int)p, &v1);
    assert_true(q != p && v1.epoch > v0.epoch);
    assert_true(bqt_wait_until(time_reached, &resume, BQC_WAIT_MS));
    bqh_mark(bqw_history(s->w), "SIGCONT of %s", name_of(s, p));
    bqt_server_signal(&s->c->node[p].srv, SIGCONT);
    bqh_outcome_t out = bqw_put(s->w, fd, HELD_MS, &id, err, sizeof err);
    /* It may wait while the old primary steps down, then go on to the new
     * primary with the client (proxied): acknowledged there, never here. */
    bqc_view_t by = {0};
    char *st = out == BQH_ACKED ? bqc_ask(fd, "stats\r\n", HELD_MS) : NULL;
    if (st && bqc_view_parse(st, &by) != 0)
        by.node[0] = '\0';
    free(st);
    close(fd);
    fprintf(stderr, "a put to the resumed old primary: %s%s\n",
            out == BQH_ACKED     ? "INSERTED by "
            : out == BQH_UNKNOWN ? "no reply"
            : err[0]             ? err
                                 : "DRAINING",
            out == BQH_ACKED ? by.node : "");
    if (out == BQH_ACKED && strcmp(by.node, name_of(s, q)) != 0)
        fail_msg("the old primary %s acknowledged a put (id %llu) after it resumed (the "
                 "connection's stats name \"%s\")",
                 name_of(s, p), id, by.node);
    /* Fenced at once on its first read after the pause: DRAINING (or the
     * connection closes as it restarts), never anything else. */
    if (err[0])
        fail_msg("the resumed old primary %s answered %s", name_of(s, p), err);
    bqc_wait_log(s->c, p, "role change in place", "role=standby", standby_starts + 1, BQC_WAIT_MS);
    assert_int_equal(bqc_log_count(s->c, p, "restarting", NULL), 0);
    bqw_wait_streaming(s->w, p, false);
    bqw_check(s->w, q, NULL, NULL);
    s->passed = true;
}

/* ---- 4. a primary cut off from both standbys steps aside ---- */

/* Every replication link goes through a proxy: px[i][j] carries what node
 * i opens to node j. */
static void route_through_proxies(suite_t *s)
{
    for (size_t i = 0; i < NODES; i++)
        for (size_t j = 0; j < NODES; j++) {
            if (i == j)
                continue;
            s->px[i][j] = bqt_proxy_start("127.0.0.1", s->c->node[j].repl_port);
            assert_non_null(s->px[i][j]);
            s->c->route[i][j] = bqt_proxy_port(s->px[i][j]);
        }
}

/* Sets every link between node p and the others, both ways, to mode. */
static void cut_links(suite_t *s, size_t p, bqt_proxy_mode_t mode)
{
    for (size_t x = 0; x < NODES; x++)
        if (x != p) {
            bqt_proxy_set(s->px[x][p], mode);
            bqt_proxy_set(s->px[p][x], mode);
        }
}

/* Sends cmd on fd and expects a reply starting with want. */
static void expect_reply(int fd, const char *cmd, const char *want)
{
    char *r = bqc_ask(fd, cmd, HELD_MS);
    if (!r || strncmp(r, want, strlen(want)) != 0)
        fail_msg("\"%.*s\": got \"%.*s\", want \"%s...\"", (int)strcspn(cmd, "\r"), cmd,
                 r ? (int)strcspn(r, "\r") : 7, r ? r : "nothing", want);
    free(r);
}

static void partitioned_primary_steps_aside(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    unsigned long long id = 0;
    char err[160] = "";
    route_through_proxies(s);
    start_all(s);
    size_t p = bqw_wait_primary(s->w, -1, &v0);
    int fd = bqw_client(s->w, p);
    size_t standby_starts = bqc_log_count(s->c, p, "role change in place", "role=standby");
    bqh_fault(bqw_history(s->w), "links of the primary %s dropped", name_of(s, p));
    cut_links(s, p, BQT_PROXY_DROP);
    bqc_wait_log(s->c, p, "fenced: no majority", NULL, 1, BQC_WAIT_MS);
    bqh_outcome_t out = bqw_put(s->w, fd, HELD_MS, &id, err, sizeof err);
    if (out != BQH_REFUSED || err[0])
        fail_msg("a put to the fenced primary: %s, want DRAINING", out == BQH_ACKED     ? "INSERTED"
                                                                   : out == BQH_UNKNOWN ? "no reply"
                                                                                        : err);
    expect_reply(fd, "stats\r\n", "OK ");
    expect_reply(fd, "list-tubes\r\n", "OK ");
    size_t q = bqw_wait_primary(s->w, (int)p, &v1);
    assert_true(q != p && v1.epoch > v0.epoch);
    bqh_mark(bqw_history(s->w), "links healed");
    cut_links(s, p, BQT_PROXY_PASS);
    bqc_wait_log(s->c, p, "role change in place", "role=standby", standby_starts + 1, BQC_WAIT_MS);
    close(fd);
    bqw_wait_streaming(s->w, p, false);
    bqw_check(s->w, q, NULL, NULL);
    s->passed = true;
}

/* ---- 4b. an old primary's unacknowledged tail is cut when it rejoins ---- */

/* The number after "key: " in node i's `stats` (0 when absent; a
 * standby's clients are proxied: the primary's). */
static unsigned long long stat_number(suite_t *s, size_t i, const char *key)
{
    int fd = bqw_client(s->w, i);
    char *r = fd >= 0 ? bqc_ask(fd, "stats\r\n", HELD_MS) : NULL;
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    const char *at = r ? strstr(r, pat) : NULL;
    unsigned long long v = at ? strtoull(at + strlen(pat), NULL, 10) : 0;
    free(r);
    if (fd >= 0)
        close(fd);
    return v;
}

typedef struct lsn_wait {
    suite_t *s;
    size_t i;
    unsigned long long above;
} lsn_wait_t;

static bool lsn_above(void *arg)
{
    lsn_wait_t *w = arg;
    return stat_number(w->s, w->i, "cluster-last-lsn") > w->above;
}

/* The files of dir whose name contains part. */
static size_t files_named(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strstr(de->d_name, part) != NULL;
    if (d)
        closedir(d);
    return n;
}

/* The primary, cut off, logs a put nobody else gets, then dies; the others
 * elect a new primary. The old one comes back: its log forked, and it is
 * cut back to the fork point (moved aside, reported in /status), not
 * resynced; nothing acknowledged is lost. */
static void forked_tail_is_cut_on_rejoin(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    route_through_proxies(s);
    start_all(s);
    size_t p = bqw_wait_primary(s->w, -1, &v0);
    bqw_start(s->w);
    bqw_wait_acks(s->w, 100);
    int fd = bqw_client(s->w, p);
    lsn_wait_t lw = {s, p, 0};
    bqh_fault(bqw_history(s->w), "links of the primary %s dropped", name_of(s, p));
    cut_links(s, p, BQT_PROXY_DROP);
    lw.above = stat_number(s, p, "cluster-last-lsn");
    /* Never acknowledged (no standby has it): it must not come back. */
    bqt_sends(fd, "use " TUBE "-forked\r\nput 0 0 60 6\r\nforked\r\n");
    if (!bqt_wait_until(lsn_above, &lw, BQC_WAIT_MS))
        fail_msg("the cut-off primary %s never logged the put", name_of(s, p));
    bqh_mark(bqw_history(s->w), "kill -9 of the cut-off primary %s", name_of(s, p));
    bqw_node_kill(s->w, p);
    close(fd);
    size_t q = bqw_wait_primary(s->w, (int)p, &v1);
    assert_true(q != p && v1.epoch > v0.epoch);
    bqh_mark(bqw_history(s->w), "links healed, %s restarted", name_of(s, p));
    cut_links(s, p, BQT_PROXY_PASS);
    node_up(s, p);
    bqc_wait_log(s->c, p, "binlog: forked tail moved aside", NULL, 1, BQC_WAIT_MS);
    bqw_wait_streaming(s->w, p, true);
    /* (a standby's own stats are out of reach: its clients are proxied) */
    assert_int_equal(bqc_log_count(s->c, p, "following the primary", "start=cut"), 1);
    assert_int_equal(bqc_log_count(s->c, p, "following the primary", "start=resync"), 0);
    assert_true(files_named(s->c->node[p].bdir, ".forked-") >= 1);
    bqw_wait_acks(s->w, 100);
    bqw_check(s->w, q, NULL, NULL);
    /* The forked put is nowhere: its tube has no job on the new primary. */
    int fq = bqw_client(s->w, q);
    expect_reply(fq, "stats-tube " TUBE "-forked\r\n", "NOT_FOUND");
    close(fq);
    s->passed = true;
}

/* ---- 5. two data nodes and a witness ---- */

/* Writes stay available on one data node (degraded): the witness gives the
 * third vote, never leads, and stores no job. */
static const char *const witness_data_flags[] = {"--role=standby",
                                                 "--failover=auto",
                                                 "-f",
                                                 "0",
                                                 "--witness",
                                                 "n3",
                                                 "--sync-timeout",
                                                 "300",
                                                 NULL};
static const char *const witness_flags[] = {"--role=witness", "--failover=auto", NULL};

static void witness_breaks_the_tie(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    for (size_t i = 0; i < NODES; i++) {
        bqc_start(s->c, i, i == 2 ? witness_flags : witness_data_flags);
        bqw_node_offer(s->w, i, true); /* the witness proxies too */
    }
    size_t p = bqw_wait_primary(s->w, -1, &v0);
    assert_true(p != 2);
    bqw_start(s->w);
    long long ms = kill_primary_under_load(s, p, random_target(150, 200));
    size_t q = bqw_wait_primary(s->w, (int)p, &v1);
    fprintf(stderr, "with a witness: new primary %s, epoch %llu, after %lld ms\n", v1.node,
            v1.epoch, ms);
    assert_true(q != p && q != 2);
    assert_true(v1.epoch > v0.epoch);
    assert_true(bqc_log_count(s->c, 2, "cluster start", "role=witness") >= 1);
    assert_true(bqc_log_count(s->c, 2, "election: vote requested", "granted=1") >= 2);
    assert_int_equal(bqc_log_count(s->c, 2, "election: won", NULL), 0);
    bqw_check(s->w, q, NULL, NULL);
    if (ms >= FAILOVER_MAX_MS)
        fail_msg("the failover took %lld ms, want < %d", ms, FAILOVER_MAX_MS);
    s->passed = true;
}

/* ---- 6. random faults, round after round ---- */

#define DEFAULT_ROUNDS 20
#define HTTP_TEXT 160

typedef enum fault {
    KILL_PRIMARY,    /* kill -9 of the primary, restarted: it rejoins as a standby */
    STOP_PRIMARY,    /* SIGSTOP of the primary, SIGCONT: it acknowledges nothing, steps down */
    ISOLATE_PRIMARY, /* its links to both standbys dropped or black-holed, then healed */
    CUT_ONE_STANDBY, /* its links to one standby cut: nothing changes */
    ONE_WAY_LOSS,    /* what it sends to the standbys held: fenced, replaced, steps down */
    KILL_STANDBY,    /* kill -9 of a standby, restarted: nothing changes */
    SWITCHOVER,      /* POST /switchover?to=STANDBY on the primary: 200, the target leads */
    SWITCHOVER_KILL, /* the same, and kill -9 of the target 0-39 ms after the request */
    FAULTS           /* count */
} fault_t;

static const char *const fault_name[FAULTS] = {
    "kill-primary", "stop-primary", "isolate-primary", "cut-one-standby",
    "one-way-loss", "kill-standby", "switchover",      "switchover-kill",
};

/* One round: its choices (all drawn before it runs, so that a seed replays
 * them whatever happens), the cluster before it and what it took. */
typedef struct round {
    fault_t kind;
    size_t p;              /* the primary before the fault */
    size_t other;          /* a standby: the one cut, killed, or the target */
    long long hold_ms;     /* how long a pause or a cut lasts at least: 2-3 timeouts */
    bqt_proxy_mode_t cut;  /* DROP or BLACKHOLE, for the cuts */
    int kill_after_ms;     /* switchover-kill: from the request to the kill, 0-39 */
    bqc_view_t before;     /* the primary's view before the fault */
    size_t q;              /* the primary once writes are acknowledged again */
    bqc_view_t after;      /* its view */
    long long recovery_ms; /* from the fault to the first acknowledged put sent after it */
    long long round_ms;    /* the whole round, until the cluster was whole again */
    int http;              /* a switchover's status (0: the connection closed) */
    char text[HTTP_TEXT];  /* and its body */
} round_t;

/* splitmix64: the whole state is the seed, so a printed seed replays. */
static uint64_t rng_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static unsigned rng_below(uint64_t *x, unsigned n)
{
    return (unsigned)(rng_next(x) % n);
}

/* Faults are drawn from a bag holding each kind once, refilled and
 * shuffled when empty: every kind comes up in any FAULTS rounds in a row
 * (the default 20 rounds see each two or three times), in a random order.
 * The bag holds the kinds in `kinds` only (BQ_FAILOVER_FAULTS). */
typedef struct planner {
    uint64_t rng;
    unsigned kinds; /* bit k: fault k may be drawn */
    fault_t bag[FAULTS];
    size_t left;
} planner_t;

/* The kinds named in list (comma-separated fault names); NULL, "" or
 * "all": every one. */
static unsigned parse_kinds(const char *list)
{
    unsigned kinds = 0;
    if (!list || !*list || strcmp(list, "all") == 0)
        return (1u << FAULTS) - 1;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ","), k = 0;
        while (k < FAULTS && (strlen(fault_name[k]) != len || strncmp(p, fault_name[k], len)))
            k++;
        if (k == FAULTS)
            fail_msg("BQ_FAILOVER_FAULTS: unknown fault \"%.*s\" (kill-primary, stop-primary, "
                     "isolate-primary, cut-one-standby, one-way-loss, kill-standby, "
                     "switchover, switchover-kill)",
                     (int)len, p);
        kinds |= 1u << k;
        p += len + (p[len] == ',');
    }
    return kinds;
}

/* Refills the bag with the chosen kinds, shuffled. */
static void refill(planner_t *pl)
{
    pl->left = 0;
    for (size_t k = 0; k < FAULTS; k++)
        if (pl->kinds & (1u << k))
            pl->bag[pl->left++] = (fault_t)k;
    for (size_t i = pl->left - 1; i > 0; i--) {
        size_t j = rng_below(&pl->rng, (unsigned)i + 1);
        fault_t t = pl->bag[i];
        pl->bag[i] = pl->bag[j];
        pl->bag[j] = t;
    }
}

static void plan_round(planner_t *pl, round_t *rd, const round_t *last)
{
    size_t p = last->q;
    if (pl->left == 0)
        refill(pl);
    size_t sb[NODES - 1], n = 0;
    for (size_t i = 0; i < NODES; i++)
        if (i != p)
            sb[n++] = i;
    *rd = (round_t){.kind = pl->bag[--pl->left], .p = p, .before = last->after};
    rd->q = p; /* unless the round changes them */
    rd->after = last->after;
    rd->other = sb[rng_below(&pl->rng, NODES - 1)];
    rd->hold_ms = 2 * FAILOVER_TIMEOUT_MS + rng_below(&pl->rng, FAILOVER_TIMEOUT_MS + 1);
    rd->cut = rng_below(&pl->rng, 2) ? BQT_PROXY_DROP : BQT_PROXY_BLACKHOLE;
    rd->kill_after_ms = (int)rng_below(&pl->rng, 40);
}

/* A primary other than the old one acknowledges puts, in a later epoch. */
static void expect_new_primary(suite_t *s, round_t *rd)
{
    rd->q = bqw_wait_primary(s->w, (int)rd->p, &rd->after);
    if (rd->after.epoch <= rd->before.epoch)
        fail_msg("the new primary %s is in epoch %llu, not above %llu", rd->after.node,
                 rd->after.epoch, rd->before.epoch);
}

/* The primary and its epoch did not change. */
static void expect_same_primary(suite_t *s, round_t *rd)
{
    rd->q = bqw_wait_primary(s->w, -1, &rd->after);
    if (rd->q != rd->p || rd->after.epoch != rd->before.epoch)
        fail_msg("the primary is %s in epoch %llu, want %s still, in epoch %llu", rd->after.node,
                 rd->after.epoch, rd->before.node, rd->before.epoch);
}

/* After a fault whose outcome is open (which node leads, in which epoch):
 * waits until one primary has both other nodes streaming from it, and
 * records it in rd. */
static void settle(suite_t *s, round_t *rd)
{
    rd->q = bqw_wait_settled(s->w, 0, &rd->after);
}

/* Waits for the resumed, healed or replaced old primary i to become a
 * standby in place; downs: its such lines before the fault. */
static void wait_stepped_down(suite_t *s, size_t i, size_t downs)
{
    bqc_wait_log(s->c, i, "role change in place", "role=standby", downs + 1, BQC_WAIT_MS);
}

static size_t fenced_lines(suite_t *s, size_t i)
{
    return bqc_log_count(s->c, i, "fenced: no majority", NULL);
}

static size_t step_down_lines(suite_t *s, size_t i)
{
    return bqc_log_count(s->c, i, "role change in place", "role=standby");
}

/* Restarts the killed node i; it must come back as a standby. */
static void rejoin(suite_t *s, size_t i)
{
    node_up(s, i);
    bqc_wait_log(s->c, i, "cluster start", "role=standby", 1, BQC_WAIT_MS);
}

static void hold_until(long long at)
{
    until_t u = {at};
    assert_true(bqt_wait_until(time_reached, &u, BQC_WAIT_MS));
}

static void f_kill_primary(suite_t *s, round_t *rd)
{
    bqw_node_kill(s->w, rd->p);
    uint64_t t0 = bqw_recovery_arm(s->w);
    expect_new_primary(s, rd);
    rd->recovery_ms = bqw_recovery_wait(s->w, t0, "killing the primary");
    if (rd->recovery_ms >= FAILOVER_MAX_MS)
        fail_msg("the failover took %lld ms, want < %d", rd->recovery_ms, FAILOVER_MAX_MS);
    rejoin(s, rd->p);
}

/* Paused for hold_ms, and at least until another primary took over; a put
 * sent to it once it runs again must not be acknowledged. Workers waiting
 * on it for a reply are stuck until then, so probes (which count) show the
 * recovery. */
static void f_stop_primary(suite_t *s, round_t *rd)
{
    size_t p = rd->p, downs = step_down_lines(s, p);
    unsigned long long id = 0;
    char err[160] = "";
    int fd = bqw_client(s->w, p);
    long long resume = bqt_now_ms() + rd->hold_ms;
    bqw_node_offer(s->w, p, false); /* new connections would wait in its backlog */
    bqt_server_signal(&s->c->node[p].srv, SIGSTOP);
    uint64_t t0 = bqw_recovery_arm(s->w);
    expect_new_primary(s, rd);
    rd->recovery_ms = bqw_recovery_wait(s->w, t0, "stopping the primary");
    hold_until(resume);
    bqh_mark(bqw_history(s->w), "SIGCONT of %s", name_of(s, p));
    bqt_server_signal(&s->c->node[p].srv, SIGCONT);
    bqw_node_offer(s->w, p, true);
    bqh_outcome_t out = bqw_put(s->w, fd, HELD_MS, &id, err, sizeof err);
    close(fd);
    if (out == BQH_ACKED)
        fail_msg("the old primary %s acknowledged a put (id %llu) after it resumed", name_of(s, p),
                 id);
    if (err[0])
        fail_msg("the resumed old primary %s answered %s", name_of(s, p), err);
    wait_stepped_down(s, p, downs);
}

/* The primary p loses its majority by cut(s, rd, true): it is fenced and
 * the others elect another; healed by cut(s, rd, false) after hold_ms, it
 * steps down. what names the fault for the recovery line. */
static void fence_and_replace(suite_t *s, round_t *rd, const char *what,
                              void (*cut)(suite_t *s, const round_t *rd, bool on))
{
    size_t p = rd->p, fenced = fenced_lines(s, p), downs = step_down_lines(s, p);
    long long heal = bqt_now_ms() + rd->hold_ms;
    cut(s, rd, true);
    uint64_t t0 = bqw_recovery_arm(s->w);
    expect_new_primary(s, rd);
    rd->recovery_ms = bqw_recovery_wait(s->w, t0, what);
    bqc_wait_log(s->c, p, "fenced: no majority", NULL, fenced + 1, BQC_WAIT_MS);
    hold_until(heal);
    bqh_mark(bqw_history(s->w), "links healed");
    cut(s, rd, false);
    wait_stepped_down(s, p, downs);
}

/* Both links of the primary to each standby drop or blackhole (rd->cut). */
static void isolate(suite_t *s, const round_t *rd, bool on)
{
    cut_links(s, rd->p, on ? rd->cut : BQT_PROXY_PASS);
}

/* Cut off from both standbys: fenced, replaced; steps down once healed. */
static void f_isolate_primary(suite_t *s, round_t *rd)
{
    fence_and_replace(s, rd, "cutting the primary off", isolate);
}

/* Cut off from one standby only: a majority is still in contact, so the
 * primary stays, unfenced, in its epoch, and writes go on. */
static void f_cut_one_standby(suite_t *s, round_t *rd)
{
    size_t p = rd->p, x = rd->other, fenced = fenced_lines(s, p);
    long long heal = bqt_now_ms() + rd->hold_ms;
    bqt_proxy_set(s->px[x][p], rd->cut);
    bqt_proxy_set(s->px[p][x], rd->cut);
    uint64_t t0 = bqw_recovery_arm(s->w);
    rd->recovery_ms = bqw_recovery_wait(s->w, t0, "cutting one standby off");
    hold_until(heal);
    bqw_wait_acks(s->w, AFTER_ACKS); /* still, at the end of the cut */
    expect_same_primary(s, rd);
    if (fenced_lines(s, p) != fenced)
        fail_msg("the primary %s was fenced while one standby was in contact", name_of(s, p));
    bqh_mark(bqw_history(s->w), "links healed");
    bqt_proxy_set(s->px[x][p], BQT_PROXY_PASS);
    bqt_proxy_set(s->px[p][x], BQT_PROXY_PASS);
}

/* Holds what node p sends to the others (lose) or lets it pass again, on
 * the links they opened to it and on those it opened to them. */
static void lose_from(suite_t *s, size_t p, bool lose)
{
    for (size_t x = 0; x < NODES; x++)
        if (x != p) {
            bqt_proxy_set(s->px[x][p], lose ? BQT_PROXY_HOLD_DOWN : BQT_PROXY_PASS);
            bqt_proxy_set(s->px[p][x], lose ? BQT_PROXY_HOLD_UP : BQT_PROXY_PASS);
        }
}

/* What the primary sends is held (on), or passes again. */
static void lose(suite_t *s, const round_t *rd, bool on)
{
    lose_from(s, rd->p, on);
}

/* The standbys stop hearing the primary while it still hears them: their
 * acknowledgements echo old heartbeats, so it is fenced, and they elect
 * another; healed, it steps down. */
static void f_one_way_loss(suite_t *s, round_t *rd)
{
    fence_and_replace(s, rd, "losing what the primary sends", lose);
}

/* A standby dies: the other one and the primary's fsync make the
 * majority, nothing changes; restarted, it streams again. */
static void f_kill_standby(suite_t *s, round_t *rd)
{
    bqw_node_kill(s->w, rd->other);
    uint64_t t0 = bqw_recovery_arm(s->w);
    rd->recovery_ms = bqw_recovery_wait(s->w, t0, "killing a standby");
    expect_same_primary(s, rd);
    rejoin(s, rd->other);
}

/* Sends POST /switchover?to=<target> to the primary p's admin API. */
static bqa_conn_t *switchover_send(suite_t *s, size_t p, size_t target)
{
    char path[64];
    snprintf(path, sizeof path, "/switchover?to=%s", name_of(s, target));
    bqa_conn_t *a = bqc_admin_post(s->c, p, path);
    if (!a)
        fail_msg("cannot send %s to the admin API of %s", path, name_of(s, p));
    bqh_fault(bqw_history(s->w), "%s sent to %s", path, name_of(s, p));
    return a;
}

/* Writes pause from the request until the target leads, in the epoch it
 * stood for; recovery is timed from the request to the first put sent
 * after the reply and acknowledged (puts sent before the primary read the
 * request may still be acknowledged by it). */
static void f_switchover(suite_t *s, round_t *rd)
{
    size_t p = rd->p, downs = step_down_lines(s, p);
    uint64_t t0 = bqh_now_ns();
    bqa_conn_t *a = switchover_send(s, p, rd->other);
    rd->http = bqa_reply(a, BQC_WAIT_MS, rd->text, sizeof rd->text);
    bqa_close(a);
    if (rd->http != 200)
        fail_msg("switchover to %s: %d \"%s\", want 200", name_of(s, rd->other), rd->http,
                 rd->text);
    bqw_recovery_arm(s->w);
    expect_new_primary(s, rd);
    rd->recovery_ms = bqw_recovery_wait(s->w, t0, "the switchover");
    if (rd->q != rd->other || rd->after.epoch != rd->before.epoch + 1)
        fail_msg("after a switchover to %s the primary is %s in epoch %llu, want %s in %llu",
                 name_of(s, rd->other), rd->after.node, rd->after.epoch, name_of(s, rd->other),
                 rd->before.epoch + 1);
    wait_stepped_down(s, p, downs);
}

/* The target dies 0-39 ms after the request (before it caught up, after
 * Promote, or after it won: the handover takes a few ms): the request ends
 * (504 when the primary gives up, 409 when it refused, the connection
 * closing when it stepped down meanwhile, 200 when the target won before
 * it died), and the cluster is writable again, led by the old primary or
 * the third node. */
static void f_switchover_kill(suite_t *s, round_t *rd)
{
    size_t t = rd->other;
    uint64_t t0 = bqh_now_ns();
    bqa_conn_t *a = switchover_send(s, rd->p, t);
    if (rd->kill_after_ms)
        nap_ms(rd->kill_after_ms);
    bqw_node_kill(s->w, t);
    rd->http = bqa_reply(a, BQC_WAIT_MS, rd->text, sizeof rd->text);
    bqa_close(a);
    if (rd->http < 0)
        fail_msg("a switchover to %s, killed, did not end within %d ms", name_of(s, t),
                 BQC_WAIT_MS);
    if (rd->http != 504 && rd->http != 409 && rd->http != 200 && rd->http != 0)
        fail_msg("a switchover to %s, killed: %d \"%s\"", name_of(s, t), rd->http, rd->text);
    bqw_recovery_arm(s->w);
    rd->recovery_ms = bqw_recovery_wait(s->w, t0, "the switchover whose target died");
    rejoin(s, t);
    settle(s, rd);
    if (rd->after.epoch < rd->before.epoch)
        fail_msg("after a switchover to %s, killed, the primary %s is in epoch %llu, below %llu",
                 name_of(s, t), rd->after.node, rd->after.epoch, rd->before.epoch);
}

static void (*const fault_run[FAULTS])(suite_t *s, round_t *rd) = {
    f_kill_primary, f_stop_primary, f_isolate_primary, f_cut_one_standby,
    f_one_way_loss, f_kill_standby, f_switchover,      f_switchover_kill,
};

/* The cluster is whole: the workers' puts are acknowledged, both nodes
 * other than the primary rd->q stream from it, and it still leads, in the
 * same epoch (no election since). */
static void wait_whole(suite_t *s, const round_t *rd)
{
    bqc_view_t v;
    if (bqw_running(s->w))
        bqw_wait_acks(s->w, AFTER_ACKS);
    for (size_t i = 0; i < NODES; i++)
        if (i != rd->q)
            bqw_wait_streaming(s->w, i, false);
    size_t q = bqw_wait_primary(s->w, -1, &v);
    if (q != rd->q || v.epoch != rd->after.epoch)
        fail_msg("the primary is %s in epoch %llu, want %s in epoch %llu: an election without "
                 "a fault",
                 v.node, v.epoch, rd->after.node, rd->after.epoch);
}

static long env_long(const char *name, long dflt)
{
    const char *e = getenv(name);
    return e && *e ? strtol(e, NULL, 10) : dflt;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Per kind: rounds, median and worst recovery; switchover replies. */
static void print_summary(const round_t *rd, int rounds)
{
    long long *ms = malloc((size_t)rounds * sizeof *ms);
    int replies[4] = {0}; /* 200, 409, 504, closed */
    assert_non_null(ms);
    fprintf(stderr, "%-16s %6s %10s %10s (recovery: fault to first acknowledged put, ms)\n",
            "fault", "rounds", "median", "worst");
    for (int k = 0; k < FAULTS; k++) {
        size_t n = 0;
        for (int r = 0; r < rounds; r++)
            if (rd[r].kind == (fault_t)k)
                ms[n++] = rd[r].recovery_ms;
        qsort(ms, n, sizeof *ms, cmp_ll);
        if (n)
            fprintf(stderr, "%-16s %6zu %10lld %10lld\n", fault_name[k], n,
                    n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2, ms[n - 1]);
        else
            fprintf(stderr, "%-16s %6d %10s %10s\n", fault_name[k], 0, "-", "-");
    }
    for (int r = 0; r < rounds; r++)
        if (rd[r].kind == SWITCHOVER_KILL)
            replies[rd[r].http == 200 ? 0 : rd[r].http == 409 ? 1 : rd[r].http == 504 ? 2 : 3]++;
    fprintf(stderr, "switchover-kill replies: 200 x%d, 409 x%d, 504 x%d, closed x%d\n", replies[0],
            replies[1], replies[2], replies[3]);
    free(ms);
}

/* Prints the round's fault before it runs (a failing round is named
 * above the failure), without a newline... */
static void print_round_start(long r, long rounds, const round_t *rd)
{
    char who[48] = "";
    if (rd->kind == SWITCHOVER_KILL)
        snprintf(who, sizeof who, " to %s, killed after %d ms", g_names[rd->other],
                 rd->kill_after_ms);
    else if (rd->kind == SWITCHOVER)
        snprintf(who, sizeof who, " to %s", g_names[rd->other]);
    else if (rd->kind == CUT_ONE_STANDBY)
        snprintf(who, sizeof who, " %s (%s)", g_names[rd->other],
                 rd->cut == BQT_PROXY_DROP ? "drop" : "blackhole");
    else if (rd->kind == ISOLATE_PRIMARY)
        snprintf(who, sizeof who, " (%s)", rd->cut == BQT_PROXY_DROP ? "drop" : "blackhole");
    else if (rd->kind == KILL_STANDBY)
        snprintf(who, sizeof who, " %s", g_names[rd->other]);
    fprintf(stderr, "round %3ld/%ld %s%s (primary %s, epoch %llu):", r + 1, rounds,
            fault_name[rd->kind], who, rd->before.node, rd->before.epoch);
}

/* ...and what it took once the cluster is whole again. */
static void print_round_end(const round_t *rd)
{
    char http[HTTP_TEXT + 32] = "";
    if (rd->kind == SWITCHOVER || rd->kind == SWITCHOVER_KILL)
        snprintf(http, sizeof http, " reply %d \"%.*s\";", rd->http, (int)strcspn(rd->text, "\r\n"),
                 rd->text);
    fprintf(stderr, "%s writes again after %lld ms; primary %s, epoch %llu; round %lld ms\n", http,
            rd->recovery_ms, rd->after.node, rd->after.epoch, rd->round_ms);
}

#define DEFAULT_QUEUE 20000 /* jobs held through the rounds (BQ_FAILOVER_QUEUE) */
#define QUEUE_TUBE "held-queue"
#define QUEUE_BATCH 500

/* Puts n jobs of 100 bytes into QUEUE_TUBE through node i, pipelined in
 * batches: a queue the role changes carry, untouched by the workers. */
static void preload(suite_t *s, size_t i, long n)
{
    int fd = bqt_client(&s->c->node[i].srv);
    char body[101];
    memset(body, 'q', 100);
    body[100] = '\0';
    expect_reply(fd, "use " QUEUE_TUBE "\r\n", "USING ");
    long long t0 = bqt_now_ms();
    static char batch[QUEUE_BATCH * 128];
    for (long done = 0; done < n;) {
        size_t len = 0, k = 0;
        for (; k < QUEUE_BATCH && done + (long)k < n; k++)
            len += (size_t)sprintf(batch + len, "put 0 0 600 100\r\n%s\r\n", body);
        bqt_send(fd, batch, len);
        for (size_t j = 0; j < k; j++) {
            char *line = bqt_read_line(fd, BQC_WAIT_MS);
            if (!line || strncmp(line, "INSERTED ", 9) != 0)
                fail_msg("preloading the queue: %s", line ? line : "no reply");
            free(line);
        }
        done += (long)k;
    }
    close(fd);
    fprintf(stderr, "queue: %ld jobs of 100 bytes held in %s (%lld ms to put)\n", n, QUEUE_TUBE,
            bqt_now_ms() - t0);
}

/* The queue is whole on node i after the rounds. */
static void expect_queue(suite_t *s, size_t i, long n)
{
    int fd = bqt_client(&s->c->node[i].srv);
    long long ready = bqt_stat_int(fd, "stats-tube " QUEUE_TUBE "\r\n", "current-jobs-ready");
    close(fd);
    if (ready != n)
        fail_msg("the held queue has %lld jobs on the primary %s after the rounds, want %ld", ready,
                 name_of(s, i), n);
    fprintf(stderr, "queue: all %ld held jobs on the final primary %s\n", n, name_of(s, i));
}

static void random_fault_rounds(void **state)
{
    suite_t *s = *state;
    long rounds = env_long("BQ_FAILOVER_ROUNDS", DEFAULT_ROUNDS);
    const char *e = getenv("BQ_FAILOVER_SEED");
    uint64_t seed = e && *e ? strtoull(e, NULL, 10) : bqh_now_ns() ^ ((uint64_t)getpid() << 32);
    planner_t pl = {.rng = seed, .kinds = parse_kinds(getenv("BQ_FAILOVER_FAULTS"))};
    round_t whole = {0}, *rd;
    long long t_start = bqt_now_ms();
    assert_true(rounds > 0);
    rd = s->rounds = calloc((size_t)rounds, sizeof *rd);
    assert_non_null(rd);
    fprintf(stderr,
            "random_fault_rounds: %ld rounds, seed %llu (BQ_FAILOVER_SEED=%llu "
            "replays the same choices)%s%s\n",
            rounds, (unsigned long long)seed, (unsigned long long)seed,
            getenv("BQ_FAILOVER_FAULTS") ? ", faults: " : "",
            getenv("BQ_FAILOVER_FAULTS") ? getenv("BQ_FAILOVER_FAULTS") : "");
    for (size_t i = 0; i < NODES; i++)
        s->c->node[i].admin_port = bqt_free_port();
    route_through_proxies(s);
    start_all(s);
    whole.q = bqw_wait_primary(s->w, -1, &whole.after);
    wait_whole(s, &whole);
    long queue = env_long("BQ_FAILOVER_QUEUE", DEFAULT_QUEUE);
    if (queue > 0) {
        preload(s, whole.q, queue);
        bqh_foreign_jobs(bqw_history(s->w), (size_t)queue); /* not the workers' */
        wait_whole(s, &whole);
    }
    bqw_mix(s->w, true); /* half the workers: bury, release, kick... one at a time */
    bqw_start(s->w);
    for (long r = 0; r < rounds; r++) {
        const round_t *last = r ? &rd[r - 1] : &whole;
        long long t0 = bqt_now_ms();
        plan_round(&pl, &rd[r], last);
        bqh_fault(bqw_history(s->w), "round %ld: %s, primary %s, standby %s, %lld ms", r + 1,
                  fault_name[rd[r].kind], name_of(s, rd[r].p), name_of(s, rd[r].other),
                  rd[r].hold_ms);
        print_round_start(r, rounds, &rd[r]);
        fault_run[rd[r].kind](s, &rd[r]);
        wait_whole(s, &rd[r]);
        bqh_settled(bqw_history(s->w), "round %ld: the cluster is whole", r + 1);
        rd[r].round_ms = bqt_now_ms() - t0;
        print_round_end(&rd[r]);
    }
    bqw_check(s->w, rd[rounds - 1].q, NULL, NULL);
    if (queue > 0)
        expect_queue(s, rd[rounds - 1].q, queue);
    fprintf(stderr, "%ld rounds in %lld s, seed %llu\n", rounds, (bqt_now_ms() - t_start) / 1000,
            (unsigned long long)seed);
    print_summary(rd, (int)rounds);
    s->passed = true;
}

/* ---- 7. SIGTERM while switching over and while electing ---- */

/* SIGTERM ends a node within the bound in the phases of a role change:
 * the primary just after it was asked to switch over, then, with the next
 * primary killed, the standby left alone, which has just lost its primary
 * and asks for votes it cannot get. */
static void sigterm_while_switching_over_and_electing(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    char who[96];
    for (size_t i = 0; i < NODES; i++)
        s->c->node[i].admin_port = bqt_free_port(); /* for the switchover */
    start_all(s);
    size_t p = bqw_wait_settled(s->w, 0, &v0), t = (p + 1) % NODES;
    bqw_start(s->w);
    bqw_wait_acks(s->w, 50);
    bqa_conn_t *a = switchover_send(s, p, t);
    snprintf(who, sizeof who, "the primary %s, asked to switch over", name_of(s, p));
    bqw_node_offer(s->w, p, false);
    bqt_term_within(&s->c->node[p].srv, BQT_SIGTERM_BOUND_MS, who);
    bqa_close(a);
    size_t q = bqw_wait_primary(s->w, (int)p, &v1);
    size_t r = 0 + 1 + 2 - p - q; /* the third node */
    size_t lost = bqc_log_count(s->c, r, "replication: lost the primary", NULL);
    bqw_node_kill(s->w, q);
    bqc_wait_log(s->c, r, "replication: lost the primary", NULL, lost + 1, BQC_WAIT_MS);
    snprintf(who, sizeof who, "the standby %s, its primary just lost", name_of(s, r));
    bqw_node_offer(s->w, r, false);
    bqt_term_within(&s->c->node[r].srv, BQT_SIGTERM_BOUND_MS, who);
    s->passed = true;
}

/* ---- 4c. clients of a standby keep their connections and sessions ---- */

/* A client of node i (proxied when it is a standby) that uses and watches
 * only tube. */
static int session_client(suite_t *s, size_t i, const char *tube)
{
    int fd = bqt_client(&s->c->node[i].srv);
    char cmd[96], want[96];
    snprintf(cmd, sizeof cmd, "use %s\r\n", tube);
    snprintf(want, sizeof want, "USING %s", tube);
    expect_reply(fd, cmd, want);
    snprintf(cmd, sizeof cmd, "watch %s\r\n", tube);
    expect_reply(fd, cmd, "WATCHING 2");
    expect_reply(fd, "ignore default\r\n", "WATCHING 1");
    return fd;
}

/* fd's session is still tube's alone, and node i answers it. */
static void expect_session(suite_t *s, int fd, const char *tube, size_t i)
{
    char want[96];
    snprintf(want, sizeof want, "USING %s", tube);
    expect_reply(fd, "list-tube-used\r\n", want);
    char *r = bqc_ask(fd, "list-tubes-watched\r\n", HELD_MS);
    snprintf(want, sizeof want, "OK %zu\r\n---\n- %s\n", strlen(tube) + 7, tube);
    if (!r || strncmp(r, want, strlen(want)) != 0)
        fail_msg("the session of %s's client lost its watch list: %s", tube, r ? r : "(none)");
    free(r);
    bqc_view_t v;
    r = bqc_ask(fd, "stats\r\n", HELD_MS);
    if (!r || bqc_view_parse(r, &v) != 0 || strcmp(v.node, name_of(s, i)) != 0)
        fail_msg("%s's client is not served by the primary %s", tube, name_of(s, i));
    free(r);
}

/* A job put into tube through node i reaches worker fd, waiting in
 * reserve since before the role change; the worker deletes it. */
static void expect_job_reaches(suite_t *s, size_t i, const char *tube, int fd)
{
    int p = bqt_client(&s->c->node[i].srv);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "use %s\r\n", tube);
    expect_reply(p, cmd, "USING ");
    char *r = bqc_ask(p, "put 0 0 60 4\r\nwork\r\n", HELD_MS);
    unsigned long long id = r ? strtoull(r + 9, NULL, 10) : 0;
    if (!r || strncmp(r, "INSERTED ", 9) != 0)
        fail_msg("a put into %s: %s", tube, r ? r : "(none)");
    free(r);
    close(p);
    char *line = bqt_read_line(fd, HELD_MS);
    char want[64];
    snprintf(want, sizeof want, "RESERVED %llu 4", id);
    if (!line || strncmp(line, want, strlen(want)) != 0)
        fail_msg("the worker of %s waiting since before the role change got \"%s\", want %s", tube,
                 line ? line : "nothing", want);
    free(line);
    free(bqt_read_line(fd, HELD_MS)); /* the body */
    snprintf(cmd, sizeof cmd, "delete %llu\r\n", id);
    expect_reply(fd, cmd, "DELETED");
}

/* Clients of a standby, one idle and one waiting in reserve, keep their
 * TCP connections and sessions when that standby becomes the primary by a
 * switchover (it serves them itself), and when the primary is killed
 * while they are proxied (moved to the new primary); the workload's
 * history checker finds nothing lost. */
static void proxied_clients_survive_role_changes(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    for (size_t i = 0; i < NODES; i++)
        s->c->node[i].admin_port = bqt_free_port();
    start_all(s);
    size_t p = bqw_wait_primary(s->w, -1, &v0);
    size_t a = (p + 1) % NODES, b = (p + 2) % NODES;
    bqw_wait_streaming(s->w, a, true);
    bqw_wait_streaming(s->w, b, true);
    bqw_start(s->w);
    int c1 = session_client(s, a, "pa"), w1 = session_client(s, a, "pa-work");
    bqt_sends(w1, "reserve\r\n");
    expect_session(s, c1, "pa", p);
    /* Switchover to a: its proxied clients become its own. */
    bqa_conn_t *h = switchover_send(s, p, a);
    char text[HTTP_TEXT];
    int status = bqa_reply(h, BQC_WAIT_MS, text, sizeof text);
    bqa_close(h);
    if (status != 200)
        fail_msg("switchover to %s: %d %s", name_of(s, a), status, text);
    assert_int_equal(bqw_wait_primary(s->w, (int)p, &v1), a);
    expect_session(s, c1, "pa", a);
    expect_job_reaches(s, a, "pa-work", w1);
    bqc_wait_log(s->c, a, "proxy: proxied clients now served here", NULL, 1, BQC_WAIT_MS);
    /* kill -9 of the primary a: the clients proxied by b move. */
    bqw_wait_streaming(s->w, b, true);
    int c2 = session_client(s, b, "pb"), w2 = session_client(s, b, "pb-work");
    bqt_sends(w2, "reserve\r\n");
    expect_session(s, c2, "pb", a);
    bqh_mark(bqw_history(s->w), "kill -9 of the primary %s", name_of(s, a));
    bqw_node_kill(s->w, a);
    close(c1); /* a's own clients are gone with it */
    close(w1);
    size_t q = bqw_wait_primary(s->w, (int)a, &v1);
    expect_session(s, c2, "pb", q);
    expect_job_reaches(s, q, "pb-work", w2);
    close(c2);
    close(w2);
    bqw_wait_acks(s->w, 100);
    bqw_check(s->w, q, NULL, NULL);
    s->passed = true;
}

/* ---- 4d. clients of the primary through a switchover ---- */

/* Starts the three nodes with admin ports; returns the primary once both
 * standbys stream from it (its view in *v). */
static size_t start_settled(suite_t *s, bqc_view_t *v)
{
    for (size_t i = 0; i < NODES; i++)
        s->c->node[i].admin_port = bqt_free_port();
    start_all(s);
    return bqw_wait_settled(s->w, 0, v);
}

/* The producer of writes_wait_through_a_switchover, in a child process:
 * puts one at a time on fd (tube sw) until stop_fd reaches EOF, writing
 * each acknowledged id to out_fd, then a summary line:
 * "done <inserted> <refused> <other> <closed> <max_ms>". */
static void switchover_producer(int fd, int stop_fd, int out_fd)
{
    struct pollfd sp = {.fd = stop_fd, .events = POLLIN};
    long inserted = 0, refused = 0, other = 0, closed = 0, max_ms = 0;
    if (write(fd, "use sw\r\n", 8) != 8)
        closed++;
    char line[256];
    size_t n = 0;
    bool used = false;
    while (!closed && poll(&sp, 1, 0) == 0) {
        static const char put[] = "put 0 0 60 2\r\nsw\r\n";
        if (used && write(fd, put, sizeof put - 1) != sizeof put - 1) {
            closed++;
            break;
        }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        n = 0;
        while (n < 2 || line[n - 2] != '\r' || line[n - 1] != '\n') {
            struct pollfd rp = {.fd = fd, .events = POLLIN};
            if (n == sizeof line || poll(&rp, 1, 20000) != 1 || read(fd, line + n, 1) != 1) {
                closed++;
                break;
            }
            n++;
        }
        if (closed)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (!used) {
            used = true;
            continue;
        }
        max_ms = ms > max_ms ? ms : max_ms;
        if (strncmp(line, "INSERTED ", 9) == 0) {
            unsigned long long id = strtoull(line + 9, NULL, 10);
            inserted++;
            if (write(out_fd, &id, sizeof id) != sizeof id)
                break;
        } else if (strncmp(line, "DRAINING", 8) == 0 || strncmp(line, "OUT_OF_MEMORY", 13) == 0) {
            refused++;
        } else {
            other++;
        }
    }
    unsigned long long end = 0;
    char sum[128];
    int k = snprintf(sum, sizeof sum, "done %ld %ld %ld %ld %ld", inserted, refused, other, closed,
                     max_ms);
    if (write(out_fd, &end, sizeof end) == sizeof end && write(out_fd, sum, (size_t)k) == k)
        _exit(0);
    _exit(1);
}

/* A primary's own clients through a switchover: a producer putting one job
 * at a time never gets DRAINING or OUT_OF_MEMORY and keeps its connection
 * (its put waits while writes pause, then goes to the new primary through
 * the old one, now a standby); an idle client keeps its session; a worker
 * waiting in reserve gets a job put on the new primary. Every id
 * acknowledged to the producer is on the new primary. */
static void writes_wait_through_a_switchover(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    size_t p = start_settled(s, &v0);
    size_t t = (p + 1) % NODES;
    bqw_wait_streaming(s->w, t, true);
    int c1 = session_client(s, p, "old"), w1 = session_client(s, p, "old-work");
    bqt_sends(w1, "reserve\r\n");
    int prod = bqt_client(&s->c->node[p].srv);
    int stop[2], out[2];
    assert_int_equal(pipe(stop), 0);
    assert_int_equal(pipe(out), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(stop[1]);
        close(out[0]);
        switchover_producer(prod, stop[0], out[1]);
    }
    close(stop[0]);
    close(out[1]);
    /* Fifty acknowledged ids: the producer is in full swing. */
    unsigned long long ids[1 << 16], id;
    size_t nids = 0;
    struct pollfd rp = {.fd = out[0], .events = POLLIN};
    while (nids < 50) {
        if (poll(&rp, 1, BQC_WAIT_MS) != 1 || read(out[0], &id, sizeof id) != sizeof id || !id)
            fail_msg("the producer on %s acknowledged %zu puts", name_of(s, p), nids);
        ids[nids++] = id;
    }
    bqa_conn_t *h = switchover_send(s, p, t);
    char text[HTTP_TEXT];
    int status = bqa_reply(h, BQC_WAIT_MS, text, sizeof text);
    bqa_close(h);
    if (status != 200)
        fail_msg("switchover to %s: %d %s", name_of(s, t), status, text);
    assert_int_equal(bqw_wait_primary(s->w, (int)p, &v1), t);
    bqc_wait_log(s->c, p, "clients held for the new primary", NULL, 1, BQC_WAIT_MS);
    expect_session(s, c1, "old", t);
    expect_job_reaches(s, t, "old-work", w1);
    /* A few more puts on the new primary, then the producer stops. */
    int q = bqt_client(&s->c->node[t].srv);
    expect_reply(q, "use sw\r\n", "USING sw");
    char *r = bqc_ask(q, "stats-tube sw\r\n", HELD_MS);
    free(r);
    close(stop[1]);
    while (read(out[0], &id, sizeof id) == sizeof id && id != 0)
        if (nids < sizeof ids / sizeof *ids)
            ids[nids++] = id;
    char sum[128] = "";
    ssize_t k = read(out[0], sum, sizeof sum - 1);
    sum[k > 0 ? k : 0] = '\0';
    int wst = 0;
    waitpid(child, &wst, 0);
    long inserted, refused, other, closed, max_ms;
    if (sscanf(sum, "done %ld %ld %ld %ld %ld", &inserted, &refused, &other, &closed, &max_ms) != 5)
        fail_msg("the producer's summary: \"%s\"", sum);
    fprintf(stderr, "producer through the switchover: %ld puts, longest %ld ms\n", inserted,
            max_ms);
    if (refused || other || closed)
        fail_msg("the producer got %ld refusals, %ld other replies, %ld closed connections "
                 "(%ld puts acknowledged)",
                 refused, other, closed, inserted);
    for (size_t i = 0; i < nids; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "peek %llu\r\n", ids[i]);
        r = bqc_ask(q, cmd, HELD_MS);
        if (!r || strncmp(r, "FOUND ", 6) != 0)
            fail_msg("job %llu acknowledged to the producer is not on %s: %s", ids[i],
                     name_of(s, t), r ? r : "(none)");
        free(r);
    }
    close(q);
    close(c1);
    close(w1);
    close(prod);
    close(out[0]);
    s->passed = true;
}

/* ---- 4e. standbys ride through an election ---- */

/* True when node i's /status names a primary (or i is it). */
static bool knows_primary(suite_t *s, size_t i)
{
    char body[8192];
    if (bqc_admin_call(s->c, i, "GET", "/status", body, sizeof body) != 200)
        return false;
    return strstr(body, "\"role\":\"primary\"") || !strstr(body, "\"primary\":null");
}

/* kill -9 of the primary: through the election, both standbys answer 200
 * on /readyz every time they are asked (a load balancer keeps them), and
 * a client of one of them, held since its primary was lost, gets its
 * commands (a put among them) answered in order by the new primary. */
static void standbys_ride_through_an_election(void **state)
{
    suite_t *s = *state;
    bqc_view_t v;
    size_t p = start_settled(s, &v);
    size_t b = (p + 1) % NODES, c = (p + 2) % NODES;
    int fd = session_client(s, b, "ride");
    bqw_node_kill(s->w, p);
    bqc_wait_log(s->c, b, "replication: lost the primary", NULL, 1, BQC_WAIT_MS);
    bqt_sends(fd, "put 0 0 60 4\r\nride\r\nlist-tube-used\r\nstats-tube ride\r\n");
    long long t0 = bqt_now_ms();
    int asked = 0;
    char body[256];
    for (bool known = false; !known; asked++) {
        if (bqt_now_ms() - t0 > BQC_WAIT_MS)
            fail_msg("no new primary within %d ms", BQC_WAIT_MS);
        known = true;
        for (size_t i = b, k = 0; k < 2; k++, i = c) {
            int st = bqc_admin_call(s->c, i, "GET", "/readyz", body, sizeof body);
            if (st != 200)
                fail_msg("%s answered %d (%s) on /readyz during the election, %lld ms after "
                         "the primary died",
                         name_of(s, i), st, body, bqt_now_ms() - t0);
            known = known && knows_primary(s, i);
        }
    }
    fprintf(stderr, "/readyz asked %d times of each standby through the election: always 200\n",
            asked);
    char *line = bqt_read_line(fd, HELD_MS);
    if (!line || strncmp(line, "INSERTED ", 9) != 0)
        fail_msg("the held put got \"%s\"", line ? line : "nothing");
    free(line);
    line = bqt_read_line(fd, HELD_MS);
    if (!line || strncmp(line, "USING ride\r", 11) != 0)
        fail_msg("the held list-tube-used got \"%s\"", line ? line : "nothing");
    free(line);
    line = bqt_read_line(fd, HELD_MS);
    if (!line || strncmp(line, "OK ", 3) != 0)
        fail_msg("the held stats-tube got \"%s\"", line ? line : "nothing");
    free(line);
    close(fd);
    s->passed = true;
}

/* With no primary for longer than the hold bound (both other nodes killed:
 * no majority), the last standby's held client gets INTERNAL_ERROR for
 * each command it sent, then EOF, and the standby turns not ready; before
 * the bound it was ready (holding its clients). */
static void held_clients_fail_cleanly_without_a_primary(void **state)
{
    suite_t *s = *state;
    bqc_view_t v;
    size_t p = start_settled(s, &v);
    size_t b = (p + 1) % NODES, c = (p + 2) % NODES;
    int fd = session_client(s, b, "alone");
    bqw_node_kill(s->w, c);
    bqw_node_kill(s->w, p);
    bqc_wait_log(s->c, b, "replication: lost the primary", NULL, 1, BQC_WAIT_MS);
    long long t0 = bqt_now_ms();
    bqt_sends(fd, "list-tube-used\r\nput 0 0 60 2\r\nno\r\n");
    char body[256];
    int st = bqc_admin_call(s->c, b, "GET", "/readyz", body, sizeof body);
    if (st != 200 && bqt_now_ms() - t0 < HOLD_BOUND_MS / 2)
        fail_msg("%s answered %d (%s) on /readyz right after it lost its primary", name_of(s, b),
                 st, body);
    char got[64] = "";
    size_t want = 2 * strlen("INTERNAL_ERROR\r\n");
    size_t n = bqt_read_n(fd, got, want, HOLD_BOUND_MS + BQC_WAIT_MS);
    long long waited = bqt_now_ms() - t0;
    if (n != want || strcmp(got, "INTERNAL_ERROR\r\nINTERNAL_ERROR\r\n") != 0)
        fail_msg("the held client got \"%s\" after %lld ms, want two INTERNAL_ERROR", got, waited);
    if (waited < HOLD_BOUND_MS - 1000)
        fail_msg("the held client was failed after %lld ms, before the hold bound %d", waited,
                 HOLD_BOUND_MS);
    char c1;
    if (bqt_read_n(fd, &c1, 1, BQC_WAIT_MS) != 0)
        fail_msg("the failed client's connection stayed open");
    close(fd);
    st = bqc_admin_call(s->c, b, "GET", "/readyz", body, sizeof body);
    if (st != 503 || !strstr(body, "no primary followed"))
        fail_msg("%s answered %d (%s) on /readyz past the hold bound, want 503", name_of(s, b), st,
                 body);
    fprintf(stderr, "held client failed after %lld ms (bound %d); /readyz then %d\n", waited,
            HOLD_BOUND_MS, st);
    s->passed = true;
}

/* ---- 8. twenty primary changes with caught-up standbys: no resync ---- */

#define CHANGES 20

/* Kill -9 of the primary (the killed node started again) and switchovers,
 * alternating, each with both standbys caught up before it: every stream a
 * node begins resumes after its last record or cuts a divergent tail,
 * never a full resync (issue 19: a new primary kept only its new epoch's
 * segment, and a caught-up standby resynced). The log of every node and
 * the metrics of every node alive at the end are checked; the history
 * too. */
static void no_resync_across_primary_changes(void **state)
{
    suite_t *s = *state;
    bqc_view_t v;
    size_t p = start_settled(s, &v);
    bqw_start(s->w);
    for (int k = 0; k < CHANGES; k++) {
        bqw_wait_acks(s->w, AFTER_ACKS);
        for (size_t i = 0; i < NODES; i++)
            if (i != p)
                bqw_wait_streaming(s->w, i, true);
        if (k % 2 == 0) {
            bqh_mark(bqw_history(s->w), "change %d: kill -9 of the primary %s", k + 1,
                     name_of(s, p));
            bqw_node_kill(s->w, p);
            bqw_wait_primary(s->w, (int)p, &v);
            node_up(s, p);
        } else {
            size_t t = (p + 1) % NODES;
            bqa_conn_t *a = switchover_send(s, p, t);
            char text[HTTP_TEXT];
            int status = bqa_reply(a, BQC_WAIT_MS, text, sizeof text);
            bqa_close(a);
            if (status != 200)
                fail_msg("change %d: switchover to %s: %d %s", k + 1, name_of(s, t), status, text);
        }
        p = bqw_wait_settled(s->w, 0, &v);
    }
    static char metrics[1 << 17];
    for (size_t i = 0; i < NODES; i++) {
        size_t resyncs = bqc_log_count(s->c, i, "following the primary", "start=resync");
        if (resyncs != 0)
            fail_msg("%s began %zu full resyncs in %d primary changes", name_of(s, i), resyncs,
                     CHANGES);
        if (bqc_admin_call(s->c, i, "GET", "/metrics", metrics, sizeof metrics) != 200 ||
            !strstr(metrics, "beanstalkd_ha_rejoins_total{start=\"resync\"} 0\n"))
            fail_msg("%s's metrics do not say 0 resyncs", name_of(s, i));
    }
    fprintf(stderr, "%d primary changes: no full resync (rejoins by cut: %zu, %zu, %zu lines)\n",
            CHANGES, bqc_log_count(s->c, 0, "following the primary", "start=cut"),
            bqc_log_count(s->c, 1, "following the primary", "start=cut"),
            bqc_log_count(s->c, 2, "following the primary", "start=cut"));
    bqw_check(s->w, p, NULL, NULL);
    s->passed = true;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(auto_elects_and_fails_over),
        T(killed_primary_rejoins),
        T(paused_primary_is_fenced),
        T(partitioned_primary_steps_aside),
        T(forked_tail_is_cut_on_rejoin),
        T(proxied_clients_survive_role_changes),
        T(writes_wait_through_a_switchover),
        T(standbys_ride_through_an_election),
        T(held_clients_fail_cleanly_without_a_primary),
        T(no_resync_across_primary_changes),
        T(witness_breaks_the_tie),
        T(random_fault_rounds),
        T(sigterm_while_switching_over_and_electing),
    };
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("failover", tests, group_setup, group_teardown);
}
