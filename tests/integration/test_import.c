/* Integration tests of --import-beanstalkd (node/binlog/import.c): real binlog
 * directories written by Debian's beanstalkd 1.12 (tests/fixtures/
 * beanstalkd-v7, made by its make-fixtures script) are imported by our
 * binary into a fresh -b directory; then our server starts on it and every
 * job is checked against the fixture's `expected` file, which records what
 * beanstalkd itself restored from the same files: stats-job (tube, state,
 * pri, delay, ttr, counters, age, time-left of delayed jobs), the body
 * through peek, deleted jobs absent, and the next put's id following the
 * largest id beanstalkd handed out.
 *
 * Also: the source is never modified; damage (a bad namelen, a truncated
 * record) makes the import fail with exit 1 and a message naming the file
 * and the offset, leaving the destination untouched, unless
 * --import-accept-prefix takes the records before it; a source that a
 * running beanstalkd holds locked is refused; an id present in both refuses
 * the import; a merge into a directory with other jobs keeps
 * both; usage errors exit 5 and an unusable destination 10.
 *
 * The fixtures are found beside this source file (or in $BQ_FIXTURES). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <setjmp.h>
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

#define EXIT_DEADLINE_MS 30000
#define MAX_JOBS 64
/* Tolerance for times that stats-job rounds to seconds (and the oracle
 * recorded to about a second). */
#define SLACK_S 3

typedef struct job {
    uint64_t id;
    char tube[201], state[16];
    long long pri, delay, ttr, reserves, timeouts, releases, buries, kicks;
    long long created, deadline; /* wall-clock seconds; deadline 0 unless delayed */
    unsigned char body[256];
    size_t body_len;
} job_t;

typedef struct expected {
    job_t jobs[MAX_JOBS];
    size_t n;
    uint64_t next_id;
} expected_t;

/* One test's private directory: src/ (a copy of a fixture), dst/ (-b). */
typedef struct ctx {
    char dir[256], src[300], dst[300], log[300];
    bqt_server_t srv;
} ctx_t;

static const char *fixtures(void)
{
    static char path[512];
    const char *env = getenv("BQ_FIXTURES");
    if (env && *env)
        return env;
    char file[512];
    snprintf(file, sizeof file, "%s", __FILE__);
    snprintf(path, sizeof path, "%s/../fixtures/beanstalkd-v7", dirname(file));
    return path;
}

static int run(const char *cmd)
{
    return system(cmd);
}

