/* Unit tests of replication/link.c on a real libuv loop over 127.0.0.1: a
 * listener on port 0 accepts links with bq_link_accept, a client connects
 * with bq_link_connect (or a raw uv_tcp_t plays a misbehaving peer).
 * Certificates come from deploy/mkcerts. Covers messages both ways
 * in TLS and in plaintext (also one above the high-water mark), handshake
 * and idle timeouts, a peer closing, refused certificates, a refused
 * connection, bytes that are not TLS or not a message, and closing from
 * inside on_open and on_message. Every wait runs the loop until a condition
 * holds, under a uv_timer deadline that fails the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/link.h"
#include "replication/tls.h"
#include "replication/wire.h"
#include "tls_certs.h"
#include "uv_until.h"

#define DEADLINE_MS 10000

typedef struct side {
    bq_link_t *link;
    int opened, closed, writable;
    char why[256];
    char peer_name[64];
    char security[32];
    char peer_at_close[128]; /* "<address> <security>", read in on_close */
    int nmsg;
    uint64_t values[64]; /* per message: the ack's written_lsn, or the frames' length */
    bool close_on_open, close_on_message;
} side_t;

typedef struct raw {
    uv_tcp_t tcp;
    uv_connect_t req;
    uv_write_t wreq;
    const char *send; /* sent once connected */
    size_t send_len;
    bool connected, eof;
    char buf[256];
} raw_t;

typedef struct world {
    uv_loop_t loop;
    uv_tcp_t listener;
    char port[16];
    SSL_CTX *sctx, *cctx;
    const char *snames[2], *cnames[1];
    bq_link_config_t scfg, ccfg;
    side_t server, client;
    raw_t raw;
    bool has_raw;
    int acks_left; /* for the ticking client */
    uv_timer_t tick;
} world_t;

/* ---- certificates ---------------------------------------------------- */

static int setup_certs(void **state)
{
    (void)state;
    return make_certs("/tmp/bq-link-XXXXXX", "alpha beta");
}

/* ---- link callbacks -------------------------------------------------- */

static void on_open(bq_link_t *l, void *arg)
{
    side_t *s = arg;
    s->opened++;
    const char *name = bq_link_peer_name(l);
    snprintf(s->peer_name, sizeof s->peer_name, "%s", name != NULL ? name : "(none)");
    snprintf(s->security, sizeof s->security, "%s", bq_link_security(l));
    if (s->close_on_open) {
        bq_link_close(l, "closed in on_open");
        bq_link_close(l, "closed twice");
    }
}

static void on_message(bq_link_t *l, const Bq__Repl__Message *msg, void *arg)
{
    side_t *s = arg;
    assert_true(s->nmsg < 64);
    if (msg->body_case == BQ__REPL__MESSAGE__BODY_ACK) {
        s->values[s->nmsg++] = msg->ack->written_lsn;
    } else if (msg->body_case == BQ__REPL__MESSAGE__BODY_FRAMES) {
        s->values[s->nmsg++] = msg->frames->data.len;
    } else {
        fail_msg("unexpected message %d", msg->body_case);
    }
    if (s->close_on_message) {
        bq_link_close(l, "closed in on_message");
        assert_int_equal(bq_link_send(l, msg), -1);
    }
}

static void on_writable(bq_link_t *l, void *arg)
{
    side_t *s = arg;
    assert_true(bq_link_queued(l) < BQ_LINK_LOW_WATER);
    s->writable++;
}

/* As the feeder does, on_close reads the peer's address and the security
 * (a link whose stream closed before its timer must still answer them). */
static void on_close(bq_link_t *l, const char *why, void *arg)
{
    side_t *s = arg;
    assert_ptr_equal(l, s->link);
    s->closed++;
    snprintf(s->why, sizeof s->why, "%s", why);
    snprintf(s->peer_at_close, sizeof s->peer_at_close, "%s %s", bq_link_peer_addr(l),
             bq_link_security(l));
}

static const bq_link_callbacks_t callbacks = {on_open, on_message, on_writable, on_close};

