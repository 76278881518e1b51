/*
 * crlite's own test: the runner must report what Criterion would. The `pass` suite must
 * pass; every test of the `fail` suite must be reported failed, each in its own way
 * (tests/CMakeLists.txt matches the runner's lines). Built and run only where crlite is
 * the runner.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

static int g_suite_init_ran;

static void pass_init(void)
{
    g_suite_init_ran = 1;
}

TestSuite(pass, .init = pass_init);

Test(pass, the_suite_init_ran_and_the_current_test_is_named)
{
    cr_assert_eq(g_suite_init_ran, 1);
    cr_assert_str_eq(criterion_current_test->name,
                     "the_suite_init_ran_and_the_current_test_is_named");
    cr_assert_str_eq(criterion_current_test->category, "pass");
}

Test(pass, every_macro_accepts_what_holds, .timeout = 10)
{
    int one = 1;
    const char *s = "x";
    cr_assert(one);
    cr_assert_not(!one, "with %s", "a message");
    cr_assert_null(NULL);
    cr_assert_not_null(s);
    cr_assert_eq(one, 1);
    cr_assert_neq(one, 2);
    cr_assert_lt(one, 2);
    cr_assert_leq(one, 1);
    cr_assert_gt(one, 0);
    cr_assert_geq(one, 1);
    cr_assert_str_eq(s, "x");
    cr_assert_str_neq(s, "y");
    cr_assert_str_empty("");
    cr_expect(one);
    cr_expect_eq(one, 1);
    cr_expect_neq(one, 0);
    cr_expect_lt(one, 2);
    cr_expect_str_empty("");
}

Test(fail, a_fatal_assertion_ends_the_test)
{
    cr_assert_eq(1, 2, "one is not %d", 2);
    printf("crlite: after the fatal assertion\n");
}

Test(fail, an_expectation_lets_the_test_go_on)
{
    cr_expect(0);
    printf("crlite: after the expectation\n");
}

Test(fail, a_string_mismatch_shows_both_strings)
{
    cr_assert_str_eq("left-side", "right-side");
}

static void *fail_on_thread(void *arg)
{
    (void)arg;
    cr_assert_fail("from another thread");
    return NULL;
}

Test(fail, an_assertion_on_another_thread_ends_the_test)
{
    pthread_t t;
    pthread_create(&t, NULL, fail_on_thread, NULL);
    pthread_join(t, NULL);
    printf("crlite: after the thread's assertion\n");
}

Test(fail, a_test_past_its_timeout_is_killed, .timeout = 0.3)
{
    pause(); /* deliberately never returns: the runner must kill it */
}

Test(fail, a_crash_is_reported)
{
    raise(SIGKILL);
}
