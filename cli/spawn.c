/*
 * spawn.c -- the child process `run` supervises, and how the main thread learns what
 * happened to it. CMD runs in a process group of its own, and every signal `run` sends
 * or forwards goes to that group (as timeout(1) does), so a shell's children stop with
 * it; when `run` is in the terminal's foreground, the terminal is handed to CMD's group
 * while it runs (so an interactive CMD can read it and gets Ctrl-C) and taken back after.
 *
 * The main thread sleeps in poll() on one self-pipe that three sources write to: the
 * SIGCHLD handler (the child changed state), the SIGINT/SIGTERM/SIGHUP handler (a signal
 * to forward that arrived before the child's pid was known), and the library's watchdog
 * callback (run_on_event), which runs on the watchdog thread and only stores a flag and
 * writes a byte. The library's threads block every signal (crd__thread_create), so the
 * handlers run on the main thread; they touch only lock-free atomics and call only
 * async-signal-safe functions all the same.
 *
 * A signal of the three that `run` was started with ignored stays ignored, in `run` and in
 * CMD, as in any program that follows the GNU coding standards: nohup(1) ignores SIGHUP,
 * and a non-interactive shell starts its background jobs with SIGINT and SIGQUIT ignored
 * (so that the terminal's Ctrl-C stops the script's foreground only). Catching them anyway
 * would end a nohup'd run at a hang-up, and would lose a signal that came before the
 * handler was installed (the ignore discards it) while one after it ends the wait.
 */
#include "cli.h"
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Lock-free atomics, not volatile sig_atomic_t: the handler may run on another thread,
 * and C11 makes lock-free atomics safe in signal handlers too. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "signal handlers need lock-free atomic_int");
atomic_int run_phase = RUN_WAITING;
atomic_int run_child = 0;
atomic_int run_pending_sig = 0;
atomic_int run_lost = 0;
atomic_int run_lost_status = 0;
atomic_int run_failing = 0;
atomic_int run_recovered = 0;
/* While waiting: the first SIGINT/SIGTERM/SIGHUP raises the token (the wait ends and the
 * queue is left); a second one ends the process at once. */
static crd_interrupt *run_intr;
static atomic_int wait_sig = 0;
/* Which of SIGINT, SIGTERM, SIGHUP were ignored when `run` started (set before any handler
 * is installed, read by the forked child). */
static sigset_t start_ignored;

/* Self-pipe: [0] polled by the main thread, [1] written by handlers and callbacks. */
static int self_pipe[2] = {-1, -1};

static void wake(char c)
{
    if (self_pipe[1] >= 0) {
        ssize_t r = write(self_pipe[1], &c, 1); /* non-blocking; a full pipe already wakes */
        (void)r;
    }
}

void run_on_event(void *user_data, const crd_event *ev)
{
    (void)user_data;
    switch (ev->kind) {
    case CRD_EVENT_LOCK_LOST:
        atomic_store(&run_lost_status, (int)ev->status);
        atomic_store(&run_lost, 1);
        break;
    case CRD_EVENT_RENEWAL_FAILING:
        atomic_store(&run_failing, 1);
        break;
    case CRD_EVENT_RENEWAL_RECOVERED:
        atomic_store(&run_recovered, 1);
        break;
    }
    wake('e');
}

/* SIGINT, SIGTERM, SIGHUP, SIGCHLD. May run on any thread. */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    int saved_errno = errno;
    pid_t child = (pid_t)atomic_load(&run_child);
    if (sig == SIGCHLD) {
        wake('c');
    } else if (child > 0) {
        /* CMD's group is not ours, so nothing reached it but through us: forward even a
         * terminal's SIGINT (when the terminal is CMD's, it never comes to us). */
        kill(-child, sig);
    } else if (atomic_load(&run_phase) == RUN_WAITING) {
        /* Still waiting for the lock: the wait ends (CRD_INTERRUPTED) and leaves what it
         * joined (a fair lock's queue), then the main thread dies of the signal. A second
         * signal, or one without a token, ends the process now. */
        int expected = 0;
        if (run_intr != NULL && atomic_compare_exchange_strong(&wait_sig, &expected, sig)) {
            crd_interrupt_raise(run_intr);
        } else {
            signal(sig, SIG_DFL);
            raise(sig);
        }
    } else {
        /* Between acquire and fork, or after CMD exited: the main loop forwards it. */
        atomic_store(&run_pending_sig, sig);
        wake('s');
    }
    errno = saved_errno;
}

int run_wait_signal(void) { return atomic_load(&wait_sig); }

int run_die_of_signal(int sig)
{
    fflush(stdout);
    fflush(stderr);
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    return 128 + sig;
}

