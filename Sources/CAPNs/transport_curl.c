/*
 * transport_curl.c - the libcurl transport: one curl multi handle on the
 * sender thread, HTTP/2 over TLS (ALPN h2), many streams on few connections.
 *
 * A request becomes a transfer (struct xfer): an easy handle taken from a
 * free list, so after warm-up no request pays for curl_easy_init or for the
 * options that never change. Its header list is one node of its own
 * ("apns-id: ...") chained in front of a list shared by every request of the
 * same message and authorization (struct hdrset), so starting a request
 * allocates nothing.
 *
 * Invariants:
 *  - an xfer is either on the free list or busy (added to the multi handle);
 *    a busy xfer owns exactly one capns_queued, completed exactly once in
 *    finish() or cancel_all();
 *  - an hdrset lives while a busy xfer points at it (users > 0); idle sets
 *    are swept the next time a set is missing, so a batch reuses one set;
 *  - the payload and header memory a busy transfer points into stay alive
 *    until curl_multi_remove_handle: the message is released only after.
 *
 * RST_STREAM after completed streams (measured with curl 7.88.1, nghttp2
 * 1.52): curl ends a transfer as soon as Content-Length bytes arrived; if
 * nghttp2 has not yet processed the stream's END_STREAM at that moment,
 * http2_data_done() sees the stream still open and sends RST_STREAM
 * (STREAM_CLOSED). A server with rapid-reset protection counts those and
 * sends GOAWAY after about a thousand. This happens when a response says
 * "content-length: 0" but ends with a separate empty DATA frame, and for
 * every stream when CURLOPT_IGNORE_CONTENT_LENGTH is set (so it is not).
 * APNs-shaped answers (HEADERS with END_STREAM, or a body whose DATA carries
 * END_STREAM) draw no resets. When a server still drops the connection, curl
 * retries the streams above GOAWAY's last-stream-id itself; the rest end
 * NOT_PROCESSED and on_close_socket() counts connections_lost.
 */
#include "proxy_tunnel.h"
#include "sender_internal.h"
#include "identity_internal.h"

#include "curl_api.h"
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define BODY_MAX 512            /* APNs error bodies are tens of bytes */
#define TAKE_BATCH 64           /* requests moved from the queue per lock */
#define POLL_MS 1000            /* upper bound on one wait; wakeups cut it short */
#define PARKED_RETRY_MS 2       /* the wait while transfers are under way (curl_run) */
#define SOCKETS_MAX 64          /* connections tracked for connections_lost */

typedef struct hdrset {
    struct hdrset *next;
    capns_message *message;     /* retained while the set exists */
    uint64_t generation;        /* authorization generation it was built for */
    int users;                  /* busy xfers pointing at it */
    struct curl_slist *list;
} hdrset;

typedef struct {
    curl_socket_t fd;
    bool used;                  /* a request went out on it */
} tracked_socket;

typedef struct curl_transport curl_transport;

typedef struct xfer {
    struct xfer *next;          /* free list, or the list of all xfers */
    struct xfer *next_all;
    curl_transport *t;
    CURL *easy;
    bool busy;
    bool no_h2;                 /* the prereq callback refused the connection */
    capns_queued q;
    hdrset *headers;
    struct curl_slist id_node;  /* "apns-id: ..." (broadcast: "apns-request-id: ...") then headers->list */
    char id_line[24 + CAPNS_UUID_LEN];
    char apns_id[CAPNS_UUID_LEN + 1];
    char unique_id[CAPNS_UUID_LEN + 1];
    char body[BODY_MAX];
    size_t body_len;
    char errbuf[CURL_ERROR_SIZE];
    char proxy_answer[80];      /* the proxy's CONNECT status line after "HTTP/1.x ", or "" */
} xfer;

