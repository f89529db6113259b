/* Unit tests of protocol/mirror.c, a client's session as a proxy sees it:
 * use and watch/ignore followed only when the server says they succeeded
 * (the watch list in beanstalkd's multiset order), commands in flight
 * counted through pipelining, put bodies and reply bodies (RESERVED, FOUND,
 * OK) split at every byte, when a session may move (no change in flight),
 * the restore bytes (commands in flight sent again, as sent) and the
 * replies they swallow, and what makes the mirror lost. The restore is also checked against the
 * real engine: fed to a fresh session, it reproduces list-tube-used and list-tubes-watched exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine_harness.h"
#include "protocol/mirror.h"

/* Feeds s one byte at a time when split, else at once. */
static void client(bq_mirror_t *m, const char *s, bool split)
{
    size_t n = strlen(s);
    for (size_t i = 0; split && i < n; i++)
        bq_mirror_client(m, s + i, 1);
    if (!split)
        bq_mirror_client(m, s, n);
}

static size_t server(bq_mirror_t *m, const char *s, bool split)
{
    size_t n = strlen(s), drop = 0;
    for (size_t i = 0; split && i < n; i++)
        drop += bq_mirror_server(m, s + i, 1);
    if (!split)
        drop = bq_mirror_server(m, s, n);
    return drop;
}

static void test_use_and_watch_follow_replies(void **state)
{
    (void)state;
    for (int split = 0; split < 2; split++) {
        bq_mirror_t *m = bq_mirror_new();
        assert_non_null(m);
        client(m, "use a\r\nwatch b\r\nwatch c\r\nignore default\r\n", split);
        assert_int_equal(bq_mirror_pending(m), 4);
        assert_string_equal(bq_mirror_use(m), "default"); /* no reply yet */
        server(m, "USING a\r\nWATCHING 2\r\nWATCHING 3\r\nWATCHING 2\r\n", split);
        assert_int_equal(bq_mirror_pending(m), 0);
        assert_string_equal(bq_mirror_use(m), "a");
        /* [default, b, c] minus default: c takes its place. */
        assert_int_equal(bq_mirror_nwatch(m), 2);
        assert_string_equal(bq_mirror_watch(m, 0), "c");
        assert_string_equal(bq_mirror_watch(m, 1), "b");
        /* A failed ignore and a bad use change nothing. */
        client(m, "ignore zz\r\nuse -bad\r\n", split);
        server(m, "NOT_IGNORED\r\nBAD_FORMAT\r\n", split);
        assert_string_equal(bq_mirror_use(m), "a");
        assert_int_equal(bq_mirror_nwatch(m), 2);
        assert_false(bq_mirror_lost(m));
        bq_mirror_free(m);
    }
}

static void test_bodies_and_movable(void **state)
{
    (void)state;
    for (int split = 0; split < 2; split++) {
        bq_mirror_t *m = bq_mirror_new();
        client(m, "put 1 0 60 5\r\nhel", split);
        assert_int_equal(bq_mirror_pending(m), 1);
        assert_false(bq_mirror_movable(m)); /* a body half sent */
        client(m, "lo\r\n", split);
        assert_false(bq_mirror_movable(m)); /* a put waits for its reply */
        server(m, "INSERTED 7\r\n", split);
        assert_true(bq_mirror_movable(m));
        client(m, "reserve\r\n", split);
        assert_true(bq_mirror_movable(m)); /* a reserve changed nothing yet */
        server(m, "RESERVED 7 5\r\nhe", split);
        assert_false(bq_mirror_movable(m)); /* a reply half received */
        server(m, "llo\r\n", split);
        assert_true(bq_mirror_movable(m));
        assert_int_equal(bq_mirror_pending(m), 0);
        /* Bodies that look like replies or commands are only bodies. */
        client(m, "peek 7\r\nput 0 0 1 9\r\nuse x\r\n\r\n", split);
        server(m, "FOUND 7 9\r\nUSING y\r\n\r\nINSERTED 8\r\n", split);
        assert_string_equal(bq_mirror_use(m), "default");
        client(m, "stats\r\n", split);
        server(m, "OK 3\r\nab\n\r\n", split);
        assert_int_equal(bq_mirror_pending(m), 0);
        client(m, "reserve-with-timeout 5\r\nstats-tube default\r\n", split);
        assert_true(bq_mirror_movable(m)); /* both may be sent again */
        client(m, "delete 7\r\n", split);
        assert_false(bq_mirror_movable(m)); /* a delete may have been done */
        server(m, "TIMED_OUT\r\nNOT_FOUND\r\nNOT_FOUND\r\n", split);
        assert_true(bq_mirror_movable(m));
        const char *changes[] = {"release 1 0 0\r\n", "bury 1 0\r\n",   "touch 1\r\n",
                                 "kick 1\r\n",        "kick-job 1\r\n", "pause-tube x 1\r\n"};
        for (size_t i = 0; i < 6; i++) {
            client(m, changes[i], split);
            assert_false(bq_mirror_movable(m));
            server(m, "NOT_FOUND\r\n", split);
        }
        assert_true(bq_mirror_movable(m));
        assert_false(bq_mirror_lost(m));
        bq_mirror_free(m);
    }
}

