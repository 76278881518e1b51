/*
 * crlite runner -- main() for the test executables of the ThreadSanitizer build (see
 * criterion.h for why Criterion itself cannot run there).
 *
 * The runner process runs the PRE_ALL hooks, then every enabled test in a forked
 * process of its own (its own process group, so that a timeout kills whatever the test
 * started), at most --jobs at a time, then the POST_ALL hooks. It waits for its
 * children with sigtimedwait() on SIGCHLD bounded by the nearest test deadline; a
 * test past its timeout is killed and counted as failed. Exit status 0 when every test
 * passed, 1 otherwise, 2 on a usage error.
 *
 * usage: test_x [--jobs N] [--filter GLOB] [--list]    (GLOB matches "suite/test")
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criterion/criterion.h"
#include "criterion/hooks.h"

#define MAX_HOOKS 8

const struct criterion_test *criterion_current_test;

static struct crl_test *g_tests;
static struct crl_suite *g_suites;
static void (*g_hooks[2][MAX_HOOKS])(void *);
static int g_nhooks[2];

/* Inside a test process: who may unwind to the runner, and whether anything failed. */
static pid_t g_test_pid;
static pthread_t g_test_thread;
static jmp_buf g_test_jmp;
static volatile sig_atomic_t g_test_failed;

void crl__register_test(struct crl_test *t)
{
    t->next = g_tests;
    g_tests = t;
}

void crl__register_suite(struct crl_suite *s)
{
    s->next = g_suites;
    g_suites = s;
}

void crl__register_hook(int kind, void (*fn)(void *))
{
    if (kind >= 0 && kind < 2 && g_nhooks[kind] < MAX_HOOKS)
        g_hooks[kind][g_nhooks[kind]++] = fn;
}

bool crl__streq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

/* A fatal failure on the test's own thread unwinds to the runner code of the test
 * process (which still runs .fini, as Criterion does); on any other thread, or in a
 * process the test forked, it ends the process at once. */
static void fail_end(bool fatal)
{
    g_test_failed = 1;
    fflush(stdout);
    fflush(stderr);
    if (!fatal)
        return;
    if (g_test_pid == getpid() && pthread_equal(pthread_self(), g_test_thread))
        longjmp(g_test_jmp, 1);
    _exit(1);
}

void crl__fail(const char *file, int line, bool fatal, const char *what, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[----] %s:%d: %s failed: %s%s\n", file, line,
            fatal ? "Assertion" : "Expectation", what, strcmp(msg, ": ") == 0 ? "" : msg);
    fail_end(fatal);
}

void crl__skip(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Criterion's words for a skipped test; the test ends here and passes (its fini runs). */
    fprintf(stderr, "[SKIP] %s::%s: %s\n", criterion_current_test->category,
            criterion_current_test->name, msg);
    fflush(stdout);
    fflush(stderr);
    if (g_test_pid == getpid() && pthread_equal(pthread_self(), g_test_thread))
        longjmp(g_test_jmp, 1);
    _exit(0);
}

void crl__fail_str(const char *file, int line, bool fatal, const char *what, const char *a,
                   const char *b, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr,
            "[----] %s:%d: %s failed: %s%s\n[----]   left:  %s%s%s\n[----]   right: %s%s%s\n", file,
            line, fatal ? "Assertion" : "Expectation", what, strcmp(msg, ": ") == 0 ? "" : msg,
            a ? "\"" : "", a ? a : "(null)", a ? "\"" : "", b ? "\"" : "", b ? b : "(null)",
            b ? "\"" : "");
    fail_end(fatal);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const struct crl_suite *suite_of(const struct crl_test *t)
{
    for (const struct crl_suite *s = g_suites; s != NULL; s = s->next)
        if (strcmp(s->name, t->category) == 0)
            return s;
    return NULL;
}

/* The test's own option, else its suite's (Criterion's rule for TestSuite defaults). */
#define OPTION(t, s, field) ((t)->field ? (t)->field : ((s) != NULL ? (s)->field : 0))

static int cmp_tests(const void *pa, const void *pb)
{
    const struct crl_test *a = *(const struct crl_test *const *)pa;
    const struct crl_test *b = *(const struct crl_test *const *)pb;
    int c = strcmp(a->category, b->category);
    return c != 0 ? c : strcmp(a->name, b->name);
}

static void on_sigchld(int sig)
{
    (void)sig;
}

static void run_in_child(const struct crl_test *t, const sigset_t *old_mask)
{
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    signal(SIGCHLD, SIG_DFL);

    static struct criterion_test current;
    current.name = t->name;
    current.category = t->category;
    criterion_current_test = &current;
    g_test_pid = getpid();
    g_test_thread = pthread_self();

    const struct crl_suite *s = suite_of(t);
    void (*init)(void) = OPTION(t, s, init);
    void (*fini)(void) = OPTION(t, s, fini);
    if (setjmp(g_test_jmp) == 0) {
        if (init != NULL)
            init();
        t->fn();
    }
    if (fini != NULL && setjmp(g_test_jmp) == 0)
        fini();
    fflush(stdout);
    fflush(stderr);
    exit(g_test_failed ? 1 : 0);
}

struct running {
    const struct crl_test *test;
    pid_t pid;
    int64_t start_ms;
    int64_t deadline_ms; /* 0: none */
    bool killed;
};

