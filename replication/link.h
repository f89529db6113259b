/* A replication link: one TCP connection on the libuv loop (a stream,
 * replication/stream.h) carrying length-prefixed bq.repl messages
 * (replication/wire.h), inside mutual TLS (replication/tls.h) or, only when
 * the test flag --repl-plaintext is given, in plaintext. Used by both sides: the primary accepts
 * links from standbys, a standby connects one to the primary.
 *
 * A link that does not complete its TLS handshake within handshake_ms, or
 * receives no byte for idle_ms, is closed ("timeout"): with heartbeats every
 * idle_ms / 4 or so from the other side, a stalled link is found within
 * idle_ms. */
#ifndef BQ_REPL_LINK_H
#define BQ_REPL_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <openssl/ssl.h>

#include "proto/repl.pb-c.h"

typedef struct bq_link bq_link_t;

typedef struct bq_link_callbacks {
    /* The link is usable: TLS established and the peer's name checked (or,
     * in plaintext, TCP connected). */
    void (*on_open)(bq_link_t *l, void *arg);
    /* A message arrived; borrowed: it is freed when the call returns. The
     * callback may send, or close the link. */
    void (*on_message)(bq_link_t *l, const Bq__Repl__Message *msg, void *arg);
    /* Optional: the bytes queued for the socket fell below the low-water
     * mark (BQ_LINK_LOW_WATER) after being above it. */
    void (*on_writable)(bq_link_t *l, void *arg);
    /* The link is closed, why says why (one line); called exactly once per
     * link that was created, also when connecting or the handshake failed.
     * The link is freed after it returns. */
    void (*on_close)(bq_link_t *l, const char *why, void *arg);
} bq_link_callbacks_t;

typedef struct bq_link_config {
    SSL_CTX *tls;             /* borrowed; NULL for plaintext (tests only) */
    const char *const *names; /* names the peer's certificate may match */
    size_t nnames;
    uint32_t max_message;  /* largest message accepted (wire decoder limit) */
    uint64_t handshake_ms; /* deadline to connect and finish the TLS handshake (0 = none) */
    uint64_t idle_ms;      /* close after this long without a received byte */
} bq_link_config_t;

/* Queued bytes above which a sender should pause until on_writable. */
#define BQ_LINK_HIGH_WATER ((size_t)4 * 1024 * 1024)
#define BQ_LINK_LOW_WATER ((size_t)1 * 1024 * 1024)

/* Accepts a pending connection on listening stream server as a link
 * (server side of TLS). cfg is copied (its strings and ctx are borrowed).
 * Returns 0 and the link in *out, or a negative libuv error (nothing left
 * behind; on_close is not called). */
int bq_link_accept(uv_loop_t *loop, uv_stream_t *server, const bq_link_config_t *cfg,
                   const bq_link_callbacks_t *cbs, void *arg, bq_link_t **out);

/* Starts connecting to host:port (a name is resolved on the loop) as the
 * client side of TLS. Returns 0 and the link in *out (on_open or on_close
 * follows), or a negative libuv error (on_close is not called). */
int bq_link_connect(uv_loop_t *loop, const char *host, const char *port,
                    const bq_link_config_t *cfg, const bq_link_callbacks_t *cbs, void *arg,
                    bq_link_t **out);

/* Encodes msg, encrypts it and queues it for the socket. 0, or -1 (out of
 * memory or the link is closing; the link is then closed). */
int bq_link_send(bq_link_t *l, const Bq__Repl__Message *msg);

/* Bytes queued for the socket and not yet written. */
size_t bq_link_queued(const bq_link_t *l);

/* The verified name of the peer (from its certificate); NULL in plaintext
 * or before on_open. */
const char *bq_link_peer_name(const bq_link_t *l);

/* "TLSv1.3" etc., or "plaintext". */
const char *bq_link_security(const bq_link_t *l);

/* The peer's address as "ip:port" ("[ip]:port" for IPv6; "host:port" until
 * connected). */
const char *bq_link_peer_addr(const bq_link_t *l);

/* Whether a close reason (on_close's why) says TLS refused the peer or
 * was refused by it: a failed handshake or verification, not a peer that
 * merely closed. */
bool bq_link_tls_refused(const char *why);

/* Sets the largest message l accepts from now on (see
 * bq_wire_decoder_limit): a receiver raises it once its primary is known. */
void bq_link_set_max_message(bq_link_t *l, uint32_t max);

/* Starts closing the link (a TLS close_notify is sent first when
 * established); on_close(why) follows from the loop. Idempotent. */
void bq_link_close(bq_link_t *l, const char *why);

/* Sets the opaque pointer passed to the callbacks. */
void bq_link_set_arg(bq_link_t *l, void *arg);

#endif
