/* The replication wire's test client (peer_client.h): a non-blocking socket
 * waited on with poll against each call's deadline, OpenSSL on it for TLS,
 * and the framing done here with protobuf-c's pack and unpack. */
#define _GNU_SOURCE /* SOCK_NONBLOCK */

#include "tests/support/peer_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tests/support/bqtest.h"

#define PREFIX 4
#define MAX_MESSAGE ((size_t)64 << 20)
#define CHUNK 16384

struct bqp_conn {
    int fd;
    SSL_CTX *ctx; /* NULL in plain TCP */
    SSL *ssl;
    uint8_t *in; /* bytes received and not yet consumed */
    size_t in_len, in_cap;
    bool eof;
    char error[256];
};

static void set_error(bqp_conn_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
}

/* OpenSSL's queued errors, or errno's text, as the connection's error. */
static void ssl_error(bqp_conn_t *c, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[200] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    else if (errno)
        snprintf(buf, sizeof buf, "%s", strerror(errno));
    else
        snprintf(buf, sizeof buf, "the peer closed the connection");
    ERR_clear_error();
    set_error(c, "%s: %s", what, buf);
}

/* Waits until fd is ready for want (POLLIN, POLLOUT), or fails (the next
 * read or write says how); false when the deadline passes first. */
static bool wait_ready(int fd, short want, long long deadline)
{
    struct pollfd p = {fd, want, 0};
    for (long long left; (left = deadline - bqt_now_ms()) > 0;) {
        int r = poll(&p, 1, (int)left);
        if (r > 0 || (r < 0 && errno != EINTR))
            return true;
    }
    return false;
}

void bqp_tls_files(bqp_tls_t *t, const char *certs, const char *name)
{
    memset(t, 0, sizeof *t);
    snprintf(t->cert, sizeof t->cert, "%s/%s.pem", certs, name);
    snprintf(t->key, sizeof t->key, "%s/%s.key", certs, name);
    snprintf(t->ca, sizeof t->ca, "%s/ca.pem", certs);
}

/* A non-blocking connection to 127.0.0.1:port from src (NULL: any), within
 * the deadline; fd or -1. */
static int tcp_connect(const char *src, int port, long long deadline)
{
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1, err = 0;
    socklen_t len = sizeof err;
    if (fd < 0)
        return -1;
    if (src) {
        struct sockaddr_in from = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
            bind(fd, (struct sockaddr *)&from, sizeof from) != 0) {
            close(fd);
            return -1;
        }
    }
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        if (errno != EINPROGRESS)
            err = errno;
        else if (!wait_ready(fd, POLLOUT, deadline))
            err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
        if (err != 0) {
            close(fd);
            errno = err;
            return -1;
        }
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int bqp_tcp_from(const char *src, int port)
{
    return tcp_connect(src, port, bqt_now_ms() + 2000);
}

static SSL_CTX *client_ctx(bqp_conn_t *c, const bqp_tls_t *t)
{
    int version = t->tls12 ? TLS1_2_VERSION : TLS1_3_VERSION;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || SSL_CTX_set_min_proto_version(ctx, version) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, version) != 1 ||
        SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_load_verify_locations(ctx, t->ca, NULL) != 1) {
        ssl_error(c, "TLS context");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;
}

/* Runs the client side of the handshake until done or the deadline. */
static bool handshake(bqp_conn_t *c, long long deadline)
{
    for (;;) {
        errno = 0;
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return true;
        int e = SSL_get_error(c->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            ssl_error(c, "TLS handshake");
            return false;
        }
        if (!wait_ready(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
            set_error(c, "TLS handshake: timeout");
            return false;
        }
    }
}

bqp_conn_t *bqp_connect(int port, const bqp_tls_t *t, int ms, char *err, size_t errlen)
{
    long long deadline = bqt_now_ms() + ms;
    bqp_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->fd = tcp_connect(NULL, port, deadline);
    bool ok = c->fd >= 0;
    if (!ok)
        set_error(c, "connect to port %d: %s", port, strerror(errno));
    if (ok && t) {
        c->ctx = client_ctx(c, t);
        c->ssl = c->ctx ? SSL_new(c->ctx) : NULL;
        ok = c->ssl && SSL_set_fd(c->ssl, c->fd) == 1 && handshake(c, deadline);
    }
    if (err && errlen)
        snprintf(err, errlen, "%s", c->error);
    if (!ok) {
        bqp_close(c);
        return NULL;
    }
    return c;
}

bqp_conn_t *bqp_open(int port, const char *certs, const char *name, int ms)
{
    bqp_tls_t t;
    if (!certs || !*certs)
        return bqp_connect(port, NULL, ms, NULL, 0);
    bqp_tls_files(&t, certs, name);
    return bqp_connect(port, &t, ms, NULL, 0);
}

/* Writes up to len bytes once: the count, 0 when the socket (or TLS) wants
 * to wait, -1 when the connection failed. */
static ssize_t write_some(bqp_conn_t *c, const uint8_t *p, size_t len, short *want)
{
    *want = POLLOUT;
    if (!c->ssl) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n >= 0 || errno == EAGAIN || errno == EINTR)
            return n > 0 ? n : 0;
        set_error(c, "send: %s", strerror(errno));
        return -1;
    }
    errno = 0;
    int n = SSL_write(c->ssl, p, (int)len);
    if (n > 0)
        return n;
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    ssl_error(c, "TLS write");
    return -1;
}

