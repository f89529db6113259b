/* Command-line parsing, reproducing beanstalkd's optparse (util.c) rules:
 * a flag group "-VFVukr" runs left to right; a flag that takes an argument
 * consumes the rest of its group, or else the next argv element; the first
 * element that is not a flag group (including a bare "-") is an error.
 * Sizes are read like sscanf("%zu%c"): digits only, nothing after them.
 * Long options map onto the same short flags: --port=11300, --port 11300;
 * a few exist only as long options (switches, and --import-beanstalkd DIR,
 * with no short flag). */
#include "flags.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct long_opt {
    const char *name;
    char flag;         /* the short flag it stands for; 0 for a long-only switch */
    size_t switch_off; /* long-only: offset of its bool in bq_flags_t */
} long_opt_t;

static const long_opt_t long_opts[] = {
    {"help", 'h', 0},         {"version", 'v', 0},
    {"verbose", 'V', 0},      {"listen", 'l', 0},
    {"port", 'p', 0},         {"user", 'u', 0},
    {"binlog-dir", 'b', 0},   {"binlog-size", 's', 0},
    {"fsync-ms", 'f', 0},     {"no-fsync", 'F', 0},
    {"max-job-size", 'z', 0}, {"binlog-skip-corrupt", 0, offsetof(bq_flags_t, skip_corrupt)},
    {"import-accept-prefix", 0, offsetof(bq_flags_t, import_accept_prefix)},
};

/* Long-only options that take an argument (a string in bq_flags_t). */
typedef struct long_arg {
    const char *name;
    size_t off; /* offset of its `const char *` in bq_flags_t */
} long_arg_t;

static const long_arg_t long_args[] = {
    {"import-beanstalkd", offsetof(bq_flags_t, import_dir)},
};

static const char *const warning_texts[] = {
    "maximum job size was set to 1073741824",
    "-c flag was removed. binlog is always compacted.",
    "-n flag was removed. binlog is always compacted.",
};

static bool takes_arg(char flag)
{
    return strchr("blfpsuz", flag) != NULL;
}

static bq_flags_action_t fail(bq_flags_t *f, const char *what, const char *arg)
{
    snprintf(f->error, sizeof f->error, "%s: %s", what, arg);
    f->action = BQ_FLAGS_USAGE;
    return f->action;
}

/* Reads a size as sscanf("%zu%c") does: exactly one conversion, nothing after. */
static bool parse_size(const char *s, size_t *out)
{
    char extra;
    return sscanf(s, "%zu%c", out, &extra) == 1;
}

/* Applies a flag without argument. */
static bq_flags_action_t apply_plain(bq_flags_t *f, char flag)
{
    switch (flag) {
    case 'h':
        return f->action = BQ_FLAGS_HELP;
    case 'v':
        return f->action = BQ_FLAGS_VERSION;
    case 'V':
        f->verbose++;
        break;
    case 'F':
        f->want_sync = false;
        break;
    case 'c':
        f->warnings |= BQ_FLAGS_WARN_C_REMOVED;
        break;
    case 'n':
        f->warnings |= BQ_FLAGS_WARN_N_REMOVED;
        break;
    default: {
        char name[3] = {'-', flag, '\0'};
        return fail(f, "unknown flag", name);
    }
    }
    return BQ_FLAGS_RUN;
}

/* Applies a flag that takes an argument. */
static bq_flags_action_t apply_arg(bq_flags_t *f, char flag, const char *arg)
{
    size_t size;

    switch (flag) {
    case 'p':
        f->port = arg;
        f->port_given = true;
        return BQ_FLAGS_RUN;
    case 'l':
        f->addr = arg;
        f->addr_given = true;
        return BQ_FLAGS_RUN;
    case 'u':
        f->user = arg;
        return BQ_FLAGS_RUN;
    case 'b':
        f->binlog_dir = arg;
        return BQ_FLAGS_RUN;
    }
    if (!parse_size(arg, &size))
        return fail(f, "invalid size", arg);
    if (flag == 'z') {
        if (size > BQ_FLAGS_MAX_JOB_SIZE) {
            size = BQ_FLAGS_MAX_JOB_SIZE;
            f->warnings |= BQ_FLAGS_WARN_Z_CLAMPED;
        }
        f->max_job_size = size;
    } else if (flag == 's') {
        f->binlog_size = size;
    } else {
        f->fsync_ms = size;
        f->want_sync = true;
    }
    return BQ_FLAGS_RUN;
}

