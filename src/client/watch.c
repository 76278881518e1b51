/*
 * watch.c -- crd_watch_*: the hold and release events of a name, and the changes of a
 * semaphore's permits or a latch's count, as they happen (what `credisson watch` prints).
 *
 * Two connections of the watch's own, opened from the client's endpoint (the name's
 * primary on a cluster, the primary the sentinels name): one subscribed to every channel
 * an object of that name publishes on, with client tracking's invalidations redirected to
 * it and keyspace notifications of the name; one that re-reads the name (MULTI: TYPE,
 * HGETALL, PTTL, GET) on every message, when its TTL runs out (an expiry publishes
 * nothing), and every interval. The difference from the previous read becomes events,
 * queued and handed out one per crd_watch_next(). Each lock event names the process
 * behind its owner: the owner's identity record, read through the client (inspect.c's
 * cache, kept for the watch's life). The watch declares itself in the client's identity
 * record (ident.c), so a state read does not count its subscription as a waiter.
 *
 * Threads: the caller's, one at a time per watch; nothing runs on the client's threads.
 * Locks: none of its own.
 */
#include "inspect.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One holder as the watch last saw it. */
typedef struct wholder {
    char *owner;
    size_t len;
    int64_t count;
} wholder;

/* A read of the name: its holders, the read-write mode, the PTTL, a number it holds. */
typedef struct wsnap {
    wholder *h;
    size_t n;
    char mode[16];
    int64_t ttl;
    int64_t read_ms; /* monotonic */
    bool has_value;
    int64_t value;
} wsnap;

/* A queued event and the strings it owns. */
typedef struct qevent {
    crd_watch_event ev;
    char *owner, *detail;
    char mode[16];
} qevent;

enum { SYNC_SEMAPHORE = 1, SYNC_PERMITS, SYNC_LATCH };

struct crd_watch {
    crd_client *c;
    char *name;
    size_t nlen;
    int64_t interval_ms;
    crd__conn sub, rd;
    bool attached;
    bool started; /* the first read was made */
    char ks_prefix[48];
    crd__buf sem_ch, latch_ch;
    bool sync_warned;
    int sync_kind;
    wsnap cur;
    bool again;
    qevent *q;
    size_t qhead, qn, qcap;
    qevent out; /* the event last handed out, with its strings */
    char who_buf[1024];
    crd__idcache *ic;
    crd__ident_wait iw;
};

static void wsnap_free(wsnap *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->h[i].owner);
    free(s->h);
    s->h = NULL;
    s->n = 0;
}

static const wholder *wsnap_find(const wsnap *s, const wholder *h)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->h[i].len == h->len && memcmp(s->h[i].owner, h->owner, h->len) == 0)
            return &s->h[i];
    return NULL;
}

/* ---- the event queue ------------------------------------------------------------------- */

static qevent *push(crd_watch *w, crd_watch_kind kind)
{
    if (w->qhead + w->qn == w->qcap) {
        if (w->qhead > 0) {
            memmove(w->q, w->q + w->qhead, w->qn * sizeof *w->q);
            w->qhead = 0;
        } else {
            qevent *p = crd__grow(w->q, &w->qcap, w->qn + 1, sizeof *p, 16);
            if (p == NULL)
                return NULL;
            w->q = p;
        }
    }
    qevent *e = &w->q[w->qhead + w->qn++];
    memset(e, 0, sizeof *e);
    e->ev.kind = kind;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    e->ev.time_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    e->ev.name = w->name;
    e->ev.name_len = w->nlen;
    e->ev.ttl_ms = -1;
    e->ev.cause = e->ev.mode = e->ev.owner = e->ev.detail = "";
    return e;
}

static void notice(crd_watch *w, const char *fmt, ...) CRD__PRINTF(2, 3);
static void notice(crd_watch *w, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    qevent *e = push(w, CRD_WATCH_NOTICE);
    if (e != NULL && (e->detail = strdup(msg)) != NULL)
        e->ev.detail = e->detail;
}

static void lock_event(crd_watch *w, crd_watch_kind kind, const wholder *h, const wsnap *s,
                       const char *cause)
{
    qevent *e = push(w, kind);
    if (e == NULL || (e->owner = strndup(h->owner, h->len)) == NULL)
        return;
    e->ev.owner = e->owner;
    if (cause != NULL) {
        e->ev.cause = cause;
    } else {
        e->ev.count = h->count;
        e->ev.ttl_ms = s->ttl;
        snprintf(e->mode, sizeof e->mode, "%s", s->mode);
        e->ev.mode = e->mode;
    }
}

