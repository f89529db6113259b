/* Unit tests of the primary's answer to a Hello (replication/handshake.c):
 * every refusal and their order, and where the stream starts: resume at
 * segment boundaries, at the primary's last frame, into an empty last or
 * middle segment, and resync when the standby is ahead, behind the oldest
 * retained segment or on another branch of the log after a fork; with a
 * standby that can cut, the fork point found from both logs' epochs (cut
 * there when every later frame is retained). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "replication/handshake.h"

static const char *const peers[] = {"n2", "n3"};

/* Segments 1..10 in epoch 1, 11..20 in epoch 2, 21..30 in epoch 3. */
static const bq_hs_segment_t three[] = {{1, 1}, {11, 2}, {21, 3}};

static bq_hs_primary_t primary(const bq_hs_segment_t *segs, size_t nsegs, uint64_t last_lsn)
{
    bq_hs_primary_t p = {
        .cluster_id = "c1",
        .node_id = "n1",
        .epoch = 3,
        .last_lsn = last_lsn,
        .segs = segs,
        .nsegs = nsegs,
        .peers = peers,
        .npeers = 2,
        .tls_name = NULL,
    };
    return p;
}

static Bq__Repl__Hello hello(const char *node_id, uint64_t last_epoch, uint64_t last_lsn)
{
    Bq__Repl__Hello h = BQ__REPL__HELLO__INIT;
    h.version = BQ_REPL_VERSION;
    h.cluster_id = (char *)"c1";
    h.node_id = (char *)node_id;
    h.last_epoch = last_epoch;
    h.last_lsn = last_lsn;
    return h;
}

static bq_hs_decision_t decide(const bq_hs_primary_t *p, const Bq__Repl__Hello *h)
{
    bq_hs_decision_t d;
    memset(&d, 0xA5, sizeof(d));
    bq_hs_decide(p, h, &d);
    return d;
}

static void assert_refused(const bq_hs_decision_t *d, Bq__Repl__RefuseReason reason)
{
    assert_int_equal(d->action, BQ_HS_REFUSE);
    assert_int_equal(d->reason, reason);
    assert_non_null(d->detail);
    assert_true(strlen(d->detail) > 0);
    assert_null(strchr(d->detail, '\n'));
}

static void assert_start(const bq_hs_decision_t *d, bq_hs_action_t action, uint64_t lsn, size_t seg)
{
    assert_int_equal(d->action, action);
    assert_int_equal(d->start_lsn, lsn);
    assert_int_equal(d->seg, seg);
}

static void test_bad_version(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__Hello h = hello("n2", 3, 30);
    h.version = 0;
    bq_hs_decision_t d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__BAD_VERSION);
    h.version = BQ_REPL_VERSION + 1;
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__BAD_VERSION);
}

static void test_wrong_cluster(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__Hello h = hello("n2", 3, 30);
    h.cluster_id = (char *)"c2";
    bq_hs_decision_t d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__WRONG_CLUSTER);
    h.cluster_id = (char *)"";
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__WRONG_CLUSTER);
}

static void test_unknown_node(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    const char *bad[] = {"", "n1", "n4", "n"};
    const char *details[4];
    for (size_t i = 0; i < 4; i++) {
        Bq__Repl__Hello h = hello(bad[i], 3, 30);
        bq_hs_decision_t d = decide(&p, &h);
        assert_refused(&d, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE);
        details[i] = d.detail;
    }
    /* Empty, own and unknown ids are told apart in the detail. */
    assert_string_not_equal(details[0], details[1]);
    assert_string_not_equal(details[1], details[2]);
    assert_string_not_equal(details[0], details[2]);
}

static void test_certificate_name(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__Hello h = hello("n2", 3, 30);
    p.tls_name = "n3"; /* n3's certificate presenting n2's id */
    bq_hs_decision_t d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE);
    p.tls_name = "n2";
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 31, 2);
    p.tls_name = NULL; /* plaintext: only the peer list counts */
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 31, 2);
}

static void test_stale_primary(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__Hello h = hello("n2", 4, 30);
    bq_hs_decision_t d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__STALE_PRIMARY);
    /* Even with a shorter log: the epoch decides. */
    h = hello("n2", 4, 2);
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__STALE_PRIMARY);
}

