/*
 * metrics.c -- per-object gauges for Prometheus, for any fleet (it reads Redis, not a
 * client, so Java-only fleets too): `credisson list --openmetrics [PATTERN]` writes them
 * once (node_exporter's textfile collector), `credisson exporter --listen ADDR
 * [PATTERN]...` serves them at /metrics (libmicrohttpd; one scrape at a time, each one
 * scan of the patterns through crd_scan_*). Labels are bounded: at most --max-names
 * objects per scrape (the output says when the cap was reached) and at most 16 holders
 * per object.
 */
#include "cli.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define HOLDERS_MAX 16

static void usage_exporter(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] exporter [--listen ADDR] [--max-names N]\n"
            "                 [--count N] [--timeout MS] [PATTERN]...\n"
            "\n"
            "Serve the state of every Redisson object matching the PATTERNs (SCAN globs,\n"
            "default '*') as Prometheus gauges at http://ADDR/metrics: each scrape scans Redis\n"
            "once (every primary of a cluster), so it works for any fleet, Java-only too.\n"
            "Runs until SIGINT or SIGTERM.\n"
            "\n"
            "Options:\n"
            "  --listen ADDR    host:port to listen on (default 127.0.0.1:9464; port 0 picks\n"
            "                   a free one; the address is printed on stderr at start)\n"
            "  --max-names N    at most N objects per scrape (default 10000): label\n"
            "                   cardinality is bounded; when reached, the scrape says so\n"
            "                   (credisson_scrape_truncated 1 and a comment line)\n"
            "  --count N        keys SCAN looks at per step (default 1000)\n"
            "  --timeout MS     a scrape stops after MS ms (default 10000):\n"
            "                   credisson_scrape_complete 0\n"
            "  -h, --help       this help\n"
            "\n"
            "Metrics (gauges; labels name and kind on every object's, as `status` names the\n"
            "kind; a holder's labels owner, client_id, host, pid, program and label come from\n"
            "its identity record, empty for a Java holder):\n"
            "  credisson_lock_held                  1 held, 0 not (locks)\n"
            "  credisson_lock_holders               owners holding it\n"
            "  credisson_lock_holder_info           1 per holder, with the holder's labels\n"
            "  credisson_lock_hold_age_seconds      per holder, how long it has held (known\n"
            "                                       for credisson holders after 250 ms)\n"
            "  credisson_lock_queue_length          fair locks: waiters queued\n"
            "  credisson_object_waiters             waiters (see 'credisson status --help')\n"
            "  credisson_object_ttl_seconds         the key's TTL (keys with a TTL)\n"
            "  credisson_semaphore_permits_available   semaphores\n"
            "  credisson_semaphore_permits_out      permit-expirable semaphores\n"
            "  credisson_latch_count                count-down latches\n"
            "  credisson_scrape_objects, credisson_scrape_truncated,\n"
            "  credisson_scrape_complete, credisson_scrape_duration_seconds\n"
            "\n"
            "Exit codes: 0 after SIGINT/SIGTERM, 64 usage error, 69 Redis unreachable, 71 the\n"
            "address cannot be listened on.\n");
}

/* ---- the text format -------------------------------------------------------------------- */

/* A label value: \\, " and newline escaped; invalid UTF-8 as U+FFFD. */
static void label_value(FILE *f, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        if (u[i] == '\\' || u[i] == '"') {
            fputc('\\', f);
            fputc(u[i++], f);
        } else if (u[i] == '\n') {
            fputs("\\n", f);
            i++;
        } else {
            i += cli_put_utf8(f, u + i, len - i, "\xef\xbf\xbd"); /* U+FFFD itself */
        }
    }
}

static void obj_labels(FILE *f, const crd_state *s)
{
    fputs("{name=\"", f);
    label_value(f, s->name, s->name_len);
    fprintf(f, "\",kind=\"%s\"", s->kind_name);
}

static void holder_labels(FILE *f, const crd_state *s, const crd_holder *h)
{
    obj_labels(f, s);
    const crd_identity *w = &h->who;
    const struct {
        const char *k, *v;
    } l[] = {{"owner", h->owner}, {"client_id", w->client_id}, {"host", w->host},
             {"program", w->program}, {"label", w->label}};
    for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) {
        fprintf(f, ",%s=\"", l[i].k);
        label_value(f, l[i].v, strlen(l[i].v));
        fputc('"', f);
    }
    if (w->known)
        fprintf(f, ",pid=\"%lld\"", (long long)w->pid);
    else
        fputs(",pid=\"\"", f);
    fputc('}', f);
}

