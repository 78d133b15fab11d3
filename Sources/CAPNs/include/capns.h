/*
 * capns.h - the whole C/Swift boundary of the sender.
 *
 * C holds the wire and the crypto: ES256 provider tokens (OpenSSL) and HTTP/2
 * transports (libcurl multi + nghttp2, or nghttp2 driven directly). Swift holds
 * policy: what to send, retries, token refresh, results.
 *
 * Threading: a capns_sender runs one thread of its own. capns_sender_submit and
 * capns_sender_set_authorization may be called from any thread. Completions are
 * delivered in batches on the sender thread through the callback given at
 * creation; the callback must not block and must not call capns_sender_destroy.
 *
 * Every submitted request completes exactly once (ANSWERED, NOT_PROCESSED,
 * CONNECT_FAILED, TIMED_OUT or CANCELLED), also when the sender is destroyed.
 * Its deadline (request_timeout_ms) runs from its own submit, also while it waits
 * in the queue.
 */
#ifndef CAPNS_H
#define CAPNS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* Functions that can fail take (char *err, size_t errlen) and write one
 * human-readable line there; never key material. */
#define CAPNS_ERR_MAX 256

/* ------------------------------------------------- provider token (ES256) */

typedef struct capns_key capns_key;

/* Loads an APNs .p8 key: a PKCS#8 PEM EC P-256 private key. Anything else
 * (another curve, RSA, a public key, a certificate) is refused with a reason. */
capns_key *capns_key_load_file(const char *path, char *err, size_t errlen);
capns_key *capns_key_load_pem(const char *pem, size_t len, char *err, size_t errlen);
void capns_key_free(capns_key *key);

/* Largest JWT capns_jwt_sign writes, NUL included. */
#define CAPNS_JWT_MAX 512

/* Signs {"alg":"ES256","kid":key_id}.{"iss":team_id,"iat":iat} with raw r||s,
 * all three parts base64url without padding. Writes a NUL-terminated token to
 * out (outlen >= CAPNS_JWT_MAX); returns its length, or -1 with err set. */
int capns_jwt_sign(const capns_key *key, const char *key_id, const char *team_id,
                   int64_t iat, char *out, size_t outlen, char *err, size_t errlen);

/* ------------------------------------- client certificate (certificate auth) */

/* Certificate-based trust (APNS-PROTOCOL.md, "Certificate-based trust"): the TLS
 * client certificate identifies the app and no authorization header is sent. A
 * capns_identity is the certificate, its private key and any chain certificates,
 * loaded and checked once; immutable, reference counted, shareable by senders. */
typedef struct capns_identity capns_identity;

/* Why a load failed (*why); the err line says it in words, never the password. */
typedef enum {
    CAPNS_IDENTITY_UNREADABLE = 1,      /* cannot open or read the file */
    CAPNS_IDENTITY_MALFORMED = 2,       /* not PKCS#12, nor PEM holding a certificate and a key */
    CAPNS_IDENTITY_BAD_PASSWORD = 3,    /* wrong password, or none given for an encrypted file */
    CAPNS_IDENTITY_EXPIRED = 4,         /* notAfter has passed */
    CAPNS_IDENTITY_NOT_YET_VALID = 5,   /* notBefore is still ahead */
    CAPNS_IDENTITY_KEY_MISMATCH = 6,    /* the private key is not the certificate's */
} capns_identity_error;

/* Environments the certificate is for, from Apple's extensions
 * 1.2.840.113635.100.6.3.1 (development) and .2 (production). */
#define CAPNS_IDENTITY_SANDBOX 1
#define CAPNS_IDENTITY_PRODUCTION 2

/* Loads a PKCS#12 (.p12, DER) or PEM file (certificate and private key in one
 * file, the key optionally encrypted). password may be NULL (none, or empty).
 * Returns NULL with *why (when why is not NULL) and err set. */
capns_identity *capns_identity_load_file(const char *path, const char *password, int *why,
                                         char *err, size_t errlen);