/* A session restored on a fresh engine session: the same tube used and
 * the same watch list, in order; the restore replies are swallowed and the
 * reserves in flight and the partial line sent again. */
static void test_restore_on_the_engine(void **state)
{
    (void)state;
    bq_mirror_t *m = bq_mirror_new();
    harness_t *h = h_new(0);
    int c = h_open(h);
    const char *setup = "use jobs\r\nwatch b\r\nwatch default\r\nwatch c\r\nignore default\r\n"
                        "watch default\r\nignore b\r\n";
    client(m, setup, false);
    h_send(h, c, setup);
    assert_int_equal(bq_mirror_server(m, h_out(h, c), strlen(h_out(h, c))), 0);
    h_clear(h, c);
    h_send(h, c, "list-tubes-watched\r\n");
    char want[256];
    snprintf(want, sizeof want, "%s", h_out(h, c));
    h_clear(h, c);
    client(m, "reserve-with-timeout 0\r\npeek 9\r\nlist-tu", false);
    assert_true(bq_mirror_movable(m));

    char *bytes;
    size_t len, restores;
    assert_int_equal(bq_mirror_restore(m, &bytes, &len, &restores), 0);
    harness_t *h2 = h_new(0);
    int c2 = h_open(h2);
    h_sendn(h2, c2, bytes, len);
    h_advance(h2, H_MS(1)); /* the reserve's timeout */
    h_send(h2, c2, "bes-watched\r\n");
    client(m, "bes-watched\r\n", false);
    const char *out = h_out(h2, c2);
    size_t drop = bq_mirror_server(m, out, strlen(out));
    /* The client sees the reserve's reply and its own command's, nothing of
     * the restore. */
    const char *seen = out + drop;
    /* The peek in flight, sent again, gets the new server's answer. */
    assert_true(strncmp(seen, "TIMED_OUT\r\nNOT_FOUND\r\n", 22) == 0);
    assert_string_equal(seen + 22, want);
    assert_true(restores >= 4);
    assert_string_equal(bq_mirror_use(m), "jobs");
    h_clear(h2, c2);
    h_send(h2, c2, "list-tube-used\r\n");
    assert_string_equal(h_out(h2, c2), "USING jobs\r\n");
    assert_false(bq_mirror_lost(m));
    free(bytes);
    h_close(h, c);
    h_close(h2, c2);
    h_done(h);
    h_done(h2);
    bq_mirror_free(m);
}

/* A restore's bytes and count, and its replies swallowed. */
static void test_restore_replies(void **state)
{
    (void)state;
    bq_mirror_t *m = bq_mirror_new();
    client(m, "use q\r\nwatch q\r\n", false);
    server(m, "USING q\r\nWATCHING 2\r\n", false);
    char *bytes;
    size_t len, restores;
    assert_int_equal(bq_mirror_restore(m, &bytes, &len, &restores), 0);
    assert_int_equal(restores, 2);
    assert_memory_equal(bytes, "use q\r\nwatch q\r\n", len);
    /* The new server's replies to them are dropped, and nothing else. */
    assert_int_equal(server(m, "USING q\r\nWATCHING 2\r\n", false), 9 + 12);
    assert_int_equal(bq_mirror_pending(m), 0);
    assert_string_equal(bq_mirror_use(m), "q");
    assert_int_equal(bq_mirror_nwatch(m), 2);
    free(bytes);
    /* A default session restores nothing. */
    bq_mirror_t *d = bq_mirror_new();
    assert_int_equal(bq_mirror_restore(d, &bytes, &len, &restores), 0);
    assert_int_equal(len, 0);
    assert_int_equal(restores, 0);
    free(bytes);
    bq_mirror_free(d);
    bq_mirror_free(m);
}

