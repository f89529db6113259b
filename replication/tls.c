/* The TLS channel of a replication link: one SSL object between two memory
 * BIOs, so that OpenSSL never touches a socket. Ciphertext fed in goes to
 * the read BIO; whatever OpenSSL writes to the write BIO (handshake records,
 * alerts, application data) is drained to io->send after every operation.
 * Both sides require a certificate from the cluster CA whose subjectAltName
 * holds one of the allowed names, and the result is checked again after the
 * handshake (certificate present, verification result X509_V_OK).
 *
 * TLS 1.3: the client considers the handshake complete as soon as it sent its
 * Finished, before the server has verified the client's certificate. A server
 * that refuses that certificate answers with an alert which the client only
 * reads later, as an error from bq_tls_feed after it may already have sent
 * application data. That is expected: the link reports the failure then and
 * the replication handshake never got an answer.
 *
 * The admin API's server side may make the peer's certificate optional
 * (bq_tls_peer_optional): the handshake then completes whatever the client
 * presents, and only bq_tls_peer_name tells an authenticated client (a
 * certificate that verified and matched an allowed name) from the others.
 * Failed handshakes are counted per channel kind for /metrics. */
#include "replication/tls.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

/* Plaintext handed to SSL_write at once: bounds the ciphertext buffered in
 * the write BIO before it is drained. */
#define WRITE_CHUNK ((size_t)256 * 1024)

struct bq_tls {
    SSL *ssl; /* owns the read BIO (from the peer) and the write BIO (to it) */
    bq_tls_io_t io;
    bool established;
    bool failed;
    bool optional; /* the peer's certificate is optional (bq_tls_peer_optional) */
    bq_tls_channel_t channel;
    char err[512];
};

/* Handshake failures by channel kind; channels may live on several threads. */
static atomic_ullong handshake_failures[BQ_TLS_CHANNELS];

/* The notAfter of the certificate the last context made presents, in
 * seconds since the epoch; cert_known once one was loaded. */
static atomic_llong cert_not_after;
static atomic_bool cert_known;

/* Records when ctx's own certificate expires (bq_tls_certificate_expiry). */
static void note_expiry(SSL_CTX *ctx)
{
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    const ASN1_TIME *end = cert ? X509_get0_notAfter(cert) : NULL;
    ASN1_TIME *epoch = ASN1_TIME_set(NULL, 0);
    int days = 0, secs = 0;
    if (end && epoch && ASN1_TIME_diff(&days, &secs, epoch, end) == 1) {
        atomic_store(&cert_not_after, (long long)days * 86400 + secs);
        atomic_store(&cert_known, true);
    }
    ASN1_TIME_free(epoch);
}

bool bq_tls_certificate_expiry(int64_t *not_after)
{
    if (!atomic_load(&cert_known))
        return false;
    *not_after = atomic_load(&cert_not_after);
    return true;
}

/* Appends OpenSSL's queued errors to buf (after what it holds), one line. */
static void drain_errors(char *buf, size_t cap)
{
    unsigned long e;
    while ((e = ERR_get_error()) != 0) {
        size_t used = strlen(buf);
        if (used + 3 >= cap) {
            continue; /* keep draining so the queue is left empty */
        }
        char one[256];
        ERR_error_string_n(e, one, sizeof one);
        snprintf(buf + used, cap - used, "%s%s", used > 0 ? "; " : "", one);
    }
}

/* Sets up ctx from the files; NULL, or what failed with the file in *path. */
static const char *load_files(SSL_CTX *ctx, const bq_tls_files_t *f, const char **path)
{
    *path = f->ca;
    if (!f->ca || SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1)
        return "cannot load CA";
    *path = f->cert;
    if (!f->cert || SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1)
        return "cannot load certificate";
    *path = f->key;
    if (!f->key || SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1)
        return "cannot load private key";
    if (SSL_CTX_check_private_key(ctx) != 1)
        return "private key does not match certificate";
    return NULL;
}

