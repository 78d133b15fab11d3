/*
 * manage.c - broadcast channel management (iOS 18): one request at a time over
 * one kept HTTP/2 connection, with libcurl's easy interface.
 *
 * Why not the sender: management requests are rare (a channel per event), go to
 * another host, use GET and DELETE, and their answers carry bodies (a list of up
 * to 10,000 channel ids) and headers (apns-channel-id) that the sender's fixed
 * completions were not made for. libcurl is opened at the first request, not at
 * create (curl_api.h): a service that never manages a channel never loads it.
 *
 * Invariants: peer verification is always on (the system's roots plus an extra
 * CA file); an answer body is bounded by CAPNS_MANAGER_BODY_MAX; no header value
 * a caller passes may hold a control character; the JWT is never logged.
 */
#include "capns.h"
#include "sender_internal.h"

#include "curl_api.h"
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct capns_manager {
    pthread_mutex_t lock;       /* one request at a time on the one handle */
    CURL *easy;                 /* made at the first request, then kept: its connection is reused */
    char origin[300];           /* "https://host:port" */
    char *ca_blob;
    size_t ca_blob_len;
    int32_t connect_timeout_ms, request_timeout_ms;
};

capns_manager *capns_manager_create(const capns_manager_config *cfg, char *err, size_t errlen)
{
    if (!cfg->host || !*cfg->host || !capns_header_value_ok(cfg->host) || strchr(cfg->host, '/')) {
        snprintf(err, errlen, "channel management: bad host");
        return NULL;
    }
    capns_manager *mg = calloc(1, sizeof *mg);
    if (!mg) {
        snprintf(err, errlen, "channel management: out of memory");
        return NULL;
    }
    pthread_mutex_init(&mg->lock, NULL);
    bool v6 = strchr(cfg->host, ':') != NULL;
    snprintf(mg->origin, sizeof mg->origin, "https://%s%s%s:%u", v6 ? "[" : "", cfg->host, v6 ? "]" : "",
             (unsigned)cfg->port);
    /* Read now, so that a bad CA file is an error at create, not at the first call. */
    if (cfg->ca_file && !capns__curl_ca_blob(cfg->ca_file, &mg->ca_blob, &mg->ca_blob_len, err, errlen)) {
        capns_manager_destroy(mg);
        return NULL;
    }
    mg->connect_timeout_ms = cfg->connect_timeout_ms;
    mg->request_timeout_ms = cfg->request_timeout_ms;
    return mg;
}

/* The handle, made at the first request (libcurl loaded by then); under mg->lock. */
static CURL *handle(capns_manager *mg)
{
    if (mg->easy || !(mg->easy = curl_easy_init()))
        return mg->easy;
    CURL *e = mg->easy;
    capns__curl_apns_defaults(e);
    if (mg->ca_blob) {
        struct curl_blob blob = {mg->ca_blob, mg->ca_blob_len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (mg->connect_timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)mg->connect_timeout_ms);
    if (mg->request_timeout_ms > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)mg->request_timeout_ms);
    return e;
}

void capns_manager_destroy(capns_manager *mg)
{
    if (!mg)
        return;
    if (mg->easy)
        curl_easy_cleanup(mg->easy);
    pthread_mutex_destroy(&mg->lock);
    free(mg->ca_blob);
    free(mg);
}

void capns_manager_response_free(capns_manager_response *r)
{
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
}

/* ------------------------------------------------------------- one call */

typedef struct {
    capns_manager_response *out;
    bool too_long;
} call_state;

static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata)
{
    call_state *st = userdata;
    size_t len = size * nitems;
    if (len > 5 && memcmp(buf, "HTTP/", 5) == 0) {     /* a new (final or interim) answer */
        st->out->request_id[0] = st->out->channel_id[0] = '\0';
        return len;
    }
    capns__take_header(buf, len, "apns-request-id", st->out->request_id, sizeof st->out->request_id);
    capns__take_header(buf, len, "apns-channel-id", st->out->channel_id, sizeof st->out->channel_id);
    return len;
}

