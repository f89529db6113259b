/* The web console's pure parts: the beanstalk replies its own client reads
 * and their YAML (node/admin/console_reply.h), the operator credential, its
 * sessions and rate limit (node/admin/console_auth.h), the rule of who may
 * read bodies and act (node/admin/access.h, bq_console_refusal), and the
 * query values of a tube's name (bq_http_query_get_name). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "node/admin/access.h"
#include "node/admin/console_auth.h"
#include "node/admin/console_reply.h"
#include "node/admin/http_request.h"

/* ---- replies ---- */

static long parse(const char *s, bq_console_reply_t *r)
{
    return bq_console_parse_reply(s, strlen(s), r);
}

static void replies_split_into_lines_and_bodies(void **state)
{
    (void)state;
    bq_console_reply_t r;
    assert_int_equal(parse("KICKED 3\r\nDELETED\r\n", &r), 10);
    assert_int_equal(r.line_len, 8);
    assert_null(r.body);
    assert_true(bq_console_reply_is(&r, "KICKED"));
    assert_false(bq_console_reply_is(&r, "KICK"));
    const char found[] = "FOUND 7 5\r\na\r\nb\0\r\nNEXT";
    assert_int_equal(bq_console_parse_reply(found, sizeof found - 1, &r), 18);
    assert_int_equal(r.body_len, 5);
    assert_memory_equal(r.body, "a\r\nb\0", 5); /* CR LF and NUL inside a body are bytes */
    assert_int_equal(parse("OK 4\r\n---\n\r\n", &r), 12);
    assert_int_equal(parse("RESERVED 1 0\r\n\r\n", &r), 16);
    assert_int_equal(r.body_len, 0);
}

static void partial_and_malformed_replies(void **state)
{
    (void)state;
    bq_console_reply_t r;
    assert_int_equal(parse("", &r), BQ_CONSOLE_REPLY_PARTIAL);
    assert_int_equal(parse("DELETED", &r), BQ_CONSOLE_REPLY_PARTIAL);
    assert_int_equal(parse("FOUND 7 5\r\nab", &r), BQ_CONSOLE_REPLY_PARTIAL);
    assert_int_equal(parse("FOUND 7 5\r\nabcde\r", &r), BQ_CONSOLE_REPLY_PARTIAL);
    assert_int_equal(parse("DELETED\n", &r), BQ_CONSOLE_REPLY_BAD);            /* no CR */
    assert_int_equal(parse("\r\n", &r), BQ_CONSOLE_REPLY_BAD);                 /* empty */
    assert_int_equal(parse("FOUND 7 5\r\nabcdeXY", &r), BQ_CONSOLE_REPLY_BAD); /* no CRLF after */
    assert_int_equal(parse("FOUND 7 x\r\n", &r), BQ_CONSOLE_REPLY_BAD);
    assert_int_equal(parse("OK 9999999999\r\n", &r), BQ_CONSOLE_REPLY_BAD);
    char big[32];
    snprintf(big, sizeof big, "OK %zu\r\n", BQ_CONSOLE_REPLY_MAX + 1);
    assert_int_equal(parse(big, &r), BQ_CONSOLE_REPLY_BAD); /* over the bound */
    char line[300];
    memset(line, 'A', sizeof line);
    assert_int_equal(bq_console_parse_reply(line, sizeof line, &r), BQ_CONSOLE_REPLY_BAD);
}

static void yaml_maps_and_lists(void **state)
{
    (void)state;
    const char stats[] = "---\nname: \"feed\"\ncurrent-jobs-ready: 12\npause: 0\nversion: 1.13\n"
                         "junk line\nid: -4\n";
    cJSON *m = bq_console_yaml_map(stats, sizeof stats - 1);
    assert_non_null(m);
    assert_string_equal(cJSON_GetObjectItem(m, "name")->valuestring, "feed");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(m, "current-jobs-ready")));
    assert_int_equal(cJSON_GetObjectItem(m, "current-jobs-ready")->valueint, 12);
    assert_string_equal(cJSON_GetObjectItem(m, "version")->valuestring, "1.13");
    assert_int_equal(cJSON_GetObjectItem(m, "id")->valueint, -4);
    assert_null(cJSON_GetObjectItem(m, "junk line"));
    cJSON_Delete(m);
    const char list[] = "---\n- default\n- a(b)\n-\n- c\n";
    cJSON *l = bq_console_yaml_list(list, sizeof list - 1, 2);
    assert_int_equal(cJSON_GetArraySize(l), 2); /* at most max */
    assert_string_equal(cJSON_GetArrayItem(l, 1)->valuestring, "a(b)");
    cJSON_Delete(l);
}

/* ---- the credential ---- */

static const char PW[] = "correct horse battery";

