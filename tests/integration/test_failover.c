/* Automatic failover end to end: three beanstalkd-ha nodes (n1, n2, n3) on
 * loopback with --failover=auto, -f 0 and the default sync mode, over TLS
 * with certificates from deploy/mkcerts, started and watched through
 * tests/support/cluster.h. Every node starts as a standby and the voters
 * elect the primary; clients may use any node (standbys proxy them to the
 * primary), so a put acknowledged through any node shows that a primary
 * exists, and `stats` on that same connection names it (cluster-node-id,
 * cluster-epoch). A node's own role is read from its log ("cluster start"
 * role=..., "fenced", "restarting").
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
 * links heal, and five failovers in a row.
 *
 * A failed case keeps its work directory (binlogs, every node's logs) and
 * prints where it is. BQT_FILTER='name*' runs some cases only. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <limits.h>
#include <stdatomic.h>
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

#ifndef BQ_MKCERTS
#error "BQ_MKCERTS must name deploy/mkcerts"
#endif

#define NODES 3
#define KILL9_WORKERS 4
#define FAILOVER_TIMEOUT_MS 1000 /* the default --failover-timeout */
#define FAILOVER_MAX_MS 10000    /* a generous bound; the target is 3 s */
#define PROBE_MS 2000            /* for the reply to a probe (a paused primary never answers) */
#define HELD_MS 5000             /* for the reply of a put to a resumed or fenced primary */
#define RETRY_MS 20              /* a worker's pause before it reconnects */
#define AFTER_ACKS 50            /* puts acknowledged after a failover before it counts as over */
#define MAX_IDS 100000
#define PROBE_WORKER 99 /* the history's worker number of the test thread's own puts */
#define TUBE "fo"

static char g_certs[160];
static const char *const g_names[NODES] = {"n1", "n2", "n3"};
static const char *const auto_flags[] = {"--role=standby", "--failover=auto", "-f", "0", NULL};

typedef struct suite suite_t;

typedef struct worker {
    suite_t *s;
    int id;
    unsigned seq;                /* its next put's number: bodies are unique */
    unsigned long long mine[64]; /* its acknowledged ids not yet deleted, oldest first */
    size_t nmine;
    char error[160]; /* a reply no failover explains */
    pthread_t thread;
} worker_t;

typedef struct load {
    worker_t w[KILL9_WORKERS];
    bool running;
    atomic_bool stop;
    atomic_ulong acked;          /* puts acknowledged */
    atomic_ullong after_ns;      /* a failover began then (0: none) */
    atomic_ullong first_ns;      /* reply time of the first put sent since and acknowledged */
    atomic_ulong acked_at_first; /* acked then (ULONG_MAX until then) */
} load_t;

struct suite {
    bqc_cluster_t *c;
    atomic_int port[NODES];        /* client port of each live node, 0 when down */
    bqt_proxy_t *px[NODES][NODES]; /* px[i][j]: node i's link to node j, when routed */
    bqh_history_t *h;
    load_t load;
    pthread_mutex_t lock;    /* guards ids */
    unsigned long long *ids; /* every acknowledged id (MAX_IDS at most) */
    size_t nids;
    unsigned probes; /* the test thread's puts so far */
    bool passed;
};

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
    s->h = bqh_new();
    s->ids = malloc(MAX_IDS * sizeof *s->ids);
    if (!s->c || !s->h || !s->ids) {
        bqc_finish(s->c, true);
        bqh_free(s->h);
        free(s->ids);
        free(s);
        return -1;
    }
    pthread_mutex_init(&s->lock, NULL);
    *state = s;
    return 0;
}

static bool load_stop(suite_t *s);

static int teardown(void **state)
{
    suite_t *s = *state;
    load_stop(s);
    bqc_finish(s->c, s->passed);
    for (size_t i = 0; i < NODES; i++)
        for (size_t j = 0; j < NODES; j++)
            bqt_proxy_stop(s->px[i][j]);
    bqh_free(s->h);
    free(s->ids);
    pthread_mutex_destroy(&s->lock);
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
    bqc_start(s->c, i, auto_flags);
    atomic_store(&s->port[i], s->c->node[i].srv.port);
}

