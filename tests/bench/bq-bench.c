/* bq-bench: a load generator for the beanstalk protocol. It parses the
 * command line, raises the open-file limit, lets the engine in bench_run.c
 * open and prepare the connections, runs the chosen workload (after an
 * unmeasured fill for `reserve -n`), and prints a human-readable summary and
 * one machine-readable RESULT line. The exit status is 0 only when every
 * reply was the expected one and the run measured something. */
#include "bench_run.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct opts_s {
    bq_bench_cfg_t cfg;
    bq_workload_t workload;
    const char *workload_name;
    uint64_t jobs;
    double duration_s;
    double warmup_s; /* < 0: default */
} opts_t;

static const char *const workload_names[] = {"put", "cycle", "reserve", "fill", "idle"};

static void usage(FILE *out)
{
    fputs("usage: bq-bench [options]\n"
          "  -h HOST   server address (127.0.0.1)\n"
          "  -p PORT   server port (11300)\n"
          "  -c N      connections (50)\n"
          "  -P N      pipeline depth: commands in flight per connection (1)\n"
          "  -n N      jobs to run (put/cycle/reserve/fill); a job is one put, one\n"
          "            put+reserve+delete, or one reserve+delete\n"
          "  -d SEC    run for SEC seconds instead (default 5; idle: hold time)\n"
          "  -s BYTES  job body size (100)\n"
          "  -w NAME   workload (put):\n"
          "            put      puts only\n"
          "            cycle    put + reserve-with-timeout 0 sent together, then\n"
          "                     delete <id> on RESERVED; up to max(P,2)/2 jobs in\n"
          "                     flight per connection; TIMED_OUT is an error\n"
          "            reserve  reserve-with-timeout 0 + delete until the tube is\n"
          "                     empty; with -n, first puts N jobs (not measured)\n"
          "            fill     puts -n jobs and exits (for memory measurement)\n"
          "            idle     opens -c connections, verifies each, holds them -d\n"
          "                     seconds, verifies them again; prints IDLE_READY when\n"
          "                     all are open\n"
          "  -t N      extra tubes (tube<i>) every worker watches; jobs stay in default\n"
          "  -T N      extra tubes (xtube<i>) watched by one separate idle connection\n"
          "  -W SEC    warm-up excluded from the results (default: 10 % of -n jobs,\n"
          "            or min(1 s, 10 % of -d))\n"
          "  --help    this text\n"
          "Latency is per command, from writing it to reading its whole reply, in us.\n"
          "Output ends with: RESULT workload=... ops_per_s=... p50_us=... p99_us=...\n",
          out);
}

static bool parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static bool parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v >= 0) || v > 1e6)
        return false;
    *out = v;
    return true;
}

static bool set_workload(opts_t *o, const char *name)
{
    for (size_t i = 0; i < sizeof(workload_names) / sizeof(workload_names[0]); i++) {
        if (strcmp(name, workload_names[i]) == 0) {
            o->workload = (bq_workload_t)i;
            o->workload_name = workload_names[i];
            return true;
        }
    }
    return false;
}

static bool parse_option(opts_t *o, int opt, const char *arg)
{
    long v;
    switch (opt) {
    case 'h':
        o->cfg.host = arg;
        return true;
    case 'p':
        o->cfg.port = arg;
        return parse_long(arg, 1, 65535, &v);
    case 'c':
        return parse_long(arg, 1, 1000000, &v) && (o->cfg.conns = (int)v) > 0;
    case 'P':
        return parse_long(arg, 1, 65536, &v) && (o->cfg.depth = (int)v) > 0;
    case 'n':
        return parse_long(arg, 1, 1L << 40, &v) && (o->jobs = (uint64_t)v) > 0;
    case 'd':
        return parse_seconds(arg, &o->duration_s);
    case 's':
        return parse_long(arg, 0, 1L << 30, &v) && ((o->cfg.body = (size_t)v), true);
    case 'w':
        return set_workload(o, arg);
    case 't':
        return parse_long(arg, 0, 1000000, &v) && ((o->cfg.tubes = (int)v), true);
    case 'T':
        return parse_long(arg, 0, 1000000, &v) && ((o->cfg.idle_tubes = (int)v), true);
    case 'W':
        return parse_seconds(arg, &o->warmup_s);
    default:
        return false;
    }
}

