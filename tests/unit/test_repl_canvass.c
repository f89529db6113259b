/* Unit tests of replication/canvass.c on a real libuv loop over 127.0.0.1:
 * the canvasser ("cand") asks fake voters, each a listener on port 0 that
 * accepts links with bq_link_accept and answers a VoteRequest its own way
 * (a VoteReply, a Refuse, silence, a reply in another node's name, hanging
 * up, or holding the request until the test answers it), plus a peer that
 * is down. Certificates come from deploy/mkcerts. Covers which replies are
 * reported (and under which peer index), the request's fields, the round
 * deadline (seen from the silent voter's end of the link), a new round or a
 * cancel dropping the replies of the old one, cancelling or freeing from the
 * reply callback, freeing with links open, TLS and plaintext, and the log
 * lines of a round (replication/report.h: captured by the test's sink, no
 * node/ linked). Every wait runs the loop until a condition holds, under a
 * deadline that fails the test; teardown checks that nothing is left on
 * the loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/canvass.h"
#include "replication/link.h"
#include "replication/report.h"
#include "replication/tls.h"
#include "tls_certs.h"
#include "uv_until.h"

#define DEADLINE_MS 10000 /* the longest any wait may take */
#define ROUND_MS 1500     /* a round's deadline */
#define MARGIN_MS 1000    /* how late after it the silent voter may see its link close */
#define MAX_FAKES 8
#define MAX_CONNS 4

typedef enum behaviour {
    ANSWER,   /* a VoteReply in its own name */
    REFUSE,   /* a Refuse, then closes */
    SILENT,   /* keeps the link open, says nothing */
    WRONG_ID, /* a VoteReply in another node's name */
    HANG_UP,  /* closes on the request */
    HOLD,     /* keeps the request until the test calls answer() */
    DOWN,     /* nothing listens on its port */
} behaviour_t;

typedef struct fake fake_t;

/* One link a fake voter accepted. */
typedef struct conn {
    fake_t *f;
    bq_link_t *link;
    bool got_request;
    uint32_t version;
    char cluster_id[32], node_id[32];
    uint64_t epoch, last_epoch, last_lsn;
    bool prevote;
    int closed;
    uint64_t closed_at; /* loop time */
} conn_t;

struct fake {
    struct world *w;
    char name[24];    /* its node id: v0, v1, ... */
    const char *cert; /* the certificate it presents (its name unless an impostor) */
    behaviour_t behaviour;
    bool grant;
    uv_tcp_t listener;
    bool listening;
    char port[16];
    SSL_CTX *ctx;
    conn_t conns[MAX_CONNS];
    int nconns;
};

typedef struct report {
    size_t peer;
    char node_id[32];
    uint64_t epoch;
    bool prevote, granted;
} report_t;

typedef enum reaction { KEEP, CANCEL, FREE } reaction_t;

/* A line the canvasser reported (replication/report.h). */
typedef struct logged {
    bq_report_level_t level;
    char msg[64];
    char kv[160];
} logged_t;

#define MAX_LOGGED 32
static logged_t logged[MAX_LOGGED];
static int nlogged;

typedef struct world {
    uv_loop_t loop;
    bool tls;
    SSL_CTX *cctx;
    const char *accept[1]; /* what a fake voter accepts: the candidate */
    fake_t fakes[MAX_FAKES];
    size_t nfakes;
    bq_repl_peer_t peers[MAX_FAKES];
    bq_repl_config_t cfg;
    bq_canvass_t *c;
    reaction_t reaction; /* what the reply callback does after recording */
    report_t reports[16];
    int nreports;
    uint64_t t0; /* loop time when the round started */
} world_t;

/* ---- certificates ---------------------------------------------------- */

static int setup_certs(void **state)
{
    (void)state;
    return make_certs("/tmp/bq-canvass-XXXXXX", "cand v0 v1 v2 v3 v4 v5 v6");
}

/* ---- the report sink ------------------------------------------------- */

static bool log_enabled(bq_report_level_t level)
{
    (void)level;
    return true;
}

