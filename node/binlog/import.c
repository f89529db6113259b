/* The beanstalkd binlog import. Three steps, in an order chosen so that a
 * bad source changes nothing:
 *
 *   1. read: every binlog.N of the source, in increasing N, through the
 *      pure v7 reader (protocol/beanstalkd_v7.h), which keeps the jobs alive
 *      at the end of the log; any damage stops here, before the
 *      destination is opened (unless the valid prefix is accepted);
 *   2. open the destination binlog as the server does (lock, replay, new
 *      segment) with an engine whose log hooks write to it;
 *   3. apply: each job becomes a full record, applied with
 *      bq_engine_apply() (the path of replay and standbys) and then logged
 *      with bq_engine_relog_job(), so that it reaches the binlog through
 *      the normal log hooks; an id reservation keeps every id beanstalkd
 *      handed out from being reused. The command returns once all of it is
 *      written and fsynced. */
#include "node/binlog/import.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node/base/clock.h"
#include "node/base/log.h"
#include "proto/binlog.pb-c.h"

#define READ_CHUNK ((size_t)64 * 1024)
/* The log writes out its batch after this many jobs or bytes. */
#define FLUSH_JOBS 256
#define FLUSH_BYTES ((size_t)1 << 20)

/* ---- reading the source ---- */

/* The N of a name "binlog.N" (digits only, as beanstalkd accepts), or 0. */
static uint64_t binlog_number(const char *name)
{
    if (strncmp(name, "binlog.", 7) != 0 || name[7] == '\0')
        return 0;
    uint64_t n = 0;
    for (const char *p = name + 7; *p; p++) {
        if (*p < '0' || *p > '9' || n > (UINT64_MAX - 9) / 10)
            return 0;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    return n;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Lists the binlog numbers of dir, sorted, into a new array (*nums, *n). */
static int list_binlogs(const char *dir, uint64_t **nums, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        bq_log(BQ_LOG_ERROR, "cannot open the beanstalkd binlog directory", "dir=\"%s\" err=\"%s\"",
               dir, strerror(errno));
        return BQ_IMPORT_ESRC;
    }
    size_t cap = 0;
    *nums = NULL;
    *n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t num = binlog_number(de->d_name);
        if (num == 0)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *p = realloc(*nums, cap * sizeof *p);
            if (!p) {
                closedir(d);
                return BQ_IMPORT_ENOMEM;
            }
            *nums = p;
        }
        (*nums)[(*n)++] = num;
    }
    closedir(d);
    if (*n > 1)
        qsort(*nums, *n, sizeof **nums, cmp_u64);
    return 0;
}

/* read_file()'s result for damage the reader found. */
#define DAMAGED 1

/* Feeds one file to r: 0, DAMAGED, or a BQ_IMPORT_E* code (logged). */
static int read_file(bq_v7_reader_t *r, const char *path, uint8_t *buf)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        bq_log(BQ_LOG_ERROR, "cannot open a beanstalkd binlog file", "file=\"%s\" err=\"%s\"", path,
               strerror(errno));
        return BQ_IMPORT_ESRC;
    }
    int rc = 0, io = 0;
    while (rc == 0 && io == 0 && !bq_v7_file_done(r)) {
        ssize_t got = read(fd, buf, READ_CHUNK);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            io = errno;
        else if (got == 0)
            break;
        else
            rc = bq_v7_feed(r, buf, (size_t)got);
    }
    close(fd);
    if (io) {
        bq_log(BQ_LOG_ERROR, "cannot read a beanstalkd binlog file", "file=\"%s\" err=\"%s\"", path,
               strerror(io));
        return BQ_IMPORT_ESRC;
    }
    if (rc == 0)
        rc = bq_v7_end_file(r);
    return rc == BQ_V7_ECORRUPT ? DAMAGED : rc == BQ_V7_ENOMEM ? BQ_IMPORT_ENOMEM : 0;
}

/* Logs the damage the reader found; 0 when the valid prefix is accepted,
 * else BQ_IMPORT_ESRC. */
