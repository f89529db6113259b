/* Intrusive doubly linked lists for the node's connection sets (all, dirty,
 * pending). A node is "unlinked" when it points to itself, so removal is
 * O(1) and safe to repeat. */
#ifndef BQ_NODE_LIST_H
#define BQ_NODE_LIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct bq_list {
    struct bq_list *prev, *next;
} bq_list_t;

/* The struct of type `type` whose member `member` is at address `ptr`. */
#define BQ_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Makes l an empty list head, or an unlinked node. */
static inline void bq_list_init(bq_list_t *l)
{
    l->prev = l->next = l;
}

/* True when head has no elements (or node n is unlinked). */
static inline bool bq_list_empty(const bq_list_t *l)
{
    return l->next == l;
}

/* Appends node n (unlinked) at the tail of head. */
static inline void bq_list_push(bq_list_t *head, bq_list_t *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

/* Unlinks n from its list; a no-op when n is unlinked. */
static inline void bq_list_remove(bq_list_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

/* Unlinks and returns the first node of head, or NULL when it is empty. */
static inline bq_list_t *bq_list_pop(bq_list_t *head)
{
    bq_list_t *n = head->next;
    if (n == head)
        return NULL;
    bq_list_remove(n);
    return n;
}

#endif
