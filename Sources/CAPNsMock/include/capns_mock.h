/*
 * capns_mock.h - the whole boundary of the mock APNs server.
 *
 * A C server on libnghttp2's server API over OpenSSL (TLS 1.2+, ALPN "h2"
 * only: a client that does not offer h2 has its handshake refused), driven by
 * epoll loops on threads of its own. It answers as APNs answers
 * (design/APNS-PROTOCOL.md); every fault it injects is deterministic under the
 * configured seed.
 *
 * Life cycle: capns_mock_create (binds, loads keys) -> the table calls
 * (capns_mock_add_unregistered, capns_mock_script) -> capns_mock_start ->
 * ... -> capns_mock_destroy. Tables are read-only once started. Everything
 * else may be called from any thread at any time between start and destroy.
 *
 * How a request is judged, first match wins:
 *   1. stall mode: read, never answer. With stall_after N, the mock answers
 *      its first N requests (all connections together, in the order they
 *      were received) and stalls from the next one on: a server that stops
 *      answering mid-run, its client holding what it sent.
 *   2. 405 MethodNotAllowed   method other than POST.
 *   3. 404 BadPath            path not under /3/device/.
 *   4. 400 MissingDeviceToken /3/device/ with nothing after it.
 *      400 BadDeviceToken     not 64..200 lower-case hex digits, even count.
 *      From here on the request counts as an attempt for its token.
 *   5. 400 DuplicateHeaders   any apns-* or authorization header repeated.
 *   6. 403 MissingProviderToken / InvalidProviderToken / ExpiredProviderToken,
 *      429 TooManyProviderTokenUpdates (see "Provider tokens" below).
 *   7. 400 MissingTopic, 400 InvalidPushType (absent or unknown push type),
 *      400 BadTopic (empty, or characters outside a bundle id's alphabet),
 *      400 TopicDisallowed (topic's bundle id not configured),
 *      400 DeviceTokenNotForTopic (bundle id known but the suffix does not
 *      match the push type: APNs judges the topic against the token's app, so
 *      a voip push to the plain bundle id is "not for this topic"),
 *      400 BadMessageId, 400 BadPriority (not 10/5/1, or 10 for background),
 *      400 BadExpirationDate (not an integer), 400 BadCollapseId (> 64 bytes),
 *      400 TopicMismatch (a topic-specific key: the topic's bundle id is not
 *      one of the key's).
 *   8. 400 PayloadEmpty, 413 PayloadTooLarge (> 4096, voip > 5120), and
 *      400 BadPayload for a body that is not a JSON object (a small hand-
 *      written syntax check, depth <= 32). APNs' documented reasons have none
 *      for this case; the closest documented behaviour is a final 400, so the
 *      mock answers 400 with "BadPayload", a name outside that list: a sender
 *      must treat an unknown 400 reason as final. A widgets push whose body
 *      is not {"aps":{"content-changed":true}} (white space aside) is 400
 *      BadPayload too.
 *   9. a scripted answer for the token's Nth attempt, or its forced answer.
 *  10. 410 Unregistered with the token's timestamp.
 *  11. the idle quirk: 500 InternalServerError for the first request after a
 *      connection was idle idle_500_after_ms.
 *  12. random 429 TooManyRequests / 500 InternalServerError /
 *      503 ServiceUnavailable by the configured fractions.
 *  13. 200, with apns-unique-id in sandbox mode.
 * Errors carry apns-id, content-type: application/json and {"reason":"..."}
 * (410 adds "timestamp"). apns-id echoes the client's valid one, else a fresh
 * lower-case UUID.
 *
 * Provider tokens (authorization: bearer <JWT>): ES256 verified against the
 * configured key named by "kid" (unknown kid, bad signature, alg other than
 * ES256, unknown "iss", an "iss" other than the key's own team, or malformed
 * -> 403 InvalidProviderToken); "iat" older
 * than one hour -> 403 ExpiredProviderToken, more than 60 s in the future ->
 * 403 InvalidProviderToken (both against the mock's clock, see clock_offset_s). A key restricted to one environment, used on a
 * mock of the other (see `sandbox`) -> 403 BadEnvironmentKeyIdInToken. A
 * connection belongs to the team and the key of its first accepted token
 * (another team -> 403 InvalidProviderToken; another key of the same team ->
 * 403 UnrelatedKeyIdInToken: open a new connection for it). Presenting a
 * different valid token less than token_update_interval_s after the
 * connection's current token was first used -> 429 TooManyProviderTokenUpdates
 * (the connection keeps its token). Verified tokens are cached by their text.
 *
 * Certificates (client_ca_file set): the mock asks for a client certificate in
 * every handshake and judges it per request, at step 6, when the request has no
 * authorization header (with one, the token is judged and the certificate
 * ignored): 403 BadCertificate (not trusted by client_ca_file, out of its dates,
 * or no Apple environment extension), 403 BadCertificateEnvironment (sandbox
 * certificate on a production mock or the reverse), 400 TopicDisallowed (topic
 * not the subject UID, UID.voip, UID.complication or one listed in the topic
 * extension 1.2.840.113635.100.6.3.6). No apns-topic: the UID is the topic.
 *
 * Streams: the initial SETTINGS say MAX_CONCURRENT_STREAMS 1 (initial_streams,
 * for tests whose client sends a burst before reading SETTINGS); the first 200
 * on a connection is followed by SETTINGS raising it to max_streams, as APNs
 * does with token auth. nghttp2 refuses streams above the limit with
 * RST_STREAM REFUSED_STREAM.
 *
 * Per connection faults ("after N" counts requests begun on that connection):
 *   goaway_after N   GOAWAY(NO_ERROR, last-stream-id = the Nth stream) when the
 *                    Nth request begins; streams up to it are answered, later
 *                    ones are ignored; the connection closes once they are
 *                    (gracefully: close_notify and FIN, then what the client
 *                    still sends is read and dropped until it closes too, for
 *                    at most a second; connections_current no longer counts it).
 *   reset_after N    the Nth request is never answered (nor recorded): the TCP
 *                    connection is reset (SO_LINGER 0) once it has been received,
 *                    with whatever else was in flight on it.
 *   settings_drop_after N, settings_drop_to M, settings_restore_after K:
 *                    SETTINGS MAX_CONCURRENT_STREAMS=M once N requests began,
 *                    back to the current limit K requests later (0 = never).
 *   idle_timeout_ms  GOAWAY(NO_ERROR, debug {"reason":"IdleTimeout"}) after
 *                    that long without a frame from the client.
 *   no_ping_ack      PING frames are read and never acknowledged (every
 *                    connection): a peer whose liveness check fails while it
 *                    still answers requests.
 *
 * expire_first_token, expire_first_token_after N: the first valid provider
 * token the mock sees is answered 403 ExpiredProviderToken from its (N+1)th
 * use on (N = 0: from its first use, so no connection ever takes it), as if
 * its hour ran out mid-batch; later tokens are judged by their iat as usual.
 *
 * Determinism: every random choice (fault, jitter, generated apns-id) comes
 * from a generator per connection seeded by (seed, connection number), drawn
 * in request order; one connection with one stream at a time replays exactly.
 *
 * Broadcast channels (iOS 18), served on the same port as device pushes:
 *   POST   /1/apps/<bundle>/channels      body {"message-storage-policy":0|1,
 *          "push-type":"LiveActivity"} -> 201, apns-channel-id (base64 of 16
 *          bytes); the bundle's channel_limit-th + 1 -> 400 CannotCreateChannelConfig;
 *          another push-type -> 400 InvalidPushType; another body -> 400 BadPayload.
 *   GET    /1/apps/<bundle>/channels      apns-channel-id -> 200
 *          {"message-storage-policy":N,"push-type":"LiveActivity"}
 *   DELETE /1/apps/<bundle>/channels      apns-channel-id -> 204
 *   GET    /1/apps/<bundle>/all-channels  -> 200 {"channels":["id",...]}
 *   POST   /4/broadcasts/apps/<bundle>    apns-channel-id, apns-push-type
 *          liveactivity (else 400 InvalidPushType), apns-priority 10/5/1,
 *          apns-expiration (0 required when the channel stores nothing, else
 *          400 BadExpirationDate), payload 1..5120 bytes (413 PayloadTooLarge)
 *          and a JSON object -> 200 with apns-unique-id.
 *   For all of them, in order: 405 MethodNotAllowed (another method), 400
 *   DuplicateHeaders, the provider token checks above, 400 TopicDisallowed
 *   (bundle not configured), 400 FeatureNotEnabled (broadcast_disabled), then
 *   400 MissingChannelId (no apns-channel-id where one is needed), 400
 *   BadChannelId (not base64, or longer than 63 bytes), 400 ChannelNotRegistered
 *   (no such channel for this bundle). Every answer carries apns-request-id (the
 *   client's valid one echoed, else a fresh UUID); errors a JSON {"reason"}.
 *
 * Recording keeps, per request, the method, path, every non-pseudo header in
 * order, the body (up to 5121 bytes: one past the largest payload APNs takes),
 * the connection number, when it arrived and the answer the mock decided on,
 * up to record_cap requests. A decided answer can still be lost with its
 * connection (reset_after): capns_mock_reset_connections names those.
 */
