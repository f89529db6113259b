/* Command-line parsing, reproducing beanstalkd's optparse (util.c) rules:
 * a flag group "-VFVukr" runs left to right; a flag that takes an argument
 * consumes the rest of its group, or else the next argv element; the first
 * element that is not a flag group (including a bare "-") is an error.
 * Sizes are read like sscanf("%zu%c"): digits only, nothing after them.
 * Long options map onto the same short flags: --port=11300, --port 11300;
 * a few exist only as long options (switches, --import-beanstalkd DIR and
 * the cluster options, with no short flag). Values are checked as they are
 * read; what depends on several options (the cluster's consistency, the
 * import's destination) is checked once every option has been read. The
 * one-line description that --check-config prints is made here too, from
 * the parsed flags alone. */
#include "node/base/flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_CLUSTER_ID "beanstalkd-ha"
#define DEFAULT_SYNC_TIMEOUT_MS 2000
#define DEFAULT_REPL_TIMEOUT_MS 5000
#define DEFAULT_STATUS_INTERVAL_MS 10000
#define DEFAULT_FAILOVER_TIMEOUT_MS 1000
#define MAX_NUMBER 2147483647 /* numbers fit an int (as milliseconds: about 24.8 days) */
#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

typedef struct long_opt {
    const char *name;
    char flag;         /* the short flag it stands for; 0 for a long-only switch */
    size_t switch_off; /* long-only: offset of its bool in bq_flags_t */
    bool cluster;      /* a cluster option: needs --role */
} long_opt_t;

static const long_opt_t long_opts[] = {
    {"help", 'h', 0, false},
    {"version", 'v', 0, false},
    {"verbose", 'V', 0, false},
    {"listen", 'l', 0, false},
    {"port", 'p', 0, false},
    {"user", 'u', 0, false},
    {"binlog-dir", 'b', 0, false},
    {"binlog-size", 's', 0, false},
    {"fsync-ms", 'f', 0, false},
    {"no-fsync", 'F', 0, false},
    {"max-job-size", 'z', 0, false},
    {"binlog-skip-corrupt", 0, offsetof(bq_flags_t, skip_corrupt), false},
    {"import-accept-prefix", 0, offsetof(bq_flags_t, import_accept_prefix), false},
    {"repl-plaintext", 0, offsetof(bq_flags_t, repl_plaintext), true},
    {"check-config", 0, offsetof(bq_flags_t, check_config), false},
};

static const char *const warning_texts[] = {
    "maximum job size was set to 1073741824",
    "-c flag was removed. binlog is always compacted.",
    "-n flag was removed. binlog is always compacted.",
};

static bool takes_arg(char flag)
{
    return strchr("blfpsuz", flag) != NULL;
}

static bq_flags_action_t fail(bq_flags_t *f, const char *what, const char *arg)
{
    snprintf(f->error, sizeof f->error, "%s: %s", what, arg);
    f->action = BQ_FLAGS_USAGE;
    return f->action;
}

/* Reads a size as sscanf("%zu%c") does: exactly one conversion, nothing after. */
static bool parse_size(const char *s, size_t *out)
{
    char extra;
    return sscanf(s, "%zu%c", out, &extra) == 1;
}

/* Applies a flag without argument. */
static bq_flags_action_t apply_plain(bq_flags_t *f, char flag)
{
    switch (flag) {
    case 'h':
        return f->action = BQ_FLAGS_HELP;
    case 'v':
        return f->action = BQ_FLAGS_VERSION;
    case 'V':
        f->verbose++;
        break;
    case 'F':
        f->want_sync = false;
        break;
    case 'c':
        f->warnings |= BQ_FLAGS_WARN_C_REMOVED;
        break;
    case 'n':
        f->warnings |= BQ_FLAGS_WARN_N_REMOVED;
        break;
    default: {
        char name[3] = {'-', flag, '\0'};
        return fail(f, "unknown flag", name);
    }
    }
    return BQ_FLAGS_RUN;
}

