/* Command-line options of beanstalkd-ha: beanstalkd's short flags with its
 * exact parsing rules (combined flags such as -VFV, attached or separate
 * arguments, sscanf "%zu%c" sizes), plus GNU-style long options
 * (--name=value or --name value).
 *
 * Parsing is pure: argv in, a bq_flags_t out, no printing and no exit; the
 * caller reports errors and warnings. */
#ifndef BQ_NODE_FLAGS_H
#define BQ_NODE_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define BQ_FLAGS_DEFAULT_PORT "11300"
#define BQ_FLAGS_DEFAULT_FSYNC_MS 50
#define BQ_FLAGS_DEFAULT_BINLOG_SIZE 10485760
#define BQ_FLAGS_DEFAULT_JOB_SIZE 65535
#define BQ_FLAGS_MAX_JOB_SIZE 1073741824

/* What the process should do after parsing. */
typedef enum bq_flags_action {
    BQ_FLAGS_RUN,     /* start the server */
    BQ_FLAGS_HELP,    /* -h: print usage, exit 0 */
    BQ_FLAGS_VERSION, /* -v: print the version, exit 0 */
    BQ_FLAGS_USAGE,   /* error: print error and usage to stderr, exit 5 */
    BQ_FLAGS_IMPORT,  /* --import-beanstalkd: import into -b, then exit */
    BQ_FLAGS_CHECK,   /* --check-config: load the TLS files, print the configuration, exit */
} bq_flags_action_t;

/* Warnings raised while parsing (bit set). */
enum {
    BQ_FLAGS_WARN_Z_CLAMPED = 1 << 0, /* -z above the limit was lowered to it */
    BQ_FLAGS_WARN_C_REMOVED = 1 << 1, /* -c given */
    BQ_FLAGS_WARN_N_REMOVED = 1 << 2, /* -n given */
};

/* --role */
typedef enum bq_role {
    BQ_ROLE_SINGLE = 0, /* no cluster flags: a single beanstalkd */
    BQ_ROLE_PRIMARY,
    BQ_ROLE_STANDBY,
    BQ_ROLE_WITNESS, /* a voter that stores no jobs (--failover=auto) */
} bq_role_t;

/* At most this many --peer options. */
#define BQ_FLAGS_MAX_PEERS 8

/* One --peer NAME=HOST:PORT (the replication address of a node). */
typedef struct bq_flags_peer {
    char name[64];  /* node id: [A-Za-z0-9._-]{1,63} */
    char host[256]; /* DNS name, IPv4, or IPv6 in brackets ("[::1]" stored as "::1") */
    char port[8];   /* 1..65535 */
    bool witness;   /* named by --witness (or it is this node, --role=witness) */
} bq_flags_peer_t;

typedef struct bq_flags {
    bq_flags_action_t action;
    char error[160];           /* for BQ_FLAGS_USAGE, e.g. "unknown flag: -x" */
    unsigned warnings;         /* BQ_FLAGS_WARN_* bits */
    const char *addr;          /* -l; NULL = all addresses; "unix:/path" = unix socket */
    const char *port;          /* -p; number or service name */
    bool addr_given;           /* -l was given */
    bool port_given;           /* -p was given */
    size_t max_job_size;       /* -z, clamped to BQ_FLAGS_MAX_JOB_SIZE */
    size_t binlog_size;        /* -s */
    const char *binlog_dir;    /* -b; NULL when absent */
    bool want_sync;            /* false after -F, true after -f */
    size_t fsync_ms;           /* -f */
    bool skip_corrupt;         /* --binlog-skip-corrupt */
    const char *import_dir;    /* --import-beanstalkd; NULL when absent */
    bool import_accept_prefix; /* --import-accept-prefix */
    const char *user;          /* -u; NULL when absent */
    bool check_config;         /* --check-config */
    int verbose;               /* number of -V */
    /* cluster (docs/replication.md) */
    bq_role_t role;                            /* --role=primary|standby|witness */
    const char *node_id;                       /* --node-id NAME; must be one of the peers */
    const char *cluster_id;                    /* --cluster-id ID (default "beanstalkd-ha") */
    bq_flags_peer_t peers[BQ_FLAGS_MAX_PEERS]; /* --peer, repeatable, every node incl. this one */
    size_t npeers;
    const char
        *witnesses[BQ_FLAGS_MAX_PEERS]; /* --witness NAME, repeatable: peers that only vote */
    size_t nwitnesses;
    const char *repl_listen; /* --repl-listen HOST:PORT (default: our --peer address) */
    const char *tls_cert, *tls_key, *tls_ca; /* --tls-cert/--tls-key/--tls-ca FILE */
    bool repl_plaintext;                     /* --repl-plaintext (BQ_TEST_HOOKS builds: no TLS) */
    long sync_standbys;                      /* --sync-standbys N; -1 = default (1 with standbys) */
    bool sync_fallback_async;                /* --sync-fallback async|refuse (default async) */
    size_t sync_timeout_ms;                  /* --sync-timeout MS (default 2000) */
    size_t repl_timeout_ms;     /* --repl-timeout MS: a silent link is dropped (default 5000) */
    size_t status_interval_ms;  /* --status-interval MS: status log line (default 10000, 0 off) */
    bool failover_auto;         /* --failover=auto|manual (default manual) */
    size_t failover_timeout_ms; /* --failover-timeout MS (default 1000) */
    const char *admin_listen;   /* --admin-listen [HOST:]PORT as HOST:PORT; NULL: none */
    char admin_buf[300];        /* admin_listen when the host was left out */
    const char *console_password_file; /* --console-password-file FILE; NULL: none */
} bq_flags_t;

/* Parses argv[0..argc) (the arguments after the program name) into *f.
 * Strings in *f borrow from argv. Returns f->action. */
bq_flags_action_t bq_flags_parse(bq_flags_t *f, int argc, char *const *argv);

/* Writes the effective configuration of a parsed *f (action RUN or CHECK)
 * into buf[0..cap) as one logfmt line without newline, e.g. "config=ok
 * role=standby node_id=n1 ... listen=*:11300 repl_listen=... peers=n1@h:p,...".
 * Returns its length, or -1 when it does not fit (buf then holds a prefix). */
int bq_flags_describe(const bq_flags_t *f, char *buf, size_t cap);

/* Where --admin-listen puts the admin API. */
typedef enum bq_flags_admin_scope {
    BQ_FLAGS_ADMIN_NONE,        /* no --admin-listen */
    BQ_FLAGS_ADMIN_LOOPBACK,    /* 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104: plaintext allowed */
    BQ_FLAGS_ADMIN_REMOTE,      /* any other numeric address: needs the TLS flags */
    BQ_FLAGS_ADMIN_NOT_NUMERIC, /* a DNS name: the admin API cannot listen there */
} bq_flags_admin_scope_t;

/* Classifies f->admin_listen as the admin server does when it starts. */
bq_flags_admin_scope_t bq_flags_admin_scope(const bq_flags_t *f);

/* Writes the usage text for program name prog to out. */
void bq_flags_usage(FILE *out, const char *prog);

/* The warning text for one BQ_FLAGS_WARN_* bit. */
const char *bq_flags_warning(unsigned bit);

#endif
