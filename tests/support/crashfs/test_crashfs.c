/* Tests of crashfs (the LD_PRELOAD layer) and crashfs-powerloss: this
 * program re-executes itself (--child SCENARIO ROOT) under the layer; the
 * child writes, syncs some of it and dies of SIGKILL; the power-loss tool
 * then rewrites the tree, and the parent checks that exactly the durable
 * state is left (or, with a tear, that only the unsynced range changed).
 * Calls the model does not cover must abort the child with a message. */
#undef _POSIX_C_SOURCE
#define _GNU_SOURCE 1

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define A_LEN 5000 /* synced */
#define B_LEN 3000 /* written after the sync */

typedef struct env {
    char work[128], root[160], state[160], log[160], journal[192];
} env_t;

/* ---- the child, under the layer ---- */

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "child: %s:%d: %s failed (%s)\n", __FILE__, __LINE__, #x,              \
                    strerror(errno));                                                              \
            _exit(3);                                                                              \
        }                                                                                          \
    } while (0)

static char cpath[512];

static const char *in_root(const char *root, const char *name)
{
    snprintf(cpath, sizeof cpath, "%s/%s", root, name);
    return cpath;
}

static void put_all(int fd, const void *p, size_t n)
{
    CHECK(write(fd, p, n) == (ssize_t)n);
}

static void fill(char *b, size_t n, char c)
{
    memset(b, c, n);
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0);
    CHECK(fsync(fd) == 0);
    close(fd);
}

/* A file with content, synced, whose name is made durable by the caller. */
static void synced_file(const char *path, const char *content)
{
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(fd >= 0);
    put_all(fd, content, strlen(content));
    CHECK(fsync(fd) == 0);
    close(fd);
}

