/* One client connection: a libuv stream (TCP or unix), its protocol session,
 * the input the session has not consumed yet and the output queue. */
#ifndef BQ_NODE_CONN_H
#define BQ_NODE_CONN_H

#include "node/server.h"

typedef struct bq_conn bq_conn_t;

/* Serves the accepted socket fd (takes ownership): opens a session and
 * starts reading. Returns 0, or logs and returns -1 when it could not be set
 * up (fd is closed). */
int bq_conn_open(bq_server_t *s, int fd);

/* Engine send hook: queues data for connection conn (a bq_conn_t). */
void bq_conn_send(void *conn, const char *data, size_t len);

/* Engine wake hook: schedules conn's input to be fed again after the
 * current engine call. */
void bq_conn_wake(void *conn);

/* Engine command hook: traces a parsed command at -VV. */
void bq_conn_command(void *conn, bq_op_t op);

/* Feeds input the connection kept back (pending list entry). */
void bq_conn_resume(bq_list_t *pending_link);

/* Writes queued output (dirty list entry): try a direct write first, hand
 * the rest to one uv_write. Closes the connection when it is finished. */
void bq_conn_flush(bq_list_t *dirty_link);

/* Schedules a flush for a connection whose output was held back for the
 * binlog (gated list entry, already unlinked): the release LSN advanced. */
void bq_conn_ungate(bq_list_t *gated_link);

/* Closes the connection of an all-connections list entry (shutdown). */
void bq_conn_close_link(bq_list_t *conns_link);

#endif
