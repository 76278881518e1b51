/*
 * url.h -- the URL forms of crd_options.url, parsed into an endpoint. Declared apart
 * from internal.h because the CLI compiles url.c too (its status and watch commands
 * open raw connections and must read --url exactly as the library does).
 */
#ifndef CRD_URL_H
#define CRD_URL_H

#include <stddef.h>

#include "credisson.h"

typedef struct crd__endpoint {
    char *host;
    int port;
    char *unix_path;
    char *username;
    char *password;
    int db;
} crd__endpoint;

/* Parses a redis:// or unix:// URL into *out (cleared first). On failure writes a
 * reason into err and leaves *out empty. Pure function; any thread. */
crd_status crd__url_parse(const char *url, crd__endpoint *out, char *err, size_t errlen);
void crd__endpoint_clear(crd__endpoint *ep);

#endif
