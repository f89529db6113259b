/* Test support: starts real server processes on free loopback ports and talks
 * to them over sockets, every wait bounded by a deadline.
 *
 * A server runs in its own process group with its output in a private
 * temporary directory. It receives SIGKILL if the thread that started it dies
 * (PR_SET_PDEATHSIG; note that this is per *thread*, so a thread must stop
 * the servers it started before it exits) and an atexit hook kills whatever
 * is still registered, so no server outlives the test process. Readiness is a
 * successful connect polled against a deadline; reads use poll() with the
 * time that remains. Functions that "fail the test" use cmocka and must only
 * run on the thread that runs the cmocka test; the others are thread-safe. */
#define _GNU_SOURCE /* close_range(), nftw() */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>

#include <cmocka.h>

#include "tests/support/bqtest.h"

#define START_DEADLINE_MS 10000
#define STOP_DEADLINE_MS 5000
#define BIND_RETRIES 5
#define MAX_SERVERS 256
#define MAX_ARGS 64

/* Servers still running, killed by the atexit hook. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t registry[MAX_SERVERS];
static bool reg_hooked;

long long bqt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int remaining(long long deadline)
{
    long long left = deadline - bqt_now_ms();
    return left > 0 ? (int)left : 0;
}

static void kill_registered(void)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (registry[i] > 0) {
            kill(-registry[i], SIGKILL);
            kill(registry[i], SIGKILL);
            waitpid(registry[i], NULL, 0);
            registry[i] = 0;
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

static void reg_set(pid_t old, pid_t now)
{
    pthread_mutex_lock(&reg_lock);
    if (!reg_hooked) {
        atexit(kill_registered);
        reg_hooked = true;
    }
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (registry[i] == old) {
            registry[i] = now;
            break;
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

const char *bqt_our_binary(void)
{
    const char *p = getenv("BQ_SERVER");
    return p && *p ? p : "./beanstalkd-ha";
}

const char *bqt_reference_binary(void)
{
    const char *p = getenv("BQ_REFERENCE");
    return p && *p ? p : "/usr/bin/beanstalkd";
}

bool bqt_reference_available(void)
{
    return access(bqt_reference_binary(), X_OK) == 0;
}

/* Ports handed out by this process, so that two servers started at the same
 * time by different threads never get the same one. */
static pthread_mutex_t port_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char port_used[65536];

/* The ports below the kernel's ephemeral range (ip_local_port_range) and
 * above 10000: no outgoing connection of any process is ever given one, so
 * a port found free there stays free until a test binds it (a port the
 * kernel handed out for bind(0) could be taken a moment later as the local
 * port of another test's connection: "address already in use"). *lo is 0
 * when the range is too small to use. */
static void quiet_range(int *lo, int *hi)
{
    int elo = 32768, ehi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
    if (f) {
        if (fscanf(f, "%d %d", &elo, &ehi) != 2)
            elo = 32768;
        fclose(f);
    }
    *lo = 10000;
    *hi = elo - 1;
    if (*hi - *lo < 2000)
        *lo = 0;
}

