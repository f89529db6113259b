/* Fuzz target of protocol/mirror.c, a client's session as the standby's
 * proxy sees it: both directions are untrusted (the client's commands, and
 * the replies of whatever answers on the primary's port). The input is a
 * sequence of chunks, each a header byte (high bit: from the server; low
 * seven bits: the length) and that many bytes, fed in order; after each
 * chunk a restore is tried whenever the mirror says the session may move.
 *
 * Checked after every chunk: the tube used is a valid name; at least one
 * tube and at most BQ_MIRROR_MAX_WATCH are watched, each a valid name, no
 * two the same; commands in flight stay within BQ_MIRROR_MAX_PENDING; a
 * movable session restores (bq_mirror_restore returns 0 with bytes that
 * start with its restore commands, whole), and one that is not movable
 * does not. */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "protocol/mirror.h"
#include "protocol/parse.h"

static void check(bq_mirror_t *m)
{
    const char *use = bq_mirror_use(m);
    if (!bq_tube_name_valid(use, strlen(use)))
        bqf_fail(__FILE__, __LINE__, "the tube used is not a valid name: \"%s\"", use);
    size_t n = bq_mirror_nwatch(m);
    if (n < 1 || n > BQ_MIRROR_MAX_WATCH)
        bqf_fail(__FILE__, __LINE__, "%zu tubes watched", n);
    for (size_t i = 0; i < n; i++) {
        const char *w = bq_mirror_watch(m, i);
        if (!bq_tube_name_valid(w, strlen(w)))
            bqf_fail(__FILE__, __LINE__, "a watched tube is not a valid name: \"%s\"", w);
        for (size_t k = 0; k < i; k++)
            if (strcmp(w, bq_mirror_watch(m, k)) == 0)
                bqf_fail(__FILE__, __LINE__, "\"%s\" watched twice", w);
    }
    if (bq_mirror_pending(m) > BQ_MIRROR_MAX_PENDING)
        bqf_fail(__FILE__, __LINE__, "%zu commands in flight", bq_mirror_pending(m));
}

static void try_restore(bq_mirror_t *m)
{
    bool movable = bq_mirror_movable(m);
    char *bytes = NULL;
    size_t len = 0, restores = 0;
    int r = bq_mirror_restore(m, &bytes, &len, &restores);
    if (!movable && r == 0)
        bqf_fail(__FILE__, __LINE__, "a session that may not move restored");
    if (movable && r != 0 && !bq_mirror_lost(m))
        bqf_fail(__FILE__, __LINE__, "a movable session did not restore");
    /* The restore commands come first, whole: a server reading the bytes
     * sees at least that many commands before anything of the client's. */
    bq_mirror_t *fresh = r == 0 ? bq_mirror_new() : NULL;
    if (fresh) {
        bq_mirror_client(fresh, bytes, len);
        if (!bq_mirror_lost(fresh) && bq_mirror_pending(fresh) < restores)
            bqf_fail(__FILE__, __LINE__, "%zu restore commands, %zu whole commands sent", restores,
                     bq_mirror_pending(fresh));
        bq_mirror_free(fresh);
    }
    free(bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bq_mirror_t *m = bq_mirror_new();
    if (!m)
        return 0;
    size_t off = 0, chunk = 0;
    while (off < size) {
        uint8_t h = data[off++];
        size_t len = h & 0x7f;
        if (len > size - off)
            len = size - off;
        char *copy = malloc(len ? len : 1); /* exact size: ASan sees overreads */
        if (!copy)
            break;
        memcpy(copy, data + off, len);
        if (h & 0x80)
            bq_mirror_server(m, copy, len);
        else
            bq_mirror_client(m, copy, len);
        free(copy);
        off += len;
        check(m);
        /* A restore changes the mirror's queue: only now and then. */
        if (++chunk % 3 == 0 && bq_mirror_movable(m))
            try_restore(m);
        check(m);
    }
    bq_mirror_free(m);
    return 0;
}
