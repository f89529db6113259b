/* Unit tests of protocol/stats.c: the exact YAML bodies of stats-job (in each
 * state), stats-tube (paused and not), list-tubes, list-tubes-watched and
 * stats, as beanstalkd 1.13 prints them (reference report 1.15: the 1.12
 * samples with 1.13's quoting of tube names and uname strings, hence the
 * byte counts two or three higher than the 1.12 samples per quoted value).
 *
 * The engine runs under the harness of engine_harness.h with a fixed
 * server_info and hand-set clocks, so every number in a body is known. Every
 * reply is checked whole, "OK <n>\r\n" included, so a wrong length fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine_harness.h"

/* "OK <n>\r\n<body>\r\n" for a body (static buffer). */
static const char *ok_reply(const char *body)
{
    static char buf[16384];
    int n = snprintf(buf, sizeof buf, "OK %zu\r\n%s\r\n", strlen(body), body);
    assert_true(n > 0 && (size_t)n < sizeof buf);
    return buf;
}

/* ---- stats-job ---- */

static void stats_job_ready(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 5, 0, 10, "hello");
    const char *body = "---\nid: 1\ntube: \"default\"\nstate: ready\npri: 5\nage: 0\ndelay: 0\n"
                       "ttr: 10\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\n"
                       "buries: 0\nkicks: 0\n";
    assert_int_equal(strlen(body), 146); /* 1.12's 144 + the quotes */
    h_cmd(h, a, "stats-job 1\r\n", ok_reply(body));
    h_done(h);
}

static void stats_job_delayed(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 5, 0, 10, "first");
    h_put(h, a, 2000, 30, 60, "later");
    h_advance(h, H_MS(500));
    const char *body = "---\nid: 2\ntube: \"default\"\nstate: delayed\npri: 2000\nage: 0\n"
                       "delay: 30\nttr: 60\ntime-left: 29\nfile: 0\nreserves: 0\ntimeouts: 0\n"
                       "releases: 0\nburies: 0\nkicks: 0\n";
    assert_int_equal(strlen(body), 153);
    h_cmd(h, a, "stats-job 2\r\n", ok_reply(body));
    h_done(h);
}

static void stats_job_reserved(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 5, 0, 10, "hello");
    h_advance(h, H_S(1));
    h_cmd(h, a, "reserve\r\n", "RESERVED 1 5\r\nhello\r\n");
    h_advance(h, H_MS(500));
    const char *body = "---\nid: 1\ntube: \"default\"\nstate: reserved\npri: 5\nage: 1\n"
                       "delay: 0\nttr: 10\ntime-left: 9\nfile: 0\nreserves: 1\ntimeouts: 0\n"
                       "releases: 0\nburies: 0\nkicks: 0\n";
    assert_int_equal(strlen(body), 149);
    h_cmd(h, a, "stats-job 1\r\n", ok_reply(body));
    h_done(h);
}

static void stats_job_buried(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_put(h, a, 5, 0, 10, "hello");
    h_cmd(h, a, "reserve\r\n", "RESERVED 1 5\r\nhello\r\n");
    h_advance(h, H_S(2));
    h_cmd(h, a, "bury 1 7\r\n", "BURIED\r\n");
    const char *body = "---\nid: 1\ntube: \"default\"\nstate: buried\npri: 7\nage: 2\ndelay: 0\n"
                       "ttr: 10\ntime-left: 0\nfile: 0\nreserves: 1\ntimeouts: 0\nreleases: 0\n"
                       "buries: 1\nkicks: 0\n";
    assert_int_equal(strlen(body), 147);
    h_cmd(h, a, "stats-job 1\r\n", ok_reply(body));
    h_done(h);
}

/* beanstalkd stamps created_at when it parses the put line (job.c
 * allocate_job), not when the body is complete. */
static void stats_job_age_counts_from_the_put_line(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_send(h, a, "put 0 0 10 1\r\n");
    h_advance(h, H_S(5));
    h_cmd(h, a, "x\r\n", "INSERTED 1\r\n");
    assert_string_equal(h_job_stat(h, a, 1, "age"), "5");
    h_done(h);
}

/* Every counter of a job that went through every transition, in a tube with
 * a long name, with the largest values of pri, delay and ttr. */