/* ms as seconds, without printf's %f (no locale). */
static void seconds(FILE *f, int64_t ms)
{
    if (ms < 0) {
        fputc('-', f);
        ms = -ms;
    }
    fprintf(f, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
}

static bool is_lock(const crd_state *s)
{
    return s->kind == CRD_KIND_LOCK || s->kind == CRD_KIND_FAIR_LOCK ||
           s->kind == CRD_KIND_READ_WRITE_LOCK || s->kind == CRD_KIND_FENCED_LOCK ||
           s->kind == CRD_KIND_GROUP_LOCK;
}

/* The sample of gauge name for object s: name{its labels} value. */
static void obj_sample(FILE *f, const char *name, const crd_state *s, long long value)
{
    fputs(name, f);
    obj_labels(f, s);
    fprintf(f, "} %lld\n", value);
}

static void family(FILE *f, const char *name, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

static void write_text(FILE *f, crd_state **v, size_t n, bool truncated, bool complete,
                       size_t max_names, int64_t took_ms)
{
    family(f, "credisson_lock_held", "Whether the lock is held (1) or not (0).");
    for (size_t i = 0; i < n; i++)
        if (is_lock(v[i]))
            obj_sample(f, "credisson_lock_held", v[i], v[i]->held ? 1 : 0);
    family(f, "credisson_lock_holders", "Owners holding the lock.");
    for (size_t i = 0; i < n; i++)
        if (is_lock(v[i]))
            obj_sample(f, "credisson_lock_holders", v[i], v[i]->nholders);
    family(f, "credisson_lock_holder_info",
           "One per holder (at most 16 per lock), labelled with the process behind it.");
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < v[i]->nholders && k < HOLDERS_MAX; k++) {
            fputs("credisson_lock_holder_info", f);
            holder_labels(f, v[i], &v[i]->holders[k]);
            fputs(" 1\n", f);
        }
    family(f, "credisson_lock_hold_age_seconds",
           "How long the holder has held the lock (credisson holders, after 250 ms).");
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < v[i]->nholders && k < HOLDERS_MAX; k++)
            if (v[i]->holders[k].held_ms >= 0) {
                fputs("credisson_lock_hold_age_seconds", f);
                holder_labels(f, v[i], &v[i]->holders[k]);
                fputc(' ', f);
                seconds(f, v[i]->holders[k].held_ms);
                fputc('\n', f);
            }
    family(f, "credisson_lock_queue_length", "Waiters in a fair lock's queue.");
    for (size_t i = 0; i < n; i++)
        if (is_lock(v[i]))
            obj_sample(f, "credisson_lock_queue_length", v[i], v[i]->nqueue);
    family(f, "credisson_object_waiters",
           "Waiters: a fair lock's queue, else the channel's subscribers less the holders' "
           "and watches' own.");
    for (size_t i = 0; i < n; i++)
        obj_sample(f, "credisson_object_waiters", v[i], v[i]->waiters);
    family(f, "credisson_object_ttl_seconds", "The key's remaining TTL (keys with a TTL).");
    for (size_t i = 0; i < n; i++)
        if (v[i]->ttl_ms >= 0) {
            fputs("credisson_object_ttl_seconds", f);
            obj_labels(f, v[i]);
            fputs("} ", f);
            seconds(f, v[i]->ttl_ms);
            fputc('\n', f);
        }
    family(f, "credisson_semaphore_permits_available", "A semaphore's available permits.");
    for (size_t i = 0; i < n; i++)
        if (v[i]->kind == CRD_KIND_SEMAPHORE || v[i]->kind == CRD_KIND_PERMIT_SEMAPHORE)
            obj_sample(f, "credisson_semaphore_permits_available", v[i], v[i]->available);
    family(f, "credisson_semaphore_permits_out", "A permit-expirable semaphore's permits out.");
    for (size_t i = 0; i < n; i++)
        if (v[i]->kind == CRD_KIND_PERMIT_SEMAPHORE)
            obj_sample(f, "credisson_semaphore_permits_out", v[i], v[i]->npermits);
    family(f, "credisson_latch_count", "A count-down latch's count.");
    for (size_t i = 0; i < n; i++)
        if (v[i]->kind == CRD_KIND_LATCH)
            obj_sample(f, "credisson_latch_count", v[i], v[i]->count);
    family(f, "credisson_scrape_objects", "Objects in this scrape.");
    fprintf(f, "credisson_scrape_objects %zu\n", n);
    family(f, "credisson_scrape_truncated",
           "1 when the scrape stopped at its cap on names (--max-names).");
    fprintf(f, "credisson_scrape_truncated %d\n", truncated ? 1 : 0);
    if (truncated)
        fprintf(f, "# credisson: stopped at --max-names %zu objects; more match\n", max_names);
    family(f, "credisson_scrape_complete", "1 when every node's keyspace was scanned in time.");
    fprintf(f, "credisson_scrape_complete %d\n", complete ? 1 : 0);
    family(f, "credisson_scrape_duration_seconds", "How long the scrape took.");
    fputs("credisson_scrape_duration_seconds ", f);
    seconds(f, took_ms);
    fputc('\n', f);
}

