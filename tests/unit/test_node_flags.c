/* Unit tests of node/flags.c, the command-line parser. The first group
 * ports every optparse case of beanstalkd's testutil.c (reference report
 * section 4.3); the rest cover the error messages and exit actions of
 * util.c, the sscanf("%zu%c") size rules and the long options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "node/flags.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static bq_flags_t f;

static bq_flags_action_t parse(int argc, char *const *argv)
{
    memset(&f, 0x5a, sizeof f); /* every field must be set by the parser */
    return bq_flags_parse(&f, argc, argv);
}

static void opt_none(void **state)
{
    (void)state;
    assert_int_equal(parse(0, NULL), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "11300");
    assert_null(f.addr);
    assert_false(f.addr_given);
    assert_false(f.port_given);
    assert_int_equal(f.max_job_size, 65535);
    assert_int_equal(f.binlog_size, 10485760);
    assert_true(f.want_sync);
    assert_int_equal(f.fsync_ms, 50);
    assert_null(f.user);
    assert_null(f.binlog_dir);
    assert_null(f.import_dir);
    assert_false(f.import_accept_prefix);
    assert_false(f.skip_corrupt);
    assert_int_equal(f.verbose, 0);
    assert_int_equal(f.warnings, 0);
}

static void optminus(void **state)
{
    char *argv[] = {"-"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown argument: -");
}

static void optp(void **state)
{
    char *argv[] = {"-p1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "1234");
    assert_true(f.port_given);
}

static void optl(void **state)
{
    char *argv[] = {"-llocalhost"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.addr, "localhost");
    assert_true(f.addr_given);
}

static void optlseparate(void **state)
{
    char *argv[] = {"-l", "localhost"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.addr, "localhost");
}

static void optz(void **state)
{
    char *argv[] = {"-z1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.max_job_size, 1234);
    assert_int_equal(f.warnings, 0);
}

static void optz_more_than_max(void **state)
{
    char *argv[] = {"-z1073741825"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.max_job_size, 1073741824);
    assert_int_equal(f.warnings, BQ_FLAGS_WARN_Z_CLAMPED);
    assert_string_equal(bq_flags_warning(BQ_FLAGS_WARN_Z_CLAMPED),
                        "maximum job size was set to 1073741824");
}

static void opts(void **state)
{
    char *argv[] = {"-s1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.binlog_size, 1234);
}

static void optf(void **state)
{
    char *argv[] = {"-f1234"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.fsync_ms, 1234);
    assert_true(f.want_sync);
}

static void optF(void **state)
{
    char *argv[] = {"-f1234", "-F"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_false(f.want_sync);
}

static void optF_then_f(void **state)
{
    char *argv[] = {"-F", "-f", "0"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_true(f.want_sync);
    assert_int_equal(f.fsync_ms, 0);
}

static void optu(void **state)
{
    char *argv[] = {"-ukr"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.user, "kr");
}

static void optb(void **state)
{
    char *argv[] = {"-bfoo"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.binlog_dir, "foo");
}

static void optV(void **state)
{
    char *argv[] = {"-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 1);
}

static void optV_V(void **state)
{
    char *argv[] = {"-V", "-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 2);
}

static void optVVV(void **state)
{
    char *argv[] = {"-VVV"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 3);
}

static void optVFVu(void **state)
{
    char *argv[] = {"-VFVukr"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.verbose, 2);
    assert_false(f.want_sync);
    assert_string_equal(f.user, "kr");
}

static void unknown_flag(void **state)
{
    char *argv[] = {"-V", "-x", "-p"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown flag: -x");
}

static void unknown_flag_in_group(void **state)
{
    char *argv[] = {"-VqV"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown flag: -q");
}

static void missing_argument(void **state)
{
    char *argv[] = {"-V", "-p"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: -p");
}

static void missing_argument_in_group(void **state)
{
    char *argv[] = {"-Vl"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: -l");
}

static void unknown_argument(void **state)
{
    char *argv[] = {"-V", "foo", "-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown argument: foo");
}

static void separate_argument_may_look_like_a_flag(void **state)
{
    char *argv[] = {"-p", "-V"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "-V");
    assert_int_equal(f.verbose, 0);
}

static void invalid_sizes(void **state)
{
    const char *bad[] = {"12k", "", "x", "12 ", "1.5", "0x10"};
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {"-z", (char *)bad[i]};
        char want[64];
        assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_USAGE);
        snprintf(want, sizeof want, "invalid size: %s", bad[i]);
        assert_string_equal(f.error, want);
    }
}

static void sizes_read_like_sscanf(void **state)
{
    char *argv[] = {"-s", " 42", "-z", "+7"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.binlog_size, 42);
    assert_int_equal(f.max_job_size, 7);
}

static void help_and_version(void **state)
{
    char *h[] = {"-V", "-h", "-x"};
    char *v[] = {"-Vv"};
    char *late[] = {"-x", "-h"};
    (void)state;
    assert_int_equal(parse(ARGC(h), h), BQ_FLAGS_HELP);
    assert_int_equal(parse(ARGC(v), v), BQ_FLAGS_VERSION);
    assert_int_equal(parse(ARGC(late), late), BQ_FLAGS_USAGE);
}

static void removed_flags_warn(void **state)
{
    char *argv[] = {"-c", "-n", "-c"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_int_equal(f.warnings, BQ_FLAGS_WARN_C_REMOVED | BQ_FLAGS_WARN_N_REMOVED);
    assert_string_equal(bq_flags_warning(BQ_FLAGS_WARN_C_REMOVED),
                        "-c flag was removed. binlog is always compacted.");
}

static void long_options(void **state)
{
    char *argv[] = {"--port=1234", "--listen",          "::1",    "--verbose",
                    "--no-fsync",  "--max-job-size=99", "--user", "kr"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_string_equal(f.port, "1234");
    assert_string_equal(f.addr, "::1");
    assert_int_equal(f.verbose, 1);
    assert_false(f.want_sync);
    assert_int_equal(f.max_job_size, 99);
    assert_string_equal(f.user, "kr");
}

static void long_option_errors(void **state)
{
    char *unknown[] = {"--role=primary"};
    char *noarg[] = {"--help=yes"};
    char *missing[] = {"--port"};
    char *prefix[] = {"--hel"};
    char *bare[] = {"--"};
    char *badsize[] = {"--binlog-size=1M"};
    char *help[] = {"--help"};
    char *version[] = {"--version"};
    (void)state;
    assert_int_equal(parse(ARGC(unknown), unknown), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "unknown flag: --role=primary");
    assert_int_equal(parse(ARGC(noarg), noarg), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag does not take an argument: --help=yes");
    assert_int_equal(parse(ARGC(missing), missing), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: --port");
    assert_int_equal(parse(ARGC(prefix), prefix), BQ_FLAGS_USAGE);
    assert_int_equal(parse(ARGC(bare), bare), BQ_FLAGS_USAGE);
    assert_int_equal(parse(ARGC(badsize), badsize), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "invalid size: 1M");
    assert_int_equal(parse(ARGC(help), help), BQ_FLAGS_HELP);
    assert_int_equal(parse(ARGC(version), version), BQ_FLAGS_VERSION);
}

static void long_only_switch(void **state)
{
    char *argv[] = {"-b", "/tmp", "--binlog-skip-corrupt", "-f0"};
    char *witharg[] = {"--binlog-skip-corrupt=yes"};
    char *asshort[] = {"-binlog-skip-corrupt"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_RUN);
    assert_true(f.skip_corrupt);
    assert_string_equal(f.binlog_dir, "/tmp");
    assert_int_equal(f.fsync_ms, 0);
    assert_int_equal(parse(ARGC(witharg), witharg), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag does not take an argument: --binlog-skip-corrupt=yes");
    /* A short flag group is not a way in: -b takes "inlog-skip-corrupt". */
    assert_int_equal(parse(ARGC(asshort), asshort), BQ_FLAGS_RUN);
    assert_false(f.skip_corrupt);
}

static void import_options(void **state)
{
    char *argv[] = {"--import-beanstalkd", "/src", "-b", "/dst", "--import-accept-prefix"};
    char *eq[] = {"-b/dst", "--import-beanstalkd=/src dir"};
    char *no_b[] = {"--import-beanstalkd", "/src"};
    char *missing[] = {"-b", "/dst", "--import-beanstalkd"};
    char *prefix_alone[] = {"-b", "/dst", "--import-accept-prefix"};
    (void)state;
    assert_int_equal(parse(ARGC(argv), argv), BQ_FLAGS_IMPORT);
    assert_string_equal(f.import_dir, "/src");
    assert_string_equal(f.binlog_dir, "/dst");
    assert_true(f.import_accept_prefix);
    assert_int_equal(parse(ARGC(eq), eq), BQ_FLAGS_IMPORT);
    assert_string_equal(f.import_dir, "/src dir");
    assert_false(f.import_accept_prefix);
    assert_int_equal(parse(ARGC(no_b), no_b), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires -b DIR (the destination): --import-beanstalkd");
    assert_int_equal(parse(ARGC(missing), missing), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires an argument: --import-beanstalkd");
    assert_int_equal(parse(ARGC(prefix_alone), prefix_alone), BQ_FLAGS_USAGE);
    assert_string_equal(f.error, "flag requires --import-beanstalkd: --import-accept-prefix");
}

static void usage_mentions_every_flag(void **state)
{
    char buf[4096] = {0};
    FILE *mem = fmemopen(buf, sizeof buf - 1, "w");
    (void)state;
    assert_non_null(mem);
    bq_flags_usage(mem, "prog");
    fclose(mem);
    assert_non_null(strstr(buf, "Use: prog [OPTIONS]"));
    for (const char *p = "bfFlpuzsvVh"; *p; p++) {
        char flag[4] = {' ', '-', *p, '\0'};
        assert_non_null(strstr(buf, flag));
    }
    assert_non_null(strstr(buf, "--binlog-skip-corrupt"));
    assert_non_null(strstr(buf, "--import-beanstalkd SRC_DIR"));
    assert_non_null(strstr(buf, "--import-accept-prefix"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(opt_none),
        cmocka_unit_test(optminus),
        cmocka_unit_test(optp),
        cmocka_unit_test(optl),
        cmocka_unit_test(optlseparate),
        cmocka_unit_test(optz),
        cmocka_unit_test(optz_more_than_max),
        cmocka_unit_test(opts),
        cmocka_unit_test(optf),
        cmocka_unit_test(optF),
        cmocka_unit_test(optF_then_f),
        cmocka_unit_test(optu),
        cmocka_unit_test(optb),
        cmocka_unit_test(optV),
        cmocka_unit_test(optV_V),
        cmocka_unit_test(optVVV),
        cmocka_unit_test(optVFVu),
        cmocka_unit_test(unknown_flag),
        cmocka_unit_test(unknown_flag_in_group),
        cmocka_unit_test(missing_argument),
        cmocka_unit_test(missing_argument_in_group),
        cmocka_unit_test(unknown_argument),
        cmocka_unit_test(separate_argument_may_look_like_a_flag),
        cmocka_unit_test(invalid_sizes),
        cmocka_unit_test(sizes_read_like_sscanf),
        cmocka_unit_test(help_and_version),
        cmocka_unit_test(removed_flags_warn),
        cmocka_unit_test(long_options),
        cmocka_unit_test(long_option_errors),
        cmocka_unit_test(long_only_switch),
        cmocka_unit_test(import_options),
        cmocka_unit_test(usage_mentions_every_flag),
    };
    return cmocka_run_group_tests_name("node_flags", tests, NULL, NULL);
}
