/* The standby's proxy when its primary goes away (proxy.h; docs/failover.md,
 * "What a client sees"): each connection's session is mirrored
 * (protocol/mirror.h). When its target goes away and nothing durable is in
 * flight, the client is held instead of closed: its target handle is
 * closed and made again, what it sends meanwhile collects as before a
 * first connect, and the next target (a new primary, or the same one again
 * every RETRY_MS) gets first the commands that restore the session (their
 * replies are dropped by proxy.c), the commands in flight again and the
 * partial command line. A client held longer than the hold bound, or with
 * a change in flight, is closed: a reply is never silently lost.
 * bq_proxy_adopt_all hands held and connected clients to the node itself
 * when it becomes the primary. */
#include "node/cluster/proxy_internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The target handle closed after the target went away: a fresh one waits
 * for the next target (at once when the target changed meanwhile). */
static void held_reset_cb(uv_handle_t *h)
{
    pconn_t *c;
    if (bq__proxy_target_reopened(h, &c) && c->p->host && c->gen != c->p->gen)
        bq__proxy_start_held(c);
}

/* Closes the target handle (and any lookup) of a held client. */
static void reset_target(pconn_t *c)
{
    c->connected = c->connecting = false;
    bq_resolve_cancel(c->resolve);
    c->resolve = NULL;
    bq_resolve_free(c->addrs);
    c->addrs = c->next_addr = NULL;
    c->resetting = true;
    uv_close((uv_handle_t *)&c->target.tcp, held_reset_cb);
}

/* Arms the hold timer (retries, bounds) if it is not running. */
static void arm_timer(bq_proxy_t *p)
{
    if (!uv_is_active((uv_handle_t *)&p->timer))
        uv_timer_start(&p->timer, bq__proxy_on_hold_timer, RETRY_MS, RETRY_MS);
}

/* Marks c held (its target handle is fresh) and arms the hold timer. */
static void mark_held(pconn_t *c)
{
    c->held_at = uv_now(c->p->loop) | 1;
    c->stale_at = 0;
    arm_timer(c->p);
}

void bq__proxy_primary_changed(pconn_t *c)
{
    /* A change in flight on a live connection: its reply will come (the
     * old primary answers it, or hands the client on to the new one). */
    if (c->connected && !c->client.eof && !c->p->dying && !bq_mirror_lost(c->m) &&
        !bq_mirror_movable(c->m)) {
        if (!c->stale_at)
            c->stale_at = uv_now(c->p->loop) | 1;
        arm_timer(c->p);
        bq_logm(BQ_LOG_DEBUG, "proxy: client stays on the old primary until its reply");
        return;
    }
    bq__proxy_target_lost(c, "proxy: the primary changed", 0, false);
}

void bq__proxy_stale_reply(pconn_t *c)
{
    if (bq_mirror_movable(c->m))
        bq__proxy_target_lost(c, "proxy: the primary changed", 0, false);
}

/* A client that never reached a target (its bytes are all in early) waits
 * for one: nothing to restore, nothing to send again. */
void bq__proxy_hold_new(pconn_t *c)
{
    c->restores_kept = 0;
    mark_held(c);
    bq_logm(BQ_LOG_DEBUG, "proxy: new client held for the primary");
}

/* Holds client c for the next target: what restores its session there
 * goes first into the bytes kept for it. */
static void hold(pconn_t *c)
{
    char *bytes = NULL;
    size_t len = 0, restores = 0;
    int r = bq_mirror_restore(c->m, &bytes, &len, &restores);
    free(c->early);
    c->early = NULL;
    c->early_cap = 0;
    if (r != 0 || (len > 0 && bq__proxy_keep_early(c, bytes, len) != 0)) {
        free(bytes);
        bq__proxy_conn_close(c);
        return;
    }
    free(bytes);
    c->restores_kept = restores;
    mark_held(c);
    reset_target(c);
    bq_log(BQ_LOG_DEBUG, "proxy: client held for the next primary", "restores=%zu bytes=%zu",
           restores, len);
}

/* The target of c went away (what: why, err: the libuv error or 0). A held
 * client whose retry failed, or one that never reached a target, waits; a
 * connected one with no change in flight is held; any other is closed (or,
 * at the target's EOF, shut down gracefully: its last replies still reach
 * the client). */
void bq__proxy_target_lost(pconn_t *c, const char *what, int err, bool eof)
{
    if (c->closing)
        return;
    if (c->held_at || (!c->connected && !c->client.eof && !c->p->dying)) {
        bq_log(BQ_LOG_DEBUG, what, "err=\"%s\" held=1", err ? uv_strerror(err) : "eof");
        if (!c->held_at)
            bq__proxy_hold_new(c);
        reset_target(c);
        return;
    }
    if (c->connected && !c->client.eof && !c->p->dying && bq_mirror_movable(c->m)) {
        hold(c);
        return;
    }
    if (eof && c->connected) {
        c->target.eof = true;
        uv_read_stop(bq__proxy_stream(&c->target));
        bq__proxy_shut_side(&c->client);
        return;
    }
    bq__proxy_conn_fail(c, what, err ? err : UV_EOF);
}

/* Connects held client c to the current target. */
void bq__proxy_start_held(pconn_t *c)
{
    int r = bq__proxy_start_connect(c);
    if (r != 0)
        bq__proxy_target_lost(c, "proxy: cannot reach the primary", r, false);
}

