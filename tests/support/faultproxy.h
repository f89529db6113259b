/* A TCP fault proxy for cluster tests: it sits between two nodes (for
 * example standby -> proxy -> primary's replication port) and lets a test
 * stall, drop, black-hole or cut the link, or lose one direction only,
 * while both nodes keep running.
 *
 * The proxy listens on 127.0.0.1 on a free port and forwards every accepted
 * connection to one target, both directions, from its own thread (poll(), no
 * libuv). Every function but bqt_proxy_stop may be called from any thread
 * while the proxy runs. bqt_proxy_set and bqt_proxy_cut_after return once
 * the proxy thread has applied them, so a test can rely on their effect as
 * soon as they return. Counters are exact as soon as what they count can be
 * observed at either end (bytes read, a connection seen or closed). */
#ifndef BQ_FAULTPROXY_H
#define BQ_FAULTPROXY_H

#include <stddef.h>

/* Bytes buffered per direction and connection while a link is stalled;
 * beyond that the proxy stops reading from the sender. */
#define BQT_PROXY_BUFFER (64 * 1024)

typedef struct bqt_proxy bqt_proxy_t;

/* Directions, for cut_after and the byte counters. */
#define BQT_PROXY_UP 0   /* client -> target */
#define BQT_PROXY_DOWN 1 /* target -> client */

typedef enum bqt_proxy_mode {
    /* Forward normally; connections held by STALL or BLACKHOLE resume and
     * deliver what was buffered. */
    BQT_PROXY_PASS,
    /* Keep every connection open but forward nothing either way: bytes are
     * buffered (BQT_PROXY_BUFFER per direction), then the proxy stops
     * reading. New connections are accepted and held, and connected to the
     * target only once the mode returns to PASS. */
    BQT_PROXY_STALL,
    /* Close every connection at once (both sides); while the mode holds,
     * accept new connections and close them at once. */
    BQT_PROXY_DROP,
    /* A partition where SYNs still succeed: new connections are accepted,
     * never connected onward, and what they send is read and discarded, for
     * their whole life (also after the mode changes). Connections that were
     * open before are held as under STALL: TCP never loses bytes from the
     * middle of a stream, it delivers them late or resets. */
    BQT_PROXY_BLACKHOLE,
    /* One-way loss: bytes going client -> target (HOLD_UP) or target ->
     * client (HOLD_DOWN) are held as under STALL, the other direction
     * forwards, on every connection, current and new (new ones are
     * connected onward, so the target hears a new client, or the client
     * gets no answer). This is what TCP makes of a path that loses every
     * packet one way: the receiver gets nothing, its peer keeps talking,
     * and what was held arrives late once the mode returns to PASS. */
    BQT_PROXY_HOLD_UP,
    BQT_PROXY_HOLD_DOWN,
} bqt_proxy_mode_t;

/* Starts a proxy in PASS mode on 127.0.0.1:<free port> that forwards to
 * target_host:target_port (resolved once, now). Returns new; free with
 * bqt_proxy_stop. NULL, with a message on stderr, on failure. */
bqt_proxy_t *bqt_proxy_start(const char *target_host, int target_port);

/* The port the proxy listens on (127.0.0.1). */
int bqt_proxy_port(const bqt_proxy_t *p);

/* Switches every connection, current and new, to mode; returns once the
 * proxy thread has applied it (after DROP: every connection is closed). */
void bqt_proxy_set(bqt_proxy_t *p, bqt_proxy_mode_t mode);

/* Forwards exactly nbytes more in direction (BQT_PROXY_UP or _DOWN) on every
 * connection the proxy has accepted (black-holed ones excepted), then closes
 * both sides of that connection; with none open, arms the next accepted
 * connection instead. A later call for the same direction replaces it. */
void bqt_proxy_cut_after(bqt_proxy_t *p, int direction, size_t nbytes);

/* Total bytes delivered to the destination in direction so far. */
size_t bqt_proxy_bytes(bqt_proxy_t *p, int direction);

/* Connections accepted so far, including those closed at once under DROP. */
int bqt_proxy_connections(bqt_proxy_t *p);

/* Connections open now (accepted and not yet closed by the proxy). */
int bqt_proxy_open(bqt_proxy_t *p);

/* Closes every connection and the listener, joins the thread and frees p.
 * NULL is allowed. */
void bqt_proxy_stop(bqt_proxy_t *p);

#endif
