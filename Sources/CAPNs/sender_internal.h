/*
 * sender_internal.h - what sender.c shares with the transports (not Swift).
 *
 * sender.c owns the parts every transport needs: the bounded submit queue, the
 * current authorization, completion batching, statistics and the thread. A
 * transport (transport_curl.c, transport_h2.c) owns the sockets and runs its
 * event loop on that thread through capns_transport_ops.
 *
 * Invariant: every request leaves the queue through capns__take() and ends in
 * exactly one capns__complete(); the outstanding count counts the ones between
 * submit and completion, so submit can bound them.
 */
#ifndef CAPNS_SENDER_INTERNAL_H
#define CAPNS_SENDER_INTERNAL_H

#include "capns.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct capns_message {
    atomic_int refs;
    char *topic;
    char *push_type;            /* NULL = omit */
    char *collapse_id;          /* NULL = omit */
    char priority[4];           /* "" = omit */
    char expiration[24];        /* "" = omit */
    uint8_t *payload;
    size_t payload_len;
    char content_length[24];    /* payload_len spelled out, for transports that send it */
    /* Broadcast (capns_message_spec.channel_id): both NULL for a device push. */
    char *channel_id;
    char *path;                 /* "/4/broadcasts/apps/<topic>" */
    /* strlen of the strings above, for the transports' headers (NULL and "": 0) */
    size_t topic_len, push_type_len, collapse_id_len, priority_len, expiration_len, content_length_len;
    size_t channel_id_len, path_len;
};

/* A request as the sender keeps it: copied at submit, so the caller's memory is free. */
typedef struct {
    uint64_t tag;
    capns_message *message;     /* one reference held */
    int64_t submitted_ns;       /* monotonic, for latency and deadlines */
    char token[CAPNS_TOKEN_MAX + 1];
    char apns_id[CAPNS_UUID_LEN + 1];
    uint16_t token_len, apns_id_len;    /* strlen of the two above */
    bool resend;                /* capns_sender_resubmit: ahead of requests not sent yet */
} capns_queued;

typedef struct {
    const char *name;
    /* On the creating thread; a transport that cannot start fails here with err. */
    void *(*create)(capns_sender *s, char *err, size_t errlen);
    /* On the sender thread. Returns once capns__stopping() is true and every request
     * it took has been completed (CANCELLED where nothing better is known). */
    void (*run)(void *impl);
    /* From any thread: new requests are queued, a new token is set, or stop was asked. */
    void (*wake)(void *impl);
    void (*destroy)(void *impl);
} capns_transport_ops;

extern const capns_transport_ops capns_curl_transport;
extern const capns_transport_ops capns_h2_transport;

struct capns_sender {
    capns_sender_config cfg;        /* host and ca_file point at our own copies */
    char endpoint[300];             /* "host:port", for error lines */
    const capns_transport_ops *ops;
    void *impl;
    pthread_t thread;

    pthread_mutex_t lock;           /* guards the queue and the authorization */
    capns_queued *queue;            /* ring of cfg.max_outstanding slots */
    size_t qhead, qlen;
    char authorization[CAPNS_JWT_MAX + 8];   /* "bearer <jwt>" */
    atomic_uint_fast64_t auth_generation;    /* bumped on every set_authorization */

    atomic_size_t outstanding;      /* submitted, not yet completed */
    atomic_bool stopping;

    capns_completion *batch;        /* sender thread only */
    size_t batch_len;

    capns_sender_stats stats;       /* updated with CAPNS_STAT_* */

    /* capns_sender_post's tasks, run by capns__run_posted; `ended` once the thread
     * stops taking them. `free_on_exit`: destroyed from its own thread. */
    pthread_mutex_t posted_lock;
    struct capns_posted *posted_head, *posted_tail;
    bool ended;
    atomic_bool free_on_exit;
};

#define CAPNS_STAT_ADD(s, field, n) __atomic_fetch_add(&(s)->stats.field, (n), __ATOMIC_RELAXED)
#define CAPNS_STAT_SET(s, field, v) __atomic_store_n(&(s)->stats.field, (v), __ATOMIC_RELAXED)
#define CAPNS_STAT_MAX(s, field, v) do { \
        __typeof__((s)->stats.field) v_ = (v); \
        if (v_ > __atomic_load_n(&(s)->stats.field, __ATOMIC_RELAXED)) \
            __atomic_store_n(&(s)->stats.field, v_, __ATOMIC_RELAXED); } while (0)

int64_t capns__now_ns(void);
bool capns__stopping(const capns_sender *s);

/* Moves up to max queued requests into out; the transport now owns them. */
size_t capns__take(capns_sender *s, capns_queued *out, size_t max);

/* A request waits in the queue while the transport has no room to take it (every
 * slot held, e.g. by streams abandoned at their deadline that nghttp2 has not let
 * go). Its deadline runs there too: this ends TIMED_OUT every queued request
 * submitted at or before cutoff_ns, keeping the others in order. */
void capns__expire_queued(capns_sender *s, int64_t cutoff_ns);
/* submitted_ns of the oldest queued request, or INT64_MAX when none waits. */
int64_t capns__oldest_queued_ns(capns_sender *s);

/* Copies "bearer <jwt>" into buf (>= CAPNS_JWT_MAX + 8) and returns its generation. */
uint64_t capns__authorization(capns_sender *s, char *buf, size_t len);
uint64_t capns__authorization_generation(const capns_sender *s);

/* Ends one request: returns its completion record, already holding tag, outcome,
 * latency and empty fields, for the transport to fill in before the next call.
 * Releases the request's message. Records are delivered by capns__flush (and
 * automatically when the batch buffer fills). */
capns_completion *capns__complete(capns_sender *s, capns_queued *q, capns_outcome outcome);

/* Same, with a formatted error line (the endpoint is prefixed). */
capns_completion *capns__fail(capns_sender *s, capns_queued *q, capns_outcome outcome,
                              const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Hands the buffered completions to the callback. Call once per loop iteration. */
void capns__flush(capns_sender *s);

/* Runs the tasks posted so far (capns_sender_post), after capns__flush: once per loop
 * iteration. A task posted meanwhile waits for the next one (the post woke the loop). */
void capns__run_posted(capns_sender *s);

/* Parses an APNs error body {"reason":"...","timestamp":N} into c. */
void capns__parse_error_body(const char *body, size_t len, capns_completion *c);

/* Copies the value of the header line "name: value\r\n" into out (cut to outlen - 1
 * bytes, NUL-terminated) when the line has that name, case-insensitively; libcurl's
 * header callbacks (transport_curl.c, manage.c) read APNs' ids this way. */
void capns__take_header(const char *line, size_t len, const char *name, char *out, size_t outlen);

/* The system's CA bundle plus ca_file, as one PEM blob for CURLOPT_CAINFO_BLOB, appended
 * to *blob (transport_curl.c; also the broadcast manager's). False, with err, when
 * ca_file cannot be read. */
bool capns__curl_ca_blob(const char *ca_file, char **blob, size_t *len, char *err, size_t errlen);

/* What every libcurl handle to APNs must say, set in one place: https only, HTTP/2 over
 * TLS 1.2 or later, the peer and its name verified (never turned off), no signals.
 * `easy` is a CURL *. */
void capns__curl_apns_defaults(void *easy);

#endif
