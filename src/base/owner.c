/*
 * owner.c -- who is asking: the process (its pid, kept across fork), owner ids, client
 * UUIDs and request ids.
 *
 * A thread's owner id comes from one process-wide 64-bit counter, taken on first use
 * and kept in thread-local storage; explicit ids come from the same counter, so no two
 * ever collide and none is ever reused (pthread_t and gettid() are recycled by the OS,
 * which would let a new thread re-enter a dead thread's hold). A pthread key destructor
 * tells the client registry when a thread that had an id exits.
 */
#include "base.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <uuid/uuid.h>

static atomic_uint_fast64_t next_owner = 1;
/* This process's pid, refreshed by the fork child handler, so that the per-call check for
 * a handle used across fork() costs a load instead of a getpid() system call. */
static atomic_int current_pid;

void crd__process_refresh(void) { atomic_store(&current_pid, (int)getpid()); }

pid_t crd__process_pid(void)
{
    return (pid_t)atomic_load_explicit(&current_pid, memory_order_relaxed);
}

static _Thread_local uint64_t tls_owner;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static void (*exit_hook)(uint64_t owner);

static void on_thread_exit(void *value)
{
    uint64_t owner = (uint64_t)(uintptr_t)value;
    if (exit_hook != NULL && owner != 0)
        exit_hook(owner);
}

static void make_key(void) { pthread_key_create(&exit_key, on_thread_exit); }

void crd__owner_set_exit_hook(void (*hook)(uint64_t owner))
{
    pthread_once(&key_once, make_key);
    exit_hook = hook;
}

uint64_t crd_owner_new(void) { return atomic_fetch_add(&next_owner, 1); }

uint64_t crd_owner_current(void)
{
    if (tls_owner == 0) {
        tls_owner = crd_owner_new();
        pthread_once(&key_once, make_key);
        /* Owner ids fit in a pointer on every platform we build for (64-bit). */
        pthread_setspecific(exit_key, (void *)(uintptr_t)tls_owner);
    }
    return tls_owner;
}

char *crd__put_u64(char *p, uint64_t v)
{
    /* On every acquire, release and renewal (owner fields, RESP lengths, leases): printf
     * was a measurable share of the hot path's CPU. Most numbers written are RESP lengths
     * and argument counts under 100: one or two digits without the loop. */
    if (v < 10) {
        *p++ = (char)('0' + v);
        return p;
    }
    if (v < 100) {
        p[0] = (char)('0' + v / 10);
        p[1] = (char)('0' + v % 10);
        return p + 2;
    }
    char digits[20];
    int k = 0;
    do {
        digits[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (k > 0)
        *p++ = digits[--k];
    return p;
}

size_t crd__owner_field(const char *uuid, uint64_t owner, char *buf)
{
    memcpy(buf, uuid, 36);
    buf[36] = ':';
    char *end = crd__put_u64(buf + 37, owner);
    *end = '\0';
    return (size_t)(end - buf);
}

/* Random bytes for request ids, drawn from the OS 256 bytes at a time per thread, so a
 * release does not cost a system call. */
static _Thread_local struct {
    unsigned char bytes[256];
    size_t left;
} tls_rand;

/* In a forked child (run on its only thread, the one that forked): never hand out the
 * bytes the parent may also hand out. */
void crd__random_after_fork(void)
{
    memset(&tls_rand, 0, sizeof tls_rand);
}

crd_status crd__random_hex32(char out[33])
{
    static const char hex[] = "0123456789abcdef";
    if (tls_rand.left < 16) {
        size_t got = 0;
        while (got < sizeof tls_rand.bytes) {
            ssize_t n = getrandom(tls_rand.bytes + got, sizeof tls_rand.bytes - got, 0);
            if (n <= 0)
                return CRD_IO;
            got += (size_t)n;
        }
        tls_rand.left = sizeof tls_rand.bytes;
    }
    unsigned char *b = tls_rand.bytes + sizeof tls_rand.bytes - tls_rand.left;
    tls_rand.left -= 16;
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[32] = '\0';
    return CRD_OK;
}

void crd__uuid_v4(char out[37])
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, out);
}