static int report_damage(const bq_v7_reader_t *r, const char *dir, const uint64_t *nums,
                         bool accept_prefix)
{
    const bq_v7_error_t *e = bq_v7_error(r);
    char file[64];
    snprintf(file, sizeof file, "binlog.%" PRIu64, nums[e->file]);
    if (!accept_prefix) {
        bq_log(BQ_LOG_ERROR,
               "beanstalkd binlog is damaged; nothing imported (--import-accept-prefix "
               "imports the jobs of the records before the damage)",
               "dir=\"%s\" file=%s offset=%" PRIu64 " err=\"%s\"", dir, file, e->offset, e->msg);
        return BQ_IMPORT_ESRC;
    }
    bq_log(BQ_LOG_WARN,
           "beanstalkd binlog is damaged; importing the jobs of the records before the damage, "
           "later records and files are not read",
           "dir=\"%s\" file=%s offset=%" PRIu64 " err=\"%s\" jobs=%zu", dir, file, e->offset,
           e->msg, bq_v7_count(r));
    return 0;
}

/* Feeds the files nums[0..n) of dir to r, up to the first damage. 0 or a
 * BQ_IMPORT_E* code. */
static int read_all(bq_v7_reader_t *r, const char *dir, const uint64_t *nums, size_t n,
                    bool accept_prefix)
{
    uint8_t *buf = malloc(READ_CHUNK);
    if (!buf)
        return BQ_IMPORT_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/binlog.%" PRIu64, dir, nums[i]);
        bq_v7_begin_file(r, i);
        rc = read_file(r, path, buf);
        if (rc == DAMAGED) {
            rc = report_damage(r, dir, nums, accept_prefix);
            break;
        }
    }
    free(buf);
    return rc;
}

/* True when a process (beanstalkd) holds the lock of dir, as beanstalkd
 * does while it runs: its log would change under the import. Looks only;
 * takes no lock and creates nothing. */
static bool src_locked(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    bool held = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close(fd);
    return held;
}

int bq_import_read(const char *src_dir, const bq_import_options_t *opt, bq_v7_reader_t **out)
{
    uint64_t *nums = NULL;
    size_t n = 0;
    if (src_locked(src_dir)) {
        bq_log(BQ_LOG_ERROR, "beanstalkd is running on the directory; stop it first", "dir=\"%s\"",
               src_dir);
        return BQ_IMPORT_ESRC;
    }
    int rc = list_binlogs(src_dir, &nums, &n);
    if (rc == 0 && n == 0) {
        bq_log(BQ_LOG_ERROR, "no beanstalkd binlog files (binlog.N) in the directory", "dir=\"%s\"",
               src_dir);
        rc = BQ_IMPORT_ESRC;
    }
    bq_v7_reader_t *r = NULL;
    if (rc == 0 && !(r = bq_v7_reader_new()))
        rc = BQ_IMPORT_ENOMEM;
    if (rc == 0)
        rc = read_all(r, src_dir, nums, n, opt->accept_prefix);
    free(nums);
    if (rc == BQ_IMPORT_ENOMEM)
        bq_logm(BQ_LOG_ERROR, "out of memory reading the beanstalkd binlog");
    if (rc != 0) {
        bq_v7_reader_free(r);
        return rc;
    }
    bq_log(BQ_LOG_INFO, "beanstalkd binlog read",
           "dir=\"%s\" files=%zu records=%" PRIu64 " jobs=%zu max_id=%" PRIu64, src_dir, n,
           bq_v7_records(r), bq_v7_count(r), bq_v7_max_id(r));
    *out = r;
    return 0;
}

/* ---- applying to the engine ---- */

typedef struct files {
    uint32_t *v;
    size_t n, cap;
    bool nomem;
} files_t;

/* bq_engine_each_job_file() callback: collects the distinct segments. */
static void add_file(void *arg, uint32_t file)
{
    files_t *fs = arg;
    for (size_t i = 0; i < fs->n; i++)
        if (fs->v[i] == file)
            return;
    if (fs->n == fs->cap) {
        size_t cap = fs->cap ? fs->cap * 2 : 16;
        uint32_t *p = realloc(fs->v, cap * sizeof *p);
        if (!p) {
            fs->nomem = true;
            return;
        }
        fs->v = p;
        fs->cap = cap;
    }
    fs->v[fs->n++] = file;
}

/* Refuses when a job of e has an id that r also has: the import would
 * replace it. 0 or a BQ_IMPORT_E* code (logged). */
