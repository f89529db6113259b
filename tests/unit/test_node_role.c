/* Unit tests of node/binlog/role.c, the binlog's role changes in place.
 *
 * A follower binlog in a mkdtemp directory takes a primary's stream the way
 * a standby does (node/cluster/log_sink.c): the records of an engine that
 * logged every kind of change (engine_history.h) become frames, appended
 * with bq_binlog_follow_segment/_frames and applied to the follower's own
 * engine with bq_engine_apply. The follower then becomes the primary with
 * no replay, and its engine must equal, field for field (h_dump: every job,
 * state, priority, deadline, counter, segment, tube pause, id position), a
 * fresh replay of its directory, and the durable state of the engine that
 * wrote the records. As primary it takes commands whose records go to a new
 * epoch's segment; it becomes a follower again, and a replay of the
 * directory still equals its engine, segment by segment. A follower whose
 * log forked (node/binlog/cut.c) moves its tail aside and its engine is
 * what the records up to the fork point give. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "engine_harness.h"
#include "engine_history.h"
#include "node/binlog/binlog.h"
#include "node/binlog/replay.h"
#include "protocol/frame.h"

typedef struct fixture {
    char dir[64];
    uv_loop_t loop;
    bq_binlog_t *b;
    harness_t *h; /* the follower's engine, its log hooks on b */
} fixture_t;

/* The binlogs the wrapped hooks write to: the follower's, and a restarted
 * copy's (the engine's hook arg is its harness). */
static bq_binlog_t *hooked, *hooked_copy;

static bq_room_t room_hook(void *arg, size_t bytes, bool is_delete)
{
    (void)arg;
    return bq_binlog_room(hooked, bytes, is_delete);
}

static uint32_t log_hook(void *arg, const bq_log_entry_t *entry)
{
    (void)arg;
    return bq_binlog_log(hooked, entry);
}

static bq_room_t room_hook_copy(void *arg, size_t bytes, bool is_delete)
{
    (void)arg;
    return bq_binlog_room(hooked_copy, bytes, is_delete);
}

static uint32_t log_hook_copy(void *arg, const bq_log_entry_t *entry)
{
    (void)arg;
    return bq_binlog_log(hooked_copy, entry);
}

/* A harness whose engine logs through room and log. */
static harness_t *hooked_harness(bq_room_t (*room)(void *, size_t, bool),
                                 uint32_t (*log)(void *, const bq_log_entry_t *))
{
    harness_t *h = h_new(0);
    bq_engine_free(h->e);
    bq_engine_hooks_t hooks = {.send = h_hook_send,
                               .wake = h_hook_wake,
                               .server_info = h_hook_info,
                               .log_room = room,
                               .log = log,
                               .arg = h};
    bq_engine_config_t ec = {BQ_MAX_JOB_SIZE_DEFAULT};
    h->e = bq_engine_new(&ec, &hooks);
    assert_non_null(h->e);
    return h;
}

/* Copies every file of dir into a new directory (returned, malloc'd). */
static char *copy_dir(const char *dir)
{
    char *to = malloc(64);
    assert_non_null(to);
    snprintf(to, 64, "%s.copy", dir);
    assert_int_equal(mkdir(to, 0700), 0);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        char from[512], dst[512], buf[65536];
        if (de->d_name[0] == '.' || strcmp(de->d_name, "lock") == 0)
            continue;
        snprintf(from, sizeof from, "%s/%s", dir, de->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, de->d_name);
        FILE *in = fopen(from, "rb"), *out = fopen(dst, "wb");
        assert_true(in && out);
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            assert_int_equal(fwrite(buf, 1, n, out), n);
        fclose(in);
        fclose(out);
    }
    closedir(d);
    return to;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Runs the loop until every record written is durable (the fsync thread). */
