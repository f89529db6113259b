/* Switchover (primary): writes pause until the target standby has every
 * record, it is asked to stand, and this node steps down once it has; given
 * up (writes resume here) when the target does not catch up, goes away or
 * does not take over in time. */
#include "node/cluster/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "node/base/clock.h"
#include "node/base/counters.h"
#include "node/base/log.h"

/* How long a switchover may pause writes before it is given up. */
static uint64_t switchover_ms(const bq_flags_t *f)
{
    uint64_t t = 3 * (uint64_t)f->failover_timeout_ms;
    return t > 5000 ? t : 5000;
}

/* Ends the handover: writes resume (failure) or the node is stepping down. */
static void handover_end(bq_cluster_t *c, int status, const char *text)
{
    bq_cluster_done_cb done = c->handover.done;
    c->handover.to = -1;
    c->handover.promoted = false;
    c->handover.done = NULL;
    uv_timer_stop(&c->handover.poll);
    bq_metrics_count(status == 200 ? BQ_COUNTER_SWITCHOVERS_DONE : BQ_COUNTER_SWITCHOVERS_FAILED);
    bq_log(status == 200 ? BQ_LOG_INFO : BQ_LOG_WARN, "switchover", "result=\"%s\"", text);
    if (done)
        done(c->handover.arg, status, text);
    bq__cluster_tell_release(c);
}

static void on_handover_poll(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    int64_t now = bq_clock_now().mono;
    size_t to = (size_t)c->handover.to;
    if (c->role_why || c->standby) {
        handover_end(c, 200, "switched over: this node follows the new primary");
        return;
    }
    if (now > c->handover.deadline) {
        handover_end(c, 504,
                     c->handover.promoted
                         ? "the target did not take over in time; writes resumed here"
                         : "the target did not catch up in time; writes resumed here");
        return;
    }
    bq_feeder_standby_t sb;
    bq_feeder_standby(c->feeder, to, now, &sb);
    if (!c->handover.promoted && !sb.connected) {
        handover_end(c, 504,
                     "the target disconnected before it had every record; writes "
                     "resumed here");
        return;
    }
    /* After Promote the target stands at once, and drops its link once it
     * has won; silent for a timeout, it died. */
    if (c->handover.promoted && sb.connected)
        c->handover.lost_at = 0;
    else if (c->handover.promoted && c->handover.lost_at == 0)
        c->handover.lost_at = now;
    else if (c->handover.promoted &&
             now - c->handover.lost_at > (int64_t)c->f->failover_timeout_ms * 1000000) {
        handover_end(c, 504,
                     "the target went away after it was asked to stand; writes "
                     "resumed here");
        return;
    }
    /* Promote once the target has every record and every reply here is
     * released (the local fsync may finish after the target's ack): from
     * Promote on nothing more is released, and a client with a reply held
     * back could not move to the new primary. */
    uint64_t last = bq_binlog_last_lsn(c->host.binlog);
    if (!c->handover.promoted && sb.flushed >= last && c->released >= last) {
        if (bq_feeder_send_promote(c->feeder, to) == 0) {
            c->handover.promoted = true;
            bq_failover_hand_over(c->failover);
            bq_log(BQ_LOG_INFO, "switchover: the target has every record; asking it to stand",
                   "target=%s lsn=%" PRIu64, c->peers[to].name, sb.flushed);
        }
    }
}

int bq_cluster_switchover(bq_cluster_t *c, const char *to, bq_cluster_done_cb done, void *arg,
                          char *why, size_t whylen)
{
    int peer = -1;
    for (size_t i = 0; i < c->npeers; i++)
        if (strcmp(c->peers[i].name, to) == 0)
            peer = (int)i;
    bq_feeder_standby_t sb = {0};
    if (peer >= 0 && c->feeder)
        bq_feeder_standby(c->feeder, (size_t)peer, bq_clock_now().mono, &sb);
    if (c->standby || !c->feeder)
        snprintf(why, whylen, "this node is not the primary");
    else if (c->handover.to >= 0 || c->role_why)
        snprintf(why, whylen, "a switchover is already in progress");
    else if (peer < 0)
        snprintf(why, whylen, "%s is not a peer of this node", to);
    else if (!sb.connected || !sb.in_sync)
        snprintf(why, whylen, "%s is not a connected standby in sync", to);
    else {
        c->handover.to = peer;
        c->handover.promoted = false;
        c->handover.lost_at = 0;
        c->handover.deadline = bq_clock_now().mono + (int64_t)switchover_ms(c->f) * 1000000;
        c->handover.done = done;
        c->handover.arg = arg;
        uv_timer_start(&c->handover.poll, on_handover_poll, 0, 5);
        bq_log(BQ_LOG_INFO, "switchover: writes paused until the target has every record",
               "target=%s timeout_ms=%" PRIu64, to, switchover_ms(c->f));
        bq__cluster_tell_release(c);
        return 0;
    }
    return -1;
}
