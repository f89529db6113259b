/* The web console's server side (console.h): the embedded page, who the
 * caller is (the operator or not: access.h), logins and sessions
 * (console_auth.h), and the JSON API, whose queue reads and job actions are
 * beanstalk commands on this node's own client service (console_client.h).
 * Every answer carries a strict Content-Security-Policy: the page runs only
 * its own script, and a job body is never markup (the page sets it as
 * text). */
#include "node/admin/console.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "node/admin/access.h"
#include "node/admin/console_assets.h"
#include "node/admin/console_auth.h"
#include "node/admin/console_client.h"
#include "node/base/log.h"

#define QUEUE_TIMEOUT_MS 3000  /* a poll: short, the page polls again */
#define ACTION_TIMEOUT_MS 8000 /* longer than a standby holds a client for a new primary */
#define ID_MAX_LEN 21
#define NAME_LEN 201 /* a beanstalk name: at most 200 bytes */

struct bq_console {
    bq_console_config_t cfg;
    bq_console_auth_t *auth;
    bq_console_runs_t runs;
    int calls;       /* queue reads and actions in flight */
    char cookie[80]; /* the session cookie's name: one per node, as ports share cookies */
    bq_log_limit_t refused, failed_login;
};

static const char SECURITY_HEADERS[] =
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'\r\n"
    "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
    "X-Frame-Options: DENY\r\nCross-Origin-Resource-Policy: same-origin\r\n";
static const char JSON_TYPE[] = "application/json";

/* ---- answers ---------------------------------------------------------- */

/* Answers r with the security headers and extra (header lines or NULL). */
static void answer(bq_admin_reply_t *r, int status, const char *type, const char *extra,
                   const char *body, size_t len)
{
    char headers[1024];
    snprintf(headers, sizeof headers, "%s%s", SECURITY_HEADERS, extra ? extra : "");
    bq_admin_answer_t a = {status, type, headers, body, len};
    bq_admin_answer(r, &a);
}

/* Answers r with doc (consumed) as JSON; 500 when doc is NULL. */
static void answer_json(bq_admin_reply_t *r, int status, cJSON *doc, const char *extra)
{
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (text == NULL) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        answer(r, 500, JSON_TYPE, NULL, oom, sizeof oom - 1);
        return;
    }
    answer(r, status, JSON_TYPE, extra, text, strlen(text));
    free(text);
}

/* Answers r with {"error": why}. */
static void answer_error(bq_admin_reply_t *r, int status, const char *why)
{
    cJSON *doc = cJSON_CreateObject();
    if (doc && !cJSON_AddStringToObject(doc, "error", why)) {
        cJSON_Delete(doc);
        doc = NULL;
    }
    answer_json(r, status, doc, status == 429 ? "Retry-After: 10\r\n" : NULL);
}

/* ---- the request ------------------------------------------------------ */

/* True when the request's Origin header names a page of another site
 * (another scheme's "null", or a host and port that are not Host's). */
static bool foreign_origin(const bq_http_request_t *h)
{
    const char *o, *host;
    size_t olen, hlen;
    if (!bq_http_header_get(h, "Origin", &o, &olen))
        return false;
    const char *sep = olen > 3 ? memchr(o, ':', olen) : NULL;
    if (sep == NULL || (size_t)(o + olen - sep) < 3 || memcmp(sep, "://", 3) != 0 ||
        !bq_http_header_get(h, "Host", &host, &hlen))
        return true;
    const char *rest = sep + 3;
    size_t rlen = (size_t)(o + olen - rest);
    return rlen != hlen || strncasecmp(rest, host, hlen) != 0;
}

/* The CSRF token of the request's live session, or NULL. */
static const char *session_csrf(bq_console_t *con, const bq_http_request_t *h)
{
    const char *cookie, *sid;
    size_t clen, slen;
    if (!bq_console_auth_enabled(con->auth) || !bq_http_header_get(h, "Cookie", &cookie, &clen) ||
        !bq_http_cookie_get(cookie, clen, con->cookie, &sid, &slen))
        return NULL;
    return bq_console_session(con->auth, sid, slen, (int64_t)uv_now(con->cfg.loop));
}

