/* crashfs-powerloss: what a power loss leaves of a tree that processes
 * wrote under the crashfs layer (crashfs.c, README.md).
 *
 *   crashfs-powerloss [--seed N] [--tear MODE] [--save-journal PATH]
 *                     [--dry-run] [--notes] ROOT [STATE]
 *
 * Replays the journal in STATE (default ROOT.crashfs) into the durable
 * state of the tree (the entries of each directory as of its last fsync,
 * the content and size of each file as of its last fsync or fdatasync),
 * then rewrites ROOT to exactly that state: names never made durable
 * disappear, unlinked or renamed names whose directory was not synced come
 * back, contents roll back. --tear adds what a real power loss may also
 * leave of the writes that were not synced (only inside the range where the
 * files differ from their durable content, never elsewhere):
 *
 *   none           nothing (the default)
 *   prefix-sector  in one file, the unsynced data up to a random 512-byte
 *                  boundary (writeback in file order, cut mid-way)
 *   prefix-byte    the same, cut at a random byte
 *   garbage        a prefix as above, then 1..512 random bytes (a sector
 *                  that was being written)
 *   sectors        in every file, each unsynced 512-byte sector kept or
 *                  dropped at random (writeback in any order)
 *   random         one of the five above
 *
 * The choices come from --seed. Afterwards the journal is removed (moved to
 * --save-journal), so that the next process under the layer starts from a
 * fresh baseline of the rewritten (all durable) tree. The summary on stdout:
 *
 *   crashfs-powerloss: files=N dirs=N durable_bytes=N dropped_bytes=N
 *   removed=N restored=N syncs=N max_sync_us=N tear=MODE torn_bytes=N
 *
 * dropped_bytes: bytes of the tree that differ afterwards (a file that
 * disappears counts its non-zero bytes); removed/restored: names that
 * disappear / come back; max_sync_us: the longest fsync or fdatasync
 * (wrapper entry to return) in the journal. Exit 0, or 2 with a message. */
#undef _POSIX_C_SOURCE
#define _GNU_SOURCE 1

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"

#define SECTOR 512
#define MAX_DEPTH 64

typedef struct ent {
    char *name;
    size_t fid;
} ent_t;

typedef struct fobj {
    bool dir;
    uint32_t mode;
    unsigned char *data;
    uint64_t size, cap;
    ent_t *ents;
    size_t nents;
} fobj_t;

/* A file or directory of the result, by path relative to the root. */
typedef struct out {
    char *rel;
    size_t fid;
    unsigned char *data; /* the result's content (files) */
    uint64_t size;
    unsigned char *real; /* the real file's content when it is the same file */
    uint64_t real_size;
    bool has_real;
} out_t;

enum tear { TEAR_NONE, TEAR_PREFIX_SECTOR, TEAR_PREFIX_BYTE, TEAR_GARBAGE, TEAR_SECTORS };
static const char *const tear_names[] = {"none", "prefix-sector", "prefix-byte", "garbage",
                                         "sectors"};

static fobj_t *objs;
static size_t nobjs, capobjs;
static struct {
    uint64_t ino;
    size_t fid;
} * inomap;
static size_t ninomap, capinomap;
static out_t *outs;
static size_t nouts, capouts;
static uint64_t rng;

static void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fatal(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "crashfs-powerloss: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        fatal("out of memory (%zu bytes)", n);
    return p;
}

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t rand_below(uint64_t n)
{
    return n ? next_rand() % n : 0;
}

/* ---- replay ---- */

static size_t map_ino(uint64_t ino, bool must)
{
    for (size_t i = ninomap; i-- > 0;)
        if (inomap[i].ino == ino)
            return inomap[i].fid;
    if (must)
        fatal("the journal names inode %" PRIu64 " before creating it", ino);
    return SIZE_MAX;
}

static void obj_resize(fobj_t *o, uint64_t size)
{
    if (size > o->cap) {
        uint64_t cap = o->cap ? o->cap : 4096;
        while (cap < size)
            cap *= 2;
        o->data = xrealloc(o->data, (size_t)cap);
        o->cap = cap;
    }
    if (size > o->size)
        memset(o->data + o->size, 0, (size_t)(size - o->size));
    o->size = size;
}

