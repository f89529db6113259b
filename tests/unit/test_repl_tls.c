/* Unit tests of replication/tls.c: two channels joined in memory (what one
 * sends is queued for the other and fed by a pump, never re-entrantly), with
 * certificates made here with the OpenSSL API (EC P-256, subjectAltName
 * DNS:<name>, signed by a CA made here) in a temporary directory. Covers the
 * handshake and the peer names, data both ways (also fed one byte at a
 * time), refusals (wrong name on either side, another CA, no client
 * certificate, a name only in the CN, a wildcard), plaintext fed to a
 * server, a TLS 1.2-only client (refused: TLS 1.3 only) and context
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "replication/tls.h"
#include "tls_certs.h"

/* ---- certificates ---------------------------------------------------- */

static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    assert_non_null(ext);
    assert_int_equal(X509_add_ext(cert, ext, -1), 1);
    X509_EXTENSION_free(ext);
}

/* A certificate for key named cn, signed by issuer (NULL: self-signed CA). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, const char *san, X509 *issuer,
                       EVP_PKEY *issuer_key)
{
    static long serial = 1;
    X509 *cert = X509_new();
    assert_non_null(cert);
    assert_int_equal(X509_set_version(cert, 2), 1);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600L * 24 * 30);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(cert, issuer != NULL ? X509_get_subject_name(issuer) : name);
    assert_int_equal(X509_set_pubkey(cert, key), 1);
    X509 *signer = issuer != NULL ? issuer : cert;
    add_ext(cert, signer, NID_subject_key_identifier, "hash");
    if (issuer == NULL) {
        add_ext(cert, signer, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(cert, signer, NID_basic_constraints, "critical,CA:FALSE");
        if (san[0])
            add_ext(cert, signer, NID_subject_alt_name, san);
        add_ext(cert, signer, NID_authority_key_identifier, "keyid");
    }
    assert_true(X509_sign(cert, issuer_key != NULL ? issuer_key : key, EVP_sha256()) > 0);
    return cert;
}

static void write_pem(const char *name, const char *ext, X509 *cert, EVP_PKEY *key)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(cert != NULL ? PEM_write_X509(f, cert)
                                  : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL),
                     1);
    assert_int_equal(fclose(f), 0);
}

/* Writes dir/<file>.pem and .key for subject CN cn and subjectAltName san
 * ("": none), signed by ca (NULL: a CA). */
static void issue_as(const char *file, const char *cn, const char *san, X509 *ca, EVP_PKEY *ca_key)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    X509 *cert = make_cert(key, cn, san, ca, ca_key);
    write_pem(file, "pem", cert, NULL);
    write_pem(file, "key", NULL, key);
    X509_free(cert);
    EVP_PKEY_free(key);
}

/* Writes dir/<name>.pem and .key, with subjectAltName DNS:<name>, signed by
 * ca (NULL: dir/<name>.pem is a CA). */
static void issue(const char *name, X509 *ca, EVP_PKEY *ca_key, X509 **cert_out, EVP_PKEY **key_out)
{
    char san[128];
    snprintf(san, sizeof san, "DNS:%s", name);
    EVP_PKEY *key = EVP_EC_gen("P-256");
    assert_non_null(key);
    X509 *cert = make_cert(key, name, san, ca, ca_key);
    write_pem(name, "pem", cert, NULL);
    write_pem(name, "key", NULL, key);
    *cert_out = cert;
    *key_out = key;
}

static int setup_certs(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/bq-tls-XXXXXX");
    assert_non_null(mkdtemp(dir));
    X509 *ca, *other, *leaf;
    EVP_PKEY *ca_key, *other_key, *key;
    issue("ca", NULL, NULL, &ca, &ca_key);
    issue("other-ca", NULL, NULL, &other, &other_key);
    const char *names[] = {"alpha", "beta"};
    for (size_t i = 0; i < 2; i++) {
        issue(names[i], ca, ca_key, &leaf, &key);
        X509_free(leaf);
        EVP_PKEY_free(key);
    }
    issue_as("cnonly", "beta", "", ca, ca_key);         /* the name only in the CN */
    issue_as("wild", "wild", "DNS:*.node", ca, ca_key); /* a wildcard */
    issue("rogue", other, other_key, &leaf, &key);
    X509_free(leaf);
    EVP_PKEY_free(key);
    X509_free(ca);
    X509_free(other);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(other_key);
    return 0;
}

/* ---- two channels in memory ------------------------------------------ */

