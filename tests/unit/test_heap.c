/* Unit tests of protocol/heap.c, the binary min-heap with position tracking.
 *
 * Items carry a key, a tie-breaking id and the position the heap reports
 * through setpos. After every operation check_heap() verifies the heap order
 * and that every item's recorded position is where it really is. The random
 * test runs thousands of inserts, removals at arbitrary positions, key
 * changes with bq_heap_fix() and pops against a sorted-array model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/heap.h"

typedef struct item {
    int key;
    int id;
    size_t pos;
} item_t;

static bool item_less(const void *a, const void *b)
{
    const item_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key;
    return x->id < y->id;
}

static void item_setpos(void *it, size_t pos)
{
    ((item_t *)it)->pos = pos;
}

/* Asserts heap order and positions. */
static void check_heap(const bq_heap_t *h)
{
    assert_true(h->len <= h->cap);
    for (size_t i = 0; i < h->len; i++) {
        const item_t *it = h->items[i];
        assert_int_equal(it->pos, i);
        if (i > 0)
            assert_false(item_less(it, h->items[(i - 1) / 2]));
    }
}

static void heap_empty_top_is_null(void **state)
{
    (void)state;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    assert_null(bq_heap_top(&h));
    assert_int_equal(h.len, 0);
    assert_int_equal(h.cap, 0);
    assert_null(h.items);
    bq_heap_free(&h);
    assert_null(h.items);
}

static void heap_insert_keeps_least_on_top(void **state)
{
    (void)state;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    item_t it[5] = {{5, 0, 0}, {3, 1, 0}, {8, 2, 0}, {1, 3, 0}, {3, 4, 0}};
    const int tops[5] = {0, 1, 1, 3, 3};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(bq_heap_insert(&h, &it[i]), 0);
        check_heap(&h);
        assert_ptr_equal(bq_heap_top(&h), &it[tops[i]]);
    }
    /* equal keys: the lower id first */
    const int order[5] = {3, 1, 4, 0, 2};
    for (int i = 0; i < 5; i++) {
        item_t *top = bq_heap_remove(&h, 0);
        assert_ptr_equal(top, &it[order[i]]);
        assert_true(top->pos == BQ_HEAP_NOPOS);
        check_heap(&h);
    }
    assert_null(bq_heap_top(&h));
    bq_heap_free(&h);
}

static void heap_remove_from_middle_and_end(void **state)
{
    (void)state;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    item_t it[10];
    for (int i = 0; i < 10; i++) {
        it[i] = (item_t){i * 10, i, 0};
        assert_int_equal(bq_heap_insert(&h, &it[i]), 0);
    }
    /* the last slot */
    item_t *last = h.items[h.len - 1];
    assert_ptr_equal(bq_heap_remove(&h, h.len - 1), last);
    assert_true(last->pos == BQ_HEAP_NOPOS);
    check_heap(&h);
    /* a middle slot, where the moved last item must sift */
    item_t *mid = h.items[2];
    assert_ptr_equal(bq_heap_remove(&h, 2), mid);
    assert_true(mid->pos == BQ_HEAP_NOPOS);
    check_heap(&h);
    assert_int_equal(h.len, 8);
    /* the only item */
    while (h.len > 1)
        bq_heap_remove(&h, h.len - 1);
    item_t *only = h.items[0];
    assert_ptr_equal(bq_heap_remove(&h, 0), only);
    assert_true(only->pos == BQ_HEAP_NOPOS);
    assert_int_equal(h.len, 0);
    bq_heap_free(&h);
}

/* Removing an item whose replacement must move up (not down). */
static void heap_remove_sifts_replacement_up(void **state)
{
    (void)state;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    /* Inserted in this order the array is exactly [0, 100, 1, 101, 102, 2, 3]. */
    item_t it[7] = {{0, 0, 0},   {100, 1, 0}, {1, 2, 0}, {101, 3, 0},
                    {102, 4, 0}, {2, 5, 0},   {3, 6, 0}};
    for (int i = 0; i < 7; i++)
        assert_int_equal(bq_heap_insert(&h, &it[i]), 0);
    for (int i = 0; i < 7; i++)
        assert_int_equal(it[i].pos, i);
    /* Removing 101 moves the last item (3) into slot 3, below 100: it must
     * rise to slot 1 and push 100 down. */
    assert_ptr_equal(bq_heap_remove(&h, 3), &it[3]);
    check_heap(&h);
    assert_int_equal(it[6].pos, 1);
    assert_int_equal(it[1].pos, 3);
    assert_int_equal(h.len, 6);
    bq_heap_free(&h);
}

static void heap_fix_after_key_change(void **state)
{
    (void)state;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    item_t it[16];
    for (int i = 0; i < 16; i++) {
        it[i] = (item_t){i, i, 0};
        assert_int_equal(bq_heap_insert(&h, &it[i]), 0);
    }
    /* decrease: moves to the top */
    it[12].key = -1;
    bq_heap_fix(&h, it[12].pos);
    check_heap(&h);
    assert_ptr_equal(bq_heap_top(&h), &it[12]);
    /* increase: the top moves down */
    it[12].key = 100;
    bq_heap_fix(&h, it[12].pos);
    check_heap(&h);
    assert_ptr_equal(bq_heap_top(&h), &it[0]);
    /* unchanged key: nothing moves */
    size_t before[16];
    for (int i = 0; i < 16; i++)
        before[i] = it[i].pos;
    bq_heap_fix(&h, it[5].pos);
    for (int i = 0; i < 16; i++)
        assert_int_equal(it[i].pos, before[i]);
    bq_heap_free(&h);
}

