/* Unit tests of beanstalkctl's status rendering (node/ctl/ctl_status.c and
 * the table printer ctl_table.c): the table's exact layout for a primary, a
 * standby and an unreachable node; fields that are missing or of the wrong
 * type; answers that are not a status document (HTTP errors, not JSON, not
 * an object); the primary's standby section; the --json document read back;
 * the lag taken from the primary of the highest epoch; and the search for
 * the one primary that switchover needs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/ctl/ctl_status.h"
#include "node/ctl/ctl_table.h"

#define U1 "http://10.0.0.1:11380"
#define U2 "http://10.0.0.2:11380"
#define U3 "http://10.0.0.3:11380"

static const char primary_doc[] =
    "{\"node_id\":\"n1\",\"cluster_id\":\"beanstalkd-ha\",\"role\":\"primary\",\"epoch\":5,"
    "\"last_lsn\":123,\"durable_lsn\":123,\"commit_lsn\":120,\"primary\":\"n1\","
    "\"failover\":\"auto\",\"fenced\":false,\"ready\":true,"
    "\"sync\":{\"standbys\":1,\"fallback\":\"refuse\",\"state\":\"sync\",\"in_sync\":1},"
    "\"standbys\":[{\"node_id\":\"n2\",\"state\":\"streaming\",\"address\":\"127.0.0.1:5555\","
    "\"sent_lsn\":123,\"written_lsn\":121,\"flushed_lsn\":120,\"applied_lsn\":119,"
    "\"lag_records\":4,\"lag_bytes\":512,\"lag_seconds\":0.0123,\"clock_offset_seconds\":0.001},"
    "{\"node_id\":\"n3\",\"state\":\"disconnected\"}],"
    "\"peers\":[{\"node_id\":\"n2\",\"address\":\"127.0.0.1:11311\"}]}";

static const char standby_doc[] =
    "{\"node_id\":\"n2\",\"role\":\"standby\",\"epoch\":5,\"last_lsn\":121,\"commit_lsn\":120,"
    "\"primary\":\"n1\",\"ready\":true}";

/* Renders nodes with fn into a new string (free with free). */
static char *render(int (*fn)(FILE *, const bq_ctl_node_t *, size_t), const bq_ctl_node_t *nodes,
                    size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(fn(f, nodes, n), 0);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void set_ok(bq_ctl_node_t *n, const char *url, const char *body)
{
    assert_int_equal(bq_ctl_status_set(n, url, NULL, 200, body), 0);
    assert_string_equal(n->error, "");
}

static void clear(bq_ctl_node_t *nodes, size_t n)
{
    for (size_t k = 0; k < n; k++)
        bq_ctl_status_clear(&nodes[k]);
}

static void table_cluster_matches_layout(void **state)
{
    (void)state;
    bq_ctl_node_t nodes[3];
    set_ok(&nodes[0], U1, primary_doc);
    set_ok(&nodes[1], U2, standby_doc);
    assert_int_equal(bq_ctl_status_set(&nodes[2], U3, "Connection refused", 0, NULL), -1);
    char *text = render(bq_ctl_status_table, nodes, 3);
    /* clang-format off */
    assert_string_equal(text,
        "NODE  ROLE     EPOCH  LAST-LSN  COMMIT-LSN  PRIMARY  SYNC                        LAG(records)  READY  URL\n"
        "n1    primary  5      123       120         n1       sync (1 in sync, 1 needed)  -             yes    " U1 "\n"
        "n2    standby  5      121       120         n1       -                           4             yes    " U2 "\n"
        U3 "  unreachable: Connection refused\n"
        "\n"
        "standbys of n1:\n"
        "  NAME  STATE         WRITTEN  FLUSHED  APPLIED  LAG-RECORDS  LAG-BYTES  LAG-SECONDS\n"
        "  n2    streaming     121      120      119      4            512        0.012\n"
        "  n3    disconnected  -        -        -        -            -          -\n");
    /* clang-format on */
    free(text);
    clear(nodes, 3);
}

static void table_missing_or_mistyped_fields_print_dash(void **state)
{
    (void)state;
    bq_ctl_node_t nodes[2];
    set_ok(&nodes[0], U1, "{}");
    set_ok(&nodes[1], U2,
           "{\"node_id\":\"n2\",\"role\":7,\"epoch\":\"five\",\"last_lsn\":null,"
           "\"primary\":null,\"ready\":\"yes\",\"sync\":{\"in_sync\":1},\"standbys\":\"x\"}");
    char *text = render(bq_ctl_status_table, nodes, 2);
    assert_string_equal(
        text,
        "NODE                   ROLE  EPOCH  LAST-LSN  COMMIT-LSN  PRIMARY  SYNC  LAG(records)  "
        "READY  URL\n" U1
        "  -     -      -         -           -        -     -             -      " U1 "\n"
        "n2                     -     -      -         -           -        -     -             "
        "-      " U2 "\n");
    free(text);
    clear(nodes, 2);
}

static void set_rejects_what_is_not_a_status_document(void **state)
{
    (void)state;
    bq_ctl_node_t n;
    assert_int_equal(bq_ctl_status_set(&n, U1, NULL, 503, "not ready: catching up\r\nmore"), -1);
    assert_null(n.status);
    assert_string_equal(n.error, "bad answer: HTTP 503: not ready: catching up");
    assert_int_equal(bq_ctl_status_set(&n, U1, NULL, 404, ""), -1);
    assert_string_equal(n.error, "bad answer: HTTP 404");
    assert_int_equal(bq_ctl_status_set(&n, U1, NULL, 200, "hello"), -1);
    assert_string_equal(n.error, "bad answer: /status is not a JSON object");
    assert_int_equal(bq_ctl_status_set(&n, U1, NULL, 200, "[1,2]"), -1);
    assert_null(n.status);
    assert_int_equal(bq_ctl_status_set(&n, U1, NULL, 200, NULL), -1);
    assert_int_equal(bq_ctl_status_set(&n, U1, "timed out", 0, NULL), -1);
    assert_string_equal(n.error, "unreachable: timed out");
    assert_ptr_equal(n.url, U1);
}

static void table_only_errors_keeps_header(void **state)
{
    (void)state;
    bq_ctl_node_t nodes[2];
    bq_ctl_status_set(&nodes[0], U1, "Connection refused", 0, NULL);
    bq_ctl_status_set(&nodes[1], U2, NULL, 500, "boom\n");
    char *text = render(bq_ctl_status_table, nodes, 2);
    assert_string_equal(text,
                        "NODE  ROLE  EPOCH  LAST-LSN  COMMIT-LSN  PRIMARY  SYNC  LAG(records)  "
                        "READY  URL\n" U1 "  unreachable: Connection refused\n" U2
                        "  bad answer: HTTP 500: boom\n");
    free(text);
}

static void table_fenced_primary_without_standbys(void **state)
{
    (void)state;
    bq_ctl_node_t n;
    set_ok(&n, U1,
           "{\"node_id\":\"n1\",\"role\":\"primary\",\"fenced\":true,\"ready\":false,"
           "\"epoch\":7,\"primary\":\"n1\",\"sync\":{\"state\":\"refusing\"},\"standbys\":[]}");
    char *text = render(bq_ctl_status_table, &n, 1);
    assert_non_null(strstr(text, "\nn1    primary(fenced)  7      -         -           n1       "
                                 "refusing  -             no     " U1 "\n"));
    assert_non_null(strstr(text, "\n\nstandbys of n1: none\n"));
    free(text);
    clear(&n, 1);
}

static void table_lag_from_primary_of_highest_epoch(void **state)
{
    (void)state;
    bq_ctl_node_t nodes[3];
    set_ok(&nodes[0], U1,
           "{\"node_id\":\"old\",\"role\":\"primary\",\"epoch\":4,"
           "\"standbys\":[{\"node_id\":\"n2\",\"lag_records\":99}]}");
    set_ok(&nodes[1], U2, "{\"node_id\":\"n2\",\"role\":\"standby\"}");
    set_ok(&nodes[2], U3,
           "{\"node_id\":\"new\",\"role\":\"primary\",\"epoch\":5,"
           "\"standbys\":[{\"node_id\":\"n2\",\"lag_records\":7,\"lag_seconds\":2}]}");
    char *text = render(bq_ctl_status_table, nodes, 3);
    assert_non_null(
        strstr(text, "\nn2    standby  -      -         -           -        -     7 "));
    assert_non_null(strstr(text, "\nstandbys of old:\n"));
    assert_non_null(strstr(text, "\nstandbys of new:\n"));
    assert_non_null(strstr(text,
                           "  n2    -      -        -        -        7            -          "
                           "2.000\n"));
    free(text);
    clear(nodes, 3);
}

static void json_reads_back(void **state)
{
    (void)state;
    bq_ctl_node_t nodes[2];
    set_ok(&nodes[0], U1, primary_doc);
    bq_ctl_status_set(&nodes[1], U2, "Connection refused", 0, NULL);
    char *text = render(bq_ctl_status_json, nodes, 2);
    assert_int_equal(text[strlen(text) - 1], '\n');
    cJSON *doc = cJSON_Parse(text);
    assert_non_null(doc);
    cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
    assert_int_equal(cJSON_GetArraySize(list), 2);
    cJSON *a = cJSON_GetArrayItem(list, 0), *b = cJSON_GetArrayItem(list, 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(a, "url")->valuestring, U1);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "error")));
    /* The node's document is passed through whole, fields beanstalkctl does not show included. */
    assert_true(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "status"), nodes[0].status, 1));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(b, "url")->valuestring, U2);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(b, "status")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(b, "error")->valuestring,
                        "unreachable: Connection refused");
    cJSON_Delete(doc);
    free(text);
    clear(nodes, 2);
}

