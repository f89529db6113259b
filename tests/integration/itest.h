/* Shared fixture for the protocol integration tests (tests/integration/
 * test_*.c): every test gets a fresh server ($BQ_SERVER, our binary by
 * default) on a free loopback port and one client connection. The helpers
 * read "OK <n>" YAML replies, compare them line by line (time fields within
 * +-1 s), and detect the Debian 1.12 reference, whose known differences from
 * 1.13 (quoted YAML strings, strict reserve-with-timeout parsing, the CRLF
 * at the 224-byte boundary) are skipped there instead of failed.
 *
 * Everything is static inline so that each test file compiles in what it
 * uses without unused-function warnings. Include after <cmocka.h>. */
#ifndef BQ_ITEST_H
#define BQ_ITEST_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/bqtest.h"

/* Lower bound for "waited at least N ms": bqt_now_ms() truncates both ends
 * of a measurement to whole milliseconds, which can lose up to 1 ms. */
#define IT_MS_SLACK 1

/* A cmocka test with a fresh default server and connection in *state. */
#define IT_TEST(f) cmocka_unit_test_setup_teardown(f, it_setup, it_teardown)

typedef struct it_ctx {
    bqt_server_t srv;
    int fd;        /* the first client connection */
    bool ref112;   /* the server under test reports version 1.12 */
    pid_t spawned; /* a server the test started itself; teardown kills it */
} it_ctx_t;

/* Asks `stats` on t->fd whether the server under test is the 1.12
 * reference. Done once in setup, before the test's own commands: stats
 * changes no per-connection state, only cmd-stats. */
static inline void it_ask_version(it_ctx_t *t)
{
    char *v = bqt_stat(t->fd, "stats\r\n", "version");
    assert_non_null(v);
    /* bqt_stat strips YAML quotes; accept either form. */
    t->ref112 = strcmp(v, "1.12") == 0 || strcmp(v, "\"1.12\"") == 0;
    free(v);
}

/* Starts the server with extra_args (NULL-terminated, may be NULL), on TCP
 * or on unix:<dir>/sock, and opens one connection; returns 0 or -1 (cmocka
 * then reports a setup failure). */
static inline int it_start_on(void **state, bool unix_socket, const char *const *extra_args)
{
    it_ctx_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return -1;
    int r = unix_socket ? bqt_server_start_unix(&t->srv, bqt_our_binary(), extra_args)
                        : bqt_server_start(&t->srv, bqt_our_binary(), extra_args);
    if (r != 0) {
        free(t);
        return -1;
    }
    t->fd = unix_socket ? bqt_connect_unix(t->srv.unix_path) : bqt_connect(t->srv.port);
    if (t->fd < 0) {
        bqt_server_stop(&t->srv);
        free(t);
        return -1;
    }
    *state = t;
    it_ask_version(t);
    return 0;
}

/* it_start_on over TCP. */
static inline int it_start(void **state, const char *const *extra_args)
{
    return it_start_on(state, false, extra_args);
}

/* cmocka setup: the server with default flags. */
static inline int it_setup(void **state)
{
    return it_start(state, NULL);
}

/* cmocka teardown for it_start/it_setup. */
static inline int it_teardown(void **state)
{
    it_ctx_t *t = *state;
    if (t == NULL)
        return 0;
    if (t->fd >= 0)
        close(t->fd);
    if (t->spawned > 0) {
        kill(t->spawned, SIGKILL);
        waitpid(t->spawned, NULL, 0);
    }
    bqt_server_stop(&t->srv);
    free(t);
    *state = NULL;
    return 0;
}

/* Reads an "OK <n>\r\n<n bytes>\r\n" reply and returns the n bytes as a
 * malloc'd string; fails the test on any other reply or short read. */