static void send_ack(bq_link_t *l, uint64_t lsn)
{
    Bq__Repl__Ack ack = BQ__REPL__ACK__INIT;
    ack.written_lsn = lsn;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    m.body_case = BQ__REPL__MESSAGE__BODY_ACK;
    m.ack = &ack;
    assert_int_equal(bq_link_send(l, &m), 0);
}

static void send_frames(bq_link_t *l, size_t len)
{
    uint8_t *data = calloc(1, len);
    assert_non_null(data);
    Bq__Repl__Frames frames = BQ__REPL__FRAMES__INIT;
    frames.data.data = data;
    frames.data.len = len;
    Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
    m.body_case = BQ__REPL__MESSAGE__BODY_FRAMES;
    m.frames = &frames;
    assert_int_equal(bq_link_send(l, &m), 0);
    free(data);
}

/* ---- the loop -------------------------------------------------------- */

typedef struct until {
    bool (*cond)(world_t *);
    world_t *w;
} until_t;

static bool holds(void *arg)
{
    until_t *u = arg;
    return u->cond(u->w);
}

/* Runs the loop until cond(w) holds; fails the test after ms. */
static void run_until(world_t *w, bool (*cond)(world_t *), uint64_t ms, const char *what)
{
    until_t u = {cond, w};
    uvt_run_until(&w->loop, holds, &u, ms, what);
}

static bool both_open(world_t *w)
{
    return w->server.opened == 1 && w->client.opened == 1;
}

static bool server_closed(world_t *w)
{
    return w->server.closed == 1;
}

static bool client_closed(world_t *w)
{
    return w->client.closed == 1;
}

static bool both_closed(world_t *w)
{
    return w->server.closed == 1 && w->client.closed == 1;
}

static void on_connection(uv_stream_t *listener, int status)
{
    world_t *w = listener->data;
    assert_int_equal(status, 0);
    assert_null(w->server.link); /* one link per test */
    assert_int_equal(
        bq_link_accept(&w->loop, listener, &w->scfg, &callbacks, &w->server, &w->server.link), 0);
}

/* A loop, a listener on 127.0.0.1:0 and TLS configurations: the server is
 * alpha and wants beta, the client is beta and wants alpha. */
static int setup(void **state)
{
    world_t *w = calloc(1, sizeof *w);
    assert_non_null(w);
    assert_int_equal(uv_loop_init(&w->loop), 0);
    assert_int_equal(uv_tcp_init(&w->loop, &w->listener), 0);
    w->listener.data = w;
    struct sockaddr_in addr;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &addr), 0);
    assert_int_equal(uv_tcp_bind(&w->listener, (struct sockaddr *)&addr, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&w->listener, 16, on_connection), 0);
    int len = sizeof addr;
    assert_int_equal(uv_tcp_getsockname(&w->listener, (struct sockaddr *)&addr, &len), 0);
    snprintf(w->port, sizeof w->port, "%u", ntohs(addr.sin_port));
    w->sctx = ctx_for(true, "alpha");
    w->cctx = ctx_for(false, "beta");
    w->snames[0] = "nobody";
    w->snames[1] = "beta";
    w->cnames[0] = "alpha";
    w->scfg = (bq_link_config_t){w->sctx, w->snames, 2, 0, 5000, 0};
    w->ccfg = (bq_link_config_t){w->cctx, w->cnames, 1, 0, 5000, 0};
    *state = w;
    return 0;
}

