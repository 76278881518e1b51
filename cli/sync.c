/*
 * sync.c -- `credisson semaphore status|set|add` and `credisson latch
 * set|count-down|wait|status`: Redisson's RSemaphore / RPermitExpirableSemaphore and
 * RCountDownLatch from the shell, through the library's synchronizer API. The permits
 * of an expirable semaphore (ids and leases) come from crd_state_read.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage_semaphore(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] semaphore status [--json] NAME\n"
            "       credisson [GLOBAL OPTIONS] semaphore set NAME N\n"
            "       credisson [GLOBAL OPTIONS] semaphore add NAME N\n"
            "\n"
            "Redisson's semaphores: the string NAME holds the available permits; a\n"
            "permit-expirable semaphore (credisson run --permits) also keeps its permits out\n"
            "in the sorted set {NAME}:timeout, by id and lease deadline.\n"
            "\n"
            "  status  available permits and, for the expirable kind, each permit out with\n"
            "          its remaining lease (--json: {\"name\", \"available\", \"expirable\",\n"
            "          \"permits\": [{\"id\", \"remaining_ms\" (null: no lease)}]})\n"
            "  set     set the permits if NAME does not exist (trySetPermits); exit 1 and\n"
            "          a message when it exists (nothing changed)\n"
            "  add     add N permits (negative: remove; the count may go below zero); the new\n"
            "          count is published as Redisson does\n"
            "\n"
            "Exit codes: 0 done, 1 set: NAME exists, 64 usage error, 69 Redis unreachable or\n"
            "refusing (also: a lost reply, the outcome unknown).\n");
}

static void usage_latch(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] latch set NAME N\n"
            "       credisson [GLOBAL OPTIONS] latch count-down NAME\n"
            "       credisson [GLOBAL OPTIONS] latch wait [--wait MS] NAME\n"
            "       credisson [GLOBAL OPTIONS] latch status [--json] NAME\n"
            "\n"
            "Redisson's count-down latch: the string NAME holds the count and is deleted at\n"
            "zero; waiters are woken on redisson_countdownlatch__channel__{NAME}.\n"
            "\n"
            "  set         set the count if the latch is not set; exit 1 when it is\n"
            "  count-down  lower the count by one (at zero every waiter is woken)\n"
            "  wait        wait until the count is zero: exit 0, or 75 after --wait MS\n"
            "              (default: forever); waits on the channel, no polling\n"
            "  status      the count (--json: {\"name\", \"count\"})\n"
            "\n"
            "Exit codes: 0 done, 1 set: already set, 64 usage error, 69 Redis unreachable,\n"
            "75 wait: not zero within --wait.\n");
}

/* NAME and an optional integer N (may be negative) after the verb. */
static int take_args(const char *cmd, int argc, char **argv, int i, bool *json, int64_t *wait,
                     const char **name, const char **n)
{
    *name = *n = NULL;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (json != NULL && strcmp(a, "--json") == 0) {
            *json = true;
        } else if (wait != NULL && cli_take_opt(argc, argv, &i, "--wait", &v)) {
            if (!cli_parse_ms(v, wait))
                return cli_usage_error(cmd, "--wait needs a duration in milliseconds");
        } else if (*name == NULL && (a[0] != '-' || a[1] == '\0')) {
            *name = a;
        } else if (*name != NULL && *n == NULL) {
            *n = a;
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", a);
        }
    }
    if (*name == NULL || **name == '\0')
        return cli_usage_error(cmd, "missing NAME");
    return 0;
}

static bool parse_i64(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return false;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (*end != '\0' || v > INT64_MAX / 4 || v < INT64_MIN / 4)
        return false;
    *out = v;
    return true;
}

/* The permits out of an expirable semaphore (crd_state_read), printed as text or JSON;
 * false when the state could not be read. */
