/* HTTP for beanstalkctl: requests to the nodes' admin API through libcurl,
 * several at once, each within a timeout. With the three TLS files, https
 * URLs use mutual TLS: beanstalkctl presents its certificate and accepts a
 * server certificate only if the cluster CA (--tls-ca, and nothing else)
 * signed it and it names the request's expected name (ctl_verify.h) in a
 * DNS subjectAltName - not in the subject CN, not through a wildcard.
 * Proxies from the environment are ignored: the admin API is reached
 * directly. */
#ifndef BQ_CTL_HTTP_H
#define BQ_CTL_HTTP_H

#include <stddef.h>

#define BQ_CTL_HTTP_ERROR 256                   /* bytes of an error message (CURL_ERROR_SIZE) */
#define BQ_CTL_HTTP_MAX_BODY ((size_t)16 << 20) /* a longer answer is an error */

typedef struct bq_ctl_http_opts {
    const char *tls_cert; /* PEM client certificate; NULL: none (then key and ca are unused) */
    const char *tls_key;  /* its PEM private key */
    const char *tls_ca;   /* PEM cluster CA: the only trusted issuer of server certificates */
    long timeout_ms;      /* per request, connection and TLS handshake included */
} bq_ctl_http_opts_t;

typedef struct bq_ctl_http_req {
    const char *method;            /* "GET" or "POST" (with an empty body) */
    const char *url;               /* borrowed */
    const char *name;              /* https with TLS files: the name the server's certificate
                                    * must carry (borrowed; required); else unused */
    long status;                   /* out: the HTTP status; 0 when no answer */
    char *body;                    /* out: NUL-terminated body; NULL when no answer */
    size_t len;                    /* out: body length */
    char error[BQ_CTL_HTTP_ERROR]; /* out: why no answer; "" when one came */
} bq_ctl_http_req_t;

/* Initialises libcurl; call once before any request. 0 or -1. */
int bq_ctl_http_init(void);

/* Releases what bq_ctl_http_init took. */
void bq_ctl_http_cleanup(void);

/* Performs reqs[0..n) concurrently and fills their outputs. Returns 0 when
 * every request got an HTTP answer (whatever its status), -1 when some did
 * not (their error says why). Free each with bq_ctl_http_req_free. */
int bq_ctl_http_run(const bq_ctl_http_opts_t *o, bq_ctl_http_req_t *reqs, size_t n);

/* Frees r->body. */
void bq_ctl_http_req_free(bq_ctl_http_req_t *r);

/* The host of url as libcurl parses it ("10.0.0.1", "[::1]", "n1.example")
 * into host, and whether url is https. 0, or -1 when url cannot be parsed
 * or the host does not fit. */
int bq_ctl_http_url_host(const char *url, char *host, size_t cap, int *https);

/* s percent-encoded for a query string: a new string (free with free), or
 * NULL when out of memory. */
char *bq_ctl_http_escape(const char *s);

#endif
