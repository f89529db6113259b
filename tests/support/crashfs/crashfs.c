/* crashfs: an LD_PRELOAD layer that records, from outside the code under
 * test, what a process has made durable in one directory tree, so that a
 * power loss can be simulated afterwards (powerloss.c). README.md in this
 * directory has the model; in short:
 *
 * - CRASHFS_ROOT=DIR selects the tree; everything else passes through.
 *   CRASHFS_STATE=SDIR (default DIR.crashfs, outside the tree) holds the
 *   journal (journal.h).
 * - The real files always hold what the process wrote (it reads back its
 *   own writes, through read or mmap, as usual). The layer remembers which
 *   byte ranges of each file were written since its last fsync/fdatasync;
 *   when one of those completes, the bytes of those ranges (read back from
 *   the file before the real call) and the file's size are appended to the
 *   journal. An fsync of a directory appends its entries (name -> inode),
 *   listed from the real directory before the real call. Creating a file
 *   or directory appends a CREATE record (a new identity for the inode).
 * - The journal is append-only and written with one write() per record, so
 *   a SIGKILL at any instant leaves a consistent journal (an incomplete
 *   last record is ignored, and cut off by the next process that attaches).
 * - Every call that can change a tracked file is interposed; the ones the
 *   model does not cover (a writable shared mapping, copy_file_range,
 *   sendfile or splice into a tracked file, POSIX AIO, writable stdio on a
 *   tracked file, symlinks, device nodes, another filesystem mounted inside
 *   the tree, a file in the tree that the layer never saw created) abort
 *   the process with a message, and io_uring_setup and io_setup fail with
 *   ENOSYS (so that libraries fall back to the interposed calls).
 *
 * Build without sanitizers (CMakeLists.txt): it runs inside the process's
 * own interceptors. */
#undef _POSIX_C_SOURCE
#define _GNU_SOURCE 1

#include <aio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"

#define EXPORT __attribute__((visibility("default")))

/* Exported by glibc without a declaration in its headers (or only in
 * _FORTIFY_SOURCE builds). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
int __open(const char *path, int flags, ...);
int __open64(const char *path, int flags, ...);
int __close(int fd);
ssize_t __write(int fd, const void *buf, size_t n);
ssize_t __pwrite64(int fd, const void *buf, size_t n, off64_t off);
int __fcntl(int fd, int cmd, ...);
int __dup2(int fd, int fd2);

/* ---- the real functions ---- */

static void *resolve(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        static const char msg[] = "crashfs: FATAL: dlsym(RTLD_NEXT) found no ";
        ssize_t ignored = syscall(SYS_write, 2, msg, sizeof msg - 1);
        ignored = syscall(SYS_write, 2, name, strlen(name));
        ignored = syscall(SYS_write, 2, "\n", 1);
        (void)ignored;
        abort();
    }
    return p;
}

/* The next definition of each function (glibc's, or a sanitizer's), looked
 * up at its first use: some calls come before the constructor runs. */
static void *real_get(void **slot, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!p) {
        p = resolve(name);
        __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    }
    return p;
}

#define REAL_DECL(name) static void *real_##name
#define R(name) ((__typeof__(name) *)real_get(&real_##name, #name))

REAL_DECL(openat);
REAL_DECL(write);
REAL_DECL(pwrite);
REAL_DECL(writev);
REAL_DECL(pwritev);
REAL_DECL(pwritev2);
REAL_DECL(ftruncate);
REAL_DECL(truncate);
REAL_DECL(fallocate);
REAL_DECL(posix_fallocate);
REAL_DECL(renameat);
REAL_DECL(renameat2);
REAL_DECL(linkat);
REAL_DECL(symlinkat);
REAL_DECL(mknodat);
REAL_DECL(unlinkat);
REAL_DECL(mkdirat);
REAL_DECL(close);
REAL_DECL(close_range);
REAL_DECL(closefrom);
REAL_DECL(dup);
REAL_DECL(dup2);
REAL_DECL(dup3);
REAL_DECL(fcntl);
REAL_DECL(fsync);
REAL_DECL(fdatasync);
REAL_DECL(sync);
REAL_DECL(syncfs);
REAL_DECL(sync_file_range);
REAL_DECL(mmap);
REAL_DECL(mprotect);
REAL_DECL(munmap);
REAL_DECL(mremap);
REAL_DECL(copy_file_range);
REAL_DECL(sendfile);
REAL_DECL(splice);
REAL_DECL(aio_write);
REAL_DECL(aio_write64);
REAL_DECL(lio_listio);
REAL_DECL(lio_listio64);
REAL_DECL(fopen);
REAL_DECL(freopen);
REAL_DECL(fdopen);
REAL_DECL(fclose);
REAL_DECL(closedir);
REAL_DECL(vdprintf);
REAL_DECL(open_by_handle_at);
REAL_DECL(syscall);

/* ---- state ---- */

#define FDTAB 65536      /* fds cached below this; above, classified at each call */
#define MAX_INODES 65536 /* tracked inodes per process */
#define IHASH (4 * MAX_INODES)
#define MAX_MAPS 256 /* read-only shared mappings of writable tracked fds */
#define CHUNK 65536
#define BLOCK 4096
#define JOURNAL_FD_MIN 900 /* keeps the journal's fd out of the process's way */

/* fdtab[fd]: 0 unknown, else FT_* bits. */
#define FT_UNTRACKED 0x01u
#define FT_TRACKED 0x02u
#define FT_SYNC 0x04u   /* O_SYNC or O_DSYNC: each write is durable when it returns */
#define FT_APPEND 0x08u /* O_APPEND: pwrite appends (Linux) */

typedef struct range {
    uint64_t lo, hi; /* [lo, hi); hi UINT64_MAX: to the end of the file */
} range_t;

typedef struct inode {
    uint64_t ino;
    bool dir;
    pthread_mutex_t mu;      /* the dirty ranges */
    pthread_mutex_t sync_mu; /* one fsync of this file at a time */
    bool whole;              /* everything may differ from the durable content */
    range_t *r;
    size_t nr, cap;
} inode_t;

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
} buf_t;

static bool active;
/* CRASHFS_SYNC_DELAY_US (< 1 s): every file sync takes that much longer,
 * as on a slow disk, so that whatever waits for one waits visibly. */
static struct timespec sync_delay;
static char root[PATH_MAX];
static size_t rootlen;
static dev_t root_dev;
static ino_t root_ino;
static int jfd = -1;
static pthread_mutex_t jmu = PTHREAD_MUTEX_INITIALIZER;
/* Creations hold it shared until their CREATE record is written; a
 * directory's listing holds it exclusively. */
static pthread_rwlock_t create_lock = PTHREAD_RWLOCK_INITIALIZER;

static _Atomic uint32_t fdtab[FDTAB];
static inode_t *inodes[MAX_INODES];
static _Atomic uint32_t ihash[IHASH]; /* index + 1 into inodes */
static uint32_t ninodes;
static pthread_mutex_t imu = PTHREAD_MUTEX_INITIALIZER;

static struct {
    uintptr_t lo, hi;
} maps[MAX_MAPS];
static size_t nmaps;
static pthread_mutex_t mapmu = PTHREAD_MUTEX_INITIALIZER;

/* Interposed calls seen on tracked files, noted once each in the journal. */
enum fn {
    FN_OPEN,
    FN_CREAT,
    FN_WRITE,
    FN_PWRITE,
    FN_WRITEV,
    FN_PWRITEV,
    FN_PWRITEV2,
    FN_FTRUNCATE,
    FN_TRUNCATE,
    FN_FALLOCATE,
    FN_POSIX_FALLOCATE,
    FN_RENAME,
    FN_LINK,
    FN_UNLINK,
    FN_RMDIR,
    FN_MKDIR,
    FN_CLOSE,
    FN_DUP,
    FN_FSYNC,
    FN_FDATASYNC,
    FN_FSYNC_DIR,
    FN_SYNC,
    FN_SYNC_FILE_RANGE,
    FN_MMAP_RO,
    FN_DPRINTF,
    FN_O_SYNC_WRITE,
    FN_COUNT
};
static const char *const fn_names[FN_COUNT] = {"open/openat",
                                               "creat",
                                               "write",
                                               "pwrite/pwrite64",
                                               "writev",
                                               "pwritev/pwritev64",
                                               "pwritev2/pwritev64v2",
                                               "ftruncate",
                                               "truncate",
                                               "fallocate",
                                               "posix_fallocate",
                                               "rename/renameat/renameat2",
                                               "link/linkat",
                                               "unlink/unlinkat",
                                               "rmdir",
                                               "mkdir/mkdirat",
                                               "close",
                                               "dup/dup2/dup3/F_DUPFD",
                                               "fsync (file)",
                                               "fdatasync (file)",
                                               "fsync/fdatasync (directory)",
                                               "sync/syncfs",
                                               "sync_file_range (no durability)",
                                               "mmap (read-only, shared)",
                                               "dprintf/vdprintf",
                                               "write on an O_SYNC/O_DSYNC fd"};
