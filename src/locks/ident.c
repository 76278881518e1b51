/*
 * ident.c -- the client's identity record (crd_options.identity): who this process is
 * (host, pid, program, start, version, label) and, for each name it has held or waited
 * for at least CRD__IDENT_MIN_AGE_MS, since when; kept in Redis as the hash
 * "{credisson}:client:<uuid>" and listed in the zset "{credisson}:clients", so that the
 * state calls (inspect.c) can say "web-3 pid 4711 ./report.sh, held 12 min 3 s".
 *
 * Nothing is sent on the acquire or release path. The watchdog thread calls
 * crd__ident_tick: at the client's start, every third of watchdog_timeout_ms (a whole
 * write, which renews the record's TTL, watchdog_timeout_ms, as a lease is renewed), and
 * every CRD__IDENT_TICK_MS while the client holds or waits, when what the record should
 * list changed (the holds and waits older than CRD__IDENT_MIN_AGE_MS, compared with what
 * was written: a hold shorter than that is never written). The write (lua/ident_write.lua)
 * goes to the engine with a completion, so the watchdog thread never waits for it: a slow
 * or absent identity node costs the renewals nothing. While the client holds and waits for
 * nothing and the record is up to date the ticks stop; the first new hold
 * (crd__ident_touch, one atomic load on the acquire path) or wait wakes them.
 *
 * Why one record per client in one slot rather than one per node or per slot: readers
 * join by the owner field's client uuid, so the record's key follows from the holder;
 * the writes are few (one per tick with changes, one per period), so one node carries
 * them all easily; and with every record and the registry in one slot, one script call
 * writes the record and the registry together, and one reads every record a state needs.
 *
 * Threads: the watchdog thread (ticks), the I/O thread (the write's completion), callers
 * (waits begin and end, labels), crd_client_free (the final delete). Locks: id->mu, a
 * leaf (taken after holds->mu, never with another lock held inside it).
 */
#include "locks.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One field of the record and its value. */
typedef struct entry {
    char *field;
    size_t flen;
    char value[32];
} entry;

typedef struct entries {
    entry *v;
    size_t n, cap;
    bool oom;
} entries;

typedef struct crd__ident crd__ident;
struct crd__ident {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a write in flight ended */
    char key[64];      /* "{credisson}:client:<uuid>" */
    char host[256];
    char program[CRD__IDENT_TEXT_MAX + 8];
    char pid[24], started[24], ttl[24];
    char *label;
    bool label_dirty;
    crd__ident_wait *waits; /* blocking acquires waiting, and watches */
    entries published;      /* what the record holds, sorted by field */
    entries sent;           /* the write in flight's entries, published when it succeeds */
    bool sent_full;
    bool inflight;
    bool need_full;
    bool eval;   /* the script cache lacks ident_write: EVAL once */
    bool warned; /* a failed write was logged */
    bool off;    /* a forked child's copy */
    int64_t next_full, backoff_until, backoff_ms; /* monotonic ms */
    atomic_bool idle;
};

/* Wakes the thread that writes the record (the watchdog's, through its hook). */
static void ident_news(crd_client *c)
{
    if (c->on_ident_news != NULL)
        c->on_ident_news(c);
}

static void entries_clear(entries *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i].field);
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* Appends tag, a decimal owner (0: none) and ':' and name as one field. */
static void entries_add(entries *e, const char *tag, uint64_t owner, const char *name,
                        size_t len, int64_t since, bool watched)
{
    if (e->oom || e->n >= CRD__IDENT_MAX_ENTRIES || len > CRD__IDENT_MAX_NAME)
        return;
    entry *v = crd__grow(e->v, &e->cap, e->n + 1, sizeof *v, 16);
    if (v == NULL) {
        e->oom = true;
        return;
    }
    e->v = v;
    size_t tl = strlen(tag);
    char *f = malloc(tl + 24 + len + 1);
    if (f == NULL) {
        e->oom = true;
        return;
    }
    memcpy(f, tag, tl);
    char *p = f + tl;
    if (owner != 0) {
        p = crd__put_u64(p, owner);
        *p++ = ':';
    }
    memcpy(p, name, len);
    p += len;
    *p = '\0';
    entry *en = &e->v[e->n++];
    en->field = f;
    en->flen = (size_t)(p - f);
    snprintf(en->value, sizeof en->value, "%lld%s", (long long)since, watched ? " w" : "");
}

