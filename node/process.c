/* One-time process set-up around the server: resource limits, signals that
 * must not kill us, the -u privilege drop (after the socket is bound, so a
 * privileged port works) and the -b directory check. */
#include "node/process.h"

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/base/log.h"

void bq_process_raise_nofile(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            bq_log(BQ_LOG_WARN, "cannot raise the open file limit", "err=\"%s\"", strerror(errno));
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    bq_log(BQ_LOG_DEBUG, "open file limit", "nofile=%llu", (unsigned long long)rl.rlim_cur);
}

int bq_process_ignore_sigpipe(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPIPE, &sa, NULL) != 0) {
        bq_log(BQ_LOG_ERROR, "sigaction(SIGPIPE) failed", "err=\"%s\"", strerror(errno));
        return -1;
    }
    return 0;
}

int bq_process_become_user(const char *user)
{
    errno = 0;
    struct passwd *pw = getpwnam(user);
    if (!pw && errno) {
        bq_log(BQ_LOG_ERROR, "getpwnam failed", "user=\"%s\" err=\"%s\"", user, strerror(errno));
        return BQ_PROCESS_ELOOKUP;
    }
    if (!pw) {
        bq_log(BQ_LOG_ERROR, "no such user", "user=\"%s\"", user);
        return BQ_PROCESS_ENOUSER;
    }
    if (setgid(pw->pw_gid) != 0) {
        bq_log(BQ_LOG_ERROR, "setgid failed", "gid=%ld user=\"%s\" err=\"%s\"", (long)pw->pw_gid,
               user, strerror(errno));
        return BQ_PROCESS_ESETID;
    }
    if (setuid(pw->pw_uid) != 0) {
        bq_log(BQ_LOG_ERROR, "setuid failed", "uid=%ld user=\"%s\" err=\"%s\"", (long)pw->pw_uid,
               user, strerror(errno));
        return BQ_PROCESS_ESETID;
    }
    bq_log(BQ_LOG_INFO, "running as user", "user=\"%s\" uid=%ld gid=%ld", user, (long)pw->pw_uid,
           (long)pw->pw_gid);
    return 0;
}

int bq_process_check_dir(const char *dir)
{
    struct stat st;

    if (stat(dir, &st) != 0) {
        bq_log(BQ_LOG_ERROR, "binlog directory is not accessible", "dir=\"%s\" err=\"%s\"", dir,
               strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        bq_log(BQ_LOG_ERROR, "binlog path is not a directory", "dir=\"%s\"", dir);
        return -1;
    }
    return 0;
}