static atomic_uint_fast64_t fn_seen;

static void used(enum fn f);

/* ---- small helpers ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void write_all_fd(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = R(write)(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    int n = snprintf(msg, sizeof msg, "crashfs: FATAL (pid %d): ", (int)getpid());
    va_start(ap, fmt);
    n += vsnprintf(msg + n, sizeof msg - (size_t)n - 2, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof msg - 2)
        n = (int)sizeof msg - 2;
    msg[n++] = '\n';
    write_all_fd(2, msg, (size_t)n);
    abort();
}

static void buf_need(buf_t *b, size_t more)
{
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p)
        die("out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
}

static void buf_put(buf_t *b, const void *p, size_t n)
{
    buf_need(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_put64(buf_t *b, uint64_t v)
{
    buf_put(b, &v, sizeof v);
}

/* A record under construction: room for the header first. */
static void rec_begin(buf_t *b)
{
    b->len = 0;
    buf_need(b, CFS_HEADER);
    memset(b->p, 0, CFS_HEADER);
    b->len = CFS_HEADER;
}

static void journal_append(buf_t *b, uint32_t type)
{
    cfs_seal(b->p, type, b->len - CFS_HEADER);
    pthread_mutex_lock(&jmu);
    const unsigned char *p = b->p;
    size_t n = b->len;
    while (n > 0) {
        ssize_t w = R(write)(jfd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("cannot append to the journal: %s", w < 0 ? strerror(errno) : "short write");
        p += w;
        n -= (size_t)w;
    }
    pthread_mutex_unlock(&jmu);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n >= (int)sizeof text)
        n = (int)sizeof text - 1;
    buf_t b = {0};
    rec_begin(&b);
    buf_put(&b, text, (size_t)n);
    journal_append(&b, CFS_NOTE);
    free(b.p);
}

static void used(enum fn f)
{
    uint64_t bit = (uint64_t)1 << f;
    if (atomic_load(&fn_seen) & bit)
        return;
    if (atomic_fetch_or(&fn_seen, bit) & bit)
        return;
    note("pid %d uses %s on tracked files", (int)getpid(), fn_names[f]);
}

/* ---- paths ---- */

static bool under_root(const char *abs)
{
    return strncmp(abs, root, rootlen) == 0 && (abs[rootlen] == '\0' || abs[rootlen] == '/');
}

/* The path of fd (from /proc), without a " (deleted)" suffix; false when
 * it has none. */
static bool fd_path(int fd, char *out, size_t cap)
{
    char lnk[64];
    snprintf(lnk, sizeof lnk, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(lnk, out, cap - 1);
    if (n <= 0)
        return false;
    out[n] = '\0';
    static const char del[] = " (deleted)";
    if ((size_t)n > sizeof del - 1 && strcmp(out + n - (sizeof del - 1), del) == 0)
        out[n - (sizeof del - 1)] = '\0';
    return out[0] == '/';
}

/* Whether dirfd/path names something inside the tree (the root included):
 * its parent directory resolved with realpath, the last component as is
 * (a symlink as the last component is an entry of its directory). */
static bool tracked_path(int dirfd, const char *path)
{
    char full[2 * PATH_MAX + 2], parent[PATH_MAX], abs[PATH_MAX + NAME_MAX + 2];
    if (!active || !path || !*path)
        return false;
    if (path[0] == '/') {
        snprintf(full, sizeof full, "%s", path);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base))
                return false;
        } else if (!fd_path(dirfd, base, sizeof base)) {
            return false;
        }
        snprintf(full, sizeof full, "%s/%s", base, path);
    }
    size_t n = strlen(full);
    while (n > 1 && full[n - 1] == '/')
        full[--n] = '\0';
    char *slash = strrchr(full, '/');
    const char *last = slash + 1;
    if (strcmp(last, ".") == 0 || strcmp(last, "..") == 0 || !*last) {
        if (!realpath(full, abs))
            return false;
        return under_root(abs);
    }
    if (slash == full)
        snprintf(parent, sizeof parent, "/");
    else {
        *slash = '\0';
        if (!realpath(full, parent))
            return false;
    }
    snprintf(abs, sizeof abs, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, last);
    return under_root(abs);
}

/* ---- inodes ---- */

static size_t ihash_of(uint64_t ino)
{
    return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) % IHASH;
}

static inode_t *inode_find(uint64_t ino)
{
    for (size_t h = ihash_of(ino);; h = (h + 1) % IHASH) {
        uint32_t v = atomic_load(&ihash[h]);
        if (!v)
            return NULL;
        if (inodes[v - 1]->ino == ino)
            return inodes[v - 1];
    }
}

/* Registers ino (or resets a known one: a new identity) as a file or
 * directory; whole: its content may differ from the durable one. */
static inode_t *inode_register(uint64_t ino, bool dir, bool whole)
{
    pthread_mutex_lock(&imu);
    inode_t *in = inode_find(ino);
    if (!in) {
        if (ninodes == MAX_INODES)
            die("more than %d tracked inodes", MAX_INODES);
        in = calloc(1, sizeof *in);
        if (!in)
            die("out of memory");
        in->ino = ino;
        pthread_mutex_init(&in->mu, NULL);
        pthread_mutex_init(&in->sync_mu, NULL);
        inodes[ninodes] = in;
        size_t h = ihash_of(ino);
        while (atomic_load(&ihash[h]))
            h = (h + 1) % IHASH;
        atomic_store(&ihash[h], ++ninodes);
    }
    pthread_mutex_lock(&in->mu);
    in->dir = dir;
    in->whole = whole && !dir;
    in->nr = 0;
    pthread_mutex_unlock(&in->mu);
    pthread_mutex_unlock(&imu);
    return in;
}

/* A new file or directory: a CREATE record and a fresh identity. */
static inode_t *inode_create(const struct stat *st)
{
    buf_t b = {0};
    rec_begin(&b);
    buf_put64(&b, (uint64_t)st->st_ino);
    buf_put64(&b, (uint64_t)st->st_mode);
    journal_append(&b, CFS_CREATE);
    free(b.p);
    return inode_register((uint64_t)st->st_ino, S_ISDIR(st->st_mode), false);
}

static void range_add(inode_t *in, uint64_t lo, uint64_t hi)
{
    if (in->nr > 0) {
        range_t *last = &in->r[in->nr - 1];
        if (lo >= last->lo && lo <= last->hi) {
            if (hi > last->hi)
                last->hi = hi;
            return;
        }
    }
    /* General case: merge with every range it overlaps or touches. */
    size_t i = 0;
    while (i < in->nr && in->r[i].hi < lo)
        i++;
    size_t j = i;
    while (j < in->nr && in->r[j].lo <= hi) {
        if (in->r[j].lo < lo)
            lo = in->r[j].lo;
        if (in->r[j].hi > hi)
            hi = in->r[j].hi;
        j++;
    }
    if (j == i) { /* insert at i */
        if (in->nr == in->cap) {
            size_t cap = in->cap ? 2 * in->cap : 8;
            range_t *r = realloc(in->r, cap * sizeof *r);
            if (!r)
                die("out of memory");
            in->r = r;
            in->cap = cap;
        }
        memmove(in->r + i + 1, in->r + i, (in->nr - i) * sizeof *in->r);
        in->nr++;
    } else if (j > i + 1) {
        memmove(in->r + i + 1, in->r + j, (in->nr - j) * sizeof *in->r);
        in->nr -= j - i - 1;
    }
    in->r[i] = (range_t){lo, hi};
}

static void dirty(inode_t *in, uint64_t lo, uint64_t hi)
{
    if (hi <= lo)
        return;
    pthread_mutex_lock(&in->mu);
    if (!in->whole)
        range_add(in, lo, hi);
    pthread_mutex_unlock(&in->mu);
}

static void dirty_whole(inode_t *in)
{
    pthread_mutex_lock(&in->mu);
    in->whole = true;
    in->nr = 0;
    pthread_mutex_unlock(&in->mu);
}

/* ---- descriptors ---- */

