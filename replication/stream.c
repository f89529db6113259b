/* A plaintext or TLS byte stream on a libuv TCP handle (see stream.h).
 *
 * Output: plaintext goes to uv_write as the caller's buffer; under TLS the
 * channel encrypts it and its io->send hands the ciphertext over piece by
 * piece, gathered in one buffer until the operation ends (flush_out), then
 * given to uv_write with a request that owns it. Handshake records and
 * alerts produced while reading leave the same way.
 *
 * Input: the bytes read go to on_data as they are, or through the channel,
 * whose io->plain hands the plaintext on (on_open first, once the
 * handshake completed). On a server that sniffs, the first byte decides:
 * a TLS handshake record keeps the channel, anything else drops it.
 *
 * Closing: bq_stream_close stops the timer, and unless aborting sends a
 * close_notify when TLS is established and shuts the socket down, so that
 * queued bytes still leave, the timer then bounding the linger. Once both
 * handles have closed, on_close runs and the stream is freed. A tcp handle
 * closing between two connect attempts counts as closing: its close
 * callback (reopen) then stands in for handle_closed. Failures while
 * closing (a write that fails, the peer's FIN while lingering) end the
 * linger at once instead of calling on_error. */
#include "replication/stream.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TLS_RECORD_HANDSHAKE 0x16 /* the first byte of a TLS ClientHello */
#define READ_SIZE_DEFAULT ((size_t)64 * 1024)

struct bq_stream {
    uv_tcp_t tcp;
    uv_timer_t timer; /* nothing received for idle_ms; the linger once closing */
    uv_connect_t connect;
    uv_shutdown_t shutdown;
    bq_stream_config_t cfg;
    bq_stream_callbacks_t cbs;
    void *arg;
    bq_tls_t *tls;               /* NULL in plaintext */
    const struct addrinfo *next; /* connecting: tried after a failure */
    uint8_t *out;                /* ciphertext gathered during one TLS operation */
    size_t out_len, out_cap;
    bool out_failed; /* out could not grow */
    size_t queued;   /* bytes of unfinished uv_writes */
    bool want_read, reading, connected, opened, sniffing, eof, above_high;
    bool failed, closing, lingering, handles_closing;
    int pending; /* close callbacks still to come */
    char addr[80];
    char ip[64];
    uint8_t rbuf[]; /* cfg.read_size bytes */
};

typedef struct wreq {
    uv_write_t req;
    bq_stream_t *s;
    uint8_t *data; /* owned until the write callback */
    size_t len;
} wreq_t;

/* Reports a failure to the owner, once and never while closing. */
__attribute__((format(printf, 3, 4))) static void fail(bq_stream_t *s, int err, const char *fmt,
                                                       ...)
{
    if (s->failed || s->closing)
        return;
    s->failed = true;
    char why[600]; /* "tls: " and the channel's error, whole */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    s->cbs.on_error(s, err, why, s->arg);
}

/* ---- closing --------------------------------------------------------- */

static void handle_closed(uv_handle_t *h)
{
    bq_stream_t *s = h->data;
    if (--s->pending > 0)
        return;
    if (s->cbs.on_close)
        s->cbs.on_close(s, s->arg);
    bq_tls_free(s->tls);
    free(s->out);
    free(s);
}

static void close_handles(bq_stream_t *s)
{
    if (s->handles_closing)
        return;
    s->handles_closing = s->closing = true;
    s->pending = 2;
    if (!uv_is_closing((uv_handle_t *)&s->tcp))
        uv_close((uv_handle_t *)&s->tcp, handle_closed);
    uv_close((uv_handle_t *)&s->timer, handle_closed);
}

static void shutdown_done(uv_shutdown_t *req, int status)
{
    bq_stream_t *s = req->data;
    /* Lingering waits for the peer's end of input, unless it came already. */
    if (!s->lingering || status < 0 || s->eof)
        close_handles(s);
}

static void linger_expired(uv_timer_t *t)
{
    close_handles(t->data);
}

static void read_stop(bq_stream_t *s)
{
    if (s->reading)
        uv_read_stop((uv_stream_t *)&s->tcp);
    s->reading = false;
}

static int read_start(bq_stream_t *s);
static int flush_out(bq_stream_t *s);