static void sync_event(crd_watch *w, crd_watch_kind kind, int64_t value)
{
    qevent *e = push(w, kind);
    if (e == NULL)
        return;
    e->ev.object = w->sync_kind == SYNC_LATCH     ? CRD_KIND_LATCH
                   : w->sync_kind == SYNC_PERMITS ? CRD_KIND_PERMIT_SEMAPHORE
                                                  : CRD_KIND_SEMAPHORE;
    if (w->sync_kind == SYNC_LATCH)
        e->ev.count = value;
    else
        e->ev.available = value;
}

/* ---- the connections ----------------------------------------------------------------------- */

/* Pipelining: a command sent now. */
static bool send_cmd(crd__conn *conn, int argc, const char **argv, const size_t *lens)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    const char *why = NULL;
    bool ok = conn->ctx != NULL && !conn->broken &&
              crd__resp_append(&buf, &len, &cap, argc, argv, lens) &&
              crd__conn_send(conn, buf, len, &why);
    free(buf);
    if (!ok && conn->ctx != NULL) {
        conn->broken = true;
        snprintf(conn->ctx->errstr, sizeof conn->ctx->errstr, "%s",
                 why != NULL ? why : "sending failed");
    }
    return ok;
}

static int get_reply(crd__conn *conn, redisReply **out)
{
    *out = NULL;
    if (conn->ctx == NULL || conn->broken)
        return REDIS_ERR;
    int rc = crd__conn_read(conn, out);
    if (rc != REDIS_OK)
        conn->broken = true;
    return rc;
}

static const char *conn_err(const crd_watch *w, const crd__conn *conn)
{
    if (conn->ctx != NULL && conn->ctx->errstr[0] != '\0')
        return conn->ctx->errstr;
    const char *m = crd_client_errmsg(w->c);
    return m != NULL && *m ? m : "connection closed";
}

static redisReply *command(crd_watch *w, crd__conn *conn, int argc, const char **argv,
                           const size_t *lens)
{
    redisReply *r = NULL;
    if (crd__conn_command(w->c, conn, argc, argv, lens, &r) != CRD_OK)
        return NULL;
    return r;
}

/* A connection to the node serving the name (the primary, or its slot's on a cluster). */
static crd_status open_conn(crd_watch *w, crd__conn *conn)
{
    crd_client *c = w->c;
    memset(conn, 0, sizeof *conn);
    crd__pool *routed = c->cluster != NULL ? crd__pool_for(c, w->name, w->nlen) : NULL;
    if (routed == NULL)
        return crd__conn_open_primary(c, conn);
    crd__endpoint ep = *crd__pool_ep(routed);
    ep.username = c->ep.username;
    ep.password = c->ep.password;
    ep.db = c->ep.db;
    ep.tls = c->ep.tls;
    return crd__conn_open(c, &ep, conn);
}

static void detach(crd_watch *w)
{
    crd__conn_close(&w->sub);
    crd__conn_close(&w->rd);
    w->attached = false;
}

/* pattern := s with PSUBSCRIBE's glob characters escaped, then ":*". */
static char *glob_escaped_children(const char *s, size_t n)
{
    char *p = malloc(2 * n + 3);
    if (p == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("*?[]\\", s[i]) != NULL && s[i] != '\0')
            p[o++] = '\\';
        p[o++] = s[i];
    }
    memcpy(p + o, ":*", 3);
    return p;
}

/* Subscribes w->sub to the channels every kind of object of the name publishes on, the
 * fair waiters' own channels (a pattern), keyspace notifications of the name, and client
 * tracking's invalidations. */
