/* Unit tests of replication/stream.c on a real libuv loop over 127.0.0.1: a
 * listener on port 0 accepts server streams, a client stream connects to a
 * list of addresses. Each case runs in plaintext and in TLS (certificates
 * from deploy/mkcerts: the server is alpha and wants beta, the client is
 * beta and wants alpha). Covers bytes both ways; 24 MiB written while the
 * reader is paused (the socket takes them in partial writes, the queue
 * passes the high-water mark, on_drain comes once below low water, every
 * byte arrives in order); the three ways of closing (flush: the queued
 * bytes and then the end of input reach the peer; abort; linger: the peer
 * is read until its FIN, bounded); closing from inside on_data; a refused
 * handshake, reported and counted; a TLS server that sniffs a plaintext
 * client; the idle timeout; and connecting to the next address after a
 * refusal. Every wait runs the loop until a condition holds, under a
 * deadline that fails the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replication/stream.h"
#include "replication/tls.h"
#include "tls_certs.h"
#include "uv_until.h"

#define DEADLINE_MS 10000
#define BIG ((size_t)24 * 1024 * 1024) /* more than loopback's socket buffers hold */
#define CHUNK ((size_t)256 * 1024)
#define HIGH ((size_t)1024 * 1024)
#define LOW ((size_t)256 * 1024)

typedef struct end {
    bq_stream_t *s;
    int opened, drained, errors, closed, ndata;
    int err;
    char why[600];
    uint8_t *got; /* plaintext received */
    size_t got_len, got_cap;
    bool keep_on_error;                 /* on_error leaves the stream open (the test closes it) */
    bool close_on_data;                 /* on_data closes (abort) at once */
    bq_stream_close_how_t on_error_how; /* how on_error closes */
} end_t;

typedef struct world {
    uv_loop_t loop;
    uv_tcp_t listener, refuser; /* refuser: bound, not listening */
    int port, refused_port;
    SSL_CTX *sctx, *cctx;
    bool tls;
    bq_stream_config_t scfg, ccfg;
    bool server_paused; /* accepted streams do not read */
    end_t server, client;
    struct sockaddr_in sa[2];
    struct addrinfo ai[2];
} world_t;

static const char *const server_wants[] = {"beta"};
static const char *const client_wants[] = {"alpha"};

/* ---- callbacks ------------------------------------------------------- */

static void on_open(bq_stream_t *s, void *arg)
{
    end_t *e = arg;
    assert_ptr_equal(s, e->s);
    assert_int_equal(e->ndata, 0); /* before any data */
    e->opened++;
}

static void on_data(bq_stream_t *s, const uint8_t *data, size_t len, void *arg)
{
    end_t *e = arg;
    assert_ptr_equal(s, e->s);
    assert_true(len > 0);
    e->ndata++;
    if (e->got_len + len > e->got_cap) {
        e->got_cap = (e->got_len + len) * 2;
        e->got = realloc(e->got, e->got_cap);
        assert_non_null(e->got);
    }
    memcpy(e->got + e->got_len, data, len);
    e->got_len += len;
    if (e->close_on_data) {
        bq_stream_close(s, BQ_STREAM_ABORT);
        assert_int_equal(bq_stream_write(s, (uint8_t *)strdup("late"), 4), -1);
    }
}

static void on_drain(bq_stream_t *s, void *arg)
{
    end_t *e = arg;
    assert_true(bq_stream_queued(s) < LOW);
    e->drained++;
}

static void on_error(bq_stream_t *s, int err, const char *why, void *arg)
{
    end_t *e = arg;
    assert_ptr_equal(s, e->s);
    e->errors++;
    e->err = err;
    snprintf(e->why, sizeof e->why, "%s", why);
    if (!e->keep_on_error)
        bq_stream_close(s, e->on_error_how);
}

static void on_close(bq_stream_t *s, void *arg)
{
    end_t *e = arg;
    assert_ptr_equal(s, e->s);
    e->closed++;
}

static const bq_stream_callbacks_t callbacks = {on_open, on_data, on_drain, on_error, on_close};

/* ---- the loop -------------------------------------------------------- */

static world_t *W;

typedef bool (*cond_t)(world_t *);

static bool holds(void *arg)
{
    return ((cond_t)arg)(W);
}

static void run_until(cond_t cond, const char *what)
{
    uvt_run_until(&W->loop, holds, (void *)cond, DEADLINE_MS, what);
}

