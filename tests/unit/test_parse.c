/* Unit tests of protocol/parse.c, the command-line parser.
 *
 * Every expectation goes through parse_checked(), which parses the line four
 * times: from an exact-size heap copy (so ASan or valgrind flag any read past
 * len) and from copies followed by '9', ' ' and NUL bytes. All four results
 * must agree, which proves that no byte after len influences the outcome.
 * The expected results come from beanstalkd 1.13's prot.c and the verified
 * examples of the reference report (sections 1.2-1.5). A last group compares
 * the parser with an independent model built on the libc functions that
 * beanstalkd itself uses (strncmp, strtoumax, strtoul, strspn), over prefixes
 * of valid lines and over many generated lines. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/parse.h"

#define LINE_CAP 1024
#define TAIL 16

typedef struct {
    bq_parse_status_t st;
    bq_cmd_t cmd;
    size_t name_off; /* cmd.name - line, or SIZE_MAX when there is no name */
} result_t;

/* The line of the last parse_checked() call; returned names point into it. */
static char keep[LINE_CAP + TAIL];

static const char *show(const char *s, size_t len)
{
    static char out[LINE_CAP * 4 + 1];
    size_t o = 0;

    for (size_t i = 0; i < len && o + 5 < sizeof(out); i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", c);
    }
    out[o] = '\0';
    return out;
}

static const char *status_name(bq_parse_status_t st)
{
    switch (st) {
    case BQ_PARSE_OK:
        return "OK";
    case BQ_PARSE_BAD_FORMAT:
        return "BAD_FORMAT";
    case BQ_PARSE_UNKNOWN:
        return "UNKNOWN";
    }
    return "?";
}

static result_t parse_in(const char *line, size_t len, char *buf, size_t tail, char fill)
{
    result_t r;

    if (len > 0)
        memcpy(buf, line, len);
    memset(buf + len, fill, tail);
    r.st = bq_parse_command(buf, len, &r.cmd);
    r.name_off = r.cmd.name == NULL ? SIZE_MAX : (size_t)(r.cmd.name - buf);
    return r;
}

static bool same_result(const result_t *a, const result_t *b)
{
    return a->st == b->st && a->cmd.op == b->cmd.op && a->cmd.id == b->cmd.id &&
           a->cmd.pri == b->cmd.pri && a->cmd.delay == b->cmd.delay && a->cmd.ttr == b->cmd.ttr &&
           a->cmd.bytes == b->cmd.bytes && a->cmd.count == b->cmd.count &&
           a->cmd.timeout == b->cmd.timeout && a->cmd.put_trailing == b->cmd.put_trailing &&
           a->name_off == b->name_off && a->cmd.name_len == b->cmd.name_len;
}

static void describe(const char *what, const result_t *r)
{
    print_error("  %s: %s op=%s id=%" PRIu64 " pri=%" PRIu32 " delay=%" PRIu32 " ttr=%" PRIu32
                " bytes=%" PRIu32 " count=%" PRIu32 " timeout=%" PRId32
                " trailing=%d name_off=%zu name_len=%zu\n",
                what, status_name(r->st), bq_op_name(r->cmd.op), r->cmd.id, r->cmd.pri,
                r->cmd.delay, r->cmd.ttr, r->cmd.bytes, r->cmd.count, r->cmd.timeout,
                (int)r->cmd.put_trailing, r->name_off, r->cmd.name_len);
}

/* Fails unless every field that op does not use holds its defined value. */
static void check_unused_fields(const char *line, size_t len, const result_t *r, int at)
{
    const bq_cmd_t *c = &r->cmd;
    bq_op_t op = c->op;
    bool ok = r->st == BQ_PARSE_OK;
    bool uses_id = op == BQ_OP_PEEK || op == BQ_OP_RESERVE_JOB || op == BQ_OP_DELETE ||
                   op == BQ_OP_RELEASE || op == BQ_OP_BURY || op == BQ_OP_KICK_JOB ||
                   op == BQ_OP_TOUCH || op == BQ_OP_STATS_JOB;
    bool uses_pri = op == BQ_OP_PUT || op == BQ_OP_RELEASE || op == BQ_OP_BURY;
    bool uses_delay = op == BQ_OP_PUT || op == BQ_OP_RELEASE || op == BQ_OP_PAUSE_TUBE;
    bool uses_name = op == BQ_OP_USE || op == BQ_OP_WATCH || op == BQ_OP_IGNORE ||
                     op == BQ_OP_STATS_TUBE || op == BQ_OP_PAUSE_TUBE;
    int32_t want_timeout = op == BQ_OP_RESERVE ? -1 : 0;

    if ((c->id != 0 && !(ok && uses_id)) || (c->pri != 0 && !(ok && uses_pri)) ||
        (c->delay != 0 && !(ok && uses_delay)) ||
        ((c->ttr != 0 || c->bytes != 0 || c->put_trailing) && !(ok && op == BQ_OP_PUT)) ||
        (c->count != 0 && !(ok && op == BQ_OP_KICK)) ||
        (c->timeout != want_timeout && !(ok && op == BQ_OP_RESERVE_TIMEOUT)) ||
        ((c->name != NULL || c->name_len != 0) && !(ok && uses_name))) {
        describe("got", r);
        fail_msg("line %d: \"%s\": a field unused by %s is not at its default", at, show(line, len),
                 bq_op_name(op));
    }
    if (c->name != NULL && r->name_off + c->name_len > len)
        fail_msg("line %d: \"%s\": name reaches past the line", at, show(line, len));
}

/* Parses line[0..len) from four buffers (see the file comment), fails the
 * test unless they agree, and returns the result whose name lives in keep. */
static result_t parse_checked(const char *line, size_t len, int at)
{
    char *exact;
    char tmp[LINE_CAP + TAIL];
    result_t heap, nines, spaces, nuls;

    assert_true(len <= LINE_CAP);
    exact = malloc(len > 0 ? len : 1);
    assert_non_null(exact);
    heap = parse_in(line, len, exact, 0, 0);
    free(exact);
    spaces = parse_in(line, len, tmp, TAIL, ' ');
    nuls = parse_in(line, len, tmp, TAIL, '\0');
    nines = parse_in(line, len, keep, TAIL, '9');
    if (!same_result(&heap, &nines) || !same_result(&heap, &spaces) || !same_result(&heap, &nuls)) {
        describe("exact", &heap);
        describe("+9s  ", &nines);
        describe("+' ' ", &spaces);
        describe("+NUL ", &nuls);
        fail_msg("line %d: \"%s\": the bytes after len change the result", at, show(line, len));
    }
    check_unused_fields(line, len, &nines, at);
    return nines;
}

