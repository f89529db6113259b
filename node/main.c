/* beanstalkd-ha's entry point: parses the flags, sets up the process, runs
 * the server and turns start-up failures into beanstalkd's exit codes
 * (5 usage, 111 listen, 50 urandom/uname, 32-34 -u, 10 -b; 1 when binlog
 * replay stops start-up). With --import-beanstalkd it imports into -b and
 * exits instead (docs/import-from-beanstalkd.md); with --check-config it
 * checks what start-up checks before it touches the binlog or a socket,
 * prints the configuration and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "node/cluster/tls.h"
#include "node/cluster/failover.h"
#include "node/base/flags.h"
#include "node/binlog/import.h"
#include "node/base/log.h"
#include "node/process.h"
#include "node/server.h"
#include "replication/report.h"

static bq_server_t server;

/* replication/'s lines go to this process's log (replication/report.h). */
static bq_log_level_t log_level_of(bq_report_level_t level)
{
    switch (level) {
    case BQ_REPORT_ERROR:
        return BQ_LOG_ERROR;
    case BQ_REPORT_WARN:
        return BQ_LOG_WARN;
    case BQ_REPORT_INFO:
        return BQ_LOG_INFO;
    case BQ_REPORT_DEBUG:
        break;
    }
    return BQ_LOG_DEBUG;
}

static bool report_enabled(bq_report_level_t level)
{
    return bq_log_enabled(log_level_of(level));
}

static void report_write(bq_report_level_t level, const char *msg, unsigned long suppressed,
                         const char *kv, va_list ap) __attribute__((format(printf, 4, 0)));

static void report_write(bq_report_level_t level, const char *msg, unsigned long suppressed,
                         const char *kv, va_list ap)
{
    bq_log_write(log_level_of(level), msg, suppressed, kv, ap);
}

static const bq_report_sink_t report_sink = {.enabled = report_enabled, .write = report_write};

/* Handles -h, -v and usage errors; returns only for BQ_FLAGS_RUN. */
static void handle_action(const bq_flags_t *f, const char *prog)
{
    switch (f->action) {
    case BQ_FLAGS_RUN:
    case BQ_FLAGS_IMPORT:
    case BQ_FLAGS_CHECK:
        return;
    case BQ_FLAGS_HELP:
        bq_flags_usage(stdout, prog);
        exit(0);
    case BQ_FLAGS_VERSION:
        printf("beanstalkd-ha %s\n", BQ_VERSION);
        exit(0);
    case BQ_FLAGS_USAGE:
        fprintf(stderr, "%s: %s\n", prog, f->error);
        bq_flags_usage(stderr, prog);
        exit(5);
    }
}

static void log_flag_warnings(const bq_flags_t *f)
{
    for (unsigned bit = 1; bit && bit <= f->warnings; bit <<= 1)
        if (f->warnings & bit)
            bq_logm(BQ_LOG_WARN, bq_flags_warning(bit));
}

static int init_exit_code(int err)
{
    switch (err) {
    case BQ_SERVER_ELISTEN:
        return 111;
    case BQ_SERVER_ESYSINFO:
        return 50;
    default:
        return 1;
    }
}

/* -u: becomes user (if given); 0 or an exit code. */
static int become_user(const char *user)
{
    int r = user ? bq_process_become_user(user) : 0;
    return r == 0 ? 0 : r == BQ_PROCESS_ELOOKUP ? 32 : r == BQ_PROCESS_ENOUSER ? 33 : 34;
}

/* -u and -b, after the socket is bound; returns 0 or an exit code. */
static int drop_privileges_and_open_binlog(const bq_flags_t *f)
{
    int r = become_user(f->user);
    if (r != 0)
        return r;
    if (f->binlog_dir && bq_process_check_dir(f->binlog_dir) != 0)
        return 10;
    r = bq_server_start_binlog(&server, f);
    if (r == BQ_SERVER_EREPLAY)
        return 1;
    return r == 0 ? 0 : 10;
}

/* --import-beanstalkd SRC_DIR -b DIR: 0 once the jobs are in DIR's binlog
 * and fsynced, 10 when DIR cannot be used, 1 on any other failure. */
