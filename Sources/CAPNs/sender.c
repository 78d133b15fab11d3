/*
 * sender.c - the transport-independent half of a capns_sender: the bounded
 * submit queue, authorization, completion batching and the sender thread.
 */
#include "sender_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Completions handed to Swift per callback at most; one lock round trip each. */
#define BATCH_MAX 256

int64_t capns__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool capns__stopping(const capns_sender *s)
{
    return atomic_load_explicit(&s->stopping, memory_order_acquire);
}

/* ------------------------------------------------------------- messages */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* No byte of s[0..len) below 0x20 or equal to 0x7f; 8 bytes a step: every request's
 * token and apns-id pass here. A byte is below 0x20 when subtracting 0x20 borrows
 * into its high bit (which was clear), and is 0x7f when XOR with 0x7f makes it 0. */
static bool header_bytes_ok(const char *s, size_t len)
{
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        uint64_t del = w ^ (ones * 0x7f);
        if (((w - ones * 0x20) | (del - ones)) & ~w & high)
            return false;   /* `~w` stands for `~del` too: XOR with 0x7f keeps the high bit */
    }
    for (; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

int capns_header_value_ok(const char *s)
{
    return header_bytes_ok(s, strlen(s));
}

static bool value_ok_or_null(const char *s)
{
    return !s || capns_header_value_ok(s);
}

/* Decimal digits of v into buf of cap bytes, NUL-terminated and cut short as
 * snprintf would: its format parsing was a visible share of a per-event send's CPU. */
static void format_decimal(char *buf, size_t cap, long long v)
{
    char tmp[24];
    size_t n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[n++] = '-';
    size_t keep = n < cap - 1 ? n : cap - 1;    /* the leading digits, as snprintf */
    for (size_t i = 0; i < keep; i++)
        buf[i] = tmp[n - 1 - i];
    buf[keep] = 0;
}

/* Copies len bytes and a NUL to *tail, advances it, and returns where they went. */
static char *place(char **tail, const char *src, size_t len)
{
    char *at = *tail;
    memcpy(at, src, len);
    at[len] = 0;
    *tail += len + 1;
    return at;
}

/* One allocation holds the struct and every string and the payload after it, so
 * a message per event costs one malloc and one free, and release frees it whole. */
capns_message *capns_message_create(const capns_message_spec *spec)
{
    /* The transports write these strings into headers as they are. */
    if (!value_ok_or_null(spec->topic) || !value_ok_or_null(spec->push_type) ||
        !value_ok_or_null(spec->collapse_id) || !value_ok_or_null(spec->channel_id)) {
        errno = EINVAL;
        return NULL;
    }
    /* A broadcast's bundle id goes into :path: one segment, bounded. */
    size_t bundle_len = spec->topic ? strlen(spec->topic) : 0;
    if (spec->channel_id && (bundle_len == 0 || bundle_len > CAPNS_BUNDLE_MAX || strchr(spec->topic, '/'))) {
        errno = EINVAL;
        return NULL;
    }
    const char *topic = spec->topic ? spec->topic : "";
    size_t topic_len = strlen(topic);
    size_t push_len = spec->push_type ? strlen(spec->push_type) : 0;
    size_t collapse_len = spec->collapse_id ? strlen(spec->collapse_id) : 0;
    size_t channel_len = spec->channel_id ? strlen(spec->channel_id) : 0;
    static const char broadcasts[] = "/4/broadcasts/apps/";
    size_t path_len = spec->channel_id ? sizeof broadcasts - 1 + bundle_len : 0;
    size_t size = sizeof(capns_message) + topic_len + 1 + push_len + 1 + collapse_len + 1 +
                  channel_len + 1 + path_len + 1 + spec->payload_len + 1;
    capns_message *m = malloc(size);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    memset(m, 0, sizeof *m);
    atomic_init(&m->refs, 1);
    char *tail = (char *)(m + 1);
    m->topic = place(&tail, topic, topic_len);
    m->push_type = spec->push_type ? place(&tail, spec->push_type, push_len) : NULL;
    m->collapse_id = spec->collapse_id ? place(&tail, spec->collapse_id, collapse_len) : NULL;
    if (spec->channel_id) {
        m->channel_id = place(&tail, spec->channel_id, channel_len);
        m->path = tail;    /* "/4/broadcasts/apps/<bundle>" */
        memcpy(tail, broadcasts, sizeof broadcasts - 1);
        memcpy(tail + sizeof broadcasts - 1, spec->topic, bundle_len);
        tail[path_len] = 0;
        tail += path_len + 1;
    }
    if (spec->priority)
        format_decimal(m->priority, sizeof m->priority, spec->priority);
    if (spec->expiration >= 0)
        format_decimal(m->expiration, sizeof m->expiration, (long long)spec->expiration);
    m->payload_len = spec->payload_len;
    m->payload = (uint8_t *)tail;
    if (spec->payload_len)
        memcpy(m->payload, spec->payload, spec->payload_len);
    m->payload[spec->payload_len] = 0;    /* never read as a string; a guard if it were */
    format_decimal(m->content_length, sizeof m->content_length, (long long)spec->payload_len);
    m->topic_len = topic_len;
    m->push_type_len = push_len;
    m->collapse_id_len = collapse_len;
    m->priority_len = strlen(m->priority);
    m->expiration_len = strlen(m->expiration);
    m->content_length_len = strlen(m->content_length);
    m->channel_id_len = channel_len;
    m->path_len = path_len;
    return m;
}

void capns_message_retain(capns_message *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void capns_message_release(capns_message *m)
{
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    free(m);    /* strings, path and payload live in the same block */
}

/* ---------------------------------------------------------------- queue */

static void enqueue(capns_queued *q, const capns_request *r, int64_t now, bool resend)
{
    q->tag = r->tag;
    q->message = r->message;
    capns_message_retain(r->message);
    q->submitted_ns = now;
    /* request_ok checked both lengths against these buffers; one pass each copies and measures */
    q->token_len = (uint16_t)(stpcpy(q->token, r->token) - q->token);
    q->apns_id_len = (uint16_t)(stpcpy(q->apns_id, r->apns_id) - q->apns_id);
    q->resend = resend;
}

/* The token goes into :path and apns_id into a header, as they are: no control
 * character, and no silent truncation by enqueue. */
static bool request_ok(const capns_request *r)
{
    if (!r->token || !r->apns_id)
        return false;
    size_t token_len = strlen(r->token), id_len = strlen(r->apns_id);
    return token_len <= CAPNS_TOKEN_MAX && id_len <= CAPNS_UUID_LEN && header_bytes_ok(r->token, token_len) &&
           header_bytes_ok(r->apns_id, id_len);
}

/* Resends go in at the head, the last first, so that they leave in their order. */
static size_t submit(capns_sender *s, const capns_request *reqs, size_t n, bool resend)
{
    size_t cap = (size_t)s->cfg.max_outstanding;
    int64_t now = capns__now_ns();
    errno = 0;
    for (size_t i = 0; i < n; i++) {
        if (!request_ok(&reqs[i])) {
            n = i;
            errno = EINVAL;
            break;
        }
    }

    pthread_mutex_lock(&s->lock);
    size_t room = capns__stopping(s) ? 0 : cap - atomic_load(&s->outstanding);
    size_t taken = n < room ? n : room;
    for (size_t i = 0; i < taken; i++) {
        if (resend) {
            s->qhead = (s->qhead + cap - 1) % cap;
            enqueue(&s->queue[s->qhead], &reqs[taken - 1 - i], now, true);
        } else {
            enqueue(&s->queue[(s->qhead + s->qlen) % cap], &reqs[i], now, false);
        }
        s->qlen++;
    }
    atomic_fetch_add(&s->outstanding, taken);
    pthread_mutex_unlock(&s->lock);

    if (taken) {
        int saved = errno;      /* the wake's write must not clobber EINVAL */
        s->ops->wake(s->impl);
        errno = saved;
    }
    return taken;
}

size_t capns_sender_submit(capns_sender *s, const capns_request *reqs, size_t n)
{
    return submit(s, reqs, n, false);
}

size_t capns_sender_resubmit(capns_sender *s, const capns_request *reqs, size_t n)
{
    return submit(s, reqs, n, true);
}

size_t capns__take(capns_sender *s, capns_queued *out, size_t max)
{
    size_t cap = (size_t)s->cfg.max_outstanding, n = 0;
    pthread_mutex_lock(&s->lock);
    while (n < max && s->qlen) {
        out[n++] = s->queue[s->qhead];
        s->qhead = (s->qhead + 1) % cap;
        s->qlen--;
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

void capns__expire_queued(capns_sender *s, int64_t cutoff_ns)
{
    size_t cap = (size_t)s->cfg.max_outstanding;
    capns_queued expired[64];
    size_t n;
    do {
        /* Completed outside the lock: a callback that submits must not deadlock. */
        n = 0;
        pthread_mutex_lock(&s->lock);
        size_t kept = 0;
        for (size_t i = 0; i < s->qlen; i++) {
            capns_queued *q = &s->queue[(s->qhead + i) % cap];
            if (q->submitted_ns <= cutoff_ns && n < sizeof expired / sizeof *expired)
                expired[n++] = *q;
            else
                s->queue[(s->qhead + kept++) % cap] = *q;   /* kept <= i: in place, in order */
        }
        s->qlen = kept;
        pthread_mutex_unlock(&s->lock);
        /* Oldest deadline first (every request has the same timeout, so oldest submit):
         * a resend taken ahead of older requests stands before them in the queue, and a
         * sender thread that ran late finds them all due at once. Insertion sort: n <= 64,
         * and a queue in submit order is already sorted. */
        for (size_t i = 1; i < n; i++) {
            capns_queued q = expired[i];
            size_t j = i;
            for (; j > 0 && expired[j - 1].submitted_ns > q.submitted_ns; j--)
                expired[j] = expired[j - 1];
            expired[j] = q;
        }
        for (size_t i = 0; i < n; i++)
            capns__fail(s, &expired[i], CAPNS_TIMED_OUT, "no answer within %d ms (still queued: no room to send)",
                        s->cfg.request_timeout_ms);
    } while (n == sizeof expired / sizeof *expired);
}

int64_t capns__oldest_queued_ns(capns_sender *s)
{
    size_t cap = (size_t)s->cfg.max_outstanding;
    int64_t oldest = INT64_MAX;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->qlen; i++) {
        int64_t t = s->queue[(s->qhead + i) % cap].submitted_ns;
        if (t < oldest)
            oldest = t;
    }
    pthread_mutex_unlock(&s->lock);
    return oldest;
}

/* -------------------------------------------------------- authorization */

int capns_sender_set_authorization(capns_sender *s, const char *jwt)
{
    if (!capns_header_value_ok(jwt) || strlen(jwt) >= CAPNS_JWT_MAX) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&s->lock);
    snprintf(s->authorization, sizeof s->authorization, "bearer %s", jwt);
    atomic_fetch_add(&s->auth_generation, 1);
    pthread_mutex_unlock(&s->lock);
    s->ops->wake(s->impl);
    return 0;
}

uint64_t capns__authorization(capns_sender *s, char *buf, size_t len)
{
    pthread_mutex_lock(&s->lock);
    snprintf(buf, len, "%s", s->authorization);
    uint64_t gen = atomic_load(&s->auth_generation);
    pthread_mutex_unlock(&s->lock);
    return gen;
}

uint64_t capns__authorization_generation(const capns_sender *s)
{
    return atomic_load(&s->auth_generation);
}

/* ---------------------------------------------------------- completions */

void capns__flush(capns_sender *s)
{
    if (!s->batch_len)
        return;
    size_t n = s->batch_len;
    /* Free the room first: the callback may wake a submitter that counts on it. */
    atomic_fetch_sub(&s->outstanding, n);
    /* Destroyed from its own thread: the owner is going away, and no one waits. */
    if (!atomic_load_explicit(&s->free_on_exit, memory_order_acquire))
        s->cfg.on_complete(s->cfg.ctx, s->batch, n);
    s->batch_len = 0;
}

capns_completion *capns__complete(capns_sender *s, capns_queued *q, capns_outcome outcome)
{
    if (s->batch_len == BATCH_MAX)
        capns__flush(s);
    capns_completion *c = &s->batch[s->batch_len++];
    c->tag = q->tag;
    c->outcome = outcome;
    c->status = 0;
    c->timestamp_ms = -1;
    c->latency_ns = capns__now_ns() - q->submitted_ns;
    c->apns_id[0] = c->unique_id[0] = c->reason[0] = c->error[0] = '\0';
    capns_message_release(q->message);
    q->message = NULL;
    CAPNS_STAT_ADD(s, completed, 1);
    if (outcome == CAPNS_NOT_PROCESSED)
        CAPNS_STAT_ADD(s, not_processed, 1);
    else if (outcome == CAPNS_TIMED_OUT)
        CAPNS_STAT_ADD(s, timed_out, 1);
    return c;
}

capns_completion *capns__fail(capns_sender *s, capns_queued *q, capns_outcome outcome,
                              const char *fmt, ...)
{
    capns_completion *c = capns__complete(s, q, outcome);
    int n = snprintf(c->error, sizeof c->error, "%s: ", s->endpoint);
    if (n > 0 && (size_t)n < sizeof c->error) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->error + n, sizeof c->error - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return c;
}

/* APNs error bodies are small flat objects: {"reason":"Unregistered","timestamp":1700000000000}.
 * A full JSON parser is not needed to read two known keys; anything odd leaves them empty. */
static const char *find_key(const char *body, size_t len, const char *key)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen + 2 <= len; i++) {
        if (body[i] == '"' && memcmp(body + i + 1, key, klen) == 0 && body[i + 1 + klen] == '"') {
            const char *p = body + i + klen + 2, *end = body + len;
            while (p < end && (isspace((unsigned char)*p) || *p == ':'))
                p++;
            return p < end ? p : NULL;
        }
    }
    return NULL;
}

