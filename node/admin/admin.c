/* The admin HTTP server (see admin.h): a libuv listener, up to MAX_CONNS
 * connections, each parsing requests with node/admin/http_request.c and answering
 * them in order, through the TLS channel of replication/tls.c when the
 * configuration has a context (required off loopback).
 *
 * Input: the plaintext bytes of a connection are appended to its input
 * buffer and parsed where they are (node/http_request.h), one request at a
 * time; a partial head is scanned again only from where the last read
 * stopped (head_seen), and the request's path and query are slices of the
 * buffer, used before it changes. A mutating request
 * whose handler has not answered yet holds the connection: later requests
 * stay in the buffer (reading goes on until IN_SOFT bytes wait, so that a
 * client going away is still seen) and are parsed once the answer is queued.
 * Parsing also pauses while more than OUT_HIGH bytes of answers wait to be
 * written, so a client that never reads cannot grow our memory.
 *
 * Deadlines: a request must arrive whole within the request timeout (5 s)
 * after the connection opened (the TLS handshake included) or after the
 * previous answer, so an idle keep-alive connection lasts 5 s; the clock
 * does not run while a handler holds the answer. A partial request then
 * gets 408, an idle connection is just closed.
 *
 * Admission (replication/admit.h): at most MAX_CONNS connections, and at
 * most PER_SOURCE of one address that are not being answered; a newcomer
 * takes the place of its own source's oldest, else of the oldest of any
 * source, so that a flood of idle or half-open connections, with or without
 * TLS, never keeps a probe out. Evictions are logged at most once a
 * second.
 *
 * Closing: after an answer with "Connection: close" (every error is one), at
 * end of input or on a timeout, the connection is shut down gracefully: the
 * queued answers leave, then FIN, then the client's further bytes are read
 * and discarded until it closes too or LINGER_MS passes, so that unread
 * request bytes cannot make the kernel reset the connection before the
 * client read the answer. Reply handles of a closed connection are detached
 * (their conn set to NULL), never freed here. A route whose handler is NULL
 * answers 404, as if the node did not offer it.
 *
 * TLS: the client's certificate is asked for but optional, so that probes
 * and scrapers that have none (a kubelet, Prometheus) can GET; who may POST
 * is node/admin/access.h's rule. On a loopback address with TLS configured
 * the port answers both: a connection whose first byte starts a TLS record
 * (0x16) is TLS, any other is plaintext HTTP, which may GET only. */
#include "node/admin/admin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/admin/access.h"
#include "node/admin/http_request.h"
#include "node/base/log.h"
#include "replication/admit.h"
#include "replication/tls.h"

#define MAX_CONNS 64
#define PER_SOURCE 16 /* a kubelet's probes share one address, as may clients behind a NAT */
#define REQUEST_TIMEOUT_MS 5000
#define TLS_RECORD_HANDSHAKE 0x16 /* the first byte of a TLS ClientHello */
#define LINGER_MS 2000
#define READ_CHUNK 16384
#define IN_SOFT ((size_t)32 * 1024)  /* reading stops while this much input waits */
#define IN_HARD ((size_t)128 * 1024) /* more buffered input than this closes the connection */
#define OUT_HIGH ((size_t)256 * 1024)
#define NAME_MAX_LEN 64 /* node names are 1 to 63 bytes (node/base/flags.c) */

typedef struct conn conn_t;

struct bq_admin_reply {
    conn_t *conn; /* NULL once the connection is gone */
    bool keep_alive;
};

