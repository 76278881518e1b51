/*
 * watch.c -- `credisson watch NAME`: hold and release events of lock NAME, and the
 * available permits of a semaphore or the count of a latch NAME, as they happen, each
 * lock event with the process behind it: crd_watch_next() (src/watch.c has how), printed
 * one line (or one JSON object) per event. Main thread only.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage_watch(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] watch [--json] [--count N] [--timeout MS]\n"
            "                 [--interval MS] NAME\n"
            "\n"
            "Print hold and release events of lock NAME (any kind: lock, fair lock, read-write\n"
            "lock), or the changes of semaphore or latch NAME, as they happen. Subscribes to\n"
            "redisson_lock__channel:{NAME}, redisson_rwlock:{NAME}, the fair waiters' channels\n"
            "redisson_lock__channel:{NAME}:*, redisson_sc:{NAME},\n"
            "redisson_countdownlatch__channel__{NAME} and __keyspace@DB__:NAME, and re-reads\n"
            "NAME (HGETALL, PTTL, GET) on every message,\n"
            "when its TTL runs out (an expiry publishes nothing), and every --interval. A\n"
            "release that publishes (an unlock of a lock or read-write lock, a fair unlock\n"
            "with a waiter queued, a force-unlock) is printed within milliseconds. An acquire\n"
            "publishes nothing; it shows at once all the same through client tracking (CLIENT\n"
            "TRACKING on REDIRECT <watch> BCAST PREFIX NAME, Redis >= 6, no configuration\n"
            "needed) or keyspace notifications (notify-keyspace-events Kghx). When the server\n"
            "offers neither (older Redis, or an ACL user without CLIENT), watch says so at\n"
            "start: it then sees an acquire only at the next read, and a hold shorter than\n"
            "--interval can be missed.\n"
            "\n"
            "Options:\n"
            "  --json         one JSON object per line instead of text\n"
            "  --count N      exit 0 after N events\n"
            "  --timeout MS   exit 0 after MS milliseconds\n"
            "  --interval MS  longest time between two reads (default 250, at least 10)\n"
            "  -h, --help     this help\n"
            "\n"
            "Events (text: \"HH:MM:SS.mmm EVENT NAME owner=OWNER ...\"):\n"
            "  held     a holder found at start (printed once; not counted by --count)\n"
            "  acquire  a new holder: count=C ttl_ms=T [mode=read|write]\n"
            "  count    a holder's hold count changed (reentry or partial release)\n"
            "  release  a holder is gone: cause=unlock (a message was published), expired\n"
            "           (its TTL ran out) or removed (deleted without a message)\n"
            "  Every lock event ends with by=WHO: the process behind the owner, from its\n"
            "  client's identity record (\"host pid PID program\"), or \"client UUID (no\n"
            "  identity record)\" for a Java holder or one without a record.\n"
            "Semaphores and latches (text: \"HH:MM:SS.mmm EVENT NAME ...\"):\n"
            "  found    at start, NAME holds a number: kind=semaphore|permit_semaphore\n"
            "           available=A, or kind=latch count=C (not counted by --count)\n"
            "  permits  the available permits changed: available=A (0 once NAME is gone)\n"
            "  latch    the latch's count changed: count=C (0 once it is gone: opened or\n"
            "           deleted)\n"
            "  A latch is told from a semaphore as status tells it: at start by a waiter on\n"
            "  its channel, later by a message on it; a latch nobody awaits shows as a\n"
            "  semaphore until its channel carries a message.\n"
            "JSON: {\"time_ms\": epoch ms, \"event\": string, \"name\": string,\n"
            "       \"owner\": string, \"count\": integer, \"ttl_ms\": integer (not on\n"
            "       release), \"mode\": string (rwlock only), \"cause\": string (release\n"
            "       only), \"who\": WHO (as in 'credisson status --help')}; found, permits\n"
            "       and latch: {\"time_ms\", \"event\", \"name\",\n"
            "       \"kind\": string, \"available\": integer (semaphores) or \"count\":\n"
            "       integer (latch)}\n"
            "\n"
            "With a redis-sentinel:// URL, a lost connection (a failover) is followed: watch\n"
            "asks the sentinels again, attaches to the new primary (saying so on stderr) and\n"
            "re-reads the lock; it gives up after --timeout, or 60 s without one.\n"
            "\n"
            "Exit codes: 0 after --count events or --timeout, 64 usage error, 69 Redis\n"
            "unreachable, refusing, or the connection was lost.\n");
}

static const char *event_name(crd_watch_kind k)
{
    switch (k) {
    case CRD_WATCH_HELD:
        return "held";
    case CRD_WATCH_ACQUIRE:
        return "acquire";
    case CRD_WATCH_COUNT:
        return "count";
    case CRD_WATCH_RELEASE:
        return "release";
    case CRD_WATCH_FOUND:
        return "found";
    case CRD_WATCH_PERMITS:
        return "permits";
    case CRD_WATCH_LATCH:
        return "latch";
    case CRD_WATCH_NOTICE:
        break;
    }
    return "notice";
}

static void print_time(long long t)
{
    time_t secs = (time_t)(t / 1000);
    struct tm tm;
    localtime_r(&secs, &tm);
    printf("%02d:%02d:%02d.%03d ", tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(t % 1000));
}

/* One event: text "HH:MM:SS.mmm EVENT NAME ..." or one JSON object. */
static void print_event(bool json, const crd_watch_event *e)
{
    const char *ev = event_name(e->kind);
    bool sync = e->kind == CRD_WATCH_FOUND || e->kind == CRD_WATCH_PERMITS ||
                e->kind == CRD_WATCH_LATCH;
    bool latch = e->object == CRD_KIND_LATCH;
    long long value = (long long)(latch ? e->count : e->available);
    if (json) {
        printf("{\"time_ms\":%lld,\"event\":\"%s\",\"name\":", (long long)e->time_ms, ev);
        cli_json_string(e->name, e->name_len);
        if (sync) {
            printf(",\"kind\":\"%s\",\"%s\":%lld}\n", crd_object_kind_name(e->object),
                   latch ? "count" : "available", value);
            return;
        }
        fputs(",\"owner\":", stdout);
        cli_json_string(e->owner, strlen(e->owner));
        if (e->kind == CRD_WATCH_RELEASE) {
            printf(",\"cause\":\"%s\"", e->cause);
        } else {
            printf(",\"count\":%lld,\"ttl_ms\":%lld", (long long)e->count, (long long)e->ttl_ms);
            if (e->mode[0] != '\0') {
                fputs(",\"mode\":", stdout);
                cli_json_string(e->mode, strlen(e->mode));
            }
        }
        fputs(",\"who\":", stdout);
        cli_json_who(&e->who);
        fputs("}\n", stdout);
        return;
    }
    print_time((long long)e->time_ms);
    printf("%s %s", ev, e->name);
    if (sync) {
        if (e->kind == CRD_WATCH_FOUND)
            printf(" kind=%s", crd_object_kind_name(e->object));
        printf(" %s=%lld\n", latch ? "count" : "available", value);
        return;
    }
    printf(" owner=%s", e->owner);
    if (e->kind == CRD_WATCH_RELEASE) {
        printf(" cause=%s", e->cause);
    } else {
        printf(" count=%lld ttl_ms=%lld", (long long)e->count, (long long)e->ttl_ms);
        if (e->mode[0] != '\0')
            printf(" mode=%s", e->mode);
    }
    char who[600];
    fputs(" by=", stdout);
    cli_text_value(cli_who(&e->who, who, sizeof who));
    putchar('\n');
}

