/* The glue between beanstalkctl's parsed command line and the nodes: URLs
 * are built here from the base URLs and the admin API's paths, answers are
 * handed to ctl_status.c for rendering, and the HTTP status decides the exit
 * status. Bodies of the mutating requests (promote, switchover) are one line
 * of text from the node and are printed as they are. Before any request,
 * each https node gets the name its certificate must carry (ctl_verify.h). */
#include "node/ctl/ctl_cmd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/ctl/ctl_certs.h"
#include "node/ctl/ctl_http.h"
#include "node/ctl/ctl_status.h"
#include "node/ctl/ctl_verify.h"

/* beanstalkctl's own certificate's names, read once when needed. */
typedef struct own_cert {
    bool read;
    char **names;
    size_t n;
    char error[512];
    bq_ctl_own_t view;
} own_cert_t;

static void own_read(const char *path, own_cert_t *own)
{
    own->read = true;
    if (bq_ctl_certs_dns_names(path, &own->names, &own->n, own->error, sizeof own->error) != 0)
        own->view.error = own->error;
    own->view.names = (const char *const *)own->names;
    own->view.n = own->n;
}

/* Sets addr->name when addr is https; an exit status. */
static int expect_one(const bq_ctl_args_t *a, bq_ctl_addr_t *addr, own_cert_t *own)
{
    char host[256], err[1024];
    const char *name;
    int https, r;
    if (bq_ctl_http_url_host(addr->url, host, sizeof host, &https) != 0) {
        fprintf(stderr, "beanstalkctl: %s: not a URL libcurl can read\n", addr->url);
        return BQ_CTL_EXIT_USAGE;
    }
    if (!https)
        return 0;
    if (bq_ctl_verify_needs_own(addr->id, host) && !own->read)
        own_read(a->tls_cert, own);
    r = bq_ctl_verify_expect(addr->url, addr->id, host, own->read ? &own->view : NULL, &name, err,
                             sizeof err);
    if (r == 0 && (addr->name = strdup(name)) == NULL)
        r = -ENOMEM;
    if (r == 0)
        return 0;
    fprintf(stderr, "beanstalkctl: %s\n", r == -ENOMEM ? "out of memory" : err);
    return r == -EINVAL ? BQ_CTL_EXIT_USAGE : 1;
}

int bq_ctl_cmd_expect(bq_ctl_args_t *a)
{
    own_cert_t own = {0};
    int r = 0;
    /* The nodes the command talks to: its one target, else the list. */
    if (a->tls_cert && a->target.url)
        r = expect_one(a, &a->target, &own);
    for (size_t k = 0; a->tls_cert && !a->target.url && r == 0 && k < a->nnodes; k++)
        r = expect_one(a, &a->nodes[k], &own);
    bq_ctl_certs_names_free(own.names, own.n);
    return r;
}

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
        reqs[k].name = a->nodes[k].name;
        ok = (reqs[k].url = url_of(a->nodes[k].url, "/status", "")) != NULL;
    }
    bq_ctl_http_opts_t o = opts_of(a);
    if (ok)
        bq_ctl_http_run(&o, reqs, n);
    *failed = 0;
    for (size_t k = 0; ok && k < n; k++)
        *failed +=
            bq_ctl_status_set(&nodes[k], a->nodes[k].url, reqs[k].body ? NULL : reqs[k].error,
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

/* One request to the node at addr whose answer is printed: a 2xx body on
 * stdout (with a final newline added unless raw), anything else on stderr.
 * The exit status. */
static int one(const bq_ctl_args_t *a, const char *what, const char *method,
               const bq_ctl_addr_t *addr, char *url, bool raw)
{
    if (url == NULL) {
        fprintf(stderr, "beanstalkctl: %s: out of memory\n", what);
        return 1;
    }
    bq_ctl_http_req_t r = {.method = method, .url = url, .name = addr->name};
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
    return one(a, "promote", "POST", &a->target,
               url_of(a->target.url, "/promote", a->force ? "?force=1" : ""), false);
}

int bq_ctl_cmd_switchover(const bq_ctl_args_t *a)
{
    size_t failed;
    char err[512];
    bq_ctl_node_t *nodes = fetch_status(a, &failed);
    int p = nodes ? bq_ctl_status_primary(nodes, a->nnodes, err, sizeof err) : -1;
    char *to = p >= 0 ? bq_ctl_http_escape(a->to) : NULL;
    char *url = to ? url_of(a->nodes[p].url, "/switchover?to=", to) : NULL;
    if (nodes == NULL)
        snprintf(err, sizeof err, "out of memory");
    if (p < 0)
        fprintf(stderr, "beanstalkctl: switchover: %s\n", err);
    for (size_t k = 0; nodes && k < a->nnodes; k++)
        if (nodes[k].status == NULL)
            fprintf(stderr, "beanstalkctl: switchover: %s: %s\n", nodes[k].url, nodes[k].error);
    free_nodes(nodes, a->nnodes);
    free(to);
    return p < 0 ? 1 : one(a, "switchover", "POST", &a->nodes[p], url, false);
}

int bq_ctl_cmd_metrics(const bq_ctl_args_t *a)
{
    return one(a, "metrics", "GET", &a->target, url_of(a->target.url, "/metrics", ""), true);
}

int bq_ctl_cmd_certs(const bq_ctl_args_t *a)
{
    char err[512];
    if (bq_ctl_certs_make(a->out, (const char *const *)a->ids, a->nids, err, sizeof err)) {
        fprintf(stderr, "beanstalkctl: certs: %s\n", err);
        return 1;
    }
    printf("%s: ca.pem ca.key", a->out);
    for (size_t k = 0; k < a->nids; k++)
        printf(" %s.pem %s.key", a->ids[k], a->ids[k]);
    printf(" %s.pem %s.key\n", BQ_CTL_CLIENT_NAME, BQ_CTL_CLIENT_NAME);
    return 0;
}
