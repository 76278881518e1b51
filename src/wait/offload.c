/*
 * offload.c -- the event-loop API's helper threads: a step of a loop operation that still
 * needs a blocking call runs there, never on the loop thread.
 *
 * The engine takes a loop operation's attempt without a thread whenever it can (a
 * standalone client without replica sync: loop.c puts the command on the engine and its
 * completion writes the loop fd). Some steps are more than one command and still go
 * through crd__call: a cluster's redirects and slot map, Sentinel's primary and READONLY
 * handling, replica sync's WAIT and its undo, a lost reply's read-back. The loop thread
 * hands such an operation to a helper (which owns it until the job is done), dispatch
 * skips it until then, and the helper writes the loop fd when the job is done. A job is
 * bounded by the operation's own deadline, as the step was when it ran inside dispatch.
 *
 * Helpers: none until the first job (a standalone client without replica sync never has
 * one). The first job starts a starter thread, which adds a helper whenever more jobs
 * wait than helpers are free, up to HELPERS_MAX (a stalled server holds each step until
 * its deadline: steps queued behind it would overrun theirs); they stay until the client
 * is freed.
 *
 * A detached job (a fair waiter leaving the queue after a cancel or a timeout) belongs to
 * the helper: it runs and frees itself, or is only freed when the client closes first.
 *
 * Threads: the helpers, the loop thread (hand-over, done checks) and crd_client_free
 * (stop). Locks: off->mu around the queue and the done flags, never during a job.
 */
#include "wait.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Helpers are added while every one is busy, up to this many: a stalled server holds
 * each step until its deadline, and steps queued behind it would overrun theirs. */
#define HELPERS_MAX 16

struct crd__offload {
    pthread_mutex_t mu;
    pthread_cond_t work, done, grow;
    crd__job *head, *tail;
    pthread_t starter;            /* starts the helpers: the loop thread starts only it */
    pthread_t threads[HELPERS_MAX];
    int started, idle, starting; /* starting: created, not yet waiting for work */
    int queued;
    bool has_starter, stop;
    pid_t pid; /* the process that started the threads (none runs in a fork child) */
};

static void *helper_main(void *arg);

/* One more helper (off->mu held). */
static bool add_helper(crd_client *c)
{
    crd__offload *off = c->off;
    if (off->started >= HELPERS_MAX ||
        crd__thread_create(&off->threads[off->started], helper_main, c) != 0)
        return false;
    off->started++;
    off->starting++;
    return true;
}

/* Whether more jobs wait than helpers are free to take them (off->mu held). */
static bool short_of_helpers(const crd__offload *off)
{
    return off->queued > off->idle + off->starting && off->started < HELPERS_MAX;
}

/* The starter: adds a helper whenever jobs wait for one, so that a thread start (slow
 * under a sanitizer: 5-8 ms) never happens on the loop thread but once, for the starter. */
static void *starter_main(void *arg)
{
    crd__thread_enter("crd-offload-go");
    crd_client *c = arg;
    crd__offload *off = c->off;
    pthread_mutex_lock(&off->mu);
    for (;;) {
        while (!off->stop && !short_of_helpers(off))
            pthread_cond_wait(&off->grow, &off->mu);
        if (off->stop)
            break;
        if (!add_helper(c)) {
            /* No thread to be had: the starter takes the jobs itself from now on (with no
             * helper at all, the jobs would never run). */
            off->starting++;
            pthread_mutex_unlock(&off->mu);
            return helper_main(c);
        }
    }
    pthread_mutex_unlock(&off->mu);
    return NULL;
}

static void *helper_main(void *arg)
{
    crd__thread_enter("crd-offload");
    crd_client *c = arg;
    crd__offload *off = c->off;
    pthread_mutex_lock(&off->mu);
    off->starting--;
    for (;;) {
        off->idle++;
        while (off->head == NULL && !off->stop)
            pthread_cond_wait(&off->work, &off->mu);
        off->idle--;
        crd__job *j = off->head;
        if (j == NULL)
            break; /* stopping, nothing left */
        off->head = j->next;
        if (off->head == NULL)
            off->tail = NULL;
        off->queued--;
        bool detached = j->detached;
        /* Stopping: an operation's job still runs (its owner waits for it); a detached
         * one is only freed. */
        bool run = !(off->stop && detached);
        pthread_mutex_unlock(&off->mu);
        j->fn(j, run);
        pthread_mutex_lock(&off->mu);
        if (!detached) {
            j->done = true; /* the owner may free j from here on */
            pthread_cond_broadcast(&off->done);
        }
        if (!detached && !off->stop) {
            pthread_mutex_unlock(&off->mu);
            crd__pubsub_loop_notify(c);
            pthread_mutex_lock(&off->mu);
        }
    }
    pthread_mutex_unlock(&off->mu);
    return NULL;
}

crd_status crd__offload_init(crd_client *c)
{
    crd__offload *off = calloc(1, sizeof *off);
    if (off == NULL)
        return CRD_NO_MEMORY;
    bool work = pthread_cond_init(&off->work, NULL) == 0;
    bool grow = work && pthread_cond_init(&off->grow, NULL) == 0;
    if (!grow || crd__mutex_make(c, CRD__MU_OFFLOAD, &off->mu, &off->done) != 0) {
        if (grow)
            pthread_cond_destroy(&off->grow);
        if (work)
            pthread_cond_destroy(&off->work);
        free(off);
        return CRD_NO_MEMORY;
    }
    c->off = off;
    return CRD_OK;
}

