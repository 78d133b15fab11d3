/*
 * mock_internal.h - what the mock's C files share (not Swift).
 *
 *   server.c   create/start/destroy, listeners, the epoll loop per thread
 *   timers.c   the per-loop timer heap (delayed answers, idle checks)
 *   conn.c     one client connection: TLS handshake, nghttp2 session, I/O
 *   judge.c    one request: header capture and the APNs verdict
 *   provider_token.c  provider token (JWT) verification and its cache
 *   json.c     a small JSON syntax check and flat-object field reader
 *   tables.c   per-token tables (attempts, scripts, unregistered), recording
 *   stats.c    counters, reason names, the JSON dump
 *   channels.c broadcast channels (iOS 18): the channel store, management
 *              and broadcast routes, their answers
 *
 * Threading: each loop thread owns its connections, streams and timers
 * outright; only the token table, the JWT cache and the record store are
 * shared, each behind its own mutex, and statistics are relaxed atomics.
 */
#ifndef CAPNS_MOCK_INTERNAL_H
#define CAPNS_MOCK_INTERNAL_H

#include "capns_mock.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ----------------------------------------------------------- reasons */

/* Index into the reason table; keep in step with stats.c's names. */
enum {
    R_NONE = 0,
    R_BAD_COLLAPSE_ID, R_BAD_DEVICE_TOKEN, R_BAD_EXPIRATION_DATE, R_BAD_MESSAGE_ID,
    R_BAD_PRIORITY, R_BAD_TOPIC, R_DEVICE_TOKEN_NOT_FOR_TOPIC, R_DUPLICATE_HEADERS,
    R_IDLE_TIMEOUT, R_INVALID_PUSH_TYPE, R_MISSING_DEVICE_TOKEN, R_MISSING_TOPIC,
    R_PAYLOAD_EMPTY, R_TOPIC_DISALLOWED, R_BAD_PAYLOAD,
    R_BAD_CERTIFICATE, R_BAD_CERTIFICATE_ENVIRONMENT, R_EXPIRED_PROVIDER_TOKEN,
    R_FORBIDDEN, R_INVALID_PROVIDER_TOKEN, R_MISSING_PROVIDER_TOKEN,
    R_UNRELATED_KEY_ID_IN_TOKEN, R_BAD_PATH, R_METHOD_NOT_ALLOWED, R_UNREGISTERED,
    R_EXPIRED_TOKEN, R_PAYLOAD_TOO_LARGE, R_TOO_MANY_PROVIDER_TOKEN_UPDATES,
    R_TOO_MANY_REQUESTS, R_INTERNAL_SERVER_ERROR, R_SERVICE_UNAVAILABLE, R_SHUTDOWN,
    /* broadcast channels (channels.c) */
    R_MISSING_CHANNEL_ID, R_BAD_CHANNEL_ID, R_CHANNEL_NOT_REGISTERED,
    R_CANNOT_CREATE_CHANNEL_CONFIG, R_FEATURE_NOT_ENABLED,
    /* keys restricted to an environment or to topics */
    R_BAD_ENVIRONMENT_KEY_ID_IN_TOKEN, R_TOPIC_MISMATCH,
    R_COUNT
};

int mock__reason_index(const char *name);   /* R_NONE when unknown */

/* ------------------------------------------------------------- config */

typedef struct {
    char kid[64];
    EVP_PKEY *pub;
    int team;                   /* index into teams: the one team this key signs for; -1 none */
    int environment;            /* 0 both, else the one MOCK_ENV_* it serves */
    char **topics;              /* a topic-specific key's bundle ids; n_topics 0: any */
    size_t n_topics;
} mock_key;

/* A verdict: what one stream is answered. */
typedef struct {
    int status;                 /* 0 = not decided / scripted pass */
    int reason;                 /* R_* */
    int64_t timestamp_ms;       /* 410 only */
} mock_answer;

/* ------------------------------------------------------------- tables */

typedef struct mock_token_entry mock_token_entry;

typedef struct mock_token_block mock_token_block;

/* The entry's hash beside it: a probe passes other tokens without reading them. */
typedef struct {
    uint64_t hash;
    mock_token_entry *entry;    /* NULL: empty */
} mock_token_slot;