struct curl_transport {
    capns_sender *s;
    CURLM *multi;
    xfer *free_list;
    xfer *all;                  /* every xfer ever made, for cancel_all and destroy */
    hdrset *sets;
    size_t busy;
    char authorization[CAPNS_JWT_MAX + 8];
    uint64_t auth_generation;
    char url_prefix[320];       /* "https://host:port/3/device/" */
    tracked_socket sockets[SOCKETS_MAX];   /* open sockets, for connections_lost */
    size_t n_sockets;
    /* APNs allows one stream until a request with a valid token succeeds
     * (APNS-PROTOCOL.md, "Connection"). curl assumes 100 streams until the
     * server's SETTINGS arrive, and a burst into a one-stream window is refused
     * and makes curl drop the connection. So until the first answer (which
     * comes after the server's SETTINGS, and again after any transport error)
     * only one request is in flight; from then on curl follows SETTINGS. */
    bool warm;
    /* cfg.ca_file on top of the system's bundle, as one PEM blob every easy handle
     * points at (CURLOPT_CAINFO_BLOB, not copied): CURLOPT_CAINFO alone would
     * replace the system's bundle instead of adding to it. */
    char *ca_blob;
    size_t ca_blob_len;
    proxy_spec *proxy;          /* NULL = connect directly */
    char proxy_url[320];        /* "http://host:port" */
};

/* ---------------------------------------------------------- header sets */

static struct curl_slist *add_header(struct curl_slist *list, bool *ok, const char *name,
                                     const char *value)
{
    char line[CAPNS_JWT_MAX + 64];
    if (value)
        snprintf(line, sizeof line, "%s: %s", name, value);
    else
        snprintf(line, sizeof line, "%s:", name);   /* "Name:" tells curl to send none */
    struct curl_slist *l = curl_slist_append(list, line);
    if (!l)
        *ok = false;
    return l ? l : list;
}

/* Builds the headers every request of m shares. What curl adds by itself for
 * a POST (Accept, Content-Type, Expect) is switched off; APNs wants none. */
static hdrset *hdrset_build(curl_transport *t, capns_message *m)
{
    hdrset *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    bool ok = true;
    struct curl_slist *l = NULL;
    if (t->authorization[0])
        l = add_header(l, &ok, "authorization", t->authorization);
    if (m->channel_id)      /* broadcast: the bundle id is in the path */
        l = add_header(l, &ok, "apns-channel-id", m->channel_id);
    else
        l = add_header(l, &ok, "apns-topic", m->topic);
    if (m->push_type)
        l = add_header(l, &ok, "apns-push-type", m->push_type);
    if (m->priority[0])
        l = add_header(l, &ok, "apns-priority", m->priority);
    if (m->expiration[0])
        l = add_header(l, &ok, "apns-expiration", m->expiration);
    if (m->collapse_id)
        l = add_header(l, &ok, "apns-collapse-id", m->collapse_id);
    l = add_header(l, &ok, "Accept", NULL);
    l = add_header(l, &ok, "Content-Type", NULL);
    l = add_header(l, &ok, "Expect", NULL);
    if (!ok) {
        curl_slist_free_all(l);
        free(h);
        return NULL;
    }
    h->list = l;
    h->message = m;
    capns_message_retain(m);
    h->generation = t->auth_generation;
    return h;
}

static void hdrset_free(hdrset *h)
{
    curl_slist_free_all(h->list);
    capns_message_release(h->message);
    free(h);
}

/* Frees the sets no transfer uses; called only on a miss, so a batch's set survives. */
static void hdrset_sweep(curl_transport *t)
{
    for (hdrset **p = &t->sets; *p;) {
        hdrset *h = *p;
        if (h->users == 0) {
            *p = h->next;
            hdrset_free(h);
        } else {
            p = &h->next;
        }
    }
}

static hdrset *hdrset_get(curl_transport *t, capns_message *m)
{
    for (hdrset *h = t->sets; h; h = h->next)
        if (h->message == m && h->generation == t->auth_generation)
            return h;
    hdrset_sweep(t);
    hdrset *h = hdrset_build(t, m);
    if (h) {
        h->next = t->sets;
        t->sets = h;
    }
    return h;
}

/* ------------------------------------------------------------ callbacks */

