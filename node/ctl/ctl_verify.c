/* The expected name of a node's certificate (ctl_verify.h): a node id
 * given with the node, the URL's DNS name, or the client certificate's one
 * node id - in that order - and a refusal, before any connection, when
 * none of them says which node is meant. An IP address is never a name:
 * nodes are reached by IP while their certificates name node ids, so
 * without an id any node of the cluster could answer for any other. */
#define _DEFAULT_SOURCE /* inet_aton: "127.1" is an address too, as libcurl reads it */
#include "node/ctl/ctl_verify.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node/ctl/ctl_args.h"
#include "node/ctl/ctl_certs.h"

const char *bq_ctl_verify_id_problem(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > BQ_CTL_MAX_ID ||
        strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789._-") != n ||
        id[0] == '.' || id[0] == '-')
        return "bad";
    if (strcmp(id, "ca") == 0 || strcmp(id, BQ_CTL_CLIENT_NAME) == 0)
        return "reserved";
    return NULL;
}

bool bq_ctl_verify_is_ip(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    return host[0] == '[' || inet_aton(host, &a4) != 0 || inet_pton(AF_INET6, host, &a6) == 1;
}

bool bq_ctl_verify_needs_own(const char *id, const char *host)
{
    return id == NULL && bq_ctl_verify_is_ip(host);
}

/* What the client certificate names, for a refusal: "names beanstalkctl". */
static void describe_own(const bq_ctl_own_t *own, char *buf, size_t cap)
{
    if (own->n == 0) {
        snprintf(buf, cap, "names nothing in a DNS subjectAltName");
        return;
    }
    size_t used = (size_t)snprintf(buf, cap, "names ");
    for (size_t k = 0; k < own->n && used < cap; k++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", k ? ", " : "", own->names[k]);
    if (used < cap)
        snprintf(buf + used, cap - used, "%s",
                 own->n > 1                                       ? " (more than one name)"
                 : strcmp(own->names[0], BQ_CTL_CLIENT_NAME) == 0 ? ", not a node"
                                                                  : ", not a node id");
}

int bq_ctl_verify_expect(const char *url, const char *id, const char *host, const bq_ctl_own_t *own,
                         const char **name, char *err, size_t errlen)
{
    *name = NULL;
    if (id) {
        *name = id;
        return 0;
    }
    if (!bq_ctl_verify_is_ip(host)) {
        *name = host;
        return 0;
    }
    if (own && own->error) {
        snprintf(err, errlen, "%s: %s", url, own->error);
        return -EIO;
    }
    if (own && own->n == 1 && bq_ctl_verify_id_problem(own->names[0]) == NULL) {
        *name = own->names[0];
        return 0;
    }
    char what[160] = "cannot be read";
    if (own)
        describe_own(own, what, sizeof what);
    const char *sep = strstr(url, "://");
    const char *hostport = sep ? sep + 3 : url;
    snprintf(err, errlen,
             "%s: which node's certificate to expect? %s is an IP address (certificates name "
             "node ids) and the client certificate %s: write the node as ID=HOST:PORT "
             "(--nodes ID=%s, or --node ID=%s)",
             url, host, what, hostport, hostport);
    return -EINVAL;
}