static void start_all(suite_t *s)
{
    for (size_t i = 0; i < NODES; i++)
        node_up(s, i);
}

/* kill -9 of node i, after the workers stop choosing it. */
static void node_kill(suite_t *s, size_t i)
{
    atomic_store(&s->port[i], 0);
    bqc_signal(s->c, i, SIGKILL);
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- puts and deletes, recorded ---- */

static void note_ack(suite_t *s, unsigned long long id, uint64_t sent_ns, uint64_t reply_ns)
{
    load_t *l = &s->load;
    unsigned long acked = atomic_fetch_add(&l->acked, 1) + 1;
    unsigned long long after = atomic_load(&l->after_ns), none = 0;
    if (after && sent_ns >= after && atomic_compare_exchange_strong(&l->first_ns, &none, reply_ns))
        atomic_store(&l->acked_at_first, acked);
    pthread_mutex_lock(&s->lock);
    if (s->nids < MAX_IDS)
        s->ids[s->nids++] = id;
    pthread_mutex_unlock(&s->lock);
}

/* Puts a job with the unique body "<who>-<seq>" on fd (its tube in use),
 * records it and returns its outcome; *id from INSERTED. A reply other
 * than INSERTED or DRAINING is described in err. Thread-safe. */
static bqh_outcome_t put_rec(suite_t *s, int fd, int who, unsigned seq, int ms,
                             unsigned long long *id, char *err, size_t errlen)
{
    char cmd[128], body[48];
    int blen = snprintf(body, sizeof body, "%d-%u", who, seq);
    snprintf(cmd, sizeof cmd, "put 0 0 120 %d\r\n%s\r\n", blen, body);
    uint64_t t0 = bqh_now_ns();
    char *line = bqc_ask(fd, cmd, ms);
    uint64_t t1 = bqh_now_ns();
    bqh_outcome_t out = !line                                    ? BQH_UNKNOWN
                        : sscanf(line, "INSERTED %llu", id) == 1 ? BQH_ACKED
                                                                 : BQH_REFUSED;
    if (out == BQH_REFUSED && strcmp(line, "DRAINING\r\n") != 0)
        snprintf(err, errlen, "put: \"%.*s\"", (int)strcspn(line, "\r"), line);
    bqh_put(s->h, who, t0, t1, out, out == BQH_ACKED ? *id : 0, body, (size_t)blen);
    if (out == BQH_ACKED)
        note_ack(s, *id, t0, t1);
    free(line);
    return out;
}

/* Deletes the worker's oldest acknowledged job; false when the connection
 * died or the delete was refused. */
static bool w_delete(worker_t *w, int fd)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "delete %llu\r\n", w->mine[0]);
    uint64_t t0 = bqh_now_ns();
    char *line = bqc_ask(fd, cmd, BQC_REPLY_MS);
    bqh_outcome_t out = !line                            ? BQH_UNKNOWN
                        : !strcmp(line, "DELETED\r\n")   ? BQH_ACKED
                        : !strcmp(line, "NOT_FOUND\r\n") ? BQH_NOT_FOUND
                                                         : BQH_UNKNOWN;
    /* A fenced or refusing primary answers OUT_OF_MEMORY: nothing done. */
    if (line && out == BQH_UNKNOWN && strcmp(line, "OUT_OF_MEMORY\r\n") != 0)
        snprintf(w->error, sizeof w->error, "delete %llu: \"%.*s\"", w->mine[0],
                 (int)strcspn(line, "\r"), line);
    bqh_delete(w->s->h, w->id, t0, bqh_now_ns(), out, w->mine[0]);
    memmove(w->mine, w->mine + 1, --w->nmine * sizeof w->mine[0]);
    free(line);
    return out != BQH_UNKNOWN;
}