static crd_status subscribe(crd_watch *w)
{
    crd_client *c = w->c;
    bool sharded = c->cluster != NULL && c->sharded;
    int replies = sharded ? 11 : 7; /* SUBSCRIBE 4, PSUBSCRIBE 1, SUBSCRIBE 1 + 1; + S... */
    crd__buf lock_ch = {0}, rw_ch = {0};
    crd__derived_name(CRD__LOCK_CHANNEL, w->name, w->nlen, &lock_ch);
    crd__derived_name(CRD__RW_CHANNEL, w->name, w->nlen, &rw_ch);
    char *waiters = lock_ch.p ? glob_escaped_children(lock_ch.p, lock_ch.len) : NULL;
    snprintf(w->ks_prefix, sizeof w->ks_prefix, "__keyspace@%d__:", c->ep.db);
    size_t kslen = strlen(w->ks_prefix);
    char *ks_ch = malloc(kslen + w->nlen + 1);
    crd_status st = CRD_OK;
    if (w->sem_ch.p == NULL &&
        (crd__derived_name(CRD__SEMAPHORE_CHANNEL, w->name, w->nlen, &w->sem_ch) != CRD_OK ||
         crd__latch_channel_name(w->name, w->nlen, &w->latch_ch) != CRD_OK)) {
        free(w->sem_ch.p);
        w->sem_ch.p = NULL;
    }
    if (lock_ch.p == NULL || rw_ch.p == NULL || waiters == NULL || ks_ch == NULL ||
        w->sem_ch.p == NULL || w->latch_ch.p == NULL) {
        st = crd__fail(c, CRD_NO_MEMORY, "cannot build the watch's subscriptions");
    } else {
        memcpy(ks_ch, w->ks_prefix, kslen);
        memcpy(ks_ch + kslen, w->name, w->nlen);
        ks_ch[kslen + w->nlen] = '\0';
        const char *sargv[5] = {"SUBSCRIBE", lock_ch.p, rw_ch.p, ks_ch, "__redis__:invalidate"};
        size_t slens[5] = {9, lock_ch.len, rw_ch.len, kslen + w->nlen, 20};
        send_cmd(&w->sub, 5, sargv, slens);
        const char *pargv[2] = {"PSUBSCRIBE", waiters};
        size_t plens[2] = {10, strlen(waiters)};
        send_cmd(&w->sub, 2, pargv, plens);
        /* One command each: a user whose ACL lacks them gets one error reply for each. */
        const char *yargv[2] = {"SUBSCRIBE", w->sem_ch.p};
        size_t ylens[2] = {9, w->sem_ch.len};
        send_cmd(&w->sub, 2, yargv, ylens);
        yargv[1] = w->latch_ch.p;
        ylens[1] = w->latch_ch.len;
        send_cmd(&w->sub, 2, yargv, ylens);
        if (sharded) {
            /* Unlocks SPUBLISH on the node serving the name's slot, which this is. */
            const char *ssargv[3] = {"SSUBSCRIBE", lock_ch.p, rw_ch.p};
            size_t sslens[3] = {10, lock_ch.len, rw_ch.len};
            send_cmd(&w->sub, 3, ssargv, sslens);
            ssargv[1] = w->sem_ch.p;
            sslens[1] = w->sem_ch.len;
            send_cmd(&w->sub, 2, ssargv, sslens);
            ssargv[1] = w->latch_ch.p;
            sslens[1] = w->latch_ch.len;
            send_cmd(&w->sub, 2, ssargv, sslens);
        }
    }
    free(lock_ch.p);
    free(rw_ch.p);
    free(waiters);
    free(ks_ch);
    for (int i = 0; i < replies && st == CRD_OK; i++) {
        redisReply *r = NULL;
        if (get_reply(&w->sub, &r) != REDIS_OK) {
            st = crd__fail(c, CRD_IO, "subscribing failed: %s", conn_err(w, &w->sub));
        } else if ((i == 5 || i == 6 || i == 9 || i == 10) && r->type == REDIS_REPLY_ERROR) {
            if (!w->sync_warned)
                notice(w, "warning: semaphore and latch channels not watched (%s): their "
                       "changes show at the next read", r->str);
            w->sync_warned = true;
        } else if (i == 4 && r->type == REDIS_REPLY_ERROR) {
            /* A least-privilege user may not PSUBSCRIBE (Redis matches a pattern against
             * the granted ones literally). */
            notice(w, "warning: fair-lock waiters' channels not watched (%s): their "
                   "hand-offs show at the next read", r->str);
        } else if (r->type != REDIS_REPLY_ARRAY) {
            st = crd__fail(c, r->type == REDIS_REPLY_ERROR ? CRD_SERVER : CRD_PROTOCOL,
                           "subscribing failed: %s",
                           r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        }
        freeReplyObject(r);
    }
    return st;
}

/* Whether the server sends keyspace notifications of a lock's changes: 1, 0, or -1 when
 * it gave no answer at all. */
static int keyspace_notifications_on(crd_watch *w)
{
    const char *argv[3] = {"CONFIG", "GET", "notify-keyspace-events"};
    size_t lens[3] = {6, 3, 22};
    redisReply *r = command(w, &w->rd, 3, argv, lens);
    if (r == NULL)
        return -1;
    int on = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING) {
        const char *f = r->element[1]->str;
        on = strchr(f, 'K') != NULL &&
             (strchr(f, 'A') != NULL || strchr(f, 'h') != NULL || strchr(f, 'g') != NULL);
    }
    freeReplyObject(r);
    return on;
}

