/* Elections on a node: replication/election.c's decisions applied. Every
 * effect is carried out in the order the rules need: the durable state is
 * saved before any message leaves (a failed save withholds the message and
 * the vote), requests go out through the canvasser, and winning or stepping
 * down hands over to the cluster, which changes the node's role in place
 * (node/cluster/role.c). Time is uv_hrtime (CLOCK_MONOTONIC). */
#include "node/cluster/failover.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/base/clock.h"
#include "node/cluster/election_store.h"
#include "node/cluster/start_probe.h"
#include "node/base/log.h"
#include "node/base/counters.h"
#include "replication/canvass.h"
#include "replication/handshake.h"

struct bq_failover {
    uv_loop_t *loop;
    bq_election_t el;
    bq_election_state_t *st;
    const bq_flags_t *f;
    const bq_repl_config_t *repl;
    bq_failover_hooks_t h;
    bq_canvass_t *canvass;
    uv_timer_t timer;
    uv_timer_t probe; /* a fenced primary asks the voters for their epoch */
    bool closing;
    /* The last heartbeat from the primary: a 2-voter promotion is safe only
     * when it was in sync mode and we hold its commit point. */
    bool hb_sync;
    uint64_t hb_commit;
};

static int64_t now_ns(void)
{
    return (int64_t)uv_hrtime();
}

/* The election, its epoch ceiling brought up to the wall clock: every call
 * that may see an epoch goes through here. */
static bq_election_t *el(bq_failover_t *fo)
{
    bq_el_set_ceiling(&fo->el, bq_el_epoch_ceiling(bq_clock_now().wall / 1000000000));
    return &fo->el;
}

/* The voter index of node id name, or -1. */
static int voter_of(const bq_repl_config_t *repl, const char *self, const char *name)
{
    if (!name || !*name)
        return -1;
    if (strcmp(name, self) == 0)
        return (int)repl->npeers;
    for (size_t i = 0; i < repl->npeers; i++)
        if (strcmp(repl->peers[i].name, name) == 0)
            return (int)i;
    return -1;
}

static const char *voter_name(const bq_failover_t *fo, int v)
{
    if (v < 0)
        return "";
    return (size_t)v == fo->repl->npeers ? fo->f->node_id : fo->repl->peers[v].name;
}

/* ---- the plan for this start ---- */

/* Whether this node has seen an epoch its log does not hold and did not
 * stand in itself: another node leads a later epoch (this one stepped down,
 * or voted), so starting as primary would fight it. */
static bool later_epoch_elsewhere(const bq_election_state_t *st, const char *self)
{
    uint64_t logged = st->nhist > 0 ? st->hist[st->nhist - 1].epoch : 0;
    return st->epoch > logged && strcmp(st->voted_for, self) != 0;
}

static void decide_plan(const bq_flags_t *f, const bq_election_state_t *st, bq_failover_plan_t *p)
{
    p->role = f->role;
    p->min_epoch = st->epoch + 1;
    if (f->role == BQ_ROLE_WITNESS) {
        snprintf(p->why, sizeof p->why, "a witness votes and never leads");
    } else if (f->failover_auto) {
        p->role = BQ_ROLE_STANDBY;
        snprintf(p->why, sizeof p->why, "automatic failover: the voters elect the primary");
    } else if (f->role == BQ_ROLE_PRIMARY && later_epoch_elsewhere(st, f->node_id)) {
        p->role = BQ_ROLE_STANDBY;
        snprintf(p->why, sizeof p->why,
                 "epoch %" PRIu64 " is led elsewhere: starting as a standby (promote this node "
                 "with beanstalkctl if it must lead)",
                 st->epoch);
    } else {
        snprintf(p->why, sizeof p->why, "--role=%s",
                 f->role == BQ_ROLE_PRIMARY ? "primary" : "standby");
    }
}

/* Manual mode, starting as primary: a peer that is or follows another
 * primary (a standby promoted while this node was away) makes this start
 * a standby's; peers that do not answer within the failover timeout leave
 * it a primary, as the operator asked. -1 when the probe could not run. */
static int probe_peers(const bq_flags_t *f, const bq_election_state_t *st, bq_failover_plan_t *p)
{
    bq_start_probe_t pr;
    uint64_t logged = st->nhist > 0 ? st->hist[st->nhist - 1].epoch : 0;
    if (bq_start_probe(f, st->epoch + 1, logged, f->failover_timeout_ms, &pr) != 0)
        return -1;
    bq_log(BQ_LOG_INFO, "start-up probe: asked the peers which primary they know",
           "asked=%zu answered=%zu primary=\"%s\" via=\"%s\"", pr.asked, pr.answered, pr.primary,
           pr.via);
    if (!pr.primary[0])
        return 0;
    p->role = BQ_ROLE_STANDBY;
    snprintf(p->why, sizeof p->why, "%.40s leads (said %.40s): starting as a standby", pr.primary,
             pr.via);
    return 0;
}

