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

/* The DNS subjectAltNames of the first certificate in the PEM file path
 * (beanstalkctl's own, to tell which node it is: ctl_verify.h), in order:
 * a new array of new strings in *names, their number in *n (free with
 * bq_ctl_certs_names_free). Returns 0, or -1 with a one-line message in
 * err (cannot read, not a certificate). */
int bq_ctl_certs_dns_names(const char *path, char ***names, size_t *n, char *err, size_t errlen);

/* Frees what bq_ctl_certs_dns_names returned. */
void bq_ctl_certs_names_free(char **names, size_t n);

#endif
