/* The reply-stream checker: reassembles reply lines and bodies from pieces
 * of any size and matches each line against the table of replies the
 * beanstalk protocol defines (protocol.txt and beanstalkd 1.13). Anything
 * else, INTERNAL_ERROR included, is a violation: the engine has no reason to
 * send it for any input. */
#include "reply_check.h"

#include <string.h>

#include "fuzz.h"
#include "protocol/parse.h"

typedef enum { A_NONE, A_ID, A_NUM, A_NAME } arg_t;

typedef struct {
    const char *word;
    arg_t arg[2];
    bool body; /* followed by <last numeric argument> bytes and CRLF */
} shape_t;

static const shape_t shapes[] = {
    {"RESERVED", {A_ID, A_NUM}, true},
    {"FOUND", {A_ID, A_NUM}, true},
    {"OK", {A_NUM, A_NONE}, true},
    {"INSERTED", {A_ID, A_NONE}, false},
    {"KICKED", {A_NUM, A_NONE}, false},
    {"KICKED", {A_NONE, A_NONE}, false},
    {"WATCHING", {A_NUM, A_NONE}, false},
    {"USING", {A_NAME, A_NONE}, false},
    {"DELETED", {A_NONE, A_NONE}, false},
    {"RELEASED", {A_NONE, A_NONE}, false},
    {"BURIED", {A_NONE, A_NONE}, false},
    {"TOUCHED", {A_NONE, A_NONE}, false},
    {"NOT_FOUND", {A_NONE, A_NONE}, false},
    {"NOT_IGNORED", {A_NONE, A_NONE}, false},
    {"PAUSED", {A_NONE, A_NONE}, false},
    {"TIMED_OUT", {A_NONE, A_NONE}, false},
    {"DEADLINE_SOON", {A_NONE, A_NONE}, false},
    {"BAD_FORMAT", {A_NONE, A_NONE}, false},
    {"UNKNOWN_COMMAND", {A_NONE, A_NONE}, false},
    {"JOB_TOO_BIG", {A_NONE, A_NONE}, false},
    {"EXPECTED_CRLF", {A_NONE, A_NONE}, false},
    {"DRAINING", {A_NONE, A_NONE}, false},
    {"OUT_OF_MEMORY", {A_NONE, A_NONE}, false},
};

void bqf_reply_init(bqf_reply_stream_t *s, uint32_t max_job_size, bqf_reply_cb *cb, void *arg)
{
    memset(s, 0, sizeof *s);
    s->cb = cb;
    s->arg = arg;
    s->max_job_size = max_job_size;
}

void bqf_reply_free(bqf_reply_stream_t *s)
{
    free(s->body);
    s->body = NULL;
}

bool bqf_reply_idle(const bqf_reply_stream_t *s)
{
    return s->line_len == 0 && s->body == NULL;
}

/* A decimal u64 without sign or leading zeros ("0" itself is allowed). */
static bool read_num(const char **pp, const char *end, uint64_t *out)
{
    const char *p = *pp;
    uint64_t v = 0;
    if (p == end || *p < '0' || *p > '9' || (*p == '0' && p + 1 < end && p[1] != ' '))
        return false;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *pp = p;
    *out = v;
    return true;
}

/* Matches line[0..len) (no CRLF) against shape sh, filling *r. */
static bool match(const shape_t *sh, const char *line, size_t len, bqf_reply_t *r)
{
    size_t wl = strlen(sh->word);
    const char *p = line + wl, *end = line + len;
    int nnum = 0;
    if (len < wl || memcmp(line, sh->word, wl) != 0)
        return false;
    memset(r, 0, sizeof *r);
    r->word = sh->word;
    for (int i = 0; i < 2 && sh->arg[i] != A_NONE; i++) {
        if (p == end || *p != ' ')
            return false;
        p++;
        if (sh->arg[i] == A_NAME) {
            r->name = p;
            r->name_len = (size_t)(end - p);
            p = end;
            if (!bq_tube_name_valid(r->name, r->name_len))
                return false;
        } else if (!read_num(&p, end, &r->num[nnum]) || (sh->arg[i] == A_ID && !r->num[nnum])) {
            return false;
        } else {
            nnum++;
        }
    }
    return p == end;
}

/* Handles one complete reply line (CRLF stripped). */
static void line_done(bqf_reply_stream_t *s, const char *line, size_t len)
{
    const shape_t *sh = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !sh; i++) {
        if (match(&shapes[i], line, len, &s->cur))
            sh = &shapes[i];
    }
    BQF_CHECK(sh != NULL, "malformed or unexpected reply line \"%.*s\"", (int)len, line);
    if (!sh->body) {
        s->cb(s->arg, &s->cur);
        return;
    }
    uint64_t n = sh->arg[1] == A_NUM ? s->cur.num[1] : s->cur.num[0];
    uint64_t limit = sh->arg[1] == A_NUM ? s->max_job_size : BQF_REPLY_BODY_MAX;
    BQF_CHECK(n <= limit, "%s announces %llu bytes (limit %llu)", sh->word, (unsigned long long)n,
              (unsigned long long)limit);
    s->body_want = (size_t)n + 2;
    s->body_have = 0;
    s->body = malloc(s->body_want);
    BQF_CHECK(s->body != NULL, "out of memory");
}

/* Consumes body bytes; returns how many. */
static size_t feed_body(bqf_reply_stream_t *s, const char *data, size_t len)
{
    size_t n = s->body_want - s->body_have;
    if (n > len)
        n = len;
    memcpy(s->body + s->body_have, data, n);
    s->body_have += n;
    if (s->body_have == s->body_want) {
        BQF_CHECK(memcmp(s->body + s->body_want - 2, "\r\n", 2) == 0,
                  "%s body of %zu bytes not followed by CRLF", s->cur.word, s->body_want - 2);
        s->cur.body = s->body;
        s->cur.body_len = s->body_want - 2;
        s->cb(s->arg, &s->cur);
        free(s->body);
        s->body = NULL;
    }
    return n;
}

/* Consumes line bytes up to and including a LF; returns how many. */
static size_t feed_line(bqf_reply_stream_t *s, const char *data, size_t len)
{
    const char *lf = memchr(data, '\n', len);
    size_t n = lf ? (size_t)(lf - data) + 1 : len;
    BQF_CHECK(s->line_len + n <= BQF_REPLY_LINE_MAX, "reply line longer than %d bytes",
              BQF_REPLY_LINE_MAX);
    memcpy(s->line + s->line_len, data, n);
    s->line_len += n;
    if (!lf)
        return n;
    size_t ll = s->line_len;
    BQF_CHECK(ll >= 2 && s->line[ll - 2] == '\r', "reply line ends with LF without CR");
    BQF_CHECK(memchr(s->line, '\r', ll - 2) == NULL, "CR inside a reply line");
    s->line_len = 0;
    line_done(s, s->line, ll - 2);
    return n;
}

void bqf_reply_feed(bqf_reply_stream_t *s, const char *data, size_t len)
{
    size_t pos = 0;
    while (pos < len) {
        if (s->body)
            pos += feed_body(s, data + pos, len - pos);
        else
            pos += feed_line(s, data + pos, len - pos);
    }
}
