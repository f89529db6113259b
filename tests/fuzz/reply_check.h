/* A checker of one connection's reply stream, as a client would read it.
 *
 * Bytes arrive in pieces of any size. Every reply line must end with CRLF,
 * contain no other CR or LF, and be one of beanstalkd's replies with
 * well-formed arguments; RESERVED, FOUND and OK lines must be followed by
 * exactly <bytes> bytes and a CRLF. A violation aborts. Each complete reply is
 * handed to a callback. */
#ifndef BQ_FUZZ_REPLY_CHECK_H
#define BQ_FUZZ_REPLY_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest reply line accepted, CRLF included ("USING <200 chars>" needs 208). */
#define BQF_REPLY_LINE_MAX 256
/* Largest OK body accepted (the YAML bodies are far smaller). */
#define BQF_REPLY_BODY_MAX 65536

typedef struct bqf_reply {
    const char *word; /* the reply's first word, a static string */
    uint64_t num[2];  /* numeric arguments in order (id, bytes, count...) */
    const char *name; /* USING: the tube name (not NUL-terminated) */
    size_t name_len;
    const char *body; /* RESERVED, FOUND, OK: the body without its CRLF */
    size_t body_len;
} bqf_reply_t;

typedef void bqf_reply_cb(void *arg, const bqf_reply_t *r);

typedef struct bqf_reply_stream {
    bqf_reply_cb *cb;
    void *arg;
    uint32_t max_job_size; /* bound of RESERVED/FOUND bodies */
    char line[BQF_REPLY_LINE_MAX];
    size_t line_len;
    bqf_reply_t cur; /* the reply whose body is being read */
    char *body;      /* body + CRLF being collected, or NULL */
    size_t body_want, body_have;
} bqf_reply_stream_t;

/* Prepares s for a new connection; cb(arg, reply) runs for every complete
 * reply. */
void bqf_reply_init(bqf_reply_stream_t *s, uint32_t max_job_size, bqf_reply_cb *cb, void *arg);

/* Checks and consumes data[0..len) (borrowed); aborts on a malformed reply. */
void bqf_reply_feed(bqf_reply_stream_t *s, const char *data, size_t len);

/* True when s is between replies (no partial line or body). */
bool bqf_reply_idle(const bqf_reply_stream_t *s);

/* Frees what s holds. */
void bqf_reply_free(bqf_reply_stream_t *s);

#endif