struct conn {
    bq_admin_t *a;
    conn_t *prev, *next;
    uv_tcp_t tcp;
    uv_timer_t timer; /* the request deadline; the linger once closing */
    uv_shutdown_t shutdown;
    bq_tls_t *tls; /* NULL in plaintext */
    uint8_t *out;  /* ciphertext gathered during one TLS operation */
    size_t out_len, out_cap;
    bool out_failed, in_failed; /* a buffer could not grow */
    size_t queued;              /* bytes of unfinished writes */
    char *in;                   /* plaintext not parsed yet */
    size_t in_len, in_cap;
    bq_http_request_t req; /* the request being parsed, its slices in `in` */
    size_t head_seen;      /* bytes of a partial head already parsed; 0 between requests */
    bq_admin_reply_t *pending; /* the request being answered by a handler */
    bool reading, processing, eof, closing, draining, handles_closing;
    bool sniffing;  /* loopback with TLS configured: the first byte decides */
    bool answered;  /* at least one answer sent: between requests it is idle */
    int handles; /* open handles, 2 until both close callbacks ran */
    uint64_t since; /* loop ms when it opened or was last answered */
    char peer[64];
    char source[BQ_ADMIT_SOURCE_MAX]; /* the client's address, without port */
    char rbuf[READ_CHUNK];
};

struct bq_admin {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bq_admin_config_t cfg;
    bq_admin_handlers_t h;
    conn_t *conns;
    int nconns;
    bool stopping, listener_open, loopback;
    /* One limit per kind of line, so that a flood of one kind (a stranger's
     * failed handshakes) cannot hide another (a refused POST). */
    bq_log_limit_t refused_post, tls_refused, conn_refused, evict_limit, accept_failed;
    char addr[80];
};

typedef struct wreq {
    uv_write_t req;
    conn_t *c;
    char *data; /* owned until the write callback */
    size_t len;
} wreq_t;

static void process(conn_t *c);

/* ---- freeing and closing --------------------------------------------- */

static void maybe_free_admin(bq_admin_t *a)
{
    if (a->stopping && !a->listener_open && a->conns == NULL)
        free(a);
}

static void handle_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->handles > 0)
        return;
    bq_admin_t *a = c->a;
    if (c->prev)
        c->prev->next = c->next;
    else
        a->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    a->nconns--;
    bq_tls_free(c->tls);
    free(c->out);
    free(c->in);
    free(c);
    maybe_free_admin(a);
}

static void close_handles(conn_t *c)
{
    if (c->handles_closing)
        return;
    c->handles_closing = true;
    uv_close((uv_handle_t *)&c->tcp, handle_closed);
    uv_close((uv_handle_t *)&c->timer, handle_closed);
}

static void shutdown_done(uv_shutdown_t *req, int status)
{
    conn_t *c = req->data;
    if (status < 0 || c->eof)
        close_handles(c); /* else wait for the client's end of input */
}

static void linger_expired(uv_timer_t *t)
{
    close_handles(t->data);
}

static void alloc_read(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* Reads while input is wanted: never after the end of input; while closing
 * only to discard the lingering bytes; else while less than IN_SOFT wait. */
static void update_reading(conn_t *c)
{
    if (c->handles_closing)
        return;
    bool want = !c->eof && (c->draining || (!c->closing && c->in_len < IN_SOFT));
    if (want && !c->reading) {
        c->reading = uv_read_start((uv_stream_t *)&c->tcp, alloc_read, on_read) == 0;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

static int flush_out(conn_t *c);

/* Closes c, gracefully (queued answers leave, then FIN, then lingering
 * reads) or at once. Detaches a pending reply. Acts once. */
static void end_conn(conn_t *c, bool graceful)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_timer_stop(&c->timer);
    if (c->pending) {
        c->pending->conn = NULL;
        c->pending = NULL;
    }
    if (graceful && c->tls && bq_tls_established(c->tls)) {
        bq_tls_shutdown(c->tls);
        flush_out(c);
    }
    if (graceful && !c->handles_closing &&
        uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, shutdown_done) == 0) {
        c->draining = true;
        update_reading(c);
        uv_timer_start(&c->timer, linger_expired, LINGER_MS, 0);
        return;
    }
    close_handles(c);
}

/* ---- output ---------------------------------------------------------- */

static void write_done(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    conn_t *c = w->c;
    c->queued -= w->len;
    free(w->data);
    free(w);
    if (status < 0) {
        end_conn(c, false);
        close_handles(c); /* also when it was lingering */
    } else if (!c->closing && c->in_len > 0 && c->queued < OUT_HIGH / 2) {
        process(c); /* parsing paused above OUT_HIGH */
    }
}

/* Queues data[0..len) for the socket, taking ownership. 0, or -1 with c
 * closing. */
static int queue_write(conn_t *c, char *data, size_t len)
{
    wreq_t *w = c->handles_closing ? NULL : malloc(sizeof *w);
    uv_buf_t b = uv_buf_init(data, (unsigned)len);
    if (w)
        *w = (wreq_t){.c = c, .data = data, .len = len};
    if (!w || uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_done) < 0) {
        free(data);
        free(w);
        end_conn(c, false);
        return -1;
    }
    c->queued += len;
    return 0;
}

