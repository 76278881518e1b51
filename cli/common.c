/*
 * common.c -- what every command of the CLI needs: error lines and exit codes, option
 * parsing, the clock, the password-free form of a URL, the library client, and the four
 * lock kinds behind --fair/--read/--write/--fenced. Main thread only.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors ------------------------------------------------------------------------- */

/* "credisson: CMD: msg" (or "credisson: msg" with no command) plus tail. */
static void emit(const char *cmd, const char *fmt, va_list ap, const char *tail) CLI_PRINTF(2, 0);
static void emit(const char *cmd, const char *fmt, va_list ap, const char *tail)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (cmd != NULL)
        fprintf(stderr, "%s: %s: %s%s\n", CLI_PROG, cmd, msg, tail);
    else
        fprintf(stderr, "%s: %s%s\n", CLI_PROG, msg, tail);
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(cmd, fmt, ap, "");
    va_end(ap);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char tail[96];
    snprintf(tail, sizeof tail, " (see '%s%s%s --help')", CLI_PROG, cmd ? " " : "", cmd ? cmd : "");
    va_list ap;
    va_start(ap, fmt);
    emit(cmd, fmt, ap, tail);
    va_end(ap);
    return EXIT_USAGE;
}

/* The library's detail for a failed connect starts by naming the address it tried;
 * the CLI's line already names the URL, so that part is dropped rather than said twice. */
static const char *without_connect_prefix(const char *detail)
{
    static const char lead[] = "cannot connect to ";
    if (strncmp(detail, lead, sizeof lead - 1) != 0)
        return detail;
    const char *rest = strstr(detail + sizeof lead - 1, ": ");
    return rest != NULL ? rest + 2 : detail;
}

void cli_report(const char *cmd, const char *what, crd_status st, const crd_client *client)
{
    /* The detail is the server's or the system's own words; the status text only stands
     * in when there is none. */
    const char *detail = client ? crd_client_errmsg(client) : NULL;
    if (detail == NULL || *detail == '\0')
        detail = crd_strerror(st);
    cli_error(cmd, "%s: %s", what, without_connect_prefix(detail));
}

int cli_exit_for_status(crd_status st)
{
    switch (st) {
    case CRD_OK:
        return 0;
    case CRD_INVALID_ARGUMENT:
        return EXIT_USAGE;
    case CRD_BUSY:
    case CRD_TIMEOUT:
        return EXIT_NOT_ACQUIRED;
    case CRD_LOCK_LOST:
    case CRD_NOT_OWNER:
        return EXIT_LOST;
    case CRD_NO_MEMORY:
    case CRD_FORKED:
        return EXIT_OSERR;
    case CRD_IO:
    case CRD_PROTOCOL:
    case CRD_SERVER:
    case CRD_CLOSED:
    case CRD_AUTH:
    case CRD_DEADLOCK:
    case CRD_NOT_SYNCED: /* no replica acknowledged: the acquire was undone */
    case CRD_OUTCOME_UNKNOWN: /* a lost reply: the state must be read before acting */
    case CRD_SYNC_UNAVAILABLE: /* the server refuses WAIT: nothing was sent */
        return EXIT_UNAVAILABLE;
    case CRD_SKIPPED:
    case CRD_DEGRADED:
        return 0; /* run decides what these mean for CMD */
    case CRD_CANCELLED:
        return EXIT_NOT_ACQUIRED;
    case CRD_INTERRUPTED:
        return 128 + 2; /* run exits with the signal's own code; SIGINT's otherwise */
    }
    return EXIT_UNAVAILABLE;
}

/* ---- options ------------------------------------------------------------------------ */

bool cli_parse_ms(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return false;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
        if (v > CRD_DURATION_MAX_MS)
            return false;
    }
    *out = v;
    return true;
}

bool cli_take_opt(int argc, char **argv, int *i, const char *opt, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (strncmp(a, opt, n) != 0)
        return false;
    bool is_short = n == 2 && opt[0] == '-' && opt[1] != '-';
    if (a[n] == '=' && !is_short) {
        *val = a + n + 1;
        return true;
    }
    if (a[n] != '\0') {
        if (!is_short)
            return false;
        *val = a + n; /* "-E3" */
        return true;
    }
    *val = (*i + 1 < argc) ? argv[*i + 1] : NULL;
    if (*val != NULL)
        (*i)++;
    return true;
}

