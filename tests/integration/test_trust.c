/* Trust boundaries end to end: what a peer's certificate, a stranger on the
 * network or a local user can make a real node do, and what they cannot.
 * Real beanstalkd-ha processes on 127.0.0.1 over TLS (certificates from
 * deploy/mkcerts), started and watched through tests/support/cluster.h;
 * replication messages sent by tests/support/peer_client.h as a peer would
 * send them; floods of connections from other loopback addresses
 * (127.0.0.2 ... 127.0.0.9: Linux routes all of 127.0.0.0/8 to lo).
 *
 * Cases, one per finding of the "Trust boundaries" issue:
 *  1. Hellos and a VoteRequest naming epoch 2^64-1 (or another cluster's
 *     epoch + 1) change no node's epoch and make no primary step down.
 *  2. After a random burst of such messages from n3's certificate (n3
 *     down), the others elect a primary and take writes within 10 s.
 *  3. 72 idle and keep-alive connections from eight addresses do not keep
 *     /healthz from another address from answering within 1 s.
 *  4. 40 silent TCP connections to each replication port do not keep a
 *     restarted standby from following, nor the survivors of a killed
 *     primary from electing one, within 10 s.
 *  5. An 8 MiB message before any Hello, and a 60 KiB Ack of tiny unknown
 *     fields from an accepted standby, close the connection and cost no
 *     memory.
 *  6. On a loopback admin API with the cluster's TLS flags a POST needs
 *     beanstalkctl's certificate (or the node's own, for its switchover);
 *     plaintext GETs still answer.
 *  7. A certificate naming a peer in its CN only, and TLS 1.2, are refused
 *     on the replication port; a Hello's role must be the one our flags
 *     give that peer (--witness).
 *  8. --check-config refuses a certificate that does not name --node-id.
 *
 * A failed case keeps its work directory and prints every node's last log
 * lines. BQT_FILTER='name*' runs some cases only; BQ_TRUST_SEED replays
 * the burst of case 2 (its seed is printed). */

#include <errno.h>
#include <poll.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/cluster.h"
#include "tests/support/peer_client.h"
#include "tests/support/workload.h"

#ifndef BQ_MKCERTS
#error "BQ_MKCERTS must name deploy/mkcerts"
#endif

#define NODES 3
#define CLUSTER_ID "beanstalkd-ha" /* the default --cluster-id */
#define REPL_VERSION 1u
#define RECOVERY_MAX_MS 10000 /* the failover suite's generous bound */
#define ANSWER_MS 3000        /* for one answer of a node to a message */
#define CLOSE_MS 800          /* for a link to close: below the 1 s a silent one lasts */
#define PROBE_MAX_MS 1000     /* for /healthz during an admin flood */
#define RSS_GROWTH_MAX_KIB (16 * 1024)
#define BIG_MESSAGE ((size_t)8 << 20)
#define BIG_SENDERS 4
#define TINY_FIELDS_BYTES (60 * 1024)
#define BURST 200
#define TUBE "trust"

static char g_certs[160];
static const char *const g_names[NODES] = {"n1", "n2", "n3"};
static const char *const auto_flags[] = {"--role=standby", "--failover=auto", "-f", "0", NULL};
static const char *const manual_standby[] = {"--role=standby", NULL};

/* ---- floods of strangers: connections from 127.0.0.2 ... 127.0.0.9 ---- */

#define FLOOD_MAX 160
#define FLOOD_SOURCES 8
#define KEEPALIVE_EVERY_MS 4000
#define COME_BACK_MS                                                                               \
    500           /* closed before the server's timeout (evicted, refused): back after this */
#define PACE_MS 2 /* between two connections to one port: a steady flood, not one burst */
#define FLOOD_PORTS 4

typedef struct flood_sock {
    int fd; /* -1 while down */
    int port;
    size_t group; /* its port's index in the flood */
    char src[16];
    bool keepalive;       /* sends GET /healthz every KEEPALIVE_EVERY_MS */
    long long opened;     /* when it connected */
    long long reopen_at;  /* while down: when to connect again */
    long long request_at; /* keep-alive: when to send the next request */
    bool ever;            /* connected at least once */
} flood_sock_t;

/* Connections that stay open, whatever the server does: one closed after
 * the server's timeout (held at least held_long_ms) comes back at once, as
 * an attacker's would, to take the place it had; one closed sooner
 * (evicted, refused) after COME_BACK_MS. A port gets one new connection
 * every PACE_MS at most: a flood, not a burst (the admin API refuses every
 * newcomer while more than eight connections it evicted in one turn of its
 * loop are still closing: node/admin/admin.c, on_connection). One thread drives
 * them all with poll. */
typedef struct flood {
    pthread_t thread;
    bool running;
    atomic_bool stop;
    long long held_long_ms;
    size_t n, nports;
    int ports[FLOOD_PORTS];
    long long last_connect[FLOOD_PORTS];
    flood_sock_t sk[FLOOD_MAX];
    atomic_ulong connects, closes, answers, ever;
    long long started;
} flood_t;

/* Adds count connections to port, spread over the sources; keepalive ones
 * send GET /healthz. Before flood_start. */
static void flood_add(flood_t *f, int port, size_t count, bool keepalive)
{
    size_t g = 0;
    while (g < f->nports && f->ports[g] != port)
        g++;
    assert_true(g < FLOOD_PORTS);
    f->ports[g] = port;
    f->nports += g == f->nports;
    for (size_t k = 0; k < count && f->n < FLOOD_MAX; k++) {
        flood_sock_t *s = &f->sk[f->n];
        *s = (flood_sock_t){.fd = -1, .port = port, .group = g, .keepalive = keepalive};
        snprintf(s->src, sizeof s->src, "127.0.0.%zu", 2 + f->n % FLOOD_SOURCES);
        f->n++;
    }
}

static void flood_down(flood_t *f, flood_sock_t *s, long long now)
{
    close(s->fd);
    s->fd = -1;
    s->reopen_at = now + (now - s->opened >= f->held_long_ms ? 0 : COME_BACK_MS);
    atomic_fetch_add(&f->closes, 1);
}

/* Reads what s got: the end (down) or answers to its requests. */
static void flood_read(flood_t *f, flood_sock_t *s, long long now)
{
    char buf[4096];
    ssize_t n = recv(s->fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        flood_down(f, s, now);
        return;
    }
    buf[n] = '\0';
    for (const char *p = strstr(buf, "HTTP/1.1 200"); p; p = strstr(p + 1, "HTTP/1.1 200"))
        atomic_fetch_add(&f->answers, 1);
}

/* Connects what is due, sends the keep-alive requests that are due; the
 * next time anything is due. */
