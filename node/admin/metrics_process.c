/* The process_* metrics every Prometheus client library exports, read from
 * Linux's /proc: CPU time, resident and virtual memory and the start time
 * from /proc/self/stat (fields 14, 15, 22, 23 and 24 of proc(5)), the boot
 * time from /proc/stat, open descriptors by listing /proc/self/fd, and
 * their limit from getrlimit; and the binlog filesystem's free and total
 * bytes from statvfs. */
#include "node/admin/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Field n (counted as proc(5) does, from 1) of a stat line, given the text
 * after the command's closing parenthesis, which starts field 3. */
static int stat_field(const char *after, int n, unsigned long long *v)
{
    const char *f = after;
    for (int i = 3; i <= n; i++) {
        while (*f == ' ')
            f++;
        if (*f == '\0')
            return -1;
        if (i == n) {
            char *end;
            *v = strtoull(f, &end, 10);
            return end != f && (*end == ' ' || *end == '\n' || *end == '\0') ? 0 : -1;
        }
        while (*f && *f != ' ')
            f++;
    }
    return -1;
}

int bq_metrics_parse_stat(const char *stat, long ticks, long page, uint64_t btime,
                          bq_metrics_process_t *p)
{
    /* The command name (field 2) is in parentheses and may hold anything:
     * fields are counted from the last ')'. */
    const char *s = strrchr(stat, ')');
    unsigned long long utime, stime, start, vsize, rss;
    if (!s || ticks <= 0 || page <= 0 || stat_field(s + 1, 14, &utime) != 0 ||
        stat_field(s + 1, 15, &stime) != 0 || stat_field(s + 1, 22, &start) != 0 ||
        stat_field(s + 1, 23, &vsize) != 0 || stat_field(s + 1, 24, &rss) != 0)
        return -1;
    p->cpu_seconds = (double)(utime + stime) / (double)ticks;
    p->start_time_seconds = (double)btime + (double)start / (double)ticks;
    p->virtual_bytes = vsize;
    p->resident_bytes = (uint64_t)rss * (uint64_t)page;
    return 0;
}

/* Reads a small file whole into buf (NUL-terminated). 0 or -1. */
static int slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0 ? 0 : -1;
}

/* btime of /proc/stat: the boot time in seconds since the epoch. */
static int boot_time(uint64_t *btime)
{
    char line[256];
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return -1;
    int r = -1;
    while (r != 0 && fgets(line, sizeof line, f)) {
        unsigned long long v;
        if (sscanf(line, "btime %llu", &v) == 1) {
            *btime = v;
            r = 0;
        }
    }
    fclose(f);
    return r;
}

/* Entries of /proc/self/fd but "." and "..", less the one opendir holds. */
static uint64_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    uint64_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n > 0 ? n - 1 : 0;
}

int bq_metrics_process_read(bq_metrics_process_t *p)
{
    char stat[1024];
    uint64_t btime = 0;
    memset(p, 0, sizeof *p);
    if (slurp("/proc/self/stat", stat, sizeof stat) != 0 || boot_time(&btime) != 0 ||
        bq_metrics_parse_stat(stat, sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), btime, p) != 0) {
        memset(p, 0, sizeof *p);
        return -1;
    }
    p->open_fds = open_fds();
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        p->max_fds = rl.rlim_cur == RLIM_INFINITY ? 0 : (uint64_t)rl.rlim_cur;
    return 0;
}

int bq_metrics_filesystem_read(const char *path, bq_metrics_binlog_t *m)
{
    struct statvfs fs;
    m->fs_known = false;
    m->fs_avail_bytes = m->fs_size_bytes = 0;
    if (!path || statvfs(path, &fs) != 0)
        return -1;
    m->fs_known = true;
    m->fs_avail_bytes = (uint64_t)fs.f_bavail * fs.f_frsize;
    m->fs_size_bytes = (uint64_t)fs.f_blocks * fs.f_frsize;
    return 0;
}
