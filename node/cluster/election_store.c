/* DIR/election (see election_store.h): the node's epoch, vote, epoch
 * history and (a witness's) floor as one binlog frame (LSN 0, the state's
 * epoch) around a packed bq.log.ElectionState. Saving writes
 * DIR/election.tmp, syncs it, renames it
 * over DIR/election and syncs the directory, so a crash at any point leaves
 * the old file or the new one. Loading trusts nothing: a file that is not
 * exactly one valid frame holding a well-formed state is damaged. Blocking
 * POSIX I/O, used at start-up and when an election changes the state. */
#include "node/cluster/election_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/binlog.pb-c.h"
#include "protocol/frame.h"
#include "node/binlog/segment.h"

#define PATH_BYTES 4096
#define FILE_NAME "election"
#define TMP_NAME "election.tmp"
/* Real files stay under 200 KB (a full history of long names); anything
 * larger is not one of ours. */
#define FILE_MAX (1024u * 1024u)

/* Writes DIR/name into buf; false (errno ENAMETOOLONG) when it does not fit. */
static bool path_of(char *buf, const char *dir, const char *name)
{
    if ((size_t)snprintf(buf, PATH_BYTES, "%s/%s", dir, name) >= PATH_BYTES) {
        errno = ENAMETOOLONG;
        return false;
    }
    return true;
}

static void set_empty(bq_election_state_t *st)
{
    memset(st, 0, sizeof *st);
}

/* Copies s into out[BQ_ESTORE_NAME_MAX]; false when it does not fit. */
static bool copy_name(char *out, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= BQ_ESTORE_NAME_MAX)
        return false;
    memcpy(out, s ? s : "", n);
    out[n] = '\0';
    return true;
}

static bool name_ok(const char *s)
{
    return strnlen(s, BQ_ESTORE_NAME_MAX) < BQ_ESTORE_NAME_MAX;
}

/* The rules load enforces, so that save never writes what load refuses:
 * names terminated, no epoch above BQ_EPOCH_MAX (none can be reached: a
 * file that names one was written by a version before the bound, or by
 * hand), at most BQ_ESTORE_HISTORY_MAX epochs, strictly
 * ascending, first_lsn non-decreasing. */
static bool state_ok(const bq_election_state_t *st)
{
    if (!name_ok(st->voted_for) || st->nhist > BQ_ESTORE_HISTORY_MAX || st->epoch > BQ_EPOCH_MAX ||
        st->floor_epoch > BQ_EPOCH_MAX)
        return false;
    for (size_t i = 0; i < st->nhist; i++) {
        if (!name_ok(st->hist[i].node) || st->hist[i].epoch > BQ_EPOCH_MAX)
            return false;
        if (i > 0 && (st->hist[i].epoch <= st->hist[i - 1].epoch ||
                      st->hist[i].first_lsn < st->hist[i - 1].first_lsn))
            return false;
    }
    return true;
}

/* Packs *st into a new frame (malloc'd, *len bytes; free it). NULL with
 * errno ENOMEM. */