static void fd_put(int fd, uint32_t v)
{
    if (fd >= 0 && fd < FDTAB)
        atomic_store(&fdtab[fd], v);
}

static uint32_t open_bits(int flags)
{
    uint32_t v = FT_TRACKED;
    if (flags & (O_SYNC | O_DSYNC))
        v |= FT_SYNC;
    if (flags & O_APPEND)
        v |= FT_APPEND;
    return v;
}

/* Classifies fd: FT_UNTRACKED, or FT_TRACKED with bits. An fd the layer
 * did not see opened (opendir, fopen, inherited...) that refers to a file
 * of the tree is adopted here, at its first interposed use; one whose
 * inode the layer does not know was created behind its back: fatal. */
static uint32_t fd_state(int fd)
{
    if (!active || fd < 0)
        return FT_UNTRACKED;
    if (fd == jfd)
        return FT_UNTRACKED;
    if (fd < FDTAB) {
        uint32_t v = atomic_load(&fdtab[fd]);
        if (v)
            return v;
    }
    struct stat st;
    char path[PATH_MAX];
    uint32_t v = FT_UNTRACKED;
    if (fstat(fd, &st) == 0 && st.st_dev == root_dev &&
        (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) && fd_path(fd, path, sizeof path) &&
        under_root(path)) {
        if (!inode_find((uint64_t)st.st_ino))
            die("fd %d refers to %s (inode %llu), which was created without crashfs", fd, path,
                (unsigned long long)st.st_ino);
        int fl = R(fcntl)(fd, F_GETFL);
        v = open_bits(fl < 0 ? 0 : fl);
    }
    fd_put(fd, v);
    return v;
}

/* The inode of tracked fd (its stat in *st), or NULL when fd is not
 * tracked. Checks the cached classification against the fd's identity. */
static inode_t *fd_inode(int fd, struct stat *st, uint32_t *bits)
{
    uint32_t v = fd_state(fd);
    if (!(v & FT_TRACKED))
        return NULL;
    if (fstat(fd, st) != 0)
        return NULL;
    inode_t *in = st->st_dev == root_dev ? inode_find((uint64_t)st->st_ino) : NULL;
    if (!in) { /* a stale cache entry: the fd number was reused behind our back */
        fd_put(fd, 0);
        v = fd_state(fd);
        if (!(v & FT_TRACKED))
            return NULL;
        in = inode_find((uint64_t)st->st_ino);
        if (!in)
            return NULL;
    }
    if (bits)
        *bits = v;
    return in;
}

/* ---- durability: files ---- */

/* Reads [off, off+len) of fd (via rfd) into extents and bytes. */
static void read_extents(int rfd, uint64_t off, uint64_t len, buf_t *ext, buf_t *bytes,
                         uint64_t *count)
{
    static const unsigned char zeros[BLOCK];
    unsigned char *chunk = malloc(CHUNK);
    uint64_t kind_prev = 2, *open_len = NULL;
    if (!chunk)
        die("out of memory");
    while (len > 0) {
        size_t want = len < CHUNK ? (size_t)len : CHUNK;
        ssize_t got = pread(rfd, chunk, want, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            die("cannot read back a tracked file for its fsync: %s", strerror(errno));
        if ((size_t)got < want) /* shrank meanwhile: the rest reads as zeros */
            memset(chunk + got, 0, want - (size_t)got);
        for (size_t p = 0; p < want;) {
            /* Blocks aligned on file offsets, so that zero runs are found. */
            size_t blk = BLOCK - (size_t)((off + p) % BLOCK);
            if (blk > want - p)
                blk = want - p;
            uint64_t kind = memcmp(chunk + p, zeros, blk) == 0 ? CFS_ZEROS : CFS_BYTES;
            if (kind == kind_prev) {
                *open_len += blk;
            } else {
                buf_put64(ext, off + p);
                buf_put64(ext, blk);
                buf_put64(ext, kind);
                open_len = NULL; /* the buffer may move: found again below */
                (*count)++;
                kind_prev = kind;
            }
            if (!open_len)
                open_len = (uint64_t *)(void *)(ext->p + ext->len - 16);
            if (kind == CFS_BYTES)
                buf_put(bytes, chunk + p, blk);
            p += blk;
        }
        off += want;
        len -= want;
    }
    free(chunk);
}

/* A DATA record for in: its size and the content of ranges r[0..nr) (or of
 * everything when whole), read through fd (or a read-only reopening of it,
 * for a write-only fd). */
static void data_record(buf_t *rec, int fd, inode_t *in, uint64_t size, const range_t *r, size_t nr,
                        bool whole)
{
    buf_t ext = {0}, bytes = {0};
    uint64_t count = 0;
    int rfd = fd;
    int fl = R(fcntl)(fd, F_GETFL);
    if (fl >= 0 && (fl & O_ACCMODE) == O_WRONLY) {
        char lnk[64];
        snprintf(lnk, sizeof lnk, "/proc/self/fd/%d", fd);
        rfd = R(openat)(AT_FDCWD, lnk, O_RDONLY | O_CLOEXEC);
        if (rfd < 0)
            die("cannot reopen write-only fd %d to read it back: %s", fd, strerror(errno));
    }
    range_t all = {0, UINT64_MAX};
    if (whole) {
        r = &all;
        nr = 1;
    }
    for (size_t i = 0; i < nr; i++) {
        uint64_t lo = r[i].lo, hi = r[i].hi < size ? r[i].hi : size;
        if (lo < hi)
            read_extents(rfd, lo, hi - lo, &ext, &bytes, &count);
    }
    if (rfd != fd)
        R(close)(rfd);
    rec_begin(rec);
    buf_put64(rec, in->ino);
    buf_put64(rec, size);
    buf_put64(rec, 0); /* t_start, t_end: filled in by the caller */
    buf_put64(rec, 0);
    buf_put64(rec, count);
    buf_put(rec, ext.p, ext.len);
    buf_put(rec, bytes.p, bytes.len);
    free(ext.p);
    free(bytes.p);
}

static void data_times(buf_t *rec, uint64_t t0, uint64_t t1)
{
    cfs_put64(rec->p + CFS_HEADER + 16, t0);
    cfs_put64(rec->p + CFS_HEADER + 24, t1);
}

/* fsync or fdatasync (realfn) of a tracked file: what was written before
 * the call is durable once it returns 0. Both also make the size durable
 * (fdatasync(2): a size change is metadata needed to read the data). */
static int sync_file(int fd, inode_t *in, int (*realfn)(int), uint64_t t0)
{
    pthread_mutex_lock(&in->sync_mu);
    pthread_mutex_lock(&in->mu);
    range_t *r = in->r;
    size_t nr = in->nr;
    bool whole = in->whole;
    in->r = NULL;
    in->nr = in->cap = 0;
    in->whole = false;
    pthread_mutex_unlock(&in->mu);
    struct stat st;
    buf_t rec = {0};
    int rc = fstat(fd, &st);
    if (rc == 0)
        data_record(&rec, fd, in, (uint64_t)st.st_size, r, nr, whole);
    if (rc == 0)
        rc = realfn(fd);
    int e = errno;
    if (rc == 0 && sync_delay.tv_nsec) /* a slow disk: the data is not durable before */
        nanosleep(&sync_delay, NULL);
    if (rc == 0) {
        data_times(&rec, t0, now_ns());
        journal_append(&rec, CFS_DATA);
    } else { /* nothing became durable: the ranges stay dirty */
        pthread_mutex_lock(&in->mu);
        if (whole)
            in->whole = true;
        for (size_t i = 0; !in->whole && i < nr; i++)
            range_add(in, r[i].lo, r[i].hi);
        pthread_mutex_unlock(&in->mu);
    }
    pthread_mutex_unlock(&in->sync_mu);
    free(r);
    free(rec.p);
    errno = e;
    return rc;
}

/* A write through an O_SYNC/O_DSYNC fd (or with RWF_SYNC/RWF_DSYNC): that
 * write is durable when it returns (only it: the file's other dirty ranges
 * stay dirty). */
static void sync_written(int fd, inode_t *in, uint64_t off, uint64_t n)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return;
    range_t r = {off, off + n};
    buf_t rec = {0};
    uint64_t t = now_ns();
    used(FN_O_SYNC_WRITE);
    pthread_mutex_lock(&in->sync_mu);
    data_record(&rec, fd, in, (uint64_t)st.st_size, &r, 1, false);
    data_times(&rec, t, t);
    journal_append(&rec, CFS_DATA);
    pthread_mutex_unlock(&in->sync_mu);
    free(rec.p);
}