static void noop(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop for ms. */
static void sleep_ms(uint64_t ms)
{
    uint64_t until = uv_now(&W->loop) + ms;
    uv_timer_t t;
    uv_timer_init(&W->loop, &t);
    uv_timer_start(&t, noop, ms, 0);
    while (uv_now(&W->loop) < until)
        uv_run(&W->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&W->loop, UV_RUN_NOWAIT);
}

static void on_connection(uv_stream_t *listener, int status)
{
    world_t *w = listener->data;
    assert_int_equal(status, 0);
    assert_null(w->server.s); /* one stream per test */
    w->server.s = bq_stream_new(&w->loop, &w->scfg, &callbacks, &w->server);
    assert_non_null(w->server.s);
    assert_int_equal(bq_stream_read(w->server.s, !w->server_paused), 0);
    assert_int_equal(bq_stream_accept(w->server.s, listener), 0);
}

static void set_ai(world_t *w, int i, int port)
{
    assert_int_equal(uv_ip4_addr("127.0.0.1", port, &w->sa[i]), 0);
    w->ai[i] = (struct addrinfo){.ai_family = AF_INET,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_addrlen = sizeof w->sa[i],
                                 .ai_addr = (struct sockaddr *)&w->sa[i]};
}

/* Connects the client to addrs (NULL: the listener). */
static void connect_client(const struct addrinfo *addrs)
{
    W->client.s = bq_stream_new(&W->loop, &W->ccfg, &callbacks, &W->client);
    assert_non_null(W->client.s);
    assert_int_equal(bq_stream_read(W->client.s, true), 0);
    if (addrs == NULL) {
        set_ai(W, 0, W->port);
        addrs = &W->ai[0];
    }
    bq_stream_connect(W->client.s, addrs);
}

static bool both_open(world_t *w)
{
    /* An accepted plaintext stream is usable at once: no on_open. */
    return w->client.opened == 1 && w->server.s != NULL && (!w->tls || w->server.opened == 1);
}

static bool both_closed(world_t *w)
{
    return w->client.closed == 1 && w->server.closed == 1;
}

static bool server_closed(world_t *w)
{
    return w->server.closed == 1;
}

/* A connected pair, in TLS when the world is. */
static void open_pair(void)
{
    connect_client(NULL);
    run_until(both_open, "both ends open");
}

/* ---- setup ----------------------------------------------------------- */

static int setup_certs(void **state)
{
    (void)state;
    return make_certs("/tmp/bq-stream-XXXXXX", "alpha beta");
}

static int bound_port(uv_tcp_t *t)
{
    struct sockaddr_in addr;
    int len = sizeof addr;
    assert_int_equal(uv_tcp_getsockname(t, (struct sockaddr *)&addr, &len), 0);
    return ntohs(addr.sin_port);
}

static void setup_world(bool tls)
{
    W = calloc(1, sizeof *W);
    assert_non_null(W);
    W->tls = tls;
    assert_int_equal(uv_loop_init(&W->loop), 0);
    struct sockaddr_in addr;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &addr), 0);
    assert_int_equal(uv_tcp_init(&W->loop, &W->listener), 0);
    W->listener.data = W;
    assert_int_equal(uv_tcp_bind(&W->listener, (struct sockaddr *)&addr, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&W->listener, 16, on_connection), 0);
    W->port = bound_port(&W->listener);
    assert_int_equal(uv_tcp_init(&W->loop, &W->refuser), 0);
    assert_int_equal(uv_tcp_bind(&W->refuser, (struct sockaddr *)&addr, 0), 0);
    W->refused_port = bound_port(&W->refuser);
    if (tls) {
        W->sctx = ctx_for(true, "alpha");
        W->cctx = ctx_for(false, "beta");
    }
    W->scfg = (bq_stream_config_t){.tls = W->sctx,
                                   .server = true,
                                   .names = server_wants,
                                   .nnames = 1,
                                   .channel = BQ_TLS_REPLICATION,
                                   .read_size = 16384,
                                   .high_water = HIGH,
                                   .low_water = LOW};
    W->ccfg = (bq_stream_config_t){.tls = W->cctx,
                                   .server = false,
                                   .names = client_wants,
                                   .nnames = 1,
                                   .high_water = HIGH,
                                   .low_water = LOW};
    W->server.on_error_how = W->client.on_error_how = BQ_STREAM_FLUSH;
}

static int setup_plain(void **state)
{
    (void)state;
    setup_world(false);
    return 0;
}

static int setup_tls(void **state)
{
    (void)state;
    setup_world(true);
    return 0;
}

