/* A standby's full resync, crash-safe at every step. The primary's retained
 * segments (a compacted log of every live job) are downloaded into
 * DIR/resync/ while the standby's own log stays untouched; when the download
 * has caught up, it is fsynced and marked complete (DIR/resync/COMPLETE),
 * and the switch happens at the next start, under the directory lock, before
 * replay: bq_resync_install removes the old segments and moves the new ones
 * in. An incomplete download found at start-up is removed. Blocking file
 * I/O, on the standby's loop thread (a standby serves no clients itself). */
#ifndef BQ_NODE_RESYNC_H
#define BQ_NODE_RESYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bq_resync bq_resync_t;

/* Starts a download into DIR/resync/ (removing any earlier one). Segment
 * headers get node_id and cluster_id (borrowed, copied). 0 and a new
 * download in *out, or -errno (logged). */
int bq_resync_begin(bq_resync_t **out, const char *dir, const char *node_id,
                    const char *cluster_id);

/* The frames that follow belong to a new segment starting at first_lsn in
 * epoch (checkpoint: it starts with the primary's checkpoint). Closes the
 * previous segment of the download. 0 or -errno (logged). */
int bq_resync_segment(bq_resync_t *r, uint64_t first_lsn, uint64_t epoch, int64_t created_wall,
                      bool checkpoint);

/* Appends whole, checked frames data[0..len) to the current segment of the
 * download. 0 or -errno (logged). */
int bq_resync_frames(bq_resync_t *r, const uint8_t *data, size_t len);

/* Bytes written so far. */
uint64_t bq_resync_bytes(const bq_resync_t *r);

/* Fsyncs every file and the directories, then writes the COMPLETE marker
 * (fsynced): from then on the next start installs the download. Frees r in
 * every case. 0 or -errno (logged). */
int bq_resync_finish(bq_resync_t *r);

/* Drops the download (removes DIR/resync/) and frees r. NULL is a no-op. */
void bq_resync_abort(bq_resync_t *r);

/* At start-up, with DIR locked: installs a complete download (old segment
 * files removed, new ones renamed into DIR, marker and DIR/resync/ removed,
 * each step fsynced so a crash at any point leaves either the old log or a
 * complete download to install again) or removes an incomplete one. 0, or
 * -1 after logging why start-up must stop. */
int bq_resync_install(const char *dir);

#endif
