/* A byte buffer that grows by doubling, for the bytes a session or a
 * mirror hands to another server (session.c's replay, mirror.c's
 * restore). Pure; the buffer is malloc'd and the caller's. */
#ifndef BQ_GROWBUF_H
#define BQ_GROWBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Appends text[0..n) to *buf (*len used of *cap, both updated); false when
 * out of memory (*buf unchanged). */
static inline bool bq_growbuf_append(char **buf, size_t *len, size_t *cap, const char *text,
                                     size_t n)
{
    if (n == 0)
        return true;
    if (*cap - *len < n) {
        size_t c = *cap ? *cap * 2 : 256;
        while (c - *len < n)
            c *= 2;
        char *p = realloc(*buf, c);
        if (!p)
            return false;
        *buf = p;
        *cap = c;
    }
    memcpy(*buf + *len, text, n);
    *len += n;
    return true;
}

#endif