void capns__parse_error_body(const char *body, size_t len, capns_completion *c)
{
    const char *end = body + len, *p = find_key(body, len, "reason");
    if (p && *p == '"') {
        size_t n = 0;
        for (p++; p < end && *p != '"' && n + 1 < sizeof c->reason; p++)
            c->reason[n++] = *p;
        c->reason[n] = '\0';
    }
    p = find_key(body, len, "timestamp");
    if (p && isdigit((unsigned char)*p)) {
        int64_t v = 0;
        for (; p < end && isdigit((unsigned char)*p) && v < INT64_MAX / 10; p++)   /* no overflow */
            v = v * 10 + (*p - '0');
        c->timestamp_ms = v;
    }
}

/* ---------------------------------------------------------- posted tasks */

struct capns_posted {
    void (*fn)(void *ctx);
    void *ctx;
    struct capns_posted *next;
};

int capns_sender_post(capns_sender *s, void (*fn)(void *ctx), void *ctx)
{
    struct capns_posted *p = malloc(sizeof *p);
    if (!p)
        return -1;
    *p = (struct capns_posted){fn, ctx, NULL};
    pthread_mutex_lock(&s->posted_lock);
    bool ended = s->ended;
    if (!ended) {
        if (s->posted_tail)
            s->posted_tail->next = p;
        else
            s->posted_head = p;
        s->posted_tail = p;
    }
    pthread_mutex_unlock(&s->posted_lock);
    if (ended) {
        free(p);
        return -1;
    }
    s->ops->wake(s->impl);
    return 0;
}

