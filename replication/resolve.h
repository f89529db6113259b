/* Name resolution on the loop, with c-ares: no thread is ever held by a
 * lookup (libuv's uv_getaddrinfo runs getaddrinfo(3) on the shared
 * threadpool, and a DNS server that drops queries holds a pool thread for
 * a minute or more, with no way to cancel it; four of them held every
 * thread, and shutdown waited for them). Every lookup has a deadline and
 * can be cancelled at once; a peer's name is resolved again on every
 * connect (pod addresses change). /etc/hosts is read first, then the DNS
 * servers of /etc/resolv.conf (1 s per try, 2 tries each).
 *
 * Ownership: a lookup (bq_resolve_t) belongs to this module; the caller
 * holds the pointer until the callback runs or it calls bq_resolve_cancel,
 * whichever comes first, and must not use it afterwards. The address list
 * given to the callback belongs to the caller (bq_resolve_free). */
#ifndef BQ_REPL_RESOLVE_H
#define BQ_REPL_RESOLVE_H

#include <netdb.h>
#include <stdint.h>

#include <uv.h>

typedef struct bq_resolve bq_resolve_t;

/* The result of a lookup, on the loop thread, never from within
 * bq_resolve_start: status 0 with addrs (a list in the order to try, TCP
 * socket type, port set; owned by the callee), or a negative libuv error
 * (UV_EAI_NONAME: no such name, UV_ETIMEDOUT: no answer in time,
 * UV_EAI_FAIL, UV_ENOMEM) with addrs NULL. */
typedef void (*bq_resolve_cb)(void *arg, int status, struct addrinfo *addrs);

/* Starts resolving host (a name or a numeric address) with service port
 * (a number), for at most timeout_ms; *out is the lookup. 0, or a negative
 * libuv error (no lookup then, no callback). */
int bq_resolve_start(uv_loop_t *loop, const char *host, const char *port, uint64_t timeout_ms,
                     bq_resolve_cb cb, void *arg, bq_resolve_t **out);

/* Cancels q before its callback: the callback never runs. NULL is a no-op. */
void bq_resolve_cancel(bq_resolve_t *q);

/* Frees a list given to a callback. NULL is a no-op. */
void bq_resolve_free(struct addrinfo *addrs);

/* Lookups started and not yet torn down (their handles closed), for tests
 * and leak checks. */
size_t bq_resolve_live(void);

#endif
