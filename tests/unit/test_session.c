/* Unit tests of protocol/session.c, the per-connection framing.
 *
 * Every framing case is first fed whole and compared with its exact expected
 * output; then it is fed again, on a fresh engine, split in two at every byte
 * boundary and finally byte by byte: the replies, the bytes left unconsumed
 * and the quit state must be identical to the whole feed. Feeding follows the
 * node's rules (engine_harness.h): bytes a session does not consume are kept
 * and fed again after the engine wakes the connection; a reserve that waits
 * with timeout 0 is resolved by a tick at the same instant.
 *
 * Expected results are beanstalkd 1.13's (reference report 1.1, 1.5, 1.12),
 * except the two framing fixes documented at the top of session.c: a CRLF
 * split across the 224-byte boundary of an overlong line still ends it, and
 * a stray CR does not hide the CRLF after it. OUT_OF_MEMORY needs an
 * allocation failure and is not tested here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine_harness.h"

typedef struct run_result {
    char *out;
    size_t out_len;
    size_t left; /* input bytes not consumed */
    bool quit;
    bool blocked;
} run_result_t;

/* Feeds data[0..len) to a fresh session in chunks ending at cuts[0..ncuts)
 * (then the rest), ticking at the same instant while a reserve with timeout
 * 0 waits. */
static run_result_t run_chunks(const char *data, size_t len, uint32_t max_job_size,
                               const size_t *cuts, size_t ncuts)
{
    harness_t *h = h_new(max_job_size);
    int c = h_open(h);
    size_t pos = 0;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts[k] : len;
        h_sendn(h, c, data + pos, end - pos);
        pos = end;
        /* resolve reserves with timeout 0, one after another */
        unsigned wakes = h->conns[c].wakes + 1;
        while (h_blocked(h, c) && wakes != h->conns[c].wakes) {
            wakes = h->conns[c].wakes;
            h_tick(h);
        }
    }
    run_result_t r;
    r.out_len = h->conns[c].out_len;
    r.out = malloc(r.out_len + 1);
    assert_non_null(r.out);
    memcpy(r.out, h_out(h, c), r.out_len + 1);
    r.left = h->conns[c].in_len;
    r.quit = bq_session_quit(h->conns[c].s);
    r.blocked = h_blocked(h, c);
    h_done(h);
    return r;
}

static void assert_same_run(const run_result_t *a, const run_result_t *b, const char *how,
                            size_t at)
{
    if (a->out_len != b->out_len || memcmp(a->out, b->out, a->out_len) != 0 || a->left != b->left ||
        a->quit != b->quit || a->blocked != b->blocked)
        fail_msg("%s at %zu: output \"%s\" (left %zu) differs from whole feed \"%s\" (left %zu)",
                 how, at, b->out, b->left, a->out, a->left);
}