void bq_stream_close(bq_stream_t *s, bq_stream_close_how_t how)
{
    if (s->closing) {
        if (how == BQ_STREAM_ABORT)
            close_handles(s);
        return;
    }
    s->closing = true;
    uv_timer_stop(&s->timer);
    if (how == BQ_STREAM_ABORT || !s->connected) {
        close_handles(s);
        return;
    }
    s->lingering = how == BQ_STREAM_LINGER;
    if (!s->lingering)
        read_stop(s);
    if (s->tls && bq_tls_established(s->tls)) {
        bq_tls_shutdown(s->tls);
        flush_out(s);
    }
    if (s->handles_closing ||
        uv_shutdown(&s->shutdown, (uv_stream_t *)&s->tcp, shutdown_done) < 0) {
        close_handles(s);
        return;
    }
    if (s->lingering && !s->eof)
        read_start(s);
    uv_timer_start(&s->timer, linger_expired, BQ_STREAM_LINGER_MS, 0);
}

/* ---- output ---------------------------------------------------------- */

static void write_done(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    bq_stream_t *s = w->s;
    s->queued -= w->len;
    free(w->data);
    free(w);
    if (status == UV_ECANCELED)
        return; /* the handle closed */
    if (status < 0) {
        if (s->closing)
            close_handles(s); /* the linger would be for nothing */
        else
            fail(s, status, "write: %s", uv_strerror(status));
    } else if (s->above_high && s->queued < s->cfg.low_water && !s->closing) {
        s->above_high = false;
        if (s->cbs.on_drain)
            s->cbs.on_drain(s, s->arg);
    }
}

/* Queues data[0..len) for the socket, taking ownership. 0, or -1 (failed). */
static int queue_write(bq_stream_t *s, uint8_t *data, size_t len)
{
    wreq_t *w = s->handles_closing ? NULL : malloc(sizeof *w);
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    int r = UV_ENOMEM;
    if (w)
        *w = (wreq_t){.s = s, .data = data, .len = len};
    if (!w || (r = uv_write(&w->req, (uv_stream_t *)&s->tcp, &b, 1, write_done)) < 0) {
        free(data);
        free(w);
        fail(s, r, "cannot queue %zu bytes for the socket", len);
        return -1;
    }
    s->queued += len;
    if (s->cfg.high_water > 0 && s->queued >= s->cfg.high_water)
        s->above_high = true;
    return 0;
}

/* Queues the ciphertext gathered in s->out. 0, or -1 (failed). */
static int flush_out(bq_stream_t *s)
{
    if (s->out_failed) {
        fail(s, UV_ENOMEM, "out of memory");
        return -1;
    }
    if (s->out_len == 0)
        return 0;
    uint8_t *data = s->out;
    size_t len = s->out_len;
    s->out = NULL;
    s->out_len = s->out_cap = 0;
    return queue_write(s, data, len);
}

/* The channel's io->send: gathers ciphertext until flush_out. */
static void tls_send(void *arg, const uint8_t *data, size_t len)
{
    bq_stream_t *s = arg;
    if (s->out_len + len > s->out_cap) {
        size_t cap = s->out_cap ? s->out_cap : 16384;
        while (cap < s->out_len + len)
            cap *= 2;
        uint8_t *p = realloc(s->out, cap);
        if (!p) {
            s->out_failed = true;
            return;
        }
        s->out = p;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, data, len);
    s->out_len += len;
}

int bq_stream_write(bq_stream_t *s, uint8_t *data, size_t len)
{
    if (s->closing || s->failed) {
        free(data);
        return -1;
    }
    if (!s->tls)
        return queue_write(s, data, len);
    int r = bq_tls_write(s->tls, data, len);
    free(data);
    if (r < 0) {
        fail(s, BQ_STREAM_ETLS, "tls: %s", bq_tls_error(s->tls));
        return -1;
    }
    return flush_out(s);
}

/* ---- input ----------------------------------------------------------- */

static void open_stream(bq_stream_t *s)
{
    if (s->opened || s->closing)
        return;
    s->opened = true;
    if (s->cbs.on_open)
        s->cbs.on_open(s, s->arg);
}

