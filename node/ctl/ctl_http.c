/* beanstalkctl's HTTP client: one libcurl easy handle per request, all of
 * them driven by one multi handle, so asking every node for its status
 * takes as long as the slowest node rather than the sum. Each handle has its
 * own timeout, so the loop ends even when a node never answers. An answer
 * that cannot be read whole (too large, cut off) counts as no answer.
 *
 * The server's name: libcurl checks the certificate against the URL's host
 * (CURLOPT_SSL_VERIFYHOST 2), so a request whose expected name is not the
 * URL's host goes to https://NAME:PORT, with CURLOPT_CONNECT_TO sending the
 * connection to the URL's host and port: the name is checked, where
 * beanstalkctl connects does not change. libcurl would also take the
 * subject CN of a certificate without DNS subjectAltNames, and wildcards;
 * OpenSSL's own host check, set on each connection's SSL_CTX
 * (CURLOPT_SSL_CTX_FUNCTION, libcurl built with OpenSSL), takes neither,
 * and fails the handshake before any request is sent. TLS sessions are not
 * cached, so every connection is verified in full. */
#include "node/ctl/ctl_http.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

_Static_assert(BQ_CTL_HTTP_ERROR >= CURL_ERROR_SIZE, "curl's error buffer must fit");

/* Sets an option of easy handle e, or jumps to fail. */
#define SET(e, opt, val)                                                                           \
    do {                                                                                           \
        if (curl_easy_setopt(e, opt, val) != CURLE_OK)                                             \
            goto fail;                                                                             \
    } while (0)

typedef struct sink {
    bq_ctl_http_req_t *req;
    struct curl_slist *connect_to; /* NAME:PORT:HOST:PORT when the name is not the URL's host */
    size_t cap;
    bool too_large;
    bool done; /* the transfer ended (with an answer or an error) */
} sink_t;

int bq_ctl_http_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

