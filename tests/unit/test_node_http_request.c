/* Unit tests of node/admin/http_request.c, the admin API's request parser: valid
 * requests given whole, growing at every byte and one byte at a time (each
 * time resumed with last_len and scanned again from the start, in a buffer
 * that moves between calls); the slices it returns; every limit at its
 * edge and one byte past it, refused before a line end where the old
 * parser did; a table of bad inputs with the status each must get;
 * pipelined requests in one buffer; and the query string helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/admin/http_request.h"

static bq_http_request_t req;

typedef struct valid {
    const char *text;
    bq_http_method_t method;
    const char *path, *query;
    int minor;
    bool keep_alive;
} valid_t;

static const valid_t valids[] = {
    {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", BQ_HTTP_GET, "/healthz", "", 1, true},
    {"HEAD /status HTTP/1.1\r\nhost: 127.0.0.1:11380\r\n\r\n", BQ_HTTP_HEAD, "/status", "", 1,
     true},
    {"POST /promote?force=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", BQ_HTTP_POST,
     "/promote", "force=1", 1, true},
    {"POST /switchover?to=n%2d2&x=? HTTP/1.1\r\nHOST:a\r\nConnection: close\r\n\r\n", BQ_HTTP_POST,
     "/switchover", "to=n%2d2&x=?", 1, false},
    {"GET / HTTP/1.0\r\n\r\n", BQ_HTTP_GET, "/", "", 0, false},
    {"GET /metrics HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", BQ_HTTP_GET, "/metrics", "", 0,
     true},
    {"GET /a HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, CLOSE\r\n\r\n", BQ_HTTP_GET, "/a", "",
     1, false},
    {"\r\n\nGET /x? HTTP/1.1\nHost: a\n\n", BQ_HTTP_GET, "/x", "", 1, true},
    {"PUT /status HTTP/1.1\r\nHost: a\r\nContent-Length: 000\r\n\r\n", BQ_HTTP_OTHER, "/status", "",
     1, true},
    {"get /status HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Tab:\tv \t\r\n\r\n", BQ_HTTP_OTHER,
     "/status", "", 1, true},
    {"GET /a/b;c=d@e:f HTTP/1.1\r\nHost: a\r\nX-High: \xc3\xa9\r\n\r\n", BQ_HTTP_GET,
     "/a/b;c=d@e:f", "", 1, true},
};

/* Gives text[0..len) in a buffer that grows to each of cuts[0..ncuts) then
 * len, copied each time to a new heap block of exactly that size (so the
 * bytes move and ASan sees any read past them), resuming with last_len or,
 * when rescan, from the start every time. Checks that only the last call
 * completes the request, with all of it; the request's slices point into
 * *last, which the caller frees. */
static void feed_growing(const char *text, size_t len, const size_t *cuts, size_t ncuts,
                         bool rescan, char **last)
{
    size_t prev = 0;
    char *buf = NULL;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        free(buf);
        buf = malloc(end + 1);
        memcpy(buf, text, end);
        int r = bq_http_parse_request(buf, end, rescan ? 0 : prev, &req);
        if (i < ncuts) {
            assert_int_equal(r, BQ_HTTP_PARTIAL);
        } else {
            assert_int_equal(r, (int)len);
        }
        prev = end;
    }
    *last = buf;
}

/* True when s[0..n) equals the NUL-terminated want. */
static bool slice_is(const char *s, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

static void check_request(const valid_t *v, const char *buf, size_t len)
{
    assert_int_equal(req.method, v->method);
    if (!slice_is(req.path, req.path_len, v->path) || !slice_is(req.query, req.query_len, v->query))
        fail_msg("%s: path %.*s query %.*s", v->text, (int)req.path_len, req.path,
                 (int)req.query_len, req.query);
    assert_true(bq_http_path_is(&req, v->path));
    assert_int_equal(req.minor, v->minor);
    assert_int_equal(req.keep_alive, v->keep_alive);
    /* Every slice lies in the buffer. */
    assert_true(req.path >= buf && req.path + req.path_len <= buf + len);
    assert_true(req.query >= buf && req.query + req.query_len <= buf + len);
    assert_true(req.method_name >= buf && req.method_name + req.method_len < req.path);
    for (size_t i = 0; i < req.num_headers; i++) {
        const bq_http_header_t *h = &req.headers[i];
        assert_true(h->name > req.path && h->name + h->name_len <= h->value);
        assert_true(h->value + h->value_len <= buf + len);
    }
}

static void check_all_ways(const valid_t *v)
{
    size_t len = strlen(v->text);
    char *buf;
    for (int rescan = 0; rescan <= 1; rescan++) {
        feed_growing(v->text, len, NULL, 0, rescan, &buf);
        check_request(v, buf, len);
        free(buf);
        for (size_t cut = 0; cut < len; cut++) {
            feed_growing(v->text, len, &cut, 1, rescan, &buf);
            check_request(v, buf, len);
            free(buf);
        }
        size_t *cuts = malloc(len * sizeof *cuts);
        for (size_t k = 0; k + 1 < len; k++)
            cuts[k] = k + 1;
        feed_growing(v->text, len, cuts, len - 1, rescan, &buf);
        check_request(v, buf, len);
        free(buf);
        free(cuts);
    }
}

static void parse_valid_growing_everywhere_gives_request(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof valids / sizeof valids[0]; i++)
        check_all_ways(&valids[i]);
}