static void need(uint64_t have, uint64_t want)
{
    if (have < want)
        fatal("a journal record is shorter than its fields");
}

typedef struct stats {
    uint64_t syncs, max_sync_ns;
} stats_t;

static uint64_t replay(const unsigned char *buf, uint64_t len, bool notes, stats_t *st)
{
    uint64_t off = 0, plen, root_ino = 0;
    uint32_t type;
    const unsigned char *p;
    bool based = false;
    int r;
    while ((r = cfs_next(buf, len, &off, &type, &p, &plen)) == 1) {
        switch (type) {
        case CFS_BASE:
            need(plen, 16);
            root_ino = cfs_get64(p + 8);
            based = true;
            break;
        case CFS_CREATE: {
            need(plen, 16);
            if (nobjs == capobjs) {
                capobjs = capobjs ? 2 * capobjs : 64;
                objs = xrealloc(objs, capobjs * sizeof *objs);
            }
            fobj_t *o = &objs[nobjs];
            memset(o, 0, sizeof *o);
            o->mode = (uint32_t)cfs_get64(p + 8);
            o->dir = S_ISDIR(o->mode);
            if (ninomap == capinomap) {
                capinomap = capinomap ? 2 * capinomap : 64;
                inomap = xrealloc(inomap, capinomap * sizeof *inomap);
            }
            inomap[ninomap].ino = cfs_get64(p);
            inomap[ninomap++].fid = nobjs++;
            break;
        }
        case CFS_DATA: {
            need(plen, 40);
            fobj_t *o = &objs[map_ino(cfs_get64(p), true)];
            uint64_t size = cfs_get64(p + 8), t0 = cfs_get64(p + 16), t1 = cfs_get64(p + 24);
            uint64_t n = cfs_get64(p + 32);
            need(plen, 40 + 24 * n);
            const unsigned char *ext = p + 40, *bytes = ext + 24 * n, *end = p + plen;
            obj_resize(o, size);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t eo = cfs_get64(ext + 24 * i), el = cfs_get64(ext + 24 * i + 8);
                uint64_t kind = cfs_get64(ext + 24 * i + 16);
                if (kind == CFS_BYTES && (uint64_t)(end - bytes) < el)
                    fatal("a DATA record's bytes are short");
                if (eo < size) {
                    uint64_t cl = el < size - eo ? el : size - eo;
                    if (kind == CFS_BYTES)
                        memcpy(o->data + eo, bytes, (size_t)cl);
                    else
                        memset(o->data + eo, 0, (size_t)cl);
                }
                if (kind == CFS_BYTES)
                    bytes += el;
            }
            st->syncs++;
            if (t1 > t0 && t1 - t0 > st->max_sync_ns)
                st->max_sync_ns = t1 - t0;
            break;
        }
        case CFS_DIR: {
            need(plen, 24);
            fobj_t *d = &objs[map_ino(cfs_get64(p), true)];
            uint64_t n = cfs_get64(p + 16), q = 24;
            for (size_t i = 0; i < d->nents; i++)
                free(d->ents[i].name);
            d->ents = xrealloc(d->ents, (size_t)n * sizeof *d->ents);
            d->nents = 0;
            for (uint64_t i = 0; i < n; i++) {
                need(plen, q + 24);
                uint64_t ino = cfs_get64(p + q), nl = cfs_get64(p + q + 16);
                need(plen, q + 24 + nl);
                char *name = xrealloc(NULL, (size_t)nl + 1);
                memcpy(name, p + q + 24, (size_t)nl);
                name[nl] = '\0';
                d->ents[d->nents].name = name;
                d->ents[d->nents++].fid = map_ino(ino, true);
                q += 24 + nl;
            }
            break;
        }
        case CFS_NOTE:
            if (notes)
                printf("note: %.*s\n", (int)plen, (const char *)p);
            break;
        default:
            fatal("unknown journal record type %u", type);
        }
    }
    if (!based)
        fatal("the journal has no BASE record");
    if (r < 0 && off < len)
        fprintf(stderr,
                "crashfs-powerloss: ignoring an incomplete last record (%" PRIu64
                " bytes): the process was killed while appending it\n",
                len - off);
    return root_ino;
}

/* ---- the result tree ---- */

