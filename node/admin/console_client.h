/* The console's own beanstalk client: one connection to this node's client
 * service (bq_admin_node_t.open_client), the commands sent at once, the
 * replies read until the expected number arrived, then closed. On a
 * standby the connection is proxied to the primary like any client's, so
 * the console reads and acts on the cluster's queue wherever it is opened. */
#ifndef BQ_NODE_ADMIN_CONSOLE_CLIENT_H
#define BQ_NODE_ADMIN_CONSOLE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "node/admin/console_reply.h"

/* At most this many replies per run. */
#define BQ_CONSOLE_MAX_REPLIES 256

/* Called once: err 0 with the n replies expected (slices valid for the
 * call only), or err < 0 (a libuv error, UV_ETIMEDOUT, UV_EPROTO for a
 * malformed or oversized reply, UV_EOF when the node closed first) with
 * the n replies that came whole before it. */
typedef void (*bq_console_done_fn)(void *arg, int err, const bq_console_reply_t *r, size_t n);

/* The runs in flight of one owner, so that it can end them all. Zero it to
 * start. */
typedef struct bq_console_runs {
    struct run *head;
} bq_console_runs_t;

/* Sends cmds[0..len) (copied) on fd (owned from here: closed when done; a
 * unix socket when is_unix, else TCP) and reads nreplies replies (1 to
 * BQ_CONSOLE_MAX_REPLIES) within timeout_ms; the run is in *runs until done. 0, or a negative libuv
 * error (fd closed, done not called). */
int bq_console_run(bq_console_runs_t *runs, uv_loop_t *loop, int fd, bool is_unix, const char *cmds,
                   size_t len, size_t nreplies, unsigned timeout_ms, bq_console_done_fn done,
                   void *arg);

/* Ends every run of runs at once: each done is called with UV_ECANCELED,
 * and the handles close on the loop's next turn. */
void bq_console_cancel_all(bq_console_runs_t *runs);

#endif
