/* A TLS channel over memory BIOs: OpenSSL without sockets. Ciphertext from
 * the network is fed in, plaintext comes out through a callback, and
 * plaintext written is encrypted into ciphertext handed to another callback
 * for the transport to send (replication/link.c puts it on a libuv stream;
 * unit tests connect two channels in memory).
 *
 * Identity: both sides present a certificate signed by the cluster CA
 * (--tls-ca) and each checks the other's against a list of allowed names
 * (the peers' node ids, which must be a DNS name in the certificate's
 * subjectAltName; the subject's CN never counts, and wildcards never
 * match). TLS 1.3 only: both ends are ours, and its cipher suites are all
 * AEAD with forward secrecy. */
#ifndef BQ_REPL_TLS_H
#define BQ_REPL_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

typedef struct bq_tls_files {
    const char *cert; /* PEM certificate chain of this node */
    const char *key;  /* PEM private key */
    const char *ca;   /* PEM cluster CA: the only trusted issuer */
} bq_tls_files_t;

/* Makes a context for the server (accepting) or client (connecting) side
 * from the files: requires and verifies the peer's certificate, TLS 1.3. Returns a new SSL_CTX
 * (free with SSL_CTX_free), or NULL with a message in err (file missing, key mismatch, ...). */
SSL_CTX *bq_tls_ctx_new(bool server, const bq_tls_files_t *files, char *err, size_t errlen);

typedef struct bq_tls bq_tls_t;

typedef struct bq_tls_io {
    /* Ciphertext to send to the peer, in order; borrowed for the call. */
    void (*send)(void *arg, const uint8_t *data, size_t len);
    /* Plaintext received from the peer, in order; borrowed for the call. */
    void (*plain)(void *arg, const uint8_t *data, size_t len);
    void *arg;
} bq_tls_io_t;

/* A channel on ctx (borrowed; must outlive it) for the server or client
 * side. The peer's certificate must match one of names[0..nnames) (copied).
 * Returns a new channel (free with bq_tls_free) or NULL when out of memory. */
bq_tls_t *bq_tls_new(SSL_CTX *ctx, bool server, const char *const *names, size_t nnames,
                     const bq_tls_io_t *io);

/* Server side, before the first bq_tls_feed: the peer's certificate is
 * asked for but not required, and one that fails verification does not
 * stop the handshake (the admin API serves GETs to any TLS client). The
 * channel is then established without a certificate; bq_tls_peer_name
 * says whether one was presented, verified and allowed. */
void bq_tls_peer_optional(bq_tls_t *t);

/* What a channel carries, for counting its handshake failures. */
typedef enum bq_tls_channel {
    BQ_TLS_REPLICATION, /* the default */
    BQ_TLS_ADMIN,
    BQ_TLS_CHANNELS
} bq_tls_channel_t;

/* Counts t's handshake failure, if any, under ch instead of replication. */
void bq_tls_set_channel(bq_tls_t *t, bq_tls_channel_t ch);

/* Channels of kind ch whose handshake failed (any reason: no or a bad
 * certificate, a name not allowed, not TLS, an alert) in this process. */
uint64_t bq_tls_handshake_failures(bq_tls_channel_t ch);

/* The notAfter of the certificate that the last context bq_tls_ctx_new
 * made in this process presents (a node's own: --tls-cert), in seconds
 * since the epoch, in *not_after: true, or false when no context was made
 * (no TLS). */
bool bq_tls_certificate_expiry(int64_t *not_after);

/* Client side: starts the handshake (sends the ClientHello). 0 or -1. */
int bq_tls_start(bq_tls_t *t);

/* Feeds ciphertext received from the peer: advances the handshake and
 * hands any plaintext to io->plain, any reply to io->send. 0, or -1 when
 * the channel failed (bad certificate, wrong name, not TLS, alert...):
 * bq_tls_error says why; the caller closes the transport. */
int bq_tls_feed(bq_tls_t *t, const uint8_t *data, size_t len);

/* Encrypts plaintext data[0..len) and hands it to io->send. Only after the
 * handshake. 0 or -1. */
int bq_tls_write(bq_tls_t *t, const uint8_t *data, size_t len);

/* Sends a close_notify alert through io->send. */
void bq_tls_shutdown(bq_tls_t *t);

/* True once the handshake completed and the peer's certificate passed. */
bool bq_tls_established(const bq_tls_t *t);

/* The allowed name the peer's certificate matched, once established and
 * only if that certificate verified; NULL otherwise. */
const char *bq_tls_peer_name(const bq_tls_t *t);

/* The negotiated protocol ("TLSv1.3"), or "" before the handshake. */
const char *bq_tls_version(const bq_tls_t *t);

/* Why the channel failed (one line, OpenSSL's errors included); "" if not. */
const char *bq_tls_error(const bq_tls_t *t);

/* Frees the channel. NULL is a no-op. */
void bq_tls_free(bq_tls_t *t);

#endif
