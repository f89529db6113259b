/* A standby's full resync (see resync.h): the download of the primary's
 * segments into DIR/resync/bqlog.<n> (n from 1, in order, each created by
 * bq_segment_create with a small preallocation and trimmed to its data when
 * closed), its COMPLETE marker, and the switch at start-up.
 *
 * The switch moves through these states; each is made durable (fsync of
 * the files and directories concerned) before the next begins, so that a
 * crash anywhere leaves one of them, and bq_resync_install, run again,
 * finishes from there:
 *
 *   no DIR/resync            nothing to do: DIR holds the log to replay.
 *   DIR/resync, no COMPLETE  an unfinished download (or the end of an
 *                            install, below): DIR's own log is intact;
 *                            DIR/resync is removed.
 *   COMPLETE, no INSTALLING  the download is whole; DIR's bqlog.* are all
 *                            old (some may already be deleted): delete the
 *                            rest, fsync DIR, then create INSTALLING and
 *                            fsync DIR/resync.
 *   COMPLETE and INSTALLING  no old segment is left, so every DIR/bqlog.*
 *                            came from the download: rename the remaining
 *                            DIR/resync/bqlog.<n> to DIR/bqlog.<n>, fsync
 *                            DIR and DIR/resync, then remove COMPLETE first
 *                            (fsync DIR/resync): INSTALLING without COMPLETE
 *                            means everything is in place, and is cleaned up
 *                            like an unfinished download (removing
 *                            INSTALLING first would make the next start take
 *                            the new segments for old ones). Last, remove
 *                            DIR/resync and fsync DIR.
 *
 * DIR's other files (the lock, bqlog.<n>.corrupt-* evidence, beanstalkd's
 * binlog.<n>) are never touched. Blocking POSIX I/O. */
#include "node/binlog/resync.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/base/log.h"
#include "node/binlog/segment.h"

#define PATH_BYTES 4096
#define SUBDIR "resync"
#define COMPLETE "COMPLETE"
#define INSTALLING "INSTALLING"
#define PREALLOC ((uint64_t)1024 * 1024) /* per segment; trimmed to the data when closed */

struct bq_resync {
    char dir[PATH_BYTES];  /* DIR */
    char rdir[PATH_BYTES]; /* DIR/resync */
    char node_id[64], cluster_id[64];
    uint64_t seq;   /* the current segment's number; 0 before the first */
    int fd;         /* the current segment, -1 when none is open */
    uint64_t off;   /* where its next frame goes */
    uint64_t bytes; /* written to the download's files so far */
};

/* Writes "<dir>/<name>" into buf[PATH_BYTES]; -ENAMETOOLONG when it does not fit. */
static int join(char *buf, const char *dir, const char *name)
{
    return (size_t)snprintf(buf, PATH_BYTES, "%s/%s", dir, name) < PATH_BYTES ? 0 : -ENAMETOOLONG;
}

/* Logs a failed step on path and returns rc (-errno). */
static int fail(const char *what, const char *path, int rc)
{
    bq_log(BQ_LOG_ERROR, what, "path=\"%s\" err=\"%s\"", path, strerror(-rc));
    return rc;
}

/* 1 when path exists, 0 when it does not, -errno when that is unknown. */
static int exists(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        return 1;
    return errno == ENOENT ? 0 : -errno;
}

/* Removes directory path and the files in it (ENOENT is success). 0 or -errno. */
static int remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    struct dirent *de;
    char file[PATH_BYTES];
    while (rc == 0 && (errno = 0, de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        rc = join(file, path, de->d_name);
        if (rc == 0 && unlink(file) != 0)
            rc = -errno;
    }
    if (rc == 0 && errno != 0)
        rc = -errno;
    closedir(d);
    if (rc == 0 && rmdir(path) != 0)
        rc = -errno;
    return rc;
}