/* Queues the ciphertext gathered in c->out. 0 or -1 (c closing). */
static int flush_out(conn_t *c)
{
    if (c->out_failed) {
        end_conn(c, false);
        return -1;
    }
    if (c->out_len == 0)
        return 0;
    char *data = (char *)c->out;
    size_t len = c->out_len;
    c->out = NULL;
    c->out_len = c->out_cap = 0;
    return queue_write(c, data, len);
}

/* The TLS channel's io->send: gathers ciphertext until flush_out. */
static void tls_send(void *arg, const uint8_t *data, size_t len)
{
    conn_t *c = arg;
    if (c->out_len + len > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 16384;
        while (cap < c->out_len + len)
            cap *= 2;
        uint8_t *p = realloc(c->out, cap);
        if (!p) {
            c->out_failed = true;
            return;
        }
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
}

/* Sends plaintext data[0..len), taking ownership: encrypted under TLS. */
static void send_bytes(conn_t *c, char *data, size_t len)
{
    if (!c->tls) {
        queue_write(c, data, len);
        return;
    }
    int r = bq_tls_write(c->tls, (const uint8_t *)data, len);
    free(data);
    if (r < 0)
        end_conn(c, false);
    else
        flush_out(c);
}

/* ---- answers --------------------------------------------------------- */

static const char TEXT[] = "text/plain; charset=utf-8";

typedef struct resp {
    int status;
    const char *type;  /* Content-Type */
    const char *allow; /* the Allow header's value, or NULL */
    const char *body;
    size_t len;
} resp_t;

static const char *reason(int status)
{
    static const struct {
        int status;
        const char *text;
    } reasons[] = {
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {400, "Bad Request"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {412, "Precondition Failed"},
        {413, "Content Too Large"},
        {414, "URI Too Long"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
        {505, "HTTP Version Not Supported"},
    };
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].status == status)
            return reasons[i].text;
    return ""; /* the reason phrase may be empty (RFC 9112 section 4) */
}

/* Queues the answer r, without its body for HEAD; then closes c unless
 * keep_alive. */
static void send_response(conn_t *c, const resp_t *r, bool head, bool keep_alive)
{
    if (c->closing)
        return;
    char hdr[512];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s"
                     "Cache-Control: no-store\r\nConnection: %s\r\n\r\n",
                     r->status, reason(r->status), r->type, r->len, r->allow ? "Allow: " : "",
                     r->allow ? r->allow : "", r->allow ? "\r\n" : "",
                     keep_alive ? "keep-alive" : "close");
    size_t blen = head ? 0 : r->len;
    char *data = malloc((size_t)n + blen);
    if (data == NULL) {
        end_conn(c, false);
        return;
    }
    memcpy(data, hdr, (size_t)n);
    if (blen > 0)
        memcpy(data + n, r->body, blen);
    send_bytes(c, data, (size_t)n + blen);
    c->answered = true;
    c->since = uv_now(c->a->loop);
    if (!keep_alive)
        end_conn(c, true);
}

