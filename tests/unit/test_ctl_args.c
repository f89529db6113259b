/* Unit tests of beanstalkctl's argument parser (node/ctl/ctl_args.c): the
 * defaults and where the node list comes from (--nodes, then
 * $BEANSTALKCTL_NODES, then the default), how nodes become base URLs, the
 * global options before and after the command, each command's own options
 * and checks (the one node of promote, metrics and handoff, switchover's
 * --to, the node ids of certs, handoff's --timeout in seconds and
 * --dry-run), and the usage errors with their messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/ctl/ctl_args.h"

#define ARGV(...) ((char *const[]){"beanstalkctl", __VA_ARGS__})
#define ARGC(...) ((int)(sizeof ARGV(__VA_ARGS__) / sizeof(char *)))
/* Parses the words given after the program name with no environment. */
#define PARSE(a, env, ...)                                                                         \
    bq_ctl_args_parse(a, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), env, err, sizeof err)

static char err[512];

/* Parses a usage error and checks its message. */
#define EXPECT_USAGE(msg, ...)                                                                     \
    do {                                                                                           \
        bq_ctl_args_t a_;                                                                          \
        assert_int_equal(PARSE(&a_, NULL, __VA_ARGS__), -EINVAL);                                  \
        assert_string_equal(err, msg);                                                             \
        bq_ctl_args_free(&a_);                                                                     \
    } while (0)

static void status_defaults(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "status"), 0);
    assert_int_equal(a.cmd, BQ_CTL_STATUS);
    assert_int_equal(a.nnodes, 1);
    assert_string_equal(a.nodes[0], BQ_CTL_DEFAULT_NODE);
    assert_int_equal(a.timeout_ms, BQ_CTL_DEFAULT_TIMEOUT_MS);
    assert_false(a.json);
    assert_null(a.tls_cert);
    assert_null(a.target);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "", "status", "--json"), 0); /* an empty $BEANSTALKCTL_NODES */
    assert_true(a.json);
    assert_string_equal(a.nodes[0], BQ_CTL_DEFAULT_NODE);
    bq_ctl_args_free(&a);
}

static void nodes_from_env_unless_given(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, "h1:1, http://h2:2/ ,https://h3:3//", "status"), 0);
    assert_int_equal(a.nnodes, 3);
    assert_string_equal(a.nodes[0], "http://h1:1");
    assert_string_equal(a.nodes[1], "http://h2:2");
    assert_string_equal(a.nodes[2], "https://h3:3");
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1,h2:2", "--nodes", "h9:9", "status"), 0);
    assert_int_equal(a.nnodes, 1);
    assert_string_equal(a.nodes[0], "http://h9:9");
    bq_ctl_args_free(&a);
}

static void tls_makes_host_port_https(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "--nodes", "h1:1,http://h2:2", "--tls-cert", "c.pem",
                           "--tls-key=c.key", "--tls-ca", "ca.pem", "--timeout=250", "status"),
                     0);
    assert_string_equal(a.nodes[0], "https://h1:1");
    assert_string_equal(a.nodes[1], "http://h2:2"); /* an explicit scheme is kept */
    assert_string_equal(a.tls_cert, "c.pem");
    assert_string_equal(a.tls_key, "c.key");
    assert_string_equal(a.tls_ca, "ca.pem");
    assert_int_equal(a.timeout_ms, 250);
    bq_ctl_args_free(&a);
}

static void global_options_after_the_command(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "status", "--json", "--nodes", "h1:1", "--timeout", "7",
                           "--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca"),
                     0);
    assert_true(a.json);
    assert_int_equal(a.timeout_ms, 7);
    assert_string_equal(a.nodes[0], "https://h1:1"); /* --tls-cert came later: still https */
    bq_ctl_args_free(&a);
}

static void promote_targets_the_only_node_or_node(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "--nodes", "h1:1", "promote"), 0);
    assert_int_equal(a.cmd, BQ_CTL_PROMOTE);
    assert_string_equal(a.target, "http://h1:1");
    assert_false(a.force);
    bq_ctl_args_free(&a);
    assert_int_equal(
        PARSE(&a, NULL, "--nodes", "h1:1,h2:2", "promote", "--node", "h2:2", "--force"), 0);
    assert_string_equal(a.target, "http://h2:2");
    assert_true(a.force);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1,h2:2", "metrics", "--node=http://h3:3/"), 0);
    assert_int_equal(a.cmd, BQ_CTL_METRICS);
    assert_string_equal(a.target, "http://h3:3");
    bq_ctl_args_free(&a);
    EXPECT_USAGE("2 nodes given: choose one with --node", "--nodes", "h1:1,h2:2", "promote");
    EXPECT_USAGE("metrics does not take --force", "metrics", "--force");
}