#ifndef CAPNS_MOCK_H
#define CAPNS_MOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Functions that can fail write one human-readable line into (err, errlen). */
#define CAPNS_MOCK_ERR_MAX 256

typedef struct {
    const char *key_id;         /* the JWT "kid" */
    const char *path;           /* .p8 (PKCS#8 EC P-256 private key) or a public key PEM */
    const char *team_id;        /* the team (one of cfg.teams) this key signs for, as an APNs
                                   key belongs to one team; NULL: the only team configured
                                   (refused when there are several) */
    int environment;            /* 0: both environments; CAPNS_MOCK_ENV_SANDBOX or
                                   CAPNS_MOCK_ENV_PRODUCTION: a key restricted to that one */
    const char *const *topics;  /* a topic-specific key: the bundle ids it may push to;
                                   n_topics 0: a team key, any of the team's topics */
    size_t n_topics;
} capns_mock_auth_key;

/* capns_mock_auth_key.environment: which environment a restricted key serves. */
#define CAPNS_MOCK_ENV_SANDBOX 1
#define CAPNS_MOCK_ENV_PRODUCTION 2

typedef struct {
    const char *host;           /* numeric address to bind; NULL = 127.0.0.1 */
    uint16_t port;              /* 0 = any free port (see capns_mock_port) */
    int allow_non_loopback;     /* binding anything but loopback is refused unless set */
    const char *cert_file;      /* server certificate chain, PEM */
    const char *key_file;       /* its private key, PEM */
    const capns_mock_auth_key *auth_keys;
    size_t n_auth_keys;
    const char *const *teams;   /* accepted JWT "iss" values */
    size_t n_teams;
    const char *const *topics;  /* bundle ids; push-type suffixes are added by the mock */
    size_t n_topics;
    uint32_t initial_streams;   /* before a connection's first success; 0 = 1 (APNs) */
    uint32_t max_streams;       /* after the first success; 0 = 1000 */
    int sandbox;                /* development environment: 200s carry apns-unique-id */
    int64_t latency_us;         /* every answer waits latency + uniform[0, jitter) */
    int64_t jitter_us;
    double rate_429, rate_500, rate_503;   /* fractions of otherwise-200 requests */
    uint64_t goaway_after;      /* 0 = off; see above */
    uint64_t reset_after;
    uint64_t settings_drop_after;
    uint32_t settings_drop_to;
    uint64_t settings_restore_after;
    int64_t idle_timeout_ms;    /* 0 = never */
    int64_t idle_500_after_ms;  /* 0 = off: the "500 after long idle" quirk */
    int64_t token_update_interval_s;  /* 0 = 1200 (20 minutes); < 0 = no limit */
    int stall;                  /* accept, handshake, read requests, never answer */
    uint64_t stall_after;       /* 0 = off; else stall once N requests were received */
    int expire_first_token;     /* see "expire_first_token" above */
    uint64_t expire_first_token_after;
    size_t record_cap;          /* requests kept for capns_mock_record_get; 0 = none */
    size_t attempts_cap;        /* distinct tokens counted; 0 = 1 << 20 */
    int count_known_only;       /* count only tokens with a script or an unregistered
                                   mark: the others cost no memory and no lookup
                                   beyond one probe (for a mock nobody asks) */
    uint64_t seed;
    int threads;                /* event-loop threads, SO_REUSEPORT listeners; 0 = 1 */
    int no_ping_ack;            /* never acknowledge a client's PING (a half-dead peer) */
    /* certificate auth */
    const char *client_ca_file; /* PEM: ask clients for a certificate and trust those it
                                   issued; NULL = token auth only. See "Certificates" above */
    /* Broadcast channels (iOS 18); see "Broadcast channels" above. */
    uint32_t channel_limit;     /* channels per bundle id; 0 = 10,000 (Apple's) */
    int broadcast_disabled;     /* every channel and broadcast request: 400 FeatureNotEnabled */
    /* The mock's wall clock runs this many seconds ahead (negative: behind) of the
     * machine's: provider token iat checks and the "date" header of error answers
     * use it, so a test can stand for a server whose clock disagrees with the client's. */
    int64_t clock_offset_s;
} capns_mock_config;

