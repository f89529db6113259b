/* Replication end to end with real processes: a primary (node "a") and a
 * standby (node "b") on loopback, each with its own binlog directory in a
 * work directory of the test, mostly over TLS with certificates from
 * deploy/mkcerts. Every case drives clients through the primary (or through
 * the standby's proxy), waits on the primary's `stats` (cluster-standby-b:
 * state, applied) or on lines of a node's log, each with a deadline, and
 * most end by stopping both nodes, starting each directory alone as a
 * single beanstalkd and comparing what they hold: every job's `stats-job`
 * (age, time-left and file aside) and `peek`, `list-tubes`, and the durable
 * counts of every tube. Cases: a mixed workload over TLS, clients on the
 * standby, standby restarts (SIGTERM, kill -9) that resume, an outage long
 * enough that compaction forces a resync (with puts during the download),
 * refused certificates and garbage, kill -9 of a synchronous primary under
 * concurrent clients with the link stalled (checked with
 * tests/support/history.h), a stalled (async and refuse fallbacks) or
 * cut link through the fault proxy (tests/support/faultproxy.h), and the
 * primary killed during a standby's handshake and during its resync.
 *
 * A failed case keeps its work directory (binlogs, every node's log) and
 * prints where it is. BQT_FILTER='name*' runs some cases only. */
#define _XOPEN_SOURCE 700 /* nftw() */

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/itest.h"
#include "tests/support/cluster.h"
#include "tests/support/faultproxy.h"
#include "tests/support/history.h"

#ifndef BQ_MKCERTS
#error "BQ_MKCERTS must name deploy/mkcerts"
#endif

#define WAIT_MS 30000       /* for a cluster to reach a state (ASan builds are slow) */
#define REPLY_MS 20000      /* for one reply; a sync put waits for the standby's fsync */
#define EXIT_MS 10000       /* for a node to exit after a signal */
#define REPL_TIMEOUT "1000" /* --repl-timeout of the stalled-link case */
#define STALL_MIN_MS 500    /* a stall is not noticed before half of it */
#define STALL_MAX_MS 6000   /* ...and surely after REPL_TIMEOUT plus a slow machine */
#define KILL9_WORKERS 4
#define PENDING_MS 200 /* every worker waits this long on the stalled link before the kill */
#define REFUSE_MS 5000 /* for refusing to start, --sync-timeout 300 after a held put */
#define BIG_BODY 10240 /* bodies of the cut-link case: several TCP segments each */

enum { A = 0, B = 1 }; /* the primary and the standby */

static char g_certs[128]; /* made once by the group setup */

typedef struct node {
    bqt_server_t srv; /* pid 0 when down */
    const char *name; /* "a" or "b" */
    char bdir[160];   /* its binlog directory */
    int repl_port;    /* its --peer port */
    int restarts;
} node_t;

typedef struct suite {
    char work[128];
    node_t n[2];
    bqt_server_t single[2]; /* the directories started alone, for comparing */
    bqt_proxy_t *proxy;     /* when set, the standby reaches the primary through it */
    int pfd;                /* a client connection to the primary, or -1 */
    bool passed;
} suite_t;

/* How a node is started. */
typedef struct opts {
    const char *role;         /* "primary" or "standby" */
    const char *cert;         /* name of the certificate in g_certs; NULL: --repl-plaintext */
    const char *const *extra; /* more arguments (NULL-terminated), or NULL */
} opts_t;

/* What the primary's stats say about the standby. */
typedef struct cstat {
    unsigned long long last, applied, flushed;
    char state[32]; /* streaming, catching-up, disconnected */
    char sync[32];  /* cluster-sync-state */
} cstat_t;

/* ---- suite set-up ---- */