static int setup(void **state)
{
    ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    if (bqt_mkdtemp(c->dir, sizeof c->dir, "bqimport") != 0) {
        free(c);
        return -1;
    }
    snprintf(c->src, sizeof c->src, "%s/src", c->dir);
    snprintf(c->dst, sizeof c->dst, "%s/dst", c->dir);
    snprintf(c->log, sizeof c->log, "%s/import.log", c->dir);
    if (mkdir(c->dst, 0700) != 0)
        return -1;
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctx_t *c = *state;
    char cmd[600];
    bqt_server_stop(&c->srv);
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", c->dir, c->dir);
    if (run(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", c->dir);
    free(c);
    return 0;
}

/* Copies fixture `name` to c->src. */
static void copy_fixture(ctx_t *c, const char *name)
{
    char cmd[1200];
    int n = snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s/%s' '%s' && rm -f '%s/expected'",
                     c->src, fixtures(), name, c->src, c->src);
    assert_true(n > 0 && (size_t)n < sizeof cmd); /* BQ_FIXTURES may be long */
    assert_int_equal(run(cmd), 0);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    static char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* Runs our binary with args (NULL-terminated) to completion, output to
 * c->log; returns its exit code. */
static int run_binary(ctx_t *c, const char *const *args)
{
    return bqt_run_to_exit(bqt_our_binary(), args, c->log, EXIT_DEADLINE_MS);
}

/* Imports c->src into c->dst (plus extra, may be NULL); asserts the exit
 * code and, when `text` is given, that the output contains it. */
static void import(ctx_t *c, const char *extra, int code, const char *text)
{
    const char *args[] = {"--import-beanstalkd", c->src, "-b", c->dst, extra, NULL};
    int rc = run_binary(c, args);
    const char *out = slurp(c->log, NULL);
    if (rc != code || (text && !strstr(out, text)))
        fprintf(stderr, "import exited %d, output:\n%s\n", rc, out);
    assert_int_equal(rc, code);
    if (text)
        assert_non_null(strstr(out, text));
}

static void start_server(ctx_t *c)
{
    const char *args[] = {"-b", c->dst, NULL};
    assert_int_equal(bqt_server_start(&c->srv, bqt_our_binary(), args), 0);
}

/* ---- the expected file ---- */

static int hexval(char ch)
{
    return ch <= '9' ? ch - '0' : ch - 'a' + 10;
}

static void parse_field(job_t *j, const char *key, const char *val)
{
    struct {
        const char *name;
        long long *p;
    } nums[] = {{"pri", &j->pri},           {"delay", &j->delay},       {"ttr", &j->ttr},
                {"reserves", &j->reserves}, {"timeouts", &j->timeouts}, {"releases", &j->releases},
                {"buries", &j->buries},     {"kicks", &j->kicks},       {"created", &j->created},
                {"deadline", &j->deadline}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (strcmp(key, nums[i].name) == 0)
            *nums[i].p = atoll(val);
    if (strcmp(key, "id") == 0)
        j->id = strtoull(val, NULL, 10);
    else if (strcmp(key, "tube") == 0)
        snprintf(j->tube, sizeof j->tube, "%s", val);
    else if (strcmp(key, "state") == 0)
        snprintf(j->state, sizeof j->state, "%s", val);
    else if (strcmp(key, "body") == 0)
        for (j->body_len = 0; val[2 * j->body_len] && j->body_len < sizeof j->body; j->body_len++)
            j->body[j->body_len] = (unsigned char)(hexval(val[2 * j->body_len]) * 16 +
                                                   hexval(val[2 * j->body_len + 1]));
}

static void load_expected(const char *name, expected_t *ex)
{
    char path[700], line[2048];
    snprintf(path, sizeof path, "%s/%s/expected", fixtures(), name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    memset(ex, 0, sizeof *ex);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "next-id ", 8) == 0) {
            ex->next_id = strtoull(line + 8, NULL, 10);
            continue;
        }
        assert_int_equal(strncmp(line, "job ", 4), 0);
        assert_true(ex->n < MAX_JOBS);
        job_t *j = &ex->jobs[ex->n++];
        for (char *tok = strtok(line + 4, " "); tok; tok = strtok(NULL, " ")) {
            char *eq = strchr(tok, '=');
            assert_non_null(eq);
            *eq = '\0';
            parse_field(j, tok, eq + 1);
        }
    }
    fclose(f);
    assert_true(ex->n > 0 && ex->next_id > 0);
}

/* ---- checks against the server ---- */

/* stats-job id into a malloc'd YAML body, or NULL for NOT_FOUND. */
static char *stats_job(int fd, uint64_t id)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "stats-job %" PRIu64 "\r\n", id);
    bqt_sends(fd, cmd);
    char *line = bqt_read_line(fd, BQT_DEADLINE_MS);
    assert_non_null(line);
    if (strcmp(line, "NOT_FOUND\r\n") == 0) {
        free(line);
        return NULL;
    }
    size_t n = 0;
    assert_int_equal(sscanf(line, "OK %zu", &n), 1);
    free(line);
    char *yaml = calloc(1, n + 3);
    assert_non_null(yaml);
    assert_int_equal(bqt_read_n(fd, yaml, n + 2, BQT_DEADLINE_MS), n + 2);
    return yaml;
}

/* The value of key in a stats-job body, without quotes. */
static const char *yaml_get(const char *yaml, const char *key)
{
    static char val[256];
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    const char *p = strstr(yaml, pat);
    if (!p)
        fail_msg("no %s in stats-job reply", key);
    p += strlen(pat);
    if (*p == '"')
        p++;
    size_t n = strcspn(p, "\"\n");
    snprintf(val, sizeof val, "%.*s", (int)n, p);
    return val;
}

static long long yaml_int(const char *yaml, const char *key)
{
    return atoll(yaml_get(yaml, key));
}

static void expect_near(long long got, long long want, const char *what, uint64_t id)
{
    if (got < want - SLACK_S || got > want + SLACK_S)
        fail_msg("job %" PRIu64 ": %s is %lld, expected about %lld", id, what, got, want);
}