/* After a successful write of n bytes to tracked fd: off is where it went,
 * or -1 for "before the current position" (write, writev), or -2 for "at
 * the end of the file" (O_APPEND, RWF_APPEND). */
static void wrote(int fd, int64_t off, uint64_t n, bool sync, enum fn f)
{
    struct stat st;
    uint32_t bits = 0;
    int e = errno;
    inode_t *in = fd_inode(fd, &st, &bits);
    if (!in || in->dir) {
        errno = e;
        return;
    }
    used(f);
    uint64_t at;
    if (off == -1) {
        off_t pos = lseek(fd, 0, SEEK_CUR);
        if (pos < 0)
            die("lseek after a write to a tracked file: %s", strerror(errno));
        at = (uint64_t)pos - n;
    } else if (off == -2) {
        at = (uint64_t)st.st_size - n;
    } else {
        at = (uint64_t)off;
    }
    dirty(in, at, at + n);
    if (sync || (bits & FT_SYNC))
        sync_written(fd, in, at, n);
    errno = e;
}

/* ---- durability: directories ---- */

static void put_entry(buf_t *b, const struct stat *st, const char *name)
{
    size_t n = strlen(name);
    buf_put64(b, (uint64_t)st->st_ino);
    buf_put64(b, (uint64_t)st->st_mode);
    buf_put64(b, n);
    buf_put(b, name, n);
}

/* Checks that an entry can be modelled; NULL when it can. */
static const char *unmodelled(const struct stat *st)
{
    if (st->st_dev != root_dev)
        return "another filesystem mounted inside the tree";
    if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
        return NULL;
    return S_ISLNK(st->st_mode) ? "a symlink" : "a device, fifo or socket";
}

/* A DIR record of directory fd (inode dino): its entries as they are now.
 * Every entry must be a known inode, unless register_unknown (the
 * baseline), which registers and describes it (CREATE, and DATA for files)
 * first, recursing into directories. */
static void dir_record(buf_t *rec, int fd, uint64_t dino, bool baseline);

static void baseline_file(int dfd, const char *name, const struct stat *st)
{
    buf_t rec = {0};
    inode_create(st);
    inode_t *in = inode_find((uint64_t)st->st_ino);
    int fd = R(openat)(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        die("cannot read %s in the tree: %s", name, strerror(errno));
    data_record(&rec, fd, in, (uint64_t)st->st_size, NULL, 0, true);
    uint64_t t = now_ns();
    data_times(&rec, t, t);
    journal_append(&rec, CFS_DATA);
    R(close)(fd);
    free(rec.p);
}

static void dir_record(buf_t *rec, int fd, uint64_t dino, bool baseline)
{
    char where[PATH_MAX];
    int dfd = R(openat)(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    buf_t ents = {0};
    uint64_t count = 0;
    struct dirent *de;
    if (!d)
        die("cannot list a tracked directory: %s", strerror(errno));
    if (!fd_path(dfd, where, sizeof where))
        snprintf(where, sizeof where, "(directory inode %llu)", (unsigned long long)dino);
    while ((de = readdir(d))) {
        struct stat st;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* removed meanwhile */
        const char *why = unmodelled(&st);
        if (why)
            die("%s/%s is %s: not modelled", where, de->d_name, why);
        if (baseline) {
            if (S_ISDIR(st.st_mode)) {
                buf_t sub = {0};
                int cfd = R(openat)(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (cfd < 0)
                    die("cannot open %s/%s: %s", where, de->d_name, strerror(errno));
                inode_create(&st);
                dir_record(&sub, cfd, (uint64_t)st.st_ino, true);
                journal_append(&sub, CFS_DIR);
                free(sub.p);
                R(close)(cfd);
            } else {
                baseline_file(dfd, de->d_name, &st);
            }
        } else if (!inode_find((uint64_t)st.st_ino)) {
            die("%s/%s (inode %llu) was created without going through crashfs", where, de->d_name,
                (unsigned long long)st.st_ino);
        }
        put_entry(&ents, &st, de->d_name);
        count++;
    }
    R(closedir)(d);
    rec_begin(rec);
    buf_put64(rec, dino);
    buf_put64(rec, now_ns());
    buf_put64(rec, count);
    buf_put(rec, ents.p, ents.len);
    free(ents.p);
}

static int sync_dir(int fd, inode_t *in, int (*realfn)(int))
{
    buf_t rec = {0};
    pthread_rwlock_wrlock(&create_lock);
    dir_record(&rec, fd, in->ino, false);
    pthread_rwlock_unlock(&create_lock);
    int rc = realfn(fd);
    int e = errno;
    if (rc == 0)
        journal_append(&rec, CFS_DIR);
    free(rec.p);
    errno = e;
    return rc;
}

static int sync_common(int fd, int (*realfn)(int), enum fn f)
{
    if (!active)
        return realfn(fd);
    uint64_t t0 = now_ns();
    struct stat st;
    inode_t *in = fd_inode(fd, &st, NULL);
    if (!in)
        return realfn(fd);
    used(in->dir ? FN_FSYNC_DIR : f);
    return in->dir ? sync_dir(fd, in, realfn) : sync_file(fd, in, realfn, t0);
}

/* sync() and syncfs() on the tree's filesystem: every file and directory
 * reachable in the tree is synced as by fsync. */
static void sync_tree(int dfd)
{
    int d2 = R(openat)(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
    struct dirent *de;
    struct stat st;
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            fstatat(d2, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
            continue;
        int fd = R(openat)(d2, de->d_name,
                           (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        inode_t *in = inode_find((uint64_t)st.st_ino);
        if (S_ISDIR(st.st_mode))
            sync_tree(fd);
        else if (in)
            sync_file(fd, in, R(fdatasync), now_ns());
        R(close)(fd);
    }
    inode_t *self = fstat(d2, &st) == 0 ? inode_find((uint64_t)st.st_ino) : NULL;
    if (self)
        sync_dir(d2, self, R(fsync));
    if (d)
        R(closedir)(d);
}

/* ---- opening and creating ---- */

static int open_common(int dirfd, const char *path, int flags, mode_t mode, enum fn f)
{
    if (!active)
        return R(openat)(dirfd, path, flags, mode);
    bool tracked = tracked_path(dirfd, path);
    bool creating = (flags & O_TMPFILE) == O_TMPFILE;
    if (tracked && (flags & O_CREAT)) {
        struct stat st;
        creating = fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
    }
    if (!tracked) {
        int fd = R(openat)(dirfd, path, flags, mode);
        if (fd >= 0) {
            int e = errno;
            fd_put(fd, 0); /* classified at its first use (it may alias a tracked file) */
            errno = e;
        }
        return fd;
    }
    if (creating)
        pthread_rwlock_rdlock(&create_lock);
    int fd = R(openat)(dirfd, path, flags, mode);
    int e = errno;
    if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) != 0)
            die("fstat of a new fd: %s", strerror(errno));
        const char *why = unmodelled(&st);
        if (why)
            die("%s is %s: not modelled", path, why);
        used(f);
        if (creating) {
            inode_create(&st);
        } else {
            inode_t *in = inode_find((uint64_t)st.st_ino);
            if (!in)
                die("%s (inode %llu) was created without going through crashfs", path,
                    (unsigned long long)st.st_ino);
            if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && !in->dir)
                dirty(in, 0, UINT64_MAX);
        }
        fd_put(fd, open_bits(flags));
    }
    if (creating)
        pthread_rwlock_unlock(&create_lock);
    errno = e;
    return fd;
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

EXPORT int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, path, flags, m, FN_OPEN);
}

EXPORT int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, path, flags | O_LARGEFILE, m, FN_OPEN);
}

EXPORT int __open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, path, flags, m, FN_OPEN);
}

EXPORT int __open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(AT_FDCWD, path, flags | O_LARGEFILE, m, FN_OPEN);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(dirfd, path, flags, m, FN_OPEN);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return open_common(dirfd, path, flags | O_LARGEFILE, m, FN_OPEN);
}

EXPORT int __open_2(const char *path, int flags)
{
    return open_common(AT_FDCWD, path, flags, 0, FN_OPEN);
}

EXPORT int __open64_2(const char *path, int flags)
{
    return open_common(AT_FDCWD, path, flags | O_LARGEFILE, 0, FN_OPEN);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
    return open_common(dirfd, path, flags, 0, FN_OPEN);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
    return open_common(dirfd, path, flags | O_LARGEFILE, 0, FN_OPEN);
}

EXPORT int creat(const char *path, mode_t mode)
{
    return open_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, FN_CREAT);
}

