/* Follows the reply stream of one connection just well enough to tell reply
 * lines from bodies: a line ends at CRLF, and "RESERVED <id> <n>",
 * "FOUND <id> <n>" and "OK <n>" announce n+2 bytes of body. */
#include "node/client/trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "node/base/log.h"
#include "protocol/parse.h"

static void line_done(bq_trace_t *t, int fd)
{
    size_t n = t->line_len < sizeof t->line ? t->line_len : sizeof t->line - 1;
    t->line[n] = '\0';
    if (n > 0 && t->line[n - 1] == '\r')
        t->line[n - 1] = '\0';
    bq_log(BQ_LOG_TRACE, "reply", "fd=%d line=\"%s\"", fd, t->line);
    int64_t body = bq_reply_body_size(t->line, strlen(t->line));
    t->body_left = body >= 0 ? (uint64_t)body + 2 : 0;
    t->line_len = 0;
}

void bq_trace_reply(bq_trace_t *t, int fd, const char *data, size_t len)
{
    while (len > 0) {
        if (t->body_left > 0) {
            size_t skip = t->body_left < len ? (size_t)t->body_left : len;
            t->body_left -= skip;
            data += skip;
            len -= skip;
            continue;
        }
        const char *nl = memchr(data, '\n', len);
        size_t take = nl ? (size_t)(nl - data) : len;
        if (t->line_len < sizeof t->line - 1) {
            size_t room = sizeof t->line - 1 - t->line_len;
            memcpy(t->line + t->line_len, data, take < room ? take : room);
        }
        t->line_len += take;
        if (!nl)
            return;
        line_done(t, fd);
        data += take + 1;
        len -= take + 1;
    }
}
