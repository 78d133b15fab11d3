/*
 * judge.c - one request, from nghttp2's callbacks to the answer APNs gives.
 *
 * Header values the verdict needs are copied into the stream as they arrive
 * (fixed buffers, no allocation); the verdict is taken when the request's
 * END_STREAM arrives, in the order capns_mock.h documents. Answers are
 * submitted at once or, with latency configured, when their timer fires.
 *
 * Invariant: a mock_stream lives exactly as long as nghttp2's stream: made in
 * on_begin_headers, freed in on_stream_close (or with its connection).
 */
#include "mock_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEVICE_PREFIX "/3/device/"
#define DEVICE_PREFIX_LEN (sizeof DEVICE_PREFIX - 1)
#define PROVIDER_TOKEN_MAX_AGE_S 3600
#define PROVIDER_TOKEN_SKEW_S 60

/* ------------------------------------------------------------ streams */

static mock_stream *stream_new(mock_conn *c, int32_t id)
{
    mock_loop *loop = c->loop;
    mock_stream *s = loop->free_streams;
    if (s)
        loop->free_streams = s->next;
    else if (!(s = malloc(sizeof *s)))
        return NULL;
    /* Clear the small fields only: the buffers are written before read. */
    memset(s, 0, offsetof(mock_stream, path));
    s->path.len = s->auth.len = s->topic.len = s->push_type.len = 0;
    s->apns_id.len = s->priority.len = s->expiration.len = 0;
    s->collapse_len = s->body_len = 0;
    s->rec_headers = NULL;
    s->rec_len = s->rec_cap = s->rec_n = 0;
    s->rec_method[0] = '\0';
    s->answer = (mock_answer){0, R_NONE, -1};
    s->resp_len = s->resp_off = 0;
    s->id = id;
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    return s;
}

void mock__stream_free(mock_loop *loop, mock_stream *s)
{
    mock__channels_stream_free(s);
    free(s->rec_headers);
    s->rec_headers = NULL;
    s->next = loop->free_streams;
    loop->free_streams = s;
}

static void stream_unlink(mock_conn *c, mock_stream *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
}

/* ------------------------------------------------------------- checks */

/* 1 for the bytes of lower-case hex digits. */
static const uint8_t lower_hex[256] = {['0' ... '9'] = 1, ['a' ... 'f'] = 1};

/* Every byte a lower-case hex digit: one lookup a byte and no branch, since every
 * request's token and apns-id pass here. */
static bool all_lower_hex(const char *s, size_t len)
{
    unsigned ok = 1;
    for (size_t i = 0; i < len; i++)
        ok &= lower_hex[(uint8_t)s[i]];
    return ok;
}

static bool is_device_token(const char *t, size_t len)
{
    return len >= 64 && len <= 200 && len % 2 == 0 && all_lower_hex(t, len);
}

/* 8-4-4-4-12 lower-case hex, as APNs wants apns-id (and a broadcast's apns-request-id). */
bool mock__is_uuid(const char *u, size_t len)
{
    return len == 36 && u[8] == '-' && u[13] == '-' && u[18] == '-' && u[23] == '-' && all_lower_hex(u, 8) &&
           all_lower_hex(u + 9, 4) && all_lower_hex(u + 14, 4) && all_lower_hex(u + 19, 4) &&
           all_lower_hex(u + 24, 12);
}

static bool all_digits(const char *v, size_t len)
{
    if (len == 0 || len > 19)
        return false;
    for (size_t i = 0; i < len; i++)
        if (v[i] < '0' || v[i] > '9')
            return false;
    return true;
}

#define FIELD_IS(f, lit) ((f).len == sizeof(lit) - 1 && memcmp((f).v, lit, sizeof(lit) - 1) == 0)

