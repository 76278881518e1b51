/*
 * list.c -- `credisson list [--json|--openmetrics] [PATTERN]`: the locks held right now
 * (crd_scan_* over every primary, SCAN step by SCAN step), each with its kind, TTL, holders
 * and counts, how long each has held and the process behind it (its identity record), and
 * the waiters; permit-expirable semaphores with permits out. Safe on a large keyspace: a
 * time bound (--timeout) after which the list is marked incomplete, and a progress line
 * on stderr every second once it takes longer than one. --openmetrics writes every
 * Redisson object's gauges in the Prometheus text format instead (metrics.c).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage_list(FILE *f)
{
    fprintf(f, "usage: credisson [GLOBAL OPTIONS] list [--json|--openmetrics] [--timeout MS]\n"
               "                 [--count N] [--max-names N] [PATTERN]\n"
               "\n"
               "List the locks held right now: every key matching PATTERN (a SCAN glob, default\n"
               "'*', on every primary of a cluster) that is a lock of any kind, with its holders,\n"
               "their hold counts, how long each has held it and the process behind it (from\n"
               "its client's identity record), its TTL and its waiters.\n"
               "\n"
               "Options:\n"
               "  --json         one JSON object instead of lines of text\n"
               "  --openmetrics  every Redisson object matching PATTERN (locks held or not,\n"
               "                 semaphores, latches) as Prometheus gauges, in the text format\n"
               "                 (for node_exporter's textfile collector; see 'credisson\n"
               "                 exporter --help' for the metric names)\n"
               "  --max-names N  --openmetrics: at most N objects (default 10000); when reached\n"
               "                 the output says so (credisson_scrape_truncated 1)\n"
               "  --timeout MS   stop scanning after MS ms (default 10000); the list is then\n"
               "                 incomplete, which a line on stderr and \"complete\": false say\n"
               "  --count N      keys SCAN looks at per step (default 1000)\n"
               "  -h, --help     this help\n"
               "\n"
               "Kinds: rlock (a reentrant lock), fair (a reentrant lock with waiters queued in\n"
               "its fair queue; the queue's length is shown), rwlock (a read-write lock; its mode\n"
               "is shown), fenced (a lock with a fencing token counter). A fair lock without\n"
               "waiters looks like, and is listed as, rlock. permit_semaphore: a permit-expirable\n"
               "semaphore (Redisson RPermitExpirableSemaphore, credisson run --permits) with\n"
               "permits out, each with its remaining lease; PATTERN matches the semaphore's NAME.\n"
               "A semaphore or latch has no holders: see 'credisson status NAME'.\n"
               "\n"
               "Text output, one line per lock:\n"
               "  NAME kind=KIND ttl_ms=T [mode=read|write] [queue=Q] holders=K\n"
               "       holder=OWNER count=C held=AGE by=WHO ...   (K times, on the same line)\n"
               "       waiters=W\n"
               "  NAME kind=permit_semaphore available=A permits_out=K\n"
               "       permit=ID remaining_ms=R|none ...   (K times, on the same line)\n"
               "  (AGE: \"12 min 3 s\", or ? when not known; WHO: \"host pid PID program\", or\n"
               "  \"client UUID (no identity record)\"; values with spaces are in double quotes)\n"
               "JSON output:\n"
               "  {\"locks\": [{\"name\": string, \"kind\": string, \"ttl_ms\": integer,\n"
               "              \"mode\": string (rwlock), \"queue\": integer (fair),\n"
               "              \"holders\": [{\"owner\", \"count\", \"writer\", \"ttl_ms\",\n"
               "                           \"since_ms\", \"held_ms\", \"watching\", \"who\"}]\n"
               "                           (as in 'credisson status --help'),\n"
               "              \"waiters\": integer, \"subscribers\": integer}\n"
               "            | {\"name\", \"kind\": \"permit_semaphore\", \"available\": integer,\n"
               "               \"permits\": [{\"id\": string, \"remaining_ms\": integer|null}]}],\n"
               "   \"scanned\": integer (keys looked at), \"complete\": boolean}\n"
               "After more than a second, a progress line goes to stderr every second.\n"
               "\n"
               "Exit codes: 0 (also when nothing is locked, or the list is incomplete), 64 usage\n"
               "error, 69 Redis unreachable or refusing.\n");
}

/* What list is doing: its options and its counts. */
typedef struct lister {
    bool json, openmetrics;
    int64_t timeout_ms, count, max_names;
    const char *pattern;
    long long found;
} lister;