void capns__take_header(const char *line, size_t len, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *p = line + nl + 1, *end = line + len;
    while (p < end && *p == ' ')
        p++;
    while (end > p && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    size_t n = (size_t)(end - p) < outlen - 1 ? (size_t)(end - p) : outlen - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata)
{
    xfer *x = userdata;
    size_t len = size * nitems;
    /* APNs answers over HTTP/2 ("HTTP/2 200"): an HTTP/1 status line is the proxy's
     * answer to CONNECT, kept to word a refusal as the nghttp2 transport does. */
    if (len > 9 && memcmp(buf, "HTTP/1.", 7) == 0) {
        size_t n = 0;
        for (size_t i = 9; i < len && buf[i] != '\r' && buf[i] != '\n' && n + 1 < sizeof x->proxy_answer; i++)
            x->proxy_answer[n++] = (buf[i] >= 0x20 && buf[i] < 0x7f) ? buf[i] : '?';
        x->proxy_answer[n] = '\0';
    }
    if (len > 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* A new response starts (an interim one may have preceded it). */
        x->apns_id[0] = x->unique_id[0] = '\0';
        x->body_len = 0;
        return len;
    }
    capns__take_header(buf, len, "apns-id", x->apns_id, sizeof x->apns_id);
    capns__take_header(buf, len, "apns-request-id", x->apns_id, sizeof x->apns_id);   /* a broadcast's id */
    capns__take_header(buf, len, "apns-unique-id", x->unique_id, sizeof x->unique_id);
    return len;
}

/* Keeps the first BODY_MAX bytes; a longer body is not an APNs error body. */
static size_t on_body(char *buf, size_t size, size_t nmemb, void *userdata)
{
    xfer *x = userdata;
    size_t len = size * nmemb, room = sizeof x->body - x->body_len;
    size_t n = len < room ? len : room;
    memcpy(x->body + x->body_len, buf, n);
    x->body_len += n;
    return len;
}

/* Sockets are tracked from creation; one that carried a request is "used".
 * The prereq callback knows a connection only by its local port. */
static curl_socket_t on_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    curl_transport *t = clientp;
    curl_socket_t fd = socket(a->family, a->socktype, a->protocol);
    if (fd != CURL_SOCKET_BAD && t->n_sockets < SOCKETS_MAX)
        t->sockets[t->n_sockets++] = (tracked_socket){fd, false};
    return fd;
}

static void mark_used(curl_transport *t, int local_port)
{
    for (size_t i = 0; i < t->n_sockets; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (t->sockets[i].used || getsockname(t->sockets[i].fd, (struct sockaddr *)&ss, &len) != 0)
            continue;
        int port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                            : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        if (port == local_port)
            t->sockets[i].used = true;
    }
}

/* Runs once the connection is up, before the request goes out: the last point
 * where a connection that did not negotiate h2 can be refused unused. */
static int on_prereq(void *clientp, char *primary_ip, char *local_ip, int primary_port,
                     int local_port)
{
    xfer *x = clientp;
    const struct curl_tlssessioninfo *tls = NULL;
    const unsigned char *alpn = NULL;
    unsigned alpn_len = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_TLS_SSL_PTR, &tls) == CURLE_OK && tls &&
        tls->backend == CURLSSLBACKEND_OPENSSL && tls->internals)
        SSL_get0_alpn_selected(tls->internals, &alpn, &alpn_len);
    if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0) {
        x->no_h2 = true;
        return CURL_PREREQFUNC_ABORT;
    }
    mark_used(x->t, local_port);
    return CURL_PREREQFUNC_OK;
}

/* A used connection that closes while requests are in flight was lost (to an
 * error or the peer): curl itself retires only connections nothing uses. */
static int on_close_socket(void *clientp, curl_socket_t fd)
{
    curl_transport *t = clientp;
    for (size_t i = 0; i < t->n_sockets; i++) {
        if (t->sockets[i].fd != fd)
            continue;
        if (t->sockets[i].used && t->busy && !capns__stopping(t->s))
            CAPNS_STAT_ADD(t->s, connections_lost, 1);
        t->sockets[i] = t->sockets[--t->n_sockets];
        break;
    }
    return close(fd);
}

/* ------------------------------------------------------------ transfers */