/* The topic suffix each push type requires; NULL for an unknown type. */
static const char *suffix_for(const char *type, size_t len)
{
    static const struct { const char *type, *suffix; } table[] = {
        {"alert", ""}, {"background", ""}, {"mdm", ""},
        {"voip", ".voip"}, {"complication", ".complication"},
        {"fileprovider", ".pushkit.fileprovider"}, {"location", ".location-query"},
        {"pushtotalk", ".voip-ptt"}, {"liveactivity", ".push-type.liveactivity"},
        {"widgets", ".push-type.widgets"}, {"controls", ".push-type.controls"},
        {"accessory", ".push-type.accessory"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strlen(table[i].type) == len && memcmp(table[i].type, type, len) == 0)
            return table[i].suffix;
    return NULL;
}

static bool topic_chars_ok(const char *t, size_t len)
{
    if (len == 0 || len >= MOCK_TOPIC_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = t[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '_'))
            return false;
    }
    return true;
}

/* R_NONE, or why the topic does not fit a configured bundle id + suffix. */
static int check_topic(capns_mock *m, const char *topic, size_t len, const char *suffix)
{
    size_t slen = strlen(suffix);
    bool known_app = false;
    for (size_t i = 0; i < m->n_topics; i++) {
        size_t blen = strlen(m->topics[i]);
        if (len < blen || memcmp(topic, m->topics[i], blen) != 0)
            continue;
        if (len == blen + slen && memcmp(topic + blen, suffix, slen) == 0)
            return R_NONE;
        known_app = true;
    }
    return known_app ? R_DEVICE_TOKEN_NOT_FOR_TOPIC : R_TOPIC_DISALLOWED;
}

/* The expire_first_token fault: true once the first valid token is used up.
 * `use` counts this request as a use of it. */
static bool first_token_spent(capns_mock *m, bool use)
{
    if (!m->cfg.expire_first_token)
        return false;
    uint64_t uses = use ? atomic_fetch_add_explicit(&m->first_token_uses, 1, memory_order_relaxed)
                        : atomic_load_explicit(&m->first_token_uses, memory_order_relaxed);
    return uses >= m->cfg.expire_first_token_after;
}

/* The provider token: the connection's own when unchanged (one memcmp on the
 * hot path), else a cached or fresh verification and the per-connection rules. */
static mock_answer check_auth(mock_conn *c, mock_stream *s)
{
    capns_mock *m = c->loop->mock;
    int64_t now_s = mock__wall_s() + m->cfg.clock_offset_s;
    if (!(s->seen & H_AUTH))
        return (mock_answer){403, R_MISSING_PROVIDER_TOKEN, -1};
    /* CAPTURE keeps MOCK_AUTH_MAX - 1 bytes: a value of MOCK_AUTH_MAX is cut already. */
    if (s->auth.len >= MOCK_AUTH_MAX || s->auth.len <= 7 || strncasecmp(s->auth.v, "bearer ", 7) != 0)
        return (mock_answer){403, R_INVALID_PROVIDER_TOKEN, -1};
    const char *jwt = s->auth.v + 7;
    size_t len = s->auth.len - 7;

    if (!(c->jwt && c->jwt_len == len && memcmp(c->jwt, jwt, len) == 0)) {
        mock_jwt_result r;
        mock__jwt_check(m, jwt, len, &r);
        if (r.reason != R_NONE || r.iat > now_s + PROVIDER_TOKEN_SKEW_S)
            return (mock_answer){403, R_INVALID_PROVIDER_TOKEN, -1};
        if (now_s - r.iat > PROVIDER_TOKEN_MAX_AGE_S || (r.first && first_token_spent(m, false)))
            return (mock_answer){403, R_EXPIRED_PROVIDER_TOKEN, -1};
        if (c->team >= 0 && r.team != c->team)
            return (mock_answer){403, R_INVALID_PROVIDER_TOKEN, -1};
        /* A key restricted to one environment is refused by the other's servers. */
        int here = m->cfg.sandbox ? MOCK_ENV_SANDBOX : MOCK_ENV_PRODUCTION;
        int serves = m->keys[r.key].environment;
        if (serves && serves != here)
            return (mock_answer){403, R_BAD_ENVIRONMENT_KEY_ID_IN_TOKEN, -1};
        /* The connection belongs to the key of its first push, not only to its team. */
        if (c->key >= 0 && r.key != c->key)
            return (mock_answer){403, R_UNRELATED_KEY_ID_IN_TOKEN, -1};
        int64_t interval = m->cfg.token_update_interval_s * 1000000000;
        if (c->jwt && c->loop->now_ns - c->jwt_since_ns < interval)
            return (mock_answer){429, R_TOO_MANY_PROVIDER_TOKEN_UPDATES, -1};
        char *copy = malloc(len);
        if (!copy)
            return (mock_answer){500, R_INTERNAL_SERVER_ERROR, -1};
        memcpy(copy, jwt, len);
        free(c->jwt);
        c->jwt = copy;
        c->jwt_len = len;
        c->team = r.team;
        c->key = r.key;
        c->jwt_iat = r.iat;
        c->jwt_first = r.first;
        c->jwt_since_ns = c->loop->now_ns;
    }
    if (now_s - c->jwt_iat > PROVIDER_TOKEN_MAX_AGE_S || (c->jwt_first && first_token_spent(m, true)))
        return (mock_answer){403, R_EXPIRED_PROVIDER_TOKEN, -1};
    return (mock_answer){0, R_NONE, -1};
}

