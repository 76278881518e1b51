/*
 * lock.c -- the reentrant lock (Redisson RLock, PROTOCOL.md 5) and its waiter loop (4.2).
 *
 * Hot path: an uncontended acquire is one EVALSHA on a pool connection plus a lookup in
 * the holds table; a release is one EVALSHA. Waiting subscribes to the lock's channel
 * through the shared subscriber (pubsub.c), re-checks, then sleeps on the entry's
 * condition variable for at most the holder's TTL: no polling.
 *
 * Retry safety (PROTOCOL.md 12): an acquire whose reply was lost is never resent. The
 * connection is dropped and the owner's own field is read back: if it is one above what
 * this client recorded, the acquire happened. An unlock is retried once, on a fresh
 * connection, with the same request id; the latch makes the retry a replay.
 *
 * Threads: any caller thread. Locks: holds->mu around bookkeeping only (never during
 * Redis traffic).
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIELD_MAX 80

static bool check_ms(int64_t v, bool allow_forever)
{
    if (allow_forever && v == -1)
        return true;
    return v >= 0 && v <= CRD_DURATION_MAX_MS;
}

/* ---- handles ----------------------------------------------------------------------------- */

static void lock_clear(crd_lock *l)
{
    free(l->name);
    crd__names_clear(&l->names);
    memset(l, 0, sizeof *l);
}

/* Fills l with the name and every derived key and channel of its kind. */
static crd_status lock_init(crd_lock *l, crd_client *c, crd__kind kind, const char *name,
                            size_t len)
{
    memset(l, 0, sizeof *l);
    l->client = c;
    l->kind = kind;
    l->name = malloc(len + 1);
    if (l->name == NULL)
        return CRD_NO_MEMORY;
    memcpy(l->name, name, len);
    l->name[len] = '\0';
    l->name_len = len;
    crd_status st = crd__names_init(&l->names, kind, name, len);
    if (st != CRD_OK)
        lock_clear(l);
    return st;
}

static crd_status check_name(crd_client *c, const char *name, size_t len)
{
    if (name == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lock name is NULL");
    if (len == 0)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lock name is empty");
    if (len > CRD_NAME_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lock name is %zu bytes; the maximum is %d", len,
                         CRD_NAME_MAX);
    if (!c->opts.allow_unsafe_names && crd__name_is_unsafe(name, len))
        return crd__fail(c, CRD_INVALID_ARGUMENT,
                         "lock name \"%.*s\" has braces that would put its keys in different "
                         "cluster slots ('}' without '{', an unclosed '{' or an empty \"{}\" tag); "
                         "set allow_unsafe_names to accept it",
                         (int)(len > 60 ? 60 : len), name);
    return CRD_OK;
}

static crd_status new_lock(crd_client *c, crd__kind kind, const char *name, size_t len,
                           crd_lock **out)
{
    if (out == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    crd_status st = crd__client_check(c);
    if (st == CRD_OK)
        st = check_name(c, name, len);
    if (st != CRD_OK)
        return st;
    crd_lock *l = malloc(sizeof *l);
    if (l == NULL || lock_init(l, c, kind, name, len) != CRD_OK) {
        free(l);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a lock");
    }
    crd__ok(c);
    *out = l;
    return CRD_OK;
}

crd_status crd_lock_new_n(crd_client *c, const char *name, size_t len, crd_lock **out)
{
    return new_lock(c, CRD__RLOCK, name, len, out);
}

crd_status crd_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return new_lock(c, CRD__RLOCK, name, name != NULL ? strlen(name) : 0, out);
}

crd_status crd_fair_lock_new_n(crd_client *c, const char *name, size_t len, crd_lock **out)
{
    return new_lock(c, CRD__FAIR, name, len, out);
}

crd_status crd_fair_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    return new_lock(c, CRD__FAIR, name, name != NULL ? strlen(name) : 0, out);
}

void crd_lock_free(crd_lock *l)
{
    if (l == NULL || l->view)
        return;
    lock_clear(l);
    free(l);
}

/* ---- read-write locks --------------------------------------------------------------------- */

struct crd_rwlock {
    crd_lock read;
    crd_lock write;
};