static void stats_job_counters_and_long_tube_name(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    char name[201], cmd[300];
    memset(name, 'T', 200);
    name[200] = '\0';
    snprintf(cmd, sizeof cmd, "use %s\r\n", name);
    h_send(h, a, cmd);
    snprintf(cmd, sizeof cmd, "watch %s\r\n", name);
    h_send(h, a, cmd);
    h_clear(h, a);
    h_put(h, a, 4294967295u, 0, 4294967295u, "x");
    h_cmd(h, a, "reserve\r\n", "RESERVED 1 1\r\nx\r\n");
    h_cmd(h, a, "release 1 1 4294967295\r\n", "RELEASED\r\n");
    h_cmd(h, a, "kick 1\r\n", "KICKED 1\r\n");
    h_cmd(h, a, "reserve\r\n", "RESERVED 1 1\r\nx\r\n");
    h_cmd(h, a, "bury 1 4294967295\r\n", "BURIED\r\n");
    h_cmd(h, a, "kick-job 1\r\n", "KICKED\r\n");
    h_cmd(h, a, "reserve-job 1\r\n", "RESERVED 1 1\r\nx\r\n");
    char body[1024];
    snprintf(body, sizeof body,
             "---\nid: 1\ntube: \"%s\"\nstate: reserved\npri: 4294967295\nage: 0\n"
             "delay: 4294967295\nttr: 4294967295\ntime-left: 4294967295\nfile: 0\n"
             "reserves: 3\ntimeouts: 0\nreleases: 1\nburies: 1\nkicks: 2\n",
             name);
    h_cmd(h, a, "stats-job 1\r\n", ok_reply(body));
    h_cmd(h, a, "stats-job 2\r\n", "NOT_FOUND\r\n");
    h_done(h);
}

/* ---- stats-tube ---- */

static const char *tube_body(const char *name, int urgent, int ready, int reserved, int delayed,
                             int buried, int total, int using, int watching, int waiting,
                             int deletes, int pauses, long pause, long left)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "---\nname: \"%s\"\ncurrent-jobs-urgent: %d\ncurrent-jobs-ready: %d\n"
             "current-jobs-reserved: %d\ncurrent-jobs-delayed: %d\ncurrent-jobs-buried: %d\n"
             "total-jobs: %d\ncurrent-using: %d\ncurrent-watching: %d\ncurrent-waiting: %d\n"
             "cmd-delete: %d\ncmd-pause-tube: %d\npause: %ld\npause-time-left: %ld\n",
             name, urgent, ready, reserved, delayed, buried, total, using, watching, waiting,
             deletes, pauses, pause, left);
    return buf;
}

static void stats_tube_fresh_default(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    const char *want = "OK 267\r\n---\nname: \"default\"\ncurrent-jobs-urgent: 0\n"
                       "current-jobs-ready: 0\ncurrent-jobs-reserved: 0\n"
                       "current-jobs-delayed: 0\ncurrent-jobs-buried: 0\ntotal-jobs: 0\n"
                       "current-using: 1\ncurrent-watching: 1\ncurrent-waiting: 0\n"
                       "cmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n\r\n";
    h_cmd(h, a, "stats-tube default\r\n", want);
    h_done(h);
}