static mock_answer check_headers(capns_mock *m, mock_stream *s)
{
    if (!(s->seen & H_TOPIC))
        return (mock_answer){400, R_MISSING_TOPIC, -1};
    const char *suffix = (s->seen & H_PUSH_TYPE) ? suffix_for(s->push_type.v, s->push_type.len) : NULL;
    if (!suffix)
        return (mock_answer){400, R_INVALID_PUSH_TYPE, -1};
    if (!topic_chars_ok(s->topic.v, s->topic.len))
        return (mock_answer){400, R_BAD_TOPIC, -1};
    int topic = check_topic(m, s->topic.v, s->topic.len, suffix);
    if (topic != R_NONE)
        return (mock_answer){400, topic, -1};
    if ((s->seen & H_ID) && !mock__is_uuid(s->apns_id.v, s->apns_id.len))
        return (mock_answer){400, R_BAD_MESSAGE_ID, -1};
    if (s->seen & H_PRIORITY) {
        bool p10 = FIELD_IS(s->priority, "10");
        bool ok = p10 || FIELD_IS(s->priority, "5") || FIELD_IS(s->priority, "1");
        if (!ok || (p10 && FIELD_IS(s->push_type, "background")))
            return (mock_answer){400, R_BAD_PRIORITY, -1};
    }
    if ((s->seen & H_EXPIRATION) && !all_digits(s->expiration.v, s->expiration.len))
        return (mock_answer){400, R_BAD_EXPIRATION_DATE, -1};
    if (s->collapse_len > 64)
        return (mock_answer){400, R_BAD_COLLAPSE_ID, -1};
    return (mock_answer){0, R_NONE, -1};
}

/* A topic-specific key pushes only to its own bundle ids, with any push type's
 * suffix: R_NONE, or 400 TopicMismatch. Connections authenticated otherwise
 * (certificate, no key yet) pass. */
static mock_answer check_key_topic(mock_conn *c, mock_stream *s)
{
    capns_mock *m = c->loop->mock;
    if (c->key < 0 || (s->seen & H_AUTH) == 0 || m->keys[c->key].n_topics == 0)
        return (mock_answer){0, R_NONE, -1};
    const mock_key *k = &m->keys[c->key];
    const char *suffix = suffix_for(s->push_type.v, s->push_type.len);
    size_t slen = suffix ? strlen(suffix) : 0;
    for (size_t i = 0; i < k->n_topics; i++) {
        size_t blen = strlen(k->topics[i]);
        if (s->topic.len == blen + slen && memcmp(s->topic.v, k->topics[i], blen) == 0 &&
            memcmp(s->topic.v + blen, suffix, slen) == 0)
            return (mock_answer){0, R_NONE, -1};
    }
    return (mock_answer){400, R_TOPIC_MISMATCH, -1};
}

/* A widgets push carries one thing, {"aps":{"content-changed":true}}: true when
 * the body is that, whatever white space surrounds its tokens. */
