/* Cluster mode glue: sets up the pieces (TLS contexts from the flags, the
 * feeder, on a standby the receiver and the client proxy, the elections),
 * computes the point replies may leave and tells the host, and closes
 * them. Decisions live in replication/; node/cluster/ only connects the
 * pieces: log_sink.c (the binlog as replication's log and sink),
 * elections.c, switchover.c and status.c. */
#include "node/cluster/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/base/clock.h"
#include "node/base/counters.h"
#include "node/base/log.h"
#include "node/cluster/tls.h"

/* ---- set-up ---- */

static int make_tls(bq_cluster_t *c)
{
    if (c->f->repl_plaintext)
        bq_logm(BQ_LOG_WARN, "replication runs in plaintext (--repl-plaintext): tests only");
    return bq_cluster_tls_new(c->f, &c->tls_server, &c->tls_client);
}

static void repl_config(bq_cluster_t *c, bq_repl_config_t *rc)
{
    for (size_t i = 0; i < c->f->npeers; i++) {
        const bq_flags_peer_t *p = &c->f->peers[i];
        if (strcmp(p->name, c->f->node_id) == 0) {
            c->self = p;
            continue;
        }
        c->peers[c->npeers++] = (bq_repl_peer_t){
            .name = p->name, .host = p->host, .port = p->port, .witness = p->witness};
    }
    *rc = (bq_repl_config_t){
        .cluster_id = c->f->cluster_id,
        .node_id = c->f->node_id,
        .peers = c->peers,
        .npeers = c->npeers,
        .tls_server = c->tls_server,
        .tls_client = c->tls_client,
        .idle_ms = c->f->repl_timeout_ms,
        .witness = c->f->role == BQ_ROLE_WITNESS,
    };
    /* Heartbeats every quarter of it: a failover timeout needs several. */
    if (c->f->failover_auto && c->f->failover_timeout_ms < rc->idle_ms)
        rc->idle_ms = c->f->failover_timeout_ms;
}

static void on_committed(void *arg);

/* The feeder: the primary's, or the standby's that refuses every Hello. */
static int start_feeder(bq_cluster_t *c, const bq_repl_config_t *rc)
{
    const bq_flags_t *f = c->f;
    bq_feeder_config_t fc = {
        .repl = *rc,
        .primary = !c->standby,
        .client_host = f->addr && f->addr_given ? f->addr : NULL,
        .client_port = f->port,
        .sync_need = f->sync_standbys > 0 ? (unsigned)f->sync_standbys : 0,
        .fallback = f->sync_fallback_async ? BQ_FALLBACK_ASYNC : BQ_FALLBACK_REFUSE,
        .sync_timeout_ns = (int64_t)f->sync_timeout_ms * 1000000,
        .count_self = f->failover_auto,
        .hooks = bq__cluster_feeder_hooks(),
    };
    /* A wildcard listen address is no use to a proxy: it takes our peer host. */
    if (fc.client_host && (!strcmp(fc.client_host, "0.0.0.0") || !strcmp(fc.client_host, "::")))
        fc.client_host = NULL;
    bq__cluster_log_init(c);
    c->feeder = bq_feeder_new(c->host.loop, &fc, &c->log, on_committed, c);
    if (!c->feeder)
        return -1;
    char host[256], port[8];
    const char *listen = f->repl_listen;
    if (listen) {
        const char *colon = strrchr(listen, ':');
        snprintf(host, sizeof host, "%.*s", (int)(colon - listen), listen);
        snprintf(port, sizeof port, "%s", colon + 1);
    } else {
        snprintf(host, sizeof host, "%s", c->self->host);
        snprintf(port, sizeof port, "%s", c->self->port);
    }
    size_t hl = strlen(host);
    if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    int r = bq_feeder_listen(c->feeder, host, port);
    if (r != 0)
        bq_log(BQ_LOG_ERROR, "replication: cannot listen", "addr=%s:%s err=\"%s\"", host, port,
               uv_strerror(r));
    else
        bq_log(BQ_LOG_INFO, "replication: listening", "addr=%s:%s role=%s", host, port,
               fc.primary ? "primary" : "standby");
    return r == 0 ? 0 : -1;
}

