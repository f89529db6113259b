/* A text table with aligned columns, as beanstalkctl prints it: a header
 * row, rows of cells padded to the widest cell of their column (two spaces
 * apart, nothing after the last cell), and "note" rows - a first cell and a
 * free text - that take no part in the alignment. */
#ifndef BQ_CTL_TABLE_H
#define BQ_CTL_TABLE_H

#include <stddef.h>
#include <stdio.h>

#define BQ_CTL_TABLE_MAX_COLS 16

typedef struct bq_ctl_table bq_ctl_table_t;

/* A new table with ncols (1..BQ_CTL_TABLE_MAX_COLS) columns named by
 * header[0..ncols) (copied). Returns NULL when out of memory or ncols is out
 * of range; free with bq_ctl_table_free. */
bq_ctl_table_t *bq_ctl_table_new(size_t ncols, const char *const *header);

/* Appends a row of ncols cells (copied; NULL prints as "-"). 0 or -ENOMEM. */
int bq_ctl_table_row(bq_ctl_table_t *t, const char *const *cells);

/* Appends a note row: first, two spaces, text (both copied). 0 or -ENOMEM. */
int bq_ctl_table_note(bq_ctl_table_t *t, const char *first, const char *text);

/* Writes the table to out, every line starting with indent. */
void bq_ctl_table_print(const bq_ctl_table_t *t, FILE *out, const char *indent);

/* Frees t. NULL is a no-op. */
void bq_ctl_table_free(bq_ctl_table_t *t);

#endif