/* Creates the empty file path and syncs it (not its directory). 0 or -errno. */
static int create_marker(const char *path)
{
    int fd = bq_segment_open_file(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

/* Copies s into out[64]; false when it does not fit. */
static bool copy_id(char out[64], const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= 64)
        return false;
    memcpy(out, s ? s : "", n + 1);
    return true;
}

int bq_resync_begin(bq_resync_t **out, const char *dir, const char *node_id, const char *cluster_id)
{
    bq_resync_t *r = calloc(1, sizeof *r);
    if (!r)
        return fail("resync: out of memory", dir, -ENOMEM);
    r->fd = -1;
    int rc = -ENAMETOOLONG;
    if (strlen(dir) < sizeof r->dir && join(r->rdir, dir, SUBDIR) == 0) {
        memcpy(r->dir, dir, strlen(dir) + 1);
        rc = copy_id(r->node_id, node_id) && copy_id(r->cluster_id, cluster_id) ? 0 : -EINVAL;
    }
    if (rc != 0) {
        free(r);
        return fail("resync: bad directory path or node/cluster id", dir, rc);
    }
    if ((rc = remove_tree(r->rdir)) != 0)
        rc = fail("resync: cannot remove an earlier download", r->rdir, rc);
    else if (mkdir(r->rdir, 0700) != 0)
        rc = fail("resync: cannot create the download directory", r->rdir, -errno);
    else if ((rc = bq_segment_sync_dir(r->dir)) != 0)
        rc = fail("resync: cannot sync the binlog directory", r->dir, rc);
    if (rc != 0) {
        free(r);
        return rc;
    }
    bq_log(BQ_LOG_INFO, "resync: download started", "dir=\"%s\"", r->rdir);
    *out = r;
    return 0;
}

/* Trims the open segment to its data, syncs and closes it. 0 or -errno
 * (logged); the fd is closed in every case. */
static int close_segment(bq_resync_t *r)
{
    if (r->fd < 0)
        return 0;
    int rc = 0;
    if (ftruncate(r->fd, (off_t)r->off) != 0 || fsync(r->fd) != 0)
        rc = -errno;
    close(r->fd);
    r->fd = -1;
    if (rc != 0) {
        char path[PATH_BYTES];
        bq_segment_path(path, sizeof path, r->rdir, r->seq);
        fail("resync: cannot finish a downloaded segment", path, rc);
    }
    return rc;
}

int bq_resync_segment(bq_resync_t *r, uint64_t first_lsn, uint64_t epoch, int64_t created_wall,
                      bool checkpoint)
{
    int rc = close_segment(r);
    if (rc != 0)
        return rc;
    bq_segment_meta_t m;
    memset(&m, 0, sizeof m);
    m.seq = r->seq + 1;
    m.first_lsn = first_lsn;
    m.epoch = epoch;
    m.created_wall = created_wall;
    m.checkpoint = checkpoint;
    memcpy(m.node_id, r->node_id, sizeof m.node_id);
    memcpy(m.cluster_id, r->cluster_id, sizeof m.cluster_id);
    uint64_t start;
    int fd = bq_segment_create(r->rdir, &m, PREALLOC, &start);
    if (fd < 0) {
        char path[PATH_BYTES];
        bq_segment_path(path, sizeof path, r->rdir, m.seq);
        return fail("resync: cannot create a segment", path, fd);
    }
    r->seq = m.seq;
    r->fd = fd;
    r->off = start;
    r->bytes += start;
    return 0;
}

int bq_resync_frames(bq_resync_t *r, const uint8_t *data, size_t len)
{
    if (r->fd < 0)
        return fail("resync: frames before the first segment", r->rdir, -EINVAL);
    while (len > 0) {
        ssize_t w = pwrite(r->fd, data, len, (off_t)r->off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            char path[PATH_BYTES];
            bq_segment_path(path, sizeof path, r->rdir, r->seq);
            return fail("resync: cannot write a downloaded segment", path, -errno);
        }
        data += w;
        len -= (size_t)w;
        r->off += (uint64_t)w;
        r->bytes += (uint64_t)w;
    }
    return 0;
}

uint64_t bq_resync_bytes(const bq_resync_t *r)
{
    return r->bytes;
}

int bq_resync_finish(bq_resync_t *r)
{
    char marker[PATH_BYTES];
    int rc = close_segment(r);
    if (rc == 0 && r->seq == 0)
        rc = fail("resync: the download holds no segment", r->rdir, -EINVAL);
    if (rc == 0 && (rc = bq_segment_sync_dir(r->rdir)) != 0)
        fail("resync: cannot sync the download directory", r->rdir, rc);
    if (rc == 0 && (rc = join(marker, r->rdir, COMPLETE)) == 0 && (rc = create_marker(marker)) != 0)
        fail("resync: cannot write the COMPLETE marker", marker, rc);
    if (rc == 0 && (rc = bq_segment_sync_dir(r->rdir)) != 0)
        fail("resync: cannot sync the download directory", r->rdir, rc);
    if (rc == 0)
        bq_log(BQ_LOG_INFO, "resync: download complete; installed at the next start",
               "dir=\"%s\" segments=%" PRIu64 " bytes=%" PRIu64, r->rdir, r->seq, r->bytes);
    free(r);
    return rc;
}

void bq_resync_abort(bq_resync_t *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    int rc = remove_tree(r->rdir);
    if (rc != 0)
        fail("resync: cannot remove the download", r->rdir, rc);
    free(r);
}

/* Deletes dir's own segments (the old log) and syncs dir. 0 or -errno (logged). */
static int delete_old(const char *dir)
{
    uint64_t *seqs;
    size_t n;
    bool beanstalkd;
    int rc = bq_segment_list(dir, &seqs, &n, &beanstalkd);
    if (rc != 0)
        return fail("resync: cannot list the binlog directory", dir, rc);
    char path[PATH_BYTES];
    for (size_t i = 0; i < n && rc == 0; i++) {
        bq_segment_path(path, sizeof path, dir, seqs[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = fail("resync: cannot delete an old segment", path, -errno);
    }
    free(seqs);
    if (rc == 0 && (rc = bq_segment_sync_dir(dir)) != 0)
        fail("resync: cannot sync the binlog directory", dir, rc);
    return rc;
}

/* Renames every segment of rdir into dir, then syncs both. 0 or -errno (logged). */
static int move_in(const char *dir, const char *rdir)
{
    uint64_t *seqs;
    size_t n;
    bool beanstalkd;
    int rc = bq_segment_list(rdir, &seqs, &n, &beanstalkd);
    if (rc != 0)
        return fail("resync: cannot list the download", rdir, rc);
    char from[PATH_BYTES], to[PATH_BYTES];
    for (size_t i = 0; i < n && rc == 0; i++) {
        bq_segment_path(from, sizeof from, rdir, seqs[i]);
        bq_segment_path(to, sizeof to, dir, seqs[i]);
        if (rename(from, to) != 0)
            rc = fail("resync: cannot move a downloaded segment in", from, -errno);
    }
    free(seqs);
    if (rc == 0 && (rc = bq_segment_sync_dir(dir)) != 0)
        fail("resync: cannot sync the binlog directory", dir, rc);
    if (rc == 0 && (rc = bq_segment_sync_dir(rdir)) != 0)
        fail("resync: cannot sync the download directory", rdir, rc);
    return rc;
}

/* 1 when dir holds a segment, 0 when it holds none, -errno. */
static int has_segments(const char *dir)
{
    uint64_t *seqs;
    size_t n;
    bool beanstalkd;
    int rc = bq_segment_list(dir, &seqs, &n, &beanstalkd);
    if (rc != 0)
        return rc;
    free(seqs);
    return n > 0;
}

/* Removes rdir and syncs dir. 0 or -errno (logged). */
static int drop_download(const char *dir, const char *rdir)
{
    int rc = remove_tree(rdir);
    if (rc != 0)
        return fail("resync: cannot remove the download directory", rdir, rc);
    if ((rc = bq_segment_sync_dir(dir)) != 0)
        fail("resync: cannot sync the binlog directory", dir, rc);
    return rc;
}

/* The COMPLETE-state steps: old log out (unless INSTALLING says it is
 * gone), download in, markers and directory removed. 0 or -errno (logged). */
static int install_complete(const char *dir, const char *rdir, const char *complete)
{
    char installing[PATH_BYTES];
    int rc = join(installing, rdir, INSTALLING);
    int state = rc == 0 ? exists(installing) : rc;
    if (state < 0)
        return fail("resync: cannot check the INSTALLING marker", rdir, state);
    if (state == 0) {
        if ((rc = has_segments(rdir)) <= 0)
            return fail("resync: the complete download holds no segment", rdir,
                        rc < 0 ? rc : -ENOENT);
        if ((rc = delete_old(dir)) != 0)
            return rc;
        if ((rc = create_marker(installing)) != 0)
            return fail("resync: cannot write the INSTALLING marker", installing, rc);
        if ((rc = bq_segment_sync_dir(rdir)) != 0)
            return fail("resync: cannot sync the download directory", rdir, rc);
    }
    if ((rc = move_in(dir, rdir)) != 0)
        return rc;
    if (unlink(complete) != 0)
        return fail("resync: cannot remove the COMPLETE marker", complete, -errno);
    if ((rc = bq_segment_sync_dir(rdir)) != 0)
        return fail("resync: cannot sync the download directory", rdir, rc);
    return drop_download(dir, rdir);
}

int bq_resync_install(const char *dir)
{
    char rdir[PATH_BYTES], complete[PATH_BYTES];
    if (join(rdir, dir, SUBDIR) != 0 || join(complete, rdir, COMPLETE) != 0) {
        bq_log(BQ_LOG_ERROR, "resync: binlog directory path too long", "dir=\"%s\"", dir);
        return -1;
    }
    int state = exists(rdir);
    if (state == 1)
        state = exists(complete);
    else if (state == 0)
        return 0;
    if (state < 0) {
        fail("resync: cannot check the download directory", rdir, state);
        return -1;
    }
    if (state == 0) {
        bq_log(BQ_LOG_INFO, "resync: removing an unfinished download", "dir=\"%s\"", rdir);
        return drop_download(dir, rdir) == 0 ? 0 : -1;
    }
    bq_log(BQ_LOG_INFO, "resync: installing a complete download", "dir=\"%s\"", rdir);
    if (install_complete(dir, rdir, complete) != 0)
        return -1;
    bq_log(BQ_LOG_INFO, "resync: download installed", "dir=\"%s\"", dir);
    return 0;
}
