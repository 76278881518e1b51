/*
 * watchdog.c -- one renewal thread per client (PROTOCOL.md 6).
 *
 * Every third of watchdog_timeout_ms the thread collects the holds taken without an
 * explicit lease and renews them with lua/lock_renew.lua, 100 names per script call and
 * all calls of a period in one pipeline on the watchdog's own connection (so it never
 * waits behind a caller). A renewal only extends a field that still exists: a 0 reply
 * means the hold is gone, and the application is told (CRD_EVENT_LOCK_LOST). An error
 * or I/O failure never stops renewal: it is retried on a fresh connection at a shorter
 * interval while the lease runs out, and a hold whose local validity deadline passes is
 * declared lost.
 *
 * What to renew comes from holds.c; how each kind is renewed (script, keys per hold) from
 * kinds.c; the pipelined EVALSHA and its NOSCRIPT recovery from script.c. With replica
 * sync the round ends with WAIT, and a round no replica acknowledged extends no hold's
 * validity. In sentinel mode the connection follows the primary (sentinel.c): it is
 * reopened when the primary moves, and a READONLY or failed round re-resolves.
 *
 * A server reached with redis:// may check key slots all the same (a proxy in front of a
 * sharded database, a cluster node owning every slot): its CROSSSLOT answer to a mixed
 * batch (nothing ran) makes the round go again at once one slot per call, and every later
 * round too (deploy.c remembers it); elsewhere the batches mix slots, as before.
 *
 * On a cluster one script call may only name keys of one slot: holds are grouped by the
 * primary serving them and by slot, and each primary's calls are pipelined on its own
 * pool (renew_list_cluster). A call the node did not run (MOVED after a resharding,
 * ASK, TRYAGAIN, READONLY after a failover) is sent again at once through crd__call,
 * which follows the redirect, so a moved lock is renewed in the same round.
 *
 * Threads: the watchdog thread; callers only kick it. Locks: wd->mu for the thread's
 * schedule; holds->mu for the hold records (never both at once, never during I/O).
 * Callbacks (on_event) run on the watchdog thread with no lock held.
 */
#include "locks.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 100      /* names per renewal script call, as Redisson's default */
#define PIPELINE 64    /* script calls per round trip */

/* An event kept for the event loop's thread (events_on_loop). */
typedef struct loop_event {
    crd_event ev;
    char *name, *detail; /* copies, one allocation */
    struct loop_event *next;
} loop_event;

struct crd__watchdog {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started;
    bool stop;
    bool kicked;
    bool urgent;  /* a watched hold's channel had a message: check those holds now */
    bool now;     /* the primary moved (sentinel mode): renew every hold there now */
    bool ident_kick; /* the identity record has something new to look at (ident.c) */
    pthread_mutex_t ev_mu; /* a leaf: the loop events below */
    loop_event *ev_head, **ev_tail;
    /* The round in progress (the watchdog thread's own), kept here rather than on that
     * thread's stack, so that a process forked during a round can set its buffers aside
     * (crd__watchdog_after_fork_child) like the connections it abandons. */
    _Atomic(void *) round;
};

/* Keeps an event for crd_loop_dispatch (events_on_loop). False when out of memory (the
 * event is then delivered here, on the watchdog thread, rather than lost). */
static bool keep_for_loop(crd_client *c, const crd_event *ev)
{
    crd__watchdog *wd = c->wd;
    size_t dlen = strlen(ev->detail);
    loop_event *e = malloc(sizeof *e + ev->name_len + 1 + dlen + 1);
    if (e == NULL)
        return false;
    e->ev = *ev;
    e->name = (char *)(e + 1);
    memcpy(e->name, ev->name, ev->name_len);
    e->name[ev->name_len] = '\0';
    e->detail = e->name + ev->name_len + 1;
    memcpy(e->detail, ev->detail, dlen + 1);
    e->ev.name = e->name;
    e->ev.detail = e->detail;
    e->next = NULL;
    pthread_mutex_lock(&wd->ev_mu);
    *wd->ev_tail = e;
    wd->ev_tail = &e->next;
    pthread_mutex_unlock(&wd->ev_mu);
    crd__pubsub_loop_notify(c);
    return true;
}

/* c->on_loop_dispatch: the events kept for the loop thread (events_on_loop), delivered at
 * the start of each crd_loop_dispatch. */
