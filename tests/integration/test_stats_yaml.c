/* Integration tests for stats, stats-tube and stats-job over TCP: the exact
 * YAML bodies (key order, values; time fields within +-1 s), the counters
 * after a known sequence of commands, a delayed job becoming ready, and id
 * parsing. The 1.13 form (quoted name/tube/hostname/os/platform) is asserted
 * except on the 1.12 reference. Ports testserv.c's omit_time_left,
 * delayed_to_ready, statsjob_ck_format and stats_tube. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

/* The body of stats-job for job 1 in tube default, with the given state
 * and the fields that vary between the tests. */
static char *job_yaml(const char *state, const char *pri, const char *delay, const char *ttr,
                      const char *time_left, const char *counts)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "---\nid: 1\ntube: \"default\"\nstate: %s\npri: %s\nage: 0\ndelay: %s\nttr: %s\n"
             "time-left: %s\nfile: 0\n%s",
             state, pri, delay, ttr, time_left, counts);
    return buf;
}

/* testserv: omit_time_left. A ready job shows time-left 0 (exact body). */
static void stats_job_of_ready_job(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 5", "a", 1);
    char *body = it_ok(t->fd, "stats-job 1\r\n");
    it_expect_yaml(t, body,
                   job_yaml("ready", "0", "0", "5", "0",
                            "reserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n"),
                   "age");
    free(body);
}

/* A delayed job: time-left counts down from the delay. */
static void stats_job_of_delayed_job(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "2000 30 60", "b", 1);
    char *body = it_ok(t->fd, "stats-job 1\r\n");
    it_expect_yaml(t, body,
                   job_yaml("delayed", "2000", "30", "60", "29",
                            "reserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n"),
                   "age,time-left");
    free(body);
}

/* A reserved job, then the same job buried with a new priority. */
static void stats_job_of_reserved_and_buried_job(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "5 0 10", "a", 1);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    char *body = it_ok(t->fd, "stats-job 1\r\n");
    it_expect_yaml(t, body,
                   job_yaml("reserved", "5", "0", "10", "9",
                            "reserves: 1\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n"),
                   "age,time-left");
    free(body);
    it_cmd(t->fd, "bury 1 7\r\n", "BURIED\r\n");
    body = it_ok(t->fd, "stats-job 1\r\n");
    it_expect_yaml(t, body,
                   job_yaml("buried", "7", "0", "10", "0",
                            "reserves: 1\ntimeouts: 0\nreleases: 0\nburies: 1\nkicks: 0\n"),
                   "age");
    free(body);
}

/* testserv: statsjob_ck_format. */
static void stats_job_bad_id(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "stats-job 111ABC\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "stats-job 111 222\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "stats-job 111\r\n", "NOT_FOUND\r\n");
}

/* The stats-tube body of `name` with the given counters. */
static char *tube_yaml(const char *name, const char *cmds, const char *total, const char *users)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "---\nname: \"%s\"\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\n"
             "current-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n"
             "total-jobs: %s\n%s%s\npause: 0\npause-time-left: 0\n",
             name, total, users, cmds);
    return buf;
}

/* testserv: stats_tube. Every field of a used tube and of default. */
static void stats_tube_of_used_and_default_tube(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "use tubea\r\n", "USING tubea\r\n");
    it_put(t->fd, "0 0 0", "x", 1);
    it_cmd(t->fd, "delete 1\r\n", "DELETED\r\n");

    char *body = it_ok(t->fd, "stats-tube tubea\r\n");
    it_expect_yaml(t, body,
                   tube_yaml("tubea", "cmd-delete: 1\ncmd-pause-tube: 0", "1",
                             "current-using: 1\ncurrent-watching: 0\ncurrent-waiting: 0\n"),
                   "");
    free(body);
    body = it_ok(t->fd, "stats-tube default\r\n");
    it_expect_yaml(t, body,
                   tube_yaml("default", "cmd-delete: 0\ncmd-pause-tube: 0", "0",
                             "current-using: 0\ncurrent-watching: 1\ncurrent-waiting: 0\n"),
                   "");
    free(body);
    it_cmd(t->fd, "stats-tube nosuch\r\n", "NOT_FOUND\r\n");
    it_cmd(t->fd, "stats-tube -bad\r\n", "BAD_FORMAT\r\n");
}

/* testserv: delayed_to_ready, without sleeping: poll stats-tube until the
 * delayed job is ready, and check when that happened. */