int bqp_send_raw(bqp_conn_t *c, const void *data, size_t len, int ms)
{
    long long deadline = bqt_now_ms() + ms;
    const uint8_t *p = data;
    while (len > 0) {
        short want;
        /* The same chunk is retried after a wait, as SSL_write requires. */
        size_t chunk = len < CHUNK ? len : CHUNK;
        ssize_t n = write_some(c, p, chunk, &want);
        if (n < 0)
            return -1;
        if (n == 0 && !wait_ready(c->fd, want, deadline)) {
            set_error(c, "write: timeout with %zu bytes unsent", len);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int bqp_send(bqp_conn_t *c, const Bq__Repl__Message *msg, int ms)
{
    size_t n = bq__repl__message__get_packed_size(msg);
    uint8_t *buf = malloc(PREFIX + n);
    if (!buf) {
        set_error(c, "out of memory");
        return -1;
    }
    bq__repl__message__pack(msg, buf + PREFIX);
    for (int i = 0; i < PREFIX; i++)
        buf[i] = (uint8_t)(n >> (8 * i));
    int r = bqp_send_raw(c, buf, PREFIX + n, ms);
    free(buf);
    return r;
}

/* Reads what arrives into c->in by the deadline: 1 bytes came, 0 the
 * connection ended, -1 the deadline passed. */
static int fill(bqp_conn_t *c, long long deadline)
{
    if (c->eof)
        return 0;
    if (c->in_cap - c->in_len < CHUNK) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 4 * CHUNK;
        uint8_t *in = realloc(c->in, cap);
        if (!in) {
            set_error(c, "out of memory");
            return 0;
        }
        c->in = in;
        c->in_cap = cap;
    }
    for (;;) {
        short want = POLLIN;
        ssize_t n;
        errno = 0;
        if (c->ssl) {
            int r = SSL_read(c->ssl, c->in + c->in_len, CHUNK);
            int e = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
            n = r > 0 ? r : e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -2 : 0;
            want = e == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
            if (n == 0)
                ssl_error(c, "TLS read");
        } else {
            n = recv(c->fd, c->in + c->in_len, CHUNK, 0);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                n = -2;
            else if (n <= 0)
                set_error(c, "recv: %s", n == 0 ? "end of stream" : strerror(errno));
        }
        if (n > 0) {
            c->in_len += (size_t)n;
            return 1;
        }
        if (n != -2) {
            c->eof = true;
            return 0;
        }
        if (!wait_ready(c->fd, want, deadline))
            return -1;
    }
}

bqp_status_t bqp_recv(bqp_conn_t *c, int ms, Bq__Repl__Message **out)
{
    long long deadline = bqt_now_ms() + ms;
    *out = NULL;
    for (;;) {
        if (c->in_len >= PREFIX) {
            size_t need = (size_t)c->in[0] | (size_t)c->in[1] << 8 | (size_t)c->in[2] << 16 |
                          (size_t)c->in[3] << 24;
            if (need == 0 || need > MAX_MESSAGE) {
                set_error(c, "a message of %zu bytes", need);
                return BQP_BAD;
            }
            if (c->in_len >= PREFIX + need) {
                *out = bq__repl__message__unpack(NULL, need, c->in + PREFIX);
                memmove(c->in, c->in + PREFIX + need, c->in_len - PREFIX - need);
                c->in_len -= PREFIX + need;
                if (!*out)
                    set_error(c, "a message that does not unpack");
                return *out ? BQP_MESSAGE : BQP_BAD;
            }
        }
        int r = fill(c, deadline);
        if (r == 0)
            return BQP_CLOSED;
        if (r < 0)
            return BQP_TIMEOUT;
    }
}

bool bqp_wait_closed(bqp_conn_t *c, int ms, size_t *count)
{
    long long deadline = bqt_now_ms() + ms;
    size_t n = 0;
    for (;;) {
        Bq__Repl__Message *m = NULL;
        long long left = deadline - bqt_now_ms();
        bqp_status_t st = bqp_recv(c, left > 0 ? (int)left : 0, &m);
        bqp_free_message(m);
        n += st == BQP_MESSAGE;
        if (st != BQP_MESSAGE) {
            if (count)
                *count = n;
            return st == BQP_CLOSED;
        }
    }
}

const char *bqp_error(const bqp_conn_t *c)
{
    return c->error;
}

void bqp_close(bqp_conn_t *c)
{
    if (!c)
        return;
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c);
}

void bqp_free_message(Bq__Repl__Message *m)
{
    if (m)
        bq__repl__message__free_unpacked(m, NULL);
}

const char *bqp_status_name(bqp_status_t st)
{
    switch (st) {
    case BQP_MESSAGE:
        return "a message";
    case BQP_CLOSED:
        return "closed";
    case BQP_TIMEOUT:
        return "timeout";
    case BQP_BAD:
        return "bad bytes";
    }
    return "?";
}