EXPORT int creat64(const char *path, mode_t mode)
{
    return open_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC | O_LARGEFILE, mode, FN_CREAT);
}

EXPORT int open_by_handle_at(int mount_fd, struct file_handle *h, int flags)
{
    int fd = R(open_by_handle_at)(mount_fd, h, flags);
    if (fd >= 0 && active) {
        fd_put(fd, 0);
        if ((fd_state(fd) & FT_TRACKED) && (flags & O_ACCMODE) != O_RDONLY)
            die("open_by_handle_at of a tracked file for writing: not modelled");
    }
    return fd;
}

EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
    if (!active || !tracked_path(dirfd, path))
        return R(mkdirat)(dirfd, path, mode);
    pthread_rwlock_rdlock(&create_lock);
    int rc = R(mkdirat)(dirfd, path, mode);
    int e = errno;
    struct stat st;
    if (rc == 0) {
        used(FN_MKDIR);
        if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
            die("stat of a new directory %s: %s", path, strerror(errno));
        inode_create(&st);
    }
    pthread_rwlock_unlock(&create_lock);
    errno = e;
    return rc;
}

EXPORT int mkdir(const char *path, mode_t mode)
{
    return mkdirat(AT_FDCWD, path, mode);
}

/* rename and link: a name in the tree for a file from outside is a new
 * identity (nothing of it durable yet); a directory or a hard link from
 * outside is not modelled. Inside the tree, entries are listed from the
 * real directory at its fsync, so nothing needs recording. */
static int rename_common(int od, const char *op, int nd, const char *np, unsigned flags,
                         bool is_link, int link_flags)
{
    if (!active)
        goto real;
    bool st_in = tracked_path(od, op), dt_in = tracked_path(nd, np);
    if (!st_in && !dt_in)
        goto real;
    used(is_link ? FN_LINK : FN_RENAME);
    if (st_in == dt_in)
        goto real;
    if (is_link && dt_in)
        die("a hard link from outside into the tree (%s): not modelled", np);
    if (flags & RENAME_EXCHANGE)
        die("renameat2(RENAME_EXCHANGE) across the tree's boundary: not modelled");
    if (!dt_in)
        goto real; /* out of the tree: only a directory entry */
    pthread_rwlock_rdlock(&create_lock);
    int rc = flags ? R(renameat2)(od, op, nd, np, flags) : R(renameat)(od, op, nd, np);
    int e = errno;
    struct stat st;
    if (rc == 0) {
        if (fstatat(nd, np, &st, AT_SYMLINK_NOFOLLOW) != 0)
            die("stat of %s after a rename: %s", np, strerror(errno));
        if (S_ISDIR(st.st_mode))
            die("a directory moved into the tree (%s): not modelled", np);
        const char *why = unmodelled(&st);
        if (why)
            die("%s is %s: not modelled", np, why);
        inode_create(&st);
        dirty_whole(inode_find((uint64_t)st.st_ino));
    }
    pthread_rwlock_unlock(&create_lock);
    errno = e;
    return rc;
real:
    if (is_link)
        return R(linkat)(od, op, nd, np, link_flags);
    return flags ? R(renameat2)(od, op, nd, np, flags) : R(renameat)(od, op, nd, np);
}

EXPORT int rename(const char *op, const char *np)
{
    return rename_common(AT_FDCWD, op, AT_FDCWD, np, 0, false, 0);
}

EXPORT int renameat(int od, const char *op, int nd, const char *np)
{
    return rename_common(od, op, nd, np, 0, false, 0);
}

EXPORT int renameat2(int od, const char *op, int nd, const char *np, unsigned flags)
{
    return rename_common(od, op, nd, np, flags, false, 0);
}

EXPORT int linkat(int od, const char *op, int nd, const char *np, int flags)
{
    return rename_common(od, op, nd, np, 0, true, flags);
}

EXPORT int link(const char *op, const char *np)
{
    return rename_common(AT_FDCWD, op, AT_FDCWD, np, 0, true, 0);
}

EXPORT int symlinkat(const char *target, int nd, const char *np)
{
    if (active && tracked_path(nd, np))
        die("symlink %s in the tree: not modelled", np);
    return R(symlinkat)(target, nd, np);
}

EXPORT int symlink(const char *target, const char *np)
{
    return symlinkat(target, AT_FDCWD, np);
}

EXPORT int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
    if (active && tracked_path(dirfd, path)) {
        if (!S_ISREG(mode) && (mode & S_IFMT) != 0)
            die("mknod of a device, fifo or socket %s in the tree: not modelled", path);
        int fd = open_common(dirfd, path, O_CREAT | O_EXCL | O_WRONLY, mode & 07777, FN_CREAT);
        if (fd < 0)
            return -1;
        fd_put(fd, 0);
        R(close)(fd);
        return 0;
    }
    return R(mknodat)(dirfd, path, mode, dev);
}

EXPORT int mknod(const char *path, mode_t mode, dev_t dev)
{
    return mknodat(AT_FDCWD, path, mode, dev);
}

EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
    if (active && tracked_path(dirfd, path))
        used(flags & AT_REMOVEDIR ? FN_RMDIR : FN_UNLINK);
    return R(unlinkat)(dirfd, path, flags);
}

EXPORT int unlink(const char *path)
{
    return unlinkat(AT_FDCWD, path, 0);
}

EXPORT int rmdir(const char *path)
{
    return unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}

/* ---- writing ---- */

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    if (!(fd_state(fd) & FT_TRACKED))
        return R(write)(fd, buf, n);
    ssize_t r = R(write)(fd, buf, n);
    if (r > 0)
        wrote(fd, -1, (uint64_t)r, false, FN_WRITE);
    return r;
}

EXPORT ssize_t __write(int fd, const void *buf, size_t n)
{
    return write(fd, buf, n);
}

static ssize_t pwrite_common(int fd, const void *buf, size_t n, off_t off)
{
    uint32_t v = fd_state(fd);
    if (!(v & FT_TRACKED))
        return R(pwrite)(fd, buf, n, off);
    ssize_t r = R(pwrite)(fd, buf, n, off);
    if (r > 0)
        wrote(fd, (v & FT_APPEND) ? -2 : (int64_t)off, (uint64_t)r, false, FN_PWRITE);
    return r;
}

EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite_common(fd, buf, n, off);
}

EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    return pwrite_common(fd, buf, n, (off_t)off);
}

EXPORT ssize_t __pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    return pwrite_common(fd, buf, n, (off_t)off);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    if (!(fd_state(fd) & FT_TRACKED))
        return R(writev)(fd, iov, cnt);
    ssize_t r = R(writev)(fd, iov, cnt);
    if (r > 0)
        wrote(fd, -1, (uint64_t)r, false, FN_WRITEV);
    return r;
}

static ssize_t pwritev_common(int fd, const struct iovec *iov, int cnt, off_t off)
{
    uint32_t v = fd_state(fd);
    if (!(v & FT_TRACKED))
        return R(pwritev)(fd, iov, cnt, off);
    ssize_t r = R(pwritev)(fd, iov, cnt, off);
    if (r > 0)
        wrote(fd, (v & FT_APPEND) ? -2 : (int64_t)off, (uint64_t)r, false, FN_PWRITEV);
    return r;
}

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return pwritev_common(fd, iov, cnt, off);
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    return pwritev_common(fd, iov, cnt, (off_t)off);
}

static ssize_t pwritev2_common(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    uint32_t v = fd_state(fd);
    if (!(v & FT_TRACKED))
        return R(pwritev2)(fd, iov, cnt, off, flags);
    ssize_t r = R(pwritev2)(fd, iov, cnt, off, flags);
    if (r > 0) {
        int64_t at = (flags & RWF_APPEND) || (v & FT_APPEND) ? -2 : off == -1 ? -1 : (int64_t)off;
        wrote(fd, at, (uint64_t)r, (flags & (RWF_SYNC | RWF_DSYNC)) != 0, FN_PWRITEV2);
    }
    return r;
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    return pwritev2_common(fd, iov, cnt, off, flags);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    return pwritev2_common(fd, iov, cnt, (off_t)off, flags);
}

EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
    if (!(fd_state(fd) & FT_TRACKED))
        return R(vdprintf)(fd, fmt, ap);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    if (n < 0)
        return -1;
    used(FN_DPRINTF);
    size_t done = 0;
    while (done < (size_t)n) {
        ssize_t w = write(fd, s + done, (size_t)n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            free(s);
            return -1;
        }
        done += (size_t)w;
    }
    free(s);
    return n;
}

