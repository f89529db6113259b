/* Checks and lookups on the YAML bodies of OK replies (stats, stats-tube,
 * stats-job, list-tubes, list-tubes-watched). */
#ifndef BQ_FUZZ_YAML_CHECK_H
#define BQ_FUZZ_YAML_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Aborts unless body[0..len) is "---\n" followed by "key: value\n" or
 * "- item\n" lines, every counter (current-*, cmd-*, total-*, per-job
 * counts) is a plain decimal below 10^9 (a larger one means a counter went
 * below zero) and a job state is one of the four. */
void bqf_yaml_check(const char *body, size_t len);

/* The value of "key: <number>" in body, in *out; false when absent. */
bool bqf_yaml_u64(const char *body, size_t len, const char *key, uint64_t *out);

/* The index-th "- item" of a list body, borrowed from body; false when the
 * list is shorter. */
bool bqf_yaml_item(const char *body, size_t len, size_t index, const char **item, size_t *item_len);

#endif
