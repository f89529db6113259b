/* The console's operator credential (console_auth.h). */
#include "node/admin/console_auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct session {
    char sid[BQ_CONSOLE_SID_LEN + 1]; /* "" when the slot is free */
    char csrf[BQ_CONSOLE_CSRF_LEN + 1];
    int64_t opened, used;
} session_t;

typedef struct bucket {
    char source[64]; /* "" when the slot is free */
    double tokens;
    int64_t at; /* when tokens was last brought up to date */
} bucket_t;

struct bq_console_auth {
    bool enabled;
    unsigned char hash[SHA256_DIGEST_LENGTH];
    session_t sessions[BQ_CONSOLE_SESSIONS];
    bucket_t sources[BQ_CONSOLE_SOURCES];
    bucket_t node;
};

bq_console_auth_t *bq_console_auth_new(const char *password, size_t len)
{
    bq_console_auth_t *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->node.tokens = 4 * BQ_CONSOLE_FAIL_BURST;
    if (password) {
        a->enabled = true;
        SHA256((const unsigned char *)password, len, a->hash);
    }
    return a;
}

void bq_console_auth_free(bq_console_auth_t *a)
{
    if (a)
        OPENSSL_cleanse(a->hash, sizeof a->hash);
    free(a);
}

bool bq_console_auth_enabled(const bq_console_auth_t *a)
{
    return a && a->enabled;
}

bool bq_console_equal(const char *x, size_t xlen, const char *y, size_t ylen)
{
    return xlen == ylen && CRYPTO_memcmp(x, y, xlen) == 0;
}

/* Brings b's tokens up to now: one back per refill period, up to cap. */
static void refill(bucket_t *b, int64_t now, double cap)
{
    if (now > b->at) {
        b->tokens +=
            (double)(now - b->at) / BQ_CONSOLE_FAIL_REFILL_MS * (cap / BQ_CONSOLE_FAIL_BURST);
        if (b->tokens > cap)
            b->tokens = cap;
    }
    b->at = now;
}

/* The bucket of source: its own, or the least recently failed one taken
 * over (full again). */
static bucket_t *source_bucket(bq_console_auth_t *a, const char *source, int64_t now)
{
    bucket_t *oldest = &a->sources[0];
    for (size_t i = 0; i < BQ_CONSOLE_SOURCES; i++) {
        bucket_t *b = &a->sources[i];
        if (b->source[0] != '\0' && strcmp(b->source, source) == 0) {
            refill(b, now, BQ_CONSOLE_FAIL_BURST);
            return b;
        }
        if (b->source[0] == '\0' || b->at < oldest->at)
            oldest = b;
    }
    snprintf(oldest->source, sizeof oldest->source, "%s", source);
    oldest->tokens = BQ_CONSOLE_FAIL_BURST;
    oldest->at = now;
    return oldest;
}

static void to_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* True when s has been idle too long, or open too long, at now. */
static bool expired(const session_t *s, int64_t now)
{
    return now - s->used > BQ_CONSOLE_SESSION_IDLE_MS ||
           now - s->opened > BQ_CONSOLE_SESSION_MAX_MS;
}

/* Opens a session in the slot of a free, expired or the oldest one. */
static bq_console_login_t open_session(bq_console_auth_t *a, int64_t now, char *sid, char *csrf)
{
    unsigned char rnd[BQ_CONSOLE_SID_LEN / 2 + BQ_CONSOLE_CSRF_LEN / 2];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return BQ_CONSOLE_LOGIN_ERROR;
    session_t *slot = &a->sessions[0];
    for (size_t i = 0; i < BQ_CONSOLE_SESSIONS; i++) {
        session_t *s = &a->sessions[i];
        if (s->sid[0] == '\0' || expired(s, now)) {
            slot = s;
            break;
        }
        if (s->opened < slot->opened)
            slot = s;
    }
    to_hex(rnd, BQ_CONSOLE_SID_LEN / 2, slot->sid);
    to_hex(rnd + BQ_CONSOLE_SID_LEN / 2, BQ_CONSOLE_CSRF_LEN / 2, slot->csrf);
    OPENSSL_cleanse(rnd, sizeof rnd);
    slot->opened = slot->used = now;
    memcpy(sid, slot->sid, sizeof slot->sid);
    memcpy(csrf, slot->csrf, sizeof slot->csrf);
    return BQ_CONSOLE_LOGIN_OK;
}

bq_console_login_t bq_console_login(bq_console_auth_t *a, const char *source, const char *candidate,
                                    size_t len, int64_t now, char *sid, char *csrf)
{
    if (!a->enabled)
        return BQ_CONSOLE_LOGIN_DISABLED;
    bucket_t *b = source_bucket(a, source, now);
    refill(&a->node, now, 4 * BQ_CONSOLE_FAIL_BURST);
    if (b->tokens < 1 || a->node.tokens < 1)
        return BQ_CONSOLE_LOGIN_LIMITED;
    unsigned char h[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)candidate, len, h);
    bool ok = CRYPTO_memcmp(h, a->hash, sizeof h) == 0;
    OPENSSL_cleanse(h, sizeof h);
    if (!ok) {
        b->tokens -= 1;
        a->node.tokens -= 1;
        return BQ_CONSOLE_LOGIN_WRONG;
    }
    return open_session(a, now, sid, csrf);
}

/* The session with id sid[0..len), or NULL. */
static session_t *find(bq_console_auth_t *a, const char *sid, size_t len)
{
    for (size_t i = 0; len == BQ_CONSOLE_SID_LEN && i < BQ_CONSOLE_SESSIONS; i++) {
        session_t *s = &a->sessions[i];
        if (s->sid[0] != '\0' && bq_console_equal(s->sid, BQ_CONSOLE_SID_LEN, sid, len))
            return s;
    }
    return NULL;
}

const char *bq_console_session(bq_console_auth_t *a, const char *sid, size_t len, int64_t now)
{
    session_t *s = a ? find(a, sid, len) : NULL;
    if (s == NULL)
        return NULL;
    if (expired(s, now)) {
        memset(s, 0, sizeof *s);
        return NULL;
    }
    s->used = now;
    return s->csrf;
}

void bq_console_logout(bq_console_auth_t *a, const char *sid, size_t len)
{
    session_t *s = a ? find(a, sid, len) : NULL;
    if (s)
        memset(s, 0, sizeof *s);
}
