/* Certificate generation for beanstalkctl certs, with OpenSSL 3's C API
 * (no openssl command). The CA is self-signed with basicConstraints
 * CA:TRUE and may sign only certificates and CRLs; each leaf names its node
 * in CN and in a DNS subjectAltName (what replication/tls.c matches) and
 * carries the CA's key identifier. Validity starts an hour back, so a node
 * whose clock is a little behind the operator's accepts a fresh
 * certificate. Files are created with O_EXCL: an existing file is never
 * replaced, even one that appears between the check and the write. The
 * DNS names of a certificate are read back for beanstalkctl's own, which
 * tells which node it is when a node hands itself off. */
#include "node/ctl/ctl_certs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define PATH_CAP 4096
#define BACKDATE_S 3600L

typedef struct ext {
    int nid;
    const char *value;
} ext_t;

static const ext_t ca_exts[] = {
    {NID_basic_constraints, "critical,CA:TRUE"},
    {NID_key_usage, "critical,keyCertSign,cRLSign"},
    {NID_subject_key_identifier, "hash"},
};

typedef struct certs {
    const char *dir;
    char **created; /* paths written so far, removed on failure */
    size_t ncreated;
    EVP_PKEY *ca_key;
    X509 *ca;
    char *err;
    size_t errlen;
} certs_t;

/* Formats the message, with OpenSSL's first queued error when there is one. */
__attribute__((format(printf, 2, 3))) static int fail(certs_t *c, const char *fmt, ...)
{
    char why[256] = "";
    unsigned long e = ERR_get_error();
    if (e != 0)
        ERR_error_string_n(e, why, sizeof why);
    ERR_clear_error();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    size_t used = strlen(c->err);
    if (*why)
        snprintf(c->err + used, c->errlen - used, ": %s", why);
    return -1;
}

static void path_of(const certs_t *c, const char *name, const char *ext, char *path)
{
    snprintf(path, PATH_CAP, "%s/%s.%s", c->dir, name, ext);
}

/* Creates dir and its missing parents, like mkdir -p. */
static int make_dir(certs_t *c)
{
    char path[PATH_CAP];
    if (snprintf(path, sizeof path, "%s", c->dir) >= (int)sizeof path)
        return fail(c, "%s: path too long", c->dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return fail(c, "cannot create %s: %s", path, strerror(errno));
        if ((*p = saved) == '\0')
            break;
    }
    struct stat st;
    if (stat(c->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fail(c, "%s is not a directory", c->dir);
    return 0;
}

/* Fails when any file this run would write exists already. */
static int check_free(certs_t *c, const char *const *names, size_t n)
{
    static const char *const exts[] = {"pem", "key"};
    char path[PATH_CAP];
    struct stat st;
    for (size_t k = 0; k < n; k++) {
        for (size_t e = 0; e < 2; e++) {
            path_of(c, names[k], exts[e], path);
            if (lstat(path, &st) == 0)
                return fail(c, "%s exists; not overwriting anything", path);
            if (errno != ENOENT)
                return fail(c, "%s: %s", path, strerror(errno));
        }
    }
    return 0;
}

/* Writes a key (mode 0600) or a certificate (0644) into a new file. */
static int write_pem(certs_t *c, const char *name, EVP_PKEY *key, X509 *cert)
{
    char path[PATH_CAP];
    path_of(c, name, key ? "key" : "pem", path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, key ? 0600 : 0644);
    if (fd < 0)
        return fail(c, "cannot create %s: %s", path, strerror(errno));
    if ((c->created[c->ncreated] = strdup(path)) != NULL)
        c->ncreated++;
    BIO *b = BIO_new_fd(fd, BIO_CLOSE);
    if (b == NULL)
        close(fd);
    bool ok = b && (!key || fchmod(fd, 0600) == 0) &&
              (key ? PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL)
                   : PEM_write_bio_X509(b, cert)) &&
              BIO_flush(b) == 1;
    BIO_free(b);
    return ok ? 0 : fail(c, "cannot write %s", path);
}

static bool random_serial(X509 *x)
{
    BIGNUM *bn = BN_new();
    ASN1_INTEGER *serial = NULL;
    bool ok = bn && BN_rand(bn, 159, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) &&
              (serial = BN_to_ASN1_INTEGER(bn, NULL)) != NULL && X509_set_serialNumber(x, serial);
    ASN1_INTEGER_free(serial);
    BN_free(bn);
    return ok;
}

static bool add_exts(X509 *x, X509 *issuer, const ext_t *exts, size_t n)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    for (size_t k = 0; k < n; k++) {
        X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, exts[k].nid, exts[k].value);
        bool ok = e && X509_add_ext(x, e, -1);
        X509_EXTENSION_free(e);
        if (!ok)
            return false;
    }
    return true;
}

/* A certificate for key named cn, signed by the CA (self-signed when ca is
 * NULL) with the extensions given. Returns a new X509 or NULL. */
