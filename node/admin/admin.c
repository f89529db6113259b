/* The admin HTTP server (see admin.h): a libuv listener, up to MAX_CONNS
 * connections, each parsing requests with node/admin/http_request.c and answering
 * them in order, on a stream (replication/stream.h), in TLS when the
 * configuration has a context (required off loopback). The stream carries
 * the bytes; this file keeps the HTTP requests and answers, deadlines and
 * admission.
 *
 * Input: the plaintext bytes of a connection are appended to its input
 * buffer and parsed where they are (node/admin/http_request.h), one request at a
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
 * end of input or on a timeout, the connection is shut down gracefully
 * (BQ_STREAM_LINGER): the queued answers leave, then FIN, then the client's
 * further bytes are read and discarded until it closes too or
 * BQ_STREAM_LINGER_MS passes, so that unread
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
#include "replication/stream.h"

#define MAX_CONNS 64
#define PER_SOURCE 16 /* a kubelet's probes share one address, as may clients behind a NAT */
#define REQUEST_TIMEOUT_MS 5000
#define READ_CHUNK 16384
#define IN_SOFT ((size_t)32 * 1024)   /* reading stops while this much input waits */
#define IN_HARD ((size_t)128 * 1024)  /* more buffered input than this closes the connection */
#define OUT_HIGH ((size_t)256 * 1024) /* parsing pauses until answers fall below half */
#define NAME_MAX_LEN 64               /* node names are 1 to 63 bytes (node/base/flags.c) */

typedef struct conn conn_t;

struct bq_admin_reply {
    conn_t *conn; /* NULL once the connection is gone */
    bool keep_alive;
    bool head; /* a HEAD request: the answer has no body */
};

struct conn {
    bq_admin_t *a;
    conn_t *prev, *next;
    bq_stream_t *s;   /* the connection, plaintext or TLS */
    uv_timer_t timer; /* the request deadline */
    bool in_failed;   /* the input buffer could not grow */
    char *in;         /* plaintext not parsed yet */
    size_t in_len, in_cap;
    bq_http_request_t req;     /* the request being parsed, its slices in `in` */
    size_t head_seen;          /* bytes of a partial head already parsed; 0 between requests */
    bq_admin_reply_t *pending; /* the request being answered by a handler */
    bool processing, closing;
    bool answered;  /* at least one answer sent: between requests it is idle */
    int handles;    /* the stream and the timer, until both have closed */
    uint64_t since; /* loop ms when it opened or was last answered */
    char peer[64];
    char source[BQ_ADMIT_SOURCE_MAX]; /* the client's address, without port */
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

static void process(conn_t *c);

/* ---- freeing and closing --------------------------------------------- */

static void maybe_free_admin(bq_admin_t *a)
{
    if (a->stopping && !a->listener_open && a->conns == NULL)
        free(a);
}

/* The stream or the timer has closed: c is freed after both. */
static void release(conn_t *c)
{
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
    free(c->in);
    free(c);
    maybe_free_admin(a);
}

static void timer_closed(uv_handle_t *h)
{
    release(h->data);
}

static void stream_closed(bq_stream_t *s, void *arg)
{
    (void)s;
    release(arg);
}

/* Reads while less than IN_SOFT bytes of input wait (the stream reads to
 * discard while it lingers). */
static void update_reading(conn_t *c)
{
    if (!c->closing)
        bq_stream_read(c->s, c->in_len < IN_SOFT);
}

/* Closes c, gracefully (queued answers leave, then FIN, then lingering
 * reads) or at once. Detaches a pending reply. Acts once. */
static void end_conn(conn_t *c, bool graceful)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->timer, timer_closed);
    if (c->pending) {
        c->pending->conn = NULL;
        c->pending = NULL;
    }
    bq_stream_close(c->s, graceful ? BQ_STREAM_LINGER : BQ_STREAM_ABORT);
}

/* ---- answers --------------------------------------------------------- */

static const char TEXT[] = "text/plain; charset=utf-8";