/* Answers with text and a final newline as a text/plain body. */
static void send_text(conn_t *c, int status, const char *text, const char *allow, bool head,
                      bool keep_alive)
{
    size_t n = strlen(text);
    char *body = malloc(n + 2);
    if (body == NULL) {
        end_conn(c, false);
        return;
    }
    memcpy(body, text, n);
    if (n == 0 || text[n - 1] != '\n')
        body[n++] = '\n';
    resp_t r = {status, TEXT, allow, body, n};
    send_response(c, &r, head, keep_alive);
    free(body);
}

/* ---- routes ---------------------------------------------------------- */

static bool is_head(const bq_http_request_t *q)
{
    return q->method == BQ_HTTP_HEAD;
}

static void not_found(conn_t *c, const bq_http_request_t *q)
{
    send_text(c, 404, "not found", NULL, is_head(q), q->keep_alive);
}

static void serve_healthz(conn_t *c, const bq_http_request_t *q)
{
    send_text(c, 200, "ok", NULL, is_head(q), q->keep_alive);
}

static void serve_readyz(conn_t *c, const bq_http_request_t *q)
{
    const bq_admin_handlers_t *h = &c->a->h;
    if (h->ready == NULL) {
        not_found(c, q);
        return;
    }
    char why[256] = "";
    bool ready = h->ready(h->arg, why, sizeof why);
    why[sizeof why - 1] = '\0';
    const char *text = ready ? "ready" : why[0] != '\0' ? why : "not ready";
    send_text(c, ready ? 200 : 503, text, NULL, is_head(q), q->keep_alive);
}

/* Answers with the document make returns (500 when it returns NULL). */
static void serve_document(conn_t *c, const bq_http_request_t *q, char *(*make)(void *arg),
                           const char *type)
{
    if (make == NULL) {
        not_found(c, q);
        return;
    }
    char *doc = make(c->a->h.arg);
    if (doc == NULL) {
        send_text(c, 500, "out of memory", NULL, is_head(q), q->keep_alive);
        return;
    }
    resp_t r = {200, type, NULL, doc, strlen(doc)};
    send_response(c, &r, is_head(q), q->keep_alive);
    free(doc);
}

static void serve_status(conn_t *c, const bq_http_request_t *q)
{
    serve_document(c, q, c->a->h.status, "application/json");
}

static void serve_metrics(conn_t *c, const bq_http_request_t *q)
{
    serve_document(c, q, c->a->h.metrics, "text/plain; version=0.0.4; charset=utf-8");
}

/* A reply handle for q that c waits on (its deadline stopped), or NULL
 * after answering 500 when out of memory. */
static bq_admin_reply_t *hold(conn_t *c, const bq_http_request_t *q)
{
    bq_admin_reply_t *r = malloc(sizeof *r);
    if (r == NULL) {
        send_text(c, 500, "out of memory", NULL, false, q->keep_alive);
        return NULL;
    }
    *r = (bq_admin_reply_t){.conn = c, .keep_alive = q->keep_alive};
    c->pending = r;
    uv_timer_stop(&c->timer);
    return r;
}

static void serve_promote(conn_t *c, const bq_http_request_t *q)
{
    const bq_admin_handlers_t *h = &c->a->h;
    char force[4];
    int found = bq_http_query_get(q->query, q->query_len, "force", force, sizeof force);
    if (h->promote == NULL) {
        not_found(c, q);
    } else if (found < 0 || (found && strcmp(force, "0") != 0 && strcmp(force, "1") != 0)) {
        send_text(c, 400, "force must be 0 or 1", NULL, false, q->keep_alive);
    } else {
        bq_admin_reply_t *r = hold(c, q);
        if (r)
            h->promote(h->arg, found && force[0] == '1', r);
    }
}

