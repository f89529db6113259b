/* beanstalkctl's HTTP client: one libcurl easy handle per request, all of
 * them driven by one multi handle, so asking every node for its status
 * takes as long as the slowest node rather than the sum. Each handle has its
 * own timeout, so the loop ends even when a node never answers. An answer
 * that cannot be read whole (too large, cut off) counts as no answer. */
#include "ctl_http.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

_Static_assert(BQ_CTL_HTTP_ERROR >= CURL_ERROR_SIZE, "curl's error buffer must fit");

/* Sets an option of easy handle e, or jumps to fail. */
#define SET(e, opt, val)                                                                           \
    do {                                                                                           \
        if (curl_easy_setopt(e, opt, val) != CURLE_OK)                                             \
            goto fail;                                                                             \
    } while (0)

typedef struct sink {
    bq_ctl_http_req_t *req;
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

/* Client certificate, trust in the cluster CA alone (no system store). The
 * server's name is not checked against the URL: nodes are often addressed
 * by IP while their certificates name node ids, and only cluster members
 * hold a certificate from the cluster CA. */
static int set_tls(CURL *e, const bq_ctl_http_opts_t *o)
{
    SET(e, CURLOPT_SSLCERT, o->tls_cert);
    SET(e, CURLOPT_SSLKEY, o->tls_key);
    SET(e, CURLOPT_CAINFO, o->tls_ca);
    SET(e, CURLOPT_CAPATH, (char *)NULL);
    SET(e, CURLOPT_SSL_VERIFYPEER, 1L);
    SET(e, CURLOPT_SSL_VERIFYHOST, 0L);
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
    if (o->tls_cert && set_tls(e, o) != 0)
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
        reqs[k] = (bq_ctl_http_req_t){.method = reqs[k].method, .url = reqs[k].url};
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