static int by_field(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    return crd__bytes_cmp(a->field, a->flen, b->field, b->flen);
}

/* Sorts e and drops repeated fields (two watches of one name), keeping the oldest. */
static void entries_sort(entries *e)
{
    if (e->n < 2)
        return;
    qsort(e->v, e->n, sizeof *e->v, by_field);
    size_t o = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (o > 0 && by_field(&e->v[o - 1], &e->v[i]) == 0) {
            free(e->v[i].field);
            continue;
        }
        e->v[o++] = e->v[i];
    }
    e->n = o;
}

/* ---- who this process is ---------------------------------------------------------------- */

/* The command line, its arguments joined by spaces, at most CRD__IDENT_TEXT_MAX bytes
 * ("..." ends a longer one); without it (cmdline false, or unreadable) the executable's
 * name. Never the environment. */
static void read_program(char *out, size_t cap, bool cmdline)
{
    out[0] = '\0';
    char buf[CRD__IDENT_TEXT_MAX + 1];
    ssize_t n = 0;
    int fd = cmdline ? open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        n = read(fd, buf, sizeof buf);
        close(fd);
    }
    bool cut = n == (ssize_t)sizeof buf;
    if (n > 0) {
        size_t len = (size_t)n - (cut ? 1 : 0);
        while (len > 0 && buf[len - 1] == '\0')
            len--;
        for (size_t i = 0; i < len; i++)
            if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\r')
                buf[i] = ' ';
        snprintf(out, cap, "%.*s%s", (int)len, buf, cut ? "..." : "");
        return;
    }
    /* The executable file's name (/proc/self/exe's last part): not /proc/self/comm first,
     * which is cut at 15 bytes and, under valgrind, names the tool. */
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el > 0) {
        exe[el] = '\0';
        const char *base = strrchr(exe, '/');
        base = base != NULL ? base + 1 : exe;
        size_t bl = strlen(base);
        if (bl >= cap)
            bl = cap - 1; /* cap > 0: out is a record field */
        memcpy(out, base, bl);
        out[bl] = '\0';
        return;
    }
    fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, 64);
        close(fd);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
            n--;
        if (n > 0)
            snprintf(out, cap, "%.*s", (int)n, buf);
    }
}