static long long flood_tend(flood_t *f, long long now)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    long long next = now + 50;
    for (size_t k = 0; k < f->n; k++) {
        flood_sock_t *s = &f->sk[k];
        long long *last = &f->last_connect[s->group];
        if (s->fd < 0 && now >= s->reopen_at && now >= *last + PACE_MS) {
            *last = now;
            s->fd = bqp_tcp_from(s->src, s->port);
            s->opened = now;
            s->request_at = now;
            if (s->fd < 0) {
                s->reopen_at = now + COME_BACK_MS;
                continue;
            }
            atomic_fetch_add(&f->connects, 1);
            if (!s->ever) {
                s->ever = true;
                atomic_fetch_add(&f->ever, 1);
            }
        }
        if (s->fd >= 0 && s->keepalive && now >= s->request_at) {
            if (send(s->fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)sizeof req - 1)
                flood_down(f, s, now);
            else
                s->request_at = now + KEEPALIVE_EVERY_MS;
        }
        long long due = s->fd < 0 ? s->reopen_at : s->keepalive ? s->request_at : next;
        if (due < next)
            next = due;
    }
    return next;
}

static void *flood_main(void *arg)
{
    flood_t *f = arg;
    struct pollfd pfd[FLOOD_MAX];
    size_t at[FLOOD_MAX];
    while (!atomic_load(&f->stop)) {
        long long now = bqt_now_ms(), next = flood_tend(f, now);
        size_t n = 0;
        for (size_t k = 0; k < f->n; k++)
            if (f->sk[k].fd >= 0) {
                pfd[n] = (struct pollfd){f->sk[k].fd, POLLIN, 0};
                at[n++] = k;
            }
        long long wait = next - bqt_now_ms();
        if (poll(pfd, n, wait < 1 ? 1 : (int)wait) <= 0)
            continue;
        now = bqt_now_ms();
        for (size_t j = 0; j < n; j++)
            if (pfd[j].revents)
                flood_read(f, &f->sk[at[j]], now);
    }
    for (size_t k = 0; k < f->n; k++)
        if (f->sk[k].fd >= 0)
            close(f->sk[k].fd);
    return NULL;
}

static bool flood_everyone_in(void *arg)
{
    flood_t *f = arg;
    return atomic_load(&f->ever) >= f->n;
}

/* Starts the flood and waits until each of its connections was open once. */
static void flood_start(flood_t *f)
{
    f->started = bqt_now_ms();
    assert_int_equal(pthread_create(&f->thread, NULL, flood_main, f), 0);
    f->running = true;
    if (!bqt_wait_until(flood_everyone_in, f, BQC_WAIT_MS))
        fail_msg("only %lu of %zu flood connections could connect", atomic_load(&f->ever), f->n);
}

/* Stops the flood (its connections close); returns how long it ran (ms). */
static long long flood_stop(flood_t *f)
{
    if (!f || !f->running)
        return 0;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    f->running = false;
    long long ms = bqt_now_ms() - f->started;
    fprintf(stderr,
            "flood: %zu connections for %lld ms: %lu connects, %lu closed by the server, "
            "%lu answers to keep-alive requests\n",
            f->n, ms, atomic_load(&f->connects), atomic_load(&f->closes), atomic_load(&f->answers));
    return ms;
}

/* ---- set-up ---- */

typedef struct trust {
    bqc_cluster_t *c;
    bqw_t *w;       /* probes: puts through a node, the primary's view */
    flood_t *flood; /* stopped by teardown */
    char tmp[200];  /* a case's own files (certificates it makes) */
    bool passed;
} trust_t;

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

/* A new cluster of the three names (each with a free admin port) for s,
 * ending the one it had. */
static bool new_cluster(trust_t *s)
{
    bqw_free(s->w);
    bqc_finish(s->c, true);
    s->w = NULL;
    s->c = bqc_new("bq-trust", NODES, g_names, g_certs);
    if (!s->c)
        return false;
    for (size_t i = 0; i < NODES; i++)
        s->c->node[i].admin_port = bqt_free_port();
    s->w = bqw_new(s->c, TUBE, 0);
    return s->w != NULL;
}

static int setup(void **state)
{
    trust_t *s = calloc(1, sizeof *s);
    if (!s || !new_cluster(s)) {
        if (s)
            bqc_finish(s->c, true);
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    trust_t *s = *state;
    flood_stop(s->flood);
    free(s->flood);
    bqw_free(s->w);
    bqc_finish(s->c, s->passed);
    if (s->tmp[0] && s->passed)
        bqc_remove_tree(s->tmp);
    else if (s->tmp[0])
        fprintf(stderr, "the case's files are kept: %s\n", s->tmp);
    free(s);
    return 0;
}

/* A flood against a server that closes a silent connection after
 * timeout_ms. */
static flood_t *new_flood(trust_t *s, long long timeout_ms)
{
    s->flood = calloc(1, sizeof *s->flood);
    assert_non_null(s->flood);
    s->flood->held_long_ms = timeout_ms * 9 / 10;
    return s->flood;
}

/* ---- nodes ---- */

static const char *name_of(const trust_t *s, size_t i)
{
    return s->c->node[i].name;
}

static void start_all(trust_t *s, const char *const *flags)
{
    for (size_t i = 0; i < NODES; i++)
        bqw_node_up(s->w, i, flags);
}

/* Waits until one primary has both other nodes streaming from it. */
static size_t settled(trust_t *s, bqc_view_t *v)
{
    return bqw_wait_settled(s->w, 0, v);
}

/* A node that is not p (the first after it). */
static size_t other_than(size_t p)
{
    return (p + 1) % NODES;
}

static size_t step_downs(trust_t *s, size_t i)
{
    return bqc_log_count(s->c, i, "role change in place", "role=standby");
}

/* GET path from node i's admin API in plaintext (loopback): its status,
 * body in text. */
static int admin_get(trust_t *s, size_t i, const char *path, char *text, size_t cap)
{
    return bqa_call(s->c->node[i].admin_port, NULL, NULL, "GET", path, BQC_REPLY_MS, text, cap);
}

/* The number after "key": in a JSON text, or ULLONG_MAX when absent. */
static unsigned long long json_number(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : ~0ULL;
}

/* Node i's epoch and role, from its /status; fails the test without one. */
static unsigned long long node_epoch(trust_t *s, size_t i, char *role, size_t cap)
{
    char text[4096];
    int st = admin_get(s, i, "/status", text, sizeof text);
    if (st != 200)
        fail_msg("GET /status of %s: %d", name_of(s, i), st);
    const char *r = strstr(text, "\"role\":\"");
    if (role)
        snprintf(role, cap, "%.*s", r ? (int)strcspn(r + 8, "\"") : 0, r ? r + 8 : "");
    return json_number(text, "epoch");
}

/* Peak resident memory of node i (VmHWM), KiB. */
static long peak_rss_kib(trust_t *s, size_t i)
{
    char path[64], line[256];
    long kib = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)s->c->node[i].srv.pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    if (kib < 0)
        fail_msg("no VmHWM for %s (pid %d)", name_of(s, i), (int)s->c->node[i].srv.pid);
    return kib;
}

