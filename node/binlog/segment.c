/* Binlog segment files and the directory lock (see segment.h): their names,
 * the listing of a directory, creating a segment (prefix, preallocated
 * zeros, synced file and directory) and reading its header back. Blocking
 * POSIX I/O, used at start-up, on rotation and by replay, never per
 * command. */
#include "node/binlog/segment.h"

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
#include "proto/binlog.pb-c.h"

#define SEGMENT_BASE "bqlog."
#define BEANSTALKD_BASE "binlog."
#define PATH_BYTES 4096

/* ---- opening files of the data directory ---- */

int bq_segment_open_file(const char *path, int flags, unsigned mode)
{
    int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    struct stat st;
    const char *why = NULL;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0)
        why = "cannot stat it";
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_uid != geteuid())
        why = "owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        why = "writable by its group or by others";
    if (!why)
        return fd;
    int e = why[0] == 'n' ? EINVAL : EPERM;
    bq_log(BQ_LOG_ERROR, "refusing a file of the data directory", "path=\"%s\" why=\"%s\"", path,
           why);
    close(fd);
    errno = e;
    return -1;
}

/* Explains why the lock is taken: by whom, if the system says. */
static void locked_message(int fd, const char *dir, char *err, size_t errlen)
{
    struct flock q;
    memset(&q, 0, sizeof q);
    q.l_type = F_WRLCK;
    q.l_whence = SEEK_SET;
    if (fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK)
        snprintf(err, errlen, "binlog directory %s is locked by another process (pid %ld)", dir,
                 (long)q.l_pid);
    else
        snprintf(err, errlen, "binlog directory %s is locked by another process", dir);
}

int bq_segment_lock_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "binlog directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "binlog directory %s is not a directory", dir);
        return -1;
    }
    char path[PATH_BYTES];
    if ((size_t)snprintf(path, sizeof path, "%s/lock", dir) >= sizeof path) {
        snprintf(err, errlen, "binlog directory %s: path too long", dir);
        return -1;
    }
    int fd = bq_segment_open_file(path, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "binlog directory %s: cannot open %s: %s", dir, path,
                 strerror(errno));
        return -1;
    }
    struct flock lk;
    memset(&lk, 0, sizeof lk);
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    if (fcntl(fd, F_SETLK, &lk) == 0)
        return 0; /* fd stays open: closing it would drop the lock */
    int e = errno;
    if (e == EACCES || e == EAGAIN)
        locked_message(fd, dir, err, errlen);
    else
        snprintf(err, errlen, "binlog directory %s: cannot lock %s: %s", dir, path, strerror(e));
    close(fd);
    return -1;
}

void bq_segment_path(char *buf, size_t cap, const char *dir, uint64_t seq)
{
    snprintf(buf, cap, "%s/" SEGMENT_BASE "%" PRIu64, dir, seq);
}

/* True when name is base followed by decimal digits only (no leading zero
 * when strict) that fit in a uint64_t; sets *seq. */
static bool numbered(const char *name, const char *base, bool strict, uint64_t *seq)
{
    size_t blen = strlen(base);
    if (strncmp(name, base, blen) != 0)
        return false;
    const char *p = name + blen;
    if (*p == '\0' || (strict && *p == '0'))
        return false;
    uint64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *seq = v;
    return true;
}

static int cmp_seq(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int bq_segment_list(const char *dir, uint64_t **seqs, size_t *n, bool *beanstalkd_files)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    uint64_t *v = NULL, seq;
    size_t len = 0, cap = 0;
    *beanstalkd_files = false;
    struct dirent *de;
    while ((errno = 0, de = readdir(d))) {
        if (numbered(de->d_name, BEANSTALKD_BASE, false, &seq))
            *beanstalkd_files = true;
        if (!numbered(de->d_name, SEGMENT_BASE, true, &seq))
            continue;
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            uint64_t *nv = realloc(v, ncap * sizeof *nv);
            if (!nv) {
                free(v);
                closedir(d);
                return -ENOMEM;
            }
            v = nv;
            cap = ncap;
        }
        v[len++] = seq;
    }
    int rc = errno ? -errno : 0;
    closedir(d);
    if (rc) {
        free(v);
        return rc;
    }
    if (len)
        qsort(v, len, sizeof *v, cmp_seq);
    *seqs = v;
    *n = len;
    return 0;
}

/* Writes meta's prefix into out (room for the largest prefix); returns its
 * length, or 0 when the header would be too large. */
