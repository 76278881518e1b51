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
 * Also here: what happens to holds at thread exit and at client shutdown.
 *
 * Threads: the watchdog thread; callers only kick it. Locks: wd->mu for the thread's
 * schedule; holds->mu for the hold records (never both at once, never during I/O).
 * Callbacks (on_event) run on the watchdog thread with no lock held.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH 100      /* names per renewal script call, as Redisson's default */
#define PIPELINE 64    /* script calls per round trip */

struct crd__watchdog {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started;
    bool stop;
    bool kicked;
    crd__conn conn;
};

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
    c->opts.on_event(c->opts.event_user_data, &ev);
}

/* One hold to renew, copied out of the table so no lock is held during I/O. */
typedef struct item {
    char *name;   /* in the list's arena (an offset into it while collecting) */
    size_t name_len;
    char *prefix; /* read holds: the RW key prefix P, in the arena too */
    size_t prefix_len;
    size_t name_off, prefix_off;
    uint64_t owner;
    int kind;
    uint64_t id;  /* the record's id: a released and re-taken hold is a new record */
    char field[80];
    size_t flen;
} item;

typedef struct item_list {
    item *items;
    size_t n, cap;
    char *arena; /* every name and prefix of the round, one allocation */
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
    item_list excl; /* RLock, fair and write holds: lua/lock_renew.lua */
    item_list read; /* read holds: lua/rw_read_renew.lua */
    bool oom;
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
    if (col->now >= h->valid_until) {
        if (col->nexp == col->capexp) {
            size_t cap = col->capexp ? col->capexp * 2 : 16;
            crd__hold **p = realloc(col->expired, cap * sizeof *p);
            if (p == NULL)
                return;
            col->expired = p;
            col->capexp = cap;
        }
        col->expired[col->nexp++] = h;
        return;
    }
    item_list *list = h->kind == CRD__READ ? &col->read : &col->excl;
    if (list->n == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 64;
        item *p = realloc(list->items, cap * sizeof *p);
        if (p == NULL) {
            col->oom = true;
            return;
        }
        list->items = p;
        list->cap = cap;
    }
    item *it = &list->items[list->n];
    memset(it, 0, sizeof *it);
    it->name_off = arena_put(list, h->name, h->name_len, "", 0, "", 0);
    it->name_len = h->name_len;
    if (it->name_off == SIZE_MAX) {
        col->oom = true;
        return;
    }
    if (h->kind == CRD__READ) {
        /* P = "{N}", or N itself when it has a '{' (names.c). */
        char pbuf[256];
        size_t plen = crd__rw_prefix_len(h->name, h->name_len);
        char *pp = plen < sizeof pbuf ? pbuf : malloc(plen + 1);
        it->prefix_off = SIZE_MAX;
        if (pp != NULL) {
            it->prefix_len = crd__rw_prefix_put(h->name, h->name_len, pp);
            it->prefix_off = arena_put(list, pp, it->prefix_len, "", 0, "", 0);
            if (pp != pbuf)
                free(pp);
        }
        if (it->prefix_off == SIZE_MAX) {
            col->oom = true;
            return;
        }
    }
    it->owner = h->owner;
    it->kind = h->kind;
    it->id = h->id;
    it->flen = crd__field(col->uuid, h->owner, h->kind == CRD__WRITE, it->field);
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
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        pending_event *p = realloc(e->ev, cap * sizeof *p);
        if (p == NULL)
            return;
        e->ev = p;
        e->cap = cap;
    }
    pending_event *pe = &e->ev[e->n];
    pe->name = malloc(h->name_len + 1);
    if (pe->name == NULL)
        return;
    memcpy(pe->name, h->name, h->name_len);
    pe->name[h->name_len] = '\0';
    pe->kind = kind;
    pe->name_len = h->name_len;
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

/* Renews one list (all exclusive holds, or all read holds), BATCH holds per script call
 * and PIPELINE calls per round trip. Returns false when any renewal got no definite
 * answer. */
