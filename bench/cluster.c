/*
 * cluster.c -- private Redis Clusters for the cluster-3 scenario: redis-servers with
 * --cluster-enabled on free loopback ports, each in its own temporary directory, joined
 * by `redis-cli --cluster create` (three or more primaries) or given every slot with
 * CLUSTER ADDSLOTSRANGE (one primary), no replicas. Killed at exit like the bench's own
 * server.
 */
#include "bench.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A port in 20000..49999 on which nothing answers, nor on its cluster bus (port + 10000),
 * or -1. Something may still hold either without answering, or take it before the node
 * binds it: start_node tries again then. */
static int free_port(void)
{
    for (int tries = 0; tries < 100; tries++) {
        int port = 20000 + (int)(((unsigned)getpid() * 7919u + (unsigned)bn_now_us()) % 30000u);
        bool used = false;
        for (int k = 0; k < 2 && !used; k++) {
            redisContext *c = redisConnect("127.0.0.1", port + k * 10000);
            used = c != NULL && !c->err;
            if (c != NULL)
                redisFree(c);
        }
        if (!used)
            return port;
    }
    return -1;
}

static bool cmd_ok(redisContext *c, const char *fmt, const char *arg)
{
    redisReply *r = redisCommand(c, fmt, arg);
    bool ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    if (r != NULL)
        freeReplyObject(r);
    return ok;
}

static bool info_has(int port, const char *section, const char *needle)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    bool yes = false;
    if (c != NULL && !c->err) {
        redisReply *r = redisCommand(c, section);
        yes = r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, needle) != NULL;
        if (r != NULL)
            freeReplyObject(r);
    }
    if (c != NULL)
        redisFree(c);
    return yes;
}

/* Runs redis-cli --cluster create over the nodes; true when it exited 0. */
static bool cli_create(const bn_cluster *cl, const char *cli)
{
    char addr[BN_CLUSTER_MAX][32];
    const char *argv[BN_CLUSTER_MAX + 6];
    int n = 0;
    argv[n++] = cli;
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (int i = 0; i < cl->n; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", cl->port[i]);
        argv[n++] = addr[i];
    }
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        freopen("/dev/null", "w", stdout);
        execvp(cli, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* Whether the node pid answers PING on port within 2 s; false at once when it exits (its
 * port or its bus port was taken: the caller tries another). */
static bool node_up(pid_t pid, int port)
{
    for (int k = 0; k < 100; k++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return false;
        redisContext *c = redisConnect("127.0.0.1", port);
        bool up = c != NULL && !c->err && cmd_ok(c, "PING", NULL);
        if (c != NULL)
            redisFree(c);
        if (up)
            return true;
        bn_sleep_us(20000);
    }
    return false;
}

/* Starts node i on a free port, up to 8 ports: a node whose port or bus port was taken
 * between the check and its bind exits, and the cluster-3 scenario was once skipped so. */
static bool start_node(bn_cluster *cl, int i, const char *server)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        int port = free_port();
        if (port < 0)
            return false;
        char ports[16], nodes[300], dir[300];
        snprintf(ports, sizeof ports, "%d", port);
        snprintf(dir, sizeof dir, "%s/%d", cl->dir, port);
        snprintf(nodes, sizeof nodes, "nodes-%d.conf", port);
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return false;
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            execlp(server, server, "--port", ports, "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", dir, "--cluster-enabled", "yes",
                   "--cluster-config-file", nodes, "--protected-mode", "no", "--loglevel",
                   "warning", "--maxclients", "2000", (char *)NULL);
            _exit(127);
        }
        if (pid < 0)
            return false;
        cl->pid[i] = pid;
        cl->port[i] = port;
        cl->n = i + 1;
        if (node_up(pid, port))
            return true;
        if (kill(pid, SIGKILL) == 0)
            waitpid(pid, NULL, 0);
        cl->pid[i] = 0;
    }
    return false;
}

bool bn_cluster_start(bn_cluster *cl, int primaries, const char *server, const char *cli)
{
    memset(cl, 0, sizeof *cl);
    if (primaries < 1 || primaries > BN_CLUSTER_MAX || primaries == 2)
        return false;
    snprintf(cl->dir, sizeof cl->dir, "/tmp/crd-bench-cluster.XXXXXX");
    if (mkdtemp(cl->dir) == NULL)
        return false;
    size_t o = snprintf(cl->url, sizeof cl->url, "redis-cluster://");
    for (int i = 0; i < primaries; i++) {
        if (!start_node(cl, i, server))
            return false;
        o += (size_t)snprintf(cl->url + o, sizeof cl->url - o, "%s127.0.0.1:%d", i ? "," : "",
                              cl->port[i]);
    }
    if (primaries == 1) {
        redisContext *c = redisConnect("127.0.0.1", cl->port[0]);
        bool ok = c != NULL && !c->err && cmd_ok(c, "CLUSTER ADDSLOTSRANGE 0 16383", NULL);
        if (c != NULL)
            redisFree(c);
        if (!ok)
            return false;
    } else if (!cli_create(cl, cli)) {
        return false;
    }
    for (int i = 0; i < cl->n; i++) {
        bool ok = false;
        for (int k = 0; k < 500 && !ok; k++) {
            ok = info_has(cl->port[i], "CLUSTER INFO", "cluster_state:ok");
            if (!ok)
                bn_sleep_us(20000);
        }
        if (!ok)
            return false;
    }
    return true;
}

void bn_cluster_stop(bn_cluster *cl)
{
    for (int i = 0; i < cl->n; i++) {
        if (cl->pid[i] > 0) {
            kill(cl->pid[i], SIGKILL);
            waitpid(cl->pid[i], NULL, 0);
            cl->pid[i] = 0;
        }
    }
    if (cl->dir[0] != '\0') {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cl->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "credisson-bench: could not remove %s\n", cl->dir);
        cl->dir[0] = '\0';
    }
    cl->n = 0;
}