static bool ends_gone(world_t *w)
{
    return (w->server.s == NULL || w->server.closed > 0) &&
           (w->client.s == NULL || w->client.closed > 0);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Closes what is left, checks each stream closed once and the loop holds
 * no handle any more (every stream freed its own). */
static int teardown(void **state)
{
    (void)state;
    if (W->server.s != NULL && W->server.closed == 0)
        bq_stream_close(W->server.s, BQ_STREAM_ABORT);
    if (W->client.s != NULL && W->client.closed == 0)
        bq_stream_close(W->client.s, BQ_STREAM_ABORT);
    run_until(ends_gone, "every stream closed");
    assert_true(W->server.closed <= 1 && W->client.closed <= 1);
    uv_walk(&W->loop, close_walk, NULL);
    uv_run(&W->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&W->loop), 0);
    SSL_CTX_free(W->sctx);
    SSL_CTX_free(W->cctx);
    free(W->server.got);
    free(W->client.got);
    free(W);
    W = NULL;
    return 0;
}

/* ---- helpers --------------------------------------------------------- */

static uint8_t *text(const char *s)
{
    uint8_t *p = (uint8_t *)strdup(s);
    assert_non_null(p);
    return p;
}

static uint8_t pattern(size_t i)
{
    return (uint8_t)(i % 251);
}

/* Writes len bytes of the pattern, from offset at, in one buffer. */
static void write_pattern(bq_stream_t *s, size_t at, size_t len)
{
    uint8_t *p = malloc(len);
    assert_non_null(p);
    for (size_t i = 0; i < len; i++)
        p[i] = pattern(at + i);
    assert_int_equal(bq_stream_write(s, p, len), 0);
}

static void check_pattern(const end_t *e, size_t len)
{
    assert_int_equal(e->got_len, len);
    for (size_t i = 0; i < len; i++)
        if (e->got[i] != pattern(i))
            fail_msg("byte %zu is %u, want %u", i, e->got[i], pattern(i));
}

static size_t want_len;

static bool server_got_want(world_t *w)
{
    return w->server.got_len >= want_len;
}

static bool client_got_want(world_t *w)
{
    return w->client.got_len >= want_len;
}

/* ---- tests ----------------------------------------------------------- */

static void bytes_both_ways(void **state)
{
    (void)state;
    open_pair();
    assert_int_equal(bq_stream_is_tls(W->client.s), W->tls);
    assert_int_equal(bq_stream_is_tls(W->server.s), W->tls);
    if (W->tls) {
        assert_string_equal(bq_stream_peer_name(W->client.s), "alpha");
        assert_string_equal(bq_stream_peer_name(W->server.s), "beta");
        assert_string_equal(bq_stream_security(W->client.s), "TLSv1.3");
    } else {
        assert_null(bq_stream_peer_name(W->client.s));
        assert_string_equal(bq_stream_security(W->server.s), "plaintext");
    }
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", W->port);
    assert_string_equal(bq_stream_peer_addr(W->client.s), want);
    assert_string_equal(bq_stream_peer_ip(W->server.s), "127.0.0.1");
    assert_int_equal(bq_stream_write(W->client.s, text("hello, "), 7), 0);
    assert_int_equal(bq_stream_write(W->client.s, text("server"), 6), 0);
    want_len = 13;
    run_until(server_got_want, "the server read 13 bytes");
    assert_memory_equal(W->server.got, "hello, server", 13);
    assert_int_equal(bq_stream_write(W->server.s, text("hello, client"), 13), 0);
    run_until(client_got_want, "the client read 13 bytes");
    assert_memory_equal(W->client.got, "hello, client", 13);
    assert_int_equal(W->server.errors + W->client.errors, 0);
}

static bool client_queue_empty(world_t *w)
{
    return bq_stream_queued(w->client.s) == 0 && w->server.got_len == BIG;
}

/* The reader pauses: the writer's queue fills past high water (the socket
 * takes what it can, in partial writes); then the reader resumes: every
 * byte arrives in order and on_drain comes once. */
static void paused_reader_partial_writes_and_drain(void **state)
{
    (void)state;
    open_pair();
    assert_int_equal(bq_stream_read(W->server.s, false), 0);
    for (size_t at = 0; at < BIG; at += CHUNK)
        write_pattern(W->client.s, at, CHUNK);
    assert_true(bq_stream_queued(W->client.s) >= HIGH);
    sleep_ms(200);
    assert_true(bq_stream_queued(W->client.s) > HIGH);          /* the kernel holds far less */
    assert_true(bq_stream_queued(W->client.s) < BIG + BIG / 8); /* some left already */
    assert_int_equal(W->client.drained, 0);
    assert_int_equal(W->server.got_len, 0);
    assert_int_equal(bq_stream_read(W->server.s, true), 0);
    run_until(client_queue_empty, "every byte read");
    check_pattern(&W->server, BIG);
    assert_true(W->server.ndata > 1);
    assert_int_equal(W->client.drained, 1);
    assert_int_equal(W->server.errors + W->client.errors, 0);
}