static void expect_rss_growth_below(trust_t *s, size_t i, long before, const char *what)
{
    long after = peak_rss_kib(s, i);
    fprintf(stderr, "%s: peak RSS of %s %ld KiB -> %ld KiB (+%ld KiB)\n", what, name_of(s, i),
            before, after, after - before);
    if (after - before > RSS_GROWTH_MAX_KIB)
        fail_msg("%s: the peak RSS of %s grew by %ld KiB, want at most %d KiB", what, name_of(s, i),
                 after - before, RSS_GROWTH_MAX_KIB);
}

/* ---- messages ---- */

/* A Hello or a VoteRequest: what a peer says of itself. */
typedef struct claim {
    bool vote; /* a VoteRequest; else a Hello */
    const char *cluster, *node;
    uint64_t epoch, last_epoch, last_lsn;
    bool flag;        /* a Hello's witness, a VoteRequest's prevote */
    uint32_t version; /* 0: REPL_VERSION */
} claim_t;

/* What a node answered to one message. */
typedef struct answer {
    bqp_status_t st;
    Bq__Repl__Message__BodyCase body; /* with BQP_MESSAGE */
    char detail[200];                 /* a Refuse's detail, or why it closed */
    bool granted;                     /* a VoteReply's */
    unsigned long long epoch;         /* a VoteReply's or a Welcome's */
} answer_t;

/* Sends c on p; a refusal may close the link before it is all sent: the
 * answer tells. */
static void send_claim(bqp_conn_t *p, const claim_t *c)
{
    Bq__Repl__Hello h = BQ__REPL__HELLO__INIT;
    Bq__Repl__VoteRequest q = BQ__REPL__VOTE_REQUEST__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    uint32_t version = c->version ? c->version : REPL_VERSION;
    char *cluster = (char *)c->cluster, *node = (char *)c->node;
    if (c->vote) {
        q.version = version, q.cluster_id = cluster, q.node_id = node, q.prevote = c->flag;
        q.epoch = c->epoch, q.last_epoch = c->last_epoch, q.last_lsn = c->last_lsn;
        m.body_case = BQ__REPL__MESSAGE__BODY_VOTE_REQUEST, m.vote_request = &q;
    } else {
        h.version = version, h.cluster_id = cluster, h.node_id = node, h.witness = c->flag;
        h.epoch = c->epoch, h.last_epoch = c->last_epoch, h.last_lsn = c->last_lsn;
        m.body_case = BQ__REPL__MESSAGE__BODY_HELLO, m.hello = &h;
    }
    bqp_send(p, &m, ANSWER_MS);
}

/* Reads the first answer on p within ms. */
static answer_t read_answer(bqp_conn_t *p, int ms)
{
    Bq__Repl__Message *m = NULL;
    answer_t a = {.st = bqp_recv(p, ms, &m)};
    if (!m) {
        snprintf(a.detail, sizeof a.detail, "%s", bqp_error(p));
        return a;
    }
    a.body = m->body_case;
    if (a.body == BQ__REPL__MESSAGE__BODY_REFUSE)
        snprintf(a.detail, sizeof a.detail, "%s", m->refuse->detail ? m->refuse->detail : "");
    if (a.body == BQ__REPL__MESSAGE__BODY_VOTE_REPLY) {
        a.granted = m->vote_reply->granted;
        a.epoch = m->vote_reply->epoch;
    }
    if (a.body == BQ__REPL__MESSAGE__BODY_WELCOME)
        a.epoch = m->welcome->epoch;
    bqp_free_message(m);
    return a;
}

/* The answer in words, for failure messages. */
static const char *answer_text(const answer_t *a, char *buf, size_t cap)
{
    if (a->st != BQP_MESSAGE)
        snprintf(buf, cap, "%s (%s)", bqp_status_name(a->st), a->detail);
    else if (a->body == BQ__REPL__MESSAGE__BODY_REFUSE)
        snprintf(buf, cap, "Refuse \"%s\"", a->detail);
    else if (a->body == BQ__REPL__MESSAGE__BODY_VOTE_REPLY)
        snprintf(buf, cap, "VoteReply granted=%d epoch=%llu", a->granted, a->epoch);
    else if (a->body == BQ__REPL__MESSAGE__BODY_WELCOME)
        snprintf(buf, cap, "Welcome epoch=%llu", a->epoch);
    else
        snprintf(buf, cap, "a message of kind %d", (int)a->body);
    return buf;
}

/* Connects to node i's replication port as `as` (a certificate of the
 * cluster's mkcerts directory); fails the test when TLS does not connect. */
static bqp_conn_t *peer_to(trust_t *s, size_t i, const char *as)
{
    char err[256] = "";
    bqp_tls_t t;
    bqp_tls_files(&t, g_certs, as);
    bqp_conn_t *p = bqp_connect(s->c->node[i].repl_port, &t, ANSWER_MS, err, sizeof err);
    if (!p)
        fail_msg("cannot connect to %s's replication port as %s: %s", name_of(s, i), as, err);
    return p;
}

/* One hello or vote request to node i as `as`, and its answer. */
static answer_t claim_to(trust_t *s, size_t i, const char *as, const claim_t *c)
{
    bqp_conn_t *p = peer_to(s, i, as);
    send_claim(p, c);
    answer_t a = read_answer(p, ANSWER_MS);
    bqp_close(p);
    return a;
}

/* ---- 1. epochs nobody can reach are not believed ---- */

/* Every node's role and epoch in words ("?" where /status did not answer). */
static const char *epochs_text(trust_t *s, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NODES && off < cap; i++) {
        char text[4096];
        int st = admin_get(s, i, "/status", text, sizeof text);
        const char *r = st == 200 ? strstr(text, "\"role\":\"") : NULL;
        off += (size_t)snprintf(buf + off, cap - off, "%s%s %.*s epoch %llu", i ? ", " : "",
                                name_of(s, i), r ? (int)strcspn(r + 8, "\"") : 1, r ? r + 8 : "?",
                                st == 200 ? json_number(text, "epoch") : 0ULL);
    }
    return buf;
}

typedef struct writes_wait {
    trust_t *s;
    size_t exclude; /* a node that is down */
    bqc_view_t v;
} writes_wait_t;

static bool writes_taken(void *arg)
{
    writes_wait_t *ww = arg;
    for (size_t i = 0; i < NODES; i++)
        if (i != ww->exclude && bqw_probe(ww->s->w, i, &ww->v) == 0)
            return true;
    return false;
}

/* Waits up to RECOVERY_MAX_MS for a put through a node other than exclude
 * to be acknowledged (by a primary other than exclude); returns the
 * primary's index and view, and how long it took in *ms. Fails the test,
 * naming every node's role and epoch, when none was. */
static size_t wait_writes(trust_t *s, size_t exclude, bqc_view_t *v, long long *ms,
                          const char *after)
{
    writes_wait_t ww = {.s = s, .exclude = exclude};
    long long t0 = bqt_now_ms();
    char all[400];
    if (!bqt_wait_until(writes_taken, &ww, RECOVERY_MAX_MS))
        fail_msg("no put was acknowledged within %d ms after %s (now: %s)", RECOVERY_MAX_MS, after,
                 epochs_text(s, all, sizeof all));
    *ms = bqt_now_ms() - t0;
    *v = ww.v;
    return (size_t)bqc_index(s->c, v->node);
}

