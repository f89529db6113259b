/* Unit tests of protocol/jobtab.c, the open-addressing table of jobs by id.
 *
 * White-box: the tests include engine_internal.h and recompute each job's
 * home slot (Fibonacci hashing, as jobtab.c documents) to check the probe
 * invariant of linear probing after every change: between a job's home slot
 * and its actual slot there is no empty slot, so no lookup stops early. The
 * random test inserts 100,000 sequential ids (as the engine allocates them)
 * with random deletions and compares every lookup with a model; other tests
 * build collision clusters, including ones that wrap around the end of the
 * table, and delete from their start, middle and end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protocol/engine_internal.h"

#define MIN_CAP 1024 /* jobtab.c's smallest table */

static uint64_t rng_state = 0x2545F4914F6CDD1Du;

static uint64_t rnd64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Du;
}

static bq_job_t *job_new(uint64_t id)
{
    bq_job_t *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->id = id;
    return j;
}

/* The home slot of id in a table of cap slots (jobtab.c's hash). */
static size_t home_of(uint64_t id, size_t cap)
{
    int shift = 64 - __builtin_ctzll((unsigned long long)cap);
    return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> shift);
}

static void insert(bq_jobtab_t *t, bq_job_t *j)
{
    assert_int_equal(bq__jobtab_reserve(t), 0);
    bq__jobtab_insert(t, j);
}

/* Asserts size, load bounds and the linear-probing invariant. */
static void check_table(const bq_jobtab_t *t)
{
    assert_true(t->cap >= MIN_CAP);
    assert_int_equal(t->cap & (t->cap - 1), 0);
    assert_true(t->len * 4 <= t->cap * 3);
    size_t n = 0;
    for (size_t i = 0; i < t->cap; i++) {
        const bq_job_t *j = t->slots[i];
        if (!j)
            continue;
        n++;
        for (size_t k = home_of(j->id, t->cap); k != i; k = (k + 1) & (t->cap - 1))
            assert_non_null(t->slots[k]);
    }
    assert_int_equal(n, t->len);
}

static void jobtab_find_in_empty_table(void **state)
{
    (void)state;
    bq_jobtab_t t = {NULL, 0, 0};
    assert_null(bq__jobtab_find(&t, 1));
    assert_null(bq__jobtab_find(&t, 0));
    assert_null(bq__jobtab_find(&t, UINT64_MAX));
    bq__jobtab_free(&t);
}

static void jobtab_insert_find_remove_one(void **state)
{
    (void)state;
    bq_jobtab_t t = {NULL, 0, 0};
    bq_job_t *j = job_new(42);
    insert(&t, j);
    assert_int_equal(t.cap, MIN_CAP);
    assert_int_equal(t.len, 1);
    assert_ptr_equal(bq__jobtab_find(&t, 42), j);
    assert_null(bq__jobtab_find(&t, 41));
    assert_null(bq__jobtab_find(&t, 42 + MIN_CAP));
    bq__jobtab_remove(&t, j);
    assert_int_equal(t.len, 0);
    assert_null(bq__jobtab_find(&t, 42));
    check_table(&t);
    free(j);
    bq__jobtab_free(&t);
    assert_null(t.slots);
    assert_int_equal(t.cap, 0);
}

static void jobtab_grows_at_three_quarters_load(void **state)
{
    (void)state;
    bq_jobtab_t t = {NULL, 0, 0};
    enum { N = 3 * MIN_CAP };
    static bq_job_t *jobs[N];
    for (size_t i = 0; i < N; i++) {
        jobs[i] = job_new(i + 1);
        insert(&t, jobs[i]);
        /* the smallest power of two >= MIN_CAP holding len at 3/4 load */
        size_t want = MIN_CAP;
        while (t.len * 4 > want * 3)
            want *= 2;
        assert_int_equal(t.cap, want);
    }
    check_table(&t);
    for (size_t i = 0; i < N; i++)
        assert_ptr_equal(bq__jobtab_find(&t, i + 1), jobs[i]);
    for (size_t i = 0; i < N; i++) {
        bq__jobtab_remove(&t, jobs[i]);
        free(jobs[i]);
    }
    bq__jobtab_free(&t);
}