typedef struct resp {
    int status;
    const char *type;  /* Content-Type */
    const char *allow; /* the Allow header's value, or NULL */
    const char *body;
    size_t len;
    const char *extra; /* more header lines, each ending in CRLF, or NULL */
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
                     "Cache-Control: no-store\r\nConnection: %s\r\n",
                     r->status, reason(r->status), r->type, r->len, r->allow ? "Allow: " : "",
                     r->allow ? r->allow : "", r->allow ? "\r\n" : "",
                     keep_alive ? "keep-alive" : "close");
    size_t elen = r->extra ? strlen(r->extra) : 0;
    size_t blen = head ? 0 : r->len;
    char *data = n > 0 && (size_t)n < sizeof hdr ? malloc((size_t)n + elen + 2 + blen) : NULL;
    if (data == NULL) {
        end_conn(c, false);
        return;
    }
    memcpy(data, hdr, (size_t)n);
    if (elen > 0)
        memcpy(data + n, r->extra, elen);
    memcpy(data + n + elen, "\r\n", 2);
    if (blen > 0)
        memcpy(data + n + elen + 2, r->body, blen);
    bq_stream_write(c->s, (uint8_t *)data, (size_t)n + elen + 2 + blen); /* a failure ends c */
    c->answered = true;
    c->since = uv_now(c->a->loop);
    if (!keep_alive)
        end_conn(c, true);
}

/* text with a final newline: new (free it), its length in *n; NULL when
 * out of memory. */
static char *text_body(const char *text, size_t *n)
{
    *n = strlen(text);
    char *body = malloc(*n + 2);
    if (body == NULL)
        return NULL;
    memcpy(body, text, *n);
    if (*n == 0 || text[*n - 1] != '\n')
        body[(*n)++] = '\n';
    return body;
}

