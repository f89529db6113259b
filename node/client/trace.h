/* -VV tracing of the replies a connection sends: logs each reply line and
 * skips the job or YAML body that follows RESERVED, FOUND and OK, so bodies
 * never reach the log. */
#ifndef BQ_NODE_TRACE_H
#define BQ_NODE_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bq_trace {
    uint64_t body_left; /* body bytes (with CRLF) still to skip */
    size_t line_len;    /* bytes of the current reply line seen so far */
    char line[64];      /* its start, for the log */
} bq_trace_t;

/* Logs (at TRACE) the reply lines in data[0..len), the next bytes sent on
 * connection fd. */
void bq_trace_reply(bq_trace_t *t, int fd, const char *data, size_t len);

#endif