static bq_cmd_t expect_result(const char *line, size_t len, bq_parse_status_t st, bq_op_t op,
                              int at)
{
    result_t r = parse_checked(line, len, at);

    if (r.st != st || r.cmd.op != op) {
        describe("got", &r);
        fail_msg("line %d: \"%s\": want %s op=%s", at, show(line, len), status_name(st),
                 bq_op_name(op));
    }
    return r.cmd;
}

#define EXPECT_OK(s, op) expect_result((s), strlen(s), BQ_PARSE_OK, (op), __LINE__)
#define EXPECT_BAD(s, op) expect_result((s), strlen(s), BQ_PARSE_BAD_FORMAT, (op), __LINE__)
#define EXPECT_UNKNOWN(s) expect_result((s), strlen(s), BQ_PARSE_UNKNOWN, BQ_OP_UNKNOWN, __LINE__)
/* For string literals that contain NUL bytes. */
#define EXPECT_LIT(lit, st, op) expect_result((lit), sizeof(lit) - 1, (st), (op), __LINE__)

static void expect_name(const bq_cmd_t *c, const char *name, size_t off)
{
    assert_non_null(c->name);
    assert_ptr_equal(c->name, keep + off);
    assert_int_equal(c->name_len, strlen(name));
    assert_memory_equal(c->name, name, c->name_len);
}

/* Builds "<prefix><n copies of ch><suffix>" in out. */
static const char *build(char *out, const char *prefix, size_t n, char ch, const char *suffix)
{
    size_t p = strlen(prefix);

    assert_true(p + n + strlen(suffix) < LINE_CAP);
    memcpy(out, prefix, p);
    memset(out + p, ch, n);
    strcpy(out + p + n, suffix);
    return out;
}

/* ---- command recognition ---- */

static void parse_empty_line_is_unknown(void **state)
{
    bq_cmd_t c;

    (void)state;
    EXPECT_UNKNOWN("");
    assert_int_equal(bq_parse_command(NULL, 0, &c), BQ_PARSE_UNKNOWN);
    assert_int_equal(c.op, BQ_OP_UNKNOWN);
}

static void parse_commands_are_case_sensitive(void **state)
{
    (void)state;
    EXPECT_UNKNOWN("PUT 0 0 0 1");
    EXPECT_UNKNOWN("Delete 1");
    EXPECT_UNKNOWN("QUIT");
    EXPECT_UNKNOWN("Reserve");
    EXPECT_UNKNOWN("STATS");
}

