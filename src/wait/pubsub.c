/*
 * pubsub.c -- the client's subscriber connections and the waiters they wake.
 *
 * A dedicated thread owns the subscriber connections: they are never used for commands
 * and never touched by another thread. Classic pub/sub (and sharded pub/sub on a single
 * server) uses one connection. Sharded pub/sub on a cluster (PROTOCOL.md 4.4) uses one
 * connection per primary that owns channels with waiters, all in one poll(): each
 * channel is SSUBSCRIBEd at the primary of its slot; when a server pushes SUNSUBSCRIBE
 * (the slot moved away) or a connection dies, the channel is resubscribed at the owner
 * the refreshed slot map names and its waiters are woken to re-check, exactly as after
 * a reconnect. Waiters take a reference on a per-channel entry;
 * the first reference makes the thread send SUBSCRIBE, the last one UNSUBSCRIBE, so all
 * local waiters of a lock share one subscription. The thread that lets go of the last
 * reference writes that UNSUBSCRIBE itself on a plaintext link the subscriber thread is
 * not writing (leave_direct: one send(), no wake-up of this thread); otherwise (TLS, a
 * link busy or not connected) it wakes this thread, which sends it. After a hand-off
 * (the thread sent its lone waiter's acquire) the last reference goes without either:
 * the acquire returns with nothing sent and nobody woken on its way out (bench/
 * README.md, "The hand-off's way out, kept"), and the entry stays subscribed until the
 * holder's release of that lock writes the UNSUBSCRIBE first (crd__sub_end_linger), or
 * HANDOFF_LOOK_MS pass and this thread sends it on its own. Kept past that release, it
 * was counted among the receivers of the next holders' releases elsewhere, which then
 * deferred for a waiter that did not wait (procs-4 at half its rate, issue #48). A
 * waiter that joins an entry still subscribed with nobody waiting would hear messages
 * published before its own re-try: the entry turns stale (its messages wake nobody) and
 * is subscribed afresh, UNSUBSCRIBE and SUBSCRIBE in one write, before it is live again.
 * Each entry has a permit counter and a
 * condition variable: a "0" message adds one permit and wakes one waiter, a "1" adds a
 * permit per waiter and wakes all (the lock rule; semaphore and latch channels have
 * their own, chosen by crd__sub_acquire_rule: CRD__WAKE_COUNT, CRD__WAKE_ALL). After a reconnect,
 * every entry is resubscribed and, once confirmed, every waiter is woken to re-check,
 * because messages published while disconnected are lost.
 *
 * Lock: ps->mu guards every entry and the connection state; a link's wmu (a leaf, taken
 * without ps->mu) its writes and the life of its connection. Threads: the subscriber
 * thread (reads the subscriber sockets, writes them, opens and closes them) and callers'
 * threads (wait on entries; the last waiter of an entry may write its UNSUBSCRIBE).
 * Waiters are told what to do through a self-pipe; the thread never blocks on a mutex
 * while holding the socket half-written. In sentinel mode the connection goes to the
 * current primary (sentinel.c) and is reopened when the primary moves.
 */
#include "pubsub_int.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>




/* Subscribed nowhere, nothing in flight (its link's connection is gone, or the server
 * confirmed its UNSUBSCRIBE). */
void crd__ps_unlinked(crd__sub *s)
{
    s->subscribed = s->inflight = s->unsubscribing = s->resubscribe = s->stale = false;
    s->kept = false;
    s->own_skip = 0;
    s->link = NULL;
}

void crd__ps_free_sub(crd__sub *s)
{
    pthread_cond_destroy(&s->cv);
    free(s->channel);
    free(s);
}

void crd__ps_write_loop_fd(crd__pubsub *ps)
{
    uint64_t one = 1;
    ssize_t n = write(ps->loop_fd, &one, sizeof one);
    (void)n; /* a full counter already says "progress" */
}

/* Tells the event loop (loop.c) that an operation may progress. Caller holds ps->mu. */
void crd__ps_notify_loop(crd__pubsub *ps, crd__sub *s)
{
    if (s != NULL)
        atomic_fetch_add_explicit(&s->events, 1, memory_order_release);
    if (ps->loop_fd >= 0 && (s == NULL || s->loop_refs > 0) &&
        !atomic_exchange(&ps->loop_signalled, true))
        crd__ps_write_loop_fd(ps);
}

