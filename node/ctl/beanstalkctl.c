/* beanstalkctl, the operator's tool for a beanstalkd-ha cluster: it reads
 * the command line (ctl_args.c), runs one command against the nodes' admin
 * HTTP API (ctl_cmd.c) and exits with 0 on success, 1 when the command
 * failed or some node did not answer, 2 on a usage error (a node at an IP
 * address whose certificate name cannot be told is one), and 3 when
 * handoff changed nothing because it had no standby or was refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "node/ctl/ctl_args.h"
#include "node/ctl/ctl_cmd.h"
#include "node/ctl/ctl_http.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define DEFAULT_HANDOFF STR(BQ_CTL_DEFAULT_HANDOFF_S) /* as a string literal */

static const char usage_text[] =
    "Usage: beanstalkctl [OPTIONS] COMMAND [COMMAND OPTIONS]\n"
    "\n"
    "Options (also accepted after any command but certs):\n"
    "  --nodes NODE,...   the nodes' admin API (default: $BEANSTALKCTL_NODES, else\n"
    "                     " BQ_CTL_DEFAULT_NODE "). NODE is HOST:PORT (http://, or\n"
    "                     https:// with --tls-cert), a URL, or ID=HOST:PORT: connect\n"
    "                     to HOST:PORT and require a TLS certificate naming ID\n"
    "  --tls-cert FILE    client certificate for mutual TLS (with --tls-key, --tls-ca;\n"
    "                     default $BEANSTALKCTL_TLS_CERT)\n"
    "  --tls-key FILE     its private key (default $BEANSTALKCTL_TLS_KEY)\n"
    "  --tls-ca FILE      the cluster CA, the only issuer trusted for the nodes\n"
    "                     (default $BEANSTALKCTL_TLS_CA)\n"
    "  --timeout MS       per request, connection included (default 10000)\n"
    "  -h, --help         this text\n"
    "  --version          the version\n"
    "\n"
    "Commands:\n"
    "  status [--json]              every node's role, epoch, LSNs, sync state and\n"
    "                               lag; exit 1 when some node did not answer\n"
    "  promote [--node NODE] [--force]\n"
    "                               make that standby the primary (--force: even if it\n"
    "                               may lack acknowledged writes)\n"
    "  switchover --to NODE_ID      have the primary among --nodes hand over to NODE_ID\n"
    "  handoff [--node NODE] [--timeout SECONDS] [--dry-run]\n"
    "                               before that node stops: if it is the primary,\n"
    "                               switch over to its best streaming standby and\n"
    "                               wait; --timeout SECONDS bounds it all (default\n"
    "                               " DEFAULT_HANDOFF "), --dry-run only says what it would do\n"
    "  metrics [--node NODE]        the node's Prometheus metrics\n"
    "  certs --nodes ID,... --out DIR\n"
    "                               make a cluster CA, a certificate per node id and a\n"
    "                               client certificate for beanstalkctl in DIR\n"
    "\n"
    "promote, metrics and handoff address --node, or the only node given. After\n"
    "handoff, --timeout is handoff's own, in seconds.\n"
    "With TLS, a node's certificate must name (DNS subjectAltName) the ID given\n"
    "with it, else its URL's host name; at an IP address without ID, the one node\n"
    "id of the client certificate (a node handing itself off), else it is refused.\n"
    "Exit status: 0 success, 1 failure, 2 usage error, 3 handoff changed nothing\n"
    "(no streaming standby, or the primary refused).\n";

typedef int (*command_fn)(const bq_ctl_args_t *a);

static const command_fn commands[] = {
    [BQ_CTL_STATUS] = bq_ctl_cmd_status,         [BQ_CTL_PROMOTE] = bq_ctl_cmd_promote,
    [BQ_CTL_SWITCHOVER] = bq_ctl_cmd_switchover, [BQ_CTL_METRICS] = bq_ctl_cmd_metrics,
    [BQ_CTL_CERTS] = bq_ctl_cmd_certs,           [BQ_CTL_HANDOFF] = bq_ctl_cmd_handoff,
};

int main(int argc, char **argv)
{
    bq_ctl_args_t a;
    char err[512];
    const bq_ctl_env_t env = {
        .nodes = getenv("BEANSTALKCTL_NODES"),
        .tls_cert = getenv("BEANSTALKCTL_TLS_CERT"),
        .tls_key = getenv("BEANSTALKCTL_TLS_KEY"),
        .tls_ca = getenv("BEANSTALKCTL_TLS_CA"),
    };
    int r = bq_ctl_args_parse(&a, argc, argv, &env, err, sizeof err);
    if (r == -ENOMEM) {
        fprintf(stderr, "beanstalkctl: out of memory\n");
        r = 1;
    } else if (r != 0) {
        fprintf(stderr, "beanstalkctl: %s\nTry 'beanstalkctl --help'.\n", err);
        r = BQ_CTL_EXIT_USAGE;
    } else if (a.cmd == BQ_CTL_HELP) {
        fputs(usage_text, stdout);
    } else if (a.cmd == BQ_CTL_VERSION) {
        printf("beanstalkctl %s\n", BQ_VERSION);
    } else if (bq_ctl_http_init() != 0) {
        fprintf(stderr, "beanstalkctl: cannot initialise libcurl\n");
        r = 1;
    } else {
        r = a.cmd == BQ_CTL_CERTS ? 0 : bq_ctl_cmd_expect(&a);
        if (r == 0)
            r = commands[a.cmd](&a);
        bq_ctl_http_cleanup();
    }
    bq_ctl_args_free(&a);
    return r;
}