/* A connection to a live node, trying them in turn from start; -1. */
static int connect_live(suite_t *s, unsigned start)
{
    for (unsigned k = 0; k < NODES; k++) {
        int port = atomic_load(&s->port[(start + k) % NODES]);
        int fd = port ? bqt_connect(port) : -1;
        if (fd >= 0)
            return fd;
    }
    return -1;
}

/* Puts, and deletes one in two of its jobs, on fd until stopped or the
 * connection fails (dies, or a put is refused). */
static void w_session(worker_t *w, int fd)
{
    load_t *l = &w->s->load;
    char *line = bqc_ask(fd, "use " TUBE "\r\n", BQC_REPLY_MS);
    bool alive = line && !strcmp(line, "USING " TUBE "\r\n");
    free(line);
    while (alive && !atomic_load(&l->stop)) {
        unsigned long long id = 0;
        alive = put_rec(w->s, fd, w->id, w->seq++, BQC_REPLY_MS, &id, w->error,
                        sizeof w->error) == BQH_ACKED;
        if (alive)
            w->mine[w->nmine++] = id;
        if (alive && (w->seq % 2 == 0 || w->nmine == 64))
            alive = w_delete(w, fd);
    }
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    load_t *l = &w->s->load;
    for (unsigned attempt = (unsigned)w->id; !atomic_load(&l->stop); attempt++) {
        int fd = connect_live(w->s, attempt);
        if (fd >= 0) {
            w_session(w, fd);
            close(fd);
        }
        if (!atomic_load(&l->stop))
            nap_ms(RETRY_MS);
    }
    return NULL;
}

static void load_start(suite_t *s)
{
    load_t *l = &s->load;
    atomic_store(&l->stop, false);
    for (int i = 0; i < KILL9_WORKERS; i++) {
        l->w[i] = (worker_t){.s = s, .id = i};
        assert_int_equal(pthread_create(&l->w[i].thread, NULL, worker_main, &l->w[i]), 0);
    }
    l->running = true;
}

/* Stops and joins the workers; false when one got a reply no failover
 * explains (printed). */
static bool load_stop(suite_t *s)
{
    load_t *l = &s->load;
    bool ok = true;
    if (!l->running)
        return true;
    atomic_store(&l->stop, true);
    for (int i = 0; i < KILL9_WORKERS; i++) {
        pthread_join(l->w[i].thread, NULL);
        if (l->w[i].error[0]) {
            fprintf(stderr, "worker %d: %s\n", i, l->w[i].error);
            ok = false;
        }
    }
    l->running = false;
    return ok;
}

/* ---- who is primary ---- */

/* Puts a job through node i (recorded) and, once it is acknowledged, asks
 * `stats` on that connection: the view of the primary that took it. 0 and
 * *v, or -1 (no answer within PROBE_MS, refused, node down). */
static int probe(suite_t *s, size_t i, bqc_view_t *v)
{
    int port = atomic_load(&s->port[i]);
    int fd = port ? bqt_connect(port) : -1;
    char err[160] = "";
    unsigned long long id;
    if (fd < 0)
        return -1;
    char *r = bqc_ask(fd, "use " TUBE "\r\n", PROBE_MS);
    bool ok = r && !strcmp(r, "USING " TUBE "\r\n");
    free(r);
    ok = ok && put_rec(s, fd, PROBE_WORKER, s->probes++, PROBE_MS, &id, err, sizeof err) ==
                   BQH_ACKED;
    if (err[0])
        fprintf(stderr, "probe through %s: %s\n", name_of(s, i), err);
    r = ok ? bqc_ask(fd, "stats\r\n", PROBE_MS) : NULL;
    ok = ok && bqc_view_parse(r, v) == 0 && !strcmp(v->role, "primary");
    free(r);
    close(fd);
    return ok ? 0 : -1;
}