static void check_stats(int fd, const job_t *j)
{
    char *yaml = stats_job(fd, j->id);
    if (!yaml)
        fail_msg("job %" PRIu64 " is missing", j->id);
    long long now = (long long)time(NULL);
    assert_string_equal(yaml_get(yaml, "tube"), j->tube);
    assert_int_equal(yaml_int(yaml, "pri"), j->pri);
    assert_int_equal(yaml_int(yaml, "delay"), j->delay);
    assert_int_equal(yaml_int(yaml, "ttr"), j->ttr);
    assert_int_equal(yaml_int(yaml, "reserves"), j->reserves);
    assert_int_equal(yaml_int(yaml, "timeouts"), j->timeouts);
    assert_int_equal(yaml_int(yaml, "releases"), j->releases);
    assert_int_equal(yaml_int(yaml, "buries"), j->buries);
    assert_int_equal(yaml_int(yaml, "kicks"), j->kicks);
    expect_near(yaml_int(yaml, "age"), now - j->created, "age", j->id);
    const char *state = yaml_get(yaml, "state");
    if (strcmp(j->state, "delayed") != 0) {
        assert_string_equal(state, j->state);
        assert_int_equal(yaml_int(yaml, "time-left"), 0);
    } else if (j->deadline > now + SLACK_S) {
        assert_string_equal(state, "delayed");
        expect_near(yaml_int(yaml, "time-left"), j->deadline - now, "time-left", j->id);
    } else if (j->deadline < now - SLACK_S) {
        assert_string_equal(state, "ready"); /* its delay ran out since */
    }
    free(yaml);
}

static void check_body(int fd, const job_t *j)
{
    char cmd[64], head[64];
    snprintf(cmd, sizeof cmd, "peek %" PRIu64 "\r\n", j->id);
    snprintf(head, sizeof head, "FOUND %" PRIu64 " %zu\r\n", j->id, j->body_len);
    bqt_sends(fd, cmd);
    bqt_expect(fd, head);
    char body[260];
    assert_int_equal(bqt_read_n(fd, body, j->body_len + 2, BQT_DEADLINE_MS), j->body_len + 2);
    assert_memory_equal(body, j->body, j->body_len);
    assert_memory_equal(body + j->body_len, "\r\n", 2);
}

/* Every job of ex is there as expected, every other id below next-id is
 * not, and the next put gets next-id. */
static void check_jobs(int fd, const expected_t *ex)
{
    size_t k = 0;
    for (uint64_t id = 1; id < ex->next_id; id++) {
        if (k < ex->n && ex->jobs[k].id == id) {
            check_stats(fd, &ex->jobs[k]);
            check_body(fd, &ex->jobs[k]);
            k++;
            continue;
        }
        char *yaml = stats_job(fd, id);
        if (yaml)
            fail_msg("deleted job %" PRIu64 " is back", id);
    }
    assert_int_equal(k, ex->n);
    char want[64];
    snprintf(want, sizeof want, "INSERTED %" PRIu64 "\r\n", ex->next_id);
    bqt_sends(fd, "use default\r\n");
    bqt_expect(fd, "USING default\r\n");
    bqt_sends(fd, "put 0 0 10 1\r\nx\r\n");
    bqt_expect(fd, want);
}

/* The bytes of every file of dir, with their names, as one string. */
static char *dir_digest(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cd '%s' && ls -l --time-style=+%%s . && cat *", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, p)) > 0) {
        n += got;
        if (n == cap) {
            buf = realloc(buf, cap *= 2);
            assert_non_null(buf);
        }
    }
    pclose(p);
    buf[n] = '\0';
    return buf;
}

/* ---- tests ---- */

static void import_fixture(ctx_t *c, const char *name)
{
    expected_t ex;
    load_expected(name, &ex);
    copy_fixture(c, name);
    char *before = dir_digest(c->src);
    import(c, NULL, 0, "beanstalkd jobs imported");
    char *after = dir_digest(c->src);
    assert_string_equal(before, after); /* the source is never written */
    free(before);
    free(after);
    start_server(c);
    int fd = bqt_client(&c->srv);
    check_jobs(fd, &ex);
    close(fd);
}

