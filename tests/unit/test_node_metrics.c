/* Unit tests of the /metrics text (node/metrics*.c): a cluster primary's
 * made-up figures render as text the strict checker of
 * tests/support/prom_parse.c accepts, with the values in the right series
 * (label values escaped); a single node has no cluster families; a real
 * engine with more tubes than exported is read with the cap and the count
 * of the ones left out; the event counters survive the environment round
 * trip of a re-exec; histogram buckets include their upper bound;
 * /proc/self/stat lines parse, odd command names included; the binlog
 * filesystem's free and total bytes come from statvfs; and the expiry of
 * the node's own certificate is the notAfter of the one its TLS context
 * loaded (deploy/mkcerts: 825 days), absent without TLS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "engine_harness.h"
#include "node/admin/metrics.h"
#include "replication/tls.h"
#include "tests/support/prom_parse.h"

static double get(const bqp_text_t *t, const char *key)
{
    double v;
    if (!bqp_get(t, key, &v))
        fail_msg("no series %s", key);
    return v;
}

/* Renders src, checks the text and parses it into *t. */
static void render_and_parse(const bq_metrics_source_t *src, bqp_text_t *t)
{
    char *text = bq_metrics_render(src);
    assert_non_null(text);
    char err[256];
    if (bqp_parse(text, t, err, sizeof err) != 0)
        fail_msg("%s in:\n%s", err, text);
    free(text);
}

static void fill_engine(bq_metrics_engine_t *e, bq_metrics_tube_t *tubes)
{
    memset(e, 0, sizeof *e);
    e->ready = 7;
    e->buried = 2;
    e->jobs_created = 9;
    e->ops[BQ_OP_PUT] = 9;
    e->ops[BQ_OP_RESERVE_TIMEOUT] = 4;
    e->connections = 3;
    e->producers = 2;
    e->connections_accepted = 11;
    e->tubes = 3;
    e->ntube = 2;
    e->tube = tubes;
    snprintf(tubes[0].name, sizeof tubes[0].name, "t");
    tubes[0].ready = 7;
    snprintf(tubes[1].name, sizeof tubes[1].name, "q\"b\\s\nn");
    tubes[1].buried = 2;
}

static void fill_cluster(bq_cluster_status_t *st)
{
    memset(st, 0, sizeof *st);
    st->node_id = "n1";
    st->cluster_id = "c";
    st->role = "primary";
    st->epoch = 4;
    st->last_lsn = 100;
    st->commit_lsn = 98;
    st->ready = true;
    st->sync_standbys = 1;
    st->sync_state = "degraded";
    st->nstandbys = 2;
    st->standbys[0] = (bq_cluster_standby_status_t){
        .name = "n2", .state = "streaming", .applied = 99, .lag_records = 1, .lag_seconds = 0.25};
    st->standbys[1] = (bq_cluster_standby_status_t){.name = "n3", .state = "disconnected"};
}

