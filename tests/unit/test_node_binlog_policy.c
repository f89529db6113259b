/* Unit tests of node/binlog/policy.c: the room check with its delete
 * reserve, the release LSN under each -f mode with sync-required entries,
 * rotation and compaction decisions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "node/binlog/policy.h"

#define DEL BQ_BINLOG_DELETE_FRAME

static bq_binlog_space_t space(uint64_t used, uint64_t prealloc, uint64_t live_jobs)
{
    return (bq_binlog_space_t){
        .used = used, .prealloc = prealloc, .live_jobs = live_jobs, .seg_size = 4096};
}

static void room_record_fits_with_reserve_granted(void **state)
{
    (void)state;
    /* 10 live jobs keep 10 delete frames; the new record keeps one more. */
    uint64_t need = 100 + 76 + BQ_FRAME_HEADER + 11 * DEL;
    bq_binlog_space_t sp = space(100, need, 10);
    uint64_t grow = 0;
    assert_int_equal(bq_binlog_room_decide(&sp, 76, false, &grow), BQ_BINLOG_ROOM_GRANT);
    sp.prealloc = need - 1;
    assert_int_equal(bq_binlog_room_decide(&sp, 76, false, &grow), BQ_BINLOG_ROOM_GROW);
    assert_true(grow >= need);
}

static void room_delete_uses_the_reserve(void **state)
{
    (void)state;
    /* Full for anything but a delete: the reserve is exactly what is left. */
    bq_binlog_space_t sp = space(1000, 1000 + 5 * DEL, 5);
    uint64_t grow = 0;
    assert_int_equal(bq_binlog_room_decide(&sp, 10, false, &grow), BQ_BINLOG_ROOM_GROW);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(bq_binlog_room_decide(&sp, DEL - BQ_FRAME_HEADER, true, &grow),
                         BQ_BINLOG_ROOM_GRANT);
        sp.used += DEL;
        sp.live_jobs--;
    }
    assert_int_equal(sp.used, sp.prealloc);
}

static void room_grows_by_a_quarter_segment_at_least(void **state)
{
    (void)state;
    bq_binlog_space_t sp = space(4000, 4096, 0);
    uint64_t grow = 0;
    assert_int_equal(bq_binlog_room_decide(&sp, 100, false, &grow), BQ_BINLOG_ROOM_GROW);
    assert_int_equal(grow, 4096 + 1024);
    /* A record larger than a quarter segment grows by what it needs. */
    assert_int_equal(bq_binlog_room_decide(&sp, 100000, false, &grow), BQ_BINLOG_ROOM_GROW);
    assert_int_equal(grow, 4000 + 100000 + BQ_FRAME_HEADER + DEL);
}

static void room_failing_log_takes_only_deletes(void **state)
{
    (void)state;
    bq_binlog_space_t sp = space(0, 1 << 20, 3);
    uint64_t grow = 0;
    sp.failing = true;
    assert_int_equal(bq_binlog_room_decide(&sp, 10, false, &grow), BQ_BINLOG_ROOM_REFUSE);
    assert_int_equal(bq_binlog_room_decide(&sp, 16, true, &grow), BQ_BINLOG_ROOM_GRANT);
}

static void segment_alloc_covers_the_reserve(void **state)
{
    (void)state;
    assert_int_equal(bq_binlog_segment_alloc(10485760, 0), 10485760);
    assert_int_equal(bq_binlog_segment_alloc(4096, 0), BQ_BINLOG_SEGMENT_MARGIN);
    assert_int_equal(bq_binlog_segment_alloc(4096, 1000000),
                     1000000 * (uint64_t)DEL + BQ_BINLOG_SEGMENT_MARGIN);
    assert_int_equal(bq_binlog_delete_reserve(7), 7 * DEL);
}

static void rotate_when_full_and_not_fresh(void **state)
{
    (void)state;
    assert_false(bq_binlog_rotate_due(4095, 4096, false, 0, 0));
    assert_true(bq_binlog_rotate_due(4096, 4096, false, 0, 0));
    /* Only the opening records: rotating again would loop. */
    assert_false(bq_binlog_rotate_due(5000, 4096, true, 0, 0));
    /* After a failure, not before the retry time. */
    assert_false(bq_binlog_rotate_due(5000, 4096, false, 999, 1000));
    assert_true(bq_binlog_rotate_due(5000, 4096, false, 1000, 1000));
}

static void release_follows_the_mode(void **state)
{
    (void)state;
    bq_binlog_lsns_t l = {.last = 10, .written = 8, .synced = 5};
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_ALWAYS), 5);
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_TIMED), 8);
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER), 8);
}

