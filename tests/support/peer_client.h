/* A client of the replication wire for tests that play a peer (or a
 * stranger) against a real node: TCP to 127.0.0.1:port, then TLS presenting
 * a certificate and key and trusting a CA (by default the files of a
 * deploy/mkcerts directory), or plain TCP; messages are a u32 little-endian
 * length and one packed bq.repl.Message (replication/wire.h), built here
 * with protobuf-c alone, not with the server's encoder. Every call has a
 * deadline; the socket is non-blocking and waits with poll.
 *
 * OpenSSL writes to the socket with write(): a test whose peer may close
 * while it writes must ignore SIGPIPE. */
#ifndef BQ_TEST_PEER_CLIENT_H
#define BQ_TEST_PEER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/repl.pb-c.h"

typedef struct bqp_conn bqp_conn_t;

/* What the client presents and trusts. */
typedef struct bqp_tls {
    char cert[512]; /* PEM certificate (chain) presented */
    char key[512];  /* its PEM key */
    char ca[512];   /* the CA the server's certificate must verify against */
    bool tls12;     /* offer TLS 1.2 only (the default: TLS 1.3 only) */
} bqp_tls_t;

typedef enum bqp_status {
    BQP_MESSAGE = 0, /* a whole message arrived */
    BQP_CLOSED,      /* the connection ended (EOF, reset, a TLS alert) first */
    BQP_TIMEOUT,     /* the deadline passed first */
    BQP_BAD,         /* bytes that are no message (or out of memory) */
} bqp_status_t;

/* Fills t with certs/<name>.pem, certs/<name>.key and certs/ca.pem. */
void bqp_tls_files(bqp_tls_t *t, const char *certs, const char *name);

/* Connects to 127.0.0.1:port within ms: TLS with t, plain TCP when t is
 * NULL. NULL when it cannot connect or the handshake fails, with why in err
 * (may be NULL). With TLS 1.3 the server checks our certificate after our
 * side of the handshake is done: its refusal shows at the first
 * bqp_recv (BQP_CLOSED). Close with bqp_close. */
bqp_conn_t *bqp_connect(int port, const bqp_tls_t *t, int ms, char *err, size_t errlen);

/* bqp_connect with the files of a mkcerts directory (certs/<name>.*,
 * certs/ca.pem); plain TCP when certs is NULL or "". */
bqp_conn_t *bqp_open(int port, const char *certs, const char *name, int ms);

/* Sends len bytes as they are within ms. 0, or -1 when the connection
 * ended or the deadline passed first (bqp_error says which). */
int bqp_send_raw(bqp_conn_t *c, const void *data, size_t len, int ms);

/* Sends msg framed (u32 little-endian length, packed message) within ms;
 * as bqp_send_raw. */
int bqp_send(bqp_conn_t *c, const Bq__Repl__Message *msg, int ms);

/* Reads one framed message within ms into *out (free it with
 * bqp_free_message) on BQP_MESSAGE; *out is NULL otherwise. Messages
 * longer than 64 MiB are BQP_BAD. */
bqp_status_t bqp_recv(bqp_conn_t *c, int ms, Bq__Repl__Message **out);

/* Reads messages until the connection ends (true), or ms pass or bytes
 * that are no message arrive (false), dropping them; *count (may be NULL)
 * gets how many arrived. */
bool bqp_wait_closed(bqp_conn_t *c, int ms, size_t *count);

/* The last failure in words ("" when none): OpenSSL's error, errno, ... */
const char *bqp_error(const bqp_conn_t *c);

/* Closes the connection (no TLS close_notify: a test hangs up as a crashed
 * peer would) and frees c. NULL is a no-op. */
void bqp_close(bqp_conn_t *c);

/* Frees a message from bqp_recv. NULL is a no-op. */
void bqp_free_message(Bq__Repl__Message *m);

/* The name of a status, for failure messages. */
const char *bqp_status_name(bqp_status_t st);

/* A plain TCP connection to 127.0.0.1:port from the local address src (any
 * 127.0.0.0/8 address works on Linux's loopback without configuration),
 * non-blocking once connected; the fd, or -1. For floods of strangers. */
int bqp_tcp_from(const char *src, int port);

#endif