static void parse_gives_method_and_headers_as_slices(void **state)
{
    (void)state;
    const char text[] = "\r\nPATCH /a?b=c HTTP/1.1\r\nHost:  h:1 \r\nX-Empty:\r\n"
                        "x-t:\tv w\t\n\r\nGET";
    int r = bq_http_parse_request(text, sizeof text - 1, 0, &req);
    assert_int_equal(r, (int)(sizeof text - 1 - 3));
    assert_ptr_equal(req.method_name, text + 2);
    assert_true(slice_is(req.method_name, req.method_len, "PATCH"));
    assert_int_equal(req.method, BQ_HTTP_OTHER);
    assert_true(slice_is(req.path, req.path_len, "/a"));
    assert_true(slice_is(req.query, req.query_len, "b=c"));
    assert_int_equal(req.num_headers, 3);
    const char *want[3][2] = {{"Host", "h:1"}, {"X-Empty", ""}, {"x-t", "v w"}};
    for (size_t i = 0; i < 3; i++) {
        assert_true(slice_is(req.headers[i].name, req.headers[i].name_len, want[i][0]));
        assert_true(slice_is(req.headers[i].value, req.headers[i].value_len, want[i][1]));
    }
}

/* Parses text whole from the start. */
static int parse_all(const char *text, size_t len)
{
    return bq_http_parse_request(text, len, 0, &req);
}

static void expect_status(const char *text, size_t len, int status)
{
    int r = parse_all(text, len);
    if (status == 0) {
        assert_int_equal(r, (int)len);
        return;
    }
    if (r != BQ_HTTP_ERROR || req.status != status)
        fail_msg("input %.60s: result %d status %d, want status %d", text, r, req.status, status);
    assert_non_null(req.why);
    /* The same bytes are refused again, also byte by byte with last_len,
     * and the refusal is not resumed from. */
    int status0 = req.status;
    const char *why0 = req.why;
    assert_int_equal(bq_http_parse_request(text, len, len, &req), BQ_HTTP_ERROR);
    assert_int_equal(req.status, status0);
    r = BQ_HTTP_PARTIAL;
    for (size_t n = 1; n <= len && r == BQ_HTTP_PARTIAL; n++)
        r = bq_http_parse_request(text, n, n - 1, &req);
    assert_int_equal(r, BQ_HTTP_ERROR);
    assert_int_equal(req.status, status0);
    assert_string_equal(req.why, why0);
}

typedef struct bad {
    const char *text;
    int status;
} bad_t;

