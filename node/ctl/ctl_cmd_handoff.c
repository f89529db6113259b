/* beanstalkctl handoff, meant for a Kubernetes preStop hook or a systemd
 * ExecStop on the node about to stop: it asks only that node. A node that
 * is not the primary has nothing to hand off. A primary is asked to switch
 * over to the standby ctl_handoff.c chooses, and the command waits for the
 * node's answer, which comes once the target leads (200), once the node
 * gave up (504, writes resumed) or at once when it refuses (409). One
 * deadline covers everything: the status request gets what is left of it
 * (at most the per-request --timeout), the switchover all that is left. */
#include "node/ctl/ctl_cmd.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "node/ctl/ctl_handoff.h"
#include "node/ctl/ctl_http.h"
#include "node/ctl/ctl_status.h"

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline, at most cap and at least 1. */
static long left_ms(long long deadline, long cap)
{
    long long ms = deadline - now_ms();
    return ms < 1 ? 1 : ms > cap ? cap : (long)ms;
}

/* Performs one request to a->target + path + tail within ms and fills *r
 * (free its body with bq_ctl_http_req_free). -1 when out of memory. */
static int ask(const bq_ctl_args_t *a, const char *method, const char *path, const char *tail,
               long ms, bq_ctl_http_req_t *r)
{
    size_t len = strlen(a->target.url) + strlen(path) + strlen(tail) + 1;
    char *url = malloc(len);
    if (url == NULL)
        return -1;
    snprintf(url, len, "%s%s%s", a->target.url, path, tail);
    bq_ctl_http_opts_t o = {
        .tls_cert = a->tls_cert, .tls_key = a->tls_key, .tls_ca = a->tls_ca, .timeout_ms = ms};
    *r = (bq_ctl_http_req_t){.method = method, .url = url, .name = a->target.name};
    bq_ctl_http_run(&o, r, 1);
    r->url = NULL;
    free(url);
    return 0;
}

/* "121", or "unknown" for a number the primary did not report (-1). */
static const char *number(double v, char *buf, size_t cap)
{
    if (v < 0)
        return "unknown";
    snprintf(buf, cap, "%.0f", v);
    return buf;
}

/* POST /switchover?to=to and what its answer means for the exit status. */
static int switchover(const bq_ctl_args_t *a, const char *to, long long deadline)
{
    char *esc = bq_ctl_http_escape(to);
    bq_ctl_http_req_t r;
    if (esc == NULL || ask(a, "POST", "/switchover?to=", esc,
                           left_ms(deadline, BQ_CTL_MAX_HANDOFF_S * 1000L), &r)) {
        free(esc);
        fprintf(stderr, "beanstalkctl: handoff: out of memory\n");
        return 1;
    }
    free(esc);
    int len = r.body ? (int)strcspn(r.body, "\r\n") : 0, code = 1;
    if (r.body == NULL)
        fprintf(stderr,
                "beanstalkctl: handoff: %s: no answer to the switchover to %s (%s); it may "
                "still complete: see beanstalkctl status\n",
                a->target.url, to, r.error);
    else if (r.status >= 200 && r.status < 300)
        code = printf("handed off to %s\n", to) < 0;
    else if (r.status == 409)
        code = BQ_CTL_EXIT_REFUSED;
    if (r.body && code != 0)
        fprintf(stderr, "beanstalkctl: handoff: %s: switchover to %s %s: HTTP %ld%s%.*s\n",
                a->target.url, to, code == BQ_CTL_EXIT_REFUSED ? "refused" : "failed", r.status,
                len ? ": " : "", len, r.body);
    bq_ctl_http_req_free(&r);
    return code;
}

/* Acts on the choice made from the node's status document. */
static int act(const bq_ctl_args_t *a, const bq_ctl_handoff_t *h, long long deadline)
{
    char flushed[32], lag[32];
    switch (h->kind) {
    case BQ_CTL_HANDOFF_NOT_PRIMARY:
        printf("%s\n", h->why);
        return 0;
    case BQ_CTL_HANDOFF_NO_ROLE:
        fprintf(stderr, "beanstalkctl: handoff: %s: %s\n", a->target.url, h->why);
        return 1;
    case BQ_CTL_HANDOFF_NO_TARGET:
        fprintf(stderr, "beanstalkctl: handoff: %s: %s%s\n", a->target.url, h->why,
                a->dry_run ? "" : "; nothing done");
        return BQ_CTL_EXIT_REFUSED;
    case BQ_CTL_HANDOFF_TARGET:
        break;
    }
    if (!a->dry_run)
        return switchover(a, h->target, deadline);
    printf("would hand off to %s (flushed LSN %s, lag %s records): POST "
           "%s/switchover?to=%s, waiting up to %ld s\n",
           h->target, number(h->flushed_lsn, flushed, sizeof flushed),
           number(h->lag_records, lag, sizeof lag), a->target.url, h->target, a->handoff_ms / 1000);
    return 0;
}

int bq_ctl_cmd_handoff(const bq_ctl_args_t *a)
{
    long long deadline = now_ms() + a->handoff_ms;
    bq_ctl_http_req_t r;
    if (ask(a, "GET", "/status", "", left_ms(deadline, a->timeout_ms), &r) != 0) {
        fprintf(stderr, "beanstalkctl: handoff: out of memory\n");
        return 1;
    }
    bq_ctl_node_t node;
    int st = bq_ctl_status_set(&node, a->target.url, r.body ? NULL : r.error, r.status, r.body);
    bq_ctl_http_req_free(&r);
    if (st != 0) {
        fprintf(stderr, "beanstalkctl: handoff: %s: %s\n", a->target.url, node.error);
        return 1;
    }
    bq_ctl_handoff_t h;
    bq_ctl_handoff_choose(node.status, &h);
    int code = act(a, &h, deadline);
    bq_ctl_status_clear(&node);
    return code;
}
