/*
 * procs.c -- see procs.h.
 */
#include "procs.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

char *crdt_file_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    size_t n;
    while ((n = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            s = realloc(s, cap);
            cr_assert_not_null(s);
        }
    }
    s[len] = '\0';
    fclose(f);
    return s;
}

void crdt_proc_start_in(crdt_proc *p, const char *const *argv, char *const *envp,
                        const char *dir)
{
    static int seq;
    char own[200];
    if (dir == NULL) {
        snprintf(own, sizeof own, "%s/crdt-procs.%d",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
        mkdir(own, 0700);
        dir = own;
    }
    seq++;
    int no = snprintf(p->out, sizeof p->out, "%s/out.%d", dir, seq);
    int ne = snprintf(p->err, sizeof p->err, "%s/err.%d", dir, seq);
    cr_assert(no > 0 && (size_t)no < sizeof p->out && ne > 0 && (size_t)ne < sizeof p->err,
              "output path too long in %s", dir);
    int ofd = open(p->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int efd = open(p->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert(ofd >= 0 && efd >= 0 && nfd >= 0, "open: %s", strerror(errno));
    fflush(NULL);
    /* A test run may block or ignore signals (a background job of a non-interactive shell
     * starts with SIGINT ignored); the child must see them as a shell's child does
     * (test_cli_r47 ends waiting CLIs with real signals). The three are blocked from before
     * the fork until the child has set them to their defaults, so one sent as soon as
     * fork() returns waits for that instead of meeting an inherited ignore (and vanishing:
     * the CLI then waited on as if never signalled). */
    sigset_t three, was;
    sigemptyset(&three);
    sigaddset(&three, SIGINT);
    sigaddset(&three, SIGTERM);
    sigaddset(&three, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &three, &was);
    p->started_ms = crdt_now_ms();
    p->pid = fork();
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(nfd, 0);
        dup2(ofd, 1);
        dup2(efd, 2);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(argv[0], (char *const *)argv, envp != NULL ? envp : environ);
        _exit(99);
    }
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    cr_assert(p->pid >= 0, "fork: %s", strerror(fork_errno));
    close(ofd);
    close(efd);
    close(nfd);
}

void crdt_proc_start(crdt_proc *p, const char *const *argv)
{
    crdt_proc_start_in(p, argv, NULL, NULL);
}

void crdt_cli_start(crdt_proc *p, const char *const *args)
{
#ifndef CRD_CLI_PATH
    (void)p;
    (void)args;
    cr_assert_fail("built without the CLI");
#else
    const char *argv[64];
    int n = 0;
    argv[n++] = CRD_CLI_PATH;
    for (int i = 0; args[i] != NULL && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    crdt_proc_start(p, argv);
#endif
}

/* The lines of one /proc file that start with one of keys (NULL-terminated), or its first
 * line when keys is NULL, appended to buf, each after a space. */
static void proc_fields(const char *path, const char *const *keys, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        bool want = keys == NULL;
        for (const char *const *k = keys; k != NULL && *k != NULL && !want; k++)
            want = strncmp(line, *k, strlen(*k)) == 0 && line[strlen(*k)] == ':';
        if (want) {
            size_t len = strlen(buf);
            snprintf(buf + len, cap - len, " %s", line);
        }
        if (keys == NULL)
            break;
    }
    fclose(f);
}

/* What a process that will not exit is doing, on stderr (the test's log): its signal
 * state, each thread's state, wait channel and system call, and, where gdb is installed,
 * every thread's stack. Read before it is killed. */
static void proc_report(pid_t pid)
{
    static const char *const sigs[] = {"State", "SigQ", "SigPnd", "ShdPnd", "SigBlk",
                                       "SigIgn", "SigCgt", NULL};
    static const char *const task[] = {"Name", "State", "SigPnd", "SigBlk", NULL};
    char path[320], buf[4096] = "";
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    proc_fields(path, sigs, buf, sizeof buf);
    fprintf(stderr, "[proc %d] %s\n", (int)pid, buf);
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    for (struct dirent *e = d != NULL ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
        if (e->d_name[0] == '.')
            continue;
        buf[0] = '\0';
        snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)pid, e->d_name);
        proc_fields(path, task, buf, sizeof buf);
        snprintf(path, sizeof path, "/proc/%d/task/%s/wchan", (int)pid, e->d_name);
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, " wchan:");
        proc_fields(path, NULL, buf, sizeof buf);
        snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)pid, e->d_name);
        len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, " syscall:");
        proc_fields(path, NULL, buf, sizeof buf);
        fprintf(stderr, "[proc %d] task %s:%s\n", (int)pid, e->d_name, buf);
    }
    if (d != NULL)
        closedir(d);
    /* The CLI's own record of a signal that ends a wait (cli/spawn.c), where it is one. */
    char exe[PATH_MAX] = "";
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    bool cli = strcmp(strrchr(exe, '/') != NULL ? strrchr(exe, '/') + 1 : exe, "credisson") == 0;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "command -v gdb >/dev/null && timeout 20 gdb -batch -nx -p %d %s"
             "-ex 'thread apply all bt 16' </dev/null 2>&1 | grep -E '^(Thread|#|\\$)' >&2",
             (int)pid,
             cli ? "-ex 'p wait_sig' -ex 'p run_phase' -ex 'p *run_intr' -ex 'p run_pending_sig' "
                 : "");
    fflush(stderr);
    int rc = system(cmd);
    (void)rc;
}

