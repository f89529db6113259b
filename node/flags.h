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
} bq_flags_action_t;

/* Warnings raised while parsing (bit set). */
enum {
    BQ_FLAGS_WARN_Z_CLAMPED = 1 << 0, /* -z above the limit was lowered to it */
    BQ_FLAGS_WARN_C_REMOVED = 1 << 1, /* -c given */
    BQ_FLAGS_WARN_N_REMOVED = 1 << 2, /* -n given */
};

typedef struct bq_flags {
    bq_flags_action_t action;
    char error[160];        /* for BQ_FLAGS_USAGE, e.g. "unknown flag: -x" */
    unsigned warnings;      /* BQ_FLAGS_WARN_* bits */
    const char *addr;       /* -l; NULL = all addresses; "unix:/path" = unix socket */
    const char *port;       /* -p; number or service name */
    bool addr_given;        /* -l was given */
    bool port_given;        /* -p was given */
    size_t max_job_size;    /* -z, clamped to BQ_FLAGS_MAX_JOB_SIZE */
    size_t binlog_size;     /* -s */
    const char *binlog_dir; /* -b; NULL when absent */
    bool want_sync;         /* false after -F, true after -f */
    size_t fsync_ms;        /* -f */
    bool skip_corrupt;      /* --binlog-skip-corrupt */
    const char *import_dir;    /* --import-beanstalkd; NULL when absent */
    bool import_accept_prefix; /* --import-accept-prefix */
    const char *user;       /* -u; NULL when absent */
    int verbose;            /* number of -V */
} bq_flags_t;

/* Parses argv[0..argc) (the arguments after the program name) into *f.
 * Strings in *f borrow from argv. Returns f->action. */
bq_flags_action_t bq_flags_parse(bq_flags_t *f, int argc, char *const *argv);

/* Writes the usage text for program name prog to out. */
void bq_flags_usage(FILE *out, const char *prog);

/* The warning text for one BQ_FLAGS_WARN_* bit. */
const char *bq_flags_warning(unsigned bit);

#endif