/* Plaintext from the channel or the socket. */
static void take_plain(void *arg, const uint8_t *data, size_t len)
{
    bq_stream_t *s = arg;
    if (s->tls)
        open_stream(s); /* on_open comes before the first bytes */
    if (!s->closing && !s->failed)
        s->cbs.on_data(s, data, len, s->arg);
}

static void idle_expired(uv_timer_t *t)
{
    bq_stream_t *s = t->data;
    fail(s, UV_ETIMEDOUT, "timeout: nothing received for %llu ms",
         (unsigned long long)s->cfg.idle_ms);
}

/* Feeds n bytes of ciphertext from rbuf to the channel. */
static void feed_tls(bq_stream_t *s, size_t n)
{
    bool established = bq_tls_established(s->tls);
    if (bq_tls_feed(s->tls, s->rbuf, n) < 0) {
        flush_out(s); /* the alert */
        fail(s, established ? BQ_STREAM_ETLS : BQ_STREAM_ETLS_HANDSHAKE, "tls: %s",
             bq_tls_error(s->tls));
    } else if (!s->closing && flush_out(s) == 0 && bq_tls_established(s->tls)) {
        open_stream(s);
    }
}

static void alloc_read(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    bq_stream_t *s = h->data;
    (void)hint;
    *buf = uv_buf_init((char *)s->rbuf, (unsigned)s->cfg.read_size);
}

static void on_read(uv_stream_t *h, ssize_t n, const uv_buf_t *buf)
{
    bq_stream_t *s = h->data;
    (void)buf;
    if (n == 0)
        return;
    if (n < 0) { /* end of input or an error: nothing more will come */
        s->eof = true;
        read_stop(s);
        if (s->closing)
            close_handles(s); /* lingering: the peer closed its end too */
        else if (n == UV_EOF)
            fail(s, UV_EOF, "peer closed the connection");
        else
            fail(s, (int)n, "read: %s", uv_strerror((int)n));
        return;
    }
    if (s->closing)
        return; /* lingering: the bytes are discarded */
    if (s->cfg.idle_ms > 0)
        uv_timer_start(&s->timer, idle_expired, s->cfg.idle_ms, 0);
    if (s->sniffing) {
        s->sniffing = false;
        if (s->rbuf[0] != TLS_RECORD_HANDSHAKE) {
            bq_tls_free(s->tls);
            s->tls = NULL;
        }
    }
    if (s->tls)
        feed_tls(s, (size_t)n);
    else
        take_plain(s, s->rbuf, (size_t)n);
}

static int read_start(bq_stream_t *s)
{
    if (s->reading || s->eof || s->handles_closing)
        return 0;
    int r = uv_read_start((uv_stream_t *)&s->tcp, alloc_read, on_read);
    s->reading = r == 0;
    return r;
}

int bq_stream_read(bq_stream_t *s, bool on)
{
    s->want_read = on;
    if (!s->connected || s->closing)
        return 0;
    if (!on) {
        read_stop(s);
        return 0;
    }
    return read_start(s);
}

/* ---- setting up ------------------------------------------------------ */

void bq_stream_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[64] = "?";
    bool v6 = sa->sa_family == AF_INET6;
    uint16_t port = v6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
                       : ((const struct sockaddr_in *)sa)->sin_port;
    uv_ip_name(sa, ip, sizeof ip);
    snprintf(buf, len, v6 ? "[%s]:%u" : "%s:%u", ip, ntohs(port));
}

static void set_addr(bq_stream_t *s, const struct sockaddr *sa)
{
    bq_stream_format_addr(sa, s->addr, sizeof s->addr);
    uv_ip_name(sa, s->ip, sizeof s->ip);
}