/* Answers with text and a final newline as a text/plain body. */
static void send_text(conn_t *c, int status, const char *text, const char *allow, bool head,
                      bool keep_alive)
{
    size_t n;
    char *body = text_body(text, &n);
    if (body == NULL) {
        end_conn(c, false);
        return;
    }
    resp_t r = {status, TEXT, allow, body, n, NULL};
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
    resp_t r = {200, type, NULL, doc, strlen(doc), NULL};
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
    *r = (bq_admin_reply_t){.conn = c, .keep_alive = q->keep_alive, .head = is_head(q)};
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

/* The console's paths: "/", "/ui" and under it, "/api/" and under it. */
static bool is_console_path(const bq_http_request_t *q)
{
    return bq_http_path_is(q, "/") || bq_http_path_is(q, "/ui") ||
           (q->path_len >= 4 && memcmp(q->path, "/ui/", 4) == 0) ||
           (q->path_len >= 5 && memcmp(q->path, "/api/", 5) == 0);
}

/* Hands a console request to its handler, which answers through a reply
 * handle, now or later. */
static void serve_console(conn_t *c, const bq_http_request_t *q)
{
    const bq_admin_handlers_t *h = &c->a->h;
    if (h->console == NULL) {
        not_found(c, q);
        return;
    }
    bq_admin_request_t req = {.http = q,
                              .over_tls = bq_stream_is_tls(c->s),
                              .tls_configured = c->a->cfg.tls != NULL,
                              .cert_name = bq_stream_peer_name(c->s),
                              .source = c->source};
    bq_admin_reply_t *r = hold(c, q);
    if (r)
        h->console(h->arg, &req, r);
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
    const char *name = bq_stream_peer_name(c->s);
    bq_log(BQ_LOG_INFO, "admin request",
           "method=POST path=\"%.*s\" query=\"%.*s\" client=%s name=%s", (int)q->path_len, q->path,
           (int)q->query_len, q->query, c->peer, name ? name : "-");
}

/* Routes the request the parser completed. */
static void handle_request(conn_t *c)
{
    const bq_http_request_t *q = &c->req;
    if (is_console_path(q)) {
        serve_console(c, q); /* the console logs its own actions */
        return;
    }
    if (q->method == BQ_HTTP_POST)
        log_post(c, q);
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const route_t *rt = &routes[i];
        if (!bq_http_path_is(q, rt->path))
            continue;
        const char *refusal =
            rt->post && q->method == BQ_HTTP_POST
                ? bq_admin_post_refusal(c->a->cfg.tls != NULL, bq_stream_is_tls(c->s),
                                        bq_stream_peer_name(c->s), c->a->cfg.self, rt->path)
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
    while (!c->closing && !c->pending && bq_stream_queued(c->s) < OUT_HIGH && at < c->in_len) {
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

/* Plaintext from the stream: appended to the input. */
static void take_input(conn_t *c, const uint8_t *data, size_t len)
{
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

static void stream_data(bq_stream_t *s, const uint8_t *data, size_t len, void *arg)
{
    conn_t *c = arg;
    (void)s;
    take_input(c, data, len);
    if (c->in_failed)
        end_conn(c, false);
    else
        process(c);
}

/* The answers fell below OUT_HIGH / 2: parsing goes on. */
static void stream_drain(bq_stream_t *s, void *arg)
{
    conn_t *c = arg;
    (void)s;
    if (!c->closing && c->in_len > 0)
        process(c);
}

/* The end of input (answered, then closed), a failed TLS handshake (logged
 * and counted, closed after its alert) or another failure (closed at once). */
static void stream_error(bq_stream_t *s, int err, const char *why, void *arg)
{
    conn_t *c = arg;
    (void)s;
    const char *tls_err = strncmp(why, "tls: ", 5) == 0 ? why + 5 : why;
    if (err == BQ_STREAM_ETLS_HANDSHAKE)
        bq_log_limited(&c->a->tls_refused, BQ_LOG_INFO, "admin TLS client refused",
                       "client=%s err=\"%s\"", c->peer, tls_err);
    else if (err == BQ_STREAM_ETLS)
        bq_log(BQ_LOG_DEBUG, "admin TLS connection failed", "client=%s err=\"%s\"", c->peer,
               tls_err);
    end_conn(c, err == UV_EOF || err == BQ_STREAM_ETLS_HANDSHAKE || err == BQ_STREAM_ETLS);
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

/* c's state for admission: a request being answered, a client that
 * proved itself (a verified certificate), one between requests, or one
 * that has proven nothing yet. */
static bq_admit_state_t admit_state(const conn_t *c)
{
    if (c->pending)
        return BQ_ADMIT_BUSY;
    if (bq_stream_peer_name(c->s))
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
    const bq_admin_config_t *cfg = &a->cfg;
    bq_stream_config_t scfg = {.tls = cfg->tls,
                               .server = true,
                               .names = cfg->names,
                               .nnames = cfg->nnames,
                               .channel = BQ_TLS_ADMIN,
                               .peer_optional = true,
                               .sniff = a->loopback,
                               .read_size = READ_CHUNK,
                               .high_water = OUT_HIGH,
                               .low_water = OUT_HIGH / 2};
    static const bq_stream_callbacks_t scbs = {NULL, stream_data, stream_drain, stream_error,
                                               stream_closed};
    conn_t *c = calloc(1, sizeof *c);
    bq_stream_t *s = c ? bq_stream_new(a->loop, &scfg, &scbs, c) : NULL;
    if (s == NULL) {
        free(c);
        refuse_conn(a, server);
        return;
    }
    c->a = a;
    c->s = s;
    uv_timer_init(a->loop, &c->timer);
    c->timer.data = c;
    c->handles = 2;
    c->next = a->conns;
    if (a->conns)
        a->conns->prev = c;
    a->conns = c;
    a->nconns++;
    snprintf(c->peer, sizeof c->peer, "?");
    if (bq_stream_accept(s, server) < 0) {
        end_conn(c, false);
        return;
    }
    if (bq_stream_peer_addr(s)[0] != '\0')
        snprintf(c->peer, sizeof c->peer, "%s", bq_stream_peer_addr(s));
    snprintf(c->source, sizeof c->source, "%s", bq_stream_peer_ip(s));
    c->since = uv_now(a->loop);
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
    bq_stream_format_addr((const struct sockaddr *)&ss, a->addr, sizeof a->addr);
    *out = a;
    return 0;
}

/* Consumes r and answers its connection with resp (dropped when the client
 * went away), then parses the requests that waited. */
static void answer_held(bq_admin_reply_t *r, resp_t *resp)
{
    conn_t *c = r->conn;
    bool keep_alive = r->keep_alive, head = r->head;
    free(r);
    if (c == NULL)
        return; /* the client went away, or the server stopped */
    c->pending = NULL;
    if (resp->status < 100 || resp->status > 599)
        resp->status = 500;
    send_response(c, resp, head, keep_alive);
    if (c->closing)
        return;
    restart_deadline(c);
    process(c); /* the requests that waited; a no-op when answered from the handler */
}

void bq_admin_respond(bq_admin_reply_t *r, int status, const char *text)
{
    size_t n;
    char *body = text_body(text ? text : "", &n);
    resp_t resp = {body ? status : 500,
                   TEXT,
                   NULL,
                   body ? body : "out of memory\n",
                   body ? n : strlen("out of memory\n"),
                   NULL};
    answer_held(r, &resp);
    free(body);
}

void bq_admin_answer(bq_admin_reply_t *r, const bq_admin_answer_t *ans)
{
    resp_t resp = {ans->status, ans->type, NULL, ans->body, ans->len, ans->headers};
    answer_held(r, &resp);
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
        bq_stream_close(c->s, BQ_STREAM_ABORT); /* also those lingering */
    }
}