static void delayed_job_becomes_ready(void **state)
{
    it_ctx_t *t = *state;
    long long t0 = bqt_now_ms();
    it_put(t->fd, "0 1 1", "", 1);
    char *body = it_ok(t->fd, "stats-tube default\r\n");
    char *ready = it_yaml_get(body, "current-jobs-ready");
    char *delayed = it_yaml_get(body, "current-jobs-delayed");
    char *total = it_yaml_get(body, "total-jobs");
    assert_string_equal(ready, "0");
    assert_string_equal(delayed, "1");
    assert_string_equal(total, "1");
    free(ready);
    free(delayed);
    free(total);
    free(body);

    it_wait_stat(t->fd, "stats-tube default\r\n", "current-jobs-ready", "1", 3000);
    assert_in_range(bqt_now_ms() - t0, 1000 - IT_MS_SLACK, 2999);
    body = it_ok(t->fd, "stats-tube default\r\n");
    delayed = it_yaml_get(body, "current-jobs-delayed");
    total = it_yaml_get(body, "total-jobs");
    assert_string_equal(delayed, "0");
    assert_string_equal(total, "1");
    free(delayed);
    free(total);
    free(body);
}

/* The keys of `stats` in order, and how each value is checked. */
typedef enum { ZERO, ANY, QUOTED, RUSAGE, HEX16, FALSE_ } value_kind_t;

static const struct {
    const char *key;
    value_kind_t kind;
} stats_keys[] = {
    {"current-jobs-urgent", ZERO},
    {"current-jobs-ready", ZERO},
    {"current-jobs-reserved", ZERO},
    {"current-jobs-delayed", ZERO},
    {"current-jobs-buried", ZERO},
    {"cmd-put", ZERO},
    {"cmd-peek", ZERO},
    {"cmd-peek-ready", ZERO},
    {"cmd-peek-delayed", ZERO},
    {"cmd-peek-buried", ZERO},
    {"cmd-reserve", ZERO},
    {"cmd-reserve-with-timeout", ZERO},
    {"cmd-delete", ZERO},
    {"cmd-release", ZERO},
    {"cmd-use", ZERO},
    {"cmd-watch", ZERO},
    {"cmd-ignore", ZERO},
    {"cmd-bury", ZERO},
    {"cmd-kick", ZERO},
    {"cmd-touch", ZERO},
    {"cmd-stats", ANY},
    {"cmd-stats-job", ZERO},
    {"cmd-stats-tube", ZERO},
    {"cmd-list-tubes", ZERO},
    {"cmd-list-tube-used", ZERO},
    {"cmd-list-tubes-watched", ZERO},
    {"cmd-pause-tube", ZERO},
    {"job-timeouts", ZERO},
    {"total-jobs", ZERO},
    {"max-job-size", ANY},
    {"current-tubes", ANY},
    {"current-connections", ANY},
    {"current-producers", ZERO},
    {"current-workers", ZERO},
    {"current-waiting", ZERO},
    {"total-connections", ANY},
    {"pid", ANY},
    {"version", QUOTED},
    {"rusage-utime", RUSAGE},
    {"rusage-stime", RUSAGE},
    {"uptime", ANY},
    {"binlog-oldest-index", ZERO},
    {"binlog-current-index", ZERO},
    {"binlog-records-migrated", ZERO},
    {"binlog-records-written", ZERO},
    {"binlog-max-size", ANY},
    {"draining", FALSE_},
    {"id", HEX16},
    {"hostname", QUOTED},
    {"os", QUOTED},
    {"platform", QUOTED},
};

