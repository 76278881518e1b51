/*
 * crd_driver.c -- the C side of the interop suite, driven one command per line.
 *
 * What it provides
 *   A process that holds one credisson client and answers commands read from stdin,
 *   one line each, with one JSON object per line on stdout, so that a scenario script
 *   can interleave C and Node steps deterministically. All commands run on the main
 *   thread, so every hold has the same owner id (crd_owner_current()) and repeated
 *   `lock` calls are reentrant, as in a Java thread.
 *
 * Usage
 *   crd_interop_driver [--host H] [--port P] [--watchdog-ms N] [--unsafe-names]
 *
 * Commands (NAME is a plain token, or hex:<bytes in hex> for names with spaces or
 * other odd bytes; times are milliseconds)
 *   hello                      -> {"id": client uuid, "owner": owner id, "field": F}
 *   lock NAME WAIT LEASE       crd_lock_acquire (WAIT -1 = forever, LEASE -1 = watchdog)
 *   unlock NAME                crd_lock_release
 *   force NAME                 crd_lock_force_unlock, answers "was_locked"
 *   locked NAME                crd_lock_is_locked, answers "locked"
 *   count NAME                 crd_lock_hold_count, answers "count"
 *   ttl NAME                   crd_lock_remaining_ttl, answers "ttl"
 *   waitevent KIND TIMEOUT     wait for the next unconsumed watchdog event of KIND
 *                              (lost | failing | recovered); answers its time "t"
 *   now                        answers "t"
 *   quit
 * Every answer has "ok" (the status was CRD_OK), "status" (the crd_status name),
 * "t0"/"t1" (CLOCK_MONOTONIC in microseconds before and after the call; node's
 * process.hrtime reads the same clock on Linux) and, on failure, "detail".
 *
 * Threads: the main thread, plus the client's watchdog thread, which only appends to
 * the event list under ev_mu.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "credisson.h"

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- watchdog events, recorded on the watchdog thread ---------------------------- */

#define EV_MAX 256
typedef struct ev_rec {
    crd_event_kind kind;
    int64_t t;
    bool consumed;
} ev_rec;

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv;
static ev_rec ev_list[EV_MAX];
static size_t ev_n;

static void on_event(void *user_data, const crd_event *event)
{
    (void)user_data;
    int64_t t = mono_us();
    pthread_mutex_lock(&ev_mu);
    if (ev_n < EV_MAX) {
        ev_list[ev_n].kind = event->kind;
        ev_list[ev_n].t = t;
        ev_list[ev_n].consumed = false;
        ev_n++;
    }
    pthread_cond_broadcast(&ev_cv);
    pthread_mutex_unlock(&ev_mu);
}

