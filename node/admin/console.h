/* The web console on the admin port (docs/console.md): its page (plain
 * HTML, CSS and JavaScript embedded in the binary), and the JSON API the
 * page calls. The page polls /status (this node) and /api/queue (the
 * cluster's queue), and reads jobs and acts through the other /api/ paths.
 * Reads of counts are open like /status; job bodies and every action need
 * the operator (node/admin/access.h, bq_console_refusal).
 *
 *   GET  /, /ui/                 the page; /ui/console.js, /ui/console.css
 *   GET  /api/session            who the request is: {operator, via, csrf, login}
 *   POST /api/login              Authorization: Bearer PASSWORD -> session cookie
 *   POST /api/logout
 *   GET  /api/queue              stats (with the primary's cluster keys) and every
 *                                tube's stats-tube (at most BQ_CONSOLE_MAX_TUBES)
 *   GET  /api/peek?tube=T&state=ready|delayed|buried
 *   GET  /api/job?id=N           the job's stats-job and body (base64)
 *   POST /api/kick?tube=T&bound=N, /api/kick-job?id=N, /api/delete?id=N,
 *        /api/pause?tube=T&delay=S, /api/switchover?to=NODE
 *
 * Queue reads and job actions run as beanstalk commands on a connection of
 * this node's own client service (console_client.h): on a standby that is
 * proxied to the primary like any client's, so every node's console shows
 * and acts on the cluster's queue, with the same acknowledgement rules. */
#ifndef BQ_NODE_ADMIN_CONSOLE_H
#define BQ_NODE_ADMIN_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "node/admin/admin.h"

#define BQ_CONSOLE_MAX_TUBES 200 /* tubes listed by /api/queue */
#define BQ_CONSOLE_MAX_CALLS 16  /* queue reads and actions in flight; more get 503 */

typedef struct bq_console bq_console_t;

typedef struct bq_console_config {
    uv_loop_t *loop;
    /* A connection to this node's client service (bq_admin_node_t). */
    int (*open_client)(void *arg, bool *is_unix);
    void *client_arg; /* for open_client */
    /* The cluster's switchover (routes.c's handler); NULL on a single node. */
    void (*switchover)(void *arg, const char *to, bq_admin_reply_t *r);
    void *arg;            /* for switchover */
    const char *node_id;  /* names the session cookie; NULL on a single node */
    const char *password; /* the operator password (borrowed for the call), or NULL */
    size_t password_len;
} bq_console_config_t;

/* A new console (cfg copied, its pointers borrowed for the console's
 * life), or NULL when out of memory. */
bq_console_t *bq_console_new(const bq_console_config_t *cfg);

/* Answers q through r (bq_admin_handlers_t.console; arg is the console). */
void bq_console_handle(void *console, const bq_admin_request_t *q, bq_admin_reply_t *r);

/* Ends the calls in flight (their requests get 503) and frees c. NULL is
 * a no-op. */
void bq_console_free(bq_console_t *c);

#endif
