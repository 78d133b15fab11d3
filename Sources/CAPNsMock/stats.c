/*
 * stats.c - reason names, the statistics snapshot and its JSON form.
 *
 * Counters are relaxed atomics bumped by the loop threads; a snapshot is a
 * set of independent reads, good enough for a report, not a transaction.
 */
#include "mock_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* In R_* order. */
static const char *const reason_names[R_COUNT] = {
    "", "BadCollapseId", "BadDeviceToken", "BadExpirationDate", "BadMessageId",
    "BadPriority", "BadTopic", "DeviceTokenNotForTopic", "DuplicateHeaders",
    "IdleTimeout", "InvalidPushType", "MissingDeviceToken", "MissingTopic",
    "PayloadEmpty", "TopicDisallowed", "BadPayload",
    "BadCertificate", "BadCertificateEnvironment", "ExpiredProviderToken",
    "Forbidden", "InvalidProviderToken", "MissingProviderToken",
    "UnrelatedKeyIdInToken", "BadPath", "MethodNotAllowed", "Unregistered",
    "ExpiredToken", "PayloadTooLarge", "TooManyProviderTokenUpdates",
    "TooManyRequests", "InternalServerError", "ServiceUnavailable", "Shutdown",
    "MissingChannelId", "BadChannelId", "ChannelNotRegistered",
    "CannotCreateChannelConfig", "FeatureNotEnabled",
    "BadEnvironmentKeyIdInToken", "TopicMismatch",
};

_Static_assert(R_COUNT <= CAPNS_MOCK_REASONS, "reason table outgrew the public array");

const char *capns_mock_reason_name(int i)
{
    return i >= 0 && i < R_COUNT ? reason_names[i] : "";
}

int mock__reason_index(const char *name)
{
    for (int i = 1; name && i < R_COUNT; i++)
        if (strcmp(reason_names[i], name) == 0)
            return i;
    return R_NONE;
}

#define LOAD(field) atomic_load_explicit(&c->field, memory_order_relaxed)

void capns_mock_get_stats(capns_mock *m, capns_mock_stats *out)
{
    mock_counters *c = &m->counters;
    memset(out, 0, sizeof *out);
    out->connections_accepted = LOAD(connections_accepted);
    out->connections_current = LOAD(connections_current);
    out->handshakes_failed = LOAD(handshakes_failed);
    out->streams = LOAD(streams);
    out->requests = LOAD(requests);
    out->jwt_distinct = LOAD(jwt_distinct);
    out->jwt_verifications = LOAD(jwt_verifications);
    out->max_streams_seen = LOAD(max_streams_seen);
    out->bytes_in = LOAD(bytes_in);
    out->bytes_out = LOAD(bytes_out);
    out->goaways_sent = LOAD(goaways_sent);
    out->resets_done = LOAD(resets_done);
    out->settings_sent = LOAD(settings_sent);
    out->streams_refused = LOAD(streams_refused);
    out->streams_over_limit = LOAD(streams_over_limit);
    out->max_streams_restored = LOAD(max_streams_restored);
    out->header_blocks = LOAD(header_blocks);
    out->header_block_bytes = LOAD(header_block_bytes);
    out->warm_header_blocks = LOAD(warm_header_blocks);
    out->warm_header_block_bytes = LOAD(warm_header_block_bytes);
    for (int i = 0; i < 600; i++)
        out->status[i] = LOAD(status[i]);
    for (int i = 0; i < R_COUNT; i++)
        out->reasons[i] = LOAD(reasons[i]);
    mock__channels_stats(m, out);
}

/* Appends to a fixed buffer, remembering how much would have been written. */
typedef struct {
    char *buf;
    size_t cap, len;
} json_out;

static void put(json_out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

size_t capns_mock_stats_json(capns_mock *m, char *out, size_t outlen)
{
    capns_mock_stats s;
    capns_mock_get_stats(m, &s);
    json_out o = {out, outlen, 0};
    put(&o, "{\"connections\":{\"accepted\":%llu,\"current\":%llu,\"handshakes_failed\":%llu},",
        (unsigned long long)s.connections_accepted, (unsigned long long)s.connections_current,
        (unsigned long long)s.handshakes_failed);
    put(&o, "\"streams\":%llu,\"requests\":%llu,\"max_concurrent_streams_seen\":%llu,",
        (unsigned long long)s.streams, (unsigned long long)s.requests,
        (unsigned long long)s.max_streams_seen);
    put(&o, "\"jwt\":{\"distinct\":%llu,\"verifications\":%llu},",
        (unsigned long long)s.jwt_distinct, (unsigned long long)s.jwt_verifications);
    put(&o, "\"bytes_in\":%llu,\"bytes_out\":%llu,\"goaways_sent\":%llu,\"resets_done\":%llu,"
            "\"settings_sent\":%llu,",
        (unsigned long long)s.bytes_in, (unsigned long long)s.bytes_out,
        (unsigned long long)s.goaways_sent, (unsigned long long)s.resets_done,
        (unsigned long long)s.settings_sent);
    put(&o, "\"streams_refused\":%llu,\"streams_over_limit\":%llu,\"max_streams_restored\":%llu,",
        (unsigned long long)s.streams_refused, (unsigned long long)s.streams_over_limit,
        (unsigned long long)s.max_streams_restored);
    put(&o, "\"header_blocks\":{\"count\":%llu,\"bytes\":%llu,\"warm_count\":%llu,\"warm_bytes\":%llu},",
        (unsigned long long)s.header_blocks, (unsigned long long)s.header_block_bytes,
        (unsigned long long)s.warm_header_blocks, (unsigned long long)s.warm_header_block_bytes);
    put(&o, "\"by_status\":{");
    const char *sep = "";
    for (int i = 0; i < 600; i++)
        if (s.status[i]) {
            put(&o, "%s\"%d\":%llu", sep, i, (unsigned long long)s.status[i]);
            sep = ",";
        }
    put(&o, "},\"by_reason\":{");
    sep = "";
    for (int i = 1; i < R_COUNT; i++)
        if (s.reasons[i]) {
            put(&o, "%s\"%s\":%llu", sep, reason_names[i], (unsigned long long)s.reasons[i]);
            sep = ",";
        }
    put(&o, "}}");
    if (outlen)
        out[o.len < outlen ? o.len : outlen - 1] = '\0';
    return o.len < outlen ? o.len : (outlen ? outlen - 1 : 0);
}
