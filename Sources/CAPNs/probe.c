/*
 * probe.c - one request to an APNs host for a set-up check, made with libcurl's
 * easy interface so that each step's failure is told apart: the proxy (CONNECT
 * refused, or not reachable), TCP, TLS, HTTP. While the answer's headers arrive
 * the TLS session is alive: the verified chain is read then, root included (the
 * server sends only its leaf and intermediates; the root is the trust store's).
 *
 * Invariants: peer and host verification always on; the JWT only in the header
 * it is sent in, never in an error text.
 */
#include "capns.h"
#include "identity_internal.h"
#include "sender_internal.h"

#include "curl_api.h"
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    CURL *easy;
    capns_probe_result *out;
    const capns_probe_config *cfg;
    bool chain_read;
    char body[512];
    size_t body_len;
} probe_state;

/* Whether cert is one of the PEM file's certificates. */
static int in_file(X509 *cert, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int found = 0;
    X509 *x;
    while (!found && (x = PEM_read_X509(f, NULL, NULL, NULL))) {
        found = X509_cmp(cert, x) == 0;
        X509_free(x);
    }
    fclose(f);
    ERR_clear_error();      /* the end of the file reads as an error */
    return found;
}

static void read_chain(probe_state *st)
{
    st->chain_read = true;
    const struct curl_tlssessioninfo *info = NULL;
    if (curl_easy_getinfo(st->easy, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || !info ||
        info->backend != CURLSSLBACKEND_OPENSSL || !info->internals)
        return;
    STACK_OF(X509) *chain = SSL_get0_verified_chain((SSL *)info->internals);
    int n = chain ? sk_X509_num(chain) : 0;
    for (int i = 0; i < n && st->out->chain_len < CAPNS_PROBE_CHAIN_MAX; i++) {
        char *line = st->out->chain[st->out->chain_len++];
        X509_NAME_oneline(X509_get_subject_name(sk_X509_value(chain, i)), line, sizeof st->out->chain[0]);
    }
    if (n > 0 && st->cfg->ca_file)
        st->out->root_from_ca_file = in_file(sk_X509_value(chain, n - 1), st->cfg->ca_file);
}

static size_t on_header(char *line, size_t size, size_t n, void *data)
{
    probe_state *st = data;
    size_t len = size * n;
    if (!st->chain_read)
        read_chain(st);
    capns__take_header(line, len, "date", st->out->date, sizeof st->out->date);
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *data)
{
    probe_state *st = data;
    size_t len = size * n, room = sizeof st->body - 1 - st->body_len;
    memcpy(st->body + st->body_len, p, len < room ? len : room);
    st->body_len += len < room ? len : room;
    return len;
}

static CURLcode on_ssl_ctx(CURL *easy, void *ssl_ctx, void *data)
{
    const capns_probe_config *cfg = data;
    char err[CAPNS_ERR_MAX];
    return capns__identity_apply(cfg->identity, ssl_ctx, err, sizeof err) == 0 ? CURLE_OK : CURLE_SSL_CERTPROBLEM;
}

/* The body's "reason" value: APNs error bodies are {"reason":"..."} (plus a timestamp). */
static void take_reason(const char *body, char *out, size_t outlen)
{
    const char *k = strstr(body, "\"reason\"");
    if (!k || !(k = strchr(k + 8, '"')))
        return;
    const char *end = strchr(++k, '"');
    if (!end)
        return;
    size_t n = (size_t)(end - k) < outlen - 1 ? (size_t)(end - k) : outlen - 1;
    memcpy(out, k, n);
    out[n] = '\0';
}

static capns_probe_stage stage_of(CURLcode rc, bool proxied, long connect_code)
{
    if (proxied && (connect_code >= 300 || rc == CURLE_COULDNT_RESOLVE_PROXY))
        return CAPNS_PROBE_PROXY;
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        return proxied && connect_code == 0 ? CAPNS_PROBE_PROXY : CAPNS_PROBE_CONNECT;
    case CURLE_COULDNT_RESOLVE_HOST:
        return CAPNS_PROBE_CONNECT;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
        return CAPNS_PROBE_TLS;
    default:
        return CAPNS_PROBE_HTTP;
    }
}

