/*
 * doctor_measure.c -- the measurements of `credisson doctor` (doctor.h): this deployment's
 * floor (the round trip, the lock script, pub/sub delivery and sharded pub/sub) over raw
 * connections, and the library's own acquire+release pair and hand-off through the public
 * API, each into the session's measured values. Main thread, plus one subscriber thread
 * while pub/sub delivery is measured and one waiter thread while hand-offs are.
 */
#include "doctor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* ---- measurements ------------------------------------------------------------------------ */

typedef struct sub_ctx {
    redisContext *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long got;
    int64_t t_recv;
    atomic_bool failed;
} sub_ctx;

/* The subscriber's thread: counts the messages and notes when the last one came, until
 * the "stop" message or the connection's end (failed); each change is broadcast on cv. */
static void *sub_main(void *arg)
{
    sub_ctx *s = arg;
    bool stop = false;
    redisReply *r;
    while (!stop && (r = probe_next_reply(s->c)) != NULL) {
        int64_t t = probe_now_us();
        bool msg = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                   r->element[0]->type == REDIS_REPLY_STRING &&
                   strcmp(r->element[0]->str, "message") == 0;
        stop = msg && strcmp(r->element[2]->str, "stop") == 0;
        if (msg) {
            pthread_mutex_lock(&s->mu);
            s->got++;
            s->t_recv = t;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        freeReplyObject(r);
    }
    if (!stop) {
        atomic_store(&s->failed, true);
        pthread_mutex_lock(&s->mu);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

/* Unmeasured rounds before each measurement: a connection's, a thread's and a script's
 * first rounds (page faults, wake-ups of an idle CPU) are not the deployment's floor. */
static int warmup(const doctor *d) { return d->samples / 10 > 5 ? d->samples / 10 : 5; }

static void measure_raw(doctor *d)
{
    int n = d->samples, w = warmup(d);
    double *v = calloc((size_t)n, sizeof *v);
    if (v == NULL)
        return;
    for (int i = -w; i < n && !d->stopped; i++) {
        int64_t t0 = probe_now_us();
        redisReply *r = doctor_askv(d, "PING", "PING", NULL);
        if (i >= 0)
            v[i] = (double)(probe_now_us() - t0);
        if (r != NULL)
            freeReplyObject(r);
    }
    if (d->stopped) {
        free(v);
        return;
    }
    d->m.n = n;
    d->m.ping_p99 = probe_quantile(v, n, 0.99);
    d->m.ping_p50 = probe_quantile(v, n, 0.5);
    if (d->evalsha_ok && d->acq_sha[0]) {
        /* The lock script on a fresh key each time: the server work of an uncontended
         * acquire (credisson-bench's floor does the same). */
        char k[240];
        snprintf(k, sizeof k, "%s%s:floor", d->keybase, d->tag);
        size_t kl = strlen(k);
        for (int i = -w; i < n && !d->stopped; i++) {
            snprintf(k + kl, sizeof k - kl, ":%d", i);
            int64_t t0 = probe_now_us();
            redisReply *r = doctor_askv(d, "EVALSHA", "EVALSHA", d->acq_sha, "1", k, "10000",
                                 "00000000-0000-4000-8000-000000000000:1", NULL);
            if (i >= 0)
                v[i] = (double)(probe_now_us() - t0);
            if (r != NULL)
                freeReplyObject(r);
            if ((r = doctor_askv(d, "DEL", "DEL", k, NULL)) != NULL)
                freeReplyObject(r);
        }
        if (!d->stopped) {
            d->m.script_p99 = probe_quantile(v, n, 0.99);
            d->m.script_p50 = probe_quantile(v, n, 0.5);
            d->m.have_raw = true;
        }
    }
    free(v);
}

static void measure_pubsub(doctor *d)
{
    if (d->stopped || !d->pub_sha[0])
        return;
    char err[300];
    bool to;
    sub_ctx s;
    memset(&s, 0, sizeof s);
    s.c = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
    if (s.c == NULL)
        return;
    char ch[240];
    snprintf(ch, sizeof ch, "%s%s:pubsub", d->keybase, d->tag);
    redisReply *r = probe_cmdv(s.c, "SUBSCRIBE", ch, NULL);
    bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    char why[200];
    snprintf(why, sizeof why, "%s", probe_reply_why(s.c, r, "?"));
    if (r != NULL)
        freeReplyObject(r);
    if (!ok) {
        doctor_add(d, "pubsub", SEV_WARN,
            "waiters sleep until the holder's unlock message; without SUBSCRIBE they re-check "
            "every poll_interval_ms (1 s) instead, and a hand-off costs up to that",
            "allow SUBSCRIBE and the lock channels (&redisson_lock__channel:{...})",
            "SUBSCRIBE refused: %s", why);
        redisFree(s.c);
        return;
    }
    /* No deadline on the subscriber's reads: it waits for messages. */
    struct timeval none = {0, 0};
    redisSetTimeout(s.c, none);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, sub_main, &s) != 0) {
        redisFree(s.c);
        return;
    }
    int n = d->samples, w = warmup(d);
    double *v = calloc((size_t)n, sizeof *v);
    int got = 0;
    for (int i = -w; v != NULL && i <= n && !d->stopped && !atomic_load(&s.failed); i++) {
        bool last = i == n;
        pthread_mutex_lock(&s.mu);
        long want = s.got + 1;
        pthread_mutex_unlock(&s.mu);
        int64_t t0 = probe_now_us();
        r = doctor_askv(d, "the publish script", "EVALSHA", d->pub_sha, "1", ch,
                        last ? "stop" : "0", NULL);
        if (r != NULL)
            freeReplyObject(r);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)(d->timeout_ms / 1000) + 1;
        pthread_mutex_lock(&s.mu);
        while (s.got < want && !atomic_load(&s.failed) &&
               pthread_cond_timedwait(&s.cv, &s.mu, &until) == 0) {
        }
        bool arrived = s.got >= want;
        int64_t t1 = s.t_recv;
        pthread_mutex_unlock(&s.mu);
        if (!arrived)
            break;
        if (!last && i >= 0)
            v[got++] = (double)(t1 - t0);
    }
    if (got < n || d->stopped) {
        /* The thread may still wait: end its connection under it. */
        shutdown(s.c->fd, SHUT_RDWR);
    }
    pthread_join(th, NULL);
    redisFree(s.c);
    if (v != NULL && got == n) {
        d->m.pubsub_p99 = probe_quantile(v, n, 0.99);
        d->m.pubsub_p50 = probe_quantile(v, n, 0.5);
        d->m.have_pubsub = true;
        doctor_add(d, "pubsub", SEV_OK, NULL, NULL,
            "pub/sub delivers the unlock message (%d messages)", n);
    } else if (!d->stopped) {
        doctor_add(d, "pubsub", SEV_WARN,
            "waiters sleep until the holder's unlock message; when it does not arrive they wake "
            "only at the lock's TTL or every poll_interval_ms",
            "check what is between the client and the server (a proxy that does not forward "
            "pub/sub)", "a published message did not arrive within %lld ms (%d of %d did)",
            (long long)d->timeout_ms + 1000, got, n);
    }
    free(v);
}