/* An acquire publishes nothing: client tracking (Redis >= 6) redirects the invalidations
 * of every key starting with the name to the subscribed connection. Without it and
 * without keyspace notifications, a notice says what can be missed. */
static void track_changes(crd_watch *w, const redisReply *id)
{
    bool tracking = false;
    if (id->type == REDIS_REPLY_INTEGER) {
        char idbuf[24];
        snprintf(idbuf, sizeof idbuf, "%lld", id->integer);
        const char *tv[7] = {"CLIENT", "TRACKING", "on", "REDIRECT", idbuf, "BCAST", "PREFIX"};
        const char *argv[8];
        size_t lens[8];
        for (int i = 0; i < 7; i++) {
            argv[i] = tv[i];
            lens[i] = strlen(tv[i]);
        }
        argv[7] = w->name;
        lens[7] = w->nlen;
        redisReply *t = command(w, &w->rd, 8, argv, lens);
        if (t == NULL)
            return; /* the next read says what failed */
        tracking = t->type == REDIS_REPLY_STATUS;
        freeReplyObject(t);
    }
    if (!tracking && keyspace_notifications_on(w) == 0)
        notice(w, "warning: this server offers neither client tracking (Redis >= 6, CLIENT "
               "allowed) nor keyspace notifications (notify-keyspace-events Kgh), so an "
               "acquire shows only at the next read: a hold shorter than --interval (%lld ms) "
               "can be missed", (long long)w->interval_ms);
}

static crd_status attach(crd_watch *w)
{
    crd_status st = open_conn(w, &w->sub);
    if (st == CRD_OK && (st = open_conn(w, &w->rd)) != CRD_OK)
        crd__conn_close(&w->sub);
    if (st != CRD_OK)
        return st;
    const char *idv[2] = {"CLIENT", "ID"};
    size_t idl[2] = {6, 2};
    redisReply *id = command(w, &w->sub, 2, idv, idl);
    if (id == NULL)
        st = crd__fail(w->c, CRD_IO, "connection error: %s", conn_err(w, &w->sub));
    if (st == CRD_OK)
        st = subscribe(w);
    if (st == CRD_OK)
        track_changes(w, id);
    if (id != NULL)
        freeReplyObject(id);
    if (st != CRD_OK) {
        detach(w);
        return st;
    }
    w->attached = true;
    return CRD_OK;
}

/* ---- reading the name -------------------------------------------------------------------- */

static bool parse_i64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 20)
        return false;
    char buf[24];
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno != 0 || end != buf + len)
        return false;
    *out = x;
    return true;
}

/* A grouped multi-lock's value field F (its 22-character hash, no ':'); its bookkeeping
 * fields F:<owner>:lock_count and F:<owner>:expire_time have ':' right after F. No lock
 * owner field looks so (theirs have a uuid, 36 characters, before the first ':'). */
#define GROUP_FIELD 22

static bool group_value_field(const redisReply *f)
{
    return f->len == GROUP_FIELD && memchr(f->str, ':', f->len) == NULL;
}

static bool group_bookkeeping_field(const redisReply *f)
{
    return f->len > GROUP_FIELD && f->str[GROUP_FIELD] == ':' &&
           memchr(f->str, ':', GROUP_FIELD) == NULL;
}

/* out's holder owner (len bytes), added with count 0 when new; NULL when out of memory. */
static wholder *holder_of(wsnap *out, const char *owner, size_t len)
{
    for (size_t k = 0; k < out->n; k++)
        if (out->h[k].len == len && memcmp(out->h[k].owner, owner, len) == 0)
            return &out->h[k];
    wholder *h = &out->h[out->n];
    if ((h->owner = malloc(len + 1)) == NULL)
        return NULL;
    memcpy(h->owner, owner, len);
    h->owner[len] = '\0';
    h->len = len;
    h->count = 0;
    out->n++;
    return h;
}

/* The holders of a HGETALL reply: fields whose values are counts ("mode" read aside); of
 * a grouped multi-lock, the owners its value fields name, each counting the values it
 * holds (as crd_state_read reads it). */
static bool fill_holders(const redisReply *hash, wsnap *out)
{
    out->h = calloc(hash->elements / 2 + 1, sizeof *out->h);
    if (out->h == NULL)
        return false;
    for (size_t i = 0; i + 1 < hash->elements; i += 2) {
        const redisReply *f = hash->element[i], *v = hash->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
            continue;
        if (f->len == 4 && memcmp(f->str, "mode", 4) == 0) {
            snprintf(out->mode, sizeof out->mode, "%.*s", (int)v->len, v->str);
            continue;
        }
        if (group_bookkeeping_field(f))
            continue;
        int64_t count;
        bool is_count = parse_i64(v->str, v->len, &count);
        wholder *h = NULL;
        if (group_value_field(f) && !is_count) {
            if ((h = holder_of(out, v->str, v->len)) != NULL)
                h->count++;
        } else if (is_count && (h = holder_of(out, f->str, f->len)) != NULL) {
            h->count = count;
        }
    }
    return true;
}

