/* Name resolution on the loop (replication/resolve.h), against the test's
 * DNS server (tests/support/fakedns.h, through BQ_TEST_DNS_SERVERS): an
 * answer, a numeric address, a lookup never answered ends at its deadline,
 * a cancelled one never calls back, and none leaves a handle or a lookup
 * behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <uv.h>

#include "replication/resolve.h"
#include "tests/support/fakedns.h"
#include "tests/unit/uv_until.h"

#define NAME "peer.resolve.test" /* not in /etc/hosts: the DNS server answers it */
#define MANY 64
#define DEADLINE_MS 10000

typedef struct result {
    int calls, status;
    struct addrinfo *addrs;
} result_t;

typedef struct fx {
    uv_loop_t loop;
    bqt_dns_t *dns;
} fx_t;

static void on_result(void *arg, int status, struct addrinfo *addrs)
{
    result_t *r = arg;
    r->calls++;
    r->status = status;
    r->addrs = addrs;
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f || uv_loop_init(&f->loop) != 0 || !(f->dns = bqt_dns_start()))
        return -1;
    char servers[32];
    snprintf(servers, sizeof servers, "127.0.0.1:%d", bqt_dns_port(f->dns));
    setenv("BQ_TEST_DNS_SERVERS", servers, 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    uv_run(&f->loop, UV_RUN_DEFAULT); /* closes what the lookups left */
    assert_int_equal(bq_resolve_live(), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    bqt_dns_stop(f->dns);
    free(f);
    return 0;
}

static bool called(void *arg)
{
    return ((const result_t *)arg)->calls > 0;
}

/* Runs the loop until r's callback ran; fails the test after DEADLINE_MS. */
static void run_until(fx_t *f, result_t *r)
{
    uvt_run_until(&f->loop, called, r, DEADLINE_MS, "the lookup's callback");
}

/* Runs the loop until the DNS server has seen n queries, or DEADLINE_MS. */
static void wait_queries(fx_t *f, size_t n)
{
    uint64_t end = uv_hrtime() + (uint64_t)DEADLINE_MS * 1000000u;
    while (bqt_dns_queries(f->dns) < n && uv_hrtime() < end)
        uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_true(bqt_dns_queries(f->dns) >= n);
}

/* The first IPv4 address of r and its port, as "a.b.c.d:port". */
static const char *first_v4(const result_t *r, char *buf, size_t cap)
{
    for (const struct addrinfo *a = r->addrs; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)a->ai_addr;
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
            snprintf(buf, cap, "%s:%d", ip, ntohs(in->sin_port));
            return buf;
        }
    return "";
}

static void name_is_answered(void **state)
{
    fx_t *f = *state;
    result_t r = {0};
    bq_resolve_t *q;
    char buf[64];
    assert_int_equal(bq_resolve_start(&f->loop, NAME, "11300", 5000, on_result, &r, &q), 0);
    assert_int_equal(r.calls, 0); /* never from within start */
    run_until(f, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(first_v4(&r, buf, sizeof buf), "127.0.0.1:11300");
    assert_true(bqt_dns_queries(f->dns) > 0);
    assert_int_equal(r.addrs->ai_socktype, SOCK_STREAM);
    bq_resolve_free(r.addrs);
}

static void numeric_address_needs_no_server(void **state)
{
    fx_t *f = *state;
    result_t r = {0};
    bq_resolve_t *q;
    char buf[64];
    assert_int_equal(bq_resolve_start(&f->loop, "10.1.2.3", "7", 5000, on_result, &r, &q), 0);
    assert_int_equal(r.calls, 0);
    run_until(f, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(first_v4(&r, buf, sizeof buf), "10.1.2.3:7");
    assert_int_equal(bqt_dns_queries(f->dns), 0);
    bq_resolve_free(r.addrs);
}

static void unanswered_lookup_ends_at_its_deadline(void **state)
{
    fx_t *f = *state;
    result_t r = {0};
    bq_resolve_t *q;
    bqt_dns_hold(f->dns, true);
    uv_update_time(&f->loop);
    uint64_t t0 = uv_now(&f->loop);
    assert_int_equal(bq_resolve_start(&f->loop, NAME, "1", 300, on_result, &r, &q), 0);
    run_until(f, &r);
    uint64_t took = uv_now(&f->loop) - t0;
    assert_int_equal(r.status, UV_ETIMEDOUT);
    assert_null(r.addrs);
    assert_true(took >= 300 && took < 3000);
    assert_true(bqt_dns_queries(f->dns) > 0); /* asked, never answered */
    bqt_dns_hold(f->dns, false);
}

static void cancelled_lookup_never_calls_back(void **state)
{
    fx_t *f = *state;
    result_t r = {0};
    bq_resolve_t *q;
    bqt_dns_hold(f->dns, true);
    assert_int_equal(bq_resolve_start(&f->loop, NAME, "1", 5000, on_result, &r, &q), 0);
    wait_queries(f, 1); /* the query is out */
    bq_resolve_cancel(q);
    bqt_dns_hold(f->dns, false); /* the answer arrives at a closed socket */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(r.calls, 0);
    assert_int_equal(bq_resolve_live(), 0);
}

static void many_held_lookups_all_answered(void **state)
{
    fx_t *f = *state;
    result_t r[MANY] = {{0}};
    bq_resolve_t *q;
    int calls = 0;
    bqt_dns_hold(f->dns, true);
    for (int i = 0; i < MANY; i++)
        assert_int_equal(bq_resolve_start(&f->loop, NAME, "2", 5000, on_result, &r[i], &q), 0);
    assert_int_equal(bq_resolve_live(), MANY);
    wait_queries(f, MANY); /* every lookup asked */
    bqt_dns_hold(f->dns, false);
    for (int i = 0; i < MANY; i++) {
        run_until(f, &r[i]);
        calls += r[i].calls;
        assert_int_equal(r[i].status, 0);
        bq_resolve_free(r[i].addrs);
    }
    assert_int_equal(calls, MANY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(name_is_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(numeric_address_needs_no_server, setup, teardown),
        cmocka_unit_test_setup_teardown(unanswered_lookup_ends_at_its_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(cancelled_lookup_never_calls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(many_held_lookups_all_answered, setup, teardown),
    };
    return cmocka_run_group_tests_name("repl_resolve", tests, NULL, NULL);
}
