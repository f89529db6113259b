/* Failover in containers (label `container`): three containers of the
 * image that container_image builds (localhost/beanstalkd-ha:test), on a
 * podman network whose DNS resolves them by name, run with the
 * StatefulSet's arguments (deploy/k8s/node-a.yaml: --role=standby
 * --failover=auto, peers by name on 11310, the admin API on 11380, TLS
 * from deploy/mkcerts mounted read-only) and its security context (root
 * filesystem read-only, every capability dropped). Workers of
 * tests/support/workload.h put, delete and run the richer job mix through
 * the client ports published on 127.0.0.1, one command at a time, and
 * record every operation in a history.
 *
 * Ten rounds (BQ_CONTAINER_ROUNDS): `podman kill -s KILL` of the primary's
 * container; a put sent after the kill must be acknowledged by the new
 * primary within 3 s; `podman start` of the killed container, whose node
 * must be streaming from the new primary within 5 s. At the end the
 * history checker compares a snapshot of the primary with every
 * acknowledged operation: nothing lost, nothing resurrected.
 *
 * Debugging: BQ_CONTAINER_SERVER_ARGS=-V adds flags to every server (-V:
 * connections and proxying in the containers' logs), BQW_TRACE=1 prints
 * each worker's sessions, BQT_KEEP_DIRS=1 keeps the containers' logs.
 *
 * A machine where podman cannot start the smallest container skips (exit
 * 77, with podman's reason), as run-image does; a missing image is a
 * failure (ctest runs container_image first). A failed run prints each
 * container's log and keeps the work directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/cluster.h"
#include "tests/support/history.h"
#include "tests/support/workload.h"

#ifndef BQ_MKCERTS
#error "BQ_MKCERTS must name deploy/mkcerts"
#endif

#define NODES 3
#define WORKERS 2
#define ROUNDS 10
#define FAILOVER_MAX_MS 3000 /* kill of the primary's container to a put acknowledged */
#define REJOIN_MAX_MS 5000   /* podman start to the node streaming again */
#define PODMAN_S 120         /* for one podman command */
#define IMAGE "localhost/beanstalkd-ha:test"
#define BASE "localhost/bq-debian:bookworm-slim" /* run-image's base */
#define RUN_OPTS "--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096"
#define TUBE "ctr"

static char g_net[12];             /* the podman network, also the names' prefix */
static char g_name[NODES][16];     /* <net>-n1...: container, host and node id */
static const char *g_names[NODES]; /* the same, for the cluster helpers */
static char g_certs[160];          /* mkcerts' output */
static char g_log[200];            /* every podman command's output */

typedef struct suite {
    bqc_cluster_t *c; /* node i: its data directory and published client port */
    bqw_t *w;
    bool passed;
} suite_t;

/* ---- podman ---- */

/* Runs `podman <args>` through the shell, bounded by PODMAN_S, its output
 * appended to g_log; returns its exit code. */
static int podman(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int podman(const char *fmt, ...)
{
    char args[2048], cmd[2400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout %d podman %s >>%s 2>&1", PODMAN_S, args, g_log);
    int rc = system(cmd);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

/* Runs a shell command (no podman), 0 when it succeeded. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    return rc == 0 ? 0 : -1;
}

/* Prints the last lines of g_log (podman's reasons). */
static void print_log_tail(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "tail -n 5 %s >&2", g_log);
    (void)system(cmd);
}

/* ---- set-up ---- */

static int group_setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < NODES; i++) {
        static const char *const suffix[NODES] = {"n1", "n2", "n3"};
        snprintf(g_name[i], sizeof g_name[i], "%.10s-%s", g_net, suffix[i]);
        g_names[i] = g_name[i];
    }
    return bqc_certs_make(BQ_MKCERTS, g_certs, sizeof g_certs, g_names, NODES);
}

static int group_teardown(void **state)
{
    (void)state;
    bqc_remove_tree(g_certs);
    return 0;
}

/* Makes node i's TLS directory (certificate, key, CA as the StatefulSet's
 * secret names them) and hands it and its data directory to uid 10001. */
static void node_files(suite_t *s, size_t i, char *tls, size_t cap)
{
    const char *dir = s->c->node[i].bdir, *n = g_name[i];
    snprintf(tls, cap, "%.150s-tls", dir);
    assert_int_equal(sh("mkdir -p %s && cp %s/%s.pem %s/tls.crt && cp %s/%s.key %s/tls.key && "
                        "cp %s/ca.pem %s/ca.crt && chown -R 10001:10001 %s %s",
                        tls, g_certs, n, tls, g_certs, n, tls, g_certs, tls, dir, tls),
                     0);
}