static void loop_events(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    pthread_mutex_lock(&wd->ev_mu);
    loop_event *e = wd->ev_head;
    wd->ev_head = NULL;
    wd->ev_tail = &wd->ev_head;
    pthread_mutex_unlock(&wd->ev_mu);
    while (e != NULL) {
        loop_event *next = e->next;
        c->opts.on_event(c->opts.event_user_data, &e->ev);
        free(e);
        e = next;
    }
}

void crd__emit_event(crd_client *c, crd_event_kind kind, const char *name, size_t name_len,
                     uint64_t owner, int64_t valid_until, crd_status st, const char *detail)
{
    int len = (int)(name_len > 80 ? 80 : name_len);
    if (kind == CRD_EVENT_LOCK_LOST)
        crd__log(c, CRD_LOG_ERROR, "lock \"%.*s\" of owner %llu lost: %s", len, name,
                 (unsigned long long)owner, detail != NULL && *detail ? detail : crd_strerror(st));
    else if (kind == CRD_EVENT_RENEWAL_FAILING)
        crd__log(c, CRD_LOG_WARN, "renewing lock \"%.*s\" of owner %llu fails: %s", len, name,
                 (unsigned long long)owner, detail != NULL && *detail ? detail : crd_strerror(st));
    else
        crd__log(c, CRD_LOG_INFO, "renewing lock \"%.*s\" of owner %llu works again", len,
                 name, (unsigned long long)owner);
    if (c->opts.on_event == NULL)
        return;
    int64_t left = valid_until - crd__now_ms();
    crd_event ev = {kind, name, name_len, owner,
                    kind == CRD_EVENT_LOCK_LOST || left < 0 ? 0 : left, st,
                    detail != NULL ? detail : ""};
    if (c->opts.events_on_loop && keep_for_loop(c, &ev))
        return;
    c->opts.on_event(c->opts.event_user_data, &ev);
}

/* One hold to renew, copied out of the table so no lock is held during I/O. */
typedef struct item {
    char *name;   /* in the list's arena (an offset into it while collecting) */
    size_t name_len;
    char *key2;   /* the kind's second key (read: P; fenced: the counter), in the arena */
    size_t key2_len;
    size_t name_off, key2_off;
    uint64_t owner;
    int kind;
    uint64_t id;  /* the record's id: a released and re-taken hold is a new record */
    int slot;     /* cluster: the name's slot */
    crd__node *node; /* cluster: the primary serving it when the round started */
    char field[80];
    size_t flen;
} item;

typedef struct item_list {
    int script;   /* the renewal script of every hold in the list */
    int keys_per; /* 1 (N) or 2 (N and a second key) */
    int kind;     /* a kind of the list (the one whose renew_one builds, when one) */
    bool one;     /* one hold per call (crd__kind_ops.renew_one: a group's values) */
    item *items;
    size_t n, cap;
    char *arena; /* every name and second key of the round, one allocation */
    size_t used, size;
} item_list;

/* Appends len bytes (plus a NUL) to the arena; returns the offset, or SIZE_MAX. */
static size_t arena_put(item_list *list, const char *a, size_t alen, const char *b, size_t blen,
                        const char *c, size_t clen)
{
    size_t need = alen + blen + clen + 1;
    if (list->used + need > list->size) {
        size_t size = list->size ? list->size * 2 : 4096;
        while (size < list->used + need)
            size *= 2;
        char *p = realloc(list->arena, size);
        if (p == NULL)
            return SIZE_MAX;
        list->arena = p;
        list->size = size;
    }
    size_t off = list->used;
    char *d = list->arena + off;
    memcpy(d, a, alen);
    memcpy(d + alen, b, blen);
    memcpy(d + alen + blen, c, clen);
    d[need - 1] = '\0';
    list->used += need;
    return off;
}

typedef struct collect {
    item_list lists[CRD__NKINDS]; /* one per renewal script in use (kinds.c) */
    int nlists;
    bool oom;
    /* A check round (prompt_loss_detection): only holds watched through these entries */
    crd__sub **only;
    int nonly;
    int64_t now;
    /* holds whose deadline passed: reported after the scan */
    crd__hold **expired;
    size_t nexp, capexp;
    const char *uuid;
} collect;