/* What the access rule (access.h) needs to know of q, its session looked
 * up once. */
static bq_console_access_t access_of(bq_console_t *con, const bq_admin_request_t *q, bool action)
{
    bq_console_access_t in = {.tls_configured = q->tls_configured,
                              .over_tls = q->over_tls,
                              .cert_name = q->cert_name,
                              .password_configured = bq_console_auth_enabled(con->auth),
                              .session_csrf = session_csrf(con, q->http),
                              .foreign_origin = foreign_origin(q->http),
                              .action = action};
    const char *csrf;
    size_t csrf_len;
    if (bq_http_header_get(q->http, "X-CSRF-Token", &csrf, &csrf_len)) {
        in.csrf = csrf;
        in.csrf_len = csrf_len;
    }
    return in;
}

/* Answers a refusal and returns false unless in (access_of) may be served. */
static bool allowed(bq_console_t *con, const bq_admin_request_t *q, const bq_console_access_t *in,
                    bq_admin_reply_t *r)
{
    const char *why = NULL;
    int status = bq_console_refusal(in, &why);
    if (status == 0)
        return true;
    bq_log_limited(&con->refused, BQ_LOG_WARN, "console request refused",
                   "path=\"%.*s\" client=%s status=%d why=\"%s\"", (int)q->http->path_len,
                   q->http->path, q->source, status, why);
    answer_error(r, status, why);
    return false;
}

static void method_not_allowed(bq_admin_reply_t *r, const char *allow)
{
    char header[48];
    snprintf(header, sizeof header, "Allow: %s\r\n", allow);
    answer(r, 405, "text/plain; charset=utf-8", header, "method not allowed\n", 19);
}

/* ---- the page --------------------------------------------------------- */

static bool serve_asset(const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    const bq_http_request_t *h = q->http;
    const char *path = bq_http_path_is(h, "/") ? "/ui/" : NULL;
    for (size_t i = 0; i < bq_console_nassets; i++) {
        const bq_console_asset_t *a = &bq_console_assets[i];
        if (path ? strcmp(path, a->path) != 0 : !bq_http_path_is(h, a->path))
            continue;
        if (h->method != BQ_HTTP_GET && h->method != BQ_HTTP_HEAD)
            method_not_allowed(r, "GET, HEAD");
        else
            answer(r, 200, a->type, NULL, (const char *)a->data, a->len);
        return true;
    }
    if (bq_http_path_is(h, "/ui")) {
        answer(r, 308, "text/plain; charset=utf-8", "Location: /ui/\r\n", "/ui/\n", 5);
        return true;
    }
    return false;
}

/* ---- sessions ---------------------------------------------------------- */

static void api_session(bq_console_t *con, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    bq_console_access_t in = access_of(con, q, false);
    const char *via = bq_console_operator(&in);
    cJSON *doc = cJSON_CreateObject();
    if (doc) {
        cJSON_AddBoolToObject(doc, "operator", via != NULL);
        if (via)
            cJSON_AddStringToObject(doc, "via", via);
        else
            cJSON_AddNullToObject(doc, "via");
        /* With a certificate or on an open node any token is taken. */
        if (via)
            cJSON_AddStringToObject(doc, "csrf", in.session_csrf ? in.session_csrf : via);
        cJSON_AddBoolToObject(doc, "login", bq_console_auth_enabled(con->auth));
        cJSON_AddBoolToObject(doc, "tls", q->over_tls);
    }
    answer_json(r, 200, doc, NULL);
}