/* Reads the name in one MULTI/EXEC (TYPE, HGETALL, PTTL, GET) into *out. */
static crd_status watch_read(crd_watch *w, wsnap *out)
{
    const char *cmds[6][2] = {{"MULTI"},         {"TYPE", w->name}, {"HGETALL", w->name},
                              {"PTTL", w->name}, {"GET", w->name},  {"EXEC"}};
    const int argcs[6] = {1, 2, 2, 2, 2, 1};
    for (int i = 0; i < 6; i++) {
        size_t lens[2] = {strlen(cmds[i][0]), w->nlen};
        send_cmd(&w->rd, argcs[i], cmds[i], lens);
    }
    redisReply *exec = NULL;
    for (int i = 0; i < 6; i++) {
        redisReply *r = NULL;
        if (get_reply(&w->rd, &r) != REDIS_OK) {
            if (exec != NULL)
                freeReplyObject(exec);
            return crd__fail(w->c, CRD_IO, "reading '%.*s' failed: %s", (int)w->nlen, w->name,
                             conn_err(w, &w->rd));
        }
        if (i == 5)
            exec = r;
        else
            freeReplyObject(r);
    }
    if (exec == NULL || exec->type != REDIS_REPLY_ARRAY || exec->elements != 4 ||
        exec->element[0]->type != REDIS_REPLY_STATUS ||
        exec->element[2]->type != REDIS_REPLY_INTEGER) {
        crd_status st = crd__fail(w->c, exec && exec->type == REDIS_REPLY_ERROR ? CRD_SERVER
                                                                                : CRD_PROTOCOL,
                                  "unexpected reply reading '%.*s'%s%s", (int)w->nlen, w->name,
                                  exec && exec->type == REDIS_REPLY_ERROR ? ": " : "",
                                  exec && exec->type == REDIS_REPLY_ERROR ? exec->str : "");
        if (exec != NULL)
            freeReplyObject(exec);
        return st;
    }
    memset(out, 0, sizeof *out);
    out->ttl = exec->element[2]->integer;
    out->read_ms = crd__now_ms();
    const redisReply *v = exec->element[3];
    if (v->type == REDIS_REPLY_STRING && parse_i64(v->str, v->len, &out->value))
        out->has_value = true;
    crd_status st = CRD_OK;
    if (strcmp(exec->element[0]->str, "hash") == 0 && exec->element[1]->type == REDIS_REPLY_ARRAY &&
        !fill_holders(exec->element[1], out)) {
        st = crd__fail(w->c, CRD_NO_MEMORY, "cannot keep the holders");
        wsnap_free(out);
    }
    freeReplyObject(exec);
    return st;
}

/* At start the name holds a number: a permit semaphore has its permit set; a latch, a
 * waiter on its channel other than this watch; else a semaphore. */
static void classify(crd_watch *w)
{
    crd__buf zset = {0};
    if (crd__timeouts_name(w->name, w->nlen, &zset) == CRD_OK) {
        const char *argv[2] = {"EXISTS", zset.p};
        size_t lens[2] = {6, zset.len};
        redisReply *r = command(w, &w->rd, 2, argv, lens);
        if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 0)
            w->sync_kind = SYNC_PERMITS;
        if (r != NULL)
            freeReplyObject(r);
    }
    free(zset.p);
    if (w->sync_kind != 0)
        return;
    static const char *const sub[2] = {"NUMSUB", "SHARDNUMSUB"};
    bool sharded = w->c->cluster != NULL && w->c->sharded;
    w->sync_kind = SYNC_SEMAPHORE;
    for (int i = 0; i < (sharded ? 2 : 1); i++) {
        const char *argv[3] = {"PUBSUB", sub[i], w->latch_ch.p};
        size_t lens[3] = {6, strlen(sub[i]), w->latch_ch.len};
        redisReply *r = command(w, &w->rd, 3, argv, lens);
        if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            r->element[1]->type == REDIS_REPLY_INTEGER && r->element[1]->integer > 1)
            w->sync_kind = SYNC_LATCH;
        if (r != NULL)
            freeReplyObject(r);
    }
}