typedef struct primary_wait {
    suite_t *s;
    int exclude; /* a node not to ask (paused, cut off), or -1 */
    bqc_view_t v;
} primary_wait_t;

static bool primary_found(void *arg)
{
    primary_wait_t *w = arg;
    for (size_t i = 0; i < NODES; i++) {
        if ((int)i == w->exclude || probe(w->s, i, &w->v) != 0)
            continue;
        int k = bqc_index(w->s->c, w->v.node);
        if (k >= 0 && k != w->exclude)
            return true;
    }
    return false;
}

/* Waits until a put through a node other than exclude is acknowledged by a
 * primary other than exclude; returns its index and view. */
static size_t wait_primary(suite_t *s, int exclude, bqc_view_t *v)
{
    primary_wait_t w = {.s = s, .exclude = exclude};
    if (!bqt_wait_until(primary_found, &w, BQC_WAIT_MS))
        fail_msg("no primary%s%s acknowledged a put within %d ms", exclude >= 0 ? " but " : "",
                 exclude >= 0 ? name_of(s, (size_t)exclude) : "", BQC_WAIT_MS);
    *v = w.v;
    return (size_t)bqc_index(s->c, v->node);
}

typedef struct standby_wait {
    suite_t *s;
    const char *name;
    bool caught_up; /* also applied == cluster-last-lsn */
    bqc_view_t v;
    char seen[24];
} standby_wait_t;

/* The primary's stats, through any live node, show the standby streaming. */
static bool standby_streaming(void *arg)
{
    standby_wait_t *w = arg;
    for (unsigned i = 0; i < NODES; i++) {
        int fd = connect_live(w->s, i);
        char *r = fd >= 0 ? bqc_ask(fd, "stats\r\n", PROBE_MS) : NULL;
        bool ok = bqc_view_parse(r, &w->v) == 0 && !strcmp(w->v.role, "primary");
        int k = ok ? bqc_view_standby(&w->v, w->name) : -1;
        free(r);
        if (fd >= 0)
            close(fd);
        if (k < 0)
            continue;
        snprintf(w->seen, sizeof w->seen, "%s", w->v.sb[k].state);
        return !strcmp(w->v.sb[k].state, "streaming") &&
               (!w->caught_up || w->v.sb[k].applied == w->v.last_lsn);
    }
    return false;
}

static void wait_streaming(suite_t *s, size_t i, bool caught_up)
{
    standby_wait_t w = {.s = s, .name = name_of(s, i), .caught_up = caught_up, .seen = "unknown"};
    if (!bqt_wait_until(standby_streaming, &w, BQC_WAIT_MS))
        fail_msg("within %d ms the primary did not report %s streaming%s (last seen: %s)",
                 BQC_WAIT_MS, w.name, caught_up ? " and caught up" : "", w.seen);
}

/* ---- failover under load, and the check ---- */

/* Puts sent after the kill were acknowledged, AFTER_ACKS of them. */
static bool acked_again(void *arg)
{
    load_t *l = arg;
    unsigned long at = atomic_load(&l->acked_at_first);
    return at != ULONG_MAX && atomic_load(&l->acked) >= at + AFTER_ACKS;
}

typedef struct count_wait {
    atomic_ulong *n;
    unsigned long target;
} count_wait_t;

static bool count_reached(void *arg)
{
    count_wait_t *w = arg;
    return atomic_load(w->n) >= w->target;
}

/* With the workers running, waits for `more` acknowledged puts, kills the
 * primary p with SIGKILL, and waits until puts sent after the kill are
 * acknowledged (AFTER_ACKS of them); returns the time from the kill to the
 * first of them, in ms. */