/* A session served locally (its engine client's use and watch list) set
 * into a fresh mirror restores exactly on another engine; unanswered
 * counts the client's commands, not the restores. */
static void test_set_session_from_an_engine_client(void **state)
{
    (void)state;
    harness_t *h = h_new(0);
    int c = h_open(h);
    h_send(h, c, "use jobs\r\nwatch b\r\nwatch a\r\nignore default\r\nwatch c\r\nignore b\r\n");
    h_clear(h, c);
    h_send(h, c, "list-tubes-watched\r\n");
    char want[256];
    snprintf(want, sizeof want, "%s", h_out(h, c));
    bq_client_t *ec = bq_session_client(h->conns[c].s);
    const char *watch[8];
    size_t nwatch = bq_engine_client_nwatch(ec);
    assert_true(nwatch == 2);
    for (size_t i = 0; i < nwatch; i++)
        watch[i] = bq_engine_client_watch(ec, i);
    bq_mirror_t *m = bq_mirror_new();
    assert_int_equal(bq_mirror_set_session(m, bq_engine_client_use(ec), watch, nwatch), 0);
    assert_int_equal(bq_mirror_set_session(m, "x", watch, 0), -1);
    char *bytes;
    size_t len, restores;
    assert_int_equal(bq_mirror_restore(m, &bytes, &len, &restores), 0);
    client(m, "list-tubes-watched\r\n", false);
    assert_int_equal(bq_mirror_unanswered(m), 1);
    assert_int_equal(bq_mirror_pending(m), restores + 1);
    harness_t *h2 = h_new(0);
    int c2 = h_open(h2);
    h_sendn(h2, c2, bytes, len);
    h_send(h2, c2, "list-tubes-watched\r\n");
    const char *out = h_out(h2, c2);
    size_t drop = bq_mirror_server(m, out, strlen(out));
    assert_string_equal(out + drop, want);
    assert_int_equal(bq_mirror_unanswered(m), 0);
    assert_string_equal(bq_mirror_use(m), "jobs");
    free(bytes);
    bq_mirror_free(m);
    h_close(h, c);
    h_close(h2, c2);
    h_done(h);
    h_done(h2);
}

static void test_lost(void **state)
{
    (void)state;
    char longline[300];
    memset(longline, 'a', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    const char *cases[] = {longline, "put 0 0 60 5 extra\r\nhello\r\n", "quit\r\n"};
    for (size_t i = 0; i < 3; i++) {
        bq_mirror_t *m = bq_mirror_new();
        client(m, cases[i], false);
        assert_false(bq_mirror_movable(m));
        char *b;
        size_t len, r;
        assert_int_equal(bq_mirror_restore(m, &b, &len, &r), -1);
        bq_mirror_free(m);
    }
    bq_mirror_t *m = bq_mirror_new();
    server(m, "INSERTED 1\r\n", false); /* a reply with no command */
    assert_true(bq_mirror_lost(m));
    bq_mirror_free(m);
    /* A restore the new server refuses: lost. */
    m = bq_mirror_new();
    client(m, "use a\r\n", false);
    server(m, "USING a\r\n", false);
    char *b;
    size_t len, r;
    assert_int_equal(bq_mirror_restore(m, &b, &len, &r), 0);
    free(b);
    server(m, "OUT_OF_MEMORY\r\n", false);
    assert_true(bq_mirror_lost(m));
    bq_mirror_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_use_and_watch_follow_replies),
        cmocka_unit_test(test_bodies_and_movable),
        cmocka_unit_test(test_restore_on_the_engine),
        cmocka_unit_test(test_restore_replies),
        cmocka_unit_test(test_lost),
        cmocka_unit_test(test_set_session_from_an_engine_client),
    };
    return cmocka_run_group_tests_name("mirror", tests, NULL, NULL);
}
