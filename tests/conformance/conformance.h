/* The differential conformance runner: case scripts (script.c), playing a
 * script against one server (play.c), the known differences between the
 * reference and us (deviations.c), and normalising and comparing the two
 * transcripts (compare.c). README.md describes the script language. */
#ifndef BQ_CONFORMANCE_H
#define BQ_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>

#define BQC_MAX_CONNS 16
#define BQC_MAX_SERVER_ARGS 16
#define BQC_DEFAULT_MS 5000

/* One entry of the list of accepted differences (deviations.c). */
typedef struct bqc_deviation {
    const char *id;      /* the name a case file uses after expect-ours */
    const char *section; /* where the reference report describes it */
    const char *what;    /* one line for humans */
} bqc_deviation_t;

/* The accepted differences; terminated by an entry with id NULL. */
extern const bqc_deviation_t bqc_deviations[];

/* Looks a deviation up by id; NULL when unknown. */
const bqc_deviation_t *bqc_deviation_find(const char *id);

/* True when `key` in a YAML body of the given kind ("stats", "stats-tube",
 * "stats-job") is a string value that 1.13 quotes and 1.12 does not. */
bool bqc_quoted_key(const char *kind, const char *key);

typedef enum bqc_op {
    BQC_CONN,     /* open a connection, then sync */
    BQC_SYNC,     /* uncounted round trip: kick-job 0 -> NOT_FOUND */
    BQC_SEND,     /* write bytes */
    BQC_RECV,     /* read `count` framed replies */
    BQC_SILENT,   /* nothing may arrive within ms */
    BQC_EOF,      /* the server must close within ms */
    BQC_SHUTDOWN, /* half-close: shutdown(SHUT_WR) */
    BQC_CLOSE,    /* close the socket */
    BQC_SIGNAL,   /* send a signal to the server process */
    BQC_RESTART,  /* close every connection, stop the server (sig), start it again */
} bqc_op_t;

typedef struct bqc_step {
    bqc_op_t op;
    int line;   /* line number in the case file */
    char *text; /* the source line without its comment, for messages */
    int conn;   /* index into bqc_case_t.conn_names */
    char *data; /* send payload, or the expect-ours literal */
    size_t len;
    int count;       /* recv: number of replies */
    int ms;          /* recv/eof deadline, silent duration */
    int sig;         /* signal number (signal; restart: how the server is stopped) */
    bool timeout_ok; /* recv may time out on both sides alike */
    const bqc_deviation_t *deviation; /* expect-ours reason; NULL if none */
} bqc_step_t;

typedef struct bqc_case {
    char name[128];                             /* file name without .bq */
    char *server_args[BQC_MAX_SERVER_ARGS + 1]; /* NULL-terminated */
    char *conn_names[BQC_MAX_CONNS];
    int nconns;
    bqc_step_t *steps;
    int nsteps;
} bqc_case_t;

/* Parses the case file at path into c. Returns 0, or -1 with a message
 * "file:line: ..." in err (size errlen). Free with bqc_case_free(). */
int bqc_case_load(bqc_case_t *c, const char *path, char *err, size_t errlen);

/* Frees what bqc_case_load allocated. */
void bqc_case_free(bqc_case_t *c);

typedef enum bqc_status {
    BQC_OK,      /* recv: all replies; eof: closed; silent: nothing came */
    BQC_TIMEOUT, /* the deadline passed first */
    BQC_CLOSED,  /* the server closed the connection first */
    BQC_FRAMING, /* a reply's body was not followed by CRLF, or a line was too long */
    BQC_DATA,    /* silent/eof: bytes arrived */
} bqc_status_t;

/* What one observing step (recv, silent, eof) saw on one server. */
typedef struct bqc_event {
    const bqc_step_t *step;
    bqc_status_t status;
    char **replies; /* complete replies, raw bytes */
    size_t *lens;
    int nreplies;
    char *tail; /* bytes after the last complete reply (or the unexpected data) */
    size_t tail_len;
} bqc_event_t;

typedef struct bqc_transcript {
    bqc_event_t *events;
    int nevents;
    char error[512]; /* non-empty when the play stopped early (start, connect, sync) */
    double seconds;  /* wall time of the play */
} bqc_transcript_t;

/* Starts `binary` fresh for the case, plays every step and records what the
 * observing steps saw into t. Thread-safe. */
void bqc_play(const bqc_case_t *c, const char *binary, bqc_transcript_t *t);

/* Frees the events of t. */
void bqc_transcript_free(bqc_transcript_t *t);

/* How compare treats the two sides. */
typedef struct bqc_mode {
    bool selftest; /* both sides are the reference: no deviations, no quoting rule */
} bqc_mode_t;

/* Compares the reference's transcript with ours. Returns NULL when they agree
 * after normalisation; otherwise a new message (free()) naming the first
 * mismatching step, with a unified diff of the normalised replies. */
char *bqc_compare(const bqc_case_t *c, const bqc_transcript_t *ref, const bqc_transcript_t *ours,
                  const bqc_mode_t *mode);

/* Returns a new escaped copy of data: \r \n \t \\ and \xNN for other bytes
 * outside printable ASCII. Free with free(). */
char *bqc_escape(const char *data, size_t len);

#endif