static long long kill_primary_under_load(suite_t *s, size_t p, unsigned long more)
{
    load_t *l = &s->load;
    count_wait_t cw = {&l->acked, atomic_load(&l->acked) + more};
    if (!bqt_wait_until(count_reached, &cw, BQC_WAIT_MS))
        fail_msg("only %lu puts acknowledged within %d ms, want %lu", atomic_load(&l->acked),
                 BQC_WAIT_MS, cw.target);
    bqh_mark(s->h, "kill -9 of the primary %s after %lu acknowledged puts", name_of(s, p),
             atomic_load(&l->acked));
    atomic_store(&l->first_ns, 0);
    atomic_store(&l->acked_at_first, ULONG_MAX);
    uint64_t kill_ns = bqh_now_ns();
    atomic_store(&l->after_ns, kill_ns);
    node_kill(s, p);
    if (!bqt_wait_until(acked_again, l, BQC_WAIT_MS))
        fail_msg("puts were not acknowledged again within %d ms of killing %s (%s)", BQC_WAIT_MS,
                 name_of(s, p), atomic_load(&l->first_ns) ? "some were" : "none was");
    long long ms = (long long)((atomic_load(&l->first_ns) - kill_ns) / 1000000);
    atomic_store(&l->after_ns, 0);
    fprintf(stderr, "failover: %lld ms (primary %s killed)\n", ms, name_of(s, p));
    bqh_mark(s->h, "failover over after %lld ms", ms);
    return ms;
}

/* Snapshots the primary (through node p, which must be it) once the
 * workers are stopped, and checks the history: nothing lost, nothing
 * resurrected, no other problem. Returns the jobs present. */
static size_t check_history(suite_t *s, size_t p)
{
    char err[256];
    bqh_snapshot_t *snap = NULL;
    bqh_report_t rep;
    if (!load_stop(s))
        fail_msg("a worker got a reply that no failover explains");
    int fd = bqt_client(&s->c->node[p].srv);
    int rc = bqh_snapshot_take(s->h, fd, TUBE, BQC_WAIT_MS, &snap, err, sizeof err);
    close(fd); /* releases the jobs the snapshot reserved */
    if (rc != 0)
        fail_msg("snapshot through %s: %s", name_of(s, p), err);
    size_t bad = bqh_check(s->h, snap, NULL, &rep);
    bqh_snapshot_free(snap);
    bqh_report_summary(stderr, &rep);
    if (bad)
        bqh_report_print(stderr, s->h, &rep);
    assert_int_equal(rep.problems[BQH_LOST], 0);
    assert_int_equal(rep.problems[BQH_RESURRECTED], 0);
    assert_int_equal(bad, 0);
    assert_true(rep.puts_acked > 0 && rep.present > 0);
    return rep.present;
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
    size_t p = wait_primary(s, -1, &v0);
    fprintf(stderr, "first primary: %s, epoch %llu, %lld ms after the start\n", v0.node,
            v0.epoch, bqt_now_ms() - t0);
    assert_int_equal(bqc_log_count(s->c, p, "cluster start", "role=primary"), 1);
    load_start(s);
    long long ms = kill_primary_under_load(s, p, random_target(150, 200));
    size_t q = wait_primary(s, (int)p, &v1);
    fprintf(stderr, "new primary: %s, epoch %llu\n", v1.node, v1.epoch);
    assert_true(q != p);
    assert_true(v1.epoch > v0.epoch);
    bqc_wait_log(s->c, q, "election: won", NULL, 1, BQC_WAIT_MS);
    check_history(s, q);
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
    size_t p = wait_primary(s, -1, &v0);
    load_start(s);
    kill_primary_under_load(s, p, random_target(50, 100));
    size_t q = wait_primary(s, (int)p, &v1);
    node_up(s, p); /* the same flags, a new client port */
    bqc_wait_log(s->c, p, "cluster start", "role=standby", 1, BQC_WAIT_MS);
    wait_streaming(s, p, false);
    /* More writes with it back, some of them through it. */
    count_wait_t cw = {&s->load.acked, atomic_load(&s->load.acked) + 100};
    assert_true(bqt_wait_until(count_reached, &cw, BQC_WAIT_MS));
    size_t present = check_history(s, q);
    for (size_t i = 0; i < NODES; i++)
        if (i != q)
            wait_streaming(s, i, true);
    assert_int_equal(bqc_log_count(s->c, p, "cluster start", "role=primary"), 0);
    for (size_t i = 0; i < NODES; i++) /* the standbys first: no election meanwhile */
        if (i != q)
            bqc_signal(s->c, i, SIGTERM);
    bqc_signal(s->c, q, SIGTERM);
    size_t found = bqc_compare_dirs(s->c->node[q].bdir, s->c->node[p].bdir, s->ids, s->nids);
    fprintf(stderr, "%zu of %zu acknowledged ids in both directories, %zu jobs in all\n",
            found, s->nids, present);
    assert_true(found > 0 && found <= present);
    s->passed = true;
}

