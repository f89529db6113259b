/* An incremental parser of HTTP/1.1 request heads for the admin API
 * (node/admin/admin.c): bytes in, one request (or the status to refuse it with)
 * out. Pure: no sockets, no libuv, no allocation.
 *
 * What it accepts is deliberately narrow, since the admin endpoints take no
 * body: a request line "METHOD SP /path[?query] SP HTTP/1.x" (origin-form
 * only), header lines "name: value", lines ending in CRLF (or a bare LF),
 * Content-Length only as 0, no Transfer-Encoding. Anything else is refused
 * with the status RFC 9110/9112 gives for it. After a complete request the
 * next call starts the next request on the same parser, so that pipelined
 * requests on a keep-alive connection are parsed in turn. */
#ifndef BQ_NODE_HTTP_REQUEST_H
#define BQ_NODE_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#define BQ_HTTP_MAX_LINE 2048    /* request line without its line end; above: 414 */
#define BQ_HTTP_MAX_HEADERS 8192 /* header lines, each counted with 2 bytes of CRLF; above: 431 */
#define BQ_HTTP_MAX_FIELDS 64    /* header lines; above: 431 */

typedef enum bq_http_method {
    BQ_HTTP_GET,
    BQ_HTTP_HEAD,
    BQ_HTTP_POST,
    BQ_HTTP_OTHER, /* any other well-formed method: the router answers 405 */
} bq_http_method_t;

typedef enum bq_http_result {
    BQ_HTTP_MORE,    /* every byte given was consumed; the request is not complete */
    BQ_HTTP_REQUEST, /* a request head is complete: see p->req */
    BQ_HTTP_ERROR,   /* refused: answer p->status (p->why says why) and close */
} bq_http_result_t;

typedef struct bq_http_request {
    bq_http_method_t method;
    const char *path;  /* "/status", not decoded; points into the parser */
    const char *query; /* the bytes after '?', not decoded; "" when none */
    int minor;         /* HTTP/1.minor: 0 or 1 */
    bool keep_alive;   /* the connection may carry another request after this one */
} bq_http_request_t;

typedef struct bq_http_parser {
    /* Public, read-only: the request after BQ_HTTP_REQUEST (its strings
     * valid until the next bq_http_parse), the refusal after BQ_HTTP_ERROR. */
    bq_http_request_t req;
    int status;      /* 400, 405, 413, 414, 431, 501 or 505 */
    const char *why; /* one line, static */

    /* Private state. */
    int state;
    bool cr;             /* the previous byte was a CR */
    size_t line_len;     /* bytes of the current line in line[] */
    size_t skipped;      /* bytes of empty lines before the request line */
    size_t header_bytes; /* header lines so far, 2 bytes each for the line end */
    unsigned fields;     /* header lines so far */
    bool host, close, keep_alive;
    char target[BQ_HTTP_MAX_LINE + 1];
    char line[BQ_HTTP_MAX_HEADERS];
} bq_http_parser_t;

/* Prepares p (caller-owned, no resources to release) for a first request. */
void bq_http_parser_init(bq_http_parser_t *p);

/* Parses data[0..len) (borrowed) as the continuation of the current request,
 * or as the start of the next one after BQ_HTTP_REQUEST. Sets *used to the
 * bytes consumed: all of them for BQ_HTTP_MORE, through the end of the head
 * for BQ_HTTP_REQUEST (the rest belongs to the next request), through the
 * byte that revealed the fault for BQ_HTTP_ERROR. An error is final: later
 * calls consume nothing and return BQ_HTTP_ERROR again until
 * bq_http_parser_init. */
bq_http_result_t bq_http_parse(bq_http_parser_t *p, const char *data, size_t len, size_t *used);

/* True when no byte of a new request has been received since init or the
 * last complete request (empty lines before a request line count as bytes). */
bool bq_http_parser_idle(const bq_http_parser_t *p);

/* Finds key in query ("a=1&b=x", not decoded; borrowed) and writes its
 * percent-decoded value, NUL-terminated, to out[0..outlen). Returns 1 when
 * found ("" for "key" or "key="), 0 when absent, -1 when the key appears more
 * than once or its value is malformed, holds a byte outside [A-Za-z0-9._-]
 * or does not fit in outlen - 1 bytes. */
int bq_http_query_get(const char *query, const char *key, char *out, size_t outlen);

#endif
