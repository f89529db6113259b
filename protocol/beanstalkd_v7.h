/* Reader of beanstalkd binlog files, format version 7 (beanstalkd 1.10 to
 * 1.13), as beanstalkd writes them on x86_64 (little-endian, LP64). Used to
 * import a beanstalkd binlog directory; docs/import-from-beanstalkd.md has
 * the user's side and ../shared/reference section 2 the format.
 *
 * A file is an int32 version (7) followed by records:
 *
 *   full record:  int32 namelen (1..200) | tube name | Jobrec (80) | body
 *   short record: int32 0                |             Jobrec (80)
 *
 * The Jobrec holds the job's id, priority, delay, ttr, body size (with its
 * CRLF), creation time, deadline, five counters and state. A record with id
 * 0 starts the zero tail of a preallocated file: the rest of the file is
 * ignored. Every record is a snapshot of its job: later records win, state
 * Invalid (0) deletes the job, a short record about an unknown job is
 * ignored (its full record was in a file beanstalkd already removed).
 *
 * The bytes are untrusted: every field is checked, fields are decoded byte
 * by byte, and memory grows with the bytes actually read, never with a
 * length field. The first damage (a bad field, a body without its CRLF, a
 * file that ends inside a record) stops the reader with an error naming the
 * file and the offset of the damaged record; the jobs of every record
 * before it are kept, so a caller can choose to accept that valid prefix.
 *
 * Pure: the caller reads the files and feeds their bytes, in any chunks. */
#ifndef BQ_BEANSTALKD_V7_H
#define BQ_BEANSTALKD_V7_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/binlog.pb-c.h"

#define BQ_V7_VERSION 7
#define BQ_V7_JOBREC_SIZE 80
/* Longest tube name (beanstalkd's MAX_TUBE_NAME_LEN - 1). */
#define BQ_V7_NAME_MAX 200

/* Errors. */
#define BQ_V7_ECORRUPT (-1) /* damaged or truncated input; see bq_v7_error() */
#define BQ_V7_ENOMEM (-2)

/* Job states as beanstalkd logs them (5, Copy, is never written). */
enum {
    BQ_V7_INVALID = 0, /* deleted */
    BQ_V7_READY = 1,
    BQ_V7_RESERVED = 2,
    BQ_V7_BURIED = 3,
    BQ_V7_DELAYED = 4,
};

/* A live job as its latest records describe it. */
typedef struct bq_v7_job {
    uint64_t id;
    uint64_t bury_seq; /* buried: number of the record that last buried it */
    int64_t delay_ns;
    int64_t ttr_ns;
    int64_t created_at;  /* ns since the epoch */
    int64_t deadline_at; /* delayed: when it becomes ready (ns since the epoch) */
    uint32_t pri;
    uint32_t reserves, timeouts, releases, buries, kicks;
    uint32_t body_size; /* with its trailing CRLF */
    uint8_t state;      /* BQ_V7_READY .. BQ_V7_DELAYED, as logged */
    uint8_t *body;      /* body_size bytes, ending in CRLF */
    char tube[];        /* NUL-terminated, valid tube name */
} bq_v7_job_t;

/* Where and why reading stopped. */
typedef struct bq_v7_error {
    size_t file;     /* the index given to bq_v7_begin_file() */
    uint64_t offset; /* of the damaged record (0 for the file header) */
    char msg[160];   /* e.g. "namelen 999 exceeds 200" */
} bq_v7_error_t;

typedef struct bq_v7_reader bq_v7_reader_t;

/* Returns a new reader with no jobs; free with bq_v7_reader_free(). NULL
 * when out of memory. */
bq_v7_reader_t *bq_v7_reader_new(void);

/* Frees the reader and every job it holds. */
void bq_v7_reader_free(bq_v7_reader_t *r);

/* Starts a file, numbered `file` in errors. Files must come in beanstalkd's
 * order (binlog.N by increasing N); the previous file must have ended. */
void bq_v7_begin_file(bq_v7_reader_t *r, size_t file);

/* Reads the next len bytes of the current file (borrows data). 0, or a
 * BQ_V7_E* code; after an error the reader takes no more input and keeps
 * the jobs of every record before the damage. */
int bq_v7_feed(bq_v7_reader_t *r, const uint8_t *data, size_t len);

/* True once the current file reached its zero tail: its remaining bytes
 * would be ignored, so the caller may stop reading it. */
bool bq_v7_file_done(const bq_v7_reader_t *r);

/* The current file ends here. 0, or BQ_V7_ECORRUPT when it ends inside a
 * record. An empty or all-zero file holds no records; zeros at the end too
 * few for a whole record are a zero tail. */
int bq_v7_end_file(bq_v7_reader_t *r);

/* The error that stopped the reader, or NULL. Borrowed from r. */
const bq_v7_error_t *bq_v7_error(const bq_v7_reader_t *r);

/* Number of live jobs. */
size_t bq_v7_count(const bq_v7_reader_t *r);

/* Number of records read (zero tails not counted). */
uint64_t bq_v7_records(const bq_v7_reader_t *r);

/* Largest job id in any record read, live or not (0 if none): beanstalkd
 * handed out every id up to it. */
uint64_t bq_v7_max_id(const bq_v7_reader_t *r);

/* The live job with this id, or NULL. Borrowed from r. */
const bq_v7_job_t *bq_v7_find(const bq_v7_reader_t *r, uint64_t id);

/* Returns a new array of the bq_v7_count() live jobs in id order (the jobs
 * are borrowed from r); free the array with free(). NULL when out of
 * memory. */
const bq_v7_job_t **bq_v7_jobs(const bq_v7_reader_t *r);

/* Fills *full and *st (caller's, initialised with their _INIT macros) with
 * job j as one of our records: ttr and delay in seconds (ttr at least 1),
 * the body without its CRLF, Reserved as ready. full borrows from j and
 * points at st. */
void bq_v7_job_to_record(const bq_v7_job_t *j, Bq__Log__JobFull *full, Bq__Log__JobStatus *st);

#endif
