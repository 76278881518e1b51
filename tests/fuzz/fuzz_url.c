/*
 * fuzz_url.c -- libFuzzer target for crd__url_parse (src/url.c): any bytes as the
 * crd_options.url string. The parser must return CRD_OK or CRD_INVALID_ARGUMENT (or
 * CRD_NO_MEMORY), never read past the string, leak, or leave a half-filled endpoint:
 * on success a host or a unix path is set, the port is 1..65535 and the db >= 0, TLS
 * only for a rediss:// URL (never with a unix path), a user name only with a password
 * (a redis-cluster:// URL: every seed has a host and a port, the first is also host and
 * port); on failure the reason is a NUL-terminated message. The same bytes also go
 * through the sentinel parsers (crd__sentinel_url_parse, crd__sentinel_addrs_parse): on
 * success at least one sentinel, each with a host and a port 1..65535 and the URL's
 * credentials, a non-empty master name, TLS exactly for rediss-sentinel://.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size + 1);
    if (url == NULL)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0'; /* a C string: bytes after an embedded NUL are not part of it */
    crd__endpoint ep;
    memset(&ep, 0, sizeof ep);
    char err[200];
    err[0] = '\0';
    crd_status st = crd__url_parse(url, &ep, err, sizeof err);
    if (st == CRD_OK) {
        if ((ep.host == NULL) == (ep.unix_path == NULL))
            abort(); /* exactly one of host and unix path */
        if (ep.host != NULL && (ep.port < 1 || ep.port > 65535))
            abort();
        if (ep.db < 0)
            abort();
        bool tls_url = strncmp(url, "rediss://", 9) == 0 || strncmp(url, "rediss-cluster://", 17) == 0;
        if (ep.tls != tls_url || (ep.tls && ep.unix_path != NULL))
            abort(); /* TLS exactly for rediss:// and rediss-cluster://, never over a unix socket */
        if (ep.username != NULL && ep.password == NULL)
            abort(); /* a user name comes with a password */
        if (ep.unix_path != NULL && ep.unix_path[0] != '/')
            abort(); /* credentials never leak into the socket path */
        /* A cluster URL: at least one seed, each with a host and a port, the first one
         * also in host and port; never a unix path or a database. */
        if (ep.cluster && (ep.nseeds < 1 || ep.unix_path != NULL || ep.db != 0 ||
                           strcmp(ep.host, ep.seeds[0].host) != 0 || ep.port != ep.seeds[0].port))
            abort();
        for (int i = 0; i < ep.nseeds; i++)
            if (ep.seeds[i].host == NULL || ep.seeds[i].port < 1 || ep.seeds[i].port > 65535)
                abort();
        if (!ep.cluster && ep.nseeds != 0)
            abort();
    } else if (st == CRD_INVALID_ARGUMENT) {
        if (memchr(err, '\0', sizeof err) == NULL || err[0] == '\0')
            abort(); /* a refusal always says why */
    } else if (st != CRD_NO_MEMORY) {
        abort();
    }
    crd__endpoint_clear(&ep);

    crd__sentinel_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    err[0] = '\0';
    st = crd__sentinel_url_parse(url, &cfg, err, sizeof err);
    if (st == CRD_OK) {
        if (cfg.naddrs == 0 || cfg.master == NULL || cfg.master[0] == '\0' || cfg.db < 0)
            abort();
        if (cfg.tls != (strncmp(url, "rediss-sentinel://", 18) == 0))
            abort();
        for (size_t i = 0; i < cfg.naddrs; i++) {
            const crd__endpoint *s = &cfg.addrs[i];
            if (s->host == NULL || s->unix_path != NULL || s->port < 1 || s->port > 65535)
                abort();
            if (s->username != NULL && s->password == NULL)
                abort();
            if ((s->password == NULL) != (cfg.addrs[0].password == NULL))
                abort(); /* one set of sentinel credentials for all */
        }
    } else if (st == CRD_INVALID_ARGUMENT) {
        if (memchr(err, '\0', sizeof err) == NULL || err[0] == '\0' || cfg.naddrs != 0 ||
            cfg.master != NULL)
            abort(); /* says why, and leaves nothing behind */
    } else if (st != CRD_NO_MEMORY) {
        abort();
    }
    crd__sentinel_cfg_clear(&cfg);

    memset(&cfg, 0, sizeof cfg);
    st = crd__sentinel_addrs_parse(url, &cfg, err, sizeof err);
    if (st == CRD_OK) {
        for (size_t i = 0; i < cfg.naddrs; i++)
            if (cfg.addrs[i].host == NULL || cfg.addrs[i].port < 1 || cfg.addrs[i].port > 65535)
                abort();
    } else if (st != CRD_INVALID_ARGUMENT && st != CRD_NO_MEMORY) {
        abort();
    }
    crd__sentinel_cfg_clear(&cfg);
    free(url);
    return 0;
}