/* Creates node i's container with the StatefulSet's arguments, publishing
 * its client port on 127.0.0.1:<srv.port>, and starts it. */
static void node_create(suite_t *s, size_t i)
{
    char tls[200], peers[400] = "";
    node_files(s, i, tls, sizeof tls);
    for (size_t j = 0; j < NODES; j++) {
        size_t len = strlen(peers);
        snprintf(peers + len, sizeof peers - len, " --peer=%s=%s:11310", g_name[j], g_name[j]);
    }
    const char *extra = getenv("BQ_CONTAINER_SERVER_ARGS"); /* e.g. -V, to debug */
    s->c->node[i].srv.port = bqt_free_port();
    int rc = podman("run -d --name %s --hostname %s --network %s " RUN_OPTS
                    " --read-only --cap-drop=all -v %s:/var/lib/beanstalkd-ha"
                    " -v %s:/etc/beanstalkd-ha/tls:ro -p 127.0.0.1:%d:11300 " IMAGE
                    " --port=11300 --binlog-dir=/var/lib/beanstalkd-ha --role=standby"
                    " --failover=auto --node-id=%s --cluster-id=beanstalkd-ha%s"
                    " --repl-listen=0.0.0.0:11310 --admin-listen=0.0.0.0:11380"
                    " --tls-cert=/etc/beanstalkd-ha/tls/tls.crt"
                    " --tls-key=/etc/beanstalkd-ha/tls/tls.key"
                    " --tls-ca=/etc/beanstalkd-ha/tls/ca.crt%s%s",
                    g_name[i], g_name[i], g_net, s->c->node[i].bdir, tls, s->c->node[i].srv.port,
                    g_name[i], peers, extra ? " " : "", extra ? extra : "");
    if (rc != 0) {
        print_log_tail();
        fail_msg("podman run of %s exited with %d", g_name[i], rc);
    }
}

/* The network, with DNS (podman's dnsname plugin), so peers resolve by
 * container name as pods do by their StatefulSet names. */