void capns_identity_retain(capns_identity *id);
void capns_identity_release(capns_identity *id);

/* The subject's UID (the bundle id), "" when it has none. */
const char *capns_identity_uid(const capns_identity *id);
/* Topics the certificate covers: the UID, UID.voip and UID.complication, then
 * the strings of Apple's topic extension 1.2.840.113635.100.6.3.6; no repeats. */
size_t capns_identity_topic_count(const capns_identity *id);
const char *capns_identity_topic(const capns_identity *id, size_t i);
/* CAPNS_IDENTITY_SANDBOX | CAPNS_IDENTITY_PRODUCTION bits; 0 when neither is marked. */
int capns_identity_environments(const capns_identity *id);
/* notAfter, UNIX seconds. */
int64_t capns_identity_not_after(const capns_identity *id);

/* ------------------------------------------------------------- messages */

/* What every request of one send shares: headers and payload. Immutable once
 * created, reference counted; a queued or in-flight request holds a reference. */
typedef struct capns_message capns_message;

typedef struct {
    const char *topic;          /* apns-topic, required */
    const char *push_type;      /* apns-push-type; NULL omits the header */
    int priority;               /* apns-priority 10, 5 or 1; 0 omits the header */
    int64_t expiration;         /* apns-expiration UNIX seconds; -1 omits the header */
    const char *collapse_id;    /* apns-collapse-id; NULL omits the header */
    const uint8_t *payload;     /* request body, sent as given */
    size_t payload_len;

    /* Broadcast push (iOS 18). When channel_id is set, every request of the
     * message goes to /4/broadcasts/apps/<topic> (topic is then the plain bundle
     * id, at most CAPNS_BUNDLE_MAX bytes) with apns-channel-id, no apns-topic,
     * and the request's apns_id sent as apns-request-id; its token is unused
     * (pass ""). The completion's apns_id holds the answer's apns-request-id. */
    const char *channel_id;     /* NULL: a device push to /3/device/<token> */
} capns_message_spec;

#define CAPNS_BUNDLE_MAX 255

/* 1 when s can be an HTTP header value as given: no control character (a byte
 * below 0x20, or 0x7f). A CR or LF in a value would let a caller's text end the
 * header early and start one of its own on any hop that speaks HTTP/1 (header
 * injection); HTTP/2 peers refuse such a value anyway, as a stream error. */
int capns_header_value_ok(const char *s);

/* Copies everything in spec. Returns NULL with errno EINVAL when topic, push_type,
 * collapse_id or channel_id fails capns_header_value_ok, or a broadcast's topic is
 * empty, longer than CAPNS_BUNDLE_MAX or has a '/' (nothing is sent), or with errno
 * ENOMEM when out of memory. */
capns_message *capns_message_create(const capns_message_spec *spec);
void capns_message_retain(capns_message *m);
void capns_message_release(capns_message *m);

/* -------------------------------------------------------------- requests */

#define CAPNS_TOKEN_MAX 200     /* hex digits; 64 today, Apple says it may grow */
#define CAPNS_UUID_LEN 36

typedef struct {
    uint64_t tag;               /* the caller's, echoed in the completion */
    capns_message *message;     /* retained by submit, released at completion */
    const char *token;          /* lower-case hex, NUL-terminated, <= CAPNS_TOKEN_MAX */
    const char *apns_id;        /* lower-case canonical UUID, CAPNS_UUID_LEN chars */
} capns_request;

typedef enum {
    CAPNS_ANSWERED = 0,         /* the server answered: status, apns_id, reason, timestamp */
    CAPNS_NOT_PROCESSED = 1,    /* no answer; send again (with the same apns-id). Refused by
                                   GOAWAY (above its last-stream-id) or REFUSED_STREAM: the
                                   server did not act on it. Reset without a status, or lost
                                   with its connection: it MAY have been acted on, so a resend
                                   can deliver twice (counted in lost_in_flight) */
    CAPNS_CONNECT_FAILED = 2,   /* no usable connection (DNS, refused, TLS, no h2): see error */
    CAPNS_TIMED_OUT = 3,        /* the request deadline passed without an answer */
    CAPNS_CANCELLED = 4,        /* the sender was destroyed before an answer came */
} capns_outcome;

