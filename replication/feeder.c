/* The feeder: the replication listener and one slot per peer. A connection
 * starts unassigned; its Hello is decided by bq_hs_decide, and an accepted
 * one takes its peer's slot (replacing an older link of the same standby),
 * gets a Welcome and then the stream. Acks move the standby's positions in
 * the commit accounting; every change that may move the commit point is
 * reported through the committed callback. Heartbeats go out every
 * idle_ms / 4, so a standby notices a dead primary within idle_ms. */
#include "replication/feeder.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/admit.h"
#include "replication/handshake.h"
#include "replication/link.h"
#include "replication/report.h"
#include "replication/wire.h"
#include "replication/sender.h"

/* Unassigned connections (TLS or Hello pending) kept at once, and of one
 * address: a newcomer takes the place of the oldest (replication/admit.h),
 * so a flood of strangers cannot keep a peer's connection or vote out. */
#define MAX_PENDING 16
#define PENDING_PER_SOURCE 4
/* Lag samples: (lsn, time, bytes) after binlog writes. */
#define SAMPLES 1024
#define SAMPLE_NS INT64_C(10000000)

typedef struct conn conn_t;

typedef struct slot {
    conn_t *conn; /* NULL when not connected */
    bq_sender_t sender;
    bool resyncing;   /* its acks describe a log being replaced: ignored */
    bool witness;     /* a voter without jobs: heartbeats only, no frames; its floor
                         counts for the commit point while degraded */
    bool floor_asked; /* witness: a heartbeat naming a higher floor awaits its ack */
    int64_t clock_offset_ms;
} slot_t;

struct conn {
    bq_feeder_t *f;
    bq_link_t *link;
    int slot; /* -1 until its Hello is accepted */
    bool closed;
    bool routine;   /* a vote answered, or a standby told we are not the primary */
    int64_t opened; /* monotonic ns */
    char source[BQ_ADMIT_SOURCE_MAX]; /* the peer's address, without port */
};

typedef struct sample {
    uint64_t lsn;   /* frames up to here were written ... */
    int64_t at;     /* ... at or after this time (within SAMPLE_NS) */
    uint64_t bytes; /* binlog bytes written up to lsn */
} sample_t;

struct bq_feeder {
    uv_loop_t *loop;
    bq_feeder_config_t cfg;
    const bq_repl_log_t *log;
    void (*committed)(void *arg);
    void *arg;
    bq_report_limit_t tls_refused;   /* one "TLS peer refused" line a second */
    bq_report_limit_t hello_refused; /* and one "standby refused" line */
    bq_report_limit_t ack_clamped;   /* and one "acknowledged records it was never sent" */
    bq_report_limit_t evicted;       /* and one "pending connection evicted" */
    bq_report_limit_t closed;        /* and one "connection closed" of a stranger */
    bq_report_limit_t unexpected;    /* and one "unexpected message" */
    uv_tcp_t listener;
    bool listening, closing;
    uv_timer_t beat, deadline;
    bq_commit_t commit;
    slot_t slots[BQ_COMMIT_MAX_STANDBYS];
    conn_t *pending[MAX_PENDING]; /* unassigned connections */
    const char *names[BQ_COMMIT_MAX_STANDBYS];
    bool witness[BQ_COMMIT_MAX_STANDBYS]; /* declared in our flags (--witness) */
    sample_t samples[SAMPLES];
    size_t nsamples, sample_head;
    uint64_t last_lsn;
    uint64_t office_lsn; /* the log's end when this primary took office: records of
                            earlier epochs up to here */
};

static int64_t mono_now(void)
{
    return (int64_t)uv_hrtime();
}

static void committed(bq_feeder_t *f)
{
    if (f->committed)
        f->committed(f->arg);
}

static void pump(conn_t *c)
{
    char err[256];
    if (c->closed || c->slot < 0 || c->f->slots[c->slot].witness)
        return;
    if (bq_sender_pump(&c->f->slots[c->slot].sender, err, sizeof err) != 0) {
        bq_report(BQ_REPORT_ERROR, "replication: cannot stream the binlog", "standby=%s err=\"%s\"",
                  c->f->names[c->slot], err);
        c->closed = true;
        bq_link_close(c->link, err);
    }
}