/* Adds permits and wakes; all = a "1" message or a resubscribe. */
void crd__ps_wake(crd__pubsub *ps, crd__sub *s, bool all)
{
    if (all) {
        s->permits += s->refs > 0 ? s->refs : 1;
        pthread_cond_broadcast(&s->cv);
    } else {
        int64_t cap = s->refs > s->need ? s->refs : s->need;
        if (s->permits < cap)
            s->permits++;
        /* A counted turn sleeps until its releases have all come (one wake-up, not one
         * per release); a second waiter here is woken as ever. */
        if (s->permits >= s->need || s->refs > 1)
            pthread_cond_signal(&s->cv);
    }
    crd__ps_notify_loop(ps, s);
}

/* The counting rule (semaphores): a payload k > 0 lets up to k waiters re-check, one that
 * is 0 or negative none (no permit can be free then, and the message that frees one is
 * still to come); a payload that is not an integer wakes everyone to re-check. */
void crd__ps_wake_counted(crd__pubsub *ps, crd__sub *s, const char *p, size_t len)
{
    char buf[24];
    char *end = NULL;
    long long k = 0;
    bool number = len > 0 && len < sizeof buf;
    if (number) {
        memcpy(buf, p, len);
        buf[len] = '\0';
        errno = 0;
        k = strtoll(buf, &end, 10);
        number = errno == 0 && end == buf + len;
    }
    if (!number) {
        crd__ps_wake(ps, s, true);
        return;
    }
    if (k <= 0)
        return;
    int64_t room = (s->refs > 0 ? s->refs : 1) - s->permits;
    if (room <= 0)
        return;
    s->permits += k < room ? k : room;
    if (k > 1)
        pthread_cond_broadcast(&s->cv);
    else
        pthread_cond_signal(&s->cv);
    crd__ps_notify_loop(ps, s);
}

/* ---- the subscriber thread ----------------------------------------------------------- */

/* The link a channel belongs on (created if new; NULL when out of memory). Sharded
 * channels in a cluster go to the primary of their slot, read from the map as it is
 * now (no I/O: the thread refreshes the map outside the mutex). Caller holds ps->mu. */
static sublink *link_for(crd_client *c, const crd__sub *s)
{
    crd__pubsub *ps = c->ps;
    crd__node *node = NULL;
    if (c->cluster != NULL && c->sharded) {
        node = crd__cluster_node_peek(c, s->channel, s->len);
        if (node == NULL)
            return NULL;
    }
    for (sublink *l = ps->links; l != NULL; l = l->next)
        if (l->node == node)
            return l;
    sublink *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    if (pthread_mutex_init(&l->wmu, NULL) != 0) {
        free(l);
        return NULL;
    }
    l->node = node;
    l->backoff = 50;
    l->next = ps->links;
    ps->links = l;
    return l;
}

/* Encodes CMD CHANNEL into the link's outgoing buffer; false when out of memory (the
 * entry then stays as it is and is tried again on the next pass). */
static bool append(sublink *l, const char *cmd, const crd__sub *s)
{
    const char *argv[2] = {cmd, s->channel};
    size_t lens[2] = {strlen(cmd), s->len};
    return crd__resp_append(&l->out, &l->out_len, &l->out_cap, 2, argv, lens);
}

/* Queues the (UN)SUBSCRIBEs that bring the servers in line with the entries, marks links
 * that must connect first, and frees entries nobody wants that are no longer
 * subscribed. Returns the earliest entry retry time (INT64_MAX: none). Caller holds
 * ps->mu. */
