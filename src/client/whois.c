/*
 * whois.c -- who is behind a state (crd_state_read, crd_scan_*, crd_watch_*): the identity
 * records ident.c writes, read in one script call for every owner a state names
 * (lua/ident_read.lua: every record is in the slot of "{credisson}") and kept in a cache
 * (crd__idcache) for the life of a read, a scan or a watch (one found missing or partial is
 * read again when asked for MISSING_REREAD_MS later); the directory of every
 * record's waits and watches (CRD_STATE_WAITERS); CLIENT LIST's named connections for a
 * holder without a record (CRD_STATE_CLIENTS); and the join of all that into a state's
 * holders, queue and waiters (crd__state_join). crd_identity_describe says it in words.
 *
 * Threads: the caller's; a cache belongs to one thread at a time. Locks: none of its own
 * (crd__call takes the engine's).
 */
#include "inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORD_FIELDS 4096    /* fields of one record read at most */
#define RECORDS_PER_CALL 128  /* records one ident_read.lua call reads */
#define DIRECTORY_MAX 10000   /* records the directory of waits reads at most */
/* A record found missing or without its process (pid) is read again when asked for this
 * long after: a client that started a moment before writes its record within
 * milliseconds, one whose record expired (its node unreachable past the TTL) rewrites it
 * whole within a third of its watchdog timeout, and a watch (whose cache lives as long as
 * it does) should not call its holder unknown for good. */
#define MISSING_REREAD_MS 250

/* ---- identity records: read, kept, joined ------------------------------------------------- */

typedef struct record {
    char uuid[64];
    redisReply *fields; /* flat HGETALL array; an empty one when there is none */
    int64_t read_ms;    /* when it was read (monotonic) */
} record;

/* A wait or watch entry of some record, for the waiters of a name (the directory). */
typedef struct wait_ref {
    const char *name;
    size_t len;
    bool watch; /* x:<name> */
    uint64_t owner;
    int64_t since;
    size_t rec; /* its record's index in the cache (the array may move as it grows) */
} wait_ref;

struct crd__idcache {
    record *v;
    size_t n, cap;
    bool denied;   /* NOPERM (or another error): no identity */
    bool dir_read; /* every record of the registry is in v */
    wait_ref *waits;
    size_t nwaits;
    char *clients; /* CLIENT LIST, once */
    bool clients_read;
};

void crd__idcache_free(crd__idcache *ic)
{
    if (ic == NULL)
        return;
    for (size_t i = 0; i < ic->n; i++)
        freeReplyObject(ic->v[i].fields);
    free(ic->v);
    free(ic->waits);
    free(ic->clients);
    free(ic);
}

static record *idcache_find(crd__idcache *ic, const char *uuid, size_t len)
{
    for (size_t i = 0; i < ic->n; i++)
        if (strlen(ic->v[i].uuid) == len && memcmp(ic->v[i].uuid, uuid, len) == 0)
            return &ic->v[i];
    return NULL;
}

/* A field's value of a record, or NULL. */
static const redisReply *rec_get(const record *r, const char *field, size_t flen)
{
    const redisReply *a = r != NULL ? r->fields : NULL;
    for (size_t i = 0; a != NULL && i + 1 < a->elements; i += 2)
        if (a->element[i]->len == flen && memcmp(a->element[i]->str, field, flen) == 0)
            return a->element[i + 1];
    return NULL;
}

static const char *rec_str(const record *r, const char *field, size_t *len)
{
    const redisReply *v = rec_get(r, field, strlen(field));
    *len = v != NULL && crd__reply_is_text(v) ? v->len : 0;
    return v != NULL && crd__reply_is_text(v) ? v->str : "";
}

/* cmd's call (cmd freed): *r the reply, or NULL with CRD_OK when the server refused it (an
 * error reply: ic->denied, the records cannot be read with this ACL). */
