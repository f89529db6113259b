/* Per-connection framing of the beanstalk protocol: command lines of at most
 * 224 bytes including CRLF, put bodies of bytes+2, the discard of bytes+2
 * before JOB_TOO_BIG, and the discard of an overlong line up to its CRLF
 * before one BAD_FORMAT. Input arrives in chunks split anywhere.
 *
 * Two deliberate differences from beanstalkd, both fixes of input it
 * mishandles: a CRLF split across the 224-byte boundary of a discarded line
 * still ends it (the reference swallowed the next command), and a stray CR
 * inside a line does not hide the CRLF that follows it. */
#include "protocol/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/engine_internal.h"
#include "protocol/growbuf.h"

typedef enum {
    S_COMMAND, /* reading a command line */
    S_BODY,    /* reading a put body into job */
    S_DISCARD, /* dropping discard_left bytes, then replying discard_reply */
    S_ENDLINE, /* dropping an overlong line up to its CRLF */
    S_QUIT,    /* quit received: consume nothing more */
    S_HELD,    /* while writes pause: a writing command waits in line[0..held_len),
                  or (job set) a put whose body is complete */
} state_t;

struct bq_session {
    bq_engine_t *e;
    bq_client_t *c;
    state_t state;
    bool endline_cr; /* S_ENDLINE: the last dropped byte was CR */
    size_t line_len;
    size_t held_len; /* S_HELD */
    bq_job_t *job;   /* S_BODY */
    size_t body_have;
    uint64_t discard_left;
    const char *discard_reply;
    char line[BQ_LINE_MAX];
};

bq_session_t *bq_session_new(bq_engine_t *e, void *conn)
{
    bq_session_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->e = e;
    s->c = bq_engine_client_open(e, conn);
    if (!s->c) {
        free(s);
        return NULL;
    }
    return s;
}

void bq_session_free(bq_session_t *s, bq_now_t now)
{
    if (s->job)
        bq_engine_put_abort(s->e, s->job);
    bq_engine_client_close(s->e, s->c, now);
    free(s);
}

bool bq_session_blocked(const bq_session_t *s)
{
    return bq_engine_client_waiting(s->c) || s->state == S_HELD;
}

bool bq_session_quit(const bq_session_t *s)
{
    return s->state == S_QUIT;
}

bool bq_session_idle(const bq_session_t *s)
{
    return s->state == S_COMMAND && s->line_len == 0;
}

void bq_session_eof(bq_session_t *s, bq_now_t now)
{
    bq_engine_client_halfclose(s->e, s->c, now);
}

static void send_str(bq_session_t *s, const char *reply)
{
    bq_engine_client_send(s->e, s->c, reply, strlen(reply));
}

static void start_discard(bq_session_t *s, uint64_t n, const char *reply)
{
    s->state = S_DISCARD;
    s->discard_left = n;
    s->discard_reply = reply;
}

static void start_put(bq_session_t *s, const bq_cmd_t *cmd, bq_now_t now)
{
    bq_job_t *job;
    switch (bq_engine_put_begin(s->e, s->c, cmd, now, &job)) {
    case BQ_PUT_READ_BODY:
        s->state = S_BODY;
        s->job = job;
        s->body_have = 0;
        break;
    case BQ_PUT_TOO_BIG:
        start_discard(s, (uint64_t)cmd->bytes + 2, "JOB_TOO_BIG\r\n");
        break;
    case BQ_PUT_NO_MEMORY:
        start_discard(s, (uint64_t)cmd->bytes + 2, "OUT_OF_MEMORY\r\n");
        break;
    case BQ_PUT_DRAINING:
        start_discard(s, (uint64_t)cmd->bytes + 2, "DRAINING\r\n");
        break;
    case BQ_PUT_BAD_FORMAT:
        break;
    }
}

/* Runs one complete command line (without its CRLF). */
static void run_line(bq_session_t *s, const char *line, size_t len, bq_now_t now)
{
    bq_cmd_t cmd;
    bq_parse_status_t st = bq_parse_command(line, len, &cmd);
    if (st == BQ_PARSE_OK && s->e->writes_paused && bq_op_writes(cmd.op)) {
        s->state = S_HELD; /* line is s->line: it stays there */
        s->held_len = len;
        return;
    }
    if (s->e->hooks.command)
        s->e->hooks.command(s->c->conn, cmd.op);
    if (st == BQ_PARSE_UNKNOWN)
        send_str(s, "UNKNOWN_COMMAND\r\n");
    else if (st == BQ_PARSE_BAD_FORMAT)
        send_str(s, "BAD_FORMAT\r\n");
    else if (cmd.op == BQ_OP_QUIT)
        s->state = S_QUIT;
    else if (cmd.op == BQ_OP_PUT)
        start_put(s, &cmd, now);
    else
        bq_engine_exec(s->e, s->c, &cmd, now);
}

/* Index of the first "\r\n" in buf[from..len), or -1. */
static long find_crlf(const char *buf, size_t from, size_t len)
{
    for (size_t i = from; i + 1 < len; i++) {
        const char *cr = memchr(buf + i, '\r', len - 1 - i);
        if (!cr)
            return -1;
        i = (size_t)(cr - buf);
        if (buf[i + 1] == '\n')
            return (long)i;
    }
    return -1;
}

