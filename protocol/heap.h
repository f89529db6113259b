/* A binary min-heap of pointers with position tracking.
 *
 * Each item records its own index through the setpos callback, so any item
 * can be removed or re-sifted in O(log n); a removed item's position is set
 * to BQ_HEAP_NOPOS. The heap never shrinks its array;
 * bq_heap_reserve() lets a caller guarantee that later inserts cannot fail. */
#ifndef BQ_HEAP_H
#define BQ_HEAP_H

#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

/* The position setpos receives for an item that left the heap. */
#define BQ_HEAP_NOPOS SIZE_MAX

typedef bool (*bq_heap_less_fn)(const void *a, const void *b);
typedef void (*bq_heap_setpos_fn)(void *item, size_t pos);

typedef struct bq_heap {
    void **items;
    size_t len, cap;
    bq_heap_less_fn less;
    bq_heap_setpos_fn setpos;
} bq_heap_t;

/* Initialises an empty heap ordered by less (no allocation). */
void bq_heap_init(bq_heap_t *h, bq_heap_less_fn less, bq_heap_setpos_fn setpos);

/* Frees the array (not the items). */
void bq_heap_free(bq_heap_t *h);

/* Ensures room for n items in total; 0, or -1 when out of memory. */
int bq_heap_reserve(bq_heap_t *h, size_t n);

/* Inserts item; 0, or -1 when the array cannot grow. */
int bq_heap_insert(bq_heap_t *h, void *item);

/* Removes and returns the item at pos (pos < len); its position becomes
 * BQ_HEAP_NOPOS. */
void *bq_heap_remove(bq_heap_t *h, size_t pos);

/* Restores the order after the key of the item at pos changed. */
void bq_heap_fix(bq_heap_t *h, size_t pos);

/* The least item, or NULL when empty. */
static inline void *bq_heap_top(const bq_heap_t *h)
{
    return h->len ? h->items[0] : NULL;
}

#endif
