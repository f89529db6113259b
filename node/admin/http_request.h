/* The parser of HTTP/1.1 request heads for the admin API (node/admin/admin.c),
 * with picohttpparser's contract (h2o/picohttpparser, phr_parse_request):
 * the caller keeps the bytes in its own buffer and parses them where they
 * are; the request comes back as slices of that buffer and a fixed array
 * of headers. Pure: no sockets, no libuv, no allocation, no copy.
 *
 * What it accepts is deliberately narrow, since the admin endpoints take no
 * body: a request line "METHOD SP /path[?query] SP HTTP/1.x" (origin-form
 * only), header lines "name: value", lines ending in CRLF (or a bare LF),
 * Content-Length only as 0, no Transfer-Encoding. Anything else is refused
 * with the status RFC 9110/9112 gives for it, as soon as the byte that
 * shows the fault is given (an oversized line before its end, a TLS
 * handshake sent to the plaintext port at its first byte). */
#ifndef BQ_NODE_HTTP_REQUEST_H
#define BQ_NODE_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BQ_HTTP_MAX_LINE 2048    /* request line without its line end; above: 414 */
#define BQ_HTTP_MAX_HEADERS 8192 /* header lines, each counted with 2 bytes of CRLF; above: 431 */
#define BQ_HTTP_MAX_FIELDS 64    /* header lines; above: 431 */

/* bq_http_parse_request's results other than a head's length. */
#define BQ_HTTP_ERROR (-1)   /* refused: answer req->status (req->why says why) and close */
#define BQ_HTTP_PARTIAL (-2) /* no fault so far, the head is not complete: give more */

typedef enum bq_http_method {
    BQ_HTTP_GET,
    BQ_HTTP_HEAD,
    BQ_HTTP_POST,
    BQ_HTTP_OTHER, /* any other well-formed method: the router answers 405 */
} bq_http_method_t;

/* A header line: name and value (without the spaces and tabs around it). */
typedef struct bq_http_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} bq_http_header_t;

typedef struct bq_http_request {
    /* After a complete head (a result > 0): slices of the caller's buffer,
     * valid while it holds those bytes unchanged. None is NUL-terminated. */
    bq_http_method_t method;
    const char *method_name; /* as sent, "GET" */
    size_t method_len;
    const char *path; /* "/status": the target up to its first '?', not decoded */
    size_t path_len;
    const char *query; /* the bytes after that '?', not decoded; query_len 0 when none */
    size_t query_len;
    int minor;       /* HTTP/1.minor: 0 or 1 */
    bool keep_alive; /* the connection may carry another request after this one */
    bq_http_header_t headers[BQ_HTTP_MAX_FIELDS]; /* in order, headers[0..num_headers) */
    size_t num_headers;

    /* After BQ_HTTP_ERROR: the status to answer (400, 413, 414, 431, 501 or
     * 505) and one line saying why (static). */
    int status;
    const char *why;

    /* Private: where the scan of a partial head stopped, in offsets from the
     * start of the head (so that the caller may move its buffer). */
    struct bq_http_scan {
        size_t pos;          /* bytes scanned: the last call's len */
        size_t line;         /* offset where the current line starts */
        size_t skipped;      /* bytes of empty lines before the request line, 2 per line */
        size_t header_bytes; /* header lines so far, 2 bytes each for the line end */
        uint16_t request, method_len, target, target_len; /* the request line */
        uint16_t fields[BQ_HTTP_MAX_FIELDS][4]; /* name, name length, value, value length */
        unsigned nfields;
        uint8_t state;
        bool cr, host, close, keep_alive;
    } scan;
} bq_http_request_t;

/* Parses the request head at buf[0..len) (borrowed): the bytes of one
 * request from its first byte (empty lines before a request line are
 * skipped and counted in its length), with whatever follows it.
 *
 * Returns the length of the head (> 0, through its empty line; the bytes
 * after it belong to the next request) with the request in *req; or
 * BQ_HTTP_PARTIAL when no fault is in buf[0..len) but the head is not
 * complete: call again once more bytes follow; or BQ_HTTP_ERROR with
 * req->status and req->why. Refusals are final for the connection.
 *
 * last_len, as in picohttpparser, spares scanning again what an earlier
 * call saw: 0 for a new request; after BQ_HTTP_PARTIAL, the len of that call,
 * with the same req and the same bytes at the start of buf (they may have
 * moved). Only the new bytes are then scanned, so a head that trickles in
 * byte by byte costs linear time. The result is the same as with
 * last_len 0. */
int bq_http_parse_request(const char *buf, size_t len, size_t last_len, bq_http_request_t *req);

/* Finds key in query[0..query_len) ("a=1&b=x", not decoded; borrowed) and
 * writes its percent-decoded value, NUL-terminated, to out[0..outlen).
 * Returns 1 when found ("" for "key" or "key="), 0 when absent, -1 when the
 * key appears more than once or its value is malformed, holds a byte
 * outside [A-Za-z0-9._-] or does not fit in outlen - 1 bytes. */
int bq_http_query_get(const char *query, size_t query_len, const char *key, char *out,
                      size_t outlen);

/* As bq_http_query_get, also allowing the other bytes of a beanstalk name
 * (+ / ; $ ( ): a tube's name. */
int bq_http_query_get_name(const char *query, size_t query_len, const char *key, char *out,
                           size_t outlen);

/* The value of req's first header named name (case-insensitive) into
 * *value, *len (a slice of the request); false when there is none. */
bool bq_http_header_get(const bq_http_request_t *req, const char *name, const char **value,
                        size_t *len);

/* Finds cookie name in a Cookie header's value[0..len) (borrowed): its
 * value's slice into *out, *out_len (spaces around it left out); false
 * when absent. */
bool bq_http_cookie_get(const char *value, size_t len, const char *name, const char **out,
                        size_t *out_len);

/* True when the request's path is exactly path (NUL-terminated). */
bool bq_http_path_is(const bq_http_request_t *req, const char *path);

#endif
