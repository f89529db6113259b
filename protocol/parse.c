/* Command-line parser: one beanstalk command line in, one bq_cmd_t out.
 *
 * The line is a byte range that is not NUL-terminated, so every reader here
 * works on a [p, end) cursor and never looks at *end. The behaviour mirrors
 * beanstalkd 1.13 (prot.c which_cmd, dispatch_cmd, read_u32/read_u64,
 * read_tube_name, is_valid_tube), including its quirks: prefix matching in a
 * fixed order, exact-length checks on argument-less commands, trailing text
 * ignored by reserve-with-timeout and kick, and kick's strtoul semantics.
 * Nothing is allocated; names borrow the caller's line. */
#include "protocol/parse.h"

#include <limits.h>
#include <string.h>

typedef bq_parse_status_t (*arg_parser_fn)(const char *p, const char *end, bq_cmd_t *cmd);

typedef struct {
    const char *name; /* includes the trailing space where beanstalkd's does */
    size_t len;
    bq_op_t op;
    arg_parser_fn parse;
} cmd_entry_t;

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_name_char(char c)
{
    static const char punct[] = "-+/;.$_()";

    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_digit(c))
        return true;
    return memchr(punct, c, sizeof(punct) - 1) != NULL;
}

/* isspace() in the C locale, which is what kick's strtoul skips. */
static bool is_c_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Reads decimal digits at *pp into *out. Returns false on overflow of 64
 * bits; *pp always ends after the last digit, like strtoumax's end. */
static bool read_digits(const char **pp, const char *end, uint64_t *out)
{
    const char *p = *pp;
    uint64_t v = 0;
    bool overflow = false;

    for (; p < end && is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
    }
    *pp = p;
    *out = v;
    return !overflow;
}

/* beanstalkd's read_u64/read_u32 with an end pointer: skip spaces, require a
 * digit, read a decimal number no larger than max. Advances *pp on success. */
static bool read_uint(const char **pp, const char *end, uint64_t max, uint64_t *out)
{
    const char *p = *pp;
    uint64_t v;

    while (p < end && *p == ' ')
        p++;
    if (p == end || !is_digit(*p))
        return false;
    if (!read_digits(&p, end, &v) || v > max)
        return false;
    *pp = p;
    *out = v;
    return true;
}