static int check_conflicts(const bq_v7_reader_t *r, const bq_engine_t *e)
{
    files_t fs = {0};
    bq_engine_each_job_file(e, add_file, &fs);
    int rc = fs.nomem ? BQ_IMPORT_ENOMEM : 0;
    for (size_t i = 0; i < fs.n && rc == 0; i++) {
        size_t cursor = 0;
        uint64_t ids[64];
        while (rc == 0 && cursor < bq_engine_scan_end(e)) {
            size_t n = bq_engine_file_jobs(e, fs.v[i], &cursor, ids, 64);
            for (size_t k = 0; k < n && rc == 0; k++) {
                if (!bq_v7_find(r, ids[k]))
                    continue;
                bq_log(BQ_LOG_ERROR,
                       "a job id of the beanstalkd binlog is already used in the destination; "
                       "nothing imported",
                       "id=%" PRIu64, ids[k]);
                rc = BQ_IMPORT_ECONFLICT;
            }
        }
    }
    free(fs.v);
    return rc;
}

/* Packs r into *buf (grown as needed); the packed length, or 0 when out of
 * memory. */
static size_t pack(const Bq__Log__Record *rec, uint8_t **buf, size_t *cap)
{
    size_t n = bq__log__record__get_packed_size(rec);
    if (n > *cap) {
        uint8_t *p = realloc(*buf, n);
        if (!p)
            return 0;
        *buf = p;
        *cap = n;
    }
    return bq__log__record__pack(rec, *buf);
}

/* Creates job j in e and logs it in full. */
static int apply_job(bq_engine_t *e, const bq_v7_job_t *j, bq_now_t now, uint8_t **buf, size_t *cap)
{
    Bq__Log__JobFull full = BQ__LOG__JOB_FULL__INIT;
    Bq__Log__JobStatus st = BQ__LOG__JOB_STATUS__INIT;
    Bq__Log__Record rec = BQ__LOG__RECORD__INIT;
    bq_v7_job_to_record(j, &full, &st);
    rec.kind_case = BQ__LOG__RECORD__KIND_FULL;
    rec.full = &full;
    size_t n = pack(&rec, buf, cap);
    int rc = n ? bq_engine_apply(e, *buf, n, 0, now) : BQ_ENOMEM;
    if (rc == BQ_ENOMEM)
        return BQ_IMPORT_ENOMEM;
    if (rc != 0) {
        bq_log(BQ_LOG_ERROR, "the engine refused an imported job", "id=%" PRIu64 " err=%d", j->id,
               rc);
        return BQ_IMPORT_ESRC;
    }
    if (bq_engine_relog_job(e, j->id, now) != 0) {
        bq_log(BQ_LOG_ERROR, "the binlog cannot take an imported job", "id=%" PRIu64, j->id);
        return BQ_IMPORT_EWRITE;
    }
    return 0;
}

/* Makes ids up to r's largest stay used (beanstalkd showed them), in e and
 * in the log. */
static int reserve_ids(const bq_v7_reader_t *r, bq_engine_t *e, bq_now_t now, uint8_t **buf,
                       size_t *cap)
{
    if (bq_v7_max_id(r) == 0)
        return 0;
    Bq__Log__IdReservation ids = BQ__LOG__ID_RESERVATION__INIT;
    Bq__Log__Record rec = BQ__LOG__RECORD__INIT;
    ids.next = ids.used = bq_v7_max_id(r) + 1;
    rec.kind_case = BQ__LOG__RECORD__KIND_IDS;
    rec.ids = &ids;
    size_t n = pack(&rec, buf, cap);
    if (n == 0 || bq_engine_apply(e, *buf, n, 0, now) != 0)
        return BQ_IMPORT_ENOMEM;
    bq_engine_log_checkpoint(e, now); /* logs the reservation (and any pause) */
    return 0;
}

int bq_import_apply(const bq_v7_reader_t *r, bq_engine_t *e, bq_now_t now,
                    const bq_import_options_t *opt)
{
    int rc = check_conflicts(r, e);
    const bq_v7_job_t **jobs = rc == 0 ? bq_v7_jobs(r) : NULL;
    if (rc == 0 && !jobs)
        rc = BQ_IMPORT_ENOMEM;
    uint8_t *buf = NULL;
    size_t cap = 0, pending = 0;
    for (size_t i = 0; rc == 0 && i < bq_v7_count(r); i++) {
        rc = apply_job(e, jobs[i], now, &buf, &cap);
        pending += jobs[i]->body_size;
        if (opt->flush && (i % FLUSH_JOBS == FLUSH_JOBS - 1 || pending >= FLUSH_BYTES)) {
            opt->flush(opt->flush_arg, now);
            pending = 0;
        }
    }
    if (rc == 0)
        rc = reserve_ids(r, e, now, &buf, &cap);
    if (rc == BQ_IMPORT_ENOMEM)
        bq_logm(BQ_LOG_ERROR, "out of memory importing the beanstalkd jobs");
    free(buf);
    free(jobs);
    return rc;
}

