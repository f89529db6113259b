/* The node in its elections: node/cluster/failover.c runs them on the loop;
 * here is what they do to the node (our log position, a won election or a
 * step-down restarting the process in its new role, fencing telling the
 * host) and the feeder's messages handed to them (votes, acks, higher
 * epochs). */
#include "node/cluster/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "node/base/counters.h"

static bq_el_pos_t fo_mine(void *arg)
{
    bq_cluster_t *c = arg;
    bq_binlog_t *b = c->host.binlog;
    return (bq_el_pos_t){.epoch = bq_binlog_epoch(b), .lsn = bq_binlog_last_lsn(b)};
}

static void on_restart(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    bq__cluster_restart(c, c->restart_why);
}

/* Won: restart as the primary of the epoch, with the voters' contact
 * times (the monotonic clock survives exec), a moment later so that a reply
 * already queued (an operator's request) leaves first. */
static void fo_lead(void *arg)
{
    bq_cluster_t *c = arg;
    const bq_election_t *e = bq_failover_election(c->failover);
    static char env[32 + 21 * BQ_EL_MAX_VOTERS];
    int n = snprintf(env, sizeof env, "%" PRIu64 ":", e->epoch);
    for (size_t i = 0; i < e->cfg.nvoters && n > 0 && (size_t)n < sizeof env; i++)
        n +=
            snprintf(env + n, sizeof env - (size_t)n, "%s%" PRId64, i ? "," : "", e->contact_at[i]);
    setenv("BQ_HA_OFFICE", env, 1);
    bq_metrics_count(BQ_COUNTER_BECAME_PRIMARY);
    c->restart_why = "won the election: taking office as primary";
    uv_timer_start(&c->restart, on_restart, 20, 0);
}

/* A primary that steps down restarts a moment later, so that the vote it
 * granted (the reason, often) reaches its candidate; meanwhile it is not
 * primary for the election and acknowledges nothing. */
static void fo_step_down(void *arg)
{
    bq_cluster_t *c = arg;
    if (c->standby || c->restart_why)
        return;
    bq_metrics_count(BQ_COUNTER_BECAME_STANDBY);
    c->restart_why = "a higher epoch exists: stepping down to standby";
    uv_timer_start(&c->restart, on_restart, 100, 0);
    bq__cluster_tell_release(c);
}

static void fo_fence(void *arg)
{
    bq_cluster_t *c = arg;
    if (!c->closing && !c->standby && c->feeder)
        bq__cluster_tell_release(c);
}

static void fd_vote(void *arg, size_t peer, const Bq__Repl__VoteRequest *req,
                    Bq__Repl__VoteReply *reply)
{
    bq_cluster_t *c = arg;
    bq_failover_vote(c->failover, peer, req, reply);
}

static void fd_ack(void *arg, size_t peer, uint64_t epoch, int64_t echo)
{
    bq_cluster_t *c = arg;
    if (c->failover)
        bq_failover_ack(c->failover, peer, epoch, echo);
}

static void fd_higher_epoch(void *arg, uint64_t epoch)
{
    bq_cluster_t *c = arg;
    if (c->failover)
        bq_failover_higher_epoch(c->failover, epoch);
}

int bq__cluster_start_failover(bq_cluster_t *c, const bq_failover_plan_t *plan,
                               const bq_repl_config_t *rc)
{
    bq_failover_hooks_t h = {
        .mine = fo_mine, .lead = fo_lead, .step_down = fo_step_down, .fence = fo_fence, .arg = c};
    bq_binlog_t *b = c->host.binlog;
    if (bq_failover_start(&c->failover, c->host.loop, c->f, plan, bq_binlog_epoch(b), rc, &h) != 0)
        return -1;
    if (!c->standby && bq_binlog_nsegs(b) > 0) {
        bq_binlog_seg_info_t cur;
        bq_binlog_seg(b, bq_binlog_nsegs(b) - 1, &cur);
        bq_failover_epoch_started(c->failover, bq_binlog_epoch(b), cur.first_lsn, c->f->node_id);
    }
    return 0;
}

bq_feeder_hooks_t bq__cluster_feeder_hooks(void)
{
    return (bq_feeder_hooks_t){.vote = fd_vote, .ack = fd_ack, .higher_epoch = fd_higher_epoch};
}