static void report(const struct running *r, int status, int *passed, int *failed)
{
    double secs = (double)(now_ms() - r->start_ms) / 1000.0;
    if (!r->killed && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("[PASS] %s::%s: (%.2fs)\n", r->test->category, r->test->name, secs);
        ++*passed;
        return;
    }
    if (r->killed)
        printf("[FAIL] %s::%s: timed out after %.2fs\n", r->test->category, r->test->name, secs);
    else if (WIFSIGNALED(status))
        printf("[FAIL] %s::%s: crashed with signal %d after %.2fs\n", r->test->category,
               r->test->name, WTERMSIG(status), secs);
    else
        printf("[FAIL] %s::%s: exit status %d after %.2fs\n", r->test->category, r->test->name,
               WEXITSTATUS(status), secs);
    ++*failed;
}

int main(int argc, char **argv)
{
    long jobs = 1;
    const char *filter = NULL;
    bool list = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
            jobs = strtol(argv[++i], NULL, 10);
        } else if (strncmp(argv[i], "--jobs=", 7) == 0) {
            jobs = strtol(argv[i] + 7, NULL, 10);
        } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
            filter = argv[++i];
        } else if (strncmp(argv[i], "--filter=", 9) == 0) {
            filter = argv[i] + 9;
        } else if (strcmp(argv[i], "--list") == 0) {
            list = true;
        } else {
            fprintf(stderr, "usage: %s [--jobs N] [--filter GLOB] [--list]\n", argv[0]);
            return 2;
        }
    }
    if (jobs < 1 || jobs > 64)
        jobs = 1;

    size_t n = 0;
    for (struct crl_test *t = g_tests; t != NULL; t = t->next)
        n++;
    struct crl_test **order = calloc(n ? n : 1, sizeof *order);
    if (order == NULL)
        return 2;
    size_t k = 0;
    for (struct crl_test *t = g_tests; t != NULL; t = t->next) {
        char full[512];
        snprintf(full, sizeof full, "%s/%s", t->category, t->name);
        const struct crl_suite *s = suite_of(t);
        if (t->disabled || (s != NULL && s->disabled))
            continue;
        if (filter != NULL && fnmatch(filter, full, 0) != 0)
            continue;
        order[k++] = t;
    }
    n = k;
    qsort(order, n, sizeof *order, cmp_tests);
    if (list) {
        for (size_t i = 0; i < n; i++)
            printf("%s: %s\n", order[i]->category, order[i]->name);
        free(order);
        return 0;
    }

    sigset_t chld, old_mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sigaction(SIGCHLD, &sa, NULL);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);

    for (int i = 0; i < g_nhooks[CRL_HOOK_KIND_PRE_ALL]; i++)
        g_hooks[CRL_HOOK_KIND_PRE_ALL][i](NULL);

    struct running *run = calloc((size_t)jobs, sizeof *run);
    if (run == NULL)
        return 2;
    int passed = 0, failed = 0, active = 0;
    size_t next = 0;
    while (next < n || active > 0) {
        while (next < n && active < jobs) {
            const struct crl_test *t = order[next++];
            fflush(stdout);
            fflush(stderr);
            pid_t pid = fork();
            if (pid == 0)
                run_in_child(t, &old_mask);
            int slot = 0;
            while (run[slot].test != NULL)
                slot++;
            if (pid < 0) {
                printf("[FAIL] %s::%s: fork: %s\n", t->category, t->name, strerror(errno));
                failed++;
                continue;
            }
            setpgid(pid, pid); /* also done by the child; whichever runs first */
            const struct crl_suite *s = suite_of(t);
            double timeout = OPTION(t, s, timeout);
            run[slot] = (struct running){.test = t, .pid = pid, .start_ms = now_ms()};
            if (timeout > 0)
                run[slot].deadline_ms = run[slot].start_ms + (int64_t)(timeout * 1000.0);
            active++;
        }
        if (active == 0)
            break;

        /* Reap whatever has ended; kill whatever is past its deadline. */
        int64_t now = now_ms(), wait_ms = 1000;
        for (long i = 0; i < jobs; i++) {
            struct running *r = &run[i];
            if (r->test == NULL)
                continue;
            int status;
            pid_t got = waitpid(r->pid, &status, WNOHANG);
            if (got == r->pid) {
                kill(-r->pid, SIGKILL); /* anything the test left behind */
                report(r, status, &passed, &failed);
                memset(r, 0, sizeof *r);
                active--;
                wait_ms = 0;
                continue;
            }
            if (r->deadline_ms > 0 && !r->killed && now >= r->deadline_ms) {
                r->killed = true;
                kill(-r->pid, SIGKILL);
                kill(r->pid, SIGKILL);
                wait_ms = 0;
            } else if (r->deadline_ms > 0 && !r->killed && r->deadline_ms - now < wait_ms) {
                wait_ms = r->deadline_ms - now;
            }
        }
        if (wait_ms > 0) {
            struct timespec ts = {.tv_sec = wait_ms / 1000, .tv_nsec = (wait_ms % 1000) * 1000000L};
            (void)sigtimedwait(&chld, NULL, &ts);
        }
    }

    for (int i = 0; i < g_nhooks[CRL_HOOK_KIND_POST_ALL]; i++)
        g_hooks[CRL_HOOK_KIND_POST_ALL][i](NULL);

    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d\n", passed + failed, passed,
           failed);
    fflush(stdout);
    free(run);
    free(order);
    return failed == 0 ? 0 : 1;
}