/* Applies a flag that takes an argument. */
static bq_flags_action_t apply_arg(bq_flags_t *f, char flag, const char *arg)
{
    size_t size;

    switch (flag) {
    case 'p':
        f->port = arg;
        f->port_given = true;
        return BQ_FLAGS_RUN;
    case 'l':
        f->addr = arg;
        f->addr_given = true;
        return BQ_FLAGS_RUN;
    case 'u':
        f->user = arg;
        return BQ_FLAGS_RUN;
    case 'b':
        f->binlog_dir = arg;
        return BQ_FLAGS_RUN;
    }
    if (!parse_size(arg, &size))
        return fail(f, "invalid size", arg);
    if (flag == 'z') {
        if (size > BQ_FLAGS_MAX_JOB_SIZE) {
            size = BQ_FLAGS_MAX_JOB_SIZE;
            f->warnings |= BQ_FLAGS_WARN_Z_CLAMPED;
        }
        f->max_job_size = size;
    } else if (flag == 's') {
        f->binlog_size = size;
    } else {
        f->fsync_ms = size;
        f->want_sync = true;
    }
    return BQ_FLAGS_RUN;
}

/* Long-only options that take an argument. Each is read by its setter,
 * which checks the value and stores it. */
typedef struct long_arg long_arg_t;
typedef bq_flags_action_t (*setter_t)(bq_flags_t *f, const long_arg_t *la, const char *arg);

struct long_arg {
    const char *name;
    setter_t set;
    size_t off;   /* the field in bq_flags_t that the setter writes, if any */
    size_t min;   /* set_ms: the smallest value allowed */
    bool cluster; /* a cluster option: needs --role */
};

/* "invalid --NAME (WHY): ARG" */
static bq_flags_action_t fail_value(bq_flags_t *f, const long_arg_t *la, const char *why,
                                    const char *arg)
{
    snprintf(f->error, sizeof f->error, "invalid --%s (%s): %s", la->name, why, arg);
    f->action = BQ_FLAGS_USAGE;
    return f->action;
}

/* Reads a decimal number: digits only, at most max. Unlike parse_size, no
 * sign or leading space: the cluster options have no beanstalkd history. */
