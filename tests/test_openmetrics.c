/*
 * test_openmetrics.c -- crd_client_metrics_openmetrics(): the Prometheus text exposition
 * of a client that did real acquisitions (one of them contended) on the run's
 * redis-server, read back line by line by a parser of the format's grammar (version
 * 0.0.4): metric and label names, label values and their escapes, sample values, HELP
 * and TYPE before a family's samples and at most once, a family's samples together,
 * counters named _total, and for each histogram cumulative buckets with increasing le
 * bounds ending at +Inf and _count equal to the +Inf bucket. Its numbers are checked
 * against crd_client_metrics(), and the snprintf contract (measure, truncate, NUL) and
 * a scrape during acquisitions on other threads are checked too.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "waiters.h"

/* ---- a parser of the text format ------------------------------------------------------ */

#define MAX_FAMILIES 64
#define MAX_BUCKETS 64

typedef struct family {
    char name[128];
    char type[16];
    bool help, typed, done; /* done: its samples ended (another family's began) */
    int samples;
    /* histograms */
    int nbuckets;
    double le[MAX_BUCKETS], bucket[MAX_BUCKETS];
    bool has_sum, has_count;
    double sum, count;
    double value; /* counters and gauges */
} family;

typedef struct exposition {
    family f[MAX_FAMILIES];
    int n;
} exposition;

static family *find(exposition *e, const char *name)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->f[i].name, name) == 0)
            return &e->f[i];
    return NULL;
}

