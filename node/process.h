/* Process-wide set-up done once at start-up: the open-file limit, SIGPIPE,
 * dropping privileges (-u) and checking the binlog directory (-b). */
#ifndef BQ_NODE_PROCESS_H
#define BQ_NODE_PROCESS_H

/* Errors of bq_process_become_user, mapped to beanstalkd's exit codes. */
enum {
    BQ_PROCESS_ELOOKUP = -1, /* getpwnam failed: exit 32 */
    BQ_PROCESS_ENOUSER = -2, /* no such user: exit 33 */
    BQ_PROCESS_ESETID = -3,  /* setgid or setuid failed: exit 34 */
};

/* Raises the soft RLIMIT_NOFILE to the hard limit; logs the result at -V. */
void bq_process_raise_nofile(void);

/* Ignores SIGPIPE (write errors come back as EPIPE instead). 0 or -1. */
int bq_process_ignore_sigpipe(void);

/* setgid then setuid to user's ids (supplementary groups are kept, as in
 * beanstalkd). Logs failures; returns 0 or a BQ_PROCESS_E* code. */
int bq_process_become_user(const char *user);

/* Checks that dir exists and is a directory; logs and returns -1 if not. */
int bq_process_check_dir(const char *dir);

#endif