typedef struct {
    uint64_t tag;
    int32_t outcome;            /* capns_outcome */
    int32_t status;             /* HTTP status when ANSWERED, else 0 */
    int64_t timestamp_ms;       /* 410's "timestamp", else -1 */
    int64_t latency_ns;         /* submit to completion */
    char apns_id[CAPNS_UUID_LEN + 1];    /* the server's apns-id header, or "" */
    char unique_id[CAPNS_UUID_LEN + 1];  /* apns-unique-id (development only), or "" */
    char reason[64];            /* the error body's "reason", or "" */
    char error[192];            /* why, for every outcome but ANSWERED; names the endpoint */
} capns_completion;

typedef void (*capns_completion_fn)(void *ctx, const capns_completion *batch, size_t count);

/* --------------------------------------------------------------- sender */

typedef enum {
    CAPNS_TRANSPORT_CURL = 0,     /* libcurl multi interface with nghttp2 */
    CAPNS_TRANSPORT_NGHTTP2 = 1,  /* nghttp2 session over OpenSSL, driven directly */
} capns_transport;

typedef struct {
    capns_transport transport;
    const char *host;           /* e.g. api.push.apple.com or 127.0.0.1 */
    uint16_t port;              /* 443, 2197, or the mock's */
    const char *ca_file;        /* extra trusted CA (PEM) on top of the system's; NULL for none.
                                   Peer verification is always on. */
    int connections;            /* HTTP/2 connections to keep, >= 1 */
    int max_outstanding;        /* bound on submitted but not yet completed requests: streams
                                   in flight plus a queue that refills a stream the moment it
                                   frees, so keep it above connections * max_streams */
    int max_streams;            /* streams in flight per connection at most; the server's
                                   SETTINGS_MAX_CONCURRENT_STREAMS can lower it; 0 = the server's */
    int connect_timeout_ms;     /* TCP + TLS handshake */
    int request_timeout_ms;     /* submit to answer; 0 = none (not recommended) */
    int ping_interval_ms;       /* PING a connection idle this long; 0 = never */
    capns_completion_fn on_complete;
    void *ctx;
    /* HTTP CONNECT proxy (RFC 9110 §9.3.6). With proxy_host set, every connection is
     * TCP to the proxy, "CONNECT host:port" through it, then TLS with host inside the
     * tunnel, verified against host as always (the proxy sees host and port only). A
     * proxy that answers anything but 2xx fails the connection: CONNECT_FAILED with
     * "proxy P:N refused CONNECT: 407 Proxy Authentication Required". Read only during
     * capns_sender_create (copied); the password never appears in an error. With no
     * proxy, none is used: the environment (https_proxy, ...) is never read. */
    const char *proxy_host;     /* NULL or "" = connect directly */
    uint16_t proxy_port;
    const char *proxy_username; /* Basic credentials; NULL = none. No ':', no control character */
    const char *proxy_password; /* NULL = "" */
    /* certificate auth */
    const capns_identity *identity;   /* TLS client certificate presented on every connection
                                         (retained by the sender); NULL for token auth. Use one
                                         or the other: with an identity, set no authorization */
} capns_sender_config;

typedef struct capns_sender capns_sender;

