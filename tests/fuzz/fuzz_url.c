/*
 * fuzz_url.c -- libFuzzer target for crd__url_parse (src/url.c): any bytes as the
 * crd_options.url string. The parser must return CRD_OK or CRD_INVALID_ARGUMENT (or
 * CRD_NO_MEMORY), never read past the string, leak, or leave a half-filled endpoint:
 * on success a host or a unix path is set, the port is 1..65535 and the db >= 0, TLS
 * only for a rediss:// URL (never with a unix path), a user name only with a password
 * (a redis-cluster:// URL: every seed has a host and a port, the first is also host and
 * port); on failure the reason is a NUL-terminated message.
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
        if (ep.tls != (strncmp(url, "rediss://", 9) == 0) || (ep.tls && ep.unix_path != NULL))
            abort(); /* TLS exactly for rediss://, and never over a unix socket */
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
    free(url);
    return 0;
}