/* True when 127.0.0.1:port can be bound now. */
static bool bindable(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* A port the kernel gives for bind(0), or -1. */
static int ephemeral_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = -1;
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

int bqt_free_port(void)
{
    static unsigned seed;
    int lo, hi;
    quiet_range(&lo, &hi);
    for (int attempt = 0; attempt < 200; attempt++) {
        int port;
        pthread_mutex_lock(&port_lock);
        if (seed == 0)
            seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
        port = lo ? lo + (int)(rand_r(&seed) % (unsigned)(hi - lo + 1)) : 0;
        pthread_mutex_unlock(&port_lock);
        if (port == 0)
            port = ephemeral_port();
        else if (!bindable(port))
            continue;
        if (port <= 0)
            return -1;
        pthread_mutex_lock(&port_lock);
        bool fresh = !port_used[port];
        port_used[port] = 1;
        pthread_mutex_unlock(&port_lock);
        if (fresh)
            return port;
    }
    return -1;
}

/* True when process pid holds the socket listening on 127.0.0.1:port (or on
 * any address), found through /proc/net/tcp and /proc/<pid>/fd. This tells
 * our server from another process that took the same port. */
static bool owns_listener(pid_t pid, int port)
{
    char line[512], path[64], want[64], link[64];
    unsigned long inode = 0;
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return true; /* cannot tell: trust the connect */
    while (!inode && fgets(line, sizeof line, f)) {
        unsigned addr, lport, state;
        unsigned long ino;
        if (sscanf(line, " %*d: %x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &addr, &lport,
                   &state, &ino) == 4 &&
            (int)lport == port && state == 0x0A)
            inode = ino;
    }
    fclose(f);
    snprintf(want, sizeof want, "socket:[%lu]", inode);
    for (int fd = 0; inode && fd < 1024; fd++) {
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0) {
            link[n] = '\0';
            if (strcmp(link, want) == 0)
                return true;
        }
    }
    return false;
}

