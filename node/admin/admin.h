/* The admin HTTP API (--admin-listen HOST:PORT, default 127.0.0.1 only):
 * HTTP/1.1 on the libuv loop, in TLS (replication/tls.h, the cluster's
 * certificates) when the node has them, on a loopback address also in
 * plaintext (for GETs), and in plaintext only on loopback without them.
 * Any client may GET; who may POST is node/admin/access.h's rule (else
 * 403). Connections are admitted by replication/admit.h's rule: no flood
 * of connections can keep a probe out.
 *
 *   GET  /healthz                  200 "ok": the process serves
 *   GET  /readyz                   200 "ready" or 503 with the reason
 *   GET  /status                   200 JSON document (docs/admin-api.md)
 *   GET  /metrics                  200 Prometheus text exposition 0.0.4
 *   POST /promote[?force=1]        this standby becomes primary
 *   POST /switchover?to=NODE       the primary hands over to NODE
 *   /, /ui/..., /api/...           the web console (node/admin/console.h)
 *
 * The server only parses and routes: the node answers through the handlers
 * below. Mutating requests may take time (an election, a switchover): their
 * handler gets a reply handle and answers later with bq_admin_respond. A
 * malformed, oversized or slow request gets a 4xx and the connection is
 * closed; nothing a client sends can crash the node. */
#ifndef BQ_NODE_ADMIN_H
#define BQ_NODE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include <openssl/ssl.h>

#include "node/admin/http_request.h"

typedef struct bq_admin bq_admin_t;
typedef struct bq_admin_reply bq_admin_reply_t;

/* A request for the console (bq_admin_handlers_t.console): borrowed for the
 * handler's call only. */
typedef struct bq_admin_request {
    const bq_http_request_t *http; /* method, path, query and headers */
    bool over_tls;                 /* it came over TLS */
    bool tls_configured;           /* the node has TLS (certificates) */
    const char *cert_name;         /* the allowed name the client's certificate matched, or NULL */
    const char *source;            /* the client's address, without its port */
} bq_admin_request_t;

/* An answer of the console's: status, Content-Type, extra header lines
 * (each ending in CRLF, or NULL) and body; all copied by bq_admin_answer. */
typedef struct bq_admin_answer {
    int status;
    const char *type;
    const char *headers;
    const char *body;
    size_t len;
} bq_admin_answer_t;

typedef struct bq_admin_handlers {
    void *arg;
    /* GET /readyz: true when ready; else a one-line reason into why. */
    bool (*ready)(void *arg, char *why, size_t whylen);
    /* GET /status: a new NUL-terminated JSON document (freed with free), or
     * NULL when out of memory (the client gets 500). */
    char *(*status)(void *arg);
    /* GET /metrics: a new NUL-terminated text (freed with free), or NULL. */
    char *(*metrics)(void *arg);
    /* POST /promote: answer r with bq_admin_respond, now or later. */
    void (*promote)(void *arg, bool force, bq_admin_reply_t *r);
    /* POST /switchover?to=NODE (to: borrowed for the call): as promote. */
    void (*switchover)(void *arg, const char *to, bq_admin_reply_t *r);
    /* "/", "/ui/..." and "/api/..." in any method (the console decides who
     * may do what): answer r with bq_admin_answer or bq_admin_respond, now
     * or later. NULL: those paths answer 404. */
    void (*console)(void *arg, const bq_admin_request_t *q, bq_admin_reply_t *r);
} bq_admin_handlers_t;

typedef struct bq_admin_config {
    const char *host; /* numeric address to listen on */
    int port;
    SSL_CTX *tls;             /* borrowed; required unless host is a loopback address,
                                 where the port then answers both TLS and plaintext */
    const char *const *names; /* names a client certificate may be taken for (this node
                                 and "beanstalkctl"); borrowed */
    size_t nnames;
    const char *self;            /* this node's id (NULL: a single node): the POST rule */
    unsigned request_timeout_ms; /* a request must arrive whole within this after the
                                    connection or the previous answer; 0: 10 s (tests
                                    set less) */
} bq_admin_config_t;

/* Starts listening. h and cfg are copied (their pointers borrowed for the
 * server's life). Returns 0 and the server in *out; -EINVAL when host is not
 * loopback and cfg->tls is NULL (the node must refuse to start); another
 * negative libuv error when the address cannot be bound. */
int bq_admin_start(uv_loop_t *loop, const bq_admin_config_t *cfg, const bq_admin_handlers_t *h,
                   bq_admin_t **out);

/* Answers a pending mutating request with an HTTP status and a one-line
 * text body (copied), and consumes r. If the client went away meanwhile the
 * answer is dropped. Call exactly once per handle. */
void bq_admin_respond(bq_admin_reply_t *r, int status, const char *text);

/* As bq_admin_respond, with the answer's own type, headers and body (no
 * body for a HEAD request). Call exactly once per handle. */
void bq_admin_answer(bq_admin_reply_t *r, const bq_admin_answer_t *ans);

/* The address actually bound ("127.0.0.1:11380"), for logs and tests. */
const char *bq_admin_address(const bq_admin_t *a);

/* Stops listening and closes every connection (pending replies are dropped
 * and their handles stay valid until answered); frees a after the loop has
 * released its handles. NULL is a no-op. */
void bq_admin_stop(bq_admin_t *a);

#endif
