/* Fuzz target of the admin API's HTTP request parser (node/admin/http_request.c):
 * the first code that reads the bytes an admin client sends.
 *
 * The input is a byte stream as a keep-alive connection carries it: any
 * number of pipelined requests. It is parsed three times, each on a fresh
 * parser: in one piece (after each complete request the rest is given
 * again), one byte per call, and in pieces of 1 to 300 bytes drawn from a
 * generator seeded with a hash of the input. Every piece is a heap copy of
 * its exact size, so ASan reports any read past it. The three runs must see
 * the same requests (method, path, query, version, keep-alive) ending at the
 * same offsets, and the same refusal at the same offset or none.
 *
 * Invariants (abort on violation), beyond that agreement:
 * - a call uses at most the bytes given, all of them when it says MORE and
 *   at least one when it completes or refuses; a refusal is final;
 * - a request's bytes end with its empty line; after skipping empty lines
 *   they start with a request line of at most BQ_HTTP_MAX_LINE bytes that
 *   reads "METHOD /path[?query] HTTP/1.x" for what the parser reported,
 *   followed by at most BQ_HTTP_MAX_FIELDS header lines of at most
 *   BQ_HTTP_MAX_HEADERS bytes in all (2 per line end);
 * - the path starts with '/' and holds no '?'; HTTP/1.0 without a
 *   Connection header is never kept alive;
 * - a refusal has one of the statuses the parser documents, and a reason;
 * - bq_http_query_get on each query, for "force", "to" and the query's
 *   first key, with room for 0, 1, 8 and 64 bytes, returns -1, 0 or 1, and
 *   when 1 a NUL-terminated value of allowed bytes that fits. */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "node/admin/http_request.h"

#define PIECE_MAX 300
#define MAX_INPUT 65536 /* bytes of an input used: at most 4096 requests */
#define MAX_EVENTS 4100

typedef struct event {
    bq_http_result_t r;
    size_t end; /* stream offset after the bytes it used */
    bq_http_method_t method;
    int minor, status;
    bool keep_alive;
    char target[BQ_HTTP_MAX_LINE + 2]; /* path, '?', query */
} event_t;

typedef struct run {
    event_t ev[MAX_EVENTS];
    size_t n;
} run_t;

static run_t runs[3];
static bq_http_parser_t parser;

static const char *method_name(bq_http_method_t m)
{
    if (m == BQ_HTTP_GET)
        return "GET";
    if (m == BQ_HTTP_HEAD)
        return "HEAD";
    return m == BQ_HTTP_POST ? "POST" : NULL;
}

/* Checks the query helper on q for key with every output size. */
static void check_query(const char *q, const char *key)
{
    static const size_t sizes[] = {0, 1, 8, 64};
    for (size_t i = 0; i < 4; i++) {
        char out[64 + 1];
        memset(out, 'X', sizeof out);
        int r = bq_http_query_get(q, key, out, sizes[i]);
        BQF_CHECK(r >= -1 && r <= 1, "query_get returned %d", r);
        BQF_CHECK(out[sizes[i]] == 'X', "query_get wrote past its output");
        if (r != 1)
            continue;
        size_t len = strnlen(out, sizes[i]);
        BQF_CHECK(len < sizes[i], "value not NUL-terminated within its room");
        for (size_t k = 0; k < len; k++) {
            char c = out[k];
            BQF_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          c == '.' || c == '_' || c == '-',
                      "value holds byte 0x%02x", (unsigned char)c);
        }
    }
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
    BQF_CHECK(e->target[0] == '/', "path does not start with /");
    if (e->minor == 0 && e->keep_alive)
        BQF_CHECK(contains_keep_alive(s, n), "HTTP/1.0 kept alive without keep-alive");
}

/* Records what the parser returned for a call that started at stream offset
 * at with len bytes; returns the bytes used. */