static int by_name(const void *x, const void *y)
{
    const crd_state *a = *(crd_state *const *)x, *b = *(crd_state *const *)y;
    size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    int d = memcmp(a->name, b->name, n);
    return d != 0 ? d : (a->name_len > b->name_len) - (a->name_len < b->name_len);
}

int cli_openmetrics(crd_client *client, const char *cmd, const char *const *patterns,
                    size_t npatterns, size_t count, size_t max_names, int64_t timeout_ms,
                    char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    int64_t started = cli_now_ms(), deadline = started + timeout_ms;
    crd_state **v = NULL;
    size_t n = 0, cap = 0;
    bool truncated = false, complete = true;
    int rc = 0;
    for (size_t p = 0; p < npatterns && rc == 0 && !truncated; p++) {
        crd_scan *scan = NULL;
        crd_status st = crd_scan_new(client, patterns[p], count,
                                     CRD_SCAN_SYNCS | CRD_STATE_WAITERS | CRD_STATE_CLIENTS, &scan);
        while (st == CRD_OK) {
            int64_t left = deadline - cli_now_ms();
            if (left <= 0) {
                complete = false;
                break;
            }
            crd_state *s = NULL;
            st = crd_scan_next(scan, left, &s);
            if (st == CRD_TIMEOUT) {
                st = CRD_OK;
                complete = false;
                break;
            }
            if (st != CRD_OK)
                break;
            if (s == NULL)
                break; /* this pattern is done */
            if (n == max_names) {
                crd_state_free(s);
                truncated = true;
                break;
            }
            if (n == cap || v == NULL) {
                cap = cap ? cap * 2 : 256;
                crd_state **q = realloc(v, cap * sizeof *q);
                if (q == NULL) {
                    crd_state_free(s);
                    st = CRD_NO_MEMORY;
                    break;
                }
                v = q;
            }
            v[n++] = s;
        }
        if (st != CRD_OK) {
            cli_report(cmd, "scanning failed", st, client);
            rc = cli_exit_for_status(st);
        }
        crd_scan_free(scan);
    }
    /* Patterns may overlap: each object once, in name order. */
    if (n > 1)
        qsort(v, n, sizeof *v, by_name);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o > 0 && by_name(&v[o - 1], &v[i]) == 0) {
            crd_state_free(v[i]);
            continue;
        }
        v[o++] = v[i];
    }
    n = o;
    if (rc == 0) {
        FILE *f = open_memstream(text, len);
        if (f == NULL) {
            cli_error(cmd, "out of memory");
            rc = EXIT_OSERR;
        } else {
            write_text(f, v, n, truncated, complete, max_names, cli_now_ms() - started);
            if (fclose(f) != 0) {
                cli_error(cmd, "out of memory");
                rc = EXIT_OSERR;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        crd_state_free(v[i]);
    free(v);
    return rc;
}

/* ---- the exporter ------------------------------------------------------------------------ */

typedef struct exporter {
    crd_client *client;
    const char *const *patterns;
    size_t npatterns, count, max_names;
    int64_t timeout_ms;
} exporter;

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload,
                             size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    (void)upload_size;
    exporter *x = cls;
    static int first;
    if (*state == NULL) { /* the headers: answer once the request is complete */
        *state = &first;
        return MHD_YES;
    }
    char *text = NULL;
    size_t len = 0;
    unsigned code = MHD_HTTP_OK;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/metrics") != 0) {
        code = MHD_HTTP_NOT_FOUND;
    } else if (cli_openmetrics(x->client, "exporter", x->patterns, x->npatterns, x->count,
                               x->max_names, x->timeout_ms, &text, &len) != 0) {
        code = MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (code != MHD_HTTP_OK) {
        free(text);
        const char *msg = code == MHD_HTTP_NOT_FOUND ? "not found: try /metrics\n"
                          : code == MHD_HTTP_METHOD_NOT_ALLOWED ? "GET only\n"
                                                                : "Redis cannot be read now\n";
        text = strdup(msg);
        len = text != NULL ? strlen(text) : 0;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type",
                            code == MHD_HTTP_OK ? "text/plain; version=0.0.4; charset=utf-8"
                                                : "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* "host:port", ":port" or "port" into an IPv4 address. */
static bool parse_listen(const char *s, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    const char *colon = strrchr(s, ':');
    const char *port = colon != NULL ? colon + 1 : s;
    char host[64] = "127.0.0.1";
    if (colon != NULL && colon > s) {
        if ((size_t)(colon - s) >= sizeof host)
            return false;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
    } else if (colon != NULL) {
        snprintf(host, sizeof host, "0.0.0.0");
    }
    int64_t p;
    if (!cli_parse_ms(port, &p) || p > 65535 || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return false;
    sa->sin_port = htons((uint16_t)p);
    return true;
}

int cmd_exporter(const global_opts *g, int argc, char **argv)
{
    const char *listen = "127.0.0.1:9464";
    const char *patterns[64];
    size_t np = 0;
    int64_t max_names = 10000, count = 1000, timeout_ms = 10000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage_exporter(stdout);
            return 0;
        } else if (cli_take_opt(argc, argv, &i, "--listen", &v)) {
            if (v == NULL || *v == '\0')
                return cli_usage_error("exporter", "--listen needs host:port");
            listen = v;
        } else if (cli_take_opt(argc, argv, &i, "--max-names", &v)) {
            if (v == NULL || !cli_parse_ms(v, &max_names) || max_names == 0)
                return cli_usage_error("exporter", "--max-names needs a positive number");
        } else if (cli_take_opt(argc, argv, &i, "--count", &v)) {
            if (v == NULL || !cli_parse_ms(v, &count) || count == 0 || count > 100000)
                return cli_usage_error("exporter", "--count needs a number from 1 to 100000");
        } else if (cli_take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !cli_parse_ms(v, &timeout_ms) || timeout_ms == 0)
                return cli_usage_error("exporter", "--timeout needs a positive number of ms");
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error("exporter", "unknown option '%s'", a);
        } else if (np < sizeof patterns / sizeof patterns[0]) {
            patterns[np++] = a;
        } else {
            return cli_usage_error("exporter", "at most 64 patterns");
        }
    }
    if (np == 0)
        patterns[np++] = "*";
    struct sockaddr_in sa;
    if (!parse_listen(listen, &sa))
        return cli_usage_error("exporter", "--listen '%s' is not an IPv4 host:port", listen);
    exporter x = {.patterns = patterns, .npatterns = np, .count = (size_t)count,
                  .max_names = (size_t)max_names, .timeout_ms = timeout_ms};
    /* SIGINT and SIGTERM are taken by sigwait below: blocked first, so that every thread
     * started after (the client's, MHD's) has them blocked too. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    int rc = cli_make_client(g, "exporter", NULL, &x.client);
    if (rc != 0)
        return rc;
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, serve, &x,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (d == NULL) {
        cli_error("exporter", "cannot listen on %s", listen);
        crd_client_free(x.client);
        return EXIT_OSERR;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char host[64];
    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
    cli_error("exporter", "serving http://%s:%u/metrics", host,
              info != NULL ? (unsigned)info->port : (unsigned)ntohs(sa.sin_port));
    int sig = 0;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    crd_client_free(x.client);
    return 0;
}