crd_status crd_rwlock_new_n(crd_client *c, const char *name, size_t len, crd_rwlock **out)
{
    if (out == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    crd_status st = crd__client_check(c);
    if (st == CRD_OK)
        st = check_name(c, name, len);
    if (st != CRD_OK)
        return st;
    crd_rwlock *rw = calloc(1, sizeof *rw);
    if (rw == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a read-write lock");
    if (lock_init(&rw->read, c, CRD__READ, name, len) != CRD_OK ||
        lock_init(&rw->write, c, CRD__WRITE, name, len) != CRD_OK) {
        lock_clear(&rw->read);
        free(rw);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a read-write lock");
    }
    rw->read.view = rw->write.view = true;
    crd__ok(c);
    *out = rw;
    return CRD_OK;
}

crd_status crd_rwlock_new(crd_client *c, const char *name, crd_rwlock **out)
{
    return crd_rwlock_new_n(c, name, name != NULL ? strlen(name) : 0, out);
}

crd_lock *crd_rwlock_read(crd_rwlock *rw) { return rw == NULL ? NULL : &rw->read; }
crd_lock *crd_rwlock_write(crd_rwlock *rw) { return rw == NULL ? NULL : &rw->write; }

void crd_rwlock_free(crd_rwlock *rw)
{
    if (rw == NULL)
        return;
    lock_clear(&rw->read);
    lock_clear(&rw->write);
    free(rw);
}

const char *crd_lock_name(const crd_lock *l, size_t *len)
{
    if (l == NULL) {
        if (len != NULL)
            *len = 0;
        return NULL;
    }
    if (len != NULL)
        *len = l->name_len;
    return l->name;
}

static crd_status check_lock(crd_lock *l)
{
    if (l == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "lock is NULL");
    return crd__client_check(l->client);
}

/* ---- reply helpers ----------------------------------------------------------------------- */

static crd_status server_error(crd_client *c, const redisReply *r, const char *what)
{
    return crd__fail(c, CRD_SERVER, "%s: %.*s", what, (int)r->len, r->str);
}

static crd_status unexpected(crd_client *c, const redisReply *r, const char *what)
{
    char text[200];
    crd__reply_render(r, text, sizeof text);
    return crd__fail(c, CRD_PROTOCOL, "%s: unexpected reply %s", what, text);
}

/* ---- fields -------------------------------------------------------------------------------- */

/* The hash field this kind of hold uses: "<uuid>:<id>", or "<uuid>:<id>:write". */
static size_t hold_field(const crd_lock *l, uint64_t owner, char *buf)
{
    return crd__field(l->client->uuid, owner, l->kind == CRD__WRITE, buf);
}

static int fmt_i64(char *buf, int64_t v) { return snprintf(buf, 24, "%" PRId64, v); }

/* ---- acquire ------------------------------------------------------------------------------ */

/* Reads HGET N field on a fresh connection to learn whether an acquire whose reply was
 * lost was executed. Sets *happened; CRD_IO when even that read failed. */
static crd_status resolve_acquire(crd_lock *l, const char *field, size_t flen, int64_t expected,
                                  bool *happened)
{
    crd_client *c = l->client;
    const char *argv[3] = {"HGET", l->name, field};
    size_t lens[3] = {4, l->name_len, flen};
    redisReply *r = NULL;
    crd_status st = crd__command(c, 3, argv, lens, &r);
    if (st != CRD_OK)
        return crd__fail(c, CRD_IO, "an acquire's reply was lost and its outcome could not be read "
                         "back: %s", crd_client_errmsg(c));
    int64_t now_count = 0;
    if (r->type == REDIS_REPLY_STRING)
        now_count = strtoll(r->str, NULL, 10);
    else if (r->type == REDIS_REPLY_ERROR)
        st = server_error(c, r, "reading back an acquire");
    freeReplyObject(r);
    *happened = now_count == expected;
    return st;
}

/* Records a successful acquire sent at sent_ms. */
static crd_status record_acquire(crd_lock *l, uint64_t owner, int64_t lease, bool watchdog,
                                 int64_t sent_ms)
{
    crd_client *c = l->client;
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    if (hold != NULL && hold->lost) {
        /* The old hold was lost but not yet reported; this acquire starts a new one. */
        crd__holds_remove(h, hold);
        hold = NULL;
    }
    if (hold == NULL) {
        hold = crd__holds_insert(h, l->name, l->name_len, owner, l->kind);
        if (hold == NULL) {
            pthread_mutex_unlock(&h->mu);
            /* Redis holds the lock but we cannot track it: it expires after its lease. */
            return crd__fail(c, CRD_NO_MEMORY, "acquired, but cannot record the hold");
        }
        hold->since = sent_ms;
    }
    hold->count++;
    hold->lease_ms = lease;
    if (watchdog && !hold->watchdog)
        h->nwatchdog++;
    else if (!watchdog && hold->watchdog)
        h->nwatchdog--;
    hold->watchdog = watchdog;
    /* Write re-entry adds the lease to the remaining TTL; the validity deadline is the
     * conservative one either way. */
    hold->valid_until = sent_ms + lease;
    hold->failing = false;
    pthread_mutex_unlock(&h->mu);
    if (watchdog)
        crd__watchdog_kick(c);
    return CRD_OK;
}

static int64_t local_count(crd_lock *l, uint64_t owner, crd__kind kind)
{
    crd__holds *h = l->client->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, kind);
    int64_t n = hold != NULL && !hold->lost ? hold->count : 0;
    pthread_mutex_unlock(&h->mu);
    return n;
}

typedef struct attempt {
    bool acquired;
    int64_t ttl; /* when not acquired: wait hint in ms (-1: the hash has no TTL) */
} attempt;

typedef struct acquire_ctx {
    crd_lock *l;
    uint64_t owner;
    char field[FIELD_MAX];
    size_t flen;
    int64_t lease;
    bool watchdog;
    bool nowait;         /* fair: the try-once form, which never queues */
    int64_t fair_wait;   /* fair: the wait this waiter announces to the queue */
    bool pending;        /* an acquire's outcome is unknown: read back before resending */
    int64_t pending_sent; /* when that acquire was sent: its lease cannot start earlier */
    bool queued;         /* fair: may have joined the queue */
} acquire_ctx;

/* Runs the acquire script of the lock's kind once. *sent is 0 when nothing was sent
 * (no connection could be had), else the send time. */
static crd_status run_acquire(acquire_ctx *a, redisReply **r, int64_t *sent)
{
    *sent = 0;
    *r = NULL;
    crd_lock *l = a->l;
    crd_client *c = l->client;
    char lease_s[24], wait_s[24], now_s[24];
    size_t lease_len = (size_t)fmt_i64(lease_s, a->lease);
    const char *keys[3] = {l->name, NULL, NULL};
    size_t keylens[3] = {l->name_len, 0, 0};
    const char *args[4] = {lease_s, a->field, NULL, NULL};
    size_t arglens[4] = {lease_len, a->flen, 0, 0};
    int script, nkeys = 1, nargs = 2;
    char tbase[FIELD_MAX + 64];
    crd__buf tkey = {NULL, 0};
    switch (l->kind) {
    case CRD__RLOCK:
        script = CRD__SCRIPT_RLOCK_ACQUIRE;
        break;
    case CRD__WRITE:
        script = CRD__SCRIPT_RW_WRITE_ACQUIRE;
        break;
    case CRD__READ: {
        /* KEYS[2] = <P>:<F>:rwlock_timeout; ARGV[3] = the owner's write field. */
        size_t plen = l->names.rw_prefix.len;
        tkey.len = plen + 1 + a->flen + 15;
        tkey.p = malloc(tkey.len + 1);
        if (tkey.p == NULL)
            return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the timeout key");
        snprintf(tkey.p, tkey.len + 1, "%s:%s:rwlock_timeout", l->names.rw_prefix.p, a->field);
        keys[1] = tkey.p;
        keylens[1] = tkey.len;
        nkeys = 2;
        memcpy(tbase, a->field, a->flen);
        memcpy(tbase + a->flen, ":write", 7);
        args[2] = tbase;
        arglens[2] = a->flen + 6;
        nargs = 3;
        script = CRD__SCRIPT_RW_READ_ACQUIRE;
        break;
    }
    case CRD__FAIR:
    default: {
        keys[1] = l->names.queue.p;
        keylens[1] = l->names.queue.len;
        keys[2] = l->names.deadlines.p;
        keylens[2] = l->names.deadlines.len;
        nkeys = 3;
        size_t wl = (size_t)fmt_i64(wait_s, a->fair_wait);
        size_t nl = (size_t)fmt_i64(now_s, crd__epoch_ms());
        /* The try-once form takes now before wait (Redisson's order). */
        args[2] = a->nowait ? now_s : wait_s;
        arglens[2] = a->nowait ? nl : wl;
        args[3] = a->nowait ? wait_s : now_s;
        arglens[3] = a->nowait ? wl : nl;
        nargs = 4;
        script = a->nowait ? CRD__SCRIPT_FAIR_TRY_ACQUIRE : CRD__SCRIPT_FAIR_ACQUIRE;
        if (!a->nowait)
            a->queued = true;
        break;
    }
    }
    crd__conn *conn;
    crd_status st = crd__pool_get(c, &conn);
    if (st == CRD_OK) {
        *sent = crd__now_ms();
        st = crd__script_run(c, conn, script, nkeys, keys, keylens, nargs, args, arglens, r);
        crd__pool_put(c, conn);
    }
    free(tkey.p);
    return st;
}

/* One acquire attempt. a->pending carries an unresolved lost reply across attempts:
 * while it is set, the field is read back before anything is sent again. */
static crd_status try_once(acquire_ctx *a, attempt *out)
{
    crd_lock *l = a->l;
    crd_client *c = l->client;
    out->acquired = false;
    out->ttl = 0;
    if (a->pending) {
        bool happened = false;
        crd_status st = resolve_acquire(l, a->field, a->flen,
                                        local_count(l, a->owner, l->kind) + 1, &happened);
        if (st != CRD_OK)
            return st;
        a->pending = false;
        if (happened) {
            out->acquired = true;
            /* The lease started when Redis ran the acquire, at the earliest when it was
             * sent: count the validity from that send, never from later. */
            return record_acquire(l, a->owner, a->lease, a->watchdog, a->pending_sent);
        }
    }
    redisReply *r = NULL;
    int64_t sent = 0;
    crd_status st = CRD_IO;
    /* A second send only after the read-back proved the first did not run: a pooled
     * connection cut while idle (a server restart, CLIENT KILL) fails the first try. */
    for (int try_no = 0; try_no < 2 && st == CRD_IO; try_no++) {
        st = run_acquire(a, &r, &sent);
        if (st == CRD_IO && sent == 0)
            return st; /* nothing was sent: nothing to resolve */
        if (st != CRD_IO)
            break;
        /* Sent, no reply: it may have run. Never resend blindly; read the field back. */
        a->pending = true;
        a->pending_sent = sent;
        bool happened = false;
        st = resolve_acquire(l, a->field, a->flen, local_count(l, a->owner, l->kind) + 1,
                             &happened);
        if (st != CRD_OK)
            return st;
        a->pending = false;
        if (happened) {
            out->acquired = true;
            return record_acquire(l, a->owner, a->lease, a->watchdog, sent);
        }
        st = crd__fail(c, CRD_IO, "acquire failed on the connection and did not happen");
    }
    if (st != CRD_OK)
        return st;
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        out->acquired = true;
        return record_acquire(l, a->owner, a->lease, a->watchdog, sent);
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        /* Fair try-once answers 1 for "not acquired", without a wait hint. */
        out->ttl = a->nowait ? 0 : r->integer;
        freeReplyObject(r);
        return CRD_OK;
    }
    st = r->type == REDIS_REPLY_ERROR ? server_error(c, r, "acquire") : unexpected(c, r, "acquire");
    freeReplyObject(r);
    return st;
}