int bqt_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int bqt_connect_within(int port, int ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1, err = 0;
    socklen_t len = sizeof err;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (errno != EINPROGRESS || poll(&p, 1, ms) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            close(fd);
            return -1;
        }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int bqt_connect_unix(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int fd;
    if (strlen(path) >= sizeof a.sun_path)
        return -1;
    strcpy(a.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int server_connect(const bqt_server_t *s)
{
    return s->unix_path[0] ? bqt_connect_unix(s->unix_path) : bqt_connect(s->port);
}

/* Replaces every "{dir}" in arg by dir; returns new (malloc). */
static char *expand_dir(const char *arg, const char *dir)
{
    size_t n = strlen(arg) + 1, dl = strlen(dir);
    for (const char *p = strstr(arg, "{dir}"); p; p = strstr(p + 5, "{dir}"))
        n += dl;
    char *out = malloc(n), *o = out;
    if (!out)
        return NULL;
    while (*arg) {
        if (strncmp(arg, "{dir}", 5) == 0) {
            memcpy(o, dir, dl);
            o += dl;
            arg += 5;
        } else {
            *o++ = *arg++;
        }
    }
    *o = '\0';
    return out;
}

/* The child side of the spawn: only async-signal-safe calls until exec. */
static void child_exec(char *const argv[], const char *log_path, pid_t parent)
{
    int logfd, nullfd;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    nullfd = open("/dev/null", O_RDONLY);
    if (logfd < 0 || nullfd < 0)
        _exit(127);
    dup2(nullfd, 0);
    dup2(logfd, 1);
    dup2(logfd, 2);
    if (close_range(3, ~0U, 0) != 0) {
        for (int fd = 3; fd < 4096; fd++)
            close(fd);
    }
    execv(argv[0], argv);
    _exit(127);
}

static pid_t spawn(const char *binary, const char *const *pre, const char *const *extra,
                   const bqt_server_t *s)
{
    char *argv[MAX_ARGS + 1];
    int n = 0, allocated_from;
    pid_t pid, parent = getpid();

    argv[n++] = (char *)binary;
    for (; pre && *pre && n < MAX_ARGS / 2; pre++)
        argv[n++] = (char *)*pre;
    allocated_from = n;
    for (; extra && *extra && n < MAX_ARGS; extra++)
        argv[n++] = expand_dir(*extra, s->dir);
    argv[n] = NULL;
    pid = fork();
    if (pid == 0)
        child_exec(argv, s->log_path, parent);
    for (int i = allocated_from; i < n; i++)
        free(argv[i]);
    if (pid > 0) {
        setpgid(pid, pid); /* also done by the child; whichever runs first wins */
        reg_set(0, pid);
    }
    return pid < 0 ? -1 : pid;
}

static void print_log(const bqt_server_t *s)
{
    char buf[4096];
    FILE *f = fopen(s->log_path, "r");
    size_t n;
    fprintf(stderr, "--- server log %s ---\n", s->log_path);
    if (!f)
        return;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(f);
    fprintf(stderr, "--- end of server log ---\n");
}

static bool log_mentions_bind(const bqt_server_t *s)
{
    char buf[8192];
    FILE *f = fopen(s->log_path, "r");
    size_t n;
    if (!f)
        return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, "in use") || strstr(buf, "bind") || strstr(buf, "EADDRINUSE");
}

/* Closes the probe connection and waits briefly for the server to close its
 * side, so the probe no longer counts in current-connections. */
static void retire_probe(int fd)
{
    char c;
    struct pollfd p = {fd, POLLIN, 0};
    long long deadline = bqt_now_ms() + 1000;
    shutdown(fd, SHUT_WR);
    while (poll(&p, 1, remaining(deadline)) > 0 && read(fd, &c, 1) > 0) {
    }
    close(fd);
}

/* Polls for readiness. 0 ready, 1 exited early with a bind error, -1 failed. */
static int await_ready(bqt_server_t *s, long long deadline)
{
    int status;
    for (;;) {
        int fd = server_connect(s);
        if (fd >= 0 && (s->unix_path[0] || owns_listener(s->pid, s->port))) {
            retire_probe(fd);
            return 0;
        }
        if (fd >= 0)
            close(fd); /* another process listens there; ours will fail to bind */
        pid_t r = waitpid(s->pid, &status, WNOHANG);
        if (r == s->pid) {
            reg_set(s->pid, 0);
            s->pid = 0;
            return log_mentions_bind(s) && !s->unix_path[0] ? 1 : -1;
        }
        if (bqt_now_ms() >= deadline)
            return -1;
        nap_ms(5);
    }
}

int bqt_mkdtemp(char *buf, size_t cap, const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (!mkdtemp(buf)) {
        fprintf(stderr, "bqtest: mkdtemp %s: %s\n", buf, strerror(errno));
        buf[0] = '\0';
        return -1;
    }
    return 0;
}

int bqt_run_to_exit(const char *binary, const char *const *args, const char *log_path,
                    int timeout_ms)
{
    char *argv[32];
    int n = 0, status = 0;
    argv[n++] = (char *)binary;
    while (args && *args && n < 31)
        argv[n++] = (char *)*args++;
    argv[n] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    long long deadline = bqt_now_ms() + timeout_ms;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (bqt_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("%s did not exit within %d ms", binary, timeout_ms);
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (!WIFEXITED(status))
        fail_msg("%s died of signal %d", binary, WTERMSIG(status));
    return WEXITSTATUS(status);
}

static int make_dir(bqt_server_t *s)
{
    memset(s, 0, sizeof *s);
    if (bqt_mkdtemp(s->dir, sizeof s->dir, "bqt") != 0)
        return -1;
    snprintf(s->log_path, sizeof s->log_path, "%s/server.log", s->dir);
    return 0;
}

/* Spawns binary in s's directory (TCP on a free port, or unix) and waits
 * until it listens. 0, or -1 with its log on stderr (the server stopped). */
static int launch(bqt_server_t *s, const char *binary, const char *const *extra, bool use_unix)
{
    long long deadline = bqt_now_ms() + START_DEADLINE_MS;
    char port[16], listen[320];
    for (int attempt = 0; attempt < BIND_RETRIES; attempt++) {
        const char *tcp[] = {"-l", "127.0.0.1", "-p", port, NULL};
        const char *unx[] = {"-l", listen, NULL};
        if (use_unix) {
            snprintf(s->unix_path, sizeof s->unix_path, "%s/sock", s->dir);
            snprintf(listen, sizeof listen, "unix:%s", s->unix_path);
        } else {
            s->port = bqt_free_port();
            snprintf(port, sizeof port, "%d", s->port);
        }
        s->pid = spawn(binary, use_unix ? unx : tcp, extra, s);
        if (s->pid < 0) {
            fprintf(stderr, "bqtest: fork: %s\n", strerror(errno));
            s->pid = 0;
            break;
        }
        int r = await_ready(s, deadline);
        if (r == 0)
            return 0;
        if (r < 0)
            break;
        fprintf(stderr, "bqtest: %s lost port %d to a race; retrying\n", binary, s->port);
    }
    fprintf(stderr, "bqtest: %s did not start listening\n", binary);
    print_log(s);
    bqt_server_stop(s);
    return -1;
}

static int start_common(bqt_server_t *s, const char *binary, const char *const *extra,
                        bool use_unix)
{
    return make_dir(s) == 0 ? launch(s, binary, extra, use_unix) : -1;
}

int bqt_server_start(bqt_server_t *s, const char *binary, const char *const *extra_args)
{
    return start_common(s, binary, extra_args, false);
}

int bqt_server_restart(bqt_server_t *s, const char *binary, const char *const *extra_args, int sig)
{
    if (s->pid > 0) {
        kill(s->pid, sig);
        if (bqt_server_wait(s, STOP_DEADLINE_MS) == -1) {
            fprintf(stderr, "bqtest: %s did not exit after signal %d\n", binary, sig);
            kill(-s->pid, SIGKILL);
            kill(s->pid, SIGKILL);
            bqt_server_wait(s, STOP_DEADLINE_MS);
            return -1;
        }
    }
    return s->dir[0] ? launch(s, binary, extra_args, s->unix_path[0] != '\0') : -1;
}

int bqt_server_start_unix(bqt_server_t *s, const char *binary, const char *const *extra_args)
{
    return start_common(s, binary, extra_args, true);
}

void bqt_server_signal(bqt_server_t *s, int sig)
{
    if (s->pid > 0)
        kill(s->pid, sig);
}

int bqt_server_wait(bqt_server_t *s, int timeout_ms)
{
    long long deadline = bqt_now_ms() + timeout_ms;
    pid_t pid = s->pid;
    int status = 0;
    if (pid <= 0)
        return -1;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) {
            /* Take down anything the server left in its process group. */
            kill(-pid, SIGKILL);
            reg_set(pid, 0);
            s->pid = 0;
            return r == pid ? status : 0;
        }
        if (bqt_now_ms() >= deadline)
            return -1;
        nap_ms(2);
    }
}

long long bqt_term_within(bqt_server_t *s, int bound_ms, const char *who)
{
    long long t0 = bqt_now_ms();
    bqt_server_signal(s, SIGTERM);
    int status = bqt_server_wait(s, bound_ms);
    if (status == -1)
        fail_msg("%s did not exit within %d ms of SIGTERM", who, bound_ms);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fail_msg("%s did not exit cleanly after SIGTERM (status 0x%x)", who, status);
    long long ms = bqt_now_ms() - t0;
    fprintf(stderr, "%s: exited %lld ms after SIGTERM\n", who, ms);
    return ms;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void bqt_server_stop(bqt_server_t *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        if (bqt_server_wait(s, STOP_DEADLINE_MS) < 0) {
            kill(-s->pid, SIGKILL);
            kill(s->pid, SIGKILL);
            bqt_server_wait(s, STOP_DEADLINE_MS);
        }
    }
    if (s->dir[0] && !getenv("BQT_KEEP_DIRS"))
        nftw(s->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
}

int bqt_client(const bqt_server_t *s)
{
    int fd = server_connect(s);
    if (fd < 0)
        fail_msg("cannot connect to the server (port %d, unix '%s'): %s", s->port, s->unix_path,
                 strerror(errno));
    return fd;
}

void bqt_send(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            fail_msg("send failed: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

void bqt_sends(int fd, const char *s)
{
    bqt_send(fd, s, strlen(s));
}

/* Waits until fd is readable; false on timeout. */
static bool wait_readable(int fd, long long deadline)
{
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    do {
        r = poll(&p, 1, remaining(deadline));
    } while (r < 0 && errno == EINTR);
    return r > 0;
}

size_t bqt_read_n(int fd, char *buf, size_t n, int timeout_ms)
{
    long long deadline = bqt_now_ms() + timeout_ms;
    size_t got = 0;
    while (got < n && wait_readable(fd, deadline)) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

char *bqt_read_line(int fd, int timeout_ms)
{
    long long deadline = bqt_now_ms() + timeout_ms;
    char peek[4096], *line = NULL;
    size_t len = 0;
    /* Peek, then consume only up to the CRLF so later reads see the rest. */
    while (len < 65536 && wait_readable(fd, deadline)) {
        ssize_t n = recv(fd, peek, sizeof peek, MSG_PEEK);
        size_t take;
        if (n <= 0)
            break;
        for (take = 0; take < (size_t)n; take++) {
            char prev = take > 0 ? peek[take - 1] : (len > 0 ? line[len - 1] : 0);
            if (peek[take] == '\n' && prev == '\r')
                break;
        }
        bool done = take < (size_t)n;
        take += done;
        char *grown = realloc(line, len + take + 1);
        if (!grown || read(fd, grown + len, take) != (ssize_t)take) {
            free(grown ? grown : line);
            return NULL;
        }
        line = grown;
        len += take;
        line[len] = '\0';
        if (done)
            return line;
    }
    free(line);
    return NULL;
}

/* Appends an escaped copy of data to out (which must hold 4*len+1). */
static void escape_into(char *out, const char *data, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c == '\r')
            out += sprintf(out, "\\r");
        else if (c == '\n')
            out += sprintf(out, "\\n");
        else if (c == '\\')
            out += sprintf(out, "\\\\");
        else if (c < 32 || c >= 127)
            out += sprintf(out, "\\x%02x", c);
        else
            *out++ = (char)c;
    }
    *out = '\0';
}

void bqt_expect(int fd, const char *expected)
{
    size_t n = strlen(expected);
    char *got = malloc(n + 1), *e1 = malloc(4 * n + 1), *e2 = malloc(4 * n + 1);
    assert_non_null(got);
    assert_non_null(e1);
    assert_non_null(e2);
    size_t r = bqt_read_n(fd, got, n, BQT_DEADLINE_MS);
    if (r == n && memcmp(got, expected, n) == 0) {
        free(got);
        free(e1);
        free(e2);
        return;
    }
    escape_into(e1, expected, n);
    escape_into(e2, got, r);
    fail_msg("reply mismatch\n  expected: \"%s\"\n  got:      \"%s\"%s", e1, e2,
             r < n ? " (timeout or EOF)" : "");
}

char *bqt_expect_prefix(int fd, const char *prefix)
{
    char *line = bqt_read_line(fd, BQT_DEADLINE_MS);
    if (!line)
        fail_msg("expected a line starting with \"%s\", got timeout or EOF", prefix);
    if (strncmp(line, prefix, strlen(prefix)) != 0) {
        char *esc = malloc(4 * strlen(line) + 1);
        assert_non_null(esc);
        escape_into(esc, line, strlen(line));
        fail_msg("expected a line starting with \"%s\", got \"%s\"", prefix, esc);
    }
    return line;
}

void bqt_expect_silence(int fd, int ms)
{
    long long deadline = bqt_now_ms() + ms;
    char buf[256], esc[4 * 256 + 1];
    if (!wait_readable(fd, deadline))
        return;
    ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (n <= 0)
        fail_msg("expected silence for %d ms, but the connection was closed", ms);
    escape_into(esc, buf, (size_t)n);
    fail_msg("expected silence for %d ms, got \"%s\"", ms, esc);
}

void bqt_expect_eof(int fd, int timeout_ms)
{
    long long deadline = bqt_now_ms() + timeout_ms;
    char buf[256], esc[4 * 256 + 1];
    for (;;) {
        if (!wait_readable(fd, deadline))
            fail_msg("expected the server to close the connection within %d ms", timeout_ms);
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return;
        if (n < 0)
            fail_msg("read failed while expecting EOF: %s", strerror(errno));
        escape_into(esc, buf, (size_t)n);
        fail_msg("expected EOF, got \"%s\"", esc);
    }
}

/* Finds `key: value` in a YAML body and returns the value (quotes removed). */
static char *yaml_value(const char *body, const char *key)
{
    size_t kl = strlen(key);
    for (const char *line = body; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, key, kl) == 0 && line[kl] == ':' && line[kl + 1] == ' ') {
            const char *v = line + kl + 2, *end = strchr(v, '\n');
            size_t n = end ? (size_t)(end - v) : strlen(v);
            if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
                v++;
                n -= 2;
            }
            char *out = malloc(n + 1);
            assert_non_null(out);
            memcpy(out, v, n);
            out[n] = '\0';
            return out;
        }
    }
    return NULL;
}