static family *find_or_add(exposition *e, const char *name, int line)
{
    family *f = find(e, name);
    if (f != NULL)
        return f;
    cr_assert_lt(e->n, MAX_FAMILIES, "line %d: too many families", line);
    f = &e->f[e->n++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* (metric names) or, with colon false, [a-zA-Z_][a-zA-Z0-9_]*
 * (label names); returns its length, 0 when p does not start with one. */
static size_t name_len(const char *p, bool colon)
{
    size_t n = 0;
    while (isalpha((unsigned char)p[n]) || p[n] == '_' || (colon && p[n] == ':') ||
           (n > 0 && isdigit((unsigned char)p[n])))
        n++;
    return n;
}

/* A sample value: a Go ParseFloat number, or +Inf, -Inf, NaN. */
static double parse_value(const char *s, int line)
{
    if (strcmp(s, "+Inf") == 0)
        return INFINITY;
    if (strcmp(s, "-Inf") == 0)
        return -INFINITY;
    if (strcmp(s, "NaN") == 0)
        return NAN;
    cr_assert(s[0] != '\0', "line %d: no value", line);
    cr_assert(strchr(s, ',') == NULL, "line %d: a decimal comma in \"%s\"", line, s);
    char *end;
    double v = strtod(s, &end);
    cr_assert(*end == '\0' && end != s, "line %d: \"%s\" is not a number", line, s);
    return v;
}

/* The family a sample name belongs to: name itself for counters and gauges, the name
 * without _bucket/_sum/_count for histograms (only when that family is a histogram). */
static family *family_of(exposition *e, const char *name, const char **suffix)
{
    *suffix = "";
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(name), k = strlen(sfx[i]);
        if (n > k && strcmp(name + n - k, sfx[i]) == 0) {
            char base[128];
            snprintf(base, sizeof base, "%.*s", (int)(n - k), name);
            family *f = find(e, base);
            if (f != NULL && strcmp(f->type, "histogram") == 0) {
                *suffix = sfx[i];
                return f;
            }
        }
    }
    return find(e, name);
}

static void parse_sample(exposition *e, family **current, char *line, int ln)
{
    size_t n = name_len(line, true);
    cr_assert_gt(n, 0, "line %d: no metric name: \"%s\"", ln, line);
    char name[128];
    cr_assert_lt(n, sizeof name, "line %d: name too long", ln);
    snprintf(name, sizeof name, "%.*s", (int)n, line);
    char *p = line + n;
    char le[64] = "";
    int nlabels = 0;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            size_t k = name_len(p, false);
            cr_assert_gt(k, 0, "line %d: bad label name at \"%s\"", ln, p);
            cr_assert(!(k >= 2 && p[0] == '_' && p[1] == '_'), "line %d: reserved label", ln);
            char label[64];
            snprintf(label, sizeof label, "%.*s", (int)k, p);
            p += k;
            cr_assert_eq(*p, '=', "line %d: label %s without '='", ln, label);
            p++;
            cr_assert_eq(*p, '"', "line %d: label %s: value not quoted", ln, label);
            p++;
            char value[128];
            size_t v = 0;
            while (*p != '"') {
                cr_assert(*p != '\0' && *p != '\n', "line %d: unterminated label value", ln);
                if (*p == '\\') {
                    p++;
                    cr_assert(*p == '\\' || *p == '"' || *p == 'n', "line %d: bad escape", ln);
                }
                cr_assert_lt(v, sizeof value - 1);
                value[v++] = *p++;
            }
            value[v] = '\0';
            p++;
            if (strcmp(label, "le") == 0)
                snprintf(le, sizeof le, "%.63s", value);
            nlabels++;
            if (*p == ',')
                p++;
            else
                cr_assert_eq(*p, '}', "line %d: expected ',' or '}' at \"%s\"", ln, p);
        }
        p++;
    }
    cr_assert_eq(*p, ' ', "line %d: no space before the value", ln);
    p++;
    char *ts = strchr(p, ' ');
    if (ts != NULL) { /* an optional timestamp: an integer (we never write one) */
        *ts++ = '\0';
        char *end;
        (void)strtoll(ts, &end, 10);
        cr_assert(*end == '\0' && end != ts, "line %d: bad timestamp \"%s\"", ln, ts);
    }
    double value = parse_value(p, ln);

    const char *suffix;
    family *f = family_of(e, name, &suffix);
    cr_assert_not_null(f, "line %d: sample %s before its # TYPE line", ln, name);
    cr_assert(f->typed, "line %d: sample %s before its # TYPE line", ln, name);
    cr_assert(!f->done, "line %d: %s's samples are not together", ln, f->name);
    if (*current != NULL && *current != f)
        (*current)->done = true;
    *current = f;
    f->samples++;
    if (strcmp(f->type, "histogram") != 0) {
        cr_assert_eq(nlabels, 0, "line %d: %s: unexpected labels", ln, name);
        cr_assert_eq(f->samples, 1, "line %d: %s twice", ln, name);
        f->value = value;
        return;
    }
    if (strcmp(suffix, "_bucket") == 0) {
        cr_assert_neq(le[0], '\0', "line %d: a bucket without le", ln);
        cr_assert_eq(nlabels, 1, "line %d: a bucket with labels besides le", ln);
        cr_assert(!f->has_sum && !f->has_count, "line %d: a bucket after _sum/_count", ln);
        double bound = parse_value(le, ln);
        cr_assert(!isnan(bound), "line %d: le is NaN", ln);
        cr_assert_lt(f->nbuckets, MAX_BUCKETS);
        if (f->nbuckets > 0) {
            cr_assert_gt(bound, f->le[f->nbuckets - 1], "line %d: le=%s not above the last", ln,
                         le);
            cr_assert_geq(value, f->bucket[f->nbuckets - 1],
                          "line %d: bucket le=%s is below the one before (not cumulative)", ln,
                          le);
        }
        f->le[f->nbuckets] = bound;
        f->bucket[f->nbuckets++] = value;
    } else if (strcmp(suffix, "_sum") == 0) {
        cr_assert(!f->has_sum, "line %d: two _sum", ln);
        f->has_sum = true;
        f->sum = value;
    } else {
        cr_assert(!f->has_count, "line %d: two _count", ln);
        f->has_count = true;
        f->count = value;
    }
}