/* Fair waiter gives up: leave the queue, move the others up, pass on a turn. */
static void fair_give_up(acquire_ctx *a)
{
    crd_lock *l = a->l;
    crd_client *c = l->client;
    char wait_s[24];
    size_t wl = (size_t)fmt_i64(wait_s, a->fair_wait);
    const char *keys[4] = {l->names.queue.p, l->names.deadlines.p, l->name, l->names.channel.p};
    size_t keylens[4] = {l->names.queue.len, l->names.deadlines.len, l->name_len, l->names.channel.len};
    const char *args[3] = {a->field, wait_s, "PUBLISH"};
    size_t arglens[3] = {a->flen, wl, 7};
    crd__conn *conn;
    if (crd__pool_get(c, &conn) != CRD_OK)
        return; /* the entry expires at its deadline; the next acquire purges it */
    redisReply *r = NULL;
    if (crd__script_run(c, conn, CRD__SCRIPT_FAIR_ACQUIRE_FAILED, 4, keys, keylens, 3, args, arglens,
                        &r) == CRD_OK)
        freeReplyObject(r);
    crd__pool_put(c, conn);
}

/* True when this owner holds the read lock of the name but not the write lock: a write
 * acquire could never succeed (Redisson does not upgrade). */
static bool would_upgrade(crd_lock *l, uint64_t owner)
{
    return l->kind == CRD__WRITE && local_count(l, owner, CRD__READ) > 0 &&
           local_count(l, owner, CRD__WRITE) == 0;
}