/* Parses the long option argv[*i] (without its leading "--"). */
static bq_flags_action_t parse_long(bq_flags_t *f, int argc, char *const *argv, int *i)
{
    const char *opt = argv[*i] + 2;
    const char *eq = strchr(opt, '=');
    size_t len = eq ? (size_t)(eq - opt) : strlen(opt);

    for (size_t k = 0; k < sizeof long_args / sizeof long_args[0]; k++) {
        const long_arg_t *la = &long_args[k];
        if (strlen(la->name) != len || memcmp(la->name, opt, len) != 0)
            continue;
        if (!eq && *i + 1 >= argc)
            return fail(f, "flag requires an argument", argv[*i]);
        *(const char **)((char *)f + la->off) = eq ? eq + 1 : argv[++*i];
        return BQ_FLAGS_RUN;
    }
    for (size_t k = 0; k < sizeof long_opts / sizeof long_opts[0]; k++) {
        const long_opt_t *lo = &long_opts[k];
        if (strlen(lo->name) != len || memcmp(lo->name, opt, len) != 0)
            continue;
        if (lo->flag == 0) {
            if (eq)
                return fail(f, "flag does not take an argument", argv[*i]);
            *(bool *)((char *)f + lo->switch_off) = true;
            return BQ_FLAGS_RUN;
        }
        if (!takes_arg(lo->flag)) {
            if (eq)
                return fail(f, "flag does not take an argument", argv[*i]);
            return apply_plain(f, lo->flag);
        }
        if (eq)
            return apply_arg(f, lo->flag, eq + 1);
        if (*i + 1 >= argc)
            return fail(f, "flag requires an argument", argv[*i]);
        return apply_arg(f, lo->flag, argv[++*i]);
    }
    return fail(f, "unknown flag", argv[*i]);
}

/* Parses the short flag group argv[*i], e.g. "-VFVukr". */
static bq_flags_action_t parse_group(bq_flags_t *f, int argc, char *const *argv, int *i)
{
    for (const char *p = argv[*i] + 1; *p; p++) {
        bq_flags_action_t a;
        if (!takes_arg(*p)) {
            a = apply_plain(f, *p);
        } else if (p[1]) {
            return apply_arg(f, *p, p + 1);
        } else if (*i + 1 < argc) {
            return apply_arg(f, *p, argv[++*i]);
        } else {
            char name[3] = {'-', *p, '\0'};
            return fail(f, "flag requires an argument", name);
        }
        if (a != BQ_FLAGS_RUN)
            return a;
    }
    return BQ_FLAGS_RUN;
}

static void set_defaults(bq_flags_t *f)
{
    memset(f, 0, sizeof *f);
    f->action = BQ_FLAGS_RUN;
    f->port = BQ_FLAGS_DEFAULT_PORT;
    f->max_job_size = BQ_FLAGS_DEFAULT_JOB_SIZE;
    f->binlog_size = BQ_FLAGS_DEFAULT_BINLOG_SIZE;
    f->want_sync = true;
    f->fsync_ms = BQ_FLAGS_DEFAULT_FSYNC_MS;
}

/* The import options go together, and with -b (the destination). */
static bq_flags_action_t check_import(bq_flags_t *f)
{
    if (f->import_accept_prefix && !f->import_dir)
        return fail(f, "flag requires --import-beanstalkd", "--import-accept-prefix");
    if (!f->import_dir)
        return BQ_FLAGS_RUN;
    if (!f->binlog_dir)
        return fail(f, "flag requires -b DIR (the destination)", "--import-beanstalkd");
    return f->action = BQ_FLAGS_IMPORT;
}

bq_flags_action_t bq_flags_parse(bq_flags_t *f, int argc, char *const *argv)
{
    set_defaults(f);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bq_flags_action_t r;
        if (a[0] != '-' || a[1] == '\0')
            return fail(f, "unknown argument", a);
        if (a[1] == '-')
            r = parse_long(f, argc, argv, &i);
        else
            r = parse_group(f, argc, argv, &i);
        if (r != BQ_FLAGS_RUN)
            return r;
    }
    return check_import(f);
}

const char *bq_flags_warning(unsigned bit)
{
    for (size_t k = 0; k < sizeof warning_texts / sizeof warning_texts[0]; k++)
        if (bit == 1u << k)
            return warning_texts[k];
    return "unknown warning";
}

void bq_flags_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "Use: %s [OPTIONS]\n"
            "\n"
            "Options:\n"
            " -b DIR   write-ahead log directory (--binlog-dir)\n"
            " -f MS    fsync at most once every MS milliseconds (default is %d);\n"
            "          use -f0 for \"always fsync\" (--fsync-ms)\n"
            " -F       never fsync (--no-fsync)\n"
            " -l ADDR  listen on address (default is all addresses); unix:PATH for a\n"
            "          unix socket (--listen)\n"
            " -p PORT  listen on port (default is %s) (--port)\n"
            " -u USER  become user and group (--user)\n"
            " -z BYTES set the maximum job size in bytes (default is %d);\n"
            "          max allowed is %d bytes (--max-job-size)\n"
            " -s BYTES set the size of each write-ahead log file (default is %d)\n"
            "          (--binlog-size)\n"
            " --binlog-skip-corrupt\n"
            "          start even if a write-ahead log file is damaged before its\n"
            "          end: the damaged bytes are copied aside and skipped\n"
            " --import-beanstalkd SRC_DIR\n"
            "          import the jobs of a beanstalkd binlog directory (binlog.N,\n"
            "          format 7) into the write-ahead log of -b DIR, then exit\n"
            " --import-accept-prefix\n"
            "          with --import-beanstalkd: if SRC_DIR is damaged, import the\n"
            "          jobs of the records before the damage instead of nothing\n"
            " -v       show version information (--version)\n"
            " -V       increase verbosity (--verbose)\n"
            " -h       show this help (--help)\n",
            prog, BQ_FLAGS_DEFAULT_FSYNC_MS, BQ_FLAGS_DEFAULT_PORT, BQ_FLAGS_DEFAULT_JOB_SIZE,
            BQ_FLAGS_MAX_JOB_SIZE, BQ_FLAGS_DEFAULT_BINLOG_SIZE);
}