/* ---- 3. a paused primary does not acknowledge after it resumes ---- */

/* Opens a connection straight to node i's client port, using TUBE. */
static int direct_client(suite_t *s, size_t i)
{
    int fd = bqt_client(&s->c->node[i].srv);
    char *r = bqc_ask(fd, "use " TUBE "\r\n", BQC_REPLY_MS);
    assert_non_null(r);
    assert_string_equal(r, "USING " TUBE "\r\n");
    free(r);
    return fd;
}

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
    size_t p = wait_primary(s, -1, &v0);
    int fd = direct_client(s, p);
    size_t standby_starts = bqc_log_count(s->c, p, "cluster start", "role=standby");
    until_t resume = {bqt_now_ms() + 3 * FAILOVER_TIMEOUT_MS};
    bqh_mark(s->h, "SIGSTOP of the primary %s", name_of(s, p));
    bqt_server_signal(&s->c->node[p].srv, SIGSTOP);
    size_t q = wait_primary(s, (int)p, &v1);
    assert_true(q != p && v1.epoch > v0.epoch);
    assert_true(bqt_wait_until(time_reached, &resume, BQC_WAIT_MS));
    bqh_mark(s->h, "SIGCONT of %s", name_of(s, p));
    bqt_server_signal(&s->c->node[p].srv, SIGCONT);
    bqh_outcome_t out = put_rec(s, fd, PROBE_WORKER, s->probes++, HELD_MS, &id, err, sizeof err);
    close(fd);
    fprintf(stderr, "a put to the resumed old primary: %s\n",
            out == BQH_ACKED    ? "INSERTED"
            : out == BQH_UNKNOWN ? "no reply"
            : err[0]             ? err
                                 : "DRAINING");
    if (out == BQH_ACKED)
        fail_msg("the old primary %s acknowledged a put (id %llu) after it resumed",
                 name_of(s, p), id);
    /* Fenced at once on its first read after the pause: DRAINING (or the
     * connection closes as it restarts), never anything else. */
    if (err[0])
        fail_msg("the resumed old primary %s answered %s", name_of(s, p), err);
    bqc_wait_log(s->c, p, "cluster start", "role=standby", standby_starts + 1, BQC_WAIT_MS);
    assert_true(bqc_log_count(s->c, p, "restarting", "stepping down") >= 1);
    wait_streaming(s, p, false);
    check_history(s, q);
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
    size_t p = wait_primary(s, -1, &v0);
    int fd = direct_client(s, p);
    size_t standby_starts = bqc_log_count(s->c, p, "cluster start", "role=standby");
    bqh_mark(s->h, "links of the primary %s dropped", name_of(s, p));
    cut_links(s, p, BQT_PROXY_DROP);
    bqc_wait_log(s->c, p, "fenced: no majority", NULL, 1, BQC_WAIT_MS);
    bqh_outcome_t out = put_rec(s, fd, PROBE_WORKER, s->probes++, HELD_MS, &id, err, sizeof err);
    if (out != BQH_REFUSED || err[0])
        fail_msg("a put to the fenced primary: %s, want DRAINING",
                 out == BQH_ACKED ? "INSERTED" : out == BQH_UNKNOWN ? "no reply" : err);
    expect_reply(fd, "stats\r\n", "OK ");
    expect_reply(fd, "list-tubes\r\n", "OK ");
    size_t q = wait_primary(s, (int)p, &v1);
    assert_true(q != p && v1.epoch > v0.epoch);
    bqh_mark(s->h, "links healed");
    cut_links(s, p, BQT_PROXY_PASS);
    bqc_wait_log(s->c, p, "cluster start", "role=standby", standby_starts + 1, BQC_WAIT_MS);
    close(fd);
    wait_streaming(s, p, false);
    check_history(s, q);
    s->passed = true;
}

