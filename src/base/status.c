/*
 * status.c -- status texts, the version string, the per-thread detail message, and the
 * check every call makes first: may this client handle be used here and now.
 *
 * The detail message is thread-local so that many threads sharing one client each see
 * the words of their own last failure, errno-style. No lock is taken.
 */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *crd_version(void) { return CRD_VERSION_STRING; }

const char *crd_strerror(crd_status status)
{
    switch (status) {
    case CRD_OK: return "success";
    case CRD_BUSY: return "lock held by another owner";
    case CRD_TIMEOUT: return "timed out waiting for the lock";
    case CRD_NOT_OWNER: return "lock not held by this owner";
    case CRD_LOCK_LOST: return "lock lost (expired or force-unlocked)";
    case CRD_INVALID_ARGUMENT: return "invalid argument";
    case CRD_IO: return "connection error";
    case CRD_PROTOCOL: return "unexpected reply from Redis";
    case CRD_SERVER: return "Redis replied with an error";
    case CRD_NO_MEMORY: return "out of memory";
    case CRD_CLOSED: return "client closed";
    case CRD_AUTH: return "authentication or database selection refused";
    case CRD_DEADLOCK: return "request can never succeed for this owner";
    case CRD_FORKED: return "handle used in a forked child";
    case CRD_SKIPPED: return "Redis unavailable: the work was skipped";
    case CRD_DEGRADED: return "Redis unavailable: the work ran without the lock";
    case CRD_CANCELLED: return "operation cancelled";
    case CRD_NOT_SYNCED: return "no replica acknowledged the write in time (replica sync)";
    case CRD_OUTCOME_UNKNOWN: return "the reply was lost: the operation may or may not have run";
    case CRD_SYNC_UNAVAILABLE: return "replica sync asked for, but the server refuses WAIT";
    case CRD_INTERRUPTED: return "the wait was interrupted";
    }
    return "unknown status";
}

static _Thread_local struct {
    const void *client;
    char msg[512];
} tls_err;

/* In parentheses: internal.h may define a crd__fail macro for the static analyzer. */
crd_status (crd__fail)(const crd_client *c, crd_status status, const char *fmt, ...)
{
    /* Format into a temporary: callers may pass the current message as an argument. */
    char msg[sizeof tls_err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tls_err.client = c;
    memcpy(tls_err.msg, msg, sizeof msg);
    return status;
}

void crd__ok(const crd_client *c)
{
    if (tls_err.client == c)
        tls_err.msg[0] = '\0';
}

const char *crd_client_errmsg(const crd_client *client)
{
    if (tls_err.client == client && tls_err.msg[0] != '\0')
        return tls_err.msg;
    if (client != NULL && client->failed)
        return client->errmsg_init;
    return "";
}

crd_status crd__client_check(crd_client *c)
{
    if (c == NULL)
        return crd__fail(NULL, CRD_INVALID_ARGUMENT, "client is NULL");
    if (c->failed)
        return crd__fail(c, CRD_CLOSED, "client failed to start: %s", c->errmsg_init);
    if (atomic_load(&c->closed))
        return crd__fail(c, CRD_CLOSED, "client is closed");
    if (c->pid != crd__process_pid())
        return crd__fail(c, CRD_FORKED, "client was created in another process");
    return CRD_OK;
}

crd_status crd__client_check_out(crd_client *c, const void *out)
{
    crd_status st = crd__client_check(c);
    if (st == CRD_OK && out == NULL)
        st = crd__fail(c, CRD_INVALID_ARGUMENT, "out is NULL");
    return st;
}
