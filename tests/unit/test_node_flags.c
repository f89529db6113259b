/* Unit tests of node/base/flags.c, the command-line parser. The first group
 * ports every optparse case of beanstalkd's testutil.c (reference report
 * section 4.3); the rest cover the error messages and exit actions of
 * util.c, the sscanf("%zu%c") size rules and the long options; the last
 * group covers the cluster options and their checks, then --check-config
 * and the configuration line it prints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "node/base/flags.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static bq_flags_t f;

static bq_flags_action_t parse(int argc, char *const *argv)
{
    memset(&f, 0x5a, sizeof f); /* every field must be set by the parser */
    return bq_flags_parse(&f, argc, argv);
}

static void opt_none(void **state)
{
    (void)state;
    assert_int_equal(parse(0, NULL), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "11300");
    assert_null(f.addr);
    assert_false(f.addr_given);
    assert_false(f.port_given);
    assert_int_equal(f.max_job_size, 65535);
    assert_int_equal(f.binlog_size, 10485760);
    assert_true(f.want_sync);
    assert_int_equal(f.fsync_ms, 50);
    assert_null(f.user);
    assert_null(f.binlog_dir);
    assert_null(f.import_dir);
    assert_false(f.import_accept_prefix);
    assert_false(f.skip_corrupt);
    assert_int_equal(f.verbose, 0);
    assert_int_equal(f.warnings, 0);
    assert_int_equal(f.role, BQ_ROLE_SINGLE);
    assert_null(f.node_id);
    assert_null(f.cluster_id);
    assert_int_equal(f.npeers, 0);
    assert_null(f.repl_listen);
    assert_null(f.tls_cert);
    assert_null(f.tls_key);
    assert_null(f.tls_ca);
    assert_false(f.repl_plaintext);
    assert_int_equal(f.sync_standbys, -1);
    assert_true(f.sync_fallback_async);
    assert_int_equal(f.sync_timeout_ms, 2000);
    assert_int_equal(f.repl_timeout_ms, 5000);
    assert_int_equal(f.status_interval_ms, 10000);
    assert_false(f.check_config);
}

