/* Fuzz target of the admin API's HTTP request parser (node/admin/http_request.c):
 * the first code that reads the bytes an admin client sends.
 *
 * The input is a byte stream as a keep-alive connection carries it: any
 * number of pipelined requests. Each request is parsed, as node/admin/admin.c
 * does, over a buffer that holds its bytes from its start and grows as more
 * arrive, four ways: whole (the rest of the stream at once); growing one
 * byte per call, resumed with last_len; growing in pieces of 1 to 300
 * bytes drawn from a generator seeded with a hash of the input, resumed
 * with last_len, the bytes copied each call to a new heap block of their
 * exact size (so they move between calls, and ASan reports any read past
 * them); and the same growth with another seed, scanned from the start
 * each call (last_len 0). The four must see the same requests (method,
 * target, version, keep-alive, header count) ending at the same offsets,
 * and the same refusal (status and reason) or none; the one-byte run gives
 * the offset of the byte that revealed a fault, which every other run's
 * refusing call must cover and its previous call must not.
 *
 * Invariants (abort on violation), beyond that agreement:
 * - a result is BQ_HTTP_PARTIAL, BQ_HTTP_ERROR or a head length from 1 to
 *   the bytes given;
 * - a request's bytes end with its empty line; after skipping empty lines
 *   they start with a request line of at most BQ_HTTP_MAX_LINE bytes that
 *   reads "METHOD /path[?query] HTTP/1.x" for what the parser reported,
 *   followed by at most BQ_HTTP_MAX_FIELDS header lines of at most
 *   BQ_HTTP_MAX_HEADERS bytes in all (2 per line end);
 * - every slice (method, path, query, header names and values) lies in the
 *   head, in order; the path starts with '/' and holds no '?'; a header
 *   name is a token, a value holds no CR or LF and no space or tab at
 *   either end; HTTP/1.0 without a Connection header is never kept alive;
 * - a refusal has one of the statuses the parser documents, and a reason;
 * - bq_http_query_get and bq_http_query_get_name on each query (a heap copy
 *   of its exact length), for "force", "to" and the query's first key, with
 *   room for 0, 1, 8 and 64 bytes, return -1, 0 or 1, and when 1 a
 *   NUL-terminated value of allowed bytes that fits;
 * - bq_http_cookie_get on a Cookie header (a heap copy of its value) finds
 *   a slice of it that follows its name and '='. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "node/admin/http_request.h"

#define PIECE_MAX 300
#define MAX_INPUT 65536 /* bytes of an input used: at most 4096 requests */
#define MAX_EVENTS 4100

typedef struct event {
    int r;      /* BQ_HTTP_ERROR, or the head's length */
    size_t end; /* stream offset after the head; for a refusal, after the refusing call's bytes */
    size_t lo;  /* for a refusal: stream offset where the call before ended (the fault is after) */
    bq_http_method_t method;
    int minor, status;
    const char *why;
    size_t num_headers;
    bool keep_alive;
    char target[BQ_HTTP_MAX_LINE + 2]; /* path, '?', query */
} event_t;

typedef struct run {
    event_t ev[MAX_EVENTS];
    size_t n;
} run_t;

static run_t runs[4];
static bq_http_request_t req;

static const char *method_name(bq_http_method_t m)
{
    if (m == BQ_HTTP_GET)
        return "GET";
    if (m == BQ_HTTP_HEAD)
        return "HEAD";
    return m == BQ_HTTP_POST ? "POST" : NULL;
}

/* True when c may be in a value of bq_http_query_get (name: of
 * bq_http_query_get_name). */
static bool value_char(char c, bool name)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || (name && c != '\0' && strchr("+/;$()", c) != NULL);
}

/* Checks the query helpers on q[0..qn) for key with every output size. */
static void check_query(const char *q, size_t qn, const char *key)
{
    static const size_t sizes[] = {0, 1, 8, 64};
    char *copy = malloc(qn + 1); /* + 1: malloc(0) may return NULL */
    memcpy(copy, q, qn);
    for (size_t i = 0; i < 8; i++) {
        bool name = i >= 4;
        size_t room = sizes[i % 4];
        char out[64 + 1];
        memset(out, 'X', sizeof out);
        int r = name ? bq_http_query_get_name(copy, qn, key, out, room)
                     : bq_http_query_get(copy, qn, key, out, room);
        BQF_CHECK(r >= -1 && r <= 1, "query_get returned %d", r);
        BQF_CHECK(out[room] == 'X', "query_get wrote past its output");
        if (r != 1)
            continue;
        size_t len = strnlen(out, room);
        BQF_CHECK(len < room, "value not NUL-terminated within its room");
        for (size_t k = 0; k < len; k++)
            BQF_CHECK(value_char(out[k], name), "value holds byte 0x%02x", (unsigned char)out[k]);
    }
    free(copy);
}