static void serve_switchover(conn_t *c, const bq_http_request_t *q)
{
    const bq_admin_handlers_t *h = &c->a->h;
    char to[NAME_MAX_LEN];
    if (h->switchover == NULL) {
        not_found(c, q);
    } else if (bq_http_query_get(q->query, q->query_len, "to", to, sizeof to) != 1 ||
               to[0] == '\0') {
        send_text(c, 400, "want to=NODE (1 to 63 of A-Z a-z 0-9 . _ -)", NULL, false,
                  q->keep_alive);
    } else {
        bq_admin_reply_t *r = hold(c, q);
        if (r)
            h->switchover(h->arg, to, r);
    }
}

typedef struct route {
    const char *path;
    bool post; /* POST only; else GET and HEAD */
    void (*serve)(conn_t *c, const bq_http_request_t *q);
} route_t;

static const route_t routes[] = {
    {"/healthz", false, serve_healthz}, {"/readyz", false, serve_readyz},
    {"/status", false, serve_status},   {"/metrics", false, serve_metrics},
    {"/promote", true, serve_promote},  {"/switchover", true, serve_switchover},
};

static void log_post(const conn_t *c, const bq_http_request_t *q)
{
    const char *name = c->tls ? bq_tls_peer_name(c->tls) : NULL;
    bq_log(BQ_LOG_INFO, "admin request",
           "method=POST path=\"%.*s\" query=\"%.*s\" client=%s name=%s", (int)q->path_len, q->path,
           (int)q->query_len, q->query, c->peer, name ? name : "-");
}

/* Routes the request the parser completed. */
static void handle_request(conn_t *c)
{
    const bq_http_request_t *q = &c->req;
    if (q->method == BQ_HTTP_POST)
        log_post(c, q);
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const route_t *rt = &routes[i];
        if (!bq_http_path_is(q, rt->path))
            continue;
        const char *refusal =
            rt->post && q->method == BQ_HTTP_POST
                ? bq_admin_post_refusal(c->a->cfg.tls != NULL, c->tls != NULL,
                                        c->tls ? bq_tls_peer_name(c->tls) : NULL, c->a->cfg.self,
                                        rt->path)
                : NULL;
        if (refusal) {
            bq_log_limited(&c->a->refused_post, BQ_LOG_WARN, "admin request refused",
                           "path=\"%s\" client=%s why=\"%s\"", rt->path, c->peer, refusal);
            send_text(c, 403, refusal, NULL, false, q->keep_alive);
        } else if (rt->post ? q->method == BQ_HTTP_POST
                          : q->method == BQ_HTTP_GET || q->method == BQ_HTTP_HEAD)
            rt->serve(c, q);
        else
            send_text(c, 405, "method not allowed", rt->post ? "POST" : "GET, HEAD", is_head(q),
                      q->keep_alive);
        return;
    }
    not_found(c, q);
}

/* ---- input ----------------------------------------------------------- */

static void timed_out(uv_timer_t *t);

static void restart_deadline(conn_t *c)
{
    unsigned ms = c->a->cfg.request_timeout_ms;
    uv_timer_start(&c->timer, timed_out, ms ? ms : REQUEST_TIMEOUT_MS, 0);
}

/* A request did not arrive whole in time: 408 when one had started. */
static void timed_out(uv_timer_t *t)
{
    conn_t *c = t->data;
    if (c->head_seen > 0)
        send_text(c, 408, "request not received in time", NULL, false, false);
    else
        end_conn(c, true);
}

/* Parses and answers the buffered input, request after request, until it
 * runs out, a handler holds the answer, the output is too far behind, or c
 * closes. Not reentrant: a handler answering at once lands here. */