SSL_CTX *bq_tls_ctx_new(bool server, const bq_tls_files_t *files, char *err, size_t errlen)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    const char *path = NULL, *what = "cannot create TLS context";
    if (ctx) {
        what = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1
                   ? load_files(ctx, files, &path)
                   : "cannot set TLS 1.3 as the minimum";
    }
    if (what) {
        if (errlen > 0) {
            snprintf(err, errlen, "%s%s%s: ", what, path ? " " : "", path ? path : "");
            drain_errors(err + strlen(err), errlen - strlen(err));
        }
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
    /* Links are long-lived and never resumed: no session tickets, no cache. */
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    note_expiry(ctx);
    return ctx;
}

/* Restricts the peer's certificate to names (the first one also as SNI):
 * DNS subjectAltNames only, never the subject's CN, and no wildcards. */
static int set_names(SSL *ssl, bool server, const char *const *names, size_t nnames)
{
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_WILDCARDS);
    for (size_t i = 0; i < nnames; i++) {
        int ok = i == 0 ? SSL_set1_host(ssl, names[i]) : SSL_add1_host(ssl, names[i]);
        if (ok != 1)
            return -1;
    }
    if (!server && nnames > 0 && SSL_set_tlsext_host_name(ssl, names[0]) != 1)
        return -1;
    return 0;
}

bq_tls_t *bq_tls_new(SSL_CTX *ctx, bool server, const char *const *names, size_t nnames,
                     const bq_tls_io_t *io)
{
    bq_tls_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->io = *io;
    t->ssl = SSL_new(ctx);
    BIO *rbio = BIO_new(BIO_s_mem());
    BIO *wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !rbio || !wbio) {
        BIO_free(rbio);
        BIO_free(wbio);
        goto fail;
    }
    /* An empty read BIO means "wait for more", never end of file. */
    BIO_set_mem_eof_return(rbio, -1);
    SSL_set_bio(t->ssl, rbio, wbio); /* the SSL owns both from here */
    if (server)
        SSL_set_accept_state(t->ssl);
    else
        SSL_set_connect_state(t->ssl);
    if (set_names(t->ssl, server, names, nnames) == 0)
        return t;
fail:
    ERR_clear_error();
    SSL_free(t->ssl);
    free(t);
    return NULL;
}

/* Hands everything OpenSSL wrote to the peer's direction to io->send. */
static void flush(bq_tls_t *t)
{
    BIO *wbio = SSL_get_wbio(t->ssl);
    uint8_t buf[16384];
    int n;
    while ((n = BIO_read(wbio, buf, (int)sizeof buf)) > 0)
        t->io.send(t->io.arg, buf, (size_t)n);
}

/* Marks the channel failed with what, the verification result when it
 * failed, and OpenSSL's errors. Returns -1. */
static int fail(bq_tls_t *t, const char *what)
{
    if (!t->failed) {
        t->failed = true;
        if (!t->established)
            atomic_fetch_add_explicit(&handshake_failures[t->channel], 1, memory_order_relaxed);
        snprintf(t->err, sizeof t->err, "%s", what);
        long vr = SSL_get_verify_result(t->ssl);
        if (vr != X509_V_OK) {
            size_t used = strlen(t->err);
            snprintf(t->err + used, sizeof t->err - used, " (certificate: %s)",
                     X509_verify_cert_error_string(vr));
        }
        size_t used = strlen(t->err);
        if (ERR_peek_error() != 0 && used + 2 < sizeof t->err) {
            snprintf(t->err + used, sizeof t->err - used, ": ");
            drain_errors(t->err + used + 2, sizeof t->err - used - 2);
        }
    }
    ERR_clear_error();
    return -1;
}

/* After the handshake: the peer presented a certificate, it verified, and
 * it matched one of the allowed names. Never trust the handshake alone. */
static int check_peer(bq_tls_t *t)
{
    if (t->optional) {
        t->established = true;
        return 0;
    }
    if (SSL_get0_peer_certificate(t->ssl) == NULL)
        return fail(t, "peer presented no certificate");
    if (SSL_get_verify_result(t->ssl) != X509_V_OK)
        return fail(t, "peer certificate not verified");
    if (SSL_get0_peername(t->ssl) == NULL)
        return fail(t, "peer certificate matches none of the allowed names");
    t->established = true;
    return 0;
}