/* Checks bq_http_header_get and bq_http_cookie_get on the request's
 * headers: what they find is a slice of the value they were given. */
static void check_cookies(const bq_http_request_t *q)
{
    const char *v, *c;
    size_t vn, cn;
    if (!bq_http_header_get(q, "cookie", &v, &vn))
        return;
    BQF_CHECK(v >= q->headers[0].value, "header value before the headers");
    char *copy = malloc(vn + 1);
    memcpy(copy, v, vn);
    static const char *const names[] = {"bq_console", "bq_console_n1", "a", ""};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!bq_http_cookie_get(copy, vn, names[i], &c, &cn))
            continue;
        size_t nl = strlen(names[i]);
        BQF_CHECK(c >= copy + nl + 1 && c + cn <= copy + vn, "cookie value outside the header");
        BQF_CHECK(memcmp(c - nl - 1, names[i], nl) == 0 && c[-1] == '=',
                  "cookie name not before it");
    }
    free(copy);
}

/* True when s[0..n) holds "keep-alive" in any case. */
static bool contains_keep_alive(const char *s, size_t n)
{
    static const char word[] = "keep-alive";
    for (size_t i = 0; i + sizeof word - 1 <= n; i++) {
        size_t k = 0;
        while (k < sizeof word - 1) {
            char c = s[i + k];
            if ((c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c) != word[k])
                break;
            k++;
        }
        if (k == sizeof word - 1)
            return true;
    }
    return false;
}

/* The request line line[0..len) is "METHOD SP target SP HTTP/1.minor" for
 * what the parser reported as e; the target may end with a '?' that an
 * empty query leaves out of e->target. */
static void check_request_line(const char *line, size_t len, const event_t *e)
{
    char version[16];
    size_t vl = (size_t)snprintf(version, sizeof version, " HTTP/1.%d", e->minor);
    BQF_CHECK(len > vl && memcmp(line + len - vl, version, vl) == 0,
              "request line does not end with \"%s\"", version);
    const char *sp = memchr(line, ' ', len - vl);
    BQF_CHECK(sp != NULL, "request line without a target");
    const char *target = sp + 1;
    size_t tl = (size_t)(line + len - vl - target), el = strlen(e->target);
    BQF_CHECK(memcmp(target, e->target, el < tl ? el : tl) == 0 &&
                  (tl == el || (tl == el + 1 && target[el] == '?' && !strchr(e->target, '?'))),
              "request line has target \"%.*s\", parser %s", (int)tl, target, e->target);
    const char *m = method_name(e->method);
    if (m != NULL)
        BQF_CHECK((size_t)(sp - line) == strlen(m) && memcmp(line, m, strlen(m)) == 0,
                  "request line does not start with %s", m);
}

/* The request data[start..end) that the parser reported as e. */
static void check_request(const uint8_t *data, size_t start, size_t end, const event_t *e)
{
    const char *s = (const char *)data + start;
    size_t n = end - start, i = 0;
    BQF_CHECK(n >= 2 && s[n - 1] == '\n' &&
                  (s[n - 2] == '\n' || (n >= 3 && s[n - 2] == '\r' && s[n - 3] == '\n')),
              "request does not end with an empty line");
    while (i < n && (s[i] == '\r' || s[i] == '\n'))
        i++;
    const char *nl = memchr(s + i, '\n', n - i);
    BQF_CHECK(nl != NULL, "no request line");
    size_t llen = (size_t)(nl - (s + i));
    if (llen > 0 && s[i + llen - 1] == '\r')
        llen--;
    BQF_CHECK(llen <= BQ_HTTP_MAX_LINE, "request line of %zu bytes accepted", llen);
    check_request_line(s + i, llen, e);
    size_t fields = 0, bytes = 0;
    for (const char *p = nl + 1; p < s + n;) {
        const char *e2 = memchr(p, '\n', (size_t)(s + n - p));
        size_t len = (size_t)(e2 - p);
        if (len > 0 && p[len - 1] == '\r')
            len--;
        if (len > 0) {
            fields++;
            bytes += len + 2;
        }
        p = e2 + 1;
    }
    BQF_CHECK(fields <= BQ_HTTP_MAX_FIELDS && bytes <= BQ_HTTP_MAX_HEADERS,
              "%zu header lines of %zu bytes accepted", fields, bytes);
    BQF_CHECK(fields == e->num_headers, "%zu header lines, parser %zu", fields, e->num_headers);
    BQF_CHECK(e->target[0] == '/', "path does not start with /");
    if (e->minor == 0 && e->keep_alive)
        BQF_CHECK(contains_keep_alive(s, n), "HTTP/1.0 kept alive without keep-alive");
}

