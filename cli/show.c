/*
 * show.c -- what status, list and watch say of a state (crd_state) and of the process
 * behind an owner (crd_identity): durations for people, identities in words and in JSON,
 * values for key=value text lines. Pure; main thread only.
 */
#include "cli.h"

#include <string.h>

const char *cli_age(int64_t ms, char *buf, size_t cap)
{
    if (ms < 0) {
        snprintf(buf, cap, "?");
    } else if (ms < 1000) {
        snprintf(buf, cap, "%lld ms", (long long)ms);
    } else {
        long long s = ms / 1000, m = s / 60, h = m / 60, d = h / 24;
        if (s < 60)
            snprintf(buf, cap, "%lld s", s);
        else if (m < 60)
            snprintf(buf, cap, "%lld min %lld s", m, s % 60);
        else if (h < 24)
            snprintf(buf, cap, "%lld h %lld min", h, m % 60);
        else
            snprintf(buf, cap, "%lld d %lld h", d, h % 24);
    }
    return buf;
}

const char *cli_who(const crd_identity *who, char *buf, size_t cap)
{
    crd_identity_describe(who, buf, cap);
    return buf;
}

void cli_json_ms(const char *key, int64_t v)
{
    if (v >= 0)
        printf(",\"%s\":%lld", key, (long long)v);
    else
        printf(",\"%s\":null", key);
}

void cli_json_who(const crd_identity *w)
{
    fputs("{\"client_id\":", stdout);
    cli_json_string(w->client_id, strlen(w->client_id));
    printf(",\"thread\":%llu,\"known\":%s", (unsigned long long)w->thread,
           w->known ? "true" : "false");
    if (w->known) {
        const struct {
            const char *k, *v;
        } s[] = {{"host", w->host},
                 {"program", w->program},
                 {"label", w->label},
                 {"version", w->version}};
        for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
            printf(",\"%s\":", s[i].k);
            cli_json_string(s[i].v, strlen(s[i].v));
        }
        printf(",\"pid\":%lld,\"started_ms\":%lld", (long long)w->pid, (long long)w->started_ms);
    }
    fputs(",\"connections\":", stdout);
    cli_json_string(w->connections, strlen(w->connections));
    fputs("}", stdout);
}

void cli_text_value(const char *s)
{
    if (*s != '\0' && strpbrk(s, " \t\"=\\\n") == NULL) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\')
            putchar('\\');
        putchar(*p == '\n' || *p == '\t' ? ' ' : *p);
    }
    putchar('"');
}

void cli_json_holders(const crd_state *st)
{
    fputs(",\"holders\":[", stdout);
    for (size_t i = 0; i < st->nholders; i++) {
        const crd_holder *h = &st->holders[i];
        fputs(i ? ",{\"owner\":" : "{\"owner\":", stdout);
        cli_json_string(h->owner, strlen(h->owner));
        printf(",\"count\":%lld,\"writer\":%s,\"ttl_ms\":%lld", (long long)h->count,
               h->writer ? "true" : "false", (long long)h->ttl_ms);
        cli_json_ms("since_ms", h->since_ms);
        cli_json_ms("held_ms", h->held_ms);
        printf(",\"watching\":%s,\"who\":", h->watching ? "true" : "false");
        cli_json_who(&h->who);
        fputs("}", stdout);
    }
    fputs("]", stdout);
}