EXPORT int dprintf(int fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vdprintf(fd, fmt, ap);
    va_end(ap);
    return n;
}

/* ---- sizes ---- */

static int ftruncate_common(int fd, off_t len)
{
    if (!(fd_state(fd) & FT_TRACKED))
        return R(ftruncate)(fd, len);
    int rc = R(ftruncate)(fd, len);
    int e = errno;
    struct stat st;
    inode_t *in = rc == 0 ? fd_inode(fd, &st, NULL) : NULL;
    if (in && !in->dir) {
        used(FN_FTRUNCATE);
        dirty(in, (uint64_t)len, UINT64_MAX); /* shrunk, or zeros where it grew */
    }
    errno = e;
    return rc;
}

EXPORT int ftruncate(int fd, off_t len)
{
    return ftruncate_common(fd, len);
}

EXPORT int ftruncate64(int fd, off64_t len)
{
    return ftruncate_common(fd, (off_t)len);
}

static int truncate_common(const char *path, off_t len)
{
    if (!active || !tracked_path(AT_FDCWD, path))
        return R(truncate)(path, len);
    int rc = R(truncate)(path, len);
    int e = errno;
    struct stat st;
    if (rc == 0 && stat(path, &st) == 0) {
        inode_t *in = inode_find((uint64_t)st.st_ino);
        if (!in)
            die("%s was created without going through crashfs", path);
        used(FN_TRUNCATE);
        dirty(in, (uint64_t)len, UINT64_MAX);
    }
    errno = e;
    return rc;
}

EXPORT int truncate(const char *path, off_t len)
{
    return truncate_common(path, len);
}

EXPORT int truncate64(const char *path, off64_t len)
{
    return truncate_common(path, (off_t)len);
}

static int fallocate_common(int fd, int mode, off_t off, off_t len)
{
    if (!(fd_state(fd) & FT_TRACKED))
        return R(fallocate)(fd, mode, off, len);
    int base = mode & ~FALLOC_FL_KEEP_SIZE;
    bool whole = false, range = false;
    if (base == 0 || base == FALLOC_FL_UNSHARE_RANGE)
        ; /* allocation, and the size (zeros beyond the old end) */
    else if (base == FALLOC_FL_PUNCH_HOLE || base == FALLOC_FL_ZERO_RANGE ||
             base == (FALLOC_FL_ZERO_RANGE | FALLOC_FL_PUNCH_HOLE))
        range = true;
    else if (base == FALLOC_FL_COLLAPSE_RANGE || base == FALLOC_FL_INSERT_RANGE)
        whole = true;
    else
        die("fallocate mode 0x%x on a tracked file: not modelled", mode);
    int rc = R(fallocate)(fd, mode, off, len);
    int e = errno;
    struct stat st;
    inode_t *in = rc == 0 ? fd_inode(fd, &st, NULL) : NULL;
    if (in && !in->dir) {
        used(FN_FALLOCATE);
        if (whole)
            dirty_whole(in);
        else if (range)
            dirty(in, (uint64_t)off, (uint64_t)off + (uint64_t)len);
    }
    errno = e;
    return rc;
}

EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
    return fallocate_common(fd, mode, off, len);
}

EXPORT int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
    return fallocate_common(fd, mode, (off_t)off, (off_t)len);
}

/* posix_fallocate: only the size can change (zeros beyond the old end). */
static int posix_fallocate_common(int fd, off_t off, off_t len)
{
    int rc = R(posix_fallocate)(fd, off, len);
    if (rc == 0 && (fd_state(fd) & FT_TRACKED))
        used(FN_POSIX_FALLOCATE);
    return rc;
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
    return posix_fallocate_common(fd, off, len);
}

EXPORT int posix_fallocate64(int fd, off64_t off, off64_t len)
{
    return posix_fallocate_common(fd, (off_t)off, (off_t)len);
}

/* ---- syncing ---- */

EXPORT int fsync(int fd)
{
    return sync_common(fd, R(fsync), FN_FSYNC);
}

EXPORT int fdatasync(int fd)
{
    return sync_common(fd, R(fdatasync), FN_FDATASYNC);
}

EXPORT void sync(void)
{
    if (active) {
        int fd = R(openat)(AT_FDCWD, root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        used(FN_SYNC);
        if (fd >= 0) {
            sync_tree(fd);
            R(close)(fd);
        }
    }
    R(sync)();
}

EXPORT int syncfs(int fd)
{
    struct stat st;
    if (active && fstat(fd, &st) == 0 && st.st_dev == root_dev) {
        int rfd = R(openat)(AT_FDCWD, root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        used(FN_SYNC);
        if (rfd >= 0) {
            sync_tree(rfd);
            R(close)(rfd);
        }
    }
    return R(syncfs)(fd);
}

/* sync_file_range starts or waits for writeback but makes nothing durable
 * (no metadata, no disk cache flush): nothing is recorded. */
EXPORT int sync_file_range(int fd, off64_t off, off64_t n, unsigned flags)
{
    if (fd_state(fd) & FT_TRACKED)
        used(FN_SYNC_FILE_RANGE);
    return R(sync_file_range)(fd, off, n, flags);
}

/* ---- descriptors ---- */

static void guard_journal_fd(int fd, const char *what)
{
    if (active && fd == jfd)
        die("%s of fd %d, crashfs's journal: not modelled", what, fd);
}

EXPORT int close(int fd)
{
    guard_journal_fd(fd, "close");
    if (active && fd >= 0 && fd < FDTAB && (atomic_load(&fdtab[fd]) & FT_TRACKED))
        used(FN_CLOSE);
    fd_put(fd, 0);
    return R(close)(fd);
}

EXPORT int __close(int fd)
{
    return close(fd);
}

EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
    if (active && !(flags & CLOSE_RANGE_CLOEXEC)) {
        if (jfd >= 0 && (unsigned)jfd >= lo && (unsigned)jfd <= hi)
            die("close_range(%u, %u) would close crashfs's journal: not modelled", lo, hi);
        for (unsigned fd = lo; fd <= hi && fd < FDTAB; fd++)
            fd_put((int)fd, 0);
    }
    return R(close_range)(lo, hi, flags);
}

EXPORT void closefrom(int lo)
{
    if (active) {
        if (jfd >= lo)
            die("closefrom(%d) would close crashfs's journal: not modelled", lo);
        for (int fd = lo < 0 ? 0 : lo; fd < FDTAB; fd++)
            fd_put(fd, 0);
    }
    R(closefrom)(lo);
}

static void dup_state(int from, int to)
{
    uint32_t v = fd_state(from);
    if (v & FT_TRACKED)
        used(FN_DUP);
    fd_put(to, v);
}

EXPORT int dup(int fd)
{
    int r = R(dup)(fd);
    if (r >= 0 && active)
        dup_state(fd, r);
    return r;
}

EXPORT int dup2(int fd, int fd2)
{
    if (fd != fd2)
        guard_journal_fd(fd2, "dup2 onto");
    int r = R(dup2)(fd, fd2);
    if (r >= 0 && active && fd != fd2)
        dup_state(fd, r);
    return r;
}

EXPORT int __dup2(int fd, int fd2)
{
    return dup2(fd, fd2);
}

EXPORT int dup3(int fd, int fd2, int flags)
{
    guard_journal_fd(fd2, "dup3 onto");
    int r = R(dup3)(fd, fd2, flags);
    if (r >= 0 && active)
        dup_state(fd, r);
    return r;
}

static int fcntl_common(int fd, int cmd, void *arg)
{
    int r = R(fcntl)(fd, cmd, arg);
    if (r < 0 || !active)
        return r;
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
        dup_state(fd, r);
    } else if (cmd == F_SETFL) {
        uint32_t v = fd_state(fd);
        if (v & FT_TRACKED) {
            int fl = R(fcntl)(fd, F_GETFL);
            fd_put(fd, open_bits(fl < 0 ? 0 : fl));
        }
    }
    return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_common(fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_common(fd, cmd, arg);
}

EXPORT int __fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_common(fd, cmd, arg);
}

/* ---- calls the model does not cover ---- */