static void api_login(bq_console_t *con, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    const char *auth;
    size_t alen;
    if (foreign_origin(q->http)) {
        answer_error(r, 403, "refused: the request came from another site's page (Origin)");
        return;
    }
    if (!bq_console_auth_enabled(con->auth)) {
        answer_error(r, 404, "no operator password is set (--console-password-file)");
        return;
    }
    if (!bq_http_header_get(q->http, "Authorization", &auth, &alen) || alen < 7 ||
        strncasecmp(auth, "Bearer ", 7) != 0 || alen - 7 > BQ_CONSOLE_PASSWORD_MAX) {
        answer_error(r, 400, "want the header Authorization: Bearer PASSWORD");
        return;
    }
    char sid[BQ_CONSOLE_SID_LEN + 1], csrf[BQ_CONSOLE_CSRF_LEN + 1];
    bq_console_login_t res = bq_console_login(con->auth, q->source, auth + 7, alen - 7,
                                              (int64_t)uv_now(con->cfg.loop), sid, csrf);
    if (res != BQ_CONSOLE_LOGIN_OK) {
        bq_log_limited(&con->failed_login, BQ_LOG_WARN, "console login refused", "client=%s why=%s",
                       q->source,
                       res == BQ_CONSOLE_LOGIN_LIMITED ? "rate-limited" : "wrong-password");
        answer_error(r,
                     res == BQ_CONSOLE_LOGIN_LIMITED ? 429
                     : res == BQ_CONSOLE_LOGIN_WRONG ? 401
                                                     : 500,
                     res == BQ_CONSOLE_LOGIN_LIMITED ? "too many failed logins: try again later"
                     : res == BQ_CONSOLE_LOGIN_WRONG ? "wrong password"
                                                     : "no randomness for a session");
        return;
    }
    bq_log(BQ_LOG_INFO, "console login", "client=%s", q->source);
    char cookie[256];
    snprintf(cookie, sizeof cookie,
             "Set-Cookie: %s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Strict%s\r\n", con->cookie,
             sid, BQ_CONSOLE_SESSION_MAX_MS / 1000, q->over_tls ? "; Secure" : "");
    cJSON *doc = cJSON_CreateObject();
    if (doc) {
        cJSON_AddBoolToObject(doc, "operator", true);
        cJSON_AddStringToObject(doc, "via", "session");
        cJSON_AddStringToObject(doc, "csrf", csrf);
    }
    answer_json(r, 200, doc, cookie);
}

static void api_logout(bq_console_t *con, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    const char *cookie, *sid;
    size_t clen, slen;
    if (bq_http_header_get(q->http, "Cookie", &cookie, &clen) &&
        bq_http_cookie_get(cookie, clen, con->cookie, &sid, &slen))
        bq_console_logout(con->auth, sid, slen);
    char clear[160];
    snprintf(clear, sizeof clear,
             "Set-Cookie: %s=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict%s\r\n", con->cookie,
             q->over_tls ? "; Secure" : "");
    answer_json(r, 200, cJSON_CreateObject(), clear);
}

/* ---- calls on the node's own client service ---------------------------- */

/* What a run's replies are for: a call may take a second step (QUEUE then
 * QUEUE_TUBES, PEEK then PEEK_STATS), on a new run of the same call. */
typedef enum kind { QUEUE, QUEUE_TUBES, PEEK, PEEK_STATS, JOB, ACTION } kind_t;

typedef struct call {
    bq_console_t *con;
    bq_admin_reply_t *r;
    kind_t kind;
    const char *success; /* ACTION: the reply word of success */
    cJSON *doc;          /* the answer being built */
} call_t;

static void call_done(void *arg, int err, const bq_console_reply_t *rep, size_t n);

/* Runs cmds as call's step kind. When it cannot start, answers 503 and
 * frees call. */
static void start(call_t *call, kind_t kind, const char *cmds, size_t nreplies, unsigned timeout_ms)
{
    bq_console_t *con = call->con;
    bool is_unix = false;
    int fd = con->cfg.open_client(con->cfg.client_arg, &is_unix);
    call->kind = kind;
    int e = fd < 0 ? fd
                   : bq_console_run(&con->runs, con->cfg.loop, fd, is_unix, cmds, strlen(cmds),
                                    nreplies, timeout_ms, call_done, call);
    if (e < 0) {
        char why[160];
        snprintf(why, sizeof why, "cannot open a client connection to this node: %s",
                 uv_strerror(e));
        answer_error(call->r, 503, why);
        cJSON_Delete(call->doc);
        free(call);
        return;
    }
    con->calls++;
}

