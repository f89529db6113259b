/* Output queue of one connection. The first chunk of an empty queue is
 * small (an idle connection's single reply should not cost 16 KiB); later
 * chunks are BQ_OUTQ_CHUNK, and a reply at least that large is copied into
 * a chunk of exactly its size. Binlog marks live in a small ring in the
 * queue itself, so holding replies back never allocates. */
#include "node/client/outq.h"

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
    q->appended += len;
    return 0;
}

size_t bq_outq_peek(const bq_outq_t *q, uv_buf_t *bufs, size_t max, size_t limit)
{
    size_t n = 0, off = q->head_off;
    for (bq_chunk_t *c = q->head; c && n < max && limit > 0; c = c->next, off = 0) {
        size_t len = c->len - off < limit ? c->len - off : limit;
        bufs[n++] = uv_buf_init(c->data + off, (unsigned int)len);
        limit -= len;
    }
    return n;
}

int bq_outq_split(bq_outq_t *q, size_t at)
{
    bq_chunk_t *c = q->head;
    size_t start = q->head_off;
    /* Find the chunk holding byte `at`, stopping at a chunk boundary. */
    while (c && at >= c->len - start) {
        at -= c->len - start;
        c = c->next;
        start = 0;
    }
    if (!c || at == 0)
        return 0;
    size_t keep = start + at, rest = c->len - keep;
    bq_chunk_t *t = chunk_new(rest > BQ_OUTQ_CHUNK ? rest : BQ_OUTQ_CHUNK);
    if (!t)
        return -1;
    memcpy(t->data, c->data + keep, rest);
    t->len = rest;
    c->len = keep;
    t->next = c->next;
    c->next = t;
    if (q->tail == c)
        q->tail = t;
    return 0;
}

void bq_outq_tag(bq_outq_t *q, uint64_t off, uint64_t lsn)
{
    if (q->nmarks > 0) {
        bq_outq_mark_t *last = &q->marks[(q->mark_head + q->nmarks - 1) % BQ_OUTQ_MARKS];
        if (q->nmarks == BQ_OUTQ_MARKS || last->lsn == lsn) {
            /* Waiting for the later LSN from the earlier offset is safe. */
            last->lsn = lsn;
            return;
        }
    }
    q->marks[(q->mark_head + q->nmarks) % BQ_OUTQ_MARKS] = (bq_outq_mark_t){off, lsn};
    q->nmarks++;
}

size_t bq_outq_releasable(bq_outq_t *q, uint64_t release)
{
    while (q->nmarks > 0 && q->marks[q->mark_head].lsn <= release) {
        q->mark_head = (q->mark_head + 1) % BQ_OUTQ_MARKS;
        q->nmarks--;
    }
    if (q->nmarks == 0)
        return q->bytes;
    uint64_t start = q->appended - q->bytes;
    uint64_t off = q->marks[q->mark_head].off;
    return off > start ? (size_t)(off - start) : 0;
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