static bool writable_mode(const char *mode)
{
    return strpbrk(mode, "wa+") != NULL;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
    if (active && writable_mode(mode) && tracked_path(AT_FDCWD, path))
        die("fopen(%s, \"%s\"): stdio writes to a tracked file are not modelled", path, mode);
    return R(fopen)(path, mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
    return fopen(path, mode);
}

EXPORT FILE *freopen(const char *path, const char *mode, FILE *f)
{
    if (active && path && writable_mode(mode) && tracked_path(AT_FDCWD, path))
        die("freopen(%s, \"%s\"): stdio writes to a tracked file are not modelled", path, mode);
    if (active && f)
        fd_put(fileno(f), 0);
    return R(freopen)(path, mode, f);
}

EXPORT FILE *freopen64(const char *path, const char *mode, FILE *f)
{
    return freopen(path, mode, f);
}

EXPORT FILE *fdopen(int fd, const char *mode)
{
    if (writable_mode(mode) && (fd_state(fd) & FT_TRACKED))
        die("fdopen(%d, \"%s\"): stdio writes to a tracked file are not modelled", fd, mode);
    return R(fdopen)(fd, mode);
}

EXPORT int fclose(FILE *f)
{
    if (active) {
        int fd = fileno(f);
        guard_journal_fd(fd, "fclose");
        fd_put(fd, 0);
    }
    return R(fclose)(f);
}

EXPORT int closedir(DIR *d)
{
    if (active)
        fd_put(dirfd(d), 0);
    return R(closedir)(d);
}

static void *mmap_common(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    int type = flags & MAP_TYPE;
    bool shared = type == MAP_SHARED || type == MAP_SHARED_VALIDATE;
    bool tracked = active && fd >= 0 && shared && (fd_state(fd) & FT_TRACKED);
    if (tracked && (prot & PROT_WRITE))
        die("a writable shared mapping of a tracked file (fd %d): not modelled", fd);
    void *p = R(mmap)(addr, len, prot, flags, fd, off);
    if (tracked && p != MAP_FAILED) {
        used(FN_MMAP_RO);
        int fl = R(fcntl)(fd, F_GETFL);
        if (fl >= 0 && (fl & O_ACCMODE) != O_RDONLY) { /* mprotect could make it writable */
            pthread_mutex_lock(&mapmu);
            if (nmaps == MAX_MAPS)
                die("more than %d shared mappings of tracked files", MAX_MAPS);
            maps[nmaps].lo = (uintptr_t)p;
            maps[nmaps].hi = (uintptr_t)p + len;
            nmaps++;
            pthread_mutex_unlock(&mapmu);
        }
    }
    return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap_common(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return mmap_common(addr, len, prot, flags, fd, (off_t)off);
}

/* Index of a recorded mapping overlapping [lo, hi), or -1. */
static long map_find(uintptr_t lo, uintptr_t hi)
{
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].lo < hi && lo < maps[i].hi)
            return (long)i;
    return -1;
}

EXPORT int mprotect(void *addr, size_t len, int prot)
{
    if (active && (prot & PROT_WRITE) && nmaps > 0) {
        pthread_mutex_lock(&mapmu);
        long i = map_find((uintptr_t)addr, (uintptr_t)addr + len);
        pthread_mutex_unlock(&mapmu);
        if (i >= 0)
            die("mprotect(PROT_WRITE) of a shared mapping of a tracked file: not modelled");
    }
    return R(mprotect)(addr, len, prot);
}

EXPORT int munmap(void *addr, size_t len)
{
    if (active && nmaps > 0) {
        pthread_mutex_lock(&mapmu);
        long i;
        while ((i = map_find((uintptr_t)addr, (uintptr_t)addr + len)) >= 0)
            maps[i] = maps[--nmaps];
        pthread_mutex_unlock(&mapmu);
    }
    return R(munmap)(addr, len);
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    void *fixed = (flags & MREMAP_FIXED) ? va_arg(ap, void *) : NULL;
    va_end(ap);
    void *p = R(mremap)(old, old_len, new_len, flags, fixed);
    if (active && nmaps > 0 && p != MAP_FAILED) {
        pthread_mutex_lock(&mapmu);
        long i = map_find((uintptr_t)old, (uintptr_t)old + old_len);
        if (i >= 0) {
            maps[i].lo = (uintptr_t)p;
            maps[i].hi = (uintptr_t)p + new_len;
        }
        pthread_mutex_unlock(&mapmu);
    }
    return p;
}

static void refuse_into(int fd, const char *what)
{
    if (fd_state(fd) & FT_TRACKED)
        die("%s into a tracked file (fd %d): not modelled", what, fd);
}

EXPORT ssize_t copy_file_range(int in, off64_t *inoff, int out, off64_t *outoff, size_t n,
                               unsigned flags)
{
    refuse_into(out, "copy_file_range");
    return R(copy_file_range)(in, inoff, out, outoff, n, flags);
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
    refuse_into(out, "sendfile");
    return R(sendfile)(out, in, off, n);
}

EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
    return sendfile(out, in, (off_t *)off, n);
}

EXPORT ssize_t splice(int in, off64_t *inoff, int out, off64_t *outoff, size_t n, unsigned flags)
{
    refuse_into(out, "splice");
    return R(splice)(in, inoff, out, outoff, n, flags);
}

EXPORT int aio_write(struct aiocb *cb)
{
    refuse_into(cb->aio_fildes, "aio_write");
    return R(aio_write)(cb);
}

EXPORT int aio_write64(struct aiocb64 *cb)
{
    refuse_into(cb->aio_fildes, "aio_write64");
    return R(aio_write64)(cb);
}

EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
    for (int i = 0; i < n; i++)
        if (list[i] && list[i]->aio_lio_opcode == LIO_WRITE)
            refuse_into(list[i]->aio_fildes, "lio_listio");
    return R(lio_listio)(mode, list, n, sev);
}

EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
    for (int i = 0; i < n; i++)
        if (list[i] && list[i]->aio_lio_opcode == LIO_WRITE)
            refuse_into(list[i]->aio_fildes, "lio_listio64");
    return R(lio_listio64)(mode, list, n, sev);
}

/* syscall(): the write-path system calls are routed to the wrappers above
 * (so a library that calls them this way is modelled too); io_uring and
 * Linux AIO are refused with ENOSYS, which libraries treat as "not
 * available" and fall back from. */