/* Classifies a failed SSL call: 0 when it only waits for more input. */
static int check_io(bq_tls_t *t, int r, const char *what)
{
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN)
        return fail(t, "closed by peer (close_notify)");
    char msg[96];
    snprintf(msg, sizeof msg, "%s failed", what);
    return fail(t, msg);
}

/* Optional certificates: the handshake goes on whatever the verification
 * found; the result stays in SSL_get_verify_result. */
static int accept_any(int preverify, X509_STORE_CTX *ctx)
{
    (void)preverify;
    (void)ctx;
    return 1;
}

void bq_tls_peer_optional(bq_tls_t *t)
{
    t->optional = true;
    SSL_set_verify(t->ssl, SSL_VERIFY_PEER, accept_any);
}

void bq_tls_set_channel(bq_tls_t *t, bq_tls_channel_t ch)
{
    if (ch < BQ_TLS_CHANNELS)
        t->channel = ch;
}

uint64_t bq_tls_handshake_failures(bq_tls_channel_t ch)
{
    return ch < BQ_TLS_CHANNELS
               ? atomic_load_explicit(&handshake_failures[ch], memory_order_relaxed)
               : 0;
}

int bq_tls_start(bq_tls_t *t)
{
    if (t->failed)
        return -1;
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    flush(t);
    return r == 1 ? check_peer(t) : check_io(t, r, "TLS handshake");
}

/* Reads every plaintext byte the fed records hold. */
static int read_plain(bq_tls_t *t)
{
    uint8_t buf[16384];
    for (;;) {
        ERR_clear_error();
        int n = SSL_read(t->ssl, buf, (int)sizeof buf);
        if (n <= 0) {
            flush(t); /* post-handshake messages may want an answer */
            return check_io(t, n, "TLS read");
        }
        t->io.plain(t->io.arg, buf, (size_t)n);
        if (t->failed)
            return -1;
    }
}

int bq_tls_feed(bq_tls_t *t, const uint8_t *data, size_t len)
{
    if (t->failed)
        return -1;
    while (len > 0) {
        size_t n = len > INT32_MAX ? (size_t)INT32_MAX : len;
        if (BIO_write(SSL_get_rbio(t->ssl), data, (int)n) != (int)n)
            return fail(t, "out of memory buffering TLS input");
        data += n;
        len -= n;
        if (!t->established) {
            int r = bq_tls_start(t);
            if (r < 0 || !t->established)
                return r;
        }
        if (read_plain(t) < 0)
            return -1;
    }
    return 0;
}

int bq_tls_write(bq_tls_t *t, const uint8_t *data, size_t len)
{
    if (t->failed)
        return -1;
    if (!t->established)
        return fail(t, "write before the TLS handshake completed");
    while (len > 0) {
        size_t n = len > WRITE_CHUNK ? WRITE_CHUNK : len;
        ERR_clear_error();
        int r = SSL_write(t->ssl, data, (int)n);
        if (r <= 0) {
            flush(t);
            return check_io(t, r, "TLS write") == 0 ? fail(t, "TLS write stalled") : -1;
        }
        flush(t);
        data += (size_t)r;
        len -= (size_t)r;
    }
    return 0;
}

void bq_tls_shutdown(bq_tls_t *t)
{
    if (t->failed || !t->established)
        return;
    ERR_clear_error();
    SSL_shutdown(t->ssl);
    ERR_clear_error();
    flush(t);
}

bool bq_tls_established(const bq_tls_t *t)
{
    return t->established && !t->failed;
}

const char *bq_tls_peer_name(const bq_tls_t *t)
{
    /* With an optional certificate, a name can match on a certificate whose
     * chain did not verify: the verification result decides. */
    if (!t->established || SSL_get0_peer_certificate(t->ssl) == NULL ||
        SSL_get_verify_result(t->ssl) != X509_V_OK)
        return NULL;
    return SSL_get0_peername(t->ssl);
}

const char *bq_tls_version(const bq_tls_t *t)
{
    return t->established ? SSL_get_version(t->ssl) : "";
}

const char *bq_tls_error(const bq_tls_t *t)
{
    return t->err;
}

void bq_tls_free(bq_tls_t *t)
{
    if (t == NULL)
        return;
    SSL_free(t->ssl);
    free(t);
}