int bq_failover_plan(const bq_flags_t *f, bq_failover_plan_t *plan)
{
    memset(plan, 0, sizeof *plan);
    bq_election_state_t *st = malloc(sizeof *st);
    if (!st)
        return -1;
    bq_estore_status_t rs = bq_estore_load(f->binlog_dir, st);
    if (rs == BQ_ESTORE_DAMAGED || rs == BQ_ESTORE_IO) {
        bq_log(BQ_LOG_ERROR, "cannot read the election state; not starting",
               "dir=\"%s\" err=\"%s\"", f->binlog_dir,
               rs == BQ_ESTORE_IO ? strerror(errno) : "the file election is damaged");
        free(st);
        return -1;
    }
    decide_plan(f, st, plan);
    int r = 0;
    if (!f->failover_auto && plan->role == BQ_ROLE_PRIMARY)
        r = probe_peers(f, st, plan);
    free(st);
    return r;
}

/* ---- effects ---- */

static void arm(bq_failover_t *fo);

static int save(bq_failover_t *fo)
{
    fo->st->epoch = fo->el.epoch;
    snprintf(fo->st->voted_for, sizeof fo->st->voted_for, "%s", voter_name(fo, fo->el.voted_for));
    bq_estore_status_t rs = bq_estore_save(fo->f->binlog_dir, fo->st);
    if (rs == BQ_ESTORE_OK)
        return 0;
    bq_log(BQ_LOG_ERROR, "cannot save the election state: no vote, no request",
           "epoch=%" PRIu64 " err=\"%s\"", fo->el.epoch, strerror(errno));
    return -1;
}

/* A fenced primary hears from nobody (standbys connect to the primary, and
 * they follow another one now): every timeout it asks the voters whether
 * they would vote for it, which changes nothing on their side, and a
 * refusal carries the voter's epoch; a higher one makes it step down. */
static void on_probe(uv_timer_t *t)
{
    bq_failover_t *fo = t->data;
    if (fo->closing || fo->el.role != BQ_EL_PRIMARY || !fo->el.fenced)
        return;
    bq_el_pos_t mine = fo->h.mine(fo->h.arg);
    Bq__Repl__VoteRequest q = BQ__REPL__VOTE_REQUEST__INIT;
    q.epoch = fo->el.epoch + 1;
    q.prevote = true;
    q.last_epoch = mine.epoch;
    q.last_lsn = mine.lsn;
    bq_canvass_round(fo->canvass, &q, fo->f->failover_timeout_ms);
}

static void send_request(bq_failover_t *fo)
{
    bq_el_pos_t mine = fo->h.mine(fo->h.arg);
    bq_el_request_t rq = bq_el_current_request(&fo->el, mine);
    Bq__Repl__VoteRequest q = BQ__REPL__VOTE_REQUEST__INIT;
    q.epoch = rq.epoch;
    q.prevote = rq.prevote;
    q.last_epoch = rq.last.epoch;
    q.last_lsn = rq.last.lsn;
    uint64_t deadline = fo->f->failover_timeout_ms / 2 > 50 ? fo->f->failover_timeout_ms / 2 : 50;
    bq_log(BQ_LOG_INFO, rq.prevote ? "election: asking whether we could win" : "election: standing",
           "epoch=%" PRIu64 " last_epoch=%" PRIu64 " last_lsn=%" PRIu64, rq.epoch, rq.last.epoch,
           rq.last.lsn);
    if (!rq.prevote)
        bq_metrics_count(BQ_COUNTER_ELECTIONS_STARTED);
    bq_canvass_round(fo->canvass, &q, deadline);
}

/* Carries out effects eff; returns false when the durable save failed (the
 * caller must then not send what it was about to). */
