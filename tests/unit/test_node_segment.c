/* Unit tests of node/binlog/segment.c: the directory lock (held by another
 * process, missing or wrong directory), segment names and listing
 * (including beanstalkd's binlog.N files), creating a segment (prefix,
 * preallocation, no overwrite) and reading its header back. Each test works
 * in its own mkdtemp directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node/binlog/segment.h"
#include "proto/binlog.pb-c.h"

static char *make_dir(void)
{
    char tmpl[] = "/tmp/bq-segment-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *d = strdup(tmpl);
    assert_non_null(d);
    return d;
}

static void remove_dir(char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

static void touch(const char *dir, const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

/* Waits up to 10 s for one byte on fd; returns it, or -1. */
static int read_byte(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;
    if (poll(&p, 1, 10000) != 1 || read(fd, &c, 1) != 1)
        return -1;
    return c;
}

static void lock_held_by_other_process(void **state)
{
    (void)state;
    char *dir = make_dir();
    int ready[2], release[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(release), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(release[1]);
        char err[512];
        char ok = bq_segment_lock_dir(dir, err, sizeof err) == 0 ? 'y' : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(2);
        char c;
        (void)!read(release[0], &c, 1); /* until the parent closes its end */
        _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    assert_int_equal(read_byte(ready[0]), 'y');

    char err[512] = "";
    assert_int_equal(bq_segment_lock_dir(dir, err, sizeof err), -1);
    char expect[64];
    snprintf(expect, sizeof expect, "(pid %ld)", (long)pid);
    assert_non_null(strstr(err, "is locked by another process"));
    assert_non_null(strstr(err, dir));
    assert_non_null(strstr(err, expect));

    close(release[1]); /* the child exits, and its lock goes with it */
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ready[0]);
    assert_int_equal(bq_segment_lock_dir(dir, err, sizeof err), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/lock", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    remove_dir(dir);
}

static void lock_bad_directory(void **state)
{
    (void)state;
    char *dir = make_dir();
    char missing[512], file[512], err[512];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    assert_int_equal(bq_segment_lock_dir(missing, err, sizeof err), -1);
    assert_non_null(strstr(err, missing));
    assert_non_null(strstr(err, strerror(ENOENT)));

    touch(dir, "plain", "x", 1);
    snprintf(file, sizeof file, "%s/plain", dir);
    assert_int_equal(bq_segment_lock_dir(file, err, sizeof err), -1);
    assert_non_null(strstr(err, file));
    assert_non_null(strstr(err, "not a directory"));
    remove_dir(dir);
}

static void path_names(void **state)
{
    (void)state;
    char buf[64];
    bq_segment_path(buf, sizeof buf, "/var/lib/bq", 1);
    assert_string_equal(buf, "/var/lib/bq/bqlog.1");
    bq_segment_path(buf, sizeof buf, "d", UINT64_MAX);
    assert_string_equal(buf, "d/bqlog.18446744073709551615");
}

static void list_segments_and_beanstalkd_files(void **state)
{
    (void)state;
    char *dir = make_dir();
    uint64_t *seqs = (uint64_t *)1;
    size_t n = 99;
    bool bsd = true;
    assert_int_equal(bq_segment_list(dir, &seqs, &n, &bsd), 0);
    assert_int_equal(n, 0);
    assert_false(bsd);
    free(seqs);

    const char *names[] = {"bqlog.20",
                           "bqlog.3",
                           "bqlog.1",
                           "bqlog.02",
                           "bqlog.0",
                           "bqlog.",
                           "bqlog.x",
                           "bqlog.4x",
                           "lock",
                           "binlog.1x",
                           "xbqlog.7",
                           "bqlog.5.corrupt-44",
                           "bqlog.99999999999999999999",
                           "bqlog.18446744073709551615"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        touch(dir, names[i], "", 0);
    assert_int_equal(bq_segment_list(dir, &seqs, &n, &bsd), 0);
    assert_int_equal(n, 4);
    assert_int_equal(seqs[0], 1);
    assert_int_equal(seqs[1], 3);
    assert_int_equal(seqs[2], 20);
    assert_true(seqs[3] == UINT64_MAX);
    assert_false(bsd); /* binlog.1x is not one of beanstalkd's */
    free(seqs);

    touch(dir, "binlog.12", "", 0);
    assert_int_equal(bq_segment_list(dir, &seqs, &n, &bsd), 0);
    assert_int_equal(n, 4);
    assert_true(bsd);
    free(seqs);

    char missing[512];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    assert_int_equal(bq_segment_list(missing, &seqs, &n, &bsd), -ENOENT);
    remove_dir(dir);
}

static bq_segment_meta_t sample_meta(uint64_t seq)
{
    bq_segment_meta_t m;
    memset(&m, 0, sizeof m);
    m.seq = seq;
    m.first_lsn = 1234567;
    m.epoch = 9;
    m.created_wall = INT64_C(1700000000123456789);
    strcpy(m.cluster_id, "cluster-a");
    strcpy(m.node_id, "node-1-with-a-rather-long-name-of-exactly-sixty-three-bytes-xyz");
    assert_int_equal(strlen(m.node_id), 63);
    return m;
}

static void create_and_read_meta(void **state)
{
    (void)state;
    char *dir = make_dir();
    bq_segment_meta_t m = sample_meta(7), got;
    uint64_t ds = 0, ds2 = 0;
    int fd = bq_segment_create(dir, &m, 65536, &ds);
    assert_true(fd >= 0);
    assert_true(ds > BQ_SEGMENT_PREFIX_FIXED && ds < 256);
    char path[512], err[256];
    bq_segment_path(path, sizeof path, dir, 7);
    assert_int_equal(file_size(path), 65536);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    assert_int_equal(bq_segment_read_meta(fd, &got, &ds2, err, sizeof err), 0);
    assert_int_equal(ds2, ds);
    assert_int_equal(got.seq, 7);
    assert_int_equal(got.first_lsn, 1234567);
    assert_int_equal(got.epoch, 9);
    assert_true(got.created_wall == m.created_wall);
    assert_string_equal(got.cluster_id, "cluster-a");
    assert_string_equal(got.node_id, m.node_id);

    /* the rest of the file reads as zeros: the clean end of the data */
    uint8_t buf[64], zero[64] = {0};
    assert_int_equal(pread(fd, buf, sizeof buf, (off_t)ds), (ssize_t)sizeof buf);
    assert_memory_equal(buf, zero, sizeof buf);

    assert_int_equal(bq_segment_preallocate(fd, 200000), 0);
    assert_int_equal(file_size(path), 200000);
    assert_int_equal(bq_segment_preallocate(fd, 1000), 0); /* never shrinks */
    assert_int_equal(file_size(path), 200000);
    close(fd);

    /* an existing segment is never overwritten */
    assert_int_equal(bq_segment_create(dir, &m, 65536, &ds), -EEXIST);
    assert_int_equal(file_size(path), 200000);
    remove_dir(dir);
}

static void create_small_and_failing(void **state)
{
    (void)state;
    char *dir = make_dir();
    bq_segment_meta_t m = sample_meta(1);
    m.cluster_id[0] = m.node_id[0] = '\0';
    uint64_t ds = 0;
    int fd = bq_segment_create(dir, &m, 0, &ds);
    assert_true(fd >= 0);
    char path[512];
    bq_segment_path(path, sizeof path, dir, 1);
    assert_int_equal(file_size(path), (off_t)ds); /* at least the prefix */
    close(fd);

    char missing[512];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    assert_int_equal(bq_segment_create(missing, &m, 4096, &ds), -ENOENT);
    assert_int_equal(bq_segment_preallocate(-1, 4096), -EBADF);
    remove_dir(dir);
}

/* Writes a segment file whose prefix holds packed bytes hdr[0..len). */
static int raw_segment(const char *dir, const uint8_t *hdr, uint32_t len)
{
    uint8_t buf[BQ_SEGMENT_PREFIX_FIXED + BQ_SEGMENT_HEADER_MAX];
    size_t n = bq_segment_prefix(buf, hdr, len);
    touch(dir, "bqlog.1", buf, n);
    char path[512];
    bq_segment_path(path, sizeof path, dir, 1);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    return fd;
}

static void read_meta_damaged(void **state)
{
    (void)state;
    char *dir = make_dir();
    bq_segment_meta_t m = sample_meta(1), got;
    uint64_t ds;
    char err[256];
    int fd = bq_segment_create(dir, &m, 4096, &ds);
    assert_true(fd >= 0);
    uint8_t b;
    for (off_t at = 0; at < (off_t)ds; at += 3) { /* every third prefix byte */
        assert_int_equal(pread(fd, &b, 1, at), 1);
        b ^= 0x10;
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
        err[0] = '\0';
        assert_int_equal(bq_segment_read_meta(fd, &got, &ds, err, sizeof err), -1);
        assert_true(strncmp(err, "segment", 7) == 0);
        b ^= 0x10;
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
    }
    assert_int_equal(bq_segment_read_meta(fd, &got, &ds, err, sizeof err), 0);
    assert_int_equal(ftruncate(fd, 10), 0);
    assert_int_equal(bq_segment_read_meta(fd, &got, &ds, err, sizeof err), -1);
    assert_string_equal(err, "segment prefix: short file");
    close(fd);

    uint8_t partial[BQ_SEGMENT_PREFIX_FIXED + BQ_SEGMENT_HEADER_MAX];
    memset(partial, 0, sizeof partial);
    assert_int_equal(bq_segment_decode_meta(partial, 30, &got, &ds, err, sizeof err),
                     BQ_SEGMENT_BAD_MAGIC);
    assert_int_equal(bq_segment_decode_meta(partial, 5, &got, &ds, err, sizeof err),
                     BQ_SEGMENT_SHORT);
    remove_dir(dir);
}

static void read_meta_bad_header_message(void **state)
{
    (void)state;
    char *dir = make_dir();
    bq_segment_meta_t got;
    uint64_t ds;
    char err[256];
    /* a checksummed header that is not a SegmentHeader */
    int fd = raw_segment(dir, (const uint8_t *)"\xff\xff\xff", 3);
    assert_int_equal(bq_segment_read_meta(fd, &got, &ds, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a valid SegmentHeader"));
    close(fd);
    remove_dir(dir);

    /* a node id longer than bq_segment_meta_t can hold */
    dir = make_dir();
    char id[101];
    memset(id, 'n', 100);
    id[100] = '\0';
    Bq__Log__SegmentHeader h = BQ__LOG__SEGMENT_HEADER__INIT;
    h.seq = 1;
    h.node_id = id;
    uint8_t packed[256];
    size_t n = bq__log__segment_header__pack(&h, packed);
    fd = raw_segment(dir, packed, (uint32_t)n);
    assert_int_equal(bq_segment_read_meta(fd, &got, &ds, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than 63 bytes"));
    close(fd);
    remove_dir(dir);
}

static void sync_dir(void **state)
{
    (void)state;
    char *dir = make_dir();
    assert_int_equal(bq_segment_sync_dir(dir), 0);
    char missing[512];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    assert_int_equal(bq_segment_sync_dir(missing), -ENOENT);
    remove_dir(dir);
}

/* Files of the data directory are opened only when they are regular files
 * of this user that nobody else may write: a symlink (to a file another
 * user wants us to write), a file of another owner, a group- or
 * world-writable file and a directory are refused; ours with 0600 or 0644
 * is taken. */
static void open_file_trusts_only_our_own(void **state)
{
    (void)state;
    char *dir = make_dir();
    char ok[512], link[512], loose[512], theirs[512], sub[512];
    touch(dir, "bqlog.1", "x", 1);
    snprintf(ok, sizeof ok, "%s/bqlog.1", dir);
    int fd = bq_segment_open_file(ok, O_RDONLY, 0);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(ok, 0644), 0);
    fd = bq_segment_open_file(ok, O_RDWR, 0);
    assert_true(fd >= 0);
    close(fd);
    snprintf(link, sizeof link, "%s/bqlog.2", dir);
    assert_int_equal(symlink(ok, link), 0);
    assert_int_equal(bq_segment_open_file(link, O_RDONLY, 0), -1);
    assert_int_equal(errno, ELOOP);
    /* O_CREAT through a dangling symlink creates nothing either. */
    char dangling[512], target[512];
    snprintf(dangling, sizeof dangling, "%s/election", dir);
    snprintf(target, sizeof target, "%s/elsewhere", dir);
    assert_int_equal(symlink(target, dangling), 0);
    assert_int_equal(bq_segment_open_file(dangling, O_WRONLY | O_CREAT, 0600), -1);
    assert_int_equal(access(target, F_OK), -1);
    touch(dir, "bqlog.3", "x", 1);
    snprintf(loose, sizeof loose, "%s/bqlog.3", dir);
    assert_int_equal(chmod(loose, 0620), 0);
    assert_int_equal(bq_segment_open_file(loose, O_RDONLY, 0), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(chmod(loose, 0602), 0);
    assert_int_equal(bq_segment_open_file(loose, O_RDONLY, 0), -1);
    assert_int_equal(errno, EPERM);
    snprintf(sub, sizeof sub, "%s/bqlog.4", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(bq_segment_open_file(sub, O_RDONLY, 0), -1);
    assert_int_equal(errno, EINVAL);
    if (geteuid() == 0) { /* only root can give a file away */
        touch(dir, "bqlog.5", "x", 1);
        snprintf(theirs, sizeof theirs, "%s/bqlog.5", dir);
        assert_int_equal(chown(theirs, 65534, 65534), 0);
        assert_int_equal(bq_segment_open_file(theirs, O_RDONLY, 0), -1);
        assert_int_equal(errno, EPERM);
    }
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(open_file_trusts_only_our_own),
        cmocka_unit_test(lock_held_by_other_process),
        cmocka_unit_test(lock_bad_directory),
        cmocka_unit_test(path_names),
        cmocka_unit_test(list_segments_and_beanstalkd_files),
        cmocka_unit_test(create_and_read_meta),
        cmocka_unit_test(create_small_and_failing),
        cmocka_unit_test(read_meta_damaged),
        cmocka_unit_test(read_meta_bad_header_message),
        cmocka_unit_test(sync_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