static bool links_gone(world_t *w)
{
    return (w->server.link == NULL || w->server.closed > 0) &&
           (w->client.link == NULL || w->client.closed > 0);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

/* Closes what is left, checks each link closed once, and that the loop
 * holds no handle any more. */
static int teardown(void **state)
{
    world_t *w = *state;
    if (w->server.link != NULL && w->server.closed == 0) {
        bq_link_close(w->server.link, "teardown");
    }
    if (w->client.link != NULL && w->client.closed == 0) {
        bq_link_close(w->client.link, "teardown");
    }
    run_until(w, links_gone, DEADLINE_MS, "every link closed");
    assert_true(w->server.closed <= 1 && w->client.closed <= 1);
    uv_walk(&w->loop, close_walk, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    SSL_CTX_free(w->sctx);
    SSL_CTX_free(w->cctx);
    free(w);
    return 0;
}

static void connect_client(world_t *w)
{
    assert_int_equal(bq_link_connect(&w->loop, "127.0.0.1", w->port, &w->ccfg, &callbacks,
                                     &w->client, &w->client.link),
                     0);
}

/* ---- a raw peer ------------------------------------------------------ */

static void raw_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    raw_t *r = h->data;
    (void)hint;
    *buf = uv_buf_init(r->buf, sizeof r->buf);
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    raw_t *r = s->data;
    (void)buf;
    if (n < 0) {
        r->eof = true;
        uv_read_stop(s);
    }
}

static void raw_written(uv_write_t *req, int status)
{
    (void)req;
    assert_int_equal(status, 0);
}

static void raw_connected(uv_connect_t *req, int status)
{
    raw_t *r = req->data;
    assert_int_equal(status, 0);
    r->connected = true;
    assert_int_equal(uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read), 0);
    if (r->send_len > 0) {
        uv_buf_t b = uv_buf_init((char *)r->send, (unsigned)r->send_len);
        assert_int_equal(uv_write(&r->wreq, (uv_stream_t *)&r->tcp, &b, 1, raw_written), 0);
    }
}

/* Connects a raw TCP client that sends data[0..len) and then only reads. */
static void raw_connect(world_t *w, const char *data, size_t len)
{
    raw_t *r = &w->raw;
    r->send = data;
    r->send_len = len;
    assert_int_equal(uv_tcp_init(&w->loop, &r->tcp), 0);
    r->tcp.data = r->req.data = r;
    struct sockaddr_in addr;
    assert_int_equal(uv_ip4_addr("127.0.0.1", atoi(w->port), &addr), 0);
    assert_int_equal(uv_tcp_connect(&r->req, &r->tcp, (struct sockaddr *)&addr, raw_connected), 0);
    w->has_raw = true;
}

static bool raw_eof(world_t *w)
{
    return w->raw.eof && w->server.closed == 1;
}

/* ---- tests ----------------------------------------------------------- */

static bool got_acks_and_frames(world_t *w)
{
    return w->server.nmsg == 3 && w->client.nmsg == 1 && w->server.writable == 1 &&
           bq_link_queued(w->server.link) == 0;
}

static void test_tls_messages(void **state)
{
    world_t *w = *state;
    connect_client(w);
    run_until(w, both_open, DEADLINE_MS, "both ends open");
    assert_string_equal(w->server.peer_name, "beta");
    assert_string_equal(w->client.peer_name, "alpha");
    assert_string_equal(w->server.security, "TLSv1.3");
    assert_string_equal(w->client.security, "TLSv1.3");
    assert_int_equal(strncmp(bq_link_peer_addr(w->server.link), "127.0.0.1:", 10), 0);
    assert_string_equal(strchr(bq_link_peer_addr(w->client.link), ':') + 1, w->port);
    for (uint64_t i = 1; i <= 3; i++) {
        send_ack(w->client.link, i * 10);
    }
    /* Above the high-water mark: on_writable once it drained. */
    size_t big = BQ_LINK_HIGH_WATER + 4096;
    send_frames(w->server.link, big);
    assert_true(bq_link_queued(w->server.link) > BQ_LINK_HIGH_WATER);
    run_until(w, got_acks_and_frames, DEADLINE_MS, "messages arrived both ways");
    assert_int_equal(w->server.values[0], 10);
    assert_int_equal(w->server.values[2], 30);
    assert_int_equal(w->client.values[0], big);
    bq_link_close(w->client.link, "done");
    run_until(w, both_closed, DEADLINE_MS, "both ends closed");
    assert_string_equal(w->client.why, "done");
    assert_non_null(strstr(w->server.why, "close_notify"));
}