static size_t pack_prefix(const bq_segment_meta_t *meta, uint8_t *out)
{
    Bq__Log__SegmentHeader h = BQ__LOG__SEGMENT_HEADER__INIT;
    uint8_t packed[BQ_SEGMENT_HEADER_MAX];
    h.seq = meta->seq;
    h.first_lsn = meta->first_lsn;
    h.epoch = meta->epoch;
    h.cluster_id = (char *)meta->cluster_id;
    h.node_id = (char *)meta->node_id;
    h.created_wall = meta->created_wall;
    h.checkpoint = meta->checkpoint;
    size_t n = bq__log__segment_header__get_packed_size(&h);
    if (n > sizeof packed)
        return 0;
    n = bq__log__segment_header__pack(&h, packed);
    return bq_segment_prefix(out, packed, (uint32_t)n);
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

int bq_segment_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

int bq_segment_create(const char *dir, const bq_segment_meta_t *meta, uint64_t size,
                      uint64_t *data_start)
{
    uint8_t prefix[BQ_SEGMENT_PREFIX_FIXED + BQ_SEGMENT_HEADER_MAX];
    size_t plen = pack_prefix(meta, prefix);
    if (plen == 0)
        return -EINVAL;
    if (size < plen)
        size = plen;
    if (size > (uint64_t)INT64_MAX)
        return -EFBIG;
    char path[PATH_BYTES];
    bq_segment_path(path, sizeof path, dir, meta->seq);
    int fd = bq_segment_open_file(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return -errno;
    int rc = write_all(fd, prefix, plen);
    if (rc == 0)
        rc = -posix_fallocate(fd, 0, (off_t)size);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (rc == 0)
        rc = bq_segment_sync_dir(dir);
    if (rc != 0) {
        close(fd);
        unlink(path);
        return rc;
    }
    *data_start = plen;
    return fd;
}

int bq_segment_preallocate(int fd, uint64_t size)
{
    if (size > (uint64_t)INT64_MAX)
        return -EFBIG;
    return -posix_fallocate(fd, 0, (off_t)size);
}

/* Copies the string s into out[cap]; false when it does not fit. */
static bool copy_id(char *out, size_t cap, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= cap)
        return false;
    memcpy(out, s ? s : "", n + 1);
    return true;
}

bq_segment_status_t bq_segment_decode_meta(const uint8_t *buf, size_t avail,
                                           bq_segment_meta_t *meta, uint64_t *data_start, char *err,
                                           size_t errlen)
{
    const uint8_t *hdr;
    uint32_t hlen;
    size_t plen;
    bq_segment_status_t st = bq_segment_prefix_decode(buf, avail, &hdr, &hlen, &plen);
    if (st != BQ_SEGMENT_OK) {
        snprintf(err, errlen, "segment prefix: %s", bq_segment_status_name(st));
        return st;
    }
    Bq__Log__SegmentHeader *h = bq__log__segment_header__unpack(NULL, hlen, hdr);
    if (!h) {
        snprintf(err, errlen, "segment header: not a valid SegmentHeader message");
        return BQ_SEGMENT_BAD_HEADER;
    }
    memset(meta, 0, sizeof *meta);
    meta->seq = h->seq;
    meta->first_lsn = h->first_lsn;
    meta->epoch = h->epoch;
    meta->created_wall = h->created_wall;
    meta->checkpoint = h->checkpoint;
    bool ok = copy_id(meta->cluster_id, sizeof meta->cluster_id, h->cluster_id) &&
              copy_id(meta->node_id, sizeof meta->node_id, h->node_id);
    bq__log__segment_header__free_unpacked(h, NULL);
    if (!ok) {
        snprintf(err, errlen, "segment header: cluster or node id longer than %zu bytes",
                 sizeof meta->node_id - 1);
        return BQ_SEGMENT_BAD_HEADER;
    }
    *data_start = plen;
    return BQ_SEGMENT_OK;
}

int bq_segment_read_meta(int fd, bq_segment_meta_t *meta, uint64_t *data_start, char *err,
                         size_t errlen)
{
    uint8_t buf[BQ_SEGMENT_PREFIX_FIXED + BQ_SEGMENT_HEADER_MAX];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t r = pread(fd, buf + got, sizeof buf - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read the segment prefix: %s", strerror(errno));
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (bq_segment_decode_meta(buf, got, meta, data_start, err, errlen) != BQ_SEGMENT_OK)
        return -1;
    return 0;
}
