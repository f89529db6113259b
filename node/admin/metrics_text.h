/* A Prometheus text exposition (format 0.0.4) being written: families with
 * their HELP and TYPE lines, samples with escaped label values, numbers in
 * the format's float syntax. Allocation failures are remembered and
 * reported once at the end, so callers write without checking each line. */
#ifndef BQ_NODE_METRICS_TEXT_H
#define BQ_NODE_METRICS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bq_prom {
    char *buf;
    size_t len, cap;
    bool failed;
    char family[96]; /* the family being written: its samples' name prefix */
} bq_prom_t;

/* Starts family name of type ("counter", "gauge" or "histogram") with its
 * help text (one line, no backslash or newline: ours are constants). */
void bq_prom_family(bq_prom_t *p, const char *name, const char *type, const char *help);

/* One sample of the current family: name suffix (NULL or "_bucket",
 * "_sum", "_count"), labels as nlabels name/value pairs in labels[] (values
 * escaped here), and the value. */
void bq_prom_sample(bq_prom_t *p, const char *suffix, const char *const *labels, size_t nlabels,
                    double value);

/* A sample without labels. */
void bq_prom_value(bq_prom_t *p, double value);

/* A sample with one label. */
void bq_prom_labeled(bq_prom_t *p, const char *label, const char *value, double v);

/* Ends the text: returns it (new, NUL-terminated; free with free), or NULL
 * when an allocation failed (everything is freed then). */
char *bq_prom_finish(bq_prom_t *p);

#endif