static uint8_t *pack_frame(const bq_election_state_t *st, size_t *len)
{
    /* The empty state packs to no bytes, and a frame needs at least one:
     * write its epoch (0) explicitly, a valid encoding of the same message. */
    static const uint8_t empty[] = {0x08, 0x00};
    Bq__Log__ElectionState m = BQ__LOG__ELECTION_STATE__INIT;
    Bq__Log__EpochStart *items = calloc(st->nhist ? st->nhist : 1, sizeof *items);
    Bq__Log__EpochStart **ptrs = calloc(st->nhist ? st->nhist : 1, sizeof *ptrs);
    uint8_t *frame = NULL;
    if (!items || !ptrs)
        goto done;
    for (size_t i = 0; i < st->nhist; i++) {
        bq__log__epoch_start__init(&items[i]);
        items[i].epoch = st->hist[i].epoch;
        items[i].first_lsn = st->hist[i].first_lsn;
        items[i].node_id = (char *)st->hist[i].node;
        ptrs[i] = &items[i];
    }
    m.epoch = st->epoch;
    m.voted_for = (char *)st->voted_for;
    m.n_history = st->nhist;
    m.history = ptrs;
    m.floor_epoch = st->floor_epoch;
    m.floor_lsn = st->floor_lsn;
    size_t plen = bq__log__election_state__get_packed_size(&m);
    frame = malloc(BQ_FRAME_HEADER + (plen ? plen : sizeof empty));
    if (!frame)
        goto done;
    if (plen) {
        plen = bq__log__election_state__pack(&m, frame + BQ_FRAME_HEADER);
    } else {
        memcpy(frame + BQ_FRAME_HEADER, empty, sizeof empty);
        plen = sizeof empty;
    }
    bq_frame_header(frame, 0, st->epoch, frame + BQ_FRAME_HEADER, (uint32_t)plen);
    *len = BQ_FRAME_HEADER + plen;
done:
    free(items);
    free(ptrs);
    if (!frame)
        errno = ENOMEM;
    return frame;
}

/* Writes buf[0..len) whole; 0, or -1 with errno set. */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Creates path with buf[0..len), synced and closed; 0, or -1 with errno
 * set (the caller removes the file). */
