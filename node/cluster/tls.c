/* The cluster's TLS contexts from the flags (tls.h), through
 * replication/tls.h. */
#include "node/cluster/tls.h"

#include <stdbool.h>
#include <stdio.h>

#include <openssl/x509v3.h>

#include "node/base/log.h"
#include "replication/tls.h"

/* Whether ctx's certificate names node_id as a DNS subjectAltName (the
 * rule every peer applies to it: never the CN, no wildcards). */
static bool names_node(SSL_CTX *ctx, const char *node_id)
{
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    return cert && node_id &&
           X509_check_host(cert, node_id, 0,
                           X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_WILDCARDS,
                           NULL) == 1;
}

int bq_cluster_tls_new(const bq_flags_t *f, SSL_CTX **server, SSL_CTX **client)
{
    char err[256];
    bq_tls_files_t files = {.cert = f->tls_cert, .key = f->tls_key, .ca = f->tls_ca};
    *server = *client = NULL;
    if (f->repl_plaintext)
        return 0;
    *server = bq_tls_ctx_new(true, &files, err, sizeof err);
    *client = *server ? bq_tls_ctx_new(false, &files, err, sizeof err) : NULL;
    if (*client && !names_node(*server, f->node_id)) {
        snprintf(err, sizeof err,
                 "%s does not name --node-id %s in its subjectAltName: every "
                 "peer would refuse it",
                 f->tls_cert, f->node_id);
        SSL_CTX_free(*client);
        *client = NULL;
    }
    if (*client)
        return 0;
    bq_log(BQ_LOG_ERROR, "cannot set up TLS for replication", "err=\"%s\"", err);
    SSL_CTX_free(*server);
    *server = NULL;
    return -1;
}