static void jobtab_shrinks_below_one_sixteenth(void **state)
{
    (void)state;
    bq_jobtab_t t = {NULL, 0, 0};
    enum { N = 12 * MIN_CAP };
    static bq_job_t *jobs[N];
    for (size_t i = 0; i < N; i++) {
        jobs[i] = job_new(i + 1);
        insert(&t, jobs[i]);
    }
    size_t cap = t.cap;
    assert_int_equal(cap, 16 * MIN_CAP);
    for (size_t i = 0; i < N; i++) {
        bq__jobtab_remove(&t, jobs[i]);
        free(jobs[i]);
        jobs[i] = NULL;
        if (t.cap != cap) {
            /* shrinks by half, only once len fell below cap/16 */
            assert_int_equal(t.cap, cap / 2);
            assert_true(t.len < cap / 16);
            cap = t.cap;
            check_table(&t);
        }
        assert_true(t.cap == MIN_CAP || t.len >= t.cap / 16);
        if (i % 1000 == 0) {
            for (size_t k = i + 1; k < N; k++)
                assert_ptr_equal(bq__jobtab_find(&t, k + 1), jobs[k]);
        }
    }
    assert_int_equal(t.cap, MIN_CAP); /* never below the minimum */
    assert_int_equal(t.len, 0);
    bq__jobtab_free(&t);
}

/* 100,000 ids inserted in order with random deletions, checked against a
 * model after every batch. */
static void jobtab_random_100k_match_model(void **state)
{
    (void)state;
    enum { N = 100000 };
    bq_job_t **model = calloc(N + 1, sizeof *model); /* by id; NULL when absent */
    assert_non_null(model);
    bq_jobtab_t t = {NULL, 0, 0};
    size_t live = 0;
    for (uint64_t id = 1; id <= N; id++) {
        model[id] = job_new(id);
        insert(&t, model[id]);
        live++;
        /* delete a random earlier id about two times in three */
        if (rnd64() % 3 != 0) {
            uint64_t victim = 1 + rnd64() % id;
            if (model[victim]) {
                bq__jobtab_remove(&t, model[victim]);
                free(model[victim]);
                model[victim] = NULL;
                live--;
            }
        }
        assert_int_equal(t.len, live);
        if (id % 10000 == 0) {
            check_table(&t);
            for (uint64_t k = 1; k <= N + 10; k++)
                assert_ptr_equal(bq__jobtab_find(&t, k), k <= N ? model[k] : NULL);
        }
    }
    /* delete everything left in random order */
    while (live) {
        uint64_t victim = 1 + rnd64() % N;
        if (!model[victim])
            continue;
        bq__jobtab_remove(&t, model[victim]);
        free(model[victim]);
        model[victim] = NULL;
        live--;
        assert_int_equal(t.len, live);
        if (live % 5000 == 0) {
            check_table(&t);
            for (uint64_t k = 1; k <= N; k++)
                assert_ptr_equal(bq__jobtab_find(&t, k), model[k]);
        }
    }
    assert_int_equal(t.cap, MIN_CAP);
    bq__jobtab_free(&t);
    free(model);
}

/* Collects n ids whose home slot (in a MIN_CAP table) is `home`. */
static void ids_with_home(size_t home, uint64_t *ids, size_t n, uint64_t start)
{
    size_t got = 0;
    for (uint64_t id = start; got < n; id++) {
        if (home_of(id, MIN_CAP) == home)
            ids[got++] = id;
    }
}

/* Builds a table holding the given ids; returns the jobs in order. */
static void fill(bq_jobtab_t *t, const uint64_t *ids, size_t n, bq_job_t **jobs)
{
    for (size_t i = 0; i < n; i++) {
        jobs[i] = job_new(ids[i]);
        insert(t, jobs[i]);
    }
    assert_int_equal(t->cap, MIN_CAP);
    check_table(t);
}

static void check_all(const bq_jobtab_t *t, const uint64_t *ids, bq_job_t *const *jobs, size_t n)
{
    check_table(t);
    for (size_t i = 0; i < n; i++)
        assert_ptr_equal(bq__jobtab_find(t, ids[i]), jobs[i]);
}

/* Two interleaved clusters (homes 100 and 101) deleted from the front, the
 * middle and the back, with a lookup of every survivor after each delete. */