bq_stream_t *bq_stream_new(uv_loop_t *loop, const bq_stream_config_t *cfg,
                           const bq_stream_callbacks_t *cbs, void *arg)
{
    size_t rsize = cfg->read_size ? cfg->read_size : READ_SIZE_DEFAULT;
    bq_stream_t *s = calloc(1, sizeof *s + rsize);
    if (!s)
        return NULL;
    s->cfg = *cfg;
    s->cfg.read_size = rsize;
    s->cbs = *cbs;
    s->arg = arg;
    bq_tls_io_t io = {tls_send, take_plain, s};
    if (cfg->tls)
        s->tls = bq_tls_new(cfg->tls, cfg->server, cfg->names, cfg->nnames, &io);
    if ((cfg->tls && !s->tls) || uv_tcp_init(loop, &s->tcp) < 0) {
        bq_tls_free(s->tls);
        free(s);
        return NULL;
    }
    if (s->tls) {
        bq_tls_set_channel(s->tls, cfg->channel);
        if (cfg->server && cfg->peer_optional)
            bq_tls_peer_optional(s->tls);
        s->sniffing = cfg->server && cfg->sniff;
    }
    uv_timer_init(loop, &s->timer);
    s->tcp.data = s->timer.data = s->connect.data = s->shutdown.data = s;
    return s;
}

/* The socket is connected: peer address, no Nagle, reading, idle deadline. */
static int start(bq_stream_t *s)
{
    struct sockaddr_storage ss;
    int sslen = (int)sizeof ss;
    s->connected = true;
    if (uv_tcp_getpeername(&s->tcp, (struct sockaddr *)&ss, &sslen) == 0)
        set_addr(s, (struct sockaddr *)&ss);
    int r = uv_tcp_nodelay(&s->tcp, 1);
    if (r == 0 && s->want_read)
        r = read_start(s);
    if (r == 0 && s->cfg.idle_ms > 0)
        uv_timer_start(&s->timer, idle_expired, s->cfg.idle_ms, 0);
    return r;
}

int bq_stream_accept(bq_stream_t *s, uv_stream_t *server)
{
    int r = uv_accept(server, (uv_stream_t *)&s->tcp);
    return r < 0 ? r : start(s);
}

/* ---- connecting ------------------------------------------------------ */

static void connected(uv_connect_t *req, int status);

/* Connects to the next address. */
static void try_next(bq_stream_t *s)
{
    const struct addrinfo *ai = s->next;
    s->next = ai->ai_next;
    set_addr(s, ai->ai_addr);
    int r = uv_tcp_connect(&s->connect, &s->tcp, ai->ai_addr, connected);
    if (r < 0)
        connected(&s->connect, r);
}

/* The tcp handle of a failed attempt is closed: a fresh one for the next. */
static void reopen(uv_handle_t *h)
{
    bq_stream_t *s = h->data;
    if (s->handles_closing) {
        handle_closed(h); /* close_handles counted this handle */
        return;
    }
    uv_tcp_init(s->timer.loop, &s->tcp); /* cannot fail: no socket yet */
    s->tcp.data = s;
    try_next(s);
}

static void connected(uv_connect_t *req, int status)
{
    bq_stream_t *s = req->data;
    if (s->closing)
        return;
    if (status < 0 && s->next) {
        uv_close((uv_handle_t *)&s->tcp, reopen);
        return;
    }
    if (status == 0)
        status = start(s);
    if (status < 0)
        fail(s, status, "connect %s: %s", s->addr, uv_strerror(status));
    else if (!s->tls)
        open_stream(s);
    else if (bq_tls_start(s->tls) < 0)
        fail(s, BQ_STREAM_ETLS_HANDSHAKE, "tls: %s", bq_tls_error(s->tls));
    else
        flush_out(s);
}

void bq_stream_connect(bq_stream_t *s, const struct addrinfo *addrs)
{
    if (addrs == NULL) {
        fail(s, UV_EINVAL, "connect: no address");
        return;
    }
    s->next = addrs;
    try_next(s);
}

/* ---- using ----------------------------------------------------------- */

size_t bq_stream_queued(const bq_stream_t *s)
{
    return s->queued;
}

bool bq_stream_is_tls(const bq_stream_t *s)
{
    return s->tls != NULL;
}

const char *bq_stream_peer_name(const bq_stream_t *s)
{
    return s->tls ? bq_tls_peer_name(s->tls) : NULL;
}

const char *bq_stream_security(const bq_stream_t *s)
{
    return s->tls ? bq_tls_version(s->tls) : "plaintext";
}

const char *bq_stream_peer_addr(const bq_stream_t *s)
{
    return s->addr;
}

const char *bq_stream_peer_ip(const bq_stream_t *s)
{
    return s->ip;
}
