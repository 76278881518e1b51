/*
 * status.c -- `credisson status [--json] NAME`: the state of NAME (crd_state_read): its
 * kind, holders with their hold counts, TTLs and the process behind each (its identity
 * record: host, pid, program, how long it has held), the read-write mode and read holds,
 * the fair queue with deadlines, the waiters of kinds with no queue, the fenced token, a
 * semaphore's permits, a latch's count.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage_status(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] status [--json] NAME\n"
            "\n"
            "Show NAME as stored in Redis (one atomic snapshot), who holds it, since when, and\n"
            "who waits. The process behind a credisson holder or waiter comes from its client's\n"
            "identity record (host, pid, program; see credisson(1), IDENTITY); a Java holder\n"
            "shows its client id and, where CLIENT LIST is allowed, the named connections.\n"
            "\n"
            "Options:\n"
            "  --json       print one JSON object instead of lines of text\n"
            "  -h, --help   this help\n"
            "\n"
            "Kinds:\n"
            "  rlock   a hash of owner fields \"<client-uuid>:<id>\" -> hold count (RLock; also a\n"
            "          fair lock nobody waits for, a spin lock)\n"
            "  fair    the same with waiters in redisson_lock_queue:{NAME} (RFairLock)\n"
            "  rwlock  a hash with a \"mode\" field (RReadWriteLock); write holders' fields end\n"
            "          in \":write\"\n"
            "  fenced  a lock with the token counter redisson_lock_token:{NAME} (RFencedLock)\n"
            "  semaphore         a string holding a number: RSemaphore's available permits\n"
            "                    (a latch nobody awaits looks the same: maybe_latch)\n"
            "  permit_semaphore  the same string with the sorted set {NAME}:timeout of its\n"
            "                    permits out (RPermitExpirableSemaphore, run --permits)\n"
            "  latch             a string holding a count >= 1 with a waiter subscribed to\n"
            "                    redisson_countdownlatch__channel__{NAME} (RCountDownLatch)\n"
            "  none    the key does not exist\n"
            "  other   anything else (see \"type\")\n"
            "\n"
            "Text output, one fact per line:\n"
            "  name: NAME\n"
            "  kind: KIND\n"
            "  type: TYPE                  (other only: the Redis type)\n"
            "  mode: read|write            (rwlock only)\n"
            "  ttl_ms: N                   (PTTL: -2 absent, -1 no TTL)\n"
            "  holders: K\n"
            "  holder: OWNER count=C       (K lines, each followed by)\n"
            "    who: HOST pid PID PROGRAM, held AGE   (or: client UUID (no identity record))\n"
            "  read_hold: OWNER index=I ttl_ms=T   (rwlock: one line per read hold)\n"
            "  queue: Q                    (fair lock waiters, if any)\n"
            "  token: T                    (a fenced lock's newest token, if it has one)\n"
            "  waiter: OWNER deadline_ms=D remaining_ms=R   (Q lines, head first)\n"
            "    who: HOST pid PID PROGRAM, waiting AGE\n"
            "  waiters: W (subscribers of the channel: S)   (locks, semaphores, latches)\n"
            "  waiting: OWNER waited_ms=M  (credisson waiters of kinds with no queue,\n"
            "    who: ...                   longest first, from their identity records)\n"
            "  available: A                (semaphores: the string's value)\n"
            "  maybe_latch: yes            (semaphore: the value could be a latch's count)\n"
            "  permits_out: K              (permit_semaphore)\n"
            "  permit: ID remaining_ms=R|none   (permit_semaphore: K lines)\n"
            "  count: C                    (latch)\n"
            "\n");
    fprintf(f,
            "Waiters of a lock with no queue are the connections subscribed to its channel\n"
            "(PUBSUB NUMSUB, and SHARDNUMSUB on Redis 7), Java's included, less the\n"
            "subscriptions credisson holders and watches declare in their identity records;\n"
            "a waiter that does not subscribe (a spin lock's) is not counted.\n"
            "\n"
            "JSON output (fields may be added later, never removed):\n"
            "  {\n"
            "    \"name\": string, \"kind\": string (above), \"type\": string (Redis type),\n"
            "    \"ttl_ms\": integer (PTTL: -2 absent, -1 no TTL),\n"
            "    \"read_at_ms\": integer (epoch ms of the snapshot, this host's clock),\n"
            "    \"mode\": string (rwlock only), \"token\": integer (fenced, when it has one),\n"
            "    \"holders\": [ { \"owner\": string, \"count\": integer, \"writer\": bool,\n"
            "                   \"ttl_ms\": integer, \"since_ms\": integer|null,\n"
            "                   \"held_ms\": integer|null, \"watching\": bool, \"who\": WHO } ],\n"
            "    \"writer\": string|null, \"read_holds\": [ { \"owner\": string,\n"
            "                   \"index\": integer, \"ttl_ms\": integer } ]   (rwlock only),\n"
            "    \"queue\": [ { \"owner\": string, \"deadline_ms\": integer|null,\n"
            "                 \"remaining_ms\": integer|null, \"since_ms\": integer|null,\n"
            "                 \"waited_ms\": integer|null, \"who\": WHO } ]   head first,\n"
            "    \"queue_length\": integer (all queued; the list shows at most 1000),\n"
            "    \"subscribers\": integer, \"waiters\": integer,\n"
            "    \"waiting\": [ { \"owner\": string, \"since_ms\": integer|null,\n"
            "                   \"waited_ms\": integer|null, \"who\": WHO } ],\n"
            "    \"available\": integer, \"maybe_latch\": bool   (semaphores),\n"
            "    \"permits\": [ { \"id\": string, \"remaining_ms\": integer|null } ]\n"
            "                 (permit_semaphore; null: no lease),\n"
            "    \"count\": integer (latch),\n"
            "    \"identity\": bool (the identity records could be read)\n"
            "  }\n"
            "  WHO: { \"client_id\": string, \"thread\": integer, \"known\": bool,\n"
            "         \"host\", \"program\", \"label\", \"version\": string, \"pid\",\n"
            "         \"started_ms\": integer (known only), \"connections\": string }\n"
            "  Deadlines and since-times are epoch ms of the clocks of the hosts that wrote them.\n"
            "\n"
            "Exit codes: 0 (whatever the state), 64 usage error, 69 Redis unreachable or\n"
            "refusing.\n");
}

/* "who: web-3 pid 4711 ./report.sh, held 12 min 3 s" */
static void print_who(const crd_identity *who, const char *verb, int64_t age)
{
    char w[600], a[64];
    printf("  who: %s", cli_who(who, w, sizeof w));
    if (age >= 0)
        printf(", %s %s", verb, cli_age(age, a, sizeof a));
    putchar('\n');
}