static void add_out(const char *rel, size_t fid)
{
    if (nouts == capouts) {
        capouts = capouts ? 2 * capouts : 64;
        outs = xrealloc(outs, capouts * sizeof *outs);
    }
    out_t *o = &outs[nouts++];
    memset(o, 0, sizeof *o);
    o->rel = strdup(rel);
    o->fid = fid;
    if (!o->rel)
        fatal("out of memory");
}

/* rel/name (name alone at the top) into path; a path that does not fit
 * stops the tool rather than being cut short. */
static void join_rel(char path[PATH_MAX], const char *rel, const char *name)
{
    int n = snprintf(path, PATH_MAX, "%s%s%s", rel, *rel ? "/" : "", name);
    if (n < 0 || n >= PATH_MAX)
        fatal("a path is longer than %d bytes: %s/%s", PATH_MAX - 1, rel, name);
}

static void collect(size_t fid, const char *rel, int depth)
{
    fobj_t *d = &objs[fid];
    if (depth > MAX_DEPTH)
        fatal("the durable tree is deeper than %d (a cycle?)", MAX_DEPTH);
    for (size_t i = 0; i < d->nents; i++) {
        char path[PATH_MAX];
        join_rel(path, rel, d->ents[i].name);
        add_out(path, d->ents[i].fid);
        if (objs[d->ents[i].fid].dir)
            collect(d->ents[i].fid, path, depth + 1);
    }
}

static unsigned char *read_file(int dfd, const char *rel, uint64_t *size)
{
    int fd = openat(dfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        fatal("cannot read %s: %s", rel, strerror(errno));
    unsigned char *b = xrealloc(NULL, (size_t)st.st_size);
    uint64_t got = 0;
    while (got < (uint64_t)st.st_size) {
        ssize_t n = pread(fd, b + got, (size_t)st.st_size - got, (off_t)got);
        if (n <= 0)
            break;
        got += (uint64_t)n;
    }
    close(fd);
    *size = got;
    return b;
}

static unsigned char at(const unsigned char *b, uint64_t size, uint64_t i)
{
    return i < size ? b[i] : 0;
}

/* The span [*lo, *hi) where the real file differs from the durable one;
 * false when they are equal. */
static bool diff_span(const out_t *o, uint64_t *lo, uint64_t *hi)
{
    const fobj_t *f = &objs[o->fid];
    uint64_t n = o->real_size > f->size ? o->real_size : f->size;
    bool any = false;
    for (uint64_t i = 0; i < n; i++) {
        if (at(o->real, o->real_size, i) != at(f->data, f->size, i)) {
            if (!any)
                *lo = i;
            *hi = i + 1;
            any = true;
        }
    }
    return any;
}

/* Copies the real bytes [lo, hi) into the result (growing it if needed,
 * within the real file's size). */
static void keep_real(out_t *o, uint64_t lo, uint64_t hi)
{
    if (hi > o->real_size)
        hi = o->real_size;
    if (lo >= hi)
        return;
    if (hi > o->size) {
        o->data = xrealloc(o->data, (size_t)hi);
        memset(o->data + o->size, 0, (size_t)(hi - o->size));
        o->size = hi;
    }
    memcpy(o->data + lo, o->real + lo, (size_t)(hi - lo));
}

/* A cut in [lo, hi]: a byte, or a 512-byte boundary (or lo or hi). */
static uint64_t pick_cut(uint64_t lo, uint64_t hi, bool sector)
{
    if (!sector)
        return lo + rand_below(hi - lo + 1);
    uint64_t first = (lo / SECTOR + 1) * SECTOR;
    uint64_t nb = first < hi ? (hi - 1 - first) / SECTOR + 1 : 0; /* boundaries inside */
    uint64_t k = rand_below(nb + 2);
    return k == 0 ? lo : k == nb + 1 ? hi : first + (k - 1) * SECTOR;
}

static uint64_t apply_tear(enum tear t, char *what, size_t whatlen)
{
    size_t cand[4096], nc = 0;
    uint64_t lo = 0, hi = 0, torn = 0;
    snprintf(what, whatlen, "nothing to tear");
    for (size_t i = 0; i < nouts && nc < 4096; i++)
        if (outs[i].has_real && !objs[outs[i].fid].dir && diff_span(&outs[i], &lo, &hi))
            cand[nc++] = i;
    if (t == TEAR_NONE || nc == 0)
        return 0;
    if (t == TEAR_SECTORS) {
        size_t files = 0;
        for (size_t c = 0; c < nc; c++) {
            out_t *o = &outs[cand[c]];
            diff_span(o, &lo, &hi);
            bool any = false;
            for (uint64_t s = lo / SECTOR * SECTOR; s < hi; s += SECTOR) {
                if (next_rand() & 1) {
                    uint64_t a = s > lo ? s : lo, b = s + SECTOR < hi ? s + SECTOR : hi;
                    keep_real(o, a, b);
                    torn += b - a;
                    any = true;
                }
            }
            files += any;
        }
        snprintf(what, whatlen, "random unsynced sectors kept in %zu of %zu files", files, nc);
        return torn;
    }
    out_t *o = &outs[cand[rand_below(nc)]];
    diff_span(o, &lo, &hi);
    /* garbage: the cut leaves room for at least one byte of it before hi,
     * and nothing of the real data follows the garbage. */
    uint64_t cut = pick_cut(lo, t == TEAR_GARBAGE ? hi - 1 : hi, t != TEAR_PREFIX_BYTE);
    keep_real(o, lo, cut);
    torn = cut > lo ? cut - lo : 0;
    uint64_t glen = 0;
    if (t == TEAR_GARBAGE) {
        uint64_t room = hi - cut < SECTOR ? hi - cut : SECTOR;
        glen = 1 + rand_below(room);
        if (cut + glen > o->size) {
            o->data = xrealloc(o->data, (size_t)(cut + glen));
            memset(o->data + o->size, 0, (size_t)(cut + glen - o->size));
            o->size = cut + glen;
        }
        for (uint64_t i = 0; i < glen; i++)
            o->data[cut + i] = (unsigned char)next_rand();
        o->data[cut] |= 1;
        torn += glen;
    }
    snprintf(what, whatlen,
             "%s: unsynced range [%" PRIu64 ", %" PRIu64 "), its real bytes kept up to %" PRIu64
             ", then %" PRIu64 " bytes of garbage",
             o->rel, lo, hi, cut, glen);
    return torn;
}

/* ---- rewriting the tree ---- */

/* A directory stream of dfd with its own position. */
static DIR *list_of(int dfd)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d)
        fatal("cannot list the tree: %s", strerror(errno));
    return d;
}