static void switchover_needs_to(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "--nodes", "h1:1,h2:2", "switchover", "--to", "n2"), 0);
    assert_int_equal(a.cmd, BQ_CTL_SWITCHOVER);
    assert_string_equal(a.to, "n2");
    assert_int_equal(a.nnodes, 2);
    bq_ctl_args_free(&a);
    EXPECT_USAGE("switchover needs --to NODE_ID", "switchover");
    EXPECT_USAGE("switchover needs --to NODE_ID", "switchover", "--to=");
    EXPECT_USAGE("--to needs a value", "switchover", "--to");
}

static void handoff_targets_one_node(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "handoff"), 0); /* the local node by default */
    assert_int_equal(a.cmd, BQ_CTL_HANDOFF);
    assert_string_equal(a.target, BQ_CTL_DEFAULT_NODE);
    assert_int_equal(a.handoff_ms, BQ_CTL_DEFAULT_HANDOFF_S * 1000L);
    assert_int_equal(a.timeout_ms, BQ_CTL_DEFAULT_TIMEOUT_MS);
    assert_false(a.dry_run);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1", "handoff", "--dry-run"), 0);
    assert_string_equal(a.target, "http://h1:1");
    assert_true(a.dry_run);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1,h2:2", "handoff", "--node", "h2:2"), 0);
    assert_string_equal(a.target, "http://h2:2");
    bq_ctl_args_free(&a);
    EXPECT_USAGE("2 nodes given: choose one with --node", "--nodes", "h1:1,h2:2", "handoff");
}

static void handoff_timeout_is_seconds_after_the_command(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    /* Before the command --timeout is the per-request limit in ms; after handoff, its own. */
    assert_int_equal(
        PARSE(&a, NULL, "--timeout", "1500", "handoff", "--timeout", "90", "--nodes", "h1:1"), 0);
    assert_int_equal(a.timeout_ms, 1500);
    assert_int_equal(a.handoff_ms, 90000);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, "handoff", "--timeout=3600", "--dry-run"), 0);
    assert_int_equal(a.handoff_ms, 3600000);
    assert_int_equal(a.timeout_ms, BQ_CTL_DEFAULT_TIMEOUT_MS);
    bq_ctl_args_free(&a);
    EXPECT_USAGE("handoff --timeout takes seconds from 1 to 3600, not '0'", "handoff", "--timeout",
                 "0");
    EXPECT_USAGE("handoff --timeout takes seconds from 1 to 3600, not '3601'", "handoff",
                 "--timeout", "3601");
    EXPECT_USAGE("handoff --timeout takes seconds from 1 to 3600, not '30s'", "handoff",
                 "--timeout=30s");
    EXPECT_USAGE("--timeout needs a value", "handoff", "--timeout");
    EXPECT_USAGE("status does not take --dry-run", "status", "--dry-run");
    EXPECT_USAGE("handoff does not take --to", "handoff", "--to", "n2");
    EXPECT_USAGE("unexpected argument 'n2'", "handoff", "n2");
}

static void certs_takes_node_ids(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, "h1:1", "certs", "--nodes", "n1,node-2,n_3.x", "--out", "d"), 0);
    assert_int_equal(a.cmd, BQ_CTL_CERTS);
    assert_int_equal(a.nnodes, 3);
    assert_string_equal(a.nodes[0], "n1"); /* ids, not URLs */
    assert_string_equal(a.nodes[2], "n_3.x");
    assert_string_equal(a.out, "d");
    bq_ctl_args_free(&a);
    EXPECT_USAGE("certs needs --nodes ID,... and --out DIR", "certs", "--nodes", "n1");
    EXPECT_USAGE("certs needs --nodes ID,... and --out DIR", "certs", "--out", "d");
    EXPECT_USAGE("certs: give the node ids after the command (certs --nodes ID,...)", "--nodes",
                 "n1", "certs", "--out", "d");
    EXPECT_USAGE("certs: node id 'n1' given twice", "certs", "--nodes", "n1,n1", "--out", "d");
    EXPECT_USAGE("certs: 'ca' is reserved (its files are made anyway)", "certs", "--nodes", "ca",
                 "--out", "d");
    EXPECT_USAGE("certs: 'beanstalkctl' is reserved (its files are made anyway)", "certs",
                 "--nodes", "beanstalkctl", "--out", "d");
    EXPECT_USAGE("certs: bad node id '../x' (letters, digits, '.', '_', '-'; at most 64)", "certs",
                 "--nodes", "../x", "--out", "d");
    EXPECT_USAGE("certs: bad node id 'a/b' (letters, digits, '.', '_', '-'; at most 64)", "certs",
                 "--nodes", "a/b", "--out", "d");
    EXPECT_USAGE("empty entry in the node list", "certs", "--nodes", "n1,,n2", "--out", "d");
    EXPECT_USAGE("certs does not take --timeout", "certs", "--timeout", "5");
    EXPECT_USAGE("certs: --out is empty", "certs", "--nodes", "n1", "--out", "");
}