static void log_write(bq_report_level_t level, const char *msg, unsigned long suppressed,
                      const char *kv, va_list ap) __attribute__((format(printf, 4, 0)));

static void log_write(bq_report_level_t level, const char *msg, unsigned long suppressed,
                      const char *kv, va_list ap)
{
    assert_int_equal(suppressed, 0); /* the canvasser limits nothing */
    assert_true(nlogged < MAX_LOGGED);
    logged_t *l = &logged[nlogged++];
    l->level = level;
    snprintf(l->msg, sizeof l->msg, "%s", msg);
    vsnprintf(l->kv, sizeof l->kv, kv, ap);
}

static const bq_report_sink_t log_sink = {.enabled = log_enabled, .write = log_write};

/* How many lines were reported with msg and a kv starting with prefix. */
static int logged_count(const char *msg, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < nlogged; i++) {
        n += !strcmp(logged[i].msg, msg) && !strncmp(logged[i].kv, prefix, strlen(prefix));
    }
    return n;
}

/* ---- the loop -------------------------------------------------------- */

typedef struct until {
    bool (*cond)(world_t *);
    world_t *w;
} until_t;

static bool holds(void *arg)
{
    until_t *u = arg;
    return u->cond(u->w);
}

/* Runs the loop until cond(w) holds; fails the test after ms. */
static void run_until(world_t *w, bool (*cond)(world_t *), uint64_t ms, const char *what)
{
    until_t u = {cond, w};
    uvt_run_until(&w->loop, holds, &u, ms, what);
}

/* ---- the fake voters ------------------------------------------------- */

static void send_reply(conn_t *k, const char *node_id)
{
    Bq__Repl__VoteReply r = BQ__REPL__VOTE_REPLY__INIT;
    r.node_id = (char *)node_id;
    r.epoch = k->epoch;
    r.prevote = k->prevote;
    r.granted = k->f->grant;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    m.body_case = BQ__REPL__MESSAGE__BODY_VOTE_REPLY;
    m.vote_reply = &r;
    assert_int_equal(bq_link_send(k->link, &m), 0);
}

/* A HOLD voter answers the request it kept. */
static void answer(conn_t *k)
{
    assert_true(k->got_request);
    send_reply(k, k->f->name);
}

static void refuse(conn_t *k)
{
    Bq__Repl__Refuse r = BQ__REPL__REFUSE__INIT;
    r.reason = BQ__REPL__REFUSE_REASON__NOT_PRIMARY;
    r.detail = "no";
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    m.body_case = BQ__REPL__MESSAGE__BODY_REFUSE;
    m.refuse = &r;
    assert_int_equal(bq_link_send(k->link, &m), 0);
    bq_link_close(k->link, "refused");
}

static void fake_open(bq_link_t *l, void *arg)
{
    (void)l;
    (void)arg;
}

static void fake_message(bq_link_t *l, const Bq__Repl__Message *m, void *arg)
{
    conn_t *k = arg;
    assert_int_equal(m->body_case, BQ__REPL__MESSAGE__BODY_VOTE_REQUEST);
    assert_false(k->got_request);
    const Bq__Repl__VoteRequest *q = m->vote_request;
    k->got_request = true;
    k->version = q->version;
    snprintf(k->cluster_id, sizeof k->cluster_id, "%s", q->cluster_id);
    snprintf(k->node_id, sizeof k->node_id, "%s", q->node_id);
    k->epoch = q->epoch;
    k->prevote = q->prevote;
    k->last_epoch = q->last_epoch;
    k->last_lsn = q->last_lsn;
    switch (k->f->behaviour) {
    case ANSWER:
        send_reply(k, k->f->name);
        break;
    case WRONG_ID:
        send_reply(k, "intruder");
        break;
    case REFUSE:
        refuse(k);
        break;
    case HANG_UP:
        bq_link_close(l, "hanging up");
        break;
    default:
        break;
    }
}

static void fake_close(bq_link_t *l, const char *why, void *arg)
{
    conn_t *k = arg;
    (void)why;
    assert_ptr_equal(l, k->link);
    k->closed++;
    k->closed_at = uv_now(&k->f->w->loop);
}

