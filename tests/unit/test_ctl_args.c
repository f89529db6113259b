/* Unit tests of beanstalkctl's argument parser (node/ctl/ctl_args.c): the
 * defaults and where the node list and the TLS files come from (the flags,
 * then $BEANSTALKCTL_NODES and $BEANSTALKCTL_TLS_*, then the default), how
 * nodes become base URLs and node ids (ID=HOST:PORT), the global options
 * before and after the command, each command's own options and checks (the
 * one node of promote, metrics and handoff, switchover's --to, the node ids
 * of certs, handoff's --timeout in seconds and --dry-run), and the usage
 * errors with their messages. Also the name a node's TLS certificate must
 * carry (node/ctl/ctl_verify.c): the ID, the URL's DNS name, the client
 * certificate's one node id at an IP address, or a refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/ctl/ctl_args.h"
#include "node/ctl/ctl_verify.h"

#define ARGV(...) ((char *const[]){"beanstalkctl", __VA_ARGS__})
#define ARGC(...) ((int)(sizeof ARGV(__VA_ARGS__) / sizeof(char *)))
/* Parses the words given after the program name, with $BEANSTALKCTL_NODES
 * env (NULL: unset) and no other environment. */
#define PARSE(a, env, ...)                                                                         \
    bq_ctl_args_parse(a, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), &(bq_ctl_env_t){.nodes = (env)},    \
                      err, sizeof err)
/* The same with the whole environment given. */
#define PARSE_ENV(a, envp, ...)                                                                    \
    bq_ctl_args_parse(a, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), envp, err, sizeof err)

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
    assert_string_equal(a.nodes[0].url, "http://" BQ_CTL_DEFAULT_NODE);
    assert_null(a.nodes[0].id);
    assert_null(a.nodes[0].name);
    assert_int_equal(a.timeout_ms, BQ_CTL_DEFAULT_TIMEOUT_MS);
    assert_false(a.json);
    assert_null(a.tls_cert);
    assert_null(a.target.url);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "", "status", "--json"), 0); /* an empty $BEANSTALKCTL_NODES */
    assert_true(a.json);
    assert_string_equal(a.nodes[0].url, "http://" BQ_CTL_DEFAULT_NODE);
    bq_ctl_args_free(&a);
}

static void nodes_from_env_unless_given(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, "h1:1, http://h2:2/ ,https://h3:3//", "status"), 0);
    assert_int_equal(a.nnodes, 3);
    assert_string_equal(a.nodes[0].url, "http://h1:1");
    assert_string_equal(a.nodes[1].url, "http://h2:2");
    assert_string_equal(a.nodes[2].url, "https://h3:3");
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1,h2:2", "--nodes", "h9:9", "status"), 0);
    assert_int_equal(a.nnodes, 1);
    assert_string_equal(a.nodes[0].url, "http://h9:9");
    bq_ctl_args_free(&a);
}

static void tls_makes_host_port_https(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "--nodes", "h1:1,http://h2:2", "--tls-cert", "c.pem",
                           "--tls-key=c.key", "--tls-ca", "ca.pem", "--timeout=250", "status"),
                     0);
    assert_string_equal(a.nodes[0].url, "https://h1:1");
    assert_string_equal(a.nodes[1].url, "http://h2:2"); /* an explicit scheme is kept */
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
    assert_string_equal(a.nodes[0].url, "https://h1:1"); /* --tls-cert came later: still https */
    bq_ctl_args_free(&a);
}

