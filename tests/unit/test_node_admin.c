/* Unit tests of node/admin/admin.c, the admin HTTP server, on a real libuv loop
 * over 127.0.0.1 (port 0): fake handlers stand in for the node, and clients
 * on the same loop (raw uv_tcp_t, or the replication TLS channel for HTTPS)
 * send requests and collect what comes back until the server closes.
 * Covers every route and HEAD, 404/405 with Allow, the refusals (400, 413,
 * 414, 431, 501, 505), pipelined keep-alive requests, HTTP/1.0, mutating
 * requests answered at once, later from a timer (the next pipelined request
 * waits) and after the client went away or the server stopped, the
 * admission (a flood of idle connections never keeps a probe out), the
 * request deadline (a slow trickle gets 408), and TLS: no plaintext off
 * loopback; GETs served to clients without an allowed certificate (none, a
 * name not allowed, a forged one, plaintext on loopback) whose POSTs get
 * 403; the operator's certificate may POST anything, the node's own only a
 * switchover. Certificates come from
 * deploy/mkcerts. Every wait runs the loop until a condition holds, under a
 * uv_timer deadline that fails the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/admin/admin.h"
#include "replication/tls.h"
#include "tls_certs.h"

#define DEADLINE_MS 10000
#define MAX_CLIENTS 80
#define CLIENT_BUF 65536

typedef struct client {
    uv_tcp_t tcp;
    uv_connect_t connect;
    bq_tls_t *tls; /* NULL in plaintext */
    SSL_CTX *ctx;  /* owned, for TLS */
    const char *req;
    size_t req_len;
    int writes; /* unfinished */
    bool used, connected, sent, eof, failed, closing, closed;
    bool close_after_send; /* close the socket once the request is written */
    char err[256];
    char buf[CLIENT_BUF]; /* what the server sent (plaintext), NUL-terminated */
    size_t len;
} client_t;

typedef struct fake {
    bool ready, status_null;
    int promotes, switchovers;
    bool force;
    char to[64];
    int answer_now;         /* promote: answer at once with this status; 0: hold */
    unsigned later_ms;      /* when holding: answer from a timer after this long */
    bq_admin_reply_t *held; /* a held promote */
    client_t *watch;        /* its received length is noted when the timer answers */
    long len_at_answer;
    uv_timer_t later;
} fake_t;

typedef struct world {
    uv_loop_t loop;
    uv_timer_t deadline, trickle;
    bool expired;
    bq_admin_t *admin;
    int port;
    fake_t fake;
    client_t clients[MAX_CLIENTS];
    int nclients;
    client_t *trickling;
    size_t trickled;
    SSL_CTX *sctx;
} world_t;

static world_t *W;

static void expire(uv_timer_t *t)
{
    (void)t;
    W->expired = true;
}

/* Runs the loop until cond holds; fails the test after DEADLINE_MS. */
#define RUN_UNTIL(cond)                                                                            \
    do {                                                                                           \
        W->expired = false;                                                                        \
        uv_timer_start(&W->deadline, expire, DEADLINE_MS, 0);                                      \
        while (!(cond) && !W->expired)                                                             \
            uv_run(&W->loop, UV_RUN_ONCE);                                                         \
        uv_timer_stop(&W->deadline);                                                               \
        if (!(cond))                                                                               \
            fail_msg("timed out waiting for %s", #cond);                                           \
    } while (0)

/* ---- fake node ------------------------------------------------------- */

static bool fake_ready(void *arg, char *why, size_t len)
{
    fake_t *f = arg;
    if (!f->ready)
        snprintf(why, len, "no primary known");
    return f->ready;
}

static char *fake_status(void *arg)
{
    fake_t *f = arg;
    return f->status_null ? NULL : strdup("{\"role\":\"primary\",\"epoch\":3}");
}

static char *fake_metrics(void *arg)
{
    (void)arg;
    return strdup("# TYPE bq_up gauge\nbq_up 1\n");
}

static void answer_later(uv_timer_t *t)
{
    fake_t *f = t->data;
    f->len_at_answer = f->watch ? (long)f->watch->len : -1;
    bq_admin_reply_t *r = f->held;
    f->held = NULL;
    bq_admin_respond(r, 200, "promoted");
}

static void fake_promote(void *arg, bool force, bq_admin_reply_t *r)
{
    fake_t *f = arg;
    f->promotes++;
    f->force = force;
    if (f->answer_now) {
        bq_admin_respond(r, f->answer_now, "promoted at once");
        return;
    }
    f->held = r;
    if (f->later_ms)
        uv_timer_start(&f->later, answer_later, f->later_ms, 0);
}

static void fake_switchover(void *arg, const char *to, bq_admin_reply_t *r)
{
    fake_t *f = arg;
    f->switchovers++;
    snprintf(f->to, sizeof f->to, "%s", to);
    bq_admin_respond(r, 202, "switching over");
}

static const bq_admin_handlers_t handlers = {
    NULL, fake_ready, fake_status, fake_metrics, fake_promote, fake_switchover, NULL};

/* ---- clients --------------------------------------------------------- */

static void client_closed(uv_handle_t *h)
{
    client_t *c = h->data;
    c->closed = true;
}

static void client_close(client_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, client_closed);
}