static size_t on_body(char *buf, size_t size, size_t nmemb, void *userdata)
{
    call_state *st = userdata;
    capns_manager_response *r = st->out;
    size_t len = size * nmemb;
    if (r->body_len + len > CAPNS_MANAGER_BODY_MAX) {
        st->too_long = true;
        return 0;               /* curl ends the transfer with a write error */
    }
    char *p = realloc(r->body, r->body_len + len + 1);
    if (!p)
        return 0;
    memcpy(p + r->body_len, buf, len);
    r->body_len += len;
    p[r->body_len] = '\0';
    r->body = p;
    return len;
}

/* The "reason" of an error body {"reason":"..."}; bodies are small and flat. */
static void parse_reason(const char *body, size_t len, char *out, size_t outlen)
{
    const char *k = body ? strstr(body, "\"reason\"") : NULL;
    if (!k)
        return;
    const char *p = k + 8, *end = body + len;
    while (p < end && (*p == ' ' || *p == ':'))
        p++;
    if (p >= end || *p != '"')
        return;
    p++;
    const char *q = memchr(p, '"', (size_t)(end - p));
    if (!q)
        return;
    size_t n = (size_t)(q - p) < outlen - 1 ? (size_t)(q - p) : outlen - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

static bool ok_or_null(const char *s)
{
    return !s || capns_header_value_ok(s);
}

int capns_manager_request(capns_manager *mg, const char *method, const char *path, const char *jwt,
                          const char *channel_id, const char *request_id, const uint8_t *body,
                          size_t body_len, capns_manager_response *out)
{
    memset(out, 0, sizeof *out);
    if (!method || !path || path[0] != '/' || !capns_header_value_ok(path) || !ok_or_null(jwt) ||
        !ok_or_null(channel_id) || !ok_or_null(request_id) || (jwt && strlen(jwt) >= CAPNS_JWT_MAX)) {
        snprintf(out->error, sizeof out->error, "channel management: a header value has a control character or is too long");
        errno = EINVAL;
        return -1;
    }
    char why[256];
    if (!capns__curl_load(why, sizeof why)) {
        snprintf(out->error, sizeof out->error, "channel management: %s", why);
        return -1;
    }
    char line[CAPNS_JWT_MAX + 32];
    struct curl_slist *h = NULL;
    bool ok = true;
#define ADD(...)                                                        \
    do {                                                                \
        snprintf(line, sizeof line, __VA_ARGS__);                       \
        struct curl_slist *n_ = curl_slist_append(h, line);             \
        if (n_) h = n_; else ok = false;                                \
    } while (0)
    if (jwt)
        ADD("authorization: bearer %s", jwt);
    if (channel_id)
        ADD("apns-channel-id: %s", channel_id);
    if (request_id)
        ADD("apns-request-id: %s", request_id);
    if (body)
        ADD("content-type: application/json");
    ADD("Accept:");
    ADD("Expect:");
#undef ADD
    char url[sizeof mg->origin + 512];
    if (!ok || snprintf(url, sizeof url, "%s%s", mg->origin, path) >= (int)sizeof url) {
        curl_slist_free_all(h);
        snprintf(out->error, sizeof out->error, "channel management: out of memory or path too long");
        return -1;
    }

    call_state st = {out, false};
    pthread_mutex_lock(&mg->lock);
    CURL *e = handle(mg);
    if (!e) {
        pthread_mutex_unlock(&mg->lock);
        curl_slist_free_all(h);
        snprintf(out->error, sizeof out->error, "channel management: out of memory");
        return -1;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &st);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, NULL);
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? (const char *)body : "");
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);     /* resets POST state from an earlier call */
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, strcmp(method, "GET") == 0 ? NULL : method);
    }
    CURLcode rc = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
    pthread_mutex_unlock(&mg->lock);
    curl_slist_free_all(h);

    if (rc != CURLE_OK) {
        if (st.too_long)
            snprintf(out->error, sizeof out->error, "%s: answer longer than %u bytes", mg->origin,
                     CAPNS_MANAGER_BODY_MAX);
        else
            snprintf(out->error, sizeof out->error, "%s: %s", mg->origin, errbuf[0] ? errbuf : curl_easy_strerror(rc));
        out->status = 0;
        capns_manager_response_free(out);
        return -1;
    }
    out->status = (int32_t)status;
    if (status >= 400)
        parse_reason(out->body, out->body_len, out->reason, sizeof out->reason);
    return 0;
}