static bool print_permits(crd_client *c, const char *name, bool json, bool *expirable)
{
    crd_state *st = NULL;
    if (crd_state_read(c, name, strlen(name), CRD_STATE_NO_IDENTITY, &st) != CRD_OK)
        return false;
    *expirable = st->npermits > 0;
    if (json)
        printf(",\"permits\":[");
    for (size_t i = 0; i < st->npermits_listed; i++) {
        const crd_permit *p = &st->permits[i];
        if (json) {
            printf("%s{\"id\":\"%s\",\"remaining_ms\":", i ? "," : "", p->id);
            if (p->deadline_ms >= 0)
                printf("%lld}", (long long)p->remaining_ms);
            else
                printf("null}");
        } else if (p->deadline_ms >= 0) {
            printf("permit: %s remaining_ms=%lld\n", p->id, (long long)p->remaining_ms);
        } else {
            printf("permit: %s remaining_ms=none\n", p->id);
        }
    }
    if (json)
        printf("]");
    crd_state_free(st);
    return true;
}

/* No subcommand: usage on stderr and EXIT_USAGE; help: usage on stdout and 0; else -1. */
static int usage_if_asked(int argc, char **argv, void (*usage)(FILE *))
{
    if (argc >= 2 && !cli_is_help(argv[1]))
        return -1;
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? EXIT_USAGE : 0;
}

/* Reports a failed call (what: the step) and gives the exit code its status maps to. */
static int failed(const char *cmd, const char *what, crd_status st, const crd_client *c)
{
    cli_report(cmd, what, st, c);
    return cli_exit_for_status(st);
}

/* What semaphore VERB or latch VERB was given: the verb and NAME, its number (permits,
 * or a latch's count) when the verb takes one, --json, and --wait (-1: forever). */
typedef struct verb_args {
    const char *cmd, *verb, *name;
    int64_t num, wait;
    bool json;
} verb_args;

/* The shared frame of semaphore and latch: usage when asked; the verb's arguments checked
 * by parse (an exit code, or 0); then a client, which act uses and this frees. */
static int run_verb(const global_opts *g, const char *cmd, int argc, char **argv,
                    void (*usage)(FILE *), int (*parse)(verb_args *, int, char **),
                    int (*act)(crd_client *, const verb_args *))
{
    int rc = usage_if_asked(argc, argv, usage);
    if (rc >= 0)
        return rc;
    verb_args a = {.cmd = cmd, .verb = argv[1], .wait = -1};
    if ((rc = parse(&a, argc, argv)) != 0)
        return rc;
    if (a.name == NULL) /* take_args refuses a missing NAME; clang's analyzer cannot see it */
        return cli_usage_error(cmd, "%s needs NAME", a.verb);
    crd_client *c = NULL;
    if ((rc = cli_make_client(g, cmd, NULL, &c)) != 0)
        return rc;
    rc = act(c, &a);
    crd_client_free(c);
    return rc;
}

static int semaphore_parse(verb_args *a, int argc, char **argv)
{
    const char *cmd = a->cmd, *verb = a->verb, *n;
    bool status = strcmp(verb, "status") == 0;
    if (!status && strcmp(verb, "set") != 0 && strcmp(verb, "add") != 0)
        return cli_usage_error(cmd, "unknown subcommand '%s' (status, set or add)", verb);
    int rc = take_args(cmd, argc, argv, 2, status ? &a->json : NULL, NULL, &a->name, &n);
    if (rc != 0)
        return rc;
    if (status ? n != NULL : !parse_i64(n, &a->num))
        return cli_usage_error(cmd, status ? "status takes only NAME"
                                           : "%s needs NAME and a number of permits", verb);
    return 0;
}

static int semaphore_act(crd_client *c, const verb_args *a)
{
    const char *cmd = a->cmd, *verb = a->verb, *name = a->name;
    bool json = a->json, status = strcmp(verb, "status") == 0;
    int64_t v = a->num;
    int rc = 0;
    crd_semaphore *s = NULL;
    crd_status st = crd_semaphore_new(c, name, &s);
    if (st != CRD_OK) {
        rc = failed(cmd, "NAME", st, c);
    } else if (status) {
        int64_t avail = 0;
        st = crd_semaphore_available(s, &avail);
        if (st != CRD_OK) {
            rc = failed(cmd, "reading the permits", st, c);
        } else {
            bool expirable = false;
            if (json) {
                printf("{\"name\":");
                cli_json_string(name, strlen(name));
                printf(",\"available\":%lld", (long long)avail);
                if (!print_permits(c, name, true, &expirable))
                    rc = EXIT_UNAVAILABLE;
                printf(",\"expirable\":%s}\n", expirable ? "true" : "false");
            } else {
                printf("name: %s\navailable: %lld\n", name, (long long)avail);
                if (!print_permits(c, name, false, &expirable))
                    rc = EXIT_UNAVAILABLE;
            }
        }
    } else if (strcmp(verb, "set") == 0) {
        bool set = false;
        st = crd_semaphore_try_set_permits(s, v, 0, &set);
        if (st != CRD_OK) {
            rc = failed(cmd, "set", st, c);
        } else if (!set) {
            int64_t avail = 0;
            crd_semaphore_available(s, &avail);
            cli_error(cmd, "semaphore %s exists (%lld available); nothing was changed", name,
                      (long long)avail);
            rc = 1;
        }
    } else {
        st = crd_semaphore_add_permits(s, v);
        int64_t avail = 0;
        if (st == CRD_OK)
            st = crd_semaphore_available(s, &avail);
        if (st != CRD_OK) {
            rc = failed(cmd, "add", st, c);
        } else {
            printf("available: %lld\n", (long long)avail);
        }
    }
    crd_semaphore_free(s);
    return rc;
}