static void send_refuse(conn_t *c, Bq__Repl__RefuseReason why, const char *detail)
{
    Bq__Repl__Refuse r = BQ__REPL__REFUSE__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    r.reason = why;
    r.detail = (char *)detail;
    m.body_case = BQ__REPL__MESSAGE__BODY_REFUSE;
    m.refuse = &r;
    bq_link_send(c->link, &m);
    c->closed = true;
    bq_link_close(c->link, detail);
}

static int send_welcome(conn_t *c, const bq_hs_decision_t *d, uint64_t last)
{
    bq_feeder_t *f = c->f;
    Bq__Repl__Welcome w = BQ__REPL__WELCOME__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    w.node_id = (char *)f->cfg.repl.node_id;
    w.epoch = f->log->epoch(f->log->arg);
    w.last_lsn = last;
    w.start = d->action == BQ_HS_RESUME ? BQ__REPL__START__RESUME
              : d->action == BQ_HS_CUT  ? BQ__REPL__START__CUT
                                        : BQ__REPL__START__RESYNC;
    w.start_lsn = d->start_lsn;
    w.cut_after = d->action == BQ_HS_CUT ? d->cut_after : 0;
    w.client_host = (char *)(f->cfg.client_host ? f->cfg.client_host : "");
    w.client_port = f->cfg.client_port ? (uint32_t)atoi(f->cfg.client_port) : 0;
    m.body_case = BQ__REPL__MESSAGE__BODY_WELCOME;
    m.welcome = &w;
    return bq_link_send(c->link, &m);
}

/* Decides a Hello with the log as it is now. */
static void decide(bq_feeder_t *f, conn_t *c, const Bq__Repl__Hello *h, bq_hs_decision_t *d)
{
    size_t n = f->log->nsegs(f->log->arg);
    bq_hs_segment_t *segs = calloc(n ? n : 1, sizeof *segs);
    if (!segs) {
        *d = (bq_hs_decision_t){.action = BQ_HS_REFUSE, .detail = "out of memory"};
        return;
    }
    for (size_t i = 0; i < n; i++) {
        bq_repl_seg_t sg;
        f->log->seg(f->log->arg, i, &sg);
        segs[i] = (bq_hs_segment_t){.first_lsn = sg.first_lsn, .epoch = sg.epoch};
    }
    bq_hs_primary_t p = {
        .cluster_id = f->cfg.repl.cluster_id,
        .node_id = f->cfg.repl.node_id,
        .epoch = f->log->epoch(f->log->arg),
        .last_lsn = f->log->written_lsn(f->log->arg),
        .segs = segs,
        .nsegs = n,
        .before_epoch = n && segs[0].first_lsn > 1 && f->log->epoch_of
                            ? f->log->epoch_of(f->log->arg, segs[0].first_lsn - 1)
                            : 0,
        .peers = f->names,
        .witness = f->witness,
        .npeers = f->cfg.repl.npeers,
        .tls_name = bq_link_peer_name(c->link),
    };
    bq_hs_decide(&p, h, d);
    free(segs);
}

/* The identity rules alone (no log needed); true when h was refused. */
static bool identity_refused(bq_feeder_t *f, conn_t *c, const Bq__Repl__Hello *h,
                             bq_hs_decision_t *d)
{
    bq_hs_primary_t p = {
        .cluster_id = f->cfg.repl.cluster_id,
        .node_id = f->cfg.repl.node_id,
        .epoch = f->log->epoch(f->log->arg),
        .peers = f->names,
        .witness = f->witness,
        .npeers = f->cfg.repl.npeers,
        .tls_name = bq_link_peer_name(c->link),
    };
    return bq_hs_identity_refused(&p, h, d);
}

static int slot_of(const bq_feeder_t *f, const char *name)
{
    for (size_t i = 0; i < f->cfg.repl.npeers; i++)
        if (strcmp(f->names[i], name) == 0)
            return (int)i;
    return -1;
}

static void forget_pending(bq_feeder_t *f, conn_t *c)
{
    for (size_t k = 0; k < MAX_PENDING; k++)
        if (f->pending[k] == c)
            f->pending[k] = NULL;
}

/* Gives c the slot of its standby, replacing an older link. */
static void take_slot(bq_feeder_t *f, conn_t *c, int i)
{
    slot_t *s = &f->slots[i];
    if (s->conn) {
        conn_t *old = s->conn;
        bq_sender_free(&s->sender);
        old->slot = -1;
        old->closed = true;
        bq_link_close(old->link, "replaced by a new connection of the same standby");
    }
    s->conn = c;
    c->slot = i;
    forget_pending(f, c);
}