static bool is_widgets_body(const uint8_t *b, size_t len)
{
    static const char want[] = "{\"aps\":{\"content-changed\":true}}";
    size_t k = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char ch = (char)b[i];
        if (!in_string && (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'))
            continue;
        if (k == sizeof want - 1 || ch != want[k++])
            return false;
        if (ch == '"')
            in_string = !in_string;
    }
    return k == sizeof want - 1;
}

static mock_answer check_payload(mock_stream *s)
{
    size_t limit = FIELD_IS(s->push_type, "voip") ? 5120 : 4096;
    if (s->body_len == 0)
        return (mock_answer){400, R_PAYLOAD_EMPTY, -1};
    if (s->body_len > limit)
        return (mock_answer){413, R_PAYLOAD_TOO_LARGE, -1};
    if (!mock__json_is_object(s->body, s->body_len))
        return (mock_answer){400, R_BAD_PAYLOAD, -1};
    if (FIELD_IS(s->push_type, "widgets") && !is_widgets_body(s->body, s->body_len))
        return (mock_answer){400, R_BAD_PAYLOAD, -1};
    return (mock_answer){0, R_NONE, -1};
}

/* Uniform in [0, 1) from the connection's generator. */
static double rng_unit(mock_conn *c)
{
    return (double)(mock__rng_next(&c->rng) >> 11) / 9007199254740992.0;
}

static mock_answer random_failure(capns_mock *m, mock_conn *c)
{
    const capns_mock_config *cfg = &m->cfg;
    if (cfg->rate_429 <= 0 && cfg->rate_500 <= 0 && cfg->rate_503 <= 0)
        return (mock_answer){0, R_NONE, -1};
    double r = rng_unit(c);
    if (r < cfg->rate_429)
        return (mock_answer){429, R_TOO_MANY_REQUESTS, -1};
    if (r < cfg->rate_429 + cfg->rate_500)
        return (mock_answer){500, R_INTERNAL_SERVER_ERROR, -1};
    if (r < cfg->rate_429 + cfg->rate_500 + cfg->rate_503)
        return (mock_answer){503, R_SERVICE_UNAVAILABLE, -1};
    return (mock_answer){0, R_NONE, -1};
}

static bool all_zero(const char *token, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (token[i] != '0')
            return false;
    return true;
}

static mock_answer decide(mock_conn *c, mock_stream *s)
{
    capns_mock *m = c->loop->mock;
    mock_answer a;
    /* Broadcast channels (channels.c): their own routes, after the same
     * duplicate-header and provider token checks as a device push. */
    if (mock__channels_claims(m, s)) {
        if (s->dup)
            return (mock_answer){400, R_DUPLICATE_HEADERS, -1};
        if ((a = check_auth(c, s)).status)
            return a;
        return mock__channels_decide(c, s);
    }
    if (!s->post)
        return (mock_answer){405, R_METHOD_NOT_ALLOWED, -1};
    if (s->path.len < DEVICE_PREFIX_LEN || memcmp(s->path.v, DEVICE_PREFIX, DEVICE_PREFIX_LEN) != 0)
        return (mock_answer){404, R_BAD_PATH, -1};
    const char *token = s->path.v + DEVICE_PREFIX_LEN;
    size_t tlen = s->path.len - DEVICE_PREFIX_LEN;
    if (tlen == 0)
        return (mock_answer){400, R_MISSING_DEVICE_TOKEN, -1};
    if (s->path.len > MOCK_PATH_MAX || !is_device_token(token, tlen))
        return (mock_answer){400, R_BAD_DEVICE_TOKEN, -1};

    mock_answer scripted;
    int64_t unregistered_ts;
    mock__tokens_attempt(&m->tokens, token, tlen, &scripted, &unregistered_ts);

    if (s->dup)
        return (mock_answer){400, R_DUPLICATE_HEADERS, -1};
    /* Certificate auth when the request carries no provider token (client_cert.c). */
    bool by_certificate = !(s->seen & H_AUTH) && c->cert.present;
    if ((a = by_certificate ? mock__client_cert_judge(c, s) : check_auth(c, s)).status ||
        (a = check_headers(m, s)).status || (a = check_key_topic(c, s)).status ||
        (a = check_payload(s)).status)
        return a;
    /* APNs never issues the all-zero token: a well-formed token that only the
     * device check refuses, after the credentials were judged. */
    if (all_zero(token, tlen))
        return (mock_answer){400, R_BAD_DEVICE_TOKEN, -1};
    if (scripted.status)
        return scripted;
    if (unregistered_ts >= 0)
        return (mock_answer){410, R_UNREGISTERED, unregistered_ts};
    if (m->cfg.idle_500_after_ms > 0 && c->last_answer_ns &&
        c->loop->now_ns - c->last_answer_ns >= m->cfg.idle_500_after_ms * 1000000)
        return (mock_answer){500, R_INTERNAL_SERVER_ERROR, -1};
    return random_failure(m, c);    /* status 0 means 200 */
}

/* ------------------------------------------------------------ answers */

/* A version 4 UUID from the connection's generator, lower-case, NUL-terminated. */
static void fresh_uuid(mock_conn *c, char out[40])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t b[16];
    uint64_t hi = mock__rng_next(&c->rng), lo = mock__rng_next(&c->rng);
    memcpy(b, &hi, 8);
    memcpy(b + 8, &lo, 8);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);     /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);     /* RFC 4122 variant */
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[b[i] >> 4];
        *p++ = hex[b[i] & 15];
    }
    *p = '\0';
}