static bool parse_uint(const char *s, size_t max, size_t *out)
{
    size_t v = 0;

    if (*s == '\0')
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (max - (size_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (size_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* A node or cluster id: s[0..len) is [A-Za-z0-9._-]{1,63}. */
static bool valid_name(const char *s, size_t len)
{
    return len >= 1 && len <= 63 && strspn(s, ALNUM "._-") >= len;
}

/* A DNS name or an IPv4 address (dotted digits must be a valid one). */
static bool valid_host(const char *s)
{
    size_t len = strlen(s);
    struct in_addr a4;

    if (len == 0 || len > 253 || s[0] == '-' || s[0] == '.')
        return false;
    if (strspn(s, ALNUM ".-") != len)
        return false;
    return strspn(s, "0123456789.") != len || inet_pton(AF_INET, s, &a4) == 1;
}

/* Splits HOST:PORT (HOST a DNS name, IPv4 or [IPv6]) into p->host, without
 * brackets, and p->port, in plain decimal. Returns NULL, or what is wrong. */
static const char *split_hostport(const char *s, bq_flags_peer_t *p)
{
    const char *colon = strrchr(s, ':');
    const char *host = s;
    size_t hlen = colon ? (size_t)(colon - s) : 0;
    size_t port;
    struct in6_addr a6;

    if (!colon)
        return "want HOST:PORT";
    if (s[0] == '[') {
        if (hlen < 2 || s[hlen - 1] != ']')
            return "want HOST:PORT, an IPv6 HOST in brackets";
        host++;
        hlen -= 2;
    }
    if (hlen >= sizeof p->host)
        return "host too long";
    memcpy(p->host, host, hlen);
    p->host[hlen] = '\0';
    if (host != s ? inet_pton(AF_INET6, p->host, &a6) != 1 : !valid_host(p->host))
        return "bad host: want a DNS name, an IPv4 address or [IPv6]";
    if (!parse_uint(colon + 1, 65535, &port) || port == 0)
        return "bad port: want 1..65535";
    snprintf(p->port, sizeof p->port, "%hu", (unsigned short)port); /* 1..65535 */
    return NULL;
}

static bq_flags_action_t set_string(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    *(const char **)((char *)f + la->off) = arg;
    return BQ_FLAGS_RUN;
}

static bq_flags_action_t set_file(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    if (*arg == '\0')
        return fail_value(f, la, "want a file name", arg);
    return set_string(f, la, arg);
}

static bq_flags_action_t set_name(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    if (!valid_name(arg, strlen(arg)))
        return fail_value(f, la, "want 1 to 63 of A-Z a-z 0-9 . _ -", arg);
    return set_string(f, la, arg);
}

static bq_flags_action_t set_role(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    if (strcmp(arg, "primary") == 0)
        f->role = BQ_ROLE_PRIMARY;
    else if (strcmp(arg, "standby") == 0)
        f->role = BQ_ROLE_STANDBY;
    else if (strcmp(arg, "witness") == 0)
        f->role = BQ_ROLE_WITNESS;
    else
        return fail_value(f, la, "want primary, standby or witness", arg);
    return BQ_FLAGS_RUN;
}

static bq_flags_action_t set_fallback(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    if (strcmp(arg, "refuse") == 0)
        f->sync_fallback_async = false;
    else if (strcmp(arg, "async") == 0)
        f->sync_fallback_async = true;
    else
        return fail_value(f, la, "want refuse or async", arg);
    return BQ_FLAGS_RUN;
}

static bq_flags_action_t set_failover(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    if (strcmp(arg, "manual") == 0)
        f->failover_auto = false;
    else if (strcmp(arg, "auto") == 0)
        f->failover_auto = true;
    else
        return fail_value(f, la, "want auto or manual", arg);
    return BQ_FLAGS_RUN;
}

/* NAME=HOST:PORT, appended to f->peers; names are unique. */
static bq_flags_action_t set_peer(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    const char *eq = strchr(arg, '=');
    bq_flags_peer_t *p;
    const char *why;

    if (f->npeers == BQ_FLAGS_MAX_PEERS) {
        char max[32];
        snprintf(max, sizeof max, "too many: at most %d", BQ_FLAGS_MAX_PEERS);
        return fail_value(f, la, max, arg);
    }
    if (!eq)
        return fail_value(f, la, "want NAME=HOST:PORT", arg);
    if (!valid_name(arg, (size_t)(eq - arg)))
        return fail_value(f, la, "bad NAME: want 1 to 63 of A-Z a-z 0-9 . _ -", arg);
    p = &f->peers[f->npeers];
    why = split_hostport(eq + 1, p);
    if (why)
        return fail_value(f, la, why, arg);
    memcpy(p->name, arg, (size_t)(eq - arg));
    p->name[eq - arg] = '\0';
    for (size_t k = 0; k < f->npeers; k++)
        if (strcmp(f->peers[k].name, p->name) == 0)
            return fail_value(f, la, "duplicate NAME", arg);
    f->npeers++;
    return BQ_FLAGS_RUN;
}

/* NAME of a peer that is a witness; checked against the peers once every
 * option is read. */
static bq_flags_action_t set_witness(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    if (!valid_name(arg, strlen(arg)))
        return fail_value(f, la, "bad NAME: want 1 to 63 of A-Z a-z 0-9 . _ -", arg);
    if (f->nwitnesses == BQ_FLAGS_MAX_PEERS)
        return fail_value(f, la, "too many", arg);
    f->witnesses[f->nwitnesses++] = arg;
    return BQ_FLAGS_RUN;
}

/* HOST:PORT, checked like a --peer address and kept as given. */
static bq_flags_action_t set_listen(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    bq_flags_peer_t scratch;
    const char *why = split_hostport(arg, &scratch);

    if (why)
        return fail_value(f, la, why, arg);
    return set_string(f, la, arg);
}

/* [HOST:]PORT: a bare port listens on 127.0.0.1. */
static bq_flags_action_t set_admin(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    if (strchr(arg, ':'))
        return set_listen(f, la, arg);
    size_t port;
    if (!parse_uint(arg, 65535, &port) || port == 0)
        return fail_value(f, la, "want [HOST:]PORT", arg);
    snprintf(f->admin_buf, sizeof f->admin_buf, "127.0.0.1:%zu", port);
    f->admin_listen = f->admin_buf;
    return BQ_FLAGS_RUN;
}

/* Range-checked against the number of peers once every option is read. */
static bq_flags_action_t set_standbys(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    size_t n;

    if (!parse_uint(arg, MAX_NUMBER, &n))
        return fail_value(f, la, "want a number >= 0", arg);
    f->sync_standbys = (long)n;
    return BQ_FLAGS_RUN;
}

/* Milliseconds, la->min..MAX_NUMBER, into the size_t at la->off. */
static bq_flags_action_t set_ms(bq_flags_t *f, const long_arg_t *la, const char *arg)
{
    size_t ms;

    if (!parse_uint(arg, MAX_NUMBER, &ms) || ms < la->min) {
        char why[64];
        snprintf(why, sizeof why, "want milliseconds, %zu..%d", la->min, MAX_NUMBER);
        return fail_value(f, la, why, arg);
    }
    *(size_t *)((char *)f + la->off) = ms;
    return BQ_FLAGS_RUN;
}

#define FIELD(name) offsetof(bq_flags_t, name)

static const long_arg_t long_args[] = {
    {"import-beanstalkd", set_string, FIELD(import_dir), 0, false},
    {"role", set_role, 0, 0, true},
    {"node-id", set_name, FIELD(node_id), 0, true},
    {"cluster-id", set_name, FIELD(cluster_id), 0, true},
    {"peer", set_peer, 0, 0, true},
    {"witness", set_witness, 0, 0, true},
    {"repl-listen", set_listen, FIELD(repl_listen), 0, true},
    {"tls-cert", set_file, FIELD(tls_cert), 0, true},
    {"tls-key", set_file, FIELD(tls_key), 0, true},
    {"tls-ca", set_file, FIELD(tls_ca), 0, true},
    {"sync-standbys", set_standbys, 0, 0, true},
    {"sync-fallback", set_fallback, 0, 0, true},
    {"sync-timeout", set_ms, FIELD(sync_timeout_ms), 0, true},
    {"repl-timeout", set_ms, FIELD(repl_timeout_ms), 100, true},
    {"status-interval", set_ms, FIELD(status_interval_ms), 0, true},
    {"failover", set_failover, 0, 0, true},
    {"failover-timeout", set_ms, FIELD(failover_timeout_ms), 100, true},
    {"admin-listen", set_admin, FIELD(admin_listen), 0, false},
    {"console-password-file", set_file, FIELD(console_password_file), 0, false},
};

/* The value of the long option argv[*i]: after its "=", or the next
 * element (consumed). NULL when there is none. */
static const char *long_value(int argc, char *const *argv, int *i, const char *eq)
{
    if (eq)
        return eq + 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

/* Parses the long option argv[*i] (without its leading "--"). Sets *cluster
 * to its name if it is a cluster option. */
static bq_flags_action_t parse_long(bq_flags_t *f, int argc, char *const *argv, int *i,
                                    const char **cluster)
{
    const char *opt = argv[*i] + 2;
    const char *eq = strchr(opt, '=');
    size_t len = eq ? (size_t)(eq - opt) : strlen(opt);
    const char *arg;

    for (size_t k = 0; k < sizeof long_args / sizeof long_args[0]; k++) {
        const long_arg_t *la = &long_args[k];
        if (strlen(la->name) != len || memcmp(la->name, opt, len) != 0)
            continue;
        arg = long_value(argc, argv, i, eq);
        if (!arg)
            return fail(f, "flag requires an argument", argv[*i]);
        if (la->cluster)
            *cluster = la->name;
        return la->set(f, la, arg);
    }
    for (size_t k = 0; k < sizeof long_opts / sizeof long_opts[0]; k++) {
        const long_opt_t *lo = &long_opts[k];
        if (strlen(lo->name) != len || memcmp(lo->name, opt, len) != 0)
            continue;
        if (lo->flag == 0 || !takes_arg(lo->flag)) {
            if (eq)
                return fail(f, "flag does not take an argument", argv[*i]);
            if (lo->flag != 0)
                return apply_plain(f, lo->flag);
            if (lo->cluster)
                *cluster = lo->name;
            *(bool *)((char *)f + lo->switch_off) = true;
            return BQ_FLAGS_RUN;
        }
        arg = long_value(argc, argv, i, eq);
        if (!arg)
            return fail(f, "flag requires an argument", argv[*i]);
        return apply_arg(f, lo->flag, arg);
    }
    return fail(f, "unknown flag", argv[*i]);
}

/* Parses the short flag group argv[*i], e.g. "-VFVukr". */
static bq_flags_action_t parse_group(bq_flags_t *f, int argc, char *const *argv, int *i)
{
    for (const char *p = argv[*i] + 1; *p; p++) {
        bq_flags_action_t a;
        if (!takes_arg(*p)) {
            a = apply_plain(f, *p);
        } else if (p[1]) {
            return apply_arg(f, *p, p + 1);
        } else if (*i + 1 < argc) {
            return apply_arg(f, *p, argv[++*i]);
        } else {
            char name[3] = {'-', *p, '\0'};
            return fail(f, "flag requires an argument", name);
        }
        if (a != BQ_FLAGS_RUN)
            return a;
    }
    return BQ_FLAGS_RUN;
}

static void set_defaults(bq_flags_t *f)
{
    memset(f, 0, sizeof *f);
    f->action = BQ_FLAGS_RUN;
    f->port = BQ_FLAGS_DEFAULT_PORT;
    f->max_job_size = BQ_FLAGS_DEFAULT_JOB_SIZE;
    f->binlog_size = BQ_FLAGS_DEFAULT_BINLOG_SIZE;
    f->want_sync = true;
    f->fsync_ms = BQ_FLAGS_DEFAULT_FSYNC_MS;
    f->role = BQ_ROLE_SINGLE;
    f->sync_standbys = -1;
    f->sync_timeout_ms = DEFAULT_SYNC_TIMEOUT_MS;
    f->sync_fallback_async = true; /* non-strict: any one failure leaves writes on */
    f->repl_timeout_ms = DEFAULT_REPL_TIMEOUT_MS;
    f->status_interval_ms = DEFAULT_STATUS_INTERVAL_MS;
    f->failover_timeout_ms = DEFAULT_FAILOVER_TIMEOUT_MS;
}

/* The import options go together, and with -b (the destination). */
static bq_flags_action_t check_import(bq_flags_t *f)
{
    if (f->import_accept_prefix && !f->import_dir)
        return fail(f, "flag requires --import-beanstalkd", "--import-accept-prefix");
    if (!f->import_dir)
        return BQ_FLAGS_RUN;
    if (!f->binlog_dir)
        return fail(f, "flag requires -b DIR (the destination)", "--import-beanstalkd");
    return f->action = BQ_FLAGS_IMPORT;
}

/* Replication needs TLS (all three files) unless --repl-plaintext says not
 * to. That flag is for the tests: a binary built without the test hooks
 * (the container image) refuses it. */
static bq_flags_action_t check_tls(bq_flags_t *f)
{
    int files = (f->tls_cert != NULL) + (f->tls_key != NULL) + (f->tls_ca != NULL);

#ifdef BQ_TEST_HOOKS /* only with -DBQ_TEST_HOOKS=ON (CMakeLists.txt); docs/security.md */
    if (f->repl_plaintext && files > 0)
        return fail(f, "flag conflicts with --tls-cert, --tls-key and --tls-ca",
                    "--repl-plaintext");
    if (!f->repl_plaintext && files < 3)
        return fail(f, "flag requires --tls-cert, --tls-key and --tls-ca, or --repl-plaintext",
                    "--role");
#else
    if (f->repl_plaintext)
        return fail(f, "flag is for tests only: this binary has no test hooks (BQ_TEST_HOOKS)",
                    "--repl-plaintext");
    if (files < 3)
        return fail(f, "flag requires --tls-cert, --tls-key and --tls-ca", "--role");
#endif
    return BQ_FLAGS_RUN;
}

/* Marks the peers named by --witness (each must be one), and this node
 * when it is a witness; a data node cannot name itself. */
static bq_flags_action_t mark_witnesses(bq_flags_t *f, size_t self)
{
    for (size_t w = 0; w < f->nwitnesses; w++) {
        size_t k = 0;
        while (k < f->npeers && strcmp(f->peers[k].name, f->witnesses[w]) != 0)
            k++;
        if (k == f->npeers)
            return fail(f, "--witness is not one of the --peer names", f->witnesses[w]);
        if (k == self && f->role != BQ_ROLE_WITNESS)
            return fail(f, "--witness names this node, which is not --role=witness",
                        f->witnesses[w]);
        f->peers[k].witness = true;
    }
    if (f->role == BQ_ROLE_WITNESS)
        f->peers[self].witness = true;
    return BQ_FLAGS_RUN;
}

/* The peers name every node, this one included; sync_standbys counts the
 * other data nodes, and its default (-1) becomes 1 when there is one. */
static bq_flags_action_t check_peers(bq_flags_t *f)
{
    size_t k = 0;
    long others = 0;

    if (f->npeers < 2)
        return fail(f, "flag requires at least 2 --peer (every node, this one included)", "--role");
    while (k < f->npeers && strcmp(f->peers[k].name, f->node_id) != 0)
        k++;
    if (k == f->npeers)
        return fail(f, "--node-id is not one of the --peer names", f->node_id);
    if (mark_witnesses(f, k) != BQ_FLAGS_RUN)
        return f->action;
    for (size_t i = 0; i < f->npeers; i++)
        others += i != k && !f->peers[i].witness;
    if (f->sync_standbys > others) {
        char what[96], value[24];
        snprintf(what, sizeof what, "invalid --sync-standbys (at most %ld with %zu peers)", others,
                 f->npeers);
        snprintf(value, sizeof value, "%ld", f->sync_standbys);
        return fail(f, what, value);
    }
    if (f->sync_standbys < 0)
        f->sync_standbys = others > 0 ? 1 : 0;
    return BQ_FLAGS_RUN;
}

/* Cluster options go with --role; --role needs a complete cluster
 * description and a binlog (replication streams it). cluster names the last
 * cluster option given, NULL if none. */
static bq_flags_action_t check_cluster(bq_flags_t *f, const char *cluster)
{
    if (f->role == BQ_ROLE_SINGLE) {
        char name[32];
        if (!cluster)
            return BQ_FLAGS_RUN;
        snprintf(name, sizeof name, "--%s", cluster);
        return fail(f, "flag requires --role", name);
    }
    if (f->import_dir)
        return fail(f, "flag conflicts with --role", "--import-beanstalkd");
    if (!f->node_id)
        return fail(f, "flag requires --node-id", "--role");
    if (!f->binlog_dir)
        return fail(f, "flag requires -b DIR (replication streams the binlog)", "--role");
    if (check_peers(f) != BQ_FLAGS_RUN || check_tls(f) != BQ_FLAGS_RUN)
        return f->action;
    if (f->role == BQ_ROLE_WITNESS && !f->failover_auto)
        return fail(f, "flag requires --failover=auto (a witness only votes)", "--role=witness");
    if (f->failover_auto && f->npeers < 3)
        return fail(f,
                    "flag requires 3 voters (3 --peer; with 2 nodes only manual failover is safe)",
                    "--failover=auto");
    if (!f->cluster_id)
        f->cluster_id = DEFAULT_CLUSTER_ID;
    return BQ_FLAGS_RUN;
}

bq_flags_action_t bq_flags_parse(bq_flags_t *f, int argc, char *const *argv)
{
    const char *cluster = NULL; /* the last cluster option given */

    set_defaults(f);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bq_flags_action_t r;
        if (a[0] != '-' || a[1] == '\0')
            return fail(f, "unknown argument", a);
        if (a[1] == '-')
            r = parse_long(f, argc, argv, &i, &cluster);
        else
            r = parse_group(f, argc, argv, &i);
        if (r != BQ_FLAGS_RUN)
            return r;
    }
    if (check_cluster(f, cluster) != BQ_FLAGS_RUN || check_import(f) == BQ_FLAGS_USAGE)
        return f->action;
    if (f->console_password_file && !f->admin_listen)
        return fail(f, "flag requires --admin-listen (the console is on the admin port)",
                    "--console-password-file");
    if (!f->check_config)
        return f->action;
    if (f->action == BQ_FLAGS_IMPORT)
        return fail(f, "flag conflicts with --import-beanstalkd", "--check-config");
    return f->action = BQ_FLAGS_CHECK;
}

const char *bq_flags_warning(unsigned bit)
{
    for (size_t k = 0; k < sizeof warning_texts / sizeof warning_texts[0]; k++)
        if (bit == 1u << k)
            return warning_texts[k];
    return "unknown warning";
}

/* ---- --check-config: the effective configuration as one logfmt line ---- */

typedef struct line {
    char *buf;
    size_t cap, len; /* cap > 0; buf[len] == '\0' */
    bool overflow;
} line_t;

__attribute__((format(printf, 2, 3))) static void put(line_t *l, const char *fmt, ...)
{
    va_list ap;
    size_t room = l->cap - l->len;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->len, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        l->overflow = true;
        l->len = l->cap - 1;
        return;
    }
    l->len += (size_t)n;
}

/* " key=value", the value in double quotes (with \" and \\) unless it is
 * made of characters that need none. */
static void put_value(line_t *l, const char *key, const char *value)
{
    size_t n = strlen(value);
    if (n > 0 && strspn(value, ALNUM "._-/:@,[]*+") == n) {
        put(l, " %s=%s", key, value);
        return;
    }
    put(l, " %s=\"", key);
    for (const char *c = value; *c; c++)
        put(l, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
    put(l, "\"");
}

/* HOST:PORT, an IPv6 HOST in brackets. */
static void format_addr(char *out, size_t cap, const char *host, const char *port)
{
    snprintf(out, cap, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, port);
}

static const char *role_name(bq_role_t role)
{
    static const char *const names[] = {"single", "primary", "standby", "witness"};
    return names[role];
}

/* The client listener: unix:PATH, or HOST:PORT with * for every address. */
static void describe_listen(line_t *l, const bq_flags_t *f)
{
    char addr[600];
    if (f->addr && strncmp(f->addr, "unix:", 5) == 0)
        snprintf(addr, sizeof addr, "%s", f->addr);
    else
        format_addr(addr, sizeof addr, f->addr ? f->addr : "*", f->port);
    put_value(l, "listen", addr);
}

/* The replication and admin endpoints, TLS, sync mode and every peer. */
static void describe_cluster(line_t *l, const bq_flags_t *f)
{
    char addr[600];
    const bq_flags_peer_t *self = f->peers;
    while (strcmp(self->name, f->node_id) != 0)
        self++; /* check_peers made sure it is there */
    if (f->repl_listen)
        snprintf(addr, sizeof addr, "%s", f->repl_listen);
    else
        format_addr(addr, sizeof addr, self->host, self->port);
    put_value(l, "repl_listen", addr);
    put(l, " repl_tls=%s", f->repl_plaintext ? "off" : "on");
    if (f->admin_listen) {
        put_value(l, "admin_listen", f->admin_listen);
        /* With the TLS flags the admin API is TLS on loopback too (where it
         * also answers plaintext GETs: "on+plain"). */
        bool loop = bq_flags_admin_scope(f) == BQ_FLAGS_ADMIN_LOOPBACK;
        bool tls = f->role != BQ_ROLE_SINGLE && !f->repl_plaintext;
        put(l, " admin_tls=%s", !tls ? "off" : loop ? "on+plain" : "on");
    }
    put(l, " sync_standbys=%ld sync_fallback=%s failover_timeout_ms=%zu", f->sync_standbys,
        f->sync_fallback_async ? "async" : "refuse", f->failover_timeout_ms);
    put(l, " peers=");
    for (size_t k = 0; k < f->npeers; k++) {
        format_addr(addr, sizeof addr, f->peers[k].host, f->peers[k].port);
        put(l, "%s%s@%s%s", k ? "," : "", f->peers[k].name, addr,
            f->peers[k].witness ? "(witness)" : "");
    }
}

int bq_flags_describe(const bq_flags_t *f, char *buf, size_t cap)
{
    line_t l = {.buf = buf, .cap = cap};
    if (cap == 0)
        return -1;
    buf[0] = '\0';
    put(&l, "config=ok role=%s", role_name(f->role));
    if (f->role != BQ_ROLE_SINGLE)
        put(&l, " node_id=%s cluster_id=%s failover=%s", f->node_id, f->cluster_id,
            f->failover_auto ? "auto" : "manual");
    describe_listen(&l, f);
    if (f->role != BQ_ROLE_SINGLE)
        describe_cluster(&l, f);
    if (f->binlog_dir) {
        put_value(&l, "binlog_dir", f->binlog_dir);
        if (!f->want_sync)
            put(&l, " fsync=never");
        else if (f->fsync_ms == 0)
            put(&l, " fsync=always");
        else
            put(&l, " fsync=%zums", f->fsync_ms);
    }
    put(&l, " max_job_size=%zu", f->max_job_size);
    if (f->user)
        put_value(&l, "user", f->user);
    return l.overflow ? -1 : (int)l.len;
}

bq_flags_admin_scope_t bq_flags_admin_scope(const bq_flags_t *f)
{
    char host[256];
    struct in_addr a4;
    struct in6_addr a6;

    if (!f->admin_listen)
        return BQ_FLAGS_ADMIN_NONE;
    const char *h = f->admin_listen, *colon = strrchr(h, ':');
    size_t len = (size_t)(colon - h); /* set_admin made sure there is one */
    if (len >= 2 && h[0] == '[' && h[len - 1] == ']') {
        h++;
        len -= 2;
    }
    snprintf(host, sizeof host, "%.*s", (int)len, h);
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127 ? BQ_FLAGS_ADMIN_LOOPBACK : BQ_FLAGS_ADMIN_REMOTE;
    if (inet_pton(AF_INET6, host, &a6) != 1)
        return BQ_FLAGS_ADMIN_NOT_NUMERIC;
    if (IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127))
        return BQ_FLAGS_ADMIN_LOOPBACK;
    return BQ_FLAGS_ADMIN_REMOTE;
}

/* --repl-plaintext is listed only where check_tls accepts it. */
#ifdef BQ_TEST_HOOKS
#define USAGE_REPL_PLAINTEXT " --repl-plaintext        replication without TLS (tests only)\n"
#else
#define USAGE_REPL_PLAINTEXT ""
#endif

static void usage_cluster(FILE *out)
{
    fprintf(
        out,
        "\n"
        "Cluster options (without --role, a single beanstalkd):\n"
        " --role primary|standby|witness\n"
        "                         this node's role; requires -b DIR (a witness\n"
        "                         votes in elections and stores no jobs)\n"
        " --node-id NAME          this node, one of the --peer names\n"
        " --cluster-id ID         the same on every node (default %s)\n"
        " --peer NAME=HOST:PORT   a node's replication address; one per node, this\n"
        "                         one included (at most %d); IPv6 as [ADDR]:PORT\n"
        " --witness NAME          that peer is a witness: it votes and stores no\n"
        "                         jobs (repeatable; every node must say so)\n"
        " --repl-listen HOST:PORT replication listen address (default: our --peer)\n"
        " --tls-cert FILE --tls-key FILE --tls-ca FILE\n"
        "                         TLS for replication (all three required)\n" USAGE_REPL_PLAINTEXT
        " --sync-standbys N       standbys that must store a write before it is\n"
        "                         acknowledged (default 1 if there is a standby)\n"
        " --sync-fallback async|refuse\n"
        "                         too few standbys in sync for --sync-timeout:\n"
        "                         acknowledge without them (default async) or\n"
        "                         refuse writes (strict)\n"
        " --sync-timeout MS       how long replies wait for standbys that are\n"
        "                         missing or make no progress (default %d)\n"
        " --repl-timeout MS       drop a replication link silent for MS, >= 100\n"
        "                         (default %d)\n"
        " --status-interval MS    log a status line every MS, 0 = never (default %d)\n"
        " --failover auto|manual  auto: standbys elect a new primary when it is\n"
        "                         gone (needs 3 voters); manual: beanstalkctl\n"
        "                         promote (default manual)\n"
        " --failover-timeout MS   auto: a primary silent for MS is gone, and a\n"
        "                         primary cut off from a majority for MS stops\n"
        "                         acknowledging writes, >= 100 (default %d)\n"
        " --admin-listen [HOST:]PORT\n"
        "                         the admin HTTP API (status, metrics, promote,\n"
        "                         switchover) and web console; HOST defaults to\n"
        "                         127.0.0.1, any other than loopback needs the\n"
        "                         TLS flags\n"
        " --console-password-file FILE\n"
        "                         the web console's operator password (its first\n"
        "                         line, at least 12 bytes): log in to see job\n"
        "                         bodies and act without a client certificate\n",
        DEFAULT_CLUSTER_ID, BQ_FLAGS_MAX_PEERS, DEFAULT_SYNC_TIMEOUT_MS, DEFAULT_REPL_TIMEOUT_MS,
        DEFAULT_STATUS_INTERVAL_MS, DEFAULT_FAILOVER_TIMEOUT_MS);
}

void bq_flags_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Use: %s [OPTIONS]\n"
            "\n"
            "Options:\n"
            " -b DIR   write-ahead log directory (--binlog-dir)\n"
            " -f MS    fsync at most once every MS milliseconds (default is %d);\n"
            "          use -f0 for \"always fsync\" (--fsync-ms)\n"
            " -F       never fsync (--no-fsync)\n"
            " -l ADDR  listen on address (default is all addresses); unix:PATH for a\n"
            "          unix socket (--listen)\n"
            " -p PORT  listen on port (default is %s) (--port)\n"
            " -u USER  become user and group (--user)\n"
            " -z BYTES set the maximum job size in bytes (default is %d);\n"
            "          max allowed is %d bytes (--max-job-size)\n"
            " -s BYTES set the size of each write-ahead log file (default is %d)\n"
            "          (--binlog-size)\n"
            " --binlog-skip-corrupt\n"
            "          start even if a write-ahead log file is damaged before its\n"
            "          end: the damaged bytes are copied aside and skipped\n"
            " --import-beanstalkd SRC_DIR\n"
            "          import the jobs of a beanstalkd binlog directory (binlog.N,\n"
            "          format 7) into the write-ahead log of -b DIR, then exit\n"
            " --import-accept-prefix\n"
            "          with --import-beanstalkd: if SRC_DIR is damaged, import the\n"
            "          jobs of the records before the damage instead of nothing\n"
            " --check-config\n"
            "          check the options as start-up does and load the TLS files,\n"
            "          print the configuration as one line on stdout and exit 0\n"
            "          (or fail as start-up would); opens no binlog, binds nothing\n"
            " -v       show version information (--version)\n"
            " -V       increase verbosity (--verbose)\n"
            " -h       show this help (--help)\n",
            prog, BQ_FLAGS_DEFAULT_FSYNC_MS, BQ_FLAGS_DEFAULT_PORT, BQ_FLAGS_DEFAULT_JOB_SIZE,
            BQ_FLAGS_MAX_JOB_SIZE, BQ_FLAGS_DEFAULT_BINLOG_SIZE);
    usage_cluster(out);
}
