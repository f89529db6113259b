/* The admin API's POST rule (access.h). */
#include "node/admin/access.h"

#include <string.h>

#include "node/admin/console_auth.h"

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

const char *bq_console_operator(const bq_console_access_t *in)
{
    if (in->session_csrf != NULL)
        return "session";
    if (in->over_tls && in->cert_name && strcmp(in->cert_name, BQ_ADMIN_OPERATOR) == 0)
        return "certificate";
    if (!in->tls_configured && !in->password_configured)
        return "open";
    return NULL;
}

int bq_console_refusal(const bq_console_access_t *in, const char **why)
{
    const char *via = bq_console_operator(in);
    bool by_session = in->session_csrf != NULL;
    if (in->action && in->foreign_origin) {
        *why = "refused: the request came from another site's page (Origin)";
        return 403;
    }
    if (via == NULL) {
        *why = in->password_configured
                   ? "log in with the operator password (or present beanstalkctl's certificate)"
                   : "present beanstalkctl's client certificate (no operator password is set: "
                     "--console-password-file)";
        return 401;
    }
    if (!in->action)
        return 0;
    if (in->csrf == NULL || in->csrf_len == 0) {
        *why = "refused: an action needs the X-CSRF-Token header";
        return 403;
    }
    if (by_session &&
        !bq_console_equal(in->csrf, in->csrf_len, in->session_csrf, strlen(in->session_csrf))) {
        *why = "refused: the X-CSRF-Token header is not this session's";
        return 403;
    }
    return 0;
}