char *bqt_stat(int fd, const char *cmd, const char *key)
{
    bqt_sends(fd, cmd);
    char *line = bqt_expect_prefix(fd, "OK ");
    size_t n = strtoul(line + 3, NULL, 10);
    char *body = malloc(n + 3);
    assert_non_null(body);
    if (bqt_read_n(fd, body, n + 2, BQT_DEADLINE_MS) != n + 2)
        fail_msg("short body after \"%s\"", "OK");
    body[n] = '\0';
    char *v = yaml_value(body, key);
    free(line);
    free(body);
    return v;
}

long long bqt_stat_int(int fd, const char *cmd, const char *key)
{
    char *v = bqt_stat(fd, cmd, key), *end;
    if (!v)
        fail_msg("key '%s' missing from the reply to %s", key, cmd);
    long long n = strtoll(v, &end, 10);
    if (end == v || *end != '\0')
        fail_msg("key '%s' is not an integer: '%s'", key, v);
    free(v);
    return n;
}

bool bqt_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms)
{
    long long deadline = bqt_now_ms() + timeout_ms;
    for (;;) {
        bool ok = pred(arg);
        if (ok || bqt_now_ms() >= deadline)
            return ok;
        nap_ms(5);
    }
}

size_t bqt_log_count(const char *path, const char *a, const char *b)
{
    FILE *f = path[0] ? fopen(path, "r") : NULL;
    char line[4096];
    size_t count = 0;
    while (f && fgets(line, sizeof line, f))
        count += strstr(line, a) && (!b || strstr(line, b));
    if (f)
        fclose(f);
    return count;
}