/* Feeds the case whole, checks the expected output, then every split. */
static void check_case(const char *data, size_t len, uint32_t max_job_size, const char *expected,
                       size_t expected_len, size_t expected_left)
{
    run_result_t whole = run_chunks(data, len, max_job_size, NULL, 0);
    if (whole.out_len != expected_len || memcmp(whole.out, expected, expected_len) != 0)
        fail_msg("whole feed gave \"%s\", want \"%s\"", whole.out, expected);
    assert_int_equal(whole.left, expected_left);
    for (size_t cut = 0; cut <= len; cut++) {
        run_result_t r = run_chunks(data, len, max_job_size, &cut, 1);
        assert_same_run(&whole, &r, "split", cut);
        free(r.out);
    }
    size_t *cuts = malloc((len + 1) * sizeof *cuts);
    assert_non_null(cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    run_result_t bytes = run_chunks(data, len, max_job_size, cuts, len);
    assert_same_run(&whole, &bytes, "byte by byte", 0);
    free(bytes.out);
    free(cuts);
    free(whole.out);
}

/* check_case for NUL-free text. */
static void check_text(const char *data, uint32_t max_job_size, const char *expected)
{
    check_case(data, strlen(data), max_job_size, expected, strlen(expected), 0);
}

/* A line of n copies of c followed by rest (malloc'd). */
static char *line_of(size_t n, char c, const char *rest)
{
    size_t r = strlen(rest);
    char *s = malloc(n + r + 1);
    assert_non_null(s);
    memset(s, c, n);
    memcpy(s + n, rest, r + 1);
    return s;
}

/* ---- framing cases ---- */

static void session_put_with_body(void **state)
{
    (void)state;
    check_text("put 0 0 10 5\r\nhello\r\n", 0, "INSERTED 1\r\n");
    /* a body that holds CRLF, and an empty body */
    check_text("put 0 0 10 6\r\nab\r\ncd\r\nput 0 0 10 0\r\n\r\npeek 1\r\n", 0,
               "INSERTED 1\r\nINSERTED 2\r\nFOUND 1 6\r\nab\r\ncd\r\n");
}

static void session_pipelined_commands(void **state)
{
    (void)state;
    check_text("use foo\r\nput 1 0 10 3\r\nabc\r\npeek-ready\r\nlist-tube-used\r\n"
               "watch foo\r\nreserve\r\ndelete 1\r\nlist-tubes\r\n",
               0,
               "USING foo\r\nINSERTED 1\r\nFOUND 1 3\r\nabc\r\nUSING foo\r\n"
               "WATCHING 2\r\nRESERVED 1 3\r\nabc\r\nDELETED\r\n"
               "OK 20\r\n---\n- default\n- foo\n\r\n");
}

static void session_line_of_222_chars_is_a_line(void **state)
{
    (void)state;
    char *in = line_of(222, 'a', "\r\nlist-tube-used\r\n");
    check_text(in, 0, "UNKNOWN_COMMAND\r\nUSING default\r\n");
    free(in);
}

/* 223 characters: the CR is the 224th byte. beanstalkd drops it with the
 * buffer and swallows the next command; we answer BAD_FORMAT and go on. */
static void session_crlf_at_the_224_byte_boundary(void **state)
{
    (void)state;
    char *in = line_of(223, 'a', "\r\nlist-tube-used\r\n");
    check_text(in, 0, "BAD_FORMAT\r\nUSING default\r\n");
    free(in);
}

static void session_lines_of_224_and_500_chars_are_too_long(void **state)
{
    (void)state;
    char *in = line_of(224, 'a', "\r\nlist-tube-used\r\n");
    check_text(in, 0, "BAD_FORMAT\r\nUSING default\r\n");
    free(in);
    in = line_of(500, 'a', "\r\nlist-tube-used\r\n");
    check_text(in, 0, "BAD_FORMAT\r\nUSING default\r\n");
    free(in);
    /* 447 characters: the CR lands on the second 224-byte boundary */
    in = line_of(447, 'b', "\r\nlist-tube-used\r\n");
    check_text(in, 0, "BAD_FORMAT\r\nUSING default\r\n");
    free(in);
}

/* An overlong line with CRs that are not followed by LF, one of them on the
 * 224-byte boundary, still ends at its first CRLF with one BAD_FORMAT. */
static void session_overlong_line_with_stray_crs(void **state)
{
    (void)state;
    char in[700];
    memset(in, 'c', 600);
    in[100] = '\r';
    in[223] = '\r';
    in[224] = 'x';
    in[400] = '\r';
    in[401] = '\r';
    memcpy(in + 600, "\r\nlist-tube-used\r\n", 19);
    check_text(in, 0, "BAD_FORMAT\r\nUSING default\r\n");
}

static void session_stray_cr_does_not_hide_the_crlf(void **state)
{
    (void)state;
    check_text("list-tube-used\rx\r\nlist-tube-used\r\n", 0, "BAD_FORMAT\r\nUSING default\r\n");
    check_text("\r\r\n", 0, "UNKNOWN_COMMAND\r\n");
    check_text("use a\r\r\nuse b\r\n", 0, "BAD_FORMAT\r\nUSING b\r\n");
}

static void session_bare_lf_is_not_a_line_end(void **state)
{
    (void)state;
    check_text("list-tube-used\nlist-tube-used\r\n", 0, "BAD_FORMAT\r\n");
    check_text("\r\n\r\n", 0, "UNKNOWN_COMMAND\r\nUNKNOWN_COMMAND\r\n");
}

/* The longest legal command is exactly 224 bytes. */
static void session_longest_legal_command(void **state)
{
    (void)state;
    char name[201];
    memset(name, 'n', 200);
    name[200] = '\0';
    char in[600];
    int n = snprintf(in, sizeof in, "watch %s\r\npause-tube %s 4294967295\r\n", name, name);
    assert_int_equal(n, 208 + 224);
    check_text(in, 0, "WATCHING 2\r\nPAUSED\r\n");
}

static void session_job_too_big_swallows_bytes_plus_two(void **state)
{
    (void)state;
    /* the 13 bytes "delete 9999\r\n" are the discarded body */
    check_text("put 0 0 10 11\r\ndelete 9999\r\nlist-tube-used\r\n", 10,
               "JOB_TOO_BIG\r\nUSING default\r\n");
    /* JOB_TOO_BIG wins over trailing text */
    check_text("put 0 0 10 11 junk\r\n0123456789a\r\nlist-tube-used\r\n", 10,
               "JOB_TOO_BIG\r\nUSING default\r\n");
    /* the limit itself is accepted */
    check_text("put 0 0 10 10\r\n0123456789\r\n", 10, "INSERTED 1\r\n");
    /* a large discard */
    char *in = line_of(3002, 'z', "list-tube-used\r\n");
    char *cmd = malloc(3100);
    assert_non_null(cmd);
    snprintf(cmd, 3100, "put 0 0 10 3000\r\n%s", in);
    check_text(cmd, 10, "JOB_TOO_BIG\r\nUSING default\r\n");
    free(cmd);
    free(in);
}

static void session_expected_crlf_leftover_is_the_next_command(void **state)
{
    (void)state;
    check_text("put 1 0 10 1\r\nabc\r\n", 0, "EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n");
    check_text("put 0 0 10 2\r\nxxxxlist-tube-used\r\n", 0, "EXPECTED_CRLF\r\nUSING default\r\n");
    /* the id was used: the next put gets 2 */
    check_text("put 0 0 10 1\r\nabcput 0 0 10 1\r\nb\r\n", 0, "EXPECTED_CRLF\r\nINSERTED 2\r\n");
}

static void session_bad_format_put_leaves_the_body(void **state)
{
    (void)state;
    check_text("put +1 0 10 1\r\nx\r\n", 0, "BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n");
    check_text("put 0 0 10 14 x\r\nlist-tube-used\r\n", 0, "BAD_FORMAT\r\nUSING default\r\n");
    check_text("put 0 0 10 4294967296\r\nlist-tube-used\r\n", 0, "BAD_FORMAT\r\nUSING default\r\n");
}

static void session_quit_stops_consumption(void **state)
{
    (void)state;
    const char *in = "list-tube-used\r\nquit\r\nlist-tube-used\r\n";
    check_case(in, strlen(in), 0, "USING default\r\n", 15, 16);
    in = "quit with text\r\nput 0 0 10 1\r\nx\r\n";
    check_case(in, strlen(in), 0, "", 0, 17);
}

static void session_nul_bytes(void **state)
{
    (void)state;
    static const char line[] = "list-tube-used\0\r\nlist-tube-used\r\n";
    const char *want = "BAD_FORMAT\r\nUSING default\r\n";
    check_case(line, sizeof line - 1, 0, want, strlen(want), 0);
    static const char put[] = "put 0 0 10 3\r\na\0b\r\npeek 1\r\n\0\r\n";
    static const char put_want[] = "INSERTED 1\r\nFOUND 1 3\r\na\0b\r\nBAD_FORMAT\r\n";
    check_case(put, sizeof put - 1, 0, put_want, sizeof put_want - 1, 0);
}

static void session_reserve_with_timeout_zero_then_more(void **state)
{
    (void)state;
    check_text("reserve-with-timeout 0\r\nlist-tube-used\r\n", 0, "TIMED_OUT\r\nUSING default\r\n");
    check_text("put 0 0 10 1\r\nj\r\nreserve-with-timeout 0\r\nreserve-with-timeout 0\r\n"
               "delete 1\r\n",
               0, "INSERTED 1\r\nRESERVED 1 1\r\nj\r\nTIMED_OUT\r\nDELETED\r\n");
}

/* Deterministic binary garbage with line ends sprinkled in. */
static void session_binary_garbage(void **state)
{
    (void)state;
    enum { N = 2000 };
    static char in[N];
    uint64_t x = 0x243F6A8885A308D3u;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        in[i] = (char)(x >> 56);
        if (x % 37 == 0 && i + 1 < N) {
            in[i] = '\r';
            in[++i] = '\n';
        }
    }
    run_result_t whole = run_chunks(in, N, 0, NULL, 0);
    /* only error replies: every line is garbage or too long */
    for (char *p = whole.out; *p; p = strstr(p, "\r\n") + 2) {
        if (strncmp(p, "BAD_FORMAT\r\n", 12) != 0 && strncmp(p, "UNKNOWN_COMMAND\r\n", 17) != 0)
            fail_msg("unexpected reply at \"%s\"", p);
    }
    assert_true(whole.out_len > 0);
    check_case(in, N, 0, whole.out, whole.out_len, whole.left);
    free(whole.out);
}