/* A put through node p is acknowledged by p itself, still in epoch. */
static void expect_same_primary(trust_t *s, size_t p, unsigned long long epoch)
{
    bqc_view_t v;
    char all[400];
    if (bqw_probe(s->w, p, &v) != 0)
        fail_msg("a put through the primary %s was not acknowledged (now: %s)", name_of(s, p),
                 epochs_text(s, all, sizeof all));
    if (strcmp(v.node, name_of(s, p)) != 0 || v.epoch != epoch)
        fail_msg("the put was acknowledged by %s in epoch %llu, want %s in epoch %llu", v.node,
                 v.epoch, name_of(s, p), epoch);
}

/* Every node is in epoch, and none stepped down since downs[] was counted. */
static void expect_epochs_unchanged(trust_t *s, unsigned long long epoch, const size_t *downs,
                                    const char *after)
{
    for (size_t i = 0; i < NODES; i++) {
        char role[24];
        unsigned long long e = node_epoch(s, i, role, sizeof role);
        if (e != epoch)
            fail_msg("after %s %s (%s) is in epoch %llu, want %llu", after, name_of(s, i), role, e,
                     epoch);
        if (step_downs(s, i) != downs[i])
            fail_msg("after %s %s stepped down", after, name_of(s, i));
    }
}

static void huge_epochs_are_not_believed(void **state)
{
    trust_t *s = *state;
    bqc_view_t v;
    size_t downs[NODES];
    char text[300];
    start_all(s, auto_flags);
    size_t p = settled(s, &v), q = other_than(p), r = other_than(q);
    const unsigned long long e0 = v.epoch;
    for (size_t i = 0; i < NODES; i++)
        downs[i] = step_downs(s, i);
    fprintf(stderr, "primary %s in epoch %llu; messages as %s\n", v.node, e0, name_of(s, q));

    /* A standby's hello naming the largest epoch there is. */
    claim_t h = {.cluster = CLUSTER_ID,
                 .node = name_of(s, q),
                 .epoch = UINT64_MAX,
                 .last_epoch = UINT64_MAX,
                 .last_lsn = v.last_lsn};
    answer_t a = claim_to(s, p, name_of(s, q), &h);
    fprintf(stderr, "hello naming epoch 2^64-1: %s\n", answer_text(&a, text, sizeof text));
    expect_same_primary(s, p, e0);
    expect_epochs_unchanged(s, e0, downs, "a hello naming epoch 2^64-1");

    /* Another cluster's hello naming the next epoch. */
    h = (claim_t){.cluster = "another-cluster",
                  .node = name_of(s, q),
                  .epoch = e0 + 1,
                  .last_epoch = e0 + 1,
                  .last_lsn = v.last_lsn};
    a = claim_to(s, p, name_of(s, q), &h);
    fprintf(stderr, "another cluster's hello naming epoch %llu: %s\n", e0 + 1,
            answer_text(&a, text, sizeof text));
    if (a.st == BQP_MESSAGE && a.body == BQ__REPL__MESSAGE__BODY_WELCOME)
        fail_msg("another cluster's hello was welcomed");
    expect_same_primary(s, p, e0);
    expect_epochs_unchanged(s, e0, downs, "another cluster's hello naming the next epoch");

    /* A vote request naming the largest epoch, to the primary and to the
     * other standby: refused, and nobody adopts it. */
    claim_t rq = {.vote = true,
                  .cluster = CLUSTER_ID,
                  .node = name_of(s, q),
                  .epoch = UINT64_MAX,
                  .last_epoch = UINT64_MAX,
                  .last_lsn = UINT64_MAX};
    size_t voters[] = {p, r};
    for (size_t k = 0; k < 2; k++) {
        a = claim_to(s, voters[k], name_of(s, q), &rq);
        fprintf(stderr, "vote request naming epoch 2^64-1 to %s: %s\n", name_of(s, voters[k]),
                answer_text(&a, text, sizeof text));
        if (a.st == BQP_MESSAGE && a.body == BQ__REPL__MESSAGE__BODY_VOTE_REPLY &&
            (a.granted || a.epoch != e0))
            fail_msg("%s answered a vote request for epoch 2^64-1 with %s", name_of(s, voters[k]),
                     text);
    }
    expect_same_primary(s, p, e0);
    expect_epochs_unchanged(s, e0, downs, "a vote request naming epoch 2^64-1");

    /* DIR/election holds nothing a restart would refuse: r starts again
     * and follows. */
    bqc_signal(s->c, r, SIGTERM);
    bqw_node_up(s->w, r, auto_flags);
    bqw_wait_streaming(s->w, r, false);
    expect_same_primary(s, p, e0);
    assert_true(node_epoch(s, r, NULL, 0) == e0);
    s->passed = true;
}

/* ---- 2. a burst of hostile messages leaves the cluster electable ---- */

/* xorshift64*: the whole state is the seed, so a printed seed replays. */
static uint64_t rnd(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1DULL;
}

/* An epoch as a hostile peer would pick one, around cur. */
static uint64_t hostile_epoch(uint64_t *x, uint64_t cur)
{
    static const uint64_t edges[] = {UINT64_MAX,
                                     UINT64_MAX - 1,
                                     UINT64_C(1) << 63,
                                     UINT64_C(1) << 62,
                                     (UINT64_C(1) << 62) + 1,
                                     UINT64_C(1) << 32,
                                     (UINT64_C(1) << 32) + 1,
                                     0};
    switch (rnd(x) % 6) {
    case 0:
        return edges[rnd(x) % (sizeof edges / sizeof edges[0])];
    case 1:
        return rnd(x); /* anything */
    case 2:
        return cur + rnd(x) % 4; /* the next few */
    case 3:
        return cur + rnd(x) % 1000001; /* far, but within a million */
    case 4:
        return cur + 1000000 + rnd(x) % 1000; /* just beyond a million */
    default:
        return cur > 0 ? cur - 1 : 0; /* stale */
    }
}

/* One random hello or vote request as node `as` to node to; BQP_CLOSED
 * with no connection while the node restarts in another role. */
static answer_t hostile_message(trust_t *s, uint64_t *x, size_t to, const char *as, uint64_t cur)
{
    answer_t a = {.st = BQP_CLOSED};
    bqp_tls_t t;
    static const char *const clusters[] = {CLUSTER_ID, CLUSTER_ID, CLUSTER_ID, "another", ""};
    const char *const nodes[] = {as, as, as, "n1", "nobody"};
    const char *cluster = clusters[rnd(x) % 5], *node = nodes[rnd(x) % 5];
    uint64_t epoch = hostile_epoch(x, cur), last = hostile_epoch(x, cur);
    uint64_t lsn = rnd(x) % 2 ? rnd(x) % 1000 : rnd(x);
    uint32_t version = rnd(x) % 8 ? REPL_VERSION : (uint32_t)rnd(x);
    bool vote = rnd(x) % 2;
    /* A hello claims a witness's role one time in eight; a vote request is
     * a pre-vote one time in two. Drawn before connecting: a seed replays
     * the same messages whatever connects. */
    claim_t c = {vote, cluster, node, epoch, last, lsn, rnd(x) % (vote ? 2 : 8) == 0, version};
    bqp_tls_files(&t, g_certs, as);
    bqp_conn_t *p = bqp_connect(s->c->node[to].repl_port, &t, ANSWER_MS, a.detail, sizeof a.detail);
    if (!p)
        return a;
    send_claim(p, &c);
    a = read_answer(p, ANSWER_MS);
    bqp_close(p);
    return a;
}

