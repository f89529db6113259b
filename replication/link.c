/* A replication link on libuv (see link.h): a uv_tcp_t whose bytes go
 * through the TLS channel (replication/tls.c) or, in plaintext mode,
 * straight to the wire decoder (replication/wire.c), which hands complete
 * messages to on_message.
 *
 * Output: the ciphertext the channel produces during one operation is
 * gathered in one buffer, then handed to uv_write with a request that owns
 * it; the bytes of unfinished writes are counted for bq_link_queued and the
 * water marks.
 *
 * Closing: every failure and bq_link_close end in close_link, which acts
 * once. It stops reading and the timers, sends a close_notify when TLS is
 * established and shuts the socket down, so that queued messages (a Refuse
 * sent just before closing, an alert) still leave; a linger timer bounds
 * that. A name lookup in progress is cancelled (replication/resolve.h).
 * Then the three handles are closed and, once every close callback has
 * come back, on_close runs and the link is freed. So the link stays valid inside its own callbacks, whatever they
 * do, and on_close always comes from the loop. */
#include "replication/link.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/resolve.h"
#include "replication/tls.h"
#include "replication/wire.h"

/* How long a closing link waits for its queued bytes to leave. */
#define LINGER_MS 2000
/* A lookup's bound when the link has no connect deadline. */
#define RESOLVE_MS 5000

struct bq_link {
    uv_tcp_t tcp;
    uv_timer_t deadline; /* connect + handshake; the linger once closing */
    uv_timer_t idle;
    bq_resolve_t *resolve; /* the lookup of the peer's name, until its callback */
    uv_connect_t connect;
    uv_shutdown_t shutdown;
    struct addrinfo *addrs, *next; /* resolved; next is tried after a failure */
    bq_link_config_t cfg;
    bq_link_callbacks_t cbs;
    void *arg;
    bq_tls_t *tls; /* NULL in plaintext */
    bq_wire_decoder_t dec;
    uint8_t *out; /* ciphertext gathered during one TLS operation */
    size_t out_len, out_cap;
    bool out_failed; /* out could not grow */
    size_t queued;   /* bytes of unfinished uv_writes */
    bool above_high, connected, open, closing, handles_closing;
    int pending; /* close callbacks and resolutions still to come */
    char why[256];
    char addr[80];
    uint8_t rbuf[65536];
};

typedef struct wreq {
    uv_write_t req;
    bq_link_t *link;
    uint8_t *data; /* owned until the write callback */
    size_t len;
} wreq_t;

static void close_link(bq_link_t *l, const char *fmt, ...);

/* ---- closing --------------------------------------------------------- */

static void finish(bq_link_t *l)
{
    if (!l->handles_closing || l->pending > 0)
        return;
    if (l->cbs.on_close) /* NULL when its creation failed */
        l->cbs.on_close(l, l->why, l->arg);
    bq_tls_free(l->tls);
    bq_wire_decoder_free(&l->dec);
    bq_resolve_free(l->addrs);
    free(l->out);
    free(l);
}

static void handle_closed(uv_handle_t *h)
{
    bq_link_t *l = h->data;
    l->pending--;
    finish(l);
}

static void close_handles(bq_link_t *l)
{
    if (l->handles_closing)
        return;
    l->handles_closing = true;
    uv_handle_t *hs[] = {(uv_handle_t *)&l->tcp, (uv_handle_t *)&l->deadline,
                         (uv_handle_t *)&l->idle};
    for (size_t i = 0; i < 3; i++) {
        l->pending++;
        /* A tcp handle closing between two connect attempts is counted here:
         * its close callback (reopen) stands in for handle_closed. */
        if (!uv_is_closing(hs[i]))
            uv_close(hs[i], handle_closed);
    }
}

static void shutdown_done(uv_shutdown_t *req, int status)
{
    (void)status; /* the socket is closed next, whatever happened */
    close_handles(req->data);
}

static void linger_expired(uv_timer_t *t)
{
    close_handles(t->data);
}

static int flush_out(bq_link_t *l);