static crd_status ic_call(crd_client *c, crd__idcache *ic, crd__cmd *cmd, const char *what,
                          redisReply **r)
{
    *r = NULL;
    crd_status st = crd__call(c, cmd, what, r, NULL);
    crd__cmd_free(cmd);
    if (st == CRD_SERVER) {
        ic->denied = true;
        crd__ok(c);
        return CRD_OK;
    }
    return st;
}

/* A record with no field: none was there when it was read. */
static bool rec_missing(const record *r)
{
    return r->fields == NULL || r->fields->elements == 0;
}

static const redisReply *rec_get(const record *r, const char *field, size_t flen);

/* A record to read again when asked for MISSING_REREAD_MS after it was: missing, or without
 * its process's fields (only holds and waits: written as changes into an expired record).
 * Once the directory is read, only a missing one (the waits index points into the others'
 * replies). */
static bool rec_stale(const crd__idcache *ic, const record *r)
{
    if (crd__now_ms() - r->read_ms < MISSING_REREAD_MS)
        return false;
    return rec_missing(r) || (!ic->dir_read && rec_get(r, "pid", 3) == NULL);
}

/* Reads the records of the uuids listed (n of them, not yet cached or cached stale: those
 * are replaced, see rec_stale) in calls of at most RECORDS_PER_CALL records. Returns CRD_OK,
 * or the call's failure (ic->denied set for an error reply: the records cannot be read with
 * this ACL). */
static crd_status read_records(crd_client *c, crd__idcache *ic, char (*uuids)[64], size_t n)
{
    for (size_t base = 0; base < n; base += RECORDS_PER_CALL) {
        size_t m = n - base < RECORDS_PER_CALL ? n - base : RECORDS_PER_CALL;
        crd__cmd cmd;
        crd__cmd_init(&cmd, CRD__SCRIPT_IDENT_READ, (int)m + 1);
        char keys[RECORDS_PER_CALL][96];
        for (size_t i = 0; i < m; i++) {
            int kl = snprintf(keys[i], sizeof keys[i], "%s%s", CRD__IDENT_KEY_PREFIX,
                              uuids[base + i]);
            crd__cmd_key(&cmd, keys[i], (size_t)kl);
        }
        crd__cmd_arg_i64(&cmd, RECORD_FIELDS);
        redisReply *r;
        crd_status st = ic_call(c, ic, &cmd, "reading identity records", &r);
        if (st != CRD_OK || r == NULL)
            return st;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != m) {
            freeReplyObject(r);
            ic->denied = true;
            return CRD_OK;
        }
        record *p = crd__grow(ic->v, &ic->cap, ic->n + m, sizeof *p, 16);
        if (p == NULL) {
            freeReplyObject(r);
            return crd__fail(c, CRD_NO_MEMORY, "cannot keep identity records");
        }
        ic->v = p;
        int64_t now = crd__now_ms();
        for (size_t i = 0; i < m; i++) {
            const char *u = uuids[base + i];
            record *rec = idcache_find(ic, u, strlen(u));
            if (rec != NULL) {
                freeReplyObject(rec->fields);
            } else {
                rec = &ic->v[ic->n++];
                snprintf(rec->uuid, sizeof rec->uuid, "%s", u);
            }
            rec->fields = r->element[i];
            rec->read_ms = now;
            r->element[i] = NULL; /* kept: the array is freed without it */
        }
        /* hiredis frees a NULL element as nothing */
        freeReplyObject(r);
    }
    return CRD_OK;
}

