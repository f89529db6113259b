/* Admission of connections to a listener that strangers can reach (the
 * replication port, the admin API): whom a new connection may take the
 * place of, so that no one source, and no flood of sources, can hold every
 * slot with connections that never prove anything. Pure: the caller
 * describes its connections and applies the decision.
 *
 * Rules, for a new connection from source S:
 *   1. S already holds max_per_source evictable connections (NEW or IDLE):
 *      its oldest one makes room (a source competes with itself first);
 *   2. else, when max_total connections are open, the oldest evictable one
 *      of any source makes room;
 *   3. else the new connection is simply admitted.
 * A connection that never became evictable again (BUSY: a request being
 * answered; TRUSTED: a peer that proved its identity) is never evicted; when
 * only such connections fill the listener, the new one is refused.
 * Oldest means the longest in its current state. */
#ifndef BQ_REPL_ADMIT_H
#define BQ_REPL_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BQ_ADMIT_SOURCE_MAX 64 /* an address as text ("[::ffff:1.2.3.4]" fits) */

typedef enum bq_admit_state {
    BQ_ADMIT_NEW = 0, /* nothing proven yet: TLS handshake, no hello or request */
    BQ_ADMIT_IDLE,    /* an anonymous client between requests (keep-alive) */
    BQ_ADMIT_BUSY,    /* a request is being answered */
    BQ_ADMIT_TRUSTED, /* an authenticated peer */
} bq_admit_state_t;

typedef struct bq_admit_entry {
    char source[BQ_ADMIT_SOURCE_MAX]; /* the client's address, without port */
    bq_admit_state_t state;
    int64_t since; /* when it entered its state (any monotonic clock) */
} bq_admit_entry_t;

typedef struct bq_admit_limits {
    size_t max_total;      /* connections open at once, >= 1 */
    size_t max_per_source; /* evictable connections per source, >= 1 */
} bq_admit_limits_t;

typedef struct bq_admit_decision {
    bool admit;      /* false: refuse the new connection */
    long evict;      /* index of the connection to close first, or -1 */
    bool per_source; /* the eviction is rule 1 (the source's own) */
} bq_admit_decision_t;

/* Decides for a new connection from source, given the n open ones. */
bq_admit_decision_t bq_admit_decide(const bq_admit_entry_t *open, size_t n, const char *source,
                                    const bq_admit_limits_t *lim);

/* True for the states a new connection may take the place of. */
bool bq_admit_evictable(bq_admit_state_t st);

#endif