static inline char *it_read_ok(int fd)
{
    char *line = bqt_expect_prefix(fd, "OK ");
    char *end = NULL;
    long n = strtol(line + 3, &end, 10);
    assert_true(n >= 0 && end != line + 3);
    assert_string_equal(end, "\r\n");
    free(line);
    char *body = malloc((size_t)n + 3);
    assert_non_null(body);
    size_t got = bqt_read_n(fd, body, (size_t)n + 2, BQT_DEADLINE_MS);
    assert_int_equal(got, (size_t)n + 2);
    assert_memory_equal(body + n, "\r\n", 2);
    body[n] = '\0';
    return body;
}

/* Sends cmd and returns the YAML body of its OK reply (malloc'd). */
static inline char *it_ok(int fd, const char *cmd)
{
    bqt_sends(fd, cmd);
    return it_read_ok(fd);
}

/* The value of `key` in a YAML body as a malloc'd string, NULL if absent. */
static inline char *it_yaml_get(const char *body, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = body; p != NULL && *p != '\0'; p = strchr(p, '\n')) {
        if (*p == '\n')
            p++;
        if (strncmp(p, key, klen) == 0 && p[klen] == ':' && p[klen + 1] == ' ') {
            const char *v = p + klen + 2;
            size_t vlen = strcspn(v, "\n");
            char *out = malloc(vlen + 1);
            assert_non_null(out);
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return out;
        }
    }
    return NULL;
}

/* True when the server under test is the 1.12 reference. */
static inline bool it_is_ref112(const it_ctx_t *t)
{
    return t->ref112;
}

/* Prints why an assertion is not made against the 1.12 reference. */
static inline void it_note_skip(const char *what)
{
    fprintf(stderr, "[  NOTE    ] skipped on the 1.12 reference: %s\n", what);
}

/* Keys whose string values 1.13 quotes and 1.12 does not. */
static inline bool it_quoted_key(const char *line)
{
    static const char *const keys[] = {"name: ", "tube: ", "hostname: ", "os: ", "platform: "};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strncmp(line, keys[i], strlen(keys[i])) == 0)
            return true;
    return false;
}

/* True when line's key is one of the comma-separated names in `fuzzy`. */
static inline bool it_fuzzy_key(const char *line, const char *fuzzy)
{
    size_t klen = strcspn(line, ":");
    for (const char *f = fuzzy; f != NULL && *f != '\0';) {
        size_t flen = strcspn(f, ",");
        if (flen == klen && strncmp(f, line, klen) == 0)
            return true;
        f += flen + (f[flen] == ',');
    }
    return false;
}

/* Compares one YAML line: exact, or for a fuzzy key an integer within +-1. */
static inline void it_compare_line(const char *got, const char *want, const char *fuzzy)
{
    if (!it_fuzzy_key(want, fuzzy)) {
        assert_string_equal(got, want);
        return;
    }
    size_t klen = strcspn(want, ":") + 2;
    assert_memory_equal(got, want, klen);
    long long g = strtoll(got + klen, NULL, 10);
    long long w = strtoll(want + klen, NULL, 10);
    if (g < w - 1 || g > w + 1)
        fail_msg("'%s' is not within 1 of '%s'", got, want);
}

/* Compares a YAML body line by line with `want` (1.13 form). Keys listed in
 * `fuzzy` ("age,time-left") may differ by 1. On the 1.12 reference the
 * quoted-string lines are skipped. */
static inline void it_expect_yaml(it_ctx_t *t, const char *got, const char *want, const char *fuzzy)
{
    char *g = strdup(got), *w = strdup(want);
    assert_true(g != NULL && w != NULL);
    char *gs = NULL, *ws = NULL;
    char *gl = strtok_r(g, "\n", &gs), *wl = strtok_r(w, "\n", &ws);
    for (; gl != NULL && wl != NULL;
         gl = strtok_r(NULL, "\n", &gs), wl = strtok_r(NULL, "\n", &ws)) {
        if (it_quoted_key(wl) && it_is_ref112(t)) {
            it_note_skip(wl);
            assert_memory_equal(gl, wl, strcspn(wl, ":") + 1);
            continue;
        }
        it_compare_line(gl, wl, fuzzy);
    }
    if (gl != NULL || wl != NULL)
        fail_msg("YAML line count differs: got\n%s\nwant\n%s", got, want);
    free(g);
    free(w);
}