static void test_refusal_order(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    p.tls_name = "n3";
    Bq__Repl__Hello h = hello("n9", 9, 99);
    h.cluster_id = (char *)"other";
    h.version = 7;
    bq_hs_decision_t d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__BAD_VERSION);
    h.version = BQ_REPL_VERSION;
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__WRONG_CLUSTER);
    h.cluster_id = (char *)"c1";
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE);
    h.node_id = (char *)"n2"; /* a peer, but not the certificate's */
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE);
    h.node_id = (char *)"n3";
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__STALE_PRIMARY);
    h.last_epoch = 3;
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0); /* ahead of the primary */
}

/* The role comes from our flags: a peer we declared a witness must say it
 * is one, and one we did not may not claim it (a witness gets no frames;
 * its floor counts as a copy while degraded). The identity rules alone
 * never look at the epochs a hello names. */
static void test_declared_witness(void **state)
{
    (void)state;
    static const bool witness[] = {false, true}; /* n3 is a witness */
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__Hello h = hello("n3", 3, 30);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 31, 2); /* no witness declared: a standby */
    h.witness = true;
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE);
    p.witness = witness;
    d = decide(&p, &h);
    assert_int_equal(d.action, BQ_HS_RESUME);
    h.witness = false; /* the witness's certificate claiming a standby's role */
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE);
    assert_non_null(strstr(d.detail, "witness"));
    h = hello("n2", 3, 30);
    h.witness = true;
    d = decide(&p, &h);
    assert_refused(&d, BQ__REPL__REFUSE_REASON__UNKNOWN_NODE);
    /* Identity alone: a hello from an impostor naming a huge epoch is
     * refused before its epoch matters; a good one passes whatever its
     * epochs (the caller bounds them). */
    h = hello("n9", UINT64_MAX, UINT64_MAX);
    h.epoch = UINT64_MAX;
    assert_true(bq_hs_identity_refused(&p, &h, &d));
    h = hello("n2", UINT64_MAX, 5);
    h.cluster_id = (char *)"other";
    assert_true(bq_hs_identity_refused(&p, &h, &d));
    assert_int_equal(d.reason, BQ__REPL__REFUSE_REASON__WRONG_CLUSTER);
    h.cluster_id = (char *)"c1";
    assert_false(bq_hs_identity_refused(&p, &h, &d));
}

static void test_resume_at_boundaries(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    struct {
        uint64_t epoch, lsn, start;
        size_t seg;
    } cases[] = {
        {1, 1, 2, 0},   /* first frame */
        {1, 9, 10, 0},  /* the last frame of segment 0 follows */
        {1, 10, 11, 1}, /* segment 0's last frame: resume at segment 1 */
        {2, 11, 12, 1}, /* segment 1's first frame */
        {2, 15, 16, 1}, {2, 20, 21, 2},
        {3, 29, 30, 2}, {3, 30, 31, 2}, /* the primary's last frame: nothing to send yet */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Bq__Repl__Hello h = hello("n2", cases[i].epoch, cases[i].lsn);
        bq_hs_decision_t d = decide(&p, &h);
        assert_start(&d, BQ_HS_RESUME, cases[i].start, cases[i].seg);
    }
}

static void test_resume_from_nothing(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__Hello h = hello("n2", 0, 0);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 1, 0);

    /* A primary with an empty log and a standby with nothing. */
    static const bq_hs_segment_t empty[] = {{1, 1}};
    p = primary(empty, 1, 0);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 1, 0);
    h = hello("n3", 1, 1); /* ahead of it */
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
}

static void test_empty_last_segment(void **state)
{
    (void)state;
    /* Epoch 3 opened segment 2 at 31 and has written nothing yet. */
    static const bq_hs_segment_t segs[] = {{1, 1}, {11, 2}, {31, 3}};
    bq_hs_primary_t p = primary(segs, 3, 30);
    Bq__Repl__Hello h = hello("n2", 2, 30);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 31, 2);
    h = hello("n2", 2, 25);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 26, 1);
    /* LSN 30 is epoch 2's, not 3's. */
    h = hello("n2", 3, 30);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
    assert_int_equal(bq_hs_epoch_of(&p, 30), 2);
    assert_int_equal(bq_hs_epoch_of(&p, 31), -1);
}