/* Makes sure the record of each uuid of owners (owner fields) is cached. */
static crd_status want_records(crd_client *c, crd__idcache *ic, const char *const *owners,
                               const size_t *lens, size_t n)
{
    if (ic->denied)
        return CRD_OK;
    char(*need)[64] = calloc(n + 1, sizeof *need);
    if (need == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot read identity records");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t ul;
        uint64_t t;
        bool w;
        if (!crd__owner_field_parse(owners[i], lens[i], &ul, &t, &w) || ul == 0 || ul >= 64)
            continue;
        const record *had = idcache_find(ic, owners[i], ul);
        bool dup = had != NULL && !rec_stale(ic, had);
        for (size_t j = 0; j < k && !dup; j++)
            dup = strlen(need[j]) == ul && memcmp(need[j], owners[i], ul) == 0;
        if (dup)
            continue;
        memcpy(need[k], owners[i], ul);
        need[k][ul] = '\0';
        k++;
    }
    crd_status st = k > 0 ? read_records(c, ic, need, k) : CRD_OK;
    free(need);
    return st;
}

static int by_wait_name(const void *x, const void *y)
{
    const wait_ref *a = x, *b = y;
    int d = crd__bytes_cmp(a->name, a->len, b->name, b->len);
    if (d != 0)
        return d;
    return (a->since > b->since) - (a->since < b->since);
}

/* Every client's record (the registry's members), and an index of their waits and
 * watches by name. */
static crd_status read_directory(crd_client *c, crd__idcache *ic)
{
    if (ic->dir_read || ic->denied)
        return CRD_OK;
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__PLAIN, 4);
    crd__cmd_arg_str(&cmd, "ZRANGE");
    crd__cmd_arg_str(&cmd, CRD__IDENT_REGISTRY);
    crd__cmd_arg_str(&cmd, "0");
    crd__cmd_arg_i64(&cmd, DIRECTORY_MAX - 1);
    redisReply *r;
    crd_status st = ic_call(c, ic, &cmd, "reading the identity registry", &r);
    if (st != CRD_OK || r == NULL)
        return st;
    ic->dir_read = true;
    char(*need)[64] = calloc(r->elements + 1, sizeof *need);
    if (need == NULL) {
        freeReplyObject(r);
        return crd__fail(c, CRD_NO_MEMORY, "cannot read identity records");
    }
    size_t k = 0;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *m = r->element[i];
        const record *had = crd__reply_is_text(m) ? idcache_find(ic, m->str, m->len) : NULL;
        if (!crd__reply_is_text(m) || m->len == 0 || m->len >= 64 ||
            (had != NULL && !rec_missing(had)))
            continue;
        memcpy(need[k], m->str, m->len);
        need[k][m->len] = '\0';
        k++;
    }
    freeReplyObject(r);
    st = k > 0 ? read_records(c, ic, need, k) : CRD_OK;
    free(need);
    if (st != CRD_OK)
        return st;
    size_t total = 0;
    for (size_t i = 0; i < ic->n; i++)
        total += ic->v[i].fields != NULL ? ic->v[i].fields->elements / 2 : 0;
    free(ic->waits);
    ic->nwaits = 0;
    ic->waits = calloc(total + 1, sizeof *ic->waits);
    if (ic->waits == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot index identity records");
    for (size_t i = 0; i < ic->n; i++) {
        const redisReply *a = ic->v[i].fields;
        for (size_t j = 0; a != NULL && j + 1 < a->elements; j += 2) {
            const redisReply *f = a->element[j];
            if (!crd__reply_is_text(f) || !crd__reply_is_text(a->element[j + 1]))
                continue;
            wait_ref w = {.rec = i, .since = crd__state_int(a->element[j + 1], -1)};
            if (f->len > 2 && memcmp(f->str, CRD__IDENT_WATCH, 2) == 0) {
                w.watch = true;
                w.name = f->str + 2;
                w.len = f->len - 2;
            } else if (f->len > 2 && memcmp(f->str, CRD__IDENT_WAIT, 2) == 0) {
                const char *p = f->str + 2, *end = f->str + f->len;
                while (p < end && *p >= '0' && *p <= '9')
                    w.owner = w.owner * 10 + (uint64_t)(*p++ - '0');
                if (p == end || *p != ':' || p == f->str + 2)
                    continue;
                w.name = p + 1;
                w.len = (size_t)(end - p - 1);
            } else {
                continue;
            }
            ic->waits[ic->nwaits++] = w;
        }
    }
    qsort(ic->waits, ic->nwaits, sizeof *ic->waits, by_wait_name);
    return CRD_OK;
}