static int run_import(const bq_flags_t *f)
{
    bq_binlog_config_t cfg = {
        .dir = f->binlog_dir,
        .seg_size = f->binlog_size,
        .sync = BQ_BINLOG_SYNC_ALWAYS,
        .skip_corrupt = f->skip_corrupt,
    };
    bq_import_options_t opt = {.accept_prefix = f->import_accept_prefix};
    /* As the server will run: the files it writes must be that user's. */
    int r = become_user(f->user);
    if (r != 0)
        return r;
    if (bq_process_check_dir(f->binlog_dir) != 0)
        return 10;
    r = bq_import_beanstalkd(f->import_dir, &cfg, &opt);
    return r == 0 ? 0 : r == BQ_IMPORT_EDST ? 10 : 1;
}

/* The TLS files load and match, as the cluster start-up needs them; 0 or -1. */
static int check_tls(const bq_flags_t *f)
{
    SSL_CTX *server_ctx, *client_ctx;
    if (bq_cluster_tls_new(f, &server_ctx, &client_ctx) != 0)
        return -1;
    SSL_CTX_free(server_ctx);
    SSL_CTX_free(client_ctx);
    return 0;
}

/* --check-config: what start-up would refuse after the flags (the TLS files,
 * the admin API's address) exits 1 as it does there; else the configuration
 * goes to stdout as one logfmt line and the exit status is 0. */
static int check_config(const bq_flags_t *f)
{
    char line[8192];
    bq_flags_admin_scope_t admin = bq_flags_admin_scope(f);

    if (f->role != BQ_ROLE_SINGLE && !f->repl_plaintext && check_tls(f) != 0)
        return 1;
    if (admin == BQ_FLAGS_ADMIN_NOT_NUMERIC ||
        (admin == BQ_FLAGS_ADMIN_REMOTE && f->repl_plaintext)) {
        bq_log(BQ_LOG_ERROR,
               admin == BQ_FLAGS_ADMIN_NOT_NUMERIC
                   ? "the admin API needs a numeric address (IPv4 or [IPv6])"
                   : "the admin API needs TLS off loopback (--tls-cert/--tls-key/--tls-ca)",
               "addr=%s", f->admin_listen);
        return 1;
    }
    if (bq_flags_describe(f, line, sizeof line) < 0) {
        bq_logm(BQ_LOG_ERROR, "the configuration is too long to print");
        return 1;
    }
    printf("%s\n", line);
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    bq_flags_t f;
    const char *prog = argc > 0 ? argv[0] : "beanstalkd-ha";

    bq_flags_parse(&f, argc > 0 ? argc - 1 : 0, argc > 0 ? argv + 1 : argv);
    handle_action(&f, prog);
    bq_log_set_verbosity(f.verbose);
    bq_report_set_sink(&report_sink);
    log_flag_warnings(&f);
    if (f.action == BQ_FLAGS_IMPORT)
        return run_import(&f);
    if (f.action == BQ_FLAGS_CHECK)
        return check_config(&f);
    bq_log(BQ_LOG_INFO, "starting", "version=%s pid=%ld", BQ_VERSION, (long)getpid());
    bq_process_raise_nofile();
    if (bq_process_ignore_sigpipe() != 0)
        return 111;
    bq_failover_plan_t plan = {.role = f.role};
    if (f.role != BQ_ROLE_SINGLE) {
        if (bq_failover_plan(&f, &plan) != 0)
            return 1;
        bq_log(BQ_LOG_INFO, "cluster start", "role=%s why=\"%s\"",
               plan.role == BQ_ROLE_PRIMARY   ? "primary"
               : plan.role == BQ_ROLE_WITNESS ? "witness"
                                              : "standby",
               plan.why);
        f.role = plan.role;
    }
    int r = bq_server_init(&server, &f);
    server.min_epoch = f.role == BQ_ROLE_PRIMARY ? plan.min_epoch : 0;
    if (r == 0)
        r = drop_privileges_and_open_binlog(&f);
    else
        r = init_exit_code(r);
    if (r == 0 && bq_server_start_cluster(&server, &f, &plan, argv) != 0)
        r = 1;
    if (r == 0)
        bq_server_run(&server);
    bq_server_free(&server);
    if (r == 0)
        bq_logm(BQ_LOG_INFO, "stopped");
    return r;
}