static bool read_u32(const char **pp, const char *end, uint32_t *out)
{
    uint64_t v;

    if (!read_uint(pp, end, UINT32_MAX, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool read_u64(const char **pp, const char *end, uint64_t *out)
{
    return read_uint(pp, end, UINT64_MAX, out);
}

/* <id> with nothing after it: peek, delete, touch, kick-job, reserve-job, stats-job. */
static bq_parse_status_t parse_id(const char *p, const char *end, bq_cmd_t *cmd)
{
    if (!read_u64(&p, end, &cmd->id) || p != end)
        return BQ_PARSE_BAD_FORMAT;
    return BQ_PARSE_OK;
}

/* Argument-less commands must match their name exactly. */
static bq_parse_status_t parse_exact(const char *p, const char *end, bq_cmd_t *cmd)
{
    (void)cmd;
    return p == end ? BQ_PARSE_OK : BQ_PARSE_BAD_FORMAT;
}

/* quit accepts any text after its name. */
static bq_parse_status_t parse_any(const char *p, const char *end, bq_cmd_t *cmd)
{
    (void)p;
    (void)end;
    (void)cmd;
    return BQ_PARSE_OK;
}

/* put <pri> <delay> <ttr> <bytes>: trailing text is flagged, not refused,
 * because beanstalkd answers JOB_TOO_BIG before it looks at it. */
static bq_parse_status_t parse_put(const char *p, const char *end, bq_cmd_t *cmd)
{
    if (!read_u32(&p, end, &cmd->pri) || !read_u32(&p, end, &cmd->delay) ||
        !read_u32(&p, end, &cmd->ttr) || !read_u32(&p, end, &cmd->bytes))
        return BQ_PARSE_BAD_FORMAT;
    cmd->put_trailing = p != end;
    return BQ_PARSE_OK;
}

static bq_parse_status_t parse_release(const char *p, const char *end, bq_cmd_t *cmd)
{
    if (!read_u64(&p, end, &cmd->id) || !read_u32(&p, end, &cmd->pri) ||
        !read_u32(&p, end, &cmd->delay) || p != end)
        return BQ_PARSE_BAD_FORMAT;
    return BQ_PARSE_OK;
}

static bq_parse_status_t parse_bury(const char *p, const char *end, bq_cmd_t *cmd)
{
    if (!read_u64(&p, end, &cmd->id) || !read_u32(&p, end, &cmd->pri) || p != end)
        return BQ_PARSE_BAD_FORMAT;
    return BQ_PARSE_OK;
}

/* reserve-with-timeout <seconds>: text after the number is ignored, and the
 * value must fit in an int. */
static bq_parse_status_t parse_reserve_timeout(const char *p, const char *end, bq_cmd_t *cmd)
{
    uint32_t t;

    if (!read_u32(&p, end, &t) || t > INT_MAX)
        return BQ_PARSE_BAD_FORMAT;
    cmd->timeout = (int32_t)t;
    return BQ_PARSE_OK;
}

/* kick <bound>: strtoul(p, &end, 10) with a 64-bit unsigned long, truncated to
 * 32 bits. Whitespace and one sign may lead; text after the digits is ignored;
 * only "no digits" and overflow are errors; '-' negates modulo 2^64. */
static bq_parse_status_t parse_kick(const char *p, const char *end, bq_cmd_t *cmd)
{
    bool negative = false;
    uint64_t v;

    while (p < end && is_c_space(*p))
        p++;
    if (p < end && (*p == '+' || *p == '-')) {
        negative = *p == '-';
        p++;
    }
    if (p == end || !is_digit(*p))
        return BQ_PARSE_BAD_FORMAT;
    if (!read_digits(&p, end, &v))
        return BQ_PARSE_BAD_FORMAT;
    if (negative)
        v = 0 - v;
    cmd->count = (uint32_t)v;
    return BQ_PARSE_OK;
}

/* use, watch, ignore, stats-tube: the rest of the line, verbatim, is the name. */
static bq_parse_status_t parse_name(const char *p, const char *end, bq_cmd_t *cmd)
{
    size_t n = (size_t)(end - p);

    if (!bq_tube_name_valid(p, n))
        return BQ_PARSE_BAD_FORMAT;
    cmd->name = p;
    cmd->name_len = n;
    return BQ_PARSE_OK;
}

/* pause-tube <name> <delay>: spaces, the longest run of name characters, then
 * a delay with nothing after it. The name is not validated here (beanstalkd
 * counts the command first); the engine does it. */
static bq_parse_status_t parse_pause_tube(const char *p, const char *end, bq_cmd_t *cmd)
{
    const char *name;

    while (p < end && *p == ' ')
        p++;
    name = p;
    while (p < end && is_name_char(*p))
        p++;
    if (p == name)
        return BQ_PARSE_BAD_FORMAT;
    cmd->name = name;
    cmd->name_len = (size_t)(p - name);
    if (!read_u32(&p, end, &cmd->delay) || p != end)
        return BQ_PARSE_BAD_FORMAT;
    return BQ_PARSE_OK;
}

#define CMD(s, op, fn)                                                                             \
    {                                                                                              \
        s, sizeof(s) - 1, op, fn                                                                   \
    }

/* Order matters: the first entry whose name is a prefix of the line wins. */
static const cmd_entry_t commands[] = {
    CMD("put ", BQ_OP_PUT, parse_put),
    CMD("peek ", BQ_OP_PEEK, parse_id),
    CMD("peek-ready", BQ_OP_PEEK_READY, parse_exact),
    CMD("peek-delayed", BQ_OP_PEEK_DELAYED, parse_exact),
    CMD("peek-buried", BQ_OP_PEEK_BURIED, parse_exact),
    CMD("reserve-with-timeout ", BQ_OP_RESERVE_TIMEOUT, parse_reserve_timeout),
    CMD("reserve-job ", BQ_OP_RESERVE_JOB, parse_id),
    CMD("reserve", BQ_OP_RESERVE, parse_exact),
    CMD("delete ", BQ_OP_DELETE, parse_id),
    CMD("release ", BQ_OP_RELEASE, parse_release),
    CMD("bury ", BQ_OP_BURY, parse_bury),
    CMD("kick ", BQ_OP_KICK, parse_kick),
    CMD("kick-job ", BQ_OP_KICK_JOB, parse_id),
    CMD("touch ", BQ_OP_TOUCH, parse_id),
    CMD("stats-job ", BQ_OP_STATS_JOB, parse_id),
    CMD("stats-tube ", BQ_OP_STATS_TUBE, parse_name),
    CMD("stats", BQ_OP_STATS, parse_exact),
    CMD("use ", BQ_OP_USE, parse_name),
    CMD("watch ", BQ_OP_WATCH, parse_name),
    CMD("ignore ", BQ_OP_IGNORE, parse_name),
    CMD("list-tubes-watched", BQ_OP_LIST_TUBES_WATCHED, parse_exact),
    CMD("list-tube-used", BQ_OP_LIST_TUBE_USED, parse_exact),
    CMD("list-tubes", BQ_OP_LIST_TUBES, parse_exact),
    CMD("quit", BQ_OP_QUIT, parse_any),
    CMD("pause-tube", BQ_OP_PAUSE_TUBE, parse_pause_tube),
};

#undef CMD

/* Puts *cmd in its initial state for op: all zero, timeout -1 for reserve. */
static void reset(bq_cmd_t *cmd, bq_op_t op)
{
    memset(cmd, 0, sizeof(*cmd));
    cmd->op = op;
    cmd->timeout = op == BQ_OP_RESERVE ? -1 : 0;
}

static const cmd_entry_t *find_command(const char *line, size_t len)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        const cmd_entry_t *c = &commands[i];
        if (len >= c->len && memcmp(line, c->name, c->len) == 0)
            return c;
    }
    return NULL;
}

bq_parse_status_t bq_parse_command(const char *line, size_t len, bq_cmd_t *cmd)
{
    const cmd_entry_t *c;
    bq_parse_status_t st;

    reset(cmd, BQ_OP_UNKNOWN);
    if (len == 0)
        return BQ_PARSE_UNKNOWN;
    /* beanstalkd compares strlen() with the length before anything else. */
    if (memchr(line, '\0', len) != NULL)
        return BQ_PARSE_BAD_FORMAT;
    c = find_command(line, len);
    if (c == NULL)
        return BQ_PARSE_UNKNOWN;
    reset(cmd, c->op);
    st = c->parse(line + c->len, line + len, cmd);
    if (st != BQ_PARSE_OK)
        reset(cmd, c->op);
    return st;
}

bool bq_tube_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > BQ_NAME_MAX || name[0] == '-')
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!is_name_char(name[i]))
            return false;
    }
    return true;
}