static bool apply(bq_failover_t *fo, unsigned eff)
{
    if (fo->closing)
        return false;
    if ((eff & BQ_EL_PERSIST) && save(fo) != 0)
        return false;
    if (eff & BQ_EL_NEW_PRIMARY && fo->el.primary >= 0)
        bq_log(BQ_LOG_INFO, "election: the primary is known", "primary=%s epoch=%" PRIu64,
               voter_name(fo, fo->el.primary), fo->el.epoch);
    if ((eff & BQ_EL_FENCE) && !(eff & BQ_EL_STEP_DOWN)) {
        bq_log(fo->el.fenced ? BQ_LOG_WARN : BQ_LOG_INFO,
               fo->el.fenced ? "fenced: no majority in contact; writes are not acknowledged"
                             : "fencing lifted: a majority is in contact",
               "epoch=%" PRIu64, fo->el.epoch);
        if (fo->el.fenced)
            bq_metrics_count(BQ_COUNTER_FENCINGS);
    }
    if ((eff & BQ_EL_FENCE) && fo->h.fence)
        fo->h.fence(fo->h.arg);
    if ((eff & BQ_EL_FENCE) && fo->el.fenced)
        uv_timer_start(&fo->probe, on_probe, 0, fo->f->failover_timeout_ms);
    else if (eff & (BQ_EL_FENCE | BQ_EL_STEP_DOWN))
        uv_timer_stop(&fo->probe);
    if (eff & BQ_EL_REQUEST)
        send_request(fo);
    if (eff & BQ_EL_STEP_DOWN)
        fo->h.step_down(fo->h.arg);
    if (eff & BQ_EL_LEAD) {
        bq_log(BQ_LOG_INFO, "election: won", "epoch=%" PRIu64, fo->el.epoch);
        bq_metrics_count(BQ_COUNTER_ELECTIONS_WON);
        fo->h.lead(fo->h.arg);
    }
    arm(fo);
    return true;
}

static void on_timer(uv_timer_t *t)
{
    bq_failover_t *fo = t->data;
    apply(fo, bq_el_tick(el(fo), now_ns(), fo->h.mine(fo->h.arg)));
}

/* Sets the timer to the election's next deadline. */
static void arm(bq_failover_t *fo)
{
    int64_t next = bq_el_next_deadline(&fo->el);
    if (fo->closing || next == INT64_MAX) {
        uv_timer_stop(&fo->timer);
        return;
    }
    int64_t wait = next - now_ns();
    uint64_t ms = wait <= 0 ? 0 : (uint64_t)(wait / 1000000) + 1;
    uv_timer_start(&fo->timer, on_timer, ms, 0);
}

static void on_reply(void *arg, size_t peer, const Bq__Repl__VoteReply *r)
{
    bq_failover_t *fo = arg;
    bq_el_reply_t rep = {.epoch = r->epoch, .prevote = r->prevote, .granted = r->granted};
    bq_log(BQ_LOG_DEBUG, "election: answer", "voter=%s epoch=%" PRIu64 " prevote=%d granted=%d",
           fo->repl->peers[peer].name, r->epoch, r->prevote, r->granted);
    apply(fo, bq_el_on_reply(el(fo), now_ns(), peer, &rep, fo->h.mine(fo->h.arg)));
}

/* ---- set-up ---- */

int bq_failover_start(bq_failover_t **out, uv_loop_t *loop, const bq_flags_t *f,
                      const bq_failover_plan_t *plan, uint64_t log_epoch,
                      const bq_repl_config_t *repl, const bq_failover_hooks_t *hooks)
{
    bq_failover_t *fo = calloc(1, sizeof *fo);
    *out = fo;
    if (!fo || !(fo->st = malloc(sizeof *fo->st)))
        return -1;
    fo->loop = loop;
    fo->f = f;
    fo->repl = repl;
    fo->h = *hooks;
    if (bq_estore_load(f->binlog_dir, fo->st) > BQ_ESTORE_ABSENT)
        return -1;
    fo->canvass = bq_canvass_new(loop, repl, on_reply, fo);
    if (!fo->canvass)
        return -1;
    bq_el_config_t ec = {
        .nvoters = repl->npeers + 1,
        .self = repl->npeers,
        .can_lead = f->role != BQ_ROLE_WITNESS,
        .automatic = f->failover_auto,
        .timeout_ns = (int64_t)f->failover_timeout_ms * 1000000,
    };
    int64_t now = now_ns();
    uint64_t seed = (uint64_t)now ^ ((uint64_t)getpid() << 32);
    unsigned eff = 0;
    uv_timer_init(loop, &fo->timer);
    fo->timer.data = fo;
    uv_timer_init(loop, &fo->probe);
    fo->probe.data = fo;
    if (plan->role == BQ_ROLE_PRIMARY) {
        /* The binlog opened log_epoch (above any epoch stored): take it. */
        bq_el_init(&fo->el, &ec, log_epoch - 1, -1, seed, now);
        eff = bq_el_assume(el(fo), now);
    } else {
        uint64_t e = fo->st->epoch > log_epoch ? fo->st->epoch : log_epoch;
        bq_el_init(&fo->el, &ec, e,
                   e == fo->st->epoch ? voter_of(repl, f->node_id, fo->st->voted_for) : -1, seed,
                   now);
        eff = e != fo->st->epoch ? BQ_EL_PERSIST : 0;
    }
    bq_el_raise_floor(&fo->el,
                      (bq_el_pos_t){.epoch = fo->st->floor_epoch, .lsn = fo->st->floor_lsn});
    if (plan->role == BQ_ROLE_PRIMARY && fo->el.role != BQ_EL_PRIMARY) {
        bq_log(BQ_LOG_ERROR, "cannot start as primary: the election refuses the log's epoch",
               "log=%" PRIu64, log_epoch);
        return -1;
    }
    /* Already in its role: LEAD changes nothing at a start. */
    return apply(fo, eff & ~(unsigned)BQ_EL_LEAD) ? 0 : -1;
}