static void hostile_burst_leaves_cluster_electable(void **state)
{
    trust_t *s = *state;
    bqc_view_t v;
    const char *e = getenv("BQ_TRUST_SEED");
    uint64_t seed =
        e && *e ? strtoull(e, NULL, 10) : ((uint64_t)bqt_now_ms() << 20) ^ (uint64_t)getpid() ^ 1;
    uint64_t x = seed ? seed : 1;
    const size_t n3 = 2;
    size_t answers[4] = {0}, welcomed = 0, granted = 0;
    start_all(s, auto_flags);
    settled(s, &v);
    bqw_node_kill(s->w, n3);
    size_t p = bqw_wait_primary(s->w, (int)n3, &v);
    fprintf(stderr,
            "burst of %d messages as n3 (killed), seed %llu (BQ_TRUST_SEED replays it); "
            "primary %s in epoch %llu\n",
            BURST, (unsigned long long)seed, v.node, v.epoch);
    long long t_burst = bqt_now_ms();
    for (int k = 0; k < BURST; k++) {
        size_t to = rnd(&x) % 2 ? p : NODES - p - n3; /* the primary or the other survivor */
        answer_t a = hostile_message(s, &x, to, "n3", v.epoch);
        answers[a.st]++;
        welcomed += a.st == BQP_MESSAGE && a.body == BQ__REPL__MESSAGE__BODY_WELCOME;
        granted += a.st == BQP_MESSAGE && a.granted;
    }
    long long t0 = bqt_now_ms();
    fprintf(stderr,
            "burst sent in %lld ms: %zu answered (%zu welcomed, %zu votes granted), %zu "
            "closed, %zu unanswered\n",
            t0 - t_burst, answers[BQP_MESSAGE], welcomed, granted, answers[BQP_CLOSED],
            answers[BQP_TIMEOUT]);
    long long ms;
    size_t q = wait_writes(s, n3, &v, &ms, "the burst");
    fprintf(stderr, "after the burst: primary %s in epoch %llu, a put acknowledged after %lld ms\n",
            v.node, v.epoch, ms);
    assert_true(q != n3);
    /* n3 comes back and follows, whatever epoch the others reached. */
    t0 = bqt_now_ms();
    bqw_node_up(s->w, n3, auto_flags);
    settled(s, &v);
    ms = bqt_now_ms() - t0;
    fprintf(stderr, "n3 restarted: streaming from %s (epoch %llu) after %lld ms\n", v.node, v.epoch,
            ms);
    if (ms >= RECOVERY_MAX_MS)
        fail_msg("n3 followed %lld ms after its restart, want < %d", ms, RECOVERY_MAX_MS);
    s->passed = true;
}

/* ---- 3. an admin flood does not starve probes ---- */

#define ADMIN_IDLE 64
#define ADMIN_KEEPALIVE 8
#define ADMIN_FLOOD_MS 7000 /* beyond the 5 s an idle connection lasts */
#define ADMIN_PROBE_EVERY_MS 200
#define ADMIN_IDLE_TIMEOUT_MS 5000 /* the admin API closes an idle connection after it */

typedef struct until {
    long long at;
} until_t;

static bool time_reached(void *arg)
{
    return bqt_now_ms() >= ((until_t *)arg)->at;
}

static void admin_flood_does_not_starve_probes(void **state)
{
    trust_t *s = *state;
    flood_t *f = new_flood(s, ADMIN_IDLE_TIMEOUT_MS);
    char text[256];
    long long worst = 0;
    int probes = 0;
    bqc_start(s->c, 0, manual_standby); /* alone: a standby without a primary */
    assert_int_equal(admin_get(s, 0, "/healthz", text, sizeof text), 200);
    int port = s->c->node[0].admin_port;
    flood_add(f, port, ADMIN_IDLE, false);
    flood_add(f, port, ADMIN_KEEPALIVE, true);
    flood_start(f);
    long long end = bqt_now_ms() + ADMIN_FLOOD_MS;
    while (bqt_now_ms() < end) {
        until_t next = {bqt_now_ms() + ADMIN_PROBE_EVERY_MS};
        long long t0 = bqt_now_ms();
        int st = bqa_call(port, NULL, NULL, "GET", "/healthz", PROBE_MAX_MS, text, sizeof text);
        long long ms = bqt_now_ms() - t0;
        probes++;
        if (st != 200 || ms >= PROBE_MAX_MS)
            fail_msg("probe %d, %lld ms into the flood: GET /healthz answered %d after %lld ms "
                     "(want 200 within %d ms)",
                     probes, t0 - f->started, st, ms, PROBE_MAX_MS);
        worst = ms > worst ? ms : worst;
        bqt_wait_until(time_reached, &next, ADMIN_PROBE_EVERY_MS);
    }
    long long ran = flood_stop(f);
    size_t evicted = bqc_log_count(s->c, 0, "admin connection evicted", NULL);
    fprintf(stderr,
            "%d probes answered 200, the slowest in %lld ms; %zu \"admin connection "
            "evicted\" lines in %lld ms\n",
            probes, worst, evicted, ran);
    if (evicted == 0)
        fail_msg("no connection was evicted: the flood did not fill the admin API");
    if ((long long)evicted > ran / 1000 + 2)
        fail_msg("%zu eviction lines in %lld ms: not rate-limited", evicted, ran);
    s->passed = true;
}

/* ---- 4. a replication flood does not keep peers or votes out ---- */

#define REPL_FLOOD 40
#define LINK_TIMEOUT_MS 1000 /* a silent link is closed after --failover-timeout (auto) */
#define REPL_FLOOD_MS 6000   /* the flood lasts at least this long: the log's rate is seen */

/* Lines of node i's log about strangers' connections, per kind: one a
 * second at most, and one more for each process image (an election
 * restarts the winner, with a fresh limit). */
/* A burst of connections that all arrive in one turn of the node's loop
 * (the node is stopped while they and a probe connect, so the kernel
 * queues them): admission evicts to make room, and evicted connections
 * must not keep their places until their handles close, or the probe that
 * came with the burst would be refused. */
