/* The cluster tests' admin client (admin_client.h): OpenSSL on a blocking
 * socket whose reads wait with poll against the deadline. */
#include "tests/support/admin_client.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tests/support/bqtest.h"

struct bqa_conn {
    int fd;
    SSL_CTX *ctx; /* NULL in plaintext */
    SSL *ssl;
};

/* A client context presenting certs/name.pem, trusting certs/ca.pem. */
static SSL_CTX *client_ctx(const char *certs, const char *name)
{
    char cert[512], key[512], ca[512];
    snprintf(cert, sizeof cert, "%s/%s.pem", certs, name);
    snprintf(key, sizeof key, "%s/%s.key", certs, name);
    snprintf(ca, sizeof ca, "%s/ca.pem", certs);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx && SSL_CTX_use_certificate_chain_file(ctx, cert) == 1 &&
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 &&
        SSL_CTX_load_verify_locations(ctx, ca, NULL) == 1) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        return ctx;
    }
    ERR_print_errors_fp(stderr);
    SSL_CTX_free(ctx);
    return NULL;
}

/* Waits until fd is readable or writable (want) by deadline; false when
 * the deadline passed. */
static bool wait_fd(int fd, short want, long long deadline)
{
    for (;;) {
        long long left = deadline - bqt_now_ms();
        if (left <= 0)
            return false;
        struct pollfd p = {fd, want, 0};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return true;
        if (r < 0 && errno != EINTR)
            return false;
    }
}

bqa_conn_t *bqa_open(int port, const char *certs, const char *name, int ms)
{
    long long deadline = bqt_now_ms() + ms;
    bqa_conn_t *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->fd = bqt_connect(port);
    if (a->fd < 0) {
        free(a);
        return NULL;
    }
    if (!certs || !*certs)
        return a;
    a->ctx = client_ctx(certs, name);
    a->ssl = a->ctx ? SSL_new(a->ctx) : NULL;
    if (!a->ssl || SSL_set_fd(a->ssl, a->fd) != 1) {
        bqa_close(a);
        return NULL;
    }
    for (;;) {
        int r = SSL_connect(a->ssl);
        if (r == 1)
            return a;
        int e = SSL_get_error(a->ssl, r);
        if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
            !wait_fd(a->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
            bqa_close(a);
            return NULL;
        }
    }
}

int bqa_send(bqa_conn_t *a, const char *method, const char *target)
{
    char req[600];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                     method, target);
    if (n <= 0 || (size_t)n >= sizeof req)
        return -1;
    if (a->ssl)
        return SSL_write(a->ssl, req, n) == n ? 0 : -1;
    for (size_t off = 0; off < (size_t)n;) {
        ssize_t w = send(a->fd, req + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

/* Reads what the connection has into buf by deadline: the count, 0 at the
 * end or on an error, -1 when the deadline passed first. */
static int read_some(bqa_conn_t *a, char *buf, size_t cap, long long deadline)
{
    for (;;) {
        if ((!a->ssl || SSL_pending(a->ssl) == 0) && !wait_fd(a->fd, POLLIN, deadline))
            return -1;
        if (a->ssl) {
            int r = SSL_read(a->ssl, buf, (int)cap);
            if (r > 0)
                return r;
            int e = SSL_get_error(a->ssl, r);
            if (e == SSL_ERROR_WANT_READ)
                continue;
            return 0;
        }
        ssize_t n = recv(a->fd, buf, cap, 0);
        if (n < 0 && errno == EINTR)
            continue;
        return n > 0 ? (int)n : 0;
    }
}

int bqa_reply(bqa_conn_t *a, int ms, char *text, size_t cap)
{
    enum { REPLY_MAX = 1 << 17 }; /* a whole /metrics page */
    char *buf = malloc(REPLY_MAX);
    size_t len = 0, want = 0;
    const char *body = NULL;
    long long deadline = bqt_now_ms() + ms;
    int status = 0;
    if (cap)
        text[0] = '\0';
    if (!buf)
        return -1;
    buf[0] = '\0';
    while (!body || (size_t)(buf + len - body) < want) {
        int n = len + 1 < REPLY_MAX ? read_some(a, buf + len, REPLY_MAX - 1 - len, deadline) : 0;
        if (n < 0) {
            free(buf);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        body = strstr(buf, "\r\n\r\n");
        const char *cl = body ? strstr(buf, "\r\nContent-Length: ") : NULL;
        want = cl && cl < body ? strtoull(cl + 18, NULL, 10) : 0;
        body = body ? body + 4 : NULL;
    }
    if (body && sscanf(buf, "HTTP/1.1 %d", &status) == 1 && cap)
        snprintf(text, cap, "%.*s", (int)(buf + len - body), body);
    free(buf);
    return body ? status : 0;
}

void bqa_close(bqa_conn_t *a)
{
    if (!a)
        return;
    if (a->ssl)
        SSL_free(a->ssl);
    SSL_CTX_free(a->ctx);
    if (a->fd >= 0)
        close(a->fd);
    free(a);
}

int bqa_call(int port, const char *certs, const char *name, const char *method, const char *target,
             int ms, char *text, size_t cap)
{
    bqa_conn_t *a = bqa_open(port, certs, name, ms);
    int status = a && bqa_send(a, method, target) == 0 ? bqa_reply(a, ms, text, cap) : -1;
    if (!a && cap)
        text[0] = '\0';
    bqa_close(a);
    return status;
}
