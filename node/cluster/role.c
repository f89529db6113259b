/* Role changes in place (docs/failover.md, "Role changes in place"): a
 * standby that won its election becomes the primary of that epoch inside
 * the running process, and a primary that learned of a higher epoch becomes
 * a standby, with no re-exec and no replay. The engine that applied the
 * stream is the primary's engine; the binlog opens the new epoch
 * (node/binlog/role.c); the feeder starts or stops streaming; the receiver
 * stops or starts following. Each change runs from the role timer, never
 * inside the election's or the feeder's callback that decided it, and is
 * retried there while the binlog cannot close its segment (a failing
 * disk): meanwhile writes are refused. */
#include "node/cluster/internal.h"

#include <inttypes.h>
#include <stdio.h>

#include "node/base/clock.h"
#include "node/base/counters.h"
#include "node/base/log.h"

#define RETRY_MS 100

static void elapsed_log(const char *msg, const char *role, int64_t since, uint64_t epoch,
                        uint64_t lsn)
{
    bq_log(BQ_LOG_INFO, msg, "role=%s epoch=%" PRIu64 " last_lsn=%" PRIu64 " took_ms=%.1f", role,
           epoch, lsn, (double)(bq_clock_now().mono - since) / 1e6);
}

static void lead_now(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    const bq_election_t *e = bq_failover_election(c->failover);
    bq_binlog_t *b = c->host.binlog;
    int64_t start = bq_clock_now().mono;
    if (c->closing || !c->standby)
        return;
    if (e->role != BQ_EL_PRIMARY) { /* it lost the office before taking it */
        c->role_why = NULL;
        bq_receiver_start(c->receiver); /* a retry may have stopped it */
        return;
    }
    /* No frame may arrive from the old stream while the log changes hands. */
    bq_receiver_stop(c->receiver);
    if (bq_binlog_become_primary(b, e->epoch, bq_clock_now()) != 0) {
        uv_timer_start(&c->role_timer, lead_now, RETRY_MS, 0);
        return;
    }
    bq_binlog_seg_info_t cur;
    bq_binlog_seg(b, bq_binlog_nsegs(b) - 1, &cur);
    bq_failover_epoch_started(c->failover, e->epoch, cur.first_lsn, c->f->node_id);
    c->standby = false;
    bq__cluster_retain_start(c, cur.first_lsn);
    c->role_why = NULL;
    c->primary_name[0] = '\0';
    bq_feeder_set_primary(c->feeder, true);
    c->host.role_changed(c->host.arg, false);
    /* Its proxied clients stay: their sessions go on here. */
    bq_proxy_adopt_all(c->proxy, c->host.adopt, c->host.arg);
    elapsed_log("role change in place", "primary", start, e->epoch, bq_binlog_last_lsn(b));
    bq__cluster_tell_release(c);
}

void bq__cluster_lead(bq_cluster_t *c)
{
    bq_metrics_count(BQ_COUNTER_BECAME_PRIMARY);
    c->role_why = "won the election: taking office as primary";
    uv_timer_start(&c->role_timer, lead_now, 0, 0);
}

static void follow_now(uv_timer_t *t)
{
    bq_cluster_t *c = t->data;
    int64_t start = bq_clock_now().mono;
    if (c->closing || c->standby)
        return;
    /* Clients first: they move to the proxy (bq_cluster_take_client), held
     * for the new primary; their reservations are void, and a follower's
     * engine holds none. */
    bq_proxy_primary_lost(c->proxy);
    c->host.role_changed(c->host.arg, true);
    if (bq_binlog_become_follower(c->host.binlog) != 0) {
        uv_timer_start(&c->role_timer, follow_now, RETRY_MS, 0);
        return;
    }
    c->standby = true;
    c->role_why = NULL;
    bq__cluster_retain_stop(c);
    bq_feeder_set_primary(c->feeder, false);
    bq_receiver_start(c->receiver);
    elapsed_log("role change in place", "standby", start, bq_binlog_epoch(c->host.binlog),
                bq_binlog_last_lsn(c->host.binlog));
}

void bq__cluster_step_down(bq_cluster_t *c)
{
    if (c->standby || c->role_why)
        return;
    bq_metrics_count(BQ_COUNTER_BECAME_STANDBY);
    c->role_why = "a higher epoch exists: stepping down to standby";
    uv_timer_start(&c->role_timer, follow_now, 0, 0);
    bq__cluster_tell_release(c);
}