static bool server_ended(world_t *w)
{
    return w->server.errors == 1 && w->client.closed == 1;
}

/* Flush: what was queued, then the end of input, reach the peer. */
static void close_flush_delivers_then_ends(void **state)
{
    (void)state;
    open_pair();
    size_t len = 2 * 1024 * 1024;
    write_pattern(W->client.s, 0, len);
    bq_stream_close(W->client.s, BQ_STREAM_FLUSH);
    assert_int_equal(bq_stream_write(W->client.s, text("late"), 4), -1);
    bq_stream_close(W->client.s, BQ_STREAM_FLUSH); /* again: a no-op */
    run_until(server_ended, "the server saw the end");
    check_pattern(&W->server, len);
    if (W->tls) {
        assert_int_equal(W->server.err, BQ_STREAM_ETLS);
        assert_non_null(strstr(W->server.why, "tls: closed by peer (close_notify)"));
    } else {
        assert_int_equal(W->server.err, UV_EOF);
        assert_string_equal(W->server.why, "peer closed the connection");
    }
    assert_int_equal(W->client.errors, 0); /* no on_error while closing */
    run_until(both_closed, "both closed");
}

/* Abort: closed at once, once; the peer sees its input end. */
static void close_abort(void **state)
{
    (void)state;
    open_pair();
    write_pattern(W->client.s, 0, 1000);
    bq_stream_close(W->client.s, BQ_STREAM_ABORT);
    bq_stream_close(W->client.s, BQ_STREAM_ABORT);
    assert_int_equal(bq_stream_write(W->client.s, text("late"), 4), -1);
    run_until(server_ended, "the server saw the end");
    assert_int_equal(W->client.errors, 0);
    assert_int_equal(W->client.closed, 1);
    run_until(both_closed, "both closed");
}

static bool client_saw_end(world_t *w)
{
    return w->client.errors == 1;
}

/* Linger: after its FIN the server reads until the client's, and only then
 * closes; without it, it closes after BQ_STREAM_LINGER_MS. */
static void close_linger_waits_for_the_peer(void **state)
{
    (void)state;
    open_pair();
    W->client.keep_on_error = true;
    bq_stream_close(W->server.s, BQ_STREAM_LINGER);
    run_until(client_saw_end, "the client saw the server's end");
    assert_int_equal(W->client.err, W->tls ? BQ_STREAM_ETLS : UV_EOF);
    sleep_ms(300);
    assert_int_equal(W->server.closed, 0); /* still reading the client */
    bq_stream_close(W->client.s, BQ_STREAM_FLUSH);
    run_until(both_closed, "both closed");
    assert_int_equal(W->server.got_len, 0); /* lingering bytes are not delivered */
}

static void close_linger_is_bounded(void **state)
{
    (void)state;
    open_pair();
    W->client.keep_on_error = true;
    uint64_t start = uv_now(&W->loop);
    bq_stream_close(W->server.s, BQ_STREAM_LINGER);
    run_until(server_closed, "the server closed");
    uint64_t took = uv_now(&W->loop) - start;
    assert_true(took + 50 >= BQ_STREAM_LINGER_MS && took < BQ_STREAM_LINGER_MS + 2000);
    assert_int_equal(W->client.closed, 0);
}

/* Closing inside on_data: nothing more is delivered, writes are refused. */
static void close_inside_on_data(void **state)
{
    (void)state;
    open_pair();
    W->server.close_on_data = true;
    write_pattern(W->client.s, 0, 64 * 1024); /* several TLS records, one read or more */
    run_until(server_closed, "the server closed");
    assert_int_equal(W->server.ndata, 1);
    assert_int_equal(W->server.errors, 0);
}

static bool handshake_failed(world_t *w)
{
    return w->server.errors == 1 && w->client.errors == 1 && w->server.closed == 1 &&
           w->client.closed == 1;
}

/* A client whose certificate names no allowed peer: refused, counted. */
static void tls_refused_handshake_reported_and_counted(void **state)
{
    (void)state;
    static const char *const nobody[] = {"gamma"};
    W->scfg.names = nobody;
    W->scfg.channel = BQ_TLS_ADMIN;
    uint64_t before = bq_tls_handshake_failures(BQ_TLS_ADMIN);
    connect_client(NULL);
    run_until(handshake_failed, "both ends failed");
    assert_int_equal(W->server.err, BQ_STREAM_ETLS_HANDSHAKE);
    assert_memory_equal(W->server.why, "tls: ", 5);
    assert_int_equal(W->server.opened, 0);
    assert_int_equal(bq_tls_handshake_failures(BQ_TLS_ADMIN), before + 1);
    /* TLS 1.3: the client counts the handshake done before the server's
     * alert, which fails it later. */
    assert_memory_equal(W->client.why, "tls: ", 5);
}