static void test_empty_middle_segment(void **state)
{
    (void)state;
    /* Epoch 2 opened a segment at 11 and wrote nothing before epoch 3. */
    static const bq_hs_segment_t segs[] = {{1, 1}, {11, 2}, {11, 3}};
    bq_hs_primary_t p = primary(segs, 3, 20);
    assert_int_equal(bq_hs_epoch_of(&p, 10), 1);
    assert_int_equal(bq_hs_epoch_of(&p, 11), 3);
    Bq__Repl__Hello h = hello("n2", 1, 10);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 11, 2);
    h = hello("n2", 3, 11);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 12, 2);
    h = hello("n2", 2, 11); /* no frame of epoch 2 exists */
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
}

static void test_behind_oldest_segment(void **state)
{
    (void)state;
    /* Frames before 11 were compacted away. */
    static const bq_hs_segment_t segs[] = {{11, 2}, {21, 3}};
    bq_hs_primary_t p = primary(segs, 2, 30);
    uint64_t lsns[] = {0, 1, 9, 10};
    for (size_t i = 0; i < 4; i++) {
        Bq__Repl__Hello h = hello("n2", lsns[i] ? 1 : 0, lsns[i]);
        bq_hs_decision_t d = decide(&p, &h);
        assert_start(&d, BQ_HS_RESYNC, 11, 0);
    }
    Bq__Repl__Hello h = hello("n2", 2, 11); /* the oldest frame is held */
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 12, 0);
}

/* A standby whose last frame is the one just before the oldest retained
 * (compacted away) resumes when the primary's epoch history puts it in the
 * standby's epoch (issue 19: a new primary whose jobs were all deleted kept
 * only its new epoch's segment, and caught-up standbys resynced); a
 * different or unknown epoch resyncs (or cuts), and a frame further back is
 * gone. */
static void test_resume_after_compacted_frame(void **state)
{
    (void)state;
    static const bq_hs_segment_t segs[] = {{1879, 3}};
    bq_hs_primary_t p = primary(segs, 1, 1879);
    p.before_epoch = 2;
    Bq__Repl__Hello h = hello("n2", 2, 1878);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 1879, 0);
    h = hello("n2", 1, 1878); /* another epoch there: a fork */
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1879, 0);
    p.before_epoch = 0; /* unknown */
    h = hello("n2", 2, 1878);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1879, 0);
    p.before_epoch = 2;
    h = hello("n2", 2, 1877); /* 1878 is gone */
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1879, 0);
}

static void test_ahead_of_primary(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__Hello h = hello("n2", 3, 31);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
    h = hello("n2", 2, UINT64_MAX);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
}

static void test_fork(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    /* The standby, an old primary of epoch 2, wrote 21..25 that the new
     * primary never had: the new primary's 21..25 are epoch 3. */
    Bq__Repl__Hello h = hello("n2", 2, 25);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
    /* Same LSN, older epoch inside a segment of epoch 2. */
    h = hello("n2", 1, 15);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
    /* The same frame (epoch 2, LSN 20): the logs agree up to it. */
    h = hello("n2", 2, 20);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 21, 2);
}

/* A hello that can cut, listing where its epochs begin. */
static Bq__Repl__Hello hello_cut(uint64_t last_epoch, uint64_t last_lsn,
                                 Bq__Repl__EpochStart *starts, size_t n,
                                 Bq__Repl__EpochStart **ptrs)
{
    Bq__Repl__Hello h = hello("n2", last_epoch, last_lsn);
    for (size_t i = 0; i < n; i++)
        ptrs[i] = &starts[i];
    h.can_cut = true;
    h.epochs = ptrs;
    h.n_epochs = n;
    return h;
}

static Bq__Repl__EpochStart start_of(uint64_t epoch, uint64_t first)
{
    Bq__Repl__EpochStart s = BQ__REPL__EPOCH_START__INIT;
    s.epoch = epoch;
    s.first_lsn = first;
    return s;
}

