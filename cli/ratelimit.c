/*
 * ratelimit.c -- Redisson's RRateLimiter from the shell: `credisson ratelimit
 * status|set|delete NAME ...`, and what `run --rate N/DURATION NAME -- CMD` needs (the rate
 * parsed, the limiter created with it when missing, one permit waited for). Through the
 * library's rate limiter API (crd_rate_limiter_*).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void usage_ratelimit(FILE *f)
{
    fprintf(f,
            "usage: credisson [GLOBAL OPTIONS] ratelimit status [--json] NAME\n"
            "       credisson [GLOBAL OPTIONS] ratelimit set [--per-client] [--keep-alive MS]\n"
            "                 [--reset] NAME N/DURATION\n"
            "       credisson [GLOBAL OPTIONS] ratelimit delete NAME\n"
            "\n"
            "Redisson's RRateLimiter NAME: at most N permits per DURATION, for the whole\n"
            "fleet (or, --per-client, for each client), shared with Java's\n"
            "getRateLimiter(NAME). DURATION is a number with ms, s, m or h (10/1s, 100/1m,\n"
            "5/250ms); 'credisson run --rate N/DURATION NAME -- CMD' waits for a permit.\n"
            "\n"
            "  status  the rate, the mode, the keep-alive and the permits available now\n"
            "          (--json: {\"name\", \"exists\", \"rate\", \"interval_ms\", \"mode\",\n"
            "          \"keep_alive_ms\", \"available\"})\n"
            "  set     set the rate (setRate): the permits given in the last interval still\n"
            "          count unless --reset; --keep-alive MS: the limiter expires after MS\n"
            "          without an acquire (at least the interval)\n"
            "  delete  delete the limiter (its rate and state)\n"
            "\n"
            "Exit codes: 0 done, 1 status: NAME has no rate, 64 usage error, 69 Redis\n"
            "unreachable or refusing (e.g. NAME holds another type).\n");
}

bool cli_parse_rate(const char *v, int64_t *rate, int64_t *interval_ms)
{
    if (v == NULL)
        return false;
    const char *slash = strchr(v, '/');
    if (slash == NULL || slash == v)
        return false;
    char num[24];
    size_t n = (size_t)(slash - v);
    if (n >= sizeof num)
        return false;
    memcpy(num, v, n);
    num[n] = '\0';
    if (!cli_parse_ms(num, rate) || *rate < 1 || *rate > 2147483647)
        return false;
    const char *d = slash + 1;
    size_t digits = strspn(d, "0123456789");
    int64_t count = 1;
    if (digits > 0) {
        char dn[24];
        if (digits >= sizeof dn)
            return false;
        memcpy(dn, d, digits);
        dn[digits] = '\0';
        if (!cli_parse_ms(dn, &count) || count < 1)
            return false;
    }
    const char *unit = d + digits;
    int64_t scale = strcmp(unit, "ms") == 0                     ? 1
                    : strcmp(unit, "s") == 0                    ? 1000
                    : strcmp(unit, "m") == 0                    ? 60000
                    : strcmp(unit, "h") == 0                    ? 3600000
                    : *unit == '\0' && digits > 0               ? 1
                                                                : 0;
    if (scale == 0 || count > CRD_DURATION_MAX_MS / scale)
        return false;
    *interval_ms = count * scale;
    return true;
}

/* "10 permits per 1000 ms" etc. */
static void print_config(const char *name, const crd_rate_config *cfg, int64_t avail, bool json)
{
    const char *mode = cfg->mode == CRD_RATE_PER_CLIENT ? "per_client" : "overall";
    if (json) {
        printf("{\"name\": \"%s\", \"exists\": true, \"rate\": %lld, \"interval_ms\": %lld, "
               "\"mode\": \"%s\", \"keep_alive_ms\": %lld, \"available\": %lld}\n",
               name, (long long)cfg->rate, (long long)cfg->interval_ms, mode,
               (long long)cfg->keep_alive_ms, (long long)avail);
        return;
    }
    printf("rate limiter %s: %lld permits per %lld ms, %s", name, (long long)cfg->rate,
           (long long)cfg->interval_ms, cfg->mode == CRD_RATE_PER_CLIENT ? "per client" : "overall");
    if (cfg->keep_alive_ms > 0)
        printf(", keep-alive %lld ms", (long long)cfg->keep_alive_ms);
    printf("\navailable now: %lld\n", (long long)avail);
}

static int status(crd_rate_limiter *rl, crd_client *c, const char *name, bool json)
{
    crd_rate_config cfg;
    bool exists = false;
    crd_status st = crd_rate_limiter_get_rate(rl, &cfg, &exists);
    if (st != CRD_OK) {
        cli_report("ratelimit", "cannot read the rate", st, c);
        return cli_exit_for_status(st);
    }
    if (!exists) {
        if (json)
            printf("{\"name\": \"%s\", \"exists\": false}\n", name);
        else
            printf("rate limiter %s: no rate set\n", name);
        return 1;
    }
    int64_t avail = 0;
    st = crd_rate_limiter_available(rl, &avail);
    if (st != CRD_OK) {
        cli_report("ratelimit", "cannot read the permits", st, c);
        return cli_exit_for_status(st);
    }
    print_config(name, &cfg, avail, json);
    return 0;
}

