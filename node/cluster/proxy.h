/* On a standby, client connections are proxied to the primary's client
 * port, so clients may connect to any node. Bytes are copied both ways
 * unchanged (but for the replies of the commands that restore a moved
 * session); when the client closes, the other side is closed. With no
 * primary known, a new connection is held until one is (at most hold_ms).
 * When the primary changes or is lost, a client with nothing but reserves
 * waiting for a reply keeps its connection: it is held (at most hold_ms)
 * and moved to the next primary with its session (the tube it uses, the
 * tubes it watches) restored there. One with a change in flight stays on
 * its old target until the reply comes back (the old primary answers, or
 * hands it on to the new one as it steps down), then moves, at most
 * hold_ms later; its old target closing first closes it, so a reply is
 * never silently lost. A held client whose bound passes gets
 * INTERNAL_ERROR for each command that got no reply, then is closed.
 * Reading from one side pauses while the other side's write queue is
 * above a bound, so a slow peer cannot make the proxy buffer without
 * limit. */
#ifndef BQ_NODE_PROXY_H
#define BQ_NODE_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct bq_proxy bq_proxy_t;

/* A proxy on loop with no target, holding clients at most hold_ms for a
 * new one. Returns new (free with bq_proxy_free) or NULL when out of
 * memory. */
bq_proxy_t *bq_proxy_new(uv_loop_t *loop, uint64_t hold_ms);

/* Sets where connections go (host and port are copied); NULL host: no
 * primary known. A change moves or closes every proxied connection (see
 * above); held ones go to the new target. */
void bq_proxy_set_target(bq_proxy_t *p, const char *host, const char *port);

/* Receives a client the proxy hands over: fd (owned), the bytes to feed
 * first (borrowed for the call: its restore commands, its reserves in
 * flight, what it sent while held) and how many of its first commands
 * restore its session (their replies must be dropped). */
typedef void (*bq_proxy_adopt_fn)(void *arg, int fd, const char *input, size_t len,
                                  size_t restores);

/* This node became the primary: every proxied client that can move is
 * handed to adopt(arg, ...) to be served here, the others are closed; no
 * target is left. Returns how many were handed over. */
size_t bq_proxy_adopt_all(bq_proxy_t *p, bq_proxy_adopt_fn adopt, void *arg);

/* Takes over a client this node served until it stepped down: fd (owned),
 * the session it had (the tube it used, the tubes it watched in order, all
 * borrowed) and input[0..len) (copied): what it sent that got no reply
 * yet (bq_session_replay's bytes, then its unread input). The client is
 * held like one whose primary went away: the next primary gets the
 * commands that restore its session (their replies dropped), then input.
 * 0, or -1 (logged; fd closed) when it cannot be set up. */
int bq_proxy_take(bq_proxy_t *p, int fd, const char *use, const char *const *watch, size_t nwatch,
                  const char *input, size_t len);

/* The primary went away (or this node stepped down): until a target is set
 * again, for at most the hold bound, the proxy rides through the election
 * (bq_proxy_riding). */
void bq_proxy_primary_lost(bq_proxy_t *p);

/* True while no primary is known and it went away less than the hold bound
 * ago: the node still takes clients and holds them. */
bool bq_proxy_riding(const bq_proxy_t *p);

/* Takes ownership of accepted client socket fd: connects it to the target,
 * or closes it at once when there is none (or it cannot be reached). */
void bq_proxy_accept(bq_proxy_t *p, int fd);

/* Proxied connections open now. */
size_t bq_proxy_count(const bq_proxy_t *p);

/* Closes every proxied connection; the proxy stays usable. */
void bq_proxy_close_all(bq_proxy_t *p);

/* Shutdown: closes every connection and the proxy's timer. NULL is a
 * no-op. */
void bq_proxy_close(bq_proxy_t *p);

/* Closes everything (bq_proxy_close) and frees p once the loop has run the
 * close callbacks. NULL is a no-op. */
void bq_proxy_free(bq_proxy_t *p);

#endif
