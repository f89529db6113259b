/* The start-up probe of a manual-mode primary (start_probe.h): a private
 * loop runs canvass rounds to every peer and stops at the first answer
 * naming another primary, once every peer answered, or at the deadline. */
#include "node/cluster/start_probe.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "node/cluster/tls.h"
#include "node/base/log.h"
#include "replication/canvass.h"

/* A peer that cannot be reached (restarting, say) is asked again every
 * ROUND_MS until the deadline; a new round cancels the one in progress. */
#define ROUND_MS 200

typedef struct probe {
    uv_loop_t loop;
    uv_timer_t deadline, again;
    const bq_repl_config_t *rc;
    const Bq__Repl__VoteRequest *req;
    bq_canvass_t *cv;
    bool answered[BQ_FLAGS_MAX_PEERS];
    bq_start_probe_t *out;
} probe_t;

static void on_reply(void *arg, size_t peer, const Bq__Repl__VoteReply *r)
{
    probe_t *p = arg;
    bq_start_probe_t *o = p->out;
    o->answered += !p->answered[peer];
    p->answered[peer] = true;
    bq_log(BQ_LOG_DEBUG, "start-up probe: answer", "peer=%s epoch=%llu primary=\"%s\"",
           p->rc->peers[peer].name, (unsigned long long)r->epoch, r->primary ? r->primary : "");
    if (!o->primary[0] && r->primary && r->primary[0] && strcmp(r->primary, p->rc->node_id)) {
        snprintf(o->primary, sizeof o->primary, "%s", r->primary);
        snprintf(o->via, sizeof o->via, "%s", p->rc->peers[peer].name);
    }
    if (o->primary[0] || o->answered == o->asked)
        uv_stop(&p->loop);
}

static void on_deadline(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void on_again(uv_timer_t *t)
{
    probe_t *p = t->data;
    if (bq_canvass_round(p->cv, p->req, ROUND_MS) != 0)
        uv_stop(t->loop);
}

/* Runs rounds on p's loop until it stops, then closes everything on it. */
static int run_rounds(probe_t *p, uint64_t timeout_ms)
{
    p->cv = bq_canvass_new(&p->loop, p->rc, on_reply, p);
    if (!p->cv) {
        bq_logm(BQ_LOG_ERROR, "start-up probe: out of memory");
        return -1;
    }
    uv_timer_init(&p->loop, &p->deadline);
    uv_timer_init(&p->loop, &p->again);
    p->again.data = p;
    uv_timer_start(&p->deadline, on_deadline, timeout_ms, 0);
    uv_timer_start(&p->again, on_again, 0, ROUND_MS);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    bq_canvass_free(p->cv);
    uv_close((uv_handle_t *)&p->deadline, NULL);
    uv_close((uv_handle_t *)&p->again, NULL);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    return 0;
}

int bq_start_probe(const bq_flags_t *f, uint64_t epoch, uint64_t last_epoch, uint64_t timeout_ms,
                   bq_start_probe_t *out)
{
    bq_repl_peer_t peers[BQ_FLAGS_MAX_PEERS];
    bq_repl_config_t rc = {
        .cluster_id = f->cluster_id, .node_id = f->node_id, .peers = peers, .idle_ms = timeout_ms};
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < f->npeers; i++)
        if (strcmp(f->peers[i].name, f->node_id) != 0)
            peers[rc.npeers++] = (bq_repl_peer_t){
                .name = f->peers[i].name, .host = f->peers[i].host, .port = f->peers[i].port};
    out->asked = rc.npeers;
    if (rc.npeers == 0)
        return 0;
    if (bq_cluster_tls_new(f, &rc.tls_server, &rc.tls_client) != 0)
        return -1;
    probe_t p = {.rc = &rc, .out = out};
    int r = uv_loop_init(&p.loop);
    if (r == 0) {
        Bq__Repl__VoteRequest q = BQ__REPL__VOTE_REQUEST__INIT;
        q.epoch = epoch;
        q.prevote = true;
        q.last_epoch = last_epoch;
        p.req = &q;
        r = run_rounds(&p, timeout_ms);
        uv_loop_close(&p.loop);
    } else {
        bq_log(BQ_LOG_ERROR, "start-up probe: no loop", "err=\"%s\"", uv_strerror(r));
    }
    SSL_CTX_free(rc.tls_server);
    SSL_CTX_free(rc.tls_client);
    return r == 0 ? 0 : -1;
}
