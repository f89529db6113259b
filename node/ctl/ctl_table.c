/* Aligned text tables for beanstalkctl. Rows are kept as copied strings
 * until print, which measures every column first: the output is the same
 * whatever order rows arrive in, and a long cell widens its column instead
 * of being cut. */
#include "node/ctl/ctl_table.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
    char **cells; /* ncols cells; a note row has two: first and text */
    bool note;
} row_t;

struct bq_ctl_table {
    size_t ncols;
    row_t *rows; /* rows[0] is the header */
    size_t nrows, cap;
};

static int add(bq_ctl_table_t *t, const char *const *cells, size_t n, bool note)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        row_t *rows = realloc(t->rows, cap * sizeof *rows);
        if (rows == NULL)
            return -ENOMEM;
        t->rows = rows;
        t->cap = cap;
    }
    char **copy = calloc(n, sizeof *copy);
    if (copy == NULL)
        return -ENOMEM;
    for (size_t c = 0; c < n; c++) {
        if ((copy[c] = strdup(cells[c] ? cells[c] : "-")) == NULL) {
            while (c > 0)
                free(copy[--c]);
            free(copy);
            return -ENOMEM;
        }
    }
    t->rows[t->nrows++] = (row_t){.cells = copy, .note = note};
    return 0;
}

bq_ctl_table_t *bq_ctl_table_new(size_t ncols, const char *const *header)
{
    bq_ctl_table_t *t = ncols >= 1 && ncols <= BQ_CTL_TABLE_MAX_COLS ? calloc(1, sizeof *t) : NULL;
    if (t == NULL)
        return NULL;
    t->ncols = ncols;
    if (add(t, header, ncols, false) != 0) {
        bq_ctl_table_free(t);
        return NULL;
    }
    return t;
}

int bq_ctl_table_row(bq_ctl_table_t *t, const char *const *cells)
{
    return add(t, cells, t->ncols, false);
}

int bq_ctl_table_note(bq_ctl_table_t *t, const char *first, const char *text)
{
    const char *cells[2] = {first, text};
    return add(t, cells, 2, true);
}

void bq_ctl_table_print(const bq_ctl_table_t *t, FILE *out, const char *indent)
{
    size_t width[BQ_CTL_TABLE_MAX_COLS] = {0};
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; !t->rows[r].note && c < t->ncols; c++) {
            size_t n = strlen(t->rows[r].cells[c]);
            width[c] = n > width[c] ? n : width[c];
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        const row_t *row = &t->rows[r];
        fputs(indent, out);
        if (row->note) {
            fprintf(out, "%s  %s\n", row->cells[0], row->cells[1]);
            continue;
        }
        for (size_t c = 0; c + 1 < t->ncols; c++)
            fprintf(out, "%-*s  ", (int)width[c], row->cells[c]);
        fprintf(out, "%s\n", row->cells[t->ncols - 1]);
    }
}

void bq_ctl_table_free(bq_ctl_table_t *t)
{
    if (t == NULL)
        return;
    for (size_t r = 0; r < t->nrows; r++) {
        size_t n = t->rows[r].note ? 2 : t->ncols;
        for (size_t c = 0; c < n; c++)
            free(t->rows[r].cells[c]);
        free(t->rows[r].cells);
    }
    free(t->rows);
    free(t);
}
