/* On a standby, client connections are proxied to the primary's client
 * port, so clients may connect to any node. Bytes are copied both ways
 * unchanged; when either side closes, the other is closed. With no primary
 * known, a new connection is closed at once so the client retries; when the
 * primary changes or is lost, every proxied connection is closed. Reading
 * from one side pauses while the other side's write queue is above a bound,
 * so a slow peer cannot make the proxy buffer without limit. */
#ifndef BQ_NODE_PROXY_H
#define BQ_NODE_PROXY_H

#include <stddef.h>
#include <uv.h>

typedef struct bq_proxy bq_proxy_t;

/* A proxy on loop with no target. Returns new (free with bq_proxy_free) or
 * NULL when out of memory. */
bq_proxy_t *bq_proxy_new(uv_loop_t *loop);

/* Sets where new connections go (host and port are copied); NULL host: no
 * primary known. A change closes every open proxied connection. */
void bq_proxy_set_target(bq_proxy_t *p, const char *host, const char *port);

/* Takes ownership of accepted client socket fd: connects it to the target,
 * or closes it at once when there is none (or it cannot be reached). */
void bq_proxy_accept(bq_proxy_t *p, int fd);

/* Proxied connections open now. */
size_t bq_proxy_count(const bq_proxy_t *p);

/* Closes every proxied connection; the proxy stays usable. */
void bq_proxy_close_all(bq_proxy_t *p);

/* Closes everything and frees p once the loop has run the close callbacks
 * (call before the loop's last uv_run). NULL is a no-op. */
void bq_proxy_free(bq_proxy_t *p);

#endif