static void process(conn_t *c)
{
    if (c->processing)
        return;
    c->processing = true;
    size_t at = 0;
    while (!c->closing && !c->pending && c->queued < OUT_HIGH && at < c->in_len) {
        size_t len = c->in_len - at;
        int r = bq_http_parse_request(c->in + at, len, c->head_seen, &c->req);
        if (r == BQ_HTTP_PARTIAL) {
            c->head_seen = len;
            break;
        }
        c->head_seen = 0;
        if (r == BQ_HTTP_ERROR) {
            at = c->in_len; /* c closes: what follows is never parsed */
            send_text(c, c->req.status, c->req.why, NULL, false, false);
        } else {
            handle_request(c); /* its slices are in `in`, unchanged until the memmove */
            at += (size_t)r;
        }
        if (!c->closing && !c->pending)
            restart_deadline(c);
    }
    if (at > 0) {
        memmove(c->in, c->in + at, c->in_len - at);
        c->in_len -= at;
    }
    c->processing = false;
    update_reading(c);
}

/* Plaintext from the socket or the TLS channel: appended to the input. */
static void take_input(void *arg, const uint8_t *data, size_t len)
{
    conn_t *c = arg;
    if (c->closing || c->in_failed)
        return;
    if (c->in_len + len > c->in_cap) {
        size_t cap = c->in_cap ? c->in_cap : 4096;
        while (cap < c->in_len + len)
            cap *= 2;
        char *p = cap <= IN_HARD ? realloc(c->in, cap) : NULL;
        if (p == NULL) {
            c->in_failed = true;
            return;
        }
        c->in = p;
        c->in_cap = cap;
    }
    memcpy(c->in + c->in_len, data, len);
    c->in_len += len;
}

/* Feeds n bytes of ciphertext from rbuf. 0, or -1 with c closing. */
static int feed_tls(conn_t *c, size_t n)
{
    bool established = bq_tls_established(c->tls);
    if (bq_tls_feed(c->tls, (const uint8_t *)c->rbuf, n) == 0)
        return flush_out(c);
    if (!established)
        bq_log_limited(&c->a->tls_refused, BQ_LOG_INFO, "admin TLS client refused",
                       "client=%s err=\"%s\"", c->peer, bq_tls_error(c->tls));
    else
        bq_log(BQ_LOG_DEBUG, "admin TLS connection failed", "client=%s err=\"%s\"", c->peer,
               bq_tls_error(c->tls));
    flush_out(c); /* the alert */
    end_conn(c, true);
    return -1;
}

static void alloc_read(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    conn_t *c = h->data;
    (void)hint;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    (void)buf;
    if (n == 0)
        return;
    if (n < 0) { /* end of input or an error: nothing more will come */
        c->eof = true;
        uv_read_stop(s);
        c->reading = false;
        if (c->draining)
            close_handles(c);
        else
            end_conn(c, n == UV_EOF);
        return;
    }
    if (c->closing)
        return; /* lingering: the bytes are discarded */
    if (c->sniffing) {
        /* Loopback: TLS when it starts like TLS, else plaintext (GET only). */
        c->sniffing = false;
        if ((uint8_t)c->rbuf[0] != TLS_RECORD_HANDSHAKE) {
            bq_tls_free(c->tls);
            c->tls = NULL;
        }
    }
    if (c->tls == NULL)
        take_input(c, (const uint8_t *)c->rbuf, (size_t)n);
    else if (feed_tls(c, (size_t)n) < 0)
        return;
    if (c->in_failed)
        end_conn(c, false);
    else
        process(c);
}

/* ---- accepting ------------------------------------------------------- */

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* Accepts the waiting connection and closes it at once. */
static void refuse_conn(bq_admin_t *a, uv_stream_t *server)
{
    uv_tcp_t *t = malloc(sizeof *t);
    if (t == NULL || uv_tcp_init(a->loop, t) < 0) {
        free(t);
        return;
    }
    uv_accept(server, (uv_stream_t *)t);
    uv_close((uv_handle_t *)t, free_handle);
    bq_log_limited(&a->conn_refused, BQ_LOG_WARN, "admin connection refused",
                   "reason=\"more than %d connections\" addr=%s", MAX_CONNS, a->addr);
}

