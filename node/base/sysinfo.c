/* Answers the engine's server_info hook. The random id and the uname strings
 * are read once at start-up, so `stats` never touches a file; rusage and the
 * uptime are read on each call. */
#include "node/base/sysinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "node/base/clock.h"
#include "node/base/log.h"

static int read_random(unsigned char *buf, size_t len)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd == -1)
        return -1;
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n <= 0 && !(n == -1 && errno == EINTR))
            break;
        if (n > 0)
            got += (size_t)n;
    }
    close(fd);
    return got == len ? 0 : -1;
}

int bq_sysinfo_init(bq_sysinfo_t *si, uint64_t binlog_max_size)
{
    unsigned char raw[8];

    memset(si, 0, sizeof *si);
    if (read_random(raw, sizeof raw) != 0) {
        bq_log(BQ_LOG_ERROR, "cannot read /dev/urandom", "err=\"%s\"", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(si->id + 2 * i, 3, "%02x", raw[i]);
    if (uname(&si->uts) == -1) {
        bq_log(BQ_LOG_ERROR, "uname failed", "err=\"%s\"", strerror(errno));
        return -1;
    }
    si->start_mono = bq_clock_now().mono;
    si->binlog_max_size = binlog_max_size;
    return 0;
}

static int64_t timeval_us(struct timeval tv)
{
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

void bq_sysinfo_fill(void *arg, bq_server_info_t *info)
{
    const bq_sysinfo_t *si = arg;
    struct rusage ru;

    memset(info, 0, sizeof *info);
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        info->utime_us = timeval_us(ru.ru_utime);
        info->stime_us = timeval_us(ru.ru_stime);
    }
    info->pid = (long)getpid();
    info->version = BQ_VERSION;
    info->uptime_s = (uint64_t)((bq_clock_now().mono - si->start_mono) / BQ_NS_PER_S);
    info->binlog_max_size = si->binlog_max_size;
    info->id = si->id;
    info->hostname = si->uts.nodename;
    info->os = si->uts.version;
    info->platform = si->uts.machine;
}
