/* The receiver: one link at a time to one peer. States: idle (waiting to
 * retry), connecting (TCP + TLS), hello sent (waiting for Welcome or
 * Refuse), following (frames flow). A break at any point goes back to idle
 * and the next peer is tried after a backoff that grows from 10 ms to 2 s
 * (at most a heartbeat period, idle_ms / 4) while attempts fail, and is
 * reset once a stream is followed. */
#include "replication/receiver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/follow.h"
#include "replication/handshake.h"
#include "replication/link.h"
#include "replication/report.h"
#include "replication/wire.h"

#define BACKOFF_MIN_MS 10 /* a new primary takes office milliseconds after the old one goes */
#define BACKOFF_MAX_MS 2000

typedef enum state { IDLE, CONNECTING, HELLO, FOLLOWING } state_t;

struct bq_receiver {
    uv_loop_t *loop;
    bq_repl_config_t cfg;
    const bq_repl_sink_t *sink;
    uv_timer_t retry, beat;
    bq_report_limit_t tls_refused; /* one "TLS peer refused" line a second */
    bq_link_t *link;
    state_t state;
    bool closing;
    bool stopped; /* bq_receiver_stop: no link until the next start */
    size_t next_peer;
    int peer; /* the peer of the current link */
    uint64_t backoff_ms;
    bq_follow_t follow;
    uint64_t hello_epoch, hello_lsn;
    bool resyncing;
    uint64_t resync_until; /* the primary's last LSN at its Welcome */
    uint64_t acked_w, acked_f, acked_a;
    char primary[64];
    char security[16];
    uint64_t p_epoch, p_last, p_commit;
    int64_t echo;      /* `sent` of the primary's last heartbeat */
    uint64_t heard_at; /* loop ms of the last message */
    const char *names[1];
};

static void send_ack(bq_receiver_t *r, bool force)
{
    const bq_repl_sink_t *k = r->sink;
    uint64_t w = k->written_lsn(k->arg), f = k->durable_lsn(k->arg), a = k->last_lsn(k->arg);
    if (r->state != FOLLOWING || (!force && w == r->acked_w && f == r->acked_f && a == r->acked_a))
        return;
    Bq__Repl__Ack ack = BQ__REPL__ACK__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    if (!r->resyncing) {
        ack.written_lsn = r->acked_w = w;
        ack.flushed_lsn = r->acked_f = f;
        ack.applied_lsn = r->acked_a = a;
    }
    ack.wall = bq_repl_wall_ns();
    ack.epoch = r->p_epoch;
    ack.echo = r->echo;
    if (k->kept_floor) {
        ack.floor_epoch = r->p_epoch;
        ack.floor_lsn = k->kept_floor(k->arg, r->p_epoch);
    }
    m.body_case = BQ__REPL__MESSAGE__BODY_ACK;
    m.ack = &ack;
    bq_link_send(r->link, &m);
}

/* Drops the link with a logged reason; a retry follows from on_close. */
static void drop(bq_receiver_t *r, bq_report_level_t level, const char *why, const char *detail)
{
    bq_report(level, "replication: dropping the link to the primary", "peer=%s why=\"%s\" %s",
              r->cfg.peers[r->peer].name, why, detail ? detail : "");
    bq_link_close(r->link, why);
}