typedef struct {
    pthread_mutex_t lock;
    mock_token_slot *slots;     /* open addressing, power of two */
    size_t cap, used, limit;    /* limit: most entries counted */
    bool count_unknown;         /* a token first seen while serving gets an entry */
    mock_token_block *blocks;   /* where the entries live, freed together */
} mock_token_table;

int mock__tokens_init(mock_token_table *t, size_t limit, bool count_unknown);
void mock__tokens_free(mock_token_table *t);
/* Setup only: entry for token, created. */
mock_token_entry *mock__tokens_setup(mock_token_table *t, const char *token);
void mock__entry_set_unregistered(mock_token_entry *e, int64_t ts);
int mock__entry_set_script(mock_token_entry *e, const mock_answer *a, size_t n, const mock_answer *forced);
/* Counts one attempt and returns what the tables say about it: *scripted an
 * answer (status 0 when none), *unregistered_ts >= 0 for 410. */
void mock__tokens_attempt(mock_token_table *t, const char *token, size_t len,
                          mock_answer *scripted, int64_t *unregistered_ts);
uint64_t mock__tokens_attempts(mock_token_table *t, const char *token);

typedef struct {
    pthread_mutex_t lock;
    capns_mock_record **items;
    size_t count, cap, limit;
    uint64_t *reset_ids;        /* connections reset, when recording */
    size_t n_reset, cap_reset;
} mock_records;

void mock__records_add(mock_records *r, capns_mock_record *rec);   /* takes it or frees it */
void mock__records_reset(mock_records *r, uint64_t connection_id);
void mock__record_free(capns_mock_record *rec);

/* ---------------------------------------------------------- JWT cache */

typedef struct mock_jwt_entry mock_jwt_entry;

typedef struct {
    pthread_mutex_t lock;
    mock_jwt_entry **slots;
    size_t cap, used;
} mock_jwt_cache;

/* What a provider token says once checked; iat is checked per use. */
typedef struct {
    int reason;                 /* R_NONE when the signature and claims are good */
    int team;                   /* index into teams */
    int key;                    /* index into keys, -1 when unknown */
    int64_t iat;
    bool first;                 /* the first valid token seen (expire_first_token) */
} mock_jwt_result;

typedef struct capns_mock capns_mock;
void mock__jwt_check(capns_mock *m, const char *jwt, size_t len, mock_jwt_result *out);
void mock__jwt_cache_free(mock_jwt_cache *c);

/* --------------------------------------------------------------- JSON */

/* True if buf[0..len) is one JSON object, nothing but whitespace around it. */
bool mock__json_is_object(const uint8_t *buf, size_t len);
/* Flat object readers: the top-level member named key, as a string (copied,
 * NUL-terminated, false if absent, not a string or too long) or an integer. */
bool mock__json_get_string(const char *buf, size_t len, const char *key, char *out, size_t outlen);
bool mock__json_get_int(const char *buf, size_t len, const char *key, int64_t *out);

/* ---------------------------------------------------------- streams */

#define MOCK_PATH_MAX 256
#define MOCK_AUTH_MAX 1024
#define MOCK_TOPIC_MAX 256
#define MOCK_SMALL_MAX 64
#define MOCK_BODY_MAX 5121      /* one past the largest payload APNs takes */

/* Headers the verdict reads, by bit, to spot repeats. */
enum {
    H_AUTH = 1 << 0, H_TOPIC = 1 << 1, H_PUSH_TYPE = 1 << 2, H_ID = 1 << 3,
    H_PRIORITY = 1 << 4, H_EXPIRATION = 1 << 5, H_COLLAPSE = 1 << 6,
    H_METHOD = 1 << 7, H_PATH = 1 << 8,
    H_CHANNEL_ID = 1 << 9, H_REQUEST_ID = 1 << 10,     /* broadcast channels */
};

/* A captured value: len counts the real length even past the buffer, so
 * "too long" stays visible. */
#define MOCK_FIELD(n) struct { char v[n]; size_t len; }

/* ------------------------------------------------- broadcast channels */