/* ---- the command ---- */

static void no_send(void *conn, const char *data, size_t len)
{
    (void)conn, (void)data, (void)len; /* no clients during an import */
}

static void no_wake(void *conn)
{
    (void)conn;
}

static void no_info(void *arg, bq_server_info_t *info)
{
    (void)arg, (void)info;
}

static void flush_log(void *arg, bq_now_t now)
{
    bq_binlog_turn(arg, now);
}

/* Writes out what the log holds and waits until it is fsynced. */
static int make_durable(bq_binlog_t *b, uv_loop_t *loop, bq_now_t now)
{
    bq_binlog_turn(b, now);
    bool waiting = true;
    while (bq_binlog_release_lsn(b) < bq_binlog_last_lsn(b)) {
        /* A failing log refuses every record (and would retry for ever);
         * a loop with nothing left to run will not make it durable. */
        if (!waiting || bq_binlog_failing(b)) {
            bq_logm(BQ_LOG_ERROR, "the imported jobs could not be written to the binlog");
            return BQ_IMPORT_EWRITE;
        }
        waiting = uv_run(loop, UV_RUN_ONCE) != 0;
    }
    return 0;
}

/* Opens cfg's binlog on loop with a new engine logging to it, replays it
 * and applies r; then makes it durable. */
static int import_into(const bq_v7_reader_t *r, const bq_binlog_config_t *cfg,
                       const bq_import_options_t *opt, uv_loop_t *loop)
{
    bq_binlog_t *b = NULL;
    if (bq_binlog_open(&b, loop, cfg) != 0)
        return BQ_IMPORT_EDST;
    bq_engine_config_t ecfg = {.max_job_size = BQ_MAX_JOB_SIZE_LIMIT};
    bq_engine_hooks_t hooks = {.send = no_send,
                               .wake = no_wake,
                               .server_info = no_info,
                               .log_room = bq_binlog_room,
                               .log = bq_binlog_log,
                               .arg = b};
    bq_engine_t *e = bq_engine_new(&ecfg, &hooks);
    bq_now_t now = bq_clock_now();
    int rc = e ? 0 : BQ_IMPORT_ENOMEM;
    if (rc == 0 && bq_binlog_start(b, e, now) != 0)
        rc = BQ_IMPORT_EDST;
    bq_import_options_t o = *opt;
    o.flush = flush_log;
    o.flush_arg = b;
    if (rc == 0)
        rc = bq_import_apply(r, e, now, &o);
    if (rc == 0)
        rc = make_durable(b, loop, now);
    bq_binlog_stop(b);
    uv_run(loop, UV_RUN_DEFAULT); /* closes the binlog's timers, ends an fsync */
    bq_binlog_free(b);
    if (e)
        bq_engine_free(e);
    return rc;
}

int bq_import_beanstalkd(const char *src_dir, const bq_binlog_config_t *cfg,
                         const bq_import_options_t *opt)
{
    bq_v7_reader_t *r = NULL;
    int rc = bq_import_read(src_dir, opt, &r);
    if (rc != 0)
        return rc;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        bq_v7_reader_free(r);
        return BQ_IMPORT_ENOMEM;
    }
    bq_binlog_config_t c = *cfg;
    c.sync = BQ_BINLOG_SYNC_ALWAYS;
    c.standalone = true; /* one process, no cluster: its stop is clean */
    rc = import_into(r, &c, opt, &loop);
    uv_loop_close(&loop);
    if (rc == 0)
        bq_log(BQ_LOG_INFO, "beanstalkd jobs imported", "from=\"%s\" to=\"%s\" jobs=%zu", src_dir,
               cfg->dir, bq_v7_count(r));
    bq_v7_reader_free(r);
    return rc;
}