/* Parses text (asserting the grammar), then checks each family as a whole. */
static void parse(const char *text, exposition *e)
{
    memset(e, 0, sizeof *e);
    size_t len = strlen(text);
    cr_assert_gt(len, 0, "empty exposition");
    cr_assert_eq(text[len - 1], '\n', "the text does not end with a newline");
    char *copy = strdup(text);
    cr_assert_not_null(copy);
    family *current = NULL;
    int ln = 0;
    for (char *line = copy, *next; *line != '\0'; line = next) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        next = nl + 1;
        ln++;
        cr_assert_neq(line[0], '\0', "line %d is empty", ln);
        cr_assert(strchr(line, '\r') == NULL && strchr(line, '\t') == NULL,
                  "line %d: CR or TAB", ln);
        if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
            bool help = line[2] == 'H';
            char *p = line + 7;
            size_t n = name_len(p, true);
            cr_assert(n > 0 && p[n] == ' ', "line %d: bad metric name in \"%s\"", ln, line);
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)n, p);
            cr_assert(strncmp(name, "credisson_", 10) == 0, "line %d: %s lacks the prefix", ln,
                      name);
            family *f = find_or_add(e, name, ln);
            cr_assert_eq(f->samples, 0, "line %d: # %s of %s after its samples", ln,
                         help ? "HELP" : "TYPE", name);
            p += n + 1;
            if (help) {
                cr_assert(!f->help, "line %d: a second # HELP for %s", ln, name);
                f->help = true;
                cr_assert_neq(*p, '\0', "line %d: empty help", ln);
                for (const char *q = p; *q != '\0'; q++)
                    if (*q == '\\') {
                        cr_assert(q[1] == '\\' || q[1] == 'n', "line %d: bad escape", ln);
                        q++;
                    }
            } else {
                cr_assert(!f->typed, "line %d: a second # TYPE for %s", ln, name);
                cr_assert(strcmp(p, "counter") == 0 || strcmp(p, "gauge") == 0 ||
                              strcmp(p, "histogram") == 0 || strcmp(p, "summary") == 0 ||
                              strcmp(p, "untyped") == 0,
                          "line %d: unknown type \"%s\"", ln, p);
                f->typed = true;
                snprintf(f->type, sizeof f->type, "%s", p);
            }
            continue;
        }
        cr_assert_neq(line[0], '#', "line %d: a comment we do not write: %s", ln, line);
        cr_assert_neq(line[0], ' ', "line %d: leading space", ln);
        parse_sample(e, &current, line, ln);
    }
    free(copy);
    for (int i = 0; i < e->n; i++) {
        family *f = &e->f[i];
        cr_assert(f->help && f->typed, "%s: # HELP and # TYPE both", f->name);
        cr_assert_gt(f->samples, 0, "%s has no sample", f->name);
        size_t n = strlen(f->name);
        if (strcmp(f->type, "counter") == 0) {
            cr_assert(n > 6 && strcmp(f->name + n - 6, "_total") == 0, "counter %s lacks _total",
                      f->name);
            cr_assert_geq(f->value, 0);
            cr_assert_eq(f->value, (double)(uint64_t)f->value, "%s is not a whole count", f->name);
        }
        if (strcmp(f->type, "histogram") == 0) {
            cr_assert(n > 8 && strcmp(f->name + n - 8, "_seconds") == 0,
                      "histogram %s is not in seconds", f->name);
            cr_assert(f->has_sum && f->has_count, "%s lacks _sum or _count", f->name);
            cr_assert_gt(f->nbuckets, 1, "%s has no finite bucket", f->name);
            cr_assert(isinf(f->le[f->nbuckets - 1]) && f->le[f->nbuckets - 1] > 0,
                      "%s's last bucket is not le=\"+Inf\"", f->name);
            cr_assert_eq(f->count, f->bucket[f->nbuckets - 1], "%s: _count %g, +Inf bucket %g",
                         f->name, f->count, f->bucket[f->nbuckets - 1]);
            cr_assert_geq(f->sum, 0);
        }
    }
}

/* The whole exposition, measured first, then written into a buffer of that size. */
static char *scrape(crd_client *c)
{
    size_t n = crd_client_metrics_openmetrics(c, NULL, 0);
    cr_assert_gt(n, 0, "%s", crd_client_errmsg(c));
    size_t cap = n + 1024; /* headroom: counters may grow between the two calls */
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    size_t m = crd_client_metrics_openmetrics(c, buf, cap);
    cr_assert_lt(m, cap, "grew by more than the headroom");
    cr_assert_eq(strlen(buf), m);
    return buf;
}