static const char *const op_names[BQ_OP_COUNT] = {
    [BQ_OP_UNKNOWN] = "unknown",
    [BQ_OP_PUT] = "put",
    [BQ_OP_PEEK] = "peek",
    [BQ_OP_PEEK_READY] = "peek-ready",
    [BQ_OP_PEEK_DELAYED] = "peek-delayed",
    [BQ_OP_PEEK_BURIED] = "peek-buried",
    [BQ_OP_RESERVE] = "reserve",
    [BQ_OP_RESERVE_TIMEOUT] = "reserve-with-timeout",
    [BQ_OP_RESERVE_JOB] = "reserve-job",
    [BQ_OP_DELETE] = "delete",
    [BQ_OP_RELEASE] = "release",
    [BQ_OP_BURY] = "bury",
    [BQ_OP_KICK] = "kick",
    [BQ_OP_KICK_JOB] = "kick-job",
    [BQ_OP_TOUCH] = "touch",
    [BQ_OP_STATS] = "stats",
    [BQ_OP_STATS_JOB] = "stats-job",
    [BQ_OP_STATS_TUBE] = "stats-tube",
    [BQ_OP_USE] = "use",
    [BQ_OP_WATCH] = "watch",
    [BQ_OP_IGNORE] = "ignore",
    [BQ_OP_LIST_TUBES] = "list-tubes",
    [BQ_OP_LIST_TUBE_USED] = "list-tube-used",
    [BQ_OP_LIST_TUBES_WATCHED] = "list-tubes-watched",
    [BQ_OP_QUIT] = "quit",
    [BQ_OP_PAUSE_TUBE] = "pause-tube",
};

const char *bq_op_name(bq_op_t op)
{
    if ((unsigned)op >= BQ_OP_COUNT)
        return "unknown";
    return op_names[op];
}

bool bq_op_writes(bq_op_t op)
{
    switch (op) {
    case BQ_OP_PUT:
    case BQ_OP_DELETE:
    case BQ_OP_RELEASE:
    case BQ_OP_BURY:
    case BQ_OP_TOUCH:
    case BQ_OP_KICK:
    case BQ_OP_KICK_JOB:
    case BQ_OP_PAUSE_TUBE:
        return true;
    default:
        return false;
    }
}

int64_t bq_reply_body_size(const char *line, size_t len)
{
    static const char *const words[] = {"RESERVED ", "FOUND ", "OK "};
    bool announces = false;
    for (size_t i = 0; i < sizeof words / sizeof words[0] && !announces; i++) {
        size_t w = strlen(words[i]);
        announces = len >= w && memcmp(line, words[i], w) == 0;
    }
    if (!announces)
        return BQ_REPLY_NO_BODY;
    size_t start = len;
    while (start > 0 && line[start - 1] >= '0' && line[start - 1] <= '9')
        start--;
    if (start == len || len - start > 19 || line[start - 1] != ' ')
        return BQ_REPLY_BAD_SIZE;
    uint64_t n = 0;
    for (size_t i = start; i < len; i++)
        n = n * 10 + (uint64_t)(line[i] - '0');
    return n > INT64_MAX ? BQ_REPLY_BAD_SIZE : (int64_t)n;
}