static void admin_burst_does_not_refuse_probes(void **state)
{
    trust_t *s = *state;
    int fd[ADMIN_IDLE + ADMIN_KEEPALIVE + 8];
    char text[256];
    bqc_start(s->c, 0, manual_standby);
    int port = s->c->node[0].admin_port;
    assert_int_equal(admin_get(s, 0, "/healthz", text, sizeof text), 200);
    bqt_server_signal(&s->c->node[0].srv, SIGSTOP);
    for (size_t k = 0; k < sizeof fd / sizeof fd[0]; k++) {
        char src[16];
        snprintf(src, sizeof src, "127.0.0.%zu", 2 + k % FLOOD_SOURCES);
        fd[k] = bqp_tcp_from(src, port);
    }
    bqa_conn_t *probe = bqa_open(port, NULL, NULL, PROBE_MAX_MS);
    int sent = probe ? bqa_send(probe, "GET", "/healthz") : -1;
    bqt_server_signal(&s->c->node[0].srv, SIGCONT);
    int st = sent == 0 ? bqa_reply(probe, PROBE_MAX_MS, text, sizeof text) : -1;
    bqa_close(probe);
    for (size_t k = 0; k < sizeof fd / sizeof fd[0]; k++)
        if (fd[k] >= 0)
            close(fd[k]);
    if (st != 200)
        fail_msg("a probe that came with a burst of %zu connections: %d, want 200 (%zu \"admin "
                 "connection refused\" lines)",
                 sizeof fd / sizeof fd[0], st,
                 bqc_log_count(s->c, 0, "admin connection refused", NULL));
    s->passed = true;
}

static void expect_stranger_lines_limited(trust_t *s, size_t i, long long ms)
{
    static const char *const kinds[] = {"pending connection", "replication: connection closed",
                                        "replication: connection dropped"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t n = bqc_log_count(s->c, i, kinds[k], NULL);
        fprintf(stderr, "%s: %zu \"%s\" lines in %lld ms\n", name_of(s, i), n, kinds[k], ms);
        if ((long long)n > ms / 1000 + 3)
            fail_msg("%s logged %zu \"%s\" lines in %lld ms: not rate-limited", name_of(s, i), n,
                     kinds[k], ms);
    }
}

static void replication_flood_keeps_peers_in(void **state)
{
    trust_t *s = *state;
    flood_t *f = new_flood(s, LINK_TIMEOUT_MS);
    bqc_view_t v;
    start_all(s, auto_flags);
    size_t p = settled(s, &v), q = other_than(p);
    for (size_t i = 0; i < NODES; i++)
        flood_add(f, s->c->node[i].repl_port, REPL_FLOOD, false);
    flood_start(f);
    fprintf(stderr, "%d silent connections to each replication port; primary %s\n", REPL_FLOOD,
            v.node);

    /* A standby killed and restarted follows the primary again. */
    bqw_node_kill(s->w, q);
    long long t0 = bqt_now_ms();
    bqw_node_up(s->w, q, auto_flags);
    bqw_wait_streaming(s->w, q, false);
    long long ms = bqt_now_ms() - t0;
    fprintf(stderr, "standby %s restarted: streaming again after %lld ms\n", name_of(s, q), ms);
    if (ms >= RECOVERY_MAX_MS)
        fail_msg("the restarted standby %s followed after %lld ms, want < %d", name_of(s, q), ms,
                 RECOVERY_MAX_MS);

    /* The primary killed: the others elect one through their flooded ports. */
    bqw_node_kill(s->w, p);
    size_t n = wait_writes(s, p, &v, &ms, "kill -9 of the primary");
    fprintf(stderr,
            "primary %s killed: %s elected in epoch %llu, a put acknowledged after %lld "
            "ms\n",
            name_of(s, p), v.node, v.epoch, ms);
    until_t end = {f->started + REPL_FLOOD_MS};
    bqt_wait_until(time_reached, &end, REPL_FLOOD_MS);
    long long ran = flood_stop(f);
    expect_stranger_lines_limited(s, p, ran);
    expect_stranger_lines_limited(s, n, ran);
    s->passed = true;
}

/* ---- 5. big messages and unknown fields cost no memory ---- */

/* An Ack (field 6 of Message) made of nothing but `bytes` of unknown
 * varint fields 9 = 0, framed. *len gets its length; free it. */