int run_install_handlers(void)
{
    if (pipe2(self_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_error("run", "cannot create a pipe: %s", strerror(errno));
        return EXIT_OSERR;
    }
    /* Without a token a signal while waiting just ends the process, as before. */
    if (crd_interrupt_new(&run_intr) == CRD_OK)
        crd_interrupt_bind(run_intr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&sa.sa_mask, sigs[i]);
    sigemptyset(&start_ignored);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction was;
        if (sigs[i] != SIGCHLD && sigaction(sigs[i], NULL, &was) == 0 &&
            !(was.sa_flags & SA_SIGINFO) && was.sa_handler == SIG_IGN) {
            sigaddset(&start_ignored, sigs[i]);
            continue;
        }
        if (sigaction(sigs[i], &sa, NULL) != 0) {
            cli_error("run", "cannot install signal handlers: %s", strerror(errno));
            return EXIT_OSERR;
        }
    }
    return 0;
}

int run_wake_fd(void)
{
    return self_pipe[0];
}

void run_drain_wakes(void)
{
    char buf[64];
    while (read(self_pipe[0], buf, sizeof buf) > 0) {
    }
}

/* File descriptors open when the tool started: the caller's, which CMD inherits. */
static int *start_fds;
static size_t start_nfds;

void run_remember_start_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        if (fd == dirfd(d))
            continue;
        if (start_nfds == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            int *n = realloc(start_fds, ncap * sizeof *n);
            if (n == NULL)
                break;
            start_fds = n;
            cap = ncap;
        }
        start_fds[start_nfds++] = fd;
    }
    closedir(d);
}

void run_cloexec_library_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        bool inherited = fd <= 2 || fd == dirfd(d);
        for (size_t i = 0; !inherited && i < start_nfds; i++)
            inherited = start_fds[i] == fd;
        if (inherited)
            continue;
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
    closedir(d);
}

/* The terminal handed to CMD's group (-1: none), and the group to give it back to. */
static int tty_fd = -1;
static pid_t tty_owner;

/* The descriptor of our controlling terminal when we are its foreground group, or -1. */
static int foreground_tty(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (isatty(fd) && tcgetpgrp(fd) == getpgrp())
            return fd;
    return -1;
}

/* tcsetpgrp from a background group raises SIGTTOU unless it is blocked. */
static void give_tty(int fd, pid_t pgrp)
{
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(fd, pgrp);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

void run_take_back_tty(void)
{
    if (tty_fd >= 0)
        give_tty(tty_fd, tty_owner);
    tty_fd = -1;
}

/* The forked child until exec: its own process group (and the terminal, if ours was
 * foreground), the signal dispositions `run` started with (the default, or ignored: see
 * above), nothing blocked, then CMD. Only async-signal-safe calls. On failure writes errno
 * to errfd and exits. */
static void exec_child(char **cmd, int errfd)
{
    setpgid(0, 0);
    if (tty_fd >= 0)
        give_tty(tty_fd, getpid());
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (!sigismember(&start_ignored, sigs[i]))
            sigaction(sigs[i], &dfl, NULL);
    sigaction(SIGCHLD, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(cmd[0], cmd);
    int err = errno;
    ssize_t w = write(errfd, &err, sizeof err);
    (void)w;
    _exit(err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

pid_t run_spawn(char **cmd, int *exit_code)
{
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        cli_error("run", "cannot create a pipe: %s", strerror(errno));
        *exit_code = EXIT_OSERR;
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    tty_fd = foreground_tty();
    tty_owner = getpgrp();
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("run", "cannot fork: %s", strerror(errno));
        close(errpipe[0]);
        close(errpipe[1]);
        *exit_code = EXIT_OSERR;
        return -1;
    }
    if (pid == 0)
        exec_child(cmd, errpipe[1]);
    /* Also here: whichever of the two runs first, the group exists before any signal is
     * sent to it (EACCES once the child has exec'd: it did it itself by then). */
    setpgid(pid, pid);
    if (tty_fd >= 0)
        give_tty(tty_fd, pid);
    close(errpipe[1]);
    int err = 0;
    ssize_t n;
    do {
        n = read(errpipe[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(errpipe[0]);
    if (n == (ssize_t)sizeof err) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        run_take_back_tty();
        cli_error("run", "cannot run '%s': %s", cmd[0], strerror(err));
        *exit_code = err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
        return -1;
    }
    return pid;
}

void run_signal_cmd(pid_t pid, int sig)
{
    kill(-pid, sig); /* the group: CMD and what it started */
}

bool run_child_exited(pid_t pid, int *status)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0)
        return false;
    atomic_store(&run_child, 0);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    run_take_back_tty();
    return true;
}
