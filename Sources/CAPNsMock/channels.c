/*
 * channels.c - broadcast channels (iOS 18): the channel store, the management
 * routes (/1/apps/<bundle>/channels, /all-channels) and broadcast sends
 * (/4/broadcasts/apps/<bundle>), answered as APNS-PROTOCOL.md's "Broadcast
 * push (iOS 18)" says APNs answers them.
 *
 * Apple serves management on its own host (api-manage-broadcast...:2196); the
 * mock serves it on its one port, beside device pushes, so a test points both
 * endpoints at it.
 *
 * Invariants: every input read here is a fixed-size capture of the stream
 * (path, channel id, request id, body up to MOCK_BODY_MAX), so parsing is
 * bounded whatever a client sends. The store is shared by every loop thread
 * and changed only under its lock; an answer's heap body belongs to its stream
 * and is freed with it.
 */
#include "mock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANAGE_PREFIX "/1/apps/"
#define BROADCAST_PREFIX "/4/broadcasts/apps/"

/* ------------------------------------------------------------- store */

void mock__channels_init(mock_channels *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
}

void mock__channels_free(mock_channels *t)
{
    free(t->items);
    t->items = NULL;
    t->count = t->cap = 0;
    pthread_mutex_destroy(&t->lock);
}

static size_t channel_limit(const capns_mock *m)
{
    return m->cfg.channel_limit ? m->cfg.channel_limit : MOCK_CHANNEL_LIMIT;
}

/* Index of the bundle's channel named id, or -1. Caller holds the lock. */
static long find_locked(const mock_channels *t, int bundle, const char *id)
{
    for (size_t i = 0; i < t->count; i++)
        if (t->items[i].bundle == bundle && strcmp(t->items[i].id, id) == 0)
            return (long)i;
    return -1;
}

void mock__channels_stats(capns_mock *m, capns_mock_stats *out)
{
    mock_channels *t = &m->channels;
    pthread_mutex_lock(&t->lock);
    out->channels_current = t->count;
    out->channels_created = t->created;
    out->channels_deleted = t->deleted;
    out->channels_refused = t->refused;
    pthread_mutex_unlock(&t->lock);
}

/* ------------------------------------------------------------ routing */

/* The bundle named by path[0..len), -1 when no configured bundle has that name. */
static int bundle_index(const capns_mock *m, const char *name, size_t len)
{
    for (size_t i = 0; i < m->n_topics; i++)
        if (strlen(m->topics[i]) == len && memcmp(m->topics[i], name, len) == 0)
            return (int)i;
    return -1;
}

static bool has_prefix(const char *s, size_t len, const char *prefix, size_t plen)
{
    return len > plen && memcmp(s, prefix, plen) == 0;
}

bool mock__channels_claims(capns_mock *m, mock_stream *s)
{
    /* A path cut by the capture is not one of ours: MOCK_PATH_MAX is far above
     * any bundle id; the device judge answers it (404 BadPath). */
    if (s->path.len >= MOCK_PATH_MAX)
        return false;
    const char *p = s->path.v;
    size_t len = s->path.len;
    const char *name;
    size_t nlen;
    if (has_prefix(p, len, MANAGE_PREFIX, sizeof MANAGE_PREFIX - 1)) {
        name = p + sizeof MANAGE_PREFIX - 1;
        const char *slash = memchr(name, '/', len - (size_t)(name - p));
        if (!slash)
            return false;
        nlen = (size_t)(slash - name);
        size_t rest = len - (size_t)(slash - p);
        if (rest == sizeof "/channels" - 1 && memcmp(slash, "/channels", rest) == 0)
            s->ch.route = ROUTE_CHANNELS;
        else if (rest == sizeof "/all-channels" - 1 && memcmp(slash, "/all-channels", rest) == 0)
            s->ch.route = ROUTE_ALL_CHANNELS;
        else
            return false;
    } else if (has_prefix(p, len, BROADCAST_PREFIX, sizeof BROADCAST_PREFIX - 1)) {
        name = p + sizeof BROADCAST_PREFIX - 1;
        nlen = len - (sizeof BROADCAST_PREFIX - 1);
        if (memchr(name, '/', nlen))
            return false;
        s->ch.route = ROUTE_BROADCAST;
    } else {
        return false;
    }
    s->ch.bundle = nlen ? bundle_index(m, name, nlen) : -1;
    return true;
}