/* A witness gets a Welcome at our last LSN and then heartbeats only: it
 * takes no frames and never counts for the commit point. */
static void welcome_witness(conn_t *c)
{
    bq_feeder_t *f = c->f;
    slot_t *s = &f->slots[c->slot];
    uint64_t last = f->log->written_lsn(f->log->arg);
    bq_hs_decision_t d = {.action = BQ_HS_RESUME, .start_lsn = last + 1};
    memset(&s->sender, 0, sizeof s->sender);
    s->sender.fd = -1;
    s->resyncing = false;
    if (send_welcome(c, &d, last) != 0) {
        c->closed = true;
        bq_link_close(c->link, "cannot welcome the witness");
        return;
    }
    bq_report(BQ_REPORT_INFO, "replication: witness connected", "witness=%s peer=%s security=%s",
              f->names[c->slot], bq_link_peer_addr(c->link), bq_link_security(c->link));
}

static void refuse_hello(conn_t *c, const Bq__Repl__Hello *h, const bq_hs_decision_t *d)
{
    bq_report_limited(&c->f->hello_refused, BQ_REPORT_WARN, "replication: standby refused",
                      "peer=%s node=\"%.64s\" why=\"%s\"", bq_link_peer_addr(c->link), h->node_id,
                      d->detail);
    send_refuse(c, d->reason, d->detail);
}

static void on_hello(conn_t *c, const Bq__Repl__Hello *h)
{
    bq_feeder_t *f = c->f;
    char err[256];
    bq_hs_decision_t d;
    /* Nothing in a hello is believed before its sender is known to be a
     * peer of this cluster in the role it claims. */
    if (identity_refused(f, c, h, &d)) {
        refuse_hello(c, h, &d);
        return;
    }
    uint64_t seen = h->epoch > h->last_epoch ? h->epoch : h->last_epoch;
    if (seen > f->log->epoch(f->log->arg) && f->cfg.hooks.higher_epoch)
        f->cfg.hooks.higher_epoch(f->arg, seen);
    if (!f->cfg.primary) {
        c->routine = true;
        send_refuse(c, BQ__REPL__REFUSE_REASON__NOT_PRIMARY, "this node is not the primary");
        return;
    }
    decide(f, c, h, &d);
    if (d.action == BQ_HS_REFUSE) {
        refuse_hello(c, h, &d);
        return;
    }
    int i = slot_of(f, h->node_id);
    take_slot(f, c, i);
    slot_t *s = &f->slots[i];
    s->witness = h->witness;
    s->floor_asked = false;
    if (h->witness) {
        bq_commit_witness(&f->commit, (size_t)i);
        welcome_witness(c);
        return;
    }
    uint64_t last = f->log->written_lsn(f->log->arg);
    if (bq_sender_init(&s->sender, f->log, c->link, d.seg, d.start_lsn, err, sizeof err) != 0 ||
        send_welcome(c, &d, last) != 0) {
        bq_report(BQ_REPORT_ERROR, "replication: cannot start streaming", "standby=%s err=\"%s\"",
                  h->node_id, err);
        c->closed = true;
        bq_link_close(c->link, "cannot start streaming");
        return;
    }
    s->resyncing = d.action == BQ_HS_RESYNC;
    bq_commit_connected(&f->commit, (size_t)i, s->resyncing ? 0 : d.start_lsn - 1, mono_now());
    bq_report(BQ_REPORT_INFO, "replication: standby connected",
              "standby=%s peer=%s security=%s start=%s from_lsn=%llu last_lsn=%llu "
              "standby_last_lsn=%llu",
              h->node_id, bq_link_peer_addr(c->link), bq_link_security(c->link),
              s->resyncing            ? "resync"
              : d.action == BQ_HS_CUT ? "cut"
                                      : "resume",
              (unsigned long long)d.start_lsn, (unsigned long long)last,
              (unsigned long long)h->last_lsn);
    pump(c);
    committed(f);
}

