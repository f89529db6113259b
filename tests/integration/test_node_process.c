/* Integration tests of the node process itself (node/main.c, flags.c,
 * listen.c, server.c, log.c), run against our binary only: beanstalkd's exit
 * codes for bad flags and start-up failures, systemd socket activation
 * without libsystemd, clean exit on SIGTERM and SIGINT, and what -V/-VV
 * log (and never log: job bodies). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"

#define EXIT_DEADLINE_MS 10000

/* One process started by the test itself, in a private directory. */
typedef struct proc {
    pid_t pid;
    char dir[256];
    char log[300];
    bqt_server_t srv; /* for tests that use bqt_server_start instead */
} proc_t;

static int proc_setup(void **state)
{
    proc_t *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    if (bqt_mkdtemp(p->dir, sizeof p->dir, "bqnode") != 0) {
        free(p);
        return -1;
    }
    snprintf(p->log, sizeof p->log, "%s/server.log", p->dir);
    *state = p;
    return 0;
}

static int proc_teardown(void **state)
{
    proc_t *p = *state;
    char cmd[300];
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    bqt_server_stop(&p->srv);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", p->dir);
    free(p);
    return 0;
}

/* Starts our binary with args (NULL-terminated, after argv[0]), output to
 * p->log. With act_fd >= 0 the child gets it as fd 3 and LISTEN_PID/
 * LISTEN_FDS=nfds (extra fds are /dev/null), as systemd would pass it. */
static void spawn(proc_t *p, const char *const *args, int act_fd, int nfds)
{
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)bqt_our_binary();
    while (*args && n < 15)
        argv[n++] = (char *)*args++;
    argv[n] = NULL;
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid > 0)
        return;
    int logfd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(logfd, 1);
    dup2(logfd, 2);
    if (act_fd >= 0) {
        char pid[32], fds[16];
        dup2(act_fd, 3);
        for (int fd = 4; fd < 3 + nfds; fd++)
            dup2(open("/dev/null", O_RDONLY), fd);
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        snprintf(fds, sizeof fds, "%d", nfds);
        setenv("LISTEN_PID", pid, 1);
        setenv("LISTEN_FDS", fds, 1);
    }
    execv(argv[0], argv);
    _exit(127);
}

static void nap(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits for p's process to exit; returns its wait status (fails on timeout). */
static int wait_exit(proc_t *p, int timeout_ms)
{
    long long deadline = bqt_now_ms() + timeout_ms;
    int status;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            return status;
        }
        assert_true(bqt_now_ms() < deadline);
        nap(2);
    }
}

static char *read_file(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Runs the binary with args to completion; asserts its exit code and that
 * its output contains text. */
static void expect_exit(proc_t *p, const char *const *args, int code, const char *text)
{
    assert_int_equal(truncate(p->log, 0) == 0 || errno == ENOENT, 1);
    spawn(p, args, -1, 0);
    int status = wait_exit(p, EXIT_DEADLINE_MS);
    char *out = read_file(p->log);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != code || !strstr(out, text))
        fprintf(stderr, "args[0]=%s status=%d output:\n%s\n", args[0], status, out);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), code);
    assert_non_null(strstr(out, text));
}

static void usage_errors_exit_5(void **state)
{
    proc_t *p = *state;
    expect_exit(p, (const char *[]){"-x", NULL}, 5, "unknown flag: -x");
    expect_exit(p, (const char *[]){"-V", "-p", NULL}, 5, "flag requires an argument: -p");
    expect_exit(p, (const char *[]){"foo", NULL}, 5, "unknown argument: foo");
    expect_exit(p, (const char *[]){"-", NULL}, 5, "unknown argument: -");
    expect_exit(p, (const char *[]){"-z12k", NULL}, 5, "invalid size: 12k");
    expect_exit(p, (const char *[]){"-s", "1M", NULL}, 5, "invalid size: 1M");
    expect_exit(p, (const char *[]){"--roles=primary", NULL}, 5, "unknown flag: --roles=primary");
    expect_exit(p, (const char *[]){"--role=primary", NULL}, 5, "flag requires --node-id: --role");
    expect_exit(p, (const char *[]){"-x", NULL}, 5, "Use: ");
}

static void help_and_version_exit_0(void **state)
{
    proc_t *p = *state;
    expect_exit(p, (const char *[]){"-h", NULL}, 0, " -z BYTES");
    expect_exit(p, (const char *[]){"--help", NULL}, 0, " -z BYTES");
    expect_exit(p, (const char *[]){"-v", NULL}, 0, "beanstalkd-ha ");
    expect_exit(p, (const char *[]){"-Vv", NULL}, 0, "beanstalkd-ha ");
}

static void unknown_user_exits_33(void **state)
{
    proc_t *p = *state;
    expect_exit(p, (const char *[]){"-l", "127.0.0.1", "-p", "0", "-u", "no-such-user-bq", NULL},
                33, "no such user");
}