static void test_fork_cut(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    Bq__Repl__EpochStart *ptrs[4];
    /* The old primary of epoch 2 wrote 21..25 nobody got: cut after 20. */
    Bq__Repl__EpochStart a[] = {start_of(1, 1), start_of(2, 11)};
    Bq__Repl__Hello h = hello_cut(2, 25, a, 2, ptrs);
    bq_hs_decision_t d = decide(&p, &h);
    assert_start(&d, BQ_HS_CUT, 21, 2);
    assert_int_equal(d.cut_after, 20);
    assert_int_equal(bq_hs_fork(&p, &h), 20);
    /* Without can_cut (an older node): a resync, as before. */
    h.can_cut = false;
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESYNC, 1, 0);
    /* Its own epoch 4 (won, then isolated) that nobody has, while the
     * primary went on to epoch 5: back to epoch 3's common part, 21..23 (its
     * log entered epoch 3 at 21 and left it at 24). */
    const bq_hs_segment_t five[] = {{1, 1}, {11, 2}, {21, 3}, {31, 5}};
    bq_hs_primary_t p5 = primary(five, 4, 40);
    p5.epoch = 5;
    Bq__Repl__EpochStart b[] = {start_of(1, 1), start_of(2, 11), start_of(3, 21), start_of(4, 24)};
    h = hello_cut(4, 40, b, 4, ptrs);
    d = decide(&p5, &h);
    assert_start(&d, BQ_HS_CUT, 24, 2);
    assert_int_equal(d.cut_after, 23);
    /* Ahead of the primary in the same epoch (a primary that lost its tail):
     * cut back to the primary's last frame. */
    h = hello_cut(3, 35, b, 3, ptrs);
    assert_int_equal(bq_hs_fork(&p, &h), 30);
    /* A fork before the oldest retained frame: a resync. */
    const bq_hs_segment_t late[] = {{11, 2}, {21, 3}};
    bq_hs_primary_t q = primary(late, 2, 30);
    Bq__Repl__EpochStart c[] = {start_of(1, 1)};
    h = hello_cut(1, 12, c, 1, ptrs);
    assert_int_equal(bq_hs_fork(&q, &h), -1);
    d = decide(&q, &h);
    assert_start(&d, BQ_HS_RESYNC, 11, 0);
    /* Epochs out of order are not believed. */
    Bq__Repl__EpochStart bad[] = {start_of(1, 30), start_of(2, 11)};
    h = hello_cut(2, 25, bad, 2, ptrs);
    assert_int_equal(bq_hs_fork(&p, &h), -1);
    /* A resumable hello stays a resume. */
    h = hello_cut(2, 20, a, 2, ptrs);
    d = decide(&p, &h);
    assert_start(&d, BQ_HS_RESUME, 21, 2);
}

static void test_epoch_of(void **state)
{
    (void)state;
    bq_hs_primary_t p = primary(three, 3, 30);
    assert_int_equal(bq_hs_epoch_of(&p, 0), -1);
    assert_int_equal(bq_hs_epoch_of(&p, 1), 1);
    assert_int_equal(bq_hs_epoch_of(&p, 10), 1);
    assert_int_equal(bq_hs_epoch_of(&p, 11), 2);
    assert_int_equal(bq_hs_epoch_of(&p, 20), 2);
    assert_int_equal(bq_hs_epoch_of(&p, 21), 3);
    assert_int_equal(bq_hs_epoch_of(&p, 30), 3);
    assert_int_equal(bq_hs_epoch_of(&p, 31), -1);
    assert_int_equal(bq_hs_epoch_of(&p, UINT64_MAX), -1);
    p.segs = three + 1;
    p.nsegs = 2;
    assert_int_equal(bq_hs_epoch_of(&p, 10), -1);
    assert_int_equal(bq_hs_epoch_of(&p, 11), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_wrong_cluster),
        cmocka_unit_test(test_unknown_node),
        cmocka_unit_test(test_certificate_name),
        cmocka_unit_test(test_stale_primary),
        cmocka_unit_test(test_refusal_order),
        cmocka_unit_test(test_declared_witness),
        cmocka_unit_test(test_resume_at_boundaries),
        cmocka_unit_test(test_resume_from_nothing),
        cmocka_unit_test(test_empty_last_segment),
        cmocka_unit_test(test_empty_middle_segment),
        cmocka_unit_test(test_behind_oldest_segment),
        cmocka_unit_test(test_resume_after_compacted_frame),
        cmocka_unit_test(test_ahead_of_primary),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_fork_cut),
        cmocka_unit_test(test_epoch_of),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