static void on_ack(conn_t *c, const Bq__Repl__Ack *a)
{
    bq_feeder_t *f = c->f;
    slot_t *s = &f->slots[c->slot];
    s->clock_offset_ms = (a->wall - bq_repl_wall_ns()) / 1000000;
    if (s->witness) {
        s->floor_asked = false;
        if (a->floor_epoch == f->log->epoch(f->log->arg))
            bq_commit_floor(&f->commit, (size_t)c->slot, a->floor_lsn);
        if (f->cfg.hooks.ack)
            f->cfg.hooks.ack(f->arg, (size_t)c->slot, a->epoch, a->echo);
        committed(f);
        return;
    }
    if (s->resyncing)
        return;
    /* A standby cannot hold what it was never sent: its positions are
     * clamped to what we sent it (a lying or broken peer cannot move the
     * commit point past the stream). */
    uint64_t sent = s->sender.next_lsn > 0 ? s->sender.next_lsn - 1 : 0;
    uint64_t w = a->written_lsn, fl = a->flushed_lsn, ap = a->applied_lsn;
    if (w > sent || fl > sent || ap > sent) {
        bq_report_limited(&f->ack_clamped, BQ_REPORT_WARN,
                          "replication: a standby acknowledged records it was never sent",
                          "standby=%s sent=%" PRIu64 " written=%" PRIu64 " flushed=%" PRIu64,
                          f->names[c->slot], sent, w, fl);
        w = w > sent ? sent : w;
        fl = fl > sent ? sent : fl;
        ap = ap > sent ? sent : ap;
    }
    bq_commit_ack(&f->commit, (size_t)c->slot, w, fl, ap, mono_now());
    if (f->cfg.hooks.ack)
        f->cfg.hooks.ack(f->arg, (size_t)c->slot, a->epoch, a->echo);
    committed(f);
}

/* The peer index of a connection's verified name (its certificate; in
 * plaintext the name it gives), or -1. */
static int peer_of(const conn_t *c, const char *given)
{
    const char *name = bq_link_peer_name(c->link);
    if (!name)
        name = given;
    if (!name || (given && strcmp(name, given) != 0))
        return -1;
    return slot_of(c->f, name);
}

/* A vote request on its own connection: one reply, then closed. */
static void on_vote_request(conn_t *c, const Bq__Repl__VoteRequest *q)
{
    bq_feeder_t *f = c->f;
    int peer = peer_of(c, q->node_id);
    Bq__Repl__VoteReply r = BQ__REPL__VOTE_REPLY__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    if (peer < 0 || strcmp(q->cluster_id, f->cfg.repl.cluster_id) != 0 || !f->cfg.hooks.vote) {
        send_refuse(c, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE, "not a voter of this cluster");
        return;
    }
    f->cfg.hooks.vote(f->arg, (size_t)peer, q, &r);
    c->routine = true;
    r.node_id = (char *)f->cfg.repl.node_id;
    m.body_case = BQ__REPL__MESSAGE__BODY_VOTE_REPLY;
    m.vote_reply = &r;
    bq_link_send(c->link, &m);
    c->closed = true;
    bq_link_close(c->link, "vote answered");
}

static void on_message(bq_link_t *l, const Bq__Repl__Message *m, void *arg)
{
    conn_t *c = arg;
    (void)l;
    if (c->closed)
        return;
    if (c->slot < 0 && m->body_case == BQ__REPL__MESSAGE__BODY_HELLO)
        on_hello(c, m->hello);
    else if (c->slot < 0 && m->body_case == BQ__REPL__MESSAGE__BODY_VOTE_REQUEST)
        on_vote_request(c, m->vote_request);
    else if (c->slot >= 0 && m->body_case == BQ__REPL__MESSAGE__BODY_ACK)
        on_ack(c, m->ack);
    else {
        bq_report_limited(&c->f->unexpected, BQ_REPORT_WARN,
                          "replication: unexpected message; closing", "peer=%s message=%s",
                          bq_link_peer_addr(c->link), bq_wire_body_name(m));
        c->closed = true;
        bq_link_close(c->link, "unexpected message");
    }
}

static void on_open(bq_link_t *l, void *arg)
{
    (void)arg;
    bq_report(BQ_REPORT_DEBUG, "replication: link open", "peer=%s security=%s",
              bq_link_peer_addr(l), bq_link_security(l));
}

static void on_writable(bq_link_t *l, void *arg)
{
    (void)l;
    pump(arg);
}