crd_status crd_lock_acquire_owner(crd_lock *l, uint64_t owner, int64_t wait_ms, int64_t lease_ms)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    if (owner == 0)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "owner id 0 is not valid");
    if (!check_ms(wait_ms, true))
        return crd__fail(c, CRD_INVALID_ARGUMENT, "wait_ms must be -1 or 0..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)wait_ms);
    if (!check_ms(lease_ms, true))
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lease_ms must be -1, 0 or 1..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)lease_ms);
    if (would_upgrade(l, owner))
        return crd__fail(c, CRD_DEADLOCK, "owner %llu holds the read lock of \"%.*s\": a write "
                         "acquire would wait for itself (read-to-write upgrade is not supported)",
                         (unsigned long long)owner, (int)(l->name_len > 60 ? 60 : l->name_len),
                         l->name);
    acquire_ctx a;
    memset(&a, 0, sizeof a);
    a.l = l;
    a.owner = owner;
    a.flen = hold_field(l, owner, a.field);
    a.watchdog = lease_ms <= 0;
    a.lease = a.watchdog ? c->opts.watchdog_timeout_ms : lease_ms;
    a.nowait = l->kind == CRD__FAIR && wait_ms == 0;
    a.fair_wait = wait_ms > 0 ? wait_ms : c->opts.fair_wait_timeout_ms;
    int64_t start = crd__now_ms();
    /* +1: the clock is read in whole ms, so a wait never ends before wait_ms has passed. */
    int64_t deadline = wait_ms < 0 ? INT64_MAX : start + wait_ms + 1;
    attempt at;

    st = try_once(&a, &at);
    if (st == CRD_OK && at.acquired) {
        CRD__COUNT(c, acquisitions);
        crd__ok(c);
        return CRD_OK;
    }
    if (st != CRD_OK && !(st == CRD_IO && wait_ms != 0)) {
        if (a.queued)
            fair_give_up(&a);
        return st;
    }
    if (wait_ms == 0) {
        CRD__COUNT(c, acquire_busy);
        return crd__fail(c, CRD_BUSY, "lock \"%.*s\" is held by another owner",
                         (int)(l->name_len > 60 ? 60 : l->name_len), l->name);
    }

    /* Subscribe first, then re-check: a release between the two is not missed. A fair
     * waiter listens on its own channel, so a release wakes only the queue head. */
    crd__buf chan = l->names.channel;
    char *own = NULL;
    if (l->kind == CRD__FAIR) {
        own = malloc(l->names.channel.len + 1 + a.flen + 1);
        if (own == NULL) {
            fair_give_up(&a);
            return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the waiter channel");
        }
        memcpy(own, l->names.channel.p, l->names.channel.len);
        own[l->names.channel.len] = ':';
        memcpy(own + l->names.channel.len + 1, a.field, a.flen);
        own[l->names.channel.len + 1 + a.flen] = '\0';
        chan.p = own;
        chan.len = l->names.channel.len + 1 + a.flen;
    }
    crd__sub *sub = NULL;
    bool confirmed = false;
    int64_t sub_deadline = crd__now_ms() + c->opts.subscription_timeout_ms;
    if (sub_deadline > deadline)
        sub_deadline = deadline;
    st = crd__sub_acquire(c, chan.p, chan.len, sub_deadline, &sub, &confirmed);
    if (sub == NULL) {
        free(own);
        if (a.queued)
            fair_give_up(&a);
        return st;
    }
    crd_status last_error = CRD_OK;
    int64_t fair_backoff = 4, io_backoff = 25;
    for (;;) {
        if (atomic_load(&c->closed)) {
            st = crd__fail(c, CRD_CLOSED, "client closed while waiting");
            break;
        }
        st = try_once(&a, &at);
        if (st == CRD_OK && at.acquired)
            break;
        if (st != CRD_OK && st != CRD_IO)
            break;
        last_error = st;
        int64_t now = crd__now_ms();
        if (now >= deadline) {
            st = last_error == CRD_IO
                     ? crd__fail(c, CRD_IO, "wait ended with the connection failing: %s",
                                 crd_client_errmsg(c))
                     : crd__fail(c, CRD_TIMEOUT, "lock \"%.*s\" still held after %lld ms",
                                 (int)(l->name_len > 60 ? 60 : l->name_len), l->name,
                                 (long long)(now - start));
            break;
        }
        /* The slice: the holder's TTL (a release publishes, an expiry does not), or the
         * poll interval when there is no TTL, no live subscription, or Redis failed. A
         * fair waiter told "free, but not your turn" (0) backs off from 4 ms while the
         * head takes its turn. */
        int64_t slice;
        if (st != CRD_OK) {
            /* Redis failed (restart, cut): retry soon, backing off to the poll interval. */
            slice = io_backoff;
            io_backoff = io_backoff * 2 < c->opts.poll_interval_ms ? io_backoff * 2
                                                                   : c->opts.poll_interval_ms;
        } else if (at.ttl < 0)
            slice = c->opts.poll_interval_ms;
        else if (l->kind == CRD__FAIR && at.ttl == 0) {
            slice = fair_backoff;
            fair_backoff = fair_backoff * 2 < c->opts.poll_interval_ms ? fair_backoff * 2
                                                                       : c->opts.poll_interval_ms;
        } else {
            slice = at.ttl;
            if (l->kind == CRD__FAIR)
                fair_backoff = 4;
        }
        if (st == CRD_OK)
            io_backoff = 25;
        if (!confirmed && slice > c->opts.poll_interval_ms)
            slice = c->opts.poll_interval_ms;
        if (slice < 1)
            slice = 1;
        if (c->opts.max_wait_slice_ms > 0 && slice > c->opts.max_wait_slice_ms)
            slice = c->opts.max_wait_slice_ms;
        /* One extra ms: PTTL rounds down, and waking just before the key expires would
         * cost a useless retry. */
        int64_t until = now + slice + 1 < deadline ? now + slice + 1 : deadline;
        crd_status w = crd__sub_wait(c, sub, until, &confirmed);
        if (w == CRD_CLOSED) {
            st = crd__fail(c, CRD_CLOSED, "client closed while waiting");
            break;
        }
        if (w == CRD_TIMEOUT && crd__now_ms() >= deadline) {
            /* The wait ran out with no release seen: give up without another attempt
             * (PROTOCOL.md 4.2 step 5). */
            st = last_error == CRD_IO
                     ? crd__fail(c, CRD_IO, "wait ended with the connection failing: %s",
                                 crd_client_errmsg(c))
                     : crd__fail(c, CRD_TIMEOUT, "lock \"%.*s\" still held after %lld ms",
                                 (int)(l->name_len > 60 ? 60 : l->name_len), l->name,
                                 (long long)(crd__now_ms() - start));
            break;
        }
    }
    if (st != CRD_OK && a.queued) {
        /* Leave the queue while still holding the subscription reference: a client being
         * freed waits for that reference, so the pool is still there for the cleanup. */
        crd_status keep = st;
        char msg[512];
        snprintf(msg, sizeof msg, "%s", crd_client_errmsg(c));
        fair_give_up(&a);
        st = crd__fail(c, keep, "%s", msg);
    }
    crd__sub_release(c, sub);
    free(own);
    if (st == CRD_OK) {
        CRD__COUNT(c, acquisitions);
        CRD__COUNT(c, contended);
        crd__hist_add(&c->metrics.wait, crd__now_ms() - start);
        crd__ok(c);
    } else if (st == CRD_TIMEOUT) {
        CRD__COUNT(c, acquire_busy);
    }
    return st;
}