int capns_probe(const capns_probe_config *cfg, capns_probe_result *out)
{
    memset(out, 0, sizeof *out);
    probe_state st = {.out = out, .cfg = cfg};
    char *ca_blob = NULL;
    size_t ca_len = 0;
    struct curl_slist *h = NULL;
    char url[400], line[CAPNS_JWT_MAX + 32], errbuf[CURL_ERROR_SIZE] = "";
    bool proxied = cfg->proxy_host && *cfg->proxy_host;

    if (!capns__curl_load(out->error, sizeof out->error)) {
        out->failed_at = CAPNS_PROBE_HTTP;
        return out->failed_at;
    }
    if (cfg->ca_file && !capns__curl_ca_blob(cfg->ca_file, &ca_blob, &ca_len, out->error, sizeof out->error)) {
        out->failed_at = CAPNS_PROBE_TLS;
        return out->failed_at;
    }
    if (!(st.easy = curl_easy_init())) {
        free(ca_blob);
        snprintf(out->error, sizeof out->error, "out of memory");
        out->failed_at = CAPNS_PROBE_HTTP;
        return out->failed_at;
    }
    CURL *e = st.easy;
    bool v6 = strchr(cfg->host, ':') != NULL;
    snprintf(url, sizeof url, "https://%s%s%s:%u%s", v6 ? "[" : "", cfg->host, v6 ? "]" : "", (unsigned)cfg->port,
             cfg->path);
    curl_easy_setopt(e, CURLOPT_URL, url);
    capns__curl_apns_defaults(e);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000));
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    if (ca_blob) {
        struct curl_blob blob = {ca_blob, ca_len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (cfg->identity) {
        curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
        curl_easy_setopt(e, CURLOPT_SSL_CTX_DATA, cfg);
    }
    if (proxied) {
        char proxy[300];
        bool pv6 = strchr(cfg->proxy_host, ':') != NULL;
        snprintf(proxy, sizeof proxy, "http://%s%s%s:%u", pv6 ? "[" : "", cfg->proxy_host, pv6 ? "]" : "",
                 (unsigned)cfg->proxy_port);
        curl_easy_setopt(e, CURLOPT_PROXY, proxy);
        curl_easy_setopt(e, CURLOPT_HTTPPROXYTUNNEL, 1L);
        if (cfg->proxy_username) {
            curl_easy_setopt(e, CURLOPT_PROXYUSERNAME, cfg->proxy_username);
            curl_easy_setopt(e, CURLOPT_PROXYPASSWORD, cfg->proxy_password ? cfg->proxy_password : "");
        }
    } else {
        curl_easy_setopt(e, CURLOPT_PROXY, "");     /* the caller decided: no proxy from the environment */
    }
    if (cfg->jwt) {
        snprintf(line, sizeof line, "authorization: bearer %s", cfg->jwt);
        h = curl_slist_append(h, line);
    }
    if (cfg->topic) {
        snprintf(line, sizeof line, "apns-topic: %s", cfg->topic);
        h = curl_slist_append(h, line);
    }
    if (cfg->push_type) {
        snprintf(line, sizeof line, "apns-push-type: %s", cfg->push_type);
        h = curl_slist_append(h, line);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, cfg->body ? cfg->body : "");
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);   /* the proxy's answer is not APNs' */
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &st);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &st);

    CURLcode rc = curl_easy_perform(e);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(e, CURLINFO_HTTP_CONNECTCODE, &out->proxy_status);
    if (rc == CURLE_OK) {
        out->failed_at = CAPNS_PROBE_ANSWERED;
        out->status = (int32_t)status;
        st.body[st.body_len] = '\0';
        take_reason(st.body, out->reason, sizeof out->reason);
    } else {
        out->failed_at = stage_of(rc, proxied, out->proxy_status);
        snprintf(out->error, sizeof out->error, "%s", *errbuf ? errbuf : curl_easy_strerror(rc));
    }
    curl_easy_cleanup(e);
    curl_slist_free_all(h);
    free(ca_blob);
    return out->failed_at;
}