#define MOCK_CHANNEL_LIMIT 10000        /* Apple's: per app and environment */
#define MOCK_CHANNEL_ID_MAX 64          /* longer ids are BadChannelId */

/* Which API a stream's path belongs to; DEVICE is the judge's own. */
enum { ROUTE_DEVICE = 0, ROUTE_CHANNELS, ROUTE_ALL_CHANNELS, ROUTE_BROADCAST };

/* A stream's broadcast-channel state. It sits before `path` in mock_stream so
 * stream_new's memset clears it: every field is zero until written. */
typedef struct {
    int route;                  /* ROUTE_* */
    int bundle;                 /* index into the mock's topics, -1 unknown */
    MOCK_FIELD(MOCK_CHANNEL_ID_MAX) channel_id;
    MOCK_FIELD(MOCK_SMALL_MAX) request_id;
    char channel_out[MOCK_CHANNEL_ID_MAX];  /* apns-channel-id of a 201, "" none */
    char request_out[40];       /* apns-request-id answered */
    char *body;                 /* heap answer body (a list can be long), or NULL */
    size_t body_len, body_off;
} mock_channel_req;

typedef struct {
    char id[MOCK_CHANNEL_ID_MAX];
    int bundle;                 /* index into the mock's topics */
    int policy;                 /* message-storage-policy: 0 none, 1 most recent */
} mock_channel;

/* Every bundle's channels in one array: creates and deletes are rare, a
 * broadcast's lookup is a scan of at most limit * bundles short ids. */
typedef struct {
    pthread_mutex_t lock;
    mock_channel *items;
    size_t count, cap;
    uint64_t created, deleted, refused;
} mock_channels;

typedef struct mock_stream {
    struct mock_stream *prev, *next;    /* the connection's live list, or the free list */
    int32_t id;
    uint64_t ordinal;           /* 1 for the connection's first request */
    unsigned seen, dup;         /* H_* bits */
    bool post;
    bool answered;
    mock_channel_req ch;        /* broadcast channels; cleared with the small fields */
    MOCK_FIELD(MOCK_PATH_MAX) path;
    MOCK_FIELD(MOCK_AUTH_MAX) auth;
    MOCK_FIELD(MOCK_TOPIC_MAX) topic;
    MOCK_FIELD(MOCK_SMALL_MAX) push_type;
    MOCK_FIELD(MOCK_SMALL_MAX) apns_id;
    MOCK_FIELD(MOCK_SMALL_MAX) priority;
    MOCK_FIELD(MOCK_SMALL_MAX) expiration;
    size_t collapse_len;
    size_t body_len;            /* real length; only MOCK_BODY_MAX kept */
    uint8_t body[MOCK_BODY_MAX];
    /* Recording only: "name\0value\0" pairs, in arrival order. */
    char *rec_headers;
    size_t rec_len, rec_cap, rec_n;
    char rec_method[16];
    /* The answer, built once decided. */
    mock_answer answer;
    char answer_id[40];
    char unique_id[40];
    char status_text[8];
    char date[40];              /* an error answer's "date" header (IMF-fixdate) */
    char resp_body[128];
    size_t resp_len, resp_off;
} mock_stream;

/* ------------------------------------------ certificate auth (client_cert.c) */

#define MOCK_ENV_SANDBOX 1          /* 1.2.840.113635.100.6.3.1: development */
#define MOCK_ENV_PRODUCTION 2       /* 1.2.840.113635.100.6.3.2: production */

/* What a connection's client certificate allows, read once after the handshake. */
typedef struct {
    bool present;               /* the client presented one */
    bool trusted;               /* it verified against client_ca_file (chain and dates) */
    int environments;           /* MOCK_ENV_* bits */
    bool multi_topic;           /* Apple's topic extension is present */
    char uid[MOCK_TOPIC_MAX];   /* subject UID (the bundle id), "" when none */
    char *topics;               /* covered topics, "t1\0t2\0..." */
    size_t topics_len;
} mock_client_cert;

/* ------------------------------------------------------- connections */

typedef struct mock_loop mock_loop;

