/* The canvasser (see canvass.h): per round, one short-lived link to every
 * peer, each with its own small context (an attempt) that names the peer
 * and the round it belongs to. The rules live in replication/election.c;
 * this file only carries a request out and the first reply back.
 *
 * Rounds are numbered: cancelling (also by a new round) bumps the number and
 * closes the links of the round; an attempt whose number is not the current
 * one never reports, so a link of an old round that is still closing cannot
 * call back. A round timer closes what is still open at the deadline.
 *
 * Freeing: links close from the loop, and each on_close still uses the
 * canvasser (its attempts point to it). So bq_canvass_free cancels, closes
 * the timer and marks the canvasser closing; it is freed once the timer's
 * close callback and the last link's on_close have come back. */
#include "replication/canvass.h"

#include <stdlib.h>
#include <string.h>

#include "replication/handshake.h"
#include "replication/link.h"
#include "replication/report.h"
#include "replication/wire.h"

/* One link of one round. */
typedef struct attempt {
    bq_canvass_t *c;
    size_t peer;
    uint64_t round;
    bool answered;
    const char *names[1]; /* the certificate name accepted: the peer's */
} attempt_t;

struct bq_canvass {
    uv_loop_t *loop;
    bq_repl_config_t cfg;
    bq_canvass_reply_cb cb;
    void *arg;
    uv_timer_t timer;
    uint64_t round;             /* the current round's number */
    Bq__Repl__VoteRequest req;  /* the current round's request */
    bq_link_t **links;          /* per peer: its link in the current round, or NULL */
    size_t nlinks;              /* links of any round whose on_close is still to come */
    bool closing, timer_closed; /* bq_canvass_free was called; its timer is closed */
};

/* Frees c once it is closing and nothing of it is left on the loop. */
static void maybe_free(bq_canvass_t *c)
{
    if (!c->closing || !c->timer_closed || c->nlinks > 0)
        return;
    free(c->links);
    free(c);
}

/* Closes the links of the current round still open. */
static void close_round(bq_canvass_t *c, const char *why)
{
    uv_timer_stop(&c->timer);
    for (size_t i = 0; i < c->cfg.npeers; i++) {
        if (c->links[i])
            bq_link_close(c->links[i], why);
    }
}

static bool current(const attempt_t *a)
{
    return a->round == a->c->round;
}

static void on_open(bq_link_t *l, void *arg)
{
    attempt_t *a = arg;
    if (!current(a)) {
        bq_link_close(l, "vote round over");
        return;
    }
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    m.body_case = BQ__REPL__MESSAGE__BODY_VOTE_REQUEST;
    m.vote_request = &a->c->req;
    bq_link_send(l, &m); /* on failure the link closes: no answer */
}

/* The first message ends the link; only a VoteReply from the peer itself,
 * in the current round, is reported. */
static void on_message(bq_link_t *l, const Bq__Repl__Message *m, void *arg)
{
    attempt_t *a = arg;
    bq_canvass_t *c = a->c;
    const char *name = c->cfg.peers[a->peer].name;
    bool reply = m->body_case == BQ__REPL__MESSAGE__BODY_VOTE_REPLY;
    if (reply && strcmp(m->vote_reply->node_id, name) != 0) {
        bq_report(BQ_REPORT_WARN, "replication: vote reply from the wrong node",
                  "peer=%s node_id=%s", name, m->vote_reply->node_id);
        reply = false;
    }
    if (reply && current(a)) {
        a->answered = true;
        bq_link_close(l, "answered");
        c->cb(c->arg, a->peer, m->vote_reply); /* c stays valid: this link is not closed yet */
        return;
    }
    bq_link_close(l, reply ? "vote round over" : bq_wire_body_name(m));
}

static void on_close(bq_link_t *l, const char *why, void *arg)
{
    attempt_t *a = arg;
    bq_canvass_t *c = a->c;
    if (c->links[a->peer] == l)
        c->links[a->peer] = NULL;
    if (!a->answered && current(a))
        bq_report(BQ_REPORT_DEBUG, "replication: no vote from peer", "peer=%s why=\"%s\"",
                  c->cfg.peers[a->peer].name, why);
    free(a);
    c->nlinks--;
    maybe_free(c);
}

static const bq_link_callbacks_t callbacks = {
    .on_open = on_open,
    .on_message = on_message,
    .on_close = on_close,
};

static void round_expired(uv_timer_t *t)
{
    close_round(t->data, "no answer within the deadline");
}

static void timer_closed(uv_handle_t *h)
{
    bq_canvass_t *c = h->data;
    c->timer_closed = true;
    maybe_free(c);
}

bq_canvass_t *bq_canvass_new(uv_loop_t *loop, const bq_repl_config_t *cfg, bq_canvass_reply_cb cb,
                             void *arg)
{
    bq_canvass_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->links = calloc(cfg->npeers ? cfg->npeers : 1, sizeof *c->links);
    if (!c->links) {
        free(c);
        return NULL;
    }
    c->loop = loop;
    c->cfg = *cfg;
    c->cb = cb;
    c->arg = arg;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    return c;
}

/* Opens the current round's link to peer i. 0, or -1 when out of memory
 * (a peer that cannot be reached otherwise is just no answer). */
static int canvass_peer(bq_canvass_t *c, size_t i, uint64_t deadline_ms)
{
    const bq_repl_peer_t *p = &c->cfg.peers[i];
    attempt_t *a = calloc(1, sizeof *a);
    if (!a)
        return -1;
    *a = (attempt_t){.c = c, .peer = i, .round = c->round, .names = {p->name}};
    bq_link_config_t lc = {
        .tls = c->cfg.tls_client,
        .names = a->names,
        .nnames = 1,
        .max_message = BQ_WIRE_MAX_CONTROL, /* one vote reply */
        .handshake_ms = deadline_ms,
        .idle_ms = deadline_ms,
    };
    int r = bq_link_connect(c->loop, p->host, p->port, &lc, &callbacks, a, &c->links[i]);
    if (r < 0) {
        free(a);
        bq_report(BQ_REPORT_DEBUG, "replication: no vote from peer", "peer=%s why=\"connect: %s\"",
                  p->name, uv_strerror(r));
        return r == UV_ENOMEM ? -1 : 0;
    }
    c->nlinks++;
    return 0;
}

int bq_canvass_round(bq_canvass_t *c, const Bq__Repl__VoteRequest *req, uint64_t deadline_ms)
{
    bq_canvass_cancel(c);
    c->req = *req;
    c->req.version = BQ_REPL_VERSION;
    c->req.cluster_id = (char *)c->cfg.cluster_id;
    c->req.node_id = (char *)c->cfg.node_id;
    for (size_t i = 0; i < c->cfg.npeers; i++) {
        if (canvass_peer(c, i, deadline_ms) < 0) {
            bq_canvass_cancel(c);
            return -1;
        }
    }
    uv_timer_start(&c->timer, round_expired, deadline_ms, 0);
    return 0;
}

void bq_canvass_cancel(bq_canvass_t *c)
{
    close_round(c, "vote round cancelled");
    c->round++;
}

void bq_canvass_free(bq_canvass_t *c)
{
    if (!c || c->closing)
        return;
    bq_canvass_cancel(c);
    c->closing = true;
    uv_close((uv_handle_t *)&c->timer, timer_closed);
}