/* CLIENT LIST of the node that answers, once; NULL when not allowed. */
static const char *client_list(crd_client *c, crd__idcache *ic)
{
    if (ic->clients_read)
        return ic->clients;
    ic->clients_read = true;
    redisReply *r = NULL;
    crd_status st = crd__call_words(c, "CLIENT LIST", &r, 2, "CLIENT", "LIST");
    if (st == CRD_OK && crd__reply_is_text(r))
        ic->clients = strndup(r->str, r->len);
    else
        crd__ok(c);
    if (r != NULL)
        freeReplyObject(r);
    return ic->clients;
}

/* "name@addr, ..." of the named connections of CLIENT LIST (at most 10). */
static const char *named_connections(state_box *b, const char *list)
{
    if (list == NULL)
        return "";
    char out[2048];
    size_t o = 0;
    int n = 0;
    out[0] = '\0';
    for (const char *line = list; *line && n < 10;) {
        const char *eol = strchr(line, '\n');
        size_t ll = eol != NULL ? (size_t)(eol - line) : strlen(line);
        const char *name = NULL, *addr = NULL;
        size_t nl = 0, al = 0;
        for (const char *p = line; p < line + ll;) {
            const char *sp = memchr(p, ' ', (size_t)(line + ll - p));
            size_t wl = sp != NULL ? (size_t)(sp - p) : (size_t)(line + ll - p);
            if (wl > 5 && memcmp(p, "name=", 5) == 0) {
                name = p + 5;
                nl = wl - 5;
            } else if (wl > 5 && memcmp(p, "addr=", 5) == 0) {
                addr = p + 5;
                al = wl - 5;
            }
            p += wl + 1;
        }
        if (name != NULL && nl > 0 && addr != NULL && o + nl + al + 4 < sizeof out) {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s%.*s@%.*s", n ? ", " : "", (int)nl,
                                  name, (int)al, addr);
            n++;
        }
        line += ll + (eol != NULL);
    }
    return crd__state_str(b, out, o);
}

/* Fills who for owner field f (the client part and its thread) from its record, strings
 * copied into b (or pointing into the cache when b is NULL). */
static void fill_who(state_box *b, crd__idcache *ic, const char *f, size_t len, crd_identity *who,
                     const record **rec_out)
{
    size_t ul = 0;
    uint64_t t = 0;
    bool w;
    memset(who, 0, sizeof *who);
    who->client_id = who->host = who->program = who->label = who->version = who->connections =
        "";
    *rec_out = NULL;
    if (!crd__owner_field_parse(f, len, &ul, &t, &w))
        return;
    who->client_id = b != NULL ? crd__state_str(b, f, ul) : "";
    who->thread = t;
    const record *rec = ic != NULL ? idcache_find(ic, f, ul) : NULL;
    if (rec == NULL || rec_missing(rec))
        return;
    *rec_out = rec;
    who->known = true;
    size_t l;
    const char *s;
#define COPY(field, dst)                                                                     \
    s = rec_str(rec, field, &l);                                                             \
    who->dst = b != NULL ? crd__state_str(b, s, l) : s;
    COPY("host", host)
    COPY("program", program)
    COPY("label", label)
    COPY("version", version)
#undef COPY
    who->pid = crd__state_int(rec_get(rec, "pid", 3), 0);
    who->started_ms = crd__state_int(rec_get(rec, "started_ms", 10), 0);
}

/* The value of the record's entry tag<thread>:<name>: since (epoch ms) and the watch
 * mark; false when there is none. */