crd_status crd_lock_acquire(crd_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return crd_lock_acquire_owner(l, crd_owner_current(), wait_ms, lease_ms);
}

/* ---- release ------------------------------------------------------------------------------ */

/* Sends the unlock script of the lock's kind, with one retry on a fresh connection and
 * the same request id (the latch makes the retry a replay). */
static crd_status send_unlock(crd_lock *l, const char *field, size_t flen, int64_t rearm,
                              redisReply **reply)
{
    crd_client *c = l->client;
    char rid[33];
    if (crd__random_hex32(rid) != CRD_OK)
        return crd__fail(c, CRD_IO, "cannot read random bytes for the request id");
    /* Names of ordinary length live on the stack: no allocation on the release path. */
    size_t latch_len = l->names.latch_prefix.len + 32;
    size_t tbase_cap = l->names.rw_prefix.len + flen + 32;
    char latch_stack[512], tbase_stack[512];
    char *latch = latch_len + 1 <= sizeof latch_stack ? latch_stack : malloc(latch_len + 1);
    char *tbase = tbase_cap <= sizeof tbase_stack ? tbase_stack : malloc(tbase_cap);
    if (latch == NULL || tbase == NULL) {
        if (latch != latch_stack)
            free(latch);
        if (tbase != tbase_stack)
            free(tbase);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the unlock latch");
    }
    memcpy(latch, l->names.latch_prefix.p, l->names.latch_prefix.len);
    memcpy(latch + l->names.latch_prefix.len, rid, 33);
    char rearm_s[24], lttl_s[24], now_s[24];
    size_t rearm_len = (size_t)fmt_i64(rearm_s, rearm);
    /* The latch must outlive every retry of this call: two command timeouts plus slack. */
    size_t lttl_len = (size_t)fmt_i64(lttl_s, 2 * c->opts.command_timeout_ms + 1000);
    const char *keys[5];
    size_t keylens[5];
    const char *args[6];
    size_t arglens[6];
    int nkeys, nargs, script;
    switch (l->kind) {
    case CRD__FAIR: {
        size_t now_len = (size_t)fmt_i64(now_s, crd__epoch_ms());
        const char *k[5] = {l->name, l->names.queue.p, l->names.deadlines.p, l->names.channel.p, latch};
        size_t kl[5] = {l->name_len, l->names.queue.len, l->names.deadlines.len, l->names.channel.len, latch_len};
        const char *v[6] = {"0", rearm_s, field, now_s, "PUBLISH", lttl_s};
        size_t vl[6] = {1, rearm_len, flen, now_len, 7, lttl_len};
        memcpy(keys, k, sizeof k);
        memcpy(keylens, kl, sizeof kl);
        memcpy(args, v, sizeof v);
        memcpy(arglens, vl, sizeof vl);
        nkeys = 5, nargs = 6, script = CRD__SCRIPT_FAIR_UNLOCK;
        break;
    }
    case CRD__READ: {
        size_t tlen = (size_t)snprintf(tbase, tbase_cap, "%s:%.*s:rwlock_timeout",
                                       l->names.rw_prefix.p, (int)flen, field);
        const char *k[5] = {l->name, l->names.channel.p, tbase, l->names.rw_prefix.p, latch};
        size_t kl[5] = {l->name_len, l->names.channel.len, tlen, l->names.rw_prefix.len, latch_len};
        const char *v[4] = {"0", field, "PUBLISH", lttl_s};
        size_t vl[4] = {1, flen, 7, lttl_len};
        memcpy(keys, k, sizeof k);
        memcpy(keylens, kl, sizeof kl);
        memcpy(args, v, sizeof v);
        memcpy(arglens, vl, sizeof vl);
        nkeys = 5, nargs = 4, script = CRD__SCRIPT_RW_READ_UNLOCK;
        break;
    }
    case CRD__RLOCK:
    case CRD__WRITE:
    default: {
        bool w = l->kind == CRD__WRITE;
        const char *k[3] = {l->name, l->names.channel.p, latch};
        size_t kl[3] = {l->name_len, l->names.channel.len, latch_len};
        const char *v[5] = {w ? "1" : "0", rearm_s, field, "PUBLISH", lttl_s};
        size_t vl[5] = {1, rearm_len, flen, 7, lttl_len};
        memcpy(keys, k, sizeof k);
        memcpy(keylens, kl, sizeof kl);
        memcpy(args, v, sizeof v);
        memcpy(arglens, vl, sizeof vl);
        nkeys = 3, nargs = 5, script = w ? CRD__SCRIPT_RW_WRITE_UNLOCK : CRD__SCRIPT_RLOCK_UNLOCK;
        break;
    }
    }
    crd_status st = CRD_IO;
    for (int try_no = 0; try_no < 2 && st == CRD_IO; try_no++) {
        crd__conn *conn;
        st = crd__pool_get(c, &conn);
        if (st != CRD_OK)
            continue;
        st = crd__script_run(c, conn, script, nkeys, keys, keylens, nargs, args, arglens, reply);
        crd__pool_put(c, conn);
    }
    if (latch != latch_stack)
        free(latch);
    if (tbase != tbase_stack)
        free(tbase);
    return st;
}