static void on_welcome(bq_receiver_t *r, const Bq__Repl__Welcome *w)
{
    const bq_repl_sink_t *k = r->sink;
    /* A witness follows heartbeats only: the stream's checks do not apply. */
    bq_follow_status_t st = r->cfg.witness
                                ? BQ_FOLLOW_OK
                                : bq_follow_welcome(&r->follow, r->hello_epoch, r->hello_lsn, w);
    if (st != BQ_FOLLOW_OK) {
        drop(r, BQ_REPORT_ERROR, bq_follow_status_name(st), "message=welcome");
        return;
    }
    if (k->heard && !k->heard(k->arg, (size_t)r->peer, w->epoch, NULL)) {
        drop(r, BQ_REPORT_WARN, "the primary's epoch is stale", NULL);
        return;
    }
    r->state = FOLLOWING;
    r->backoff_ms = 0;
    /* The primary is known: its stream may carry frames of the largest job. */
    if (!r->cfg.witness)
        bq_link_set_max_message(r->link, BQ_WIRE_MAX_DEFAULT);
    r->echo = 0;
    /* A fork: the log is cut back to where it agrees with the primary's. */
    if (!r->cfg.witness && w->start == BQ__REPL__START__CUT) {
        if (!k->cut || k->cut(k->arg, w->cut_after) != 0) {
            drop(r, BQ_REPORT_ERROR, "cannot cut the log at the fork point", NULL);
            return;
        }
        r->follow.epoch = k->last_epoch(k->arg);
        r->hello_lsn = w->cut_after;
    }
    r->resyncing = !r->cfg.witness && w->start == BQ__REPL__START__RESYNC;
    r->resync_until = w->last_lsn;
    snprintf(r->primary, sizeof r->primary, "%s", w->node_id);
    r->p_epoch = w->epoch;
    r->p_last = w->last_lsn;
    const bq_repl_peer_t *p = &r->cfg.peers[r->peer];
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned)w->client_port);
    bq_repl_primary_t known = {
        .node = w->node_id,
        .host = w->client_host[0] ? w->client_host : p->host,
        .port = port,
        .security = r->security,
        .resync = r->resyncing,
        .cut = w->start == BQ__REPL__START__CUT,
        .start_lsn = w->start_lsn,
        .last_lsn = w->last_lsn,
        .epoch = w->epoch,
    };
    k->primary(k->arg, &known);
    if (r->resyncing && k->resync_begin(k->arg) != 0)
        drop(r, BQ_REPORT_ERROR, "cannot start a resync", NULL);
    else
        send_ack(r, true);
}

/* The download has everything the primary had at its Welcome. */
static void maybe_resync_done(bq_receiver_t *r)
{
    if (!r->resyncing || r->follow.next_lsn <= r->resync_until)
        return;
    r->resyncing = false;
    r->sink->resync_done(r->sink->arg, r->follow.next_lsn - 1);
}

static void on_segment(bq_receiver_t *r, const Bq__Repl__SegmentStart *s)
{
    const bq_repl_sink_t *k = r->sink;
    bool checkpoint = false;
    bq_follow_status_t st = bq_follow_segment(&r->follow, s, &checkpoint);
    int rc = 0;
    if (st != BQ_FOLLOW_OK) {
        drop(r, BQ_REPORT_ERROR, bq_follow_status_name(st), "message=segment");
        return;
    }
    if (r->resyncing)
        rc = k->resync_segment(k->arg, r->follow.next_lsn, s->epoch, s->created_wall, checkpoint);
    else
        rc = k->segment(k->arg, s->first_lsn, s->epoch, s->created_wall);
    if (rc != 0)
        drop(r, BQ_REPORT_ERROR, "cannot open a local segment", NULL);
}

static void on_frames(bq_receiver_t *r, const Bq__Repl__Frames *fr)
{
    const bq_repl_sink_t *k = r->sink;
    uint64_t last = 0, bad = 0;
    bq_follow_status_t st = bq_follow_frames(&r->follow, fr->data.data, fr->data.len, &last, &bad);
    if (st != BQ_FOLLOW_OK) {
        char detail[64];
        snprintf(detail, sizeof detail, "lsn=%llu", (unsigned long long)bad);
        drop(r, BQ_REPORT_ERROR, bq_follow_status_name(st), detail);
        return;
    }
    int rc = r->resyncing ? k->resync_frames(k->arg, fr->data.data, fr->data.len)
                          : k->frames(k->arg, fr->data.data, fr->data.len, last, r->follow.epoch);
    if (rc != 0) {
        drop(r, BQ_REPORT_ERROR, "cannot take the frames", NULL);
        return;
    }
    if (r->resyncing)
        maybe_resync_done(r);
    else
        send_ack(r, false);
}

static void on_heartbeat(bq_receiver_t *r, const Bq__Repl__Heartbeat *hb)
{
    const bq_repl_sink_t *k = r->sink;
    if (k->heard && !k->heard(k->arg, (size_t)r->peer, hb->epoch, hb)) {
        drop(r, BQ_REPORT_WARN, "the primary's epoch is stale", NULL);
        return;
    }
    r->p_epoch = hb->epoch;
    r->p_last = hb->last_lsn;
    r->p_commit = hb->commit_lsn;
    r->echo = hb->sent;
    send_ack(r, true);
}

static void on_refuse(bq_receiver_t *r, const Bq__Repl__Refuse *f)
{
    bool quiet = f->reason == BQ__REPL__REFUSE_REASON__NOT_PRIMARY;
    drop(r, quiet ? BQ_REPORT_DEBUG : BQ_REPORT_ERROR, "refused by the peer", f->detail);
}