/* Starts closing the link for the reason fmt says; acts once. */
static void close_link(bq_link_t *l, const char *fmt, ...)
{
    if (l->closing)
        return;
    l->closing = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->why, sizeof l->why, fmt, ap);
    va_end(ap);
    uv_timer_stop(&l->idle);
    uv_timer_stop(&l->deadline);
    if (l->resolve) { /* no callback comes after a cancel */
        bq_resolve_cancel(l->resolve);
        l->resolve = NULL;
        l->pending--;
    }
    if (l->connected) {
        uv_read_stop((uv_stream_t *)&l->tcp);
        if (l->tls) {
            bq_tls_shutdown(l->tls);
            flush_out(l);
        }
        if (uv_shutdown(&l->shutdown, (uv_stream_t *)&l->tcp, shutdown_done) == 0) {
            uv_timer_start(&l->deadline, linger_expired, LINGER_MS, 0);
            return;
        }
    }
    close_handles(l);
}

/* ---- output ---------------------------------------------------------- */

static void write_done(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    bq_link_t *l = w->link;
    l->queued -= w->len;
    free(w->data);
    free(w);
    if (status < 0 && status != UV_ECANCELED) {
        close_link(l, "write: %s", uv_strerror(status));
    } else if (l->above_high && l->queued < BQ_LINK_LOW_WATER && !l->closing) {
        l->above_high = false;
        if (l->cbs.on_writable)
            l->cbs.on_writable(l, l->arg);
    }
}

/* Queues data[0..len) for the socket, taking ownership. 0, or -1 with the
 * link closing. */
static int queue_write(bq_link_t *l, uint8_t *data, size_t len)
{
    wreq_t *w = malloc(sizeof *w);
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    if (w)
        *w = (wreq_t){.link = l, .data = data, .len = len};
    if (!w || uv_write(&w->req, (uv_stream_t *)&l->tcp, &b, 1, write_done) < 0) {
        free(data);
        free(w);
        close_link(l, "cannot queue %zu bytes for the socket", len);
        return -1;
    }
    l->queued += len;
    if (l->queued > BQ_LINK_HIGH_WATER)
        l->above_high = true;
    return 0;
}

/* Queues the ciphertext gathered in l->out. 0, or -1 with the link closing. */
static int flush_out(bq_link_t *l)
{
    if (l->out_failed) {
        close_link(l, "out of memory");
        return -1;
    }
    if (l->out_len == 0)
        return 0;
    uint8_t *data = l->out;
    size_t len = l->out_len;
    l->out = NULL;
    l->out_len = l->out_cap = 0;
    return queue_write(l, data, len);
}

/* The channel's io->send: gathers ciphertext until flush_out. */
static void tls_send(void *arg, const uint8_t *data, size_t len)
{
    bq_link_t *l = arg;
    if (l->out_len + len > l->out_cap) {
        size_t cap = l->out_cap ? l->out_cap : 16384;
        while (cap < l->out_len + len)
            cap *= 2;
        uint8_t *p = realloc(l->out, cap);
        if (!p) {
            l->out_failed = true;
            return;
        }
        l->out = p;
        l->out_cap = cap;
    }
    memcpy(l->out + l->out_len, data, len);
    l->out_len += len;
}

/* ---- input ----------------------------------------------------------- */

static void open_link(bq_link_t *l)
{
    if (l->open || l->closing)
        return;
    l->open = true;
    uv_timer_stop(&l->deadline);
    l->cbs.on_open(l, l->arg);
}

/* Plaintext from the channel or the socket: each complete message goes to
 * on_message, until the link is closing. */
static void deliver(void *arg, const uint8_t *data, size_t len)
{
    bq_link_t *l = arg;
    open_link(l); /* TLS: on_open comes before the first message */
    while (len > 0 && !l->closing) {
        size_t used = 0;
        Bq__Repl__Message *msg = NULL;
        bq_wire_status_t st = bq_wire_decode(&l->dec, data, len, &used, &msg);
        data += used;
        len -= used;
        if (st == BQ_WIRE_MORE)
            return;
        if (st != BQ_WIRE_MESSAGE) {
            close_link(l, "wire: %s", bq_wire_status_name(st));
            return;
        }
        l->cbs.on_message(l, msg, l->arg);
        bq_wire_free(msg);
    }
}

static void idle_expired(uv_timer_t *t)
{
    bq_link_t *l = t->data;
    close_link(l, "timeout: nothing received for %llu ms", (unsigned long long)l->cfg.idle_ms);
}

/* The connect and handshake deadline; also opens an accepted plaintext link
 * from the loop. */
static void deadline_expired(uv_timer_t *t)
{
    bq_link_t *l = t->data;
    if (!l->tls && l->connected)
        open_link(l);
    else
        close_link(l, "timeout: link not established within %llu ms",
                   (unsigned long long)l->cfg.handshake_ms);
}