static void collect_one(crd__hold *h, void *arg)
{
    collect *col = arg;
    if (!h->watchdog || h->releasing || h->lost || h->count < 1)
        return;
    if (col->nonly > 0) {
        int k = 0;
        while (k < col->nonly && col->only[k] != h->watch_sub)
            k++;
        if (k == col->nonly)
            return;
    }
    if (col->now >= h->valid_until) {
        crd__hold **p = crd__grow(col->expired, &col->capexp, col->nexp + 1, sizeof *p, 16);
        if (p == NULL)
            return;
        col->expired = p;
        col->expired[col->nexp++] = h;
        return;
    }
    const crd__kind_ops *ops = &crd__kinds[h->kind];
    item_list *list = NULL;
    for (int i = 0; i < col->nlists && list == NULL; i++)
        if (col->lists[i].script == ops->renew_script)
            list = &col->lists[i];
    if (list == NULL) {
        list = &col->lists[col->nlists++];
        list->script = ops->renew_script;
        list->keys_per = ops->renew_key2_put != NULL ? 2 : 1;
        list->kind = h->kind;
        list->one = ops->renew_one != NULL;
    }
    item *p = crd__grow(list->items, &list->cap, list->n + 1, sizeof *p, 64);
    if (p == NULL) {
        col->oom = true;
        return;
    }
    list->items = p;
    item *it = &list->items[list->n];
    memset(it, 0, sizeof *it);
    it->name_off = arena_put(list, h->name, h->name_len, "", 0, "", 0);
    it->name_len = h->name_len;
    if (it->name_off == SIZE_MAX) {
        col->oom = true;
        return;
    }
    if (ops->renew_key2_put != NULL) {
        /* The kind's second key: the read lock's prefix P, the fenced lock's counter. */
        char kbuf[256];
        size_t klen = ops->renew_key2_len(h->name, h->name_len);
        char *kp = klen < sizeof kbuf ? kbuf : malloc(klen + 1);
        it->key2_off = SIZE_MAX;
        if (kp != NULL) {
            it->key2_len = ops->renew_key2_put(h->name, h->name_len, kp);
            it->key2_off = arena_put(list, kp, it->key2_len, "", 0, "", 0);
            if (kp != kbuf)
                free(kp);
        }
        if (it->key2_off == SIZE_MAX) {
            col->oom = true;
            return;
        }
    }
    it->owner = h->owner;
    it->kind = h->kind;
    it->id = h->id;
    it->flen = crd__field(col->uuid, h->owner, ops->write_field, it->field);
    list->n++;
}

/* A pending event, emitted after holds->mu is released. */
typedef struct pending_event {
    crd_event_kind kind;
    char *name;
    size_t name_len;
    uint64_t owner;
    int64_t valid_until;
    crd_status st;
} pending_event;

typedef struct events {
    pending_event *ev;
    size_t n, cap;
} events;

static void push_event(events *e, crd_event_kind kind, const crd__hold *h, crd_status st)
{
    pending_event *p = crd__grow(e->ev, &e->cap, e->n + 1, sizeof *p, 16);
    if (p == NULL)
        return;
    e->ev = p;
    pending_event *pe = &e->ev[e->n];
    size_t len = crd__route_len(h->kind, h->name, h->name_len); /* a group's name */
    pe->name = malloc(len + 1);
    if (pe->name == NULL)
        return;
    memcpy(pe->name, h->name, len);
    pe->name[len] = '\0';
    pe->kind = kind;
    pe->name_len = len;
    pe->owner = h->owner;
    pe->valid_until = h->valid_until;
    pe->st = st;
    e->n++;
}

static void flush_events(crd_client *c, events *e, const char *detail)
{
    for (size_t i = 0; i < e->n; i++) {
        pending_event *pe = &e->ev[i];
        crd__emit_event(c, pe->kind, pe->name, pe->name_len, pe->owner, pe->valid_until, pe->st,
                        detail);
        free(pe->name);
    }
    e->n = 0;
}

/* Applies the answers of one batch (cnt holds from list->items[from]) to the hold
 * records; r is NULL when the round failed. Returns false when any hold got no definite
 * answer. Caller holds holds->mu. */