/* ---- behaviour around blocking, quit and idleness ---- */

static void session_pipelined_commands_wait_behind_a_blocking_reserve(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), p = h_open(h);
    bq_session_t *s = h->conns[a].s;
    const char in[] = "reserve\r\nlist-tube-used\r\n";
    size_t len = sizeof in - 1;
    assert_int_equal(bq_session_feed(s, in, len, h->now), 9);
    assert_true(bq_session_blocked(s));
    assert_true(bq_session_idle(s));
    /* while blocked nothing is consumed */
    assert_int_equal(bq_session_feed(s, in + 9, len - 9, h->now), 0);
    assert_int_equal(bq_session_feed(s, in + 9, 1, h->now), 0);
    assert_string_equal(h_out(h, a), "");
    uint64_t id = h_put(h, p, 0, 0, 10, "go");
    assert_int_equal(h->conns[a].wakes, 1);
    assert_false(bq_session_blocked(s));
    h_expect(h, a, h_job_reply("RESERVED", id, "go"));
    assert_int_equal(bq_session_feed(s, in + 9, len - 9, h->now), len - 9);
    h_expect(h, a, "USING default\r\n");
    h_done(h);
}

static void session_quit_consumes_through_its_line_only(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    bq_session_t *s = h->conns[a].s;
    const char in[] = "quit\r\nlist-tube-used\r\n";
    assert_int_equal(bq_session_feed(s, in, sizeof in - 1, h->now), 6);
    assert_true(bq_session_quit(s));
    assert_int_equal(bq_session_feed(s, in + 6, sizeof in - 7, h->now), 0);
    assert_string_equal(h_out(h, a), "");
    assert_false(bq_session_blocked(s));
    h_done(h);
}

