/* Who may POST to the admin API (promote, switchover). Pure.
 *
 * When the node has TLS (its cluster certificates), every POST needs TLS
 * and a client certificate of the cluster CA, on loopback too (any local
 * user can reach a loopback port): a certificate naming `beanstalkctl`, the
 * operator's identity, may POST anything; one naming this node's own id may
 * only POST /switchover (the hand-off of a node about to stop: a
 * Kubernetes preStop hook or systemd's ExecStop, which hold only the node's
 * own key); any other certificate, or none, gets 403. A node without TLS
 * (a single beanstalkd, or --repl-plaintext in tests) has nothing to
 * protect it with and serves POSTs on its loopback address. GETs are never
 * restricted (probes, scrapers). */
#ifndef BQ_NODE_ADMIN_ACCESS_H
#define BQ_NODE_ADMIN_ACCESS_H

#include <stdbool.h>
#include <stddef.h>

#define BQ_ADMIN_OPERATOR "beanstalkctl"

/* NULL when a POST to path may be served, else the one-line reason for a
 * 403. tls_configured: the node has TLS; over_tls: this request came over
 * TLS; name: the allowed name the client's certificate matched (NULL:
 * none); self: this node's id. */
const char *bq_admin_post_refusal(bool tls_configured, bool over_tls, const char *name,
                                  const char *self, const char *path);

/* Who may read job bodies and act through the web console
 * (node/admin/console.h); docs/security.md, "The web console". A request
 * is the operator's when it carries the session cookie of a login with
 * the operator password (--console-password-file), or comes over TLS with
 * beanstalkctl's client certificate; on a node with neither TLS nor a
 * password (plaintext on loopback only, like its POSTs) anyone is. An
 * action (a POST) must also carry the X-CSRF-Token header (its session's
 * token; any value with a certificate or on an open node, since no other
 * site's page can set it without a CORS preflight, which is never
 * granted), and an Origin header, when sent, must name this node. */
typedef struct bq_console_access {
    bool tls_configured, over_tls;
    const char *cert_name;    /* the allowed name the client's certificate matched, or NULL */
    bool password_configured; /* --console-password-file given */
    const char *session_csrf; /* the CSRF token of the request's live session, or NULL */
    const char *csrf;         /* the X-CSRF-Token header's value, or NULL when absent */
    size_t csrf_len;
    bool foreign_origin; /* an Origin header naming another site */
    bool action;         /* a POST: it changes the queue or the cluster */
} bq_console_access_t;

/* How the request is the operator's: "session", "certificate", "open" (a
 * node with neither TLS nor a password), or NULL when it is not. */
const char *bq_console_operator(const bq_console_access_t *in);

/* 0 when the request may be served, else the status to refuse it with
 * (401: not the operator; 403: a forged or cross-site action) and the one
 * line why into *why (static). */
int bq_console_refusal(const bq_console_access_t *in, const char **why);

#endif
