/* The node in its elections: node/cluster/failover.c runs them on the loop;
 * here is what they do to the node (our log position, a won election or a
 * step-down changing its role in place (role.c), fencing telling the host)
 * and the feeder's messages handed to them (votes, acks, higher epochs). */
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

static void fo_lead(void *arg)
{
    bq__cluster_lead(arg);
}

static void fo_step_down(void *arg)
{
    bq__cluster_step_down(arg);
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
        bq__cluster_retain_start(c, cur.first_lsn);
    }
    return 0;
}

bq_feeder_hooks_t bq__cluster_feeder_hooks(void)
{
    return (bq_feeder_hooks_t){.vote = fd_vote, .ack = fd_ack, .higher_epoch = fd_higher_epoch};
}
