/* A DNS server for tests, on 127.0.0.1 (UDP) in a thread of its own: it
 * answers every A query with 127.0.0.1 and every other query with no
 * record, or holds the queries unanswered (for ever, or until told to
 * answer them). Point the server under test at it with
 * BQ_TEST_DNS_SERVERS=127.0.0.1:<port> (replication/resolve.c, test builds
 * only) and use names that /etc/hosts does not have. */
#ifndef BQ_TEST_FAKEDNS_H
#define BQ_TEST_FAKEDNS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct bqt_dns bqt_dns_t;

/* Starts a server on a free port of 127.0.0.1; NULL on failure. */
bqt_dns_t *bqt_dns_start(void);

/* Its port. */
int bqt_dns_port(const bqt_dns_t *d);

/* hold: queries from now on are kept unanswered; !hold: the kept ones are
 * answered now, and later ones at once. */
void bqt_dns_hold(bqt_dns_t *d, bool hold);

/* Queries from now on about names whose first label is label ("n1" for
 * n1.dns.test) are never answered, as a resolver that has lost a dead
 * pod's name behaves; NULL or "": none. */
void bqt_dns_drop(bqt_dns_t *d, const char *label);

/* Queries received so far (answered, held or dropped). */
size_t bqt_dns_queries(bqt_dns_t *d);

/* Stops the thread, closes the socket and frees d. NULL is a no-op. */
void bqt_dns_stop(bqt_dns_t *d);

#endif