static void wipe(int dfd)
{
    DIR *d = list_of(dfd);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int c = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (c < 0)
                fatal("cannot open %s: %s", de->d_name, strerror(errno));
            wipe(c);
            close(c);
        }
        if (unlinkat(dfd, de->d_name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0)
            fatal("cannot remove %s: %s", de->d_name, strerror(errno));
    }
    closedir(d);
}

static void write_file(int dfd, const out_t *o, uint32_t mode)
{
    static const unsigned char zeros[4096];
    int fd = openat(dfd, o->rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777);
    if (fd < 0)
        fatal("cannot create %s: %s", o->rel, strerror(errno));
    for (uint64_t p = 0; p < o->size; p += sizeof zeros) {
        size_t n = o->size - p < sizeof zeros ? (size_t)(o->size - p) : sizeof zeros;
        if (memcmp(o->data + p, zeros, n) == 0)
            continue; /* a hole reads as zeros */
        if (pwrite(fd, o->data + p, n, (off_t)p) != (ssize_t)n)
            fatal("cannot write %s: %s", o->rel, strerror(errno));
    }
    if (ftruncate(fd, (off_t)o->size) != 0)
        fatal("cannot size %s: %s", o->rel, strerror(errno));
    close(fd);
}

/* Real files and directories of the tree, for the accounting. */
typedef struct realent {
    char *rel;
    bool dir;
} realent_t;

static void walk_real(int dfd, const char *rel, realent_t **list, size_t *n, size_t *cap, int depth)
{
    DIR *d = list_of(dfd);
    struct dirent *de;
    if (depth > MAX_DEPTH)
        fatal("cannot list the tree");
    while ((de = readdir(d))) {
        struct stat st;
        char path[PATH_MAX];
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        join_rel(path, rel, de->d_name);
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            *list = xrealloc(*list, *cap * sizeof **list);
        }
        (*list)[*n].rel = strdup(path);
        (*list)[(*n)++].dir = S_ISDIR(st.st_mode);
        if (S_ISDIR(st.st_mode)) {
            int c = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (c >= 0) {
                walk_real(c, path, list, n, cap, depth + 1);
                close(c);
            }
        }
    }
    closedir(d);
}