typedef struct cwrite {
    uv_write_t req;
    client_t *c;
    char data[];
} cwrite_t;

static void client_written(uv_write_t *req, int status)
{
    cwrite_t *w = (cwrite_t *)req;
    client_t *c = w->c;
    (void)status;
    free(w);
    if (--c->writes == 0 && c->sent && c->close_after_send)
        client_close(c);
}

static void raw_write(client_t *c, const void *data, size_t len)
{
    if (c->closing)
        return;
    cwrite_t *w = malloc(sizeof *w + len);
    assert_non_null(w);
    w->c = c;
    memcpy(w->data, data, len);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    c->writes++;
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, client_written) < 0) {
        c->writes--;
        free(w);
    }
}

static void tls_send(void *arg, const uint8_t *data, size_t len)
{
    raw_write(arg, data, len);
}

static void take_plain(void *arg, const uint8_t *data, size_t len)
{
    client_t *c = arg;
    assert_true(c->len + len < sizeof c->buf);
    memcpy(c->buf + c->len, data, len);
    c->len += len;
    c->buf[c->len] = '\0';
}

/* Sends the request once connected (and TLS established). */
static void maybe_send(client_t *c)
{
    if (c->sent || c->req == NULL || !c->connected || c->closing)
        return;
    if (c->tls && !bq_tls_established(c->tls))
        return;
    c->sent = true;
    if (c->tls)
        bq_tls_write(c->tls, (const uint8_t *)c->req, c->req_len);
    else
        raw_write(c, c->req, c->req_len);
    if (c->writes == 0 && c->close_after_send)
        client_close(c);
}

static void client_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char rbuf[65536];
    (void)h;
    (void)hint;
    *buf = uv_buf_init(rbuf, sizeof rbuf);
}

static void client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    client_t *c = s->data;
    if (n == 0)
        return;
    if (n < 0) {
        c->eof = true;
        client_close(c);
        return;
    }
    if (c->tls == NULL) {
        take_plain(c, (const uint8_t *)buf->base, (size_t)n);
    } else if (bq_tls_feed(c->tls, (const uint8_t *)buf->base, (size_t)n) < 0) {
        /* The server's close_notify ends the stream as the channel sees it. */
        snprintf(c->err, sizeof c->err, "%s", bq_tls_error(c->tls));
        c->failed = strstr(c->err, "close_notify") == NULL;
        c->eof = !c->failed;
        client_close(c);
        return;
    }
    maybe_send(c);
}

static void client_connected(uv_connect_t *req, int status)
{
    client_t *c = req->data;
    if (status < 0) {
        c->failed = true;
        client_close(c);
        return;
    }
    c->connected = true;
    assert_int_equal(uv_read_start((uv_stream_t *)&c->tcp, client_alloc, client_read), 0);
    if (c->tls)
        assert_int_equal(bq_tls_start(c->tls), 0);
    maybe_send(c);
}

/* A new client connecting to the server; sends req (borrowed; NULL: nothing)
 * once connected. With ctx (taken over), through TLS expecting "alpha". */