/* Checks one "key: value" line of stats against its expected kind. */
static void check_stats_line(it_ctx_t *t, const char *line, size_t i)
{
    size_t klen = strlen(stats_keys[i].key);
    if (strncmp(line, stats_keys[i].key, klen) != 0 || strncmp(line + klen, ": ", 2) != 0)
        fail_msg("stats line %zu is '%s', want key '%s'", i, line, stats_keys[i].key);
    const char *v = line + klen + 2;
    size_t vlen = strlen(v);
    switch (stats_keys[i].kind) {
    case ZERO:
        assert_string_equal(v, "0");
        break;
    case ANY:
        assert_true(vlen > 0 && strspn(v, "0123456789") == vlen);
        break;
    case QUOTED:
        if (strcmp(stats_keys[i].key, "version") != 0 && it_is_ref112(t)) {
            it_note_skip(line);
            break;
        }
        assert_true(vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"');
        break;
    case RUSAGE:
        assert_true(strspn(v, "0123456789") + 7 == vlen && v[vlen - 7] == '.');
        break;
    case HEX16:
        assert_true(vlen == 16 && strspn(v, "0123456789abcdef") == 16);
        break;
    case FALSE_:
        assert_string_equal(v, "false");
        break;
    }
}

/* Reads stats and checks every key in order and its value. */
static char *check_stats_body(it_ctx_t *t)
{
    char *body = it_ok(t->fd, "stats\r\n");
    char *copy = strdup(body), *save = NULL;
    assert_non_null(copy);
    char *line = strtok_r(copy, "\n", &save);
    assert_string_equal(line, "---");
    size_t n = sizeof stats_keys / sizeof stats_keys[0];
    for (size_t i = 0; i < n; i++) {
        line = strtok_r(NULL, "\n", &save);
        if (line == NULL)
            fail_msg("stats ends after %zu keys", i);
        check_stats_line(t, line, i);
    }
    assert_null(strtok_r(NULL, "\n", &save));
    free(copy);
    return body;
}

/* Returns a stats value as a number. */
static long long stats_value(const char *body, const char *key)
{
    char *v = it_yaml_get(body, key);
    assert_non_null(v);
    long long n = strtoll(v, NULL, 10);
    free(v);
    return n;
}

/* stats on a fresh server: 51 keys in beanstalkd's order, zero counters,
 * the server's pid and limits; cmd-stats counts the call itself. */
static void stats_of_fresh_server(void **state)
{
    it_ctx_t *t = *state;
    char *body = check_stats_body(t);
    assert_int_equal(stats_value(body, "pid"), t->srv.pid);
    assert_int_equal(stats_value(body, "max-job-size"), 65535);
    assert_int_equal(stats_value(body, "binlog-max-size"), 10485760);
    assert_int_equal(stats_value(body, "current-tubes"), 1);
    assert_in_range(stats_value(body, "uptime"), 0, 1);
    assert_int_equal(stats_value(body, "current-connections"), 1);
    assert_true(stats_value(body, "total-connections") >= 1);
    /* The setup asked stats once (it_ask_version); this call counts too. */
    assert_int_equal(stats_value(body, "cmd-stats"), 2);
    free(body);
    body = check_stats_body(t);
    assert_int_equal(stats_value(body, "cmd-stats"), 3);
    free(body);
}

/* Counters after a known sequence: urgent = ready with pri < 1024. */
static void stats_counts_jobs_by_state(void **state)
{
    it_ctx_t *t = *state;
    it_put(t->fd, "0 0 10", "a", 1);
    it_put(t->fd, "1024 0 10", "b", 2);
    it_put(t->fd, "0 100 10", "c", 3);
    it_put(t->fd, "5 0 10", "d", 4);
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 1, "a");
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 4, "d");
    it_cmd(t->fd, "bury 4 1\r\n", "BURIED\r\n");
    it_put(t->fd, "1023 0 10", "e", 5);

    char *body = it_ok(t->fd, "stats\r\n");
    static const struct {
        const char *key;
        long long want;
    } want[] = {
        {"current-jobs-urgent", 1},
        {"current-jobs-ready", 2},
        {"current-jobs-reserved", 1},
        {"current-jobs-delayed", 1},
        {"current-jobs-buried", 1},
        {"cmd-put", 5},
        {"cmd-reserve", 2},
        {"cmd-bury", 1},
        {"total-jobs", 5},
        {"current-producers", 1},
        {"current-workers", 1},
        {"current-waiting", 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        long long got = stats_value(body, want[i].key);
        if (got != want[i].want)
            fail_msg("stats %s: got %lld, want %lld", want[i].key, got, want[i].want);
    }
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(stats_job_of_ready_job),
        IT_TEST(stats_job_of_delayed_job),
        IT_TEST(stats_job_of_reserved_and_buried_job),
        IT_TEST(stats_job_bad_id),
        IT_TEST(stats_tube_of_used_and_default_tube),
        IT_TEST(delayed_job_becomes_ready),
        IT_TEST(stats_of_fresh_server),
        IT_TEST(stats_counts_jobs_by_state),
    };
    return cmocka_run_group_tests_name("stats_yaml", tests, NULL, NULL);
}
