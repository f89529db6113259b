/* beanstalkctl's argument parser: argv in, a bq_ctl_args_t out, and a
 * one-line message for anything it cannot accept. Options take their value
 * as the next word or after '=' (--timeout 500, --timeout=500). Options are
 * read in two phases: the global ones until the command word, then the
 * command's own (plus the global ones, except after certs, where --nodes
 * means node ids, and --timeout after handoff, which is handoff's limit in
 * seconds). What depends on several options - the TLS triple and the
 * environment's defaults for it, the node list and its source, the one
 * node of promote, metrics and handoff - is checked once everything has
 * been read. */
#include "node/ctl/ctl_args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/ctl/ctl_verify.h"

typedef struct parse {
    bq_ctl_args_t *a;
    int argc;
    char *const *argv;
    int i;                /* the word being read */
    const char *cmd_name; /* the command word; NULL before it */
    const char *nodes;    /* global --nodes as given */
    const char *node;     /* promote/metrics/handoff --node */
    const char *ids;      /* certs --nodes */
    char *err;
    size_t errlen;
} parse_t;

static const struct {
    const char *name;
    bq_ctl_cmd_t cmd;
} commands[] = {
    {"status", BQ_CTL_STATUS},   {"promote", BQ_CTL_PROMOTE}, {"switchover", BQ_CTL_SWITCHOVER},
    {"metrics", BQ_CTL_METRICS}, {"certs", BQ_CTL_CERTS},     {"handoff", BQ_CTL_HANDOFF},
};

__attribute__((format(printf, 2, 3))) static int fail(parse_t *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Matches the current word against --name or --name=value and takes the
 * value (after '=' or the next word). 1 matched, 0 not this option, -EINVAL
 * when the value is missing. */
static int opt_value(parse_t *p, const char *name, const char **val)
{
    const char *w = p->argv[p->i];
    size_t n = strlen(name);
    if (strncmp(w, name, n) != 0 || (w[n] != '\0' && w[n] != '='))
        return 0;
    if (w[n] == '=') {
        *val = w + n + 1;
        return 1;
    }
    if (p->i + 1 >= p->argc)
        return fail(p, "%s needs a value", name);
    *val = p->argv[++p->i];
    return 1;
}

static int parse_timeout(parse_t *p, const char *v)
{
    char *end;
    errno = 0;
    long ms = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || ms < 1 || ms > BQ_CTL_MAX_TIMEOUT_MS)
        return fail(p, "--timeout takes milliseconds from 1 to %d, not '%s'", BQ_CTL_MAX_TIMEOUT_MS,
                    v);
    p->a->timeout_ms = ms;
    return 1;
}

static int parse_handoff_timeout(parse_t *p, const char *v)
{
    char *end;
    errno = 0;
    long s = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || s < 1 || s > BQ_CTL_MAX_HANDOFF_S)
        return fail(p, "handoff --timeout takes seconds from 1 to %d, not '%s'",
                    BQ_CTL_MAX_HANDOFF_S, v);
    p->a->handoff_ms = s * 1000;
    return 1;
}

/* A global option at the current word: 1 taken, 0 not one, <0 error. */
static int global_opt(parse_t *p)
{
    const char *v = NULL;
    int r;
    if ((r = opt_value(p, "--nodes", &p->nodes)) != 0)
        return r;
    if ((r = opt_value(p, "--tls-cert", &p->a->tls_cert)) != 0)
        return r;
    if ((r = opt_value(p, "--tls-key", &p->a->tls_key)) != 0)
        return r;
    if ((r = opt_value(p, "--tls-ca", &p->a->tls_ca)) != 0)
        return r;
    if ((r = opt_value(p, "--timeout", &v)) != 0)
        return r < 0 ? r : parse_timeout(p, v);
    return 0;
}

/* An option after the command word: 1 taken, 0 not one, <0 error. */
static int command_opt(parse_t *p)
{
    bq_ctl_args_t *a = p->a;
    const char *w = p->argv[p->i], *v = NULL;
    int r = 0;
    if (a->cmd == BQ_CTL_STATUS && strcmp(w, "--json") == 0) {
        a->json = true;
        return 1;
    }
    if (a->cmd == BQ_CTL_PROMOTE && strcmp(w, "--force") == 0) {
        a->force = true;
        return 1;
    }
    if (a->cmd == BQ_CTL_HANDOFF && strcmp(w, "--dry-run") == 0) {
        a->dry_run = true;
        return 1;
    }
    if (a->cmd == BQ_CTL_HANDOFF && (r = opt_value(p, "--timeout", &v)) != 0)
        return r < 0 ? r : parse_handoff_timeout(p, v);
    if (a->cmd == BQ_CTL_PROMOTE || a->cmd == BQ_CTL_METRICS || a->cmd == BQ_CTL_HANDOFF)
        r = opt_value(p, "--node", &p->node);
    else if (a->cmd == BQ_CTL_SWITCHOVER)
        r = opt_value(p, "--to", &a->to);
    else if (a->cmd == BQ_CTL_CERTS && (r = opt_value(p, "--nodes", &p->ids)) == 0)
        r = opt_value(p, "--out", &a->out);
    if (r != 0 || a->cmd == BQ_CTL_CERTS)
        return r;
    return global_opt(p);
}

