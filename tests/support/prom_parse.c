/* The checker of prom_parse.h. One pass over the lines: comments set up
 * families, samples are checked against their family and stored under
 * their canonical key; a histogram family's buckets are collected and
 * checked when the family ends (the next family starts, or the text ends).
 * Stricter than the format where this project's output is (see the
 * header): exactly one space between the series and the value. */
#include "tests/support/prom_parse.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 200
#define MAX_LABELS 16
#define VALUE_MAX 512

typedef struct fam {
    char name[NAME_MAX_LEN + 1];
    char type[16]; /* "" until TYPE */
    bool help, samples;
} fam_t;

typedef struct bucket {
    char series[1024]; /* canonical key without le, name without _bucket */
    double le, value;
} bucket_t;

typedef struct state {
    bqp_text_t *t;
    fam_t *fams;
    size_t nfams, capfams;
    fam_t *cur;        /* the family being written */
    bucket_t *buckets; /* of the current histogram family */
    size_t nbuckets, capbuckets;
    int line;
    char *err;
    size_t errlen;
} state_t;

typedef struct label {
    char name[NAME_MAX_LEN + 1];
    char value[VALUE_MAX]; /* escaped as in the text */
} label_t;

static int fail(state_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(state_t *s, const char *fmt, ...)
{
    int n = snprintf(s->err, s->errlen, "line %d: ", s->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < s->errlen)
        vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static bool name_start(char c, bool metric)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
}

static bool name_char(char c, bool metric)
{
    return name_start(c, metric) || (c >= '0' && c <= '9');
}

/* Reads a metric (metric) or label name at *p into out. 0 or -1. */
static int read_name(const char **p, char *out, bool metric)
{
    const char *q = *p;
    if (!name_start(*q, metric))
        return -1;
    while (name_char(*q, metric))
        q++;
    if ((size_t)(q - *p) > NAME_MAX_LEN)
        return -1;
    memcpy(out, *p, (size_t)(q - *p));
    out[q - *p] = '\0';
    *p = q;
    return 0;
}

/* A float as the format writes it: decimal, or +Inf, -Inf, NaN. */
static int parse_float(const char *s, size_t len, double *v)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (strcmp(buf, "+Inf") == 0 || strcmp(buf, "-Inf") == 0 || strcmp(buf, "NaN") == 0) {
        *v = buf[0] == 'N' ? NAN : buf[0] == '+' ? INFINITY : -INFINITY;
        return 0;
    }
    for (size_t i = 0; i < len; i++)
        if (!strchr("0123456789+-.eE", buf[i]))
            return -1;
    char *end;
    *v = strtod(buf, &end);
    return *end == '\0' && end != buf ? 0 : -1;
}

/* Doubles the array *p of *cap elements of size bytes (first when empty);
 * 0, or -1 when out of memory (*p unchanged). */