/* "ip:port" or "[ip]:port" of sa into buf. */
static void format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[64] = "?";
    bool v6 = sa->sa_family == AF_INET6;
    uint16_t port = v6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
                       : ((const struct sockaddr_in *)sa)->sin_port;
    uv_ip_name(sa, ip, sizeof ip);
    snprintf(buf, len, v6 ? "[%s]:%u" : "%s:%u", ip, ntohs(port));
}

/* c's state for admission: a request being answered, a client that
 * proved itself (a verified certificate), one between requests, or one
 * that has proven nothing yet. */
static bq_admit_state_t admit_state(const conn_t *c)
{
    if (c->pending)
        return BQ_ADMIT_BUSY;
    if (c->tls && bq_tls_peer_name(c->tls))
        return BQ_ADMIT_TRUSTED;
    return c->answered && c->head_seen == 0 ? BQ_ADMIT_IDLE : BQ_ADMIT_NEW;
}

/* Admits the new connection c (at the head of the list) or not, closing
 * the one it takes the place of; false when c was refused (closed). */
static bool admit(bq_admin_t *a, conn_t *c)
{
    bq_admit_entry_t open[MAX_CONNS + 8];
    conn_t *who[MAX_CONNS + 8];
    size_t n = 0;
    for (conn_t *o = c->next; o != NULL && n < sizeof open / sizeof open[0]; o = o->next) {
        if (o->closing)
            continue;
        open[n] = (bq_admit_entry_t){.state = admit_state(o), .since = (int64_t)o->since};
        snprintf(open[n].source, sizeof open[n].source, "%s", o->source);
        who[n++] = o;
    }
    bq_admit_limits_t lim = {.max_total = MAX_CONNS, .max_per_source = PER_SOURCE};
    bq_admit_decision_t d = bq_admit_decide(open, n, c->source, &lim);
    if (d.evict >= 0) {
        conn_t *v = who[d.evict];
        bq_log_limited(&a->evict_limit, BQ_LOG_WARN, "admin connection evicted",
                       "client=%s for=%s reason=\"%s\"", v->peer, c->peer,
                       d.per_source ? "too many connections from one address"
                                    : "every connection in use");
        end_conn(v, false);
    }
    if (!d.admit) {
        bq_log_limited(&a->conn_refused, BQ_LOG_WARN, "admin connection refused",
                       "client=%s reason=\"every connection is answering a request\"", c->peer);
        end_conn(c, false);
    }
    return d.admit;
}

/* A new connection: deadline and reading started. */
static void open_conn(bq_admin_t *a, uv_stream_t *server)
{
    conn_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        refuse_conn(a, server);
        return;
    }
    c->a = a;
    uv_tcp_init(a->loop, &c->tcp); /* cannot fail: no socket yet */
    uv_timer_init(a->loop, &c->timer);
    c->tcp.data = c->timer.data = c->shutdown.data = c;
    c->handles = 2;
    c->next = a->conns;
    if (a->conns)
        a->conns->prev = c;
    a->conns = c;
    a->nconns++;
    snprintf(c->peer, sizeof c->peer, "?");
    bq_tls_io_t io = {tls_send, take_input, c};
    if (a->cfg.tls)
        c->tls = bq_tls_new(a->cfg.tls, true, a->cfg.names, a->cfg.nnames, &io);
    if (c->tls) {
        bq_tls_set_channel(c->tls, BQ_TLS_ADMIN);
        bq_tls_peer_optional(c->tls);
    }
    if ((a->cfg.tls && c->tls == NULL) || uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        end_conn(c, false);
        return;
    }
    struct sockaddr_storage ss;
    int sslen = (int)sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0) {
        format_addr((struct sockaddr *)&ss, c->peer, sizeof c->peer);
        uv_ip_name((struct sockaddr *)&ss, c->source, sizeof c->source);
    }
    c->since = uv_now(a->loop);
    c->sniffing = c->tls && a->loopback;
    uv_tcp_nodelay(&c->tcp, 1);
    if (!admit(a, c))
        return;
    restart_deadline(c);
    update_reading(c);
}

