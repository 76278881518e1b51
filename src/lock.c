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

#define FIELD_MAX 64

static bool check_ms(int64_t v, bool allow_forever)
{
    if (allow_forever && v == -1)
        return true;
    return v >= 0 && v <= CRD_DURATION_MAX_MS;
}

/* ---- handles ----------------------------------------------------------------------------- */

crd_status crd_lock_new_n(crd_client *c, const char *name, size_t len, crd_lock **out)
{
    if (out == NULL)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    crd_status st = crd__client_check(c);
    if (st != CRD_OK)
        return st;
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
    crd_lock *l = calloc(1, sizeof *l);
    if (l == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a lock");
    l->client = c;
    l->name = malloc(len + 1);
    if (l->name == NULL || crd__prefix_name("redisson_lock__channel", name, len, &l->channel) ||
        crd__prefix_name("redisson_unlock_latch", name, len, &l->latch_prefix)) {
        crd_lock_free(l);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a lock");
    }
    memcpy(l->name, name, len);
    l->name[len] = '\0';
    l->name_len = len;
    /* The latch is "<prefix>:<rid>": keep the trailing ':' in the prefix. */
    char *p = realloc(l->latch_prefix.p, l->latch_prefix.len + 2);
    if (p == NULL) {
        crd_lock_free(l);
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate a lock");
    }
    p[l->latch_prefix.len++] = ':';
    p[l->latch_prefix.len] = '\0';
    l->latch_prefix.p = p;
    crd__ok(c);
    *out = l;
    return CRD_OK;
}

crd_status crd_lock_new(crd_client *c, const char *name, crd_lock **out)
{
    if (name == NULL) {
        if (out != NULL)
            *out = NULL;
        return crd__fail(c, CRD_INVALID_ARGUMENT, "lock name is NULL");
    }
    return crd_lock_new_n(c, name, strlen(name), out);
}

void crd_lock_free(crd_lock *l)
{
    if (l == NULL)
        return;
    free(l->name);
    free(l->channel.p);
    free(l->latch_prefix.p);
    free(l);
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

/* ---- acquire ------------------------------------------------------------------------------ */

/* Reads HGET N F on a fresh connection to learn whether an acquire whose reply was lost
 * was executed. Sets *happened; CRD_IO when even that read failed. */
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
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner);
    if (hold != NULL && hold->lost) {
        /* The old hold was lost but not yet reported; this acquire starts a new one. */
        crd__holds_remove(h, hold);
        hold = NULL;
    }
    if (hold == NULL) {
        hold = crd__holds_insert(h, l->name, l->name_len, owner);
        if (hold == NULL) {
            pthread_mutex_unlock(&h->mu);
            /* Redis holds the lock but we cannot track it: it expires after its lease. */
            return crd__fail(c, CRD_NO_MEMORY, "acquired, but cannot record the hold");
        }
    }
    hold->count++;
    hold->lease_ms = lease;
    if (watchdog && !hold->watchdog)
        h->nwatchdog++;
    else if (!watchdog && hold->watchdog)
        h->nwatchdog--;
    hold->watchdog = watchdog;
    hold->valid_until = sent_ms + lease;
    hold->failing = false;
    pthread_mutex_unlock(&h->mu);
    if (watchdog)
        crd__watchdog_kick(c);
    return CRD_OK;
}

static int64_t local_count(crd_lock *l, uint64_t owner)
{
    crd__holds *h = l->client->holds;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner);
    int64_t n = hold != NULL && !hold->lost ? hold->count : 0;
    pthread_mutex_unlock(&h->mu);
    return n;
}

typedef struct attempt {
    bool acquired;
    int64_t ttl; /* when not acquired: the holder's PTTL (-1: no TTL) */
} attempt;

/* One acquire script call. *pending_unknown carries an unresolved lost reply across
 * attempts: while it is set, the field is read back before anything is sent again. */
