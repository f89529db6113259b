/* Integration tests of the binlog (-b) end to end, with real processes and
 * a binlog directory kept across restarts: beanstalkd's binlog tests
 * (testserv.c, reference section 4.2) adapted to our segment format,
 * restarts after SIGTERM and kill -9, a power loss simulated from below
 * the server (tests/support/crashfs: what its system calls made durable), the
 * directory lock, beanstalkd files, a full disk (BQ_FAULT_FALLOCATE_FAIL_AFTER),
 * the -f timer and bounded growth under churn. Our binary only. */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"

#define EXIT_DEADLINE_MS 10000
#define CRASH_CONNS 4
#define CRASH_PUTS 400

typedef struct bl {
    char dir[64];     /* the binlog directory, kept across restarts */
    char log[96];     /* output of processes run to completion */
    char crashfs[96]; /* crashfs's journal, outside dir */
    bqt_server_t srv;
    int fd;
} bl_t;

static int bl_setup(void **state)
{
    bl_t *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    if (bqt_mkdtemp(t->dir, sizeof t->dir, "bq-binlog") != 0) {
        free(t);
        return -1;
    }
    snprintf(t->log, sizeof t->log, "%s.out", t->dir);
    snprintf(t->crashfs, sizeof t->crashfs, "%s.crashfs", t->dir);
    t->fd = -1;
    *state = t;
    return 0;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int bl_teardown(void **state)
{
    bl_t *t = *state;
    if (t->fd >= 0)
        close(t->fd);
    bqt_server_stop(&t->srv);
    unsetenv("BQ_FAULT_FALLOCATE_FAIL_AFTER");
    if (!getenv("BQT_KEEP_DIRS")) {
        remove_dir(t->dir);
        remove_dir(t->crashfs);
        unlink(t->log);
    }
    free(t);
    return 0;
}

#define BL_TEST(f) cmocka_unit_test_setup_teardown(f, bl_setup, bl_teardown)

/* Starts our server on t->dir with extra args (NULL-terminated, may be
 * NULL) and connects t->fd. */
static void bl_start(bl_t *t, const char *const *extra)
{
    const char *args[16] = {"-b", t->dir};
    size_t n = 2;
    for (; extra && *extra && n < 15; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    assert_int_equal(bqt_server_start(&t->srv, bqt_our_binary(), args), 0);
    t->fd = bqt_client(&t->srv);
}

/* SIGTERM: a clean shutdown. */
static void bl_stop(bl_t *t)
{
    close(t->fd);
    t->fd = -1;
    bqt_server_stop(&t->srv);
}

/* kill -9. Replies already sent stay readable on open connections. */
static void bl_kill(bl_t *t)
{
    bqt_server_signal(&t->srv, SIGKILL);
    assert_true(bqt_server_wait(&t->srv, EXIT_DEADLINE_MS) != -1);
    bqt_server_stop(&t->srv); /* removes its temporary directory */
}

static unsigned long long put(int fd, const char *args, const char *body)
{
    char buf[256];
    snprintf(buf, sizeof buf, "put %s %zu\r\n%s\r\n", args, strlen(body), body);
    bqt_sends(fd, buf);
    char *line = bqt_expect_prefix(fd, "INSERTED ");
    unsigned long long id = strtoull(line + 9, NULL, 10);
    free(line);
    return id;
}

static void cmd(int fd, const char *command, const char *reply)
{
    bqt_sends(fd, command);
    bqt_expect(fd, reply);
}

static long long stat_of(int fd, const char *key)
{
    return bqt_stat_int(fd, "stats\r\n", key);
}

static void expect_job_stat(int fd, unsigned long long id, const char *key, const char *want)
{
    char c[64];
    snprintf(c, sizeof c, "stats-job %llu\r\n", id);
    char *v = bqt_stat(fd, c, key);
    assert_non_null(v);
    assert_string_equal(v, want);
    free(v);
}

/* The segment files of dir: how many, and their bytes together. */
static int segments(const char *dir, long long *bytes)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    *bytes = 0;
    while (d && (de = readdir(d))) {
        char path[512];
        struct stat st;
        if (strncmp(de->d_name, "bqlog.", 6) != 0 || strchr(de->d_name + 6, '.'))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st) == 0) {
            n++;
            *bytes += st.st_size;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static long long file_size(const char *dir, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static char *read_text(const char *path)
{
    static char buf[1 << 20];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Runs our binary with args until it exits; asserts the exit code and that
 * its output contains text. */
static void expect_exit(bl_t *t, const char *const *args, int code, const char *text)
{
    int rc = bqt_run_to_exit(bqt_our_binary(), args, t->log, EXIT_DEADLINE_MS);
    char *out = read_text(t->log);
    if (rc != code || !strstr(out, text))
        fprintf(stderr, "exit code %d, output:\n%s\n", rc, out);
    assert_int_equal(rc, code);
    assert_non_null(strstr(out, text));
}

/* ---- beanstalkd's binlog tests ---- */

static void binlog_empty_exit(void **state)
{
    bl_t *t = *state;
    bl_start(t, NULL);
    bl_stop(t);
    bl_start(t, NULL);
    cmd(t->fd, "put 0 0 100 1\r\nx\r\n", "INSERTED 1\r\n");
}

static void binlog_bury(void **state)
{
    bl_t *t = *state;
    bl_start(t, NULL);
    assert_int_equal(put(t->fd, "0 0 100", "x"), 1);
    cmd(t->fd, "reserve\r\n", "RESERVED 1 1\r\nx\r\n");
    cmd(t->fd, "bury 1 0\r\n", "BURIED\r\n");
    bl_stop(t);
    bl_start(t, NULL);
    expect_job_stat(t->fd, 1, "state", "buried");
    expect_job_stat(t->fd, 1, "buries", "1"); /* replay adds none (upstream 668) */
}

static void binlog_basic(void **state)
{
    bl_t *t = *state;
    bl_start(t, NULL);
    assert_int_equal(put(t->fd, "0 0 100", "x"), 1);
    bl_stop(t);
    bl_start(t, NULL);
    cmd(t->fd, "delete 1\r\n", "DELETED\r\n");
}

/* Ours: a segment is closed at the end of the loop turn in which it reached
 * -s, so it ends just past -s (whole frames, never split). */
static void binlog_size_limit(void **state)
{
    bl_t *t = *state;
    char body[101];
    memset(body, 'a', 100);
    body[100] = '\0';
    bl_start(t, (const char *[]){"-s", "4096", NULL});
    for (int i = 0; i < 200 && stat_of(t->fd, "binlog-current-index") < 2; i++)
        put(t->fd, "0 0 100", body);
    assert_int_equal(stat_of(t->fd, "binlog-current-index"), 2);
    long long one = file_size(t->dir, "bqlog.1");
    assert_true(one >= 4096 && one < 4096 + 256);
    assert_true(file_size(t->dir, "bqlog.2") >= 4096); /* preallocated */
}

static void binlog_allocation(void **state)
{
    bl_t *t = *state;
    char c[64];
    bl_start(t, (const char *[]){"-s", "601", NULL});
    for (int i = 1; i <= 96; i++)
        assert_int_equal(put(t->fd, "0 0 100", "abcdefghijklmnopqrstuvwxyz"), (unsigned)i);
    for (int i = 1; i <= 96; i++) {
        snprintf(c, sizeof c, "delete %d\r\n", i);
        cmd(t->fd, c, "DELETED\r\n");
    }
    bl_stop(t);
    bl_start(t, NULL);
    assert_int_equal(stat_of(t->fd, "current-jobs-ready"), 0);
    cmd(t->fd, "peek 96\r\n", "NOT_FOUND\r\n");
}

static void binlog_read(void **state)
{
    bl_t *t = *state;
    bl_start(t, NULL);
    cmd(t->fd, "use test\r\n", "USING test\r\n");
    assert_int_equal(put(t->fd, "0 0 100", "test1"), 1);
    assert_int_equal(put(t->fd, "0 0 100", "test2"), 2);
    cmd(t->fd, "watch test\r\n", "WATCHING 2\r\n");
    cmd(t->fd, "reserve\r\n", "RESERVED 1 5\r\ntest1\r\n");
    cmd(t->fd, "release 1 1 1\r\n", "RELEASED\r\n");
    cmd(t->fd, "delete 2\r\n", "DELETED\r\n");
    bl_stop(t);
    bl_start(t, NULL);
    cmd(t->fd, "watch test\r\n", "WATCHING 2\r\n");
    cmd(t->fd, "reserve-with-timeout 5\r\n", "RESERVED 1 5\r\ntest1\r\n");
    cmd(t->fd, "delete 2\r\n", "NOT_FOUND\r\n");
}

/* ---- restarts ---- */

static void restart_after_sigterm_keeps_every_state(void **state)
{
    bl_t *t = *state;
    bl_start(t, (const char *[]){"-f", "0", NULL});
    cmd(t->fd, "use a\r\n", "USING a\r\n");
    assert_int_equal(put(t->fd, "5 0 100", "ready"), 1);
    assert_int_equal(put(t->fd, "6 500 100", "delayed"), 2);
    cmd(t->fd, "use b\r\n", "USING b\r\n");
    assert_int_equal(put(t->fd, "7 0 100", "buried"), 3);
    assert_int_equal(put(t->fd, "8 0 100", "reserved"), 4);
    assert_int_equal(put(t->fd, "9 0 100", "deleted"), 5);
    cmd(t->fd, "watch b\r\n", "WATCHING 2\r\n");
    cmd(t->fd, "reserve-job 3\r\n", "RESERVED 3 6\r\nburied\r\n");
    cmd(t->fd, "bury 3 70\r\n", "BURIED\r\n");
    cmd(t->fd, "reserve-job 4\r\n", "RESERVED 4 8\r\nreserved\r\n");
    cmd(t->fd, "release 4 80 0\r\n", "RELEASED\r\n"); /* delay 0: beanstalkd loses pri */
    cmd(t->fd, "reserve-job 4\r\n", "RESERVED 4 8\r\nreserved\r\n");
    cmd(t->fd, "delete 5\r\n", "DELETED\r\n");
    cmd(t->fd, "pause-tube a 1000\r\n", "PAUSED\r\n");
    bl_stop(t);
    bl_start(t, NULL);
    expect_job_stat(t->fd, 1, "state", "ready");
    expect_job_stat(t->fd, 1, "pri", "5");
    expect_job_stat(t->fd, 1, "tube", "a");
    expect_job_stat(t->fd, 2, "state", "delayed");
    expect_job_stat(t->fd, 2, "delay", "500");
    expect_job_stat(t->fd, 3, "state", "buried");
    expect_job_stat(t->fd, 3, "pri", "70");
    expect_job_stat(t->fd, 3, "tube", "b");
    expect_job_stat(t->fd, 4, "state", "ready"); /* reservations are not durable */
    expect_job_stat(t->fd, 4, "pri", "80");
    expect_job_stat(t->fd, 4, "releases", "1");
    expect_job_stat(t->fd, 4, "reserves", "1");
    cmd(t->fd, "peek 5\r\n", "NOT_FOUND\r\n");
    char *v = bqt_stat(t->fd, "stats-tube a\r\n", "pause");
    assert_string_equal(v, "1000");
    free(v);
    assert_int_equal(put(t->fd, "0 0 100", "new") > 5, 1);
}

/* Pipelines CRASH_PUTS puts on each of CRASH_CONNS connections, kills the
 * server with SIGKILL while it answers them, and returns through acked[c][k]
 * the id of each put whose INSERTED arrived (0 for the others). */
static void puts_then_crash(bl_t *t, unsigned long long acked[CRASH_CONNS][CRASH_PUTS])
{
    int fds[CRASH_CONNS];
    char buf[128];
    memset(acked, 0, sizeof(unsigned long long) * CRASH_CONNS * CRASH_PUTS);
    /* Its id reservation is fsynced in every mode: later puts are not. */
    put(t->fd, "0 0 100", "warm-up");
    for (int c = 0; c < CRASH_CONNS; c++) {
        fds[c] = bqt_client(&t->srv);
        for (int k = 0; k < CRASH_PUTS; k++) {
            snprintf(buf, sizeof buf, "body-%d-%d", c, k);
            char line[sizeof buf + 64];
            snprintf(line, sizeof line, "put 0 0 100 %zu\r\n%s\r\n", strlen(buf), buf);
            bqt_sends(fds[c], line);
        }
    }
    /* Kill once the server is well into the work. */
    for (int k = 0; k < CRASH_PUTS / 4; k++) {
        char *line = bqt_read_line(fds[0], BQT_DEADLINE_MS);
        assert_non_null(line);
        acked[0][k] = strtoull(line + 9, NULL, 10);
        free(line);
    }
    bl_kill(t);
    for (int c = 0; c < CRASH_CONNS; c++) {
        for (int k = c == 0 ? CRASH_PUTS / 4 : 0; k < CRASH_PUTS; k++) {
            char *line = bqt_read_line(fds[c], BQT_DEADLINE_MS);
            if (!line)
                break;
            assert_memory_equal(line, "INSERTED ", 9);
            acked[c][k] = strtoull(line + 9, NULL, 10);
            free(line);
        }
        close(fds[c]);
    }
}

/* Every acked put is back with its body. */
static void expect_acked(bl_t *t, unsigned long long acked[CRASH_CONNS][CRASH_PUTS])
{
    char c[64], want[160], body[64];
    int n = 0;
    for (int i = 0; i < CRASH_CONNS; i++) {
        for (int k = 0; k < CRASH_PUTS && acked[i][k]; k++, n++) {
            snprintf(c, sizeof c, "peek %llu\r\n", acked[i][k]);
            snprintf(body, sizeof body, "body-%d-%d", i, k);
            snprintf(want, sizeof want, "FOUND %llu %zu\r\n%s\r\n", acked[i][k], strlen(body),
                     body);
            cmd(t->fd, c, want);
        }
    }
    assert_true(n >= CRASH_PUTS / 4);
}

static void acked_puts_survive_kill9_under_f0(void **state)
{
    bl_t *t = *state;
    static unsigned long long acked[CRASH_CONNS][CRASH_PUTS];
    bl_start(t, (const char *[]){"-f", "0", "-s", "65536", NULL});
    puts_then_crash(t, acked);
    close(t->fd);
    bl_start(t, NULL);
    expect_acked(t, acked);
}

/* Starts the server as bl_start does, under crashfs: its journal (in
 * t->crashfs) records what the server's system calls made durable. */
static void bl_start_crashfs(bl_t *t, const char *const *extra)
{
    setenv("LD_PRELOAD", BQ_CRASHFS_PRELOAD, 1);
    setenv("CRASHFS_ROOT", t->dir, 1);
    setenv("CRASHFS_STATE", t->crashfs, 1);
    bl_start(t, extra);
    unsetenv("LD_PRELOAD");
    unsetenv("CRASHFS_ROOT");
    unsetenv("CRASHFS_STATE");
}

/* Under -f 0 no reply shows a job before its put is durable, whichever
 * connection asks: a reserve from another connection while the put's fsync
 * runs (300 ms on crashfs's slow disk) waits for it, as the put's INSERTED
 * does. Otherwise a power loss could lose a job whose id a worker holds,
 * and the next start, going on after the highest id in the log, would hand
 * that id out again. */
static void f0_reply_shows_no_job_before_it_is_durable(void **state)
{
    bl_t *t = *state;
    setenv("CRASHFS_SYNC_DELAY_US", "300000", 1);
    bl_start_crashfs(t, (const char *[]){"-f", "0", NULL});
    unsetenv("CRASHFS_SYNC_DELAY_US");
    int b = bqt_client(&t->srv);
    bqt_sends(t->fd, "put 0 0 100 1\r\na\r\n");
    bqt_expect_silence(t->fd, 100); /* the put's fsync is running */
    bqt_sends(b, "reserve\r\n");
    bqt_expect_silence(b, 50);
    bqt_expect(t->fd, "INSERTED 1\r\n");
    bqt_expect(b, "RESERVED 1 1\r\na\r\n");
    close(b);
}

/* Runs crashfs-powerloss on t->dir (dry: only reports, else rewrites the
 * directory to what a power loss leaves, with a torn write chosen by a
 * fixed seed): the dropped_bytes= of its report, or -1. */
static long long powerloss(bl_t *t, bool dry)
{
    const char *args[] = {"--seed",
                          "7",
                          "--tear",
                          "random",
                          dry ? "--dry-run" : t->dir,
                          dry ? t->dir : t->crashfs,
                          dry ? t->crashfs : NULL,
                          NULL};
    if (bqt_run_to_exit(BQ_CRASHFS_TOOL, args, t->log, EXIT_DEADLINE_MS) != 0)
        return -1;
    const char *out = read_text(t->log), *d = out ? strstr(out, "dropped_bytes=") : NULL;
    return d ? atoll(d + strlen("dropped_bytes=")) : -1;
}

static void power_loss_keeps_acked_puts_under_f0(void **state)
{
    bl_t *t = *state;
    static unsigned long long acked[CRASH_CONNS][CRASH_PUTS];
    bl_start_crashfs(t, (const char *[]){"-f", "0", NULL});
    puts_then_crash(t, acked);
    close(t->fd);
    assert_true(powerloss(t, false) >= 0);
    bl_start(t, NULL);
    expect_acked(t, acked);
}

/* ---- flags, stats, start-up refusals ---- */

static void stats_report_the_binlog(void **state)
{
    bl_t *t = *state;
    bl_start(t, (const char *[]){"-s", "12345", NULL});
    assert_int_equal(stat_of(t->fd, "binlog-max-size"), 12345);
    assert_int_equal(stat_of(t->fd, "binlog-oldest-index"), 1);
    assert_int_equal(stat_of(t->fd, "binlog-current-index"), 1);
    assert_int_equal(stat_of(t->fd, "binlog-records-migrated"), 0);
    /* As beanstalkd counts: the segment's opening records and the id
     * reservation are the log's own bookkeeping. */
    assert_int_equal(stat_of(t->fd, "binlog-records-written"), 0);
    put(t->fd, "0 0 100", "x");
    assert_int_equal(stat_of(t->fd, "binlog-records-written"), 1);
    put(t->fd, "0 0 100", "y");
    cmd(t->fd, "delete 1\r\n", "DELETED\r\n");
    assert_int_equal(stat_of(t->fd, "binlog-records-written"), 3);
    bl_stop(t);
    bl_start(t, NULL);
    assert_int_equal(stat_of(t->fd, "binlog-records-written"), 0);
    assert_int_equal(stat_of(t->fd, "binlog-oldest-index"), 1); /* job 2 is in segment 1 */
    assert_int_equal(stat_of(t->fd, "binlog-current-index"), 2);
    assert_int_equal(stat_of(t->fd, "binlog-max-size"), 10485760);
    /* Its last job gone, the old segment no longer counts, as beanstalkd's
     * file goes at once (ours at the end of the loop turn): even for a
     * stats pipelined behind the delete. */
    bqt_sends(t->fd, "delete 2\r\nstats\r\n");
    bqt_expect(t->fd, "DELETED\r\n");
    assert_int_equal(bqt_stat_int(t->fd, "", "binlog-oldest-index"), 2);
    assert_int_equal(stat_of(t->fd, "binlog-records-written"), 1);
    bl_stop(t);
    bl_start(t, NULL); /* an unused segment does not count from the start */
    assert_int_equal(stat_of(t->fd, "binlog-oldest-index"), 3);
    assert_int_equal(stat_of(t->fd, "binlog-current-index"), 3);
}

/* ---- job ids after a restart (docs/binlog.md) ---- */

/* After a clean stop the next id is one past the highest logged, as in
 * beanstalkd: deleted and never-shown ids included. */
static void ids_continue_after_sigterm(void **state)
{
    bl_t *t = *state;
    bl_start(t, NULL);
    assert_int_equal(put(t->fd, "0 0 100", "a"), 1);
    assert_int_equal(put(t->fd, "0 0 100", "b"), 2);
    cmd(t->fd, "delete 2\r\n", "DELETED\r\n");
    cmd(t->fd, "put 0 0 100 1\r\nxy\r\n", "EXPECTED_CRLF\r\n"); /* id 3, never shown */
    bl_stop(t);
    bl_start(t, (const char *[]){"-F", NULL});
    assert_int_equal(put(t->fd, "0 0 100", "c"), 3);
    bl_stop(t);
    bl_start(t, NULL);
    assert_int_equal(put(t->fd, "0 0 100", "d"), 4);
}

/* kill -9: under -f 0 nothing shown can be lost, so ids go on; under
 * -f MS and -F a power loss could have lost a shown id, so they jump past
 * the reserved block, and the jump stays after a later clean stop. */
static void ids_after_kill_depend_on_f(void **state)
{
    bl_t *t = *state;
    bl_start(t, (const char *[]){"-f", "0", NULL});
    assert_int_equal(put(t->fd, "0 0 100", "a"), 1);
    assert_int_equal(put(t->fd, "0 0 100", "b"), 2);
    bl_kill(t);
    close(t->fd);
    bl_start(t, NULL); /* -f 50 now: the log's last writer decides */
    assert_int_equal(put(t->fd, "0 0 100", "c"), 3);
    bl_kill(t);
    close(t->fd);
    bl_start(t, (const char *[]){"-F", NULL});
    assert_int_equal(put(t->fd, "0 0 100", "d"), 100003);
    bl_kill(t);
    close(t->fd);
    bl_start(t, (const char *[]){"-f", "0", NULL});
    assert_int_equal(put(t->fd, "0 0 100", "e"), 200003);
    bl_stop(t);
    bl_start(t, NULL);
    assert_int_equal(put(t->fd, "0 0 100", "f"), 200004);
}

static void stats_without_binlog_are_zero(void **state)
{
    bl_t *t = *state;
    assert_int_equal(bqt_server_start(&t->srv, bqt_our_binary(), NULL), 0);
    t->fd = bqt_client(&t->srv);
    put(t->fd, "0 0 100", "x");
    assert_int_equal(stat_of(t->fd, "binlog-oldest-index"), 0);
    assert_int_equal(stat_of(t->fd, "binlog-current-index"), 0);
    assert_int_equal(stat_of(t->fd, "binlog-records-written"), 0);
    assert_int_equal(stat_of(t->fd, "binlog-records-migrated"), 0);
    assert_int_equal(stat_of(t->fd, "binlog-max-size"), 10485760);
}

static void locked_dir_exits_10(void **state)
{
    bl_t *t = *state;
    bl_start(t, NULL);
    expect_exit(t, (const char *[]){"-l", "127.0.0.1", "-p", "0", "-b", t->dir, NULL}, 10,
                "locked by another process");
    /* The first server is unharmed. */
    cmd(t->fd, "put 0 0 100 1\r\nx\r\n", "INSERTED 1\r\n");
}

static void beanstalkd_files_are_refused(void **state)
{
    bl_t *t = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/binlog.1", t->dir);
    close(open(path, O_WRONLY | O_CREAT, 0600));
    expect_exit(t, (const char *[]){"-l", "127.0.0.1", "-p", "0", "-b", t->dir, NULL}, 10,
                "--import-beanstalkd SRC_DIR");
    assert_int_equal(file_size(t->dir, "bqlog.1"), -1); /* nothing written */
}

/* beanstalkd's binlog_disk_full and binlog_disk_full_delete, through the
 * preallocation fault seam: puts fail cleanly, every delete works, and the
 * log is sound for the next start. */
static void disk_full_refuses_puts_keeps_deletes(void **state)
{
    bl_t *t = *state;
    char body[101], c[64];
    unsigned long long last = 0;
    memset(body, 'z', 100);
    body[100] = '\0';
    setenv("BQ_FAULT_FALLOCATE_FAIL_AFTER", "1", 1); /* the first segment, then nothing */
    bl_start(t, (const char *[]){"-s", "4096", NULL});
    unsetenv("BQ_FAULT_FALLOCATE_FAIL_AFTER");
    for (int i = 0; i < 500; i++) {
        snprintf(c, sizeof c, "put 0 0 100 %zu\r\n", strlen(body));
        bqt_sends(t->fd, c);
        bqt_sends(t->fd, body);
        bqt_sends(t->fd, "\r\n");
        char *line = bqt_read_line(t->fd, BQT_DEADLINE_MS);
        assert_non_null(line);
        bool oom = strcmp(line, "OUT_OF_MEMORY\r\n") == 0;
        if (!oom)
            last = strtoull(line + 9, NULL, 10);
        free(line);
        if (oom)
            break;
    }
    assert_true(last >= 1);
    char again[160];
    snprintf(again, sizeof again, "put 0 0 100 %zu\r\n%s\r\n", strlen(body), body);
    cmd(t->fd, again, "OUT_OF_MEMORY\r\n");
    for (unsigned long long id = 1; id <= last; id++) {
        snprintf(c, sizeof c, "delete %llu\r\n", id);
        cmd(t->fd, c, "DELETED\r\n");
    }
    bl_stop(t);
    bl_start(t, NULL);
    assert_int_equal(stat_of(t->fd, "current-jobs-ready"), 0);
    snprintf(c, sizeof c, "peek %llu\r\n", last);
    cmd(t->fd, c, "NOT_FOUND\r\n");
    assert_true(put(t->fd, "0 0 100", "x") > last);
}

/* True once crashfs sees nothing written that a power loss would drop. */
static bool all_durable(void *arg)
{
    return powerloss(arg, true) == 0;
}

/* -f MS is a true bound: the timer syncs a change with no later traffic
 * (as crashfs sees the system calls, not as the server tells). */
static void fsync_timer_needs_no_more_traffic(void **state)
{
    bl_t *t = *state;
    bl_start_crashfs(t, (const char *[]){"-f", "200", NULL});
    put(t->fd, "0 0 100", "x");
    assert_true(bqt_wait_until(all_durable, t, 5000));
    put(t->fd, "0 0 100", "y");
    assert_true(bqt_wait_until(all_durable, t, 5000));
    bl_kill(t);
    close(t->fd);
    assert_int_equal(powerloss(t, false), 0);
    bl_start(t, NULL);
    cmd(t->fd, "peek 2\r\n", "FOUND 2 1\r\ny\r\n");
}

typedef struct compacted {
    bl_t *t;
    long long bytes;
} compacted_t;

static bool is_compacted(void *arg)
{
    compacted_t *w = arg;
    long long bytes;
    int n = segments(w->t->dir, &bytes);
    w->bytes = bytes;
    return n <= 3 && stat_of(w->t->fd, "binlog-oldest-index") > 1;
}

/* Upstream issue 622: release-with-delay churn of one job, with an old
 * buried job pinning the first segment, must not grow the log. */
static void log_stays_bounded_under_churn(void **state)
{
    bl_t *t = *state;
    char c[128];
    bl_start(t, (const char *[]){"-s", "4096", NULL});
    assert_int_equal(put(t->fd, "0 0 100", "pinned"), 1);
    cmd(t->fd, "reserve\r\n", "RESERVED 1 6\r\npinned\r\n");
    cmd(t->fd, "bury 1 0\r\n", "BURIED\r\n");
    assert_int_equal(put(t->fd, "0 0 100", "churn"), 2);
    long long peak = 0, bytes;
    for (int i = 0; i < 1500; i++) {
        snprintf(c, sizeof c, "reserve-job 2\r\nrelease 2 0 100\r\n");
        cmd(t->fd, c, "RESERVED 2 5\r\nchurn\r\nRELEASED\r\n");
        segments(t->dir, &bytes);
        peak = bytes > peak ? bytes : peak;
    }
    compacted_t w = {t, 0};
    assert_true(bqt_wait_until(is_compacted, &w, 5000));
    /* 1500 releases wrote ~100 KiB of records; about 9 KiB stay. */
    assert_true(peak < 32 * 1024);
    assert_true(stat_of(t->fd, "binlog-records-migrated") >= 1);
    bl_stop(t);
    bl_start(t, NULL);
    expect_job_stat(t->fd, 1, "state", "buried");
    expect_job_stat(t->fd, 2, "state", "delayed");
    expect_job_stat(t->fd, 2, "releases", "1500");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        BL_TEST(binlog_empty_exit),
        BL_TEST(binlog_bury),
        BL_TEST(binlog_basic),
        BL_TEST(binlog_size_limit),
        BL_TEST(binlog_allocation),
        BL_TEST(binlog_read),
        BL_TEST(restart_after_sigterm_keeps_every_state),
        BL_TEST(acked_puts_survive_kill9_under_f0),
        BL_TEST(power_loss_keeps_acked_puts_under_f0),
        BL_TEST(stats_report_the_binlog),
        BL_TEST(stats_without_binlog_are_zero),
        BL_TEST(ids_continue_after_sigterm),
        BL_TEST(ids_after_kill_depend_on_f),
        BL_TEST(f0_reply_shows_no_job_before_it_is_durable),
        BL_TEST(locked_dir_exits_10),
        BL_TEST(beanstalkd_files_are_refused),
        BL_TEST(disk_full_refuses_puts_keeps_deletes),
        BL_TEST(fsync_timer_needs_no_more_traffic),
        BL_TEST(log_stays_bounded_under_churn),
    };
    if (getenv("BQT_FILTER")) /* e.g. BQT_FILTER='power*' */
        cmocka_set_test_filter(getenv("BQT_FILTER"));
    return cmocka_run_group_tests_name("binlog_basic", tests, NULL, NULL);
}