/* Returns 0, 1 for --help, or -1 on a bad command line. */
static int parse_args(opts_t *o, int argc, char **argv)
{
    *o = (opts_t){
        .cfg = {.host = "127.0.0.1", .port = "11300", .conns = 50, .depth = 1, .body = 100},
        .workload = BQ_W_PUT,
        .workload_name = "put",
        .duration_s = -1,
        .warmup_s = -1};
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0)
            return 1;
    int opt;
    while ((opt = getopt(argc, argv, "h:p:c:P:n:d:s:w:t:T:W:")) != -1) {
        if (!parse_option(o, opt, optarg)) {
            if (opt != '?')
                fprintf(stderr, "bq-bench: bad value for -%c: %s\n", opt, optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bq-bench: unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    if (o->workload == BQ_W_FILL && o->jobs == 0) {
        fprintf(stderr, "bq-bench: -w fill needs -n\n");
        return -1;
    }
    if (o->jobs > 0 && o->duration_s >= 0 && o->workload != BQ_W_IDLE) {
        fprintf(stderr, "bq-bench: give -n or -d, not both\n");
        return -1;
    }
    if (o->duration_s < 0)
        o->duration_s = o->jobs > 0 ? 0 : 5;
    return 0;
}

/* Raises the soft open-file limit to the hard one so that -c 10000 works. */
static void raise_nofile(int needed)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && (rlim_t)needed > rl.rlim_cur)
        fprintf(stderr, "bq-bench: warning: %d descriptors needed, limit is %llu\n", needed,
                (unsigned long long)rl.rlim_cur);
}

static double us(uint64_t ns)
{
    return (double)ns / 1000.0;
}

static void print_latency(const bq_bench_result_t *r)
{
    static const char *const names[BQ_CMD_KINDS] = {"put", "reserve", "delete", "all"};
    printf("latency (us)        count       p50       p90       p99     p99.9       max\n");
    for (int k = 0; k < BQ_CMD_KINDS; k++) {
        const bq_hist_t *h = &r->hist[k];
        if (h->count == 0)
            continue;
        printf("  %-8s %12llu %9.1f %9.1f %9.1f %9.1f %9.1f\n", names[k],
               (unsigned long long)h->count, us(bq_hist_quantile(h, 0.50)),
               us(bq_hist_quantile(h, 0.90)), us(bq_hist_quantile(h, 0.99)),
               us(bq_hist_quantile(h, 0.999)), us(h->max_ns));
    }
}

static void print_result(const opts_t *o, const bq_bench_result_t *r, uint64_t errors,
                         double setup_s)
{
    double ops_s = r->seconds > 0 ? (double)r->ops / r->seconds : 0;
    double jobs_s = r->seconds > 0 ? (double)r->jobs / r->seconds : 0;
    printf("measured %.3f s: %llu commands, %llu jobs (%llu in the whole run), errors %llu\n",
           r->seconds, (unsigned long long)r->ops, (unsigned long long)r->jobs,
           (unsigned long long)r->jobs_total, (unsigned long long)errors);
    printf("throughput: %.0f commands/s, %.0f jobs/s; load generator used %.0f %% of a CPU\n",
           ops_s, jobs_s, r->client_cpu * 100);
    print_latency(r);
    const bq_hist_t *h = &r->hist[BQ_CMD_ALL];
    printf("RESULT workload=%s conns=%d depth=%d size=%zu tubes=%d idle_tubes=%d jobs=%llu "
           "ops=%llu seconds=%.3f ops_per_s=%.0f jobs_per_s=%.0f p50_us=%.1f p90_us=%.1f "
           "p99_us=%.1f p999_us=%.1f max_us=%.1f timed_out=%llu setup_s=%.3f client_cpu=%.2f "
           "errors=%llu\n",
           o->workload_name, o->cfg.conns, o->cfg.depth, o->cfg.body, o->cfg.tubes,
           o->cfg.idle_tubes, (unsigned long long)r->jobs_total, (unsigned long long)r->ops,
           r->seconds, ops_s, jobs_s, us(bq_hist_quantile(h, 0.50)), us(bq_hist_quantile(h, 0.90)),
           us(bq_hist_quantile(h, 0.99)), us(bq_hist_quantile(h, 0.999)), us(h->max_ns),
           (unsigned long long)r->timed_out, setup_s, r->client_cpu, (unsigned long long)errors);
}