/* C_LINGER: closed for output (after GOAWAY, all answered), input read and dropped. */
typedef enum { C_HANDSHAKE, C_OPEN, C_LINGER, C_CLOSED } mock_conn_state;

typedef struct mock_conn {
    mock_loop *loop;
    struct mock_conn *prev, *next;  /* the loop's list of live connections */
    int fd;
    SSL *ssl;
    nghttp2_session *h2;
    mock_conn_state state;
    int refs;                   /* pending timers; freed when closed and 0 */
    uint64_t id;
    uint64_t rng;
    /* Stream accounting and limits. */
    uint64_t begun;             /* requests begun on this connection */
    uint32_t open_streams;
    bool raised;                /* first success seen: limit is max_streams */
    bool dropped;               /* settings drop in force */
    uint64_t restore_at;        /* begun count at which a drop ends, 0 = none */
    uint32_t advertised;        /* the limit last sent */
    uint64_t settings_out;      /* SETTINGS frames sent, the initial one included */
    uint64_t settings_acked;    /* ...and acknowledged (ACKs come in order) */
    uint64_t restore_seq;       /* settings_out of the SETTINGS that restored a drop */
    bool goaway_sent;
    int32_t goaway_last;        /* streams above it are not processed */
    bool reset_pending;
    mock_stream *streams;       /* live streams, freed with the connection */
    /* Provider token state. */
    char *jwt;                  /* current accepted token, or NULL */
    size_t jwt_len;
    int team;                   /* -1 until the first accepted token */
    int key;                    /* index into keys: the key of the first accepted token, -1 before */
    bool jwt_first;             /* the current token is the first valid one (expiry fault) */
    int64_t jwt_iat;
    int64_t jwt_since_ns;       /* when the current token was first used */
    uint64_t peak_streams;
    uint64_t header_blocks;     /* request header blocks received */
    uint64_t continuation_bytes;    /* CONTINUATION payload of the header block being received */
    mock_client_cert cert;      /* certificate auth */
    /* Idle handling. */
    int64_t last_read_ns;
    int64_t last_answer_ns;
    bool idle_timer;
    /* Output: nghttp2's bytes waiting for SSL_write. */
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    bool want_out;              /* EPOLLOUT armed */
    bool answers_due;           /* answers submitted by fire_timers, not yet flushed */
} mock_conn;

/* ------------------------------------------------------------- timers */

enum { T_ANSWER, T_IDLE, T_LINGER };

typedef struct {
    int64_t due_ns;
    mock_conn *conn;
    int32_t stream_id;
    int kind;
} mock_timer;

typedef struct {
    mock_timer *items;
    size_t count, cap;
} mock_timer_heap;

int mock__timer_push(mock_timer_heap *h, mock_timer t);
/* The earliest timer due at or before now, removed; false if none. */
bool mock__timer_pop_due(mock_timer_heap *h, int64_t now_ns, mock_timer *out);
/* ms until the next timer (rounded up), -1 if none. */
/* Nanoseconds to the earliest deadline (at most 60 s); -1 when none. */
int64_t mock__timer_wait_ns(const mock_timer_heap *h, int64_t now_ns);

/* -------------------------------------------------------------- loops */

struct mock_loop {
    capns_mock *mock;
    int index;
    int epfd, listen_fd, wake_fd;
    pthread_t thread;
    bool started;
    mock_timer_heap timers;
    mock_conn *conns;
    mock_stream *free_streams;
    uint32_t seen_limit;        /* the shared limit this loop last applied */
    int64_t now_ns;             /* refreshed once per wakeup */
    uint8_t rbuf[1 << 16];
};

/* --------------------------------------------------------- statistics */

typedef struct {
    atomic_uint_fast64_t connections_accepted, connections_current, handshakes_failed;
    atomic_uint_fast64_t streams, requests, jwt_distinct, jwt_verifications;
    atomic_uint_fast64_t max_streams_seen, bytes_in, bytes_out;
    atomic_uint_fast64_t goaways_sent, resets_done, settings_sent;
    atomic_uint_fast64_t streams_refused, streams_over_limit, max_streams_restored;
    atomic_uint_fast64_t header_blocks, header_block_bytes, warm_header_blocks, warm_header_block_bytes;
    atomic_uint_fast64_t status[600];
    atomic_uint_fast64_t reasons[R_COUNT];
} mock_counters;

