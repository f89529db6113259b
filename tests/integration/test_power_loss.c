/* Power loss in a cluster, proven from below the servers: every node runs
 * under crashfs (tests/support/crashfs), which journals what its system
 * calls made durable; a power loss of a node is kill -9 followed by
 * crashfs-powerloss rewriting its binlog directory (and its election state)
 * to exactly that, with a torn write. Nothing a node says it synced is
 * believed. The disks are slow (every sync takes 20 ms more), so that what
 * is written but not yet synced is a wide target. Clients put and delete one command at a time
 * through any node (tests/support/workload.h); every acknowledgement is promised (default flags,
 * docs/replication.md: a reply waits for two copies on disk).
 *
 * Cases:
 * - the whole site loses power at a random moment (three nodes,
 *   --failover=auto) and the primary's machine never comes back: the two
 *   standbys, restarted on what their disks kept, elect one, and nothing
 *   acknowledged is missing and no acknowledged delete is undone. Only the
 *   standbys' disks hold the acknowledged changes the primary had not
 *   fsynced, so a standby that reported records flushed before its fsync
 *   returned fails here (tests/mutation/canary: standby-flushed-is-written).
 *   BQ_POWER_ROUNDS rounds (default 4), a fresh cluster each;
 * - the primary alone loses power: the standbys elect one, and the old
 *   primary, restarted on its damaged disk, follows it;
 * - two data nodes and a witness: the standby loses power and comes back,
 *   catches up, then the primary loses power: the standby and the witness
 *   elect the standby, which holds everything; the old primary follows.
 *
 * BQ_POWER_SEED repeats a run (the kill moments and the torn writes);
 * BQT_FILTER='name*' runs some cases only. */
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
#ifndef BQ_CRASHFS_PRELOAD
#error "BQ_CRASHFS_PRELOAD must name libcrashfs.so (bq_use_crashfs)"
#endif

#define WORKERS 6
#define TUBE "pl"
#define DEFAULT_ROUNDS 4
#define TRAFFIC_MIN_MS 100 /* of traffic before the power goes, at random up to MAX */
#define TRAFFIC_MAX_MS 700
#define AFTER_ACKS 30
#define POWERLOSS_MS 60000
/* A slow disk: what waits for an fsync waits this long, so that whatever
 * does not wait (a standby acknowledging before its fsync returns) leaves
 * a wide window for the power loss to hit. */
#define SYNC_DELAY_US "20000"

static char g_certs[160];
static const char *const g_names[] = {"n1", "n2", "n3"};
static const char *const auto_data[] = {"--role=standby", "--failover=auto", NULL};
static const char *const witness_data[] = {"--role=standby", "--failover=auto", "--witness", "n3",
                                           NULL};
static const char *const auto_witness[] = {"--role=witness", "--failover=auto", NULL};

typedef struct suite {
    bqc_cluster_t *c;
    bqw_t *w;
    const char *const *flags[3];
    unsigned long long rng;
    unsigned long long dropped; /* bytes the power losses took, all rounds */
    int losses;
    bool passed;
} suite_t;

static unsigned long long next_rand(unsigned long long *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

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
    const char *seed = getenv("BQ_POWER_SEED");
    s->rng = seed && *seed ? strtoull(seed, NULL, 10) : (unsigned long long)time(NULL) ^ getpid();
    if (s->rng == 0)
        s->rng = 1;
    fprintf(stderr, "power loss: seed %llu (BQ_POWER_SEED repeats it)\n", s->rng);
    *state = s;
    return 0;
}

static void end_cluster(suite_t *s, bool passed)
{
    bqw_free(s->w);
    s->w = NULL;
    bqc_finish(s->c, passed);
    s->c = NULL;
}

static int teardown(void **state)
{
    suite_t *s = *state;
    end_cluster(s, s->passed);
    free(s);
    return 0;
}

static const char *name_of(suite_t *s, size_t i)
{
    return s->c->node[i].name;
}

/* crashfs's journal of node i: outside its binlog directory. */
static void state_dir(suite_t *s, size_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s.crashfs", s->c->work, name_of(s, i));
}