static bool got_two_and_one(world_t *w)
{
    return w->server.nmsg == 1 && w->client.nmsg == 2;
}

static void test_plaintext(void **state)
{
    world_t *w = *state;
    w->scfg.tls = w->ccfg.tls = NULL;
    connect_client(w);
    run_until(w, both_open, DEADLINE_MS, "both ends open");
    assert_string_equal(w->server.security, "plaintext");
    assert_string_equal(w->server.peer_name, "(none)");
    send_ack(w->client.link, 7);
    send_ack(w->server.link, 8);
    send_ack(w->server.link, 9);
    run_until(w, got_two_and_one, DEADLINE_MS, "messages arrived both ways");
    assert_int_equal(w->server.values[0], 7);
    assert_int_equal(w->client.values[1], 9);
    bq_link_close(w->server.link, "bye");
    run_until(w, both_closed, DEADLINE_MS, "both ends closed");
    assert_string_equal(w->server.why, "bye");
    assert_string_equal(w->client.why, "peer closed the connection");
}

static void test_handshake_timeout(void **state)
{
    world_t *w = *state;
    w->scfg.handshake_ms = 200;
    raw_connect(w, NULL, 0);
    run_until(w, raw_eof, DEADLINE_MS, "the silent client is dropped");
    assert_int_equal(w->server.opened, 0);
    assert_non_null(strstr(w->server.why, "timeout"));
}

/* The client acks every 50 ms, 12 times, then falls silent. */
static void tick(uv_timer_t *t)
{
    world_t *w = t->data;
    send_ack(w->client.link, (uint64_t)w->acks_left);
    if (--w->acks_left == 0) {
        uv_timer_stop(t);
    }
}

static void test_idle_timeout(void **state)
{
    world_t *w = *state;
    w->scfg.idle_ms = 500;
    connect_client(w);
    run_until(w, both_open, DEADLINE_MS, "both ends open");
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    w->acks_left = 12;
    uv_timer_start(&w->tick, tick, 50, 50);
    run_until(w, both_closed, DEADLINE_MS, "the idle link is closed");
    /* Every ack (600 ms of them) arrived before the server gave up. */
    assert_int_equal(w->acks_left, 0);
    assert_int_equal(w->server.nmsg, 12);
    assert_non_null(strstr(w->server.why, "timeout: nothing received for 500 ms"));
    assert_non_null(strstr(w->client.why, "close_notify"));
}

static void test_client_refuses_server_name(void **state)
{
    world_t *w = *state;
    w->cnames[0] = "gamma";
    connect_client(w);
    run_until(w, both_closed, DEADLINE_MS, "both ends closed");
    assert_int_equal(w->client.opened, 0);
    assert_int_equal(w->server.opened, 0);
    assert_non_null(strstr(w->client.why, "hostname mismatch"));
    assert_non_null(strstr(w->server.why, "tls: "));
}

/* A client presenting a certificate the server must refuse: with TLS 1.3
 * the client may see its handshake complete first, then the alert. */
static void refused_client(world_t *w, const char *cert, const char *reason)
{
    SSL_CTX_free(w->cctx);
    w->cctx = w->ccfg.tls = ctx_for(false, cert);
    connect_client(w);
    run_until(w, both_closed, DEADLINE_MS, "both ends closed");
    assert_int_equal(w->server.opened, 0);
    assert_int_equal(w->server.nmsg, 0);
    assert_non_null(strstr(w->server.why, reason));
    assert_non_null(strstr(w->client.why, "tls: "));
}

static void test_server_refuses_wrong_name(void **state)
{
    refused_client(*state, "wrongname", "hostname mismatch");
}

static void test_server_refuses_other_ca(void **state)
{
    refused_client(*state, "rogue", "unable to get local issuer certificate");
}

static void test_plaintext_to_tls(void **state)
{
    world_t *w = *state;
    static const char put[] = "put 0 0 10 5\r\nhello\r\n";
    raw_connect(w, put, sizeof put - 1);
    run_until(w, raw_eof, DEADLINE_MS, "the plaintext client is dropped");
    assert_int_equal(w->server.opened, 0);
    assert_non_null(strstr(w->server.why, "tls: TLS handshake failed"));
}