/* Sharded pub/sub (Redis 7.0+): one SSUBSCRIBE and one SPUBLISH. A cluster client uses
 * it by default (Redisson's shardedSubscriptionMode AUTO), so there a refusal breaks the
 * waiters' wake-ups; elsewhere it is information. */
static void check_sharded(doctor *d)
{
    bool valkey = strcmp(d->server_name, "valkey") == 0;
    if (d->stopped || d->major == 0 || (!valkey && d->major < 7))
        return;
    bool cluster = d->t.kind == PROBE_CLUSTER;
    char err[300];
    bool to;
    redisContext *s = probe_connect(&d->t, &d->node, true, d->timeout_ms, err, sizeof err, &to);
    if (s == NULL)
        return;
    char ch[240];
    snprintf(ch, sizeof ch, "%s%s:sharded", d->keybase, d->tag);
    redisReply *r = probe_cmdv(s, "SSUBSCRIBE", ch, NULL);
    bool sub = r != NULL && r->type == REDIS_REPLY_ARRAY;
    char why[200];
    snprintf(why, sizeof why, "%s", probe_reply_why(s, r, "?"));
    if (r != NULL)
        freeReplyObject(r);
    bool got = false;
    if (sub) {
        redisReply *p = doctor_askv(d, "SPUBLISH", "SPUBLISH", ch, "doctor", NULL);
        if (p != NULL && p->type == REDIS_REPLY_ERROR)
            snprintf(why, sizeof why, "SPUBLISH: %s", p->str);
        bool published = p != NULL && p->type == REDIS_REPLY_INTEGER;
        if (p != NULL)
            freeReplyObject(p);
        redisReply *m = published ? probe_next_reply(s) : NULL;
        got = m != NULL && m->type == REDIS_REPLY_ARRAY;
        if (m != NULL)
            freeReplyObject(m);
        if (published && !got)
            snprintf(why, sizeof why, "the message did not arrive within %lld ms",
                     (long long)d->timeout_ms);
    }
    redisFree(s);
    if (got)
        doctor_add(d, "sharded-pubsub", SEV_OK, NULL, NULL, "SSUBSCRIBE and SPUBLISH deliver%s",
            cluster ? " (a cluster client's default for unlock messages)" : "");
    else
        doctor_add(d, "sharded-pubsub", cluster ? SEV_FAIL : SEV_OK,
            cluster ? "a cluster client publishes unlock messages with SPUBLISH and waits with "
                      "SSUBSCRIBE by default (as Java 3.22+ does): without them waiters wake only "
                      "at the lock's TTL"
                    : NULL,
            cluster ? "allow SSUBSCRIBE/SPUBLISH and the lock channels, or set sharded_pubsub "
                      "OFF in every client of the fleet"
                    : NULL,
            "sharded pub/sub does not work: %s%s", why,
            cluster ? "" : " (not used on a single server unless asked for)");
}