/* The receiver and the client proxy, on every node: a primary that steps
 * down uses them in place. Started on a standby. */
static int start_receiver(bq_cluster_t *c, const bq_repl_config_t *rc)
{
    bq__cluster_sink_init(c);
    /* A held client waits for about two elections at most. */
    uint64_t hold = 4 * (uint64_t)c->f->failover_timeout_ms;
    c->proxy = bq_proxy_new(c->host.loop, hold > 5000 ? hold : 5000);
    c->receiver = bq_receiver_new(c->host.loop, rc, &c->sink);
    if (!c->proxy || !c->receiver)
        return -1;
    if (c->standby)
        bq_receiver_start(c->receiver);
    return 0;
}

int bq_cluster_start(bq_cluster_t **out, const bq_cluster_host_t *host, const bq_flags_t *f,
                     const bq_failover_plan_t *plan, char **argv)
{
    bq_cluster_t *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->host = *host;
    c->f = f;
    c->argv = argv;
    c->sync_logged = -1;
    c->standby = f->role == BQ_ROLE_STANDBY || f->role == BQ_ROLE_WITNESS;
    *out = c;
    if (make_tls(c) != 0)
        return -1;
    repl_config(c, &c->rc);
    uv_timer_init(c->host.loop, &c->role_timer);
    c->role_timer.data = c;
    uv_timer_init(c->host.loop, &c->handover.poll);
    c->handover.poll.data = c;
    c->handover.to = -1;
    uv_timer_init(c->host.loop, &c->status);
    c->status.data = c;
    uv_timer_init(c->host.loop, &c->retain.timer);
    c->retain.timer.data = c;
    if (bq__cluster_start_failover(c, plan, &c->rc) != 0 || start_feeder(c, &c->rc) != 0 ||
        start_receiver(c, &c->rc) != 0)
        return -1;
    if (f->status_interval_ms > 0)
        uv_timer_start(&c->status, bq__cluster_on_status, f->status_interval_ms,
                       f->status_interval_ms);
    bq_log(BQ_LOG_INFO, "cluster mode",
           "role=%s node=%s cluster=%s epoch=%" PRIu64 " sync_standbys=%ld sync_fallback=%s",
           bq__cluster_role_name(c), f->node_id, f->cluster_id, bq_binlog_epoch(c->host.binlog),
           f->sync_standbys, f->sync_fallback_async ? "async" : "refuse");
    bq__cluster_tell_release(c);
    return 0;
}

/* ---- running ---- */

bool bq_cluster_standby(const bq_cluster_t *c)
{
    return c->standby;
}

const char *bq_cluster_pause(const bq_cluster_t *c)
{
    if (!c || c->standby || !c->feeder)
        return NULL;
    if (c->role_why)
        return "stepping down";
    if (c->handover.to >= 0)
        return "switchover in progress";
    return NULL;
}

const char *bq_cluster_refusal(const bq_cluster_t *c)
{
    const char *pause = bq_cluster_pause(c);
    if (pause || !c || c->standby || !c->feeder)
        return pause;
    if (!bq_failover_may_ack(c->failover))
        return "fenced: no majority of voters in contact";
    if (bq_feeder_sync_state(c->feeder) == BQ_SYNC_REFUSING)
        return "too few standbys in sync";
    return NULL;
}

int bq_cluster_take_client(bq_cluster_t *c, int fd, const char *use, const char *const *watch,
                           size_t nwatch, const char *input, size_t len)
{
    return bq_proxy_take(c->proxy, fd, use, watch, nwatch, input, len);
}

void bq_cluster_accept(bq_cluster_t *c, int fd)
{
    bq_proxy_accept(c->proxy, fd);
}

/* The point replies may be released up to now: the binlog's, held back on
 * a primary by the commit point (brought up to date as of now, which arms
 * the sync fallback's deadline and logs a change of the sync state). */