static int64_t sync_entries(crd_client *c, int64_t now)
{
    crd__pubsub *ps = c->ps;
    const char *sub_cmd = c->sharded ? "SSUBSCRIBE" : "SUBSCRIBE";
    const char *unsub_cmd = c->sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE";
    int64_t next_retry = INT64_MAX;
    crd__sub **pp = &ps->subs;
    while (*pp != NULL) {
        crd__sub *s = *pp;
        if (s->look_at != 0 && s->look_at <= now)
            s->look_at = 0;
        else if (s->look_at != 0 && s->look_at < next_retry)
            next_retry = s->look_at;
        bool want = s->refs > 0 || s->watch_refs > 0;
        if (!s->inflight && want && s->subscribed && s->stale) {
            /* Subscribed afresh: what it hears after the new confirmation was published
             * after its waiter joined. Both in one write; the gap between the two
             * confirmations hears nothing. (Out of memory for the second: the SUBSCRIBE
             * follows the confirmation, as for any entry nobody is subscribed for.) */
            if (append(s->link, unsub_cmd, s)) {
                s->inflight = true;
                s->unsubscribing = true;
                s->resubscribe = append(s->link, sub_cmd, s);
            }
        } else if (!s->inflight && want && !s->subscribed) {
            sublink *l = s->retry_at > now ? NULL : link_for(c, s);
            if (l != NULL && s->dropped_by != NULL && l->node == s->dropped_by &&
                !crd__cluster_read_after(c, s->drop_mark) &&
                now - s->dropped_at < c->opts.command_timeout_ms) {
                /* The map still names the node that just dropped the channel, and was
                 * read before it did (the refresh after the push not due yet, or one in
                 * flight elsewhere). In a failover that node is a replica by now: it
                 * takes the SSUBSCRIBE, but its new primary forwards the shard's
                 * messages to it only once it knows it as its replica (gossip, up to a
                 * second or more), and a release published meanwhile was lost with the
                 * waiter asleep on its lease's TTL. Wait for a map read after the push
                 * (the push marked it stale), for command_timeout_ms at most. */
                s->retry_at = now + 50;
                l = NULL;
            }
            if (s->retry_at > now && s->retry_at < next_retry)
                next_retry = s->retry_at;
            if (l != NULL && l->conn.ctx == NULL) {
                l->wanted = true;
            } else if (l != NULL && append(l, sub_cmd, s)) {
                s->link = l;
                s->inflight = true;
                s->dropped_by = NULL;
            }
        } else if (!s->inflight && !want && s->subscribed && s->look_at == 0) {
            if (!append(s->link, unsub_cmd, s)) {
                pp = &s->next;
                continue;
            }
            s->inflight = true;
            s->unsubscribing = true;
            s->resubscribe = false;
            s->kept = false;
            s->own_skip = 0;
        } else if (!s->inflight && !want && !s->subscribed) {
            *pp = s->next;
            crd__ps_free_sub(s);
            continue;
        }
        pp = &s->next;
    }
    return next_retry;
}

/* The entry a reply on link l is about: it must be on that link (a late message on a
 * link an entry has left is stale). Caller holds ps->mu. */
static crd__sub *find_on(crd__pubsub *ps, const sublink *l, const char *ch, size_t len)
{
    crd__sub *s = find(ps, ch, len);
    return s != NULL && s->link == l ? s : NULL;
}

/* A refused (S)SUBSCRIBE: a MOVED (the map is behind: learn the slot's owner) or a
 * server that cannot do it. The entries waiting on link l try again. */
static void subscribe_refused(crd_client *c, sublink *l, const redisReply *r)
{
    crd__pubsub *ps = c->ps;
    int slot, port;
    const char *host;
    size_t hostlen;
    crd__node *n = NULL;
    if (c->cluster != NULL && crd__cluster_parse_redirect(r, &slot, &host, &hostlen, &port) &&
        hostlen > 0 && (n = crd__cluster_node_at(c, host, hostlen, port)) != NULL)
        crd__cluster_moved(c, slot, n);
    else
        crd__cluster_stale(c);
    /* An ACL user without the channel (NOPERM) is never confirmed: its waiters fall
     * back to re-checking every poll_interval_ms. Say so instead of degrading in
     * silence. */
    crd__log(c, CRD_LOG_WARN, "subscriber: the server refused a (S)SUBSCRIBE: %.*s (waiters "
             "re-check every poll_interval_ms until it is accepted)",
             (int)(r->len > 200 ? 200 : r->len), r->str);
    int64_t retry = crd__now_ms() + (n != NULL ? 0 : 100);
    pthread_mutex_lock(&ps->mu);
    for (crd__sub *s = ps->subs; s != NULL; s = s->next)
        if (s->link == l && s->inflight && !s->subscribed) {
            s->inflight = false;
            s->link = NULL;
            s->retry_at = retry;
        }
    pthread_mutex_unlock(&ps->mu);
}

/* A message on s's channel (ps->mu held): the hand-off's acquire goes out, or the waiters
 * its wake rule names are woken. True when a watched hold's channel spoke. *handed: the
 * hand-off's waiter is to be woken, by the caller once it has let go of ps->mu. */
