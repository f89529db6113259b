/* The cluster's TLS contexts made from the flags (--tls-cert, --tls-key,
 * --tls-ca): one for the accepting side, one for the connecting side, as
 * replication, the admin API and the start-up probe use them. */
#ifndef BQ_NODE_CLUSTER_TLS_H
#define BQ_NODE_CLUSTER_TLS_H

#include <openssl/ssl.h>

#include "node/base/flags.h"

/* Makes both contexts for f (borrowed) into *server and *client (new; free
 * each with SSL_CTX_free); both NULL with --repl-plaintext. 0, or -1 (both
 * NULL, the reason logged) when a file is missing or does not match, or
 * the certificate does not name --node-id (a DNS subjectAltName). */
int bq_cluster_tls_new(const bq_flags_t *f, SSL_CTX **server, SSL_CTX **client);

#endif
