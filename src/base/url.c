/*
 * url.c -- parses the URL forms of crd_options.url:
 *   redis://[[user]:password@]host[:port][/db]     (host may be [v6-address])
 *   rediss://...                                   (the same, over TLS)
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]   (seed nodes)
 *   rediss-cluster://...                           (the same, over TLS)
 *   unix://[[user]:password@]/path/to.sock[?db=N]  (credentials end at the first "@/")
 * and, for sentinel mode, into a list of sentinels and a master name:
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#MASTER
 *   rediss-sentinel://...                          (port 26379 when none is given)
 * where the credentials (the sentinels') end at the last '@' before the '/' or '#'.
 * Pure function; any thread. Errors say which part is wrong. The CLI reads --url with it
 * too (it links the library's internals), so both read a URL exactly alike.
 */
#include "base.h"

#include <stdbool.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Copies [s, s+len) decoding %XX escapes; NULL on a bad escape (*bad set) or OOM. */
static char *decode(const char *s, size_t len, bool *bad)
{
    char *out = malloc(len + 1);
    size_t o = 0;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        int hi = -1, lo = -1;
        if (i + 2 < len) {
            hi = hexval(s[i + 1]);
            lo = hexval(s[i + 2]);
        }
        /* %00 too: a NUL cannot be carried in the C strings the fields become (a password
         * or a master name would end there in silence). */
        if (hi < 0 || lo < 0 || hi + lo == 0) {
            *bad = true;
            free(out);
            return NULL;
        }
        out[o++] = (char)(hi * 16 + lo);
        i += 2;
    }
    out[o] = '\0';
    return out;
}

static bool parse_int(const char *s, size_t len, long min, long max, long *out)
{
    if (len == 0 || len > 10)
        return false;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* The database number after a URL's '/': [from, to) (empty: leaves *db). */
static bool parse_db(const char *from, const char *to, int *db)
{
    long v;
    if (from >= to)
        return true;
    if (!parse_int(from, (size_t)(to - from), 0, 1000000, &v))
        return false;
    *db = (int)v;
    return true;
}

void crd__endpoint_clear(crd__endpoint *ep)
{
    for (int i = 0; i < ep->nseeds; i++)
        free(ep->seeds[i].host);
    free(ep->seeds);
    free(ep->host);
    free(ep->unix_path);
    free(ep->username);
    free(ep->password);
    memset(ep, 0, sizeof *ep);
}

/* One "host[:port]" (host may be "[v6-address]") in [h, end): *host allocated. */
static crd_status host_port_d(const char *hostpart, const char *hp_end, char **host, int *port,
                              int dflt, char *err, size_t errlen)
{
    const char *port_colon = NULL;
    const char *h = hostpart, *h_end;
    if (hostpart < hp_end && *hostpart == '[') {
        const char *rb = memchr(hostpart, ']', (size_t)(hp_end - hostpart));
        if (rb == NULL)
            return snprintf(err, errlen, "unclosed '[' in host"), CRD_INVALID_ARGUMENT;
        h = hostpart + 1;
        h_end = rb;
        if (rb + 1 < hp_end) {
            if (rb[1] != ':')
                return snprintf(err, errlen, "junk after ']' in host"), CRD_INVALID_ARGUMENT;
            port_colon = rb + 1;
        }
    } else {
        port_colon = memchr(hostpart, ':', (size_t)(hp_end - hostpart));
        h_end = port_colon ? port_colon : hp_end;
    }
    if (h_end == h)
        return snprintf(err, errlen, "URL has no host"), CRD_INVALID_ARGUMENT;
    long p = dflt;
    if (port_colon != NULL && !parse_int(port_colon + 1, (size_t)(hp_end - port_colon - 1), 1,
                                         65535, &p))
        return snprintf(err, errlen, "port must be a number from 1 to 65535"),
               CRD_INVALID_ARGUMENT;
    *host = malloc((size_t)(h_end - h) + 1);
    if (*host == NULL)
        return CRD_NO_MEMORY;
    memcpy(*host, h, (size_t)(h_end - h));
    (*host)[h_end - h] = '\0';
    *port = (int)p;
    return CRD_OK;
}

static crd_status host_port(const char *hostpart, const char *hp_end, char **host, int *port,
                            char *err, size_t errlen)
{
    return host_port_d(hostpart, hp_end, host, port, 6379, err, errlen);
}

crd_status crd__seeds_parse(const char *list, size_t len, crd__endpoint *out, char *err,
                            size_t errlen)
{
    for (int i = 0; i < out->nseeds; i++)
        free(out->seeds[i].host);
    free(out->seeds);
    out->seeds = NULL;
    out->nseeds = 0;
    free(out->host);
    out->host = NULL;
    size_t n = 1;
    for (size_t i = 0; i < len; i++)
        n += list[i] == ',';
    if (n > 1024)
        return snprintf(err, errlen, "more than 1024 seed nodes"), CRD_INVALID_ARGUMENT;
    out->seeds = calloc(n, sizeof *out->seeds);
    if (out->seeds == NULL)
        return CRD_NO_MEMORY;
    const char *p = list, *end = list + len;
    while (out->nseeds < (int)n) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma ? comma : end;
        crd__seed *sd = &out->seeds[out->nseeds];
        crd_status st = host_port(p, item_end, &sd->host, &sd->port, err, errlen);
        if (st != CRD_OK)
            return st;
        out->nseeds++;
        p = item_end + 1;
    }
    out->host = strdup(out->seeds[0].host);
    if (out->host == NULL)
        return CRD_NO_MEMORY;
    out->port = out->seeds[0].port;
    return CRD_OK;
}