static void print_lock(lister *l, const crd_state *s)
{
    if (l->json) {
        fputs(l->found ? ",{\"name\":" : "{\"name\":", stdout);
        cli_json_string(s->name, s->name_len);
        printf(",\"kind\":\"%s\",\"ttl_ms\":%lld", s->kind_name, (long long)s->ttl_ms);
        if (s->mode[0] != '\0') {
            fputs(",\"mode\":", stdout);
            cli_json_string(s->mode, strlen(s->mode));
        }
        if (s->nqueue > 0)
            printf(",\"queue\":%zu", s->nqueue);
        cli_json_holders(s);
        printf(",\"waiters\":%lld,\"subscribers\":%lld}", (long long)s->waiters,
               (long long)s->subscribers);
    } else {
        printf("%s kind=%s ttl_ms=%lld", s->name, s->kind_name, (long long)s->ttl_ms);
        if (s->mode[0] != '\0')
            printf(" mode=%s", s->mode);
        if (s->nqueue > 0)
            printf(" queue=%zu", s->nqueue);
        printf(" holders=%zu", s->nholders);
        char age[64], who[600];
        for (size_t i = 0; i < s->nholders; i++) {
            const crd_holder *h = &s->holders[i];
            printf(" holder=%s%s count=%lld held=", h->owner, h->writer ? ":write" : "",
                   (long long)h->count);
            cli_text_value(cli_age(h->held_ms, age, sizeof age));
            fputs(" by=", stdout);
            cli_text_value(cli_who(&h->who, who, sizeof who));
        }
        printf(" waiters=%lld\n", (long long)s->waiters);
    }
    l->found++;
}

static void print_permit_semaphore(lister *l, const crd_state *s)
{
    if (l->json) {
        fputs(l->found ? ",{\"name\":" : "{\"name\":", stdout);
        cli_json_string(s->name, s->name_len);
        printf(",\"kind\":\"permit_semaphore\",\"available\":%lld,\"permits\":[",
               (long long)s->available);
    } else {
        printf("%s kind=permit_semaphore available=%lld permits_out=%zu", s->name,
               (long long)s->available, s->npermits);
    }
    for (size_t i = 0; i < s->npermits_listed; i++) {
        const crd_permit *p = &s->permits[i];
        if (l->json && p->deadline_ms >= 0)
            printf("%s{\"id\":\"%s\",\"remaining_ms\":%lld}", i ? "," : "", p->id,
                   (long long)p->remaining_ms);
        else if (l->json)
            printf("%s{\"id\":\"%s\",\"remaining_ms\":null}", i ? "," : "", p->id);
        else if (p->deadline_ms >= 0)
            printf(" permit=%s remaining_ms=%lld", p->id, (long long)p->remaining_ms);
        else
            printf(" permit=%s remaining_ms=none", p->id);
    }
    fputs(l->json ? "]}" : "\n", stdout);
    l->found++;
}

/* Parses argv into *l. Returns 0, -1 after --help, or the usage error's exit code. */
static int parse_list_args(int argc, char **argv, lister *l)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage_list(stdout);
            return -1;
        } else if (strcmp(a, "--json") == 0) {
            l->json = true;
        } else if (strcmp(a, "--openmetrics") == 0) {
            l->openmetrics = true;
        } else if (cli_take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !cli_parse_ms(v, &l->timeout_ms))
                return cli_usage_error("list",
                                       "--timeout needs a non-negative number of milliseconds");
        } else if (cli_take_opt(argc, argv, &i, "--count", &v)) {
            if (v == NULL || !cli_parse_ms(v, &l->count) || l->count == 0 || l->count > 100000)
                return cli_usage_error("list", "--count needs a number of keys from 1 to 100000");
        } else if (cli_take_opt(argc, argv, &i, "--max-names", &v)) {
            if (v == NULL || !cli_parse_ms(v, &l->max_names) || l->max_names == 0)
                return cli_usage_error("list", "--max-names needs a positive number");
        } else {
            int rc = cli_take_name_arg("list", argc, argv, &i, &l->pattern);
            if (rc != 0)
                return rc;
        }
    }
    if (l->json && l->openmetrics)
        return cli_usage_error("list", "--json and --openmetrics exclude each other");
    if (l->pattern == NULL)
        l->pattern = "*";
    return 0;
}