static double value_of(exposition *e, const char *name)
{
    family *f = find(e, name);
    cr_assert_not_null(f, "no %s", name);
    return f->value;
}

/* ---- tests ------------------------------------------------------------------------------ */

Test(openmetrics, a_client_that_locked_exposes_valid_prometheus_text_matching_its_metrics)
{
    crd_client *c = crdt_client(), *other = crdt_client();
    const char *name = crdt_key("om");
    crd_lock *l = crdt_lock(c, name), *ol = crdt_lock(other, name);

    /* Three uncontended holds (one re-entered), then one contended acquire: the other
     * client holds, c waits subscribed, the release wakes it. */
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK, "%s", crd_client_errmsg(c));
        if (i == 0) {
            cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_OK);
            cr_assert_eq(crd_lock_release(l), CRD_OK);
        }
        cr_assert_eq(crd_lock_release(l), CRD_OK, "%s", crd_client_errmsg(c));
    }
    cr_assert_eq(crd_lock_acquire(ol, 0, 10000), CRD_OK);
    cr_assert_eq(crd_lock_acquire(l, 0, 10000), CRD_BUSY);
    crdt_waiter w = {.lock = l, .wait_ms = 10000, .lease_ms = 10000, .client = c};
    crdt_waiter_start(&w);
    char channel[400];
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    redisContext *r = crdt_redis();
    cr_assert(crdt_await_subscribed(r, channel, 5000), "the waiter never subscribed");
    crdt_release_wakes(ol, &w, "contended acquire"); /* joins the waiter */
    redisFree(r);

    crd_metrics m;
    cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
    char *text = scrape(c);
    exposition e;
    parse(text, &e);

    cr_assert_eq(value_of(&e, "credisson_acquisitions_total"), (double)m.acquisitions);
    cr_assert_eq(m.acquisitions, 5);
    cr_assert_eq(value_of(&e, "credisson_acquisitions_contended_total"), 1);
    cr_assert_eq(value_of(&e, "credisson_acquire_busy_total"), 1);
    cr_assert_eq(value_of(&e, "credisson_releases_total"), (double)m.releases);
    cr_assert_eq(value_of(&e, "credisson_connects_total"), (double)m.connects);
    cr_assert_eq(value_of(&e, "credisson_subscribes_total"), (double)m.subscribes);
    cr_assert_eq(value_of(&e, "credisson_holds"), 0);
    cr_assert_str_eq(find(&e, "credisson_holds")->type, "gauge");
    cr_assert_eq(value_of(&e, "credisson_waiting"), 0, "the waiter is done");
    cr_assert_str_eq(find(&e, "credisson_waiting")->type, "gauge");
    static const char *const counters[] = {
        "acquisitions", "acquisitions_contended", "acquire_busy", "releases", "renewals",
        "renewal_failures", "locks_lost", "connects", "connection_failures", "subscribes",
        "watchdog_round_trips", "runs_skipped", "runs_degraded", "local_queued", "deferred",
        "late_holds_released", "outcomes_unknown", "permits_acquired", "permits_released",
        "permit_acquires_contended", "permit_acquire_busy", "latch_count_downs",
        "latch_awaits_woken", "latch_await_timeouts", "eviction_warnings", "sync_refusals",
        "crossslot_rebatches"};
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        char full[128];
        snprintf(full, sizeof full, "credisson_%s_total", counters[i]);
        family *f = find(&e, full);
        cr_assert_not_null(f, "no %s", full);
        cr_assert_str_eq(f->type, "counter");
    }

    family *wait = find(&e, "credisson_acquire_wait_seconds");
    family *hold = find(&e, "credisson_lock_hold_seconds");
    cr_assert(wait != NULL && hold != NULL);
    cr_assert_str_eq(wait->type, "histogram");
    cr_assert_eq(wait->count, 1, "one contended acquire waited");
    cr_assert_eq(hold->count, 4, "four holds were given back by a final release");
    /* The waiter waited from its start until the release: within its bucket's bounds. */
    cr_assert_leq(wait->sum, (double)m.wait_ms_max / 1000 + 0.001);
    cr_assert_eq(wait->le[0], 0.001);
    for (int i = 1; i + 1 < wait->nbuckets; i++)
        cr_assert_eq(wait->le[i], wait->le[i - 1] * 2, "powers of two milliseconds");
    cr_assert_eq(e.n, 27 + 2 + 2, "27 counters, 2 gauges and 2 histograms");
    free(text);
    crd_lock_free(l);
    crd_lock_free(ol);
    crd_client_free(other);
    crd_client_free(c);
}