static void test_message_too_big(void **state)
{
    world_t *w = *state;
    static const char huge[] = "\xff\xff\xff\x7f";
    w->scfg.tls = NULL;
    w->scfg.max_message = 1024;
    raw_connect(w, huge, sizeof huge - 1);
    run_until(w, raw_eof, DEADLINE_MS, "the client is dropped");
    assert_int_equal(w->server.opened, 1);
    assert_string_equal(w->server.why, "wire: message too big");
}

static void test_connect_refused(void **state)
{
    world_t *w = *state;
    uv_close((uv_handle_t *)&w->listener, NULL); /* nothing listens on the port now */
    connect_client(w);
    run_until(w, client_closed, DEADLINE_MS, "the client end closed");
    assert_int_equal(w->client.opened, 0);
    assert_non_null(strstr(w->client.why, "connect 127.0.0.1:"));
    assert_non_null(strstr(w->client.why, "connection refused"));
}

static void test_close_in_on_message(void **state)
{
    world_t *w = *state;
    w->server.close_on_message = true;
    connect_client(w);
    run_until(w, both_open, DEADLINE_MS, "both ends open");
    for (uint64_t i = 1; i <= 5; i++) {
        send_ack(w->client.link, i);
    }
    run_until(w, both_closed, DEADLINE_MS, "both ends closed");
    assert_int_equal(w->server.nmsg, 1);
    assert_int_equal(w->server.values[0], 1);
    assert_string_equal(w->server.why, "closed in on_message");
}

/* Three messages in one write from a raw client, read at once by a
 * plaintext server that closes on the first: the others are not delivered. */
static void test_close_in_on_message_one_read(void **state)
{
    world_t *w = *state;
    static uint8_t three[256];
    size_t len = 0;
    for (uint64_t i = 1; i <= 3; i++) {
        Bq__Repl__Ack ack = BQ__REPL__ACK__INIT;
        ack.written_lsn = i;
        Bq__Repl__Message m = BQ__REPL__MESSAGE__INIT;
        m.body_case = BQ__REPL__MESSAGE__BODY_ACK;
        m.ack = &ack;
        assert_true(len + bq_wire_size(&m) <= sizeof three);
        len += bq_wire_pack(&m, three + len);
    }
    w->scfg.tls = NULL;
    w->server.close_on_message = true;
    raw_connect(w, (const char *)three, len);
    run_until(w, raw_eof, DEADLINE_MS, "the server end closed");
    assert_int_equal(w->server.nmsg, 1);
    assert_string_equal(w->server.why, "closed in on_message");
}

/* Closed while resolving: on_close still comes once, from the loop. */
static void test_close_at_once(void **state)
{
    world_t *w = *state;
    connect_client(w);
    bq_link_close(w->client.link, "never mind");
    assert_int_equal(w->client.closed, 0);
    assert_int_equal(bq_link_send(w->client.link, &(Bq__Repl__Message)BQ__REPL__MESSAGE__INIT), -1);
    run_until(w, client_closed, DEADLINE_MS, "the client end closed");
    assert_int_equal(w->client.opened, 0);
    assert_string_equal(w->client.why, "never mind");
}

static void test_close_in_on_open(void **state)
{
    world_t *w = *state;
    w->server.close_on_open = true;
    w->client.close_on_open = false;
    connect_client(w);
    run_until(w, server_closed, DEADLINE_MS, "the server end closed");
    assert_int_equal(w->server.opened, 1);
    assert_string_equal(w->server.why, "closed in on_open");
    run_until(w, both_closed, DEADLINE_MS, "both ends closed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tls_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plaintext, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_refuses_server_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refuses_wrong_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_refuses_other_ca, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plaintext_to_tls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_too_big, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_on_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_on_message_one_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_on_open, setup, teardown),
    };
    return cmocka_run_group_tests(tests, setup_certs, teardown_certs);
}
