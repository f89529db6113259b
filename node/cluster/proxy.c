/* The standby's client proxy (see proxy.h). Each proxied connection is a
 * pair of TCP handles, the accepted client and a connection to the target
 * (the primary's client port), made when the client arrives: the target's
 * address is parsed when numeric, else resolved (replication/resolve.h) and its
 * addresses tried in turn (each on a fresh handle). Bytes read on one side
 * are copied into a write request on the other; until the target is
 * connected, the client's bytes collect in one buffer, sent as the first
 * write.
 *
 * Back-pressure: reading a side stops while more than 1 MiB waits to be
 * written to the other side (or collects for a target not connected yet),
 * and resumes when the other side's writes bring it below 256 KiB. At most
 * one read (64 KiB) more than the bound is held per direction.
 *
 * Closing: EOF from one side shuts down the other side's write half once
 * its queued writes are done (uv_shutdown), and copying goes on the other
 * way; the connection closes when both sides have sent EOF and both
 * shutdowns are done. An error on the client side or bq_proxy_close_all
 * closes both sides at once.
 *
 * Moving a client whose primary went away (held, restored on the next
 * one) and handing clients to this node are proxy_move.c's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/cluster/proxy_internal.h"

static void proxy_release(bq_proxy_t *p)
{
    free(p->host);
    free(p->port);
    free(p);
}

static void conn_maybe_free(pconn_t *c)
{
    if (c->handles > 0)
        return;
    bq_proxy_t *p = c->p;
    bq_resolve_free(c->addrs);
    free(c->early);
    bq_mirror_free(c->m);
    free(c);
    if (--p->live == 0 && p->dying)
        proxy_release(p);
}

void bq__proxy_on_closed(uv_handle_t *h)
{
    side_t *s = h->data;
    pconn_t *c = s->c;
    c->handles--;
    conn_maybe_free(c);
}

/* Closes both sides now; pending writes are dropped. */
void bq__proxy_conn_close(pconn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    bq_list_remove(&c->link);
    c->p->count--;
    uv_close((uv_handle_t *)&c->client.tcp, bq__proxy_on_closed);
    if (!c->resetting) /* else its close callback sees closing */
        uv_close((uv_handle_t *)&c->target.tcp, bq__proxy_on_closed);
    bq_resolve_cancel(c->resolve); /* no callback comes after it */
    c->resolve = NULL;
}

void bq__proxy_conn_fail(pconn_t *c, const char *what, int err)
{
    bq_log(BQ_LOG_DEBUG, what, "err=\"%s\"", uv_strerror(err));
    bq__proxy_conn_close(c);
}