static bool rec_entry(const record *rec, const char *tag, uint64_t thread, const char *name,
                      size_t len, int64_t *since, bool *watched)
{
    if (rec == NULL)
        return false;
    size_t tl = strlen(tag);
    char *f = malloc(tl + 24 + len);
    if (f == NULL)
        return false;
    memcpy(f, tag, tl);
    char *p = crd__put_u64(f + tl, thread);
    *p++ = ':';
    memcpy(p, name, len);
    const redisReply *v = rec_get(rec, f, (size_t)(p - f) + len);
    free(f);
    if (v == NULL || !crd__reply_is_text(v))
        return false;
    *since = crd__state_int(v, -1);
    if (*since < 0) {
        /* "<ms> w" */
        char num[24];
        size_t k = 0;
        while (k < v->len && k < sizeof num - 1 && v->str[k] != ' ') {
            num[k] = v->str[k];
            k++;
        }
        num[k] = '\0';
        if (!crd__count_parse(num, k, since))
            return false;
    }
    *watched = v->len > 2 && v->str[v->len - 1] == 'w' && v->str[v->len - 2] == ' ';
    return true;
}

static int by_since(const void *x, const void *y)
{
    const crd_waiter *a = x, *b = y;
    return (a->since_ms > b->since_ms) - (a->since_ms < b->since_ms);
}

/* Joins the identity records: holders' and queued waiters' identities and since-times,
 * the watches and the declared waiters of the name. *watches: crd_watch sessions of the
 * name (-1 when the directory was not read). */
