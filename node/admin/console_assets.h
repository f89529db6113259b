/* The web console's files, embedded at build time from node/admin/console/
 * by embed.cmake (no file is installed beside the binary, nothing is
 * fetched at run time). */
#ifndef BQ_NODE_ADMIN_CONSOLE_ASSETS_H
#define BQ_NODE_ADMIN_CONSOLE_ASSETS_H

#include <stddef.h>

typedef struct bq_console_asset {
    const char *path; /* "/ui/", "/ui/console.js", ... */
    const char *type; /* its Content-Type */
    const unsigned char *data;
    size_t len;
} bq_console_asset_t;

extern const bq_console_asset_t bq_console_assets[];
extern const size_t bq_console_nassets;

#endif