static void primary_text_is_valid_with_its_values(void **state)
{
    (void)state;
    bq_metrics_tube_t tubes[2] = {0};
    bq_metrics_engine_t eng;
    fill_engine(&eng, tubes);
    bq_cluster_status_t st;
    fill_cluster(&st);
    bq_metrics_binlog_t bl = {.bytes_written = 4096,
                              .segments = 2,
                              .disk_bytes = 1 << 20,
                              .fs_known = true,
                              .fs_avail_bytes = 5000000000ULL,
                              .fs_size_bytes = 20000000000ULL};
    bq_histogram_observe(&bl.fsync, 300000);     /* 0.3 ms */
    bq_histogram_observe(&bl.fsync, 2000000000); /* 2 s: +Inf only */
    bq_metrics_process_t pr = {.cpu_seconds = 1.25, .resident_bytes = 1000, .max_fds = 1024};
    bq_metrics_counters_reset();
    bq_metrics_count(BQ_COUNTER_ELECTIONS_WON);
    bq_metrics_count(BQ_COUNTER_BECAME_PRIMARY);
    bq_metrics_source_t src = {.version = "1.2.3",
                               .engine = &eng,
                               .binlog = &bl,
                               .cluster = &st,
                               .process = &pr,
                               .tls_failures_admin = 5,
                               .has_tls_cert = true,
                               .tls_cert_not_after = 1900000000};
    bqp_text_t t;
    render_and_parse(&src, &t);
    assert_true(get(&t, "beanstalkd_ha_build_info{version=\"1.2.3\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_jobs{state=\"ready\"}") == 7);
    assert_true(get(&t, "beanstalkd_ha_commands_total{command=\"put\"}") == 9);
    assert_true(get(&t, "beanstalkd_ha_commands_total{command=\"reserve-with-timeout\"}") == 4);
    assert_true(get(&t, "beanstalkd_ha_tube_jobs{state=\"ready\",tube=\"t\"}") == 7);
    assert_true(get(&t, "beanstalkd_ha_tube_jobs{state=\"buried\",tube=\"q\\\"b\\\\s\\nn\"}") == 2);
    assert_true(get(&t, "beanstalkd_ha_tubes_not_exported") == 1);
    assert_true(get(&t, "beanstalkd_ha_connections_accepted_total") == 11);
    assert_true(get(&t, "beanstalkd_ha_binlog_written_bytes_total") == 4096);
    assert_true(get(&t, "beanstalkd_ha_binlog_fsync_duration_seconds_bucket{le=\"0.0005\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_binlog_fsync_duration_seconds_bucket{le=\"1\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_binlog_fsync_duration_seconds_count") == 2);
    assert_true(fabs(get(&t, "beanstalkd_ha_binlog_fsync_duration_seconds_sum") - 2.0003) < 1e-9);
    assert_true(get(&t, "beanstalkd_ha_role{role=\"primary\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_sync_state{state=\"degraded\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_sync_degraded") == 1);
    assert_true(get(&t, "beanstalkd_ha_standby_connected{standby=\"n3\"}") == 0);
    assert_true(get(&t, "beanstalkd_ha_standby_lag_seconds{standby=\"n2\"}") == 0.25);
    assert_true(get(&t, "beanstalkd_ha_elections_won_total") == 1);
    assert_true(get(&t, "beanstalkd_ha_role_changes_total{to=\"primary\"}") == 1);
    assert_true(get(&t, "beanstalkd_ha_tls_handshake_failures_total{channel=\"admin\"}") == 5);
    assert_true(get(&t, "beanstalkd_ha_binlog_filesystem_avail_bytes") == 5e9);
    assert_true(get(&t, "beanstalkd_ha_binlog_filesystem_size_bytes") == 2e10);
    assert_true(get(&t, "beanstalkd_ha_tls_certificate_expiry_timestamp_seconds") == 1.9e9);
    assert_true(get(&t, "process_cpu_seconds_total") == 1.25);
    assert_true(get(&t, "process_max_fds") == 1024);
    bqp_free(&t);
}

static void single_node_has_no_cluster_families(void **state)
{
    (void)state;
    bq_metrics_tube_t tubes[2] = {0};
    bq_metrics_engine_t eng;
    fill_engine(&eng, tubes);
    bq_metrics_source_t src = {.version = "1", .engine = &eng};
    bqp_text_t t;
    render_and_parse(&src, &t);
    double v;
    assert_true(get(&t, "beanstalkd_ha_jobs{state=\"buried\"}") == 2);
    assert_false(bqp_get(&t, "beanstalkd_ha_role{role=\"primary\"}", &v));
    assert_false(bqp_get(&t, "beanstalkd_ha_binlog_segments", &v));
    assert_false(bqp_get(&t, "process_open_fds", &v));
    assert_false(bqp_get(&t, "beanstalkd_ha_binlog_filesystem_avail_bytes", &v));
    assert_false(bqp_get(&t, "beanstalkd_ha_tls_certificate_expiry_timestamp_seconds", &v));
    assert_true(get(&t, "beanstalkd_ha_tls_handshake_failures_total{channel=\"replication\"}") ==
                0);
    bqp_free(&t);
}

