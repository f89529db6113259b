/* The node's answers to the admin API (node/admin/admin.h): /status as JSON and
 * /metrics in Prometheus text (node/admin/metrics.h), /readyz from the node's
 * state, and /promote and /switchover handed to the cluster. Started with
 * --admin-listen; in plaintext on a loopback address, else in TLS with the
 * cluster's certificates (the node refuses to start without). */
#ifndef BQ_NODE_ADMIN_ROUTES_H
#define BQ_NODE_ADMIN_ROUTES_H

#include <uv.h>

#include "node/admin/admin.h"
#include "node/base/flags.h"
#include "node/binlog/binlog.h"
#include "node/cluster/cluster.h"
#include "protocol/engine.h"

/* What the routes read and act on: the server's parts, borrowed (they
 * outlive the admin API; the server owns this struct too). */
typedef struct bq_admin_node {
    uv_loop_t *loop;
    bq_engine_t *engine;
    bq_binlog_t *binlog;   /* NULL without -b */
    bq_cluster_t *cluster; /* NULL without --role */
    /* A new connection to this node's own client service, served as if its
     * listener had accepted it (node/client/pair.h): the client's end (the
     * caller owns it), *is_unix its kind; or a negative errno. */
    int (*open_client)(void *arg, bool *is_unix);
    void *arg;                  /* for open_client */
    struct bq_console *console; /* the web console, the routes' own */
} bq_admin_node_t;

/* A standby is ready while it lags at most this many records behind the
 * commit LSN of its primary's last heartbeat. */
#define BQ_ADMIN_READY_MAX_LAG 10000

/* Starts the admin API of node (borrowed until bq_admin_stop) as
 * f->admin_listen says (nothing without it), with the web console
 * (node/admin/console.h; --console-password-file read here). 0 and *out (NULL when not
 * asked for), or -1 (logged). */
int bq_admin_routes_start(bq_admin_node_t *node, const bq_flags_t *f, bq_admin_t **out);

/* Stops *admin (NULL: a no-op) and sets it NULL; frees node's console. */
void bq_admin_routes_stop(bq_admin_node_t *node, bq_admin_t **admin);

/* The /status document of a node (role "single" without --role): new, freed with free; NULL when
 * out of memory. */
char *bq_admin_status_json(const bq_cluster_status_t *st);

#endif