static bool settle_batch(crd_client *c, item_list *list, size_t from, size_t cnt,
                         const redisReply *r, crd_status st, int64_t sent, events *ev,
                         char *detail, size_t detail_len)
{
    /* Replica sync: no replica acknowledged the round. The leases were extended on the
     * primary, but a failover now could lose that: the validity stays where it was and
     * the renewal counts as failed (retried sooner). */
    bool unsynced = st == CRD_NOT_SYNCED;
    crd__holds *hs = c->holds;
    bool ok = true;
    /* A list renewed one hold per call answers each with an integer. */
    bool good = r != NULL && (list->one ? cnt == 1 && r->type == REDIS_REPLY_INTEGER
                                        : r->type == REDIS_REPLY_ARRAY && r->elements == cnt);
    if (r != NULL && !good) {
        char text[200];
        crd__reply_render(r, text, sizeof text);
        snprintf(detail, detail_len, "renewal failed: %s", text);
    }
    for (size_t j = 0; j < cnt; j++) {
        item *it = &list->items[from + j];
        crd__hold *h = crd__holds_find(hs, it->name, it->name_len, it->owner, it->kind);
        if (h == NULL || h->id != it->id || h->releasing || h->lost)
            continue; /* released or replaced meanwhile: this answer is stale */
        const redisReply *e = good ? (list->one ? r : r->element[j]) : NULL;
        if (good && e->type == REDIS_REPLY_INTEGER && !(unsynced && e->integer == 1)) {
            if (e->integer == 1) {
                CRD__COUNT(c, renewals);
                if (sent + c->opts.watchdog_timeout_ms > h->valid_until)
                    h->valid_until = sent + c->opts.watchdog_timeout_ms;
                if (h->failing) {
                    h->failing = false;
                    push_event(ev, CRD_EVENT_RENEWAL_RECOVERED, h, CRD_OK);
                }
            } else {
                h->lost = true;
                CRD__COUNT(c, locks_lost);
                push_event(ev, CRD_EVENT_LOCK_LOST, h, CRD_LOCK_LOST);
            }
        } else {
            ok = false;
            CRD__COUNT(c, renewal_failures);
            if (!h->failing) {
                h->failing = true;
                push_event(ev, CRD_EVENT_RENEWAL_FAILING, h, st != CRD_OK ? st : CRD_SERVER);
            }
        }
    }
    return ok;
}

/* Builds the renewal of cnt holds from list->items[from]: KEYS N_i (and the kind's second
 * key), ARGV the timeout then each owner field. */
static void build_batch(crd_client *c, item_list *list, size_t from, size_t cnt, crd__cmd *cmd)
{
    if (list->one) {
        item *it = &list->items[from];
        crd__kinds[list->kind].renew_one(c, it->name, it->name_len, it->field, it->flen,
                                          c->opts.watchdog_timeout_ms, cmd);
        cmd->sync = true;
        return;
    }
    int keys_per = list->keys_per;
    crd__cmd_init(cmd, list->script, (int)(cnt * (size_t)(keys_per + 1)) + 1);
    for (size_t j = 0; j < cnt; j++) {
        item *it = &list->items[from + j];
        crd__cmd_key(cmd, it->name, it->name_len);
        if (keys_per == 2)
            crd__cmd_key(cmd, it->key2, it->key2_len);
    }
    crd__cmd_arg_i64(cmd, c->opts.watchdog_timeout_ms);
    cmd->sync = true; /* replica sync: the round ends with WAIT */
    for (size_t j = 0; j < cnt; j++)
        crd__cmd_arg(cmd, list->items[from + j].field, list->items[from + j].flen);
}

