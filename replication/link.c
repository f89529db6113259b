/* A replication link on libuv (see link.h): a stream (replication/stream.h:
 * TCP, in TLS or plaintext) whose plaintext goes to the wire decoder
 * (replication/wire.c), which hands complete messages to on_message. What
 * is the link's own: the name lookup and the connect deadline, the idle
 * timeout's reason, the messages, and its lifetime.
 *
 * Closing: every failure and bq_link_close end in close_link, which acts
 * once. It stops the deadline timer, cancels a name lookup in progress
 * (replication/resolve.h) and closes the stream with BQ_STREAM_FLUSH, so
 * that queued messages (a Refuse sent just before closing, an alert) still
 * leave, within the stream's linger bound. Once the stream and the timer
 * have closed, on_close runs and the link is freed. So the link stays valid
 * inside its own callbacks, whatever they do, and on_close always comes
 * from the loop. */
#include "replication/link.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/resolve.h"
#include "replication/stream.h"
#include "replication/wire.h"

/* A lookup's bound when the link has no connect deadline. */
#define RESOLVE_MS 5000

struct bq_link {
    bq_stream_t *stream;    /* NULL once it has closed (the timer may close after it) */
    uv_timer_t deadline;    /* connect + handshake; opens an accepted plaintext link */
    bq_resolve_t *resolve;  /* the lookup of the peer's name, until its callback */
    struct addrinfo *addrs; /* resolved, borrowed by the stream while it connects */
    bq_link_config_t cfg;
    bq_link_callbacks_t cbs;
    void *arg;
    bq_wire_decoder_t dec;
    bool accepted, open, closing;
    int pending; /* the stream's and the timer's close, the lookup's callback */
    char why[256];
    char addr[80];     /* "host:port" until the stream knows the peer's address; its copy after */
    char security[32]; /* the stream's, kept when it has closed */
};

static void close_link(bq_link_t *l, const char *fmt, ...);

/* ---- closing --------------------------------------------------------- */

static void finish(bq_link_t *l)
{
    if (--l->pending > 0)
        return;
    if (l->cbs.on_close) /* NULL when its creation failed */
        l->cbs.on_close(l, l->why, l->arg);
    bq_wire_decoder_free(&l->dec);
    bq_resolve_free(l->addrs);
    free(l);
}

static void timer_closed(uv_handle_t *h)
{
    finish(h->data);
}

/* The stream is freed after this: what the link's owner may still ask
 * (in on_close, which can come later, after the timer) is copied. */
static void stream_closed(bq_stream_t *s, void *arg)
{
    bq_link_t *l = arg;
    const char *a = bq_stream_peer_addr(s);
    if (a[0] != '\0')
        snprintf(l->addr, sizeof l->addr, "%s", a);
    snprintf(l->security, sizeof l->security, "%s", bq_stream_security(s));
    l->stream = NULL;
    finish(l);
}

/* Starts closing the link for the reason fmt says; acts once. */
__attribute__((format(printf, 2, 3))) static void close_link(bq_link_t *l, const char *fmt, ...)
{
    if (l->closing)
        return;
    l->closing = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->why, sizeof l->why, fmt, ap);
    va_end(ap);
    if (l->resolve) { /* no callback comes after a cancel */
        bq_resolve_cancel(l->resolve);
        l->resolve = NULL;
        l->pending--;
    }
    uv_close((uv_handle_t *)&l->deadline, timer_closed);
    bq_stream_close(l->stream, BQ_STREAM_FLUSH);
}

/* ---- the stream's callbacks ------------------------------------------ */

static void open_link(bq_link_t *l)
{
    if (l->open || l->closing)
        return;
    l->open = true;
    uv_timer_stop(&l->deadline);
    l->cbs.on_open(l, l->arg);
}

static void stream_open(bq_stream_t *s, void *arg)
{
    (void)s;
    open_link(arg);
}

/* Plaintext: each complete message goes to on_message, until the link is
 * closing. */