static void login_opens_a_session_with_its_csrf_token(void **state)
{
    (void)state;
    bq_console_auth_t *a = bq_console_auth_new(PW, strlen(PW));
    char sid[BQ_CONSOLE_SID_LEN + 1], csrf[BQ_CONSOLE_CSRF_LEN + 1];
    assert_true(bq_console_auth_enabled(a));
    assert_int_equal(bq_console_login(a, "10.0.0.1", PW, strlen(PW), 0, sid, csrf),
                     BQ_CONSOLE_LOGIN_OK);
    assert_int_equal(strlen(sid), BQ_CONSOLE_SID_LEN);
    assert_int_equal(strlen(csrf), BQ_CONSOLE_CSRF_LEN);
    const char *t = bq_console_session(a, sid, strlen(sid), 1000);
    assert_non_null(t);
    assert_string_equal(t, csrf);
    char other[BQ_CONSOLE_SID_LEN + 1];
    memcpy(other, sid, sizeof other);
    other[0] = other[0] == 'a' ? 'b' : 'a';
    assert_null(bq_console_session(a, other, strlen(other), 1000));
    assert_null(bq_console_session(a, sid, strlen(sid) - 1, 1000));
    /* a prefix or a longer password is wrong */
    assert_int_equal(bq_console_login(a, "10.0.0.1", PW, strlen(PW) - 1, 0, sid, csrf),
                     BQ_CONSOLE_LOGIN_WRONG);
    bq_console_logout(a, sid, strlen(sid));
    bq_console_auth_free(a);
}

static void sessions_end_when_idle_old_or_logged_out(void **state)
{
    (void)state;
    bq_console_auth_t *a = bq_console_auth_new(PW, strlen(PW));
    char sid[BQ_CONSOLE_SID_LEN + 1], csrf[BQ_CONSOLE_CSRF_LEN + 1];
    bq_console_login(a, "s", PW, strlen(PW), 0, sid, csrf);
    int64_t t = 0;
    while (t + BQ_CONSOLE_SESSION_IDLE_MS / 2 < BQ_CONSOLE_SESSION_MAX_MS) { /* kept alive by use */
        t += BQ_CONSOLE_SESSION_IDLE_MS / 2;
        assert_non_null(bq_console_session(a, sid, strlen(sid), t));
    }
    assert_null(bq_console_session(a, sid, strlen(sid), BQ_CONSOLE_SESSION_MAX_MS + 1));
    bq_console_login(a, "s", PW, strlen(PW), 0, sid, csrf);
    assert_null(bq_console_session(a, sid, strlen(sid), BQ_CONSOLE_SESSION_IDLE_MS + 1));
    bq_console_login(a, "s", PW, strlen(PW), 0, sid, csrf);
    bq_console_logout(a, sid, strlen(sid));
    assert_null(bq_console_session(a, sid, strlen(sid), 1));
    /* at most BQ_CONSOLE_SESSIONS: the oldest is replaced */
    char first[BQ_CONSOLE_SID_LEN + 1];
    bq_console_login(a, "s", PW, strlen(PW), 10, first, csrf);
    for (int i = 0; i < BQ_CONSOLE_SESSIONS; i++)
        bq_console_login(a, "s", PW, strlen(PW), 20 + i, sid, csrf);
    assert_null(bq_console_session(a, first, strlen(first), 100));
    assert_non_null(bq_console_session(a, sid, strlen(sid), 100));
    bq_console_auth_free(a);
}

static void failed_logins_are_rate_limited_per_source_and_node(void **state)
{
    (void)state;
    bq_console_auth_t *a = bq_console_auth_new(PW, strlen(PW));
    char sid[BQ_CONSOLE_SID_LEN + 1], csrf[BQ_CONSOLE_CSRF_LEN + 1];
    for (int i = 0; i < BQ_CONSOLE_FAIL_BURST; i++)
        assert_int_equal(bq_console_login(a, "1.1.1.1", "nope", 4, 0, sid, csrf),
                         BQ_CONSOLE_LOGIN_WRONG);
    /* limited: even the right password is not looked at */
    assert_int_equal(bq_console_login(a, "1.1.1.1", PW, strlen(PW), 0, sid, csrf),
                     BQ_CONSOLE_LOGIN_LIMITED);
    /* another source is not */
    assert_int_equal(bq_console_login(a, "2.2.2.2", PW, strlen(PW), 0, sid, csrf),
                     BQ_CONSOLE_LOGIN_OK);
    /* a token comes back after the refill period */
    assert_int_equal(
        bq_console_login(a, "1.1.1.1", PW, strlen(PW), BQ_CONSOLE_FAIL_REFILL_MS, sid, csrf),
        BQ_CONSOLE_LOGIN_OK);
    /* the node's own bucket: many sources together are limited too */
    char src[32];
    int limited = 0;
    for (int i = 0; i < 8 * BQ_CONSOLE_FAIL_BURST; i++) {
        snprintf(src, sizeof src, "10.0.%d.%d", i / 200, i % 200);
        limited += bq_console_login(a, src, "nope", 4, BQ_CONSOLE_FAIL_REFILL_MS, sid, csrf) ==
                   BQ_CONSOLE_LOGIN_LIMITED;
    }
    assert_true(limited >= 4 * BQ_CONSOLE_FAIL_BURST - 1);
    bq_console_auth_free(a);
    bq_console_auth_t *none = bq_console_auth_new(NULL, 0);
    assert_false(bq_console_auth_enabled(none));
    assert_int_equal(bq_console_login(none, "s", "", 0, 0, sid, csrf), BQ_CONSOLE_LOGIN_DISABLED);
    bq_console_auth_free(none);
}