/* --------------------------------------------------------------- checks */

/* Standard base64 (A-Z a-z 0-9 + /, "=" padding only at the end), a multiple
 * of 4 long, shorter than MOCK_CHANNEL_ID_MAX: what APNs' channel ids look like. */
static bool is_base64(const char *v, size_t len)
{
    if (len == 0 || len % 4 || len >= MOCK_CHANNEL_ID_MAX)
        return false;
    size_t pad = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = v[i];
        if (ch == '=') {
            pad++;
            continue;
        }
        if (pad || !((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                     ch == '+' || ch == '/'))
            return false;
    }
    return pad <= 2;
}

#define FIELD_IS(f, lit) ((f).len == sizeof(lit) - 1 && memcmp((f).v, lit, sizeof(lit) - 1) == 0)

static mock_answer ok(int status) { return (mock_answer){status, R_NONE, -1}; }
static mock_answer refuse(int status, int reason) { return (mock_answer){status, reason, -1}; }

/* The channel a request names: R_NONE with *policy set, or why not. */
static int named_channel(capns_mock *m, mock_stream *s, int *policy)
{
    if (!(s->seen & H_CHANNEL_ID))
        return R_MISSING_CHANNEL_ID;
    if (!is_base64(s->ch.channel_id.v, s->ch.channel_id.len))
        return R_BAD_CHANNEL_ID;
    mock_channels *t = &m->channels;
    pthread_mutex_lock(&t->lock);
    long i = find_locked(t, s->ch.bundle, s->ch.channel_id.v);
    if (i >= 0)
        *policy = t->items[i].policy;
    pthread_mutex_unlock(&t->lock);
    return i >= 0 ? R_NONE : R_CHANNEL_NOT_REGISTERED;
}

/* ------------------------------------------------------------- routes */

/* A fresh id: base64 of 16 bytes from the connection's generator (24 characters). */
static void fresh_channel_id(mock_conn *c, char out[MOCK_CHANNEL_ID_MAX])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint8_t b[18] = {0};
    uint64_t hi = mock__rng_next(&c->rng), lo = mock__rng_next(&c->rng);
    memcpy(b, &hi, 8);
    memcpy(b + 8, &lo, 8);
    char *p = out;
    for (int i = 0; i < 18; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        *p++ = b64[v >> 18 & 63];
        *p++ = b64[v >> 12 & 63];
        *p++ = b64[v >> 6 & 63];
        *p++ = b64[v & 63];
    }
    /* 16 bytes are 22 characters and "==": the last 2 bytes above were zeros. */
    out[22] = out[23] = '=';
    out[24] = '\0';
}

static mock_answer create(mock_conn *c, mock_stream *s)
{
    capns_mock *m = c->loop->mock;
    const char *body = (const char *)s->body;
    size_t len = s->body_len;
    int64_t policy;
    char push_type[32];
    if (len == 0 || len > MOCK_BODY_MAX - 1 || !mock__json_is_object(s->body, len) ||
        !mock__json_get_int(body, len, "message-storage-policy", &policy) || (policy != 0 && policy != 1))
        return refuse(400, R_BAD_PAYLOAD);
    if (!mock__json_get_string(body, len, "push-type", push_type, sizeof push_type) ||
        strcmp(push_type, "LiveActivity") != 0)
        return refuse(400, R_INVALID_PUSH_TYPE);

    mock_channels *t = &m->channels;
    size_t limit = channel_limit(m), mine = 0;
    mock_answer a = ok(201);
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->count; i++)
        mine += t->items[i].bundle == s->ch.bundle;
    if (mine >= limit) {
        t->refused++;
        a = refuse(400, R_CANNOT_CREATE_CHANNEL_CONFIG);
    } else if (t->count == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        mock_channel *items = realloc(t->items, cap * sizeof *items);
        if (items) {
            t->items = items;
            t->cap = cap;
        } else {
            a = refuse(500, R_INTERNAL_SERVER_ERROR);
        }
    }
    if (a.status == 201) {
        mock_channel *ch = &t->items[t->count];
        /* 128 random bits: a repeat is not a case worth a loop. */
        fresh_channel_id(c, ch->id);
        ch->bundle = s->ch.bundle;
        ch->policy = (int)policy;
        t->count++;
        t->created++;
        memcpy(s->ch.channel_out, ch->id, sizeof s->ch.channel_out);
    }
    pthread_mutex_unlock(&t->lock);
    return a;
}

