/* Unit tests of node/admin/http_request.c, the admin API's request parser: valid
 * requests fed whole, split at every byte and one byte at a time; every
 * limit at its edge and one byte past it; a table of bad inputs with the
 * status each must get; pipelined requests on one parser; and the query
 * string helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/admin/http_request.h"

static bq_http_parser_t parser;

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

/* Feeds text[0..len) in pieces whose ends are cuts[0..ncuts) then len;
 * checks that only the last piece completes the request, using all of it. */
static void feed_pieces(const char *text, size_t len, const size_t *cuts, size_t ncuts)
{
    bq_http_parser_init(&parser);
    size_t at = 0, used;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        bq_http_result_t r = bq_http_parse(&parser, text + at, end - at, &used);
        if (i < ncuts) {
            assert_int_equal(r, BQ_HTTP_MORE);
        } else {
            assert_int_equal(r, BQ_HTTP_REQUEST);
        }
        assert_int_equal(used, end - at);
        at = end;
    }
}

static void check_request(const valid_t *v)
{
    assert_int_equal(parser.req.method, v->method);
    assert_string_equal(parser.req.path, v->path);
    assert_string_equal(parser.req.query, v->query);
    assert_int_equal(parser.req.minor, v->minor);
    assert_int_equal(parser.req.keep_alive, v->keep_alive);
}

static void parse_valid_split_everywhere_gives_request(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof valids / sizeof valids[0]; i++) {
        const valid_t *v = &valids[i];
        size_t len = strlen(v->text);
        feed_pieces(v->text, len, NULL, 0);
        check_request(v);
        for (size_t cut = 0; cut < len; cut++) {
            feed_pieces(v->text, len, &cut, 1);
            check_request(v);
        }
        size_t *cuts = malloc(len * sizeof *cuts);
        for (size_t k = 0; k + 1 < len; k++)
            cuts[k] = k + 1;
        feed_pieces(v->text, len, cuts, len - 1);
        check_request(v);
        free(cuts);
    }
}

/* Parses text whole on a fresh parser. */
static bq_http_result_t parse_all(const char *text, size_t len, size_t *used)
{
    bq_http_parser_init(&parser);
    return bq_http_parse(&parser, text, len, used);
}

static void expect_status(const char *text, size_t len, int status)
{
    size_t used;
    bq_http_result_t r = parse_all(text, len, &used);
    if (status == 0) {
        assert_int_equal(r, BQ_HTTP_REQUEST);
        assert_int_equal(used, len);
        return;
    }
    if (r != BQ_HTTP_ERROR || parser.status != status)
        fail_msg("input %.60s: result %d status %d, want status %d", text, r, parser.status,
                 status);
    assert_non_null(parser.why);
    assert_true(used <= len);
    /* An error is final. */
    assert_int_equal(bq_http_parse(&parser, "\r\n", 2, &used), BQ_HTTP_ERROR);
    assert_int_equal(used, 0);
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
    char *req = malloc(BQ_HTTP_MAX_LINE + 64);
    snprintf(req, BQ_HTTP_MAX_LINE + 64, "%s\r\nHost: a\r\n\r\n", line);
    expect_status(req, strlen(req), 0);
    assert_int_equal(strlen(parser.req.path), BQ_HTTP_MAX_LINE - 13); /* "GET " and " HTTP/1.1" */
    free(line);
    /* One byte more: refused as soon as that byte arrives. */
    line = make(BQ_HTTP_MAX_LINE + 1, "GET /", 'a', " HTTP/1.1");
    size_t used;
    assert_int_equal(parse_all(line, BQ_HTTP_MAX_LINE + 1, &used), BQ_HTTP_ERROR);
    assert_int_equal(parser.status, 414);
    assert_int_equal(used, BQ_HTTP_MAX_LINE + 1);
    free(line);
    free(req);
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
        char *req = malloc(len + 1);
        snprintf(req, len + 1, "%s%s\r\n\r\n", start, x);
        expect_status(req, len, extra ? 431 : 0);
        free(x);
        free(req);
    }
    /* One header line longer than the whole budget is refused before its end. */
    char *x = make(BQ_HTTP_MAX_HEADERS * 2, "GET / HTTP/1.1\r\nX: ", 'v', "");
    size_t used;
    assert_int_equal(parse_all(x, strlen(x), &used), BQ_HTTP_ERROR);
    assert_int_equal(parser.status, 431);
    assert_true(used < strlen(x));
    free(x);
}

