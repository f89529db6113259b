/* Fuzz target of the command-line parser: the input is one command line
 * (the bytes before its CRLF) handed to bq_parse_command() from an
 * exact-size heap copy, so ASan reports any read past its end.
 *
 * Checked for every input: the status and op are in range and agree with
 * each other; an op names the command the line starts with; OK results
 * carry a name exactly for the commands that take one, pointing inside the
 * line, valid where the parser validates it; the result does not depend on
 * the bytes after the line; an OK result rendered back into its canonical
 * form parses to the same fields; `kick` agrees with strtoul(), whose
 * semantics it copies; and "use <input>" parses OK exactly when the input is
 * a valid tube name by the rule of parse.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "protocol/parse.h"

/* The fields of bq_cmd_t an op fills in (parse.h documents which). */
enum {
    F_ID = 1 << 0,
    F_PRI = 1 << 1,
    F_DELAY = 1 << 2,
    F_TTR = 1 << 3,
    F_BYTES = 1 << 4,
    F_COUNT = 1 << 5,
    F_TIMEOUT = 1 << 6,
    F_NAME = 1 << 7,
    F_TRAILING = 1 << 8,
};

static unsigned op_fields(bq_op_t op)
{
    switch (op) {
    case BQ_OP_PUT:
        return F_PRI | F_DELAY | F_TTR | F_BYTES | F_TRAILING;
    case BQ_OP_PEEK:
    case BQ_OP_RESERVE_JOB:
    case BQ_OP_DELETE:
    case BQ_OP_KICK_JOB:
    case BQ_OP_TOUCH:
    case BQ_OP_STATS_JOB:
        return F_ID;
    case BQ_OP_RELEASE:
        return F_ID | F_PRI | F_DELAY;
    case BQ_OP_BURY:
        return F_ID | F_PRI;
    case BQ_OP_KICK:
        return F_COUNT;
    case BQ_OP_RESERVE:
    case BQ_OP_RESERVE_TIMEOUT:
        return F_TIMEOUT;
    case BQ_OP_STATS_TUBE:
    case BQ_OP_USE:
    case BQ_OP_WATCH:
    case BQ_OP_IGNORE:
        return F_NAME;
    case BQ_OP_PAUSE_TUBE:
        return F_NAME | F_DELAY;
    default:
        return 0;
    }
}

/* parse.h's tube name rule, written independently of parse.c. */
static bool name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("-+/;.$_()", c) != NULL);
}

static bool name_valid(const char *s, size_t len)
{
    if (len == 0 || len > BQ_NAME_MAX || s[0] == '-')
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!name_char(s[i]))
            return false;
    }
    return true;
}

/* Parses line[0..len) from a heap copy of exactly len bytes followed by
 * tail bytes of fill; the copy is returned in *keep (free it). */
static bq_parse_status_t parse_copy(const char *line, size_t len, size_t tail, char fill,
                                    bq_cmd_t *cmd, char **keep)
{
    char *buf = malloc(len + tail > 0 ? len + tail : 1);
    BQF_CHECK(buf != NULL, "out of memory");
    memcpy(buf, line, len);
    memset(buf + len, fill, tail);
    *keep = buf;
    return bq_parse_command(buf, len, cmd);
}

/* True when a and b agree on every field that op fills in; names compare
 * by content. */
static bool same_fields(const bq_cmd_t *a, const bq_cmd_t *b)
{
    unsigned f = op_fields(a->op);
    return a->op == b->op && (!(f & F_ID) || a->id == b->id) &&
           (!(f & F_PRI) || a->pri == b->pri) && (!(f & F_DELAY) || a->delay == b->delay) &&
           (!(f & F_TTR) || a->ttr == b->ttr) && (!(f & F_BYTES) || a->bytes == b->bytes) &&
           (!(f & F_COUNT) || a->count == b->count) &&
           (!(f & F_TIMEOUT) || a->timeout == b->timeout) &&
           (!(f & F_TRAILING) || a->put_trailing == b->put_trailing) &&
           (!(f & F_NAME) ||
            (a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0));
}