static mock_answer read_channel(capns_mock *m, mock_stream *s)
{
    int policy = 0, why = named_channel(m, s, &policy);
    if (why != R_NONE)
        return refuse(400, why);
    char text[96];
    int n = snprintf(text, sizeof text, "{\"message-storage-policy\":%d,\"push-type\":\"LiveActivity\"}", policy);
    if (!(s->ch.body = malloc((size_t)n)))
        return refuse(500, R_INTERNAL_SERVER_ERROR);
    memcpy(s->ch.body, text, (size_t)n);
    s->ch.body_len = (size_t)n;
    return ok(200);
}

static mock_answer delete_channel(capns_mock *m, mock_stream *s)
{
    int policy;
    int why = named_channel(m, s, &policy);
    if (why != R_NONE)
        return refuse(400, why);
    mock_channels *t = &m->channels;
    pthread_mutex_lock(&t->lock);
    long i = find_locked(t, s->ch.bundle, s->ch.channel_id.v);
    if (i >= 0) {
        t->items[i] = t->items[--t->count];     /* order is not kept: the list is a set */
        t->deleted++;
    }
    pthread_mutex_unlock(&t->lock);
    /* Deleted by a request in between: it is gone either way, as asked, but say so. */
    return i >= 0 ? ok(204) : refuse(400, R_CHANNEL_NOT_REGISTERED);
}

static mock_answer list_channels(capns_mock *m, mock_stream *s)
{
    mock_channels *t = &m->channels;
    pthread_mutex_lock(&t->lock);
    /* Each id at most MOCK_CHANNEL_ID_MAX - 1 characters plus quotes and comma. */
    size_t cap = sizeof "{\"channels\":[]}" + t->count * (MOCK_CHANNEL_ID_MAX + 2);
    char *out = malloc(cap);
    size_t len = 0;
    if (out) {
        len += (size_t)snprintf(out, cap, "{\"channels\":[");
        bool first = true;
        for (size_t i = 0; i < t->count; i++) {
            if (t->items[i].bundle != s->ch.bundle)
                continue;
            len += (size_t)snprintf(out + len, cap - len, "%s\"%s\"", first ? "" : ",", t->items[i].id);
            first = false;
        }
        len += (size_t)snprintf(out + len, cap - len, "]}");
    }
    pthread_mutex_unlock(&t->lock);
    if (!out)
        return refuse(500, R_INTERNAL_SERVER_ERROR);
    s->ch.body = out;
    s->ch.body_len = len;
    return ok(200);
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

static mock_answer broadcast(capns_mock *m, mock_stream *s)
{
    int policy = 0, why = named_channel(m, s, &policy);
    if (why != R_NONE)
        return refuse(400, why);
    if (!(s->seen & H_PUSH_TYPE) || !FIELD_IS(s->push_type, "liveactivity"))
        return refuse(400, R_INVALID_PUSH_TYPE);
    if ((s->seen & H_PRIORITY) &&
        !(FIELD_IS(s->priority, "10") || FIELD_IS(s->priority, "5") || FIELD_IS(s->priority, "1")))
        return refuse(400, R_BAD_PRIORITY);
    if ((s->seen & H_EXPIRATION) && !all_digits(s->expiration.v, s->expiration.len))
        return refuse(400, R_BAD_EXPIRATION_DATE);
    /* A channel that stores nothing takes only "deliver now or never". */
    if (policy == 0 && !((s->seen & H_EXPIRATION) && FIELD_IS(s->expiration, "0")))
        return refuse(400, R_BAD_EXPIRATION_DATE);
    if (s->body_len == 0)
        return refuse(400, R_PAYLOAD_EMPTY);
    if (s->body_len > 5120)
        return refuse(413, R_PAYLOAD_TOO_LARGE);
    if (!mock__json_is_object(s->body, s->body_len))
        return refuse(400, R_BAD_PAYLOAD);
    return ok(200);
}

mock_answer mock__channels_decide(mock_conn *c, mock_stream *s)
{
    capns_mock *m = c->loop->mock;
    const char *method = s->rec_method;
    int route = s->ch.route;
    bool get = strcmp(method, "GET") == 0, del = strcmp(method, "DELETE") == 0;
    bool method_ok = route == ROUTE_CHANNELS ? (s->post || get || del) : route == ROUTE_ALL_CHANNELS ? get : s->post;
    if (!method_ok)
        return refuse(405, R_METHOD_NOT_ALLOWED);
    if (s->ch.bundle < 0)
        return refuse(400, R_TOPIC_DISALLOWED);
    if (m->cfg.broadcast_disabled)
        return refuse(400, R_FEATURE_NOT_ENABLED);
    switch (route) {
    case ROUTE_ALL_CHANNELS:
        return list_channels(m, s);
    case ROUTE_BROADCAST:
        return broadcast(m, s);
    default:
        return s->post ? create(c, s) : get ? read_channel(m, s) : delete_channel(m, s);
    }
}

/* ------------------------------------------------------------- answers */

static ssize_t read_answer(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                           nghttp2_data_source *src, void *ud)
{
    mock_stream *s = src->ptr;
    const char *body = s->ch.body ? s->ch.body : s->resp_body;
    size_t total = s->ch.body ? s->ch.body_len : s->resp_len;
    size_t n = total - s->ch.body_off;
    if (n > len)
        n = len;
    memcpy(buf, body + s->ch.body_off, n);
    s->ch.body_off += n;
    if (s->ch.body_off == total)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v, vl) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NO_COPY_NAME}

