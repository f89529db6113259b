/* Test support for integration, conformance and cluster tests: start real
 * server processes on free loopback ports, speak to them over sockets with
 * deadlines, stop them by pid. Every wait has a deadline; nothing here sleeps
 * for a fixed time and hopes.
 *
 * Include after <stdarg.h>, <stddef.h>, <setjmp.h> and <cmocka.h>: the
 * bqt_expect* helpers fail the running cmocka test on a mismatch. */
#ifndef BQ_TEST_H
#define BQ_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Default deadline for one expected reply. */
#define BQT_DEADLINE_MS 5000

typedef struct bqt_server {
    pid_t pid;           /* 0 when not running */
    int port;            /* TCP port on 127.0.0.1 (0 for a unix-socket server) */
    char dir[256];       /* private temporary directory, removed by stop */
    char unix_path[300]; /* socket path when started with bqt_server_start_unix */
    char log_path[300];  /* the server's stdout+stderr, kept in dir */
} bqt_server_t;

/* Path of our server binary: $BQ_SERVER, else "./beanstalkd-ha". */
const char *bqt_our_binary(void);

/* Path of the reference server: $BQ_REFERENCE, else "/usr/bin/beanstalkd". */
const char *bqt_reference_binary(void);

/* True when the reference binary exists and is executable. */
bool bqt_reference_available(void);

/* Starts `binary` with `-l 127.0.0.1 -p <free port>` followed by the NULL-
 * terminated extra_args (may be NULL), in a fresh temporary directory, and
 * waits (deadline 10 s) until it accepts connections. The string "{dir}" in
 * an extra argument is replaced by the temporary directory. Returns 0, or -1
 * with a message on stderr (including the server's log). */
int bqt_server_start(bqt_server_t *s, const char *binary, const char *const *extra_args);

/* Same, listening on unix:<dir>/sock instead of TCP. */
int bqt_server_start_unix(bqt_server_t *s, const char *binary, const char *const *extra_args);

/* Sends sig (SIGTERM: a clean stop; SIGKILL: a crash) to the running server,
 * waits for it to exit, and starts binary again in the same directory (the
 * same "{dir}"), on a new port, waiting until it accepts connections. 0, or
 * -1 with a message on stderr (the server is then stopped). */
int bqt_server_restart(bqt_server_t *s, const char *binary, const char *const *extra_args, int sig);

/* Sends sig to the server (e.g. SIGUSR1, SIGSTOP, SIGKILL) without waiting. */
void bqt_server_signal(bqt_server_t *s, int sig);

/* Waits (deadline timeout_ms) for the server to exit; returns its wait status,
 * or -1 on timeout. */
int bqt_server_wait(bqt_server_t *s, int timeout_ms);

/* The bound within which SIGTERM must end a node in any phase
 * (docs/operations.md, "Stopping"). */
#define BQT_SIGTERM_BOUND_MS 5000

/* Sends SIGTERM to s and fails the test (naming who) unless it exits with
 * status 0 within bound_ms; returns how long it took (ms), also printed. */
long long bqt_term_within(bqt_server_t *s, int bound_ms, const char *who);

/* SIGTERM, wait up to 5 s, then SIGKILL; removes the temporary directory.
 * Safe to call twice. */
void bqt_server_stop(bqt_server_t *s);

/* Creates a fresh directory $TMPDIR/<prefix>.XXXXXX (or under /tmp) into
 * buf; 0, or -1 with a message on stderr. */
int bqt_mkdtemp(char *buf, size_t cap, const char *prefix);

/* Runs binary with args (NULL-terminated, after argv[0]) until it exits,
 * its stdout and stderr in log_path (truncated). Fails the test when it runs
 * longer than timeout_ms (it is killed) or dies of a signal; returns its exit
 * code. */
int bqt_run_to_exit(const char *binary, const char *const *args, const char *log_path,
                    int timeout_ms);

/* Returns a port on 127.0.0.1 that was free a moment ago, chosen at random
 * below the kernel's ephemeral range (where no outgoing connection can take
 * it meanwhile), never the same twice in this process; -1 when none. */
int bqt_free_port(void);

/* Blocking TCP connect to 127.0.0.1:port; fd or -1. */
int bqt_connect(int port);

/* TCP connect to 127.0.0.1:port that gives up after ms (a client's connect
 * timeout: a SYN that vanishes is not waited for); a blocking fd, or -1. */
int bqt_connect_within(int port, int ms);

/* Blocking connect to a unix socket; fd or -1. */
int bqt_connect_unix(const char *path);

/* Connects to s (TCP or unix as it was started); fails the test on error. */
int bqt_client(const bqt_server_t *s);

/* Writes all len bytes; fails the test on error. */
void bqt_send(int fd, const void *data, size_t len);

/* Writes a NUL-terminated string; fails the test on error. */
void bqt_sends(int fd, const char *s);

/* Reads exactly n bytes into buf within timeout_ms; returns the number read
 * (less than n on timeout or EOF). */
size_t bqt_read_n(int fd, char *buf, size_t n, int timeout_ms);

/* Reads one line including its "\r\n" within timeout_ms into a malloc'd
 * NUL-terminated string; NULL on timeout or EOF. */
char *bqt_read_line(int fd, int timeout_ms);

/* Reads strlen(expected) bytes (deadline BQT_DEADLINE_MS) and asserts they
 * equal expected. */
void bqt_expect(int fd, const char *expected);

/* Reads one line and asserts it starts with prefix. Returns the line
 * (malloc'd) for further checks. */
char *bqt_expect_prefix(int fd, const char *prefix);

/* Asserts that nothing arrives within ms milliseconds (a negative check). */
void bqt_expect_silence(int fd, int ms);

/* Asserts that the peer closes the connection within timeout_ms. */
void bqt_expect_eof(int fd, int timeout_ms);

/* Sends cmd (with its "\r\n"), reads an "OK <n>\r\n<yaml>\r\n" reply and
 * returns the value of `key` from the YAML as a malloc'd string (NULL when
 * absent). Fails the test when the reply is not OK. */
char *bqt_stat(int fd, const char *cmd, const char *key);

/* Like bqt_stat but returns the value as an integer. */
long long bqt_stat_int(int fd, const char *cmd, const char *key);

/* Polls pred(arg) every few ms until it returns true or timeout_ms passes.
 * Returns the last result. */
bool bqt_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms);

/* Lines of the log file at path that contain a and (unless NULL) b; 0 when
 * the file cannot be read. */
size_t bqt_log_count(const char *path, const char *a, const char *b);

/* Waits up to ms until the log at path has at least atleast lines with a
 * (and b); fails the test otherwise, naming who (a node's name) and what
 * it saw. */
void bqt_wait_log(const char *path, const char *who, const char *a, const char *b, size_t atleast,
                  int ms);

/* Monotonic milliseconds, for measuring how long a reply took. */
long long bqt_now_ms(void);

/* The exit status ctest reads as "skipped" (SKIP_RETURN_CODE). */
#define BQT_SKIPPED 77

/* A test that needs what (a tool, the reference server, a descriptor
 * limit) which is missing: with BQ_REQUIRE_ALL set (CI, which installs
 * everything) the test fails saying so; otherwise it is skipped, said on
 * stderr, and bqt_exit reports the executable as skipped. Call from a
 * test's body (cmocka's skip() and fail_msg()). */
void bqt_require(bool available, const char *what);

/* main's return value: the failures cmocka counted, else BQT_SKIPPED when
 * bqt_require skipped a test, else 0. */
int bqt_exit(int failures);

#endif