static int grow(void **p, size_t *cap, size_t size, size_t first)
{
    size_t n = *cap ? *cap * 2 : first;
    void *q = realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static fam_t *find_fam(state_t *s, const char *name)
{
    for (size_t i = 0; i < s->nfams; i++)
        if (strcmp(s->fams[i].name, name) == 0)
            return &s->fams[i];
    return NULL;
}

/* Checks the collected buckets of the histogram family that ends. */
static int end_histogram(state_t *s)
{
    for (size_t i = 0; i < s->nbuckets; i++) {
        bucket_t *b = &s->buckets[i];
        if (i > 0 && strcmp(b->series, s->buckets[i - 1].series) == 0) {
            if (!(b->le > s->buckets[i - 1].le))
                return fail(s, "histogram %s: le not increasing", b->series);
            if (b->value < s->buckets[i - 1].value)
                return fail(s, "histogram %s: cumulative count decreases", b->series);
        }
        bool last = i + 1 == s->nbuckets || strcmp(b->series, s->buckets[i + 1].series) != 0;
        if (!last)
            continue;
        if (!isinf(b->le) || b->le < 0)
            return fail(s, "histogram %s: last bucket is not le=\"+Inf\"", b->series);
        char key[1100];
        const char *brace = strchr(b->series, '{');
        size_t nl = brace ? (size_t)(brace - b->series) : strlen(b->series);
        double count, sum;
        snprintf(key, sizeof key, "%.*s_count%s", (int)nl, b->series, brace ? brace : "");
        if (!bqp_get(s->t, key, &count))
            return fail(s, "histogram %s: no _count", b->series);
        if (count != b->value)
            return fail(s, "histogram %s: _count is not the +Inf bucket", b->series);
        snprintf(key, sizeof key, "%.*s_sum%s", (int)nl, b->series, brace ? brace : "");
        if (!bqp_get(s->t, key, &sum))
            return fail(s, "histogram %s: no _sum", b->series);
    }
    s->nbuckets = 0;
    return 0;
}

/* The current family ends (another begins, or the text ends). */
static int end_family(state_t *s)
{
    if (s->cur && strcmp(s->cur->type, "histogram") == 0 && end_histogram(s) != 0)
        return -1;
    s->cur = NULL;
    return 0;
}

/* Makes name the current family (new, or the current one). */
static int enter_family(state_t *s, const char *name, fam_t **out)
{
    fam_t *f = find_fam(s, name);
    if (f && f != s->cur)
        return fail(s, "family %s is not in one group", name);
    if (!f) {
        if (end_family(s) != 0)
            return -1;
        if (s->nfams == s->capfams &&
            grow((void **)&s->fams, &s->capfams, sizeof *s->fams, 64) != 0)
            return fail(s, "out of memory");
        f = &s->fams[s->nfams++];
        memset(f, 0, sizeof *f);
        snprintf(f->name, sizeof f->name, "%s", name);
        s->cur = f;
        s->t->families++;
    }
    *out = f;
    return 0;
}

/* "# HELP name text" or "# TYPE name type"; other comments pass. */
static int comment_line(state_t *s, const char *l)
{
    bool help = strncmp(l, "# HELP ", 7) == 0, type = strncmp(l, "# TYPE ", 7) == 0;
    if (!help && !type)
        return 0;
    const char *p = l + 7;
    char name[NAME_MAX_LEN + 1];
    fam_t *f = NULL;
    if (read_name(&p, name, true) != 0 || (*p != ' ' && !(help && *p == '\0')))
        return fail(s, "bad metric name in %s", help ? "HELP" : "TYPE");
    if (enter_family(s, name, &f) != 0)
        return -1;
    if (f->samples)
        return fail(s, "%s of %s after its samples", help ? "HELP" : "TYPE", name);
    if (help) {
        if (f->help)
            return fail(s, "second HELP for %s", name);
        f->help = true;
        for (const char *q = p; *q; q++)
            if (*q == '\\' && (q[1] != '\\' && q[1] != 'n'))
                return fail(s, "bad escape in HELP of %s", name);
            else if (*q == '\\')
                q++;
        return 0;
    }
    static const char *const types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
    if (f->type[0])
        return fail(s, "second TYPE for %s", name);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(p + 1, types[i]) == 0)
            snprintf(f->type, sizeof f->type, "%s", types[i]);
    if (!f->type[0])
        return fail(s, "unknown type \"%s\" for %s", p + 1, name);
    if (strcmp(f->type, "counter") == 0 &&
        (strlen(name) < 6 || strcmp(name + strlen(name) - 6, "_total") != 0))
        return fail(s, "counter %s does not end in _total", name);
    return 0;
}