/* ---- running ---- */

void bq_failover_epoch_started(bq_failover_t *fo, uint64_t epoch, uint64_t first_lsn,
                               const char *node)
{
    if (bq_estore_add_epoch(fo->st, epoch, first_lsn, node) == 1) {
        if (epoch > fo->st->epoch)
            fo->st->epoch = epoch;
        save(fo);
    }
}

uint64_t bq_failover_epoch_of(const bq_failover_t *fo, uint64_t lsn)
{
    return bq_estore_epoch_of(fo->st, lsn);
}

/* The primary this node is, or heard from within its timeout; "" when none. */
static const char *known_primary(const bq_failover_t *fo)
{
    if (fo->el.role == BQ_EL_PRIMARY)
        return fo->f->node_id;
    if (fo->el.primary < 0 || now_ns() - fo->el.heard_at >= fo->el.cfg.timeout_ns)
        return "";
    return voter_name(fo, fo->el.primary);
}

void bq_failover_vote(bq_failover_t *fo, size_t peer, const Bq__Repl__VoteRequest *req,
                      Bq__Repl__VoteReply *reply)
{
    bq_el_request_t rq = {.epoch = req->epoch,
                          .prevote = req->prevote,
                          .last = {.epoch = req->last_epoch, .lsn = req->last_lsn}};
    bq_el_reply_t rep;
    bq_el_pos_t mine = fo->h.mine(fo->h.arg);
    unsigned eff = bq_el_on_request(el(fo), now_ns(), peer, &rq, mine, &rep);
    if (!apply(fo, eff))
        rep.granted = false;
    reply->epoch = rep.epoch;
    reply->prevote = rep.prevote;
    reply->granted = rep.granted;
    reply->primary = (char *)known_primary(fo);
    /* The log rules are the ones an operator must see: a candidate that
     * lacks acknowledged records is never elected (docs/failover.md). */
    const char *why = rep.granted                                ? ""
                      : bq_el_pos_cmp(rq.last, fo->el.floor) < 0 ? "below our floor: it lacks "
                                                                   "acknowledged records"
                      : fo->f->role != BQ_ROLE_WITNESS && bq_el_pos_cmp(rq.last, mine) < 0
                          ? "its log is behind ours"
                          : "epoch, vote or a live primary";
    bq_log(BQ_LOG_INFO, "election: vote requested",
           "candidate=%s epoch=%" PRIu64 " prevote=%d granted=%d last=%" PRIu64 ":%" PRIu64
           " floor=%" PRIu64 ":%" PRIu64 " why=\"%s\"",
           fo->repl->peers[peer].name, req->epoch, req->prevote, rep.granted, rq.last.epoch,
           rq.last.lsn, fo->el.floor.epoch, fo->el.floor.lsn, why);
}

void bq_failover_ack(bq_failover_t *fo, size_t peer, uint64_t epoch, int64_t echo)
{
    apply(fo, bq_el_on_ack(el(fo), now_ns(), peer, epoch, echo));
}

void bq_failover_higher_epoch(bq_failover_t *fo, uint64_t epoch)
{
    apply(fo, bq_el_on_epoch(el(fo), now_ns(), epoch));
}

/* A witness stores a floor above the one it has before it acknowledges
 * it: the primary counts it as a copy of what lies below (degraded). */
static void keep_floor(bq_failover_t *fo, bq_el_pos_t floor)
{
    bq_el_pos_t kept = {.epoch = fo->st->floor_epoch, .lsn = fo->st->floor_lsn};
    if (fo->f->role != BQ_ROLE_WITNESS || bq_el_pos_cmp(floor, kept) <= 0)
        return;
    fo->st->floor_epoch = floor.epoch;
    fo->st->floor_lsn = floor.lsn;
    if (save(fo) != 0) {
        fo->st->floor_epoch = kept.epoch;
        fo->st->floor_lsn = kept.lsn;
    }
}

