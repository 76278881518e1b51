/*
 * probe.c -- raw connections to the user's deployment for `doctor` and `verify`
 * (probe.h): the URL forms parsed here, hiredis connections with a deadline per
 * command, the primaries of a Sentinel or Cluster set-up, and the small helpers both
 * commands measure with. Main thread only (each connection belongs to one thread).
 */
#include "probe.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- URLs -------------------------------------------------------------------------------- */

/* Copies s[0..n) into buf, decoding %XX; false when it does not fit or an escape is bad. */
static bool decode(const char *s, size_t n, char *buf, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%') {
            if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) ||
                !isxdigit((unsigned char)s[i + 2]))
                return false;
            char hex[3] = {s[i + 1], s[i + 2], '\0'};
            ch = (char)strtol(hex, NULL, 16);
            i += 2;
        }
        if (k + 1 >= cap)
            return false;
        buf[k++] = ch;
    }
    buf[k] = '\0';
    return true;
}

/* "host[:port]" or "[v6]:port" of s[0..n) into a; false when malformed. */
static bool parse_hostport(const char *s, size_t n, int defport, probe_addr *a)
{
    memset(a, 0, sizeof *a);
    a->port = defport;
    const char *end = s + n, *colon = NULL, *hs = s, *he = end;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL)
            return false;
        hs = s + 1;
        he = close;
        if (close + 1 < end) {
            if (close[1] != ':')
                return false;
            colon = close + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        if (colon != NULL)
            he = colon;
    }
    if (he <= hs || (size_t)(he - hs) >= sizeof a->host)
        return false;
    memcpy(a->host, hs, (size_t)(he - hs));
    if (colon != NULL) {
        long port = 0;
        const char *p = colon + 1;
        if (p >= end)
            return false;
        for (; p < end; p++) {
            if (*p < '0' || *p > '9')
                return false;
            port = port * 10 + (*p - '0');
            if (port > 65535)
                return false;
        }
        if (port < 1)
            return false;
        a->port = (int)port;
    }
    return true;
}

/* "[user]:password@" at the front of s (up to the last '@' before the host part): sets
 * the credentials and returns where the rest starts. */
static const char *take_creds(const char *s, const char *limit, probe_target *t, bool *ok)
{
    *ok = true;
    const char *at = NULL;
    for (const char *p = s; p < limit; p++)
        if (*p == '@')
            at = p;
    if (at == NULL)
        return s;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    if (colon == NULL) {
        /* "password@" alone is not a form; "user@" neither: Lettuce needs ':'. */
        *ok = decode(s, (size_t)(at - s), t->pass, sizeof t->pass);
        return at + 1;
    }
    *ok = decode(s, (size_t)(colon - s), t->user, sizeof t->user) &&
          decode(colon + 1, (size_t)(at - colon - 1), t->pass, sizeof t->pass);
    return at + 1;
}

/* A comma-separated host list of s[0..n) into t->addrs. */
static bool parse_list(const char *s, size_t n, int defport, probe_target *t)
{
    const char *p = s, *end = s + n;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma != NULL ? comma : end;
        if (t->naddrs == PROBE_MAX_ADDRS || !parse_hostport(p, (size_t)(e - p), defport,
                                                            &t->addrs[t->naddrs]))
            return false;
        t->naddrs++;
        p = comma != NULL ? comma + 1 : end;
    }
    return t->naddrs > 0;
}

static bool parse_db(const char *s, size_t n, int *db)
{
    long v = 0;
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
        if (v > 1000000)
            return false;
    }
    *db = (int)v;
    return true;
}