typedef struct {
    uint64_t connections_opened;
    uint64_t connections_lost;      /* closed by the peer or an error while in use */
    uint64_t goaways_received;
    uint64_t requests_started;      /* streams opened, retries included */
    uint64_t completed;             /* every outcome */
    uint64_t not_processed;
    uint64_t timed_out;
    uint64_t bytes_sent;
    uint64_t bytes_received;
    uint32_t server_max_streams;    /* latest SETTINGS_MAX_CONCURRENT_STREAMS seen, 0 = none yet */
    uint32_t peak_streams;          /* most streams in flight at once on one connection */
    uint64_t lost_in_flight;        /* NOT_PROCESSED without the server saying so: reset without
                                       a status (not REFUSED_STREAM, not above a GOAWAY's
                                       last-stream-id) or lost with the connection; the server
                                       may have processed these (a subset of not_processed) */
} capns_sender_stats;

/* Starts the sender thread; connects lazily on the first request. */
capns_sender *capns_sender_create(const capns_sender_config *cfg, char *err, size_t errlen);

/* The provider JWT (without "bearer ") used for requests started from now on.
 * Returns 0, or -1 with errno EINVAL when jwt fails capns_header_value_ok or is
 * CAPNS_JWT_MAX bytes or longer; the token set before stays in use then. */
int capns_sender_set_authorization(capns_sender *s, const char *jwt);

/* Copies up to n requests into the sender's queue; returns how many were taken
 * (fewer when max_outstanding would be exceeded). Never blocks on the network.
 * A request whose token or apns_id fails capns_header_value_ok, or is longer than
 * CAPNS_TOKEN_MAX or CAPNS_UUID_LEN, ends the run: the count returned stops before
 * it and errno is EINVAL (after a short count for lack of room errno is 0). */
size_t capns_sender_submit(capns_sender *s, const capns_request *reqs, size_t n);

/* The same for requests sent before that the server did not process (NOT_PROCESSED):
 * they go ahead of every request not sent yet. Behind new ones they could meet the
 * next connection's GOAWAY limit again, and again, until their budget ran out. */
size_t capns_sender_resubmit(capns_sender *s, const capns_request *reqs, size_t n);

void capns_sender_get_stats(capns_sender *s, capns_sender_stats *out);

/* Stops the thread. Requests not yet answered complete as CANCELLED through the
 * callback before this returns. Callers wanting a drain wait for completions first.
 * Called on the sender thread itself (from a posted task), it cannot wait for that
 * thread: the thread stops once the task returns, delivers no more completions (their
 * owner is going away; a drain must come first) and frees the sender itself. */
void capns_sender_destroy(capns_sender *s);

/* Runs fn(ctx) on the sender thread, once per post, in the order posted, after that
 * turn's completions were delivered: a caller that consumes completions can run
 * there, and the answers, its work and the next submits share one thread. From any
 * thread, the sender's own included. Returns 0, or -1 once the thread has ended (fn
 * is then not called). A task must not block for long: the connections wait. */
int capns_sender_post(capns_sender *s, void (*fn)(void *ctx), void *ctx);

/* 1 when the calling thread is s's sender thread, else 0. */
int capns_sender_is_current(const capns_sender *s);

/* ------------------------------------ broadcast channel management (iOS 18) */

/* Channel management (create, read, delete, list) lives on its own host
 * (api-manage-broadcast.push.apple.com:2196, sandbox ...sandbox...:2195), is
 * rare, and needs answer bodies and headers the sender's completions do not
 * carry. A capns_manager sends one request at a time over one HTTP/2 (TLS,
 * peer verification always on) connection it keeps between calls, with
 * libcurl's easy interface. Calls block; callers keep them off async threads.
 * Thread-safe: calls are serialized. */
typedef struct capns_manager capns_manager;

typedef struct {
    const char *host;
    uint16_t port;
    const char *ca_file;        /* extra trusted CA (PEM) on top of the system's; NULL for none */
    int connect_timeout_ms;
    int request_timeout_ms;     /* 0 = none (not recommended) */
} capns_manager_config;

#define CAPNS_MANAGER_BODY_MAX (4u << 20)   /* an answer longer than this is an error */
#define CAPNS_CHANNEL_ID_MAX 128

