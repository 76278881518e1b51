/*
 * json.c -- JSON strings for the --json outputs of status, watch and list: control
 * characters escaped, valid UTF-8 passed through, each byte of an invalid sequence (a
 * binary lock name) printed as U+FFFD so that the output stays valid JSON.
 */
#include "cli.h"

#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (at most len bytes), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len)
{
    size_t n;
    uint32_t cp;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        n = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        n = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        n = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* Overlong forms, UTF-16 surrogates, beyond U+10FFFF. */
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

size_t cli_put_utf8(FILE *f, const unsigned char *s, size_t len, const char *bad)
{
    size_t n = utf8_seq(s, len);
    if (n == 0) {
        fputs(bad, f);
        return 1;
    }
    fwrite(s, 1, n, f);
    return n;
}

void cli_json_string(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    putchar('"');
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            putchar('\\');
            putchar(c);
        } else if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c == '\r') {
            fputs("\\r", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c < 0x20 || c == 0x7f) {
            printf("\\u%04x", c);
        } else {
            i += cli_put_utf8(stdout, u + i, len - i, "\\ufffd");
            continue;
        }
        i++;
    }
    putchar('"');
}