static const bq_link_callbacks_t fake_callbacks = {fake_open, fake_message, NULL, fake_close};

static void fake_connection(uv_stream_t *listener, int status)
{
    fake_t *f = listener->data;
    world_t *w = f->w;
    assert_int_equal(status, 0);
    assert_true(f->nconns < MAX_CONNS);
    conn_t *k = &f->conns[f->nconns++];
    k->f = f;
    bq_link_config_t lc = {w->tls ? f->ctx : NULL, w->accept, 1, 0, 5000, 0};
    assert_int_equal(bq_link_accept(&w->loop, listener, &lc, &fake_callbacks, k, &k->link), 0);
}

/* Starts fake voter i (listening on a free port, or not at all when DOWN). */
static void start_fake(world_t *w, size_t i, behaviour_t b, bool grant)
{
    fake_t *f = &w->fakes[i];
    f->w = w;
    snprintf(f->name, sizeof f->name, "v%zu", i);
    if (f->cert == NULL) {
        f->cert = f->name;
    }
    f->behaviour = b;
    f->grant = grant;
    if (w->tls) {
        f->ctx = ctx_for(true, f->cert);
    }
    assert_int_equal(uv_tcp_init(&w->loop, &f->listener), 0);
    f->listener.data = f;
    f->listening = true;
    struct sockaddr_in addr;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &addr), 0);
    assert_int_equal(uv_tcp_bind(&f->listener, (struct sockaddr *)&addr, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&f->listener, 16, fake_connection), 0);
    int len = sizeof addr;
    assert_int_equal(uv_tcp_getsockname(&f->listener, (struct sockaddr *)&addr, &len), 0);
    snprintf(f->port, sizeof f->port, "%u", ntohs(addr.sin_port));
    if (b == DOWN) {
        uv_close((uv_handle_t *)&f->listener, NULL); /* connections to the port are refused */
        f->listening = false;
    }
    w->peers[i] = (bq_repl_peer_t){.name = f->name, .host = "127.0.0.1", .port = f->port};
}

/* ---- the canvasser --------------------------------------------------- */

static void on_reply(void *arg, size_t peer, const Bq__Repl__VoteReply *r)
{
    world_t *w = arg;
    assert_true(w->nreports < 16);
    report_t *p = &w->reports[w->nreports++];
    p->peer = peer;
    snprintf(p->node_id, sizeof p->node_id, "%s", r->node_id);
    p->epoch = r->epoch;
    p->prevote = r->prevote;
    p->granted = r->granted;
    if (w->reaction == CANCEL) {
        bq_canvass_cancel(w->c);
    } else if (w->reaction == FREE) {
        bq_canvass_free(w->c);
        w->c = NULL;
    }
}

/* Starts n fake voters with behaviours b (grants as g) and the canvasser
 * that asks them. */
static void start(world_t *w, bool tls, const behaviour_t *b, const bool *g, size_t n)
{
    assert_true(n <= MAX_FAKES);
    w->tls = tls;
    w->nfakes = n;
    for (size_t i = 0; i < n; i++) {
        start_fake(w, i, b[i], g != NULL && g[i]);
    }
    if (tls) {
        w->cctx = ctx_for(false, "cand");
    }
    w->cfg = (bq_repl_config_t){
        .cluster_id = "c1",
        .node_id = "cand",
        .peers = w->peers,
        .npeers = n,
        .tls_client = w->cctx,
        .idle_ms = 5000,
    };
    w->c = bq_canvass_new(&w->loop, &w->cfg, on_reply, w);
    assert_non_null(w->c);
}

/* Starts a round; the fields the config fills are given wrong on purpose. */
static void round_of(world_t *w, uint64_t epoch, bool prevote)
{
    Bq__Repl__VoteRequest q = BQ__REPL__VOTE_REQUEST__INIT;
    q.version = 99;
    q.cluster_id = "bogus";
    q.node_id = "bogus";
    q.epoch = epoch;
    q.prevote = prevote;
    q.last_epoch = epoch - 1;
    q.last_lsn = 1234;
    uv_update_time(&w->loop);
    w->t0 = uv_now(&w->loop);
    assert_int_equal(bq_canvass_round(w->c, &q, ROUND_MS), 0);
}