int capns_sender_is_current(const capns_sender *s)
{
    return pthread_equal(pthread_self(), s->thread) != 0;
}

/* Takes the list under the lock and runs it outside: a task may post again. */
static bool run_posted(capns_sender *s, bool end)
{
    pthread_mutex_lock(&s->posted_lock);
    struct capns_posted *p = s->posted_head;
    s->posted_head = s->posted_tail = NULL;
    if (end)
        s->ended = true;
    pthread_mutex_unlock(&s->posted_lock);
    bool ran = p != NULL;
    while (p) {
        struct capns_posted *next = p->next;
        p->fn(p->ctx);
        free(p);
        p = next;
    }
    return ran;
}

void capns__run_posted(capns_sender *s)
{
    run_posted(s, false);
}

/* --------------------------------------------------------------- thread */

static void free_sender(capns_sender *s);

static void *sender_main(void *arg)
{
    capns_sender *s = arg;
    s->ops->run(s->impl);

    /* Whatever the transport never took ends here, and so does what posted tasks
     * submit meanwhile. Tasks run until none is left; then the list closes: later
     * posts are refused, and their posters run them elsewhere. */
    capns_queued q;
    for (bool ended = false;;) {
        while (capns__take(s, &q, 1))
            capns__fail(s, &q, CAPNS_CANCELLED, "sender shut down before the request was sent");
        capns__flush(s);
        if (ended)
            break;
        if (!run_posted(s, false)) {
            run_posted(s, true);    /* closes it, running what came in since */
            ended = true;
        }
    }
    if (atomic_load_explicit(&s->free_on_exit, memory_order_acquire))
        free_sender(s);
    return NULL;
}