bool cli_is_help(const char *a)
{
    return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

int cli_take_name_arg(const char *cmd, int argc, char **argv, int *i, const char **name)
{
    const char *a = argv[*i];
    if (strcmp(a, "--") == 0 && *name == NULL && *i + 2 == argc) {
        *name = argv[++*i];
        return 0;
    }
    if (a[0] == '-' && a[1] != '\0')
        return cli_usage_error(cmd, "unknown option '%s'", a);
    if (*name != NULL)
        return cli_usage_error(cmd, "unexpected argument '%s'", a);
    *name = a;
    return 0;
}

/* ---- time --------------------------------------------------------------------------- */

int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long cli_epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- URL and the library client ----------------------------------------------------- */

const char *cli_redact_url(const char *url, char *buf, size_t len)
{
    const char *s = strstr(url, "://");
    if (s != NULL)
        s += 3;
    const char *slash = s ? strchr(s, '/') : NULL;
    const char *at = NULL;
    for (const char *p = s; p != NULL && *p && p != slash; p++)
        if (*p == '@')
            at = p;
    if (at == NULL) {
        snprintf(buf, len, "%s", url);
        return buf;
    }
    const char *colon = memchr(s, ':', (size_t)(at - s));
    const char *cut = colon ? colon + 1 : s;
    snprintf(buf, len, "%.*s***%s", (int)(cut - url), url, at);
    return buf;
}

/* Checks --url with the library's parser (crd_url_check). Returns 0, or the usage error's
 * exit code (the URL is shown without its password). */
int cli_check_url(const char *cmd, const global_opts *g)
{
    char why[256];
    crd_status st = crd_url_check(g->url, why, sizeof why);
    if (st == CRD_OK)
        return 0;
    char shown[512];
    return cli_usage_error(cmd, "bad --url '%s': %s", cli_redact_url(g->url, shown, sizeof shown),
                           why);
}

int cli_check_name_and_url(const char *cmd, const global_opts *g, const char *name)
{
    if (name == NULL)
        return cli_usage_error(cmd, "missing lock NAME");
    if (*name == '\0')
        return cli_usage_error(cmd, "lock NAME is empty");
    return cli_check_url(cmd, g);
}

int cli_make_client(const global_opts *g, const char *cmd, crd_event_fn on_event, crd_client **out)
{
    /* The URL is checked first (the library's parser), so that every command reports a
     * bad URL the same way and no message echoes a password. */
    *out = NULL;
    int rc = cli_check_url(cmd, g);
    if (rc != 0)
        return rc;
    crd_options o;
    crd_options_init(&o);
    o.url = g->url;
    o.pool_size = 1;
    if (g->watchdog_ms > 0)
        o.watchdog_timeout_ms = g->watchdog_ms;
    o.on_event = on_event;
    /* `run` learns of a force-unlock at once and stops CMD (--on-lost), not at the next
     * renewal: one subscription per held name while CMD runs. */
    o.prompt_loss_detection = strcmp(cmd, "run") == 0;
    /* The identity record (who holds, who waits, who watches) is kept by the commands that
     * hold, wait or watch; the readers and the exporter leave none behind. */
    o.identity = strcmp(cmd, "run") == 0 || strcmp(cmd, "watch") == 0;
    o.identity_label = g->label;
    o.tls_ca_file = g->cacert;
    o.tls_ca_dir = g->cacertdir;
    o.tls_cert_file = g->cert;
    o.tls_key_file = g->key;
    o.tls_server_name = g->sni;
    o.tls_insecure_skip_verify = g->insecure;
    crd_client *c = NULL;
    crd_status st = crd_client_new(&o, &c);
    if (st != CRD_OK) {
        char what[600], shown[512];
        cli_redact_url(g->url, shown, sizeof shown);
        if (st == CRD_INVALID_ARGUMENT)
            snprintf(what, sizeof what, "bad --url '%s' or option", shown);
        else
            snprintf(what, sizeof what, "cannot connect to %s", shown);
        cli_report(cmd, what, st, c);
        crd_client_free(c);
        return cli_exit_for_status(st);
    }
    *out = c;
    return 0;
}

/* ---- lock kinds --------------------------------------------------------------------- */

bool cli_take_kind(const char *a, cli_kind *kind, int *seen)
{
    /* Each kind's flag, by cli_kind (the reentrant lock is the default: it has none). */
    static const char *const flags[] = {
        [CLI_FAIR] = "--fair",     [CLI_READ] = "--read", [CLI_WRITE] = "--write",
        [CLI_FENCED] = "--fenced", [CLI_SPIN] = "--spin", [CLI_NRLOCK] = "--nonreentrant",
        [CLI_NRFAIR] = "--nonreentrant-fair"};
    size_t n = sizeof flags / sizeof flags[0], i = CLI_FAIR;
    while (i < n && strcmp(a, flags[i]) != 0)
        i++;
    if (i == n)
        return false;
    cli_kind k = (cli_kind)i;
    if (*seen && *kind != k)
        *seen = 2; /* conflicting kinds: reported by the caller */
    else
        *seen = 1;
    *kind = k;
    return true;
}

crd_status cli_open_lock(crd_client *client, cli_kind kind, const char *name, cli_lock *out)
{
    out->lock = NULL;
    out->rw = NULL;
    switch (kind) {
    case CLI_FAIR:
        return crd_fair_lock_new(client, name, &out->lock);
    case CLI_FENCED:
        return crd_fenced_lock_new(client, name, &out->lock);
    case CLI_SPIN:
        return crd_spin_lock_new(client, name, &out->lock);
    case CLI_NRLOCK:
        return crd_nonreentrant_lock_new(client, name, &out->lock);
    case CLI_NRFAIR:
        return crd_nonreentrant_fair_lock_new(client, name, &out->lock);
    case CLI_READ:
    case CLI_WRITE: {
        crd_status st = crd_rwlock_new(client, name, &out->rw);
        if (st == CRD_OK)
            out->lock = kind == CLI_READ ? crd_rwlock_read(out->rw) : crd_rwlock_write(out->rw);
        return st;
    }
    case CLI_RLOCK:
        break;
    }
    return crd_lock_new(client, name, &out->lock);
}

void cli_close_lock(cli_lock *l)
{
    if (l->rw != NULL)
        crd_rwlock_free(l->rw);
    else
        crd_lock_free(l->lock);
    l->lock = NULL;
    l->rw = NULL;
}