bool bq_failover_heard(bq_failover_t *fo, size_t peer, uint64_t epoch,
                       const Bq__Repl__Heartbeat *hb)
{
    bool accept = true;
    unsigned eff = bq_el_on_primary(el(fo), now_ns(), peer, epoch, &accept);
    if (accept && hb) {
        fo->hb_sync = hb->sync;
        fo->hb_commit = hb->commit_lsn;
        /* A floor is always a record of the heartbeat's epoch (0: none). */
        if (hb->floor_lsn) {
            bq_el_pos_t pos = {.epoch = hb->epoch, .lsn = hb->floor_lsn};
            bq_el_raise_floor(&fo->el, pos);
            keep_floor(fo, pos);
        }
    }
    apply(fo, eff);
    return accept;
}

uint64_t bq_failover_kept_floor(const bq_failover_t *fo, uint64_t epoch)
{
    return fo->st->floor_epoch == epoch ? fo->st->floor_lsn : 0;
}

/* Whether a promotion without votes keeps every acknowledged write: two
 * voters, sync was in force at the primary's last heartbeat (it had
 * acknowledged nothing this standby lacked), and we hold its commit point.
 * A primary that went on alone afterwards (degraded, after --sync-timeout
 * without us) acknowledged writes we lack: a second failure, which
 * docs/replication.md lists. */
static bool safe_alone(const bq_failover_t *fo)
{
    bq_el_pos_t mine = fo->h.mine(fo->h.arg);
    return fo->el.cfg.nvoters == 2 && fo->hb_sync && mine.lsn >= fo->hb_commit;
}

int bq_failover_promote(bq_failover_t *fo, bool force, char *why, size_t whylen)
{
    int64_t now = now_ns();
    if (fo->el.role == BQ_EL_PRIMARY) {
        snprintf(why, whylen, "this node is the primary already");
        return -1;
    }
    if (!force && now - fo->el.heard_at < fo->el.cfg.timeout_ns && fo->el.primary >= 0) {
        snprintf(why, whylen, "the primary %s is alive: use switchover",
                 voter_name(fo, fo->el.primary));
        return -1;
    }
    if (force || safe_alone(fo)) {
        if (force) {
            bq_log(BQ_LOG_WARN,
                   "forced promotion: writes the old primary acknowledged and this "
                   "node lacks are lost",
                   "epoch=%" PRIu64, fo->el.epoch + 1);
            bq_metrics_count(BQ_COUNTER_FORCED_PROMOTIONS);
        }
        return apply(fo, bq_el_assume(el(fo), now)) ? 0 : -1;
    }
    if (fo->el.cfg.nvoters == 2) {
        snprintf(why, whylen,
                 "this standby may lack acknowledged writes (the primary's last heartbeat: "
                 "sync %s, commit LSN %" PRIu64 "; ours %" PRIu64 "); "
                 "--force to promote anyway",
                 fo->hb_sync ? "in force" : "not in force (degraded)", fo->hb_commit,
                 fo->h.mine(fo->h.arg).lsn);
        return -1;
    }
    return apply(fo, bq_el_campaign(el(fo), now)) ? 0 : -1;
}

int bq_failover_handover(bq_failover_t *fo, size_t peer, uint64_t epoch, char *why, size_t whylen)
{
    if (fo->el.primary != (int)peer || epoch != fo->el.epoch) {
        snprintf(why, whylen, "not the primary we follow, or another epoch");
        return -1;
    }
    return apply(fo, bq_el_campaign(el(fo), now_ns())) ? 0 : -1;
}

void bq_failover_hand_over(bq_failover_t *fo)
{
    bq_el_hand_over(&fo->el);
}

bool bq_failover_may_ack(const bq_failover_t *fo)
{
    return bq_el_may_ack(&fo->el, now_ns());
}

const bq_election_t *bq_failover_election(const bq_failover_t *fo)
{
    return &fo->el;
}

void bq_failover_close(bq_failover_t *fo)
{
    if (!fo || fo->closing)
        return;
    fo->closing = true;
    if (fo->timer.data)
        uv_close((uv_handle_t *)&fo->timer, NULL);
    if (fo->probe.data)
        uv_close((uv_handle_t *)&fo->probe, NULL);
    /* Freed by the loop once its links are closed. */
    bq_canvass_free(fo->canvass);
    fo->canvass = NULL;
}

void bq_failover_free(bq_failover_t *fo)
{
    if (!fo)
        return;
    if (!fo->closing)
        bq_canvass_free(fo->canvass);
    free(fo->st);
    free(fo);
}