static void release_stops_before_an_unsynced_sync_entry(void **state)
{
    (void)state;
    bq_binlog_lsns_t l = {.last = 10, .written = 10, .synced = 2};
    bq_binlog_lsns_need_sync(&l, 7);
    assert_true(bq_binlog_lsns_sync_urgent(&l));
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER), 6);
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_TIMED), 6);
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_ALWAYS), 2);
    bq_binlog_lsns_synced(&l, 10);
    assert_false(bq_binlog_lsns_sync_urgent(&l));
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER), 10);
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_ALWAYS), 10);
}

static void sync_entry_not_yet_written_is_not_urgent(void **state)
{
    (void)state;
    bq_binlog_lsns_t l = {.last = 12, .written = 10, .synced = 10};
    bq_binlog_lsns_need_sync(&l, 12);
    assert_false(bq_binlog_lsns_sync_urgent(&l));
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER), 10);
    l.written = 12;
    assert_true(bq_binlog_lsns_sync_urgent(&l));
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER), 11);
}

static void two_sync_entries_hold_until_both_synced(void **state)
{
    (void)state;
    bq_binlog_lsns_t l = {.last = 30, .written = 30, .synced = 0};
    bq_binlog_lsns_need_sync(&l, 5);
    bq_binlog_lsns_need_sync(&l, 20);
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER), 4);
    /* An fsync covering the first only: replies may not pass the second. */
    bq_binlog_lsns_synced(&l, 10);
    assert_true(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER) < 20);
    assert_true(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER) >= 10);
    assert_true(bq_binlog_lsns_sync_urgent(&l));
    bq_binlog_lsns_synced(&l, 25);
    assert_int_equal(bq_binlog_lsns_release(&l, BQ_BINLOG_SYNC_NEVER), 30);
    assert_false(bq_binlog_lsns_sync_urgent(&l));
}

static void synced_never_goes_back(void **state)
{
    (void)state;
    bq_binlog_lsns_t l = {.last = 9, .written = 9, .synced = 9};
    bq_binlog_lsns_synced(&l, 4); /* a late completion after a rotation's fsync */
    assert_int_equal(l.synced, 9);
}

static void compact_unlinks_an_unused_oldest_segment(void **state)
{
    (void)state;
    assert_int_equal(bq_binlog_compact_decide(3, 100, 1000, 4096, 0), BQ_BINLOG_COMPACT_UNLINK);
    /* The current segment is never removed. */
    assert_int_equal(bq_binlog_compact_decide(1, 1 << 30, 0, 4096, 0), BQ_BINLOG_COMPACT_NONE);
}

static void compact_migrates_only_when_the_log_is_too_large(void **state)
{
    (void)state;
    /* Live data 1 MiB, -s 4 KiB: up to 2 MiB is fine. */
    assert_int_equal(bq_binlog_compact_decide(5, 2 << 20, 1 << 20, 4096, 1),
                     BQ_BINLOG_COMPACT_NONE);
    assert_int_equal(bq_binlog_compact_decide(5, (2 << 20) + 2, 1 << 20, 4096, 1),
                     BQ_BINLOG_COMPACT_MIGRATE);
    /* Little live data: the floor is the segment size. */
    assert_int_equal(bq_binlog_compact_decide(3, 8192, 10, 4096, 1), BQ_BINLOG_COMPACT_NONE);
    assert_int_equal(bq_binlog_compact_decide(3, 8194, 10, 4096, 1), BQ_BINLOG_COMPACT_MIGRATE);
}

static void ids_continue_only_on_a_single_node_log_without_skips(void **state)
{
    (void)state;
    assert_true(bq_binlog_ids_may_continue(true, 0, 0));
    assert_false(bq_binlog_ids_may_continue(false, 0, 0)); /* a cluster node */
    assert_false(bq_binlog_ids_may_continue(true, 3, 0));  /* a cluster wrote the log */
    assert_false(bq_binlog_ids_may_continue(true, 0, 1));  /* records may be missing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(room_record_fits_with_reserve_granted),
        cmocka_unit_test(room_delete_uses_the_reserve),
        cmocka_unit_test(room_grows_by_a_quarter_segment_at_least),
        cmocka_unit_test(room_failing_log_takes_only_deletes),
        cmocka_unit_test(segment_alloc_covers_the_reserve),
        cmocka_unit_test(rotate_when_full_and_not_fresh),
        cmocka_unit_test(release_follows_the_mode),
        cmocka_unit_test(release_stops_before_an_unsynced_sync_entry),
        cmocka_unit_test(sync_entry_not_yet_written_is_not_urgent),
        cmocka_unit_test(two_sync_entries_hold_until_both_synced),
        cmocka_unit_test(synced_never_goes_back),
        cmocka_unit_test(compact_unlinks_an_unused_oldest_segment),
        cmocka_unit_test(compact_migrates_only_when_the_log_is_too_large),
        cmocka_unit_test(ids_continue_only_on_a_single_node_log_without_skips),
    };
    return cmocka_run_group_tests_name("binlog_policy", tests, NULL, NULL);
}