static void print_text(const crd_state *s)
{
    printf("name: %s\nkind: %s\n", s->name, s->kind_name);
    if (s->kind == CRD_KIND_OTHER)
        printf("type: %s\n", s->type);
    if (s->mode[0] != '\0')
        printf("mode: %s\n", s->mode);
    if (s->token >= 0)
        printf("token: %lld\n", (long long)s->token);
    printf("ttl_ms: %lld\nholders: %zu\n", (long long)s->ttl_ms, s->nholders);
    for (size_t i = 0; i < s->nholders; i++) {
        const crd_holder *h = &s->holders[i];
        printf("holder: %s%s count=%lld\n", h->owner, h->writer ? ":write" : "",
               (long long)h->count);
        print_who(&h->who, "held", h->held_ms);
    }
    for (size_t i = 0; i < s->nread_holds; i++)
        printf("read_hold: %s index=%lld ttl_ms=%lld\n", s->read_holds[i].owner,
               (long long)s->read_holds[i].index, (long long)s->read_holds[i].ttl_ms);
    if (s->nqueue > 0)
        printf("queue: %zu\n", s->nqueue);
    for (size_t i = 0; i < s->nqueue_listed; i++) {
        const crd_waiter *w = &s->queue[i];
        printf("waiter: %s deadline_ms=%lld remaining_ms=%lld\n", w->owner,
               (long long)w->deadline_ms, (long long)w->remaining_ms);
        print_who(&w->who, "waiting", w->waited_ms);
    }
    if (s->kind != CRD_KIND_NONE && s->kind != CRD_KIND_OTHER && s->kind != CRD_KIND_FAIR_LOCK)
        printf("waiters: %lld (subscribers of the channel: %lld)\n", (long long)s->waiters,
               (long long)s->subscribers);
    for (size_t i = 0; i < s->nknown_waiters; i++) {
        const crd_waiter *w = &s->known_waiters[i];
        printf("waiting: %s waited_ms=%lld\n", w->owner, (long long)w->waited_ms);
        print_who(&w->who, "waiting", w->waited_ms);
    }
    if (s->kind == CRD_KIND_SEMAPHORE || s->kind == CRD_KIND_PERMIT_SEMAPHORE) {
        printf("available: %lld\n", (long long)s->available);
        if (s->maybe_latch)
            printf("maybe_latch: yes\n");
    }
    if (s->kind == CRD_KIND_PERMIT_SEMAPHORE) {
        printf("permits_out: %zu\n", s->npermits);
        for (size_t i = 0; i < s->npermits_listed; i++) {
            if (s->permits[i].deadline_ms >= 0)
                printf("permit: %s remaining_ms=%lld\n", s->permits[i].id,
                       (long long)s->permits[i].remaining_ms);
            else
                printf("permit: %s remaining_ms=none\n", s->permits[i].id);
        }
    }
    if (s->kind == CRD_KIND_LATCH)
        printf("count: %lld\n", (long long)s->count);
}