static int command_word(parse_t *p, const char *w)
{
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(w, commands[k].name) == 0) {
            p->a->cmd = commands[k].cmd;
            p->cmd_name = w;
            return 0;
        }
    }
    return fail(p, "unknown command '%s'", w);
}

char *bq_ctl_args_node_url(const char *node, bool tls, char *err, size_t errlen)
{
    const char *sep = strstr(node, "://");
    const char *host = sep ? sep + 3 : node;
    const char *scheme = sep ? "" : tls ? "https://" : "http://";
    size_t hostlen = strlen(host);
    while (hostlen > 0 && host[hostlen - 1] == '/')
        hostlen--;
    if (sep && strncmp(node, "http://", 7) != 0 && strncmp(node, "https://", 8) != 0) {
        snprintf(err, errlen, "'%s': only http:// and https:// URLs are supported", node);
        return NULL;
    }
    if (hostlen == 0) {
        snprintf(err, errlen, "'%s': no host", node);
        return NULL;
    }
    size_t pre = strlen(scheme), keep = (size_t)(host - node) + hostlen;
    char *url = malloc(pre + keep + 1);
    if (url) {
        memcpy(url, scheme, pre);
        memcpy(url + pre, node, keep);
        url[pre + keep] = '\0';
    }
    return url;
}

#define ID_RULE "letters, digits, '.', '_', '-'; at most 64"
_Static_assert(BQ_CTL_MAX_ID == 64, "ID_RULE says 64");

int bq_ctl_args_node(const char *node, bool tls, bq_ctl_addr_t *out, char *err, size_t errlen)
{
    const char *eq = strchr(node, '='), *sep = strstr(node, "://");
    *out = (bq_ctl_addr_t){0};
    if (eq && (sep == NULL || eq < sep)) {
        if ((out->id = strndup(node, (size_t)(eq - node))) == NULL)
            return -ENOMEM;
        const char *why = bq_ctl_verify_id_problem(out->id);
        if (why && strcmp(why, "reserved") == 0) {
            snprintf(err, errlen, "'%s': '%s' is reserved, not a node id", node, out->id);
            return -EINVAL;
        }
        if (why) {
            snprintf(err, errlen, "'%s': bad node id '%s' (" ID_RULE ")", node, out->id);
            return -EINVAL;
        }
        node = eq + 1;
        if (*node == '\0') {
            snprintf(err, errlen, "'%s=': no host after the node id", out->id);
            return -EINVAL;
        }
    }
    if (err && errlen)
        err[0] = '\0';
    out->url = bq_ctl_args_node_url(node, tls, err, errlen);
    return out->url ? 0 : err && *err ? -EINVAL : -ENOMEM;
}

void bq_ctl_args_addr_free(bq_ctl_addr_t *addr)
{
    free(addr->url);
    free(addr->id);
    free(addr->name);
    *addr = (bq_ctl_addr_t){0};
}

/* A node id must make a safe file name and a certificate name. */
static int check_id(parse_t *p, const char *id)
{
    const char *why = bq_ctl_verify_id_problem(id);
    if (why && strcmp(why, "reserved") == 0)
        return fail(p, "certs: '%s' is reserved (its files are made anyway)", id);
    if (why)
        return fail(p, "certs: bad node id '%s' (" ID_RULE ")", id);
    for (size_t k = 0; k < p->a->nids; k++)
        if (strcmp(p->a->ids[k], id) == 0)
            return fail(p, "certs: node id '%s' given twice", id);
    return 0;
}

/* The next comma-separated entry of *list without surrounding blanks, copied
 * into a new string (NULL when out of memory); advances *list. */
static char *next_entry(const char **list)
{
    const char *s = *list, *comma = strchr(s, ',');
    const char *e = comma ? comma : s + strlen(s);
    *list = comma ? comma + 1 : NULL;
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    return strndup(s, (size_t)(e - s));
}

/* Splits list into a->nodes, or into a->ids (node ids) when ids is true. */
static int split(parse_t *p, const char *list, bool ids)
{
    bq_ctl_args_t *a = p->a;
    size_t n = 1;
    for (const char *c = list; *c; c++)
        n += *c == ',';
    if (ids ? (a->ids = calloc(n, sizeof *a->ids)) == NULL
            : (a->nodes = calloc(n, sizeof *a->nodes)) == NULL)
        return -ENOMEM;
    while (list) {
        char *entry = next_entry(&list);
        int r = 0;
        if (entry == NULL)
            return -ENOMEM;
        if (*entry == '\0') {
            r = fail(p, "empty entry in the node list");
        } else if (!ids) {
            r = bq_ctl_args_node(entry, a->tls_cert != NULL, &a->nodes[a->nnodes++], p->err,
                                 p->errlen);
        } else if ((r = check_id(p, entry)) == 0) {
            a->ids[a->nids++] = entry;
            entry = NULL;
        }
        free(entry);
        if (r != 0)
            return r;
    }
    return 0;
}

