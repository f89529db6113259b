/* The beanstalk replies the console's own client reads (node/admin/console_client.h),
 * split into lines and bodies, and their YAML bodies turned into JSON.
 * Pure: no sockets, no libuv. The bytes come from this node's own client
 * service, but are bounded and checked as if they did not. */
#ifndef BQ_NODE_ADMIN_CONSOLE_REPLY_H
#define BQ_NODE_ADMIN_CONSOLE_REPLY_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* A reply larger than this is refused (a job body over about 1 MiB is not
 * shown by the console). */
#define BQ_CONSOLE_REPLY_MAX ((size_t)1 << 20)

/* One reply: its first line (without CRLF) and, for FOUND, RESERVED and OK,
 * its body (without the final CRLF). Slices of the caller's buffer. */
typedef struct bq_console_reply {
    const char *line;
    size_t line_len;
    const char *body; /* NULL when the reply has none */
    size_t body_len;
} bq_console_reply_t;

/* bq_console_parse_reply's results other than a reply's length. */
#define BQ_CONSOLE_REPLY_PARTIAL 0 /* more bytes are needed */
#define BQ_CONSOLE_REPLY_BAD (-1)  /* not a reply of the protocol, or too large */

/* Parses the reply at buf[0..len) (borrowed) into *out. Returns its length
 * in bytes (> 0), BQ_CONSOLE_REPLY_PARTIAL or BQ_CONSOLE_REPLY_BAD. */
long bq_console_parse_reply(const char *buf, size_t len, bq_console_reply_t *out);

/* True when r's line is word, or starts with word and a space. */
int bq_console_reply_is(const bq_console_reply_t *r, const char *word);

/* A YAML body of stats, stats-tube or stats-job ("key: value" lines) as a
 * new JSON object: numbers as numbers, the rest as strings (quotes
 * removed). NULL when out of memory. */
cJSON *bq_console_yaml_map(const char *body, size_t len);

/* A YAML body of list-tubes ("- name" lines) as a new JSON array of
 * strings, at most max of them; NULL when out of memory. */
cJSON *bq_console_yaml_list(const char *body, size_t len, size_t max);

#endif