static void stats_tube_counts_every_state(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h), w = h_open(h);
    h_cmd(h, a, "use q\r\n", "USING q\r\n");
    h_cmd(h, b, "use q\r\n", "USING q\r\n");
    h_cmd(h, b, "watch q\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "watch q\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "ignore default\r\n", "WATCHING 1\r\n");
    h_put(h, a, 1, 0, 10, "urgent");   /* 1 */
    h_put(h, a, 5000, 0, 10, "ready"); /* 2 */
    h_put(h, a, 2, 0, 10, "reserved"); /* 3 */
    h_put(h, a, 3, 9, 10, "delayed");  /* 4 */
    h_put(h, a, 0, 0, 10, "buried");   /* 5 */
    h_put(h, a, 0, 0, 10, "deleted");  /* 6 */
    h_cmd(h, a, "delete 6\r\n", "DELETED\r\n");
    h_cmd(h, b, "reserve-job 5\r\n", "RESERVED 5 6\r\nburied\r\n");
    h_cmd(h, b, "bury 5 0\r\n", "BURIED\r\n");
    h_cmd(h, b, "reserve-job 3\r\n", "RESERVED 3 8\r\nreserved\r\n");
    h_cmd(h, w, "reserve-with-timeout 0\r\n", "RESERVED 1 6\r\nurgent\r\n");
    h_cmd(h, w, "release 1 1 0\r\n", "RELEASED\r\n");
    h_cmd(h, a, "stats-tube q\r\n",
          ok_reply(tube_body("q", 1, 2, 1, 1, 1, 6, 2, 2, 0, 1, 0, 0, 0)));
    /* a waiting client */
    h_cmd(h, a, "use empty\r\n", "USING empty\r\n");
    h_cmd(h, w, "watch empty\r\n", "WATCHING 2\r\n");
    h_cmd(h, w, "ignore q\r\n", "WATCHING 1\r\n");
    h_cmd(h, w, "reserve\r\n", "");
    h_cmd(h, a, "stats-tube empty\r\n",
          ok_reply(tube_body("empty", 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0)));
    h_done(h);
}

static void stats_tube_paused(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "pause-tube default 100\r\n", "PAUSED\r\n");
    h_advance(h, H_MS(500));
    const char *body = tube_body("default", 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 100, 99);
    assert_true(strstr(body, "cmd-pause-tube: 1\npause: 100\npause-time-left: 99\n") != NULL);
    h_cmd(h, a, "stats-tube default\r\n", ok_reply(body));
    h_advance(h, H_S(60));
    h_cmd(h, a, "stats-tube default\r\n",
          ok_reply(tube_body("default", 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 100, 39)));
    /* after the pause: zeros, the count stays */
    h_advance(h, H_S(40));
    h_cmd(h, a, "stats-tube default\r\n",
          ok_reply(tube_body("default", 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0)));
    /* pause 0 shows as 0 seconds */
    h_cmd(h, a, "pause-tube default 0\r\n", "PAUSED\r\n");
    h_cmd(h, a, "stats-tube default\r\n",
          ok_reply(tube_body("default", 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 2, 0, 0)));
    h_done(h);
}

/* ---- list-tubes, list-tubes-watched, list-tube-used ---- */

static void stats_list_tubes(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_cmd(h, a, "list-tubes\r\n", "OK 14\r\n---\n- default\n\r\n");
    h_cmd(h, a, "list-tubes-watched\r\n", "OK 14\r\n---\n- default\n\r\n");
    h_cmd(h, a, "list-tube-used\r\n", "USING default\r\n");
    h_cmd(h, a, "watch foo\r\n", "WATCHING 2\r\n");
    h_cmd(h, a, "use bar\r\n", "USING bar\r\n");
    h_cmd(h, a, "list-tubes\r\n", "OK 26\r\n---\n- default\n- foo\n- bar\n\r\n");
    h_cmd(h, a, "list-tubes-watched\r\n", "OK 20\r\n---\n- default\n- foo\n\r\n");
    h_cmd(h, a, "list-tube-used\r\n", "USING bar\r\n");
    /* names are never quoted, whatever they hold */
    h_cmd(h, a, "watch a+b/c;d.e$f_g(h)\r\n", "WATCHING 3\r\n");
    h_cmd(h, a, "list-tubes-watched\r\n",
          "OK 39\r\n---\n- default\n- foo\n- a+b/c;d.e$f_g(h)\n\r\n");
    h_done(h);
}

/* A list far larger than any fixed buffer. */
static void stats_list_tubes_with_many_long_names(void **state)
{
    (void)state;
    enum { N = 300 };
    harness_t *h = h_new(0);
    h->auto_check = false;
    int a = h_open(h);
    size_t want_len = 4 + 10;
    char cmd[300];
    for (int i = 0; i < N; i++) {
        char name[201];
        memset(name, 'a' + i % 26, 200);
        snprintf(name + 190, 11, "%010u", (unsigned)i);
        snprintf(cmd, sizeof cmd, "watch %s\r\n", name);
        h_send(h, a, cmd);
        want_len += 203;
    }
    h_clear(h, a);
    const char *yaml = h_yaml(h, a, "list-tubes\r\n");
    assert_int_equal(strlen(yaml), want_len);
    assert_memory_equal(yaml, "---\n- default\n- aaaa", 20);
    yaml = h_yaml(h, a, "list-tubes-watched\r\n");
    assert_int_equal(strlen(yaml), want_len);
    h_check(h);
    h_done(h);
}