static void check_status(const char *line, size_t len, bq_parse_status_t st, const bq_cmd_t *cmd)
{
    bool has_nul = len > 0 && memchr(line, '\0', len) != NULL;
    BQF_CHECK(st == BQ_PARSE_OK || st == BQ_PARSE_BAD_FORMAT || st == BQ_PARSE_UNKNOWN,
              "status %d out of range", (int)st);
    BQF_CHECK((unsigned)cmd->op < BQ_OP_COUNT, "op %d out of range", (int)cmd->op);
    BQF_CHECK(len > 0 || st == BQ_PARSE_UNKNOWN, "empty line not UNKNOWN_COMMAND");
    BQF_CHECK(!has_nul || st == BQ_PARSE_BAD_FORMAT, "line with NUL not BAD_FORMAT");
    BQF_CHECK(st != BQ_PARSE_UNKNOWN || cmd->op == BQ_OP_UNKNOWN, "UNKNOWN with an op");
    BQF_CHECK(cmd->op != BQ_OP_UNKNOWN || st != BQ_PARSE_OK, "OK without an op");
    if (cmd->op == BQ_OP_UNKNOWN)
        return;
    const char *name = bq_op_name(cmd->op);
    size_t n = strlen(name);
    BQF_CHECK(len >= n && memcmp(line, name, n) == 0, "op %s but the line does not start so", name);
}

static void check_ok(const char *line, size_t len, const bq_cmd_t *cmd)
{
    unsigned f = op_fields(cmd->op);
    if (!(f & F_NAME)) {
        BQF_CHECK(cmd->name == NULL, "%s result has a name", bq_op_name(cmd->op));
    } else {
        BQF_CHECK(cmd->name != NULL && cmd->name >= line && cmd->name_len >= 1 &&
                      cmd->name_len <= len && cmd->name <= line + len - cmd->name_len,
                  "%s name outside the line", bq_op_name(cmd->op));
        for (size_t i = 0; i < cmd->name_len; i++)
            BQF_CHECK(name_char(cmd->name[i]), "name char 0x%02x", (unsigned char)cmd->name[i]);
        if (cmd->op != BQ_OP_PAUSE_TUBE) {
            BQF_CHECK(cmd->name + cmd->name_len == line + len, "name is not the rest of the line");
            BQF_CHECK(name_valid(cmd->name, cmd->name_len), "invalid name accepted");
        }
    }
    if (cmd->op == BQ_OP_RESERVE)
        BQF_CHECK(cmd->timeout == -1, "reserve timeout %" PRId32, cmd->timeout);
    if (cmd->op == BQ_OP_RESERVE_TIMEOUT)
        BQF_CHECK(cmd->timeout >= 0, "reserve-with-timeout timeout %" PRId32, cmd->timeout);
}

/* Writes the canonical line of an OK result into buf; its length. */
static size_t render(const bq_cmd_t *c, char *buf, size_t size)
{
    const char *op = bq_op_name(c->op);
    int nl = (int)c->name_len;
    int n;
    switch (c->op) {
    case BQ_OP_PUT:
        n = snprintf(buf, size, "put %" PRIu32 " %" PRIu32 " %" PRIu32 " %" PRIu32 "%s", c->pri,
                     c->delay, c->ttr, c->bytes, c->put_trailing ? " x" : "");
        break;
    case BQ_OP_RELEASE:
        n = snprintf(buf, size, "release %" PRIu64 " %" PRIu32 " %" PRIu32, c->id, c->pri,
                     c->delay);
        break;
    case BQ_OP_BURY:
        n = snprintf(buf, size, "bury %" PRIu64 " %" PRIu32, c->id, c->pri);
        break;
    case BQ_OP_KICK:
        n = snprintf(buf, size, "kick %" PRIu32, c->count);
        break;
    case BQ_OP_RESERVE_TIMEOUT:
        n = snprintf(buf, size, "reserve-with-timeout %" PRId32, c->timeout);
        break;
    case BQ_OP_PAUSE_TUBE:
        n = snprintf(buf, size, "pause-tube %.*s %" PRIu32, nl, c->name, c->delay);
        break;
    default:
        if (op_fields(c->op) & F_ID)
            n = snprintf(buf, size, "%s %" PRIu64, op, c->id);
        else if (op_fields(c->op) & F_NAME)
            n = snprintf(buf, size, "%s %.*s", op, nl, c->name);
        else
            n = snprintf(buf, size, "%s", op);
        break;
    }
    BQF_CHECK(n > 0 && (size_t)n < size, "canonical line does not fit");
    return (size_t)n;
}