int probe_parse_url(const char *url, probe_target *t, char *err, size_t cap)
{
    memset(t, 0, sizeof *t);
    /* Each "rediss" scheme is its "redis" one over TLS. */
    static const struct {
        const char *scheme;
        probe_kind kind;
    } schemes[] = {{"redis-cluster://", PROBE_CLUSTER},   {"rediss-cluster://", PROBE_CLUSTER},
                   {"redis-sentinel://", PROBE_SENTINEL}, {"rediss-sentinel://", PROBE_SENTINEL},
                   {"redis://", PROBE_STANDALONE},        {"rediss://", PROBE_STANDALONE},
                   {"unix://", PROBE_STANDALONE}};
    const char *rest = NULL;
    bool is_unix = false;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0] && rest == NULL; i++) {
        size_t n = strlen(schemes[i].scheme);
        if (strncmp(url, schemes[i].scheme, n) == 0) {
            rest = url + n;
            t->kind = schemes[i].kind;
            t->tls = strncmp(url, "rediss", 6) == 0;
            is_unix = i == sizeof schemes / sizeof schemes[0] - 1;
        }
    }
    if (rest == NULL) {
        snprintf(err, cap, "'%s' is not a redis://, rediss://, unix://, redis-cluster:// or "
                 "redis-sentinel:// URL", url);
        return -1;
    }
    bool ok = true;
    if (is_unix) {
        /* unix://[[user]:password@]/path[?db=N]: the credentials end at the first "@/". */
        const char *at = strstr(rest, "@/");
        const char *path = rest;
        if (at != NULL) {
            take_creds(rest, at + 1, t, &ok);
            path = at + 1;
        }
        const char *q = strchr(path, '?');
        size_t plen = q != NULL ? (size_t)(q - path) : strlen(path);
        if (!ok || plen == 0 || path[0] != '/' ||
            !decode(path, plen, t->addrs[0].path, sizeof t->addrs[0].path) ||
            (q != NULL && (strncmp(q, "?db=", 4) != 0 || !parse_db(q + 4, strlen(q + 4),
                                                                   &t->db)))) {
            snprintf(err, cap, "bad unix:// URL (unix://[[user]:password@]/path[?db=N])");
            return -1;
        }
        t->naddrs = 1;
        return 0;
    }
    const char *hash = t->kind == PROBE_SENTINEL ? strchr(rest, '#') : NULL;
    const char *end = hash != NULL ? hash : rest + strlen(rest);
    const char *slash = memchr(rest, '/', (size_t)(end - rest));
    const char *hosts_end = slash != NULL ? slash : end;
    const char *hosts = take_creds(rest, hosts_end, t, &ok);
    if (!ok) {
        snprintf(err, cap, "bad %%XX escape in the URL's credentials");
        return -1;
    }
    int defport = t->kind == PROBE_SENTINEL ? 26379 : 6379;
    if (t->kind == PROBE_STANDALONE) {
        if (!parse_hostport(hosts, (size_t)(hosts_end - hosts), defport, &t->addrs[0])) {
            snprintf(err, cap, "bad host or port in '%s'", url);
            return -1;
        }
        t->naddrs = 1;
    } else if (!parse_list(hosts, (size_t)(hosts_end - hosts), defport, t)) {
        snprintf(err, cap, "bad host list in '%s'", url);
        return -1;
    }
    if (slash != NULL && !parse_db(slash + 1, (size_t)(end - slash - 1), &t->db)) {
        snprintf(err, cap, "bad database number in '%s'", url);
        return -1;
    }
    if (t->kind == PROBE_SENTINEL) {
        if (hash == NULL || hash[1] == '\0' ||
            !decode(hash + 1, strlen(hash + 1), t->master, sizeof t->master)) {
            snprintf(err, cap, "a redis-sentinel:// URL names the master after '#'");
            return -1;
        }
    }
    return 0;
}

/* ---- connections ------------------------------------------------------------------------ */

bool probe_timed_out(const redisContext *c)
{
    return c != NULL && c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK ||
                                                   strstr(c->errstr, "temporarily") != NULL ||
                                                   strstr(c->errstr, "timed out") != NULL);
}

redisReply *probe_cmd(redisContext *c, int argc, const char *const *argv)
{
    if (c == NULL || c->err)
        return NULL;
    size_t lens[PROBE_MAX_WORDS];
    for (int i = 0; i < argc && i < PROBE_MAX_WORDS; i++)
        lens[i] = strlen(argv[i]);
    errno = 0;
    return redisCommandArgv(c, argc, (const char **)argv, lens);
}