static void optminus(void **state)
{
    char *argv[] = {"-"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown argument: -");
}

static void optp(void **state)
{
    char *argv[] = {"-p1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "1234");
    assert_true(f.port_given);
}

static void optl(void **state)
{
    char *argv[] = {"-llocalhost"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.addr, "localhost");
    assert_true(f.addr_given);
}

static void optlseparate(void **state)
{
    char *argv[] = {"-l", "localhost"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.addr, "localhost");
}

static void optz(void **state)
{
    char *argv[] = {"-z1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.max_job_size, 1234);
    assert_int_equal(f.warnings, 0);
}

static void optz_more_than_max(void **state)
{
    char *argv[] = {"-z1073741825"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.max_job_size, 1073741824);
    assert_int_equal(f.warnings, BQ_FLAGS_WARN_Z_CLAMPED);
    assert_string_equal(bq_flags_warning(BQ_FLAGS_WARN_Z_CLAMPED),
                        "maximum job size was set to 1073741824");
}

static void opts(void **state)
{
    char *argv[] = {"-s1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.binlog_size, 1234);
}

static void optf(void **state)
{
    char *argv[] = {"-f1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.fsync_ms, 1234);
    assert_true(f.want_sync);
}

static void optF(void **state)
{
    char *argv[] = {"-f1234", "-F"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_false(f.want_sync);
}

static void optF_then_f(void **state)
{
    char *argv[] = {"-F", "-f", "0"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_true(f.want_sync);
    assert_int_equal(f.fsync_ms, 0);
}

static void optu(void **state)
{
    char *argv[] = {"-ukr"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.user, "kr");
}

static void optb(void **state)
{
    char *argv[] = {"-bfoo"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.binlog_dir, "foo");
}

static void optV(void **state)
{
    char *argv[] = {"-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 1);
}

static void optV_V(void **state)
{
    char *argv[] = {"-V", "-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 2);
}

static void optVVV(void **state)
{
    char *argv[] = {"-VVV"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 3);
}

static void optVFVu(void **state)
{
    char *argv[] = {"-VFVukr"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 2);
    assert_false(f.want_sync);
    assert_string_equal(f.user, "kr");
}

static void unknown_flag(void **state)
{
    char *argv[] = {"-V", "-x", "-p"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown flag: -x");
}

static void unknown_flag_in_group(void **state)
{
    char *argv[] = {"-VqV"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown flag: -q");
}

static void missing_argument(void **state)
{
    char *argv[] = {"-V", "-p"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: -p");
}

static void missing_argument_in_group(void **state)
{
    char *argv[] = {"-Vl"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: -l");
}

static void unknown_argument(void **state)
{
    char *argv[] = {"-V", "foo", "-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown argument: foo");
}

static void separate_argument_may_look_like_a_flag(void **state)
{
    char *argv[] = {"-p", "-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "-V");
    assert_int_equal(f.verbose, 0);
}

static void invalid_sizes(void **state)
{
    const char *bad[] = {"12k", "", "x", "12 ", "1.5", "0x10"};
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"-z", (char *)bad[i]};
        char want[64];
        assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
        snprintf(want, sizeof want, "invalid size: %s", bad[i]);
        assert_string_equal(f.error, want);
    }
}

static void sizes_read_like_sscanf(void **state)
{
    char *argv[] = {"-s", " 42", "-z", "+7"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.binlog_size, 42);
    assert_int_equal(f.max_job_size, 7);
}

static void help_and_version(void **state)
{
    char *h[] = {"-V", "-h", "-x"};
    char *v[] = {"-Vv"};
    char *late[] = {"-x", "-h"};
    (void)state;
    assert_int_equal(parse(ARGC(h), h), BQ_FLAGS_HELP);
    assert_int_equal(parse(ARGC(v), v), BQ_FLAGS_VERSION);
    assert_int_equal(parse(ARGC(late), late), BQ_FLAGS_USAGE);
}

static void removed_flags_warn(void **state)
{
    char *argv[] = {"-c", "-n", "-c"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.warnings, BQ_FLAGS_WARN_C_REMOVED | BQ_FLAGS_WARN_N_REMOVED);
    assert_string_equal(bq_flags_warning(BQ_FLAGS_WARN_C_REMOVED),
                        "-c flag was removed. binlog is always compacted.");
}

static void long_options(void **state)
{
    char *argv[] = {"--port=1234", "--listen",          "::1",    "--verbose",
                    "--no-fsync",  "--max-job-size=99", "--user", "kr"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "1234");
    assert_string_equal(f.addr, "::1");
    assert_int_equal(f.verbose, 1);
    assert_false(f.want_sync);
    assert_int_equal(f.max_job_size, 99);
    assert_string_equal(f.user, "kr");
}

static void long_option_errors(void **state)
{
    char *unknown[] = {"--roles=primary"};
    char *noarg[] = {"--help=yes"};
    char *missing[] = {"--port"};
    char *prefix[] = {"--hel"};
    char *bare[] = {"--"};
    char *badsize[] = {"--binlog-size=1M"};
    char *help[] = {"--help"};
    char *version[] = {"--version"};
    (void)state;
    assert_int_equal(parse(ARGC(unknown), unknown), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown flag: --roles=primary");
    assert_int_equal(parse(ARGC(noarg), noarg), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag does not take an argument: --help=yes");
    assert_int_equal(parse(ARGC(missing), missing), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: --port");
    assert_int_equal(parse(ARGC(prefix), prefix), BQ_FLAGS_USAGE);
    assert_int_equal(parse(ARGC(bare), bare), BQ_FLAGS_USAGE);
    assert_int_equal(parse(ARGC(badsize), badsize), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "invalid size: 1M");
    assert_int_equal(parse(ARGC(help), help), BQ_FLAGS_HELP);
    assert_int_equal(parse(ARGC(version), version), BQ_FLAGS_VERSION);
}

static void long_only_switch(void **state)
{
    char *argv[] = {"-b", "/tmp", "--binlog-skip-corrupt", "-f0"};
    char *witharg[] = {"--binlog-skip-corrupt=yes"};
    char *asshort[] = {"-binlog-skip-corrupt"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_true(f.skip_corrupt);
    assert_string_equal(f.binlog_dir, "/tmp");
    assert_int_equal(f.fsync_ms, 0);
    assert_int_equal(parse(ARGC(witharg), witharg), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag does not take an argument: --binlog-skip-corrupt=yes");
    /* A short flag group is not a way in: -b takes "inlog-skip-corrupt". */
    assert_int_equal(parse(ARGC(asshort), asshort), BQ_FLAGS_RUN);
    assert_false(f.skip_corrupt);
}

static void import_options(void **state)
{
    char *argv[] = {"--import-beanstalkd", "/src", "-b", "/dst", "--import-accept-prefix"};
    char *eq[] = {"-b/dst", "--import-beanstalkd=/src dir"};
    char *no_b[] = {"--import-beanstalkd", "/src"};
    char *missing[] = {"-b", "/dst", "--import-beanstalkd"};
    char *prefix_alone[] = {"-b", "/dst", "--import-accept-prefix"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_IMPORT);
    assert_string_equal(f.import_dir, "/src");
    assert_string_equal(f.binlog_dir, "/dst");
    assert_true(f.import_accept_prefix);
    assert_int_equal(parse(ARGC(eq), eq), BQ_FLAGS_IMPORT);
    assert_string_equal(f.import_dir, "/src dir");
    assert_false(f.import_accept_prefix);
    assert_int_equal(parse(ARGC(no_b), no_b), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires -b DIR (the destination): --import-beanstalkd");
    assert_int_equal(parse(ARGC(missing), missing), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: --import-beanstalkd");
    assert_int_equal(parse(ARGC(prefix_alone), prefix_alone), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires --import-beanstalkd: --import-accept-prefix");
}

/* Every cluster option with a value that is valid alone. */
static const struct {
    const char *name;
    const char *value; /* NULL for a switch */
} cluster_opts[] = {
    {"--role", "primary"},         {"--node-id", "n1"},          {"--cluster-id", "c"},
    {"--peer", "n1=h:1"},          {"--repl-listen", "h:1"},     {"--tls-cert", "c.pem"},
    {"--tls-key", "k.pem"},        {"--tls-ca", "ca.pem"},       {"--repl-plaintext", NULL},
    {"--sync-standbys", "0"},      {"--sync-fallback", "async"}, {"--sync-timeout", "1"},
    {"--repl-timeout", "100"},     {"--status-interval", "0"},   {"--failover", "manual"},
    {"--failover-timeout", "100"},
};

/* A complete primary: n1 of {n1, n2}, with a binlog and without TLS. */
static const char *const base[] = {"--role=primary", "--peer", "n1=h1:7001", "--peer",
                                   "n2=h2:7002",     "-b",     "/d",         "--repl-plaintext",
                                   "--node-id",      "n1"};

/* Parses base followed by extra[0..n). */
static bq_flags_action_t parse_base(size_t n, const char *const *extra)
{
    static char *argv[64];
    size_t argc = 0;

    for (size_t k = 0; k < sizeof base / sizeof base[0]; k++)
        argv[argc++] = (char *)base[k];
    for (size_t k = 0; k < n; k++)
        argv[argc++] = (char *)extra[k];
    return parse((int)argc, argv);
}

/* Parses base + extra and expects the usage error want. */
static void base_fails(size_t n, const char *const *extra, const char *want)
{
    assert_int_equal(parse_base(n, extra), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, want);
}

/* Parses argv and expects the usage error want. */
static void fails(int argc, char *const *argv, const char *want)
{
    assert_int_equal(parse(argc, argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, want);
}

static void cluster_minimal_gets_defaults(void **state)
{
    (void)state;
    assert_int_equal(parse_base(0, NULL), BQ_FLAGS_RUN);
    assert_int_equal(f.role, BQ_ROLE_PRIMARY);
    assert_string_equal(f.node_id, "n1");
    assert_string_equal(f.cluster_id, "beanstalkd-ha");
    assert_int_equal(f.npeers, 2);
    assert_string_equal(f.peers[0].name, "n1");
    assert_string_equal(f.peers[0].host, "h1");
    assert_string_equal(f.peers[0].port, "7001");
    assert_string_equal(f.peers[1].name, "n2");
    assert_null(f.repl_listen);
    assert_null(f.tls_cert);
    assert_true(f.repl_plaintext);
    assert_int_equal(f.sync_standbys, 1); /* -1 resolved: there is another node */
    assert_true(f.sync_fallback_async);
    assert_int_equal(f.sync_timeout_ms, 2000);
    assert_int_equal(f.repl_timeout_ms, 5000);
    assert_int_equal(f.status_interval_ms, 10000);
    assert_string_equal(f.binlog_dir, "/d");
}

/* The values set by both cluster_options_* tests. */
static void assert_every_option_set(void)
{
    assert_int_equal(f.role, BQ_ROLE_STANDBY);
    assert_string_equal(f.node_id, "n2");
    assert_string_equal(f.cluster_id, "prod.q-1_x");
    assert_int_equal(f.npeers, 3);
    assert_string_equal(f.peers[0].name, "n1");
    assert_string_equal(f.peers[0].host, "db1.example.com");
    assert_string_equal(f.peers[0].port, "7001");
    assert_string_equal(f.peers[1].name, "n2");
    assert_string_equal(f.peers[1].host, "10.0.0.2");
    assert_string_equal(f.peers[1].port, "7002");
    assert_string_equal(f.peers[2].name, "n3");
    assert_string_equal(f.peers[2].host, "fd00::3");
    assert_string_equal(f.peers[2].port, "7003");
    assert_string_equal(f.repl_listen, "[::]:7002");
    assert_string_equal(f.tls_cert, "/c.pem");
    assert_string_equal(f.tls_key, "/k.pem");
    assert_string_equal(f.tls_ca, "/ca.pem");
    assert_false(f.repl_plaintext);
    assert_int_equal(f.sync_standbys, 2);
    assert_true(f.sync_fallback_async);
    assert_int_equal(f.sync_timeout_ms, 0);
    assert_int_equal(f.repl_timeout_ms, 250);
    assert_int_equal(f.status_interval_ms, 0);
}

/* Every cluster option, in the --name=value form. */
static const char *const every_option[] = {
    "--role=standby",          "--node-id=n2",
    "--cluster-id=prod.q-1_x", "--peer=n1=db1.example.com:7001",
    "--peer=n2=10.0.0.2:7002", "--peer=n3=[fd00::3]:7003",
    "--repl-listen=[::]:7002", "--tls-cert=/c.pem",
    "--tls-key=/k.pem",        "--tls-ca=/ca.pem",
    "--sync-standbys=2",       "--sync-fallback=async",
    "--sync-timeout=0",        "--repl-timeout=250",
    "--status-interval=0",     "-b/d"};

static void cluster_options_with_equals(void **state)
{
    (void)state;
    assert_int_equal(parse(ARGC(every_option), (char *const *)every_option), BQ_FLAGS_RUN);
    assert_every_option_set();
}

/* The same options as --name value: each "--name=value" split at its first "=". */
static void cluster_options_separate(void **state)
{
    char copies[ARGC(every_option)][64];
    char *argv[2 * ARGC(every_option)];
    int argc = 0;
    (void)state;
    for (int k = 0; k < ARGC(every_option); k++) {
        char *eq;
        snprintf(copies[k], sizeof copies[k], "%s", every_option[k]);
        eq = strchr(copies[k], '=');
        argv[argc++] = copies[k];
        if (copies[k][1] == '-' && eq) {
            *eq = '\0';
            argv[argc++] = eq + 1;
        }
    }
    assert_int_equal(argc, 2 * ARGC(every_option) - 1);
    assert_string_equal(argv[7], "n1=db1.example.com:7001");
    assert_int_equal(parse(argc, argv), BQ_FLAGS_RUN);
    assert_every_option_set();
}

static void cluster_option_missing_argument(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cluster_opts / sizeof cluster_opts[0]; k++) {
        char *argv[] = {(char *)cluster_opts[k].name};
        char want[64];
        if (!cluster_opts[k].value) {
            char witharg[] = "--repl-plaintext=yes";
            char *eq[] = {witharg};
            fails(ARGC(eq), eq, "flag does not take an argument: --repl-plaintext=yes");
            continue;
        }
        snprintf(want, sizeof want, "flag requires an argument: %s", cluster_opts[k].name);
        fails(ARGC(argv), argv, want);
    }
}

static void cluster_option_without_role(void **state)
{
    (void)state;
    for (size_t k = 1; k < sizeof cluster_opts / sizeof cluster_opts[0]; k++) {
        char *argv[] = {"-b", "/d", (char *)cluster_opts[k].name, (char *)cluster_opts[k].value};
        char want[64];
        snprintf(want, sizeof want, "flag requires --role: %s", cluster_opts[k].name);
        fails(cluster_opts[k].value ? 4 : 3, argv, want);
    }
    /* The admin API serves a single node too. */
    char *admin[] = {"-b", "/d", "--admin-listen", "11380"};
    assert_int_equal(parse(ARGC(admin), admin), BQ_FLAGS_RUN);
    assert_int_equal(f.role, BQ_ROLE_SINGLE);
    assert_string_equal(f.admin_listen, "127.0.0.1:11380");
}

static void role_values(void **state)
{
    const char *primary[] = {"--role", "standby", "--role", "primary"};
    char *bad[] = {"--role=leader"};
    char *empty[] = {"--role="};
    (void)state;
    assert_int_equal(parse_base(ARGC(primary), primary), BQ_FLAGS_RUN);
    assert_int_equal(f.role, BQ_ROLE_PRIMARY); /* the last one counts */
    fails(ARGC(bad), bad, "invalid --role (want primary, standby or witness): leader");
    fails(ARGC(empty), empty, "invalid --role (want primary, standby or witness): ");
}

static void names_checked(void **state)
{
    static const char *const bad[] = {
        "",         "a/b",
        "a b",      "n1=x",
        "\xc3\xa9", "a123456789b123456789c123456789d123456789e123456789f1234567890123"}; /* 64 */
    const char *longest[] = {"--cluster-id",
                             "a123456789b123456789c123456789d123456789e123456789f123456789012"};
    (void)state;
    assert_int_equal(strlen(longest[1]), 63);
    assert_int_equal(strlen(bad[5]), 64);
    assert_int_equal(parse_base(ARGC(longest), longest), BQ_FLAGS_RUN);
    assert_string_equal(f.cluster_id, longest[1]);
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *node[] = {"--node-id", bad[k]};
        const char *cluster[] = {"--cluster-id", bad[k]};
        char want[160];
        snprintf(want, sizeof want, "invalid --node-id (want 1 to 63 of A-Z a-z 0-9 . _ -): %s",
                 bad[k]);
        base_fails(ARGC(node), node, want);
        snprintf(want, sizeof want, "invalid --cluster-id (want 1 to 63 of A-Z a-z 0-9 . _ -): %s",
                 bad[k]);
        base_fails(ARGC(cluster), cluster, want);
    }
}

#define BAD_HOST "bad host: want a DNS name, an IPv4 address or [IPv6]"
#define BAD_PORT "bad port: want 1..65535"
#define BAD_NAME "bad NAME: want 1 to 63 of A-Z a-z 0-9 . _ -"
#define BAD_V6 "want HOST:PORT, an IPv6 HOST in brackets"

static void peer_addresses(void **state)
{
    const char *extra[] = {"--peer", "v6=[::1]:1",           "--peer", "v4=192.168.1.20:65535",
                           "--peer", "z=[fe80::a:b:c]:0080", "--peer", "dns=a-b.c_d-e.local:9"};
    (void)state;
    assert_int_equal(parse_base(ARGC(extra) - 2, extra), BQ_FLAGS_RUN);
    assert_int_equal(f.npeers, 5);
    assert_string_equal(f.peers[2].name, "v6");
    assert_string_equal(f.peers[2].host, "::1");
    assert_string_equal(f.peers[2].port, "1");
    assert_string_equal(f.peers[3].host, "192.168.1.20");
    assert_string_equal(f.peers[3].port, "65535");
    assert_string_equal(f.peers[4].host, "fe80::a:b:c");
    assert_string_equal(f.peers[4].port, "80"); /* plain decimal */
    /* An underscore is no part of a host name. */
    base_fails(2, extra + 6, "invalid --peer (" BAD_HOST "): dns=a-b.c_d-e.local:9");
}

static void peer_bad(void **state)
{
    static const struct {
        const char *arg, *why;
    } cases[] = {
        {"n3", "want NAME=HOST:PORT"},
        {"n3:h:1", "want NAME=HOST:PORT"},
        {"=h:1", BAD_NAME},
        {"a b=h:1", BAD_NAME},
        {"a123456789b123456789c123456789d123456789e123456789f1234567890123=h:1", BAD_NAME},
        {"n3=h", "want HOST:PORT"},
        {"n3=h:0", BAD_PORT},
        {"n3=h:65536", BAD_PORT},
        {"n3=h:", BAD_PORT},
        {"n3=h:x", BAD_PORT},
        {"n3=h:+80", BAD_PORT},
        {"n3=h:-1", BAD_PORT},
        {"n3=h:99999999999999999999999", BAD_PORT},
        {"n3=:80", BAD_HOST},
        {"n3=-h:80", BAD_HOST},
        {"n3=h/x:80", BAD_HOST},
        {"n3=999.1.1.1:80", BAD_HOST},
        {"n3=1.2.3:80", BAD_HOST},
        {"n3=::1:80", BAD_HOST},
        {"n3=[::1]", BAD_V6},
        {"n3=[::1:80", BAD_V6},
        {"n3=[::1]x:80", BAD_V6},
        {"n3=[]:80", BAD_HOST},
        {"n3=[1.2.3.4]:80", BAD_HOST},
        {"n3=[::g]:80", BAD_HOST},
    };
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *extra[] = {"--peer", cases[k].arg};
        char want[200];
        snprintf(want, sizeof want, "invalid --peer (%s): %s", cases[k].why, cases[k].arg);
        base_fails(ARGC(extra), extra, want);
    }
}

/* Writes "n3=" HOST ":1" into buf, HOST being hlen letters 'a'. */
static void long_host_peer(char *buf, size_t hlen)
{
    memcpy(buf, "n3=", 3);
    memset(buf + 3, 'a', hlen);
    memcpy(buf + 3 + hlen, ":1", 3);
}

static void peer_host_too_long(void **state)
{
    char arg[320];
    const char *extra[] = {"--peer", arg};
    (void)state;
    long_host_peer(arg, 253); /* the longest DNS name */
    assert_int_equal(parse_base(ARGC(extra), extra), BQ_FLAGS_RUN);
    assert_int_equal(strlen(f.peers[2].host), 253);
    long_host_peer(arg, 254); /* fits the buffer, but is no DNS name */
    assert_int_equal(parse_base(ARGC(extra), extra), BQ_FLAGS_USAGE);
    assert_non_null(strstr(f.error, BAD_HOST));
    long_host_peer(arg, 300);
    assert_int_equal(parse_base(ARGC(extra), extra), BQ_FLAGS_USAGE);
    assert_memory_equal(f.error, "invalid --peer (host too long): n3=aaa", 38);
}

static void peer_at_most_max(void **state)
{
    char args[BQ_FLAGS_MAX_PEERS + 1][32];
    const char *extra[2 * (BQ_FLAGS_MAX_PEERS + 1)];
    size_t n = 0;
    (void)state;
    /* base gives 2 peers: add up to BQ_FLAGS_MAX_PEERS, then one more. */
    for (int k = 3; k <= BQ_FLAGS_MAX_PEERS + 1; k++) {
        snprintf(args[k - 3], sizeof args[0], "n%d=h:%d", k, 7000 + k);
        extra[n++] = "--peer";
        extra[n++] = args[k - 3];
    }
    assert_int_equal(parse_base(n - 2, extra), BQ_FLAGS_RUN);
    assert_int_equal(f.npeers, BQ_FLAGS_MAX_PEERS);
    assert_string_equal(f.peers[BQ_FLAGS_MAX_PEERS - 1].port, "7008");
    base_fails(n, extra, "invalid --peer (too many: at most 8): n9=h:7009");
}

static void peer_duplicate_name(void **state)
{
    const char *extra[] = {"--peer", "n2=other:1"};
    (void)state;
    base_fails(ARGC(extra), extra, "invalid --peer (duplicate NAME): n2=other:1");
}

/* --witness names a peer that only votes: marked on that peer, not counted
 * among the standbys --sync-standbys may ask for; it must be a peer, and a
 * data node cannot name itself; a witness node marks itself. */
static void witness_declared(void **state)
{
    (void)state;
    const char *w3[] = {"--peer", "n3=h3:7003", "--witness", "n3"};
    const char *w3_two[] = {"--peer", "n3=h3:7003", "--witness=n3", "--sync-standbys", "2"};
    const char *stranger[] = {"--peer", "n3=h3:7003", "--witness", "n9"};
    const char *self[] = {"--peer", "n3=h3:7003", "--witness", "n1"};
    const char *bad[] = {"--witness", "n/3"};
    assert_int_equal(parse_base(ARGC(w3), w3), BQ_FLAGS_RUN);
    assert_false(f.peers[0].witness);
    assert_false(f.peers[1].witness);
    assert_true(f.peers[2].witness);
    assert_int_equal(f.sync_standbys, 1);
    base_fails(ARGC(w3_two), w3_two, "invalid --sync-standbys (at most 1 with 3 peers): 2");
    base_fails(ARGC(stranger), stranger, "--witness is not one of the --peer names: n9");
    base_fails(ARGC(self), self, "--witness names this node, which is not --role=witness: n1");
    base_fails(ARGC(bad), bad,
               "invalid --witness (bad NAME: want 1 to 63 of A-Z a-z 0-9 . _ -): n/3");
    char *witness[] = {"--role=witness",   "--failover=auto", "--peer",     "n1=h1:7001", "--peer",
                       "n2=h2:7002",       "--peer",          "n3=h3:7003", "-b",         "/d",
                       "--repl-plaintext", "--node-id",       "n3"};
    assert_int_equal(parse(ARGC(witness), witness), BQ_FLAGS_RUN);
    assert_true(f.peers[2].witness);
    assert_false(f.peers[0].witness);
}

static void repl_listen_checked(void **state)
{
    const char *ok[] = {"--repl-listen", "0.0.0.0:7100"};
    const char *v6[] = {"--repl-listen=[::1]:7100"};
    const char *noport[] = {"--repl-listen", "h"};
    const char *badport[] = {"--repl-listen", "[::1]:0"};
    (void)state;
    assert_int_equal(parse_base(ARGC(ok), ok), BQ_FLAGS_RUN);
    assert_string_equal(f.repl_listen, "0.0.0.0:7100");
    assert_int_equal(parse_base(ARGC(v6), v6), BQ_FLAGS_RUN);
    assert_string_equal(f.repl_listen, "[::1]:7100");
    base_fails(ARGC(noport), noport, "invalid --repl-listen (want HOST:PORT): h");
    base_fails(ARGC(badport), badport, "invalid --repl-listen (bad port: want 1..65535): [::1]:0");
}

static void numbers_checked(void **state)
{
    static const char *const opts[] = {"--sync-timeout", "--repl-timeout", "--status-interval"};
    static const char *const bad[] = {"", "-1", "+5", " 5", "1.5", "5ms", "2147483648"};
    const char *limits[] = {"--sync-timeout=2147483647", "--repl-timeout=100",
                            "--status-interval=1", "--sync-fallback=refuse"};
    const char *fallback[] = {"--sync-fallback", "never"};
    const char *short_timeout[] = {"--repl-timeout", "99"};
    (void)state;
    assert_int_equal(parse_base(ARGC(limits), limits), BQ_FLAGS_RUN);
    assert_int_equal(f.sync_timeout_ms, 2147483647);
    assert_int_equal(f.repl_timeout_ms, 100);
    assert_int_equal(f.status_interval_ms, 1);
    assert_false(f.sync_fallback_async);
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            const char *extra[] = {opts[o], bad[k]};
            char want[128];
            snprintf(want, sizeof want, "invalid %s (want milliseconds, %d..2147483647): %s",
                     opts[o], o == 1 ? 100 : 0, bad[k]);
            base_fails(ARGC(extra), extra, want);
        }
    }
    base_fails(ARGC(short_timeout), short_timeout,
               "invalid --repl-timeout (want milliseconds, 100..2147483647): 99");
    base_fails(ARGC(fallback), fallback, "invalid --sync-fallback (want refuse or async): never");
}

static void sync_standbys_range(void **state)
{
    const char *zero[] = {"--sync-standbys", "0"};
    const char *two[] = {"--peer", "n3=h3:7003", "--sync-standbys=2"};
    const char *three[] = {"--peer", "n3=h3:7003", "--sync-standbys=3"};
    const char *minus[] = {"--sync-standbys", "-1"};
    const char *word[] = {"--sync-standbys", "one"};
    const char *huge[] = {"--sync-standbys", "2147483647"};
    (void)state;
    assert_int_equal(parse_base(ARGC(zero), zero), BQ_FLAGS_RUN);
    assert_int_equal(f.sync_standbys, 0);
    assert_int_equal(parse_base(ARGC(two), two), BQ_FLAGS_RUN);
    assert_int_equal(f.sync_standbys, 2);
    assert_int_equal(parse_base(2, two), BQ_FLAGS_RUN);
    assert_int_equal(f.sync_standbys, 1); /* the default stays 1 with 2 standbys */
    base_fails(ARGC(three), three, "invalid --sync-standbys (at most 2 with 3 peers): 3");
    base_fails(ARGC(huge), huge, "invalid --sync-standbys (at most 1 with 2 peers): 2147483647");
    base_fails(ARGC(minus), minus, "invalid --sync-standbys (want a number >= 0): -1");
    base_fails(ARGC(word), word, "invalid --sync-standbys (want a number >= 0): one");
}

static void failover_options(void **state)
{
    const char *three[] = {"--peer", "n3=h3:7003", "--failover=auto", "--failover-timeout", "250"};
    const char *two[] = {"--failover", "auto"};
    const char *bad[] = {"--failover", "sometimes"};
    const char *fast[] = {"--failover-timeout", "99"};
    (void)state;
    assert_int_equal(parse_base(0, three), BQ_FLAGS_RUN);
    assert_false(f.failover_auto);
    assert_int_equal(f.failover_timeout_ms, 1000);
    assert_int_equal(parse_base(ARGC(three), three), BQ_FLAGS_RUN);
    assert_true(f.failover_auto);
    assert_int_equal(f.failover_timeout_ms, 250);
    base_fails(ARGC(two), two,
               "flag requires 3 voters (3 --peer; with 2 nodes only manual "
               "failover is safe): --failover=auto");
    base_fails(ARGC(bad), bad, "invalid --failover (want auto or manual): sometimes");
    base_fails(ARGC(fast), fast,
               "invalid --failover-timeout (want milliseconds, 100..2147483647): 99");
}

static void admin_listen_forms(void **state)
{
    const char *port[] = {"--admin-listen", "11380"};
    const char *full[] = {"--admin-listen=0.0.0.0:8080"};
    const char *v6[] = {"--admin-listen", "[::1]:8080"};
    const char *zero[] = {"--admin-listen", "0"};
    const char *word[] = {"--admin-listen", "admin"};
    (void)state;
    assert_int_equal(parse_base(0, port), BQ_FLAGS_RUN);
    assert_null(f.admin_listen);
    assert_int_equal(parse_base(ARGC(port), port), BQ_FLAGS_RUN);
    assert_string_equal(f.admin_listen, "127.0.0.1:11380");
    assert_int_equal(parse_base(ARGC(full), full), BQ_FLAGS_RUN);
    assert_string_equal(f.admin_listen, "0.0.0.0:8080");
    assert_int_equal(parse_base(ARGC(v6), v6), BQ_FLAGS_RUN);
    assert_string_equal(f.admin_listen, "[::1]:8080");
    base_fails(ARGC(zero), zero, "invalid --admin-listen (want [HOST:]PORT): 0");
    base_fails(ARGC(word), word, "invalid --admin-listen (want [HOST:]PORT): admin");
}

static void role_requirements(void **state)
{
    char *no_node[] = {"--role=primary", "--peer", "n1=h1:1", "--peer",
                       "n2=h2:2",        "-b",     "/d",      "--repl-plaintext"};
    char *no_peer[] = {"--role=primary", "--node-id", "n1", "-b", "/d", "--repl-plaintext"};
    char *one_peer[] = {"--role=standby", "--node-id", "n1", "--peer",
                        "n1=h1:1",        "-b",        "/d", "--repl-plaintext"};
    char *stranger[] = {"--role=primary", "--node-id", "n3", "--peer", "n1=h1:1",
                        "--peer",         "n2=h2:2",   "-b", "/d",     "--repl-plaintext"};
    char *no_binlog[] = {"--role=primary", "--node-id", "n1",      "--peer",
                         "n1=h1:1",        "--peer",    "n2=h2:2", "--repl-plaintext"};
    const char *peers_2 = "flag requires at least 2 --peer (every node, this one included): --role";
    (void)state;
    fails(ARGC(no_node), no_node, "flag requires --node-id: --role");
    fails(ARGC(no_peer), no_peer, peers_2);
    fails(ARGC(one_peer), one_peer, peers_2);
    fails(ARGC(stranger), stranger, "--node-id is not one of the --peer names: n3");
    fails(ARGC(no_binlog), no_binlog,
          "flag requires -b DIR (replication streams the binlog): --role");
}

static void tls_or_plaintext(void **state)
{
    char *tls[] = {"--role=primary",
                   "--node-id",
                   "n1",
                   "--peer",
                   "n1=h1:1",
                   "--peer",
                   "n2=h2:2",
                   "-b",
                   "/d",
                   "--tls-cert",
                   "c",
                   "--tls-key",
                   "k",
                   "--tls-ca",
                   "ca"};
    const char *cert[] = {"--tls-cert", "c"};
    const char *empty[] = {"--tls-key="};
    const char *want_tls =
        "flag requires --tls-cert, --tls-key and --tls-ca, or --repl-plaintext: --role";
    (void)state;
    assert_int_equal(parse(ARGC(tls), tls), BQ_FLAGS_RUN);
    assert_string_equal(f.tls_ca, "ca");
    assert_false(f.repl_plaintext);
    /* Leave the last file out, then the last two, then all three. */
    fails(ARGC(tls) - 2, tls, want_tls);
    fails(ARGC(tls) - 4, tls, want_tls);
    fails(ARGC(tls) - 6, tls, want_tls);
    base_fails(ARGC(cert), cert,
               "flag conflicts with --tls-cert, --tls-key and --tls-ca: --repl-plaintext");
    base_fails(ARGC(empty), empty, "invalid --tls-key (want a file name): ");
}

static void import_conflicts_with_role(void **state)
{
    const char *extra[] = {"--import-beanstalkd", "/src"};
    char *peer_only[] = {"-b", "/d", "--import-beanstalkd", "/src", "--peer", "n1=h:1"};
    (void)state;
    base_fails(ARGC(extra), extra, "flag conflicts with --role: --import-beanstalkd");
    fails(ARGC(peer_only), peer_only, "flag requires --role: --peer");
}

static void check_config_action(void **state)
{
    const char *alone[] = {"--check-config"};
    const char *stranger[] = {"--check-config", "--node-id=n9"};
    char *single[] = {"--check-config", "-p", "1", "-b", "/d"};
    char *help[] = {"--check-config", "-h"};
    char *bad[] = {"--check-config", "-x"};
    char *import[] = {"--import-beanstalkd", "/src", "-b", "/dst", "--check-config"};
    char *witharg[] = {"--check-config=yes"};
    (void)state;
    assert_int_equal(parse_base(ARGC(alone), alone), BQ_FLAGS_CHECK);
    assert_true(f.check_config);
    assert_int_equal(f.role, BQ_ROLE_PRIMARY);
    assert_int_equal(parse(ARGC(single), single), BQ_FLAGS_CHECK);
    assert_string_equal(f.port, "1");
    assert_int_equal(parse(ARGC(help), help), BQ_FLAGS_HELP);
    fails(ARGC(bad), bad, "unknown flag: -x");
    fails(ARGC(import), import, "flag conflicts with --import-beanstalkd: --check-config");
    fails(ARGC(witharg), witharg, "flag does not take an argument: --check-config=yes");
    /* The cluster checks still apply. */
    base_fails(ARGC(stranger), stranger, "--node-id is not one of the --peer names: n9");
}

/* Describes what argv parses into (action CHECK) and compares with want. */
static void describes(int argc, char *const *argv, const char *want)
{
    char buf[4096];
    assert_int_equal(parse(argc, argv), BQ_FLAGS_CHECK);
    assert_int_equal(bq_flags_describe(&f, buf, sizeof buf), (int)strlen(want));
    assert_string_equal(buf, want);
}

static void describe_single(void **state)
{
    char *none[] = {"--check-config"};
    char *every[] = {"--check-config", "-l", "::1", "-p", "http", "-b",
                     "/a \"b\"",       "-F", "-u",  "kr", "-z",   "7"};
    char *unix_path[] = {"--check-config", "-l", "unix:/run/bq.sock", "-b/d", "-f0"};
    char *fsync[] = {"--check-config", "-l", "10.1.2.3", "-b/d", "-f", "20"};
    (void)state;
    describes(ARGC(none), none, "config=ok role=single listen=*:11300 max_job_size=65535");
    describes(ARGC(every), every,
              "config=ok role=single listen=[::1]:http binlog_dir=\"/a \\\"b\\\"\" fsync=never "
              "max_job_size=7 user=kr");
    describes(ARGC(unix_path), unix_path,
              "config=ok role=single listen=unix:/run/bq.sock binlog_dir=/d fsync=always "
              "max_job_size=65535");
    describes(ARGC(fsync), fsync,
              "config=ok role=single listen=10.1.2.3:11300 binlog_dir=/d fsync=20ms "
              "max_job_size=65535");
}

static void describe_cluster(void **state)
{
    char *argv[ARGC(every_option) + 3];
    char *base_admin[] = {"--role=primary",
                          "--peer",
                          "n1=h1:7001",
                          "--peer",
                          "n2=h2:7002",
                          "-b",
                          "/d",
                          "--repl-plaintext",
                          "--node-id",
                          "n1",
                          "--admin-listen",
                          "9",
                          "--check-config"};
    (void)state;
    for (int k = 0; k < ARGC(every_option); k++)
        argv[k] = (char *)every_option[k];
    argv[ARGC(every_option)] = "--check-config";
    argv[ARGC(every_option) + 1] = "--admin-listen=[::]:11380";
    argv[ARGC(every_option) + 2] = "--failover=auto";
    describes(ARGC(argv), argv,
              "config=ok role=standby node_id=n2 cluster_id=prod.q-1_x failover=auto "
              "listen=*:11300 repl_listen=[::]:7002 repl_tls=on admin_listen=[::]:11380 "
              "admin_tls=on sync_standbys=2 sync_fallback=async failover_timeout_ms=1000 "
              "peers=n1@db1.example.com:7001,n2@10.0.0.2:7002,n3@[fd00::3]:7003 "
              "binlog_dir=/d fsync=50ms max_job_size=65535");
    /* Without --repl-listen, replication listens on our own --peer address. */
    describes(ARGC(base_admin), base_admin,
              "config=ok role=primary node_id=n1 cluster_id=beanstalkd-ha failover=manual "
              "listen=*:11300 repl_listen=h1:7001 repl_tls=off admin_listen=127.0.0.1:9 "
              "admin_tls=off sync_standbys=1 sync_fallback=async failover_timeout_ms=1000 "
              "peers=n1@h1:7001,n2@h2:7002 binlog_dir=/d fsync=50ms max_job_size=65535");
    /* With the TLS flags a loopback admin API is TLS too, plus plaintext GETs. */
    char *tls_admin[] = {"--check-config",
                         "--role=primary",
                         "--peer",
                         "n1=h1:7001",
                         "--peer",
                         "n2=h2:7002",
                         "-b",
                         "/d",
                         "--node-id",
                         "n1",
                         "--tls-cert",
                         "c.pem",
                         "--tls-key",
                         "k.pem",
                         "--tls-ca",
                         "ca.pem",
                         "--admin-listen",
                         "9"};
    describes(ARGC(tls_admin), tls_admin,
              "config=ok role=primary node_id=n1 cluster_id=beanstalkd-ha failover=manual "
              "listen=*:11300 repl_listen=h1:7001 repl_tls=on admin_listen=127.0.0.1:9 "
              "admin_tls=on+plain sync_standbys=1 sync_fallback=async failover_timeout_ms=1000 "
              "peers=n1@h1:7001,n2@h2:7002 binlog_dir=/d fsync=50ms max_job_size=65535");
}

static void describe_too_small(void **state)
{
    char *argv[] = {"--check-config"};
    char buf[16];
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_CHECK);
    assert_int_equal(bq_flags_describe(&f, buf, sizeof buf), -1);
    assert_string_equal(buf, "config=ok role=");
    assert_int_equal(bq_flags_describe(&f, buf, 0), -1);
}

static void admin_scope(void **state)
{
    static const struct {
        const char *arg;
        bq_flags_admin_scope_t want;
    } cases[] = {
        {"11380", BQ_FLAGS_ADMIN_LOOPBACK},
        {"127.9.9.9:1", BQ_FLAGS_ADMIN_LOOPBACK},
        {"[::1]:1", BQ_FLAGS_ADMIN_LOOPBACK},
        {"[::ffff:127.0.0.1]:1", BQ_FLAGS_ADMIN_LOOPBACK},
        {"0.0.0.0:1", BQ_FLAGS_ADMIN_REMOTE},
        {"128.0.0.1:1", BQ_FLAGS_ADMIN_REMOTE},
        {"[::]:1", BQ_FLAGS_ADMIN_REMOTE},
        {"[::ffff:10.0.0.1]:1", BQ_FLAGS_ADMIN_REMOTE},
        {"localhost:1", BQ_FLAGS_ADMIN_NOT_NUMERIC},
    };
    (void)state;
    assert_int_equal(parse_base(0, NULL), BQ_FLAGS_RUN);
    assert_int_equal(bq_flags_admin_scope(&f), BQ_FLAGS_ADMIN_NONE);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *extra[] = {"--admin-listen", cases[k].arg};
        assert_int_equal(parse_base(ARGC(extra), extra), BQ_FLAGS_RUN);
        assert_int_equal(bq_flags_admin_scope(&f), cases[k].want);
    }
}

static void usage_mentions_every_flag(void **state)
{
    char buf[8192] = {0};
    FILE *mem = fmemopen(buf, sizeof buf - 1, "w");
    (void)state;
    assert_non_null(mem);
    bq_flags_usage(mem, "prog");
    fclose(mem);
    assert_non_null(strstr(buf, "Use: prog [OPTIONS]"));
    for (const char *p = "bfFlpuzsvVh"; *p; p++) {
        char flag[4] = {' ', '-', *p, '\0'};
        assert_non_null(strstr(buf, flag));
    }
    assert_non_null(strstr(buf, "--binlog-skip-corrupt"));
    assert_non_null(strstr(buf, "--import-beanstalkd SRC_DIR"));
    assert_non_null(strstr(buf, "--import-accept-prefix"));
    assert_non_null(strstr(buf, "--check-config"));
    assert_non_null(strstr(buf, "Cluster options"));
    for (size_t k = 0; k < sizeof cluster_opts / sizeof cluster_opts[0]; k++)
        assert_non_null(strstr(buf, cluster_opts[k].name));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(opt_none),
        cmocka_unit_test(optminus),
        cmocka_unit_test(optp),
        cmocka_unit_test(optl),
        cmocka_unit_test(optlseparate),
        cmocka_unit_test(optz),
        cmocka_unit_test(optz_more_than_max),
        cmocka_unit_test(opts),
        cmocka_unit_test(optf),
        cmocka_unit_test(optF),
        cmocka_unit_test(optF_then_f),
        cmocka_unit_test(optu),
        cmocka_unit_test(optb),
        cmocka_unit_test(optV),
        cmocka_unit_test(optV_V),
        cmocka_unit_test(optVVV),
        cmocka_unit_test(optVFVu),
        cmocka_unit_test(unknown_flag),
        cmocka_unit_test(unknown_flag_in_group),
        cmocka_unit_test(missing_argument),
        cmocka_unit_test(missing_argument_in_group),
        cmocka_unit_test(unknown_argument),
        cmocka_unit_test(separate_argument_may_look_like_a_flag),
        cmocka_unit_test(invalid_sizes),
        cmocka_unit_test(sizes_read_like_sscanf),
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(removed_flags_warn),
        cmocka_unit_test(long_options),
        cmocka_unit_test(long_option_errors),
        cmocka_unit_test(long_only_switch),
        cmocka_unit_test(import_options),
        cmocka_unit_test(cluster_minimal_gets_defaults),
        cmocka_unit_test(cluster_options_with_equals),
        cmocka_unit_test(cluster_options_separate),
        cmocka_unit_test(cluster_option_missing_argument),
        cmocka_unit_test(cluster_option_without_role),
        cmocka_unit_test(role_values),
        cmocka_unit_test(names_checked),
        cmocka_unit_test(peer_addresses),
        cmocka_unit_test(peer_bad),
        cmocka_unit_test(peer_host_too_long),
        cmocka_unit_test(peer_at_most_max),
        cmocka_unit_test(peer_duplicate_name),
        cmocka_unit_test(witness_declared),
        cmocka_unit_test(repl_listen_checked),
        cmocka_unit_test(numbers_checked),
        cmocka_unit_test(sync_standbys_range),
        cmocka_unit_test(failover_options),
        cmocka_unit_test(admin_listen_forms),
        cmocka_unit_test(role_requirements),
        cmocka_unit_test(tls_or_plaintext),
        cmocka_unit_test(import_conflicts_with_role),
        cmocka_unit_test(check_config_action),
        cmocka_unit_test(describe_single),
        cmocka_unit_test(describe_cluster),
        cmocka_unit_test(describe_too_small),
        cmocka_unit_test(admin_scope),
        cmocka_unit_test(usage_mentions_every_flag),
    };
    return cmocka_run_group_tests_name("node_flags", tests, NULL, NULL);
}