/* Starts node i with its flags under crashfs, on a slow disk (every sync
 * takes SYNC_DELAY_US more), and offers it to the workers. */
static void node_up(suite_t *s, size_t i)
{
    char sdir[200];
    state_dir(s, i, sdir, sizeof sdir);
    setenv("LD_PRELOAD", BQ_CRASHFS_PRELOAD, 1);
    setenv("CRASHFS_ROOT", s->c->node[i].bdir, 1);
    setenv("CRASHFS_STATE", sdir, 1);
    setenv("CRASHFS_SYNC_DELAY_US", SYNC_DELAY_US, 1);
    bqw_node_up(s->w, i, s->flags[i]);
    unsetenv("LD_PRELOAD");
    unsetenv("CRASHFS_ROOT");
    unsetenv("CRASHFS_STATE");
    unsetenv("CRASHFS_SYNC_DELAY_US");
}

/* A new cluster of three nodes (n3 a witness when `witness`), all up,
 * settled; returns the primary's index. */
static size_t start_cluster(suite_t *s, bool witness)
{
    bqc_view_t v;
    s->c = bqc_new("bq-power", 3, g_names, g_certs);
    assert_non_null(s->c);
    s->w = bqw_new(s->c, TUBE, WORKERS);
    assert_non_null(s->w);
    for (size_t i = 0; i < 3; i++) {
        s->c->node[i].admin_port = bqt_free_port();
        s->flags[i] = witness ? (i == 2 ? auto_witness : witness_data) : auto_data;
    }
    for (size_t i = 0; i < 3; i++)
        node_up(s, i);
    size_t p = bqw_wait_settled(s->w, witness ? 1u << 2 : 0, &v);
    assert_string_equal(v.sync, "sync");
    return p;
}