redisReply *probe_next_reply(redisContext *c)
{
    void *r = NULL;
    if (redisGetReply(c, &r) != REDIS_OK)
        return NULL;
    return r;
}

const char *probe_reply_why(const redisContext *c, const redisReply *r, const char *otherwise)
{
    return r == NULL ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str : otherwise;
}

int probe_words(const char **argv, const char *first, va_list ap)
{
    int argc = 0;
    for (const char *a = first; a != NULL && argc < PROBE_MAX_WORDS; a = va_arg(ap, const char *))
        argv[argc++] = a;
    return argc;
}

redisReply *probe_cmdv(redisContext *c, const char *first, ...)
{
    const char *argv[PROBE_MAX_WORDS];
    va_list ap;
    va_start(ap, first);
    int argc = probe_words(argv, first, ap);
    va_end(ap);
    return probe_cmd(c, argc, argv);
}

/* The reply r to a connection's set-up command (AUTH, SELECT) on c: true when it is not an
 * error; else err says that where:port refused it, c is freed and false returned. */
static bool setup_ok(redisContext *c, redisReply *r, const char *where, int port,
                     const char *what, char *err, size_t cap, bool *timed_out)
{
    if (r != NULL && r->type != REDIS_REPLY_ERROR) {
        freeReplyObject(r);
        return true;
    }
    *timed_out = r == NULL && probe_timed_out(c);
    snprintf(err, cap, "%s:%d refused %s: %s", where, port, what,
             r != NULL ? r->str : *timed_out ? "no answer in time" : c->errstr);
    if (r != NULL)
        freeReplyObject(r);
    redisFree(c);
    return false;
}

redisContext *probe_connect(const probe_target *t, const probe_addr *a, bool data_node,
                            int64_t timeout_ms, char *err, size_t cap, bool *timed_out)
{
    *timed_out = false;
    struct timeval tv = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000};
    errno = 0;
    const char *where = a->path[0] != '\0' ? a->path : a->host;
    redisContext *c;
    if (t->tls && a->path[0] == '\0') {
        int fd = probe_tls_dial(t->tls_opts, a->host, a->port, timeout_ms, err, cap, timed_out);
        if (fd < 0)
            return NULL;
        c = redisConnectFd(fd);
        if (c == NULL)
            close(fd);
    } else {
        c = a->path[0] != '\0' ? redisConnectUnixWithTimeout(a->path, tv)
                               : redisConnectWithTimeout(a->host, a->port, tv);
    }
    if (c == NULL || c->err) {
        *timed_out = c != NULL && (errno == EINPROGRESS || errno == ETIMEDOUT ||
                                   strstr(c->errstr, "timed out") != NULL);
        snprintf(err, cap, "cannot connect to %s:%d: %s", where, a->port,
                 c != NULL ? c->errstr : "out of memory");
        if (c != NULL)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    char db[16], select[32];
    snprintf(db, sizeof db, "%d", t->db);
    snprintf(select, sizeof select, "SELECT %s", db);
    if (t->pass[0] != '\0' &&
        !setup_ok(c, t->user[0] != '\0' ? probe_cmdv(c, "AUTH", t->user, t->pass, NULL)
                                        : probe_cmdv(c, "AUTH", t->pass, NULL),
                  where, a->port, "AUTH", err, cap, timed_out))
        return NULL;
    if (data_node && t->db != 0 &&
        !setup_ok(c, probe_cmdv(c, "SELECT", db, NULL), where, a->port, select, err, cap,
                  timed_out))
        return NULL;
    return c;
}

bool probe_info_field(const char *text, const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            size_t k = 0;
            while (v[k] != '\0' && v[k] != '\r' && v[k] != '\n' && k + 1 < cap) {
                buf[k] = v[k];
                k++;
            }
            buf[k] = '\0';
            return true;
        }
    }
    return false;
}