static crd_status try_once(crd_lock *l, uint64_t owner, const char *field, size_t flen,
                           int64_t lease, bool watchdog, bool *pending_unknown, attempt *out)
{
    crd_client *c = l->client;
    out->acquired = false;
    out->ttl = 0;
    if (*pending_unknown) {
        bool happened = false;
        crd_status st = resolve_acquire(l, field, flen, local_count(l, owner) + 1, &happened);
        if (st != CRD_OK)
            return st;
        *pending_unknown = false;
        if (happened) {
            out->acquired = true;
            return record_acquire(l, owner, lease, watchdog, crd__now_ms() - lease / 2);
        }
    }
    char lease_s[24];
    size_t lease_len = (size_t)snprintf(lease_s, sizeof lease_s, "%" PRId64, lease);
    const char *keys[1] = {l->name};
    size_t keylens[1] = {l->name_len};
    const char *args[2] = {lease_s, field};
    size_t arglens[2] = {lease_len, flen};
    crd__conn *conn;
    crd_status st = crd__pool_get(c, &conn);
    if (st != CRD_OK)
        return st; /* nothing was sent */
    int64_t sent = crd__now_ms();
    redisReply *r = NULL;
    st = crd__script_run(c, conn, CRD__SCRIPT_RLOCK_ACQUIRE, 1, keys, keylens, 2, args, arglens, &r);
    crd__pool_put(c, conn);
    if (st == CRD_IO) {
        /* Sent, no reply: it may have run. Never resend; read the field back. */
        *pending_unknown = true;
        bool happened = false;
        st = resolve_acquire(l, field, flen, local_count(l, owner) + 1, &happened);
        if (st != CRD_OK)
            return st;
        *pending_unknown = false;
        if (!happened)
            return crd__fail(c, CRD_IO, "acquire failed on the connection and did not happen");
        out->acquired = true;
        return record_acquire(l, owner, lease, watchdog, sent);
    }
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        out->acquired = true;
        return record_acquire(l, owner, lease, watchdog, sent);
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        out->ttl = r->integer;
        freeReplyObject(r);
        return CRD_OK;
    }
    st = r->type == REDIS_REPLY_ERROR ? server_error(c, r, "acquire") : unexpected(c, r, "acquire");
    freeReplyObject(r);
    return st;
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
    bool watchdog = lease_ms <= 0;
    int64_t lease = watchdog ? c->opts.watchdog_timeout_ms : lease_ms;
    char field[FIELD_MAX];
    size_t flen = crd__owner_field(c->uuid, owner, field);
    int64_t start = crd__now_ms();
    int64_t deadline = wait_ms < 0 ? INT64_MAX : start + wait_ms;
    bool pending = false;
    attempt a;

    st = try_once(l, owner, field, flen, lease, watchdog, &pending, &a);
    if (st != CRD_OK && !(st == CRD_IO && wait_ms != 0))
        return st;
    if (st == CRD_OK && a.acquired) {
        crd__ok(c);
        return CRD_OK;
    }
    if (wait_ms == 0)
        return crd__fail(c, CRD_BUSY, "lock \"%.*s\" is held by another owner (TTL %lld ms)",
                         (int)(l->name_len > 60 ? 60 : l->name_len), l->name, (long long)a.ttl);

    /* Subscribe first, then re-check: a release between the two is not missed. */
    crd__sub *sub = NULL;
    bool confirmed = false;
    int64_t sub_deadline = crd__now_ms() + c->opts.subscription_timeout_ms;
    if (sub_deadline > deadline)
        sub_deadline = deadline;
    st = crd__sub_acquire(c, l->channel.p, l->channel.len, sub_deadline, &sub, &confirmed);
    if (sub == NULL)
        return st;
    crd_status last_error = CRD_OK;
    for (;;) {
        if (atomic_load(&c->closed)) {
            st = crd__fail(c, CRD_CLOSED, "client closed while waiting");
            break;
        }
        st = try_once(l, owner, field, flen, lease, watchdog, &pending, &a);
        if (st == CRD_OK && a.acquired)
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
         * poll interval when there is no TTL, no live subscription, or Redis failed. */
        int64_t slice;
        if (st == CRD_OK && a.ttl >= 0 && confirmed)
            slice = a.ttl;
        else if (st == CRD_OK && a.ttl >= 0)
            slice = a.ttl < c->opts.poll_interval_ms ? a.ttl : c->opts.poll_interval_ms;
        else
            slice = c->opts.poll_interval_ms;
        if (slice < 1)
            slice = 1;
        if (c->opts.max_wait_slice_ms > 0 && slice > c->opts.max_wait_slice_ms)
            slice = c->opts.max_wait_slice_ms;
        int64_t until = now + slice < deadline ? now + slice : deadline;
        crd_status w = crd__sub_wait(c, sub, until, &confirmed);
        if (w == CRD_CLOSED) {
            st = crd__fail(c, CRD_CLOSED, "client closed while waiting");
            break;
        }
        if (!confirmed && crd__now_ms() < deadline) {
            /* The subscriber connection is down or re-subscribing: ask for the
             * subscription again (no-op if under way) and keep re-checking on a bound. */
            confirmed = false;
        }
    }
    crd__sub_release(c, sub);
    if (st == CRD_OK)
        crd__ok(c);
    return st;
}