typedef struct buf {
    uint8_t *data;
    size_t len, cap;
} buf_t;

static void buf_add(buf_t *b, const uint8_t *data, size_t len)
{
    if (b->len + len > b->cap) {
        b->cap = (b->len + len) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
}

typedef struct end {
    bq_tls_t *t;
    struct end *peer;
    buf_t in;    /* ciphertext from the peer, not fed yet */
    buf_t plain; /* plaintext received */
    int rc;      /* first failure of bq_tls_feed (-1), else 0 */
} end_t;

typedef struct pair {
    SSL_CTX *sctx, *cctx;
    end_t server, client;
} pair_t;

static void on_send(void *arg, const uint8_t *data, size_t len)
{
    end_t *e = arg;
    buf_add(&e->peer->in, data, len);
}

static void on_plain(void *arg, const uint8_t *data, size_t len)
{
    end_t *e = arg;
    buf_add(&e->plain, data, len);
}

static void join(pair_t *p, const char *server_wants, const char *client_wants)
{
    const char *snames[] = {"nobody", server_wants};
    bq_tls_io_t sio = {on_send, on_plain, &p->server};
    bq_tls_io_t cio = {on_send, on_plain, &p->client};
    p->server.peer = &p->client;
    p->client.peer = &p->server;
    /* Two allowed names on the server: the match is not only the first. */
    p->server.t = bq_tls_new(p->sctx, true, snames, 2, &sio);
    p->client.t = bq_tls_new(p->cctx, false, &client_wants, 1, &cio);
    assert_non_null(p->server.t);
    assert_non_null(p->client.t);
}

/* Feeds what each side sent to the other, piece bytes at a time (0: all at
 * once), until nothing moves. */
static void pump(pair_t *p, size_t piece)
{
    for (bool moved = true; moved;) {
        moved = false;
        end_t *ends[] = {&p->server, &p->client};
        for (int i = 0; i < 2; i++) {
            end_t *e = ends[i];
            buf_t in = e->in;
            e->in = (buf_t){0};
            for (size_t off = 0; off < in.len && e->rc == 0;) {
                size_t n = piece == 0 || piece > in.len - off ? in.len - off : piece;
                e->rc = bq_tls_feed(e->t, in.data + off, n);
                off += n;
                moved = true;
            }
            free(in.data);
        }
    }
}

/* Joins server (certificate alpha, wants server_wants) and client (beta,
 * wants client_wants), starts the client and pumps. */
static void connect_pair(pair_t *p, const char *server_wants, const char *client_wants)
{
    if (p->sctx == NULL) {
        p->sctx = ctx_for(true, "alpha");
    }
    if (p->cctx == NULL) {
        p->cctx = ctx_for(false, "beta");
    }
    join(p, server_wants, client_wants);
    assert_int_equal(bq_tls_start(p->client.t), 0);
    assert_string_equal(bq_tls_version(p->client.t), "");
    assert_null(bq_tls_peer_name(p->client.t));
    pump(p, 0);
}

static void pair_free(pair_t *p)
{
    bq_tls_free(p->server.t);
    bq_tls_free(p->client.t);
    free(p->server.in.data);
    free(p->client.in.data);
    free(p->server.plain.data);
    free(p->client.plain.data);
    SSL_CTX_free(p->sctx);
    SSL_CTX_free(p->cctx);
}

/* ---- tests ----------------------------------------------------------- */

static void test_handshake(void **state)
{
    (void)state;
    pair_t p = {0};
    connect_pair(&p, "beta", "alpha");
    assert_int_equal(p.server.rc, 0);
    assert_int_equal(p.client.rc, 0);
    assert_true(bq_tls_established(p.server.t));
    assert_true(bq_tls_established(p.client.t));
    assert_string_equal(bq_tls_peer_name(p.server.t), "beta");
    assert_string_equal(bq_tls_peer_name(p.client.t), "alpha");
    assert_string_equal(bq_tls_version(p.server.t), "TLSv1.3");
    assert_string_equal(bq_tls_version(p.client.t), "TLSv1.3");
    assert_string_equal(bq_tls_error(p.server.t), "");
    pair_free(&p);
}

static void test_data_both_ways(void **state)
{
    (void)state;
    pair_t p = {0};
    connect_pair(&p, "beta", "alpha");
    assert_int_equal(bq_tls_write(p.client.t, (const uint8_t *)"hello", 5), 0);
    assert_int_equal(bq_tls_write(p.server.t, (const uint8_t *)"world!", 6), 0);
    pump(&p, 0);
    assert_int_equal(p.server.plain.len, 5);
    assert_memory_equal(p.server.plain.data, "hello", 5);
    assert_int_equal(p.client.plain.len, 6);
    assert_memory_equal(p.client.plain.data, "world!", 6);

    /* 1 MiB each way: the server's fed whole, the client's one byte at a time. */
    size_t big = (size_t)1 << 20;
    uint8_t *data = malloc(big);
    assert_non_null(data);
    for (size_t i = 0; i < big; i++) {
        data[i] = (uint8_t)(i * 7 + i / 251);
    }
    p.server.plain.len = p.client.plain.len = 0;
    assert_int_equal(bq_tls_write(p.client.t, data, big), 0);
    pump(&p, 0);
    assert_int_equal(bq_tls_write(p.server.t, data, big), 0);
    pump(&p, 1);
    assert_int_equal(p.server.rc, 0);
    assert_int_equal(p.client.rc, 0);
    assert_int_equal(p.server.plain.len, big);
    assert_int_equal(p.client.plain.len, big);
    assert_memory_equal(p.server.plain.data, data, big);
    assert_memory_equal(p.client.plain.data, data, big);
    free(data);
    pair_free(&p);
}

static void test_client_refuses_wrong_name(void **state)
{
    (void)state;
    pair_t p = {0};
    connect_pair(&p, "beta", "gamma");
    assert_int_equal(p.client.rc, -1);
    assert_false(bq_tls_established(p.client.t));
    assert_null(bq_tls_peer_name(p.client.t));
    assert_non_null(strstr(bq_tls_error(p.client.t), "hostname mismatch"));
    /* The client's alert ends the server's handshake too. */
    assert_int_equal(p.server.rc, -1);
    assert_false(bq_tls_established(p.server.t));
    assert_int_equal(bq_tls_write(p.client.t, (const uint8_t *)"x", 1), -1);
    pair_free(&p);
}

static void test_server_refuses_wrong_name(void **state)
{
    (void)state;
    pair_t p = {0};
    connect_pair(&p, "gamma", "alpha");
    assert_int_equal(p.server.rc, -1);
    assert_false(bq_tls_established(p.server.t));
    assert_non_null(strstr(bq_tls_error(p.server.t), "hostname mismatch"));
    /* TLS 1.3: the client saw its handshake complete, then the alert. */
    assert_int_equal(p.client.rc, -1);
    assert_false(bq_tls_established(p.client.t));
    assert_true(strlen(bq_tls_error(p.client.t)) > 0);
    pair_free(&p);
}

static void test_other_ca_refused(void **state)
{
    (void)state;
    /* A client with a certificate from another CA. */
    pair_t p = {0};
    p.cctx = ctx_for(false, "rogue");
    connect_pair(&p, "rogue", "alpha");
    assert_int_equal(p.server.rc, -1);
    assert_non_null(strstr(bq_tls_error(p.server.t), "unable to get local issuer"));
    assert_int_equal(p.client.rc, -1);
    pair_free(&p);

    /* A server with one. */
    pair_t q = {0};
    q.sctx = ctx_for(true, "rogue");
    connect_pair(&q, "beta", "rogue");
    assert_int_equal(q.client.rc, -1);
    assert_non_null(strstr(bq_tls_error(q.client.t), "unable to get local issuer"));
    assert_int_equal(q.server.rc, -1);
    pair_free(&q);
}

static void test_no_client_certificate(void **state)
{
    (void)state;
    char ca[128];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    pair_t p = {0};
    p.cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(p.cctx);
    assert_int_equal(SSL_CTX_load_verify_locations(p.cctx, ca, NULL), 1);
    SSL_CTX_set_verify(p.cctx, SSL_VERIFY_PEER, NULL);
    connect_pair(&p, "beta", "alpha");
    assert_int_equal(p.server.rc, -1);
    assert_false(bq_tls_established(p.server.t));
    assert_non_null(strstr(bq_tls_error(p.server.t), "certificate"));
    assert_int_equal(p.client.rc, -1);
    pair_free(&p);
}

static void test_plaintext_to_server(void **state)
{
    (void)state;
#define INPUT(s)                                                                                   \
    {                                                                                              \
        s, sizeof s - 1                                                                            \
    }
    static const struct {
        const char *data;
        size_t len;
    } inputs[] = {
        INPUT("put 0 0 10 5\r\nhello\r\n"), INPUT("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        INPUT("\x16\x03\x01\xff\xff garbage that claims to be a huge handshake record"),
        INPUT("\x17\x03\x03\x00\x05hello"), /* application data before any handshake */
    };
#undef INPUT
    SSL_CTX *ctx = ctx_for(true, "alpha");
    const char *names[] = {"beta"};
    end_t e = {0};
    bq_tls_io_t io = {on_send, on_plain, &e};
    end_t sink = {0};
    e.peer = &sink;
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        e.t = bq_tls_new(ctx, true, names, 1, &io);
        assert_non_null(e.t);
        assert_int_equal(bq_tls_feed(e.t, (const uint8_t *)inputs[i].data, inputs[i].len), -1);
        assert_true(strlen(bq_tls_error(e.t)) > 0);
        assert_null(strchr(bq_tls_error(e.t), '\n'));
        assert_false(bq_tls_established(e.t));
        assert_int_equal(bq_tls_feed(e.t, (const uint8_t *)"more", 4), -1);
        bq_tls_free(e.t);
    }
    assert_int_equal(e.plain.len, 0);
    free(sink.in.data);
    SSL_CTX_free(ctx);
}

/* TLS 1.3 only: a client that offers at most 1.2 is refused. */
static void test_tls12_client_refused(void **state)
{
    (void)state;
    pair_t p = {0};
    p.cctx = ctx_for(false, "beta");
    assert_int_equal(SSL_CTX_set_min_proto_version(p.cctx, TLS1_2_VERSION), 1);
    assert_int_equal(SSL_CTX_set_max_proto_version(p.cctx, TLS1_2_VERSION), 1);
    connect_pair(&p, "beta", "alpha");
    assert_int_equal(p.server.rc, -1);
    assert_false(bq_tls_established(p.server.t));
    assert_null(bq_tls_peer_name(p.server.t));
    pair_free(&p);
}

/* Names come from subjectAltName only: a certificate of the cluster CA
 * whose CN is the wanted name but that has no subjectAltName is refused,
 * and so is a wildcard subjectAltName that would match. */
static void test_cn_and_wildcards_refused(void **state)
{
    (void)state;
    pair_t p = {0};
    p.cctx = ctx_for(false, "cnonly");
    connect_pair(&p, "beta", "alpha");
    assert_int_equal(p.server.rc, -1);
    assert_null(bq_tls_peer_name(p.server.t));
    pair_free(&p);
    p = (pair_t){0};
    p.cctx = ctx_for(false, "wild");
    connect_pair(&p, "a.node", "alpha");
    assert_int_equal(p.server.rc, -1);
    assert_null(bq_tls_peer_name(p.server.t));
    pair_free(&p);
    /* The same server takes beta's real certificate. */
    p = (pair_t){0};
    connect_pair(&p, "beta", "alpha");
    assert_int_equal(p.server.rc, 0);
    assert_string_equal(bq_tls_peer_name(p.server.t), "beta");
    assert_string_equal(bq_tls_version(p.server.t), "TLSv1.3");
    pair_free(&p);
}

static void test_ctx_errors(void **state)
{
    (void)state;
    char cert[128], key[128], ca[128], missing[128], err[512];
    snprintf(cert, sizeof cert, "%s/alpha.pem", dir);
    snprintf(key, sizeof key, "%s/beta.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(missing, sizeof missing, "%s/missing.pem", dir);
    bq_tls_files_t mismatch = {.cert = cert, .key = key, .ca = ca};
    assert_null(bq_tls_ctx_new(true, &mismatch, err, sizeof err));
    assert_non_null(strstr(err, key));
    assert_non_null(strstr(err, "mismatch"));
    bq_tls_files_t no_ca = {.cert = cert, .key = key, .ca = missing};
    assert_null(bq_tls_ctx_new(false, &no_ca, err, sizeof err));
    assert_non_null(strstr(err, missing));
    assert_null(strchr(err, '\n'));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake),
        cmocka_unit_test(test_data_both_ways),
        cmocka_unit_test(test_client_refuses_wrong_name),
        cmocka_unit_test(test_server_refuses_wrong_name),
        cmocka_unit_test(test_other_ca_refused),
        cmocka_unit_test(test_no_client_certificate),
        cmocka_unit_test(test_plaintext_to_server),
        cmocka_unit_test(test_tls12_client_refused),
        cmocka_unit_test(test_cn_and_wildcards_refused),
        cmocka_unit_test(test_ctx_errors),
    };
    return cmocka_run_group_tests(tests, setup_certs, teardown_certs);
}