static bool parse_count_arg(const char *v, long long *out)
{
    int64_t x;
    if (!cli_parse_ms(v, &x) || x == 0)
        return false;
    *out = (long long)x;
    return true;
}

typedef struct watch_opts {
    bool json;
    long long max_events; /* 0: no limit */
    int64_t timeout_ms, interval_ms;
    const char *name;
} watch_opts;

/* Parses argv into *w. Returns 0, -1 after --help, or the usage error's exit code. */
static int parse_watch_args(int argc, char **argv, watch_opts *w)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (cli_is_help(a)) {
            usage_watch(stdout);
            return -1;
        } else if (strcmp(a, "--json") == 0) {
            w->json = true;
        } else if (cli_take_opt(argc, argv, &i, "--count", &v)) {
            if (v == NULL || !parse_count_arg(v, &w->max_events))
                return cli_usage_error("watch", "--count needs a positive number of events");
        } else if (cli_take_opt(argc, argv, &i, "--timeout", &v)) {
            if (v == NULL || !cli_parse_ms(v, &w->timeout_ms))
                return cli_usage_error("watch",
                                       "--timeout needs a non-negative number of milliseconds");
        } else if (cli_take_opt(argc, argv, &i, "--interval", &v)) {
            if (v == NULL || !cli_parse_ms(v, &w->interval_ms) || w->interval_ms < 10)
                return cli_usage_error("watch", "--interval needs a number of milliseconds >= 10");
        } else {
            int rc = cli_take_name_arg("watch", argc, argv, &i, &w->name);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int cmd_watch(const global_opts *g, int argc, char **argv)
{
    watch_opts o = {.timeout_ms = -1, .interval_ms = 250};
    int rc = parse_watch_args(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    rc = cli_check_name_and_url("watch", g, o.name);
    if (rc != 0 || o.name == NULL)
        return rc != 0 ? rc : EXIT_USAGE;
    int64_t deadline = o.timeout_ms >= 0 ? cli_now_ms() + o.timeout_ms : INT64_MAX;
    crd_client *client;
    if ((rc = cli_make_client(g, "watch", NULL, &client)) != 0)
        return rc;
    crd_watch *w = NULL;
    crd_status st = crd_watch_new(client, o.name, strlen(o.name), o.interval_ms, &w);
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what, "cannot watch '%.200s'", o.name);
        cli_report("watch", what, st, client);
        crd_client_free(client);
        return cli_exit_for_status(st);
    }
    long long events = 0;
    while (rc == 0 && (o.max_events == 0 || events < o.max_events)) {
        int64_t left = deadline == INT64_MAX ? -1 : deadline - cli_now_ms();
        if (left == 0 || left < -1)
            break;
        const crd_watch_event *e = NULL;
        st = crd_watch_next(w, left, &e);
        if (st == CRD_TIMEOUT)
            break;
        if (st != CRD_OK) {
            cli_report("watch", "connection lost", st, client);
            rc = cli_exit_for_status(st);
            break;
        }
        if (e->kind == CRD_WATCH_NOTICE) {
            cli_error("watch", "%s", e->detail);
            continue;
        }
        print_event(o.json, e);
        if (e->kind != CRD_WATCH_HELD && e->kind != CRD_WATCH_FOUND)
            events++;
        if (fflush(stdout) != 0)
            rc = EXIT_OSERR;
    }
    crd_watch_free(w);
    crd_client_free(client);
    return rc;
}