static bool is_token(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL)))
            return false;
    }
    return n > 0;
}

/* The slices of a complete head buf[0..r): in it, in order, well-formed. */
static void check_slices(const char *buf, int r)
{
    const char *end = buf + r;
    BQF_CHECK(req.method_name >= buf && req.method_len > 0 &&
                  req.method_name + req.method_len < req.path,
              "method slice out of place");
    BQF_CHECK(is_token(req.method_name, req.method_len), "method is not a token");
    BQF_CHECK(req.path_len > 0 && req.path[0] == '/' && !memchr(req.path, '?', req.path_len),
              "path %.*s", (int)req.path_len, req.path);
    BQF_CHECK(req.query >= req.path + req.path_len && req.query + req.query_len < end,
              "query slice out of place");
    BQF_CHECK(req.query_len == 0 || req.query == req.path + req.path_len + 1,
              "query does not follow the path's '?'");
    BQF_CHECK(req.num_headers <= BQ_HTTP_MAX_FIELDS, "%zu headers", req.num_headers);
    const char *after = req.query + req.query_len;
    for (size_t i = 0; i < req.num_headers; i++) {
        const bq_http_header_t *h = &req.headers[i];
        BQF_CHECK(h->name > after && h->name + h->name_len < h->value &&
                      h->value + h->value_len < end,
                  "header %zu out of place", i);
        BQF_CHECK(is_token(h->name, h->name_len), "header name is not a token");
        BQF_CHECK(!memchr(h->value, '\r', h->value_len) && !memchr(h->value, '\n', h->value_len),
                  "header value holds a line end");
        BQF_CHECK(h->value_len == 0 ||
                      (h->value[0] != ' ' && h->value[0] != '\t' &&
                       h->value[h->value_len - 1] != ' ' && h->value[h->value_len - 1] != '\t'),
                  "header value not trimmed");
        after = h->value + h->value_len;
    }
}

/* Records the outcome r of a call given buf[0..len) (a copy of the stream
 * from offset at), after a call that was given prev bytes of it. */
static void record(run_t *run, int r, const char *buf, size_t at, size_t prev, size_t len)
{
    BQF_CHECK(r == BQ_HTTP_PARTIAL || r == BQ_HTTP_ERROR || (r >= 1 && (size_t)r <= len),
              "result %d for %zu bytes", r, len);
    if (r == BQ_HTTP_PARTIAL)
        return;
    BQF_CHECK(run->n < MAX_EVENTS, "too many events");
    event_t *e = &run->ev[run->n++];
    memset(e, 0, sizeof *e);
    e->r = r;
    if (r == BQ_HTTP_ERROR) {
        int st = req.status;
        BQF_CHECK(st == 400 || st == 413 || st == 414 || st == 431 || st == 501 || st == 505,
                  "status %d", st);
        BQF_CHECK(req.why != NULL && req.why[0] != '\0', "refusal without a reason");
        e->status = st;
        e->why = req.why;
        e->lo = at + prev;
        e->end = at + len;
        return;
    }
    e->end = at + (size_t)r;
    check_slices(buf, r);
    BQF_CHECK(req.method >= BQ_HTTP_GET && req.method <= BQ_HTTP_OTHER, "method %d", req.method);
    BQF_CHECK(req.minor == 0 || req.minor == 1, "minor %d", req.minor);
    e->method = req.method;
    e->minor = req.minor;
    e->keep_alive = req.keep_alive;
    e->num_headers = req.num_headers;
    snprintf(e->target, sizeof e->target, "%.*s%s%.*s", (int)req.path_len, req.path,
             req.query_len ? "?" : "", (int)req.query_len, req.query);
    check_query(req.query, req.query_len, "force");
    check_query(req.query, req.query_len, "to");
    check_cookies(&req);
    char key[64];
    size_t kl = 0;
    while (kl < req.query_len && req.query[kl] != '=' && req.query[kl] != '&')
        kl++;
    if (kl < sizeof key) {
        memcpy(key, req.query, kl);
        key[kl] = '\0';
        check_query(req.query, req.query_len, key);
    }
}