void mock__uuid(mock_conn *c, char out[40])
{
    fresh_uuid(c, out);
}

static ssize_t read_body(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                               uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    mock_stream *s = src->ptr;
    size_t n = s->resp_len - s->resp_off;
    if (n > len)
        n = len;
    memcpy(buf, s->resp_body + s->resp_off, n);
    s->resp_off += n;
    if (s->resp_off == s->resp_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v, vl) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NO_COPY_NAME}

static void answer(mock_conn *c, mock_stream *s)
{
    if (s->ch.route != ROUTE_DEVICE) {
        mock__channels_answer(c, s);
        return;
    }
    capns_mock *m = c->loop->mock;
    mock_answer a = s->answer;
    int status = a.status ? a.status : 200;
    s->answered = true;
    if (mock__is_uuid(s->apns_id.v, s->apns_id.len))
        memcpy(s->answer_id, s->apns_id.v, 36);
    else
        fresh_uuid(c, s->answer_id);
    s->status_text[0] = (char)('0' + status / 100 % 10);
    s->status_text[1] = (char)('0' + status / 10 % 10);
    s->status_text[2] = (char)('0' + status % 10);

    nghttp2_nv nv[5] = {
        NV(":status", s->status_text, 3),
        NV("apns-id", s->answer_id, 36),
    };
    size_t n = 2;
    nghttp2_data_provider body = {.source.ptr = s, .read_callback = read_body};
    if (status == 200) {
        if (m->cfg.sandbox) {
            fresh_uuid(c, s->unique_id);
            nv[n++] = (nghttp2_nv)NV("apns-unique-id", s->unique_id, 36);
        }
    } else {
        const char *reason = capns_mock_reason_name(a.reason);
        int len = a.status == 410
            ? snprintf(s->resp_body, sizeof s->resp_body, "{\"reason\":\"%s\",\"timestamp\":%lld}", reason,
                       (long long)a.timestamp_ms)
            : snprintf(s->resp_body, sizeof s->resp_body, "{\"reason\":\"%s\"}", reason);
        s->resp_len = (size_t)len;
        nv[n++] = (nghttp2_nv)NV("content-type", "application/json", 16);
        /* The server's clock, as a client checking its own reads it from an error
         * answer (a 200 carries none: the hot path stays as small as APNs keeps it). */
        time_t now = (time_t)(mock__wall_s() + m->cfg.clock_offset_s);
        struct tm tm;
        size_t dlen = strftime(s->date, sizeof s->date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
        if (dlen)
            nv[n++] = (nghttp2_nv)NV("date", s->date, dlen);
    }
    nghttp2_submit_response(c->h2, s->id, nv, n, status == 200 ? NULL : &body);

    MOCK_ADD(m, requests, 1);
    MOCK_ADD(m, status[status % 600], 1);
    MOCK_ADD(m, reasons[a.reason], 1);
    c->last_answer_ns = c->loop->now_ns;
    if (status == 200 && !c->raised) {
        c->raised = true;
        mock__conn_apply_limit(c);
    }
}

void mock__judge_answer_due(mock_conn *c, int32_t stream_id)
{
    mock_stream *s = nghttp2_session_get_stream_user_data(c->h2, stream_id);
    if (s && !s->answered)
        answer(c, s);
}

/* ---------------------------------------------------------- recording */

static void record_header(mock_stream *s, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen)
{
    size_t need = s->rec_len + nlen + vlen + 2;
    if (need > s->rec_cap) {
        size_t cap = need < 1024 ? 1024 : need * 2;
        char *p = realloc(s->rec_headers, cap);
        if (!p)
            return;
        s->rec_headers = p;
        s->rec_cap = cap;
    }
    memcpy(s->rec_headers + s->rec_len, name, nlen);
    s->rec_headers[s->rec_len + nlen] = '\0';
    memcpy(s->rec_headers + s->rec_len + nlen + 1, value, vlen);
    s->rec_headers[s->rec_len + nlen + 1 + vlen] = '\0';
    s->rec_len = need;
    s->rec_n++;
}

/* One allocation: the record, its header array, then the strings and body.
 * `a` is the answer decided on, NULL when there is none (stall). */
static void record_request(mock_conn *c, mock_stream *s, const mock_answer *a)
{
    size_t body = s->body_len < MOCK_BODY_MAX ? s->body_len : MOCK_BODY_MAX;
    size_t path = s->path.len < MOCK_PATH_MAX ? s->path.len : MOCK_PATH_MAX;
    size_t size = sizeof(capns_mock_record) + s->rec_n * sizeof(capns_mock_header) + s->rec_len +
                  sizeof s->rec_method + path + 1 + body;
    capns_mock_record *r = malloc(size);
    if (!r)
        return;
    capns_mock_header *h = (capns_mock_header *)(r + 1);
    char *p = (char *)(h + s->rec_n);
    if (s->rec_len)             /* rec_headers is NULL when no header was recorded */
        memcpy(p, s->rec_headers, s->rec_len);
    for (size_t i = 0; i < s->rec_n; i++) {
        h[i].name = p;
        p += strlen(p) + 1;
        h[i].value = p;
        p += strlen(p) + 1;
    }
    r->method = memcpy(p, s->rec_method, sizeof s->rec_method);
    p += sizeof s->rec_method;
    r->path = memcpy(p, s->path.v, path);
    p[path] = '\0';
    p += path + 1;
    r->body = memcpy(p, s->body, body);
    r->body_len = body;
    r->headers = h;
    r->n_headers = s->rec_n;
    r->connection_id = c->id;
    r->stream_id = s->id;
    r->received_ns = mock__now_ns();     /* not the loop's cached time: backoff spacing is measured with it */
    r->status = !a ? 0 : a->status ? a->status : 200;
    r->reason = capns_mock_reason_name(a ? a->reason : R_NONE);
    mock__records_add(&c->loop->mock->records, r);
}

/* ---------------------------------------------------------- callbacks */

/* The per-connection faults that count requests: GOAWAY and SETTINGS drop. */
static void count_request(mock_conn *c, int32_t id)
{
    const capns_mock_config *cfg = &c->loop->mock->cfg;
    c->begun++;
    if (cfg->goaway_after && c->begun == cfg->goaway_after) {
        nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR, NULL, 0);
        c->goaway_sent = true;
        c->goaway_last = id;
        MOCK_ADD(c->loop->mock, goaways_sent, 1);
    }
    if (cfg->settings_drop_after && c->begun == cfg->settings_drop_after) {
        c->dropped = true;
        c->restore_at = cfg->settings_restore_after ? c->begun + cfg->settings_restore_after : 0;
        mock__conn_apply_limit(c);
    } else if (c->restore_at && c->begun == c->restore_at) {
        c->dropped = false;
        mock__conn_apply_limit(c);
        c->restore_seq = c->settings_out;
    }
}

