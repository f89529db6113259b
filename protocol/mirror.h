/* A client's session as a proxy sees it (node/cluster/proxy.c): the
 * commands it sends (framed and parsed with parse.h, the same parser as
 * the server's) and the replies that come back, so that the proxy knows
 * at any moment the tube the client uses, the tubes it watches and the
 * commands still waiting for their reply. When the primary behind the
 * proxy changes, a client with no change in flight is moved: its session
 * is restored on the new primary with use/watch/ignore commands whose
 * replies are swallowed, its commands in flight (reserves and reads, which
 * changed nothing durable) and its partial command line are sent again,
 * and it goes on over the same TCP connection. A change in flight (put,
 * delete, release, bury, touch, kick, kick-job, pause-tube) may have been
 * done already: such a client is closed, its outcome unknown, as a broken
 * connection always left it. Later commands get the new primary's replies
 * for the jobs' states there (a delete of a job reserved through the old
 * primary finds it ready and deletes it; a release or bury: NOT_FOUND).
 *
 * Pure: no allocation beyond its own state, no I/O. Anything it does not
 * follow (a line longer than the protocol allows, a reply with no command,
 * a put with text after its size, more than BQ_MIRROR_MAX_WATCH watched
 * tubes or BQ_MIRROR_MAX_PENDING commands in flight) makes it lost: such a
 * client is never moved, only closed. */
#ifndef BQ_MIRROR_H
#define BQ_MIRROR_H

#include <stdbool.h>
#include <stddef.h>

#define BQ_MIRROR_MAX_WATCH 256
#define BQ_MIRROR_MAX_PENDING 1024

typedef struct bq_mirror bq_mirror_t;

/* A new mirror of a fresh session (using and watching `default`); NULL
 * when out of memory. */
bq_mirror_t *bq_mirror_new(void);

/* Sets the session m mirrors to one that uses `use` and watches
 * watch[0..nwatch) in that order (a session served locally until now,
 * handed to the proxy): 0, or -1 (m unchanged) when out of memory or out
 * of bounds. */
int bq_mirror_set_session(bq_mirror_t *m, const char *use, const char *const *watch, size_t nwatch);

/* Commands the client sent whose reply has not come (restores not
 * counted). */
size_t bq_mirror_unanswered(const bq_mirror_t *m);

/* Frees m. NULL is a no-op. */
void bq_mirror_free(bq_mirror_t *m);

/* The client sent data[0..n) towards the server. */
void bq_mirror_client(bq_mirror_t *m, const char *data, size_t n);

/* The server sent data[0..n) back. Returns how many leading bytes belong to
 * replies of restore commands (bq_mirror_restore): the proxy drops them.
 * A restore command that did not succeed makes the mirror lost. */
size_t bq_mirror_server(bq_mirror_t *m, const char *data, size_t n);

/* True when m no longer follows the session (see above). */
bool bq_mirror_lost(const bq_mirror_t *m);

/* True while replies of restore commands are still expected. */
bool bq_mirror_restoring(const bq_mirror_t *m);

/* Commands sent whose reply has not fully come back. */
size_t bq_mirror_pending(const bq_mirror_t *m);

/* True when the session may move to another server now: m follows it, no
 * reply is partly received, no put body is partly sent, and no command in
 * flight changes anything durable. */
bool bq_mirror_movable(const bq_mirror_t *m);

/* The tube used now (borrowed). */
const char *bq_mirror_use(const bq_mirror_t *m);

/* The watched tubes: how many, and tube i (borrowed). */
size_t bq_mirror_nwatch(const bq_mirror_t *m);
const char *bq_mirror_watch(const bq_mirror_t *m, size_t i);

/* For a movable m: the bytes to send to the new server, in a new buffer
 * (*out, malloc'd, *len bytes): the commands that restore the session
 * there (use, watch, ignore default), whose replies bq_mirror_server then
 * swallows, the commands in flight again, and the partial command line.
 * *restores is the number of restore commands (replies the caller must
 * drop itself when it feeds the bytes to a local session instead, as a
 * node that becomes the primary does). 0, or -1 when m is not movable or
 * out of memory. */
int bq_mirror_restore(bq_mirror_t *m, char **out, size_t *len, size_t *restores);

#endif