static void cookies_are_found_by_exact_name(void **state)
{
    (void)state;
    const char *v;
    size_t n;
    const char hdr[] = "bq_console_n1x=1; bq_console_n1=abc ;other=2";
    assert_true(bq_http_cookie_get(hdr, strlen(hdr), "bq_console_n1", &v, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(v, "abc", 3);
    assert_false(bq_http_cookie_get(hdr, strlen(hdr), "bq_console", &v, &n));
    assert_true(bq_http_cookie_get(hdr, strlen(hdr), "other", &v, &n));
    assert_int_equal(n, 1);
    assert_false(bq_http_cookie_get("", 0, "x", &v, &n));
    assert_false(bq_http_cookie_get("x", 1, "x", &v, &n));
}

/* ---- who may do what ---- */

static int refusal(bq_console_access_t in)
{
    const char *why = NULL;
    int s = bq_console_refusal(&in, &why);
    assert_true(s == 0 || (why != NULL && why[0] != '\0'));
    return s;
}

static void the_operator_is_a_session_or_beanstalkctls_certificate(void **state)
{
    (void)state;
    bq_console_access_t tls = {.tls_configured = true, .over_tls = true};
    assert_int_equal(refusal(tls), 401); /* no certificate, no session */
    bq_console_access_t cert = tls;
    cert.cert_name = "beanstalkctl";
    assert_int_equal(refusal(cert), 0);
    assert_string_equal(bq_console_operator(&cert), "certificate");
    cert.cert_name = "n1"; /* a node's own certificate is not the operator */
    assert_int_equal(refusal(cert), 401);
    cert.cert_name = "beanstalkctl";
    cert.over_tls = false; /* a name without TLS cannot be */
    assert_int_equal(refusal(cert), 401);
    bq_console_access_t session = {
        .tls_configured = true, .password_configured = true, .session_csrf = "t0k"};
    assert_int_equal(refusal(session), 0);
    assert_string_equal(bq_console_operator(&session), "session");
    bq_console_access_t open = {0}; /* no TLS, no password: loopback plaintext only */
    assert_int_equal(refusal(open), 0);
    assert_string_equal(bq_console_operator(&open), "open");
    open.password_configured = true;
    assert_int_equal(refusal(open), 401);
    assert_null(bq_console_operator(&open));
}

static void actions_need_the_csrf_header_and_no_foreign_origin(void **state)
{
    (void)state;
    bq_console_access_t s = {
        .tls_configured = true, .password_configured = true, .session_csrf = "t0k", .action = true};
    assert_int_equal(refusal(s), 403); /* no header */
    s.csrf = "t0x";
    s.csrf_len = 3;
    assert_int_equal(refusal(s), 403); /* not the session's */
    s.csrf = "t0k0";
    s.csrf_len = 4;
    assert_int_equal(refusal(s), 403);
    s.csrf_len = 3;
    assert_int_equal(refusal(s), 0);
    s.foreign_origin = true;
    assert_int_equal(refusal(s), 403);
    bq_console_access_t cert = {
        .tls_configured = true, .over_tls = true, .cert_name = "beanstalkctl", .action = true};
    assert_int_equal(refusal(cert), 403);
    cert.csrf = "any";
    cert.csrf_len = 3;
    assert_int_equal(refusal(cert), 0);
    bq_console_access_t nobody = {
        .tls_configured = true, .action = true, .csrf = "x", .csrf_len = 1};
    assert_int_equal(refusal(nobody), 401);
}

static void tube_names_in_queries(void **state)
{
    (void)state;
    char out[201];
    const char q[] = "tube=a%2Bb%2Fc%3B%24_(x)-.&to=n1";
    assert_int_equal(bq_http_query_get_name(q, strlen(q), "tube", out, sizeof out), 1);
    assert_string_equal(out, "a+b/c;$_(x)-.");
    /* bq_http_query_get keeps its narrower set */
    assert_int_equal(bq_http_query_get(q, strlen(q), "tube", out, sizeof out), -1);
    const char bad[] = "tube=%3Cscript%3E";
    assert_int_equal(bq_http_query_get_name(bad, strlen(bad), "tube", out, sizeof out), -1);
    const char space[] = "tube=a%20b";
    assert_int_equal(bq_http_query_get_name(space, strlen(space), "tube", out, sizeof out), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replies_split_into_lines_and_bodies),
        cmocka_unit_test(partial_and_malformed_replies),
        cmocka_unit_test(yaml_maps_and_lists),
        cmocka_unit_test(login_opens_a_session_with_its_csrf_token),
        cmocka_unit_test(sessions_end_when_idle_old_or_logged_out),
        cmocka_unit_test(failed_logins_are_rate_limited_per_source_and_node),
        cmocka_unit_test(cookies_are_found_by_exact_name),
        cmocka_unit_test(the_operator_is_a_session_or_beanstalkctls_certificate),
        cmocka_unit_test(actions_need_the_csrf_header_and_no_foreign_origin),
        cmocka_unit_test(tube_names_in_queries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