static void import_basic_fixture(void **state)
{
    ctx_t *c = *state;
    import_fixture(c, "basic");
    /* Buried jobs keep their order: 6 was buried before 12. */
    int fd = bqt_client(&c->srv);
    bqt_sends(fd, "use default\r\n");
    bqt_expect(fd, "USING default\r\n");
    bqt_sends(fd, "kick 1\r\n");
    bqt_expect(fd, "KICKED 1\r\n");
    char *yaml = stats_job(fd, 6);
    assert_string_equal(yaml_get(yaml, "state"), "ready");
    free(yaml);
    yaml = stats_job(fd, 12);
    assert_string_equal(yaml_get(yaml, "state"), "buried");
    free(yaml);
    close(fd);
}

static void import_rotated_fixture(void **state)
{
    import_fixture(*state, "rotated");
}

/* Survives a restart: the imported jobs are in our binlog. */
static void import_survives_restart(void **state)
{
    ctx_t *c = *state;
    expected_t ex;
    load_expected("basic", &ex);
    copy_fixture(c, "basic");
    import(c, NULL, 0, NULL);
    start_server(c);
    bqt_server_stop(&c->srv);
    start_server(c);
    int fd = bqt_client(&c->srv);
    check_jobs(fd, &ex);
    close(fd);
}

/* Writes n bytes at offset off of c->src/name. */
static void patch_file(ctx_t *c, const char *name, long off, const void *bytes, size_t n)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", c->src, name);
    assert_int_equal(chmod(path, 0644), 0);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
    close(fd);
}

static bool dst_has_segments(const ctx_t *c)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q '^bqlog'", c->dst);
    return run(cmd) == 0;
}

/* In basic/binlog.1 the full record of job 5 starts at 406 (README.md). */
#define JOB5_OFFSET 406

static void damaged_source_is_refused(void **state)
{
    ctx_t *c = *state;
    copy_fixture(c, "basic");
    const unsigned char namelen[4] = {0xe7, 0x03, 0, 0}; /* 999 */
    patch_file(c, "binlog.1", JOB5_OFFSET, namelen, 4);
    import(c, NULL, 1, "file=binlog.1 offset=406");
    assert_non_null(strstr(slurp(c->log, NULL), "namelen 999"));
    assert_false(dst_has_segments(c));

    import(c, "--import-accept-prefix", 0, "offset=406");
    start_server(c);
    int fd = bqt_client(&c->srv);
    for (uint64_t id = 1; id <= 4; id++) {
        char *yaml = stats_job(fd, id);
        assert_non_null(yaml);
        free(yaml);
    }
    assert_null(stats_job(fd, 5));
    bqt_sends(fd, "put 0 0 10 1\r\nx\r\n");
    bqt_expect(fd, "INSERTED 5\r\n");
    close(fd);
}

static void truncated_source_is_refused(void **state)
{
    ctx_t *c = *state;
    copy_fixture(c, "basic");
    char path[400];
    snprintf(path, sizeof path, "%s/binlog.1", c->src);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(truncate(path, JOB5_OFFSET + 50), 0);
    import(c, NULL, 1, "file=binlog.1 offset=406");
    assert_non_null(strstr(slurp(c->log, NULL), "file ends inside"));
    assert_false(dst_has_segments(c));
}

static void body_without_crlf_is_refused(void **state)
{
    ctx_t *c = *state;
    copy_fixture(c, "basic");
    /* Job 1's body "hello\r\n" ends at 4 + 4 + 7 + 80 + 7 = 102. */
    patch_file(c, "binlog.1", 100, "\0\0", 2);
    import(c, NULL, 1, "file=binlog.1 offset=4 ");
    assert_non_null(strstr(slurp(c->log, NULL), "CRLF"));
}