static const report_t *report_for(world_t *w, size_t peer)
{
    const report_t *found = NULL;
    for (int i = 0; i < w->nreports; i++) {
        if (w->reports[i].peer == peer) {
            assert_null(found); /* one report per peer */
            found = &w->reports[i];
        }
    }
    return found;
}

static void assert_request(const conn_t *k, uint64_t epoch, bool prevote)
{
    assert_true(k->got_request);
    assert_int_equal(k->version, 1);
    assert_string_equal(k->cluster_id, "c1");
    assert_string_equal(k->node_id, "cand");
    assert_int_equal(k->epoch, epoch);
    assert_int_equal(k->prevote, prevote);
    assert_int_equal(k->last_epoch, epoch - 1);
    assert_int_equal(k->last_lsn, 1234);
}

/* ---- fixtures -------------------------------------------------------- */

static int setup(void **state)
{
    world_t *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    w->accept[0] = "cand";
    *state = w;
    nlogged = 0;
    bq_report_set_sink(&log_sink);
    return 0;
}

typedef struct census {
    int others;
} census_t;

static void count_handle(uv_handle_t *h, void *arg)
{
    census_t *c = arg;
    if (h != (uv_handle_t *)uvt_deadline) { /* run_until's own deadline is not counted */
        c->others++;
    }
}

/* No handle of the canvasser, its links or the fakes is left. */
static bool loop_empty(world_t *w)
{
    census_t c = {0};
    uv_walk(&w->loop, count_handle, &c);
    return c.others == 0;
}

/* Frees the canvasser, closes what is left of the fakes, and checks that
 * the loop ends up empty and every accepted link closed exactly once. */
static int teardown(void **state)
{
    world_t *w = *state;
    bq_canvass_free(w->c);
    for (size_t i = 0; i < w->nfakes; i++) {
        fake_t *f = &w->fakes[i];
        for (int j = 0; j < f->nconns; j++) {
            if (f->conns[j].closed == 0) {
                bq_link_close(f->conns[j].link, "teardown");
            }
        }
        if (f->listening) {
            uv_close((uv_handle_t *)&f->listener, NULL);
        }
    }
    run_until(w, loop_empty, DEADLINE_MS, "nothing is left on the loop");
    uv_run(&w->loop, UV_RUN_DEFAULT); /* requests still finishing, if any */
    assert_int_equal(uv_loop_close(&w->loop), 0);
    for (size_t i = 0; i < w->nfakes; i++) {
        for (int j = 0; j < w->fakes[i].nconns; j++) {
            assert_int_equal(w->fakes[i].conns[j].closed, 1);
        }
        SSL_CTX_free(w->fakes[i].ctx);
    }
    SSL_CTX_free(w->cctx);
    free(w);
    bq_report_set_sink(NULL);
    return 0;
}

/* ---- tests ----------------------------------------------------------- */

/* Every fake voter that can be reached was asked and its link closed. */
static bool all_closed(world_t *w)
{
    for (size_t i = 0; i < w->nfakes; i++) {
        const fake_t *f = &w->fakes[i];
        if (f->behaviour != DOWN && (f->nconns == 0 || f->conns[f->nconns - 1].closed == 0)) {
            return false;
        }
    }
    return true;
}

/* The five voters that give no vote were each reported once. */
static bool five_no_votes(world_t *w)
{
    (void)w;
    return logged_count("replication: no vote from peer", "peer=") == 5;
}

