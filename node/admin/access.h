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

#define BQ_ADMIN_OPERATOR "beanstalkctl"

/* NULL when a POST to path may be served, else the one-line reason for a
 * 403. tls_configured: the node has TLS; over_tls: this request came over
 * TLS; name: the allowed name the client's certificate matched (NULL:
 * none); self: this node's id. */
const char *bq_admin_post_refusal(bool tls_configured, bool over_tls, const char *name,
                                  const char *self, const char *path);

#endif
