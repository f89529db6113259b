/* The server process: one libuv loop running the engine, the listener, the
 * client connections, the engine's timer and the signals. */
#ifndef BQ_NODE_SERVER_H
#define BQ_NODE_SERVER_H

#include <stdbool.h>
#include <uv.h>

#include "node/admin/admin.h"
#include "node/admin/routes.h"
#include "node/binlog/binlog.h"
#include "node/cluster/cluster.h"
#include "node/cluster/failover.h"
#include "node/base/flags.h"
#include "node/base/list.h"
#include "node/client/conn.h"
#include "node/client/listen.h"
#include "node/base/log.h"
#include "protocol/engine.h"
#include "node/base/sysinfo.h"

/* Start-up failures of bq_server_init, mapped to beanstalkd's exit codes. */
enum {
    BQ_SERVER_EINIT = -1,    /* loop, engine or handle set-up: exit 1 */
    BQ_SERVER_ELISTEN = -2,  /* listening socket: exit 111 */
    BQ_SERVER_ESYSINFO = -3, /* /dev/urandom or uname: exit 50 */
    BQ_SERVER_EBINLOG = -4,  /* binlog directory unusable: exit 10 */
    BQ_SERVER_EREPLAY = -5,  /* binlog replay stopped start-up: exit 1 */
};

typedef struct bq_server {
    uv_loop_t loop;
    bq_engine_t *engine;
    bq_listener_t listener;
    uv_timer_t timer;     /* armed to the engine's next due time */
    uv_prepare_t prepare; /* once per loop turn: resume woken connections, flush output */
    uv_idle_t idle;       /* active while work is left for the next turn */
    uv_signal_t sig_term, sig_int, sig_usr1;
    bq_clients_t clients; /* the client connections (node/client/conn.h) */
    bool stopping;
    bq_sysinfo_t info;
    bq_binlog_t *binlog;        /* NULL without -b */
    bq_cluster_t *cluster;      /* NULL unless --role */
    bool drain_signal;          /* SIGUSR1 turned drain mode on */
    uint64_t min_epoch;         /* cluster primary: the epoch it opens is at least this */
    bq_admin_t *admin;          /* the admin API, NULL without --admin-listen */
    bq_admin_node_t admin_node; /* what the admin API's routes borrow */
} bq_server_t;

/* Creates the loop, engine, listener and handles from the flags. Returns 0
 * or a BQ_SERVER_E* code (logged). Call bq_server_free in both cases. */
int bq_server_init(bq_server_t *s, const bq_flags_t *f);

/* With -b: locks the directory, replays it and opens a new segment (after
 * bq_server_init and any privilege drop). Returns 0 or BQ_SERVER_EBINLOG /
 * BQ_SERVER_EREPLAY (logged). Without -b: returns 0. */
int bq_server_start_binlog(bq_server_t *s, const bq_flags_t *f);

/* With --role: starts replication (after bq_server_start_binlog); argv is
 * the process's, kept for a standby's restart after a resync. Then, with
 * --admin-listen, the admin API (also on a single beanstalkd). 0, or
 * BQ_SERVER_EINIT (logged). */
int bq_server_start_cluster(bq_server_t *s, const bq_flags_t *f, const bq_failover_plan_t *plan,
                            char **argv);

/* Runs the loop until SIGTERM or SIGINT has closed every handle. */
void bq_server_run(bq_server_t *s);

/* Closes the binlog (writing, syncing and trimming it), frees the engine
 * and the loop (after bq_server_run, or a failed init). */
void bq_server_free(bq_server_t *s);

/* The current time; runs the engine's due timers first, so input is never
 * handled before a timeout that is already due. */
bq_now_t bq_server_now(bq_server_t *s);

#endif