bool crd__offload_run(crd_client *c, crd__job *j)
{
    crd__offload *off = c->off;
    j->c = c;
    j->done = false;
    j->next = NULL;
    pthread_mutex_lock(&off->mu);
    if (off->stop) {
        pthread_mutex_unlock(&off->mu);
        return false;
    }
    if (!off->has_starter) {
        off->pid = getpid();
        if (crd__thread_create(&off->starter, starter_main, c) != 0) {
            pthread_mutex_unlock(&off->mu);
            return false;
        }
        off->has_starter = true;
    }
    CRD__APPEND(off->head, off->tail, j, next);
    off->queued++;
    pthread_cond_signal(&off->work);
    if (short_of_helpers(off))
        pthread_cond_signal(&off->grow);
    pthread_mutex_unlock(&off->mu);
    return true;
}

bool crd__job_done(crd_client *c, crd__job *j)
{
    crd__offload *off = c->off;
    pthread_mutex_lock(&off->mu);
    bool done = j->done;
    pthread_mutex_unlock(&off->mu);
    return done;
}

void crd__job_wait(crd_client *c, crd__job *j)
{
    crd__offload *off = c->off;
    pthread_mutex_lock(&off->mu);
    while (!j->done)
        pthread_cond_wait(&off->done, &off->mu);
    pthread_mutex_unlock(&off->mu);
}

void crd__offload_stop(crd_client *c)
{
    crd__offload *off = c->off;
    if (off == NULL)
        return;
    c->off = NULL;
    c->fork_mu[CRD__MU_OFFLOAD] = NULL;
    if (off->pid != 0 && off->pid != getpid()) {
        /* A fork child: the helper ran in the parent only; its mutex may have been taken
         * there at the fork, so nothing of it is touched here. */
        free(off);
        return;
    }
    pthread_mutex_lock(&off->mu);
    off->stop = true;
    pthread_cond_broadcast(&off->work);
    pthread_cond_signal(&off->grow);
    bool has_starter = off->has_starter;
    pthread_mutex_unlock(&off->mu);
    if (has_starter)
        pthread_join(off->starter, NULL); /* no helper is added after this */
    for (int i = 0; i < off->started; i++)
        pthread_join(off->threads[i], NULL);
    /* Left when no helper was there to drop them (stopped before the first one ran):
     * only detached jobs can be, every operation's ended before this. */
    while (off->head != NULL) {
        crd__job *j = off->head;
        off->head = j->next;
        j->fn(j, false);
    }
    pthread_cond_destroy(&off->grow);
    pthread_cond_destroy(&off->done);
    pthread_cond_destroy(&off->work);
    pthread_mutex_destroy(&off->mu);
    free(off);
}

/* ---- a detached command: sent once, its reply ignored ------------------------------------ */

typedef struct detached_call {
    crd__job job; /* first: the job's address is the call's */
    int script, nkeys, nargs;
    const char *label;
    size_t *len;
    char **arg;
} detached_call;

static void run_detached(crd__job *j, bool run)
{
    detached_call *d = (detached_call *)j;
    if (run) {
        crd__cmd cmd;
        crd__cmd_init(&cmd, d->script, d->nkeys + d->nargs);
        for (int i = 0; i < d->nkeys + d->nargs; i++) {
            if (i < d->nkeys)
                crd__cmd_key(&cmd, d->arg[i], d->len[i]);
            else
                crd__cmd_arg(&cmd, d->arg[i], d->len[i]);
        }
        redisReply *r = NULL;
        if (crd__call(d->job.c, &cmd, d->label, &r, NULL) == CRD_OK)
            freeReplyObject(r);
        crd__cmd_free(&cmd);
    }
    free(d->arg);
    free(d);
}

bool crd__offload_call(crd_client *c, const crd__cmd *cmd, const char *label)
{
    int n = cmd->nkeys + cmd->nargs;
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += cmd->len[3 + i];
    detached_call *d = calloc(1, sizeof *d);
    /* One block: the pointers, the lengths, then the bytes. */
    char *block = malloc((size_t)n * (sizeof(char *) + sizeof(size_t)) + bytes + 1);
    if (d == NULL || block == NULL || cmd->oom) {
        free(d);
        free(block);
        return false;
    }
    d->arg = (char **)(void *)block;
    d->len = (size_t *)(void *)(block + (size_t)n * sizeof(char *));
    char *p = block + (size_t)n * (sizeof(char *) + sizeof(size_t));
    for (int i = 0; i < n; i++) {
        d->len[i] = cmd->len[3 + i];
        d->arg[i] = p;
        if (d->len[i] > 0)
            memcpy(p, cmd->v[3 + i], d->len[i]);
        p += d->len[i];
    }
    d->script = cmd->script;
    d->nkeys = cmd->nkeys;
    d->nargs = cmd->nargs;
    d->label = label;
    d->job.fn = run_detached;
    d->job.c = c;
    d->job.detached = true;
    if (crd__offload_run(c, &d->job))
        return true;
    free(block);
    free(d);
    return false;
}
