/*
 * doctor_findings.c -- what every check of `credisson doctor` goes through: recording a
 * finding, naming its own keys, and the raw commands that turn a server that stops
 * answering (a timeout, a closed connection, a proxy that refuses a command) into a
 * finding of its own. doctor.c (the command and the report), doctor_checks.c and
 * doctor_measure.c call it; it calls none of them. Main thread only.
 */
#include "doctor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- findings and raw commands ---------------------------------------------------------- */

void doctor_add(doctor *d, const char *check, int sev, const char *why, const char *fix,
                const char *fmt, ...)
{
    if (d->n == MAX_FINDINGS)
        return;
    finding *f = &d->f[d->n++];
    snprintf(f->check, sizeof f->check, "%s", check);
    f->sev = sev;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->summary, sizeof f->summary, fmt, ap);
    va_end(ap);
    snprintf(f->why, sizeof f->why, "%s", why != NULL ? why : "");
    snprintf(f->fix, sizeof f->fix, "%s", fix != NULL ? fix : "");
}

/* An own key: PREFIX:<pid>[tag]:<suffix>, remembered for the clean-up. */
const char *doctor_own_key(doctor *d, const char *suffix, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s:%s", d->keybase, d->tag, suffix);
    if (d->nkeys < 64)
        snprintf(d->keys[d->nkeys++], sizeof d->keys[0], "%s", buf);
    return buf;
}

/* A reply, or NULL after recording why the server stopped answering (and stopping). */
redisReply *doctor_ask(doctor *d, const char *what, int argc, const char *const *argv)
{
    if (d->stopped || d->c == NULL)
        return NULL;
    int64_t t0 = probe_now_us();
    redisReply *r = probe_cmd(d->c, argc, argv);
    if (r != NULL)
        return r;
    bool timeout = probe_timed_out(d->c) ||
                   probe_now_us() - t0 >= d->timeout_ms * 1000 - 50000;
    if (!timeout) {
        /* A proxy closes the connection on a command it does not forward (twemproxy does
         * on INFO, SCRIPT LOAD, SUBSCRIBE): said, and the checks go on afresh. */
        char err[300], closed[200];
        bool to;
        snprintf(closed, sizeof closed, "%s", d->c->errstr);
        redisFree(d->c);
        d->c = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
        if (d->c != NULL) {
            doctor_add(d, "proxy", SEV_WARN,
                "a proxy between the client and the server that refuses some commands by "
                "closing the connection: credisson survives what it knows of (SCRIPT LOAD "
                "falls back to EVAL), but waiters need SUBSCRIBE",
                "use a proxy that forwards scripts and pub/sub, or connect to the server",
                "the server closed the connection on %s (%s)", what, closed);
            return NULL;
        }
    }
    d->stopped = true;
    if (timeout)
        doctor_add(d, "timeout", SEV_FAIL,
            "the server accepted the connection but stopped answering: it is paused (CLIENT "
            "PAUSE), stalled (a fork, swap, SIGSTOP) or overloaded. Every lock call waits its "
            "whole deadline there, and a holder cannot renew: its locks expire",
            "find what stalls it (redis-cli --latency, the slow log, CLIENT LIST); doctor "
            "stopped checking here",
            "%s: no answer within %lld ms (timed out)", what, (long long)d->timeout_ms);
    else
        doctor_add(d, "connection", SEV_FAIL,
            "the server closed the connection: nothing more can be checked",
            "see the server's log", "%s: the connection failed and could not be opened again",
            what);
    return NULL;
}

redisReply *doctor_askv(doctor *d, const char *what, const char *first, ...)
{
    const char *argv[PROBE_MAX_WORDS];
    va_list ap;
    va_start(ap, first);
    int argc = probe_words(argv, first, ap);
    va_end(ap);
    return doctor_ask(d, what, argc, argv);
}

bool doctor_is_err(const redisReply *r, const char *code)
{
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (code == NULL || strncmp(r->str, code, strlen(code)) == 0);
}