static bool renew_list(crd_client *c, crd__watchdog *wd, item_list *list, bool read)
{
    crd__holds *hs = c->holds;
    events ev = {0};
    bool ok = true;
    int script = read ? CRD__SCRIPT_RW_READ_RENEW : CRD__SCRIPT_LOCK_RENEW;
    int keys_per = read ? 2 : 1;
    char timeout_s[24];
    size_t timeout_len =
        (size_t)snprintf(timeout_s, sizeof timeout_s, "%" PRId64, c->opts.watchdog_timeout_ms);
    char detail[256] = "";
    for (size_t base = 0; base < list->n; base += (size_t)BATCH * PIPELINE) {
        size_t end = base + (size_t)BATCH * PIPELINE;
        if (end > list->n)
            end = list->n;
        int ncmd = (int)((end - base + BATCH - 1) / BATCH);
        /* argv per script: EVALSHA sha numkeys keys... timeout fields... */
        int argcs[PIPELINE];
        const char **argvs[PIPELINE];
        size_t *lens[PIPELINE];
        char numkeys[PIPELINE][8];
        redisReply *replies[PIPELINE];
        bool alloc_ok = true;
        for (int k = 0; k < ncmd; k++) {
            size_t from = base + (size_t)k * BATCH;
            size_t cnt = end - from < BATCH ? end - from : BATCH;
            size_t nkeys = cnt * (size_t)keys_per;
            int argc = 3 + (int)nkeys + 1 + (int)cnt;
            argcs[k] = argc;
            argvs[k] = malloc(sizeof(char *) * (size_t)argc);
            lens[k] = malloc(sizeof(size_t) * (size_t)argc);
            if (argvs[k] == NULL || lens[k] == NULL) {
                alloc_ok = false;
                continue;
            }
            snprintf(numkeys[k], sizeof numkeys[k], "%zu", nkeys);
            argvs[k][0] = "EVALSHA";
            lens[k][0] = 7;
            argvs[k][1] = crd__scripts[script].sha1;
            lens[k][1] = 40;
            argvs[k][2] = numkeys[k];
            lens[k][2] = strlen(numkeys[k]);
            for (size_t j = 0; j < cnt; j++) {
                item *it = &list->items[from + j];
                argvs[k][3 + keys_per * j] = it->name;
                lens[k][3 + keys_per * j] = it->name_len;
                if (read) {
                    argvs[k][3 + keys_per * j + 1] = it->prefix;
                    lens[k][3 + keys_per * j + 1] = it->prefix_len;
                }
                argvs[k][3 + nkeys + 1 + j] = it->field;
                lens[k][3 + nkeys + 1 + j] = it->flen;
            }
            argvs[k][3 + nkeys] = timeout_s;
            lens[k][3 + nkeys] = timeout_len;
        }
        crd_status st = alloc_ok ? CRD_OK : CRD_NO_MEMORY;
        if (st == CRD_OK && wd->conn.ctx == NULL)
            st = crd__conn_open(c, &wd->conn);
        int64_t sent = crd__now_ms();
        if (st == CRD_OK) {
            CRD__COUNT(c, watchdog_round_trips);
            st = crd__conn_pipeline(c, &wd->conn, ncmd, argcs, (const char *const *const *)argvs,
                                    (const size_t *const *)lens, replies);
        }
        /* NOSCRIPT: the cache was flushed. Load the script once and resend the round:
         * renewal is idempotent in effect. */
        if (st == CRD_OK) {
            bool noscript = false;
            for (int k = 0; k < ncmd; k++)
                if (replies[k]->type == REDIS_REPLY_ERROR &&
                    strncmp(replies[k]->str, "NOSCRIPT", 8) == 0)
                    noscript = true;
            if (noscript) {
                const crd__script_src *src = &crd__scripts[script];
                const char *la[3] = {"SCRIPT", "LOAD", src->text};
                size_t ll[3] = {6, 4, src->len};
                redisReply *lr = NULL;
                for (int k = 0; k < ncmd; k++)
                    freeReplyObject(replies[k]);
                st = crd__conn_command(c, &wd->conn, 3, la, ll, &lr);
                if (lr != NULL)
                    freeReplyObject(lr);
                sent = crd__now_ms();
                if (st == CRD_OK) {
                    CRD__COUNT(c, watchdog_round_trips);
                    st = crd__conn_pipeline(c, &wd->conn, ncmd, argcs,
                                            (const char *const *const *)argvs,
                                            (const size_t *const *)lens, replies);
                }
            }
        }
        if (st != CRD_OK) {
            snprintf(detail, sizeof detail, "%s", crd_client_errmsg(c));
            if (wd->conn.broken)
                crd__conn_close(&wd->conn);
        }
        pthread_mutex_lock(&hs->mu);
        for (int k = 0; k < ncmd; k++) {
            size_t from = base + (size_t)k * BATCH;
            size_t cnt = end - from < BATCH ? end - from : BATCH;
            redisReply *r = st == CRD_OK ? replies[k] : NULL;
            bool good = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == cnt;
            if (r != NULL && !good) {
                char text[200];
                crd__reply_render(r, text, sizeof text);
                snprintf(detail, sizeof detail, "renewal failed: %s", text);
            }
            for (size_t j = 0; j < cnt; j++) {
                item *it = &list->items[from + j];
                crd__hold *h = crd__holds_find(hs, it->name, it->name_len, it->owner, it->kind);
                if (h == NULL || h->id != it->id || h->releasing || h->lost)
                    continue; /* released or replaced meanwhile: this answer is stale */
                if (good && r->element[j]->type == REDIS_REPLY_INTEGER) {
                    if (r->element[j]->integer == 1) {
                        CRD__COUNT(c, renewals);
                        if (sent + c->opts.watchdog_timeout_ms > h->valid_until)
                            h->valid_until = sent + c->opts.watchdog_timeout_ms;
                        if (h->failing) {
                            h->failing = false;
                            push_event(&ev, CRD_EVENT_RENEWAL_RECOVERED, h, CRD_OK);
                        }
                    } else {
                        h->lost = true;
                        CRD__COUNT(c, locks_lost);
                        push_event(&ev, CRD_EVENT_LOCK_LOST, h, CRD_LOCK_LOST);
                    }
                } else {
                    ok = false;
                    CRD__COUNT(c, renewal_failures);
                    if (!h->failing) {
                        h->failing = true;
                        push_event(&ev, CRD_EVENT_RENEWAL_FAILING, h,
                                   st != CRD_OK ? st : CRD_SERVER);
                    }
                }
            }
        }
        pthread_mutex_unlock(&hs->mu);
        if (st == CRD_OK)
            for (int k = 0; k < ncmd; k++)
                freeReplyObject(replies[k]);
        for (int k = 0; k < ncmd; k++) {
            free(argvs[k]);
            free(lens[k]);
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
        list->items[i].prefix =
            list->items[i].prefix_len ? list->arena + list->items[i].prefix_off : NULL;
    }
}

static void free_list(item_list *list)
{
    free(list->items);
    free(list->arena);
}

/* Runs one renewal round. Returns true when every renewal got a definite answer. */
static bool renew_round(crd_client *c, crd__watchdog *wd)
{
    crd__holds *hs = c->holds;
    collect col = {0};
    col.uuid = c->uuid;
    events ev = {0};
    pthread_mutex_lock(&hs->mu);
    col.now = crd__now_ms();
    crd__holds_foreach(hs, collect_one, &col);
    for (size_t i = 0; i < col.nexp; i++) {
        crd__hold *h = col.expired[i];
        h->lost = true;
        CRD__COUNT(c, locks_lost);
        push_event(&ev, CRD_EVENT_LOCK_LOST, h, CRD_LOCK_LOST);
    }
    pthread_mutex_unlock(&hs->mu);
    free(col.expired);
    flush_events(c, &ev, "the lease ran out while renewals failed");
    free(ev.ev);
    fix_pointers(&col.excl);
    fix_pointers(&col.read);
    bool ok = renew_list(c, wd, &col.excl, false);
    ok = renew_list(c, wd, &col.read, true) && ok;
    free_list(&col.excl);
    free_list(&col.read);
    return ok && !col.oom;
}

static void *watchdog_main(void *arg)
{
    crd_client *c = arg;
    crd__watchdog *wd = c->wd;
    int64_t period = c->opts.watchdog_timeout_ms / 3;
    int64_t retry = period / 4 > 0 ? period / 4 : 1;
    if (retry > 1000)
        retry = 1000;
    int64_t next = crd__now_ms() + period;
    pthread_mutex_lock(&wd->mu);
    for (;;) {
        while (!wd->stop && crd__now_ms() < next) {
            struct timespec ts = crd__abstime(next);
            pthread_cond_timedwait(&wd->cv, &wd->mu, &ts);
        }
        if (wd->stop)
            break;
        pthread_mutex_unlock(&wd->mu);
        /* The next round is timed from this round's start, so the time a large round
         * takes does not stretch the renewal period. */
        int64_t round_start = crd__now_ms();
        bool ok = renew_round(c, wd);
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
    if (pthread_create(&wd->thread, NULL, watchdog_main, c) != 0)
        return crd__fail(c, CRD_NO_MEMORY, "cannot start the watchdog thread");
    wd->started = true;
    return CRD_OK;
}

crd_status crd__watchdog_start(crd_client *c)
{
    crd__watchdog *wd = calloc(1, sizeof *wd);
    if (wd == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the watchdog");
    pthread_mutex_init(&wd->mu, NULL);
    crd__cond_init(&wd->cv);
    c->wd = wd;
    /* The thread starts with the first watchdog hold (crd__watchdog_kick). */
    return CRD_OK;
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

void crd__watchdog_stop(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    pthread_mutex_lock(&wd->mu);
    wd->stop = true;
    pthread_cond_broadcast(&wd->cv);
    bool started = wd->started;
    pthread_mutex_unlock(&wd->mu);
    if (started && c->pid == getpid())
        pthread_join(wd->thread, NULL);
    pthread_mutex_lock(&wd->mu);
    wd->started = false;
    pthread_mutex_unlock(&wd->mu);
    crd__conn_close(&wd->conn);
}

void crd__watchdog_free(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    if (wd == NULL)
        return;
    pthread_cond_destroy(&wd->cv);
    pthread_mutex_destroy(&wd->mu);
    free(wd);
    c->wd = NULL;
}

void crd__watchdog_lock_for_fork(crd_client *c, bool lock);
void crd__watchdog_after_fork_child(crd_client *c);

void crd__watchdog_lock_for_fork(crd_client *c, bool lock)
{
    if (lock)
        pthread_mutex_lock(&c->wd->mu);
    else
        pthread_mutex_unlock(&c->wd->mu);
}

/* In a forked child (wd->mu held): the thread does not exist here, and the parent's
 * renewal socket must never be written by the child. Close our copy of it. */
void crd__watchdog_after_fork_child(crd_client *c)
{
    crd__watchdog *wd = c->wd;
    /* The parent's watchdog thread may have been inside hiredis on this context. */
    crd__abandon_ctx(wd->conn.ctx);
    wd->conn.ctx = NULL;
    wd->conn.broken = false;
    wd->started = false;
    wd->stop = false;
    /* The parent's watchdog thread may be recorded as a waiter on this condition
     * variable; it does not exist here. Start over with a fresh one. */
    memset(&wd->cv, 0, sizeof wd->cv);
    crd__cond_init(&wd->cv);
}

/* ---- thread exit and shutdown ------------------------------------------------------------ */

typedef struct owner_scan {
    uint64_t owner; /* 0 = every owner */
    bool release;
    crd__holds *hs;
    struct {
        char *name;
        size_t len;
        uint64_t owner;
        int kind;
        int64_t count;
    } *list;
    size_t n, cap;
} owner_scan;

static void scan_owner(crd__hold *h, void *arg)
{
    owner_scan *s = arg;
    if (s->owner != 0 && h->owner != s->owner)
        return;
    if (s->release && !h->lost && s->n < s->cap) {
        char *copy = malloc(h->name_len + 1);
        if (copy != NULL) {
            memcpy(copy, h->name, h->name_len);
            s->list[s->n].name = copy;
            s->list[s->n].len = h->name_len;
            s->list[s->n].owner = h->owner;
            s->list[s->n].kind = h->kind;
            s->list[s->n].count = h->count;
            s->n++;
            return; /* released below; the release removes the record */
        }
    }
    /* Stop renewal: the lock expires within its lease. */
    crd__holds_remove(s->hs, h);
}

static void release_owner_holds(crd_client *c, uint64_t owner, bool release)
{
    crd__holds *hs = c->holds;
    owner_scan s = {owner, release, hs, NULL, 0, 0};
    pthread_mutex_lock(&hs->mu);
    if (release && hs->count > 0) {
        s.cap = hs->count;
        s.list = calloc(s.cap, sizeof *s.list);
        if (s.list == NULL)
            s.cap = 0;
    }
    crd__holds_foreach(hs, scan_owner, &s);
    pthread_mutex_unlock(&hs->mu);
    for (size_t i = 0; i < s.n; i++) {
        for (int64_t k = 0; k < s.list[i].count; k++)
            if (crd__release_hold_by_name(c, s.list[i].name, s.list[i].len, s.list[i].owner,
                                          s.list[i].kind) != CRD_OK)
                break;
        /* Whatever the outcome, stop tracking it. */
        pthread_mutex_lock(&hs->mu);
        crd__hold *h = crd__holds_find(hs, s.list[i].name, s.list[i].len, s.list[i].owner,
                                       s.list[i].kind);
        if (h != NULL)
            crd__holds_remove(hs, h);
        pthread_mutex_unlock(&hs->mu);
        free(s.list[i].name);
    }
    free(s.list);
}

void crd__thread_exit_release(crd_client *c, uint64_t owner);
void crd__release_all_on_close(crd_client *c);

/* Called from the thread-exit hook for every live client (registry_mu held). */
void crd__thread_exit_release(crd_client *c, uint64_t owner)
{
    if (c->failed || atomic_load(&c->closed) || c->pid != getpid())
        return;
    release_owner_holds(c, owner, c->opts.release_on_thread_exit);
}

void crd__release_all_on_close(crd_client *c) { release_owner_holds(c, 0, true); }
