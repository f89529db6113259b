/* Writes the Prometheus text format (version 0.0.4): every family gets its
 * "# HELP" and "# TYPE" lines before its samples; label values escape
 * backslash, double quote and newline as the format requires; values are
 * integers when they are whole (counters stay readable), otherwise with
 * the fewest of 15 or 17 significant digits that reads back exactly, or
 * "+Inf", "-Inf", "NaN". */
#include "node/admin/metrics_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes (plus a NUL). */
static bool reserve(bq_prom_t *p, size_t n)
{
    if (p->failed)
        return false;
    if (p->len + n + 1 <= p->cap)
        return true;
    size_t cap = p->cap ? p->cap : 4096;
    while (cap < p->len + n + 1)
        cap *= 2;
    char *b = realloc(p->buf, cap);
    if (!b) {
        p->failed = true;
        return false;
    }
    p->buf = b;
    p->cap = cap;
    return true;
}

static void add(bq_prom_t *p, const char *s, size_t n)
{
    if (!reserve(p, n))
        return;
    memcpy(p->buf + p->len, s, n);
    p->len += n;
    p->buf[p->len] = '\0';
}

static void adds(bq_prom_t *p, const char *s)
{
    add(p, s, strlen(s));
}

/* A label value with \ " and newline escaped. */
static void add_escaped(bq_prom_t *p, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            add(p, "\\\\", 2);
        else if (*v == '"')
            add(p, "\\\"", 2);
        else if (*v == '\n')
            add(p, "\\n", 2);
        else
            add(p, v, 1);
    }
}

static void add_number(bq_prom_t *p, double v)
{
    char num[40];
    if (isnan(v))
        snprintf(num, sizeof num, "NaN");
    else if (isinf(v))
        snprintf(num, sizeof num, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        snprintf(num, sizeof num, "%.0f", v);
    else if (snprintf(num, sizeof num, "%.15g", v) > 0 && strtod(num, NULL) != v)
        snprintf(num, sizeof num, "%.17g", v); /* 15 digits did not round-trip */
    adds(p, num);
}

void bq_prom_family(bq_prom_t *p, const char *name, const char *type, const char *help)
{
    snprintf(p->family, sizeof p->family, "%s", name);
    adds(p, "# HELP ");
    adds(p, name);
    adds(p, " ");
    adds(p, help);
    adds(p, "\n# TYPE ");
    adds(p, name);
    adds(p, " ");
    adds(p, type);
    adds(p, "\n");
}

void bq_prom_sample(bq_prom_t *p, const char *suffix, const char *const *labels, size_t nlabels,
                    double value)
{
    adds(p, p->family);
    if (suffix)
        adds(p, suffix);
    for (size_t i = 0; i < nlabels; i++) {
        adds(p, i == 0 ? "{" : ",");
        adds(p, labels[2 * i]);
        adds(p, "=\"");
        add_escaped(p, labels[2 * i + 1]);
        adds(p, "\"");
    }
    adds(p, nlabels ? "} " : " ");
    add_number(p, value);
    adds(p, "\n");
}

void bq_prom_value(bq_prom_t *p, double value)
{
    bq_prom_sample(p, NULL, NULL, 0, value);
}

void bq_prom_labeled(bq_prom_t *p, const char *label, const char *value, double v)
{
    const char *l[2] = {label, value};
    bq_prom_sample(p, NULL, l, 1, v);
}

char *bq_prom_finish(bq_prom_t *p)
{
    if (!p->failed && reserve(p, 0)) {
        p->buf[p->len] = '\0';
        return p->buf;
    }
    free(p->buf);
    p->buf = NULL;
    return NULL;
}
