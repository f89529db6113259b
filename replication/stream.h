/* A byte stream on the libuv loop: one TCP connection carrying plaintext,
 * directly or through the TLS channel of replication/tls.h (OpenSSL over
 * memory BIOs, so that TLS stays testable without sockets). In the spirit
 * of valkey's ConnectionType (src/connection.h): its users write and read
 * plaintext, whatever carries it, and keep only what is theirs:
 * replication/link.c its message framing and timeouts, node/admin/admin.c its
 * HTTP requests and answers.
 *
 * Output: bq_stream_write takes a buffer and queues it for the socket (in
 * TLS, the ciphertext one write produces, gathered in one buffer). The
 * bytes of unfinished writes are counted (bq_stream_queued); on_drain says
 * when they fell below low water after reaching high water.
 *
 * Input: while reading is wanted (bq_stream_read), the socket is read into
 * a buffer of read_size bytes and the plaintext goes to on_data.
 *
 * Failures (the peer's end of input, a read or write error, TLS refused or
 * failing, out of memory, nothing received for idle_ms) come once, to
 * on_error, which must close the stream. Closing (bq_stream_close) is
 * always completed from the loop: on_close runs once every handle is
 * closed, then the stream is freed, so a stream stays valid inside its own
 * callbacks whatever they do. The stream never logs. */
#ifndef BQ_REPL_STREAM_H
#define BQ_REPL_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <openssl/ssl.h>

#include "replication/tls.h"

typedef struct bq_stream bq_stream_t;

/* on_error's err, besides libuv's codes (UV_EOF: the peer ended its output;
 * UV_ETIMEDOUT: nothing received for idle_ms; UV_ENOMEM: out of memory). */
#define BQ_STREAM_ETLS_HANDSHAKE                                                                   \
    (-20001) /* TLS refused the peer, or was refused, before the                                   \
                handshake completed (counted in                                                    \
                bq_tls_handshake_failures) */
#define BQ_STREAM_ETLS                                                                             \
    (-20002) /* TLS failed after it: an alert, a bad record, the                                   \
                peer's close_notify, a write refused */

typedef struct bq_stream_callbacks {
    /* Optional. The stream is usable: TLS established (and the peer's
     * certificate checked), or a plaintext connect completed; before any
     * on_data. An accepted plaintext stream is usable at once: no call. */
    void (*on_open)(bq_stream_t *s, void *arg);
    /* Plaintext received, in order; borrowed for the call. May write,
     * stop reading or close. */
    void (*on_data)(bq_stream_t *s, const uint8_t *data, size_t len, void *arg);
    /* Optional: the queued bytes fell below low_water after reaching high_water. */
    void (*on_drain)(bq_stream_t *s, void *arg);
    /* The stream failed; why is one line ("peer closed the connection",
     * "read: ...", "write: ...", "tls: ...", "connect ADDR: ...", "timeout:
     * ...", "out of memory"). Called at most once, never while closing; it
     * must close the stream. */
    void (*on_error)(bq_stream_t *s, int err, const char *why, void *arg);
    /* Optional: every handle is closed; the stream is freed when it returns. */
    void (*on_close)(bq_stream_t *s, void *arg);
} bq_stream_callbacks_t;

typedef struct bq_stream_config {
    SSL_CTX *tls;             /* borrowed, must outlive the stream; NULL: plaintext */
    bool server;              /* the TLS side: accepting (server) or connecting (client) */
    const char *const *names; /* names the peer's certificate may match (copied) */
    size_t nnames;
    bq_tls_channel_t channel; /* what its handshake failures are counted as */
    bool peer_optional;       /* server: the client's certificate is asked for, not required
                                 (bq_tls_peer_optional) */
    bool sniff;               /* server with tls: a first byte that does not start a TLS
                                 record (0x16) makes the stream plaintext */
    size_t read_size;         /* bytes read from the socket at once; 0: 64 KiB */
    size_t high_water;        /* on_drain after the queued bytes reached this... */
    size_t low_water;         /* ...and fell below this; 0 and 0: no on_drain */
    uint64_t idle_ms;         /* UV_ETIMEDOUT after this long without a received byte;
                                 0: none */
} bq_stream_config_t;

typedef enum bq_stream_close_how {
    BQ_STREAM_ABORT, /* at once: unwritten bytes are dropped */
    BQ_STREAM_FLUSH, /* stop reading, send a TLS close_notify when established, let the
                        queued bytes leave, then FIN and close (after at most
                        BQ_STREAM_LINGER_MS) */
    BQ_STREAM_LINGER /* as FLUSH, but read and discard the peer's bytes until its FIN (at
                        most BQ_STREAM_LINGER_MS), so that unread bytes cannot make the
                        kernel reset the connection before the peer read ours */
} bq_stream_close_how_t;

#define BQ_STREAM_LINGER_MS 2000

/* A stream on loop, not connected yet. cfg and cbs are copied (cfg's
 * pointers borrowed). NULL when out of memory or the TLS channel cannot be
 * made. */
bq_stream_t *bq_stream_new(uv_loop_t *loop, const bq_stream_config_t *cfg,
                           const bq_stream_callbacks_t *cbs, void *arg);

/* Accepts the connection waiting on the listening server: the peer's
 * address is known, Nagle is off, reading starts if wanted. 0, or a
 * negative libuv error (the stream must then be closed; no on_error). */
int bq_stream_accept(bq_stream_t *s, uv_stream_t *server);

/* Connects to addrs (borrowed until on_open or on_error), each address
 * after a failure of the one before; as the client side of TLS, starts
 * the handshake. on_open follows, or on_error ("connect ADDR: ..." for the
 * last address, or "tls: ..."). */
void bq_stream_connect(bq_stream_t *s, const struct addrinfo *addrs);

/* Wants reading (on) or not: the socket is read only while wanted and
 * connected, never after the end of input. Ignored once closing. 0, or the
 * negative libuv error of starting to read. */
int bq_stream_read(bq_stream_t *s, bool on);

/* Queues plaintext data[0..len) for the peer (encrypted under TLS), taking
 * ownership of data (malloc'd). 0, or -1 when closing or failed (on_error
 * was called if it failed now). */
int bq_stream_write(bq_stream_t *s, uint8_t *data, size_t len);

/* Bytes queued for the socket and not yet written. */
size_t bq_stream_queued(const bq_stream_t *s);

/* True while the stream carries TLS (not after sniffing plaintext). */
bool bq_stream_is_tls(const bq_stream_t *s);

/* The allowed name the peer's certificate matched (replication/tls.h's
 * rule); NULL in plaintext, before the handshake or without one. */
const char *bq_stream_peer_name(const bq_stream_t *s);

/* "TLSv1.3" etc. ("" before the handshake), or "plaintext". */
const char *bq_stream_security(const bq_stream_t *s);

/* The peer's address as "ip:port" ("[ip]:port" for IPv6), and its ip alone;
 * "" until known (accepted, or a connect attempt started). */
const char *bq_stream_peer_addr(const bq_stream_t *s);
const char *bq_stream_peer_ip(const bq_stream_t *s);

/* Starts closing as how says; on_close follows from the loop. Again with
 * BQ_STREAM_ABORT while closing: at once; otherwise a no-op. */
void bq_stream_close(bq_stream_t *s, bq_stream_close_how_t how);

/* "ip:port" or "[ip]:port" of sa into buf[0..len). */
void bq_stream_format_addr(const struct sockaddr *sa, char *buf, size_t len);

#endif