static size_t record(run_t *run, bq_http_result_t r, size_t at, size_t len, size_t used)
{
    BQF_CHECK(used <= len, "used %zu of %zu bytes", used, len);
    BQF_CHECK(r != BQ_HTTP_MORE || used == len, "MORE after using %zu of %zu bytes", used, len);
    BQF_CHECK(r == BQ_HTTP_MORE || used >= 1, "result %d after using no byte", r);
    if (r == BQ_HTTP_MORE)
        return used;
    BQF_CHECK(run->n < MAX_EVENTS, "too many events");
    event_t *e = &run->ev[run->n++];
    memset(e, 0, sizeof *e);
    e->r = r;
    e->end = at + used;
    if (r == BQ_HTTP_ERROR) {
        int st = parser.status;
        BQF_CHECK(st == 400 || st == 413 || st == 414 || st == 431 || st == 501 || st == 505,
                  "status %d", st);
        BQF_CHECK(parser.why != NULL && parser.why[0] != '\0', "refusal without a reason");
        e->status = st;
        return used;
    }
    const bq_http_request_t *q = &parser.req;
    BQF_CHECK(q->method >= BQ_HTTP_GET && q->method <= BQ_HTTP_OTHER, "method %d", q->method);
    BQF_CHECK(q->minor == 0 || q->minor == 1, "minor %d", q->minor);
    BQF_CHECK(q->path[0] == '/' && strchr(q->path, '?') == NULL, "path %s", q->path);
    BQF_CHECK(bq_http_parser_idle(&parser), "not idle after a request");
    e->method = q->method;
    e->minor = q->minor;
    e->keep_alive = q->keep_alive;
    snprintf(e->target, sizeof e->target, "%s%s%s", q->path, q->query[0] ? "?" : "", q->query);
    check_query(q->query, "force");
    check_query(q->query, "to");
    char key[64];
    size_t kl = strcspn(q->query, "=&");
    if (kl < sizeof key) {
        memcpy(key, q->query, kl);
        key[kl] = '\0';
        check_query(q->query, key);
    }
    return used;
}

/* Parses data[0..size) in pieces: whole when step is 0, else of step bytes,
 * else (step < 0) of random sizes from seed. */
static void parse_run(run_t *run, const uint8_t *data, size_t size, int step, uint64_t seed)
{
    bq_http_parser_init(&parser);
    run->n = 0;
    size_t at = 0;
    while (at < size) {
        size_t len = size - at;
        if (step > 0 && len > (size_t)step)
            len = (size_t)step;
        if (step < 0) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            size_t want = 1 + (size_t)(seed % PIECE_MAX);
            len = want < len ? want : len;
        }
        uint8_t *piece = malloc(len);
        memcpy(piece, data + at, len);
        size_t used;
        bq_http_result_t r = bq_http_parse(&parser, (const char *)piece, len, &used);
        free(piece);
        at += record(run, r, at, len, used);
        if (r == BQ_HTTP_ERROR) {
            BQF_CHECK(bq_http_parse(&parser, "\r\n", 2, &used) == BQ_HTTP_ERROR && used == 0,
                      "a refusal is not final");
            return;
        }
    }
}

static void compare(const run_t *a, const run_t *b, const char *what)
{
    BQF_CHECK(a->n == b->n, "%s: %zu events, whole: %zu", what, b->n, a->n);
    for (size_t i = 0; i < a->n; i++) {
        const event_t *x = &a->ev[i], *y = &b->ev[i];
        BQF_CHECK(x->r == y->r && x->end == y->end && x->status == y->status &&
                      x->method == y->method && x->minor == y->minor &&
                      x->keep_alive == y->keep_alive && strcmp(x->target, y->target) == 0,
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
    parse_run(&runs[0], data, size, 0, 0);
    parse_run(&runs[1], data, size, 1, 0);
    parse_run(&runs[2], data, size, -1, seed | 1);
    compare(&runs[0], &runs[1], "one byte per call");
    compare(&runs[0], &runs[2], "random pieces");
    size_t start = 0;
    for (size_t i = 0; i < runs[0].n; i++) {
        if (runs[0].ev[i].r == BQ_HTTP_REQUEST)
            check_request(data, start, runs[0].ev[i].end, &runs[0].ev[i]);
        start = runs[0].ev[i].end;
    }
    return 0;
}