Test(openmetrics, it_measures_truncates_and_terminates_like_snprintf)
{
    crd_client *c = crdt_client();
    size_t n = crd_client_metrics_openmetrics(c, NULL, 0);
    cr_assert_gt(n, 100);
    char *full = malloc(n + 1);
    cr_assert_not_null(full);
    memset(full, 'x', n + 1);
    cr_assert_eq(crd_client_metrics_openmetrics(c, full, n + 1), n);
    cr_assert_eq(full[n], '\0');
    cr_assert_eq(strlen(full), n);

    char small[64];
    memset(small, 'x', sizeof small);
    cr_assert_eq(crd_client_metrics_openmetrics(c, small, 10), n, "the length needed");
    cr_assert_eq(strlen(small), 9);
    cr_assert(strncmp(small, full, 9) == 0);
    cr_assert_eq(small[10], 'x', "wrote past size");
    cr_assert_eq(crd_client_metrics_openmetrics(c, small, 1), n);
    cr_assert_eq(small[0], '\0');
    /* One byte short: all but the last newline. */
    char *short1 = malloc(n);
    cr_assert_not_null(short1);
    cr_assert_eq(crd_client_metrics_openmetrics(c, short1, n), n);
    cr_assert_eq(strlen(short1), n - 1);
    cr_assert(strncmp(short1, full, n - 1) == 0);

    cr_assert_eq(crd_client_metrics_openmetrics(NULL, small, sizeof small), 0);
    cr_assert_eq(crd_client_metrics_openmetrics(c, NULL, 8), 0);
    cr_assert(strstr(crd_client_errmsg(c), "buf") != NULL, "%s", crd_client_errmsg(c));
    cr_assert_gt(crd_client_metrics_openmetrics(c, NULL, 0), 0, "NULL with size 0 measures");
    cr_assert_str_eq(crd_client_errmsg(c), "");
    free(short1);
    free(full);
    crd_client_free(c);
}

/* ---- scrapes while other threads lock ------------------------------------------------- */

typedef struct worker {
    crd_client *c;
    int index, rounds;
    atomic_bool *failed;
} worker;

static void *lock_loop(void *arg)
{
    worker *w = arg;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "omw%d", w->index);
    crd_lock *l = NULL;
    if (crd_lock_new(w->c, crdt_key(suffix), &l) != CRD_OK) {
        atomic_store(w->failed, true);
        return NULL;
    }
    for (int i = 0; i < w->rounds; i++)
        if (crd_lock_acquire(l, 1000, 10000) != CRD_OK || crd_lock_release(l) != CRD_OK) {
            atomic_store(w->failed, true);
            break;
        }
    crd_lock_free(l);
    return NULL;
}