static void raise_to(atomic_uint_fast64_t *max, uint64_t value)
{
    uint64_t seen = atomic_load_explicit(max, memory_order_relaxed);
    while (seen < value &&
           !atomic_compare_exchange_weak_explicit(max, &seen, value, memory_order_relaxed, memory_order_relaxed))
        ;
}

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    mock_conn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (c->goaway_sent && f->hd.stream_id > c->goaway_last)
        return 0;               /* not processed: no state, never answered */
    mock_stream *s = stream_new(c, f->hd.stream_id);
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(h2, f->hd.stream_id, s);
    MOCK_ADD(c->loop->mock, streams, 1);
    if (++c->open_streams > c->peak_streams) {
        c->peak_streams = c->open_streams;
        raise_to(&c->loop->mock->counters.max_streams_seen, c->peak_streams);
    }
    if (c->restore_seq && c->settings_acked >= c->restore_seq)
        raise_to(&c->loop->mock->counters.max_streams_restored, c->open_streams);
    count_request(c, f->hd.stream_id);
    s->ordinal = c->begun;
    return 0;
}

/* Copies a header value into a capture field, keeping its real length. */
#define CAPTURE(field, value, vlen)                                               \
    do {                                                                          \
        size_t n_ = (vlen) < sizeof(field).v - 1 ? (vlen) : sizeof(field).v - 1; \
        memcpy((field).v, (value), n_);                                           \
        (field).v[n_] = '\0';                                                     \
        (field).len = (vlen);                                                     \
    } while (0)

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    mock_conn *c = ud;
    mock_stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    /* Only the request's own header block: a trailer (HEADERS after DATA, category
     * NGHTTP2_HCAT_HEADERS) is not where APNs reads apns-topic or authorization. */
    if (!s || f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
#define NAME_IS(lit) (nlen == sizeof(lit) - 1 && memcmp(name, lit, sizeof(lit) - 1) == 0)
    unsigned bit = 0;
    if (NAME_IS(":method")) {
        s->post = vlen == 4 && memcmp(value, "POST", 4) == 0;
        size_t n = vlen < sizeof s->rec_method - 1 ? vlen : sizeof s->rec_method - 1;
        memcpy(s->rec_method, value, n);
        s->rec_method[n] = '\0';
    } else if (NAME_IS(":path")) {
        CAPTURE(s->path, value, vlen);
    } else if (NAME_IS("authorization")) {
        bit = H_AUTH;
        CAPTURE(s->auth, value, vlen);
    } else if (NAME_IS("apns-topic")) {
        bit = H_TOPIC;
        CAPTURE(s->topic, value, vlen);
    } else if (NAME_IS("apns-push-type")) {
        bit = H_PUSH_TYPE;
        CAPTURE(s->push_type, value, vlen);
    } else if (NAME_IS("apns-id")) {
        bit = H_ID;
        CAPTURE(s->apns_id, value, vlen);
    } else if (NAME_IS("apns-priority")) {
        bit = H_PRIORITY;
        CAPTURE(s->priority, value, vlen);
    } else if (NAME_IS("apns-expiration")) {
        bit = H_EXPIRATION;
        CAPTURE(s->expiration, value, vlen);
    } else if (NAME_IS("apns-collapse-id")) {
        bit = H_COLLAPSE;
        s->collapse_len = vlen;
    } else if (NAME_IS("apns-channel-id")) {
        bit = H_CHANNEL_ID;
        CAPTURE(s->ch.channel_id, value, vlen);
    } else if (NAME_IS("apns-request-id")) {
        bit = H_REQUEST_ID;
        CAPTURE(s->ch.request_id, value, vlen);
    }
#undef NAME_IS
    s->dup |= s->seen & bit;
    s->seen |= bit;
    if (c->loop->mock->cfg.record_cap && nlen && name[0] != ':')
        record_header(s, name, nlen, value, vlen);
    return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                         void *ud)
{
    mock_stream *s = nghttp2_session_get_stream_user_data(h2, id);
    if (!s)
        return 0;
    if (s->body_len < MOCK_BODY_MAX) {
        size_t n = MOCK_BODY_MAX - s->body_len < len ? MOCK_BODY_MAX - s->body_len : len;
        memcpy(s->body + s->body_len, data, n);
    }
    s->body_len += len;
    return 0;
}