static void engine_read_caps_the_tubes(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int c = h_open(h);
    for (int i = 0; i < BQ_METRICS_MAX_TUBES + 4; i++)
        h_sendf(h, c, "watch t%d\r\n", i);
    h_send(h, c, "use t0\r\nput 5 0 10 1\r\nx\r\n");
    bq_metrics_engine_t m;
    assert_int_equal(bq_metrics_engine_read(h->e, &m), 0);
    assert_int_equal(m.tubes, BQ_METRICS_MAX_TUBES + 5); /* and default */
    assert_int_equal(m.ntube, BQ_METRICS_MAX_TUBES);
    assert_string_equal(m.tube[0].name, "default");
    assert_string_equal(m.tube[1].name, "t0");
    assert_int_equal(m.tube[1].ready, 1);
    assert_int_equal(m.tube[1].urgent, 1);
    assert_int_equal(m.ops[BQ_OP_WATCH], BQ_METRICS_MAX_TUBES + 4);
    assert_int_equal(m.ops[BQ_OP_PUT], 1);
    assert_int_equal(m.ready, 1);
    assert_int_equal(m.connections, 1);
    assert_int_equal(m.producers, 1);
    bq_metrics_source_t src = {.engine = &m};
    bqp_text_t t;
    render_and_parse(&src, &t);
    assert_true(get(&t, "beanstalkd_ha_tubes_not_exported") == 5);
    bqp_free(&t);
    bq_metrics_engine_free(&m);
    h_done(h);
}

static void counters_survive_the_environment_round_trip(void **state)
{
    (void)state;
    bq_metrics_counters_reset();
    for (int i = 0; i < 3; i++)
        bq_metrics_count(BQ_COUNTER_ELECTIONS_STARTED);
    bq_metrics_count(BQ_COUNTER_FENCINGS);
    assert_int_equal(bq_metrics_counters_export_env(), 0);
    bq_metrics_counters_reset();
    assert_int_equal(bq_metrics_counters_import_env(), BQ_COUNTERS);
    assert_null(getenv(BQ_COUNTERS_ENV));
    assert_int_equal(bq_metrics_counter(BQ_COUNTER_ELECTIONS_STARTED), 3);
    assert_int_equal(bq_metrics_counter(BQ_COUNTER_FENCINGS), 1);
    assert_int_equal(bq_metrics_counter(BQ_COUNTER_RESYNCS), 0);
    /* Garbage is skipped, good entries still count. */
    bq_metrics_counters_reset();
    setenv(BQ_COUNTERS_ENV, "fencings=x,nope=3,resyncs=2,=1,elections_won=,resyncs=-1,,", 1);
    assert_int_equal(bq_metrics_counters_import_env(), 1);
    assert_int_equal(bq_metrics_counter(BQ_COUNTER_RESYNCS), 2);
    assert_int_equal(bq_metrics_counter(BQ_COUNTER_FENCINGS), 0);
    assert_int_equal(bq_metrics_counters_import_env(), 0); /* unset */
    assert_string_equal(bq_metrics_counter_name(BQ_COUNTER_BECAME_STANDBY), "became_standby");
}

static void histogram_buckets_include_their_bound(void **state)
{
    (void)state;
    bq_histogram_t hg = {0};
    bq_histogram_observe(&hg, 100000);     /* exactly 0.0001 s */
    bq_histogram_observe(&hg, 100001);     /* just above */
    bq_histogram_observe(&hg, -5);         /* clamped to 0 */
    bq_histogram_observe(&hg, 1000000000); /* exactly 1 s */
    assert_int_equal(hg.bucket[0], 2);
    assert_int_equal(hg.bucket[1], 1);
    assert_int_equal(hg.bucket[BQ_HIST_BUCKETS - 1], 1);
    assert_int_equal(hg.bucket[BQ_HIST_BUCKETS], 0);
    assert_int_equal(hg.count, 4);
    assert_true(bq_histogram_bound(0) == 0.0001 && bq_histogram_bound(BQ_HIST_BUCKETS - 1) == 1);
}

static void proc_stat_lines_parse(void **state)
{
    (void)state;
    /* Fields 3..24 after a command name with spaces and parentheses. */
    const char *line = "1234 (a b) (c)) S 1 2 3 4 5 6 7 8 9 10 300 100 0 0 20 0 1 0 "
                       "5000 123456789 250 18446744073709551615 1 1\n";
    bq_metrics_process_t p = {0};
    assert_int_equal(bq_metrics_parse_stat(line, 100, 4096, 1700000000, &p), 0);
    assert_true(p.cpu_seconds == 4.0);
    assert_true(p.start_time_seconds == 1700000050.0);
    assert_int_equal(p.virtual_bytes, 123456789);
    assert_int_equal(p.resident_bytes, 250 * 4096);
    assert_int_equal(bq_metrics_parse_stat("1234 (x) S 1 2 3\n", 100, 4096, 0, &p), -1);
    assert_int_equal(bq_metrics_parse_stat("no parenthesis", 100, 4096, 0, &p), -1);
    assert_int_equal(bq_metrics_process_read(&p), 0);
    assert_true(p.resident_bytes > 0 && p.open_fds >= 3 && p.start_time_seconds > 1e9);
}