static void parse_names_without_their_space_are_unknown(void **state)
{
    static const char *const lines[] = {
        "put", "peek",  "delete", "release", "bury",  "kick",    "kick-job", "touch",
        "use", "watch", "ignore", "putx",    "peekx", "deletex", "kickx",    "usex",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_UNKNOWN(lines[i]);
}

static void parse_tab_is_not_a_separator(void **state)
{
    (void)state;
    EXPECT_UNKNOWN("put\t1 0 10 1");
    EXPECT_UNKNOWN("delete\t1");
    EXPECT_UNKNOWN("use\tfoo");
    EXPECT_UNKNOWN("kick\t1");
}

static void parse_unrecognised_words_are_unknown(void **state)
{
    (void)state;
    EXPECT_UNKNOWN("foo");
    EXPECT_UNKNOWN(" put 1 0 10 1");
    EXPECT_UNKNOWN(" quit");
    EXPECT_UNKNOWN("qui");
    EXPECT_UNKNOWN("quiet");
    EXPECT_UNKNOWN("pause-tub");
    EXPECT_UNKNOWN("list-tube-use");
    EXPECT_UNKNOWN("list-tube");
    EXPECT_UNKNOWN("peek-1");
    EXPECT_UNKNOWN("reserv");
    EXPECT_UNKNOWN("stat");
    EXPECT_UNKNOWN("\x01");
    EXPECT_UNKNOWN("\xff\xfe");
}

static void parse_nul_byte_is_bad_format_with_unknown_op(void **state)
{
    (void)state;
    EXPECT_LIT("\0", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("delete 1\0", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("delete \0"
               "1",
               BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("quit\0", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("\0quit", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("foo\0bar", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("use foo\0", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("kick 5\0abc", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
    EXPECT_LIT("reserve-with-timeout 5\0", BQ_PARSE_BAD_FORMAT, BQ_OP_UNKNOWN);
}

static void parse_prefix_order_decides_the_command(void **state)
{
    static const struct {
        const char *line;
        bq_parse_status_t st;
        bq_op_t op;
    } cases[] = {
        {"reserve-with-timeout", BQ_PARSE_BAD_FORMAT, BQ_OP_RESERVE},
        {"reserve-job", BQ_PARSE_BAD_FORMAT, BQ_OP_RESERVE},
        {"reserve-job 1", BQ_PARSE_OK, BQ_OP_RESERVE_JOB},
        {"reserve-with-timeout 1", BQ_PARSE_OK, BQ_OP_RESERVE_TIMEOUT},
        {"reserve ", BQ_PARSE_BAD_FORMAT, BQ_OP_RESERVE},
        {"reservex", BQ_PARSE_BAD_FORMAT, BQ_OP_RESERVE},
        {"reserve 5", BQ_PARSE_BAD_FORMAT, BQ_OP_RESERVE},
        {"stats-tube", BQ_PARSE_BAD_FORMAT, BQ_OP_STATS},
        {"stats-job", BQ_PARSE_BAD_FORMAT, BQ_OP_STATS},
        {"stats-jobs 1", BQ_PARSE_BAD_FORMAT, BQ_OP_STATS},
        {"stats-tubes foo", BQ_PARSE_BAD_FORMAT, BQ_OP_STATS},
        {"statsx", BQ_PARSE_BAD_FORMAT, BQ_OP_STATS},
        {"stats ", BQ_PARSE_BAD_FORMAT, BQ_OP_STATS},
        {"list-tubesx", BQ_PARSE_BAD_FORMAT, BQ_OP_LIST_TUBES},
        {"list-tubes-watche", BQ_PARSE_BAD_FORMAT, BQ_OP_LIST_TUBES},
        {"list-tubes-watchedx", BQ_PARSE_BAD_FORMAT, BQ_OP_LIST_TUBES_WATCHED},
        {"list-tube-usedx", BQ_PARSE_BAD_FORMAT, BQ_OP_LIST_TUBE_USED},
        {"peek-readyx", BQ_PARSE_BAD_FORMAT, BQ_OP_PEEK_READY},
        {"peek-delayedx", BQ_PARSE_BAD_FORMAT, BQ_OP_PEEK_DELAYED},
        {"peek-buriedx", BQ_PARSE_BAD_FORMAT, BQ_OP_PEEK_BURIED},
        {"peek-ready 1", BQ_PARSE_BAD_FORMAT, BQ_OP_PEEK_READY},
        {"peek ready", BQ_PARSE_BAD_FORMAT, BQ_OP_PEEK},
        {"kick-job 5", BQ_PARSE_OK, BQ_OP_KICK_JOB},
        {"kick -job", BQ_PARSE_BAD_FORMAT, BQ_OP_KICK},
        {"kick job", BQ_PARSE_BAD_FORMAT, BQ_OP_KICK},
        {"delete ", BQ_PARSE_BAD_FORMAT, BQ_OP_DELETE},
        {"kick-job ", BQ_PARSE_BAD_FORMAT, BQ_OP_KICK_JOB},
        {"quitxyz", BQ_PARSE_OK, BQ_OP_QUIT},
        {"quit garbage", BQ_PARSE_OK, BQ_OP_QUIT},
        {"pause-tubedefault 1", BQ_PARSE_OK, BQ_OP_PAUSE_TUBE},
        {"put  1  0  10  1", BQ_PARSE_OK, BQ_OP_PUT},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_result(cases[i].line, strlen(cases[i].line), cases[i].st, cases[i].op, __LINE__);
}

/* ---- argument-less commands ---- */

static void parse_argumentless_commands_need_exact_length(void **state)
{
    static const struct {
        const char *name;
        bq_op_t op;
    } cases[] = {
        {"peek-ready", BQ_OP_PEEK_READY},
        {"peek-delayed", BQ_OP_PEEK_DELAYED},
        {"peek-buried", BQ_OP_PEEK_BURIED},
        {"stats", BQ_OP_STATS},
        {"list-tubes", BQ_OP_LIST_TUBES},
        {"list-tube-used", BQ_OP_LIST_TUBE_USED},
        {"list-tubes-watched", BQ_OP_LIST_TUBES_WATCHED},
        {"reserve", BQ_OP_RESERVE},
    };
    static const char *const tails[] = {" ", "x", "  ", " 1", "\t", "\v", "0", "-"};
    char line[LINE_CAP];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expect_result(cases[i].name, strlen(cases[i].name), BQ_PARSE_OK, cases[i].op, __LINE__);
        for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++) {
            build(line, cases[i].name, 0, 0, tails[t]);
            expect_result(line, strlen(line), BQ_PARSE_BAD_FORMAT, cases[i].op, __LINE__);
        }
    }
}

static void parse_reserve_has_infinite_timeout(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("reserve", BQ_OP_RESERVE);
    assert_int_equal(c.timeout, -1);
    c = EXPECT_BAD("reserve ", BQ_OP_RESERVE);
    assert_int_equal(c.timeout, -1);
}

static void parse_quit_ignores_the_rest_of_the_line(void **state)
{
    (void)state;
    EXPECT_OK("quit", BQ_OP_QUIT);
    EXPECT_OK("quitxyz", BQ_OP_QUIT);
    EXPECT_OK("quit garbage", BQ_OP_QUIT);
    EXPECT_OK("quit ", BQ_OP_QUIT);
    EXPECT_OK("quit\x01\xff", BQ_OP_QUIT);
}

/* ---- put ---- */

static void parse_put_reads_four_fields(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("put 1 2 3 4", BQ_OP_PUT);
    assert_int_equal(c.pri, 1);
    assert_int_equal(c.delay, 2);
    assert_int_equal(c.ttr, 3);
    assert_int_equal(c.bytes, 4);
    assert_false(c.put_trailing);
}

static void parse_put_accepts_extra_spaces(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("put  1  0  10  1", BQ_OP_PUT);
    assert_int_equal(c.pri, 1);
    assert_int_equal(c.delay, 0);
    assert_int_equal(c.ttr, 10);
    assert_int_equal(c.bytes, 1);
    assert_false(c.put_trailing);
}

static void parse_put_accepts_leading_zeros(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("put 0001 0 010 1", BQ_OP_PUT);
    assert_int_equal(c.pri, 1);
    assert_int_equal(c.ttr, 10);
    assert_int_equal(c.bytes, 1);
}

static void parse_put_keeps_zero_ttr(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("put 0 0 0 0", BQ_OP_PUT);
    assert_int_equal(c.ttr, 0);
    assert_int_equal(c.bytes, 0);
}

static void parse_put_accepts_u32_limits(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("put 4294967295 4294967295 4294967295 4294967295", BQ_OP_PUT);
    assert_int_equal(c.pri, UINT32_MAX);
    assert_int_equal(c.delay, UINT32_MAX);
    assert_int_equal(c.ttr, UINT32_MAX);
    assert_int_equal(c.bytes, UINT32_MAX);
}

static void parse_put_rejects_values_above_u32(void **state)
{
    (void)state;
    EXPECT_BAD("put 4294967296 0 10 1", BQ_OP_PUT);
    EXPECT_BAD("put 0 4294967296 10 1", BQ_OP_PUT);
    EXPECT_BAD("put 0 0 4294967296 1", BQ_OP_PUT);
    EXPECT_BAD("put 0 0 10 4294967296", BQ_OP_PUT);
    EXPECT_BAD("put 18446744073709551616 0 10 1", BQ_OP_PUT);
    EXPECT_BAD("put 0 0 10 99999999999999999999999", BQ_OP_PUT);
}

static void parse_put_rejects_malformed_fields(void **state)
{
    static const char *const lines[] = {
        "put ",          "put 1",         "put 1 2",       "put 1 2 3",       "put 1 2 3 ",
        "put +1 0 10 1", "put -1 0 10 1", "put 1 -0 10 1", "put 0x10 0 10 1", "put 1 0 10 x",
        "put 1\t0 10 1", "put 1 0 10 +1", "put a 0 10 1",  "put 1,0,10,1",    "put 1 0 10\t1",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_BAD(lines[i], BQ_OP_PUT);
}

static void parse_put_trailing_text_sets_flag(void **state)
{
    static const char *const lines[] = {
        "put 0 0 0 1 ", "put 0 0 0 1x", "put 0 0 0 1 2", "put 0 0 0 1\t", "put 0 0 0 1.5",
    };
    bq_cmd_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        c = EXPECT_OK(lines[i], BQ_OP_PUT);
        assert_true(c.put_trailing);
        assert_int_equal(c.bytes, 1);
    }
    /* A huge body size with trailing text: the engine answers JOB_TOO_BIG. */
    c = EXPECT_OK("put 1 0 10 99999999 garbage", BQ_OP_PUT);
    assert_int_equal(c.bytes, 99999999);
    assert_true(c.put_trailing);
}

/* ---- commands taking one id ---- */

static const struct {
    const char *prefix;
    bq_op_t op;
} id_cmds[] = {
    {"peek ", BQ_OP_PEEK},
    {"delete ", BQ_OP_DELETE},
    {"touch ", BQ_OP_TOUCH},
    {"kick-job ", BQ_OP_KICK_JOB},
    {"reserve-job ", BQ_OP_RESERVE_JOB},
    {"stats-job ", BQ_OP_STATS_JOB},
};

static void parse_id_commands_read_u64(void **state)
{
    static const struct {
        const char *arg;
        uint64_t id;
    } ok[] = {
        {"42", 42},
        {" 1", 1},
        {"  1", 1},
        {"007", 7},
        {"0", 0},
        {"18446744073709551615", UINT64_MAX},
        {"4294967296", 4294967296u},
    };
    char line[LINE_CAP];
    bq_cmd_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(id_cmds) / sizeof(id_cmds[0]); i++) {
        for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
            build(line, id_cmds[i].prefix, 0, 0, ok[k].arg);
            c = expect_result(line, strlen(line), BQ_PARSE_OK, id_cmds[i].op, __LINE__);
            assert_int_equal(c.id, ok[k].id);
        }
    }
}

static void parse_id_commands_reject_malformed_ids(void **state)
{
    static const char *const bad[] = {
        "",
        " ",
        "1 ",
        "+1",
        "-1",
        "0x10",
        "1a",
        "1 2",
        "\t1",
        "1\t",
        "a",
        "18446744073709551616",
        "99999999999999999999999",
        "1.0",
    };
    char line[LINE_CAP];

    (void)state;
    for (size_t i = 0; i < sizeof(id_cmds) / sizeof(id_cmds[0]); i++) {
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
            build(line, id_cmds[i].prefix, 0, 0, bad[k]);
            expect_result(line, strlen(line), BQ_PARSE_BAD_FORMAT, id_cmds[i].op, __LINE__);
        }
    }
}

static void parse_reference_integer_examples(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("delete  1", BQ_OP_DELETE);
    assert_int_equal(c.id, 1);
    EXPECT_BAD("delete 1 ", BQ_OP_DELETE);
    EXPECT_BAD("delete ", BQ_OP_DELETE);
    c = EXPECT_OK("peek 18446744073709551615", BQ_OP_PEEK);
    assert_int_equal(c.id, UINT64_MAX);
    EXPECT_BAD("peek 18446744073709551616", BQ_OP_PEEK);
    EXPECT_BAD("peek 0x10", BQ_OP_PEEK);
    EXPECT_BAD("peek +1", BQ_OP_PEEK);
    EXPECT_BAD("peek -1", BQ_OP_PEEK);
}

/* ---- release and bury ---- */

static void parse_release_reads_id_pri_delay(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("release 5 10 20", BQ_OP_RELEASE);
    assert_int_equal(c.id, 5);
    assert_int_equal(c.pri, 10);
    assert_int_equal(c.delay, 20);
    c = EXPECT_OK("release  18446744073709551615  4294967295  4294967295", BQ_OP_RELEASE);
    assert_int_equal(c.id, UINT64_MAX);
    assert_int_equal(c.pri, UINT32_MAX);
    assert_int_equal(c.delay, UINT32_MAX);
}

static void parse_release_rejects_malformed_lines(void **state)
{
    static const char *const lines[] = {
        "release ",
        "release 1",
        "release 1 2",
        "release 1 2 ",
        "release 1 2 3 ",
        "release 1 2 3x",
        "release 1 2 3 4",
        "release 1 4294967296 0",
        "release 1 0 4294967296",
        "release 18446744073709551616 0 0",
        "release -1 0 0",
        "release 1 +0 0",
        "release 1 0 -0",
        "release 1\t0 0",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_BAD(lines[i], BQ_OP_RELEASE);
}

static void parse_bury_reads_id_pri(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("bury 7 100", BQ_OP_BURY);
    assert_int_equal(c.id, 7);
    assert_int_equal(c.pri, 100);
    c = EXPECT_OK("bury 18446744073709551615 4294967295", BQ_OP_BURY);
    assert_int_equal(c.id, UINT64_MAX);
    assert_int_equal(c.pri, UINT32_MAX);
}

static void parse_bury_rejects_malformed_lines(void **state)
{
    static const char *const lines[] = {
        "bury ",      "bury 1",
        "bury 1 ",    "bury 1 2 ",
        "bury 1 2 3", "bury 1 4294967296",
        "bury 1 x",   "bury x 1",
        "bury 1 0x1", "bury 18446744073709551616 1",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_BAD(lines[i], BQ_OP_BURY);
}

/* ---- reserve-with-timeout ---- */

static void parse_reserve_with_timeout_reads_seconds(void **state)
{
    static const struct {
        const char *line;
        int32_t timeout;
    } ok[] = {
        {"reserve-with-timeout 0", 0},  {"reserve-with-timeout 5", 5},
        {"reserve-with-timeout  7", 7}, {"reserve-with-timeout 2147483647", INT32_MAX},
        {"reserve-with-timeout 0x", 0}, {"reserve-with-timeout 10 abc", 10},
        {"reserve-with-timeout 3 ", 3}, {"reserve-with-timeout 0009", 9},
    };
    bq_cmd_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        c = expect_result(ok[i].line, strlen(ok[i].line), BQ_PARSE_OK, BQ_OP_RESERVE_TIMEOUT,
                          __LINE__);
        assert_int_equal(c.timeout, ok[i].timeout);
    }
}

static void parse_reserve_with_timeout_rejects_bad_values(void **state)
{
    static const char *const lines[] = {
        "reserve-with-timeout ",           "reserve-with-timeout  ",
        "reserve-with-timeout -1",         "reserve-with-timeout abc",
        "reserve-with-timeout +1",         "reserve-with-timeout 2147483648",
        "reserve-with-timeout 4294967295", "reserve-with-timeout 4294967296",
        "reserve-with-timeout 4294967297", "reserve-with-timeout 99999999999999999999999",
        "reserve-with-timeout \t1",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_BAD(lines[i], BQ_OP_RESERVE_TIMEOUT);
}

/* ---- kick ---- */

static void parse_kick_follows_strtoul(void **state)
{
    static const struct {
        const char *line;
        uint32_t count;
    } ok[] = {
        {"kick 10", 10},
        {"kick 0", 0},
        {"kick  3", 3},
        {"kick 1abc", 1},
        {"kick 1 2", 1},
        {"kick -1", UINT32_MAX},
        {"kick -0", 0},
        {"kick +5", 5},
        {"kick 4294967295", UINT32_MAX},
        {"kick 4294967296", 0},
        {"kick 4294967297", 1},
        {"kick 18446744073709551615", UINT32_MAX},
        {"kick -18446744073709551615", 1},
        {"kick -4294967296", 0},
        {"kick \t\v\f 5", 5},
        {"kick \n\r7", 7},
        {"kick 0x10", 0},
        {"kick 007", 7},
    };
    bq_cmd_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        c = expect_result(ok[i].line, strlen(ok[i].line), BQ_PARSE_OK, BQ_OP_KICK, __LINE__);
        assert_int_equal(c.count, ok[i].count);
    }
}

static void parse_kick_rejects_no_digits_and_overflow(void **state)
{
    static const char *const lines[] = {
        "kick ",
        "kick  ",
        "kick x",
        "kick -",
        "kick +",
        "kick - 1",
        "kick +-1",
        "kick --1",
        "kick \t",
        "kick .5",
        "kick 99999999999999999999",
        "kick 18446744073709551616",
        "kick -18446744073709551616",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_BAD(lines[i], BQ_OP_KICK);
}

/* ---- tube names ---- */

static const char name_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                 "0123456789-+/;.$_()";

static const struct {
    const char *prefix;
    bq_op_t op;
} name_cmds[] = {
    {"use ", BQ_OP_USE},
    {"watch ", BQ_OP_WATCH},
    {"ignore ", BQ_OP_IGNORE},
    {"stats-tube ", BQ_OP_STATS_TUBE},
};

static void parse_name_commands_take_the_rest_of_the_line(void **state)
{
    static const char *const ok[] = {
        "default", "foo-", "a+b/c;d.e$f_g(h)", "a", "0", "()", "$", "_x", "9-", "/;",
    };
    char line[LINE_CAP];
    bq_cmd_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(name_cmds) / sizeof(name_cmds[0]); i++) {
        size_t off = strlen(name_cmds[i].prefix);
        for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
            build(line, name_cmds[i].prefix, 0, 0, ok[k]);
            c = expect_result(line, strlen(line), BQ_PARSE_OK, name_cmds[i].op, __LINE__);
            expect_name(&c, ok[k], off);
        }
    }
}

static void parse_name_commands_reject_invalid_names(void **state)
{
    static const char *const bad[] = {
        "",        " foo", "foo ", "foo bar", "-abc", "-",   "*",    "foo*", "a\tb", "\xc3\xa9",
        "foo\x7f", "a,b",  "a:b",  "a@b",     "[x]",  "{x}", "a\\b", "a'b",  "a\"b", "~",
    };
    char line[LINE_CAP];

    (void)state;
    for (size_t i = 0; i < sizeof(name_cmds) / sizeof(name_cmds[0]); i++) {
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
            build(line, name_cmds[i].prefix, 0, 0, bad[k]);
            expect_result(line, strlen(line), BQ_PARSE_BAD_FORMAT, name_cmds[i].op, __LINE__);
        }
    }
    EXPECT_BAD("use  foo", BQ_OP_USE);
}

static void parse_name_length_limit_is_200(void **state)
{
    char line[LINE_CAP];
    bq_cmd_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(name_cmds) / sizeof(name_cmds[0]); i++) {
        size_t off = strlen(name_cmds[i].prefix);
        build(line, name_cmds[i].prefix, 200, 'a', "");
        c = expect_result(line, strlen(line), BQ_PARSE_OK, name_cmds[i].op, __LINE__);
        assert_int_equal(c.name_len, 200);
        assert_ptr_equal(c.name, keep + off);
        build(line, name_cmds[i].prefix, 201, 'a', "");
        expect_result(line, strlen(line), BQ_PARSE_BAD_FORMAT, name_cmds[i].op, __LINE__);
    }
}

static void parse_name_accepts_every_allowed_char(void **state)
{
    char line[LINE_CAP];
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK(build(line, "use x", 0, 0, name_chars), BQ_OP_USE);
    assert_int_equal(c.name_len, 1 + strlen(name_chars));
    for (const char *p = name_chars; *p != '\0'; p++) {
        char one[2] = {*p, '\0'};
        if (*p == '-') {
            EXPECT_BAD(build(line, "watch ", 0, 0, one), BQ_OP_WATCH);
            continue;
        }
        c = EXPECT_OK(build(line, "watch ", 0, 0, one), BQ_OP_WATCH);
        expect_name(&c, one, 6);
    }
}

static void tube_name_valid_checks_every_byte(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        char ch = (char)b;
        char mid[3] = {'a', ch, 'b'};
        bool allowed = b != 0 && strchr(name_chars, b) != NULL;

        assert_int_equal(bq_tube_name_valid(mid, 3), allowed);
        assert_int_equal(bq_tube_name_valid(&ch, 1), allowed && ch != '-');
    }
}

static void tube_name_valid_checks_length_and_dash(void **state)
{
    char name[BQ_NAME_MAX + 2];

    (void)state;
    memset(name, 'z', sizeof(name));
    assert_false(bq_tube_name_valid(name, 0));
    assert_false(bq_tube_name_valid(NULL, 0));
    assert_true(bq_tube_name_valid(name, 1));
    assert_true(bq_tube_name_valid(name, BQ_NAME_MAX));
    assert_false(bq_tube_name_valid(name, BQ_NAME_MAX + 1));
    assert_false(bq_tube_name_valid("-a", 2));
    assert_true(bq_tube_name_valid("a-", 2));
    assert_true(bq_tube_name_valid("default", 7));
    /* Only len bytes count: the '*' after them is not looked at. */
    assert_true(bq_tube_name_valid("ab*", 2));
}

/* ---- pause-tube ---- */

static void parse_pause_tube_reads_name_and_delay(void **state)
{
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("pause-tube default 10", BQ_OP_PAUSE_TUBE);
    expect_name(&c, "default", 11);
    assert_int_equal(c.delay, 10);
    c = EXPECT_OK("pause-tubedefault 1", BQ_OP_PAUSE_TUBE);
    expect_name(&c, "default", 10);
    assert_int_equal(c.delay, 1);
    c = EXPECT_OK("pause-tube   a(b)   0", BQ_OP_PAUSE_TUBE);
    expect_name(&c, "a(b)", 13);
    assert_int_equal(c.delay, 0);
    c = EXPECT_OK("pause-tube x 4294967295", BQ_OP_PAUSE_TUBE);
    assert_int_equal(c.delay, UINT32_MAX);
}

static void parse_pause_tube_leaves_name_validation_to_the_engine(void **state)
{
    char line[LINE_CAP];
    bq_cmd_t c;

    (void)state;
    c = EXPECT_OK("pause-tube -abc 1", BQ_OP_PAUSE_TUBE);
    expect_name(&c, "-abc", 11);
    c = EXPECT_OK(build(line, "pause-tube ", 300, 'n', " 5"), BQ_OP_PAUSE_TUBE);
    assert_int_equal(c.name_len, 300);
    assert_ptr_equal(c.name, keep + 11);
    assert_int_equal(c.delay, 5);
}

static void parse_pause_tube_longest_command(void **state)
{
    char line[LINE_CAP];
    bq_cmd_t c;

    (void)state;
    build(line, "pause-tube ", BQ_NAME_MAX, 'q', " 4294967295");
    assert_int_equal(strlen(line), BQ_LINE_MAX - 2);
    c = EXPECT_OK(line, BQ_OP_PAUSE_TUBE);
    assert_int_equal(c.name_len, BQ_NAME_MAX);
    assert_int_equal(c.delay, UINT32_MAX);
}

static void parse_pause_tube_rejects_malformed_lines(void **state)
{
    static const char *const lines[] = {
        "pause-tube",
        "pause-tube ",
        "pause-tube default",
        "pause-tube default ",
        "pause-tube default 1 ",
        "pause-tube default 1x",
        "pause-tube default -1",
        "pause-tube default +1",
        "pause-tube default 4294967296",
        "pause-tube *foo 1",
        "pause-tube default1",
        "pause-tube def*ault 1",
        "pause-tube default\t1",
        "pause-tube\tdefault 1",
        "pause-tube default 1 2",
        "pause-tube default 0x1",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        EXPECT_BAD(lines[i], BQ_OP_PAUSE_TUBE);
}

/* ---- output contract ---- */

static void parse_overwrites_every_field(void **state)
{
    static const char *const lines[] = {
        "delete 5", "reserve", "reserve ", "foo", "put 1 2 3 4 x", "use a", "kick x",
    };
    bq_cmd_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        bq_cmd_t ref;
        bq_parse_status_t st;

        memset(&ref, 0, sizeof(ref));
        st = bq_parse_command(lines[i], strlen(lines[i]), &ref);
        memset(&c, 0xa5, sizeof(c));
        assert_int_equal(bq_parse_command(lines[i], strlen(lines[i]), &c), st);
        assert_int_equal(c.op, ref.op);
        assert_int_equal(c.id, ref.id);
        assert_int_equal(c.pri, ref.pri);
        assert_int_equal(c.delay, ref.delay);
        assert_int_equal(c.ttr, ref.ttr);
        assert_int_equal(c.bytes, ref.bytes);
        assert_int_equal(c.count, ref.count);
        assert_int_equal(c.timeout, ref.timeout);
        assert_int_equal(c.put_trailing, ref.put_trailing);
        assert_ptr_equal(c.name, ref.name);
        assert_int_equal(c.name_len, ref.name_len);
    }
}

static void parse_never_reads_past_len(void **state)
{
    /* Each line is parsed with only its first len bytes; the byte after them
     * would change the result if it were read. */
    static const char buf[] = "delete 123";
    static const char put[] = "put 1 0 10 57";
    static const char rsv[] = "reserve-with-timeout 30";
    static const char res[] = "reserve-job 1";
    static const char use[] = "use foobar";
    static const char pause[] = "pause-tube foo 10";
    static const char kick[] = "kick 42";
    static const char stats[] = "stats-job 1";
    bq_cmd_t c;

    (void)state;
    assert_int_equal(bq_parse_command(buf, 9, &c), BQ_PARSE_OK);
    assert_int_equal(c.id, 12);
    assert_int_equal(bq_parse_command(put, 12, &c), BQ_PARSE_OK);
    assert_int_equal(c.bytes, 5);
    assert_false(c.put_trailing);
    assert_int_equal(bq_parse_command(rsv, 22, &c), BQ_PARSE_OK);
    assert_int_equal(c.timeout, 3);
    assert_int_equal(bq_parse_command(res, 7, &c), BQ_PARSE_OK);
    assert_int_equal(c.op, BQ_OP_RESERVE);
    assert_int_equal(bq_parse_command(use, 7, &c), BQ_PARSE_OK);
    assert_int_equal(c.name_len, 3);
    assert_int_equal(bq_parse_command(pause, 16, &c), BQ_PARSE_OK);
    assert_int_equal(c.name_len, 3);
    assert_int_equal(c.delay, 1);
    assert_int_equal(bq_parse_command(kick, 6, &c), BQ_PARSE_OK);
    assert_int_equal(c.count, 4);
    assert_int_equal(bq_parse_command(stats, 5, &c), BQ_PARSE_OK);
    assert_int_equal(c.op, BQ_OP_STATS);
    assert_int_equal(bq_parse_command(buf, 6, &c), BQ_PARSE_UNKNOWN);
}

static void op_name_gives_protocol_names(void **state)
{
    static const char *const names[BQ_OP_COUNT] = {
        "unknown",
        "put",
        "peek",
        "peek-ready",
        "peek-delayed",
        "peek-buried",
        "reserve",
        "reserve-with-timeout",
        "reserve-job",
        "delete",
        "release",
        "bury",
        "kick",
        "kick-job",
        "touch",
        "stats",
        "stats-job",
        "stats-tube",
        "use",
        "watch",
        "ignore",
        "list-tubes",
        "list-tube-used",
        "list-tubes-watched",
        "quit",
        "pause-tube",
    };

    (void)state;
    for (int op = 0; op < BQ_OP_COUNT; op++)
        assert_string_equal(bq_op_name((bq_op_t)op), names[op]);
    assert_string_equal(bq_op_name(BQ_OP_COUNT), "unknown");
    assert_string_equal(bq_op_name((bq_op_t)999), "unknown");
}

/* One valid line per op; used for coverage and for the prefix property. */
static const char *const valid_lines[] = {
    "put 1024 0 60 5",
    "put 4294967295 4294967295 4294967295 4294967295",
    "put 0 0 0 1 x",
    "peek 18446744073709551615",
    "peek-ready",
    "peek-delayed",
    "peek-buried",
    "reserve",
    "reserve-with-timeout 2147483647",
    "reserve-job 77",
    "delete 1234567890",
    "release 12 4294967295 86400",
    "bury 3 1000",
    "kick -18446744073709551615",
    "kick 4294967297x",
    "kick-job 9",
    "touch 10",
    "stats",
    "stats-job 11",
    "stats-tube a+b/c;d.e$f_g(h)",
    "use default",
    "watch foo-",
    "ignore x",
    "list-tubes",
    "list-tube-used",
    "list-tubes-watched",
    "quit",
    "pause-tube default 4294967295",
    "pause-tubedefault 1",
};

static void parse_every_op_has_a_valid_line(void **state)
{
    bool seen[BQ_OP_COUNT] = {false};

    (void)state;
    for (size_t i = 0; i < sizeof(valid_lines) / sizeof(valid_lines[0]); i++) {
        result_t r = parse_checked(valid_lines[i], strlen(valid_lines[i]), __LINE__);
        assert_int_equal(r.st, BQ_PARSE_OK);
        /* The op's protocol name starts the line. */
        assert_memory_equal(valid_lines[i], bq_op_name(r.cmd.op), strlen(bq_op_name(r.cmd.op)));
        seen[r.cmd.op] = true;
    }
    for (int op = 1; op < BQ_OP_COUNT; op++)
        assert_true(seen[op]);
}

/* ---- independent model over libc, for differential tests ---- */

static bool model_uint(const char **pp, uintmax_t max, uintmax_t *out)
{
    const char *p = *pp;
    char *e;
    uintmax_t v;

    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return false;
    errno = 0;
    v = strtoumax(p, &e, 10);
    if (errno != 0 || v > max)
        return false;
    *pp = e;
    *out = v;
    return true;
}

static bool model_u32(const char **pp, uint32_t *out)
{
    uintmax_t v;

    if (!model_uint(pp, UINT32_MAX, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool model_u64(const char **pp, uint64_t *out)
{
    uintmax_t v;

    if (!model_uint(pp, UINT64_MAX, &v))
        return false;
    *out = (uint64_t)v;
    return true;
}

static bool model_name_valid(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= 200 && strspn(s, name_chars) == n && s[0] != '-';
}

static bool model_args(bq_op_t op, const char *p, bq_cmd_t *c)
{
    uint32_t t;
    unsigned long k;
    char *e;
    size_t n;

    switch (op) {
    case BQ_OP_PUT:
        if (!model_u32(&p, &c->pri) || !model_u32(&p, &c->delay) || !model_u32(&p, &c->ttr) ||
            !model_u32(&p, &c->bytes))
            return false;
        c->put_trailing = *p != '\0';
        return true;
    case BQ_OP_PEEK:
    case BQ_OP_DELETE:
    case BQ_OP_TOUCH:
    case BQ_OP_KICK_JOB:
    case BQ_OP_RESERVE_JOB:
    case BQ_OP_STATS_JOB:
        return model_u64(&p, &c->id) && *p == '\0';
    case BQ_OP_RELEASE:
        return model_u64(&p, &c->id) && model_u32(&p, &c->pri) && model_u32(&p, &c->delay) &&
               *p == '\0';
    case BQ_OP_BURY:
        return model_u64(&p, &c->id) && model_u32(&p, &c->pri) && *p == '\0';
    case BQ_OP_RESERVE_TIMEOUT:
        if (!model_u32(&p, &t) || t > INT_MAX)
            return false;
        c->timeout = (int32_t)t;
        return true;
    case BQ_OP_KICK:
        errno = 0;
        k = strtoul(p, &e, 10);
        c->count = (uint32_t)k;
        return e != p && errno == 0;
    case BQ_OP_USE:
    case BQ_OP_WATCH:
    case BQ_OP_IGNORE:
    case BQ_OP_STATS_TUBE:
        c->name = p;
        c->name_len = strlen(p);
        return model_name_valid(p);
    case BQ_OP_PAUSE_TUBE:
        while (*p == ' ')
            p++;
        n = strspn(p, name_chars);
        c->name = p;
        c->name_len = n;
        p += n;
        return n > 0 && model_u32(&p, &c->delay) && *p == '\0';
    case BQ_OP_QUIT:
        return true;
    default:
        return *p == '\0';
    }
}

/* Parses the NUL-terminated copy s of a len-byte line. */
static result_t model_parse(const char *s, size_t len)
{
    static const struct {
        const char *name;
        bq_op_t op;
    } order[] = {
        {"put ", BQ_OP_PUT},
        {"peek ", BQ_OP_PEEK},
        {"peek-ready", BQ_OP_PEEK_READY},
        {"peek-delayed", BQ_OP_PEEK_DELAYED},
        {"peek-buried", BQ_OP_PEEK_BURIED},
        {"reserve-with-timeout ", BQ_OP_RESERVE_TIMEOUT},
        {"reserve-job ", BQ_OP_RESERVE_JOB},
        {"reserve", BQ_OP_RESERVE},
        {"delete ", BQ_OP_DELETE},
        {"release ", BQ_OP_RELEASE},
        {"bury ", BQ_OP_BURY},
        {"kick ", BQ_OP_KICK},
        {"kick-job ", BQ_OP_KICK_JOB},
        {"touch ", BQ_OP_TOUCH},
        {"stats-job ", BQ_OP_STATS_JOB},
        {"stats-tube ", BQ_OP_STATS_TUBE},
        {"stats", BQ_OP_STATS},
        {"use ", BQ_OP_USE},
        {"watch ", BQ_OP_WATCH},
        {"ignore ", BQ_OP_IGNORE},
        {"list-tubes-watched", BQ_OP_LIST_TUBES_WATCHED},
        {"list-tube-used", BQ_OP_LIST_TUBE_USED},
        {"list-tubes", BQ_OP_LIST_TUBES},
        {"quit", BQ_OP_QUIT},
        {"pause-tube", BQ_OP_PAUSE_TUBE},
    };
    result_t r;

    memset(&r, 0, sizeof(r));
    r.name_off = SIZE_MAX;
    if (strlen(s) != len) {
        r.st = BQ_PARSE_BAD_FORMAT;
        return r;
    }
    r.st = BQ_PARSE_UNKNOWN;
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        size_t n = strlen(order[i].name);
        if (strncmp(s, order[i].name, n) != 0)
            continue;
        r.cmd.op = order[i].op;
        r.cmd.timeout = r.cmd.op == BQ_OP_RESERVE ? -1 : 0;
        r.st = model_args(r.cmd.op, s + n, &r.cmd) ? BQ_PARSE_OK : BQ_PARSE_BAD_FORMAT;
        if (r.st != BQ_PARSE_OK) {
            bq_op_t op = r.cmd.op;
            memset(&r.cmd, 0, sizeof(r.cmd));
            r.cmd.op = op;
            r.cmd.timeout = op == BQ_OP_RESERVE ? -1 : 0;
        }
        if (r.cmd.name != NULL)
            r.name_off = (size_t)(r.cmd.name - s);
        break;
    }
    return r;
}

static void expect_same_as_model(const char *line, size_t len, int at)
{
    char copy[LINE_CAP + 1];
    result_t want, got;

    memcpy(copy, line, len);
    copy[len] = '\0';
    want = model_parse(copy, len);
    got = parse_checked(line, len, at);
    if (!same_result(&want, &got)) {
        describe("model ", &want);
        describe("parser", &got);
        fail_msg("line %d: \"%s\" (len %zu): parser and model differ", at, show(line, len), len);
    }
}

static void skip_unless_64bit_long(void)
{
    if (sizeof(unsigned long) != sizeof(uint64_t))
        skip(); /* the model's strtoul must be the 64-bit one beanstalkd runs with */
}

static void parse_every_prefix_of_a_valid_line_matches_the_model(void **state)
{
    (void)state;
    skip_unless_64bit_long();
    for (size_t i = 0; i < sizeof(valid_lines) / sizeof(valid_lines[0]); i++) {
        for (size_t k = 0; k <= strlen(valid_lines[i]); k++)
            expect_same_as_model(valid_lines[i], k, __LINE__);
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static void parse_generated_lines_match_the_model(void **state)
{
    static const char *const commands[] = {
        "put ",
        "peek ",
        "peek-ready",
        "peek-delayed",
        "peek-buried",
        "reserve-with-timeout ",
        "reserve-job ",
        "reserve",
        "delete ",
        "release ",
        "bury ",
        "kick ",
        "kick-job ",
        "touch ",
        "stats-job ",
        "stats-tube ",
        "stats",
        "use ",
        "watch ",
        "ignore ",
        "list-tubes-watched",
        "list-tube-used",
        "list-tubes",
        "quit",
        "pause-tube",
        "put",
        "kick",
        "use",
        "reserve-with-timeout",
        "stats-tube",
        "PUT ",
        "",
    };
    static const char *const tokens[] = {
        " ",
        " ",
        " ",
        "  ",
        "\t",
        "\v",
        "\f",
        "\n",
        "0",
        "1",
        "7",
        "42",
        "007",
        "-",
        "+",
        "x",
        "0x",
        "a",
        "(b)",
        "$",
        "default",
        "-foo",
        "*",
        ".",
        "\xc3\xa9",
        "4294967295",
        "4294967296",
        "2147483647",
        "2147483648",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999",
        "-1",
        "+1",
        "\x01",
    };
    char line[LINE_CAP];

    (void)state;
    skip_unless_64bit_long();
    for (int iter = 0; iter < 200000; iter++) {
        const char *cmd = commands[rng() % (sizeof(commands) / sizeof(commands[0]))];
        size_t len = strlen(cmd);
        unsigned ntok = rng() % 7;

        memcpy(line, cmd, len);
        for (unsigned t = 0; t < ntok; t++) {
            const char *tok = tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))];
            size_t n = strlen(tok);
            if (len + n > 240)
                break;
            memcpy(line + len, tok, n);
            len += n;
        }
        if (len > 0 && rng() % 64 == 0)
            line[rng() % len] = '\0'; /* an embedded NUL byte */
        expect_same_as_model(line, len, __LINE__);
    }
}

static int64_t body_size(const char *line)
{
    return bq_reply_body_size(line, strlen(line));
}

static void reply_body_sizes(void **state)
{
    (void)state;
    assert_int_equal(body_size("RESERVED 7 12"), 12);
    assert_int_equal(body_size("FOUND 7 0"), 0);
    assert_int_equal(body_size("OK 5309"), 5309);
    assert_int_equal(body_size("OK 9223372036854775807"), INT64_MAX);
    assert_int_equal(body_size("INSERTED 5"), BQ_REPLY_NO_BODY);
    assert_int_equal(body_size("OK"), BQ_REPLY_NO_BODY);
    assert_int_equal(body_size("NOT_FOUND"), BQ_REPLY_NO_BODY);
    assert_int_equal(body_size("OKAY 5"), BQ_REPLY_NO_BODY);
    assert_int_equal(body_size("OK "), BQ_REPLY_BAD_SIZE);
    assert_int_equal(body_size("OK x"), BQ_REPLY_BAD_SIZE);
    assert_int_equal(body_size("OK +5"), BQ_REPLY_BAD_SIZE);
    assert_int_equal(body_size("FOUND 7 5x"), BQ_REPLY_BAD_SIZE);
    assert_int_equal(body_size("OK 9223372036854775808"), BQ_REPLY_BAD_SIZE);
    assert_int_equal(body_size("OK 12345678901234567890"), BQ_REPLY_BAD_SIZE);
    /* nothing past len is read */
    assert_int_equal(bq_reply_body_size("OK 12\r\n", 5), 12);
    assert_int_equal(bq_reply_body_size("OK 12", 4), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_empty_line_is_unknown),
        cmocka_unit_test(parse_commands_are_case_sensitive),
        cmocka_unit_test(parse_names_without_their_space_are_unknown),
        cmocka_unit_test(parse_tab_is_not_a_separator),
        cmocka_unit_test(parse_unrecognised_words_are_unknown),
        cmocka_unit_test(parse_nul_byte_is_bad_format_with_unknown_op),
        cmocka_unit_test(parse_prefix_order_decides_the_command),
        cmocka_unit_test(parse_argumentless_commands_need_exact_length),
        cmocka_unit_test(parse_reserve_has_infinite_timeout),
        cmocka_unit_test(parse_quit_ignores_the_rest_of_the_line),
        cmocka_unit_test(parse_put_reads_four_fields),
        cmocka_unit_test(parse_put_accepts_extra_spaces),
        cmocka_unit_test(parse_put_accepts_leading_zeros),
        cmocka_unit_test(parse_put_keeps_zero_ttr),
        cmocka_unit_test(parse_put_accepts_u32_limits),
        cmocka_unit_test(parse_put_rejects_values_above_u32),
        cmocka_unit_test(parse_put_rejects_malformed_fields),
        cmocka_unit_test(parse_put_trailing_text_sets_flag),
        cmocka_unit_test(parse_id_commands_read_u64),
        cmocka_unit_test(parse_id_commands_reject_malformed_ids),
        cmocka_unit_test(parse_reference_integer_examples),
        cmocka_unit_test(parse_release_reads_id_pri_delay),
        cmocka_unit_test(parse_release_rejects_malformed_lines),
        cmocka_unit_test(parse_bury_reads_id_pri),
        cmocka_unit_test(parse_bury_rejects_malformed_lines),
        cmocka_unit_test(parse_reserve_with_timeout_reads_seconds),
        cmocka_unit_test(parse_reserve_with_timeout_rejects_bad_values),
        cmocka_unit_test(parse_kick_follows_strtoul),
        cmocka_unit_test(parse_kick_rejects_no_digits_and_overflow),
        cmocka_unit_test(parse_name_commands_take_the_rest_of_the_line),
        cmocka_unit_test(parse_name_commands_reject_invalid_names),
        cmocka_unit_test(parse_name_length_limit_is_200),
        cmocka_unit_test(parse_name_accepts_every_allowed_char),
        cmocka_unit_test(tube_name_valid_checks_every_byte),
        cmocka_unit_test(tube_name_valid_checks_length_and_dash),
        cmocka_unit_test(parse_pause_tube_reads_name_and_delay),
        cmocka_unit_test(parse_pause_tube_leaves_name_validation_to_the_engine),
        cmocka_unit_test(parse_pause_tube_longest_command),
        cmocka_unit_test(parse_pause_tube_rejects_malformed_lines),
        cmocka_unit_test(parse_overwrites_every_field),
        cmocka_unit_test(parse_never_reads_past_len),
        cmocka_unit_test(op_name_gives_protocol_names),
        cmocka_unit_test(parse_every_op_has_a_valid_line),
        cmocka_unit_test(parse_every_prefix_of_a_valid_line_matches_the_model),
        cmocka_unit_test(parse_generated_lines_match_the_model),
        cmocka_unit_test(reply_body_sizes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
