/* The console's operator credential (--console-password-file): the
 * password, the sessions a login opens, and the rate limit on failed
 * logins. No I/O and no clock: the caller passes now in milliseconds.
 * Threat model and choices: docs/security.md, "The web console".
 *
 * - The password is kept only as its SHA-256; a candidate is hashed and
 *   compared in constant time (CRYPTO_memcmp).
 * - A session is 32 random bytes (RAND_bytes) in a cookie, with its own
 *   CSRF token (16 random bytes) that every action must carry in a header.
 *   At most BQ_CONSOLE_SESSIONS live at once (a new one replaces the
 *   oldest); each ends BQ_CONSOLE_SESSION_IDLE_MS after its last use and
 *   BQ_CONSOLE_SESSION_MAX_MS after the login, whichever comes first.
 * - Failed logins spend tokens of two buckets: one per source address
 *   (BQ_CONSOLE_FAIL_BURST, one back every BQ_CONSOLE_FAIL_REFILL_MS; at most
 *   BQ_CONSOLE_SOURCES addresses are tracked, the least recently failed one
 *   is forgotten first) and one for the node (4 times as large). With no
 *   token left a login is refused before the password is looked at. */
#ifndef BQ_NODE_ADMIN_CONSOLE_AUTH_H
#define BQ_NODE_ADMIN_CONSOLE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BQ_CONSOLE_SESSIONS 32
#define BQ_CONSOLE_SESSION_IDLE_MS (60 * 60 * 1000)
#define BQ_CONSOLE_SESSION_MAX_MS (12 * 60 * 60 * 1000)
#define BQ_CONSOLE_SOURCES 64
#define BQ_CONSOLE_FAIL_BURST 5
#define BQ_CONSOLE_FAIL_REFILL_MS 10000
#define BQ_CONSOLE_PASSWORD_MIN 12 /* shorter passwords are refused at start */
#define BQ_CONSOLE_PASSWORD_MAX 256

#define BQ_CONSOLE_SID_LEN 64  /* hex characters of a session id */
#define BQ_CONSOLE_CSRF_LEN 32 /* hex characters of a CSRF token */

typedef struct bq_console_auth bq_console_auth_t;

/* A new credential store for password[0..len) (borrowed; NULL: no
 * password, logins are refused), or NULL when out of memory. */
bq_console_auth_t *bq_console_auth_new(const char *password, size_t len);

/* Frees a. NULL is a no-op. */
void bq_console_auth_free(bq_console_auth_t *a);

/* True when a password is configured. */
bool bq_console_auth_enabled(const bq_console_auth_t *a);

typedef enum bq_console_login {
    BQ_CONSOLE_LOGIN_OK,
    BQ_CONSOLE_LOGIN_WRONG,    /* wrong password: a token spent */
    BQ_CONSOLE_LOGIN_LIMITED,  /* too many failures: the password was not checked */
    BQ_CONSOLE_LOGIN_DISABLED, /* no password configured */
    BQ_CONSOLE_LOGIN_ERROR,    /* no randomness */
} bq_console_login_t;

/* Checks candidate[0..len) for source (an address, borrowed) at now. On
 * BQ_CONSOLE_LOGIN_OK a session is opened: its id and CSRF token are
 * written NUL-terminated to sid[BQ_CONSOLE_SID_LEN + 1] and
 * csrf[BQ_CONSOLE_CSRF_LEN + 1]. */
bq_console_login_t bq_console_login(bq_console_auth_t *a, const char *source, const char *candidate,
                                    size_t len, int64_t now, char *sid, char *csrf);

/* The CSRF token of the live session sid[0..len) (borrowed), which this
 * use keeps alive; NULL when there is none (unknown, ended or expired). */
const char *bq_console_session(bq_console_auth_t *a, const char *sid, size_t len, int64_t now);

/* Ends session sid[0..len); a no-op when there is none. */
void bq_console_logout(bq_console_auth_t *a, const char *sid, size_t len);

/* Constant-time equality of two byte strings (lengths may differ: false). */
bool bq_console_equal(const char *x, size_t xlen, const char *y, size_t ylen);

#endif