/* Appends the whole file at path to *buf; false when it cannot be read. */
static bool append_file(char **buf, size_t *len, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool ok = true;
    char chunk[16384];
    size_t n;
    while (ok && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        char *p = realloc(*buf, *len + n + 2);
        if (!p) {
            ok = false;
            break;
        }
        memcpy(p + *len, chunk, n);
        *buf = p;
        *len += n;
    }
    ok = ok && !ferror(f);
    fclose(f);
    if (ok && *len) {
        (*buf)[(*len)++] = '\n';   /* a bundle whose last line lacks one must not glue PEMs */
        (*buf)[*len] = '\0';
    }
    return ok;
}

void capns__curl_apns_defaults(void *easy)
{
    CURL *e = easy;
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
}

/* The system's bundle as OpenSSL names it (SSL_CERT_FILE, else its built-in path),
 * the file the nghttp2 transport adds to its store when a chain needs the system's
 * roots, so every curl handle trusts the same roots as it; then ca_file. CURLOPT_CAINFO alone would
 * replace the system's roots; one blob adds to them. The default CA directory stays
 * curl's own (CURLOPT_CAPATH untouched). */
bool capns__curl_ca_blob(const char *ca_file, char **blob, size_t *len, char *err, size_t errlen)
{
    const char *system = getenv(X509_get_default_cert_file_env());
    if (!system || !*system)
        system = X509_get_default_cert_file();
    append_file(blob, len, system);     /* none on this machine: fine */
    if (!append_file(blob, len, ca_file)) {
        snprintf(err, errlen, "TLS: cannot load CA file %s", ca_file);
        return false;
    }
    return true;
}

static bool build_ca_blob(curl_transport *t, char *err, size_t errlen)
{
    const char *ca_file = t->s->cfg.ca_file;
    return !ca_file || capns__curl_ca_blob(ca_file, &t->ca_blob, &t->ca_blob_len, err, errlen);
}

/* Certificate auth: curl builds an SSL_CTX per connection and hands it here before
 * the handshake; the client certificate goes on it from the identity already loaded
 * and checked (no file or password passes through curl). */
static CURLcode on_ssl_ctx(CURL *easy, void *ssl_ctx, void *data)
{
    const curl_transport *t = data;
    char err[CAPNS_ERR_MAX];
    return capns__identity_apply(t->s->cfg.identity, ssl_ctx, err, sizeof err) == 0 ? CURLE_OK
                                                                                    : CURLE_SSL_CERTPROBLEM;
}

