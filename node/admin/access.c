/* The admin API's POST rule (access.h). */
#include "node/admin/access.h"

#include <string.h>

const char *bq_admin_post_refusal(bool tls_configured, bool over_tls, const char *name,
                                  const char *self, const char *path)
{
    if (!tls_configured)
        return NULL;
    if (!over_tls)
        return "a POST needs TLS and a client certificate of the cluster (beanstalkctl's)";
    if (!name)
        return "a POST needs a client certificate of the cluster naming beanstalkctl (or this "
               "node, for its own switchover)";
    if (strcmp(name, BQ_ADMIN_OPERATOR) == 0)
        return NULL;
    if (self && strcmp(name, self) == 0 && strcmp(path, "/switchover") == 0)
        return NULL;
    return "this node's own certificate may only POST /switchover (its hand-off); use "
           "beanstalkctl's";
}
