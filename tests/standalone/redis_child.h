/* redis_child.h -- a private redis-server for the programs that run without Criterion
 * (tests/stress, tests/chaos, bench/): a free loopback port, a plain hiredis connection,
 * the server started as a child that dies with its parent, and the wait until it answers.
 * The Criterion suites have tests/support/harness.h for the same job; it and
 * tests/support/sentinel.c take free_port, fork_tied, child_stdio and remove_dir from here.
 *
 * Header-only (static functions, each program takes what it needs); Linux (prctl), and
 * _GNU_SOURCE defined before the first include, as those programs' builds do. */
#ifndef CRD_REDIS_CHILD_H
#define CRD_REDIS_CHILD_H

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

/* A loopback TCP port the kernel just gave out, or -1. Another process may take it
 * before the server binds it, so a caller that starts a server on it retries. */
static inline int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* A hiredis connection to 127.0.0.1:port whose connect and each command are bounded
 * by tv, or NULL. */
static inline redisContext *connect_port(int port, struct timeval tv)
{
    redisContext *r = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (r == NULL || r->err) {
        if (r)
            redisFree(r);
        return NULL;
    }
    redisSetTimeout(r, tv);
    return r;
}

/* Starts argv (argv[0] looked up on PATH) as a child that is killed when this process
 * dies, its output to /dev/null when quiet. Returns its pid, or -1. */
/* fork(), its child SIGKILLed when the forking thread dies (PR_SET_PDEATHSIG), so no
 * server outlives a crashed caller. Returns as fork() does. */
static inline pid_t fork_tied(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before prctl: nobody would kill us */
        _exit(127);
    return 0;
}

/* In a forked child: stdin from /dev/null, stdout and stderr to the file log (appended
 * to, or truncated first when truncate). */
static inline void child_stdio(const char *log, bool truncate)
{
    int lfd = open(log, O_WRONLY | O_CREAT | (truncate ? O_TRUNC : O_APPEND), 0600);
    int nfd = open("/dev/null", O_RDONLY);
    if (nfd >= 0)
        dup2(nfd, 0);
    if (lfd >= 0) {
        dup2(lfd, 1);
        dup2(lfd, 2);
    }
}

static inline pid_t spawn_child(const char *const *argv, bool quiet)
{
    pid_t pid = fork_tied();
    if (pid != 0)
        return pid;
    if (quiet) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
    }
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

/* Waits up to wait_ms until the server child *pid answers PING on port. False when it
 * exits first (then reaped, and *pid set to 0) or the time runs out (still running). */
static inline bool await_server(pid_t *pid, int port, int64_t wait_ms)
{
    struct timespec now, pause = {0, 10 * 1000000};
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t deadline = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 + wait_ms;
    struct timeval tv = {0, 200000};
    for (;;) {
        redisContext *r = connect_port(port, tv);
        if (r != NULL) {
            redisReply *rep = redisCommand(r, "PING");
            bool up = rep != NULL && rep->type == REDIS_REPLY_STATUS;
            if (rep)
                freeReplyObject(rep);
            redisFree(r);
            if (up)
                return true;
        }
        if (waitpid(*pid, NULL, WNOHANG) == *pid) {
            *pid = 0;
            return false;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 >= deadline)
            return false;
        nanosleep(&pause, NULL); /* not started yet: look again shortly */
    }
}

/* SIGKILLs the child *pid, if any (a pid <= 0 is none), reaps it and sets *pid to 0. */
static inline void kill_child(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    *pid = 0;
}

/* Removes the flat directory dir (a server's working files) and what is in it; "" is none. */
static inline void remove_dir(const char *dir)
{
    if (dir[0] == '\0')
        return;
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p)
                unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

#endif