#define BAD(...)                                                                               \
    (snprintf(err, errlen, __VA_ARGS__), crd__endpoint_clear(out), CRD_INVALID_ARGUMENT)
#define OOM() (crd__endpoint_clear(out), CRD_NO_MEMORY)

/* "[[user]:]password" of [s, end) into out: without a ':' it is a password alone, as
 * redis-cli reads it. */
static crd_status parse_auth(const char *s, const char *end, crd__endpoint *out, char *err,
                             size_t errlen)
{
    const char *colon = memchr(s, ':', (size_t)(end - s));
    bool bad = false;
    if (colon == NULL) {
        out->password = decode(s, (size_t)(end - s), &bad);
        if (out->password == NULL)
            return bad ? BAD("bad %%-escape in password") : OOM();
        return CRD_OK;
    }
    if (colon > s) {
        out->username = decode(s, (size_t)(colon - s), &bad);
        if (out->username == NULL)
            return bad ? BAD("bad %%-escape in user name") : OOM();
    }
    out->password = decode(colon + 1, (size_t)(end - colon - 1), &bad);
    if (out->password == NULL)
        return bad ? BAD("bad %%-escape in password") : OOM();
    return CRD_OK;
}

/* "host[:port]" or "[v6-address][:port]" of [hostpart, hp_end) into out->host and
 * out->port (which keeps its value when no port is given). */
static crd_status parse_hostport(const char *hostpart, const char *hp_end, crd__endpoint *out,
                                 char *err, size_t errlen)
{
    /* out->port holds the default of this form (a sentinel's: 26379) */
    return host_port_d(hostpart, hp_end, &out->host, &out->port, out->port, err, errlen);
}