/* Reads the label set at *p ("{...}") into l[0..*n). 0 or -1 (s->err). */
static int read_labels(state_t *s, const char **p, label_t *l, size_t *n)
{
    const char *q = *p + 1;
    *n = 0;
    while (*q != '}') {
        if (*n == MAX_LABELS)
            return fail(s, "too many labels");
        label_t *x = &l[*n];
        if (read_name(&q, x->name, false) != 0 || strncmp(x->name, "__", 2) == 0)
            return fail(s, "bad label name");
        for (size_t i = 0; i < *n; i++)
            if (strcmp(l[i].name, x->name) == 0)
                return fail(s, "label %s twice", x->name);
        if (q[0] != '=' || q[1] != '"')
            return fail(s, "label %s: want =\"", x->name);
        q += 2;
        size_t vl = 0;
        for (; *q != '"'; q++) {
            if (*q == '\0')
                return fail(s, "unterminated label value");
            if (*q == '\\' && q[1] != '\\' && q[1] != '"' && q[1] != 'n')
                return fail(s, "bad escape in label %s", x->name);
            if (vl + 2 >= VALUE_MAX)
                return fail(s, "label value too long");
            if (*q == '\\')
                x->value[vl++] = *q++;
            x->value[vl++] = *q;
        }
        x->value[vl] = '\0';
        q++;
        (*n)++;
        if (*q == ',')
            q++;
        else if (*q != '}')
            return fail(s, "want , or } after label %s", x->name);
    }
    *p = q + 1;
    return 0;
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const label_t *)a)->name, ((const label_t *)b)->name);
}

/* name{sorted labels} without the label skip (NULL: none skipped). */
static void canonical(char *out, size_t cap, const char *name, label_t *l, size_t n,
                      const char *skip)
{
    qsort(l, n, sizeof *l, cmp_label);
    size_t k = (size_t)snprintf(out, cap, "%s", name);
    bool first = true;
    for (size_t i = 0; i < n && k < cap; i++) {
        if (skip && strcmp(l[i].name, skip) == 0)
            continue;
        k += (size_t)snprintf(out + k, cap - k, "%s%s=\"%s\"", first ? "{" : ",", l[i].name,
                              l[i].value);
        first = false;
    }
    if (!first && k < cap)
        snprintf(out + k, cap - k, "}");
}

static bool ends_with(const char *s, const char *suffix, size_t *base)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (n <= k || strcmp(s + n - k, suffix) != 0)
        return false;
    *base = n - k;
    return true;
}

/* The family of sample name (NULL when none), and its suffix in *suffix. */
static fam_t *family_of(state_t *s, const char *name, const char **suffix)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    *suffix = "";
    for (size_t i = 0; i < 3; i++) {
        size_t base;
        char b[NAME_MAX_LEN + 1];
        if (!ends_with(name, suffixes[i], &base))
            continue;
        snprintf(b, sizeof b, "%.*s", (int)base, name);
        fam_t *f = find_fam(s, b);
        if (f &&
            (strcmp(f->type, "histogram") == 0 || (strcmp(f->type, "summary") == 0 && i > 0))) {
            *suffix = suffixes[i];
            return f;
        }
    }
    return find_fam(s, name);
}

static int add_sample(state_t *s, const char *key, double v)
{
    double old;
    if (bqp_get(s->t, key, &old))
        return fail(s, "duplicate series %s", key);
    bqp_text_t *t = s->t;
    if (t->n == t->cap && grow((void **)&t->samples, &t->cap, sizeof *t->samples, 256) != 0)
        return fail(s, "out of memory");
    t->samples[t->n].key = strdup(key);
    if (!t->samples[t->n].key)
        return fail(s, "out of memory");
    t->samples[t->n++].value = v;
    return 0;
}

static int add_bucket(state_t *s, const fam_t *f, label_t *l, size_t n, double v)
{
    const label_t *le = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i].name, "le") == 0)
            le = &l[i];
    double bound;
    if (!le || parse_float(le->value, strlen(le->value), &bound) != 0 || isnan(bound))
        return fail(s, "bucket of %s without a valid le", f->name);
    if (s->nbuckets == s->capbuckets &&
        grow((void **)&s->buckets, &s->capbuckets, sizeof *s->buckets, 32) != 0)
        return fail(s, "out of memory");
    bucket_t *b = &s->buckets[s->nbuckets++];
    b->le = bound;
    b->value = v;
    canonical(b->series, sizeof b->series, f->name, l, n, "le");
    return 0;
}

