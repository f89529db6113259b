/* Binlog segment files: DIR/bqlog.<seq> (seq decimal, from 1), each a
 * segment prefix (magic, version, a packed bq.log.SegmentHeader, see
 * protocol/frame.h) followed by frames and a zero tail, preallocated so that
 * writing inside it cannot fail for lack of space. Plus the directory lock
 * (DIR/lock). Plain POSIX file I/O, blocking; used at start-up, on rotation
 * and by replay, never per command. */
#ifndef BQ_NODE_SEGMENT_H
#define BQ_NODE_SEGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/frame.h"

/* What a segment header says. */
typedef struct bq_segment_meta {
    uint64_t seq;
    uint64_t first_lsn;
    uint64_t epoch;
    int64_t created_wall;
    char cluster_id[64];
    char node_id[64];
    bool checkpoint; /* it starts with a checkpoint (always, on a primary) */
} bq_segment_meta_t;

/* Opens a file of the data directory: never through a symlink
 * (O_NOFOLLOW), and only a regular file owned by this process's user and
 * writable by nobody else (another local user must not be able to make the
 * node read or write a file of its choosing). flags as open(2) (O_CLOEXEC
 * is added), mode for O_CREAT. The fd, or -1 with errno (ELOOP: a symlink;
 * EPERM: another owner or writable by others; EINVAL: not a regular file);
 * refusals other than ELOOP are logged. */
int bq_segment_open_file(const char *path, int flags, unsigned mode);

/* Takes DIR/lock with fcntl(F_SETLK) and keeps its fd open for the life of
 * the process. 0, or -1 with a message in err (another process holds it, or
 * the directory is missing or not writable). */
int bq_segment_lock_dir(const char *dir, char *err, size_t errlen);

/* Writes the path of segment seq of dir into buf. */
void bq_segment_path(char *buf, size_t cap, const char *dir, uint64_t seq);

/* Lists the segment numbers in dir, sorted ascending, into a malloc'd
 * array (*seqs, *n; free it). Sets *beanstalkd_files when the directory
 * also holds beanstalkd binlog files (binlog.<N>). 0, or -errno. */
int bq_segment_list(const char *dir, uint64_t **seqs, size_t *n, bool *beanstalkd_files);

/* Creates segment meta->seq in dir (it must not exist), writes its prefix,
 * preallocates `size` bytes in total, and syncs the file and the directory.
 * Returns the open fd (read-write) and sets *data_start to the offset of the
 * first frame; -errno on failure (nothing is left behind). */
int bq_segment_create(const char *dir, const bq_segment_meta_t *meta, uint64_t size,
                      uint64_t *data_start);

/* Extends the preallocation of an open segment to size bytes; 0 or
 * -errno (ENOSPC when the disk is full). */
int bq_segment_preallocate(int fd, uint64_t size);

/* Reads and checks the prefix of an open segment: fills *meta, sets
 * *data_start. 0, or -1 with a message in err (which does not name the
 * file: the caller has its path). */
int bq_segment_read_meta(int fd, bq_segment_meta_t *meta, uint64_t *data_start, char *err,
                         size_t errlen);

/* bq_segment_read_meta on the first avail bytes of a segment in memory:
 * BQ_SEGMENT_OK (0), or why the prefix is unusable with a message in err
 * (BQ_SEGMENT_SHORT: the file ends inside its prefix). */
bq_segment_status_t bq_segment_decode_meta(const uint8_t *buf, size_t avail,
                                           bq_segment_meta_t *meta, uint64_t *data_start, char *err,
                                           size_t errlen);

/* fsyncs directory dir (after creating, renaming or removing a file in
 * it). 0 or -errno. */
int bq_segment_sync_dir(const char *dir);

#endif