static crd_status lost_status(crd_client *c, const crd_lock *l)
{
    return crd__fail(c, CRD_LOCK_LOST, "the hold on \"%.*s\" expired or was force-unlocked",
                     (int)(l->name_len > 60 ? 60 : l->name_len), l->name);
}

/* Owner-checked release of one hold. */
static crd_status release_hold(crd_lock *l, uint64_t owner)
{
    crd_client *c = l->client;
    char field[FIELD_MAX];
    size_t flen = hold_field(l, owner, field);
    crd__holds *h = c->holds;
    int64_t rearm = c->opts.watchdog_timeout_ms;
    bool known = false, was_lost = false;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    if (hold != NULL) {
        known = true;
        was_lost = hold->lost;
        rearm = hold->lease_ms;
        if (was_lost)
            crd__holds_remove(h, hold);
        else if (hold->count <= 1)
            hold->releasing = true; /* cancel renewal before the final release is sent */
    }
    pthread_mutex_unlock(&h->mu);
    if (was_lost)
        return lost_status(c, l); /* counted when the watchdog found it lost */
    redisReply *r = NULL;
    crd_status st = send_unlock(l, field, flen, rearm, &r);
    pthread_mutex_lock(&h->mu);
    hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    if (st != CRD_OK) {
        if (hold != NULL)
            hold->releasing = false; /* outcome unknown: keep renewing */
        pthread_mutex_unlock(&h->mu);
        return st;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= 2) {
        long long v = r->integer;
        if (hold != NULL) {
            if (l->kind == CRD__READ && v != 2) {
                /* A read unlock answers for the whole lock (0: other holds remain), not
                 * for this owner: the local count is what tells. */
                if (--hold->count <= 0)
                    crd__holds_remove(h, hold);
                else
                    hold->releasing = false;
            } else if (v != 0) {
                if (v == 1)
                    crd__hist_add(&c->metrics.hold, crd__now_ms() - hold->since);
                crd__holds_remove(h, hold);
            } else if (--hold->count < 1) {
                /* Redis holds more than this client took: an acquire whose reply was lost
                 * ran after all (PROTOCOL.md 12). The caller has released everything it
                 * knows of, so stop renewing and let that orphan expire with its lease. */
                crd__log(c, CRD_LOG_WARN, "lock \"%.*s\" is still held in Redis after its last "
                         "known release (an acquire whose reply was lost ran); it expires "
                         "after its lease", (int)(l->name_len > 60 ? 60 : l->name_len), l->name);
                crd__holds_remove(h, hold);
            } else {
                hold->releasing = false;
            }
        }
        pthread_mutex_unlock(&h->mu);
        freeReplyObject(r);
        if (v == 2 && known)
            CRD__COUNT(c, locks_lost);
        else if (v != 2)
            CRD__COUNT(c, releases);
        if (v == 2) /* fair lock: the hash was gone (Redisson reports success here) */
            return known ? lost_status(c, l)
                         : crd__fail(c, CRD_NOT_OWNER, "owner %llu does not hold \"%.*s\"",
                                     (unsigned long long)owner,
                                     (int)(l->name_len > 60 ? 60 : l->name_len), l->name);
        crd__ok(c);
        return CRD_OK;
    }
    if (r->type == REDIS_REPLY_NIL) {
        if (hold != NULL)
            crd__holds_remove(h, hold);
        pthread_mutex_unlock(&h->mu);
        freeReplyObject(r);
        if (known) {
            CRD__COUNT(c, locks_lost);
            crd__log(c, CRD_LOG_ERROR, "lock \"%.*s\" was lost before its release (expired or "
                     "force-unlocked)", (int)(l->name_len > 60 ? 60 : l->name_len), l->name);
            return lost_status(c, l);
        }
        return crd__fail(c, CRD_NOT_OWNER, "owner %llu does not hold \"%.*s\"",
                         (unsigned long long)owner, (int)(l->name_len > 60 ? 60 : l->name_len),
                         l->name);
    }
    if (hold != NULL)
        hold->releasing = false;
    pthread_mutex_unlock(&h->mu);
    st = r->type == REDIS_REPLY_ERROR ? server_error(c, r, "release") : unexpected(c, r, "release");
    freeReplyObject(r);
    return st;
}