static const bad_t bads[] = {
    {"GET /a HTTP/1.1\r\n\r\n", 400},                       /* no Host */
    {"GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400}, /* two Hosts */
    {"GET  /a HTTP/1.1\r\nHost: a\r\n\r\n", 400},           /* two spaces */
    {"GET /a  HTTP/1.1\r\nHost: a\r\n\r\n", 400},
    {" GET /a HTTP/1.1\r\n", 400},
    {"GET /a HTTP/1.1 \r\n", 400},
    {"GET\r\n", 400},
    {"GET /a\r\n", 400},
    {"G(T /a HTTP/1.1\r\n", 400}, /* not a token */
    {"GET a HTTP/1.1\r\n", 400},  /* not origin-form */
    {"GET * HTTP/1.1\r\n", 400},
    {"GET http://a/ HTTP/1.1\r\n", 400},
    {"GET /a#f HTTP/1.1\r\n", 400},
    {"GET /a%2 HTTP/1.1\r\n", 400},
    {"GET /a%zz HTTP/1.1\r\n", 400},
    {"GET /a\"b HTTP/1.1\r\n", 400},
    {"GET /\xc3\xa9 HTTP/1.1\r\n", 400},
    {"GET /a\tb HTTP/1.1\r\n", 400},
    {"GET /a HTTP/1.1\rHost: a\r\n\r\n", 400}, /* bare CR */
    {"GET /a HTTP/1.1\r\nHost: a\r\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost : a\r\n\r\n", 400},      /* space before colon */
    {"GET /a HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", 400}, /* line folding */
    {"GET /a HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost: a\x01\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost: a\x7f\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: -0\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 0, 0\r\n\r\n", 400},
    {"GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n", 413},
    {"POST /promote HTTP/1.1\r\nContent-Length: 0001\r\n", 413},
    {"POST /a HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n", 501},
    {"GET /a HTTP/2.0\r\n", 505},
    {"GET /a HTTP/1.2\r\n", 505},
    {"GET /a HTTP/0.9\r\n", 505},
    {"GET /a HTTP/1.10\r\n", 400},
    {"GET /a HTTP/1\r\n", 400},
    {"GET /a http/1.1\r\n", 400},
    {"GET /a HTTP/1.x\r\n", 400},
};

static void parse_bad_inputs_give_their_status(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++)
        expect_status(bads[i].text, strlen(bads[i].text), bads[i].status);
    expect_status("GET /a\0 HTTP/1.1\r\n", 18, 400);
    expect_status("GET /a HTTP/1.1\r\nHost: \0\r\n\r\n", 28, 400);
    expect_status("GET /a HTTP/1.1\r\nHo\0st: a\r\n\r\n", 29, 400);
}

/* A buffer of n bytes: prefix, then fill up to n - strlen(suffix), then suffix. */
static char *make(size_t n, const char *prefix, char fill, const char *suffix)
{
    char *s = malloc(n + 1);
    size_t p = strlen(prefix), q = strlen(suffix);
    assert_true(p + q <= n);
    memcpy(s, prefix, p);
    memset(s + p, fill, n - p - q);
    memcpy(s + n - q, suffix, q);
    s[n] = '\0';
    return s;
}

static void parse_request_line_limit(void **state)
{
    (void)state;
    /* The line without its CRLF is BQ_HTTP_MAX_LINE bytes: accepted. */
    char *line = make(BQ_HTTP_MAX_LINE, "GET /", 'a', " HTTP/1.1");
    char *text = malloc(BQ_HTTP_MAX_LINE + 64);
    snprintf(text, BQ_HTTP_MAX_LINE + 64, "%s\r\nHost: a\r\n\r\n", line);
    expect_status(text, strlen(text), 0);
    assert_int_equal(req.path_len, BQ_HTTP_MAX_LINE - 13); /* "GET " and " HTTP/1.1" */
    assert_int_equal(parse_all(line, BQ_HTTP_MAX_LINE), BQ_HTTP_PARTIAL);
    free(line);
    /* One byte more: refused as soon as that byte arrives, before a line end. */
    line = make(BQ_HTTP_MAX_LINE + 1, "GET /", 'a', " HTTP/1.1");
    assert_int_equal(parse_all(line, BQ_HTTP_MAX_LINE + 1), BQ_HTTP_ERROR);
    assert_int_equal(req.status, 414);
    assert_int_equal(bq_http_parse_request(line, BQ_HTTP_MAX_LINE, 0, &req), BQ_HTTP_PARTIAL);
    assert_int_equal(bq_http_parse_request(line, BQ_HTTP_MAX_LINE + 1, BQ_HTTP_MAX_LINE, &req),
                     BQ_HTTP_ERROR);
    assert_int_equal(req.status, 414);
    free(line);
    free(text);
}

static void parse_empty_lines_before_request_are_bounded(void **state)
{
    (void)state;
    /* BQ_HTTP_MAX_LINE bytes of empty lines are skipped, one more line is not. */
    size_t n = BQ_HTTP_MAX_LINE / 2;
    char *s = malloc(2 * n + 64);
    for (size_t i = 0; i < n; i++)
        memcpy(s + 2 * i, "\r\n", 2);
    strcpy(s + 2 * n, "GET / HTTP/1.0\r\n\r\n");
    expect_status(s, strlen(s), 0);
    strcpy(s + 2 * n, "\r\nGET / HTTP/1.0\r\n\r\n");
    expect_status(s, strlen(s), 400);
    free(s);
}