static void network_create(void)
{
    char path[220], dns[16] = "";
    assert_int_equal(podman("network create %s", g_net), 0);
    snprintf(path, sizeof path, "%s.dns", g_log);
    assert_int_equal(sh("podman network inspect %s --format '{{.DNSEnabled}}' >%s", g_net, path),
                     0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    if (!fgets(dns, sizeof dns, f))
        dns[0] = '\0';
    fclose(f);
    unlink(path);
    if (strncmp(dns, "true", 4) != 0)
        fail_msg("the network %s has no DNS (podman's dnsname plugin: "
                 "golang-github-containernetworking-plugin-dnsname)",
                 g_net);
}

static int setup(void **state)
{
    suite_t *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->c = bqc_new("bq-container", NODES, g_names, g_certs);
    s->w = s->c ? bqw_new(s->c, TUBE, WORKERS) : NULL;
    if (!s->w) {
        bqc_finish(s->c, true);
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

/* Keeps node i's container log (every start of it) in the work directory
 * and prints its end (a failed case). */
static void keep_container_log(suite_t *s, size_t i)
{
    char cmd[512]; /* at most 430: names of 15, directories cut at 160 */
    fprintf(stderr, "---- podman logs %s (last 40 lines) ----\n", g_name[i]);
    snprintf(cmd, sizeof cmd,
             "podman logs %s >%.160s/%s.container.log 2>&1; tail -n 40 %.160s/%s.container.log >&2",
             g_name[i], s->c->work, g_name[i], s->c->work, g_name[i]);
    (void)system(cmd);
}

static int teardown(void **state)
{
    suite_t *s = *state;
    bqw_stop(s->w);
    for (size_t i = 0; i < NODES; i++) {
        if (!s->passed || getenv("BQT_KEEP_DIRS"))
            keep_container_log(s, i);
        podman("rm -f -t 0 %s", g_name[i]);
    }
    podman("network rm -f %s", g_net);
    if (!s->passed)
        fprintf(stderr, "podman's output: %s\n", g_log);
    bqc_finish(s->c, s->passed);
    bqw_free(s->w);
    free(s);
    return 0;
}

/* ---- the rounds ---- */

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* Kills the primary p's container; returns the time to the first put sent
 * after the kill that a new primary acknowledged (ms), and that primary. */
static long long kill_primary(suite_t *s, size_t p, long r, size_t *q)
{
    bqc_view_t v;
    bqw_node_offer(s->w, p, false);
    bqh_fault(bqw_history(s->w), "round %ld: podman kill -s KILL of the primary %s", r, g_name[p]);
    assert_int_equal(podman("kill -s KILL %s", g_name[p]), 0);
    uint64_t t0 = bqw_recovery_arm(s->w);
    long long ms = bqw_recovery_wait(s->w, t0, "killing the primary's container");
    *q = bqw_wait_primary(s->w, (int)p, &v);
    return ms;
}

/* Starts the killed container again; returns the time until the primary
 * reports its node streaming (ms). */
static long long rejoin(suite_t *s, size_t p)
{
    long long t0 = bqt_now_ms();
    assert_int_equal(podman("start %s", g_name[p]), 0);
    bqw_wait_streaming(s->w, p, false);
    long long ms = bqt_now_ms() - t0;
    bqw_node_offer(s->w, p, true);
    return ms;
}

static void kill_primary_container_ten_times(void **state)
{
    suite_t *s = *state;
    long rounds = env_long("BQ_CONTAINER_ROUNDS", ROUNDS);
    long long fail_ms[64], rejoin_ms[64], worst_fail = 0, worst_rejoin = 0;
    bqc_view_t v;
    if (rounds < 1 || rounds > 64)
        rounds = ROUNDS;
    network_create();
    for (size_t i = 0; i < NODES; i++)
        node_create(s, i);
    for (size_t i = 0; i < NODES; i++)
        bqw_node_offer(s->w, i, true);
    bqw_mix(s->w, true);
    bqw_start(s->w);
    size_t p = bqw_wait_settled(s->w, 0, &v);
    for (long r = 1; r <= rounds; r++) {
        size_t q;
        bqw_wait_acks(s->w, 30);
        fail_ms[r - 1] = kill_primary(s, p, r, &q);
        rejoin_ms[r - 1] = rejoin(s, p);
        bqh_settled(bqw_history(s->w), "round %ld: %s rejoined", r, g_name[p]);
        fprintf(stderr,
                "round %ld: killed %s; %s acknowledged a put after %lld ms; "
                "%s streaming again %lld ms after podman start\n",
                r, g_name[p], g_name[q], fail_ms[r - 1], g_name[p], rejoin_ms[r - 1]);
        worst_fail = fail_ms[r - 1] > worst_fail ? fail_ms[r - 1] : worst_fail;
        worst_rejoin = rejoin_ms[r - 1] > worst_rejoin ? rejoin_ms[r - 1] : worst_rejoin;
        p = q;
    }
    bqw_wait_acks(s->w, 30);
    p = bqw_wait_settled(s->w, 0, &v);
    bqh_report_t rep;
    bqw_check(s->w, p, NULL, &rep);
    fprintf(stderr,
            "%ld rounds: worst failover %lld ms (bound %d), worst rejoin %lld ms "
            "(bound %d)\n",
            rounds, worst_fail, FAILOVER_MAX_MS, worst_rejoin, REJOIN_MAX_MS);
    for (long r = 0; r < rounds; r++) {
        if (fail_ms[r] >= FAILOVER_MAX_MS)
            fail_msg("round %ld: the failover took %lld ms", r + 1, fail_ms[r]);
        if (rejoin_ms[r] >= REJOIN_MAX_MS)
            fail_msg("round %ld: the rejoin took %lld ms", r + 1, rejoin_ms[r]);
    }
    s->passed = true;
}

/* ---- main ---- */

/* 0 when podman can run the base image; 77 (printed) when this machine
 * cannot run containers; 1 when the images are missing. */
static int preflight(void)
{
    if (podman("image exists " BASE) != 0 || podman("image exists " IMAGE) != 0) {
        fprintf(stderr,
                "test_container_failover: no %s or %s: container_image builds them "
                "(ctest -R container_image)\n",
                BASE, IMAGE);
        return 1;
    }
    if (podman("run --rm " RUN_OPTS " " BASE " true") != 0) {
        fprintf(stderr, "test_container_failover: SKIPPED: this machine cannot run containers:\n");
        print_log_tail();
        return 77;
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(kill_primary_container_ten_times, setup, teardown),
    };
    snprintf(g_net, sizeof g_net, "bqcf%d", (int)(getpid() % 1000000));
    snprintf(g_log, sizeof g_log, "/tmp/%s-podman.log", g_net);
    int rc = preflight();
    if (rc != 0)
        return rc;
    rc = cmocka_run_group_tests_name("container failover", tests, group_setup, group_teardown);
    if (rc == 0)
        unlink(g_log);
    return rc;
}
