/* The cluster's TLS contexts from the flags (cluster_tls.h), through
 * replication/tls.h. */
#include "cluster_tls.h"

#include "log.h"
#include "replication/tls.h"

int bq_cluster_tls_new(const bq_flags_t *f, SSL_CTX **server, SSL_CTX **client)
{
    char err[256];
    bq_tls_files_t files = {.cert = f->tls_cert, .key = f->tls_key, .ca = f->tls_ca};
    *server = *client = NULL;
    if (f->repl_plaintext)
        return 0;
    *server = bq_tls_ctx_new(true, &files, err, sizeof err);
    *client = *server ? bq_tls_ctx_new(false, &files, err, sizeof err) : NULL;
    if (*client)
        return 0;
    bq_log(BQ_LOG_ERROR, "cannot set up TLS for replication", "err=\"%s\"", err);
    SSL_CTX_free(*server);
    *server = NULL;
    return -1;
}
