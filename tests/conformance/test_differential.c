/* The differential conformance test: every case file in cases/ is played
 * against a fresh reference beanstalkd and a fresh instance of our server,
 * and the transcripts are compared after normalisation (compare.c).
 *
 * All plays run up front on a pool of threads (both sides of a case run at
 * the same time, and many cases in parallel, since most of their time is
 * spent waiting on server timers); then each case becomes one cmocka test
 * that reports its comparison. Environment:
 *   BQ_SERVER, BQ_REFERENCE   the two binaries (see tests/support/bqtest.h)
 *   BQ_DIFF_SELFTEST=1        both sides are expected to be the same program:
 *                             no expect-ours literals, no quoting rule
 *   BQ_ALLOW_NO_REFERENCE=1   skip instead of failing without the reference
 *   BQ_DIFF_FILTER=substr     only the cases whose name contains substr
 *   BQ_DIFF_JOBS=n            parallel plays (default 16)
 *   BQ_DIFF_CASES_DIR=dir     another case directory
 *   BQ_DIFF_DUMP=1            print the reference's transcript of every case */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/conformance/conformance.h"
#include "tests/support/bqtest.h"

#ifndef BQ_CONFORMANCE_CASES
#error "BQ_CONFORMANCE_CASES must name the case directory"
#endif

#define MAX_CASES 512

typedef struct entry {
    char path[512];
    bqc_case_t c;
    char load_error[512];
    bqc_transcript_t ref, ours;
    char *report; /* NULL when the transcripts agree */
} entry_t;

static entry_t *entries;
static int nentries;
static bqc_mode_t mode;
static const char *ref_bin, *our_bin;
static bool no_reference;

/* The pool: tasks 2k and 2k+1 are the two sides of case k. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int next_task;

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&pool_lock);
        int task = next_task++;
        pthread_mutex_unlock(&pool_lock);
        if (task >= 2 * nentries)
            return NULL;
        entry_t *e = &entries[task / 2];
        if (e->load_error[0])
            continue;
        if (task % 2 == 0)
            bqc_play(&e->c, ref_bin, &e->ref);
        else
            bqc_play(&e->c, our_bin, &e->ours);
    }
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const entry_t *)a)->path, ((const entry_t *)b)->path);
}

static int find_cases(const char *dir, const char *filter)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    if (!d) {
        fprintf(stderr, "test_differential: cannot open the case directory %s\n", dir);
        return -1;
    }
    entries = calloc(MAX_CASES, sizeof *entries);
    while (entries && (de = readdir(d)) && nentries < MAX_CASES) {
        size_t n = strlen(de->d_name);
        if (n < 4 || strcmp(de->d_name + n - 3, ".bq") != 0)
            continue;
        if (filter && !strstr(de->d_name, filter))
            continue;
        snprintf(entries[nentries++].path, sizeof entries->path, "%s/%s", dir, de->d_name);
    }
    closedir(d);
    if (!entries)
        return -1;
    qsort(entries, (size_t)nentries, sizeof *entries, by_path);
    for (int i = 0; i < nentries; i++)
        bqc_case_load(&entries[i].c, entries[i].path, entries[i].load_error,
                      sizeof entries[i].load_error);
    return 0;
}

static void run_all(int jobs)
{
    pthread_t tids[64];
    if (jobs > 64)
        jobs = 64;
    for (int i = 0; i < jobs; i++)
        pthread_create(&tids[i], NULL, worker, NULL);
    for (int i = 0; i < jobs; i++)
        pthread_join(tids[i], NULL);
    for (int i = 0; i < nentries; i++)
        if (!entries[i].load_error[0])
            entries[i].report =
                bqc_compare(&entries[i].c, &entries[i].ref, &entries[i].ours, &mode);
}

static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

/* Prints what the reference answered to every observing step. */
static void dump(const entry_t *e)
{
    fprintf(stderr, "=== %s (%.1f s / %.1f s)\n", e->c.name, e->ref.seconds, e->ours.seconds);
    for (int i = 0; i < e->ref.nevents; i++) {
        const bqc_event_t *ev = &e->ref.events[i];
        fprintf(stderr, "%4d %s\n", ev->step->line, ev->step->text);
        for (int j = 0; j < ev->nreplies; j++) {
            char *s = bqc_escape(ev->replies[j], ev->lens[j]);
            fprintf(stderr, "       %s\n", s);
            free(s);
        }
        if (ev->status != BQC_OK || ev->tail_len) {
            char *s = bqc_escape(ev->tail ? ev->tail : "", ev->tail_len);
            fprintf(stderr, "       <status %d> \"%s\"\n", (int)ev->status, s);
            free(s);
        }
    }
}

static void check_case(void **state)
{
    entry_t *e = *state;
    if (no_reference)
        skip();
    if (e->load_error[0])
        fail_msg("case file error: %s", e->load_error);
    if (env_on("BQ_DIFF_DUMP"))
        dump(e);
    if (e->report) {
        fputs(e->report, stderr);
        fail_msg("%s: the reference and ours differ (see above)", e->c.name);
    }
}

static void reference_missing(void **state)
{
    (void)state;
    fail_msg("the reference beanstalkd (%s) is not installed; install Debian's beanstalkd "
             "package or set BQ_ALLOW_NO_REFERENCE=1 to skip this test",
             ref_bin);
}

int main(void)
{
    const char *dir = getenv("BQ_DIFF_CASES_DIR");
    const char *jobs = getenv("BQ_DIFF_JOBS");
    long long t0 = bqt_now_ms();

    ref_bin = bqt_reference_binary();
    our_bin = bqt_our_binary();
    mode.selftest = env_on("BQ_DIFF_SELFTEST");
    if (!bqt_reference_available()) {
        if (!env_on("BQ_ALLOW_NO_REFERENCE")) {
            const struct CMUnitTest missing[] = {cmocka_unit_test(reference_missing)};
            return cmocka_run_group_tests(missing, NULL, NULL);
        }
        no_reference = true;
    }
    if (find_cases(dir && *dir ? dir : BQ_CONFORMANCE_CASES, getenv("BQ_DIFF_FILTER")) != 0)
        return 1;
    if (!no_reference)
        run_all(jobs ? atoi(jobs) : 16);
    fprintf(stderr, "differential: %d cases, %s vs %s%s, plays took %.1f s\n", nentries, ref_bin,
            our_bin, mode.selftest ? " (self-test)" : "", (double)(bqt_now_ms() - t0) / 1000.0);

    struct CMUnitTest *tests = calloc((size_t)nentries + 1, sizeof *tests);
    if (!tests)
        return 1;
    for (int i = 0; i < nentries; i++) {
        tests[i].name = entries[i].c.name[0] ? entries[i].c.name : entries[i].path;
        tests[i].test_func = check_case;
        tests[i].initial_state = &entries[i];
    }
    int failed = _cmocka_run_group_tests("differential", tests, (size_t)nentries, NULL, NULL);
    for (int i = 0; i < nentries; i++) {
        bqc_transcript_free(&entries[i].ref);
        bqc_transcript_free(&entries[i].ours);
        bqc_case_free(&entries[i].c);
        free(entries[i].report);
    }
    free(tests);
    free(entries);
    return failed;
}
