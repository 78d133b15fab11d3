/*
 * proxy_tunnel.c - an HTTP CONNECT tunnel through a forward proxy (RFC 9110 §9.3.6),
 * on a non-blocking socket already connected to the proxy, before TLS starts.
 *
 * The exchange: we write "CONNECT host:port HTTP/1.1" with Host (and, with
 * credentials, Proxy-Authorization: Basic), the proxy answers with a status line
 * and headers. A 2xx means every byte after the answer's header block is the
 * tunnel: from there the socket carries the TLS session with the APNs host, end to
 * end, verified against the APNs host's name (the proxy never sees inside). Any
 * other status is a refusal; RFC 9110 has no retry here, the caller fails the
 * connection with our one line.
 *
 * Invariants:
 *  - no byte after the answer's header block is ever read here: the answer is
 *    looked at with MSG_PEEK and only the bytes up to and including the blank line
 *    are taken off the socket, so whatever the proxy relays after a 2xx (the
 *    server's first TLS bytes, were they ever early) stays in the socket for
 *    OpenSSL. Everything before the blank line is consumed on each call, so an
 *    edge-triggered epoll sees the next arrival as a new event;
 *  - the answer is bounded (PROXY_ANSWER_MAX) and the caller's connect deadline
 *    covers the whole exchange: a proxy that talks forever or says nothing fails
 *    the connection, it never hangs it;
 *  - the credentials live only in the spec's rendered request, never in an error.
 */
#include "proxy_tunnel.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct proxy_tunnel {
    const proxy_spec *spec;
    size_t sent;                        /* bytes of spec->request written */
    size_t got;                         /* bytes of the answer taken off the socket */
    char answer[PROXY_ANSWER_MAX + 1];
};

/* ------------------------------------------------------------------ spec */

bool proxy_configured(const capns_sender_config *cfg)
{
    return cfg->proxy_host && *cfg->proxy_host;
}

static bool has_control(const char *s)
{
    return s && !capns_header_value_ok(s);
}

/* "host:port", brackets around an IPv6 literal: what CONNECT and Host name. */
static void host_port(char *out, size_t outlen, const char *host, uint16_t port)
{
    const char *l = strchr(host, ':') ? "[" : "", *r = *l ? "]" : "";
    snprintf(out, outlen, "%s%s%s:%u", l, host, r, (unsigned)port);
}

/* Basic credentials (RFC 7617): base64 of "user:password". */
static char *basic_credentials(const char *user, const char *password)
{
    size_t plain_len = strlen(user) + 1 + strlen(password);
    char *plain = malloc(plain_len + 1);
    char *encoded = malloc(4 * ((plain_len + 2) / 3) + 1);
    if (plain && encoded) {
        snprintf(plain, plain_len + 1, "%s:%s", user, password);
        EVP_EncodeBlock((unsigned char *)encoded, (const unsigned char *)plain, (int)plain_len);
    } else {
        free(encoded);
        encoded = NULL;
    }
    if (plain)
        OPENSSL_cleanse(plain, plain_len);
    free(plain);
    return encoded;
}

static char *render_request(const capns_sender_config *cfg, const char *user, const char *password)
{
    char target[320];
    host_port(target, sizeof target, cfg->host, cfg->port);
    char *credentials = user ? basic_credentials(user, password) : NULL;
    if (user && !credentials)
        return NULL;
    const char *fmt = credentials ? "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n"
                                  : "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n";
    const char *third = credentials ? credentials : "";
    int len = snprintf(NULL, 0, fmt, target, target, third);
    char *request = len > 0 ? malloc((size_t)len + 1) : NULL;
    if (request)
        snprintf(request, (size_t)len + 1, fmt, target, target, third);
    if (credentials) {
        OPENSSL_cleanse(credentials, strlen(credentials));
        free(credentials);
    }
    return request;
}