/* A new call for r, or NULL after answering 503 (too many, or no memory). */
static call_t *new_call(bq_console_t *con, bq_admin_reply_t *r)
{
    call_t *call = con->calls < BQ_CONSOLE_MAX_CALLS ? calloc(1, sizeof *call) : NULL;
    if (call == NULL) {
        answer_error(r, 503, "the console is busy: too many requests in flight");
        return NULL;
    }
    *call = (call_t){.con = con, .r = r};
    return call;
}

/* Answers call's request with its document (500 when there is none). */
static void answer_doc(call_t *call)
{
    answer_json(call->r, call->doc ? 200 : 500, call->doc, NULL);
    call->doc = NULL;
}

/* A reply's line as a new JSON string. */
static cJSON *line_string(const bq_console_reply_t *rep)
{
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)rep->line_len, rep->line);
    return cJSON_CreateString(line);
}

/* The YAML body of an OK reply as a JSON object, or JSON null. */
static cJSON *ok_map(const bq_console_reply_t *rep)
{
    cJSON *m = rep->body && bq_console_reply_is(rep, "OK")
                   ? bq_console_yaml_map(rep->body, rep->body_len)
                   : NULL;
    return m ? m : cJSON_CreateNull();
}

/* list-tubes and stats came: the document, then each tube's stats-tube.
 * True when the call goes on (or was freed). */
static bool queue_stats(call_t *call, const bq_console_reply_t *rep)
{
    cJSON *tubes =
        rep[0].body && bq_console_reply_is(&rep[0], "OK")
            ? bq_console_yaml_list(rep[0].body, rep[0].body_len, BQ_CONSOLE_MAX_TUBES + 1)
            : cJSON_CreateArray();
    int ntubes = tubes ? cJSON_GetArraySize(tubes) : 0;
    call->doc = tubes ? cJSON_CreateObject() : NULL;
    if (call->doc) {
        cJSON_AddItemToObject(call->doc, "stats", ok_map(&rep[1]));
        cJSON_AddBoolToObject(call->doc, "truncated", ntubes > BQ_CONSOLE_MAX_TUBES);
        cJSON_AddItemToObject(call->doc, "tubes", cJSON_CreateArray());
    }
    if (ntubes > BQ_CONSOLE_MAX_TUBES)
        ntubes = BQ_CONSOLE_MAX_TUBES;
    size_t cap = (size_t)ntubes * (NAME_LEN + 16) + 1, len = 0;
    char *cmds = call->doc && ntubes > 0 ? malloc(cap) : NULL;
    for (int i = 0; cmds && i < ntubes; i++)
        len += (size_t)snprintf(cmds + len, cap - len, "stats-tube %s\r\n",
                                cJSON_GetArrayItem(tubes, i)->valuestring);
    cJSON_Delete(tubes);
    if (cmds == NULL) {
        if (ntubes > 0) { /* out of memory */
            cJSON_Delete(call->doc);
            call->doc = NULL;
        }
        answer_doc(call);
        return false;
    }
    start(call, QUEUE_TUBES, cmds, (size_t)ntubes, QUEUE_TIMEOUT_MS);
    free(cmds);
    return true;
}

static void queue_tubes(call_t *call, const bq_console_reply_t *rep, size_t n)
{
    cJSON *arr = cJSON_GetObjectItem(call->doc, "tubes");
    for (size_t i = 0; arr && i < n; i++)
        if (bq_console_reply_is(&rep[i], "OK")) /* NOT_FOUND: gone meanwhile */
            cJSON_AddItemToArray(arr, ok_map(&rep[i]));
    answer_doc(call);
}

/* {found, id, body_base64, body_len} of a FOUND reply into a new object
 * (*id set when found). */