static const out_t *find_out(const char *rel)
{
    for (size_t i = 0; i < nouts; i++)
        if (strcmp(outs[i].rel, rel) == 0)
            return &outs[i];
    return NULL;
}

static void release_all(void)
{
    for (size_t i = 0; i < nouts; i++) {
        free(outs[i].rel);
        free(outs[i].data);
        free(outs[i].real);
    }
    for (size_t i = 0; i < nobjs; i++) {
        for (size_t k = 0; k < objs[i].nents; k++)
            free(objs[i].ents[k].name);
        free(objs[i].ents);
        free(objs[i].data);
    }
    free(outs);
    free(objs);
    free(inomap);
}

static void usage(void)
{
    fprintf(stderr, "usage: crashfs-powerloss [--seed N] [--tear none|prefix-sector|prefix-byte|"
                    "garbage|sectors|random] [--save-journal PATH] [--dry-run] [--notes] ROOT "
                    "[STATE]\n");
    exit(2);
}

/* The command line. */
typedef struct opts {
    const char *save, *root, *state;
    bool dry, notes;
    enum tear tear;
} opts_t;

/* Parses argv into *o (exits with the usage on a mistake); seeds rng. */
static void parse_args(int argc, char **argv, opts_t *o)
{
    const char *tear_arg = "none";
    *o = (opts_t){0};
    rng = 88172645463325252ull;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            rng = strtoull(argv[++i], NULL, 10) * 2654435761u + 1;
        else if (strcmp(argv[i], "--tear") == 0 && i + 1 < argc)
            tear_arg = argv[++i];
        else if (strcmp(argv[i], "--save-journal") == 0 && i + 1 < argc)
            o->save = argv[++i];
        else if (strcmp(argv[i], "--dry-run") == 0)
            o->dry = true;
        else if (strcmp(argv[i], "--notes") == 0)
            o->notes = true;
        else if (argv[i][0] == '-')
            usage();
        else if (!o->root)
            o->root = argv[i];
        else if (!o->state)
            o->state = argv[i];
        else
            usage();
    }
    if (!o->root)
        usage();
    rng |= 1;
    for (int i = 0; i < 8; i++)
        next_rand();
    if (strcmp(tear_arg, "random") == 0) {
        o->tear = (enum tear)rand_below(5);
        return;
    }
    for (o->tear = TEAR_NONE; o->tear <= TEAR_SECTORS; o->tear++)
        if (strcmp(tear_arg, tear_names[o->tear]) == 0)
            return;
    usage();
}

/* Replays the journal at jpath, which must describe root, and collects
 * the durable tree into outs. */
static void load_durable(const char *root, const char *jpath, bool notes, stats_t *st)
{
    uint64_t jlen = 0;
    int jfd = open(jpath, O_RDONLY | O_CLOEXEC);
    if (jfd < 0)
        fatal("no journal %s (%s): did a process run under crashfs on %s?", jpath, strerror(errno),
              root);
    unsigned char *jbuf = read_file(jfd, jpath, &jlen);
    close(jfd);
    uint64_t root_ino = replay(jbuf, jlen, notes, st);
    free(jbuf);
    struct stat rst;
    if (stat(root, &rst) != 0 || (uint64_t)rst.st_ino != root_ino)
        fatal("the journal describes another %s (inode %" PRIu64 ")", root, root_ino);
    collect(map_ino(root_ino, true), "", 0);
}

/* Gives every file of outs its durable content and, when the real file at
 * its name is the same file, what is there now (which a tear may keep in
 * part). Counts files, directories and durable bytes. */