typedef struct {
    int32_t status;             /* HTTP status; 0 = no answer, see error */
    char request_id[CAPNS_UUID_LEN + 1];        /* apns-request-id, or "" */
    char channel_id[CAPNS_CHANNEL_ID_MAX];      /* apns-channel-id of a create, or "" */
    char reason[64];            /* an error body's "reason", or "" */
    char error[192];            /* why there is no answer; names the endpoint */
    char *body;                 /* the body, NUL-terminated, or NULL; capns_manager_response_free */
    size_t body_len;
} capns_manager_response;

capns_manager *capns_manager_create(const capns_manager_config *cfg, char *err, size_t errlen);

/* One request: method "POST", "GET" or "DELETE"; path as sent; jwt without
 * "bearer "; channel_id and request_id NULL to omit their headers; body NULL
 * for none. Returns 0 when an answer came (out->status), -1 otherwise (errno
 * EINVAL for a header value failing capns_header_value_ok, out->error says why
 * for the rest). out is always filled and must be freed. */
int capns_manager_request(capns_manager *mg, const char *method, const char *path, const char *jwt,
                          const char *channel_id, const char *request_id, const uint8_t *body,
                          size_t body_len, capns_manager_response *out);
void capns_manager_response_free(capns_manager_response *r);
void capns_manager_destroy(capns_manager *mg);

/* A set-up check (apns-send doctor): one request to an APNs host, made step by
 * step, saying where it stopped: the proxy's CONNECT, TCP, TLS (peer verification
 * always on: the system's roots plus an extra CA file), or HTTP. It reports the
 * chain the verifier built (leaf first, the trusted root last) and the answer's
 * status, reason and "date" header. Blocks; libcurl's easy interface. */
typedef enum {
    CAPNS_PROBE_ANSWERED = 0,   /* an HTTP answer came: see status */
    CAPNS_PROBE_PROXY,          /* the proxy could not be reached or refused CONNECT */
    CAPNS_PROBE_CONNECT,        /* TCP to the host (or DNS) failed */
    CAPNS_PROBE_TLS,            /* the handshake failed: an untrusted chain, a bad client certificate... */
    CAPNS_PROBE_HTTP,           /* connected, but no answer */
} capns_probe_stage;

typedef struct {
    const char *host;
    uint16_t port;
    const char *ca_file;        /* extra trusted CA (PEM), or NULL */
    const char *proxy_host;     /* NULL or "": direct (the environment is never read) */
    uint16_t proxy_port;
    const char *proxy_username; /* NULL: none */
    const char *proxy_password;
    const capns_identity *identity;  /* certificate auth, or NULL */
    const char *path;           /* e.g. "/3/device/<token>" */
    const char *jwt;            /* without "bearer "; NULL: no authorization header */
    const char *topic;          /* NULL: no apns-topic header */
    const char *push_type;      /* NULL: no apns-push-type header */
    const char *body;           /* POSTed, NUL-terminated */
    int timeout_ms;             /* the whole probe; 0 = 10 s */
} capns_probe_config;

#define CAPNS_PROBE_CHAIN_MAX 8

typedef struct {
    int failed_at;              /* capns_probe_stage */
    int32_t status;             /* HTTP status when failed_at is CAPNS_PROBE_ANSWERED */
    long proxy_status;          /* the proxy's answer to CONNECT; 0 = none */
    char reason[64];            /* an error body's "reason", or "" */
    char date[64];              /* the answer's "date" header, or "" */
    int chain_len;              /* 0 when the chain could not be read */
    char chain[CAPNS_PROBE_CHAIN_MAX][256];    /* subjects (one line each), leaf first */
    int root_from_ca_file;      /* the chain's root is a certificate of cfg->ca_file */
    char error[256];            /* why it stopped, when it did */
} capns_probe_result;

/* Fills out whatever happened; returns out->failed_at. */
int capns_probe(const capns_probe_config *cfg, capns_probe_result *out);

#ifdef __cplusplus
}
#endif
#endif /* CAPNS_H */