static int finish_certs(parse_t *p)
{
    if (p->nodes)
        return fail(p, "certs: give the node ids after the command (certs --nodes ID,...)");
    if (p->ids == NULL || p->a->out == NULL)
        return fail(p, "certs needs --nodes ID,... and --out DIR");
    if (*p->a->out == '\0')
        return fail(p, "certs: --out is empty");
    return split(p, p->ids, true);
}

/* The one node promote, metrics and handoff address: --node, else the only
 * one. */
static int pick_target(parse_t *p)
{
    bq_ctl_args_t *a = p->a;
    if (p->node)
        return bq_ctl_args_node(p->node, a->tls_cert != NULL, &a->target, p->err, p->errlen);
    if (a->nnodes != 1)
        return fail(p, "%zu nodes given: choose one with --node", a->nnodes);
    a->target.url = strdup(a->nodes[0].url);
    a->target.id = a->nodes[0].id ? strdup(a->nodes[0].id) : NULL;
    return a->target.url && (a->target.id || !a->nodes[0].id) ? 0 : -ENOMEM;
}

/* v when given and not empty, else NULL. */
static const char *given(const char *v)
{
    return v && *v ? v : NULL;
}

/* The environment's value for each TLS file no flag gave. */
static void tls_defaults(bq_ctl_args_t *a, const bq_ctl_env_t *env)
{
    if (env == NULL)
        return;
    if (a->tls_cert == NULL)
        a->tls_cert = given(env->tls_cert);
    if (a->tls_key == NULL)
        a->tls_key = given(env->tls_key);
    if (a->tls_ca == NULL)
        a->tls_ca = given(env->tls_ca);
}

static int finish(parse_t *p, const bq_ctl_env_t *env)
{
    bq_ctl_args_t *a = p->a;
    if (p->cmd_name == NULL)
        return fail(p, "no command given");
    if (a->cmd == BQ_CTL_CERTS)
        return finish_certs(p);
    tls_defaults(a, env);
    int ntls = !!a->tls_cert + !!a->tls_key + !!a->tls_ca;
    if (ntls != 0 && ntls != 3)
        return fail(p, "--tls-cert, --tls-key and --tls-ca go together (or "
                       "$BEANSTALKCTL_TLS_CERT, _KEY and _CA)");
    const char *list = p->nodes                   ? p->nodes
                       : env && given(env->nodes) ? env->nodes
                                                  : BQ_CTL_DEFAULT_NODE;
    int r = split(p, list, false);
    if (r != 0)
        return r;
    if (a->cmd == BQ_CTL_PROMOTE || a->cmd == BQ_CTL_METRICS || a->cmd == BQ_CTL_HANDOFF)
        return pick_target(p);
    if (a->cmd == BQ_CTL_SWITCHOVER && (a->to == NULL || *a->to == '\0'))
        return fail(p, "switchover needs --to NODE_ID");
    return 0;
}

int bq_ctl_args_parse(bq_ctl_args_t *a, int argc, char *const *argv, const bq_ctl_env_t *env,
                      char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    a->timeout_ms = BQ_CTL_DEFAULT_TIMEOUT_MS;
    a->handoff_ms = BQ_CTL_DEFAULT_HANDOFF_S * 1000L;
    parse_t p = {.a = a, .argc = argc, .argv = argv, .err = err, .errlen = errlen};
    if (errlen > 0)
        err[0] = '\0';
    for (p.i = 1; p.i < argc; p.i++) {
        const char *w = argv[p.i];
        if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0 ||
            (!p.cmd_name && strcmp(w, "--version") == 0)) {
            a->cmd = w[2] == 'v' ? BQ_CTL_VERSION : BQ_CTL_HELP;
            return 0;
        }
        int r;
        if (w[0] == '-' && w[1] != '\0') {
            r = p.cmd_name ? command_opt(&p) : global_opt(&p);
            if (r == 0)
                r = p.cmd_name ? fail(&p, "%s does not take %s", p.cmd_name, w)
                               : fail(&p, "unknown option %s", w);
        } else {
            r = p.cmd_name ? fail(&p, "unexpected argument '%s'", w) : command_word(&p, w);
        }
        if (r < 0)
            return r;
    }
    return finish(&p, env);
}

void bq_ctl_args_free(bq_ctl_args_t *a)
{
    for (size_t k = 0; k < a->nnodes; k++)
        bq_ctl_args_addr_free(&a->nodes[k]);
    for (size_t k = 0; k < a->nids; k++)
        free(a->ids[k]);
    free(a->nodes);
    free(a->ids);
    bq_ctl_args_addr_free(&a->target);
    a->nodes = NULL;
    a->ids = NULL;
    a->nnodes = 0;
    a->nids = 0;
}