/* Options every request of this sender shares, set once per easy handle. */
static xfer *xfer_new(curl_transport *t)
{
    const capns_sender_config *cfg = &t->s->cfg;
    xfer *x = calloc(1, sizeof *x);
    if (!x || !(x->easy = curl_easy_init())) {
        free(x);
        return NULL;
    }
    CURL *e = x->easy;
    x->t = t;
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    capns__curl_apns_defaults(e);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    if (t->ca_blob) {
        struct curl_blob blob = {t->ca_blob, t->ca_blob_len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (cfg->identity) {
        curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
        curl_easy_setopt(e, CURLOPT_SSL_CTX_DATA, t);
    }
    if (cfg->connect_timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    /* The proxy is the caller's decision alone: "" keeps libcurl from taking one (or
     * exceptions, NO_PROXY) from the environment. With one, CONNECT (HTTPPROXYTUNNEL)
     * always, so TLS runs end to end with the APNs host, verified against its name. */
    curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    curl_easy_setopt(e, CURLOPT_PROXY, t->proxy ? t->proxy_url : "");
    if (t->proxy) {
        curl_easy_setopt(e, CURLOPT_PROXYTYPE, (long)CURLPROXY_HTTP);
        curl_easy_setopt(e, CURLOPT_HTTPPROXYTUNNEL, 1L);
        curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 0L);   /* on_header sees the answer */
        if (t->proxy->username) {
            curl_easy_setopt(e, CURLOPT_PROXYAUTH, (long)CURLAUTH_BASIC);
            curl_easy_setopt(e, CURLOPT_PROXYUSERNAME, t->proxy->username);
            curl_easy_setopt(e, CURLOPT_PROXYPASSWORD, t->proxy->password);
        }
    }
    x->next_all = t->all;
    t->all = x;
    return x;
}

static xfer *xfer_get(curl_transport *t)
{
    xfer *x = t->free_list;
    if (x)
        t->free_list = x->next;
    else
        x = xfer_new(t);
    return x;
}

static void xfer_put(curl_transport *t, xfer *x)
{
    if (x->headers)
        x->headers->users--;
    x->headers = NULL;
    x->busy = false;
    x->next = t->free_list;
    t->free_list = x;
    t->busy--;
}

/* The time left until q's deadline, in whole ms rounded up; 0 = no deadline. */
static long time_left_ms(const curl_transport *t, const capns_queued *q)
{
    int timeout = t->s->cfg.request_timeout_ms;
    if (timeout <= 0)
        return 0;
    int64_t left = q->submitted_ns + (int64_t)timeout * 1000000 - capns__now_ns();
    return left <= 0 ? -1 : (long)((left + 999999) / 1000000);
}

/* Puts one queued request on the wire (eventually); completes it if it cannot. */
static void start(curl_transport *t, capns_queued *q)
{
    capns_sender *s = t->s;
    long left = time_left_ms(t, q);
    if (left < 0) {
        capns__fail(s, q, CAPNS_TIMED_OUT, "request deadline passed before it could be sent");
        return;
    }
    hdrset *h = hdrset_get(t, q->message);
    xfer *x = h ? xfer_get(t) : NULL;
    if (!x) {
        capns__fail(s, q, CAPNS_NOT_PROCESSED, "out of memory starting a request");
        return;
    }
    x->q = *q;
    x->headers = h;
    h->users++;
    x->no_h2 = false;
    x->apns_id[0] = x->unique_id[0] = x->errbuf[0] = x->proxy_answer[0] = '\0';
    x->body_len = 0;
    const capns_message *m = q->message;
    snprintf(x->id_line, sizeof x->id_line, "%s: %s", m->channel_id ? "apns-request-id" : "apns-id", q->apns_id);
    x->id_node.data = x->id_line;
    x->id_node.next = h->list;

    /* url_prefix ends in "/3/device/"; a broadcast keeps only its origin. */
    char url[sizeof t->url_prefix + CAPNS_TOKEN_MAX + CAPNS_BUNDLE_MAX];
    if (m->channel_id)
        snprintf(url, sizeof url, "%.*s%s", (int)(strlen(t->url_prefix) - (sizeof "/3/device/" - 1)),
                 t->url_prefix, m->path);
    else
        snprintf(url, sizeof url, "%s%s", t->url_prefix, q->token);
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, &x->id_node);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->message->payload_len);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, (const char *)q->message->payload);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, left);

    x->busy = true;
    t->busy++;
    CURLMcode mc = curl_multi_add_handle(t->multi, e);
    if (mc != CURLM_OK) {
        xfer_put(t, x);
        capns__fail(s, q, CAPNS_NOT_PROCESSED, "cannot start a transfer: %s", curl_multi_strerror(mc));
        return;
    }
    CAPNS_STAT_ADD(s, requests_started, 1);
    CAPNS_STAT_MAX(s, peak_streams, (uint32_t)t->busy);
}

static void start_queued(curl_transport *t)
{
    capns_sender *s = t->s;
    if (capns__authorization_generation(s) != t->auth_generation) {
        char buf[sizeof t->authorization];
        t->auth_generation = capns__authorization(s, buf, sizeof buf);
        memcpy(t->authorization, buf, sizeof buf);
    }
    capns_queued batch[TAKE_BATCH];
    size_t n;
    /* Requests left in the queue (no room on the wire, or one at a time until warm)
     * keep their deadline there; curl_run wakes for the oldest one's. */
    if (s->cfg.request_timeout_ms > 0) {
        int64_t cutoff = capns__now_ns() - (int64_t)s->cfg.request_timeout_ms * 1000000;
        if (capns__oldest_queued_ns(s) <= cutoff)
            capns__expire_queued(s, cutoff);
    }
    if (!t->warm) {
        if (t->busy == 0 && capns__take(s, batch, 1) == 1)
            start(t, &batch[0]);
        return;
    }
    /* Hand curl no more than the streams it may open: the rest wait in our queue,
     * which is cheaper than curl's pending list and keeps peak_streams honest. */
    size_t limit = (size_t)(s->cfg.max_streams > 0 ? s->cfg.max_streams : s->cfg.max_outstanding) *
                   (size_t)s->cfg.connections;
    while (t->busy < limit) {
        size_t want = limit - t->busy < TAKE_BATCH ? limit - t->busy : TAKE_BATCH;
        if ((n = capns__take(s, batch, want)) == 0)
            break;
        for (size_t i = 0; i < n; i++)
            start(t, &batch[i]);
    }
}