static void session_idle_only_between_commands(void **state)
{
    (void)state;
    harness_t *h = h_new(10);
    int a = h_open(h);
    bq_session_t *s = h->conns[a].s;
    assert_true(bq_session_idle(s));
    h_send(h, a, "list-tu");
    assert_false(bq_session_idle(s));
    h_send(h, a, "be-used\r\n");
    assert_true(bq_session_idle(s));
    h_send(h, a, "put 0 0 10 3\r\n");
    assert_false(bq_session_idle(s)); /* reading a body */
    h_send(h, a, "abc\r\n");
    assert_true(bq_session_idle(s));
    h_send(h, a, "put 0 0 10 20\r\n");
    assert_false(bq_session_idle(s)); /* discarding */
    h_sendn(h, a, "01234567890123456789\r\n", 22);
    assert_true(bq_session_idle(s));
    char *longline = line_of(300, 'q', "");
    h_send(h, a, longline);
    assert_false(bq_session_idle(s)); /* dropping an overlong line */
    h_send(h, a, "\r\n");
    assert_true(bq_session_idle(s));
    free(longline);
    h_expect(h, a, "USING default\r\nINSERTED 1\r\nJOB_TOO_BIG\r\nBAD_FORMAT\r\n");
    h_done(h);
}

static void session_job_too_big_replies_after_the_last_discarded_byte(void **state)
{
    (void)state;
    harness_t *h = h_new(10);
    int a = h_open(h);
    h_send(h, a, "put 0 0 10 11\r\n0123456789a\r");
    assert_string_equal(h_out(h, a), "");
    h_send(h, a, "\n");
    h_expect(h, a, "JOB_TOO_BIG\r\n");
    h_done(h);
}

