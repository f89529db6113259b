/* Which name beanstalkctl requires of a node's TLS certificate, decided
 * purely from the node as written, its URL's host and beanstalkctl's own
 * client certificate's names (no I/O: the caller reads the certificate).
 *
 * Every node's certificate names its node id as a DNS subjectAltName
 * (`beanstalkctl certs`). With TLS (--tls-ca given), the server's
 * certificate must name, in a DNS subjectAltName (never the subject CN,
 * never through a wildcard):
 *   - ID, for a node written ID=HOST:PORT (or ID=URL);
 *   - else the URL's host, when it is a DNS name;
 *   - else (an IP address) the one name of beanstalkctl's own client
 *     certificate, when it names exactly one node id and that is not
 *     `beanstalkctl`: a node handing itself off with its own certificate;
 *   - else nothing can be expected: the node is refused before any
 *     connection, with a message asking for ID=HOST:PORT. */
#ifndef BQ_CTL_VERIFY_H
#define BQ_CTL_VERIFY_H

#include <stdbool.h>
#include <stddef.h>

/* beanstalkctl's own certificate's names: its DNS subjectAltNames. */
typedef struct bq_ctl_own {
    const char *const *names; /* borrowed */
    size_t n;
    const char *error; /* why the certificate could not be read; NULL when it was */
} bq_ctl_own_t;

/* NULL when id is a node id - 1 to 64 bytes of letters, digits, '.', '_'
 * and '-', not starting with '.' or '-', neither "ca" nor "beanstalkctl" -
 * else why not (a static string: "bad", "reserved"). */
const char *bq_ctl_verify_id_problem(const char *id);

/* Whether host (as in a URL: an IPv6 address in brackets) is an IP
 * address rather than a DNS name. inet_aton's forms count ("127.1"). */
bool bq_ctl_verify_is_ip(const char *host);

/* Whether the expected name of a node with this id (NULL: none given) at
 * this host has to come from beanstalkctl's own certificate. */
bool bq_ctl_verify_needs_own(const char *id, const char *host);

/* The name the TLS certificate of the node at base URL url (its host as
 * libcurl parses it: host), written with id (NULL: without), must carry;
 * own: beanstalkctl's certificate's names (read only when needs_own said
 * so; NULL otherwise). Returns 0 with *name (borrowed from id, host or
 * own); -EINVAL when no name can be expected (refuse: err says to write
 * ID=HOST:PORT); -EIO when own->error (err says so). */
int bq_ctl_verify_expect(const char *url, const char *id, const char *host, const bq_ctl_own_t *own,
                         const char **name, char *err, size_t errlen);

#endif