static void parse_header_section_limit(void **state)
{
    (void)state;
    const char *start = "GET / HTTP/1.1\r\nHost: a\r\n"; /* Host line: 9 bytes */
    size_t fill = BQ_HTTP_MAX_HEADERS - 9 - 2;           /* X line without CRLF */
    for (int extra = 0; extra <= 1; extra++) {
        char *x = make(fill + (size_t)extra, "X: ", 'v', "");
        size_t len = strlen(start) + strlen(x) + 4;
        char *text = malloc(len + 1);
        snprintf(text, len + 1, "%s%s\r\n\r\n", start, x);
        expect_status(text, len, extra ? 431 : 0);
        /* Refused as the byte past the budget arrives, before the line end. */
        assert_int_equal(parse_all(text, len - 4), extra ? BQ_HTTP_ERROR : BQ_HTTP_PARTIAL);
        free(x);
        free(text);
    }
    /* One header line longer than the whole budget is refused before its end. */
    char *x = make(BQ_HTTP_MAX_HEADERS * 2, "GET / HTTP/1.1\r\nX: ", 'v', "");
    assert_int_equal(parse_all(x, strlen(x)), BQ_HTTP_ERROR);
    assert_int_equal(req.status, 431);
    free(x);
}

static void parse_header_count_limit(void **state)
{
    (void)state;
    for (int extra = 0; extra <= 1; extra++) {
        char text[4096];
        size_t n = (size_t)snprintf(text, sizeof text, "GET / HTTP/1.1\r\nHost: a\r\n");
        for (int i = 1; i < BQ_HTTP_MAX_FIELDS + extra; i++)
            n += (size_t)snprintf(text + n, sizeof text - n, "X-%d: %d\r\n", i, i);
        n += (size_t)snprintf(text + n, sizeof text - n, "\r\n");
        expect_status(text, n, extra ? 431 : 0);
        if (!extra) {
            assert_int_equal(req.num_headers, BQ_HTTP_MAX_FIELDS);
            const bq_http_header_t *h = &req.headers[BQ_HTTP_MAX_FIELDS - 1];
            assert_true(slice_is(h->name, h->name_len, "X-63"));
            assert_true(slice_is(h->value, h->value_len, "63"));
        }
    }
}

/* A fault in bytes given after a partial head is refused at once, without
 * waiting for a line end (the old parser's behaviour, kept). */
static void parse_fault_in_later_bytes_refused_at_once(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int status;
    } cases[] = {
        {"GET /a HTTP/1.1\r\nHost: a\x01", 400},
        {"GET /a HTTP/1.1\r\nHost: a\r\nX: \x7f", 400},
        {"GET /a HTTP/1.1\rX", 400},
        {"GET /a\x16", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].text);
        assert_int_equal(bq_http_parse_request(cases[i].text, len - 1, 0, &req), BQ_HTTP_PARTIAL);
        int r = bq_http_parse_request(cases[i].text, len, len - 1, &req);
        assert_int_equal(r, BQ_HTTP_ERROR);
        assert_int_equal(req.status, cases[i].status);
    }
    /* A TLS ClientHello sent to the plaintext port: refused at its first byte. */
    assert_int_equal(bq_http_parse_request("\x16", 1, 0, &req), BQ_HTTP_ERROR);
    assert_int_equal(req.status, 400);
}