static void session_command_hook_sees_every_line(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    h_send(h, a, "list-tube-used\r\n");
    assert_int_equal(h->ncommands, 1);
    assert_int_equal(h->last_op, BQ_OP_LIST_TUBE_USED);
    h_send(h, a, "bogus\r\n");
    assert_int_equal(h->ncommands, 2);
    assert_int_equal(h->last_op, BQ_OP_UNKNOWN);
    h_send(h, a, "put 0 0 10 1\r\nx\r\n");
    assert_int_equal(h->ncommands, 3); /* the body is not a command */
    assert_int_equal(h->last_op, BQ_OP_PUT);
    h_send(h, a, "delete x\r\n");
    assert_int_equal(h->last_op, BQ_OP_DELETE);
    h_clear(h, a);
    h_done(h);
}

static void session_free_drops_a_partial_put_and_returns_jobs(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h);
    uint64_t id = h_put(h, b, 0, 0, 10, "mine");
    h_cmd(h, a, "reserve\r\n", h_job_reply("RESERVED", id, "mine"));
    h_send(h, a, "put 0 0 10 100\r\npartial");
    h_close(h, a);
    assert_int_equal(h_job(h, id)->state, BQ_JOB_READY);
    assert_int_equal(h->e->jobs.len, 1);
    h_done(h);
}

/* While writes pause, a writing command is held unanswered and nothing
 * after it runs; reads go on before it. Once writes resume, it runs, then
 * what followed, in order. */
static void session_holds_writes_while_paused_then_runs_them_in_order(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h);
    uint64_t id = h_put(h, a, 0, 0, 10, "old");
    h_clear(h, a);
    bq_engine_set_writes_paused(h->e, true);
    h_send(h, a, "use t\r\nput 0 0 10 3\r\nnew\r\ndelete 1\r\nlist-tube-used\r\n");
    assert_string_equal(h_out(h, a), "USING t\r\n"); /* the put waits: nothing after it ran */
    assert_true(bq_session_blocked(h->conns[a].s));
    assert_int_equal(h->e->jobs.len, 1);
    bq_session_resume(h->conns[a].s, h->now); /* still paused: nothing */
    assert_string_equal(h_out(h, a), "USING t\r\n");
    bq_engine_set_writes_paused(h->e, false);
    bq_session_resume(h->conns[a].s, h->now);
    h_pump(h);
    char want[128];
    snprintf(want, sizeof want, "USING t\r\nINSERTED %llu\r\nDELETED\r\nUSING t\r\n",
             (unsigned long long)id + 1);
    assert_string_equal(h_out(h, a), want);
    assert_int_equal(h->e->jobs.len, 1); /* job 1 deleted, the new one kept */
    h_done(h);
}

/* What a session hands to another server: a reserve it waits in (its
 * timeout's seconds left), the held command, the partial line; nothing
 * inside a put body. */
