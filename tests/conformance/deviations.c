/* The one list of differences the differential test accepts between Debian's
 * beanstalkd 1.12 (the oracle we can run) and our server, which follows 1.13
 * and does not replicate reference bugs. Sections refer to
 * shared/reference/beanstalkd-reference.md. Anything not listed here must
 * match byte for byte after the normalisation in compare.c.
 *
 * How each entry is applied:
 *   yaml-quoting  automatically, by compare.c, for the keys in quoted_keys[];
 *   rwt-strict, crlf-224, stray-cr, id-block, id-reuse
 *                 per reply, by `recv ... expect-ours <id> "literal"` in a case
 *                 file: ours is compared with the literal, the reference's
 *                 reply is shown but not compared. */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "tests/conformance/conformance.h"

const bqc_deviation_t bqc_deviations[] = {
    /* §0.1: 1.13 prints these YAML string values double-quoted (prot.c:189-191,
     * 195, 213 at HEAD); 1.12 prints them bare. Ours must quote them. */
    {"yaml-quoting", "0.1", "stats/stats-tube/stats-job string values are quoted in 1.13"},
    /* §0.1: 1.13 parses reserve-with-timeout with read_u32 and requires the
     * value to be <= INT_MAX, else BAD_FORMAT; 1.12 used strtol, so -1 and
     * 2147483648 wait forever, abc means 0 and 4294967297 means 1 second. */
    {"rwt-strict", "0.1", "reserve-with-timeout rejects -1, abc, >INT_MAX with BAD_FORMAT"},
    /* §1.1, marked "do not replicate": when the \r of a CRLF is the 224th byte
     * of a buffer fill, beanstalkd drops it with the overlong line and then
     * swallows the next command line. Ours answers both commands. */
    {"crlf-224", "1.1", "CRLF split at the 224-byte line limit does not swallow the next command"},
    /* §1.1 (scan_line_end, prot.c:761-775): beanstalkd looks only at the
     * first \r of its buffer; when a stray \r is not followed by \n no line
     * is found until 224 bytes arrive, and then the pending commands are
     * discarded with one BAD_FORMAT. Ours ends a line at the first CRLF
     * (docs/protocol-compatibility.md, "Stray CR inside a line"). */
    {"stray-cr", "1.1", "a stray CR inside a line does not hide the CRLF that follows it"},
    /* §2.8 and §2.10 item 10: beanstalkd's next id after a restart is one
     * past the highest id in its log, so an id a client saw is handed out
     * again when its record was lost. Ours goes on there only after a clean
     * stop or under -f 0; after a crash under -f MS or -F it skips past the
     * id block it had reserved (docs/binlog.md, "Job ids after a restart"). */
    {"id-block", "2.8", "after a crash under -f MS or -F the next id skips the reserved block"},
    /* §2.8 ("ids of jobs whose full records were lost or GC'd are reused"):
     * once a deleted job's file is collected beanstalkd forgets its id. Ours
     * keeps the highest id used in every segment and never reuses one. */
    {"id-reuse", "2.8", "ids of deleted jobs are not handed out again after a restart"},
    {NULL, NULL, NULL},
};

/* The keys that yaml-quoting covers, per body kind. */
static const struct {
    const char *kind, *key;
} quoted_keys[] = {
    {"stats", "hostname"},  {"stats", "os"},       {"stats", "platform"},
    {"stats-tube", "name"}, {"stats-job", "tube"},
};

const bqc_deviation_t *bqc_deviation_find(const char *id)
{
    for (const bqc_deviation_t *d = bqc_deviations; d->id; d++)
        if (strcmp(d->id, id) == 0)
            return d;
    return NULL;
}

bool bqc_quoted_key(const char *kind, const char *key)
{
    for (size_t i = 0; i < sizeof quoted_keys / sizeof quoted_keys[0]; i++)
        if (strcmp(quoted_keys[i].kind, kind) == 0 && strcmp(quoted_keys[i].key, key) == 0)
            return true;
    return false;
}
