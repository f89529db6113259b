/* Engines with logged histories, for the binlog's tests (replay, role
 * changes): job commands by id, reserve-job, puts of any size, and
 * every_kind(), an engine that logged every kind of record. Header-only
 * (static inline); include after engine_harness.h. */
#ifndef BQ_ENGINE_HISTORY_H
#define BQ_ENGINE_HISTORY_H

/* Sends "<verb> <id><args>\r\n" and expects reply. */
static inline void jobcmd(harness_t *h, int c, const char *verb, uint64_t id, const char *args,
                          const char *reply)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "%s %" PRIu64 "%s\r\n", verb, id, args);
    h_cmd(h, c, cmd, reply);
}

/* Reserves job id with reserve-job; body is its body (NULL: only the
 * reply's first line is checked). */
static inline void take(harness_t *h, int c, uint64_t id, const char *body)
{
    char cmd[64], head[64];
    snprintf(cmd, sizeof cmd, "reserve-job %" PRIu64 "\r\n", id);
    if (body) {
        h_cmd(h, c, cmd, h_job_reply("RESERVED", id, body));
        return;
    }
    h_clear(h, c);
    h_send(h, c, cmd);
    snprintf(head, sizeof head, "RESERVED %" PRIu64 " ", id);
    assert_true(strncmp(h_out(h, c), head, strlen(head)) == 0);
    h_clear(h, c);
}

/* A put with a body of any size (h_put's buffer is 4 KiB); returns the id. */
static inline uint64_t put_body(harness_t *h, int c, uint32_t pri, uint32_t delay, const char *body)
{
    size_t n = strlen(body);
    h_clear(h, c);
    h_sendf(h, c, "put %" PRIu32 " %" PRIu32 " 60 %zu\r\n", pri, delay, n);
    h_sendn(h, c, body, n);
    h_send(h, c, "\r\n");
    const char *out = h_out(h, c);
    assert_true(strncmp(out, "INSERTED ", 9) == 0);
    uint64_t id = strtoull(out + 9, NULL, 10);
    h_clear(h, c);
    return id;
}

/* An engine that logged every kind of record: puts (ready, delayed, in two
 * tubes, a large body), releases with a new priority and delay 0 or a
 * delay, buries, kick, kick-job of buried and delayed jobs, a delete and a
 * tube pause; no reservation is left. */
static inline harness_t *every_kind(void)
{
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    h_cmd(h, c, "use x+y/z_(1);$.\r\n", "USING x+y/z_(1);$.\r\n");
    uint64_t a = h_put(h, c, 10, 0, 60, "alpha");
    uint64_t b = h_put(h, c, 5, 30, 60, "bravo");
    uint64_t d = h_put(h, c, 1, 0, 1, "delta");
    uint64_t e = h_put(h, c, 2, 0, 120, "echo");
    uint64_t f = h_put(h, c, 3, 0, 7, "foxtrot");
    char *big = malloc(60001);
    assert_non_null(big);
    memset(big, 'g', 60000);
    big[60000] = '\0';
    uint64_t g = put_body(h, c, 100, 0, big);
    uint64_t k = h_put(h, c, 7, 50, 60, "kilo");
    uint64_t l = h_put(h, c, 8, 0, 60, "lima");
    h_cmd(h, c, "use default\r\n", "USING default\r\n");
    h_put(h, c, UINT32_MAX, 0, 1, "zulu");
    h_advance(h, H_S(1));
    take(h, c, a, "alpha");
    jobcmd(h, c, "release", a, " 20 0", "RELEASED\r\n");
    take(h, c, d, "delta");
    jobcmd(h, c, "bury", d, " 8", "BURIED\r\n");
    h_advance(h, H_S(2));
    take(h, c, e, "echo");
    jobcmd(h, c, "bury", e, " 9", "BURIED\r\n");
    take(h, c, l, "lima");
    jobcmd(h, c, "bury", l, " 11", "BURIED\r\n");
    h_cmd(h, c, "use x+y/z_(1);$.\r\n", "USING x+y/z_(1);$.\r\n");
    h_cmd(h, c, "kick 1\r\n", "KICKED 1\r\n"); /* d: buried first */
    jobcmd(h, c, "kick-job", k, "", "KICKED\r\n");
    jobcmd(h, c, "kick-job", l, "", "KICKED\r\n");
    take(h, c, f, "foxtrot");
    jobcmd(h, c, "delete", f, "", "DELETED\r\n");
    take(h, c, g, NULL);
    jobcmd(h, c, "release", g, " 100 45", "RELEASED\r\n");
    h_cmd(h, c, "pause-tube x+y/z_(1);$. 100\r\n", "PAUSED\r\n");
    h_advance(h, H_S(3));
    (void)b;
    free(big);
    h_close(h, c);
    return h;
}

#endif