static size_t feed_command(bq_session_t *s, const char *data, size_t len, bq_now_t now)
{
    size_t old = s->line_len;
    size_t take = len < BQ_LINE_MAX - old ? len : BQ_LINE_MAX - old;
    memcpy(s->line + old, data, take);
    s->line_len += take;
    long cr = find_crlf(s->line, old ? old - 1 : 0, s->line_len);
    if (cr >= 0) {
        s->line_len = 0;
        run_line(s, s->line, (size_t)cr, now);
        return (size_t)cr + 2 - old;
    }
    if (s->line_len == BQ_LINE_MAX) {
        /* 224 bytes without a line end: drop the line up to its CRLF. */
        s->endline_cr = s->line[BQ_LINE_MAX - 1] == '\r';
        s->line_len = 0;
        s->state = S_ENDLINE;
    }
    return take;
}

static size_t feed_endline(bq_session_t *s, const char *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (s->endline_cr && data[i] == '\n') {
            s->state = S_COMMAND;
            s->endline_cr = false;
            send_str(s, "BAD_FORMAT\r\n");
            return i + 1;
        }
        s->endline_cr = data[i] == '\r';
    }
    return len;
}

static size_t feed_body(bq_session_t *s, const char *data, size_t len, bq_now_t now)
{
    size_t want = bq_job_body_size(s->job) - s->body_have;
    size_t n = len < want ? len : want;
    memcpy(bq_job_body(s->job) + s->body_have, data, n);
    s->body_have += n;
    if (s->body_have == bq_job_body_size(s->job) && s->e->writes_paused) {
        s->state = S_HELD; /* the put waits whole, its job kept */
    } else if (s->body_have == bq_job_body_size(s->job)) {
        bq_job_t *job = s->job;
        s->job = NULL;
        s->state = S_COMMAND;
        bq_engine_put_finish(s->e, s->c, job, now);
    }
    return n;
}

static size_t feed_discard(bq_session_t *s, size_t len)
{
    size_t n = len < s->discard_left ? len : (size_t)s->discard_left;
    s->discard_left -= n;
    if (s->discard_left == 0) {
        s->state = S_COMMAND;
        send_str(s, s->discard_reply);
    }
    return n;
}

size_t bq_session_feed(bq_session_t *s, const char *data, size_t len, bq_now_t now)
{
    size_t pos = 0;
    while (pos < len && s->state != S_QUIT && !bq_session_blocked(s)) {
        switch (s->state) {
        case S_COMMAND:
            pos += feed_command(s, data + pos, len - pos, now);
            break;
        case S_BODY:
            pos += feed_body(s, data + pos, len - pos, now);
            break;
        case S_DISCARD:
            pos += feed_discard(s, len - pos);
            break;
        case S_ENDLINE:
            pos += feed_endline(s, data + pos, len - pos);
            break;
        case S_QUIT:
        case S_HELD:
            break;
        }
    }
    return pos;
}

bq_client_t *bq_session_client(const bq_session_t *s)
{
    return s->c;
}

void bq_session_resume(bq_session_t *s, bq_now_t now)
{
    if (s->state != S_HELD || s->e->writes_paused)
        return;
    s->state = S_COMMAND;
    if (s->job) {
        bq_job_t *job = s->job;
        s->job = NULL;
        bq_engine_put_finish(s->e, s->c, job, now);
        return;
    }
    run_line(s, s->line, s->held_len, now);
}

int bq_session_replay(const bq_session_t *s, bq_now_t now, char **out, size_t *outlen)
{
    char *buf = NULL, line[96];
    size_t len = 0, cap = 0;
    bool ok = s->state == S_COMMAND || s->state == S_HELD;
    if (ok && bq_engine_client_waiting(s->c)) {
        int64_t due = bq_engine_client_wait_deadline(s->c);
        int64_t left = due == BQ_NEVER   ? -1
                       : due <= now.mono ? 0
                                         : (due - now.mono + BQ_NS_PER_S - 1) / BQ_NS_PER_S;
        int k = left < 0
                    ? snprintf(line, sizeof line, "reserve\r\n")
                    : snprintf(line, sizeof line, "reserve-with-timeout %lld\r\n", (long long)left);
        ok = bq_growbuf_append(&buf, &len, &cap, line, (size_t)k);
    }
    if (ok && s->state == S_HELD && s->job) { /* the put again, its body whole */
        const bq_job_t *j = s->job;
        int k = snprintf(line, sizeof line, "put %u %u %u %u\r\n", j->pri, j->delay, j->ttr,
                         j->body_size - 2);
        ok = bq_growbuf_append(&buf, &len, &cap, line, (size_t)k) &&
             bq_growbuf_append(&buf, &len, &cap, j->body, j->body_size);
    } else if (ok && s->state == S_HELD) {
        ok = bq_growbuf_append(&buf, &len, &cap, s->line, s->held_len) &&
             bq_growbuf_append(&buf, &len, &cap, "\r\n", 2);
    } else if (ok) {
        ok = bq_growbuf_append(&buf, &len, &cap, s->line, s->line_len);
    }
    if (!ok) {
        free(buf);
        return -1;
    }
    *out = buf;
    *outlen = len;
    return 0;
}