static int group_setup(void **state)
{
    (void)state;
    char log[200];
    if (bqt_mkdtemp(g_certs, sizeof g_certs, "bq-repl-certs") != 0)
        return -1;
    snprintf(log, sizeof log, "%s.log", g_certs);
    const char *args[] = {g_certs, "a", "b", "beanstalkctl", NULL};
    int rc = bqt_run_to_exit(BQ_MKCERTS, args, log, 60000);
    if (rc != 0)
        fprintf(stderr, "%s exited with %d; its output is in %s\n", BQ_MKCERTS, rc, log);
    else
        unlink(log);
    return rc == 0 ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int group_teardown(void **state)
{
    (void)state;
    remove_tree(g_certs);
    return 0;
}

static int setup(void **state)
{
    suite_t *s = calloc(1, sizeof *s);
    if (!s || bqt_mkdtemp(s->work, sizeof s->work, "bq-repl") != 0) {
        free(s);
        return -1;
    }
    static const char *const names[] = {"a", "b"};
    char work[sizeof s->work]; /* a copy: GCC's -Wrestrict cannot tell s->work from n->bdir */
    memcpy(work, s->work, sizeof work);
    for (int i = 0; i < 2; i++) {
        node_t *n = &s->n[i];
        n->name = names[i];
        n->repl_port = bqt_free_port();
        snprintf(n->bdir, sizeof n->bdir, "%s/%s", work, names[i]);
        if (mkdir(n->bdir, 0700) != 0 || n->repl_port <= 0) {
            remove_tree(s->work);
            free(s);
            return -1;
        }
    }
    s->pfd = -1;
    *state = s;
    return 0;
}

/* Appends node n's current log to <work>/<name>.log (kept on failure). */
static void save_log(suite_t *s, const node_t *n, const char *why)
{
    char path[200], buf[8192];
    size_t got;
    if (!n->srv.log_path[0] || !n->srv.dir[0])
        return;
    snprintf(path, sizeof path, "%s/%s.log", s->work, n->name);
    FILE *in = fopen(n->srv.log_path, "r"), *out = fopen(path, "a");
    if (out)
        fprintf(out, "=== node %s, start %d, %s ===\n", n->name, n->restarts, why);
    while (in && out && (got = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, got, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

/* Prints the last lines of a log file to stderr. */
static void print_tail(const char *title, const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    if (f && fseek(f, -(long)(sizeof buf - 1), SEEK_END) != 0)
        rewind(f); /* a smaller file */
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = buf + n;
    for (int lines = 0; p > buf && lines < 40; p--)
        lines += p[-1] == '\n';
    fprintf(stderr, "--- last lines of %s (%s) ---\n%s--- end ---\n", title, path, p);
}

static int teardown(void **state)
{
    suite_t *s = *state;
    if (s->pfd >= 0)
        close(s->pfd);
    bqt_proxy_stop(s->proxy);
    for (int i = 0; i < 2; i++) {
        node_t *n = &s->n[i];
        if (!s->passed && n->srv.dir[0])
            print_tail(n->name, n->srv.log_path);
        save_log(s, n, s->passed ? "end of the case" : "the case failed");
        bqt_server_stop(&n->srv);
        bqt_server_stop(&s->single[i]);
    }
    if (!s->passed)
        fprintf(stderr, "work directory kept: %s (binlogs a/ b/, logs a.log b.log)\n", s->work);
    else if (!getenv("BQT_KEEP_DIRS"))
        remove_tree(s->work);
    free(s);
    return 0;
}

/* ---- nodes ---- */

/* Starts node i of s as a cluster node (o) on its binlog directory, on a
 * new client port; the node's previous process must be down. */
static void node_start(suite_t *s, int i, const opts_t *o)
{
    node_t *n = &s->n[i];
    const char *args[48];
    char role[32], peer_a[64], peer_b[64], cert[200], key[200], ca[200];
    size_t k = 0;
    int a_port = i == B && s->proxy ? bqt_proxy_port(s->proxy) : s->n[A].repl_port;
    snprintf(role, sizeof role, "--role=%s", o->role);
    snprintf(peer_a, sizeof peer_a, "a=127.0.0.1:%d", a_port);
    snprintf(peer_b, sizeof peer_b, "b=127.0.0.1:%d", s->n[B].repl_port);
    args[k++] = "-b";
    args[k++] = n->bdir;
    args[k++] = role;
    args[k++] = "--node-id";
    args[k++] = n->name;
    args[k++] = "--peer";
    args[k++] = peer_a;
    args[k++] = "--peer";
    args[k++] = peer_b;
    if (o->cert) {
        snprintf(cert, sizeof cert, "%s/%s.pem", g_certs, o->cert);
        snprintf(key, sizeof key, "%s/%s.key", g_certs, o->cert);
        snprintf(ca, sizeof ca, "%s/ca.pem", g_certs);
        const char *tls[] = {"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca};
        for (size_t t = 0; t < 6; t++)
            args[k++] = tls[t];
    } else {
        args[k++] = "--repl-plaintext";
    }
    for (const char *const *e = o->extra; e && *e && k < 47; e++)
        args[k++] = *e;
    args[k] = NULL;
    if (n->srv.dir[0]) {
        save_log(s, n, "before a restart");
        bqt_server_stop(&n->srv);
    }
    n->restarts++;
    if (bqt_server_start(&n->srv, bqt_our_binary(), args) != 0)
        fail_msg("node %s (%s) did not start on %s", n->name, o->role, n->bdir);
}

/* Starts the primary and opens s->pfd to it. */
static void primary_start(suite_t *s, const opts_t *o)
{
    node_start(s, A, o);
    if (s->pfd >= 0)
        close(s->pfd);
    s->pfd = bqt_client(&s->n[A].srv);
}

/* Sends sig to node i and waits for it to exit; a SIGTERM must end it
 * cleanly (exit 0). */
static void node_signal(suite_t *s, int i, int sig)
{
    node_t *n = &s->n[i];
    assert_true(n->srv.pid > 0);
    bqt_server_signal(&n->srv, sig);
    int status = bqt_server_wait(&n->srv, EXIT_MS);
    if (status == -1)
        fail_msg("node %s did not exit within %d ms of signal %d", n->name, EXIT_MS, sig);
    if (sig == SIGTERM && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fail_msg("node %s did not exit cleanly after SIGTERM (status 0x%x)", n->name, status);
}

/* True while node i's process runs. */
static bool node_alive(suite_t *s, int i)
{
    node_t *n = &s->n[i];
    return n->srv.pid > 0 && waitpid(n->srv.pid, NULL, WNOHANG) == 0;
}

/* ---- logs ---- */

/* Lines of node i's current log that contain `a` and (unless NULL) `b`. */
static size_t log_count(suite_t *s, int i, const char *a, const char *b)
{
    return bqt_log_count(s->n[i].srv.log_path, a, b);
}

/* Waits until node i's log has at least `atleast` lines with a (and b). */
static void wait_log(suite_t *s, int i, const char *a, const char *b, size_t atleast)
{
    bqt_wait_log(s->n[i].srv.log_path, s->n[i].name, a, b, atleast, WAIT_MS);
}

/* ---- client I/O ---- */

/* Sends cmd and returns its whole reply: the line, plus the data of OK,
 * FOUND and RESERVED (malloc'd). Fails the test on timeout or EOF. */
static char *ask(int fd, const char *cmd)
{
    bqt_sends(fd, cmd);
    char *line = bqt_read_line(fd, REPLY_MS);
    if (!line)
        fail_msg("no reply within %d ms to \"%.*s\"", REPLY_MS, (int)strcspn(cmd, "\r"), cmd);
    bool data =
        !strncmp(line, "OK ", 3) || !strncmp(line, "FOUND ", 6) || !strncmp(line, "RESERVED ", 9);
    if (!data)
        return line;
    size_t n = strtoull(strrchr(line, ' ') + 1, NULL, 10), ll = strlen(line);
    char *all = realloc(line, ll + n + 3);
    assert_non_null(all);
    assert_int_equal(bqt_read_n(fd, all + ll, n + 2, REPLY_MS), n + 2);
    all[ll + n + 2] = '\0';
    return all;
}

/* Sends a put and returns the id from INSERTED (fails on any other reply). */
static unsigned long long put_job(int fd, unsigned pri, unsigned delay, const char *body)
{
    size_t len = strlen(body);
    char head[96];
    snprintf(head, sizeof head, "put %u %u 120 %zu\r\n", pri, delay, len);
    bqt_sends(fd, head);
    bqt_send(fd, body, len);
    char *line = ask(fd, "\r\n");
    if (strncmp(line, "INSERTED ", 9) != 0)
        fail_msg("put: expected INSERTED, got \"%.60s\"", line);
    unsigned long long id = strtoull(line + 9, NULL, 10);
    free(line);
    return id;
}

/* Sends the formatted command and expects the reply `want`. */
static void cmdf(int fd, const char *want, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void cmdf(int fd, const char *want, const char *fmt, ...)
{
    char cmd[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    it_cmd(fd, cmd, want);
}

/* reserve-job id, expecting RESERVED with that id. */
static void reserve_job(int fd, unsigned long long id)
{
    char cmd[64], want[64];
    snprintf(cmd, sizeof cmd, "reserve-job %llu\r\n", id);
    snprintf(want, sizeof want, "RESERVED %llu ", id);
    char *r = ask(fd, cmd);
    if (strncmp(r, want, strlen(want)) != 0)
        fail_msg("%s: got \"%.60s\"", cmd, r);
    free(r);
}

/* ---- the primary's view of the standby ---- */

static unsigned long long field(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void cluster_stat(suite_t *s, cstat_t *c)
{
    char *body = it_ok(s->pfd, "stats\r\n");
    char *last = it_yaml_get(body, "cluster-last-lsn");
    char *sb = it_yaml_get(body, "cluster-standby-b");
    char *sync = it_yaml_get(body, "cluster-sync-state");
    if (!last || !sb || !sync)
        fail_msg("the primary's stats lack the cluster keys:\n%s", body);
    const char *st = strstr(sb, "state=");
    *c = (cstat_t){.last = strtoull(last, NULL, 10),
                   .applied = field(sb, "applied="),
                   .flushed = field(sb, "flushed=")};
    if (st)
        sscanf(st, "state=%31[a-z-]", c->state);
    snprintf(c->sync, sizeof c->sync, "%s", sync);
    free(body);
    free(last);
    free(sb);
    free(sync);
}

typedef struct st_wait {
    suite_t *s;
    const char *state;
    bool caught_up; /* also applied == cluster-last-lsn */
    cstat_t seen;
} st_wait_t;

static bool standby_reached(void *arg)
{
    st_wait_t *w = arg;
    cluster_stat(w->s, &w->seen);
    return strcmp(w->seen.state, w->state) == 0 &&
           (!w->caught_up || w->seen.applied == w->seen.last);
}

/* Waits until the primary reports the standby in `state` (and, with
 * caught_up, applied == cluster-last-lsn); returns what it saw. */
static cstat_t wait_standby(suite_t *s, const char *state, bool caught_up)
{
    st_wait_t w = {s, state, caught_up, {0}};
    if (!bqt_wait_until(standby_reached, &w, WAIT_MS))
        fail_msg("within %d ms the standby did not reach %s%s: state=%s applied=%llu last=%llu",
                 WAIT_MS, state, caught_up ? " with applied == last" : "", w.seen.state,
                 w.seen.applied, w.seen.last);
    return w.seen;
}

/* Waits until the standby has applied everything the primary wrote. */
static void wait_caught_up(suite_t *s)
{
    cstat_t c = wait_standby(s, "streaming", true);
    assert_true(c.last > 0);
    assert_int_equal(c.flushed, c.last);
}

/* ---- comparing two directories ---- */

static void start_single(bqt_server_t *srv, const char *dir)
{
    const char *args[] = {"-b", dir, NULL};
    if (bqt_server_start(srv, bqt_our_binary(), args) != 0)
        fail_msg("a single node did not start on %s", dir);
}

/* Both nodes must be down. Starts each directory alone and compares every
 * job 1..max_id and every tube; asserts that `live` jobs exist. */
static void compare_dirs(suite_t *s, unsigned long long max_id, size_t live)
{
    assert_true(s->n[A].srv.pid == 0 && s->n[B].srv.pid == 0);
    unsigned long long *ids = malloc((max_id ? max_id : 1) * sizeof *ids);
    assert_non_null(ids);
    for (unsigned long long id = 1; id <= max_id; id++)
        ids[id - 1] = id;
    size_t found = bqc_compare_dirs(s->n[A].bdir, s->n[B].bdir, ids, max_id);
    free(ids);
    if (found != live)
        fail_msg("the directories agree but hold %zu jobs of ids 1..%llu, want %zu", found, max_id,
                 live);
}

/* Waits for the standby to catch up, stops both (SIGTERM) and compares. */
static void stop_and_compare(suite_t *s, unsigned long long max_id, size_t live)
{
    wait_caught_up(s);
    close(s->pfd);
    s->pfd = -1;
    node_signal(s, A, SIGTERM);
    node_signal(s, B, SIGTERM);
    compare_dirs(s, max_id, live);
}

/* ---- workloads ---- */

/* Puts n jobs into tube `tube` of the primary and deletes every third one;
 * returns the highest id; adds the jobs left to *live. */
static unsigned long long churn(suite_t *s, const char *tube, int n, size_t body_len, size_t *live)
{
    char use[128], using[128], *body = malloc(body_len + 1);
    unsigned long long id = 0;
    assert_non_null(body);
    snprintf(use, sizeof use, "use %s\r\n", tube);
    snprintf(using, sizeof using, "USING %s\r\n", tube);
    it_cmd(s->pfd, use, using);
    for (int i = 0; i < n; i++) {
        int w = snprintf(body, body_len + 1, "%s-%d-", tube, i);
        memset(body + w, 'a' + i % 26, body_len > (size_t)w ? body_len - (size_t)w : 0);
        body[body_len > (size_t)w ? body_len : (size_t)w] = '\0';
        id = put_job(s->pfd, (unsigned)i % 3, 0, body);
        if (i % 3 == 2)
            cmdf(s->pfd, "DELETED\r\n", "delete %llu\r\n", id);
        else
            ++*live;
    }
    free(body);
    return id;
}

/* One round of the mixed workload (8 puts, 2 deletes); returns the last id. */
static unsigned long long mixed_round(int fd, int r)
{
    char b[64];
    unsigned long long j[8];
    static const char *const tubes[] = {"alpha", "alpha", "alpha", "alpha",
                                        "beta",  "beta",  "delta", "delta"};
    static const unsigned delays[] = {0, 0, 0, 3600, 0, 0, 3600, 3600};
    for (int k = 0; k < 8; k++) {
        char use[64], using[64];
        snprintf(use, sizeof use, "use %s\r\n", tubes[k]);
        snprintf(using, sizeof using, "USING %s\r\n", tubes[k]);
        it_cmd(fd, use, using);
        snprintf(b, sizeof b, "%s-round%d-job%d", tubes[k], r, k);
        j[k] = put_job(fd, 10u + (unsigned)k, delays[k], b);
    }
    cmdf(fd, "DELETED\r\n", "delete %llu\r\n", j[0]);
    reserve_job(fd, j[1]);
    cmdf(fd, "RELEASED\r\n", "release %llu 5 3600\r\n", j[1]);
    reserve_job(fd, j[2]);
    cmdf(fd, "BURIED\r\n", "bury %llu 7\r\n", j[2]);
    reserve_job(fd, j[4]);
    cmdf(fd, "BURIED\r\n", "bury %llu 8\r\n", j[4]);
    it_cmd(fd, "use beta\r\n", "USING beta\r\n");
    it_cmd(fd, "kick 10\r\n", "KICKED 1\r\n");
    it_cmd(fd, "use delta\r\n", "USING delta\r\n");
    it_cmd(fd, "kick 1\r\n", "KICKED 1\r\n");
    if (r % 2)
        cmdf(fd, "KICKED\r\n", "kick-job %llu\r\n", j[2]);
    reserve_job(fd, j[5]); /* stays reserved: ready again after a restart */
    cmdf(fd, "TOUCHED\r\n", "touch %llu\r\n", j[5]);
    cmdf(fd, "DELETED\r\n", "delete %llu\r\n", j[7]);
    return j[7];
}

/* ---- 1. TLS: records flow and the states match ---- */

static const opts_t primary_tls = {"primary", "a", NULL};
static const opts_t standby_tls = {"standby", "b", NULL};

static void start_pair(suite_t *s, const opts_t *p, const opts_t *b)
{
    primary_start(s, p);
    node_start(s, B, b);
    wait_standby(s, "streaming", false);
}

static void tls_records_flow_and_states_match(void **state)
{
    suite_t *s = *state;
    start_pair(s, &primary_tls, &standby_tls);
    assert_int_equal(log_count(s, A, "replication: standby connected", "security=TLSv1."), 1);
    unsigned long long max = 0;
    int rounds = 6;
    for (int r = 0; r < rounds; r++)
        max = mixed_round(s->pfd, r);
    it_cmd(s->pfd, "pause-tube delta 3600\r\n", "PAUSED\r\n");
    it_cmd(s->pfd, "pause-tube beta 1800\r\n", "PAUSED\r\n");
    assert_int_equal(max, 8 * (unsigned long long)rounds);
    stop_and_compare(s, max, 6 * (size_t)rounds);
    s->passed = true;
}

/* ---- 2. clients on the standby reach the primary ---- */

static void standby_via_proxy(void **state)
{
    suite_t *s = *state;
    start_pair(s, &primary_tls, &standby_tls);
    wait_log(s, B, "proxy: clients go to the primary", NULL, 1);
    int sfd = bqt_client(&s->n[B].srv);
    it_cmd(sfd, "use proxied\r\n", "USING proxied\r\n");
    unsigned long long id = put_job(sfd, 3, 0, "through the standby");
    char cmd[64];
    snprintf(cmd, sizeof cmd, "peek %llu\r\n", id);
    char *direct = ask(s->pfd, cmd), *proxied = ask(sfd, cmd), want[128];
    snprintf(want, sizeof want, "FOUND %llu 19\r\nthrough the standby\r\n", id);
    assert_string_equal(direct, want);
    assert_string_equal(proxied, want);
    free(direct);
    free(proxied);
    snprintf(cmd, sizeof cmd, "stats-job %llu\r\n", id);
    bqc_same_reply(s->pfd, sfd, cmd, "age,time-left");
    char *role = bqt_stat(sfd, "stats\r\n", "cluster-role");
    assert_string_equal(role, "primary"); /* the primary's own stats */
    free(role);
    it_cmd(sfd, "list-tube-used\r\n", "USING proxied\r\n");
    it_cmd(sfd, "no-such-command\r\n", "UNKNOWN_COMMAND\r\n");
    cmdf(sfd, "DELETED\r\n", "delete %llu\r\n", id);
    cmdf(s->pfd, "NOT_FOUND\r\n", "peek %llu\r\n", id);
    close(sfd);
    wait_caught_up(s);
    s->passed = true;
}

/* ---- 3. a restarted standby resumes ---- */

static const char *const async_fallback[] = {"--sync-fallback", "async", "--sync-timeout", "200",
                                             NULL};

static void standby_restart_resumes(void **state)
{
    suite_t *s = *state;
    const opts_t p = {"primary", "a", async_fallback};
    size_t live = 0;
    unsigned long long max = 0;
    start_pair(s, &p, &standby_tls);
    static const int sigs[] = {SIGTERM, SIGKILL};
    for (int round = 0; round < 2; round++) {
        char tube[32];
        snprintf(tube, sizeof tube, "up%d", round);
        max = churn(s, tube, 12, 100, &live);
        wait_caught_up(s);
        node_signal(s, B, sigs[round]);
        wait_standby(s, "disconnected", false);
        snprintf(tube, sizeof tube, "down%d", round);
        max = churn(s, tube, 15, 100, &live); /* acknowledged without the standby */
        cstat_t c;
        cluster_stat(s, &c);
        assert_true(c.applied < c.last);
        assert_string_equal(c.sync, "degraded");
        node_start(s, B, &standby_tls);
        wait_log(s, B, "replication: following the primary", "start=resume", 1);
        assert_int_equal(log_count(s, B, "start=resync", NULL), 0);
        wait_caught_up(s);
    }
    assert_int_equal(log_count(s, A, "replication: standby connected", "start=resume"), 3);
    stop_and_compare(s, max, live);
    s->passed = true;
}

/* ---- 4. an outage longer than the primary keeps segments: resync ---- */

static long long primary_stat(suite_t *s, const char *key)
{
    return bqt_stat_int(s->pfd, "stats\r\n", key);
}

/* Puts and deletes 2 KiB jobs until the primary's oldest segment is above
 * `seg`; returns the last id. */
static unsigned long long churn_past(suite_t *s, long long seg)
{
    unsigned long long id = 0;
    char body[2049];
    memset(body, 'z', 2048);
    body[2048] = '\0';
    it_cmd(s->pfd, "use churn\r\n", "USING churn\r\n");
    for (int i = 0; i < 500 && primary_stat(s, "binlog-oldest-index") <= seg; i++) {
        for (int k = 0; k < 20; k++) {
            id = put_job(s->pfd, 1, 0, body);
            cmdf(s->pfd, "DELETED\r\n", "delete %llu\r\n", id);
        }
    }
    if (primary_stat(s, "binlog-oldest-index") <= seg)
        fail_msg("compaction kept segment %lld on the primary", seg);
    return id;
}

/* Puts jobs into tube "late" while the standby downloads the resync, until
 * it has installed it (at most 20,000); returns the last id. */
static unsigned long long put_during_resync(suite_t *s, unsigned long long max, size_t *live)
{
    int n = 0;
    it_cmd(s->pfd, "use late\r\n", "USING late\r\n");
    while (log_count(s, B, "resync: download installed", NULL) == 0 && n < 20000) {
        char body[64];
        snprintf(body, sizeof body, "during-resync-%d", n++);
        max = put_job(s->pfd, 1, 0, body);
        ++*live;
    }
    fprintf(stderr, "%d puts while the standby resynced\n", n);
    return max;
}

static void long_outage_resync(void **state)
{
    suite_t *s = *state;
    const char *const extra[] = {"-s",  "65536", "--sync-fallback", "async", "--sync-timeout",
                                 "200", NULL};
    const opts_t p = {"primary", "a", extra};
    size_t live = 0;
    start_pair(s, &p, &standby_tls);
    churn(s, "early", 30, 300, &live); /* old jobs the resync must carry */
    wait_caught_up(s);
    node_signal(s, B, SIGTERM);
    long long seg = primary_stat(s, "binlog-current-index");
    churn_past(s, seg);
    unsigned long long max = churn(s, "late", 10, 300, &live);
    node_start(s, B, &standby_tls);
    pid_t pid_before = s->n[B].srv.pid;
    max = put_during_resync(s, max, &live);
    wait_log(s, B, "replication: following the primary", "start=resync", 1);
    wait_log(s, A, "replication: standby connected", "start=resync", 1);
    wait_log(s, B, "resync: download installed", NULL, 1);
    wait_log(s, B, "replication: following the primary", "start=resume", 1);
    wait_caught_up(s);
    assert_int_equal(s->n[B].srv.pid, pid_before); /* it re-executed itself */
    assert_true(node_alive(s, B));
    stop_and_compare(s, max, live);
    s->passed = true;
}

/* ---- 5. wrong certificates, plaintext and garbage are refused ---- */

/* Sends bytes to the primary's replication port and expects it to close
 * the connection (within the handshake timeout). */
static void send_garbage(suite_t *s, const void *bytes, size_t len)
{
    int fd = bqt_connect(s->n[A].repl_port);
    assert_true(fd >= 0);
    if (len > 0)
        bqt_send(fd, bytes, len);
    bqt_expect_eof(fd, WAIT_MS);
    close(fd);
}

/* The primary still takes a put (async fallback) and has no standby. */
static void primary_serves_alone(suite_t *s)
{
    cstat_t c;
    cluster_stat(s, &c);
    assert_string_equal(c.state, "disconnected");
    unsigned long long id = put_job(s->pfd, 0, 0, "still serving");
    cmdf(s->pfd, "DELETED\r\n", "delete %llu\r\n", id);
    assert_int_equal(log_count(s, A, "replication: standby connected", NULL), 0);
}

static void wrong_certificates_refused(void **state)
{
    suite_t *s = *state;
    const char *const extra[] = {
        "--sync-fallback", "async", "--sync-timeout", "200", "--repl-timeout", REPL_TIMEOUT, NULL};
    const opts_t p = {"primary", "a", extra};
    static const struct {
        const char *cert, *why;
    } bad[] = {
        {NULL, "tls: "}, /* plaintext */
    };
    /* A certificate that does not name the node (another CA's, or the right
     * CA's with another name): the node refuses it at start-up, since every
     * peer would (test_trust sends such certificates to a primary itself). */
    static const char *const wrong[] = {"rogue", "wrongname"};
    for (size_t i = 0; i < 2; i++) {
        char cert[256], key[256], ca[256], log[300];
        snprintf(cert, sizeof cert, "%s/%s.pem", g_certs, wrong[i]);
        snprintf(key, sizeof key, "%s/%s.key", g_certs, wrong[i]);
        snprintf(ca, sizeof ca, "%s/ca.pem", g_certs);
        snprintf(log, sizeof log, "%s/wrong-cert.log", s->n[B].bdir);
        const char *args[] = {"--check-config",
                              "--role=standby",
                              "--node-id",
                              "b",
                              "--peer",
                              "a=127.0.0.1:1",
                              "--peer",
                              "b=127.0.0.1:2",
                              "-b",
                              s->n[B].bdir,
                              "--tls-cert",
                              cert,
                              "--tls-key",
                              key,
                              "--tls-ca",
                              ca,
                              NULL};
        assert_int_equal(bqt_run_to_exit(bqt_our_binary(), args, log, 10000), 1);
        assert_true(bqt_log_count(log, "does not name --node-id b", NULL) >= 1);
    }
    primary_start(s, &p);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const opts_t o = {"standby", bad[i].cert, NULL};
        size_t before = log_count(s, A, "replication: TLS peer refused", bad[i].why);
        node_start(s, B, &o);
        /* The standby retries; the line is written at most once a second. */
        wait_log(s, A, "replication: TLS peer refused", bad[i].why, before + 1);
        primary_serves_alone(s);
        node_signal(s, B, SIGTERM);
    }
    size_t before = log_count(s, A, "replication: connection closed", "timeout");
    static const char http[] = "GET / HTTP/1.0\r\n\r\n";
    static const unsigned char junk[] = {0x00, 0x00, 0x00, 0x10, 0xff, 0xfe, 0x01, 0x02,
                                         0x16, 0x03, 0x01, 0x7f, 0xff, 0x00, 0x41, 0x42};
    send_garbage(s, http, sizeof http - 1);
    send_garbage(s, junk, sizeof junk);
    send_garbage(s, NULL, 0); /* silent: dropped by the handshake timeout */
    wait_log(s, A, "replication: connection closed", "timeout", before + 1);
    primary_serves_alone(s);
    /* The right certificate is taken: the refusals were about the peers. */
    node_start(s, B, &standby_tls);
    wait_caught_up(s);
    s->passed = true;
}

/* ---- 6. kill -9 of a synchronous primary loses nothing acknowledged ---- */

/* Starts the pair with the standby reaching the primary through s->proxy. */
static void start_proxied_pair(suite_t *s, const opts_t *p, const opts_t *b)
{
    primary_start(s, p);
    s->proxy = bqt_proxy_start("127.0.0.1", s->n[A].repl_port);
    assert_non_null(s->proxy);
    node_start(s, B, b);
    wait_standby(s, "streaming", false);
    assert_true(bqt_proxy_connections(s->proxy) >= 1);
}

typedef struct worker {
    int id, port;
    bqh_history_t *h;
    atomic_bool *stop;
    atomic_ulong *acked;
    atomic_llong waiting_since; /* bqt_now_ms() when the command in flight was sent, or 0 */
    char error[160];
    pthread_t thread;
} worker_t;

/* Sends a command; the reply line (malloc'd) or NULL when the connection
 * died. Worker threads only (no cmocka). */
static char *w_ask(worker_t *w, int fd, const char *cmd, size_t len)
{
    atomic_store(&w->waiting_since, bqt_now_ms());
    for (size_t off = 0; off < len;) {
        ssize_t n = send(fd, cmd + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        off += (size_t)n;
    }
    char *line = bqt_read_line(fd, REPLY_MS);
    atomic_store(&w->waiting_since, 0);
    return line;
}

/* Deletes the oldest of the worker's acknowledged ids; false when the
 * connection died. */
static bool w_delete(worker_t *w, int fd, unsigned long long *ids, size_t *n)
{
    char cmd[64];
    int len = snprintf(cmd, sizeof cmd, "delete %llu\r\n", ids[0]);
    uint64_t t0 = bqh_now_ns();
    char *line = w_ask(w, fd, cmd, (size_t)len);
    bqh_outcome_t out = !line                            ? BQH_UNKNOWN
                        : !strcmp(line, "DELETED\r\n")   ? BQH_ACKED
                        : !strcmp(line, "NOT_FOUND\r\n") ? BQH_NOT_FOUND
                                                         : BQH_UNKNOWN;
    if (line && out == BQH_UNKNOWN)
        snprintf(w->error, sizeof w->error, "delete %llu: \"%.60s\"", ids[0], line);
    bqh_delete(w->h, w->id, t0, bqh_now_ns(), out, ids[0]);
    memmove(ids, ids + 1, --*n * sizeof *ids);
    free(line);
    return out != BQH_UNKNOWN;
}

/* Puts one job; false when the connection died. */
static bool w_put(worker_t *w, int fd, unsigned seq, unsigned long long *ids, size_t *n)
{
    char cmd[128], body[48];
    int blen = snprintf(body, sizeof body, "worker%d-job%u", w->id, seq);
    int len = snprintf(cmd, sizeof cmd, "put 0 0 120 %d\r\n%s\r\n", blen, body);
    uint64_t t0 = bqh_now_ns();
    char *line = w_ask(w, fd, cmd, (size_t)len);
    unsigned long long id = 0;
    bqh_outcome_t out = !line                                     ? BQH_UNKNOWN
                        : sscanf(line, "INSERTED %llu", &id) == 1 ? BQH_ACKED
                                                                  : BQH_REFUSED;
    if (out == BQH_REFUSED)
        snprintf(w->error, sizeof w->error, "put: \"%.60s\"", line);
    bqh_put(w->h, w->id, t0, bqh_now_ns(), out, id, body, (size_t)blen);
    if (out == BQH_ACKED) {
        ids[(*n)++] = id;
        atomic_fetch_add(w->acked, 1);
    }
    free(line);
    return out == BQH_ACKED;
}

/* Puts and deletes (one in two of its jobs) until stopped or the
 * connection dies. */
static void *kill9_worker(void *arg)
{
    worker_t *w = arg;
    unsigned long long ids[64];
    size_t n = 0;
    int fd = bqt_connect(w->port);
    char *line = fd >= 0 ? w_ask(w, fd, "use kill9\r\n", 11) : NULL;
    bool alive = line && !strcmp(line, "USING kill9\r\n");
    if (!alive)
        snprintf(w->error, sizeof w->error, "cannot use the tube: %s", line ? line : "no reply");
    free(line);
    for (unsigned seq = 0; alive && !atomic_load(w->stop); seq++) {
        alive = w_put(w, fd, seq, ids, &n);
        if (alive && (seq % 2 == 1 || n == 64))
            alive = w_delete(w, fd, ids, &n);
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

typedef struct kill9 {
    worker_t w[KILL9_WORKERS];
    atomic_bool stop;
    atomic_ulong acked;
    bqh_history_t *h;
} kill9_t;

typedef struct acked_wait {
    atomic_ulong *acked;
    unsigned long target;
} acked_wait_t;

static bool enough_acked(void *arg)
{
    acked_wait_t *a = arg;
    return atomic_load(a->acked) >= a->target;
}

/* Restarts the standby's directory as the primary and checks it against
 * the history. */
static void verify_promoted(suite_t *s, bqh_history_t *h)
{
    char err[256];
    bqh_snapshot_t *snap = NULL;
    bqh_report_t rep;
    node_start(s, B, &(opts_t){"primary", "b", NULL});
    wait_log(s, B, "cluster mode", "role=primary", 1);
    int fd = bqt_client(&s->n[B].srv);
    int rc = bqh_snapshot_take(h, fd, "kill9", WAIT_MS, &snap, err, sizeof err);
    close(fd); /* releases the jobs the snapshot reserved */
    if (rc != 0)
        fail_msg("snapshot of the promoted standby: %s", err);
    size_t bad = bqh_check(h, snap, NULL, &rep);
    bqh_snapshot_free(snap);
    bqh_report_summary(stderr, &rep);
    if (bad) {
        bqh_report_print(stderr, h, &rep);
        fail_msg("%zu acknowledged changes are not on the promoted standby", bad);
    }
    assert_true(rep.puts_acked > 0 && rep.deletes_acked > 0 && rep.present > 0);
}

static void kill9_start(suite_t *s, kill9_t *k)
{
    for (int i = 0; i < KILL9_WORKERS; i++) {
        k->w[i] = (worker_t){
            .id = i, .port = s->n[A].srv.port, .h = k->h, .stop = &k->stop, .acked = &k->acked};
        assert_int_equal(pthread_create(&k->w[i].thread, NULL, kill9_worker, &k->w[i]), 0);
    }
}

/* Stops and joins the workers; false when one got a wrong reply. */
static bool kill9_join(kill9_t *k)
{
    bool ok = true;
    atomic_store(&k->stop, true);
    for (int i = 0; i < KILL9_WORKERS; i++) {
        pthread_join(k->w[i].thread, NULL);
        if (k->w[i].error[0]) {
            fprintf(stderr, "worker %d: %s\n", i, k->w[i].error);
            ok = false;
        }
    }
    return ok;
}

typedef struct pending_wait {
    suite_t *s;
    kill9_t *k;
    cstat_t seen;
} pending_wait_t;

/* The primary has written changes that the standby has not flushed, and
 * either every worker has waited PENDING_MS for a reply (as it must: each
 * has a change in flight) or many changes are pending (replies that did
 * not wait: only a broken sync lets that happen). */
static bool changes_pending(void *arg)
{
    pending_wait_t *p = arg;
    long long now = bqt_now_ms();
    bool all_waiting = true;
    cluster_stat(p->s, &p->seen);
    for (int i = 0; i < KILL9_WORKERS; i++) {
        long long since = atomic_load(&p->k->w[i].waiting_since);
        all_waiting &= since > 0 && now - since >= PENDING_MS;
    }
    return p->seen.last >= p->seen.flushed + 2 &&
           (all_waiting || p->seen.last >= p->seen.flushed + 64);
}

/* Concurrent puts and deletes; once enough are acknowledged, the link to
 * the standby stalls (so the primary holds changes the standby lacks: their
 * replies must wait) and the primary is killed with SIGKILL. The standby,
 * killed too and restarted as the primary, must hold every acknowledged
 * put and no acknowledged delete. */
static void sync_kill9_no_acked_loss(void **state)
{
    suite_t *s = *state;
    const char *const f0[] = {"-f", "0", NULL};
    const opts_t p = {"primary", "a", f0}, b = {"standby", "b", f0};
    kill9_t *k = calloc(1, sizeof *k);
    assert_non_null(k);
    k->h = bqh_new();
    assert_non_null(k->h);
    start_proxied_pair(s, &p, &b);
    /* A moment that differs from run to run: after 150..349 puts. */
    unsigned long seed = (unsigned long)bqt_now_ms() ^ (unsigned long)getpid();
    acked_wait_t aw = {&k->acked, 150 + seed % 200};
    pending_wait_t pw = {s, k, {0}};
    kill9_start(s, k);
    bool reached = bqt_wait_until(enough_acked, &aw, WAIT_MS);
    bqt_proxy_set(s->proxy, BQT_PROXY_STALL);
    bool pending = reached && bqt_wait_until(changes_pending, &pw, WAIT_MS);
    bqh_fault(k->h,
              "kill -9 of the primary: %lu puts acknowledged, lsn %llu written, %llu on the "
              "standby",
              atomic_load(&k->acked), pw.seen.last, pw.seen.flushed);
    bqt_server_signal(&s->n[A].srv, SIGKILL);
    bool killed = bqt_server_wait(&s->n[A].srv, EXIT_MS) != -1;
    bool workers_ok = kill9_join(k);
    fprintf(stderr,
            "kill -9 after %lu acknowledged puts (target %lu); lsn %llu written, %llu "
            "flushed by the standby\n",
            atomic_load(&k->acked), aw.target, pw.seen.last, pw.seen.flushed);
    node_signal(s, B, SIGKILL);
    if (reached && pending && killed && workers_ok)
        verify_promoted(s, k->h);
    bqh_free(k->h);
    free(k);
    if (!reached || !pending || !killed || !workers_ok)
        fail_msg("puts acknowledged %d, changes pending %d, kill %d, replies as expected %d",
                 reached, pending, killed, workers_ok);
    s->passed = true;
}

/* ---- 7. a stalled link is noticed, and recovers ---- */

typedef struct sync_wait {
    suite_t *s;
    const char *want;
    cstat_t seen;
} sync_wait_t;

static bool sync_reached(void *arg)
{
    sync_wait_t *w = arg;
    cluster_stat(w->s, &w->seen);
    return strcmp(w->seen.sync, w->want) == 0;
}

/* Waits until the primary's cluster-sync-state is `want`. */
static void wait_sync_state(suite_t *s, const char *want)
{
    sync_wait_t w = {s, want, {0}};
    if (!bqt_wait_until(sync_reached, &w, WAIT_MS))
        fail_msg("cluster-sync-state stayed %s, want %s", w.seen.sync, want);
}

/* Stalls the link; returns once the primary reports the standby gone,
 * after checking how long that took. */
static void stall_until_noticed(suite_t *s)
{
    long long t0 = bqt_now_ms();
    bqt_proxy_set(s->proxy, BQT_PROXY_STALL);
    wait_standby(s, "disconnected", false);
    long long took = bqt_now_ms() - t0;
    fprintf(stderr, "stall noticed after %lld ms (--repl-timeout %s)\n", took, REPL_TIMEOUT);
    if (took < STALL_MIN_MS || took > STALL_MAX_MS)
        fail_msg("the stall was noticed after %lld ms, want %d..%d", took, STALL_MIN_MS,
                 STALL_MAX_MS);
    assert_int_equal(log_count(s, A, "replication: standby disconnected", "timeout"), 1);
}

/* --sync-fallback async, --sync-timeout 300: the primary notices the stall
 * within --repl-timeout, goes on taking writes (degraded), and the standby
 * comes back and catches up once the link flows again. */
static void stalled_link_detected(void **state)
{
    suite_t *s = *state;
    const char *const pe[] = {
        "--repl-timeout", REPL_TIMEOUT, "--sync-fallback", "async", "--sync-timeout", "300", NULL};
    const char *const be[] = {"--repl-timeout", REPL_TIMEOUT, NULL};
    const opts_t p = {"primary", "a", pe}, b = {"standby", "b", be};
    size_t live = 0;
    start_proxied_pair(s, &p, &b);
    churn(s, "before", 10, 200, &live);
    wait_caught_up(s);
    size_t connected = log_count(s, A, "replication: standby connected", NULL);
    stall_until_noticed(s);
    unsigned long long max = churn(s, "during", 4, 200, &live); /* taken: async fallback */
    cstat_t c;
    cluster_stat(s, &c);
    assert_string_equal(c.sync, "degraded");
    assert_true(c.applied < c.last);
    bqt_proxy_set(s->proxy, BQT_PROXY_PASS);
    wait_log(s, A, "replication: standby connected", "start=resume", connected + 1);
    wait_caught_up(s);
    wait_sync_state(s, "sync");
    stop_and_compare(s, max, live);
    s->passed = true;
}

/* Appends "got <reply> to <what>, want <want>" to problems when they differ. */
static void note_reply(char *problems, size_t cap, const char *what, const char *got,
                       const char *want)
{
    if (strcmp(got, want) == 0)
        return;
    size_t n = strlen(problems);
    snprintf(problems + n, cap - n, "\n  %s: got \"%.*s\", want \"%.*s\"", what,
             (int)strcspn(got, "\r"), got, (int)strcspn(want, "\r"), want);
}

/* The primary logged that it refuses writes for want of a standby in sync. */
static bool primary_refusing(void *arg)
{
    return log_count(arg, A, "refusing writes", "too few standbys in sync") >= 1;
}

/* Strict mode (--sync-fallback refuse), --sync-timeout 300, the link stalled: a
 * put made then is held until the standby has it; once the primary
 * refuses, another put answers DRAINING and a delete OUT_OF_MEMORY
 * (docs/replication.md), reads go on; after the held reply arrives (the
 * standby is in sync again), writes are taken again. The wrong replies are
 * collected and reported together after the state comparison. */
static void stalled_link_refuses_writes(void **state)
{
    suite_t *s = *state;
    const char *const pe[] = {
        "--repl-timeout", REPL_TIMEOUT, "--sync-timeout", "300", "--sync-fallback", "refuse", NULL};
    const char *const be[] = {"--repl-timeout", REPL_TIMEOUT, NULL};
    const opts_t p = {"primary", "a", pe}, b = {"standby", "b", be};
    char problems[1024] = "", cmd[64];
    size_t live = 0;
    start_proxied_pair(s, &p, &b);
    unsigned long long kept = churn(s, "before", 10, 200, &live);
    wait_caught_up(s);
    stall_until_noticed(s);
    int held = bqt_client(&s->n[A].srv);
    bqt_sends(held, "use during\r\nput 0 0 120 4\r\nheld\r\n");
    bqt_expect(held, "USING during\r\n");
    /* Refusing starts --sync-timeout after the held put; the primary logs it. */
    if (!bqt_wait_until(primary_refusing, s, REFUSE_MS)) {
        cstat_t c;
        cluster_stat(s, &c);
        snprintf(problems, sizeof problems,
                 "\n  the primary did not log \"refusing writes\" "
                 "within %d ms (cluster-sync-state: %s)",
                 REFUSE_MS, c.sync);
    }
    char *r = ask(s->pfd, "put 0 0 120 7\r\nrefused\r\n");
    note_reply(problems, sizeof problems, "put while refusing", r, "DRAINING\r\n");
    free(r);
    snprintf(cmd, sizeof cmd, "delete %llu\r\n", kept);
    r = ask(s->pfd, cmd);
    note_reply(problems, sizeof problems, "delete while refusing", r, "OUT_OF_MEMORY\r\n");
    free(r);
    it_expect_state(s->pfd, kept, "ready"); /* reads go on */
    bqt_expect_silence(held, 100);          /* not on the standby: no reply */
    bqt_proxy_set(s->proxy, BQT_PROXY_PASS);
    char *line = bqt_expect_prefix(held, "INSERTED ");
    unsigned long long max = strtoull(line + 9, NULL, 10);
    free(line);
    close(held);
    live++;
    r = ask(s->pfd, "put 0 0 120 5\r\nafter\r\n"); /* the refused put took an id */
    if (strncmp(r, "INSERTED ", 9) == 0) {
        max = strtoull(r + 9, NULL, 10);
        live++;
    } else {
        note_reply(problems, sizeof problems, "put once the held reply arrived", r,
                   "INSERTED <id>\r\n");
    }
    free(r);
    wait_caught_up(s);
    stop_and_compare(s, max, live);
    if (problems[0])
        fail_msg("wrong replies under --sync-fallback refuse:%s", problems);
    s->passed = true;
}

/* ---- 8. a link cut in the middle of a frame ---- */

/* Puts n jobs with BIG_BODY bytes into the current tube; the last id. */
static unsigned long long big_puts(suite_t *s, int n, int tag, size_t *live)
{
    static char body[BIG_BODY + 1];
    unsigned long long id = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(body, sizeof body, "big-%d-%d-", tag, i);
        memset(body + w, 'A' + (tag + i) % 26, BIG_BODY - (size_t)w);
        body[BIG_BODY] = '\0';
        id = put_job(s->pfd, 1, 0, body);
        ++*live;
    }
    return id;
}

static void cut_mid_frame(void **state)
{
    suite_t *s = *state;
    const opts_t p = {"primary", NULL, NULL}, b = {"standby", NULL, NULL}; /* plaintext */
    /* Bytes after which each cut falls: inside a frame, inside a length
     * prefix, right at the start of the next message. */
    static const size_t cuts[] = {15000, 3, BIG_BODY + 7, 1, 2 * BIG_BODY + 100};
    size_t live = 0;
    unsigned long long max = 0;
    start_proxied_pair(s, &p, &b);
    it_cmd(s->pfd, "use big\r\n", "USING big\r\n");
    max = big_puts(s, 3, 0, &live);
    wait_caught_up(s);
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int conns = bqt_proxy_connections(s->proxy);
        size_t resumed = log_count(s, A, "replication: standby connected", "start=resume");
        bqt_proxy_cut_after(s->proxy, BQT_PROXY_DOWN, cuts[i]);
        /* Sync replication: each reply waits until the standby has it. */
        max = big_puts(s, 4, (int)i + 1, &live);
        wait_log(s, A, "replication: standby connected", "start=resume", resumed + 1);
        wait_caught_up(s);
        assert_true(bqt_proxy_connections(s->proxy) > conns);
    }
    assert_int_equal(log_count(s, B, "level=error", NULL), 0);
    assert_int_equal(log_count(s, B, "start=resync", NULL), 0);
    stop_and_compare(s, max, live);
    s->passed = true;
}

/* ---- 11. manual failover through the admin API: promote ---- */

/* Sends `method path` to the admin API on port as the operator (TLS with
 * g_certs' beanstalkctl certificate); returns the status code (-1 when no
 * answer) and copies the body into body. */
static int admin_ask(int port, const char *method, const char *path, char *body, size_t cap)
{
    return bqa_call(port, g_certs, "beanstalkctl", method, path, REPLY_MS, body, cap);
}

typedef struct commit_seen {
    int port;
    unsigned long long want;
} commit_seen_t;

static bool commit_seen(void *arg)
{
    commit_seen_t *c = arg;
    char body[4096];
    if (admin_ask(c->port, "GET", "/status", body, sizeof body) != 200)
        return false;
    const char *p = strstr(body, "\"primary_commit_lsn\":");
    return p && strtoull(p + 21, NULL, 10) >= c->want;
}

typedef struct promote_try {
    int port, status;
    char body[256];
} promote_try_t;

/* Asks for a promotion; done unless refused because the primary is alive. */
static bool promote_tried(void *arg)
{
    promote_try_t *t = arg;
    t->status = admin_ask(t->port, "POST", "/promote", t->body, sizeof t->body);
    return !(t->status == 409 && strstr(t->body, "alive"));
}

/* Two nodes, sync mode with the refuse fallback: while the primary lives,
 * promote is refused (409); once it is killed, the standby can prove it
 * holds every acknowledged write and promotes itself (202) and restarts as
 * the primary of a new epoch; the old primary, started again with
 * --role=primary, finds that b leads and follows it, and b takes writes;
 * nothing acknowledged is lost. */
static void promote_after_the_primary_died(void **state)
{
    suite_t *s = *state;
    char port_b[16], body[256];
    int admin_b = bqt_free_port();
    snprintf(port_b, sizeof port_b, "%d", admin_b);
    const char *const bextra[] = {"--admin-listen", port_b, "--repl-timeout", "1000", NULL};
    const opts_t b = {"standby", "b", bextra};
    size_t live = 0;
    start_pair(s, &primary_tls, &b);
    unsigned long long max = churn(s, "before", 30, 200, &live);
    wait_caught_up(s);
    /* The standby knows the primary's commit point from a heartbeat. */
    commit_seen_t cs = {admin_b, (unsigned long long)primary_stat(s, "cluster-commit-lsn")};
    if (!bqt_wait_until(commit_seen, &cs, WAIT_MS))
        fail_msg("the standby's status never showed primary_commit_lsn %llu", cs.want);
    assert_int_equal(admin_ask(admin_b, "POST", "/promote", body, sizeof body), 409);
    if (!strstr(body, "alive"))
        fail_msg("promote with the primary alive answered: %s", body);
    node_signal(s, A, SIGKILL);
    wait_log(s, B, "replication: lost the primary", NULL, 1);
    /* Refused until the primary has been silent for the timeout. */
    promote_try_t t = {admin_b, 0, ""};
    bqt_wait_until(promote_tried, &t, WAIT_MS);
    if (t.status != 202)
        fail_msg("promote answered %d: %s", t.status, t.body);
    wait_log(s, B, "role change in place", "role=primary", 1);
    /* The old primary comes back with its old command line, --role=primary:
     * its start-up probe hears that b leads, so it starts as a standby and
     * follows b: b has a standby in sync again and takes writes. */
    close(s->pfd);
    s->pfd = -1;
    node_start(s, A, &primary_tls);
    wait_log(s, A, "cluster start", "b leads (said b): starting as a standby", 1);
    wait_log(s, A, "replication: following the primary", "primary=b", 1);
    int fd = bqt_client(&s->n[B].srv);
    it_cmd(fd, "use after\r\n", "USING after\r\n");
    bqt_sends(fd, "put 0 0 10 5\r\nafter\r\n");
    free(bqt_expect_prefix(fd, "INSERTED "));
    close(fd);
    node_signal(s, A, SIGTERM);
    node_signal(s, B, SIGTERM);
    start_single(&s->single[B], s->n[B].bdir);
    fd = bqt_client(&s->single[B]);
    for (unsigned long long id = 1; id <= max; id++) {
        char cmd[64], *r;
        snprintf(cmd, sizeof cmd, "peek %llu\r\n", id);
        r = ask(fd, cmd);
        live -= strncmp(r, "FOUND", 5) == 0;
        free(r);
    }
    close(fd);
    assert_int_equal(live, 0);
    s->passed = true;
}

/* ---- 10. the primary dies during a standby's handshake, then its resync ---- */

typedef struct conns_wait {
    bqt_proxy_t *proxy;
    int above;
} conns_wait_t;

static bool more_connections(void *arg)
{
    conns_wait_t *w = arg;
    return bqt_proxy_connections(w->proxy) > w->above;
}

/* A pair whose standby (behind the fault proxy, --repl-timeout 1000) will
 * need a resync of about 20 MB once away: small segments on the primary,
 * 2,000 big jobs, the standby caught up. Returns the highest id. */
static const char *const resync_pextra[] = {
    "-s", "65536", "--sync-fallback", "async", "--sync-timeout", "200", NULL};
static const char *const resync_bextra[] = {"--repl-timeout", "1000", NULL};
static const opts_t resync_p = {"primary", "a", resync_pextra};
static const opts_t resync_b = {"standby", "b", resync_bextra};

static unsigned long long start_big_proxied_pair(suite_t *s, size_t *live)
{
    start_proxied_pair(s, &resync_p, &resync_b);
    it_cmd(s->pfd, "use big\r\n", "USING big\r\n");
    unsigned long long max = big_puts(s, 2000, 0, live);
    wait_caught_up(s);
    return max;
}

/* The standby, away long enough to need a resync of about 20 MB, comes back
 * through the fault proxy: its first connection is held before TLS
 * completes and the primary is killed; the primary comes back, and once
 * the standby's download has started the link stalls and the primary is
 * killed again. The standby keeps its old log throughout and, with the
 * primary back once more, resyncs completely. */
static void primary_dies_mid_handshake_and_mid_resync(void **state)
{
    suite_t *s = *state;
    const opts_t *p = &resync_p, *b = &resync_b;
    size_t live = 0;
    unsigned long long max = start_big_proxied_pair(s, &live);
    node_signal(s, B, SIGTERM);
    churn_past(s, primary_stat(s, "binlog-current-index"));
    conns_wait_t w = {s->proxy, bqt_proxy_connections(s->proxy)};
    bqt_proxy_set(s->proxy, BQT_PROXY_STALL);
    node_start(s, B, b);
    assert_true(bqt_wait_until(more_connections, &w, WAIT_MS));
    node_signal(s, A, SIGKILL);
    bqt_proxy_set(s->proxy, BQT_PROXY_PASS);
    assert_int_equal(log_count(s, B, "replication: following the primary", NULL), 0);
    primary_start(s, p);
    wait_log(s, B, "resync: download started", NULL, 1);
    bqt_proxy_set(s->proxy, BQT_PROXY_STALL);
    node_signal(s, A, SIGKILL);
    assert_int_equal(log_count(s, B, "resync: download complete", NULL), 0);
    bqt_proxy_set(s->proxy, BQT_PROXY_PASS);
    wait_log(s, B, "replication: lost the primary", NULL, 1);
    primary_start(s, p);
    wait_log(s, B, "resync: download installed", NULL, 1);
    wait_log(s, B, "replication: following the primary", "start=resume", 1);
    wait_caught_up(s);
    assert_true(node_alive(s, B));
    stop_and_compare(s, max, live);
    s->passed = true;
}

/* ---- 11. SIGTERM in every phase of a standby's life ---- */

/* SIGTERM to node i in phase: it must exit cleanly within the bound. */
static void term_in_time(suite_t *s, int i, const char *phase)
{
    char who[96];
    snprintf(who, sizeof who, "node %s %s", s->n[i].name, phase);
    bqt_term_within(&s->n[i].srv, BQT_SIGTERM_BOUND_MS, who);
}

/* The standby is stopped with SIGTERM while streaming, while its
 * connection is held before TLS completes, while its resync download
 * stalls, and while it has no primary (killed): each time it exits
 * cleanly within the bound, and in the end it holds what the primary
 * holds. */
static void sigterm_in_every_phase_exits_in_time(void **state)
{
    suite_t *s = *state;
    const opts_t *p = &resync_p, *b = &resync_b;
    size_t live = 0;
    unsigned long long max = start_big_proxied_pair(s, &live);
    term_in_time(s, B, "streaming");
    churn_past(s, primary_stat(s, "binlog-current-index"));
    conns_wait_t w = {s->proxy, bqt_proxy_connections(s->proxy)};
    bqt_proxy_set(s->proxy, BQT_PROXY_STALL);
    node_start(s, B, b);
    assert_true(bqt_wait_until(more_connections, &w, WAIT_MS));
    term_in_time(s, B, "in its handshake");
    bqt_proxy_set(s->proxy, BQT_PROXY_PASS);
    node_start(s, B, b);
    wait_log(s, B, "resync: download started", NULL, 1);
    bqt_proxy_set(s->proxy, BQT_PROXY_STALL);
    term_in_time(s, B, "mid-resync");
    assert_int_equal(log_count(s, B, "resync: download installed", NULL), 0);
    bqt_proxy_set(s->proxy, BQT_PROXY_PASS);
    node_start(s, B, b);
    wait_log(s, B, "resync: download installed", NULL, 1);
    wait_log(s, B, "replication: following the primary", "start=resume", 1);
    wait_caught_up(s);
    node_signal(s, A, SIGKILL);
    wait_log(s, B, "replication: lost the primary", NULL, 1);
    term_in_time(s, B, "with no primary");
    primary_start(s, p);
    node_start(s, B, b);
    stop_and_compare(s, max, live);
    s->passed = true;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(tls_records_flow_and_states_match),
        T(standby_via_proxy),
        T(standby_restart_resumes),
        T(long_outage_resync),
        T(wrong_certificates_refused),
        T(sync_kill9_no_acked_loss),
        T(stalled_link_detected),
        T(stalled_link_refuses_writes),
        T(cut_mid_frame),
        T(primary_dies_mid_handshake_and_mid_resync),
        T(promote_after_the_primary_died),
        T(sigterm_in_every_phase_exits_in_time),
    };
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("repl_cluster", tests, group_setup, group_teardown);
}