crd_status crd__url_parse(const char *url, crd__endpoint *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->port = 6379;
    if (url == NULL)
        return BAD("URL is NULL");
    if (strncmp(url, "unix://", 7) == 0) {
        const char *path = url + 7;
        if (path[0] != '/' && path[0] != '\0') {
            /* unix://[[user]:password@]/path: the credentials end at the first "@/" (a
             * path starts with '/'; an '@' of the password is written %40). */
            const char *at = strstr(path, "@/");
            if (at == NULL)
                return BAD("unix URL needs an absolute socket path: "
                           "unix://[[user]:password@]/path/to.sock");
            crd_status st = parse_auth(path, at, out, err, errlen);
            if (st != CRD_OK)
                return st;
            path = at + 1;
        }
        const char *q = strchr(path, '?');
        size_t plen = q ? (size_t)(q - path) : strlen(path);
        if (plen == 0 || path[0] != '/')
            return BAD("unix URL needs an absolute socket path: unix:///path/to.sock");
        bool bad = false;
        out->unix_path = decode(path, plen, &bad);
        if (out->unix_path == NULL)
            return bad ? BAD("bad %%-escape in unix socket path") : OOM();
        if (q != NULL) {
            long db;
            if (strncmp(q, "?db=", 4) != 0 || !parse_int(q + 4, strlen(q + 4), 0, 1000000, &db))
                return BAD("unix URL query must be ?db=N with N a database number");
            out->db = (int)db;
        }
        return CRD_OK;
    }
    const char *s;
    bool cluster = false;
    if (strncmp(url, "redis://", 8) == 0) {
        s = url + 8;
    } else if (strncmp(url, "rediss://", 9) == 0) {
        s = url + 9;
        out->tls = true;
    } else if (strncmp(url, "redis-cluster://", 16) == 0) {
        s = url + 16;
        cluster = true;
    } else if (strncmp(url, "rediss-cluster://", 17) == 0) {
        s = url + 17;
        cluster = true;
        out->tls = true;
    } else {
        /* never echoed: it may hold a password */
        if (crd__url_is_sentinel(url))
            return BAD("a redis-sentinel:// URL names sentinels, not a server: it sets up "
                       "sentinel mode (crd_options.url), not a single endpoint");
        return BAD("URL must start with redis://, rediss://, redis-cluster://, "
                   "rediss-cluster://, unix://, redis-sentinel:// or rediss-sentinel://");
    }
    const char *end = s + strlen(s);
    const char *slash = memchr(s, '/', (size_t)(end - s));
    const char *auth_end = NULL;
    /* The credentials end at the last '@' before the path. */
    for (const char *p = s; p < (slash ? slash : end); p++)
        if (*p == '@')
            auth_end = p;
    const char *hostpart = s;
    if (auth_end != NULL) {
        crd_status st = parse_auth(s, auth_end, out, err, errlen);
        if (st != CRD_OK)
            return st;
        hostpart = auth_end + 1;
    }
    const char *hp_end = slash ? slash : end;
    if (cluster) {
        crd_status st = crd__seeds_parse(hostpart, (size_t)(hp_end - hostpart), out, err, errlen);
        if (st != CRD_OK) {
            crd__endpoint_clear(out);
            return st;
        }
        out->cluster = true;
    } else {
        crd_status st = host_port(hostpart, hp_end, &out->host, &out->port, err, errlen);
        if (st != CRD_OK) {
            crd__endpoint_clear(out);
            return st;
        }
    }
    if (slash != NULL && slash + 1 < end) {
        if (!parse_db(slash + 1, end, &out->db))
            return BAD("database must be a number after the '/'");
        if (cluster && out->db != 0)
            return BAD("a cluster has only database 0");
    }
    return CRD_OK;
}

/* ---- redis-sentinel:// ------------------------------------------------------------------ */

bool crd__url_is_sentinel(const char *url)
{
    return url != NULL && (strncmp(url, "redis-sentinel://", 17) == 0 ||
                           strncmp(url, "rediss-sentinel://", 18) == 0);
}

void crd__sentinel_cfg_clear(crd__sentinel_cfg *cfg)
{
    for (size_t i = 0; i < cfg->naddrs; i++)
        crd__endpoint_clear(&cfg->addrs[i]);
    free(cfg->addrs);
    free(cfg->master);
    memset(cfg, 0, sizeof *cfg);
}

