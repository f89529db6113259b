/* beanstalkctl certs: a cluster's certificates made with OpenSSL's C API,
 * under the same file names as deploy/mkcerts, so that either can make them:
 *   DIR/ca.pem, DIR/ca.key             the cluster CA
 *   DIR/<id>.pem, DIR/<id>.key         one per node: CN and DNS subjectAltName
 *                                      <id>, extended key usage serverAuth and
 *                                      clientAuth
 *   DIR/beanstalkctl.pem, .key         the operator's client certificate
 *                                      (clientAuth only)
 * Every key is EC P-256 (mode 0600); certificates are valid 825 days. */
#ifndef BQ_CTL_CERTS_H
#define BQ_CTL_CERTS_H

#include <stddef.h>

#define BQ_CTL_CERT_DAYS 825
#define BQ_CTL_CLIENT_NAME "beanstalkctl"

/* Makes the files above in dir (created if missing) for node ids
 * ids[0..n) (borrowed). Refuses, before writing anything, when any of the
 * files exists. Returns 0, or -1 with a one-line message in err; the files
 * this call wrote are removed again on failure. */
int bq_ctl_certs_make(const char *dir, const char *const *ids, size_t n, char *err, size_t errlen);

#endif
