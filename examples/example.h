/* example.h -- what every example does the same way: connect a client to the Redis URL
 * given as its first argument, and say on stderr why a call failed. Not part of the
 * library (which never prints): a program of your own does this its own way. Header-only
 * and found next to the example that includes it, so each example still builds from its
 * one source file: cc -o basic_lock basic_lock.c $(pkg-config --cflags --libs credisson) */
#ifndef EXAMPLE_H
#define EXAMPLE_H

#include <credisson.h>
#include <stdio.h>

#define EXAMPLE_DEFAULT_URL "redis://127.0.0.1:6379"

/* Prints "WHAT: <status text>: <the client's detail>" to stderr when st is not CRD_OK.
 * Call it before the next call on the client: the detail is that of the last call. */
static inline void report_failure(const char *what, crd_status st, const crd_client *client)
{
    if (st != CRD_OK)
        fprintf(stderr, "%s: %s: %s\n", what, crd_strerror(st), crd_client_errmsg(client));
}

/* A client connected to argv[1], or to EXAMPLE_DEFAULT_URL when there is no argument.
 * opts carries an example's own settings (NULL: the defaults); its url is set here. On
 * failure says why, frees the failed client and returns NULL. */
static inline crd_client *connect_client(int argc, char **argv, crd_options *opts)
{
    crd_options defaults;
    if (opts == NULL) {
        crd_options_init(&defaults);
        opts = &defaults;
    }
    opts->url = argc > 1 ? argv[1] : EXAMPLE_DEFAULT_URL;
    crd_client *client = NULL;
    crd_status st = crd_client_new(opts, &client);
    if (st != CRD_OK) {
        report_failure("connect", st, client);
        crd_client_free(client);
        return NULL;
    }
    return client;
}

#endif