crd_status crd_lock_release_owner(crd_lock *l, uint64_t owner)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    if (owner == 0)
        return crd__fail(l->client, CRD_INVALID_ARGUMENT, "owner id 0 is not valid");
    return release_hold(l, owner);
}

crd_status crd_lock_release(crd_lock *l) { return crd_lock_release_owner(l, crd_owner_current()); }

crd_status crd__release_hold_by_name(crd_client *c, const char *name, size_t len, uint64_t owner,
                                     int kind)
{
    crd_lock tmp;
    crd_status st = lock_init(&tmp, c, (crd__kind)kind, name, len);
    if (st != CRD_OK)
        return st;
    st = release_hold(&tmp, owner);
    lock_clear(&tmp);
    return st;
}

/* ---- force-unlock and introspection --------------------------------------------------------- */

crd_status crd_lock_force_unlock(crd_lock *l, bool *was_locked)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    char now_s[24];
    size_t now_len = (size_t)fmt_i64(now_s, crd__epoch_ms());
    const char *keys[4] = {l->name, l->names.channel.p, NULL, NULL};
    size_t keylens[4] = {l->name_len, l->names.channel.len, 0, 0};
    const char *args[3] = {"0", "PUBLISH", NULL};
    size_t arglens[3] = {1, 7, 0};
    int nkeys = 2, nargs = 2, script = CRD__SCRIPT_RLOCK_FORCE_UNLOCK;
    if (l->kind == CRD__FAIR) {
        keys[1] = l->names.queue.p, keylens[1] = l->names.queue.len;
        keys[2] = l->names.deadlines.p, keylens[2] = l->names.deadlines.len;
        keys[3] = l->names.channel.p, keylens[3] = l->names.channel.len;
        args[1] = now_s, arglens[1] = now_len;
        args[2] = "PUBLISH", arglens[2] = 7;
        nkeys = 4, nargs = 3, script = CRD__SCRIPT_FAIR_FORCE_UNLOCK;
    } else if (l->kind == CRD__READ || l->kind == CRD__WRITE) {
        bool w = l->kind == CRD__WRITE;
        args[0] = w ? "1" : "0";
        args[2] = w ? "write" : "read", arglens[2] = w ? 5 : 4;
        nargs = 3, script = CRD__SCRIPT_RW_FORCE_UNLOCK;
    }
    crd__conn *conn;
    if ((st = crd__pool_get(c, &conn)) != CRD_OK)
        return st;
    redisReply *r = NULL;
    st = crd__script_run(c, conn, script, nkeys, keys, keylens, nargs, args, arglens, &r);
    crd__pool_put(c, conn);
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_INTEGER) {
        if (was_locked != NULL)
            *was_locked = r->integer == 1;
        st = CRD_OK;
        crd__ok(c);
    } else {
        st = r->type == REDIS_REPLY_ERROR ? server_error(c, r, "force-unlock")
                                          : unexpected(c, r, "force-unlock");
    }
    freeReplyObject(r);
    return st;
}

/* Runs a read command and returns its integer (or parsed string) reply. */
static crd_status read_int(crd_lock *l, int argc, const char **argv, const size_t *lens,
                           int64_t *out, const char *what)
{
    crd_client *c = l->client;
    redisReply *r = NULL;
    crd_status st = crd__command(c, argc, argv, lens, &r);
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
    } else if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
    } else if (r->type == REDIS_REPLY_STRING) {
        char *end = NULL;
        long long v = strtoll(r->str, &end, 10);
        if (end == r->str || *end != '\0')
            st = crd__fail(c, CRD_PROTOCOL, "%s: field holds \"%.*s\", not a hold count", what,
                           (int)(r->len > 40 ? 40 : r->len), r->str);
        *out = v;
    } else if (r->type == REDIS_REPLY_ERROR) {
        st = server_error(c, r, what);
    } else {
        st = unexpected(c, r, what);
    }
    freeReplyObject(r);
    if (st == CRD_OK)
        crd__ok(c);
    return st;
}

crd_status crd_lock_is_locked(crd_lock *l, bool *locked)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    if (locked == NULL)
        return crd__fail(l->client, CRD_INVALID_ARGUMENT, "locked is NULL");
    int64_t v = 0;
    if (l->kind == CRD__READ || l->kind == CRD__WRITE) {
        bool w = l->kind == CRD__WRITE;
        const char *keys[1] = {l->name};
        size_t keylens[1] = {l->name_len};
        const char *args[1] = {w ? "write" : "read"};
        size_t arglens[1] = {w ? 5u : 4u};
        crd_client *c = l->client;
        crd__conn *conn;
        if ((st = crd__pool_get(c, &conn)) != CRD_OK)
            return st;
        redisReply *r = NULL;
        st = crd__script_run(c, conn, CRD__SCRIPT_RW_IS_LOCKED, 1, keys, keylens, 1, args, arglens,
                             &r);
        crd__pool_put(c, conn);
        if (st != CRD_OK)
            return st;
        if (r->type == REDIS_REPLY_INTEGER)
            v = r->integer;
        else
            st = r->type == REDIS_REPLY_ERROR ? server_error(c, r, "is-locked")
                                              : unexpected(c, r, "is-locked");
        freeReplyObject(r);
    } else {
        const char *argv[2] = {"EXISTS", l->name};
        size_t lens[2] = {6, l->name_len};
        st = read_int(l, 2, argv, lens, &v, "EXISTS");
    }
    *locked = v == 1;
    return st;
}