/* Bytes read from s that wait to be written to the other side. */
static size_t backlog(side_t *s)
{
    pconn_t *c = s->c;
    if (s == &c->client && !c->connected)
        return c->early ? c->early->len : 0;
    return uv_stream_get_write_queue_size(bq__proxy_stream(bq__proxy_other(s)));
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    side_t *s = h->data;
    (void)suggested;
    *buf = uv_buf_init(s->c->p->buf, READ_BUF_SIZE);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Pauses or resumes reading s according to its backlog. */
static void update_reading(side_t *s)
{
    if (s->c->closing || s->eof)
        return;
    size_t q = backlog(s);
    if (!s->paused && q > QUEUE_HIGH) {
        s->paused = true;
        uv_read_stop(bq__proxy_stream(s));
    } else if (s->paused && q < QUEUE_LOW) {
        s->paused = false;
        int r = uv_read_start(bq__proxy_stream(s), on_alloc, on_read);
        if (r != 0)
            bq__proxy_conn_fail(s->c, "proxy: cannot resume reading", r);
    }
}

static void on_write(uv_write_t *req, int status)
{
    side_t *dst = req->handle->data;
    free((wreq_t *)req);
    if (status == UV_ECANCELED || dst->c->closing)
        return;
    if (status < 0 && dst == &dst->c->target)
        bq__proxy_target_lost(dst->c, "proxy: write to the primary failed", status, false);
    else if (status < 0)
        bq__proxy_conn_fail(dst->c, "proxy: write failed", status);
    else
        update_reading(bq__proxy_other(dst));
}

/* Hands w (owned) to a write on dst. 0 or a libuv error (w freed). */
static int send_req(side_t *dst, wreq_t *w)
{
    uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
    int r = uv_write(&w->req, bq__proxy_stream(dst), &b, 1, on_write);
    if (r != 0)
        free(w);
    return r;
}

/* Appends data to the bytes kept for a target not connected yet. */
int bq__proxy_keep_early(pconn_t *c, const char *data, size_t n)
{
    size_t len = c->early ? c->early->len : 0;
    if (len + n > c->early_cap) {
        size_t cap = c->early_cap ? c->early_cap : READ_BUF_SIZE;
        while (cap < len + n)
            cap *= 2;
        wreq_t *w = realloc(c->early, sizeof *w + cap);
        if (!w)
            return UV_ENOMEM;
        w->len = len;
        c->early = w;
        c->early_cap = cap;
    }
    memcpy(c->early->data + len, data, n);
    c->early->len = len + n;
    return 0;
}

/* Passes n bytes read from s on to the other side, through the mirror;
 * the replies of restore commands stop here. */
static void forward(side_t *s, const char *data, size_t n)
{
    pconn_t *c = s->c;
    int r;
    if (s == &c->client) {
        bq_mirror_client(c->m, data, n);
    } else {
        bool restoring = bq_mirror_restoring(c->m);
        size_t drop = bq_mirror_server(c->m, data, n);
        if (restoring && bq_mirror_lost(c->m)) {
            bq__proxy_conn_fail(c, "proxy: the new primary refused to restore a session",
                                UV_EPROTO);
            return;
        }
        data += drop;
        n -= drop;
        if (n == 0)
            return;
    }
    if (s == &c->client && !c->connected) {
        r = bq__proxy_keep_early(c, data, n);
    } else {
        wreq_t *w = malloc(sizeof *w + n);
        if (!w) {
            r = UV_ENOMEM;
        } else {
            w->len = n;
            memcpy(w->data, data, n);
            r = send_req(bq__proxy_other(s), w);
        }
    }
    if (r != 0)
        bq__proxy_conn_fail(c, "proxy: cannot pass bytes on", r);
    else
        update_reading(s);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    side_t *s = req->handle->data;
    pconn_t *c = s->c;
    if (status == UV_ECANCELED || c->closing)
        return;
    if (status < 0) {
        bq__proxy_conn_fail(c, "proxy: shutdown failed", status);
        return;
    }
    s->shut_done = true;
    if (c->client.eof && c->target.eof && c->client.shut_done && c->target.shut_done)
        bq__proxy_conn_close(c);
}

/* Shuts down the write half of s after its queued writes. */
void bq__proxy_shut_side(side_t *s)
{
    int r = uv_shutdown(&s->shutdown, bq__proxy_stream(s), on_shutdown);
    if (r != 0)
        bq__proxy_conn_fail(s->c, "proxy: cannot shut down", r);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    side_t *s = st->data;
    pconn_t *c = s->c;
    if (nread > 0) {
        forward(s, buf->base, (size_t)nread);
        if (s == &c->target && c->stale_at && !c->closing)
            bq__proxy_stale_reply(c);
    } else if (nread == UV_EOF && s == &c->target) {
        bq__proxy_target_lost(c, "proxy: the primary closed the connection", 0, true);
    } else if (nread < 0 && s == &c->target) {
        bq__proxy_target_lost(c, "proxy: read from the primary failed", (int)nread, false);
    } else if (nread == UV_EOF) {
        s->eof = true;
        uv_read_stop(st);
        /* A target still connecting is shut down once connected. */
        if (c->connected)
            bq__proxy_shut_side(bq__proxy_other(s));
    } else if (nread < 0) {
        bq__proxy_conn_fail(c, "proxy: read failed", (int)nread);
    }
}

static void try_next_cb(uv_handle_t *h);

/* Connecting to the current address failed with err: tries the next one
 * the lookup returned (on a fresh handle), or gives up and closes c. */
static void connect_failed(pconn_t *c, int err)
{
    bq_log(BQ_LOG_DEBUG, "proxy: connect failed", "err=\"%s\" more=%d", uv_strerror(err),
           c->next_addr != NULL);
    if (c->next_addr) {
        c->resetting = true;
        uv_close((uv_handle_t *)&c->target.tcp, try_next_cb);
        return;
    }
    if (!c->held_at)
        bq_log_limited(&c->p->limit, BQ_LOG_WARN, "proxy: cannot connect to the primary",
                       "addr=\"%s\" port=\"%s\" err=\"%s\"", c->p->host, c->p->port,
                       uv_strerror(err));
    bq__proxy_target_lost(c, "proxy: cannot connect to the primary", err, false);
}

static void on_connected(uv_connect_t *req, int status)
{
    pconn_t *c = req->data;
    if (status == UV_ECANCELED || c->closing)
        return;
    if (status < 0) {
        connect_failed(c, status);
        return;
    }
    c->connected = true;
    c->connecting = false;
    if (c->held_at)
        bq_log(BQ_LOG_DEBUG, "proxy: held client moved to the primary", "held_ms=%llu",
               (unsigned long long)(uv_now(c->p->loop) - c->held_at));
    c->held_at = 0;
    bq_logm(BQ_LOG_DEBUG, "proxy: connected to the primary");
    uv_tcp_nodelay(&c->target.tcp, 1);
    int r = 0;
    if (c->early) {
        wreq_t *w = c->early;
        c->early = NULL;
        c->early_cap = 0;
        r = send_req(&c->target, w);
    }
    if (r == 0)
        r = uv_read_start(bq__proxy_stream(&c->target), on_alloc, on_read);
    if (r != 0) {
        bq__proxy_conn_fail(c, "proxy: cannot start on the primary connection", r);
        return;
    }
    if (c->client.eof)
        bq__proxy_shut_side(&c->target);
    else
        update_reading(&c->client);
}

static int connect_to(pconn_t *c, const struct sockaddr *addr)
{
    if (bq_log_enabled(BQ_LOG_DEBUG)) {
        char ip[64] = "";
        if (addr->sa_family == AF_INET)
            uv_ip4_name((const struct sockaddr_in *)addr, ip, sizeof ip);
        else
            uv_ip6_name((const struct sockaddr_in6 *)addr, ip, sizeof ip);
        bq_log(BQ_LOG_DEBUG, "proxy: connecting to the primary", "ip=%s", ip);
    }
    c->connect.data = c;
    return uv_tcp_connect(&c->connect, &c->target.tcp, addr, on_connected);
}

/* Connects to c->next_addr and advances it. */
static void try_next(pconn_t *c)
{
    const struct addrinfo *ai = c->next_addr;
    c->next_addr = ai->ai_next;
    int r = connect_to(c, ai->ai_addr);
    if (r != 0)
        connect_failed(c, r);
}

/* The target handle h closed to be made again: false (its close counted)
 * when its connection is closing meanwhile, else *cp has a fresh one. */
bool bq__proxy_target_reopened(uv_handle_t *h, pconn_t **cp)
{
    side_t *s = h->data;
    pconn_t *c = *cp = s->c;
    c->resetting = false;
    if (c->closing) {
        bq__proxy_on_closed(h);
        return false;
    }
    uv_tcp_init(c->p->loop, &c->target.tcp); /* AF_UNSPEC: cannot fail */
    c->target.tcp.data = &c->target;
    c->target.eof = c->target.paused = c->target.shut_done = false;
    return true;
}

/* The target handle closed after a failed attempt: a fresh one tries the
 * next address, unless c is closing (then this was its last close). */
static void try_next_cb(uv_handle_t *h)
{
    pconn_t *c;
    if (bq__proxy_target_reopened(h, &c))
        try_next(c);
}

static void on_resolved(void *arg, int status, struct addrinfo *res)
{
    pconn_t *c = arg;
    c->resolve = NULL;
    c->addrs = c->next_addr = res;
    if (status != 0) {
        bq_log_limited(&c->p->limit, BQ_LOG_WARN, "proxy: cannot resolve the primary",
                       "addr=\"%s\" port=\"%s\" err=\"%s\"", c->p->host, c->p->port,
                       uv_strerror(status));
        bq__proxy_target_lost(c, "proxy: cannot resolve the primary", status, false);
    } else {
        try_next(c);
    }
}

/* Starts connecting c to the target: at once for a numeric address, else
 * after resolving it. 0 or a libuv error. */
int bq__proxy_start_connect(pconn_t *c)
{
    const bq_proxy_t *p = c->p;
    c->connecting = true;
    c->gen = p->gen;
    char *end;
    errno = 0;
    long port = strtol(p->port, &end, 10);
    bool numeric_port = errno == 0 && *end == '\0' && end != p->port && port > 0 && port < 65536;
    struct sockaddr_storage ss;
    if (numeric_port && (uv_ip4_addr(p->host, (int)port, (struct sockaddr_in *)&ss) == 0 ||
                         uv_ip6_addr(p->host, (int)port, (struct sockaddr_in6 *)&ss) == 0))
        return connect_to(c, (const struct sockaddr *)&ss);
    return bq_resolve_start(p->loop, p->host, p->port, RESOLVE_MS, on_resolved, c, &c->resolve);
}

static void timer_closed(uv_handle_t *h)
{
    bq_proxy_t *p = h->data;
    if (--p->live == 0 && p->dying)
        proxy_release(p);
}

bq_proxy_t *bq_proxy_new(uv_loop_t *loop, uint64_t hold_ms)
{
    bq_proxy_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->loop = loop;
    p->hold_ms = hold_ms;
    bq_list_init(&p->conns);
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->live = 1; /* the timer */
    return p;
}

void bq_proxy_set_target(bq_proxy_t *p, const char *host, const char *port)
{
    if (!host || !port)
        host = port = NULL;
    bool same = host ? p->host && strcmp(host, p->host) == 0 && strcmp(port, p->port) == 0
                     : p->host == NULL;
    if (same)
        return;
    free(p->host);
    free(p->port);
    p->host = host ? strdup(host) : NULL;
    p->port = host ? strdup(port) : NULL;
    if (host && (!p->host || !p->port)) {
        bq_logm(BQ_LOG_ERROR, "proxy: out of memory; no primary to proxy to");
        free(p->host);
        free(p->port);
        p->host = p->port = NULL;
    }
    if (p->host)
        p->lost_at = 0;
    if (p->host)
        bq_log(BQ_LOG_INFO, "proxy: clients go to the primary", "addr=\"%s\" port=\"%s\"", p->host,
               p->port);
    else
        bq_logm(BQ_LOG_INFO, "proxy: no primary known; clients are held for one");
    p->gen++;
    /* Clients of the old target move (or close); held ones go to the new. */
    bq_list_t *l, *next;
    for (l = p->conns.next; l != &p->conns; l = next) {
        next = l->next;
        pconn_t *c = BQ_CONTAINER_OF(l, pconn_t, link);
        if (!c->held_at)
            bq__proxy_primary_changed(c);
        else if (p->host && !c->resetting)
            bq__proxy_start_held(c);
    }
}

pconn_t *bq__proxy_conn_new(bq_proxy_t *p, int fd)
{
    pconn_t *c = !p->dying && !p->closed ? calloc(1, sizeof *c) : NULL;
    if (c)
        c->m = bq_mirror_new();
    if (!c || !c->m) {
        if (!p->dying && !p->closed)
            bq_logm(BQ_LOG_WARN, "proxy: out of memory; connection closed");
        free(c);
        close(fd);
        return NULL;
    }
    c->p = p;
    c->gen = p->gen;
    c->client.c = c->target.c = c;
    /* With AF_UNSPEC no socket is made yet: these cannot fail. */
    uv_tcp_init(p->loop, &c->client.tcp);
    uv_tcp_init(p->loop, &c->target.tcp);
    c->client.tcp.data = &c->client;
    c->target.tcp.data = &c->target;
    c->handles = 2;
    p->live++;
    p->count++;
    bq_list_push(&p->conns, &c->link);
    int r = uv_tcp_open(&c->client.tcp, fd);
    if (r != 0)
        close(fd);
    else
        uv_tcp_nodelay(&c->client.tcp, 1);
    if (r == 0)
        r = uv_read_start(bq__proxy_stream(&c->client), on_alloc, on_read);
    if (r != 0) {
        bq__proxy_conn_fail(c, "proxy: cannot use the client socket", r);
        return NULL;
    }
    return c;
}

void bq_proxy_accept(bq_proxy_t *p, int fd)
{
    pconn_t *c = bq__proxy_conn_new(p, fd);
    if (!c)
        return;
    if (!p->host) { /* no primary known: it waits for one */
        bq__proxy_hold_new(c);
        return;
    }
    int r = bq__proxy_start_connect(c);
    bq_log(BQ_LOG_DEBUG, "proxy: client accepted", "fd=%d primary=\"%s\"", fd, p->host);
    if (r != 0) {
        bq_log_limited(&p->limit, BQ_LOG_WARN, "proxy: cannot reach the primary",
                       "addr=\"%s\" port=\"%s\" err=\"%s\"", p->host, p->port, uv_strerror(r));
        bq__proxy_conn_close(c);
    }
}

size_t bq_proxy_count(const bq_proxy_t *p)
{
    return p->count;
}

void bq_proxy_close_all(bq_proxy_t *p)
{
    while (!bq_list_empty(&p->conns))
        bq__proxy_conn_close(BQ_CONTAINER_OF(p->conns.next, pconn_t, link));
}

void bq_proxy_close(bq_proxy_t *p)
{
    if (!p || p->closed)
        return;
    p->closed = true;
    bq_proxy_close_all(p);
    uv_close((uv_handle_t *)&p->timer, timer_closed);
}

void bq_proxy_free(bq_proxy_t *p)
{
    if (!p)
        return;
    p->dying = true;
    bq_proxy_close(p);
    if (p->live == 0)
        proxy_release(p);
}