static void binlog_filesystem_is_statvfs(void **state)
{
    (void)state;
    char dir[] = "/tmp/bq-metrics-fs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    bq_metrics_binlog_t m = {0};
    assert_int_equal(bq_metrics_filesystem_read(dir, &m), 0);
    struct statvfs fs;
    assert_int_equal(statvfs(dir, &fs), 0);
    assert_true(m.fs_known);
    assert_int_equal(m.fs_size_bytes, (uint64_t)fs.f_blocks * fs.f_frsize);
    assert_true(m.fs_size_bytes > 0 && m.fs_avail_bytes <= m.fs_size_bytes);
    /* Free space moves as others write: within 64 MiB of a second look. */
    uint64_t avail = (uint64_t)fs.f_bavail * fs.f_frsize;
    assert_true(m.fs_avail_bytes + (64u << 20) >= avail && avail + (64u << 20) >= m.fs_avail_bytes);
    bq_metrics_source_t src = {.binlog = &m};
    bqp_text_t t;
    render_and_parse(&src, &t);
    assert_true(get(&t, "beanstalkd_ha_binlog_filesystem_size_bytes") == (double)m.fs_size_bytes);
    bqp_free(&t);
    assert_int_equal(rmdir(dir), 0);
    /* A directory that is gone: no figures, and no families. */
    assert_int_equal(bq_metrics_filesystem_read(dir, &m), -1);
    assert_false(m.fs_known);
    render_and_parse(&src, &t);
    double v;
    assert_false(bqp_get(&t, "beanstalkd_ha_binlog_filesystem_avail_bytes", &v));
    assert_true(get(&t, "beanstalkd_ha_binlog_segments") == 0);
    bqp_free(&t);
}

static void certificate_expiry_is_its_not_after(void **state)
{
    (void)state;
    int64_t not_after = 0;
    /* No context made yet in this process: no TLS, no figure. */
    assert_false(bq_tls_certificate_expiry(&not_after));
    char dir[] = "/tmp/bq-metrics-tls-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[512], cert[128], key[128], ca[128];
    snprintf(cmd, sizeof cmd, "'%s' '%s' n1", BQ_MKCERTS, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cert, sizeof cert, "%s/n1.pem", dir);
    snprintf(key, sizeof key, "%s/n1.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    bq_tls_files_t files = {.cert = cert, .key = key, .ca = ca};
    char err[256];
    time_t before = time(NULL);
    SSL_CTX *ctx = bq_tls_ctx_new(true, &files, err, sizeof err);
    if (!ctx)
        fail_msg("%s", err);
    assert_true(bq_tls_certificate_expiry(&not_after));
    /* deploy/mkcerts signs for 825 days from now (the minute may turn). */
    int64_t expect = (int64_t)before + 825LL * 86400;
    assert_true(not_after >= expect - 120 && not_after <= expect + 120);
    bq_metrics_source_t src = {.has_tls_cert = true, .tls_cert_not_after = not_after};
    bqp_text_t t;
    render_and_parse(&src, &t);
    assert_true(get(&t, "beanstalkd_ha_tls_certificate_expiry_timestamp_seconds") ==
                (double)not_after);
    bqp_free(&t);
    SSL_CTX_free(ctx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(primary_text_is_valid_with_its_values),
        cmocka_unit_test(single_node_has_no_cluster_families),
        cmocka_unit_test(engine_read_caps_the_tubes),
        cmocka_unit_test(counters_survive_the_environment_round_trip),
        cmocka_unit_test(histogram_buckets_include_their_bound),
        cmocka_unit_test(proc_stat_lines_parse),
        cmocka_unit_test(binlog_filesystem_is_statvfs),
        cmocka_unit_test(certificate_expiry_is_its_not_after),
    };
    return cmocka_run_group_tests_name("node_metrics", tests, NULL, NULL);
}
