/* Client connections, the contract of node/client/: each one a libuv stream
 * (TCP or unix), its protocol session, the input the session has not
 * consumed yet and the output queue. What they share is a bq_clients_t
 * that the server owns and fills in; the server pushes the release point
 * of replies into it (bq_clients_release) and runs the loop turn's work
 * through it (resume, flush). Nothing here knows the server. */
#ifndef BQ_NODE_CLIENT_CONN_H
#define BQ_NODE_CLIENT_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "node/base/list.h"
#include "node/binlog/binlog.h"
#include "protocol/engine.h"

/* What every connection shares. The owner sets loop, engine, binlog,
 * is_unix, now, before_feed and arg after bq_clients_init; the lists and
 * release_lsn are this folder's. */
typedef struct bq_clients {
    uv_loop_t *loop;     /* borrowed */
    bq_engine_t *engine; /* borrowed */
    bq_binlog_t *binlog; /* borrowed; NULL without -b (replies leave at once) */
    bool is_unix;        /* accepted sockets are unix-domain ones */
    /* The owner's clock: the current time, the engine's due timers run
     * first (so input is never handled before a timeout already due). */
    bq_now_t (*now)(void *arg);
    /* Optional: called before input is fed, so that the owner brings the
     * engine's drain state up to date (a primary fenced since the last
     * event refuses writes before they are tried). */
    void (*before_feed)(void *arg);
    void *arg;            /* passed to now and before_feed */
    uint64_t release_lsn; /* replies whose records are at most this may leave */
    bq_list_t conns;      /* every open connection */
    bq_list_t dirty;      /* connections with output to flush */
    bq_list_t pending;    /* connections whose input must be fed again */
    bq_list_t gated;      /* connections with output held back for the binlog */
} bq_clients_t;

/* Initialises cl's lists; the owner then fills in the borrowed parts. */
void bq_clients_init(bq_clients_t *cl);

/* Serves the accepted socket fd (takes ownership): opens a session and
 * starts reading. Returns 0, or logs and returns -1 when it could not be set
 * up (fd is closed). */
int bq_conn_open(bq_clients_t *cl, int fd);

/* Serves fd (takes ownership), a client that was proxied to another node
 * and now belongs to this one: input[0..len) (copied) is fed first, as if
 * the client had sent it, and the replies to its first swallow commands
 * (the ones that restore its session: use, watch, ignore) are dropped.
 * 0, or -1 (logged; fd closed). */
int bq_conn_adopt(bq_clients_t *cl, int fd, const char *input, size_t len, size_t swallow);

/* Engine send hook: queues data for connection conn (a bq_conn_t). */
void bq_conn_send(void *conn, const char *data, size_t len);

/* Engine wake hook: schedules conn's input to be fed again after the
 * current engine call. */
void bq_conn_wake(void *conn);

/* Engine command hook: traces a parsed command at -VV. */
void bq_conn_command(void *conn, bq_op_t op);

/* Feeds the input of every connection the engine woke. */
void bq_clients_resume(bq_clients_t *cl);

/* Writes every connection's queued output that may leave (try a direct
 * write first, hand the rest to one uv_write); closes the connections
 * that are finished. */
void bq_clients_flush(bq_clients_t *cl);

/* True when some connection's input waits to be fed again. */
bool bq_clients_pending(const bq_clients_t *cl);

/* The release point moved to lsn (it never goes back): connections whose
 * output was held back for the binlog are flushed on the next turn. */
void bq_clients_release(bq_clients_t *cl, uint64_t lsn);

/* Schedules every connection's input to be fed again (writes resumed:
 * sessions holding a command run it). */
void bq_clients_wake_all(bq_clients_t *cl);

/* A client handed to another owner (this node stops serving clients): its
 * socket (owned by the receiver), the session it had (borrowed for the
 * call) and what it sent that got no reply yet (bq_session_replay's bytes,
 * then the input not consumed). */
typedef struct bq_conn_handover {
    int fd;
    const char *use;
    const char *const *watch;
    size_t nwatch;
    const char *input;
    size_t len;
} bq_conn_handover_t;

/* Takes h->fd whatever it returns: 0 when taken, -1 when it could not
 * (it closed fd). */
typedef int (*bq_conn_take_fn)(void *arg, const bq_conn_handover_t *h);

/* Flushes released output, then hands every connection that can move to
 * take (nothing unsent or held back for the binlog, no put body or discard
 * in progress, TCP) and closes every connection here (sessions end: their
 * reservations go back). Returns how many were handed over; *closed:
 * how many were not. */
size_t bq_clients_hand_over(bq_clients_t *cl, bq_conn_take_fn take, void *arg, size_t *closed);

/* Closes every connection (shutdown). */
void bq_clients_close_all(bq_clients_t *cl);

#endif