static void certs_id_length_limit(void **state)
{
    (void)state;
    char id[BQ_CTL_MAX_ID + 2];
    memset(id, 'a', sizeof id - 1);
    id[BQ_CTL_MAX_ID] = '\0';
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "certs", "--nodes", id, "--out", "d"), 0);
    bq_ctl_args_free(&a);
    id[BQ_CTL_MAX_ID] = 'a';
    id[BQ_CTL_MAX_ID + 1] = '\0';
    assert_int_equal(PARSE(&a, NULL, "certs", "--nodes", id, "--out", "d"), -EINVAL);
    bq_ctl_args_free(&a);
}

static void help_and_version(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "--help"), 0);
    assert_int_equal(a.cmd, BQ_CTL_HELP);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, "status", "-h"), 0);
    assert_int_equal(a.cmd, BQ_CTL_HELP);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, "--version", "nonsense"), 0);
    assert_int_equal(a.cmd, BQ_CTL_VERSION);
    bq_ctl_args_free(&a);
}

static void usage_errors(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(bq_ctl_args_parse(&a, 1, ARGV(NULL), NULL, err, sizeof err), -EINVAL);
    assert_string_equal(err, "no command given");
    bq_ctl_args_free(&a);
    EXPECT_USAGE("unknown command 'stats'", "stats");
    EXPECT_USAGE("unknown option --verbose", "--verbose", "status");
    EXPECT_USAGE("unexpected argument 'extra'", "status", "extra");
    EXPECT_USAGE("--nodes needs a value", "status", "--nodes");
    EXPECT_USAGE("--tls-cert, --tls-key and --tls-ca go together", "--tls-cert", "c", "--tls-ca",
                 "ca", "status");
    EXPECT_USAGE("--timeout takes milliseconds from 1 to 3600000, not '0'", "--timeout", "0",
                 "status");
    EXPECT_USAGE("--timeout takes milliseconds from 1 to 3600000, not '5s'", "--timeout", "5s",
                 "status");
    EXPECT_USAGE("--timeout takes milliseconds from 1 to 3600000, not '3600001'", "--timeout",
                 "3600001", "status");
    EXPECT_USAGE("empty entry in the node list", "--nodes", "h1:1,", "status");
    EXPECT_USAGE("'ftp://h:1': only http:// and https:// URLs are supported", "--nodes",
                 "ftp://h:1", "status");
    EXPECT_USAGE("'http://': no host", "--nodes", "http://", "status");
    EXPECT_USAGE("status does not take --to", "status", "--to", "n1");
}

static void node_url_forms(void **state)
{
    (void)state;
    char *u = bq_ctl_args_node_url("[::1]:11380", false, err, sizeof err);
    assert_string_equal(u, "http://[::1]:11380");
    free(u);
    u = bq_ctl_args_node_url("https://n1.example:443/", false, err, sizeof err);
    assert_string_equal(u, "https://n1.example:443");
    free(u);
    u = bq_ctl_args_node_url("n1:11380", true, err, sizeof err);
    assert_string_equal(u, "https://n1:11380");
    free(u);
    assert_null(bq_ctl_args_node_url("///", false, err, sizeof err));
    assert_string_equal(err, "'///': no host");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_defaults),
        cmocka_unit_test(nodes_from_env_unless_given),
        cmocka_unit_test(tls_makes_host_port_https),
        cmocka_unit_test(global_options_after_the_command),
        cmocka_unit_test(promote_targets_the_only_node_or_node),
        cmocka_unit_test(switchover_needs_to),
        cmocka_unit_test(handoff_targets_one_node),
        cmocka_unit_test(handoff_timeout_is_seconds_after_the_command),
        cmocka_unit_test(certs_takes_node_ids),
        cmocka_unit_test(certs_id_length_limit),
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(usage_errors),
        cmocka_unit_test(node_url_forms),
    };
    return cmocka_run_group_tests_name("ctl_args", tests, NULL, NULL);
}