/* Wait (bounded) for the first unconsumed event of kind; returns its time or -1. */
static int64_t wait_event(crd_event_kind kind, int64_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    int64_t found = -1;
    pthread_mutex_lock(&ev_mu);
    for (;;) {
        for (size_t i = 0; i < ev_n; i++) {
            if (!ev_list[i].consumed && ev_list[i].kind == kind) {
                ev_list[i].consumed = true;
                found = ev_list[i].t;
                break;
            }
        }
        if (found >= 0)
            break;
        if (pthread_cond_timedwait(&ev_cv, &ev_mu, &dl) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&ev_mu);
    return found;
}

/* ---- lock handles by name --------------------------------------------------------- */

typedef struct handle {
    char *name;
    size_t len;
    crd_lock *lock;
} handle;

static handle *handles;
static size_t n_handles;

static crd_status get_lock(crd_client *c, const char *name, size_t len, crd_lock **out)
{
    for (size_t i = 0; i < n_handles; i++) {
        if (handles[i].len == len && memcmp(handles[i].name, name, len) == 0) {
            *out = handles[i].lock;
            return CRD_OK;
        }
    }
    crd_lock *l = NULL;
    crd_status st = crd_lock_new_n(c, name, len, &l);
    if (st != CRD_OK)
        return st;
    handle *grown = realloc(handles, (n_handles + 1) * sizeof *handles);
    char *copy = malloc(len + 1);
    if (!grown || !copy) {
        free(copy);
        if (grown)
            handles = grown;
        crd_lock_free(l);
        return CRD_NO_MEMORY;
    }
    handles = grown;
    memcpy(copy, name, len);
    copy[len] = '\0';
    handles[n_handles].name = copy;
    handles[n_handles].len = len;
    handles[n_handles].lock = l;
    n_handles++;
    *out = l;
    return CRD_OK;
}

/* ---- output ----------------------------------------------------------------------- */

static const char *status_name(crd_status st)
{
    switch (st) {
    case CRD_OK: return "OK";
    case CRD_BUSY: return "BUSY";
    case CRD_TIMEOUT: return "TIMEOUT";
    case CRD_NOT_OWNER: return "NOT_OWNER";
    case CRD_LOCK_LOST: return "LOCK_LOST";
    case CRD_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case CRD_IO: return "IO";
    case CRD_PROTOCOL: return "PROTOCOL";
    case CRD_SERVER: return "SERVER";
    case CRD_NO_MEMORY: return "NO_MEMORY";
    case CRD_CLOSED: return "CLOSED";
    case CRD_AUTH: return "AUTH";
    case CRD_DEADLOCK: return "DEADLOCK";
    case CRD_FORKED: return "FORKED";
    case CRD_SKIPPED: return "SKIPPED";
    case CRD_DEGRADED: return "DEGRADED";
    case CRD_CANCELLED: return "CANCELLED";
    case CRD_NOT_SYNCED: return "NOT_SYNCED";
    case CRD_OUTCOME_UNKNOWN: return "OUTCOME_UNKNOWN";
    case CRD_SYNC_UNAVAILABLE: return "SYNC_UNAVAILABLE";
    case CRD_INTERRUPTED: return "INTERRUPTED";
    }
    return "UNKNOWN";
}

/* Print s as a JSON string (the detail texts are ASCII; escape what JSON needs). */
static void put_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

/* Start an answer: {"ok":..,"status":..,"t0":..,"t1":.. ; the caller adds fields and
 * calls end_answer(). */
static void begin_answer(crd_client *c, crd_status st, int64_t t0, int64_t t1)
{
    printf("{\"ok\":%s,\"status\":\"%s\",\"t0\":%" PRId64 ",\"t1\":%" PRId64,
           st == CRD_OK ? "true" : "false", status_name(st), t0, t1);
    if (st != CRD_OK && st != CRD_BUSY && st != CRD_TIMEOUT) {
        printf(",\"detail\":");
        put_json_string(c ? crd_client_errmsg(c) : "");
    }
}

static void end_answer(void)
{
    printf("}\n");
    fflush(stdout);
}

/* The whole answer to a call that ran from t0 until now and gives one value. */
static void answer_bool(crd_client *c, crd_status st, int64_t t0, const char *field, bool v)
{
    begin_answer(c, st, t0, mono_us());
    printf(",\"%s\":%s", field, v ? "true" : "false");
    end_answer();
}

static void answer_i64(crd_client *c, crd_status st, int64_t t0, const char *field, int64_t v)
{
    begin_answer(c, st, t0, mono_us());
    printf(",\"%s\":%" PRId64, field, v);
    end_answer();
}

static void answer_error(const char *msg)
{
    printf("{\"ok\":false,\"status\":\"USAGE\",\"detail\":");
    put_json_string(msg);
    end_answer();
}

/* ---- parsing ---------------------------------------------------------------------- */

/* Decode a NAME token in place: "hex:..." becomes its bytes. Returns the length or
 * (size_t)-1 on bad hex. */
static size_t decode_name(char *tok)
{
    if (strncmp(tok, "hex:", 4) != 0)
        return strlen(tok);
    const char *h = tok + 4;
    size_t n = strlen(h);
    if (n % 2 || strspn(h, "0123456789abcdefABCDEF") != n)
        return (size_t)-1;
    for (size_t i = 0; i < n / 2; i++) {
        char pair[3] = {h[2 * i], h[2 * i + 1], '\0'};
        tok[i] = (char)strtol(pair, NULL, 16);
    }
    tok[n / 2] = '\0';
    return n / 2;
}

static bool parse_i64(const char *s, int64_t *out)
{
    if (!s)
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    crd_options opts;
    crd_options_init(&opts);
    opts.on_event = on_event;
    for (int i = 1; i < argc; i++) {
        int64_t v = 0;
        if (strcmp(argv[i], "--host") == 0 && i + 1 < argc) {
            opts.host = argv[++i];
        } else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc && parse_i64(argv[i + 1], &v)) {
            opts.port = (int)v;
            i++;
        } else if (strcmp(argv[i], "--watchdog-ms") == 0 && i + 1 < argc &&
                   parse_i64(argv[i + 1], &v)) {
            opts.watchdog_timeout_ms = v;
            i++;
        } else if (strcmp(argv[i], "--unsafe-names") == 0) {
            opts.allow_unsafe_names = true;
        } else {
            fprintf(stderr, "usage: %s [--host H] [--port P] [--watchdog-ms N] [--unsafe-names]\n",
                    argv[0]);
            return 64;
        }
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ev_cv, &ca);

    crd_client *c = NULL;
    crd_status st = crd_client_new(&opts, &c);
    if (st != CRD_OK) {
        printf("{\"ok\":false,\"status\":\"%s\",\"detail\":", status_name(st));
        put_json_string(c ? crd_client_errmsg(c) : "no memory");
        end_answer();
        crd_client_free(c);
        return 69;
    }

    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        char *save = NULL;
        char *cmd = strtok_r(line, " ", &save);
        if (!cmd)
            continue;
        char *a1 = strtok_r(NULL, " ", &save);
        char *a2 = strtok_r(NULL, " ", &save);
        char *a3 = strtok_r(NULL, " ", &save);

        if (strcmp(cmd, "quit") == 0) {
            printf("{\"ok\":true,\"status\":\"OK\"}\n");
            fflush(stdout);
            break;
        }
        if (strcmp(cmd, "now") == 0) {
            int64_t t = mono_us();
            printf("{\"ok\":true,\"status\":\"OK\",\"t\":%" PRId64, t);
            end_answer();
            continue;
        }
        if (strcmp(cmd, "hello") == 0) {
            uint64_t owner = crd_owner_current();
            printf("{\"ok\":true,\"status\":\"OK\",\"id\":\"%s\",\"owner\":%" PRIu64
                   ",\"field\":\"%s:%" PRIu64 "\",\"version\":\"%s\"",
                   crd_client_id(c), owner, crd_client_id(c), owner, crd_version());
            end_answer();
            continue;
        }
        if (strcmp(cmd, "waitevent") == 0) {
            int64_t timeout = 0;
            crd_event_kind kind;
            if (a1 && strcmp(a1, "lost") == 0)
                kind = CRD_EVENT_LOCK_LOST;
            else if (a1 && strcmp(a1, "failing") == 0)
                kind = CRD_EVENT_RENEWAL_FAILING;
            else if (a1 && strcmp(a1, "recovered") == 0)
                kind = CRD_EVENT_RENEWAL_RECOVERED;
            else {
                answer_error("waitevent lost|failing|recovered TIMEOUT_MS");
                continue;
            }
            if (!parse_i64(a2, &timeout) || timeout < 0) {
                answer_error("waitevent: bad timeout");
                continue;
            }
            int64_t t0 = mono_us();
            int64_t t = wait_event(kind, timeout);
            answer_i64(c, t >= 0 ? CRD_OK : CRD_TIMEOUT, t0, "t", t);
            continue;
        }

        /* Everything else takes a NAME. */
        if (!a1) {
            answer_error("missing NAME");
            continue;
        }
        size_t len = decode_name(a1);
        if (len == (size_t)-1) {
            answer_error("bad hex name");
            continue;
        }
        crd_lock *l = NULL;
        int64_t t0 = mono_us();
        st = get_lock(c, a1, len, &l);
        if (st != CRD_OK) {
            begin_answer(c, st, t0, mono_us());
            end_answer();
            continue;
        }
        if (strcmp(cmd, "lock") == 0) {
            int64_t wait_ms = 0, lease_ms = 0;
            if (!parse_i64(a2, &wait_ms) || !parse_i64(a3, &lease_ms)) {
                answer_error("lock NAME WAIT_MS LEASE_MS");
                continue;
            }
            t0 = mono_us();
            st = crd_lock_acquire(l, wait_ms, lease_ms);
            int64_t t1 = mono_us();
            begin_answer(c, st, t0, t1);
            end_answer();
        } else if (strcmp(cmd, "unlock") == 0) {
            t0 = mono_us();
            st = crd_lock_release(l);
            int64_t t1 = mono_us();
            begin_answer(c, st, t0, t1);
            end_answer();
        } else if (strcmp(cmd, "force") == 0) {
            bool was = false;
            t0 = mono_us();
            st = crd_lock_force_unlock(l, &was);
            answer_bool(c, st, t0, "was_locked", was);
        } else if (strcmp(cmd, "locked") == 0) {
            bool locked = false;
            t0 = mono_us();
            st = crd_lock_is_locked(l, &locked);
            answer_bool(c, st, t0, "locked", locked);
        } else if (strcmp(cmd, "count") == 0) {
            int64_t n = 0;
            t0 = mono_us();
            st = crd_lock_hold_count(l, &n);
            answer_i64(c, st, t0, "count", n);
        } else if (strcmp(cmd, "ttl") == 0) {
            int64_t ttl = 0;
            t0 = mono_us();
            st = crd_lock_remaining_ttl(l, &ttl);
            answer_i64(c, st, t0, "ttl", ttl);
        } else {
            answer_error("unknown command");
        }
    }
    free(line);
    for (size_t i = 0; i < n_handles; i++) {
        crd_lock_free(handles[i].lock);
        free(handles[i].name);
    }
    free(handles);
    crd_client_free(c);
    return 0;
}