Test(openmetrics, a_scrape_while_other_threads_lock_is_valid_and_counters_never_go_back)
{
    crd_client *c = crdt_client();
    enum { THREADS = 2 };
    atomic_bool failed = false;
    worker ws[THREADS];
    pthread_t th[THREADS];
    int rounds = crdt_scaled_count(300, 30);
    for (int i = 0; i < THREADS; i++) {
        ws[i] = (worker){c, i, rounds, &failed};
        cr_assert_eq(pthread_create(&th[i], NULL, lock_loop, &ws[i]), 0);
    }
    double last_acq = 0, last_holds = 0;
    int scrapes = 0;
    int64_t deadline = crdt_now_ms() + 60000;
    for (;;) {
        crd_metrics m;
        cr_assert_eq(crd_client_metrics(c, &m, sizeof m), CRD_OK);
        bool finished = m.releases >= (uint64_t)(THREADS * rounds) || atomic_load(&failed);
        char *text = scrape(c);
        exposition e;
        parse(text, &e);
        double acq = value_of(&e, "credisson_acquisitions_total");
        double holds = find(&e, "credisson_lock_hold_seconds")->count;
        cr_assert_geq(acq, last_acq, "acquisitions_total went back");
        cr_assert_geq(holds, last_holds, "lock_hold_seconds_count went back");
        last_acq = acq;
        last_holds = holds;
        free(text);
        scrapes++;
        if (finished)
            break;
        cr_assert_lt(crdt_now_ms(), deadline, "the lock loops did not finish in 60 s");
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    cr_assert(!atomic_load(&failed), "a lock loop failed");
    cr_assert_eq(last_holds, THREADS * rounds);
    cr_assert_gt(scrapes, 1);
    crd_client_free(c);
}

/* ---- examples/metrics_http.c, scraped over HTTP ------------------------------------------ */

#ifdef CRD_EXAMPLE_METRICS_HTTP
/* One HTTP request to 127.0.0.1:port; the whole response (the server closes) into buf. */
static size_t http(int port, const char *request, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0, "connect: %s", strerror(errno));
    cr_assert_eq(send(fd, request, strlen(request), MSG_NOSIGNAL), (ssize_t)strlen(request));
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        cr_assert_geq(n, 0, "recv: %s", strerror(errno));
        if (n == 0)
            break;
        got += (size_t)n;
        cr_assert_lt(got, cap - 1, "response too large");
    }
    buf[got] = '\0';
    close(fd);
    return got;
}

Test(openmetrics, the_metrics_http_example_serves_valid_text_to_a_scraper, .timeout = 60)
{
    int out[2];
    cr_assert_eq(pipe(out), 0);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", crdt_port());
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execl(CRD_EXAMPLE_METRICS_HTTP, CRD_EXAMPLE_METRICS_HTTP, url, "0", "3", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    /* Its first line names the port it bound (port 0: any free one). */
    char line[256];
    size_t n = 0;
    int64_t deadline = crdt_now_ms() + 10000;
    while (n == 0 || line[n - 1] != '\n') {
        struct pollfd p = {out[0], POLLIN, 0};
        int64_t left = deadline - crdt_now_ms();
        cr_assert_gt(left, 0, "the example printed no URL in 10 s");
        if (poll(&p, 1, (int)left) <= 0)
            continue;
        ssize_t r = read(out[0], line + n, 1);
        cr_assert_eq(r, 1, "the example ended before printing its URL");
        n++;
        cr_assert_lt(n, sizeof line - 1);
    }
    line[n] = '\0';
    int port = 0;
    cr_assert_eq(sscanf(line, "serving http://127.0.0.1:%d/metrics", &port), 1, "%s", line);

    static char resp[65536];
    http(port, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", resp, sizeof resp);
    cr_assert(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "%.200s", resp);
    cr_assert_not_null(strstr(resp, "\r\nContent-Type: text/plain; version=0.0.4"));
    char *body = strstr(resp, "\r\n\r\n");
    cr_assert_not_null(body);
    body += 4;
    long len = 0;
    const char *cl = strstr(resp, "\r\nContent-Length: ");
    cr_assert(cl != NULL && sscanf(cl, "\r\nContent-Length: %ld", &len) == 1);
    cr_assert_eq((size_t)len, strlen(body));
    exposition e;
    parse(body, &e);
    cr_assert_not_null(find(&e, "credisson_lock_hold_seconds"));
    http(port, "GET / HTTP/1.1\r\n\r\n", resp, sizeof resp);
    cr_assert(strncmp(resp, "HTTP/1.1 404 ", 13) == 0, "%.200s", resp);
    http(port, "POST /metrics HTTP/1.1\r\n\r\n", resp, sizeof resp);
    cr_assert(strncmp(resp, "HTTP/1.1 405 ", 13) == 0, "%.200s", resp);
    /* Three requests served: it exits by itself, cleanly. */
    cr_assert_eq(crdt_wait_child(pid, 10000), 0, "the example did not exit 0 after 3 requests");
    close(out[0]);
}
#endif