static int write_file(const char *path, const uint8_t *buf, size_t len)
{
    int fd = bq_segment_open_file(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0)
        return -1;
    if (write_all(fd, buf, len) != 0 || fdatasync(fd) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}

bq_estore_status_t bq_estore_save(const char *dir, const bq_election_state_t *st)
{
    char path[PATH_BYTES], tmp[PATH_BYTES];
    if (!path_of(path, dir, FILE_NAME) || !path_of(tmp, dir, TMP_NAME))
        return BQ_ESTORE_IO;
    if (!state_ok(st)) {
        errno = EINVAL;
        return BQ_ESTORE_IO;
    }
    size_t len;
    uint8_t *frame = pack_frame(st, &len);
    if (!frame)
        return BQ_ESTORE_IO;
    int rc = write_file(tmp, frame, len);
    if (rc == 0)
        rc = rename(tmp, path);
    int e = errno;
    free(frame);
    if (rc != 0) {
        unlink(tmp);
        errno = e;
        return BQ_ESTORE_IO;
    }
    return sync_dir(dir) == 0 ? BQ_ESTORE_OK : BQ_ESTORE_IO;
}

/* Reads fd to its end into buf[0..cap); *n bytes read (cap when the file
 * is at least that long). 0, or -1 with errno set. */
static int read_all(int fd, uint8_t *buf, size_t cap, size_t *n)
{
    *n = 0;
    while (*n < cap) {
        ssize_t r = read(fd, buf + *n, cap - *n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        *n += (size_t)r;
    }
    return 0;
}

/* Fills *st from an unpacked message; false when it breaks a rule. */
static bool from_message(const Bq__Log__ElectionState *m, bq_election_state_t *st)
{
    if (m->n_history > BQ_ESTORE_HISTORY_MAX || !copy_name(st->voted_for, m->voted_for))
        return false;
    st->epoch = m->epoch;
    st->floor_epoch = m->floor_epoch;
    st->floor_lsn = m->floor_lsn;
    st->nhist = m->n_history;
    for (size_t i = 0; i < m->n_history; i++) {
        const Bq__Log__EpochStart *h = m->history[i];
        if (!copy_name(st->hist[i].node, h->node_id))
            return false;
        st->hist[i].epoch = h->epoch;
        st->hist[i].first_lsn = h->first_lsn;
    }
    return state_ok(st);
}

/* Decodes the file's bytes buf[0..n) into *st (left empty when damaged). */
static bq_estore_status_t decode(const uint8_t *buf, size_t n, bq_election_state_t *st)
{
    bq_frame_t f;
    const uint8_t *payload;
    if (n > FILE_MAX || bq_frame_decode(buf, n, &f, &payload) != BQ_FRAME_OK ||
        n - BQ_FRAME_HEADER != f.len || f.lsn != 0)
        return BQ_ESTORE_DAMAGED;
    Bq__Log__ElectionState *m = bq__log__election_state__unpack(NULL, f.len, payload);
    if (!m)
        return BQ_ESTORE_DAMAGED;
    bool ok = m->epoch == f.epoch && from_message(m, st);
    bq__log__election_state__free_unpacked(m, NULL);
    if (!ok) {
        set_empty(st);
        return BQ_ESTORE_DAMAGED;
    }
    return BQ_ESTORE_OK;
}

bq_estore_status_t bq_estore_load(const char *dir, bq_election_state_t *st)
{
    char path[PATH_BYTES], tmp[PATH_BYTES];
    set_empty(st);
    if (!path_of(path, dir, FILE_NAME) || !path_of(tmp, dir, TMP_NAME))
        return BQ_ESTORE_IO;
    /* A save that crashed before its rename: the file it meant to replace
     * is still whole. */
    if (unlink(tmp) != 0 && errno != ENOENT)
        return BQ_ESTORE_IO;
    int fd = bq_segment_open_file(path, O_RDONLY, 0);
    if (fd < 0)
        return errno == ENOENT ? BQ_ESTORE_ABSENT : BQ_ESTORE_IO;
    uint8_t *buf = malloc(FILE_MAX + 1);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return BQ_ESTORE_IO;
    }
    size_t n;
    int rc = read_all(fd, buf, FILE_MAX + 1, &n);
    int e = errno;
    close(fd);
    bq_estore_status_t s = rc == 0 ? decode(buf, n, st) : BQ_ESTORE_IO;
    free(buf);
    errno = e;
    return s;
}

int bq_estore_add_epoch(bq_election_state_t *st, uint64_t epoch, uint64_t first_lsn,
                        const char *node)
{
    for (size_t i = 0; i < st->nhist; i++) {
        if (st->hist[i].epoch == epoch)
            return 0;
    }
    if (st->nhist > 0) {
        const bq_epoch_start_t *last = &st->hist[st->nhist - 1];
        if (epoch < last->epoch || first_lsn < last->first_lsn)
            return -1;
    }
    bq_epoch_start_t add = {.epoch = epoch, .first_lsn = first_lsn};
    if (!copy_name(add.node, node))
        return -1;
    if (st->nhist == BQ_ESTORE_HISTORY_MAX) {
        memmove(&st->hist[0], &st->hist[1], (BQ_ESTORE_HISTORY_MAX - 1) * sizeof st->hist[0]);
        st->nhist--;
    }
    st->hist[st->nhist++] = add;
    return 1;
}

/* The last LSN of the recorded epoch at index i. */
static uint64_t end_of(const bq_election_state_t *st, size_t i, uint64_t last_lsn)
{
    if (i + 1 == st->nhist)
        return last_lsn;
    uint64_t next = st->hist[i + 1].first_lsn;
    return next ? next - 1 : 0;
}

uint64_t bq_estore_epoch_end(const bq_election_state_t *st, uint64_t epoch, uint64_t last_lsn)
{
    /* The highest recorded epoch at or below epoch: epoch itself when the
     * history holds it. */
    size_t i = st->nhist;
    while (i > 0 && st->hist[i - 1].epoch > epoch)
        i--;
    return i == 0 ? 0 : end_of(st, i - 1, last_lsn);
}

uint64_t bq_estore_epoch_of(const bq_election_state_t *st, uint64_t lsn)
{
    size_t i = st->nhist;
    while (i > 0 && st->hist[i - 1].first_lsn > lsn)
        i--;
    return i == 0 || lsn == 0 ? 0 : st->hist[i - 1].epoch;
}

const char *bq_estore_status_name(bq_estore_status_t s)
{
    static const char *const names[] = {"ok", "absent", "damaged", "i/o error"};
    return s <= BQ_ESTORE_IO ? names[s] : "unknown";
}