static void on_message(bq_link_t *l, const Bq__Repl__Message *m, void *arg)
{
    bq_receiver_t *r = arg;
    (void)l;
    if (r->stopped)
        return; /* the link is closing */
    r->heard_at = uv_now(r->loop);
    switch (m->body_case) {
    case BQ__REPL__MESSAGE__BODY_WELCOME:
        if (r->state == HELLO)
            return on_welcome(r, m->welcome);
        break;
    case BQ__REPL__MESSAGE__BODY_REFUSE:
        return on_refuse(r, m->refuse);
    case BQ__REPL__MESSAGE__BODY_SEGMENT:
        if (r->state == FOLLOWING && !r->cfg.witness)
            return on_segment(r, m->segment);
        break;
    case BQ__REPL__MESSAGE__BODY_FRAMES:
        if (r->state == FOLLOWING && !r->cfg.witness)
            return on_frames(r, m->frames);
        break;
    case BQ__REPL__MESSAGE__BODY_HEARTBEAT:
        if (r->state == FOLLOWING && m->heartbeat->epoch >= r->follow.epoch)
            return on_heartbeat(r, m->heartbeat);
        break;
    case BQ__REPL__MESSAGE__BODY_PROMOTE:
        if (r->state == FOLLOWING && r->sink->promote) {
            r->sink->promote(r->sink->arg, (size_t)r->peer, m->promote->epoch);
            return;
        }
        break;
    default:
        break;
    }
    drop(r, BQ_REPORT_ERROR, "unexpected message", bq_wire_body_name(m));
}

static void on_open(bq_link_t *l, void *arg)
{
    bq_receiver_t *r = arg;
    const bq_repl_sink_t *k = r->sink;
    if (r->stopped)
        return; /* the link is closing */
    Bq__Repl__Hello h = BQ__REPL__HELLO__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    snprintf(r->security, sizeof r->security, "%s", bq_link_security(l));
    r->hello_lsn = k->last_lsn(k->arg);
    r->hello_epoch = k->last_epoch(k->arg);
    h.version = BQ_REPL_VERSION;
    h.cluster_id = (char *)r->cfg.cluster_id;
    h.node_id = (char *)r->cfg.node_id;
    h.last_epoch = r->hello_epoch;
    h.last_lsn = r->hello_lsn;
    h.witness = r->cfg.witness;
    h.epoch = k->seen_epoch ? k->seen_epoch(k->arg) : r->hello_epoch;
    /* Where its epochs begin: a primary on another branch can cut it back
     * to the fork point instead of resyncing it. */
    Bq__Repl__EpochStart starts[BQ_HS_MAX_EPOCHS], *ptrs[BQ_HS_MAX_EPOCHS];
    if (!r->cfg.witness && k->epochs && k->cut) {
        for (size_t i = 0; i < BQ_HS_MAX_EPOCHS; i++)
            starts[i] = (Bq__Repl__EpochStart)BQ__REPL__EPOCH_START__INIT;
        h.n_epochs = k->epochs(k->arg, starts, BQ_HS_MAX_EPOCHS);
        for (size_t i = 0; i < h.n_epochs; i++)
            ptrs[i] = &starts[i];
        h.epochs = ptrs;
        h.can_cut = true;
    }
    m.body_case = BQ__REPL__MESSAGE__BODY_HELLO;
    m.hello = &h;
    r->state = HELLO;
    bq_link_send(l, &m);
}

static void schedule_retry(bq_receiver_t *r);

static void on_close(bq_link_t *l, const char *why, void *arg)
{
    bq_receiver_t *r = arg;
    (void)l;
    if (r->state == FOLLOWING) {
        r->sink->primary_lost(r->sink->arg, r->primary, why);
        r->primary[0] = '\0';
    } else if (bq_link_tls_refused(why)) {
        bq_report_limited(&r->tls_refused, BQ_REPORT_WARN, "replication: TLS peer refused",
                          "peer=%s why=\"%s\"", r->cfg.peers[r->peer].name, why);
    } else {
        bq_report(BQ_REPORT_DEBUG, "replication: no stream from peer", "peer=%s why=\"%s\"",
                  r->cfg.peers[r->peer].name, why);
    }
    if (r->resyncing)
        r->sink->resync_abort(r->sink->arg);
    r->resyncing = false;
    r->link = NULL;
    r->state = IDLE;
    if (!r->closing && !r->stopped)
        schedule_retry(r);
}