/* The whole request is in: judge it, then answer now or when its timer fires. */
static void request_done(mock_conn *c, mock_stream *s)
{
    capns_mock *m = c->loop->mock;
    const capns_mock_config *cfg = &m->cfg;
    if (cfg->reset_after && s->ordinal == cfg->reset_after) {
        c->reset_pending = true;
        return;
    }
    bool stalled = cfg->stall ||
        (cfg->stall_after &&
         atomic_fetch_add_explicit(&m->received, 1, memory_order_relaxed) >= cfg->stall_after);
    if (stalled) {
        if (cfg->record_cap)
            record_request(c, s, NULL);
        return;
    }
    mock_answer a = decide(c, s);
    s->answer = a;
    if (cfg->record_cap)
        record_request(c, s, &a);
    int64_t delay_ns = cfg->latency_us * 1000;
    if (cfg->jitter_us > 0)
        delay_ns += (int64_t)(mock__rng_next(&c->rng) % (uint64_t)(cfg->jitter_us * 1000));
    if (delay_ns <= 0) {
        answer(c, s);
        return;
    }
    mock_timer t = {c->loop->now_ns + delay_ns, c, s->id, T_ANSWER};
    if (mock__timer_push(&c->loop->timers, t) == 0)
        c->refs++;
    else
        answer(c, s);
}