static cJSON *found_job(const bq_console_reply_t *rep, uint64_t *id)
{
    cJSON *doc = cJSON_CreateObject();
    if (doc == NULL)
        return NULL;
    unsigned long long got = 0;
    bool found = bq_console_reply_is(rep, "FOUND") && rep->body &&
                 sscanf(rep->line, "FOUND %llu", &got) == 1;
    cJSON_AddBoolToObject(doc, "found", found);
    if (!found) {
        cJSON_AddItemToObject(doc, "reply", line_string(rep));
        return doc;
    }
    *id = (uint64_t)got;
    cJSON_AddNumberToObject(doc, "id", (double)got);
    cJSON_AddNumberToObject(doc, "body_len", (double)rep->body_len);
    char *b64 = malloc(4 * ((rep->body_len + 2) / 3) + 1);
    if (b64)
        EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)rep->body, (int)rep->body_len);
    if (b64 == NULL || !cJSON_AddStringToObject(doc, "body_base64", b64)) {
        free(b64);
        cJSON_Delete(doc);
        return NULL;
    }
    free(b64);
    return doc;
}

/* use and peek-* came: the job, then its stats-job. True when the call
 * goes on (or was freed). */
static bool peek_found(call_t *call, const bq_console_reply_t *rep)
{
    uint64_t id = 0;
    call->doc = found_job(&rep[1], &id);
    if (call->doc == NULL || id == 0) {
        answer_doc(call);
        return false;
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "stats-job %" PRIu64 "\r\n", id);
    start(call, PEEK_STATS, cmd, 1, ACTION_TIMEOUT_MS);
    return true;
}

static void action_done(call_t *call, const bq_console_reply_t *rep, size_t n)
{
    const bq_console_reply_t *last = &rep[n - 1];
    cJSON *doc = cJSON_CreateObject();
    if (doc)
        cJSON_AddItemToObject(doc, "reply", line_string(last));
    int status = bq_console_reply_is(last, call->success) ? 200
                 : bq_console_reply_is(last, "NOT_FOUND") ? 404
                                                          : 409;
    answer_json(call->r, status, doc, NULL);
}

static void call_done(void *arg, int err, const bq_console_reply_t *rep, size_t n)
{
    call_t *call = arg;
    bool goes_on = false;
    uint64_t id;
    call->con->calls--;
    if (err < 0) {
        char why[200];
        snprintf(why, sizeof why, "%s: %s",
                 err == UV_ETIMEDOUT ? "the queue did not answer in time (is there a primary?)"
                                     : "the queue's connection failed",
                 uv_strerror(err));
        answer_error(call->r, err == UV_ETIMEDOUT ? 504 : 502, why);
    } else if (call->kind == QUEUE) {
        goes_on = queue_stats(call, rep);
    } else if (call->kind == QUEUE_TUBES) {
        queue_tubes(call, rep, n);
    } else if (call->kind == PEEK) {
        goes_on = peek_found(call, rep);
    } else if (call->kind == PEEK_STATS || call->kind == JOB) {
        if (call->kind == JOB)
            call->doc = found_job(&rep[0], &id);
        if (call->doc)
            cJSON_AddItemToObject(call->doc, "stats", ok_map(&rep[n - 1]));
        answer_doc(call);
    } else {
        action_done(call, rep, n);
    }
    if (goes_on)
        return;
    cJSON_Delete(call->doc);
    free(call);
}

/* ---- the API ---------------------------------------------------------- */

/* The query's name parameter key (a tube) into out[NAME_LEN]; false after
 * answering 400. */
static bool want_name(const bq_admin_request_t *q, const char *key, char *out, bq_admin_reply_t *r)
{
    const bq_http_request_t *h = q->http;
    if (bq_http_query_get_name(h->query, h->query_len, key, out, NAME_LEN) == 1 && out[0] != '\0' &&
        out[0] != '-')
        return true;
    char why[96];
    snprintf(why, sizeof why, "want %s=NAME (1 to 200 of A-Z a-z 0-9 - + / ; . $ _ ( ))", key);
    answer_error(r, 400, why);
    return false;
}

