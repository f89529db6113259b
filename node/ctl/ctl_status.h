/* beanstalkctl status: what each node answered to GET /status, rendered as
 * a table for people or as one JSON document for programs. Pure: the
 * answers come in as strings, the output goes to a FILE. Every field of the
 * node's document is optional here; a missing one prints as "-". */
#ifndef BQ_CTL_STATUS_H
#define BQ_CTL_STATUS_H

#include <stddef.h>
#include <stdio.h>

#include <cJSON.h>

typedef struct bq_ctl_node {
    const char *url; /* the node's base URL (borrowed) */
    cJSON *status;   /* its /status document, a JSON object; NULL when error is set */
    char error[320]; /* "unreachable: why" or "bad answer: why"; "" when status is set */
} bq_ctl_node_t;

/* Fills *n (url borrowed) from one exchange: transport_error when no HTTP
 * answer came, else the HTTP status and body (may be NULL). Returns 0 when
 * the body is a JSON object from a 200 answer, else -1 with n->error set. */
int bq_ctl_status_set(bq_ctl_node_t *n, const char *url, const char *transport_error,
                      long http_status, const char *body);

/* Frees n->status. */
void bq_ctl_status_clear(bq_ctl_node_t *n);

/* Writes the table: one row per node (NODE ROLE EPOCH LAST-LSN COMMIT-LSN
 * PRIMARY SYNC LAG(records) READY URL, or the URL and the error), then for
 * each primary its standbys as it sees them. 0 or -ENOMEM. */
int bq_ctl_status_table(FILE *out, const bq_ctl_node_t *nodes, size_t n);

/* Writes {"nodes":[{"url":..,"status":doc|null,"error":null|".."},...]} and
 * a newline. 0 or -ENOMEM. */
int bq_ctl_status_json(FILE *out, const bq_ctl_node_t *nodes, size_t n);

/* The index of the one node whose role is "primary"; -1 when none or
 * several are, with a one-line message in err. */
int bq_ctl_status_primary(const bq_ctl_node_t *nodes, size_t n, char *err, size_t errlen);

#endif