/* A request's header block: its HEADERS payload less padding and priority
 * fields, plus any CONTINUATION frames (counted as they began). */
static void count_header_block(mock_conn *c, const nghttp2_frame *f)
{
    capns_mock *m = c->loop->mock;
    size_t bytes = f->hd.length - f->headers.padlen - (f->hd.flags & NGHTTP2_FLAG_PRIORITY ? 5 : 0)
                   + c->continuation_bytes;
    c->continuation_bytes = 0;
    MOCK_ADD(m, header_blocks, 1);
    MOCK_ADD(m, header_block_bytes, bytes);
    if (++c->header_blocks > CAPNS_MOCK_HEADER_WARMUP) {
        MOCK_ADD(m, warm_header_blocks, 1);
        MOCK_ADD(m, warm_header_block_bytes, bytes);
    }
}

static int on_begin_frame(nghttp2_session *h2, const nghttp2_frame_hd *hd, void *ud)
{
    mock_conn *c = ud;
    if (hd->type == NGHTTP2_CONTINUATION)
        c->continuation_bytes += hd->length;
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    mock_conn *c = ud;
    if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK))
        c->settings_acked++;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        count_header_block(c, f);
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    mock_stream *s = nghttp2_session_get_stream_user_data(h2, f->hd.stream_id);
    if (s)
        request_done(c, s);
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error_code, void *ud)
{
    mock_conn *c = ud;
    mock_stream *s = nghttp2_session_get_stream_user_data(h2, id);
    if (!s)
        return 0;
    nghttp2_session_set_stream_user_data(h2, id, NULL);
    stream_unlink(c, s);
    c->open_streams--;
    mock__stream_free(c->loop, s);
    return 0;
}

/* nghttp2 enforces our stream limit before a request reaches on_begin_headers:
 * above a limit the client has not acknowledged it refuses the stream, above
 * one it has it ends the connection. Both are counted here. */
static int on_invalid_frame(nghttp2_session *h2, const nghttp2_frame *f, int error, void *ud)
{
    mock_conn *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (error == NGHTTP2_ERR_REFUSED_STREAM)
        MOCK_ADD(c->loop->mock, streams_refused, 1);
    else if (c->open_streams >= nghttp2_session_get_local_settings(h2, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        MOCK_ADD(c->loop->mock, streams_over_limit, 1);
    return 0;
}

void mock__judge_callbacks(nghttp2_session_callbacks *cbs)
{
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, on_invalid_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
}