/* A tiny v7 file of one ready job in tube t (for merge tests). */
static void write_v7(ctx_t *c, uint64_t id, const char *body)
{
    char path[400], cmd[700];
    unsigned char rec[4 + 4 + 1 + 80];
    size_t blen = strlen(body);
    memset(rec, 0, sizeof rec);
    rec[0] = 7;
    rec[4] = 1;
    rec[8] = 't';
    unsigned char *jr = rec + 9;
    for (int i = 0; i < 8; i++)
        jr[i] = (unsigned char)(id >> (8 * i));
    jr[24 + 3] = 0x3b; /* ttr: 0x3b9aca00 ns = 1 s */
    jr[24 + 2] = 0x9a;
    jr[24 + 1] = 0xca;
    jr[32] = (unsigned char)(blen + 2);
    jr[40 + 7] = 0x17; /* created: 0x1700000000000000 ns (July 2022) */
    jr[76] = 1;        /* ready */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", c->src, c->src);
    assert_int_equal(run(cmd), 0);
    snprintf(path, sizeof path, "%s/binlog.3", c->src);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(rec, 1, sizeof rec, f), sizeof rec);
    assert_int_equal(fwrite(body, 1, blen, f), blen);
    assert_int_equal(fwrite("\r\n", 1, 2, f), 2);
    fclose(f);
}

static void merge_keeps_both_and_refuses_conflicts(void **state)
{
    ctx_t *c = *state;
    copy_fixture(c, "basic");
    import(c, NULL, 0, NULL);
    write_v7(c, 1000, "merged");
    import(c, NULL, 0, "jobs=1");
    write_v7(c, 6, "clash");
    import(c, NULL, 1, "already used");
    start_server(c);
    int fd = bqt_client(&c->srv);
    bqt_sends(fd, "peek 1000\r\n");
    bqt_expect(fd, "FOUND 1000 6\r\nmerged\r\n");
    bqt_sends(fd, "peek 6\r\n");
    bqt_expect(fd, "FOUND 6 6\r\nburied\r\n");
    bqt_sends(fd, "peek 1\r\n");
    bqt_expect(fd, "FOUND 1 5\r\nhello\r\n");
    bqt_sends(fd, "put 0 0 10 1\r\nx\r\n");
    bqt_expect(fd, "INSERTED 1001\r\n");
    close(fd);
}

/* The source's lock is held while beanstalkd runs on it: refused. */
static void running_beanstalkd_is_refused(void **state)
{
    ctx_t *c = *state;
    bqt_require(bqt_reference_available(), "Debian's beanstalkd (the reference server)");
    copy_fixture(c, "basic");
    const char *args[] = {"-b", c->src, NULL};
    assert_int_equal(bqt_server_start(&c->srv, bqt_reference_binary(), args), 0);
    import(c, NULL, 1, "beanstalkd is running");
    assert_false(dst_has_segments(c));
    bqt_server_stop(&c->srv);
    import(c, NULL, 0, "beanstalkd jobs imported");
}

static void bad_invocations(void **state)
{
    ctx_t *c = *state;
    const char *no_b[] = {"--import-beanstalkd", c->src, NULL};
    assert_int_equal(run_binary(c, no_b), 5);
    assert_non_null(strstr(slurp(c->log, NULL), "requires -b"));
    const char *prefix_alone[] = {"--import-accept-prefix", "-b", c->dst, NULL};
    assert_int_equal(run_binary(c, prefix_alone), 5);
    /* A missing or empty source. */
    import(c, NULL, 1, "cannot open the beanstalkd binlog directory");
    assert_int_equal(mkdir(c->src, 0700), 0);
    import(c, NULL, 1, "no beanstalkd binlog files");
    /* A destination holding beanstalkd files (e.g. the source itself). */
    copy_fixture(c, "basic");
    const char *into_src[] = {"--import-beanstalkd", c->src, "-b", c->src, NULL};
    assert_int_equal(run_binary(c, into_src), 10);
    assert_non_null(strstr(slurp(c->log, NULL), "beanstalkd binlog files"));
    /* A destination that does not exist. */
    char missing[400];
    snprintf(missing, sizeof missing, "%s/missing", c->dir);
    const char *no_dst[] = {"--import-beanstalkd", c->src, "-b", missing, NULL};
    assert_int_equal(run_binary(c, no_dst), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(import_basic_fixture, setup, teardown),
        cmocka_unit_test_setup_teardown(import_rotated_fixture, setup, teardown),
        cmocka_unit_test_setup_teardown(import_survives_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(damaged_source_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_source_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(body_without_crlf_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(merge_keeps_both_and_refuses_conflicts, setup, teardown),
        cmocka_unit_test_setup_teardown(running_beanstalkd_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_invocations, setup, teardown),
    };
    return bqt_exit(cmocka_run_group_tests_name("import", tests, NULL, NULL));
}