static uint64_t release_now(bq_cluster_t *c)
{
    uint64_t local = bq_binlog_release_lsn(c->host.binlog);
    if (c->standby)
        return local;
    /* Fenced, or stepping down: nothing more is acknowledged. */
    if (!bq_failover_may_ack(c->failover) || c->role_why || c->handover.promoted)
        return c->released;
    uint64_t r = bq_feeder_commit(c->feeder, local, bq_clock_now().mono);
    bq__cluster_log_sync_state(c);
    /* A reply that waits for our own fsync never waits for the -f timer. */
    bq_binlog_sync_eagerly(c->host.binlog, bq_feeder_wants_self_durable(c->feeder));
    if (r > c->released)
        c->released = r;
    return c->released;
}

void bq__cluster_tell_release(bq_cluster_t *c)
{
    if (c->closing)
        return;
    uint64_t lsn = release_now(c);
    c->host.released(c->host.arg, lsn);
}

int bq_cluster_promote(bq_cluster_t *c, bool force, char *why, size_t whylen)
{
    if (!c->failover) {
        snprintf(why, whylen, "not in cluster mode");
        return -1;
    }
    return bq_failover_promote(c->failover, force, why, whylen);
}

/* The commit point may have moved, or the sync state changed (logged when
 * the commit point is computed again). */
static void on_committed(void *arg)
{
    bq_cluster_t *c = arg;
    if (c->closing || c->standby)
        return;
    bq__cluster_tell_release(c);
}

void bq_cluster_written(bq_cluster_t *c)
{
    bq_binlog_t *b = c->host.binlog;
    if (c->standby)
        bq_receiver_progress(c->receiver);
    else
        bq_feeder_written(c->feeder, bq_binlog_written_lsn(b), bq_binlog_written_bytes(b),
                          bq_clock_now().mono);
}

void bq_cluster_synced(bq_cluster_t *c)
{
    if (c->standby) {
        bq_receiver_progress(c->receiver);
    } else if (c->f->failover_auto && c->feeder) {
        /* The primary's own copy counts once durable (replication/commit.h). */
        bq_feeder_durable(c->feeder, bq_binlog_durable_lsn(c->host.binlog));
    }
    bq__cluster_tell_release(c);
}

void bq_cluster_close(bq_cluster_t *c)
{
    if (!c || c->closing)
        return;
    c->closing = true;
    if (c->handover.done) { /* a switchover in progress: its caller's handle must be answered */
        bq_cluster_done_cb done = c->handover.done;
        c->handover.done = NULL;
        c->handover.to = -1;
        done(c->handover.arg, 503, "switchover abandoned: this node is shutting down");
        /* (the admin server stopped first: the answer only frees the handle) */
    }
    if (c->status.data)
        uv_close((uv_handle_t *)&c->status, NULL);
    if (c->role_timer.data)
        uv_close((uv_handle_t *)&c->role_timer, NULL);
    if (c->handover.poll.data)
        uv_close((uv_handle_t *)&c->handover.poll, NULL);
    if (c->retain.timer.data)
        uv_close((uv_handle_t *)&c->retain.timer, NULL);
    bq_failover_close(c->failover);
    bq_feeder_close(c->feeder);
    bq_receiver_close(c->receiver);
    bq_proxy_close(c->proxy);
    bq_resync_abort(c->resync);
    c->resync = NULL;
}

void bq_cluster_free(bq_cluster_t *c)
{
    if (!c)
        return;
    bq_feeder_free(c->feeder);
    bq_receiver_free(c->receiver);
    bq_proxy_free(c->proxy);
    bq_failover_free(c->failover);
    SSL_CTX_free(c->tls_server);
    SSL_CTX_free(c->tls_client);
    free(c);
}

void bq__cluster_restart(bq_cluster_t *c, const char *why)
{
    bq_log(BQ_LOG_INFO, "restarting", "why=\"%s\"", why);
    if (bq_listen_pass_on_exec(c->host.listener) != 0)
        bq_log(BQ_LOG_WARN, "cannot pass the listening socket on; the new image binds again",
               "err=\"%s\"", strerror(errno));
    bq_metrics_counters_export_env();
    execv("/proc/self/exe", c->argv);
    bq_log(BQ_LOG_ERROR, "cannot restart; exiting so a supervisor restarts us", "err=\"%s\"",
           strerror(errno));
    _exit(1);
}