/* Sends a put with body and expects "INSERTED <id>". */
static inline void it_put(int fd, const char *args, const char *body, unsigned long long id)
{
    char buf[512];
    snprintf(buf, sizeof buf, "put %s %zu\r\n", args, strlen(body));
    bqt_sends(fd, buf);
    bqt_sends(fd, body);
    bqt_sends(fd, "\r\n");
    snprintf(buf, sizeof buf, "INSERTED %llu\r\n", id);
    bqt_expect(fd, buf);
}

/* Expects "<word> <id> <len>\r\n<body>\r\n" (word: RESERVED or FOUND). */
static inline void it_expect_job(int fd, const char *word, unsigned long long id, const char *body)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s %llu %zu\r\n%s\r\n", word, id, strlen(body), body);
    bqt_expect(fd, buf);
}

/* Sends cmd and expects the single reply line `reply`. */
static inline void it_cmd(int fd, const char *cmd, const char *reply)
{
    bqt_sends(fd, cmd);
    bqt_expect(fd, reply);
}

/* The value of `key` in `stats-job <id>` (malloc'd). */
static inline char *it_job_stat(int fd, unsigned long long id, const char *key)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "stats-job %llu\r\n", id);
    char *v = bqt_stat(fd, cmd, key);
    assert_non_null(v);
    return v;
}

/* Asserts that `stats-job <id>` shows `state: <state>`. */
static inline void it_expect_state(int fd, unsigned long long id, const char *state)
{
    char *v = it_job_stat(fd, id, "state");
    assert_string_equal(v, state);
    free(v);
}

/* The connection from which to poll for the TTR expiry of a job that
 * `holder` reserved: a fresh one, so the holder stays idle and only the
 * server's timer can expire the job. On the 1.12 reference it is the holder
 * itself, because beanstalkd sometimes misses the expiry for an idle holder
 * until it sends a command (seen about once in 30 runs under load: prottick
 * takes the connection off its timer heap when tickat <= now, and
 * conn_timeout, reading the microsecond clock again, finds the deadline not
 * yet passed when both fall in the same microsecond, and does not put the
 * connection back). Close with it_unpoll(). */
static inline int it_ttr_poller(it_ctx_t *t, int holder)
{
    if (it_is_ref112(t)) {
        it_note_skip("idle-holder TTR expiry (polling from the holder instead)");
        return holder;
    }
    return bqt_client(&t->srv);
}

/* Closes a connection from it_ttr_poller unless it is the holder. */
static inline void it_unpoll(int fd, int holder)
{
    if (fd != holder)
        close(fd);
}

/* What it_wait_stat polls for. */
typedef struct it_stat_wait {
    int fd;
    const char *cmd;
    const char *key;
    const char *want;
} it_stat_wait_t;

static inline bool it_stat_matches(void *arg)
{
    const it_stat_wait_t *w = arg;
    char *v = bqt_stat(w->fd, w->cmd, w->key);
    bool ok = v != NULL && strcmp(v, w->want) == 0;
    free(v);
    return ok;
}

/* Polls `cmd` on fd until its `key` equals want; fails the test after
 * timeout_ms. */
static inline void it_wait_stat(int fd, const char *cmd, const char *key, const char *want,
                                int timeout_ms)
{
    it_stat_wait_t w = {fd, cmd, key, want};
    if (!bqt_wait_until(it_stat_matches, &w, timeout_ms))
        fail_msg("%s did not reach %s: %s within %d ms", cmd, key, want, timeout_ms);
}

#endif
