/* beanstalkctl's command line, parsed by a pure function (no I/O, no
 * environment access: the caller passes $BEANSTALKCTL_NODES in):
 *
 *   beanstalkctl [--nodes URL,...] [--tls-cert F --tls-key F --tls-ca F]
 *                [--timeout MS] COMMAND [command options]
 *
 * Global options come before the command; every command but certs also
 * accepts them after it, except that after handoff --timeout is handoff's
 * own (for the whole command, in seconds). A node given as host:port gets
 * http:// (https:// when --tls-cert is given); trailing slashes are
 * dropped. */
#ifndef BQ_CTL_ARGS_H
#define BQ_CTL_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#define BQ_CTL_DEFAULT_NODE "http://127.0.0.1:11380"
#define BQ_CTL_DEFAULT_TIMEOUT_MS 10000
#define BQ_CTL_MAX_TIMEOUT_MS 3600000 /* one hour */
#define BQ_CTL_MAX_ID 64              /* a node id is a certificate's CN: at most 64 bytes */
/* handoff --timeout, in seconds. The default leaves room for the nodes' own
 * switchover limit, max(5 s, 3 x --failover-timeout): 5 s by default, 30 s
 * at a failover timeout of 10 s. */
#define BQ_CTL_DEFAULT_HANDOFF_S 30
#define BQ_CTL_MAX_HANDOFF_S 3600

typedef enum bq_ctl_cmd {
    BQ_CTL_HELP,
    BQ_CTL_VERSION,
    BQ_CTL_STATUS,
    BQ_CTL_PROMOTE,
    BQ_CTL_SWITCHOVER,
    BQ_CTL_METRICS,
    BQ_CTL_CERTS,
    BQ_CTL_HANDOFF,
} bq_ctl_cmd_t;

typedef struct bq_ctl_args {
    bq_ctl_cmd_t cmd;
    char **nodes; /* status, switchover: base URLs; certs: node ids */
    size_t nnodes;
    char *target;         /* promote, metrics, handoff: base URL of the one node addressed */
    const char *tls_cert; /* the three TLS files: all set or all NULL (borrowed from argv) */
    const char *tls_key;
    const char *tls_ca;
    long timeout_ms; /* per request, connection included */
    long handoff_ms; /* handoff --timeout: for the whole command */
    bool json;       /* status --json */
    bool force;      /* promote --force */
    bool dry_run;    /* handoff --dry-run */
    const char *to;  /* switchover --to (borrowed from argv) */
    const char *out; /* certs --out (borrowed from argv) */
} bq_ctl_args_t;

/* Parses argv[1..argc) into *a (argv borrowed: *a points into it). env_nodes
 * is $BEANSTALKCTL_NODES or NULL. Returns 0; -EINVAL on a usage error with a
 * one-line message in err; -ENOMEM. Free *a with bq_ctl_args_free in every
 * case. */
int bq_ctl_args_parse(bq_ctl_args_t *a, int argc, char *const *argv, const char *env_nodes,
                      char *err, size_t errlen);

/* Frees what bq_ctl_args_parse allocated in *a (not a itself). */
void bq_ctl_args_free(bq_ctl_args_t *a);

/* The base URL for a node written as host:port or as a URL: a new string
 * (free with free), or NULL with a message in err (bad scheme, empty). */
char *bq_ctl_args_node_url(const char *node, bool tls, char *err, size_t errlen);

#endif
