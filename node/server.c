/* The event loop. Each loop turn: the timer runs the engine's due timers;
 * reads feed sessions; then the prepare handle feeds the connections that
 * the engine woke, ends the binlog's turn (writing the records the turn
 * logged), flushes every connection with new output (one write each) and
 * re-arms the timer to the engine's next due time. SIGUSR1 turns on drain
 * mode; SIGTERM and SIGINT close everything and let uv_run return. */
#include "node/server.h"

#include <signal.h>
#include <string.h>

#include "node/admin/routes.h"
#include "node/base/clock.h"
#include "node/client/conn.h"
#include "node/client/pair.h"
#include "node/base/counters.h"

/* A standby runs no timers: its engine changes only by the primary's records. */
static bool standby(const bq_server_t *s)
{
    return s->cluster && bq_cluster_standby(s->cluster);
}

bq_now_t bq_server_now(bq_server_t *s)
{
    bq_now_t now = bq_clock_now();
    if (!standby(s) && bq_engine_next_due(s->engine) <= now.mono)
        bq_engine_tick(s->engine, now);
    return now;
}

static bq_now_t clients_now(void *arg)
{
    return bq_server_now(arg);
}

/* Refuses writes (drain mode: put answers DRAINING) while the cluster
 * gives a reason or SIGUSR1 asked, or takes them again; pauses them (a
 * session holds a writing command unanswered) while the cluster hands over
 * or steps down, and wakes every session when the pause ends. Logs a
 * change. */
static void set_refusal(bq_server_t *s)
{
    const char *pause = s->cluster ? bq_cluster_pause(s->cluster) : NULL;
    const char *why = pause || !s->cluster ? NULL : bq_cluster_refusal(s->cluster);
    bool refusing = why != NULL;
    if (bq_engine_draining(s->engine) != (s->drain_signal || refusing)) {
        bq_engine_set_draining(s->engine, s->drain_signal || refusing);
        if (refusing)
            bq_log(BQ_LOG_WARN, "refusing writes", "why=\"%s\"", why);
        else
            bq_logm(BQ_LOG_INFO, "taking writes again");
    }
    if (bq_engine_writes_paused(s->engine) != (pause != NULL)) {
        bq_engine_set_writes_paused(s->engine, pause != NULL);
        if (pause) {
            bq_log(BQ_LOG_INFO, "writes wait", "why=\"%s\"", pause);
        } else {
            bq_logm(BQ_LOG_INFO, "writes no longer wait");
            bq_clients_wake_all(&s->clients);
        }
    }
}

/* A primary may have been fenced since the last event (a pause): writes
 * are refused with DRAINING before they are tried. */
static void clients_before_feed(void *arg)
{
    bq_server_t *s = arg;
    if (s->cluster)
        set_refusal(s);
}

static void on_timer(uv_timer_t *t)
{
    bq_server_t *s = t->data;
    bq_engine_tick(s->engine, bq_clock_now());
}

static void arm_timer(bq_server_t *s)
{
    int64_t due = standby(s) ? BQ_NEVER : bq_engine_next_due(s->engine);
    if (due == BQ_NEVER) {
        uv_timer_stop(&s->timer);
        return;
    }
    int64_t now = bq_clock_now().mono;
    uint64_t ms = due <= now ? 0 : (uint64_t)((due - now + 999999) / 1000000);
    uv_update_time(&s->loop);
    uv_timer_start(&s->timer, on_timer, ms, 0);
}

static void on_idle(uv_idle_t *h)
{
    (void)h; /* only keeps the next poll from blocking */
}

static void on_prepare(uv_prepare_t *p)
{
    bq_server_t *s = p->data;

    if (s->stopping)
        return;
    bq_clients_resume(&s->clients);
    /* Records first: flushing releases the replies that wait for them. */
    bool more = s->binlog && bq_binlog_turn(s->binlog, bq_clock_now());
    bq_clients_flush(&s->clients);
    /* Flushing can unthrottle a connection: feed it on the next turn. */
    if (!bq_clients_pending(&s->clients) && !more)
        uv_idle_stop(&s->idle);
    else
        uv_idle_start(&s->idle, on_idle);
    arm_timer(s);
}