int probe_primaries(const probe_target *t, int64_t timeout_ms, probe_addr *out, int cap,
                    int *n, char *err, size_t errcap)
{
    *n = 0;
    err[0] = '\0';
    if (t->kind == PROBE_STANDALONE) {
        out[0] = t->addrs[0];
        *n = 1;
        return 0;
    }
    for (int i = 0; i < t->naddrs; i++) {
        char why[300];
        bool timed_out;
        redisContext *c = probe_connect(t, &t->addrs[i], t->kind == PROBE_CLUSTER, timeout_ms,
                                        why, sizeof why, &timed_out);
        if (c == NULL && t->kind == PROBE_SENTINEL) {
            /* Sentinels often have no password although the data nodes do. */
            probe_target bare = *t;
            bare.user[0] = bare.pass[0] = '\0';
            c = probe_connect(&bare, &t->addrs[i], false, timeout_ms, why, sizeof why,
                              &timed_out);
        }
        if (c == NULL) {
            snprintf(err + strlen(err), errcap - strlen(err), "%s%s", err[0] ? "; " : "", why);
            continue;
        }
        redisReply *r = t->kind == PROBE_SENTINEL
                            ? probe_cmdv(c, "SENTINEL", "get-master-addr-by-name", t->master,
                                         NULL)
                            : probe_cmdv(c, "CLUSTER", "SLOTS", NULL);
        if (r != NULL && t->kind == PROBE_SENTINEL && r->type == REDIS_REPLY_ARRAY &&
            r->elements == 2 && r->element[0]->type == REDIS_REPLY_STRING) {
            memset(&out[0], 0, sizeof out[0]);
            snprintf(out[0].host, sizeof out[0].host, "%s", r->element[0]->str);
            out[0].port = atoi(r->element[1]->str);
            *n = 1;
        } else if (r != NULL && t->kind == PROBE_CLUSTER && r->type == REDIS_REPLY_ARRAY) {
            for (size_t s = 0; s < r->elements; s++) {
                redisReply *range = r->element[s];
                if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
                    range->element[2]->type != REDIS_REPLY_ARRAY ||
                    range->element[2]->elements < 2)
                    continue;
                redisReply *node = range->element[2];
                probe_addr a;
                memset(&a, 0, sizeof a);
                snprintf(a.host, sizeof a.host, "%s",
                         node->element[0]->type == REDIS_REPLY_STRING && node->element[0]->len
                             ? node->element[0]->str
                             : t->addrs[i].host);
                a.port = (int)node->element[1]->integer;
                bool seen = false;
                for (int k = 0; k < *n; k++)
                    seen = seen || (out[k].port == a.port && strcmp(out[k].host, a.host) == 0);
                if (!seen && *n < cap)
                    out[(*n)++] = a;
            }
        } else {
            snprintf(err + strlen(err), errcap - strlen(err), "%s%s:%d answered %s",
                     err[0] ? "; " : "", t->addrs[i].host, t->addrs[i].port,
                     r == NULL ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str
                                                                           : "an unusable reply");
        }
        if (r != NULL)
            freeReplyObject(r);
        redisFree(c);
        if (*n > 0)
            return 0;
    }
    return -1;
}

/* ---- slots ---------------------------------------------------------------------------------- */

/* CRC16/XMODEM (polynomial 0x1021), the checksum Redis Cluster maps keys with. */
static uint16_t crc16(const char *s, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)((unsigned char)s[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

int probe_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close != NULL && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & 16383;
    }
    return crc16(key, len) & 16383;
}

/* ---- the library client, time, quantiles --------------------------------------------------- */

void probe_options(const global_opts *g, crd_options *o)
{
    crd_options_init(o);
    o->url = g->url;
    if (g->watchdog_ms > 0)
        o->watchdog_timeout_ms = g->watchdog_ms;
    o->tls_ca_file = g->cacert;
    o->tls_ca_dir = g->cacertdir;
    o->tls_cert_file = g->cert;
    o->tls_key_file = g->key;
    o->tls_server_name = g->sni;
    o->tls_insecure_skip_verify = g->insecure;
}

int64_t probe_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double probe_quantile(double *v, int n, double q)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}
