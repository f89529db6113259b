/* The glue between beanstalkctl's parsed command line and the nodes: URLs
 * are built here from the base URLs and the admin API's paths, answers are
 * handed to ctl_status.c for rendering, and the HTTP status decides the exit
 * status. Bodies of the mutating requests (promote, switchover) are one line
 * of text from the node and are printed as they are. */
#include "ctl_cmd.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_certs.h"
#include "ctl_http.h"
#include "ctl_status.h"

static bq_ctl_http_opts_t opts_of(const bq_ctl_args_t *a)
{
    return (bq_ctl_http_opts_t){
        .tls_cert = a->tls_cert,
        .tls_key = a->tls_key,
        .tls_ca = a->tls_ca,
        .timeout_ms = a->timeout_ms,
    };
}

/* base + path + tail as a new string, or NULL when out of memory. */
static char *url_of(const char *base, const char *path, const char *tail)
{
    size_t len = strlen(base) + strlen(path) + strlen(tail) + 1;
    char *url = malloc(len);
    if (url)
        snprintf(url, len, "%s%s%s", base, path, tail);
    return url;
}

static void free_nodes(bq_ctl_node_t *nodes, size_t n)
{
    for (size_t k = 0; nodes && k < n; k++)
        bq_ctl_status_clear(&nodes[k]);
    free(nodes);
}

/* Every node's /status, fetched at once. Returns a new array of a->nnodes
 * (free with free_nodes) and how many nodes gave no document in *failed,
 * or NULL when out of memory. */
static bq_ctl_node_t *fetch_status(const bq_ctl_args_t *a, size_t *failed)
{
    size_t n = a->nnodes;
    bq_ctl_http_req_t *reqs = calloc(n, sizeof *reqs);
    bq_ctl_node_t *nodes = calloc(n, sizeof *nodes);
    bool ok = reqs && nodes;
    for (size_t k = 0; ok && k < n; k++) {
        reqs[k].method = "GET";
        ok = (reqs[k].url = url_of(a->nodes[k], "/status", "")) != NULL;
    }
    bq_ctl_http_opts_t o = opts_of(a);
    if (ok)
        bq_ctl_http_run(&o, reqs, n);
    *failed = 0;
    for (size_t k = 0; ok && k < n; k++)
        *failed += bq_ctl_status_set(&nodes[k], a->nodes[k], reqs[k].body ? NULL : reqs[k].error,
                                     reqs[k].status, reqs[k].body) != 0;
    for (size_t k = 0; reqs && k < n; k++) {
        free((char *)reqs[k].url);
        bq_ctl_http_req_free(&reqs[k]);
    }
    free(reqs);
    if (!ok) {
        free_nodes(nodes, n);
        return NULL;
    }
    return nodes;
}

/* One request whose answer is printed: a 2xx body on stdout (with a final
 * newline added unless raw), anything else on stderr. The exit status. */
static int one(const bq_ctl_args_t *a, const char *what, const char *method, char *url, bool raw)
{
    if (url == NULL) {
        fprintf(stderr, "beanstalkctl: %s: out of memory\n", what);
        return 1;
    }
    bq_ctl_http_req_t r = {.method = method, .url = url};
    bq_ctl_http_opts_t o = opts_of(a);
    bq_ctl_http_run(&o, &r, 1);
    bool ok = r.body && r.status >= 200 && r.status < 300;
    if (r.body == NULL) {
        fprintf(stderr, "beanstalkctl: %s: %s: %s\n", what, url, r.error);
    } else if (ok) {
        fwrite(r.body, 1, r.len, stdout);
        if (!raw && r.len > 0 && r.body[r.len - 1] != '\n')
            putchar('\n');
    } else {
        int len = (int)r.len;
        while (len > 0 && (r.body[len - 1] == '\n' || r.body[len - 1] == '\r'))
            len--;
        fprintf(stderr, "beanstalkctl: %s: %s: HTTP %ld%s%.*s\n", what, url, r.status,
                len ? ": " : "", len, r.body);
    }
    bq_ctl_http_req_free(&r);
    free(url);
    return ok ? 0 : 1;
}

int bq_ctl_cmd_status(const bq_ctl_args_t *a)
{
    size_t failed;
    bq_ctl_node_t *nodes = fetch_status(a, &failed);
    int r = -1;
    if (nodes)
        r = a->json ? bq_ctl_status_json(stdout, nodes, a->nnodes)
                    : bq_ctl_status_table(stdout, nodes, a->nnodes);
    free_nodes(nodes, a->nnodes);
    if (r != 0) {
        fprintf(stderr, "beanstalkctl: status: out of memory\n");
        return 1;
    }
    return failed ? 1 : 0;
}

int bq_ctl_cmd_promote(const bq_ctl_args_t *a)
{
    return one(a, "promote", "POST", url_of(a->target, "/promote", a->force ? "?force=1" : ""),
               false);
}

int bq_ctl_cmd_switchover(const bq_ctl_args_t *a)
{
    size_t failed;
    char err[512];
    bq_ctl_node_t *nodes = fetch_status(a, &failed);
    int p = nodes ? bq_ctl_status_primary(nodes, a->nnodes, err, sizeof err) : -1;
    char *to = p >= 0 ? bq_ctl_http_escape(a->to) : NULL;
    char *url = to ? url_of(a->nodes[p], "/switchover?to=", to) : NULL;
    if (nodes == NULL)
        snprintf(err, sizeof err, "out of memory");
    if (p < 0)
        fprintf(stderr, "beanstalkctl: switchover: %s\n", err);
    for (size_t k = 0; nodes && k < a->nnodes; k++)
        if (nodes[k].status == NULL)
            fprintf(stderr, "beanstalkctl: switchover: %s: %s\n", nodes[k].url, nodes[k].error);
    free_nodes(nodes, a->nnodes);
    free(to);
    return p < 0 ? 1 : one(a, "switchover", "POST", url, false);
}

int bq_ctl_cmd_metrics(const bq_ctl_args_t *a)
{
    return one(a, "metrics", "GET", url_of(a->target, "/metrics", ""), true);
}

int bq_ctl_cmd_certs(const bq_ctl_args_t *a)
{
    char err[512];
    if (bq_ctl_certs_make(a->out, (const char *const *)a->nodes, a->nnodes, err, sizeof err)) {
        fprintf(stderr, "beanstalkctl: certs: %s\n", err);
        return 1;
    }
    printf("%s: ca.pem ca.key", a->out);
    for (size_t k = 0; k < a->nnodes; k++)
        printf(" %s.pem %s.key", a->nodes[k], a->nodes[k]);
    printf(" %s.pem %s.key\n", BQ_CTL_CLIENT_NAME, BQ_CTL_CLIENT_NAME);
    return 0;
}