/* A TLS server that sniffs takes a plaintext client as plaintext, and a TLS
 * client as TLS. */
static void tls_server_sniffs_plaintext(void **state)
{
    (void)state;
    W->scfg.sniff = true;
    W->scfg.peer_optional = true;
    W->ccfg.tls = NULL; /* a plaintext client */
    W->tls = false;
    connect_client(NULL);
    run_until(both_open, "the client connected");
    assert_int_equal(bq_stream_write(W->client.s, text("GET / HTTP/1.0\r\n\r\n"), 18), 0);
    want_len = 18;
    run_until(server_got_want, "the server read the request");
    assert_false(bq_stream_is_tls(W->server.s));
    assert_string_equal(bq_stream_security(W->server.s), "plaintext");
    assert_int_equal(bq_stream_write(W->server.s, text("ok"), 2), 0);
    want_len = 2;
    run_until(client_got_want, "the client read the answer");
    /* A TLS client on the same configuration. */
    bq_stream_close(W->client.s, BQ_STREAM_ABORT);
    bq_stream_close(W->server.s, BQ_STREAM_ABORT);
    run_until(both_closed, "both closed");
    free(W->server.got);
    free(W->client.got);
    memset(&W->server, 0, sizeof W->server);
    memset(&W->client, 0, sizeof W->client);
    W->ccfg.tls = W->cctx;
    W->tls = true;
    connect_client(NULL);
    run_until(both_open, "a TLS pair");
    assert_true(bq_stream_is_tls(W->server.s));
    assert_string_equal(bq_stream_peer_name(W->server.s), "beta");
}

static bool server_failed(world_t *w)
{
    return w->server.errors == 1;
}

static void idle_timeout(void **state)
{
    (void)state;
    W->scfg.idle_ms = 100;
    open_pair();
    run_until(server_failed, "the server timed out");
    assert_int_equal(W->server.err, UV_ETIMEDOUT);
    assert_string_equal(W->server.why, "timeout: nothing received for 100 ms");
}

static void connect_tries_the_next_address(void **state)
{
    (void)state;
    set_ai(W, 0, W->refused_port);
    set_ai(W, 1, W->port);
    W->ai[0].ai_next = &W->ai[1];
    connect_client(&W->ai[0]);
    run_until(both_open, "connected to the second address");
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", W->port);
    assert_string_equal(bq_stream_peer_addr(W->client.s), want);
}

static bool client_failed(world_t *w)
{
    return w->client.errors == 1 && w->client.closed == 1;
}

static void connect_refused(void **state)
{
    (void)state;
    set_ai(W, 0, W->refused_port);
    connect_client(&W->ai[0]);
    run_until(client_failed, "the connect failed");
    char want[96];
    snprintf(want, sizeof want, "connect 127.0.0.1:%d: %s", W->refused_port,
             uv_strerror(UV_ECONNREFUSED));
    assert_int_equal(W->client.err, UV_ECONNREFUSED);
    assert_string_equal(W->client.why, want);
    assert_int_equal(W->client.opened, 0);
}

/* A case in plaintext, then in TLS. */
#define BOTH(name)                                                                                 \
    {#name " (plaintext)", name, setup_plain, teardown, NULL},                                     \
    {                                                                                              \
#name " (TLS)", name, setup_tls, teardown, NULL                                            \
    }

int main(void)
{
    const struct CMUnitTest tests[] = {
        BOTH(bytes_both_ways),
        BOTH(paused_reader_partial_writes_and_drain),
        BOTH(close_flush_delivers_then_ends),
        BOTH(close_abort),
        BOTH(close_linger_waits_for_the_peer),
        BOTH(close_inside_on_data),
        BOTH(idle_timeout),
        BOTH(connect_tries_the_next_address),
        cmocka_unit_test_setup_teardown(close_linger_is_bounded, setup_tls, teardown),
        cmocka_unit_test_setup_teardown(tls_refused_handshake_reported_and_counted, setup_tls,
                                        teardown),
        cmocka_unit_test_setup_teardown(tls_server_sniffs_plaintext, setup_tls, teardown),
        cmocka_unit_test_setup_teardown(connect_refused, setup_plain, teardown),
    };
    return cmocka_run_group_tests_name("repl_stream", tests, setup_certs, teardown_certs);
}