static int latch_parse(verb_args *a, int argc, char **argv)
{
    const char *cmd = a->cmd, *verb = a->verb, *n;
    bool set = strcmp(verb, "set") == 0, wait_v = strcmp(verb, "wait") == 0,
         status = strcmp(verb, "status") == 0;
    if (!set && strcmp(verb, "count-down") != 0 && !wait_v && !status)
        return cli_usage_error(cmd, "unknown subcommand '%s' (set, count-down, wait or status)",
                               verb);
    int rc = take_args(cmd, argc, argv, 2, status ? &a->json : NULL, wait_v ? &a->wait : NULL,
                       &a->name, &n);
    if (rc != 0)
        return rc;
    if (set && (!parse_i64(n, &a->num) || a->num < 1))
        return cli_usage_error(cmd, "set needs NAME and a count >= 1");
    if (!set && n != NULL)
        return cli_usage_error(cmd, "%s takes only NAME", verb);
    return 0;
}

static int latch_act(crd_client *c, const verb_args *a)
{
    const char *cmd = a->cmd, *verb = a->verb, *name = a->name;
    bool json = a->json;
    int64_t wait = a->wait, count = a->num;
    bool set = strcmp(verb, "set") == 0, down = strcmp(verb, "count-down") == 0,
         wait_v = strcmp(verb, "wait") == 0;
    crd_latch *l = NULL;
    crd_status st = crd_latch_new(c, name, &l);
    int rc = 0;
    if (st != CRD_OK) {
        rc = failed(cmd, "NAME", st, c);
    } else if (set) {
        bool was_set = false;
        st = crd_latch_try_set_count(l, count, &was_set);
        if (st == CRD_OK && !was_set) {
            int64_t now = 0;
            crd_latch_count(l, &now);
            cli_error(cmd, "latch %s is set (count %lld); nothing was changed", name,
                      (long long)now);
            rc = 1;
        }
    } else if (down) {
        st = crd_latch_count_down(l);
        if (st == CRD_OK && crd_latch_count(l, &count) == CRD_OK)
            printf("count: %lld\n", (long long)count);
    } else if (wait_v) {
        st = crd_latch_await(l, wait);
        if (st == CRD_TIMEOUT) {
            cli_error(cmd, "latch %s did not reach zero within %lld ms", name, (long long)wait);
            rc = EXIT_NOT_ACQUIRED;
            st = CRD_OK;
        }
    } else {
        st = crd_latch_count(l, &count);
        if (st == CRD_OK && json) {
            printf("{\"name\":");
            cli_json_string(name, strlen(name));
            printf(",\"count\":%lld}\n", (long long)count);
        } else if (st == CRD_OK) {
            printf("name: %s\ncount: %lld\n", name, (long long)count);
        }
    }
    if (st != CRD_OK && rc == 0) {
        rc = failed(cmd, verb, st, c);
    }
    crd_latch_free(l);
    return rc;
}

int cmd_semaphore(const global_opts *g, int argc, char **argv)
{
    return run_verb(g, "semaphore", argc, argv, usage_semaphore, semaphore_parse,
                    semaphore_act);
}

int cmd_latch(const global_opts *g, int argc, char **argv)
{
    return run_verb(g, "latch", argc, argv, usage_latch, latch_parse, latch_act);
}