static void on_close(bq_link_t *l, const char *why, void *arg)
{
    conn_t *c = arg;
    bq_feeder_t *f = c->f;
    (void)l;
    if (c->slot >= 0 && f->slots[c->slot].conn == c) {
        slot_t *s = &f->slots[c->slot];
        bq_sender_free(&s->sender);
        s->conn = NULL;
        bq_commit_disconnected(&f->commit, (size_t)c->slot, mono_now());
        bq_report(BQ_REPORT_WARN, "replication: standby disconnected", "standby=%s why=\"%s\"",
                  f->names[c->slot], why);
        committed(f);
    } else if (c->slot < 0) {
        forget_pending(f, c);
        if (bq_link_tls_refused(why))
            bq_report_limited(&f->tls_refused, BQ_REPORT_WARN, "replication: TLS peer refused",
                              "peer=%s why=\"%s\"", bq_link_peer_addr(l), why);
        else if (c->routine)
            bq_report(BQ_REPORT_DEBUG, "replication: connection closed", "peer=%s why=\"%s\"",
                      bq_link_peer_addr(l), why);
        else /* a stranger can cause it: at most one line a second */
            bq_report_limited(&f->closed, BQ_REPORT_INFO, "replication: connection closed",
                              "peer=%s why=\"%s\"", bq_link_peer_addr(l), why);
    }
    free(c);
}

static const bq_link_callbacks_t callbacks = {
    .on_open = on_open,
    .on_message = on_message,
    .on_writable = on_writable,
    .on_close = on_close,
};

static void link_config(const bq_feeder_t *f, bq_link_config_t *lc)
{
    *lc = (bq_link_config_t){
        .tls = f->cfg.repl.tls_server,
        .names = f->names,
        .nnames = f->cfg.repl.npeers,
        .max_message = BQ_WIRE_MAX_CONTROL, /* hellos, votes and acks only */
        .handshake_ms = f->cfg.repl.idle_ms,
        .idle_ms = f->cfg.repl.idle_ms,
    };
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* Accepts a connection and closes it at once, so the backlog cannot fill
 * up with connections nobody serves. */
static void drop_connection(bq_feeder_t *f, uv_stream_t *server)
{
    uv_tcp_t *t = malloc(sizeof *t);
    if (!t || uv_tcp_init(f->loop, t) != 0) {
        free(t);
        return;
    }
    if (uv_accept(server, (uv_stream_t *)t) == 0)
        bq_report_limited(&f->evicted, BQ_REPORT_WARN, "replication: connection dropped",
                          "reason=\"out of memory\"");
    uv_close((uv_handle_t *)t, free_handle);
}

/* The address of "ip:port" or "[ip]:port" without the port. */
static void source_of(const char *addr, char *out, size_t cap)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    snprintf(out, cap, "%.*s", (int)n, addr);
}

/* Makes room among the pending connections for one from source: closes
 * the one admission chooses, if any. Returns a free index, or MAX_PENDING
 * when none could be made. */
static size_t admit_pending(bq_feeder_t *f, const char *source)
{
    bq_admit_entry_t open[MAX_PENDING];
    size_t at[MAX_PENDING], n = 0, free_at = MAX_PENDING;
    for (size_t k = 0; k < MAX_PENDING; k++) {
        conn_t *p = f->pending[k];
        if (!p) {
            free_at = k;
            continue;
        }
        open[n] = (bq_admit_entry_t){.state = BQ_ADMIT_NEW, .since = p->opened};
        snprintf(open[n].source, sizeof open[n].source, "%s", p->source);
        at[n++] = k;
    }
    bq_admit_limits_t lim = {.max_total = MAX_PENDING, .max_per_source = PENDING_PER_SOURCE};
    bq_admit_decision_t d = bq_admit_decide(open, n, source, &lim);
    if (d.evict >= 0) {
        conn_t *old = f->pending[at[d.evict]];
        bq_report_limited(&f->evicted, BQ_REPORT_WARN, "replication: pending connection evicted",
                          "peer=%s reason=\"%s\"", bq_link_peer_addr(old->link),
                          d.per_source ? "too many unauthenticated connections from one address"
                                       : "every pending slot in use");
        forget_pending(f, old);
        old->closed = true;
        bq_link_close(old->link, "evicted: too many unauthenticated connections");
        free_at = at[d.evict];
    }
    return d.admit ? free_at : MAX_PENDING;
}

