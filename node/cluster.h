/* Cluster mode (--role): ties the node's binlog, engine and listeners to
 * replication. On the primary: the feeder streams the binlog to the
 * standbys and its commit point holds replies back (sync mode), and writes
 * are refused while the sync fallback says so. On a standby: the receiver
 * follows the primary into the binlog and the engine (no timers run, no
 * client is served: client connections are proxied to the primary), and a
 * full resync is downloaded beside the log, then installed by restarting
 * the process on it. Either way the node reports its replication status in
 * `stats` (extra keys after beanstalkd's) and periodically in the log. */
#ifndef BQ_NODE_CLUSTER_H
#define BQ_NODE_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "flags.h"
#include "protocol/engine.h"

typedef struct bq_server bq_server_t;
typedef struct bq_cluster bq_cluster_t;

/* Starts cluster mode for s (after its binlog started) as f says; argv is
 * the process's (borrowed: a standby restarts itself with it to install a
 * resync). 0 and a new cluster in *out, or -1 (logged). */
int bq_cluster_start(bq_cluster_t **out, bq_server_t *s, const bq_flags_t *f, char **argv);

/* True on a standby. */
bool bq_cluster_standby(const bq_cluster_t *c);

/* True while the primary refuses writes (sync fallback "refuse" in force). */
bool bq_cluster_refusing(const bq_cluster_t *c);

/* A client connection arrived on a standby: proxied (takes ownership of fd). */
void bq_cluster_accept(bq_cluster_t *c, int fd);

/* The LSN replies may be released up to, given the binlog's (primary). */
uint64_t bq_cluster_release(bq_cluster_t *c, uint64_t local);

/* The binlog wrote frames, or synced them. */
void bq_cluster_written(bq_cluster_t *c);
void bq_cluster_synced(bq_cluster_t *c);

/* Adds the cluster keys to a `stats` reply (info->extra points into c). */
void bq_cluster_fill_info(bq_cluster_t *c, bq_server_info_t *info);

/* Closes links, listeners and timers (shutdown). NULL is a no-op. */
void bq_cluster_close(bq_cluster_t *c);

/* Frees c after bq_cluster_close and after the loop ran the close
 * callbacks. NULL is a no-op. */
void bq_cluster_free(bq_cluster_t *c);

#endif