static client_t *client_open(const char *req, SSL_CTX *ctx)
{
    assert_true(W->nclients < MAX_CLIENTS);
    client_t *c = &W->clients[W->nclients++];
    c->used = true;
    c->req = req;
    c->req_len = req ? strlen(req) : 0;
    c->ctx = ctx;
    if (ctx) {
        static const char *const server_names[] = {"alpha"};
        bq_tls_io_t io = {tls_send, take_plain, c};
        c->tls = bq_tls_new(ctx, false, server_names, 1, &io);
        assert_non_null(c->tls);
    }
    assert_int_equal(uv_tcp_init(&W->loop, &c->tcp), 0);
    c->tcp.data = c->connect.data = c;
    struct sockaddr_in sa;
    assert_int_equal(uv_ip4_addr("127.0.0.1", W->port, &sa), 0);
    assert_int_equal(uv_tcp_connect(&c->connect, &c->tcp, (struct sockaddr *)&sa, client_connected),
                     0);
    return c;
}

/* One request on a new connection, until the server closes it. */
static client_t *exchange(const char *req)
{
    client_t *c = client_open(req, NULL);
    RUN_UNTIL(c->closed);
    return c;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what))
        n++;
    return n;
}

static void count_tcp(uv_handle_t *h, void *arg)
{
    if (h->type == UV_TCP && !uv_is_closing(h))
        (*(int *)arg)++;
}

/* Connections the server holds: the loop's open TCP handles other than the
 * clients' and the listener. */
static int server_conns(void)
{
    int n = 0;
    uv_walk(&W->loop, count_tcp, &n);
    for (int i = 0; i < W->nclients; i++)
        if (!uv_is_closing((uv_handle_t *)&W->clients[i].tcp))
            n--;
    return n - 1;
}

/* ---- setup ----------------------------------------------------------- */

static int setup_certs(void **state)
{
    (void)state;
    if (make_certs("/tmp/bq-admin-XXXXXX", "alpha beta beanstalkctl") != 0)
        return -1;
    /* Self-signed, claiming an allowed name: must not be trusted. */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
             "-keyout '%s/forged.key' -out '%s/forged.pem' -subj /CN=beanstalkctl "
             "-addext subjectAltName=DNS:beanstalkctl >/dev/null 2>&1",
             dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int setup(void **state)
{
    (void)state;
    W = calloc(1, sizeof *W);
    assert_non_null(W);
    assert_int_equal(uv_loop_init(&W->loop), 0);
    uv_timer_init(&W->loop, &W->deadline);
    uv_timer_init(&W->loop, &W->trickle);
    uv_timer_init(&W->loop, &W->fake.later);
    W->fake.later.data = &W->fake;
    W->fake.ready = true;
    return 0;
}

static const char *const client_names[] = {"beanstalkctl", "beta"};

/* Starts the server on 127.0.0.1, port 0; tls (borrowed) may be NULL. */
static void start(unsigned timeout_ms, SSL_CTX *tls)
{
    bq_admin_handlers_t h = handlers;
    h.arg = &W->fake;
    bq_admin_config_t cfg = {.host = "127.0.0.1",
                             .port = 0,
                             .tls = tls,
                             .names = client_names,
                             .nnames = 2,
                             .self = "beta",
                             .request_timeout_ms = timeout_ms};
    assert_int_equal(bq_admin_start(&W->loop, &cfg, &h, &W->admin), 0);
    const char *addr = bq_admin_address(W->admin);
    assert_memory_equal(addr, "127.0.0.1:", 10);
    W->port = atoi(addr + 10);
    assert_true(W->port > 0);
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < W->nclients; i++)
        client_close(&W->clients[i]);
    if (W->admin)
        bq_admin_stop(W->admin);
    if (W->fake.held) /* still valid after the server stopped */
        bq_admin_respond(W->fake.held, 200, "too late");
    uv_close((uv_handle_t *)&W->deadline, NULL);
    uv_close((uv_handle_t *)&W->trickle, NULL);
    uv_close((uv_handle_t *)&W->fake.later, NULL);
    uv_run(&W->loop, UV_RUN_DEFAULT);
    int r = uv_loop_close(&W->loop);
    for (int i = 0; i < W->nclients; i++) {
        bq_tls_free(W->clients[i].tls);
        SSL_CTX_free(W->clients[i].ctx);
    }
    SSL_CTX_free(W->sctx);
    free(W);
    return r == 0 ? 0 : -1; /* every handle was closed */
}

/* ---- routes ---------------------------------------------------------- */

