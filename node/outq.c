/* Output queue of one connection. The first chunk of an empty queue is
 * small (an idle connection's single reply should not cost 16 KiB); later
 * chunks are BQ_OUTQ_CHUNK, and a reply at least that large is copied into
 * a chunk of exactly its size. */
#include "outq.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_CHUNK 1024

struct bq_chunk {
    bq_chunk_t *next;
    size_t len, cap;
    char data[];
};

void bq_outq_init(bq_outq_t *q)
{
    memset(q, 0, sizeof *q);
}

static bq_chunk_t *chunk_new(size_t cap)
{
    bq_chunk_t *c = malloc(sizeof *c + cap);
    if (c) {
        c->next = NULL;
        c->len = 0;
        c->cap = cap;
    }
    return c;
}

int bq_outq_append(bq_outq_t *q, const char *data, size_t len)
{
    if (len == 0)
        return 0;
    bq_chunk_t *t = q->tail;
    if (!t || t->cap - t->len < len) {
        size_t cap = q->head ? BQ_OUTQ_CHUNK : FIRST_CHUNK;
        if (len > cap)
            cap = len;
        t = chunk_new(cap);
        if (!t)
            return -1;
        if (q->tail)
            q->tail->next = t;
        else
            q->head = t;
        q->tail = t;
    }
    memcpy(t->data + t->len, data, len);
    t->len += len;
    q->bytes += len;
    return 0;
}

size_t bq_outq_peek(const bq_outq_t *q, uv_buf_t *bufs, size_t max)
{
    size_t n = 0, off = q->head_off;
    for (bq_chunk_t *c = q->head; c && n < max; c = c->next, off = 0)
        bufs[n++] = uv_buf_init(c->data + off, (unsigned int)(c->len - off));
    return n;
}

void bq_outq_consume(bq_outq_t *q, size_t n)
{
    q->bytes -= n;
    while (n > 0) {
        bq_chunk_t *c = q->head;
        size_t left = c->len - q->head_off;
        if (n < left) {
            q->head_off += n;
            return;
        }
        n -= left;
        q->head = c->next;
        q->head_off = 0;
        free(c);
    }
    if (!q->head)
        q->tail = NULL;
}

bq_chunk_t *bq_outq_detach(bq_outq_t *q, size_t nchunks)
{
    bq_chunk_t *first = q->head, *last = NULL;

    if (nchunks == 0 || !first)
        return NULL;
    for (bq_chunk_t *c = q->head; c && nchunks > 0; c = c->next, nchunks--) {
        q->bytes -= c->len - (c == first ? q->head_off : 0);
        last = c;
    }
    q->head = last->next;
    last->next = NULL;
    q->head_off = 0;
    if (!q->head)
        q->tail = NULL;
    return first;
}

void bq_outq_free_chunks(bq_chunk_t *list)
{
    while (list) {
        bq_chunk_t *next = list->next;
        free(list);
        list = next;
    }
}

void bq_outq_clear(bq_outq_t *q)
{
    bq_outq_free_chunks(q->head);
    bq_outq_init(q);
}