crd_status crd_lock_acquire(crd_lock *l, int64_t wait_ms, int64_t lease_ms)
{
    return crd_lock_acquire_owner(l, crd_owner_current(), wait_ms, lease_ms);
}

/* ---- release ------------------------------------------------------------------------------ */

/* Sends the unlock script with one retry on a fresh connection (same request id). */
static crd_status send_unlock(crd_client *c, const char *name, size_t name_len,
                              const crd__buf *channel, const crd__buf *latch_prefix,
                              const char *field, size_t flen, int64_t rearm, redisReply **reply)
{
    char rid[33];
    if (crd__random_hex32(rid) != CRD_OK)
        return crd__fail(c, CRD_IO, "cannot read random bytes for the request id");
    char latch[latch_prefix->len + 33];
    memcpy(latch, latch_prefix->p, latch_prefix->len);
    memcpy(latch + latch_prefix->len, rid, 32);
    char rearm_s[24], lttl_s[24];
    size_t rearm_len = (size_t)snprintf(rearm_s, sizeof rearm_s, "%" PRId64, rearm);
    /* The latch must outlive every retry of this call: two command timeouts plus slack. */
    int64_t lttl = 2 * c->opts.command_timeout_ms + 1000;
    size_t lttl_len = (size_t)snprintf(lttl_s, sizeof lttl_s, "%" PRId64, lttl);
    const char *keys[3] = {name, channel->p, latch};
    size_t keylens[3] = {name_len, channel->len, latch_prefix->len + 32};
    const char *args[5] = {"0", rearm_s, field, "PUBLISH", lttl_s};
    size_t arglens[5] = {1, rearm_len, flen, 7, lttl_len};
    crd_status st = CRD_IO;
    for (int try_no = 0; try_no < 2 && st == CRD_IO; try_no++) {
        crd__conn *conn;
        st = crd__pool_get(c, &conn);
        if (st != CRD_OK)
            continue;
        st = crd__script_run(c, conn, CRD__SCRIPT_RLOCK_UNLOCK, 3, keys, keylens, 5, args, arglens,
                             reply);
        crd__pool_put(c, conn);
    }
    return st;
}

/* Owner-checked release of one hold; lock handle not required. */
static crd_status release_hold(crd_client *c, const char *name, size_t name_len,
                               const crd__buf *channel, const crd__buf *latch_prefix, uint64_t owner)
{
    char field[FIELD_MAX];
    size_t flen = crd__owner_field(c->uuid, owner, field);
    crd__holds *h = c->holds;
    int64_t rearm = c->opts.watchdog_timeout_ms;
    bool known = false, was_lost = false;
    pthread_mutex_lock(&h->mu);
    crd__hold *hold = crd__holds_find(h, name, name_len, owner);
    if (hold != NULL) {
        known = true;
        was_lost = hold->lost;
        rearm = hold->lease_ms;
        if (hold->count <= 1)
            hold->releasing = true; /* cancel renewal before the final release is sent */
    }
    pthread_mutex_unlock(&h->mu);
    if (was_lost) {
        pthread_mutex_lock(&h->mu);
        hold = crd__holds_find(h, name, name_len, owner);
        if (hold != NULL)
            crd__holds_remove(h, hold);
        pthread_mutex_unlock(&h->mu);
        return crd__fail(c, CRD_LOCK_LOST, "the hold on \"%.*s\" was lost before this release",
                         (int)(name_len > 60 ? 60 : name_len), name);
    }
    redisReply *r = NULL;
    crd_status st = send_unlock(c, name, name_len, channel, latch_prefix, field, flen, rearm, &r);
    pthread_mutex_lock(&h->mu);
    hold = crd__holds_find(h, name, name_len, owner);
    if (st != CRD_OK) {
        if (hold != NULL)
            hold->releasing = false; /* outcome unknown: keep renewing */
        pthread_mutex_unlock(&h->mu);
        return st;
    }
    if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
        if (hold != NULL) {
            if (r->integer == 1) {
                crd__holds_remove(h, hold);
            } else {
                hold->count--;
                hold->releasing = false;
                if (hold->count < 1)
                    hold->count = 1; /* Redis says held: trust Redis */
            }
        }
        pthread_mutex_unlock(&h->mu);
        freeReplyObject(r);
        crd__ok(c);
        return CRD_OK;
    }
    if (r->type == REDIS_REPLY_NIL) {
        if (hold != NULL)
            crd__holds_remove(h, hold);
        pthread_mutex_unlock(&h->mu);
        freeReplyObject(r);
        if (known)
            return crd__fail(c, CRD_LOCK_LOST, "the hold on \"%.*s\" expired or was force-unlocked",
                             (int)(name_len > 60 ? 60 : name_len), name);
        return crd__fail(c, CRD_NOT_OWNER, "owner %llu does not hold \"%.*s\"",
                         (unsigned long long)owner, (int)(name_len > 60 ? 60 : name_len), name);
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
    return release_hold(l->client, l->name, l->name_len, &l->channel, &l->latch_prefix, owner);
}