/* ------------------------------------------------------------- outcomes */

/* Errors where no usable connection was obtained: the request never left. */
static bool is_connect_error(CURLcode rc)
{
    switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL: case CURLE_URL_MALFORMAT:
    case CURLE_COULDNT_RESOLVE_PROXY: case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT: case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION: case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED: case CURLE_SSL_CERTPROBLEM: case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE: case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE: case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH: case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT: case CURLE_ABORTED_BY_CALLBACK:
        return true;
    default:
        return false;
    }
}

/* A tunnel the proxy refused is not a connection opened (as in the nghttp2 transport). */
static void add_stats(curl_transport *t, CURL *e, bool refused_by_proxy)
{
    long connects = 0, req_size = 0, hdr_size = 0;
    curl_off_t up = 0, down = 0;
    curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
    curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &req_size);
    curl_easy_getinfo(e, CURLINFO_HEADER_SIZE, &hdr_size);
    curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &up);
    curl_easy_getinfo(e, CURLINFO_SIZE_DOWNLOAD_T, &down);
    CAPNS_STAT_ADD(t->s, connections_opened, refused_by_proxy ? 0 : (uint64_t)connects);
    CAPNS_STAT_ADD(t->s, bytes_sent, (uint64_t)req_size + (uint64_t)up);
    CAPNS_STAT_ADD(t->s, bytes_received, (uint64_t)hdr_size + (uint64_t)down);
}

static void complete_answered(curl_transport *t, xfer *x, capns_queued *q)
{
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    capns_completion *c = capns__complete(t->s, q, CAPNS_ANSWERED);
    c->status = (int32_t)status;
    memcpy(c->apns_id, x->apns_id, sizeof c->apns_id);
    memcpy(c->unique_id, x->unique_id, sizeof c->unique_id);
    if (status != 200 && x->body_len)
        capns__parse_error_body(x->body, x->body_len, c);
}

/*
 * libcurl 7.88 can fail a transfer whose answer it already holds: after a GOAWAY
 * the server closes the connection once every stream is answered, and a write of
 * curl's that follows (an RST_STREAM for a finished stream) ends the transfer with
 * "Send failure". The server processed it: a status (with the reason, for an
 * error) is the answer, and sending it again would deliver it twice.
 */
static bool has_answer(xfer *x)
{
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    return !x->no_h2 && (status == 200 || (status > 200 && x->body_len > 0));
}

/*
 * Maps a finished transfer to its outcome. A stream that failed after its
 * connection was up (RST_STREAM, GOAWAY above its id that curl did not retry
 * itself, the connection dying under it) is NOT_PROCESSED: the Swift layer
 * sends it again with the same apns-id.
 */