#undef BAD
#undef OOM
#define BAD(...)                                                                               \
    (snprintf(err, errlen, __VA_ARGS__), crd__sentinel_cfg_clear(out), CRD_INVALID_ARGUMENT)
#define OOM() (crd__sentinel_cfg_clear(out), CRD_NO_MEMORY)

/* "host[:port],host[:port],..." of [s, end) appended to out->addrs, each with the port
 * 26379 unless given and a copy of the credentials in auth. */
static crd_status parse_hostlist(const char *s, const char *end, const crd__endpoint *auth,
                                 crd__sentinel_cfg *out, char *err, size_t errlen)
{
    if (s == end)
        return BAD("no sentinel address given");
    while (s <= end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma ? comma : end;
        if (out->naddrs == 64)
            return BAD("more than 64 sentinel addresses");
        crd__endpoint *na = realloc(out->addrs, (out->naddrs + 1) * sizeof *na);
        if (na == NULL)
            return OOM();
        out->addrs = na;
        crd__endpoint *ep = &out->addrs[out->naddrs++];
        memset(ep, 0, sizeof *ep);
        ep->port = 26379;
        char why[160] = "";
        crd_status st = parse_hostport(s, item_end, ep, why, sizeof why);
        if (st == CRD_NO_MEMORY)
            return OOM();
        if (st != CRD_OK)
            return BAD("sentinel address %zu: %s", out->naddrs, why);
        if ((auth->username && !(ep->username = strdup(auth->username))) ||
            (auth->password && !(ep->password = strdup(auth->password))))
            return OOM();
        ep->tls = out->tls;
        if (comma == NULL)
            break;
        s = comma + 1;
    }
    return CRD_OK;
}

crd_status crd__sentinel_addrs_parse(const char *list, crd__sentinel_cfg *out, char *err,
                                     size_t errlen)
{
    crd__endpoint none;
    memset(&none, 0, sizeof none);
    if (list == NULL)
        return BAD("sentinel_addrs is NULL");
    return parse_hostlist(list, list + strlen(list), &none, out, err, errlen);
}

crd_status crd__sentinel_url_parse(const char *url, crd__sentinel_cfg *out, char *err,
                                   size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!crd__url_is_sentinel(url))
        return BAD("URL must start with redis-sentinel:// or rediss-sentinel://");
    out->tls = url[5] == 's'; /* rediss-sentinel */
    const char *s = url + (out->tls ? 18 : 17);
    const char *hash = strchr(s, '#');
    if (hash == NULL || hash[1] == '\0')
        return BAD("a sentinel URL ends with #MASTERNAME, the name the sentinels monitor");
    bool bad = false;
    out->master = decode(hash + 1, strlen(hash + 1), &bad);
    if (out->master == NULL)
        return bad ? BAD("bad %%-escape in the master name") : OOM();
    const char *slash = memchr(s, '/', (size_t)(hash - s));
    const char *hosts_end = slash ? slash : hash;
    /* The credentials end at the last '@' before the path (or the '#'). */
    const char *auth_end = NULL;
    for (const char *p = s; p < hosts_end; p++)
        if (*p == '@')
            auth_end = p;
    crd__endpoint auth;
    memset(&auth, 0, sizeof auth);
    const char *hosts = s;
    if (auth_end != NULL) {
        char why[160];
        crd_status st = parse_auth(s, auth_end, &auth, why, sizeof why);
        if (st != CRD_OK) {
            crd__endpoint_clear(&auth);
            return st == CRD_NO_MEMORY ? OOM() : BAD("%s", why);
        }
        hosts = auth_end + 1;
    }
    crd_status st = parse_hostlist(hosts, hosts_end, &auth, out, err, errlen);
    crd__endpoint_clear(&auth);
    if (st != CRD_OK)
        return st;
    if (slash != NULL && !parse_db(slash + 1, hash, &out->db))
        return BAD("database must be a number after the '/'");
    return CRD_OK;
}