static void jobtab_backward_shift_keeps_clusters_findable(void **state)
{
    (void)state;
    enum { PER = 12, N = 2 * PER + 4 };
    static const int orders[3][N] = {
        {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13,
         14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27},
        {27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
         13, 12, 11, 10, 9,  8,  7,  6,  5,  4,  3,  2,  1,  0},
        {13, 14, 12, 15, 11, 16, 10, 17, 9, 18, 8, 19, 7, 20,
         6,  21, 5,  22, 4,  23, 3,  24, 2, 25, 1, 26, 0, 27},
    };
    for (int o = 0; o < 3; o++) {
        uint64_t ids[N];
        ids_with_home(100, ids, PER, 1);
        ids_with_home(101, ids + PER, PER, 1);
        /* and a few ids whose home lies inside the run */
        ids_with_home(105, ids + 2 * PER, 2, 1);
        ids_with_home(110, ids + 2 * PER + 2, 2, 1);
        bq_jobtab_t t = {NULL, 0, 0};
        bq_job_t *jobs[N];
        fill(&t, ids, N, jobs);
        /* the run from slot 100 is contiguous */
        for (size_t k = 100; k < 100 + N; k++)
            assert_non_null(t.slots[k]);
        for (int i = 0; i < N; i++) {
            int v = orders[o][i];
            bq__jobtab_remove(&t, jobs[v]);
            free(jobs[v]);
            jobs[v] = NULL;
            for (int k = 0; k < N; k++)
                assert_ptr_equal(bq__jobtab_find(&t, ids[k]), jobs[k]);
            check_table(&t);
        }
        assert_int_equal(t.len, 0);
        for (size_t k = 0; k < t.cap; k++)
            assert_null(t.slots[k]);
        bq__jobtab_free(&t);
    }
}

/* A cluster that starts in the last slots and wraps to slot 0, plus jobs
 * whose home is slot 0 or 1 and that sit behind the wrapped part. */
static void jobtab_backward_shift_across_the_wrap(void **state)
{
    (void)state;
    enum { N = 14 };
    uint64_t ids[N];
    ids_with_home(MIN_CAP - 2, ids, 5, 1);
    ids_with_home(MIN_CAP - 1, ids + 5, 5, 1);
    ids_with_home(0, ids + 10, 2, 1);
    ids_with_home(1, ids + 12, 2, 1);
    for (int first = 0; first < N; first++) {
        bq_jobtab_t t = {NULL, 0, 0};
        bq_job_t *jobs[N];
        fill(&t, ids, N, jobs);
        /* the run wraps: slots cap-2, cap-1, 0, ... are all full */
        assert_non_null(t.slots[MIN_CAP - 2]);
        assert_non_null(t.slots[MIN_CAP - 1]);
        assert_non_null(t.slots[0]);
        /* delete starting at `first`, then every other, then the rest */
        for (int step = 0; step < N; step++) {
            int v = (first + step * 3) % N;
            if (!jobs[v])
                continue;
            bq__jobtab_remove(&t, jobs[v]);
            free(jobs[v]);
            jobs[v] = NULL;
            check_all(&t, ids, jobs, N);
        }
        for (int v = 0; v < N; v++) {
            if (jobs[v]) {
                bq__jobtab_remove(&t, jobs[v]);
                free(jobs[v]);
                jobs[v] = NULL;
                check_all(&t, ids, jobs, N);
            }
        }
        assert_int_equal(t.len, 0);
        bq__jobtab_free(&t);
    }
}

/* Arbitrary 64-bit ids (not sequential) behave the same. */
static void jobtab_random_64bit_ids(void **state)
{
    (void)state;
    enum { N = 5000 };
    static uint64_t ids[N];
    static bq_job_t *jobs[N];
    bq_jobtab_t t = {NULL, 0, 0};
    for (size_t i = 0; i < N; i++) {
        ids[i] = rnd64() | (i == 0 ? UINT64_C(1) << 63 : 0);
        jobs[i] = job_new(ids[i]);
        insert(&t, jobs[i]);
    }
    ids[N - 1] = UINT64_MAX;
    bq__jobtab_remove(&t, jobs[N - 1]);
    jobs[N - 1]->id = UINT64_MAX;
    insert(&t, jobs[N - 1]);
    check_all(&t, ids, jobs, N);
    for (size_t i = 0; i < N; i += 2) {
        bq__jobtab_remove(&t, jobs[i]);
        free(jobs[i]);
        jobs[i] = NULL;
    }
    check_all(&t, ids, jobs, N);
    for (size_t i = 1; i < N; i += 2) {
        bq__jobtab_remove(&t, jobs[i]);
        free(jobs[i]);
    }
    assert_int_equal(t.len, 0);
    bq__jobtab_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(jobtab_find_in_empty_table),
        cmocka_unit_test(jobtab_insert_find_remove_one),
        cmocka_unit_test(jobtab_grows_at_three_quarters_load),
        cmocka_unit_test(jobtab_shrinks_below_one_sixteenth),
        cmocka_unit_test(jobtab_random_100k_match_model),
        cmocka_unit_test(jobtab_backward_shift_keeps_clusters_findable),
        cmocka_unit_test(jobtab_backward_shift_across_the_wrap),
        cmocka_unit_test(jobtab_random_64bit_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
