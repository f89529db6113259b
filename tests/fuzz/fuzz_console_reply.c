/* Fuzz target of the web console's reply reader (node/admin/console_reply.c):
 * the bytes its own beanstalk client reads from the node's client service
 * (on a standby, from the primary through the proxy), split into replies,
 * and their YAML bodies turned into JSON.
 *
 * The input is read as a stream of replies, each parsed from where the
 * last ended, first with all the bytes left, then again with one byte less
 * than its length (which must be PARTIAL: a reply is never complete
 * before its last byte).
 *
 * Invariants (abort on violation):
 * - a result is BQ_CONSOLE_REPLY_PARTIAL, BQ_CONSOLE_REPLY_BAD or a length
 *   from 3 (a line of one byte and CR LF) to the bytes given;
 * - the line is a slice at the reply's start, under 256 bytes, with CR LF
 *   after it and no LF in it; a body is a slice after the line's CR LF, of
 *   at most BQ_CONSOLE_REPLY_MAX bytes, followed by CR LF, and only for
 *   FOUND, RESERVED and OK;
 * - bq_console_yaml_map and bq_console_yaml_list of any body give a JSON
 *   object and an array (of at most the max asked for) that print. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "node/admin/console_reply.h"

static void check_yaml(const char *body, size_t len)
{
    char *copy = malloc(len + 1); /* a heap copy of its exact length */
    memcpy(copy, body, len);
    cJSON *m = bq_console_yaml_map(copy, len);
    BQF_CHECK(m == NULL || cJSON_IsObject(m), "yaml_map gave no object");
    char *text = m ? cJSON_PrintUnformatted(m) : NULL;
    BQF_CHECK(m == NULL || text != NULL, "yaml_map's object does not print");
    free(text);
    cJSON_Delete(m);
    cJSON *l = bq_console_yaml_list(copy, len, 3);
    BQF_CHECK(l == NULL || (cJSON_IsArray(l) && cJSON_GetArraySize(l) <= 3), "yaml_list");
    cJSON_Delete(l);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    size_t at = 0;
    while (at < size) {
        bq_console_reply_t r;
        long n = bq_console_parse_reply(buf + at, size - at, &r);
        if (n == BQ_CONSOLE_REPLY_PARTIAL || n == BQ_CONSOLE_REPLY_BAD)
            break;
        BQF_CHECK(n >= 3 && (size_t)n <= size - at, "reply length %ld of %zu", n, size - at);
        BQF_CHECK(r.line == buf + at && r.line_len < 256, "line slice");
        BQF_CHECK(memchr(r.line, '\n', r.line_len) == NULL, "LF in a line");
        BQF_CHECK(r.line[r.line_len] == '\r' && r.line[r.line_len + 1] == '\n', "line end");
        if (r.body) {
            BQF_CHECK(r.body == r.line + r.line_len + 2, "body not after the line");
            BQF_CHECK(r.body_len <= BQ_CONSOLE_REPLY_MAX, "body over the bound");
            BQF_CHECK(r.body + r.body_len + 2 == buf + at + n, "body end");
            BQF_CHECK(memcmp(r.body + r.body_len, "\r\n", 2) == 0, "no CR LF after the body");
            BQF_CHECK(bq_console_reply_is(&r, "FOUND") || bq_console_reply_is(&r, "RESERVED") ||
                          bq_console_reply_is(&r, "OK"),
                      "a body on another reply");
            check_yaml(r.body, r.body_len);
        } else {
            BQF_CHECK((size_t)n == r.line_len + 2, "length of a reply without a body");
        }
        bq_console_reply_t r2;
        BQF_CHECK(bq_console_parse_reply(buf + at, (size_t)n - 1, &r2) == BQ_CONSOLE_REPLY_PARTIAL,
                  "a reply complete before its last byte");
        at += (size_t)n;
    }
    return 0;
}