/* ---- 5. five failovers in a row ---- */

#define ROUNDS 5

static void repeated_failovers(void **state)
{
    suite_t *s = *state;
    bqc_view_t v, next;
    long long ms[ROUNDS], worst = 0;
    start_all(s);
    size_t p = wait_primary(s, -1, &v);
    load_start(s);
    for (int r = 0; r < ROUNDS; r++) {
        ms[r] = kill_primary_under_load(s, p, random_target(20, 40));
        size_t q = wait_primary(s, (int)p, &next);
        assert_true(q != p && next.epoch > v.epoch);
        node_up(s, p);
        bqc_wait_log(s->c, p, "cluster start", "role=standby", 1, BQC_WAIT_MS);
        for (size_t i = 0; i < NODES; i++) /* both standbys: a majority can elect again */
            if (i != q)
                wait_streaming(s, i, false);
        worst = ms[r] > worst ? ms[r] : worst;
        p = q;
        v = next;
    }
    check_history(s, p);
    fprintf(stderr, "failover times (ms):");
    for (int r = 0; r < ROUNDS; r++)
        fprintf(stderr, " %lld", ms[r]);
    fprintf(stderr, "; epoch now %llu\n", v.epoch);
    if (worst >= FAILOVER_MAX_MS)
        fail_msg("a failover took %lld ms, want < %d", worst, FAILOVER_MAX_MS);
    s->passed = true;
}

/* ---- 6. two data nodes and a witness ---- */

/* Writes stay available on one data node (async fallback): the witness
 * gives the third vote, never leads, and stores no job. */
static const char *const witness_data_flags[] = {
    "--role=standby", "--failover=auto", "-f", "0", "--sync-fallback", "async",
    "--sync-timeout", "300", NULL};
static const char *const witness_flags[] = {"--role=witness", "--failover=auto", NULL};

static void witness_breaks_the_tie(void **state)
{
    suite_t *s = *state;
    bqc_view_t v0, v1;
    for (size_t i = 0; i < NODES; i++) {
        bqc_start(s->c, i, i == 2 ? witness_flags : witness_data_flags);
        atomic_store(&s->port[i], s->c->node[i].srv.port); /* the witness proxies too */
    }
    size_t p = wait_primary(s, -1, &v0);
    assert_true(p != 2);
    load_start(s);
    long long ms = kill_primary_under_load(s, p, random_target(150, 200));
    size_t q = wait_primary(s, (int)p, &v1);
    fprintf(stderr, "with a witness: new primary %s, epoch %llu, after %lld ms\n", v1.node,
            v1.epoch, ms);
    assert_true(q != p && q != 2);
    assert_true(v1.epoch > v0.epoch);
    assert_true(bqc_log_count(s->c, 2, "cluster start", "role=witness") >= 1);
    assert_true(bqc_log_count(s->c, 2, "election: vote requested", "granted=1") >= 2);
    assert_int_equal(bqc_log_count(s->c, 2, "election: won", NULL), 0);
    check_history(s, q);
    if (ms >= FAILOVER_MAX_MS)
        fail_msg("the failover took %lld ms, want < %d", ms, FAILOVER_MAX_MS);
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
        T(repeated_failovers),
        T(witness_breaks_the_tie),
    };
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("failover", tests, group_setup, group_teardown);
}