static void mixed_round(world_t *w, bool tls)
{
    static const behaviour_t b[] = {REFUSE, ANSWER, WRONG_ID, SILENT, ANSWER, DOWN, HANG_UP};
    static const bool g[] = {true, true, true, true, false, true, true};
    start(w, tls, b, g, 7);
    round_of(w, 7, true);
    run_until(w, all_closed, DEADLINE_MS, "every reachable voter's link closed");
    /* The two answers, under their peers' indexes; nothing else. */
    assert_int_equal(w->nreports, 2);
    const report_t *r1 = report_for(w, 1), *r4 = report_for(w, 4);
    assert_non_null(r1);
    assert_non_null(r4);
    assert_string_equal(r1->node_id, "v1");
    assert_true(r1->granted);
    assert_true(r1->prevote);
    assert_int_equal(r1->epoch, 7);
    assert_string_equal(r4->node_id, "v4");
    assert_false(r4->granted);
    for (size_t i = 0; i < 7; i++) {
        const fake_t *f = &w->fakes[i];
        if (b[i] == DOWN) {
            assert_int_equal(f->nconns, 0);
            continue;
        }
        assert_int_equal(f->nconns, 1);
        assert_request(&f->conns[0], 7, true);
        uint64_t after = f->conns[0].closed_at - w->t0;
        if (b[i] == SILENT) { /* closed at the round's deadline */
            assert_true(after >= ROUND_MS);
            assert_true(after <= ROUND_MS + MARGIN_MS);
        } else { /* closed on the answer, well before */
            assert_true(after < ROUND_MS);
        }
    }
    /* The lines: one per voter that gave no vote (the wrong node's too),
     * none for an answer, and the wrong node's name. */
    run_until(w, five_no_votes, DEADLINE_MS, "every voter without a vote reported");
    static const char *const none[] = {"peer=v0 ", "peer=v2 ", "peer=v3 ", "peer=v5 ", "peer=v6 "};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(logged_count("replication: no vote from peer", none[i]), 1);
    }
    assert_int_equal(logged_count("replication: no vote from peer",
                                  "peer=v3 why=\"no answer within the deadline\""),
                     1);
    assert_int_equal(
        logged_count("replication: vote reply from the wrong node", "peer=v2 node_id=intruder"), 1);
    for (int i = 0; i < nlogged; i++) {
        bool wrong = !strcmp(logged[i].msg, "replication: vote reply from the wrong node");
        assert_int_equal(logged[i].level, wrong ? BQ_REPORT_WARN : BQ_REPORT_DEBUG);
    }
    assert_int_equal(nlogged, 6);
}

static void test_round_tls(void **state)
{
    mixed_round(*state, true);
}

static void test_round_plaintext(void **state)
{
    mixed_round(*state, false);
}

/* A voter whose certificate is not the peer's name is never asked. */
static void test_impostor(void **state)
{
    world_t *w = *state;
    static const behaviour_t b[] = {ANSWER, ANSWER};
    static const bool g[] = {true, true};
    w->fakes[0].cert = "v1";
    start(w, true, b, g, 2);
    round_of(w, 3, false);
    run_until(w, all_closed, DEADLINE_MS, "both voters' links closed");
    assert_int_equal(w->nreports, 1);
    assert_int_equal(w->reports[0].peer, 1);
    assert_false(w->fakes[0].conns[0].got_request);
}

/* Every fake voter that can be reached got the request on its last link. */
static bool held(world_t *w)
{
    for (size_t i = 0; i < w->nfakes; i++) {
        const fake_t *f = &w->fakes[i];
        if (f->behaviour == DOWN) {
            continue;
        }
        if (f->nconns == 0 || !f->conns[f->nconns - 1].got_request) {
            return false;
        }
    }
    return true;
}

static bool two_reports_all_closed(world_t *w)
{
    return w->nreports == 2 && all_closed(w) && w->fakes[0].conns[0].closed == 1 &&
           w->fakes[1].conns[0].closed == 1;
}

/* The replies to round 1 are on their way when round 2 starts: only round
 * 2's are reported. */
