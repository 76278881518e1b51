/*
 * script.c -- runs the embedded Lua scripts (the lua/ folder, compiled in with the SHA1 of
 * their exact bytes by cmake/embed_lua.cmake).
 *
 * Every call is EVALSHA. A NOSCRIPT reply means Redis did not run the script (its cache
 * was flushed, or this is a fresh replica), so resending it as one EVAL with the same
 * arguments is safe: nothing ran twice. Any other failure is returned as it is. Runs on
 * the caller's thread with the caller's connection; no lock.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

crd_status crd__script_run(crd_client *c, crd__conn *conn, int script, int nkeys,
                           const char **keys, const size_t *keylens, int nargs,
                           const char **args, const size_t *arglens, redisReply **reply)
{
    const crd__script_src *src = &crd__scripts[script];
    int argc = 3 + nkeys + nargs;
    const char *stack_argv[24];
    size_t stack_lens[24];
    const char **argv = stack_argv;
    size_t *lens = stack_lens;
    if (argc > 24) {
        argv = malloc(sizeof *argv * (size_t)argc);
        lens = malloc(sizeof *lens * (size_t)argc);
        if (argv == NULL || lens == NULL) {
            free(argv);
            free(lens);
            return crd__fail(c, CRD_NO_MEMORY, "cannot allocate script arguments");
        }
    }
    char numkeys[16];
    snprintf(numkeys, sizeof numkeys, "%d", nkeys);
    argv[0] = "EVALSHA";
    lens[0] = 7;
    argv[1] = src->sha1;
    lens[1] = 40;
    argv[2] = numkeys;
    lens[2] = strlen(numkeys);
    for (int i = 0; i < nkeys; i++) {
        argv[3 + i] = keys[i];
        lens[3 + i] = keylens[i];
    }
    for (int i = 0; i < nargs; i++) {
        argv[3 + nkeys + i] = args[i];
        lens[3 + nkeys + i] = arglens[i];
    }
    redisReply *r = NULL;
    crd_status st = crd__conn_command(c, conn, argc, argv, lens, &r);
    if (st == CRD_OK && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        r = NULL;
        argv[0] = "EVAL";
        lens[0] = 4;
        argv[1] = src->text;
        lens[1] = src->len;
        st = crd__conn_command(c, conn, argc, argv, lens, &r);
    }
    if (argv != stack_argv) {
        free(argv);
        free(lens);
    }
    *reply = r;
    return st;
}