proxy_spec *proxy_spec_new(const capns_sender_config *cfg, char *err, size_t errlen)
{
    const char *user = cfg->proxy_username, *password = cfg->proxy_password ? cfg->proxy_password : "";
    if (!cfg->proxy_port) {
        snprintf(err, errlen, "proxy %s: no port", cfg->proxy_host);
        return NULL;
    }
    if (has_control(cfg->proxy_host) || has_control(user) || has_control(password)) {
        snprintf(err, errlen, "proxy: a control character in its host, user name or password");
        return NULL;
    }
    if (user && strchr(user, ':')) {
        snprintf(err, errlen, "proxy: the user name has a ':', which Basic credentials cannot carry");
        return NULL;
    }
    proxy_spec *spec = calloc(1, sizeof *spec);
    if (!spec) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    spec->host = strdup(cfg->proxy_host);
    spec->port = cfg->proxy_port;
    host_port(spec->label, sizeof spec->label, cfg->proxy_host, cfg->proxy_port);
    if (user) {
        spec->username = strdup(user);
        spec->password = strdup(password);
    }
    spec->request = render_request(cfg, user, password);
    if (!spec->host || !spec->request || (user && (!spec->username || !spec->password))) {
        proxy_spec_free(spec);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    spec->request_len = strlen(spec->request);
    return spec;
}

static void wipe_free(char *s)
{
    if (s)
        OPENSSL_cleanse(s, strlen(s));
    free(s);
}

void proxy_spec_free(proxy_spec *spec)
{
    if (!spec)
        return;
    free(spec->host);
    wipe_free(spec->username);
    wipe_free(spec->password);
    wipe_free(spec->request);
    free(spec);
}

void proxy_refused(char *out, size_t outlen, const proxy_spec *spec, int status, const char *reason)
{
    snprintf(out, outlen, "proxy %s refused CONNECT: %d%s%s", spec->label, status,
             reason && *reason ? " " : "", reason ? reason : "");
}

/* ---------------------------------------------------------------- tunnel */

proxy_tunnel *proxy_tunnel_new(const proxy_spec *spec)
{
    proxy_tunnel *pt = calloc(1, sizeof *pt);
    if (pt)
        pt->spec = spec;
    return pt;
}

void proxy_tunnel_free(proxy_tunnel *pt)
{
    free(pt);
}

/* Where the header block ends in a[0..len): just past its blank line (CRLF CRLF,
 * or bare LFs, which RFC 9112 lets a recipient accept), or 0 when it has not
 * arrived yet. Scanning starts a little before `from`: the blank line may straddle
 * two reads. */
static size_t header_end(const char *a, size_t from, size_t len)
{
    for (size_t i = from > 2 ? from - 2 : 0; i + 1 < len; i++) {
        if (a[i] != '\n')
            continue;
        if (a[i + 1] == '\n')
            return i + 2;
        if (a[i + 1] == '\r' && i + 2 < len && a[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* The status line "HTTP/1.x SSS reason": 1 for 2xx, else -1 with the refusal in err.
 * The reason phrase is the proxy's own text, kept to printable ASCII. */
static int judge(proxy_tunnel *pt, char *err, size_t errlen)
{
    const char *a = pt->answer;
    if (strncmp(a, "HTTP/1.", 7) != 0 || a[8] != ' ' || a[9] < '1' || a[9] > '5' ||
        a[10] < '0' || a[10] > '9' || a[11] < '0' || a[11] > '9' || (a[12] != ' ' && a[12] != '\r' && a[12] != '\n')) {
        snprintf(err, errlen, "proxy %s answered CONNECT with something that is not an HTTP/1 status line",
                 pt->spec->label);
        return -1;
    }
    int status = (a[9] - '0') * 100 + (a[10] - '0') * 10 + (a[11] - '0');
    if (status >= 200 && status < 300)
        return 1;
    char reason[72];
    size_t n = 0;
    for (const char *p = a[12] == ' ' ? a + 13 : a + 12; *p && *p != '\r' && *p != '\n' && n + 1 < sizeof reason; p++)
        reason[n++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
    reason[n] = '\0';
    proxy_refused(err, errlen, pt->spec, status, reason);
    return -1;
}

int proxy_tunnel_step(proxy_tunnel *pt, int fd, char *err, size_t errlen)
{
    const proxy_spec *spec = pt->spec;
    while (pt->sent < spec->request_len) {
        ssize_t n = send(fd, spec->request + pt->sent, spec->request_len - pt->sent, MSG_NOSIGNAL);
        if (n > 0) {
            pt->sent += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            snprintf(err, errlen, "proxy %s: sending CONNECT: %s", spec->label, strerror(errno));
            return -1;
        }
    }
    for (;;) {
        size_t room = PROXY_ANSWER_MAX - pt->got;
        if (room == 0) {
            snprintf(err, errlen, "proxy %s: its answer to CONNECT has no end within %d bytes", spec->label,
                     PROXY_ANSWER_MAX);
            return -1;
        }
        /* Look first, take second: only the header block leaves the socket. */
        ssize_t n = recv(fd, pt->answer + pt->got, room, MSG_PEEK);
        if (n == 0) {
            snprintf(err, errlen, "proxy %s closed the connection %s", spec->label,
                     pt->got ? "in the middle of its answer to CONNECT" : "without answering CONNECT");
            return -1;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            snprintf(err, errlen, "proxy %s: reading its answer to CONNECT: %s", spec->label, strerror(errno));
            return -1;
        }
        size_t seen = pt->got + (size_t)n, end = header_end(pt->answer, pt->got, seen);
        size_t take = (end ? end : seen) - pt->got;
        /* The bytes are in the socket (peeked, and this thread alone reads it): this
         * takes exactly them, into the place the peek already copied them to. */
        ssize_t r;
        do {
            r = recv(fd, pt->answer + pt->got, take, 0);
        } while (r < 0 && errno == EINTR);
        if (r != (ssize_t)take) {
            snprintf(err, errlen, "proxy %s: reading its answer to CONNECT: %s", spec->label,
                     r < 0 ? strerror(errno) : "short read");
            return -1;
        }
        pt->got += take;
        pt->answer[pt->got] = '\0';
        if (end)
            return judge(pt, err, errlen);
    }
}