static void check_roundtrip(const bq_cmd_t *cmd)
{
    /* pause-tube names are not bounded by the parser. */
    size_t size = cmd->name_len + 128;
    char *buf = malloc(size);
    BQF_CHECK(buf != NULL, "out of memory");
    size_t n = render(cmd, buf, size);
    bq_cmd_t again;
    bq_parse_status_t st = bq_parse_command(buf, n, &again);
    BQF_CHECK(st == BQ_PARSE_OK && same_fields(cmd, &again),
              "canonical \"%.*s\" parses differently", (int)n, buf);
    free(buf);
}

/* kick copies strtoul(): compare with the real one on a NUL-terminated copy. */
static void check_kick(const char *line, size_t len, bq_parse_status_t st, const bq_cmd_t *cmd)
{
    if (len < 5 || memcmp(line, "kick ", 5) != 0 || memchr(line, '\0', len) != NULL)
        return;
    char *rest = strndup(line + 5, len - 5);
    BQF_CHECK(rest != NULL, "out of memory");
    char *end;
    errno = 0;
    unsigned long v = strtoul(rest, &end, 10);
    bool ok = end != rest && errno != ERANGE;
    free(rest);
    BQF_CHECK(cmd->op == BQ_OP_KICK, "kick line parsed as %s", bq_op_name(cmd->op));
    BQF_CHECK((st == BQ_PARSE_OK) == ok, "kick status %d, strtoul says %s", (int)st,
              ok ? "ok" : "error");
    BQF_CHECK(!ok || cmd->count == (uint32_t)v, "kick count %" PRIu32 ", strtoul %lu", cmd->count,
              v);
}

/* "use <input>" must parse OK exactly when the input is a valid name. */
static void check_use(const char *data, size_t size)
{
    char *line = malloc(size + 4);
    BQF_CHECK(line != NULL, "out of memory");
    memcpy(line, "use ", 4);
    memcpy(line + 4, data, size);
    bq_cmd_t cmd;
    bq_parse_status_t st = bq_parse_command(line, size + 4, &cmd);
    bool valid = name_valid(data, size);
    BQF_CHECK(bq_tube_name_valid(data, size) == valid, "bq_tube_name_valid disagrees");
    BQF_CHECK((st == BQ_PARSE_OK) == valid, "use with %s name: status %d",
              valid ? "a valid" : "an invalid", (int)st);
    free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *line = (const char *)data;
    bq_cmd_t cmd, other;
    char *keep, *keep2;
    bq_parse_status_t st = parse_copy(line, size, 0, 0, &cmd, &keep);

    check_status(keep, size, st, &cmd);
    if (st == BQ_PARSE_OK) {
        check_ok(keep, size, &cmd);
        check_roundtrip(&cmd);
    }
    check_kick(keep, size, st, &cmd);
    /* Bytes after the line must not change anything. */
    static const char fills[] = {'9', ' ', '\0', '\r'};
    for (size_t i = 0; i < sizeof fills; i++) {
        bq_parse_status_t st2 = parse_copy(line, size, 8, fills[i], &other, &keep2);
        BQF_CHECK(st2 == st && other.op == cmd.op &&
                      (st != BQ_PARSE_OK || same_fields(&cmd, &other)),
                  "result depends on the byte after the line (0x%02x)", (unsigned char)fills[i]);
        BQF_CHECK(!(op_fields(cmd.op) & F_NAME) || st != BQ_PARSE_OK ||
                      other.name - keep2 == cmd.name - keep,
                  "name offset depends on the byte after the line");
        free(keep2);
    }
    check_use(line, size);
    BQF_CHECK(strcmp(bq_op_name(BQ_OP_COUNT), "unknown") == 0, "bq_op_name out of range");
    free(keep);
    return 0;
}