static void parse_pipelined_requests_in_turn(void **state)
{
    (void)state;
    const char *reqs[] = {
        "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
        "POST /promote?force=1 HTTP/1.1\r\nHost: a\r\n\r\n",
        "\r\nHEAD /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    };
    char all[512] = "";
    for (size_t i = 0; i < 3; i++)
        strcat(all, reqs[i]);
    strcat(all, "GET /par"); /* the start of a fourth */
    const char *at = all;
    size_t left = strlen(all);
    const char *paths[] = {"/healthz", "/promote", "/metrics"};
    for (size_t i = 0; i < 3; i++) {
        int r = bq_http_parse_request(at, left, 0, &req);
        assert_int_equal(r, (int)strlen(reqs[i]));
        assert_true(bq_http_path_is(&req, paths[i]));
        assert_int_equal(req.keep_alive, i < 2);
        at += r;
        left -= (size_t)r;
    }
    assert_int_equal(bq_http_parse_request(at, left, 0, &req), BQ_HTTP_PARTIAL);
    char rest[64];
    assert_true(left < 40); /* the start of a fourth request */
    snprintf(rest, sizeof rest, "%.40sity HTTP/1.0\r\n\r\nGET", at);
    assert_int_equal(bq_http_parse_request(rest, strlen(rest), left, &req), 24);
    assert_true(bq_http_path_is(&req, "/parity"));
    assert_false(req.keep_alive);
}

static void parse_empty_or_stale_last_len(void **state)
{
    (void)state;
    assert_int_equal(bq_http_parse_request("", 0, 0, &req), BQ_HTTP_PARTIAL);
    assert_int_equal(bq_http_parse_request("\r", 1, 0, &req), BQ_HTTP_PARTIAL);
    /* A last_len that does not match the last call is a scan from the start. */
    const char text[] = "GET / HTTP/1.0\r\n\r\n";
    assert_int_equal(bq_http_parse_request(text, 5, 0, &req), BQ_HTTP_PARTIAL);
    assert_int_equal(bq_http_parse_request(text, sizeof text - 1, 3, &req), (int)sizeof text - 1);
    assert_int_equal(bq_http_parse_request(text, 3, 0, &req), BQ_HTTP_PARTIAL);
    assert_int_equal(bq_http_parse_request(text, 2, 3, &req), BQ_HTTP_PARTIAL);
    assert_int_equal(bq_http_parse_request(text, sizeof text - 1, sizeof text - 1, &req),
                     (int)sizeof text - 1);
}

static void query_get_finds_decodes_and_refuses(void **state)
{
    (void)state;
    char v[8];
    assert_int_equal(bq_http_query_get("force=1", 7, "force", v, sizeof v), 1);
    assert_string_equal(v, "1");
    assert_int_equal(bq_http_query_get("a=b&to=n%2D2&c", 14, "to", v, sizeof v), 1);
    assert_string_equal(v, "n-2");
    assert_int_equal(bq_http_query_get("%74o=x.y_z", 10, "to", v, sizeof v), 1);
    assert_string_equal(v, "x.y_z");
    assert_int_equal(bq_http_query_get("&&force&", 8, "force", v, sizeof v), 1);
    assert_string_equal(v, "");
    assert_int_equal(bq_http_query_get("force=", 6, "force", v, sizeof v), 1);
    assert_string_equal(v, "");
    assert_int_equal(bq_http_query_get("to=1234567", 10, "to", v, sizeof v), 1);
    assert_string_equal(v, "1234567");
    strcpy(v, "junk");
    assert_int_equal(bq_http_query_get("", 0, "to", v, sizeof v), 0);
    assert_string_equal(v, "");
    assert_int_equal(bq_http_query_get("tox=1&t=2&To=3", 14, "to", v, sizeof v), 0);
    assert_int_equal(bq_http_query_get("t%6=1", 5, "to", v, sizeof v), 0);
    assert_int_equal(bq_http_query_get("to=12345678", 11, "to", v, sizeof v), -1); /* too long */
    assert_int_equal(bq_http_query_get("to=a&to=a", 9, "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a+b", 6, "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a%20b", 8, "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a%2", 6, "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=%00", 6, "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a=b", 6, "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a/b", 6, "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a", 4, "to", v, 0), -1);
    /* Nothing past query_len is read. */
    assert_int_equal(bq_http_query_get("to=ab&to=c", 4, "to", v, sizeof v), 1);
    assert_string_equal(v, "a");
    assert_int_equal(bq_http_query_get("to=ab", 2, "to", v, sizeof v), 1);
    assert_string_equal(v, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_valid_growing_everywhere_gives_request),
        cmocka_unit_test(parse_gives_method_and_headers_as_slices),
        cmocka_unit_test(parse_bad_inputs_give_their_status),
        cmocka_unit_test(parse_request_line_limit),
        cmocka_unit_test(parse_empty_lines_before_request_are_bounded),
        cmocka_unit_test(parse_header_section_limit),
        cmocka_unit_test(parse_header_count_limit),
        cmocka_unit_test(parse_fault_in_later_bytes_refused_at_once),
        cmocka_unit_test(parse_pipelined_requests_in_turn),
        cmocka_unit_test(parse_empty_or_stale_last_len),
        cmocka_unit_test(query_get_finds_decodes_and_refuses),
    };
    return cmocka_run_group_tests_name("node_http_request", tests, NULL, NULL);
}