static void prepare_outputs(int rfd, size_t *files, size_t *dirs, uint64_t *durable)
{
    for (size_t i = 0; i < nouts; i++) {
        out_t *o = &outs[i];
        fobj_t *f = &objs[o->fid];
        struct stat s;
        if (f->dir) {
            ++*dirs;
            continue;
        }
        ++*files;
        *durable += f->size;
        o->size = f->size;
        o->data = xrealloc(NULL, (size_t)f->size);
        if (f->size)
            memcpy(o->data, f->data, (size_t)f->size);
        /* The real file at that name, if it is the same file (same
         * identity): what was written to it may survive in part. */
        if (fstatat(rfd, o->rel, &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(s.st_mode) &&
            map_ino((uint64_t)s.st_ino, false) == o->fid) {
            o->real = read_file(rfd, o->rel, &o->real_size);
            o->has_real = true;
        }
    }
}

/* What the power loss changes, against the tree as it is now. */
typedef struct account {
    size_t removed, restored;
    uint64_t dropped;
} account_t;

static account_t account_changes(int rfd)
{
    account_t a = {0, 0, 0};
    realent_t *reals = NULL;
    size_t nreal = 0, capreal = 0;
    walk_real(rfd, "", &reals, &nreal, &capreal, 0);
    for (size_t i = 0; i < nreal; i++) {
        const out_t *o = find_out(reals[i].rel);
        if (!o || objs[o->fid].dir != reals[i].dir)
            a.removed++;
        if (reals[i].dir || (o && objs[o->fid].dir))
            continue;
        uint64_t rs;
        unsigned char *rb = read_file(rfd, reals[i].rel, &rs);
        uint64_t n = o && o->size > rs ? o->size : rs;
        for (uint64_t k = 0; k < n; k++)
            a.dropped += at(rb, rs, k) != (o ? at(o->data, o->size, k) : 0);
        free(rb);
    }
    for (size_t i = 0; i < nouts; i++) {
        bool found = false;
        for (size_t k = 0; k < nreal && !found; k++)
            found = strcmp(reals[k].rel, outs[i].rel) == 0;
        a.restored += !found;
    }
    for (size_t i = 0; i < nreal; i++)
        free(reals[i].rel);
    free(reals);
    return a;
}

/* Rewrites the tree under rfd to outs, then removes the journal (or
 * moves it to save). */
static void rewrite(int rfd, const char *jpath, const char *save)
{
    wipe(rfd);
    for (size_t i = 0; i < nouts; i++) { /* parents come before their entries */
        fobj_t *f = &objs[outs[i].fid];
        if (f->dir) {
            if (mkdirat(rfd, outs[i].rel, f->mode & 07777) != 0)
                fatal("cannot create %s: %s", outs[i].rel, strerror(errno));
        } else {
            write_file(rfd, &outs[i], f->mode);
        }
    }
    if (save ? rename(jpath, save) != 0 : unlink(jpath) != 0)
        fatal("cannot remove the journal %s: %s", jpath, strerror(errno));
}

int main(int argc, char **argv)
{
    opts_t o;
    parse_args(argc, argv, &o);
    char root[PATH_MAX], state[PATH_MAX + 16], jpath[PATH_MAX + 32];
    if (!realpath(o.root, root))
        fatal("%s: %s", o.root, strerror(errno));
    snprintf(state, sizeof state, "%s", o.state ? o.state : "");
    if (!o.state)
        snprintf(state, sizeof state, "%s.crashfs", root);
    snprintf(jpath, sizeof jpath, "%s/" CFS_JOURNAL_NAME, state);
    stats_t st = {0, 0};
    load_durable(root, jpath, o.notes, &st);

    int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        fatal("%s: %s", root, strerror(errno));
    size_t files = 0, dirs = 0;
    uint64_t durable = 0;
    prepare_outputs(rfd, &files, &dirs, &durable);
    char what[PATH_MAX + 256];
    uint64_t torn = apply_tear(o.tear, what, sizeof what);
    account_t a = account_changes(rfd);
    if (!o.dry)
        rewrite(rfd, jpath, o.save);
    close(rfd);
    printf("crashfs-powerloss: files=%zu dirs=%zu durable_bytes=%" PRIu64 " dropped_bytes=%" PRIu64
           " removed=%zu restored=%zu syncs=%" PRIu64 " max_sync_us=%" PRIu64
           " tear=%s torn_bytes=%" PRIu64 "%s\n",
           files, dirs, durable, a.dropped, a.removed, a.restored, st.syncs, st.max_sync_ns / 1000,
           tear_names[o.tear], torn, o.dry ? " (dry run: nothing changed)" : "");
    if (o.tear != TEAR_NONE)
        printf("crashfs-powerloss: tear: %s\n", what);
    release_all();
    return 0;
}