static const bq_link_callbacks_t callbacks = {
    .on_open = on_open,
    .on_message = on_message,
    .on_close = on_close,
};

static void connect_next(uv_timer_t *t)
{
    bq_receiver_t *r = t->data;
    if (r->closing || r->stopped || r->link || r->cfg.npeers == 0)
        return;
    r->peer = (int)(r->next_peer++ % r->cfg.npeers);
    const bq_repl_peer_t *p = &r->cfg.peers[r->peer];
    r->names[0] = p->name;
    bq_link_config_t lc = {
        .tls = r->cfg.tls_client,
        .names = r->names,
        .nnames = 1,
        .max_message = BQ_WIRE_MAX_CONTROL, /* until the primary's Welcome */
        .handshake_ms = r->cfg.idle_ms,
        .idle_ms = r->cfg.idle_ms,
    };
    r->state = CONNECTING;
    if (bq_link_connect(r->loop, p->host, p->port, &lc, &callbacks, r, &r->link) != 0) {
        r->link = NULL;
        r->state = IDLE;
        schedule_retry(r);
    }
}

static void schedule_retry(bq_receiver_t *r)
{
    /* A full round of peers failed: back off; between peers, go on at once. */
    bool round = r->next_peer % (r->cfg.npeers ? r->cfg.npeers : 1) == 0;
    uint64_t ms = 0;
    if (round) {
        /* At most a heartbeat period: a new primary is found quickly. */
        uint64_t max = bq_repl_beat_ms(r->cfg.idle_ms);
        if (max > BACKOFF_MAX_MS)
            max = BACKOFF_MAX_MS;
        if (max < BACKOFF_MIN_MS)
            max = BACKOFF_MIN_MS;
        r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : BACKOFF_MIN_MS;
        if (r->backoff_ms > max)
            r->backoff_ms = max;
        ms = r->backoff_ms;
    }
    uv_timer_start(&r->retry, connect_next, ms, 0);
}

static void on_beat(uv_timer_t *t)
{
    send_ack(t->data, true);
}

bq_receiver_t *bq_receiver_new(uv_loop_t *loop, const bq_repl_config_t *cfg,
                               const bq_repl_sink_t *sink)
{
    bq_receiver_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->loop = loop;
    r->cfg = *cfg;
    r->sink = sink;
    uv_timer_init(loop, &r->retry);
    uv_timer_init(loop, &r->beat);
    r->retry.data = r->beat.data = r;
    return r;
}

void bq_receiver_start(bq_receiver_t *r)
{
    uint64_t beat = bq_repl_beat_ms(r->cfg.idle_ms);
    r->stopped = false;
    r->backoff_ms = 0;
    uv_timer_start(&r->beat, on_beat, beat, beat);
    /* A link still closing from a stop retries from its on_close. */
    if (!r->link)
        uv_timer_start(&r->retry, connect_next, 0, 0);
}

void bq_receiver_stop(bq_receiver_t *r)
{
    if (r->closing || r->stopped)
        return;
    r->stopped = true;
    uv_timer_stop(&r->retry);
    uv_timer_stop(&r->beat);
    if (r->resyncing)
        r->sink->resync_abort(r->sink->arg);
    r->resyncing = false;
    r->state = IDLE; /* the primary is not lost: this node is not a standby any more */
    r->primary[0] = '\0';
    if (r->link)
        bq_link_close(r->link, "this node is no longer a standby");
}

void bq_receiver_progress(bq_receiver_t *r)
{
    send_ack(r, false);
}

void bq_receiver_status(const bq_receiver_t *r, bq_receiver_status_t *st)
{
    *st = (bq_receiver_status_t){
        .connected = r->state == FOLLOWING,
        .primary = r->primary,
        .security = r->security,
        .resyncing = r->resyncing,
        .primary_epoch = r->p_epoch,
        .primary_last_lsn = r->p_last,
        .primary_commit_lsn = r->p_commit,
        .last_heard_ms = r->heard_at ? (int64_t)(uv_now(r->loop) - r->heard_at) : -1,
    };
}

void bq_receiver_close(bq_receiver_t *r)
{
    if (!r || r->closing)
        return;
    r->closing = true;
    uv_close((uv_handle_t *)&r->retry, NULL);
    uv_close((uv_handle_t *)&r->beat, NULL);
    if (r->link)
        bq_link_close(r->link, "shutting down");
}

void bq_receiver_free(bq_receiver_t *r)
{
    free(r);
}