void doctor_measure_node(doctor *d)
{
    if (d->samples > 0) {
        measure_raw(d);
        measure_pubsub(d);
    }
    check_sharded(d);
}

/* The library's own pair and hand-off. */
typedef struct handoff_ctx {
    crd_lock *lock;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int round, done_round;
    int64_t t_acquired;
    crd_status st;
    bool quit;
} handoff_ctx;

static void *handoff_waiter(void *arg)
{
    handoff_ctx *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->round == h->done_round && !h->quit)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->quit)
            break;
        pthread_mutex_unlock(&h->mu);
        crd_status st = crd_lock_acquire(h->lock, 5000, 10000);
        int64_t t = probe_now_us();
        if (st == CRD_OK)
            crd_lock_release(h->lock);
        pthread_mutex_lock(&h->mu);
        h->st = st;
        h->t_acquired = t;
        h->done_round = h->round;
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static bool waiting_one(crd_client *c)
{
    crd_metrics m;
    return crd_client_metrics(c, &m, sizeof m) == CRD_OK && m.waiting_now >= 1;
}

void doctor_measure_library(doctor *d)
{
    crd_options o;
    probe_options(d->g, &o);
    o.command_timeout_ms = d->timeout_ms;
    o.connect_timeout_ms = d->timeout_ms;
    crd_client *a = NULL, *b = NULL;
    crd_status st = crd_client_new(&o, &a);
    if (st != CRD_OK) {
        doctor_add(d, "library", SEV_FAIL,
            "the library cannot start a client here: no lock can be taken",
            "see the words above", "crd_client_new: %s (%s)", crd_strerror(st),
            crd_client_errmsg(a));
        crd_client_free(a);
        return;
    }
    char name[240];
    snprintf(name, sizeof name, "%s%s:lock", d->keybase, d->tag);
    crd_lock *la = NULL;
    if (crd_lock_new(a, name, &la) != CRD_OK) {
        crd_client_free(a);
        return;
    }
    int n = d->samples;
    double *v = calloc((size_t)n, sizeof *v);
    int ok = 0;
    crd_status bad = CRD_OK;
    char bad_msg[400] = "";
    for (int i = -warmup(d); v != NULL && i < n; i++) {
        int64_t t0 = probe_now_us();
        st = crd_lock_acquire(la, 0, 10000);
        if (st == CRD_OK)
            st = crd_lock_release(la);
        if (st != CRD_OK) {
            bad = st;
            snprintf(bad_msg, sizeof bad_msg, "%s", crd_client_errmsg(a));
            break;
        }
        if (i >= 0)
            v[ok++] = (double)(probe_now_us() - t0);
    }
    if (bad != CRD_OK) {
        doctor_add(d, "library", SEV_FAIL,
            "an uncontended acquire and release must work on a healthy deployment",
            "see the library's words", "acquire+release: %s (%s)", crd_strerror(bad), bad_msg);
    } else if (ok == n && n > 0) {
        d->m.pair_p99 = probe_quantile(v, n, 0.99);
        d->m.pair_p50 = probe_quantile(v, n, 0.5);
        d->m.have_pair = true;
    }
    /* Hand-offs: a waiter in another client, woken by the release. */
    int rounds = n < 100 ? n : 100, done = 0;
    crd_lock *lb = NULL;
    if (v != NULL && bad == CRD_OK && crd_client_new(&o, &b) == CRD_OK &&
        crd_lock_new(b, name, &lb) == CRD_OK) {
        handoff_ctx h;
        memset(&h, 0, sizeof h);
        h.lock = lb;
        pthread_mutex_init(&h.mu, NULL);
        pthread_cond_init(&h.cv, NULL);
        pthread_t th;
        if (pthread_create(&th, NULL, handoff_waiter, &h) == 0) {
            for (int i = 0; i < rounds; i++) {
                if (crd_lock_acquire(la, 0, 10000) != CRD_OK)
                    break;
                pthread_mutex_lock(&h.mu);
                h.round++;
                pthread_cond_broadcast(&h.cv);
                pthread_mutex_unlock(&h.mu);
                /* The waiter must be asleep on the channel before the release. */
                int64_t until = probe_now_us() + 2000000;
                while (!waiting_one(b) && probe_now_us() < until) {
                    struct timespec ts = {0, 200000};
                    nanosleep(&ts, NULL);
                }
                int64_t t0 = probe_now_us();
                crd_lock_release(la);
                pthread_mutex_lock(&h.mu);
                while (h.done_round != h.round)
                    pthread_cond_wait(&h.cv, &h.mu);
                crd_status hs = h.st;
                int64_t t1 = h.t_acquired;
                pthread_mutex_unlock(&h.mu);
                if (hs != CRD_OK)
                    break;
                v[done++] = (double)(t1 - t0);
            }
            pthread_mutex_lock(&h.mu);
            h.quit = true;
            pthread_cond_broadcast(&h.cv);
            pthread_mutex_unlock(&h.mu);
            pthread_join(th, NULL);
        }
    }
    if (done > 0) {
        d->m.handoffs = done;
        d->m.handoff_p99 = probe_quantile(v, done, 0.99);
        d->m.handoff_p50 = probe_quantile(v, done, 0.5);
        d->m.have_handoff = true;
    }
    free(v);
    crd_lock_free(lb);
    crd_lock_free(la);
    crd_client_free(b);
    crd_client_free(a);
}