/* ---- stats ---- */

/* beanstalkd 1.13's STATS_FMT keys, in order. */
static const char *const stats_keys[] = {
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "cmd-put",
    "cmd-peek",
    "cmd-peek-ready",
    "cmd-peek-delayed",
    "cmd-peek-buried",
    "cmd-reserve",
    "cmd-reserve-with-timeout",
    "cmd-delete",
    "cmd-release",
    "cmd-use",
    "cmd-watch",
    "cmd-ignore",
    "cmd-bury",
    "cmd-kick",
    "cmd-touch",
    "cmd-stats",
    "cmd-stats-job",
    "cmd-stats-tube",
    "cmd-list-tubes",
    "cmd-list-tube-used",
    "cmd-list-tubes-watched",
    "cmd-pause-tube",
    "job-timeouts",
    "total-jobs",
    "max-job-size",
    "current-tubes",
    "current-connections",
    "current-producers",
    "current-workers",
    "current-waiting",
    "total-connections",
    "pid",
    "version",
    "rusage-utime",
    "rusage-stime",
    "uptime",
    "binlog-oldest-index",
    "binlog-current-index",
    "binlog-records-migrated",
    "binlog-records-written",
    "binlog-max-size",
    "draining",
    "id",
    "hostname",
    "os",
    "platform",
};

static void set_info(harness_t *h)
{
    h->info = (bq_server_info_t){
        .pid = 4242,
        .version = "1.13",
        .utime_us = 1234567,
        .stime_us = 5,
        .uptime_s = 77,
        .binlog_oldest_index = 3,
        .binlog_current_index = 4,
        .binlog_records_migrated = 5,
        .binlog_records_written = 6,
        .binlog_max_size = 10485760,
        .id = "0123456789abcdef",
        .hostname = "vm",
        .os = "#1 SMP PREEMPT_DYNAMIC @0",
        .platform = "x86_64",
    };
}

static void stats_fresh_server_exact_body(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    set_info(h);
    int a = h_open(h);
    const char *body =
        "---\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\ncurrent-jobs-reserved: 0\n"
        "current-jobs-delayed: 0\ncurrent-jobs-buried: 0\ncmd-put: 0\ncmd-peek: 0\n"
        "cmd-peek-ready: 0\ncmd-peek-delayed: 0\ncmd-peek-buried: 0\ncmd-reserve: 0\n"
        "cmd-reserve-with-timeout: 0\ncmd-delete: 0\ncmd-release: 0\ncmd-use: 0\n"
        "cmd-watch: 0\ncmd-ignore: 0\ncmd-bury: 0\ncmd-kick: 0\ncmd-touch: 0\ncmd-stats: 1\n"
        "cmd-stats-job: 0\ncmd-stats-tube: 0\ncmd-list-tubes: 0\ncmd-list-tube-used: 0\n"
        "cmd-list-tubes-watched: 0\ncmd-pause-tube: 0\njob-timeouts: 0\ntotal-jobs: 0\n"
        "max-job-size: 65535\ncurrent-tubes: 1\ncurrent-connections: 1\n"
        "current-producers: 0\ncurrent-workers: 0\ncurrent-waiting: 0\n"
        "total-connections: 1\npid: 4242\nversion: \"1.13\"\nrusage-utime: 1.234567\n"
        "rusage-stime: 0.000005\nuptime: 77\nbinlog-oldest-index: 3\n"
        "binlog-current-index: 4\nbinlog-records-migrated: 5\nbinlog-records-written: 6\n"
        "binlog-max-size: 10485760\ndraining: false\nid: 0123456789abcdef\n"
        "hostname: \"vm\"\nos: \"#1 SMP PREEMPT_DYNAMIC @0\"\nplatform: \"x86_64\"\n";
    h_cmd(h, a, "stats\r\n", ok_reply(body));
    h_done(h);
}

