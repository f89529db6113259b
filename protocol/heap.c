/* Binary min-heap of pointers with position tracking (see heap.h). Used for
 * the per-tube ready/delay/buried queues, each client's reservations and
 * ready-tube index, and the engine's timer queues. */
#include "protocol/heap.h"

#include <stdlib.h>

void bq_heap_init(bq_heap_t *h, bq_heap_less_fn less, bq_heap_setpos_fn setpos)
{
    h->items = NULL;
    h->len = h->cap = 0;
    h->less = less;
    h->setpos = setpos;
}

void bq_heap_free(bq_heap_t *h)
{
    free(h->items);
    h->items = NULL;
    h->len = h->cap = 0;
}

int bq_heap_reserve(bq_heap_t *h, size_t n)
{
    if (n <= h->cap)
        return 0;
    size_t cap = h->cap ? h->cap : 4;
    while (cap < n)
        cap *= 2;
    void **items = realloc(h->items, cap * sizeof *items);
    if (!items)
        return -1;
    h->items = items;
    h->cap = cap;
    return 0;
}

static void set(bq_heap_t *h, size_t pos, void *item)
{
    h->items[pos] = item;
    h->setpos(item, pos);
}

/* Moves the item at pos up while it is less than its parent. */
static size_t sift_up(bq_heap_t *h, size_t pos)
{
    void *item = h->items[pos];
    while (pos > 0) {
        size_t parent = (pos - 1) / 2;
        if (!h->less(item, h->items[parent]))
            break;
        set(h, pos, h->items[parent]);
        pos = parent;
    }
    set(h, pos, item);
    return pos;
}

/* Moves the item at pos down while a child is less than it. */
static void sift_down(bq_heap_t *h, size_t pos)
{
    void *item = h->items[pos];
    for (;;) {
        size_t child = 2 * pos + 1;
        if (child >= h->len)
            break;
        if (child + 1 < h->len && h->less(h->items[child + 1], h->items[child]))
            child++;
        if (!h->less(h->items[child], item))
            break;
        set(h, pos, h->items[child]);
        pos = child;
    }
    set(h, pos, item);
}

int bq_heap_insert(bq_heap_t *h, void *item)
{
    if (h->len == h->cap && bq_heap_reserve(h, h->len + 1) != 0)
        return -1;
    h->items[h->len] = item;
    sift_up(h, h->len++);
    return 0;
}

void *bq_heap_remove(bq_heap_t *h, size_t pos)
{
    void *item = h->items[pos];
    h->len--;
    if (pos < h->len) {
        h->items[pos] = h->items[h->len];
        bq_heap_fix(h, pos);
    }
    h->setpos(item, BQ_HEAP_NOPOS);
    return item;
}

void bq_heap_fix(bq_heap_t *h, size_t pos)
{
    if (sift_up(h, pos) == pos)
        sift_down(h, pos);
}
