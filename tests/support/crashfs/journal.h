/* The crashfs journal: what the preload layer (crashfs.c) writes outside the
 * tracked directory and what the power-loss tool (powerloss.c) replays. See
 * README.md in this directory for the model.
 *
 * The journal is append-only. Every record is one header and a payload:
 *
 *   u32 magic "CFSJ", u32 type, u64 payload length, u64 FNV-1a 64 of the
 *   payload, payload
 *
 * in host byte order (the journal never leaves the machine that wrote it).
 * A record is written with one write() (looped only on a short write), so
 * a process killed while appending leaves at most one incomplete record at
 * the end; readers stop at the first record that is incomplete or whose
 * checksum is wrong, and the layer cuts such a tail off before appending.
 *
 * Records (payload layouts, all fields u64 unless said):
 *
 *   BASE    root_dev, root_ino, time: the first record. Everything that
 *           follows BASE up to the first DIR of the root describes the tree
 *           as it was when the layer first saw it (all of it durable).
 *   CREATE  ino, mode (st_mode): a new file or directory (a new identity
 *           for that inode number from here on).
 *   DATA    ino, size, t_start, t_end (monotonic ns, of the fsync call),
 *           count, then count extents {off, len, kind (0 zeros, 1 bytes)},
 *           then the bytes of the kind-1 extents in order: an fsync or
 *           fdatasync of the file completed; its durable size is now size
 *           and the extents hold its durable bytes (outside them the durable
 *           content is unchanged, up to size, zero-filled if it grew).
 *   DIR     dir_ino, time, count, then count entries {ino, mode, name
 *           length, name bytes}: an fsync of the directory completed; these
 *           are now its durable entries (replacing the previous ones).
 *   NOTE    free text (which calls the process used on tracked files, ...).
 */
#ifndef CRASHFS_JOURNAL_H
#define CRASHFS_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define CFS_MAGIC 0x4a534643u /* "CFSJ" */
#define CFS_HEADER 24

enum cfs_type {
    CFS_BASE = 1,
    CFS_CREATE = 2,
    CFS_DATA = 3,
    CFS_DIR = 4,
    CFS_NOTE = 5,
};

enum cfs_extent_kind { CFS_ZEROS = 0, CFS_BYTES = 1 };

/* The journal file's name inside the state directory. */
#define CFS_JOURNAL_NAME "journal"

static inline uint64_t cfs_fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static inline uint64_t cfs_get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void cfs_put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

/* One record of buf[0..len) at *off: its type, payload and payload length;
 * advances *off. 1 for a record, 0 at the clean end, -1 for an incomplete or
 * damaged record (the rest is to be ignored). */
static inline int cfs_next(const unsigned char *buf, uint64_t len, uint64_t *off, uint32_t *type,
                           const unsigned char **payload, uint64_t *plen)
{
    uint32_t magic;
    if (*off == len)
        return 0;
    if (len - *off < CFS_HEADER)
        return -1;
    const unsigned char *h = buf + *off;
    memcpy(&magic, h, 4);
    memcpy(type, h + 4, 4);
    *plen = cfs_get64(h + 8);
    if (magic != CFS_MAGIC || *plen > len - *off - CFS_HEADER)
        return -1;
    *payload = h + CFS_HEADER;
    if (cfs_fnv(*payload, *plen) != cfs_get64(h + 16))
        return -1;
    *off += CFS_HEADER + *plen;
    return 1;
}

/* Fills the header of a record whose payload follows it at hdr+CFS_HEADER. */
static inline void cfs_seal(unsigned char *hdr, uint32_t type, uint64_t plen)
{
    uint32_t magic = CFS_MAGIC;
    memcpy(hdr, &magic, 4);
    memcpy(hdr + 4, &type, 4);
    cfs_put64(hdr + 8, plen);
    cfs_put64(hdr + 16, cfs_fnv(hdr + CFS_HEADER, plen));
}

#endif