void mock__channels_answer(mock_conn *c, mock_stream *s)
{
    capns_mock *m = c->loop->mock;
    mock_answer a = s->answer;
    int status = a.status ? a.status : 200;
    s->answered = true;
    if (mock__is_uuid(s->ch.request_id.v, s->ch.request_id.len))
        memcpy(s->ch.request_out, s->ch.request_id.v, 37);
    else
        mock__uuid(c, s->ch.request_out);
    snprintf(s->status_text, sizeof s->status_text, "%03d", status % 1000);

    nghttp2_nv nv[5] = {
        NV(":status", s->status_text, 3),
        NV("apns-request-id", s->ch.request_out, 36),
    };
    size_t n = 2;
    if (status == 201 && s->ch.channel_out[0])
        nv[n++] = (nghttp2_nv)NV("apns-channel-id", s->ch.channel_out, strlen(s->ch.channel_out));
    if (status == 200 && s->ch.route == ROUTE_BROADCAST) {
        mock__uuid(c, s->unique_id);
        nv[n++] = (nghttp2_nv)NV("apns-unique-id", s->unique_id, 36);
    }
    if (a.reason != R_NONE) {
        int len = snprintf(s->resp_body, sizeof s->resp_body, "{\"reason\":\"%s\"}", capns_mock_reason_name(a.reason));
        s->resp_len = (size_t)len;
    }
    bool has_body = s->ch.body || s->resp_len;
    if (has_body)
        nv[n++] = (nghttp2_nv)NV("content-type", "application/json", 16);
    s->ch.body_off = 0;
    nghttp2_data_provider body = {.source.ptr = s, .read_callback = read_answer};
    nghttp2_submit_response(c->h2, s->id, nv, n, has_body ? &body : NULL);

    MOCK_ADD(m, requests, 1);
    MOCK_ADD(m, status[status % 600], 1);
    MOCK_ADD(m, reasons[a.reason], 1);
    c->last_answer_ns = c->loop->now_ns;
    /* Any success proves the provider token, as a device push's 200 does. */
    if (status < 300 && !c->raised) {
        c->raised = true;
        mock__conn_apply_limit(c);
    }
}

void mock__channels_stream_free(mock_stream *s)
{
    free(s->ch.body);
    s->ch.body = NULL;
    s->ch.route = ROUTE_DEVICE;
}