void bq_ctl_http_cleanup(void)
{
    curl_global_cleanup();
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    sink_t *s = arg;
    bq_ctl_http_req_t *r = s->req;
    size_t n = size * nmemb;
    if (n > BQ_CTL_HTTP_MAX_BODY - r->len) {
        s->too_large = true;
        return 0; /* libcurl ends the transfer with CURLE_WRITE_ERROR */
    }
    if (r->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *body = realloc(r->body, cap);
        if (body == NULL)
            return 0;
        r->body = body;
        s->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

/* CURLOPT_SSL_CTX_FUNCTION: the certificate must name arg (the expected
 * name) in a DNS subjectAltName, exactly. */
static CURLcode name_only_in_san(CURL *e, void *ssl_ctx, void *arg)
{
    (void)e;
    X509_VERIFY_PARAM *p = SSL_CTX_get0_param(ssl_ctx);
    X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT |
                                           X509_CHECK_FLAG_NO_WILDCARDS);
    return X509_VERIFY_PARAM_set1_host(p, arg, 0) == 1 ? CURLE_OK : CURLE_SSL_CERTPROBLEM;
}

/* The URL's parts: scheme, host and port (the scheme's default when absent). */
typedef struct url_parts {
    CURLU *u;
    char *scheme, *host, *port;
} url_parts_t;

static void parts_free(url_parts_t *p)
{
    curl_free(p->scheme);
    curl_free(p->host);
    curl_free(p->port);
    curl_url_cleanup(p->u);
}

/* Parses url into *p (free with parts_free in every case). 0 or -1. */
static int parts_of(const char *url, url_parts_t *p)
{
    *p = (url_parts_t){curl_url(), NULL, NULL, NULL};
    bool ok = p->u && curl_url_set(p->u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(p->u, CURLUPART_SCHEME, &p->scheme, 0) == CURLUE_OK &&
              curl_url_get(p->u, CURLUPART_HOST, &p->host, 0) == CURLUE_OK &&
              curl_url_get(p->u, CURLUPART_PORT, &p->port, CURLU_DEFAULT_PORT) == CURLUE_OK;
    return ok ? 0 : -1;
}

int bq_ctl_http_url_host(const char *url, char *host, size_t cap, int *https)
{
    url_parts_t p;
    int r = parts_of(url, &p);
    if (r == 0 && (size_t)snprintf(host, cap, "%s", p.host) >= cap)
        r = -1;
    if (r == 0)
        *https = strcasecmp(p.scheme, "https") == 0;
    parts_free(&p);
    return r;
}

/* The URL of s's request, its host replaced by name when they differ, with
 * the connection sent to the URL's host and port (CURLOPT_CONNECT_TO). */
static int set_url_for_name(CURL *e, sink_t *s, const char *name)
{
    url_parts_t p;
    char *url = NULL, route[512];
    int r = parts_of(s->req->url, &p);
    if (r == 0 && strcasecmp(p.host, name) != 0) {
        int n = snprintf(route, sizeof route, "%s:%s:%s:%s", name, p.port, p.host, p.port);
        bool ok = n > 0 && (size_t)n < sizeof route &&
                  curl_url_set(p.u, CURLUPART_HOST, name, 0) == CURLUE_OK &&
                  curl_url_get(p.u, CURLUPART_URL, &url, 0) == CURLUE_OK &&
                  (s->connect_to = curl_slist_append(NULL, route)) != NULL &&
                  curl_easy_setopt(e, CURLOPT_CONNECT_TO, s->connect_to) == CURLE_OK;
        r = ok ? 0 : -1;
    }
    if (r == 0 && curl_easy_setopt(e, CURLOPT_URL, url ? url : s->req->url) != CURLE_OK)
        r = -1;
    curl_free(url);
    parts_free(&p);
    return r;
}

/* Client certificate, trust in the cluster CA alone (no system store), and
 * the server's certificate must name the request's expected name. */
static int set_tls(CURL *e, const bq_ctl_http_opts_t *o, sink_t *s)
{
    if (s->req->name == NULL || set_url_for_name(e, s, s->req->name) != 0)
        goto fail;
    SET(e, CURLOPT_SSLCERT, o->tls_cert);
    SET(e, CURLOPT_SSLKEY, o->tls_key);
    SET(e, CURLOPT_CAINFO, o->tls_ca);
    SET(e, CURLOPT_CAPATH, (char *)NULL);
    SET(e, CURLOPT_SSL_VERIFYPEER, 1L);
    SET(e, CURLOPT_SSL_VERIFYHOST, 2L);
    SET(e, CURLOPT_SSL_SESSIONID_CACHE, 0L);
    SET(e, CURLOPT_SSL_CTX_FUNCTION, name_only_in_san);
    SET(e, CURLOPT_SSL_CTX_DATA, (void *)s->req->name);
    return 0;
fail:
    return -1;
}

static CURL *easy_new(const bq_ctl_http_opts_t *o, sink_t *s)
{
    CURL *e = curl_easy_init();
    if (e == NULL)
        return NULL;
    SET(e, CURLOPT_URL, s->req->url);
    SET(e, CURLOPT_PROTOCOLS_STR, "http,https");
    SET(e, CURLOPT_NOSIGNAL, 1L);
    SET(e, CURLOPT_PROXY, "");
    SET(e, CURLOPT_TIMEOUT_MS, o->timeout_ms);
    SET(e, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms);
    SET(e, CURLOPT_USERAGENT, "beanstalkctl/" BQ_VERSION);
    SET(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    SET(e, CURLOPT_ERRORBUFFER, s->req->error);
    SET(e, CURLOPT_WRITEFUNCTION, on_data);
    SET(e, CURLOPT_WRITEDATA, s);
    SET(e, CURLOPT_PRIVATE, s);
    if (strcmp(s->req->method, "POST") == 0) {
        SET(e, CURLOPT_POSTFIELDS, "");
        SET(e, CURLOPT_POSTFIELDSIZE, 0L);
    }
    if (o->tls_cert && strncmp(s->req->url, "https://", 8) == 0 && set_tls(e, o, s) != 0)
        goto fail;
    return e;
fail:
    curl_easy_cleanup(e);
    return NULL;
}

/* Records how one transfer ended. */
static void finish(CURL *e, CURLcode code)
{
    sink_t *s;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&s);
    bq_ctl_http_req_t *r = s->req;
    s->done = true;
    if (code == CURLE_OK && (r->body || (r->body = strdup("")) != NULL)) {
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
        r->error[0] = '\0';
        return;
    }
    if (s->too_large)
        snprintf(r->error, sizeof r->error, "answer larger than %zu bytes", BQ_CTL_HTTP_MAX_BODY);
    else if (r->error[0] == '\0')
        snprintf(r->error, sizeof r->error, "%s",
                 code == CURLE_OK ? "out of memory" : curl_easy_strerror(code));
    size_t used = strlen(r->error);
    if (code == CURLE_PEER_FAILED_VERIFICATION && r->name)
        snprintf(r->error + used, sizeof r->error - used,
                 " (want a certificate of the cluster CA naming %s)", r->name);
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

/* Runs the transfers to their end. */
static CURLMcode drive(CURLM *m)
{
    int running = 1, left;
    CURLMcode mc = CURLM_OK;
    while (mc == CURLM_OK && running) {
        mc = curl_multi_perform(m, &running);
        if (mc == CURLM_OK && running)
            mc = curl_multi_poll(m, NULL, 0, 1000, NULL);
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(m, &left)) != NULL)
            if (msg->msg == CURLMSG_DONE)
                finish(msg->easy_handle, msg->data.result);
    }
    return mc;
}

int bq_ctl_http_run(const bq_ctl_http_opts_t *o, bq_ctl_http_req_t *reqs, size_t n)
{
    CURLM *m = curl_multi_init();
    CURL **easy = calloc(n ? n : 1, sizeof *easy);
    sink_t *sinks = calloc(n ? n : 1, sizeof *sinks);
    const char *why = "could not set up the request";
    bool failed = false;
    for (size_t k = 0; k < n; k++)
        reqs[k] =
            (bq_ctl_http_req_t){.method = reqs[k].method, .url = reqs[k].url, .name = reqs[k].name};
    for (size_t k = 0; m && easy && sinks && k < n; k++) {
        sinks[k].req = &reqs[k];
        easy[k] = easy_new(o, &sinks[k]);
        if (easy[k] == NULL || curl_multi_add_handle(m, easy[k]) != CURLM_OK)
            goto out;
    }
    if (m && easy && sinks) {
        CURLMcode mc = drive(m);
        if (mc != CURLM_OK)
            why = curl_multi_strerror(mc);
    }
out:
    for (size_t k = 0; k < n; k++) {
        if (sinks == NULL || !sinks[k].done) {
            free(reqs[k].body);
            reqs[k].body = NULL;
            snprintf(reqs[k].error, sizeof reqs[k].error, "%s", why);
        }
        failed |= reqs[k].body == NULL;
        if (easy && easy[k]) {
            curl_multi_remove_handle(m, easy[k]);
            curl_easy_cleanup(easy[k]);
        }
        if (sinks)
            curl_slist_free_all(sinks[k].connect_to);
    }
    curl_multi_cleanup(m);
    free(easy);
    free(sinks);
    return failed ? -1 : 0;
}

void bq_ctl_http_req_free(bq_ctl_http_req_t *r)
{
    free(r->body);
    r->body = NULL;
}

char *bq_ctl_http_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * strlen(s) + 1), *w = out;
    for (; out && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~", c) != NULL) {
            *w++ = (char)c;
        } else {
            *w++ = '%';
            *w++ = hex[c >> 4];
            *w++ = hex[c & 15];
        }
    }
    if (out)
        *w = '\0';
    return out;
}
