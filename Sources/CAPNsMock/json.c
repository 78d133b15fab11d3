/*
 * json.c - a small JSON syntax check (is this payload one object?) and a
 * reader for the flat objects inside provider tokens.
 *
 * Recursive descent over the bytes, no allocation. Depth is bounded so a
 * payload of 4096 '[' cannot run the stack down; APNs payloads are shallow.
 */
#include "mock_internal.h"

#include <string.h>

#define JSON_DEPTH_MAX 32

typedef struct {
    const uint8_t *p, *end;
    int depth;
} json_cursor;

static void skip_ws(json_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool is_hex(uint8_t ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* At the opening quote; leaves the cursor after the closing one. UTF-8 is
 * taken as given: control characters are what the grammar forbids. */
static bool parse_string(json_cursor *c)
{
    c->p++;
    while (c->p < c->end) {
        uint8_t ch = *c->p++;
        if (ch == '"')
            return true;
        if (ch < 0x20)
            return false;
        if (ch != '\\')
            continue;
        if (c->p >= c->end)
            return false;
        ch = *c->p++;
        if (ch == 'u') {
            if (c->end - c->p < 4)
                return false;
            for (int i = 0; i < 4; i++)
                if (!is_hex(c->p[i]))
                    return false;
            c->p += 4;
        } else if (!strchr("\"\\/bfnrt", ch)) {
            return false;
        }
    }
    return false;
}

static bool digits(json_cursor *c)
{
    const uint8_t *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
        c->p++;
    return c->p > start;
}

static bool parse_number(json_cursor *c)
{
    if (*c->p == '-')
        c->p++;
    if (c->p < c->end && *c->p == '0')
        c->p++;                 /* no leading zeros: "0" stands alone */
    else if (!digits(c))
        return false;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!digits(c))
            return false;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        if (!digits(c))
            return false;
    }
    return true;
}

static bool literal(json_cursor *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool parse_value(json_cursor *c);

/* Objects and arrays share the loop: members separated by ',' until close. */
static bool parse_container(json_cursor *c, uint8_t close, bool keyed)
{
    if (++c->depth > JSON_DEPTH_MAX)
        return false;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        c->depth--;
        return true;
    }
    for (;;) {
        if (keyed) {
            if (c->p >= c->end || *c->p != '"' || !parse_string(c))
                return false;
            skip_ws(c);
            if (c->p >= c->end || *c->p++ != ':')
                return false;
        }
        if (!parse_value(c))
            return false;
        skip_ws(c);
        if (c->p >= c->end)
            return false;
        uint8_t ch = *c->p++;
        if (ch == close)
            break;
        if (ch != ',')
            return false;
        skip_ws(c);
    }
    c->depth--;
    return true;
}

static bool parse_value(json_cursor *c)
{
    skip_ws(c);
    if (c->p >= c->end)
        return false;
    switch (*c->p) {
    case '{': return parse_container(c, '}', true);
    case '[': return parse_container(c, ']', false);
    case '"': return parse_string(c);
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default: return parse_number(c);
    }
}

bool mock__json_is_object(const uint8_t *buf, size_t len)
{
    json_cursor c = {buf, buf + len, 0};
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{' || !parse_value(&c))
        return false;
    skip_ws(&c);
    return c.p == c.end;
}

/* Finds the top-level member named key of a valid object and leaves the
 * cursor at its value. Keys with escapes never match: tokens do not use them. */
static bool find_member(json_cursor *c, const char *key)
{
    size_t klen = strlen(key);
    if (!mock__json_is_object(c->p, (size_t)(c->end - c->p)))
        return false;
    skip_ws(c);
    c->p++;
    for (;;) {
        skip_ws(c);
        if (*c->p != '"')
            return false;       /* "}" of an empty object */
        const uint8_t *name = c->p + 1;
        parse_string(c);
        bool match = (size_t)(c->p - 1 - name) == klen && memcmp(name, key, klen) == 0;
        skip_ws(c);
        c->p++;                 /* ':' */
        skip_ws(c);
        if (match)
            return true;
        parse_value(c);
        skip_ws(c);
        if (*c->p++ != ',')
            return false;
    }
}

bool mock__json_get_string(const char *buf, size_t len, const char *key, char *out, size_t outlen)
{
    json_cursor c = {(const uint8_t *)buf, (const uint8_t *)buf + len, 0};
    if (!find_member(&c, key) || *c.p != '"')
        return false;
    const uint8_t *start = c.p + 1;
    parse_string(&c);
    size_t n = (size_t)(c.p - 1 - start);
    if (n >= outlen || memchr(start, '\\', n))
        return false;
    memcpy(out, start, n);
    out[n] = '\0';
    return true;
}

bool mock__json_get_int(const char *buf, size_t len, const char *key, int64_t *out)
{
    json_cursor c = {(const uint8_t *)buf, (const uint8_t *)buf + len, 0};
    if (!find_member(&c, key))
        return false;
    bool neg = *c.p == '-';
    if (neg)
        c.p++;
    int64_t v = 0;
    int n = 0;
    while (c.p < c.end && *c.p >= '0' && *c.p <= '9' && n < 18) {
        v = v * 10 + (*c.p++ - '0');
        n++;
    }
    /* An integer: digits only, not "12.5" or "1e3", and not absurdly long. */
    if (n == 0 || (c.p < c.end && strchr(".eE0123456789", *c.p)))
        return false;
    *out = neg ? -v : v;
    return true;
}
