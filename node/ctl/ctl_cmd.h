/* beanstalkctl's commands, one function each: they take the parsed command
 * line, talk to the nodes (ctl_http.h) or write certificates
 * (ctl_certs.h), print results on stdout and errors on stderr, and return
 * the process's exit status: 0 success, 1 failure (handoff also
 * BQ_CTL_EXIT_REFUSED). */
#ifndef BQ_CTL_CMD_H
#define BQ_CTL_CMD_H

#include "node/ctl/ctl_args.h"

/* A usage error: the command line cannot be acted on. */
#define BQ_CTL_EXIT_USAGE 2

/* handoff's exit status when nothing was handed off and nothing changed
 * because there was no standby to hand off to or the primary refused. */
#define BQ_CTL_EXIT_REFUSED 3

/* Before any request, with TLS files: sets the name each https node the
 * command talks to must have its certificate carry (a->target.name, or
 * each a->nodes[k].name when there is no target: ctl_verify.h),
 * reading the client certificate's names if a node at an IP address
 * without ID= needs them. 0; BQ_CTL_EXIT_USAGE when some node's name
 * cannot be told (the message, on stderr, asks for ID=HOST:PORT); 1 when
 * the client certificate cannot be read, or out of memory. */
int bq_ctl_cmd_expect(bq_ctl_args_t *a);

/* GET /status from every node at once; the table or --json. 0 when every
 * node answered with a status document, else 1 (the output says why). */
int bq_ctl_cmd_status(const bq_ctl_args_t *a);

/* POST /promote (?force=1 with --force) to a->target; prints the answer.
 * 0 on a 2xx answer. */
int bq_ctl_cmd_promote(const bq_ctl_args_t *a);

/* Finds the one primary among a->nodes by their /status, then POST
 * /switchover?to=a->to to it; prints the answer. 0 on a 2xx answer. */
int bq_ctl_cmd_switchover(const bq_ctl_args_t *a);

/* GET /metrics from a->target, printed unchanged. 0 on a 2xx answer. */
int bq_ctl_cmd_metrics(const bq_ctl_args_t *a);

/* The cluster's certificates for node ids a->nodes in a->out. */
int bq_ctl_cmd_certs(const bq_ctl_args_t *a);

/* handoff (ctl_cmd_handoff.c): GET /status from a->target; if it is the
 * primary, POST /switchover?to=<its best streaming standby> and wait for the
 * answer, all within a->handoff_ms (a->dry_run: print the plan, send
 * nothing). 0 handed off or not the primary; BQ_CTL_EXIT_REFUSED when there
 * is no standby to hand off to or the node refused (409): nothing changed;
 * 1 otherwise (no answer, 504, another status). */
int bq_ctl_cmd_handoff(const bq_ctl_args_t *a);

#endif
