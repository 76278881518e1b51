/*
 * crlite -- the subset of Criterion's API that credisson's tests use, for the one build
 * where Criterion itself cannot run: ThreadSanitizer. Criterion's sandbox maps its
 * shared arena at a random fixed address in the range TSan reserves for its shadow
 * memory, so every Criterion executable aborts at start-up under TSan
 * (Snaipe/Criterion#274). The TSan build compiles the unchanged test files against
 * this header (its include directory comes first) and links tests/support/crlite/
 * runner.c instead of libcriterion.
 *
 * What it keeps of Criterion: Test() and TestSuite() with .init, .fini, .timeout and
 * .disabled; every test in a forked process of its own, killed at its timeout; the
 * PRE_ALL and POST_ALL report hooks, run in the runner; criterion_current_test->name;
 * the cr_assert_* (fatal) and cr_expect_* (non-fatal) macros listed below; --jobs N.
 * A fatal assertion ends the test process at once (exit on the test's own thread,
 * _exit on any other thread, as no other thread may be unwound safely).
 */
#ifndef CRLITE_CRITERION_H
#define CRLITE_CRITERION_H

/* Like Criterion's own header, a system header: a cr_assert without a message is not a
 * pedantic warning at the call site. */
#pragma GCC system_header

#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct criterion_test_set;
struct criterion_global_stats;

/* What criterion_current_test points to inside a test process. */
struct criterion_test {
    const char *name;
    const char *category;
};

extern const struct criterion_test *criterion_current_test;

struct crl_test {
    const char *category;
    const char *name;
    void (*fn)(void);
    void (*init)(void);
    void (*fini)(void);
    double timeout; /* seconds; 0: the suite's, else the runner's default */
    bool disabled;
    const char *description;
    struct crl_test *next;
};

struct crl_suite {
    const char *name;
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    bool disabled;
    const char *description;
    struct crl_suite *next;
};

void crl__register_test(struct crl_test *t);
void crl__register_suite(struct crl_suite *s);
void crl__register_hook(int kind, void (*fn)(void *));
void crl__fail(const char *file, int line, bool fatal, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void crl__fail_str(const char *file, int line, bool fatal, const char *what, const char *a,
                   const char *b, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
bool crl__streq(const char *a, const char *b);
void crl__skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define CRL__ID(prefix, Suite, Name) prefix##Suite##__##Name

/* The trailing comma after the designated initialisers is legal C when no option is given. */
#define Test(Suite, Name, ...)                                                                     \
    static void CRL__ID(crl_fn_, Suite, Name)(void);                                               \
    static struct crl_test CRL__ID(crl_t_, Suite, Name) = {                                        \
        .category = #Suite, .name = #Name, .fn = CRL__ID(crl_fn_, Suite, Name), __VA_ARGS__};      \
    __attribute__((constructor)) static void CRL__ID(crl_reg_, Suite, Name)(void)                  \
    {                                                                                              \
        crl__register_test(&CRL__ID(crl_t_, Suite, Name));                                         \
    }                                                                                              \
    static void CRL__ID(crl_fn_, Suite, Name)(void)

/* Ends with the suite's definition so that the `;` after TestSuite(...) closes it. */
#define TestSuite(Suite, ...)                                                                      \
    static struct crl_suite crl_s_##Suite;                                                         \
    __attribute__((constructor)) static void crl_sreg_##Suite(void)                                \
    {                                                                                              \
        crl__register_suite(&crl_s_##Suite);                                                       \
    }                                                                                              \
    static struct crl_suite crl_s_##Suite = {.name = #Suite, __VA_ARGS__}

/* The message, when given, starts with a string literal (as with Criterion's macros
 * in practice); ": " keeps the format non-empty when it is not given. */
#define CRL__CHECK(fatal, cond, what, ...)                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            crl__fail(__FILE__, __LINE__, (fatal), (what), ": " __VA_ARGS__);                      \
    } while (0)

#define CRL__CHECK_STR(fatal, eq, a, b, what, ...)                                                 \
    do {                                                                                           \
        const char *crl_a_ = (a), *crl_b_ = (b);                                                   \
        if (crl__streq(crl_a_, crl_b_) != (eq))                                                    \
            crl__fail_str(__FILE__, __LINE__, (fatal), (what), crl_a_, crl_b_, ": " __VA_ARGS__);  \
    } while (0)

#define cr_assert(c, ...) CRL__CHECK(true, c, #c, __VA_ARGS__)
#define cr_assert_not(c, ...) CRL__CHECK(true, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_fail(...) CRL__CHECK(true, 0, "cr_assert_fail", __VA_ARGS__)
#define cr_expect_fail(...) CRL__CHECK(false, 0, "cr_expect_fail", __VA_ARGS__)
#define cr_assert_null(p, ...) CRL__CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) CRL__CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) CRL__CHECK(true, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) CRL__CHECK(true, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) CRL__CHECK(true, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) CRL__CHECK(true, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) CRL__CHECK(true, (a) > (b), #a " > " #b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) CRL__CHECK(true, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) CRL__CHECK_STR(true, true, a, b, #a " eq " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) CRL__CHECK_STR(true, false, a, b, #a " neq " #b, __VA_ARGS__)
#define cr_assert_str_empty(s, ...) CRL__CHECK_STR(true, true, s, "", #s " is empty", __VA_ARGS__)

#define cr_expect(c, ...) CRL__CHECK(false, c, #c, __VA_ARGS__)
#define cr_expect_not(c, ...) CRL__CHECK(false, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_eq(a, b, ...) CRL__CHECK(false, (a) == (b), #a " == " #b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) CRL__CHECK(false, (a) != (b), #a " != " #b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) CRL__CHECK(false, (a) < (b), #a " < " #b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) CRL__CHECK(false, (a) > (b), #a " > " #b, __VA_ARGS__)
/* Criterion's cr_skip_test: the test ends here, skipped (it counts as passed). */
#define cr_skip_test(...) crl__skip(__VA_ARGS__)
/* Criterion's logging.h: an information line on stderr. */
#define cr_log_info(...) (fputs("[----] ", stderr), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))
#define cr_expect_null(p, ...) CRL__CHECK(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) CRL__CHECK(false, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_leq(a, b, ...) CRL__CHECK(false, (a) <= (b), #a " <= " #b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) CRL__CHECK(false, (a) >= (b), #a " >= " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) CRL__CHECK_STR(false, true, a, b, #a " eq " #b, __VA_ARGS__)
#define cr_expect_str_empty(s, ...) CRL__CHECK_STR(false, true, s, "", #s " is empty", __VA_ARGS__)

#endif