static void on_connection(uv_stream_t *server, int status)
{
    bq_feeder_t *f = server->data;
    bq_link_config_t lc;
    if (status < 0 || f->closing)
        return;
    conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        drop_connection(f, server);
        return;
    }
    c->f = f;
    c->slot = -1;
    c->opened = mono_now();
    link_config(f, &lc);
    if (bq_link_accept(f->loop, server, &lc, &callbacks, c, &c->link) != 0) {
        free(c);
        return;
    }
    source_of(bq_link_peer_addr(c->link), c->source, sizeof c->source);
    size_t k = admit_pending(f, c->source);
    if (k == MAX_PENDING) { /* cannot happen: every pending connection is evictable */
        c->closed = true;
        bq_link_close(c->link, "no room for another pending connection");
        return;
    }
    f->pending[k] = c;
}

int bq_feeder_send_promote(bq_feeder_t *f, size_t peer)
{
    conn_t *c = peer < f->cfg.repl.npeers ? f->slots[peer].conn : NULL;
    if (!c || c->closed)
        return -1;
    Bq__Repl__Promote p = BQ__REPL__PROMOTE__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    p.epoch = f->log->epoch(f->log->arg);
    p.from = (char *)f->cfg.repl.node_id;
    m.body_case = BQ__REPL__MESSAGE__BODY_PROMOTE;
    m.promote = &p;
    return bq_link_send(c->link, &m);
}

/* ---- timers: heartbeats and the end of a sync wait ---- */

/* The floor voters are told to keep: a record of this primary's epoch, so
 * that after an election nothing is promised before a record of the new
 * epoch is (a floor at the end of the old log would keep a standby that
 * lacks only unacknowledged records from ever being elected). 0: none. */
static uint64_t floor_lsn(const bq_feeder_t *f)
{
    uint64_t lsn = bq_commit_floor_lsn(&f->commit);
    return lsn > f->office_lsn ? lsn : 0;
}

static void send_heartbeat(bq_feeder_t *f, conn_t *c)
{
    Bq__Repl__Heartbeat h = BQ__REPL__HEARTBEAT__INIT;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    h.epoch = f->log->epoch(f->log->arg);
    h.last_lsn = f->last_lsn;
    h.commit_lsn = f->commit.commit;
    h.wall = bq_repl_wall_ns();
    h.sent = mono_now();
    h.sync = f->commit.state == BQ_SYNC_ON || f->commit.state == BQ_SYNC_WAITING ||
             f->commit.state == BQ_SYNC_REFUSING;
    h.floor_lsn = floor_lsn(f);
    m.body_case = BQ__REPL__MESSAGE__BODY_HEARTBEAT;
    m.heartbeat = &h;
    bq_link_send(c->link, &m);
}

static void beat_all(bq_feeder_t *f)
{
    for (size_t i = 0; i < f->cfg.repl.npeers; i++) {
        conn_t *c = f->slots[i].conn;
        if (c && !c->closed)
            send_heartbeat(f, c);
    }
}

static void on_beat(uv_timer_t *t)
{
    beat_all(t->data);
}

static void on_deadline(uv_timer_t *t)
{
    committed(t->data);
}

bq_feeder_t *bq_feeder_new(uv_loop_t *loop, const bq_feeder_config_t *cfg, const bq_repl_log_t *log,
                           void (*cb)(void *arg), void *arg)
{
    bq_feeder_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->loop = loop;
    f->cfg = *cfg;
    if (f->cfg.repl.npeers > BQ_COMMIT_MAX_STANDBYS)
        f->cfg.repl.npeers = BQ_COMMIT_MAX_STANDBYS;
    f->log = log;
    f->committed = cb;
    f->arg = arg;
    for (size_t i = 0; i < f->cfg.repl.npeers; i++) {
        f->names[i] = cfg->repl.peers[i].name;
        f->witness[i] = cfg->repl.peers[i].witness;
    }
    f->last_lsn = f->office_lsn = log->written_lsn(log->arg);
    bq_commit_init(&f->commit, f->cfg.repl.npeers, cfg->primary ? cfg->sync_need : 0, cfg->fallback,
                   cfg->sync_timeout_ns, f->last_lsn, mono_now());
    f->commit.self_counts = cfg->count_self;
    f->commit.self_durable = f->last_lsn; /* replayed: on disk */
    uv_timer_init(loop, &f->beat);
    uv_timer_init(loop, &f->deadline);
    f->beat.data = f->deadline.data = f;
    uint64_t beat = bq_repl_beat_ms(cfg->repl.idle_ms);
    uv_timer_start(&f->beat, on_beat, beat, beat);
    return f;
}

