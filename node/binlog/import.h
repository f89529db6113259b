/* --import-beanstalkd: brings the jobs of a beanstalkd binlog directory
 * (format version 7, binlog.N files) into our binlog. The source is read
 * and checked in full before the destination is touched, and never
 * written. docs/import-from-beanstalkd.md is the user's guide. */
#ifndef BQ_NODE_IMPORT_H
#define BQ_NODE_IMPORT_H

#include <stdbool.h>

#include "node/binlog/binlog.h"
#include "protocol/beanstalkd_v7.h"
#include "protocol/engine.h"

/* Errors of the import (each is logged where it happens). */
enum {
    BQ_IMPORT_ESRC = -1,      /* the source cannot be read, is in use, or is damaged */
    BQ_IMPORT_EDST = -2,      /* the destination binlog cannot be opened or replayed */
    BQ_IMPORT_ECONFLICT = -3, /* a job id exists in both */
    BQ_IMPORT_EWRITE = -4,    /* the destination binlog refused or failed a write */
    BQ_IMPORT_ENOMEM = -5,
};

typedef struct bq_import_options {
    /* Take the jobs of the records before the first damage instead of
     * refusing a damaged source (files after the damaged one are not read). */
    bool accept_prefix;
    /* Optional: called every few hundred jobs while applying, so that the
     * log can write out what it has gathered. */
    void (*flush)(void *arg, bq_now_t now);
    void *flush_arg;
} bq_import_options_t;

/* Reads every binlog.N file of src_dir in increasing N into a new reader
 * (*out; free with bq_v7_reader_free); refuses a directory whose lock a
 * running beanstalkd holds. 0 or a BQ_IMPORT_E* code. */
int bq_import_read(const char *src_dir, const bq_import_options_t *opt, bq_v7_reader_t **out);

/* Creates every job of r in e (borrowed, its log hooks set) at now and logs
 * each in full through those hooks, then logs that ids up to r's largest
 * stay used. Refuses, changing nothing, when a job id of r exists in e.
 * 0 or a BQ_IMPORT_E* code. */
int bq_import_apply(const bq_v7_reader_t *r, bq_engine_t *e, bq_now_t now,
                    const bq_import_options_t *opt);

/* The whole command: reads src_dir, opens the binlog of cfg->dir (replaying
 * what it holds), applies and logs the jobs, and returns once they are
 * written and fsynced (whatever cfg->sync says). 0 or a BQ_IMPORT_E* code. */
int bq_import_beanstalkd(const char *src_dir, const bq_binlog_config_t *cfg,
                         const bq_import_options_t *opt);

#endif