static void alloc_read(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    bq_link_t *l = h->data;
    (void)hint;
    *buf = uv_buf_init((char *)l->rbuf, sizeof l->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    bq_link_t *l = s->data;
    (void)buf;
    if (n == 0 || l->closing)
        return;
    if (n == UV_EOF) {
        close_link(l, "peer closed the connection");
        return;
    }
    if (n < 0) {
        close_link(l, "read: %s", uv_strerror((int)n));
        return;
    }
    if (l->cfg.idle_ms > 0)
        uv_timer_start(&l->idle, idle_expired, l->cfg.idle_ms, 0);
    if (!l->tls)
        deliver(l, l->rbuf, (size_t)n);
    else if (bq_tls_feed(l->tls, l->rbuf, (size_t)n) < 0)
        close_link(l, "tls: %s", bq_tls_error(l->tls)); /* also sends the alert */
    else if (!l->closing && flush_out(l) == 0 && bq_tls_established(l->tls))
        open_link(l);
}

/* ---- setting up ------------------------------------------------------ */

static void set_addr(bq_link_t *l, const struct sockaddr *sa)
{
    char ip[64] = "?";
    bool v6 = sa->sa_family == AF_INET6;
    uint16_t port = v6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
                       : ((const struct sockaddr_in *)sa)->sin_port;
    uv_ip_name(sa, ip, sizeof ip);
    snprintf(l->addr, sizeof l->addr, v6 ? "[%s]:%u" : "%s:%u", ip, ntohs(port));
}

/* The socket is connected: peer address, no Nagle, reading, idle deadline. */
static int start_stream(bq_link_t *l)
{
    struct sockaddr_storage ss;
    int sslen = (int)sizeof ss;
    l->connected = true;
    if (uv_tcp_getpeername(&l->tcp, (struct sockaddr *)&ss, &sslen) == 0)
        set_addr(l, (struct sockaddr *)&ss);
    int r = uv_tcp_nodelay(&l->tcp, 1);
    if (r == 0)
        r = uv_read_start((uv_stream_t *)&l->tcp, alloc_read, on_read);
    if (r == 0 && l->cfg.idle_ms > 0)
        uv_timer_start(&l->idle, idle_expired, l->cfg.idle_ms, 0);
    return r;
}

static bq_link_t *link_new(uv_loop_t *loop, bool server, const bq_link_config_t *cfg,
                           const bq_link_callbacks_t *cbs, void *arg)
{
    bq_link_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->cfg = *cfg;
    l->cbs = *cbs;
    l->arg = arg;
    bq_wire_decoder_init(&l->dec, cfg->max_message ? cfg->max_message : BQ_WIRE_MAX_DEFAULT);
    bq_tls_io_t io = {tls_send, deliver, l};
    if (cfg->tls)
        l->tls = bq_tls_new(cfg->tls, server, cfg->names, cfg->nnames, &io);
    if ((cfg->tls && !l->tls) || uv_tcp_init(loop, &l->tcp) < 0) {
        bq_tls_free(l->tls);
        free(l);
        return NULL;
    }
    uv_timer_init(loop, &l->deadline);
    uv_timer_init(loop, &l->idle);
    l->tcp.data = l->deadline.data = l->idle.data = l;
    l->connect.data = l->shutdown.data = l;
    return l;
}

/* Undoes a link whose creation failed: freed from the loop, no on_close. */
static int abandon(bq_link_t *l, int err)
{
    l->cbs.on_close = NULL;
    l->closing = true;
    close_handles(l);
    return err;
}

int bq_link_accept(uv_loop_t *loop, uv_stream_t *server, const bq_link_config_t *cfg,
                   const bq_link_callbacks_t *cbs, void *arg, bq_link_t **out)
{
    *out = NULL;
    bq_link_t *l = link_new(loop, true, cfg, cbs, arg);
    if (!l)
        return UV_ENOMEM;
    int r = uv_accept(server, (uv_stream_t *)&l->tcp);
    if (r == 0)
        r = start_stream(l);
    if (r < 0)
        return abandon(l, r);
    if (!l->tls) /* plaintext: open at once, from the loop */
        uv_timer_start(&l->deadline, deadline_expired, 0, 0);
    else if (cfg->handshake_ms > 0)
        uv_timer_start(&l->deadline, deadline_expired, cfg->handshake_ms, 0);
    *out = l;
    return 0;
}

/* ---- connecting ------------------------------------------------------ */

static void connected(uv_connect_t *req, int status);

/* Connects to the next resolved address. */
static void try_next(bq_link_t *l)
{
    struct addrinfo *ai = l->next;
    l->next = ai->ai_next;
    set_addr(l, ai->ai_addr);
    int r = uv_tcp_connect(&l->connect, &l->tcp, ai->ai_addr, connected);
    if (r < 0)
        connected(&l->connect, r);
}

/* The tcp handle of a failed attempt is closed: a fresh one for the next. */
static void reopen(uv_handle_t *h)
{
    bq_link_t *l = h->data;
    if (l->closing) {
        handle_closed(h); /* close_handles counted this handle */
        return;
    }
    uv_tcp_init(l->tcp.loop, &l->tcp); /* cannot fail: no socket yet */
    l->tcp.data = l;
    try_next(l);
}

static void connected(uv_connect_t *req, int status)
{
    bq_link_t *l = req->data;
    if (l->closing)
        return;
    if (status < 0 && l->next) {
        uv_close((uv_handle_t *)&l->tcp, reopen);
        return;
    }
    if (status == 0)
        status = start_stream(l);
    if (status < 0)
        close_link(l, "connect %s: %s", l->addr, uv_strerror(status));
    else if (!l->tls)
        open_link(l);
    else if (bq_tls_start(l->tls) < 0)
        close_link(l, "tls: %s", bq_tls_error(l->tls));
    else
        flush_out(l);
}

static void resolved(void *arg, int status, struct addrinfo *res)
{
    bq_link_t *l = arg;
    l->resolve = NULL;
    l->pending--;
    if (status < 0) {
        close_link(l, "resolve %s: %s", l->addr, uv_strerror(status));
        return;
    }
    l->addrs = l->next = res;
    try_next(l);
}

int bq_link_connect(uv_loop_t *loop, const char *host, const char *port,
                    const bq_link_config_t *cfg, const bq_link_callbacks_t *cbs, void *arg,
                    bq_link_t **out)
{
    *out = NULL;
    bq_link_t *l = link_new(loop, false, cfg, cbs, arg);
    if (!l)
        return UV_ENOMEM;
    snprintf(l->addr, sizeof l->addr, "%s:%s", host, port);
    /* The lookup may take the whole connect deadline (the link closes then). */
    uint64_t ms = cfg->handshake_ms > 0 ? cfg->handshake_ms : RESOLVE_MS;
    int r = bq_resolve_start(loop, host, port, ms, resolved, l, &l->resolve);
    if (r < 0)
        return abandon(l, r);
    l->pending++;
    if (cfg->handshake_ms > 0)
        uv_timer_start(&l->deadline, deadline_expired, cfg->handshake_ms, 0);
    *out = l;
    return 0;
}

/* ---- using ----------------------------------------------------------- */

int bq_link_send(bq_link_t *l, const Bq__Repl__Message *msg)
{
    uint8_t *data;
    size_t len;
    if (l->closing)
        return -1;
    if (bq_wire_encode(msg, &data, &len) < 0) {
        close_link(l, "out of memory");
        return -1;
    }
    if (!l->tls)
        return queue_write(l, data, len);
    int r = bq_tls_write(l->tls, data, len);
    free(data);
    if (r < 0) {
        close_link(l, "tls: %s", bq_tls_error(l->tls));
        return -1;
    }
    return flush_out(l);
}

size_t bq_link_queued(const bq_link_t *l)
{
    return l->queued;
}

const char *bq_link_peer_name(const bq_link_t *l)
{
    return l->tls && l->open ? bq_tls_peer_name(l->tls) : NULL;
}

const char *bq_link_security(const bq_link_t *l)
{
    return l->tls ? bq_tls_version(l->tls) : "plaintext";
}

bool bq_link_tls_refused(const char *why)
{
    return strncmp(why, "tls: ", 5) == 0 && !strstr(why, "closed by peer");
}

const char *bq_link_peer_addr(const bq_link_t *l)
{
    return l->addr;
}

void bq_link_close(bq_link_t *l, const char *why)
{
    close_link(l, "%s", why);
}

void bq_link_set_max_message(bq_link_t *l, uint32_t max)
{
    bq_wire_decoder_limit(&l->dec, max);
}

void bq_link_set_arg(bq_link_t *l, void *arg)
{
    l->arg = arg;
}