int cmd_ratelimit(const global_opts *g, int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        usage_ratelimit(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    const char *verb = argv[1], *name = NULL, *rate_arg = NULL;
    bool json = false, per_client = false, reset = false;
    int64_t keep_alive = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (cli_is_help(a)) {
            usage_ratelimit(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0 && strcmp(verb, "status") == 0) {
            json = true;
        } else if (strcmp(a, "--per-client") == 0 && strcmp(verb, "set") == 0) {
            per_client = true;
        } else if (strcmp(a, "--reset") == 0 && strcmp(verb, "set") == 0) {
            reset = true;
        } else if (strcmp(verb, "set") == 0 && cli_take_opt(argc, argv, &i, "--keep-alive", &v)) {
            if (!cli_parse_ms(v, &keep_alive))
                return cli_usage_error("ratelimit", "--keep-alive needs milliseconds");
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error("ratelimit", "unknown option '%s'", a);
        } else if (name == NULL) {
            name = a;
        } else if (rate_arg == NULL && strcmp(verb, "set") == 0) {
            rate_arg = a;
        } else {
            return cli_usage_error("ratelimit", "unexpected argument '%s'", a);
        }
    }
    if (strcmp(verb, "status") != 0 && strcmp(verb, "set") != 0 && strcmp(verb, "delete") != 0)
        return cli_usage_error("ratelimit", "unknown action '%s' (status, set or delete)", verb);
    if (name == NULL || *name == '\0')
        return cli_usage_error("ratelimit", "missing NAME");
    crd_rate_config cfg = {per_client ? CRD_RATE_PER_CLIENT : CRD_RATE_OVERALL, 0, 0, keep_alive};
    if (strcmp(verb, "set") == 0 && !cli_parse_rate(rate_arg, &cfg.rate, &cfg.interval_ms))
        return cli_usage_error("ratelimit", "set needs a rate N/DURATION (e.g. 10/1s, 100/1m), "
                               "N and the duration positive");
    crd_client *c = NULL;
    int rc = cli_make_client(g, "ratelimit", NULL, &c);
    if (rc != 0)
        return rc;
    crd_rate_limiter *rl = NULL;
    crd_status st = crd_rate_limiter_new(c, name, &rl);
    if (st != CRD_OK) {
        cli_report("ratelimit", "bad rate limiter name", st, c);
        crd_client_free(c);
        return cli_exit_for_status(st);
    }
    if (strcmp(verb, "status") == 0) {
        rc = status(rl, c, name, json);
    } else if (strcmp(verb, "set") == 0) {
        st = crd_rate_limiter_set_rate(rl, &cfg, !reset);
        if (st != CRD_OK) {
            cli_report("ratelimit", "cannot set the rate", st, c);
            rc = cli_exit_for_status(st);
        } else {
            printf("rate limiter %s: %lld permits per %lld ms, %s\n", name, (long long)cfg.rate,
                   (long long)cfg.interval_ms, per_client ? "per client" : "overall");
        }
    } else {
        bool deleted = false;
        st = crd_rate_limiter_delete(rl, &deleted);
        if (st != CRD_OK) {
            cli_report("ratelimit", "cannot delete", st, c);
            rc = cli_exit_for_status(st);
        } else {
            printf("rate limiter %s: %s\n", name, deleted ? "deleted" : "did not exist");
        }
    }
    crd_rate_limiter_free(rl);
    crd_client_free(c);
    return rc;
}

crd_status cli_rate_acquire(crd_client *c, const char *name, int64_t rate, int64_t interval_ms,
                            int64_t wait_ms, int conflict_exit, bool verbose, int *rc)
{
    crd_rate_limiter *rl = NULL;
    crd_status st = crd_rate_limiter_new(c, name, &rl);
    if (st != CRD_OK) {
        cli_report("run", "bad rate limiter name", st, c);
        *rc = cli_exit_for_status(st);
        return st;
    }
    crd_rate_config want = {CRD_RATE_OVERALL, rate, interval_ms, 0}, have;
    bool created = false, exists = false;
    st = crd_rate_limiter_try_set_rate(rl, &want, &created);
    if (st == CRD_OK && !created)
        st = crd_rate_limiter_get_rate(rl, &have, &exists);
    if (st == CRD_OK && !created && exists &&
        (have.rate != rate || have.interval_ms != interval_ms || have.mode != CRD_RATE_OVERALL)) {
        cli_error("run", "rate limiter '%.200s' exists with %lld permits per %lld ms%s, not %lld "
                  "per %lld ms (--rate); nothing was changed (see 'credisson ratelimit status "
                  "%.200s')", name, (long long)have.rate, (long long)have.interval_ms,
                  have.mode == CRD_RATE_PER_CLIENT ? " per client" : "", (long long)rate,
                  (long long)interval_ms, name);
        crd_rate_limiter_free(rl);
        *rc = EXIT_USAGE;
        return CRD_INVALID_ARGUMENT;
    }
    int64_t t0 = cli_now_ms();
    if (st == CRD_OK)
        st = crd_rate_limiter_acquire(rl, 1, wait_ms);
    if (st == CRD_OK && verbose)
        cli_error("run", "a permit of rate limiter '%.200s' after %lld ms", name,
                  (long long)(cli_now_ms() - t0));
    if (st == CRD_BUSY || st == CRD_TIMEOUT) {
        cli_error("run", "no permit of rate limiter '%.200s' within %lld ms (%lld per %lld ms)",
                  name, (long long)wait_ms, (long long)rate, (long long)interval_ms);
        *rc = conflict_exit;
    } else if (st != CRD_OK && st != CRD_INTERRUPTED) {
        char what[300];
        snprintf(what, sizeof what, "cannot acquire a permit of rate limiter '%.200s'", name);
        cli_report("run", what, st, c);
        *rc = cli_exit_for_status(st);
    }
    crd_rate_limiter_free(rl);
    return st;
}