crd_status crd_lock_is_held_owner(crd_lock *l, uint64_t owner, bool *held)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    if (held == NULL)
        return crd__fail(l->client, CRD_INVALID_ARGUMENT, "held is NULL");
    char field[FIELD_MAX];
    size_t flen = hold_field(l, owner, field);
    const char *argv[3] = {"HEXISTS", l->name, field};
    size_t lens[3] = {7, l->name_len, flen};
    int64_t v = 0;
    st = read_int(l, 3, argv, lens, &v, "HEXISTS");
    *held = v == 1;
    return st;
}

crd_status crd_lock_is_held(crd_lock *l, bool *held)
{
    return crd_lock_is_held_owner(l, crd_owner_current(), held);
}

crd_status crd_lock_hold_count_owner(crd_lock *l, uint64_t owner, int64_t *count)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    if (count == NULL)
        return crd__fail(l->client, CRD_INVALID_ARGUMENT, "count is NULL");
    char field[FIELD_MAX];
    size_t flen = hold_field(l, owner, field);
    const char *argv[3] = {"HGET", l->name, field};
    size_t lens[3] = {4, l->name_len, flen};
    *count = 0;
    return read_int(l, 3, argv, lens, count, "HGET");
}

crd_status crd_lock_hold_count(crd_lock *l, int64_t *count)
{
    return crd_lock_hold_count_owner(l, crd_owner_current(), count);
}

crd_status crd_lock_remaining_ttl(crd_lock *l, int64_t *ttl_ms)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    if (ttl_ms == NULL)
        return crd__fail(l->client, CRD_INVALID_ARGUMENT, "ttl_ms is NULL");
    const char *argv[2] = {"PTTL", l->name};
    size_t lens[2] = {4, l->name_len};
    return read_int(l, 2, argv, lens, ttl_ms, "PTTL");
}

crd_status crd_lock_validity_ms_owner(crd_lock *l, uint64_t owner, int64_t *validity_ms)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    if (validity_ms == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "validity_ms is NULL");
    *validity_ms = 0;
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    int64_t left = hold != NULL ? hold->valid_until - crd__now_ms() : 0;
    bool lost = hold != NULL && (hold->lost || left <= 0);
    pthread_mutex_unlock(&h->mu);
    if (hold == NULL)
        return crd__fail(c, CRD_NOT_OWNER, "owner %llu holds no lock on this name here",
                         (unsigned long long)owner);
    if (lost)
        return crd__fail(c, CRD_LOCK_LOST, "the hold is lost or its lease has run out");
    *validity_ms = left;
    crd__ok(c);
    return CRD_OK;
}

crd_status crd_lock_validity_ms(crd_lock *l, int64_t *validity_ms)
{
    return crd_lock_validity_ms_owner(l, crd_owner_current(), validity_ms);
}

crd_status crd_lock_extend_owner(crd_lock *l, uint64_t owner, int64_t lease_ms)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    if (lease_ms < 1 || lease_ms > CRD_DURATION_MAX_MS)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lease_ms must be 1..%lld (got %lld)",
                         (long long)CRD_DURATION_MAX_MS, (long long)lease_ms);
    crd__holds *h = c->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
    bool known = hold != NULL, lost = hold != NULL && hold->lost;
    pthread_mutex_unlock(&h->mu);
    if (!known)
        return crd__fail(c, CRD_NOT_OWNER, "owner %llu holds no lock on this name here",
                         (unsigned long long)owner);
    if (lost)
        return crd__fail(c, CRD_LOCK_LOST, "the hold was lost");
    char field[FIELD_MAX];
    size_t flen = hold_field(l, owner, field);
    char lease_s[24];
    size_t lease_len = (size_t)fmt_i64(lease_s, lease_ms);
    bool rd = l->kind == CRD__READ;
    const char *keys[2] = {l->name, l->names.rw_prefix.p};
    size_t keylens[2] = {l->name_len, l->names.rw_prefix.len};
    const char *args[2] = {lease_s, field};
    size_t arglens[2] = {lease_len, flen};
    crd__conn *conn;
    if ((st = crd__pool_get(c, &conn)) != CRD_OK)
        return st;
    int64_t sent = crd__now_ms();
    redisReply *r = NULL;
    st = crd__script_run(c, conn, rd ? CRD__SCRIPT_RW_READ_RENEW : CRD__SCRIPT_LOCK_RENEW,
                         rd ? 2 : 1, keys, keylens, 2, args, arglens, &r);
    crd__pool_put(c, conn);
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER) {
        bool ok = r->element[0]->integer == 1;
        pthread_mutex_lock(&h->mu);
        hold = crd__holds_find(h, l->name, l->name_len, owner, l->kind);
        if (hold != NULL) {
            if (ok) {
                hold->valid_until = sent + lease_ms;
                if (!hold->watchdog)
                    hold->lease_ms = lease_ms;
            } else {
                hold->lost = true;
            }
        }
        pthread_mutex_unlock(&h->mu);
        st = ok ? CRD_OK : crd__fail(c, CRD_LOCK_LOST, "the hold expired or was force-unlocked");
        if (ok)
            crd__ok(c);
    } else {
        st = r->type == REDIS_REPLY_ERROR ? server_error(c, r, "extend") : unexpected(c, r, "extend");
    }
    freeReplyObject(r);
    return st;
}

crd_status crd_lock_extend(crd_lock *l, int64_t lease_ms)
{
    return crd_lock_extend_owner(l, crd_owner_current(), lease_ms);
}

crd_status crd_lock_run(crd_lock *l, int64_t wait_ms, int64_t lease_ms, int (*fn)(void *arg),
                        void *arg, int *fn_result)
{
    if (fn == NULL)
        return crd__fail(l ? l->client : NULL, CRD_INVALID_ARGUMENT, "fn is NULL");
    crd_status st = crd_lock_acquire(l, wait_ms, lease_ms);
    if (st != CRD_OK)
        return st;
    int rc = fn(arg);
    if (fn_result != NULL)
        *fn_result = rc;
    return crd_lock_release(l);
}