/* The events that turn old into cur, releases first. */
static void diff(crd_watch *w, const wsnap *old, const wsnap *cur, const char *cause)
{
    for (size_t i = 0; i < old->n; i++)
        if (wsnap_find(cur, &old->h[i]) == NULL)
            lock_event(w, CRD_WATCH_RELEASE, &old->h[i], cur, cause);
    for (size_t i = 0; i < cur->n; i++) {
        const wholder *was = wsnap_find(old, &cur->h[i]);
        if (was == NULL || was->count != cur->h[i].count)
            lock_event(w, was == NULL ? CRD_WATCH_ACQUIRE : CRD_WATCH_COUNT, &cur->h[i], cur,
                       NULL);
    }
    if (!old->has_value && !cur->has_value)
        return;
    int64_t was = old->has_value ? old->value : 0, now = cur->has_value ? cur->value : 0;
    if (old->has_value == cur->has_value && was == now)
        return;
    if (w->sync_kind == 0)
        w->sync_kind = SYNC_SEMAPHORE;
    sync_event(w, w->sync_kind == SYNC_LATCH ? CRD_WATCH_LATCH : CRD_WATCH_PERMITS, now);
}

/* ---- waiting for news ---------------------------------------------------------------------- */

typedef struct news {
    bool message;      /* anything: re-read */
    bool published;    /* on an object's own channel: an unlock or force-unlock */
    bool expired_note; /* a keyspace notification said the key expired */
    int sync_kind;     /* a message on the semaphores' or the latch's channel */
} news;

static bool is_channel(const redisReply *ch, const crd__buf *b)
{
    return ch->type == REDIS_REPLY_STRING && b->p != NULL && ch->len == b->len &&
           memcmp(ch->str, b->p, b->len) == 0;
}

static bool is_change_feed(const crd_watch *w, const redisReply *ch)
{
    static const char inval[] = "__redis__:invalidate";
    size_t kslen = strlen(w->ks_prefix);
    if (ch->type != REDIS_REPLY_STRING)
        return false;
    return (ch->len > kslen && memcmp(ch->str, w->ks_prefix, kslen) == 0) ||
           (ch->len == sizeof inval - 1 && memcmp(ch->str, inval, ch->len) == 0);
}

/* The messages already read; false on a protocol error. */
static bool take_buffered(crd_watch *w, news *n)
{
    size_t kslen = strlen(w->ks_prefix);
    for (;;) {
        void *rv = NULL;
        if (redisGetReplyFromReader(w->sub.ctx, &rv) != REDIS_OK) {
            w->sub.broken = true;
            return false;
        }
        redisReply *m = rv;
        if (m == NULL)
            return true;
        if (m->type == REDIS_REPLY_ARRAY && m->elements >= 3) {
            n->message = true;
            redisReply *payload = m->element[m->elements - 1];
            redisReply *ch = m->element[m->elements - 2];
            if (is_channel(ch, &w->latch_ch))
                n->sync_kind = SYNC_LATCH;
            else if (is_channel(ch, &w->sem_ch))
                n->sync_kind = SYNC_SEMAPHORE;
            else if (!is_change_feed(w, ch))
                n->published = true;
            else if (ch->len > kslen && memcmp(ch->str, w->ks_prefix, kslen) == 0 &&
                     payload->type == REDIS_REPLY_STRING && strcmp(payload->str, "expired") == 0)
                n->expired_note = true;
        }
        freeReplyObject(m);
    }
}

/* Waits for a message or until `until` (monotonic ms). CRD_OK, or CRD_IO (connection). */
static crd_status wait_for_news(crd_watch *w, int64_t until, news *n)
{
    for (;;) {
        if (!take_buffered(w, n))
            return crd__fail(w->c, CRD_IO, "connection error: %s", conn_err(w, &w->sub));
        if (n->message)
            return CRD_OK;
        int64_t now = crd__now_ms();
        if (now >= until)
            return CRD_OK;
        struct pollfd pfd = {.fd = w->sub.ctx->fd, .events = POLLIN};
        int left = (int)(until - now > 60000 ? 60000 : until - now);
        /* TLS may hold bytes it already read: parse them before waiting on the socket. */
        int k = crd__conn_buffered(&w->sub) ? 1 : poll(&pfd, 1, left);
        if (k < 0 && errno != EINTR)
            return crd__fail(w->c, CRD_IO, "poll: %s", strerror(errno));
        if (k > 0 && crd__conn_fill(&w->sub) != REDIS_OK) {
            w->sub.broken = true;
            return crd__fail(w->c, CRD_IO, "connection lost: %s", conn_err(w, &w->sub));
        }
    }
}