/* The key order is STATS_FMT's, and the length in "OK <n>" is right. */
static void stats_keys_in_beanstalkd_order(void **state)
{
    (void)state;
    harness_t *h = h_new(1000);
    set_info(h);
    int a = h_open(h);
    const char *yaml = h_yaml(h, a, "stats\r\n"); /* checks OK <n> against the body */
    assert_memory_equal(yaml, "---\n", 4);
    const char *p = yaml + 4;
    size_t nkeys = sizeof stats_keys / sizeof stats_keys[0];
    assert_int_equal(nkeys, 51);
    for (size_t i = 0; i < nkeys; i++) {
        size_t klen = strlen(stats_keys[i]);
        if (strncmp(p, stats_keys[i], klen) != 0 || strncmp(p + klen, ": ", 2) != 0)
            fail_msg("key %zu: want %s, got \"%.40s\"", i, stats_keys[i], p);
        p = strchr(p, '\n');
        assert_non_null(p);
        p++;
    }
    assert_string_equal(p, ""); /* nothing after the last key */
    assert_string_equal(h_yaml_value(yaml, "max-job-size"), "1000");
    h_done(h);
}

static void stats_reports_engine_state(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    set_info(h);
    h->info.version = NULL; /* missing strings print empty */
    h->info.hostname = NULL;
    int a = h_open(h), b = h_open(h), c = h_open(h);
    h_put(h, a, 1, 0, 1, "u");
    h_put(h, a, 9999, 0, 10, "r");
    h_put(h, a, 0, 10, 10, "d");
    h_cmd(h, b, "reserve\r\n", "RESERVED 1 1\r\nu\r\n");
    h_advance(h, H_S(1)); /* job 1 times out */
    h_cmd(h, b, "reserve\r\n", "RESERVED 1 1\r\nu\r\n");
    h_cmd(h, b, "bury 1 0\r\n", "BURIED\r\n");
    h_cmd(h, b, "reserve\r\n", "RESERVED 2 1\r\nr\r\n");
    h_cmd(h, c, "watch other\r\n", "WATCHING 2\r\n");
    h_cmd(h, c, "ignore default\r\n", "WATCHING 1\r\n");
    h_cmd(h, c, "reserve\r\n", "");
    bq_engine_set_draining(h->e, true);
    const char *yaml = h_yaml(h, a, "stats\r\n");
    const char *want[][2] = {
        {"current-jobs-urgent", "0"},
        {"current-jobs-ready", "0"},
        {"current-jobs-reserved", "1"},
        {"current-jobs-delayed", "1"},
        {"current-jobs-buried", "1"},
        {"cmd-put", "3"},
        {"cmd-reserve", "4"},
        {"cmd-bury", "1"},
        {"job-timeouts", "1"},
        {"total-jobs", "3"},
        {"current-tubes", "2"},
        {"current-connections", "3"},
        {"current-producers", "1"},
        {"current-workers", "2"},
        {"current-waiting", "1"},
        {"total-connections", "3"},
        {"version", "\"\""},
        {"hostname", "\"\""},
        {"draining", "true"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *v = h_yaml_value(yaml, want[i][0]);
        assert_non_null(v);
        if (strcmp(v, want[i][1]) != 0)
            fail_msg("%s: %s, want %s", want[i][0], v, want[i][1]);
    }
    h_done(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stats_job_ready),
        cmocka_unit_test(stats_job_delayed),
        cmocka_unit_test(stats_job_reserved),
        cmocka_unit_test(stats_job_buried),
        cmocka_unit_test(stats_job_age_counts_from_the_put_line),
        cmocka_unit_test(stats_job_counters_and_long_tube_name),
        cmocka_unit_test(stats_tube_fresh_default),
        cmocka_unit_test(stats_tube_counts_every_state),
        cmocka_unit_test(stats_tube_paused),
        cmocka_unit_test(stats_list_tubes),
        cmocka_unit_test(stats_list_tubes_with_many_long_names),
        cmocka_unit_test(stats_fresh_server_exact_body),
        cmocka_unit_test(stats_keys_in_beanstalkd_order),
        cmocka_unit_test(stats_reports_engine_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