/* The query's number parameter key, in [min, max], into *v; false after
 * answering 400. */
static bool want_number(const bq_admin_request_t *q, const char *key, uint64_t min, uint64_t max,
                        uint64_t *v, bq_admin_reply_t *r)
{
    const bq_http_request_t *h = q->http;
    char text[ID_MAX_LEN];
    char *end = NULL;
    if (bq_http_query_get(h->query, h->query_len, key, text, sizeof text) == 1 && text[0] >= '0' &&
        text[0] <= '9') {
        unsigned long long n = strtoull(text, &end, 10);
        if (*end == '\0' && n >= min && n <= max) {
            *v = (uint64_t)n;
            return true;
        }
    }
    char why[96];
    snprintf(why, sizeof why, "want %s=N (%" PRIu64 " to %" PRIu64 ")", key, min, max);
    answer_error(r, 400, why);
    return false;
}

static void api_queue(bq_console_t *con, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    (void)q;
    call_t *call = new_call(con, r);
    if (call)
        start(call, QUEUE, "list-tubes\r\nstats\r\n", 2, QUEUE_TIMEOUT_MS);
}

static void api_peek(bq_console_t *con, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    char tube[NAME_LEN], state[16], cmds[NAME_LEN + 40];
    const bq_http_request_t *h = q->http;
    if (!want_name(q, "tube", tube, r))
        return;
    if (bq_http_query_get(h->query, h->query_len, "state", state, sizeof state) != 1 ||
        (strcmp(state, "ready") != 0 && strcmp(state, "delayed") != 0 &&
         strcmp(state, "buried") != 0)) {
        answer_error(r, 400, "want state=ready, delayed or buried");
        return;
    }
    call_t *call = new_call(con, r);
    snprintf(cmds, sizeof cmds, "use %s\r\npeek-%s\r\n", tube, state);
    if (call)
        start(call, PEEK, cmds, 2, ACTION_TIMEOUT_MS);
}

static void api_job(bq_console_t *con, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    uint64_t id;
    char cmds[80];
    if (!want_number(q, "id", 1, UINT64_MAX, &id, r))
        return;
    call_t *call = new_call(con, r);
    snprintf(cmds, sizeof cmds, "peek %" PRIu64 "\r\nstats-job %" PRIu64 "\r\n", id, id);
    if (call)
        start(call, JOB, cmds, 2, ACTION_TIMEOUT_MS);
}

/* Builds the beanstalk commands of an action into cmds[cap] and its word of
 * success; false after answering 400 (or 404 for an unknown action). */
static bool action_commands(const bq_admin_request_t *q, const char *what, char *cmds, size_t cap,
                            const char **success, size_t *nreplies, bq_admin_reply_t *r)
{
    char tube[NAME_LEN];
    uint64_t id, n;
    *nreplies = 1;
    if (strcmp(what, "kick") == 0) {
        if (!want_name(q, "tube", tube, r) || !want_number(q, "bound", 1, 1000000000, &n, r))
            return false;
        snprintf(cmds, cap, "use %s\r\nkick %" PRIu64 "\r\n", tube, n);
        *nreplies = 2;
        *success = "KICKED";
    } else if (strcmp(what, "kick-job") == 0 || strcmp(what, "delete") == 0) {
        if (!want_number(q, "id", 1, UINT64_MAX, &id, r))
            return false;
        snprintf(cmds, cap, "%s %" PRIu64 "\r\n", what, id);
        *success = what[0] == 'k' ? "KICKED" : "DELETED";
    } else if (strcmp(what, "pause") == 0) {
        if (!want_name(q, "tube", tube, r) || !want_number(q, "delay", 0, UINT32_MAX, &n, r))
            return false;
        snprintf(cmds, cap, "pause-tube %s %" PRIu64 "\r\n", tube, n);
        *success = "PAUSED";
    } else {
        answer_error(r, 404, "no such action");
        return false;
    }
    return true;
}