static int by_slot(const void *x, const void *y)
{
    const item *a = x, *b = y;
    return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* Puts items [from, n) in slot order (a server that checks slots: deploy.c). */
static void sort_by_slot(item_list *list, size_t from)
{
    for (size_t i = from; i < list->n; i++)
        list->items[i].slot = crd__key_slot(list->items[i].name, list->items[i].name_len);
    qsort(list->items + from, list->n - from, sizeof *list->items, by_slot);
}

/* The end of the script call that starts at item i: BATCH names (one for a list renewed one
 * hold per call), and with slot_checked only names of item i's slot (sorted by
 * sort_by_slot). */
static size_t batch_end(const item_list *list, size_t i, bool slot_checked)
{
    size_t j = i + 1;
    while (!list->one && j < list->n && j - i < BATCH &&
           (!slot_checked || list->items[j].slot == list->items[i].slot))
        j++;
    return j;
}

/* Whether any reply of an answered round is CROSSSLOT (deploy.c logs the first one). */
static bool crossslot(crd_client *c, redisReply **replies, int ncmd)
{
    bool any = false;
    for (int k = 0; k < ncmd; k++)
        any = crd__deploy_crossslot(c, replies[k]) || any;
    return any;
}

/* Renews one list (all holds renewed by one script), BATCH holds per script call and
 * PIPELINE calls per round trip. Names of any slot share a call, unless the server
 * checks slots (a proxy, a cluster node reached with redis://): then one slot per call,
 * and a round it refused with CROSSSLOT (nothing ran) is sent again so, at once, the
 * round's holds renewed in it. Returns false when any renewal got no definite answer. */
static bool renew_list(crd_client *c, item_list *list)
{
    events ev = {0};
    bool ok = true;
    char detail[256] = "";
    bool slot_checked = crd__deploy_slot_checked(c);
    if (slot_checked)
        sort_by_slot(list, 0);
    size_t base = 0;
    while (base < list->n) {
        crd__cmd cmds[PIPELINE];
        redisReply *replies[PIPELINE] = {NULL};
        size_t from[PIPELINE], cnt[PIPELINE];
        int ncmd = 0;
        size_t end = base;
        while (end < list->n && ncmd < PIPELINE) {
            size_t j = batch_end(list, end, slot_checked);
            from[ncmd] = end;
            cnt[ncmd] = j - end;
            build_batch(c, list, end, j - end, &cmds[ncmd]);
            ncmd++;
            end = j;
        }
        /* The primary's peer (sentinel mode: the engine follows the primary's moves). */
        int64_t sent = crd__now_ms();
        uint64_t gen = crd__topology_gen(c);
        crd_status st = crd__script_pipeline(c, c->pool, cmds, ncmd, replies, &sent);
        bool answered = st == CRD_OK || st == CRD_NOT_SYNCED;
        if (answered && crd__topology_gen(c) != gen) {
            /* Sentinel mode: a new primary was named while this round was in flight; the
             * old one may have run it. Renewing is idempotent: the round runs again,
             * where the primary is now. */
            for (int k = 0; k < ncmd; k++)
                freeReplyObject(replies[k]);
            sent = crd__now_ms();
            gen = crd__topology_gen(c);
            st = crd__script_pipeline(c, c->pool, cmds, ncmd, replies, &sent);
            answered = st == CRD_OK || st == CRD_NOT_SYNCED;
        }
        if (answered && !slot_checked && crossslot(c, replies, ncmd)) {
            /* The server checks slots: the calls it refused did not run, and the others
             * are idempotent. This round's remaining holds go again, one slot per call. */
            for (int k = 0; k < ncmd; k++) {
                freeReplyObject(replies[k]);
                crd__cmd_free(&cmds[k]);
            }
            CRD__COUNT(c, crossslot_rebatches);
            slot_checked = true;
            sort_by_slot(list, base);
            continue;
        }
        bool readonly = false;
        for (int k = 0; answered && k < ncmd; k++)
            readonly = readonly || crd__reply_classify(replies[k]) == CRD__REPLY_READONLY;
        if (st != CRD_OK) {
            snprintf(detail, sizeof detail, "%s", crd_client_errmsg(c));
            if (st != CRD_NOT_SYNCED)
                crd__topology_changed(c, gen); /* sentinel mode: the primary may have moved */
        }
        if (readonly) /* the old primary was demoted: find the new one; the next round goes there */
            crd__topology_changed(c, gen);
        pthread_mutex_lock(&c->holds->mu);
        for (int k = 0; k < ncmd; k++)
            ok = settle_batch(c, list, from[k], cnt[k], answered ? replies[k] : NULL, st, sent,
                              &ev, detail, sizeof detail) && ok;
        pthread_mutex_unlock(&c->holds->mu);
        for (int k = 0; k < ncmd; k++) {
            if (answered)
                freeReplyObject(replies[k]);
            crd__cmd_free(&cmds[k]);
        }
        flush_events(c, &ev, detail[0] ? detail : NULL);
        base = end;
    }
    free(ev.ev);
    return ok;
}

/* ---- cluster rounds ------------------------------------------------------------------- */

static int by_node_then_slot(const void *x, const void *y)
{
    const item *a = x, *b = y;
    if (a->node != b->node)
        return (uintptr_t)a->node < (uintptr_t)b->node ? -1 : 1;
    return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* A renewal the node did not run (MOVED, ASK, TRYAGAIN, READONLY, CLUSTERDOWN): sent
 * again through crd__call, which follows the redirect at once, so a moved slot costs no
 * failed renewal. Renewals are idempotent in effect, so a second run is harmless. */
static void follow(crd_client *c, crd__cmd *cmd, redisReply **reply)
{
    crd__reply_class cls = crd__reply_classify(*reply);
    if (cls == CRD__REPLY_OK || cls == CRD__REPLY_ERROR || cls == CRD__REPLY_NOSCRIPT)
        return;
    freeReplyObject(*reply);
    *reply = NULL;
    redisReply *r = NULL;
    if (crd__call(c, cmd, "renewal", &r, NULL) == CRD_OK)
        *reply = r;
}

/* Renews one list on a cluster: one script call never spans slots (a CROSSSLOT error
 * otherwise), so holds are grouped by the primary serving them and then by slot, each
 * call holding the names of one slot (up to BATCH), and each primary's calls pipelined
 * on a connection of its pool, PIPELINE per round trip. */
static bool renew_list_cluster(crd_client *c, item_list *list)
{
    crd__cluster_node_for(c, NULL, 0); /* a due refresh happens before the grouping */
    size_t per = list->one ? 1 : BATCH;
    for (size_t i = 0; i < list->n; i++) {
        item *it = &list->items[i];
        size_t rlen = crd__route_len(it->kind, it->name, it->name_len); /* a group's G */
        it->slot = crd__key_slot(it->name, rlen);
        it->node = crd__cluster_node_peek(c, it->name, rlen);
    }
    qsort(list->items, list->n, sizeof *list->items, by_node_then_slot);
    events ev = {0};
    bool ok = true;
    char detail[256] = "";
    size_t i = 0;
    while (i < list->n) {
        crd__node *node = list->items[i].node;
        crd__cmd cmds[PIPELINE];
        redisReply *replies[PIPELINE] = {NULL};
        size_t from[PIPELINE], cnt[PIPELINE];
        int ncmd = 0;
        while (i < list->n && ncmd < PIPELINE && list->items[i].node == node) {
            size_t j = i;
            while (j < list->n && j - i < per && list->items[j].node == node &&
                   list->items[j].slot == list->items[i].slot)
                j++;
            from[ncmd] = i;
            cnt[ncmd] = j - i;
            build_batch(c, list, i, j - i, &cmds[ncmd]);
            /* Renewals on a cluster go without WAIT: a renewal only extends a hold that
             * exists, and after a failover the new primary's replicas take a full sync
             * during which every WAIT would fail and shorten the leases for nothing. */
            cmds[ncmd].sync = false;
            ncmd++;
            i = j;
        }
        crd_status st = CRD_IO;
        int64_t sent = crd__now_ms();
        if (node == NULL)
            st = crd__fail(c, CRD_IO, "no cluster node serves these locks' slots");
        else if ((st = crd__script_pipeline(c, node->pool, cmds, ncmd, replies, &sent)) == CRD_IO)
            crd__cluster_stale(c); /* the node may have failed over */
        if (st == CRD_OK)
            for (int k = 0; k < ncmd; k++)
                follow(c, &cmds[k], &replies[k]);
        else
            snprintf(detail, sizeof detail, "%s", crd_client_errmsg(c));
        pthread_mutex_lock(&c->holds->mu);
        for (int k = 0; k < ncmd; k++)
            ok = settle_batch(c, list, from[k], cnt[k], st == CRD_OK ? replies[k] : NULL, st,
                              sent, &ev, detail, sizeof detail) && ok;
        pthread_mutex_unlock(&c->holds->mu);
        for (int k = 0; k < ncmd; k++) {
            if (replies[k] != NULL)
                freeReplyObject(replies[k]);
            crd__cmd_free(&cmds[k]);
        }
        flush_events(c, &ev, detail[0] ? detail : NULL);
    }
    free(ev.ev);
    return ok;
}

/* Turns the arena offsets into pointers once the arena no longer moves. */
static void fix_pointers(item_list *list)
{
    for (size_t i = 0; i < list->n; i++) {
        list->items[i].name = list->arena + list->items[i].name_off;
        list->items[i].key2 =
            list->items[i].key2_len ? list->arena + list->items[i].key2_off : NULL;
    }
}

static void free_list(item_list *list)
{
    free(list->items);
    free(list->arena);
}

/* Runs one renewal round: every hold, or (nonly > 0) only the holds watched through
 * those entries. Returns true when every renewal got a definite answer. */
static bool renew_round(crd_client *c, crd__watchdog *wd, crd__sub **only, int nonly)
{
    crd__holds *hs = c->holds;
    collect *col = calloc(1, sizeof *col);
    if (col == NULL)
        return false;
    atomic_store_explicit(&wd->round, col, memory_order_relaxed);
    col->uuid = c->uuid;
    col->only = only;
    col->nonly = nonly;
    events ev = {0};
    pthread_mutex_lock(&hs->mu);
    col->now = crd__now_ms();
    crd__holds_foreach(hs, collect_one, col);
    for (size_t i = 0; i < col->nexp; i++) {
        crd__hold *h = col->expired[i];
        h->lost = true;
        CRD__COUNT(c, locks_lost);
        push_event(&ev, CRD_EVENT_LOCK_LOST, h, CRD_LOCK_LOST);
    }
    pthread_mutex_unlock(&hs->mu);
    free(col->expired);
    flush_events(c, &ev, "the lease ran out while renewals failed");
    free(ev.ev);
    bool ok = true;
    for (int i = 0; i < col->nlists; i++) {
        fix_pointers(&col->lists[i]);
        if (c->cluster != NULL)
            ok = renew_list_cluster(c, &col->lists[i]) && ok;
        else
            ok = renew_list(c, &col->lists[i]) && ok;
        free_list(&col->lists[i]);
    }
    ok = ok && !col->oom;
    atomic_store_explicit(&wd->round, NULL, memory_order_relaxed);
    free(col);
    return ok;
}

static void *watchdog_main(void *arg)
{
    crd__thread_enter("crd-watchdog");
    crd_client *c = arg;
    crd__watchdog *wd = c->wd;
    int64_t period = c->opts.watchdog_timeout_ms / 3;
    int64_t retry = period / 4 > 0 ? period / 4 : 1;
    if (retry > 1000)
        retry = 1000;
    int64_t next = crd__now_ms() + period;
    /* The identity record's ticks (ident.c) share this thread: the first one at once. */
    int64_t ident_at = c->ident != NULL ? 0 : INT64_MAX;
    pthread_mutex_lock(&wd->mu);
    for (;;) {
        while (!wd->stop && !wd->urgent && !wd->now && !wd->ident_kick &&
               crd__now_ms() < (next < ident_at ? next : ident_at)) {
            struct timespec ts = crd__abstime(next < ident_at ? next : ident_at);
            pthread_cond_timedwait(&wd->cv, &wd->mu, &ts);
        }
        if (wd->stop)
            break;
        if (wd->ident_kick || crd__now_ms() >= ident_at) {
            /* Never waits for Redis: the write goes to the engine. */
            wd->ident_kick = false;
            pthread_mutex_unlock(&wd->mu);
            ident_at = crd__ident_tick(c);
            pthread_mutex_lock(&wd->mu);
            continue;
        }
        if (wd->urgent) {
            /* A message on a watched hold's channel (a force-unlock publishes one): renew
             * just those holds now; a gone hold is reported lost. The periodic schedule
             * is left as it was. */
            wd->urgent = false;
            pthread_mutex_unlock(&wd->mu);
            crd__sub *only[64];
            int n;
            while ((n = crd__sub_take_checks(c, only, 64)) > 0)
                renew_round(c, wd, only, n);
            crd__watch_flush(c);
            pthread_mutex_lock(&wd->mu);
            continue;
        }
        wd->now = false;
        pthread_mutex_unlock(&wd->mu);
        crd__watch_flush(c);
        /* The next round is timed from this round's start, so the time a large round
         * takes does not stretch the renewal period. */
        int64_t round_start = crd__now_ms();
        bool ok = renew_round(c, wd, NULL, 0);
        pthread_mutex_lock(&wd->mu);
        next = round_start + (ok ? period : retry);
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

static crd_status start_thread(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd->started)
        return CRD_OK;
    wd->stop = false;
    if (crd__thread_create(&wd->thread, watchdog_main, c) != 0)
        return crd__fail(c, CRD_NO_MEMORY, "cannot start the watchdog thread");
    wd->started = true;
    return CRD_OK;
}

void crd__watch_flush(crd_client *c)
{
    crd__sub **subs;
    pthread_mutex_lock(&c->holds->mu);
    size_t n = crd__holds_take_unwatch(c->holds, &subs);
    pthread_mutex_unlock(&c->holds->mu);
    for (size_t i = 0; i < n; i++)
        crd__sub_unwatch(c, subs[i]);
    free(subs);
}

static void renew_now(crd_client *c);
static void ident_kick(crd_client *c);

/* The subscriber thread's hook (c->on_watched_message). */
static void watched_message(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    pthread_mutex_lock(&wd->mu);
    wd->urgent = true;
    if (!wd->started && !wd->stop)
        start_thread(c);
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
}

crd_status crd__watchdog_start(crd_client *c)
{
    crd__watchdog *wd = calloc(1, sizeof *wd);
    if (wd == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the watchdog");
    if (crd__mutex_make(c, CRD__MU_WATCHDOG, &wd->mu, &wd->cv) != 0) {
        free(wd);
        return crd__fail(c, CRD_NO_MEMORY, "cannot make the watchdog's mutex");
    }
    pthread_mutex_init(&wd->ev_mu, NULL);
    wd->ev_tail = &wd->ev_head;
    c->wd = wd;
    c->on_watched_message = watched_message;
    c->on_primary_moved = renew_now;
    c->on_ident_news = ident_kick;
    if (c->opts.events_on_loop)
        c->on_loop_dispatch = loop_events;
    /* The thread starts with the first watchdog hold (crd__watchdog_kick), or now when it
     * writes the identity record. */
    if (c->ident == NULL)
        return CRD_OK;
    pthread_mutex_lock(&wd->mu);
    crd_status st = start_thread(c);
    pthread_mutex_unlock(&wd->mu);
    return st;
}

static void ident_kick(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    pthread_mutex_lock(&wd->mu);
    wd->ident_kick = true;
    if (!wd->started && !wd->stop)
        start_thread(c);
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
}

void crd__watchdog_kick(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    pthread_mutex_lock(&wd->mu);
    if (!wd->started && !wd->stop)
        start_thread(c);
    pthread_mutex_unlock(&wd->mu);
}

/* c->on_primary_moved. */
static void renew_now(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    pthread_mutex_lock(&wd->mu);
    if (wd->started) {
        wd->now = true;
        pthread_cond_signal(&wd->cv);
    }
    pthread_mutex_unlock(&wd->mu);
}

void crd__watchdog_stop(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    crd__thread_stop(c, &wd->mu, &wd->cv, &wd->stop, &wd->started, &wd->thread, -1);
    pthread_mutex_lock(&wd->mu);
    wd->started = false;
    pthread_mutex_unlock(&wd->mu);
}

void crd__watchdog_free(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    while (wd->ev_head != NULL) { /* never dispatched */
        loop_event *e = wd->ev_head;
        wd->ev_head = e->next;
        free(e);
    }
    pthread_mutex_destroy(&wd->ev_mu);
    crd__mutex_drop(c, CRD__MU_WATCHDOG, &wd->mu, &wd->cv);
    free(wd);
    c->wd = NULL;
}

/* Rounds a parent's watchdog thread was in when a child was forked, kept reachable in
 * that child and never freed there: the parent's thread may have been half-way through
 * freeing them. volatile: nothing reads the array (see conn.c's abandoned contexts).
 * Written only by the fork child handler, which runs alone. */
static void *volatile abandoned_rounds[64];
static size_t nabandoned_rounds;

/* In a forked child (wd->mu held): the thread does not exist here, and the parent's
 * renewal socket must never be written by the child. Close our copy of it. */
void crd__watchdog_after_fork_child(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    void *round = atomic_exchange_explicit(&wd->round, NULL, memory_order_relaxed);
    if (round != NULL && nabandoned_rounds < sizeof abandoned_rounds / sizeof *abandoned_rounds)
        abandoned_rounds[nabandoned_rounds++] = round;
    /* The parent's watchdog thread may have been inside hiredis on this context. */
    wd->started = false;
    wd->stop = false;
    wd->urgent = false;
    wd->ident_kick = false;
    crd__ident_after_fork_child(c);
    /* The parent's watchdog thread may be recorded as a waiter on this condition
     * variable; it does not exist here. Start over with a fresh one. */
    memset(&wd->cv, 0, sizeof wd->cv);
    crd__cond_init(&wd->cv);
}