/* Connections not closing (closing ones still count in nconns until their
 * handles are closed by the loop: an eviction frees its place at once). */
static int open_conns(const bq_admin_t *a)
{
    int n = 0;
    for (const conn_t *c = a->conns; c != NULL; c = c->next)
        n += !c->closing;
    return n;
}

static void on_connection(uv_stream_t *server, int status)
{
    bq_admin_t *a = server->data;
    if (status < 0)
        bq_log_limited(&a->accept_failed, BQ_LOG_WARN, "admin accept failed", "err=\"%s\"",
                       uv_strerror(status));
    else if (open_conns(a) >= MAX_CONNS + 8 || a->nconns >= 4 * MAX_CONNS)
        refuse_conn(a, server); /* admission evicts first: only busy ones fill it */
    else
        open_conn(a, server);
}

/* ---- starting and stopping ------------------------------------------- */

/* Parses the numeric host and port into ss; sets *loopback for 127.0.0.0/8,
 * ::1 and ::ffff:127.0.0.0/104. 0 or -1. */
static int parse_host(const char *host, int port, struct sockaddr_storage *ss, bool *loopback)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    memset(ss, 0, sizeof *ss);
    if (host == NULL || port < 0 || port > 65535)
        return -1;
    if (uv_ip4_addr(host, port, in4) == 0) {
        *loopback = (ntohl(in4->sin_addr.s_addr) >> 24) == 127;
        return 0;
    }
    if (uv_ip6_addr(host, port, in6) == 0) {
        const uint8_t *b = in6->sin6_addr.s6_addr;
        *loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
                    (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && b[12] == 127);
        return 0;
    }
    return -1;
}

static void listener_closed(uv_handle_t *h)
{
    bq_admin_t *a = h->data;
    a->listener_open = false;
    maybe_free_admin(a);
}

int bq_admin_start(uv_loop_t *loop, const bq_admin_config_t *cfg, const bq_admin_handlers_t *h,
                   bq_admin_t **out)
{
    struct sockaddr_storage ss;
    bool loopback = false;
    *out = NULL;
    if (parse_host(cfg->host, cfg->port, &ss, &loopback) < 0 || (!loopback && !cfg->tls))
        return -EINVAL;
    bq_admin_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        return UV_ENOMEM;
    a->loop = loop;
    a->loopback = loopback;
    a->cfg = *cfg;
    a->h = *h;
    uv_tcp_init(loop, &a->listener); /* cannot fail: no socket yet */
    a->listener.data = a;
    a->listener_open = true;
    int r = uv_tcp_bind(&a->listener, (const struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&a->listener, 128, on_connection);
    int sslen = (int)sizeof ss;
    if (r == 0)
        r = uv_tcp_getsockname(&a->listener, (struct sockaddr *)&ss, &sslen);
    if (r < 0) {
        bq_admin_stop(a);
        return r;
    }
    format_addr((const struct sockaddr *)&ss, a->addr, sizeof a->addr);
    *out = a;
    return 0;
}

void bq_admin_respond(bq_admin_reply_t *r, int status, const char *text)
{
    conn_t *c = r->conn;
    bool keep_alive = r->keep_alive;
    free(r);
    if (c == NULL)
        return; /* the client went away, or the server stopped */
    c->pending = NULL;
    if (status < 100 || status > 599)
        status = 500;
    send_text(c, status, text ? text : "", NULL, false, keep_alive);
    if (c->closing)
        return;
    restart_deadline(c);
    process(c); /* the requests that waited; a no-op when answered from the handler */
}

const char *bq_admin_address(const bq_admin_t *a)
{
    return a->addr;
}

void bq_admin_stop(bq_admin_t *a)
{
    if (a == NULL)
        return;
    a->stopping = true;
    uv_close((uv_handle_t *)&a->listener, listener_closed);
    for (conn_t *c = a->conns; c != NULL; c = c->next) {
        end_conn(c, false);
        close_handles(c); /* also those lingering */
    }
}
