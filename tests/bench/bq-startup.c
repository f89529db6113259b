/* bq-startup: measures how long a beanstalk server takes to start. It
 * starts the given command, then polls 127.0.0.1:PORT every few
 * milliseconds: connect, send `stats`, and wait for the whole `OK <n>`
 * reply. The start-up time runs from just before the fork that execs the
 * server to the first complete stats reply, so it covers everything a client
 * waits for: reading and replaying a binlog, and a listening socket whose
 * backlog is not served yet. The server is then killed (SIGKILL) and reaped;
 * it also dies with this process (PR_SET_PDEATHSIG), so an interrupted
 * benchmark leaves nothing behind. Output ends with one line:
 *   RESULT startup_ms=... ready=<current-jobs-ready> total=<ready+delayed+
 *   buried+reserved> attempts=<connections tried>
 * The exit status is 0 only when a reply arrived before the deadline. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REPLY_MAX (64 * 1024) /* a stats reply is about 1.5 KB */

typedef struct opts_s {
    int port;
    double deadline_s;
    double interval_ms;
    const char *log; /* the server's stdout and stderr; NULL: inherited */
    char **argv;     /* the server command */
} opts_t;

typedef struct probe_s {
    char buf[REPLY_MAX + 1];
    size_t len;
} probe_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(FILE *out)
{
    fputs("usage: bq-startup -p PORT [-t SECONDS] [-i MS] [-o LOG] -- COMMAND [ARGS...]\n"
          "  -p PORT     the port COMMAND listens on, on 127.0.0.1\n"
          "  -t SECONDS  give up after this long (60)\n"
          "  -i MS       pause between connection attempts (2)\n"
          "  -o LOG      send the server's stdout and stderr to LOG\n"
          "Starts COMMAND, polls it with `stats` until the first complete reply,\n"
          "prints RESULT startup_ms=... ready=... total=... attempts=..., kills it.\n",
          out);
}

static int parse_args(opts_t *o, int argc, char **argv)
{
    *o = (opts_t){.port = 0, .deadline_s = 60, .interval_ms = 2};
    int opt;
    char *end;
    while ((opt = getopt(argc, argv, "p:t:i:o:h")) != -1) {
        switch (opt) {
        case 'p':
            o->port = (int)strtol(optarg, &end, 10);
            if (*end != '\0' || o->port < 1 || o->port > 65535)
                return -1;
            break;
        case 't':
            o->deadline_s = strtod(optarg, &end);
            if (*end != '\0' || !(o->deadline_s > 0))
                return -1;
            break;
        case 'i':
            o->interval_ms = strtod(optarg, &end);
            if (*end != '\0' || !(o->interval_ms >= 0))
                return -1;
            break;
        case 'o':
            o->log = optarg;
            break;
        case 'h':
            return 1;
        default:
            return -1;
        }
    }
    if (o->port == 0 || optind >= argc)
        return -1;
    o->argv = argv + optind;
    return 0;
}

/* In the child: dies with the parent, redirects output, execs the server. */
static void exec_server(const opts_t *o)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (o->log) {
        int fd = open(o->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(127);
    }
    execvp(o->argv[0], o->argv);
    fprintf(stderr, "bq-startup: cannot run %s: %s\n", o->argv[0], strerror(errno));
    _exit(127);
}

/* True when buf holds a whole "OK <n>\r\n<n bytes>\r\n" reply. */
static bool reply_complete(const probe_t *p)
{
    const char *eol = memchr(p->buf, '\n', p->len);
    if (eol == NULL || p->len < 4 || memcmp(p->buf, "OK ", 3) != 0)
        return false;
    size_t body = (size_t)strtoul(p->buf + 3, NULL, 10);
    return p->len >= (size_t)(eol + 1 - p->buf) + body + 2;
}

/* One probe: connects, sends stats, reads the reply until it is complete,
 * the connection fails, the server exits or the deadline passes.
 * Returns 1 on a complete OK reply, 0 to try again, -1 when the server died. */
static int probe_once(int port, pid_t pid, int64_t deadline, probe_t *p)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = 0;
    p->len = 0;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        write(fd, "stats\r\n", 7) != 7)
        goto done;
    while (now_ns() < deadline && !reply_complete(p)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 10) == 0) {
            if (waitpid(pid, NULL, WNOHANG) != 0) {
                rc = -1;
                goto done;
            }
            continue;
        }
        ssize_t n = read(fd, p->buf + p->len, REPLY_MAX - p->len);
        if (n <= 0)
            goto done;
        p->len += (size_t)n;
    }
    p->buf[p->len] = '\0';
    rc = reply_complete(p) ? 1 : 0;
done:
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The value of "key: <n>" in a stats reply, or 0. */
static unsigned long long stat_value(const probe_t *p, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    const char *at = strstr(p->buf, pat);
    return at ? strtoull(at + strlen(pat), NULL, 10) : 0;
}

static void stop_server(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_args(&o, argc, argv);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    static probe_t p;
    int64_t t0 = now_ns(), deadline = t0 + (int64_t)(o.deadline_s * 1e9);
    pid_t pid = fork();
    if (pid < 0) {
        perror("bq-startup: fork");
        return 1;
    }
    if (pid == 0)
        exec_server(&o);
    struct timespec pause = {.tv_sec = 0, .tv_nsec = (long)(o.interval_ms * 1e6)};
    int got = 0;
    unsigned attempts = 0;
    while (got == 0 && now_ns() < deadline) {
        attempts++;
        got = probe_once(o.port, pid, deadline, &p);
        if (got == 0 && waitpid(pid, NULL, WNOHANG) != 0)
            got = -1;
        if (got == 0)
            nanosleep(&pause, NULL);
    }
    double ms = (double)(now_ns() - t0) / 1e6;
    if (got != 1) {
        fprintf(stderr, "bq-startup: %s after %.0f ms (%u attempts)\n",
                got < 0 ? "the server exited" : "no reply", ms, attempts);
        if (got == 0)
            stop_server(pid);
        return 1;
    }
    stop_server(pid);
    unsigned long long ready = stat_value(&p, "current-jobs-ready");
    unsigned long long total = ready + stat_value(&p, "current-jobs-delayed") +
                               stat_value(&p, "current-jobs-buried") +
                               stat_value(&p, "current-jobs-reserved");
    printf("RESULT startup_ms=%.1f ready=%llu total=%llu attempts=%u\n", ms, ready, total,
           attempts);
    return 0;
}