int bq_feeder_listen(bq_feeder_t *f, const char *host, const char *port)
{
    struct sockaddr_storage ss;
    int r = uv_ip4_addr(host, atoi(port), (struct sockaddr_in *)&ss);
    if (r != 0)
        r = uv_ip6_addr(host, atoi(port), (struct sockaddr_in6 *)&ss);
    if (r == 0)
        r = uv_tcp_init(f->loop, &f->listener);
    if (r == 0) {
        f->listening = true;
        f->listener.data = f;
        r = uv_tcp_bind(&f->listener, (const struct sockaddr *)&ss, 0);
    }
    if (r == 0)
        r = uv_listen((uv_stream_t *)&f->listener, 64, on_connection);
    return r;
}

/* Keeps a (lsn, time) sample per write, for the lag in milliseconds. */
static void add_sample(bq_feeder_t *f, uint64_t lsn, uint64_t bytes, int64_t now)
{
    /* One sample per SAMPLE_NS at most: SAMPLES of them cover at least
     * SAMPLES * SAMPLE_NS of writes (a larger lag is reported as that much). */
    if (f->nsamples > 0) {
        sample_t *last = &f->samples[(f->sample_head + f->nsamples - 1) % SAMPLES];
        if (now - last->at < SAMPLE_NS) {
            last->lsn = lsn;
            last->bytes = bytes;
            return;
        }
    }
    size_t at = (f->sample_head + f->nsamples) % SAMPLES;
    if (f->nsamples == SAMPLES)
        f->sample_head = (f->sample_head + 1) % SAMPLES;
    else
        f->nsamples++;
    f->samples[at] = (sample_t){.lsn = lsn, .at = now, .bytes = bytes};
}

void bq_feeder_written(bq_feeder_t *f, uint64_t lsn, uint64_t bytes, int64_t now)
{
    if (lsn <= f->last_lsn)
        return;
    add_sample(f, lsn, bytes, now);
    f->last_lsn = lsn;
    bq_commit_logged(&f->commit, lsn);
    for (size_t i = 0; i < f->cfg.repl.npeers; i++)
        if (f->slots[i].conn)
            pump(f->slots[i].conn);
}

void bq_feeder_durable(bq_feeder_t *f, uint64_t lsn)
{
    bq_commit_self_durable(&f->commit, lsn);
}

/* Degraded with self_counts, the witnesses' floors are copies: each one
 * that holds less than the floor is asked for it, one heartbeat in flight
 * at a time (the next asks for all that became durable meanwhile). */
static void ask_floors(bq_feeder_t *f)
{
    uint64_t want = floor_lsn(f);
    if (f->commit.state != BQ_SYNC_DEGRADED || !f->commit.self_counts)
        return;
    for (size_t i = 0; i < f->cfg.repl.npeers; i++) {
        slot_t *s = &f->slots[i];
        if (s->witness && s->conn && !s->conn->closed && !s->floor_asked &&
            want > f->commit.sb[i].floor) {
            s->floor_asked = true;
            send_heartbeat(f, s->conn);
        }
    }
}

uint64_t bq_feeder_commit(bq_feeder_t *f, uint64_t local_release, int64_t now)
{
    bq_sync_state_t before = f->commit.state;
    uint64_t c = bq_commit_update(&f->commit, local_release, now);
    /* The standbys learn a change of the sync state at once: whether a
     * promotion without votes keeps every acknowledged write depends on it. */
    if (f->commit.state != before && f->cfg.primary)
        beat_all(f);
    ask_floors(f);
    int64_t due = bq_commit_next_deadline(&f->commit);
    if (due != INT64_MAX && !f->closing) {
        int64_t ms = due > now ? (due - now + 999999) / 1000000 : 0;
        uv_timer_start(&f->deadline, on_deadline, (uint64_t)ms, 0);
    }
    return c;
}

bool bq_feeder_wants_self_durable(const bq_feeder_t *f)
{
    return bq_commit_wants_self_durable(&f->commit);
}

bq_sync_state_t bq_feeder_sync_state(const bq_feeder_t *f)
{
    return f->commit.state;
}

