/* A client of the admin API for cluster tests: HTTP/1.1 to 127.0.0.1:port,
 * over TLS with a certificate from a deploy/mkcerts directory (the node
 * presents its own; ours names `beanstalkctl` or a node) or in plaintext.
 * One request and its answer at a time; blocking, with deadlines. */
#ifndef BQ_TEST_ADMIN_CLIENT_H
#define BQ_TEST_ADMIN_CLIENT_H

#include <stddef.h>

typedef struct bqa_conn bqa_conn_t;

/* Connects to 127.0.0.1:port within ms: TLS presenting certs/<name>.pem
 * (and .key), trusting certs/ca.pem, when certs is a non-empty path;
 * plaintext when certs is NULL or "". NULL when it cannot connect (or the
 * TLS handshake fails). Close with bqa_close. */
bqa_conn_t *bqa_open(int port, const char *certs, const char *name, int ms);

/* Sends `method target` with no body; 0 or -1. */
int bqa_send(bqa_conn_t *a, const char *method, const char *target);

/* Reads the answer within ms: its HTTP status with its body copied
 * (truncated) into text; 0 when the connection closed before a whole
 * answer, -1 when ms passed first. */
int bqa_reply(bqa_conn_t *a, int ms, char *text, size_t cap);

/* Closes the connection and frees a. NULL is a no-op. */
void bqa_close(bqa_conn_t *a);

/* One request on a new connection: its status (as bqa_reply; -1 also when
 * it cannot connect or send) and body. */
int bqa_call(int port, const char *certs, const char *name, const char *method, const char *target,
             int ms, char *text, size_t cap);

#endif