/* Serves the client socket fd (taken): proxied to the primary on a
 * standby, else a connection of this node's. */
static void serve_client(bq_server_t *s, int fd)
{
    if (standby(s))
        bq_cluster_accept(s->cluster, fd);
    else
        bq_conn_open(&s->clients, fd);
}

static void on_accept(bq_listener_t *l, int fd)
{
    serve_client(l->data, fd);
}

/* The admin console's own client connection (bq_admin_node_t.open_client). */
static int open_own_client(void *arg, bool *is_unix)
{
    bq_server_t *s = arg;
    int fds[2];
    *is_unix = s->listener.is_unix;
    int r = bq_client_pair(*is_unix, fds);
    if (r < 0)
        return r;
    serve_client(s, fds[1]);
    return fds[0];
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void stop(bq_server_t *s, const char *why)
{
    if (s->stopping)
        return;
    s->stopping = true;
    bq_log(BQ_LOG_INFO, "shutting down", "signal=%s", why);
    bq_listen_close(&s->listener);
    bq_clients_close_all(&s->clients);
    bq_binlog_stop(s->binlog);
    bq_admin_routes_stop(&s->admin_node, &s->admin);
    bq_cluster_close(s->cluster);
    close_handle((uv_handle_t *)&s->timer);
    close_handle((uv_handle_t *)&s->prepare);
    close_handle((uv_handle_t *)&s->idle);
    close_handle((uv_handle_t *)&s->sig_term);
    close_handle((uv_handle_t *)&s->sig_int);
    close_handle((uv_handle_t *)&s->sig_usr1);
}

static void on_signal(uv_signal_t *h, int signum)
{
    bq_server_t *s = h->data;

    if (signum == SIGUSR1) {
        s->drain_signal = true;
        bq_engine_set_draining(s->engine, true);
        bq_logm(BQ_LOG_INFO, "entering drain mode");
        return;
    }
    stop(s, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static int start_signal(bq_server_t *s, uv_signal_t *h, int signum)
{
    int r = uv_signal_init(&s->loop, h);
    h->data = s;
    return r ? r : uv_signal_start(h, on_signal, signum);
}

/* Initialises the timer, prepare, idle and signal handles. */
static int start_handles(bq_server_t *s)
{
    int r = uv_timer_init(&s->loop, &s->timer);
    if (r == 0)
        r = uv_idle_init(&s->loop, &s->idle);
    if (r == 0)
        r = uv_prepare_init(&s->loop, &s->prepare);
    s->timer.data = s->prepare.data = s->idle.data = s;
    if (r == 0)
        r = uv_prepare_start(&s->prepare, on_prepare);
    if (r == 0)
        r = start_signal(s, &s->sig_term, SIGTERM);
    if (r == 0)
        r = start_signal(s, &s->sig_int, SIGINT);
    if (r == 0)
        r = start_signal(s, &s->sig_usr1, SIGUSR1);
    if (r != 0)
        bq_log(BQ_LOG_ERROR, "cannot set up the event loop", "err=\"%s\"", uv_strerror(r));
    return r;
}

static void server_info(void *arg, bq_server_info_t *info)
{
    bq_server_t *s = arg;
    bq_sysinfo_fill(&s->info, info);
    if (s->binlog)
        bq_binlog_fill_info(s->binlog, info);
    if (s->cluster)
        bq_cluster_fill_info(s->cluster, info);
}

static bq_room_t log_room(void *arg, size_t bytes, bool is_delete)
{
    bq_server_t *s = arg;
    /* Too few standbys in sync, fenced, handing over, since the last check:
     * refused (a put gets DRAINING); the drain state follows on the next
     * feed or release, outside the engine. */
    if (bq_cluster_refusal(s->cluster))
        return BQ_ROOM_REFUSED;
    return bq_binlog_room(s->binlog, bytes, is_delete);
}

static uint32_t log_record(void *arg, const bq_log_entry_t *entry)
{
    bq_server_t *s = arg;
    return bq_binlog_log(s->binlog, entry);
}

static bq_engine_t *make_engine(bq_server_t *s, const bq_flags_t *f)
{
    bq_engine_config_t cfg = {.max_job_size = (uint32_t)f->max_job_size};
    bq_engine_hooks_t hooks = {
        .send = bq_conn_send,
        .wake = bq_conn_wake,
        .server_info = server_info,
        .command = bq_log_enabled(BQ_LOG_TRACE) ? bq_conn_command : NULL,
        /* The binlog itself comes later, after -u (bq_server_start_binlog). */
        .log_room = f->binlog_dir ? log_room : NULL,
        .log = f->binlog_dir ? log_record : NULL,
        .arg = s,
    };
    return bq_engine_new(&cfg, &hooks);
}

int bq_server_init(bq_server_t *s, const bq_flags_t *f)
{
    memset(s, 0, sizeof *s);
    bq_clients_init(&s->clients);
    s->listener.fd = s->listener.spare_fd = -1;
    int r = uv_loop_init(&s->loop);
    if (r != 0) {
        bq_log(BQ_LOG_ERROR, "cannot create the event loop", "err=\"%s\"", uv_strerror(r));
        return BQ_SERVER_EINIT;
    }
    s->loop.data = s;
    /* Counters carried across the re-exec of a role change. */
    bq_metrics_counters_import_env();
    if (bq_sysinfo_init(&s->info, f->binlog_size) != 0)
        return BQ_SERVER_ESYSINFO;
    s->engine = make_engine(s, f);
    if (!s->engine) {
        bq_logm(BQ_LOG_ERROR, "out of memory creating the engine");
        return BQ_SERVER_EINIT;
    }
    if (bq_listen_open(&s->listener, &s->loop, f->addr, f->port, f->addr_given || f->port_given,
                       on_accept, s) != 0)
        return BQ_SERVER_ELISTEN;
    s->clients.loop = &s->loop;
    s->clients.engine = s->engine;
    s->clients.is_unix = s->listener.is_unix;
    s->clients.now = clients_now;
    s->clients.before_feed = clients_before_feed;
    s->clients.arg = s;
    return start_handles(s) == 0 ? 0 : BQ_SERVER_EINIT;
}

/* The cluster's release point, refusal or pause may have changed (pushed
 * by it, host.released): replies up to lsn may leave. */
static void cluster_released(void *arg, uint64_t lsn)
{
    bq_server_t *s = arg;
    if (s->stopping)
        return;
    set_refusal(s);
    bq_clients_release(&s->clients, lsn);
}

/* The binlog released more replies: in a cluster the cluster decides how
 * far they may leave (it calls cluster_released); alone, that far. */
static void on_released(void *arg)
{
    bq_server_t *s = arg;
    if (s->cluster)
        bq_cluster_synced(s->cluster);
    else if (!s->stopping)
        bq_clients_release(&s->clients, bq_binlog_release_lsn(s->binlog));
}

static void on_written(void *arg)
{
    bq_server_t *s = arg;
    if (s->cluster)
        bq_cluster_written(s->cluster);
}

int bq_server_start_binlog(bq_server_t *s, const bq_flags_t *f)
{
    if (!f->binlog_dir)
        return 0;
    bq_binlog_config_t cfg = {
        .dir = f->binlog_dir,
        .seg_size = f->binlog_size,
        .sync = !f->want_sync      ? BQ_BINLOG_SYNC_NEVER
                : f->fsync_ms == 0 ? BQ_BINLOG_SYNC_ALWAYS
                                   : BQ_BINLOG_SYNC_TIMED,
        .fsync_ms = f->fsync_ms,
        .skip_corrupt = f->skip_corrupt,
        .follower = f->role == BQ_ROLE_STANDBY || f->role == BQ_ROLE_WITNESS,
        .new_epoch = f->role == BQ_ROLE_PRIMARY,
        .min_epoch = s->min_epoch,
        .node_id = f->node_id,
        .cluster_id = f->cluster_id,
        .standalone = f->role == BQ_ROLE_SINGLE,
    };
    int r = bq_binlog_open(&s->binlog, &s->loop, &cfg);
    if (r == 0) {
        bq_binlog_on_release(s->binlog, on_released, s);
        bq_binlog_on_write(s->binlog, on_written, s);
        r = bq_binlog_start(s->binlog, s->engine, bq_clock_now());
    }
    if (r == 0) {
        s->clients.binlog = s->binlog;
        s->clients.release_lsn = bq_binlog_release_lsn(s->binlog);
    }
    if (r == BQ_BINLOG_EREPLAY)
        return BQ_SERVER_EREPLAY;
    return r == 0 ? 0 : BQ_SERVER_EBINLOG;
}

/* A client of a primary that steps down goes on through the proxy. */
static int take_client(void *arg, const bq_conn_handover_t *h)
{
    bq_server_t *s = arg;
    return bq_cluster_take_client(s->cluster, h->fd, h->use, h->watch, h->nwatch, h->input, h->len);
}

/* The cluster changed this node's role in place: a primary turned standby
 * hands its clients to the proxy, held for the new primary with their
 * sessions, or closes them (their reservations go back, as on a
 * disconnect); a standby turned primary serves new clients itself and runs
 * the engine's timers from the next loop turn. */
static void cluster_role_changed(void *arg, bool to_standby)
{
    bq_server_t *s = arg;
    if (!to_standby)
        return;
    bq_engine_set_writes_paused(s->engine, false); /* a follower's engine takes no commands */
    size_t closed;
    size_t n = bq_clients_hand_over(&s->clients, take_client, s, &closed);
    if (n + closed > 0)
        bq_log(BQ_LOG_INFO, "clients held for the new primary", "clients=%zu closed=%zu", n,
               closed);
}

/* A client this node proxied is served here now that it is the primary. */
static void cluster_adopt(void *arg, int fd, const char *input, size_t len, size_t restores)
{
    bq_server_t *s = arg;
    bq_conn_adopt(&s->clients, fd, input, len, restores);
}

int bq_server_start_cluster(bq_server_t *s, const bq_flags_t *f, const bq_failover_plan_t *plan,
                            char **argv)
{
    bq_cluster_host_t host = {.loop = &s->loop,
                              .engine = s->engine,
                              .binlog = s->binlog,
                              .listener = &s->listener,
                              .released = cluster_released,
                              .role_changed = cluster_role_changed,
                              .adopt = cluster_adopt,
                              .arg = s};
    if (f->role != BQ_ROLE_SINGLE && bq_cluster_start(&s->cluster, &host, f, plan, argv) != 0)
        return BQ_SERVER_EINIT;
    s->admin_node = (bq_admin_node_t){.loop = &s->loop,
                                      .engine = s->engine,
                                      .binlog = s->binlog,
                                      .cluster = s->cluster,
                                      .open_client = open_own_client,
                                      .arg = s};
    return bq_admin_routes_start(&s->admin_node, f, &s->admin) == 0 ? 0 : BQ_SERVER_EINIT;
}

void bq_server_run(bq_server_t *s)
{
    uv_run(&s->loop, UV_RUN_DEFAULT);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    close_handle(h);
}

void bq_server_free(bq_server_t *s)
{
    bq_listen_close(&s->listener);
    bq_binlog_stop(s->binlog);
    bq_admin_routes_stop(&s->admin_node, &s->admin);
    bq_cluster_close(s->cluster);
    if (s->loop.data == s) {
        /* After a failed init some handles may still be open. */
        uv_walk(&s->loop, close_walk, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
    }
    bq_cluster_free(s->cluster);
    s->cluster = NULL;
    bq_binlog_free(s->binlog);
    s->binlog = NULL;
    if (s->engine)
        bq_engine_free(s->engine);
    s->engine = NULL;
}