size_t bq_feeder_in_sync(const bq_feeder_t *f)
{
    return bq_commit_in_sync(&f->commit);
}

size_t bq_feeder_nstandbys(const bq_feeder_t *f)
{
    return f->cfg.repl.npeers;
}

/* Milliseconds since the first frame after lsn was written (0 if none). */
static uint64_t lag_ms(const bq_feeder_t *f, uint64_t lsn, int64_t now)
{
    if (lsn >= f->last_lsn)
        return 0;
    for (size_t k = 0; k < f->nsamples; k++) {
        const sample_t *s = &f->samples[(f->sample_head + k) % SAMPLES];
        if (s->lsn > lsn)
            return now > s->at ? (uint64_t)(now - s->at) / 1000000 : 0;
    }
    return 0;
}

/* Binlog bytes written after lsn (from the samples: approximate). */
static uint64_t lag_bytes(const bq_feeder_t *f, uint64_t lsn)
{
    if (f->nsamples == 0 || lsn >= f->last_lsn)
        return 0;
    const sample_t *last = &f->samples[(f->sample_head + f->nsamples - 1) % SAMPLES];
    uint64_t base = f->samples[f->sample_head].bytes;
    for (size_t k = 0; k < f->nsamples; k++) {
        const sample_t *s = &f->samples[(f->sample_head + k) % SAMPLES];
        if (s->lsn > lsn)
            break;
        base = s->bytes;
    }
    return last->bytes - base;
}

void bq_feeder_standby(const bq_feeder_t *f, size_t i, int64_t now, bq_feeder_standby_t *out)
{
    const slot_t *s = &f->slots[i];
    const bq_commit_standby_t *cs = &f->commit.sb[i];
    *out = (bq_feeder_standby_t){
        .name = f->names[i],
        .witness = s->witness,
        .connected = s->conn != NULL,
        .in_sync = cs->in_sync,
        .addr = s->conn ? bq_link_peer_addr(s->conn->link) : "",
        .sent = s->conn && s->sender.next_lsn > 0 ? s->sender.next_lsn - 1 : 0,
        .written = cs->written,
        .flushed = cs->flushed,
        .applied = cs->applied,
        .lag_records = f->last_lsn > cs->applied ? f->last_lsn - cs->applied : 0,
        .lag_ms = lag_ms(f, cs->applied, now),
        .clock_offset_ms = s->clock_offset_ms,
        .floor = cs->floor,
    };
    out->lag_bytes = lag_bytes(f, cs->applied);
    if (s->witness) /* it holds no records: no lag */
        out->lag_records = out->lag_bytes = out->lag_ms = 0;
}

static void close_conn(conn_t *c)
{
    if (c && !c->closed) {
        c->closed = true;
        bq_link_close(c->link, "shutting down");
    }
}

void bq_feeder_set_primary(bq_feeder_t *f, bool primary)
{
    if (f->closing || f->cfg.primary == primary)
        return;
    f->cfg.primary = primary;
    /* A standby streams to nobody; a new primary starts counting copies
     * from its log's end, which is its office. */
    for (size_t i = 0; i < f->cfg.repl.npeers; i++)
        close_conn(f->slots[i].conn);
    f->last_lsn = f->office_lsn = f->log->written_lsn(f->log->arg);
    f->nsamples = f->sample_head = 0;
    bq_commit_init(&f->commit, f->cfg.repl.npeers, primary ? f->cfg.sync_need : 0, f->cfg.fallback,
                   f->cfg.sync_timeout_ns, f->last_lsn, mono_now());
    f->commit.self_counts = f->cfg.count_self;
    f->commit.self_durable = f->last_lsn; /* a follower syncs what it writes at once */
    uv_timer_stop(&f->deadline);
}

void bq_feeder_close(bq_feeder_t *f)
{
    if (!f || f->closing)
        return;
    f->closing = true;
    if (f->listening)
        uv_close((uv_handle_t *)&f->listener, NULL);
    uv_close((uv_handle_t *)&f->beat, NULL);
    uv_close((uv_handle_t *)&f->deadline, NULL);
    for (size_t i = 0; i < f->cfg.repl.npeers; i++)
        close_conn(f->slots[i].conn);
    for (size_t k = 0; k < MAX_PENDING; k++)
        close_conn(f->pending[k]);
}

void bq_feeder_free(bq_feeder_t *f)
{
    free(f);
}