static bool on_message(crd_client *c, crd__sub *s, const redisReply *r, bool *handed)
{
    crd__pubsub *ps = c->ps;
    /* A message that arrives while an UNSUBSCRIBE is in flight was published before any
     * waiter that joined since is subscribed; that waiter re-checks once its own
     * subscription is confirmed anyway, so the message would only cost it a useless
     * retry. */
    const redisReply *p = r->element[2];
    bool all = p->type == REDIS_REPLY_STRING && p->len == 1 && p->str[0] == '1';
    *handed = false;
    bool wakes = live(s);
    if (wakes && s->own_skip > 0) {
        /* This client's own release, heard on the subscription it kept through it
         * (crd__sub_keep_linger): it wakes nobody here, and it is no turn. */
        s->own_skip--;
        wakes = false;
    } else if (wakes && s->kept && s->refs == 0) {
        /* A release elsewhere after this client's own: a turn its next counted acquire
         * lets pass (crd__sub_acquire_turn takes these permits). */
        if (s->permits < INT32_MAX)
            s->permits++;
        wakes = false;
    } else if (wakes && s->handoff != NULL && s->handoff->sent == 0) {
        /* The lone waiter's acquire goes out now; its wake-up overlaps the round trip. It
         * is the waiter this message wakes: no permit for another. */
        crd__handoff_send(c, s->handoff);
        *handed = true;
        /* Its waiter drops its reference as soon as the reply says it holds the lock,
         * with nothing written and nobody woken (crd__sub_release). */
        s->look_at = crd__now_ms() + HANDOFF_LOOK_MS;
    }
    if (wakes && !*handed && s->wake_rule == CRD__WAKE_COUNT) {
        crd__ps_wake_counted(ps, s, p->type == REDIS_REPLY_STRING ? p->str : "",
                     p->type == REDIS_REPLY_STRING ? p->len : 0);
    } else if (wakes && !*handed && s->wake_rule == CRD__WAKE_ALL) {
        crd__ps_wake(ps, s, true);
    } else if (wakes && (!*handed || all)) {
        crd__ps_wake(ps, s, all);
        *handed = false; /* woken here, with the others */
    } else if (*handed) {
        crd__ps_notify_loop(ps, s);
    }
    if (s->watch_refs == 0 || !live(s))
        return false;
    s->check = true;
    return true;
}