typedef struct capns_mock capns_mock;

/* Loads the certificate and keys and binds the listeners; does not serve yet.
 * Copies everything in cfg. */
capns_mock *capns_mock_create(const capns_mock_config *cfg, char *err, size_t errlen);

/* The bound port (the chosen one when cfg.port was 0). */
uint16_t capns_mock_port(const capns_mock *m);

/* Before start: a token answered 410 Unregistered with this timestamp (ms). */
int capns_mock_add_unregistered(capns_mock *m, const char *token, int64_t timestamp_ms);

/* An answer the mock gives instead of judging a request itself. status 0
 * means "judge normally" (a scripted pass). timestamp_ms is used by 410. */
typedef struct {
    int status;
    const char *reason;         /* "" or NULL for none (200) */
    int64_t timestamp_ms;
} capns_mock_answer;

/* Before start: the token's first n attempts get answers[0..n-1] (after the
 * request passed validation), later attempts forced (when forced != NULL,
 * every later attempt gets *forced) or judged normally. */
int capns_mock_script(capns_mock *m, const char *token, const capns_mock_answer *answers,
                      size_t n, const capns_mock_answer *forced);

/* Starts the event-loop threads. Returns 0, or -1 with err set. */
int capns_mock_start(capns_mock *m, char *err, size_t errlen);

