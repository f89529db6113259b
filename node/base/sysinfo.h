/* The process facts that `stats` reports (pid, version, rusage, uptime, id,
 * uname, binlog figures), gathered for the engine's server_info hook. */
#ifndef BQ_NODE_SYSINFO_H
#define BQ_NODE_SYSINFO_H

#include <stdint.h>
#include <sys/utsname.h>

#include "protocol/engine.h"

typedef struct bq_sysinfo {
    char id[17];              /* 16 hex chars from 8 random bytes */
    struct utsname uts;       /* hostname, os, platform */
    int64_t start_mono;       /* monotonic ns at start-up, for uptime */
    uint64_t binlog_max_size; /* -s */
} bq_sysinfo_t;

/* Fills si once at start-up: reads /dev/urandom and uname. Returns 0, or
 * logs and returns -1 (beanstalkd exits 50 then). */
int bq_sysinfo_init(bq_sysinfo_t *si, uint64_t binlog_max_size);

/* The engine's server_info hook; arg is a bq_sysinfo_t (borrowed). */
void bq_sysinfo_fill(void *arg, bq_server_info_t *info);

#endif