int cmd_list(const global_opts *g, int argc, char **argv)
{
    lister l = {.timeout_ms = 10000, .count = 1000, .max_names = 10000};
    int rc = parse_list_args(argc, argv, &l);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    crd_client *client;
    if ((rc = cli_make_client(g, "list", NULL, &client)) != 0)
        return rc;
    if (l.openmetrics) {
        const char *patterns[1] = {l.pattern};
        char *text = NULL;
        size_t len = 0;
        rc = cli_openmetrics(client, "list", patterns, 1, (size_t)l.count, (size_t)l.max_names,
                             l.timeout_ms, &text, &len);
        if (rc == 0 && fwrite(text, 1, len, stdout) != len)
            rc = EXIT_OSERR;
        free(text);
        crd_client_free(client);
        return rc == 0 && fflush(stdout) != 0 ? EXIT_OSERR : rc;
    }
    crd_scan *scan = NULL;
    crd_status st = crd_scan_new(client, l.pattern, (size_t)l.count,
                                 CRD_SCAN_HELD_ONLY | CRD_STATE_WAITERS | CRD_STATE_CLIENTS, &scan);
    if (st != CRD_OK) {
        cli_report("list", "cannot scan", st, client);
        crd_client_free(client);
        return cli_exit_for_status(st);
    }
    int64_t started = cli_now_ms(), deadline = started + l.timeout_ms, next_progress = started + 1000;
    if (l.json)
        fputs("{\"locks\":[", stdout);
    bool complete = false;
    for (;;) {
        int64_t now = cli_now_ms();
        if (now >= deadline && now > started)
            break;
        int64_t slice = deadline - now < 1000 ? deadline - now : 1000;
        crd_state *s = NULL;
        st = crd_scan_next(scan, slice > 0 ? slice : 1, &s);
        if (st == CRD_TIMEOUT) {
            uint64_t scanned;
            crd_scan_progress(scan, &scanned, NULL);
            if (cli_now_ms() >= next_progress && cli_now_ms() < deadline) {
                next_progress = cli_now_ms() + 1000;
                cli_error("list", "%llu keys scanned, %lld locks so far (%lld ms)",
                          (unsigned long long)scanned, l.found,
                          (long long)(cli_now_ms() - started));
            }
            if (l.timeout_ms == 0)
                break;
            continue;
        }
        if (st != CRD_OK) {
            cli_report("list", "scanning failed", st, client);
            rc = cli_exit_for_status(st);
            break;
        }
        if (s == NULL) {
            complete = true;
            break;
        }
        if (s->kind == CRD_KIND_PERMIT_SEMAPHORE)
            print_permit_semaphore(&l, s);
        else
            print_lock(&l, s);
        crd_state_free(s);
        if (l.timeout_ms == 0)
            break;
    }
    uint64_t scanned = 0;
    crd_scan_progress(scan, &scanned, &complete);
    if (rc == 0 && l.json)
        printf("],\"scanned\":%llu,\"complete\":%s}\n", (unsigned long long)scanned,
               complete ? "true" : "false");
    if (rc == 0 && !complete)
        cli_error("list", "stopped after %lld ms with %llu keys scanned: the list is incomplete",
                  (long long)l.timeout_ms, (unsigned long long)scanned);
    crd_scan_free(scan);
    crd_client_free(client);
    if (rc == 0 && fflush(stdout) != 0)
        rc = EXIT_OSERR;
    return rc;
}