#define MOCK_ADD(m, field, n) atomic_fetch_add_explicit(&(m)->counters.field, (n), memory_order_relaxed)

/* --------------------------------------------------------------- mock */

struct capns_mock {
    capns_mock_config cfg;      /* strings point at owned copies below */
    char host[64];
    uint16_t port;
    SSL_CTX *tls;
    mock_key *keys;
    size_t n_keys;
    char **teams, **topics;
    size_t n_teams, n_topics;
    mock_token_table tokens;
    mock_records records;
    mock_jwt_cache jwts;
    mock_channels channels;     /* broadcast channels, channels.c */
    bool first_token_marked;    /* under jwts.lock */
    atomic_uint_fast64_t first_token_uses;
    atomic_uint_fast64_t received;   /* whole requests so far, for stall_after */
    mock_counters counters;
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *h2_options;
    mock_loop *loops;
    int n_loops;
    atomic_uint max_streams;    /* the raised limit; capns_mock_set_max_streams */
    atomic_bool stopping;
    atomic_uint_fast64_t next_conn_id;
    bool started;
};

int64_t mock__now_ns(void);           /* CLOCK_MONOTONIC */
int64_t mock__wall_s(void);           /* CLOCK_REALTIME seconds, for iat */
uint64_t mock__rng_next(uint64_t *state);

/* conn.c */
void mock__conn_accept(mock_loop *loop);
void mock__conn_io(mock_conn *c, uint32_t events);
void mock__conn_release(mock_conn *c);     /* a timer's reference ends */
void mock__conn_close(mock_conn *c, bool reset);
void mock__conn_flush(mock_conn *c);       /* nghttp2 -> TLS, then close if done */
void mock__conn_apply_limit(mock_conn *c); /* send SETTINGS if the limit changed */
void mock__conn_idle_check(mock_conn *c);

/* client_cert.c: certificate auth */
int mock__client_ca_setup(SSL_CTX *ctx, const char *ca_file, char *err, size_t errlen);
void mock__client_cert_read(mock_conn *c);             /* after the handshake */
void mock__client_cert_free(mock_client_cert *cc);
/* A request without authorization on a connection with a client certificate:
 * status 0 when it passes (a missing apns-topic becomes the certificate's UID). */
mock_answer mock__client_cert_judge(mock_conn *c, mock_stream *s);

/* judge.c: nghttp2 server callbacks and answering */
void mock__judge_callbacks(nghttp2_session_callbacks *cbs);
void mock__judge_answer_due(mock_conn *c, int32_t stream_id);
void mock__stream_free(mock_loop *loop, mock_stream *s);
void mock__uuid(mock_conn *c, char out[40]);   /* a fresh lower-case v4 UUID */

/* channels.c: broadcast channels. judge.c calls claims() first for every
 * request; a claimed stream is judged by decide() (after the judge's duplicate
 * header and provider token checks) and answered by answer(). All parsing is
 * bounded by the stream's fixed capture buffers. */
bool mock__channels_claims(capns_mock *m, mock_stream *s);
mock_answer mock__channels_decide(mock_conn *c, mock_stream *s);
void mock__channels_answer(mock_conn *c, mock_stream *s);
void mock__channels_stream_free(mock_stream *s);
void mock__channels_init(mock_channels *t);
void mock__channels_free(mock_channels *t);
void mock__channels_stats(capns_mock *m, capns_mock_stats *out);

/* One loop iteration's tail, shared by server.c's loop and fuzz/fuzz_mock_conn.c,
 * which drives connections by hand: fire the due timers (then one flush per
 * connection), and apply a stream limit set since (after the epoll batch, never
 * inside it: it may free a connection whose event is still in the batch). */
void mock__loop_fire_timers(mock_loop *loop);
void mock__loop_apply_limits(mock_loop *loop);

/* 8-4-4-4-12 lower-case hex (judge.c). */
bool mock__is_uuid(const char *u, size_t len);

#endif /* CAPNS_MOCK_INTERNAL_H */