capns_sender *capns_sender_create(const capns_sender_config *cfg, char *err, size_t errlen)
{
    if (!cfg->host || !*cfg->host || !cfg->port || !cfg->on_complete || cfg->max_outstanding < 1 ||
        cfg->connections < 1) {
        snprintf(err, errlen, "invalid sender configuration (host, port, callback, limits)");
        return NULL;
    }
    const capns_transport_ops *ops =
        cfg->transport == CAPNS_TRANSPORT_NGHTTP2 ? &capns_h2_transport : &capns_curl_transport;

    capns_sender *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->cfg.host = strdup(cfg->host);
    s->cfg.ca_file = dup_or_null(cfg->ca_file);
    if (cfg->identity)      /* certificate auth: held for as long as the transports use it */
        capns_identity_retain((capns_identity *)cfg->identity);
    snprintf(s->endpoint, sizeof s->endpoint, "%s:%u", cfg->host, (unsigned)cfg->port);
    s->ops = ops;
    s->queue = calloc((size_t)cfg->max_outstanding, sizeof *s->queue);
    s->batch = calloc(BATCH_MAX, sizeof *s->batch);
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->posted_lock, NULL);
    atomic_init(&s->free_on_exit, false);
    atomic_init(&s->outstanding, 0);
    atomic_init(&s->stopping, false);
    atomic_init(&s->auth_generation, 0);
    if (!s->cfg.host || !s->queue || !s->batch || (cfg->ca_file && !s->cfg.ca_file)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    s->impl = ops->create(s, err, errlen);
    if (!s->impl)
        goto fail;
    if (pthread_create(&s->thread, NULL, sender_main, s) != 0) {
        snprintf(err, errlen, "cannot start the sender thread");
        ops->destroy(s->impl);
        goto fail;
    }
    return s;
fail:
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->posted_lock);
    capns_identity_release((capns_identity *)s->cfg.identity);
    free((char *)s->cfg.host);
    free((char *)s->cfg.ca_file);
    free(s->queue);
    free(s->batch);
    free(s);
    return NULL;
}