static void routes_answer_with_their_content(void **state)
{
    (void)state;
    start(0, NULL);
    client_t *c = exchange("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_string_equal(c->buf, "HTTP/1.1 200 OK\r\n"
                                "Content-Type: text/plain; charset=utf-8\r\n"
                                "Content-Length: 3\r\n"
                                "Cache-Control: no-store\r\n"
                                "Connection: close\r\n\r\nok\n");
    assert_true(c->eof);

    c = exchange("GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(c->buf, "\r\n\r\nready\n"));
    W->fake.ready = false;
    c = exchange("GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(c->buf, "\r\n\r\nno primary known\n"));

    c = exchange("GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                   "Content-Length: 28\r\n"));
    assert_non_null(strstr(c->buf, "\r\n\r\n{\"role\":\"primary\",\"epoch\":3}"));

    c = exchange("HEAD /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "Content-Length: 28\r\n"));
    assert_int_equal(strstr(c->buf, "\r\n\r\n") + 4 - c->buf, (long)c->len); /* no body */

    c = exchange("GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
    assert_non_null(strstr(c->buf, "\r\n\r\n# TYPE bq_up gauge\nbq_up 1\n"));

    W->fake.status_null = true;
    c = exchange("GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 500 Internal Server Error\r\n"));
}

static void unknown_path_and_wrong_method(void **state)
{
    (void)state;
    start(0, NULL);
    client_t *c = exchange("GET /nope HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 404 Not Found\r\n"));
    c = exchange("GET /healthz/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 404 Not Found\r\n"));
    c = exchange("POST /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 405 Method Not Allowed\r\n"));
    assert_non_null(strstr(c->buf, "Allow: GET, HEAD\r\n"));
    c = exchange("GET /promote HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 405 Method Not Allowed\r\n"));
    assert_non_null(strstr(c->buf, "Allow: POST\r\n"));
    c = exchange("DELETE /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 405 Method Not Allowed\r\n"));
    c = exchange("HEAD /promote HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "Allow: POST\r\n"));
    assert_int_equal(strstr(c->buf, "\r\n\r\n") + 4 - c->buf, (long)c->len);
    assert_int_equal(W->fake.promotes, 0);
}