static void stream_data(bq_stream_t *s, const uint8_t *data, size_t len, void *arg)
{
    bq_link_t *l = arg;
    (void)s;
    open_link(l); /* an accepted plaintext link whose peer spoke first */
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

static void stream_drain(bq_stream_t *s, void *arg)
{
    bq_link_t *l = arg;
    (void)s;
    if (l->cbs.on_writable)
        l->cbs.on_writable(l, l->arg);
}

static void stream_error(bq_stream_t *s, int err, const char *why, void *arg)
{
    (void)s;
    (void)err;
    close_link(arg, "%s", why);
}

/* The connect and handshake deadline; also opens an accepted plaintext link
 * from the loop. */
static void deadline_expired(uv_timer_t *t)
{
    bq_link_t *l = t->data;
    if (l->accepted && !bq_stream_is_tls(l->stream))
        open_link(l);
    else
        close_link(l, "timeout: link not established within %llu ms",
                   (unsigned long long)l->cfg.handshake_ms);
}

/* ---- setting up ------------------------------------------------------ */

static bq_link_t *link_new(uv_loop_t *loop, bool server, const bq_link_config_t *cfg,
                           const bq_link_callbacks_t *cbs, void *arg)
{
    bq_link_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->cfg = *cfg;
    l->cbs = *cbs;
    l->arg = arg;
    bq_stream_config_t scfg = {
        .tls = cfg->tls,
        .server = server,
        .names = cfg->names,
        .nnames = cfg->nnames,
        .channel = BQ_TLS_REPLICATION,
        .read_size = 65536,
        .high_water = BQ_LINK_HIGH_WATER,
        .low_water = BQ_LINK_LOW_WATER,
        .idle_ms = cfg->idle_ms,
    };
    bq_stream_callbacks_t scbs = {stream_open, stream_data, stream_drain, stream_error,
                                  stream_closed};
    l->stream = bq_stream_new(loop, &scfg, &scbs, l);
    if (!l->stream) {
        free(l);
        return NULL;
    }
    bq_wire_decoder_init(&l->dec, cfg->max_message ? cfg->max_message : BQ_WIRE_MAX_DEFAULT);
    uv_timer_init(loop, &l->deadline);
    l->deadline.data = l;
    l->pending = 2;
    bq_stream_read(l->stream, true);
    return l;
}

/* Undoes a link whose creation failed: freed from the loop, no on_close. */
static int abandon(bq_link_t *l, int err)
{
    l->cbs.on_close = NULL;
    close_link(l, "abandoned");
    return err;
}

int bq_link_accept(uv_loop_t *loop, uv_stream_t *server, const bq_link_config_t *cfg,
                   const bq_link_callbacks_t *cbs, void *arg, bq_link_t **out)
{
    *out = NULL;
    bq_link_t *l = link_new(loop, true, cfg, cbs, arg);
    if (!l)
        return UV_ENOMEM;
    int r = bq_stream_accept(l->stream, server);
    if (r < 0)
        return abandon(l, r);
    l->accepted = true;
    if (!cfg->tls) /* plaintext: open at once, from the loop */
        uv_timer_start(&l->deadline, deadline_expired, 0, 0);
    else if (cfg->handshake_ms > 0)
        uv_timer_start(&l->deadline, deadline_expired, cfg->handshake_ms, 0);
    *out = l;
    return 0;
}

/* ---- connecting ------------------------------------------------------ */

static void resolved(void *arg, int status, struct addrinfo *res)
{
    bq_link_t *l = arg;
    l->resolve = NULL;
    l->pending--;
    if (status < 0) {
        close_link(l, "resolve %s: %s", l->addr, uv_strerror(status));
        return;
    }
    l->addrs = res;
    bq_stream_connect(l->stream, res);
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
    return bq_stream_write(l->stream, data, len);
}

size_t bq_link_queued(const bq_link_t *l)
{
    return l->stream ? bq_stream_queued(l->stream) : 0;
}

const char *bq_link_peer_name(const bq_link_t *l)
{
    return l->open && l->stream ? bq_stream_peer_name(l->stream) : NULL;
}

const char *bq_link_security(const bq_link_t *l)
{
    return l->stream ? bq_stream_security(l->stream) : l->security;
}

bool bq_link_tls_refused(const char *why)
{
    return strncmp(why, "tls: ", 5) == 0 && !strstr(why, "closed by peer");
}

const char *bq_link_peer_addr(const bq_link_t *l)
{
    const char *a = l->stream ? bq_stream_peer_addr(l->stream) : "";
    return a[0] != '\0' ? a : l->addr;
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
