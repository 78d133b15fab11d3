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
} capns_message_spec;

/* 1 when s can be an HTTP header value as given: no control character (a byte
 * below 0x20, or 0x7f). A CR or LF in a value would let a caller's text end the
 * header early and start one of its own on any hop that speaks HTTP/1 (header
 * injection); HTTP/2 peers refuse such a value anyway, as a stream error. */
int capns_header_value_ok(const char *s);

/* Copies everything in spec. Returns NULL with errno EINVAL when topic, push_type
 * or collapse_id fails capns_header_value_ok (nothing is sent), or with errno
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
 * callback before this returns. Callers wanting a drain wait for completions first. */
void capns_sender_destroy(capns_sender *s);

#ifdef __cplusplus
}
#endif
#endif /* CAPNS_H */
