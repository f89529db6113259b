/* One client connection's protocol state: line framing, put bodies, the
 * discard states of JOB_TOO_BIG and overlong lines, and dispatch into the
 * engine.
 *
 * Pure: bytes come in through bq_session_feed() in chunks of any size and
 * replies leave through the engine's send hook. The node owns the socket and
 * keeps the bytes a session did not consume (while it waits in reserve). */
#ifndef BQ_SESSION_H
#define BQ_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol/engine.h"

typedef struct bq_session bq_session_t;

/* Opens a session (and its engine client) for connection `conn`; NULL when
 * out of memory. */
bq_session_t *bq_session_new(bq_engine_t *e, void *conn);

/* Closes the session: a partial put is dropped, reserved jobs go back to
 * ready. Frees s. */
void bq_session_free(bq_session_t *s, bq_now_t now);

/* Consumes input from data[0..len) and executes every complete command.
 * Stops early when the client starts waiting in reserve or sends quit.
 * Returns the number of bytes consumed; the caller keeps the rest and feeds
 * it again once the session is no longer blocked. */
size_t bq_session_feed(bq_session_t *s, const char *data, size_t len, bq_now_t now);

/* True while a reserve waits (feeding consumes nothing until the engine's
 * wake hook fires for this connection) or a writing command (or a put
 * whose body completed) is held while writes pause (until
 * bq_session_resume runs it). */
bool bq_session_blocked(const bq_session_t *s);

/* The session's engine client (borrowed). */
bq_client_t *bq_session_client(const bq_session_t *s);

/* Runs the command held while writes paused, if they no longer are (the
 * owner calls it before feeding more, once writes resume). */
void bq_session_resume(bq_session_t *s, bq_now_t now);

/* The bytes that carry this session's unanswered input to another server
 * (the commands that restore its tubes are the caller's): a reserve it
 * waits in (with the seconds left of its timeout), the command held while
 * writes pause (a held put whole, with its body), or the partial command
 * line. 0 with *out (malloc'd, *len bytes; NULL when there are none), or
 * -1 when out of memory or when the session is inside a put body or a
 * discard and cannot move. */
int bq_session_replay(const bq_session_t *s, bq_now_t now, char **out, size_t *len);

/* True once quit was received: stop reading, flush the output, close. */
bool bq_session_quit(const bq_session_t *s);

/* True when the session is between commands (no partial line, body or
 * discard in progress). */
bool bq_session_idle(const bq_session_t *s);

/* The peer half-closed its side: a waiting reserve answers TIMED_OUT and
 * later blocking reserves time out at once (beanstalkd's behaviour). The
 * engine's wake hook is not called: the caller feeds the kept input itself
 * after this returns. */
void bq_session_eof(bq_session_t *s, bq_now_t now);

#endif