static int run_idle(const opts_t *o, bq_bench_t *b, int ready, double setup_s)
{
    printf("IDLE_READY verified=%d of %d in %.3f s\n", ready, o->cfg.conns, setup_s);
    fflush(stdout);
    int alive = bq_bench_hold(b, o->duration_s);
    uint64_t errors = bq_bench_errors(b);
    printf("held %.1f s; %d of %d connections answered again\n", o->duration_s, alive,
           o->cfg.conns);
    printf("RESULT workload=idle conns=%d verified=%d verified_end=%d connect_s=%.3f "
           "hold_s=%.1f errors=%llu\n",
           o->cfg.conns, ready, alive, setup_s, o->duration_s, (unsigned long long)errors);
    return errors == 0 && alive == o->cfg.conns ? 0 : 1;
}

static int run_load(const opts_t *o, bq_bench_t *b, double setup_s)
{
    static bq_bench_result_t res;
    if (o->workload == BQ_W_RESERVE && o->jobs > 0) {
        bq_bench_phase_t fill = {.workload = BQ_W_FILL, .jobs = o->jobs, .warmup_s = 0};
        bq_bench_run(b, &fill, &res);
        printf("prefilled %llu jobs\n", (unsigned long long)res.jobs_total);
    }
    bq_bench_phase_t ph = {.workload = o->workload,
                           .jobs = o->jobs,
                           .duration_s = o->duration_s,
                           .warmup_s = o->warmup_s,
                           .warmup_frac = 0.1};
    if (o->workload == BQ_W_FILL)
        ph.warmup_s = 0;
    else if (o->warmup_s < 0 && o->jobs == 0)
        ph.warmup_s = o->duration_s * 0.1 < 1.0 ? o->duration_s * 0.1 : 1.0;
    if (bq_bench_run(b, &ph, &res) < 0) {
        fprintf(stderr, "bq-bench: no connection is ready\n");
        return 1;
    }
    uint64_t errors = bq_bench_errors(b);
    if (o->jobs > 0 && res.jobs_total < o->jobs) {
        fprintf(stderr, "bq-bench: error: only %llu of %llu jobs finished\n",
                (unsigned long long)res.jobs_total, (unsigned long long)o->jobs);
        errors++;
    }
    print_result(o, &res, errors, setup_s);
    return errors == 0 && res.ops > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse_args(&o, argc, argv);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    raise_nofile(o.cfg.conns + 32);
    bq_bench_t *b = bq_bench_new(&o.cfg);
    if (b == NULL)
        return 1;
    printf("bq-bench: workload=%s server=%s:%s conns=%d depth=%d size=%zu tubes=%d "
           "idle_tubes=%d\n",
           o.workload_name, o.cfg.host, o.cfg.port, o.cfg.conns, o.cfg.depth, o.cfg.body,
           o.cfg.tubes, o.cfg.idle_tubes);
    int64_t t0 = bq_bench_now_ns();
    int ready = bq_bench_setup(b);
    double setup_s = (double)(bq_bench_now_ns() - t0) / 1e9;
    printf("setup: %d of %d connections ready in %.3f s\n", ready, o.cfg.conns, setup_s);
    fflush(stdout);
    if (o.workload == BQ_W_IDLE)
        rc = run_idle(&o, b, ready, setup_s);
    else
        rc = ready > 0 ? run_load(&o, b, setup_s) : 1;
    bq_bench_free(b);
    return rc;
}
