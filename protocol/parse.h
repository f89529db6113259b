/* Command-line parser of the beanstalk protocol.
 *
 * Pure: no allocation, no I/O. It turns one complete command line (the bytes
 * before its CRLF) into a bq_cmd_t, reproducing beanstalkd 1.13's recognition
 * rules exactly: prefix matching in a fixed order, case-sensitive names,
 * read_u32/read_u64 integer rules, the lenient strtoul of `kick`, and the
 * exact-length checks of argument-less commands. See
 * docs/protocol-compatibility.md for the list of quirks kept on purpose. */
#ifndef BQ_PARSE_H
#define BQ_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest command line including its CRLF (beanstalkd LINE_BUF_SIZE). */
#define BQ_LINE_MAX 224
/* Longest tube name. */
#define BQ_NAME_MAX 200

typedef enum bq_op {
    BQ_OP_UNKNOWN = 0,
    BQ_OP_PUT,
    BQ_OP_PEEK,
    BQ_OP_PEEK_READY,
    BQ_OP_PEEK_DELAYED,
    BQ_OP_PEEK_BURIED,
    BQ_OP_RESERVE,
    BQ_OP_RESERVE_TIMEOUT,
    BQ_OP_RESERVE_JOB,
    BQ_OP_DELETE,
    BQ_OP_RELEASE,
    BQ_OP_BURY,
    BQ_OP_KICK,
    BQ_OP_KICK_JOB,
    BQ_OP_TOUCH,
    BQ_OP_STATS,
    BQ_OP_STATS_JOB,
    BQ_OP_STATS_TUBE,
    BQ_OP_USE,
    BQ_OP_WATCH,
    BQ_OP_IGNORE,
    BQ_OP_LIST_TUBES,
    BQ_OP_LIST_TUBE_USED,
    BQ_OP_LIST_TUBES_WATCHED,
    BQ_OP_QUIT,
    BQ_OP_PAUSE_TUBE,
    BQ_OP_COUNT
} bq_op_t;

typedef enum bq_parse_status {
    BQ_PARSE_OK = 0,     /* cmd is filled in */
    BQ_PARSE_BAD_FORMAT, /* reply BAD_FORMAT; cmd->op tells which command failed */
    BQ_PARSE_UNKNOWN,    /* reply UNKNOWN_COMMAND */
} bq_parse_status_t;

typedef struct bq_cmd {
    bq_op_t op;
    uint64_t id;       /* peek, reserve-job, delete, release, bury, kick-job, touch, stats-job */
    uint32_t pri;      /* put, release, bury */
    uint32_t delay;    /* put, release, pause-tube: seconds */
    uint32_t ttr;      /* put: seconds, as sent (the engine raises 0 to 1) */
    uint32_t bytes;    /* put: body size without CRLF */
    uint32_t count;    /* kick: bound (truncated to 32 bits like beanstalkd) */
    int32_t timeout;   /* reserve-with-timeout: seconds; -1 for reserve (forever) */
    bool put_trailing; /* put: text after <bytes>; BAD_FORMAT unless JOB_TOO_BIG wins */
    /* use, watch, ignore, stats-tube, pause-tube: borrows the line. Validated
     * here except for pause-tube, whose name beanstalkd validates only after
     * counting the command; the engine checks it. */
    const char *name;
    size_t name_len;
} bq_cmd_t;

/* Parses line[0..len) (without CRLF) into *cmd. Never reads past len. */
bq_parse_status_t bq_parse_command(const char *line, size_t len, bq_cmd_t *cmd);

/* True when name[0..len) is a valid tube name: 1..200 of A-Za-z0-9-+/;.$_()
 * and not starting with '-'. */
bool bq_tube_name_valid(const char *name, size_t len);

/* The protocol's name of op, e.g. "reserve-with-timeout" (for logs). */
const char *bq_op_name(bq_op_t op);

/* True for the ops that change a job or a tube: put, delete, release,
 * bury, touch, kick, kick-job, pause-tube. */
bool bq_op_writes(bq_op_t op);

/* bq_reply_body_size's results other than a size. */
#define BQ_REPLY_NO_BODY (-1)  /* a reply line without a body */
#define BQ_REPLY_BAD_SIZE (-2) /* RESERVED, FOUND or OK without a size as its last word */

/* The body size (without its CRLF) that the reply line line[0..len)
 * (without CRLF) announces: the last word of "RESERVED <id> <n>",
 * "FOUND <id> <n>" and "OK <n>", 1 to 19 digits; or BQ_REPLY_NO_BODY or
 * BQ_REPLY_BAD_SIZE. Never reads past len. */
int64_t bq_reply_body_size(const char *line, size_t len);

#endif