/* Runtime change of the stream limit every connection advertises (after its
 * first success), sent as SETTINGS to open connections. */
void capns_mock_set_max_streams(capns_mock *m, uint32_t max_streams);

/* Requests seen for the token (whatever their answer), 0 if never seen (or not
 * counted: count_known_only, attempts_cap). */
uint64_t capns_mock_attempts(capns_mock *m, const char *token);

/* ------------------------------------------------------------ statistics */

#define CAPNS_MOCK_REASONS 40   /* reason table size; see capns_mock_reason_name */

typedef struct {
    uint64_t connections_accepted;
    uint64_t connections_current;
    uint64_t handshakes_failed;         /* TLS errors, no ALPN h2 */
    uint64_t streams;                   /* requests begun */
    uint64_t requests;                  /* requests answered */
    uint64_t status[600];               /* answers by HTTP status */
    uint64_t reasons[CAPNS_MOCK_REASONS];   /* answers by reason index */
    uint64_t jwt_distinct;              /* distinct JWT strings seen */
    uint64_t jwt_verifications;         /* ES256 verifications done */
    uint64_t max_streams_seen;          /* most concurrent streams on one connection */
    uint64_t bytes_in, bytes_out;       /* TLS application bytes */
    uint64_t goaways_sent;
    uint64_t resets_done;
    uint64_t settings_sent;             /* SETTINGS frames after the initial one */
    /* Stream limits as the client kept them. A client may open streams above a
     * lowered limit it has not acknowledged yet (refused: a legal race); above a
     * limit it acknowledged is a connection error. */
    uint64_t streams_refused;           /* RST_STREAM REFUSED_STREAM: above an unacknowledged limit */
    uint64_t streams_over_limit;        /* HEADERS above an acknowledged limit (connection error) */
    uint64_t max_streams_restored;      /* most concurrent streams on one connection once a
                                           settings drop was restored and acknowledged */
    uint64_t channels_current;          /* broadcast channels that exist now, every bundle */
    uint64_t channels_created;
    uint64_t channels_deleted;
    uint64_t channels_refused;          /* creates over the limit (CannotCreateChannelConfig) */
    /* Request header blocks and their HPACK-encoded size (padding and priority
     * fields excluded, CONTINUATION included): what a client's headers cost on the
     * wire. "warm": past a connection's first CAPNS_MOCK_HEADER_WARMUP requests,
     * when the client's HPACK table holds what it indexes. */
    uint64_t header_blocks, header_block_bytes;
    uint64_t warm_header_blocks, warm_header_block_bytes;
} capns_mock_stats;

#define CAPNS_MOCK_HEADER_WARMUP 100

void capns_mock_get_stats(capns_mock *m, capns_mock_stats *out);

/* Name of reason index i ("" past the end). Index 0 is "" (no reason). */
const char *capns_mock_reason_name(int i);

/* The statistics as one JSON object; returns the length written (truncated
 * to outlen - 1, always NUL-terminated). */
size_t capns_mock_stats_json(capns_mock *m, char *out, size_t outlen);

/* ------------------------------------------------------------- recording */

typedef struct {
    const char *name;
    const char *value;
} capns_mock_header;

/* One recorded request; immutable and valid until capns_mock_destroy. */
typedef struct {
    uint64_t connection_id;     /* 1, 2, ... in accept order */
    int32_t stream_id;
    const char *method;
    const char *path;
    const capns_mock_header *headers;   /* every header but pseudo-headers, in order */
    size_t n_headers;
    const uint8_t *body;
    size_t body_len;
    int64_t received_ns;        /* CLOCK_MONOTONIC when the request was complete */
    int32_t status;             /* the answer decided on; 0: none (stall mode) */
    const char *reason;         /* its reason, "" for none */
} capns_mock_record;

size_t capns_mock_record_count(capns_mock *m);
const capns_mock_record *capns_mock_record_get(capns_mock *m, size_t i);

/* Connections the mock reset (reset_after), by connection_id: answers decided on
 * them may never have reached the client. Writes up to max ids, returns how many
 * there are. */
size_t capns_mock_reset_connections(capns_mock *m, uint64_t *ids, size_t max);

/* Stops the threads, closes every connection, frees everything. */
void capns_mock_destroy(capns_mock *m);

#ifdef __cplusplus
}
#endif
#endif /* CAPNS_MOCK_H */