static void settle(fixture_t *fx)
{
    for (int i = 0; i < 5000; i++) {
        bq_binlog_turn(fx->b, fx->h->now);
        if (bq_binlog_durable_lsn(fx->b) >= bq_binlog_last_lsn(fx->b))
            return;
        uv_run(&fx->loop, UV_RUN_ONCE);
    }
    fail_msg("the binlog never became durable up to %llu",
             (unsigned long long)bq_binlog_last_lsn(fx->b));
}

static int setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    snprintf(fx->dir, sizeof fx->dir, "%s/bq-role.XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    assert_non_null(mkdtemp(fx->dir));
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    bq_binlog_config_t cfg = {.dir = fx->dir,
                              .seg_size = 4096,
                              .sync = BQ_BINLOG_SYNC_TIMED, /* a follower syncs at once anyway */
                              .fsync_ms = 50,
                              .follower = true,
                              .node_id = "b",
                              .cluster_id = "c"};
    assert_int_equal(bq_binlog_open(&fx->b, &fx->loop, &cfg), 0);
    hooked = fx->b;
    fx->h = hooked_harness(room_hook, log_hook);
    assert_int_equal(bq_binlog_start(fx->b, fx->h->e, fx->h->now), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *fx = *state;
    bq_binlog_stop(fx->b);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    bq_binlog_free(fx->b);
    h_done(fx->h);
    uv_loop_close(&fx->loop);
    remove_dir(fx->dir);
    free(fx);
    return 0;
}

/* The follower takes records [from, to) of w as the primary's stream of
 * epoch, in a primary segment starting at first, and applies them. */
static void follow(fixture_t *fx, const harness_t *w, size_t from, size_t to, uint64_t first,
                   uint64_t epoch)
{
    assert_int_equal(bq_binlog_follow_segment(fx->b, first, epoch, fx->h->now), 0);
    for (size_t i = from; i < to; i++) {
        const h_record_t *r = &w->log->recs[i];
        uint8_t *f = malloc(BQ_FRAME_HEADER + r->len);
        assert_non_null(f);
        uint64_t lsn = bq_binlog_last_lsn(fx->b) + 1;
        bq_frame_header(f, lsn, epoch, r->data, (uint32_t)r->len);
        memcpy(f + BQ_FRAME_HEADER, r->data, r->len);
        assert_int_equal(bq_binlog_follow_frames(fx->b, f, BQ_FRAME_HEADER + r->len, lsn, epoch),
                         0);
        bq_apply_effect_t eff;
        assert_int_equal(bq_engine_apply_ex(fx->h->e, r->data, r->len,
                                            bq_binlog_current_file(fx->b), fx->h->now, &eff),
                         0);
        bq_binlog_follow_applied(fx->b, &eff, lsn);
        free(f);
    }
    settle(fx);
}

typedef struct tally {
    uint32_t file[64];
    uint64_t jobs[64];
    size_t n;
} tally_t;

static void tally_job(void *arg, uint32_t file)
{
    tally_t *t = arg;
    size_t i = 0;
    while (i < t->n && t->file[i] != file)
        i++;
    if (i == t->n) {
        assert_true(t->n < 64);
        t->file[t->n] = file;
        t->jobs[t->n++] = 0;
    }
    t->jobs[i]++;
}

/* The live jobs per segment the binlog keeps are what the engine's jobs
 * say (a wrong count would let compaction remove a live job's record). */
static void counts_match(const fixture_t *fx)
{
    tally_t t = {0};
    bq_engine_each_job_file(fx->h->e, tally_job, &t);
    for (size_t i = 0; i < bq_binlog_nsegs(fx->b); i++) {
        bq_binlog_seg_info_t sg;
        bq_binlog_seg(fx->b, i, &sg);
        uint64_t want = 0;
        for (size_t k = 0; k < t.n; k++)
            if (t.file[k] == (uint32_t)sg.seq)
                want = t.jobs[k];
        if (sg.jobs != want)
            fail_msg("segment %llu counts %llu live jobs, the engine %llu",
                     (unsigned long long)sg.seq, (unsigned long long)sg.jobs,
                     (unsigned long long)want);
    }
}

/* A fresh engine that replayed the directory at the follower's time. */
static harness_t *replayed(const fixture_t *fx, bq_replay_result_t *res)
{
    harness_t *r = h_new(0);
    r->now = fx->h->now;
    assert_int_equal(bq_replay(fx->dir, r->e, r->now, false, res), 0);
    h_check(r);
    return r;
}

/* Asserts that a and b dump the same (flags as h_dump's). */
static void same(const harness_t *a, const harness_t *b, int flags)
{
    char *da = h_dump(a, flags), *db = h_dump(b, flags);
    if (strcmp(da, db) != 0)
        fail_msg("states differ:\n%s---\n%s", da, db);
    free(da);
    free(db);
}

/* What a start as primary of epoch on a copy of dir gives (the old way of a
 * role change: re-exec and replay), at now: the engine's harness, after
 * the copy's binlog was freed. */
static harness_t *restarted_as_primary(const char *dir, uint64_t epoch, bq_now_t now)
{
    char *copy = copy_dir(dir);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    bq_binlog_config_t cfg = {.dir = copy,
                              .seg_size = 4096,
                              .sync = BQ_BINLOG_SYNC_ALWAYS,
                              .new_epoch = true,
                              .min_epoch = epoch,
                              .node_id = "b",
                              .cluster_id = "c"};
    assert_int_equal(bq_binlog_open(&hooked_copy, &loop, &cfg), 0);
    harness_t *h = hooked_harness(room_hook_copy, log_hook_copy);
    h->now = now;
    assert_int_equal(bq_binlog_start(hooked_copy, h->e, now), 0);
    bq_binlog_turn(hooked_copy, now);
    bq_binlog_stop(hooked_copy);
    uv_run(&loop, UV_RUN_DEFAULT);
    bq_binlog_free(hooked_copy);
    uv_loop_close(&loop);
    remove_dir(copy);
    free(copy);
    return h;
}

/* A standby that followed two primary segments becomes the primary of
 * epoch 2 in place: its engine is, in every field, what a start as primary
 * on the same directory gives (replay, new epoch), what a replay of its
 * directory afterwards gives, and the writer's durable state. */
static void promotion_equals_a_fresh_replay(void **state)
{
    fixture_t *fx = *state;
    harness_t *w = every_kind();
    fx->h->now = w->now;
    size_t half = w->log->n / 2;
    follow(fx, w, 0, half, 1, 1);
    follow(fx, w, half, w->log->n, half + 1, 1);
    uint64_t last = bq_binlog_last_lsn(fx->b);
    assert_int_equal(last, w->log->n);
    counts_match(fx);          /* kept as frames were applied: no recount at promotion */
    fx->h->now.mono += H_S(1); /* time passes between the stream and the election */
    fx->h->now.wall += H_S(1);
    harness_t *old_way = restarted_as_primary(fx->dir, 2, fx->h->now);
    assert_int_equal(bq_binlog_become_primary(fx->b, 2, fx->h->now), 0);
    settle(fx);
    assert_int_equal(bq_binlog_epoch(fx->b), 2);
    assert_true(bq_binlog_last_lsn(fx->b) > last); /* the new segment's checkpoint */
    h_check(fx->h);
    counts_match(fx);

    bq_replay_result_t res;
    harness_t *r = replayed(fx, &res);
    assert_int_equal(res.last_lsn, bq_binlog_last_lsn(fx->b));
    assert_int_equal(res.last_epoch, 2);
    /* Where ids go on: as a primary started on this directory would. */
    bq_engine_resume_ids(r->e, false);
    same(fx->h, old_way, 0);
    same(fx->h, r, 0);
    same(fx->h, w, H_DUMP_DURABLE | H_DUMP_NO_RESERVES);
    h_done(old_way);
    h_done(r);
    h_done(w);
}

/* As primary it logs commands in epoch 2; demoted, it syncs and closes its
 * segment, then follows epoch 3 from the next LSN; replay still equals it. */
static void primary_then_follower_again(void **state)
{
    fixture_t *fx = *state;
    harness_t *w = every_kind();
    fx->h->now = w->now;
    follow(fx, w, 0, w->log->n, 1, 1);
    assert_int_equal(bq_binlog_become_primary(fx->b, 2, fx->h->now), 0);
    int c = h_open(fx->h);
    uint64_t id = h_put(fx->h, c, 3, 0, 60, "after the promotion");
    assert_true(id > 0);
    jobcmd(fx->h, c, "delete", 1, "", "DELETED\r\n");
    h_cmd(fx->h, c, "pause-tube default 30\r\n", "PAUSED\r\n");
    settle(fx);
    /* Demoted: its clients close first (the node does), then the log. */
    h_close(fx->h, c);
    counts_match(fx);
    assert_int_equal(bq_binlog_become_follower(fx->b), 0);
    uint64_t last = bq_binlog_last_lsn(fx->b);
    assert_int_equal(bq_binlog_durable_lsn(fx->b), last);
    bq_replay_result_t res;
    harness_t *r = replayed(fx, &res);
    assert_int_equal(res.last_lsn, last);
    same(fx->h, r, H_DUMP_DURABLE);
    h_done(r);
    /* The new primary's stream goes on from the next LSN in epoch 3. */
    harness_t *w3 = h_new_logged(0);
    w3->now = fx->h->now;
    int c3 = h_open(w3);
    h_put(w3, c3, 1, 0, 60, "from the new primary");
    follow(fx, w3, 0, w3->log->n, last + 1, 3);
    assert_int_equal(bq_binlog_epoch(fx->b), 3);
    r = replayed(fx, &res);
    assert_int_equal(res.last_epoch, 3);
    same(fx->h, r, H_DUMP_DURABLE);
    counts_match(fx);
    h_done(r);
    h_close(w3, c3);
    h_done(w3);
    h_done(w);
}

/* An epoch the log has reached cannot be opened: the binlog stays a
 * follower and goes on following. */
static void promotion_to_a_reached_epoch_is_refused(void **state)
{
    fixture_t *fx = *state;
    harness_t *w = every_kind();
    fx->h->now = w->now;
    follow(fx, w, 0, w->log->n, 1, 4);
    assert_int_equal(bq_binlog_become_primary(fx->b, 4, fx->h->now), -ERANGE);
    assert_int_equal(bq_binlog_become_primary(fx->b, 3, fx->h->now), -ERANGE);
    assert_int_equal(bq_binlog_epoch(fx->b), 4);
    uint64_t last = bq_binlog_last_lsn(fx->b);
    harness_t *w2 = h_new_logged(0);
    w2->now = fx->h->now;
    int c2 = h_open(w2);
    h_put(w2, c2, 1, 0, 60, "still following");
    follow(fx, w2, 0, w2->log->n, last + 1, 4);
    assert_int_equal(bq_binlog_last_lsn(fx->b), last + w2->log->n);
    h_close(w2, c2);
    h_done(w2);
    h_done(w);
}

/* The files of dir whose name contains part. */
static size_t count_named(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strstr(de->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* An old primary's tail that the new primary never had: cut after the fork
 * point, a whole segment renamed aside and the tail of the one holding the
 * fork point copied aside; the engine is what the records up to the fork
 * point give, a replay agrees, and the new primary's stream goes on. */
static void cut_moves_the_forked_tail_aside(void **state)
{
    fixture_t *fx = *state;
    harness_t *w = every_kind();
    fx->h->now = w->now;
    size_t n = w->log->n, k = n / 2;
    follow(fx, w, 0, k, 1, 1);
    follow(fx, w, k, n, k + 1, 1);
    uint64_t fork = k - 3;
    bq_binlog_cut_t cut;
    assert_int_equal(bq_binlog_cut_after(fx->b, fork, fx->h->now, &cut), 0);
    assert_int_equal(cut.records, n - fork);
    assert_int_equal(cut.segments, 1);
    assert_true(cut.bytes > 0);
    assert_int_equal(bq_binlog_last_lsn(fx->b), fork);
    assert_int_equal(count_named(fx->dir, ".forked-"), 2);
    h_check(fx->h);
    counts_match(fx);
    harness_t *want = h_new(0);
    want->now = fx->h->now;
    for (size_t i = 0; i < fork; i++)
        assert_int_equal(
            bq_engine_apply(want->e, w->log->recs[i].data, w->log->recs[i].len, 1, want->now), 0);
    same(fx->h, want, H_DUMP_DURABLE);
    bq_replay_result_t res;
    harness_t *r = replayed(fx, &res);
    assert_int_equal(res.last_lsn, fork);
    same(fx->h, r, 0);
    h_done(r);
    /* The new primary (epoch 2) streams from the fork point on. */
    harness_t *w2 = h_new_logged(0);
    w2->now = fx->h->now;
    int c2 = h_open(w2);
    h_put(w2, c2, 1, 0, 60, "from the new primary");
    follow(fx, w2, 0, w2->log->n, fork + 1, 2);
    r = replayed(fx, &res);
    assert_int_equal(res.last_lsn, fork + w2->log->n);
    assert_int_equal(res.last_epoch, 2);
    same(fx->h, r, 0);
    h_done(r);
    h_close(w2, c2);
    h_done(w2);
    h_done(want);
    h_done(w);
}

/* A stream whose jobs are all deleted: puts and deletes of 40 jobs. */
static harness_t *all_deleted(void)
{
    harness_t *h = h_new_logged(0);
    int c = h_open(h);
    uint64_t ids[40];
    for (size_t i = 0; i < 40; i++)
        ids[i] = h_put(h, c, 1, 0, 60, "a body long enough to fill a few segments of 4 KiB");
    for (size_t i = 0; i < 40; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "delete %llu\r\n", (unsigned long long)ids[i]);
        h_cmd(h, c, cmd, "DELETED\r\n");
    }
    h_close(h, c);
    return h;
}

/* A new primary whose jobs are all gone would compact every earlier
 * segment at once; with a floor (bq_binlog_keep_from, what retain.c sets
 * until the standbys rejoin) it keeps them, and compacts them once the
 * floor is lifted. */
static void keep_from_holds_compaction(void **state)
{
    fixture_t *fx = *state;
    harness_t *w = all_deleted();
    fx->h->now = w->now;
    size_t third = w->log->n / 3;
    follow(fx, w, 0, third, 1, 1);
    follow(fx, w, third, 2 * third, third + 1, 1);
    follow(fx, w, 2 * third, w->log->n, 2 * third + 1, 1);
    size_t before = bq_binlog_nsegs(fx->b);
    assert_true(before >= 3);
    bq_binlog_seg_info_t oldest;
    bq_binlog_seg(fx->b, 0, &oldest);
    bq_binlog_keep_from(fx->b, oldest.first_lsn);
    assert_int_equal(bq_binlog_become_primary(fx->b, 2, fx->h->now), 0);
    for (int i = 0; i < 20; i++)
        settle(fx);
    assert_int_equal(bq_binlog_nsegs(fx->b), before + 1); /* every one kept, and the new one */
    bq_binlog_keep_from(fx->b, 0);
    for (int i = 0; i < 20 && bq_binlog_nsegs(fx->b) > 1; i++)
        settle(fx);
    assert_int_equal(bq_binlog_nsegs(fx->b), 1); /* no live job: only the new epoch's */
    h_done(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(promotion_equals_a_fresh_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(primary_then_follower_again, setup, teardown),
        cmocka_unit_test_setup_teardown(promotion_to_a_reached_epoch_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(cut_moves_the_forked_tail_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(keep_from_holds_compaction, setup, teardown),
    };
    return cmocka_run_group_tests_name("node_role", tests, NULL, NULL);
}