typedef enum { WHOLE, BYTES, PIECES, PIECES_RESCAN } run_mode_t;

/* Parses data[0..size) request after request as mode says; seed drives the
 * pieces. */
static void parse_run(run_t *run, const uint8_t *data, size_t size, run_mode_t mode, uint64_t seed)
{
    run->n = 0;
    size_t at = 0;
    /* BYTES gives growing prefixes of one copy of the rest of the stream. */
    char *shared = mode == BYTES ? malloc(size + 1) : NULL;
    if (shared)
        memcpy(shared, data, size);
    while (at < size) {
        size_t left = size - at, prev = 0, len = 0;
        int r = BQ_HTTP_PARTIAL;
        while (r == BQ_HTTP_PARTIAL && len < left) {
            if (mode == WHOLE) {
                len = left;
            } else if (mode == BYTES) {
                len++;
            } else {
                seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
                size_t want = 1 + (size_t)(seed % PIECE_MAX);
                len += want < left - len ? want : left - len;
            }
            const char *buf;
            char *copy = NULL;
            if (shared) {
                buf = shared + at;
            } else {
                copy = malloc(len);
                memcpy(copy, data + at, len);
                buf = copy;
            }
            r = bq_http_parse_request(buf, len, mode == PIECES || mode == BYTES ? prev : 0, &req);
            record(run, r, buf, at, prev, len);
            free(copy);
            prev = len;
        }
        if (r == BQ_HTTP_PARTIAL || r == BQ_HTTP_ERROR)
            break; /* the stream ends in a partial head, or is refused */
        at += (size_t)r;
    }
    free(shared);
}

static void compare(const run_t *a, const run_t *b, const char *what)
{
    BQF_CHECK(a->n == b->n, "%s: %zu events, one byte per call: %zu", what, b->n, a->n);
    for (size_t i = 0; i < a->n; i++) {
        const event_t *x = &a->ev[i], *y = &b->ev[i];
        bool same = x->r == BQ_HTTP_ERROR
                        ? y->r == BQ_HTTP_ERROR && x->status == y->status && x->why == y->why &&
                              y->lo < x->end && x->end <= y->end
                        : x->r == y->r && x->end == y->end && x->method == y->method &&
                              x->minor == y->minor && x->keep_alive == y->keep_alive &&
                              x->num_headers == y->num_headers && strcmp(x->target, y->target) == 0;
        BQF_CHECK(same,
                  "%s: event %zu differs (result %d/%d end %zu/%zu status %d/%d target %s/%s)",
                  what, i, y->r, x->r, y->end, x->end, y->status, x->status, y->target, x->target);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        size = MAX_INPUT;
    uint64_t seed = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++)
        seed = (seed ^ data[i]) * 1099511628211ull;
    parse_run(&runs[0], data, size, BYTES, 0);
    parse_run(&runs[1], data, size, WHOLE, 0);
    parse_run(&runs[2], data, size, PIECES, seed | 1);
    parse_run(&runs[3], data, size, PIECES_RESCAN, (seed * 31) | 1);
    compare(&runs[0], &runs[1], "whole");
    compare(&runs[0], &runs[2], "random pieces");
    compare(&runs[0], &runs[3], "random pieces scanned from the start");
    size_t start = 0;
    for (size_t i = 0; i < runs[0].n; i++) {
        if (runs[0].ev[i].r != BQ_HTTP_ERROR)
            check_request(data, start, runs[0].ev[i].end, &runs[0].ev[i]);
        start = runs[0].ev[i].end;
    }
    return 0;
}