static void promote_targets_the_only_node_or_node(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(PARSE(&a, NULL, "--nodes", "h1:1", "promote"), 0);
    assert_int_equal(a.cmd, BQ_CTL_PROMOTE);
    assert_string_equal(a.target.url, "http://h1:1");
    assert_false(a.force);
    bq_ctl_args_free(&a);
    assert_int_equal(
        PARSE(&a, NULL, "--nodes", "h1:1,h2:2", "promote", "--node", "h2:2", "--force"), 0);
    assert_string_equal(a.target.url, "http://h2:2");
    assert_true(a.force);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1,h2:2", "metrics", "--node=http://h3:3/"), 0);
    assert_int_equal(a.cmd, BQ_CTL_METRICS);
    assert_string_equal(a.target.url, "http://h3:3");
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
    assert_string_equal(a.target.url, "http://" BQ_CTL_DEFAULT_NODE);
    assert_int_equal(a.handoff_ms, BQ_CTL_DEFAULT_HANDOFF_S * 1000L);
    assert_int_equal(a.timeout_ms, BQ_CTL_DEFAULT_TIMEOUT_MS);
    assert_false(a.dry_run);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1", "handoff", "--dry-run"), 0);
    assert_string_equal(a.target.url, "http://h1:1");
    assert_true(a.dry_run);
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, "h1:1,h2:2", "handoff", "--node", "h2:2"), 0);
    assert_string_equal(a.target.url, "http://h2:2");
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
    assert_int_equal(a.nids, 3);
    assert_int_equal(a.nnodes, 0); /* ids, not nodes */
    assert_string_equal(a.ids[0], "n1");
    assert_string_equal(a.ids[2], "n_3.x");
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
    EXPECT_USAGE("--tls-cert, --tls-key and --tls-ca go together (or $BEANSTALKCTL_TLS_CERT, "
                 "_KEY and _CA)",
                 "--tls-cert", "c", "--tls-ca", "ca", "status");
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

static void nodes_with_ids(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    assert_int_equal(
        PARSE(&a, NULL, "--nodes", "n1=h1:1, n2=https://h2:2/,h3:3,n-4=[::1]:4", "status"), 0);
    assert_int_equal(a.nnodes, 4);
    assert_string_equal(a.nodes[0].id, "n1");
    assert_string_equal(a.nodes[0].url, "http://h1:1"); /* where it connects */
    assert_string_equal(a.nodes[1].id, "n2");
    assert_string_equal(a.nodes[1].url, "https://h2:2");
    assert_null(a.nodes[2].id);
    assert_string_equal(a.nodes[2].url, "http://h3:3");
    assert_string_equal(a.nodes[3].id, "n-4");
    assert_string_equal(a.nodes[3].url, "http://[::1]:4");
    assert_null(a.nodes[0].name); /* set by bq_ctl_cmd_expect, not the parser */
    bq_ctl_args_free(&a);
    /* From the environment, with TLS: https. */
    assert_int_equal(PARSE(&a, "n1=127.0.0.1:11380,n2=127.0.0.1:11381", "--tls-cert", "c",
                           "--tls-key", "k", "--tls-ca", "ca", "status"),
                     0);
    assert_int_equal(a.nnodes, 2);
    assert_string_equal(a.nodes[1].id, "n2");
    assert_string_equal(a.nodes[1].url, "https://127.0.0.1:11381");
    bq_ctl_args_free(&a);
    /* The one node addressed keeps its id, from --node or from the only node. */
    assert_int_equal(PARSE(&a, "n1=h1:1,n2=h2:2", "handoff", "--node=n2=h2:2"), 0);
    assert_string_equal(a.target.id, "n2");
    assert_string_equal(a.target.url, "http://h2:2");
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, "--nodes", "n1=h1:1", "promote"), 0);
    assert_string_equal(a.target.id, "n1");
    assert_string_equal(a.target.url, "http://h1:1");
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE(&a, NULL, "metrics", "--node", "h1:1"), 0);
    assert_null(a.target.id);
    bq_ctl_args_free(&a);
    /* An '=' after the scheme is not an id. */
    assert_int_equal(PARSE(&a, NULL, "--nodes", "http://h1:1/x=y", "status"), 0);
    assert_null(a.nodes[0].id);
    bq_ctl_args_free(&a);
    EXPECT_USAGE("'x/y=h:1': bad node id 'x/y' (letters, digits, '.', '_', '-'; at most 64)",
                 "--nodes", "x/y=h:1", "status");
    EXPECT_USAGE("'=h:1': bad node id '' (letters, digits, '.', '_', '-'; at most 64)", "--nodes",
                 "=h:1", "status");
    EXPECT_USAGE("'*.example=h:1': bad node id '*.example' (letters, digits, '.', '_', '-'; at "
                 "most 64)",
                 "--nodes", "*.example=h:1", "status");
    EXPECT_USAGE("'beanstalkctl=h:1': 'beanstalkctl' is reserved, not a node id", "promote",
                 "--node", "beanstalkctl=h:1");
    EXPECT_USAGE("'n1=': no host after the node id", "--nodes", "n1=", "status");
    EXPECT_USAGE("'ftp://h:1': only http:// and https:// URLs are supported", "--nodes",
                 "n1=ftp://h:1", "status");
}