/* Replays session i of h and checks it gives exactly want (NULL: -1). */
static void expect_replay(harness_t *h, int i, const char *want, size_t want_len)
{
    char *out = NULL;
    size_t len = 0;
    int r = bq_session_replay(h->conns[i].s, h->now, &out, &len);
    if (!want) {
        assert_int_equal(r, -1);
        return;
    }
    assert_int_equal(r, 0);
    assert_int_equal(len, want_len);
    if (len > 0)
        assert_memory_equal(out, want, len);
    free(out);
}

static void session_replay_carries_unanswered_input(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int a = h_open(h), b = h_open(h), c = h_open(h);
    h_send(h, a, "reserve-with-timeout 10\r\n");
    h_advance(h, H_MS(2500));
    expect_replay(h, a, "reserve-with-timeout 8\r\n", 24);
    h_send(h, b, "reserve\r\n");
    expect_replay(h, b, "reserve\r\n", 9);
    bq_engine_set_writes_paused(h->e, true);
    h_send(h, c, "delete 7\r\nstats");
    expect_replay(h, c, "delete 7\r\n", 10); /* the held delete; "stats" is the caller's */
    assert_int_equal(h->conns[c].in_len, 5);
    bq_engine_set_writes_paused(h->e, false);
    h_close(h, c);
    c = h_open(h);
    expect_replay(h, c, "", 0);
    h_send(h, c, "peek-re");
    expect_replay(h, c, "peek-re", 7);
    h_send(h, c, "ady\r\nput 0 0 10 5\r\nab");
    expect_replay(h, c, NULL, 0); /* inside a put body */
    /* A put whose body completes while writes pause waits whole; replayed
     * as a put with its body, and answered once writes resume. */
    bq_engine_set_writes_paused(h->e, true);
    h_clear(h, c);
    h_send(h, c, "cde\r\n");
    assert_string_equal(h_out(h, c), "");
    assert_true(bq_session_blocked(h->conns[c].s));
    expect_replay(h, c, "put 0 0 10 5\r\nabcde\r\n", 21);
    bq_engine_set_writes_paused(h->e, false);
    bq_session_resume(h->conns[c].s, h->now);
    assert_string_equal(h_out(h, c), "INSERTED 1\r\n");
    h_done(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(session_put_with_body),
        cmocka_unit_test(session_pipelined_commands),
        cmocka_unit_test(session_line_of_222_chars_is_a_line),
        cmocka_unit_test(session_crlf_at_the_224_byte_boundary),
        cmocka_unit_test(session_lines_of_224_and_500_chars_are_too_long),
        cmocka_unit_test(session_overlong_line_with_stray_crs),
        cmocka_unit_test(session_stray_cr_does_not_hide_the_crlf),
        cmocka_unit_test(session_bare_lf_is_not_a_line_end),
        cmocka_unit_test(session_longest_legal_command),
        cmocka_unit_test(session_job_too_big_swallows_bytes_plus_two),
        cmocka_unit_test(session_expected_crlf_leftover_is_the_next_command),
        cmocka_unit_test(session_bad_format_put_leaves_the_body),
        cmocka_unit_test(session_quit_stops_consumption),
        cmocka_unit_test(session_nul_bytes),
        cmocka_unit_test(session_reserve_with_timeout_zero_then_more),
        cmocka_unit_test(session_binary_garbage),
        cmocka_unit_test(session_pipelined_commands_wait_behind_a_blocking_reserve),
        cmocka_unit_test(session_quit_consumes_through_its_line_only),
        cmocka_unit_test(session_idle_only_between_commands),
        cmocka_unit_test(session_job_too_big_replies_after_the_last_discarded_byte),
        cmocka_unit_test(session_command_hook_sees_every_line),
        cmocka_unit_test(session_free_drops_a_partial_put_and_returns_jobs),
        cmocka_unit_test(session_holds_writes_while_paused_then_runs_them_in_order),
        cmocka_unit_test(session_replay_carries_unanswered_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