typedef struct log_wait {
    const char *path, *a, *b;
    size_t atleast;
} log_wait_t;

static bool log_reached(void *arg)
{
    log_wait_t *w = arg;
    return bqt_log_count(w->path, w->a, w->b) >= w->atleast;
}

void bqt_wait_log(const char *path, const char *who, const char *a, const char *b, size_t atleast,
                  int ms)
{
    log_wait_t w = {path, a, b, atleast};
    if (!bqt_wait_until(log_reached, &w, ms))
        fail_msg("node %s logged %zu lines with \"%s\"%s%s%s within %d ms, want %zu", who,
                 bqt_log_count(path, a, b), a, b ? " and \"" : "", b ? b : "", b ? "\"" : "", ms,
                 atleast);
}

/* ---- skips that show ---- */

static bool g_skipped;

void bqt_require(bool available, const char *what)
{
    const char *all = getenv("BQ_REQUIRE_ALL");
    if (available)
        return;
    if (all && *all && strcmp(all, "0") != 0)
        fail_msg("%s is missing, and BQ_REQUIRE_ALL is set (CI installs it)", what);
    fprintf(stderr, "skipped: %s is missing\n", what);
    g_skipped = true;
    skip();
}

int bqt_exit(int failures)
{
    return failures ? failures : g_skipped ? BQT_SKIPPED : 0;
}