static void handle_reply(crd_client *c, sublink *l, redisReply *r)
{
    crd__pubsub *ps = c->ps;
    if (r->type == REDIS_REPLY_ERROR) {
        subscribe_refused(c, l, r);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    const redisReply *ch = r->element[1];
    bool message = strcmp(kind, "message") == 0 || strcmp(kind, "smessage") == 0;
    bool sharded = strcmp(kind, "ssubscribe") == 0 || strcmp(kind, "sunsubscribe") == 0;
    bool sub = strcmp(kind, "subscribe") == 0 || strcmp(kind, "ssubscribe") == 0;
    bool unsub = strcmp(kind, "unsubscribe") == 0 || strcmp(kind, "sunsubscribe") == 0;
    if (sub || unsub) {
        const char *word = sub ? (sharded ? "SSUBSCRIBE" : "SUBSCRIBE")
                               : (sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
        const char *argv[2] = {word, ch->str};
        size_t lens[2] = {strlen(word), ch->len};
        crd__trace(c, 2, argv, lens, r, NULL, true);
    }
    bool moved = false, checks = false, handed = false;
    pthread_mutex_lock(&ps->mu);
    crd__sub *s = find_on(ps, l, ch->str, ch->len);
    if (s != NULL) {
        if (message) {
            checks = on_message(c, s, r, &handed);
        } else if (sub) {
            CRD__COUNT(c, subscribes);
            s->inflight = false;
            s->subscribed = true;
            if (s->recheck) {
                s->recheck = false;
                crd__ps_wake(ps, s, true);
                if (s->watch_refs > 0) /* a force-unlock may have gone unheard */
                    checks = s->check = true;
            } else {
                pthread_cond_broadcast(&s->cv); /* waiters waiting for the confirmation */
                crd__ps_notify_loop(ps, s);
            }
        } else if (unsub && s->resubscribe && s->unsubscribing) {
            /* The first half of a fresh subscription (a stale entry): the SUBSCRIBE
             * behind it is in flight on the same link. */
            s->unsubscribing = false;
            s->resubscribe = false;
            s->subscribed = false;
            s->stale = false;
        } else if (unsub) {
            if (!s->unsubscribing && s->refs > 0) {
                /* Pushed by the server: the channel's slot moved away from this node.
                 * Resubscribe at the new owner, then wake everyone to re-check (a message
                 * published meanwhile is lost). The nodes need a moment to agree on the
                 * new owner: the map is re-read first, 50 ms later, and this node is
                 * not taken again from a map read before the push (sync_entries). */
                s->recheck = true;
                s->retry_at = crd__now_ms() + 50;
                s->dropped_by = l->node;
                s->drop_mark = crd__cluster_stale(c);
                s->dropped_at = crd__now_ms();
                moved = true;
            }
            crd__ps_unlinked(s);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    /* The hand-off's waiter wakes to a free mutex (signalled under it, it woke only to
     * sleep on it again until this thread let go). s lives on: entries are freed by this
     * thread only (sync_entries), or after it ended. */
    if (handed)
        pthread_cond_broadcast(&s->cv);
    if (checks && c->on_watched_message != NULL)
        c->on_watched_message(c);
    if (moved) {
        crd__log(c, CRD_LOG_INFO, "the server dropped the subscription of %.*s (its slot "
                 "moved); resubscribing at the new owner", (int)(ch->len > 100 ? 100 : ch->len),
                 ch->str);
    }
}

/* Marks every entry of link l unsubscribed after its connection died. */
static void lost_link(crd__pubsub *ps, sublink *l)
{
    pthread_mutex_lock(&ps->mu);
    for (crd__sub *s = ps->subs; s != NULL; s = s->next) {
        if (s->link != l)
            continue;
        if (s->subscribed || s->inflight)
            s->recheck = s->refs > 0;
        crd__ps_unlinked(s);
    }
    pthread_mutex_unlock(&ps->mu);
}

/* Sends what a waiter's own UNSUBSCRIBE left unsent, then what sync_entries queued for
 * link l, through its transport (plain or TLS). */
static bool flush_out(sublink *l)
{
    const char *why = NULL;
    pthread_mutex_lock(&l->wmu);
    bool ok = l->rest_len == 0 || crd__conn_send(&l->conn, l->rest, l->rest_len, &why);
    free(l->rest);
    l->rest = NULL;
    l->rest_len = 0;
    ok = ok && (l->out_len == 0 || crd__conn_send(&l->conn, l->out, l->out_len, &why));
    pthread_mutex_unlock(&l->wmu);
    if (l->out_len > 0 && l->owed_since == 0)
        l->owed_since = crd__now_ms();
    l->out_len = 0;
    return ok;
}

/* Whether an entry still waits for a confirmation on link l. */
static bool owes(crd__pubsub *ps, const sublink *l)
{
    bool any = false;
    pthread_mutex_lock(&ps->mu);
    for (crd__sub *s = ps->subs; s != NULL && !any; s = s->next)
        any = s->link == l && s->inflight;
    pthread_mutex_unlock(&ps->mu);
    return any;
}

static bool stopping(crd__pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    bool stop = ps->stop;
    pthread_mutex_unlock(&ps->mu);
    return stop;
}

/* Opens link l's connection (no lock held). On failure it backs off (50 ms doubling to
 * 1 s) and the cluster map is marked stale: the node may have failed over. */
static void connect_link(crd_client *c, sublink *l, int64_t now)
{
    const crd__endpoint *ep = &c->ep;
    if (l->node != NULL) {
        ep = &l->node->ep;
    } else if (c->cluster != NULL) {
        crd__node *any = crd__cluster_node_for(c, NULL, 0);
        if (any == NULL)
            return;
        ep = &any->ep;
    }
    /* The classic link of a standalone client follows the primary (Sentinel mode). */
    crd_status st = l->node == NULL && c->cluster == NULL ? crd__conn_open_primary(c, &l->conn)
                                                           : crd__conn_open(c, ep, &l->conn);
    if (st != CRD_OK) {
        l->retry_at = now + l->backoff;
        l->backoff = l->backoff < 1000 ? l->backoff * 2 : 1000;
        crd__cluster_stale(c);
        return;
    }
    l->backoff = 50;
    pthread_mutex_lock(&l->wmu);
    l->open = true;
    pthread_mutex_unlock(&l->wmu);
    if (l->opened++ > 0)
        crd__log(c, CRD_LOG_INFO, "subscriber connection to %s:%d reopened; resubscribing and "
                 "waking every waiter to re-check", ep->host != NULL ? ep->host : "unix",
                 ep->port);
}

static void close_link(crd_client *c, sublink *l)
{
    pthread_mutex_lock(&l->wmu);
    crd__conn_close(&l->conn);
    l->open = false;
    atomic_fetch_add(&l->gen, 1);
    free(l->rest);
    l->rest = NULL;
    l->rest_len = 0;
    pthread_mutex_unlock(&l->wmu);
    l->out_len = 0; /* for the old connection: the entries are resubscribed */
    l->owed_since = 0;
    lost_link(c->ps, l);
}

/* A link that has owed a confirmation for command_timeout_ms is given up (a server that
 * stalls, or a node the cluster replaced while stopped): its channels are subscribed
 * again where the map, or the Sentinel primary, now says, and their waiters re-check.
 * Without this a waiter's subscription stayed unconfirmed for as long as the node
 * stalled. Returns when the next check is due (INT64_MAX: none). */
static int64_t health_check(crd_client *c, int64_t now)
{
    int64_t next = INT64_MAX;
    int64_t limit = c->opts.command_timeout_ms;
    for (sublink *l = c->ps->links; l != NULL; l = l->next) {
        if (l->conn.ctx == NULL || l->owed_since == 0)
            continue;
        if (now - l->owed_since < limit) {
            next = l->owed_since + limit < next ? l->owed_since + limit : next;
            continue;
        }
        crd__log(c, CRD_LOG_WARN, "subscriber: no confirmation from %s:%d within %lld ms "
                 "(command_timeout_ms): the connection is given up, its channels are "
                 "subscribed again", l->node != NULL ? l->node->ep.host : "the server",
                 l->node != NULL ? l->node->ep.port : 0, (long long)limit);
        close_link(c, l);
        crd__cluster_stale(c);
        if (crd__topology_sentinel(c))
            crd__topology_suspect(c);
    }
    return next;
}

/* Connects the links entries wait for and that are due (the list only grows, under ps->mu,
 * from the subscriber thread; reading it there without the mutex is safe). *wake_at: moved
 * earlier to the next retry; *nlinks: the links counted. True when one was connected. */
static bool connect_wanted(crd_client *c, int64_t now, int64_t *wake_at, int *nlinks)
{
    bool connected = false;
    for (sublink *l = c->ps->links; l != NULL; l = l->next, (*nlinks)++) {
        if (l->conn.ctx != NULL || !l->wanted)
            continue;
        if (l->retry_at <= now) {
            l->wanted = false;
            connect_link(c, l, now);
            if (l->conn.ctx != NULL) {
                connected = true;
                continue;
            }
            l->wanted = true;
        }
        *wake_at = l->retry_at < *wake_at ? l->retry_at : *wake_at;
    }
    return connected;
}

/* poll()'s timeout in ms until wake_at (-1: none), capped for the cluster map's periodic
 * refresh and for looking at the Sentinel primary's generation. */
static int poll_timeout(crd_client *c, int64_t wake_at, bool sentinel)
{
    int timeout = -1;
    if (wake_at != INT64_MAX) {
        int64_t left = wake_at - crd__now_ms();
        timeout = left < 1 ? 1 : left > 1000 ? 1000 : (int)left;
    }
    if (c->cluster != NULL && c->sharded && (timeout < 0 || timeout > 1000))
        timeout = 1000; /* the map's periodic refresh, and links wanted later */
    if (sentinel && (timeout < 0 || timeout > 250))
        timeout = 250; /* look at the primary's generation four times a second */
    return timeout;
}

/* Reads what link l has and handles each message; a link that failed is closed (and the
 * cluster map, or in Sentinel mode the primary, is looked at again). */
static void read_link(crd_client *c, sublink *l, bool sentinel)
{
    redisContext *ctx = l->conn.ctx;
    bool alive = crd__conn_fill(&l->conn) == REDIS_OK;
    void *reply = NULL;
    bool heard = false;
    while (alive && redisGetReplyFromReader(ctx, &reply) == REDIS_OK && reply != NULL) {
        handle_reply(c, l, reply);
        freeReplyObject(reply);
        reply = NULL;
        heard = true;
    }
    if (heard) /* it answers: what it still owes gets a window of its own */
        l->owed_since = owes(c->ps, l) ? crd__now_ms() : 0;
    if (!alive || ctx->err) {
        uint64_t gen = l->conn.topo_gen;
        close_link(c, l);
        crd__cluster_stale(c);
        if (sentinel)
            crd__topology_changed(c, gen); /* the primary may have failed over */
    }
}

static void *subscriber_main(void *arg)
{
    /* (UN)SUBSCRIBEs go out with send(MSG_NOSIGNAL) or through TLS; SIGPIPE is blocked
     * in this thread all the same (crd__thread_create), so nothing it does can raise it. */
    crd__thread_enter("crd-pubsub");
    crd_client *c = arg;
    crd__pubsub *ps = c->ps;
    while (!stopping(ps)) {
        /* The slot map, when due for a refresh, is refreshed here, outside ps->mu. */
        if (c->cluster != NULL && c->sharded)
            crd__cluster_node_for(c, NULL, 0);
        int64_t now = crd__now_ms();
        pthread_mutex_lock(&ps->mu);
        int64_t wake_at = sync_entries(c, now);
        pthread_mutex_unlock(&ps->mu);
        int64_t health_at = health_check(c, now);
        wake_at = health_at < wake_at ? health_at : wake_at;
        int nlinks = 0;
        if (connect_wanted(c, now, &wake_at, &nlinks))
            continue; /* queue the subscriptions on the new connections first */
        struct pollfd pfd[nlinks + 1];
        sublink *of[nlinks + 1];
        int n = 0;
        bool buffered = false, closed = false;
        for (sublink *l = ps->links; l != NULL; l = l->next) {
            if (l->conn.ctx == NULL)
                continue;
            if (!flush_out(l)) {
                close_link(c, l);
                closed = true;
                continue;
            }
            /* TLS may already hold decrypted bytes poll() cannot see. */
            buffered = buffered || crd__conn_buffered(&l->conn);
            pfd[n].fd = l->conn.ctx->fd;
            pfd[n].events = POLLIN;
            pfd[n].revents = 0;
            of[n++] = l;
        }
        /* A link closed here has entries to subscribe again (lost_link): go round first
         * (sync_entries, connect_wanted), or poll() would sleep on what is left, up to
         * forever when nothing else is due. */
        if (closed)
            continue;
        pfd[n].fd = ps->pipe_fd[0];
        pfd[n].events = POLLIN;
        pfd[n].revents = 0;
        bool sentinel = crd__topology_sentinel(c);
        int got = poll(pfd, (nfds_t)n + 1, buffered ? 0 : poll_timeout(c, wake_at, sentinel));
        if (got < 0 && errno != EINTR)
            break;
        if (pfd[n].revents & POLLIN) {
            char buf[64];
            while (read(ps->pipe_fd[0], buf, sizeof buf) > 0) {
            }
        }
        for (int i = 0; i < n; i++)
            if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) || crd__conn_buffered(&of[i]->conn))
                read_link(c, of[i], sentinel);
        /* Sentinel mode: a connection to a primary that is no more is reopened to the new
         * one; its channels are resubscribed there and every waiter re-checks. */
        for (sublink *l = ps->links; sentinel && l != NULL; l = l->next)
            if (l->conn.ctx != NULL && l->conn.topo_gen != crd__topology_gen(c))
                close_link(c, l);
    }
    for (sublink *l = ps->links; l != NULL; l = l->next) {
        pthread_mutex_lock(&l->wmu);
        crd__conn_close(&l->conn);
        l->open = false;
        pthread_mutex_unlock(&l->wmu);
    }
    return NULL;
}

/* ---- lifecycle ----------------------------------------------------------------------- */

/* Starts the subscriber thread if it is not running. Caller holds ps->mu. */
crd_status crd__ps_start_thread(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    if (ps->thread_started)
        return CRD_OK;
    if (ps->pipe_fd[0] < 0)
        return crd__fail(c, CRD_IO, "the subscriber's wake-up pipe could not be created");
    if (crd__thread_create(&ps->thread, subscriber_main, c) != 0)
        return crd__fail(c, CRD_NO_MEMORY, "cannot start the subscriber thread");
    ps->thread_started = true;
    return CRD_OK;
}

crd_status crd__pubsub_start(crd_client *c)
{
    crd__pubsub *ps = calloc(1, sizeof *ps);
    if (ps == NULL)
        return CRD_NO_MEMORY;
    if (pipe2(ps->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0) {
        free(ps);
        return crd__fail(c, CRD_IO, "cannot create the subscriber's wake-up pipe");
    }
    ps->loop_fd = -1;
    if (crd__mutex_make(c, CRD__MU_PUBSUB, &ps->mu, &ps->idle_cv) != 0) {
        close(ps->pipe_fd[0]);
        close(ps->pipe_fd[1]);
        free(ps);
        return crd__fail(c, CRD_NO_MEMORY, "cannot make the subscriber's mutex");
    }
    c->ps = ps;
    pthread_mutex_lock(&ps->mu);
    crd_status st = crd__ps_start_thread(c);
    pthread_mutex_unlock(&ps->mu);
    return st;
}

/* In a forked child (ps->mu held by the fork handler): the subscriber thread does not
 * exist here. Close the inherited subscriber socket and pipe without writing to them;
 * the thread is started again on first use. */
void crd__pubsub_after_fork_child(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    /* The parent's subscriber thread may have been inside hiredis on these contexts. */
    while (ps->links != NULL) {
        sublink *l = ps->links;
        ps->links = l->next;
        crd__conn_abandon(&l->conn);
        free(l->out);
        free(l->rest); /* wmu may have been held by a parent thread: never destroyed */
        free(l);
    }
    close(ps->pipe_fd[0]);
    close(ps->pipe_fd[1]);
    if (pipe2(ps->pipe_fd, O_NONBLOCK | O_CLOEXEC) != 0)
        ps->pipe_fd[0] = ps->pipe_fd[1] = -1;
    /* Condition variables inherited from the parent may record waiters that do not
     * exist here: never destroy them (glibc would wait for those waiters forever). */
    while (ps->subs != NULL) {
        crd__sub *s = ps->subs;
        ps->subs = s->next;
        /* A waiter's lent attempt is referenced only by that waiter's stack, and the
         * waiter is not in this process. */
        if (s->handoff != NULL)
            crd__handoff_forget(s->handoff);
        free(s->channel);
        free(s);
    }
    memset(&ps->idle_cv, 0, sizeof ps->idle_cv);
    crd__cond_init(&ps->idle_cv);
    ps->total_refs = 0;
    ps->quiet = NULL; /* the parent's sleepers' entries: their threads are not here */
    ps->thread_started = false;
    ps->stop = false;
    if (ps->loop_fd >= 0)
        close(ps->loop_fd); /* the parent's loop: a client is not used across fork */
    ps->loop_fd = -1;
    atomic_store(&ps->loop_signalled, false);
}

void crd__pubsub_stop(crd_client *c)
{
    crd__pubsub *ps = c->ps;
    if (ps == NULL)
        return;
    /* Waiters see c->closed; wait for them to drop their references. */
    pthread_mutex_lock(&ps->mu);
    for (crd__sub *s = ps->subs; s != NULL; s = s->next)
        pthread_cond_broadcast(&s->cv);
    for (crd__sub *s = ps->quiet; s != NULL; s = s->next)
        pthread_cond_broadcast(&s->cv);
    while (ps->total_refs > 0)
        pthread_cond_wait(&ps->idle_cv, &ps->mu);
    ps->stop = true;
    pthread_mutex_unlock(&ps->mu);
    poke(ps);
    if (ps->thread_started)
        pthread_join(ps->thread, NULL);
    while (ps->subs != NULL) {
        crd__sub *s = ps->subs;
        ps->subs = s->next;
        crd__ps_free_sub(s);
    }
    while (ps->links != NULL) {
        sublink *l = ps->links;
        ps->links = l->next;
        crd__conn_close(&l->conn);
        free(l->out);
        free(l->rest);
        pthread_mutex_destroy(&l->wmu);
        free(l);
    }
    close(ps->pipe_fd[0]);
    close(ps->pipe_fd[1]);
    ps->pipe_fd[0] = ps->pipe_fd[1] = -1;
}

void crd__pubsub_free(crd_client *c)
{
    /* After crd__engine_stop: until then the I/O thread may still tell the loop of a
     * completion (crd__pubsub_loop_notify), which needs loop_fd and the mutex. */
    crd__pubsub *ps = c->ps;
    if (ps == NULL)
        return;
    if (ps->loop_fd >= 0)
        close(ps->loop_fd);
    crd__mutex_drop(c, CRD__MU_PUBSUB, &ps->mu, &ps->idle_cv);
    free(ps);
    c->ps = NULL;
}

/* The entry of channel, created (not yet wanted) when new; NULL when out of memory.
 * Caller holds ps->mu. */
crd__sub *crd__ps_entry_for(crd__pubsub *ps, const char *channel, size_t len)
{
    crd__sub *s = find(ps, channel, len);
    if (s != NULL)
        return s;
    s = calloc(1, sizeof *s);
    if (s != NULL)
        s->channel = malloc(len + 1);
    if (s == NULL || s->channel == NULL) {
        free(s);
        return NULL;
    }
    memcpy(s->channel, channel, len);
    s->channel[len] = '\0';
    s->len = len;
    crd__cond_init(&s->cv);
    s->next = ps->subs;
    ps->subs = s;
    return s;
}