static void tls_files_from_the_environment(void **state)
{
    (void)state;
    bq_ctl_args_t a;
    bq_ctl_env_t env = {.tls_cert = "e.pem", .tls_key = "e.key", .tls_ca = "eca.pem"};
    assert_int_equal(PARSE_ENV(&a, &env, "--nodes", "h1:1", "status"), 0);
    assert_string_equal(a.tls_cert, "e.pem");
    assert_string_equal(a.tls_key, "e.key");
    assert_string_equal(a.tls_ca, "eca.pem");
    assert_string_equal(a.nodes[0].url, "https://h1:1"); /* a client certificate: https */
    bq_ctl_args_free(&a);
    /* Each flag wins over its variable. */
    assert_int_equal(PARSE_ENV(&a, &env, "handoff", "--tls-cert=n1.pem", "--tls-key=n1.key"), 0);
    assert_string_equal(a.tls_cert, "n1.pem");
    assert_string_equal(a.tls_key, "n1.key");
    assert_string_equal(a.tls_ca, "eca.pem");
    /* The default node is https with TLS files. */
    assert_string_equal(a.target.url, "https://" BQ_CTL_DEFAULT_NODE);
    bq_ctl_args_free(&a);
    /* Empty variables are unset; the three still go together. */
    env = (bq_ctl_env_t){.tls_cert = "e.pem", .tls_key = "", .tls_ca = "eca.pem"};
    assert_int_equal(PARSE_ENV(&a, &env, "status"), -EINVAL);
    assert_string_equal(err, "--tls-cert, --tls-key and --tls-ca go together (or "
                             "$BEANSTALKCTL_TLS_CERT, _KEY and _CA)");
    bq_ctl_args_free(&a);
    assert_int_equal(PARSE_ENV(&a, &env, "--tls-key", "k", "status"), 0);
    bq_ctl_args_free(&a);
    env = (bq_ctl_env_t){.nodes = "", .tls_cert = "", .tls_key = "", .tls_ca = ""};
    assert_int_equal(PARSE_ENV(&a, &env, "status"), 0);
    assert_null(a.tls_cert);
    assert_string_equal(a.nodes[0].url, "http://" BQ_CTL_DEFAULT_NODE);
    bq_ctl_args_free(&a);
    /* certs makes certificates: it takes none. */
    env = (bq_ctl_env_t){.tls_cert = "e.pem"};
    assert_int_equal(PARSE_ENV(&a, &env, "certs", "--nodes", "n1", "--out", "d"), 0);
    bq_ctl_args_free(&a);
}

/* ---- the name a node's certificate must carry (ctl_verify.c) ---- */

static void node_ids_and_ip_addresses(void **state)
{
    (void)state;
    assert_null(bq_ctl_verify_id_problem("n1"));
    assert_null(bq_ctl_verify_id_problem("beanstalkd-ha-a-0"));
    assert_null(bq_ctl_verify_id_problem("n_3.x"));
    assert_string_equal(bq_ctl_verify_id_problem(""), "bad");
    assert_string_equal(bq_ctl_verify_id_problem("*.example"), "bad");
    assert_string_equal(bq_ctl_verify_id_problem("-n1"), "bad");
    assert_string_equal(bq_ctl_verify_id_problem(".n1"), "bad");
    assert_string_equal(bq_ctl_verify_id_problem("n 1"), "bad");
    assert_string_equal(bq_ctl_verify_id_problem("beanstalkctl"), "reserved");
    assert_string_equal(bq_ctl_verify_id_problem("ca"), "reserved");
    assert_true(bq_ctl_verify_is_ip("127.0.0.1"));
    assert_true(bq_ctl_verify_is_ip("10.0.0.1"));
    assert_true(bq_ctl_verify_is_ip("127.1")); /* libcurl reads it as 127.0.0.1 */
    assert_true(bq_ctl_verify_is_ip("[::1]"));
    assert_true(bq_ctl_verify_is_ip("::1"));
    assert_true(bq_ctl_verify_is_ip("[fe80::1%25eth0]"));
    assert_false(bq_ctl_verify_is_ip("n1"));
    assert_false(bq_ctl_verify_is_ip("localhost"));
    assert_false(bq_ctl_verify_is_ip("beanstalkd-ha-a-0.beanstalkd-ha-peers"));
    assert_true(bq_ctl_verify_needs_own(NULL, "127.0.0.1"));
    assert_false(bq_ctl_verify_needs_own("n1", "127.0.0.1"));
    assert_false(bq_ctl_verify_needs_own(NULL, "n1.example"));
}

