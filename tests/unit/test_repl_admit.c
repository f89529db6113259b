/* Unit tests of the admission rules (replication/admit.c): a source's own
 * oldest connection makes room first, then the oldest evictable of any
 * source; busy and trusted connections are never evicted; a listener full
 * of them refuses; and a simulated flood from many sources never keeps a
 * well-behaved newcomer out while anything is evictable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "replication/admit.h"

static bq_admit_entry_t entry(const char *source, bq_admit_state_t st, int64_t since)
{
    bq_admit_entry_t e = {.state = st, .since = since};
    snprintf(e.source, sizeof e.source, "%s", source);
    return e;
}

static void test_room_left(void **state)
{
    (void)state;
    bq_admit_limits_t lim = {4, 2};
    bq_admit_entry_t open[] = {entry("a", BQ_ADMIT_NEW, 1)};
    bq_admit_decision_t d = bq_admit_decide(open, 1, "b", &lim);
    assert_true(d.admit);
    assert_int_equal(d.evict, -1);
    d = bq_admit_decide(NULL, 0, "a", &lim);
    assert_true(d.admit);
    assert_int_equal(d.evict, -1);
}

static void test_source_competes_with_itself(void **state)
{
    (void)state;
    bq_admit_limits_t lim = {16, 2};
    bq_admit_entry_t open[] = {
        entry("x", BQ_ADMIT_IDLE, 5), entry("a", BQ_ADMIT_NEW, 1),     entry("x", BQ_ADMIT_NEW, 3),
        entry("x", BQ_ADMIT_BUSY, 0), entry("x", BQ_ADMIT_TRUSTED, 0),
    };
    bq_admit_decision_t d = bq_admit_decide(open, 5, "x", &lim);
    assert_true(d.admit);
    assert_int_equal(d.evict, 2); /* x's oldest evictable, not a's older one */
    assert_true(d.per_source);
    /* Busy and trusted ones do not count against the source. */
    open[0].state = BQ_ADMIT_BUSY;
    d = bq_admit_decide(open, 5, "x", &lim);
    assert_int_equal(d.evict, -1);
    assert_true(d.admit);
}

static void test_full_evicts_oldest_of_any(void **state)
{
    (void)state;
    bq_admit_limits_t lim = {3, 3};
    bq_admit_entry_t open[] = {entry("a", BQ_ADMIT_IDLE, 7), entry("b", BQ_ADMIT_NEW, 4),
                               entry("c", BQ_ADMIT_TRUSTED, 1)};
    bq_admit_decision_t d = bq_admit_decide(open, 3, "d", &lim);
    assert_true(d.admit);
    assert_int_equal(d.evict, 1);
    assert_false(d.per_source);
    open[1].state = BQ_ADMIT_BUSY;
    d = bq_admit_decide(open, 3, "d", &lim);
    assert_int_equal(d.evict, 0);
    open[0].state = BQ_ADMIT_TRUSTED;
    d = bq_admit_decide(open, 3, "d", &lim);
    assert_false(d.admit);
    assert_int_equal(d.evict, -1);
    assert_true(bq_admit_evictable(BQ_ADMIT_NEW) && bq_admit_evictable(BQ_ADMIT_IDLE));
    assert_false(bq_admit_evictable(BQ_ADMIT_BUSY) || bq_admit_evictable(BQ_ADMIT_TRUSTED));
}

/* Attackers from 50 sources open connections as fast as they are let in
 * and never send anything; a prober (one source) connects every tenth
 * step. With the listener full of evictable connections, each newcomer
 * gets in, no source holds more than its share, and the trusted peers are
 * never touched. */
static void test_flood(void **state)
{
    (void)state;
    enum { MAX = 16 };
    bq_admit_limits_t lim = {MAX, 4};
    bq_admit_entry_t open[MAX];
    size_t n = 0;
    open[n++] = entry("peer1", BQ_ADMIT_TRUSTED, 0);
    open[n++] = entry("peer2", BQ_ADMIT_TRUSTED, 0);
    for (int64_t t = 1; t < 5000; t++) {
        char src[16];
        bool probe = t % 10 == 0;
        snprintf(src, sizeof src, probe ? "kubelet" : "evil%d", (int)(t % 50));
        bq_admit_decision_t d = bq_admit_decide(open, n, src, &lim);
        assert_true(d.admit); /* always room while anything is evictable */
        if (d.evict >= 0) {
            assert_true(bq_admit_evictable(open[d.evict].state));
            open[d.evict] = open[--n];
        }
        assert_true(n < MAX);
        open[n++] = entry(src, BQ_ADMIT_NEW, t);
        size_t trusted = 0, mine = 0;
        for (size_t i = 0; i < n; i++) {
            trusted += open[i].state == BQ_ADMIT_TRUSTED;
            mine += !strcmp(open[i].source, src);
        }
        assert_int_equal(trusted, 2);
        assert_true(mine <= lim.max_per_source);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_room_left),
        cmocka_unit_test(test_source_competes_with_itself),
        cmocka_unit_test(test_full_evicts_oldest_of_any),
        cmocka_unit_test(test_flood),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