static void parse_header_count_limit(void **state)
{
    (void)state;
    for (int extra = 0; extra <= 1; extra++) {
        char req[4096];
        size_t n = (size_t)snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: a\r\n");
        for (int i = 1; i < BQ_HTTP_MAX_FIELDS + extra; i++)
            n += (size_t)snprintf(req + n, sizeof req - n, "X-%d: %d\r\n", i, i);
        n += (size_t)snprintf(req + n, sizeof req - n, "\r\n");
        expect_status(req, n, extra ? 431 : 0);
    }
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
    bq_http_parser_init(&parser);
    const char *at = all;
    size_t left = strlen(all), used;
    const char *paths[] = {"/healthz", "/promote", "/metrics"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(bq_http_parse(&parser, at, left, &used), BQ_HTTP_REQUEST);
        assert_int_equal(used, strlen(reqs[i]));
        assert_string_equal(parser.req.path, paths[i]);
        assert_int_equal(parser.req.keep_alive, i < 2);
        assert_true(bq_http_parser_idle(&parser));
        at += used;
        left -= used;
    }
    assert_int_equal(bq_http_parse(&parser, at, left, &used), BQ_HTTP_MORE);
    assert_int_equal(used, left);
    assert_false(bq_http_parser_idle(&parser));
    assert_int_equal(bq_http_parse(&parser, "ity HTTP/1.0\r\n\r\nGET", 19, &used), BQ_HTTP_REQUEST);
    assert_int_equal(used, 16);
    assert_string_equal(parser.req.path, "/parity");
    assert_false(parser.req.keep_alive);
}

static void parse_idle_tracks_request_start(void **state)
{
    (void)state;
    size_t used;
    bq_http_parser_init(&parser);
    assert_true(bq_http_parser_idle(&parser));
    assert_int_equal(bq_http_parse(&parser, "\r", 1, &used), BQ_HTTP_MORE);
    assert_false(bq_http_parser_idle(&parser));
    bq_http_parser_init(&parser);
    assert_int_equal(bq_http_parse(&parser, "", 0, &used), BQ_HTTP_MORE);
    assert_int_equal(used, 0);
    assert_true(bq_http_parser_idle(&parser));
}

static void query_get_finds_decodes_and_refuses(void **state)
{
    (void)state;
    char v[8];
    assert_int_equal(bq_http_query_get("force=1", "force", v, sizeof v), 1);
    assert_string_equal(v, "1");
    assert_int_equal(bq_http_query_get("a=b&to=n%2D2&c", "to", v, sizeof v), 1);
    assert_string_equal(v, "n-2");
    assert_int_equal(bq_http_query_get("%74o=x.y_z", "to", v, sizeof v), 1);
    assert_string_equal(v, "x.y_z");
    assert_int_equal(bq_http_query_get("&&force&", "force", v, sizeof v), 1);
    assert_string_equal(v, "");
    assert_int_equal(bq_http_query_get("force=", "force", v, sizeof v), 1);
    assert_string_equal(v, "");
    assert_int_equal(bq_http_query_get("to=1234567", "to", v, sizeof v), 1);
    assert_string_equal(v, "1234567");
    strcpy(v, "junk");
    assert_int_equal(bq_http_query_get("", "to", v, sizeof v), 0);
    assert_string_equal(v, "");
    assert_int_equal(bq_http_query_get("tox=1&t=2&To=3", "to", v, sizeof v), 0);
    assert_int_equal(bq_http_query_get("t%6=1", "to", v, sizeof v), 0);
    assert_int_equal(bq_http_query_get("to=12345678", "to", v, sizeof v), -1); /* too long */
    assert_int_equal(bq_http_query_get("to=a&to=a", "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a+b", "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a%20b", "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a%2", "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=%00", "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a=b", "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a/b", "to", v, sizeof v), -1);
    assert_int_equal(bq_http_query_get("to=a", "to", v, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_valid_split_everywhere_gives_request),
        cmocka_unit_test(parse_bad_inputs_give_their_status),
        cmocka_unit_test(parse_request_line_limit),
        cmocka_unit_test(parse_empty_lines_before_request_are_bounded),
        cmocka_unit_test(parse_header_section_limit),
        cmocka_unit_test(parse_header_count_limit),
        cmocka_unit_test(parse_pipelined_requests_in_turn),
        cmocka_unit_test(parse_idle_tracks_request_start),
        cmocka_unit_test(query_get_finds_decodes_and_refuses),
    };
    return cmocka_run_group_tests_name("node_http_request", tests, NULL, NULL);
}
