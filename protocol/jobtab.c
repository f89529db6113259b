/* Jobs by id: an open-addressing hash table with linear probing and
 * backward-shift deletion, so lookups stay O(1) with no per-job chain
 * pointer. Fibonacci hashing spreads the sequential ids evenly. The table
 * grows at 3/4 load and shrinks below 1/16. */
#include "protocol/engine_internal.h"

#include <stdlib.h>

#define MIN_CAP 1024

/* Fibonacci hashing: the top log2(cap) bits of id * 2^64/phi. */
static size_t slot_of(const bq_jobtab_t *t, uint64_t id)
{
    int shift = 64 - __builtin_ctzll((unsigned long long)t->cap);
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> shift);
}

bq_job_t *bq__jobtab_find(const bq_jobtab_t *t, uint64_t id)
{
    if (!t->cap)
        return NULL;
    for (size_t i = slot_of(t, id);; i = (i + 1) & (t->cap - 1)) {
        bq_job_t *j = t->slots[i];
        if (!j)
            return NULL;
        if (j->id == id)
            return j;
    }
}

static void place(bq_jobtab_t *t, bq_job_t *j)
{
    size_t i = slot_of(t, j->id);
    while (t->slots[i])
        i = (i + 1) & (t->cap - 1);
    t->slots[i] = j;
}

/* Rebuilds the table with cap slots; -1 (table unchanged) when out of memory. */
static int resize(bq_jobtab_t *t, size_t cap)
{
    bq_jobtab_t n = {calloc(cap, sizeof(bq_job_t *)), cap, t->len};
    if (!n.slots)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slots[i])
            place(&n, t->slots[i]);
    }
    free(t->slots);
    *t = n;
    return 0;
}

int bq__jobtab_reserve(bq_jobtab_t *t)
{
    if (!t->cap)
        return resize(t, MIN_CAP);
    if ((t->len + 1) * 4 <= t->cap * 3)
        return 0;
    return resize(t, t->cap * 2);
}

void bq__jobtab_insert(bq_jobtab_t *t, bq_job_t *j)
{
    place(t, j);
    t->len++;
}

void bq__jobtab_remove(bq_jobtab_t *t, bq_job_t *j)
{
    size_t mask = t->cap - 1;
    size_t i = slot_of(t, j->id);
    while (t->slots[i] != j)
        i = (i + 1) & mask;
    /* Backward shift: pull later members of the probe run into the hole so
     * that no lookup stops early at an empty slot. */
    size_t hole = i;
    for (size_t k = (i + 1) & mask; t->slots[k]; k = (k + 1) & mask) {
        size_t home = slot_of(t, t->slots[k]->id);
        if (((k - home) & mask) >= ((k - hole) & mask)) {
            t->slots[hole] = t->slots[k];
            hole = k;
        }
    }
    t->slots[hole] = NULL;
    t->len--;
    if (t->cap > MIN_CAP && t->len < t->cap / 16)
        resize(t, t->cap / 2); /* best effort: a failed shrink changes nothing */
}

void bq__jobtab_free(bq_jobtab_t *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = t->len = 0;
}
