/* Integration tests for tubes over TCP: use, watch, ignore, the list-*
 * commands with their exact YAML bodies and order, tube name rules, and
 * reserve across several watched tubes. Ports testserv.c's multi_tube,
 * list_tube, underscore, use_tube_long and longest_command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tests/integration/itest.h"

#define NAME_200                                                                                   \
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890"  \
    "1234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901"  \
    "234567890123456789"

/* Sends cmd and asserts the OK body equals want exactly. */
static void expect_list(int fd, const char *cmd, const char *want)
{
    char *body = it_ok(fd, cmd);
    assert_string_equal(body, want);
    free(body);
}

/* testserv: multi_tube. Reserve picks the most urgent job of all watched
 * tubes. */
static void reserve_takes_most_urgent_of_watched_tubes(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "use abc\r\n", "USING abc\r\n");
    it_put(t->fd, "999999 0 0", "", 1);
    it_cmd(t->fd, "use def\r\n", "USING def\r\n");
    it_put(t->fd, "99 0 0", "", 2);
    it_cmd(t->fd, "watch abc\r\n", "WATCHING 2\r\n");
    it_cmd(t->fd, "watch def\r\n", "WATCHING 3\r\n");
    bqt_sends(t->fd, "reserve\r\n");
    it_expect_job(t->fd, "RESERVED", 2, "");
}

/* testserv: list_tube. Exact list bodies, ignore, NOT_IGNORED. */
static void list_commands_show_used_and_watched_tubes(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "watch w\r\n", "WATCHING 2\r\n");
    it_cmd(t->fd, "use u\r\n", "USING u\r\n");
    expect_list(t->fd, "list-tubes\r\n", "---\n- default\n- w\n- u\n");
    it_cmd(t->fd, "list-tube-used\r\n", "USING u\r\n");
    expect_list(t->fd, "list-tubes-watched\r\n", "---\n- default\n- w\n");
    it_cmd(t->fd, "ignore default\r\n", "WATCHING 1\r\n");
    expect_list(t->fd, "list-tubes-watched\r\n", "---\n- w\n");
    it_cmd(t->fd, "ignore w\r\n", "NOT_IGNORED\r\n");
}

/* A freed tube leaves list-tubes with the last tube moved into its place. */
static void freed_tube_is_replaced_by_the_last_in_list(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "watch a\r\n", "WATCHING 2\r\n");
    it_cmd(t->fd, "watch b\r\n", "WATCHING 3\r\n");
    it_cmd(t->fd, "watch c\r\n", "WATCHING 4\r\n");
    expect_list(t->fd, "list-tubes\r\n", "---\n- default\n- a\n- b\n- c\n");
    it_cmd(t->fd, "ignore a\r\n", "WATCHING 3\r\n");
    expect_list(t->fd, "list-tubes\r\n", "---\n- default\n- c\n- b\n");
    expect_list(t->fd, "list-tubes-watched\r\n", "---\n- default\n- c\n- b\n");
    it_cmd(t->fd, "stats-tube a\r\n", "NOT_FOUND\r\n");
}

/* Ignoring a tube that is not watched changes nothing and creates nothing. */
static void ignore_unwatched_tube_keeps_count(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "ignore nosuch\r\n", "WATCHING 1\r\n");
    expect_list(t->fd, "list-tubes\r\n", "---\n- default\n");
}

/* testserv: underscore. */
static void underscore_in_tube_name_is_valid(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "use x_y\r\n", "USING x_y\r\n");
}

/* All allowed name characters; a leading '-', '*', a double space or a
 * trailing space are BAD_FORMAT. */
static void tube_name_characters(void **state)
{
    it_ctx_t *t = *state;
    it_cmd(t->fd, "use a+b/c;d.e$f_g(h)-\r\n", "USING a+b/c;d.e$f_g(h)-\r\n");
    it_cmd(t->fd, "use -a\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "watch a*\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "use  foo\r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "watch foo \r\n", "BAD_FORMAT\r\n");
    it_cmd(t->fd, "list-tube-used\r\n", "USING a+b/c;d.e$f_g(h)-\r\n");
}

/* testserv: use_tube_long. 200 characters are allowed, 201 are not. */
static void tube_name_of_201_chars_is_bad_format(void **state)
{
    it_ctx_t *t = *state;
    assert_int_equal(strlen(NAME_200), 200);
    it_cmd(t->fd, "use " NAME_200 "\r\n", "USING " NAME_200 "\r\n");
    it_cmd(t->fd, "use " NAME_200 "Z\r\n", "BAD_FORMAT\r\n");
}

/* testserv: longest_command. The 224-byte pause-tube line is accepted. */
static void longest_command_is_accepted(void **state)
{
    it_ctx_t *t = *state;
    assert_int_equal(strlen("pause-tube " NAME_200 " 4294967295\r\n"), 224);
    it_cmd(t->fd, "use " NAME_200 "\r\n", "USING " NAME_200 "\r\n");
    it_cmd(t->fd, "pause-tube " NAME_200 " 4294967295\r\n", "PAUSED\r\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        IT_TEST(reserve_takes_most_urgent_of_watched_tubes),
        IT_TEST(list_commands_show_used_and_watched_tubes),
        IT_TEST(freed_tube_is_replaced_by_the_last_in_list),
        IT_TEST(ignore_unwatched_tube_keeps_count),
        IT_TEST(underscore_in_tube_name_is_valid),
        IT_TEST(tube_name_characters),
        IT_TEST(tube_name_of_201_chars_is_bad_format),
        IT_TEST(longest_command_is_accepted),
    };
    return cmocka_run_group_tests_name("tubes", tests, NULL, NULL);
}