static void bad_binlog_dir_exits_10(void **state)
{
    proc_t *p = *state;
    char missing[300], file[300];
    snprintf(missing, sizeof missing, "%s/missing", p->dir);
    snprintf(file, sizeof file, "%s/file", p->dir);
    close(open(file, O_WRONLY | O_CREAT, 0600));
    expect_exit(p, (const char *[]){"-l", "127.0.0.1", "-p", "0", "-b", missing, NULL}, 10,
                "binlog directory is not accessible");
    expect_exit(p, (const char *[]){"-l", "127.0.0.1", "-p", "0", "-b", file, NULL}, 10,
                "not a directory");
}

static void listen_failures_exit_111(void **state)
{
    proc_t *p = *state;
    char path[300], listen[310];
    snprintf(path, sizeof path, "%s/not-a-socket", p->dir);
    snprintf(listen, sizeof listen, "unix:%s", path);
    close(open(path, O_WRONLY | O_CREAT, 0600));
    expect_exit(p, (const char *[]){"-l", listen, NULL}, 111, "another file already exists");
    assert_int_equal(access(path, F_OK), 0); /* never removed */
    expect_exit(p, (const char *[]){"-l", "127.0.0.1", "-p", "no-such-service-bq", NULL}, 111,
                "cannot resolve listen address");
}

/* -c (removed in beanstalkd) warns once, and the server runs with -b. */
static void removed_flag_warns_once_and_runs(void **state)
{
    proc_t *p = *state;
    const char *args[] = {"-b", "{dir}", "-c", NULL};
    assert_int_equal(bqt_server_start(&p->srv, bqt_our_binary(), args), 0);
    int fd = bqt_client(&p->srv);
    bqt_sends(fd, "put 0 0 10 1\r\nx\r\n");
    bqt_expect(fd, "INSERTED 1\r\n");
    close(fd);
    char *log = read_file(p->srv.log_path);
    assert_int_equal(count(log, "-c flag was removed. binlog is always compacted."), 1);
}

/* Starts a server, leaves clients in every interesting state (a reserved
 * job, a waiting reserve, half a put body, unread output), sends sig and
 * expects a clean exit 0. */
static void expect_clean_exit_on(proc_t *p, int sig)
{
    assert_int_equal(bqt_server_start(&p->srv, bqt_our_binary(), NULL), 0);
    int a = bqt_client(&p->srv), b = bqt_client(&p->srv), c = bqt_client(&p->srv);
    bqt_sends(a, "put 0 0 10 1\r\nx\r\nreserve\r\n");
    bqt_expect(a, "INSERTED 1\r\nRESERVED 1 1\r\nx\r\n");
    bqt_sends(b, "reserve\r\n");
    bqt_sends(c, "put 0 0 10 100\r\nabc");
    bqt_expect_silence(b, 50);
    bqt_server_signal(&p->srv, sig);
    int status = bqt_server_wait(&p->srv, EXIT_DEADLINE_MS);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    bqt_expect_eof(a, BQT_DEADLINE_MS);
    bqt_expect_eof(b, BQT_DEADLINE_MS);
    close(a);
    close(b);
    close(c);
    char *log = read_file(p->srv.log_path);
    assert_non_null(strstr(log, sig == SIGTERM ? "signal=SIGTERM" : "signal=SIGINT"));
    assert_non_null(strstr(log, "msg=\"stopped\""));
}

static void sigterm_exits_cleanly(void **state)
{
    expect_clean_exit_on(*state, SIGTERM);
}

static void sigint_exits_cleanly(void **state)
{
    expect_clean_exit_on(*state, SIGINT);
}

static void sigusr1_logs_drain_mode(void **state)
{
    proc_t *p = *state;
    assert_int_equal(bqt_server_start(&p->srv, bqt_our_binary(), NULL), 0);
    int fd = bqt_client(&p->srv);
    bqt_server_signal(&p->srv, SIGUSR1);
    long long deadline = bqt_now_ms() + BQT_DEADLINE_MS;
    bool draining = false;
    while (!draining && bqt_now_ms() < deadline) {
        char *v = bqt_stat(fd, "stats\r\n", "draining");
        draining = v && strcmp(v, "true") == 0;
        free(v);
        if (!draining)
            nap(5);
    }
    assert_true(draining);
    close(fd);
    assert_non_null(strstr(read_file(p->srv.log_path), "entering drain mode"));
}