/* Checks the sample's name, labels and value against its family f. */
static int check_kind(state_t *s, const fam_t *f, const char *suffix, label_t *l, size_t n,
                      double v)
{
    bool has_le = false, has_q = false;
    for (size_t i = 0; i < n; i++) {
        has_le |= strcmp(l[i].name, "le") == 0;
        has_q |= strcmp(l[i].name, "quantile") == 0;
    }
    if (strcmp(f->type, "counter") == 0 && (isnan(v) || v < 0))
        return fail(s, "counter %s is negative or NaN", f->name);
    if (strcmp(f->type, "histogram") == 0) {
        if (!suffix[0])
            return fail(s, "histogram %s: sample without _bucket, _sum or _count", f->name);
        if (strcmp(suffix, "_bucket") == 0)
            return add_bucket(s, f, l, n, v);
        if (has_le)
            return fail(s, "histogram %s: le on %s", f->name, suffix);
    } else if (strcmp(f->type, "summary") == 0) {
        if (!suffix[0] && !has_q)
            return fail(s, "summary %s: sample without quantile", f->name);
    }
    return 0;
}

/* "name[{labels}] value[ timestamp]". */
static int sample_line(state_t *s, const char *l)
{
    char name[NAME_MAX_LEN + 1], key[2048];
    label_t labels[MAX_LABELS];
    size_t n = 0;
    const char *p = l, *suffix;
    if (read_name(&p, name, true) != 0)
        return fail(s, "bad metric name");
    if (*p == '{' && read_labels(s, &p, labels, &n) != 0)
        return -1;
    if (*p != ' ')
        return fail(s, "want one space before the value of %s", name);
    const char *val = ++p;
    while (*p && *p != ' ')
        p++;
    double v;
    if (parse_float(val, (size_t)(p - val), &v) != 0)
        return fail(s, "bad value \"%.*s\" of %s", (int)(p - val), val, name);
    if (*p == ' ') {
        char *end;
        strtoll(p + 1, &end, 10);
        if (end == p + 1 || *end != '\0' || !strchr("-0123456789", p[1]))
            return fail(s, "bad timestamp of %s", name);
    }
    fam_t *f = family_of(s, name, &suffix);
    if (!f || !f->help || !f->type[0])
        return fail(s, "sample %s without HELP and TYPE before it", name);
    if (f != s->cur)
        return fail(s, "family %s is not in one group", f->name);
    f->samples = true;
    if (check_kind(s, f, suffix, labels, n, v) != 0)
        return -1;
    canonical(key, sizeof key, name, labels, n, NULL);
    return add_sample(s, key, v);
}

int bqp_parse(const char *text, bqp_text_t *out, char *err, size_t errlen)
{
    state_t s = {.t = out, .err = err, .errlen = errlen};
    memset(out, 0, sizeof *out);
    int r = 0;
    const char *l = text;
    char line[8192];
    while (r == 0 && *l) {
        s.line++;
        const char *nl = strchr(l, '\n');
        if (!nl) {
            r = fail(&s, "no newline at the end");
            break;
        }
        size_t len = (size_t)(nl - l);
        if (len >= sizeof line || memchr(l, '\r', len) || memchr(l, '\0', len)) {
            r = fail(&s, "line too long or holds CR");
            break;
        }
        memcpy(line, l, len);
        line[len] = '\0';
        if (len > 0)
            r = line[0] == '#' ? comment_line(&s, line) : sample_line(&s, line);
        l = nl + 1;
    }
    if (r == 0)
        r = end_family(&s);
    free(s.fams);
    free(s.buckets);
    if (r != 0)
        bqp_free(out);
    return r;
}

bool bqp_get(const bqp_text_t *t, const char *key, double *value)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->samples[i].key, key) == 0) {
            *value = t->samples[i].value;
            return true;
        }
    }
    return false;
}

void bqp_free(bqp_text_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->samples[i].key);
    free(t->samples);
    memset(t, 0, sizeof *t);
}