void capns_sender_get_stats(capns_sender *s, capns_sender_stats *out)
{
    __atomic_load(&s->stats.connections_opened, &out->connections_opened, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.connections_lost, &out->connections_lost, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.goaways_received, &out->goaways_received, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.requests_started, &out->requests_started, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.completed, &out->completed, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.not_processed, &out->not_processed, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.timed_out, &out->timed_out, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.bytes_sent, &out->bytes_sent, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.bytes_received, &out->bytes_received, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.server_max_streams, &out->server_max_streams, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.peak_streams, &out->peak_streams, __ATOMIC_RELAXED);
    __atomic_load(&s->stats.lost_in_flight, &out->lost_in_flight, __ATOMIC_RELAXED);
}

void capns_sender_destroy(capns_sender *s)
{
    if (!s)
        return;
    atomic_store_explicit(&s->stopping, true, memory_order_release);
    s->ops->wake(s->impl);
    if (pthread_equal(pthread_self(), s->thread)) {
        /* A posted task: the loop sees `stopping` once the task returns, and the
         * thread frees the sender when it ends. */
        atomic_store_explicit(&s->free_on_exit, true, memory_order_release);
        pthread_detach(s->thread);
        return;
    }
    pthread_join(s->thread, NULL);
    free_sender(s);
}

static void free_sender(capns_sender *s)
{
    s->ops->destroy(s->impl);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->posted_lock);
    capns_identity_release((capns_identity *)s->cfg.identity);
    free((char *)s->cfg.host);
    free((char *)s->cfg.ca_file);
    free(s->queue);
    free(s->batch);
    free(s);
}
