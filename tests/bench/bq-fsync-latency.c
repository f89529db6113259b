/* bq-fsync-latency: the raw cost of making a small write durable on the
 * filesystem of a directory, which bounds every binlog run under -f 0
 * (beanstalkd -f 0 pays one fsync per put; a group commit pays one per
 * batch). In a fresh temporary file in DIR it times COUNT rounds of each of:
 *   append     write BYTES at the end of the file, then fdatasync (the file
 *              grows, so the filesystem commits its metadata too, as when a
 *              log writes into new or unwritten space);
 *   overwrite  write BYTES over the first block again, then fdatasync (data
 *              only: the device's flush latency).
 * Prints the median, the 10th and 90th percentile of each in microseconds,
 * ending with one line:
 *   RESULT append_p50_us=... overwrite_p50_us=... count=... bytes=...
 * and removes the file. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_COUNT 100000

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of the sorted v[n] in microseconds (median: mean of the
 * two middle values when n is even). */
static double quantile_us(const int64_t *v, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)pos;
    int hi = lo + 1 < n ? lo + 1 : lo;
    return ((double)v[lo] + (pos - lo) * (double)(v[hi] - v[lo])) / 1000.0;
}

/* Times count rounds of pwrite(buf) at the end (append) or at offset 0,
 * each followed by fdatasync; fills t[count]. Returns 0 or -errno. */
static int time_rounds(int fd, const char *buf, size_t bytes, int count, int append, int64_t *t)
{
    off_t end = lseek(fd, 0, SEEK_END);
    for (int i = 0; i < count; i++) {
        off_t at = append ? end + (off_t)i * (off_t)bytes : 0;
        int64_t t0 = now_ns();
        if (pwrite(fd, buf, bytes, at) != (ssize_t)bytes || fdatasync(fd) != 0)
            return errno ? -errno : -EIO;
        t[i] = now_ns() - t0;
    }
    return 0;
}

static void report(const char *what, int64_t *t, int count, double *p50)
{
    qsort(t, (size_t)count, sizeof t[0], cmp_i64);
    *p50 = quantile_us(t, count, 0.5);
    printf("%-9s write+fdatasync: p10 %.0f us, median %.0f us, p90 %.0f us\n", what,
           quantile_us(t, count, 0.1), *p50, quantile_us(t, count, 0.9));
}

int main(int argc, char **argv)
{
    int count = 100;
    long bytes = 4096;
    int opt;
    while ((opt = getopt(argc, argv, "n:b:")) != -1) {
        if (opt == 'n')
            count = atoi(optarg);
        else if (opt == 'b')
            bytes = atol(optarg);
        else
            count = -1;
    }
    if (optind != argc - 1 || count < 1 || count > MAX_COUNT || bytes < 1 || bytes > 1 << 24) {
        fputs("usage: bq-fsync-latency [-n COUNT (100)] [-b BYTES (4096)] DIR\n", stderr);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/bq-fsync-latency.XXXXXX", argv[optind]);
    int fd = mkstemp(path);
    char *buf = malloc((size_t)bytes);
    int64_t *t = malloc(sizeof(int64_t) * (size_t)count);
    if (fd < 0 || buf == NULL || t == NULL) {
        fprintf(stderr, "bq-fsync-latency: %s: %s\n", path, strerror(errno));
        return 1;
    }
    memset(buf, 'x', (size_t)bytes);
    double append_p50 = 0, overwrite_p50 = 0;
    int rc = time_rounds(fd, buf, (size_t)bytes, count, 1, t);
    if (rc == 0)
        report("append", t, count, &append_p50);
    if (rc == 0)
        rc = time_rounds(fd, buf, (size_t)bytes, count, 0, t);
    if (rc == 0)
        report("overwrite", t, count, &overwrite_p50);
    close(fd);
    unlink(path);
    free(buf);
    free(t);
    if (rc != 0) {
        fprintf(stderr, "bq-fsync-latency: %s\n", strerror(-rc));
        return 1;
    }
    printf("RESULT append_p50_us=%.0f overwrite_p50_us=%.0f count=%d bytes=%ld\n", append_p50,
           overwrite_p50, count, bytes);
    return 0;
}