static void api_action(bq_console_t *con, const bq_admin_request_t *q, const char *what,
                       const char *via, bq_admin_reply_t *r)
{
    const bq_http_request_t *h = q->http;
    bq_log(BQ_LOG_INFO, "console action", "action=%s query=\"%.*s\" client=%s via=%s", what,
           (int)h->query_len, h->query, q->source, via);
    if (strcmp(what, "switchover") == 0) {
        char to[64];
        if (con->cfg.switchover == NULL)
            answer_error(r, 409, "not a cluster node (started without --role)");
        else if (bq_http_query_get(h->query, h->query_len, "to", to, sizeof to) != 1 ||
                 to[0] == '\0')
            answer_error(r, 400, "want to=NODE");
        else
            con->cfg.switchover(con->cfg.arg, to, r);
        return;
    }
    char cmds[NAME_LEN + 64];
    const char *success = NULL;
    size_t nreplies;
    if (!action_commands(q, what, cmds, sizeof cmds, &success, &nreplies, r))
        return;
    call_t *call = new_call(con, r);
    if (call) {
        call->success = success;
        start(call, ACTION, cmds, nreplies, ACTION_TIMEOUT_MS);
    }
}

/* ---- routing ------------------------------------------------------------ */

typedef struct api_route {
    const char *path;
    bool post;
    bool operator_only; /* job bodies: the operator's (access.h) */
    void (*serve)(bq_console_t *con, const bq_admin_request_t *q, bq_admin_reply_t *r);
} api_route_t;

static const api_route_t api_routes[] = {
    {"/api/session", false, false, api_session}, {"/api/login", true, false, api_login},
    {"/api/logout", true, false, api_logout},    {"/api/queue", false, false, api_queue},
    {"/api/peek", false, true, api_peek},        {"/api/job", false, true, api_job},
};

static const char *const actions[] = {"kick", "kick-job", "delete", "pause", "switchover"};

void bq_console_handle(void *console, const bq_admin_request_t *q, bq_admin_reply_t *r)
{
    bq_console_t *con = console;
    const bq_http_request_t *h = q->http;
    if (serve_asset(q, r))
        return;
    bool get = h->method == BQ_HTTP_GET || h->method == BQ_HTTP_HEAD;
    for (size_t i = 0; i < sizeof api_routes / sizeof api_routes[0]; i++) {
        const api_route_t *rt = &api_routes[i];
        if (!bq_http_path_is(h, rt->path))
            continue;
        if (rt->post ? h->method != BQ_HTTP_POST : !get) {
            method_not_allowed(r, rt->post ? "POST" : "GET, HEAD");
        } else if (rt->operator_only) {
            bq_console_access_t in = access_of(con, q, false);
            if (allowed(con, q, &in, r))
                rt->serve(con, q, r);
        } else {
            rt->serve(con, q, r);
        }
        return;
    }
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        char path[32];
        snprintf(path, sizeof path, "/api/%s", actions[i]);
        if (!bq_http_path_is(h, path))
            continue;
        bq_console_access_t in = access_of(con, q, true);
        if (h->method != BQ_HTTP_POST)
            method_not_allowed(r, "POST");
        else if (allowed(con, q, &in, r))
            api_action(con, q, actions[i], bq_console_operator(&in), r);
        return;
    }
    answer_error(r, 404, "not found");
}

bq_console_t *bq_console_new(const bq_console_config_t *cfg)
{
    bq_console_t *con = calloc(1, sizeof *con);
    if (con == NULL)
        return NULL;
    con->cfg = *cfg;
    con->cfg.password = NULL;
    con->auth = bq_console_auth_new(cfg->password, cfg->password_len);
    if (con->auth == NULL) {
        free(con);
        return NULL;
    }
    snprintf(con->cookie, sizeof con->cookie, "bq_console%s%s", cfg->node_id ? "_" : "",
             cfg->node_id ? cfg->node_id : "");
    return con;
}

void bq_console_free(bq_console_t *c)
{
    if (c == NULL)
        return;
    bq_console_cancel_all(&c->runs);
    bq_console_auth_free(c->auth);
    free(c);
}