int crdt_proc_finish(crdt_proc *p, int64_t timeout_ms, char **out, char **err)
{
    int64_t deadline = crdt_now_ms() + timeout_ms;
    int st = 0;
    pid_t r;
    while ((r = waitpid(p->pid, &st, WNOHANG)) == 0 && crdt_now_ms() < deadline)
        crdt_sleep_ms(2);
    int rc = -1;
    if (r == p->pid) {
        rc = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    } else if (r == 0) { /* still there: what it does, then it is killed */
        proc_report(p->pid);
        rc = crdt_wait_child(p->pid, 0);
    }
    if (rc == -1) {
        char *o = crdt_file_text(p->out), *e = crdt_file_text(p->err);
        cr_assert_fail("process %d did not exit within %lld ms; stdout: %s; stderr: %s",
                       (int)p->pid, (long long)timeout_ms, o, e);
    }
    if (out != NULL)
        *out = crdt_file_text(p->out);
    if (err != NULL)
        *err = crdt_file_text(p->err);
    return rc;
}

uint64_t crdt_proc_signals(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    size_t n = strlen(field);
    uint64_t set = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            set = strtoull(line + n + 1, NULL, 16);
            break;
        }
    fclose(f);
    return set;
}

void crdt_proc_kill(crdt_proc *p, int sig)
{
    kill(p->pid, sig);
    int status;
    waitpid(p->pid, &status, 0);
}

int crdt_cli_run(const char *const *args, int64_t timeout_ms, char **out, char **err)
{
    crdt_proc p;
    crdt_cli_start(&p, args);
    return crdt_proc_finish(&p, timeout_ms, out, err);
}

int crdt_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

int crdt_http_get(int port, const char *path, int64_t timeout_ms, char **body)
{
    if (body != NULL)
        *body = NULL;
    int64_t deadline = crdt_now_ms() + timeout_ms;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return 0;
    }
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", path,
                     port);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (;;) {
        int64_t left = deadline - crdt_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
        if (cap - len < 4096) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        ssize_t k = read(fd, buf + len, cap - len - 1);
        if (k <= 0) {
            if (k == 0)
                deadline = 0; /* closed: the whole answer is in */
            break;
        }
        len += (size_t)k;
    }
    close(fd);
    buf[len] = '\0';
    int code = 0;
    if (sscanf(buf, "HTTP/%*s %d", &code) != 1)
        code = 0;
    char *b = strstr(buf, "\r\n\r\n");
    if (body != NULL)
        *body = strdup(b != NULL ? b + 4 : "");
    free(buf);
    return code;
}