static void test_new_round_cancels(void **state)
{
    world_t *w = *state;
    static const behaviour_t b[] = {HOLD, HOLD};
    start(w, true, b, NULL, 2);
    round_of(w, 7, true);
    run_until(w, held, DEADLINE_MS, "both voters hold round 1's request");
    answer(&w->fakes[0].conns[0]);
    answer(&w->fakes[1].conns[0]);
    w->fakes[0].behaviour = w->fakes[1].behaviour = ANSWER;
    round_of(w, 8, false);
    run_until(w, two_reports_all_closed, DEADLINE_MS, "round 2 answered, every link closed");
    for (size_t i = 0; i < 2; i++) {
        const report_t *r = report_for(w, i);
        assert_non_null(r);
        assert_int_equal(r->epoch, 8);
        assert_false(r->prevote);
        assert_int_equal(w->fakes[i].nconns, 2);
        assert_request(&w->fakes[i].conns[1], 8, false);
        /* Round 1's link was closed by round 2, not by its deadline. */
        assert_true(w->fakes[i].conns[0].closed_at - w->t0 < ROUND_MS);
    }
}

static void test_cancel(void **state)
{
    world_t *w = *state;
    static const behaviour_t b[] = {HOLD, HOLD};
    start(w, false, b, NULL, 2);
    round_of(w, 7, true);
    run_until(w, held, DEADLINE_MS, "both voters hold the request");
    answer(&w->fakes[0].conns[0]);
    bq_canvass_cancel(w->c);
    answer(&w->fakes[1].conns[0]);
    run_until(w, all_closed, DEADLINE_MS, "both voters' links closed");
    assert_int_equal(w->nreports, 0);
    for (size_t i = 0; i < 2; i++) {
        assert_true(w->fakes[i].conns[0].closed_at - w->t0 < ROUND_MS);
    }
}

/* The reply callback cancels (or frees) on the first reply: the second,
 * sent at the same time, is never reported. */
static void react_on_first(world_t *w, reaction_t reaction)
{
    static const behaviour_t b[] = {HOLD, HOLD, SILENT};
    static const bool g[] = {true, true, true};
    start(w, true, b, g, 3);
    w->reaction = reaction;
    round_of(w, 5, false);
    run_until(w, held, DEADLINE_MS, "every voter got the request");
    answer(&w->fakes[0].conns[0]);
    answer(&w->fakes[1].conns[0]);
    run_until(w, all_closed, DEADLINE_MS, "every voter's link closed");
    assert_int_equal(w->nreports, 1);
    assert_true(w->reports[0].peer < 2);
    /* The silent voter's link was closed by the reaction, not the deadline. */
    assert_true(w->fakes[2].conns[0].closed_at - w->t0 < ROUND_MS);
}

static void test_cancel_from_callback(void **state)
{
    react_on_first(*state, CANCEL);
}

static void test_free_from_callback(void **state)
{
    world_t *w = *state;
    react_on_first(w, FREE);
    assert_null(w->c);
}

/* Freed with every link open (the voters hold the request): the links
 * close, nothing is reported, nothing leaks (teardown, ASan). */
static void test_free_with_links_open(void **state)
{
    world_t *w = *state;
    static const behaviour_t b[] = {HOLD, SILENT, DOWN};
    start(w, true, b, NULL, 3);
    round_of(w, 7, true);
    run_until(w, held, DEADLINE_MS, "both voters hold the request");
    bq_canvass_free(w->c);
    w->c = NULL;
    answer(&w->fakes[0].conns[0]);
    run_until(w, all_closed, DEADLINE_MS, "both voters' links closed");
    assert_int_equal(w->nreports, 0);
}

/* Freed at once, while resolving: once the voters stop listening, the
 * loop empties (a link the voter accepted is closed from our side). */
static void test_free_at_once(void **state)
{
    world_t *w = *state;
    static const behaviour_t b[] = {SILENT, DOWN};
    start(w, true, b, NULL, 2);
    round_of(w, 7, true);
    bq_canvass_free(w->c);
    w->c = NULL;
    uv_close((uv_handle_t *)&w->fakes[0].listener, NULL);
    w->fakes[0].listening = false;
    run_until(w, loop_empty, DEADLINE_MS, "nothing is left on the loop");
    assert_int_equal(w->nreports, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_tls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_plaintext, setup, teardown),
        cmocka_unit_test_setup_teardown(test_impostor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_round_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_from_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_with_links_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_at_once, setup, teardown),
    };
    return cmocka_run_group_tests(tests, setup_certs, teardown_certs);
}