static void json_of_no_nodes_is_an_empty_list(void **state)
{
    (void)state;
    char *text = render(bq_ctl_status_json, NULL, 0);
    assert_string_equal(text, "{\"nodes\":[]}\n");
    free(text);
}

static void primary_is_the_only_node_saying_so(void **state)
{
    (void)state;
    bq_ctl_node_t nodes[3];
    char err[256] = "";
    set_ok(&nodes[0], U1, standby_doc);
    bq_ctl_status_set(&nodes[1], U2, "Connection refused", 0, NULL);
    set_ok(&nodes[2], U3, primary_doc);
    assert_int_equal(bq_ctl_status_primary(nodes, 3, err, sizeof err), 2);
    clear(nodes, 3);
}

static void primary_none_or_several_is_an_error(void **state)
{
    (void)state;
    bq_ctl_node_t nodes[3];
    char err[256] = "";
    set_ok(&nodes[0], U1, standby_doc);
    bq_ctl_status_set(&nodes[1], U2, "Connection refused", 0, NULL);
    set_ok(&nodes[2], U3, "{\"role\":\"candidate\"}");
    assert_int_equal(bq_ctl_status_primary(nodes, 3, err, sizeof err), -1);
    assert_string_equal(err, "no primary among the 2 node(s) that answered (of 3)");
    clear(nodes, 3);
    set_ok(&nodes[0], U1, primary_doc);
    set_ok(&nodes[1], U2, "{\"role\":\"primary\"}");
    set_ok(&nodes[2], U3, standby_doc);
    assert_int_equal(bq_ctl_status_primary(nodes, 3, err, sizeof err), -1);
    assert_string_equal(err, "2 nodes say they are primary: n1, " U2);
    clear(nodes, 3);
}

