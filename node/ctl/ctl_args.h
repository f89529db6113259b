/* beanstalkctl's command line, parsed by a pure function (no I/O, no
 * environment access: the caller passes $BEANSTALKCTL_NODES and
 * $BEANSTALKCTL_TLS_{CERT,KEY,CA} in):
 *
 *   beanstalkctl [--nodes NODE,...] [--tls-cert F --tls-key F --tls-ca F]
 *                [--timeout MS] COMMAND [command options]
 *
 * Global options come before the command; every command but certs also
 * accepts them after it, except that after handoff --timeout is handoff's
 * own (for the whole command, in seconds). A node is host:port, a URL, or
 * either after ID= (the node id its TLS certificate must name,
 * ctl_verify.h). host:port gets http:// (https:// when a client
 * certificate is given); trailing slashes are dropped. */
#ifndef BQ_CTL_ARGS_H
#define BQ_CTL_ARGS_H

#include <stdbool.h>
#include <stddef.h>

/* The local node: http://, or https:// with a client certificate. */
#define BQ_CTL_DEFAULT_NODE "127.0.0.1:11380"
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

/* One node as given in --nodes or --node. */
typedef struct bq_ctl_addr {
    char *url;  /* base URL, where beanstalkctl connects: "https://10.0.0.1:11380" */
    char *id;   /* ID of ID=HOST:PORT; NULL when none was given */
    char *name; /* the name its TLS certificate must carry: NULL until bq_ctl_cmd_expect
                 * sets it, and for plaintext */
} bq_ctl_addr_t;

/* The environment's defaults, each NULL or "" when unset. */
typedef struct bq_ctl_env {
    const char *nodes;    /* $BEANSTALKCTL_NODES, for --nodes */
    const char *tls_cert; /* $BEANSTALKCTL_TLS_CERT, for --tls-cert */
    const char *tls_key;  /* $BEANSTALKCTL_TLS_KEY, for --tls-key */
    const char *tls_ca;   /* $BEANSTALKCTL_TLS_CA, for --tls-ca */
} bq_ctl_env_t;

typedef struct bq_ctl_args {
    bq_ctl_cmd_t cmd;
    bq_ctl_addr_t *nodes; /* status, switchover: the nodes */
    size_t nnodes;
    bq_ctl_addr_t target; /* promote, metrics, handoff: the one node addressed (url NULL: none) */
    char **ids;           /* certs: node ids */
    size_t nids;
    /* The three TLS files: all set or all NULL (borrowed from argv or the
     * environment; each flag wins over its variable). */
    const char *tls_cert;
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

/* Parses argv[1..argc) into *a (argv and env borrowed: *a points into
 * them). env: the environment's defaults (NULL: none). Returns 0; -EINVAL
 * on a usage error with a one-line message in err; -ENOMEM. Free *a with
 * bq_ctl_args_free in every case. */
int bq_ctl_args_parse(bq_ctl_args_t *a, int argc, char *const *argv, const bq_ctl_env_t *env,
                      char *err, size_t errlen);

/* Frees what bq_ctl_args_parse allocated in *a (not a itself). */
void bq_ctl_args_free(bq_ctl_args_t *a);

/* The base URL for a node written as host:port or as a URL: a new string
 * (free with free), or NULL with a message in err (bad scheme, empty). */
char *bq_ctl_args_node_url(const char *node, bool tls, char *err, size_t errlen);

/* Parses a node written as host:port, a URL, or ID= before either into
 * *out (new strings; out->name NULL). 0; -EINVAL with a message in err
 * (bad scheme, no host, not a node id); -ENOMEM. Free with
 * bq_ctl_args_addr_free in every case. */
int bq_ctl_args_node(const char *node, bool tls, bq_ctl_addr_t *out, char *err, size_t errlen);

/* Frees the strings of *addr (not addr itself). */
void bq_ctl_args_addr_free(bq_ctl_addr_t *addr);

#endif