crd_status crd__ident_init(crd_client *c, const crd_options *o)
{
    c->ident = NULL;
    if (!o->identity)
        return CRD_OK;
    if (o->identity_label != NULL && strlen(o->identity_label) > CRD__IDENT_TEXT_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "identity_label is over %d bytes",
                         CRD__IDENT_TEXT_MAX);
    crd__ident *id = calloc(1, sizeof *id);
    if (id == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot allocate the identity");
    pthread_mutex_init(&id->mu, NULL);
    crd__cond_init(&id->cv);
    snprintf(id->key, sizeof id->key, "%s%s", CRD__IDENT_KEY_PREFIX, c->uuid);
    if (gethostname(id->host, sizeof id->host - 1) != 0)
        snprintf(id->host, sizeof id->host, "?");
    read_program(id->program, sizeof id->program, o->identity_cmdline);
    snprintf(id->pid, sizeof id->pid, "%lld", (long long)getpid());
    snprintf(id->started, sizeof id->started, "%lld", (long long)crd__epoch_ms());
    snprintf(id->ttl, sizeof id->ttl, "%lld", (long long)o->watchdog_timeout_ms);
    if (o->identity_label != NULL && o->identity_label[0] != '\0' &&
        (id->label = strdup(o->identity_label)) == NULL) {
        free(id);
        return crd__fail(c, CRD_NO_MEMORY, "cannot copy identity_label");
    }
    id->need_full = true;
    id->backoff_ms = CRD__IDENT_TICK_MS;
    atomic_init(&id->idle, false);
    c->ident = id;
    return CRD_OK;
}

crd_status crd_client_set_label(crd_client *c, const char *label)
{
    crd_status st = crd__client_check(c);
    if (st != CRD_OK)
        return st;
    if (label != NULL && strlen(label) > CRD__IDENT_TEXT_MAX)
        return crd__fail(c, CRD_INVALID_ARGUMENT, "the label is over %d bytes",
                         CRD__IDENT_TEXT_MAX);
    crd__ident *id = c->ident;
    if (id == NULL) {
        crd__ok(c);
        return CRD_OK; /* identity is off: nothing to label */
    }
    char *copy = label != NULL && label[0] != '\0' ? strdup(label) : NULL;
    if (label != NULL && label[0] != '\0' && copy == NULL)
        return crd__fail(c, CRD_NO_MEMORY, "cannot copy the label");
    pthread_mutex_lock(&id->mu);
    free(id->label);
    id->label = copy;
    id->label_dirty = true;
    pthread_mutex_unlock(&id->mu);
    atomic_store(&id->idle, false);
    ident_news(c);
    crd__ok(c);
    return CRD_OK;
}

/* ---- waits and watches ------------------------------------------------------------------ */

void crd__ident_touch(crd_client *c)
{
    crd__ident *id = c->ident;
    if (id != NULL && atomic_load_explicit(&id->idle, memory_order_relaxed) &&
        atomic_exchange(&id->idle, false))
        ident_news(c);
}

static void wait_link(crd_client *c, crd__ident_wait *w, const char *name, size_t len,
                      uint64_t owner)
{
    crd__ident *id = c->ident;
    w->on = false;
    if (id == NULL || len > CRD__IDENT_MAX_NAME)
        return;
    w->name = name;
    w->name_len = len;
    w->owner = owner;
    w->since = crd__now_ms();
    pthread_mutex_lock(&id->mu);
    if (!id->off) {
        CRD__DLIST_PUSH(id->waits, w);
        w->on = true;
    }
    pthread_mutex_unlock(&id->mu);
    if (w->on)
        crd__ident_touch(c);
}

void crd__ident_wait_begin(crd_client *c, crd__ident_wait *w, const char *name, size_t len,
                           uint64_t owner)
{
    wait_link(c, w, name, len, owner);
}

void crd__ident_watch_begin(crd_client *c, crd__ident_wait *w, const char *name, size_t len)
{
    wait_link(c, w, name, len, 0);
}

void crd__ident_wait_end(crd_client *c, crd__ident_wait *w)
{
    if (!w->on)
        return; /* never linked (also: an acquire refused before it had a client) */
    crd__ident *id = c->ident;
    pthread_mutex_lock(&id->mu);
    CRD__DLIST_UNLINK(id->waits, w);
    w->on = false;
    pthread_mutex_unlock(&id->mu);
}

/* ---- the tick ---------------------------------------------------------------------------- */

typedef struct collect_arg {
    entries *want;
    int64_t now, epoch;
    bool young; /* a hold not yet old enough: look again at the next tick */
} collect_arg;

static void collect_hold(crd__hold *h, void *arg)
{
    collect_arg *a = arg;
    if (h->count < 1 || h->lost)
        return;
    if (a->now - h->since < CRD__IDENT_MIN_AGE_MS) {
        a->young = true;
        return;
    }
    /* A group's hold is listed under the group's name (its hold key's prefix), the name
     * a state of the group is read by. */
    entries_add(a->want, h->kind == CRD__WRITE ? CRD__IDENT_WRITE_HOLD : CRD__IDENT_HOLD,
                h->owner, h->name, crd__route_len(h->kind, h->name, h->name_len),
                a->epoch - (a->now - h->since),
                h->watch_sub != NULL);
}

/* What the record should list now; *young: something will be old enough soon. Returns
 * whether the client holds or waits for anything at all. */
static bool collect(crd_client *c, entries *want, int64_t now, bool *young)
{
    crd__ident *id = c->ident;
    collect_arg a = {want, now, crd__epoch_ms(), false};
    pthread_mutex_lock(&c->holds->mu);
    bool any = c->holds->count > 0;
    crd__holds_foreach(c->holds, collect_hold, &a);
    pthread_mutex_unlock(&c->holds->mu);
    pthread_mutex_lock(&id->mu);
    for (crd__ident_wait *w = id->waits; w != NULL; w = w->next) {
        any = true;
        if (now - w->since < CRD__IDENT_MIN_AGE_MS) {
            a.young = true;
            continue;
        }
        entries_add(want, w->owner != 0 ? CRD__IDENT_WAIT : CRD__IDENT_WATCH, w->owner, w->name,
                    w->name_len, a.epoch - (now - w->since), false);
    }
    pthread_mutex_unlock(&id->mu);
    entries_sort(want);
    *young = a.young;
    return any;
}

/* The write's completion (the I/O thread): what was sent is now the record. */
static void written(crd_client *c, crd__req *rq)
{
    crd__ident *id = c->ident;
    const redisReply *r = rq->st == CRD_OK && rq->nreply > 0 ? rq->replies[0] : NULL;
    crd__reply_class cls = rq->st == CRD_OK ? crd__reply_classify(r) : CRD__REPLY_NONE;
    int64_t now = crd__now_ms();
    char words[200] = "";
    pthread_mutex_lock(&id->mu);
    id->inflight = false;
    if (cls == CRD__REPLY_OK) {
        entries_clear(&id->published);
        id->published = id->sent;
        memset(&id->sent, 0, sizeof id->sent);
        if (id->sent_full) {
            id->next_full = now + c->opts.watchdog_timeout_ms / 3;
            id->need_full = false;
        }
        id->backoff_ms = CRD__IDENT_TICK_MS;
        id->backoff_until = 0;
        id->warned = false;
    } else {
        entries_clear(&id->sent);
        id->need_full = true; /* what the record holds is not known now */
        id->label_dirty = id->label_dirty || !id->sent_full;
        if (cls == CRD__REPLY_NOSCRIPT) {
            id->eval = true; /* nothing ran: again at once, with the script's text */
        } else {
            id->backoff_until = now + id->backoff_ms;
            int64_t period = c->opts.watchdog_timeout_ms / 3;
            id->backoff_ms = id->backoff_ms * 2 < period ? id->backoff_ms * 2 : period;
            if (!id->warned) {
                id->warned = true;
                if (r != NULL)
                    crd__reply_render(r, words, sizeof words);
                else
                    snprintf(words, sizeof words, "%.150s", rq->why);
            }
            if (cls == CRD__REPLY_MOVED || cls == CRD__REPLY_ASK || cls == CRD__REPLY_READONLY)
                crd__cluster_stale(c);
        }
    }
    bool again = cls == CRD__REPLY_NOSCRIPT;
    pthread_cond_broadcast(&id->cv);
    pthread_mutex_unlock(&id->mu);
    if (again)
        ident_news(c); /* a fresh server's script cache: EVAL now, not in 250 ms */
    if (words[0] != '\0')
        crd__log(c, CRD_LOG_WARN, "the identity record %s could not be written (the locks work "
                 "the same; retried): %s", id->key, words);
}

/* A reply after the completion was told early: the next write says it all again. */
static void written_late(crd_client *c, crd__req *rq)
{
    (void)c;
    (void)rq;
}

static void arg_entry(crd__cmd *cmd, const entry *e)
{
    crd__cmd_arg(cmd, e->field, e->flen);
    crd__cmd_arg_str(cmd, e->value);
}

/* The script call: the whole record (full), or the entries of want that differ from what
 * was published and the published ones want lacks. *changes: anything to write. */
static void build(crd_client *c, const entries *want, bool full, bool label, crd__cmd *cmd,
                  bool *changes)
{
    crd__ident *id = c->ident;
    const entries *pub = &id->published;
    /* Pairs first (counted), deletions after. */
    size_t sets = 0, dels = 0, i = 0, j = 0;
    bool *set_of = calloc(want->n + 1, sizeof *set_of), *del_of = calloc(pub->n + 1, sizeof *del_of);
    if (set_of == NULL || del_of == NULL) {
        free(set_of);
        free(del_of);
        cmd->oom = true;
        *changes = false;
        return;
    }
    if (full) {
        for (i = 0; i < want->n; i++)
            set_of[i] = true;
        sets = want->n;
    } else {
        while (i < want->n || j < pub->n) {
            int d = i == want->n ? 1 : j == pub->n ? -1 : by_field(&want->v[i], &pub->v[j]);
            if (d < 0) {
                set_of[i++] = true;
                sets++;
            } else if (d > 0) {
                del_of[j++] = true;
                dels++;
            } else {
                if (strcmp(want->v[i].value, pub->v[j].value) != 0) {
                    set_of[i] = true;
                    sets++;
                }
                i++;
                j++;
            }
        }
    }
    *changes = full || label || sets > 0 || dels > 0;
    static const char *const statics[] = {"host", "pid", "program", "started_ms", "version",
                                          "ttl_ms", "lib"};
    size_t nstatic = full ? sizeof statics / sizeof statics[0] : 0;
    size_t pairs = sets + nstatic + (full || label ? 1 : 0);
    crd__cmd_init(cmd, CRD__SCRIPT_IDENT_WRITE, (int)(2 + 5 + 2 * pairs + dels));
    crd__cmd_key(cmd, id->key, strlen(id->key));
    crd__cmd_key(cmd, CRD__IDENT_REGISTRY, sizeof CRD__IDENT_REGISTRY - 1);
    crd__cmd_arg_str(cmd, id->ttl);
    crd__cmd_arg_i64(cmd, crd__epoch_ms());
    crd__cmd_arg_str(cmd, c->uuid);
    crd__cmd_arg_str(cmd, full ? "1" : "0");
    crd__cmd_arg_i64(cmd, (int64_t)pairs);
    if (full) {
        const char *values[] = {id->host, id->pid, id->program, id->started, crd_version(),
                                id->ttl, "credisson"};
        for (size_t k = 0; k < nstatic; k++) {
            crd__cmd_arg_str(cmd, statics[k]);
            crd__cmd_arg_str(cmd, values[k]);
        }
    }
    if (full || label) {
        crd__cmd_arg_str(cmd, "label");
        crd__cmd_arg_str(cmd, id->label != NULL ? id->label : "");
    }
    for (i = 0; i < want->n; i++)
        if (set_of[i])
            arg_entry(cmd, &want->v[i]);
    for (j = 0; j < pub->n; j++)
        if (del_of[j])
            crd__cmd_arg(cmd, pub->v[j].field, pub->v[j].flen);
    free(set_of);
    free(del_of);
}

int64_t crd__ident_tick(crd_client *c)
{
    crd__ident *id = c->ident;
    if (id == NULL)
        return INT64_MAX;
    int64_t now = crd__now_ms();
    pthread_mutex_lock(&id->mu);
    if (id->off) {
        pthread_mutex_unlock(&id->mu);
        return INT64_MAX;
    }
    if (id->inflight || now < id->backoff_until) {
        int64_t at = id->inflight ? now + CRD__IDENT_TICK_MS : id->backoff_until;
        pthread_mutex_unlock(&id->mu);
        return at;
    }
    bool full = id->need_full || now >= id->next_full;
    bool label = id->label_dirty;
    bool eval = id->eval;
    pthread_mutex_unlock(&id->mu);

    entries want = {0};
    bool young = false;
    bool any = collect(c, &want, now, &young);
    crd__cmd cmd;
    bool changes = false;
    /* Only this thread changes published (the completion runs while inflight). */
    build(c, &want, full, label, &cmd, &changes);
    if (!changes) {
        crd__cmd_free(&cmd);
        entries_clear(&want);
        if (!any && !young && id->published.n == 0) {
            /* Nothing to look at until a hold or a wait begins (crd__ident_touch), or the
             * record's renewal is due. */
            atomic_store(&id->idle, true);
            pthread_mutex_lock(&c->holds->mu);
            bool holds = c->holds->count > 0;
            pthread_mutex_unlock(&c->holds->mu);
            pthread_mutex_lock(&id->mu);
            bool waits = id->waits != NULL;
            int64_t next = id->next_full;
            pthread_mutex_unlock(&id->mu);
            if (!holds && !waits)
                return next;
            atomic_store(&id->idle, false);
        }
        return now + CRD__IDENT_TICK_MS;
    }
    crd__req *rq = cmd.oom || want.oom ? NULL : crd__call_request(c, &cmd, eval);
    crd__cmd_free(&cmd);
    if (rq == NULL) {
        /* Out of memory, or (a cluster) no node serves the slot now: later. */
        entries_clear(&want);
        crd__cluster_stale(c);
        return now + CRD__IDENT_TICK_MS * 4;
    }
    rq->on_done = written;
    rq->on_late = written_late;
    pthread_mutex_lock(&id->mu);
    entries_clear(&id->sent);
    id->sent = want;
    id->sent_full = full;
    id->inflight = true;
    id->label_dirty = false;
    if (eval)
        id->eval = false;
    pthread_mutex_unlock(&id->mu);
    if (crd__engine_submit(c, rq) != CRD_OK) {
        /* Closing: the request was freed unsent. */
        pthread_mutex_lock(&id->mu);
        id->inflight = false;
        entries_clear(&id->sent);
        id->need_full = true;
        pthread_cond_broadcast(&id->cv);
        pthread_mutex_unlock(&id->mu);
        return INT64_MAX;
    }
    return now + CRD__IDENT_TICK_MS;
}

/* ---- the end ----------------------------------------------------------------------------- */

void crd__ident_stop(crd_client *c)
{
    crd__ident *id = c->ident;
    if (id == NULL || c->failed || c->pid != getpid())
        return;
    /* At most a second in all (the record's TTL covers a server that does not answer):
     * freeing a client must not wait on a dead server for long. */
    int64_t budget = c->opts.command_timeout_ms < 1000 ? c->opts.command_timeout_ms : 1000;
    int64_t deadline = crd__now_ms() + budget;
    pthread_mutex_lock(&id->mu);
    /* A write still in flight could land after the delete and bring the record back
     * until its TTL: let it end first. */
    while (id->inflight && crd__now_ms() < deadline) {
        struct timespec ts = crd__abstime(deadline);
        pthread_cond_timedwait(&id->cv, &id->mu, &ts);
    }
    bool off = id->off;
    id->off = true;
    pthread_mutex_unlock(&id->mu);
    if (off)
        return;
    crd__cmd cmd;
    crd__cmd_init(&cmd, CRD__SCRIPT_IDENT_REMOVE, 3);
    crd__cmd_key(&cmd, id->key, strlen(id->key));
    crd__cmd_key(&cmd, CRD__IDENT_REGISTRY, sizeof CRD__IDENT_REGISTRY - 1);
    crd__cmd_arg_str(&cmd, c->uuid);
    int64_t now = crd__now_ms();
    cmd.deadline_ms = deadline > now + 50 ? deadline : now + 50;
    redisReply *r = NULL;
    crd_status st = crd__call(c, &cmd, "deleting the identity record", &r, NULL);
    crd__cmd_free(&cmd);
    if (r != NULL)
        freeReplyObject(r);
    if (st != CRD_OK)
        crd__log(c, CRD_LOG_WARN, "the identity record %s was not deleted (it expires in "
                 "%s ms): %s", id->key, id->ttl, crd_client_errmsg(c));
}

void crd__ident_free(crd_client *c)
{
    crd__ident *id = c->ident;
    if (id == NULL)
        return;
    entries_clear(&id->published);
    entries_clear(&id->sent);
    free(id->label);
    pthread_cond_destroy(&id->cv);
    pthread_mutex_destroy(&id->mu);
    free(id);
    c->ident = NULL;
}

void crd__ident_after_fork_child(crd_client *c)
{
    crd__ident *id = c->ident;
    if (id == NULL)
        return;
    /* The parent's threads may have held the mutex or been on the list (their stacks are
     * not here): start over, off. The parent's record stays the parent's. */
    memset(&id->mu, 0, sizeof id->mu);
    pthread_mutex_init(&id->mu, NULL);
    memset(&id->cv, 0, sizeof id->cv);
    crd__cond_init(&id->cv);
    id->waits = NULL;
    id->inflight = false;
    id->off = true;
    memset(&id->sent, 0, sizeof id->sent); /* the parent's I/O thread may own it */
}