/* bq_ctl_verify_expect for a node at url with id, with the client
 * certificate naming own[0..nown) (own NULL: not read). */
static int expect(const char *url, const char *id, const char *host, const char *const *own,
                  size_t nown, const char **name)
{
    bq_ctl_own_t o = {.names = own, .n = nown};
    return bq_ctl_verify_expect(url, id, host, own ? &o : NULL, name, err, sizeof err);
}

static void expected_name_is_the_id_then_the_dns_name(void **state)
{
    (void)state;
    const char *name;
    /* ID=HOST:PORT: the id, whatever the host and the client certificate. */
    assert_int_equal(expect("https://127.0.0.1:11380", "n1", "127.0.0.1", NULL, 0, &name), 0);
    assert_string_equal(name, "n1");
    assert_int_equal(expect("https://node1.example:11380", "n1", "node1.example", NULL, 0, &name),
                     0);
    assert_string_equal(name, "n1");
    /* Else the URL's DNS name. */
    assert_int_equal(expect("https://n2:11380", NULL, "n2", NULL, 0, &name), 0);
    assert_string_equal(name, "n2");
    assert_int_equal(expect("https://localhost:11380", NULL, "localhost", NULL, 0, &name), 0);
    assert_string_equal(name, "localhost");
}

static void expected_name_at_an_ip_address(void **state)
{
    (void)state;
    const char *name;
    /* A node's own certificate (a node handing itself off): its one id. */
    const char *const node[] = {"n1"};
    assert_int_equal(expect("https://127.0.0.1:11380", NULL, "127.0.0.1", node, 1, &name), 0);
    assert_string_equal(name, "n1");
    assert_int_equal(expect("https://[::1]:11380", NULL, "[::1]", node, 1, &name), 0);
    assert_string_equal(name, "n1");
    /* beanstalkctl's certificate names no node: refused, asking for ID=. */
    const char *const ctl[] = {"beanstalkctl"};
    assert_int_equal(expect("https://127.0.0.1:11380", NULL, "127.0.0.1", ctl, 1, &name), -EINVAL);
    assert_null(name);
    assert_string_equal(err, "https://127.0.0.1:11380: which node's certificate to expect? "
                             "127.0.0.1 is an IP address (certificates name node ids) and the "
                             "client certificate names beanstalkctl, not a node: write the node "
                             "as ID=HOST:PORT (--nodes ID=127.0.0.1:11380, or --node "
                             "ID=127.0.0.1:11380)");
    /* Two names (deploy/mkcerts' certificates also name localhost), none, a
     * wildcard: no one node id. */
    const char *const two[] = {"n1", "localhost"};
    assert_int_equal(expect("https://10.0.0.1:1", NULL, "10.0.0.1", two, 2, &name), -EINVAL);
    assert_non_null(strstr(err, "the client certificate names n1, localhost (more than one name):"
                                " write the node as ID=HOST:PORT (--nodes ID=10.0.0.1:1,"));
    assert_int_equal(expect("https://10.0.0.1:1", NULL, "10.0.0.1", two, 0, &name), -EINVAL);
    assert_non_null(strstr(err, "the client certificate names nothing in a DNS subjectAltName:"));
    const char *const wild[] = {"*.example"};
    assert_int_equal(expect("https://10.0.0.1:1", NULL, "10.0.0.1", wild, 1, &name), -EINVAL);
    assert_non_null(strstr(err, "the client certificate names *.example, not a node id:"));
    /* The client certificate could not be read. */
    bq_ctl_own_t bad = {.error = "cannot read the client certificate c.pem: No such file"};
    assert_int_equal(bq_ctl_verify_expect("https://127.0.0.1:1", NULL, "127.0.0.1", &bad, &name,
                                          err, sizeof err),
                     -EIO);
    assert_string_equal(err, "https://127.0.0.1:1: cannot read the client certificate c.pem: "
                             "No such file");
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
        cmocka_unit_test(nodes_with_ids),
        cmocka_unit_test(tls_files_from_the_environment),
        cmocka_unit_test(node_ids_and_ip_addresses),
        cmocka_unit_test(expected_name_is_the_id_then_the_dns_name),
        cmocka_unit_test(expected_name_at_an_ip_address),
    };
    return cmocka_run_group_tests_name("ctl_args", tests, NULL, NULL);
}