crd_status crd__state_join(crd_client *c, state_box *b, crd__idcache *ic, unsigned flags,
                           const raw *rw, int64_t *watches)
{
    crd_state *s = &b->pub;
    *watches = -1;
    size_t n = s->nholders + s->nqueue_listed;
    const char **owners = calloc(n + 1, sizeof *owners);
    size_t *lens = calloc(n + 1, sizeof *lens);
    if (owners == NULL || lens == NULL) {
        free(owners);
        free(lens);
        return crd__fail(c, CRD_NO_MEMORY, "cannot join identity records");
    }
    for (size_t i = 0; i < s->nholders; i++) {
        owners[i] = s->holders[i].owner;
        lens[i] = strlen(owners[i]);
    }
    for (size_t i = 0; i < s->nqueue_listed; i++) {
        owners[s->nholders + i] = s->queue[i].owner;
        lens[s->nholders + i] = strlen(s->queue[i].owner);
    }
    crd_status st = want_records(c, ic, owners, lens, n);
    free(owners);
    free(lens);
    if (st != CRD_OK)
        return st;
    s->identity_read = !ic->denied;
    const char *clients = NULL;
    for (size_t i = 0; i < s->nholders; i++) {
        crd_holder *h = &s->holders[i];
        const record *rec;
        fill_who(b, ic, h->owner, strlen(h->owner), &h->who, &rec);
        if (rec_entry(rec, h->writer ? CRD__IDENT_WRITE_HOLD : CRD__IDENT_HOLD, h->who.thread,
                      s->name, s->name_len, &h->since_ms, &h->watching)) {
            h->held_ms = s->read_at_ms - h->since_ms;
        } else if ((flags & CRD_STATE_CLIENTS) && !h->who.known) {
            if (clients == NULL)
                clients = client_list(c, ic);
            h->who.connections = named_connections(b, clients);
        }
    }
    for (size_t i = 0; i < s->nqueue_listed; i++) {
        crd_waiter *w = &s->queue[i];
        const record *rec;
        bool unused;
        fill_who(b, ic, w->owner, strlen(w->owner), &w->who, &rec);
        if (rec_entry(rec, CRD__IDENT_WAIT, w->who.thread, s->name, s->name_len, &w->since_ms,
                      &unused))
            w->waited_ms = s->read_at_ms - w->since_ms;
    }
    /* The subscribers that are no waiters: holders keeping the channel (one per client). */
    int ch = crd__state_channel(s->kind);
    int64_t watching = 0;
    for (size_t i = 0; i < s->nholders; i++) {
        if (!s->holders[i].watching)
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = s->holders[k].watching &&
                   strcmp(s->holders[k].who.client_id, s->holders[i].who.client_id) == 0;
        watching += !seen;
    }
    int64_t others = (ch >= 0 ? rw->subs[ch] : 0) - watching;
    bool want_dir = (flags & CRD_STATE_WAITERS) &&
                    (others > 0 || (rw->number && rw->subs[3] > 0));
    if (!want_dir || ic->denied)
        return CRD_OK;
    if ((st = read_directory(c, ic)) != CRD_OK || ic->denied)
        return st;
    /* The directory's entries of this name: watches, and the waits of kinds with no queue. */
    wait_ref key = {.name = s->name, .len = s->name_len, .since = INT64_MIN};
    size_t lo = 0, hi = ic->nwaits;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (by_wait_name(&ic->waits[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < ic->nwaits && ic->waits[end].len == s->name_len &&
           memcmp(ic->waits[end].name, s->name, s->name_len) == 0)
        end++;
    *watches = 0;
    size_t nw = 0;
    for (size_t i = lo; i < end; i++) {
        if (ic->waits[i].watch)
            (*watches)++;
        else
            nw++;
    }
    if (s->kind == CRD_KIND_FAIR_LOCK || nw == 0)
        return CRD_OK;
    s->known_waiters = crd__state_alloc(b, (nw + 1) * sizeof *s->known_waiters);
    for (size_t i = lo; s->known_waiters != NULL && i < end; i++) {
        const wait_ref *wr = &ic->waits[i];
        if (wr->watch)
            continue;
        char field[96];
        int fl = snprintf(field, sizeof field, "%s:%llu", ic->v[wr->rec].uuid,
                          (unsigned long long)wr->owner);
        crd_waiter *w = &s->known_waiters[s->nknown_waiters++];
        const record *rec;
        w->owner = crd__state_str(b, field, (size_t)fl);
        fill_who(b, ic, field, (size_t)fl, &w->who, &rec);
        w->deadline_ms = w->remaining_ms = -1;
        w->since_ms = wr->since;
        w->waited_ms = wr->since >= 0 ? s->read_at_ms - wr->since : -1;
    }
    if (s->known_waiters != NULL && s->nknown_waiters > 1)
        qsort(s->known_waiters, s->nknown_waiters, sizeof *s->known_waiters, by_since);
    return CRD_OK;
}

/* ---- who, in words -------------------------------------------------------------------- */

size_t crd_identity_describe(const crd_identity *who, char *buf, size_t size)
{
    int n;
    if (who == NULL)
        n = snprintf(buf, size, "?");
    else if (who->known)
        n = snprintf(buf, size, "%s pid %lld %s%s%s%s", who->host, (long long)who->pid,
                     who->program, who->label[0] ? " [" : "", who->label,
                     who->label[0] ? "]" : "");
    else if (who->client_id[0] != '\0')
        n = snprintf(buf, size, "client %s (no identity record)%s%s", who->client_id,
                     who->connections[0] ? "; named connections: " : "", who->connections);
    else
        n = snprintf(buf, size, "unknown");
    return n < 0 ? 0 : (size_t)n;
}

/* ---- the watch's joins (watch.c) ------------------------------------------------------- */

crd__idcache *crd__idcache_new(void) { return calloc(1, sizeof(crd__idcache)); }


void crd__idcache_who(crd_client *c, crd__idcache *ic, const char *owner, size_t len,
                      crd_identity *who)
{
    size_t ul;
    uint64_t t;
    bool w;
    if (crd__owner_field_parse(owner, len, &ul, &t, &w)) {
        /* A record missing or partial is looked for again (rec_stale): a client's first
         * write may come just after its first acquire. */
        const char *o[1] = {owner};
        size_t l[1] = {len};
        if (want_records(c, ic, o, l, 1) != CRD_OK)
            crd__ok(c);
    }
    const record *rec;
    fill_who(NULL, ic, owner, len, who, &rec);
}