/* The value of key=N in crashfs-powerloss's report; 0 when absent. */
static unsigned long long report_field(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Node i's machine loses power: its process must be dead already;
 * crashfs-powerloss rewrites its directory to what its system calls made
 * durable, with a torn write chosen at random. */
static void lose_power(suite_t *s, size_t i)
{
    char seed[32], sdir[200], log[220];
    state_dir(s, i, sdir, sizeof sdir);
    snprintf(log, sizeof log, "%s/%s.powerloss-%d.log", s->c->work, name_of(s, i), ++s->losses);
    snprintf(seed, sizeof seed, "%llu", next_rand(&s->rng) % 1000000007);
    const char *args[] = {"--seed", seed, "--tear", "random", s->c->node[i].bdir, sdir, NULL};
    int rc = bqt_run_to_exit(BQ_CRASHFS_TOOL, args, log, POWERLOSS_MS);
    char text[4096] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    if (rc != 0 || !strstr(text, "crashfs-powerloss: files="))
        fail_msg("crashfs-powerloss on %s failed (exit %d): %s", name_of(s, i), rc, text);
    s->dropped += report_field(text, "dropped_bytes=");
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0';
    bqh_mark(bqw_history(s->w), "power loss of %s: %s", name_of(s, i), text);
    fprintf(stderr, "power loss of %s: %s\n", name_of(s, i), text);
}

/* kill -9 of the nodes in mask, as close together as signals go, after
 * the workers stop choosing them; then their power is lost. */
static void site_down(suite_t *s, unsigned mask)
{
    for (size_t i = 0; i < 3; i++)
        if (mask & 1u << i)
            bqw_node_offer(s->w, i, false);
    for (size_t i = 0; i < 3; i++)
        if (mask & 1u << i)
            kill(s->c->node[i].srv.pid, SIGKILL);
    for (size_t i = 0; i < 3; i++)
        if (mask & 1u << i)
            bqc_signal(s->c, i, SIGKILL); /* reaps it */
    for (size_t i = 0; i < 3; i++)
        if (mask & 1u << i)
            lose_power(s, i);
}

/* Traffic for a random time between TRAFFIC_MIN_MS and TRAFFIC_MAX_MS
 * after at least 50 acknowledgements. */
static void traffic(suite_t *s)
{
    bqw_wait_acks(s->w, 50);
    long ms = TRAFFIC_MIN_MS + (long)(next_rand(&s->rng) % (TRAFFIC_MAX_MS - TRAFFIC_MIN_MS + 1));
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int rounds_wanted(void)
{
    const char *r = getenv("BQ_POWER_ROUNDS");
    int n = r && *r ? atoi(r) : DEFAULT_ROUNDS;
    return n > 0 ? n : 1;
}

/* ---- cases ---- */

/* The site loses power; the primary's machine is gone for good. */
static void site_power_loss_primary_gone(void **state)
{
    suite_t *s = *state;
    int rounds = rounds_wanted();
    unsigned long long puts = 0;
    for (int r = 1; r <= rounds; r++) {
        bqc_view_t v;
        bqh_report_t rep;
        size_t p = start_cluster(s, false);
        bqw_start(s->w);
        traffic(s);
        bqh_fault(bqw_history(s->w), "round %d: the site loses power; %s never comes back", r,
                  name_of(s, p));
        site_down(s, 7u);
        for (size_t i = 0; i < 3; i++)
            if (i != p)
                node_up(s, i);
        size_t q = bqw_wait_primary(s->w, (int)p, &v);
        assert_true(q != p);
        bqw_wait_acks(s->w, AFTER_ACKS);
        bqw_check(s->w, q, NULL, &rep);
        puts += rep.puts_acked;
        fprintf(stderr,
                "round %d: %s elected after the power loss; %zu puts acknowledged, "
                "none lost\n",
                r, name_of(s, q), (size_t)rep.puts_acked);
        end_cluster(s, true);
    }
    fprintf(stderr,
            "site power loss: %d rounds, %llu puts acknowledged, %llu bytes dropped by "
            "the power losses\n",
            rounds, puts, s->dropped);
    /* The power went while something was unsynced (else this proved
     * nothing about what the nodes synced). */
    assert_true(s->dropped > 0);
    s->passed = true;
}

/* The primary alone loses power: the standbys elect one; the old primary
 * returns on what its disk kept and follows. */
static void primary_power_loss(void **state)
{
    suite_t *s = *state;
    bqc_view_t v;
    size_t p = start_cluster(s, false);
    bqw_start(s->w);
    traffic(s);
    bqh_fault(bqw_history(s->w), "the primary %s loses power", name_of(s, p));
    site_down(s, 1u << p);
    size_t q = bqw_wait_primary(s->w, (int)p, &v);
    node_up(s, p);
    bqw_wait_streaming(s->w, p, true);
    bqw_wait_acks(s->w, AFTER_ACKS);
    bqw_check(s->w, q, NULL, NULL);
    s->passed = true;
}

/* Two data nodes and a witness: the standby loses power and returns, then
 * the primary loses power; the standby is elected and holds everything. */
static void witness_standby_then_primary_power_loss(void **state)
{
    suite_t *s = *state;
    bqc_view_t v;
    size_t p = start_cluster(s, true), b = p == 0 ? 1 : 0;
    bqw_start(s->w);
    traffic(s);
    bqh_fault(bqw_history(s->w), "the standby %s loses power", name_of(s, b));
    site_down(s, 1u << b);
    bqw_wait_acks(s->w, AFTER_ACKS);
    node_up(s, b);
    bqw_wait_streaming(s->w, b, true);
    traffic(s);
    bqh_fault(bqw_history(s->w), "the primary %s loses power", name_of(s, p));
    site_down(s, 1u << p);
    assert_int_equal(bqw_wait_primary(s->w, (int)p, &v), b);
    node_up(s, p);
    bqw_wait_streaming(s->w, p, false);
    bqw_wait_acks(s->w, AFTER_ACKS);
    bqw_check(s->w, b, NULL, NULL);
    s->passed = true;
}

int main(void)
{
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(site_power_loss_primary_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(primary_power_loss, setup, teardown),
        cmocka_unit_test_setup_teardown(witness_standby_then_primary_power_loss, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
