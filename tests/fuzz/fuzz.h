/* Shared declarations of the fuzz targets: the libFuzzer entry point (which
 * replay_main.c also calls when the compiler has no libFuzzer) and the
 * failure report used for every invariant a target checks. */
#ifndef BQ_FUZZ_H
#define BQ_FUZZ_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs one input of data[0..size) through the target; always returns 0.
 * Borrows data. A violated invariant aborts the process. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reports a violated invariant with its place and aborts, so that libFuzzer
 * (or the replay driver's caller) records the input as a crash. */
__attribute__((format(printf, 3, 4), noreturn)) static inline void
bqf_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\n%s:%d: invariant violated: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* Checks an invariant; the message is printf-formatted. */
#define BQF_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            bqf_fail(__FILE__, __LINE__, __VA_ARGS__);                                             \
    } while (0)

#endif