static void table_rows_align_and_notes_do_not_widen(void **state)
{
    (void)state;
    const char *header[] = {"A", "BB", "C"};
    bq_ctl_table_t *t = bq_ctl_table_new(3, header);
    assert_non_null(t);
    assert_int_equal(bq_ctl_table_row(t, (const char *[]){"xxx", NULL, "z"}), 0);
    assert_int_equal(bq_ctl_table_note(t, "a-very-long-first-cell", "text"), 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    bq_ctl_table_print(t, f, "> ");
    fclose(f);
    assert_string_equal(text, "> A    BB  C\n> xxx  -   z\n> a-very-long-first-cell  text\n");
    free(text);
    bq_ctl_table_free(t);
    assert_null(bq_ctl_table_new(0, header));
    assert_null(bq_ctl_table_new(BQ_CTL_TABLE_MAX_COLS + 1, header));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_cluster_matches_layout),
        cmocka_unit_test(table_missing_or_mistyped_fields_print_dash),
        cmocka_unit_test(set_rejects_what_is_not_a_status_document),
        cmocka_unit_test(table_only_errors_keeps_header),
        cmocka_unit_test(table_fenced_primary_without_standbys),
        cmocka_unit_test(table_lag_from_primary_of_highest_epoch),
        cmocka_unit_test(json_reads_back),
        cmocka_unit_test(json_of_no_nodes_is_an_empty_list),
        cmocka_unit_test(primary_is_the_only_node_saying_so),
        cmocka_unit_test(primary_none_or_several_is_an_error),
        cmocka_unit_test(table_rows_align_and_notes_do_not_widen),
    };
    return cmocka_run_group_tests_name("ctl_status", tests, NULL, NULL);
}