static uint8_t *tiny_fields_ack(size_t bytes, size_t *len)
{
    uint8_t *m = malloc(4 + 1 + 5 + bytes), *p = m + 4;
    assert_non_null(m);
    *p++ = (6 << 3) | 2; /* field 6, length-delimited */
    for (size_t v = bytes;; v >>= 7) {
        *p++ = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    for (size_t k = 0; k + 2 <= bytes; k += 2) {
        *p++ = (9 << 3) | 0; /* field 9, varint */
        *p++ = 0;
    }
    size_t body = (size_t)(p - m) - 4;
    for (int i = 0; i < 4; i++)
        m[i] = (uint8_t)(body >> (8 * i));
    *len = (size_t)(p - m);
    return m;
}

static void oversized_messages_cost_no_memory(void **state)
{
    trust_t *s = *state;
    bqc_view_t v;
    char text[300];
    start_all(s, auto_flags);
    size_t p = settled(s, &v), q = other_than(p), r = other_than(q);

    /* 8 MiB messages before any hello, from peers' certificates, on
     * several connections at once (all but the last byte). */
    long before = peak_rss_kib(s, p);
    uint8_t *big = calloc(1, 4 + BIG_MESSAGE);
    assert_non_null(big);
    for (int i = 0; i < 4; i++)
        big[i] = (uint8_t)(BIG_MESSAGE >> (8 * i));
    bqp_conn_t *conn[BIG_SENDERS];
    for (size_t k = 0; k < BIG_SENDERS; k++) {
        conn[k] = peer_to(s, p, name_of(s, k % 2 ? q : r));
        int rc = bqp_send_raw(conn[k], big, 4 + BIG_MESSAGE - 1, BQC_REPLY_MS);
        fprintf(stderr, "an 8 MiB message to the primary %s (connection %zu): %s%s\n",
                name_of(s, p), k, rc == 0 ? "all sent but its last byte" : "sending stopped: ",
                rc == 0 ? "" : bqp_error(conn[k]));
    }
    free(big);
    expect_rss_growth_below(s, p, before, "8 MiB messages before a hello");
    for (size_t k = 0; k < BIG_SENDERS; k++) {
        if (!bqp_wait_closed(conn[k], CLOSE_MS, NULL))
            fail_msg("the primary kept connection %zu open after an 8 MiB length prefix", k);
        bqp_close(conn[k]);
    }

    /* An accepted standby's Ack of 60 KiB of one-byte unknown fields. */
    bqw_node_kill(s->w, q);
    bqp_conn_t *sb = peer_to(s, p, name_of(s, q));
    claim_t h = {.cluster = CLUSTER_ID, .node = name_of(s, q), .epoch = v.epoch};
    send_claim(sb, &h);
    answer_t a = read_answer(sb, ANSWER_MS);
    if (a.st != BQP_MESSAGE || a.body != BQ__REPL__MESSAGE__BODY_WELCOME)
        fail_msg("the hello of %s (killed) as a standby was answered %s", name_of(s, q),
                 answer_text(&a, text, sizeof text));
    before = peak_rss_kib(s, p);
    size_t len;
    uint8_t *ack = tiny_fields_ack(TINY_FIELDS_BYTES, &len);
    int rc = bqp_send_raw(sb, ack, len, BQC_REPLY_MS);
    free(ack);
    size_t after_ack = 0;
    bool closed = bqp_wait_closed(sb, CLOSE_MS, &after_ack);
    fprintf(stderr, "a %zu-byte Ack of unknown fields: %s; the link %s (%zu messages after it)\n",
            len, rc == 0 ? "sent" : bqp_error(sb), closed ? "closed" : "stayed open", after_ack);
    bqp_close(sb);
    if (!closed)
        fail_msg("the primary kept the link of a standby that sent a %zu-byte Ack of unknown "
                 "fields open for %d ms",
                 len, CLOSE_MS);
    bqc_wait_log(s->c, p, "standby disconnected", "wire: bad message", 1, BQC_WAIT_MS);
    expect_rss_growth_below(s, p, before, "an Ack of unknown fields");
    bqw_node_up(s->w, q, auto_flags);
    bqw_wait_streaming(s->w, q, false);
    s->passed = true;
}

/* ---- 6. the loopback admin API: who may POST ---- */

/* Node 0's answer to method path as `as` (a certificate; NULL:
 * plaintext). */
static int admin_as(trust_t *s, const char *as, const char *method, const char *path, char *text,
                    size_t cap)
{
    int st = bqa_call(s->c->node[0].admin_port, as ? g_certs : NULL, as, method, path, BQC_REPLY_MS,
                      text, cap);
    fprintf(stderr, "%s %s as %s: %d \"%.*s\"\n", method, path, as ? as : "plaintext", st,
            (int)strcspn(text, "\n"), text);
    return st;
}

/* Node 0 is still a standby and was not forced to promote itself. */
static void expect_still_standby(trust_t *s, const char *after)
{
    char role[24];
    node_epoch(s, 0, role, sizeof role);
    if (strcmp(role, "standby") != 0 || bqc_log_count(s->c, 0, "forced promotion", NULL) != 0)
        fail_msg("after %s the node is %s (%zu \"forced promotion\" lines)", after, role,
                 bqc_log_count(s->c, 0, "forced promotion", NULL));
}

static void loopback_admin_posts_need_certificates(void **state)
{
    trust_t *s = *state;
    char text[512];
    bqc_start(s->c, 0, manual_standby);
    assert_int_equal(admin_as(s, NULL, "POST", "/promote?force=1", text, sizeof text), 403);
    expect_still_standby(s, "a plaintext POST /promote?force=1");
    assert_int_equal(admin_as(s, "n2", "POST", "/promote?force=1", text, sizeof text), 403);
    expect_still_standby(s, "POST /promote?force=1 with another peer's certificate");
    assert_int_equal(admin_as(s, "n1", "POST", "/promote?force=1", text, sizeof text), 403);
    expect_still_standby(s, "POST /promote?force=1 with the node's own certificate");
    int st = admin_as(s, "n1", "POST", "/switchover?to=n2", text, sizeof text);
    if (st <= 0 || st == 403)
        fail_msg("POST /switchover?to=n2 with the node's own certificate: %d, want an answer "
                 "other than 403",
                 st);
    st = admin_as(s, "beanstalkctl", "POST", "/switchover?to=n2", text, sizeof text);
    if (st <= 0 || st == 403)
        fail_msg("POST /switchover?to=n2 as beanstalkctl: %d, want an answer other than 403", st);
    expect_still_standby(s, "the switchovers");
    assert_int_equal(admin_as(s, NULL, "GET", "/healthz", text, sizeof text), 200);
    assert_int_equal(admin_as(s, NULL, "GET", "/status", text, sizeof text), 200);
    /* Last: the operator may promote (an election that cannot be won alone). */
    st = admin_as(s, "beanstalkctl", "POST", "/promote", text, sizeof text);
    if (st <= 0 || st == 403)
        fail_msg("POST /promote as beanstalkctl: %d, want an answer other than 403", st);
    s->passed = true;
}

/* ---- 7. names from subjectAltName only, over TLS 1.3 ---- */

static void make_case_dir(trust_t *s)
{
    assert_int_equal(bqt_mkdtemp(s->tmp, sizeof s->tmp, "bq-trust-certs"), 0);
}

/* DIR/cn-only.pem and .key: signed by the cluster CA, subject CN=name, no
 * subjectAltName. */
static void make_cn_only_cert(trust_t *s, const char *name, bqp_tls_t *t)
{
    char subj[64], ca[512], cakey[512], log[512];
    memset(t, 0, sizeof *t);
    snprintf(t->cert, sizeof t->cert, "%s/cn-only.pem", s->tmp);
    snprintf(t->key, sizeof t->key, "%s/cn-only.key", s->tmp);
    snprintf(t->ca, sizeof t->ca, "%s/ca.pem", g_certs);
    snprintf(ca, sizeof ca, "%s/ca.pem", g_certs);
    snprintf(cakey, sizeof cakey, "%s/ca.key", g_certs);
    snprintf(log, sizeof log, "%s/openssl.log", s->tmp);
    snprintf(subj, sizeof subj, "/CN=%s", name);
    const char *args[] = {"req",
                          "-x509",
                          "-new",
                          "-newkey",
                          "ec",
                          "-pkeyopt",
                          "ec_paramgen_curve:prime256v1",
                          "-nodes",
                          "-keyout",
                          t->key,
                          "-out",
                          t->cert,
                          "-subj",
                          subj,
                          "-days",
                          "2",
                          "-CA",
                          ca,
                          "-CAkey",
                          cakey,
                          "-config",
                          "/dev/null",
                          "-addext",
                          "basicConstraints=critical,CA:FALSE",
                          "-addext",
                          "keyUsage=critical,digitalSignature",
                          "-addext",
                          "extendedKeyUsage=serverAuth,clientAuth",
                          NULL};
    if (bqt_run_to_exit("/usr/bin/openssl", args, log, 30000) != 0)
        fail_msg("openssl could not make a CN-only certificate (see %s)", log);
}

/* Connects to node i with t, sends a hello as `node` and reads the answer:
 * the connection must end without one (TLS refused it). */
static void expect_tls_refused(trust_t *s, size_t i, const bqp_tls_t *t, const char *node,
                               const char *what)
{
    char err[256] = "", text[300];
    bqp_conn_t *p = bqp_connect(s->c->node[i].repl_port, t, ANSWER_MS, err, sizeof err);
    if (!p) {
        fprintf(stderr, "%s to %s: the handshake failed: %s\n", what, name_of(s, i), err);
        return;
    }
    claim_t h = {.cluster = CLUSTER_ID, .node = node, .epoch = 1};
    send_claim(p, &h);
    answer_t a = read_answer(p, ANSWER_MS);
    bqp_close(p);
    fprintf(stderr, "%s to %s: %s\n", what, name_of(s, i), answer_text(&a, text, sizeof text));
    if (a.st != BQP_CLOSED)
        fail_msg("%s to %s: the hello was answered (%s), want the connection refused", what,
                 name_of(s, i), text);
}

static void peer_names_need_subject_alt_name_and_tls13(void **state)
{
    trust_t *s = *state;
    bqc_view_t v;
    bqp_tls_t cn, tls12;
    make_case_dir(s);
    start_all(s, auto_flags);
    size_t p = settled(s, &v), q = other_than(p), r = other_than(q);
    make_cn_only_cert(s, name_of(s, q), &cn);
    expect_tls_refused(s, p, &cn, name_of(s, q), "a certificate naming a standby in its CN only");
    bqc_wait_log(s->c, p, "TLS peer refused", NULL, 1, BQC_WAIT_MS);
    /* To another node: each node logs one refusal a second. */
    bqp_tls_files(&tls12, g_certs, name_of(s, q));
    tls12.tls12 = true;
    expect_tls_refused(s, r, &tls12, name_of(s, q), "TLS 1.2 with a peer's certificate");
    bqc_wait_log(s->c, r, "TLS peer refused", NULL, 1, BQC_WAIT_MS);
    /* The same peer's own certificate over TLS 1.3 is welcome: the
     * refusals were about the name and the version. */
    claim_t h = {.cluster = CLUSTER_ID, .node = name_of(s, q), .epoch = v.epoch};
    answer_t a = claim_to(s, r, name_of(s, q), &h);
    assert_true(a.st == BQP_MESSAGE && a.body == BQ__REPL__MESSAGE__BODY_REFUSE);
    assert_non_null(strstr(a.detail, "not the primary"));
    s->passed = true;
}

/* ---- 7. a hello's role is the one our flags give the peer ---- */

static const char *const witness_data[] = {"--role=standby", "--failover=auto", "--witness", "n3",
                                           NULL};

/* A hello of node as a witness (or not) to the primary p, from its own
 * certificate; its answer. */
static answer_t role_hello(trust_t *s, size_t p, const char *node, bool witness,
                           const bqc_view_t *v)
{
    claim_t h = {.cluster = CLUSTER_ID,
                 .node = node,
                 .epoch = v->epoch,
                 .last_epoch = v->epoch,
                 .flag = witness};
    return claim_to(s, p, node, &h);
}

static void expect_role_refused(trust_t *s, size_t p, const answer_t *a, const char *claim,
                                const char *why)
{
    char text[300];
    fprintf(stderr, "%s: %s\n", claim, answer_text(a, text, sizeof text));
    if (a->st != BQP_MESSAGE || a->body != BQ__REPL__MESSAGE__BODY_REFUSE ||
        !strstr(a->detail, why))
        fail_msg("%s: answered %s, want a refusal saying \"%s\"", claim, text, why);
    bqc_wait_log(s->c, p, "standby refused", why, 1, BQC_WAIT_MS);
}

static void hello_role_comes_from_our_flags(void **state)
{
    trust_t *s = *state;
    bqc_view_t v;
    /* Three data nodes: a standby's certificate claiming a witness's role. */
    start_all(s, auto_flags);
    size_t p = settled(s, &v), q = other_than(p);
    answer_t a = role_hello(s, p, name_of(s, q), true, &v);
    expect_role_refused(s, p, &a, "a data node's hello claiming to be a witness",
                        "no --witness names it");

    /* Two data nodes naming n3 their witness (n3 down): n3's certificate
     * claiming a standby's role is refused, as a witness it is welcome. */
    assert_true(new_cluster(s));
    bqw_node_up(s->w, 0, witness_data);
    bqw_node_up(s->w, 1, witness_data);
    p = bqw_wait_settled(s->w, 1u << 2, &v); /* n3 is not expected to stream */
    a = role_hello(s, p, "n3", false, &v);
    expect_role_refused(s, p, &a, "the witness n3's hello claiming to be a standby",
                        "says it is a standby");
    a = role_hello(s, p, "n3", true, &v);
    if (a.st != BQP_MESSAGE || a.body != BQ__REPL__MESSAGE__BODY_WELCOME)
        fail_msg("the witness n3's own hello was not welcomed");
    s->passed = true;
}

/* ---- 8. --check-config: the certificate must name --node-id ---- */

static void check_config_wants_own_certificate(void **state)
{
    trust_t *s = *state;
    char peers[NODES][64], bdir[220], cert[200], key[200], ca[200], log[300];
    make_case_dir(s);
    snprintf(bdir, sizeof bdir, "%s/n1", s->tmp);
    assert_int_equal(mkdir(bdir, 0700), 0);
    snprintf(log, sizeof log, "%s/check-config.log", s->tmp);
    snprintf(ca, sizeof ca, "%s/ca.pem", g_certs);
    for (size_t i = 0; i < NODES; i++)
        snprintf(peers[i], sizeof peers[i], "%s=127.0.0.1:%d", g_names[i], s->c->node[i].repl_port);
    const char *who[] = {"n1", "n2"}; /* our own certificate, then another node's */
    for (size_t k = 0; k < 2; k++) {
        snprintf(cert, sizeof cert, "%s/%s.pem", g_certs, who[k]);
        snprintf(key, sizeof key, "%s/%s.key", g_certs, who[k]);
        const char *args[] = {"--check-config",
                              "-b",
                              bdir,
                              "--node-id",
                              "n1",
                              "--role=standby",
                              "--failover=auto",
                              "--peer",
                              peers[0],
                              "--peer",
                              peers[1],
                              "--peer",
                              peers[2],
                              "--tls-cert",
                              cert,
                              "--tls-key",
                              key,
                              "--tls-ca",
                              ca,
                              NULL};
        int rc = bqt_run_to_exit(bqt_our_binary(), args, log, 30000);
        size_t said = bqt_log_count(log, "does not name --node-id", NULL);
        fprintf(stderr, "--check-config --node-id n1 with %s's certificate: exit %d%s\n", who[k],
                rc, said ? ", says it does not name --node-id" : "");
        if (k == 0 && rc != 0)
            fail_msg("--check-config with the node's own certificate exited %d (see %s)", rc, log);
        if (k == 1 && (rc != 1 || said == 0))
            fail_msg("--check-config with n2's certificate for --node-id n1 exited %d%s, want 1 "
                     "saying the certificate does not name --node-id",
                     rc, said ? "" : " without saying why");
    }
    s->passed = true;
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(huge_epochs_are_not_believed),           T(hostile_burst_leaves_cluster_electable),
        T(admin_flood_does_not_starve_probes),     T(admin_burst_does_not_refuse_probes),
        T(replication_flood_keeps_peers_in),       T(oversized_messages_cost_no_memory),
        T(loopback_admin_posts_need_certificates), T(peer_names_need_subject_alt_name_and_tls13),
        T(hello_role_comes_from_our_flags),        T(check_config_wants_own_certificate),
    };
    signal(SIGPIPE, SIG_IGN); /* peers that close while we write */
    if (getenv("BQT_FILTER"))
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("trust", tests, group_setup, group_teardown);
}
