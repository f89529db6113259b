/* The parts of the standby's client proxy shared by its files: proxy.c
 * (accepting, connecting, copying bytes both ways, closing) and
 * proxy_move.c (holding a client whose primary went away, moving it to the
 * next one with its session, handing clients over to this node). Not for
 * other files: their contract is proxy.h. */
#ifndef BQ_NODE_PROXY_INTERNAL_H
#define BQ_NODE_PROXY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "node/base/list.h"
#include "node/base/log.h"
#include "node/cluster/proxy.h"
#include "protocol/mirror.h"
#include "replication/resolve.h"

#define READ_BUF_SIZE ((size_t)64 * 1024)
#define QUEUE_HIGH ((size_t)1024 * 1024) /* stop reading a side above this backlog */
#define QUEUE_LOW ((size_t)256 * 1024)   /* resume it below this */
#define RESOLVE_MS 5000                  /* a lookup of the primary's name gives up after this */
#define RETRY_MS 250                     /* a held client tries its target again after this */

typedef struct pconn pconn_t;

/* One end of a proxied connection. */
typedef struct side {
    uv_tcp_t tcp;
    pconn_t *c;
    uv_shutdown_t shutdown;
    bool eof;       /* the peer sent EOF: nothing more to read */
    bool paused;    /* reading stopped: too much waits for the other side */
    bool shut_done; /* our write half of this side is shut down */
} side_t;

/* A write request owning its bytes. */
typedef struct wreq {
    uv_write_t req;
    size_t len;
    char data[];
} wreq_t;

struct pconn {
    side_t client, target;
    bq_proxy_t *p;
    bq_list_t link; /* in p->conns until closing */
    uv_connect_t connect;
    bq_resolve_t *resolve;      /* the lookup of the target's name, until its callback */
    struct addrinfo *addrs;     /* the resolved target, NULL for a numeric one */
    struct addrinfo *next_addr; /* the address to try when the current one fails */
    wreq_t *early;              /* client bytes read before the target connected */
    size_t early_cap;
    int handles;    /* handles whose close callback has not run */
    bool resetting; /* the target handle is closing to try the next address */
    bool connected;
    bool connecting; /* a lookup or connect to the target is in progress */
    bool closing;
    bq_mirror_t *m;       /* the client's session as seen here */
    uint64_t held_at;     /* loop ms when its target went away; 0 when not held */
    uint64_t stale_at;    /* loop ms since its target stopped being the primary while a
                             change was in flight (it stays there until the reply); 0: not */
    size_t restores_kept; /* held: restore commands at the front of early */
    unsigned gen;         /* the proxy's target generation it last connected to */
};

struct bq_proxy {
    uv_loop_t *loop;
    uint64_t hold_ms;  /* a client waits this long at most for a new target */
    uv_timer_t timer;  /* retries and bounds held clients */
    unsigned gen;      /* bumped by every change of the target */
    char *host, *port; /* the target; NULL when none is known */
    uint64_t lost_at;  /* loop ms when the primary went away; 0 while one is known */
    bq_list_t conns;
    size_t count; /* connections in conns */
    size_t live;  /* connections not freed yet */
    bool dying;   /* bq_proxy_free was called */
    bool closed;  /* bq_proxy_close was called */
    bq_log_limit_t limit;
    char buf[READ_BUF_SIZE]; /* every read lands here and is copied out at once */
};

static inline side_t *bq__proxy_other(side_t *s)
{
    return s == &s->c->client ? &s->c->target : &s->c->client;
}

static inline uv_stream_t *bq__proxy_stream(side_t *s)
{
    return (uv_stream_t *)&s->tcp;
}

/* proxy.c: counts a closed handle of its connection, freeing it after the
 * last one. */
void bq__proxy_on_closed(uv_handle_t *h);

/* proxy.c: closes both sides of c now (pending writes dropped). */
void bq__proxy_conn_close(pconn_t *c);

/* proxy.c: a new connection for the client socket fd (owned: closed on
 * failure), reading from it, with no target yet; NULL (logged) when it
 * cannot be set up. */
pconn_t *bq__proxy_conn_new(bq_proxy_t *p, int fd);

/* proxy.c: closes c after a failure (what, a libuv error), logged at debug. */
void bq__proxy_conn_fail(pconn_t *c, const char *what, int err);

/* proxy.c: appends data to the bytes kept for a target not connected yet;
 * 0 or UV_ENOMEM. */
int bq__proxy_keep_early(pconn_t *c, const char *data, size_t n);

/* proxy.c: shuts down the write half of s after its queued writes. */
void bq__proxy_shut_side(side_t *s);

/* proxy.c: starts connecting c to the proxy's target (a lookup first for a
 * name). 0 or a libuv error. */
int bq__proxy_start_connect(pconn_t *c);

/* proxy.c: the target handle h closed to be made again: false (its close
 * counted) when its connection is closing meanwhile, else *cp has a fresh
 * target handle. */
bool bq__proxy_target_reopened(uv_handle_t *h, pconn_t **cp);

/* proxy_move.c: the target of c went away (what: why, err: a libuv error
 * or 0; eof: it closed): c is held, or closed. */
void bq__proxy_target_lost(pconn_t *c, const char *what, int err, bool eof);

/* proxy_move.c: the primary changed (or went away) under connected client
 * c: moved (held) now when nothing durable is in flight, else left on its
 * old target until the reply comes back (bq__proxy_stale_reply), for at
 * most the hold bound. */
void bq__proxy_primary_changed(pconn_t *c);

/* proxy_move.c: target bytes reached stale client c: moved once it can. */
void bq__proxy_stale_reply(pconn_t *c);

/* proxy_move.c: a new client (nothing sent anywhere yet) waits for a target. */
void bq__proxy_hold_new(pconn_t *c);

/* proxy_move.c: connects held client c to the current target. */
void bq__proxy_start_held(pconn_t *c);

/* proxy_move.c: the hold timer: retries held clients, closes late ones. */
void bq__proxy_on_hold_timer(uv_timer_t *t);

#endif