static void refusals_close_the_connection(void **state)
{
    (void)state;
    start(0, NULL);
    static char big_header[10000], long_line[3000], many[4096];
    snprintf(big_header, sizeof big_header, "GET / HTTP/1.1\r\nHost: a\r\nX: %09000d\r\n\r\n", 0);
    snprintf(long_line, sizeof long_line, "GET /%02500d HTTP/1.1\r\nHost: a\r\n\r\n", 0);
    size_t n = (size_t)snprintf(many, sizeof many, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i < 65; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "X-%d: %d\r\n", i, i);
    snprintf(many + n, sizeof many - n, "\r\n");
    const struct {
        const char *req, *status;
    } cases[] = {
        {"POST /promote HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
         "413 Content Too Large"},
        {big_header, "431 Request Header Fields Too Large"},
        {many, "431 Request Header Fields Too Large"},
        {long_line, "414 URI Too Long"},
        {"GET / HTTP/1.1\r\n\r\n", "400 Bad Request"},
        {"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", "400 Bad Request"},
        {"POST /promote HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         "501 Not Implemented"},
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", "505 HTTP Version Not Supported"},
        {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "400 Bad Request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        client_t *c = exchange(cases[i].req);
        char want[128];
        snprintf(want, sizeof want, "HTTP/1.1 %s\r\n", cases[i].status);
        if (strncmp(c->buf, want, strlen(want)) != 0)
            fail_msg("case %zu: got \"%.60s\", want \"%s\"", i, c->buf, want);
        assert_non_null(strstr(c->buf, "Connection: close\r\n"));
        assert_int_equal(count(c->buf, "HTTP/1.1 "), 1);
        assert_true(c->eof);
    }
    assert_int_equal(W->fake.promotes, 0);
}

static void pipelined_requests_on_keep_alive(void **state)
{
    (void)state;
    start(0, NULL);
    client_t *c = exchange("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
                           "HEAD /readyz HTTP/1.1\r\nHost: a\r\n\r\n"
                           "POST /switchover?to=beta HTTP/1.1\r\nHost: a\r\n\r\n"
                           "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
                           "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_int_equal(count(c->buf, "HTTP/1.1 "), 4); /* nothing after Connection: close */
    const char *ok = strstr(c->buf, "\r\n\r\nok\n");
    const char *head = strstr(c->buf, "Content-Length: 6\r\n"); /* "ready\n", body left out */
    const char *sw = strstr(c->buf, "HTTP/1.1 202 Accepted\r\n");
    const char *metrics = strstr(c->buf, "bq_up 1\n");
    assert_true(ok && head && sw && metrics);
    assert_true(ok < head && head < sw && sw < metrics);
    assert_null(strstr(c->buf, "ready\n"));
    assert_int_equal(count(c->buf, "Connection: keep-alive\r\n"), 3);
    assert_int_equal(W->fake.switchovers, 1);
    assert_string_equal(W->fake.to, "beta");

    /* HTTP/1.0 closes after one answer unless asked to keep alive. */
    c = exchange("GET /healthz HTTP/1.0\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n");
    assert_int_equal(count(c->buf, "HTTP/1.1 200 OK"), 1);
    c = exchange(
        "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n");
    assert_int_equal(count(c->buf, "HTTP/1.1 200 OK"), 2);
}

/* ---- mutating requests ----------------------------------------------- */

static void promote_answered_later_holds_the_next_request(void **state)
{
    (void)state;
    start(0, NULL);
    W->fake.later_ms = 50;
    client_t *c = client_open("POST /promote?force=1 HTTP/1.1\r\nHost: a\r\n\r\n"
                              "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                              NULL);
    W->fake.watch = c;
    RUN_UNTIL(c->closed);
    assert_int_equal(W->fake.promotes, 1);
    assert_true(W->fake.force);
    assert_int_equal(W->fake.len_at_answer, 0); /* the GET was not answered before */
    const char *promoted = strstr(c->buf, "HTTP/1.1 200 OK\r\n");
    const char *body = strstr(c->buf, "\r\n\r\npromoted\n");
    const char *ok = strstr(c->buf, "\r\n\r\nok\n");
    assert_true(promoted == c->buf && body && ok && body < ok);

    W->fake.answer_now = 409;
    c = exchange("POST /promote?force=0 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 409 Conflict\r\n"));
    assert_non_null(strstr(c->buf, "\r\n\r\npromoted at once\n"));
    assert_false(W->fake.force);
    assert_int_equal(W->fake.promotes, 2);
}

static void mutating_requests_check_their_query(void **state)
{
    (void)state;
    start(0, NULL);
    W->fake.answer_now = 200;
    const char *bad[] = {
        "POST /promote?force=2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "POST /promote?force=1&force=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "POST /switchover HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "POST /switchover?to= HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "POST /switchover?to=a%20b HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "POST /switchover?to=a%2Fb HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        client_t *c = exchange(bad[i]);
        assert_non_null(strstr(c->buf, "HTTP/1.1 400 Bad Request\r\n"));
    }
    assert_int_equal(W->fake.promotes + W->fake.switchovers, 0);
    client_t *c = exchange("POST /switchover?x=1&to=n%2D2 HTTP/1.1\r\nHost: a\r\n"
                           "Connection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 202 Accepted\r\n"));
    assert_string_equal(W->fake.to, "n-2");
    c = exchange("POST /promote HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n"
                 "Connection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 200 OK\r\n"));
    assert_false(W->fake.force);
}

static void client_gone_before_the_answer(void **state)
{
    (void)state;
    start(0, NULL);
    client_t *c = client_open("POST /promote HTTP/1.1\r\nHost: a\r\n\r\n", NULL);
    c->close_after_send = true;
    RUN_UNTIL(W->fake.promotes == 1 && c->closed && server_conns() == 0);
    bq_admin_reply_t *r = W->fake.held;
    W->fake.held = NULL;
    bq_admin_respond(r, 200, "nobody listens"); /* only frees r */
    c = exchange("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(c->buf, "HTTP/1.1 200 OK\r\n"));
}

static void stop_with_an_answer_pending(void **state)
{
    (void)state;
    start(0, NULL);
    client_t *c = client_open("POST /promote HTTP/1.1\r\nHost: a\r\n\r\n", NULL);
    RUN_UNTIL(W->fake.promotes == 1);
    bq_admin_stop(W->admin);
    W->admin = NULL;
    RUN_UNTIL(c->closed);
    assert_int_equal(c->len, 0);
    assert_non_null(W->fake.held); /* answered in teardown, after the loop ran */
}

/* ---- limits ---------------------------------------------------------- */

/* A flood of connections that never send a request, or idle keep-alive
 * ones, from one address: each newcomer takes the place of that address's
 * oldest (16 at most stay), so a probe always gets in and is answered. */
static void flood_never_keeps_a_probe_out(void **state)
{
    (void)state;
    start(0, NULL);
    client_t *first = client_open(NULL, NULL);
    client_t *kept = client_open("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n", NULL);
    RUN_UNTIL(count(kept->buf, "HTTP/1.1 200 OK\r\n") == 1); /* now idle, kept alive */
    for (int i = 0; i < 60; i++)
        client_open(NULL, NULL);
    RUN_UNTIL(first->closed && kept->closed); /* the oldest went first */
    RUN_UNTIL(server_conns() <= 16);
    assert_int_equal(first->len, 0);
    client_t *probe = exchange("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert_non_null(strstr(probe->buf, "HTTP/1.1 200 OK\r\n"));
}

static void trickle_byte(uv_timer_t *t)
{
    (void)t;
    client_t *c = W->trickling;
    if (c->connected && !c->closing && W->trickled < c->req_len)
        raw_write(c, c->req + W->trickled++, 1);
}

static void slow_requests_time_out(void **state)
{
    (void)state;
    start(200, NULL);
    client_t *partial = client_open("GET /healthz HTTP/1.1\r\nHost: a\r\n", NULL);
    client_t *idle = client_open(NULL, NULL);
    client_t *kept = client_open("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n", NULL);
    /* One byte every 20 ms: each arrives in time, the whole request does not. */
    client_t *slow = client_open(NULL, NULL);
    W->trickling = slow;
    slow->req = "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n";
    slow->req_len = strlen(slow->req);
    uv_timer_start(&W->trickle, trickle_byte, 20, 20);
    RUN_UNTIL(partial->closed && idle->closed && kept->closed && slow->closed);
    uv_timer_stop(&W->trickle);
    assert_non_null(strstr(partial->buf, "HTTP/1.1 408 Request Timeout\r\n"));
    assert_non_null(strstr(partial->buf, "Connection: close\r\n"));
    assert_int_equal(idle->len, 0);
    assert_true(idle->eof);
    assert_int_equal(count(kept->buf, "HTTP/1.1 200 OK\r\n"), 1); /* then closed when idle */
    assert_true(kept->eof);
    assert_non_null(strstr(slow->buf, "HTTP/1.1 408 Request Timeout\r\n"));
    assert_true(W->trickled < slow->req_len);
}

/* ---- addresses and TLS ----------------------------------------------- */

static void plaintext_only_on_loopback(void **state)
{
    (void)state;
    bq_admin_handlers_t h = handlers;
    const char *hosts[] = {"0.0.0.0",         "192.0.2.1", "10.0.0.1", "::",         "2001:db8::1",
                           "::ffff:10.0.0.1", "localhost", "",         "127.0.0.1 ", NULL};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        bq_admin_config_t cfg = {.host = hosts[i], .port = 0};
        bq_admin_t *a = (bq_admin_t *)&h; /* overwritten with NULL */
        assert_int_equal(bq_admin_start(&W->loop, &cfg, &h, &a), -EINVAL);
        assert_null(a);
    }
    bq_admin_config_t cfg = {.host = "127.0.0.1", .port = 70000};
    bq_admin_t *a = NULL;
    assert_int_equal(bq_admin_start(&W->loop, &cfg, &h, &a), -EINVAL);
    /* Any 127.0.0.0/8 address is loopback. */
    cfg = (bq_admin_config_t){.host = "127.0.0.2", .port = 0};
    assert_int_equal(bq_admin_start(&W->loop, &cfg, &h, &a), 0);
    assert_memory_equal(bq_admin_address(a), "127.0.0.2:", 10);
    /* The same port again cannot be bound. */
    bq_admin_config_t again = {.host = "127.0.0.2", .port = atoi(bq_admin_address(a) + 10)};
    bq_admin_t *b = NULL;
    assert_int_equal(bq_admin_start(&W->loop, &again, &h, &b), UV_EADDRINUSE);
    assert_null(b);
    bq_admin_stop(a);
}

static SSL_CTX *ctx_without_certificate(void)
{
    char ca[128];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_load_verify_locations(ctx, ca, NULL), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;
}

/* Under TLS any client may GET (probes and scrapers have no certificate);
 * a POST needs a certificate of the cluster CA with an allowed name: no
 * certificate, a name not allowed, and a self-signed certificate that
 * claims an allowed name all get 403. On loopback a plaintext client is
 * served its GETs and refused its POSTs (403: TLS needed). */
static void tls_serves_gets_to_all_and_posts_to_allowed_names(void **state)
{
    (void)state;
    W->sctx = ctx_for(true, "alpha");
    start(0, W->sctx);
    W->fake.answer_now = 200;
    const char *req = "GET /status HTTP/1.1\r\nHost: a\r\n\r\n"
                      "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
                      "POST /promote HTTP/1.1\r\nHost: a\r\n\r\n"
                      "POST /switchover?to=beta HTTP/1.1\r\nHost: a\r\n\r\n"
                      "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    client_t *none = client_open(req, ctx_without_certificate());
    client_t *wrong = client_open(req, ctx_for(false, "wrongname"));
    client_t *forged = client_open(req, ctx_for(false, "forged"));
    client_t *plain = client_open(req, NULL);
    RUN_UNTIL(none->closed && wrong->closed && forged->closed && plain->closed);
    client_t *refused[] = {none, wrong, forged, plain};
    for (size_t i = 0; i < 4; i++) {
        client_t *c = refused[i];
        assert_false(c->failed);
        assert_non_null(strstr(c->buf, "{\"role\":\"primary\",\"epoch\":3}"));
        assert_non_null(strstr(c->buf, "bq_up 1\n"));
        assert_int_equal(count(c->buf, "HTTP/1.1 403 Forbidden\r\n"), 2);
        assert_non_null(strstr(c->buf, "client certificate"));
        assert_non_null(strstr(c->buf, "\r\n\r\nok\n"));
    }
    assert_non_null(strstr(plain->buf, "needs TLS"));
    assert_int_equal(W->fake.promotes + W->fake.switchovers, 0);
}

static void tls_serves_an_allowed_client(void **state)
{
    (void)state;
    W->sctx = ctx_for(true, "alpha");
    start(0, W->sctx);
    W->fake.answer_now = 200;
    client_t *c = client_open("GET /status HTTP/1.1\r\nHost: a\r\n\r\n"
                              "POST /promote?force=1 HTTP/1.1\r\nHost: a\r\n"
                              "Connection: close\r\n\r\n",
                              ctx_for(false, "beanstalkctl"));
    RUN_UNTIL(c->closed);
    assert_false(c->failed);
    assert_non_null(strstr(c->buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"));
    assert_non_null(strstr(c->buf, "{\"role\":\"primary\",\"epoch\":3}"));
    assert_non_null(strstr(c->buf, "\r\n\r\npromoted at once\n"));
    assert_int_equal(W->fake.promotes, 1);
    assert_true(W->fake.force);
    /* This node's own certificate may hand it off (switchover), nothing
     * else. */
    c = client_open("POST /promote HTTP/1.1\r\nHost: a\r\n\r\n"
                    "POST /switchover?to=gamma HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                    ctx_for(false, "beta"));
    RUN_UNTIL(c->closed);
    assert_false(c->failed);
    assert_int_equal(count(c->buf, "HTTP/1.1 403 Forbidden\r\n"), 1);
    assert_non_null(strstr(c->buf, "may only POST /switchover"));
    assert_int_equal(W->fake.promotes, 1);
    assert_int_equal(W->fake.switchovers, 1);
    assert_string_equal(W->fake.to, "gamma");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(routes_answer_with_their_content, setup, teardown),
        cmocka_unit_test_setup_teardown(unknown_path_and_wrong_method, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals_close_the_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(pipelined_requests_on_keep_alive, setup, teardown),
        cmocka_unit_test_setup_teardown(promote_answered_later_holds_the_next_request, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(mutating_requests_check_their_query, setup, teardown),
        cmocka_unit_test_setup_teardown(client_gone_before_the_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_with_an_answer_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(flood_never_keeps_a_probe_out, setup, teardown),
        cmocka_unit_test_setup_teardown(slow_requests_time_out, setup, teardown),
        cmocka_unit_test_setup_teardown(plaintext_only_on_loopback, setup, teardown),
        cmocka_unit_test_setup_teardown(tls_serves_gets_to_all_and_posts_to_allowed_names, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(tls_serves_an_allowed_client, setup, teardown),
    };
    return cmocka_run_group_tests_name("node_admin", tests, setup_certs, teardown_certs);
}