static void heap_reserve_makes_inserts_not_grow(void **state)
{
    (void)state;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    assert_int_equal(bq_heap_reserve(&h, 0), 0);
    assert_int_equal(h.cap, 0);
    assert_int_equal(bq_heap_reserve(&h, 100), 0);
    assert_true(h.cap >= 100);
    size_t cap = h.cap;
    void **items = h.items;
    item_t it[100];
    for (int i = 0; i < 100; i++) {
        it[i] = (item_t){100 - i, i, 0};
        assert_int_equal(bq_heap_insert(&h, &it[i]), 0);
        assert_ptr_equal(h.items, items);
        assert_int_equal(h.cap, cap);
    }
    check_heap(&h);
    /* a smaller reservation changes nothing; the heap never shrinks */
    assert_int_equal(bq_heap_reserve(&h, 10), 0);
    assert_int_equal(h.cap, cap);
    while (h.len)
        bq_heap_remove(&h, 0);
    assert_int_equal(h.cap, cap);
    /* growing past the reservation still works */
    assert_int_equal(bq_heap_reserve(&h, cap + 1), 0);
    assert_true(h.cap >= cap + 1);
    bq_heap_free(&h);
    assert_int_equal(h.cap, 0);
    assert_int_equal(h.len, 0);
}

static void heap_grows_by_doubling_from_empty(void **state)
{
    (void)state;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    item_t it[33];
    size_t last_cap = 0;
    for (int i = 0; i < 33; i++) {
        it[i] = (item_t){i % 7, i, 0};
        assert_int_equal(bq_heap_insert(&h, &it[i]), 0);
        assert_true(h.cap >= h.len);
        if (h.cap != last_cap) {
            assert_true(last_cap == 0 || h.cap == 2 * last_cap);
            last_cap = h.cap;
        }
    }
    check_heap(&h);
    bq_heap_free(&h);
}

/* ---- random operations against a sorted model ---- */

#define POOL 600
#define OPS 40000

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint32_t rnd(uint32_t n)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)(((rng_state * 0x2545F4914F6CDD1Du) >> 32) % n);
}

static int cmp_item_ptr(const void *a, const void *b)
{
    const item_t *x = *(item_t *const *)a, *y = *(item_t *const *)b;
    return item_less(x, y) ? -1 : item_less(y, x) ? 1 : 0;
}

typedef struct model {
    item_t *items[POOL]; /* sorted by (key, id) */
    size_t len;
} model_t;

static void model_sort(model_t *m)
{
    qsort(m->items, m->len, sizeof m->items[0], cmp_item_ptr);
}

static void model_remove(model_t *m, const item_t *it)
{
    for (size_t i = 0; i < m->len; i++) {
        if (m->items[i] == it) {
            memmove(&m->items[i], &m->items[i + 1], (m->len - i - 1) * sizeof m->items[0]);
            m->len--;
            return;
        }
    }
    fail_msg("item not in model");
}

static void heap_random_ops_match_sorted_model(void **state)
{
    (void)state;
    static item_t pool[POOL];
    static model_t m;
    bq_heap_t h;
    bq_heap_init(&h, item_less, item_setpos);
    m.len = 0;
    for (int i = 0; i < POOL; i++)
        pool[i] = (item_t){0, i, BQ_HEAP_NOPOS};
    for (int op = 0; op < OPS; op++) {
        item_t *it = &pool[rnd(POOL)];
        uint32_t kind = rnd(10);
        if (it->pos == BQ_HEAP_NOPOS && kind < 5) {
            it->key = (int)rnd(200) - 100; /* many equal keys */
            assert_int_equal(bq_heap_insert(&h, it), 0);
            m.items[m.len++] = it;
        } else if (it->pos != BQ_HEAP_NOPOS && kind < 7) {
            assert_ptr_equal(bq_heap_remove(&h, it->pos), it);
            assert_true(it->pos == BQ_HEAP_NOPOS);
            model_remove(&m, it);
        } else if (it->pos != BQ_HEAP_NOPOS && kind < 9) {
            it->key = (int)rnd(200) - 100;
            bq_heap_fix(&h, it->pos);
        } else if (h.len) {
            item_t *top = bq_heap_remove(&h, 0);
            model_sort(&m);
            assert_ptr_equal(top, m.items[0]);
            assert_true(top->pos == BQ_HEAP_NOPOS);
            model_remove(&m, top);
        }
        check_heap(&h);
        assert_int_equal(h.len, m.len);
        if (m.len) {
            model_sort(&m);
            assert_ptr_equal(bq_heap_top(&h), m.items[0]);
        }
    }
    /* draining the heap yields the model's sorted order */
    model_sort(&m);
    for (size_t i = 0; i < m.len; i++) {
        item_t *top = bq_heap_remove(&h, 0);
        assert_ptr_equal(top, m.items[i]);
        check_heap(&h);
    }
    assert_int_equal(h.len, 0);
    for (int i = 0; i < POOL; i++)
        assert_true(pool[i].pos == BQ_HEAP_NOPOS);
    bq_heap_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(heap_empty_top_is_null),
        cmocka_unit_test(heap_insert_keeps_least_on_top),
        cmocka_unit_test(heap_remove_from_middle_and_end),
        cmocka_unit_test(heap_remove_sifts_replacement_up),
        cmocka_unit_test(heap_fix_after_key_change),
        cmocka_unit_test(heap_reserve_makes_inserts_not_grow),
        cmocka_unit_test(heap_grows_by_doubling_from_empty),
        cmocka_unit_test(heap_random_ops_match_sorted_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