EXPORT long syscall(long nr, ...)
{
    va_list ap;
    long a[6];
    va_start(ap, nr);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (!active)
        return R(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    const char *p1 = (const char *)a[1], *p0 = (const char *)a[0];
    switch (nr) {
    case SYS_write:
        return write((int)a[0], (const void *)a[1], (size_t)a[2]);
    case SYS_pwrite64:
        return pwrite((int)a[0], (const void *)a[1], (size_t)a[2], (off_t)a[3]);
    case SYS_writev:
        return writev((int)a[0], (const struct iovec *)a[1], (int)a[2]);
    case SYS_pwritev:
        return pwritev((int)a[0], (const struct iovec *)a[1], (int)a[2], (off_t)a[3]);
    case SYS_pwritev2:
        return pwritev2((int)a[0], (const struct iovec *)a[1], (int)a[2], (off_t)a[3], (int)a[5]);
    case SYS_open:
        return open_common(AT_FDCWD, p0, (int)a[1], (mode_t)a[2], FN_OPEN);
    case SYS_openat:
        return open_common((int)a[0], p1, (int)a[2], (mode_t)a[3], FN_OPEN);
    case SYS_creat:
        return creat(p0, (mode_t)a[1]);
#ifdef SYS_openat2
    case SYS_openat2:
        if (tracked_path((int)a[0], p1))
            die("openat2 of %s in the tree: not modelled", p1);
        break;
#endif
    case SYS_close:
        return close((int)a[0]);
#ifdef SYS_close_range
    case SYS_close_range:
        return close_range((unsigned)a[0], (unsigned)a[1], (int)a[2]);
#endif
    case SYS_dup:
        return dup((int)a[0]);
    case SYS_dup2:
        return dup2((int)a[0], (int)a[1]);
    case SYS_dup3:
        return dup3((int)a[0], (int)a[1], (int)a[2]);
    case SYS_fcntl:
        return fcntl_common((int)a[0], (int)a[1], (void *)a[2]);
    case SYS_ftruncate:
        return ftruncate((int)a[0], (off_t)a[1]);
    case SYS_truncate:
        return truncate(p0, (off_t)a[1]);
    case SYS_fallocate:
        return fallocate((int)a[0], (int)a[1], (off_t)a[2], (off_t)a[3]);
    case SYS_fsync:
        return fsync((int)a[0]);
    case SYS_fdatasync:
        return fdatasync((int)a[0]);
    case SYS_sync:
        sync();
        return 0;
    case SYS_syncfs:
        return syncfs((int)a[0]);
    case SYS_sync_file_range:
        return sync_file_range((int)a[0], (off64_t)a[1], (off64_t)a[2], (unsigned)a[3]);
    case SYS_rename:
        return rename(p0, p1);
    case SYS_renameat:
        return renameat((int)a[0], p1, (int)a[2], (const char *)a[3]);
    case SYS_renameat2:
        return renameat2((int)a[0], p1, (int)a[2], (const char *)a[3], (unsigned)a[4]);
    case SYS_link:
        return link(p0, p1);
    case SYS_linkat:
        return linkat((int)a[0], p1, (int)a[2], (const char *)a[3], (int)a[4]);
    case SYS_symlink:
        return symlink(p0, p1);
    case SYS_symlinkat:
        return symlinkat(p0, (int)a[1], (const char *)a[2]);
    case SYS_mknod:
        return mknod(p0, (mode_t)a[1], (dev_t)a[2]);
    case SYS_mknodat:
        return mknodat((int)a[0], p1, (mode_t)a[2], (dev_t)a[3]);
    case SYS_unlink:
        return unlink(p0);
    case SYS_unlinkat:
        return unlinkat((int)a[0], p1, (int)a[2]);
    case SYS_rmdir:
        return rmdir(p0);
    case SYS_mkdir:
        return mkdir(p0, (mode_t)a[1]);
    case SYS_mkdirat:
        return mkdirat((int)a[0], p1, (mode_t)a[2]);
    case SYS_mmap:
        return (long)mmap((void *)a[0], (size_t)a[1], (int)a[2], (int)a[3], (int)a[4], (off_t)a[5]);
    case SYS_mprotect:
        return mprotect((void *)a[0], (size_t)a[1], (int)a[2]);
    case SYS_copy_file_range:
        refuse_into((int)a[2], "copy_file_range (syscall)");
        break;
    case SYS_sendfile:
        refuse_into((int)a[0], "sendfile (syscall)");
        break;
    case SYS_splice:
        refuse_into((int)a[2], "splice (syscall)");
        break;
    case SYS_open_by_handle_at:
        return open_by_handle_at((int)a[0], (struct file_handle *)a[1], (int)a[2]);
#ifdef SYS_io_uring_setup
    case SYS_io_uring_setup:
#endif
    case SYS_io_setup:
        errno = ENOSYS;
        return -1;
    default:
        break;
    }
    return R(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- start-up ---- */

/* Reads the journal at start-up (a later process on the same tree): the
 * inodes it created, and where its valid records end (a process killed
 * while appending leaves an incomplete record, cut off here). */
static void attach(uint64_t size)
{
    unsigned char *buf = size ? malloc(size) : NULL;
    uint64_t got = 0, off = 0, plen, *created = NULL;
    size_t ncreated = 0, capc = 0;
    uint32_t type;
    const unsigned char *p;
    bool based = false;
    if (size && !buf)
        die("out of memory reading the journal (%llu bytes)", (unsigned long long)size);
    while (got < size) {
        ssize_t n = pread(jfd, buf + got, size - got, (off_t)got);
        if (n <= 0)
            die("cannot read the journal: %s", n < 0 ? strerror(errno) : "short");
        got += (uint64_t)n;
    }
    int r;
    while ((r = cfs_next(buf, size, &off, &type, &p, &plen)) == 1) {
        if (type == CFS_BASE && plen >= 16) {
            if (cfs_get64(p) != (uint64_t)root_dev || cfs_get64(p + 8) != (uint64_t)root_ino)
                die("the journal in the state directory belongs to another %s (a new directory "
                    "at the same path?): remove it, or run the power-loss tool",
                    root);
            based = true;
        } else if (type == CFS_CREATE && plen >= 16) {
            if (ncreated == capc) {
                capc = capc ? 2 * capc : 256;
                created = realloc(created, capc * sizeof *created);
                if (!created)
                    die("out of memory");
            }
            created[ncreated++] = cfs_get64(p);
        }
    }
    if (!based)
        die("the journal has no BASE record");
    if (r < 0) {
        if (R(ftruncate)(jfd, (off_t)off) != 0)
            die("cannot cut the journal's incomplete tail: %s", strerror(errno));
    }
    free(buf);
    /* Every file of the tree now must be one the journal created; its
     * content may differ from the durable one (page cache of an earlier
     * process), so its next fsync records all of it. */
    uint64_t files = 0;
    int rfd = R(openat)(AT_FDCWD, root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int stack[64], depth = 0;
    if (rfd < 0)
        die("cannot open %s: %s", root, strerror(errno));
    stack[depth++] = rfd;
    while (depth > 0) {
        int dfd = stack[--depth];
        DIR *d = fdopendir(dfd);
        struct dirent *de;
        struct stat st;
        if (!d)
            die("cannot list the tree: %s", strerror(errno));
        if (fstat(dfd, &st) == 0)
            inode_register((uint64_t)st.st_ino, true, false);
        while ((de = readdir(d))) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                continue;
            const char *why = unmodelled(&st);
            if (why)
                die("%s in the tree is %s: not modelled", de->d_name, why);
            bool known = false;
            for (size_t i = ncreated; i-- > 0 && !known;)
                known = created[i] == (uint64_t)st.st_ino;
            if (!known)
                die("%s (inode %llu) in the tree was created without going through crashfs",
                    de->d_name, (unsigned long long)st.st_ino);
            if (S_ISDIR(st.st_mode)) {
                if (depth == 64)
                    die("the tree is deeper than 64 directories");
                int cfd = R(openat)(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (cfd < 0)
                    die("cannot open %s: %s", de->d_name, strerror(errno));
                stack[depth++] = cfd;
            } else {
                inode_register((uint64_t)st.st_ino, false, true);
                files++;
            }
        }
        R(closedir)(d);
    }
    free(created);
    note("pid %d attached to the journal: %llu files, each recorded whole at its next fsync",
         (int)getpid(), (unsigned long long)files);
}

/* The first process on a tree: everything in it is durable as it is. */
static void baseline(void)
{
    buf_t rec = {0};
    struct stat st;
    rec_begin(&rec);
    buf_put64(&rec, (uint64_t)root_dev);
    buf_put64(&rec, (uint64_t)root_ino);
    buf_put64(&rec, now_ns());
    journal_append(&rec, CFS_BASE);
    int fd = R(openat)(AT_FDCWD, root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0)
        die("cannot open %s: %s", root, strerror(errno));
    inode_create(&st);
    dir_record(&rec, fd, (uint64_t)root_ino, true);
    journal_append(&rec, CFS_DIR);
    R(close)(fd);
    free(rec.p);
    note("pid %d took the baseline of %s", (int)getpid(), root);
}

__attribute__((constructor)) static void crashfs_init(void)
{
    const char *r = getenv("CRASHFS_ROOT");
    char state[PATH_MAX + 16], jpath[PATH_MAX + 32], sreal[PATH_MAX];
    struct stat st;
    if (!r || !*r)
        return;
    if (!realpath(r, root) || stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
        die("CRASHFS_ROOT=%s is not a directory", r);
    rootlen = strlen(root);
    if (rootlen == 1)
        die("CRASHFS_ROOT=/ is not supported");
    root_dev = st.st_dev;
    root_ino = st.st_ino;
    const char *delay = getenv("CRASHFS_SYNC_DELAY_US");
    if (delay && *delay)
        sync_delay.tv_nsec = (strtol(delay, NULL, 10) % 1000000) * 1000;
    const char *s = getenv("CRASHFS_STATE");
    if (s && *s)
        snprintf(state, sizeof state, "%s", s);
    else
        snprintf(state, sizeof state, "%s.crashfs", root);
    if (R(mkdirat)(AT_FDCWD, state, 0700) != 0 && errno != EEXIST)
        die("cannot create the state directory %s: %s", state, strerror(errno));
    if (!realpath(state, sreal))
        die("state directory %s: %s", state, strerror(errno));
    if (under_root(sreal))
        die("the state directory %s is inside CRASHFS_ROOT", sreal);
    snprintf(jpath, sizeof jpath, "%s/" CFS_JOURNAL_NAME, sreal);
    int fd = R(openat)(AT_FDCWD, jpath, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        die("cannot open the journal %s: %s", jpath, strerror(errno));
    jfd = R(fcntl)(fd, F_DUPFD_CLOEXEC, JOURNAL_FD_MIN);
    if (jfd < 0)
        jfd = fd;
    else
        R(close)(fd);
    if (flock(jfd, LOCK_EX) != 0 || fstat(jfd, &st) != 0)
        die("cannot lock the journal: %s", strerror(errno));
    if (st.st_size == 0)
        baseline();
    else
        attach((uint64_t)st.st_size);
    flock(jfd, LOCK_UN);
    active = true;
}