/* f1: A synced (name durable), then B written after it. */
static void write_a_then_b(const char *root)
{
    char a[A_LEN], b[B_LEN];
    fill(a, sizeof a, 'a');
    fill(b, sizeof b, 'b');
    int fd = open(in_root(root, "f1"), O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(fd >= 0);
    put_all(fd, a, sizeof a);
    CHECK(fdatasync(fd) == 0);
    sync_dir(root);
    put_all(fd, b, sizeof b);
    close(fd);
}

static void child_basic(const char *root)
{
    char path[512];
    write_a_then_b(root);
    /* Durable files to rename and unlink later; a durable directory e. */
    synced_file(in_root(root, "g"), "gee");
    synced_file(in_root(root, "u"), "you");
    CHECK(mkdir(in_root(root, "e"), 0700) == 0);
    synced_file(in_root(root, "t"), "0123456789");
    int s = open(in_root(root, "s"), O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(s >= 0);
    put_all(s, "ess", 3);
    int ap = open(in_root(root, "ap"), O_CREAT | O_EXCL | O_WRONLY | O_APPEND, 0600);
    CHECK(ap >= 0);
    int v = open(in_root(root, "v"), O_CREAT | O_EXCL | O_WRONLY, 0600);
    CHECK(v >= 0);
    sync_dir(root);
    snprintf(path, sizeof path, "%s/e/x", root);
    synced_file(path, "inside e");
    snprintf(path, sizeof path, "%s/e", root);
    sync_dir(path);

    /* Not durable: a new name, a rename, an unlink, a new directory, a
     * truncation, an overwrite of a baseline file. */
    synced_file(in_root(root, "f2"), "two");               /* synced data, but no directory sync */
    CHECK(rename(in_root(root, "g"), "/dev/null/x") != 0); /* outside: fails, untracked */
    snprintf(path, sizeof path, "%s/h", root);
    CHECK(rename(in_root(root, "g"), path) == 0);
    CHECK(unlink(in_root(root, "u")) == 0);
    CHECK(mkdir(in_root(root, "d"), 0700) == 0);
    int t = open(in_root(root, "t"), O_RDWR);
    CHECK(t >= 0 && ftruncate(t, 3) == 0);
    close(t);
    int pre = open(in_root(root, "pre"), O_WRONLY);
    CHECK(pre >= 0);
    put_all(pre, "PRE!", 4);
    close(pre);

    /* Durable: a size grown by posix_fallocate and data in it (fdatasync),
     * appends, writev and pwritev (fsync through a dup). */
    CHECK(posix_fallocate(s, 0, 8192) == 0);
    CHECK(pwrite(s, "zz", 2, 6000) == 2);
    CHECK(fdatasync(s) == 0);
    put_all(ap, "x", 1);
    put_all(ap, "y", 1);
    CHECK(pwrite(ap, "z", 1, 0) == 1); /* O_APPEND: Linux appends anyway */
    CHECK(fsync(ap) == 0);
    struct iovec iov[2] = {{"wri", 3}, {"tev", 3}};
    CHECK(writev(v, iov, 2) == 6);
    struct iovec iov2[1] = {{"PW", 2}};
    CHECK(pwritev(v, iov2, 1, 10) == 2);
    int v2 = dup(v);
    CHECK(v2 >= 0 && fsync(v2) == 0);
    /* sync_file_range makes nothing durable. */
    put_all(ap, "!", 1);
    CHECK(sync_file_range(ap, 0, 0,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER) == 0);
    /* Writes outside the tree pass through. */
    int out = open("/dev/null", O_WRONLY);
    CHECK(out >= 0);
    put_all(out, "x", 1);
    close(out);
    raise(SIGKILL);
}

static void child_torn(const char *root)
{
    write_a_then_b(root);
    raise(SIGKILL);
}

/* First process of "continued": c synced as "hello", then " world" written;
 * n created with data, never synced. Exits normally: the page cache keeps
 * it, nothing more is durable. */
static void child_first(const char *root)
{
    synced_file(in_root(root, "c"), "hello");
    int n = open(in_root(root, "n"), O_CREAT | O_EXCL | O_WRONLY, 0600);
    CHECK(n >= 0);
    put_all(n, "data", 4);
    sync_dir(root);
    int c = open(in_root(root, "c"), O_WRONLY | O_APPEND);
    CHECK(c >= 0);
    put_all(c, " world", 6);
    int m = open(in_root(root, "m"), O_CREAT | O_EXCL | O_WRONLY, 0600);
    CHECK(m >= 0);
    put_all(m, "later", 5);
    _exit(0);
}

/* Second process: an fsync of c covers what the first one wrote; the name
 * m becomes durable with a directory fsync, but none of its data. */
static void child_second(const char *root)
{
    int c = open(in_root(root, "c"), O_RDONLY);
    CHECK(c >= 0 && fsync(c) == 0);
    sync_dir(root);
    raise(SIGKILL);
}

static void child_dsync(const char *root)
{
    int fd = open(in_root(root, "ds"), O_CREAT | O_EXCL | O_WRONLY | O_DSYNC, 0600);
    CHECK(fd >= 0);
    sync_dir(root);
    put_all(fd, "durable", 7);
    raise(SIGKILL);
}

static void child_two_syncs(const char *root)
{
    int fd = open(in_root(root, "j"), O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(fd >= 0);
    sync_dir(root);
    put_all(fd, "one", 3);
    CHECK(fsync(fd) == 0);
    put_all(fd, "two", 3);
    CHECK(fsync(fd) == 0);
    raise(SIGKILL);
}

static void child_mmap(const char *root)
{
    int fd = open(in_root(root, "pre"), O_RDWR);
    CHECK(fd >= 0);
    void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);                    /* read-only: allowed */
    mprotect(p, 4096, PROT_READ | PROT_WRITE); /* aborts */
    _exit(4);
}

static void child_mmap_write(const char *root)
{
    int fd = open(in_root(root, "pre"), O_RDWR);
    CHECK(fd >= 0);
    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); /* aborts */
    _exit(4);
}

static void child_copy_range(const char *root)
{
    int in = open("/proc/self/exe", O_RDONLY);
    int fd = open(in_root(root, "cp"), O_CREAT | O_WRONLY, 0600);
    CHECK(in >= 0 && fd >= 0);
    copy_file_range(in, NULL, fd, NULL, 100, 0); /* aborts */
    _exit(4);
}

static void child_fopen(const char *root)
{
    FILE *f = fopen(in_root(root, "pre"), "r"); /* reading: allowed */
    CHECK(f != NULL);
    fclose(f);
    fopen(in_root(root, "st"), "w"); /* aborts */
    _exit(4);
}

static void child_io_uring(const char *root)
{
    (void)root;
    errno = 0;
    long r = syscall(SYS_io_uring_setup, 8, NULL);
    /* Refused, so that a library would fall back to the interposed calls. */
    _exit(r == -1 && errno == ENOSYS ? 0 : 5);
}

static void child_raw_pwrite(const char *root)
{
    /* A write through syscall() is modelled like the call itself. */
    int fd = open(in_root(root, "raw"), O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(fd >= 0);
    sync_dir(root);
    CHECK(syscall(SYS_pwrite64, fd, "raw!", 4, 0) == 4);
    CHECK(syscall(SYS_fdatasync, fd) == 0);
    CHECK(syscall(SYS_pwrite64, fd, "late", 4, 4) == 4);
    raise(SIGKILL);
}

static int child_main(const char *scenario, const char *root)
{
    static const struct {
        const char *name;
        void (*fn)(const char *);
    } all[] = {{"basic", child_basic},
               {"torn", child_torn},
               {"first", child_first},
               {"second", child_second},
               {"dsync", child_dsync},
               {"two-syncs", child_two_syncs},
               {"mmap", child_mmap},
               {"mmap-write", child_mmap_write},
               {"copy-range", child_copy_range},
               {"fopen", child_fopen},
               {"io-uring", child_io_uring},
               {"raw-pwrite", child_raw_pwrite}};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (strcmp(all[i].name, scenario) == 0)
            all[i].fn(root);
    fprintf(stderr, "unknown scenario %s\n", scenario);
    return 2;
}

/* ---- the parent ---- */

static const char *preload(void)
{
    const char *p = getenv("BQ_CRASHFS_PRELOAD");
    return p && *p ? p : BQ_CRASHFS_PRELOAD;
}

static const char *tool_path(void)
{
    const char *p = getenv("BQ_CRASHFS_TOOL");
    return p && *p ? p : BQ_CRASHFS_TOOL;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[1024];
    struct stat st;
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(path);
        else
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int setup(void **state)
{
    env_t *e = calloc(1, sizeof *e);
    const char *tmp = getenv("TMPDIR");
    if (!e)
        return -1;
    snprintf(e->work, sizeof e->work, "%s/crashfs-test.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(e->work))
        return -1;
    snprintf(e->root, sizeof e->root, "%s/root", e->work);
    snprintf(e->state, sizeof e->state, "%s/state", e->work);
    snprintf(e->log, sizeof e->log, "%s/out.log", e->work);
    snprintf(e->journal, sizeof e->journal, "%s/journal", e->state);
    if (mkdir(e->root, 0700) != 0)
        return -1;
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env_t *e = *state;
    remove_tree(e->work);
    free(e);
    return 0;
}

/* Writes content to name in the root without the layer (before any child:
 * part of the baseline). */
static void put_file(env_t *e, const char *name, const char *content)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", e->root, name);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

/* Runs argv (argv[0] a path) with its stdout and stderr in e->log;
 * returns its wait status. under: with the layer on e->root. */
static int run(env_t *e, char *const argv[], bool under)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(e->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        if (under) {
            setenv("LD_PRELOAD", preload(), 1);
            setenv("CRASHFS_ROOT", e->root, 1);
            setenv("CRASHFS_STATE", e->state, 1);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    size_t n = 0, cap = 0, got;
    if (!f)
        return NULL;
    do {
        if (n + 4096 > cap) {
            cap = cap ? 2 * cap : 8192;
            b = realloc(b, cap + 1);
            assert_non_null(b);
        }
        got = fread(b + n, 1, 4096, f);
        n += got;
    } while (got > 0);
    fclose(f);
    b[n] = '\0';
    if (len)
        *len = n;
    return b;
}

/* Copies the last run's output to stderr (before a failure: fail_msg does
 * not return, so nothing allocated may be pending). */
static void print_log(env_t *e)
{
    char *log = slurp(e->log, NULL);
    fprintf(stderr, "--- %s ---\n%s--- end ---\n", e->log, log ? log : "");
    free(log);
}

static int child(env_t *e, const char *scenario)
{
    char *argv[] = {"/proc/self/exe", "--child", (char *)scenario, e->root, NULL};
    return run(e, argv, true);
}

static void child_killed(env_t *e, const char *scenario)
{
    int st = child(e, scenario);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
        print_log(e);
        fail_msg("child %s: status 0x%x, expected SIGKILL (its output is above)", scenario, st);
    }
}

/* Runs the power-loss tool with a tear mode and seed; its output in *out
 * (malloc'd). */
static void power_loss(env_t *e, const char *tear, unsigned seed, char **out)
{
    char s[32];
    snprintf(s, sizeof s, "%u", seed);
    char *argv[] = {(char *)tool_path(), "--seed", s,        "--tear",
                    (char *)tear,        e->root,  e->state, NULL};
    int st = run(e, argv, false);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        print_log(e);
        fail_msg("crashfs-powerloss failed (0x%x; its output is above)", st);
    }
    char *log = slurp(e->log, NULL);
    if (out)
        *out = log;
    else
        free(log);
}

/* The content of name in the root; NULL when absent. */
static char *content(env_t *e, const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", e->root, name);
    return slurp(path, len);
}

static void expect_file(env_t *e, const char *name, const char *want, size_t want_len)
{
    size_t len;
    char *c = content(e, name, &len);
    if (!c)
        fail_msg("%s is missing", name);
    if (len != want_len || memcmp(c, want, want_len) != 0)
        fail_msg("%s holds %zu bytes \"%.40s\", expected %zu \"%.40s\"", name, len, c, want_len,
                 want);
    free(c);
}

static void expect_absent(env_t *e, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", e->root, name);
    if (lstat(path, &st) == 0)
        fail_msg("%s exists but was never made durable", name);
}

/* The names in the root (and in e/), sorted, space-separated. */
static void expect_names(env_t *e, const char *want)
{
    char got[1024] = "";
    struct dirent **list;
    int n = scandir(e->root, &list, NULL, alphasort);
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        if (list[i]->d_name[0] != '.') {
            strcat(got, *got ? " " : "");
            strcat(got, list[i]->d_name);
        }
        free(list[i]);
    }
    free(list);
    if (strcmp(got, want) != 0)
        fail_msg("the root holds \"%s\", expected \"%s\"", got, want);
}

/* Everything the child made durable is back, nothing else. */
static void rolls_back_to_the_durable_state(void **state)
{
    env_t *e = *state;
    char a[A_LEN], *out;
    put_file(e, "pre", "pre");
    child_killed(e, "basic");
    power_loss(e, "none", 1, &out);
    bool none = strstr(out, "tear=none torn_bytes=0") != NULL;
    free(out);
    assert_true(none);
    expect_names(e, "ap e f1 g pre s t u v");
    fill(a, sizeof a, 'a');
    expect_file(e, "f1", a, A_LEN);        /* A synced, B not */
    expect_file(e, "g", "gee", 3);         /* the rename to h was not */
    expect_file(e, "u", "you", 3);         /* nor the unlink */
    expect_file(e, "t", "0123456789", 10); /* nor the truncation */
    expect_file(e, "pre", "pre", 3);       /* the baseline, overwritten but not synced */
    expect_file(e, "e/x", "inside e", 8);
    expect_file(e, "ap", "xyz", 3); /* "!" after sync_file_range only */
    expect_file(e, "v", "writev\0\0\0\0PW", 12);
    size_t len;
    char *s = content(e, "s", &len);
    assert_non_null(s);
    assert_int_equal(len, 8192); /* the size posix_fallocate set, made durable by fdatasync */
    assert_memory_equal(s, "ess", 3);
    assert_memory_equal(s + 6000, "zz", 2);
    free(s);
    expect_absent(e, "f2");
    expect_absent(e, "h");
    expect_absent(e, "d");
}

/* Torn writes change only the unsynced range: f1 keeps A whole and at most
 * a prefix of B (or garbage inside B's range). */
static void tears_stay_in_the_unsynced_range(void **state)
{
    env_t *e = *state;
    static const char *const modes[] = {"prefix-sector", "prefix-byte", "garbage", "sectors"};
    char a[A_LEN];
    fill(a, sizeof a, 'a');
    unsigned torn_any = 0;
    for (size_t m = 0; m < 4; m++) {
        for (unsigned seed = 1; seed <= 6; seed++) {
            char *out;
            remove_tree(e->root);
            remove_tree(e->state);
            assert_int_equal(mkdir(e->root, 0700), 0);
            child_killed(e, "torn");
            power_loss(e, modes[m], seed, &out);
            size_t len = 0;
            char *c = content(e, "f1", &len);
            const char *bad = NULL;
            bool prefix =
                strcmp(modes[m], "prefix-sector") == 0 || strcmp(modes[m], "prefix-byte") == 0;
            if (!c || len < A_LEN || len > A_LEN + B_LEN || memcmp(c, a, A_LEN) != 0)
                bad = "A is not intact, or the file outgrew A and B";
            for (size_t i = A_LEN; !bad && i < len; i++) {
                if (prefix && c[i] != 'b')
                    bad = "a prefix tear left something other than B";
                else if (strcmp(modes[m], "sectors") == 0 && c[i] != 'b' && c[i] != 0)
                    bad = "a sector tear left something other than B or zeros";
            }
            if (!bad && strcmp(modes[m], "prefix-sector") == 0 &&
                !(len == A_LEN || len == A_LEN + B_LEN || len % 512 == 0))
                bad = "a sector tear ends off a sector boundary";
            if (!bad && strcmp(modes[m], "garbage") == 0) {
                size_t g = A_LEN;
                while (g < len && c[g] == 'b')
                    g++;
                if (len == A_LEN)
                    bad = "no garbage";
                else if (len - g > 512)
                    bad = "real data after the garbage";
            }
            torn_any += len > A_LEN;
            free(c);
            if (bad) {
                fprintf(stderr, "%s", out);
                free(out);
                fail_msg("%s, seed %u: f1 has %zu bytes: %s (the tool's report is above)", modes[m],
                         seed, len, bad);
            }
            free(out);
        }
    }
    assert_true(torn_any > 0);
}

/* A later process's fsync covers what an earlier one wrote; a name made
 * durable without its data leaves an empty file. */
static void later_process_continues_the_journal(void **state)
{
    env_t *e = *state;
    int st = child(e, "first");
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    child_killed(e, "second");
    power_loss(e, "none", 1, NULL);
    expect_names(e, "c m n");
    expect_file(e, "c", "hello world", 11);
    expect_file(e, "n", "", 0);
    expect_file(e, "m", "", 0);
}

static void o_dsync_writes_are_durable(void **state)
{
    env_t *e = *state;
    child_killed(e, "dsync");
    power_loss(e, "none", 1, NULL);
    expect_file(e, "ds", "durable", 7);
}

static void syscall_writes_are_modelled(void **state)
{
    env_t *e = *state;
    child_killed(e, "raw-pwrite");
    power_loss(e, "none", 1, NULL);
    expect_file(e, "raw", "raw!", 4);
}

/* A journal cut inside its last record (a SIGKILL while appending) is read
 * up to the record before. */
static void incomplete_last_record_is_ignored(void **state)
{
    env_t *e = *state;
    struct stat st;
    char *out;
    child_killed(e, "two-syncs");
    assert_int_equal(stat(e->journal, &st), 0);
    assert_int_equal(truncate(e->journal, st.st_size - 3), 0);
    power_loss(e, "none", 1, &out);
    bool ignored = strstr(out, "incomplete last record") != NULL;
    free(out);
    assert_true(ignored);
    expect_file(e, "j", "one", 3);
}

/* A file that appears in the tree behind the layer's back stops the next
 * process that attaches. */
static void files_created_without_the_layer_are_fatal(void **state)
{
    env_t *e = *state;
    int st = child(e, "first");
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    put_file(e, "rogue", "x");
    st = child(e, "second");
    char *log = slurp(e->log, NULL);
    bool found = log && strstr(log, "created without going through crashfs");
    free(log);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    assert_true(found);
}

static void expect_abort(env_t *e, const char *scenario, const char *message)
{
    put_file(e, "pre", "pre");
    int st = child(e, scenario);
    char *log = slurp(e->log, NULL);
    bool found = log && strstr(log, message);
    free(log);
    if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT || !found) {
        print_log(e);
        fail_msg("%s: status 0x%x, expected SIGABRT and \"%s\" (the output is above)", scenario, st,
                 message);
    }
}

static void unmodelled_calls_abort(void **state)
{
    env_t *e = *state;
    expect_abort(e, "mmap", "mprotect(PROT_WRITE) of a shared mapping");
}

static void writable_shared_mapping_aborts(void **state)
{
    expect_abort(*state, "mmap-write", "writable shared mapping");
}

static void copy_file_range_aborts(void **state)
{
    expect_abort(*state, "copy-range", "copy_file_range into a tracked file");
}

static void stdio_writes_abort(void **state)
{
    expect_abort(*state, "fopen", "stdio writes to a tracked file are not modelled");
}

static void io_uring_is_refused(void **state)
{
    env_t *e = *state;
    int st = child(e, "io-uring");
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(rolls_back_to_the_durable_state, setup, teardown),
        cmocka_unit_test_setup_teardown(tears_stay_in_the_unsynced_range, setup, teardown),
        cmocka_unit_test_setup_teardown(later_process_continues_the_journal, setup, teardown),
        cmocka_unit_test_setup_teardown(o_dsync_writes_are_durable, setup, teardown),
        cmocka_unit_test_setup_teardown(syscall_writes_are_modelled, setup, teardown),
        cmocka_unit_test_setup_teardown(incomplete_last_record_is_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(files_created_without_the_layer_are_fatal, setup, teardown),
        cmocka_unit_test_setup_teardown(unmodelled_calls_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(writable_shared_mapping_aborts, setup, teardown),
        cmocka_unit_test_setup_teardown(copy_file_range_aborts, setup, teardown),
        cmocka_unit_test_setup_teardown(stdio_writes_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(io_uring_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests_name("crashfs", tests, NULL, NULL);
}