static void print_waiters_json(const char *key, const crd_waiter *w, size_t n, bool deadlines)
{
    printf(",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
        cli_json_string(w[i].owner, strlen(w[i].owner));
        if (deadlines) {
            cli_json_ms("deadline_ms", w[i].deadline_ms);
            if (w[i].deadline_ms >= 0)
                printf(",\"remaining_ms\":%lld", (long long)w[i].remaining_ms);
            else
                fputs(",\"remaining_ms\":null", stdout);
        }
        cli_json_ms("since_ms", w[i].since_ms);
        cli_json_ms("waited_ms", w[i].waited_ms);
        fputs(",\"who\":", stdout);
        cli_json_who(&w[i].who);
        fputs("}", stdout);
    }
    fputs("]", stdout);
}

static void print_json(const crd_state *s)
{
    fputs("{\"name\":", stdout);
    cli_json_string(s->name, s->name_len);
    printf(",\"kind\":\"%s\",\"type\":", s->kind_name);
    cli_json_string(s->type, strlen(s->type));
    if (s->mode[0] != '\0') {
        fputs(",\"mode\":", stdout);
        cli_json_string(s->mode, strlen(s->mode));
    }
    if (s->token >= 0)
        printf(",\"token\":%lld", (long long)s->token);
    printf(",\"ttl_ms\":%lld,\"read_at_ms\":%lld", (long long)s->ttl_ms, (long long)s->read_at_ms);
    cli_json_holders(s);
    if (s->kind == CRD_KIND_READ_WRITE_LOCK) {
        fputs(",\"writer\":", stdout);
        if (s->nholders > 0 && s->holders[0].writer)
            cli_json_string(s->holders[0].owner, strlen(s->holders[0].owner));
        else
            fputs("null", stdout);
        fputs(",\"read_holds\":[", stdout);
        for (size_t i = 0; i < s->nread_holds; i++) {
            fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
            cli_json_string(s->read_holds[i].owner, strlen(s->read_holds[i].owner));
            printf(",\"index\":%lld,\"ttl_ms\":%lld}", (long long)s->read_holds[i].index,
                   (long long)s->read_holds[i].ttl_ms);
        }
        fputs("]", stdout);
    }
    print_waiters_json("queue", s->queue, s->nqueue_listed, true);
    printf(",\"queue_length\":%zu,\"subscribers\":%lld,\"waiters\":%lld", s->nqueue,
           (long long)s->subscribers, (long long)s->waiters);
    print_waiters_json("waiting", s->known_waiters, s->nknown_waiters, false);
    if (s->kind == CRD_KIND_SEMAPHORE || s->kind == CRD_KIND_PERMIT_SEMAPHORE) {
        printf(",\"available\":%lld", (long long)s->available);
        if (s->kind == CRD_KIND_SEMAPHORE)
            printf(",\"maybe_latch\":%s", s->maybe_latch ? "true" : "false");
    }
    if (s->kind == CRD_KIND_PERMIT_SEMAPHORE) {
        fputs(",\"permits\":[", stdout);
        for (size_t i = 0; i < s->npermits_listed; i++) {
            printf("%s{\"id\":\"%s\"", i ? "," : "", s->permits[i].id);
            if (s->permits[i].deadline_ms >= 0)
                printf(",\"remaining_ms\":%lld}", (long long)s->permits[i].remaining_ms);
            else
                fputs(",\"remaining_ms\":null}", stdout);
        }
        fputs("]", stdout);
    }
    if (s->kind == CRD_KIND_LATCH)
        printf(",\"count\":%lld", (long long)s->count);
    printf(",\"identity\":%s}\n", s->identity_read ? "true" : "false");
}

/* Parses argv: --json and NAME. Returns 0, -1 after --help, or the usage error's code. */
static int parse_status_args(int argc, char **argv, bool *json, const char **name)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage_status(stdout);
            return -1;
        } else if (strcmp(a, "--json") == 0) {
            *json = true;
        } else {
            int rc = cli_take_name_arg("status", argc, argv, &i, name);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

int cmd_status(const global_opts *g, int argc, char **argv)
{
    bool json = false;
    const char *name = NULL;
    int rc = parse_status_args(argc, argv, &json, &name);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    rc = cli_check_name_and_url("status", g, name);
    if (rc != 0 || name == NULL)
        return rc != 0 ? rc : EXIT_USAGE;
    crd_client *client;
    if ((rc = cli_make_client(g, "status", NULL, &client)) != 0)
        return rc;
    crd_state *s = NULL;
    crd_status st = crd_state_read(client, name, strlen(name),
                                   CRD_STATE_WAITERS | CRD_STATE_CLIENTS, &s);
    if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what, "reading '%.200s' failed", name);
        cli_report("status", what, st, client);
        rc = cli_exit_for_status(st);
    } else {
        if (json)
            print_json(s);
        else
            print_text(s);
        rc = fflush(stdout) == 0 ? 0 : EXIT_OSERR;
    }
    crd_state_free(s);
    crd_client_free(client);
    return rc;
}