crd_status crd_lock_release(crd_lock *l) { return crd_lock_release_owner(l, crd_owner_current()); }

crd_status crd__release_hold_by_name(crd_client *c, const char *name, size_t len, uint64_t owner)
{
    crd__buf channel = {0}, latch = {0};
    crd_status st = crd__prefix_name("redisson_lock__channel", name, len, &channel);
    if (st == CRD_OK)
        st = crd__prefix_name("redisson_unlock_latch", name, len, &latch);
    if (st == CRD_OK) {
        char *p = realloc(latch.p, latch.len + 2);
        if (p == NULL) {
            st = CRD_NO_MEMORY;
        } else {
            latch.p = p;
            p[latch.len++] = ':';
            p[latch.len] = '\0';
            st = release_hold(c, name, len, &channel, &latch, owner);
        }
    }
    free(channel.p);
    free(latch.p);
    return st;
}

/* ---- force-unlock and introspection --------------------------------------------------------- */

crd_status crd_lock_force_unlock(crd_lock *l, bool *was_locked)
{
    crd_status st = check_lock(l);
    if (st != CRD_OK)
        return st;
    crd_client *c = l->client;
    const char *keys[2] = {l->name, l->channel.p};
    size_t keylens[2] = {l->name_len, l->channel.len};
    const char *args[2] = {"0", "PUBLISH"};
    size_t arglens[2] = {1, 7};
    crd__conn *conn;
    if ((st = crd__pool_get(c, &conn)) != CRD_OK)
        return st;
    redisReply *r = NULL;
    st = crd__script_run(c, conn, CRD__SCRIPT_RLOCK_FORCE_UNLOCK, 2, keys, keylens, 2, args, arglens,
                         &r);
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
    const char *argv[2] = {"EXISTS", l->name};
    size_t lens[2] = {6, l->name_len};
    int64_t v = 0;
    st = read_int(l, 2, argv, lens, &v, "EXISTS");
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
    size_t flen = crd__owner_field(l->client->uuid, owner, field);
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
    size_t flen = crd__owner_field(l->client->uuid, owner, field);
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
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner);
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
    crd__hold *hold = crd__holds_find(h, l->name, l->name_len, owner);
    bool known = hold != NULL, lost = hold != NULL && hold->lost;
    pthread_mutex_unlock(&h->mu);
    if (!known)
        return crd__fail(c, CRD_NOT_OWNER, "owner %llu holds no lock on this name here",
                         (unsigned long long)owner);
    if (lost)
        return crd__fail(c, CRD_LOCK_LOST, "the hold was lost");
    char field[FIELD_MAX];
    size_t flen = crd__owner_field(c->uuid, owner, field);
    char lease_s[24];
    size_t lease_len = (size_t)snprintf(lease_s, sizeof lease_s, "%" PRId64, lease_ms);
    const char *keys[1] = {l->name};
    size_t keylens[1] = {l->name_len};
    const char *args[2] = {lease_s, field};
    size_t arglens[2] = {lease_len, flen};
    crd__conn *conn;
    if ((st = crd__pool_get(c, &conn)) != CRD_OK)
        return st;
    int64_t sent = crd__now_ms();
    redisReply *r = NULL;
    st = crd__script_run(c, conn, CRD__SCRIPT_LOCK_RENEW, 1, keys, keylens, 2, args, arglens, &r);
    crd__pool_put(c, conn);
    if (st != CRD_OK)
        return st;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
        r->element[0]->type == REDIS_REPLY_INTEGER) {
        bool ok = r->element[0]->integer == 1;
        pthread_mutex_lock(&h->mu);
        hold = crd__holds_find(h, l->name, l->name_len, owner);
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