static void finish(curl_transport *t, xfer *x, CURLcode rc)
{
    capns_sender *s = t->s;
    capns_queued q = x->q;
    const char *why = x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc);
    long proxy_status = 0;
    if (t->proxy)
        curl_easy_getinfo(x->easy, CURLINFO_HTTP_CONNECTCODE, &proxy_status);
    bool refused_by_proxy = rc != CURLE_OK && proxy_status && (proxy_status < 200 || proxy_status > 299);
    add_stats(t, x->easy, refused_by_proxy);
    curl_multi_remove_handle(t->multi, x->easy);

    int timeout = s->cfg.request_timeout_ms;
    bool deadline_passed = timeout > 0 &&
        capns__now_ns() - q.submitted_ns >= (int64_t)(timeout - 2) * 1000000;

    t->warm = rc == CURLE_OK;
    if (refused_by_proxy) {
        /* The proxy refused the tunnel; its own status line, as the nghttp2 transport words it. */
        char why_proxy[200];
        const char *reason = x->proxy_answer;
        reason += strlen(reason) >= 3 ? 3 : strlen(reason);     /* past "407" */
        while (*reason == ' ')
            reason++;
        proxy_refused(why_proxy, sizeof why_proxy, t->proxy, (int)proxy_status, reason);
        capns__fail(s, &q, CAPNS_CONNECT_FAILED, "%s", why_proxy);
    } else if (rc == CURLE_OK || has_answer(x))
        complete_answered(t, x, &q);
    else if (x->no_h2)
        capns__fail(s, &q, CAPNS_CONNECT_FAILED,
                    "server did not negotiate HTTP/2 (ALPN h2); APNs requires HTTP/2");
    else if (rc == CURLE_OPERATION_TIMEDOUT && deadline_passed)
        capns__fail(s, &q, CAPNS_TIMED_OUT, "no answer within %d ms (%s)", timeout, why);
    else if ((rc == CURLE_OPERATION_TIMEDOUT || is_connect_error(rc)) && t->proxy && !proxy_status)
        capns__fail(s, &q, CAPNS_CONNECT_FAILED, "proxy %s: cannot connect: %s", t->proxy->label, why);
    else if (rc == CURLE_OPERATION_TIMEDOUT || is_connect_error(rc))
        capns__fail(s, &q, CAPNS_CONNECT_FAILED, "cannot connect: %s", why);
    else {
        /* curl retries what a GOAWAY refused itself: what is left failed mid-flight. */
        capns__fail(s, &q, CAPNS_NOT_PROCESSED, "stream failed before an answer: %s", why);
        CAPNS_STAT_ADD(s, lost_in_flight, 1);
    }
    xfer_put(t, x);
}

/* Transfers that ran out of time end oldest deadline first, as queued ones do
 * (capns__expire_queued): libcurl reports the transfers it timed out in one pass
 * in the order they were added, and a resend is added ahead of older requests.
 * Queued requests whose deadline passed too, and came before a late transfer's, end
 * before it: a sender thread that ran late between start_queued and here finds a
 * queued request and a newer transfer due at once. */
#define LATE_MAX 64

static void reap(curl_transport *t)
{
    CURLMsg *msg;
    int left;
    xfer *late[LATE_MAX];
    size_t n_late = 0;
    while ((msg = curl_multi_info_read(t->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        xfer *x = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        if (msg->data.result == CURLE_OPERATION_TIMEDOUT && n_late < LATE_MAX)
            late[n_late++] = x;     /* msg is not read again: finish() below removes it */
        else
            finish(t, x, msg->data.result);
    }
    for (size_t i = 1; i < n_late; i++) {
        xfer *x = late[i];
        size_t j = i;
        for (; j > 0 && late[j - 1]->q.submitted_ns > x->q.submitted_ns; j--)
            late[j] = late[j - 1];
        late[j] = x;
    }
    int timeout = t->s->cfg.request_timeout_ms;
    int64_t due = timeout > 0 ? capns__now_ns() - (int64_t)timeout * 1000000 : INT64_MIN;
    for (size_t i = 0; i < n_late; i++) {
        int64_t older = late[i]->q.submitted_ns < due ? late[i]->q.submitted_ns : due;
        if (capns__oldest_queued_ns(t->s) <= older)
            capns__expire_queued(t->s, older);
        finish(t, late[i], CURLE_OPERATION_TIMEDOUT);
    }
}

/* On stop: every busy transfer ends CANCELLED, exactly once. */
static void cancel_all(curl_transport *t)
{
    for (xfer *x = t->all; x; x = x->next_all) {
        if (!x->busy)
            continue;
        capns_queued q = x->q;
        curl_multi_remove_handle(t->multi, x->easy);
        xfer_put(t, x);
        capns__fail(t->s, &q, CAPNS_CANCELLED, "sender shut down before an answer came");
    }
}

/* ------------------------------------------------------------ the ops */

static void *curl_create(capns_sender *s, char *err, size_t errlen)
{
    if (!capns__curl_load(err, errlen))
        return NULL;
    curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    if (!(v->features & CURL_VERSION_HTTP2)) {
        snprintf(err, errlen, "this libcurl (%s) was built without HTTP/2", v->version);
        return NULL;
    }
    curl_transport *t = calloc(1, sizeof *t);
    if (!t || !(t->multi = curl_multi_init())) {
        free(t);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->s = s;
    if (!build_ca_blob(t, err, errlen)) {
        curl_multi_cleanup(t->multi);
        free(t->ca_blob);
        free(t);
        return NULL;
    }
    const capns_sender_config *cfg = &s->cfg;
    if (proxy_configured(cfg)) {
        if (!(t->proxy = proxy_spec_new(cfg, err, errlen))) {
            curl_multi_cleanup(t->multi);
            free(t->ca_blob);
            free(t);
            return NULL;
        }
        snprintf(t->proxy_url, sizeof t->proxy_url, "http://%s", t->proxy->label);
    }
    bool v6 = strchr(cfg->host, ':') != NULL;
    snprintf(t->url_prefix, sizeof t->url_prefix, "https://%s%s%s:%u/3/device/", v6 ? "[" : "",
             cfg->host, v6 ? "]" : "", (unsigned)cfg->port);
    curl_multi_setopt(t->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(t->multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
                      (long)(cfg->max_streams > 0 ? cfg->max_streams : cfg->max_outstanding));
    curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)cfg->connections);
    curl_multi_setopt(t->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)cfg->connections);
    curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, (long)cfg->connections);
    return t;
}

