/* A strict checker and reader of the Prometheus text exposition format
 * (0.0.4) for tests: every line is validated, and stricter than the format
 * on what this project promises (every family has HELP and TYPE before
 * its samples, counters end in _total and are never negative). Checked:
 * metric and label name syntax, label value escaping (only \\ \" \n),
 * float values ("+Inf", "-Inf", "NaN" included), an optional integer
 * timestamp, one TYPE and HELP per family, the family's samples in one
 * group, sample names matching the family's type, no duplicate series, and
 * per histogram series: buckets with increasing "le", cumulative counts
 * that never decrease, a last bucket le="+Inf" equal to _count, and _sum.
 *
 * Series are looked up by their canonical key: the metric name, then the
 * labels sorted by name as name="value" (value escaped as in the format),
 * comma-separated in braces; no braces without labels. */
#ifndef BQ_TEST_PROM_PARSE_H
#define BQ_TEST_PROM_PARSE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct bqp_sample {
    char *key; /* canonical, owned */
    double value;
} bqp_sample_t;

typedef struct bqp_text {
    bqp_sample_t *samples;
    size_t n, cap;
    size_t families;
} bqp_text_t;

/* Checks and reads text (NUL-terminated). 0 and *out filled (free it with
 * bqp_free), or -1 with "line N: why" in err (*out is then freed). */
int bqp_parse(const char *text, bqp_text_t *out, char *err, size_t errlen);

/* The value of the series with canonical key, or false when absent. */
bool bqp_get(const bqp_text_t *t, const char *key, double *value);

/* Frees what bqp_parse allocated. */
void bqp_free(bqp_text_t *t);

#endif