/* A listening TCP socket on a free loopback port; *port is set. */
static int tcp_listener(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Asserts that the server behind fd answers (the listen socket may accept
 * before the server runs, so the reply is what proves it is serving). */
static void expect_served(int fd)
{
    bqt_sends(fd, "list-tube-used\r\n");
    char *line = bqt_read_line(fd, EXIT_DEADLINE_MS);
    assert_non_null(line);
    assert_string_equal(line, "USING default\r\n");
    free(line);
}

static void stop_and_expect_exit_0(proc_t *p)
{
    kill(p->pid, SIGTERM);
    int status = wait_exit(p, EXIT_DEADLINE_MS);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void socket_activation_tcp(void **state)
{
    proc_t *p = *state;
    int port, lfd = tcp_listener(&port);
    spawn(p, (const char *[]){"-p", "1", NULL}, lfd, 1);
    close(lfd);
    int fd = bqt_connect(port);
    assert_true(fd >= 0);
    expect_served(fd);
    close(fd);
    stop_and_expect_exit_0(p);
    char *log = read_file(p->log);
    assert_non_null(strstr(log, "inherited listen fd; ignoring option"));
    assert_null(strstr(log, "more than one"));
}

static void socket_activation_unix_with_two_fds(void **state)
{
    proc_t *p = *state;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    char path[300];
    snprintf(path, sizeof path, "%s/act.sock", p->dir);
    assert_true(strlen(path) < sizeof a.sun_path);
    memcpy(a.sun_path, path, strlen(path) + 1);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 16), 0);
    spawn(p, (const char *[]){NULL}, lfd, 2);
    close(lfd);
    int fd = bqt_connect_unix(a.sun_path);
    assert_true(fd >= 0);
    expect_served(fd);
    close(fd);
    stop_and_expect_exit_0(p);
    char *log = read_file(p->log);
    assert_non_null(strstr(log, "inherited more than one listen socket"));
    assert_null(strstr(log, "ignoring option"));
}

static void socket_activation_rejects_non_listening_fd(void **state)
{
    proc_t *p = *state;
    int fds[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    spawn(p, (const char *[]){NULL}, fds[0], 1);
    int status = wait_exit(p, EXIT_DEADLINE_MS);
    close(fds[0]);
    close(fds[1]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 111);
    assert_non_null(strstr(read_file(p->log), "not a TCP or UNIX listening socket"));
}

static bool log_has_close(void *arg)
{
    return strstr(read_file(arg), "msg=\"close\"") != NULL;
}

static void verbose_logs_connections_and_commands_but_no_bodies(void **state)
{
    proc_t *p = *state;
    const char *args[] = {"-VV", NULL};
    assert_int_equal(bqt_server_start(&p->srv, bqt_our_binary(), args), 0);
    int fd = bqt_client(&p->srv);
    bqt_sends(fd, "put 0 0 10 12\r\nSECRET-BODY!\r\nreserve\r\n");
    bqt_expect(fd, "INSERTED 1\r\nRESERVED 1 12\r\nSECRET-BODY!\r\n");
    char *st = bqt_stat(fd, "stats-job 1\r\n", "state");
    assert_string_equal(st, "reserved");
    free(st);
    bqt_sends(fd, "quit\r\n");
    bqt_expect_eof(fd, BQT_DEADLINE_MS);
    close(fd);
    assert_true(bqt_wait_until(log_has_close, p->srv.log_path, BQT_DEADLINE_MS));
    char *log = read_file(p->srv.log_path);
    assert_non_null(strstr(log, "msg=\"accept\""));
    assert_non_null(strstr(log, "op=put"));
    assert_non_null(strstr(log, "line=\"RESERVED 1 12\""));
    assert_non_null(strstr(log, "op=stats-job"));
    assert_null(strstr(log, "SECRET-BODY"));
    assert_null(strstr(log, "state: reserved")); /* YAML bodies are skipped too */
    assert_non_null(strstr(log, "op=quit"));
}

static void default_verbosity_is_quiet_per_connection(void **state)
{
    proc_t *p = *state;
    assert_int_equal(bqt_server_start(&p->srv, bqt_our_binary(), NULL), 0);
    int fd = bqt_client(&p->srv);
    bqt_sends(fd, "quit\r\n");
    bqt_expect_eof(fd, BQT_DEADLINE_MS);
    close(fd);
    char *log = read_file(p->srv.log_path);
    assert_non_null(strstr(log, "msg=\"listening\" addr=127.0.0.1:"));
    assert_null(strstr(log, "msg=\"accept\""));
}

#define PROC_TEST(f) cmocka_unit_test_setup_teardown(f, proc_setup, proc_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        PROC_TEST(usage_errors_exit_5),
        PROC_TEST(help_and_version_exit_0),
        PROC_TEST(unknown_user_exits_33),
        PROC_TEST(bad_binlog_dir_exits_10),
        PROC_TEST(listen_failures_exit_111),
        PROC_TEST(removed_flag_warns_once_and_runs),
        PROC_TEST(sigterm_exits_cleanly),
        PROC_TEST(sigint_exits_cleanly),
        PROC_TEST(sigusr1_logs_drain_mode),
        PROC_TEST(socket_activation_tcp),
        PROC_TEST(socket_activation_unix_with_two_fds),
        PROC_TEST(socket_activation_rejects_non_listening_fd),
        PROC_TEST(verbose_logs_connections_and_commands_but_no_bodies),
        PROC_TEST(default_verbosity_is_quiet_per_connection),
    };
    return cmocka_run_group_tests_name("node_process", tests, NULL, NULL);
}