/* POLL_MS, or less when a queued request's deadline comes sooner. */
static int poll_ms(curl_transport *t)
{
    int timeout = t->s->cfg.request_timeout_ms;
    if (timeout <= 0)
        return POLL_MS;
    int64_t oldest = capns__oldest_queued_ns(t->s);
    if (oldest == INT64_MAX)
        return POLL_MS;
    int64_t ms = (oldest + (int64_t)timeout * 1000000 - capns__now_ns() + 999999) / 1000000;
    return ms < 0 ? 0 : ms < POLL_MS ? (int)ms : POLL_MS;
}

static void curl_run(void *impl)
{
    curl_transport *t = impl;
    capns_sender *s = t->s;
    while (!capns__stopping(s)) {
        start_queued(t);
        int running = 0;
        curl_multi_perform(t->multi, &running);
        reap(t);
        capns__flush(s);
        capns__run_posted(s);
        /* Not warm, one request at a time: when it failed (no connection: a refusing
         * proxy, a dead endpoint) the next one goes now, not after a whole idle poll,
         * or a queue of them would run into their deadlines one poll apart. */
        if (!t->warm && t->busy == 0 && capns__oldest_queued_ns(s) != INT64_MAX)
            continue;
        /* A transfer libcurl parked for a free stream (the server allows one until
         * the first success with token auth, and still one when every answer is an
         * error) is retried only by a later perform, with no timer set for it: a
         * plain wait left one request per POLL_MS. While transfers are under way the
         * wait is short; a busy connection ends it sooner with socket activity. */
        int wait = poll_ms(t);
        if (t->busy > 0 && wait > PARKED_RETRY_MS)
            wait = PARKED_RETRY_MS;
        curl_multi_poll(t->multi, NULL, 0, wait, NULL);
    }
    cancel_all(t);
    capns__flush(s);
}

static void curl_wake(void *impl)
{
    curl_transport *t = impl;
    curl_multi_wakeup(t->multi);
}

static void curl_destroy(void *impl)
{
    curl_transport *t = impl;
    for (xfer *x = t->all; x; x = x->next_all)
        if (x->busy)
            curl_multi_remove_handle(t->multi, x->easy);
    curl_multi_cleanup(t->multi);   /* closes the connections; on_close_socket still sees t */
    for (xfer *x = t->all, *next; x; x = next) {
        next = x->next_all;
        curl_easy_cleanup(x->easy);
        free(x);
    }
    while (t->sets) {
        hdrset *h = t->sets;
        t->sets = h->next;
        hdrset_free(h);
    }
    free(t->ca_blob);
    proxy_spec_free(t->proxy);
    free(t);
}

const capns_transport_ops capns_curl_transport = {"curl", curl_create, curl_run, curl_wake,
                                                  curl_destroy};