static X509 *make_cert(const char *cn, EVP_PKEY *key, X509 *ca, EVP_PKEY *ca_key, const ext_t *exts,
                       size_t n)
{
    X509 *x = X509_new();
    X509_NAME *name = X509_NAME_new();
    bool ok = x && name && X509_set_version(x, X509_VERSION_3) && random_serial(x) &&
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
                                         -1, 0) &&
              X509_set_subject_name(x, name) &&
              X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name) &&
              X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE_S) &&
              X509_gmtime_adj(X509_getm_notAfter(x), BQ_CTL_CERT_DAYS * 86400L) &&
              X509_set_pubkey(x, key) && add_exts(x, ca ? ca : x, exts, n) &&
              X509_sign(x, ca_key, EVP_sha256()) > 0;
    X509_NAME_free(name);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* A leaf's key and certificate for name, written to name.key and name.pem. */
static int make_leaf(certs_t *c, const char *name, const char *eku)
{
    char san[80];
    if (strlen(name) > 64) /* the longest CN X.509 allows (ub-common-name) */
        return fail(c, "%s: name longer than 64 bytes", name);
    snprintf(san, sizeof san, "DNS:%s", name);
    const ext_t exts[] = {
        {NID_basic_constraints, "critical,CA:FALSE"},
        {NID_key_usage, "critical,digitalSignature"},
        {NID_ext_key_usage, eku},
        {NID_subject_alt_name, san},
        {NID_subject_key_identifier, "hash"},
        {NID_authority_key_identifier, "keyid:always"},
    };
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x =
        key ? make_cert(name, key, c->ca, c->ca_key, exts, sizeof exts / sizeof exts[0]) : NULL;
    int r = x ? 0 : fail(c, "cannot make the certificate of %s", name);
    if (r == 0)
        r = write_pem(c, name, key, NULL);
    if (r == 0)
        r = write_pem(c, name, NULL, x);
    X509_free(x);
    EVP_PKEY_free(key);
    return r;
}

static int make_ca(certs_t *c)
{
    c->ca_key = EVP_EC_gen("P-256");
    c->ca = c->ca_key ? make_cert("beanstalkd-ha cluster CA", c->ca_key, NULL, c->ca_key, ca_exts,
                                  sizeof ca_exts / sizeof ca_exts[0])
                      : NULL;
    if (c->ca == NULL)
        return fail(c, "cannot make the CA certificate");
    if (write_pem(c, "ca", c->ca_key, NULL) != 0)
        return -1;
    return write_pem(c, "ca", NULL, c->ca);
}

static int make_all(certs_t *c, const char *const *ids, size_t n)
{
    const char **names = calloc(n + 2, sizeof *names);
    if (names == NULL)
        return fail(c, "out of memory");
    names[0] = "ca";
    memcpy(names + 1, ids, n * sizeof *ids);
    names[n + 1] = BQ_CTL_CLIENT_NAME;
    int r = check_free(c, names, n + 2);
    free(names);
    if (r == 0)
        r = make_dir(c);
    if (r == 0)
        r = make_ca(c);
    for (size_t k = 0; r == 0 && k < n; k++)
        r = make_leaf(c, ids[k], "serverAuth,clientAuth");
    if (r == 0)
        r = make_leaf(c, BQ_CTL_CLIENT_NAME, "clientAuth");
    return r;
}

int bq_ctl_certs_make(const char *dir, const char *const *ids, size_t n, char *err, size_t errlen)
{
    certs_t c = {.dir = dir, .err = err, .errlen = errlen};
    int r;
    if ((c.created = calloc(2 * n + 4, sizeof *c.created)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r = make_all(&c, ids, n);
    for (size_t k = 0; k < c.ncreated; k++) {
        if (r != 0)
            unlink(c.created[k]);
        free(c.created[k]);
    }
    free(c.created);
    X509_free(c.ca);
    EVP_PKEY_free(c.ca_key);
    return r;
}

void bq_ctl_certs_names_free(char **names, size_t n)
{
    for (size_t k = 0; names && k < n; k++)
        free(names[k]);
    free(names);
}

/* The DNS entries of sans (may be NULL) into *names; false when out of memory. */
static bool dns_of(const GENERAL_NAMES *sans, char ***names, size_t *n)
{
    int total = sans ? sk_GENERAL_NAME_num(sans) : 0;
    *names = calloc(total > 0 ? (size_t)total : 1, sizeof **names);
    *n = 0;
    for (int k = 0; *names && k < total; k++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, k);
        if (g->type != GEN_DNS)
            continue;
        const ASN1_IA5STRING *s = g->d.dNSName;
        char *name = strndup((const char *)ASN1_STRING_get0_data(s), (size_t)ASN1_STRING_length(s));
        if (name == NULL)
            return false;
        (*names)[(*n)++] = name;
    }
    return *names != NULL;
}

int bq_ctl_certs_dns_names(const char *path, char ***names, size_t *n, char *err, size_t errlen)
{
    certs_t c = {.err = err, .errlen = errlen};
    *names = NULL;
    *n = 0;
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return fail(&c, "cannot read the client certificate %s: %s", path, strerror(errno));
    X509 *x = PEM_read_X509(fp, NULL, NULL, NULL);
    fclose(fp);
    if (x == NULL)
        return fail(&c, "%s: no PEM certificate", path);
    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    bool ok = dns_of(sans, names, n);
    GENERAL_NAMES_free(sans);
    X509_free(x);
    if (ok)
        return 0;
    bq_ctl_certs_names_free(*names, *n);
    *names = NULL;
    *n = 0;
    return fail(&c, "out of memory");
}