/* What has arrived by now, without waiting: an unlock publishes after the change a
 * notification reported, so its message may come just after the read it caused. */
static crd_status take_arrived(crd_watch *w, news *n)
{
    struct pollfd pfd = {.fd = w->sub.ctx->fd, .events = POLLIN};
    if ((crd__conn_buffered(&w->sub) || poll(&pfd, 1, 0) > 0) &&
        crd__conn_fill(&w->sub) != REDIS_OK) {
        w->sub.broken = true;
        return crd__fail(w->c, CRD_IO, "connection lost: %s", conn_err(w, &w->sub));
    }
    return take_buffered(w, n) ? CRD_OK
                               : crd__fail(w->c, CRD_IO, "connection error: %s",
                                           conn_err(w, &w->sub));
}

static const char *release_cause(const news *n, const wsnap *old, const wsnap *cur)
{
    if (n->expired_note)
        return "expired";
    if (n->published)
        return "unlock";
    if (old->ttl >= 0 && cur->read_ms - old->read_ms + 5 >= old->ttl)
        return "expired";
    return "removed";
}

/* Sentinel mode: the primary went away. Attaches again to whatever primary the sentinels
 * name now, every 250 ms until `until`. */
static bool follow_primary(crd_watch *w, int64_t until)
{
    if (!crd__topology_sentinel(w->c))
        return false;
    notice(w, "the connection to the primary was lost; following the sentinels to the new "
           "primary");
    detach(w);
    while (crd__now_ms() < until) {
        crd__topology_changed(w->c, 0);
        if (attach(w) == CRD_OK) {
            notice(w, "watching again on the new primary");
            return true;
        }
        struct timespec ts = {0, 250 * 1000000L}; /* a failover takes seconds */
        nanosleep(&ts, NULL);
    }
    return false;
}

/* ---- the API ----------------------------------------------------------------------------- */

crd_status crd_watch_new(crd_client *c, const char *name, size_t len, int64_t interval_ms,
                         crd_watch **out)
{
    if (interval_ms == 0)
        interval_ms = 250;
    if (out != NULL)
        *out = NULL;
    crd_status st = crd__check_call(c, out, "", name, len, false);
    if (st != CRD_OK || out == NULL) /* for clang's analyzer (checked) */
        return st;
    if (interval_ms < 10 || interval_ms > CRD_DURATION_MAX_MS)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "interval_ms must be 10..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)interval_ms);
    crd_watch *w = calloc(1, sizeof *w);
    if (w == NULL || (w->name = malloc(len + 1)) == NULL || (w->ic = crd__idcache_new()) == NULL) {
        if (w != NULL)
            free(w->name);
        free(w);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a watch");
    }
    memcpy(w->name, name, len);
    w->name[len] = '\0';
    w->nlen = len;
    w->c = c;
    w->interval_ms = interval_ms;
    /* Subscribed first, then the first read (crd_watch_next): no change falls between. */
    if ((st = attach(w)) != CRD_OK) {
        crd_watch_free(w);
        return st;
    }
    crd__ident_watch_begin(c, &w->iw, w->name, w->nlen);
    *out = w;
    crd__ok(c);
    return CRD_OK;
}

void crd_watch_free(crd_watch *w)
{
    if (w == NULL)
        return;
    crd__ident_wait_end(w->c, &w->iw);
    detach(w);
    wsnap_free(&w->cur);
    for (size_t i = w->qhead; i < w->qhead + w->qn; i++) {
        free(w->q[i].owner);
        free(w->q[i].detail);
    }
    free(w->q);
    free(w->out.owner);
    free(w->out.detail);
    free(w->sem_ch.p);
    free(w->latch_ch.p);
    crd__idcache_free(w->ic);
    free(w->name);
    free(w);
}

