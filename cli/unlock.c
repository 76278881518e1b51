/*
 * unlock.c -- `credisson unlock --force [--fair|--read|--write] NAME`: Redisson's
 * forceUnlock (DEL, then PUBLISH on the lock's channel) through the library, which
 * refuses a key that is not a lock (a data key is never deleted by mistake); the
 * explicit --delete-non-lock deletes it anyway.
 */
#include "cli.h"

#include <string.h>

static void usage_unlock(FILE *f)
{
    fprintf(f, "usage: credisson [GLOBAL OPTIONS] unlock --force [--fair|--read|--write]\n"
               "                 [--delete-non-lock] NAME\n"
               "\n"
               "Delete lock NAME whoever holds it and wake a waiter (Redisson's forceUnlock:\n"
               "DEL, then PUBLISH on its channel). The holders find out that they lost it; a\n"
               "'credisson run' holding it exits with 70. Prints whether a lock was deleted.\n"
               "--force is required: a lock belongs to the process that took it, so there is no\n"
               "ordinary unlock from the command line.\n"
               "\n"
               "Options:\n"
               "  --force      required\n"
               "  --fair       NAME is a fair lock: wake the head of its queue instead\n"
               "  --read       delete NAME only if it is read-locked (publishes 0)\n"
               "  --write      delete NAME only if it is write-locked (publishes 1)\n"
               "  --delete-non-lock\n"
               "               NAME holds something that is not a lock (a string, a list, a\n"
               "               hash of other fields): delete it all the same. Without it such\n"
               "               a key is left alone and the exit status is 65\n"
               "  -h, --help   this help\n"
               "\n"
               "Exit codes: 0 (whether or not a lock was deleted), 64 usage error, 65 NAME is\n"
               "not a lock (nothing deleted), 69 Redis unreachable or refusing.\n");
}

/* --delete-non-lock: a plain DEL of the key the library refused to treat as a lock. */
static int delete_anyway(crd_client *client, const char *name)
{
    bool deleted = false;
    crd_status st = crd_object_delete(client, name, strlen(name), &deleted);
    if (st != CRD_OK) {
        cli_report("unlock", "cannot delete", st, client);
        return cli_exit_for_status(st);
    }
    printf("deleted: %s (it was not a lock; --delete-non-lock)\n", name);
    return 0;
}

int cmd_unlock(const global_opts *g, int argc, char **argv)
{
    cli_kind kind = CLI_RLOCK;
    int kinds_seen = 0;
    bool force = false, any_type = false;
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            usage_unlock(stdout);
            return 0;
        } else if (strcmp(a, "--force") == 0) {
            force = true;
        } else if (strcmp(a, "--delete-non-lock") == 0) {
            any_type = true;
        } else if (cli_take_kind(a, &kind, &kinds_seen)) {
            if (kinds_seen > 1)
                return cli_usage_error("unlock", "--fair, --read and --write exclude each other");
        } else {
            int rc = cli_take_name_arg("unlock", argc, argv, &i, &name);
            if (rc != 0)
                return rc;
        }
    }
    if (name == NULL)
        return cli_usage_error("unlock", "missing lock NAME");
    if (!force)
        return cli_usage_error("unlock",
                               "--force is required: only the holder can release a lock normally");

    crd_client *client;
    int rc = cli_make_client(g, "unlock", NULL, &client);
    if (rc != 0)
        return rc;
    cli_lock held;
    crd_status st = cli_open_lock(client, kind, name, &held);
    crd_lock *lock = held.lock;
    if (st != CRD_OK) {
        cli_report("unlock", "bad lock name", st, client);
        crd_client_free(client);
        return cli_exit_for_status(st);
    }
    bool was_locked = false;
    st = crd_lock_force_unlock(lock, &was_locked);
    rc = cli_exit_for_status(st);
    if (st == CRD_INVALID_ARGUMENT && strstr(crd_client_errmsg(client), "not a lock") != NULL) {
        if (any_type) {
            rc = delete_anyway(client, name);
        } else {
            cli_error("unlock", "%s (--delete-non-lock deletes it)", crd_client_errmsg(client));
            rc = EXIT_NOT_A_LOCK;
        }
    } else if (st != CRD_OK) {
        char what[300];
        snprintf(what, sizeof what, "cannot force-unlock '%.200s'", name);
        cli_report("unlock", what, st, client);
    } else if (was_locked) {
        printf("unlocked: %s (a lock was deleted)\n", name);
    } else {
        printf("not locked: %s (nothing deleted)\n", name);
    }
    cli_close_lock(&held);
    crd_client_free(client);
    return rc;
}