/* A held client's bound expired: each command it sent that got no reply
 * is answered INTERNAL_ERROR (as far as its socket takes them now), then
 * it is closed. */
static void fail_held(pconn_t *c)
{
    static const char err[] = "INTERNAL_ERROR\r\n";
    size_t n = bq_mirror_unanswered(c->m);
    char *buf = n > 0 ? malloc(n * (sizeof err - 1)) : NULL;
    if (buf) {
        for (size_t i = 0; i < n; i++)
            memcpy(buf + i * (sizeof err - 1), err, sizeof err - 1);
        uv_buf_t b = uv_buf_init(buf, (unsigned)(n * (sizeof err - 1)));
        uv_try_write(bq__proxy_stream(&c->client), &b, 1);
        free(buf);
    }
    bq__proxy_conn_close(c);
}

/* Every RETRY_MS while clients are held: each tries the target again, and
 * one held longer than the bound is closed. */
void bq__proxy_on_hold_timer(uv_timer_t *t)
{
    bq_proxy_t *p = t->data;
    uint64_t now = uv_now(p->loop);
    size_t held = 0;
    bq_list_t *l, *next;
    for (l = p->conns.next; l != &p->conns; l = next) {
        next = l->next;
        pconn_t *c = BQ_CONTAINER_OF(l, pconn_t, link);
        if (c->stale_at && now - c->stale_at > p->hold_ms) {
            bq_log_limited(&p->limit, BQ_LOG_WARN,
                           "proxy: no reply from the old primary in time; client closed",
                           "stale_ms=%llu", (unsigned long long)(now - c->stale_at));
            bq__proxy_conn_close(c);
            continue;
        }
        held += c->stale_at != 0;
        if (!c->held_at)
            continue;
        if (now - c->held_at > p->hold_ms) {
            bq_log_limited(&p->limit, BQ_LOG_WARN,
                           "proxy: no primary in time; client answered INTERNAL_ERROR and closed",
                           "held_ms=%llu", (unsigned long long)(now - c->held_at));
            fail_held(c);
            continue;
        }
        held++;
        if (p->host && !c->connecting && !c->resetting)
            bq__proxy_start_held(c);
    }
    if (held == 0)
        uv_timer_stop(t);
}

/* Hands client c to adopt with its restored session; false when c cannot
 * be moved (it is then left as it is). */
static bool adopt_one(pconn_t *c, bq_proxy_adopt_fn adopt, void *arg)
{
    if (c->client.eof || (!c->held_at && !bq_mirror_movable(c->m)))
        return false;
    char *bytes = NULL;
    size_t len = 0, restores = c->restores_kept;
    uv_os_fd_t fd;
    /* connected: restore its session as a move would; held: what it kept
     * already starts with its restore */
    if ((!c->held_at && bq_mirror_restore(c->m, &bytes, &len, &restores) != 0) ||
        uv_fileno((uv_handle_t *)&c->client.tcp, &fd) != 0) {
        free(bytes);
        return false;
    }
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* not into a re-exec */
    if (dup_fd < 0) {
        free(bytes);
        return false;
    }
    wreq_t *kept = c->held_at ? c->early : NULL; /* taken over: conn_close frees early */
    if (kept) {
        c->early = NULL;
        c->early_cap = 0;
    }
    bq__proxy_conn_close(c);
    adopt(arg, dup_fd, kept ? kept->data : bytes ? bytes : "", kept ? kept->len : len, restores);
    free(bytes);
    free(kept);
    return true;
}

int bq_proxy_take(bq_proxy_t *p, int fd, const char *use, const char *const *watch, size_t nwatch,
                  const char *input, size_t len)
{
    pconn_t *c = bq__proxy_conn_new(p, fd);
    if (!c)
        return -1;
    char *bytes = NULL;
    size_t n = 0, restores = 0;
    if (bq_mirror_set_session(c->m, use, watch, nwatch) != 0 ||
        bq_mirror_restore(c->m, &bytes, &n, &restores) != 0 ||
        (n > 0 && bq__proxy_keep_early(c, bytes, n) != 0) ||
        (len > 0 && bq__proxy_keep_early(c, input, len) != 0)) {
        free(bytes);
        bq_logm(BQ_LOG_WARN, "proxy: out of memory; client closed");
        bq__proxy_conn_close(c);
        return -1;
    }
    free(bytes);
    bq_mirror_client(c->m, input, len);
    c->restores_kept = restores;
    mark_held(c);
    if (p->host)
        bq__proxy_start_held(c);
    return 0;
}

void bq_proxy_primary_lost(bq_proxy_t *p)
{
    if (!p->host && !p->lost_at)
        p->lost_at = uv_now(p->loop) | 1;
}

bool bq_proxy_riding(const bq_proxy_t *p)
{
    return !p->host && p->lost_at && uv_now(p->loop) - p->lost_at <= p->hold_ms;
}

size_t bq_proxy_adopt_all(bq_proxy_t *p, bq_proxy_adopt_fn adopt, void *arg)
{
    size_t n = 0;
    free(p->host);
    free(p->port);
    p->host = p->port = NULL;
    p->gen++;
    while (!bq_list_empty(&p->conns)) {
        pconn_t *c = BQ_CONTAINER_OF(p->conns.next, pconn_t, link);
        if (adopt_one(c, adopt, arg))
            n++;
        else
            bq__proxy_conn_close(c);
    }
    if (n > 0)
        bq_log(BQ_LOG_INFO, "proxy: proxied clients now served here", "clients=%zu", n);
    return n;
}
