/* Certificates in a temporary directory for the replication TLS tests
 * (test_repl_tls makes them with the OpenSSL API, the others with
 * deploy/mkcerts through make_certs): the directory, its removal, and contexts built from it
 * with bq_tls_ctx_new. Header-only; include once per test. */
#ifndef BQ_TEST_TLS_CERTS_H
#define BQ_TEST_TLS_CERTS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "replication/tls.h"

/* The directory holding <name>.pem, <name>.key and ca.pem. */
static char dir[64];

/* cmocka group teardown: removes dir. */
static int teardown_certs(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#ifdef BQ_MKCERTS
/* Makes dir from template ("/tmp/bq-x-XXXXXX") and in it, with
 * deploy/mkcerts, a CA and a certificate for each of the space-separated
 * names. 0 or -1 (a cmocka group setup's result). */
static int make_certs(const char *template, const char *names)
{
    snprintf(dir, sizeof dir, "%s", template);
    if (mkdtemp(dir) == NULL)
        return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s", BQ_MKCERTS, dir, names);
    return system(cmd) == 0 ? 0 : -1;
}
#endif

/* A context presenting dir/<name>.pem, trusting dir/ca.pem; fails the test
 * when it cannot be made. */
static SSL_CTX *ctx_for(bool server, const char *name)
{
    char cert[128], key[128], ca[128], err[512] = "";
    snprintf(cert, sizeof cert, "%s/%s.pem", dir, name);
    snprintf(key, sizeof key, "%s/%s.key", dir, name);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    bq_tls_files_t files = {.cert = cert, .key = key, .ca = ca};
    SSL_CTX *ctx = bq_tls_ctx_new(server, &files, err, sizeof err);
    if (ctx == NULL) {
        fail_msg("bq_tls_ctx_new: %s", err);
    }
    return ctx;
}

#endif