/* Hands out the queue's first event: its strings move to w->out; lock events get who. */
static const crd_watch_event *pop(crd_watch *w)
{
    free(w->out.owner);
    free(w->out.detail);
    w->out = w->q[w->qhead];
    w->qhead++;
    w->qn--;
    crd_watch_event *ev = &w->out.ev;
    if (w->out.mode[0] != '\0')
        ev->mode = w->out.mode;
    memset(&ev->who, 0, sizeof ev->who);
    ev->who.client_id = ev->who.host = ev->who.program = ev->who.label = ev->who.version =
        ev->who.connections = "";
    if (w->out.owner != NULL) {
        crd_identity who;
        crd__idcache_who(w->c, w->ic, w->out.owner, strlen(w->out.owner), &who);
        /* Copied: the cache's strings move when it reads more. */
        size_t o = 0;
        const char *src[5] = {who.host, who.program, who.label, who.version, ""};
        const char **dst[5] = {&ev->who.host, &ev->who.program, &ev->who.label,
                               &ev->who.version, &ev->who.client_id};
        for (int i = 0; i < 5; i++) {
            const char *s = i < 4 ? src[i] : w->out.owner;
            size_t l = strlen(s);
            if (i == 4) { /* the owner's client part: before ":<id>" (":write" aside) */
                if (l > 6 && strcmp(s + l - 6, ":write") == 0)
                    l -= 6;
                while (l > 0 && s[l - 1] >= '0' && s[l - 1] <= '9')
                    l--;
                if (l > 0 && s[l - 1] == ':')
                    l--;
            }
            if (o + l + 1 > sizeof w->who_buf)
                l = 0;
            memcpy(w->who_buf + o, s, l);
            w->who_buf[o + l] = '\0';
            *dst[i] = w->who_buf + o;
            o += l + 1;
        }
        ev->who.known = who.known;
        ev->who.pid = who.pid;
        ev->who.started_ms = who.started_ms;
        ev->who.thread = who.thread;
    }
    return ev;
}

crd_status crd_watch_next(crd_watch *w, int64_t timeout_ms, const crd_watch_event **ev)
{
    if (ev != NULL)
        *ev = NULL;
    if (w == NULL || ev == NULL)
        return crd__fail(w != NULL ? w->c : NULL, CRD_INVALID_ARGUMENT, "watch or ev is NULL");
    crd_status st = crd__client_check(w->c);
    if (st != CRD_OK)
        return st;
    if (timeout_ms < -1 || timeout_ms > CRD_DURATION_MAX_MS)
        return crd__fail(w->c, CRD_INVALID_ARGUMENT, "timeout_ms must be -1..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)timeout_ms);
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : crd__now_ms() + timeout_ms;
    if (w->qn > 0) {
        *ev = pop(w);
        return CRD_OK;
    }
    if (!w->started) {
        if ((st = watch_read(w, &w->cur)) != CRD_OK)
            return st;
        w->started = true;
        for (size_t i = 0; i < w->cur.n; i++)
            lock_event(w, CRD_WATCH_HELD, &w->cur.h[i], &w->cur, NULL);
        if (w->cur.has_value) {
            classify(w);
            sync_event(w, CRD_WATCH_FOUND, w->cur.value);
        }
        if (w->qn > 0) {
            *ev = pop(w);
            return CRD_OK;
        }
    }
    for (;;) {
        int64_t now = crd__now_ms();
        /* The next read: after the interval, or just after the key's TTL runs out. */
        int64_t next = w->again ? now : w->cur.read_ms + w->interval_ms;
        if (w->cur.ttl >= 0 && w->cur.read_ms + w->cur.ttl + 2 < next)
            next = w->cur.read_ms + w->cur.ttl + 2;
        news n = {.message = w->again};
        st = w->attached ? wait_for_news(w, next < deadline ? next : deadline, &n) : CRD_IO;
        int64_t follow_until = deadline != INT64_MAX ? deadline : crd__now_ms() + 60000;
        if (st == CRD_IO && follow_primary(w, follow_until)) {
            w->again = true;
            *ev = pop(w);
            return CRD_OK;
        }
        if (st != CRD_OK)
            return st;
        if (!n.message && crd__now_ms() >= deadline && crd__now_ms() < next)
            return crd__fail(w->c, CRD_TIMEOUT, "no event within %lld ms", (long long)timeout_ms);
        wsnap old = w->cur;
        if ((st = watch_read(w, &w->cur)) != CRD_OK) {
            w->cur = old;
            if (follow_primary(w, follow_until)) {
                w->again = true;
                *ev = pop(w);
                return CRD_OK;
            }
            return st;
        }
        news late = {0};
        if (n.message && !n.published && (st = take_arrived(w, &late)) != CRD_OK) {
            wsnap_free(&old);
            return st;
        }
        n.published |= late.published;
        w->again = late.message;
        int kind = late.sync_kind != 0 ? late.sync_kind : n.sync_kind;
        if (kind == SYNC_LATCH || (kind == SYNC_SEMAPHORE && w->sync_kind != SYNC_PERMITS))
            w->sync_kind = kind;
        diff(w, &old, &w->cur, release_cause(&n, &old, &w->cur));
        wsnap_free(&old);
        if (w->qn > 0) {
            *ev = pop(w);
            return CRD_OK;
        }
        if (crd__now_ms() >= deadline)
            return crd__fail(w->c, CRD_TIMEOUT, "no event within %lld ms", (long long)timeout_ms);
    }
}
